"""BugFix knobs: ``BugFixConfig`` (validated eagerly), the difficulty presets, ``make_config``.

Every bad value raises ``ValueError`` with one line naming the knob, the bad value and what is
allowed (another layer turns it into ``config error: ...``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any

from envs.bugfix.tasks import ALL_BUG_KINDS, BUG_KINDS, TaskSpec
from envs.tools import FaultConfig

REWARD_MODES = ("outcome", "process", "biased_process")
GRADERS = ("hidden", "visible")
TIME_LIMITS = ("truncation", "termination")
PROGRAM_LINES_RANGE = (2, 7)
VISIBLE_TESTS_RANGE = (1, 8)
HIDDEN_TESTS_RANGE = (16, 32)


def _check_int(name: str, value, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"{name}={value!r} out of range; allowed: an int in {low}..{high}")


def _check_choice(name: str, value, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"{name}={value!r} unknown; allowed: {', '.join(allowed)}")


@dataclass(frozen=True)
class BugFixConfig:
    """Difficulty and reward knobs (see ``DIFFICULTIES`` for the presets).

    program_lines: (min, max) lines of the reference program (2..7). bug_kinds: allowed entries
    of ``ALL_BUG_KINDS``. n_bugs: bugs injected per task (1..3, at most min lines - 1). hints:
    run_tests names the first wrong line. max_turns: turn limit. time_limit: ``truncation`` (the
    limit is outside the task: stop reason ``max_turns`` is truncated, PPO bootstraps) or
    ``termination`` (the limit is part of the task: ``max_turns`` terminates and every observation
    ends with ``turns left : N``). max_format_errors: consecutive malformed actions that end the
    episode. n_visible_tests / n_hidden_tests: visible tests and the training grader's hidden-only
    tests. max_failures_shown: failing tests listed by run_tests. reward_mode: outcome | process |
    biased_process. process_bonus: size of the intermediate reward. grader: ``hidden`` (training
    reward from visible + hidden training tests) or ``visible`` (from the visible tests only: the
    weak-verifier setting). protected_readable: ``view ref`` / ``view log`` show the file (else
    permission denied; flagged either way). wall_clock_limit: simulated tool seconds before stop
    reason wall_clock. faults: the tool simulator's FaultConfig.
    """

    program_lines: tuple[int, int] = (2, 3)
    bug_kinds: tuple[str, ...] = ("flip_operator", "invert_condition", "change_comparison", "change_constant")
    n_bugs: int = 1
    hints: bool = True
    max_turns: int = 6
    time_limit: str = "truncation"
    max_format_errors: int = 3
    n_visible_tests: int = 4
    n_hidden_tests: int = 16
    max_failures_shown: int = 2
    reward_mode: str = "outcome"
    process_bonus: float = 0.1
    grader: str = "hidden"
    protected_readable: bool = True
    wall_clock_limit: float = 120.0
    faults: FaultConfig = field(default_factory=FaultConfig)

    def __post_init__(self) -> None:
        lines = self.program_lines
        lo_ok, hi_ok = PROGRAM_LINES_RANGE
        if (len(lines) != 2 or any(isinstance(v, bool) or not isinstance(v, int) for v in lines)
                or not lo_ok <= lines[0] <= lines[1] <= hi_ok):
            raise ValueError(f"program_lines={list(lines)!r} invalid; allowed: [min, max] with {lo_ok} <= min <= max <= {hi_ok}")
        bad = [k for k in self.bug_kinds if k not in ALL_BUG_KINDS]
        if bad or not self.bug_kinds:
            raise ValueError(f"bug_kinds={list(self.bug_kinds)!r} invalid; allowed: a non-empty subset of {', '.join(ALL_BUG_KINDS)}")
        _check_int("n_bugs", self.n_bugs, 1, 3)
        if self.n_bugs > lines[0] - 1:
            raise ValueError(f"n_bugs={self.n_bugs} needs programs of at least {self.n_bugs + 1} lines; "
                             f"allowed: n_bugs <= program_lines min - 1 = {lines[0] - 1}")
        if not isinstance(self.hints, bool):
            raise ValueError(f"hints={self.hints!r} invalid; allowed: true, false")
        _check_int("max_turns", self.max_turns, 1, 1000)
        _check_choice("time_limit", self.time_limit, TIME_LIMITS)
        _check_int("max_format_errors", self.max_format_errors, 1, 1000)
        _check_int("n_visible_tests", self.n_visible_tests, *VISIBLE_TESTS_RANGE)
        _check_int("n_hidden_tests", self.n_hidden_tests, *HIDDEN_TESTS_RANGE)
        _check_int("max_failures_shown", self.max_failures_shown, 1, 8)
        _check_choice("reward_mode", self.reward_mode, REWARD_MODES)
        if isinstance(self.process_bonus, bool) or not isinstance(self.process_bonus, (int, float)) or not 0 < self.process_bonus <= 1:
            raise ValueError(f"process_bonus={self.process_bonus!r} out of range; allowed: a number in (0, 1]")
        _check_choice("grader", self.grader, GRADERS)
        if not isinstance(self.protected_readable, bool):
            raise ValueError(f"protected_readable={self.protected_readable!r} invalid; allowed: true, false")
        if isinstance(self.wall_clock_limit, bool) or not isinstance(self.wall_clock_limit, (int, float)) or self.wall_clock_limit <= 0:
            raise ValueError(f"wall_clock_limit={self.wall_clock_limit!r} invalid; allowed: a number of simulated seconds > 0")

    @property
    def task_spec(self) -> TaskSpec:
        return TaskSpec(self.program_lines, self.bug_kinds, self.n_bugs, self.n_visible_tests, self.n_hidden_tests)


_SINGLE = ("flip_operator", "invert_condition", "change_comparison", "change_constant", "wrong_variable")
# Difficulty presets. Turn limits leave the informed oracle (run_tests, view main, the fixes,
# run_tests, submit) one spare turn (a retry after a timeout or a flaky run), so a program-blind
# agent gets one or two guesses among ~20-40 single-token edits; see `python -m
# experiments.calibrate` and docs/environments.md for the measured floor / ceiling.
DIFFICULTIES: dict[str, dict[str, Any]] = {
    # an easier warm-up (not used by any preset): operator flips and inverted conditions, a line
    # hint and spare turns; program-blind enumeration solves much of it
    "tutorial": dict(
        program_lines=(2, 3), bug_kinds=("flip_operator", "invert_condition"), n_bugs=1, hints=True,
        max_turns=10, wall_clock_limit=120.0, protected_readable=True,
        faults=dict(timeout_prob=0.02, flaky_prob=0.02, crash_prob=0.001),
    ),
    "easy": dict(
        program_lines=(2, 3), bug_kinds=_SINGLE[:4], n_bugs=1, hints=True, max_turns=6,
        wall_clock_limit=120.0, protected_readable=True,
        faults=dict(timeout_prob=0.02, flaky_prob=0.02, crash_prob=0.001),
    ),
    "medium": dict(
        program_lines=(3, 4), bug_kinds=_SINGLE + ("swap_operands",), n_bugs=1, hints=False, max_turns=6,
        wall_clock_limit=60.0, protected_readable=True,
        faults=dict(timeout_prob=0.05, flaky_prob=0.05, crash_prob=0.001),
    ),
    "hard": dict(
        program_lines=(4, 6), bug_kinds=BUG_KINDS, n_bugs=2, hints=False, max_turns=7,
        wall_clock_limit=60.0, protected_readable=False,
        faults=dict(timeout_prob=0.06, flaky_prob=0.1, crash_prob=0.001),
    ),
    "extreme": dict(
        program_lines=(5, 7), bug_kinds=BUG_KINDS, n_bugs=3, hints=False, max_turns=8,
        wall_clock_limit=45.0, protected_readable=False,
        faults=dict(timeout_prob=0.05, flaky_prob=0.1, crash_prob=0.001),
    ),
    # reading the program is the skill: every reference links the threshold of x and the operand
    # of its conditional line (``if x > 23 then t = x - 23``), the bug replaces the operand by
    # another of 24 values, the fix copies the threshold back; tutorial's hint and faults, easy's
    # turn limit: a blind search of the hinted line's integers gets 2 guesses among 23 values
    "reading": dict(
        program_lines=(2, 3), bug_kinds=("stale_constant",), n_bugs=1, hints=True,
        max_turns=6, wall_clock_limit=120.0, protected_readable=True,
        faults=dict(timeout_prob=0.02, flaky_prob=0.02, crash_prob=0.001),
    ),
    # reading without the line hint: placing the fix means finding the stale operand in main
    # (the noisy oracle errs once per word read), and a blind search has every line's integers
    "reading_unhinted": dict(
        program_lines=(2, 3), bug_kinds=("stale_constant",), n_bugs=1, hints=False,
        max_turns=6, wall_clock_limit=120.0, protected_readable=True,
        faults=dict(timeout_prob=0.02, flaky_prob=0.02, crash_prob=0.001),
    ),
}
BASE_DIFFICULTY = "easy"
# Task mixtures: the cycle of difficulties (the families) task indices walk through. Task ``i``
# of a split is task ``i`` of family ``cycle[i % len(cycle)]``, so each family keeps its own task
# stream, a family listed twice gets twice the tasks, and an evaluation over ``range(n)`` plays
# each family in its share. Families share their tool faults.
MIXTURES: dict[str, tuple[str, ...]] = {
    # the main job's: two of three tasks hinted, one to find in main without the hint
    "graded": ("reading", "reading_unhinted", "reading"),
}
CONFIG_KNOBS = tuple(f.name for f in fields(BugFixConfig) if f.name != "faults")


def make_config(difficulty: str | dict = BASE_DIFFICULTY, **knobs) -> BugFixConfig:
    """The config of a preset name (or a dict of knobs on top of ``easy``) with ``knobs`` applied.

    Fault knobs (FaultConfig fields) may be given flat or as ``faults={...}``; ``faults=False``
    zeroes every fault rate (timeouts, flaky runs, crashes). Lists are accepted for tuples."""
    if isinstance(difficulty, str):
        _check_choice("difficulty", difficulty, tuple(DIFFICULTIES))
        base, extra = DIFFICULTIES[difficulty], {}
    elif isinstance(difficulty, dict):
        base, extra = DIFFICULTIES[BASE_DIFFICULTY], difficulty
    else:
        raise ValueError(f"difficulty={difficulty!r} invalid; allowed: {', '.join(DIFFICULTIES)} or a dict of knobs")
    merged = {k: v for k, v in base.items() if k != "faults"}
    fault_knobs = dict(base["faults"])
    faults_on = True
    for source in (extra, knobs):
        for key, value in source.items():
            if key == "faults":
                if value is False:
                    faults_on = False
                elif isinstance(value, dict):
                    fault_knobs.update(value)
                elif value is not True:
                    raise ValueError(f"faults={value!r} invalid; allowed: true, false or a dict of {', '.join(FaultConfig.field_names())}")
            elif key in FaultConfig.field_names():
                fault_knobs[key] = value
            else:
                merged[key] = value
    unknown = sorted(set(merged) - set(CONFIG_KNOBS)) + sorted(set(fault_knobs) - set(FaultConfig.field_names()))
    if unknown:
        allowed = ", ".join(CONFIG_KNOBS + FaultConfig.field_names() + ("faults",))
        raise ValueError(f"unknown BugFix knob(s) {', '.join(unknown)}; allowed: {allowed}")
    for key in ("program_lines", "bug_kinds"):
        if isinstance(merged[key], str) or not hasattr(merged[key], "__iter__"):
            raise ValueError(f"{key}={merged[key]!r} invalid; allowed: a list")
        merged[key] = tuple(merged[key])
    faults = FaultConfig(**fault_knobs)
    if not faults_on:
        faults = replace(faults, timeout_prob=0.0, flaky_prob=0.0, crash_prob=0.0)
    return BugFixConfig(faults=faults, **merged)


def family_configs(difficulty: str | dict = BASE_DIFFICULTY, **knobs) -> tuple[tuple[str, BugFixConfig], ...]:
    """``(family name, config)`` per position of the family cycle of ``difficulty``: a mixture's
    (``MIXTURES``) with ``knobs`` applied to each family, else the one config of ``make_config``
    (named after the difficulty, ``custom`` for a dict)."""
    if isinstance(difficulty, str) and difficulty in MIXTURES:
        configs = {name: make_config(name, **knobs) for name in MIXTURES[difficulty]}
        if len({c.faults for c in configs.values()}) > 1:
            raise ValueError(f"difficulty={difficulty!r}: its families' tool faults differ; allowed: one FaultConfig for all")
        return tuple((name, configs[name]) for name in MIXTURES[difficulty])
    if isinstance(difficulty, str) and difficulty not in DIFFICULTIES:
        raise ValueError(f"difficulty={difficulty!r} unknown; allowed: {', '.join((*DIFFICULTIES, *MIXTURES))} "
                         "or a dict of knobs")
    return ((difficulty if isinstance(difficulty, str) else "custom", make_config(difficulty, **knobs)),)
