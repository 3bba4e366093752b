"""experiments.claims.closed_form: the numbers of each closed-form measurement, hand-computed, and each
claim's pass rule on them."""

from __future__ import annotations

import math

import pytest

from experiments.claims import closed_form as cf


def test_c1_token_ratios_product_and_surrogate():
    m = cf.measure_c1()
    assert m.passes()  # the claim\'s pass rule
    # 0.6/0.5 = 1.2, 0.2/0.25 = 0.8; product 1.2 * 0.8 * 1.2 = 1.152; geometric 1.152^(1/3)
    assert m.token_ratios == pytest.approx([1.2, 0.8, 1.2], abs=1e-12)
    assert m.product == pytest.approx(1.152, abs=1e-12)
    assert m.geometric == pytest.approx(1.152 ** (1 / 3), abs=1e-12)
    # A = 1, clip 0.25 not active: mean of the ratios (1.2 + 0.8 + 1.2) / 3
    assert m.token_objective == pytest.approx(3.2 / 3, abs=1e-12)


def test_c2_population_std_group_advantages():
    m = cf.measure_c2()
    assert m.passes()  # the claim\'s pass rule
    # mean 0.5; population std sqrt(((0.5^2) * 4) / 4) = 0.5; A = (r - 0.5) / 0.5
    assert (m.mean, m.std) == (0.5, 0.5)
    assert m.advantages == pytest.approx([-1, -1, 1, 1], abs=1e-5)


def test_c3_all_same_groups_have_zero_task_gradient_but_a_kl_gradient():
    m = cf.measure_c3()
    assert m.passes()  # the claim\'s pass rule
    assert [g.rewards for g in m.groups] == [(0.0,) * 4, (1.0,) * 4]
    for g in m.groups:
        assert g.advantages == (0.0,) * 4 and g.task_grad == 0.0 and g.kl_grad > 0.0


def test_c4_conventions_differ():
    m = cf.measure_c4()
    assert m.passes()  # the claim\'s pass rule
    # sample std sqrt(1 / 3) -> A = 0.5 / sqrt(1/3) = sqrt(0.75)
    assert m.sample == pytest.approx([-math.sqrt(0.75)] * 2 + [math.sqrt(0.75)] * 2, abs=1e-12)
    assert m.population == pytest.approx([-1, -1, 1, 1], abs=1e-12)
    assert m.raw == (-0.5, -0.5, 0.5, 0.5)
    # token-mean (1 + 0 + 0 + 0) / 4; sequence mean (1/1 + 0/3) / 2
    assert m.token_mean == pytest.approx(0.25) and m.seq_mean == pytest.approx(0.5)


def test_c5_p_mix_and_validation():
    m = cf.measure_c5()
    assert m.passes()  # the claim\'s pass rule
    # 1 - 0.02^8 - 0.98^8 = 0.1492...; 1 - 0.2^8 - 0.8^8 = 0.8322...
    assert m.p_mix[0.02] == pytest.approx(1 - 0.02**8 - 0.98**8)
    assert m.p_mix[0.2] == pytest.approx(1 - 0.2**8 - 0.8**8)
    assert m.p_mix[0.98] == pytest.approx(m.p_mix[0.02])
    assert m.rejected == ("(1.5, 8)", "(-0.1, 8)", "(0.5, True)", "(0.5, 0)", "(0.5, 8.0)") and m.tried == 5


def test_c15_c16_gae_numbers():
    m = cf.measure_c15()
    assert m.passes()  # the claim\'s pass rule
    # lambda 0: deltas [0 + .3 - .9, 0 + .8 - .3, 1 - .8] = [-.6, .5, .2];
    # lambda .5: A2 = .2, A1 = .5 + .5 * .2 = .6, A0 = -.6 + .5 * .6 = -.3
    assert m.lambda_half == pytest.approx([-0.3, 0.6, 0.2], abs=1e-12)
    assert m.lambda_one == pytest.approx([0.1, 0.7, 0.2], abs=1e-12) == m.return_minus_value
    m = cf.measure_c16()
    assert m.passes()  # the claim\'s pass rule
    # continue: 0 + 0.9 * 0.8 = 0.72, residual 0.72 - 0.6; terminal: target 0, residual -0.6
    assert m.continue_target == pytest.approx(0.72) and m.continue_residual == pytest.approx(0.12)
    assert m.terminal_target == 0.0 and m.terminal_residual == pytest.approx(-0.6)


def test_c18_slice_weighting():
    m = cf.measure_c18()
    assert m.passes()  # the claim\'s pass rule
    # task-mean (1 + 3) / 2 = 2; token-mean (2 * 1 + 6 * 3) / 8 = 2.5; per-micro-batch token-mean
    # (1 + 3) / 2 = 2; per-segment mean (1 + 3 + 3) / 3
    assert (m.task_mean, m.token_mean) == pytest.approx((2.0, 2.5))
    assert (m.task_mean_micro, m.token_mean_micro) == pytest.approx((2.0, 2.5))
    assert m.local == pytest.approx(2.0) and m.per_segment == pytest.approx(7 / 3)


def test_c25_clipping_is_not_a_kl_penalty():
    m = cf.measure_c25()
    assert m.passes()  # the claim\'s pass rule
    # A = +1: -min(1.5, 1.2) = -1.2 (clipped, no gradient); A = -1: -min(-1.5, -1.2) = 1.5, dL/dlogp = r = 1.5
    assert m.clipped == (True, False) and m.grad == pytest.approx([0.0, 1.5])
    assert m.loss == pytest.approx([-1.2, 1.5]) and m.ratio == pytest.approx([1.5, 1.5])
    assert m.ratios_all_one and m.kl > 0 and m.kl_grad_max > 0
