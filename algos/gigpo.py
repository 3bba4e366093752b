"""GiGPO: GRPO's episode-level advantage plus a step-level one from step groups (anchor states), a
step estimator of ``algos.steps.StepTrainer``.

Episode level: ``A_E[i]`` is GRPO's group-relative advantage of the outcome ``R_i``
(``Trajectory.train_reward``). Step level: the anchor of a step is ``Turn.state_key``, the env's
hash of the state the action was chosen in (``info["state_key"]`` of the reset or of the previous
step). The step group of step ``(i, s)`` is every step ``(j, s')`` of the same group (task
instance) with the same anchor, whichever member and turn reached it; over it

    G[i, s]   = sum_{s' >= s} gamma^(s' - s) r[i, s']                  (``algo.gamma``; per step)
    A_S[i, s] = (G[i, s] - mean_k G) / (std_k G + eps)                  (``algo.std``, ``algo.adv_eps``)
    A[i, s]   = A_E[i] + omega * A_S[i, s]                              (``algo.omega``)

(``algos.advantages.gigpo_advantages``; ``G`` from ``discounted_returns`` over the steps of all
segments: a compression does not cut the return). Singleton and constant step groups give
A_S = 0, so a step whose key is missing (-1: the env gives none) or never recurs gets A = A_E.
``A[i, s]`` goes on every sampled token of step ``s`` in every segment of trajectory ``i``; loss,
aggregation modes, KL, budgets and metrics are the group trainer's (``algos.steps.StepTrainer``).

Metrics: ``train/step_groups`` (step groups of size >= 2), ``train/anchor_hit_rate`` (share of real
steps whose step group has size >= 2: their state recurs in the group), ``train/adv_zero_frac``.

Fields read from ``algo`` beyond the base ``Trainer``'s: ``omega`` (finite, >= 0), ``gamma``
(in [0, 1]), ``std``, ``adv_eps``, ``dynamic_sampling``: its config schema :class:`GigpoConfig`
(GRPO's plus ``omega`` and ``gamma``).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

from torch import Tensor

from algos import metric_keys as mk
from algos.advantages import discounted_returns, gigpo_advantages, step_group_counts
from algos.configs import ConfigError
from algos.grpo import GrpoConfig
from algos.registry import register
from algos.steps import StepInputs, StepTrainer


@dataclass
class GigpoConfig(GrpoConfig):
    """GiGPO: episode group advantage + ``omega`` x step-group advantage of the discounted step
    returns (``gamma``), step groups = same group and same anchor state."""

    # weight of the step-level (anchor-state group) advantage
    omega: float = 1.0
    # discount of the per-step returns-to-go the step groups compare
    gamma: float = 0.95

    def __post_init__(self) -> None:
        super().__post_init__()
        if not (math.isfinite(self.omega) and self.omega >= 0):
            raise ConfigError(f"algo.omega={self.omega} must be a finite number >= 0")
        if not 0 <= self.gamma <= 1:
            raise ConfigError(f"algo.gamma={self.gamma} must be a number in [0, 1] (discount of the step returns)")


def check_omega(algo) -> float:
    """``algo.omega`` as a float; ``ValueError`` when it is missing or not a finite number >= 0."""
    omega = getattr(algo, "omega", None)
    if omega is None:
        raise ValueError("algo=gigpo needs algo.omega (weight of the step-level advantage, a number >= 0; "
                         "1.0 in the GiGPO paper)")
    if isinstance(omega, bool) or not isinstance(omega, numbers.Real) or not (omega >= 0 and math.isfinite(omega)):
        raise ValueError(f"algo.omega={omega!r} must be a finite number >= 0")
    return float(omega)


def check_gigpo(algo) -> None:
    """``ValueError`` unless ``algo.omega`` is a finite number >= 0 (:func:`check_omega`) and
    ``algo.gamma`` a number in [0, 1]."""
    check_omega(algo)
    if not (isinstance(algo.gamma, numbers.Real) and 0.0 <= algo.gamma <= 1.0):
        raise ValueError(f"algo.gamma={algo.gamma!r} must be a number in [0, 1] (discount of the step returns)")


@register("gigpo", trainer=StepTrainer, check=check_gigpo, config=GigpoConfig)
def gigpo_estimator(steps: StepInputs, algo) -> tuple[Tensor, dict]:
    """``A [N, S]`` = episode advantage + ``omega`` x step-group advantage of the discounted step
    returns; metrics ``train/step_groups`` and ``train/anchor_hit_rate``."""
    returns = discounted_returns(steps.rewards, steps.terminated, steps.truncated, gamma=algo.gamma,
                                 mask=steps.mask)
    adv = gigpo_advantages(steps.episode_rewards, steps.group_ids, returns, steps.mask, steps.anchors,
                           omega=float(algo.omega), std=algo.std, eps=algo.adv_eps)
    n_groups, sizes = step_group_counts(steps.group_ids, steps.mask, steps.anchors)
    real = int(steps.mask.sum())
    hits = int(((sizes >= 2) & steps.mask).sum())
    return adv, {mk.TRAIN_STEP_GROUPS: n_groups, mk.TRAIN_ANCHOR_HIT_RATE: hits / real if real else 0.0}


__all__ = ["GigpoConfig", "check_gigpo", "check_omega", "gigpo_estimator"]
