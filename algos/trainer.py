"""The one Trainer interface both algorithms implement, and the registry that picks one by name.

``trainer.update(trajectories) -> metrics`` runs one policy update on freshly collected
trajectories and returns a ``train/*`` + ``critic/*`` metrics dict. The shared part lives here:

1. drop masked trajectories (infra error / cancelled: no loss, no score) — counted, never a 0;
2. collate segments into rows (``algos.batch.collate``);
3. recompute the **old** log-probs with the current weights at the sampling temperature (the
   baseline of this update), and the **reference** log-probs with the frozen start model when a KL
   term is on; the **behavior** log-probs come from the sampler and are never overwritten;
4. subclass hook ``advantages(batch, ctx)`` (GRPO: group-relative outcome advantages; PPO: GAE);
5. loss aggregation weights computed ONCE per optimizer batch (``aggregation_weights``) and sliced
   for micro-batches, so accumulation equals one big batch;
6. epochs x minibatches x micro-batches of the clipped token-level loss (or a sequence ratio), the
   optional decoupled off-policy correction ``w = min(pi_old / pi_behavior, is_cap)`` (stale
   samplers), KL to the reference, entropy bonus, plus subclass hook ``extra_loss`` (PPO's value loss).

Subclasses never branch on config strings; registries do the picking (``TRAINERS``,
``OFF_POLICY_CORRECTIONS``, ``RATIO_KINDS``).
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field

import torch

from algos.batch import Batch, Trajectory, collate
from algos.compute import ComputeMeter
from algos.losses import (
    aggregate,
    aggregation_weights,
    kl_estimate,
    ppo_clip_loss,
    sequence_ratios,
    token_ratios,
)
from algos.metrics import clip_fraction, masked_mean
from algos.policy import PolicyModel, ValueModel, count_params, shift_logprobs, shift_logprobs_entropy

OFF_POLICY_CORRECTIONS = ("decoupled", "none", "behavior-as-old")
RATIO_KINDS = ("token", "sequence", "sequence-norm")
# learning-rate multiplier as a function of the fraction f in [0, 1] of the run's compute budget
# spent (so a schedule is the same for both methods at equal cost, and exact on resume)
LR_SCHEDULES = {
    "constant": lambda f: 1.0,
    "linear": lambda f: max(0.0, 1.0 - f),
}


@dataclass
class UpdateContext:
    """Per-update tensors the hooks share (all ``[R, T]`` unless noted)."""

    old_logp: torch.Tensor
    ref_logp: torch.Tensor | None
    loss_mask: torch.Tensor  # action tokens that enter the policy loss
    traj_keep: torch.Tensor  # [N] bool, trajectories kept (dynamic sampling may drop some)
    extras: dict = field(default_factory=dict)


class Trainer:
    """Base class: the shared update. ``algo`` is an ``experiments.config.AlgoConfig``-like object."""

    name = "base"
    # take the old log-probs from epoch 0's forward when there is a single minibatch
    fuse_old_forward = False

    def __init__(
        self,
        algo,
        policy: PolicyModel,
        critic: ValueModel | None = None,
        reference: PolicyModel | None = None,
        temperature: float = 1.0,
        meter: ComputeMeter | None = None,
    ) -> None:
        if algo.off_policy_correction not in OFF_POLICY_CORRECTIONS:
            raise ValueError(f"algo.off_policy_correction={algo.off_policy_correction!r} unknown; "
                             f"allowed: {', '.join(OFF_POLICY_CORRECTIONS)}")
        if algo.ratio not in RATIO_KINDS:
            raise ValueError(f"algo.ratio={algo.ratio!r} unknown; allowed: {', '.join(RATIO_KINDS)}")
        if algo.lr_schedule not in LR_SCHEDULES:
            raise ValueError(f"algo.lr_schedule={algo.lr_schedule!r} unknown; allowed: {', '.join(LR_SCHEDULES)}")
        self.algo = algo
        self.policy = policy
        self.critic = critic
        self.reference = reference
        self.temperature = temperature
        self.meter = meter if meter is not None else ComputeMeter()
        params = list(policy.parameters()) + (list(critic.parameters()) if critic is not None else [])
        self.optimizer = torch.optim.AdamW(params, lr=algo.lr, weight_decay=algo.weight_decay,
                                           betas=(0.9, 0.95), eps=1e-8)
        self.n_policy = count_params(policy)
        self.n_critic = count_params(critic) if critic is not None else 0
        self.updates_done = 0

    def set_budget_fraction(self, fraction: float) -> float:
        """Set the learning rate for the next update: ``algo.lr * LR_SCHEDULES[algo.lr_schedule](f)``
        with ``f`` the fraction of the compute budget spent before it. Returns the rate."""
        lr = self.algo.lr * LR_SCHEDULES[self.algo.lr_schedule](min(max(float(fraction), 0.0), 1.0))
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        return lr

    # ----- hooks ----------------------------------------------------------------------------
    def select(self, trajectories: list[Trajectory]) -> tuple[list[Trajectory], dict]:
        """Which (non-masked) trajectories enter the update; GRPO's dynamic sampling drops some."""
        return trajectories, {}

    def prepare(self, batch: Batch, ctx: UpdateContext) -> None:
        """Anything computed once before the epochs (PPO: old values)."""

    def advantages(self, batch: Batch, ctx: UpdateContext) -> torch.Tensor:
        raise NotImplementedError

    def weights(self, mb: torch.Tensor, batch: Batch, ctx: UpdateContext) -> dict:
        """Aggregation weights of one optimizer batch (rows ``mb``), computed once on all of its
        rows and then sliced per micro-batch. ``"policy"`` weighs the policy/KL/entropy terms."""
        return {"policy": aggregation_weights(ctx.loss_mask[mb], self.algo.loss_agg, traj_ids=batch.row_traj[mb])}

    def extra_loss(self, rows, batch: Batch, ctx: UpdateContext, out: dict, w: dict, stats: dict):
        """Added to the micro-batch loss (PPO: value loss). Return a scalar tensor or None."""
        return None

    def policy_loss_coef(self) -> float:
        return 1.0

    def finish(self, batch: Batch, ctx: UpdateContext, stats: dict) -> dict:
        return {}

    # ----- shared machinery -----------------------------------------------------------------
    def forward(self, tokens: torch.Tensor, detach_value: bool = False) -> dict:
        logits, head_values = self.policy(tokens, detach_value=detach_value)
        out = {"logits": logits, "values": head_values}
        if self.critic is not None:
            out["values"] = self.critic(tokens)
        return out

    def _count_forward(self, tokens: int, with_policy: bool = True, with_critic: bool = False) -> None:
        if with_policy:
            self.meter.add_forward(self.n_policy, tokens)
        if with_critic and self.critic is not None:
            self.meter.add_forward(self.n_critic, tokens)

    def update(self, trajectories: list[Trajectory]) -> dict:
        t0 = time.perf_counter()
        algo = self.algo
        live = [t for t in trajectories if not t.masked]
        n_masked = len(trajectories) - len(live)
        kept, sel_metrics = self.select(live)
        metrics = {"train/masked_trajectories": n_masked, "train/trajectories": len(kept), **sel_metrics}
        if not kept:
            self.updates_done += 1
            metrics["train/skipped"] = 1
            return metrics
        temps = {t.temperature for t in kept if t.temperature is not None}
        if temps - {self.temperature}:
            # old log-probs are recomputed at self.temperature; a ratio against behavior
            # log-probs taken at another temperature would be silently wrong
            raise ValueError(f"trajectories were sampled at temperature {sorted(temps)} but the trainer "
                             f"recomputes log-probs at {self.temperature}; use one rollout.temperature")
        batch = collate(kept)
        n_tokens = int(batch.valid.sum())
        # ---- old / reference log-probs (no grad), at the sampling temperature. With a single
        # minibatch, epoch 0's forward of every micro-batch runs before the first optimizer step,
        # i.e. with exactly the old weights: a trainer that needs nothing else from the old
        # forward (GRPO) takes the old log-probs from there instead of a separate pass.
        fuse = self.fuse_old_forward and max(1, min(algo.minibatches, batch.num_rows)) == 1
        with torch.no_grad():
            self.policy.eval()
            if fuse:
                old_out = {"values": None}
                old_logp = torch.zeros_like(batch.behavior_logp)
            else:
                old_out = self.forward(batch.tokens)
                old_logp = shift_logprobs(old_out["logits"], batch.tokens, self.temperature)
                self._count_forward(n_tokens, with_critic=True)
            ref_logp = None
            if self.reference is not None:
                ref_logits, _ = self.reference(batch.tokens)
                ref_logp = shift_logprobs(ref_logits, batch.tokens, self.temperature)
                self.meter.add_forward(self.n_policy, n_tokens)
            self.policy.train()
        loss_mask = batch.action_mask.clone()
        ctx = UpdateContext(old_logp=old_logp, ref_logp=ref_logp, loss_mask=loss_mask,
                            traj_keep=torch.ones(len(kept), dtype=torch.bool))
        ctx.extras["old_values_raw"] = old_out["values"]
        if getattr(self.algo, "loss_on_observations", False):  # field removed from the config (issue 9)
            # deliberately wrong (claim C8 demonstration): env-written tokens enter the loss too
            ctx.loss_mask = (batch.valid & (torch.arange(batch.tokens.shape[1]) > 0)).float()
        self.prepare(batch, ctx)
        adv = self.advantages(batch, ctx)
        ctx.extras["advantages"] = adv
        act = batch.action_mask > 0

        # ---- optimisation
        r = batch.num_rows
        n_mb = max(1, min(algo.minibatches, r))
        micro = max(1, algo.micro_batch_rows)
        stats: dict[str, list[float]] = {}
        gen = torch.Generator().manual_seed(1_000_003 * (self.updates_done + 1))
        for epoch in range(algo.epochs):
            ctx.extras["fill_old"] = fuse and epoch == 0
            perm = torch.randperm(r, generator=gen) if n_mb > 1 else torch.arange(r)
            for mb in perm.chunk(n_mb):
                mb = mb.sort().values
                weights = self.weights(mb, batch, ctx)
                self.optimizer.zero_grad(set_to_none=True)
                for start in range(0, len(mb), micro):
                    rows = mb[start: start + micro]
                    w = {k: v[start: start + micro] for k, v in weights.items()}
                    loss = self._micro_loss(rows, w, batch, ctx, stats)
                    loss.backward()
                    tok = int(batch.valid[rows].sum())
                    self.meter.add_train_step(self.n_policy, tok)
                    if self.critic is not None:
                        self.meter.add_train_step(self.n_critic, tok)
                params = [p for g in self.optimizer.param_groups for p in g["params"]]
                gn = torch.nn.utils.clip_grad_norm_(params, algo.max_grad_norm)
                stats.setdefault("grad_norm", []).append(float(gn))
                self.optimizer.step()
        self.updates_done += 1
        self.policy.eval()
        gap = (ctx.old_logp - batch.behavior_logp).abs()
        metrics["train/behavior_old_logp_gap"] = float(gap[act].mean()) if act.any() else 0.0
        metrics["train/behavior_old_logp_gap_max"] = float(gap[act].max()) if act.any() else 0.0
        stale = batch.policy_version[act]
        metrics["train/sampler_version_lag"] = float(self.updates_done - 1 - stale.float().mean()) if stale.numel() else 0.0
        metrics.update(self.finish(batch, ctx, stats))
        for k, v in stats.items():
            if not k.startswith("_"):
                metrics[f"train/{k}"] = sum(v) / max(len(v), 1)
        metrics["train/agg_weight_shift"] = agg_weight_shift(batch)
        metrics["train/tokens"] = n_tokens
        metrics["train/action_tokens"] = int(act.sum())
        metrics["train/rows"] = r
        metrics["train/update_seconds"] = time.perf_counter() - t0
        return metrics

    def _micro_loss(self, rows, weights: dict, batch: Batch, ctx: UpdateContext, stats: dict) -> torch.Tensor:
        algo = self.algo
        w = weights["policy"]
        tokens = batch.tokens[rows]
        out = self.forward(tokens, detach_value=self.policy_loss_coef() == 0.0)
        logp, ent = shift_logprobs_entropy(out["logits"], tokens, self.temperature, entropy_grad=bool(algo.entropy_coef))
        if ctx.extras.get("fill_old"):
            ctx.old_logp[rows] = logp.detach()  # the old weights' log-probs (no step taken yet)
        mask = ctx.loss_mask[rows]
        m = mask > 0
        old = ctx.old_logp[rows]
        behavior = batch.behavior_logp[rows]
        adv = ctx.extras["advantages"][rows]
        base = behavior if algo.off_policy_correction == "behavior-as-old" else old
        log_ratio = torch.where(m, logp - base, torch.zeros_like(logp))
        if algo.ratio == "token":
            ratio = token_ratios(torch.where(m, logp, base), base)
        else:
            ratio = sequence_ratios(logp, base, m, length_normalized=algo.ratio == "sequence-norm")[:, None]
            ratio = ratio.expand_as(logp)
        pg, clipped = ppo_clip_loss(ratio, adv, algo.clip_low, algo.clip_high, algo.dual_clip)
        if algo.off_policy_correction == "decoupled":
            is_w = torch.exp(old - behavior).clamp(max=algo.is_cap).detach()
            is_w = torch.where(m, is_w, torch.ones_like(is_w))
            pg = pg * is_w
            stats.setdefault("is_weight", []).append(float(masked_mean(is_w, m)) if m.any() else 1.0)
        pg = torch.where(m, pg, torch.zeros_like(pg))
        pg_loss = aggregate(pg, w)
        loss = self.policy_loss_coef() * pg_loss
        stats.setdefault("policy_loss", []).append(pg_loss.item())
        if m.any():
            stats.setdefault("clip_frac", []).append(clip_fraction(clipped, m))
            stats.setdefault("ratio_mean", []).append(float(masked_mean(ratio.detach(), m)))
            # k3 estimate of KL(pi_old || pi_new) on the sampled tokens
            stats.setdefault("approx_kl", []).append(
                float(masked_mean(torch.expm1(-log_ratio.detach()) + log_ratio.detach(), m)))
        if m.any():
            stats.setdefault("entropy", []).append(float(masked_mean(ent.detach(), m)))
        if algo.entropy_coef:
            loss = loss - algo.entropy_coef * aggregate(torch.where(m, ent, torch.zeros_like(ent)), w)
        if ctx.ref_logp is not None:
            kl = kl_estimate(logp, ctx.ref_logp[rows], algo.kl_kind)
            kl = torch.where(m, kl, torch.zeros_like(kl))
            if algo.kl_coef:
                loss = loss + algo.kl_coef * aggregate(kl, w)
            if m.any():
                stats.setdefault("kl_ref", []).append(float(masked_mean(kl.detach(), m)))
        extra = self.extra_loss(rows, batch, ctx, out, weights, stats)
        if extra is not None:
            loss = loss + extra
        return loss

    # ----- checkpointing ----------------------------------------------------------------------
    def state_dict(self) -> dict:
        return {"optimizer": self.optimizer.state_dict(), "updates_done": self.updates_done}

    def load_state_dict(self, state: dict) -> None:
        self.optimizer.load_state_dict(state["optimizer"])
        self.updates_done = int(state["updates_done"])


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


TRAINERS: dict[str, type[Trainer]] = {}


def register(name: str):
    def deco(cls):
        cls.name = name
        TRAINERS[name] = cls
        return cls

    return deco


def make_trainer(name: str, *args, **kwargs) -> Trainer:
    import algos.grpo  # noqa: F401  (registration)
    import algos.ppo  # noqa: F401

    if name not in TRAINERS:
        raise ValueError(f"algo {name!r} unknown; allowed: {', '.join(sorted(TRAINERS))}")
    return TRAINERS[name](*args, **kwargs)


def frozen_copy(model: PolicyModel) -> PolicyModel:
    """A separate, frozen copy (the KL reference model)."""
    ref = copy.deepcopy(model)
    ref.eval()
    for p in ref.parameters():
        p.requires_grad_(False)
    return ref


__all__ = ["OFF_POLICY_CORRECTIONS", "RATIO_KINDS", "TRAINERS", "Trainer", "UpdateContext",
           "frozen_copy", "make_trainer", "register"]
