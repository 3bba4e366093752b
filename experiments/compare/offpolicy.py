"""``python -m experiments.compare --preset horizon --horizons 8,32 --off-policy``: the off-policy
map, one horizon sweep per (horizon, setting) cell, then the off-policy report.

A setting (:class:`experiments.report.offpolicy.Setting`) is ``rollout.staleness=k`` x
``rollout.sampler_dtype`` x ``algo.off_policy_correction``; ``--off-policy`` alone runs the map's
grid, staleness {0, 1, 2, 4} x sampler {float32, bfloat16} x correction {none, decoupled (token
TIS), token-mask}, and ``--off-policy staleness=0,1 sampler_dtype=float32 correction=none,decoupled``
narrows it (each key optional; :func:`parse_off_policy`). Cells that cannot differ run once: at
staleness 0 with a float32 sampler the behaviour policy is the old policy (rho = 1 up to float
rounding, and each correction weighs a token 1 at rho = 1), so that row is one cell, the baseline
``k0-float32-none`` (:func:`experiments.report.offpolicy.grid_settings`); it runs at every horizon
whether or not the grid names staleness 0. The full grid is 1 + 3 + 3 x 6 = 22 cells per horizon.

Cell ``(h, s)`` is the horizon preset's sweep at ``h`` decisions
(:func:`experiments.compare.horizons.horizon_overrides`) with ``s``'s overrides, in
``<sweep-dir>/offpolicy/n<h>/<s.name>`` (``k2-bfloat16-token-mask``). From staleness 1 on a cell
runs ``rollout.mode=async`` (a sampler process beside the trainer: the numbers of the synchronous
run with the same lag, its own wall time); its runs take 2 processes, so such a cell's joblib sweep
runs one job at a time, and so do the synchronous cells (:func:`cell_jobs`), so every run's wall
seconds are measured with the machine to itself.
Cells run horizon-major, the baseline of each horizon first. A progress bar over the cells,
weighted by the turns of a cell's episodes (``h + 2``), gives the time left at this invocation's
pace. Last: :func:`experiments.report.offpolicy.render_offpolicy_report` writes ``offpolicy.md`` and
``offpolicy_n<h>.png`` into ``<sweep-dir>/offpolicy``. Re-running the same command resumes:
finished runs only rewrite their summary.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from algos.corrections import CORRECTIONS as REGISTERED_CORRECTIONS
from experiments.compare.cells import run_cells
from experiments.report.offpolicy import (CORRECTION_KEY, CORRECTIONS, DTYPE_KEY, DTYPES, MODE_KEY, STALENESS,
                                          STALENESS_KEY, Setting, grid_settings)
from experiments.runtime.schema import SAMPLER_DTYPES

#: the directory of the cells under ``--sweep-dir``
OFFPOLICY_DIR = "offpolicy"
#: joblib jobs of an asynchronous cell's sweep (each run is a trainer and a sampler process)
ASYNC_JOBS = 1
#: the knobs the cells set; an override of one after ``--`` is refused
CELL_KEYS = (STALENESS_KEY, MODE_KEY, DTYPE_KEY, CORRECTION_KEY)
GRID_KEYS = ("staleness", "sampler_dtype", "correction")


class OffPolicyError(ValueError):
    """A one-line explanation of an invalid ``--off-policy``."""


def _values(key: str, text: str) -> tuple:
    """One ``key=v1,v2`` item's distinct values, checked against what ``key`` allows."""
    items = tuple(v.strip() for v in text.split(","))
    if key == "staleness":
        if not all(v.isdigit() for v in items) or len(set(map(int, items))) != len(items):
            raise OffPolicyError(f"--off-policy staleness={text!r} invalid; allowed: distinct comma-separated ints "
                                 ">= 0, e.g. staleness=0,1,2,4")
        return tuple(int(v) for v in items)
    allowed = SAMPLER_DTYPES if key == "sampler_dtype" else tuple(REGISTERED_CORRECTIONS)
    bad = [v for v in items if v not in allowed]
    if bad or len(set(items)) != len(items):
        raise OffPolicyError(f"--off-policy {key}={text!r} invalid; allowed: distinct comma-separated values of "
                             f"{', '.join(allowed)}")
    return items


def parse_off_policy(items: Sequence[str], horizons: Sequence[int], check_probs: Sequence[float],
                     launcher: str | None, overrides: Sequence[str]) -> list[Setting]:
    """``["staleness=0,1", "correction=none"]`` -> the grid's settings (:func:`grid_settings`; a
    key not given keeps the map's values); :class:`OffPolicyError` without ``--horizons``, with
    ``--check-probs``, with the Ray launcher, or with an override of a knob the cells set."""
    if not horizons:
        raise OffPolicyError("--off-policy needs --horizons (one row of cells per horizon), e.g. --horizons 8,32")
    if check_probs:
        raise OffPolicyError("--off-policy and --check-probs are two maps; give one of them")
    if launcher == "ray":
        raise OffPolicyError("--off-policy runs its asynchronous cells one job at a time; allowed launchers: joblib "
                             "(the default)")
    given = next((o for o in overrides if o.lstrip("+").split("=", 1)[0] in CELL_KEYS), None)
    if given is not None:
        raise OffPolicyError(f"override {given!r} sets a knob every --off-policy cell sets; allowed: none of "
                             f"{', '.join(CELL_KEYS)} (narrow the grid with --off-policy staleness=... instead)")
    grid = {"staleness": STALENESS, "sampler_dtype": DTYPES, "correction": CORRECTIONS}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or key not in GRID_KEYS:
            raise OffPolicyError(f"--off-policy {item!r} invalid; allowed: key=v1,v2 items with key one of "
                                 f"{', '.join(GRID_KEYS)}, e.g. staleness=0,1 correction=none")
        grid[key] = _values(key, text)
    return grid_settings(grid["staleness"], grid["sampler_dtype"], grid["correction"])


def offpolicy_cells(horizons: Sequence[int], settings: Sequence[Setting]) -> list[tuple[int, Setting]]:
    """The cells in run order: horizon-major, each horizon's settings in ``settings``' order
    (:func:`grid_settings`: the baseline first)."""
    return [(h, s) for h in sorted(horizons) for s in settings]


def cell_dir(sweep_dir: Path, horizon: int, setting: Setting) -> Path:
    return sweep_dir / OFFPOLICY_DIR / f"n{horizon}" / setting.name


def cell_jobs(setting: Setting, launcher: str, jobs: int | None) -> int | None:
    """``--jobs`` of the cell's sweep on joblib: :data:`ASYNC_JOBS` for every cell, synchronous
    ones included, so each run has the machine to itself and the wall-time axis compares a
    one-process run with a two-process one, not a run sharing its cores with a neighbour (the basic
    launcher runs one job at a time already)."""
    return ASYNC_JOBS if launcher == "joblib" else jobs


def run_offpolicy(cells: Sequence[tuple[int, Setting]], sweep_dir: Path,
                  run_cell: Callable[[Path, int, Setting], int]) -> int:
    """Run ``run_cell(dir, horizon, setting) -> exit code`` per cell
    (:func:`experiments.compare.cells.run_cells`); the first failing cell's code."""
    return run_cells("off-policy", cells, lambda h, s: (cell_dir(sweep_dir, h, s), f"{h} decisions, {s.name} ({s.mode})"),
                     run_cell)


def render_offpolicy(sweep_dir: Path, methods: Sequence[str]) -> int:
    """``offpolicy.md`` and the figures from every cell under ``<sweep_dir>/offpolicy``; printed."""
    from experiments.report import ReportError
    from experiments.report.offpolicy import render_offpolicy_report

    try:
        markdown, pngs, _ = render_offpolicy_report([sweep_dir / OFFPOLICY_DIR], None, methods)
    except ReportError as e:
        print(f"compare: off-policy report failed: {e}", file=sys.stderr)
        return 2
    print(markdown)
    print(f"\noff-policy map: {sweep_dir / OFFPOLICY_DIR / 'offpolicy.md'}; figures {', '.join(p.name for p in pngs)}",
          file=sys.stderr)
    return 0


__all__ = ["ASYNC_JOBS", "CELL_KEYS", "OFFPOLICY_DIR", "OffPolicyError", "cell_dir", "cell_jobs", "offpolicy_cells",
           "parse_off_policy", "render_offpolicy", "run_offpolicy"]
