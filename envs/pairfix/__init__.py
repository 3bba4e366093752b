"""PairFix: two agents repair one program split in two files (``agentrl/PairFix-v2``).

- ``tasks``: how a pair task is built from two BugFix tasks (composition ``a(b(x))``, where the
  bug is, the shared input sets);
- ``env``: ``PairFixEnv``, the turn-based two-agent env (a ``pettingzoo.AECEnv``);
- ``agents``: scripted pair agents (oracle, random) and ``run_pair_episode`` (import it from
  ``envs.pairfix.agents``);
- ``spec``: its :class:`envs.spec.EnvSpec`, exported as ``SPEC`` (two agents: ``envs.make_multi_agent``).
"""

from envs.pairfix.env import DEFAULT_TURNS_PER_AGENT, SEND_USAGE, PairFixEnv, TextObservation, other, task_text
from envs.pairfix.spec import SPEC
from envs.pairfix.tasks import AGENTS, BUG_PLACES, PairTask, bug_place, indices_with_bug_in, make_pair_task, run_pair

__all__ = ["AGENTS", "BUG_PLACES", "DEFAULT_TURNS_PER_AGENT", "PairFixEnv", "PairTask", "SEND_USAGE", "SPEC",
           "TextObservation", "bug_place", "indices_with_bug_in", "make_pair_task", "other", "run_pair", "task_text"]
