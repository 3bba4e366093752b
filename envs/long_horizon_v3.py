"""LongHorizonV3Env: one decision per stage, each read off a rule table seen at the start.

Its spec is ``SPEC`` (``envs.spec.EnvSpec``; ``envs/__init__.py`` registers it with Gymnasium as
``agentrl/LongHorizon-v3`` beside ``agentrl/LongHorizon-v1``).
Pure Python, no I/O, no torch.
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
    name="long_horizon_v3",
    id="agentrl/LongHorizon-v3",
    entry_point="envs.long_horizon_v3:LongHorizonV3Env",
    scripted_agents="envs.long_horizon_v3_agents:make_agent",
    floor_agents="envs.long_horizon_v3_agents:FLOOR_AGENTS",
    instructions="envs.long_horizon_v3:INSTRUCTIONS",
)

# The inputs a stage can fail on (the keys of the notes' table) and the approach names (its
# values). Both splits draw from all of them: every word a held-out episode shows or needs is
# shown and needed in train episodes too.
INPUTS = ("boundary", "empty", "load", "negative", "cold", "restart", "large", "unicode")
FIX_NAMES = tuple("ABCDEFGH")
# Words of the optional verbose filler (no numbers, none of the inputs or approach names).
FILLER_WORDS = (
    "log", "info", "debug", "trace", "worker", "thread", "queue", "cache", "hit", "miss",
    "request", "handled", "retry", "latency", "bytes", "write", "flush", "sync", "heartbeat",
    "shard", "node", "lock", "acquired", "released", "batch", "commit", "gc", "pause", "socket",
    "open", "closed",
)
FILLER_WORDS_PER_LINE = 10
PRINT_MAX = 199  # largest integer the vocabulary has; larger counts print as "many"

ACTIONS_LINE = "actions : read notes | status | fix input X | submit | forfeit"
# The env for a model that has never seen it (``SPEC.instructions``, a chat system prompt; a Hugging
# Face policy uses it with ``policy.env_instructions=true``): the tools and the action grammar.
INSTRUCTIONS = """\
You finish a task of stages by calling tools. Each stage fails on one input and is fixed by the approach the notes give for that input.
Reply with exactly one action per turn: one line of words separated by single spaces, and nothing else (no quotes, no code blocks, no explanations).
Actions:
read notes : show the notes, a table of inputs each followed by its approach, e.g. notes : boundary C , empty A ; only before the first fix (then they are archived)
status : show how many stages are left and the input the current stage fails on
fix INPUT APPROACH : fix the current stage, which fails on INPUT, with APPROACH (a letter A to H), e.g. fix boundary C
submit : end the episode once no stages are left; it succeeds only if every stage got the approach the notes give for its input
forfeit : end the episode
A wrong approach is not reported: the next stage is shown as after a right one, and the episode can no longer succeed.
A good episode: read notes, then for each stage that fails on an input, fix that input with its approach from the notes, and submit when no stages are left.
Several malformed or unknown actions in a row end the episode."""

# Simulated base latency (seconds) per action kind; each call costs base * U(0.5, 1.5).
_BASE_SECONDS = {"read": 0.5, "status": 0.2, "fix": 2.0, "submit": 3.0}
_TABLE_SALT, _SEQUENCE_SALT = 0x10C62, 0x10C63


def _num(n: int) -> str:
    """``n`` as a vocabulary word: the integer itself up to PRINT_MAX, else ``many``."""
    return str(n) if 0 <= n <= PRINT_MAX else "many"


def table_parity(table: dict) -> int:
    """Parity (0 even, 1 odd) of the table as a permutation: its inputs in ``INPUTS`` order,
    their approaches compared in alphabetical order (the number of inversions mod 2)."""
    letters = [table[i] for i in INPUTS if i in table]
    inversions = sum(a > b for k, a in enumerate(letters) for b in letters[k + 1:])
    return inversions % 2


@dataclass(frozen=True)
class LongHorizonV3Task:
    """One task: a deterministic function of ``(split, index, n_rules, n_stages)``.

    ``table``: input -> approach (the first ``n_rules`` of ``INPUTS``, ``n_rules`` distinct
    approaches of the 8); ``order``: the inputs in the order the notes list them (``INPUTS``
    order: the table has one layout, so a rule sits at the same place in the notes and in the
    summary of every task, and the tiny policy can find it by place as well as by content);
    ``stages``: the input stage ``k``
    (0-based) fails on, every input of the table at least once. The table depends on
    ``(split, index, n_rules)`` only (one task index is one table at every horizon). Train tables
    are even permutations and held-out tables odd ones (``table_parity``), so no held-out table
    equals a train table, while every (input, approach) pair occurs in both splits (n_rules >= 3).
    """

    task_id: str
    split: str
    index: int
    table: dict
    order: tuple
    stages: tuple

    def answer(self, stage: int) -> str:
        """The approach that fixes stage ``stage`` (0-based)."""
        return self.table[self.stages[stage]]

    def notes(self) -> str:
        """The notes' table in its listed order, each approach right after its input:
        ``"boundary C , empty A"``."""
        return " , ".join(f"{i} {self.table[i]}" for i in self.order)


def make_task(split: str, index: int, n_rules: int, n_stages: int) -> LongHorizonV3Task:
    """Task ``index`` (any int >= 0) of ``split``; its own seed streams, independent of the env seed."""
    if split not in SPLITS:
        raise ValueError(f"split={split!r} unknown; allowed: {', '.join(SPLITS)}")
    s = SPLITS.index(split)
    rng = np.random.default_rng([s, index, n_rules, _TABLE_SALT])
    inputs = list(INPUTS[:n_rules])
    letters = [FIX_NAMES[int(i)] for i in rng.choice(len(FIX_NAMES), size=n_rules, replace=False)]
    table = dict(zip(inputs, letters))
    if table_parity(table) != s:
        # swap the approaches of the two inputs first in INPUTS order: flips the parity
        a, b = sorted(inputs, key=INPUTS.index)[:2]
        table[a], table[b] = table[b], table[a]
    seq = np.random.default_rng([s, index, n_rules, n_stages, _SEQUENCE_SALT])
    stages = inputs + [inputs[int(i)] for i in seq.integers(n_rules, size=n_stages - n_rules)]
    stages = [stages[int(i)] for i in seq.permutation(n_stages)]
    return LongHorizonV3Task(f"lh3-{split}-{index}", split, index, table, tuple(inputs), tuple(stages))


class LongHorizonV3Env(TextEnv):
    """Finish ``n_stages`` stages, each with the approach a rule table read at the start gives.

    ## Description
    The notes hold a table of ``n_rules`` rules, each an input followed by its approach
    ("boundary C"), always the first ``n_rules`` inputs of ``INPUTS`` in that order, each with its
    own approach. Every stage fails on one input of the table (the observation names it: "stage 5 :
    fails on cold ."); the one decision of the stage is ``fix input X``: the stage's input, then
    an approach ``X``, and only the approach the table gives for that input fixes it. A wrong
    ``fix`` is silent: the stage is marked done and the next stage is shown, exactly as after a
    right one, and the episode can no longer be resolved. ``submit`` after the
    last stage ends the episode: resolved iff every stage got its right approach. The notes can be
    read only before the first ``fix`` (then they are archived), so the table seen at the start is
    what every later decision needs; ``memory_facts()`` carries it (``pending``), so a
    ``structured_summary`` compression keeps it, a ``lossy_summary`` or ``recent`` one loses it.

    **Unit of time.** One ``step()`` call = one turn = one tool call (a malformed action is a turn
    too). The oracle takes ``n_stages + 2`` turns (read, ``n_stages`` fixes, submit): ``n_stages``
    is the number of decisions that can each fail the episode; ``verbose`` adds filler words to
    every ``fix`` output (context length without decisions).

    ## Action (one tool call, words separated by spaces, all in the vocabulary)
    ```
    read notes     "notes : boundary C , empty A , ... ." and the current stage; before the first fix only
    status         "status : <k> stages left , stage <n> fails on <input> ."
    fix input X    apply approach X (A..H) to the current stage, naming its input; the next stage is
                   shown (another input than the stage's: a domain error naming the stage's input)
    submit         end the episode; verified against the hidden state
    forfeit        end the episode, reward 0
    ```
    Anything else (unknown word, missing / extra / out-of-range argument, empty string,
    ``compact`` without the compression wrapper, any whitespace other than ASCII spaces, more than
    64 characters) is a format error: an error observation, no state change,
    ``tool_status="format_error"``; it still costs a turn.

    ## Observation
    Text of vocabulary words only; no number except the stage counters. ``reset`` returns the
    task statement (``task_statement()``) and the first stage's line. Domain errors ("the notes
    are archived", "no stages left", ``fix`` naming another input) have ``tool_status="error"``.

    ## Rewards
    1.0 on the ``submit`` that is verified correct, 0 otherwise (sparse, end only).

    ## Episode end
    ``info["stop_reason"]`` follows ``envs.stop.rule_for``: ``submitted_resolved`` /
    ``submitted_failed`` (``submit``), ``forfeit``, ``format_errors`` (``max_format_errors``
    consecutive format errors) are terminated; turn ``max_turns`` reached without an end is
    ``max_turns`` (truncated) with ``time_limit="truncation"``, or ``turn_limit`` (terminated, and
    every observation ends with ``turns left : N``) with ``time_limit="termination"``.

    ## Info
    Every step (and reset): ``turn``, ``tool_seconds``, ``step_tool_seconds``, ``tool_status``
    (``ok|error|format_error``), ``hack_flags`` (always ``{}``), ``task_id``, ``split``,
    ``stages_left``, ``wrong_fixes`` (stages fixed with a wrong approach so far),
    ``first_wrong_stage`` (1-based, 0 = none), ``redundant_actions`` (re-reading the notes,
    ``status`` right after ``status``, ``fix`` with no stage left), ``state_key``. At the end
    additionally ``stop_reason``, ``masked`` (False), ``verified`` (0/1, re-checked from the hidden
    state), ``train_reward``.

    ``state_key``: a stable hash (``envs.state_key``) of what future tool outputs depend on: the
    task and env shape, the stages finished and whether a stage was fixed wrongly (the ``submit``
    output depends on it). Not the turn counter nor whether the notes were read.

    ## Arguments
    ``n_stages`` (``n_rules``..1000, default 8): stages, one decision each. ``n_rules`` (2..8,
    default 4): rules in the table. ``verbose`` (0..10000, default 0): filler words per ``fix``
    output. ``max_turns`` (1..100000, default ``n_stages + 6``). ``time_limit`` (``truncation`` |
    ``termination``, default ``truncation``). ``max_format_errors`` (1..1000, default 3).
    ``render_mode``: ``None`` or ``"ansi"``. ``check_prob`` (0..1, default 0): after each
    ``fix``, with this probability the output starts with ``test : passed .`` or ``test : failed .``
    (whether that fix held; the structured summary's code state keeps "a test failed"): progress observable to a
    degree, so a critic can tell a lost episode from the context (0 = a wrong fix is silent; the
    decision problem is the same at every value). Every argument is validated in the constructor
    (a one-line ``ValueError`` naming it and the allowed values).
    ``reset(options={"task_index": i, "split": "train"|"heldout"})`` picks task ``i`` (any int
    >= 0); without ``task_index`` the index is drawn from ``self.np_random``.

    ## Version History
    - v3: ``fix`` names the input before the approach, written right after its input in the notes (``lh3-`` ids).
    - v2: a new task family: every stage a lookup of its input in the notes' table; no ``inspect`` / ``try``.
    - v1: procedural task pools, train / held-out keys disjoint (even / odd), ``time_limit``.
    - v0: 64 train / 16 held-out task instances.
    """

    BASE_SECONDS = _BASE_SECONDS

    def __init__(
        self,
        n_stages: int = 8,
        n_rules: int = 4,
        verbose: int = 0,
        max_turns: int | None = None,
        max_format_errors: int = 3,
        time_limit: str = "truncation",
        render_mode: str | None = None,
        check_prob: float = 0.0,
    ) -> None:
        check_int("n_rules", n_rules, 2, len(INPUTS))
        if isinstance(check_prob, bool) or not isinstance(check_prob, (int, float)) or not 0.0 <= check_prob <= 1.0:
            raise ValueError(f"check_prob={check_prob!r} out of range; allowed: a number in [0, 1]")
        check_int("n_stages", n_stages, n_rules, 1000, f" (at least n_rules={n_rules})")
        check_int("verbose", verbose, 0, 10000)
        self._init_limits(n_stages + 6 if max_turns is None else max_turns, max_format_errors, time_limit)
        self._init_frame(render_mode, spaces.Text(MAX_ACTION_CHARS, min_length=0, charset=CHARSET),
                         spaces.Text(MAX_OBS_CHARS, min_length=1, charset=CHARSET))
        self.n_stages = n_stages
        self.n_rules = n_rules
        self.verbose = verbose
        self.check_prob = float(check_prob)

        self.task: LongHorizonV3Task | None = None
        identity = {"env": "LongHorizon-v3", "n_stages": n_stages, "n_rules": n_rules, "verbose": verbose}
        if self.check_prob:
            identity["check_prob"] = self.check_prob
        self._key_identity = format(stable_state_key(identity), "016x")
        self._key_memo = KeyMemo()

    # ------------------------------------------------------------------ TextEnv parts
    def _start(self, split: str, index: int) -> str:
        """Pick task ``index`` of ``split``, reset the episode state; the reset text is the task
        statement and the first stage's line."""
        self.task = make_task(split, index, self.n_rules, self.n_stages)
        self._stages_done = 0
        self._fixes: list[str] = []
        self._wrong = 0
        self._first_wrong = 0
        self._notes_read = False
        self._last_kind = ""
        self._redundant = 0
        self._submitted = False
        self._failed_check_shown = False
        return f"{self.task_statement()}\n{self._stage_line()}"

    # ------------------------------------------------------------------ contract methods
    def task_statement(self) -> str:
        """The goal, the lookup rule, the notes rule and the action grammar (no task facts)."""
        self._require_task()
        return "\n".join([
            "task : fix a stage that fails on input with the approach after input in the notes : fix input X . "
            f"finish {_num(self.n_stages)} stages , then submit .",
            "read the notes first : they are archived after the first fix .",
            ACTIONS_LINE,
        ])

    def memory_facts(self) -> MemoryFacts:
        """What a perfect summary keeps (read by compression strategies). ``pending`` carries the
        notes' table once it was read ("notes : boundary C , empty A ."; before: ``read notes``,
        after the archive without a read: ``notes are archived``); ``tried`` is empty (a wrong
        fix is silent); ``code_state`` ("5 stages left , then submit") / ``last_test_status``:
        the stages left, each followed by ", a test failed" once a ``check_prob`` line reported a
        wrong fix (``code_state`` is what ``structured_summary`` renders)."""
        self._require_task()
        left = self.n_stages - self._stages_done
        if self._notes_read:
            pending = f"notes : {self.task.notes()} ."
        elif self._stages_done == 0:
            pending = "read notes"
        else:
            pending = "notes are archived"
        failed = " , a test failed" if self._failed_check_shown else ""
        return MemoryFacts(
            task=self.task_statement(),
            tried=(),
            code_state=f"{_num(left)} stages left , then submit{failed}",
            pending=pending,
            last_test_status=f"{_num(left)} stages left{failed}",
        )

    def state_key(self) -> int:
        """The anchor key of the current state (``## Info``)."""
        self._require_task()
        state = (self.task.task_id, self._stages_done, self._wrong > 0)
        return self._key_memo.get(state, lambda: stable_state_key([self._key_identity, *state]))

    # ------------------------------------------------------------------ internals
    def _require_task(self) -> None:
        if self.task is None:
            raise RuntimeError("call reset() first")

    def _stage_line(self) -> str:
        k = self._stages_done
        if k >= self.n_stages:
            return "no stages left : submit ."
        return f"stage {_num(k + 1)} : fails on {self.task.stages[k]} ."

    def _verify(self) -> int:
        """The evaluation verifier: recomputes the verdict from the recorded fixes."""
        task = self.task
        return int(
            self._submitted
            and len(self._fixes) == self.n_stages
            and all(f == task.answer(k) for k, f in enumerate(self._fixes))
        )

    def _parse(self, action) -> tuple[str, object] | str:
        """``(kind, argument)`` for a well-formed action, else the format-error message."""
        words = split_words(action, ACTIONS_LINE)
        if isinstance(words, str):
            return words
        head, args = words[0], words[1:]
        if head == "read":
            return ("read", None) if args == ["notes"] else "error: usage: read notes"
        if head in ("status", "submit", "forfeit"):
            return (head, None) if not args else f"error: usage: {head} takes no argument"
        if head == "fix":
            if len(args) == 2 and args[0] in INPUTS and args[1] in FIX_NAMES:
                return ("fix", (args[0], args[1]))
            return f"error: usage: fix input X with X one of {' '.join(FIX_NAMES)}"
        return f"error: unknown action .\n{ACTIONS_LINE}"

    def _check_line(self, held: bool) -> str:
        """With probability ``check_prob`` (a draw of ``self.np_random``; none when it is 0) the
        line reporting whether the fix just applied held: ``"test : passed ."`` or
        ``"test : failed ."``, else nothing."""
        if not self.check_prob or float(self.np_random.random()) >= self.check_prob:
            return ""
        self._failed_check_shown |= not held
        return f"test : {'passed' if held else 'failed'} .\n"

    def _filler(self) -> str:
        """Exactly ``verbose`` filler words in lines of 10, drawn from ``self.np_random``."""
        if self.verbose == 0:
            return ""
        picks = self.np_random.integers(len(FILLER_WORDS), size=self.verbose)
        words = [FILLER_WORDS[int(p)] for p in picks]
        return "".join("\n" + " ".join(words[i:i + FILLER_WORDS_PER_LINE])
                       for i in range(0, len(words), FILLER_WORDS_PER_LINE))

    def _execute(self, kind: str, arg):
        """Run one well-formed action: ``(observation, tool_status, stop_reason|None, reward)``."""
        task = self.task
        left = self.n_stages - self._stages_done
        if kind == "read":
            self._redundant += int(self._notes_read)
            if self._stages_done > 0:
                return "error: the notes are archived after the first fix .", "error", None, 0.0
            self._notes_read = True
            return f"notes : {task.notes()} .\n{self._stage_line()}", "ok", None, 0.0
        if kind == "status":
            self._redundant += int(self._last_kind == "status")
            return f"status : {_num(left)} stages left , {self._stage_line()}", "ok", None, 0.0
        if kind == "fix":
            if left == 0:
                self._redundant += 1
                return "error: no stages left .", "error", None, 0.0
            named, approach = arg
            if named != task.stages[self._stages_done]:
                # a fix that names another input than the stage's: a domain error, no state change
                return f"error: {self._stage_line()}", "error", None, 0.0
            if approach != task.answer(self._stages_done):
                self._wrong += 1
                self._first_wrong = self._first_wrong or self._stages_done + 1
            self._fixes.append(approach)
            self._stages_done += 1
            return self._check_line(approach == task.answer(self._stages_done - 1)) + self._stage_line() + self._filler(), \
                "ok", None, 0.0
        if kind == "submit":
            self._submitted = True
            if left == 0 and self._wrong == 0:
                return "submitted : resolved .", "ok", StopReason.SUBMITTED_RESOLVED, 1.0
            return "submitted : failed .", "ok", StopReason.SUBMITTED_FAILED, 0.0
        assert kind == "forfeit", kind
        return "forfeit : episode ended .", "ok", StopReason.FORFEIT, 0.0

    def _env_info(self) -> dict:
        """Stages left, the wrong fixes and the redundant actions (``## Info``)."""
        return {
            "stages_left": self.n_stages - self._stages_done,
            "wrong_fixes": self._wrong,
            "first_wrong_stage": self._first_wrong,
            "redundant_actions": self._redundant,
        }

