"""Scripted BugFix agents: interface, determinism, calibrated noise, robustness to faults."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest

import envs
from envs.bugfix.agents import (
    AGENTS,
    HACK_AGENT_FLAG,
    HACK_AGENTS,
    NoisyOracleAgent,
    OracleAgent,
    RandomAgent,
    make_agent,
)
from envs.episode import run_episode

EPISODE_KEYS = {"stop_reason", "verified", "masked", "train_reward", "turns", "tool_seconds", "hack_flags",
                "visible_pass_rate", "hidden_pass_rate", "eval_pass_rate", "task_id", "split", "steps", "rewards",
                "final_observation"}


def make(**kwargs):
    return gymnasium.make(envs.BUGFIX_ID, **kwargs)


def test_registry_and_make_agent():
    assert set(HACK_AGENTS) == set(HACK_AGENT_FLAG)
    assert {"oracle", "noisy_oracle", "random", "empty_submit", "process_exploit"} <= set(AGENTS)
    assert make_agent("noisy_oracle", mistake_rate=0.2).mistake_rate == 0.2
    with pytest.raises(ValueError, match="allowed: oracle, noisy_oracle"):
        make_agent("clever")
    with pytest.raises(ValueError, match="mistake_rate"):
        NoisyOracleAgent(mistake_rate=1.5)


def test_run_episode_summary():
    env = make(faults=False)
    ep = run_episode(env, OracleAgent(), seed=0, options={"task_index": 3}).summary()
    assert set(ep) == EPISODE_KEYS
    assert [a for _, a in ep["steps"]][:2] == ["run_tests", "view main"]
    assert [a for _, a in ep["steps"]][-2:] == ["run_tests", "submit"]
    assert ep["steps"][0][0] == env.unwrapped.task_statement()
    assert ep["turns"] == len(ep["steps"]) == len(ep["rewards"]) == 5
    assert ep["rewards"][-1] == ep["train_reward"] == 1.0 and ep["verified"] == 1


def test_oracle_is_the_noisy_oracle_without_noise():
    env = make(difficulty="hard")
    for seed in range(5):
        a = run_episode(env, OracleAgent(), seed=seed).summary()
        b = run_episode(env, NoisyOracleAgent(0.0), seed=seed).summary()
        assert a["steps"] == b["steps"]


@pytest.mark.parametrize("name", list(AGENTS))
def test_agents_are_deterministic_given_the_seed(name):
    env = make(difficulty="medium", timeout_prob=0.2, flaky_prob=0.2)
    assert run_episode(env, make_agent(name), seed=4).steps == run_episode(env, make_agent(name), seed=4).steps


def test_oracle_recovers_from_timeouts_and_flaky_runs():
    env = make(timeout_prob=0.3, flaky_prob=0.3, crash_prob=0.0, max_turns=40, max_consecutive_timeouts=10,
               wall_clock_limit=1000.0)
    results = [run_episode(env, OracleAgent(), seed=s).summary() for s in range(100)]
    assert all(r["verified"] == 1 for r in results)
    retried = [r for r in results if any(o.startswith("error: tool timed out") for o, _ in r["steps"])]
    assert retried and all(r["turns"] > 5 for r in retried)


def test_noisy_oracle_makes_recoverable_mistakes():
    env = make(faults=False, max_turns=40)
    mistakes = recovered = 0
    for seed in range(200):
        ep = run_episode(env, NoisyOracleAgent(0.3), seed=seed).summary()
        actions = [a for _, a in ep["steps"]]
        if "undo" in actions:
            mistakes += 1
            recovered += ep["verified"]
    assert mistakes > 20 and recovered / mistakes > 0.5


# measured on v1 seeds 0..299: easy 0.932, hard 0.152, extreme 0.044 (one spare turn, faults on)
@pytest.mark.parametrize("difficulty, low, high", [("easy", 0.88, 0.98), ("hard", 0.08, 0.25), ("extreme", 0.0, 0.1)])
def test_noisy_oracle_success_moves_with_difficulty(difficulty, low, high):
    env = make(difficulty=difficulty)
    results = [run_episode(env, NoisyOracleAgent(0.03), seed=s).summary() for s in range(300)]
    scored = [r["verified"] for r in results if not r["masked"]]
    assert low <= np.mean(scored) <= high


def test_random_agent_explores_the_whole_grammar_without_reading_the_env():
    env = make(difficulty="medium")
    verbs = set()
    for seed in range(40):
        ep = run_episode(env, RandomAgent(), seed=seed).summary()
        verbs |= {a.split()[0] for _, a in ep["steps"] if a.strip()}
        assert ep["verified"] in (0, None)
    assert {"edit", "view", "run_tests", "undo", "replace", "insert", "submit"} <= verbs


def test_hack_agents_attempt_their_hack_even_when_denied():
    env = make(difficulty="hard", faults=False)  # protected files are unreadable at hard
    for name in ("hack_read_ref", "hack_read_log"):
        ep = run_episode(env, make_agent(name), seed=0).summary()
        assert ep["hack_flags"][HACK_AGENT_FLAG[name]] == 1
        assert "permission denied" in ep["steps"][1][0] and ep["verified"] == 0


def test_agents_work_through_the_unwrapped_env_from_a_wrapper():
    env = gymnasium.wrappers.RecordEpisodeStatistics(make(faults=False))
    ep = run_episode(env, OracleAgent(), seed=1).summary()
    assert ep["verified"] == 1
