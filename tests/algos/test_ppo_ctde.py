"""ppo_ctde / ppo_independent: decentralized execution, the centralized critic's joint input,
GAE on centralized values, and tiny end-to-end updates on PairFix rollouts."""

from __future__ import annotations

import copy
from functools import partial

import pytest
import torch

from algos.advantages import gae
import envs
from algos.pair_rollout import PairEpisode, PairTrajectory, agent_trajectories
from algos.policy import PolicyModel, PolicyShape, ValueModel, token_logprobs
from algos.decisions import gae_layout
from algos.ppo_ctde import PairLearner, joint_inputs, pair_rollout_metrics
from algos.registry import make_trainer
from algos.requests import make_requests
from algos.rollout import RolloutEngine
from envs.pairfix.agents import PairOracle
from envs.tokenizer import get_tokenizer
from experiments.claims.common import pair_claims_config
from experiments.runtime.schema import ConfigError

TOK = get_tokenizer()
MAX_LEN = 256


def _models(seed=0):
    torch.manual_seed(seed)
    shape = PolicyShape(vocab_size=TOK.vocab_size, d_model=16, n_layers=1, n_heads=2, max_len=MAX_LEN)
    joint = PolicyShape(vocab_size=TOK.vocab_size, d_model=16, n_layers=1, n_heads=2, max_len=2 * MAX_LEN + 2)
    critic = ValueModel(joint)
    torch.nn.init.normal_(critic.head.weight, std=0.5)  # ValueModel zero-inits its head: make values vary
    return PolicyModel(shape), critic


def _algo(**kw):
    """The ppo_ctde algo config of the two-agent claims preset with ``algo.<k>=<v>`` overrides
    (composed and validated by Hydra, then ``experiments.runtime.pair.pair_algo_config``)."""
    from experiments.runtime.pair import pair_algo_config

    return pair_algo_config(pair_claims_config(overrides=[f"algo.{k}={v}" for k, v in kw.items()]))


def _engine(num_envs):
    """The rollout engine on PairFix (easy), its multi-agent env built by ``envs.make_multi_agent``."""
    return RolloutEngine(envs.PAIRFIX_ID, num_envs, MAX_LEN, 12,
                         make_env=partial(envs.make_multi_agent, envs.PAIRFIX_ID, difficulty="easy"))


@pytest.fixture(scope="module")
def oracle_episodes():
    eps = _engine(8).collect({"a": partial(PairOracle, 0.3), "b": partial(PairOracle, 0.3)},
                             make_requests(8, 1, seed=0, task_indices=list(range(8))))
    for ep in eps:
        for t in ep.trajectories():
            t.temperature = 1.0  # scored by the trainer as samples at temperature 1
    return eps


def test_collect_returns_one_pair_episode_per_request(oracle_episodes):
    assert len(oracle_episodes) == 8 and all(isinstance(ep, PairEpisode) for ep in oracle_episodes)
    for ep in oracle_episodes:
        a, b = ep.by_agent["a"], ep.by_agent["b"]
        assert ep.agents() == ("a", "b") and ep.trajectories() == (a, b)
        assert ep.for_agent("a") is a and ep.for_agent("b") is b
        assert ep.final_info is a.final_info and ep.masked == (a.masked or b.masked)
    with pytest.raises(KeyError, match="agent 'c' unknown; allowed: a, b"):
        oracle_episodes[0].for_agent("c")
    b0 = oracle_episodes[0].for_agent("b")
    only_b = PairEpisode({"a": None, "b": b0})
    assert only_b.agents() == ("b",) and only_b.final_info is b0.final_info
    assert agent_trajectories([only_b], "a") == [] and agent_trajectories([only_b], "b") == [b0]


def test_rollout_records_one_joint_state_per_turn_with_both_contexts(oracle_episodes):
    for ep in oracle_episodes:
        a, b = ep.for_agent("a"), ep.for_agent("b")
        assert isinstance(a, PairTrajectory) and a.agent == "a" and b.agent == "b"
        seg_a, seg_b = a.segments[0], b.segments[0]
        assert len(a.joint_points) == len(seg_a.turns) == a.turns
        last = a.joint_points[-1]
        # own context up to the decision (ends with the SEP before the action) is the prefix ...
        own = seg_a.tokens[: seg_a.turns[-1].start]
        assert last[: len(own)] == own
        # ... followed by b's context so far (without its BOS): b's first observation is in it
        rest = last[len(own):]
        b_first_obs = seg_b.tokens[1: seg_b.turns[0].start]
        assert rest[: len(b_first_obs)] == b_first_obs and rest[-1] == TOK.sep_id
        assert a.verified == b.verified and a.final_info["stop_reason"] == b.final_info["stop_reason"]


def test_decentralized_execution_other_private_context_does_not_change_actor(oracle_episodes):
    """Changing b's private context (every b token inside a's joint states) leaves a's action
    distribution (old log-probs of a's rows) unchanged, while the centralized values change."""
    policy, critic = _models()
    trainer = make_trainer("ppo_ctde", _algo(), policy, critic=critic)
    trajs = agent_trajectories(oracle_episodes, "a")
    tampered = copy.deepcopy(trajs)
    for t in tampered:
        own = [t.segments[0].tokens[: turn.start] for turn in t.segments[0].turns]
        # replace the other agent's part of every joint state by other words of the same length
        t.joint_points = [o + [TOK.token_to_id["wait"]] * (len(j) - len(o) - 1) + [TOK.sep_id]
                          for o, j in zip(own, t.joint_points)]
    b1, in1 = trainer.prepare_batch(trajs)
    b2, in2 = trainer.prepare_batch(tampered)
    assert torch.equal(b1.tokens, b2.tokens)
    assert torch.equal(in1.old_logp, in2.old_logp)  # the actor reads only its own context
    assert not torch.allclose(in1.old_values, in2.old_values)  # the critic reads the other's too


def test_policy_forward_gets_only_own_rows_and_critic_gets_joint_states(oracle_episodes):
    policy, critic = _models()
    trainer = make_trainer("ppo_ctde", _algo(), policy, critic=critic)
    trajs = agent_trajectories(oracle_episodes, "b")
    batch, inputs = trainer.prepare_batch(trajs)
    j = joint_inputs(batch)
    assert int(j.lengths.max()) > batch.tokens.shape[1] // 2  # joint states are longer than one context
    n_turns = sum(t.turns for t in trajs) + sum(1 for t in trajs if t.joint_bootstrap is not None)
    assert len(j.rows) == n_turns
    # the raw value at each point position is the critic's output on that joint state
    k = 3
    v = critic(j.tokens[k: k + 1, : int(j.lengths[k])])[0, -1]
    assert torch.isclose(inputs.old_values[j.rows[k], j.positions[k]], v, atol=1e-6)


def test_ctde_gae_runs_on_centralized_values_per_agent(oracle_episodes):
    """The advantages equal algos.advantages.gae on the layout whose values are the critic's
    outputs on the joint states (an independent recomputation)."""
    policy, critic = _models()
    trainer = make_trainer("ppo_ctde", _algo(gamma=0.9, lam=0.8), policy, critic=critic)
    trajs = agent_trajectories(oracle_episodes, "a")
    batch, inputs = trainer.prepare_batch(trajs)
    adv = trainer.advantages(batch, inputs)
    j = joint_inputs(batch)
    raw = torch.zeros(batch.tokens.shape)
    with torch.no_grad():
        for k in range(len(j.rows)):
            raw[j.rows[k], j.positions[k]] = critic(j.tokens[k: k + 1, : int(j.lengths[k])])[0, -1]
    lay = gae_layout(batch, raw, "turn")
    ref, _ = gae(lay.rewards, lay.values, lay.next_values, lay.terminated, lay.truncated, gamma=0.9, lam=0.8,
                 mask=lay.mask)
    assert torch.allclose(adv.point_advantages, ref, atol=1e-5)
    assert lay.mask.sum() == sum(t.turns for t in trajs)


def test_bad_configs_name_the_value():
    policy, critic = _models()
    token_level = _algo()
    token_level.value_level = "token"  # past the config check: the trainer refuses it too
    with pytest.raises(ValueError, match="value_level='token'"):
        make_trainer("ppo_ctde", token_level, policy, critic=critic)
    with pytest.raises(ValueError, match="policy.critic=separate"):
        make_trainer("ppo_ctde", _algo(), policy, critic=None)
    # the pair knobs are checked by the TrainConfig they are composed into (experiments/runtime/schema.py)
    for algo, overrides, message in (
            ("ppo_ctde", ["algo.value_level=token"], "algo.value_level='token' is invalid for ppo_ctde"),
            ("ppo", [], "env=pairfix has two agents but algo=ppo trains one"),
            ("ppo_ctde", ["algo.frozen=[c]"], "algo.frozen=['c'] is invalid; allowed: distinct agents of a, b"),
            ("ppo_independent", ["algo.frozen=[b]", "algo.shared_policy=true"], "needs algo.shared_policy=false")):
        with pytest.raises(ConfigError) as e:
            pair_claims_config(algo, overrides=overrides)
        assert message in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("algo", ["ppo_ctde", "ppo_independent"])
def test_tiny_end_to_end_update_changes_parameters_and_names_metrics(algo, oracle_episodes):
    trainers = {}
    for a in ("a", "b"):
        policy, critic = _models(seed=1)
        if algo == "ppo_independent":
            critic = ValueModel(policy.shape)
        trainers[a] = make_trainer(algo, _algo(lr=1e-3), policy, critic=critic)
    before = {a: [p.detach().clone() for p in t.policy.parameters()] for a, t in trainers.items()}
    frozen_b = PairLearner(trainers, frozen=("b",))
    m = frozen_b.update(oracle_episodes)
    assert "agent_a/train/policy_loss" in m and "agent_b/train/policy_loss" not in m
    assert "agent_a/critic/explained_variance_in_batch" in m and "agent_a/rollout/success_bug_in_a_only" in m
    changed = {a: any(not torch.equal(p, q) for p, q in zip(before[a], t.policy.parameters())) for a, t in trainers.items()}
    assert changed == {"a": True, "b": False}


def test_pair_rollout_metrics_hand_counted(oracle_episodes):
    m = pair_rollout_metrics(oracle_episodes)
    n = len(oracle_episodes)
    wins = sum(ep.for_agent("a").verified for ep in oracle_episodes)
    assert m["rollout/episodes"] == n and m["rollout/success"] == wins / n
    sends = sum(ep.for_agent("a").messages_sent for ep in oracle_episodes)
    assert m["agent_a/rollout/messages_sent"] == sends / n
    # every oracle agent sends exactly one message per episode unless the episode ended first
    assert 0 < sends <= n


@pytest.mark.slow
@pytest.mark.parametrize("algo", ["ppo_ctde", "ppo_independent"])
def test_the_run_loop_trains_a_claims_pair_config_end_to_end(algo, tmp_path):
    """A two-agent claims config runs through the one run loop (``experiments.runtime.loop.run``)."""
    import json

    from experiments.runtime.loop import run

    c = pair_claims_config(algo, updates=1, episodes_per_update=4, eval_episodes=2,
                           overrides=("policy.d_model=16", "warmstart.demos=4", "warmstart.epochs=1",
                                      "rollout.num_envs=4", "env.train_tasks=4", f"warmstart.cache_dir={tmp_path}",
                                      f"run_dir={tmp_path / 'run'}", "resume=false"))
    summary = run(c)
    rows = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) == 1 and summary["updates"] == 1
    assert {"agent_a/train/policy_loss", "agent_b/train/policy_loss", "agent_a/critic/explained_variance_in_batch",
            "rollout/success"} <= set(rows[0])
    assert summary["eval/episodes"] == 2
    assert len(list(tmp_path.glob("*/policy_*.pt"))) == 2  # the warm start was cached, one file per agent


def test_sampled_log_probs_equal_a_teacher_forced_forward_over_each_context():
    """The engine decodes from one KV cache row per (slot, agent) of a shared policy, feeding each
    row only the ids appended since that agent's last turn. Every stored behaviour log-prob must
    equal the log-prob a full teacher-forced forward of the finished context gives its token (a
    row out of step with its context, e.g. a missed observation or the other agent's ids, would
    differ by far more than float rounding)."""
    policy, _ = _models(seed=3)
    episodes = _engine(3).collect({"a": policy, "b": policy}, make_requests(5, 1, seed=7, task_indices=list(range(5))), 0,
                                  torch.Generator().manual_seed(0))
    segs = [t.segments[0] for ep in episodes for t in ep.trajectories()]
    assert len(segs) >= 8 and sum(len(s.turns) for s in segs) >= 16  # several turns of both agents
    for seg in segs:
        tokens = torch.tensor([seg.tokens])
        want = torch.tensor([seg.action_mask], dtype=torch.bool)
        with torch.no_grad():
            logp, _ = token_logprobs(policy.forward_at(tokens, want)[0], tokens, want)
        stored = torch.tensor(seg.behavior_logp)[want[0]]
        assert torch.allclose(logp[want], stored, atol=1e-4), (logp[want] - stored).abs().max()


def test_a_full_context_cuts_every_agent_as_token_budget():
    """When the next observation of one agent would overflow ``max_len``, both trajectories end
    as ``token_budget`` (truncated, verified 0) with a joint bootstrap state after the final
    observation; a window of 96 tokens is far shorter than the oracle pair's episodes."""
    engine = RolloutEngine(envs.PAIRFIX_ID, 2, 96, 12,
                           make_env=partial(envs.make_multi_agent, envs.PAIRFIX_ID, difficulty="easy"))
    episodes = engine.collect({"a": partial(PairOracle, 0.0), "b": partial(PairOracle, 0.0)},
                              make_requests(2, 1, seed=1, task_indices=[0, 1]))
    for ep in episodes:
        trajs = ep.trajectories()
        assert len(trajs) == 2 and {t.stop_reason for t in trajs} == {"token_budget"}
        for t in trajs:
            (seg,) = t.segments
            assert t.truncated and not t.terminated and t.verified == 0 and len(seg.tokens) <= 96
            assert seg.end == "truncated" and t.joint_bootstrap[: seg.bootstrap_index + 1] == seg.tokens[: seg.bootstrap_index + 1]
            assert t.joint_bootstrap[-1] == TOK.sep_id and len(t.joint_points) == t.turns
