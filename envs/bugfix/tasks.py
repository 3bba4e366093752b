"""Procedural BugFix tasks: a reference program, injected bugs, three disjoint input sets.

``make_task(spec, split, index)`` is a pure function of its arguments: task ``index`` of a split
is generated from its own seed stream (``numpy.random.default_rng([salt, split, index, spec])``),
by rejection until every validity rule below holds. Any ``index >= 0`` is a task; pools are not
finite lists, so there is no modulo and no range check.

Reference programs (``program_lines`` lines, the last an unconditional ``return``) are drawn from a
small grammar: assignments and conditional assignments / returns over ``x t u v``, the operators
``+ - *`` and constants. A reference is kept when no saturating line fits it on the domain (so
none passes the exact verifier) and no program-blind fit of the visible tests (``fits_pass``: a
saturating line through the graded outputs, or a program of ``blind_fits`` (``envs.bugfix.blind_fits``): step and
nearest-input tables, integer lines through two visible tests, lookup tables, constants) passes
the training grader, takes at least ``n_visible_tests + 1`` distinct values on its hidden training inputs (so no program that
only returns visible outputs can pass the training grader), and every line matters (dropping any
line changes the function).

The held-out split, by construction and by behaviour:

- shapes: a program's *shape* is its text with constants replaced by ``K``; held-out shapes are
  those with ``crc32(shape) % 4 == 0``, train uses the others;
- constants: train programs use only ``TRAIN_CONSTANTS``; held-out programs contain at least one
  of ``HELDOUT_CONSTANTS``;
- behaviour: the function a reference computes on ``DOMAIN`` (the graders' whole input range) is
  hashed, and train keeps odd hashes, held-out even ones. So no held-out reference computes the
  same function as any train reference, for any indices (tests/envs/test_bugfix_tasks.py checks
  this on pools of 10 000 / 1 000).

Three disjoint input sets per task, all inside ``DOMAIN`` (-50..69, 120 integers):
``visible`` (``n_visible_tests``, shown by ``view tests``, at least one failing), ``hidden``
(``n_hidden_tests``, the training grader's hidden-only inputs: domain ends, 0, -1, the
comparison constants of ``x`` and their neighbours, at least four negatives and at least one
failing input) and ``evaluation`` (every other input of the domain, >= 80; at least one failing:
the bug shows outside the training inputs too). The evaluation verifier itself is exact: it runs
on every input the language admits (``envs.bugfix.graders.VERIFIER_INPUTS``, -99..199).

Bugs: ``n_bugs`` mutations of distinct lines, each drawn uniformly among the candidate mutations of
the allowed kinds (uniform over candidates, not over kinds, so no single edit is a likely guess).
A task is dropped when some single-token edit of the buggy program passes every visible test but
computes another function than the reference (two minimal fixes with different behaviour).

Reading tasks (bug kind ``stale_constant``, the ``reading`` preset): the reference has one
conditional line, a threshold ``if x CMP K`` whose statement ends with ``+ K`` / ``- K``:
``link_constant`` sets both to one value ``K`` drawn uniformly from ``LINK_CONSTANTS`` (the shape
and constants rules apply to the program before linking, the behaviour rule to the linked
reference). The bug writes another ``LINK_CONSTANTS`` value into that operand; the fix copies the
threshold back, so it is written in the program and not in the tests: a task is also dropped when
another integer in the bug's place passes the visible tests with another function.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from envs.bugfix.blind_fits import fits_pass, is_affine
from envs.bugfix.language import (CMPS, HIGH, INT_WORDS, LOW, NONE_CODE, OPS, VARS, compile_program, execute,
                                  run_dropping_each, run_on_domain, run_program, run_with_operand_values)
from envs.task_options import SPLITS

DOMAIN = tuple(range(-50, 70))
DOMAIN_ARRAY = np.asarray(DOMAIN, dtype=np.int64)
TRAIN_CONSTANTS = (1, 2, 3, 4, 5, 6, 8, 9, 10, 12)
HELDOUT_CONSTANTS = (7, 11, 13)
HELDOUT_SHAPE_MODULUS = 4
SINGLE_TOKEN_KINDS = ("flip_operator", "invert_condition", "change_comparison", "change_constant", "wrong_variable")
BUG_KINDS = SINGLE_TOKEN_KINDS + ("swap_operands", "drop_statement")
# kinds whose fix is written in the program text: ``stale_constant`` also makes every reference
# link its threshold and one operand (``link_constant``); the hard / extreme presets' BUG_KINDS
# exclude them, so their task streams do not depend on them
READING_KINDS = ("stale_constant",)
ALL_BUG_KINDS = BUG_KINDS + READING_KINDS
# the linked constant K of a reading reference and the stale value that replaces its operand copy:
# uniform over 24 values above every preset's constants (so K is the only such value in a
# program); few enough that the tiny policy copies each one exactly after behaviour cloning
LINK_CONSTANTS = tuple(range(14, 38))
INVERT = {"<": ">=", ">=": "<", ">": "<=", "<=": ">", "==": "!=", "!=": "=="}
CONSTANT_STEPS = (1, -1, 2, -2, 3, -3, 4, -4)
MAX_ATTEMPTS = 5000
_INTEGER_VALUES = np.arange(LOW, HIGH + 1, dtype=np.int64)
_SALT = 0xB06F1


@dataclass(frozen=True)
class TaskSpec:
    """The knobs that determine a task pool (a sub-tuple of ``BugFixConfig``)."""

    program_lines: tuple[int, int]
    bug_kinds: tuple[str, ...]
    n_bugs: int
    n_visible_tests: int
    n_hidden_tests: int


@dataclass(frozen=True)
class Mutation:
    """One injected bug: reference line ``line`` (0-based) becomes ``new`` (None: dropped);
    ``pos`` is the changed token's position for single-token mutations (else -1)."""

    kind: str
    line: int
    new: tuple[str, ...] | None
    pos: int = -1


@dataclass(frozen=True)
class Task:
    task_id: str
    split: str
    index: int
    shape: tuple[str, ...]
    reference: tuple[str, ...]
    buggy: tuple[str, ...]
    bugs: tuple[Mutation, ...]
    fix: tuple[str, ...]  # oracle actions, bottom-up
    log: tuple[str, ...]  # the leaking history file's lines
    visible: tuple[tuple[int, int], ...]
    hidden: tuple[tuple[int, int], ...]  # the training grader's hidden-only tests
    evaluation: tuple[tuple[int, int], ...]  # the domain's other inputs (the verifier checks all of -99..199)


# ---------------------------------------------------------------------------------------------
# Mutations
# ---------------------------------------------------------------------------------------------
def _token_alternatives(kind: str, words: list[str], p: int, defined: frozenset[str]) -> list[str]:
    """Replacements of token ``p`` for a single-token bug ``kind``; ``defined`` are the variables
    assigned before this line (and ``x``): a wrong variable is another one of those."""
    w = words[p]
    if kind == "flip_operator" and w in OPS:
        return [o for o in OPS if o != w]
    if kind == "invert_condition" and w in CMPS:
        return [INVERT[w]]
    if kind == "change_comparison" and w in CMPS:
        return [c for c in CMPS if c not in (w, INVERT[w])]
    if kind == "change_constant" and w in INT_WORDS and p > 0:
        return [str(int(w) + d) for d in CONSTANT_STEPS if LOW <= int(w) + d <= HIGH]
    if kind == "wrong_variable" and w in VARS and _is_operand(words, p):
        return [v for v in VARS if v != w and v in defined]
    return []


def _is_operand(words: list[str], p: int) -> bool:
    """True when token ``p`` is read (an operand), not the assignment target."""
    return not (p + 1 < len(words) and words[p + 1] == "=")


def mutations(program: tuple[str, ...], kinds: tuple[str, ...]) -> list[Mutation]:
    """Every candidate bug of the allowed ``kinds`` in ``program`` (not yet validated)."""
    out: list[Mutation] = []
    last = len(program) - 1
    defined = {"x"}
    for i, line in enumerate(program):
        words = line.split(" ")
        seen = frozenset(defined)
        if "=" in words:
            defined.add(words[words.index("=") - 1])
        for p, w in enumerate(words):
            for kind in SINGLE_TOKEN_KINDS:
                if kind in kinds:
                    for alt in _token_alternatives(kind, words, p, seen):
                        out.append(Mutation(kind, i, tuple(words[:p] + [alt] + words[p + 1:]), p))
            if "swap_operands" in kinds and 1 <= p < len(words) - 1 and (w == "-" or w in CMPS):
                a, b = words[p - 1], words[p + 1]
                left_ok = p >= 2 and words[p - 2] in ("=", "if", "return")
                if a != b and left_ok:
                    out.append(Mutation("swap_operands", i, tuple(words[:p - 1] + [b, w, a] + words[p + 2:]), p))
        if "drop_statement" in kinds and i != last:
            out.append(Mutation("drop_statement", i, None))
    if "stale_constant" in kinds:
        out += _stale_constants(program)
    return out


def threshold_of(program: tuple[str, ...]) -> int | None:
    """The constant ``K`` of the program's one conditional line when that line compares ``x``
    with it (``if x CMP K then ...``); None when no line or several lines are conditional."""
    conditional = [line for line in program if line.startswith("if ")]
    if len(conditional) != 1:
        return None
    words = conditional[0].split(" ")
    return int(words[3]) if words[1] == "x" and words[3] in INT_WORDS else None


def operand_lines(program: tuple[str, ...]) -> list[int]:
    """The lines (0-based) that end by adding or subtracting a constant (``... A + K``, ``... A - K``)."""
    out = []
    for i, line in enumerate(program):
        w = line.split(" ")
        if len(w) >= 3 and w[-1] in INT_WORDS and w[-2] in ("+", "-"):
            out.append(i)
    return out


def _stale_constants(program: tuple[str, ...]) -> list[Mutation]:
    """``stale_constant`` bugs: an operand equal to the threshold (``threshold_of``) becomes
    another ``LINK_CONSTANTS`` value."""
    k = threshold_of(program)
    if k is None:
        return []
    out = []
    for i in operand_lines(program):
        words = program[i].split(" ")
        p = len(words) - 1
        if int(words[p]) != k:
            continue
        for d in LINK_CONSTANTS:
            if d != k:
                out.append(Mutation("stale_constant", i, tuple(words[:p] + [str(d)] + words[p + 1:]), p))
    return out


def link_constant(rng: np.random.Generator, program: tuple[str, ...]) -> tuple[str, ...] | None:
    """``program`` with the threshold of its conditional line and the constant that line ends
    with (``if x CMP K then ... A + K`` / ``- K``) set to one ``LINK_CONSTANTS`` value: the
    operand's value is written in its own condition. None when the program has no threshold
    (``threshold_of``) or its conditional line does not end with ``+`` / ``-`` a constant."""
    if threshold_of(program) is None:
        return None
    (line,) = [i for i, text in enumerate(program) if text.startswith("if ")]
    if line not in operand_lines(program):
        return None
    k = str(_pick(rng, LINK_CONSTANTS))
    words = program[line].split(" ")
    words[3] = words[-1] = k
    return program[:line] + (" ".join(words),) + program[line + 1:]


def single_token_edits(program: tuple[str, ...]) -> list[tuple[str, ...]]:
    """Every program one catalogue token edit away from ``program`` (all single-token kinds)."""
    return [apply_mutations(program, (m,)) for m in mutations(program, SINGLE_TOKEN_KINDS)]


def apply_mutations(program: tuple[str, ...], muts: tuple[Mutation, ...]) -> tuple[str, ...]:
    by_line = {m.line: m for m in muts}
    out = []
    for i, line in enumerate(program):
        m = by_line.get(i)
        if m is None:
            out.append(line)
        elif m.new is not None:
            out.append(" ".join(m.new))
    return tuple(out)


def fix_actions(reference: tuple[str, ...], muts: tuple[Mutation, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(oracle actions that turn the buggy program back into ``reference``, leaking log lines).

    Bugs are fixed bottom-up so earlier line numbers stay valid; ``edit LINE OLD NEW`` is used
    when the buggy token is the first ``OLD`` of its line, else the whole line is replaced."""
    drops = sorted(m.line for m in muts if m.new is None)
    actions, log = [], []
    for m in sorted(muts, key=lambda m: -m.line):
        number = m.line - sum(1 for d in drops if d < m.line) + 1
        original = reference[m.line]
        if m.new is None:
            actions.append(f"insert {number} {original}")
            log.append(f"line {number} deleted : {original}")
            continue
        log.append(f"line {number} was {original}")
        orig_words = original.split(" ")
        if m.kind != "swap_operands" and m.pos >= 0:
            bad = m.new[m.pos]
            if m.new.index(bad) == m.pos:
                actions.append(f"edit {number} {bad} {orig_words[m.pos]}")
                continue
        actions.append(f"replace {number} {original}")
    return tuple(actions), tuple(log)


# ---------------------------------------------------------------------------------------------
# Reference programs
# ---------------------------------------------------------------------------------------------
def shape_of(program: tuple[str, ...]) -> tuple[str, ...]:
    """The program with every integer literal replaced by ``K``."""
    return tuple(" ".join("K" if w in INT_WORDS else w for w in line.split(" ")) for line in program)


def shape_split(program: tuple[str, ...]) -> str:
    """The split a program's shape belongs to (``crc32(shape) % 4 == 0``: held-out)."""
    h = zlib.crc32("\n".join(shape_of(program)).encode())
    return "heldout" if h % HELDOUT_SHAPE_MODULUS == 0 else "train"


def function_of(program: tuple[str, ...]) -> np.ndarray:
    """The function ``program`` computes: its outputs on ``DOMAIN`` (``NONE_CODE`` = no return)."""
    return run_on_domain(program, DOMAIN_ARRAY)


def behaviour_split(outputs: np.ndarray) -> str:
    """The split a function belongs to: train for odd ``crc32`` of its outputs, held-out for even."""
    return "train" if zlib.crc32(np.ascontiguousarray(outputs, dtype=np.int64).tobytes()) % 2 else "heldout"


def constants_split(program: tuple[str, ...]) -> str | None:
    """``train`` (only TRAIN_CONSTANTS), ``heldout`` (some HELDOUT_CONSTANTS, nothing else) or None."""
    consts = {int(w) for line in program for w in line.split(" ") if w in INT_WORDS}
    if consts <= set(TRAIN_CONSTANTS):
        return "train"
    if consts <= set(TRAIN_CONSTANTS + HELDOUT_CONSTANTS):
        return "heldout"
    return None


def program_split(program: tuple[str, ...]) -> str | None:
    """The split ``program`` may serve as a reference of (shape, constants and behaviour agree),
    or None when they disagree (the generator then draws again)."""
    s = shape_split(program)
    if constants_split(program) != s:
        return None
    return s if behaviour_split(function_of(program)) == s else None


def _pick(rng: np.random.Generator, options: tuple):
    """``options[k]`` for ``k`` uniform: the draw ``rng.choice(options)`` makes (numpy's uniform
    ``choice`` is ``integers(0, len, dtype=int64)``), without converting ``options`` to an array."""
    return options[int(rng.integers(len(options)))]


# numpy's ``choice(3, p=OP_WEIGHTS)``: one ``random()`` searched in the normalised cumulative sum
OP_WEIGHTS = (0.45, 0.35, 0.2)
_OP_CDF = np.cumsum(np.asarray(OP_WEIGHTS, dtype=np.float64))
_OP_CDF /= _OP_CDF[-1]


def _constant(rng: np.random.Generator, split: str) -> int:
    if split == "heldout" and rng.random() < 0.5:
        return _pick(rng, HELDOUT_CONSTANTS)
    return _pick(rng, TRAIN_CONSTANTS)


def _operand(rng, defined: list[str], split: str, p_const: float) -> str:
    if rng.random() < p_const:
        return str(_constant(rng, split))
    return defined[int(rng.integers(len(defined)))]


def _expression(rng, defined: list[str], split: str) -> str:
    a = defined[-1] if rng.random() < 0.6 else defined[int(rng.integers(len(defined)))]
    op = OPS[int(_OP_CDF.searchsorted(rng.random(), side="right"))]
    b = _operand(rng, defined, split, 0.7)
    while b == a:  # no ``x - x`` / ``t * t``: a constant or a square is not a readable line
        b = _operand(rng, defined, split, 0.7)
    return f"{a} {op} {b}"


def _condition(rng, defined: list[str], split: str) -> str:
    a = "x" if rng.random() < 0.6 else defined[int(rng.integers(len(defined)))]
    cmp = CMPS[int(rng.integers(len(CMPS)))]
    return f"if {a} {cmp} {_constant(rng, split)} then"


def random_program(rng: np.random.Generator, n_lines: int, split: str) -> tuple[str, ...]:
    """One candidate reference of ``n_lines`` lines (at least one conditional line)."""
    defined = ["x"]
    scratch = ["t", "u", "v"]
    lines = []
    forced = int(rng.integers(n_lines - 1))
    for i in range(n_lines - 1):
        r = rng.random()
        kind = "set" if r < 0.45 else "cond_set" if r < 0.8 else "cond_return"
        if i == forced and kind == "set":
            kind = "cond_set"
        if kind == "cond_return":
            lines.append(f"{_condition(rng, defined, split)} return {_expression(rng, defined, split)}")
            continue
        expr = _expression(rng, defined, split)
        fresh = [v for v in scratch if v not in defined]
        if fresh and (kind == "set" or rng.random() < 0.5):
            target = fresh[0]
        else:
            target = defined[int(rng.integers(len(defined)))]
        stmt = f"{target} = {expr}"
        lines.append(f"{_condition(rng, defined, split)} {stmt}" if kind == "cond_set" else stmt)
        if target not in defined:
            defined.append(target)
    a = defined[-1]
    if rng.random() < 0.5:
        lines.append(f"return {a}")
    else:
        lines.append(f"return {a} {OPS[int(rng.integers(2))]} {_operand(rng, defined, split, 0.6)}")
    return tuple(lines)


def good_reference(program: tuple[str, ...], outputs: np.ndarray) -> bool:
    """Returns on every input, no saturating line fits it on the domain (so none fits it on the
    exact verifier's wider range either), every line matters."""
    if np.any(outputs == NONE_CODE) or is_affine(DOMAIN_ARRAY, outputs):
        return False
    if len(np.unique(outputs)) < 10:
        return False
    dropped = run_dropping_each(program, range(len(program) - 1), DOMAIN_ARRAY)  # all but the last line
    return not any(np.array_equal(row, outputs) for row in dropped)


# ---------------------------------------------------------------------------------------------
# Tasks
# ---------------------------------------------------------------------------------------------
def _x_constants(program: tuple[str, ...]) -> set[int]:
    """Constants compared directly with ``x``."""
    out = set()
    for line in program:
        w = line.split(" ")
        if w[0] == "if":
            if w[1] == "x" and w[3] in INT_WORDS:
                out.add(int(w[3]))
            if w[3] == "x" and w[1] in INT_WORDS:
                out.add(int(w[1]))
    return out


def _pick_bugs(rng, reference, spec: TaskSpec) -> tuple[Mutation, ...] | None:
    candidates = mutations(reference, spec.bug_kinds)
    chosen: list[Mutation] = []
    for _ in range(spec.n_bugs):
        pool = [m for m in candidates if m.line not in {c.line for c in chosen}
                and not (m.new is None and any(c.new is None for c in chosen))]
        if not pool:
            return None
        chosen.append(pool[int(rng.integers(len(pool)))])
    return tuple(sorted(chosen, key=lambda m: m.line))


def _choose_inputs(rng, reference, ref_out: np.ndarray, bug_out: np.ndarray, spec: TaskSpec):
    """(visible, hidden, evaluation) input lists, or None when the bug cannot be exposed."""
    failing = DOMAIN_ARRAY[ref_out != bug_out].tolist()
    failing_set = set(failing)
    if len(failing) < 3:
        return None
    first = failing[int(rng.integers(len(failing)))]
    rest = [x for x in DOMAIN if x != first]
    visible = sorted([first] + [int(v) for v in rng.choice(rest, size=spec.n_visible_tests - 1, replace=False)])
    vis = set(visible)
    left = [x for x in DOMAIN if x not in vis]
    left_failing = [x for x in left if x in failing_set]
    if len(left_failing) < 2:
        return None
    must = left_failing[int(rng.integers(len(left_failing)))]
    core = {DOMAIN[0], DOMAIN[-1], 0, -1} - vis  # always hidden unless visible
    near = set()
    for c in _x_constants(reference):
        near |= {c - 1, c, c + 1}
    near = [x for x in sorted(near - core - vis - {must}) if DOMAIN[0] <= x <= DOMAIN[-1]]
    rng.shuffle(near)
    hidden = {must, *core, *near[: spec.n_hidden_tests - 6 - len(core)]}
    negatives = [x for x in left if x < 0 and x not in hidden]
    need = max(0, 4 - sum(1 for x in hidden if x < 0))
    hidden |= {int(v) for v in rng.choice(negatives, size=need, replace=False)}
    others = [x for x in left if x not in hidden]
    hidden |= {int(v) for v in rng.choice(others, size=spec.n_hidden_tests - len(hidden), replace=False)}
    evaluation = [x for x in left if x not in hidden]
    if not any(x in failing_set for x in evaluation):
        return None
    return visible, sorted(hidden), evaluation


def _ambiguous(buggy, ref_out: np.ndarray, visible: list[int], expected: tuple) -> bool:
    """True when a single-token edit of ``buggy`` passes the visible tests but computes another
    function than the reference."""
    # the visible inputs the buggy program fails first: most edits fail one of them, and each input
    # is tried alone (one scalar run) before the next
    buggy_out = run_program(buggy, tuple(visible))
    order = sorted(range(len(visible)), key=lambda k: buggy_out[k] == expected[k])
    for program in single_token_edits(buggy):
        compiled = compile_program(program)
        if all(execute(compiled, visible[k]) == expected[k] for k in order) and not np.array_equal(function_of(program), ref_out):
            return True
    return False


def _ambiguous_constant(buggy, bugs: tuple[Mutation, ...], ref_out: np.ndarray, visible: list[int],
                        expected: tuple) -> bool:
    """True when a ``stale_constant`` bug's token, set to any integer of the language, passes the
    visible tests but computes another function than the reference (the fix is unique)."""
    for m in bugs:
        if m.kind != "stale_constant":
            continue
        line = m.line - sum(1 for b in bugs if b.new is None and b.line < m.line)
        # the bug's token is the line's last operand: every integer tried at once on the visible tests
        outputs = run_with_operand_values(buggy, line, _INTEGER_VALUES, visible)
        for value in _INTEGER_VALUES[(outputs == np.asarray(expected)[None, :]).all(axis=1)]:
            words = list(m.new)
            words[m.pos] = str(value)
            program = buggy[:line] + (" ".join(words),) + buggy[line + 1:]
            if not np.array_equal(function_of(program), ref_out):
                return True
    return False


def _try_task(rng, spec: TaskSpec, split: str, index: int) -> Task | None:
    lo, hi = spec.program_lines
    n_lines = int(rng.integers(lo, hi + 1))
    reference = random_program(rng, n_lines, split)
    if shape_split(reference) != split or constants_split(reference) != split:
        return None
    if "stale_constant" in spec.bug_kinds:  # the split rules above hold for the program before linking
        reference = link_constant(rng, reference)
        if reference is None:
            return None
    ref_out = function_of(reference)
    if behaviour_split(ref_out) != split or not good_reference(reference, ref_out):
        return None
    bugs = _pick_bugs(rng, reference, spec)
    if bugs is None:
        return None
    buggy = apply_mutations(reference, bugs)
    bug_out = function_of(buggy)
    chosen = _choose_inputs(rng, reference, ref_out, bug_out, spec)
    if chosen is None:
        return None
    visible, hidden, evaluation = chosen
    y = dict(zip(DOMAIN, (int(v) for v in ref_out)))
    # no program-blind fit passes the training grader (the exact verifier: good_reference's check)
    if fits_pass([(x, y[x]) for x in visible], [(x, y[x]) for x in visible + hidden]):
        return None
    if len({y[x] for x in hidden}) <= spec.n_visible_tests:
        return None
    expected = tuple(y[x] for x in visible)
    if _ambiguous(buggy, ref_out, visible, expected) or _ambiguous_constant(buggy, bugs, ref_out, visible, expected):
        return None
    fix, log = fix_actions(reference, bugs)
    digest = zlib.crc32(repr((reference, buggy, visible)).encode())
    return Task(
        task_id=f"bugfix/{split}/{index}/{digest:08x}",
        split=split,
        index=index,
        shape=shape_of(reference),
        reference=reference,
        buggy=buggy,
        bugs=bugs,
        fix=fix,
        log=log,
        visible=tuple((x, y[x]) for x in visible),
        hidden=tuple((x, y[x]) for x in hidden),
        evaluation=tuple((x, y[x]) for x in evaluation),
    )


@lru_cache(maxsize=8192)
def make_task(spec: TaskSpec, split: str, index: int) -> Task:
    """Task ``index`` (any int >= 0) of ``split`` for ``spec``: deterministic, cached."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; allowed: {', '.join(SPLITS)}")
    if index < 0:
        raise ValueError(f"task_index must be >= 0, got {index}")
    key = zlib.crc32(repr(spec).encode())
    rng = np.random.default_rng([_SALT, SPLITS.index(split), index, key])
    for _ in range(MAX_ATTEMPTS):
        task = _try_task(rng, spec, split, index)
        if task is not None:
            return task
    raise ValueError(f"no valid {split} task found for {spec} in {MAX_ATTEMPTS} draws; widen program_lines or bug_kinds")
