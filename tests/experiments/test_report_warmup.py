"""The report's critic warm-up column: rollouts spent on critic-only updates and their share of
each run's complete rollouts (``compute/warmup_rollouts`` / ``compute/rollouts`` of summary.json)."""

from __future__ import annotations

import json

from experiments.report import group_runs
from experiments.report.load import load_runs
from experiments.report.tables import DIAG_COLUMNS, WARMUP_NA, diagnostics_table
from report_fixtures import write_run


def _set_summary(run_dir, **values):
    path = run_dir / "summary.json"
    summary = json.loads(path.read_text())
    summary.update(values)
    path.write_text(json.dumps(summary))


def test_warmup_column_gives_mean_rollouts_and_mean_share(tmp_path):
    # ppo seeds: 128 of 2048 rollouts (6.25 %) and 64 of 1024 (6.25 %): mean 96, share 6.2 %
    # (6.25 rounds to even at one decimal); grpo: 0 of 2048 -> 0 (0.0 %)
    for seed, (warm, total) in enumerate([(128, 2048), (64, 1024)]):
        d = write_run(tmp_path / f"p{seed}", "ppo", "long_horizon", seed, final=0.5)
        _set_summary(d, **{"compute/warmup_rollouts": warm, "compute/rollouts": total})
        d = write_run(tmp_path / f"g{seed}", "grpo", "long_horizon", seed, final=0.5)
        _set_summary(d, **{"compute/warmup_rollouts": 0, "compute/rollouts": 2048})
    rows = {r[1]: r for r in diagnostics_table(group_runs(load_runs(tmp_path)))}
    col = DIAG_COLUMNS.index("critic warm-up rollouts (share of rollouts)")
    assert rows["ppo"][col] == "96 (6.2 %)"
    assert rows["grpo"][col] == "0 (0.0 %)"


def test_warmup_column_is_na_when_a_run_did_not_log_it(tmp_path):
    for seed in (0, 1):
        d = write_run(tmp_path / f"p{seed}", "ppo", "long_horizon", seed, final=0.5)
        if seed == 0:
            _set_summary(d, **{"compute/warmup_rollouts": 128})
    rows = {r[1]: r for r in diagnostics_table(group_runs(load_runs(tmp_path)))}
    assert rows["ppo"][DIAG_COLUMNS.index("critic warm-up rollouts (share of rollouts)")] == WARMUP_NA
