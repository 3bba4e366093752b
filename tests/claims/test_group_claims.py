"""experiments.claims.groups on the real engine and GRPO trainer: the numbers behind C6, C12, C13
and C14 (the start model is the cached warm start of ``claims_config()``)."""

from __future__ import annotations

import pytest
import torch

from algos.advantages import group_advantages
from experiments.claims import groups
from experiments.claims.common import rollout_batch

torch.set_num_threads(1)
pytestmark = pytest.mark.slow


def test_c6_independent_groups_match_p_mix_and_correlated_groups_mix_less():
    m = groups.measure_c6()
    assert m.passes()  # the claim's pass rule holds on the same numbers
    ind, shared, mixed = m.independent, m.shared_seed, m.mixed_tasks
    # groups with a masked member (an infra error) are left out: the rest have all 8 tries
    assert 100 <= ind.groups <= 120 and ind.trials == 8 * ind.groups and 0 < ind.p_hat < 1
    assert ind.mixed_rate == ind.mixed_groups / ind.groups
    assert m.ci_low <= ind.p_mix <= m.ci_high
    # a shared env seed and sampling stream make the 8 members one draw: every group all-0 or all-1
    assert m.identical_groups == 120 and shared.mixed_rate == 0.0 < shared.p_mix
    # the unseen template is harder, and mixing two difficulties lowers the mixed rate below P_mix(pooled p)
    assert m.p_heldout < m.p_train
    assert mixed.mixed_rate < mixed.p_mix and mixed.mixed_rate < ind.mixed_rate


def test_c12_short_success_and_long_failure_get_plus_and_minus_one():
    m = groups.measure_c12()
    assert m.passes()  # the claim's pass rule holds on the same numbers
    assert (m.win.turns, m.lose.turns) == (4, 10)
    assert (m.win.verified, m.lose.verified) == (1, 0)
    assert m.win.action_tokens != m.lose.action_tokens
    # rewards [1, 0]: mean 0.5, population std 0.5, A = (r - 0.5) / 0.5 = [+1, -1]
    assert (m.mean, m.std) == (0.5, 0.5) and m.trajectory_advantages == (1.0, -1.0)
    assert m.broadcast and m.env_tokens_zero


def test_c13_segments_stay_two_group_members():
    m = groups.measure_c13()
    assert m.passes()  # the claim's pass rule holds on the same numbers
    assert (m.good.segments, m.bad.segments) == (3, 6) and m.rows == 9
    assert m.group_inputs == 2 and m.n_groups == 1 and m.trajectory_advantages == (1.0, -1.0)
    assert m.segments_share
    assert m.good.task_id == m.bad.task_id and (m.good.reward, m.bad.reward) == (1.0, 0.0)
    # LongHorizon-v3, 4 stages, compression every 2 turns: 6 turns -> 3 segments, 12 turns -> 6
    assert (m.good.turns, m.bad.turns) == (6, 12) and m.good.task_id.startswith("lh3-")


def test_c14_grpo_advantage_is_constant_inside_each_trajectory():
    m = groups.measure_c14()
    assert m.passes()  # the claim's pass rule holds on the same numbers
    assert m.rollouts == 64 and m.max_spread == 0.0 and m.equal_to_trajectory and m.env_tokens_zero
    assert m.mixed_groups > 0 and m.successes_above_failures
    # the example group's values are the group advantages of its rewards, computed independently
    trajs = rollout_batch(8)
    first_mixed = next(g for g in sorted({t.group_id for t in trajs})
                       if len({t.train_reward for t in trajs if t.group_id == g}) > 1)
    rewards = torch.tensor([t.train_reward for t in trajs if t.group_id == first_mixed])
    expected = group_advantages(rewards, torch.zeros(len(rewards), dtype=torch.long), std="population", eps=1e-6)
    assert list(m.example) == pytest.approx(expected.tolist(), abs=1e-6)
