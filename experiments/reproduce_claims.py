"""One row per claim of docs/claims.md: ID, what was checked, expected, measured, status.

``python -m experiments.reproduce_claims`` prints the table and exits 1 if any row is FAIL;
``--only C9 C13`` runs those rows only.

:data:`CLAIMS` maps each claim ID to its measurement (``experiments/claims/``: closed-form rows on
hand-sized inputs through ``algos``, empirical rows on the real envs, rollout engine, trainers and
training entry point). A measurement returns its claim's result
(:class:`experiments.claims.result.ClaimResult`, the class its return annotation names), which
carries the row's texts ``what`` / ``expected`` / ``measured``, its ``kind`` and its status
(``passes()``). A measurement that raises, or a status outside ``STATUSES``, is a FAIL row, not a
crash. OPTIONAL rows do not fail the run.
"""

from __future__ import annotations

import argparse
import inspect
import sys
from collections.abc import Callable, Mapping, Sequence

from experiments.claims import boundaries, closed_form, compare, groups, multiagent, process, roles
from experiments.claims import envs as env_claims
from experiments.claims.result import CLOSED_FORM, EMPIRICAL, FAIL, OPTIONAL, PASS, STATUSES, ClaimResult

__all__ = ["CLAIMS", "FAIL", "OPTIONAL", "PASS", "STATUSES", "Measure", "main", "result_type", "run_claim"]

#: A claim's measurement: no arguments, returns its claim's result.
Measure = Callable[[], ClaimResult]

CLAIMS: dict[str, Measure] = {
    "C1": closed_form.measure_c1,
    "C2": closed_form.measure_c2,
    "C3": closed_form.measure_c3,
    "C4": closed_form.measure_c4,
    "C5": closed_form.measure_c5,
    "C6": groups.measure_c6,
    "C7": roles.measure_c7,
    "C8": roles.measure_c8,
    "C9": env_claims.measure_c09,
    "C10": env_claims.measure_c10,
    "C11": env_claims.measure_c11,
    "C12": groups.measure_c12,
    "C13": groups.measure_c13,
    "C14": groups.measure_c14,
    "C15": closed_form.measure_c15,
    "C16": closed_form.measure_c16,
    "C17": boundaries.measure_c17,
    "C18": closed_form.measure_c18,
    "C19": compare.measure_c19,
    "C20": compare.measure_c20,
    "C21": env_claims.measure_c21,
    "C22": multiagent.measure_c22,
    "C23": env_claims.measure_c23,
    "C24": process.measure_c24,
    "C25": closed_form.measure_c25,
}


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


def main(claims: Mapping[str, Measure] | None = None, argv: Sequence[str] | None = None) -> int:
    """Print the claims table (markdown) and a summary line; return 1 if any row is FAIL, else 0.
    ``argv``: the command line (``--only ID ...``); an unknown ID exits 2 before any row runs."""
    claims = CLAIMS if claims is None else claims
    parser = argparse.ArgumentParser(prog="python -m experiments.reproduce_claims",
                                     description="One row per claim of docs/claims.md; exit 1 if any row is FAIL.")
    parser.add_argument("--only", nargs="+", metavar="ID", help="run these claim IDs only (e.g. C9 C13)")
    args = parser.parse_args([] if argv is None else list(argv))
    if args.only:
        unknown = [cid for cid in args.only if cid not in claims]
        if unknown:
            parser.error(f"--only {' '.join(unknown)} unknown; allowed: {', '.join(claims)}")
        claims = {cid: claims[cid] for cid in claims if cid in args.only}
    types = {cid: result_type(measure) for cid, measure in claims.items()}
    results = {cid: run_claim(measure) for cid, measure in claims.items()}
    print("| ID | what was checked | expected | measured | status |")
    print("|---|---|---|---|---|")
    for cid, (text, status) in results.items():
        row = types[cid]
        print(f"| {cid} | {_cell(row.what)} | {_cell(row.expected)} | {_cell(text)} | {status} |")
    statuses = {cid: status for cid, (_, status) in results.items()}
    print()
    print(summary_line({cid: row.kind for cid, row in types.items()}, statuses))
    return 1 if FAIL in statuses.values() else 0


if __name__ == "__main__":
    sys.exit(main(argv=sys.argv[1:]))
