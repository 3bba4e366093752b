"""What the grid reports share (:mod:`experiments.report.map`, :mod:`experiments.report.offpolicy`).

A cell is one comparison sweep: a directory that directly holds run directories (each with
:data:`~experiments.report.keys.RUN_FILES`). A directory given that is not a cell is searched for
cells below it. A cell's grid position is read from its runs' configs, one value per key
(:func:`one_config_value`); two cells at one position are an error (:func:`load_cells`). The
reports are written to ``--out``, by default the one directory given when it is not a cell, else
the cells' common parent (:func:`default_out`). ``--methods`` is a list of distinct
comma-separated names (:func:`parse_methods`). Every bad input is one line on stderr,
``report: ...``, exit code 2 (:func:`run_cli`).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from experiments.report.keys import RUN_FILES, ReportError
from experiments.report.load import Run, config_get, config_value, is_run_dir

#: ``absent`` of :func:`config_values` for a key every run's config must hold
REQUIRED = object()


def is_cell(d: Path) -> bool:
    """A directory that directly holds a run directory."""
    return d.is_dir() and any(c.is_dir() and is_run_dir(c) for c in d.iterdir())


def find_cells(root: str | Path, kind: str, example: str) -> list[Path]:
    """``root`` when it is a cell, else every cell below it (sorted); ``ReportError`` naming the
    report's ``kind`` of cell and an ``example`` cell path when there is none."""
    root = Path(root)
    if is_cell(root):
        return [root]
    cells = sorted({Path(p) for p, _, _ in os.walk(root) if is_cell(Path(p))})
    if not cells:
        raise ReportError(f"no {kind} cell under {root}; allowed: a comparison sweep directory holding run "
                          f"directories (with {', '.join(RUN_FILES)}), e.g. {example}, or a directory above such sweeps")
    return cells


def load_cells(dirs: Sequence[str | Path], kind: str, example: str, load: Callable[[Path], Any],
               position: Callable[[Any], tuple[Hashable, str]]) -> list:
    """Every cell of ``dirs`` (each a cell or a directory above cells; :func:`find_cells`), each
    directory once, by ``load``; ``position(cell)`` is its grid position and that position in words.
    ``ReportError`` when no directory is given or two cells hold one position (naming both)."""
    if not dirs:
        raise ReportError(f"no directories given; allowed: one or more {kind} cells or directories above them")
    cells = [load(d) for d in dict.fromkeys(c.resolve() for d in dirs for c in find_cells(d, kind, example))]
    seen: dict[Hashable, Path] = {}
    for c in cells:
        key, words = position(c)
        if key in seen:
            raise ReportError(f"two cells at {words}: {seen[key]} and {c.cell_dir}")
        seen[key] = c.cell_dir
    return cells


def config_values(runs: Iterable[Run], key: str, absent: Any = REQUIRED) -> list:
    """The distinct values of config ``key`` over ``runs``, sorted; a run whose config lacks it
    gives ``absent``, or a ``ReportError`` naming the run when ``absent`` is :data:`REQUIRED`."""
    values = set()
    for r in runs:
        try:
            values.add(config_get(r.config, key))
        except KeyError:
            values.add(config_value(r.config, r.run_dir, key) if absent is REQUIRED else absent)
    return sorted(values, key=str)


def one_config_value(runs: Sequence[Run], key: str, cast: Callable[[Any], Any], cell: str, cell_dir: Path,
                     absent: Any = REQUIRED) -> Any:
    """The one value of config ``key`` (``cast``) over a cell's runs; ``ReportError`` when they hold
    several, saying what ``cell`` is ("a map cell")."""
    values = {cast(v) for v in config_values(runs, key, absent)}
    if len(values) != 1:
        raise ReportError(f"{cell} holds one {key}; {cell_dir} holds {sorted(values)}")
    return values.pop()


def default_out(dirs: Sequence[str | Path], cell_dirs: Sequence[Path]) -> Path:
    """The one directory given when it is not itself a cell, else the cells' common parent."""
    if len(dirs) == 1 and not is_cell(Path(dirs[0])):
        return Path(dirs[0])
    return Path(os.path.commonpath([str(Path(c).parent) for c in cell_dirs]))


def parse_methods(text: str | None, minimum: int, allowed: str) -> list[str] | None:
    """``--methods``: at least ``minimum`` distinct comma-separated names (None when not given);
    ``allowed`` says what is, in the error's words."""
    if text is None:
        return None
    names = [m.strip() for m in text.split(",")]
    if len(names) < minimum or "" in names or len(set(names)) != len(names):
        raise ReportError(f"--methods={text!r} invalid; allowed: {allowed}")
    return names


#: ``render(dirs, out_dir or None, methods or None) -> (markdown, png paths, cells)``
Render = Callable[[Sequence[str], str | None, Sequence[str] | None], tuple[str, list[Path], list]]


@dataclass(frozen=True)
class GridCli:
    """One grid report's command line: its module, what its cells and files are called, how it
    parses ``--methods`` and renders."""

    prog: str
    description: str
    title: str
    cell_kind: str
    report_file: str
    figures: str
    methods_help: str
    parse_methods: Callable[[str | None], list[str] | None]
    render: Render


def run_cli(cli: GridCli, argv: Sequence[str] | None = None) -> int:
    """Parse ``argv``, render, print the markdown (where it went on stderr); 2 on a ``ReportError``."""
    p = argparse.ArgumentParser(prog=cli.prog, description=cli.description)
    p.add_argument("dirs", nargs="+", help=f"{cli.cell_kind} cells (comparison sweeps) or directories above them")
    p.add_argument("--out", default=None, help=f"where {cli.report_file} and the figures go "
                                               "(default: the one root given, else the cells' common parent)")
    p.add_argument("--methods", default=None, help=cli.methods_help)
    a = p.parse_args(argv)
    try:
        markdown, pngs, cells = cli.render(a.dirs, a.out, cli.parse_methods(a.methods))
    except ReportError as e:
        print(f"report: {e}", file=sys.stderr)
        return 2
    print(markdown)
    out = Path(a.out) if a.out is not None else default_out(a.dirs, [c.cell_dir for c in cells])
    print(f"[{cli.title} written to {out / cli.report_file} and {len(pngs)} {cli.figures} beside it]", file=sys.stderr)
    return 0


__all__ = ["REQUIRED", "GridCli", "config_values", "default_out", "find_cells", "is_cell", "load_cells",
           "one_config_value", "parse_methods", "run_cli"]
