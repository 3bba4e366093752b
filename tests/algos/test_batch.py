"""The data model: context layout, action mask, collation, per-trajectory decision layout."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from algos.batch import ContextBuilder, Trajectory, action_layout, collate
from envs.tokenizer import get_tokenizer

TOK = get_tokenizer()
BOS, EOS, SEP = TOK.bos_id, TOK.eos_id, TOK.sep_id


def _segment_traj():
    """obs_0=[10, 11]; a_1 = [20] + EOS; obs_1 = [12]; a_2 = [21, 22] hits the cap of 2 (forced EOS)."""
    b = ContextBuilder(max_len=64)
    b.start_segment([10, 11], "reset")
    b.add_sampled(20, -0.5, 3)
    b.add_sampled(EOS, -0.1, 3)
    t1 = b.end_action(capped=False)
    t1.reward = 0.0
    b.add_observation([12])
    b.add_sampled(21, -1.0, 3)
    b.add_sampled(22, -2.0, 3)
    t2 = b.end_action(capped=True)
    t2.reward = 1.0
    b.seg.end = "terminated"
    return Trajectory(segments=b.segments, train_reward=1.0, terminated=True)


def test_layout_and_action_mask_cover_exactly_the_sampled_tokens():
    tr = _segment_traj()
    s = tr.segments[0]
    assert s.tokens == [BOS, 10, 11, SEP, 20, EOS, 12, SEP, 21, 22, EOS]
    # sampled: 20, EOS (the EOS ending a sampled action is sampled), 21, 22; the forced EOS is env-written
    assert s.action_mask == [0, 0, 0, 0, 1, 1, 0, 0, 1, 1, 0]
    assert s.policy_version == [-1, -1, -1, -1, 3, 3, -1, -1, 3, 3, -1]
    assert s.behavior_logp[4:6] == [-0.5, -0.1]
    assert [(t.start, t.end, t.capped) for t in s.turns] == [(4, 5, False), (8, 9, True)]


def test_collate_places_rewards_on_last_sampled_token_and_indexes_turns():
    tr = _segment_traj()
    b = collate([tr, tr])
    assert b.tokens.shape == (2, 11)
    assert b.rewards[0].tolist() == [0.0] * 9 + [1.0, 0.0]  # turn 2 ends at index 9
    assert b.turn_index[0].tolist() == [-1, -1, -1, -1, 0, 0, -1, -1, 1, 1, -1]
    assert b.turn_first[0].nonzero().flatten().tolist() == [4, 8]
    assert b.row_traj.tolist() == [0, 1]


def test_action_layout_concatenates_segments_of_a_trajectory():
    b1 = ContextBuilder(max_len=64)
    b1.start_segment([10], "reset")
    b1.add_sampled(20, 0.0, 0)
    b1.add_sampled(EOS, 0.0, 0)
    b1.end_action(False)
    b1.seg.end = "compressed"
    b1.start_segment([13], "compression")
    b1.add_sampled(EOS, 0.0, 0)
    b1.end_action(False)
    b1.seg.end = "terminated"
    tr = Trajectory(segments=b1.segments, terminated=True)
    batch = collate([tr])
    rows, cols, mask = action_layout(batch, "token")
    # segment 0: [BOS 10 SEP 20 EOS] -> points (0,3), (0,4); segment 1: [BOS 13 SEP EOS] -> (1,3)
    assert list(zip(rows[0].tolist(), cols[0].tolist())) == [(0, 3), (0, 4), (1, 3)]
    assert mask.tolist() == [[True, True, True]]
    rows, cols, mask = action_layout(batch, "turn")
    assert list(zip(rows[0][mask[0]].tolist(), cols[0][mask[0]].tolist())) == [(0, 3), (1, 3)]
    # turn indices continue across segments
    assert batch.turn_index[1, 3].item() == 1


def test_observation_is_cut_from_the_front_to_fit():
    b = ContextBuilder(max_len=10)
    ids = b.start_segment(list(range(100, 120)), "reset", room=3)
    # room for [BOS] obs [SEP] + 3 more: obs keeps its last 10 - 2 - 3 = 5 ids
    assert ids == [BOS, 115, 116, 117, 118, 119, SEP]


def test_length_buckets_hand_computed():
    """lengths [10, 100, 12, 98], overhead 50: {10, 12} + {98, 100} costs 2*50 + 2*12 + 2*100 = 324,
    less than one slice (50 + 4*100 = 450), four slices (4*50 + 220 = 420) or {10, 12, 98} + {100}
    (2*50 + 3*98 + 100 = 494)."""
    from algos.batch import length_buckets

    lengths = torch.tensor([10, 100, 12, 98])
    got = length_buckets(lengths, max_rows=4, overhead=50)
    assert [s.tolist() for s in got] == [[0, 2], [3, 1]]
    assert [s.tolist() for s in length_buckets(lengths, max_rows=1, overhead=50)] == [[0], [2], [3], [1]]
    # overhead 1000, at most 3 rows: two slices (2000 +): {10} + {12, 98, 100} = 10 + 300 = 310,
    # {10, 12} + {98, 100} = 24 + 200 = 224, {10, 12, 98} + {100} = 294 + 100 = 394
    assert [s.tolist() for s in length_buckets(lengths, max_rows=3, overhead=1000)] == [[0, 2], [3, 1]]
    assert length_buckets(torch.tensor([], dtype=torch.long), 4) == []
    with pytest.raises(ValueError, match="max_rows=0"):
        length_buckets(lengths, 0)


def test_length_buckets_token_budget_hand_computed():
    """lengths [10, 100, 12, 98], overhead 50, at most 4 rows: unbudgeted {10, 12} + {98, 100}
    (2 * 100 = 200 positions in the second slice). A budget of 150 positions forbids it: {98} +
    {100} alone (1 * 100 <= 150 each), {10, 12} (24) kept: 3 * 50 + 24 + 98 + 100 = 372. A budget
    of 60 is below the longest rows, which then stand alone; {10, 12} (24 <= 60) stays."""
    from algos.batch import length_buckets

    lengths = torch.tensor([10, 100, 12, 98])
    assert [s.tolist() for s in length_buckets(lengths, 4, 50, max_tokens=200)] == [[0, 2], [3, 1]]
    assert [s.tolist() for s in length_buckets(lengths, 4, 50, max_tokens=150)] == [[0, 2], [3], [1]]
    assert [s.tolist() for s in length_buckets(lengths, 4, 50, max_tokens=60)] == [[0, 2], [3], [1]]
    assert [s.tolist() for s in length_buckets(lengths, 4, 50, max_tokens=23)] == [[0], [2], [3], [1]]
    with pytest.raises(ValueError, match="max_tokens=0 invalid; allowed: an int >= 1"):
        length_buckets(lengths, 4, max_tokens=0)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 60), min_size=1, max_size=8), st.integers(1, 8), st.integers(0, 100),
       st.integers(1, 200))
def test_length_buckets_with_a_token_budget_is_the_optimal_budgeted_partition(lengths, max_rows, overhead, budget):
    """With ``max_tokens``: every row once, every slice within the rows cap and within the budget
    unless it is one row, and the cost is the brute-force minimum over such partitions."""
    import itertools

    from algos.batch import length_buckets

    got = length_buckets(torch.tensor(lengths), max_rows, overhead, max_tokens=budget)
    assert sorted(i for s in got for i in s.tolist()) == list(range(len(lengths)))
    assert all(len(s) == 1 or len(s) * max(lengths[i] for i in s.tolist()) <= budget for s in got)
    cost = sum(overhead + len(s) * max(lengths[i] for i in s.tolist()) for s in got)
    ls, n, best = sorted(lengths), len(lengths), None
    for cuts in itertools.product([False, True], repeat=n - 1):
        bounds = [0] + [i + 1 for i, c in enumerate(cuts) if c] + [n]
        runs = list(zip(bounds[:-1], bounds[1:]))
        if any(b - a > max_rows or (b - a > 1 and (b - a) * ls[b - 1] > budget) for a, b in runs):
            continue
        c = sum(overhead + (b - a) * ls[b - 1] for a, b in runs)
        best = c if best is None else min(best, c)
    assert cost == best


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 60), min_size=1, max_size=8), st.integers(1, 8), st.integers(0, 100))
def test_length_buckets_is_an_optimal_partition(lengths, max_rows, overhead):
    """Every row exactly once, at most max_rows per slice, and the cost equals the brute-force
    minimum over all partitions of the sorted rows into consecutive runs."""
    import itertools

    from algos.batch import length_buckets

    got = length_buckets(torch.tensor(lengths), max_rows, overhead)
    flat = sorted(i for s in got for i in s.tolist())
    assert flat == list(range(len(lengths))) and all(len(s) <= max_rows for s in got)
    cost = sum(overhead + len(s) * max(lengths[i] for i in s.tolist()) for s in got)
    ls = sorted(lengths)
    n = len(ls)
    best = None
    for cuts in itertools.product([False, True], repeat=n - 1):
        bounds = [0] + [i + 1 for i, c in enumerate(cuts) if c] + [n]
        runs = list(zip(bounds[:-1], bounds[1:]))
        if any(b - a > max_rows for a, b in runs):
            continue
        c = sum(overhead + (b - a) * ls[b - 1] for a, b in runs)
        best = c if best is None else min(best, c)
    assert cost == best
