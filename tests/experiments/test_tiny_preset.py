"""configs/experiment/tiny.yaml composes with every env, algorithm, policy and compression option:
it adds no config error of its own, and its context window is derived from the policy it shrinks.

A combination the tiny preset rejects must be rejected at full scale too (without
``experiment=tiny``): a two-agent algorithm on a one-agent env, a Hugging Face policy or a
compression strategy on PairFix, SmolLM2's env instructions on LongHorizon-v1 (which has none).
Composition and validation only (``validate`` builds each env once; no model, no run); the
combinations run at tiny scale in tests/test_readme_commands.py (``experiment=tiny env=long_horizon_v3
compression=structured_summary``) and in the compare job's ``--tiny`` tests; every compare preset
validates with the tiny preset added to it (the compare job's ``--tiny``).

The window (``policy.max_len``) is 256 ids of episode after the policy's fixed first turn:
256 for the tiny policy; for SmolLM2 on BugFix 405 + 256 = 661 (its chat template and the BugFix
instructions render to 405 ids before the first observation, docs/own-model.md), and the
compression budget is 128, half of the 256, on every policy. The batch is derived from the env's
agents: 8 agent trajectories per update (2 tasks x G=4 for every method on a one-agent env, 4 pair
episodes at G=1 on a two-agent env), one env per rollout of an update, a budget of 2 updates.
"""

from __future__ import annotations

import itertools

import pytest
from hydra import compose, initialize_config_dir

from experiments.runtime.config import (CONFIG_DIR, agents_of, first_turn_ids, group_size_for, register_configs,
                                        rollouts_for, tasks_for, validate)
from experiments.runtime.schema import ConfigError

register_configs()
ENVS = tuple(sorted(p.stem for p in (CONFIG_DIR / "env").glob("*.yaml")))
ALGOS = tuple(sorted(p.stem for p in (CONFIG_DIR / "algo").glob("*.yaml")))
COMPRESSIONS = tuple(sorted(p.stem for p in (CONFIG_DIR / "compression").glob("*.yaml")))
#: every policy option; ``hf`` (a path of its own) on the tiny test model, ``smollm2`` on the cached model
POLICIES = tuple(sorted(p.stem for p in (CONFIG_DIR / "policy").glob("*.yaml")))


def checked(overrides) -> str | None:
    """None when ``overrides`` compose and validate, else the one-line ``ConfigError``."""
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose(config_name="config", overrides=list(overrides))
    try:
        validate(cfg)
    except ConfigError as e:
        return str(e)
    return None


def tiny_adds_no_error(combos) -> dict:
    """The combinations (override lists) the tiny preset rejects although the full-scale config
    validates: ``{combination: the tiny preset's error}`` (empty when tiny composes with all)."""
    bad = {}
    for combo in combos:
        error = checked(["experiment=tiny", *combo])
        if error is not None and checked(combo) is None:
            bad[" ".join(combo)] = error
    return bad


@pytest.fixture(scope="module")
def policy_overrides(hf_model_dir, smollm2_dir):
    """policy option -> its overrides (``hf`` needs a model directory: the tiny test model)."""
    return {p: [f"policy={p}", *([f"policy.path={hf_model_dir}"] if p == "hf" else [])] for p in POLICIES}


def test_the_options_were_found():
    assert {"bugfix", "long_horizon_v3", "pairfix"} <= set(ENVS) and {"grpo", "ppo", "ppo_ctde"} <= set(ALGOS)
    assert {"none", "structured_summary"} <= set(COMPRESSIONS) and {"tiny", "hf", "smollm2"} <= set(POLICIES)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # LongHorizon-v1's gymnasium notice
def test_every_env_policy_and_compression(policy_overrides):
    # the window's inputs: the env (a Hugging Face policy's instructions), the policy (its first
    # turn), the compression budget; with each env's first algorithm of its agent count. SmolLM2
    # (seconds per validation: its tokenizer and LoRA targets) with no compression and with one
    # strategy: the strategies share one budget check
    combos = [[f"env={e}", *policy_overrides[p], f"compression={c}", "algo=ppo_ctde" if e == "pairfix" else "algo=grpo"]
              for e, p, c in itertools.product(ENVS, POLICIES, COMPRESSIONS)
              if p != "smollm2" or c in ("none", "structured_summary")]
    assert tiny_adds_no_error(combos) == {}


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_every_env_and_algorithm():
    # an algorithm's own knobs against the tiny sizes (group size, tasks per update, critic) on every env
    assert tiny_adds_no_error([[f"env={e}", f"algo={a}"] for e, a in itertools.product(ENVS, ALGOS)]) == {}


def test_the_window_is_256_ids_after_the_policys_first_turn(smollm2_dir):
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        tiny, lh3, smol = (validate(compose(config_name="config", overrides=["experiment=tiny", *o]))
                           for o in ([], ["env=long_horizon_v3", "compression=structured_summary"],
                                     ["policy=smollm2", "compression=structured_summary"]))
    assert (tiny.policy.max_len, tiny.compression.budget_tokens) == (256, 128)
    assert (lh3.policy.max_len, lh3.compression.budget_tokens) == (256, 128)  # the README's long-horizon command
    # SmolLM2 on BugFix: 405 ids of chat template and instructions, then the same 256 and budget
    assert (smol.policy.max_len, smol.compression.budget_tokens) == (405 + 256, 128)
    assert first_turn_ids(str(smollm2_dir), None, None) < 405  # the instructions are part of the 405


def test_the_window_of_a_policy_whose_model_does_not_load_is_left_to_check_policy(tmp_path):
    # a model directory without a tokenizer: the window falls back to 256 and check_policy names the path
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(ConfigError, match=rf"^policy.path='{tmp_path}' \(end_token=''\): "):
        with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
            validate(compose(config_name="config", overrides=["experiment=tiny", "policy=hf", f"policy.path={tmp_path}"]))


@pytest.mark.filterwarnings("ignore:\\s*'hydra/launcher/\\w+' is validated against ConfigStore:UserWarning")
def test_every_compare_preset_validates_at_tiny_scale(smollm2_dir):
    # what `python -m experiments.compare --preset P --tiny` runs (every method of the preset): the
    # compare preset, the tiny preset added after it; SmolLM2's window is 405 + 256 ids
    from experiments.compare import job

    scale = {}
    for preset, experiment in job.PRESETS.items():
        for method in job.PRESET_METHODS[preset]:
            with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
                cfg = compose(config_name="config", overrides=[f"experiment={experiment}", "run_dir=unused",
                                                               "logger.group=g", f"algo={method}", job.TINY_PRESET])
            c = validate(cfg)
            scale.setdefault(preset, set()).add(
                (c.policy.max_len, c.budget.amount, c.algo.tasks_per_update, c.algo.group_size, c.rollout.num_envs,
                 c.eval.every, c.eval.tasks, c.warmstart.demos, c.warmstart.epochs, c.warmstart.processes))
    # one scale per preset, whatever the method's default group size (GRPO 8, PPO 1): one-agent
    # presets 2 updates of 2 tasks x G=4 = 16 rollouts, 8 envs; pairfix 2 updates of 4 pair
    # episodes at G=1 = 8, 4 envs; every one evaluates after each update on 2 tasks, from a
    # 16-demo warm start of 1 epoch in 1 process
    one = (256, 16, 2, 4, 8, 1, 2, 16, 1, 1)
    assert scale == {"small": {one}, "bugfix": {one}, "horizon": {one}, "pairfix": {(256, 8, 4, 1, 4, 1, 2, 16, 1, 1)},
                     "smollm2": {(405 + 256, *one[1:])}}


def test_the_batch_is_derived_from_the_envs_agents():
    assert [agents_of(n) for n in ("bugfix", "long_horizon", "long_horizon_v3", "pairfix")] == [1, 1, 1, 2]
    assert agents_of("agentrl/PairFix-v2") == 2 and agents_of("custom") == 1  # an unknown env: check_env's error
    assert (group_size_for(4, "bugfix"), group_size_for(4, "pairfix")) == (4, 1)
    # 8 trajectories: 8 // (1 x 4) = 2 tasks, 8 // (2 x 1) = 4 pair episodes, 8 // (1 x 8) = 1, 8 // (1 x 16) -> 1
    assert [tasks_for(8, e, g) for e, g in (("bugfix", 4), ("pairfix", 1), ("bugfix", 8), ("bugfix", 16))] == [2, 4, 1, 1]
    assert (rollouts_for(1, 2, 4), rollouts_for(2, 2, 4), rollouts_for(2, 4, 1)) == (8, 16, 8)


def test_overrides_after_the_tiny_preset_win_and_the_derived_sizes_follow_them():
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        c, g8, t8 = (validate(compose(config_name="config", overrides=["experiment=tiny", "algo=ppo", *o]))
                     for o in (["budget.amount=40"], ["algo.group_size=8"], ["algo.group_size=1", "algo.tasks_per_update=8"]))
    assert (c.budget.amount, c.algo.group_size, c.algo.tasks_per_update) == (40, 4, 2)
    # G=8: 8 // 8 = 1 task per update, 8 envs, 2 updates = 16 rollouts
    assert (g8.algo.tasks_per_update, g8.rollout.num_envs, g8.budget.amount) == (1, 8, 16)
    # 8 tasks x G=1: 8 envs, 2 updates = 16 rollouts
    assert (t8.rollout.num_envs, t8.budget.amount) == (8, 16)
