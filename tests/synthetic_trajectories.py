"""Synthetic trajectories through the real data model (``ContextBuilder``) for trainer tests.

Not a test module (no ``test_`` prefix); importable from any test because pyproject's pytest
``pythonpath`` includes ``tests``.
"""

import torch

from algos.batch import ContextBuilder, Trajectory
from envs.tokenizer import get_tokenizer

EOS = get_tokenizer().eos_id


def make_traj(turns_per_segment, reward, group=0, masked=False, seed=0, obs_len=2, step_rewards=None,
              state_keys=None, words=1):
    """A trajectory whose k-th segment has ``turns_per_segment[k]`` turns; each turn samples
    ``words`` words (ids 5..39) + EOS after an ``obs_len``-token observation; segments after the
    first start from a compression; the reward sits on the last turn. ``masked`` ends it as an
    infra error. ``step_rewards`` (one per turn of the whole trajectory, all segments in order)
    replaces the rewards of every turn (then ``train_reward`` is their sum and ``reward`` is
    unused); ``state_keys`` (one per turn) sets each turn's ``state_key`` (default -1: none)."""
    n_total = sum(turns_per_segment)
    for name, per_turn in (("step_rewards", step_rewards), ("state_keys", state_keys)):
        if per_turn is not None and len(per_turn) != n_total:
            raise ValueError(f"{name} has {len(per_turn)} entries, expected one per turn ({n_total})")
    g = torch.Generator().manual_seed(seed)
    b = ContextBuilder(max_len=256)
    for k, n_turns in enumerate(turns_per_segment):
        b.start_segment(torch.randint(5, 40, (2,), generator=g).tolist(), "reset" if k == 0 else "compression")
        for t in range(n_turns):
            for _ in range(words):
                b.add_sampled(int(torch.randint(5, 40, (1,), generator=g)), -1.0, 0)
            b.add_sampled(EOS, -1.0, 0)
            b.end_action(False)
            if t < n_turns - 1:
                b.add_observation(torch.randint(5, 40, (obs_len,), generator=g).tolist())
        b.seg.end = "compressed"
    b.seg.end = "masked" if masked else "terminated"
    b.seg.turns[-1].reward = reward
    turns = [turn for seg in b.segments for turn in seg.turns]
    if step_rewards is not None:
        for turn, r in zip(turns, step_rewards):
            turn.reward = float(r)
        reward = float(sum(step_rewards))
    if state_keys is not None:
        for turn, key in zip(turns, state_keys):
            turn.state_key = int(key)
    return Trajectory(segments=b.segments, group_id=group, train_reward=reward, terminated=not masked,
                      truncated=masked, masked=masked, verified=None if masked else int(reward),
                      turns=n_total, generated_tokens=(words + 1) * n_total)


def compressed_traj(end="terminated"):
    """Segment 0: [BOS 10 SEP EOS]  -- one action (the EOS at index 3), reward 0, then compression.
    Segment 1: [BOS 11 SEP EOS (+ 12 SEP if truncated)] -- one action at index 3, reward 1."""
    b = ContextBuilder(max_len=32)
    b.start_segment([10], "reset")
    b.add_sampled(EOS, -0.1, 0)
    b.end_action(False).reward = 0.0
    b.seg.end = "compressed"
    b.seg.continuation = [11]
    b.start_segment([11], "compression")
    b.add_sampled(EOS, -0.1, 0)
    b.end_action(False).reward = 1.0
    b.seg.end = end
    if end == "truncated":
        b.add_observation([12])
        b.seg.bootstrap_index = len(b.seg.tokens) - 1  # index 5
    return Trajectory(segments=b.segments, train_reward=1.0, terminated=end == "terminated",
                      truncated=end == "truncated", verified=1)
