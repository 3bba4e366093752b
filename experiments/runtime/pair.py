"""Two-agent training on PairFix: ``algo=ppo_ctde`` or ``algo=ppo_independent``.

    python -m experiments.train algo=ppo_ctde env=pairfix
    python -m experiments.train algo=ppo_independent env=pairfix algo.frozen=[b]

Every knob of a pair run, its default and its check live in ONE place: the Hydra config
(``experiments/runtime/schema.py: TrainConfig`` and ``configs/``; ``configs/env/pairfix.yaml``,
``configs/algo/ppo_ctde.yaml`` / ``ppo_independent.yaml``); the code here reads the validated
``TrainConfig`` itself. What it derives: ``algo.tasks_per_update`` pair episodes per update
(:func:`pair_updates` = ``min(ceil(budget.amount / tasks_per_update), budget.max_updates)``
updates), ``min(rollout.num_envs, tasks_per_update)`` rollout envs (:func:`pair_num_envs`),
``eval.tasks x eval.samples_per_task`` evaluation episodes over task indices ``0..eval.tasks-1``
(:func:`eval_episodes`), the algo schema with one rollout per task (:func:`pair_algo_config`).

:class:`TwoAgentLearner` is the two-agent side of the one run loop
(``experiments.runtime.loop.run``, protocol ``experiments.runtime.learner.Learner``): models
(per agent or shared; a centralized critic of window ``2 * policy.max_len + 2`` for ppo_ctde, a
local one for ppo_independent), the behaviour-cloning warm start of every policy on noisy
scripted-oracle pair demonstrations (``envs.pairfix.agents.PairOracle``; ``warmstart.demos /
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
from dataclasses import fields
from functools import partial
from pathlib import Path

import torch

from algos.compute import ComputeMeter
from algos.pair_rollout import PairEpisode, PairRolloutEngine, agent_trajectories, pair_requests
from algos.policy import PolicyModel, PolicyShape, ValueModel
from algos.ppo_ctde import PairLearner, pair_rollout_metrics
from algos.registry import make_trainer, trainer_traits
from envs.pairfix import AGENTS
from envs.pairfix.agents import PairOracle
from envs.tokenizer import get_tokenizer
from experiments.runtime.bc import behaviour_clone
from experiments.runtime.learner import Collected
from experiments.runtime.rundir import atomic_save
from experiments.runtime.schema import PAIR_ENVS, AlgoConfig, ConfigError, TrainConfig, is_pair_run
from experiments.runtime.seeds import PAIR_DEMO, PAIR_EVAL_OFFSET, PAIR_UPDATE, Stream, stream_seed
from experiments.runtime.warmstart import cached_start_model, start_model_dir, start_model_key


def check_pair_run(c: TrainConfig) -> TrainConfig:
    """``c`` when it is a two-agent config, else a one-line ``ConfigError``."""
    if not is_pair_run(c):
        raise ConfigError(f"env.name={c.env.name!r} is not a two-agent env: a pair run needs env in "
                          f"{', '.join(PAIR_ENVS)}")
    return c


def pair_updates(c: TrainConfig) -> int:
    """Updates of a pair run: ``min(ceil(budget.amount / algo.tasks_per_update), budget.max_updates)``."""
    return min(math.ceil(c.budget.amount / c.algo.tasks_per_update), c.budget.max_updates)


def pair_num_envs(c: TrainConfig) -> int:
    """Rollout envs of a training (and demo) collection: ``min(rollout.num_envs, algo.tasks_per_update)``."""
    return min(c.rollout.num_envs, c.algo.tasks_per_update)


def eval_episodes(c: TrainConfig) -> int:
    """Episodes of one evaluation: ``eval.tasks * eval.samples_per_task``."""
    return c.eval.tasks * c.eval.samples_per_task


def pair_algo_config(c: TrainConfig) -> AlgoConfig:
    """The algo schema the trainers read: every field of ``c.algo`` but ``shared_policy`` and
    ``frozen`` (the learner's business), with one rollout per task."""
    skip = {"name", "group_size", "shared_policy", "frozen"}
    return AlgoConfig(name=c.algo.name, group_size=1,
                      **{f.name: getattr(c.algo, f.name) for f in fields(c.algo) if f.name not in skip})


def shapes(c: TrainConfig) -> tuple[PolicyShape, PolicyShape]:
    """``(policy shape, critic shape)``: the centralized critic (ppo_ctde) reads own + other
    context, so its window is ``2 * max_len + 2``; a local critic's is the policy's."""
    tok, p = get_tokenizer(), c.policy
    shape = PolicyShape(vocab_size=tok.vocab_size, d_model=p.d_model, n_layers=p.n_layers, n_heads=p.n_heads,
                        max_len=p.max_len, mlp_ratio=p.mlp_ratio)
    critic_len = 2 * p.max_len + 2 if trainer_traits(c.algo.name).central_critic else p.max_len
    return shape, PolicyShape(vocab_size=tok.vocab_size, d_model=p.d_model, n_layers=p.n_layers, n_heads=p.n_heads,
                              max_len=critic_len, mlp_ratio=p.mlp_ratio, critic_d_model=p.critic_d_model,
                              critic_n_layers=p.critic_n_layers)


def train_engine(c: TrainConfig) -> PairRolloutEngine:
    """The engine of training (and demo) collections, sampling at ``rollout.temperature``."""
    return PairRolloutEngine(pair_num_envs(c), c.policy.max_len, c.rollout.max_action_tokens, c.rollout.temperature,
                             dict(c.env.kwargs))


def build_learner(c: TrainConfig, warm: bool = True, meter=None) -> PairLearner:
    """Models (seeded by ``seed``), the warm start (``warm``; cached under ``warmstart.cache_dir``),
    and one trainer per agent (or one shared), all counting into ``meter``."""
    torch.manual_seed(c.seed)
    shape, critic_shape = shapes(c)
    owners = ("a",) if c.algo.shared_policy else AGENTS
    policies = {a: PolicyModel(shape) for a in owners}
    critics = {a: ValueModel(critic_shape) for a in owners}
    if warm:
        warm_start(policies if not c.algo.shared_policy else {"a": policies["a"], "b": policies["a"]}, c)
    trainers = {}
    for a in owners:
        trainers[a] = make_trainer(c.algo.name, pair_algo_config(c), policies[a], critic=critics[a],
                                   temperature=c.rollout.temperature, meter=meter)
        trainers[a].micro_batch_tokens = c.policy.micro_batch_tokens
    if c.algo.shared_policy:
        trainers["b"] = trainers["a"]
    return PairLearner(trainers, frozen=tuple(c.algo.frozen))


def warmstart_key(c: TrainConfig, shared: bool) -> str:
    """The start-model cache key of the pair warm start: everything it depends on (shape,
    vocabulary, env, demos, BC, warm-start seed; not the run seed, not the algorithm)."""
    p, w = c.policy, c.warmstart
    return start_model_key({
        "start_model": "pair", "env_kwargs": dict(c.env.kwargs), "d_model": p.d_model, "n_layers": p.n_layers,
        "n_heads": p.n_heads, "max_len": p.max_len, "mlp_ratio": p.mlp_ratio,
        "max_action_tokens": c.rollout.max_action_tokens, "temperature": c.rollout.temperature,
        "train_tasks": c.env.train_tasks, "num_envs": pair_num_envs(c), "demos": w.demos, "demo_noise": w.noise,
        "bc_epochs": w.epochs, "bc_lr": w.lr, "warmstart_seed": w.seed, "shared": shared,
        "vocab": get_tokenizer().id_to_token,
        # bc: 2 = behaviour cloning's logits via forward_at, one padded forward per minibatch
        # (experiments.runtime.bc.behaviour_clone with bucketed=False: the pair warm start keeps the
        # computation C22 and the two-agent README rows were measured with)
        "bc": 2})


def warmstart_path(c: TrainConfig, shared: bool) -> Path:
    """The cache directory of the pair warm start of ``c`` (``<warmstart.cache_dir>/<warmstart_key>``)."""
    return start_model_dir(c, warmstart_key(c, shared))


def warm_start(policies: dict, c: TrainConfig, cache: bool = True) -> None:
    """Behaviour cloning of each agent's policy on its side of noisy-oracle pair demos, from an
    initialisation seeded by ``warmstart.seed`` (whatever the policies held before), so the result
    is a function of the warm-start knobs only; the weights are cached as ``policy_<agent>.pt`` in
    :func:`warmstart_path` (``cache=False``: always rebuild), built once under the start-model
    cache's lock when parallel sweep jobs ask for it together."""
    shared = policies["a"] is policies["b"]
    owners = ("a",) if shared else AGENTS
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
    # warmstart.seed == seed reproduces its initialisation), without moving the global RNG stream
    w = c.warmstart
    with torch.random.fork_rng():
        torch.manual_seed(w.seed)
        for model in dict((id(m), m) for m in policies.values()).values():
            model.load_state_dict(PolicyModel(model.shape).state_dict())
    demo = partial(PairOracle, w.noise)
    episodes = train_engine(c).collect({a: demo for a in AGENTS}, pair_requests(
        w.demos, PAIR_DEMO(w.seed), task_indices=list(range(c.env.train_tasks))))
    seen: dict[int, list] = {}
    for a, model in policies.items():
        seen.setdefault(id(model), []).extend(agent_trajectories(episodes, a))
    for k, (a, model) in enumerate(policies.items()):
        if id(model) in seen:
            behaviour_clone(model, seen.pop(id(model)), w.epochs, w.lr, 16, w.seed + k, bucketed=False)


def evaluate_pair(engine: PairRolloutEngine, models: dict, c: TrainConfig, split: str | None = None,
                  task_indices: list[int] | None = None, seed: int = PAIR_EVAL_OFFSET) -> tuple[dict, list[PairEpisode]]:
    """``pair_rollout_metrics`` of :func:`eval_episodes` episodes on ``split`` (default
    ``eval.split``) over ``task_indices`` (default ``0..eval.tasks-1``, or one task per episode
    when ``eval.tasks`` is 0), sampled with ``engine``'s temperature, seeds from ``seed + seed``."""
    if task_indices is None and c.eval.tasks:
        task_indices = list(range(c.eval.tasks))
    gen = torch.Generator().manual_seed(seed + c.seed)
    eps = engine.collect(models, pair_requests(eval_episodes(c), seed + c.seed, split or c.eval.split, task_indices),
                         -1, gen)
    return pair_rollout_metrics(eps), eps


def update_requests(c: TrainConfig, k: int):
    """The pair requests of update ``k`` (0-based): ``algo.tasks_per_update`` train tasks taken in
    turn from ``0..env.train_tasks-1``, env seeds ``1000 (k + 1) + seed + i``."""
    n, tasks = c.algo.tasks_per_update, c.env.train_tasks
    return pair_requests(n, PAIR_UPDATE(k, c.seed), task_indices=[(k * n + i) % tasks for i in range(n)])


def sampling_generator(c: TrainConfig, k: int) -> torch.Generator:
    """The token-sampling generator of update ``k``'s rollouts (a function of (seed, k) only)."""
    return torch.Generator().manual_seed(stream_seed(c.seed, k, stream=Stream.SAMPLING))


def eval_engine(c: TrainConfig, num_envs: int) -> PairRolloutEngine:
    """The engine of evaluations, sampling at ``eval.temperature``."""
    return PairRolloutEngine(num_envs, c.policy.max_len, c.rollout.max_action_tokens, c.eval.temperature,
                             dict(c.env.kwargs))


# --------------------------------------------------------------------------------------------- the run loop's learner
def count_episodes(meter: ComputeMeter, episodes: list[PairEpisode], warmup: bool = False) -> None:
    """``compute/rollouts`` += pair episodes; tokens, tool seconds and turns of both agents;
    ``warmup``: the episodes feed a critic warm-up update (``compute/warmup_rollouts`` += them too)."""
    for ep in episodes:
        meter.rollouts += 1
        meter.warmup_rollouts += int(warmup)
        meter.masked_rollouts += int(ep.masked)
        for t in ep.trajectories():
            meter.generated_tokens += t.generated_tokens
            meter.observation_tokens += t.observation_tokens
            meter.tool_seconds += t.tool_seconds
            meter.turns += t.turns


def _eval_keys(m: dict) -> dict:
    return {k.replace("rollout/", "eval/"): v for k, v in m.items()}


class TwoAgentLearner:
    """The two-agent :class:`~experiments.runtime.learner.Learner` of a validated pair config: the
    pair learner (``algos.ppo_ctde.PairLearner`` of :func:`build_learner`: the update of both
    agents' trainers, their learning rates and checkpoint state), the compute meter, a training
    engine of :func:`pair_num_envs` envs and an evaluator of ``min(rollout.num_envs, eval
    episodes)``; it adds the rollouts, the evaluation and the meter around the pair learner. The
    start model's evaluation is measured once (at the first :meth:`start_info`) and kept in the
    checkpoint, so a resumed run reports the same one."""

    counters_before_eval = False

    def __init__(self, c: TrainConfig) -> None:
        self.c = check_pair_run(c)
        self.meter = ComputeMeter()
        self.warm = c.policy.init_checkpoint == "warmstart"
        self.pair = build_learner(c, warm=self.warm, meter=self.meter)
        self.engine = train_engine(c)
        self.evaluator = eval_engine(c, min(c.rollout.num_envs, eval_episodes(c)))
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
        count_episodes(self.meter, episodes, warmup=self.pair.critic_warmup())  # the update they feed
        return Collected(episodes, update, update, seconds)

    def update(self, batch: Collected) -> dict:
        train = self.pair.update(batch.trajectories)
        return {**train, "train/lr": self._lr,
                # the one-agent name of the team success, read by the compare report
                "rollout/success_rate": train.get("rollout/success", float("nan")),
                "rollout/collect_seconds": batch.seconds}

    def evaluate(self, final: bool) -> dict:
        return _eval_keys(evaluate_pair(self.evaluator, self.pair.models(), self.c)[0])

    def state_dict(self) -> dict:
        return {**self.pair.state_dict(), "meter": self.meter.state_dict(), "start_eval": self.start_eval}

    def load_state_dict(self, state: dict) -> None:
        self.pair.load_state_dict(state)
        self.meter.load_state_dict(state["meter"])
        self.start_eval = state["start_eval"]

    def start_info(self) -> dict:
        if self.start_eval is None:
            self.start_eval = self.evaluate(final=False)
        return {"start_model/success": self.start_eval.get("eval/success", float("nan")),
                # the cached start model every seed and both algorithms share (the report checks it)
                "start_model/path": str(warmstart_path(self.c, self.pair.shared)) if self.warm else ""}

    def summary_extra(self) -> dict:
        return {"critic": "central" if trainer_traits(self.c.algo.name).central_critic else "local",
                "shared_policy": self.c.algo.shared_policy, "frozen": list(self.c.algo.frozen),
                **{f"start_model/{k}": v for k, v in (self.start_eval or {}).items() if k.startswith("agent_")}}

    def close(self) -> None:
        """Nothing to release: pair engines run in process."""


__all__ = ["TwoAgentLearner", "build_learner", "check_pair_run", "count_episodes", "eval_episodes", "evaluate_pair",
           "pair_algo_config", "pair_num_envs", "pair_updates", "sampling_generator", "shapes", "update_requests",
            "warm_start", "warmstart_key", "warmstart_path"]
