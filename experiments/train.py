"""One training run, top to bottom: ``python -m experiments.train algo=grpo env=bugfix budget.amount=512``.

Phases (each banner-commented below): validate the config (before any compute) -> run directory
and resume -> start model (cached behaviour-cloning warm start) -> models, trainer, rollout
engines, logger -> loop {collect, update, metrics, eval, checkpoint} until the compute budget is
spent -> summary.

Run directory (``run_dir``, default ``runs/<algo>-<env>-<hash of the resolved config>`` so the
same command always maps to the same directory): ``config.yaml``, ``metrics.jsonl`` (one dict per
update, flushed and fsynced each update), ``summary.json``, ``checkpoints/last.pt``, ``wandb/``.

Resume: every update ends with an atomic checkpoint (tmp + rename) holding the models, optimizer,
ComputeMeter, stale-policy snapshots, update index and the byte length of metrics.jsonl at that
point. Re-running the same command (after Ctrl-C, SIGTERM or kill -9) loads it, truncates
metrics.jsonl to that length and continues; all randomness is derived from (seed, update index),
so the final metrics equal an uninterrupted run's (wall-clock fields aside).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import signal
import sys
import time
from collections import Counter, deque
from dataclasses import asdict
from pathlib import Path

import torch

from experiments.config import ConfigError, TrainConfig, register_configs, resolve_critic, validate


def mix_seed(*parts: int) -> int:
    """A deterministic 31-bit seed from integers (run seed, update index, stream id)."""
    h = hashlib.sha256(",".join(str(int(p)) for p in parts).encode()).digest()
    return int.from_bytes(h[:4], "little") & 0x7FFFFFFF


def config_dict(c: TrainConfig) -> dict:
    return asdict(c)


def resolve_run_dir(c: TrainConfig) -> Path:
    if c.run_dir:
        return Path(c.run_dir)
    d = config_dict(c)
    for k in ("run_dir", "runs_root", "logger", "progress", "resume", "threads", "debug_kill_after_update"):
        d.pop(k, None)
    h = hashlib.sha256(json.dumps(d, sort_keys=True, default=str).encode()).hexdigest()[:10]
    return Path(c.runs_root) / f"{c.algo.name}-{c.env.name}-{h}"


def rollout_metrics(trajs, collect_seconds: float) -> dict:
    """``rollout/*`` of one update's training trajectories (masked ones excluded from rates)."""
    from algos.metrics import group_outcome_rates

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
        "rollout/hack_rate": sum(1 for t in live if any(t.hack_flags.values())) / n,
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
    hacks: Counter = Counter()
    for t in live:
        for name, v in t.hack_flags.items():
            hacks[name] += int(bool(v))
    for name, k in hacks.items():
        m[f"rollout/hack/{name}"] = k
    return m


def atomic_save(obj, path: Path) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "wb") as fh:
        torch.save(obj, fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def atomic_write_text(path: Path, text: str) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def run(c: TrainConfig, resolved: dict | None = None) -> dict:
    """Run (or resume) one training run; returns the summary dict."""
    from omegaconf import OmegaConf
    from tqdm import tqdm

    from algos.compute import Budget, ComputeMeter
    from algos.policy import build_models
    from algos.rollout import RolloutEngine, evaluate, make_requests
    from algos.trainer import frozen_copy, make_trainer
    from experiments.config import ENV_IDS
    from experiments.loggers import make_logger
    from experiments.warmstart import (
        compression_kwargs,
        ensure_warmstart,
        env_kwargs,
        eval_seed,
        load_policy_weights,
        policy_shape,
    )

    torch.set_num_threads(max(1, c.threads))
    # ===================================================================== run directory
    run_dir = resolve_run_dir(c)
    (run_dir / "checkpoints").mkdir(parents=True, exist_ok=True)
    ckpt_path = run_dir / "checkpoints" / "last.pt"
    metrics_path = run_dir / "metrics.jsonl"
    resolved = resolved if resolved is not None else config_dict(c)
    atomic_write_text(run_dir / "config.yaml", OmegaConf.to_yaml(OmegaConf.create(resolved)))

    # ===================================================================== start model
    start_extra: dict = {}
    if c.policy.init_checkpoint == "warmstart":
        ws = ensure_warmstart(c)
        start_path, start_success = ws["path"], ws["start_success"]
        if "eval_train/success" in ws.get("start_eval", {}):
            start_extra["start_model/train_split_success"] = ws["start_eval"]["eval_train/success"]
    elif c.policy.init_checkpoint:
        start_path, start_success = c.policy.init_checkpoint, float("nan")
        info = Path(c.policy.init_checkpoint).with_name("warmstart.json")
        if info.exists():
            start_success = json.loads(info.read_text())["start_success"]
    else:
        start_path, start_success = "", float("nan")

    # ===================================================================== models, trainer, engines
    critic_kind = resolve_critic(c)
    shape = policy_shape(c, critic=critic_kind)
    policy, critic = build_models(shape, seed=c.policy.init_seed)
    if start_path:
        load_policy_weights(policy, start_path)
        if critic is not None:  # the separate critic starts from the start model's trunk
            critic.trunk.load_state_dict(policy.trunk.state_dict())
    reference = frozen_copy(policy) if c.algo.kl_coef > 0 else None
    meter = ComputeMeter()
    trainer = make_trainer(c.algo.name, c.algo, policy, critic, reference, c.rollout.temperature, meter)
    budget = Budget(c.budget.kind, c.budget.amount)
    group_size = c.algo.group_size if c.algo.name == "grpo" else max(1, c.algo.group_size)
    per_update = c.algo.tasks_per_update * group_size
    env_id = ENV_IDS[c.env.name]
    comp = compression_kwargs(c)
    train_engine = RolloutEngine(env_id, num_envs=min(c.rollout.num_envs, per_update), max_len=c.policy.max_len,
                                 max_action_tokens=c.rollout.max_action_tokens, temperature=c.rollout.temperature,
                                 env_kwargs=env_kwargs(c), compression=comp)
    n_eval = c.eval.tasks * c.eval.samples_per_task
    eval_engine = RolloutEngine(env_id, num_envs=min(c.rollout.num_envs, n_eval), max_len=c.policy.max_len,
                                max_action_tokens=c.rollout.max_action_tokens, temperature=c.eval.temperature,
                                env_kwargs={**env_kwargs(c), **dict(c.eval.env_kwargs)}, compression=comp)
    sampler = build_models(shape, seed=c.policy.init_seed)[0] if c.rollout.staleness > 0 else None
    snapshots: deque = deque(maxlen=c.rollout.staleness + 1)

    def snapshot() -> dict:
        return {k: v.detach().clone() for k, v in policy.state_dict().items()}

    def run_eval() -> dict:
        out = evaluate(eval_engine, policy, c.eval.tasks, c.eval.samples_per_task, c.eval.temperature,
                       seed=eval_seed(c), split=c.eval.split)
        if c.eval.train_split:
            out.update(evaluate(eval_engine, policy, c.eval.tasks, c.eval.samples_per_task, c.eval.temperature,
                                seed=eval_seed(c), split="train", prefix="eval_train/"))
        return out

    # ===================================================================== resume
    update = 0
    last_eval: dict = {}
    done = False
    if c.resume and ckpt_path.exists():
        state = torch.load(ckpt_path, map_location="cpu", weights_only=False)
        policy.load_state_dict(state["policy"])
        if critic is not None:
            critic.load_state_dict(state["critic"])
        trainer.load_state_dict(state["trainer"])
        meter.load_state_dict(state["meter"])
        snapshots.extend(state["snapshots"])
        update, last_eval, done = state["update"], state["last_eval"], state["done"]
        size = state["metrics_bytes"]
        if metrics_path.exists():
            with open(metrics_path, "r+b") as fh:
                fh.truncate(size)
        print(f"resumed {run_dir} at update {update}", file=sys.stderr)
    else:
        if metrics_path.exists():
            metrics_path.unlink()
        snapshots.append(snapshot())

    start_info = {"start_model/path": start_path, "start_model/success": start_success, **start_extra}
    logger = make_logger(c.logger.kind, run_dir=run_dir, name=c.logger.name or run_dir.name,
                         group=c.logger.group or None, job_type=c.algo.name,
                         config={**resolved, "start_model": {"path": start_path, "success": start_success}})
    logger.define_x_axes()

    # stop cleanly on SIGTERM (the checkpoint of the last finished update is already on disk)
    def _term(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _term)
    pbar = tqdm(total=float(c.budget.amount), initial=min(budget.spent(meter), c.budget.amount),
                disable=not c.progress, desc=f"{c.algo.name}/{c.env.name}", unit=c.budget.kind, dynamic_ncols=True)
    wall_start = meter.wall_seconds
    t_run = time.perf_counter()
    try:
        # ===================================================================== training loop
        while not done and not budget.exhausted(meter) and update < c.budget.max_updates:
            t_update = time.perf_counter()
            # -- collect with the behaviour policy (``staleness`` updates old in async mode)
            task_rng = torch.Generator().manual_seed(mix_seed(c.seed, update, 1))
            reqs = make_requests(c.algo.tasks_per_update, group_size, seed=mix_seed(c.seed, update, 2),
                                 split="train", n_task_pool=c.env.train_tasks, rng=task_rng)
            if sampler is not None:
                sampler.load_state_dict(snapshots[0])
                behavior, version = sampler, update - (len(snapshots) - 1)
            else:
                behavior, version = policy, update
            t0 = time.perf_counter()
            trajs = train_engine.collect(behavior, reqs, policy_version=version,
                                         generator=torch.Generator().manual_seed(mix_seed(c.seed, update, 3)))
            collect_seconds = time.perf_counter() - t0
            meter.add_trajectories(trajs)
            # -- update (learning rate from the budget fraction spent before it: exact on resume)
            lr = trainer.set_budget_fraction(budget.fraction(meter))
            train_metrics = trainer.update(trajs)
            train_metrics["train/lr"] = lr
            update += 1
            meter.updates = update
            snapshots.append(snapshot())
            meter.wall_seconds += time.perf_counter() - t_update
            metrics = {"update": update, "algo": c.algo.name, "policy_version": update,
                       "sampler_version": version}
            metrics.update(rollout_metrics(trajs, collect_seconds))
            metrics.update(train_metrics)
            metrics.update(meter.metrics())
            # -- evaluation (every ``eval.every`` updates and at the end)
            finished = budget.exhausted(meter) or update >= c.budget.max_updates
            if finished or (c.eval.every and update % c.eval.every == 0):
                last_eval = run_eval()
                metrics.update(last_eval)
            metrics["compute/budget_fraction"] = budget.fraction(meter)
            # -- log, flush, checkpoint
            with open(metrics_path, "a") as fh:
                fh.write(json.dumps(_jsonable(metrics)) + "\n")
                fh.flush()
                os.fsync(fh.fileno())
            logger.log(_jsonable(metrics))
            marker = run_dir / ".debug_killed"
            if c.debug_kill_after_update == update and not marker.exists():
                # testing aid: die the hard way (once) between the metrics line and its checkpoint
                marker.touch()
                os.kill(os.getpid(), signal.SIGKILL)
            done = finished
            atomic_save({
                "policy": policy.state_dict(), "critic": critic.state_dict() if critic is not None else None,
                "trainer": trainer.state_dict(), "meter": meter.state_dict(), "snapshots": list(snapshots),
                "update": update, "last_eval": last_eval, "done": done,
                "metrics_bytes": metrics_path.stat().st_size,
            }, ckpt_path)
            pbar.n = min(budget.spent(meter), float(c.budget.amount))
            elapsed = time.perf_counter() - t_run
            pbar.set_postfix(upd=update, succ=f"{metrics['rollout/success_rate']:.2f}",
                             eval=f"{last_eval.get('eval/success', float('nan')):.2f}",
                             tok_s=f"{meter.generated_tokens / max(meter.wall_seconds, 1e-9):.0f}",
                             s=f"{elapsed:.0f}")
            pbar.refresh()
    except KeyboardInterrupt:
        pbar.close()
        logger.finish()
        print(f"interrupted at update {update}; re-run the same command to resume from {ckpt_path}", file=sys.stderr)
        raise SystemExit(130)
    pbar.close()
    # ===================================================================== summary
    if not last_eval:
        last_eval = run_eval()
    train_engine.close()
    eval_engine.close()
    summary = {**last_eval, **meter.metrics(), **start_info, "run_dir": str(run_dir), "algo": c.algo.name,
               "env": c.env.name, "updates": update, "seed": c.seed, "budget/kind": c.budget.kind,
               "budget/amount": c.budget.amount, "critic": critic_kind,
               "wall_seconds_this_process": time.perf_counter() - t_run, "wall_seconds_updates": meter.wall_seconds - wall_start}
    atomic_write_text(run_dir / "summary.json", json.dumps(_jsonable(summary), indent=2))
    logger.log({k: v for k, v in _jsonable(summary).items() if k.startswith(("eval/", "start_model/success"))})
    logger.finish()
    print(json.dumps({k: summary[k] for k in ("eval/success", "start_model/success", "compute/rollouts", "updates", "run_dir")}),
          file=sys.stderr)
    return summary


def _jsonable(d: dict) -> dict:
    out = {}
    for k, v in d.items():
        if isinstance(v, torch.Tensor):
            v = v.item()
        if isinstance(v, float) and not math.isfinite(v):
            v = None
        out[k] = v
    return out


register_configs()


def main() -> None:
    import hydra
    from omegaconf import DictConfig, OmegaConf

    @hydra.main(version_base="1.3", config_path="../configs", config_name="config")
    def _main(cfg: DictConfig):
        try:
            c = validate(cfg)  # before any compute
        except ConfigError as e:
            print(f"config error: {e}", file=sys.stderr)
            sys.exit(2)
        return run(c, resolved=OmegaConf.to_container(cfg, resolve=True))

    _main()


if __name__ == "__main__":
    main()
