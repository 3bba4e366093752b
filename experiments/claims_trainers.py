"""Trainer-level checks of the empirical claims C6, C7, C8, C12, C13, C14, C17, C19, C20 (CLAIMS.md).

Each ``check_cX(**knobs) -> (measured, status)`` runs the project's own rollout engine
(``algos.rollout``), data model (``algos.batch``), trainers (``algos.grpo`` / ``algos.ppo`` via
``algos.trainer.make_trainer``) and training entry point (``experiments.train.run``) with fixed
seeds, and decides PASS / FAIL by the explicit criterion in its docstring. Nothing is read from a
previous run except the behaviour-cloning warm start, which ``experiments.warmstart`` caches by
config hash (built in ~10 s when missing) and which every check starts from:

    ``claims_config()``: easy BugFix, 8 train tasks, the tiny policy (d_model 32, 1 layer, max_len
    256), warm start on 64 noisy-oracle demos (noise 0.3), held-out evaluation 8 tasks x 4 samples
    (and the same on train templates) with tool faults raised to 10 % timeouts / 10 % flaky runs.

The start model and the C19/C20 training pair are computed once per process (module-level
caches), so ``python -m experiments.reproduce_claims`` and the tests pay for them once.

The keyword arguments exist so tests can violate a criterion on purpose (and see FAIL); the
defaults are the settings the claims table reports.
"""

from __future__ import annotations

import copy
import json
import math
import shutil
import signal
import tempfile
from collections import deque
from collections.abc import Sequence
from dataclasses import replace
from functools import lru_cache
from pathlib import Path

import torch

import envs
from algos.advantages import gae, group_mean_std
from algos.batch import Batch, Trajectory, collate
from algos.metrics import binomial_confidence_interval, group_outcome_rates, mixed_group_probability
from algos.policy import PolicyModel, build_models
from algos.ppo import gae_layout
from algos.rollout import RolloutEngine, RolloutRequest, demo_to_trajectory, make_requests
from algos.trainer import Trainer, UpdateContext, frozen_copy, make_trainer
from envs.tokenizer import get_tokenizer
from experiments.config import AlgoConfig, TrainConfig, validate

PASS, FAIL = "PASS", "FAIL"  # the same strings as experiments.reproduce_claims
REPO = Path(__file__).resolve().parents[1]
BUGFIX = envs.BUGFIX_ID
TOK = get_tokenizer()


def _status(ok: bool) -> str:
    return PASS if ok else FAIL


def _f(x: float, nd: int = 3) -> str:
    return "nan" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{nd}g}"


# ------------------------------------------------------------------------------ shared start model
def claims_config(algo: str = "grpo", **algo_fields) -> TrainConfig:
    """The one config every check starts from (validated). ``algo_fields`` override ``AlgoConfig``."""
    c = TrainConfig(algo=AlgoConfig(name=algo, **algo_fields))
    c.env.kwargs = {"difficulty": "easy"}
    c.env.train_tasks = 8
    p = c.policy
    p.d_model, p.n_layers, p.n_heads, p.max_len, p.init_checkpoint, p.init_seed = 32, 1, 2, 256, "warmstart", 0
    w = c.warmstart
    w.noise, w.demos, w.epochs, w.lr, w.batch_rows, w.seed = 0.3, 64, 60, 3e-3, 16, 0
    w.eval_tasks, w.eval_samples_per_task = 8, 4
    w.cache_dir = str(REPO / ".cache" / "agentrl" / "warmstart")
    c.eval.split, c.eval.tasks, c.eval.samples_per_task, c.eval.every, c.eval.train_split = "heldout", 8, 4, 0, True
    # evaluation injects more tool faults than training (5x), so the recovery-after-tool-failure
    # metric has episodes to measure; the same for every method and the start model
    c.eval.env_kwargs = {"timeout_prob": 0.1, "flaky_prob": 0.1}
    c.rollout.num_envs, c.rollout.temperature, c.rollout.max_action_tokens, c.rollout.staleness = 64, 1.0, 12, 0
    c.logger.kind, c.progress, c.threads, c.seed = "none", False, 1, 0
    return validate(c)


@lru_cache(maxsize=1)
def start_model_info() -> dict:
    """The cached warm start of ``claims_config()`` (built when missing): its info dict."""
    from experiments.warmstart import ensure_warmstart

    torch.set_num_threads(1)
    return ensure_warmstart(claims_config(), verbose=False)


def start_policy(critic: str = "none") -> PolicyModel:
    """A fresh copy of the warm-start policy (``critic``: none | head)."""
    from experiments.warmstart import load_policy_weights, policy_shape

    info = start_model_info()
    c = claims_config()
    policy, _ = build_models(policy_shape(c, critic=critic), seed=c.policy.init_seed)
    load_policy_weights(policy, info["path"])
    return policy.eval()


def _engine(num_envs: int = 64, compression: dict | None = None, temperature: float = 1.0,
            **env_kwargs) -> RolloutEngine:
    c = claims_config()
    return RolloutEngine(BUGFIX, num_envs=num_envs, max_len=c.policy.max_len,
                         max_action_tokens=c.rollout.max_action_tokens, temperature=temperature,
                         env_kwargs={**c.env.kwargs, **env_kwargs}, compression=compression)


def _collect(engine: RolloutEngine, policy: PolicyModel, requests: list[RolloutRequest], seed: int,
             version: int = 0) -> list[Trajectory]:
    trajs = engine.collect(policy, requests, policy_version=version, generator=torch.Generator().manual_seed(seed))
    return trajs


def update_capture(trainer: Trainer, trajectories: list[Trajectory]) -> tuple[dict, Batch, UpdateContext]:
    """``trainer.update(trajectories)`` through the real code path, also returning the collated
    batch and the update context (old / reference log-probs, loss mask, advantages, PPO layout)
    that the update used: the instance's ``prepare`` hook is wrapped for the call, nothing else."""
    seen: dict = {}
    original = trainer.prepare

    def prepare(batch: Batch, ctx: UpdateContext) -> None:
        seen["batch"], seen["ctx"] = batch, ctx
        original(batch, ctx)

    trainer.prepare = prepare  # type: ignore[method-assign]
    try:
        metrics = trainer.update(trajectories)
    finally:
        del trainer.prepare
    return metrics, seen["batch"], seen["ctx"]


def _algo(name: str, **fields) -> AlgoConfig:
    return claims_config(name, **fields).algo


# --------------------------------------------------------------------------------------------- C6
def _mixed_rate(trajs: list[Trajectory], group_size: int) -> tuple[float, int, int, int, int]:
    """(mixed rate, groups, mixed groups, successes, trials) over the groups whose ``group_size``
    members are all live (masked episodes are infrastructure failures, not outcomes)."""
    by_group: dict[int, list[Trajectory]] = {}
    for t in trajs:
        by_group.setdefault(t.group_id, []).append(t)
    full = [g for g, ms in by_group.items() if len(ms) == group_size and not any(m.masked for m in ms)]
    live = [t for t in trajs if t.group_id in set(full)]
    rewards = torch.tensor([t.train_reward for t in live], dtype=torch.float64)
    groups = torch.tensor([t.group_id for t in live], dtype=torch.long)
    rates = group_outcome_rates(rewards, groups)
    n = int(rates["n_groups"])
    mixed = round(rates["mixed"] * n)
    return rates["mixed"], n, mixed, int(sum(t.train_reward > 0 for t in live)), len(live)


def check_c6(group_size: int = 8, n_groups: int = 120, task_index: int = 0, hard_task_index: int = 0,
             formula_group_size: int | None = None, correlated_seed: bool = True, seed: int = 6) -> tuple[str, str]:
    """Mixed-group rate of real GRPO groups vs ``P_mix = 1 - p^G - (1-p)^G``.

    Warm-start policy, real rollout engine, easy BugFix (tool faults on), outcome reward; groups
    are the engine's ``group_id``s, rates from ``algos.metrics.group_outcome_rates`` on the
    training reward (groups with a masked member are left out). Settings, ``n_groups`` groups of
    ``group_size`` each:
      independent  every group = one fixed train task (``task_index``), the members' env seeds
                   and sampling draws independent (``make_requests``), so tries are i.i.d. with
                   one p, estimated from the same trials;
      shared seed  the same task, but all members of a group share one env seed and one sampling
                   stream (member g of every group comes from collect g, each collect reseeded
                   identically): identical tool faults and samples (``correlated_seed=False``
                   gives every member its own seeds instead: the control);
      mixed tasks  half the groups on the train task, half on held-out task ``hard_task_index``
                   (an unseen template, much lower p): tries correlated through the task.
    PASS when ``P_mix(p_hat)`` (with ``formula_group_size``, default G) lies in the 95 % Wilson
    interval of the independent mixed rate over its groups, and both correlated settings have a
    lower mixed rate than the independent one and than ``P_mix`` of their own pooled p_hat.
    """
    start_model_info()
    torch.set_num_threads(1)
    g_formula = group_size if formula_group_size is None else formula_group_size
    policy = start_policy()
    engine = _engine()
    train = {"task_index": task_index, "split": "train"}
    held = {"task_index": hard_task_index, "split": "heldout"}
    # independent
    reqs = make_requests(n_groups, group_size, seed=seed, task_indices=[task_index] * n_groups)
    ind = _collect(engine, policy, reqs, seed)
    rate, n, k, succ, trials = _mixed_rate(ind, group_size)
    p_hat = succ / trials
    p_mix = mixed_group_probability(p_hat, g_formula)
    lo, hi = binomial_confidence_interval(k, n)
    # shared seed: member g of group j comes from collect g; every collect is identical by seed
    base = make_requests(n_groups, 1, seed=seed + 1, task_indices=[task_index] * n_groups)
    shared: list[Trajectory] = []
    for g in range(group_size):
        member_seed = seed + 1 if correlated_seed else seed + 1 + 7919 * g
        member_reqs = [RolloutRequest(r.options, r.seed if correlated_seed else r.seed + 104_729 * g, r.group_id)
                       for r in base]
        shared.extend(_collect(engine, policy, member_reqs, member_seed))
    s_rate, s_n, _, s_succ, s_trials = _mixed_rate(shared, group_size)
    s_pmix = mixed_group_probability(s_succ / s_trials, group_size)
    distinct = {}
    for t in shared:
        distinct.setdefault(t.group_id, set()).add(tuple(tok for s in t.segments for tok in s.tokens))
    n_identical = sum(len(v) == 1 for v in distinct.values())
    # mixed-difficulty groups
    half = n_groups // 2
    mreqs = [RolloutRequest(train if r.group_id < half else held, r.seed, r.group_id)
             for r in make_requests(n_groups, group_size, seed=seed + 2, task_indices=[task_index] * n_groups)]
    mix = _collect(engine, policy, mreqs, seed + 2)
    m_rate, m_n, _, m_succ, m_trials = _mixed_rate(mix, group_size)
    m_pmix = mixed_group_probability(m_succ / m_trials, group_size)
    p_easy = sum(t.train_reward > 0 for t in mix if t.group_id < half) / max(sum(t.group_id < half for t in mix), 1)
    p_hard = sum(t.train_reward > 0 for t in mix if t.group_id >= half) / max(sum(t.group_id >= half for t in mix), 1)
    engine.close()
    ok = (lo <= p_mix <= hi and s_rate < rate and m_rate < rate and s_rate < s_pmix and m_rate < m_pmix)
    measured = (
        f"warm-start policy, real rollout engine, easy BugFix train task {task_index}, G={group_size}, "
        f"outcome reward: independent ({n} groups, {trials} tries): p_hat {p_hat:.3f}, measured mixed rate "
        f"{rate:.3f} (95% Wilson CI [{lo:.3f}, {hi:.3f}]) vs P_mix(p_hat, G={g_formula}) {p_mix:.3f}: "
        f"{'inside' if lo <= p_mix <= hi else 'OUTSIDE'}; shared seed + sampling stream ({s_n} groups, "
        f"{n_identical} with all {group_size} members identical): p_hat {s_succ / s_trials:.3f}, mixed "
        f"{s_rate:.3f} vs P_mix {s_pmix:.3f}; mixed tasks (train task p {p_easy:.3f} / held-out task "
        f"{hard_task_index} p {p_hard:.3f}, {m_n} groups): pooled p_hat {m_succ / m_trials:.3f}, mixed "
        f"{m_rate:.3f} vs P_mix {m_pmix:.3f}"
    )
    return measured, _status(ok)


# --------------------------------------------------------------------------------------------- C7
def _snapshot(model: PolicyModel) -> dict:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def _async_updates(staleness: int, n_updates: int, seed: int = 7, tasks: int = 4, group_size: int = 8,
                   lr: float = 1e-3, kl_coef: float = 0.05) -> dict:
    """``n_updates`` GRPO updates of the warm-start policy with the sampler ``staleness`` updates
    behind, composed exactly as ``experiments/train.py``'s loop does (a sampler model loaded from
    the snapshot ``staleness`` updates old, ``policy_version`` = its version), with a KL term to a
    ``frozen_copy`` reference. Returns every update's (metrics, batch, ctx, sampler version)."""
    c = claims_config()
    policy = start_policy()
    start = _snapshot(policy)
    reference = frozen_copy(policy)
    ref_before = _snapshot(reference)
    algo = _algo("grpo", group_size=group_size, tasks_per_update=tasks, lr=lr, kl_coef=kl_coef)
    trainer = make_trainer("grpo", algo, policy, None, reference, c.rollout.temperature)
    sampler = start_policy() if staleness > 0 else None
    snapshots: deque = deque([_snapshot(policy)], maxlen=staleness + 1)
    engine = _engine(num_envs=tasks * group_size)
    updates = []
    for u in range(n_updates):
        reqs = make_requests(tasks, group_size, seed=seed * 1000 + u,
                             task_indices=[(u * tasks + i) % c.env.train_tasks for i in range(tasks)])
        if sampler is not None:
            sampler.load_state_dict(snapshots[0])
            behavior, version = sampler, u - (len(snapshots) - 1)
        else:
            behavior, version = policy, u
        trajs = _collect(engine, behavior, reqs, seed * 1000 + u, version)
        metrics, batch, ctx = update_capture(trainer, trajs)
        snapshots.append(_snapshot(policy))
        updates.append({"metrics": metrics, "batch": batch, "ctx": ctx, "version": version, "trajs": trajs})
    engine.close()
    moved = max(float((p - start[k]).abs().max()) for k, p in policy.state_dict().items())
    ref_moved = max(float((p - ref_before[k]).abs().max()) for k, p in reference.state_dict().items())
    return {"updates": updates, "policy": policy, "reference": reference, "trainer": trainer,
            "policy_moved": moved, "reference_moved": ref_moved}


def _logp_gap(update: dict) -> tuple[float, float]:
    batch, ctx = update["batch"], update["ctx"]
    act = batch.action_mask > 0
    gap = (ctx.old_logp - batch.behavior_logp).abs()[act]
    return float(gap.max()), float(gap.mean())


def check_c7(staleness: int = 1, sync_tol: float = 1e-5, stale_min: float = 1e-3) -> tuple[str, str]:
    """Behavior, old, reference and verifier are four roles with four fields.

    Real rollout engine + real GRPO trainer (KL 0.05 to a ``frozen_copy`` reference, decoupled
    off-policy correction), warm-start policy, 4 tasks x 8 per update. Asynchronous mode: the
    sampler is ``staleness`` updates behind (``experiments/train.py``'s snapshot scheme), run for
    ``staleness + 1`` updates; synchronous mode (staleness 0) for 2 updates. On each update's
    collated batch / update context: behavior log-probs (``Batch.behavior_logp``, stored at
    sampling) vs the old log-probs recomputed at update time (``UpdateContext.old_logp``).
    PASS when: in the last stale update max |old - behavior| > ``stale_min`` and the trainer's
    own ``train/behavior_old_logp_gap`` metric equals the measured mean; the two are separate
    tensors and the behavior field still equals what the trajectories stored; the tokens carry
    the sampler's policy version (lag ``staleness``); in synchronous mode the max gap is <=
    ``sync_tol`` at every update; the reference is a different object, every parameter has
    ``requires_grad=False``, it is bit-identical after the updates while the policy moved (KL to
    it > 0 in the last update); the verifier's score (``Trajectory.verified``) is a field separate from the training reward.
    """
    start_model_info()
    torch.set_num_threads(1)
    stale = _async_updates(staleness, staleness + 1)
    sync = _async_updates(0, 2)
    last = stale["updates"][-1]
    s_max, s_mean = _logp_gap(last)
    first_max, _ = _logp_gap(stale["updates"][0])
    sync_gaps = [_logp_gap(u) for u in sync["updates"]]
    batch, ctx, metrics = last["batch"], last["ctx"], last["metrics"]
    act = batch.action_mask > 0
    stored = collate(last["trajs"]).behavior_logp
    separate = (ctx.old_logp is not batch.behavior_logp
                and ctx.old_logp.data_ptr() != batch.behavior_logp.data_ptr()
                and torch.equal(stored, batch.behavior_logp))
    versions = set(batch.policy_version[act].tolist())
    lag = stale["trainer"].updates_done - 1 - last["version"]
    metric_gap = metrics["train/behavior_old_logp_gap"]
    ref, pol = stale["reference"], stale["policy"]
    ref_frozen = ref is not pol and all(not p.requires_grad for p in ref.parameters())
    ref_separate_storage = all(p.data_ptr() != q.data_ptr() for p, q in zip(ref.parameters(), pol.parameters()))
    kl_ref = metrics.get("train/kl_ref", float("nan"))
    verifier_field = all(hasattr(t, "verified") and hasattr(t, "train_reward") for t in last["trajs"])
    ok = (
        s_max > stale_min
        and abs(metric_gap - s_mean) < 1e-6
        and separate
        and versions == {last["version"]}
        and lag == staleness
        and all(g[0] <= sync_tol for g in sync_gaps)
        and ref_frozen and ref_separate_storage
        and stale["reference_moved"] == 0.0 and stale["policy_moved"] > 0.0 and kl_ref > 0.0
        and verifier_field
    )
    measured = (
        f"staleness {staleness}, update {len(stale['updates'])}: sampler version {last['version']} vs policy "
        f"version {stale['trainer'].updates_done - 1} (lag {lag}); |old - behavior| log-prob on "
        f"{int(act.sum())} action tokens: max {s_max:.3g}, mean {s_mean:.3g} (trainer metric "
        f"train/behavior_old_logp_gap {metric_gap:.3g}, is_weight {metrics.get('train/is_weight', float('nan')):.4g}); "
        f"first update (same weights) max {first_max:.2g}; stored as separate fields Batch.behavior_logp / "
        f"UpdateContext.old_logp: {separate}; staleness 0: max gap per update "
        + ", ".join(f"{g[0]:.2g}" for g in sync_gaps)
        + f" (tol {sync_tol:g}); reference: separate object {ref is not pol}, requires_grad False {ref_frozen}, "
        f"max |change| after {len(stale['updates'])} updates {stale['reference_moved']:.3g} while the policy moved "
        f"{stale['policy_moved']:.3g}, KL(ref) {kl_ref:.3g}; verifier score Trajectory.verified separate from "
        f"train_reward: {verifier_field} (C23: they disagree on an exploit)"
    )
    return measured, _status(ok)


# ---------------------------------------------------------------------------------- C8 and C14
@lru_cache(maxsize=4)
def _rollout(seed: int, tasks: int = 8, group_size: int = 8, version: int = 3) -> tuple[Trajectory, ...]:
    """One real GRPO-style rollout batch of the warm-start policy (tasks x group_size)."""
    engine = _engine(num_envs=64)
    reqs = make_requests(tasks, group_size, seed=seed, task_indices=list(range(tasks)))
    trajs = _collect(engine, start_policy(), reqs, seed, version)
    engine.close()
    return tuple(trajs)


def _env_written(batch: Batch) -> torch.Tensor:
    """``[R, T]`` bool: real tokens outside every turn's sampled span (from the data model's
    ``Turn`` records, independently of ``action_mask``): BOS, observations, SEP, forced EOS."""
    sampled = torch.zeros_like(batch.valid)
    for row in range(batch.num_rows):
        for turn in batch.segment(row).turns:
            sampled[row, turn.start: turn.end + 1] = True
    return batch.valid & ~sampled


def _stored_temperature(traj: Trajectory) -> float | None:
    """The sampling temperature recorded with a trajectory (a ``temperature`` field on the
    trajectory or on every segment), or None when the data model does not store it."""
    value = getattr(traj, "temperature", None)
    if value is None and traj.segments and all(hasattr(s, "temperature") for s in traj.segments):
        values = {s.temperature for s in traj.segments}
        value = values.pop() if len(values) == 1 else None
    return value


def check_c8(loss_on_observations: bool = False, seed: int = 8) -> tuple[str, str]:
    """Tool output is observation: zero loss weight on env-written tokens.

    A real rollout batch (warm-start policy, 8 easy BugFix train tasks x 8, policy version 3,
    temperature 1.0) goes through the real GRPO trainer's update (``loss_on_observations`` as
    given); the trainer's own aggregation weights (``trainer.weights``) of the update context are
    read. Env-written tokens are found from the ``Turn`` spans (not from ``action_mask``). PASS
    when: every env-written token (BOS, observation, SEP, forced EOS) has weight 0 and advantage 0,
    every sampled token weight > 0; per sample are stored: prompt/response boundaries (each turn's
    first/last sampled index, the token before it a SEP), EOS positions (sampled EOS at the turn
    end, or an env-written EOS after a capped action), the padding mask (``Batch.valid``), the
    policy version (on sampled tokens, -1 elsewhere) and the sampling temperature (a
    ``temperature`` field on the trajectory or its segments, equal to the engine's); and the same
    batch with observation tokens un-masked (``algo.loss_on_observations=true``, mask = padding
    mask minus BOS) gives a different policy loss.
    """
    start_model_info()
    torch.set_num_threads(1)
    trajs = list(copy.deepcopy(_rollout(seed)))
    temperature = claims_config().rollout.temperature
    algo = _algo("grpo", group_size=8, tasks_per_update=8, loss_on_observations=loss_on_observations)
    trainer = make_trainer("grpo", algo, start_policy(), temperature=temperature)
    metrics, batch, ctx = update_capture(trainer, trajs)
    weights = trainer.weights(torch.arange(batch.num_rows), batch, ctx)["policy"]
    env = _env_written(batch)
    act = batch.action_mask > 0
    sampled = batch.valid & ~env
    adv = ctx.extras["advantages"]
    zero_env = bool((weights[env] == 0).all()) and bool((adv[env] == 0).all())
    pos_sampled = bool((weights[sampled] > 0).all()) and torch.equal(sampled, act)
    n_bos = int((batch.tokens[env] == TOK.bos_id).sum())
    n_sep = int((batch.tokens[env] == TOK.sep_id).sum())
    n_forced_eos = int((batch.tokens[env] == TOK.eos_id).sum())
    n_obs = int(env.sum()) - n_bos - n_sep - n_forced_eos
    # per-sample records
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
    lengths = torch.tensor([len(batch.segment(r)) for r in range(batch.num_rows)])
    pad_ok = torch.equal(batch.valid.sum(1), lengths) and bool((batch.tokens[~batch.valid] == 0).all())
    version_ok = (set(batch.policy_version[act].tolist()) == {3}
                  and bool((batch.policy_version[~act] == -1).all()))
    temps = [_stored_temperature(t) for t in trajs]
    temp_ok = all(v is not None and abs(float(v) - temperature) < 1e-9 for v in temps)
    # the same batch with observation tokens in the loss
    wrong_trainer = make_trainer("grpo", replace(algo, loss_on_observations=not loss_on_observations),
                                 start_policy(), temperature=temperature)
    wrong_metrics, _, wrong_ctx = update_capture(wrong_trainer, list(copy.deepcopy(_rollout(seed))))
    masked_loss, unmasked_loss = metrics["train/policy_loss"], wrong_metrics["train/policy_loss"]
    if loss_on_observations:
        masked_loss, unmasked_loss = unmasked_loss, masked_loss
    ok = (zero_env and pos_sampled and boundaries and eos_ok and pad_ok and version_ok and temp_ok
          and masked_loss != unmasked_loss)
    n_missing = sum(v is None for v in temps)
    measured = (
        f"real GRPO update on {len(trajs)} rollouts ({batch.num_rows} rows x {batch.tokens.shape[1]}): "
        f"{int(env.sum())} env-written tokens ({n_bos} BOS, {n_obs} observation, {n_sep} SEP, {n_forced_eos} "
        f"forced EOS) with loss weight max {float(weights[env].abs().max()):.3g} and advantage max "
        f"{float(adv[env].abs().max()):.3g}; {int(sampled.sum())} sampled tokens with weight min "
        f"{float(weights[sampled].min()):.3g}; stored per sample: turn boundaries for {n_turns} turns "
        f"(SEP before each action: {boundaries}), EOS positions ({n_capped} capped with env EOS): {eos_ok}, "
        f"padding mask Batch.valid ({int((~batch.valid).sum())} pad positions): {pad_ok}, policy version "
        f"(3 on sampled, -1 elsewhere): {version_ok}, sampling temperature: "
        + ("stored = " + _f(float(temps[0]), 4) if temp_ok else
           f"NOT stored per sample ({n_missing}/{len(trajs)} trajectories have no temperature field; only "
           f"the engine/trainer hold it)")
        + f"; policy loss with the action mask {masked_loss:.5g} vs with observation tokens un-masked "
        f"{unmasked_loss:.5g} (loss tokens {int(act.sum())} vs {int((wrong_ctx.loss_mask > 0).sum())})"
    )
    return measured, _status(ok)


def check_c14(trainer_name: str = "grpo", seed: int = 8) -> tuple[str, str]:
    """Outcome-only GRPO: every action token of a trajectory carries the same advantage.

    The real rollout batch of C8 (8 tasks x 8) through the real ``trainer_name`` update (``ppo``
    with a value head is the control: its GAE advantages vary inside a trajectory); per-token
    advantages are read from the update context. PASS when, for every trajectory, all its action
    tokens (over all its segments) share one value equal to the trainer's per-trajectory advantage
    (max spread 0), env-written tokens have 0, and inside every mixed group the trajectories'
    values differ (a success's and a failure's have opposite signs).
    """
    start_model_info()
    torch.set_num_threads(1)
    trajs = list(copy.deepcopy(_rollout(seed)))
    if trainer_name == "grpo":
        trainer = make_trainer("grpo", _algo("grpo", group_size=8, tasks_per_update=8), start_policy())
    else:
        trainer = make_trainer(trainer_name, _algo(trainer_name, group_size=1, tasks_per_update=64),
                               start_policy(critic="head"))
    _, batch, ctx = update_capture(trainer, trajs)
    adv = ctx.extras["advantages"]
    act = batch.action_mask > 0
    per_traj = ctx.extras.get("trajectory_advantages")
    spreads, values = [], []
    for i in range(len(batch.trajectories)):
        vals = adv[(batch.row_traj == i)[:, None] & act]
        spreads.append(float(vals.max() - vals.min()))
        values.append(float(vals[0]))
    equal_traj = per_traj is not None and all(abs(v - float(a)) < 1e-7 for v, a in zip(values, per_traj))
    groups: dict[int, list[int]] = {}
    for i, t in enumerate(batch.trajectories):
        groups.setdefault(t.group_id, []).append(i)
    mixed = [g for g, ids in groups.items() if len({batch.trajectories[i].train_reward for i in ids}) > 1]
    differ = all(
        min(values[i] for i in ids if batch.trajectories[i].train_reward > 0) > 0 > max(
            values[i] for i in ids if batch.trajectories[i].train_reward == 0)
        for g, ids in groups.items() if g in mixed)
    n_tok = [int(((batch.row_traj == i)[:, None] & act).sum()) for i in range(len(batch.trajectories))]
    ok = max(spreads) == 0.0 and equal_traj and bool((adv[~act] == 0).all()) and bool(mixed) and differ
    measured = (
        f"{trainer_name} update on {len(trajs)} real rollouts (8 tasks x 8, {sum(len(t.segments) for t in trajs)} "
        f"segments, {min(n_tok)}..{max(n_tok)} action tokens per trajectory): max within-trajectory advantage "
        f"spread {max(spreads):.3g}; equal to the per-trajectory group advantage: {equal_traj}; env-written "
        f"tokens 0: {bool((adv[~act] == 0).all())}; {len(mixed)}/{len(groups)} groups mixed, successes > 0 > "
        f"failures in each: {differ} (e.g. group {mixed[0] if mixed else '-'}: "
        + ", ".join(f"{values[i]:+.3f}" for i in (groups[mixed[0]] if mixed else [])) + ")"
    )
    return measured, _status(ok)


# --------------------------------------------------------------------------------------- C12, C13
class ScriptAgent:
    """Plays a fixed list of actions (retrying a timed-out call), then ``fallback``."""

    def __init__(self, actions: Sequence[str], fallback: str = "submit") -> None:
        self.actions, self.fallback = list(actions), fallback

    def reset(self, env, seed: int | None = None) -> None:
        self.queue = list(self.actions)

    def act(self, observation: str, info: dict) -> str:
        return self.queue.pop(0) if self.queue else self.fallback


def _demo(env, agent, seed: int, options: dict, group_id: int = 0) -> Trajectory:
    """A real env episode of a scripted agent laid out by the rollout engine's ``record_step``."""
    from experiments.warmstart import play_demo

    c = claims_config()
    obs, acts, rews, infos, term, trunc = play_demo(env, agent, seed, options)
    tr = demo_to_trajectory(obs, acts, rews, infos, term, trunc, c.policy.max_len, c.rollout.max_action_tokens,
                            group_id=group_id)
    tr.seed, tr.options = seed, dict(options)
    return tr


def check_c12(std: str = "population", task_index: int = 0) -> tuple[str, str]:
    """Group comparison needs no aligned steps: a 4-turn success vs a 10-turn failure.

    Real easy-BugFix episodes (faults off, same train task ``task_index``, seeds 0 and 1, one GRPO
    group) laid out by ``demo_to_trajectory`` (the engine's ``record_step``): a scripted agent
    that knows the fix (run tests, fix the hinted line, run tests, submit: 4 turns, reward 1) and one (9 x
    ``ls``, then ``submit``: 10 turns, reward 0). Both go through the real GRPO update
    (``algo.std`` = ``std``, ``adv_eps`` 0). PASS when the group mean is 0.5, the std 0.5, the
    trajectory advantages exactly [+1, -1] and every action token of each trajectory carries its
    trajectory's value although the two have different numbers of turns and tokens.
    """
    start_model_info()
    env = envs.make(BUGFIX, difficulty="easy", faults=False)
    options = {"task_index": task_index, "split": "train"}
    env.reset(seed=0, options=options)
    fixes = list(env.unwrapped.oracle_actions())  # the task's fix (a function of the task, not the seed)
    win = _demo(env, ScriptAgent(["run_tests", *fixes, "run_tests", "submit"]), 0, options)
    lose = _demo(env, ScriptAgent(["ls"] * 9 + ["submit"]), 1, options)
    env.close()
    trainer = make_trainer("grpo", _algo("grpo", std=std, adv_eps=0.0, group_size=2, tasks_per_update=1),
                           start_policy())
    _, batch, ctx = update_capture(trainer, [win, lose])
    rewards = torch.tensor([win.train_reward, lose.train_reward], dtype=torch.float64)
    mean, sd, _ = group_mean_std(rewards, torch.zeros(2, dtype=torch.long), std=std)
    traj_adv = ctx.extras["trajectory_advantages"].tolist()
    adv, act = ctx.extras["advantages"], batch.action_mask > 0
    tok = [adv[(batch.row_traj == i)[:, None] & act] for i in range(2)]
    broadcast = all(bool((t == a).all()) for t, a in zip(tok, traj_adv))
    ok = (win.turns == 4 and lose.turns == 10 and win.verified == 1 and lose.verified == 0
          and float(mean[0]) == 0.5 and float(sd[0]) == 0.5 and traj_adv == [1.0, -1.0] and broadcast
          and bool((adv[~act] == 0).all()))
    measured = (
        f"easy BugFix train task {task_index}: run_tests + fix + run_tests + submit {win.turns} turns "
        f"({win.stop_reason}, reward "
        f"{win.train_reward:g}, {tok[0].numel()} action tokens) vs ls x9 + submit {lose.turns} turns "
        f"({lose.stop_reason}, reward {lose.train_reward:g}, {tok[1].numel()} action tokens); GRPO ({std} std, "
        f"eps 0): mean {float(mean[0]):.4g}, std {float(sd[0]):.4g}, advantages "
        f"[{traj_adv[0]:+.4g}, {traj_adv[1]:+.4g}], on every action token: {broadcast}"
    )
    return measured, _status(ok)


C13_ENV = {"n_stages": 3, "n_approaches": 4, "verbose": 20}
C13_COMPRESSION = {"strategy": "structured_summary", "trigger": "turns", "every_turns": 2}


def _split_segments(trajs: list[Trajectory]) -> list[Trajectory]:
    """The bug C13 rules out: every segment as its own group member (with its trajectory's reward)."""
    out = []
    for tr in trajs:
        for seg in tr.segments:
            out.append(replace(tr, segments=[seg], turns=len(seg.turns)))
    return out


def check_c13(split_segments: bool = False, task_index: int = 0) -> tuple[str, str]:
    """Segments are not independent answers: 3 + 6 segments stay 2 group members.

    LongHorizon (3 stages, 4 approaches, verbose 20) with the compression wrapper (structured summary every 2
    turns), train task ``task_index``: the oracle (6 turns -> 3 segments, reward 1) and a scripted
    agent that reads the notes, tries wrong approaches, steps and submits a wrong key (12 turns ->
    6 segments, reward 0), as real episodes laid out by ``demo_to_trajectory``; one GRPO group,
    real update (``split_segments`` feeds every segment as its own member instead: the bug).
    PASS when the batch has 9 rows but the group-advantage input has 2 entries (one group, 2
    members), each trajectory's rows all carry its advantage (+1 / -1), and the per-trajectory
    task id, final reward (1 / 0) and verified score are kept.
    """
    start_model_info()
    from envs.long_horizon_agents import OracleAgent

    env = envs.make(envs.LONG_HORIZON_ID, compression=C13_COMPRESSION, **C13_ENV)
    options = {"task_index": task_index, "split": "train"}
    env.reset(seed=0, options=options)
    task = env.unwrapped.task
    wrong = [a for a in "ABCD" if a != task.correct]
    script = ["read notes", f"try {wrong[0]}", f"try {wrong[1]}", "status", "inspect 1", "inspect 2",
              f"try {task.correct}", "step", "step", "step", "status", f"submit {(task.key + 1) % 100}"]
    good = _demo(env, OracleAgent(), 0, options)
    bad = _demo(env, ScriptAgent(script, fallback="forfeit"), 1, options)
    env.close()
    members = [good, bad]
    fed = _split_segments(members) if split_segments else members
    trainer = make_trainer("grpo", _algo("grpo", adv_eps=0.0, group_size=2, tasks_per_update=1), start_policy())
    _, batch, ctx = update_capture(trainer, copy.deepcopy(fed))
    traj_adv = ctx.extras["trajectory_advantages"]
    rates = group_outcome_rates(torch.tensor([t.train_reward for t in fed]), torch.tensor([t.group_id for t in fed]))
    adv, act = ctx.extras["advantages"], batch.action_mask > 0
    row_values = [sorted({float(v) for v in adv[r][act[r]].tolist()}) for r in range(batch.num_rows)]
    shared = len(fed) == 2 and all(row_values[r] == [float(traj_adv[int(batch.row_traj[r])])]
                                   for r in range(batch.num_rows))
    kept = ([t.task_id for t in members] == [good.task_id] * 2 and [t.train_reward for t in members] == [1.0, 0.0]
            and [t.verified for t in members] == [1, 0])
    ok = (len(good.segments) == 3 and len(bad.segments) == 6 and batch.num_rows == 9 and traj_adv.numel() == 2
          and rates["n_groups"] == 1 and traj_adv.tolist() == [1.0, -1.0] and shared and kept)
    measured = (
        f"LongHorizon task {task_index} + compression every 2 turns: oracle {good.turns} turns -> "
        f"{len(good.segments)} segments ({good.stop_reason}, reward {good.train_reward:g}), scripted failure "
        f"{bad.turns} turns -> {len(bad.segments)} segments ({bad.stop_reason}, reward {bad.train_reward:g}); "
        f"GRPO update{' (segments fed as members)' if split_segments else ''}: {batch.num_rows} rows, group-advantage "
        f"input {traj_adv.numel()} entries {[round(float(a), 4) for a in traj_adv]} in {rates['n_groups']} group; "
        f"each trajectory's segments share its advantage: {shared}; task id / final reward / verified kept per "
        f"trajectory: {kept} ({good.task_id}: {good.train_reward:g}/{good.verified}, {bad.task_id}: "
        f"{bad.train_reward:g}/{bad.verified})"
    )
    return measured, _status(ok)


# -------------------------------------------------------------------------------------------- C17
C17_COMPRESSION = {"strategy": "recent", "trigger": "turns", "every_turns": 3, "keep_last": 2}


def _value_at_end(model: PolicyModel, tokens: list[int]) -> float:
    with torch.no_grad():
        _, values = model(torch.tensor([tokens], dtype=torch.long))
    return float(values[0, -1])


def check_c17(compression_as_terminal: bool = False, seed: int = 17, rollouts: int = 32,
              lr: float = 1e-2) -> tuple[str, str]:
    """PPO bootstraps across a compression from the context the episode actually continued from.

    Real rollouts of the warm-start policy (value head) on easy BugFix with the compression
    wrapper (``recent``, keep 2, every 3 turns), ``rollouts`` per update through the real PPO trainer
    (gamma 1, lambda 0.95, 4 epochs, lr ``lr``, ``algo.compression_as_terminal`` as given); 2
    critic-only warm-up updates (``value_warmup_updates``: the policy and trunk stay fixed) give
    the value head non-trivial outputs, then the third
    update's GAE layout (``ctx.extras["layout"]``) and critic outputs are read. At every
    compression boundary (last decision point of a segment that ended ``compressed``): the
    bootstrap value used (``next_values``), V of the continuation context computed afresh with the
    pre-update model on ``[BOS] continuation [SEP]`` alone, and V of the same task's reset context
    (``[BOS] reset observation [SEP]``). The same batch and critic outputs through ``gae_layout``
    with the flag flipped give the mislabelled version; TD residuals with lambda 0 and the GAE
    advantage (lambda 0.95) are compared. PASS when there is at least one boundary and at every
    one: bootstrap == V(continuation context) (1e-4) != V(reset context), neither terminated nor
    truncated is set, the residual is r + gamma V' - V; with the flag: terminated, bootstrap 0 and
    residual r - V (!= the continuing one).
    """
    start_model_info()
    torch.set_num_threads(1)
    c = claims_config()
    policy = start_policy(critic="head")
    algo = _algo("ppo", group_size=1, tasks_per_update=rollouts, epochs=4, minibatches=1, lr=lr,
                 value_warmup_updates=2, compression_as_terminal=compression_as_terminal)
    trainer = make_trainer("ppo", algo, policy, temperature=c.rollout.temperature)
    engine = _engine(num_envs=rollouts, compression=C17_COMPRESSION)

    def collect(u: int) -> list[Trajectory]:
        reqs = make_requests(rollouts, 1, seed=seed * 100 + u,
                             task_indices=[i % c.env.train_tasks for i in range(rollouts)])
        return _collect(engine, policy, reqs, seed * 100 + u, u)

    for u in range(2):
        trainer.update(collect(u))
    trajs = collect(2)
    engine.close()
    before = copy.deepcopy(policy).eval()
    _, batch, ctx = update_capture(trainer, trajs)
    raw = ctx.extras["old_values_raw"]
    lay = ctx.extras["layout"]
    flip = gae_layout(batch, raw, algo.value_level, compression_as_terminal=not compression_as_terminal)
    same_path = all(torch.equal(lay[k], gae_layout(batch, raw, algo.value_level, compression_as_terminal)[k])
                    for k in ("next_values", "terminated"))
    cont_l, term_l = (lay, flip) if not compression_as_terminal else (flip, lay)
    td = {}
    for name, L in (("used", lay), ("continue", cont_l), ("terminal", term_l)):
        td[name] = gae(L["rewards"], L["values"], L["next_values"], L["terminated"], L["truncated"],
                       gamma=algo.gamma, lam=0.0, mask=L["mask"])[0]
    adv_c = gae(cont_l["rewards"], cont_l["values"], cont_l["next_values"], cont_l["terminated"],
                cont_l["truncated"], gamma=algo.gamma, lam=algo.lam, mask=cont_l["mask"])[0]
    adv_t = gae(term_l["rewards"], term_l["values"], term_l["next_values"], term_l["terminated"],
                term_l["truncated"], gamma=algo.gamma, lam=algo.lam, mask=term_l["mask"])[0]
    bounds = []
    for i, tr in enumerate(batch.trajectories):
        n = int(lay["mask"][i].sum())
        rows = lay["rows"][i, :n]
        for k in torch.nonzero(rows[1:] != rows[:-1], as_tuple=True)[0].tolist():
            seg = batch.segment(int(rows[k]))
            nxt = batch.segment(int(rows[k + 1]))
            first = tr.segments[0]
            ctx_tokens = [TOK.bos_id, *seg.continuation, TOK.sep_id]
            reset_tokens = first.tokens[: first.turns[0].start]
            bounds.append({
                "end": seg.end, "r": float(lay["rewards"][i, k]), "V": float(lay["values"][i, k]),
                "boot": float(lay["next_values"][i, k]), "V_cont": _value_at_end(before, ctx_tokens),
                "V_next_first": float(raw[int(rows[k + 1]), int(lay["cols"][i, k + 1]) - 1]),
                "V_reset": _value_at_end(before, reset_tokens),
                "prefix_ok": nxt.tokens[: len(ctx_tokens)] == ctx_tokens,
                "flags": (bool(lay["terminated"][i, k]), bool(lay["truncated"][i, k])),
                "term_flag": bool(term_l["terminated"][i, k]), "term_boot": float(term_l["next_values"][i, k]),
                "cont_boot": float(cont_l["next_values"][i, k]),
                "td_c": float(td["continue"][i, k]), "td_t": float(td["terminal"][i, k]),
                "adv_c": float(adv_c[i, k]), "adv_t": float(adv_t[i, k]),
            })
    g = algo.gamma
    ok = bool(bounds) and same_path
    for b in bounds:
        ok &= (b["end"] == "compressed" and b["prefix_ok"]
               and abs(b["boot"] - b["V_cont"]) < 1e-4 and abs(b["V_cont"] - b["V_next_first"]) < 1e-4
               and abs(b["V_cont"] - b["V_reset"]) > 1e-6 and b["flags"] == (False, False)
               and abs(b["td_c"] - (b["r"] + g * b["cont_boot"] - b["V"])) < 1e-5
               and b["term_flag"] and b["term_boot"] == 0.0 and abs(b["td_t"] - (b["r"] - b["V"])) < 1e-5
               and abs(b["td_c"] - b["td_t"]) > 1e-6)
    multi = sum(len(t.segments) > 1 for t in batch.trajectories)
    flips = sum((b["adv_c"] > 0) != (b["adv_t"] > 0) for b in bounds)
    b0 = bounds[0] if bounds else None
    example = (
        f"first boundary: r {b0['r']:g}, V(s) {b0['V']:.4f}, bootstrap used {b0['boot']:.4f}, critic at the next "
        f"segment's [BOS] continuation [SEP] {b0['V_next_first']:.4f} (fresh forward on it alone "
        f"{b0['V_cont']:.4f}), V(reset context of the same task) {b0['V_reset']:.4f}; TD residual continuing "
        f"{b0['td_c']:+.4f} vs as terminal {b0['td_t']:+.4f} (= r - V), GAE advantage {b0['adv_c']:+.4f} vs "
        f"{b0['adv_t']:+.4f}" if b0 else "no compression boundary in the batch"
    )
    max_err = max((abs(b["boot"] - b["V_cont"]) for b in bounds), default=float("nan"))
    min_reset = min((abs(b["V_cont"] - b["V_reset"]) for b in bounds), default=float("nan"))
    measured = (
        f"PPO (value head, gamma {g:g}, lambda {algo.lam:g}, compression_as_terminal={compression_as_terminal}) "
        f"on {len(trajs)} real easy-BugFix rollouts with compression (recent, every 3 turns): {multi} multi-segment "
        f"trajectories, {len(bounds)} boundaries; max |bootstrap - V(continuation context)| {max_err:.2g}, "
        f"min |V(continuation) - V(reset context)| {min_reset:.3g}; boundary flags terminated/truncated "
        f"{sorted({b['flags'] for b in bounds})}; {example}; with the flag flipped the boundary is terminal with "
        f"bootstrap 0 at all {sum(b['term_flag'] for b in bounds)} boundaries, advantage sign flips at "
        f"{flips}/{len(bounds)}"
    )
    return measured, _status(ok)


# ------------------------------------------------------------------------------------- C19, C20
C19_BUDGET = 256  # complete training rollouts per method (budget.kind=rollouts)
C19_ALGOS = {
    "grpo": {"group_size": 4, "tasks_per_update": 4, "lr": 1e-3},
    "ppo": {"group_size": 1, "tasks_per_update": 16, "epochs": 2, "minibatches": 2, "lr": 1e-3},
}
# Items both runs must share (the fixed protocol): task set and verifier (env), start model,
# tool permissions (env kwargs), test-time sampling budget (eval), sampling, budget, seed.
PROTOCOL_ITEMS = (
    "env.name", "env.kwargs", "env.train_tasks", "compression", "policy.d_model", "policy.n_layers",
    "policy.n_heads", "policy.max_len", "policy.init_checkpoint", "policy.init_seed", "warmstart",
    "eval.split", "eval.tasks", "eval.samples_per_task", "eval.temperature", "eval.env_kwargs",
    "rollout.temperature", "rollout.max_action_tokens", "budget.kind", "budget.amount", "seed",
)
COMPUTE_AXES = ("compute/rollouts", "compute/generated_tokens", "compute/tool_seconds", "compute/train_flops",
                "compute/wall_seconds")


def _train_run(algo: str, budget: int, overrides: tuple) -> dict:
    """One ``experiments.train.run`` in-process into a temporary run directory; returns what it
    wrote (``summary.json``, ``config.yaml``, ``metrics.jsonl``) read back from disk."""
    from omegaconf import OmegaConf

    from experiments.train import run

    c = claims_config(algo, **C19_ALGOS[algo])
    c.budget.kind, c.budget.amount = "rollouts", float(budget)
    for key, value in overrides:
        obj = c
        *path, last = key.split(".")
        for part in path:
            obj = getattr(obj, part)
        setattr(obj, last, value)
    c = validate(c)
    run_dir = Path(tempfile.mkdtemp(prefix=f"claims-{algo}-"))
    c.run_dir = str(run_dir)
    previous = signal.getsignal(signal.SIGTERM)
    try:
        run(c)
        out = {
            "summary": json.loads((run_dir / "summary.json").read_text()),
            "config": OmegaConf.to_container(OmegaConf.load(run_dir / "config.yaml")),
            "metrics": [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()],
        }
    finally:
        signal.signal(signal.SIGTERM, previous)
        shutil.rmtree(run_dir, ignore_errors=True)
    return out


@lru_cache(maxsize=4)
def compare_runs(budget: int = C19_BUDGET, ppo_overrides: tuple = ()) -> dict:
    """The compute-matched GRPO (G=4) vs PPO (G=1) pair from the same warm start (cached)."""
    start_model_info()
    return {"grpo": _train_run("grpo", budget, ()), "ppo": _train_run("ppo", budget, ppo_overrides)}


def _item(config: dict, dotted: str):
    value = config
    for part in dotted.split("."):
        value = value[part]
    return value


def _finite(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def check_c19(budget: int = C19_BUDGET, ppo_overrides: tuple = (), protocol: Sequence[str] = PROTOCOL_ITEMS,
              axes: Sequence[str] = COMPUTE_AXES) -> tuple[str, str]:
    """A compute-matched GRPO-vs-PPO comparison reports success and every compute axis.

    Two real training runs (``experiments.train.run``, in-process, logger none) from the same
    cached warm start: GRPO G=4 x 4 tasks per update and PPO G=1 x 16 tasks (separate critic from
    the start model's trunk), both on ``budget.kind=rollouts`` with ``budget`` rollouts, same
    seed, 8 easy-BugFix train tasks, held-out evaluation 8 tasks x 4 samples at temperature 1
    (``ppo_overrides``: (dotted key, value) pairs applied to the PPO run only, to break the
    protocol on purpose). ``summary.json`` and ``config.yaml`` are read back from the run
    directories. PASS when both summaries have success at the test budget and every ``axes``
    entry finite, the test budgets are equal, both spent at least the budget, and every
    ``protocol`` item of the two configs and the start model path agree.
    """
    runs = compare_runs(budget, tuple(ppo_overrides))
    g, p = runs["grpo"], runs["ppo"]
    sg, sp = g["summary"], p["summary"]
    differ = [k for k in protocol if _item(g["config"], k) != _item(p["config"], k)]
    same_start = sg["start_model/path"] == sp["start_model/path"]
    present = all(_finite(s.get(k)) for s in (sg, sp) for k in ("eval/success", "eval/test_budget", *axes))
    ok = (present and not differ and same_start and sg["eval/test_budget"] == sp["eval/test_budget"]
          and sg["compute/rollouts"] >= budget and sp["compute/rollouts"] >= budget)

    def cell(s: dict, k: str) -> str:
        v = s.get(k)
        return "missing" if v is None else (f"{v:.3g}" if isinstance(v, float) else str(v))

    labels = {"eval/success": "success (held-out templates)", "eval_train/success": "success (train templates)"}
    table = "; ".join(f"{labels.get(k, k.split('/')[-1])}: GRPO {cell(sg, k)} vs PPO {cell(sp, k)}"
                      for k in ("eval/success", "eval_train/success", *axes, "updates"))
    measured = (
        f"experiments.train.run x2 from one warm start (start success {sg['start_model/success']:.3g} on held-out), "
        f"budget {budget} rollouts, GRPO G={g['config']['algo']['group_size']} vs PPO "
        f"G={p['config']['algo']['group_size']} (critic {sp.get('critic')}), test budget "
        f"{cell(sg, 'eval/test_budget')} vs {cell(sp, 'eval/test_budget')} samples x {cell(sg, 'eval/tasks')} held-out "
        f"tasks: {table}; protocol items equal: {len(protocol) - len(differ)}/{len(protocol)}"
        + (f" (differ: {', '.join(differ)})" if differ else "") + f", same start model file: {same_start}"
    )
    return measured, _status(ok)


C20_GRPO_KEYS = ("rollout/all_zero_rate", "rollout/all_one_rate", "train/agg_weight_shift")
C20_PPO_KEYS = ("critic/heldout_points", "train/agg_weight_shift")
C20_TASK_KEYS = ("eval/success", "eval/test_budget", "eval/recovery_rate", "eval/tool_failure_episodes",
                 "eval_train/success")


def check_c20(budget: int = C19_BUDGET, grpo_keys: Sequence[str] = C20_GRPO_KEYS,
              ppo_keys: Sequence[str] = C20_PPO_KEYS, task_keys: Sequence[str] = C20_TASK_KEYS) -> tuple[str, str]:
    """Training-side and task-side diagnostics are logged by the runs of C19.

    From the same two runs' ``metrics.jsonl`` (every update) and ``summary.json``: GRPO's
    all-0 / all-1 group fractions and loss-aggregation weight shift (``train/agg_weight_shift``:
    total variation between token-mean and task-mean per-trajectory weights), PPO's critic
    explained variance on held-out complete returns (``critic/explained_variance_heldout``:
    values before fitting vs Monte Carlo returns of terminated rollouts) with its point count;
    task side for both: success at the test budget, recovery after tool failure
    (``eval/recovery_rate`` with its episode count) and success on unseen templates (the
    evaluation split is ``heldout``: templates never trained on; train-split success alongside).
    PASS when every key is present and finite in every update (training keys) or in the summary
    (task keys) of both runs, the eval split is heldout, and PPO's held-out EV is finite in some
    update; an update where it is missing or NaN must report its held-out point count (NaN = the
    returns had no variance or fewer than 2 points).
    """
    runs = compare_runs(budget, ())
    problems = []
    for name, keys in (("grpo", grpo_keys), ("ppo", ppo_keys)):
        for k in keys:
            if not all(_finite(row.get(k)) for row in runs[name]["metrics"]):
                problems.append(f"{name} {k}")
        for k in task_keys:
            if not _finite(runs[name]["summary"].get(k)):
                problems.append(f"{name} summary {k}")
        if runs[name]["config"]["eval"]["split"] != "heldout":
            problems.append(f"{name} eval split")
    ppo_rows = runs["ppo"]["metrics"]
    ev = [row.get("critic/explained_variance_heldout") for row in ppo_rows]
    points = [row.get("critic/heldout_points") for row in ppo_rows]
    finite_ev = [v for v in ev if _finite(v)]
    nan_pts = [n for v, n in zip(ev, points) if not _finite(v)]
    if not any(_finite(v) for v in ev):
        problems.append("ppo critic/explained_variance_heldout never finite")
    if any(not _finite(v) and not _finite(n) for v, n in zip(ev, points)):
        problems.append("ppo held-out EV missing without a point count")

    def mean(name: str, k: str) -> str:
        vals = [row[k] for row in runs[name]["metrics"] if _finite(row.get(k))]
        return f"{sum(vals) / len(vals):.3g}" if vals else "missing"

    def summ(name: str, k: str) -> str:
        v = runs[name]["summary"].get(k)
        return f"{v:.3g}" if _finite(v) else "missing"

    measured = (
        f"C19's runs, per update (mean over {len(runs['grpo']['metrics'])} GRPO / {len(ppo_rows)} PPO updates): GRPO "
        f"all-0 groups {mean('grpo', 'rollout/all_zero_rate')}, all-1 {mean('grpo', 'rollout/all_one_rate')}, mixed "
        f"{mean('grpo', 'rollout/mixed_group_rate')}; agg weight shift token- vs task-mean GRPO "
        f"{mean('grpo', 'train/agg_weight_shift')} / PPO {mean('ppo', 'train/agg_weight_shift')}; PPO critic EV on "
        f"held-out complete returns finite in "
        f"{len(finite_ev)}/{len(ev)} updates (range [{_f(min(finite_ev, default=float('nan')))}, "
        f"{_f(max(finite_ev, default=float('nan')))}], last finite {_f(finite_ev[-1] if finite_ev else float('nan'))}, "
        f"{sum(points) / max(len(points), 1):.0f} held-out points per update)"
        + (f", NaN/absent in {len(nan_pts)} with " + ", ".join(
            f"{n} points ({'returns without variance' if _finite(n) and n >= 2 else 'fewer than 2 points'})"
            for n in nan_pts) if nan_pts else "")
        + f", in-batch EV {mean('ppo', 'critic/explained_variance_in_batch')}; task side (held-out templates, "
        f"{summ('grpo', 'eval/test_budget')} samples/task): success GRPO {summ('grpo', 'eval/success')} / PPO "
        f"{summ('ppo', 'eval/success')} (train templates {summ('grpo', 'eval_train/success')} / "
        f"{summ('ppo', 'eval_train/success')}), recovery after an injected tool failure (success among those "
        f"episodes) held-out {summ('grpo', 'eval/recovery_rate')} ({summ('grpo', 'eval/tool_failure_episodes')} "
        f"episodes) / {summ('ppo', 'eval/recovery_rate')} ({summ('ppo', 'eval/tool_failure_episodes')}), train "
        f"templates {summ('grpo', 'eval_train/recovery_rate')} ({summ('grpo', 'eval_train/tool_failure_episodes')}) / "
        f"{summ('ppo', 'eval_train/recovery_rate')} ({summ('ppo', 'eval_train/tool_failure_episodes')})"
        + (f"; missing or not finite: {', '.join(problems)}" if problems else "")
    )
    return measured, _status(not problems)


# -------------------------------------------------------------------------------------------- C24
C24_BUDGET = 1024


@lru_cache(maxsize=4)
def reward_mode_runs(budget: int = C24_BUDGET, biased: str = "biased_process", seed: int = 0) -> dict:
    """GRPO (C19's settings) with ``outcome`` and with ``biased`` reward, from the same start model
    file (the cached warm start of ``claims_config()``), same seed and budget (cached)."""
    path = start_model_info()["path"]
    out = {}
    for mode in ("outcome", biased):
        overrides = (("env.kwargs", {"difficulty": "easy", "reward_mode": mode}), ("policy.init_checkpoint", path),
                     ("seed", seed), ("eval.samples_per_task", 8))
        out[mode] = _train_run("grpo", budget, overrides)
    return out


def _quarters(rows: list[dict], key: str) -> tuple[float, float]:
    k = max(len(rows) // 4, 1)
    first, last = rows[:k], rows[-k:]
    return sum(r[key] for r in first) / len(first), sum(r[key] for r in last) / len(last)


def check_c24_trainer(budget: int = C24_BUDGET, biased: str = "biased_process", min_gap: float = 0.2,
                      seed: int = 0) -> tuple[str, str]:
    """A biased process reward is farmed by a real trainer: reward rises, verified success does not keep up.

    Two GRPO runs (``experiments.train.run``, C19's GRPO settings, ``budget`` rollouts, seed
    ``seed``) from the same start model file, env reward ``outcome`` vs ``biased`` (pays 0.1 per
    test run, whatever the progress). Per update: training reward (``rollout/train_reward_mean``)
    and verified success (``rollout/success_rate``, the env's independent verifier), averaged over
    the first and the last quarter of the updates; final verified success on the train templates
    (``eval_train/success``, 8 tasks x 8). PASS when under ``biased`` the training reward rises
    more than the verified success from the first to the last quarter and exceeds it by at least
    ``min_gap`` in the last quarter, while under ``outcome`` reward and verified success agree
    within 0.05. (The cross-run reading "biased: higher final reward and not higher final success
    than outcome" is reported, not required: over seeds 0-4 at this budget it held in 2 of 5, since
    either run can collapse, so it is not a robust fixed-seed criterion.)
    """
    runs = reward_mode_runs(budget, biased, seed)
    rows_b, rows_o = runs[biased]["metrics"], runs["outcome"]["metrics"]
    rb0, rb1 = _quarters(rows_b, "rollout/train_reward_mean")
    sb0, sb1 = _quarters(rows_b, "rollout/success_rate")
    ro0, ro1 = _quarters(rows_o, "rollout/train_reward_mean")
    so0, so1 = _quarters(rows_o, "rollout/success_rate")
    tb = sum(r["rollout/mean_turns"] for r in rows_b[-max(len(rows_b) // 4, 1):]) / max(len(rows_b) // 4, 1)
    to = sum(r["rollout/mean_turns"] for r in rows_o[-max(len(rows_o) // 4, 1):]) / max(len(rows_o) // 4, 1)
    eb, eo = runs[biased]["summary"]["eval_train/success"], runs["outcome"]["summary"]["eval_train/success"]
    ok = (rb1 - rb0 > sb1 - sb0 and rb1 - sb1 >= min_gap
          and abs(ro0 - so0) <= 0.05 and abs(ro1 - so1) <= 0.05)
    measured = (
        f"trainer: GRPO x2 from one start model, {budget} rollouts, seed {seed}, first -> last quarter of "
        f"{len(rows_b)} updates: {biased}: train reward {rb0:.3f} -> {rb1:.3f}, verified success {sb0:.3f} -> "
        f"{sb1:.3f} (reward - success {rb1 - sb1:+.3f}, need >= {min_gap:g}), mean turns {tb:.1f}; outcome: reward "
        f"{ro0:.3f} -> {ro1:.3f}, success {so0:.3f} -> {so1:.3f}, turns {to:.1f}; final verified success on train "
        f"templates (8 x 8): {biased} {eb:.3f} vs outcome {eo:.3f}; cross-run reading (biased: higher last-quarter "
        f"reward {rb1:.3f} vs {ro1:.3f} and not higher verified success) at this seed: {rb1 > ro1 and eb <= eo} "
        f"(reported, not required: it held for 2 of seeds 0-4, either run can collapse)"
    )
    return measured, _status(ok)


def check_c24(trainer: bool = True, **knobs) -> tuple[str, str]:
    """C24 = the scripted-agent check of ``experiments.claims_envs`` and (``trainer``) the trainer
    run of ``check_c24_trainer``; PASS when every part passes."""
    from experiments.claims_envs import check_c24 as scripted

    parts = [scripted()]
    if trainer:
        parts.append(check_c24_trainer(**knobs))
    return " || ".join(m for m, _ in parts), _status(all(s == PASS for _, s in parts))
