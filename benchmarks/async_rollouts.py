"""The body of ``python -m benchmarks async``: what a sampler process buys in wall time.

The same run (config and seed) twice per repeat, side by side: ``rollout.mode=sync`` with the
simulated lag ``rollout.staleness=k`` (collect, then update, one process) and
``rollout.mode=async`` with the same ``k`` (a sampler process collects the next batch while the
trainer updates). Both sample batch ``u`` with version ``max(0, u - k)``, so their metrics must
be equal (wall-clock keys aside; printed as a check), and only the wall clock differs.

Printed per mode: the median over repeats of the wall seconds of the updates (the run's
``compute/wall_seconds``: collection and update, evaluations left out) per update, and for async
the trainer's mean wait for a batch and the sampler's mean wait for weights; then the ratio sync /
async (above 1: async is faster). Each run is a ``python -m experiments.train`` subprocess with one
torch thread (the sampler process takes one more), in a temporary run directory.

The default run is the horizon preset at 8 decisions (GRPO, its 2048 rollouts: 32 updates, evaluation
only at the end, the map's 4000-demo warm start); ``--quick`` is a tiny PPO run for tests.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from algos import metric_keys as mk
from experiments.runtime.loop import KILL_AFTER_UPDATE_ENV

DEFAULT_RUN = ("experiment=compare_horizon", "env.kwargs.n_stages=8", "warmstart.demos=4000", "algo=grpo",
               "budget.amount=2048", "eval.every=0", "eval.tasks=40")
QUICK_RUN = ("experiment=tiny", "env=bugfix", "algo=ppo", "budget.amount=40", "algo.tasks_per_update=8", "algo.group_size=1",
             "eval.every=0")
MODES = ("sync", "async")
WALL_KEYS = (mk.COMPUTE_WALL_SECONDS, mk.ROLLOUT_COLLECT_SECONDS, mk.ROLLOUT_GENERATED_TOKENS_PER_SECOND,
             mk.TRAIN_UPDATE_SECONDS, mk.ASYNC_TRAINER_WAIT_SECONDS, mk.ASYNC_SAMPLER_WAIT_SECONDS)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--staleness", type=int, default=1, help="rollout.staleness of both modes (>= 1; default 1)")
    p.add_argument("--repeats", type=int, default=3, help="runs per mode (median; default 3)")
    p.add_argument("--quick", action="store_true", help="a tiny PPO run in place of the default one (tests)")
    p.add_argument("overrides", nargs="*", help="extra Hydra overrides for both modes' runs")


def train_once(run: list[str], mode: str, run_dir: Path) -> list[dict]:
    """One ``experiments.train`` subprocess of ``run`` in ``mode``; its metrics lines."""
    env = {k: v for k, v in os.environ.items() if k != KILL_AFTER_UPDATE_ENV}
    cmd = [sys.executable, "-m", "experiments.train", *run, f"rollout.mode={mode}", f"run_dir={run_dir}",
           "logger.kind=none", "progress=false", "threads=1"]
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**env, "OMP_NUM_THREADS": "1"})
    if proc.returncode != 0:
        raise SystemExit(f"bench async: {' '.join(cmd[2:])} failed: {proc.stderr.strip().splitlines()[-1:]}")
    return [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]


def without_wall(lines: list[dict]) -> list[dict]:
    return [{k: v for k, v in line.items() if k not in WALL_KEYS} for line in lines]


def per_update(lines: list[dict], key: str) -> float:
    """Mean of ``key`` over the lines, or for ``compute/wall_seconds`` (cumulative) its last value per update."""
    if key == mk.COMPUTE_WALL_SECONDS:
        return lines[-1][key] / len(lines)
    return statistics.fmean(line[key] for line in lines)


def run(args: argparse.Namespace) -> int:
    if args.staleness < 1 or args.repeats < 1:
        raise SystemExit(f"bench async: --staleness={args.staleness} and --repeats={args.repeats}; allowed: >= 1 each")
    config = [*(QUICK_RUN if args.quick else DEFAULT_RUN), f"rollout.staleness={args.staleness}", *args.overrides]
    walls: dict[str, list[float]] = {m: [] for m in MODES}
    waits: dict[str, list[float]] = {mk.ASYNC_TRAINER_WAIT_SECONDS: [], mk.ASYNC_SAMPLER_WAIT_SECONDS: []}
    equal = True
    with tempfile.TemporaryDirectory(prefix="bench-async-") as tmp:
        for r in range(args.repeats):
            lines = {m: train_once(config, m, Path(tmp) / f"{m}-{r}") for m in MODES}
            equal &= without_wall(lines["sync"]) == without_wall(lines["async"])
            for m in MODES:
                walls[m].append(per_update(lines[m], mk.COMPUTE_WALL_SECONDS))
            for key in waits:
                waits[key].append(per_update(lines["async"], key))
            print(f"repeat {r + 1}/{args.repeats}: " + ", ".join(f"{m} {walls[m][-1]:.2f} s/update" for m in MODES),
                  flush=True)
    sync, asyn = statistics.median(walls["sync"]), statistics.median(walls["async"])
    print(f"\nrun: {' '.join(config)} ({len(lines['sync'])} updates, median of {args.repeats})")
    print("| mode | wall s / update | trainer waits s / update | sampler waits s / batch |\n|---|---|---|---|")
    print(f"| sync (simulated lag {args.staleness}) | {sync:.2f} | - | - |")
    trainer_wait, sampler_wait = (statistics.median(waits[k]) for k in (mk.ASYNC_TRAINER_WAIT_SECONDS,
                                                                         mk.ASYNC_SAMPLER_WAIT_SECONDS))
    print(f"| async (staleness {args.staleness}) | {asyn:.2f} | {trainer_wait:.2f} | {sampler_wait:.2f} |")
    print(f"ratio sync / async: {sync / asyn:.2f}x; metrics equal (wall-clock keys aside): {'yes' if equal else 'NO'}")
    return 0 if equal else 1


__all__ = ["DEFAULT_RUN", "QUICK_RUN", "add_arguments", "run"]
