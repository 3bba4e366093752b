"""Text environments for tool-using agents, registered with Gymnasium.

``import envs`` registers ``agentrl/BugFix-v2``, ``agentrl/LongHorizon-v1`` and
``agentrl/LongHorizon-v3`` (a different task family; v1 stays registered for its claims) (the only place
``gymnasium.register`` is called). Earlier versions are not registered: ``gymnasium.make`` of one
raises Gymnasium's ``DeprecatedEnv`` error naming the current version (each env's Version History
says what changed). ``envs.make`` builds one with the optional
context-compression wrapper on top.
"""

from __future__ import annotations

import gymnasium

BUGFIX_ID = "agentrl/BugFix-v2"
LONG_HORIZON_ID = "agentrl/LongHorizon-v1"
LONG_HORIZON_V3_ID = "agentrl/LongHorizon-v3"
ENV_IDS = (BUGFIX_ID, LONG_HORIZON_ID, LONG_HORIZON_V3_ID)
# Two-agent envs (each a ``pettingzoo.AECEnv``, not a gymnasium.Env: gymnasium.make refuses them);
# build one with ``envs.make_multi_agent``.
PAIRFIX_ID = "agentrl/PairFix-v2"
MULTI_AGENT_ENVS = {PAIRFIX_ID: "envs.pairfix:PairFixEnv"}

for _env_id, _entry_point in (
    (BUGFIX_ID, "envs.bugfix:BugFixEnv"),
    (LONG_HORIZON_ID, "envs.long_horizon:LongHorizonEnv"),
    (LONG_HORIZON_V3_ID, "envs.long_horizon_v3:LongHorizonV3Env"),
):
    if _env_id not in gymnasium.registry:
        # No TimeLimit wrapper: each env owns its turn limit (time_limit option) and stop reason.
        gymnasium.register(id=_env_id, entry_point=_entry_point, disable_env_checker=True)


def make(env_id: str, compression: dict | None = None, **env_kwargs) -> gymnasium.Env:
    """``gymnasium.make(env_id, **env_kwargs)``, wrapped in ``ContextCompression(**compression)``
    when ``compression`` is given and its ``strategy`` is not ``"none"``."""
    if env_id not in ENV_IDS:
        raise ValueError(f"unknown env id {env_id!r}; allowed: {', '.join(ENV_IDS)}")
    env = gymnasium.make(env_id, **env_kwargs)
    if compression and compression.get("strategy", "none") != "none":
        from envs.compression import ContextCompression

        env = ContextCompression(env, **compression)
    return env


def make_multi_agent(env_id: str, **env_kwargs):
    """The two-agent env ``env_id`` (a key of ``MULTI_AGENT_ENVS``) built with ``env_kwargs``."""
    if env_id not in MULTI_AGENT_ENVS:
        raise ValueError(f"unknown multi-agent env id {env_id!r}; allowed: {', '.join(MULTI_AGENT_ENVS)}")
    import importlib

    module, cls = MULTI_AGENT_ENVS[env_id].split(":")
    return getattr(importlib.import_module(module), cls)(**env_kwargs)
