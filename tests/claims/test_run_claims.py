"""experiments.claims.compare and .process: the numbers behind C19, C20 and C24's trainer part,
read from real ``experiments.runtime.loop.run`` runs (computed once per pytest session)."""

from __future__ import annotations

import math

import pytest
import torch

from experiments.claims import criteria
from experiments.claims import compare, process

torch.set_num_threads(1)
pytestmark = pytest.mark.slow


def test_c19_compute_matched_runs_report_every_axis_under_one_protocol():
    m = compare.measure_c19()
    assert criteria.c19_passes(m)  # the table's criterion holds on the same numbers
    g, p = m["grpo"], m["ppo"]
    assert (g["group_size"], p["group_size"]) == (4, 1)
    assert m["protocol_differ"] == [] and m["protocol_items"] == len(compare.PROTOCOL_ITEMS) and m["same_start"]
    for run in (g, p):
        assert all(isinstance(run[k], (int, float)) and math.isfinite(run[k]) for k in compare.COMPUTE_AXES)
        assert run["compute/rollouts"] >= m["budget"] == compare.C19_BUDGET
        assert run["eval/test_budget"] == 4 and run["eval/tasks"] == 8  # 4 samples x 8 held-out tasks
        assert 0.0 <= run["eval/success"] <= 1.0
    # GRPO 4 x 4 = 16 rollouts per update, PPO 16 x 1: the same number of updates for the budget
    assert g["updates"] == p["updates"] == compare.C19_BUDGET // 16


def test_c20_diagnostics_are_logged_in_every_update():
    m = compare.measure_c20()
    assert criteria.c20_passes(m)  # the table's criterion holds on the same numbers
    for name in ("grpo", "ppo"):
        r = m[name]
        assert r["eval_split"] == "heldout"
        assert all(n == r["updates"] for n in r["finite_updates"].values()), r["finite_updates"]
    ev, points = m["ppo"]["heldout_ev"], m["ppo"]["heldout_points"]
    assert len(ev) == len(points) == m["ppo"]["updates"]
    assert any(v is not None and math.isfinite(v) for v in ev)
    assert all(isinstance(n, int) for n in points)
    assert 0.0 <= m["grpo"]["means"]["rollout/all_zero_rate"] + m["grpo"]["means"]["rollout/all_one_rate"] <= 1.0


def test_c24_biased_process_reward_is_farmed_by_the_trainer():
    m = process.measure_c24_trainer()
    assert criteria.c24_trainer_passes(m)  # the table's criterion holds on the same numbers
    b, o = m["biased"], m["outcome"]
    assert b["updates"] == o["updates"] == process.C24_BUDGET // 16
    # under the biased reward the training reward outgrows the verified success ...
    assert b["reward_last"] - b["reward_first"] > b["success_last"] - b["success_first"]
    assert b["reward_last"] - b["success_last"] >= 0.2
    # ... while under the outcome reward the training reward is the verified success
    assert o["reward_first"] == pytest.approx(o["success_first"], abs=0.05)
    assert o["reward_last"] == pytest.approx(o["success_last"], abs=0.05)
    # grpo_process at the same budget under the same biased reward farms it too
    pb = m["process_biased"]
    assert (pb["algo"], pb["mode"], pb["updates"]) == ("grpo_process", process.C24_BIASED, process.C24_BUDGET // 16)
    assert pb["reward_last"] - pb["success_last"] >= 0.2
    assert 0.0 < pb["scored_step_frac"] <= 1.0  # some steps carry a reward of their own
    assert all(0.0 <= pb[k] <= 1.0 for k in ("success_first", "success_last", "eval_train_success"))
