"""Synthetic trajectories through the real data model (``ContextBuilder``) for trainer tests.

Not a test module (no ``test_`` prefix); importable from any test because pyproject's pytest
``pythonpath`` includes ``tests``.
"""

import torch

from algos.batch import ContextBuilder, Trajectory
from envs.tokenizer import get_tokenizer

EOS = get_tokenizer().eos_id


def make_traj(turns_per_segment, reward, group=0, masked=False, seed=0, obs_len=2):
    """A trajectory whose k-th segment has ``turns_per_segment[k]`` turns; each turn samples one
    word (ids 5..39) + EOS after an ``obs_len``-token observation; segments after the first start
    from a compression; the reward sits on the last turn. ``masked`` ends it as an infra error."""
    g = torch.Generator().manual_seed(seed)
    b = ContextBuilder(max_len=256)
    for k, n_turns in enumerate(turns_per_segment):
        b.start_segment(torch.randint(5, 40, (2,), generator=g).tolist(), "reset" if k == 0 else "compression")
        for t in range(n_turns):
            b.add_sampled(int(torch.randint(5, 40, (1,), generator=g)), -1.0, 0)
            b.add_sampled(EOS, -1.0, 0)
            b.end_action(False)
            if t < n_turns - 1:
                b.add_observation(torch.randint(5, 40, (obs_len,), generator=g).tolist())
        b.seg.end = "compressed"
    b.seg.end = "masked" if masked else "terminated"
    b.seg.turns[-1].reward = reward
    return Trajectory(segments=b.segments, group_id=group, train_reward=reward, terminated=not masked,
                      truncated=masked, masked=masked, verified=None if masked else int(reward),
                      turns=sum(turns_per_segment), generated_tokens=2 * sum(turns_per_segment))
