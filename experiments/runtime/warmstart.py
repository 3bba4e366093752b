"""Behaviour-cloning warm start: the one start model both trainers share (claim C19).

    python -m experiments.warmstart env=bugfix warmstart.noise=0.5 warmstart.demos=256

A run's start checkpoint (:func:`start_model`, a :class:`StartModel`) is this warm start, a given
path, or random init (``policy.init_checkpoint``).

1. Demonstrations: the env spec's scripted noisy-oracle agent (``envs.scripted_agent``)
   plays ``warmstart.demos`` episodes on train-split tasks; each episode is laid out by
   ``algos.recording.demo_to_trajectory`` (the rollout engine's own ``record_step`` code path), so
   the contexts are exactly what the policy will see in RL, compression segments included.
2. Behaviour cloning (``experiments.runtime.bc``): cross-entropy on the demo's action tokens only
   (action_mask=1: the words and the EOS of each action; observations are context, not targets),
   in length-bucketed micro-batches, on ``warmstart.processes`` processes (data parallel).
3. Start success is measured with the policy itself on held-out templates at the eval budget
   (``warmstart.eval_tasks`` x ``warmstart.eval_samples_per_task`` at ``eval.temperature``).
4. Saved as ``<cache_dir>/<hash>/policy.pt`` + ``warmstart.json`` (path, measured success, demo
   success, config) through :func:`cached_start_model`, the one cache of start models (the
   two-agent warm start of ``experiments.runtime.pair`` uses it too). The hash covers everything that determines the checkpoint (env, compression,
   policy shape, warm-start settings, action cap, vocabulary), so tests and sweeps reuse it; a file
   lock makes concurrent sweep jobs build it once. The demo noise sets the start success rate.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from dataclasses import asdict, dataclass, field
from functools import lru_cache, partial
from pathlib import Path
from typing import Callable, Iterator

import torch

import envs
from algos import metric_keys as mk
from algos.backend import WORD_LAYOUT, ContextLayout
from algos.evaluation import evaluate
from algos.requests import RolloutRequest
from algos.recording import demo_to_trajectory
from envs import scripted_agent
from envs.episode import run_episode
from envs.pairfix import AGENTS
from envs.pairfix.agents import PairOracle, run_pair_episode
from experiments.runtime.bc import behaviour_clone
from experiments.runtime.build import (compression_key, env_kwargs, eval_engine, make_env, new_policy, policy_layout,
                                      policy_shape, start_eval_seed, system_prompt)
from experiments.runtime.rundir import atomic_save, atomic_write_text, file_lock
from experiments.runtime.schema import WARMSTART_AGENTS, TrainConfig, fingerprint, is_pair_run
from experiments.runtime.seeds import DEMO


@dataclass(frozen=True)
class WarmStart:
    """A built warm start, as ``warmstart.json`` holds it (:meth:`to_json`, keys in this order):
    the checkpoint ``path`` and cache ``key``, the measured ``start_success`` and the whole
    ``start_eval`` dict, the demonstrations' success, count and tokens, the first and last BC
    minibatch losses, the build time, the env and the demo noise."""

    path: str
    key: str
    start_success: float
    start_eval: dict
    demo_success: float
    demos: int
    demo_tokens: int
    bc_loss_first: float | None
    bc_loss_last: float | None
    seconds: float
    env: str
    noise: float

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict) -> "WarmStart":
        return cls(**d)


def cache_key(c: TrainConfig) -> str:
    """The cache key of the one-agent warm start: :func:`start_model_key` of everything that
    determines its checkpoint (the warmstart group without its operational ``cache_dir``, env,
    compression, policy shape, action cap, evaluation setup)."""
    w = fingerprint(c.warmstart)
    return start_model_key({
        "env": c.env.name, "env_id": c.env.id, "env_kwargs": dict(c.env.kwargs), "compression": compression_key(c),
        "shape": policy_identity(c), "warmstart": w, "max_action_tokens": c.rollout.max_action_tokens,
        "eval_temperature": c.eval.temperature, "train_tasks": c.env.train_tasks,
        "eval": [c.eval.split, c.eval.train_split, dict(c.eval.env_kwargs)],
        # version: raised whenever the build changes the checkpoint or its measured start success,
        # so an older cache entry is never reused
        "init_seed": c.policy.init_seed, "version": 4,
        # the token budget slices BC's micro-batches differently (float summation order), so it is
        # part of the key; absent when null, so the keys of unbudgeted configs stay as they were
        **({"micro_batch_tokens": c.policy.micro_batch_tokens} if c.policy.micro_batch_tokens is not None else {}),
    })


# ------------------------------------------------------------------------------ the start-model cache
def start_model_key(fields: dict) -> str:
    """16 hex digits of the sha256 of ``fields`` (the config fields that determine a start model,
    JSON with sorted keys): the one key scheme of every cached start model."""
    return hashlib.sha256(json.dumps(fields, sort_keys=True, default=str).encode()).hexdigest()[:16]


def start_model_dir(c: TrainConfig, key: str) -> Path:
    """The one directory layout of cached start models: ``<warmstart.cache_dir>/<key>/``."""
    return Path(c.warmstart.cache_dir) / key


def cached_start_model(c: TrainConfig, key: str, complete: str, build: Callable[[Path], None]) -> tuple[Path, bool]:
    """``(directory, built)`` of the start model ``key``: under the one lock of that key
    (``<cache_dir>/.<key>.lock``, so the concurrent jobs of a sweep build it once), ``build(directory)``
    runs unless ``directory / complete`` exists; ``build`` writes ``complete`` last."""
    root = start_model_dir(c, key)
    with file_lock(root.parent / f".{key}.lock"):
        if (root / complete).exists():
            return root, False
        build(root)
    return root, True


def make_demo_agent(env_name: str, noise: float, agent: str = "noisy_oracle"):
    """The scripted demonstrator of ``env_name``: the env spec's scripted agent ``agent`` (the
    noisy oracle) with ``mistake_rate=noise`` (``envs.scripted_agent``, the one lookup by env name)."""
    if agent not in WARMSTART_AGENTS:
        raise ValueError(f"warmstart.agent={agent!r} unknown; allowed: {', '.join(WARMSTART_AGENTS)}")
    return scripted_agent(env_name, agent, mistake_rate=noise)


def play_demo(env, agent, seed: int, options: dict):
    """One scripted episode through the one episode loop (``envs.episode.run_episode``), with every
    step's info: the compression boundaries and stop reason lay the episode out like a rollout.
    Returns ``(observations, actions, rewards, infos, terminated, truncated)``."""
    ep = run_episode(env, agent, seed=seed, options=options)
    return ep.observations, ep.actions, ep.rewards, ep.infos, ep.terminated, ep.truncated


def policy_identity(c: TrainConfig) -> dict:
    """What determines the untrained policy: the tiny policy's shape, or for ``policy.kind=hf``
    the model (path, the sha256 of its config and tokenizer files, the sizes of its weight files),
    dtype, device, chat rendering and LoRA adapters."""
    if c.policy.kind == "tiny":
        # the warm start clones the policy alone: a separate critic's shape never determines it
        return {k: v for k, v in asdict(policy_shape(c)).items() if k not in ("critic_d_model", "critic_n_layers")}
    p = c.policy
    ident = {k: getattr(p, k) for k in ("kind", "path", "dtype", "device", "end_token",
                                        "lora_r", "lora_alpha", "lora_dropout", "lora_targets", "max_len")}
    ident["system_prompt"] = system_prompt(c) or ""
    root = Path(p.path)
    if root.is_dir():
        ident["path"] = str(root.resolve())
        ident["files"] = {f.name: (hashlib.sha256(f.read_bytes()).hexdigest() if f.suffix in (".json", ".jinja", ".txt")
                                   else f.stat().st_size) for f in sorted(root.iterdir()) if f.is_file()}
    return ident


def demo_requests(c: TrainConfig) -> list[RolloutRequest]:
    """The warm start's ``warmstart.demos`` demonstration episodes (one agent or several): demo
    ``i`` on train task ``i mod env.train_tasks`` with env seed ``DEMO(warmstart.seed, i)``."""
    return [RolloutRequest({"task_index": i % c.env.train_tasks, "split": "train"}, DEMO(c.warmstart.seed, i), group_id=i)
            for i in range(c.warmstart.demos)]


def demo_episodes(c: TrainConfig) -> Iterator[tuple]:
    """The warm start's noisy-oracle episodes (:func:`demo_requests`), in order, each as
    :func:`play_demo` returns it (one env, closed at the end)."""
    agent = make_demo_agent(c.env.name, c.warmstart.noise, c.warmstart.agent)
    env = make_env(c)
    try:
        for req in demo_requests(c):
            yield play_demo(env, agent, req.seed, req.options)
    finally:
        env.close()


def demonstrations(c: TrainConfig, layout: ContextLayout = WORD_LAYOUT) -> list:
    """``warmstart.demos`` noisy-oracle episodes on train tasks, as trajectories in ``layout``."""
    out = []
    for i, (obs, acts, rews, infos, term, trunc) in enumerate(demo_episodes(c)):
        tr = demo_to_trajectory(obs, acts, rews, infos, term, trunc, c.policy.max_len,
                                c.rollout.max_action_tokens, group_id=i, layout=layout)
        if not tr.masked:
            out.append(tr)
    return out


def pair_demo_agents(c: TrainConfig) -> dict:
    """The two-agent warm start's demonstrators: ``{agent: factory}`` of the scripted-oracle pair
    agent with ``mistake_rate=warmstart.noise`` (``envs.pairfix.agents.PairOracle``), a fresh
    agent per episode (``algos.rollout.RolloutEngine.collect``'s scripted-agent factories)."""
    return dict.fromkeys(AGENTS, partial(PairOracle, c.warmstart.noise))


def pair_demo_actions(c: TrainConfig) -> Iterator[str]:
    """Every action of the two-agent warm start's demonstrations (:func:`demo_requests` played by
    :func:`pair_demo_agents` through ``envs.pairfix.agents.run_pair_episode``), in order."""
    env, agents = make_env(c), pair_demo_agents(c)
    try:
        for req in demo_requests(c):
            episode = run_pair_episode(env, {a: make() for a, make in agents.items()}, seed=req.seed,
                                       options=req.options)
            yield from (action for _, _, action in episode.turns)
    finally:
        env.close()


#: demo_actions' results by the config fields that determine the demos (validation reads them once per process)
_DEMO_ACTIONS: dict[str, frozenset[str]] = {}


def demo_actions(c: TrainConfig) -> frozenset[str]:
    """Every distinct action text of the warm start's demonstrations (:func:`demo_episodes`; a
    two-agent env's: :func:`pair_demo_actions`): played once per config and source (:func:`demo_source_sha256`),
    then read from ``<warmstart.cache_dir>/demo_actions/<key>.json`` (in this process: from memory)."""
    key = start_model_key({"demos": [c.env.id, env_kwargs(c), compression_key(c), c.env.train_tasks,
                                     c.warmstart.agent, c.warmstart.noise, c.warmstart.demos, c.warmstart.seed],
                           "source": demo_source_sha256()})
    if key not in _DEMO_ACTIONS:
        path = Path(c.warmstart.cache_dir) / "demo_actions" / f"{key}.json"
        with file_lock(path.with_suffix(".lock")):  # concurrent jobs of a sweep play the demos once
            if not path.is_file():
                actions = pair_demo_actions(c) if is_pair_run(c) else (a for ep in demo_episodes(c) for a in ep[1])
                atomic_write_text(path, json.dumps(sorted(set(actions))))
            _DEMO_ACTIONS[key] = frozenset(json.loads(path.read_text()))
    return _DEMO_ACTIONS[key]


@lru_cache(maxsize=1)
def demo_source_sha256() -> str:
    """sha256 over the Python sources of the ``envs`` package and of ``experiments.runtime`` (each
    file's path relative to its package and its bytes, in path order): the code that makes the
    envs, agents, seeds and requests of the demonstrations, so a cached result of it is never read
    after that code changes."""
    h = hashlib.sha256()
    for package in (envs, sys.modules[__package__]):
        root = Path(package.__file__).resolve().parent
        for f in sorted(root.rglob("*.py")):
            h.update(f"{package.__name__}/{f.relative_to(root)}".encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


def ensure_warmstart(c: TrainConfig, verbose: bool = True) -> WarmStart:
    """The cached warm start of this config (built when missing)."""
    built: list[WarmStart] = []
    root, _ = cached_start_model(c, cache_key(c), "warmstart.json",
                                 lambda root: built.append(build_warmstart(c, root, verbose=verbose)))
    return built[0] if built else WarmStart.from_json(json.loads((root / "warmstart.json").read_text()))


def start_evaluation(c: TrainConfig, model) -> dict:
    """The start model's evaluation protocol: ``warmstart.eval_tasks`` x
    ``warmstart.eval_samples_per_task`` attempts on the ``eval.split`` tasks at ``eval.temperature``
    from the start-evaluation seed (and on train tasks too with ``eval.train_split``)."""
    engine = eval_engine(c, c.warmstart.eval_tasks * c.warmstart.eval_samples_per_task, max_envs=64)
    ev = evaluate(engine, model, c.warmstart.eval_tasks, c.warmstart.eval_samples_per_task, c.eval.temperature,
                  seed=start_eval_seed(c), split=c.eval.split)
    if c.eval.train_split:
        ev.update(evaluate(engine, model, c.warmstart.eval_tasks, c.warmstart.eval_samples_per_task,
                           c.eval.temperature, seed=start_eval_seed(c), split="train", prefix=mk.EVAL_TRAIN))
    engine.close()
    return ev


def zero_shot_evaluation(c: TrainConfig) -> dict:
    """:func:`start_evaluation` of the policy before any warm start (``new_policy``: a Hugging Face
    model's own weights with zero LoRA adapters; the tiny policy's random init): what the warm
    start adds is the start model's success minus this one's."""
    torch.set_num_threads(max(1, c.threads))
    return start_evaluation(c, new_policy(c))


def build_warmstart(c: TrainConfig, root: Path, verbose: bool = True) -> WarmStart:
    t0 = time.perf_counter()
    torch.set_num_threads(max(1, c.threads))
    model = new_policy(c)
    trajs = demonstrations(c, policy_layout(model))
    demo_success = sum(int(t.verified or 0) for t in trajs) / max(len(trajs), 1)
    losses = behaviour_clone(model, trajs, c.warmstart.epochs, c.warmstart.lr, c.warmstart.batch_rows, c.warmstart.seed,
                             processes=c.warmstart.processes, bucketed=c.warmstart.bucketed,
                             max_tokens=c.policy.micro_batch_tokens)
    ev = start_evaluation(c, model)
    root.mkdir(parents=True, exist_ok=True)
    path = root / "policy.pt"
    atomic_save({"policy": model.state_dict(), "shape": model.shape.__dict__}, path)
    info = WarmStart(
        path=str(path.resolve()), key=root.name, start_success=ev[mk.EVAL_SUCCESS], start_eval=ev,
        demo_success=demo_success, demos=len(trajs),
        demo_tokens=sum(t.generated_tokens + t.observation_tokens for t in trajs),
        bc_loss_first=losses[0] if losses else None, bc_loss_last=losses[-1] if losses else None,
        seconds=time.perf_counter() - t0, env=c.env.name, noise=c.warmstart.noise,
    )
    atomic_write_text(root / "warmstart.json", json.dumps(info.to_json(), indent=2, default=str))
    if verbose:
        print(f"warm start {root.name}: demo success {demo_success:.3f}, start success ({c.eval.split} split, policy) "
              f"{info.start_success:.3f}, BC loss {info.bc_loss_first:.3f} -> {info.bc_loss_last:.3f}, "
              f"{info.seconds:.1f}s", file=sys.stderr)
    return info


@dataclass(frozen=True)
class StartModel:
    """A run's start checkpoint: its ``path`` (``""`` = random init), its measured start
    ``success`` (NaN when unknown) and ``extra`` ``start_model/*`` entries for the summary."""

    path: str
    success: float
    extra: dict = field(default_factory=dict)

    def summary(self) -> dict:
        """The ``start_model/*`` entries of summary.json and the logger config."""
        return {mk.START_MODEL_PATH: self.path, mk.START_MODEL_SUCCESS: self.success, **self.extra}


def start_model(c: TrainConfig) -> StartModel:
    """The start checkpoint of a run. ``policy.init_checkpoint``: ``warmstart`` = the cached
    behaviour-cloning warm start (built when missing); a path (its success read from a
    ``warmstart.json`` beside it when there is one); ``""`` = random init."""
    if c.policy.init_checkpoint == "warmstart":
        ws = ensure_warmstart(c)
        extra = {}
        if mk.EVAL_TRAIN_SUCCESS in ws.start_eval:
            extra[mk.START_MODEL_TRAIN_SPLIT_SUCCESS] = ws.start_eval[mk.EVAL_TRAIN_SUCCESS]
        extra.update({mk.START_MODEL + k.removeprefix(mk.EVAL): v for k, v in ws.start_eval.items()
                      if k.startswith(mk.prefix(mk.EVAL_FAMILY_SUCCESS))})
        return StartModel(ws.path, ws.start_success, extra)
    if c.policy.init_checkpoint:
        info = Path(c.policy.init_checkpoint).with_name("warmstart.json")
        success = json.loads(info.read_text())["start_success"] if info.exists() else float("nan")
        return StartModel(c.policy.init_checkpoint, success)
    return StartModel("", float("nan"))
