"""Scripted agents for ``agentrl/LongHorizon-v3`` (tests, calibration, behaviour-cloning demos).

The one agent protocol of ``envs.episode`` (``agent.reset(env, seed)`` after ``env.reset``, then
``agent.act(observation, info) -> str`` once per turn; ``envs.episode.run_episode`` plays an
episode); every action is made of vocabulary words. Registry ``AGENTS`` / ``make_agent(name, **kwargs)``:

- ``oracle``: knows the task (privileged); ``n_stages + 2`` turns, solves every task.
- ``noisy_oracle`` (``mistake_rate``): the oracle, except that with probability ``mistake_rate``
  an episode gets one wrong ``fix`` at a stage drawn uniformly from all stages (another approach
  of the table). Its success is ``1 - mistake_rate`` at every ``n_stages``; a per-decision rate
  would give ``(1 - rate) ** n_stages`` and no usable demonstrations at long horizons.
- ``context_reader``: decides only from the text of its own context (reset by a compression).
- ``forgetful`` (``window``): the context reader seeing only its last ``window`` observations,
  so it loses the notes a few turns after reading them and guesses afterwards.
- ``program_blind``: never reads the notes; gives each input a guessed approach (distinct
  approaches for distinct inputs, kept for the episode): the best play without the table.
- ``random``: random actions, some malformed, rarely ``submit`` / ``forfeit``.

Each agent draws from its own generator seeded in ``reset`` (``envs.episode.ScriptedAgent``;
salted, never the env's stream).
"""

from __future__ import annotations

import re

from envs.episode import RandomActionAgent, ScriptedAgent, build_agent
from envs.long_horizon_v3 import FIX_NAMES, INPUTS

MALFORMED_ACTIONS = (
    "fix", "fix X", "fix A B", "read", "notes", "submit A", "status status", "read the notes",
    "fix the stage", "stage",
)
_AGENT_SEED_SALT = 0x10C6B

_RE_RULE = re.compile(r"\b(" + "|".join(INPUTS) + r") ([A-H])\b")
_RE_STAGE = re.compile(r"(?:fails on (\w+) \.|no stages left : submit)")


class OracleAgent(ScriptedAgent):
    """Reads the notes, fixes every stage with its answer, submits (privileged: reads the task)."""

    SEED_SALT = _AGENT_SEED_SALT

    def __init__(self, read_notes: bool = True) -> None:
        self.read_notes = read_notes

    def reset(self, env, seed: int | None = None) -> None:
        super().reset(env, seed)
        self.task = self.env.task
        self._notes_done = not self.read_notes

    def intended(self, info: dict) -> str:
        if not self._notes_done:
            self._notes_done = True
            return "read notes"
        left = info.get("stages_left", 0)
        if left > 0:
            stage = self.env.n_stages - left
            return f"fix {self.task.stages[stage]} {self.task.answer(stage)}"
        return "submit"

    def act(self, observation: str, info: dict) -> str:
        return self.intended(info)


class NoisyOracleAgent(OracleAgent):
    """The oracle with at most one wrong ``fix`` per episode (probability ``mistake_rate``, at a
    uniformly drawn stage, another approach of the table)."""

    def __init__(self, mistake_rate: float = 0.1, read_notes: bool = True) -> None:
        super().__init__(read_notes=read_notes)
        if isinstance(mistake_rate, bool) or not 0.0 <= mistake_rate <= 1.0:
            raise ValueError(f"mistake_rate={mistake_rate!r} out of range; allowed: a number in [0, 1]")
        self.mistake_rate = mistake_rate

    def reset(self, env, seed: int | None = None) -> None:
        super().reset(env, seed)
        n = self.env.n_stages
        self.mistake_stage = int(self.rng.integers(n)) if self.rng.random() < self.mistake_rate else -1
        answers = sorted(set(self.task.table.values()))
        right = self.task.answer(self.mistake_stage) if self.mistake_stage >= 0 else None
        wrong = [a for a in answers if a != right]
        self.wrong = wrong[int(self.rng.integers(len(wrong)))]

    def act(self, observation: str, info: dict) -> str:
        action = self.intended(info)
        left = info.get("stages_left", 0)
        if action.startswith("fix") and self.env.n_stages - left == self.mistake_stage:
            return f"fix {self.task.stages[self.mistake_stage]} {self.wrong}"
        return action


def read_table(text: str) -> dict:
    """The ``input -> approach`` pairs written in ``text`` (a later mention wins)."""
    return {i: a for i, a in _RE_RULE.findall(text)}


def current_input(text: str) -> str | None:
    """The input of the latest stage line in ``text``; ``""`` once no stage is left; None when
    ``text`` shows no stage line."""
    found = list(_RE_STAGE.finditer(text))
    if not found:
        return None
    return found[-1].group(1) or ""


class ContextReadingAgent(ScriptedAgent):
    """Decides only from its own context: the observations since the last compression (a step
    whose ``info`` has ``"compression"`` restarts it from the compressed observation), or only the
    last ``window`` observations when ``window`` is set. Rules: read the notes while no table is in
    the context and no stage is done; ``submit`` once no stage is left; fix the current input with
    the approach the context's table gives, else with a guess (distinct per input, kept)."""

    SEED_SALT = _AGENT_SEED_SALT

    def __init__(self, window: int | None = None) -> None:
        if window is not None and (isinstance(window, bool) or not isinstance(window, int) or window < 1):
            raise ValueError(f"window={window!r} out of range; allowed: None or an int >= 1")
        self.window = window

    def reset(self, env, seed: int | None = None) -> None:
        super().reset(env, seed)
        self.context: list[str] = []
        self.guesses: dict = {}
        self.acted = False

    def _guess(self, name: str) -> str:
        if name not in self.guesses:
            free = [a for a in FIX_NAMES if a not in self.guesses.values()] or list(FIX_NAMES)
            self.guesses[name] = free[int(self.rng.integers(len(free)))]
        return self.guesses[name]

    def act(self, observation: str, info: dict) -> str:
        if "compression" in info:
            self.context = [observation]
        else:
            self.context.append(observation)
        if self.window is not None:
            self.context = self.context[-self.window:]
        text = "\n".join(self.context)
        table = read_table(text)
        name = current_input(text)
        if not table and not self.acted:
            self.acted = True
            return "read notes"
        self.acted = True
        if name is None:
            return "status"
        if name == "":
            return "submit"
        return f"fix {name} {table[name] if name in table else self._guess(name)}"


class ForgetfulAgent(ContextReadingAgent):
    """The context reader with a window of ``window`` observations (default 3): it reads the
    notes, and once they left its window it guesses."""

    def __init__(self, window: int = 3) -> None:
        super().__init__(window=window)


class ProgramBlindAgent(ContextReadingAgent):
    """Never reads the notes: fixes each input with a guessed approach (distinct per input, kept
    for the episode), then submits. Success ``prod_k 1 / (8 - k)`` over the table's inputs."""

    def act(self, observation: str, info: dict) -> str:
        self.acted = True
        name = current_input(observation)
        if name is None:
            return "status"
        if name == "":
            return "submit"
        return f"fix {name} {self._guess(name)}"


class RandomAgent(RandomActionAgent):
    """Samples actions (``envs.episode.RandomActionAgent``): mostly ``fix`` / ``status`` /
    ``read notes``, ``p_invalid`` malformed ones (a ``compact`` request now and then), rarely
    ``submit`` or ``forfeit``."""

    SEED_SALT = _AGENT_SEED_SALT
    MALFORMED_ACTIONS = MALFORMED_ACTIONS

    def submit_action(self) -> str:
        return "submit"

    def valid_action(self) -> str:
        kind = int(self.rng.integers(4))
        if kind == 0:
            return "read notes"
        if kind == 1:
            return "status"
        return f"fix {INPUTS[int(self.rng.integers(len(INPUTS)))]} {FIX_NAMES[int(self.rng.integers(len(FIX_NAMES)))]}"


AGENTS = {
    "oracle": OracleAgent,
    "noisy_oracle": NoisyOracleAgent,
    "context_reader": ContextReadingAgent,
    "forgetful": ForgetfulAgent,
    "program_blind": ProgramBlindAgent,
    "random": RandomAgent,
}
#: the scripted agents that do not read the hidden task (the floors of ``experiments.calibrate``)
FLOOR_AGENTS = ("random", "program_blind", "forgetful")


def make_agent(name: str, **kwargs):
    """Build a registered LongHorizon-v3 agent (``envs.episode.build_agent``); ``ValueError``
    lists the valid names."""
    return build_agent(AGENTS, name, **kwargs)
