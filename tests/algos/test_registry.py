"""The trainer registry carries each method's traits; no other module branches on a trainer name.

Traits (critic, agents, step rewards, envs, central critic) are declared once, at ``@register``;
the config checks (``experiments.runtime.schema``), the compare job and the report read them
through ``trainer_traits`` / ``trainers_with``. The source scan below fails when a production
module compares ``algo.name`` (or any value) with a trainer-name literal: such a branch is a trait
the registration should carry.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from algos.registry import TrainerTraits, load_builtin_trainers, register, trainer_traits, trainers_with, unregister
from experiments.compare.job import compare_methods
from experiments.report.keys import METHODS_WITH_CRITIC
from experiments.report.pair import PAIR_METHODS
from experiments.runtime.schema import CRITIC_ALGOS, PAIR_ALGOS

ROOT = Path(__file__).resolve().parents[2]
PRODUCTION = ("algos", "envs", "experiments")


def test_builtin_traits_are_the_registered_ones():
    load_builtin_trainers()
    assert trainers_with(critic=True, agents=1) == ("ppo", "ppo_segment_terminal", "ppo_long")
    assert trainers_with(agents=2) == ("ppo_independent", "ppo_ctde")
    assert trainers_with(step_rewards=True) == ("grpo_process",)
    assert trainers_with(central_critic=True) == ("ppo_ctde",)
    assert trainer_traits("grpo_process").envs == ("bugfix",)
    assert trainer_traits("ppo_ctde").envs == ("pairfix",)
    assert trainer_traits("grpo") == TrainerTraits()


def test_every_name_list_is_read_from_the_registry():
    assert set(CRITIC_ALGOS) == set(METHODS_WITH_CRITIC) == set(trainers_with(critic=True, agents=1))
    assert set(PAIR_ALGOS) == set(PAIR_METHODS) == set(trainers_with(agents=2))
    assert list(compare_methods()) == list(load_builtin_trainers())


@pytest.mark.parametrize("first", ["algos.ppo_ctde", "algos.ppo", "experiments.runtime.schema"])
def test_the_trainer_order_does_not_depend_on_what_a_process_imports_first(first):
    code = f"import {first}; from algos.registry import load_builtin_trainers; print(','.join(load_builtin_trainers()))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True).stdout
    assert out.strip() == "grpo,ppo,ppo_segment_terminal,ppo_long,rloo,gigpo,grpo_process,ppo_independent,ppo_ctde"


def test_a_new_registration_carries_its_traits_everywhere():
    @register("test_only_critic_method", critic=True)
    class _Method:
        pass

    try:
        assert trainer_traits("test_only_critic_method") == TrainerTraits(critic=True)
        assert "test_only_critic_method" in trainers_with(critic=True, agents=1)
        assert compare_methods()["test_only_critic_method"].envs == ("bugfix", "long_horizon", "long_horizon_v3")
    finally:
        unregister("test_only_critic_method")


@pytest.mark.parametrize("kwargs, message", [
    ({"agents": 3}, "agents=3 is not a valid trainer trait; allowed: 1, 2"),
    ({"envs": ()}, "envs=\\(\\) leaves the trainer no env"),
    ({"central_critic": True}, "central_critic=True needs critic=True and agents=2"),
])
def test_bad_traits_are_one_line_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        register("test_only_bad", **kwargs)


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
