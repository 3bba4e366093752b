"""ContextCompression: contract (info key, flags, token accounting), triggers, limits, strategies."""

from __future__ import annotations

import importlib.util

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import envs
from envs import vocab
from envs.compression import (
    MASK_PLACEHOLDER,
    STRATEGIES,
    SUMMARY_FIELDS,
    CompressionSettings,
    ContextCompression,
    get_strategy,
)
from envs.episode import run_episode
from envs.long_horizon_agents import (
    ContextReadingAgent,
    NoisyOracleAgent,
    OracleAgent,
    RandomAgent,
)
from envs.tokenizer import get_tokenizer

LH = envs.LONG_HORIZON_ID
TOK = get_tokenizer()
COMPRESSING = [s for s in STRATEGIES if s != "none"]
RECORD_KEYS = {"segment_id", "tokens_before", "tokens_after", "dropped"}
# BugFix is checked too once its module exists (another helper writes it).
CHECKED_IDS = [LH] + ([envs.BUGFIX_ID] if importlib.util.find_spec("envs.bugfix") else [])


class Spy(gym.Wrapper):
    """Sits under the compression wrapper and records what the env itself returned."""

    def reset(self, **kwargs):
        self.calls = []
        return self.env.reset(**kwargs)

    def step(self, action):
        out = self.env.step(action)
        self.calls.append((action,) + tuple(out))
        return out


def wrapped(strategy, env_kwargs=None, **kwargs):
    spy = Spy(gym.make(LH, **(env_kwargs or {})))
    return ContextCompression(spy, strategy=strategy, **kwargs), spy


def play(env, agent, seed, options=None, script=None):
    """Run one episode; returns per-step (action, obs, reward, term, trunc, info, spy_calls_before)."""
    obs, info = env.reset(seed=seed, options=options)
    agent.reset(env, seed)
    steps = []
    t = 0
    while True:
        action = script[t] if script is not None and t < len(script) else agent.act(obs, info)
        obs, reward, term, trunc, info = env.step(action)
        steps.append((action, obs, reward, term, trunc, info))
        t += 1
        if term or trunc:
            return steps


# ---------------------------------------------------------------------------- construction
def test_registry_and_argument_validation():
    assert list(STRATEGIES) == ["none", "recent", "mask_observations", "lossy_summary", "structured_summary"]
    with pytest.raises(ValueError, match="valid: none, recent, mask_observations, lossy_summary, structured_summary"):
        get_strategy("summary")
    env = gym.make(LH)
    with pytest.raises(ValueError, match="unknown compression strategy"):
        ContextCompression(env, strategy="bogus")
    with pytest.raises(ValueError, match="valid: tokens, turns, action"):
        ContextCompression(env, strategy="recent", trigger="time")
    with pytest.raises(ValueError, match="every_turns"):
        ContextCompression(env, strategy="recent", trigger="turns")
    for bad in ({"keep_last": 0}, {"budget_tokens": 0}, {"budget_fraction": 0.0}, {"max_compactions": -1},
                {"drop_prob": 1.5}):
        with pytest.raises(ValueError):
            ContextCompression(env, strategy="recent", **bad)


def test_envs_make_wraps_only_for_a_compressing_strategy():
    assert not isinstance(envs.make(LH, compression={"strategy": "none"}), ContextCompression)
    assert not isinstance(envs.make(LH, compression=CompressionSettings()), ContextCompression)
    env = envs.make(LH, compression={"strategy": "recent", "keep_last": 3}, n_stages=4)
    assert isinstance(env, ContextCompression) and env.keep_last == 3
    assert env.unwrapped.n_stages == 4
    settings = CompressionSettings(strategy="recent", keep_last=3)
    assert envs.make(LH, compression=settings).settings is settings
    with pytest.raises(TypeError, match="keep_lats"):  # a misspelt knob in the dict form
        envs.make(LH, compression={"strategy": "recent", "keep_lats": 3})


def test_the_settings_and_the_keyword_form_build_the_same_wrapper():
    settings = CompressionSettings(strategy="structured_summary", trigger="turns", every_turns=2, drop_prob=0.5)
    by_settings = ContextCompression(gym.make(LH), settings)
    by_knobs = ContextCompression(gym.make(LH), strategy="structured_summary", trigger="turns", every_turns=2,
                                  drop_prob=0.5)
    # the recorded constructor kwargs (gymnasium's spec of the wrapper) are the settings' fields
    assert by_settings._saved_kwargs == by_knobs._saved_kwargs == {
        "strategy": "structured_summary", "trigger": "turns", "budget_tokens": 256, "budget_fraction": 0.8,
        "every_turns": 2, "keep_last": 2, "max_compactions": 8, "drop_prob": 0.5}
    assert by_knobs.settings == settings
    agent = OracleAgent()
    runs = [run_episode(env, agent, seed=3, options={"task_index": 1, "split": "train"}) for env in (by_settings, by_knobs)]
    assert runs[0].observations == runs[1].observations and runs[0].rewards == runs[1].rewards
    with pytest.raises(TypeError, match="settings or knobs, not both"):
        ContextCompression(gym.make(LH), settings, keep_last=3)


@pytest.mark.parametrize("env_id", CHECKED_IDS)
@pytest.mark.parametrize("strategy", list(STRATEGIES))
def test_check_env_passes_with_every_strategy(env_id, strategy):
    for budget in (16, 256):
        env = ContextCompression(gym.make(env_id), strategy=strategy, budget_tokens=budget)
        check_env(env)


# ---------------------------------------------------------------------------- contract
@pytest.mark.parametrize("strategy", list(STRATEGIES))
def test_flags_and_rewards_are_the_inner_envs(strategy):
    """The wrapper never sets terminated/truncated itself: every env step returns the inner env's
    flags and reward; an accepted `compact` returns (0, False, False) without an env step."""
    for seed in range(8):
        env, spy = wrapped(strategy, {"n_stages": 5, "n_approaches": 6, "verbose": 20}, budget_tokens=160)
        agent = RandomAgent(p_invalid=0.3) if seed % 2 else ContextReadingAgent()
        obs, info = env.reset(seed=seed)
        agent.reset(env, seed)
        while True:
            n_calls = len(spy.calls)
            action = agent.act(obs, info)
            obs, reward, term, trunc, info = env.step(action)
            if len(spy.calls) == n_calls:  # intercepted compact
                assert action == "compact" and strategy != "none"
                assert (reward, term, trunc) == (0.0, False, False) and "compression" in info
            else:
                _, inner_obs, inner_r, inner_term, inner_trunc, inner_info = spy.calls[-1]
                assert (reward, term, trunc) == (inner_r, inner_term, inner_trunc)
                assert {k: v for k, v in info.items() if k != "compression"} == inner_info
                if "compression" not in info:
                    assert obs == inner_obs
            if term or trunc:
                assert "compression" not in info
                break


@pytest.mark.skipif(envs.BUGFIX_ID not in CHECKED_IDS, reason="envs/bugfix.py not written yet")
@pytest.mark.parametrize("strategy", COMPRESSING)
def test_bugfix_through_the_wrapper(strategy):
    """The strategies only use the contract methods, so BugFix compresses too: inner flags and
    rewards pass through, each new context is shorter and ends with the latest tool output."""
    from envs.bugfix.agents import make_agent

    n_compressions = 0
    for seed, name in enumerate(["oracle", "noisy_oracle", "random", "random"]):
        spy = Spy(gym.make(envs.BUGFIX_ID))
        env = ContextCompression(spy, strategy=strategy, budget_tokens=96)
        agent = make_agent(name)
        obs, info = env.reset(seed=seed)
        agent.reset(env, seed)
        segment = 0
        while True:
            obs, reward, term, trunc, info = env.step(agent.act(obs, info))
            _, inner_obs, inner_r, inner_term, inner_trunc, _ = spy.calls[-1]
            assert (reward, term, trunc) == (inner_r, inner_term, inner_trunc)
            if "compression" in info:
                n_compressions += 1
                segment += 1
                rec = info["compression"]
                assert rec["segment_id"] == segment and rec["tokens_after"] < rec["tokens_before"]
                assert obs.endswith(inner_obs)
            if term or trunc:
                break
    assert n_compressions > 0


def test_none_is_a_pass_through():
    raw = gym.make(LH, verbose=30)
    env = ContextCompression(gym.make(LH, verbose=30), strategy="none", budget_tokens=16)
    for seed in range(3):
        a = run_episode(raw, RandomAgent(), seed=seed)
        b = run_episode(env, RandomAgent(), seed=seed)
        assert (a.observations, a.actions, a.rewards, a.infos) == (b.observations, b.actions, b.rewards, b.infos)


@pytest.mark.parametrize("strategy", COMPRESSING)
def test_token_accounting_trigger_guard_and_record(strategy):
    """Recount the policy context from the raw env outputs (docs/interfaces.md layout) and check
    the trigger fires exactly when it should and the record's numbers."""
    budget, fraction = 200, 0.8
    n_compressions = 0
    for seed in range(6):
        env, spy = wrapped(strategy, {"n_stages": 6, "n_approaches": 6, "verbose": 25},
                           budget_tokens=budget, budget_fraction=fraction, max_compactions=50)
        obs, info = env.reset(seed=seed)
        agent = ContextReadingAgent()
        agent.reset(env, seed)
        ctx = TOK.count(obs) + 2
        assert env.context_tokens == ctx
        prev_compressed, segment = False, 0
        while True:
            action = agent.act(obs, info)
            obs, reward, term, trunc, info = env.step(action)
            raw_obs = spy.calls[-1][1]
            ctx += TOK.count(action) + 1 + TOK.count(raw_obs) + 1
            if "compression" in info:
                rec = info["compression"]
                n_compressions += 1
                segment += 1
                assert set(rec) == RECORD_KEYS and rec["segment_id"] == segment
                assert rec["tokens_before"] == ctx > fraction * budget
                assert rec["tokens_after"] == TOK.count(obs) + 2 < rec["tokens_before"]
                assert not prev_compressed
                assert raw_obs in obs  # the latest tool output is in the new context
                ctx = rec["tokens_after"]
                prev_compressed = True
            else:
                # over the threshold without a compression: the guard, the episode end, or a
                # strategy output that would not be shorter (white-box: _build has no side
                # effect at drop_prob=0) blocked it
                if ctx > fraction * budget:
                    assert prev_compressed or term or trunc or env._build(ctx) is None
                prev_compressed = False
            assert env.context_tokens == ctx and env.segment_id == segment
            if term or trunc:
                break
    assert n_compressions >= 6


def test_first_turn_token_count_by_hand():
    env, _ = wrapped("recent", {"verbose": 8}, budget_tokens=10_000)
    env.reset(seed=0)
    # task statement: 72 tokens (see test_long_horizon) + [BOS] + [SEP]
    assert env.context_tokens == 72 + 2
    env.step("status")
    # "status" (1) + EOS (1) + "status : 8 stages left , fix none , tests not run ." (13) + SEP (1)
    assert env.context_tokens == 74 + 1 + 1 + 13 + 1 == 90
    env.step("inspect 2")
    # "inspect 2" (2) + EOS + "log page 2 :" (4) + 8 filler words on one line (8 + 1 break) + SEP
    assert env.context_tokens == 90 + 2 + 1 + 4 + 9 + 1 == 107


def test_compact_action_is_intercepted_and_documented_costs():
    env, spy = wrapped("recent", {"verbose": 4}, trigger="action", keep_last=1, max_compactions=2)
    env.reset(seed=0)
    env.step("read notes")
    _, _, _, _, info1 = env.step("status")
    before = env.context_tokens
    obs, reward, term, trunc, info = env.step("compact")
    assert len(spy.calls) == 2  # no env step
    assert (reward, term, trunc) == (0.0, False, False)
    assert info["turn"] == info1["turn"] == 2 and info["step_tool_seconds"] == 0.0
    assert info["tool_status"] == "ok"
    assert info["compression"]["tokens_before"] == before + 1 + 1  # "compact" + its EOS
    assert info["compression"]["segment_id"] == 1
    assert obs.endswith(spy.calls[-1][1])
    # guard: a compact right after a compression is passed to the env (a format error, a turn)
    _, _, _, _, info = env.step("compact")
    assert "compression" not in info and info["tool_status"] == "format_error" and info["turn"] == 3
    env.step("status")
    _, _, _, _, info = env.step("compact")
    assert info["compression"]["segment_id"] == 2
    env.step("status")
    # cap of 2 reached: compact is an ordinary (malformed) env action again
    _, _, _, _, info = env.step("compact")
    assert "compression" not in info and info["tool_status"] == "format_error"
    assert env.compactions == 2


def test_compact_is_refused_when_it_would_not_shrink():
    env, spy = wrapped("structured_summary", trigger="action")
    env.reset(seed=0)
    _, _, _, _, info = env.step("compact")  # nothing to compress yet: the summary is longer
    assert "compression" not in info and len(spy.calls) == 1 and info["tool_status"] == "format_error"


def test_memory_facts_of_another_type_are_refused_at_the_first_compression():
    env, _ = wrapped("structured_summary", trigger="turns", every_turns=1)
    env.reset(seed=0)
    base = env.unwrapped
    base.memory_facts = lambda: {f: "" for f in SUMMARY_FIELDS}  # the instance attribute shadows the method
    with pytest.raises(TypeError, match="memory_facts\\(\\) returned dict; allowed: envs.memory.MemoryFacts"):
        env.step("status")


def test_turns_trigger_and_cap():
    env, _ = wrapped("recent", {"n_stages": 30, "verbose": 2}, trigger="turns", every_turns=3, max_compactions=4,
                     keep_last=1)
    steps = play(env, OracleAgent(), seed=0)
    at = [i + 1 for i, s in enumerate(steps) if "compression" in s[5]]
    assert at == [3, 6, 9, 12]  # every 3 env turns, then the cap of 4 stops it
    assert [steps[i - 1][5]["compression"]["segment_id"] for i in at] == [1, 2, 3, 4]
    assert steps[-1][5]["verified"] == 1  # the oracle still solves the task


def test_action_trigger_never_fires_by_itself():
    env, _ = wrapped("recent", {"verbose": 50}, trigger="action", budget_tokens=16)
    steps = play(env, OracleAgent(), seed=0)
    assert not any("compression" in s[5] for s in steps)


@pytest.mark.parametrize("strategy", COMPRESSING)
def test_never_compresses_on_consecutive_steps_or_beyond_the_cap(strategy):
    for cap in (0, 1, 3, 8):
        env, _ = wrapped(strategy, {"n_stages": 12, "verbose": 30}, budget_tokens=32, max_compactions=cap)
        steps = play(env, NoisyOracleAgent(0.3), seed=cap)
        flags = ["compression" in s[5] for s in steps]
        assert sum(flags) <= cap
        assert not any(a and b for a, b in zip(flags, flags[1:]))
        if cap == 8:
            assert sum(flags) == 8


# ---------------------------------------------------------------------------- strategies
def scripted(strategy, actions, env_kwargs=None, **kwargs):
    """Play ``actions`` then ``compact``; returns (compressed obs, record, raw outputs, env)."""
    env, spy = wrapped(strategy, {"n_approaches": 6, "verbose": 3, **(env_kwargs or {})},
                       trigger="action", **kwargs)
    env.reset(seed=0, options={"task_index": 0, "split": "train"})
    for a in actions:
        env.step(a)
    obs, _, _, _, info = env.step("compact")
    assert "compression" in info, "compaction refused"
    return obs, info["compression"], [c[1] for c in spy.calls], env


def wrong_approaches():
    from envs.long_horizon import make_task

    task = make_task("train", 0, 6)
    return task, sorted(task.reasons)


def test_recent_keeps_task_and_last_k_turns_verbatim():
    _, wrong = wrong_approaches()
    actions = ["read notes", f"try {wrong[0]}", f"try {wrong[1]}", "status", "inspect 3"]
    obs, rec, outs, env = scripted("recent", actions, keep_last=2)
    expected = "\n".join(
        ["context compressed : recent turns", env.unwrapped.task_statement(), "( 3 earlier turns omitted )",
         "action : status", outs[3], "action : inspect 3", outs[4]]
    )
    assert obs == expected and rec["dropped"] == []
    assert "the key is" not in obs and f"approach {wrong[0]}" not in obs


def test_mask_observations_hides_old_outputs_behind_a_placeholder():
    _, wrong = wrong_approaches()
    actions = ["read notes", f"try {wrong[0]}", f"try {wrong[1]}", "status"]
    obs, rec, outs, env = scripted("mask_observations", actions, keep_last=1)
    lines = ["context compressed : old outputs hidden", env.unwrapped.task_statement()]
    for i, a in enumerate(actions):
        lines += [f"action : {a}", outs[i] if i == 3 else MASK_PLACEHOLDER]
    assert obs == "\n".join(lines)
    assert obs.count(MASK_PLACEHOLDER) == 3 and "fails" not in obs and rec["dropped"] == []


def test_lossy_summary_drops_tried_approaches():
    task, wrong = wrong_approaches()
    actions = ["read notes", f"try {wrong[0]}", f"try {wrong[1]}", "inspect 1"]
    obs, rec, outs, env = scripted("lossy_summary", actions)
    assert obs == "\n".join(
        ["context compressed : summary", env.unwrapped.task_statement(), "status : tests failing",
         "latest output :", outs[-1]]
    )
    assert "approach" not in obs.replace("approaches", "") and "the key is" not in obs
    assert rec["dropped"] == ["tried", "code_state", "pending"]


def test_structured_summary_keeps_tried_approaches_and_state():
    task, wrong = wrong_approaches()
    actions = ["read notes", f"try {wrong[0]}", f"try {wrong[1]}", f"try {task.correct}", "step"]
    obs, rec, outs, env = scripted("structured_summary", actions)
    assert obs == "\n".join(
        ["context compressed : summary", env.unwrapped.task_statement(), "tried :",
         f"approach {wrong[0]} -> {task.reasons[wrong[0]]}", f"approach {wrong[1]} -> {task.reasons[wrong[1]]}",
         f"code state : 7 stages left , fix {task.correct}", f"pending : finish 7 stages , submit {task.key}",
         "latest output :", outs[-1]]
    )
    assert rec["dropped"] == []


def test_structured_summary_drop_prob():
    actions = ["read notes", "try A", "try B"]
    obs, rec, outs, _ = scripted("structured_summary", actions, drop_prob=1.0)
    assert rec["dropped"] == list(SUMMARY_FIELDS)
    assert obs == "\n".join(["context compressed : summary", "latest output :", outs[-1]])
    seen = set()
    for seed in range(20):
        env, _ = wrapped("structured_summary", {"verbose": 30}, trigger="action", drop_prob=0.5)
        env.reset(seed=seed)
        for a in actions:
            env.step(a)
        obs, *_, info = env.step("compact")
        dropped = info["compression"]["dropped"]
        seen.add(tuple(dropped))
        assert ("tried :" in obs) == ("tried" not in dropped)
        assert ("code state :" in obs) == ("code_state" not in dropped)
        assert ("pending :" in obs) == ("pending" not in dropped)
        assert ("task : fix" in obs) == ("task" not in dropped)
        # same seed, same draws
        env.reset(seed=seed)
        for a in actions:
            env.step(a)
        assert env.step("compact")[4]["compression"]["dropped"] == dropped
    assert len(seen) > 4


@pytest.mark.parametrize("strategy", COMPRESSING)
def test_wrapped_episodes_are_deterministic_and_encode(strategy):
    """Same seed -> same episode through the wrapper; every observation (compressed contexts
    included) and every action encodes with the shared tokenizer."""
    configs = [{"n_stages": 6, "n_approaches": 6, "verbose": 25}, {"n_stages": 40, "verbose": 0},
               {"n_stages": 3, "n_approaches": 8, "verbose": 120}]
    agents = [OracleAgent, lambda: NoisyOracleAgent(0.3), RandomAgent, ContextReadingAgent]
    for i, cfg in enumerate(configs):
        for make_agent in agents:
            runs = []
            for _ in range(2):
                env = envs.make(LH, compression={"strategy": strategy, "budget_tokens": 128, "drop_prob": 0.3,
                                                 "keep_last": 1 + i}, **cfg)
                ep = run_episode(env, make_agent(), seed=11 + i)
                runs.append((ep.observations, ep.actions, ep.rewards, ep.infos))
                for text in ep.observations + ep.actions:
                    TOK.encode(text)
            assert runs[0] == runs[1]


def test_random_actions_through_the_wrapper_never_raise():
    rng = np.random.default_rng(1)
    words = vocab.all_words() + ["compact"] * 50
    for strategy in COMPRESSING:
        env, _ = wrapped(strategy, {"n_stages": 4, "verbose": 10, "max_turns": 40}, budget_tokens=96)
        env.action_space.seed(1)
        env.reset(seed=1)
        for _ in range(1500):
            if rng.random() < 0.3:
                action = env.action_space.sample()
            else:
                action = " ".join(words[j] for j in rng.integers(len(words), size=int(rng.integers(0, 4))))
            obs, _, term, trunc, info = env.step(action)
            assert obs in env.observation_space
            if "compression" in info:
                TOK.encode(obs)  # malformed past actions are rendered as a placeholder
            if term or trunc:
                env.reset()
