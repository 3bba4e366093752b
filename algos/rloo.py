"""RLOO: outcome reward with a leave-one-out baseline, broadcast to every action token.

Groups are GRPO's (the G trajectories of one task instance; a trajectory cut into segments is one
member). With ``r_i`` the trajectory's outcome (``Trajectory.train_reward``):

    A_i = r_i - (1 / (n_g - 1)) * sum_{j in g, j != i} r_j        (singleton group: A_i = 0)

``algos.advantages.rloo_advantages``; no division by a std (``algo.std`` / ``algo.adv_eps`` are
not read). ``A_i`` goes on every sampled token of every segment of trajectory ``i``; the loss,
aggregation, KL, budgets, metrics and dynamic sampling (an all-equal group has A = 0 exactly,
so GRPO's rule is RLOO's too) are GRPO's.

Fields read from ``algo`` beyond the base ``Trainer``'s: ``dynamic_sampling``.
"""

from __future__ import annotations

import torch

from algos.advantages import rloo_advantages
from algos.batch import Batch
from algos.grpo import GRPOTrainer
from algos.registry import register
from algos.trainer import Advantages, UpdateInputs


@register("rloo")
class RLOOTrainer(GRPOTrainer):
    def advantages(self, batch: Batch, inputs: UpdateInputs) -> Advantages:
        """``tokens[r, t] = A_{row_traj[r]} * loss_mask[r, t]`` with the leave-one-out ``A [N]``."""
        rewards = torch.tensor([t.train_reward for t in batch.trajectories], dtype=torch.float32)
        groups = torch.tensor([t.group_id for t in batch.trajectories], dtype=torch.long)
        adv = rloo_advantages(rewards, groups)
        tokens = adv[batch.row_traj][:, None] * (inputs.loss_mask > 0).float()
        metrics = {"train/adv_abs_mean": float(adv.abs().mean()), "train/adv_zero_frac": float((adv == 0).float().mean())}
        return Advantages(tokens=tokens, per_trajectory=adv, metrics=metrics)


__all__ = ["RLOOTrainer"]
