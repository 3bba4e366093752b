"""``EnvSpec``: everything the harness reads about one env, declared once, next to the env.

Each env module or package exports exactly one ``SPEC`` (``envs.bugfix``, ``envs.long_horizon``,
``envs.long_horizon_v3``, ``envs.pairfix``); ``envs/__init__.py`` collects them into ``envs.SPECS``,
registers the one-agent ones with Gymnasium and answers ``envs.spec_of(name_or_id)``. The config
checks, the warm start, calibration, the report's reference rows, the compare job, the benchmark
and the trainer registry read a spec instead of naming an env.

References to code (``entry_point``, ``scripted_agents``, ``floor_agents``) are ``"module:attr"``
strings, imported on first use (:func:`resolve`), so ``import envs`` imports no agent module.
A leaf module: it imports nothing from ``envs``.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

#: ``EnvSpec.agents`` values: a ``gymnasium.Env`` (1) or a two-agent ``pettingzoo.AECEnv`` (2)
AGENT_COUNTS = (1, 2)


def resolve(ref: str) -> Any:
    """The object a ``"module:attr"`` reference names (its module imported on first use)."""
    module, sep, attr = ref.partition(":")
    if not sep or not module or not attr:
        raise ValueError(f"reference {ref!r} is not of the form 'module:attr'")
    return getattr(importlib.import_module(module), attr)


@dataclass(frozen=True)
class EnvSpec:
    """One env as the rest of the harness sees it.

    ``name``: the config short name (``env.name``, ``configs/env/<name>.yaml``, run directories);
    ``id``: the versioned id (``env.id``; ``gymnasium.make`` / ``envs.make`` for one agent,
    ``envs.make_multi_agent`` for two); ``entry_point``: ``"module:Class"`` of the env;
    ``agents``: 1 or 2 (which trainers and which run loop take it);
    ``scripted_agents``: ``"module:attr"`` of ``make_agent(name, **kwargs)``, the env's scripted
    agents (the warm start's ``noisy_oracle`` demonstrator, the calibration and reference agents,
    the benchmark's driver), or ``None``; ``oracle``: the scripted agent that is the reference
    ceiling; ``floor_agents``: ``"module:attr"`` of the tuple of scripted agents whose best is the
    reference floor, or ``None``; ``default_difficulty``: the preset the constructor's
    ``difficulty`` knob defaults to, for an env that takes ``difficulty`` and ``faults`` (``None``:
    it has no difficulty presets); ``step_cost_target``: the benchmark's target of one step's cost
    in FrozenLake steps (``None``: no target); ``instructions``: ``"module:attr"`` of the env's
    files, tools and action grammar as text for a model that has never seen the env (a chat
    system prompt, ``policy.env_instructions``), or ``None``; ``step_reward_modes``: the values of
    the constructor's ``reward_mode`` knob under which the env pays per-step rewards (a method
    that reads step rewards runs only on an env with one; ``()``: it pays only an outcome)."""

    name: str
    id: str
    entry_point: str
    agents: int = 1
    scripted_agents: str | None = None
    oracle: str = "oracle"
    floor_agents: str | None = None
    default_difficulty: str | None = None
    step_cost_target: float | None = None
    instructions: str | None = None
    step_reward_modes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.agents not in AGENT_COUNTS:
            raise ValueError(f"EnvSpec {self.name!r}: agents={self.agents} invalid; allowed: 1, 2")
        for field_name in ("entry_point", "scripted_agents", "floor_agents", "instructions"):
            ref = getattr(self, field_name)
            if ref is not None and (ref.count(":") != 1 or ref.startswith(":") or ref.endswith(":")):
                raise ValueError(f"EnvSpec {self.name!r}: {field_name}={ref!r} invalid; allowed: 'module:attr'")
        if not isinstance(self.step_reward_modes, tuple) or not all(isinstance(m, str) for m in self.step_reward_modes):
            raise ValueError(f"EnvSpec {self.name!r}: step_reward_modes={self.step_reward_modes!r} invalid; "
                             f"allowed: a tuple of reward_mode names")


__all__ = ["AGENT_COUNTS", "EnvSpec", "resolve"]
