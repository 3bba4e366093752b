"""``python -m experiments.compare --preset horizon --horizons 8,32,64 --check-probs 0,0.5,1``: the
map of horizon x observability of progress, one horizon sweep per cell, then the map report.

Cell ``(h, p)`` is the horizon preset's sweep at ``h`` decisions (:func:`horizon_overrides`) with
``++env.kwargs.check_prob=p`` (LongHorizon-v3: after each decision a check line reports, with
probability ``p``, whether a wrong fix has happened), in ``<sweep-dir>/p<p>/n<h>``. Cells run
horizon-major (every ``check_prob`` of the shortest horizon first, the cheap cells), so an
interrupted map has whole rows. After each cell: when the sweep has a learned critic (a method
with ``traits.critic``) and the cell has no ``value_ceiling.json`` yet, the explained-variance
ceiling EV* of its first seed's run (``python -m experiments.value_ceiling RUN --out
<cell>/value_ceiling.json``). A progress bar over the cells, weighted by the turns a cell's
episodes take (``h + 2``: a run's cost grows with its turns), gives the time left from the cells
this invocation ran. Last: :func:`experiments.report.map.render_map_report` writes ``map.md`` and
one heat map per method into ``<sweep-dir>``. Re-running the same command resumes: finished runs
only rewrite their summary, an existing ``value_ceiling.json`` is kept.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from experiments.compare.cells import run_cells
from experiments.report.map import CEILING_FILE as VALUE_CEILING_FILE
from experiments.report.map import CHECK_PROB_KEY


class MapError(ValueError):
    """A one-line explanation of an invalid ``--check-probs``."""


def parse_check_probs(text: str, horizons: Sequence[int]) -> tuple[float, ...]:
    """``"0,0.5,1"`` -> ``(0.0, 0.5, 1.0)``: distinct numbers in [0, 1], with ``--horizons`` only."""
    if not horizons:
        raise MapError("--check-probs needs --horizons (the map's rows), e.g. --horizons 8,32,64")
    try:
        values = tuple(float(x) for x in text.split(","))
    except ValueError:
        raise MapError(f"--check-probs={text!r} invalid; allowed: comma-separated numbers in [0, 1], e.g. 0,0.5,1") from None
    if not values or any(not 0.0 <= v <= 1.0 for v in values) or len(set(values)) != len(values):
        raise MapError(f"--check-probs={text!r} invalid; allowed: distinct comma-separated numbers in [0, 1], e.g. 0,0.5,1")
    return values


def prob_text(p: float) -> str:
    """``0.0`` -> ``"0"``, ``0.5`` -> ``"0.5"``: the override's value and the directory's suffix."""
    return f"{p:g}"


def cell_dir(sweep_dir: Path, check_prob: float, horizon: int) -> Path:
    return sweep_dir / f"p{prob_text(check_prob)}" / f"n{horizon}"


def check_prob_override(check_prob: float) -> str:
    return f"++{CHECK_PROB_KEY}={prob_text(check_prob)}"


def map_cells(horizons: Sequence[int], check_probs: Sequence[float]) -> list[tuple[int, float]]:
    """The cells in run order: horizon-major, each in the order given."""
    return [(h, p) for h in sorted(horizons) for p in check_probs]


#: ``experiments.value_ceiling`` arguments of a ``--tiny`` map (seconds; the defaults otherwise)
TINY_CEILING_ARGS = ("--rollouts", "4", "--points", "4", "--branches", "2", "--boot", "50")


def ceiling_command(cell: Path, extra: Sequence[str] = (), python: str = sys.executable) -> list[str] | None:
    """``experiments.value_ceiling`` on the cell's first critic run (by name: ``*-s<lowest seed>``),
    or None when the cell has its ``value_ceiling.json`` or no run with a checkpoint."""
    from algos.registry import load_builtin_trainers, trainer_traits

    if (cell / VALUE_CEILING_FILE).exists():
        return None
    critics = {m for m in load_builtin_trainers() if trainer_traits(m).critic}
    runs = [d for d in cell.iterdir() if d.is_dir() and (d / "checkpoints" / "last.pt").exists()
            and d.name.rsplit("-s", 1)[0].split("-", 1)[-1] in critics]
    if not runs:
        return None
    first = min(runs, key=lambda d: (int(d.name.rsplit("-s", 1)[1]), d.name))
    return [python, "-m", "experiments.value_ceiling", str(first), "--out", str(cell / VALUE_CEILING_FILE), *extra]


def run_map(cells: Sequence[tuple[int, float]], sweep_dir: Path, run_cell: Callable[[Path, int, float], int],
            ceiling: Callable[[Path], int]) -> int:
    """Run ``run_cell(dir, horizon, check_prob) -> exit code`` and then ``ceiling(dir)`` per cell
    (:func:`experiments.compare.cells.run_cells`); the first failing cell's code."""
    return run_cells("map", cells, lambda h, p: (cell_dir(sweep_dir, p, h), f"{h} decisions, check_prob {prob_text(p)}"),
                     lambda sub, h, p: run_cell(sub, h, p) or ceiling(sub))


def run_ceiling(cell: Path, extra: Sequence[str] = ()) -> int:
    """The cell's EV* (:func:`ceiling_command`), its output kept in ``<cell>/value_ceiling.log``."""
    cmd = ceiling_command(cell, extra)
    if cmd is None:
        return 0
    print("value ceiling: " + " ".join(cmd), flush=True)
    with open(cell / "value_ceiling.log", "w") as log:
        return subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT).returncode


def render_map(sweep_dir: Path, methods: Sequence[str]) -> int:
    """``map.md`` and the heat maps from every cell under ``sweep_dir``; printed."""
    from experiments.report import ReportError
    from experiments.report.map import render_map_report

    try:
        markdown, pngs, _ = render_map_report([sweep_dir], sweep_dir, methods)
    except ReportError as e:
        print(f"compare: map report failed: {e}", file=sys.stderr)
        return 2
    print(markdown)
    print(f"\nmap: {sweep_dir / 'map.md'}; heat maps {', '.join(p.name for p in pngs)}", file=sys.stderr)
    return 0


__all__ = ["CHECK_PROB_KEY", "MapError", "TINY_CEILING_ARGS", "VALUE_CEILING_FILE", "ceiling_command", "cell_dir", "check_prob_override",
           "map_cells", "parse_check_probs", "prob_text", "render_map", "run_ceiling", "run_map"]
