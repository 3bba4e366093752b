"""``python -m benchmarks train``'s per-turn cost table on LongHorizon-v3."""

from __future__ import annotations

import pytest

from benchmarks.train import bench_turn_cost, turn_cost_ratios


def test_turn_cost_ratio_is_longest_over_shortest_horizon_per_compression():
    rows = [{"n_stages": 128, "compression": "none", "ms_per_turn": 3.0},
            {"n_stages": 8, "compression": "none", "ms_per_turn": 2.0},
            {"n_stages": 8, "compression": "structured_summary", "ms_per_turn": 2.0},
            {"n_stages": 128, "compression": "structured_summary", "ms_per_turn": 2.2}]
    # none: 3.0 / 2.0 = 1.5; structured_summary: 2.2 / 2.0 = 1.1
    assert turn_cost_ratios(rows) == pytest.approx({"none": 1.5, "structured_summary": 1.1})


def test_turn_cost_replays_solved_oracle_episodes_and_compression_bounds_the_context():
    rows = {r["compression"]: r for r in bench_turn_cost((40,))}
    for r in rows.values():
        # the v3 oracle: read the notes, one fix per stage, submit = n_stages + 2 turns, verified
        assert r["verified"] == 1 and r["turns"] == 42
    assert rows["none"]["segments"] == 1 and rows["structured_summary"]["segments"] > 1
    assert rows["structured_summary"]["max_context"] < rows["none"]["max_context"]
