"""PairFix tasks: one program split in two files, ``a`` and ``b``, composed as ``a(b(x))``.

``make_pair_task(spec, split, index)`` is a pure function of its arguments. It reuses BugFix's
generator (``envs.bugfix.tasks.make_task``) for each file: file ``a`` is BugFix task ``ia`` and
file ``b`` BugFix task ``ib`` of the same split (so PairFix's held-out split inherits BugFix's
disjoint shapes, constants and functions per file), with ``ia, ib`` drawn from a seed stream of
``(salt, split, index, spec)``. The program computes ``y = b(x)`` then returns ``a(y)`` (an
output of ``b`` that is "no return" makes the whole program return nothing).

Where the bug is: ``BUG_PLACES[index % 3]`` (``a``, ``b`` or ``both``), so task indices with
``index % 3 == k`` are the tasks of one placement (``indices_with_bug_in``). A file without a bug
is its BugFix reference; a file with one is BugFix's buggy program.

Inputs: the three disjoint input sets of ``b``'s BugFix task (visible, hidden training,
evaluation) are the program's inputs; expected outputs are those of ``a_ref(b_ref(x))``. A draw is
kept when the composed program returns on every input, the buggy program fails at least one
visible and one evaluation test, fixing only one file of a ``both`` task still fails a visible
test (so both agents must act), and the expected outputs take more than ``n_visible_tests``
distinct values on the hidden inputs (no program returning only visible outputs passes).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from envs.bugfix.language import run_many, run_program
from envs.bugfix.tasks import Task, TaskSpec, make_task
from envs.task_options import SPLITS

AGENTS = ("a", "b")
BUG_PLACES = ("a", "b", "both")
MAX_PAIR_ATTEMPTS = 200
_PAIR_SALT = 0x9A1F
_INDEX_RANGE = 1 << 30

Program = tuple[str, ...]
PairProgram = tuple[Program, Program]  # (file a, file b)


def run_pair(program: PairProgram, inputs: tuple[int, ...], run=run_program) -> tuple:
    """Outputs of ``a(b(x))`` for ``program = (a_lines, b_lines)`` on each input; None where
    either file returns nothing. ``ValueError`` if a line of either file is not a statement.
    ``run(file, inputs)`` runs one file (``run_program``, or ``run_many``: the same outputs)."""
    a, b = program
    mid = run(b, tuple(inputs))
    live = tuple(y for y in mid if y is not None)
    outs = iter(run(a, live))
    return tuple(None if y is None else next(outs) for y in mid)


def run_pair_many(program: PairProgram, inputs: tuple[int, ...]) -> tuple:
    """``run_pair`` over the vectorised single-file runner (the graders' evaluator)."""
    return run_pair(program, inputs, run_many)


@dataclass(frozen=True)
class PairTask:
    """One PairFix task. ``files[agent]`` is the BugFix task the agent's file comes from;
    ``buggy`` / ``reference`` are ``(file a, file b)``; test tuples are ``(x, a_ref(b_ref(x)))``."""

    task_id: str
    split: str
    index: int
    bug_in: str  # a | b | both
    files: dict  # agent -> envs.bugfix.tasks.Task
    reference: PairProgram
    buggy: PairProgram
    visible: tuple[tuple[int, int], ...]
    hidden: tuple[tuple[int, int], ...]
    evaluation: tuple[tuple[int, int], ...]

    def has_bug(self, agent: str) -> bool:
        return self.bug_in in (agent, "both")

    def oracle_actions(self, agent: str) -> tuple[str, ...]:
        """The edits that turn ``agent``'s buggy file into its reference (empty without a bug)."""
        return self.files[agent].fix if self.has_bug(agent) else ()


def bug_place(index: int) -> str:
    """Where task ``index``'s bug is: ``BUG_PLACES[index % 3]``."""
    return BUG_PLACES[index % len(BUG_PLACES)]


def indices_with_bug_in(place: str, n: int, start: int = 0) -> list[int]:
    """The first ``n`` task indices ``>= start`` whose bug is in ``place`` (a | b | both)."""
    if place not in BUG_PLACES:
        raise ValueError(f"bug place {place!r} unknown; allowed: {', '.join(BUG_PLACES)}")
    k = BUG_PLACES.index(place)
    first = start + (k - start) % len(BUG_PLACES)
    return [first + len(BUG_PLACES) * i for i in range(n)]


def _fails_visible(program: PairProgram, tests) -> bool:
    xs = tuple(x for x, _ in tests)
    return run_pair(program, xs) != tuple(y for _, y in tests)


def _try_pair(ta: Task, tb: Task, split: str, index: int, spec: TaskSpec) -> PairTask | None:
    place = bug_place(index)
    reference = (ta.reference, tb.reference)
    buggy = (ta.buggy if place in ("a", "both") else ta.reference, tb.buggy if place in ("b", "both") else tb.reference)
    sets = []
    for tests in (tb.visible, tb.hidden, tb.evaluation):
        xs = tuple(x for x, _ in tests)
        ys = run_pair(reference, xs)
        if any(y is None for y in ys):
            return None
        sets.append(tuple(zip(xs, ys)))
    visible, hidden, evaluation = sets
    if not _fails_visible(buggy, visible) or not _fails_visible(buggy, evaluation):
        return None
    if place == "both" and not (_fails_visible((ta.reference, tb.buggy), visible)
                                and _fails_visible((ta.buggy, tb.reference), visible)):
        return None
    if len({y for _, y in hidden}) <= spec.n_visible_tests:
        return None
    digest = zlib.crc32(repr((reference, buggy, visible)).encode())
    return PairTask(task_id=f"pairfix/{split}/{index}/{digest:08x}", split=split, index=index, bug_in=place,
                    files={"a": ta, "b": tb}, reference=reference, buggy=buggy, visible=visible, hidden=hidden,
                    evaluation=evaluation)


@lru_cache(maxsize=4096)
def make_pair_task(spec: TaskSpec, split: str, index: int) -> PairTask:
    """PairFix task ``index`` (any int >= 0) of ``split`` for ``spec``: deterministic, cached."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; allowed: {', '.join(SPLITS)}")
    if index < 0:
        raise ValueError(f"task_index={index} invalid; allowed: an int >= 0")
    key = zlib.crc32(repr(spec).encode())
    rng = np.random.default_rng([_PAIR_SALT, SPLITS.index(split), index, key])
    for _ in range(MAX_PAIR_ATTEMPTS):
        ia, ib = (int(v) for v in rng.integers(_INDEX_RANGE, size=2))
        task = _try_pair(make_task(spec, split, ia), make_task(spec, split, ib), split, index, spec)
        if task is not None:
            return task
    raise ValueError(f"no valid {split} PairFix task {index} for {spec} in {MAX_PAIR_ATTEMPTS} draws; "
                     f"widen program_lines or bug_kinds")


__all__ = ["AGENTS", "BUG_PLACES", "PairTask", "bug_place", "indices_with_bug_in", "make_pair_task", "run_pair"]
