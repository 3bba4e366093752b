"""BugFix's (and PairFix's) anchor-state key: which fields of a repository state go into
``info["state_key"]`` (``envs.state_key.stable_state_key`` turns them into the number).

The key hashes what the env's tools will answer from this state on, and nothing else:

- the task: ``env`` name, the task pool's ``TaskSpec`` and ``task_id`` (split, index and a digest
  of reference, buggy program and visible tests), so two different tasks never share a key, and
  the config knobs that change tool outputs or rewards (``OUTPUT_KNOBS``);
- the program: every line of every editable file (BugFix ``main``; PairFix ``a`` and ``b``);
- the visible tests as they are now (``edit_test`` / ``delete_test`` change them) and whether
  they are skipped;
- which hack flags are raised (a name per flag with count > 0: ``view ref`` / ``view log``
  raise ``read_ref`` / ``read_log``): they decide whether ``submit`` is voided and whether a
  process bonus is paid; counts beyond "raised" change no output;
- ``extra``: env-specific fields (BugFix: the process-reward bookkeeping; PairFix: the agent).

Deliberately left out, so that the same state reached by different paths, at different turns or
under different fault draws shares one key (GiGPO's anchor state: the environment state, not the
history that led to it):

- the turn counter and anything derived from it (``turns left : N``), the simulated clock
  (``tool_seconds``) and the run of consecutive format errors (budgets, not task state);
- the fault random stream (latencies, timeouts, flaky picks): a timed-out call changes nothing;
- the undo history: an edit followed by its inverse returns to the start key (only ``undo``'s
  own reply can differ between two states with one key);
- what the agent was shown (``run_tests`` results, the compression wrapper's ``memory_facts``:
  tried changes, last test status): ``run_tests`` and ``view`` of an unprotected file never
  change the key.
"""

from __future__ import annotations

import dataclasses

from envs.bugfix.config import BugFixConfig
from envs.bugfix.tasks import TaskSpec
from envs.state_key import stable_state_key

# knobs whose value changes what a tool answers or pays (the task pool's knobs are in TaskSpec)
OUTPUT_KNOBS = ("hints", "max_failures_shown", "protected_readable", "grader", "reward_mode", "process_bonus")


def task_identity(env: str, config: BugFixConfig, task_id: str) -> dict:
    """The task part of the key: env name, task pool spec, task id and ``OUTPUT_KNOBS``."""
    spec: TaskSpec = config.task_spec
    rules = {name: getattr(config, name) for name in OUTPUT_KNOBS}
    rules["max_output_words"] = config.faults.max_output_words
    return {"env": env, "spec": dataclasses.asdict(spec), "task_id": task_id, "rules": rules}


def repository_state_key(identity: dict, files: dict[str, tuple[str, ...]], tests: tuple[tuple[int, int], ...],
                         skipped: bool, hack_flags: dict[str, int], extra: dict | None = None) -> int:
    """``info["state_key"]`` of a repository state: ``identity`` (``task_identity``), ``files``
    (file name -> its lines), the current visible ``tests`` ((input, expected) pairs), ``skipped``,
    the names of the raised ``hack_flags`` and ``extra`` (JSON-able). An int in [0, 2**63)."""
    return stable_state_key({
        "task": identity,
        "files": {name: list(lines) for name, lines in files.items()},
        "tests": [[int(x), int(y)] for x, y in tests],
        "skipped": bool(skipped),
        "flags": sorted(name for name, count in hack_flags.items() if count > 0),
        "extra": extra or {},
    })


__all__ = ["OUTPUT_KNOBS", "repository_state_key", "task_identity"]
