"""experiments.claims.roles on the real engine and GRPO trainer: the numbers behind C7 and C8."""

from __future__ import annotations

import pytest
import torch

from algos.advantages import group_advantages
from experiments.claims import roles
from experiments.claims.common import rollout_batch

torch.set_num_threads(1)
pytestmark = pytest.mark.slow


def test_c7_stale_behavior_logprobs_differ_from_old_ones_and_reference_is_frozen():
    m = roles.measure_c7()
    assert m.passes()  # the claim's pass rule holds on the same numbers
    assert m.updates == 2 and (m.sampler_version, m.policy_version, m.lag) == (0, 1, 1)
    assert m.token_versions == (0,)
    assert m.first_gap_max < 1e-5 < 1e-3 < m.stale_gap_max  # same weights at update 1, one step behind at 2
    assert m.metric_gap == pytest.approx(m.stale_gap_mean, abs=1e-6)
    assert all(g < 1e-5 for g in m.sync_gap_max) and len(m.sync_gap_max) == 2
    assert m.separate_fields and m.reference_separate and m.reference_frozen
    assert m.reference_moved == 0.0 < m.policy_moved and m.kl_ref > 0 and m.verifier_field


def test_c8_observation_tokens_get_no_weight_and_the_wrong_mask_puts_them_in_the_loss():
    m = roles.measure_c8()
    assert m.passes()  # the claim's pass rule holds on the same numbers
    assert m.env_tokens == m.bos + m.observation + m.sep + m.forced_eos
    assert m.env_weight_max == 0.0 and m.env_advantage_max == 0.0 and m.sampled_is_action_mask
    assert m.sampled_weight_min == pytest.approx(1 / m.sampled_tokens)  # token-mean: 1 / action tokens
    assert m.boundaries_ok and m.eos_ok and m.padding_ok and m.version_ok and m.temperatures == (1.0,)
    # the wrong mask: every real token but BOS
    assert m.loss_tokens_real == m.sampled_tokens
    assert m.loss_tokens_observations == m.sampled_tokens + m.env_tokens - m.bos
    assert m.grad_env_real == 0 and m.grad_env_observations > 0
    # independent reference: at ratio 1 the clipped loss is -A per token, so token-mean over a mask
    # is -sum_i A_i n_i / sum_i n_i with n_i the trajectory's tokens in the mask
    trajs = rollout_batch(8)
    adv = group_advantages(torch.tensor([t.train_reward for t in trajs]),
                           torch.tensor([t.group_id for t in trajs]), std="population", eps=1e-6)
    n_act = torch.tensor([sum(sum(s.action_mask) for s in t.segments) for t in trajs], dtype=torch.float64)
    n_obs = torch.tensor([sum(len(s.tokens) - 1 for s in t.segments) for t in trajs], dtype=torch.float64)
    assert m.loss_real == pytest.approx(float(-(adv * n_act).sum() / n_act.sum()), abs=1e-5)
    assert m.loss_observations == pytest.approx(float(-(adv * n_obs).sum() / n_obs.sum()), abs=1e-5)
    assert m.loss_real != pytest.approx(m.loss_observations, abs=1e-3)
