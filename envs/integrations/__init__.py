"""Adapters of the harness's envs to outside RL frameworks, one module per framework.

- ``envs.integrations.trl``: BugFix-v2 and LongHorizon-v3 as TRL
  ``GRPOTrainer(environment_factory=...)`` environments (one typed, documented method per tool;
  ``get_reward``); extra ``trl``.
- ``envs.integrations.skyrl``: BugFix-v2 and LongHorizon-v3 as skyrl-gym ``BaseTextEnv`` envs
  registered with ``skyrl_gym.register``; extra ``skyrl``.
- PairFix needs no adapter: ``envs.pairfix.PairFixEnv`` is a ``pettingzoo.AECEnv`` itself.

This package imports no framework (``import envs.integrations`` works without the extras); each
adapter module imports its framework when it is imported. What both adapters share lives here:
``TextEpisode`` drives one single-agent text env one action at a time, and ``episode_args``
turns a dataset row's ``split`` / ``task_index`` / ``seed`` into the reset arguments, so every
member of a group (rows with the same values) plays the same task instance with the same tool
stream.
"""

from __future__ import annotations

from typing import Any

import envs
from envs.stop import rule_for
from envs.task_options import SPLITS

# The single-agent envs the adapters serve (``agentrl/LongHorizon-v1`` is registered for its
# claims only and has no adapter).
ADAPTED_ENV_IDS = (envs.BUGFIX_ID, envs.LONG_HORIZON_V3_ID)
# The rollout ended (the framework stopped it: the model stopped calling tools, or a token or
# tool-call budget of the framework ran out) before the env ended the episode. Not an
# ``envs.stop.StopReason``: the env never saw an end. Scored 0, never verified.
NOT_ENDED = "not_ended"
ROW_KEYS = ("split", "task_index", "seed")


def episode_args(split: Any = "train", task_index: Any = None, seed: Any = None) -> tuple[int, dict]:
    """``(seed, options)`` of a reset from a dataset row's values. ``task_index`` is required (the
    members of a group must share the task instance); ``seed`` defaults to ``task_index`` (it drives
    the tool latencies and faults). ``ValueError`` naming a bad value and what is allowed."""
    if task_index is None:
        raise ValueError("task_index missing from the row; allowed: an int >= 0 (with split and an optional seed)")
    if isinstance(task_index, bool) or not isinstance(task_index, int) or task_index < 0:
        raise ValueError(f"task_index={task_index!r} invalid; allowed: an int >= 0")
    if split not in SPLITS:
        raise ValueError(f"split={split!r} unknown; allowed: {', '.join(SPLITS)}")
    if seed is None:
        seed = task_index
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed={seed!r} invalid; allowed: an int >= 0 or None")
    return int(seed), {"split": split, "task_index": int(task_index)}


class TextEpisode:
    """One episode of ``agentrl/BugFix-v2`` or ``agentrl/LongHorizon-v3`` driven one text action at
    a time, with the end-of-episode record the adapters report.

    ``reset(seed, options) -> observation``; ``act(action) -> (observation, reward)``: one env
    step, or, once the episode has ended, a message naming the stop reason (the env is not
    stepped again). ``train_reward`` is the summed training reward, ``info`` the last env info,
    ``ended`` / ``terminated`` / ``truncated`` / ``stop_reason`` / ``verified`` / ``masked``
    the episode end (``stop_reason`` is ``NOT_ENDED`` and ``verified`` 0 while it runs).

    ``env_kwargs`` go to the env's constructor (``envs.make``); context compression is refused: a
    framework that keeps one chat per rollout cannot start the new segment it needs.
    """

    def __init__(self, env_id: str, **env_kwargs) -> None:
        if env_id not in ADAPTED_ENV_IDS:
            raise ValueError(f"env id {env_id!r} has no text adapter; allowed: {', '.join(ADAPTED_ENV_IDS)}")
        if "compression" in env_kwargs:
            raise ValueError(f"compression={env_kwargs['compression']!r} unsupported by the framework adapters; "
                             "allowed: leave it out (one append-only chat per rollout)")
        self.env_id = env_id
        self.env = envs.make(env_id, **env_kwargs)
        self.info: dict = {}
        self.observation = ""
        self.ended = True
        self.terminated = self.truncated = False
        self.train_reward = 0.0
        self.turns = 0

    def reset(self, seed: int, options: dict) -> str:
        self.observation, self.info = self.env.reset(seed=seed, options=options)
        self.ended = self.terminated = self.truncated = False
        self.train_reward = 0.0
        self.turns = 0
        return self.observation

    def act(self, action: str) -> tuple[str, float]:
        if self.ended:
            return f"episode ended : {self.stop_reason} . no further actions", 0.0
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.turns += 1
        self.observation, self.info = obs, info
        self.train_reward += float(reward)
        if terminated or truncated:
            self.ended, self.terminated, self.truncated = True, bool(terminated), bool(truncated)
        return obs, float(reward)

    @property
    def stop_reason(self) -> str:
        return self.info["stop_reason"] if self.ended else NOT_ENDED

    @property
    def masked(self) -> bool:
        return self.ended and rule_for(self.stop_reason).masked

    @property
    def verified(self) -> int | None:
        """The evaluation verifier's 0/1 (None for a masked episode; 0 before the end)."""
        return self.info["verified"] if self.ended else 0

    def report(self) -> dict[str, Any]:
        """The end-of-episode record: ``stop_reason, verified, masked, train_reward, terminated,
        truncated, turns, task_id, split, state_key``."""
        return {"stop_reason": self.stop_reason, "verified": self.verified, "masked": self.masked,
                "train_reward": self.train_reward, "terminated": self.terminated, "truncated": self.truncated,
                "turns": self.turns, "task_id": self.info.get("task_id"), "split": self.info.get("split"),
                "state_key": self.info.get("state_key")}

    def close(self) -> None:
        self.env.close()


__all__ = ["ADAPTED_ENV_IDS", "NOT_ENDED", "ROW_KEYS", "TextEpisode", "episode_args"]
