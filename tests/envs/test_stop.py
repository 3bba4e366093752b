"""The stop-reason rule table (claim C11: stopping is not one thing)."""

from __future__ import annotations

import pytest

from envs.stop import STOP_RULES, Boundary, StopReason, rule_for


def test_every_reason_has_exactly_one_rule():
    assert set(STOP_RULES) == set(StopReason)
    assert len({r.value for r in StopReason}) == len(StopReason)


@pytest.mark.parametrize("reason", list(StopReason))
def test_rule_consistency(reason):
    rule = rule_for(reason)
    assert rule is rule_for(reason.value)
    assert rule.terminated != rule.truncated  # exactly one Gymnasium flag
    assert rule.masked == (rule.boundary is Boundary.MASKED)
    if rule.masked:
        assert not rule.scored and rule.truncated  # masked: never a 0, the task did not end
    else:
        assert rule.scored
    assert rule.why


def test_the_table_distinguishes_task_end_limits_and_infrastructure():
    terminated = {r for r in StopReason if rule_for(r).terminated}
    truncated = {r for r in StopReason if rule_for(r).boundary is Boundary.TRUNCATED}
    masked = {r for r in StopReason if rule_for(r).masked}
    assert terminated == {StopReason.SUBMITTED_RESOLVED, StopReason.SUBMITTED_FAILED, StopReason.SUBMITTED_VOIDED,
                          StopReason.FORFEIT, StopReason.FORMAT_ERRORS, StopReason.CONSECUTIVE_TIMEOUTS,
                          StopReason.TURN_LIMIT}
    assert truncated == {StopReason.MAX_TURNS, StopReason.TOKEN_BUDGET, StopReason.WALL_CLOCK}
    assert masked == {StopReason.CANCELLED, StopReason.INFRA_ERROR}


def test_unknown_reason_lists_the_valid_ones():
    with pytest.raises(ValueError, match="allowed: submitted_resolved, submitted_failed"):
        rule_for("ran_out_of_coffee")
    assert StopReason("max_turns") is StopReason.MAX_TURNS
