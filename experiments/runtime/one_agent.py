"""The one-agent learner of the run loop (``experiments.runtime.loop.run``, protocol
``experiments.runtime.learner.Learner``): the start model (``experiments.runtime.warmstart``),
policy / critic / reference, the trainer, the behaviour policy (staleness), a training and an
evaluation rollout engine, and what one update's metrics line says about them.

One update's learner part of a metrics line, in this order: ``policy_version``,
``sampler_version``, ``rollout/*`` (:func:`rollout_metrics`), the trainer's metrics, ``train/lr``.
An evaluation (:func:`evaluate_policy`) writes ``eval/*`` (and ``eval_train/*``); the final one
saves sample transcripts in the run directory.

Checkpoint (``state_dict``): ``policy`` in its checkpoint form
(``experiments.runtime.adapters.PolicyCheckpoint``: the full state dict, or for a LoRA policy on a
frozen base only the trainable tensors with the base's path and sha256), ``critic``, ``trainer``
(its optimizer holds only trainable parameters), ``meter``, ``behavior`` (snapshots in the same
form). Resume rebuilds the models from the config as at the start of the run (base model + start
checkpoint), then loads this.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import torch

from algos.compute import ComputeMeter
from algos.metrics import group_outcome_rates
from algos.rollout import evaluate, hack_metrics
from algos.trainer import make_trainer
from experiments.runfiles.transcripts import save_transcripts
from experiments.runtime.adapters import PolicyCheckpoint
from experiments.runtime.behavior import BehaviorPolicy
from experiments.runtime.build import (build_policy, eval_engine, eval_seed, policy_layout, sampling_generator,
                                       train_engine, update_requests)
from experiments.runtime.learner import Collected
from experiments.runtime.schema import TrainConfig, resolve_critic
from experiments.runtime.warmstart import start_model


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
        save_transcripts(transcripts_dir, trajs, layout=policy_layout(policy))
    if e.train_split:
        out.update(evaluate(engine, policy, e.tasks, e.samples_per_task, e.temperature, seed=eval_seed(c),
                            split="train", prefix="eval_train/"))
    return out


class OneAgentLearner:
    """The one-agent :class:`~experiments.runtime.learner.Learner` of a validated config whose run
    directory is ``run_dir`` (the final evaluation's transcripts go there)."""

    counters_before_eval = True

    def __init__(self, c: TrainConfig, run_dir: Path) -> None:
        self.c, self.run_dir = c, run_dir
        self.start = start_model(c)
        self.policy, self.critic, self.reference = build_policy(c, self.start.path)
        self.checkpoint = PolicyCheckpoint(self.policy, c.policy.path if c.policy.kind == "hf" else "")
        self.meter = ComputeMeter()
        self.trainer = make_trainer(c.algo.name, c.algo, self.policy, self.critic, self.reference,
                                    c.rollout.temperature, self.meter)
        self.trainer.micro_batch_tokens = c.policy.micro_batch_tokens
        self.behavior = BehaviorPolicy(self.policy, c.rollout.staleness)
        self.engine, self.evaluator = train_engine(c), eval_engine(c, c.eval.tasks * c.eval.samples_per_task)
        self._lr = float("nan")

    def set_budget_fraction(self, fraction: float) -> float:
        self._lr = self.trainer.set_budget_fraction(fraction)
        return self._lr

    def collect(self, update: int) -> Collected:
        t0 = time.perf_counter()
        sampler, version = self.behavior.sampler()
        trajs = self.engine.collect(sampler, update_requests(self.c, update), policy_version=version,
                                    generator=sampling_generator(self.c, update))
        seconds = time.perf_counter() - t0
        self.meter.add_trajectories(trajs, warmup=self.trainer.policy_frozen())  # the update they feed
        return Collected(trajs, update, version, seconds)

    def update(self, batch: Collected) -> dict:
        train_metrics = self.trainer.update(batch.trajectories)
        self.behavior.push(self.policy)
        return {"policy_version": batch.update + 1, "sampler_version": batch.version,
                **rollout_metrics(batch.trajectories, batch.seconds), **train_metrics, "train/lr": self._lr}

    def evaluate(self, final: bool) -> dict:
        return evaluate_policy(self.c, self.evaluator, self.policy, self.run_dir if final else None)

    def state_dict(self) -> dict:
        return {"policy": self.checkpoint.state_dict(),
                "critic": self.critic.state_dict() if self.critic is not None else None,
                "trainer": self.trainer.state_dict(), "meter": self.meter.state_dict(),
                "behavior": self.behavior.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        for obj, key in ((self.checkpoint, "policy"), (self.critic, "critic"), (self.trainer, "trainer"),
                         (self.meter, "meter"), (self.behavior, "behavior")):
            if obj is not None:
                obj.load_state_dict(state[key])

    def start_info(self) -> dict:
        return self.start.summary()

    def summary_extra(self) -> dict:
        return {"critic": resolve_critic(self.c)}

    def close(self) -> None:
        self.engine.close()
        self.evaluator.close()
        del self.policy, self.checkpoint, self.critic, self.reference, self.trainer, self.behavior, self.engine
        del self.evaluator


__all__ = ["OneAgentLearner", "evaluate_policy", "rollout_metrics"]
