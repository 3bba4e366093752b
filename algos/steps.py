"""The step trainer: one ``Trainer`` for every step estimator (``algo=gigpo``, ``algo=grpo_process``, ...).

A **step** is one tool call (turn). Trajectory ``i``'s steps are its turns over ALL its segments,
in order; ``S`` is the most steps of any trajectory of the batch. ``step_inputs`` reads the
``[N, S]`` inputs of a step estimator from the trajectories' turns; ``on_step_tokens`` puts each
step's advantage on every sampled token of that step, in whichever segment it lies, through the
turn-level decision points (``algos.decisions.gae_layout`` with ``level="turn"``: a step's point
is its first sampled token and every sampled token of the turn belongs to it), so the step ->
token mapping is PPO's, not a second one.

``StepTrainer`` is the group trainer (``algos.group.GroupTrainer``: same clipped token-level loss,
aggregation modes, KL, budgets and metrics) with a per-step advantage instead of a per-trajectory
one: the step estimator registered under the method's name
(``algos.registry.register(name, trainer=StepTrainer)``, signature
``fn(steps: StepInputs, algo) -> (A [N, S], metrics)``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from algos import metric_keys as mk
from algos.batch import Batch, Trajectory
from algos.decisions import GAELayout, gae_layout, on_sampled_tokens
from algos.group import GroupTrainer, advantage_metrics
from algos.metrics import group_outcome_rates
from algos.update import Advantages, UpdateInputs


@dataclass
class StepInputs:
    """``[N, S]`` per-step inputs of trajectories (``N`` trajectories, ``S`` the most steps)."""

    rewards: Tensor  # [N, S] float, the env's training reward of each step (turn)
    mask: Tensor  # [N, S] bool, real steps
    anchors: Tensor  # [N, S] int64, equal iff the steps' state keys are equal; a missing key is unique
    terminated: Tensor  # [N, S] bool, on the last step of a trajectory whose task ended
    truncated: Tensor  # [N, S] bool, on the last step of one an outside limit cut
    group_ids: Tensor  # [N] int64
    episode_rewards: Tensor  # [N] float, Trajectory.train_reward (the sum of its step rewards)


def step_inputs(trajectories: list[Trajectory]) -> StepInputs:
    """The per-step tensors of ``trajectories`` (steps = turns of all segments, in order).

    Anchors: ``Turn.state_key`` mapped to dense ids over the batch (keys are arbitrary Python
    ints, 64-bit hashes included); a missing key (-1) gets an id of its own, so such a step is a
    singleton step group. Unmasked entries: reward 0, anchor -1, flags False."""
    n = len(trajectories)
    s = max((len(t.state_keys) for t in trajectories), default=0)
    rewards = torch.zeros(n, s)
    mask = torch.zeros(n, s, dtype=torch.bool)
    anchors = torch.full((n, s), -1, dtype=torch.long)
    terminated = torch.zeros(n, s, dtype=torch.bool)
    truncated = torch.zeros(n, s, dtype=torch.bool)
    dense: dict[int, int] = {}
    fresh = 0
    for i, traj in enumerate(trajectories):
        turns = [turn for seg in traj.segments for turn in seg.turns]
        for k, turn in enumerate(turns):
            rewards[i, k] = turn.reward
            mask[i, k] = True
            if turn.state_key == -1:
                anchors[i, k] = -2 - fresh  # unique, and apart from every dense id (>= 0)
                fresh += 1
            else:
                anchors[i, k] = dense.setdefault(int(turn.state_key), len(dense))
        if turns:
            terminated[i, len(turns) - 1] = traj.terminated
            truncated[i, len(turns) - 1] = not traj.terminated
    return StepInputs(rewards=rewards, mask=mask, anchors=anchors, terminated=terminated, truncated=truncated,
                      group_ids=torch.tensor([t.group_id for t in trajectories], dtype=torch.long),
                      episode_rewards=torch.tensor([t.train_reward for t in trajectories], dtype=torch.float32))


def step_layout(batch: Batch) -> GAELayout:
    """The turn-level decision points of ``batch`` (``gae_layout(batch, 0, "turn")``): point
    ``k`` of trajectory ``i`` is its ``k``-th step. Raises ``ValueError`` if a trajectory has a
    turn without a sampled token (then points and steps would not line up)."""
    layout = gae_layout(batch, torch.zeros(batch.tokens.shape), "turn")
    counts = layout.mask.sum(1).tolist()
    for i, traj in enumerate(batch.trajectories):
        if counts[i] != len(traj.state_keys):
            raise ValueError(f"trajectory {i} has {len(traj.state_keys)} turns but {counts[i]} turns with a "
                             f"sampled token; every step needs at least one sampled token")
    return layout


def on_step_tokens(step_values: Tensor, layout: GAELayout, batch: Batch, loss_mask: Tensor) -> Tensor:
    """``[N, S]`` per step -> ``[R, T]``: ``step_values[i, k]`` on every sampled token of step
    ``k`` of trajectory ``i`` (all its segments) that is in ``loss_mask``; 0 elsewhere."""
    n, length = layout.mask.shape
    padded = torch.zeros(n, length, dtype=step_values.dtype)
    width = min(length, step_values.shape[1])
    padded[:, :width] = step_values[:, :width]
    return on_sampled_tokens(padded, layout, batch) * (loss_mask > 0)


class StepTrainer(GroupTrainer):
    """The group trainer with the per-step advantages of its step estimator
    (``self.estimator.fn(steps, algo) -> ([N, S], metrics)``).

    ``select`` keeps the group trainer's ``train/groups_mixed_rate``; with ``algo.dynamic_sampling``
    it drops the groups whose step advantages are all exactly 0 (no signal; a group with equal
    outcomes can still carry step-level signal, so the equal-reward rule would be wrong here).
    Logged: ``train/adv_abs_mean`` and ``train/adv_zero_frac`` over the real steps (each step
    counts once, however many tokens it has), then the estimator's metrics."""

    estimator_kind = "step"

    def select(self, trajectories: list[Trajectory]) -> tuple[list[Trajectory], dict]:
        if not trajectories:
            return trajectories, {}
        steps = step_inputs(trajectories)
        metrics = {mk.TRAIN_GROUPS_MIXED_RATE: group_outcome_rates(steps.episode_rewards, steps.group_ids)["mixed"]}
        if not self.algo.dynamic_sampling:
            return trajectories, metrics
        adv, _ = self.estimator.fn(steps, self.algo)
        signal = (adv != 0).any(1)
        live_groups = set(steps.group_ids[signal].tolist())
        kept = [t for t in trajectories if t.group_id in live_groups]
        metrics[mk.TRAIN_DROPPED_TRAJECTORIES] = len(trajectories) - len(kept)
        metrics[mk.TRAIN_DROPPED_GROUPS] = len(set(steps.group_ids.tolist())) - len(live_groups)
        return kept, metrics

    def advantages(self, batch: Batch, inputs: UpdateInputs) -> Advantages:
        """Each step's advantage on every loss token of the step: ``point_advantages [N, S]`` (per
        step), ``layout`` the turn-level points, ``tokens [R, T]``."""
        steps = step_inputs(batch.trajectories)
        adv, metrics = self.estimator.fn(steps, self.algo)
        layout = step_layout(batch)
        tokens = on_step_tokens(adv.float(), layout, batch, inputs.loss_mask)
        metrics = {**advantage_metrics(adv[steps.mask]), **metrics}
        return Advantages(tokens=tokens, layout=layout, point_advantages=adv, metrics=metrics)


__all__ = ["StepInputs", "StepTrainer", "on_step_tokens", "step_inputs", "step_layout"]
