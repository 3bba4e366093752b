"""GRPO: the group-relative outcome advantage (an outcome estimator of ``algos.group.GroupTrainer``).

With ``r_i`` the outcome of trajectory ``i`` (all its segments: one group member) and ``g`` its
group:

    A_i = (r_i - mean_g r) / (std_g r + eps)      (``algo.std``: population | sample | none; ``algo.adv_eps``)

(``algos.advantages.group_advantages``). ``A_i`` goes on every sampled token of every segment of
trajectory ``i``; selection, dynamic sampling and the loss are ``GroupTrainer``'s.

Fields read from ``algo`` beyond the base ``Trainer``'s: ``std``, ``adv_eps``, ``dynamic_sampling``
(no PPO field: no ``gamma``, ``lam``, ``vf_coef``, ``value_*``, ``norm_adv``).
"""

from __future__ import annotations

from torch import Tensor

from algos.advantages import group_advantages
from algos.group import GroupTrainer
from algos.registry import register


@register("grpo", trainer=GroupTrainer)
def grpo_estimator(rewards: Tensor, groups: Tensor, algo) -> Tensor:
    """``[N]`` group-relative advantages of the outcomes ``rewards`` in their ``groups``."""
    return group_advantages(rewards, groups, std=algo.std, eps=algo.adv_eps)


__all__ = ["grpo_estimator"]
