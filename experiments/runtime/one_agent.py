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

from algos import metric_keys as mk
from algos.compute import ComputeMeter
from algos.metrics import group_outcome_rates
from algos.evaluation import evaluate, hack_metrics
from algos.trainer import make_trainer
from experiments.runfiles.transcripts import save_transcripts
from experiments.runtime.adapters import PolicyCheckpoint
from experiments.runtime.async_sampler import AsyncSampler, torch_dtype
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
        mk.ROLLOUT_TRAJECTORIES: len(trajs),
        mk.ROLLOUT_MASKED: len(trajs) - len(live),
        mk.ROLLOUT_SUCCESS_RATE: sum(int(t.verified or 0) for t in live) / n,
        mk.ROLLOUT_TRAIN_REWARD_MEAN: sum(t.train_reward for t in live) / n,
        mk.ROLLOUT_MEAN_TURNS: sum(t.turns for t in live) / n,
        mk.ROLLOUT_MEAN_SEGMENTS: sum(len(t.segments) for t in live) / n,
        mk.ROLLOUT_MEAN_GENERATED_TOKENS: sum(t.generated_tokens for t in live) / n,
        mk.ROLLOUT_MEAN_OBSERVATION_TOKENS: sum(t.observation_tokens for t in live) / n,
        mk.ROLLOUT_MEAN_TOOL_SECONDS: sum(t.tool_seconds for t in live) / n,
        mk.ROLLOUT_TOOL_FAILURE_RATE: sum(1 for t in live if t.tool_failures) / n,
        **hack_metrics(trajs, mk.ROLLOUT),
        mk.ROLLOUT_GENERATED_TOKENS_PER_SECOND: sum(t.generated_tokens for t in trajs) / max(collect_seconds, 1e-9),
        mk.ROLLOUT_COLLECT_SECONDS: collect_seconds,
    }
    if live:
        ver = torch.tensor([float(t.verified or 0) for t in live])
        gid = torch.tensor([t.group_id for t in live], dtype=torch.long)
        rates = group_outcome_rates(ver, gid)
        m[mk.ROLLOUT_MIXED_GROUP_RATE] = rates["mixed"]
        m[mk.ROLLOUT_ALL_ZERO_RATE] = rates["all_zero"]
        m[mk.ROLLOUT_ALL_ONE_RATE] = rates["all_one"]
        rew = torch.tensor([t.train_reward for t in live])
        m[mk.ROLLOUT_REWARD_MIXED_GROUP_RATE] = group_outcome_rates(rew, gid)["mixed"] if len(set(rew.tolist())) <= 2 else float("nan")
    for reason, k in Counter(t.stop_reason for t in trajs).items():
        m[mk.member(mk.ROLLOUT_STOP, reason=reason)] = k
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
                            split="train", prefix=mk.EVAL_TRAIN))
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
        self.asynchronous = c.rollout.mode == "async"
        self.behavior = BehaviorPolicy(self.policy, c.rollout.staleness, torch_dtype(c.rollout.sampler_dtype),
                                       local=not self.asynchronous)
        self.engine = None if self.asynchronous else train_engine(c)
        self.evaluator = eval_engine(c, c.eval.tasks * c.eval.samples_per_task)
        self.sampler: AsyncSampler | None = None  # started at the first collect (after a resume's load)
        self._lr = float("nan")

    def set_budget_fraction(self, fraction: float) -> float:
        self._lr = self.trainer.set_budget_fraction(fraction)
        return self._lr

    def collect(self, update: int) -> Collected:
        if self.asynchronous:
            return self._receive(update)
        t0 = time.perf_counter()
        sampler, version = self.behavior.sampler()
        trajs = self.engine.collect(sampler, update_requests(self.c, update), policy_version=version,
                                    generator=sampling_generator(self.c, update))
        seconds = time.perf_counter() - t0
        self.meter.add_trajectories(trajs, warmup=self.trainer.policy_frozen())  # the update they feed
        return Collected(trajs, update, version, seconds)

    def _receive(self, update: int) -> Collected:
        """Batch ``update`` from the sampler process (started here on the first call)."""
        if self.sampler is None:
            self.sampler = AsyncSampler(self.c, self.start.path, self.behavior.versioned(), first_update=update)
        got, waited = self.sampler.get(update)
        self.meter.add_trajectories(got.trajectories, warmup=self.trainer.policy_frozen())
        self._waits = {mk.ASYNC_TRAINER_WAIT_SECONDS: waited, mk.ASYNC_SAMPLER_WAIT_SECONDS: got.wait_seconds}
        return Collected(got.trajectories, update, got.version, got.sample_seconds)

    def update(self, batch: Collected) -> dict:
        train_metrics = self.trainer.update(batch.trajectories)
        self.behavior.push(self.policy)
        if self.sampler is not None:
            self.sampler.publish(*self.behavior.versioned()[-1])
        return {"policy_version": batch.update + 1, "sampler_version": batch.version,
                **rollout_metrics(batch.trajectories, batch.seconds),
                **(self._waits if self.asynchronous else {}), **train_metrics, mk.TRAIN_LR: self._lr}

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
        if self.sampler is not None:
            self.sampler.close()
        if self.engine is not None:
            self.engine.close()
        self.evaluator.close()
        del self.policy, self.checkpoint, self.critic, self.reference, self.trainer, self.behavior, self.engine, self.sampler
        del self.evaluator


__all__ = ["OneAgentLearner", "evaluate_policy", "rollout_metrics"]
