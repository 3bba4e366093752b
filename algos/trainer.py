"""The one Trainer interface both algorithms implement: an update as three typed steps.

``trainer.update(trajectories) -> metrics`` runs one policy update on freshly collected
trajectories and returns one ``train/*`` + ``critic/*`` metrics dict. It is

    prepared = trainer.prepare_batch(trajectories)      # -> (Batch, UpdateInputs) | None
    adv = trainer.advantages(batch, inputs)              # -> Advantages (GRPO: group-relative; PPO: GAE)
    metrics = trainer.optimize(batch, inputs, adv)       # epochs x minibatches x micro-batches

(``update_record`` runs the same and also returns the batch, inputs and advantages.)

1. ``prepare_batch`` drops masked trajectories (infra error / cancelled: no loss, no score; counted,
   never a 0) and those the algorithm's ``select`` leaves out (GRPO dynamic sampling), collates
   segments into rows (``algos.batch.collate``), and computes with no gradient the **old**
   log-probs (current weights at the sampling temperature: the baseline of this update), the old
   critic outputs and, with a KL term, the **reference** log-probs of the frozen start model. The
   **behavior** log-probs come from the sampler (``Batch.behavior_logp``) and are never overwritten.
2. ``advantages`` is the algorithm's (``algos.group.GroupTrainer`` and ``algos.steps.StepTrainer``
   running a registered estimator, ``algos.ppo.PPOTrainer``).
3. ``optimize``: loss aggregation weights computed ONCE per optimizer batch (``loss_weights``) and
   sliced for micro-batches, so accumulation equals one big batch; per slice the clipped policy
   loss with the ratio of ``RATIO_KINDS[algo.ratio]`` against the baseline and weight of
   ``algos.corrections.CORRECTIONS[algo.off_policy_correction]``, the KL to the reference, the entropy
   bonus, plus the algorithm's ``critic_loss`` (PPO's value loss).

Logged numbers do not depend on how the work is split: ``train/policy_loss`` and
``train/value_loss`` are the full loss of each optimizer step (the sum of its slices' weighted
shares), averaged over the steps; ``train/grad_norm`` is averaged over steps; the per-token
statistics ``entropy``, ``clip_frac``, ``ratio_mean``, ``approx_kl`` (``r - 1 - log r``,
``r = pi_new / pi_base``), ``kl_ref`` and ``is_weight`` are means over every loss token of every
forward of the update (weighted by the tokens they cover), so ``micro_batch_rows`` never changes
them.

Names are picked from registries (``algos.registry.TRAINERS``, ``algos.losses.RATIO_KINDS`` /
``algos.corrections.CORRECTIONS``, ``LR_SCHEDULES`` here); nothing here branches on a config string.
Fields read from ``algo`` by this base class (both algorithms): ``lr, lr_schedule, weight_decay,
epochs, minibatches, micro_batch_rows, max_grad_norm, clip_low, clip_high, dual_clip, ratio,
loss_agg, kl_coef, kl_kind, entropy_coef, off_policy_correction`` and ``CorrectionParams``' fields.
"""

from __future__ import annotations

import copy
import time

import torch
import torch.nn.functional as F
from torch import Tensor

from algos import metric_keys as mk
from algos.batch import Batch, Trajectory, budget_buckets, collate, row_lengths, shared_prefix_length
from algos.checks import pick
from algos.compute import ComputeMeter, attention_flops
from algos.corrections import CORRECTIONS, CorrectionParams, correct, mismatch_metrics
from algos.losses import (
    RATIO_KINDS,
    aggregate,
    aggregation_weights,
    approx_kl,
    kl_estimate,
    ppo_clip_loss,
)
from algos.metrics import signed_advantage_mass
from algos.backend import param_count
from algos.policy import PolicyModel, ValueModel, shift_values, token_logprobs
from algos.registry import TRAINERS, make_trainer, register
from algos.update import Advantages, ForwardOutput, UpdateInputs, UpdateRecord, UpdateStats

# learning-rate multiplier as a function of the fraction f in [0, 1] of the run's compute budget
# spent (so a schedule is the same for both methods at equal cost, and exact on resume)
LR_SCHEDULES = {
    "constant": lambda f: 1.0,
    "linear": lambda f: max(0.0, 1.0 - f),
}

# logged numbers that describe how the work was laid out (so they do depend on micro_batch_rows):
# real tokens / computed positions of the update's forwards
SPLIT_COST_KEYS = frozenset({mk.TRAIN_PADDING_EFFICIENCY})


class Trainer:
    """Base class: the shared update. ``algo`` is an algorithm config object (attributes listed
    in the module docstring); subclasses add ``advantages`` and optional hooks."""

    # take the old log-probs from epoch 0's forward when there is a single minibatch
    fuse_old_forward = False
    # the most padded positions one forward and backward hold (``policy.micro_batch_tokens``; None:
    # rows only): it slices the work, never changes the loss or the gradient
    micro_batch_tokens: int | None = None

    def __init__(
        self,
        algo,
        policy: PolicyModel,
        critic: ValueModel | None = None,
        reference: PolicyModel | None = None,
        temperature: float = 1.0,
        meter: ComputeMeter | None = None,
    ) -> None:
        pick(CORRECTIONS, "algo.off_policy_correction", algo.off_policy_correction)
        self._correction_params = CorrectionParams.of(algo)
        self._ratio = pick(RATIO_KINDS, "algo.ratio", algo.ratio)
        self._lr_multiplier = pick(LR_SCHEDULES, "algo.lr_schedule", algo.lr_schedule)
        self.algo = algo
        self.policy = policy
        self.critic = critic
        self.reference = reference
        self.temperature = temperature
        self.meter = meter if meter is not None else ComputeMeter()
        groups, self._base_lrs = optimizer_groups(policy, critic, algo.lr, self.critic_lr())
        self.optimizer = torch.optim.AdamW(groups, lr=algo.lr, weight_decay=algo.weight_decay,
                                           betas=(0.9, 0.95), eps=1e-8)
        self.n_policy = param_count(policy)
        self.n_critic = param_count(critic) if critic is not None else 0
        self.updates_done = 0
        # real / computed token positions of this update's forwards (train/padding_efficiency)
        self._positions = {"real": 0, "computed": 0}

    def set_budget_fraction(self, fraction: float) -> float:
        """Set the learning rates for the next update: each parameter group's base rate (``algo.lr``;
        the critic's group ``critic_lr()``) times ``LR_SCHEDULES[algo.lr_schedule](f)`` with ``f``
        the fraction of the compute budget spent before it. Returns the policy's rate."""
        multiplier = self._lr_multiplier(min(max(float(fraction), 0.0), 1.0))
        for group, base in zip(self.optimizer.param_groups, self._base_lrs):
            group["lr"] = base * multiplier
        return self.algo.lr * multiplier

    # ----- hooks ----------------------------------------------------------------------------
    def select(self, trajectories: list[Trajectory]) -> tuple[list[Trajectory], dict]:
        """Which (non-masked) trajectories enter the update, and metrics about the choice."""
        return trajectories, {}

    def advantages(self, batch: Batch, inputs: UpdateInputs) -> Advantages:
        raise NotImplementedError

    def loss_weights(self, mb: Tensor, batch: Batch, inputs: UpdateInputs, adv: Advantages) -> dict[str, Tensor]:
        """Aggregation weights ``[len(mb), T]`` of one optimizer batch (rows ``mb``), computed once
        on all of its rows and then sliced per micro-batch. ``"policy"`` weighs the
        policy/KL/entropy terms."""
        return {"policy": aggregation_weights(inputs.loss_mask[mb], self.algo.loss_agg, traj_ids=batch.row_traj[mb])}

    def critic_loss(self, rows: Tensor, values: Tensor | None, adv: Advantages,
                    weights: dict[str, Tensor]) -> tuple[Tensor, float] | None:
        """``(term added to the slice's loss, the slice's value-loss share for the log)`` from the
        critic outputs ``values [r, w]`` of the slice's forward (its rows ``rows`` trimmed to their
        first ``w = values.shape[1]`` columns, which hold all their real tokens), or None."""
        return None

    def policy_frozen(self) -> bool:
        """True while only the critic trains: no policy term enters the loss (PPO warm-up)."""
        return False

    def critic_lr(self) -> float | None:
        """The critic's own learning rate (its parameters' optimizer group), None: ``algo.lr``
        for every parameter in one group. Read once, when the optimizer is built."""
        return None

    def critic_epochs(self) -> int:
        """Critic-only passes over the batch after the ``algo.epochs`` joint ones (PPO's
        ``algo.critic_epochs``); 0 without a critic."""
        return 0

    def fit_metrics(self, batch: Batch, adv: Advantages, fitted_values: Tensor | None) -> dict:
        """Metrics of the fitted model; ``fitted_values [R, T]``: the critic's values (aligned to
        the token) from each row's forward in the last epoch, None without a value mask."""
        return {}

    # ----- the three steps --------------------------------------------------------------------
    def update(self, trajectories: list[Trajectory]) -> dict:
        """``prepare_batch`` -> ``advantages`` -> ``optimize``; one metrics dict. With nothing to
        train on, ``train/skipped = 1`` and no step. Either way the update counter advances."""
        return self.update_record(trajectories).metrics

    def update_record(self, trajectories: list[Trajectory]) -> UpdateRecord:
        """``update`` that also returns what the three steps produced (for diagnostics and claim
        measurements: the batch, the old / reference log-probs, the advantages, the GAE layout)."""
        t0 = time.perf_counter()
        prepared = self.prepare_batch(trajectories)
        if prepared is None:
            self.updates_done += 1
            return UpdateRecord(metrics={**self._selection(trajectories)[1], mk.TRAIN_SKIPPED: 1})
        batch, inputs = prepared
        adv = self.advantages(batch, inputs)
        metrics = {**inputs.metrics, **adv.metrics, **self.optimize(batch, inputs, adv)}
        self.updates_done += 1
        metrics[mk.TRAIN_UPDATE_SECONDS] = time.perf_counter() - t0
        return UpdateRecord(metrics=metrics, batch=batch, inputs=inputs, advantages=adv)

    def prepare_batch(self, trajectories: list[Trajectory]) -> tuple[Batch, UpdateInputs] | None:
        """Select, collate, and compute the no-grad inputs of the update (``UpdateInputs``).
        Returns None when no trajectory is left to train on. Raises ``ValueError`` when the
        trajectories were sampled at another temperature than the trainer recomputes at."""
        kept, metrics = self._selection(trajectories)
        if not kept:
            return None
        batch = collate(kept)
        self._positions = {"real": 0, "computed": 0}
        fuse = self.fuse_old_forward and self._n_minibatches(batch.num_rows) == 1
        old_values = None
        lengths = row_lengths(batch)
        # no-grad passes run on length buckets (rows of near-equal length, each trimmed to its own
        # longest row); the results are scattered back into [R, T] (0 on padding)
        buckets = self._buckets(batch.tokens, lengths, max(1, self.algo.micro_batch_rows))
        loss_mask = batch.action_mask.clone()
        want = loss_mask > 0
        value_at = value_positions(batch)
        with torch.no_grad():
            self.policy.eval()
            old_logp = torch.zeros_like(batch.behavior_logp)  # fused: filled by optimize's first epoch
            if not fuse:
                has_values = self.critic is not None or self.policy.value_head is not None
                old_values = torch.zeros_like(batch.behavior_logp) if has_values else None
                for idx in buckets:
                    width = int(lengths[idx].max())
                    tokens, at = batch.tokens[idx, :width], want[idx, :width]
                    out = self.forward_at(tokens, at, value_at=value_at[idx, :width])
                    old_logp[idx, :width] = token_logprobs(out.logits, tokens, at, self.temperature)[0]
                    if old_values is not None and out.values is not None:  # None: values come from elsewhere (ppo_ctde)
                        old_values[idx, :width] = out.values
                    self._count(batch, idx, train=False, width=width)
            ref_logp = None
            if self.reference is not None:
                ref_logp = torch.zeros_like(batch.behavior_logp)
                for idx in buckets:
                    width = int(lengths[idx].max())
                    tokens, at = batch.tokens[idx, :width], want[idx, :width]
                    ref_logits, _ = self.reference.forward_at(tokens, at)
                    ref_logp[idx, :width] = token_logprobs(ref_logits, tokens, at, self.temperature)[0]
                    self._count(batch, idx, train=False, model=self.reference, with_critic=False, width=width)
        inputs = UpdateInputs(old_logp=old_logp, ref_logp=ref_logp, loss_mask=loss_mask,
                              old_values=old_values, old_logp_from_first_epoch=fuse, metrics=metrics)
        return batch, inputs

    def _buckets(self, tokens: torch.Tensor, lengths: torch.Tensor, rows_cap: int) -> list[torch.Tensor]:
        """Length buckets of at most ``rows_cap`` rows and ``micro_batch_tokens`` positions each
        (:func:`algos.batch.budget_buckets`: a ``share_prefix`` policy's common prefix counts once)."""
        return budget_buckets(tokens, lengths, rows_cap, self.micro_batch_tokens,
                              getattr(self.policy, "share_prefix", False))

    def optimize(self, batch: Batch, inputs: UpdateInputs, adv: Advantages) -> dict:
        """``algo.epochs`` passes over the rows in ``algo.minibatches`` optimizer steps each (rows
        shuffled per epoch, seeded by the update counter), each step accumulated over slices of
        ``algo.micro_batch_rows`` rows. Fills ``inputs.old_logp`` when it comes from the first
        epoch. Returns the update's ``train/*`` (and the algorithm's) metrics."""
        algo = self.algo
        r = batch.num_rows
        n_mb = self._n_minibatches(r)
        micro = max(1, algo.micro_batch_rows)
        frozen = self.policy_frozen()
        stats = UpdateStats()
        fitted = torch.zeros(batch.tokens.shape) if adv.value_mask is not None else None
        lengths = row_lengths(batch)
        self._value_at = value_positions(batch)
        params = [p for g in self.optimizer.param_groups for p in g["params"]]
        gen = torch.Generator().manual_seed(1_000_003 * (self.updates_done + 1))
        n_epochs = algo.epochs + self.critic_epochs()
        self.policy.train()
        for epoch in range(n_epochs):
            # epochs past algo.epochs are critic-only passes: only the value loss, only the
            # critic's forward; their steps are logged as train/critic_pass_*
            critic_only = epoch >= algo.epochs
            fill_old = inputs.old_logp_from_first_epoch and epoch == 0
            keep_fit = fitted if epoch == n_epochs - 1 else None
            perm = torch.randperm(r, generator=gen) if n_mb > 1 else torch.arange(r)
            for mb in perm.chunk(n_mb):
                mb = mb.sort().values
                weights = self.loss_weights(mb, batch, inputs, adv)
                self.optimizer.zero_grad(set_to_none=True)
                # micro-batches: rows of near-equal length (at most ``micro`` rows each), each
                # trimmed to its longest row; weights were computed on the whole optimizer batch
                for idx in self._buckets(batch.tokens[mb], lengths[mb], micro):
                    rows = mb[idx]
                    width = int(lengths[rows].max())
                    w = {k: v[idx, :width] for k, v in weights.items()}
                    if critic_only:
                        loss = self._critic_slice_loss(rows, width, w, batch, adv, stats, keep_fit)
                    else:
                        loss = self._slice_loss(rows, width, w, batch, inputs, adv, stats, frozen, fill_old, keep_fit)
                    if loss.requires_grad:
                        loss.backward()
                    self._count(batch, rows, train=True, width=width, critic_only=critic_only, policy_frozen=frozen)
                gn = torch.nn.utils.clip_grad_norm_(params, algo.max_grad_norm)
                stats.end_step(float(gn), "critic_pass_grad_norm" if critic_only else "grad_norm")
                self.optimizer.step()
        self.policy.eval()
        return self._update_metrics(batch, inputs, adv, stats, fitted, lengths)

    def _update_metrics(self, batch: Batch, inputs: UpdateInputs, adv: Advantages, stats: "UpdateStats",
                        fitted: Tensor | None, lengths: Tensor) -> dict:
        """The update's ``train/*`` metrics once its steps are taken (and the algorithm's
        ``fit_metrics``); resets the padding counters."""
        r = batch.num_rows
        metrics = stats.metrics()
        act = batch.action_mask > 0
        gap = (inputs.old_logp - batch.behavior_logp).abs()
        metrics[mk.TRAIN_BEHAVIOR_OLD_LOGP_GAP] = float(gap[act].mean()) if act.any() else 0.0
        metrics[mk.TRAIN_BEHAVIOR_OLD_LOGP_GAP_MAX] = float(gap[act].max()) if act.any() else 0.0
        metrics.update(mismatch_metrics(inputs.old_logp, batch.behavior_logp, inputs.loss_mask, self._correction_params))
        stale = batch.policy_version[act]
        lag = self.updates_done - stale.float() if stale.numel() else torch.zeros(1)
        metrics[mk.OFF_POLICY_STALENESS_MEAN], metrics[mk.OFF_POLICY_STALENESS_MAX] = float(lag.mean()), float(lag.max())
        metrics.update(self.fit_metrics(batch, adv, fitted))
        metrics[mk.TRAIN_AGG_WEIGHT_SHIFT] = agg_weight_shift(batch)
        # the policy term's weights on the whole batch (one optimizer batch): the same number
        # however the update is split into minibatches and micro-batches
        whole = self.loss_weights(torch.arange(r), batch, inputs, adv)["policy"]
        metrics[mk.TRAIN_SIGNED_ADV_MASS] = signed_advantage_mass(adv.tokens, whole)
        metrics[mk.TRAIN_TOKENS] = int(batch.valid.sum())
        metrics[mk.TRAIN_ACTION_TOKENS] = int(act.sum())
        metrics[mk.TRAIN_ROWS] = r
        metrics[mk.TRAIN_MAX_ROW_LEN] = int(lengths.max())
        pos = self._positions
        metrics[mk.TRAIN_PADDING_EFFICIENCY] = pos["real"] / pos["computed"] if pos["computed"] else 1.0
        self._positions = {"real": 0, "computed": 0}
        return metrics

    # ----- shared machinery -----------------------------------------------------------------
    def forward(self, tokens: Tensor, detach_value: bool = False) -> ForwardOutput:
        """Logits ``[B, T, V]`` and values ``[B, T] | None`` (the separate critic's values when
        there is one, else the policy's value head, else None)."""
        logits, head_values = self.policy(tokens, detach_value=detach_value)
        return ForwardOutput(logits, self.critic(tokens) if self.critic is not None else head_values)

    def forward_at(self, tokens: Tensor, want: Tensor, detach_value: bool = False,
                   value_at: Tensor | None = None) -> ForwardOutput:
        """``forward`` with logits only before the tokens marked by ``want [B, T]``: logits
        ``[n, V]`` (PolicyModel.forward_at), values ``[B, T] | None``; a separate critic's values
        only at ``value_at [B, T]`` (all positions when None; 0 elsewhere)."""
        logits, head_values = self.policy.forward_at(tokens, want, detach_value=detach_value)
        values = self.critic(tokens, at=value_at) if self.critic is not None else head_values
        return ForwardOutput(logits, values)

    def _n_minibatches(self, rows: int) -> int:
        return max(1, min(self.algo.minibatches, rows))

    def _selection(self, trajectories: list[Trajectory]) -> tuple[list[Trajectory], dict]:
        live = [t for t in trajectories if not t.masked]
        kept, sel_metrics = self.select(live)
        metrics = {mk.TRAIN_MASKED_TRAJECTORIES: len(trajectories) - len(live), mk.TRAIN_TRAJECTORIES: len(kept),
                   **sel_metrics}
        temps = {t.temperature for t in kept if t.temperature is not None}
        if temps - {self.temperature}:
            # old log-probs are recomputed at self.temperature; a ratio against behavior
            # log-probs taken at another temperature would be silently wrong
            raise ValueError(f"trajectories were sampled at temperature {sorted(temps)} but the trainer "
                             f"recomputes log-probs at {self.temperature}; use one rollout.temperature")
        return kept, metrics

    def _count(self, batch: Batch, rows: Tensor, train: bool, model: PolicyModel | None = None,
               with_critic: bool = True, width: int | None = None, critic_only: bool = False,
               policy_frozen: bool = False) -> None:
        """Add the analytic FLOPs (``algos.compute``) of a forward (``train=False``) or a
        forward + backward of ``rows`` through ``model`` (default the policy) and the critic
        (real tokens only), and the real / computed positions (``rows x width``) of the forward
        to the update's padding efficiency. ``critic_only`` (a critic-only pass): a separate
        critic's forward + backward alone; with a value head, the policy trunk's forward (no
        backward reaches it) and nothing else. ``policy_frozen`` (a warm-up step): the policy's
        forward only (no policy term in the loss, a value head reads the detached trunk), a
        separate critic's forward + backward."""
        lengths = batch.valid[rows].sum(1)
        tokens = int(lengths.sum())
        passes = 1 + int(with_critic and self.critic is not None and not critic_only)
        self._positions["real"] += passes * tokens
        self._positions["computed"] += passes * len(rows) * (batch.tokens.shape[1] if width is None else width)
        add = self.meter.add_train_step if train else self.meter.add_forward
        add_policy = self.meter.add_forward if policy_frozen else add
        model = self.policy if model is None else model
        if critic_only:
            if self.critic is not None:
                add(self.n_critic, tokens, attention_flops(self.critic.shape.n_layers, self.critic.shape.d_model, lengths))
            else:
                self._count_model(self.meter.add_forward, model, batch.tokens[rows, :width], lengths)
            return
        self._count_model(add_policy, model, batch.tokens[rows, :width], lengths)
        if with_critic and self.critic is not None:
            add(self.n_critic, tokens, attention_flops(self.critic.shape.n_layers, self.critic.shape.d_model, lengths))

    def _count_model(self, add, model: PolicyModel, tokens: Tensor, lengths: Tensor) -> None:
        """``add`` (a forward or a train step) the FLOPs of ``model`` over right-padded ``tokens``
        with real ``lengths``. A prefix-sharing model (``share_prefix``) runs the ids its rows
        share (:func:`shared_prefix_length`) through its trunk once, and its heads
        (``head_params()``) at every real position:
        ``N_trunk * (T - (R - 1) p) + N_head * T`` parameter terms and the prefix's attention once."""
        n_model = self.n_policy if model is self.policy else param_count(model)
        total = int(lengths.sum())
        shared = shared_prefix_length(tokens) if getattr(model, "share_prefix", False) else 0
        if not shared:
            add(n_model, total, attention_flops(model.shape.n_layers, model.shape.d_model, lengths))
            return
        head = model.head_params()
        add(n_model - head, total - (len(lengths) - 1) * shared,
            attention_flops(model.shape.n_layers, model.shape.d_model, lengths, prefix=shared))
        add(head, total)

    def _slice_loss(self, rows: Tensor, width: int, w: dict[str, Tensor], batch: Batch, inputs: UpdateInputs,
                    adv: Advantages, stats: UpdateStats, frozen: bool, fill_old: bool,
                    fitted: Tensor | None) -> Tensor:
        """The loss of one micro-batch: ``rows`` trimmed to their first ``width`` columns (every
        real token of the rows; the rest is padding with weight 0), its share of the step's loss."""
        algo = self.algo
        tokens = batch.tokens[rows, :width]
        m = inputs.loss_mask[rows, :width] > 0
        # logits only where the loss reads them (the positions before the loss tokens), values
        # only where a critic loss or metric reads them
        out = self.forward_at(tokens, m, detach_value=frozen, value_at=self._value_at[rows, :width])
        logp, ent = token_logprobs(out.logits, tokens, m, self.temperature, entropy=True,
                                   entropy_grad=bool(algo.entropy_coef) and not frozen)
        if fill_old:
            inputs.old_logp[rows, :width] = logp.detach()  # the old weights' log-probs (no step taken yet)
        base, is_w = correct(algo.off_policy_correction, logp, inputs.old_logp[rows, :width],
                             batch.behavior_logp[rows, :width], adv.tokens[rows, :width], m, self._correction_params)
        ratio = self._ratio(logp, base, m)
        pg, clipped = ppo_clip_loss(ratio, adv.tokens[rows, :width], algo.clip_low, algo.clip_high, algo.dual_clip)
        if is_w is not None:
            pg = pg * is_w
            stats.tokens("is_weight", is_w, m)
        pg_loss = aggregate(torch.where(m, pg, torch.zeros_like(pg)), w["policy"])
        stats.step_part("policy_loss", pg_loss.item())
        stats.tokens("clip_frac", clipped.float(), m)
        stats.tokens("ratio_mean", ratio, m)
        stats.tokens("approx_kl", approx_kl(torch.where(m, logp, base).detach(), base), m)
        stats.tokens("entropy", ent, m)
        policy_terms = pg_loss
        if algo.entropy_coef:
            policy_terms = policy_terms - algo.entropy_coef * aggregate(torch.where(m, ent, torch.zeros_like(ent)), w["policy"])
        if inputs.ref_logp is not None:
            kl = kl_estimate(logp, inputs.ref_logp[rows, :width], algo.kl_kind)
            kl = torch.where(m, kl, torch.zeros_like(kl))
            stats.tokens("kl_ref", kl, m)
            if algo.kl_coef:
                policy_terms = policy_terms + algo.kl_coef * aggregate(kl, w["policy"])
        # frozen (critic warm-up): no policy term at all, so the policy gets no gradient (None)
        loss = torch.zeros(()) if frozen else policy_terms
        crit = self.critic_loss(rows, out.values, adv, w)
        if crit is not None:
            term, logged = crit
            loss = loss + term
            stats.step_part("value_loss", logged)
        if fitted is not None and out.values is not None:
            fitted[rows, :width] = shift_values(out.values.detach())
        return loss

    def _critic_slice_loss(self, rows: Tensor, width: int, w: dict[str, Tensor], batch: Batch, adv: Advantages,
                           stats: UpdateStats, fitted: Tensor | None) -> Tensor:
        """One micro-batch of a critic-only pass: ``critic_loss`` on the critic's values alone (a
        separate critic's forward; a value head's on the detached trunk, so the policy gets no
        gradient). Its share is logged as ``critic_pass_value_loss``."""
        tokens = batch.tokens[rows, :width]
        at = self._value_at[rows, :width]
        if self.critic is not None:
            values = self.critic(tokens, at=at)
        else:
            values = self.policy.forward_at(tokens, torch.zeros_like(at), detach_value=True)[1]
        term, logged = self.critic_loss(rows, values, adv, w)
        stats.step_part("critic_pass_value_loss", logged)
        if fitted is not None:
            fitted[rows, :width] = shift_values(values.detach())
        return term

    # ----- checkpointing ----------------------------------------------------------------------
    def state_dict(self) -> dict:
        return {"optimizer": self.optimizer.state_dict(), "updates_done": self.updates_done}

    def load_state_dict(self, state: dict) -> None:
        self.optimizer.load_state_dict(state["optimizer"])
        self.updates_done = int(state["updates_done"])


def optimizer_groups(policy: PolicyModel, critic: ValueModel | None, lr: float,
                     critic_lr: float | None) -> tuple[list[dict], list[float]]:
    """``(param groups, their base learning rates)`` of the trainer's AdamW; frozen weights
    (LoRA's base model) stay out. ``critic_lr`` None: one group of every trainable parameter
    (the policy's, then a separate critic's) at ``lr``. Else two: the policy's parameters outside
    its value head at ``lr``, then the critic's (the value head's and a separate critic's) at
    ``critic_lr``."""
    critic_params = [*(critic.parameters() if critic is not None else ())]
    if critic_lr is None:
        params = [p for p in (*policy.parameters(), *critic_params) if p.requires_grad]
        return [{"params": params}], [lr]
    head = policy.value_head
    head_ids = {id(p) for p in head.parameters()} if head is not None else set()
    actor = [p for p in policy.parameters() if p.requires_grad and id(p) not in head_ids]
    value = [p for p in (*(head.parameters() if head is not None else ()), *critic_params) if p.requires_grad]
    return [{"params": actor, "lr": lr}, {"params": value, "lr": critic_lr}], [lr, critic_lr]


def value_positions(batch: Batch) -> Tensor:
    """``[R, T]`` bool: the positions whose critic value anything reads: the position before every
    sampled token (``V`` of the state a decision point's token was chosen in, for either
    ``value_level``) and a truncated segment's ``bootstrap_index`` (V(next state))."""
    at = F.pad(batch.action_mask[:, 1:] > 0, (0, 1))
    rows = torch.nonzero(batch.bootstrap_index >= 0, as_tuple=True)[0]
    at[rows, batch.bootstrap_index[rows]] = True
    return at


def agg_weight_shift(batch: Batch) -> float:
    """Total-variation distance between the per-trajectory loss weights of ``token-mean``
    (weight of task i = its action tokens / all action tokens) and ``task-mean`` (1/N each):
    how much slicing-by-tokens reweights tasks on this batch (claim C18/C20)."""
    mask = batch.action_mask
    tok = aggregation_weights(mask, "token-mean")
    task = aggregation_weights(mask, "task-mean", traj_ids=batch.row_traj)
    n = len(batch.trajectories)
    per_tok = torch.zeros(n).index_add_(0, batch.row_traj, tok.sum(1))
    per_task = torch.zeros(n).index_add_(0, batch.row_traj, task.sum(1))
    return 0.5 * float((per_tok - per_task).abs().sum())


def frozen_copy(model: PolicyModel) -> PolicyModel:
    """A separate, frozen copy (the KL reference model)."""
    ref = copy.deepcopy(model)
    ref.eval()
    for p in ref.parameters():
        p.requires_grad_(False)
    return ref


__all__ = ["LR_SCHEDULES", "SPLIT_COST_KEYS", "CORRECTIONS", "RATIO_KINDS", "TRAINERS", "Trainer", "agg_weight_shift", "value_positions", "frozen_copy", "make_trainer",
           "optimizer_groups", "register"]
