"""Critic-based PPO with a token-level loss (as GLM-5.2's critic-based PPO, docs/claims.md) and GAE across segments.

Decision points (``algos.decisions``; ``algo.value_level`` picks ``token`` or ``turn`` from
``algos.advantages.VALUE_LEVELS``): each trajectory's points over ALL its segments form one row,
fed to ``algos.advantages.gae`` as ``algos.decisions.gae_layout`` lays them out (a compression
boundary continues the recursion and bootstraps from the compressed context, C16/C17; the last
point is terminated or truncated). Each point's advantage is broadcast back to its tokens.

Two trace decays (``algos.advantages.decoupled_gae``, VC-PPO): the actor's advantages use
``algo.lam``, or with ``algo.lam_alpha`` each trajectory's length-adaptive
``clamp(1 - 1 / (lam_alpha * l), 0, 1)`` (``l`` its decision points over all its segments,
``algos.advantages.length_adaptive_lam``), or with ``algo.lam_q`` its relative-position
``lam_q ** (1 / (l - 1))`` (the first decision keeps ``lam_q`` of the outcome at every length,
``algos.advantages.relative_position_lam``); the critic's targets are the GAE returns at
``algo.critic_lam`` (null: ``algo.lam``; 1.0: Monte Carlo returns, bootstrapped only at a
truncation). The boundary rules above hold for both. With both knobs null the two are one GAE.

Value loss: clipped (``algo.value_clip``) squared error against the critic's targets at the
points, aggregated like the policy loss; ``algo.critic_lr`` gives the critic's parameters (the value
head, or the separate critic) their own learning rate. ``algo.value_warmup_updates``: the first
updates are value pretraining on the rollouts of the start policy: no policy term (clipped loss,
entropy bonus, KL) enters the loss, and a value head does not move the shared trunk, so only the
critic's parameters get a gradient. Their rollouts count on every compute axis like any update's
(the learner counts them, ``compute/warmup_rollouts`` separately too). The first update after them
logs the held-out EV of the pretrained critic (below) as ``critic/warmup_explained_variance_heldout``:
its batch is the first one the pretraining never fitted. ``algo.critic_epochs``: after the
``algo.epochs`` joint passes, that many more passes over the batch (same minibatches) with only the
value loss and only the critic's forward, against the same targets and clip reference (the returns
and old values of ``advantages``).

Diagnostics (C20): ``critic/explained_variance_heldout`` is the explained variance of the critic's predictions on
this batch BEFORE it is fitted on it, against the complete Monte Carlo returns of terminated
trajectories (rollouts not used in fitting); ``critic/explained_variance_in_batch`` compares the fitted values
with the GAE returns they were trained on.

Fields read from ``algo`` beyond the base ``Trainer``'s: ``gamma``, ``lam``, ``critic_lam``, ``lam_alpha``, ``lam_q``,
``critic_lr``, ``vf_coef``, ``value_clip``, ``value_warmup_updates``, ``critic_epochs``, ``norm_adv``, ``value_level``
(no GRPO field: no ``std``, ``adv_eps``, ``dynamic_sampling``): the config schema :class:`PpoConfig`,
registered with :class:`PPOTrainer`; the variants' schemas (:class:`PpoSegmentTerminalConfig`,
:class:`PpoLongConfig`) extend it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Optional

import torch
from torch import Tensor

from algos import metric_keys as mk
from algos.advantages import (VALUE_LEVELS, decoupled_gae, discounted_returns, length_adaptive_lam,
                              relative_position_lam)
from algos.batch import Batch
from algos.checks import pick
from algos.configs import AlgoConfig, ConfigError, check_at_least, check_choice
from algos.decisions import GAELayout, at_points, gae_layout, on_sampled_tokens
from algos.losses import aggregate, aggregation_weights, value_loss
from algos.metrics import explained_variance
from algos.policy import shift_values
from algos.registry import register
from algos.trainer import Trainer
from algos.update import Advantages, UpdateInputs


@dataclass
class PpoConfig(AlgoConfig):
    """Critic-based PPO: token-level clipped loss, GAE over action positions across segments, a
    value loss."""

    # rollouts per task instance (1 = classic PPO)
    group_size: int = 1
    # GAE discount and trace decay (per decision point)
    gamma: float = 1.0
    lam: float = 0.95
    # trace decay of the critic's return targets (null = lam; 1.0 = Monte Carlo returns, VC-PPO)
    critic_lam: Optional[float] = None
    # actor lambda per trajectory clamp(1 - 1/(lam_alpha * l), 0, 1), l = its decision points (null = lam)
    lam_alpha: Optional[float] = None
    # actor lambda per trajectory lam_q ** (1/(l - 1)): the first of l decision points keeps lam_q of
    # the outcome at every length (null = lam_alpha's rule, or lam); set at most one of the two
    lam_q: Optional[float] = None
    # learning rate of the critic's parameters (separate critic or value head; null = lr)
    critic_lr: Optional[float] = None
    # value loss coefficient and clip (null = unclipped)
    vf_coef: float = 0.5
    value_clip: Optional[float] = 0.2
    # updates that train only the critic before the policy moves (value pretraining; its rollouts count)
    value_warmup_updates: int = 0
    # critic-only passes over each batch after the `epochs` joint ones (more critic fitting per
    # rollout; costs a critic forward + backward per pass)
    critic_epochs: int = 0
    # whiten advantages over the batch's action tokens
    norm_adv: bool = True
    # token: a value per sampled token | turn: one value per tool call
    value_level: str = "token"

    def __post_init__(self) -> None:
        super().__post_init__()
        check_choice("algo.value_level", self.value_level, list(VALUE_LEVELS))
        if not (0 <= self.gamma <= 1 and 0 <= self.lam <= 1):
            raise ConfigError(f"algo.gamma={self.gamma} and algo.lam={self.lam} must be in [0, 1]")
        if self.value_clip is not None and self.value_clip <= 0:
            raise ConfigError(f"algo.value_clip={self.value_clip} must be > 0 (or null to disable)")
        if self.critic_lam is not None and not 0 <= self.critic_lam <= 1:
            raise ConfigError(f"algo.critic_lam={self.critic_lam} must be in [0, 1] (or null to use algo.lam)")
        if self.lam_alpha is not None and not (math.isfinite(self.lam_alpha) and self.lam_alpha > 0):
            raise ConfigError(f"algo.lam_alpha={self.lam_alpha} must be a finite number > 0 (or null to use algo.lam)")
        if self.lam_q is not None and not 0 < self.lam_q <= 1:
            raise ConfigError(f"algo.lam_q={self.lam_q} must be a number in (0, 1] (or null)")
        if self.lam_q is not None and self.lam_alpha is not None:
            raise ConfigError(f"algo.lam_q={self.lam_q} and algo.lam_alpha={self.lam_alpha} both set; allowed: one "
                              "actor lambda rule (set the other to null)")
        if self.critic_lr is not None and not (math.isfinite(self.critic_lr) and self.critic_lr > 0):
            raise ConfigError(f"algo.critic_lr={self.critic_lr} must be a finite number > 0 (or null to use algo.lr)")
        check_at_least("algo.value_warmup_updates", self.value_warmup_updates, 0)
        check_at_least("algo.critic_epochs", self.critic_epochs, 0)
        check_at_least("algo.vf_coef", self.vf_coef, 0)


@dataclass
class PpoSegmentTerminalConfig(PpoConfig):
    """PPO with every compression boundary labelled terminal (:class:`SegmentTerminalPPOTrainer`):
    the wrong boundary setting of claim C17, as a method variant for measuring its cost; the knobs
    are PPO's."""


@dataclass
class PpoLongConfig(PpoConfig):
    """PPO for long tasks (:class:`LongPPOTrainer`): PPO's estimator and losses with the
    long-sequence settings of VC-PPO / VAPO as defaults. :class:`PpoConfig` keeps one lambda for
    both roles, no pretraining and one learning rate (the reference row of naive PPO)."""

    # Monte Carlo return targets for the critic (decoupled GAE)
    critic_lam: Optional[float] = 1.0
    # actor lambda per trajectory 1 - 1/(1.5 l): about e^(-2/3) = 0.51 of the outcome reaches
    # the first of l decision points at every length (0.95 leaves 0.95^l)
    lam_alpha: Optional[float] = 1.5
    # 2 critic-only updates on the start policy's rollouts (counted in the budget)
    value_warmup_updates: int = 2
    # the critic learns at twice the actor's default rate (3e-4), with one more critic-only pass
    # per update
    critic_lr: Optional[float] = 6e-4
    critic_epochs: int = 1


@register("ppo", critic=True, config=PpoConfig)
class PPOTrainer(Trainer):
    def __init__(self, algo, policy, critic=None, reference=None, temperature=1.0, meter=None) -> None:
        super().__init__(algo, policy, critic, reference, temperature, meter)
        if critic is None and policy.value_head is None:
            raise ValueError("algo=ppo needs a critic: set policy.critic=head or policy.critic=separate")
        pick(VALUE_LEVELS, "algo.value_level", algo.value_level)

    def policy_frozen(self) -> bool:
        return self.updates_done < self.algo.value_warmup_updates

    def critic_epochs(self) -> int:
        return self.algo.critic_epochs

    def critic_lr(self) -> float | None:
        return self.algo.critic_lr

    def lambdas(self, layout: GAELayout) -> tuple[float | Tensor, float]:
        """``(lam_actor, lam_critic)``: ``algo.lam``, or the ``[N]`` lambda of each trajectory from
        its decision points over all its segments (``algo.lam_q``: relative-position;
        ``algo.lam_alpha``: length-adaptive), and ``algo.critic_lam`` (null: ``algo.lam``)."""
        algo = self.algo
        points = layout.mask.sum(1)
        if getattr(algo, "lam_q", None) is not None:
            actor = relative_position_lam(points, algo.lam_q)
        else:
            actor = algo.lam if algo.lam_alpha is None else length_adaptive_lam(points, algo.lam_alpha)
        return actor, algo.lam if algo.critic_lam is None else algo.critic_lam

    def advantages(self, batch: Batch, inputs: UpdateInputs) -> Advantages:
        """GAE over each trajectory's decision points (``decoupled_gae``: the actor's and the
        critic's lambdas); token advantages on the loss tokens (normalised over them with
        ``algo.norm_adv``), value targets and mask at the points, and the critic's pre-fit
        diagnostics in ``metrics``."""
        algo = self.algo
        raw = inputs.old_values
        if raw is None:
            raise ValueError("PPO advantages need inputs.old_values (the critic's outputs before the update)")
        layout = self.gae_inputs(batch, raw)
        lam_actor, lam_critic = self.lambdas(layout)
        adv, ret = decoupled_gae(layout.rewards, layout.values, layout.next_values, layout.terminated,
                                 layout.truncated, gamma=algo.gamma, lam_actor=lam_actor, lam_critic=lam_critic,
                                 mask=layout.mask)
        tok_adv = on_sampled_tokens(adv, layout, batch)
        m = inputs.loss_mask > 0
        if algo.norm_adv and m.any():
            sel = tok_adv[m]
            tok_adv = torch.where(m, (tok_adv - sel.mean()) / (sel.std(unbiased=False) + 1e-8), torch.zeros_like(tok_adv))
        metrics = self._critic_metrics(batch, layout, adv, ret)
        if isinstance(lam_actor, Tensor) and layout.mask.any():
            metrics[mk.TRAIN_LAM_ACTOR_MEAN] = float(lam_actor[layout.mask.any(1)].mean())
        return Advantages(tokens=tok_adv * m, returns=at_points(ret, layout, batch),
                          value_mask=at_points(layout.mask.float(), layout, batch), old_values=shift_values(raw),
                          layout=layout, point_advantages=adv, point_returns=ret, metrics=metrics)

    def gae_inputs(self, batch: Batch, raw_values: Tensor) -> GAELayout:
        """The GAE inputs of the update (``algos.decisions.gae_layout``; compressions continue the recursion)."""
        return gae_layout(batch, raw_values, self.algo.value_level)

    def _critic_metrics(self, batch: Batch, layout: GAELayout, adv: Tensor, ret: Tensor) -> dict:
        """Before fitting: mean value / return / |advantage| at the points, and the held-out EV of
        the critic against the complete Monte Carlo returns of terminated trajectories."""
        m = layout.mask
        out = {mk.CRITIC_VALUE_MEAN: float(layout.values[m].mean()) if m.any() else 0.0,
               mk.CRITIC_RETURN_MEAN: float(ret[m].mean()) if m.any() else 0.0,
               mk.TRAIN_ADV_ABS_MEAN: float(adv[m].abs().mean()) if m.any() else 0.0}
        complete = torch.tensor([tr.terminated for tr in batch.trajectories], dtype=torch.bool)
        mc = discounted_returns(layout.rewards, layout.terminated, layout.truncated, gamma=self.algo.gamma, mask=m)
        held = m & complete[:, None]
        if held.sum() >= 2:
            out[mk.CRITIC_EXPLAINED_VARIANCE_HELDOUT] = explained_variance(layout.values[held], mc[held])
            if self.algo.value_warmup_updates and self.updates_done == self.algo.value_warmup_updates:
                # the first batch after the warm-up: the pretrained critic on rollouts it never fitted
                out[mk.CRITIC_WARMUP_EXPLAINED_VARIANCE_HELDOUT] = out[mk.CRITIC_EXPLAINED_VARIANCE_HELDOUT]
        out[mk.CRITIC_HELDOUT_POINTS] = int(held.sum())
        return out

    def loss_weights(self, mb, batch: Batch, inputs: UpdateInputs, adv: Advantages) -> dict:
        w = super().loss_weights(mb, batch, inputs, adv)
        w["value"] = aggregation_weights(adv.value_mask[mb], self.algo.loss_agg, traj_ids=batch.row_traj[mb])
        return w

    def critic_loss(self, rows, values, adv: Advantages, weights: dict) -> tuple[Tensor, float]:
        """``vf_coef * L_V`` with ``L_V = aggregate(value_loss(V, V_old, R, value_clip), w_value)``
        over the slice's decision points; logs ``L_V``."""
        algo = self.algo
        v = shift_values(values)
        width = v.shape[1]  # the slice's columns (rows trimmed to their longest)
        vmask = adv.value_mask[rows, :width] > 0
        vl = value_loss(v, adv.old_values[rows, :width], adv.returns[rows, :width], algo.value_clip)
        loss_v = aggregate(torch.where(vmask, vl, torch.zeros_like(vl)), weights["value"])
        return algo.vf_coef * loss_v, loss_v.item()

    def fit_metrics(self, batch: Batch, adv: Advantages, fitted_values) -> dict:
        """In-batch EV: the last epoch's fitted values vs the GAE returns they were trained on."""
        out = {mk.TRAIN_POLICY_FROZEN: float(self.policy_frozen())}
        vm = adv.value_mask > 0
        if vm.any():
            out[mk.CRITIC_EXPLAINED_VARIANCE_IN_BATCH] = explained_variance(fitted_values[vm], adv.returns[vm])
        return out


def compression_boundaries(rows: Tensor, mask: Tensor) -> Tensor:
    """``[n, 2]`` (trajectory, point) of the last decision point of every segment a compression
    ended, from a GAE layout's ``rows`` / ``mask``: a point whose successor in the trajectory's
    row lies in another batch row (a trajectory's segments are separate rows; its last point has
    no successor)."""
    return torch.nonzero(mask[:, 1:] & (rows[:, 1:] != rows[:, :-1]), as_tuple=False)


def terminal_at(terminated: Tensor, next_values: Tensor, at: Tensor) -> tuple[Tensor, Tensor]:
    """Copies of a GAE layout's ``terminated`` / ``next_values`` with the points ``at [n, 2]``
    labelled terminal and their next value 0."""
    terminated, next_values = terminated.clone(), next_values.clone()
    terminated[at[:, 0], at[:, 1]] = True
    next_values[at[:, 0], at[:, 1]] = 0.0
    return terminated, next_values


def segment_end_as_terminal(layout: GAELayout) -> GAELayout:
    """A copy of ``layout`` with every compression boundary labelled ``terminated`` and its next
    value 0: each segment is then its own episode, ended with the rewards it holds."""
    terminated, next_values = terminal_at(layout.terminated, layout.next_values,
                                          compression_boundaries(layout.rows, layout.mask))
    return replace(layout, terminated=terminated, next_values=next_values)


@register("ppo_segment_terminal", critic=True, compression=True, config=PpoSegmentTerminalConfig)
class SegmentTerminalPPOTrainer(PPOTrainer):
    """PPO with every compression boundary labelled terminal (``segment_end_as_terminal``): the
    boundary setting claim C17's example (docs/claims.md) rules out (a compression is a continuation, so V
    of the compressed context is bootstrapped). A named method only to measure what that mistake
    costs in training; otherwise identical to ``ppo``."""

    def gae_inputs(self, batch: Batch, raw_values: Tensor) -> GAELayout:
        return segment_end_as_terminal(super().gae_inputs(batch, raw_values))


@register("ppo_long", critic=True, config=PpoLongConfig)
class LongPPOTrainer(PPOTrainer):
    """Critic-based PPO as the long-sequence literature runs it (VC-PPO, VAPO): decoupled GAE
    (Monte Carlo critic targets, ``algo.critic_lam = 1``), a length-adaptive actor lambda
    (``algo.lam_alpha``), value pretraining on the start policy's rollouts inside the budget
    (``algo.value_warmup_updates``), and a critic that learns faster than the actor
    (``algo.critic_lr``, ``algo.critic_epochs``). The estimator and losses are ``ppo``'s; the
    method is its defaults (:class:`PpoLongConfig`)."""


__all__ = ["LongPPOTrainer", "PPOTrainer", "PpoConfig", "PpoLongConfig", "PpoSegmentTerminalConfig",
           "SegmentTerminalPPOTrainer", "VALUE_LEVELS", "compression_boundaries", "segment_end_as_terminal", "terminal_at"]
