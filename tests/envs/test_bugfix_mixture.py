"""BugFix task mixtures (``MIXTURES``: the main job's ``graded`` set): task ``i`` is task ``i`` of
the family at position ``i % n`` of the mixture's cycle, each family keeps its own knobs (the line
hint), the end info names the family, and bad names fail in one line."""

from __future__ import annotations

import gymnasium
import pytest
from gymnasium.utils.env_checker import check_env

import envs
from envs.bugfix import DIFFICULTIES, make_config
from envs.bugfix.agents import make_agent
from envs.bugfix.config import MIXTURES, family_configs
from envs.bugfix.tasks import make_task
from envs.episode import run_episode

CYCLE = ("reading", "reading_unhinted", "reading")


def graded(**knobs) -> gymnasium.Env:
    return gymnasium.make(envs.BUGFIX_ID, difficulty="graded", **knobs)


def test_graded_cycles_hinted_hinted_unhinted_reading_tasks():
    assert MIXTURES["graded"] == CYCLE and all(name in DIFFICULTIES for name in CYCLE)
    configs = dict(family_configs("graded"))
    assert configs["reading"].hints and not configs["reading_unhinted"].hints
    # the unhinted family is the reading preset without the hint, nothing else
    assert configs["reading_unhinted"] == make_config("reading", hints=False)


def test_task_i_is_task_i_of_the_family_at_i_mod_3():
    env = graded(faults=False).unwrapped
    assert env.families == CYCLE
    for i in range(9):
        family = CYCLE[i % 3]
        assert env.family_of(i) == i % 3
        assert env.task_at("heldout", i) == make_task(make_config(family).task_spec, "heldout", i)
        env.reset(seed=i, options={"split": "heldout", "task_index": i})
        assert env.config == make_config(family, faults=False)


def test_only_the_hinted_family_prints_the_line_hint_and_the_end_info_names_the_family():
    env = graded(faults=False)
    for i in range(6):
        env.reset(seed=i, options={"split": "heldout", "task_index": i})
        obs, *_ = env.step("run_tests")
        assert ("hint : line" in obs) == (i % 3 != 1)
        *_, info = env.step("give_up")
        assert info["family"] == CYCLE[i % 3]


def test_the_oracle_solves_every_family_and_a_plain_difficulty_names_itself():
    env = graded(faults=False)
    for i in range(6):
        record = run_episode(env, make_agent("oracle"), seed=i, options={"split": "heldout", "task_index": i})
        assert record.infos[-1]["verified"] == 1
    plain = gymnasium.make(envs.BUGFIX_ID, difficulty="reading", faults=False)
    record = run_episode(plain, make_agent("oracle"), seed=0, options={"split": "heldout", "task_index": 0})
    assert record.infos[-1]["family"] == "reading"
    custom = gymnasium.make(envs.BUGFIX_ID, difficulty={"hints": False}, faults=False)
    record = run_episode(custom, make_agent("oracle"), seed=0, options={"split": "heldout", "task_index": 0})
    assert record.infos[-1]["family"] == "custom"


def test_knobs_apply_to_every_family_and_the_mixture_passes_gymnasiums_checker():
    env = graded(max_turns=9).unwrapped
    assert {c.max_turns for _, c in env._families} == {9}
    check_env(graded().unwrapped, skip_render_check=True)


def test_bad_names_fail_in_one_line_naming_the_value_and_the_mixtures():
    with pytest.raises(ValueError, match=r"difficulty='gradual' unknown; allowed: .*reading_unhinted, graded or a dict"):
        family_configs("gradual")
    with pytest.raises(ValueError, match=r"max_turns=0 out of range"):
        graded(max_turns=0)
