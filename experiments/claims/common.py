"""Shared setup of the trainer-level claim measurements: one config, one start model, one way to
build engines, play scripted episodes and run training, and ONE function that reads a trainer's
internals (:func:`run_update`).

Every measurement starts from ``claims_config()``: easy BugFix, 8 train tasks, the tiny policy
(d_model 32, 1 layer, max_len 256), warm start on 64 noisy-oracle demos (noise 0.3), held-out
evaluation 8 tasks x 4 samples (and the same on train templates) with tool faults raised to 10 %
timeouts / 10 % flaky runs. The behaviour-cloning warm start is cached by config hash by
``experiments.warmstart`` (built in ~10 s when missing) and computed once per process here.

All construction of envs, engines and models for the claims lives in this module, so switching it
to ``experiments/runtime/build.py`` is a change in one place.
"""

from __future__ import annotations

import json
import shutil
import signal
import tempfile
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

import torch
from omegaconf import OmegaConf

import envs
from algos.advantages import group_advantages
from algos.batch import Trajectory
from algos.policy import PolicyModel, build_models
from algos.requests import RolloutRequest, make_requests
from algos.recording import demo_to_trajectory
from algos.rollout import RolloutEngine
from algos.trainer import Trainer
from algos.update import UpdateRecord
from envs.tokenizer import get_tokenizer
from experiments.runtime.build import load_policy_weights, policy_shape
from experiments.runtime.config import compose_config, validate
from experiments.runtime.loop import run
from experiments.runtime.pair import check_pair_run
from experiments.runtime.schema import AlgoConfig, TrainConfig
from experiments.runtime.warmstart import WarmStart, ensure_warmstart, play_demo

REPO = Path(__file__).resolve().parents[2]
BUGFIX = envs.BUGFIX_ID
TOK = get_tokenizer()


# ------------------------------------------------------------------------------ config and model
def claims_config(algo: str = "grpo", **algo_fields) -> TrainConfig:
    """The one config every measurement starts from (validated). ``algo_fields`` override
    ``AlgoConfig`` fields of ``algo`` (grpo | ppo)."""
    c = TrainConfig(algo=AlgoConfig(name=algo, **algo_fields))
    # tutorial difficulty (10 turns, hints): the claims measure the mechanics of the update on a
    # start model that succeeds on half its 8 memorised train tasks (0.5 at noise 0), not
    # generalisation (the easy preset's tiny start model is at 0.28 on them)
    c.env.kwargs = {"difficulty": "tutorial"}
    c.env.train_tasks = 8
    p = c.policy
    p.d_model, p.n_layers, p.n_heads, p.max_len, p.init_checkpoint, p.init_seed = 32, 1, 2, 256, "warmstart", 0
    w = c.warmstart
    w.noise, w.demos, w.epochs, w.lr, w.batch_rows, w.seed = 0.0, 64, 60, 3e-3, 16, 0
    w.eval_tasks, w.eval_samples_per_task = 8, 4
    w.cache_dir = str(REPO / ".cache" / "agentrl" / "warmstart")
    c.eval.split, c.eval.tasks, c.eval.samples_per_task, c.eval.every, c.eval.train_split = "heldout", 8, 4, 0, True
    # evaluation injects more tool faults than training (5x), so the recovery-after-tool-failure
    # metric has episodes to measure; the same for every method and the start model
    c.eval.env_kwargs = {"timeout_prob": 0.1, "flaky_prob": 0.1}
    c.rollout.num_envs, c.rollout.temperature, c.rollout.max_action_tokens, c.rollout.staleness = 64, 1.0, 12, 0
    c.logger.kind, c.progress, c.threads, c.seed = "none", False, 1, 0
    return validate(c)


def algo_config(name: str, **fields) -> AlgoConfig:
    """``claims_config(name, **fields).algo``: the algorithm section alone."""
    return claims_config(name, **fields).algo


#: Hydra overrides of the two-agent claims preset (PairFix-v2 easy, 24 train tasks from
#: configs/env/pairfix.yaml): the values the configs do not already give it. Policy d_model 32,
#: 1 layer, 2 heads, max_len 384; 16 envs; warm start on 64 demos at noise 0.3, 60 epochs, lr 3e-3;
#: PPO lr 1e-4, 1 minibatch (epochs 2 from configs/algo/<algo>.yaml), unclipped value loss.
PAIR_CLAIMS_OVERRIDES = ("policy.d_model=32", "policy.n_layers=1", "policy.n_heads=2", "policy.max_len=384",
                         "rollout.num_envs=16", "warmstart.demos=64", "warmstart.noise=0.3", "warmstart.epochs=60",
                         "warmstart.lr=3e-3", "algo.lr=1e-4", "algo.minibatches=1", "algo.value_clip=null",
                         "logger=none", "progress=false")


def pair_claims_config(algo: str = "ppo_ctde", updates: int = 4, episodes_per_update: int = 16,
                       eval_episodes: int = 24, overrides: Sequence[str] = ()) -> TrainConfig:
    """The validated two-agent ``TrainConfig`` of the two-agent claims (and their tests):
    ``configs/config.yaml`` composed by Hydra with ``algo=<algo> env=pairfix``,
    :data:`PAIR_CLAIMS_OVERRIDES`, the start-model cache under the repository's
    ``.cache/agentrl/warmstart``, ``updates`` updates of ``episodes_per_update`` pair episodes
    (``algo.tasks_per_update``, ``budget.amount = updates * episodes_per_update``), evaluation on
    ``eval_episodes`` held-out episodes, one per task (``eval.tasks = eval_episodes`` x
    ``eval.samples_per_task = 1``: task indices ``0..eval_episodes-1``), then ``overrides``
    (Hydra override strings, e.g. ``"policy.d_model=16"``, ``"seed=1"``); validated
    (``ConfigError``, one line). The pair code reads it through ``experiments.runtime.pair``
    (``pair_updates``, ``eval_episodes``, ``pair_algo_config``) and ``experiments.runtime.build``."""
    sizes = (f"algo.tasks_per_update={episodes_per_update}", f"budget.amount={updates * episodes_per_update}",
             f"eval.tasks={eval_episodes}", "eval.samples_per_task=1")
    cache = f"warmstart.cache_dir={REPO / '.cache' / 'agentrl' / 'warmstart'}"
    cfg = compose_config([f"algo={algo}", "env=pairfix", *PAIR_CLAIMS_OVERRIDES, cache, *sizes, *overrides])
    return check_pair_run(validate(cfg))


@lru_cache(maxsize=1)
def start_model_info() -> WarmStart:
    """The cached warm start of ``claims_config()`` (built when missing)."""
    torch.set_num_threads(1)
    return ensure_warmstart(claims_config(), verbose=False)


def start_policy(critic: str = "none") -> PolicyModel:
    """A fresh copy of the warm-start policy in eval mode (``critic``: none | head)."""
    info = start_model_info()
    c = claims_config()
    policy, _ = build_models(policy_shape(c, critic=critic), seed=c.policy.init_seed)
    load_policy_weights(policy, info.path)
    return policy.eval()


# ------------------------------------------------------------------------------ rollouts
def snapshot(model: PolicyModel) -> dict:
    """A detached copy of ``model``'s state dict."""
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def make_engine(num_envs: int = 64, compression: dict | None = None, **env_kwargs) -> RolloutEngine:
    """A BugFix rollout engine with the claims config's lengths and temperature; ``env_kwargs``
    are added to the config's env kwargs, ``compression`` configures the compression wrapper."""
    c = claims_config()
    return RolloutEngine(BUGFIX, num_envs=num_envs, max_len=c.policy.max_len,
                         max_action_tokens=c.rollout.max_action_tokens, temperature=c.rollout.temperature,
                         env_kwargs={**c.env.kwargs, **env_kwargs}, compression=compression)


def collect(engine: RolloutEngine, policy: PolicyModel, requests: list[RolloutRequest], seed: int,
            version: int = 0) -> list[Trajectory]:
    """``engine.collect`` with a sampling generator seeded by ``seed``; tokens carry ``version``."""
    return engine.collect(policy, requests, policy_version=version, generator=torch.Generator().manual_seed(seed))


@lru_cache(maxsize=4)
def rollout_batch(seed: int, tasks: int = 8, group_size: int = 8, version: int = 3) -> tuple[Trajectory, ...]:
    """One real GRPO-style rollout batch of the warm-start policy on train tasks ``0..tasks-1``
    (``group_size`` per task, tokens tagged ``version``); cached, so copy before mutating."""
    engine = make_engine(num_envs=64)
    reqs = make_requests(tasks, group_size, seed=seed, task_indices=list(range(tasks)))
    trajs = collect(engine, start_policy(), reqs, seed, version)
    engine.close()
    return tuple(trajs)


def outcome_advantages(trajectories: Sequence[Trajectory], std: str = "population", eps: float = 1e-6) -> torch.Tensor:
    """``[N]`` float32 ``A_i = (r_i - mean_g r) / (std_g r + eps)`` of the trajectories' training
    rewards grouped by ``group_id`` (``algos.advantages.group_advantages``): the reference the
    GRPO measurements compare the trainer's token advantages with."""
    rewards = torch.tensor([t.train_reward for t in trajectories], dtype=torch.float32)
    groups = torch.tensor([t.group_id for t in trajectories], dtype=torch.long)
    return group_advantages(rewards, groups, std=std, eps=eps)


class ScriptAgent:
    """Plays a fixed list of actions, then ``fallback`` for every further turn."""

    def __init__(self, actions: Sequence[str], fallback: str = "submit") -> None:
        self.actions, self.fallback = list(actions), fallback

    def reset(self, env, seed: int | None = None) -> None:
        self.queue = list(self.actions)

    def act(self, observation: str, info: dict) -> str:
        return self.queue.pop(0) if self.queue else self.fallback


def scripted_trajectory(env, agent, seed: int, options: dict, group_id: int = 0) -> Trajectory:
    """A real env episode of a scripted agent, laid out by the rollout engine's ``record_step``
    (``demo_to_trajectory``) exactly as a sampled rollout would be."""
    c = claims_config()
    obs, acts, rews, infos, term, trunc = play_demo(env, agent, seed, options)
    tr = demo_to_trajectory(obs, acts, rews, infos, term, trunc, c.policy.max_len, c.rollout.max_action_tokens,
                            group_id=group_id)
    tr.seed, tr.options = seed, dict(options)
    return tr


# ------------------------------------------------------------------------------ training runs
def train_run(algo: str, algo_fields: dict, budget: int, overrides: Sequence[tuple[str, object]] = ()) -> dict:
    """One ``experiments.runtime.loop.run`` in-process into a temporary run directory on
    ``budget.kind=rollouts`` with ``budget`` rollouts; ``overrides`` are (dotted key, value) pairs
    set on the config. Returns what the run wrote, read back from disk: ``summary`` (summary.json),
    ``config`` (config.yaml as a dict) and ``metrics`` (metrics.jsonl, one dict per update)."""
    c = claims_config(algo, **algo_fields)
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
        return {
            "summary": json.loads((run_dir / "summary.json").read_text()),
            "config": OmegaConf.to_container(OmegaConf.load(run_dir / "config.yaml")),
            "metrics": [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()],
        }
    finally:
        signal.signal(signal.SIGTERM, previous)
        shutil.rmtree(run_dir, ignore_errors=True)


# ------------------------------------------------------------------------------ trainer internals
def run_update(trainer: Trainer, trajectories: list[Trajectory]) -> UpdateRecord:
    """``trainer.update(trajectories)`` through the real code path, and what it used.

    The ONLY place the claims read trainer internals: ``trainer.update_record`` runs the three
    typed steps (``prepare_batch`` -> ``advantages`` -> ``optimize``) exactly as ``update`` does and
    returns their outputs: the metrics, the collated ``batch``, the ``inputs`` (old log-probs, loss
    mask, PPO's old critic values) and the ``advantages`` (token advantages, PPO's GAE layout).
    ``ValueError`` when the update was skipped (no trajectory left to train on), so every
    returned record has all three."""
    rec = trainer.update_record(trajectories)
    if rec.inputs is None or rec.advantages is None:
        raise ValueError("the update was skipped: no trajectory was left to train on")
    return rec
