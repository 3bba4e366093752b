"""PairFix-v2: reset/step contracts, determinism per seed, fuzzed actions, the observation split,
the scripted oracle pair, and the task construction (composition, bug placement)."""

from __future__ import annotations

import pytest

import envs
from envs.pairfix import AGENTS, BUG_PLACES, PairFixEnv, indices_with_bug_in, run_pair
from envs.pairfix.agents import PairOracle, RandomPairAgent, run_pair_episode
from envs.tokenizer import get_tokenizer


def _env(**kw) -> PairFixEnv:
    return envs.make_multi_agent(envs.PAIRFIX_ID, **kw)


def test_run_pair_composes_b_then_a():
    # b: t = x + 2, return t * 3 -> b(4) = 18 ; a: return x - 5 -> a(18) = 13
    a = ("return x - 5",)
    b = ("t = x + 2", "return t * 3")
    assert run_pair((a, b), (4, 0)) == (13, 1)  # 0 -> b = 6 -> a = 1
    # b returns nothing for x < 0: the whole program returns nothing there
    assert run_pair((a, ("if x >= 0 then return x",)), (-1, 3)) == (None, -2)


def test_reset_contract_and_bug_places():
    env = _env()
    for place in BUG_PLACES:
        for i in indices_with_bug_in(place, 3, start=5):
            assert i % 3 == BUG_PLACES.index(place)
            env.reset(seed=0, options={"task_index": i})
            t = env.task
            assert t.bug_in == place and env.agents == ["a", "b"] and env.agent_selection == "a"
            assert (t.buggy[0] != t.reference[0]) == (place in ("a", "both"))
            assert (t.buggy[1] != t.reference[1]) == (place in ("b", "both"))
            assert env.rewards == {"a": 0.0, "b": 0.0} and not any(env.terminations.values())
            obs, reward, term, trunc, info = env.last()
            assert obs.startswith("task : agent a") and reward == 0.0 and not term and not trunc
            assert info["bug_in"] == place
            # the buggy program fails a visible test; the reference passes them all
            xs = tuple(x for x, _ in t.visible)
            assert run_pair(t.buggy, xs) != tuple(y for _, y in t.visible)
            assert run_pair(t.reference, xs) == tuple(y for _, y in t.visible)


def test_step_contract_turns_alternate_and_end_is_joint():
    env = _env(faults=False)
    env.reset(seed=0, options={"task_index": 0})
    seen = []
    for _ in range(3):
        seen.append(env.agent_selection)
        env.step("ls")
    assert seen == ["a", "b", "a"]
    env.step("submit")  # b submits the still-buggy program
    assert all(env.terminations.values()) and not any(env.truncations.values())
    assert env.infos["a"]["stop_reason"] == env.infos["b"]["stop_reason"] == "submitted_failed"
    assert env.infos["a"]["verified"] == 0
    # AEC dead steps: each finished agent, in turn order, is stepped with None and leaves
    assert env.agent_selection == "a" and env.last()[2]
    with pytest.raises(ValueError, match="allowed: None"):
        env.step("ls")
    env.step(None)
    assert env.agents == ["b"] and set(env.infos) == {"b"} and env.agent_selection == "b"
    env.step(None)
    assert env.agents == [] and env.rewards == env.terminations == env.truncations == env.infos == {}
    with pytest.raises(RuntimeError, match="reset"):
        env.step("ls")
    env.reset(seed=0, options={"task_index": 0})
    with pytest.raises(TypeError, match="str"):
        env.step(3)


def test_turn_limit_is_per_agent_and_truncates():
    env = _env(faults=False, max_turns=2)
    env.reset(seed=0, options={"task_index": 1})
    for _ in range(3):
        env.step("ls")
        assert env.agents  # a:1 b:1 a:2
    env.step("ls")  # b:2 -> both used 2 turns
    assert env.infos["b"]["stop_reason"] == "max_turns" and all(env.truncations.values())
    assert not any(env.terminations.values())


def test_bad_arguments_name_the_value():
    with pytest.raises(ValueError, match="max_message_words=0"):
        _env(max_message_words=0)
    with pytest.raises(ValueError, match="reward_mode='process'"):
        _env(reward_mode="process")
    with pytest.raises(ValueError, match="agent 'c'"):
        _env().observe("c")


def test_same_seed_same_episode_and_tool_stream():
    env1, env2 = _env(), _env()
    for seed in range(4):
        e1 = run_pair_episode(env1, {"a": RandomPairAgent(), "b": PairOracle()}, seed=seed)
        e2 = run_pair_episode(env2, {"a": RandomPairAgent(), "b": PairOracle()}, seed=seed)
        assert e1.turns == e2.turns and e1.final_infos == e2.final_infos


def test_fuzzed_actions_never_raise_and_every_text_encodes():
    tok = get_tokenizer()
    env = _env(timeout_prob=0.2, flaky_prob=0.3, crash_prob=0.01)
    junk = ["", " ", "send", "send <pad>", "send " + "x " * 20, "edit 0 + -", "view nothing", "insert 99 return x",
            "é", "a" * 300, "send fixed\nsubmit", "delete_test 9", "edit_test 1 5", "undo", "replace 1 return x"]
    for seed in range(12):
        env.reset(seed=seed, options={"task_index": seed})
        k = 0
        while not (env.terminations[env.agent_selection] or env.truncations[env.agent_selection]):
            env.step(junk[(seed + k) % len(junk)] if k % 3 else "run_tests")
            k += 1
            for a in AGENTS:
                tok.encode(env.observe(a))
        assert env.infos["a"]["stop_reason"]
    for seed in range(12):  # random word strings
        ep = run_pair_episode(env, {"a": RandomPairAgent(), "b": RandomPairAgent()}, seed=seed)
        for _, obs, action in ep.turns:
            tok.encode(obs)


def test_observation_split_a_never_sees_b_file():
    """Agent a's observations never contain a line of b's file (both buggy and current), while b
    sees a's messages and a's test results."""
    env = _env(faults=False)
    for i in range(9):
        env.reset(seed=i, options={"task_index": i})
        t = env.task
        a_lines = set(t.buggy[0]) | set(t.reference[0])
        b_lines = {line for line in set(t.buggy[1]) | set(t.reference[1]) if not any(line in x for x in a_lines)}
        assert b_lines
        actions = {"a": ["view main", "send bug mine", "run_tests", "view tests", "ls", "view main"],
                   "b": ["view main", "run_tests", *t.oracle_actions("b"), "view main", "send fixed", "ls"]}
        obs_a = []
        while not env.terminations[env.agent_selection] and any(actions.values()):
            name = env.agent_selection
            if name == "a":
                obs_a.append(env.observe("a"))
            if not actions[name]:
                break
            env.step(actions[name].pop(0))
        obs_a.append(env.observe("a"))
        text = "\n".join(obs_a)
        assert not any(line in text for line in b_lines), (i, b_lines)
        assert "message from b : fixed" in text or env.agent_selection == "b"


def test_messages_and_shared_tests_reach_the_other_agent():
    env = _env(faults=False)
    env.reset(seed=0, options={"task_index": 0})  # bug in a
    env.step("send bug yours")  # a
    assert env.observe("b").endswith("message from a : bug yours")
    env.step("run_tests")  # b: the program still fails; b's file is right, so b gets no hint
    out_b = env.observe("b")
    assert out_b.startswith("tests : ") and "hint" not in out_b and " 0 failed" not in out_b
    obs_a = env.observe("a")
    assert "tests by b : " in obs_a and "hint" not in obs_a
    env.step("run_tests")  # a: its own file is wrong, so it gets the hint
    assert "hint : line" in env.observe("a")
    env.step("send " + " ".join(["fixed"] * 7))  # b: 7 words > max_message_words = 6
    assert env.observe("b").startswith("error: malformed action . usage: send WORDS")


def test_scripted_oracle_pair_verifies():
    """The oracle pair (each knows only its own fix) with BugFix easy's default tool faults."""
    env = _env()
    n, ok = 90, 0
    for i in range(n):
        ep = run_pair_episode(env, {"a": PairOracle(), "b": PairOracle()}, seed=i,
                              options={"task_index": i, "split": ("train", "heldout")[i % 2]})
        if ep.final_infos["a"]["masked"]:
            n -= 1
            continue
        ok += ep.final_infos["a"]["verified"]
        assert ep.rewards["a"] == ep.rewards["b"] == ep.final_infos["b"]["train_reward"]
    assert ok / n >= 0.95, ok / n


def test_trap_voids_the_team_reward():
    env = _env(faults=False)
    env.reset(seed=0, options={"task_index": 1})  # bug in b
    env.step("view ref")  # a reads its reference: a trap
    for action in env.task.oracle_actions("b"):
        env.step(action)  # b fixes
        env.step("ls")  # a
    env.step("submit")
    assert env.infos["a"]["stop_reason"] == "submitted_voided" and env.infos["a"]["verified"] == 0
    assert env.infos["a"]["file_fixed_a"] and env.infos["a"]["file_fixed_b"]


def test_pettingzoo_api_test_passes():
    """``PairFixEnv`` is a ``pettingzoo.AECEnv`` that passes PettingZoo's own API checker
    (random text actions: the episodes end by format errors or turn limits)."""
    from pettingzoo import AECEnv
    from pettingzoo.test import api_test

    env = _env()
    assert isinstance(env, AECEnv)
    with pytest.warns(UserWarning, match=r"ignores unknown option\(s\) \['options'\]"):
        api_test(env, num_cycles=50)


def test_pettingzoo_seed_test_passes():
    from pettingzoo.test import seed_test

    seed_test(lambda: _env(), num_cycles=50)


def test_known_reset_options_still_reject_bad_values():
    env = _env()
    with pytest.raises(ValueError, match="unknown split 'test'"):
        env.reset(seed=0, options={"split": "test"})
    with pytest.raises(ValueError, match="task_index must be an int"):
        env.reset(seed=0, options={"task_index": "3"})
    with pytest.raises(ValueError, match="task_index=-1"):
        env.reset(seed=0, options={"task_index": -1})
    with pytest.warns(UserWarning, match=r"\['task'\]"):  # a misspelt key is named, then ignored
        env.reset(seed=0, options={"task": 3, "task_index": 4})
    assert env.task.index == 4
