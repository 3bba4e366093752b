"""LongHorizonEnv: many decisions, reward only at the end, facts revealed early that are needed late.

Its spec is ``SPEC`` (``envs.spec.EnvSpec``; ``envs/__init__.py`` registers it with Gymnasium as
``agentrl/LongHorizon-v1``). Pure Python, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from gymnasium import spaces

from envs.memory import MemoryFacts
from envs.spec import EnvSpec
from envs.state_key import KeyMemo, stable_state_key
from envs.stop import StopReason
from envs.task_options import SPLITS
from envs.text_env import CHARSET, MAX_ACTION_CHARS, MAX_OBS_CHARS, TextEnv, check_int, split_words

SPEC = EnvSpec(
    name="long_horizon",
    id="agentrl/LongHorizon-v1",
    entry_point="envs.long_horizon:LongHorizonEnv",
    scripted_agents="envs.long_horizon_agents:make_agent",
    floor_agents="envs.long_horizon_agents:FLOOR_AGENTS",
)
APPROACH_NAMES = tuple("ABCDEFGH")
# Why a wrong approach fails. Fixed per (split, task_index, approach): trying it again gives the
# same reason. The held-out split may also use the two reasons the train split never shows.
REASONS_TRAIN = (
    "fails at the input boundary",
    "fails on empty input",
    "fails under concurrent load",
    "fails on negative numbers",
    "fails when the cache is cold",
    "fails after a restart",
)
REASONS_HELDOUT_ONLY = (
    "fails on large input",
    "fails with unicode names",
)
# Log-line filler of the verbose observations. None of these words is a keyword the env's
# meaningful lines use (approach, fails, works, key, left, fix, tests, notes ...).
FILLER_WORDS = (
    "log", "info", "debug", "trace", "worker", "thread", "queue", "cache", "hit", "miss",
    "request", "handled", "in", "ms", "retry", "latency", "bytes", "write", "flush", "sync",
    "heartbeat", "shard", "node", "lock", "acquired", "released", "batch", "commit", "gc",
    "pause", "socket", "open", "closed",
)
FILLER_WORDS_PER_LINE = 10
N_LOG_PAGES = 5
KEY_RANGE = (0, 99)  # inclusive; the key the notes reveal and `submit N` must match
PRINT_MAX = 199  # largest integer the vocabulary has; larger counts print as "many"

# The Text spaces use envs.text_env's CHARSET: random Text actions that check_env samples are
# format errors, never exceptions.
ACTIONS_LINE = "actions : read notes | status | inspect N | step | try X | submit N | forfeit"

# Simulated base latency (seconds) per action kind; each call costs base * U(0.5, 1.5).
_BASE_SECONDS = {"read": 0.5, "status": 0.2, "inspect": 1.0, "step": 2.0, "try": 5.0, "submit": 3.0}


def _num(n: int) -> str:
    """``n`` as a vocabulary word: the integer itself up to PRINT_MAX, else ``many``."""
    return str(n) if -99 <= n <= PRINT_MAX else "many"


def _parse_int(word: str) -> int | None:
    """The integer of ``word`` when it is written canonically (``"7"``, ``"-3"``), else None."""
    try:
        value = int(word)
    except ValueError:
        return None
    return value if str(value) == word else None


@dataclass(frozen=True)
class LongHorizonTask:
    """One task instance: a deterministic function of ``(split, index, n_approaches)``. Train keys
    are even and held-out keys odd, so no held-out task equals a train task."""

    task_id: str
    split: str
    index: int
    key: int
    correct: str  # the approach that works
    reasons: dict  # wrong approach name -> failure reason phrase


def make_task(split: str, index: int, n_approaches: int) -> LongHorizonTask:
    """The task instance ``index`` (any int >= 0) of ``split`` (its own seed stream; independent of
    the env seed)."""
    rng = np.random.default_rng([SPLITS.index(split), index, n_approaches, 0x10C6])
    names = APPROACH_NAMES[:n_approaches]
    correct = names[int(rng.integers(n_approaches))]
    pool = REASONS_TRAIN if split == "train" else REASONS_TRAIN + REASONS_HELDOUT_ONLY
    wrong = [n for n in names if n != correct]
    picks = rng.choice(len(pool), size=len(wrong), replace=len(wrong) > len(pool))
    key = 2 * int(rng.integers((KEY_RANGE[1] + 1) // 2)) + SPLITS.index(split)
    return LongHorizonTask(
        task_id=f"lh-{split}-{index}",
        split=split,
        index=index,
        key=key,
        correct=correct,
        reasons={n: pool[int(p)] for n, p in zip(wrong, picks)},
    )


class LongHorizonEnv(TextEnv):
    """Fix a simulated system over many turns; the answer needs a fact read at the very start.

    ## Description
    The system has ``n_stages`` stages to finish and ``n_approaches`` candidate fixes named
    ``A``, ``B``, ... . Exactly one approach works; every other one fails deterministically with a
    stated reason ("approach A fails at the input boundary"), the same reason every time it is
    tried, and is rolled back (no state change). The notes hold a key (an integer 0..99) that the
    final ``submit`` needs; they can be read only before the first ``step`` and are archived after
    it, so the fact must be carried through the whole episode. The task is solved when the working
    approach is applied, every stage is finished and the submitted number is the key. An agent that
    forgets what it tried repeats failed approaches; ``info`` counts that.

    **Unit of time.** One ``step()`` call = one turn = one tool call (a malformed action is a turn
    too). Decision count and context length are independent knobs (claim C9): ``n_stages`` sets how
    many decisions a solution needs (``n_stages + 3`` turns for the oracle: read, try, ``n_stages``
    steps, submit), ``verbose`` sets how many filler log words each tool output carries.

    ## Action (one tool call, whitespace-separated words; one or two words, all in the vocabulary)
    ```
    read notes     show the notes (the key); only before the first `step`
    status         "status : <k> stages left , fix <X|none> , tests <passing|failing|not run>"
    inspect N      log page N (N = 1..5): verbose filler, no information
    step           finish one stage
    try X          apply approach X (X in A.. up to n_approaches); wrong ones fail and roll back
    submit N       end the episode with answer N (integer); verified against the hidden state
    forfeit        end the episode, reward 0
    ```
    Anything else (unknown word, missing / extra / out-of-range argument, non-canonical integer,
    empty string, ``compact`` without the compression wrapper) is a format error: an error
    observation, no state change, ``tool_status="format_error"``. Format errors still cost a turn.

    ## Observation
    Text. ``reset`` returns the task statement (``task_statement()``). ``step`` returns the tool
    output: one meaningful first line, then for ``read notes`` / ``inspect`` / ``step`` / ``try``
    exactly ``verbose`` filler words in lines of 10. Counts above 199 print as ``many``. Domain
    errors ("no stages left", "notes are archived") have ``tool_status="error"``.

    ## Rewards
    1.0 on the ``submit`` that is verified correct, 0 otherwise (sparse, end only). No process reward.

    Words are separated by ASCII spaces; any other whitespace character (line break, tab,
    no-break space, Unicode separators) or an action longer than 64 characters is a format error.

    ## Episode end
    ``info["stop_reason"]`` follows ``envs.stop.rule_for``: ``submitted_resolved`` /
    ``submitted_failed`` (``submit``), ``forfeit``, ``format_errors`` (``max_format_errors``
    consecutive format errors) are terminated; turn ``max_turns`` reached without an end is
    ``max_turns`` (truncated) with ``time_limit="truncation"``, or ``turn_limit`` (terminated, and
    every observation ends with ``turns left : N``) with ``time_limit="termination"``. Episodes are
    never masked here.

    ## Info
    Every step (and reset): ``turn``, ``tool_seconds`` (cumulative simulated), ``step_tool_seconds``,
    ``tool_status`` (``ok|error|format_error``), ``hack_flags`` (always ``{}``: no hack surface),
    ``task_id``, ``split``, ``stages_left``, ``repeated_failed_approaches`` (cumulative: tries of
    an approach that already failed this episode), ``redundant_actions`` (cumulative: re-reading the
    notes, re-inspecting a page, ``status`` right after ``status``, ``step`` with no stage left,
    re-trying the applied approach). At the end additionally ``stop_reason``, ``masked`` (False),
    ``verified`` (0/1, re-checked from the hidden state), ``train_reward``.

    ``state_key`` (every step and reset; ``state_key()``): the anchor state, an int in [0, 2**63),
    a stable hash (``envs.state_key``, the same in every process) of what future tool outputs
    depend on: the task (``task_id``, ``n_stages``, ``n_approaches``, ``verbose``), stages
    finished, the applied fix, whether any approach was tried (``status`` shows it). Deliberately
    not the turn counter, so not ``turns left : N`` (``time_limit="termination"``): members that
    reach one state at different turns share one anchor (GiGPO's anchor state); nor the random
    stream, the run of format errors, or what only memory / info counters record (notes read,
    failed approaches, pages inspected: no tool answers differently because of them).

    ## Arguments
    ``n_stages`` (1..1000, default 8): stages to finish. ``n_approaches`` (2..8, default 4).
    ``verbose`` (0..10000, default 8): filler words per verbose output. ``max_turns`` (default
    ``n_stages + n_approaches + 4``: an agent that remembers what it tried always finishes, one that
    forgets runs out of turns on a share of tasks; see ``experiments.calibrate``). ``time_limit`` (``truncation`` | ``termination``,
    default ``truncation``). ``max_format_errors`` (default 3).
    ``reset(options={"task_index": i, "split": "train"|"heldout"})`` picks task ``i`` (any int
    >= 0) deterministically; without ``task_index`` the index is drawn from ``self.np_random``.
    ``render_mode``: ``None`` or ``"ansi"`` (returns the last observation). Every argument is
    validated in the constructor (``ValueError`` naming it and the allowed values).

    ## Version History
    - v1: procedural task pools, train / held-out keys disjoint (even / odd), ``time_limit``, lower ``max_turns``.
    - v0: 64 train / 16 held-out task instances; ``task_index`` out of range raised.
    """

    BASE_SECONDS = _BASE_SECONDS

    def __init__(
        self,
        n_stages: int = 8,
        n_approaches: int = 4,
        verbose: int = 8,
        max_turns: int | None = None,
        max_format_errors: int = 3,
        time_limit: str = "truncation",
        render_mode: str | None = None,
    ) -> None:
        check_int("n_stages", n_stages, 1, 1000)
        check_int("n_approaches", n_approaches, 2, len(APPROACH_NAMES))
        check_int("verbose", verbose, 0, 10000)
        self._init_limits(n_stages + n_approaches + 4 if max_turns is None else max_turns,
                          max_format_errors, time_limit)
        self._init_frame(render_mode, spaces.Text(MAX_ACTION_CHARS, min_length=0, charset=CHARSET),
                         spaces.Text(MAX_OBS_CHARS, min_length=1, charset=CHARSET))
        self.n_stages = n_stages
        self.n_approaches = n_approaches
        self.verbose = verbose
        self.approaches = APPROACH_NAMES[:n_approaches]

        self.task: LongHorizonTask | None = None
        # state_key: the env part (hashed once) and a memo (task id, stages done, fix, tried any) -> key
        self._key_identity = format(stable_state_key({"env": "LongHorizon-v1", "n_stages": n_stages,
                                                      "n_approaches": n_approaches, "verbose": verbose}), "016x")
        self._key_memo = KeyMemo()

    # ------------------------------------------------------------------ TextEnv parts
    def _start(self, split: str, index: int) -> str:
        """Pick task ``index`` of ``split``, reset the episode state; the reset text is the task
        statement."""
        self.task = make_task(split, index, self.n_approaches)
        self._stages_done = 0
        self._fix: str | None = None
        self._notes_read = False
        self._tried_any = False
        self._failed: list[str] = []  # failed approaches, in order of first failure
        self._inspected: set[int] = set()
        self._last_kind = ""
        self._repeated_failed = 0
        self._redundant = 0
        self._answer: int | None = None
        return self.task_statement()

    # ------------------------------------------------------------------ contract methods
    def task_statement(self) -> str:
        """The reset observation: goal, approach names, the notes rule and the action grammar."""
        self._require_task()
        return "\n".join(
            [
                "task : fix the system , finish every stage , then submit the key from the notes .",
                f"stages : {_num(self.n_stages)} . approaches : {' '.join(self.approaches)} . "
                "one works , the others fail .",
                "read the notes before the first step : they are archived after it .",
                ACTIONS_LINE,
            ]
        )

    def memory_facts(self) -> MemoryFacts:
        """What a perfect summary of the episode so far keeps (read by compression strategies).

        ``tried``: one line per failed approach, ``"approach A -> fails at the input boundary"``;
        ``code_state``: stages left and the applied fix; ``pending``: what remains, with the key
        once the notes were read; ``last_test_status``: ``tests passing|failing|not run``.
        """
        self._require_task()
        left = self.n_stages - self._stages_done
        pending = []
        if not self._notes_read and self._stages_done == 0:
            pending.append("read notes")
        if self._fix is None:
            pending.append("find the approach that works")
        if left > 0:
            pending.append(f"finish {_num(left)} stages")
        pending.append(f"submit {self.task.key}" if self._notes_read else "submit the key")
        return MemoryFacts(
            task=self.task_statement(),
            tried=tuple(f"approach {a} -> {self.task.reasons[a]}" for a in self._failed),
            code_state=f"{_num(left)} stages left , fix {self._fix or 'none'}",
            pending=" , ".join(pending),
            last_test_status=self._test_status(),
        )

    # ------------------------------------------------------------------ internals
    def _require_task(self) -> None:
        if self.task is None:
            raise RuntimeError("call reset() first")

    def _verify(self) -> int:
        """The evaluation verifier: re-checks the final hidden state and the submitted answer from
        scratch (kept separate from the reward computed in ``_execute``)."""
        task = self.task
        return int(
            self._answer is not None
            and self._answer == task.key
            and self._stages_done == self.n_stages
            and self._fix == task.correct
        )

    def _test_status(self) -> str:
        if self._fix is not None:
            return "tests passing"
        return "tests failing" if self._tried_any else "tests not run"

    def _parse(self, action) -> tuple[str, object] | str:
        """``(kind, argument)`` for a well-formed action, else the format-error message."""
        words = split_words(action, ACTIONS_LINE)
        if isinstance(words, str):
            return words
        head, args = words[0], words[1:]
        if head == "read":
            if args == ["notes"]:
                return ("read", None)
            return "error: usage: read notes"
        if head in ("status", "step", "forfeit"):
            if not args:
                return (head, None)
            return f"error: usage: {head} takes no argument"
        if head == "inspect":
            n = _parse_int(args[0]) if len(args) == 1 else None
            if n is not None and 1 <= n <= N_LOG_PAGES:
                return ("inspect", n)
            return f"error: usage: inspect N with N from 1 to {N_LOG_PAGES}"
        if head == "try":
            if len(args) == 1 and args[0] in self.approaches:
                return ("try", args[0])
            return f"error: usage: try X with X one of {' '.join(self.approaches)}"
        if head == "submit":
            n = _parse_int(args[0]) if len(args) == 1 else None
            if n is not None and -99 <= n <= PRINT_MAX:
                return ("submit", n)
            return "error: usage: submit N with N a number"
        return f"error: unknown action .\n{ACTIONS_LINE}"

    def _filler(self) -> str:
        """Exactly ``verbose`` log words in lines of 10, drawn from ``self.np_random``."""
        n = self.verbose
        if n == 0:
            return ""
        is_number = self.np_random.random(n) < 0.25
        numbers = self.np_random.integers(0, PRINT_MAX + 1, size=n)
        picks = self.np_random.integers(len(FILLER_WORDS), size=n)
        words = [str(int(v)) if num else FILLER_WORDS[int(p)] for num, v, p in zip(is_number, numbers, picks)]
        lines = [
            " ".join(words[i : i + FILLER_WORDS_PER_LINE])
            for i in range(0, len(words), FILLER_WORDS_PER_LINE)
        ]
        return "".join("\n" + line for line in lines)

    def _execute(self, kind: str, arg):
        """Run one well-formed action: ``(observation, tool_status, stop_reason|None, reward)``."""
        task = self.task
        left = self.n_stages - self._stages_done
        if kind == "read":
            if self._stages_done > 0:
                self._redundant += int(self._notes_read)
                return "error: the notes are archived after the first step .", "error", None, 0.0
            self._redundant += int(self._notes_read)
            self._notes_read = True
            return f"notes : the key is {task.key} ." + self._filler(), "ok", None, 0.0
        if kind == "status":
            self._redundant += int(self._last_kind == "status")
            obs = f"status : {_num(left)} stages left , fix {self._fix or 'none'} , {self._test_status()} ."
            return obs, "ok", None, 0.0
        if kind == "inspect":
            self._redundant += int(arg in self._inspected)
            self._inspected.add(arg)
            return f"log page {arg} :" + self._filler(), "ok", None, 0.0
        if kind == "step":
            if left == 0:
                self._redundant += 1
                return "error: no stages left .", "error", None, 0.0
            self._stages_done += 1
            return f"step done : {_num(left - 1)} stages left ." + self._filler(), "ok", None, 0.0
        if kind == "try":
            self._tried_any = True
            if arg == task.correct:
                if self._fix == arg:
                    self._redundant += 1
                    return f"approach {arg} is already applied .", "ok", None, 0.0
                self._fix = arg
                return f"approach {arg} works : tests passing ." + self._filler(), "ok", None, 0.0
            if arg in self._failed:
                self._repeated_failed += 1
            else:
                self._failed.append(arg)
            return f"approach {arg} {task.reasons[arg]} ." + self._filler(), "ok", None, 0.0
        if kind == "submit":
            self._answer = arg
            ok = self._fix == task.correct and left == 0 and arg == task.key
            if ok:
                return "submitted : resolved .", "ok", StopReason.SUBMITTED_RESOLVED, 1.0
            return "submitted : failed .", "ok", StopReason.SUBMITTED_FAILED, 0.0
        assert kind == "forfeit", kind
        return "forfeit : episode ended .", "ok", StopReason.FORFEIT, 0.0

    def _env_info(self) -> dict:
        """Stages left and the two cumulative counters (``## Info``)."""
        return {
            "stages_left": self.n_stages - self._stages_done,
            "repeated_failed_approaches": self._repeated_failed,
            "redundant_actions": self._redundant,
        }

    def state_key(self) -> int:
        """The anchor key of the current state (``## Info`` in the class docstring)."""
        self._require_task()
        state = (self.task.task_id, self._stages_done, self._fix, self._tried_any)
        # a state met before (this env, any episode) hashes nothing
        return self._key_memo.get(state, lambda: stable_state_key([self._key_identity, *state]))

