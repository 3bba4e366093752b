"""Why an episode stopped, and the one rule table that says what each reason means.

Every episode end writes ``info["stop_reason"] = StopReason.X.value``. The rule table answers, for
each reason: does Gymnasium see ``terminated`` (the task itself ended: no bootstrap) or
``truncated`` (an outside limit cut it: bootstrap from V(next state)); is the outcome scored (the
verifier's 0/1 counts toward success rates); is the episode masked (excluded from the loss and from
scores, never counted as a 0). Masked episodes end with ``truncated=True`` in Gymnasium terms (the
task did not end), but trainers drop them before any advantage is computed.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class StopReason(str, enum.Enum):
    SUBMITTED_RESOLVED = "submitted_resolved"
    SUBMITTED_FAILED = "submitted_failed"
    SUBMITTED_VOIDED = "submitted_voided"
    FORFEIT = "forfeit"
    FORMAT_ERRORS = "format_errors"
    CONSECUTIVE_TIMEOUTS = "consecutive_timeouts"
    MAX_TURNS = "max_turns"
    TURN_LIMIT = "turn_limit"
    TOKEN_BUDGET = "token_budget"
    WALL_CLOCK = "wall_clock"
    CANCELLED = "cancelled"
    INFRA_ERROR = "infra_error"


class Boundary(str, enum.Enum):
    TERMINATED = "terminated"
    TRUNCATED = "truncated"
    MASKED = "masked"


@dataclass(frozen=True)
class StopRule:
    boundary: Boundary
    scored: bool
    masked: bool
    why: str

    @property
    def terminated(self) -> bool:
        return self.boundary is Boundary.TERMINATED

    @property
    def truncated(self) -> bool:
        return self.boundary is not Boundary.TERMINATED


STOP_RULES: dict[StopReason, StopRule] = {
    StopReason.SUBMITTED_RESOLVED: StopRule(Boundary.TERMINATED, True, False, "agent submitted; hidden tests all pass: reward 1"),
    StopReason.SUBMITTED_FAILED: StopRule(Boundary.TERMINATED, True, False, "agent submitted; a hidden test fails: reward 0"),
    StopReason.SUBMITTED_VOIDED: StopRule(Boundary.TERMINATED, True, False, "agent submitted after using a trap (protected file or test edit): voided, reward 0"),
    StopReason.FORFEIT: StopRule(Boundary.TERMINATED, True, False, "agent gave up: reward 0"),
    StopReason.FORMAT_ERRORS: StopRule(Boundary.TERMINATED, True, False, "too many consecutive malformed actions: reward 0"),
    StopReason.CONSECUTIVE_TIMEOUTS: StopRule(Boundary.TERMINATED, True, False, "too many consecutive tool timeouts: the task is unrecoverable, reward 0"),
    StopReason.MAX_TURNS: StopRule(Boundary.TRUNCATED, True, False, "turn limit outside the task (time_limit=truncation): scored 0 for success, bootstrapped in PPO"),
    StopReason.TURN_LIMIT: StopRule(Boundary.TERMINATED, True, False, "turn limit that is part of the task (time_limit=termination, turns left shown): reward 0, no bootstrap"),
    StopReason.TOKEN_BUDGET: StopRule(Boundary.TRUNCATED, True, False, "context/token budget exhausted: scored 0, bootstrapped in PPO"),
    StopReason.WALL_CLOCK: StopRule(Boundary.TRUNCATED, True, False, "simulated wall clock exhausted: scored 0, bootstrapped in PPO"),
    StopReason.CANCELLED: StopRule(Boundary.MASKED, False, True, "cancelled from outside: no loss, no score"),
    StopReason.INFRA_ERROR: StopRule(Boundary.MASKED, False, True, "infrastructure crash: no loss, no score (never a 0)"),
}


def rule_for(reason: StopReason | str) -> StopRule:
    """The rule of ``reason`` (an enum member or its string value); ``ValueError`` lists valid ones."""
    try:
        return STOP_RULES[StopReason(reason)]
    except ValueError:
        allowed = ", ".join(r.value for r in StopReason)
        raise ValueError(f"unknown stop reason {reason!r}; allowed: {allowed}") from None
