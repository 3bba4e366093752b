"""BugFix's :class:`envs.spec.EnvSpec` (re-exported as ``envs.bugfix.SPEC``)."""

from __future__ import annotations

from envs.bugfix.config import BASE_DIFFICULTY
from envs.spec import EnvSpec

SPEC = EnvSpec(
    name="bugfix",
    id="agentrl/BugFix-v2",
    entry_point="envs.bugfix:BugFixEnv",
    scripted_agents="envs.bugfix.agents:make_agent",
    floor_agents="envs.bugfix.agents:FLOOR_AGENTS",
    default_difficulty=BASE_DIFFICULTY,
    step_cost_target=5.0,
    instructions="envs.bugfix.instructions:INSTRUCTIONS",
)

__all__ = ["SPEC"]
