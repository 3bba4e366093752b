"""The map (``python -m experiments.report.map``): each method's difference to GRPO over horizon x
check probability, one comparison sweep per cell."""

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
from experiments.report.map import DETAIL_COLUMNS, find_cells, map_detail_rows, render_map_report
from report_fixtures import write_run

ROOT = Path(__file__).resolve().parents[2]

# (check_prob, horizon) -> method -> final held-out success per seed (seeds 0, 1, 2). Every fixture
# run reaches the same compute on every axis, so each axis compares the final evaluations.
MAP = {
    (0.0, 8): {"grpo": [0.5, 0.6, 0.7], "ppo_long": [0.8, 0.9, 0.9], "grouped_value": [0.4, 0.6, 0.8]},
    (0.0, 32): {"grpo": [0.3, 0.3, 0.4], "ppo_long": [0.1, 0.1, 0.2], "grouped_value": [0.3, 0.4, 0.5]},
    (1.0, 8): {"grpo": [0.5, 0.5, 0.6], "ppo_long": [0.5, 0.6, 0.6], "grouped_value": [0.6, 0.6, 0.7]},
    (1.0, 32): {"grpo": [0.2, 0.2, 0.3], "ppo_long": [0.2, 0.3, 0.3]},  # grouped_value not run here
}


def _patch(run: Path, n_stages: int, check_prob: float, algo: str, seed: int) -> None:
    """LongHorizon-v3 kwargs in config.yaml (check_prob 0 left out: absent means 0); the
    grouped-value estimator's held-out EV (0.1 u + 0.05 seed) and anchor hit rate (0.5) per update."""
    config = yaml.safe_load((run / "config.yaml").read_text())
    config["env"]["kwargs"] = {"n_stages": n_stages, **({"check_prob": check_prob} if check_prob else {})}
    config["compression"] = {"max_compactions": 16 if check_prob and n_stages == 32 else 8}  # the job's rule, scaled down
    (run / "config.yaml").write_text(yaml.safe_dump(config))
    if algo == "grouped_value":
        lines = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
        for line in lines:
            line["train/state_value_ev_heldout"] = 0.1 * line["update"] + 0.05 * seed
            line["train/anchor_hit_rate"] = 0.5
        (run / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))


def make_map(root: Path, cells: dict = MAP) -> Path:
    """``<root>/p<check_prob>/n<horizon>/long_horizon_v3-<algo>-s<seed>/`` (the compare job's layout)."""
    for (p, n), finals in cells.items():
        for algo, values in finals.items():
            for seed, final in enumerate(values):
                run = write_run(root / f"p{p:g}" / f"n{n}" / f"long_horizon_v3-{algo}-s{seed}", algo,
                                "long_horizon_v3", seed, final=final)
                _patch(run, n, p, algo, seed)
    return root


def welch_half(a: list[float], b: list[float]) -> float:
    """The Welch 95 % half-width written out: t_{0.975, df} * sqrt(s_a^2 / n_a + s_b^2 / n_b)."""
    va = stats.tvar(a) / len(a)
    vb = stats.tvar(b) / len(b)
    df = (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1))
    return float(stats.t.ppf(0.975, df)) * math.sqrt(va + vb)


def _table(markdown: str, heading: str) -> dict[str, list[str]]:
    """The rows of the table after ``heading`` (first cell -> the other cells)."""
    section = markdown.split(heading, 1)[1].split("\n\n", 2)[1]
    rows = [line.strip("|").split(" | ") for line in section.splitlines()[2:]]
    return {r[0].strip(): [c.strip() for c in r[1:]] for r in rows}


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    root = make_map(tmp_path_factory.mktemp("map"))
    (root / "p0" / "n32" / "value_ceiling.json").write_text(
        json.dumps({"ceiling": 0.42, "ceiling_ci": [0.31, 0.55], "critic_ev": 0.2, "points": 100}))
    return root, *render_map_report([root])


def test_each_cells_difference_interval_and_verdict_per_axis(rendered):
    root, markdown, pngs, cells = rendered
    assert [(c.horizon, c.check_prob) for c in cells] == [(8, 0.0), (8, 1.0), (32, 0.0), (32, 1.0)]
    assert (root / "map.md").read_text() == markdown  # default --out: the one root given
    for name in ("complete rollouts", "generated tokens", "train FLOPs", "wall seconds"):
        ppo = _table(markdown.split("## PPO_LONG - GRPO")[1], f"### matched {name}")
        # 8 decisions, p 0: mean(0.8, 0.9, 0.9) - mean(0.5, 0.6, 0.7) = 0.8667 - 0.6 = +0.267; the interval,
        # df = 3.2, lies above 0
        half = welch_half([0.5, 0.6, 0.7], [0.8, 0.9, 0.9])
        assert ppo["8"][0] == f"+0.267 [{0.8 / 3 - half:+.3f}, {0.8 / 3 + half:+.3f}] PPO_LONG ahead"
        # 32 decisions, p 0: mean(0.1, 0.1, 0.2) - mean(0.3, 0.3, 0.4) = -0.200, equal variances: df 4,
        # half-width 2.776 * sqrt(2 * 0.00333 / 3) = 0.131: [-0.331, -0.069]
        assert ppo["32"][0] == "-0.200 [-0.331, -0.069] GRPO ahead"
        grouped = _table(markdown.split("## GROUPED_VALUE - GRPO")[1], f"### matched {name}")
        # mean(0.3, 0.4, 0.5) - mean(0.3, 0.3, 0.4) = 0.4 - 0.3333 = +0.067
        assert grouped["32"][0].startswith("+0.067 [") and grouped["32"][0].endswith("inconclusive")
        assert grouped["32"][1] == "not run"  # p 1, 32 decisions ran GRPO and PPO_LONG only
        assert grouped["8"][1].startswith("+0.100 [")  # mean(0.6, 0.6, 0.7) - mean(0.5, 0.5, 0.6)
    assert [p.name for p in pngs] == ["map_ppo_long.png", "map_grouped_value.png"]
    assert all(p.parent == root and p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in pngs)
    for c in cells:  # the intro names every cell's directory and its compaction cap
        cap = 16 if (c.horizon, c.check_prob) == (32, 1.0) else 8
        assert f"check_prob {c.check_prob:g}: `{c.cell_dir}` (compaction cap {cap})" in markdown


def test_detail_rows_resolution_value_quality_ceiling_and_anchors(rendered):
    _, markdown, _, cells = rendered
    rows = {tuple(r[:3]): dict(zip(DETAIL_COLUMNS, r)) for r in map_detail_rows(cells, ["grpo", "ppo_long",
                                                                                         "grouped_value"])}
    assert len(rows) == 3 + 3 + 3 + 2
    ppo = rows[("8", "0", "ppo_long")]
    # mean(0.8, 0.9, 0.9) = 0.867, s = 0.0577, t(2) 4.303 * 0.0577 / sqrt(3) = 0.143
    assert ppo["held-out success (final)"] == "0.867 ± 0.143" and ppo["start model"] == "0.200"
    # the smallest difference called is the Welch interval's half-width, the same on every axis here
    half = welch_half([0.5, 0.6, 0.7], [0.8, 0.9, 0.9])
    assert ppo["smallest difference called, complete rollouts"] == f"±{half:.3f}"
    assert ppo["smallest difference called, wall seconds"] == f"±{half:.3f}"
    assert rows[("8", "0", "grpo")]["smallest difference called, train FLOPs"] == "baseline"
    # report_fixtures' critic EV 0.2 u: second half = updates 3, 4: mean(0.6, 0.8) = 0.7 on every seed
    assert ppo["critic EV held-out"] == "0.700 ± 0.000" and ppo["grouped EV held-out"] == "n/a (not logged)"
    assert ppo["anchor hit rate"] == "n/a (no step groups)"
    gv = rows[("8", "0", "grouped_value")]
    # 0.1 u + 0.05 seed over updates 3, 4: 0.35, 0.40, 0.45 -> 0.400, s 0.05: 4.303 * 0.05 / sqrt(3) = 0.124
    assert gv["grouped EV held-out"] == "0.400 ± 0.124" and gv["anchor hit rate"] == "0.500 ± 0.000"
    assert gv["critic EV held-out"] == "n/a (no critic)"
    assert rows[("32", "0", "grouped_value")]["EV* (value ceiling)"] == "0.420 [0.310, 0.550]"
    assert rows[("32", "1", "ppo_long")]["EV* (value ceiling)"] == "not measured"
    assert ("32", "1", "grouped_value") not in rows
    assert "| 32 | 0 | grpo | 0.333 ± 0.143 | 0.200 | baseline |" in markdown


def test_methods_filter_and_a_missing_cell(tmp_path):
    root = make_map(tmp_path / "map", {
        (0.0, 8): {"grpo": [0.5, 0.6], "ppo_long": [0.7, 0.8], "grouped_value": [0.6, 0.6]},
        (0.5, 32): {"grpo": [0.3, 0.4], "ppo_long": [0.2, 0.3]},
    })
    markdown, pngs, cells = render_map_report([root / "p0" / "n8", root / "p0.5"], tmp_path / "out",
                                              ["grpo", "grouped_value"])
    assert [p.name for p in pngs] == ["map_grouped_value.png"] and "PPO_LONG" not in markdown
    table = _table(markdown, "### matched complete rollouts")
    # mean(0.6, 0.6) - mean(0.5, 0.6) = +0.050; (32, 0) and (8, 0.5) were never run
    assert table["8"][0].startswith("+0.050 [") and table["8"][1] == "not run"
    assert table["32"] == ["not run", "not run"]  # p 0.5 has no grouped_value runs
    assert {c.check_prob for c in cells} == {0.0, 0.5}
    with pytest.raises(ReportError, match="--methods names rloo, which no cell ran"):
        render_map_report([root], tmp_path / "out", ["grpo", "rloo"])


def test_two_cells_at_one_position_or_none_found_are_errors(tmp_path):
    root = make_map(tmp_path / "map", {(0.5, 8): {"grpo": [0.5, 0.6], "ppo_long": [0.7, 0.8]}})
    shutil.copytree(root / "p0.5" / "n8", tmp_path / "again" / "n8")
    with pytest.raises(ReportError, match=r"two cells at 8 decisions, check_prob 0.5: .*map/p0.5/n8 and .*again/n8$"):
        render_map_report([root, tmp_path / "again"], tmp_path)
    assert len(find_cells(root)) == 1 and find_cells(root / "p0.5" / "n8") == [root / "p0.5" / "n8"]
    (tmp_path / "empty" / "sub").mkdir(parents=True)
    with pytest.raises(ReportError, match=r"no map cell under .*empty; allowed: a comparison sweep directory"):
        render_map_report([tmp_path / "empty"])
    (root / "p0.5" / "n8" / "value_ceiling.json").write_text('{"critic_ev": 0.1}')
    with pytest.raises(ReportError, match="value_ceiling.json is not a value ceiling"):
        render_map_report([root])


def test_map_cli_writes_the_report_and_rejects(tmp_path):
    root = make_map(tmp_path / "map", {(0.0, 8): {"grpo": [0.5, 0.6], "ppo_long": [0.7, 0.8]},
                                       (1.0, 8): {"grpo": [0.5, 0.5], "ppo_long": [0.6, 0.7]}})
    done = run_entry("experiments.report.map", [str(root)], cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert (root / "map.md").read_text().strip() == done.stdout.strip()
    assert (root / "map_ppo_long.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    for argv, message in (([str(tmp_path / "none")], "report: no map cell under"),
                          ([str(root), "--methods", "grpo"], "report: --methods='grpo' invalid")):
        bad = run_entry("experiments.report.map", argv, cwd=ROOT)
        assert bad.returncode == 2 and bad.stderr.strip().splitlines()[-1].startswith(message), bad.stderr
