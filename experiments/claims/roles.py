"""Role claims: behavior / old / reference / verifier are four fields (C7); tool output is
observation, not action (C8). Each ``measure_cNN`` returns its claim's frozen result: the measured
values as fields, the row's texts and the pass rule."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import ClassVar

import torch

from algos import metric_keys as mk
from algos.batch import Batch, collate
from algos.losses import aggregate, aggregation_weights, ppo_clip_loss, token_ratios
from algos.policy import PolicyModel
from algos.requests import make_requests
from algos.trainer import frozen_copy, make_trainer
from algos.update import UpdateRecord
from experiments.runtime.behavior import BehaviorPolicy
from experiments.claims.common import (
    TOK,
    algo_config,
    claims_config,
    collect,
    make_engine,
    outcome_advantages,
    rollout_batch,
    run_update,
    snapshot,
    start_model_info,
    start_policy,
)
from experiments.claims.result import EMPIRICAL, ClaimResult, sig


# --------------------------------------------------------------------------------------------- C7
def _max_change(model: PolicyModel, before: dict) -> float:
    return max(float((p - before[k]).abs().max()) for k, p in model.state_dict().items())


def _stale_updates(staleness: int, n_updates: int, seed: int = 7, tasks: int = 4, group_size: int = 8,
                   lr: float = 1e-3, kl_coef: float = 0.05) -> dict:
    """``n_updates`` GRPO updates of the warm-start policy with the sampler ``staleness`` updates
    behind (the product's :class:`experiments.runtime.behavior.BehaviorPolicy`, tokens tagged with its version), with a KL term to a
    ``frozen_copy`` reference. Returns each update's (record, sampler version, trajectories), the
    models and how far the policy and the reference moved (max absolute parameter change)."""
    c = claims_config()
    policy = start_policy()
    start = snapshot(policy)
    reference = frozen_copy(policy)
    ref_before = snapshot(reference)
    algo = algo_config("grpo", group_size=group_size, tasks_per_update=tasks, lr=lr, kl_coef=kl_coef)
    trainer = make_trainer("grpo", algo, policy, None, reference, c.rollout.temperature)
    sampler = BehaviorPolicy(policy, staleness)
    engine = make_engine(num_envs=tasks * group_size)
    updates = []
    for u in range(n_updates):
        reqs = make_requests(tasks, group_size, seed=seed * 1000 + u,
                             task_indices=[(u * tasks + i) % c.env.train_tasks for i in range(tasks)])
        behavior, version = sampler.sampler()
        trajs = collect(engine, behavior, reqs, seed * 1000 + u, version)
        record = run_update(trainer, trajs)
        sampler.push()
        updates.append({"record": record, "version": version, "trajs": trajs, "policy_version": trainer.updates_done - 1})
    engine.close()
    return {"updates": updates, "policy": policy, "reference": reference,
            "policy_moved": _max_change(policy, start), "reference_moved": _max_change(reference, ref_before)}


def _logp_gap(record: UpdateRecord) -> tuple[float, float]:
    """(max, mean) of |old - behavior| log-prob over the action tokens of one update."""
    act = record.batch.action_mask > 0
    gap = (record.inputs.old_logp - record.batch.behavior_logp).abs()[act]
    return float(gap.max()), float(gap.mean())


C7_STALE_MIN, C7_SYNC_TOL = 1e-3, 1e-5  # |old - behavior| log-prob: stale must exceed / sync must stay within


@dataclass(frozen=True)
class C7Result(ClaimResult):
    """Behavior vs old log-probs of the last stale update and of synchronous updates, the
    reference model and the verifier field (see :func:`measure_c7`)."""

    what: ClassVar[str] = "behavior / old / reference / verifier are separate roles (async rollout + GRPO trainer)"
    expected: ClassVar[str] = ("stale behavior log-probs differ from recomputed old ones; both stored; equal when "
                               "synchronous; reference frozen copy")
    kind: ClassVar[str] = EMPIRICAL

    staleness: int
    updates: int
    sampler_version: int
    policy_version: int
    lag: int
    action_tokens: int
    stale_gap_max: float
    stale_gap_mean: float
    metric_gap: float
    is_weight: float
    kl_ref: float
    token_versions: tuple[int, ...]
    separate_fields: bool
    first_gap_max: float
    sync_gap_max: tuple[float, ...]
    reference_separate: bool
    reference_frozen: bool
    reference_moved: float
    policy_moved: float
    verifier_field: bool

    def passes(self) -> bool:
        """The stale gap exceeds :data:`C7_STALE_MIN` and is the trainer's own metric; both
        log-probs stored; tokens carry the sampler's version, lagging by the staleness;
        synchronous gaps within :data:`C7_SYNC_TOL`; the reference is a separate frozen copy that
        did not move while the policy did; the KL to it is positive; the verifier is its own field."""
        return (self.stale_gap_max > C7_STALE_MIN and abs(self.metric_gap - self.stale_gap_mean) < 1e-6
                and self.separate_fields and self.token_versions == (self.sampler_version,)
                and self.lag == self.staleness and all(g <= C7_SYNC_TOL for g in self.sync_gap_max)
                and self.reference_separate and self.reference_frozen and self.reference_moved == 0.0
                and self.policy_moved > 0.0 and self.kl_ref > 0.0 and self.verifier_field)

    @property
    def measured(self) -> str:
        return (f"staleness {self.staleness}, update {self.updates}: sampler version {self.sampler_version} vs policy "
                f"version {self.policy_version} (lag {self.lag}); |old - behavior| log-prob on {self.action_tokens} "
                f"action tokens: max {self.stale_gap_max:.3g}, mean {self.stale_gap_mean:.3g} (trainer metric "
                f"train/behavior_old_logp_gap {self.metric_gap:.3g}, is_weight {self.is_weight:.4g}); first update "
                f"(same weights) max {self.first_gap_max:.2g}; stored as separate fields (Batch.behavior_logp vs the "
                f"update's old log-probs): {self.separate_fields}; staleness 0: max gap per update "
                + ", ".join(f"{g:.2g}" for g in self.sync_gap_max)
                + f" (tol {C7_SYNC_TOL:g}); reference: separate object {self.reference_separate}, requires_grad False "
                f"{self.reference_frozen}, max |change| after {self.updates} updates {self.reference_moved:.3g} while "
                f"the policy moved {self.policy_moved:.3g}, KL(ref) {self.kl_ref:.3g}; verifier score "
                f"Trajectory.verified separate from train_reward: {self.verifier_field} (C23: they disagree on an "
                f"exploit)")


def measure_c7(staleness: int = 1) -> C7Result:
    """Behavior vs old log-probs with a stale and a synchronous sampler; the frozen reference.

    Real rollout engine + real GRPO trainer (KL 0.05 to a ``frozen_copy`` reference, decoupled
    off-policy correction), warm-start policy, 4 tasks x 8 per update. Stale: the sampler is
    ``staleness`` updates behind, ``staleness + 1`` updates; synchronous: 2 updates. Reads, for
    the last stale update: the sampler and policy versions, the max / mean of |old - behavior| on
    its action tokens, the trainer's own ``train/behavior_old_logp_gap``, ``train/is_weight`` and
    ``train/kl_ref`` metrics, the token versions on action tokens, and ``separate_fields`` (old
    and behavior are different tensors and behavior equals what the trajectories stored); the
    first stale update's gap (same weights); each synchronous update's gap; whether the reference
    is another object with its own storage, requires no grad, and how far it and the policy
    moved; ``verifier_field`` (every trajectory has ``verified`` apart from ``train_reward``)."""
    start_model_info()
    torch.set_num_threads(1)
    stale = _stale_updates(staleness, staleness + 1)
    sync = _stale_updates(0, 2)
    last = stale["updates"][-1]
    record = last["record"]
    batch, old_logp = record.batch, record.inputs.old_logp
    act = batch.action_mask > 0
    gap_max, gap_mean = _logp_gap(record)
    stored = collate([t for t in last["trajs"] if not t.masked]).behavior_logp  # the update drops masked ones
    separate = (old_logp is not batch.behavior_logp
                and old_logp.data_ptr() != batch.behavior_logp.data_ptr()
                and torch.equal(stored, batch.behavior_logp))
    ref, pol = stale["reference"], stale["policy"]
    return C7Result(
        staleness=staleness, updates=len(stale["updates"]), sampler_version=last["version"],
        policy_version=last["policy_version"], lag=last["policy_version"] - last["version"],
        action_tokens=int(act.sum()), stale_gap_max=gap_max, stale_gap_mean=gap_mean,
        metric_gap=float(record.metrics[mk.TRAIN_BEHAVIOR_OLD_LOGP_GAP]),
        is_weight=float(record.metrics.get(mk.TRAIN_IS_WEIGHT, float("nan"))),
        kl_ref=float(record.metrics.get(mk.TRAIN_KL_REF, float("nan"))),
        token_versions=tuple(sorted(set(batch.policy_version[act].tolist()))),
        separate_fields=separate,
        first_gap_max=_logp_gap(stale["updates"][0]["record"])[0],
        sync_gap_max=tuple(_logp_gap(u["record"])[0] for u in sync["updates"]),
        reference_separate=ref is not pol and all(p.data_ptr() != q.data_ptr()
                                                  for p, q in zip(ref.parameters(), pol.parameters())),
        reference_frozen=all(not p.requires_grad for p in ref.parameters()),
        reference_moved=stale["reference_moved"], policy_moved=stale["policy_moved"],
        verifier_field=all(hasattr(t, "verified") and hasattr(t, "train_reward") for t in last["trajs"]),
    )


# --------------------------------------------------------------------------------------------- C8
def env_written(batch: Batch) -> torch.Tensor:
    """``[R, T]`` bool: real tokens outside every turn's sampled span (from the data model's
    ``Turn`` records, independently of ``action_mask``): BOS, observations, SEP, forced EOS."""
    sampled = torch.zeros_like(batch.valid)
    for row in range(batch.num_rows):
        for turn in batch.segment(row).turns:
            sampled[row, turn.start: turn.end + 1] = True
    return batch.valid & ~sampled


def observation_mask(batch: Batch) -> torch.Tensor:
    """The wrong loss mask C8 rules out: every real token but the leading BOS (observations, SEP
    and forced EOS included), as float ``[R, T]``."""
    return (batch.valid & (torch.arange(batch.tokens.shape[1]) > 0)).float()


def policy_loss_at_old(record: UpdateRecord, loss_mask: torch.Tensor, algo) -> tuple[float, int]:
    """The GRPO clipped policy loss of the update's first step (current = old log-probs, ratio 1)
    with the trajectories' group advantages (:func:`outcome_advantages`, ``algo.std`` /
    ``algo.adv_eps``) broadcast onto ``loss_mask``, aggregated with weights computed
    from ``loss_mask`` (``algo.loss_agg``), using ``algos.losses`` on tensors. Returns (loss, the
    number of env-written tokens whose log-prob gets a non-zero gradient)."""
    batch = record.batch
    m = loss_mask > 0
    logp = record.inputs.old_logp.detach().clone().requires_grad_(True)
    traj_adv = outcome_advantages(batch.trajectories, algo.std, algo.adv_eps).to(logp.dtype)
    adv = traj_adv[batch.row_traj][:, None] * loss_mask
    ratio = token_ratios(torch.where(m, logp, logp.detach()), logp.detach())
    pg, _ = ppo_clip_loss(ratio, adv, algo.clip_low, algo.clip_high, algo.dual_clip)
    pg = torch.where(m, pg, torch.zeros_like(pg))
    loss = aggregate(pg, aggregation_weights(loss_mask, algo.loss_agg, traj_ids=batch.row_traj))
    (grad,) = torch.autograd.grad(loss, logp)
    return float(loss.detach()), int((grad[env_written(batch)] != 0).sum())


def _turn_records(trajs) -> tuple[int, int, bool, bool]:
    """``(turns, capped turns, SEP before every action, EOS at every turn end)`` of the stored
    turns: a sampled EOS closes an action, an env-written one (mask 0) follows a capped action."""
    boundaries = eos_ok = True
    n_turns = n_capped = 0
    for tr in trajs:
        for seg in tr.segments:
            for t in seg.turns:
                n_turns += 1
                boundaries &= seg.tokens[t.start - 1] == TOK.sep_id and t.start <= t.end
                if t.capped:
                    n_capped += 1
                    eos_ok &= seg.tokens[t.end + 1] == TOK.eos_id and seg.action_mask[t.end + 1] == 0
                else:
                    eos_ok &= seg.tokens[t.end] == TOK.eos_id and seg.action_mask[t.end] == 1
    return n_turns, n_capped, boundaries, eos_ok


@dataclass(frozen=True)
class C8Result(ClaimResult):
    """Loss weights, advantages and stored per-sample fields of a real GRPO update, and the same
    batch's policy loss with observation tokens put into the loss mask (see :func:`measure_c8`)."""

    what: ClassVar[str] = "tool output is observation, not action (real rollout batch, GRPO update)"
    expected: ClassVar[str] = ("observation tokens get zero loss weight; per-sample fields stored; un-masking "
                               "changes the loss")
    kind: ClassVar[str] = EMPIRICAL

    rollouts: int
    rows: int
    width: int
    env_tokens: int
    bos: int
    sep: int
    forced_eos: int
    observation: int
    sampled_tokens: int
    env_weight_max: float
    env_advantage_max: float
    sampled_weight_min: float
    sampled_is_action_mask: bool
    turns: int
    capped: int
    boundaries_ok: bool
    eos_ok: bool
    pad_positions: int
    padding_ok: bool
    version_ok: bool
    temperature: float
    temperatures: tuple[float | None, ...]
    loss_real: float
    grad_env_real: int
    loss_tokens_real: int
    loss_observations: float
    grad_env_observations: int
    loss_tokens_observations: int

    def passes(self) -> bool:
        """Env-written tokens have weight and advantage 0, sampled ones a positive weight and they
        are the action mask; boundaries, EOS, padding, versions and the one temperature are
        stored; the trainer's mask gives env tokens no gradient, the observation mask does and
        changes the loss."""
        return (self.env_weight_max == 0 and self.env_advantage_max == 0 and self.sampled_weight_min > 0
                and self.sampled_is_action_mask and self.boundaries_ok and self.eos_ok and self.padding_ok
                and self.version_ok and self.temperatures == (self.temperature,) and self.grad_env_real == 0
                and self.grad_env_observations > 0 and self.loss_real != self.loss_observations)

    @property
    def measured(self) -> str:
        temps = self.temperatures
        stored = (f"stored = {sig(temps[0], 4)}" if len(temps) == 1 and temps[0] is not None
                  else f"NOT one stored value per sample ({list(temps)})")
        return (f"real GRPO update on {self.rollouts} rollouts ({self.rows} rows x {self.width}): {self.env_tokens} "
                f"env-written tokens ({self.bos} BOS, {self.observation} observation, {self.sep} SEP, "
                f"{self.forced_eos} forced EOS) with loss weight max {self.env_weight_max:.3g} and advantage max "
                f"{self.env_advantage_max:.3g}; {self.sampled_tokens} sampled tokens with weight min "
                f"{self.sampled_weight_min:.3g}; stored per sample: turn boundaries for {self.turns} turns (SEP "
                f"before each action: {self.boundaries_ok}), EOS positions ({self.capped} capped with env EOS): "
                f"{self.eos_ok}, padding mask Batch.valid ({self.pad_positions} pad positions): {self.padding_ok}, "
                f"policy version (3 on sampled, -1 elsewhere): {self.version_ok}, sampling temperature: {stored}; "
                f"first-step policy loss with the action mask {self.loss_real:.5g} ({self.loss_tokens_real} loss "
                f"tokens, {self.grad_env_real} env tokens with gradient) vs with observation tokens un-masked "
                f"{self.loss_observations:.5g} ({self.loss_tokens_observations} loss tokens, "
                f"{self.grad_env_observations} env tokens with gradient)")


def measure_c8(seed: int = 8) -> C8Result:
    """Loss weights, advantages and stored per-sample fields of a real GRPO update, and the same
    batch's policy loss with observation tokens put into the loss mask.

    A real rollout batch (warm-start policy, 8 easy BugFix train tasks x 8, policy version 3,
    temperature 1.0) through the real GRPO update. Env-written tokens come from the ``Turn`` spans
    and are counted by kind (BOS, observation, SEP, forced EOS); weights are computed from the
    trainer's loss mask (``algo.loss_agg``). Per-sample records: turn and capped counts, SEP before
    every action, a sampled EOS at each turn end (an env EOS after a capped action), ``Batch.valid``
    = segment lengths with pad id 0, policy version 3 on sampled tokens and -1 elsewhere, the
    temperature stored per trajectory (None when missing). The demonstration:
    :func:`policy_loss_at_old` with the trainer's mask vs with :func:`observation_mask`."""
    start_model_info()
    torch.set_num_threads(1)
    trajs = list(copy.deepcopy(rollout_batch(seed)))
    temperature = claims_config().rollout.temperature
    algo = algo_config("grpo", group_size=8, tasks_per_update=8)
    trainer = make_trainer("grpo", algo, start_policy(), temperature=temperature)
    record = run_update(trainer, trajs)
    batch, adv, loss_mask = record.batch, record.advantages.tokens, record.inputs.loss_mask
    weights = aggregation_weights(loss_mask, algo.loss_agg, traj_ids=batch.row_traj)
    env = env_written(batch)
    act = batch.action_mask > 0
    sampled = batch.valid & ~env
    n_bos, n_sep, n_eos = (int((batch.tokens[env] == t).sum()) for t in (TOK.bos_id, TOK.sep_id, TOK.eos_id))
    n_turns, n_capped, boundaries, eos_ok = _turn_records(trajs)
    lengths = torch.tensor([len(batch.segment(r)) for r in range(batch.num_rows)])
    loss_real, grad_real = policy_loss_at_old(record, loss_mask, algo)
    wrong = observation_mask(batch)
    loss_obs, grad_obs = policy_loss_at_old(record, wrong, algo)
    return C8Result(
        rollouts=len(trajs), rows=batch.num_rows, width=int(batch.tokens.shape[1]),
        env_tokens=int(env.sum()), bos=n_bos, sep=n_sep, forced_eos=n_eos,
        observation=int(env.sum()) - n_bos - n_sep - n_eos, sampled_tokens=int(sampled.sum()),
        env_weight_max=float(weights[env].abs().max()), env_advantage_max=float(adv[env].abs().max()),
        sampled_weight_min=float(weights[sampled].min()), sampled_is_action_mask=torch.equal(sampled, act),
        turns=n_turns, capped=n_capped, boundaries_ok=bool(boundaries), eos_ok=bool(eos_ok),
        pad_positions=int((~batch.valid).sum()),
        padding_ok=torch.equal(batch.valid.sum(1), lengths) and bool((batch.tokens[~batch.valid] == 0).all()),
        version_ok=(set(batch.policy_version[act].tolist()) == {3}
                    and bool((batch.policy_version[~act] == -1).all())),
        temperature=temperature,
        temperatures=tuple(sorted({t.temperature for t in trajs}, key=lambda v: (v is None, v))),
        loss_real=loss_real, grad_env_real=grad_real, loss_tokens_real=int((loss_mask > 0).sum()),
        loss_observations=loss_obs, grad_env_observations=grad_obs, loss_tokens_observations=int((wrong > 0).sum()),
    )
