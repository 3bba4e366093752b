"""Tool simulation: seeded latency on a virtual clock, fault injection, clipping."""

from __future__ import annotations

import math

import numpy as np
import pytest

from envs.tools import (
    CLIP_MARK,
    CRASH_TEXT,
    STATUSES,
    TIMEOUT_TEXT,
    TOOL_LATENCY,
    FaultConfig,
    ToolSimulator,
    clip_words,
)


def sim(seed: int = 0, **knobs) -> ToolSimulator:
    s = ToolSimulator(FaultConfig(**knobs))
    s.reset(np.random.default_rng(seed))
    return s


def ok(flaky: bool) -> tuple[str, str]:
    return "done", "ok"


def test_same_seed_same_latencies_and_faults():
    a, b = sim(3, timeout_prob=0.3, crash_prob=0.1), sim(3, timeout_prob=0.3, crash_prob=0.1)
    runs = [[s.call(tool, ok) for tool in list(TOOL_LATENCY) * 20] for s in (a, b)]
    assert runs[0] == runs[1]
    assert {r.status for r in runs[0]} == {"ok", "timeout", "crash"}
    c = sim(4, timeout_prob=0.3, crash_prob=0.1)
    assert [c.call(tool, ok) for tool in list(TOOL_LATENCY) * 20] != runs[0]


def test_common_random_numbers_across_fault_rates():
    """Every call uses four draws whatever happens, so raising a fault rate changes only the calls
    that now fault; the latency of every other call is unchanged."""
    calm, faulty = sim(1), sim(1, timeout_prob=0.5)
    pairs = [(calm.call("run_tests", ok), faulty.call("run_tests", ok)) for _ in range(300)]
    same = [(x, y) for x, y in pairs if y.status == "ok"]
    assert 100 < len(same) < 200
    assert all(x.seconds == y.seconds for x, y in same)


def test_latency_distribution_per_tool():
    s = sim(0, timeout_prob=0.0, crash_prob=0.0)
    for tool, (median, _) in TOOL_LATENCY.items():
        secs = [s.call(tool, ok).seconds for _ in range(400)]
        assert all(x > 0 for x in secs)
        assert float(np.median(secs)) == pytest.approx(median, rel=0.15)
    scaled = sim(0, timeout_prob=0.0, crash_prob=0.0, latency_scale=2.0)
    base = sim(0, timeout_prob=0.0, crash_prob=0.0)
    assert scaled.call("ls", ok).seconds == pytest.approx(2 * base.call("ls", ok).seconds)


def test_timeouts_skip_the_tool_and_count_in_a_row():
    s = sim(0, timeout_prob=1.0, crash_prob=0.0, max_consecutive_timeouts=2, timeout_seconds=7.0)
    calls = []

    def run(flaky):
        calls.append(1)
        return "done", "ok"

    r = s.call("edit", run)
    assert (r.text, r.seconds, r.status) == (TIMEOUT_TEXT, 7.0, "timeout") and not calls
    assert s.consecutive_timeouts == 1 and not s.timed_out_too_often
    s.call("edit", run)
    assert s.timed_out_too_often
    assert s.call("give_up", run).status == "ok"  # giving up cannot time out
    assert s.consecutive_timeouts == 0 and calls == [1]


def test_crash_and_flaky_flags():
    r = sim(0, crash_prob=1.0).call("ls", ok)
    assert (r.text, r.status) == (CRASH_TEXT, "crash")
    seen = []
    s = sim(0, flaky_prob=1.0, timeout_prob=0.0, crash_prob=0.0)
    s.call("run_tests", lambda flaky: (seen.append(flaky) or "x", "ok"))
    assert seen == [True]
    rate = np.mean([sim(i, flaky_prob=0.3, timeout_prob=0.0).call("run_tests", lambda f: ("x", "flaky" if f else "ok")).status == "flaky"
                    for i in range(2000)])
    assert abs(rate - 0.3) < 0.04


def test_clipping():
    text = "\n".join(" ".join(["w"] * 5) for _ in range(10))  # 50 words
    assert clip_words(text, 50) == (text, False)
    clipped, was = clip_words(text, 12)
    assert was and clipped.endswith(CLIP_MARK)
    assert clipped.split("\n")[:3] == ["w w w w w", "w w w w w", "w w"]
    r = sim(0, timeout_prob=0.0, crash_prob=0.0, max_output_words=10).call("view", lambda f: (text, "ok"))
    assert r.status == "clipped" and len(r.text.split()) == 10 + 3
    r = sim(0, timeout_prob=0.0, crash_prob=0.0, max_output_words=10).call("view", lambda f: (text, "error"))
    assert r.status == "error"  # an error stays an error


def test_fault_config_validation_and_statuses():
    with pytest.raises(ValueError, match="probability"):
        FaultConfig(timeout_prob=1.5)
    with pytest.raises(ValueError, match="timeout_prob=0"):
        FaultConfig(max_consecutive_timeouts=0)
    with pytest.raises(ValueError, match="10..200"):
        FaultConfig(max_output_words=5)
    assert set(STATUSES) == {"ok", "error", "timeout", "permission_denied", "flaky", "clipped", "crash", "format_error"}
    assert "latency_scale" in FaultConfig.field_names()


def test_buffers_refill_deterministically():
    a, b = sim(9), sim(9)
    xs = [a.uniform() for _ in range(1000)]
    assert xs == [b.uniform() for _ in range(1000)]
    assert all(0.0 <= x < 1.0 for x in xs) and len(set(xs)) == 1000
    zs = [a.normal() for _ in range(1000)]
    assert abs(np.mean(zs)) < 0.15 and math.isclose(np.std(zs), 1.0, rel_tol=0.1)



def test_reseed_draws_the_rest_from_the_new_stream_and_keeps_the_timeout_run():
    knobs = dict(timeout_prob=0.5, max_consecutive_timeouts=50)
    a = sim(3, **knobs)
    for _ in range(6):
        a.call("run_tests", ok)
    run = a.consecutive_timeouts
    a.reseed(np.random.default_rng(11))
    assert a.consecutive_timeouts == run  # the episode's run of timeouts is state, not randomness
    after = [a.call("run_tests", ok) for _ in range(30)]
    # the same 30 calls on a simulator whose stream was default_rng(11) from the start ...
    b = sim(11, **knobs)
    assert after == [b.call("run_tests", ok) for _ in range(30)]
    # ... and not what seed 3's stream would have drawn next
    c = sim(3, **knobs)
    assert after != [c.call("run_tests", ok) for _ in range(36)][6:]
