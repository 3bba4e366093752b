"""The off-policy map job (``python -m experiments.compare --preset horizon --horizons ... --off-policy``):
its arguments, the settings grid and its duplicates, cell layout and order, the jobs of an
asynchronous cell, and a tiny two-cell map with its resume."""

from __future__ import annotations

from pathlib import Path

import pytest

from entry import run_entry
from experiments.compare.offpolicy import (OffPolicyError, cell_dir, cell_jobs, offpolicy_cells, parse_off_policy,
                                           run_offpolicy)
from algos.corrections import CORRECTIONS as REGISTERED
from experiments.report.offpolicy import BASELINE, CORRECTIONS, DTYPES, Setting, grid_settings
from experiments.runtime.schema import SAMPLER_DTYPES

ROOT = Path(__file__).resolve().parents[2]


def _parse(*items, horizons=(8,), check_probs=(), launcher=None, overrides=()):
    return parse_off_policy(list(items), horizons, check_probs, launcher, list(overrides))


def test_the_issue_grid_without_the_cells_that_cannot_differ():
    names = [s.name for s in _parse()]
    # staleness 0 x float32 is the baseline alone (rho = 1: every correction weighs each token 1);
    # 0 x bfloat16 x 3 corrections; 1, 2, 4 x 2 dtypes x 3 corrections: 1 + 3 + 18 = 22
    assert names[:7] == ["k0-float32-none", "k0-bfloat16-none", "k0-bfloat16-decoupled", "k0-bfloat16-token-mask",
                         "k1-float32-none", "k1-float32-decoupled", "k1-float32-token-mask"]
    assert names[-1] == "k4-bfloat16-token-mask" and len(names) == len(set(names)) == 22
    assert not any(n.startswith("k0-float32-") and n != "k0-float32-none" for n in names)
    # the baseline runs even when the grid leaves staleness 0 out, and is not repeated when it names it
    assert _parse("staleness=2", "sampler_dtype=float32", "correction=decoupled,none") == [
        BASELINE, Setting(2, "float32", "decoupled"), Setting(2, "float32", "none")]
    assert grid_settings((0,), ("float32",), ("decoupled", "token-mask")) == [BASELINE]
    # the issue's values are values the configs allow
    assert set(DTYPES) <= set(SAMPLER_DTYPES) and set(CORRECTIONS) <= set(REGISTERED)


def test_cell_overrides_and_mode():
    assert Setting(2, "bfloat16", "token-mask").overrides() == [
        "rollout.staleness=2", "rollout.mode=async", "rollout.sampler_dtype=bfloat16",
        "algo.off_policy_correction=token-mask"]
    assert BASELINE.overrides() == ["rollout.staleness=0", "rollout.mode=sync", "rollout.sampler_dtype=float32",
                                    "algo.off_policy_correction=none"]


def test_cells_run_horizon_major_baseline_first_into_their_directories(tmp_path):
    settings = _parse("staleness=0,1", "sampler_dtype=bfloat16,float32", "correction=none")
    cells = offpolicy_cells((32, 8), settings)
    assert [(h, s.name) for h, s in cells] == [
        (8, "k0-float32-none"), (8, "k0-bfloat16-none"), (8, "k1-bfloat16-none"), (8, "k1-float32-none"),
        (32, "k0-float32-none"), (32, "k0-bfloat16-none"), (32, "k1-bfloat16-none"), (32, "k1-float32-none")]
    assert cell_dir(tmp_path, 32, Setting(1, "bfloat16", "none")) == tmp_path / "offpolicy" / "n32" / "k1-bfloat16-none"
    # an asynchronous cell's joblib sweep runs one job at a time; a synchronous one keeps --jobs
    assert cell_jobs(Setting(1, "float32", "none"), "joblib", None) == 1
    assert cell_jobs(Setting(1, "float32", "none"), "joblib", 2) == 1
    assert cell_jobs(BASELINE, "joblib", None) == 1 and cell_jobs(BASELINE, "joblib", 2) == 1  # one run at a time
    assert cell_jobs(Setting(4, "float32", "none"), "basic", None) is None


def test_off_policy_argument_errors():
    for items, message in (
        (("staleness=0,a",), "--off-policy staleness='0,a' invalid; allowed: distinct comma-separated ints >= 0"),
        (("staleness=1,1",), "--off-policy staleness='1,1' invalid"),
        (("staleness=-1",), "--off-policy staleness='-1' invalid"),
        (("sampler_dtype=float16",), "--off-policy sampler_dtype='float16' invalid; allowed: distinct comma-separated "
                                     "values of float32, bfloat16"),
        (("correction=tis",), "--off-policy correction='tis' invalid; allowed: distinct comma-separated values of "
                              "decoupled, none"),
        (("grpo",), "--off-policy 'grpo' invalid; allowed: key=v1,v2 items with key one of staleness, sampler_dtype, "
                    "correction"),
    ):
        with pytest.raises(OffPolicyError) as e:
            _parse(*items)
        assert str(e.value).startswith(message)
    for kwargs, message in ((dict(horizons=()), "--off-policy needs --horizons"),
                            (dict(check_probs=(0.5,)), "--off-policy and --check-probs are two maps"),
                            (dict(launcher="ray"), "--off-policy runs its asynchronous cells one job at a time"),
                            (dict(overrides=("++rollout.mode=async",)), "override '++rollout.mode=async' sets a knob")):
        with pytest.raises(OffPolicyError) as e:
            _parse(**kwargs)
        assert str(e.value).startswith(message)


def test_the_job_rejects_before_compute_and_dry_runs_every_cell(tmp_path):
    base = ["--preset", "horizon", "--horizons", "8", "--logger", "none", "--sweep-dir", str(tmp_path / "s")]
    bad = run_entry("experiments.compare", [*base, "--off-policy", "staleness=x"], cwd=ROOT)
    assert bad.returncode == 2 and bad.stderr.strip().splitlines() == [
        "compare: --off-policy staleness='x' invalid; allowed: distinct comma-separated ints >= 0, e.g. staleness=0,1,2,4"]
    assert not (tmp_path / "s").exists()
    dry = run_entry("experiments.compare", [*base, "--off-policy", "staleness=1", "sampler_dtype=float32",
                                            "--dry-run"], cwd=ROOT)
    assert dry.returncode == 0, dry.stderr
    sweeps = [line for line in dry.stdout.splitlines() if line.startswith("sweep: ")]
    # the baseline (sync, the launcher's jobs) then k1 x float32 x 3 corrections (async, one job at a time)
    assert len(sweeps) == 4 and "n8/k0-float32-none " in sweeps[0]
    assert all("hydra.launcher.n_jobs=1" in s for s in sweeps)
    assert all("rollout.mode=async" in s for s in sweeps[1:]) and "rollout.mode=async" not in sweeps[0]
    assert sweeps[3].endswith("rollout.staleness=1 rollout.mode=async rollout.sampler_dtype=float32 "
                              "algo.off_policy_correction=token-mask env.kwargs.n_stages=8 warmstart.demos=4000")


def test_run_offpolicy_stops_at_the_first_failing_cell(tmp_path):
    calls = []

    def cell(sub, h, s):
        calls.append(sub.relative_to(tmp_path).as_posix())
        return 3 if s.staleness == 1 else 0

    settings = _parse("staleness=1", "sampler_dtype=float32", "correction=none")
    assert run_offpolicy(offpolicy_cells((8, 16), settings), tmp_path, cell) == 3
    assert calls == ["offpolicy/n8/k0-float32-none", "offpolicy/n8/k1-float32-none"]


@pytest.mark.slow
def test_compare_offpolicy_runs_two_cells_then_the_report_and_resumes(tmp_path):
    """The baseline and one asynchronous cell at --tiny scale (4 decisions, GRPO and ppo_long, seed
    0), offpolicy.md; the rerun finds every run finished (checkpoints untouched)."""
    args = ["--preset", "horizon", "--horizons", "4", "--off-policy", "staleness=1", "sampler_dtype=float32",
            "correction=decoupled", "--methods", "grpo,ppo_long", "--tiny", "--logger", "none",
            "--sweep-dir", str(tmp_path / "op")]
    done = run_entry("experiments.compare", args, cwd=ROOT, sweeps_in_process=True)
    assert done.returncode == 0, done.stderr[-3000:]
    cells = tmp_path / "op" / "offpolicy" / "n4"
    assert sorted(p.name for p in cells.iterdir() if p.is_dir()) == ["k0-float32-none", "k1-float32-decoupled"]
    log = (cells / "k1-float32-decoupled" / "sweep.log").read_text()
    assert "rollout.staleness=1 rollout.mode=async rollout.sampler_dtype=float32 algo.off_policy_correction=decoupled" in log
    report = (tmp_path / "op" / "offpolicy" / "offpolicy.md").read_text()
    assert "4 decisions, k1-float32-decoupled (async)" in report and "offpolicy_n4.png" in report
    row = next(line for line in report.splitlines() if line.startswith("| k1-float32-decoupled | async | 1 |"))
    assert "(no interval: < 2 seeds)" in row  # one seed: a difference without an interval
    last = cells / "k1-float32-decoupled" / "long_horizon_v3-grpo-s0" / "checkpoints" / "last.pt"
    stamp = last.stat().st_mtime_ns
    again = run_entry("experiments.compare", args, cwd=ROOT, sweeps_in_process=True)
    assert again.returncode == 0, again.stderr[-3000:]
    assert last.stat().st_mtime_ns == stamp
