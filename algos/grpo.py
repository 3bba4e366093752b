"""GRPO: outcome reward, group-relative advantage broadcast to every action token of a trajectory.

A group is the G trajectories of one task instance (same reset options, different seeds); a
trajectory cut into several segments by compression is ONE group member (claim C13): its outcome
reward ``r_i`` (the env's training reward summed over the episode) gives

    A_i = (r_i - mean_g r) / (std_g r + eps)      (``algo.std``: population | sample | none)

and ``A_i`` is placed on every sampled token of every segment of trajectory ``i`` (C14). Steps are
never aligned across members: a 4-turn success and a 10-turn failure are compared by outcome (C12).

Dynamic sampling (``algo.dynamic_sampling``): groups whose rewards are all equal carry no signal
(their advantages are exactly 0); they are dropped from the update, but their generation cost was
already counted by the ComputeMeter when they were collected.

Fields read from ``algo`` beyond the base ``Trainer``'s: ``std``, ``adv_eps``, ``dynamic_sampling``
(no PPO field: no ``gamma``, ``lam``, ``vf_coef``, ``value_*``, ``norm_adv``).
"""

from __future__ import annotations

import torch

from algos.advantages import group_advantages
from algos.batch import Batch, Trajectory
from algos.metrics import group_outcome_rates
from algos.registry import register
from algos.trainer import Advantages, Trainer, UpdateInputs


def trajectory_advantages(trajectories: list[Trajectory], std: str, eps: float) -> torch.Tensor:
    """``[N]`` group-relative advantages of the trajectories' outcome rewards."""
    rewards = torch.tensor([t.train_reward for t in trajectories], dtype=torch.float32)
    groups = torch.tensor([t.group_id for t in trajectories], dtype=torch.long)
    return group_advantages(rewards, groups, std=std, eps=eps)


@register("grpo")
class GRPOTrainer(Trainer):
    fuse_old_forward = True  # GRPO's advantages need nothing from an old-policy forward

    def select(self, trajectories: list[Trajectory]) -> tuple[list[Trajectory], dict]:
        if not trajectories:
            return trajectories, {}
        rewards = torch.tensor([t.train_reward for t in trajectories], dtype=torch.float32)
        groups = torch.tensor([t.group_id for t in trajectories], dtype=torch.long)
        rates = group_outcome_rates(rewards, groups)
        metrics = {"train/groups_mixed_rate": rates["mixed"]}
        if not self.algo.dynamic_sampling:
            return trajectories, metrics
        by_group: dict[int, list[float]] = {}
        for t in trajectories:
            by_group.setdefault(t.group_id, []).append(t.train_reward)
        keep_groups = {g for g, rs in by_group.items() if max(rs) != min(rs)}
        kept = [t for t in trajectories if t.group_id in keep_groups]
        metrics["train/dropped_trajectories"] = len(trajectories) - len(kept)
        metrics["train/dropped_groups"] = len(by_group) - len(keep_groups)
        return kept, metrics

    def advantages(self, batch: Batch, inputs: UpdateInputs) -> Advantages:
        """``A_i`` of each trajectory (``per_trajectory [N]``) on every loss token of its rows:
        ``tokens[r, t] = A_{row_traj[r]} * loss_mask[r, t]``."""
        adv = trajectory_advantages(batch.trajectories, self.algo.std, self.algo.adv_eps)
        tokens = adv[batch.row_traj][:, None] * (inputs.loss_mask > 0).float()
        metrics = {"train/adv_abs_mean": float(adv.abs().mean()), "train/adv_zero_frac": float((adv == 0).float().mean())}
        return Advantages(tokens=tokens, per_trajectory=adv, metrics=metrics)


__all__ = ["GRPOTrainer", "trajectory_advantages"]
