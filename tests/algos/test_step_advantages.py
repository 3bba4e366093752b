"""algos.advantages: RLOO, process-supervised GRPO and GiGPO step groups.

Hand-computed numbers, a per-member / per-step Python loop reference, and invariances (reward
shift, permutation of members, unmasked steps inserted anywhere = a trajectory split differently).
"""

from __future__ import annotations

import statistics

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from algos.advantages import (
    gigpo_advantages,
    group_advantages,
    process_group_advantages,
    rloo_advantages,
    step_group_counts,
)

PROPERTY = settings(max_examples=40, deadline=None)
F64 = torch.float64


def t64(x):
    return torch.tensor(x, dtype=F64)


def ids(x):
    return torch.tensor(x, dtype=torch.int64)


# ------------------------------------------------------------------ loop references


def _normalise(values, std, eps):
    """(v - mean) / (std + eps) of a list, 0 for a constant list (the module's convention)."""
    if len(set(values)) == 1:
        return [0.0] * len(values)
    mean = statistics.fmean(values)
    if std == "none":
        return [v - mean for v in values]
    s = statistics.pstdev(values) if std == "population" else statistics.stdev(values)
    return [(v - mean) / (s + eps) for v in values]


def rloo_reference(rewards, groups):
    out = []
    for i, r in enumerate(rewards):
        others = [rewards[j] for j in range(len(rewards)) if groups[j] == groups[i] and j != i]
        out.append(r - statistics.fmean(others) if others else 0.0)
    return out


def process_reference(step_rewards, mask, groups, std, eps):
    n, s = len(step_rewards), len(step_rewards[0])
    norm = [[0.0] * s for _ in range(n)]
    for g in set(groups):
        cells = [(i, k) for i in range(n) if groups[i] == g for k in range(s) if mask[i][k]]
        if not cells:
            continue
        for (i, k), v in zip(cells, _normalise([step_rewards[i][k] for i, k in cells], std, eps)):
            norm[i][k] = v
    out = [[0.0] * s for _ in range(n)]
    for i in range(n):
        for k in range(s):
            if mask[i][k]:
                out[i][k] = sum(norm[i][k2] for k2 in range(k, s) if mask[i][k2])
    return out


def gigpo_reference(episode_rewards, groups, returns, mask, anchors, omega, std, eps):
    n, s = len(returns), len(returns[0])
    episode = [0.0] * n
    for g in set(groups):
        members = [i for i in range(n) if groups[i] == g]
        for i, v in zip(members, _normalise([episode_rewards[i] for i in members], std, eps)):
            episode[i] = v
    out = [[0.0] * s for _ in range(n)]
    for i in range(n):
        for k in range(s):
            if not mask[i][k]:
                continue
            step_group = [(j, k2) for j in range(n) for k2 in range(s)
                          if mask[j][k2] and groups[j] == groups[i] and anchors[j][k2] == anchors[i][k]]
            values = _normalise([returns[j][k2] for j, k2 in step_group], std, eps)
            out[i][k] = episode[i] + omega * values[step_group.index((i, k))]
    return out


# ------------------------------------------------------------------ hand-computed numbers


def test_rloo_numbers():
    # group 0: [1, 0, 0] -> 1 - (0 + 0)/2 = 1; 0 - (1 + 0)/2 = -0.5 (twice); group 1: singleton -> 0;
    # group 4: [3, 1] -> 3 - 1 = 2, 1 - 3 = -2
    adv = rloo_advantages(t64([1.0, 0.0, 0.0, 5.0, 3.0, 1.0]), ids([0, 0, 0, 1, 4, 4]))
    assert adv.tolist() == [1.0, -0.5, -0.5, 0.0, 2.0, -2.0]


def test_rloo_constant_group_is_exactly_zero():
    # sum 0.30000000000000004 - 0.1 = 0.20000000000000004, / 2 = 0.10000000000000002 != 0.1: a
    # naive leave-one-out mean leaves 2e-17 noise; a constant group must give exactly 0
    assert (0.1 + 0.1 + 0.1 - 0.1) / 2 != 0.1
    assert rloo_advantages(t64([0.1, 0.1, 0.1]), ids([2, 2, 2])).tolist() == [0.0, 0.0, 0.0]


def test_rloo_is_scaled_centred_group_advantage():
    # A_i = n / (n - 1) * (r_i - mean): group of 4 rewards [0, 0, 1, 1]: mean 0.5 -> 4/3 * [-0.5, ..]
    r, g = t64([0.0, 0.0, 1.0, 1.0]), ids([0, 0, 0, 0])
    torch.testing.assert_close(rloo_advantages(r, g), 4 / 3 * group_advantages(r, g, std="none"))


def test_process_numbers():
    # one group, masked step rewards [0, 0, 1 | 0, 0]: mean 0.2, population std
    # sqrt((4 * 0.2^2 + 0.8^2) / 5) = sqrt(0.16) = 0.4; r~ = -0.5 for a 0, (1 - 0.2)/0.4 = 2 for the 1.
    # row 0: A = [-0.5 - 0.5 + 2, -0.5 + 2, 2] = [1, 1.5, 2]; row 1: [-1, -0.5, 0 (unmasked)]
    r = t64([[0.0, 0.0, 1.0], [0.0, 0.0, 7.0]])
    m = torch.tensor([[True, True, True], [True, True, False]])
    assert process_group_advantages(r, m, ids([0, 0]), eps=0.0).tolist() == [[1.0, 1.5, 2.0], [-1.0, -0.5, 0.0]]
    # std="none": r - 0.2 = [-0.2, -0.2, 0.8 | -0.2, -0.2]; suffix sums [0.4, 0.6, 0.8 | -0.4, -0.2]
    torch.testing.assert_close(process_group_advantages(r, m, ids([0, 0]), std="none"),
                               t64([[0.4, 0.6, 0.8], [-0.4, -0.2, 0.0]]))


def test_process_constant_group_and_separate_groups():
    # group 3: every masked step reward 0.5 -> exactly 0; group 1: [1 | 0] -> r~ = [1 | -1] (one
    # step each, so A = r~); the unmasked 9 in group 3 is ignored
    r = t64([[0.5, 0.5], [0.5, 9.0], [1.0, 0.0], [0.0, 0.0]])
    m = torch.tensor([[True, True], [True, False], [True, False], [True, False]])
    adv = process_group_advantages(r, m, ids([3, 3, 1, 1]), eps=0.0)
    assert adv.tolist() == [[0.0, 0.0], [0.0, 0.0], [1.0, 0.0], [-1.0, 0.0]]


def test_process_outcome_only_equals_grpo():
    # one masked step per trajectory (the outcome): mean / std are GRPO's, A = GRPO's A_i
    r = t64([[1.0], [0.0], [0.0], [1.0], [1.0]])
    g = ids([0, 0, 0, 0, 1])
    adv = process_group_advantages(r, torch.ones(5, 1, dtype=torch.bool), g)
    torch.testing.assert_close(adv[:, 0], group_advantages(r[:, 0], g))


def test_gigpo_numbers():
    # group 0, members 0 and 1 with episode rewards [1, 0]: A_E = [1, -1] (mean 0.5, std 0.5).
    # anchors: row 0 [5, 6, 7], row 1 [5, 6, 9 (unmasked)]; returns row 0 [1, 1, 1], row 1 [0, 0, -].
    # step group (0, 5): returns [1, 0] -> [1, -1]; (0, 6): [1, 0] -> [1, -1]; (0, 7): singleton -> 0.
    # omega 1: row 0 [1 + 1, 1 + 1, 1 + 0] = [2, 2, 1]; row 1 [-1 - 1, -1 - 1, 0 (unmasked)]
    m = torch.tensor([[True, True, True], [True, True, False]])
    anchors = ids([[5, 6, 7], [5, 6, 9]])
    adv = gigpo_advantages(t64([1.0, 0.0]), ids([0, 0]), t64([[1.0, 1.0, 1.0], [0.0, 0.0, 0.0]]), m, anchors,
                           eps=0.0)
    assert adv.tolist() == [[2.0, 2.0, 1.0], [-2.0, -2.0, 0.0]]
    # omega 0.5: row 0 [1.5, 1.5, 1], row 1 [-1.5, -1.5, 0]
    adv = gigpo_advantages(t64([1.0, 0.0]), ids([0, 0]), t64([[1.0, 1.0, 1.0], [0.0, 0.0, 0.0]]), m, anchors,
                           omega=0.5, eps=0.0)
    assert adv.tolist() == [[1.5, 1.5, 1.0], [-1.5, -1.5, 0.0]]


def test_gigpo_state_recurring_at_another_turn_and_other_group():
    # member 0 reaches state 5 at step 0 and again at step 2, member 1 at step 1: one step group of
    # returns [3, 1, 2] -> mean 2, population std sqrt(2/3) = 0.816497; A_S = [1.224745, -1.224745, 0].
    # member 2 (group 1) also visits state 5 but is another group: singleton -> 0. Episode rewards
    # are equal in both groups -> A_E = 0.
    m = torch.ones(3, 3, dtype=torch.bool)
    anchors = ids([[5, 8, 5], [7, 5, 4], [5, 1, 2]])
    returns = t64([[3.0, 0.0, 1.0], [0.0, 2.0, 0.0], [9.0, 0.0, 0.0]])
    adv = gigpo_advantages(t64([1.0, 1.0, 0.0]), ids([0, 0, 1]), returns, m, anchors, eps=0.0)
    a = 1 / (2 / 3) ** 0.5
    torch.testing.assert_close(adv, t64([[a, 0.0, -a], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]))
    count, sizes = step_group_counts(ids([0, 0, 1]), m, anchors)
    assert count == 1 and sizes.tolist() == [[3, 1, 3], [1, 3, 1], [1, 1, 1]]


def test_gigpo_constant_step_group_and_no_std():
    # step group of state 2: returns [0.5, 0.5] -> 0 even at eps 0; std="none" centres only:
    # A_E = [1 - 0.5, 0 - 0.5]; state 3 step group returns [4, 2] -> [1, -1]
    m = torch.ones(2, 2, dtype=torch.bool)
    adv = gigpo_advantages(t64([1.0, 0.0]), ids([0, 0]), t64([[0.5, 4.0], [0.5, 2.0]]), m, ids([[2, 3], [2, 3]]),
                           std="none", eps=0.0)
    assert adv.tolist() == [[0.5, 1.5], [-0.5, -1.5]]


@pytest.mark.parametrize(
    "fn, kwargs, match",
    [
        ("rloo", {"group_ids": torch.zeros(3)}, r"group_ids must be an integer tensor"),
        ("rloo", {"rewards": torch.zeros(1, 3)}, r"rewards must be 1-D \[N\], got shape \(1, 3\)"),
        ("process", {"std": "pop"}, r"unknown std convention 'pop'"),
        ("process", {"eps": -1.0}, r"eps must be a finite number >= 0, got -1.0"),
        ("process", {"step_mask": torch.ones(3, 2, dtype=torch.bool)}, r"step_mask has shape \(3, 2\), expected \(3, 4\)"),
        ("process", {"step_rewards": torch.zeros(3)}, r"step_rewards must be 2-D \[N=3, S\], got shape \(3,\)"),
        ("process", {"step_mask": torch.full((3, 4), 2)}, r"step_mask must be bool or hold only 0/1 values, found 2"),
        ("gigpo", {"omega": -0.5}, r"omega must be a finite number >= 0, got -0.5"),
        ("gigpo", {"omega": float("inf")}, r"omega must be a finite number >= 0"),
        ("gigpo", {"anchor_ids": torch.zeros(3, 4)}, r"anchor_ids must be an integer tensor \(int64\), got torch.float32"),
        ("gigpo", {"anchor_ids": torch.zeros(3, 2, dtype=torch.int64)}, r"anchor_ids has shape \(3, 2\), expected \(3, 4\)"),
        ("gigpo", {"step_returns": torch.zeros(2, 4)}, r"step_returns must be 2-D \[N=3, S\], got shape \(2, 4\)"),
    ],
)
def test_bad_arguments(fn, kwargs, match):
    g = torch.zeros(3, dtype=torch.int64)
    mask = torch.ones(3, 4, dtype=torch.bool)
    if fn == "rloo":
        args, call = {"rewards": torch.zeros(3), "group_ids": g}, rloo_advantages
    elif fn == "process":
        args, call = {"step_rewards": torch.zeros(3, 4), "step_mask": mask, "group_ids": g}, process_group_advantages
    else:
        args = {"episode_rewards": torch.zeros(3), "group_ids": g, "step_returns": torch.zeros(3, 4),
                "step_mask": mask, "anchor_ids": torch.zeros(3, 4, dtype=torch.int64)}
        call = gigpo_advantages
    with pytest.raises(ValueError, match=match):
        call(**(args | kwargs))


def test_empty_inputs():
    assert rloo_advantages(torch.zeros(0), ids([])).numel() == 0
    assert process_group_advantages(torch.zeros(0, 3), torch.zeros(0, 3, dtype=torch.bool), ids([])).shape == (0, 3)
    empty = torch.zeros(2, 3, dtype=torch.bool)  # no masked step at all
    out = gigpo_advantages(t64([1.0, 0.0]), ids([0, 0]), torch.zeros(2, 3, dtype=F64), empty, ids([[0] * 3] * 2))
    assert out.tolist() == [[0.0] * 3] * 2
    assert step_group_counts(ids([0, 0]), empty, ids([[0] * 3] * 2))[0] == 0


# ------------------------------------------------------------------ loop vs vectorised, invariances

quarter = st.integers(-8, 8).map(lambda k: k / 4)  # exact in binary floating point
stds = st.sampled_from(["population", "sample", "none"])


@st.composite
def step_batches(draw):
    n = draw(st.integers(1, 6))
    s = draw(st.integers(1, 5))
    groups = draw(st.lists(st.integers(0, 2), min_size=n, max_size=n))
    rewards = draw(st.lists(st.lists(quarter, min_size=s, max_size=s), min_size=n, max_size=n))
    mask = draw(st.lists(st.lists(st.booleans(), min_size=s, max_size=s), min_size=n, max_size=n))
    anchors = draw(st.lists(st.lists(st.integers(0, 3), min_size=s, max_size=s), min_size=n, max_size=n))
    episode = draw(st.lists(quarter, min_size=n, max_size=n))
    return groups, rewards, mask, anchors, episode


def _tensors(groups, rewards, mask, anchors, episode):
    return ids(groups), t64(rewards), torch.tensor(mask, dtype=torch.bool), ids(anchors), t64(episode)


@PROPERTY
@given(batch=step_batches())
def test_rloo_matches_loop(batch):
    groups, _, _, _, episode = batch
    torch.testing.assert_close(rloo_advantages(t64(episode), ids(groups)), t64(rloo_reference(episode, groups)))


@PROPERTY
@given(batch=step_batches(), std=stds, eps=st.sampled_from([0.0, 1e-6]))
def test_process_matches_loop(batch, std, eps):
    groups, rewards, mask, _, _ = batch
    g, r, m, _, _ = _tensors(*batch)
    torch.testing.assert_close(process_group_advantages(r, m, g, std=std, eps=eps),
                               t64(process_reference(rewards, mask, groups, std, eps)))


@PROPERTY
@given(batch=step_batches(), std=stds, eps=st.sampled_from([0.0, 1e-6]), omega=st.sampled_from([0.0, 0.5, 1.0]))
def test_gigpo_matches_loop(batch, std, eps, omega):
    groups, rewards, mask, anchors, episode = batch
    g, r, m, a, e = _tensors(*batch)
    torch.testing.assert_close(gigpo_advantages(e, g, r, m, a, omega=omega, std=std, eps=eps),
                               t64(gigpo_reference(episode, groups, rewards, mask, anchors, omega, std, eps)))


@PROPERTY
@given(batch=step_batches(), shift=quarter, std=stds)
def test_reward_shift_changes_nothing(batch, shift, std):
    g, r, m, a, e = _tensors(*batch)
    torch.testing.assert_close(rloo_advantages(e + shift, g), rloo_advantages(e, g))
    torch.testing.assert_close(process_group_advantages(r + shift, m, g, std=std),
                               process_group_advantages(r, m, g, std=std))
    torch.testing.assert_close(gigpo_advantages(e + shift, g, r + shift, m, a, std=std),
                               gigpo_advantages(e, g, r, m, a, std=std))


@PROPERTY
@given(batch=step_batches(), data=st.data())
def test_permuting_members_permutes_advantages(batch, data):
    g, r, m, a, e = _tensors(*batch)
    perm = torch.tensor(data.draw(st.permutations(list(range(len(e))))))
    torch.testing.assert_close(rloo_advantages(e[perm], g[perm]), rloo_advantages(e, g)[perm])
    torch.testing.assert_close(process_group_advantages(r[perm], m[perm], g[perm]),
                               process_group_advantages(r, m, g)[perm])
    torch.testing.assert_close(gigpo_advantages(e[perm], g[perm], r[perm], m[perm], a[perm]),
                               gigpo_advantages(e, g, r, m, a)[perm])


@PROPERTY
@given(batch=step_batches(), data=st.data())
def test_inserting_unmasked_steps_changes_nothing(batch, data):
    """A trajectory laid out with padding between its steps (as when its turns sit in several
    segments of different lengths): unmasked columns with arbitrary rewards and anchors inserted
    anywhere leave every masked step's advantage unchanged and get 0."""
    g, r, m, a, e = _tensors(*batch)
    n, s = r.shape
    extra = data.draw(st.integers(1, 3))
    positions = sorted(data.draw(st.lists(st.integers(0, s + extra - 1), min_size=extra, max_size=extra,
                                          unique=True)))
    keep = [c for c in range(s + extra) if c not in positions]
    big_r = torch.full((n, s + extra), 7.25, dtype=F64)
    big_m = torch.zeros(n, s + extra, dtype=torch.bool)
    big_a = torch.full((n, s + extra), 2, dtype=torch.int64)
    big_r[:, keep], big_m[:, keep], big_a[:, keep] = r, m, a
    for fn in (lambda rr, mm, aa: process_group_advantages(rr, mm, g),
               lambda rr, mm, aa: gigpo_advantages(e, g, rr, mm, aa)):
        small, big = fn(r, m, a), fn(big_r, big_m, big_a)
        torch.testing.assert_close(big[:, keep], small)
        assert (big[:, positions] == 0).all()


@PROPERTY
@given(batch=step_batches())
def test_gigpo_reduces_to_episode_advantage(batch):
    """omega = 0, or every step in its own step group (distinct anchors): A = A_E on masked steps."""
    g, r, m, a, e = _tensors(*batch)
    expected = torch.where(m, group_advantages(e, g)[:, None].expand_as(r), torch.zeros_like(r))
    torch.testing.assert_close(gigpo_advantages(e, g, r, m, a, omega=0.0), expected)
    distinct = torch.arange(r.numel()).reshape(r.shape)
    torch.testing.assert_close(gigpo_advantages(e, g, r, m, distinct), expected)
