"""BugFix's informed scripted agents: ``oracle`` and ``noisy_oracle`` (they read the env's hidden
fix; the warm start's demonstrator and the reference ceiling) and ``random`` (well-formed actions
that never read the env). ``envs/bugfix/agents.py`` describes every agent."""

from __future__ import annotations

from envs.bugfix import CMPS, FLIP, INT_WORDS, INVERT, OPS, USAGE, VARS
from envs.bugfix.agent_base import Agent, last_line, latest_test_counts, timed_out


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
        if timed_out(observation):
            return False
        kind = self.last_kind
        ok = last_line(observation).startswith("ok")
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
            summary = latest_test_counts(observation)
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
