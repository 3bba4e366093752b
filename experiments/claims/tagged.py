"""Closed-form claims are tests: each is one pytest test in ``tests/claims/test_closed_form.py``
tagged ``@pytest.mark.claim("Cn")`` that holds the claim's expected numbers, once, with the
hand arithmetic behind them; this module runs those tests and turns each into a row of the claims
table.

A tagged test takes the :func:`claim` fixture (a :class:`ClaimCheck`):
``claim.measure(measure_cn)`` runs the claim's measurement (``experiments/claims/closed_form.py``:
the computation through ``algos``, its ``what`` and ``measured`` texts, no expected number) and
``claim.expect(label, measured, expected)`` asserts one expected number (or list of numbers)
and adds ``"<label> <expected>"`` to the row's "expected" text; ``claim.note(text)`` adds a
qualitative expectation that the test's own asserts check. The texts travel as the test report's
``user_properties`` (strings only, so they survive pytest-xdist).

:func:`run_tagged` runs the tagged tests in this process (``pytest.main`` with a collecting
plugin) and returns one :class:`TaggedRow` per claim ID: PASS when its test passed, else FAIL with
the failure in the "measured" text.
"""

from __future__ import annotations

import contextlib
import io
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from experiments.claims.result import FAIL, PASS

ROOT = Path(__file__).resolve().parents[2]
#: The tests that carry the closed-form claims.
TESTS = ROOT / "tests" / "claims" / "test_closed_form.py"
MARK = "claim"
_WHAT, _EXPECTED, _MEASURED = "claim.what", "claim.expected", "claim.measured"


def show(value) -> str:
    """An expected value as the row prints it: a number with up to 4 significant digits (``0.72``,
    ``-1``, ``2.0`` as ``2``), a sequence as ``[a, b, ...]``, a string or a bool as is."""
    if isinstance(value, (str, bool)):
        return str(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(show(v) for v in value) + "]"
    return f"{float(value):.4g}"


def _numeric(value) -> bool:
    """``value`` is a number or a sequence of numbers (bools are not numbers here)."""
    items = list(value) if isinstance(value, (list, tuple)) else [value]
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in items)


class ClaimCheck:
    """What one tagged test records for its claim's row (see the module docstring)."""

    def __init__(self, claim_id: str, node: pytest.Item):
        self.claim_id, self._node = claim_id, node

    def _record(self, key: str, text: str) -> None:
        self._node.user_properties.append((key, text))

    def measure(self, measure):
        """Run ``measure()`` (a closed-form measurement), record its ``what`` and ``measured``
        texts, return its result."""
        result = measure()
        self._record(_WHAT, result.what)
        self._record(_MEASURED, result.measured)
        return result

    def expect(self, label: str, measured, expected, tol: float = 1e-9) -> None:
        """Assert ``measured`` equals ``expected`` (numbers within ``tol``; strings and bools
        exactly) and add ``"<label> <expected>"`` to the row's expected text."""
        self._record(_EXPECTED, f"{label} {show(expected)}".strip())
        ok = measured == (pytest.approx(expected, abs=tol, rel=0) if _numeric(expected) else expected)
        assert ok, f"{self.claim_id} {label}: measured {measured!r}, expected {expected!r}"

    def note(self, text: str) -> None:
        """Add ``text`` (an expectation the test's own asserts check) to the row's expected text."""
        self._record(_EXPECTED, text)


@pytest.fixture
def claim(request) -> ClaimCheck:
    """The :class:`ClaimCheck` of the test's ``@pytest.mark.claim("Cn")``."""
    mark = request.node.get_closest_marker(MARK)
    if mark is None or len(mark.args) != 1:
        raise ValueError(f"{request.node.nodeid}: the claim fixture needs @pytest.mark.claim('<ID>')")
    return ClaimCheck(mark.args[0], request.node)


@dataclass
class TaggedRow:
    """One claim's row from its tagged test: the claim in short (the test's docstring), ``what``
    was checked, the ``expected`` and ``measured`` texts and the status."""

    claim_id: str
    claim: str = ""
    what: str = ""
    expected: str = ""
    measured: str = "its test did not run"
    status: str = FAIL


class _Collector:
    """pytest plugin: keeps the tests tagged with one of ``ids`` (all tagged tests when None) and
    builds a :class:`TaggedRow` from each one's reports."""

    def __init__(self, ids: Iterable[str] | None):
        self.ids = None if ids is None else set(ids)
        self.rows: dict[str, TaggedRow] = {}
        self._ids_by_node: dict[str, str] = {}

    def pytest_collection_modifyitems(self, config, items):
        kept, dropped = [], []
        for item in items:
            mark = item.get_closest_marker(MARK)
            cid = mark.args[0] if mark is not None and mark.args else None
            if cid is None or (self.ids is not None and cid not in self.ids):
                dropped.append(item)
                continue
            if cid in self.rows:
                raise ValueError(f"claim {cid!r} is tagged on two tests, {item.nodeid} and another; one test per claim")
            kept.append(item)
            self._ids_by_node[item.nodeid] = cid
            self.rows[cid] = TaggedRow(claim_id=cid, claim=" ".join((item.obj.__doc__ or "").split()))
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept

    def pytest_runtest_logreport(self, report):
        cid = self._ids_by_node.get(report.nodeid)
        if cid is None or (report.when != "call" and report.passed):
            return
        row = self.rows[cid]
        props: dict[str, list[str]] = {}
        for key, text in report.user_properties:
            props.setdefault(key, []).append(text)
        row.what = " ".join(props.get(_WHAT, [])) or row.what
        row.expected = "; ".join(props.get(_EXPECTED, [])) or row.expected
        measured = " ".join(props.get(_MEASURED, []))
        if report.passed:
            row.status, row.measured = PASS, measured
            return
        crash = getattr(report.longrepr, "reprcrash", None)
        why = (crash.message if crash is not None else str(report.longrepr)).strip().splitlines()
        why = why[0] if why else report.outcome
        if report.skipped:
            why = f"skipped: {why}"
        row.status = FAIL
        row.measured = f"{measured}; FAILED {report.when}: {why}" if measured else f"check raised {why}"


def run_tagged(ids: Sequence[str] | None = None, path: Path = TESTS) -> dict[str, TaggedRow]:
    """Run the tests in ``path`` tagged with a claim in ``ids`` (all when None) in this process,
    their output discarded; one :class:`TaggedRow` per claim ID that has a tagged test.
    ``RuntimeError`` (with pytest's last lines) when the tests could not run: a collection error,
    a claim tagged on two tests."""
    collector = _Collector(ids)
    args = [str(path), "-p", "no:cacheprovider", "-q", f"--rootdir={ROOT}", "-c", str(ROOT / "pyproject.toml"),
            "-o", "addopts=--import-mode=importlib"]
    out, before = io.StringIO(), set(sys.modules)
    try:
        with contextlib.redirect_stdout(out):
            code = pytest.main(args, plugins=[collector])
    finally:  # the test modules this run imported (a failed import leaves an empty one): the next run imports afresh
        for name in set(sys.modules) - before:
            file = getattr(sys.modules[name], "__file__", None)
            if file and Path(file).resolve().is_relative_to(path.parent.resolve()):
                del sys.modules[name]
    if code not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED, pytest.ExitCode.NO_TESTS_COLLECTED):
        lines = [line for line in out.getvalue().splitlines() if line.strip()]
        raise RuntimeError(f"the claims' tests in {path} did not run (pytest exit {int(code)}): "
                           + " / ".join(lines[-3:]))
    return collector.rows

