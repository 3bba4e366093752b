"""RLOO: the outcome advantage against a leave-one-out baseline (an outcome estimator of
``algos.group.GroupTrainer``).

Groups are GRPO's (the G trajectories of one task instance; a trajectory cut into segments is one
member). With ``r_i`` the trajectory's outcome (``Trajectory.train_reward``):

    A_i = r_i - (1 / (n_g - 1)) * sum_{j in g, j != i} r_j        (singleton group: A_i = 0)

``algos.advantages.rloo_advantages``; no division by a std (``algo.std`` / ``algo.adv_eps`` are
not read). ``A_i`` goes on every sampled token of every segment of trajectory ``i``; the loss,
aggregation, KL, budgets, metrics and dynamic sampling (an all-equal group has A = 0 exactly) are
``GroupTrainer``'s.

Fields read from ``algo`` beyond the base ``Trainer``'s: ``dynamic_sampling`` (its config schema
:class:`RlooConfig` extends GRPO's).
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor

from algos.advantages import rloo_advantages
from algos.group import GroupTrainer
from algos.grpo import GrpoConfig
from algos.registry import register


@dataclass
class RlooConfig(GrpoConfig):
    """RLOO: A_i = r_i - mean of the other members of i's group, broadcast to every action token
    (``std`` / ``adv_eps`` are not read: there is no std division)."""


@register("rloo", trainer=GroupTrainer, config=RlooConfig)
def rloo_estimator(rewards: Tensor, groups: Tensor, algo) -> Tensor:
    """``[N]`` leave-one-out advantages of the outcomes ``rewards`` in their ``groups``."""
    return rloo_advantages(rewards, groups)


__all__ = ["RlooConfig", "rloo_estimator"]
