"""Config composition (Hydra structured configs) and fail-fast validation."""

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from experiments.config import ConfigError, register_configs, validate

CONFIGS = str(Path(__file__).resolve().parents[2] / "configs")
register_configs()


def cfg(*overrides):
    with initialize_config_dir(config_dir=CONFIGS, version_base="1.3"):
        return compose(config_name="config", overrides=list(overrides))


@pytest.mark.parametrize("algo", ["grpo", "ppo"])
@pytest.mark.parametrize("env", ["bugfix", "long_horizon"])
def test_defaults_compose_and_validate(algo, env):
    c = validate(cfg(f"algo={algo}", f"env={env}"))
    assert c.algo.name == algo and c.env.name == env
    assert c.algo.group_size == (8 if algo == "grpo" else 1)


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["algo=grpo", "algo.group_size=1"],
         "algo.group_size=1 is invalid for GRPO: group-relative advantages need at least 2 rollouts per task (use algo=ppo for G=1)"),
        (["algo=ppo", "policy.critic=none"], "algo=ppo needs a critic"),
        (["algo.loss_agg=mean"], "algo.loss_agg='mean' is not a valid choice; allowed: token-mean, seq-mean-token-mean"),
        (["algo.std=bessel"], "allowed: population, sample, none"),
        (["budget.kind=episodes"], "budget.kind='episodes' is not a valid choice; allowed: rollouts"),
        (["compression.strategy=zip"], "compression.strategy='zip' is not a valid choice"),
        (["algo=ppo", "algo.dynamic_sampling=true"], "GRPO-only"),
        (["rollout.staleness=-1"], "rollout.staleness=-1 must be >= 0"),
        (["policy.n_heads=3"], "divisible"),
        (["algo.kl_kind=k9"], "allowed: k1, k2, k3"),
        (["algo.lr_schedule=cosine"], "algo.lr_schedule='cosine' is not a valid choice; allowed: constant, linear"),
        (["compression=recent", "compression.budget_tokens=500"], "leaves no room in policy.max_len=512"),
    ],
)
def test_bad_configs_fail_with_one_line(overrides, message):
    with pytest.raises(ConfigError) as err:
        validate(cfg(*overrides))
    text = str(err.value)
    assert message in text and "\n" not in text


def test_unknown_key_and_wrong_type_fail():
    with pytest.raises(Exception):
        cfg("algo.grup_size=8")  # not in the schema
    with pytest.raises(Exception):
        cfg("algo.group_size=eight")
