"""LongHorizonEnv: Gymnasium API, determinism, action grammar, stop rules, info, claim C9."""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from hypothesis import given, settings
from hypothesis import strategies as st

import envs
from envs import vocab
from envs.episode import run_episode
from envs.long_horizon import LongHorizonEnv, make_task
from envs.long_horizon_agents import (
    ContextReadingAgent,
    NoisyOracleAgent,
    OracleAgent,
    RandomAgent,
)
from envs.memory import MemoryFacts
from envs.stop import StopReason, rule_for
from envs.tokenizer import get_tokenizer

ID = envs.LONG_HORIZON_ID
TOK = get_tokenizer()
STEP_INFO_KEYS = {"turn", "tool_seconds", "step_tool_seconds", "tool_status", "hack_flags", "task_id", "split"}
END_INFO_KEYS = {"stop_reason", "masked", "verified", "train_reward"}


def make(**kwargs) -> LongHorizonEnv:
    return gym.make(ID, **kwargs).unwrapped


def test_registered_and_check_env_passes_without_warnings():
    env = gym.make(ID)
    assert isinstance(env.unwrapped, LongHorizonEnv)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(env.unwrapped)
    for kwargs in ({"n_stages": 1, "verbose": 0}, {"n_stages": 250, "n_approaches": 8, "verbose": 40}):
        check_env(make(**kwargs))


def test_reset_observation_is_the_task_statement_and_hand_counted():
    env = make()
    obs, info = env.reset(seed=0)
    assert obs == env.task_statement()
    assert STEP_INFO_KEYS <= set(info) and info["turn"] == 0
    # 4 lines of 18, 18, 14 and 19 words (see the docstring layout) + 3 line breaks = 72 tokens.
    assert TOK.count(obs) == 18 + 18 + 14 + 19 + 3 == 72
    TOK.encode(obs)


def test_verbose_observation_token_count_is_exact():
    env = make(n_stages=8, verbose=25)
    env.reset(seed=1)
    obs, *_ = env.step("step")
    # "step done : 7 stages left ." = 7 words, then 25 filler words in lines of 10, 10, 5
    # (3 line breaks): 7 + 25 + 3 = 35 tokens.
    assert obs.split("\n")[0] == "step done : 7 stages left ."
    assert TOK.count(obs) == 7 + 25 + 3 == 35
    obs, *_ = env.step("status")
    # status : 8-1=7 stages left , fix none , tests not run .  -> 13 words, no filler.
    assert obs == "status : 7 stages left , fix none , tests not run ."
    assert TOK.count(obs) == 13
    env0 = make(verbose=0)
    env0.reset(seed=1)
    assert env0.step("inspect 2")[0] == "log page 2 :"


def test_same_seed_same_episode_and_seed_varies_only_filler():
    def play(seed, options=None):
        env = make(verbose=12)
        ep = run_episode(env, RandomAgent(), seed=seed, options=options)
        return ep.observations, ep.actions, ep.rewards, ep.infos

    assert play(7) == play(7)
    opts = {"task_index": 3, "split": "train"}
    a, b = play(1, opts), play(2, opts)
    assert a[3][0]["task_id"] == b[3][0]["task_id"] == "lh-train-3"
    assert a[0][0] == b[0][0]  # same task statement


def test_task_options_select_instances_deterministically():
    env = make(n_approaches=6)
    env.reset(seed=0, options={"task_index": 5, "split": "heldout"})
    t1 = env.task
    env.reset(seed=99, options={"task_index": 5, "split": "heldout"})
    assert env.task == t1 == make_task("heldout", 5, 6)
    assert t1.task_id == "lh-heldout-5" and t1.correct not in t1.reasons
    assert len(t1.reasons) == 5 and all(r.startswith("fails ") for r in t1.reasons.values())
    # different instances differ somewhere across the split
    tasks = {(t.key, t.correct) for t in (make_task("train", i, 6) for i in range(64))}
    assert len(tasks) > 40
    # v1: procedural pools, any index >= 0 (the v0 README crash was task_index 16 of 16)
    _, info = env.reset(options={"task_index": 79, "split": "heldout"})
    assert info["task_id"] == "lh-heldout-79"
    env.reset(options={"task_index": 10**6, "split": "train"})
    with pytest.raises(ValueError, match="task_index=-1 invalid; allowed: an int >= 0"):
        env.reset(options={"task_index": -1, "split": "heldout"})
    with pytest.raises(ValueError, match="allowed: train, heldout"):
        env.reset(options={"split": "test"})
    with pytest.raises(ValueError, match="allowed: task_index, split"):
        env.reset(options={"task": 1})


def test_without_options_task_comes_from_np_random_on_train():
    env = make()
    ids = {env.reset(seed=s)[1]["task_id"] for s in range(30)}
    assert all(i.startswith("lh-train-") for i in ids) and len(ids) > 10


@pytest.mark.parametrize(
    "kwargs",
    [{"n_stages": 0}, {"n_stages": 1001}, {"n_approaches": 1}, {"n_approaches": 9}, {"verbose": -1},
     {"max_turns": 0}, {"max_format_errors": 0}, {"n_stages": True}, {"render_mode": "human"}],
)
def test_bad_arguments_raise(kwargs):
    with pytest.raises(ValueError):
        LongHorizonEnv(**kwargs)


def test_oracle_solves_with_reward_only_at_the_end():
    env = make(n_stages=5, verbose=3)
    ep = run_episode(env, OracleAgent(), seed=0)
    assert len(ep.actions) == 5 + 3  # read, try, 5 steps, submit
    assert ep.rewards[:-1] == [0.0] * 7 and ep.rewards[-1] == 1.0
    end = ep.final_info
    assert end["stop_reason"] == "submitted_resolved" and end["verified"] == 1
    assert end["train_reward"] == 1.0 and end["masked"] is False
    assert ep.terminated and not ep.truncated
    for info in ep.infos[1:]:
        assert STEP_INFO_KEYS <= set(info)
        assert info["hack_flags"] == {}
    assert all(not (END_INFO_KEYS & set(i)) for i in ep.infos[:-1])
    assert END_INFO_KEYS <= set(end)
    assert [i["turn"] for i in ep.infos] == list(range(9))
    secs = [i["step_tool_seconds"] for i in ep.infos[1:]]
    assert all(s > 0 for s in secs)
    assert end["tool_seconds"] == pytest.approx(sum(secs))


def _play(env, actions, seed=0, options=None):
    env.reset(seed=seed, options=options or {"task_index": 0, "split": "train"})
    out = None
    for a in actions:
        out = env.step(a)
    return out


@pytest.mark.parametrize(
    "script, reason",
    [
        (lambda t, n: ["read notes", f"try {t.correct}"] + ["step"] * n + [f"submit {(t.key + 1) % 100}"], "submitted_failed"),
        (lambda t, n: ["read notes", f"try {t.correct}"] + ["step"] * (n - 1) + [f"submit {t.key}"], "submitted_failed"),
        (lambda t, n: ["read notes"] + ["step"] * n + [f"submit {t.key}"], "submitted_failed"),
        (lambda t, n: ["forfeit"], "forfeit"),
        (lambda t, n: ["blah", "step 2", "try"], "format_errors"),
        (lambda t, n: ["status"] * 30, "max_turns"),
    ],
)
def test_stop_reasons_follow_the_rule_table(script, reason):
    env = make(n_stages=3, max_turns=30)
    env.reset(seed=0, options={"task_index": 2, "split": "train"})
    task = env.task
    actions = script(task, 3)
    for i, a in enumerate(actions):
        obs, reward, terminated, truncated, info = env.step(a)
        if i < len(actions) - 1:
            assert not (terminated or truncated)
    rule = rule_for(reason)
    assert info["stop_reason"] == reason
    assert (terminated, truncated) == (rule.terminated, rule.truncated)
    assert reward == 0.0 and info["verified"] == 0 and info["train_reward"] == 0.0
    with pytest.raises(RuntimeError):
        env.step("status")


def test_format_errors_change_nothing_and_need_to_be_consecutive():
    env = make(n_stages=3, max_format_errors=3, max_turns=100)
    env.reset(seed=0)
    env.step("read notes")
    before = env.memory_facts()
    bad = ["", "   ", "try", "try A B", "try X", "inspect 0", "inspect 07", "submit 1.5", "submit 200",
           "step 1", "read", "compact", "Read notes", "forfeit now", "\n"]
    for i, a in enumerate(bad):
        obs, r, term, trunc, info = env.step(a)
        assert info["tool_status"] == "format_error" and obs.startswith("error:")
        assert env.memory_facts() == before and r == 0.0
        TOK.encode(obs)
        if i % 2 == 1:
            assert not term
            env.step("status")  # a well-formed action resets the consecutive count
    env.step("status")
    obs, _, term, _, info = env.step("bogus")
    assert not term
    env.step("bogus")
    obs, _, term, trunc, info = env.step("bogus")
    assert term and not trunc and info["stop_reason"] == StopReason.FORMAT_ERRORS.value


def test_wrong_approaches_fail_deterministically_and_are_counted():
    env = make(n_approaches=4, verbose=5)
    env.reset(seed=0, options={"task_index": 1, "split": "train"})
    task = env.task
    wrong = sorted(task.reasons)
    first = env.step(f"try {wrong[0]}")[0].split("\n")[0]
    assert first == f"approach {wrong[0]} {task.reasons[wrong[0]]} ."
    env.step(f"try {wrong[1]}")
    obs, *_, info = env.step(f"try {wrong[0]}")
    assert obs.split("\n")[0] == first  # same stated reason, every time
    assert info["repeated_failed_approaches"] == 1 and info["redundant_actions"] == 0
    facts = env.memory_facts()
    assert facts.tried == tuple(f"approach {w} -> {task.reasons[w]}" for w in wrong[:2])
    assert facts.last_test_status == "tests failing"
    assert facts.code_state == "8 stages left , fix none"
    obs, *_, info = env.step(f"try {task.correct}")
    assert obs.startswith(f"approach {task.correct} works : tests passing .")
    env.step(f"try {wrong[1]}")  # a failing approach is rolled back: the fix stays
    facts = env.memory_facts()
    assert facts.code_state == f"8 stages left , fix {task.correct}"
    assert facts.last_test_status == "tests passing"
    obs, *_, info = env.step(f"try {task.correct}")
    assert obs == f"approach {task.correct} is already applied ."
    assert info["repeated_failed_approaches"] == 2 and info["redundant_actions"] == 1


def test_redundant_actions_and_archived_notes():
    env = make(n_stages=1, verbose=0, max_turns=40)
    env.reset(seed=0)
    key = env.task.key
    assert env.step("read notes")[0] == f"notes : the key is {key} ."
    assert env.memory_facts().pending == f"find the approach that works , finish 1 stages , submit {key}"
    counts = [env.step(a)[4]["redundant_actions"] for a in
              ["read notes", "inspect 1", "inspect 1", "status", "status", "step", "step", "read notes"]]
    assert counts == [1, 1, 2, 2, 3, 3, 4, 5]
    obs, *_, info = env.step("read notes")
    assert obs == "error: the notes are archived after the first step ." and info["tool_status"] == "error"


def test_memory_facts_contract_fields():
    env = make()
    env.reset(seed=0)
    facts = env.memory_facts()
    assert isinstance(facts, MemoryFacts)
    assert facts.task == env.task_statement() and facts.tried == ()
    assert facts.pending == "read notes , find the approach that works , finish 8 stages , submit the key"
    assert facts.last_test_status == "tests not run"
    for text in facts.texts():
        TOK.encode(text)


def test_counts_above_vocab_range_print_as_many():
    env = make(n_stages=300, verbose=0)
    obs, _ = env.reset(seed=0)
    assert "stages : many ." in obs
    assert env.step("step")[0] == "step done : many stages left ."
    env._stages_done = 100  # jump ahead: 200 left, one step -> 199 left, printable again
    assert env.step("step")[0] == "step done : 199 stages left ."


def test_render_ansi_returns_last_observation():
    env = make(render_mode="ansi")
    obs, _ = env.reset(seed=0)
    assert env.render() == obs
    obs, *_ = env.step("status")
    assert env.render() == obs


def test_ten_thousand_random_actions_never_raise():
    """10k random action strings (Text samples, random vocabulary words, valid actions)."""
    env = make(n_stages=4, verbose=4, max_turns=60)
    rng = np.random.default_rng(0)
    words = vocab.all_words()
    valid = ["read notes", "status", "inspect 3", "step", "try A", "try D", "submit 5"]
    env.action_space.seed(0)
    env.reset(seed=0)
    statuses = set()
    for i in range(10_000):
        u = rng.random()
        if u < 0.4:
            action = env.action_space.sample()
        elif u < 0.8:
            action = " ".join(words[j] for j in rng.integers(len(words), size=int(rng.integers(0, 6))))
        else:
            action = valid[int(rng.integers(len(valid)))]
        obs, reward, terminated, truncated, info = env.step(action)
        assert obs in env.observation_space and isinstance(reward, float)
        statuses.add(info["tool_status"])
        if terminated or truncated:
            env.reset()
    assert statuses == {"ok", "error", "format_error"}


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=40))
def test_arbitrary_text_is_a_format_error_or_an_action(text):
    env = make(verbose=0)
    env.reset(seed=0)
    obs, _, _, _, info = env.step(text)
    assert isinstance(obs, str) and info["tool_status"] in {"ok", "error", "format_error"}
    TOK.encode(obs)


@pytest.mark.parametrize("n_stages, verbose", [(4, 0), (30, 7), (250, 2)])
def test_every_observation_and_action_encodes(n_stages, verbose):
    env = make(n_stages=n_stages, verbose=verbose, n_approaches=8)
    agents = [OracleAgent(), NoisyOracleAgent(0.3), RandomAgent(), ContextReadingAgent()]
    for seed in range(6):
        for agent in agents:
            split = "heldout" if seed % 2 else "train"
            ep = run_episode(env, agent, seed=seed, options={"task_index": seed, "split": split})
            for text in ep.observations + ep.actions:
                TOK.encode(text)
            assert all(len(a.split()) <= 5 for a in ep.actions)


def test_c9_decisions_and_context_length_are_independent_knobs():
    """Claim C9: the oracle's turn count depends only on n_stages, the tokens per verbose output
    only on verbose. 'Step' = one turn = one tool call."""
    measured = {}
    for n_stages in (7, 197):
        for verbose in (0, 300):
            env = make(n_stages=n_stages, verbose=verbose)
            ep = run_episode(env, OracleAgent(), seed=0)
            assert ep.final_info["verified"] == 1
            # context of the whole episode, counted as docs/interfaces.md lays it out
            tokens = TOK.count(ep.observations[0]) + 2 + sum(
                TOK.count(a) + 1 + TOK.count(o) + 1 for a, o in zip(ep.actions, ep.observations[1:])
            )
            step_obs = [o for a, o in zip(ep.actions, ep.observations[1:]) if a == "step"]
            measured[n_stages, verbose] = (len(ep.actions), max(TOK.count(o) for o in step_obs), tokens)
    # turns: n_stages + 3, whatever verbose is
    assert measured[7, 0][0] == measured[7, 300][0] == 10
    assert measured[197, 0][0] == measured[197, 300][0] == 200
    # one step output: "step done : k stages left ." = 7 tokens, + 300 filler + 30 line breaks
    assert measured[7, 0][1] == measured[197, 0][1] == 7
    assert measured[7, 300][1] == measured[197, 300][1] == 7 + 300 + 30
    # many decisions / small context vs few decisions / large context
    many_small, few_large = measured[197, 0], measured[7, 300]
    assert many_small[0] == 20 * few_large[0]
    # whole-episode context, hand-counted (action + EOS + output + SEP per turn):
    # reset 72 + 2; read notes 2+1+7+1; try 2+1+7+1; each step 1+1+7+1; submit 2+1+4+1
    assert many_small[2] == 74 + 11 + 11 + 197 * 10 + 8 == 2074
    # with 300 filler words (+30 line breaks) on read / try / step outputs:
    # 74 + (11 + 330) + (11 + 330) + 7 * (10 + 330) + 8
    assert few_large[2] == 74 + 341 + 341 + 7 * 340 + 8 == 3144
