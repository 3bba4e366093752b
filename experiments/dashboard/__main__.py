"""``python -m experiments.dashboard SWEEP_DIR [--apply]``: the command line of
:mod:`experiments.dashboard` (its docstring says what the workspace and report hold)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from experiments.dashboard import (DEFAULT_PROJECT, OFFLINE_ENTITY, build_report, build_workspace, logged_in,
                                   sweep_group, write_specs)
from experiments.report.load import load_runs


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.dashboard",
                                     description="The W&B workspace and report of a compare sweep, built offline "
                                                 "(--apply saves them).")
    parser.add_argument("sweep_dir", help="a compare sweep directory (runs/compare/<sweep>)")
    parser.add_argument("--apply", action="store_true", help="save the workspace and report to W&B (after wandb sync)")
    parser.add_argument("--entity", default=os.environ.get("WANDB_ENTITY", OFFLINE_ENTITY), help="W&B entity")
    parser.add_argument("--project", default=os.environ.get("WANDB_PROJECT", DEFAULT_PROJECT), help="W&B project")
    args = parser.parse_args(argv)
    try:
        import wandb_workspaces  # noqa: F401
    except ImportError:
        print("dashboard: needs wandb-workspaces; allowed: pip install -e '.[dashboard]'", file=sys.stderr)
        return 2
    if args.apply and (not logged_in() or args.entity == OFFLINE_ENTITY):
        print("dashboard: --apply needs a W&B login (wandb login or WANDB_API_KEY), --entity or WANDB_ENTITY, and the "
              "runs synced (wandb sync <sweep>/*/wandb/offline-run-*)", file=sys.stderr)
        return 2
    try:
        workspace, report = write_specs(args.sweep_dir, args.entity, args.project)
    except (ValueError, OSError) as e:
        print(f"dashboard: {e}", file=sys.stderr)
        return 2
    print(f"workspace spec {workspace}\nreport spec {report}")
    if args.apply:
        runs = load_runs(args.sweep_dir)
        name = f"{Path(args.sweep_dir).name} ({sweep_group(runs)})"
        print(f"saved workspace {build_workspace(runs, args.entity, args.project, name).save().url}")
        report = build_report(runs, Path(args.sweep_dir), args.entity, args.project, name, bind=True)
        print(f"saved report {report.save().url}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
