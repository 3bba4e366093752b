"""The training loop of one run (what ``python -m experiments.train algo=grpo env=bugfix`` runs).

A two-agent env (``env=pairfix`` with ``algo=ppo_ctde | ppo_independent``) is run by
``experiments.runtime.pair.run_pair`` (same run directory, metrics, logger and resume contract;
per-agent metrics ``agent_a/...``, ``agent_b/...``).

:func:`run` reads in order: build (run directory, start model, models, trainer, behaviour policy,
rollout engines, logger; resume when a checkpoint exists), then the loop {collect, update, log,
maybe evaluate, save} until the compute budget is spent, then the summary. The config is
validated before any of it (``experiments.runtime.config.validate``; experiments/train.py prints a
one-line ``config error: ...`` and exits with code 2).

Run directory (``experiments/runtime/rundir.py``): ``config.yaml``, ``metrics.jsonl`` (one dict per update,
fsynced), ``summary.json``, ``checkpoints/last.pt``, ``wandb/``; by default
``runs/<algo>-<env>-<hash of the config>`` so the same command always maps to the same directory.

Resume: every update ends with an atomic checkpoint (models, optimizer, ComputeMeter, behaviour
policy snapshots, update index, last evaluation, the byte length of metrics.jsonl). Re-running the
same command (after Ctrl-C, SIGTERM or kill -9) loads it, truncates metrics.jsonl to that length and
continues; all randomness is derived from (seed, update index, stream), so the final metrics equal
an uninterrupted run's (wall-clock fields aside).

Learning rate: ``trainer.set_budget_fraction(f)`` with ``f`` the fraction of the budget spent
BEFORE the update's rollouts are collected, so under ``lr_schedule=linear`` update ``k`` of a
rollout budget ``B`` at ``n`` rollouts per update runs at ``lr * (1 - k n / B)`` and the last one
at ``lr * n / B > 0``.

Test aid (not a config field): with the environment variable ``AGENTRL_TEST_KILL_AFTER_UPDATE=N``
the process SIGKILLs itself after update N's metrics line is written, before its checkpoint (the
kill -9 resume test uses it; re-running without the variable redoes update N).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections import Counter
from dataclasses import asdict
from pathlib import Path

import torch
from tqdm import tqdm

from algos.compute import Budget, ComputeMeter
from algos.metrics import group_outcome_rates
from algos.rollout import evaluate, hack_metrics
from algos.trainer import make_trainer
from experiments.runfiles.transcripts import FILE_NAME as TRANSCRIPTS_FILE
from experiments.runfiles.transcripts import TABLE_COLUMNS, load_transcripts, save_transcripts, transcript_rows
from experiments.runtime.behavior import BehaviorPolicy
from experiments.runtime.build import (build_policy, eval_engine, eval_seed, sampling_generator, train_engine,
                                       update_requests)
from experiments.runtime.loggers import make_logger
from experiments.runtime.memory import release_freed_memory
from experiments.runtime.pair import run_pair
from experiments.runtime.rundir import RunDir, jsonable
from experiments.runtime.schema import TrainConfig, is_pair_run, resolve_critic
from experiments.runtime.warmstart import start_model

KILL_AFTER_UPDATE_ENV = "AGENTRL_TEST_KILL_AFTER_UPDATE"


def rollout_metrics(trajs, collect_seconds: float) -> dict:
    """``rollout/*`` of one update's training trajectories (masked ones excluded from rates)."""
    live = [t for t in trajs if not t.masked]
    n = max(len(live), 1)
    m: dict = {
        "rollout/trajectories": len(trajs),
        "rollout/masked": len(trajs) - len(live),
        "rollout/success_rate": sum(int(t.verified or 0) for t in live) / n,
        "rollout/train_reward_mean": sum(t.train_reward for t in live) / n,
        "rollout/mean_turns": sum(t.turns for t in live) / n,
        "rollout/mean_segments": sum(len(t.segments) for t in live) / n,
        "rollout/mean_generated_tokens": sum(t.generated_tokens for t in live) / n,
        "rollout/mean_observation_tokens": sum(t.observation_tokens for t in live) / n,
        "rollout/mean_tool_seconds": sum(t.tool_seconds for t in live) / n,
        "rollout/tool_failure_rate": sum(1 for t in live if t.tool_failures) / n,
        **hack_metrics(trajs, "rollout/"),
        "rollout/generated_tokens_per_second": sum(t.generated_tokens for t in trajs) / max(collect_seconds, 1e-9),
        "rollout/collect_seconds": collect_seconds,
    }
    if live:
        ver = torch.tensor([float(t.verified or 0) for t in live])
        gid = torch.tensor([t.group_id for t in live], dtype=torch.long)
        rates = group_outcome_rates(ver, gid)
        m["rollout/mixed_group_rate"] = rates["mixed"]
        m["rollout/all_zero_rate"] = rates["all_zero"]
        m["rollout/all_one_rate"] = rates["all_one"]
        rew = torch.tensor([t.train_reward for t in live])
        m["rollout/reward_mixed_group_rate"] = group_outcome_rates(rew, gid)["mixed"] if len(set(rew.tolist())) <= 2 else float("nan")
    for reason, k in Counter(t.stop_reason for t in trajs).items():
        m[f"rollout/stop/{reason}"] = k
    return m


def evaluate_policy(c: TrainConfig, engine, policy, transcripts_dir: Path | None = None) -> dict:
    """``eval/*`` on ``eval.split`` (and ``eval_train/*`` on train tasks when ``eval.train_split``)
    at the fixed test budget ``eval.tasks x eval.samples_per_task``, seeds from ``eval_seed``.
    With ``transcripts_dir`` the held-out trajectories' sample transcripts are saved there
    (``experiments.runfiles.transcripts.save_transcripts``)."""
    e = c.eval
    out, trajs = evaluate(engine, policy, e.tasks, e.samples_per_task, e.temperature, seed=eval_seed(c),
                          split=e.split, return_trajectories=True)
    if transcripts_dir is not None:  # the final evaluation: one success and one failure to look at
        save_transcripts(transcripts_dir, trajs)
    if e.train_split:
        out.update(evaluate(engine, policy, e.tasks, e.samples_per_task, e.temperature, seed=eval_seed(c),
                            split="train", prefix="eval_train/"))
    return out


def _progress(c: TrainConfig, spent: float):
    return tqdm(total=float(c.budget.amount), initial=min(spent, c.budget.amount), disable=not c.progress,
                desc=f"{c.algo.name}/{c.env.name}", unit=c.budget.kind, dynamic_ncols=True)


def kill_if_test_asks(update: int) -> None:
    """Test aid, not a config field: SIGKILL this process after update ``update``'s metrics line
    when the environment variable ``AGENTRL_TEST_KILL_AFTER_UPDATE`` equals ``update`` (the kill -9
    resume test sets it; without the variable this does nothing)."""
    if update == int(os.environ.get(KILL_AFTER_UPDATE_ENV, "0")):
        os.kill(os.getpid(), signal.SIGKILL)  # between the metrics line and its checkpoint


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt  # SIGTERM stops like Ctrl-C (the last update's checkpoint is on disk)


def run(c: TrainConfig, resolved: dict | None = None) -> dict:
    """Run (or resume) one training run of a validated config; returns the summary dict."""
    if is_pair_run(c):  # two agents (env=pairfix, algo=ppo_ctde | ppo_independent): their own loop
        return run_pair(c, resolved)
    # ================================================================ build
    torch.set_num_threads(max(1, c.threads))
    rd = RunDir.create(c)
    rd.write_config(resolved if resolved is not None else asdict(c))
    start = start_model(c)
    policy, critic, reference = build_policy(c, start.path)
    meter = ComputeMeter()
    trainer = make_trainer(c.algo.name, c.algo, policy, critic, reference, c.rollout.temperature, meter)
    behavior = BehaviorPolicy(policy, c.rollout.staleness)
    budget = Budget(c.budget.kind, c.budget.amount)
    engine, evaluator = train_engine(c), eval_engine(c, c.eval.tasks * c.eval.samples_per_task)
    update, last_eval, done = 0, {}, False
    state = rd.resume() if c.resume else rd.start_fresh()
    if state:
        for obj, key in ((policy, "policy"), (critic, "critic"), (trainer, "trainer"), (meter, "meter"), (behavior, "behavior")):
            if obj is not None:
                obj.load_state_dict(state[key])
        update, last_eval, done = state["update"], state["last_eval"], state["done"]
        print(f"resumed {rd.path} at update {update}", file=sys.stderr)
    start_info = start.summary()
    logger = make_logger(c.logger.kind, run_dir=rd.path, name=c.logger.name or rd.path.name, group=c.logger.group or None,
                         job_type=c.algo.name, config={**(resolved or asdict(c)), "start_model": start_info})
    logger.define_x_axes()
    signal.signal(signal.SIGTERM, _raise_interrupt)
    pbar, t_run, wall_start = _progress(c, budget.spent(meter)), time.perf_counter(), meter.wall_seconds
    try:
        while not done and not budget.exhausted(meter) and update < c.budget.max_updates:
            # ============================================================ collect
            t_update = time.perf_counter()
            lr = trainer.set_budget_fraction(budget.fraction(meter))  # budget spent before this update
            sampler, version = behavior.sampler()
            trajs = engine.collect(sampler, update_requests(c, update), policy_version=version,
                                   generator=sampling_generator(c, update))
            collect_seconds = time.perf_counter() - t_update
            meter.add_trajectories(trajs)
            # ============================================================ update
            train_metrics = trainer.update(trajs)
            update += 1
            meter.updates = update
            behavior.push(policy)
            meter.wall_seconds += time.perf_counter() - t_update
            # ============================================================ log, maybe evaluate
            metrics = {"update": update, "algo": c.algo.name, "policy_version": update, "sampler_version": version,
                       **rollout_metrics(trajs, collect_seconds), **train_metrics, "train/lr": lr, **meter.metrics()}
            done = budget.exhausted(meter) or update >= c.budget.max_updates
            if done or (c.eval.every and update % c.eval.every == 0):
                last_eval = evaluate_policy(c, evaluator, policy, rd.path if done else None)
                metrics.update(last_eval)
            metrics["compute/budget_fraction"] = budget.fraction(meter)
            rd.append_metrics(metrics)
            logger.log(jsonable(metrics))
            kill_if_test_asks(update)
            # ============================================================ save
            rd.save_checkpoint({"policy": policy.state_dict(), "critic": critic.state_dict() if critic is not None else None,
                                "trainer": trainer.state_dict(), "meter": meter.state_dict(),
                                "behavior": behavior.state_dict(), "update": update, "last_eval": last_eval, "done": done})
            pbar.n = min(budget.spent(meter), float(c.budget.amount))
            pbar.set_postfix(upd=update, succ=f"{metrics['rollout/success_rate']:.2f}",
                             eval=f"{last_eval.get('eval/success', float('nan')):.2f}", s=f"{time.perf_counter() - t_run:.0f}")
    except KeyboardInterrupt:
        pbar.close()
        logger.finish()
        print(f"interrupted at update {update}; re-run the same command to resume from {rd.checkpoint_path}", file=sys.stderr)
        raise SystemExit(130)
    # ================================================================ summary
    pbar.close()
    last_eval = last_eval or evaluate_policy(c, evaluator, policy, rd.path)
    engine.close()
    evaluator.close()
    summary = {**last_eval, **meter.metrics(), **start_info, "run_dir": str(rd.path), "algo": c.algo.name,
               "env": c.env.name, "updates": update, "seed": c.seed, "budget/kind": c.budget.kind,
               "budget/amount": c.budget.amount, "critic": resolve_critic(c),
               "wall_seconds_this_process": time.perf_counter() - t_run, "wall_seconds_updates": meter.wall_seconds - wall_start}
    rd.write_summary(summary)
    logger.log({k: v for k, v in jsonable(summary).items() if k.startswith(("eval/", "start_model/success"))})
    if (rd.path / TRANSCRIPTS_FILE).exists():
        logger.log_table("eval/transcripts", list(TABLE_COLUMNS), transcript_rows(load_transcripts(rd.path), c.algo.name))
    logger.finish()
    print(json.dumps({k: summary[k] for k in ("eval/success", "start_model/success", "compute/rollouts", "updates", "run_dir")}),
          file=sys.stderr)
    del policy, critic, reference, trainer, behavior, engine, evaluator
    release_freed_memory()  # a joblib worker's next sweep job starts from what is still live
    return summary


__all__ = ["KILL_AFTER_UPDATE_ENV", "evaluate_policy", "kill_if_test_asks", "rollout_metrics", "run"]
