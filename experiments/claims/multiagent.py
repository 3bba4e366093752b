"""Claim C22 on PairFix-v2: two learning agents see a non-stationary environment, and a
centralized critic's inputs explain returns better than local critics' inputs.

``measure_c22(...)`` returns the claim's frozen result (:class:`C22Result`: the numbers of both
parts as fields, the row's texts and the pass rule):

1. **Non-stationarity** (``nonstationarity``). One behaviour-cloned start pair
   (``experiments.runtime.pair.warm_start``) is trained twice with ``ppo_independent`` for
   ``updates`` updates on the same rollout seeds: once with agent B frozen at its start model,
   once with B training. Before and after, the pair is evaluated on the SAME ``eval_episodes``
   episodes (fixed seeds) of the train tasks whose bug is only in ``a``: agent A's success
   (verifier 0/1, Wilson interval) and the distribution of the message words A receives from B.
   The shift of that distribution is the total-variation distance to the start distribution,

       TV(p, q) = 1/2 sum_w |p(w) - q(w)|,

   with a 95 % bootstrap interval over episodes (``n_boot`` resamples of the start, frozen-end
   and training-end episode sets, one start resample shared by both runs per draw);
   ``tv_diff = TV(start, B training) - TV(start, B frozen)`` with the interval of the
   paired draws: how much of A's environment change comes from B learning rather than from A's
   own updates and sampling noise. The policy learning rate ``lr`` is set so B's message
   distribution moves within ``updates`` updates without silencing B, and one training run's
   difference varies from run to run (docs/results.md, C22), so the claim runs ``updates`` updates in
   ``replicates`` training replicates (rollout and evaluation seeds ``seed + r``) and pools them
   (``nonstationarity``): the mean difference, with a stratified paired bootstrap interval.
2. **Centralized vs local critic inputs** (``critic_information_gap``). On a fixed data set of
   noisy scripted-oracle pair episodes (``PairOracle(demo_noise)``: each fix is a wrong edit with
   that probability, so the outcome is random and decided partly in the OTHER agent's file), each
   decision point of each agent gets the input a local critic reads (its own context up to the
   decision, ``ppo_independent``) and the joint state the centralized critic reads
   (``PairTrajectory.joint_points``, ``ppo_ctde``). The same value-function class, a ridge
   regression on log-count unigram + bigram features of each block (own / other) plus the agent
   id, is fitted on the complete returns (terminated trajectories, gamma = 1) of
   ``fit_episodes`` episodes and scored on ``heldout_episodes`` other episodes (other seeds, so
   other mistakes) of the same ``probe_tasks`` tasks: held-out explained variance
   ``EV = 1 - Var(G - V) / Var(G)`` of central and local inputs, and the difference with a paired
   bootstrap interval over held-out episodes. A linear probe, not the transformer critic: at this
   scale (tens of episodes, one CPU minute) the ``ValueModel`` critics fitted by PPO's own value
   loss reach a held-out EV near 0 for both inputs (docs/results.md, C22), which measures the fit,
   not the information; the probe measures what the joint inputs add.
"""

from __future__ import annotations

import copy
import time
from collections import Counter
from dataclasses import dataclass, replace
from functools import partial
from typing import ClassVar

import numpy as np
import torch

from algos.metrics import binomial_confidence_interval
from algos.pair_rollout import PairEpisode, agent_trajectories
from algos.policy import PolicyModel, ValueModel
from algos.ppo_ctde import PairLearner
from algos.registry import make_trainer
from algos.requests import make_requests
from envs.pairfix import AGENTS, indices_with_bug_in
from envs.pairfix.agents import PairOracle
from experiments.claims.common import pair_claims_config
from experiments.claims.result import EMPIRICAL, ClaimResult
from experiments.runtime.build import policy_shape, sampling_generator, train_engine, update_requests
from experiments.runtime.pair import eval_episodes, pair_algo_config, pair_updates, warm_start
from experiments.runtime.schema import TrainConfig
from experiments.runtime.seeds import Stream, stream_seed


@dataclass(frozen=True)
class Estimate:
    """A value with its 95 % interval ``[lo, hi]``."""

    value: float
    lo: float
    hi: float

    def show(self, digits: int = 2) -> str:
        """``value [lo, hi]``: the value with ``digits`` decimals, the interval with 2."""
        return f"{self.value:.{digits}f} [{self.lo:.2f}, {self.hi:.2f}]"


def message_distribution(episodes: list[PairEpisode], agent: str = "a") -> Counter:
    """Word counts of every message ``agent`` received over ``episodes``."""
    c: Counter = Counter()
    for ep in episodes:
        t = ep.for_agent(agent)
        if t is not None:
            for m in t.messages_received:
                c.update(m.split(" "))
    return c


def total_variation(p: Counter, q: Counter) -> float:
    """``1/2 sum_w |p(w)/|p| - q(w)/|q|| = sum_w |p(w) |q| - q(w) |p|| / (2 |p| |q|)`` of integer
    word counts, summed exactly in integers and divided once (so the float does not depend on the
    order of the words, which for ``str`` keys changes with ``PYTHONHASHSEED``); 0 when both are
    empty, 1 when exactly one is."""
    np_, nq = sum(p.values()), sum(q.values())
    if np_ == 0 and nq == 0:
        return 0.0
    if np_ == 0 or nq == 0:
        return 1.0
    return sum(abs(p[w] * nq - q[w] * np_) for w in set(p) | set(q)) / (2 * np_ * nq)


def paired_tv_bootstrap(start: list[Counter], ends: dict[str, list[Counter]], n_boot: int,
                        rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Bootstrap draws of ``TV(pooled start, pooled end)`` for each run of ``ends`` (per-episode
    word counts; each set resampled with replacement, one start resample shared by all runs in
    a draw, so differences between runs are paired). Returns ``{run: [n_boot] draws}``."""
    draws = {run: np.empty(n_boot) for run in ends}
    for k in range(n_boot):
        s = sum((start[i] for i in rng.integers(len(start), size=len(start))), Counter())
        for run, eps in ends.items():
            e = sum((eps[i] for i in rng.integers(len(eps), size=len(eps))), Counter())
            draws[run][k] = total_variation(s, e)
    return draws


def _per_episode(episodes: list[PairEpisode]) -> list[Counter]:
    return [message_distribution([ep]) for ep in episodes]


def _success(episodes: list[PairEpisode]) -> tuple[int, int]:
    """(verified successes, episodes) over the episodes where agent ``a`` acted, unmasked."""
    live = [t for t in (ep.for_agent("a") for ep in episodes) if t is not None and not t.masked]
    return sum(int(t.verified or 0) for t in live), len(live)


def _interval(draws: np.ndarray) -> tuple[float, float]:
    """The 95 % percentile interval of the bootstrap ``draws`` that are defined (a resample whose
    returns are all equal has no explained variance: NaN, left out); NaN when none is."""
    defined = draws[~np.isnan(draws)]
    if not len(defined):
        return float("nan"), float("nan")
    return float(np.quantile(defined, 0.025)), float(np.quantile(defined, 0.975))


def _replicate_episodes(c: TrainConfig, start: dict, engine, a_only: list[int], seed: int) -> tuple[list, dict]:
    """One replicate of part 1 with run seed ``seed``: the start pair's evaluation episodes
    (``eval_episodes(c)`` on the train tasks ``a_only``, cycled; stream ``NONSTATIONARITY_EVAL``)
    and, for B frozen and B training, the episodes after ``pair_updates(c)`` updates drawn as a
    pair run of that seed draws them (``build.update_requests`` / ``sampling_generator``)."""
    run_c = replace(c, seed=seed)
    eval_seed = stream_seed(seed, stream=Stream.NONSTATIONARITY_EVAL)

    def evaluate(models) -> list[PairEpisode]:
        tasks = [a_only[i % len(a_only)] for i in range(eval_episodes(c))]
        reqs = make_requests(len(tasks), 1, seed=eval_seed, split="train", task_indices=tasks)
        return engine.collect(models, reqs, -1, torch.Generator().manual_seed(eval_seed))

    eval_start = evaluate(start)
    ends = {}
    for run, frozen in (("frozen", ("b",)), ("training", ())):
        policies = {a: copy.deepcopy(m) for a, m in start.items()}
        trainers = {a: make_trainer("ppo_independent", pair_algo_config(c), policies[a], critic=ValueModel(start[a].shape),
                                    temperature=c.rollout.temperature) for a in AGENTS}
        learner = PairLearner(trainers, frozen=frozen)
        for k in range(pair_updates(c)):
            episodes = engine.collect(learner.models(), update_requests(run_c, k), k, sampling_generator(run_c, k))
            learner.update(episodes)
        ends[run] = evaluate(learner.models())
    return eval_start, ends


@dataclass(frozen=True)
class Nonstationarity:
    """Part 1 of the module docstring, pooled over ``replicates`` training replicates of
    ``updates`` updates, each evaluated on ``eval_episodes`` episodes: agent A's success at the
    start, after B frozen and after B training (Wilson intervals); the message words A received in
    each (``words_*``); the TV of A's received-word distribution to the start's with B frozen and
    B training, their difference ``tv_diff`` (bootstrap intervals) and each replicate's
    difference."""

    success_start: Estimate
    success_frozen: Estimate
    success_training: Estimate
    words_start: int
    words_frozen: int
    words_training: int
    tv_frozen: Estimate
    tv_training: Estimate
    tv_diff: Estimate
    tv_diff_replicates: tuple[float, ...]
    eval_episodes: int
    updates: int
    replicates: int


def _success_estimate(successes: int, episodes: int) -> Estimate:
    lo, hi = binomial_confidence_interval(successes, max(episodes, 1))
    return Estimate(successes / max(episodes, 1), lo, hi)


def _pool_replicates(c: TrainConfig, start: dict, engine, a_only: list[int], n_boot: int,
                     rng: np.random.Generator, replicates: int) -> tuple[dict, dict, dict, dict]:
    """Runs the replicates of part 1 and pools them: per run (start, frozen, training) the
    summed ``[successes, episodes]`` and received words; per trained run (frozen, training) each
    replicate's TV to the start and the mean of the replicates' paired bootstrap draws."""
    runs = ("frozen", "training")
    counts = {run: [0, 0] for run in ("start",) + runs}
    words = {run: 0 for run in ("start",) + runs}
    tv = {run: [] for run in runs}
    draws = {run: np.zeros(n_boot) for run in runs}
    for r in range(replicates):
        eval_start, ends = _replicate_episodes(c, start, engine, a_only, c.seed + r)
        per_start = _per_episode(eval_start)
        per_end = {run: _per_episode(ends[run]) for run in runs}
        pooled_start = sum(per_start, Counter())
        for run, eps in (("start", eval_start), *ends.items()):
            s, n = _success(eps)
            counts[run][0] += s
            counts[run][1] += n
        words["start"] += sum(pooled_start.values())
        rep_draws = paired_tv_bootstrap(per_start, per_end, n_boot, rng)
        for run in runs:
            tv[run].append(total_variation(pooled_start, sum(per_end[run], Counter())))
            draws[run] += rep_draws[run] / replicates
            words[run] += sum(sum(x.values()) for x in per_end[run])
    return counts, words, tv, draws


def nonstationarity(c: TrainConfig, n_boot: int, rng: np.random.Generator, replicates: int = 1) -> Nonstationarity:
    """Part 1 of the module docstring on config ``c`` (``c.algo`` must be ``ppo_independent``),
    over ``replicates`` training replicates from the same start pair: replicate ``r`` draws its
    rollouts and evaluations from run seed ``c.seed + r`` (replicate 0 is the single-replicate
    measurement).
    Pooled over replicates: successes are summed (Wilson interval on the pooled counts); every TV
    is the mean of the replicates' TVs, and its interval comes from the mean of their paired
    bootstrap draws (each replicate resampled within its own episodes, the draws averaged: a
    stratified bootstrap of the mean). ``tv_diff_replicates`` lists each replicate's difference:
    B's learning moves from one training run to the next far more than the evaluation episodes
    do."""
    if replicates < 1:
        raise ValueError(f"replicates={replicates} must be >= 1")
    torch.manual_seed(c.seed)
    start = {a: PolicyModel(policy_shape(c)) for a in AGENTS}
    warm_start(start, c)
    engine = train_engine(c)
    a_only = [i for i in indices_with_bug_in("a", c.env.train_tasks) if i < c.env.train_tasks]
    counts, words, tv, draws = _pool_replicates(c, start, engine, a_only, n_boot, rng, replicates)
    tv_frozen, tv_training = float(np.mean(tv["frozen"])), float(np.mean(tv["training"]))
    return Nonstationarity(
        success_start=_success_estimate(*counts["start"]), success_frozen=_success_estimate(*counts["frozen"]),
        success_training=_success_estimate(*counts["training"]),
        words_start=words["start"], words_frozen=words["frozen"], words_training=words["training"],
        tv_frozen=Estimate(tv_frozen, *_interval(draws["frozen"])),
        tv_training=Estimate(tv_training, *_interval(draws["training"])),
        tv_diff=Estimate(tv_training - tv_frozen, *_interval(draws["training"] - draws["frozen"])),
        tv_diff_replicates=tuple(t - f for t, f in zip(tv["training"], tv["frozen"])),
        eval_episodes=eval_episodes(c), updates=pair_updates(c), replicates=replicates)


# ---------------------------------------------------------------------------------------------
# part 2: what the joint inputs add to a critic

def ngram_features(tokens: list[int], block: str) -> Counter:
    """Counts of the unigrams and bigrams of ``tokens``, keyed ``(block, n-gram)``."""
    c: Counter = Counter((block, x) for x in tokens)
    c.update((block, x, y) for x, y in zip(tokens, tokens[1:]))
    return c


def critic_points(episodes: list[PairEpisode], central: bool) -> tuple[list[Counter], np.ndarray, np.ndarray]:
    """One row per decision point of every terminated, unmasked, one-segment agent trajectory:
    features of the local input (own context up to the decision: ``tokens[:turn.start]``) or, with
    ``central``, of the joint state (own block + the other agent's block of ``joint_points[k]``),
    plus the agent id; the complete return-to-go ``G_k = sum_{j >= k} r_j`` (gamma = 1); the
    episode index (for paired resampling)."""
    feats, returns, owner = [], [], []
    for i, ep in enumerate(episodes):
        for a in ep.agents():
            t = ep.for_agent(a)
            if t.masked or len(t.segments) != 1 or t.segments[0].end != "terminated":
                continue
            seg = t.segments[0]
            g = sum(turn.reward for turn in seg.turns)
            for turn, joint in zip(seg.turns, t.joint_points):
                own = list(seg.tokens[: turn.start])
                f = ngram_features(own, "own")
                if central:
                    f.update(ngram_features(list(joint[len(own): -1]), "other"))
                f[("agent", a)] = 1
                feats.append(f)
                returns.append(g)
                owner.append(i)
                g -= turn.reward
    return feats, np.asarray(returns, dtype=np.float64), np.asarray(owner)


def ridge_values(fit: list[Counter], fit_returns: np.ndarray, held: list[Counter], ridge: float) -> np.ndarray:
    """Values of ``held`` from ``w = argmin |G - mean(G) - (X - mean(X)) w|^2 + ridge |w|^2`` on
    ``X = log(1 + counts)`` of the features seen in ``fit`` (unseen features are dropped)."""
    keys = {k: j for j, k in enumerate(sorted({k for f in fit for k in f}, key=repr))}

    def matrix(rows: list[Counter]) -> np.ndarray:
        m = np.zeros((len(rows), len(keys)))
        for r, f in enumerate(rows):
            for k, v in f.items():
                if k in keys:
                    m[r, keys[k]] = np.log1p(v)
        return m

    x, xh = matrix(fit), matrix(held)
    mu, gm = x.mean(0), fit_returns.mean()
    xc = x - mu
    w = np.linalg.solve(xc.T @ xc + ridge * np.eye(len(keys)), xc.T @ (fit_returns - gm))
    return (xh - mu) @ w + gm


def _ev(values: np.ndarray, returns: np.ndarray) -> float:
    var = returns.var()
    return float(1.0 - (returns - values).var() / var) if var > 0 else float("nan")


@dataclass(frozen=True)
class CriticGap:
    """Part 2 of the module docstring: held-out explained variance of the ridge probe on the
    central and on the local inputs (pooled and per agent), the difference with its paired
    bootstrap interval, the noisy oracle's held-out success rate and the held-out point count."""

    ev_central: float
    ev_central_a: float
    ev_central_b: float
    ev_local: float
    ev_local_a: float
    ev_local_b: float
    ev_diff: Estimate
    heldout_success: float
    heldout_points: int


def _probe_values(fit: list[PairEpisode], held: list[PairEpisode], ridge: float) -> tuple[dict, np.ndarray,
                                                                                          np.ndarray, np.ndarray]:
    """The probe's held-out values for the central and the local inputs, and the held-out
    returns, owning episodes and agent ids (the same rows for both inputs)."""
    values, returns, owner, agent = {}, None, None, None
    for kind in ("central", "local"):
        f, g, _ = critic_points(fit, kind == "central")
        fh, gh, oh = critic_points(held, kind == "central")
        values[kind] = ridge_values(f, g, fh, ridge)
        returns, owner = gh, oh
        agent = np.array([next(k[1] for k in x if k[0] == "agent") for x in fh])
    return values, returns, owner, agent


def critic_information_gap(seed: int, probe_tasks: int, fit_episodes: int, heldout_episodes: int,
                           demo_noise: float, ridge: float, n_boot: int, rng: np.random.Generator,
                           c: TrainConfig) -> CriticGap:
    """Part 2 of the module docstring: the held-out EV of central and local inputs (pooled and
    per agent), the difference with its paired bootstrap interval (episodes resampled), the
    held-out success rate and point count."""
    engine = train_engine(c)
    demo = {a: partial(PairOracle, demo_noise) for a in AGENTS}
    fit, held = (engine.collect(demo, make_requests(n, 1, seed=stream_seed(seed, stream=stream),
                                                    task_indices=[i % probe_tasks for i in range(n)]))
                 for n, stream in ((fit_episodes, Stream.CRITIC_PROBE_FIT), (heldout_episodes, Stream.CRITIC_PROBE_HELDOUT)))
    values, returns, owner, agent = _probe_values(fit, held, ridge)
    ev = {kind: _ev(values[kind], returns) for kind in ("central", "local")}
    per_agent = {(kind, a): _ev(values[kind][agent == a], returns[agent == a])
                 for kind in ("central", "local") for a in AGENTS}
    episodes = np.unique(owner)
    rows = {e: np.nonzero(owner == e)[0] for e in episodes}
    diff = np.empty(n_boot)
    for k in range(n_boot):
        idx = np.concatenate([rows[e] for e in rng.choice(episodes, size=len(episodes))])
        diff[k] = _ev(values["central"][idx], returns[idx]) - _ev(values["local"][idx], returns[idx])
    return CriticGap(ev_central=ev["central"], ev_central_a=per_agent["central", "a"],
                     ev_central_b=per_agent["central", "b"], ev_local=ev["local"],
                     ev_local_a=per_agent["local", "a"], ev_local_b=per_agent["local", "b"],
                     ev_diff=Estimate(ev["central"] - ev["local"], *_interval(diff)),
                     heldout_success=sum(int(t.verified or 0) for t in agent_trajectories(held, "a")) / len(held),
                     heldout_points=int(len(returns)))


@dataclass(frozen=True)
class C22Result(ClaimResult):
    """Both parts of the module docstring (:class:`Nonstationarity`, :class:`CriticGap`) and the
    wall-clock ``seconds`` of the measurement."""

    what: ClassVar[str] = ("multi-agent non-stationarity and a centralized critic (PairFix-v2, ppo_independent runs "
                           "B frozen vs training; critic inputs on noisy-oracle episodes)")
    expected: ClassVar[str] = ("B training shifts A's received messages more than B frozen (interval > 0); central "
                               "inputs' held-out EV > local (interval > 0)")
    kind: ClassVar[str] = EMPIRICAL

    nonstationarity: Nonstationarity
    critic: CriticGap
    seconds: float

    def passes(self) -> bool:
        """B's learning shifts the messages A receives more than A's own learning and sampling
        noise do (the paired bootstrap interval of the TV difference is above 0), and the
        centralized critic's inputs explain held-out returns better than the local ones (the
        paired bootstrap interval of ``EV_central - EV_local`` is above 0)."""
        return bool(self.nonstationarity.tv_diff.lo > 0 and self.critic.ev_diff.lo > 0)

    @property
    def measured(self) -> str:
        n, c = self.nonstationarity, self.critic
        reps = ", ".join(f"{x:+.2f}" for x in n.tv_diff_replicates)
        return (f"PairFix-v2, ppo_independent from one BC start, {n.updates} updates, B frozen vs training, "
                f"{n.replicates} training replicates x {n.eval_episodes} eval episodes on bug-only-in-a train tasks "
                f"(pooled): A's success start {n.success_start.show()}, B frozen {n.success_frozen.show()}, B "
                f"training {n.success_training.show()}; TV of A's received message words to the start (words "
                f"{n.words_start}): B frozen {n.tv_frozen.show()} (words {n.words_frozen}), B training "
                f"{n.tv_training.show()} (words {n.words_training}), difference {n.tv_diff.show()} (per replicate "
                f"{reps}); critic inputs (same ridge probe, {c.heldout_points} held-out decision points, noisy-oracle "
                f"success {c.heldout_success:.2f}): held-out EV central {c.ev_central:.3f} (a {c.ev_central_a:.3f}, b "
                f"{c.ev_central_b:.3f}) vs local {c.ev_local:.3f} (a {c.ev_local_a:.3f}, b {c.ev_local_b:.3f}), "
                f"difference {c.ev_diff.show(3)}; decentralized execution: tests/algos/test_ppo_ctde.py")


def measure_c22(seed: int = 0, updates: int = 8, episodes_per_update: int = 16, eval_episodes: int = 48,
                lr: float = 2e-3, demos: int = 64, bc_epochs: int = 60, d_model: int = 32, n_boot: int = 400,
                probe_tasks: int = 6, fit_episodes: int = 48, heldout_episodes: int = 48, demo_noise: float = 0.5,
                ridge: float = 10.0, replicates: int = 3) -> C22Result:
    """The C22 numbers (see the module docstring). Deterministic per seed (but ``seconds``).
    The config is the two-agent claims preset (``experiments.claims.common.pair_claims_config``,
    ``algo=ppo_independent``) with these arguments; ``nonstationarity`` and the critic probe read
    its engine sizes (``num_envs = min(16, episodes_per_update)``), policy shape and PPO fields."""
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    c = pair_claims_config("ppo_independent", updates=updates, episodes_per_update=episodes_per_update,
                           eval_episodes=eval_episodes,
                           overrides=(f"seed={seed}", f"algo.lr={lr}", f"warmstart.demos={demos}",
                                      f"warmstart.epochs={bc_epochs}", f"policy.d_model={d_model}"))
    part1 = nonstationarity(c, n_boot, rng, replicates)
    part2 = critic_information_gap(seed, probe_tasks, fit_episodes, heldout_episodes, demo_noise, ridge, n_boot, rng, c)
    return C22Result(nonstationarity=part1, critic=part2, seconds=time.perf_counter() - t0)


__all__ = ["C22Result", "CriticGap", "Estimate", "Nonstationarity", "critic_information_gap", "critic_points",
           "measure_c22", "message_distribution", "ngram_features", "nonstationarity", "paired_tv_bootstrap",
           "ridge_values", "total_variation"]
