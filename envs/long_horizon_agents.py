"""Scripted agents for ``agentrl/LongHorizon-v1`` (tests, calibration, claim C10, BC demos).

The one agent protocol of ``envs.episode`` (``agent.reset(env, seed)`` after ``env.reset``, then
``agent.act(observation, info) -> str`` once per turn; ``envs.episode.run_episode`` plays an
episode). Every action an agent emits is made of vocabulary words (a policy could have produced
it), including the deliberately malformed ones. Registry ``AGENTS`` / ``make_agent(name,
**kwargs)``: ``oracle``, ``noisy_oracle`` (``mistake_rate``), ``random``, ``forgetful`` (tries
approaches at random, not remembering which failed), ``context_reader``. Each agent draws from its
own generator seeded in ``reset`` (``envs.episode.ScriptedAgent``; salted, so it never mirrors the
env's stream of the same seed).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from envs.episode import RandomActionAgent, ScriptedAgent, build_agent
from envs.long_horizon import APPROACH_NAMES, KEY_RANGE, N_LOG_PAGES

# Malformed (but in-vocabulary) actions the random and noisy agents use.
MALFORMED_ACTIONS = (
    "try", "try X", "inspect 0", "inspect 99", "step 3", "submit", "read", "notes", "the key",
    "status status", "try A B", "submit key", "fix the system", "read the notes",
)


_AGENT_SEED_SALT = 0x10C6A


class OracleAgent(ScriptedAgent):
    """Knows the hidden task (privileged): read notes, try the working approach, finish every
    stage, submit the key. ``n_stages + 3`` turns; succeeds on every task."""

    SEED_SALT = _AGENT_SEED_SALT

    def __init__(self, read_notes: bool = True) -> None:
        self.read_notes = read_notes

    def reset(self, env, seed: int | None = None) -> None:
        super().reset(env, seed)
        self.task = self.env.task
        self._notes_done = not self.read_notes
        self._fixed = False

    def intended(self, info: dict) -> str:
        """The oracle's next action given the env's public info (``stages_left``)."""
        if not self._notes_done:
            self._notes_done = True
            return "read notes"
        if not self._fixed:
            self._fixed = True
            return f"try {self.task.correct}"
        if info.get("stages_left", 0) > 0:
            return "step"
        return f"submit {self.task.key}"

    def act(self, observation: str, info: dict) -> str:
        return self.intended(info)


class NoisyOracleAgent(OracleAgent):
    """The oracle, but each decision is replaced by a mistake with probability ``mistake_rate``.

    A mistake at the final decision submits a wrong key (the episode fails); any earlier mistake is
    a non-terminal detour (a wrong approach, an inspect, a status, re-reading the notes, or a
    malformed action) after which the oracle resumes. Success rate is about ``1 - mistake_rate``.
    """

    def __init__(self, mistake_rate: float = 0.1, read_notes: bool = True) -> None:
        super().__init__(read_notes=read_notes)
        if not 0.0 <= mistake_rate <= 1.0:
            raise ValueError(f"mistake_rate must be in [0, 1], got {mistake_rate!r}")
        self.mistake_rate = mistake_rate

    def reset(self, env, seed: int | None = None) -> None:
        super().reset(env, seed)
        self.approaches = self.env.approaches

    def act(self, observation: str, info: dict) -> str:
        if self.rng.random() >= self.mistake_rate:
            return self.intended(info)
        will_submit = self._notes_done and self._fixed and info.get("stages_left", 0) == 0
        if will_submit:
            return f"submit {(self.task.key + 1) % (KEY_RANGE[1] + 1)}"
        kind = int(self.rng.integers(5))
        if kind == 0:
            wrong = [a for a in self.approaches if a != self.task.correct]
            return f"try {wrong[int(self.rng.integers(len(wrong)))]}"
        if kind == 1:
            return f"inspect {int(self.rng.integers(1, N_LOG_PAGES + 1))}"
        if kind == 2:
            return "status"
        if kind == 3:
            return "read notes"
        return MALFORMED_ACTIONS[int(self.rng.integers(len(MALFORMED_ACTIONS)))]


class RandomAgent(RandomActionAgent):
    """Samples actions (``envs.episode.RandomActionAgent``): mostly valid non-terminal ones,
    ``p_invalid`` malformed ones (including a ``compact`` request now and then), and rarely
    ``submit`` (a random key) or ``forfeit``."""

    SEED_SALT = _AGENT_SEED_SALT
    MALFORMED_ACTIONS = MALFORMED_ACTIONS

    def reset(self, env, seed: int | None = None) -> None:
        super().reset(env, seed)
        self.approaches = self.env.approaches

    def submit_action(self) -> str:
        return f"submit {int(self.rng.integers(KEY_RANGE[0], KEY_RANGE[1] + 1))}"

    def valid_action(self) -> str:
        kind = int(self.rng.integers(5))
        if kind == 0:
            return "read notes"
        if kind == 1:
            return "status"
        if kind == 2:
            return f"inspect {int(self.rng.integers(1, N_LOG_PAGES + 1))}"
        if kind == 3:
            return "step"
        return f"try {self.approaches[int(self.rng.integers(len(self.approaches)))]}"


class ForgetfulAgent(ScriptedAgent):
    """Reads the notes and remembers the key, but forgets what it tried: each try is an approach
    drawn uniformly at random (failed ones included) until one works; then steps and submits.
    Sits between the random floor and the oracle ceiling (``experiments.calibrate``)."""

    SEED_SALT = _AGENT_SEED_SALT

    def reset(self, env, seed: int | None = None) -> None:
        super().reset(env, seed)
        self.approaches = self.env.approaches
        self.key: int | None = None
        self.fixed = False
        self.read = False

    def act(self, observation: str, info: dict) -> str:
        found = _RE_KEY.findall(observation)
        if found:
            self.key = int(found[-1])
        if _RE_WORKS.search(observation):
            self.fixed = True
        if not self.read:
            self.read = True
            return "read notes"
        if not self.fixed:
            return f"try {self.approaches[int(self.rng.integers(len(self.approaches)))]}"
        if info.get("stages_left", 0) > 0:
            return "step"
        return f"submit {self.key if self.key is not None else 0}"


# What the context-reading agent recognises in its context text.
_RE_KEY = re.compile(r"the key is (-?\d+)")
_RE_PENDING_KEY = re.compile(r"pending :[^\n]*submit (-?\d+)")
_RE_FAILED = re.compile(r"approach ([A-H]) (?:->\s)?fails")
_RE_WORKS = re.compile(r"approach ([A-H]) (?:works|is already applied)")
_RE_FIX = re.compile(r"fix ([A-H])\b")
_RE_LEFT = re.compile(r"(\d+|many|no) stages left")
_RE_APPROACHES = re.compile(r"(?:approaches :|one of) ((?:[A-H] ?)+)")


@dataclass
class ContextKnowledge:
    """What the context-reading agent can read off its current context."""

    approaches: list = field(default_factory=list)
    key: int | None = None
    failed: set = field(default_factory=set)
    fixed: bool = False
    stages_left: int | None = None  # None: unknown; a large number stands for "many"
    notes_archived: bool = False
    stepped: bool = False


def read_context(text: str) -> ContextKnowledge:
    """Parse the facts the agent relies on from ``text`` (latest mention wins)."""
    k = ContextKnowledge()
    found = _RE_APPROACHES.findall(text)
    k.approaches = found[-1].split() if found else list(APPROACH_NAMES)
    keys = _RE_KEY.findall(text) or _RE_PENDING_KEY.findall(text)
    k.key = int(keys[-1]) if keys else None
    k.failed = set(_RE_FAILED.findall(text))
    k.fixed = bool(_RE_WORKS.search(text) or _RE_FIX.search(text) or "tests passing" in text)
    lefts = _RE_LEFT.findall(text)
    if lefts:
        last = lefts[-1]
        k.stages_left = 0 if last == "no" else (10**9 if last == "many" else int(last))
    k.notes_archived = "the notes are archived" in text
    k.stepped = "step done" in text or k.notes_archived
    return k


class ContextReadingAgent(ScriptedAgent):
    """Decides ONLY from the text of its current context, like a policy with a context window.

    The context is the concatenation of the observations received since the last compression: on
    a step whose ``info`` has ``"compression"`` it is rebuilt from the compressed observation alone
    (everything before is forgotten). Rules, in order: read the notes while the key is unknown and
    the context shows no sign of a finished stage; while no approach is known to work, try the
    first approach (in a per-episode random order) that the context does not say failed; if the
    stages left are unknown, ask ``status``; ``step`` while stages are left; then ``submit`` the
    key, or a random guess when the context lost it. It never uses ``info`` beyond detecting a
    compression, and never sends ``compact``.
    """

    SEED_SALT = _AGENT_SEED_SALT

    def reset(self, env, seed: int | None = None) -> None:
        super().reset(env, seed)
        self.order = [APPROACH_NAMES[i] for i in self.rng.permutation(len(APPROACH_NAMES))]
        self.context: list[str] = []

    def act(self, observation: str, info: dict) -> str:
        if "compression" in info:
            self.context = [observation]
        else:
            self.context.append(observation)
        k = read_context("\n".join(self.context))
        if k.key is None and not k.stepped and not k.notes_archived:
            return "read notes"
        if not k.fixed:
            for name in self.order:
                if name in k.approaches and name not in k.failed:
                    return f"try {name}"
            return "status"
        if k.stages_left is None:
            return "status"
        if k.stages_left > 0:
            return "step"
        if k.key is not None:
            return f"submit {k.key}"
        return f"submit {int(self.rng.integers(KEY_RANGE[0], KEY_RANGE[1] + 1))}"


AGENTS = {
    "oracle": OracleAgent,
    "noisy_oracle": NoisyOracleAgent,
    "random": RandomAgent,
    "forgetful": ForgetfulAgent,
    "context_reader": ContextReadingAgent,
}
#: the reference floor (calibration, the report): the agent that reads nothing
FLOOR_AGENTS = ("random",)


def make_agent(name: str, **kwargs):
    """Build a registered LongHorizon agent (``envs.episode.build_agent``); ``ValueError`` lists
    the valid names."""
    return build_agent(AGENTS, name, **kwargs)
