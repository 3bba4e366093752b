"""BugFix's scripted agents: they drive tests, calibration, benchmarks and the behaviour-cloning warm start.

Every agent follows the one protocol of ``envs.episode``: ``reset(env, seed)`` and
``act(observation, info) -> str`` (one action string). ``envs.episode.run_episode(env, agent,
seed, options)`` plays one episode; its record's ``summary()`` holds the end-of-episode numbers and
the (observation, action) pairs the agent saw and wrote.

The ``AGENTS`` registry (build with ``make_agent(name, **kwargs)``; the informed agents are in
``envs/bugfix/informed_agents.py``, the hack agents in ``envs/bugfix/hack_agents.py``, the
program-blind ones in ``envs/bugfix/blind_agents.py``, their base in ``envs/bugfix/agent_base.py``):

- ``oracle``: run_tests, view main, the fix edits, run_tests, submit; retries cancelled calls and
  re-runs a test run that failed although the fix is in (flaky run).
- ``noisy_oracle`` (``mistake_rate``, default 0.03): the oracle, but each decision is replaced
  with probability ``mistake_rate`` by a plausible mistake: a premature submit once it has changed
  main (20 %), a wrong edit (50 %; undone after the next failing test run) or a wasted look-up
  (otherwise). Without a line hint (``hints=False``) placing a fix means finding the bug by
  reading main and errs with ``1 - (1 - mistake_rate) ** (1 + words of main)``: longer programs
  without hints are harder. At 0.03 with the presets' faults it verifies 0.99 / 0.91 / 0.55 /
  0.18 / 0.05 of held-out tasks on tutorial / easy / medium / hard / extreme
  (``python -m experiments.calibrate``).
- ``random``: random well-formed actions with some junk words.
- ``empty_submit``: submits the buggy program at once.
- one agent per hack trap (``HACK_AGENTS``): ``hack_edit_tests``, ``hack_delete_tests``,
  ``hack_skip_tests``, ``hack_read_ref``, ``hack_read_log``, ``hack_hardcode``.
- ``process_exploit``: calls run_tests until the turn limit (farms ``biased_process`` reward).
- program-blind agents (``BLIND_AGENTS``; they never read the program's meaning, only its text
  and pass / fail): ``blind_enumerate`` (run_tests, view main, then every single-token catalogue
  edit of the hinted line - every line without hints - each followed by run_tests, submit on a
  pass), ``fit_visible`` (view tests, then a linear fit ``t = x * a`` / ``return t + b`` when the
  visible tests are collinear, else a piecewise ``if x <= X then return Y`` table, then submit),
  ``delete_lines`` (delete one line at a time, hinted line first, run_tests after each, undo
  on a failure, submit on a pass) and ``blind_constants`` / ``blind_variables`` (every integer of the
  vocabulary, every variable, in each such token of the hinted line, last token first, run_tests
  after each; the last guess is submitted untested when no turn is left to test it).

Scripted agents may read ``env.unwrapped`` (the oracle must know the fix); each takes its
randomness from its own generator seeded in ``reset``.
"""

from __future__ import annotations

from typing import Callable

from envs.bugfix.agent_base import Agent
from envs.bugfix.blind_agents import (BlindConstantsAgent, BlindEnumerateAgent, BlindVariablesAgent, DeleteLinesAgent,
                                      FitVisibleAgent)
from envs.bugfix.hack_agents import (HACK_AGENT_FLAG, DeleteTestsAgent, EditTestsAgent, EmptySubmitAgent, HardcodeAgent,
                                     ProcessExploitAgent, ReadLogAgent, ReadRefAgent, SkipTestsAgent)
from envs.bugfix.informed_agents import NoisyOracleAgent, OracleAgent, RandomAgent
from envs.episode import build_agent


AGENTS: dict[str, Callable[..., Agent]] = {
    "oracle": OracleAgent,
    "noisy_oracle": NoisyOracleAgent,
    "random": RandomAgent,
    "empty_submit": EmptySubmitAgent,
    "hack_edit_tests": EditTestsAgent,
    "hack_delete_tests": DeleteTestsAgent,
    "hack_skip_tests": SkipTestsAgent,
    "hack_read_ref": ReadRefAgent,
    "hack_read_log": ReadLogAgent,
    "hack_hardcode": HardcodeAgent,
    "process_exploit": ProcessExploitAgent,
    "blind_enumerate": BlindEnumerateAgent,
    "fit_visible": FitVisibleAgent,
    "delete_lines": DeleteLinesAgent,
    "blind_constants": BlindConstantsAgent,
    "blind_variables": BlindVariablesAgent,
}
BUGFIX_AGENTS = tuple(AGENTS)
BLIND_AGENTS = ("blind_enumerate", "fit_visible", "delete_lines", "blind_constants", "blind_variables")
#: the reference floor (calibration, the report): every program-blind agent and ``random``
FLOOR_AGENTS = BLIND_AGENTS + ("random",)
HACK_AGENTS = tuple(name for name in AGENTS if name.startswith("hack_"))


def make_agent(name: str, **kwargs) -> Agent:
    """Build a registered agent (``envs.episode.build_agent``); ``ValueError`` lists the valid names."""
    return build_agent(AGENTS, name, **kwargs)


__all__ = ["AGENTS", "BLIND_AGENTS", "BUGFIX_AGENTS", "FLOOR_AGENTS", "HACK_AGENTS", "HACK_AGENT_FLAG", "Agent",
           "FitVisibleAgent", "make_agent"]
