"""Two-agent training on PairFix: ``algo=ppo_ctde`` or ``algo=ppo_independent``.

    python -m experiments.train algo=ppo_ctde env=pairfix
    python -m experiments.train algo=ppo_independent env=pairfix algo.frozen=[b]

Every knob of a pair run, its default and its check live in ONE place: the Hydra config
(``experiments/runtime/schema.py: TrainConfig`` and ``configs/``; ``configs/env/pairfix.yaml``,
``configs/algo/ppo_ctde.yaml`` / ``ppo_independent.yaml``). :class:`PairConfig` declares none: it
is the frozen bundle of what the pair code reads, derived from a validated ``TrainConfig`` by
:func:`pair_config` (its only constructor).

``experiments/train.py`` validates the config and hands a two-agent env (``env=pairfix``) to
:func:`run_pair`, which maps the ``TrainConfig`` to a :class:`PairConfig` (:func:`pair_config`)
and reads, top to bottom: 1) run directory, models (per agent or shared; a centralized critic of
window ``2 * policy.max_len + 2`` for ppo_ctde, a local one for ppo_independent), 2) the
behaviour-cloning warm start of every policy on noisy scripted-oracle pair demonstrations
(``envs.pairfix.agents.PairOracle``; ``warmstart.demos / noise / epochs / lr``, cached), 3) the
loop {collect ``algo.tasks_per_update`` pair episodes on train tasks, ``PairLearner.update``,
log, maybe evaluate, checkpoint} until ``budget.amount`` pair episodes (``budget.kind=rollouts``:
one rollout = one pair episode) or ``budget.max_updates``, 4) the final evaluation on
``eval.tasks x eval.samples_per_task`` episodes of ``eval.split``, and ``summary.json``.

Metrics (``metrics.jsonl``, one line per update, and the logger): ``agent_a/...`` and
``agent_b/...`` for each agent's trainer metrics (``train/*``, ``critic/*``) and rollout metrics
(``algos.ppo_ctde.pair_rollout_metrics``), the team's ``rollout/success`` and
``rollout/episodes``; evaluations replace ``rollout/`` by ``eval/`` (``eval/success``,
``agent_a/eval/success_bug_in_a_only``, ...); ``compute/*`` counters (``compute/rollouts`` counts
pair episodes; tokens, turns and train FLOPs sum both agents). Resume: every update ends with an
atomic checkpoint (models, optimizers, meter, update index); re-running the same command
continues from it, and every update's randomness derives from ``(seed, update index, stream)``.

:func:`train_pair` runs a :class:`PairConfig` directly (no run directory; tests and claims, which
compose their ``TrainConfig`` with Hydra: ``experiments.claims.common.pair_claims_config``).
Deterministic on CPU for a given config.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import sys
import time
from dataclasses import asdict, dataclass, fields
from functools import partial
from pathlib import Path

import torch

from algos.pair_rollout import PairRolloutEngine, agent_trajectories, pair_requests
from algos.policy import PolicyModel, PolicyShape, ValueModel
from algos.ppo_ctde import PairLearner, pair_rollout_metrics
from algos.registry import make_trainer
from envs.pairfix import AGENTS
from envs.pairfix.agents import PairOracle
from envs.tokenizer import get_tokenizer
from algos.compute import ComputeMeter
from experiments.runtime.bc import behaviour_clone
from experiments.runtime.loggers import make_logger
from experiments.runtime.rundir import RunDir, atomic_save, file_lock, jsonable
from experiments.runtime.schema import PAIR_ENVS, AlgoConfig, ConfigError, TrainConfig, is_pair_run
from experiments.runtime.seeds import PAIR_DEMO, PAIR_EVAL_OFFSET, PAIR_UPDATE, Stream, stream_seed


@dataclass(frozen=True)
class PairConfig:
    """What one two-agent run reads, derived from a validated :class:`TrainConfig` by
    :func:`pair_config` (its only constructor; no defaults, no checks of its own).

    Every knob, its default and its validation live in ``experiments/runtime/schema.py`` (one home per
    knob); the field names are the ones the pair code reads. Field <- ``TrainConfig`` key:
    ``algo`` <- ``algo.name`` (ppo_ctde | ppo_independent); ``shared_policy`` / ``frozen`` <-
    ``algo.shared_policy`` / ``algo.frozen`` (tuple); ``env_kwargs`` / ``train_tasks`` (task
    indices ``0..train_tasks-1`` of the train split) <- ``env.kwargs`` / ``env.train_tasks``;
    ``d_model, n_layers, n_heads, max_len, mlp_ratio`` <- ``policy.*``; ``max_action_tokens`` /
    ``temperature`` <- ``rollout.*``; ``episodes_per_update`` <- ``algo.tasks_per_update``;
    ``updates`` <- ``min(ceil(budget.amount / tasks_per_update), budget.max_updates)``;
    ``num_envs`` <- ``min(rollout.num_envs, tasks_per_update)``; ``demos, demo_noise, bc_epochs,
    bc_lr, warmstart_seed`` <- ``warmstart.demos / noise / epochs / lr / seed`` (the start model's
    seed, not the run seed, so every run seed and both algorithms start from one cached start
    model); ``eval_episodes`` <- ``eval.tasks * eval.samples_per_task``, ``eval_tasks`` (indices
    ``0..eval_tasks-1`` cycled over the episodes) <- ``eval.tasks`` (>= 1),
    ``eval_split`` / ``eval_temperature`` <- ``eval.split / temperature``; ``seed`` <- ``seed``;
    ``algo_fields`` <- every field of the algo schema but ``name, group_size, shared_policy,
    frozen``."""

    algo: str
    shared_policy: bool
    frozen: tuple[str, ...]
    env_kwargs: dict
    d_model: int
    n_layers: int
    n_heads: int
    max_len: int
    mlp_ratio: int
    max_action_tokens: int
    temperature: float
    train_tasks: int
    updates: int
    episodes_per_update: int
    num_envs: int
    demos: int
    demo_noise: float
    bc_epochs: int
    bc_lr: float
    eval_episodes: int
    eval_split: str
    eval_tasks: int
    eval_temperature: float
    seed: int
    warmstart_seed: int
    algo_fields: dict

    def algo_config(self) -> AlgoConfig:
        """The algo schema of ``algo`` rebuilt from ``algo_fields`` (one rollout per task)."""
        return AlgoConfig(name=self.algo, group_size=1, **self.algo_fields)


def shapes(c: PairConfig) -> tuple[PolicyShape, PolicyShape]:
    """``(policy shape, critic shape)``: the centralized critic (ppo_ctde) reads own + other
    context, so its window is ``2 * max_len + 2``; a local critic's is the policy's."""
    tok = get_tokenizer()
    shape = PolicyShape(vocab_size=tok.vocab_size, d_model=c.d_model, n_layers=c.n_layers, n_heads=c.n_heads,
                        max_len=c.max_len, mlp_ratio=c.mlp_ratio)
    critic_len = 2 * c.max_len + 2 if c.algo == "ppo_ctde" else c.max_len
    return shape, PolicyShape(vocab_size=tok.vocab_size, d_model=c.d_model, n_layers=c.n_layers, n_heads=c.n_heads,
                              max_len=critic_len, mlp_ratio=c.mlp_ratio)


def build_learner(c: PairConfig, warm: bool = True, warm_root: Path | None = None, meter=None) -> PairLearner:
    """Models (seeded by ``c.seed``), the warm start (``warm``; cached under ``warm_root``, default
    ``WARMSTART_DIR``), and one trainer per agent (or one shared), all counting into ``meter``."""
    torch.manual_seed(c.seed)
    shape, critic_shape = shapes(c)
    owners = ("a",) if c.shared_policy else AGENTS
    policies = {a: PolicyModel(shape) for a in owners}
    critics = {a: ValueModel(critic_shape) for a in owners}
    if warm:
        warm_start(policies if not c.shared_policy else {"a": policies["a"], "b": policies["a"]}, c, root=warm_root)
    trainers = {}
    for a in owners:
        trainers[a] = make_trainer(c.algo, c.algo_config(), policies[a], critic=critics[a], temperature=c.temperature,
                                   meter=meter)
    if c.shared_policy:
        trainers["b"] = trainers["a"]
    return PairLearner(trainers, frozen=c.frozen)


WARMSTART_DIR = Path(__file__).resolve().parents[2] / ".cache" / "agentrl" / "pair_warmstart"


def warmstart_key(c: PairConfig, shared: bool) -> str:
    """Hash of everything the warm start depends on (shape, vocabulary, env, demos, BC, warm-start
    seed; not the run seed)."""
    blob = {k: getattr(c, k) for k in ("env_kwargs", "d_model", "n_layers", "n_heads", "max_len", "mlp_ratio", "max_action_tokens",
                                        "temperature", "train_tasks", "num_envs", "demos", "demo_noise", "bc_epochs",
                                        "bc_lr", "warmstart_seed")}
    # bc: 2 = behaviour cloning's logits via forward_at, one padded forward per minibatch
    # (experiments.runtime.bc.behaviour_clone with bucketed=False: the pair warm start keeps the computation
    # C22 and the two-agent README rows were measured with)
    blob.update(shared=shared, vocab=get_tokenizer().id_to_token, bc=2)
    return hashlib.sha256(json.dumps(blob, sort_keys=True, default=str).encode()).hexdigest()[:16]


def warm_start(policies: dict, c: PairConfig, cache: bool = True, root: Path | None = None) -> None:
    """Behaviour cloning of each agent's policy on its side of noisy-oracle pair demos, from an
    initialisation seeded by ``c.warmstart_seed`` (whatever the policies held before), so the result
    is a function of the warm-start knobs only; the weights are cached under ``warmstart_path(c,
    shared, root)`` (``cache=False``: always rebuild), built once under a file lock when parallel
    sweep jobs ask for it together."""
    shared = policies["a"] is policies["b"]
    path = warmstart_path(c, shared, root)
    owners = ("a",) if shared else AGENTS
    with file_lock(path.parent / f".{path.name}.lock") if cache else contextlib.nullcontext():
        if cache and all((path / f"policy_{a}.pt").exists() for a in owners):
            for a in owners:
                policies[a].load_state_dict(torch.load(path / f"policy_{a}.pt", weights_only=True))
                policies[a].eval()
            return
        _behaviour_clone_pair(policies, c)
        if cache:
            path.mkdir(parents=True, exist_ok=True)
            for a in owners:
                atomic_save(policies[a].state_dict(), path / f"policy_{a}.pt")


def warmstart_path(c: PairConfig, shared: bool, root: Path | None = None) -> Path:
    """The cache directory of the warm start of ``c`` (``(root or WARMSTART_DIR)/<warmstart_key>``)."""
    return Path(root if root is not None else WARMSTART_DIR) / warmstart_key(c, shared)


def _behaviour_clone_pair(policies: dict, c: PairConfig) -> None:
    # re-initialise from the warm-start seed (in the order build_learner creates the policies, so
    # warmstart_seed == seed reproduces its initialisation), without moving the global RNG stream
    with torch.random.fork_rng():
        torch.manual_seed(c.warmstart_seed)
        for model in dict((id(m), m) for m in policies.values()).values():
            model.load_state_dict(PolicyModel(model.shape).state_dict())
    engine = PairRolloutEngine(c.num_envs, c.max_len, c.max_action_tokens, c.temperature, c.env_kwargs)
    demo = partial(PairOracle, c.demo_noise)
    episodes = engine.collect({a: demo for a in AGENTS}, pair_requests(c.demos, PAIR_DEMO(c.warmstart_seed),
                                                                      task_indices=list(range(c.train_tasks))))
    seen: dict[int, list] = {}
    for a, model in policies.items():
        seen.setdefault(id(model), []).extend(agent_trajectories(episodes, a))
    for k, (a, model) in enumerate(policies.items()):
        if id(model) in seen:
            behaviour_clone(model, seen.pop(id(model)), c.bc_epochs, c.bc_lr, 16, c.warmstart_seed + k, bucketed=False)


def evaluate_pair(engine: PairRolloutEngine, models: dict, c: PairConfig, split: str | None = None,
                  task_indices: list[int] | None = None, seed: int = PAIR_EVAL_OFFSET) -> tuple[dict, list[dict]]:
    """``pair_rollout_metrics`` of ``c.eval_episodes`` episodes on ``split`` (default
    ``c.eval_split``) over ``task_indices`` (default ``0..c.eval_tasks-1``, or one task per
    episode when ``eval_tasks`` is 0), sampled with ``engine``'s temperature, seeds from ``seed +
    c.seed``."""
    if task_indices is None and c.eval_tasks:
        task_indices = list(range(c.eval_tasks))
    gen = torch.Generator().manual_seed(seed + c.seed)
    eps = engine.collect(models, pair_requests(c.eval_episodes, seed + c.seed, split or c.eval_split, task_indices),
                         -1, gen)
    return pair_rollout_metrics(eps), eps


def update_requests(c: PairConfig, k: int):
    """The pair requests of update ``k`` (0-based): ``episodes_per_update`` train tasks taken in
    turn from ``0..train_tasks-1``, env seeds ``1000 (k + 1) + seed + i``."""
    return pair_requests(c.episodes_per_update, PAIR_UPDATE(k, c.seed),
                         task_indices=[(k * c.episodes_per_update + i) % c.train_tasks
                                       for i in range(c.episodes_per_update)])


def sampling_generator(c: PairConfig, k: int) -> torch.Generator:
    """The token-sampling generator of update ``k``'s rollouts (a function of (seed, k) only)."""
    return torch.Generator().manual_seed(stream_seed(c.seed, k, stream=Stream.SAMPLING))


def train_pair(c: PairConfig, learner: PairLearner | None = None, on_update=None) -> dict:
    """One two-agent run; returns ``{"start": eval metrics, "end": eval metrics, "updates": [...]}``.
    ``on_update(k, episodes, metrics)`` is called after each update (claim measurements)."""
    learner = learner if learner is not None else build_learner(c)
    engine = PairRolloutEngine(c.num_envs, c.max_len, c.max_action_tokens, c.temperature, c.env_kwargs)
    evaluator = PairRolloutEngine(c.num_envs, c.max_len, c.max_action_tokens, c.eval_temperature, c.env_kwargs)
    start, _ = evaluate_pair(evaluator, learner.models(), c)
    history = []
    for k in range(c.updates):
        episodes = engine.collect(learner.models(), update_requests(c, k), k, sampling_generator(c, k))
        metrics = learner.update(episodes)
        history.append(metrics)
        if on_update is not None:
            on_update(k, episodes, metrics)
    end, _ = evaluate_pair(evaluator, learner.models(), c)
    return {"start": start, "end": end, "updates": history}


# --------------------------------------------------------------------------------------------- main entry point
def pair_config(c: TrainConfig) -> PairConfig:
    """The :class:`PairConfig` of a validated two-agent ``TrainConfig`` (``experiments.runtime.config.validate``
    checked every value it carries; a single-agent config is a ``ConfigError``): env kwargs and
    train tasks, the policy shape, rollout knobs, ``algo.tasks_per_update`` episodes per update,
    updates = ``min(ceil(budget.amount / tasks_per_update), budget.max_updates)``, the warm-start
    knobs, evaluation (``eval.tasks x eval.samples_per_task`` episodes of ``eval.split``) and the
    algo's PPO fields."""
    if not is_pair_run(c):
        raise ConfigError(f"env.name={c.env.name!r} is not a two-agent env: a pair run needs env in "
                          f"{', '.join(PAIR_ENVS)}")
    skip = {"name", "group_size", "shared_policy", "frozen"}
    algo_fields = {f.name: getattr(c.algo, f.name) for f in fields(c.algo) if f.name not in skip}
    per_update = c.algo.tasks_per_update
    return PairConfig(
        algo=c.algo.name, shared_policy=c.algo.shared_policy, frozen=tuple(c.algo.frozen), env_kwargs=dict(c.env.kwargs),
        d_model=c.policy.d_model, n_layers=c.policy.n_layers, n_heads=c.policy.n_heads, max_len=c.policy.max_len,
        mlp_ratio=c.policy.mlp_ratio, max_action_tokens=c.rollout.max_action_tokens, temperature=c.rollout.temperature,
        train_tasks=c.env.train_tasks, updates=min(math.ceil(c.budget.amount / per_update), c.budget.max_updates),
        episodes_per_update=per_update, num_envs=min(c.rollout.num_envs, per_update), demos=c.warmstart.demos,
        demo_noise=c.warmstart.noise, bc_epochs=c.warmstart.epochs, bc_lr=c.warmstart.lr,
        eval_episodes=c.eval.tasks * c.eval.samples_per_task, eval_split=c.eval.split, eval_tasks=c.eval.tasks,
        eval_temperature=c.eval.temperature, seed=c.seed, warmstart_seed=c.warmstart.seed, algo_fields=algo_fields)


def _count_episodes(meter, episodes: list[dict]) -> None:
    """``compute/rollouts`` += pair episodes; tokens, tool seconds and turns of both agents."""
    for ep in episodes:
        meter.rollouts += 1
        trajs = [t for t in ep.values() if t is not None]
        meter.masked_rollouts += int(any(t.masked for t in trajs))
        for t in trajs:
            meter.generated_tokens += t.generated_tokens
            meter.observation_tokens += t.observation_tokens
            meter.tool_seconds += t.tool_seconds
            meter.turns += t.turns


def _eval_keys(m: dict) -> dict:
    return {k.replace("rollout/", "eval/"): v for k, v in m.items()}


def run_pair(c: TrainConfig, resolved: dict | None = None) -> dict:
    """Run (or resume) one two-agent training run of a validated config; returns the summary."""
    # ================================================================ build
    torch.set_num_threads(max(1, c.threads))
    pc = pair_config(c)
    rd = RunDir.create(c)
    rd.write_config(resolved if resolved is not None else asdict(c))
    meter = ComputeMeter()
    warm = c.policy.init_checkpoint == "warmstart"
    learner = build_learner(pc, warm=warm, warm_root=Path(c.warmstart.cache_dir) / "pair", meter=meter)
    owners = ("a",) if learner.shared else AGENTS
    engine = PairRolloutEngine(pc.num_envs, pc.max_len, pc.max_action_tokens, pc.temperature, pc.env_kwargs)
    evaluator = PairRolloutEngine(min(c.rollout.num_envs, pc.eval_episodes), pc.max_len, pc.max_action_tokens,
                                  pc.eval_temperature, pc.env_kwargs)
    update, last_eval, start_eval = 0, {}, None
    state = rd.resume() if c.resume else rd.start_fresh()
    if state:
        for a in owners:
            t = learner.trainers[a]
            t.policy.load_state_dict(state["policy"][a])
            t.critic.load_state_dict(state["critic"][a])
            t.load_state_dict(state["trainer"][a])
        meter.load_state_dict(state["meter"])
        update, last_eval, start_eval = state["update"], state["last_eval"], state["start_eval"]
        print(f"resumed {rd.path} at update {update}", file=sys.stderr)
    if start_eval is None:
        start_eval = _eval_keys(evaluate_pair(evaluator, learner.models(), pc)[0])
    start_info = {"start_model/success": start_eval.get("eval/success", float("nan")),
                  # the cached start model every seed and both algorithms share (the report checks it)
                  "start_model/path": str(warmstart_path(pc, learner.shared, Path(c.warmstart.cache_dir) / "pair"))
                  if warm else ""}
    logger = make_logger(c.logger.kind, run_dir=rd.path, name=c.logger.name or rd.path.name, group=c.logger.group or None,
                         job_type=c.algo.name, config={**(resolved or asdict(c)), "start_model": start_info})
    logger.define_x_axes()
    t_run = time.perf_counter()
    # ================================================================ collect, update, log, maybe evaluate, save
    while update < pc.updates:
        t0 = time.perf_counter()
        lr = [learner.trainers[a].set_budget_fraction(meter.rollouts / c.budget.amount) for a in owners][0]
        episodes = engine.collect(learner.models(), update_requests(pc, update), update, sampling_generator(pc, update))
        collect_seconds = time.perf_counter() - t0
        _count_episodes(meter, episodes)
        train_metrics = learner.update(episodes)
        update += 1
        meter.updates = update
        meter.wall_seconds += time.perf_counter() - t0
        metrics = {"update": update, "algo": c.algo.name, **train_metrics, "train/lr": lr,
                   # the one-agent name of the team success, read by the compare report
                   "rollout/success_rate": train_metrics.get("rollout/success", float("nan")),
                   "rollout/collect_seconds": collect_seconds}
        if update == pc.updates or (c.eval.every and update % c.eval.every == 0):
            last_eval = _eval_keys(evaluate_pair(evaluator, learner.models(), pc)[0])
            metrics.update(last_eval)
        metrics.update(meter.metrics())
        metrics["compute/budget_fraction"] = min(meter.rollouts / c.budget.amount, 1.0)
        rd.append_metrics(metrics)
        logger.log(jsonable(metrics))
        rd.save_checkpoint({"policy": {a: learner.trainers[a].policy.state_dict() for a in owners},
                            "critic": {a: learner.trainers[a].critic.state_dict() for a in owners},
                            "trainer": {a: learner.trainers[a].state_dict() for a in owners},
                            "meter": meter.state_dict(), "update": update, "last_eval": last_eval,
                            "start_eval": start_eval})
    # ================================================================ summary
    last_eval = last_eval or _eval_keys(evaluate_pair(evaluator, learner.models(), pc)[0])
    summary = {**last_eval, **meter.metrics(), **start_info, "run_dir": str(rd.path), "algo": c.algo.name,
               "env": c.env.name, "updates": update, "seed": c.seed, "budget/kind": c.budget.kind,
               "budget/amount": c.budget.amount, "critic": "central" if c.algo.name == "ppo_ctde" else "local",
               "shared_policy": pc.shared_policy, "frozen": list(pc.frozen),
               **{f"start_model/{k}": v for k, v in start_eval.items() if k.startswith("agent_")},
               "wall_seconds_this_process": time.perf_counter() - t_run}
    rd.write_summary(summary)
    logger.log({k: v for k, v in jsonable(summary).items() if k.startswith(("eval/", "agent_", "start_model/success"))})
    logger.finish()
    print(json.dumps({k: summary[k] for k in ("eval/success", "start_model/success", "compute/rollouts", "updates",
                                              "run_dir")}), file=sys.stderr)
    return summary


__all__ = ["PairConfig", "WARMSTART_DIR", "build_learner", "evaluate_pair", "pair_config", "run_pair", "shapes",
           "train_pair", "update_requests", "warm_start", "warmstart_key", "warmstart_path"]
