"""Scripted PairFix agents and the one two-agent episode loop.

Protocol (as ``envs.episode``): ``agent.reset(env, name, seed)`` after ``env.reset``, then
``agent.act(observation) -> str`` at each of its turns. ``run_pair_episode`` plays one episode
with one agent object per env agent and records every turn.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from envs.pairfix.env import PairFixEnv
from envs.pairfix.tasks import AGENTS

_RANDOM_WORDS = ("ls", "view", "main", "tests", "edit", "1", "2", "+", "-", "run_tests", "submit", "send",
                 "fixed", "wait", "x", "=", "return", "undo", "delete", "3", "mine", "give_up")


class PairOracle:
    """Knows whether its own file has a bug and its fix (``PairTask.oracle_actions``), never the
    other's file. With a bug: ``run_tests`` (the hint names its line), ``view main``, the fixes,
    ``send fixed``; without: ``run_tests``, ``send bug yours``. Then it runs the tests until they
    report ``0 failed`` and submits; after ``patience`` test runs that still fail it submits
    anyway (a terminated failure). A timed-out action is retried.

    ``mistake_rate`` (noisy demonstrations): each fix is, with that probability, replaced by a
    wrong edit of the same line (``edit LINE OLD WRONG``: the bug stays, the episode usually
    fails), and each message by ``send wait``."""

    def __init__(self, mistake_rate: float = 0.0, patience: int = 3) -> None:
        if not 0.0 <= mistake_rate <= 1.0:
            raise ValueError(f"mistake_rate={mistake_rate!r} invalid; allowed: a probability in [0, 1]")
        self.mistake_rate = mistake_rate
        self.patience = patience

    def reset(self, env: PairFixEnv, name: str, seed: int | None = None) -> None:
        rng = np.random.default_rng([seed or 0, AGENTS.index(name), 17])
        fixes = list(env.task.oracle_actions(name))
        plan = ["run_tests", "view main", *fixes, "send fixed"] if fixes else ["run_tests", "send bug yours"]
        for k, action in enumerate(plan):
            if rng.random() < self.mistake_rate:
                words = action.split(" ")
                if words[0] == "edit":
                    plan[k] = " ".join(words[:3] + ["0" if words[3] != "0" else "1"])
                elif words[0] == "send":
                    plan[k] = "send wait"
        self._plan = plan
        self._last = ""
        self._failed_runs = 0

    def act(self, observation: str) -> str:
        first = observation.split("\n")[0]
        if "timed out" in first and self._last and self._last != "run_tests":
            return self._last  # the call was cancelled: nothing changed, try again
        if self._plan:
            self._last = self._plan.pop(0)
        elif first.startswith("tests :") and " 0 failed" in first:
            self._last = "submit"
        else:
            if first.startswith("tests :"):
                self._failed_runs += 1
            self._last = "submit" if self._failed_runs >= self.patience else "run_tests"
        return self._last


class RandomPairAgent:
    """Random word strings (often malformed): for fuzzing."""

    def reset(self, env: PairFixEnv, name: str, seed: int | None = None) -> None:
        self._rng = np.random.default_rng([seed or 0, AGENTS.index(name)])

    def act(self, observation: str) -> str:
        n = int(self._rng.integers(1, 5))
        return " ".join(str(self._rng.choice(_RANDOM_WORDS)) for _ in range(n))


@dataclass
class PairEpisode:
    """One played episode: per turn ``(agent, observation it acted on, action)``; the final infos."""

    turns: list[tuple[str, str, str]] = field(default_factory=list)
    rewards: dict = field(default_factory=lambda: dict.fromkeys(AGENTS, 0.0))
    final_infos: dict = field(default_factory=dict)
    terminated: bool = False
    truncated: bool = False


def run_pair_episode(env: PairFixEnv, agents: dict, seed: int | None = None, options: dict | None = None,
                     max_steps: int = 10_000) -> PairEpisode:
    """Reset ``env``, reset ``agents[name]`` for each agent, play turns until the joint end."""
    env.reset(seed=seed, options=options)
    for name in AGENTS:
        agents[name].reset(env, name, seed)
    ep = PairEpisode()
    for _ in range(max_steps):
        name = env.agent_selection
        obs = env.observe(name)
        action = agents[name].act(obs)
        env.step(action)
        ep.turns.append((name, obs, action))
        for a in AGENTS:
            ep.rewards[a] += env.rewards[a]
        if env.terminations[name] or env.truncations[name]:  # the joint end
            ep.final_infos = dict(env.infos)
            ep.terminated = env.terminations[name]
            ep.truncated = env.truncations[name]
            return ep
    raise RuntimeError(f"episode did not end within {max_steps} steps")


__all__ = ["PairEpisode", "PairOracle", "RandomPairAgent", "run_pair_episode"]
