"""Claim C22's measurement (experiments/claims/multiagent.py): its helpers on hand-computed
numbers, and a tiny real run whose numbers are internally consistent."""

from __future__ import annotations

import dataclasses
import math
from collections import Counter

import numpy as np
import pytest

from algos.pair_rollout import PairEpisode
from experiments.claims.common import pair_claims_config
from experiments.claims.multiagent import (C22Result, CriticGap, Estimate, Nonstationarity, measure_c22,
                                           message_distribution, paired_tv_bootstrap, ridge_values, total_variation)
from experiments.runtime.build import rollouts_per_update
from experiments.runtime.pair import eval_episodes, pair_algo_config, pair_updates
from experiments.runtime.schema import AlgoConfig


class _T:
    def __init__(self, received):
        self.messages_received = received


def test_total_variation_hand_computed():
    # p = {fixed: 3/4, wait: 1/4}, q = {fixed: 1/2, bug: 1/2}
    # TV = 1/2 (|3/4 - 1/2| + |1/4 - 0| + |0 - 1/2|) = 1/2 (1/4 + 1/4 + 1/2) = 1/2
    p, q = Counter(fixed=3, wait=1), Counter(fixed=1, bug=1)
    assert total_variation(p, q) == pytest.approx(0.5)
    assert total_variation(p, p) == 0.0
    assert total_variation(Counter(), Counter()) == 0.0 and total_variation(p, Counter()) == 1.0


def test_total_variation_is_exact_whatever_the_word_order():
    # p = {c: 8}, q = {b: 6, c: 3}: |p| = 8, |q| = 9; sum_w |p(w) 9 - q(w) 8| = |72 - 24| + |0 - 48| = 96
    # TV = 96 / (2 * 72) = 2/3, the float nearest 2/3 (a float sum of the rounded terms 1/2 * (|1 - 3/9|
    # + 6/9) gives 0.6666666666666667 in either order)
    assert total_variation(Counter(c=8), Counter(b=6, c=3)) == 2 / 3
    # p = {a: 6, b: 3, c: 1, d: 7} (17), q = {b: 6, c: 6, d: 9} (21): 126 + 39 + 81 + 6 = 252;
    # TV = 252 / (2 * 357) = 6/17 (the float sum is 6/17 + 1 or 3 ulp depending on the word order)
    p, q = Counter(a=6, b=3, c=1, d=7), Counter(b=6, c=6, d=9)
    assert total_variation(p, q) == 6 / 17
    assert total_variation(Counter(dict(reversed(p.items()))), Counter(dict(reversed(q.items())))) == 6 / 17


def test_message_distribution_counts_words_agent_a_received():
    eps = [PairEpisode({"a": _T(["bug yours", "fixed"]), "b": _T(["x"])}), PairEpisode({"a": None, "b": _T([])}),
           PairEpisode({"a": _T(["fixed"]), "b": None})]
    assert message_distribution(eps) == Counter(bug=1, yours=1, fixed=2)
    assert message_distribution(eps, "b") == Counter(x=1)


def _result(tv_diff_lo: float, ev_diff_lo: float) -> C22Result:
    """A hand-made C22 result: only the two interval bounds the pass rule reads vary."""
    e = Estimate(0.5, 0.4, 0.6)
    part1 = Nonstationarity(success_start=e, success_frozen=e, success_training=e, words_start=10, words_frozen=10,
                            words_training=10, tv_frozen=e, tv_training=e, tv_diff=Estimate(0.1, tv_diff_lo, 0.2),
                            tv_diff_replicates=(0.1,), eval_episodes=6, updates=1, replicates=1)
    part2 = CriticGap(ev_central=0.3, ev_central_a=0.3, ev_central_b=0.3, ev_local=0.2, ev_local_a=0.2,
                      ev_local_b=0.2, ev_diff=Estimate(0.1, ev_diff_lo, 0.2), heldout_success=0.5, heldout_points=20)
    return C22Result(nonstationarity=part1, critic=part2, seconds=1.0)


def test_pass_rule():
    assert _result(0.01, 0.02).passes()
    assert not _result(-0.01, 0.02).passes()
    assert not _result(0.01, 0.0).passes()
    assert not _result(0.01, float("nan")).passes()
    text = _result(0.01, 0.02).measured
    assert "difference 0.10 [0.01, 0.20] (per replicate +0.10)" in text
    assert "difference 0.100 [0.02, 0.20]; decentralized execution" in text


def test_ridge_values_hand_computed():
    # one feature f with counts 0, 1, 3 -> x = log1p = 0, l, 2l (l = ln 2); G = 0, 1, 2
    # centered x = -l, 0, l; centered G = -1, 0, 1; Sxx = 2 l^2, Sxy = 2 l; w = 2l / (2 l^2 + ridge)
    # V(count 3) = mean G + (2l - l) w = 1 + l w; a row with only an unseen feature: 1 + (0 - l) w
    fit = [Counter(), Counter(f=1), Counter(f=3)]
    l = math.log(2.0)
    w = 2 * l / (2 * l * l + 1.0)
    v = ridge_values(fit, np.array([0.0, 1.0, 2.0]), [Counter(f=3), Counter(g=5)], ridge=1.0)
    assert v == pytest.approx([1 + l * w, 1 - l * w])


def test_paired_tv_bootstrap_shares_the_start_resample():
    # identical end sets: every draw of both runs uses the same start resample, but each end set
    # is resampled on its own; with one-episode sets there is nothing to resample: all draws equal
    start = [Counter(fixed=1)]
    ends = {"x": [Counter(fixed=1, wait=1)], "y": [Counter(wait=2)]}
    d = paired_tv_bootstrap(start, ends, 5, np.random.default_rng(0))
    # TV({fixed: 1}, {fixed: .5, wait: .5}) = 1/2 (.5 + .5) = .5; TV({fixed: 1}, {wait: 1}) = 1
    assert list(d["x"]) == [0.5] * 5 and list(d["y"]) == [1.0] * 5


TINY = dict(seed=0, updates=1, episodes_per_update=4, eval_episodes=6, demos=8, bc_epochs=1, probe_tasks=3,
            fit_episodes=6, heldout_episodes=6, n_boot=50, d_model=16, replicates=1)


@pytest.fixture(scope="module")
def tiny():
    return measure_c22(**TINY)


def test_tiny_run_numbers_are_consistent(tiny):
    n, c = tiny.nonstationarity, tiny.critic
    for e in (n.success_start, n.success_frozen, n.success_training):
        assert 0.0 <= e.lo <= e.value <= e.hi <= 1.0
        # successes are k / 6 episodes
        assert e.value * 6 == pytest.approx(round(e.value * 6))
    for e in (n.tv_frozen, n.tv_training):
        assert 0.0 <= e.lo <= e.hi <= 1.0
    assert n.tv_diff.value == pytest.approx(n.tv_training.value - n.tv_frozen.value)
    assert n.tv_diff.lo <= n.tv_diff.hi
    assert (n.eval_episodes, n.updates, n.replicates) == (6, 1, 1)
    for pair in ((c.ev_central_a, c.ev_central_b), (c.ev_local_a, c.ev_local_b)):
        assert all(not math.isnan(x) and x <= 1.0 for x in pair)
    for pooled in (c.ev_central, c.ev_local):  # pooled over both agents' points
        assert not math.isnan(pooled) and pooled <= 1.0
    assert c.ev_diff.value == pytest.approx(c.ev_central - c.ev_local)
    assert c.ev_diff.lo <= c.ev_diff.hi
    assert c.heldout_points > 0
    assert 0.0 < c.heldout_success < 1.0  # noisy oracle data: both outcomes present
    assert tiny.seconds > 0 and "PairFix-v2, ppo_independent from one BC start, 1 updates" in tiny.measured


def test_replicates_pool_to_the_mean_and_replicate_0_is_the_single_run(tiny):
    """Two training replicates (seeds 0 and 1): the first is exactly the one-replicate run; the
    pooled TVs are the means of the replicates'; successes are counts over 2 x 6 episodes."""
    two = measure_c22(**{**TINY, "replicates": 2}).nonstationarity
    assert two.replicates == 2 and len(two.tv_diff_replicates) == 2
    assert two.tv_diff_replicates[0] == tiny.nonstationarity.tv_diff.value
    assert two.tv_diff.value == pytest.approx(sum(two.tv_diff_replicates) / 2)
    assert two.tv_diff.value == pytest.approx(two.tv_training.value - two.tv_frozen.value)
    assert two.tv_diff.lo <= two.tv_diff.hi
    for e in (two.success_start, two.success_frozen, two.success_training):
        assert e.value * 12 == pytest.approx(round(e.value * 12))
    assert two.words_start >= tiny.nonstationarity.words_start
    with pytest.raises(ValueError, match="replicates=0 must be >= 1"):
        measure_c22(**{**TINY, "replicates": 0})


@pytest.mark.slow
def test_tiny_run_is_deterministic(tiny):
    again = measure_c22(**TINY)
    assert (again.nonstationarity, again.critic) == (tiny.nonstationarity, tiny.critic)  # all but the seconds


def test_critic_points_share_rows_and_the_own_block():
    # the same decision points, returns and episodes for both inputs; the joint state's own block
    # is exactly the local input, and it adds the other agent's block once the other has acted
    from functools import partial

    import envs
    from algos.requests import make_requests
    from algos.rollout import RolloutEngine
    from envs.pairfix.agents import PairOracle
    from experiments.claims.multiagent import critic_points

    engine = RolloutEngine(envs.PAIRFIX_ID, 3, 384, 12, make_env=partial(envs.make_multi_agent, envs.PAIRFIX_ID,
                                                                         difficulty="easy"))
    eps = engine.collect({a: partial(PairOracle, 0.5) for a in "ab"}, make_requests(3, 1, seed=7, task_indices=[0, 1, 2]))
    local, g_local, e_local = critic_points(eps, central=False)
    central, g_central, e_central = critic_points(eps, central=True)
    assert len(local) == len(central) > 0
    assert list(g_local) == list(g_central) and list(e_local) == list(e_central)
    assert set(g_local) <= {0.0, 1.0}  # outcome reward, gamma 1: the return-to-go is the final reward
    for lf, cf in zip(local, central):
        assert {k: v for k, v in cf.items() if k[0] != "other"} == lf
    assert sum(any(k[0] == "other" for k in cf) for cf in central) >= len(central) - 3  # only a's first turns lack b


#: the run knobs the two-agent claims are measured with (experiments.claims.common.pair_claims_config:
#: PAIR_CLAIMS_OVERRIDES over configs/config.yaml): a change here moves the claims' numbers; the PPO fields of
#: the algo config the pair trainers receive
CLAIMS_PAIR_KNOBS = dict(
    algo="ppo_ctde", shared_policy=False, frozen=(), env_kwargs={"difficulty": "easy"}, d_model=32, n_layers=1,
    n_heads=2, max_len=384, mlp_ratio=4, max_action_tokens=12, temperature=1.0, train_tasks=24, updates=4,
    episodes_per_update=16, num_envs=16, demos=64, demo_noise=0.3, bc_epochs=60, bc_lr=3e-3, eval_episodes=24,
    eval_split="heldout", eval_temperature=1.0, seed=0, warmstart_seed=0)
CLAIMS_ALGO_FIELDS = {"lr": 1e-4, "epochs": 2, "minibatches": 1, "micro_batch_rows": 64, "gamma": 1.0, "lam": 0.95,
                      "value_level": "turn", "vf_coef": 0.5, "value_clip": None, "norm_adv": True}


def _pair_knobs(c) -> dict:
    """The two-agent run knobs as the pair code reads them from a TrainConfig."""
    p, w = c.policy, c.warmstart
    return dict(algo=c.algo.name, shared_policy=c.algo.shared_policy, frozen=tuple(c.algo.frozen),
                env_kwargs=dict(c.env.kwargs), d_model=p.d_model, n_layers=p.n_layers, n_heads=p.n_heads,
                max_len=p.max_len, mlp_ratio=p.mlp_ratio, max_action_tokens=c.rollout.max_action_tokens,
                temperature=c.rollout.temperature, train_tasks=c.env.train_tasks, updates=pair_updates(c),
                episodes_per_update=c.algo.tasks_per_update, num_envs=min(c.rollout.num_envs, rollouts_per_update(c)), demos=w.demos,
                demo_noise=w.noise, bc_epochs=w.epochs, bc_lr=w.lr, eval_episodes=eval_episodes(c),
                eval_split=c.eval.split, eval_temperature=c.eval.temperature, seed=c.seed, warmstart_seed=w.seed)


@pytest.mark.parametrize("algo", ["ppo_ctde", "ppo_independent"])
def test_pair_claims_config_reproduces_the_former_pair_defaults(algo):
    c = pair_claims_config(algo)
    assert _pair_knobs(c) == {**CLAIMS_PAIR_KNOBS, "algo": algo}
    # eval.tasks=24 x 1 sample: one episode on each held-out task 0..23 (algos.evaluation.evaluation_rollouts)
    assert (c.eval.tasks, c.eval.samples_per_task) == (24, 1)
    # the algo config the pair trainers get (they do not read tasks_per_update: it is the
    # episodes per update, set on the config, not the trainer's)
    pinned = AlgoConfig(name=algo, group_size=1, **CLAIMS_ALGO_FIELDS)
    assert dataclasses.replace(pair_algo_config(c), tasks_per_update=8) == pinned


def test_measure_c22_config_reads_its_arguments_and_clamps_num_envs():
    # measure_c22's config: its arguments on the preset (seed 3 only moves the run seed, not the
    # start model's); num_envs = min(rollout.num_envs 16, episodes_per_update 4) = 4
    c = pair_claims_config("ppo_independent", updates=1, episodes_per_update=4, eval_episodes=6,
                           overrides=("seed=3", "algo.lr=0.002", "warmstart.demos=8", "warmstart.epochs=1",
                                      "policy.d_model=16"))
    f = _pair_knobs(c)
    assert c.algo.lr == 0.002
    assert (f["seed"], f["warmstart_seed"], f["updates"], f["episodes_per_update"], f["eval_episodes"]) == (3, 0, 1, 4, 6)
    assert (f["demos"], f["bc_epochs"], f["d_model"], f["num_envs"]) == (8, 1, 16, 4)
