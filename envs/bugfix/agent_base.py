"""The base of BugFix's scripted agents (``envs/bugfix/agents.py`` lists them): ``Agent`` (the
``envs.episode.ScriptedAgent`` protocol with its own seeded generator), ``PlanAgent`` (plays a
list of actions, retries a cancelled call) and the readers of BugFix's tool outputs they share."""

from __future__ import annotations

from envs.episode import ScriptedAgent
from envs.tools import TIMEOUT_TEXT

_AGENT_SEED_SALT = 0x5EED  # keeps an agent's stream apart from the env's stream of the same seed


def _strip_turns_left(observation: str) -> str:
    """The observation without its trailing ``turns left : N`` line (time_limit=termination)."""
    head, _, last = observation.rstrip("\n").rpartition("\n")
    return head if last.startswith("turns left : ") else observation


def last_line(observation: str) -> str:
    """The last line of an observation: the latest tool output's last line, also when a
    compression wrapper returned the whole new context (a ``turns left`` line is skipped)."""
    return _strip_turns_left(observation).rstrip("\n").rsplit("\n", 1)[-1]


def hint_line(observation: str) -> int | None:
    """The line number of the latest ``hint : line N`` in ``observation``."""
    for row in reversed(observation.split("\n")):
        words = row.split()
        if len(words) == 4 and words[:3] == ["hint", ":", "line"] and words[3].isdigit():
            return int(words[3])
    return None


def timed_out(observation: str) -> bool:
    return last_line(observation) == TIMEOUT_TEXT


def latest_test_counts(observation: str) -> tuple[int, int] | None:
    """(passed, failed) of the latest run_tests output in ``observation`` (``skipped`` counts as
    (0, 0)); None if there is none."""
    for row in reversed(observation.split("\n")):
        if row == "tests : skipped":
            return 0, 0
        words = row.split()
        if len(words) == 6 and words[:2] == ["tests", ":"] and words[3] == "passed" and words[5] == "failed":
            return int(words[2]), int(words[4])
    return None


class Agent(ScriptedAgent):
    """Base of the BugFix agents (``envs.episode.ScriptedAgent``): ``reset`` binds the env and
    seeds the agent's generator."""

    name = "agent"
    SEED_SALT = _AGENT_SEED_SALT


class PlanAgent(Agent):
    """Plays a list of actions; a cancelled (timed-out) call is retried. Subclasses build the plan
    in ``plan(observation)`` (called on the reset observation) and may extend it in ``react``."""

    def reset(self, env, seed: int | None = None) -> None:
        super().reset(env, seed)
        self.queue: list[str] = []
        self.last: str | None = None
        self.started = False

    def plan(self, observation: str) -> list[str]:
        raise NotImplementedError

    def react(self, action: str, observation: str) -> None:
        """Called with the previous action and its (non-timeout) observation."""

    def act(self, observation: str, info: dict) -> str:
        if not self.started:
            self.started = True
            self.queue = self.plan(observation)
        elif self.last is not None:
            if timed_out(observation):
                return self.last
            self.react(self.last, observation)
        self.last = self.queue.pop(0) if self.queue else "submit"
        return self.last


def numbered_lines(observation: str) -> list[str]:
    """Statements of a ``view main``/``view ref`` output (``N statement`` per line)."""
    out = []
    for row in observation.split("\n"):
        words = row.split()
        if len(words) >= 2 and words[0].isdigit():
            out.append(" ".join(words[1:]))
    return out


def visible_tests(observation: str) -> list[tuple[int, int]]:
    """``(x, expected)`` of each visible test in a ``view tests`` output (``N : x = X -> Y`` rows)."""
    out = []
    for row in observation.split("\n"):
        words = row.split()
        if len(words) == 7 and words[1] == ":" and words[5] == "->":
            out.append((int(words[4]), int(words[6])))
    return out


def numbered(observation: str) -> list[str]:
    """The statements of a ``view main`` output, in order."""
    return numbered_lines(_strip_turns_left(observation))
