"""experiments.claims.compare and .process: the numbers behind C19, C20 and C24's trainer part,
read from real ``experiments.runtime.loop.run`` runs (computed once per pytest session)."""

from __future__ import annotations

import math

import pytest
import torch

from experiments.claims import compare, process

torch.set_num_threads(1)
pytestmark = pytest.mark.slow


def test_c19_compute_matched_runs_report_every_axis_under_one_protocol():
    m = compare.measure_c19()
    assert m.passes()  # the claim's pass rule holds on the same numbers
    g, p = m.grpo, m.ppo
    assert (g.group_size, p.group_size) == (4, 1)
    assert m.protocol_differ == () and m.protocol_items == len(compare.PROTOCOL_ITEMS) and m.same_start
    for run in (g, p):
        assert list(run.compute) == list(compare.COMPUTE_AXES)
        assert all(isinstance(v, (int, float)) and math.isfinite(v) for v in run.compute.values())
        assert run.compute["compute/rollouts"] >= m.budget == compare.C19_BUDGET
        assert run.test_budget == 4 and run.eval_tasks == 8  # 4 samples x 8 held-out tasks
        assert 0.0 <= run.eval_success <= 1.0
    # GRPO 4 x 4 = 16 rollouts per update, PPO 16 x 1: the same number of updates for the budget
    assert g.updates == p.updates == compare.C19_BUDGET // 16


def test_c20_diagnostics_are_logged_in_every_update():
    m = compare.measure_c20()
    assert m.passes()  # the claim's pass rule holds on the same numbers
    assert m.problems() == []
    for r in (m.grpo, m.ppo):
        assert r.eval_split == "heldout"
        assert all(n == r.updates for n in r.finite_updates.values()), r.finite_updates
    assert list(m.grpo.finite_updates) == list(compare.C20_GRPO_KEYS)
    assert list(m.ppo.finite_updates) == list(compare.C20_PPO_KEYS)
    ev, points = m.heldout_ev, m.heldout_points
    assert len(ev) == len(points) == m.ppo.updates
    assert any(v is not None and math.isfinite(v) for v in ev)
    assert all(isinstance(n, int) for n in points)
    assert 0.0 <= m.grpo.all_zero_rate + m.grpo.all_one_rate <= 1.0


def test_c24_biased_process_reward_is_farmed_by_the_trainer():
    m = process.measure_c24_trainer()
    assert m.passes()  # the claim's pass rule (its trainer part) holds on the same numbers
    b, o = m.biased, m.outcome
    assert (b.algo, b.mode, o.algo, o.mode) == ("grpo", process.C24_BIASED, "grpo", "outcome")
    assert b.updates == o.updates == process.C24_BUDGET // 16
    assert b.scored_step_frac is None and o.scored_step_frac is None  # GRPO has no step rewards
    # under the biased reward the training reward outgrows the verified success ...
    assert b.reward_last - b.reward_first > b.success_last - b.success_first
    assert b.reward_last - b.success_last >= 0.2
    # ... while under the outcome reward the training reward is the verified success
    assert o.reward_first == pytest.approx(o.success_first, abs=0.05)
    assert o.reward_last == pytest.approx(o.success_last, abs=0.05)
    # grpo_process at the same budget under the same biased reward farms it too
    pb = m.process_biased
    assert (pb.algo, pb.mode, pb.updates) == ("grpo_process", process.C24_BIASED, process.C24_BUDGET // 16)
    assert pb.reward_last - pb.success_last >= 0.2
    assert 0.0 < pb.scored_step_frac <= 1.0  # some steps carry a reward of their own
    assert all(0.0 <= v <= 1.0 for v in (pb.success_first, pb.success_last, pb.eval_train_success))
