"""The map job (``python -m experiments.compare --preset horizon --horizons ... --check-probs ...``):
its arguments, cell layout and order, the EV* step per cell and the resume of a partial map."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from entry import run_entry
from experiments.compare.map import (MapError, ceiling_command, cell_dir, check_prob_override, map_cells,
                                     parse_check_probs, run_map)

ROOT = Path(__file__).resolve().parents[2]


def test_check_probs_argument():
    assert parse_check_probs("0,0.5,1", (8,)) == (0.0, 0.5, 1.0)
    for bad in ("0,2", "0,0", "a", "-0.1", ""):
        with pytest.raises(MapError, match="allowed: "):
            parse_check_probs(bad, (8,))
    with pytest.raises(MapError, match="needs --horizons"):
        parse_check_probs("0,1", ())


def test_cells_run_horizon_major_into_p_n_directories(tmp_path):
    assert map_cells((32, 8), (0.0, 0.5)) == [(8, 0.0), (8, 0.5), (32, 0.0), (32, 0.5)]
    assert cell_dir(tmp_path, 0.5, 32) == tmp_path / "p0.5" / "n32"
    assert cell_dir(tmp_path, 1.0, 8) == tmp_path / "p1" / "n8"
    assert check_prob_override(0.0) == "++env.kwargs.check_prob=0"


def _run(cell: Path, name: str) -> Path:
    (cell / name / "checkpoints").mkdir(parents=True)
    (cell / name / "checkpoints" / "last.pt").write_bytes(b"")
    return cell / name


def test_ceiling_runs_on_the_lowest_seed_of_a_critic_method_once(tmp_path):
    _run(tmp_path, "long_horizon_v3-grpo-s0")
    _run(tmp_path, "long_horizon_v3-ppo_long-s3")
    first = _run(tmp_path, "long_horizon_v3-ppo_long-s1")
    (tmp_path / "long_horizon_v3-ppo_long-s0").mkdir()  # no checkpoint: not finished
    cmd = ceiling_command(tmp_path, ("--points", "4"))
    assert cmd == [sys.executable, "-m", "experiments.value_ceiling", str(first), "--out",
                   str(tmp_path / "value_ceiling.json"), "--points", "4"]
    (tmp_path / "value_ceiling.json").write_text("{}")
    assert ceiling_command(tmp_path) is None  # measured already: kept
    critic_free = tmp_path / "other"
    _run(critic_free, "long_horizon_v3-grpo-s0")
    _run(critic_free, "long_horizon_v3-grouped_value-s0")
    assert ceiling_command(critic_free) is None


def test_run_map_stops_at_the_first_failing_cell(tmp_path):
    calls = []

    def cell(sub, h, p):
        calls.append(("cell", sub.relative_to(tmp_path).as_posix()))
        return 3 if (h, p) == (8, 1.0) else 0

    def ceiling(sub):
        calls.append(("ceiling", sub.relative_to(tmp_path).as_posix()))
        return 0

    assert run_map(map_cells((8, 16), (0.0, 1.0)), tmp_path, cell, ceiling) == 3
    assert calls == [("cell", "p0/n8"), ("ceiling", "p0/n8"), ("cell", "p1/n8")]


@pytest.mark.slow
def test_compare_map_runs_a_cell_then_renders_the_map_and_resumes(tmp_path):
    """One cell (the order of several: test_cells_run_horizon_major_into_p_n_directories): its
    sweep with the check_prob override, its EV*, map.md; the rerun keeps the measured EV*."""
    args = ["--preset", "horizon", "--horizons", "4", "--check-probs", "0.5", "--methods", "grpo,ppo_long",
            "--tiny", "--logger", "none", "--sweep-dir", str(tmp_path / "map")]
    done = run_entry("experiments.compare", args, cwd=ROOT, sweeps_in_process=True)
    assert done.returncode == 0, done.stderr[-3000:]
    cell = tmp_path / "map" / "p0.5" / "n4"
    assert (cell / "report.md").is_file() and (cell / "value_ceiling.json").is_file()
    assert "++env.kwargs.check_prob=0.5" in (cell / "sweep.log").read_text()
    assert "4 decisions, check_prob 0.5" in (tmp_path / "map" / "map.md").read_text()
    stamp = (cell / "value_ceiling.json").stat().st_mtime_ns
    again = run_entry("experiments.compare", args, cwd=ROOT, sweeps_in_process=True)
    assert again.returncode == 0, again.stderr[-3000:]
    assert (cell / "value_ceiling.json").stat().st_mtime_ns == stamp


def test_the_cells_with_check_lines_at_64_decisions_raise_the_compaction_cap(tmp_path):
    """``--dry-run`` prints each cell's sweep: at 64 decisions a cell with check lines gets
    ``compression.max_compactions=16`` (64 // 4; the default cap of 8 ends every demonstration at
    the token limit there: ``test_compare_horizons``), the silent cell keeps the default, and at 32
    decisions no cell sets it."""
    args = ["--preset", "horizon", "--horizons", "32,64", "--check-probs", "0,1", "--methods", "grpo,ppo_long",
            "--logger", "none", "--sweep-dir", str(tmp_path / "map"), "--dry-run"]
    done = run_entry("experiments.compare", args, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    sweeps = {line.split("hydra.sweep.dir=")[1].split()[0]: line for line in done.stdout.splitlines()
              if line.startswith("sweep: ")}
    capped = {Path(d).relative_to(tmp_path / "map").as_posix(): "compression.max_compactions=16" in line
              for d, line in sweeps.items()}
    assert capped == {"p0/n32": False, "p1/n32": False, "p0/n64": False, "p1/n64": True}
    assert not any("max_compactions=8" in line for line in sweeps.values())
