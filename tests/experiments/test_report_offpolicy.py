"""The off-policy map's report (``python -m experiments.report.offpolicy``): each setting's cell
against the horizon's synchronous float32 cell, per method and compute axis, with its mismatch."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
import yaml
from scipy import stats

from entry import run_entry
from experiments.report import ReportError
from experiments.report.offpolicy import (TABLE_COLUMNS, Setting, grid_settings, horizon_figure, render_offpolicy_report,
                                         table_rows)
from report_fixtures import write_run

ROOT = Path(__file__).resolve().parents[2]
BASE = Setting(0, "float32", "none")
K1 = Setting(1, "float32", "none")
K2 = Setting(2, "bfloat16", "token-mask")

# (horizon, setting) -> method -> final held-out success per seed (seeds 0, 1, ...). report_fixtures'
# runs: 4 updates, eval at updates 2 (final / 2) and 4 (final), wall seconds 0.5 u; an asynchronous
# cell's wall seconds here are 0.25 u (it ends at 1.0 s, where the baseline evaluated final / 2).
CELLS = {
    (8, BASE): {"grpo": [0.5, 0.6, 0.7], "ppo_long": [0.6, 0.6, 0.9]},
    (8, K1): {"grpo": [0.4, 0.5, 0.6], "ppo_long": [0.7, 0.8, 0.9]},
    (8, K2): {"grpo": [0.6, 0.8]},  # seeds 0 and 1 only
    (32, K1): {"grpo": [0.3, 0.4, 0.5]},  # no baseline cell at 32 decisions
}


def _patch(run: Path, horizon: int, s: Setting, seed: int) -> None:
    """The cell's knobs in config.yaml; off_policy/* per update (prob_ratio_error 0.01 u + 0.01
    seed, staleness_mean k) and, when asynchronous, async/* waits (0.5 s trainer, 0.1 s sampler)
    and wall seconds 0.25 u."""
    config = yaml.safe_load((run / "config.yaml").read_text())
    config["env"]["kwargs"] = {"n_stages": horizon}
    config["rollout"] = {"staleness": s.staleness, "mode": s.mode, "sampler_dtype": s.sampler_dtype}
    config["algo"]["off_policy_correction"] = s.correction
    (run / "config.yaml").write_text(yaml.safe_dump(config))
    lines = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    for line in lines:
        u = line["update"]
        line["off_policy/prob_ratio_error"] = 0.01 * u + 0.01 * seed
        line["off_policy/staleness_mean"] = s.staleness
        if s.mode == "async":
            line.update({"async/trainer_wait_seconds": 0.5, "async/sampler_wait_seconds": 0.1,
                         "compute/wall_seconds": 0.25 * u})
    (run / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))


def make_cells(root: Path, cells: dict = CELLS) -> Path:
    """``<root>/n<h>/<setting name>/long_horizon_v3-<algo>-s<seed>/`` (the compare job's layout)."""
    for (h, s), finals in cells.items():
        for algo, values in finals.items():
            for seed, final in enumerate(values):
                run = write_run(root / f"n{h}" / s.name / f"long_horizon_v3-{algo}-s{seed}", algo, "long_horizon_v3",
                                seed, final=final)
                _patch(run, h, s, seed)
    return root


def welch(a: list[float], b: list[float]) -> tuple[float, float]:
    """mean(b) - mean(a) and the Welch 95 % half-width t_{0.975, df} sqrt(s_a^2 / n_a + s_b^2 / n_b)."""
    va, vb = stats.tvar(a) / len(a), stats.tvar(b) / len(b)
    df = (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1))
    return sum(b) / len(b) - sum(a) / len(a), float(stats.t.ppf(0.975, df)) * math.sqrt(va + vb)


def text(a: list[float], b: list[float], ahead: str = "inconclusive") -> str:
    d, half = welch(a, b)
    return f"{d:+.3f} [{d - half:+.3f}, {d + half:+.3f}] {ahead}"


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    root = make_cells(tmp_path_factory.mktemp("offpolicy"))
    return root, *render_offpolicy_report([root])


def _rows(cells, h, method):
    return {r[0]: dict(zip(TABLE_COLUMNS, r)) for r in table_rows(cells, h, method)}


def test_each_setting_against_the_baseline_per_axis(rendered):
    root, markdown, pngs, cells = rendered
    assert (root / "offpolicy.md").read_text() == markdown
    grpo = _rows(cells, 8, "grpo")
    k1 = grpo["k1-float32-none"]
    # equal rollouts, tokens, FLOPs: the finals, mean(0.4, 0.5, 0.6) - mean(0.5, 0.6, 0.7) = -0.100;
    # equal variances, df 4: 2.776 * sqrt(2 * 0.01 / 3) = 0.227
    for axis in ("complete rollouts", "generated tokens", "train FLOPs"):
        assert k1[f"- baseline, {axis}"] == "-0.100 [-0.327, +0.127] inconclusive"
    # equal wall seconds: the async cell ends at 1.0 s, where the baseline evaluated final / 2
    # (0.25, 0.30, 0.35): mean(0.4, 0.5, 0.6) - 0.30 = +0.200
    assert k1["- baseline, wall seconds"] == text([0.25, 0.3, 0.35], [0.4, 0.5, 0.6])
    assert k1["- baseline, wall seconds"].startswith("+0.200 [")
    assert k1["mode"] == "async" and k1["seeds"] == "3" and k1["held-out success (final)"] == "0.500 ± 0.248"
    # prob_ratio_error: mean over u = 1..4 of 0.01 u + 0.01 seed = 0.025, 0.035, 0.045 -> 0.035,
    # s = 0.01: 4.303 * 0.01 / sqrt(3) = 0.025
    assert k1["prob_ratio_error"] == "0.035 ± 0.025" and k1["staleness (mean)"] == "1.000 ± 0.000"
    assert k1["trainer wait s"] == "0.500 ± 0.000" and k1["sampler wait s"] == "0.100 ± 0.000"
    assert k1["behavior_kl_k1"] == "n/a (not logged)"
    # k2-bfloat16-token-mask ran seeds 0 and 1: against the baseline's seeds 0 and 1 only,
    # mean(0.6, 0.8) - mean(0.5, 0.6) = +0.150 (not 0.700 - 0.600)
    assert grpo["k2-bfloat16-token-mask"]["- baseline, train FLOPs"] == text([0.5, 0.6], [0.6, 0.8])
    base = grpo["k0-float32-none"]
    assert base["- baseline, wall seconds"] == "baseline" and base["trainer wait s"] == "n/a (not logged)"
    ppo = _rows(cells, 8, "ppo_long")["k1-float32-none"]
    # mean(0.7, 0.8, 0.9) - mean(0.6, 0.6, 0.9) = 0.8 - 0.7 = +0.100
    assert ppo["- baseline, complete rollouts"] == text([0.6, 0.6, 0.9], [0.7, 0.8, 0.9])
    assert ppo["- baseline, complete rollouts"].startswith("+0.100 [")


def test_every_grid_setting_has_a_row_and_missing_ones_read_not_run(rendered):
    root, markdown, pngs, cells = rendered
    assert [(c.horizon, c.setting.name) for c in cells] == [(8, "k0-float32-none"), (8, "k1-float32-none"),
                                                           (8, "k2-bfloat16-token-mask"), (32, "k1-float32-none")]
    rows = _rows(cells, 8, "ppo_long")
    assert list(rows) == [s.name for s in grid_settings()]  # 22 settings, the baseline first
    assert rows["k2-bfloat16-token-mask"]["held-out success (final)"] == "not run"  # ran grpo only
    assert rows["k4-bfloat16-decoupled"]["- baseline, wall seconds"] == "not run"
    at32 = _rows(cells, 32, "grpo")["k1-float32-none"]
    assert at32["- baseline, train FLOPs"] == "n/a (baseline k0-float32-none not run)"
    assert [p.name for p in pngs] == ["offpolicy_n8.png", "offpolicy_n32.png"]
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in pngs)
    assert "## 8 decisions" in markdown and "### ppo_long" in markdown
    assert f"- 8 decisions, k1-float32-none (async): `{root / 'n8' / 'k1-float32-none'}`" in markdown


def test_one_legend_below_the_panels_names_each_line_once(rendered):
    import matplotlib.pyplot as plt

    cells = rendered[3]
    fig = horizon_figure(cells, 8, ["grpo", "ppo_long"])
    try:
        # lines at 8 decisions: the baseline in all 6 panels, k1 in both "none" panels, k2 (bfloat16)
        # in grpo's "token-mask" panel: three labels, ordered by staleness, then float32 before bfloat16
        assert [len(ax.get_lines()) for ax in fig.axes] == [2, 1, 2, 2, 1, 1]
        assert [ax.get_legend() for ax in fig.axes] == [None] * 6
        [legend] = fig.legends
        assert [t.get_text() for t in legend.get_texts()] == ["k=0 float32 (baseline)", "k=1 float32", "k=2 bfloat16"]
        fig.canvas.draw()
        box = legend.get_window_extent()
        assert not any(box.overlaps(ax.get_window_extent()) for ax in fig.axes)  # no line under it
        assert box.y1 < min(ax.get_window_extent().y0 for ax in fig.axes)  # below every panel
    finally:
        plt.close(fig)


def test_two_cells_at_one_setting_mixed_cells_and_none_found_are_errors(tmp_path):
    root = make_cells(tmp_path / "a", {(8, K1): {"grpo": [0.5, 0.6]}})
    shutil.copytree(root / "n8" / K1.name, tmp_path / "b" / "again")
    with pytest.raises(ReportError, match=r"two cells at 8 decisions, k1-float32-none: .*a/n8/k1-float32-none and .*b/again$"):
        render_offpolicy_report([root, tmp_path / "b"], tmp_path)
    make_cells(tmp_path / "mixed", {(8, K1): {"grpo": [0.5, 0.6]}, (8, K2): {"ppo_long": [0.5, 0.6]}})
    shutil.move(tmp_path / "mixed" / "n8" / K2.name / "long_horizon_v3-ppo_long-s0", tmp_path / "mixed" / "n8" / K1.name)
    with pytest.raises(ReportError, match=r"one rollout.staleness; .*k1-float32-none holds \[1, 2\]"):
        render_offpolicy_report([tmp_path / "mixed" / "n8" / K1.name], tmp_path)
    write_run(tmp_path / "bare" / "long_horizon_v3-grpo-s0", "grpo", "long_horizon_v3", 0)
    with pytest.raises(ReportError, match=r"config.yaml of run .*bare/long_horizon_v3-grpo-s0 has no rollout.staleness"):
        render_offpolicy_report([tmp_path / "bare"], tmp_path)
    (tmp_path / "empty" / "sub").mkdir(parents=True)
    with pytest.raises(ReportError, match="no off-policy cell under .*empty; allowed: a comparison sweep directory"):
        render_offpolicy_report([tmp_path / "empty"])


def test_offpolicy_cli_writes_the_report_and_rejects(tmp_path):
    root = make_cells(tmp_path / "op", {(8, BASE): {"grpo": [0.5, 0.6]}, (8, K1): {"grpo": [0.6, 0.7]}})
    done = run_entry("experiments.report.offpolicy", [str(root)], cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert (root / "offpolicy.md").read_text().strip() == done.stdout.strip()
    assert (root / "offpolicy_n8.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    for argv, message in (([str(tmp_path / "none")], "report: no off-policy cell under"),
                          ([str(root), "--methods", "grpo,grpo"], "report: --methods='grpo,grpo' invalid"),
                          ([str(root), "--methods", "grpo,rloo"], "report: --methods names rloo, which no cell ran")):
        bad = run_entry("experiments.report.offpolicy", argv, cwd=ROOT)
        assert bad.returncode == 2 and bad.stderr.strip().splitlines()[-1].startswith(message), bad.stderr
