"""BugFix's :class:`envs.spec.EnvSpec` (re-exported as ``envs.bugfix.SPEC``)."""

from __future__ import annotations

from envs.bugfix.config import BASE_DIFFICULTY, REWARD_MODES
from envs.spec import EnvSpec

SPEC = EnvSpec(
    name="bugfix",
    id="agentrl/BugFix-v2",
    entry_point="envs.bugfix:BugFixEnv",
    scripted_agents="envs.bugfix.agents:make_agent",
    floor_agents="envs.bugfix.agents:FLOOR_AGENTS",
    default_difficulty=BASE_DIFFICULTY,
    # BugFix-v2 runs the exact verifier on 299 inputs at every episode end (docs/benchmarks.md)
    step_cost_target=8.0,
    instructions="envs.bugfix.instructions:INSTRUCTIONS",
    # every mode but "outcome" pays a bonus per step (envs/bugfix/env.py, the reward modes)
    step_reward_modes=tuple(m for m in REWARD_MODES if m != "outcome"),
)

__all__ = ["SPEC"]
