"""Process-supervised GRPO (DeepSeekMath section 4.1.3): normalised step rewards, summed to go; a
step estimator of ``algos.steps.StepTrainer``.

The scored steps of trajectory ``i`` are the turns that carry a reward: every turn whose training
reward is non-zero (process rewards: ``env.kwargs.reward_mode`` one of the env spec's
``step_reward_modes``) and always its last turn (the outcome is scored there, 0 included). Over
ALL scored steps of ALL members of group ``g`` (``algos.advantages.process_group_advantages``):

    r~[i, s] = (r[i, s] - mean_g r) / (std_g r + eps)                  (``algo.std``, ``algo.adv_eps``)
    A[i, s]  = sum_{scored s' >= s} r~[i, s']

and every step (scored or not) takes the sum from its own step on: a step without a reward of its
own gets the advantage of the next scored step. ``A[i, s]`` goes on every sampled token of step
``s`` in every segment of trajectory ``i``; loss, aggregation modes, KL, budgets and metrics are
the group trainer's (``algos.steps.StepTrainer``).

Outcome-only rewards (``reward_mode=outcome``: every turn but the last has reward 0) leave one
scored step per trajectory holding ``R_i``: mean and std are GRPO's and every token gets GRPO's
``A_i`` (this method then equals ``algo=grpo``). A zero intermediate reward is not a score in
this harness (the envs' process rewards are bonuses), hence "non-zero" above.

Fields read from ``algo`` beyond the base ``Trainer``'s: ``std``, ``adv_eps``, ``dynamic_sampling``
(its config schema :class:`GrpoProcessConfig` extends GRPO's).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from algos import metric_keys as mk
from algos.advantages import process_group_advantages
from algos.grpo import GrpoConfig
from algos.registry import register
from algos.steps import StepInputs, StepTrainer


@dataclass
class GrpoProcessConfig(GrpoConfig):
    """Process-supervised GRPO (DeepSeekMath 4.1.3): step rewards normalised over the group, each
    token's advantage = sum of its own and later steps'."""


def scored_steps(rewards: Tensor, mask: Tensor) -> Tensor:
    """``[N, S]`` bool: real steps with a non-zero reward, plus each row's last real step."""
    last = torch.zeros_like(mask)
    counts = mask.sum(1)
    rows = torch.nonzero(counts > 0, as_tuple=True)[0]
    last[rows, counts[rows] - 1] = True
    return mask & ((rewards != 0) | last)


def fill_from_next_scored(adv: Tensor, scored: Tensor, mask: Tensor) -> Tensor:
    """``out[i, s] = adv[i, next(s)]`` with ``next(s)`` the first scored step ``>= s`` of row
    ``i``, on real steps (0 elsewhere). Every real step has one: the row's last step is scored."""
    s = adv.shape[1]
    idx = torch.where(scored, torch.arange(s).expand_as(scored), torch.full_like(scored, s, dtype=torch.long))
    nxt = torch.flip(torch.cummin(torch.flip(idx, [1]), 1).values, [1]).clamp(max=max(s - 1, 0))
    filled = torch.gather(adv, 1, nxt) if s else adv
    return torch.where(mask, filled, torch.zeros_like(filled))


@register("grpo_process", trainer=StepTrainer, step_rewards=True, config=GrpoProcessConfig)
def process_estimator(steps: StepInputs, algo) -> tuple[Tensor, dict]:
    """``A [N, S]``: the group-normalised rewards of the scored steps, summed from each step on;
    metric ``train/scored_step_frac``."""
    scored = scored_steps(steps.rewards, steps.mask)
    adv = process_group_advantages(steps.rewards, scored, steps.group_ids, std=algo.std, eps=algo.adv_eps)
    real = int(steps.mask.sum())
    return fill_from_next_scored(adv, scored, steps.mask), {
        mk.TRAIN_SCORED_STEP_FRAC: int(scored.sum()) / real if real else 0.0}


__all__ = ["GrpoProcessConfig", "fill_from_next_scored", "process_estimator", "scored_steps"]
