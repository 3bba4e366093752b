"""A rollout set's decision points, their Monte Carlo returns and a critic's values there: the data
of ``python -m experiments.critic_probe`` and ``python -m experiments.value_ceiling``.

Pure math: trajectories and a critic in, tensors / Python floats out.
"""

from __future__ import annotations

import torch

from algos.advantages import discounted_returns
from algos.batch import collate
from algos.decisions import gae_layout
from algos.metrics import explained_variance
from algos.policy import ValueModel


class PointData:
    """One rollout set laid out for the critic: the batch, its decision points (``gae_layout`` at
    ``level``) and their Monte Carlo returns ``[N, L]`` (0 off the mask)."""

    def __init__(self, trajectories: list, level: str, gamma: float) -> None:
        self.trajectories = trajectories
        self.batch = collate(trajectories)
        self.layout = gae_layout(self.batch, torch.zeros(self.batch.tokens.shape), level)
        lay = self.layout
        self.returns = discounted_returns(lay.rewards, lay.terminated, lay.truncated, gamma=gamma, mask=lay.mask)
        self.read_at = (lay.cols - 1).clamp(min=0)  # V of a point is read before its first token

    def values(self, critic) -> torch.Tensor:
        """``[N, L]`` critic values at the points (garbage off the mask)."""
        lay = self.layout
        at = torch.zeros(self.batch.tokens.shape, dtype=torch.bool)
        at[lay.rows[lay.mask], self.read_at[lay.mask]] = True
        return critic_values(critic, self.batch.tokens, at)[lay.rows, self.read_at]

    def ev(self, critic) -> float:
        with torch.no_grad():
            v = self.values(critic)
        m = self.layout.mask
        return explained_variance(v[m], self.returns[m])


def critic_values(critic, tokens: torch.Tensor, at: torch.Tensor) -> torch.Tensor:
    """``[B, T]`` values from a separate critic (``ValueModel(tokens, at)``) or a policy with a
    value head (``PolicyModel(tokens) -> (logits, values)``)."""
    if isinstance(critic, ValueModel):
        return critic(tokens, at)
    return critic(tokens)[1]
