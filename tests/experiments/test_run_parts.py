"""The parts experiments/train.py is assembled from: the learning-rate schedule of the run loop,
RunDir (metrics log, checkpoint, resume with truncation, config hash), BehaviorPolicy (the stale
sampler) and the env check of experiments/runtime/build.py."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir

from algos.policy import PolicyModel, PolicyShape
from experiments.runtime.behavior import BehaviorPolicy
from experiments.runtime.config import check_env, register_configs, validate
from experiments.runtime.schema import ConfigError, GrpoConfig, TrainConfig
from experiments.runtime.rundir import RunDir, config_hash

CONFIGS = str(Path(__file__).resolve().parents[2] / "configs")
register_configs()


def composed(*overrides) -> TrainConfig:
    with initialize_config_dir(config_dir=CONFIGS, version_base="1.3"):
        return validate(compose(config_name="config", overrides=list(overrides)))


def test_linear_lr_schedule_uses_the_budget_spent_before_each_update(tmp_path):
    """48 rollouts at 16 per update (4 tasks x G=4) = 3 updates. The fraction spent before update
    k is 16k/48, so lr_k = 3e-4 * (1 - k/3) = 3e-4, 2e-4, 1e-4 (reading it after counting the
    update's rollouts would give 2e-4, 1e-4 and a last update at lr 0)."""
    from experiments.runtime.loop import run

    c = composed("experiment=tiny", "algo=grpo", "algo.group_size=4", "algo.tasks_per_update=4", "algo.lr=3e-4",
                 "algo.lr_schedule=linear",
                 "budget.amount=48", "policy.init_checkpoint=", "eval.every=0", "eval.tasks=1",
                 "eval.samples_per_task=1", f"run_dir={tmp_path / 'run'}")
    run(c)
    rows = RunDir(tmp_path / "run").metrics()
    assert [r["compute/rollouts"] for r in rows] == [16, 32, 48]
    assert [r["train/lr"] for r in rows] == pytest.approx([3e-4, 2e-4, 1e-4], rel=1e-12)


def test_run_dir_resume_truncates_metrics_to_the_checkpoint(tmp_path):
    rd = RunDir(tmp_path / "r")
    rd.checkpoint_path.parent.mkdir(parents=True)
    assert rd.resume() is None and rd.metrics() == []
    rd.append_metrics({"update": 1, "x": float("nan")})
    rd.save_checkpoint({"update": 1})
    rd.append_metrics({"update": 2})  # written, then the process died before its checkpoint
    with open(rd.metrics_path, "a") as fh:
        fh.write('{"update": 3, "half a li')  # ... or in the middle of a line
    state = rd.resume()
    assert state["update"] == 1
    assert rd.metrics() == [{"update": 1, "x": None}]  # NaN is written as null
    assert state["metrics_bytes"] == len(json.dumps({"update": 1, "x": None})) + 1


def test_config_hash_ignores_operational_fields_only():
    c = TrainConfig(algo=GrpoConfig())
    h = config_hash(c)
    same = replace(c, run_dir="elsewhere", runs_root="x", resume=False, threads=4, progress=False,
                   logger=replace(c.logger, kind="wandb", group="g"),
                   warmstart=replace(c.warmstart, cache_dir="/tmp/other"))
    assert config_hash(same) == h
    assert config_hash(replace(c, seed=1)) != h
    assert config_hash(replace(c, algo=replace(c.algo, lr=1e-3))) != h
    assert config_hash(replace(c, warmstart=replace(c.warmstart, noise=0.5))) != h


def _model(seed: int) -> PolicyModel:
    torch.manual_seed(seed)
    return PolicyModel(PolicyShape(vocab_size=20, d_model=8, n_layers=1, n_heads=2, max_len=16))


def _first_weight(m) -> torch.Tensor:
    return next(iter(m.state_dict().values())).clone()


@pytest.mark.parametrize("staleness", [0, 1, 2])
def test_behavior_policy_samples_with_the_policy_k_updates_old(staleness):
    policy = _model(0)
    behavior = BehaviorPolicy(policy, staleness)
    weights, versions = [_first_weight(policy)], []
    for update in range(5):
        model, version = behavior.sampler()
        versions.append(version)
        assert version == max(0, update - staleness)
        assert torch.equal(_first_weight(model), weights[version])  # the weights of that version
        assert (model is policy) == (staleness == 0)
        with torch.no_grad():
            next(iter(policy.parameters())).add_(1.0)  # "an update"
        behavior.push(policy)
        weights.append(_first_weight(policy))
    assert versions == [max(0, u - staleness) for u in range(5)]
    # resume: a fresh BehaviorPolicy loaded from the state samples with the same weights
    again = BehaviorPolicy(_model(1), staleness)
    again.load_state_dict(behavior.state_dict())
    m2, v2 = again.sampler()
    assert v2 == 5 - staleness if staleness else v2 == 5
    if staleness:
        assert torch.equal(_first_weight(m2), weights[v2])
    with pytest.raises(ValueError, match="staleness=-1 must be >= 0"):
        BehaviorPolicy(policy, -1)


# the config field, the env id, then the env's own one-line message (its wording is the env's)
@pytest.mark.parametrize("change, pattern", [
    (lambda c: c.env.kwargs.update(difficulty="insane"),
     r"env\.kwargs of env agentrl/BugFix-v\d+: .*'insane'.*allowed: .*easy, medium, hard, extreme"),
    (lambda c: c.eval.env_kwargs.update(difficulty="insane"), r"eval\.env_kwargs of env agentrl/BugFix-v\d+: .*'insane'"),
    (lambda c: (setattr(c.compression, "strategy", "recent"), setattr(c.compression, "keep_last", -3)),
     r"compression of env agentrl/BugFix-v\d+: keep_last must be an int >= 1"),
])
def test_env_kwargs_are_checked_by_building_the_env(change, pattern):
    import re

    c = TrainConfig(algo=GrpoConfig())
    check_env(c)  # the defaults build
    change(c)
    with pytest.raises(ConfigError) as err:
        validate(c)  # a mutated object is rebuilt, so its __post_init__ checks run again
    assert re.match(pattern, str(err.value)) and "\n" not in str(err.value), str(err.value)


def test_validate_reruns_field_checks_on_a_mutated_object():
    c = TrainConfig(algo=GrpoConfig())
    c.algo.group_size = 1
    with pytest.raises(ConfigError, match="algo.group_size=1 is invalid for GRPO"):
        validate(c)


def test_build_kwargs_and_requests_are_functions_of_the_config():
    from experiments.runtime.build import (compression_key, compression_settings, env_kwargs, policy_shape, rollouts_per_update,
                                           update_requests)

    c = TrainConfig(algo=GrpoConfig(group_size=4, tasks_per_update=3))
    c.env.kwargs = {"difficulty": "easy"}
    c.eval.env_kwargs = {"timeout_prob": 0.1}
    assert env_kwargs(c) == {"difficulty": "easy"}
    assert env_kwargs(c, evaluation=True) == {"difficulty": "easy", "timeout_prob": 0.1}
    assert compression_settings(c) is None and compression_key(c) is None  # strategy none: no wrapper
    c.compression.strategy = "recent"
    assert compression_settings(c) is c.compression  # the wrapper reads the config group itself
    # the cache keys' form: every field but an unset every_turns
    assert compression_key(c) == {"strategy": "recent", "trigger": "tokens", "budget_tokens": 256, "budget_fraction": 0.8,
                                  "keep_last": 2, "max_compactions": 8, "drop_prob": 0.0}
    c.compression.trigger, c.compression.every_turns = "turns", 3
    assert compression_key(c)["every_turns"] == 3
    assert policy_shape(c, critic="head").critic == "head" and policy_shape(c).d_model == c.policy.d_model
    assert rollouts_per_update(c) == 12  # 3 tasks x G=4
    reqs = update_requests(c, 5)
    assert len(reqs) == 12 and [r.group_id for r in reqs] == [0] * 4 + [1] * 4 + [2] * 4
    again = update_requests(c, 5)
    assert [(r.seed, r.options) for r in reqs] == [(r.seed, r.options) for r in again]  # resume draws the same
    assert [r.seed for r in update_requests(c, 6)] != [r.seed for r in reqs]
    assert all(0 <= r.options["task_index"] < c.env.train_tasks and r.options["split"] == "train" for r in reqs)
