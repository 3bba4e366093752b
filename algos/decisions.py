"""Decision points: each trajectory's per-decision indexing over ALL its segments, as one row.

A decision point (``algos.advantages.VALUE_LEVELS``) is every sampled token (``token``) or the first
sampled token of each tool call (``turn``: one point per turn). Every sampled token belongs to the
last decision point at or before it (``GAELayout.owner``); a point's reward is the sum of its
tokens' rewards, and a per-point value is put back on its tokens by :func:`on_sampled_tokens`.
The value of a decision point at token index ``c`` is read at ``c - 1`` (the position that precedes
it; for the first token of an action that is the ``[SEP]`` closing the observation).

:func:`gae_layout` lays out the points of a batch as the ``[N, L]`` inputs of
``algos.advantages.gae``:
  rewards      each turn's reward on the point owning its last sampled token
  next_values  the value of the next decision point in the row. Inside a segment that is the next
               token's state; at a compression boundary it is the value of the compressed context
               the episode actually continued from (the ``[SEP]`` ending ``[BOS] summary [SEP]`` of
               the next segment), with neither flag set: the recursion continues (C16/C17)
  terminated   on the trajectory's last point when the task ended: no bootstrap
  truncated    on the last point when an outside limit cut it: bootstrap from V(next state) read at
               the ``[SEP]`` after the final observation; the recursion stops

PPO (``algos.ppo``) runs GAE on this layout; the step estimators (``algos.steps``) use its
turn-level points (zero values) to map each step to its tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from algos.batch import Batch, action_layout


@dataclass
class GAELayout:
    """Each trajectory's decision points over ALL its segments as one row: the ``[N, L]`` inputs
    of ``algos.advantages.gae`` (``N`` trajectories, ``L`` the most points of any of them)."""

    rows: Tensor  # [N, L] long, batch row of trajectory i's k-th point (0 where mask is False)
    cols: Tensor  # [N, L] long, its token index
    mask: Tensor  # [N, L] bool, real points
    rewards: Tensor  # [N, L] sum of the rewards of the point's tokens
    values: Tensor  # [N, L] V(state the point's token was chosen in), read at cols - 1
    next_values: Tensor  # [N, L] V of the state after the point (see the module docstring)
    terminated: Tensor  # [N, L] bool, on the last point of a trajectory whose task ended
    truncated: Tensor  # [N, L] bool, on the last point of one an outside limit cut
    owner: Tensor  # [R, T] long, k of the point each sampled token belongs to (trajectory row_traj[r]); -1 elsewhere


def owners(batch: Batch, rows: Tensor, cols: Tensor, mask: Tensor) -> Tensor:
    """``owner [R, T]``: for a sampled token, the index ``k`` (in its trajectory's layout row) of
    the last decision point at or before it; -1 for env-written tokens and padding."""
    points = torch.zeros(batch.tokens.shape, dtype=torch.long)
    points[rows[mask], cols[mask]] = 1
    per_row = points.sum(1)
    before = torch.cumsum(per_row, 0) - per_row  # points in all earlier rows
    first_row = torch.full((len(batch.trajectories),), batch.num_rows, dtype=torch.long)
    first_row = first_row.scatter_reduce(0, batch.row_traj, torch.arange(batch.num_rows), "amin")
    offset = before - before[first_row[batch.row_traj]]  # points in earlier rows of the same trajectory
    owner = offset[:, None] + torch.cumsum(points, 1) - 1
    return torch.where(batch.action_mask > 0, owner, torch.full_like(owner, -1))


def gae_layout(batch: Batch, raw_values: Tensor, level: str = "token") -> GAELayout:
    """The GAE inputs of ``batch`` at decision-point level ``level`` (``VALUE_LEVELS``).

    ``raw_values [R, T]`` is the critic output at each position (value of the prefix ending
    there). Compressions carry neither flag (bootstrap from the next segment's first value, the
    recursion continues); the trajectory's last point is ``terminated`` (next value 0) or
    ``truncated`` (next value read at the segment's ``bootstrap_index``, 0 if it has none)."""
    rows, cols, mask = action_layout(batch, level)
    n, length = mask.shape
    values = raw_values[rows, (cols - 1).clamp(min=0)] * mask
    owner = owners(batch, rows, cols, mask)
    r_idx, t_idx = torch.nonzero(owner >= 0, as_tuple=True)
    rewards = torch.zeros(n, length).index_put_(
        (batch.row_traj[r_idx], owner[r_idx, t_idx]), batch.rewards[r_idx, t_idx], accumulate=True) * mask
    next_values = torch.zeros(n, length)
    next_values[:, :-1] = values[:, 1:]
    terminated = torch.zeros(n, length, dtype=torch.bool)
    truncated = torch.zeros(n, length, dtype=torch.bool)
    counts = mask.sum(1)
    last_row_of: dict[int, int] = {}
    for row in range(batch.num_rows):
        last_row_of[int(batch.row_traj[row])] = row
    for i, traj in enumerate(batch.trajectories):
        k = int(counts[i]) - 1
        if k < 0:
            continue
        last_row = last_row_of[i]
        if traj.terminated:
            terminated[i, k] = True
            next_values[i, k] = 0.0
        else:
            truncated[i, k] = True
            b = int(batch.bootstrap_index[last_row])
            next_values[i, k] = raw_values[last_row, b] if b >= 0 else 0.0
    return GAELayout(rows=rows, cols=cols, mask=mask, rewards=rewards, values=values, next_values=next_values,
                     terminated=terminated, truncated=truncated, owner=owner)


def at_points(flat: Tensor, layout: GAELayout, batch: Batch) -> Tensor:
    """``[N, L]`` per decision point -> ``[R, T]`` at the points' token positions (0 elsewhere)."""
    out = torch.zeros(batch.tokens.shape, dtype=flat.dtype)
    m = layout.mask
    out[layout.rows[m], layout.cols[m]] = flat[m]
    return out


def on_sampled_tokens(flat: Tensor, layout: GAELayout, batch: Batch) -> Tensor:
    """``[N, L]`` per decision point -> ``[R, T]`` on every sampled token, from the point it
    belongs to (``layout.owner``); 0 on env-written tokens and padding."""
    out = torch.zeros(batch.tokens.shape, dtype=flat.dtype)
    r_idx, t_idx = torch.nonzero(layout.owner >= 0, as_tuple=True)
    out[r_idx, t_idx] = flat[batch.row_traj[r_idx], layout.owner[r_idx, t_idx]]
    return out


__all__ = ["GAELayout", "at_points", "gae_layout", "on_sampled_tokens", "owners"]
