"""PairFix's :class:`envs.spec.EnvSpec` (re-exported as ``envs.pairfix.SPEC``): two agents, a
``pettingzoo.AECEnv`` built with ``envs.make_multi_agent`` (not registered with Gymnasium)."""

from __future__ import annotations

from envs.bugfix.config import BASE_DIFFICULTY
from envs.spec import EnvSpec

SPEC = EnvSpec(
    name="pairfix",
    id="agentrl/PairFix-v2",
    entry_point="envs.pairfix:PairFixEnv",
    agents=2,
    default_difficulty=BASE_DIFFICULTY,
)

__all__ = ["SPEC"]
