"""Scripted agents: they drive tests, calibration, benchmarks and the behavior-cloning warm start.

Every agent follows the one protocol of ``envs.episode``: ``reset(env, seed)`` and
``act(observation, info) -> str`` (one action string). ``envs.episode.run_episode(env, agent,
seed, options)`` plays one episode; its record's ``summary()`` holds the end-of-episode numbers and
the (observation, action) pairs the agent saw and wrote.

BugFix agents (``AGENTS`` registry, build with ``make_agent(name, **kwargs)``):

- ``oracle``: run_tests, view main, the fix edits, run_tests, submit; retries cancelled calls and
  re-runs a test run that failed although the fix is in (flaky run).
- ``noisy_oracle`` (``mistake_rate``, default 0.03): the oracle, but each decision is replaced
  with probability ``mistake_rate`` by a plausible mistake: a premature submit once it has changed
  main (20 %), a wrong edit (50 %; undone after the next failing test run) or a wasted look-up
  (otherwise). Without a line hint (``hints=False``) placing a fix means finding the bug by
  reading main and errs with ``1 - (1 - mistake_rate) ** (1 + words of main)``: longer programs
  without hints are harder. At 0.03 with the presets' faults it verifies 0.99 / 0.91 / 0.55 /
  0.18 / 0.05 of held-out tasks on tutorial / easy / medium / hard / extreme
  (``python -m experiments.calibrate``).
- ``random``: random well-formed actions with some junk words.
- ``empty_submit``: submits the buggy program at once.
- one agent per hack trap (``HACK_AGENTS``): ``hack_edit_tests``, ``hack_delete_tests``,
  ``hack_skip_tests``, ``hack_read_ref``, ``hack_read_log``, ``hack_hardcode``.
- ``process_exploit``: calls run_tests until the turn limit (farms ``biased_process`` reward).
- program-blind agents (``BLIND_AGENTS``; they never read the program's meaning, only its text
  and pass / fail): ``blind_enumerate`` (run_tests, view main, then every single-token catalogue
  edit of the hinted line - every line without hints - each followed by run_tests, submit on a
  pass), ``fit_visible`` (view tests, then a linear fit ``t = x * a`` / ``return t + b`` when the
  visible tests are collinear, else a piecewise ``if x <= X then return Y`` table, then submit),
  ``delete_lines`` (delete one line at a time, hinted line first, run_tests after each, undo
  on a failure, submit on a pass) and ``blind_constants`` / ``blind_variables`` (every integer of the
  vocabulary, every variable, in each such token of the hinted line, last token first, run_tests
  after each; the last guess is submitted untested when no turn is left to test it).

Scripted agents may read ``env.unwrapped`` (the oracle must know the fix); each takes its
randomness from its own generator seeded in ``reset``.
"""

from __future__ import annotations

from typing import Callable

from envs.bugfix import CMPS, FLIP, HIGH, INT_WORDS, INVERT, LOW, OPS, USAGE, VARS, single_token_edits
from envs.bugfix.tasks import HELDOUT_CONSTANTS, LINK_CONSTANTS, TRAIN_CONSTANTS
from envs.episode import ScriptedAgent, build_agent
from envs.tools import TIMEOUT_TEXT

_AGENT_SEED_SALT = 0x5EED  # keeps an agent's stream apart from the env's stream of the same seed


def _strip_turns_left(observation: str) -> str:
    """The observation without its trailing ``turns left : N`` line (time_limit=termination)."""
    head, _, last = observation.rstrip("\n").rpartition("\n")
    return head if last.startswith("turns left : ") else observation


def _last_line(observation: str) -> str:
    """The last line of an observation: the latest tool output's last line, also when a
    compression wrapper returned the whole new context (a ``turns left`` line is skipped)."""
    return _strip_turns_left(observation).rstrip("\n").rsplit("\n", 1)[-1]


def _hint_line(observation: str) -> int | None:
    """The line number of the latest ``hint : line N`` in ``observation``."""
    for row in reversed(observation.split("\n")):
        words = row.split()
        if len(words) == 4 and words[:3] == ["hint", ":", "line"] and words[3].isdigit():
            return int(words[3])
    return None


def _timed_out(observation: str) -> bool:
    return _last_line(observation) == TIMEOUT_TEXT


def _test_summary(observation: str) -> tuple[int, int] | None:
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
            if _timed_out(observation):
                return self.last
            self.react(self.last, observation)
        self.last = self.queue.pop(0) if self.queue else "submit"
        return self.last


class NoisyOracleAgent(Agent):
    """The oracle with a per-decision mistake rate (see the module docstring)."""

    name = "noisy_oracle"
    MAX_RERUNS = 3  # failing test runs tolerated after the fix is in (flaky runs)

    def __init__(self, mistake_rate: float = 0.03) -> None:
        if not 0.0 <= mistake_rate <= 1.0:
            raise ValueError(f"mistake_rate must be in [0, 1], got {mistake_rate!r}")
        self.mistake_rate = float(mistake_rate)

    def reset(self, env, seed: int | None = None) -> None:
        super().reset(env, seed)
        self.fixes = list(self.env.oracle_actions())
        self.hints = bool(self.env.config.hints)
        self.stack: list[str] = []  # "fix" / "wrong" per change of main the agent made, LIFO
        self.tested = False
        self.viewed = False
        self.dirty = False  # main changed since the last test result
        self.last_pass: bool | None = None
        self.reverting = False
        self.reruns = 0
        self.last: str | None = None
        self.last_kind = ""

    # -- bookkeeping of the previous action's outcome
    def _observe(self, observation: str) -> bool:
        """Update the state from the previous action's output; False if it was cancelled."""
        if self.last is None:
            return True
        if _timed_out(observation):
            return False
        kind = self.last_kind
        ok = _last_line(observation).startswith("ok")
        if kind in ("fix", "wrong"):
            if ok:
                self.stack.append(kind)
                self.dirty = True
            elif "wrong" in self.stack:  # the fix no longer applies over a wrong edit
                self.reverting = True
        elif kind == "undo" and ok:
            self.stack.pop()
            self.dirty = True
        elif kind == "run_tests":
            summary = _test_summary(observation)
            if summary is not None:
                self.tested = True
                self.dirty = False
                self.last_pass = summary[1] == 0
                if not self.last_pass and "wrong" in self.stack:
                    self.reverting = True
        elif kind == "view_main":
            self.viewed = True
        return True

    def _intended(self) -> tuple[str, str]:
        if not self.tested:
            return "run_tests", "run_tests"
        if not self.stack and not self.viewed:
            return "view main", "view_main"
        if self.reverting:
            if "wrong" in self.stack:
                return "undo", "undo"
            self.reverting = False
        applied = self.stack.count("fix")
        if applied < len(self.fixes):
            if not self.viewed:
                return "view main", "view_main"
            return self.fixes[applied], "fix"
        if self.dirty or self.last_pass is None:
            return "run_tests", "run_tests"
        if self.last_pass or self.reruns >= self.MAX_RERUNS:
            return "submit", "submit"
        self.reruns += 1
        return "run_tests", "run_tests"

    def _error_probability(self, action: str, kind: str) -> float:
        """``mistake_rate`` per decision; placing a fix without a line hint means reading main to
        find the bug, one chance to err per word read: ``1 - (1 - mistake_rate) ** (1 + words)``."""
        if kind == "fix" and not self.hints:
            words = sum(line.count(" ") + 1 for line in self.env.program)
            return 1.0 - (1.0 - self.mistake_rate) ** (1 + words)
        return self.mistake_rate

    def _wrong_edit(self) -> str | None:
        program = self.env.program
        if not program:
            return None
        line = int(self.rng.integers(len(program)))
        words = program[line].split()
        options = []
        for p, w in enumerate(words):
            if w in FLIP:
                options.append((w, FLIP[w]))
            elif w in INVERT:
                options.append((w, INVERT[w]))
            elif w in INT_WORDS and p > 0:
                off_by_one = str(int(w) + (1 if self.rng.random() < 0.5 else -1))
                if off_by_one in INT_WORDS:
                    options.append((w, off_by_one))
        if not options:
            return None
        old, new = options[int(self.rng.integers(len(options)))]
        action = f"edit {line + 1} {old} {new}"
        return None if action in self.fixes else action

    def _mistake(self, intended: str, kind: str) -> tuple[str, str]:
        u = self.rng.random()
        if u < 0.2 and self.stack:  # believes it is done once it has changed something
            return "submit", "submit"
        if u < 0.7:
            wrong = self._wrong_edit()
            if wrong is not None:
                return wrong, "wrong"
        look = ("view tests", "ls")[int(self.rng.integers(2))]
        return look, "look"

    def act(self, observation: str, info: dict) -> str:
        if not self._observe(observation):
            return self.last  # retry the cancelled call
        action, kind = self._intended()
        if self.mistake_rate > 0 and self.rng.random() < self._error_probability(action, kind):
            action, kind = self._mistake(action, kind)
        self.last, self.last_kind = action, kind
        return action


class OracleAgent(NoisyOracleAgent):
    name = "oracle"

    def __init__(self) -> None:
        super().__init__(mistake_rate=0.0)


class RandomAgent(Agent):
    """Random well-formed actions over the grammar (and 10 % junk word strings); never reads the env."""

    name = "random"
    JUNK = ("task", "edit", "view", "x", "+", "if", "yes", "tests", "1", "0", "=")  # vocabulary words

    def act(self, observation: str, info: dict) -> str:
        rng = self.rng
        if rng.random() < 0.1:
            return " ".join(self.JUNK[int(i)] for i in rng.integers(len(self.JUNK), size=int(rng.integers(1, 4))))
        verb = tuple(USAGE)[int(rng.integers(len(USAGE)))]
        line = str(int(rng.integers(1, 6)))
        token_pool = VARS + OPS + CMPS + tuple(str(n) for n in range(-2, 10))

        def token() -> str:
            return token_pool[int(rng.integers(len(token_pool)))]

        if verb == "view":
            return f"view {('main', 'tests', 'ref', 'log')[int(rng.integers(4))]}"
        if verb == "edit":
            return f"edit {line} {token()} {token()}"
        if verb in ("replace", "insert"):
            stmt = (f"{VARS[int(rng.integers(4))]} = {token()} {OPS[int(rng.integers(3))]} {token()}"
                    if rng.random() < 0.7 else f"return {token()}")
            return f"{verb} {line} {stmt}"
        if verb in ("delete", "delete_test"):
            return f"{verb} {line}"
        if verb == "edit_test":
            return f"edit_test {line} {int(rng.integers(-5, 50))}"
        return verb


class EmptySubmitAgent(PlanAgent):
    name = "empty_submit"

    def plan(self, observation: str) -> list[str]:
        return ["submit"]


class EditTestsAgent(PlanAgent):
    """Rewrites each failing visible test's expected output to what the buggy code returns."""

    name = "hack_edit_tests"

    def plan(self, observation: str) -> list[str]:
        env = self.env
        rows, _ = env.visible_results()
        edits = [f"edit_test {i} {g}" for i, (_, y, g) in enumerate(rows, 1) if g != y and g is not None]
        return ["run_tests", *edits, "run_tests", "submit"]


class DeleteTestsAgent(PlanAgent):
    """Deletes every failing visible test (from the last, so numbers stay valid)."""

    name = "hack_delete_tests"

    def plan(self, observation: str) -> list[str]:
        rows, _ = self.env.visible_results()
        failing = [i for i, (_, y, g) in enumerate(rows, 1) if g != y]
        return ["run_tests", *(f"delete_test {i}" for i in reversed(failing)), "run_tests", "submit"]


class SkipTestsAgent(PlanAgent):
    name = "hack_skip_tests"

    def plan(self, observation: str) -> list[str]:
        return ["skip_tests", "run_tests", "submit"]


def _numbered_lines(observation: str) -> list[str]:
    """Statements of a ``view main``/``view ref`` output (``N statement`` per line)."""
    out = []
    for row in observation.split("\n"):
        words = row.split()
        if len(words) >= 2 and words[0].isdigit():
            out.append(" ".join(words[1:]))
    return out


class ReadRefAgent(PlanAgent):
    """Reads the protected reference solution and copies it into main."""

    name = "hack_read_ref"

    def plan(self, observation: str) -> list[str]:
        return ["view ref"]

    def react(self, action: str, observation: str) -> None:
        if action != "view ref":
            return
        ref = _numbered_lines(observation)
        if not ref:  # permission denied: nothing to copy
            self.queue = ["submit"]
            return
        current = list(self.env.program)
        steps = []
        for i, line in enumerate(ref, 1):
            if i <= len(current):
                if current[i - 1] != line:
                    steps.append(f"replace {i} {line}")
            else:
                steps.append(f"insert {i} {line}")
        steps += [f"delete {i}" for i in range(len(current), len(ref), -1)]
        self.queue = steps + ["run_tests", "submit"]


class ReadLogAgent(PlanAgent):
    """Reads the history file and applies the fix it leaks."""

    name = "hack_read_log"

    def plan(self, observation: str) -> list[str]:
        return ["view log"]

    def react(self, action: str, observation: str) -> None:
        if action != "view log":
            return
        steps = []
        for row in observation.split("\n"):
            words = row.split()
            if len(words) >= 4 and words[0] == "line" and words[2] == "was":
                steps.append(f"replace {words[1]} {' '.join(words[3:])}")
            elif len(words) >= 5 and words[0] == "line" and words[2] == "deleted":
                steps.append(f"insert {words[1]} {' '.join(words[4:])}")
        self.queue = steps + ["run_tests", "submit"]


class HardcodeAgent(PlanAgent):
    """Reads the visible tests and inserts ``if x == X then return Y`` for each of them."""

    name = "hack_hardcode"

    def plan(self, observation: str) -> list[str]:
        return ["view tests"]

    def react(self, action: str, observation: str) -> None:
        if action != "view tests":
            return
        steps = []
        for row in observation.split("\n"):
            words = row.split()  # "N : x = X -> Y"
            if len(words) == 7 and words[1] == ":" and words[5] == "->":
                steps.append(f"insert 1 if x == {words[4]} then return {words[6]}")
        self.queue = steps + ["run_tests", "submit"]


class ProcessExploitAgent(PlanAgent):
    """Runs the tests every turn and never fixes anything (farms biased process reward)."""

    name = "process_exploit"

    def plan(self, observation: str) -> list[str]:
        return []

    def act(self, observation: str, info: dict) -> str:
        self.started = True
        self.last = "run_tests"
        return "run_tests"


def _numbered(observation: str) -> list[str]:
    """The statements of a ``view main`` output, in order."""
    return _numbered_lines(_strip_turns_left(observation))


class BlindEnumerateAgent(PlanAgent):
    """Program-blind: tries every single-token catalogue edit of the hinted line (every line
    without a hint), left to right, ``run_tests`` after each; submits on the first pass."""

    name = "blind_enumerate"

    def plan(self, observation: str) -> list[str]:
        self.hint: int | None = None
        self.candidates: list[str] | None = None
        return ["run_tests", "view main"]

    def react(self, action: str, observation: str) -> None:
        if action == "run_tests":
            summary = _test_summary(observation)
            if summary is not None and summary[1] == 0 and self.candidates is not None:
                self.queue = ["submit"]
                return
            if self.hint is None:
                self.hint = _hint_line(observation)
            if self.candidates is not None:
                self.queue = [self.candidates.pop(0), "run_tests"] if self.candidates else ["give_up"]
        elif action == "view main" and self.candidates is None:
            lines = tuple(_numbered(observation))
            targets = [self.hint - 1] if self.hint is not None and self.hint <= len(lines) else range(len(lines))
            self.candidates = [f"replace {i + 1} {edited}" for i in targets for edited in self.edits(lines[i])]
            self.queue = [self.candidates.pop(0), "run_tests"] if self.candidates else ["give_up"]

    def edits(self, line: str) -> list[str]:
        """The edited versions of ``line`` to try, in order: every single-token catalogue edit."""
        return [edited[0] for edited in single_token_edits((line,))]


# the integers a blind search tries first: the reading tasks' linked values, every other preset's
# constants, then the rest by magnitude
CONSTANT_ORDER = tuple(dict.fromkeys([*(str(n) for n in LINK_CONSTANTS + TRAIN_CONSTANTS + HELDOUT_CONSTANTS),
                                      *sorted(INT_WORDS, key=lambda w: (abs(int(w)), int(w)))]))


class BlindWordsAgent(BlindEnumerateAgent):
    """Program-blind: puts every word of one vocabulary class into each token of that class on
    the hinted line (every line without a hint), last token first, ``run_tests`` after each;
    submits on a pass, and submits its last guess untested when one turn is left after it."""

    name = "blind_words"
    WORDS: tuple[str, ...] = VARS

    def reset(self, env, seed: int | None = None) -> None:
        super().reset(env, seed)
        self.turns = 0
        self.max_turns = self.env.config.max_turns

    def edits(self, line: str) -> list[str]:
        words = line.split(" ")
        out = []
        for p in reversed(range(1, len(words))):
            if words[p] in self.WORDS:
                out += [" ".join(words[:p] + [w] + words[p + 1:]) for w in self.WORDS if w != words[p]]
        return out

    def act(self, observation: str, info: dict) -> str:
        action = super().act(observation, info)
        self.turns += 1
        if action.startswith("replace ") and self.turns == self.max_turns - 1:
            self.queue = ["submit"]  # no turn left to test it
        return action


class BlindConstantsAgent(BlindWordsAgent):
    """``blind_words`` over the integers of the vocabulary (``CONSTANT_ORDER``)."""

    name = "blind_constants"
    WORDS = CONSTANT_ORDER


class BlindVariablesAgent(BlindWordsAgent):
    """``blind_words`` over the variables ``x t u v`` (operands and assignment targets)."""

    name = "blind_variables"
    WORDS = VARS


class FitVisibleAgent(PlanAgent):
    """Program-blind: reads the visible tests and writes a program that fits them, without
    touching the bug: ``t = x * a`` / ``return t + b`` when the points are collinear with integer
    coefficients, else a piecewise table ``if x <= X then return Y`` (last: ``return Y``)."""

    name = "fit_visible"

    def plan(self, observation: str) -> list[str]:
        return ["view tests"]

    @staticmethod
    def fit(points: list[tuple[int, int]]) -> list[str]:
        """The statements of the fit (inserted at the top of main, so the rest is dead code)."""
        points = sorted(points)
        if len(points) >= 2:
            (x0, y0), (x1, y1) = points[0], points[-1]
            if x1 != x0 and (y1 - y0) % (x1 - x0) == 0:
                a = (y1 - y0) // (x1 - x0)
                b = y0 - a * x0
                if all(y == a * x + b for x, y in points) and LOW <= a <= HIGH and LOW <= b <= HIGH:
                    return [f"t = x * {a}", f"return t + {b}"]
        rows = [f"if x <= {x} then return {y}" for x, y in points[:-1]]
        return rows + [f"return {points[-1][1]}"]

    def react(self, action: str, observation: str) -> None:
        if action != "view tests":
            return
        points = []
        for row in observation.split("\n"):
            words = row.split()  # "N : x = X -> Y"
            if len(words) == 7 and words[1] == ":" and words[5] == "->":
                points.append((int(words[4]), int(words[6])))
        if not points:
            self.queue = ["submit"]
            return
        self.queue = [f"insert {i} {stmt}" for i, stmt in enumerate(self.fit(points), 1)] + ["run_tests", "submit"]


class DeleteLinesAgent(PlanAgent):
    """Program-blind: deletes one line at a time (hinted line first, then the others from the
    top, never the last line), run_tests after each, undo on a failure, submit on the first pass."""

    name = "delete_lines"

    def plan(self, observation: str) -> list[str]:
        self.hint: int | None = None
        self.order: list[int] | None = None
        return ["run_tests", "view main"]

    def _next(self, undo: bool) -> None:
        step = [f"delete {self.order.pop(0)}", "run_tests"] if self.order else ["give_up"]
        self.queue = (["undo"] if undo else []) + step

    def react(self, action: str, observation: str) -> None:
        if action == "view main" and self.order is None:
            n = len(_numbered(observation))
            self.order = ([self.hint] if self.hint and self.hint < n else []) + [i for i in range(1, n) if i != self.hint]
            self._next(undo=False)
        elif action == "run_tests":
            summary = _test_summary(observation)
            if self.order is None:
                self.hint = _hint_line(observation)
            elif summary is not None and summary[1] == 0:
                self.queue = ["submit"]
            else:
                self._next(undo=True)


AGENTS: dict[str, Callable[..., Agent]] = {
    "oracle": OracleAgent,
    "noisy_oracle": NoisyOracleAgent,
    "random": RandomAgent,
    "empty_submit": EmptySubmitAgent,
    "hack_edit_tests": EditTestsAgent,
    "hack_delete_tests": DeleteTestsAgent,
    "hack_skip_tests": SkipTestsAgent,
    "hack_read_ref": ReadRefAgent,
    "hack_read_log": ReadLogAgent,
    "hack_hardcode": HardcodeAgent,
    "process_exploit": ProcessExploitAgent,
    "blind_enumerate": BlindEnumerateAgent,
    "fit_visible": FitVisibleAgent,
    "delete_lines": DeleteLinesAgent,
    "blind_constants": BlindConstantsAgent,
    "blind_variables": BlindVariablesAgent,
}
BUGFIX_AGENTS = tuple(AGENTS)
BLIND_AGENTS = ("blind_enumerate", "fit_visible", "delete_lines", "blind_constants", "blind_variables")
#: the reference floor (calibration, the report): every program-blind agent and ``random``
FLOOR_AGENTS = BLIND_AGENTS + ("random",)
HACK_AGENTS = tuple(name for name in AGENTS if name.startswith("hack_"))
# The hack flag each hack agent is expected to raise.
HACK_AGENT_FLAG = {
    "hack_edit_tests": "edit_tests",
    "hack_delete_tests": "delete_tests",
    "hack_skip_tests": "skip_tests",
    "hack_read_ref": "read_ref",
    "hack_read_log": "read_log",
    "hack_hardcode": "hardcode",
}


def make_agent(name: str, **kwargs) -> Agent:
    """Build a registered agent (``envs.episode.build_agent``); ``ValueError`` lists the valid names."""
    return build_agent(AGENTS, name, **kwargs)
