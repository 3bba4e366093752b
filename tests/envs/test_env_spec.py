"""One ``EnvSpec`` per env; no other module names an env.

Each env module or package exports one ``SPEC`` (``envs.spec.EnvSpec``); ``envs/__init__.py``
collects them (``envs.SPECS``), registers the one-agent ones with Gymnasium and answers
``envs.spec_of``. The config checks, the warm start, calibration, the report's references, the
compare job, the benchmark, the tokenizer corpus and the trainer registry read a spec. The source
scan below fails when a production module holds a string literal equal to an env's short name or
id outside the module that declares that env's spec: such a literal is a switch on an env that
should read its spec.
"""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

import gymnasium
import pytest
import yaml

import envs
from algos.registry import TrainerTraits
from envs.spec import EnvSpec, resolve
from experiments.runtime.config import agents_of
from experiments.runtime.schema import ENV_NAMES, PAIR_ENVS, EnvConfig, method_envs

ROOT = Path(__file__).resolve().parents[2]
PRODUCTION = ("algos", "envs", "experiments")
SINGLE_FILES = ("rl_checks.py",)


def test_the_specs_are_the_four_envs_in_order():
    assert [(s.name, s.id, s.agents) for s in envs.SPECS] == [
        ("bugfix", "agentrl/BugFix-v2", 1), ("long_horizon", "agentrl/LongHorizon-v1", 1),
        ("long_horizon_v3", "agentrl/LongHorizon-v3", 1), ("pairfix", "agentrl/PairFix-v2", 2)]
    assert envs.SPECS == (envs.BUGFIX, envs.LONG_HORIZON, envs.LONG_HORIZON_V3, envs.PAIRFIX)
    for module in ("envs.bugfix", "envs.long_horizon", "envs.long_horizon_v3", "envs.pairfix"):
        assert resolve(f"{module}:SPEC") in envs.SPECS


def test_names_and_ids_are_unique():
    for key in ("name", "id"):
        values = [getattr(s, key) for s in envs.SPECS]
        assert len(set(values)) == len(values), key


@pytest.mark.parametrize("spec", envs.SPECS, ids=lambda s: s.name)
def test_every_spec_id_makes_its_env(spec):
    if spec.agents == 1:
        env = gymnasium.make(spec.id)
        assert type(env.unwrapped) is resolve(spec.entry_point) and env.spec.id == spec.id
        env.reset(seed=0)
        env.close()
        envs.make(spec.id).close()
    else:
        assert spec.id not in gymnasium.registry  # a pettingzoo AECEnv: gymnasium.make refuses it
        env = envs.make_multi_agent(spec.id)
        assert type(env) is resolve(spec.entry_point)
        env.reset(seed=0)


@pytest.mark.parametrize("spec", envs.SPECS, ids=lambda s: s.name)
def test_lookups_by_name_and_id_give_the_same_spec(spec):
    assert envs.spec_of(spec.name) is envs.spec_of(spec.id) is spec


def test_spec_of_an_unknown_env_is_one_line_naming_the_allowed_ones():
    with pytest.raises(ValueError) as e:
        envs.spec_of("nope")
    assert str(e.value) == ("unknown env 'nope'; allowed: bugfix, long_horizon, long_horizon_v3, pairfix (or their ids "
                            "agentrl/BugFix-v2, agentrl/LongHorizon-v1, agentrl/LongHorizon-v3, agentrl/PairFix-v2)")


def test_an_env_without_scripted_agents_is_one_line_naming_the_envs_with_them():
    with pytest.raises(ValueError, match=r"^env 'pairfix' has no scripted agents; allowed: bugfix, long_horizon, "
                                         r"long_horizon_v3$"):
        envs.scripted_agent("pairfix", "oracle")
    with pytest.raises(ValueError, match=r"^env 'pairfix' has no floor agents; allowed: bugfix, long_horizon, "
                                         r"long_horizon_v3$"):
        envs.floor_agents("pairfix")


@pytest.mark.parametrize("kwargs, message", [
    ({"agents": 3}, r"EnvSpec 'x': agents=3 invalid; allowed: 1, 2"),
    ({"entry_point": "envs.x.X"}, r"EnvSpec 'x': entry_point='envs.x.X' invalid; allowed: 'module:attr'"),
    ({"scripted_agents": "envs.x"}, r"EnvSpec 'x': scripted_agents='envs.x' invalid; allowed: 'module:attr'"),
    ({"step_reward_modes": "process"}, r"EnvSpec 'x': step_reward_modes='process' invalid; allowed: a tuple"),
])
def test_a_bad_spec_is_a_one_line_error(kwargs, message):
    with pytest.raises(ValueError, match=message):
        EnvSpec(**{"name": "x", "id": "agentrl/X-v0", "entry_point": "envs.x:X", **kwargs})


@pytest.mark.parametrize("spec", envs.SPECS, ids=lambda s: s.name)
def test_default_difficulty_is_the_constructors_default(spec):
    difficulty = inspect.signature(resolve(spec.entry_point).__init__).parameters.get("difficulty")
    assert spec.default_difficulty == (None if difficulty is None else difficulty.default)


@pytest.mark.parametrize("spec", [s for s in envs.SPECS if s.scripted_agents], ids=lambda s: s.name)
def test_scripted_agents_and_floors_resolve(spec):
    registry = importlib.import_module(resolve(spec.scripted_agents).__module__).AGENTS  # name -> agent class
    assert type(envs.scripted_agent(spec.name, spec.oracle)) is registry[spec.oracle]
    floors = envs.floor_agents(spec.id)
    assert floors and all(envs.scripted_agent(spec.id, a) is not None for a in floors)


@pytest.mark.parametrize("spec", [s for s in envs.SPECS if s.agents == 1], ids=lambda s: s.name)
def test_step_reward_modes_are_the_modes_that_pay_before_the_end(spec):
    """The oracle's episode pays a non-zero reward before its last step exactly under the spec's
    ``step_reward_modes`` (every other ``reward_mode``, or the env's default, pays only at the end)."""
    from envs.episode import run_episode

    def pays_early(**kwargs) -> bool:
        env = envs.make(spec.id, **kwargs)
        rewards = run_episode(env, envs.scripted_agent(spec.name, spec.oracle), seed=0).rewards
        return any(r != 0 for r in rewards[:-1])

    kwargs = {"faults": False} if spec.default_difficulty is not None else {}
    assert not pays_early(**kwargs)
    for mode in spec.step_reward_modes:
        assert pays_early(reward_mode=mode, **kwargs), mode


def test_the_consumers_read_the_specs():
    names = tuple(s.name for s in envs.SPECS)
    assert ENV_NAMES == names
    assert PAIR_ENVS == method_envs(TrainerTraits(agents=2)) == tuple(s.name for s in envs.SPECS if s.agents == 2)
    assert method_envs(TrainerTraits()) == tuple(s.name for s in envs.SPECS if s.agents == 1)
    assert method_envs(TrainerTraits(step_rewards=True)) == tuple(s.name for s in envs.SPECS
                                                                   if s.agents == 1 and s.step_reward_modes)
    assert envs.ENV_IDS == tuple(s.id for s in envs.SPECS if s.agents == 1)
    assert set(envs.MULTI_AGENT_ENVS) == {s.id for s in envs.SPECS if s.agents == 2}
    assert [agents_of(s.name) for s in envs.SPECS] == [s.agents for s in envs.SPECS]  # the tiny preset's batch
    assert (EnvConfig().name, EnvConfig().id) == (envs.SPECS[0].name, envs.SPECS[0].id)


@pytest.mark.parametrize("spec", envs.SPECS, ids=lambda s: s.name)
def test_each_env_option_states_its_spec(spec):
    # configs/env/<name>.yaml: env.name and env.id of the spec (a `@package _global_` file nests them under env)
    data = yaml.safe_load((ROOT / "configs" / "env" / f"{spec.name}.yaml").read_text())
    data = data.get("env", data)
    assert (data["name"], data["id"]) == (spec.name, spec.id)


# ------------------------------------------------------------------------------ the source scan
def env_literals(source: str, values: set[str]) -> list[tuple[int, str]]:
    """``(line, value)`` of every string constant of ``source`` equal to one of ``values``."""
    return [(node.lineno, node.value) for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in values]


def spec_declarations(source: str) -> set[str]:
    """The ``name`` and ``id`` literals of every ``EnvSpec(...)`` call in ``source``: the envs this
    module declares."""
    out = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "EnvSpec":
            out |= {k.value.value for k in node.keywords
                    if k.arg in ("name", "id") and isinstance(k.value, ast.Constant)}
    return out


def test_literal_scan_finds_planted_literals():
    values = {"bugfix", "agentrl/BugFix-v2"}
    assert env_literals("if c.env.name == 'bugfix':\n    pass\n", values) == [(1, "bugfix")]
    assert env_literals("x = 1\nenv = make('agentrl/BugFix-v2')\n", values) == [(2, "agentrl/BugFix-v2")]
    assert env_literals("D = {'bugfix': 1}\n", values) == [(1, "bugfix")]
    assert env_literals('"""The bugfix env."""\nk = "bugfix_x"\n', values) == []
    source = "SPEC = EnvSpec(name='bugfix', id='agentrl/BugFix-v2', entry_point='m:C')\n"
    assert spec_declarations(source) == values


def production_files() -> list[Path]:
    return [p for package in PRODUCTION for p in sorted((ROOT / package).rglob("*.py"))] + \
        [ROOT / f for f in SINGLE_FILES]


def test_every_spec_is_declared_in_exactly_one_module():
    declared = {}
    for path in production_files():
        for value in spec_declarations(path.read_text()):
            declared.setdefault(value, []).append(str(path.relative_to(ROOT)))
    values = {v for s in envs.SPECS for v in (s.name, s.id)}
    assert {v: len(modules) for v, modules in declared.items()} == {v: 1 for v in values}, declared
    assert all(declared[s.name] == declared[s.id] for s in envs.SPECS)


def test_no_production_module_names_an_env_outside_its_spec():
    values = {v for s in envs.SPECS for v in (s.name, s.id)}
    found = []
    for path in production_files():
        source = path.read_text()
        own = spec_declarations(source)
        found += [f"{path.relative_to(ROOT)}:{line} {value!r}" for line, value in env_literals(source, values)
                  if value not in own]
    assert found == [], f"env name or id outside its spec's module (read it from envs.spec_of / envs.SPECS): {found}"
