"""Simulated tool calls: every call returns ``(text, simulated seconds, status)``.

Nothing sleeps: latency is sampled from a seeded per-tool log-normal distribution and added to a
virtual clock (the env sums it into ``info["tool_seconds"]``). Faults are injected from the same
seeded stream:

- ``timeout``: the call is cancelled (no state change) and costs ``timeout_seconds``; the env ends
  the episode after ``max_consecutive_timeouts`` in a row (stop reason ``consecutive_timeouts``).
- ``flaky``: a test run reports one test wrongly (the env asks :meth:`ToolSimulator.flaky`).
- ``permission_denied``: decided by the env (protected paths), not random.
- ``clipped``: an output longer than ``max_output_words`` words is cut and marked ``[ clipped ]``.
- ``crash``: a rare infrastructure crash; the episode ends masked (never scored as a 0).

Every call consumes exactly five numbers of the stream (crash, timeout, flaky, flaky-pick and
latency draws), whatever happens (a flaky test run picks the misreported test with the call's own
``pick`` draw), so changing one fault rate never shifts the latency or faults of other calls
(common random numbers across configurations).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Callable

import numpy as np

# The values of info["tool_status"] (docs/interfaces.md).
STATUSES = ("ok", "error", "timeout", "permission_denied", "flaky", "clipped", "crash", "format_error")

# tool -> (median seconds, log-normal sigma). A timed-out call costs FaultConfig.timeout_seconds.
TOOL_LATENCY: dict[str, tuple[float, float]] = {
    "ls": (0.05, 0.3),
    "view": (0.1, 0.3),
    "edit": (0.2, 0.3),
    "replace": (0.2, 0.3),
    "insert": (0.2, 0.3),
    "delete": (0.2, 0.3),
    "undo": (0.1, 0.3),
    "run_tests": (2.0, 0.4),
    "submit": (3.0, 0.3),
    "give_up": (0.01, 0.1),
    "skip_tests": (0.05, 0.3),
    "edit_test": (0.2, 0.3),
    "delete_test": (0.2, 0.3),
}

TIMEOUT_TEXT = "error: tool timed out ( cancelled )"
CRASH_TEXT = "error: infrastructure crash"
CLIP_MARK = "[ clipped ]"

_BUFFER = 64  # numbers drawn from the env's generator at a time


@dataclass(frozen=True)
class FaultConfig:
    """Fault-injection and clock knobs (all probabilities are per tool call).

    timeout_prob: chance a call is cancelled. timeout_seconds: simulated cost of a cancelled call.
    max_consecutive_timeouts: timeouts in a row that end the episode. flaky_prob: chance a test run
    misreports one test. crash_prob: chance of an infrastructure crash (episode masked).
    max_output_words: longer outputs are clipped. latency_scale: multiplies every latency.
    """

    timeout_prob: float = 0.02
    timeout_seconds: float = 10.0
    max_consecutive_timeouts: int = 3
    flaky_prob: float = 0.02
    crash_prob: float = 0.001
    max_output_words: int = 80
    latency_scale: float = 1.0

    def __post_init__(self) -> None:
        for name in ("timeout_prob", "flaky_prob", "crash_prob"):
            p = getattr(self, name)
            if not 0.0 <= p <= 1.0:
                raise ValueError(f"{name} must be a probability in [0, 1], got {p!r}")
        if self.timeout_seconds < 0 or self.latency_scale < 0:
            raise ValueError("timeout_seconds and latency_scale must be >= 0 (simulated seconds)")
        if self.max_consecutive_timeouts < 1:
            raise ValueError(
                f"max_consecutive_timeouts must be >= 1, got {self.max_consecutive_timeouts}; "
                "use timeout_prob=0 to disable timeouts instead"
            )
        if not 10 <= self.max_output_words <= 200:
            raise ValueError(
                f"max_output_words must be in 10..200 (outputs must stay short for the policy), "
                f"got {self.max_output_words}"
            )

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))


@dataclass(frozen=True)
class ToolResult:
    text: str
    seconds: float
    status: str


def clip_words(text: str, max_words: int) -> tuple[str, bool]:
    """``text`` cut after ``max_words`` words (line structure kept) plus ``[ clipped ]``; and
    whether it was cut."""
    if text.count(" ") + text.count("\n") < max_words:  # cheap upper bound on the word count
        return text, False
    lines = text.split("\n")
    if sum(len(line.split()) for line in lines) <= max_words:
        return text, False
    kept: list[str] = []
    budget = max_words
    for line in lines:
        words = line.split()
        if len(words) > budget:
            if budget > 0:
                kept.append(" ".join(words[:budget]))
            break
        kept.append(line)
        budget -= len(words)
    kept.append(CLIP_MARK)
    return "\n".join(kept), True


class ToolSimulator:
    """Virtual clock and seeded fault injection for one env.

    ``reset(rng)`` binds the env's ``np_random``; :meth:`call` runs one tool. Not thread-safe.
    """

    def __init__(self, config: FaultConfig) -> None:
        self.config = config
        self.consecutive_timeouts = 0
        self._rng: np.random.Generator | None = None
        self._uniform: list[float] = []
        self._normal: list[float] = []
        self._i = self._j = _BUFFER
        self.pick = 0.0

    def reset(self, rng: np.random.Generator) -> None:
        self._rng = rng
        self.consecutive_timeouts = 0
        self._uniform = rng.random(_BUFFER).tolist()
        self._normal = rng.standard_normal(_BUFFER).tolist()
        self._i = 0  # next unused uniform
        self._j = 0  # next unused normal

    def reseed(self, rng: np.random.Generator) -> None:
        """Draw every later call's latency and faults from ``rng`` instead (the episode's state,
        including a run of timeouts, is kept): a branch of an episode gets its own tool future."""
        consecutive = self.consecutive_timeouts
        self.reset(rng)
        self.consecutive_timeouts = consecutive

    def uniform(self) -> float:
        """The next uniform in [0, 1) of the seeded stream."""
        if self._i >= _BUFFER:
            assert self._rng is not None, "ToolSimulator.reset(rng) must be called first"
            self._uniform = self._rng.random(_BUFFER).tolist()
            self._i = 0
        value = self._uniform[self._i]
        self._i += 1
        return value

    def normal(self) -> float:
        """The next standard normal of the seeded stream."""
        if self._j >= _BUFFER:
            assert self._rng is not None, "ToolSimulator.reset(rng) must be called first"
            self._normal = self._rng.standard_normal(_BUFFER).tolist()
            self._j = 0
        value = self._normal[self._j]
        self._j += 1
        return value

    def _draw(self) -> tuple[float, float, float, float, float]:
        """(u_crash, u_timeout, u_flaky, u_pick, z_latency) for one call."""
        return self.uniform(), self.uniform(), self.uniform(), self.uniform(), self.normal()

    def latency(self, tool: str, z: float) -> float:
        median, sigma = TOOL_LATENCY[tool]
        return median * math.exp(sigma * z) * self.config.latency_scale

    def call(self, tool: str, run: Callable[[bool], tuple[str, str]]) -> ToolResult:
        """Run ``tool``: ``run(flaky)`` does the work and returns ``(text, status)``.

        A crash or a timeout skips ``run`` entirely (no state change). ``flaky`` tells ``run``
        whether this call misreports (only test runs use it); ``self.pick`` (a uniform in [0, 1)
        of this call's draw) says which result it misreports.
        """
        cfg = self.config
        u_crash, u_timeout, u_flaky, self.pick, z = self._draw()
        seconds = self.latency(tool, z)
        if u_crash < cfg.crash_prob:
            return ToolResult(CRASH_TEXT, seconds, "crash")
        if u_timeout < cfg.timeout_prob and tool != "give_up":
            self.consecutive_timeouts += 1
            return ToolResult(TIMEOUT_TEXT, cfg.timeout_seconds, "timeout")
        self.consecutive_timeouts = 0
        text, status = run(u_flaky < cfg.flaky_prob)
        text, clipped = clip_words(text, cfg.max_output_words)
        if clipped and status == "ok":
            status = "clipped"
        return ToolResult(text, seconds, status)

    def not_a_timeout(self) -> None:
        """A turn that reached no tool (a format error): it breaks a run of timeouts."""
        self.consecutive_timeouts = 0

    @property
    def timed_out_too_often(self) -> bool:
        return self.consecutive_timeouts >= self.config.max_consecutive_timeouts
