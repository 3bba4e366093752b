"""The closed-form claims, one test each, tagged with the claim's ID: the one place their expected
numbers are written, each with its hand arithmetic. ``python -m experiments.reproduce_claims`` runs
these tests as the claims' rows (experiments/claims/tagged.py; the ``claim`` fixture comes from
tests/claims/conftest.py); ``claim.expect`` asserts a number and puts it in the row's "expected"
text. The docstring is the claim in short (docs/claims.md)."""

from __future__ import annotations

import math

import pytest

from experiments.claims import closed_form as cf


@pytest.mark.claim("C1")
def test_c1_the_importance_ratio_is_per_token(claim):
    """PPO's importance ratio is per token; the product over a sequence is a different quantity."""
    m = claim.measure(cf.measure_c1)
    # old [.5, .25, .5], new [.6, .2, .6]: 0.6 / 0.5 = 1.2, 0.2 / 0.25 = 0.8
    claim.expect("tokens", m.token_ratios, [1.2, 0.8, 1.2])
    # the sequence ratio is their product 1.2 * 0.8 * 1.2
    claim.expect("product", m.product, 1.152)
    # A = 1, clip 0.25 not active: the surrogate is the mean ratio (1.2 + 0.8 + 1.2) / 3, not the product
    claim.expect("token-level surrogate (A=1)", m.token_objective, 3.2 / 3)
    claim.note("token-level PPO uses per-token ratios")
    assert m.token_objective != pytest.approx(m.product, abs=1e-3)
    assert m.geometric == pytest.approx(m.product ** (1 / 3), abs=1e-12)  # GSPO's length-normalised ratio


@pytest.mark.claim("C2")
def test_c2_group_advantage_uses_the_population_std(claim):
    """GRPO's advantage is the reward minus the group mean over the group's (population) std."""
    m = claim.measure(cf.measure_c2)
    # r = [0, 0, 1, 1]: mean 2 / 4; population std sqrt(4 * 0.5^2 / 4); A = (r - 0.5) / 0.5
    claim.expect("mean", m.mean, 0.5)
    claim.expect("std", m.std, 0.5)
    claim.expect("A", m.advantages, [-1, -1, 1, 1], tol=1e-5)  # eps in the denominator


@pytest.mark.claim("C3")
def test_c3_all_same_groups_have_no_task_gradient(claim):
    """A group whose members all got the same reward carries no task signal; only a KL term can
    still move the policy."""
    m = claim.measure(cf.measure_c3)
    claim.note("A all 0; task-reward grad exactly 0; k3 KL grad non-zero")
    assert [g.rewards for g in m.groups] == [(0.0,) * 4, (1.0,) * 4]
    for g in m.groups:  # r - mean(r) = 0 for every member; eps keeps 0 / 0 away
        assert g.advantages == (0.0,) * 4 and g.task_grad == 0.0 and g.kl_grad > 0.0


@pytest.mark.claim("C4")
def test_c4_conventions_change_the_numbers(claim):
    """Small conventions change the update."""
    m = claim.measure(cf.measure_c4)
    # r = [0, 0, 1, 1]: no division leaves r - mean; the population std sqrt(4 * 0.25 / 4) = 0.5
    # divides it by 0.5 (C2's advantages), the sample std sqrt(4 * 0.25 / 3) by sqrt(1/3)
    claim.expect("no std division A", m.raw, [-0.5, -0.5, 0.5, 0.5])
    claim.expect("population std A", m.population, [a / 0.5 for a in m.raw])
    claim.expect("sample std A", m.sample, [a / math.sqrt(1 / 3) for a in m.raw])
    # loss [1] and [0, 0, 0]: token-mean (1 + 0 + 0 + 0) / 4; sequence-mean (1 / 1 + 0 / 3) / 2
    claim.expect("token-mean", m.token_mean, 0.25, tol=1e-6)
    claim.expect("seq-mean", m.seq_mean, 0.5, tol=1e-6)
    claim.note("each pair differs on the same data")


@pytest.mark.claim("C5")
def test_c5_mixed_group_probability(claim):
    """The chance that a group of G independent tries mixes success and failure is
    `1 - p^G - (1-p)^G`."""
    m = claim.measure(cf.measure_c5)
    # G = 8: 1 - 0.02^8 - 0.98^8 = 1 - 2.56e-14 - 0.850763 = 0.149237; 1 - 0.2^8 - 0.8^8 =
    # 1 - 2.56e-6 - 0.167772 = 0.832225; p = 0.98 mirrors 0.02. Printed to one decimal of a percent.
    assert m.group_size == 8 and list(m.p_mix) == [0.02, 0.2, 0.98]
    claim.expect("P_mix % at p = 0.02, 0.2, 0.98:", [100 * v for v in m.p_mix.values()], [14.9, 83.2, 14.9], tol=0.05)
    claim.note("ValueError on bad p / G (bool G included)")
    assert len(m.rejected) == m.tried == len(cf.C5_BAD_INPUTS) and "(0.5, True)" in m.rejected


@pytest.mark.claim("C15")
def test_c15_gae_lambda_interpolates_td_and_return(claim):
    """GAE with lambda interpolates between one-step TD and the full return."""
    m = claim.measure(cf.measure_c15)
    # deltas [0 + .3 - .9, 0 + .8 - .3, 1 - .8] = [-.6, .5, .2];
    # lambda .5: A2 = .2, A1 = .5 + .5 * .2 = .6, A0 = -.6 + .5 * .6 = -.3
    claim.expect("lambda .5:", m.lambda_half, [-0.3, 0.6, 0.2])
    # lambda 1: the full return 1 minus each value [.9, .3, .8]
    claim.expect("lambda 1:", m.lambda_one, [0.1, 0.7, 0.2])
    assert m.lambda_one == pytest.approx(m.return_minus_value, abs=1e-12)


@pytest.mark.claim("C16")
def test_c16_a_compression_is_not_a_termination(claim):
    """A compression boundary is not a termination: flagging it terminal flips the sign of the signal."""
    m = claim.measure(cf.measure_c16)
    # r = 0, V = 0.6, V' = 0.8, gamma 0.9. Continues: target 0 + 0.9 * 0.8, residual target - 0.6;
    # flagged terminal: target r = 0, residual 0 - 0.6
    claim.expect("continue: target, residual", (m.continue_target, m.continue_residual), (0.72, 0.12))
    claim.expect("terminal: target, residual", (m.terminal_target, m.terminal_residual), (0.0, -0.6))


@pytest.mark.claim("C18")
def test_c18_the_loss_average_survives_slicing(claim):
    """How the loss is averaged decides how much long trajectories weigh, and that choice must
    survive slicing."""
    m = claim.measure(cf.measure_c18)
    # task A: 2 x loss 1, task B: 6 x loss 3. Task-mean (1 + 3) / 2; token-mean (2 * 1 + 6 * 3) / 8
    whole = (m.task_mean, m.token_mean)
    claim.expect("task-mean, token-mean", whole, (2.0, 2.5), tol=1e-6)
    claim.expect("summed over micro-batches with global weights", (m.task_mean_micro, m.token_mean_micro), whole,
                 tol=1e-6)
    # per-micro-batch token-mean (1 + 3) / 2 = task-mean, not token-mean; per-segment (1 + 3 + 3) / 3
    claim.expect("per-micro-batch token-mean, per-segment mean", (m.local, m.per_segment), (m.task_mean, 7 / 3),
                 tol=1e-6)
    assert m.local != pytest.approx(m.token_mean, abs=1e-3)


@pytest.mark.claim("C25")
def test_c25_clipping_is_not_a_kl_penalty(claim):
    """PPO's clip only shapes the local objective; it is not a KL penalty."""
    m = claim.measure(cf.measure_c25)
    # ratio 1.5, clip 0.2. A = +1: loss -min(1.5, 1.2) = -1.2, clipped, no gradient;
    # A = -1: loss -min(-1.5, -1.2) = 1.5, dL/dlogp = r = 1.5; the loss leaves the ratio at 1.5
    claim.expect("clipped (A = +1, -1)", m.clipped, (True, False))
    claim.expect("dL/dlogp", m.grad, [0.0, 1.5])
    claim.expect("loss", m.loss, [-1.2, 1.5])
    claim.expect("ratio after the loss (not capped)", m.ratio, [1.5, 1.5])
    claim.note("KL grad != 0 at ratios 1")
    assert m.grad[0] == 0.0 and m.ratios_all_one and m.kl > 0 and m.kl_grad_max > 0
