"""Two-agent training on PairFix: ``algo=ppo_ctde`` or ``algo=ppo_independent`` from one call.

    python -m experiments.train_pair --algo ppo_ctde --updates 4
    python -m experiments.train_pair --algo ppo_independent --updates 4 --frozen b

Phases, top to bottom (like ``experiments/train.py``, standalone until the main entry point
takes ``env=pairfix``): 1) models (per agent or shared; a centralized critic for ppo_ctde, a
local one for ppo_independent), 2) behaviour-cloning warm start of every policy on noisy
scripted-oracle pair demonstrations (``envs.pairfix.agents.PairOracle``), 3) ``updates`` x
(collect ``episodes_per_update`` pair episodes on train tasks, ``PairLearner.update``), 4)
evaluation on held-out tasks. Deterministic on CPU for a given ``PairConfig``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
from dataclasses import asdict, dataclass, field, fields
from functools import partial
from pathlib import Path

import torch

from algos.pair_rollout import PairRolloutEngine, agent_trajectories, pair_requests
from algos.policy import PolicyModel, PolicyShape, ValueModel
from algos.ppo_ctde import CTDE_ALGOS, PairLearner, pair_rollout_metrics
from algos.registry import make_trainer
from envs.pairfix import AGENTS
from envs.pairfix.agents import PairOracle
from envs.tokenizer import get_tokenizer
from experiments.config import AlgoConfig, algo_schema
from experiments.warmstart import behaviour_clone


@dataclass
class PairConfig:
    """Everything one two-agent run depends on (validated in ``__post_init__``)."""

    algo: str = "ppo_ctde"  # ppo_ctde | ppo_independent
    shared_policy: bool = False  # one policy (and critic) for both agents, agent id in the context
    frozen: tuple[str, ...] = ()  # agents whose policy is never updated (C22's control)
    env_kwargs: dict = field(default_factory=lambda: {"difficulty": "easy"})
    d_model: int = 32
    n_layers: int = 1
    n_heads: int = 2
    max_len: int = 384
    max_action_tokens: int = 12
    temperature: float = 1.0
    train_tasks: int = 24  # task indices 0..train_tasks-1 of the train split
    updates: int = 4
    episodes_per_update: int = 16
    num_envs: int = 16
    demos: int = 64
    demo_noise: float = 0.3
    bc_epochs: int = 60
    bc_lr: float = 3e-3
    eval_episodes: int = 24
    seed: int = 0
    algo_fields: dict = field(default_factory=lambda: {
        "lr": 1e-4, "epochs": 2, "minibatches": 1, "micro_batch_rows": 64, "gamma": 1.0, "lam": 0.95,
        "value_level": "turn", "vf_coef": 0.5, "value_clip": None, "norm_adv": True})

    def __post_init__(self) -> None:
        if self.algo not in CTDE_ALGOS:
            raise ValueError(f"algo={self.algo!r} unknown for PairFix; allowed: {', '.join(CTDE_ALGOS)}")
        bad = [a for a in self.frozen if a not in AGENTS]
        if bad:
            raise ValueError(f"frozen={list(self.frozen)!r} invalid; allowed: a subset of {', '.join(AGENTS)}")
        if self.shared_policy and self.frozen:
            raise ValueError("frozen agents need their own policy: set shared_policy=false to freeze one agent")
        for name in ("updates", "episodes_per_update", "num_envs", "train_tasks", "eval_episodes"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < (0 if name in ("updates", "eval_episodes") else 1):
                raise ValueError(f"{name}={v!r} invalid; allowed: an int >= {0 if name in ('updates', 'eval_episodes') else 1}")
        known = {f.name for f in fields(algo_schema(self.algo))}
        unknown = sorted(set(self.algo_fields) - known)
        if unknown:
            raise ValueError(f"unknown algo field(s) {unknown}; allowed: {', '.join(sorted(known))}")

    def algo_config(self) -> AlgoConfig:
        return AlgoConfig(name=self.algo, group_size=1, **self.algo_fields)


def build_learner(c: PairConfig) -> PairLearner:
    """Models (seeded by ``c.seed``), the warm start, and one trainer per agent (or shared)."""
    tok = get_tokenizer()
    torch.manual_seed(c.seed)
    shape = PolicyShape(vocab_size=tok.vocab_size, d_model=c.d_model, n_layers=c.n_layers, n_heads=c.n_heads,
                        max_len=c.max_len)
    # the centralized critic reads own + other context: twice the policy's window
    critic_len = 2 * c.max_len + 2 if c.algo == "ppo_ctde" else c.max_len
    critic_shape = PolicyShape(vocab_size=tok.vocab_size, d_model=c.d_model, n_layers=c.n_layers,
                               n_heads=c.n_heads, max_len=critic_len)
    owners = ("a",) if c.shared_policy else AGENTS
    policies = {a: PolicyModel(shape) for a in owners}
    critics = {a: ValueModel(critic_shape) for a in owners}
    warm_start(policies if not c.shared_policy else {"a": policies["a"], "b": policies["a"]}, c)
    trainers = {}
    for a in owners:
        trainers[a] = make_trainer(c.algo, c.algo_config(), policies[a], critic=critics[a], temperature=c.temperature)
    if c.shared_policy:
        trainers["b"] = trainers["a"]
    return PairLearner(trainers, frozen=c.frozen)


WARMSTART_DIR = Path(__file__).resolve().parents[1] / ".cache" / "agentrl" / "pair_warmstart"


def warmstart_key(c: PairConfig, shared: bool) -> str:
    """Hash of everything the warm start depends on (shape, vocabulary, env, demos, BC, seed)."""
    blob = {k: getattr(c, k) for k in ("env_kwargs", "d_model", "n_layers", "n_heads", "max_len", "max_action_tokens",
                                        "temperature", "train_tasks", "num_envs", "demos", "demo_noise", "bc_epochs",
                                        "bc_lr", "seed")}
    blob.update(shared=shared, vocab=get_tokenizer().id_to_token)
    return hashlib.sha256(json.dumps(blob, sort_keys=True, default=str).encode()).hexdigest()[:16]


def warm_start(policies: dict, c: PairConfig, cache: bool = True) -> None:
    """Behaviour cloning of each agent's policy on its side of noisy-oracle pair demos; the
    weights are cached under ``WARMSTART_DIR/<warmstart_key>`` (``cache=False``: always rebuild)."""
    shared = policies["a"] is policies["b"]
    path = WARMSTART_DIR / warmstart_key(c, shared)
    owners = ("a",) if shared else AGENTS
    if cache and all((path / f"policy_{a}.pt").exists() for a in owners):
        for a in owners:
            policies[a].load_state_dict(torch.load(path / f"policy_{a}.pt", weights_only=True))
            policies[a].eval()
        return
    _behaviour_clone_pair(policies, c)
    if cache:
        path.mkdir(parents=True, exist_ok=True)
        for a in owners:
            torch.save(policies[a].state_dict(), path / f"policy_{a}.pt")


def _behaviour_clone_pair(policies: dict, c: PairConfig) -> None:
    engine = PairRolloutEngine(c.num_envs, c.max_len, c.max_action_tokens, c.temperature, c.env_kwargs)
    demo = partial(PairOracle, c.demo_noise)
    episodes = engine.collect({a: demo for a in AGENTS}, pair_requests(c.demos, 10_000 + c.seed,
                                                                      task_indices=list(range(c.train_tasks))))
    seen: dict[int, list] = {}
    for a, model in policies.items():
        seen.setdefault(id(model), []).extend(agent_trajectories(episodes, a))
    for k, (a, model) in enumerate(policies.items()):
        if id(model) in seen:
            behaviour_clone(model, seen.pop(id(model)), c.bc_epochs, c.bc_lr, 16, c.seed + k)


def evaluate_pair(engine: PairRolloutEngine, models: dict, c: PairConfig, split: str = "heldout",
                  task_indices: list[int] | None = None, seed: int = 50_000) -> tuple[dict, list[dict]]:
    """``pair_rollout_metrics`` of ``c.eval_episodes`` episodes (sampled at ``c.temperature``)."""
    gen = torch.Generator().manual_seed(seed + c.seed)
    eps = engine.collect(models, pair_requests(c.eval_episodes, seed + c.seed, split, task_indices), -1, gen)
    return pair_rollout_metrics(eps), eps


def train_pair(c: PairConfig, learner: PairLearner | None = None, on_update=None) -> dict:
    """One two-agent run; returns ``{"start": eval metrics, "end": eval metrics, "updates": [...]}``.
    ``on_update(k, episodes, metrics)`` is called after each update (claim measurements)."""
    learner = learner if learner is not None else build_learner(c)
    engine = PairRolloutEngine(c.num_envs, c.max_len, c.max_action_tokens, c.temperature, c.env_kwargs)
    start, _ = evaluate_pair(engine, learner.models(), c)
    gen = torch.Generator().manual_seed(c.seed)
    history = []
    tasks = list(range(c.train_tasks))
    for k in range(c.updates):
        reqs = pair_requests(c.episodes_per_update, 1000 * (k + 1) + c.seed,
                             task_indices=[tasks[(k * c.episodes_per_update + i) % len(tasks)]
                                           for i in range(c.episodes_per_update)])
        episodes = engine.collect(learner.models(), reqs, k, gen)
        metrics = learner.update(episodes)
        history.append(metrics)
        if on_update is not None:
            on_update(k, episodes, metrics)
    end, _ = evaluate_pair(engine, learner.models(), c)
    return {"start": start, "end": end, "updates": history}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--algo", default="ppo_ctde", choices=CTDE_ALGOS)
    ap.add_argument("--updates", type=int, default=4)
    ap.add_argument("--shared-policy", action="store_true")
    ap.add_argument("--frozen", default="", help="comma-separated agents to freeze (a, b)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    c = PairConfig(algo=args.algo, updates=args.updates, shared_policy=args.shared_policy, seed=args.seed,
                   frozen=tuple(x for x in args.frozen.split(",") if x))
    out = train_pair(c)
    keys = sorted(k for k in out["end"] if k.startswith(("rollout/", "agent_")))
    print(json.dumps({"config": asdict(c), "start": {k: out["start"].get(k) for k in keys},
                      "end": {k: out["end"][k] for k in keys},
                      "last_update": {k: v for k, v in out["updates"][-1].items() if "explained" in k or "loss" in k}
                      if out["updates"] else {}}, indent=1, default=str))


if __name__ == "__main__":
    main()
