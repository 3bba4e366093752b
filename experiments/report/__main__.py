"""``python -m experiments.report DIR [--title T] [--methods A,B,...] [--no-references]``: render the report of the sweep in ``DIR``
(exit 2 with a one-line ``report: ...`` error when a run breaks the contract)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from experiments.report.keys import ReportError
from experiments.report.markdown import render_report


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Render the compute-matched comparison report from any sweep directory.")
    parser.add_argument("sweep_dir", help="directory searched recursively for run directories")
    parser.add_argument("--title", default=None)
    parser.add_argument("--methods", default=None,
                        help="comma-separated method order; the first is the Conclusion's baseline (default grpo, ppo, rest by name)")
    parser.add_argument("--no-references", action="store_true",
                        help="skip the scripted floor / ceiling rows (keep the start model's)")
    args = parser.parse_args(argv)
    try:
        methods = [m.strip() for m in args.methods.split(",")] if args.methods else None
        report = render_report(args.sweep_dir, title=args.title, references=not args.no_references, methods=methods)
    except ReportError as e:
        print(f"report: {e}", file=sys.stderr)
        return 2
    print(report.markdown)
    print(f"\n[report written to {report.path}]", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
