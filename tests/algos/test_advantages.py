"""algos.advantages: hand-computed numbers, a per-row Python loop reference, and invariances."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from algos.advantages import STD_CONVENTIONS, discounted_returns, gae, group_advantages, group_mean_std
from gae_strategies import as_tensors, gae_batches, small, unit

PROPERTY = settings(max_examples=50, deadline=None)
F64 = torch.float64


def row(*xs, dtype=F64):
    return torch.tensor([list(xs)], dtype=dtype)


def flags(*xs):
    return torch.tensor([list(xs)], dtype=torch.bool)


# ------------------------------------------------------------------ reference implementations


def group_reference(rewards, ids, std, eps):
    """Per-group Python loop in exact rational arithmetic (``Fraction``): the exact group mean and
    deviations ``d`` of the float rewards; the std as ``max|d| * sqrt(sum (d / max|d|)^2 / (n -
    ddof))`` (one float square root of a number in [1/n, n], so tiny deviations do not underflow).
    Returns the advantages and, per member, its group's std (None for a constant group: A = 0)."""
    out, stds = [0.0] * len(rewards), [None] * len(rewards)
    for g in set(ids):
        members = [i for i, x in enumerate(ids) if x == g]
        rs = [Fraction(rewards[i]) for i in members]
        if len(set(rs)) == 1:
            continue  # constant group: exactly 0
        mean = sum(rs) / len(rs)
        dev = [r - mean for r in rs]
        top = max(abs(d) for d in dev)
        root = math.sqrt(sum((d / top) ** 2 for d in dev) / (len(rs) - (0 if std == "population" else 1)))
        for i, d in zip(members, dev):
            if std == "none":
                out[i] = float(d)
            elif eps == 0.0:
                out[i] = float(d / top) / root
            else:
                out[i] = float(d) / (float(top) * root + eps)
            stds[i] = float(top) * root if std != "none" else 1.0
    return out, stds


def gae_row_reference(r, v, nv, term, trunc, mask, gamma, lam):
    """One row, plain Python: walk backwards over action positions only."""
    adv = [0.0] * len(r)
    nxt = 0.0
    for t in reversed(range(len(r))):
        if not mask[t]:
            continue
        delta = r[t] + gamma * (0.0 if term[t] else nv[t]) - v[t]
        nxt = delta + gamma * lam * (0.0 if (term[t] or trunc[t]) else 1.0) * nxt
        adv[t] = nxt
    ret = [adv[t] + v[t] if mask[t] else 0.0 for t in range(len(r))]
    return adv, ret


# ------------------------------------------------------------------ group advantages: numbers


# The source document's group [0, 0, 1, 1] under the population std, the sample std and no division
# is claims C2 and C4 (tests/claims/test_closed_form.py, through these functions).


def test_group_advantages_eps_and_group_stats():
    r = torch.tensor([0.0, 0.0, 1.0, 1.0], dtype=F64)
    ids = torch.zeros(4, dtype=torch.int64)
    # default eps 1e-6 in the denominator: (r - 0.5) / (0.5 + 1e-6), i.e. eps 0's advantages * 0.5 / 0.500001
    assert torch.allclose(group_advantages(r, ids), group_advantages(r, ids, eps=0.0) * 0.5 / 0.500001)
    mean, std, constant = group_mean_std(r, ids)
    assert mean.tolist() == [0.5] * 4 and std.tolist() == [0.5] * 4 and not constant.any()


def test_group_advantages_noncontiguous_unsorted_ids():
    r = torch.tensor([1.0, 5.0, 0.0, 3.0, 2.0], dtype=F64)
    ids = torch.tensor([7, 3, 7, 9, 3])
    # group 7: [1, 0] mean 0.5 std 0.5 -> [1, -1]; group 3: [5, 2] mean 3.5 std 1.5 -> [1, -1];
    # group 9: singleton -> 0
    assert group_advantages(r, ids, eps=0.0).tolist() == [1.0, 1.0, -1.0, 0.0, -1.0]


def test_all_same_and_singleton_groups_are_exactly_zero():
    # 0.1 + 0.1 + 0.1 = 0.30000000000000004 and / 3 = 0.10000000000000002 != 0.1, so a naive
    # (r - mean) / (std + eps) would give about 2e-17 / 1e-6 = 2e-11, not 0.
    assert (0.1 + 0.1 + 0.1) / 3 != 0.1
    r = torch.tensor([0.1, 0.1, 0.1, 0.0, 0.0, 1.0, 1.0, 0.7], dtype=F64)
    ids = torch.tensor([0, 0, 0, 1, 1, 2, 2, 3])
    for std in STD_CONVENTIONS:
        for eps in (0.0, 1e-6, 1e-12):
            adv = group_advantages(r, ids, std=std, eps=eps)
            assert adv.tolist() == [0.0] * 8, (std, eps)


def test_group_advantages_int_rewards_and_empty():
    ids = torch.tensor([0, 0])
    assert group_advantages(torch.tensor([0, 1]), ids, eps=0.0).tolist() == [-1.0, 1.0]
    assert group_advantages(torch.zeros(0), torch.zeros(0, dtype=torch.int64)).numel() == 0


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"std": "populaton"}, r"unknown std convention 'populaton'; allowed: 'population', 'sample', 'none'"),
        ({"std": "Population"}, r"allowed: 'population'"),
        ({"eps": -1e-6}, r"eps must be a finite number >= 0, got -1e-06"),
        ({"eps": float("nan")}, r"eps must be a finite number >= 0"),
        ({"group_ids": torch.zeros(3)}, r"group_ids must be an integer tensor"),
        ({"group_ids": torch.zeros(2, dtype=torch.int64)}, r"group_ids must have shape \(3,\) like rewards, got \(2,\)"),
        ({"rewards": torch.zeros(1, 3)}, r"rewards must be 1-D \[N\], got shape \(1, 3\)"),
    ],
)
def test_group_advantages_bad_arguments(kwargs, match):
    args = {"rewards": torch.zeros(3), "group_ids": torch.zeros(3, dtype=torch.int64)} | kwargs
    with pytest.raises(ValueError, match=match):
        group_advantages(**args)


def test_group_std_of_tiny_deviations_does_not_underflow():
    """Rewards 0 and 2.2e-309 (subnormal): the deviations +-1.1e-309 square to 0 in float64, which
    gave std 0 and A = +-inf at eps 0 (found by the loop-reference property below). The scaled
    std keeps A = +-1 (mean 1.1e-309, population std 1.1e-309)."""
    adv = group_advantages(torch.tensor([0.0, 2.225073858507203e-309], dtype=F64), torch.tensor([0, 0]), eps=0.0)
    assert adv.tolist() == pytest.approx([-1.0, 1.0], rel=1e-6)


# ------------------------------------------------------------------ group advantages: properties

quarter = st.integers(-16, 16).map(lambda k: k / 4)  # exact in binary floating point


@PROPERTY
@given(
    rewards=st.lists(st.floats(-5, 5, allow_nan=False), min_size=1, max_size=12),
    data=st.data(),
    std=st.sampled_from(sorted(STD_CONVENTIONS)),
    eps=st.sampled_from([0.0, 1e-6]),
)
def test_group_advantages_match_loop_reference(rewards, data, std, eps):
    ids = data.draw(st.lists(st.sampled_from([-3, 0, 5, 1000]), min_size=len(rewards), max_size=len(rewards)))
    got = group_advantages(torch.tensor(rewards, dtype=F64), torch.tensor(ids), std=std, eps=eps)
    ref, stds = group_reference(rewards, ids, std, eps)
    # Float code rounds the group mean, so each deviation r_i - mean carries an error of a few
    # units in the last place of max|r| (u = 2^-53 relative, and at least the smallest subnormal
    # 2^-1074): the advantage may be off by that error over the std. Well-conditioned groups are
    # held to 1e-6; a group whose spread is a few ulps of its rewards (5 - 2^-50 and 5: exact
    # A = -1, +1; float code gives -1.41, 0) has no better float answer.
    u, tiny, scale = 2.0 ** -53, 2.0 ** -1074, max((abs(r) for r in rewards), default=0.0)
    for g, r_, s in zip(got.tolist(), ref, stds):
        if s is None:  # a constant group: exactly 0
            assert g == 0.0, (got, ref)
            continue
        spread = 1.0 if std == "none" else s + eps
        rounding = 8 * (len(rewards) + 2) * (u * scale + tiny) * (1 + abs(r_)) / spread if spread > 0 else math.inf
        assert abs(g - r_) <= 1e-6 + 1e-6 * abs(r_) + rounding, (got, ref)


@PROPERTY
@given(
    rewards=st.lists(quarter, min_size=2, max_size=10),
    shift=quarter,
    std=st.sampled_from(sorted(STD_CONVENTIONS)),
)
def test_group_advantages_shift_invariant(rewards, shift, std):
    ids = torch.tensor([i % 2 for i in range(len(rewards))])
    r = torch.tensor(rewards, dtype=F64)
    shifted = r + shift * (ids == 0).to(F64)  # shift only group 0
    a = group_advantages(r, ids, std=std)
    b = group_advantages(shifted, ids, std=std)
    assert torch.allclose(a, b, atol=1e-12, rtol=0)


@PROPERTY
@given(
    rewards=st.lists(quarter, min_size=2, max_size=10),
    scale=st.floats(0.01, 100),
    std=st.sampled_from(["population", "sample"]),
)
def test_group_advantages_scale_invariant_with_std(rewards, scale, std):
    r = torch.tensor(rewards, dtype=F64)
    ids = torch.zeros(len(rewards), dtype=torch.int64)
    a = group_advantages(r, ids, std=std, eps=0.0)
    b = group_advantages(r * scale, ids, std=std, eps=0.0)
    assert torch.allclose(a, b, atol=1e-9, rtol=1e-9)


@PROPERTY
@given(
    value=st.floats(-1e3, 1e3, allow_nan=False),
    size=st.integers(1, 9),
    std=st.sampled_from(sorted(STD_CONVENTIONS)),
    eps=st.sampled_from([0.0, 1e-8, 1e-6]),
    dtype=st.sampled_from([torch.float32, torch.float64]),
)
def test_all_same_group_exactly_zero(value, size, std, eps, dtype):
    r = torch.full((size,), value, dtype=dtype)
    adv = group_advantages(r, torch.full((size,), 4, dtype=torch.int64), std=std, eps=eps)
    assert (adv == 0).all() and not adv.isnan().any()


# ------------------------------------------------------------------ GAE: numbers


# The source document's 3-step example (lambda 0.5 and 1) and its one-step compression example are
# claims C15 and C16 (tests/claims/test_closed_form.py, through gae).


def test_gae_returns_are_advantages_plus_values():
    r, v, nv = row(0, 0, 1), row(0.9, 0.3, 0.8), row(0.3, 0.8, 0.0)
    term, trunc = flags(False, False, True), flags(False, False, False)
    for lam in (0.5, 1.0):
        adv, ret = gae(r, v, nv, term, trunc, gamma=1.0, lam=lam)
        assert torch.allclose(ret, adv + v, atol=1e-12)
    # lam 1, gamma 1, one terminated episode: every target is the full return 0 + 0 + 1
    assert torch.allclose(ret, row(1.0, 1.0, 1.0), atol=1e-12)
    # one step flagged terminal: the target is the reward alone, whatever V' is
    _, ret = gae(row(0.0), row(0.6), row(0.8), flags(True), flags(False), gamma=0.9, lam=0.95)
    assert ret.item() == 0.0


def test_gae_truncation_bootstraps_but_stops_recursion():
    # Row: episode 1 (2 steps, truncated after step 1) then episode 2 (1 step, terminated).
    r, v, nv = row(1, 1, 5), row(0.5, 0.5, 0.0), row(0.5, 2.0, 0.0)
    term, trunc = flags(False, False, True), flags(False, True, False)
    # A2 = 5 - 0 = 5
    # delta1 = 1 + 0.9 * 2.0 - 0.5 = 2.3; truncated: A1 = 2.3 (episode 2's A2 does not leak in)
    # delta0 = 1 + 0.9 * 0.5 - 0.5 = 0.95; A0 = 0.95 + 0.9 * 0.5 * 2.3 = 1.985
    adv, _ = gae(r, v, nv, term, trunc, gamma=0.9, lam=0.5)
    assert torch.allclose(adv, row(1.985, 2.3, 5.0), atol=1e-12)


def test_gae_compression_boundary_with_observation_positions():
    # positions: 0 action | 1 obs | 2 action, then compression | 3 obs (new segment) | 4 action, end
    mask = flags(True, False, True, False, True)
    big = 100.0  # garbage at masked positions must be ignored
    r, v = row(0, big, 0, big, 1), row(0.5, big, 0.6, big, 0.7)
    nv = row(0.6, big, 0.8, big, 0.0)  # 0.8 = V(compressed context)
    term, trunc = flags(False, True, False, True, True), flags(False, True, False, True, False)
    # A4 = 1 - 0.7 = 0.3
    # A2 = (0 + 0.9 * 0.8 - 0.6) + 0.9 * 0.5 * 0.3 = 0.12 + 0.135 = 0.255
    # A0 = (0 + 0.9 * 0.6 - 0.5) + 0.45 * 0.255 = 0.04 + 0.11475 = 0.15475
    adv, ret = gae(r, v, nv, term, trunc, gamma=0.9, lam=0.5, mask=mask)
    assert torch.allclose(adv, row(0.15475, 0, 0.255, 0, 0.3), atol=1e-12)
    assert torch.allclose(ret, row(0.65475, 0, 0.855, 0, 1.0), atol=1e-12)
    # Mislabelled terminal at the boundary: A2 = -0.6, A0 = 0.04 + 0.45 * -0.6 = -0.23
    term_bad = flags(False, True, True, True, True)
    adv, _ = gae(r, v, nv, term_bad, trunc, gamma=0.9, lam=0.5, mask=mask)
    assert torch.allclose(adv, row(-0.23, 0, -0.6, 0, 0.3), atol=1e-12)


def test_gae_accepts_01_numeric_flags_and_mask():
    r, v, nv = row(0, 0, 1), row(0.9, 0.3, 0.8), row(0.3, 0.8, 0.0)
    a, _ = gae(r, v, nv, row(0, 0, 1), row(0, 0, 0), gamma=1.0, lam=0.5, mask=row(1, 1, 1, dtype=torch.int64))
    # the same as bool flags and no mask (those numbers: claim C15)
    b, _ = gae(r, v, nv, flags(False, False, True), flags(False, False, False), gamma=1.0, lam=0.5)
    assert torch.allclose(a, b, atol=1e-12)


def test_discounted_returns_numbers():
    r = row(1, 0, 2)
    no = flags(False, False, False)
    # G2 = 2; G1 = 0 + 0.5 * 2 = 1; G0 = 1 + 0.5 * 1 = 1.5
    assert discounted_returns(r, no, no, gamma=0.5).tolist() == [[1.5, 1.0, 2.0]]
    # terminated after t=1: G1 = 0; G0 = 1 + 0 = 1; G2 = 2 (next episode)
    assert discounted_returns(r, flags(False, True, False), no, gamma=0.5).tolist() == [[1.0, 0.0, 2.0]]


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"gamma": 1.5}, r"gamma must be a number in \[0, 1\], got 1.5"),
        ({"gamma": True}, r"gamma must be a number in \[0, 1\], got True"),
        ({"lam": -0.1}, r"lam must be a number in \[0, 1\], got -0.1"),
        ({"values": torch.zeros(2, 4)}, r"values has shape \(2, 4\), expected \(2, 3\)"),
        ({"terminated": torch.full((2, 3), 2)}, r"terminated must be bool or hold only 0/1 values, found 2"),
        ({"mask": torch.ones(2, 2, dtype=torch.bool)}, r"mask has shape \(2, 2\), expected \(2, 3\)"),
        ({"mask": torch.full((2, 3), 0.5)}, r"mask must be bool or hold only 0/1 values, found 0.5"),
        ({"rewards": torch.zeros(3), "values": torch.zeros(3), "next_values": torch.zeros(3),
          "terminated": torch.zeros(3, dtype=torch.bool), "truncated": torch.zeros(3, dtype=torch.bool)},
         r"rewards must be 2-D \[B, T\], got shape \(3,\)"),
        ({"rewards": [[0.0, 0.0, 0.0]] * 2}, r"rewards must be a torch.Tensor, got list"),
    ],
)
def test_gae_bad_arguments(kwargs, match):
    z = torch.zeros(2, 3)
    args = {
        "rewards": z, "values": z, "next_values": z,
        "terminated": z.bool(), "truncated": z.bool(), "gamma": 0.9, "lam": 0.9,
    } | kwargs
    with pytest.raises(ValueError, match=match):
        gae(**args)


# ------------------------------------------------------------------ GAE: properties

@PROPERTY
@given(batch=gae_batches(), gamma=unit, lam=unit)
def test_gae_vectorized_matches_per_row_loop(batch, gamma, lam):
    tensors = as_tensors(batch)
    adv, ret = gae(**tensors, gamma=gamma, lam=lam)
    for i in range(len(batch["rewards"])):
        ref_adv, ref_ret = gae_row_reference(*(batch[k][i] for k in ("rewards", "values", "next_values", "terminated", "truncated", "mask")), gamma, lam)
        assert torch.allclose(adv[i], torch.tensor(ref_adv, dtype=F64), atol=1e-10)
        assert torch.allclose(ret[i], torch.tensor(ref_ret, dtype=F64), atol=1e-10)


@st.composite
def episodes(draw, min_size=1, max_size=7):
    """One episode with consistent next values (V'_t = V_{t+1}, 0 after the end)."""
    n = draw(st.integers(min_size, max_size))
    r = draw(st.lists(small, min_size=n, max_size=n))
    v = draw(st.lists(small, min_size=n, max_size=n))
    return r, v, v[1:] + [0.0]


@PROPERTY
@given(ep=episodes(), gamma=unit)
def test_gae_lambda_one_is_return_to_go_minus_value(ep, gamma):
    r, v, nv = ep
    n = len(r)
    term = [False] * (n - 1) + [True]
    adv, ret = gae(row(*r), row(*v), row(*nv), flags(*term), flags(*[False] * n), gamma=gamma, lam=1.0)
    to_go = [sum(gamma**(k - t) * r[k] for k in range(t, n)) for t in range(n)]
    assert torch.allclose(adv[0], torch.tensor([g - x for g, x in zip(to_go, v)], dtype=F64), atol=1e-9)
    assert torch.allclose(ret[0], torch.tensor(to_go, dtype=F64), atol=1e-9)
    assert torch.allclose(discounted_returns(row(*r), flags(*term), flags(*[False] * n), gamma=gamma)[0], torch.tensor(to_go, dtype=F64), atol=1e-9)


@PROPERTY
@given(e1=episodes(), e2=episodes(), end=st.sampled_from(["terminated", "truncated"]), gamma=unit, lam=unit)
def test_gae_concatenated_episodes_equal_separate(e1, e2, end, gamma, lam):
    def flags_for(ep, how):
        n = len(ep[0])
        last = [False] * (n - 1) + [True]
        none = [False] * n
        return (last, none) if how == "terminated" else (none, last)

    def run(parts):
        r, v, nv, term, trunc = ([], [], [], [], [])
        for (ep, how) in parts:
            t1, t2 = flags_for(ep, how)
            r += ep[0]; v += ep[1]; nv += ep[2]; term += t1; trunc += t2
        return gae(row(*r), row(*v), row(*nv), flags(*term), flags(*trunc), gamma=gamma, lam=lam)

    joint_adv, joint_ret = run([(e1, end), (e2, "terminated")])
    a1, r1 = run([(e1, end)])
    a2, r2 = run([(e2, "terminated")])
    assert torch.equal(joint_adv, torch.cat([a1, a2], dim=1))
    assert torch.equal(joint_ret, torch.cat([r1, r2], dim=1))


@PROPERTY
@given(batch=gae_batches(), gamma=unit, lam=unit, data=st.data())
def test_gae_inserting_observation_positions_changes_nothing(batch, gamma, lam, data):
    b, t = len(batch["rewards"]), len(batch["rewards"][0])
    dense = as_tensors(batch)
    dense["mask"] = torch.ones(b, t, dtype=torch.bool)
    adv, ret = gae(**dense, gamma=gamma, lam=lam)
    # Insert k_j garbage observation positions before action j (same layout for every row).
    gaps = data.draw(st.lists(st.integers(0, 3), min_size=t + 1, max_size=t + 1))
    action_cols, cols = [], 0
    for j in range(t):
        cols += gaps[j]
        action_cols.append(cols)
        cols += 1
    cols += gaps[t]
    gen = torch.Generator().manual_seed(len(gaps) + sum(gaps))
    sparse = {
        "rewards": torch.randn(b, cols, generator=gen, dtype=F64) * 50,
        "values": torch.randn(b, cols, generator=gen, dtype=F64) * 50,
        "next_values": torch.randn(b, cols, generator=gen, dtype=F64) * 50,
        "terminated": torch.rand(b, cols, generator=gen) < 0.5,
        "truncated": torch.rand(b, cols, generator=gen) < 0.5,
        "mask": torch.zeros(b, cols, dtype=torch.bool),
    }
    idx = torch.tensor(action_cols)
    for k in sparse:
        sparse[k][:, idx] = dense[k]
    s_adv, s_ret = gae(**sparse, gamma=gamma, lam=lam)
    assert torch.equal(s_adv[:, idx], adv) and torch.equal(s_ret[:, idx], ret)
    others = torch.ones(cols, dtype=torch.bool)
    others[idx] = False
    assert (s_adv[:, others] == 0).all() and (s_ret[:, others] == 0).all()


@PROPERTY
@given(seg1=episodes(), seg2=episodes(), v_compressed=small, gamma=unit, lam=unit)
def test_gae_compression_boundary_vs_terminal_flag(seg1, seg2, v_compressed, gamma, lam):
    # Segment 1 ends in a compression: its last next value is V(compressed context).
    r = seg1[0] + seg2[0]
    v = seg1[1] + seg2[1]
    nv = seg1[2][:-1] + [v_compressed] + seg2[2]
    k = len(seg1[0]) - 1  # the boundary position
    n = len(r)
    end = [False] * (n - 1) + [True]
    no = [False] * n
    wrong = list(end)
    wrong[k] = True
    cont, cont_ret = gae(row(*r), row(*v), row(*nv), flags(*end), flags(*no), gamma=gamma, lam=lam)
    term, term_ret = gae(row(*r), row(*v), row(*nv), flags(*wrong), flags(*no), gamma=gamma, lam=lam)
    # After the boundary nothing changes; at it the terminal flag removes the bootstrap
    # gamma * V(compressed) and the continuation gamma * lam * A_{k+1}.
    assert torch.equal(cont[0, k + 1:], term[0, k + 1:])
    lost = gamma * v_compressed + gamma * lam * cont[0, k + 1].item()
    assert math.isclose(cont[0, k].item() - term[0, k].item(), lost, abs_tol=1e-9)
    # One-step targets (lam = 0): r_k + gamma * V(compressed) vs r_k.
    _, cont0 = gae(row(*r), row(*v), row(*nv), flags(*end), flags(*no), gamma=gamma, lam=0.0)
    _, term0 = gae(row(*r), row(*v), row(*nv), flags(*wrong), flags(*no), gamma=gamma, lam=0.0)
    assert math.isclose(cont0[0, k].item(), r[k] + gamma * v_compressed, abs_tol=1e-9)
    assert math.isclose(term0[0, k].item(), r[k], abs_tol=1e-12)
