"""The critic-free grouped-value estimator: state values from the group's own rollouts where a
state recurs, then GAE over decisions (the 2026 critic-free state-value methods), a step estimator
of ``algos.steps.StepTrainer``.

Within a group (the G rollouts of one task instance) the value of the state a step was taken in
is the mean return-to-go of every visit to that state (its anchor ``Turn.state_key``, reached at
any turn by any member), and the group's mean return where the state is seen once; the advantage
is GAE over the trajectory's steps on those values (``algos.advantages.grouped_value_advantages``):

    V[i, s] = mean of G over the visits of (i, s)'s state     (else mean_j G[j, 0] over the group)
    delta   = r + gamma V[i, s + 1] - V[i, s],   A = sum_l (gamma lam)^l delta[i, s + l]

optionally standardised over the group's steps (``algo.normalise=group``). With ``lam = 1`` and no
recurring state it is GRPO's centred outcome on every step; with ``lam = 0`` each step is judged by
the one-step change of the state value. A compression boundary neither cuts the returns nor the
recursion (a step is a turn, over all segments).

Metrics: ``train/step_groups`` (states visited at least twice in their group) and
``train/anchor_hit_rate`` (share of real steps whose state recurs: the steps with a value of their
own), as GiGPO logs them; ``train/state_value_ev_heldout``, the explained variance of the
returns-to-go by the values computed without each step's own trajectory
(``held_out_state_values``: the other members' visits), the value quality a critic's
``critic/explained_variance_heldout`` compares with (NaN when the returns do not vary).

Fields read from ``algo`` beyond the base ``Trainer``'s: ``gamma``, ``lam``, ``normalise``,
``std``, ``adv_eps``, ``dynamic_sampling``: its config schema :class:`GroupedValueConfig` (GRPO's
plus ``gamma``, ``lam`` and ``normalise``).
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor

from algos import metric_keys as mk
from algos.advantages import (GROUPED_VALUE_NORMS, discounted_returns, grouped_value_advantages,
                              held_out_state_values, step_group_counts)
from algos.configs import ConfigError, check_choice
from algos.grpo import GrpoConfig
from algos.metrics import explained_variance
from algos.registry import register
from algos.steps import StepInputs, StepTrainer


@dataclass
class GroupedValueConfig(GrpoConfig):
    """State values from the group's visits to each state, GAE over steps on them."""

    # discount and trace decay of the GAE over steps
    gamma: float = 1.0
    lam: float = 0.95
    # none | group: standardise the advantages over every step of the group
    normalise: str = "group"

    def __post_init__(self) -> None:
        super().__post_init__()
        if not (0 <= self.gamma <= 1 and 0 <= self.lam <= 1):
            raise ConfigError(f"algo.gamma={self.gamma} and algo.lam={self.lam} must be in [0, 1]")
        check_choice("algo.normalise", self.normalise, list(GROUPED_VALUE_NORMS))


@register("grouped_value", trainer=StepTrainer, config=GroupedValueConfig)
def grouped_value_estimator(steps: StepInputs, algo) -> tuple[Tensor, dict]:
    """``A [N, S]``: GAE over steps on the grouped state values; metrics ``train/step_groups`` and
    ``train/anchor_hit_rate``."""
    adv, _ = grouped_value_advantages(steps.rewards, steps.mask, steps.group_ids, steps.anchors, steps.terminated,
                                      steps.truncated, gamma=algo.gamma, lam=algo.lam, normalise=algo.normalise,
                                      std=algo.std, eps=algo.adv_eps)
    n_groups, sizes = step_group_counts(steps.group_ids, steps.mask, steps.anchors)
    real = int(steps.mask.sum())
    hits = int(((sizes >= 2) & steps.mask).sum())
    returns = discounted_returns(steps.rewards, steps.terminated, steps.truncated, gamma=algo.gamma, mask=steps.mask)
    held_out, defined = held_out_state_values(returns, steps.mask, steps.group_ids, steps.anchors)
    return adv, {mk.TRAIN_STEP_GROUPS: n_groups, mk.TRAIN_ANCHOR_HIT_RATE: hits / real if real else 0.0,
                 mk.TRAIN_STATE_VALUE_EV_HELDOUT: explained_variance(held_out, returns, defined)}


__all__ = ["GroupedValueConfig", "grouped_value_estimator"]
