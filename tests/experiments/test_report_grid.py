"""What the grid reports share (``experiments.report.grid``): cells, a cell's one config value,
the default output directory and ``--methods``."""

from __future__ import annotations

from pathlib import Path

import pytest

from experiments.report import ReportError
from experiments.report.grid import (config_values, default_out, find_cells, is_cell, load_cells,
                                     one_config_value, parse_methods)
from experiments.report.load import Run


def _run(run_dir: Path, config: dict) -> Run:
    return Run(run_dir, "grpo", "long_horizon_v3", 0, config, [], {})


def _cell(root: Path, *runs: str) -> Path:
    for name in runs:
        d = root / name
        d.mkdir(parents=True)
        for f in ("metrics.jsonl", "config.yaml", "summary.json"):
            (d / f).write_text("")
    return root


def test_cells_are_the_directories_directly_holding_run_directories(tmp_path):
    a = _cell(tmp_path / "grid" / "n8" / "a", "run-s0", "run-s1")
    b = _cell(tmp_path / "grid" / "n32" / "b", "run-s0")
    (tmp_path / "grid" / "n8" / "a" / "not-a-run").mkdir()  # lacks the run files
    _cell(tmp_path / "grid" / "n8" / "partial", "x")
    (tmp_path / "grid" / "n8" / "partial" / "x" / "summary.json").unlink()  # a run still going
    assert is_cell(a) and not is_cell(tmp_path / "grid") and not is_cell(tmp_path / "grid" / "n8" / "partial")
    assert find_cells(tmp_path / "grid", "test", "e.g.") == [b, a]  # sorted: n32 < n8 as text
    assert find_cells(a, "test", "e.g.") == [a]
    with pytest.raises(ReportError, match=r"^no test cell under .*empty; allowed: .* e\.g\. <x>/n8, or a directory above"):
        find_cells(tmp_path / "empty", "test", "<x>/n8")
    # one root that is not a cell: the report goes there; cells given: their common parent
    assert default_out([tmp_path / "grid"], [a, b]) == tmp_path / "grid"
    assert default_out([a, b], [a, b]) == tmp_path / "grid"
    assert default_out([a], [a]) == tmp_path / "grid" / "n8"


def test_cells_are_loaded_once_each_and_two_at_one_position_are_an_error(tmp_path):
    a = _cell(tmp_path / "grid" / "n8" / "a", "run-s0")
    b = _cell(tmp_path / "grid" / "n8" / "b", "run-s0")
    c = _cell(tmp_path / "other" / "c", "run-s0")

    class Cell:  # a loaded cell; its grid position is its directory's name (position below)
        def __init__(self, d: Path):
            self.cell_dir = d

    def position(cell):
        return cell.cell_dir.name, f"position {cell.cell_dir.name}"

    # the grid root and one of its cells again: each directory loaded once, in the order found
    got = load_cells([tmp_path / "grid", a, c], "test", "e.g.", Cell, position)
    assert [x.cell_dir for x in got] == [a.resolve(), b.resolve(), c.resolve()]
    same = _cell(tmp_path / "again" / "a", "run-s0")
    with pytest.raises(ReportError, match=r"^two cells at position a: .*grid/n8/a and .*again/a$"):
        load_cells([tmp_path / "grid", same], "test", "e.g.", Cell, position)
    with pytest.raises(ReportError, match=r"^no directories given; allowed: one or more test cells or directories above them$"):
        load_cells([], "test", "e.g.", Cell, position)


def test_a_cells_one_config_value(tmp_path):
    runs = [_run(tmp_path / "s0", {"env": {"kwargs": {"check_prob": 0.5}}}),
            _run(tmp_path / "s1", {"env": {"kwargs": {"check_prob": 0.5}}})]
    assert one_config_value(runs, "env.kwargs.check_prob", float, "a cell", tmp_path) == 0.5
    bare = _run(tmp_path / "s2", {"env": {}})
    # absent: the default given, else an error naming the run
    assert config_values([*runs, bare], "env.kwargs.check_prob", 0.0) == [0.0, 0.5]
    with pytest.raises(ReportError, match=r"^a cell holds one env.kwargs.check_prob; .* holds \[0.0, 0.5\]$"):
        one_config_value([*runs, bare], "env.kwargs.check_prob", float, "a cell", tmp_path, absent=0.0)
    with pytest.raises(ReportError, match=r"^config.yaml of run .*s2 has no env.kwargs.check_prob$"):
        one_config_value([*runs, bare], "env.kwargs.check_prob", float, "a cell", tmp_path)


@pytest.mark.parametrize("text, minimum, expected", [
    (None, 2, None), ("grpo, ppo_long", 2, ["grpo", "ppo_long"]), ("grpo", 1, ["grpo"]),
    ("grpo", 2, "invalid"), ("grpo,,ppo", 1, "invalid"), ("grpo,grpo", 1, "invalid"),
])
def test_methods_are_distinct_names_at_least_the_minimum(text, minimum, expected):
    if expected == "invalid":
        with pytest.raises(ReportError, match=rf"^--methods={text!r} invalid; allowed: what is allowed$"):
            parse_methods(text, minimum, "what is allowed")
    else:
        assert parse_methods(text, minimum, "what is allowed") == expected
