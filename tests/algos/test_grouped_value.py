"""The critic-free grouped-value estimator (``algos.advantages.grouped_value_advantages``,
``algo=grouped_value``): hand-computed values and advantages, a compression boundary, all-equal
groups, and a property against a per-step loop reference."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from algos.advantages import grouped_value_advantages
from algos.batch import Segment, Trajectory, Turn
from algos.steps import step_inputs

F = torch.float32


def run(rewards, anchors, groups=(0, 0), lengths=None, terminated=True, gamma=1.0, lam=1.0, normalise="none"):
    r = torch.tensor(rewards, dtype=F)
    n, s = r.shape
    lengths = lengths or [s] * n
    mask = torch.tensor([[k < length for k in range(s)] for length in lengths])
    term = torch.zeros(n, s, dtype=torch.bool)
    trunc = torch.zeros(n, s, dtype=torch.bool)
    for i, length in enumerate(lengths):
        (term if terminated else trunc)[i, length - 1] = True
    return grouped_value_advantages(r, mask, torch.tensor(groups), torch.tensor(anchors), term, trunc,
                                    gamma=gamma, lam=lam, normalise=normalise)


def test_a_recurring_state_takes_the_mean_return_of_its_visits_and_a_single_one_the_group_mean():
    # group 0: trajectory 0 visits a then b and earns 1; trajectory 1 visits a then c and earns 0.
    # G = [1, 1] and [0, 0]. V(a) = (1 + 0) / 2 = 0.5; b and c are seen once: the group's mean return 0.5.
    adv, values = run([[0, 1], [0, 0]], [[5, 6], [5, 7]], lam=0.0)
    torch.testing.assert_close(values, torch.tensor([[0.5, 0.5], [0.5, 0.5]]))
    # lam 0: A = r + V' - V: (0 + 0.5 - 0.5, 1 - 0.5) and (0 + 0.5 - 0.5, 0 - 0.5)
    torch.testing.assert_close(adv, torch.tensor([[0.0, 0.5], [0.0, -0.5]]))
    # lam 1: A = G - V: (1 - 0.5) on both of trajectory 0's steps, (0 - 0.5) on trajectory 1's
    adv, _ = run([[0, 1], [0, 0]], [[5, 6], [5, 7]], lam=1.0)
    torch.testing.assert_close(adv, torch.tensor([[0.5, 0.5], [-0.5, -0.5]]))


def test_a_state_both_reach_after_different_first_steps_credits_the_first_step():
    # 3 rollouts, returns 1, 1, 0; anchors [1, 2], [3, 2], [1, 4]. Visits: state 1 by rollouts 0
    # (G 1) and 2 (G 0): V = 0.5; state 2 by rollouts 0 and 1 (G 1, 1): V = 1; states 3 and 4 once:
    # the group's mean return 2/3. gamma 1, lam 0, A = r + V' - V:
    # step 0: 0 + 1 - 0.5 = 0.5 | 0 + 1 - 2/3 = 1/3 | 0 + 2/3 - 0.5 = 1/6; step 1: 1 - 1 = 0 | 0 | 0 - 2/3
    adv, values = run([[0, 1], [0, 1], [0, 0]], [[1, 2], [3, 2], [1, 4]], groups=(0, 0, 0), lam=0.0)
    torch.testing.assert_close(values, torch.tensor([[0.5, 1.0], [2 / 3, 1.0], [0.5, 2 / 3]]))
    torch.testing.assert_close(adv, torch.tensor([[0.5, 0.0], [1 / 3, 0.0], [1 / 6, -2 / 3]]))


def test_groups_do_not_share_states_and_an_all_equal_group_gets_zero():
    # the same anchor in two groups: each group's own mean. Group 1's two rollouts both earn 1:
    # every value is 1 and every advantage 0; group 0 as in the first test
    adv, values = run([[0, 1], [0, 0], [0, 1], [0, 1]], [[5, 6], [5, 7], [5, 6], [5, 7]], groups=(0, 0, 1, 1))
    torch.testing.assert_close(values[2:], torch.ones(2, 2))
    torch.testing.assert_close(adv[2:], torch.zeros(2, 2))
    torch.testing.assert_close(adv[:2], torch.tensor([[0.5, 0.5], [-0.5, -0.5]]))
    norm, _ = run([[0, 1], [0, 1]], [[5, 6], [5, 7]], normalise="group")
    assert torch.equal(norm, torch.zeros(2, 2))  # standardising an all-zero group keeps 0


def test_group_normalisation_and_a_truncated_end_bootstraps_from_the_group_mean():
    # normalise=group over the 4 steps [0.5, 0.5, -0.5, -0.5]: mean 0, population std 0.5 -> +-1 (eps 1e-6)
    norm, _ = run([[0, 1], [0, 0]], [[5, 6], [5, 7]], normalise="group")
    torch.testing.assert_close(norm, torch.tensor([[1.0, 1.0], [-1.0, -1.0]]), atol=1e-5, rtol=0)
    # truncated after one step (no return): G = 0 for both, V = 0; the last step bootstraps from the
    # group's mean return 0 -> every advantage 0
    adv, _ = run([[0.0], [0.0]], [[5], [6]], terminated=False)
    assert torch.equal(adv, torch.zeros(2, 1))
    # truncated with a reward: G = [1], [0]; V single -> 0.5; delta = r + V'(0.5) - 0.5 = r
    adv, _ = run([[1.0], [0.0]], [[5], [6]], terminated=False, lam=0.0)
    torch.testing.assert_close(adv, torch.tensor([[1.0], [0.0]]))


def test_a_compression_boundary_inside_an_episode_changes_nothing():
    """The steps are the turns of all segments: one trajectory split into two segments gives the
    same step inputs, so the same values and advantages, as the unsplit one."""

    def traj(split: bool, reward: float, keys):
        turns = [Turn(start=0, end=0, reward=0.0, state_key=keys[0]), Turn(start=1, end=1, reward=reward, state_key=keys[1])]
        segments = [Segment(turns=turns[:1]), Segment(turns=turns[1:])] if split else [Segment(turns=turns)]
        return Trajectory(segments=segments, train_reward=reward, terminated=True, group_id=0)

    for split in (False, True):
        steps = step_inputs([traj(split, 1.0, (11, 12)), traj(False, 0.0, (11, 13))])
        adv, values = grouped_value_advantages(steps.rewards, steps.mask, steps.group_ids, steps.anchors,
                                               steps.terminated, steps.truncated, gamma=1.0, lam=1.0)
        torch.testing.assert_close(adv, torch.tensor([[0.5, 0.5], [-0.5, -0.5]]))


def test_bad_arguments_are_one_line_errors():
    with pytest.raises(ValueError, match=r"normalise='batch' unknown; allowed: none, group"):
        run([[0, 1], [0, 0]], [[5, 6], [5, 7]], normalise="batch")
    with pytest.raises(ValueError, match=r"lam must be a number in \[0, 1\], got 1.5"):
        run([[0, 1], [0, 0]], [[5, 6], [5, 7]], lam=1.5)


# ------------------------------------------------------------------ property: a loop reference
def reference(rewards, mask, groups, anchors, term, trunc, gamma, lam):
    """Per-step loops, no tensors shared with the implementation: returns-to-go, visit means per
    (group, anchor), the group mean return, then the GAE recursion backwards over each row."""
    n, s = len(rewards), len(rewards[0])
    steps = [[k for k in range(s) if mask[i][k]] for i in range(n)]
    g = [[0.0] * s for _ in range(n)]
    for i in range(n):
        nxt = 0.0
        for k in reversed(steps[i]):
            nxt = rewards[i][k] + gamma * (0.0 if (term[i][k] or trunc[i][k]) else nxt)
            g[i][k] = nxt
    visits: dict = {}
    for i in range(n):
        for k in steps[i]:
            visits.setdefault((groups[i], anchors[i][k]), []).append(g[i][k])
    members = {}
    for i in range(n):
        members.setdefault(groups[i], []).append(g[i][steps[i][0]] if steps[i] else 0.0)
    mean_return = {grp: sum(v) / len(v) for grp, v in members.items()}
    v = [[0.0] * s for _ in range(n)]
    for i in range(n):
        for k in steps[i]:
            seen = visits[(groups[i], anchors[i][k])]
            v[i][k] = sum(seen) / len(seen) if len(seen) >= 2 else mean_return[groups[i]]
    adv = [[0.0] * s for _ in range(n)]
    for i in range(n):
        carry = 0.0
        for pos in reversed(range(len(steps[i]))):
            k = steps[i][pos]
            nv = v[i][steps[i][pos + 1]] if pos + 1 < len(steps[i]) else (mean_return[groups[i]] if trunc[i][k] else 0.0)
            delta = rewards[i][k] + gamma * (0.0 if term[i][k] else nv) - v[i][k]
            carry = delta + gamma * lam * (0.0 if (term[i][k] or trunc[i][k]) else carry)
            adv[i][k] = carry
    return adv, v


@settings(max_examples=60, deadline=None)
@given(st.data(), st.floats(0, 1), st.floats(0, 1))
def test_matches_the_loop_reference(data, gamma, lam):
    n = data.draw(st.integers(1, 6))
    s = data.draw(st.integers(1, 5))
    lengths = [data.draw(st.integers(1, s)) for _ in range(n)]
    groups = [data.draw(st.integers(0, 2)) for _ in range(n)]
    rewards = [[data.draw(st.sampled_from([0.0, 0.5, 1.0])) for _ in range(s)] for _ in range(n)]
    anchors = [[data.draw(st.integers(0, 3)) for _ in range(s)] for _ in range(n)]
    ends = [data.draw(st.booleans()) for _ in range(n)]  # terminated, else truncated
    mask = [[k < lengths[i] for k in range(s)] for i in range(n)]
    term = [[k == lengths[i] - 1 and ends[i] for k in range(s)] for i in range(n)]
    trunc = [[k == lengths[i] - 1 and not ends[i] for k in range(s)] for i in range(n)]
    want_adv, want_v = reference(rewards, mask, groups, anchors, term, trunc, gamma, lam)
    adv, values = grouped_value_advantages(torch.tensor(rewards, dtype=torch.float64), torch.tensor(mask),
                                           torch.tensor(groups), torch.tensor(anchors), torch.tensor(term),
                                           torch.tensor(trunc), gamma=gamma, lam=lam)
    torch.testing.assert_close(values, torch.tensor(want_v, dtype=torch.float64), rtol=1e-9, atol=1e-9)
    torch.testing.assert_close(adv, torch.tensor(want_adv, dtype=torch.float64), rtol=1e-9, atol=1e-9)


def test_held_out_values_leave_the_trajectory_out():
    from algos.advantages import held_out_state_values
    from algos.metrics import explained_variance

    # returns-to-go [1, 1], [0, 0], [1, 1]; states [5, 6], [5, 7], [5, 6], one group.
    # (0, 0): state 5 seen by the others with G 0 and 1 -> 0.5; (0, 1): state 6 by rollout 2 -> 1;
    # (1, 0): state 5 by the others, 1 and 1 -> 1; (1, 1): state 7 only its own -> the others' mean
    # return (1 + 1) / 2 = 1; rollout 2 as rollout 0
    g = torch.tensor([[1.0, 1.0], [0.0, 0.0], [1.0, 1.0]])
    mask = torch.ones(3, 2, dtype=torch.bool)
    anchors = torch.tensor([[5, 6], [5, 7], [5, 6]])
    held, defined = held_out_state_values(g, mask, torch.tensor([0, 0, 0]), anchors)
    torch.testing.assert_close(held, torch.tensor([[0.5, 1.0], [1.0, 1.0], [0.5, 1.0]]))
    assert bool(defined.all())
    # EV = 1 - Var(G - V) / Var(G): residuals [0.5, 0, -1, -1, 0.5, 0], mean -1/6, population
    # variance (4/9 + 1/36 + 25/36 + 25/36 + 4/9 + 1/36) / 6 = 7/18; Var(G) = 2/9 -> 1 - 7/4 = -0.75
    assert explained_variance(held, g, defined) == pytest.approx(-0.75)
    # a group of one has no other member: nothing defined
    _, alone = held_out_state_values(g[:1], mask[:1], torch.tensor([3]), anchors[:1])
    assert not bool(alone.any())


def held_out_reference(g, mask, groups, anchors):
    n, s = len(g), len(g[0])
    values = [[0.0] * s for _ in range(n)]
    defined = [[False] * s for _ in range(n)]
    for i in range(n):
        others = [j for j in range(n) if j != i and groups[j] == groups[i]]
        for k in range(s):
            if not mask[i][k] or not others:
                continue
            seen = [g[j][q] for j in others for q in range(s) if mask[j][q] and anchors[j][q] == anchors[i][k]]
            values[i][k] = sum(seen) / len(seen) if seen else sum(g[j][0] for j in others) / len(others)
            defined[i][k] = True
    return values, defined


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_held_out_values_match_the_loop_reference(data):
    from algos.advantages import held_out_state_values

    n, s = data.draw(st.integers(1, 6)), data.draw(st.integers(1, 4))
    lengths = [data.draw(st.integers(1, s)) for _ in range(n)]
    groups = [data.draw(st.integers(0, 2)) for _ in range(n)]
    g = [[data.draw(st.sampled_from([0.0, 0.5, 1.0, 2.0])) for _ in range(s)] for _ in range(n)]
    anchors = [[data.draw(st.integers(0, 3)) for _ in range(s)] for _ in range(n)]
    mask = [[k < lengths[i] for k in range(s)] for i in range(n)]
    g = [[g[i][k] if mask[i][k] else 0.0 for k in range(s)] for i in range(n)]
    want, want_defined = held_out_reference(g, mask, groups, anchors)
    held, defined = held_out_state_values(torch.tensor(g, dtype=torch.float64), torch.tensor(mask),
                                          torch.tensor(groups), torch.tensor(anchors))
    assert defined.tolist() == want_defined
    torch.testing.assert_close(held, torch.tensor(want, dtype=torch.float64), rtol=1e-9, atol=1e-9)
