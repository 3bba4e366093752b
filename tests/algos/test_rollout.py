"""Batched rollout engine on a real env: layout, action mask, behavior log-probs, segments."""

import pytest
import torch

from algos.batch import collate
from algos.policy import PolicyModel, PolicyShape, shift_logprobs
from algos.requests import make_requests
from algos.recording import demo_to_trajectory
from algos.rollout import RolloutEngine
from envs.tokenizer import get_tokenizer

torch.set_num_threads(1)
TOK = get_tokenizer()
LH = "agentrl/LongHorizon-v1"
LH_KW = dict(n_stages=2, n_approaches=2, verbose=0)


def _policy(seed=0, max_len=256):
    torch.manual_seed(seed)
    return PolicyModel(PolicyShape(vocab_size=TOK.vocab_size, d_model=32, n_layers=1, n_heads=2, max_len=max_len)).eval()


def _collect(model, n_envs=8, temperature=1.0, compression=None, seed=0, max_action_tokens=6):
    engine = RolloutEngine(LH, num_envs=n_envs, max_len=model.shape.max_len, max_action_tokens=max_action_tokens,
                           temperature=temperature, env_kwargs=LH_KW, compression=compression)
    reqs = make_requests(3, 2, seed=seed, task_indices=[0, 1, 2])
    trajs = engine.collect(model, reqs, policy_version=7, generator=torch.Generator().manual_seed(seed))
    return engine, trajs


def test_action_mask_covers_exactly_the_sampled_tokens():
    _, trajs = _collect(_policy())
    for tr in trajs:
        assert sum(s.n_sampled for s in tr.segments) == tr.generated_tokens
        for s in tr.segments:
            assert s.tokens[0] == TOK.bos_id and s.action_mask[0] == 0
            in_turn = set()
            for t in s.turns:
                assert s.tokens[t.start - 1] in (TOK.sep_id,)  # every action follows a [SEP]
                assert all(s.action_mask[i] == 1 for i in range(t.start, t.end + 1))
                assert all(s.policy_version[i] == 7 for i in range(t.start, t.end + 1))
                assert (s.tokens[t.end] == TOK.eos_id) != t.capped  # a sampled EOS ends it unless capped
                in_turn.update(range(t.start, t.end + 1))
            # everything outside the actions is env-written
            assert all(s.action_mask[i] == 0 for i in range(len(s)) if i not in in_turn)
            assert all(s.policy_version[i] == -1 for i in range(len(s)) if i not in in_turn)


def test_behavior_logprobs_equal_recomputed_logprobs_at_sampling_temperature():
    model = _policy()
    _, trajs = _collect(model, temperature=0.7)
    b = collate(trajs)
    logits, _ = model(b.tokens)
    m = b.action_mask > 0
    recomputed = shift_logprobs(logits, b.tokens, temperature=0.7)
    assert (recomputed[m] - b.behavior_logp[m]).abs().max() < 1e-4
    # at another temperature (or with other weights) they differ
    other = shift_logprobs(logits, b.tokens, temperature=1.0)
    assert (other[m] - b.behavior_logp[m]).abs().max() > 1e-2
    logits2, _ = _policy(seed=1)(b.tokens)
    assert (shift_logprobs(logits2, b.tokens, 0.7)[m] - b.behavior_logp[m]).abs().mean() > 1e-2


def test_one_batched_forward_per_generated_token():
    """All slots advance together: the number of forwards equals the longest trajectory's number
    of sampled tokens (each forward samples one token for every busy slot, prefill included)."""
    engine, trajs = _collect(_policy(), n_envs=6)
    assert engine.timing["forwards"] == max(t.generated_tokens for t in trajs)


def test_same_seed_same_trajectories_and_groups():
    _, a = _collect(_policy(), seed=3)
    _, b = _collect(_policy(), seed=3)
    assert [s.tokens for t in a for s in t.segments] == [s.tokens for t in b for s in t.segments]
    assert [t.group_id for t in a] == [0, 0, 1, 1, 2, 2]
    assert [t.options for t in a][:2] == [{"task_index": 0, "split": "train"}] * 2
    assert a[0].seed != a[1].seed  # group members: same task instance, different seeds


@pytest.fixture(scope="module")
def cloned_policy():
    """A tiny policy behaviour-cloned on 16 oracle episodes (so it writes real tool calls)."""
    import envs
    from envs.long_horizon_agents import OracleAgent
    from experiments.runtime.bc import behaviour_clone
    from experiments.runtime.warmstart import play_demo

    env = envs.make(LH, **LH_KW)
    demos = [demo_to_trajectory(*play_demo(env, OracleAgent(), i, {"task_index": i, "split": "train"}),
                                max_len=256, max_action_tokens=6) for i in range(16)]
    model = _policy()
    losses = behaviour_clone(model, demos, epochs=60, lr=3e-3, batch_rows=8, seed=0)
    assert losses[-1] < 0.5 * losses[0]
    return model


def test_compression_starts_a_new_segment_with_the_continuation_context(cloned_policy):
    comp = dict(strategy="recent", trigger="turns", every_turns=2, budget_tokens=64)
    _, trajs = _collect(cloned_policy, compression=comp)
    multi = [t for t in trajs if len(t.segments) > 1]
    assert multi, "every_turns=1 compresses after each non-final turn"
    for tr in multi:
        for prev, nxt in zip(tr.segments, tr.segments[1:]):
            assert prev.end == "compressed" and nxt.start == "compression"
            assert prev.compression is not None and "tokens_after" in prev.compression
            # the next segment is [BOS] continuation [SEP]: the context the episode continued from
            assert nxt.tokens[: len(prev.continuation) + 2] == [TOK.bos_id, *prev.continuation, TOK.sep_id]
        assert tr.segments[-1].end in ("terminated", "truncated")
        assert tr.turns == sum(len(s.turns) for s in tr.segments)


def test_context_limit_truncates_as_token_budget_with_bootstrap_state():
    model = _policy(max_len=48)
    engine = RolloutEngine(LH, num_envs=2, max_len=48, max_action_tokens=4, env_kwargs=dict(n_stages=2, n_approaches=2, verbose=8))
    trajs = engine.collect(model, make_requests(1, 2, seed=0, task_indices=[0]), generator=torch.Generator().manual_seed(0))
    for tr in trajs:
        s = tr.segments[-1]
        assert len(s) <= 48
        if tr.stop_reason == "token_budget":
            assert tr.truncated and not tr.terminated and tr.verified == 0
            assert s.end == "truncated" and s.tokens[s.bootstrap_index] == TOK.sep_id


def _fed_tokens(trace) -> int:
    """Tokens the model actually read: every prefill's and decode's fed lengths."""
    return sum(int(lens.sum()) for kind, _, lens, _ in trace if kind in ("prefill", "decode"))


def _check_counts_what_was_read(model, trajs, trace):
    # the model read every observation token counted and every sampled token but each segment's
    # last one (sampled, then the episode ended or a new segment began)
    assert _fed_tokens(trace) == sum(t.observation_tokens + t.generated_tokens - len(t.segments) for t in trajs)


def test_observation_tokens_count_what_the_model_read_at_a_truncation():
    """A token-budget truncation lays out the final observation + [SEP] for the critic's
    V(next state) but never feeds it; observation_tokens leaves it out (and a final forced EOS)."""
    model = _policy(max_len=48)
    engine = RolloutEngine(LH, num_envs=2, max_len=48, max_action_tokens=4, env_kwargs=dict(n_stages=2, n_approaches=2, verbose=8))
    trace: list = []
    trajs = engine.collect(model, make_requests(1, 2, seed=0, task_indices=[0]), generator=torch.Generator().manual_seed(0),
                           trace=trace)
    assert all(t.segments[-1].end == "truncated" for t in trajs)
    _check_counts_what_was_read(model, trajs, trace)
    for t in trajs:
        s = t.segments[-1]
        laid_out = len(s.tokens) - s.n_sampled
        unread = len(s.tokens) - s.turns[-1].end  # the last sampled token and what follows it
        assert t.observation_tokens == laid_out - (unread - 1) < laid_out


def test_observation_tokens_count_what_the_model_read_across_compressions(cloned_policy):
    comp = dict(strategy="recent", trigger="turns", every_turns=2, budget_tokens=64)
    engine = RolloutEngine(LH, num_envs=4, max_len=256, max_action_tokens=6, env_kwargs=LH_KW, compression=comp)
    trace: list = []
    trajs = engine.collect(cloned_policy, make_requests(2, 2, seed=0, task_indices=[0, 1]),
                           generator=torch.Generator().manual_seed(0), trace=trace)
    assert any(len(t.segments) > 1 for t in trajs)
    _check_counts_what_was_read(cloned_policy, trajs, trace)


def test_demo_uses_the_same_layout_as_rollouts():
    import envs
    from envs.long_horizon_agents import OracleAgent

    env = envs.make(LH, compression=dict(strategy="structured_summary", trigger="turns", every_turns=3), **LH_KW)
    agent = OracleAgent()
    obs, info = env.reset(seed=0, options={"task_index": 0, "split": "train"})
    agent.reset(env, 0)
    observations, actions, rewards, infos, done = [obs], [], [], [info], False
    while not done:
        a = agent.act(obs, info)
        obs, r, te, tr_, info = env.step(a)
        observations.append(obs); actions.append(a); rewards.append(r); infos.append(info)
        done = te or tr_
    tr = demo_to_trajectory(observations, actions, rewards, infos, te, tr_, max_len=256, max_action_tokens=6)
    assert tr.verified == 1 and tr.terminated and len(tr.segments) >= 2
    s0 = tr.segments[0]
    first = TOK.encode(actions[0]) + [TOK.eos_id]
    t = s0.turns[0]
    assert s0.tokens[t.start: t.end + 1] == first and s0.action_mask[t.start: t.end + 1] == [1] * len(first)
    assert s0.tokens[: t.start] == [TOK.bos_id, *TOK.encode(observations[0]), TOK.sep_id]
    with pytest.raises(ValueError, match="max_action_tokens"):
        demo_to_trajectory(observations, actions, rewards, infos, te, tr_, max_len=256, max_action_tokens=1)


def _bugfix_demo(actions, **env_kwargs):
    """Play fixed ``actions`` on BugFix easy task 0 (seed 0) and lay the episode out like a rollout."""
    import envs

    env = envs.make("agentrl/BugFix-v2", difficulty="easy", **env_kwargs)
    obs, info = env.reset(seed=0, options={"task_index": 0, "split": "train"})
    observations, rewards, infos, te, tr_ = [obs], [], [info], False, False
    for a in actions:
        obs, r, te, tr_, info = env.step(a)
        observations.append(obs); rewards.append(r); infos.append(info)
        if te or tr_:
            break
    return demo_to_trajectory(observations, actions[: len(rewards)], rewards, infos, te, tr_,
                              max_len=256, max_action_tokens=8), [i["tool_status"] for i in infos[1:]]


def test_only_injected_tool_faults_count_for_the_recovery_metric():
    # The agent's own failed edit (status "error": line 9 does not exist) is not a tool failure.
    traj, statuses = _bugfix_demo(["edit 9 + -", "give_up"], faults=False)
    assert statuses[0] == "error" and traj.tool_failures == 0
    # An injected timeout (timeout_prob=1: every call but give_up is cancelled) is one per call.
    traj, statuses = _bugfix_demo(["run_tests", "ls", "give_up"], timeout_prob=1.0, flaky_prob=0.0, crash_prob=0.0,
                                  max_consecutive_timeouts=5)
    assert statuses == ["timeout", "timeout", "ok"] and traj.tool_failures == 2


def test_family_success_per_family_by_hand():
    from algos.batch import Trajectory
    from algos.evaluation import family_success

    def t(family, verified):
        return Trajectory(verified=verified, final_info={"family": family} if family else {})

    # a: 1 of 2 -> 0.5; b: 2 of 3 -> 0.667 (verified None counts as 0, as in eval/success)
    live = [t("a", 1), t("a", 0), t("b", 1), t("b", 1), t("b", None)]
    assert family_success(live, "eval/") == pytest.approx({"eval/family_success/a": 0.5, "eval/family_scored/a": 2,
                                                           "eval/family_success/b": 2 / 3, "eval/family_scored/b": 3})
    # one family (a plain difficulty) or no family key: nothing to split
    assert family_success([t("a", 1), t("a", 0)], "eval/") == {}
    assert family_success([t(None, 1)], "eval/") == {}
