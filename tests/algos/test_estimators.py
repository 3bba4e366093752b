"""The group methods are registered estimators run by one trainer per kind.

Every name whose trainer is the group trainer (``algos.group.GroupTrainer``) or the step trainer
(``algos.steps.StepTrainer``) resolves to a registered estimator of that trainer's kind, the
estimator table and the trainer registry name the same methods, and a new outcome method is one
function plus one registration. The decision-point layout lives in ``algos.decisions``: no module
under ``algos/`` but the two-agent PPO imports ``algos.ppo`` (an ``ast`` scan).
"""

from __future__ import annotations

import ast
import copy
import inspect
from pathlib import Path

import pytest
import torch

from algos.group import GroupTrainer
from algos.policy import PolicyModel, PolicyShape
from algos.registry import (
    ESTIMATOR_KINDS,
    ESTIMATORS,
    TRAINERS,
    TrainerTraits,
    estimator,
    load_builtin_trainers,
    make_trainer,
    register,
    trainer_traits,
    unregister,
)
from algos.steps import StepTrainer
from algos.trainer import Trainer
from experiments.runtime.schema import AlgoConfig
from synthetic_trajectories import make_traj

ROOT = Path(__file__).resolve().parents[2]
#: positional parameters of each kind's estimator function
KIND_PARAMETERS = {"outcome": ("rewards", "groups", "algo"), "step": ("steps", "algo")}


def model():
    torch.manual_seed(0)
    return PolicyModel(PolicyShape(vocab_size=50, d_model=16, n_layers=1, n_heads=2, max_len=256))


def group_method_names() -> set[str]:
    return {n for n, cls in load_builtin_trainers().items() if issubclass(cls, GroupTrainer)}


def test_every_group_and_step_method_resolves_to_a_registered_estimator_of_its_kind():
    names = group_method_names()
    assert names == {"grpo", "rloo", "gigpo", "grpo_process", "grouped_value"}
    for name in names:
        cls = TRAINERS[name]
        assert cls in (GroupTrainer, StepTrainer)  # one trainer per kind, no subclass per method
        spec = ESTIMATORS[name]
        assert spec.name == name and spec.kind == cls.estimator_kind and estimator(name, spec.kind) is spec
        params = tuple(inspect.signature(spec.fn).parameters)
        assert params == KIND_PARAMETERS[spec.kind], (name, params)
    assert set(KIND_PARAMETERS) == set(ESTIMATOR_KINDS)


def test_the_estimator_table_and_the_trainer_registry_agree():
    load_builtin_trainers()
    assert set(ESTIMATORS) == group_method_names()  # no estimator without a trainer name, and vice versa
    assert all(TRAINERS[n].estimator_kind == s.kind for n, s in ESTIMATORS.items())
    assert not any(issubclass(cls, GroupTrainer) for n, cls in TRAINERS.items() if n not in ESTIMATORS)


def test_make_trainer_runs_the_registered_name_and_a_kind_mismatch_is_an_error():
    trainer = make_trainer("rloo", AlgoConfig(name="rloo", off_policy_correction="none"), model())
    assert trainer.estimator is ESTIMATORS["rloo"]
    with pytest.raises(ValueError, match=r"algo 'gigpo' has no outcome estimator; allowed: grpo, rloo$"):
        GroupTrainer(AlgoConfig(name="gigpo"), model())
    with pytest.raises(ValueError, match=r"algo 'rloo' has no step estimator; allowed: gigpo, grouped_value, grpo_process$"):
        StepTrainer(AlgoConfig(name="rloo"), model())


def test_a_new_outcome_method_is_one_function_and_one_registration():
    """Mean baseline without a std: registered once, built by make_trainer, its advantages on
    every token of each trajectory; an estimator registration needs a trainer that runs a kind."""

    @register("test_only_mean_baseline", trainer=GroupTrainer)
    def mean_baseline(rewards, groups, algo):
        means = torch.zeros(int(groups.max()) + 1).index_add_(0, groups, rewards)
        counts = torch.zeros_like(means).index_add_(0, groups, torch.ones_like(rewards))
        return rewards - (means / counts)[groups]

    try:
        assert trainer_traits("test_only_mean_baseline") == TrainerTraits()
        algo = AlgoConfig(name="grpo", off_policy_correction="none", lr=1e-2)
        trainer = make_trainer("test_only_mean_baseline", algo, model())
        assert type(trainer) is GroupTrainer and trainer.estimator.fn is mean_baseline
        trajs = [make_traj([2], 1.0, seed=1), make_traj([1, 1], 0.0, seed=2)]
        record = trainer.update_record(copy.deepcopy(trajs))
        assert record.advantages.per_trajectory.tolist() == [0.5, -0.5]
    finally:
        unregister("test_only_mean_baseline")
    assert "test_only_mean_baseline" not in ESTIMATORS and "test_only_mean_baseline" not in TRAINERS
    with pytest.raises(ValueError, match="runs no estimator kind"):
        register("test_only_bad_estimator", trainer=Trainer)
    with pytest.raises(ValueError, match="trainer 'grpo' is already registered"):
        register("grpo", trainer=GroupTrainer)(lambda rewards, groups, algo: rewards)


def imports_of(source: str, module: str) -> set[str]:
    """Absolute names of the modules ``source`` (the file of ``module``) imports, anywhere in it:
    ``import a.b`` -> ``a.b``; ``from a import b`` -> ``a`` and ``a.b``; relative imports resolved."""
    package = module.rsplit(".", 1)[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - (node.level - 1)] + ([base] if base else []))
            out.add(base)
            out.update(f"{base}.{a.name}" for a in node.names)
    return out


def test_import_scan_finds_planted_imports():
    assert "algos.ppo" in imports_of("from algos.ppo import PPOTrainer\n", "algos.x")
    assert "algos.ppo" in imports_of("import algos.ppo\n", "algos.x")
    assert "algos.ppo" in imports_of("from algos import ppo\n", "algos.x")
    assert "algos.ppo" in imports_of("def f():\n    from .ppo import gae_layout\n", "algos.x")
    assert "algos.ppo" not in imports_of("from algos.ppo_ctde import PairLearner\n", "algos.x")


def test_no_algos_module_but_the_two_agent_ppo_imports_algos_ppo():
    allowed = {"algos.ppo", "algos.ppo_ctde"}
    found = []
    for path in sorted((ROOT / "algos").rglob("*.py")):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        if module not in allowed and "algos.ppo" in imports_of(path.read_text(), module):
            found.append(module)
    assert found == [], f"import the decision points from algos.decisions, not algos.ppo: {found}"
