"""benchmarks/e2e.py: the aggregation of a run's metrics lines, the side-by-side table, the
dispatch from ``benchmarks``, and (slow) the ``--quick`` plumbing on a tiny config."""

from pathlib import Path

import pytest

from entry import run_entry
from benchmarks.e2e import RunStats, Table, format_table, format_targets, run_stats, train_command

ROOT = Path(__file__).resolve().parents[2]


def _line(update, gen_cum, obs_cum, collect, gen_rate, upd, tokens, **extra):
    return {"update": update, "compute/generated_tokens": gen_cum, "compute/observation_tokens": obs_cum,
            "rollout/collect_seconds": collect, "rollout/generated_tokens_per_second": gen_rate,
            "train/update_seconds": upd, "train/tokens": tokens, **extra}


def test_run_stats_sums_updates_and_weights_padding_by_tokens():
    lines = [_line(1, 100, 300, 2.0, 50.0, 1.0, 400, **{"train/padding_efficiency": 0.5}),
             _line(2, 250, 700, 1.0, 150.0, 3.0, 600, **{"train/padding_efficiency": 1.0})]
    s = run_stats(lines, {"wall_seconds_this_process": 10.0}, epochs=2, peak_rss_mb=512.0, process_seconds=12.0)
    assert s.trajectory_tokens == 950  # 250 + 700, the last line's cumulative counters
    assert s.trajectory_tok_s == pytest.approx(95.0)  # 950 / 10 s of run wall time (not the 12 s process)
    assert s.generated_tokens == pytest.approx(250.0)  # 50 * 2 + 150 * 1
    assert s.gen_tok_s == pytest.approx(250.0 / 3.0)  # over 2 + 1 collect seconds
    assert s.update_tokens == 2 * 1000 and s.update_tok_s == pytest.approx(2000 / 4.0)
    # token-weighted: (400 + 600) / (400 / 0.5 + 600 / 1.0) = 1000 / 1400
    assert s.padding_efficiency == pytest.approx(1000 / 1400)
    assert s.updates == 2 and s.peak_rss_mb == 512.0


def test_run_stats_baseline_fields_and_missing_counters():
    # the baseline logs no padding efficiency: derived from rows x longest row when logged, else None
    lines = [_line(1, 10, 20, 1.0, 10.0, 1.0, 50, **{"train/rows": 4, "train/max_row_len": 25})]
    s = run_stats(lines, {}, epochs=1, peak_rss_mb=1.0, process_seconds=6.0)
    assert s.padding_efficiency == pytest.approx(50 / 100) and s.wall_seconds == 6.0
    assert run_stats([_line(1, 10, 20, 1.0, 10.0, 1.0, 50)], {}, 1, 1.0, 1.0).padding_efficiency is None
    with pytest.raises(ValueError, match="compute/observation_tokens"):
        run_stats([{"compute/generated_tokens": 1}], {}, 1, 1.0, 1.0)
    with pytest.raises(ValueError, match="no update lines"):
        run_stats([], {}, 1, 1.0, 1.0)


def _stats(tok_s):
    return RunStats(trajectory_tokens=tok_s, wall_seconds=1.0, generated_tokens=1.0, collect_seconds=1.0,
                    update_tokens=1.0, update_seconds=1.0, padding_efficiency=None, peak_rss_mb=100.0, updates=1)


def test_table_reports_medians_and_the_ratio():
    table = Table()
    for v in (100.0, 300.0, 200.0):
        table.add("grpo", "baseline", _stats(v))
    for v in (900.0, 800.0, 1000.0):
        table.add("grpo", "current", _stats(v))
    assert table.median("grpo", "baseline", "trajectory_tok_s") == 200.0
    text = format_table(table, ["grpo"], repeats=3, amount=64)
    row = next(line for line in text.splitlines() if line.startswith("trajectory tok/s"))
    # medians 200 and 900; paired ratios 900/100, 800/300, 1000/200 = 9, 2.67, 5 -> median 5
    assert row.split()[-3:] == ["200", "900", "5.00x"]
    assert next(line for line in text.splitlines() if line.startswith("padding")).split()[-3:] == ["-", "-", "-"]


def test_targets_name_hits_and_misses():
    table = Table()
    table.add("grpo", "baseline", _stats(100.0))
    table.add("grpo", "current", _stats(450.0))  # 4.5x >= 4x
    table.add("ppo", "baseline", _stats(100.0))
    table.add("ppo", "current", _stats(250.0))  # 2.5x < 4x
    lines = format_targets(table, ["grpo", "ppo"], {"grpo": {"bound_fraction": 0.8}}).splitlines()
    traj = next(line for line in lines if "trajectory" in line)
    assert "grpo 4.50x ok" in traj and "ppo 2.50x MISS" in traj
    bound = next(line for line in lines if "bound" in line)
    assert "grpo 0.80 ok" in bound and "ppo -" in bound
    rss = next(line for line in lines if "RSS" in line)
    assert "grpo 100.00 ok" in rss  # 100 MB <= 1024


def test_train_command_is_the_real_entry_point():
    cmd = train_command("ppo", 128, Path("/tmp/r"), Path("/tmp/c"), ["policy.d_model=32"])
    assert cmd[1:3] == ["-m", "experiments.train"] and "experiment=learn_bugfix" in cmd
    assert "algo=ppo" in cmd and "budget.amount=128" in cmd and "logger=none" in cmd and "progress=false" in cmd
    assert cmd[-1] == "policy.d_model=32" and "warmstart.cache_dir=/tmp/c" in cmd


def test_bench_dispatches_e2e():
    out = run_entry("benchmarks", ["e2e", "--help"], cwd=ROOT)  # in this process (tests/entry.py)
    assert out.returncode == 0 and "--repeats" in out.stdout and "--quick" in out.stdout


@pytest.mark.slow
def test_quick_plumbing_on_a_tiny_config(tmp_path):
    """``--quick`` end to end (current tree only, tiny policy and budget, GRPO only to keep the
    suite short): the runs go through the real entry point and the table has the method's row."""
    tiny = ["policy.d_model=32", "policy.n_layers=1", "policy.n_heads=2", "policy.max_len=256",
            "algo.tasks_per_update=4", "rollout.num_envs=16", "eval.tasks=4", "warmstart.demos=32",
            "warmstart.epochs=2", "warmstart.eval_tasks=4"]
    args = ["e2e", "--quick", "--no-baseline", "--no-bound", "--algo", "grpo", "--cache-dir", str(tmp_path),
            *[a for o in tiny for a in ("--set", o)]]
    out = run_entry("benchmarks", args, cwd=ROOT)  # the bench in this process, its runs subprocesses
    assert out.returncode == 0, out.stderr[-2000:]
    row = next(line for line in out.stdout.splitlines() if line.startswith("trajectory tok/s"))
    assert len(row.split()) == 2 + 3  # label (2 words) + (base, now, ratio) of the one method
    base, now, ratio = row.split()[2:]
    assert base == "-" and ratio == "-" and float(now) > 0  # no baseline tree: only the current number
