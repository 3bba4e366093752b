"""The trainer registry: algorithm name -> ``Trainer`` subclass and the traits the rest of the
harness reads from it.

A leaf module of ``algos`` (it imports nothing from ``algos``; the env names come from the env
specs, ``envs.SPECS``), so ``algos.trainer`` (the base class) and the
algorithms (``algos.grpo``, ``algos.ppo``, ``algos.rloo``, ``algos.gigpo``, ``algos.grpo_process``,
``algos.ppo_ctde``) can all import it without importing each other.

``@register("name", critic=..., agents=..., step_rewards=..., envs=...)`` on a class adds it with
its :class:`TrainerTraits`; ``make_trainer(name, ...)`` builds one; :func:`trainer_traits` and
:func:`trainers_with` answer "does it train a critic", "how many agents", "which envs" for the
config checks, the compare job and the report, so that no other module keeps a list of names.
The built-in algorithms live in ``BUILTIN_MODULES`` and are imported on the first lookup, so a
caller never has to import them for their side effect.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from envs import SPECS

# modules whose import registers the built-in trainers
BUILTIN_MODULES = ("algos.grpo", "algos.ppo", "algos.rloo", "algos.gigpo", "algos.grpo_process", "algos.ppo_ctde")
#: env short names (``env.name``) a one-agent method runs on unless its registration narrows them:
#: every env spec with ``agents == 1``
SINGLE_AGENT_ENVS = tuple(s.name for s in SPECS if s.agents == 1)
#: env short names of the two-agent env(s) (specs with ``agents == 2``), the only envs of a two-agent method
PAIR_AGENT_ENVS = tuple(s.name for s in SPECS if s.agents == 2)


@dataclass(frozen=True)
class TrainerTraits:
    """What a trainer needs from the rest of the harness.

    ``critic``: it trains a value function (``policy.critic=auto`` gives it one, the report shows
    its explained variance); ``agents``: 1, or 2 for the two-agent env (run by the pair learner);
    ``step_rewards``: it reads per-step rewards (the env must pay them); ``envs``: the ``env.name``
    values a comparison may train it on; ``central_critic``: (two agents) its critic reads both
    agents' contexts, so the critic's window is ``2 * policy.max_len + 2`` tokens."""

    critic: bool = False
    agents: int = 1
    step_rewards: bool = False
    envs: tuple[str, ...] = SINGLE_AGENT_ENVS
    central_critic: bool = False

    def __post_init__(self) -> None:
        if self.agents not in (1, 2):
            raise ValueError(f"agents={self.agents} is not a valid trainer trait; allowed: 1, 2")
        if not self.envs:
            raise ValueError("envs=() leaves the trainer no env to run on; name at least one env")
        if self.central_critic and not (self.critic and self.agents == 2):
            raise ValueError("central_critic=True needs critic=True and agents=2 (a critic over both agents' contexts)")


# algorithm name -> Trainer subclass (filled by ``register``)
TRAINERS: dict[str, type] = {}


def register(name: str, *, critic: bool = False, agents: int = 1, step_rewards: bool = False,
             envs: tuple[str, ...] | None = None, central_critic: bool = False):
    """Class decorator: ``TRAINERS[name] = cls``, ``cls.name = name`` and ``cls.traits`` (a
    :class:`TrainerTraits`; ``envs`` None = :data:`SINGLE_AGENT_ENVS` for one agent,
    :data:`PAIR_AGENT_ENVS` for two). A name registered twice raises ``ValueError`` (two classes
    cannot answer to one ``algo.name``)."""
    if envs is None:
        envs = PAIR_AGENT_ENVS if agents == 2 else SINGLE_AGENT_ENVS
    traits = TrainerTraits(critic=critic, agents=agents, step_rewards=step_rewards, envs=tuple(envs),
                           central_critic=central_critic)

    def deco(cls):
        if name in TRAINERS and TRAINERS[name] is not cls:
            raise ValueError(f"trainer {name!r} is already registered (by {TRAINERS[name].__qualname__}); "
                             f"pick another name")
        cls.name = name
        cls.traits = traits
        TRAINERS[name] = cls
        return cls

    return deco


def load_builtin_trainers() -> dict[str, type]:
    """Import ``BUILTIN_MODULES`` (registering their trainers); returns the registered trainers in
    their canonical order: the built-in modules' order, then each module's order of definition,
    then other modules' trainers in registration order: the same in every process, whatever it
    imported first."""
    for module in BUILTIN_MODULES:
        importlib.import_module(module)
    rank = {m: i for i, m in enumerate(BUILTIN_MODULES)}
    order = sorted(enumerate(TRAINERS.items()), key=lambda e: (rank.get(e[1][1].__module__, len(rank)), e[0]))
    return dict(item for _, item in order)


def trainer_traits(name: str) -> TrainerTraits:
    """The registered traits of trainer ``name``; ``ValueError`` listing the registered ones."""
    load_builtin_trainers()
    if name not in TRAINERS:
        raise ValueError(f"algo {name!r} unknown; allowed: {', '.join(sorted(TRAINERS))}")
    return TRAINERS[name].traits


def trainers_with(**wanted) -> tuple[str, ...]:
    """Registered trainer names (in :func:`load_builtin_trainers`' order) whose traits equal every
    ``wanted`` field, e.g. ``trainers_with(critic=True, agents=1)``."""
    return tuple(n for n, cls in load_builtin_trainers().items()
                 if all(getattr(cls.traits, k) == v for k, v in wanted.items()))


def make_trainer(name: str, *args, **kwargs):
    """``TRAINERS[name](*args, **kwargs)``; the usual call is
    ``make_trainer(name, algo, policy, critic=None, reference=None, temperature=1.0, meter=None)``.
    An unknown name raises ``ValueError`` listing the registered ones."""
    load_builtin_trainers()
    if name not in TRAINERS:
        raise ValueError(f"algo {name!r} unknown; allowed: {', '.join(sorted(TRAINERS))}")
    return TRAINERS[name](*args, **kwargs)


__all__ = ["BUILTIN_MODULES", "PAIR_AGENT_ENVS", "SINGLE_AGENT_ENVS", "TRAINERS", "TrainerTraits",
           "load_builtin_trainers", "make_trainer", "register", "trainer_traits", "trainers_with"]
