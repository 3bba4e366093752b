"""BugFix-v2 and LongHorizon-v3 as skyrl-gym text envs (``pip install 'agent-rl-harness[skyrl]'``).

``import envs.integrations.skyrl`` registers ``agentrl/BugFix-v2`` and ``agentrl/LongHorizon-v3``
with ``skyrl_gym.register`` (the harness's own ids); ``register()`` does it again where needed
(idempotent, e.g. inside the process that runs SkyRL's generator). Then::

    env = skyrl_gym.make("agentrl/BugFix-v2", env_config={"difficulty": "tutorial"},
                         extras={"split": "train", "task_index": 3})
    chat, meta = env.init([{"role": "user", "content": "Fix the bug."}])
    out = env.step("run_tests")   # {"observations", "reward", "done", "metadata"}
    lh = skyrl_gym.make("agentrl/LongHorizon-v3", env_config={"n_stages": 32},
                        extras={"split": "train", "task_index": 3})
    chat, meta = lh.init([{"role": "user", "content": "One action per turn."}])
    out = lh.step("read notes")   # the notes' table and the first stage

See ``AgentRLTextEnv`` and docs/integrations/skyrl.md.
"""

from __future__ import annotations

from typing import Any

import skyrl_gym
from skyrl_gym.envs.base_text_env import BaseTextEnv, BaseTextEnvStepOutput

import envs
from envs.integrations import ROW_KEYS, TextEpisode, episode_args

SKYRL_ENV_IDS = (envs.BUGFIX_ID, envs.LONG_HORIZON_V3_ID)
_ENTRY_POINT = "envs.integrations.skyrl:AgentRLTextEnv"


class AgentRLTextEnv(BaseTextEnv):
    """A harness env (``agentrl/BugFix-v2`` or ``agentrl/LongHorizon-v3``) as a skyrl-gym ``BaseTextEnv``.

    ## Construction
    ``skyrl_gym.make(env_id, env_config=..., extras=...)``. ``env_config`` (a dict or any mapping,
    e.g. SkyRL's OmegaConf node): the env's constructor knobs (BugFix: ``difficulty``, ``faults``,
    ``max_turns``, ...; LongHorizon-v3: ``n_stages``, ``n_rules``, ``verbose``, ``max_turns``,
    ``time_limit``, ...; context compression is refused). ``extras`` (the dataset row's extra
    fields): ``task_index`` (required), ``split`` (default ``train``), ``seed`` (default
    ``task_index``); other fields are ignored. Every rollout of one row plays the same task instance
    with the same tool stream, so the members of a GRPO group start from one state.

    ## Episode
    ``init(prompt)`` resets the env and returns ``(chat, metadata)``: the prompt with the task
    statement appended to its last user message (a new user message when the prompt does not end
    with one), and ``metadata`` the reset's ``task_id``, ``split``, ``state_key``. ``step(action)``
    plays the model's text (surrounding whitespace stripped) as one env action and returns
    ``observations`` (one ``user`` message with the tool output; empty once ``done``), ``reward``
    (the env's training reward of that step), ``done``, ``postprocessed_action`` and
    ``metadata`` (``tool_status``, ``state_key`` and, when ``done``, ``stop_reason``,
    ``verified``, ``masked``, ``terminated``, ``truncated``, ``train_reward``).

    ## Episode end
    ``done = terminated or truncated`` (skyrl-gym has one flag): every ``envs.stop`` reason ends
    the episode with ``done=True``; whether it was a truncation (``max_turns``, ``wall_clock``) or
    masked (``infra_error``: ``verified`` None) is in ``metadata``. The env owns its turn limit
    (``max_turns`` mirrors it); a rollout SkyRL stops first (its token budget) has no stop reason
    from the env. ``get_metrics()``: ``verified``, ``train_reward``, ``hacked`` (reward the
    verifier denies), ``turns``, ``masked`` (numbers SkyRL averages over episodes).
    """

    def __init__(self, env_config: Any = None, extras: dict | None = None, env_id: str = envs.BUGFIX_ID) -> None:
        super().__init__()
        if env_id not in SKYRL_ENV_IDS:
            raise ValueError(f"env_id={env_id!r} unknown; allowed: {', '.join(SKYRL_ENV_IDS)}")
        knobs = dict(env_config or {})
        self._episode = TextEpisode(env_id, **knobs)
        row = dict(extras or {})
        self._seed, self._options = episode_args(**{k: row[k] for k in ROW_KEYS if k in row})
        self.env_id = env_id
        self.max_turns = int(getattr(self._episode.env.unwrapped, "max_turns", 0)
                             or self._episode.env.unwrapped.config.max_turns)

    def init(self, prompt: list[dict]) -> tuple[list[dict], dict]:
        obs = self._episode.reset(self._seed, self._options)
        self.turns = 0
        chat = [dict(m) for m in (prompt or [])]
        if chat and chat[-1].get("role") == "user" and isinstance(chat[-1].get("content"), str):
            chat[-1]["content"] = f"{chat[-1]['content']}\n\n{obs}" if chat[-1]["content"] else obs
        else:
            chat.append({"role": "user", "content": obs})
        info = self._episode.info
        return chat, {"task_id": info["task_id"], "split": info["split"], "state_key": info["state_key"]}

    def step(self, action: str) -> BaseTextEnvStepOutput:
        if not isinstance(action, str):
            raise TypeError(f"actions are text (str), got {type(action).__name__}")
        text = action.strip()
        was_ended = self._episode.ended
        obs, reward = self._episode.act(text)
        self.turns += 0 if was_ended else 1
        done = self._episode.ended
        info = self._episode.info
        metadata = {"tool_status": info.get("tool_status"), "state_key": info.get("state_key")}
        if done:
            report = self._episode.report()
            metadata.update({k: report[k] for k in ("stop_reason", "verified", "masked", "terminated", "truncated",
                                                    "train_reward")})
        return BaseTextEnvStepOutput(observations=[] if done else [{"role": "user", "content": obs}],
                                     reward=reward, done=done, metadata=metadata, postprocessed_action=text)

    def get_metrics(self) -> dict[str, Any]:
        r = self._episode.report()
        verified = r["verified"]
        return {"verified": float(verified or 0), "train_reward": r["train_reward"], "turns": r["turns"],
                "hacked": float(r["train_reward"] > 0 and verified == 0), "masked": float(r["masked"])}

    def close(self) -> None:
        self._episode.close()


def register() -> tuple[str, ...]:
    """Register both envs with ``skyrl_gym.register`` (ids as in the harness); idempotent."""
    for env_id in SKYRL_ENV_IDS:
        if env_id not in skyrl_gym.registry:
            skyrl_gym.register(id=env_id, entry_point=_ENTRY_POINT, kwargs={"env_id": env_id})
    return SKYRL_ENV_IDS


register()

__all__ = ["AgentRLTextEnv", "SKYRL_ENV_IDS", "register"]
