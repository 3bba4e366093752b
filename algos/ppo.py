"""Critic-based PPO with a token-level loss (the document's GLM-5.2 note) and GAE across segments.

Decision points (``algos.advantages.VALUE_LEVELS[algo.value_level]``): every sampled token
(``token``) or the first sampled token of each tool call (``turn``: one value per turn). Every
sampled token belongs to the last decision point at or before it; a point's reward is the sum of
its tokens' rewards and its advantage is broadcast back to them.
The value of a decision point at token index ``c`` is read at ``c - 1`` (the position that precedes
it; for the first token of an action that is the ``[SEP]`` closing the observation).

Each trajectory's decision points, over ALL its segments, are laid out in one row and fed to
``algos.advantages.gae`` with:
  rewards      each turn's reward on the point owning its last sampled token
  next_values  the value of the next decision point in the row. Inside a segment that is the next
               token's state; at a compression boundary it is the value of the compressed context
               the episode actually continued from (the ``[SEP]`` ending ``[BOS] summary [SEP]`` of
               the next segment), with neither flag set: the recursion continues (C16/C17)
  terminated   on the trajectory's last point when the task ended: no bootstrap
  truncated    on the last point when an outside limit cut it: bootstrap from V(next state) read at
               the ``[SEP]`` after the final observation; the recursion stops

Two trace decays (``algos.advantages.decoupled_gae``, VC-PPO): the actor's advantages use
``algo.lam``, or with ``algo.lam_alpha`` each trajectory's length-adaptive
``clamp(1 - 1 / (lam_alpha * l), 0, 1)`` (``l`` its decision points over all its segments,
``algos.advantages.length_adaptive_lam``); the critic's targets are the GAE returns at
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

Fields read from ``algo`` beyond the base ``Trainer``'s: ``gamma``, ``lam``, ``critic_lam``, ``lam_alpha``,
``critic_lr``, ``vf_coef``, ``value_clip``, ``value_warmup_updates``, ``critic_epochs``, ``norm_adv``, ``value_level``
(no GRPO field: no ``std``, ``adv_eps``, ``dynamic_sampling``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
from torch import Tensor

from algos.advantages import VALUE_LEVELS, decoupled_gae, discounted_returns, length_adaptive_lam, pick
from algos.batch import Batch, action_layout
from algos.losses import aggregate, aggregation_weights, value_loss
from algos.metrics import explained_variance
from algos.policy import shift_values
from algos.registry import register
from algos.trainer import Advantages, Trainer, UpdateInputs
from envs import LONG_HORIZON_V3


@dataclass
class GAELayout:
    """Each trajectory's decision points over ALL its segments as one row: the ``[N, L]`` inputs
    of ``algos.advantages.gae`` (``N`` trajectories, ``L`` the most points of any of them)."""

    rows: Tensor  # [N, L] long, batch row of trajectory i's k-th point (0 where mask is False)
    cols: Tensor  # [N, L] long, its token index
    mask: Tensor  # [N, L] bool, real points
    rewards: Tensor  # [N, L] sum of the rewards of the point's tokens
    values: Tensor  # [N, L] V(state the point's token was chosen in), read at cols - 1
    next_values: Tensor  # [N, L] V of the state after the point (see the module docstring)
    terminated: Tensor  # [N, L] bool, on the last point of a trajectory whose task ended
    truncated: Tensor  # [N, L] bool, on the last point of one an outside limit cut
    owner: Tensor  # [R, T] long, k of the point each sampled token belongs to (trajectory row_traj[r]); -1 elsewhere


def _owners(batch: Batch, rows: Tensor, cols: Tensor, mask: Tensor) -> Tensor:
    """``owner [R, T]``: for a sampled token, the index ``k`` (in its trajectory's layout row) of
    the last decision point at or before it; -1 for env-written tokens and padding."""
    points = torch.zeros(batch.tokens.shape, dtype=torch.long)
    points[rows[mask], cols[mask]] = 1
    per_row = points.sum(1)
    before = torch.cumsum(per_row, 0) - per_row  # points in all earlier rows
    first_row = torch.full((len(batch.trajectories),), batch.num_rows, dtype=torch.long)
    first_row = first_row.scatter_reduce(0, batch.row_traj, torch.arange(batch.num_rows), "amin")
    offset = before - before[first_row[batch.row_traj]]  # points in earlier rows of the same trajectory
    owner = offset[:, None] + torch.cumsum(points, 1) - 1
    return torch.where(batch.action_mask > 0, owner, torch.full_like(owner, -1))


def gae_layout(batch: Batch, raw_values: Tensor, level: str = "token") -> GAELayout:
    """The GAE inputs of ``batch`` at decision-point level ``level`` (``VALUE_LEVELS``).

    ``raw_values [R, T]`` is the critic output at each position (value of the prefix ending
    there). Compressions carry neither flag (bootstrap from the next segment's first value, the
    recursion continues); the trajectory's last point is ``terminated`` (next value 0) or
    ``truncated`` (next value read at the segment's ``bootstrap_index``, 0 if it has none)."""
    rows, cols, mask = action_layout(batch, level)
    n, length = mask.shape
    values = raw_values[rows, (cols - 1).clamp(min=0)] * mask
    owner = _owners(batch, rows, cols, mask)
    r_idx, t_idx = torch.nonzero(owner >= 0, as_tuple=True)
    rewards = torch.zeros(n, length).index_put_(
        (batch.row_traj[r_idx], owner[r_idx, t_idx]), batch.rewards[r_idx, t_idx], accumulate=True) * mask
    next_values = torch.zeros(n, length)
    next_values[:, :-1] = values[:, 1:]
    terminated = torch.zeros(n, length, dtype=torch.bool)
    truncated = torch.zeros(n, length, dtype=torch.bool)
    counts = mask.sum(1)
    last_row_of: dict[int, int] = {}
    for row in range(batch.num_rows):
        last_row_of[int(batch.row_traj[row])] = row
    for i, traj in enumerate(batch.trajectories):
        k = int(counts[i]) - 1
        if k < 0:
            continue
        last_row = last_row_of[i]
        if traj.terminated:
            terminated[i, k] = True
            next_values[i, k] = 0.0
        else:
            truncated[i, k] = True
            b = int(batch.bootstrap_index[last_row])
            next_values[i, k] = raw_values[last_row, b] if b >= 0 else 0.0
    return GAELayout(rows=rows, cols=cols, mask=mask, rewards=rewards, values=values, next_values=next_values,
                     terminated=terminated, truncated=truncated, owner=owner)


def at_points(flat: Tensor, layout: GAELayout, batch: Batch) -> Tensor:
    """``[N, L]`` per decision point -> ``[R, T]`` at the points' token positions (0 elsewhere)."""
    out = torch.zeros(batch.tokens.shape, dtype=flat.dtype)
    m = layout.mask
    out[layout.rows[m], layout.cols[m]] = flat[m]
    return out


def on_sampled_tokens(flat: Tensor, layout: GAELayout, batch: Batch) -> Tensor:
    """``[N, L]`` per decision point -> ``[R, T]`` on every sampled token, from the point it
    belongs to (``layout.owner``); 0 on env-written tokens and padding."""
    out = torch.zeros(batch.tokens.shape, dtype=flat.dtype)
    r_idx, t_idx = torch.nonzero(layout.owner >= 0, as_tuple=True)
    out[r_idx, t_idx] = flat[batch.row_traj[r_idx], layout.owner[r_idx, t_idx]]
    return out


@register("ppo", critic=True)
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
        """``(lam_actor, lam_critic)``: ``algo.lam`` or the length-adaptive ``[N]`` lambda of each
        trajectory (``algo.lam_alpha``; its decision points over all its segments), and
        ``algo.critic_lam`` (null: ``algo.lam``)."""
        algo = self.algo
        actor = algo.lam if algo.lam_alpha is None else length_adaptive_lam(layout.mask.sum(1), algo.lam_alpha)
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
            metrics["train/lam_actor_mean"] = float(lam_actor[layout.mask.any(1)].mean())
        return Advantages(tokens=tok_adv * m, returns=at_points(ret, layout, batch),
                          value_mask=at_points(layout.mask.float(), layout, batch), old_values=shift_values(raw),
                          layout=layout, point_advantages=adv, point_returns=ret, metrics=metrics)

    def gae_inputs(self, batch: Batch, raw_values: Tensor) -> GAELayout:
        """The GAE inputs of the update (:func:`gae_layout`; compressions continue the recursion)."""
        return gae_layout(batch, raw_values, self.algo.value_level)

    def _critic_metrics(self, batch: Batch, layout: GAELayout, adv: Tensor, ret: Tensor) -> dict:
        """Before fitting: mean value / return / |advantage| at the points, and the held-out EV of
        the critic against the complete Monte Carlo returns of terminated trajectories."""
        m = layout.mask
        out = {"critic/value_mean": float(layout.values[m].mean()) if m.any() else 0.0,
               "critic/return_mean": float(ret[m].mean()) if m.any() else 0.0,
               "train/adv_abs_mean": float(adv[m].abs().mean()) if m.any() else 0.0}
        complete = torch.tensor([tr.terminated for tr in batch.trajectories], dtype=torch.bool)
        mc = discounted_returns(layout.rewards, layout.terminated, layout.truncated, gamma=self.algo.gamma, mask=m)
        held = m & complete[:, None]
        if held.sum() >= 2:
            out["critic/explained_variance_heldout"] = explained_variance(layout.values[held], mc[held])
            if self.algo.value_warmup_updates and self.updates_done == self.algo.value_warmup_updates:
                # the first batch after the warm-up: the pretrained critic on rollouts it never fitted
                out["critic/warmup_explained_variance_heldout"] = out["critic/explained_variance_heldout"]
        out["critic/heldout_points"] = int(held.sum())
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
        out = {"train/policy_frozen": float(self.policy_frozen())}
        vm = adv.value_mask > 0
        if vm.any():
            out["critic/explained_variance_in_batch"] = explained_variance(fitted_values[vm], adv.returns[vm])
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


@register("ppo_segment_terminal", critic=True, envs=(LONG_HORIZON_V3.name,))
class SegmentTerminalPPOTrainer(PPOTrainer):
    """PPO with every compression boundary labelled terminal (``segment_end_as_terminal``): the
    boundary setting the document's C17 example rules out (a compression is a continuation, so V
    of the compressed context is bootstrapped). A named method only to measure what that mistake
    costs in training; otherwise identical to ``ppo``."""

    def gae_inputs(self, batch: Batch, raw_values: Tensor) -> GAELayout:
        return segment_end_as_terminal(super().gae_inputs(batch, raw_values))


@register("ppo_long", critic=True)
class LongPPOTrainer(PPOTrainer):
    """Critic-based PPO as the long-sequence literature runs it (VC-PPO, VAPO): decoupled GAE
    (Monte Carlo critic targets, ``algo.critic_lam = 1``), a length-adaptive actor lambda
    (``algo.lam_alpha``), value pretraining on the start policy's rollouts inside the budget
    (``algo.value_warmup_updates``), and a critic that learns faster than the actor
    (``algo.critic_lr``, ``algo.critic_epochs``). The estimator and losses are ``ppo``'s; the
    method is its defaults (``experiments.runtime.schema.PpoLongConfig``)."""


__all__ = ["GAELayout", "LongPPOTrainer", "PPOTrainer", "SegmentTerminalPPOTrainer", "VALUE_LEVELS", "at_points", "compression_boundaries",
           "gae_layout", "on_sampled_tokens", "segment_end_as_terminal", "terminal_at"]
