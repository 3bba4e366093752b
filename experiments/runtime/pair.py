"""Two-agent training on PairFix: ``algo=ppo_ctde`` or ``algo=ppo_independent``.

    python -m experiments.train algo=ppo_ctde env=pairfix
    python -m experiments.train algo=ppo_independent env=pairfix algo.frozen=[b]

Every knob of a pair run, its default and its check live in ONE place: the Hydra config
(``experiments/runtime/schema.py: TrainConfig`` and ``configs/``; ``configs/env/pairfix.yaml``,
``configs/algo/ppo_ctde.yaml`` / ``ppo_independent.yaml``); the code here reads the validated
``TrainConfig`` itself. What it derives: ``algo.tasks_per_update`` pair episodes per update
(:func:`pair_updates` = ``min(ceil(budget.amount / tasks_per_update), budget.max_updates)``
updates), ``eval.tasks x eval.samples_per_task`` evaluation episodes over task indices
``0..eval.tasks-1`` (:func:`eval_episodes`), the algo schema with one rollout per task
(:func:`pair_algo_config`), each agent's critic shape (:func:`critic_shape`). Everything else is
a one-agent run's: the rollout engines (``experiments.runtime.build.train_engine`` /
``eval_engine``: ``algos.rollout.RolloutEngine``, whose agent dimension is the env's), each
update's requests and sampling generator, the evaluation's seeds (``build.update_requests``,
``sampling_generator``, ``eval_seed``), the demonstrations' requests
(``experiments.runtime.warmstart.demo_requests``), the warm-start cache key's fields and the
compute meter's counting.

:class:`TwoAgentLearner` is the two-agent side of the one run loop
(``experiments.runtime.loop.run``, protocol ``experiments.runtime.learner.Learner``): models
(per agent or shared: the tiny policy or, ``policy.kind=hf``, the model of ``policy.path``; each
critic a separate ``ValueModel`` over the policy's ids, :func:`critic_shape`: a centralized one of
window ``2 * policy.max_len + 2`` for ppo_ctde with the tiny policy, a local one for
ppo_independent), the behaviour-cloning warm start of every policy on noisy scripted-oracle pair
demonstrations laid out in the policy's layout (``envs.pairfix.agents.PairOracle``; ``warmstart.demos /
noise / epochs / lr / seed``, cached by ``experiments.runtime.warmstart.cached_start_model``),
each update's ``algo.tasks_per_update`` pair episodes on train tasks (``budget.kind=rollouts``:
one rollout = one pair episode) and the evaluation on ``eval.split``.

Metrics (``metrics.jsonl``, one line per update): ``agent_a/...`` and ``agent_b/...`` for each
agent's trainer metrics (``train/*``, ``critic/*``) and rollout metrics
(``algos.ppo_ctde.pair_rollout_metrics``), the team's ``rollout/success`` and
``rollout/episodes``; evaluations replace ``rollout/`` by ``eval/`` (``eval/success``,
``agent_a/eval/success_bug_in_a_only``, ...); ``compute/*`` counters (``compute/rollouts`` counts
pair episodes; tokens, turns and train FLOPs sum both agents), after the evaluation's keys.

A pair run has one loop, the run loop's: ``experiments.runtime.loop.run`` drives
:class:`TwoAgentLearner` exactly as it drives the one-agent learner. Deterministic on CPU for a
given config.
"""

from __future__ import annotations

import math
import time
from dataclasses import fields, replace
from pathlib import Path

import torch

from algos import metric_keys as mk
from algos.compute import ComputeMeter
from algos.pair_rollout import agent_trajectories
from algos.policy import PolicyModel, PolicyShape, ValueModel
from algos.ppo_ctde import PairLearner, pair_rollout_metrics
from algos.registry import make_trainer, trainer_traits
from algos.evaluation import evaluation_rollouts
from envs.pairfix import AGENTS
from experiments.runtime.adapters import PolicyCheckpoint
from experiments.runtime.bc import behaviour_clone
from experiments.runtime.build import (eval_engine, eval_seed, hf_policy, policy_shape, sampling_generator,
                                       train_engine, update_requests)
from experiments.runtime.learner import Collected
from experiments.runtime.rundir import atomic_save
from experiments.runtime.schema import PAIR_ENVS, AlgoConfig, ConfigError, TrainConfig, is_pair_run
from experiments.runtime.warmstart import (cache_key, cached_start_model, demo_requests, pair_demo_agents,
                                           start_model_dir, start_model_key)


def check_pair_run(c: TrainConfig) -> TrainConfig:
    """``c`` when it is a two-agent config, else a one-line ``ConfigError``."""
    if not is_pair_run(c):
        raise ConfigError(f"env.name={c.env.name!r} is not a two-agent env: a pair run needs env in "
                          f"{', '.join(PAIR_ENVS)}")
    return c


def pair_updates(c: TrainConfig) -> int:
    """Updates of a pair run: ``min(ceil(budget.amount / algo.tasks_per_update), budget.max_updates)``."""
    return min(math.ceil(c.budget.amount / c.algo.tasks_per_update), c.budget.max_updates)


def eval_episodes(c: TrainConfig) -> int:
    """Episodes of one evaluation: ``eval.tasks * eval.samples_per_task``."""
    return c.eval.tasks * c.eval.samples_per_task


def pair_algo_config(c: TrainConfig) -> AlgoConfig:
    """The algo schema the trainers read: every field of ``c.algo`` but ``shared_policy`` and
    ``frozen`` (the learner's business), with one rollout per task."""
    skip = {"name", "group_size", "shared_policy", "frozen"}
    return AlgoConfig(name=c.algo.name, group_size=1,
                      **{f.name: getattr(c.algo, f.name) for f in fields(c.algo) if f.name not in skip})


def critic_shape(c: TrainConfig, policy=None) -> PolicyShape:
    """Each agent's critic: the policy's shape (``build.policy_shape``) whose window, for a
    centralized critic (ppo_ctde: own context + the other's without its first id + the layout's
    separator ``layout.next("")``), is ``2 * policy.max_len + 1 + len(separator)`` (the word
    layout's [SEP]: ``2 * policy.max_len + 2``). For ``policy.kind=hf`` the critic reads the
    Hugging Face ``policy``'s ids: its vocabulary and its chat layout's separator."""
    shape, sep = policy_shape(c), 1
    if c.policy.kind == "hf":
        if policy is None:
            raise ValueError("critic_shape of policy.kind=hf needs the policy (its vocabulary and layout)")
        shape, sep = replace(shape, vocab_size=policy.shape.vocab_size), len(policy.layout.next(""))
    return replace(shape, max_len=2 * shape.max_len + 1 + sep) if trainer_traits(c.algo.name).central_critic else shape


def pair_policies(c: TrainConfig, owners: tuple[str, ...]) -> dict:
    """``{owner: untrained policy}``: the tiny ``PolicyModel`` of ``policy_shape(c)`` (drawn in
    order from ``seed``), or for ``policy.kind=hf`` the model of ``policy.path`` for each
    (``build.hf_policy``: LoRA adapters from ``policy.init_seed``); the global RNG is left at
    ``seed`` for the critics either way."""
    if c.policy.kind == "hf":
        policies = {a: hf_policy(c) for a in owners}
        torch.manual_seed(c.seed)
        return policies
    torch.manual_seed(c.seed)
    return {a: PolicyModel(policy_shape(c)) for a in owners}


def build_learner(c: TrainConfig, warm: bool = True, meter=None) -> PairLearner:
    """Models (:func:`pair_policies`; the critics seeded by ``seed``), the warm start (``warm``;
    cached under ``warmstart.cache_dir``), and one trainer per agent (or one shared), all counting
    into ``meter``."""
    owners = AGENTS[:1] if c.algo.shared_policy else AGENTS
    policies = pair_policies(c, owners)
    critics = {a: ValueModel(critic_shape(c, policies[a])) for a in owners}
    if warm:
        warm_start({a: policies[a if a in policies else owners[0]] for a in AGENTS}, c)
    trainers = {}
    for a in owners:
        trainers[a] = make_trainer(c.algo.name, pair_algo_config(c), policies[a], critic=critics[a],
                                   temperature=c.rollout.temperature, meter=meter)
        trainers[a].micro_batch_tokens = c.policy.micro_batch_tokens
    return PairLearner({a: trainers[a if a in trainers else owners[0]] for a in AGENTS}, frozen=tuple(c.algo.frozen))


def warmstart_key(c: TrainConfig, shared: bool) -> str:
    """The start-model cache key of the pair warm start: the one-agent warm start's key
    (``experiments.runtime.warmstart.cache_key``: env, policy shape, warm-start group, action cap,
    ...; not the run seed, not the algorithm) and what only the pair warm start has: one policy
    per agent or one shared, and how behaviour cloning slices its minibatches (:func:`pair_bc_bucketed`)."""
    return start_model_key({"warmstart": cache_key(c), "shared": shared, "bc_bucketed": pair_bc_bucketed(c)})


def pair_bc_bucketed(c: TrainConfig) -> bool:
    """Whether the pair warm start clones in length-bucketed micro-batches within
    ``policy.micro_batch_tokens`` (set: the budget bounds what one forward holds) or in one padded
    forward per minibatch (unset)."""
    return c.policy.micro_batch_tokens is not None


def warmstart_path(c: TrainConfig, shared: bool) -> Path:
    """The cache directory of the pair warm start of ``c`` (``<warmstart.cache_dir>/<warmstart_key>``)."""
    return start_model_dir(c, warmstart_key(c, shared))


def warm_start(policies: dict, c: TrainConfig, cache: bool = True) -> None:
    """Behaviour cloning of each agent's policy on its side of noisy-oracle pair demos, from an
    initialisation seeded by ``warmstart.seed`` (whatever the policies held before), so the result
    is a function of the warm-start knobs only; the weights are cached as ``policy_<agent>.pt`` in
    :func:`warmstart_path` (``cache=False``: always rebuild), built once under the start-model
    cache's lock when parallel sweep jobs ask for it together."""
    models = list(policies.values())
    owners = tuple(a for k, (a, m) in enumerate(policies.items()) if all(m is not n for n in models[:k]))
    shared = len(owners) < len(policies)
    if not cache:
        _behaviour_clone_pair(policies, c)
        return

    def build(root: Path) -> None:
        _behaviour_clone_pair(policies, c)
        root.mkdir(parents=True, exist_ok=True)
        for a in owners:  # the last agent's file marks the entry complete
            atomic_save(policies[a].state_dict(), root / f"policy_{a}.pt")

    root, built = cached_start_model(c, warmstart_key(c, shared), f"policy_{owners[-1]}.pt", build)
    if not built:
        for a in owners:
            policies[a].load_state_dict(torch.load(root / f"policy_{a}.pt", weights_only=True))
            policies[a].eval()


def _behaviour_clone_pair(policies: dict, c: TrainConfig) -> None:
    # re-initialise from the warm-start seed (in the order build_learner creates the policies, so
    # warmstart.seed == seed reproduces its initialisation; policy.kind=hf: the model of policy.path
    # with its adapters from policy.init_seed), without moving the global RNG stream
    w = c.warmstart
    with torch.random.fork_rng():
        torch.manual_seed(w.seed)
        for model in dict((id(m), m) for m in policies.values()).values():
            model.load_state_dict((hf_policy(c) if c.policy.kind == "hf" else PolicyModel(model.shape)).state_dict())
    engine = train_engine(c)
    layout = next(iter(policies.values())).layout if c.policy.kind == "hf" else None  # the demos in the policy's ids
    episodes = engine.collect(pair_demo_agents(c), demo_requests(c), layout=layout)
    engine.close()
    seen: dict[int, list] = {}
    for a, model in policies.items():
        seen.setdefault(id(model), []).extend(agent_trajectories(episodes, a))
    for k, (a, model) in enumerate(policies.items()):
        if id(model) in seen:
            behaviour_clone(model, seen.pop(id(model)), w.epochs, w.lr, 16, w.seed + k, bucketed=pair_bc_bucketed(c),
                            max_tokens=c.policy.micro_batch_tokens)


# --------------------------------------------------------------------------------------------- the run loop's learner
def _eval_keys(m: dict) -> dict:
    return {k.replace(mk.ROLLOUT, mk.EVAL): v for k, v in m.items()}


class TwoAgentLearner:
    """The two-agent :class:`~experiments.runtime.learner.Learner` of a validated pair config: the
    pair learner (``algos.ppo_ctde.PairLearner`` of :func:`build_learner`: the update of both
    agents' trainers, their learning rates and checkpoint state), the compute meter and the rollout
    engines of a one-agent run (``build.train_engine`` / ``build.eval_engine``: one engine, whose
    agent dimension is the env's); it adds the rollouts (``build.update_requests``), the evaluation
    and the meter around the pair learner. The
    start model's evaluation is measured once (at the first :meth:`start_info`) and kept in the
    checkpoint, so a resumed run reports the same one."""

    counters_before_eval = False

    def __init__(self, c: TrainConfig) -> None:
        self.c = check_pair_run(c)
        self.meter = ComputeMeter()
        self.warm = c.policy.init_checkpoint == "warmstart"
        self.pair = build_learner(c, warm=self.warm, meter=self.meter)
        base = c.policy.path if c.policy.kind == "hf" else ""
        self.checkpoints = {a: PolicyCheckpoint(self.pair.trainers[a].policy, base) for a in self.pair.owners}
        self.engine, self.evaluator = train_engine(c), eval_engine(c, eval_episodes(c))
        self.start_eval: dict | None = None
        self._lr = float("nan")

    def set_budget_fraction(self, fraction: float) -> float:
        self._lr = self.pair.set_budget_fraction(fraction)
        return self._lr

    def collect(self, update: int) -> Collected:
        t0 = time.perf_counter()
        episodes = self.engine.collect(self.pair.models(), update_requests(self.c, update), update,
                                       sampling_generator(self.c, update))
        seconds = time.perf_counter() - t0
        self.meter.add_trajectories(episodes, warmup=self.pair.critic_warmup())  # the update they feed
        return Collected(episodes, update, update, seconds)

    def update(self, batch: Collected) -> dict:
        train = self.pair.update(batch.trajectories)
        return {**train, mk.TRAIN_LR: self._lr,
                # the one-agent name of the team success, read by the compare report
                mk.ROLLOUT_SUCCESS_RATE: train.get(mk.ROLLOUT_SUCCESS, float("nan")),
                mk.ROLLOUT_COLLECT_SECONDS: batch.seconds}

    def evaluate(self, final: bool) -> dict:
        """``pair_rollout_metrics`` (as ``eval/...``) of a one-agent run's evaluation episodes
        (``algos.evaluation.evaluation_rollouts``: ``eval.tasks x eval.samples_per_task`` on
        ``eval.split`` at ``eval.temperature``, seeds from ``build.eval_seed``)."""
        e = self.c.eval
        eps = evaluation_rollouts(self.evaluator, self.pair.models(), e.tasks, e.samples_per_task, e.temperature,
                                  eval_seed(self.c), e.split)
        return _eval_keys(pair_rollout_metrics(eps))

    def state_dict(self) -> dict:
        """The pair learner's state with each owner's policy in its checkpoint form
        (``adapters.PolicyCheckpoint``: a LoRA policy keeps its trainable tensors and its base's
        hash, not the base weights), the meter and the start model's evaluation."""
        policies = {a: ck.state_dict() for a, ck in self.checkpoints.items()}
        return {**self.pair.state_dict(), "policy": policies, "meter": self.meter.state_dict(),
                "start_eval": self.start_eval}

    def load_state_dict(self, state: dict) -> None:
        for a, ck in self.checkpoints.items():
            ck.load_state_dict(state["policy"][a])
        self.pair.load_state_dict({**state, "policy": None})
        self.meter.load_state_dict(state["meter"])
        self.start_eval = state["start_eval"]

    def start_info(self) -> dict:
        if self.start_eval is None:
            self.start_eval = self.evaluate(final=False)
        return {mk.START_MODEL_SUCCESS: self.start_eval.get(mk.EVAL_SUCCESS, float("nan")),
                # the cached start model every seed and both algorithms share (the report checks it)
                mk.START_MODEL_PATH: str(warmstart_path(self.c, self.pair.shared)) if self.warm else ""}

    def summary_extra(self) -> dict:
        return {"critic": "central" if trainer_traits(self.c.algo.name).central_critic else "local",
                "shared_policy": self.c.algo.shared_policy, "frozen": list(self.c.algo.frozen),
                **{mk.START_MODEL + k: v for k, v in (self.start_eval or {}).items() if k.startswith(mk.AGENT)}}

    def close(self) -> None:
        self.engine.close()
        self.evaluator.close()


__all__ = ["TwoAgentLearner", "build_learner", "check_pair_run", "critic_shape", "eval_episodes",
           "pair_algo_config", "pair_bc_bucketed", "pair_updates", "warm_start", "warmstart_key", "warmstart_path"]
