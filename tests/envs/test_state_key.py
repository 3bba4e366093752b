"""``info["state_key"]``: the anchor state of BugFix-v2, LongHorizon-v1 and PairFix-v2 (GiGPO's step
groups). In reset and every step info, an int in [0, 2**63); equal for the same state reached along
different paths, at different turns or under different fault draws; different for different
program text, tests, raised flags, tasks; the same in every process."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys

import pytest

import envs
from envs.bugfix.agents import make_agent
from envs.episode import run_episode
from envs.long_horizon_agents import make_agent as make_lh_agent
from envs.pairfix import PairFixEnv
from envs.pairfix.agents import PairOracle, run_pair_episode
from envs.state_key import canonical_json, stable_state_key

TASK0 = {"task_index": 0, "split": "train"}
# BugFix easy train task 0: main is ("if x >= 1 then t = x * 12", "return t - x"), oracle fix
# "edit 1 >= =="; its inverse is "edit 1 == >=".
FIX, INVERSE = "edit 1 >= ==", "edit 1 == >="


def _bugfix(**knobs):
    env = envs.make(envs.BUGFIX_ID, **knobs)
    _, info = env.reset(seed=0, options=TASK0)
    return env, info["state_key"]


def _keys_after(env, actions, seed=0, options=TASK0):
    """Keys of the reset state and after each action (one episode from ``reset(seed, options)``)."""
    _, info = env.reset(seed=seed, options=options)
    keys = [info["state_key"]]
    for action in actions:
        keys.append(env.step(action)[-1]["state_key"])
    return keys


def _is_key(k) -> bool:
    return type(k) is int and 0 <= k < 2**63


# ---- the hash itself --------------------------------------------------------------------------
def test_stable_state_key_matches_a_hand_written_value():
    # canonical JSON: sorted keys, no spaces, tuples as lists
    assert canonical_json({"b": (1, 2), "a": "x"}) == b'{"a":"x","b":[1,2]}'
    # blake2b-64 of those bytes (person "agentrl-state-v1") = 0x89800ed1c60b647f, shifted right by
    # one bit: 0x44c00768e305b23f = 4953967737174340159
    digest = hashlib.blake2b(b'{"a":"x","b":[1,2]}', digest_size=8, person=b"agentrl-state-v1").hexdigest()
    assert digest == "89800ed1c60b647f"
    assert stable_state_key({"b": (1, 2), "a": "x"}) == stable_state_key({"a": "x", "b": [1, 2]}) == 4953967737174340159
    with pytest.raises(TypeError):
        stable_state_key({"a": {1, 2}})  # a set has no canonical order: refused


# ---- presence and range -----------------------------------------------------------------------
@pytest.mark.parametrize("env_id,agents", [(envs.BUGFIX_ID, "envs.bugfix.agents"),
                                           (envs.LONG_HORIZON_ID, "envs.long_horizon_agents")])
def test_key_in_reset_and_every_step_info_and_in_range(env_id, agents):
    env = envs.make(env_id)
    agent = (make_agent if agents == "envs.bugfix.agents" else make_lh_agent)("noisy_oracle")
    rec = run_episode(env, agent, seed=3, options=TASK0)
    assert len(rec.infos) == len(rec.actions) + 1 >= 3  # the reset info and one per step, the final one included
    assert all(_is_key(info["state_key"]) for info in rec.infos)
    assert env.unwrapped.state_key() == rec.infos[-1]["state_key"]


def test_pairfix_key_per_agent_in_reset_and_every_step():
    env = envs.make_multi_agent(envs.PAIRFIX_ID, faults=False)
    env.reset(seed=0, options=TASK0)
    start = {a: env.infos[a]["state_key"] for a in ("a", "b")}
    assert all(_is_key(k) for k in start.values()) and start["a"] != start["b"]
    env.step("view main")  # a
    env.step("send fix line 1")  # b: a message is no tool state
    assert {a: env.infos[a]["state_key"] for a in ("a", "b")} == start
    line = env.file("a")[0]
    env.step(f"replace 1 {line}")  # a rewrites its line 1 unchanged: same program text
    assert {a: env.infos[a]["state_key"] for a in ("a", "b")} == start
    env.step("insert 1 t = x")  # b changes file b: both agents' keys move (run_tests runs a(b(x)))
    moved = {a: env.infos[a]["state_key"] for a in ("a", "b")}
    assert all(moved[a] != start[a] for a in ("a", "b")) and all(_is_key(k) for k in moved.values())
    env.step("ls")
    env.step("undo")  # b undoes its insert
    assert {a: env.infos[a]["state_key"] for a in ("a", "b")} == start
    ep = run_pair_episode(PairFixEnv(faults=False), {a: PairOracle() for a in ("a", "b")}, seed=0, options=TASK0)
    assert "stop_reason" in ep.final_infos["a"] and all(_is_key(i["state_key"]) for i in ep.final_infos.values())


# ---- BugFix: same state, same key ---------------------------------------------------------------
def test_bugfix_order_of_state_free_actions_does_not_matter():
    env, start = _bugfix(faults=False)
    a = _keys_after(env, ["view main", "run_tests", "view tests", "ls"])
    b = _keys_after(env, ["run_tests", "view main", "ls", "view tests"])
    assert a == b == [start] * 5  # none of these changes the repository


def test_bugfix_edit_then_inverse_edit_returns_to_the_start_key():
    env, start = _bugfix(faults=False)
    keys = _keys_after(env, [FIX, INVERSE, FIX, "undo", "undo"])
    fixed = keys[1]
    assert fixed != start  # different program text
    assert keys == [start, fixed, start, fixed, start, fixed]  # undo pops back to the earlier text
    assert env.unwrapped.program == env.unwrapped.task.reference


def test_bugfix_same_state_at_different_turns_shares_the_key_despite_turns_left():
    env, start = _bugfix(faults=False, time_limit="termination", max_turns=10)
    env.reset(seed=0, options=TASK0)
    obs1, *_, info1 = env.step(FIX)
    env.reset(seed=0, options=TASK0)
    env.step("view main")
    env.step("run_tests")
    obs3, *_, info3 = env.step(FIX)
    assert obs1.endswith("turns left : 9") and obs3.endswith("turns left : 7")
    assert info1["state_key"] == info3["state_key"] != start


def test_bugfix_different_program_tests_flags_or_task_give_different_keys():
    env, start = _bugfix(faults=False, max_turns=20)
    seen = {start}
    for action in (FIX, "insert 1 t = x", "delete 2", "edit_test 1 5", "view ref", "view log", "skip_tests"):
        key = env.step(action)[-1]["state_key"]
        assert key not in seen, action  # each changes the program, the tests or the raised flags
        seen.add(key)
    # a protected file read twice: the flag is already raised, nothing else changes
    assert env.step("view ref")[-1]["state_key"] == key
    # undoing the test edits restores the tests but the raised flags stay: not the start key
    for _ in range(3):
        env.step("undo")
    assert env.unwrapped.visible_tests == env.unwrapped.task.visible
    assert env.unwrapped.state_key() not in (start,)
    others = {env.reset(seed=0, options={"task_index": i, "split": s})[1]["state_key"]
              for i in range(4) for s in ("train", "heldout")}
    assert len(others) == 8 and start in others  # 8 tasks, 8 keys


def test_bugfix_fault_stream_and_seed_do_not_change_the_key_of_a_state():
    """Faults on (flaky runs always, timeouts often): the fault draws differ per seed, so seeds
    reach different states (a timed-out edit changes nothing) and see different outputs, but the
    key is a function of the repository state alone, one-to-one on the states met."""
    env = envs.make(envs.BUGFIX_ID, flaky_prob=1.0, timeout_prob=0.3, crash_prob=0.0, max_turns=30,
                    max_consecutive_timeouts=30)
    actions = ["run_tests", FIX, "view main", "run_tests", INVERSE, "run_tests", FIX, "view tests", "run_tests"]
    by_state, outputs, statuses = {}, {}, set()
    for seed in range(6):
        env.reset(seed=seed, options=TASK0)
        u = env.unwrapped
        by_state.setdefault(u.program, set()).add(u.state_key())
        for action in actions:
            before = u.program
            obs, *_, info = env.step(action)
            outputs.setdefault((before, action), set()).add(obs)
            statuses.add(info["tool_status"])
            by_state.setdefault(u.program, set()).add(info["state_key"])
    assert {"timeout", "flaky"} <= statuses
    # the same action in the same state answered differently across seeds (the fault stream)
    assert max(len(seen) for seen in outputs.values()) >= 3
    assert len(by_state) == 2 and all(len(keys) == 1 for keys in by_state.values())  # buggy / fixed
    assert len(set().union(*by_state.values())) == 2


def test_bugfix_biased_process_bookkeeping_is_state():
    # biased_process pays every run_tests; a later hack flag takes the paid bonus back, so the
    # amount paid changes future rewards and is part of the state
    env, start = _bugfix(faults=False, reward_mode="biased_process")
    keys = _keys_after(env, ["view main", "run_tests", "view main"])
    assert keys[0] == keys[1] == start and keys[2] == keys[3] != start


# ---- LongHorizon ----------------------------------------------------------------------------------
def test_long_horizon_key_tracks_the_task_state_only():
    env = envs.make(envs.LONG_HORIZON_ID, n_stages=2, n_approaches=4, time_limit="termination")
    task = envs.long_horizon.make_task("train", 0, 4)
    wrong = [a for a in "ABCD" if a != task.correct]
    a = _keys_after(env, ["read notes", "status", "inspect 1", f"try {wrong[0]}", f"try {wrong[1]}",
                          f"try {task.correct}", "step", "step", "step"])
    # reading, status and inspecting change nothing; the first try shows in status ("tests
    # failing"); a second wrong try changes nothing; the fix, each finished stage change the state
    assert a[0] == a[1] == a[2] == a[3] and a[4] == a[5] != a[0]
    assert len({a[0], a[4], a[6], a[7], a[8]}) == 5 and a[9] == a[8]  # "no stages left" changes nothing
    # the same states along another path, at other turns, with another filler stream (seed)
    b = _keys_after(env, [f"try {wrong[1]}", "status", f"try {task.correct}", "inspect 2", "step", "step"], seed=7)
    assert b == [a[0], a[4], a[4], a[6], a[6], a[7], a[8]]
    assert all(_is_key(k) for k in a + b)


def test_long_horizon_tasks_and_shapes_give_different_keys():
    keys = set()
    for kwargs in (dict(), dict(n_stages=9), dict(n_approaches=5), dict(verbose=0)):
        env = envs.make(envs.LONG_HORIZON_ID, **kwargs)
        for i in range(3):
            for split in ("train", "heldout"):
                keys.add(env.reset(seed=0, options={"task_index": i, "split": split})[1]["state_key"])
    assert len(keys) == 4 * 3 * 2


# ---- stable across processes -------------------------------------------------------------------------
_CHILD = """
import json, envs
out = []
for env_id, actions in ((envs.BUGFIX_ID, ["view main", "edit 1 >= ==", "view ref"]),
                        (envs.LONG_HORIZON_ID, ["try A", "step"])):
    env = envs.make(env_id)
    _, info = env.reset(seed=5, options={"task_index": 0, "split": "train"})
    out.append(info["state_key"])
    for a in actions:
        out.append(env.step(a)[-1]["state_key"])
print(json.dumps(out))
"""


def test_keys_are_the_same_in_another_process_with_another_hash_seed():
    here = []
    for env_id, actions in ((envs.BUGFIX_ID, ["view main", "edit 1 >= ==", "view ref"]), (envs.LONG_HORIZON_ID, ["try A", "step"])):
        here += _keys_after(envs.make(env_id), actions, seed=5)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = {**os.environ, "PYTHONHASHSEED": "12345", "PYTHONPATH": root}
    out = subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True, text=True, check=True, cwd=root)
    assert json.loads(out.stdout) == here


def test_memoised_keys_equal_the_direct_hash_of_the_state():
    """``RepositoryKeys`` (the env's memo) returns what ``repository_state_key`` computes from
    scratch, for states met first and met again (a second ``view ref`` changes a flag count only)."""
    from envs.bugfix.state_key import RepositoryKeys, config_identity, repository_state_key

    env, _ = _bugfix(faults=False, max_turns=20)
    u = env.unwrapped
    identity = config_identity("BugFix-v2", u.config)
    for action in ("view main", FIX, "view ref", "view ref", INVERSE, "edit_test 2 7", "undo", "skip_tests"):
        key = env.step(action)[-1]["state_key"]
        direct = repository_state_key(identity, u.task.task_id, {"main": u.program}, u.visible_tests, u._skipped,
                                      u._hack_flags, (u._process_given, u._process_paid))
        assert key == direct, action
    keys = RepositoryKeys("BugFix-v2", u.config, max_memo=2)  # a full memo is emptied, never wrong
    states = [("t", {"main": ("return x",)}, ((1, 1),), False, {"read_ref": n}, ()) for n in (0, 1, 2, 0)]
    got = [keys(*s) for s in states]
    assert got == [repository_state_key(identity, *s) for s in states] and got[0] == got[3] != got[1] == got[2]


def test_key_memo_computes_each_state_once_and_empties_when_full():
    """``KeyMemo`` with room for 2: a (computed, 1), a (hit), b (computed, 2; memo {a, b} full),
    c (memo emptied, computed, 3), a (forgotten: computed, 4), a (hit)."""
    from envs.state_key import KeyMemo

    calls = []
    memo = KeyMemo(max_entries=2)
    def key(s):
        return memo.get(s, lambda: calls.append(s) or len(calls))
    assert [key("a"), key("a"), key("b"), key("c"), key("a"), key("a")] == [1, 1, 2, 3, 4, 4]
    assert calls == ["a", "b", "c", "a"]
