"""The skyrl-gym adapter: built through ``skyrl_gym.make`` from the harness ids, it replays an episode
exactly as the env plays it, shares one task instance per row, and reports the env's end."""

from __future__ import annotations

import subprocess
import sys

import pytest

import skyrl_gym

import envs
from envs.integrations.skyrl import SKYRL_ENV_IDS, AgentRLTextEnv, register
from integrations.adapter_scripts import TUTORIAL, oracle_actions

LH3 = {"n_stages": 5, "n_rules": 3}  # constructor knobs of LongHorizon-v3 passed through env_config
PROMPT = [{"role": "system", "content": "Act with one action per turn."}, {"role": "user", "content": "Solve it."}]


@pytest.mark.parametrize("env_id,knobs", [(envs.BUGFIX_ID, TUTORIAL), (envs.LONG_HORIZON_V3_ID, LH3)])
def test_oracle_episode_through_skyrl_make_equals_the_direct_env(env_id, knobs):
    actions, observations, final = oracle_actions(env_id, 5, split="heldout", **knobs)
    env = skyrl_gym.make(env_id, env_config=knobs, extras={"split": "heldout", "task_index": 5, "uid": "x"})
    chat, meta = env.init(PROMPT)
    assert chat[0] == PROMPT[0] and chat[1]["content"] == f"Solve it.\n\n{observations[0]}"
    assert meta["task_id"] == final["task_id"]
    rewards = []
    for k, action in enumerate(actions):
        out = env.step(f" {action}\n")  # surrounding whitespace of the model's text is stripped
        rewards.append(out["reward"])
        assert out["postprocessed_action"] == action
        if k < len(actions) - 1:
            assert not out["done"] and out["observations"] == [{"role": "user", "content": observations[k + 1]}]
    assert out["done"] and out["observations"] == []
    md = out["metadata"]
    assert md["stop_reason"] == final["stop_reason"] == "submitted_resolved"
    assert md["verified"] == 1 and md["terminated"] and not md["truncated"] and not md["masked"]
    assert sum(rewards) == md["train_reward"] == 1.0
    assert env.get_metrics() == {"verified": 1.0, "train_reward": 1.0, "turns": len(actions), "hacked": 0.0,
                                 "masked": 0.0}


def test_rows_with_the_same_values_play_the_same_instance():
    extras = {"task_index": 7, "seed": 11}
    a, b = (skyrl_gym.make(envs.BUGFIX_ID, env_config={"difficulty": "easy"}, extras=extras) for _ in range(2))
    assert a.init([]) == b.init([])
    for action in ("run_tests", "view main", "run_tests", "ls"):  # with easy's tool faults
        assert a.step(action) == b.step(action)


def test_the_seed_of_a_row_drives_longhorizon_v3s_randomness():
    """Rows with equal values get equal LongHorizon-v3 episodes (filler words and tool seconds drawn
    from the env's seeded generator); another ``seed`` on the same task gives other filler."""
    knobs = {"n_stages": 4, "verbose": 20}
    actions, _, _ = oracle_actions(envs.LONG_HORIZON_V3_ID, 6, **knobs)
    rows = ({"task_index": 6}, {"task_index": 6, "seed": 6}, {"task_index": 6, "seed": 7})
    played = []
    for extras in rows:
        env = skyrl_gym.make(envs.LONG_HORIZON_V3_ID, env_config=knobs, extras=extras)
        env.init([])
        played.append([env.step(a) for a in actions])
    assert played[0] == played[1] and played[0][-1]["metadata"]["verified"] == 1
    assert played[2][-1]["metadata"]["verified"] == 1  # same task instance: the oracle's plan solves it
    assert [o["observations"] for o in played[0]] != [o["observations"] for o in played[2]]


@pytest.mark.parametrize("time_limit,reason,truncated", [("truncation", "max_turns", True),
                                                          ("termination", "turn_limit", False)])
def test_the_turn_limit_is_done_with_its_stop_reason_in_metadata(time_limit, reason, truncated):
    env = skyrl_gym.make(envs.LONG_HORIZON_V3_ID, env_config={"n_stages": 4, "max_turns": 2, "time_limit": time_limit},
                         extras={"task_index": 0})
    chat, meta = env.init([])
    assert env.max_turns == 2 and meta["task_id"] == "lh3-train-0"
    assert chat[0]["content"].endswith("turns left : 2") == (time_limit == "termination")
    first = env.step("status")
    assert not first["done"] and first["observations"][0]["content"].startswith("status : 4 stages left")
    out = env.step("status")
    assert out["done"] and out["metadata"]["stop_reason"] == reason and out["metadata"]["truncated"] == truncated
    assert out["metadata"]["terminated"] == (not truncated)
    assert out["metadata"]["verified"] == 0 and out["reward"] == 0.0


def test_a_wrong_fix_ends_in_a_failed_submit():
    """LongHorizon-v3 through skyrl-gym: a wrong approach is silent (the next stage shows as after
    the right one); the episode still ends done with ``submitted_failed``, reward 0, verified 0."""
    knobs = {"n_stages": 4}
    actions, observations, _ = oracle_actions(envs.LONG_HORIZON_V3_ID, 3, **knobs)
    env = skyrl_gym.make(envs.LONG_HORIZON_V3_ID, env_config=knobs, extras={"task_index": 3})
    env.init([])
    env.step(actions[0])
    _, stage_input, right = actions[1].split(" ")
    wrong = next(x for x in "ABCDEFGH" if x != right)
    out = env.step(f"fix {stage_input} {wrong}")
    assert out["observations"] == [{"role": "user", "content": observations[2]}] and out["reward"] == 0.0
    for action in actions[2:]:
        out = env.step(action)
    md = out["metadata"]
    assert out["done"] and md["stop_reason"] == "submitted_failed" and md["verified"] == 0 and md["terminated"]
    assert env.get_metrics() == {"verified": 0.0, "train_reward": 0.0, "turns": len(actions), "hacked": 0.0,
                                 "masked": 0.0}


def test_reward_the_verifier_denies_shows_in_metadata_and_metrics():
    knobs = {**TUTORIAL, "grader": "visible"}
    actions, _, final = oracle_actions(envs.BUGFIX_ID, 2, agent="hack_hardcode", **knobs)
    assert final["train_reward"] == 1.0 and final["verified"] == 0
    env = skyrl_gym.make(envs.BUGFIX_ID, env_config=knobs, extras={"task_index": 2})
    env.init([])
    for action in actions:
        out = env.step(action)
    assert out["metadata"]["train_reward"] == 1.0 and out["metadata"]["verified"] == 0
    assert env.get_metrics()["hacked"] == 1.0


def test_bad_construction_names_the_value():
    with pytest.raises(ValueError, match="task_index missing"):
        skyrl_gym.make(envs.BUGFIX_ID, extras={"split": "train"})
    with pytest.raises(ValueError, match="split='test'"):
        skyrl_gym.make(envs.BUGFIX_ID, extras={"task_index": 0, "split": "test"})
    with pytest.raises(ValueError, match="compression="):
        skyrl_gym.make(envs.BUGFIX_ID, env_config={"compression": {"strategy": "summary"}}, extras={"task_index": 0})
    with pytest.raises(ValueError, match="difficulty"):
        skyrl_gym.make(envs.BUGFIX_ID, env_config={"difficulty": "impossible"}, extras={"task_index": 0})


def test_register_is_idempotent_and_uses_the_harness_ids():
    assert register() == SKYRL_ENV_IDS == (envs.BUGFIX_ID, envs.LONG_HORIZON_V3_ID)
    assert all(i in skyrl_gym.registry for i in SKYRL_ENV_IDS)
    assert envs.LONG_HORIZON_ID not in skyrl_gym.registry  # v1 stays registered with gymnasium only
    with pytest.raises(ValueError, match="env_id='agentrl/LongHorizon-v1' unknown"):
        AgentRLTextEnv(extras={"task_index": 0}, env_id=envs.LONG_HORIZON_ID)


def test_import_envs_imports_no_framework():
    code = ("import sys, envs, envs.integrations, envs.pairfix; "
            "print(sorted(m for m in ('trl', 'skyrl_gym', 'transformers') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
