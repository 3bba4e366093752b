"""GRPO: the group-relative outcome advantage (an outcome estimator of ``algos.group.GroupTrainer``).

With ``r_i`` the outcome of trajectory ``i`` (all its segments: one group member) and ``g`` its
group:

    A_i = (r_i - mean_g r) / (std_g r + eps)      (``algo.std``: population | sample | none; ``algo.adv_eps``)

(``algos.advantages.group_advantages``). ``A_i`` goes on every sampled token of every segment of
trajectory ``i``; selection, dynamic sampling and the loss are ``GroupTrainer``'s.

Fields read from ``algo`` beyond the base ``Trainer``'s: ``std``, ``adv_eps``, ``dynamic_sampling``
(no PPO field: no ``gamma``, ``lam``, ``vf_coef``, ``value_*``, ``norm_adv``): its config schema
:class:`GrpoConfig`, registered with the estimator (the schema the other group methods extend).
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor

from algos.advantages import STD_CONVENTIONS, group_advantages
from algos.configs import AlgoConfig, ConfigError, check_at_least, check_choice
from algos.group import GroupTrainer
from algos.registry import register


@dataclass
class GrpoConfig(AlgoConfig):
    """GRPO: outcome reward, group-relative advantage broadcast to every action token of a
    trajectory."""

    # group std convention of A_i = (r_i - mean_g r) / (std_g r + adv_eps): population | sample | none
    std: str = "population"
    adv_eps: float = 1e-6
    # drop all-same groups from the update (their generation cost still counts)
    dynamic_sampling: bool = False

    def __post_init__(self) -> None:
        if self.group_size < 2:
            raise ConfigError(
                f"algo.group_size={self.group_size} is invalid for GRPO: group-relative advantages need at least 2 "
                "rollouts per task (use algo=ppo for G=1)")
        super().__post_init__()
        check_choice("algo.std", self.std, list(STD_CONVENTIONS))
        check_at_least("algo.adv_eps", self.adv_eps, 0)


@register("grpo", trainer=GroupTrainer, config=GrpoConfig)
def grpo_estimator(rewards: Tensor, groups: Tensor, algo) -> Tensor:
    """``[N]`` group-relative advantages of the outcomes ``rewards`` in their ``groups``."""
    return group_advantages(rewards, groups, std=algo.std, eps=algo.adv_eps)


__all__ = ["GrpoConfig", "grpo_estimator"]
