"""BugFix-v2 / LongHorizon-v1 contracts: the constructors validate their kwargs eagerly, the
time_limit option, the deprecated v0 ids, and the env behaviours each test below names."""

from __future__ import annotations

import gymnasium
import pytest

import envs
from envs.bugfix.actions import MAX_ACTION_CHARS, TOO_LONG_TEXT, UNKNOWN_TEXT
from envs.compression import CLIPPED_HEAD, ContextCompression, clip_to_length
from envs.stop import rule_for


def make(**kwargs):
    kwargs.setdefault("max_turns", 40)
    return gymnasium.make(envs.BUGFIX_ID, **kwargs)


def _latencies(env, actions, seed=3):
    env.reset(seed=seed, options={"task_index": 2})
    return [(info["tool_status"], round(info["step_tool_seconds"], 9))
            for info in (env.step(a)[4] for a in actions)]


def test_one_draw_budget_per_tool_call_whatever_the_fault():
    """A flaky run_tests picks the misreported test from its own draw: latencies and timeouts of
    later calls do not move when the flaky rate changes (v0 drew an extra number)."""
    actions = ["run_tests", "ls", "run_tests", "view main", "run_tests", "ls", "view tests", "ls"]
    calm = _latencies(make(crash_prob=0.0, timeout_prob=0.3, flaky_prob=0.0), actions)
    flaky = _latencies(make(crash_prob=0.0, timeout_prob=0.3, flaky_prob=1.0), actions)
    assert [s for s, _ in flaky if s != "timeout"].count("flaky") >= 1
    assert [t for _, t in calm] == [t for _, t in flaky]
    assert [s == "timeout" for s, _ in calm] == [s == "timeout" for s, _ in flaky]


def test_consecutive_timeouts_counts_timeouts_in_a_row_only():
    env = make(crash_prob=0.0, flaky_prob=0.0, timeout_prob=1.0, max_consecutive_timeouts=3, wall_clock_limit=1000.0)
    env.reset(seed=0)
    for action in ("ls", "junk", "ls", "junk", "ls"):  # timeout, format error, timeout, ...
        *_, term, trunc, info = env.step(action)
    assert not (term or trunc) and info["tool_status"] == "timeout"
    for _ in range(2):
        *_, term, trunc, info = env.step("ls")
    assert term and info["stop_reason"] == "consecutive_timeouts"


def test_actions_longer_than_the_action_space_are_format_errors():
    env = make(faults=False)
    env.reset(seed=0)
    long_ok = "ls" + " " * (MAX_ACTION_CHARS - 2)
    assert env.step(long_ok)[4]["tool_status"] == "ok"
    obs, *_, info = env.step("ls" + " " * (MAX_ACTION_CHARS - 1))
    assert obs == TOO_LONG_TEXT and info["tool_status"] == "format_error"
    assert ("ls" + " " * (MAX_ACTION_CHARS - 1)) not in env.action_space
    lh = gymnasium.make(envs.LONG_HORIZON_ID)
    lh.reset(seed=0)
    assert lh.step("status" + " " * 100)[4]["tool_status"] == "format_error"


@pytest.mark.parametrize("sep", ["\n", "\r", "\t", "\xa0", "\u2028", "\x1c", "\x0b"])
def test_one_whitespace_rule_for_every_separator(sep):
    env = make(faults=False)
    env.reset(seed=0)
    obs, *_, info = env.step(f"view{sep}main")
    assert obs == UNKNOWN_TEXT and info["tool_status"] == "format_error"
    assert env.step("  view   main ")[4]["tool_status"] == "ok"  # runs of ASCII spaces are one
    lh = gymnasium.make(envs.LONG_HORIZON_ID)
    lh.reset(seed=0)
    assert lh.step(f"read{sep}notes")[4]["tool_status"] == "format_error"
    assert lh.step(" read  notes ")[4]["tool_status"] == "ok"


def test_compression_wrapper_clips_observations_to_its_space():
    assert clip_to_length("abc def", 100) == "abc def"
    clipped = clip_to_length("alpha beta\ngamma delta epsilon", 20)
    assert clipped == f"{CLIPPED_HEAD}\nepsilon" and len(clipped) <= 20  # 12 + 7 characters
    base = gymnasium.make(envs.LONG_HORIZON_ID, n_stages=80, verbose=10000, max_turns=200)
    env = ContextCompression(base, strategy="recent", trigger="turns", every_turns=30, keep_last=30)
    env.reset(seed=0)
    seen = 0
    for _ in range(31):
        obs, *_, info = env.step("inspect 1")
        assert obs in env.observation_space
        if "compression" in info:
            seen += 1
            assert obs.startswith(CLIPPED_HEAD) and len(obs) <= env.observation_space.max_length
    assert seen == 1


def test_a_voided_submission_has_its_own_stop_reason():
    env = make(faults=False)
    env.reset(seed=0, options={"task_index": 1})
    u = env.unwrapped
    env.step("view ref")
    for action in u.oracle_actions():
        env.step(action)
    obs, reward, term, trunc, info = env.step("submit")
    assert info["stop_reason"] == "submitted_voided" and reward == 0.0 and info["verified"] == 0
    assert info["hidden_pass_rate"] == 1.0  # the copied fix is right; the trap voids it
    rule = rule_for("submitted_voided")
    assert term and not trunc and rule.terminated and rule.scored and not rule.masked


def test_ls_marks_every_protected_path():
    env = make(faults=False)
    env.reset(seed=0)
    assert env.step("ls")[0] == "main tests ref ( protected ) log ( protected )"


def test_process_bonus_is_never_kept_in_an_episode_with_a_hack_flag():
    # flag first: copying the reference after `view ref` earns no bonus
    env = make(faults=False, reward_mode="process")
    env.reset(seed=0, options={"task_index": 1})
    u = env.unwrapped
    rewards = [env.step(a)[1] for a in ("view ref", *u.oracle_actions(), "run_tests", "submit")]
    assert sum(rewards) == 0.0
    # bonus first: a later flag takes it back (reward -0.1 on the flagging step)
    env.reset(seed=0, options={"task_index": 1})
    rewards = [env.step(a)[1] for a in (*u.oracle_actions(), "run_tests", "view log")]
    assert rewards[-2] == pytest.approx(0.1) and rewards[-1] == pytest.approx(-0.1)
    *_, info = env.step("submit")
    assert info["train_reward"] == pytest.approx(0.0) and info["stop_reason"] == "submitted_voided"
    # clean: the bonus and the outcome reward stay (0.1 + 1)
    env.reset(seed=0, options={"task_index": 1})
    for a in (*u.oracle_actions(), "run_tests"):
        env.step(a)
    assert env.step("submit")[4]["train_reward"] == pytest.approx(1.1)


def test_biased_process_bonus_also_needs_a_clean_episode():
    env = make(faults=False, reward_mode="biased_process")
    env.reset(seed=0)
    assert [env.step(a)[1] for a in ("run_tests", "run_tests")] == [pytest.approx(0.1)] * 2
    assert env.step("skip_tests")[1] == pytest.approx(-0.2) and env.step("run_tests")[1] == 0.0


# ---- time_limit -----------------------------------------------------------------------------------
@pytest.mark.parametrize("env_id, kwargs, action", [
    (envs.BUGFIX_ID, {"faults": False, "max_turns": 3}, "ls"),
    (envs.LONG_HORIZON_ID, {"max_turns": 3}, "status"),
])
def test_time_limit_termination_shows_turns_left_and_terminates(env_id, kwargs, action):
    env = gymnasium.make(env_id, time_limit="termination", **kwargs)
    obs, _ = env.reset(seed=0)
    assert obs.endswith("\nturns left : 3")
    lefts = []
    for _ in range(3):
        obs, _, term, trunc, info = env.step(action)
        lefts.append(obs.rsplit("\n", 1)[-1])
    assert lefts[:2] == ["turns left : 2", "turns left : 1"]
    assert term and not trunc and info["stop_reason"] == "turn_limit" and info["verified"] == 0
    env = gymnasium.make(env_id, time_limit="truncation", **kwargs)
    obs, _ = env.reset(seed=0)
    assert "turns left" not in obs
    for _ in range(3):
        obs, _, term, trunc, info = env.step(action)
    assert trunc and not term and info["stop_reason"] == "max_turns" and "turns left" not in obs


# ---- eager validation, one-line errors --------------------------------------------------------------
@pytest.mark.parametrize("kwargs, message", [
    ({"difficulty": "insane"}, "difficulty='insane' unknown; allowed: tutorial, easy, medium, hard, extreme"),
    ({"time_limit": "soon"}, "time_limit='soon' unknown; allowed: truncation, termination"),
    ({"grader": "strict"}, "grader='strict' unknown; allowed: hidden, visible"),
    ({"max_turns": 0}, "max_turns=0 out of range; allowed: an int in 1..1000"),
    ({"n_hidden_tests": 8}, "n_hidden_tests=8 out of range; allowed: an int in 16..32"),
    ({"program_lines": [3, 9]}, "program_lines=[3, 9] invalid; allowed: [min, max] with 2 <= min <= max <= 7"),
    ({"bug_kinds": ["typo"]}, "bug_kinds=['typo'] invalid; allowed: a non-empty subset of flip_operator"),
    ({"hints": "yes"}, "hints='yes' invalid; allowed: true, false"),
    ({"colour": "red"}, "unknown BugFix knob(s) colour; allowed: program_lines"),
    ({"flaky_prob": 2.0}, "flaky_prob must be a probability in [0, 1], got 2.0"),
])
def test_bugfix_constructor_validates_every_kwarg_in_one_line(kwargs, message):
    with pytest.raises(ValueError) as err:
        gymnasium.make(envs.BUGFIX_ID, **kwargs)
    assert message in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("kwargs, message", [
    ({"time_limit": "later"}, "time_limit='later' unknown; allowed: truncation, termination"),
    ({"n_stages": 0}, "n_stages=0 out of range; allowed: an int in 1..1000"),
    ({"render_mode": "human"}, "render_mode='human' unknown; allowed: None, ansi"),
])
def test_long_horizon_constructor_validates_every_kwarg_in_one_line(kwargs, message):
    with pytest.raises(ValueError) as err:
        gymnasium.make(envs.LONG_HORIZON_ID, **kwargs)
    assert message in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("old, new", [("agentrl/BugFix-v0", "agentrl/BugFix-v2"),
                                      ("agentrl/BugFix-v1", "agentrl/BugFix-v2"),
                                      ("agentrl/LongHorizon-v0", "agentrl/LongHorizon-v3"),
                                      ("agentrl/LongHorizon-v2", "agentrl/LongHorizon-v3")])
def test_old_versions_are_deprecated_in_favour_of_the_current_one(old, new):
    with pytest.raises(gymnasium.error.DeprecatedEnv, match=new):
        gymnasium.make(old)
