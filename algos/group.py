"""The group trainer: one ``Trainer`` for every outcome estimator (``algo=grpo``, ``algo=rloo``, ...).

A group is the G trajectories of one task instance (same reset options, different seeds); a
trajectory cut into several segments by compression is ONE group member (claim C13). Its outcome
``r_i`` is ``Trajectory.train_reward`` (the env's training reward summed over the episode). The
trainer hands the outcomes and group ids to the outcome estimator registered under the method's
name (``algos.registry.register(name, trainer=GroupTrainer)``, signature
``fn(rewards [N], group_ids [N], algo) -> A [N]``) and places ``A_i`` on every sampled token of
every segment of trajectory ``i`` (C14). Steps are never aligned across members: a 4-turn success
and a 10-turn failure are compared by outcome (C12). The loss, aggregation modes, KL, budgets and
metrics are the base ``Trainer``'s.

Dynamic sampling (``algo.dynamic_sampling``): groups whose rewards are all equal carry no signal
(an outcome estimator gives them advantage 0); they are dropped from the update, but their
generation cost was already counted by the ComputeMeter when they were collected.

Fields read from ``algo`` beyond the base ``Trainer``'s: ``name`` (the estimator, unless
``make_trainer`` names it), ``dynamic_sampling``, and the estimator's own fields.
"""

from __future__ import annotations

import torch
from torch import Tensor

from algos import metric_keys as mk
from algos.batch import Batch, Trajectory
from algos.metrics import group_outcome_rates
from algos.registry import EstimatorSpec, estimator
from algos.trainer import Trainer
from algos.update import Advantages, UpdateInputs


def outcome_inputs(trajectories: list[Trajectory]) -> tuple[Tensor, Tensor]:
    """``(rewards [N] float32, group_ids [N] int64)``: the trajectories' outcomes and groups."""
    rewards = torch.tensor([t.train_reward for t in trajectories], dtype=torch.float32)
    groups = torch.tensor([t.group_id for t in trajectories], dtype=torch.long)
    return rewards, groups


def advantage_metrics(adv: Tensor) -> dict:
    """``train/adv_abs_mean`` and ``train/adv_zero_frac`` of the advantages ``adv`` (0 when empty)."""
    if not adv.numel():
        return {mk.TRAIN_ADV_ABS_MEAN: 0.0, mk.TRAIN_ADV_ZERO_FRAC: 0.0}
    return {mk.TRAIN_ADV_ABS_MEAN: float(adv.abs().mean()), mk.TRAIN_ADV_ZERO_FRAC: float((adv == 0).float().mean())}


class GroupTrainer(Trainer):
    """Runs the ``estimator_kind`` estimator named ``estimator`` (``make_trainer`` passes the
    registered name; None: ``algo.name``) and checks ``algo`` against it before the base setup."""

    estimator_kind = "outcome"
    fuse_old_forward = True  # the advantages need nothing from an old-policy forward

    def __init__(self, algo, policy, critic=None, reference=None, temperature=1.0, meter=None, *,
                 estimator: str | None = None) -> None:
        self.estimator = self.pick_estimator(algo, estimator)
        super().__init__(algo, policy, critic, reference, temperature, meter)

    @classmethod
    def pick_estimator(cls, algo, name: str | None) -> EstimatorSpec:
        """The registered ``cls.estimator_kind`` estimator ``name`` (None: ``algo.name``), after its
        ``check(algo)``."""
        spec = estimator(algo.name if name is None else name, cls.estimator_kind)
        if spec.check is not None:
            spec.check(algo)
        return spec

    def select(self, trajectories: list[Trajectory]) -> tuple[list[Trajectory], dict]:
        if not trajectories:
            return trajectories, {}
        rewards, groups = outcome_inputs(trajectories)
        metrics = {mk.TRAIN_GROUPS_MIXED_RATE: group_outcome_rates(rewards, groups)["mixed"]}
        if not self.algo.dynamic_sampling:
            return trajectories, metrics
        by_group: dict[int, list[float]] = {}
        for t in trajectories:
            by_group.setdefault(t.group_id, []).append(t.train_reward)
        keep_groups = {g for g, rs in by_group.items() if max(rs) != min(rs)}
        kept = [t for t in trajectories if t.group_id in keep_groups]
        metrics[mk.TRAIN_DROPPED_TRAJECTORIES] = len(trajectories) - len(kept)
        metrics[mk.TRAIN_DROPPED_GROUPS] = len(by_group) - len(keep_groups)
        return kept, metrics

    def advantages(self, batch: Batch, inputs: UpdateInputs) -> Advantages:
        """``A_i`` of each trajectory (``per_trajectory [N]``) on every loss token of its rows:
        ``tokens[r, t] = A_{row_traj[r]} * loss_mask[r, t]``."""
        adv = self.estimator.fn(*outcome_inputs(batch.trajectories), self.algo)
        tokens = adv[batch.row_traj][:, None] * (inputs.loss_mask > 0).float()
        return Advantages(tokens=tokens, per_trajectory=adv, metrics=advantage_metrics(adv))


__all__ = ["GroupTrainer", "advantage_metrics", "outcome_inputs"]
