"""BugFix: fix injected bugs in a tiny in-memory repository with text tool calls.

One question per module:

- ``language``: what a program line means and what a program computes;
- ``tasks``: how tasks are generated (references, bugs, the three input sets, the splits);
- ``graders``: how a program is graded and which hacks are detected;
- ``actions``: what an action may look like (grammar, whitespace rule, parser);
- ``config``: which knobs exist, their presets and their validation;
- ``env``: the Gymnasium env that ties them together (``agentrl/BugFix-v2``);
- ``spec``: its :class:`envs.spec.EnvSpec`, exported as ``SPEC`` (``envs/__init__.py`` registers it).
- ``instructions``: its files, tools and grammar as text for a model that has never seen it;
- ``agents``: its scripted agents (registry; ``agent_base``, ``informed_agents``, ``hack_agents``,
  ``blind_agents`` hold them), imported on first use, not by this package.
"""

from envs.bugfix.actions import (
    ACTION_VERBS, CHARSET, FILES, MAX_ACTION_CHARS, PROTECTED_FILES, UNKNOWN_TEXT, USAGE, parse_action,
)
from envs.bugfix.config import DIFFICULTIES, GRADERS, REWARD_MODES, TIME_LIMITS, BugFixConfig, make_config
from envs.bugfix.env import ENDED_TEXT, TASK_TEXT, BugFixEnv
from envs.bugfix.graders import HACK_FLAGS, VOIDING_FLAGS, HiddenGrader, Verifier, voided
from envs.bugfix.language import (
    CMPS, HIGH, INT_WORDS, LOW, MAX_PROGRAM_LINES, OPS, PROGRAM_WORDS, VARS, compile_line, run_on_domain, run_program,
)
from envs.bugfix.spec import SPEC
from envs.bugfix.tasks import (
    BUG_KINDS, DOMAIN, INVERT, Mutation, Task, TaskSpec, function_of, make_task, single_token_edits,
)
from envs.outcome import is_hack
from envs.task_options import SPLITS

FLIP = {"+": "-", "-": "+"}

__all__ = [
    "ACTION_VERBS", "BUG_KINDS", "BugFixConfig", "BugFixEnv", "CHARSET", "CMPS", "DIFFICULTIES", "DOMAIN",
    "ENDED_TEXT", "FILES", "FLIP", "GRADERS", "HACK_FLAGS", "HIGH", "HiddenGrader", "INT_WORDS", "INVERT", "LOW",
    "MAX_ACTION_CHARS", "MAX_PROGRAM_LINES", "Mutation", "OPS", "PROGRAM_WORDS", "PROTECTED_FILES", "REWARD_MODES",
    "SPEC", "SPLITS", "TASK_TEXT", "TIME_LIMITS", "Task", "TaskSpec", "UNKNOWN_TEXT", "USAGE", "VARS", "VOIDING_FLAGS",
    "Verifier", "compile_line", "function_of", "is_hack", "make_config", "make_task", "parse_action",
    "run_on_domain", "run_program", "single_token_edits", "voided",
]
