"""The trainer registry: algorithm name -> the trainer that runs it, its traits, and (for a group
method) the advantage estimator that trainer picks.

A leaf module of ``algos`` (it imports nothing from ``algos`` and names no env), so
``algos.trainer`` (the base class) and the algorithms can all import it without importing each
other. A trainer's traits say what it needs from an env (how many agents, per-step rewards,
compression boundaries); which env specs offer that is answered in the config layer
(``experiments.runtime.schema.method_envs``), which reads ``envs.SPECS``.

Two kinds of registration, each with its :class:`TrainerTraits`:

- ``@register("name", critic=..., config=..., ...)`` on a ``Trainer`` subclass:
  ``make_trainer("name", ...)`` builds that class (PPO and its variants: the method is the class).
- ``@register("name", trainer=GroupTrainer, ...)`` on an estimator function: the function enters
  :data:`ESTIMATORS` as an :class:`EstimatorSpec` of the trainer's ``estimator_kind``, and
  ``make_trainer("name", ...)`` builds ``trainer`` running it (the group methods: one trainer per
  kind, one pure function per method).

``config=`` names the method's config schema (a dataclass extending ``algos.configs.AlgoConfig``,
defined next to the trainer): it enters :data:`CONFIGS` (:func:`config_schemas`), from which
``experiments.runtime`` builds the ``algo`` config group (``schema.ALGO_SCHEMAS``, the Hydra nodes
``algo/<name>_schema``) and from which a schema instance reads its ``name`` (:func:`config_name`),
so a trainer's name is written once, in its registration.

:func:`trainer_traits` and :func:`trainers_with` answer "does it train a critic", "how many
agents", "what does it need from the env" for the config checks, the compare job and the report,
so that no other module keeps a list of names. The built-in algorithms live in ``BUILTIN_MODULES`` and are
imported on the first lookup, so a caller never has to import them for their side effect.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass

# modules whose import registers the built-in trainers
BUILTIN_MODULES = ("algos.grpo", "algos.ppo", "algos.rloo", "algos.gigpo", "algos.grpo_process", "algos.ppo_ctde",
                   "algos.grouped_value")


@dataclass(frozen=True)
class TrainerTraits:
    """What a trainer needs from the rest of the harness.

    ``critic``: it trains a value function (``policy.critic=auto`` gives it one, the report shows
    its explained variance); ``agents``: 1, or 2 for the two-agent env (run by the pair learner);
    ``step_rewards``: it reads per-step rewards (the env must pay them: its spec's
    ``step_reward_modes``); ``compression``: it differs from its base method only at compression
    boundaries (a run needs the compression wrapper on); ``central_critic``: (two agents) its critic
    reads both agents' contexts, so the critic's window is ``2 * policy.max_len + 2`` tokens."""

    critic: bool = False
    agents: int = 1
    step_rewards: bool = False
    compression: bool = False
    central_critic: bool = False

    def __post_init__(self) -> None:
        if self.agents not in (1, 2):
            raise ValueError(f"agents={self.agents} is not a valid trainer trait; allowed: 1, 2")
        if self.compression and self.agents != 1:
            raise ValueError("compression=True needs agents=1 (a two-agent run has no compression wrapper)")
        if self.central_critic and not (self.critic and self.agents == 2):
            raise ValueError("central_critic=True needs critic=True and agents=2 (a critic over both agents' contexts)")


#: the estimator kinds and the signature of each kind's function (``algo``: the algo config)
ESTIMATOR_KINDS = {
    "outcome": "fn(rewards [N], group_ids [N], algo) -> advantages [N] (one per trajectory)",
    "step": "fn(steps: algos.steps.StepInputs, algo) -> (advantages [N, S] (one per step), metrics dict)",
}


@dataclass(frozen=True)
class EstimatorSpec:
    """A group method's advantage estimator: a pure function of the ``kind``'s signature
    (:data:`ESTIMATOR_KINDS`), run by the trainer registered with it. ``check(algo)`` (None: none)
    raises ``ValueError`` for a config the function cannot run; the trainer calls it when built."""

    name: str
    kind: str
    fn: Callable
    check: Callable | None = None


# algorithm name -> the class make_trainer builds (filled by ``register``; the estimator names of
# one kind share their trainer class)
TRAINERS: dict[str, type] = {}
# algorithm name -> its traits
TRAITS: dict[str, TrainerTraits] = {}
# algorithm name -> its estimator (group methods only)
ESTIMATORS: dict[str, EstimatorSpec] = {}
# algorithm name -> its config schema (a dataclass class; one name per class)
CONFIGS: dict[str, type] = {}


def _registered_object(name: str):
    """What registered ``name``: its estimator function, or its trainer class."""
    return ESTIMATORS[name].fn if name in ESTIMATORS else TRAINERS[name]


def register(name: str, *, critic: bool = False, agents: int = 1, step_rewards: bool = False,
             compression: bool = False, central_critic: bool = False, trainer: type | None = None,
             check: Callable | None = None, config: type | None = None):
    """Decorator registering ``name`` with its :class:`TrainerTraits`.

    Without ``trainer``: on a ``Trainer`` subclass, ``TRAINERS[name] = cls``. With ``trainer`` (a
    class whose ``estimator_kind`` is a key of :data:`ESTIMATOR_KINDS`): on an estimator function,
    ``ESTIMATORS[name] = EstimatorSpec(name, trainer.estimator_kind, fn, check)`` and
    ``TRAINERS[name] = trainer``. ``config`` (a dataclass with a ``name`` field): ``CONFIGS[name] =
    config``. A name registered twice, or a config class registered with a second name, raises
    ``ValueError`` (two methods cannot answer to one ``algo.name``; a schema names one method)."""
    traits = TrainerTraits(critic=critic, agents=agents, step_rewards=step_rewards, compression=compression,
                           central_critic=central_critic)
    kind = None if trainer is None else getattr(trainer, "estimator_kind", None)
    if trainer is not None and kind not in ESTIMATOR_KINDS:
        raise ValueError(f"trainer={trainer.__qualname__} runs no estimator kind "
                         f"(its estimator_kind must be one of: {', '.join(ESTIMATOR_KINDS)})")
    if trainer is None and check is not None:
        raise ValueError("check= belongs to an estimator registration (pass trainer= too)")
    _check_config(name, config)

    def deco(obj):
        if name in TRAINERS and _registered_object(name) is not obj:
            raise ValueError(f"trainer {name!r} is already registered (by {_registered_object(name).__qualname__}); "
                             f"pick another name")
        if trainer is not None:
            ESTIMATORS[name] = EstimatorSpec(name=name, kind=kind, fn=obj, check=check)
        TRAINERS[name] = obj if trainer is None else trainer
        TRAITS[name] = traits
        if config is not None:
            CONFIGS[name] = config
        return obj

    return deco


def _check_config(name: str, config: type | None) -> None:
    """``ValueError`` unless ``config`` is None or a dataclass with a ``name`` field that no other
    trainer name registered."""
    if config is None:
        return
    if "name" not in getattr(config, "__dataclass_fields__", {}):
        raise ValueError(f"config={getattr(config, '__qualname__', config)!r} is not a dataclass with a name field "
                         f"(extend algos.configs.AlgoConfig)")
    owner = next((n for n, c in CONFIGS.items() if c is config and n != name), None)
    if owner is not None:
        raise ValueError(f"config={config.__qualname__} is already registered with trainer {owner!r}; a schema names "
                         f"one trainer (subclass it for {name!r})")


def unregister(name: str) -> None:
    """Remove ``name`` from every table (a test's temporary registration)."""
    for table in (TRAINERS, TRAITS, ESTIMATORS, CONFIGS):
        table.pop(name, None)


def load_builtin_trainers() -> dict[str, type]:
    """Import ``BUILTIN_MODULES`` (registering their trainers); returns name -> trainer class in
    the canonical order: the built-in modules' order, then each module's order of registration,
    then other modules' names in registration order: the same in every process, whatever it
    imported first. A name's module is that of its estimator function, or of its class."""
    for module in BUILTIN_MODULES:
        importlib.import_module(module)
    rank = {m: i for i, m in enumerate(BUILTIN_MODULES)}
    order = sorted(enumerate(TRAINERS.items()),
                   key=lambda e: (rank.get(_registered_object(e[1][0]).__module__, len(rank)), e[0]))
    return dict(item for _, item in order)


def trainer_traits(name: str) -> TrainerTraits:
    """The registered traits of trainer ``name``; ``ValueError`` listing the registered ones."""
    load_builtin_trainers()
    if name not in TRAINERS:
        raise ValueError(f"algo {name!r} unknown; allowed: {', '.join(sorted(TRAINERS))}")
    return TRAITS[name]


def trainers_with(**wanted) -> tuple[str, ...]:
    """Registered trainer names (in :func:`load_builtin_trainers`' order) whose traits equal every
    ``wanted`` field, e.g. ``trainers_with(critic=True, agents=1)``."""
    return tuple(n for n in load_builtin_trainers() if all(getattr(TRAITS[n], k) == v for k, v in wanted.items()))


def config_schemas() -> dict[str, type]:
    """Trainer name -> its registered config schema, for every trainer registered with one (in
    :func:`load_builtin_trainers`' order)."""
    return {n: CONFIGS[n] for n in load_builtin_trainers() if n in CONFIGS}


def config_name(config: type) -> str | None:
    """The trainer name ``config`` (a schema class, not a subclass of one) is registered with, or None."""
    load_builtin_trainers()
    return next((n for n, c in CONFIGS.items() if c is config), None)


def estimator(name: str, kind: str) -> EstimatorSpec:
    """The registered estimator ``name`` of ``kind``; ``ValueError`` listing that kind's names."""
    load_builtin_trainers()
    spec = ESTIMATORS.get(name)
    if spec is None or spec.kind != kind:
        allowed = sorted(n for n, s in ESTIMATORS.items() if s.kind == kind)
        raise ValueError(f"algo {name!r} has no {kind} estimator; allowed: {', '.join(allowed)}")
    return spec


def make_trainer(name: str, *args, **kwargs):
    """``TRAINERS[name](*args, **kwargs)``, plus ``estimator=name`` for an estimator's trainer; the
    usual call is ``make_trainer(name, algo, policy, critic=None, reference=None, temperature=1.0,
    meter=None)``. An unknown name raises ``ValueError`` listing the registered ones."""
    load_builtin_trainers()
    if name not in TRAINERS:
        raise ValueError(f"algo {name!r} unknown; allowed: {', '.join(sorted(TRAINERS))}")
    if name in ESTIMATORS:
        kwargs = {**kwargs, "estimator": name}
    return TRAINERS[name](*args, **kwargs)


__all__ = ["BUILTIN_MODULES", "CONFIGS", "ESTIMATORS", "ESTIMATOR_KINDS", "EstimatorSpec",
           "TRAINERS", "TRAITS", "TrainerTraits", "config_name", "config_schemas", "estimator", "load_builtin_trainers", "make_trainer", "register",
           "trainer_traits", "trainers_with", "unregister"]
