"""The one scripted episode loop every agent runs through (tests, calibration, demos, benchmarks).

Agents follow one protocol: ``agent.reset(env, seed)`` right after ``env.reset``, then
``agent.act(observation, info) -> str`` once per turn. ``run_episode`` plays one episode and keeps
everything (every observation, action, reward and info), so callers that need per-step infos
(compression boundaries for the warm start's layout) and callers that need a summary read the
same record.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


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
