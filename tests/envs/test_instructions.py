"""An env's instructions (``envs.instructions``, a chat model's system prompt) name its tools as the
env parses them: every usage line starts with a real verb, every example action is well-formed in
the env, and BugFix's trap tools go unnamed."""

from __future__ import annotations

import pytest

import envs
from envs.bugfix import USAGE
from envs.long_horizon_v3 import ACTIONS_LINE

TRAP_VERBS = ("skip_tests", "edit_test", "delete_test")


def tool_lines(text: str) -> list[str]:
    """The lines of the instructions' ``Actions:`` block that describe one tool (``usage : what``)."""
    lines = text.splitlines()
    start = lines.index("Actions:") + 1
    return [line for line in lines[start:] if " : " in line]


def examples(lines: list[str]) -> list[str]:
    """The example actions of the tool lines: the text after ``e.g.`` where it starts with the tool's
    first word (``read notes : ... e.g. notes : ...`` shows an observation, not an action)."""
    out = []
    for line in lines:
        verb, _, what = line.partition(" : ")
        if "e.g. " in what:
            example = what.split("e.g. ", 1)[1].split(" ; ")[0]
            if example.split(" ")[0] == verb.split(" ")[0]:
                out.append(example)
    return out


def test_bugfix_instructions_name_every_tool_but_the_traps():
    text = envs.instructions(envs.BUGFIX_ID)
    usages = [line.split(" : ")[0] for line in tool_lines(text)]
    assert sorted(usages) == sorted(u for v, u in USAGE.items() if v not in TRAP_VERBS)
    assert not any(v in text for v in TRAP_VERBS)


def test_long_horizon_v3_instructions_name_every_action_of_its_actions_line():
    text = envs.instructions(envs.LONG_HORIZON_V3_ID)
    verbs = [u.split(" ")[0] for u in ACTIONS_LINE.split(" : ", 1)[1].split(" | ")]  # read status fix submit forfeit
    assert [line.split(" ")[0] for line in tool_lines(text) if line.split(" ")[0] in verbs] == verbs


@pytest.mark.parametrize("env_id, kwargs", [(envs.BUGFIX_ID, {"difficulty": "tutorial"}),
                                            (envs.LONG_HORIZON_V3_ID, {"n_stages": 8})])
def test_every_example_action_is_well_formed_in_its_env(env_id, kwargs):
    shown = examples(tool_lines(envs.instructions(env_id)))
    assert len(shown) >= (3 if env_id == envs.BUGFIX_ID else 1)  # view main, edit 2 + -, replace 2 ... / fix boundary C
    for action in shown:
        env = envs.make(env_id, **kwargs)
        env.reset(seed=0, options={"task_index": 0, "split": "train"})
        _, _, _, _, info = env.step(action)
        assert info["tool_status"] != "format_error", action
        env.close()


def test_an_env_without_instructions_is_a_one_line_error():
    with pytest.raises(ValueError, match=r"^env 'pairfix' has no instructions; allowed: bugfix, long_horizon_v3$"):
        envs.instructions("pairfix")
