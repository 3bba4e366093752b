"""The small integer language of BugFix programs: parsing one line, running a program.

One statement per line; ``x`` is the input; ``t u v`` start at 0::

    V = E                     V in {x t u v}
    if A C B then V = E       C in {< > <= >= == !=}
    if A C B then return E
    return E
    E := A | A OP A           OP in {+ - *}; A is a variable or an integer literal

Arithmetic saturates to -99..199 after every operation (so every printed number is a vocabulary
token). A program that ends without ``return`` returns ``None`` (printed ``none``). There is no
runtime error. ``run_program`` (scalar, cached) and ``run_on_domain`` (numpy, vectorized over many
inputs) are two independent implementations of the same semantics; tests compare them.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from envs import vocab

LOW, HIGH = vocab.INTEGER_RANGE
VARS = ("x", "t", "u", "v")
OPS = ("+", "-", "*")
CMPS = ("<", ">", "<=", ">=", "==", "!=")
KEYWORDS = ("if", "then", "return", "=")
INT_WORDS = frozenset(str(n) for n in range(LOW, HIGH + 1))
PROGRAM_WORDS = frozenset(VARS + OPS + CMPS + KEYWORDS) | INT_WORDS
MAX_PROGRAM_LINES = 12

RET, SET = 0, 1
_CMP = {
    "<": lambda a, b: a < b,
    ">": lambda a, b: a > b,
    "<=": lambda a, b: a <= b,
    ">=": lambda a, b: a >= b,
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
}


def atom(word: str):
    """A variable name (str) or an int literal (int); None if ``word`` is neither."""
    if word in VARS:
        return word
    if word in INT_WORDS:
        return int(word)
    return None


def _expr(words: list[str]):
    if len(words) == 1:
        a = atom(words[0])
        return None if a is None else (a,)
    if len(words) == 3 and words[1] in OPS:
        a, b = atom(words[0]), atom(words[2])
        if a is None or b is None:
            return None
        return (a, words[1], b)
    return None


@lru_cache(maxsize=1 << 15)
def compile_line(line: str):
    """``(kind, cond, target, expr)`` of the statement ``line`` (words separated by single
    spaces); None if it is not a statement. ``kind`` is RET or SET; ``cond`` is ``(a, cmp, b)``
    or None; ``expr`` is ``(a,)`` or ``(a, op, b)`` with atoms as in :func:`atom`."""
    words = line.split(" ")
    cond = None
    if words and words[0] == "if":
        if len(words) < 7 or words[4] != "then" or words[2] not in CMPS:
            return None
        a, b = atom(words[1]), atom(words[3])
        if a is None or b is None:
            return None
        cond = (a, words[2], b)
        words = words[5:]
    if not words:
        return None
    if words[0] == "return":
        e = _expr(words[1:])
        return None if e is None else (RET, cond, None, e)
    if len(words) >= 3 and words[0] in VARS and words[1] == "=":
        e = _expr(words[2:])
        return None if e is None else (SET, cond, words[0], e)
    return None


def clamp(n: int) -> int:
    return HIGH if n > HIGH else LOW if n < LOW else n


def _eval_expr(e, env: dict):
    a = e[0]
    va = env[a] if a.__class__ is str else a
    if len(e) == 1:
        return va
    b = e[2]
    vb = env[b] if b.__class__ is str else b
    op = e[1]
    r = va + vb if op == "+" else va - vb if op == "-" else va * vb
    return HIGH if r > HIGH else LOW if r < LOW else r


def execute(compiled: tuple, x: int):
    """The output of a compiled program (``compile_program``) on one input ``x`` (already inside
    -99..199: ``run_program`` clamps first); None = no return."""
    env = {"x": x, "t": 0, "u": 0, "v": 0}
    for kind, cond, target, e in compiled:
        if cond is not None:
            a, c, b = cond
            va = env[a] if a.__class__ is str else a
            vb = env[b] if b.__class__ is str else b
            if not _CMP[c](va, vb):
                continue
        value = _eval_expr(e, env)
        if kind == RET:
            return value
        env[target] = value
    return None


def compile_program(program: tuple[str, ...]) -> tuple:
    """The compiled statements of ``program``; ``ValueError`` naming the first bad line."""
    compiled = []
    for line in program:
        c = compile_line(line)
        if c is None:
            raise ValueError(f"not a statement: {line!r}")
        compiled.append(c)
    return tuple(compiled)


@lru_cache(maxsize=1 << 16)
def run_program(program: tuple[str, ...], inputs: tuple[int, ...]) -> tuple:
    """Outputs of ``program`` (a tuple of statement lines) on each input (inputs are clamped to
    -99..199 first); ``None`` = no return. ``ValueError`` if a line is not a statement."""
    compiled = compile_program(program)
    return tuple(execute(compiled, clamp(x)) for x in inputs)


NONE_CODE = HIGH + 1  # stands for "no return" in run_on_domain's integer output
_OPS_NP = {"+": np.add, "-": np.subtract, "*": np.multiply}
_CMPS_NP = {"<": np.less, ">": np.greater, "<=": np.less_equal, ">=": np.greater_equal,
            "==": np.equal, "!=": np.not_equal}


def _saturate(values: np.ndarray) -> np.ndarray:
    """``clamp`` elementwise: ``min(max(v, LOW), HIGH)`` (the ufuncs: ``np.clip``'s Python
    wrapper costs more than the arithmetic on a 120-input domain)."""
    return np.minimum(np.maximum(values, LOW), HIGH)


def run_on_domain(program: tuple[str, ...], inputs: np.ndarray) -> np.ndarray:
    """Vectorized ``run_program``: int64 outputs over ``inputs`` (1-D), ``NONE_CODE`` where the
    program returns nothing. Statements are applied to every input at once under masks."""
    return _run_masked(compile_program(program), np.asarray(inputs, dtype=np.int64)[None, :], None)[0]


@lru_cache(maxsize=4096)
def run_many(program: tuple[str, ...], inputs: tuple[int, ...]) -> tuple:
    """``run_program``'s outputs computed by ``run_on_domain`` (``None`` = no return): the graders'
    evaluator, a few times faster than the scalar one on hundreds of inputs."""
    out = run_on_domain(program, np.asarray(inputs, dtype=np.int64))
    if not (out == NONE_CODE).any():  # every input returns: no per-value rewrite
        return tuple(out.tolist())
    return tuple(None if v == NONE_CODE else v for v in out.tolist())


def run_with_operand_values(program: tuple[str, ...], line: int, values: np.ndarray, inputs: Sequence[int]) -> np.ndarray:
    """``out[k] = run_on_domain(program with the last operand of line ``line`` set to
    values[k], inputs)``: ``[len(values), len(inputs)]`` in one vectorized pass. Line ``line`` must
    end with a binary expression (``... A op K``); ``ValueError`` otherwise."""
    compiled = list(compile_program(program))
    kind, cond, target, e = compiled[line]
    if len(e) != 3:
        raise ValueError(f"line {line + 1} of main has no binary expression: {program[line]!r}")
    column = np.asarray(values, dtype=np.int64)[:, None]  # broadcasts over the inputs
    compiled[line] = (kind, cond, target, (e[0], e[1], column))
    xs = np.broadcast_to(np.asarray(inputs, dtype=np.int64)[None, :], (len(column), len(inputs)))
    return _run_masked(tuple(compiled), xs, None)


def run_dropping_each(program: tuple[str, ...], lines: Sequence[int], inputs: np.ndarray) -> np.ndarray:
    """``out[k] = run_on_domain(program without line lines[k], inputs)``: ``[len(lines), n]``, all
    variants in one vectorized pass (variant ``k`` skips statement ``lines[k]``)."""
    skip = np.asarray(lines, dtype=np.int64)[:, None] == np.arange(len(program))[None, :]  # [K, statements]
    xs = np.broadcast_to(np.asarray(inputs, dtype=np.int64)[None, :], (len(lines), len(inputs)))
    return _run_masked(compile_program(program), xs, skip)


def _run_masked(compiled: tuple, inputs: np.ndarray, skip: np.ndarray | None) -> np.ndarray:
    """The statements over ``inputs [K, n]`` under masks; ``skip [K, statements]`` (bool) marks a
    statement that row ``k`` does not execute (None: every row executes every statement)."""
    xs = _saturate(inputs)
    zeros = np.zeros(xs.shape, np.int64)
    env = {"x": xs, "t": zeros, "u": zeros, "v": zeros}  # never written in place: np.where makes new arrays
    out = np.full(xs.shape, NONE_CODE, np.int64)
    live = np.ones(xs.shape, bool)

    def value(a):
        return env[a] if isinstance(a, str) else a  # an int literal broadcasts

    for j, (kind, cond, target, e) in enumerate(compiled):
        if cond is not None:
            a, c, b = cond
            active = live & _CMPS_NP[c](value(a), value(b))
        else:
            active = live.copy()
        if skip is not None:
            active &= ~skip[:, j:j + 1]
        if len(e) == 1:
            r = value(e[0])
        else:
            r = _saturate(_OPS_NP[e[1]](value(e[0]), value(e[2])))
        if kind == RET:
            out = np.where(active, r, out)
            live &= ~active
        else:
            env[target] = np.where(active, r, env[target])
    return out
