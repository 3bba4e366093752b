"""``TextEnv``: the frame every one-agent text env of the harness shares.

A text env takes one tool call per ``step()`` (an action string) and answers with text. The base
class owns what every such env repeats: the turn counter, the run of consecutive format errors and
its limit, the time limit (``max_turns``; with ``time_limit="termination"`` every observation that
does not end the episode ends with ``turns left : N``), ending an episode through the rules of
``envs.stop`` (``terminated`` / ``truncated`` and the end-of-episode info), the cumulative train
reward and simulated tool seconds, ``render`` and the Text action / observation spaces.

Each env writes its own parts: ``_start(split, index)`` (pick the task, reset the env's own state,
return the reset text), ``_parse(action)`` (a parsed action, or a format-error message),
``_run(parsed)`` (one well-formed action as a :class:`Turn`; the default draws the simulated
latency from ``BASE_SECONDS`` and calls ``_execute(kind, arg)``), ``_env_info()`` (its info keys),
``_verify()`` and ``state_key()``. Hooks with a default cover the places where envs differ.
Pure Python, no I/O, no torch.
"""

from __future__ import annotations

import string
from dataclasses import dataclass

import gymnasium as gym
import numpy as np

from envs.stop import StopReason, StopRule, rule_for
from envs.task_options import task_from_options

#: characters an action / observation may contain (the Text spaces of the LongHorizon envs)
CHARSET = string.ascii_letters + string.digits + string.punctuation + " \n"
#: characters a well-formed action may contain: no whitespace other than the ASCII space
ACTION_CHARSET = frozenset(string.ascii_letters + string.digits + string.punctuation + " ")
MAX_ACTION_CHARS = 64
MAX_OBS_CHARS = 1 << 20
TIME_LIMITS = ("truncation", "termination")


def check_int(name: str, value, low: int, high: int, note: str = "") -> None:
    """``ValueError`` naming ``name`` unless ``value`` is an int (not a bool) in ``low..high``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not low <= value <= high:
        raise ValueError(f"{name}={value!r} out of range; allowed: an int in {low}..{high}{note}")


def split_words(action, actions_line: str, max_chars: int = MAX_ACTION_CHARS,
                charset: frozenset = ACTION_CHARSET) -> list[str] | str:
    """The words of ``action`` (separated by runs of ASCII spaces), or the format-error message
    when it is not a string, longer than ``max_chars``, holds a character outside ``charset``
    (any other whitespace) or has no word; the message ends with ``actions_line``."""
    if not isinstance(action, str) or len(action) > max_chars:
        return f"error: malformed action : too long .\n{actions_line}"
    if not charset.issuperset(action):
        return f"error: malformed action : whitespace .\n{actions_line}"
    words = [w for w in action.split(" ") if w]
    if not words:
        return f"error: malformed action : empty .\n{actions_line}"
    return words


@dataclass
class Turn:
    """What one ``step()`` produced before the frame adds limits and the end of the episode:
    the tool output, its ``tool_status``, its simulated seconds, the reward and the stop reason
    (None: the episode goes on)."""

    text: str
    status: str
    seconds: float
    reward: float = 0.0
    stop: StopReason | None = None


class TextEnv(gym.Env):
    """Base of the one-agent text envs (module docstring): turns, format errors, time limit,
    stop rules, render and spaces. Subclasses set ``max_turns``, ``max_format_errors``,
    ``time_limit`` (attributes or properties) and implement the env-specific hooks."""

    metadata = {"render_modes": ["ansi"], "render_fps": 4}
    #: the ``render_mode`` values the constructor's error message lists
    RENDER_MODES_ALLOWED = "None, ansi"
    #: appended to the last observation by ``render()``
    RENDER_SUFFIX = ""
    #: base simulated latency (seconds) per action kind, for the default ``_run``
    BASE_SECONDS: dict[str, float] = {}

    # ------------------------------------------------------------------ construction
    def _init_frame(self, render_mode: str | None, action_space: gym.Space, observation_space: gym.Space) -> None:
        """Validate and set ``render_mode``, set the spaces; no episode is running yet."""
        if render_mode not in (None, *self.metadata["render_modes"]):
            raise ValueError(f"render_mode={render_mode!r} unknown; allowed: {self.RENDER_MODES_ALLOWED}")
        self.render_mode = render_mode
        self.action_space = action_space
        self.observation_space = observation_space
        self._done = True
        self._last_obs = ""

    def _init_limits(self, max_turns: int, max_format_errors: int, time_limit: str) -> None:
        """Validate and set the turn limit, the format-error limit and the time-limit kind."""
        check_int("max_turns", max_turns, 1, 100000)
        check_int("max_format_errors", max_format_errors, 1, 1000)
        if time_limit not in TIME_LIMITS:
            raise ValueError(f"time_limit={time_limit!r} unknown; allowed: {', '.join(TIME_LIMITS)}")
        self.max_turns = max_turns
        self.max_format_errors = max_format_errors
        self.time_limit = time_limit

    # ------------------------------------------------------------------ Gymnasium API
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        """Seed, pick the task from ``options`` (``envs.task_options``), reset the frame's counters
        and the env's state (``_start``); the observation is the start text (with ``turns left``)."""
        super().reset(seed=seed)
        split, index = task_from_options(options, self.np_random)
        self._turn = 0
        self._format_errors = 0
        self._tool_seconds = 0.0
        self._train_reward = 0.0
        text = self._start(split, index)
        self._done = False
        self._last_obs = self._with_turns_left(text)
        return self._last_obs, self._info(0.0, "ok")

    def step(self, action):
        """One turn: parse, run (or count a format error), apply the limits, end the episode
        through ``envs.stop.rule_for`` when a stop reason is set."""
        self._check_step(action)
        self._turn += 1
        parsed = self._parse(action)
        if isinstance(parsed, str):  # a format error: its message
            turn = self._format_error_turn(parsed)
        else:
            self._format_errors = 0
            turn = self._run(parsed)
        self._add_tool_seconds(turn.seconds)
        self._train_reward += turn.reward
        if turn.stop is None:
            turn.stop = self._limit_stop()
        info = self._info(turn.seconds, turn.status)
        terminated = truncated = False
        text = turn.text
        if turn.stop is not None:
            rule = rule_for(turn.stop)
            terminated, truncated = rule.terminated, rule.truncated
            self._done = True
            info.update(self._end_info(turn.stop, rule))
            text = self._ended_text(text, turn.stop)
        else:
            text = self._with_turns_left(text)
        self._last_obs = text
        return text, turn.reward, terminated, truncated, info

    def render(self):
        """The last observation (``render_mode="ansi"``), else None."""
        if self.render_mode == "ansi":
            return self._last_obs + self.RENDER_SUFFIX
        return None

    # ------------------------------------------------------------------ the frame's parts
    def _with_turns_left(self, text: str) -> str:
        """``text`` plus the line ``turns left : N`` when ``time_limit="termination"``."""
        if self.time_limit != "termination":
            return text
        return f"{text}\nturns left : {self.max_turns - self._turn}"

    def _check_step(self, action) -> None:
        """Raise when no episode is running."""
        if self.task is None or self._done:
            raise RuntimeError("step() called before reset() or after the episode ended; call reset()")

    def _format_error_turn(self, message: str) -> Turn:
        """Count a format error (no state change, no latency); ``max_format_errors`` in a row end
        the episode."""
        self._format_errors += 1
        stop = StopReason.FORMAT_ERRORS if self._format_errors >= self.max_format_errors else None
        return Turn(message, "format_error", 0.0, 0.0, stop)

    def _limit_stop(self) -> StopReason | None:
        """The stop reason of an outside limit reached this turn: the turn limit."""
        if self._turn >= self.max_turns:
            return StopReason.TURN_LIMIT if self.time_limit == "termination" else StopReason.MAX_TURNS
        return None

    def _add_tool_seconds(self, seconds: float) -> None:
        """Add one call's simulated seconds to the episode's (rounded to 6 decimals)."""
        self._tool_seconds = round(self._tool_seconds + seconds, 6)

    def _run(self, parsed) -> Turn:
        """Run a well-formed ``(kind, arg)``: its latency ``BASE_SECONDS[kind] * U(0.5, 1.5)``
        (one draw of ``np_random``, rounded to ms), then ``_execute(kind, arg)``."""
        kind, arg = parsed
        seconds = round(self.BASE_SECONDS.get(kind, 0.0) * (0.5 + float(self.np_random.random())), 3)
        text, status, stop, reward = self._execute(kind, arg)
        self._last_kind = kind
        return Turn(text, status, seconds, reward, stop)

    def _ended_text(self, text: str, stop: StopReason) -> str:
        """The last observation of an episode ended by ``stop``: ``text`` plus a line saying so
        after too many format errors."""
        if stop is StopReason.FORMAT_ERRORS:
            return text + "\nepisode ended : too many format errors ."
        return text

    def _info(self, seconds: float, status: str) -> dict:
        """The info of every step and reset: the frame's keys, the env's (``_env_info``), then
        ``state_key``."""
        info = {
            "turn": self._turn,
            "tool_seconds": self._tool_seconds,
            "step_tool_seconds": seconds,
            "tool_status": status,
            "hack_flags": self._hack_flag_info(),
            "task_id": self.task.task_id,
            "split": self.task.split,
        }
        info.update(self._env_info())
        info["state_key"] = self.state_key()
        return info

    def _hack_flag_info(self) -> dict:
        """``info["hack_flags"]``: none (an env without a hack surface)."""
        return {}

    def _env_info(self) -> dict:
        """The env's own info keys (between ``split`` and ``state_key``)."""
        return {}

    def _end_info(self, stop: StopReason, rule: StopRule) -> dict:
        """The keys added at the end: ``stop_reason``, ``masked``, ``verified`` (None when masked)
        and ``train_reward``."""
        return {
            "stop_reason": stop.value,
            "masked": rule.masked,
            "verified": None if rule.masked else self._verify(),
            "train_reward": self._train_reward,
        }

    # ------------------------------------------------------------------ the env's parts
    def _start(self, split: str, index: int) -> str:  # pragma: no cover - interface
        """Reset the env's state for task ``index`` of ``split``; the reset text."""
        raise NotImplementedError

    def _parse(self, action):  # pragma: no cover - interface
        """A parsed well-formed action, or the format-error message (a str)."""
        raise NotImplementedError

    def _execute(self, kind: str, arg):  # pragma: no cover - interface
        """``(text, tool_status, stop_reason | None, reward)`` of one well-formed action."""
        raise NotImplementedError

    def _verify(self) -> int:  # pragma: no cover - interface
        """The evaluation verifier's 0/1 verdict on the final state."""
        raise NotImplementedError

    def state_key(self) -> int:  # pragma: no cover - interface
        """The anchor key of the current state."""
        raise NotImplementedError
