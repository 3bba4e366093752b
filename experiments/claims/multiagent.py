"""Claim C22 on PairFix-v1: two learning agents see a non-stationary environment, and a
centralized critic explains returns better than local critics.

``measure_c22(...) -> dict`` (numbers only; the PASS criterion lives with the claims table):

1. **Non-stationarity.** One behaviour-cloned start pair (``experiments.train_pair``) is trained
   twice with ``ppo_independent`` for ``updates`` updates on the same rollout seeds: once with
   agent B frozen at its start model, once with B training. Before and after, both runs are
   evaluated on the SAME tasks whose bug is only in ``a`` (fixed seeds): agent A's success
   (verifier 0/1, Wilson interval) and the distribution of the message words A receives from B.
   The shift of that distribution is the total-variation distance to the start distribution,
   ``TV(p, q) = 1/2 sum_w |p(w) - q(w)|``, with a 95 % bootstrap interval over episodes
   (``n_boot`` resamples of both episode sets); ``c22_msg_tv_diff`` is TV(B training) - TV(B
   frozen) with its own bootstrap interval: how much of A's environment change comes from B
   learning rather than from A's own updates.
2. **Centralized vs local critic.** On one fixed data set of noisy scripted-oracle pair episodes
   (behaviour fixed, so both critics see the same data), each agent's centralized critic
   (``ppo_ctde``: joint states) and local critic (``ppo_independent``: own context) are fitted for
   ``critic_updates`` critic-only updates (``value_warmup_updates`` keeps the policy frozen) on
   ``fit_episodes`` episodes, then scored on ``heldout_episodes`` other episodes (other task
   indices, other seeds) by PPO's own diagnostic ``critic/explained_variance_heldout``: the
   explained variance of the critic's values at the decision points against the complete Monte
   Carlo returns of terminated trajectories, before any fitting on them.
"""

from __future__ import annotations

import copy
import time
from collections import Counter
from functools import partial

import numpy as np
import torch

from algos.metrics import binomial_confidence_interval
from algos.pair_rollout import PairRolloutEngine, agent_trajectories, pair_requests
from algos.policy import PolicyModel, PolicyShape, ValueModel
from algos.ppo_ctde import PairLearner
from algos.registry import make_trainer
from envs.pairfix import AGENTS, indices_with_bug_in
from envs.pairfix.agents import PairOracle
from envs.tokenizer import get_tokenizer
from experiments.train_pair import PairConfig, warm_start


def message_distribution(episodes: list[dict], agent: str = "a") -> Counter:
    """Word counts of every message ``agent`` received over ``episodes``."""
    c: Counter = Counter()
    for ep in episodes:
        t = ep[agent]
        if t is not None:
            for m in t.messages_received:
                c.update(m.split(" "))
    return c


def total_variation(p: Counter, q: Counter) -> float:
    """``1/2 sum_w |p(w)/|p| - q(w)/|q||``; 0 when both are empty, 1 when exactly one is."""
    np_, nq = sum(p.values()), sum(q.values())
    if np_ == 0 and nq == 0:
        return 0.0
    if np_ == 0 or nq == 0:
        return 1.0
    return 0.5 * sum(abs(p[w] / np_ - q[w] / nq) for w in set(p) | set(q))


def _bootstrap_tv(start: list[Counter], end: list[Counter], n_boot: int, rng) -> tuple[float, float, np.ndarray]:
    """TV between the pooled per-episode counts, and its bootstrap draws (resampling episodes)."""
    point = total_variation(sum(start, Counter()), sum(end, Counter()))
    draws = np.empty(n_boot)
    for k in range(n_boot):
        s = [start[i] for i in rng.integers(len(start), size=len(start))]
        e = [end[i] for i in rng.integers(len(end), size=len(end))]
        draws[k] = total_variation(sum(s, Counter()), sum(e, Counter()))
    return point, draws


def _per_episode(episodes: list[dict]) -> list[Counter]:
    return [message_distribution([ep]) for ep in episodes]


def _success(episodes: list[dict]) -> tuple[int, int]:
    live = [ep for ep in episodes if ep["a"] is not None and not ep["a"].masked]
    return sum(int(ep["a"].verified or 0) for ep in live), len(live)


def measure_c22(seed: int = 0, updates: int = 3, episodes_per_update: int = 16, eval_episodes: int = 24,
                demos: int = 64, bc_epochs: int = 60, fit_episodes: int = 24, heldout_episodes: int = 24,
                critic_updates: int = 8, n_boot: int = 200, d_model: int = 32, critic_lr: float = 1e-3,
                critic_epochs: int = 2) -> dict:
    """The C22 numbers (see the module docstring); flat keys ``c22_*``."""
    t0 = time.perf_counter()
    tok = get_tokenizer()
    rng = np.random.default_rng(seed)
    c = PairConfig(algo="ppo_independent", seed=seed, updates=updates, episodes_per_update=episodes_per_update,
                   eval_episodes=eval_episodes, demos=demos, bc_epochs=bc_epochs, d_model=d_model,
                   algo_fields={**PairConfig().algo_fields, "lr": 1e-3})
    shape = PolicyShape(vocab_size=tok.vocab_size, d_model=c.d_model, n_layers=c.n_layers, n_heads=c.n_heads,
                        max_len=c.max_len)
    torch.manual_seed(seed)
    start = {a: PolicyModel(shape) for a in AGENTS}
    warm_start(start, c)
    engine = PairRolloutEngine(c.num_envs, c.max_len, c.max_action_tokens, c.temperature, c.env_kwargs)
    a_only = indices_with_bug_in("a", c.eval_episodes, start=1000)

    def evaluate(models) -> list[dict]:
        gen = torch.Generator().manual_seed(70_000 + seed)
        return engine.collect(models, pair_requests(c.eval_episodes, 70_000 + seed, "train", a_only), -1, gen)

    eval_start = evaluate(start)
    ends = {}
    for run, frozen in (("frozen", ("b",)), ("training", ())):
        policies = {a: copy.deepcopy(m) for a, m in start.items()}
        trainers = {a: make_trainer("ppo_independent", c.algo_config(), policies[a], critic=ValueModel(shape),
                                    temperature=c.temperature) for a in AGENTS}
        learner = PairLearner(trainers, frozen=frozen)
        gen = torch.Generator().manual_seed(seed)
        for k in range(updates):
            reqs = pair_requests(c.episodes_per_update, 1000 * (k + 1) + seed,
                                 task_indices=[(k * c.episodes_per_update + i) % c.train_tasks
                                               for i in range(c.episodes_per_update)])
            learner.update(engine.collect(learner.models(), reqs, k, gen))
        ends[run] = evaluate(learner.models())

    out: dict = {}
    s0, n0 = _success(eval_start)
    out["c22_success_a_only_start"] = s0 / max(n0, 1)
    out["c22_success_a_only_start_lo"], out["c22_success_a_only_start_hi"] = binomial_confidence_interval(s0, max(n0, 1))
    per_start = _per_episode(eval_start)
    draws = {}
    for run, eps in ends.items():
        s, n = _success(eps)
        out[f"c22_success_a_only_{run}"] = s / max(n, 1)
        lo, hi = binomial_confidence_interval(s, max(n, 1))
        out[f"c22_success_a_only_{run}_lo"], out[f"c22_success_a_only_{run}_hi"] = lo, hi
        out[f"c22_success_a_only_{run}_shift"] = s / max(n, 1) - s0 / max(n0, 1)
        point, d = _bootstrap_tv(per_start, _per_episode(eps), n_boot, rng)
        draws[run] = d
        out[f"c22_msg_tv_{run}"] = point
        out[f"c22_msg_tv_{run}_lo"], out[f"c22_msg_tv_{run}_hi"] = (float(np.quantile(d, 0.025)),
                                                                    float(np.quantile(d, 0.975)))
        out[f"c22_messages_received_{run}"] = sum(sum(x.values()) for x in _per_episode(eps))
    out["c22_messages_received_start"] = sum(sum(x.values()) for x in per_start)
    diff = draws["training"] - draws["frozen"]
    out["c22_msg_tv_diff"] = out["c22_msg_tv_training"] - out["c22_msg_tv_frozen"]
    out["c22_msg_tv_diff_lo"], out["c22_msg_tv_diff_hi"] = float(np.quantile(diff, 0.025)), float(np.quantile(diff, 0.975))
    out.update(critic_explained_variance(c, seed, fit_episodes, heldout_episodes, critic_updates, critic_lr, critic_epochs))
    out["c22_eval_episodes"] = c.eval_episodes
    out["c22_updates"] = updates
    out["c22_seconds"] = time.perf_counter() - t0
    return out


def critic_explained_variance(c: PairConfig, seed: int, fit_episodes: int, heldout_episodes: int,
                              critic_updates: int, critic_lr: float = 1e-3, critic_epochs: int = 2) -> dict:
    """Held-out EV of centralized vs local critics fitted on the same scripted episodes."""
    tok = get_tokenizer()
    engine = PairRolloutEngine(c.num_envs, c.max_len, c.max_action_tokens, c.temperature, c.env_kwargs)
    demo = {a: partial(PairOracle, c.demo_noise) for a in AGENTS}
    fit = engine.collect(demo, pair_requests(fit_episodes, 20_000 + seed, task_indices=list(range(fit_episodes))))
    held = engine.collect(demo, pair_requests(heldout_episodes, 30_000 + seed,
                                              task_indices=list(range(5000, 5000 + heldout_episodes))))
    for ep in fit + held:
        for t in ep.values():
            if t is not None:
                t.temperature = c.temperature  # scripted demos scored as samples (the policy is frozen anyway)
    algo = PairConfig(algo_fields={**c.algo_fields, "lr": critic_lr, "value_warmup_updates": 10**9,
                                         "epochs": critic_epochs}).algo_config()
    out: dict = {}
    for kind, name, length in (("central", "ppo_ctde", 2 * c.max_len + 2), ("local", "ppo_independent", c.max_len)):
        evs = []
        for a in AGENTS:
            torch.manual_seed(seed + AGENTS.index(a))
            shape = PolicyShape(vocab_size=tok.vocab_size, d_model=c.d_model, n_layers=c.n_layers, n_heads=c.n_heads,
                                max_len=c.max_len)
            cshape = PolicyShape(vocab_size=tok.vocab_size, d_model=c.d_model, n_layers=c.n_layers,
                                 n_heads=c.n_heads, max_len=length)
            trainer = make_trainer(name, algo, PolicyModel(shape), critic=ValueModel(cshape))
            data = agent_trajectories(fit, a)
            for _ in range(critic_updates):
                trainer.update(data)
            batch, inputs = trainer.prepare_batch(agent_trajectories(held, a))
            ev = trainer.advantages(batch, inputs).metrics.get("critic/explained_variance_heldout", float("nan"))
            out[f"c22_ev_{kind}_{a}"] = float(ev)
            evs.append(float(ev))
        out[f"c22_ev_{kind}"] = float(np.mean(evs))
    out["c22_heldout_success"] = sum(int(ep["a"].verified or 0) for ep in held if ep["a"] is not None) / len(held)
    return out


def check_c22(d: dict) -> bool:
    """The proposed PASS criterion: B's learning shifts the messages A receives more than A's own
    learning does (bootstrap interval of the TV difference above 0), and the centralized critic's
    held-out EV beats the local critics' (mean over both agents)."""
    return d["c22_msg_tv_diff_lo"] > 0 and d["c22_ev_central"] > d["c22_ev_local"]


__all__ = ["check_c22", "critic_explained_variance", "measure_c22", "message_distribution", "total_variation"]
