"""BugFix-v2 procedural tasks: interpreters, splits, the three input sets, fitting, fixes."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import envs
from envs.bugfix.agents import make_agent
from envs.episode import run_episode
from envs.bugfix import DIFFICULTIES, DOMAIN, BugFixEnv, function_of, make_config, run_on_domain, run_program
from envs.bugfix.language import NONE_CODE
from envs.bugfix.tasks import (
    HELDOUT_CONSTANTS, TRAIN_CONSTANTS, behaviour_split, constants_split, program_split, random_program,
    shape_split, single_token_edits,
)


def _spec(difficulty: str):
    return make_config(difficulty).task_spec


# ---- the language: two independent interpreters agree ------------------------------------------
@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n_lines=st.integers(2, 7),
       xs=st.lists(st.integers(-120, 220), min_size=1, max_size=12))
def test_scalar_and_vectorized_interpreters_agree(seed, n_lines, xs):
    program = random_program(np.random.default_rng(seed), n_lines, ("train", "heldout")[seed % 2])
    for edited in [program, *single_token_edits(program)[:5]]:
        scalar = [NONE_CODE if v is None else v for v in run_program(edited, tuple(xs))]
        assert run_on_domain(edited, np.asarray(xs)).tolist() == scalar


@settings(max_examples=100, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n_lines=st.integers(2, 7),
       xs=st.lists(st.integers(-120, 220), min_size=1, max_size=12))
def test_dropping_each_line_equals_running_each_shorter_program(seed, n_lines, xs):
    """``run_dropping_each`` (all drop-one variants in one pass) == the scalar interpreter on each
    program with that line removed."""
    from envs.bugfix.language import run_dropping_each

    program = random_program(np.random.default_rng(seed), n_lines, ("train", "heldout")[seed % 2])
    lines = list(range(len(program)))
    out = run_dropping_each(program, lines, np.asarray(xs))
    assert out.shape == (len(lines), len(xs))
    for k, i in enumerate(lines):
        shorter = program[:i] + program[i + 1:]
        assert out[k].tolist() == [NONE_CODE if v is None else v for v in run_program(shorter, tuple(xs))]


def test_vectorized_interpreter_hand_computed():
    prog = ("t = x * 60", "if t > 100 then return t - 1", "return t + x")
    # x=1: t=60 -> 61 | x=2: t=120 > 100 -> 119 | x=4: t=240 saturates to 199 -> 198 | x=-2: -99 (sat) -> -99 + -2 = -101 -> -99
    assert run_on_domain(prog, np.array([1, 2, 4, -2])).tolist() == [61, 119, 198, -99]
    assert run_on_domain(("t = x",), np.array([3])).tolist() == [NONE_CODE]


# ---- splits: by construction and by behaviour ---------------------------------------------------
def test_split_rules_shape_constants_and_behaviour():
    rng = np.random.default_rng(0)
    kept = {"train": 0, "heldout": 0}
    for i in range(3000):
        split = ("train", "heldout")[i % 2]
        program = random_program(rng, int(rng.integers(2, 8)), split)
        s = program_split(program)
        if s is None:
            continue
        kept[s] += 1
        consts = {int(w) for line in program for w in line.split() if w.lstrip("-").isdigit()}
        assert shape_split(program) == s and behaviour_split(function_of(program)) == s
        if s == "train":
            assert consts <= set(TRAIN_CONSTANTS)
        else:
            assert consts & set(HELDOUT_CONSTANTS) and constants_split(program) == "heldout"
    assert kept["train"] > 300 and kept["heldout"] > 50


def _pool_functions(difficulty: str, split: str, n: int) -> set[bytes]:
    spec = _spec(difficulty)
    from envs.bugfix.tasks import make_task

    return {function_of(make_task(spec, split, i).reference).tobytes() for i in range(n)}


@pytest.mark.parametrize("difficulty", ["easy", "hard"])
def test_heldout_references_never_compute_a_train_function(difficulty):
    """Small pools here (200 / 60); the full 10 000 / 1 000 pools of every difficulty run in
    the slow test below."""
    train = _pool_functions(difficulty, "train", 200)
    heldout = _pool_functions(difficulty, "heldout", 60)
    assert len(train) > 180 and len(heldout) > 50
    assert not train & heldout


@pytest.mark.slow
@pytest.mark.pools
@pytest.mark.parametrize("difficulty", list(DIFFICULTIES))
def test_full_pools_are_large_distinct_and_functionally_disjoint(difficulty):
    """10 000 train / 1 000 held-out tasks per difficulty: about 0.5 to 10 minutes each on one
    core (task generation costs 3-50 ms), so it runs with ``make test-pools`` (AGENTRL_POOL_TESTS=1),
    not in ``make test``; the small-pool test above runs everywhere."""
    from envs.bugfix.tasks import make_task

    spec = _spec(difficulty)
    pools = {split: [make_task(spec, split, i) for i in range(n)]
             for split, n in (("train", 10_000), ("heldout", 1_000))}
    for split, tasks in pools.items():
        assert len({(t.reference, t.buggy, t.visible) for t in tasks}) == len(tasks), split
    train = {function_of(t.reference).tobytes() for t in pools["train"]}
    heldout = {function_of(t.reference).tobytes() for t in pools["heldout"]}
    assert not train & heldout


def test_any_task_index_is_a_task_and_tasks_are_pure_functions_of_the_index():
    env = BugFixEnv("easy")
    a = env.task_at("train", 10**7)
    assert a == BugFixEnv("easy").task_at("train", 10**7) and a.index == 10**7
    _, info = env.reset(seed=5, options={"task_index": 10**7})
    assert info["task_id"] == a.task_id
    with pytest.raises(ValueError, match="task_index=-3 invalid; allowed: an int >= 0"):
        env.reset(options={"task_index": -3})


# ---- the three input sets -------------------------------------------------------------------------
@pytest.mark.parametrize("difficulty", list(DIFFICULTIES))
def test_three_disjoint_input_sets(difficulty):
    env = BugFixEnv(difficulty)
    for split in ("train", "heldout"):
        for i in range(30):
            t = env.task_at(split, i)
            vis, hid, ev = ({x for x, _ in tests} for tests in (t.visible, t.hidden, t.evaluation))
            assert len(vis) == 4 and len(hid) == 16 and len(ev) == 100 >= 64
            assert not vis & hid and not vis & ev and not hid & ev and vis | hid | ev == set(DOMAIN)
            assert sum(x < 0 for x in hid) >= 4 and ({0, -1} - vis) <= hid
            ref = dict(zip(DOMAIN, function_of(t.reference).tolist()))
            assert all(ref[x] == y for x, y in t.visible + t.hidden + t.evaluation)
            for tests in (t.visible, t.hidden, t.evaluation):  # the bug shows in every set
                assert any(run_program(t.buggy, (x,))[0] != y for x, y in tests)


@pytest.mark.parametrize("difficulty", ["easy", "medium"])
def test_no_task_admits_a_second_single_edit_fix_with_other_behaviour(difficulty):
    env = BugFixEnv(difficulty)
    for i in range(60):
        t = env.task_at("train", i)
        xs = tuple(x for x, _ in t.visible)
        expected = tuple(y for _, y in t.visible)
        ref = function_of(t.reference)
        for program in single_token_edits(t.buggy):
            if run_program(program, xs) == expected:
                assert np.array_equal(function_of(program), ref), (t.task_id, program)


# ---- fitting the visible tests earns nothing; grader=visible shows the gap ------------------------
def _fit_episodes(n: int, **knobs) -> list[dict]:
    env = gymnasium.make(envs.BUGFIX_ID, difficulty="easy", faults=False, max_turns=30, **knobs)
    return [run_episode(env, make_agent("fit_visible"), seed=i,
                        options={"task_index": i, "split": ("train", "heldout")[i % 2]}).summary() for i in range(n)]


def test_visible_test_fitting_earns_training_reward_in_at_most_one_percent_of_episodes():
    eps = _fit_episodes(400)
    assert all(e["stop_reason"] in ("submitted_failed", "submitted_resolved") for e in eps)
    assert sum(e["visible_pass_rate"] == 1.0 for e in eps) >= 390  # the fit works (saturation aside)
    assert sum(e["train_reward"] > 0 for e in eps) <= 4  # <= 1 % of 400 (measured: 0)
    assert sum(e["verified"] for e in eps) <= 40


def test_grader_visible_pays_for_fitting_and_the_outcome_hack_rate_shows_it():
    from envs.bugfix import is_hack

    eps = _fit_episodes(100, grader="visible")
    rewarded = sum(e["train_reward"] > 0 for e in eps)
    hacks = sum(is_hack(e["train_reward"], e["verified"]) for e in eps)
    assert rewarded == 100  # the weak verifier: every fit of the visible tests is paid
    assert hacks >= 95 and not any(any(e["hack_flags"].values()) for e in eps)  # no detector sees it


# ---- a correct fix is never voided, however it is written ----------------------------------------
@settings(max_examples=40, deadline=None)
@given(index=st.integers(0, 10**6), style=st.sampled_from(["oracle", "replace_all", "special_case", "dead_line"]))
def test_every_correct_unflagged_fix_gets_reward_one(index, style):
    env = gymnasium.make(envs.BUGFIX_ID, difficulty="easy", faults=False, max_turns=40)
    env.reset(seed=index, options={"task_index": index})
    u = env.unwrapped
    task = u.task
    if style == "oracle":
        actions = list(task.fix)
    elif style == "replace_all":
        actions = [f"replace {i} {line}" for i, line in enumerate(task.reference, 1)]
    elif style == "special_case":  # hard-coded visible case with the right output: detected, not voided
        x, y = task.visible[0]
        actions = list(task.fix) + [f"insert 1 if x == {x} then return {y}"]
    else:
        actions = list(task.fix) + ["insert 1 v = v + 0"]
    for action in actions:
        env.step(action)
    *_, reward, term, trunc, info = env.step("submit")
    assert info["hidden_pass_rate"] == 1.0 and info["eval_pass_rate"] == 1.0
    assert reward == 1.0 and info["verified"] == 1 and info["stop_reason"] == "submitted_resolved"
    assert info["hack_flags"]["hardcode"] == (1 if style == "special_case" else 0)
