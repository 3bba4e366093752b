"""The scripted-agent protocol and the one episode loop every agent runs through (tests,
calibration, demos, benchmarks).

Agents follow one protocol: ``agent.reset(env, seed)`` right after ``env.reset``, then
``agent.act(observation, info) -> str`` once per turn. ``ScriptedAgent`` is the base every env's
scripted agents share (it binds ``env.unwrapped`` and seeds the agent's own generator),
``RandomActionAgent`` the frame of the random floor agents, ``build_agent`` the registry lookup
behind each env's ``make_agent``. ``run_episode`` plays one episode and keeps everything (every
observation, action, reward and info), so callers that need per-step infos (compression
boundaries for the warm start's layout) and callers that need a summary
(``EpisodeRecord.summary()``) read the same record.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np


def agent_rng(seed: int | None, salt: int) -> np.random.Generator:
    """The generator of an agent reset with ``seed``: seeded by ``[seed, salt]`` (the salt keeps it
    apart from the env's stream of the same seed); fresh entropy when ``seed`` is None."""
    return np.random.default_rng(None if seed is None else [int(seed), salt])


def build_agent(agents: dict[str, Callable[..., Any]], name: str, **kwargs):
    """``agents[name](**kwargs)``; ``ValueError`` lists the valid names."""
    try:
        factory = agents[name]
    except KeyError:
        raise ValueError(f"unknown agent {name!r}; allowed: {', '.join(agents)}") from None
    return factory(**kwargs)


class ScriptedAgent:
    """Base of the scripted agents: ``reset`` binds ``env.unwrapped`` (``self.env``; None when
    ``env`` is None, for agents that read only their observations) and seeds ``self.rng`` with
    ``agent_rng(seed, SEED_SALT)``; subclasses write ``act``."""

    SEED_SALT = 0

    def reset(self, env, seed: int | None = None) -> None:
        self.env = None if env is None else env.unwrapped
        self.rng = agent_rng(seed, self.SEED_SALT)

    def act(self, observation: str, info: dict) -> str:  # pragma: no cover - interface
        raise NotImplementedError


class RandomActionAgent(ScriptedAgent):
    """The random floor's frame: one uniform draw ``u`` per turn picks ``forfeit`` (``u <
    p_forfeit``), a submit (``submit_action``, the next ``p_submit``), a malformed action (the next
    ``p_invalid``: ``compact`` with probability 0.1, else one of ``MALFORMED_ACTIONS``) or a
    well-formed non-terminal action (``valid_action``)."""

    MALFORMED_ACTIONS: tuple[str, ...] = ()

    def __init__(self, p_invalid: float = 0.2, p_submit: float = 0.03, p_forfeit: float = 0.01) -> None:
        self.p_invalid, self.p_submit, self.p_forfeit = p_invalid, p_submit, p_forfeit

    def act(self, observation: str, info: dict) -> str:
        u = self.rng.random()
        if u < self.p_forfeit:
            return "forfeit"
        if u < self.p_forfeit + self.p_submit:
            return self.submit_action()
        if u < self.p_forfeit + self.p_submit + self.p_invalid:
            if self.rng.random() < 0.1:
                return "compact"
            return self.MALFORMED_ACTIONS[int(self.rng.integers(len(self.MALFORMED_ACTIONS)))]
        return self.valid_action()

    def submit_action(self) -> str:  # pragma: no cover - interface
        raise NotImplementedError

    def valid_action(self) -> str:  # pragma: no cover - interface
        raise NotImplementedError


@dataclass
class EpisodeRecord:
    """One played episode. ``observations[0]`` / ``infos[0]`` are the reset's; entry ``t + 1``
    follows ``actions[t]`` (``rewards[t]`` is that step's reward)."""

    observations: list[str]
    actions: list[str]
    rewards: list[float]
    infos: list[dict]
    terminated: bool
    truncated: bool

    @property
    def final_info(self) -> dict:
        return self.infos[-1]

    @property
    def steps(self) -> list[tuple[str, str]]:
        """(observation the agent acted on, action it wrote) per turn."""
        return list(zip(self.observations, self.actions))

    def summary(self) -> dict[str, Any]:
        """The end-of-episode numbers: ``stop_reason, verified, masked, train_reward, turns,
        tool_seconds, hack_flags, visible_pass_rate, hidden_pass_rate, eval_pass_rate, task_id,
        split`` (from the final info; None where an env does not report one), plus ``steps``,
        ``rewards`` and ``final_observation``."""
        info = self.final_info
        return {
            "stop_reason": info["stop_reason"],
            "verified": info["verified"],
            "masked": info["masked"],
            "train_reward": info["train_reward"],
            "turns": info["turn"],
            "tool_seconds": info["tool_seconds"],
            "hack_flags": info["hack_flags"],
            "visible_pass_rate": info.get("visible_pass_rate"),
            "hidden_pass_rate": info.get("hidden_pass_rate"),
            "eval_pass_rate": info.get("eval_pass_rate"),
            "task_id": info["task_id"],
            "split": info["split"],
            "steps": self.steps,
            "rewards": list(self.rewards),
            "final_observation": self.observations[-1],
        }


def run_episode(env, agent, seed: int | None = None, options: dict | None = None,
                max_steps: int = 100_000) -> EpisodeRecord:
    """Reset ``env`` with ``seed`` / ``options``, reset the agent, play until the episode ends.
    ``RuntimeError`` when it has not ended after ``max_steps`` actions."""
    obs, info = env.reset(seed=seed, options=options)
    agent.reset(env, seed)
    record = EpisodeRecord([obs], [], [], [info], False, False)
    for _ in range(max_steps):
        action = agent.act(obs, info)
        obs, reward, terminated, truncated, info = env.step(action)
        record.actions.append(action)
        record.observations.append(obs)
        record.rewards.append(float(reward))
        record.infos.append(info)
        if terminated or truncated:
            record.terminated, record.truncated = bool(terminated), bool(truncated)
            return record
    raise RuntimeError(f"episode did not end within {max_steps} steps")
