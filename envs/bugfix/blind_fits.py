"""Program-blind fits of a BugFix task's visible tests (``envs.bugfix.tasks``' validity rules):
programs written from the visible tests alone, with no line of the buggy program read, and whether
one of them, or a saturating line, passes a set of graded tests. A task is kept only when none
does, so no agent passes the training grader without reading the program."""

from __future__ import annotations

import numpy as np

from envs.bugfix.language import HIGH, LOW, compile_program, execute


def is_affine(xs: np.ndarray, ys: np.ndarray) -> bool:
    """True when a saturating line fits the points ``(xs, ys)``: the points whose ``y`` is not
    saturated (strictly between ``LOW`` and ``HIGH``) lie on one line (integer arithmetic,
    exact; fewer than three such points always do). Arithmetic saturates after every operation,
    so ``t = x * 2 / return t + -22`` agrees with a reference wherever both sit at ``LOW``: the
    saturated points constrain no fit."""
    xs, ys = np.asarray(xs, dtype=np.int64), np.asarray(ys, dtype=np.int64)
    free = (ys > LOW) & (ys < HIGH)
    xs, ys = xs[free], ys[free]
    if len(xs) < 3:
        return True
    x0, y0, x1, y1 = int(xs[0]), int(ys[0]), int(xs[-1]), int(ys[-1])  # distinct inputs: x0 != x1
    return bool(np.all((ys - y0) * (x1 - x0) == (y1 - y0) * (xs - x0)))


def step_tables(points: list[tuple[int, int]]) -> tuple[tuple[str, ...], ...]:
    """The two step-function interpolants through ``points`` (a program-blind fit of visible
    tests): ``if x <= X then return Y`` rows in ascending ``X`` (last: ``return Y``), and the
    mirror ``if x >= X then return Y`` in descending ``X``."""
    up = sorted(points)
    down = up[::-1]
    return (tuple(f"if x <= {x} then return {y}" for x, y in up[:-1]) + (f"return {up[-1][1]}",),
            tuple(f"if x >= {x} then return {y}" for x, y in down[:-1]) + (f"return {down[-1][1]}",))


def nearest_tables(points: list[tuple[int, int]]) -> tuple[tuple[str, ...], ...]:
    """The two nearest-visible-input interpolants through ``points``: ``if x <= M then return Y``
    with ``M`` the midpoint between neighbouring inputs (rounded down, then up)."""
    up = sorted(points)
    return tuple(tuple(f"if x <= {(a + b + r) // 2} then return {y}" for (a, y), (b, _) in zip(up, up[1:]))
                 + (f"return {up[-1][1]}",) for r in (0, 1))


def affine_fits(points: list[tuple[int, int]]) -> list[tuple[str, ...]]:
    """Integer lines through every pair of ``points``, written the two ways saturation tells
    apart: ``t = x * a`` / ``return t + b`` (``fit_visible``'s program for the outer pair) and,
    when ``b / a`` is an integer ``c``, ``t = x + c`` / ``return t * a``."""
    out = []
    for i, (x0, y0) in enumerate(points):
        for x1, y1 in points[i + 1:]:
            if x1 == x0 or (y1 - y0) % (x1 - x0):
                continue
            a = (y1 - y0) // (x1 - x0)
            b = y0 - a * x0
            if LOW <= a <= HIGH and LOW <= b <= HIGH:
                out.append((f"t = x * {a}", f"return t + {b}"))
                if a and b % a == 0 and LOW <= b // a <= HIGH:
                    out.append((f"t = x + {b // a}", f"return t * {a}"))
    return out


def lookup_tables(points: list[tuple[int, int]]) -> list[tuple[str, ...]]:
    """``if x == X then return Y`` for every visible test, then each visible output as the default."""
    rows = tuple(f"if x == {x} then return {y}" for x, y in points)
    return [rows + (f"return {y}",) for y in dict.fromkeys(y for _, y in points)]


def blind_fits(visible: list[tuple[int, int]]) -> list[tuple[str, ...]]:
    """Programs written from the visible tests alone (no line of main read): step tables,
    nearest-input tables, integer lines through pairs of tests, lookup tables, constants."""
    points = sorted(visible)
    constants = [(f"return {y}",) for y in dict.fromkeys(y for _, y in points)]
    return [*step_tables(points), *nearest_tables(points), *affine_fits(points), *lookup_tables(points), *constants]


def fits_pass(visible: list[tuple[int, int]], graded: list[tuple[int, int]]) -> bool:
    """True when a program-blind fit passes every ``graded`` test: a saturating line through the
    graded outputs (``is_affine``), or a program of ``blind_fits(visible)``."""
    xs = np.asarray([x for x, _ in graded], dtype=np.int64)
    ys = np.asarray([y for _, y in graded], dtype=np.int64)
    if is_affine(xs, ys):
        return True
    inputs = tuple(int(x) for x in xs)
    expected = tuple(int(y) for y in ys)
    for fit in blind_fits(visible):
        compiled = compile_program(fit)
        if all(execute(compiled, x) == y for x, y in zip(inputs, expected)):
            return True
    return False


__all__ = ["affine_fits", "blind_fits", "fits_pass", "is_affine", "lookup_tables", "nearest_tables", "step_tables"]
