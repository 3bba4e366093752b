"""Decoupled GAE (the critic's targets at ``algo.critic_lam``, the actor's advantages at ``algo.lam``
or the length-adaptive ``algo.lam_alpha``), ``algo.critic_lr``, and value pretraining
(``algo.value_warmup_updates``) counted on every compute axis: hand-computed numbers, a plain-Python
loop reference, hypothesis properties, and the trainer's and config's behaviour."""

import copy
import json
import math
import os
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from algos.advantages import decoupled_gae, discounted_returns, gae, length_adaptive_lam, relative_position_lam
from algos.batch import ContextBuilder, Trajectory, collate
from algos.compute import ComputeMeter, attention_flops
from algos.policy import PolicyModel, PolicyShape, ValueModel, count_params
from algos.trainer import make_trainer
from algos.update import UpdateInputs
from entry import run_entry
from experiments.runtime.schema import AlgoConfig, ConfigError
from gae_strategies import as_tensors, gae_batches, small, unit
from synthetic_trajectories import EOS, compressed_traj, make_traj

torch.set_num_threads(1)
ROOT = Path(__file__).resolve().parents[2]

PROPERTY = settings(max_examples=50, deadline=None)
F64 = torch.float64
# float64 recursions over <= 9 positions of values in [-3, 3]: rounding stays below 1e-12; 1e-9
# leaves room and is still far below any modelling difference the properties look for
TOL = 1e-9


def row(*xs):
    return torch.tensor([list(xs)], dtype=F64)


def flags(*xs):
    return torch.tensor([list(xs)], dtype=torch.bool)


# ------------------------------------------------------------------ the plain-Python reference


def lam_recursion(r, v, nv, term, trunc, mask, gamma, lam):
    """One row, one lambda: walk backwards over the mask=1 positions only."""
    adv, nxt = [0.0] * len(r), 0.0
    for t in reversed(range(len(r))):
        if not mask[t]:
            continue
        delta = r[t] + gamma * (0.0 if term[t] else nv[t]) - v[t]
        nxt = delta + gamma * lam * (0.0 if (term[t] or trunc[t]) else 1.0) * nxt
        adv[t] = nxt
    return adv


def decoupled_row_reference(r, v, nv, term, trunc, mask, gamma, lam_actor, lam_critic):
    """``(A at lam_actor, A at lam_critic + V)`` of one row; 0 off the mask."""
    adv = lam_recursion(r, v, nv, term, trunc, mask, gamma, lam_actor)
    critic = lam_recursion(r, v, nv, term, trunc, mask, gamma, lam_critic)
    return adv, [critic[t] + v[t] if mask[t] else 0.0 for t in range(len(r))]


# ------------------------------------------------------------------ hand-computed numbers


def test_three_points_actor_half_critic_one_gives_mc_targets_and_half_lambda_advantages():
    r, v, nv = row(0, 0, 1), row(0.2, 0.5, 0.4), row(0.5, 0.4, 0.0)
    term, no = flags(False, False, True), flags(False, False, False)
    # deltas (gamma 1): 0 + 0.5 - 0.2 = 0.3; 0 + 0.4 - 0.5 = -0.1; 1 + 0 - 0.4 = 0.6
    # actor, lam 0.5: A2 = 0.6; A1 = -0.1 + 0.5 * 0.6 = 0.2; A0 = 0.3 + 0.5 * 0.2 = 0.4
    # critic, lam 1: A2 = 0.6; A1 = -0.1 + 0.6 = 0.5; A0 = 0.3 + 0.5 = 0.8; R = A + V = 1, 1, 1 (the MC return)
    adv, ret = decoupled_gae(r, v, nv, term, no, gamma=1.0, lam_actor=0.5, lam_critic=1.0)
    assert torch.allclose(adv, row(0.4, 0.2, 0.6), atol=1e-12)
    assert torch.allclose(ret, row(1.0, 1.0, 1.0), atol=1e-12)
    # the single-lambda GAE at 0.5 has the same advantages but targets A + V = 0.6, 0.7, 1.0
    _, ret_half = gae(r, v, nv, term, no, gamma=1.0, lam=0.5)
    assert torch.allclose(ret_half, row(0.6, 0.7, 1.0), atol=1e-12)


def test_truncated_end_critic_one_targets_are_reward_to_go_plus_bootstrap():
    r, v, nv = row(0, 0, 1), row(0.2, 0.5, 0.4), row(0.5, 0.4, 0.7)  # V(next state) = 0.7 after the cut
    no, trunc = flags(False, False, False), flags(False, False, True)
    # deltas (gamma 1): 0.3; -0.1; 1 + 0.7 - 0.4 = 1.3
    # critic, lam 1: A = 1.5, 1.2, 1.3; R = A + V = 1.7 each = reward-to-go 1 + bootstrap 0.7
    # actor, lam 0.5: A2 = 1.3; A1 = -0.1 + 0.65 = 0.55; A0 = 0.3 + 0.275 = 0.575
    adv, ret = decoupled_gae(r, v, nv, no, trunc, gamma=1.0, lam_actor=0.5, lam_critic=1.0)
    assert torch.allclose(adv, row(0.575, 0.55, 1.3), atol=1e-12)
    assert torch.allclose(ret, row(1.7, 1.7, 1.7), atol=1e-12)


def test_compression_boundary_continues_both_recursions_with_observation_positions():
    # positions: 0 action | 1 obs | 2 action, then compression | 3 obs (next segment) | 4 action, end
    mask = flags(True, False, True, False, True)
    big = 100.0  # garbage at unmasked positions must be ignored
    r, v = row(0, big, 0, big, 1), row(0.5, big, 0.6, big, 0.7)
    nv = row(0.6, big, 0.8, big, 0.0)  # 0.8 = V(compressed context); no flag at the boundary
    term, trunc = flags(False, True, False, True, True), flags(False, True, False, True, False)
    # gamma 0.9; deltas: 0 + 0.54 - 0.5 = 0.04; 0 + 0.72 - 0.6 = 0.12; 1 - 0.7 = 0.3
    # actor lam 0.5 (gamma * lam 0.45): A4 = 0.3; A2 = 0.12 + 0.135 = 0.255; A0 = 0.04 + 0.11475 = 0.15475
    # critic lam 1 (gamma * lam 0.9): A4 = 0.3; A2 = 0.12 + 0.27 = 0.39; A0 = 0.04 + 0.351 = 0.391
    #   R = A + V: 0.891, 0.99, 1.0 = 0.9^2, 0.9, 1 (the discounted terminal reward, across the boundary)
    adv, ret = decoupled_gae(r, v, nv, term, trunc, gamma=0.9, lam_actor=0.5, lam_critic=1.0, mask=mask)
    assert torch.allclose(adv, row(0.15475, 0, 0.255, 0, 0.3), atol=1e-12)
    assert torch.allclose(ret, row(0.891, 0, 0.99, 0, 1.0), atol=1e-12)


def test_per_row_actor_lambda_applies_each_rows_own_value():
    r = torch.tensor([[0.0, 0.0, 1.0], [0.0, 0.0, 1.0]], dtype=F64)
    v = torch.tensor([[0.2, 0.5, 0.4], [0.2, 0.5, 0.4]], dtype=F64)
    nv = torch.tensor([[0.5, 0.4, 0.0], [0.5, 0.4, 0.0]], dtype=F64)
    term = torch.tensor([[False, False, True]] * 2)
    no = torch.zeros(2, 3, dtype=torch.bool)
    # row 0 at lam 0.5: 0.4, 0.2, 0.6 (as above); row 1 at lam 0: the deltas 0.3, -0.1, 0.6
    adv, ret = decoupled_gae(r, v, nv, term, no, gamma=1.0, lam_actor=torch.tensor([0.5, 0.0]), lam_critic=1.0)
    assert torch.allclose(adv, torch.tensor([[0.4, 0.2, 0.6], [0.3, -0.1, 0.6]], dtype=F64), atol=1e-12)
    assert torch.allclose(ret, torch.ones(2, 3, dtype=F64), atol=1e-12)


def test_length_adaptive_lambda_numbers():
    # alpha 0.05: l = 8 -> 1 - 1/0.4 < 0 -> 0; l = 40 -> 1 - 1/2 = 0.5; l = 320 -> 1 - 1/16 = 0.9375
    # alpha 1.5: l = 40 -> 1 - 1/60 = 0.98333...; l = 0 -> 0 (alpha * l = 0 < 1)
    lam = length_adaptive_lam(torch.tensor([8, 40, 320]), 0.05)
    assert torch.allclose(lam, torch.tensor([0.0, 0.5, 0.9375], dtype=F64), atol=1e-12)
    lam = length_adaptive_lam(torch.tensor([40, 0]), 1.5)
    assert torch.allclose(lam, torch.tensor([1 - 1 / 60, 0.0], dtype=F64), atol=1e-12)


def test_relative_position_lambda_numbers():
    # q 0.5: l = 2 -> 0.5 ** 1 = 0.5; l = 3 -> 0.5 ** (1/2) = 0.7071068; l = 9 -> 0.5 ** (1/8) = 0.9170040;
    # l = 1 and l = 0 (no earlier decision) -> q = 0.5; q 1 -> 1 at every length
    lam = relative_position_lam(torch.tensor([2, 3, 9, 1, 0]), 0.5)
    assert torch.allclose(lam, torch.tensor([0.5, 0.7071068, 0.9170040, 0.5, 0.5], dtype=F64), atol=1e-7)
    assert torch.equal(relative_position_lam(torch.tensor([5, 40]), 1.0), torch.ones(2, dtype=F64))
    for kwargs, match in (({"points": torch.tensor([2]), "q": 0.0}, r"q must be a number in \(0, 1\], got 0.0"),
                          ({"points": torch.ones(2, 2), "q": 0.5}, r"points must be a 1-D torch.Tensor \[N\], got \(2, 2\)")):
        with pytest.raises(ValueError, match=match):
            relative_position_lam(**kwargs)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(2, 500), min_size=1, max_size=8), st.floats(0.01, 1.0))
def test_relative_position_lambda_leaves_q_at_the_first_decision_at_every_length(lengths, q):
    # the outcome's weight at the first of l decisions is lambda ** (l - 1) = q, whatever l
    points = torch.tensor(lengths)
    lam = relative_position_lam(points, q)
    torch.testing.assert_close(lam ** (points.to(F64) - 1), torch.full((len(lengths),), q, dtype=F64),
                               rtol=1e-9, atol=1e-12)
    ordered = relative_position_lam(torch.tensor(sorted(lengths)), q)
    assert bool((ordered[1:] >= ordered[:-1] - 1e-15).all())


@pytest.mark.parametrize("kwargs, match", [
    ({"points": torch.tensor([1, 2]), "alpha": 0.0}, r"alpha must be a finite number > 0, got 0.0"),
    ({"points": torch.tensor([1, 2]), "alpha": math.inf}, r"alpha must be a finite number > 0, got inf"),
    ({"points": torch.ones(2, 2), "alpha": 1.0}, r"points must be a 1-D torch.Tensor \[N\], got \(2, 2\)"),
])
def test_length_adaptive_lambda_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        length_adaptive_lam(**kwargs)


@pytest.mark.parametrize("lam_actor, lam_critic, match", [
    (0.5, 1.5, r"lam_critic must be a number in \[0, 1\], got 1.5"),
    (-0.5, -0.5, r"lam_actor must be a number in \[0, 1\], got -0.5"),
    (torch.tensor([0.5, 1.2]), 1.0, r"lam values must be in \[0, 1\], got 1.2"),
    (torch.tensor([0.5]), 1.0, r"lam must be a number or a \[B=2\] tensor, got shape \(1,\)"),
])
def test_decoupled_gae_bad_lambdas(lam_actor, lam_critic, match):
    z = torch.zeros(2, 3)
    with pytest.raises(ValueError, match=match):
        decoupled_gae(z, z, z, z.bool(), z.bool(), gamma=0.9, lam_actor=lam_actor, lam_critic=lam_critic)


# ------------------------------------------------------------------ properties

@PROPERTY
@given(batch=gae_batches(), gamma=unit, lam_critic=unit, data=st.data())
def test_decoupled_gae_matches_the_per_row_loop_reference(batch, gamma, lam_critic, data):
    rows = len(batch["rewards"])
    per_row = data.draw(st.booleans())
    lam_actor = data.draw(st.lists(unit, min_size=rows, max_size=rows)) if per_row else data.draw(unit)
    lam_arg = torch.tensor(lam_actor, dtype=F64) if per_row else lam_actor
    adv, ret = decoupled_gae(**as_tensors(batch), gamma=gamma, lam_actor=lam_arg, lam_critic=lam_critic)
    keys = ("rewards", "values", "next_values", "terminated", "truncated", "mask")
    for i in range(rows):
        lam_i = lam_actor[i] if per_row else lam_actor
        ref_adv, ref_ret = decoupled_row_reference(*(batch[k][i] for k in keys), gamma, lam_i, lam_critic)
        assert torch.allclose(adv[i], torch.tensor(ref_adv, dtype=F64), atol=TOL)
        assert torch.allclose(ret[i], torch.tensor(ref_ret, dtype=F64), atol=TOL)


@PROPERTY
@given(batch=gae_batches(), gamma=unit, lam=unit)
def test_equal_lambdas_reduce_to_the_existing_gae(batch, gamma, lam):
    # one lambda for both is the same single gae call: the numbers every run with critic_lam and
    # lam_alpha null depends on are exactly gae's, so exact equality is the contract here
    tensors = as_tensors(batch)
    adv, ret = decoupled_gae(**tensors, gamma=gamma, lam_actor=lam, lam_critic=lam)
    ref_adv, ref_ret = gae(**tensors, gamma=gamma, lam=lam)
    assert torch.equal(adv, ref_adv) and torch.equal(ret, ref_ret)


@st.composite
def episodes(draw, min_size=1, max_size=7):
    """One episode with consistent next values (V'_t = V_{t+1}); the last one is drawn (the
    bootstrap value after a truncation)."""
    n = draw(st.integers(min_size, max_size))
    r = draw(st.lists(small, min_size=n, max_size=n))
    v = draw(st.lists(small, min_size=n, max_size=n))
    return r, v, v[1:] + [draw(small)]


@PROPERTY
@given(ep=episodes(), end=st.sampled_from(["terminated", "truncated"]), gamma=unit, lam_actor=unit)
def test_critic_lambda_one_targets_are_mc_return_or_reward_to_go_plus_bootstrap(ep, end, gamma, lam_actor):
    r, v, nv = ep
    n = len(r)
    last = [False] * (n - 1) + [True]
    none = [False] * n
    term, trunc = (last, none) if end == "terminated" else (none, last)
    adv, ret = decoupled_gae(row(*r), row(*v), row(*nv), flags(*term), flags(*trunc), gamma=gamma,
                             lam_actor=lam_actor, lam_critic=1.0)
    to_go = [sum(gamma ** (k - t) * r[k] for k in range(t, n)) for t in range(n)]
    bootstrap = [gamma ** (n - t) * nv[-1] if end == "truncated" else 0.0 for t in range(n)]
    assert torch.allclose(ret[0], torch.tensor([g + b for g, b in zip(to_go, bootstrap)], dtype=F64), atol=TOL)
    if end == "terminated":  # the Monte Carlo return, as discounted_returns computes it
        mc = discounted_returns(row(*r), flags(*term), flags(*trunc), gamma=gamma)
        assert torch.allclose(ret, mc, atol=TOL)
    # the actor's advantages are the single-lambda GAE's at lam_actor, whatever the critic's lambda
    ref_adv, _ = gae(row(*r), row(*v), row(*nv), flags(*term), flags(*trunc), gamma=gamma, lam=lam_actor)
    assert torch.allclose(adv, ref_adv, atol=TOL)


@PROPERTY
@given(lengths=st.lists(st.integers(0, 10_000), min_size=1, max_size=20),
       alpha=st.floats(1e-3, 1e3, allow_nan=False, allow_infinity=False))
def test_length_adaptive_lambda_is_in_unit_interval_and_monotone_in_length(lengths, alpha):
    ordered = torch.tensor(sorted(lengths))
    lam = length_adaptive_lam(ordered, alpha)
    assert bool(((lam >= 0) & (lam <= 1)).all())
    assert bool((lam[1:] >= lam[:-1]).all())
    # the formula itself where it is not clamped (alpha * l > 1), and 0 where it is
    for l_i, lam_i in zip(ordered.tolist(), lam.tolist()):
        expected = 1 - 1 / (alpha * l_i) if alpha * l_i > 1 else 0.0
        assert math.isclose(lam_i, expected, rel_tol=1e-12, abs_tol=1e-12)


@PROPERTY
@given(seg1=episodes(), seg2=episodes(), v_compressed=small, gamma=unit, lam_actor=unit, lam_critic=unit)
def test_compression_boundary_vs_terminal_flag_for_both_lambdas(seg1, seg2, v_compressed, gamma, lam_actor,
                                                                lam_critic):
    """The C16/C17 property of ``gae`` (tests/algos/test_advantages.py) for both lambdas: after the
    boundary nothing changes; at it a terminal flag removes gamma * V(compressed) and the
    continuation gamma * lam * A_{k+1}, with the actor's lambda in the advantages and the critic's
    in the targets."""
    r = seg1[0] + seg2[0]
    v = seg1[1] + seg2[1]
    nv = seg1[2][:-1] + [v_compressed] + seg2[2][:-1] + [0.0]
    k, n = len(seg1[0]) - 1, len(seg1[0]) + len(seg2[0])
    end, no = [False] * (n - 1) + [True], [False] * n
    wrong = list(end)
    wrong[k] = True

    def run(term, lam_a, lam_c):
        return decoupled_gae(row(*r), row(*v), row(*nv), flags(*term), flags(*no), gamma=gamma,
                             lam_actor=lam_a, lam_critic=lam_c)

    cont_adv, cont_ret = run(end, lam_actor, lam_critic)
    term_adv, term_ret = run(wrong, lam_actor, lam_critic)
    assert torch.allclose(cont_adv[0, k + 1:], term_adv[0, k + 1:], atol=TOL)
    assert torch.allclose(cont_ret[0, k + 1:], term_ret[0, k + 1:], atol=TOL)
    next_adv_critic = cont_ret[0, k + 1].item() - v[k + 1]  # A at lam_critic of the next segment's first point
    lost_actor = gamma * v_compressed + gamma * lam_actor * cont_adv[0, k + 1].item()
    lost_critic = gamma * v_compressed + gamma * lam_critic * next_adv_critic
    assert math.isclose(cont_adv[0, k].item() - term_adv[0, k].item(), lost_actor, abs_tol=TOL)
    assert math.isclose(cont_ret[0, k].item() - term_ret[0, k].item(), lost_critic, abs_tol=TOL)


# ------------------------------------------------------------------ the trainer: split vs unsplit trajectory


def _two_segments():
    """[BOS 10 SEP a0] | compression | [BOS 11 SEP a1]: actions at index 3 of each row, rewards 0, 1.
    V(s0) read at raw[0, 2], V(compressed context) at raw[1, 2]."""
    raw = torch.zeros(2, 4)
    raw[0, 2], raw[1, 2] = 0.6, 0.8
    return compressed_traj(), raw


def _one_segment():
    """[BOS 10 SEP a0 11 SEP a1]: the same two decisions without a compression; V read at
    raw[0, 2] and raw[0, 5]."""
    b = ContextBuilder(max_len=32)
    b.start_segment([10], "reset")
    b.add_sampled(EOS, -0.1, 0)
    b.end_action(False).reward = 0.0
    b.add_observation([11])
    b.add_sampled(EOS, -0.1, 0)
    b.end_action(False).reward = 1.0
    b.seg.end = "terminated"
    traj = Trajectory(segments=b.segments, train_reward=1.0, terminated=True, verified=1)
    raw = torch.zeros(1, 7)
    raw[0, 2], raw[0, 5] = 0.6, 0.8
    return traj, raw


def _point_outputs(name, traj, raw, **kw):
    algo = AlgoConfig(name=name, gamma=0.9, norm_adv=False, **kw)
    policy = PolicyModel(PolicyShape(vocab_size=64, d_model=16, n_layers=1, n_heads=2, max_len=32, critic="head"))
    trainer = make_trainer(name, algo, policy)
    batch = collate([traj])
    inputs = UpdateInputs(old_logp=torch.zeros(batch.tokens.shape), ref_logp=None,
                          loss_mask=batch.action_mask.float(), old_values=raw)
    adv = trainer.advantages(batch, inputs)
    return adv.point_advantages, adv.point_returns, trainer.lambdas(adv.layout)[0]


@pytest.mark.parametrize("kw", [dict(lam=0.5, critic_lam=1.0), dict(lam=0.95, critic_lam=0.0),
                                dict(lam=0.95, critic_lam=1.0, lam_alpha=1.5),
                                dict(lam=0.95, critic_lam=1.0, lam_q=0.25)])
def test_compression_gives_the_unsplit_trajectorys_advantages_and_targets(kw):
    """V(s0) = 0.6, V(s1) = 0.8 = V(compressed context), rewards 0 then 1, gamma 0.9: deltas
    0 + 0.72 - 0.6 = 0.12 and 1 - 0.8 = 0.2. Actor at lam: A = 0.12 + 0.9 lam 0.2, 0.2; critic at
    critic_lam: R = 0.6 + 0.12 + 0.18 critic_lam, 1.0. lam_alpha 1.5 counts both segments' points,
    l = 2: lam = 1 - 1/3 = 2/3 in both layouts (a per-segment count, l = 1, would give 1 - 1/1.5 = 1/3).
    lam_q 0.25 at l = 2: lam = 0.25 ** (1 / 1) = 0.25 in both layouts."""
    split_adv, split_ret, split_lam = _point_outputs("ppo", *_two_segments(), **kw)
    whole_adv, whole_ret, whole_lam = _point_outputs("ppo", *_one_segment(), **kw)
    lam = 2 / 3 if "lam_alpha" in kw else kw.get("lam_q", kw["lam"])
    expected_adv = torch.tensor([[0.12 + 0.9 * lam * 0.2, 0.2]])
    expected_ret = torch.tensor([[0.72 + 0.18 * kw["critic_lam"], 1.0]])
    # float32 layouts: a few ulps of numbers <= 1, so 1e-6 separates every hand number above
    for adv, ret in ((split_adv, split_ret), (whole_adv, whole_ret)):
        torch.testing.assert_close(adv, expected_adv, rtol=0, atol=1e-6)
        torch.testing.assert_close(ret, expected_ret, rtol=0, atol=1e-6)
    if "lam_alpha" in kw or "lam_q" in kw:
        torch.testing.assert_close(split_lam, torch.tensor([lam], dtype=F64), rtol=0, atol=1e-12)
        torch.testing.assert_close(whole_lam, split_lam, rtol=0, atol=1e-12)
    # the C17 mistake for both lambdas: the boundary labelled terminal loses 0.9 * 0.8 + 0.9 * lam * A1
    term_adv, term_ret, _ = _point_outputs("ppo_segment_terminal", *_two_segments(), **kw)
    torch.testing.assert_close(term_adv, torch.tensor([[-0.6, 0.2]]), rtol=0, atol=1e-6)
    torch.testing.assert_close(term_ret, torch.tensor([[0.0, 1.0]]), rtol=0, atol=1e-6)


# ------------------------------------------------------------------ critic_lr


def _models(critic):
    torch.manual_seed(0)
    shape = PolicyShape(vocab_size=50, d_model=16, n_layers=1, n_heads=2, max_len=256, critic=critic)
    return PolicyModel(shape), (ValueModel(shape) if critic == "separate" else None)


def _trajs(k=0, generated=6, observed=9, tool=0.25):
    """4 trajectories of 3 turns; the rollout counters (normally set by the rollout engine) are
    given: ``generated`` sampled tokens, ``observed`` env tokens and ``tool`` tool seconds each."""
    out = [make_traj([2, 1], 1.0, group=i, seed=i + 10 * k) if i % 2 else make_traj([3], 0.0, group=i, seed=i + 10 * k)
           for i in range(4)]
    for t in out:
        t.generated_tokens, t.observation_tokens, t.tool_seconds = generated, observed, tool
    return out


def _algo(**kw):
    base = dict(name="ppo", group_size=1, off_policy_correction="none", lr=1e-2, epochs=1, minibatches=1,
                weight_decay=0.0)
    return AlgoConfig(**{**base, **kw})


@pytest.mark.parametrize("critic", ["head", "separate"])
def test_critic_lr_is_the_first_adamw_step_size_of_the_critics_parameters(critic):
    """AdamW's first step moves each parameter by lr * g / (|g| + eps) (bias-corrected moments
    m = g, v = g^2; no weight decay here), i.e. by lr up to eps / |g|. So the largest move of a
    critic parameter is critic_lr, that of a policy parameter lr. Parameters with |g| >= 1e-3 are
    off by at most 1e-5 relative; float32 subtraction of weights ~0.1 adds ~1e-8: rel 1e-3 is ample."""
    policy, value = _models(critic)
    before_p, before_v = copy.deepcopy(policy), copy.deepcopy(value)
    trainer = make_trainer("ppo", _algo(critic_lr=3e-3), policy, value)
    assert [g["lr"] for g in trainer.optimizer.param_groups] == [1e-2, 3e-3]
    trainer.update(_trajs())
    head = {n for n, _ in policy.named_parameters() if n.startswith("value_head")}
    moves = {"policy": 0.0, "critic": 0.0}
    for (name, p), q in zip(policy.named_parameters(), before_p.parameters()):
        part = "critic" if name in head else "policy"
        moves[part] = max(moves[part], float((p.detach() - q.detach()).abs().max()))
    if value is not None:
        moves["critic"] = max(float((p.detach() - q.detach()).abs().max())
                              for p, q in zip(value.parameters(), before_v.parameters()))
    assert moves["policy"] == pytest.approx(1e-2, rel=1e-3)
    assert moves["critic"] == pytest.approx(3e-3, rel=1e-3)


@pytest.mark.parametrize("critic", ["head", "separate"])
def test_critic_lr_equal_to_lr_gives_the_same_update_as_null(critic):
    """Two parameter groups at one rate are the same AdamW per parameter; only the order in which
    the gradient-norm clip sums the parameters' norms differs (float32 rounding, ~1e-7 relative
    per step), so the weights agree to 1e-5 after one update."""
    out = []
    for critic_lr in (None, 1e-2):
        policy, value = _models(critic)
        make_trainer("ppo", _algo(critic_lr=critic_lr, epochs=2), policy, value).update(_trajs())
        out.append([*policy.parameters(), *(value.parameters() if value is not None else ())])
    for a, b in zip(*out):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_budget_schedule_scales_both_learning_rates():
    policy, value = _models("separate")
    trainer = make_trainer("ppo", _algo(critic_lr=4e-3, lr_schedule="linear"), policy, value)
    # linear schedule at a quarter of the budget: multiplier 0.75 -> 7.5e-3 and 3e-3
    assert trainer.set_budget_fraction(0.25) == pytest.approx(7.5e-3, rel=1e-12)
    assert [g["lr"] for g in trainer.optimizer.param_groups] == pytest.approx([7.5e-3, 3e-3], rel=1e-12)


# ------------------------------------------------------------------ value pretraining


def test_warmup_targets_use_critic_lambda_one_the_mc_returns():
    """During the warm-up the critic regresses on critic_lam's targets: with critic_lam = 1 and
    gamma = 1 every point's target is its terminated trajectory's return-to-go (A + V rounding in
    float32 on numbers <= 1: 1e-6)."""
    policy, value = _models("separate")
    trainer = make_trainer("ppo", _algo(value_warmup_updates=1, lam=0.5, critic_lam=1.0, gamma=1.0), policy, value)
    record = trainer.update_record(_trajs())
    lay, m = record.advantages.layout, record.advantages.layout.mask
    mc = discounted_returns(lay.rewards, lay.terminated, lay.truncated, gamma=1.0, mask=m)
    assert record.metrics["train/policy_frozen"] == 1.0
    torch.testing.assert_close(record.advantages.point_returns[m], mc[m], rtol=0, atol=1e-6)
    # the reward-1 trajectories get target 1 at every point, the reward-0 ones 0
    assert sorted(set(round(x, 6) for x in mc[m].tolist())) == [0.0, 1.0]


def test_warmup_explained_variance_is_logged_once_on_the_first_batch_after_the_warmup():
    policy, value = _models("separate")
    trainer = make_trainer("ppo", _algo(value_warmup_updates=2, critic_lam=1.0), policy, value)
    logs = [trainer.update(_trajs(k)) for k in range(4)]
    key = "critic/warmup_explained_variance_heldout"
    assert [key in m for m in logs] == [False, False, True, False]
    # the pretrained critic's held-out EV: the third batch, before the critic is fitted on it
    assert logs[2][key] == logs[2]["critic/explained_variance_heldout"]
    assert [m["train/policy_frozen"] for m in logs] == [1.0, 1.0, 0.0, 0.0]


@pytest.mark.parametrize("critic", ["head", "separate"])
def test_warmup_updates_count_on_every_compute_axis(critic):
    """The run loop's accounting (collect: ``meter.add_trajectories(trajs, warmup=...)`` with the
    trainer's ``policy_frozen()`` for the update they feed; then the update) over 2 warm-up updates
    and 1 policy update of R = 4 rollouts, each with 6 sampled tokens, 9 env tokens, 0.25 tool
    seconds. Per update, with T the batch's real tokens, A = attention_flops of its rows, N / N_c
    the policy's / separate critic's matrix parameters, E = 2 epochs:
      old forward (prepare_batch)   2 N T + A          (+ 2 N_c T + A_c)
      warm-up epoch                 2 N T + A          (+ 6 N_c T + 3 A_c)   policy forward only
      policy epoch                  6 N T + 3 A        (+ 6 N_c T + 3 A_c)"""
    policy, value = _models(critic)
    meter = ComputeMeter()
    trainer = make_trainer("ppo", _algo(value_warmup_updates=2, epochs=2), policy, value, meter=meter)
    after = []
    for k in range(3):
        trajs = _trajs(k)
        meter.add_trajectories(trajs, warmup=trainer.policy_frozen())
        trainer.update(trajs)
        after.append((meter.rollouts, meter.warmup_rollouts, meter.generated_tokens, meter.observation_tokens,
                      meter.tool_seconds, meter.train_flops))
    # rollouts 2R = 8 after the warm-up, all of them warm-up; 6 * 8 = 48 sampled, 9 * 8 = 72 env
    # tokens, 0.25 * 8 = 2 tool seconds; the policy update adds R = 4 rollouts, none of them warm-up
    assert [a[:5] for a in after] == [(4, 4, 24, 36, 1.0), (8, 8, 48, 72, 2.0), (12, 8, 72, 108, 3.0)]
    n, n_c = count_params(policy), (count_params(value) if value is not None else 0)
    flops = []
    for k in range(3):
        lengths = collate(_trajs(k)).valid.sum(1)
        t, a = int(lengths.sum()), attention_flops(1, 16, lengths)
        a_c = a if value is not None else 0.0
        old = 2 * n * t + a + 2 * n_c * t + a_c
        policy_epoch = (2 * n * t + a) if k < 2 else (6 * n * t + 3 * a)
        flops.append(old + 2 * (policy_epoch + 6 * n_c * t + 3 * a_c))
    expected = [sum(flops[:i + 1]) for i in range(3)]
    # sums of exact integers below 2^53 in float64: equal up to the order of the additions
    assert [a[5] for a in after] == pytest.approx(expected, rel=1e-12)


@pytest.mark.slow
def test_a_run_counts_its_warmup_rollouts_inside_the_rollout_budget(tmp_path, shared_warmstart_cache):
    """``experiments.train`` (tiny preset at 4 rollouts per update, 4 tasks x G=1, and a budget of
    32 rollouts: 8 updates) with 2 warm-up updates: the learner counts the warm-up's rollouts in
    ``compute/rollouts`` (the budget axis) and in ``compute/warmup_rollouts``: 4, 8, then 8 while
    the rollouts go on to 32."""
    run_dir = tmp_path / "run"
    args = ["experiment=tiny", "env=bugfix", "algo=ppo", "algo.group_size=1", "algo.tasks_per_update=4",
            "budget.amount=32", "algo.value_warmup_updates=2", "algo.critic_lam=1.0",
            f"run_dir={run_dir}", f"warmstart.cache_dir={shared_warmstart_cache}"]
    env = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true", "OMP_NUM_THREADS": "1"}
    proc = run_entry("experiments.train", args, cwd=ROOT, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["compute/rollouts"] for r in rows] == [4 * (i + 1) for i in range(8)]
    assert [r["compute/warmup_rollouts"] for r in rows] == [4, 8] + [8] * 6
    assert [r["train/policy_frozen"] for r in rows] == [1.0, 1.0] + [0.0] * 6
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["compute/warmup_rollouts"] == 8 and summary["compute/rollouts"] == 32


# ------------------------------------------------------------------ config


@pytest.mark.parametrize("kw, match", [
    (dict(critic_lam=1.5), r"^algo\.critic_lam=1\.5 must be in \[0, 1\] \(or null to use algo\.lam\)$"),
    (dict(critic_lam=-0.1), r"^algo\.critic_lam=-0\.1 must be in \[0, 1\]"),
    (dict(lam_alpha=0.0), r"^algo\.lam_alpha=0\.0 must be a finite number > 0 \(or null to use algo\.lam\)$"),
    (dict(lam_alpha=-1.0), r"^algo\.lam_alpha=-1\.0 must be a finite number > 0"),
    (dict(lam_alpha=math.nan), r"^algo\.lam_alpha=nan must be a finite number > 0"),
    (dict(critic_lr=0.0), r"^algo\.critic_lr=0\.0 must be a finite number > 0 \(or null to use algo\.lr\)$"),
    (dict(lam_q=0.0), r"^algo\.lam_q=0\.0 must be a number in \(0, 1\] \(or null\)$"),
    (dict(lam_q=1.5), r"^algo\.lam_q=1\.5 must be a number in \(0, 1\]"),
    (dict(lam_q=0.5, lam_alpha=1.5), r"^algo\.lam_q=0\.5 and algo\.lam_alpha=1\.5 both set; allowed: one actor lambda rule"),
])
@pytest.mark.parametrize("name", ["ppo", "ppo_segment_terminal", "ppo_ctde", "ppo_independent"])
def test_bad_decoupled_gae_knobs_give_a_one_line_config_error(kw, match, name):
    with pytest.raises(ConfigError, match=match) as err:
        AlgoConfig(name=name, **kw)
    assert "\n" not in str(err.value)


def test_decoupled_gae_knobs_default_to_null():
    algo = AlgoConfig(name="ppo")
    assert (algo.critic_lam, algo.lam_alpha, algo.critic_lr) == (None, None, None)
    assert AlgoConfig(name="ppo", critic_lam=1.0, lam_alpha=1.5, critic_lr=2e-3).critic_lam == 1.0
