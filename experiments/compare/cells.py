"""One loop for the compare job's grids of cells (the horizon x ``check_prob`` map, the off-policy
map): each cell is one horizon sweep in its own directory, run in order with a progress bar
weighted by the turns a cell's episodes take (``h + 2`` for ``h`` decisions: a run's cost grows
with its turns) and the time left at this invocation's pace; the first failing cell's exit code
stops the grid (later cells are not started)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from tqdm import tqdm

Cell = TypeVar("Cell")


def run_cells(label: str, cells: Sequence[tuple[int, Cell]], place: Callable[[int, Cell], tuple[Path, str]],
              run_cell: Callable[[Path, int, Cell], int]) -> int:
    """Run ``run_cell(dir, horizon, cell) -> exit code`` for each ``(horizon, cell)`` in order;
    ``place(horizon, cell)`` gives the cell's directory and the words that name it. Returns 0, or
    the first non-zero code."""
    weights = [h + 2 for h, _ in cells]
    total, spent, done_weight = sum(weights), 0.0, 0
    with tqdm(total=total, desc=label, unit="turn", file=sys.stderr, disable=None) as bar:
        for (h, cell), w in zip(cells, weights):
            sub, name = place(h, cell)
            print(f"\n== {label} cell: {name}: {sub}", flush=True)
            t0 = time.perf_counter()
            code = run_cell(sub, h, cell)
            if code != 0:
                return code
            spent += time.perf_counter() - t0
            done_weight += w
            bar.update(w)
            left = spent / done_weight * (total - done_weight)
            print(f"{label}: {done_weight}/{total} turn-weighted cells done; about {left / 60:.0f} min left at "
                  f"this invocation's pace", file=sys.stderr, flush=True)
    return 0


__all__ = ["run_cells"]
