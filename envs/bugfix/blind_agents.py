"""BugFix's program-blind scripted agents (the reference floor): they read the program's text and
the tests' pass / fail, never its meaning. ``blind_enumerate``, ``fit_visible``, ``delete_lines``,
``blind_constants``, ``blind_variables``; ``envs/bugfix/agents.py`` describes each."""

from __future__ import annotations

from envs.bugfix import HIGH, INT_WORDS, LOW, VARS, single_token_edits
from envs.bugfix.agent_base import PlanAgent, hint_line, latest_test_counts, numbered, visible_tests
from envs.bugfix.tasks import HELDOUT_CONSTANTS, LINK_CONSTANTS, TRAIN_CONSTANTS


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
            summary = latest_test_counts(observation)
            if summary is not None and summary[1] == 0 and self.candidates is not None:
                self.queue = ["submit"]
                return
            if self.hint is None:
                self.hint = hint_line(observation)
            if self.candidates is not None:
                self.queue = [self.candidates.pop(0), "run_tests"] if self.candidates else ["give_up"]
        elif action == "view main" and self.candidates is None:
            lines = tuple(numbered(observation))
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
        points = visible_tests(observation)
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
            n = len(numbered(observation))
            self.order = ([self.hint] if self.hint and self.hint < n else []) + [i for i in range(1, n) if i != self.hint]
            self._next(undo=False)
        elif action == "run_tests":
            summary = latest_test_counts(observation)
            if self.order is None:
                self.hint = hint_line(observation)
            elif summary is not None and summary[1] == 0:
                self.queue = ["submit"]
            else:
                self._next(undo=True)
