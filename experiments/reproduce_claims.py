"""One row per claim of docs/claims.md: ID, what was checked, expected, measured, status.

``python -m experiments.reproduce_claims`` prints the table and exits 1 if any row is FAIL;
``--only C9 C13`` runs those rows only; ``--docs`` runs the closed-form rows and writes their table
into docs/claims.md (``--docs FILE``: into FILE; tests/claims/test_claims_docs.py fails when the
page's table drifts from the tests).

:data:`CLAIMS` maps each claim ID to where its row comes from. A closed-form claim (:data:`TAGGED`)
is its test in tests/claims/test_closed_form.py, tagged ``@pytest.mark.claim("Cn")``, which holds
its expected numbers; :mod:`experiments.claims.tagged` runs the tagged tests in this process and
makes each a row (PASS when the test passes). An empirical claim is a measurement
(``experiments/claims/``: the real envs, rollout engine, trainers and training entry point) that
returns its claim's result (:class:`experiments.claims.result.ClaimResult`, the class its return
annotation names), which carries the row's texts ``what`` / ``expected`` / ``measured``, its
``kind`` and its pass rule (``passes()``), beside the measurement. A measurement that raises, or a
status outside ``STATUSES``, is a FAIL row, not a crash. OPTIONAL rows do not fail the run.
"""

from __future__ import annotations

import argparse
import inspect
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from experiments.claims import boundaries, compare, groups, multiagent, process, roles
from experiments.claims import envs as env_claims
from experiments.claims.result import CLOSED_FORM, EMPIRICAL, FAIL, OPTIONAL, PASS, STATUSES, ClaimResult
from experiments.claims.tagged import TESTS, run_tagged

__all__ = ["CLAIMS", "DOCS", "FAIL", "OPTIONAL", "PASS", "STATUSES", "TAGGED", "Measure", "Row", "closed_form_rows",
           "docs_table", "main", "result_type", "rows", "run_claim", "table", "with_docs_table"]

#: A claim's measurement: no arguments, returns its claim's result.
Measure = Callable[[], ClaimResult]


class Tagged:
    """Where a closed-form claim's row comes from: its test tagged ``@pytest.mark.claim(ID)`` in
    tests/claims/test_closed_form.py (:mod:`experiments.claims.tagged`)."""

    def __repr__(self) -> str:
        return "TAGGED"


TAGGED = Tagged()

CLAIMS: dict[str, Measure | Tagged] = {
    "C1": TAGGED,
    "C2": TAGGED,
    "C3": TAGGED,
    "C4": TAGGED,
    "C5": TAGGED,
    "C6": groups.measure_c6,
    "C7": roles.measure_c7,
    "C8": roles.measure_c8,
    "C9": env_claims.measure_c09,
    "C10": env_claims.measure_c10,
    "C11": env_claims.measure_c11,
    "C12": groups.measure_c12,
    "C13": groups.measure_c13,
    "C14": groups.measure_c14,
    "C15": TAGGED,
    "C16": TAGGED,
    "C17": boundaries.measure_c17,
    "C18": TAGGED,
    "C19": compare.measure_c19,
    "C20": compare.measure_c20,
    "C21": env_claims.measure_c21,
    "C22": multiagent.measure_c22,
    "C23": env_claims.measure_c23,
    "C24": process.measure_c24,
    "C25": TAGGED,
}

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs" / "claims.md"
DOCS_BEGIN = "<!-- the closed-form rows, written by `python -m experiments.reproduce_claims --docs` -->"
DOCS_END = "<!-- end of the closed-form rows -->"


@dataclass(frozen=True)
class Row:
    """One row of the claims table; ``claim`` is the claim in short (a tagged test's docstring)."""

    what: str
    expected: str
    measured: str
    status: str
    kind: str
    claim: str = ""


def result_type(measure: Measure) -> type[ClaimResult]:
    """The result class ``measure`` returns, read from its return annotation (so a row's
    ``what``, ``expected`` and ``kind`` are known without running it); ``TypeError`` when the
    annotation is not a :class:`ClaimResult` subclass."""
    kind = inspect.signature(measure, eval_str=True).return_annotation
    if not (isinstance(kind, type) and issubclass(kind, ClaimResult)):
        raise TypeError(f"{getattr(measure, '__qualname__', measure)!r} must be annotated to return a "
                        f"ClaimResult subclass, not {kind!r}")
    return kind


def run_claim(measure: Measure) -> tuple[str, str]:
    """``(measured, status)`` of the result ``measure()`` returns, with an exception or an unknown
    status turned into a FAIL row."""
    try:
        result = measure()
        text, status = result.measured, result.status()
    except Exception as exc:  # a crashing measurement is a failed claim, reported in its row
        return f"check raised {type(exc).__name__}: {exc}", FAIL
    if status not in STATUSES:
        return f"check returned unknown status {status!r} ({text})", FAIL
    return text, status


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def summary_line(kinds: Mapping[str, str], statuses: Mapping[str, str]) -> str:
    """``closed-form: n/m PASS, empirical: n/m PASS, optional: k`` over the rows' ``kinds`` and
    ``statuses`` (by claim ID); OPTIONAL rows count in neither kind."""
    parts = []
    for kind in (CLOSED_FORM, EMPIRICAL):
        ran = [status for cid, status in statuses.items() if kinds[cid] == kind and status in (PASS, FAIL)]
        parts.append(f"{kind}: {ran.count(PASS)}/{len(ran)} PASS")
    parts.append(f"optional: {list(statuses.values()).count(OPTIONAL)}")
    return ", ".join(parts)


def rows(claims: Mapping[str, Measure | Tagged]) -> dict[str, Row]:
    """The row of each claim, in ``claims``' order: the :data:`TAGGED` ones from one run of their
    tagged tests (a claim with no tagged test is a FAIL row), the others from their measurements
    (their result classes read first, so a malformed one raises before any row runs)."""
    types = {cid: result_type(m) for cid, m in claims.items() if m is not TAGGED}
    tagged_ids = [cid for cid, m in claims.items() if m is TAGGED]
    try:
        tagged, broken = (run_tagged(tagged_ids) if tagged_ids else {}), ""
    except RuntimeError as exc:  # the tests could not run: every tagged row FAILs with why
        tagged, broken = {}, f"check raised RuntimeError: {exc}"
    out = {}
    for cid, measure in claims.items():
        if measure is TAGGED:
            t = tagged.get(cid)
            missing = broken or f"no test tagged claim({cid!r}) in {TESTS.relative_to(ROOT)}"
            out[cid] = (Row(t.what, t.expected, t.measured, t.status, CLOSED_FORM, t.claim) if t is not None else
                        Row("", "", missing, FAIL, CLOSED_FORM))
        else:
            row = types[cid]
            out[cid] = Row(row.what, row.expected, *run_claim(measure), row.kind)
    return out


def table(done: Mapping[str, Row]) -> str:
    """The claims table: one markdown row per claim (ID, what was checked, expected, measured, status)."""
    lines = ["| ID | what was checked | expected | measured | status |", "|---|---|---|---|---|"]
    lines += [f"| {cid} | {_cell(r.what)} | {_cell(r.expected)} | {_cell(r.measured)} | {r.status} |"
              for cid, r in done.items()]
    return "\n".join(lines)


def docs_table(done: Mapping[str, Row]) -> str:
    """The closed-form table of docs/claims.md: ID, the claim in short, what was checked, expected,
    measured, status."""
    lines = ["| ID | the claim, in short | checked on | expected | measured | status |", "|---|---|---|---|---|---|"]
    lines += [f"| {cid} | {_cell(r.claim)} | {_cell(r.what)} | {_cell(r.expected)} | {_cell(r.measured)} | {r.status} |"
              for cid, r in done.items()]
    return "\n".join(lines)


def with_docs_table(text: str, table_text: str) -> str:
    """``text`` (docs/claims.md) with the lines strictly between :data:`DOCS_BEGIN` and :data:`DOCS_END`
    replaced by ``table_text``; ``ValueError`` when the two marker lines are not there once each,
    in order."""
    lines = text.split("\n")
    if lines.count(DOCS_BEGIN) != 1 or lines.count(DOCS_END) != 1 or lines.index(DOCS_BEGIN) > lines.index(DOCS_END):
        raise ValueError(f"the page must hold the lines {DOCS_BEGIN!r} and {DOCS_END!r} once each, in that order")
    begin, end = lines.index(DOCS_BEGIN), lines.index(DOCS_END)
    return "\n".join(lines[:begin + 1] + table_text.split("\n") + lines[end:])


def closed_form_rows() -> dict[str, Row]:
    """The rows of the closed-form claims of :data:`CLAIMS` (their tagged tests)."""
    return rows({cid: m for cid, m in CLAIMS.items() if m is TAGGED})


def main(claims: Mapping[str, Measure | Tagged] | None = None, argv: Sequence[str] | None = None) -> int:
    """Print the claims table (markdown) and a summary line; return 1 if any row is FAIL, else 0.
    ``argv``: the command line (``--only ID ...``; ``--docs [FILE]``: the closed-form rows only,
    their table also written into FILE, docs/claims.md by default); an unknown ID exits 2 before any
    row runs."""
    claims = CLAIMS if claims is None else claims
    parser = argparse.ArgumentParser(prog="python -m experiments.reproduce_claims",
                                     description="One row per claim of docs/claims.md; exit 1 if any row is FAIL.")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--only", nargs="+", metavar="ID", help="run these claim IDs only (e.g. C9 C13)")
    which.add_argument("--docs", nargs="?", const=DOCS, type=Path, metavar="FILE",
                       help="run the closed-form claims only and write their table into FILE (default docs/claims.md)")
    args = parser.parse_args([] if argv is None else list(argv))
    if args.only:
        unknown = [cid for cid in args.only if cid not in claims]
        if unknown:
            parser.error(f"--only {' '.join(unknown)} unknown; allowed: {', '.join(claims)}")
        claims = {cid: claims[cid] for cid in claims if cid in args.only}
    if args.docs is not None:
        try:
            page = with_docs_table(args.docs.read_text(), "")  # the markers are there, before any row runs
        except (OSError, ValueError) as exc:
            parser.error(f"--docs {args.docs}: {exc}")
        claims = {cid: m for cid, m in claims.items() if m is TAGGED}
    done = rows(claims)
    print(table(done))
    print()
    print(summary_line({cid: r.kind for cid, r in done.items()}, {cid: r.status for cid, r in done.items()}))
    if args.docs is not None:
        args.docs.write_text(with_docs_table(page, docs_table(done)))
        print(f"wrote the closed-form table into {args.docs}")
    return 1 if any(r.status == FAIL for r in done.values()) else 0


if __name__ == "__main__":
    sys.exit(main(argv=sys.argv[1:]))
