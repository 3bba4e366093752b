"""configs/experiment/tiny.yaml composes with every env, algorithm, policy and compression option:
it adds no config error of its own, and its context window is derived from the policy it shrinks.

A combination the tiny preset rejects must be rejected at full scale too (without
``experiment=tiny``): a two-agent algorithm on a one-agent env, a Hugging Face policy or a
compression strategy on PairFix, SmolLM2's env instructions on LongHorizon-v1 (which has none).
Composition and validation only (``validate`` builds each env once; no model, no run); the
combinations run at tiny scale in tests/test_readme_commands.py (``experiment=tiny env=long_horizon_v3
compression=structured_summary``) and in the compare job's ``--tiny`` tests; every compare preset
validates with the compare job's ``--tiny`` overrides (the tiny preset added to it, the smoke scale).

The window (``policy.max_len``) is 256 ids of episode after the policy's fixed first turn:
256 for the tiny policy; for SmolLM2 on BugFix 405 + 256 = 661 (its chat template and the BugFix
instructions render to 405 ids before the first observation, docs/own-model.md), and the
compression budget is 128, half of the 256, on every policy.
"""

from __future__ import annotations

import itertools

import pytest
from hydra import compose, initialize_config_dir

from experiments.runtime.config import CONFIG_DIR, first_turn_ids, register_configs, validate
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
    # what `python -m experiments.compare --preset P --tiny` runs (its baseline method): the
    # compare preset, the tiny preset added after it, the smoke scale; SmolLM2's window is
    # 405 + 256 ids (policy.max_len=256 from a fixed tiny override was too small for its first turn)
    from experiments.compare import job

    scale = {}
    for preset, experiment in job.PRESETS.items():
        with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
            cfg = compose(config_name="config", overrides=[f"experiment={experiment}", "run_dir=unused", "logger.group=g",
                                                           f"algo={job.PRESET_METHODS[preset][0]}",
                                                           *job.tiny_overrides(preset)])
        c = validate(cfg)
        scale[preset] = (c.policy.max_len, c.budget.amount, c.algo.tasks_per_update, c.eval.tasks, c.warmstart.demos)
    # single-agent presets: 16 rollouts of 2 tasks x G=4; pairfix: 8 pair episodes of 4 per update
    assert scale == {"small": (256, 16, 2, 2, 16), "bugfix": (256, 16, 2, 2, 16), "horizon": (256, 16, 2, 2, 16),
                     "pairfix": (256, 8, 4, 2, 16), "smollm2": (405 + 256, 16, 2, 2, 16)}
