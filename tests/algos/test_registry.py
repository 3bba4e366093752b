"""The trainer registry carries each method's traits and config schema; a trainer's name is
written once, in its registration.

Traits (critic, agents, step rewards, compression, central critic) and the config schema (``config=``, a
dataclass next to the trainer) are declared once, at ``@register``; the config checks and the Hydra
``algo`` group (``experiments.runtime.schema`` / ``config``), the compare job and the report read
them through ``trainer_traits`` / ``trainers_with`` / ``config_schemas``. Two source scans: one
fails when a production module compares ``algo.name`` (or any value) with a trainer-name literal
(such a branch is a trait the registration should carry); one fails when a trainer-name string
literal appears in production code outside its ``register(...)`` call (a name table, a schema's
``name`` default), but in the listed exceptions.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from hydra.core.config_store import ConfigStore
from omegaconf import OmegaConf

from algos.configs import AlgoConfig, ConfigError, algo_schema
from algos.ppo import PpoConfig
from algos.registry import (
    CONFIGS,
    TrainerTraits,
    config_name,
    config_schemas,
    load_builtin_trainers,
    register,
    trainer_traits,
    trainers_with,
    unregister,
)
from experiments.compare.job import compare_methods
from experiments.report.keys import METHODS_WITH_CRITIC
from experiments.report.pair import PAIR_METHODS
from experiments.runtime.config import register_configs
from experiments.runtime.schema import ALGO_SCHEMAS, CRITIC_ALGOS, PAIR_ALGOS, method_envs

ROOT = Path(__file__).resolve().parents[2]
PRODUCTION = ("algos", "envs", "experiments")
#: production files outside the packages, scanned with them
PRODUCTION_FILES = ("rl_checks.py",)
#: production paths (prefixes, relative to the repository) where a trainer-name literal may
#: appear outside ``register(...)``, and why
NAME_LITERAL_EXCEPTIONS = {
    # each claim (docs/claims.md) is a measurement about named methods (C19/C20: GRPO vs PPO; C24:
    # grpo vs grpo_process; the multi-agent claims: ppo_independent / ppo_ctde): the method is the
    # claim's subject, chosen as a user chooses ``algo=<name>``, not a dispatch on the name
    "experiments/claims/": "a claim names the methods it measures",
}


def test_builtin_traits_are_the_registered_ones():
    load_builtin_trainers()
    assert trainers_with(critic=True, agents=1) == ("ppo", "ppo_segment_terminal", "ppo_long")
    assert trainers_with(agents=2) == ("ppo_independent", "ppo_ctde")
    assert trainers_with(step_rewards=True) == ("grpo_process",)
    assert trainers_with(central_critic=True) == ("ppo_ctde",)
    assert trainers_with(compression=True) == ("ppo_segment_terminal",)
    # the envs come from the env specs: agents, and step rewards paid (BugFix's step_reward_modes)
    assert method_envs(trainer_traits("grpo_process")) == ("bugfix",)
    assert method_envs(trainer_traits("ppo_ctde")) == ("pairfix",)
    assert method_envs(trainer_traits("ppo_segment_terminal")) == ("bugfix", "long_horizon", "long_horizon_v3")
    assert trainer_traits("grpo") == TrainerTraits()


def test_every_name_list_is_read_from_the_registry():
    assert set(CRITIC_ALGOS) == set(METHODS_WITH_CRITIC) == set(trainers_with(critic=True, agents=1))
    assert set(PAIR_ALGOS) == set(PAIR_METHODS) == set(trainers_with(agents=2))
    assert list(compare_methods()) == list(load_builtin_trainers())


@pytest.mark.parametrize("first", ["algos.ppo_ctde", "algos.ppo", "experiments.runtime.schema"])
def test_the_trainer_order_does_not_depend_on_what_a_process_imports_first(first):
    code = f"import {first}; from algos.registry import load_builtin_trainers; print(','.join(load_builtin_trainers()))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True).stdout
    assert out.strip() == "grpo,ppo,ppo_segment_terminal,ppo_long,rloo,gigpo,grpo_process,ppo_independent,ppo_ctde,grouped_value"


def test_a_new_registration_carries_its_traits_everywhere():
    @register("test_only_critic_method", critic=True)
    class _Method:
        pass

    try:
        assert trainer_traits("test_only_critic_method") == TrainerTraits(critic=True)
        assert "test_only_critic_method" in trainers_with(critic=True, agents=1)
        assert method_envs(compare_methods()["test_only_critic_method"]) == ("bugfix", "long_horizon", "long_horizon_v3")
    finally:
        unregister("test_only_critic_method")


@pytest.mark.parametrize("kwargs, message", [
    ({"agents": 3}, "agents=3 is not a valid trainer trait; allowed: 1, 2"),
    ({"compression": True, "agents": 2}, "compression=True needs agents=1"),
    ({"central_critic": True}, "central_critic=True needs critic=True and agents=2"),
])
def test_bad_traits_are_one_line_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        register("test_only_bad", **kwargs)


def test_every_trainer_registers_its_config_schema_and_hydra_stores_it():
    register_configs()
    store = ConfigStore.instance()
    for name in load_builtin_trainers():
        assert name in CONFIGS, f"trainer {name!r} has no config schema (register it with config=<Schema>)"
        schema = CONFIGS[name]
        assert issubclass(schema, AlgoConfig) and config_name(schema) == name and algo_schema(name) is schema
        assert schema().name == name and type(AlgoConfig(name=name)) is schema
        node = store.load(f"algo/{name}_schema.yaml").node
        assert OmegaConf.get_type(node) is schema and node.name == name
    assert ALGO_SCHEMAS == config_schemas() and list(ALGO_SCHEMAS) == list(load_builtin_trainers())
    assert len(set(ALGO_SCHEMAS.values())) == len(ALGO_SCHEMAS)  # one schema class per trainer name


def test_a_new_registration_carries_its_config_schema():
    @dataclass
    class _Schema(PpoConfig):
        pass

    @register("test_only_schema_method", critic=True, config=_Schema)
    class _Method:
        pass

    try:
        assert _Schema().name == "test_only_schema_method"  # the name is the registration's
        assert type(AlgoConfig(name="test_only_schema_method", lam=0.9)) is _Schema
        assert config_schemas()["test_only_schema_method"] is _Schema
        with pytest.raises(ConfigError, match="algo.name='ppo' does not match its schema _Schema"):
            _Schema(name="ppo")
    finally:
        unregister("test_only_schema_method")
    with pytest.raises(ConfigError, match="_Schema is registered with no trainer"):
        _Schema()


def test_a_config_schema_names_one_trainer():
    with pytest.raises(ValueError, match="config=PpoConfig is already registered with trainer 'ppo'"):
        register("test_only_second_name", config=PpoConfig)
    with pytest.raises(ValueError, match="is not a dataclass with a name field"):
        register("test_only_bad_config", config=dict)


def test_unknown_trainer_names_the_registered_ones():
    with pytest.raises(ValueError, match="algo 'nope' unknown; allowed: .*gigpo.*ppo_ctde"):
        trainer_traits("nope")


def name_branches(source: str, names: set[str]) -> list[int]:
    """Line numbers of comparisons (``==``, ``!=``, ``in``, ``not in``) with a literal in ``names``
    on either side, or with a tuple / list / set literal holding one."""

    def literal_names(node) -> bool:
        if isinstance(node, ast.Constant):
            return node.value in names
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return any(isinstance(e, ast.Constant) and e.value in names for e in node.elts)
        return False

    hits = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare) and any(isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn))
                                                 for op in node.ops):
            if any(literal_names(x) for x in (node.left, *node.comparators)):
                hits.append(node.lineno)
    return hits


def test_name_branch_scan_finds_planted_branches():
    names = {"ppo", "grpo"}
    assert name_branches("if c.algo.name == 'ppo':\n    pass\n", names) == [1]
    assert name_branches("x = 1\ny = a in ('grpo', 'rloo')\n", names) == [2]
    assert name_branches("z = 'ppo' != m\n", names) == [1]
    assert name_branches("for m in ('grpo', 'ppo'):\n    run(m)\nk = m == 'other'\n", names) == []


def test_no_production_module_branches_on_a_trainer_name():
    names = set(load_builtin_trainers())
    found = []
    for package in PRODUCTION:
        for path in sorted((ROOT / package).rglob("*.py")):
            found += [f"{path.relative_to(ROOT)}:{line}" for line in name_branches(path.read_text(), names)]
    assert found == [], f"branch on a trainer name (make it a trait of algos.registry.register): {found}"


def name_literals(source: str, names: set[str]) -> list[int]:
    """Line numbers of string literals in ``names`` other than the first argument of a
    ``register(...)`` / ``<module>.register(...)`` call."""
    tree = ast.parse(source)
    registrations = {id(node.args[0]) for node in ast.walk(tree)
                     if isinstance(node, ast.Call) and node.args
                     and getattr(node.func, "id", getattr(node.func, "attr", None)) == "register"}
    return sorted(node.lineno for node in ast.walk(tree)
                  if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names
                  and id(node) not in registrations)


def test_name_literal_scan_finds_planted_literals():
    names = {"ppo", "grpo"}
    assert name_literals("@register('ppo', critic=True)\nclass P:\n    pass\n", names) == []
    assert name_literals("@registry.register('grpo')\ndef f():\n    pass\n", names) == []
    assert name_literals("class C:\n    name: str = 'grpo'\n", names) == [2]
    assert name_literals("DEFAULT = ('grpo', 'ppo')\n", names) == [1, 1]
    assert name_literals("make_trainer('ppo', algo)\nx = f'{a}ppo'\n", names) == [1, 2]  # an f-string's piece too
    assert name_literals("register(name, config='ppo')\n", names) == [1]


def production_files() -> list[Path]:
    """Every ``.py`` file of the production packages, and the production files at the top level."""
    return [*(p for package in PRODUCTION for p in sorted((ROOT / package).rglob("*.py"))),
            *(ROOT / f for f in PRODUCTION_FILES)]


def test_a_trainer_name_is_written_only_in_its_registration():
    names = set(load_builtin_trainers())
    found, used = [], set()
    for path in production_files():
        rel = path.relative_to(ROOT).as_posix()
        lines = name_literals(path.read_text(), names)
        exception = next((prefix for prefix in NAME_LITERAL_EXCEPTIONS if rel.startswith(prefix)), None)
        if exception is None:
            found += [f"{rel}:{line}" for line in lines]
        elif lines:
            used.add(exception)
    assert found == [], (f"trainer-name literal outside its register(...) call (read the registry: "
                         f"load_builtin_trainers / trainers_with / config_schemas): {found}")
    assert used == set(NAME_LITERAL_EXCEPTIONS), f"exceptions no file needs any more: {set(NAME_LITERAL_EXCEPTIONS) - used}"
