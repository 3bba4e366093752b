"""Both envs parse reset options through one function, so they accept and reject the same dicts."""

import pytest

import envs
from envs.task_options import parse_reset_options


def test_parse_reset_options_values_and_errors():
    assert parse_reset_options(None) == ("train", None)
    assert parse_reset_options({"split": "heldout", "task_index": 3}) == ("heldout", 3)
    with pytest.raises(ValueError, match=r"unknown reset option\(s\) \['task'\]; allowed: task_index, split"):
        parse_reset_options({"task": 1})
    with pytest.raises(ValueError, match="unknown split 'test'; allowed: train, heldout"):
        parse_reset_options({"split": "test"})
    with pytest.raises(ValueError, match="task_index must be an int, got True"):
        parse_reset_options({"task_index": True})


@pytest.mark.parametrize("env_id", envs.ENV_IDS)
@pytest.mark.parametrize("bad", [{"task": 1}, {"split": "test"}, {"task_index": "3"}])
def test_every_env_rejects_the_same_bad_options(env_id, bad):
    env = envs.make(env_id)
    with pytest.raises(ValueError) as err:
        env.reset(seed=0, options=bad)
    with pytest.raises(ValueError) as expected:
        parse_reset_options(bad)
    assert str(err.value) == str(expected.value)
