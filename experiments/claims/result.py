"""What every row of the claims table shares: the statuses, the base class of a claim's result and
the number comparisons and formats the rows' pass rules and texts use.

A claim's measurement (``measure_cNN`` in a module of ``experiments/claims/``) returns a frozen
dataclass: its fields are the measured values, its class attribute ``what`` and its property
``measured`` are row texts (:class:`Measurement`). An empirical claim's result subclasses
:class:`ClaimResult`: ``expected`` / ``kind`` and :meth:`ClaimResult.passes`, the claim's pass rule,
sit beside the measurement; a closed-form claim's expected numbers and pass rule are its tagged
test (:mod:`experiments.claims.tagged`). ``experiments/reproduce_claims.py``
prints one row per result.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import ClassVar

PASS, FAIL, OPTIONAL = "PASS", "FAIL", "OPTIONAL"
STATUSES = (PASS, FAIL, OPTIONAL)
CLOSED_FORM, EMPIRICAL = "closed-form", "empirical"
KINDS = (CLOSED_FORM, EMPIRICAL)


class Measurement:
    """Base of every measurement's result: a frozen dataclass of the measured values that sets
    ``what`` (what was checked) and defines ``measured`` (the text of the "measured" column). A
    closed-form measurement is only this: its expected numbers and pass rule are its tagged test
    (:mod:`experiments.claims.tagged`)."""

    what: ClassVar[str]

    @property
    def measured(self) -> str:
        """The "measured" column: the values of this result as text."""
        raise NotImplementedError


class ClaimResult(Measurement):
    """Base of a claim's result that carries its own pass rule (the empirical claims): sets
    ``expected`` and ``kind`` (:data:`EMPIRICAL`: runs envs, rollouts or trainers;
    :data:`CLOSED_FORM` for a hand-made result in a test) and defines :meth:`passes`."""

    expected: ClassVar[str]
    kind: ClassVar[str] = CLOSED_FORM

    def passes(self) -> bool:
        """The claim's pass rule on the values of this result."""
        raise NotImplementedError

    def status(self) -> str:
        """The row's status: :data:`PASS` when :meth:`passes`, else :data:`FAIL`."""
        return PASS if self.passes() else FAIL


def close(a, b, tol: float = 1e-9) -> bool:
    """``a`` and ``b`` (numbers, or sequences of numbers of the same length) agree within ``tol``
    element by element."""
    a, b = (list(x) if isinstance(x, (list, tuple)) else [x] for x in (a, b))
    return len(a) == len(b) and all(abs(float(x) - float(y)) <= tol for x, y in zip(a, b))


def fmt_list(values: Sequence[float]) -> str:
    """``values`` as ``[v, ...]`` with 4 significant digits each."""
    return "[" + ", ".join(f"{float(v):.4g}" for v in values) + "]"


def sig(x, nd: int = 3) -> str:
    """A float with ``nd`` significant digits; "missing" for None, "nan" for NaN; anything else
    (an int, a string) as ``str``."""
    if x is None:
        return "missing"
    if isinstance(x, float) and math.isnan(x):
        return "nan"
    return f"{x:.{nd}g}" if isinstance(x, float) else str(x)


def finite(x) -> bool:
    """A real, finite number (not a bool, not None, not NaN)."""
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
