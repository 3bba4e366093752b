"""Text environments for tool-using agents: one :class:`envs.spec.EnvSpec` per env.

Each env module or package exports exactly one ``SPEC`` (``envs.bugfix``, ``envs.long_horizon``,
``envs.long_horizon_v3``, ``envs.pairfix``); ``SPECS`` holds them in order and :func:`spec_of`
finds one by short name or id. ``import envs`` registers every one-agent spec with Gymnasium
(the only place ``gymnasium.register`` is called); a two-agent spec (a ``pettingzoo.AECEnv``,
which ``gymnasium.make`` refuses) is built with :func:`make_multi_agent`. Earlier versions of a
one-agent env are not registered (but LongHorizon-v1, kept beside v3 for its claims):
``gymnasium.make`` of one raises Gymnasium's ``DeprecatedEnv`` error naming the newest version
(each env's Version History says what changed); :func:`make` and :func:`make_multi_agent` refuse
an id outside theirs with a ``ValueError`` listing the allowed ones. :func:`make` builds a
one-agent env with the optional context-compression wrapper on top. :func:`scripted_agent` and
:func:`floor_agents` build an env's scripted agents (imported on first use); :func:`instructions`
is an env's tools and action grammar as text for a model that has never seen it.
"""

from __future__ import annotations

import gymnasium

from envs.bugfix import SPEC as BUGFIX
from envs.long_horizon import SPEC as LONG_HORIZON
from envs.long_horizon_v3 import SPEC as LONG_HORIZON_V3
from envs.pairfix import SPEC as PAIRFIX
from envs.spec import EnvSpec, resolve

#: every env, in order (one-agent envs first; config choices and listings keep this order)
SPECS: tuple[EnvSpec, ...] = (BUGFIX, LONG_HORIZON, LONG_HORIZON_V3, PAIRFIX)
#: ids of the one-agent envs (``gymnasium.make`` / :func:`make`)
ENV_IDS = tuple(s.id for s in SPECS if s.agents == 1)
#: id -> ``"module:Class"`` of the two-agent envs (:func:`make_multi_agent`)
MULTI_AGENT_ENVS = {s.id: s.entry_point for s in SPECS if s.agents == 2}
BUGFIX_ID = BUGFIX.id
LONG_HORIZON_ID = LONG_HORIZON.id
LONG_HORIZON_V3_ID = LONG_HORIZON_V3.id
PAIRFIX_ID = PAIRFIX.id


def _check_unique(specs: tuple[EnvSpec, ...]) -> None:
    """``ValueError`` when two specs share a name or an id (a lookup would be ambiguous)."""
    for key in ("name", "id"):
        values = [getattr(s, key) for s in specs]
        repeated = sorted({v for v in values if values.count(v) > 1})
        if repeated:
            raise ValueError(f"env {key} {', '.join(repeated)} is declared by more than one EnvSpec; "
                             f"allowed: one spec per {key}")


_check_unique(SPECS)
for _spec in SPECS:
    if _spec.agents == 1 and _spec.id not in gymnasium.registry:
        # No TimeLimit wrapper: each env owns its turn limit (time_limit option) and stop reason.
        gymnasium.register(id=_spec.id, entry_point=_spec.entry_point, disable_env_checker=True)


def spec_of(name_or_id: str) -> EnvSpec:
    """The spec whose short name or id is ``name_or_id``; ``ValueError`` naming the allowed ones."""
    for s in SPECS:
        if name_or_id in (s.name, s.id):
            return s
    raise ValueError(f"unknown env {name_or_id!r}; allowed: {', '.join(s.name for s in SPECS)} "
                     f"(or their ids {', '.join(s.id for s in SPECS)})")


def scripted_agent(env: str, agent: str, **kwargs):
    """Scripted agent ``agent`` of env ``env`` (a short name or id), built with ``kwargs`` by the
    spec's ``scripted_agents`` factory; ``ValueError`` for an env without scripted agents."""
    spec = spec_of(env)
    if spec.scripted_agents is None:
        raise ValueError(f"env {env!r} has no scripted agents; allowed: "
                         f"{', '.join(s.name for s in SPECS if s.scripted_agents is not None)}")
    return resolve(spec.scripted_agents)(agent, **kwargs)


def instructions(env: str) -> str:
    """Env ``env``'s instructions for a model that has never seen it (its spec's ``instructions``:
    files, tools and action grammar, a chat system prompt); ``ValueError`` for an env without them."""
    spec = spec_of(env)
    if spec.instructions is None:
        raise ValueError(f"env {env!r} has no instructions; allowed: "
                         f"{', '.join(s.name for s in SPECS if s.instructions is not None)}")
    return resolve(spec.instructions)


def floor_agents(env: str) -> tuple[str, ...]:
    """The scripted agents whose best is env ``env``'s reference floor (its spec's ``floor_agents``);
    ``ValueError`` for an env without them."""
    spec = spec_of(env)
    if spec.floor_agents is None:
        raise ValueError(f"env {env!r} has no floor agents; allowed: "
                         f"{', '.join(s.name for s in SPECS if s.floor_agents is not None)}")
    return tuple(resolve(spec.floor_agents))


def make(env_id: str, compression=None, **env_kwargs) -> gymnasium.Env:
    """``gymnasium.make(env_id, **env_kwargs)``, wrapped in ``ContextCompression`` when
    ``compression`` (an ``envs.compression.CompressionSettings``, or a dict of its fields) is given
    and its ``strategy`` is not ``"none"``."""
    if env_id not in ENV_IDS:
        raise ValueError(f"unknown env id {env_id!r}; allowed: {', '.join(ENV_IDS)}")
    env = gymnasium.make(env_id, **env_kwargs)
    if compression:
        from envs.compression import CompressionSettings, ContextCompression

        settings = CompressionSettings(**compression) if isinstance(compression, dict) else compression
        if settings.strategy != "none":
            env = ContextCompression(env, settings)
    return env


def make_multi_agent(env_id: str, **env_kwargs):
    """The two-agent env ``env_id`` (a key of ``MULTI_AGENT_ENVS``) built with ``env_kwargs``."""
    if env_id not in MULTI_AGENT_ENVS:
        raise ValueError(f"unknown multi-agent env id {env_id!r}; allowed: {', '.join(MULTI_AGENT_ENVS)}")
    return resolve(MULTI_AGENT_ENVS[env_id])(**env_kwargs)


__all__ = ["BUGFIX", "BUGFIX_ID", "ENV_IDS", "EnvSpec", "LONG_HORIZON", "LONG_HORIZON_ID", "LONG_HORIZON_V3",
           "LONG_HORIZON_V3_ID", "MULTI_AGENT_ENVS", "PAIRFIX", "PAIRFIX_ID", "SPECS", "floor_agents", "instructions",
           "make", "make_multi_agent", "scripted_agent", "spec_of"]
