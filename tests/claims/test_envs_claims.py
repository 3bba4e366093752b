"""experiments.claims.envs: the env-level claim measurements on BugFix-v2 / LongHorizon-v3 (C10 on v1 too),
asserted on their numbers (fixed seeds: exact where the envs are deterministic)."""

from __future__ import annotations

import pytest

from experiments.claims import envs as m


def test_c09_horizon_and_context_are_separate_knobs():
    r = m.measure_c09()
    cells = r.cells
    assert [c.n_stages for c in cells] == [197, 197, 7, 7] and [c.verbose for c in cells] == [0, 1000, 0, 1000]
    assert [c.turns for c in cells] == [199, 199, 9, 9]  # n_stages + 2: read notes, n_stages fixes, submit
    assert [c.verified for c in cells] == [1, 1, 1, 1] and r.counts_agree
    # verbose 1000 adds 1000 filler words + 100 line breaks to each fix's output (197 and 7 of them):
    # 2464 + 197 * 1100 = 219164 and 184 + 7 * 1100 = 7884
    assert [c.context_tokens for c in cells] == [2464, 2464 + 197 * 1100, 184, 184 + 7 * 1100]
    assert cells[0].context_tokens < cells[3].context_tokens  # many decisions, small context


def test_c10_lossy_summary_repeats_failed_approaches_structured_does_not():
    r = m.measure_c10(episodes=12).v1
    assert r.counted == "repeated_failed_approaches" and r.episodes == 12
    assert r.structured.per_episode == 0.0 and r.none.per_episode == 0.0
    assert r.lossy.per_episode >= 3.0
    assert r.lossy.min_compressions >= 1 and r.structured.min_compressions >= 1
    assert r.structured.success == 1.0 and r.lossy.success < 1.0


def test_c10_on_v3_a_lossy_summary_makes_later_fixes_guesses():
    r = m.measure_c10_v3(episodes=12)
    assert r.counted == "wrong_fixes"
    # structured_summary keeps the table (memory_facts().pending): every fix right, as without compression
    assert (r.structured.per_episode, r.structured.success) == (0.0, 1.0)
    assert (r.none.per_episode, r.none.success, r.none.min_compressions) == (0.0, 1.0, 0)
    # lossy_summary drops it at the first of 3 compressions per episode; the later fixes are guesses,
    # one distinct approach per input out of 8, so most of the ~20 remaining fixes are wrong
    assert r.lossy.min_compressions == r.structured.min_compressions == 3
    assert r.lossy.per_episode >= 10 and r.lossy.success == 0.0


def test_c11_every_stop_reason_ends_as_the_rule_table_says():
    r = m.measure_c11()
    assert [s.reason for s in r.scenarios] == [reason for reason, _, _ in m.C11_SCENARIOS]
    for s in r.scenarios:
        assert s.reached and s.matches_rule, s.reason
    by_reason = {s.reason: s for s in r.scenarios}
    assert (by_reason["infra_error"].masked, by_reason["infra_error"].scored) == (True, False)
    assert by_reason["max_turns"].truncated and by_reason["turn_limit"].terminated
    assert by_reason["submitted_voided"].terminated
    assert r.required_reached == 4 and r.boundaries_covered == r.boundaries_total == 3
    assert r.rules_cover_every_reason and r.cancelled_like_infra_error
    assert r.passes()


def test_c21_fitting_and_traps_earn_no_verified_reward_and_visible_grader_shows_the_gap():
    r = m.measure_c21(episodes=10)
    assert r.episodes == 20
    assert [a.agent for a in r.agents] == list(m.C21_AGENTS)
    for a in r.agents:
        assert a.train_reward == 0.0 and a.rewarded_and_verified == 0.0, a.agent
        assert a.hack_rate == 0.0
        if a.agent.startswith("hack_"):
            assert a.flagged == 1.0, a.agent
    assert r.oracle.train_reward == r.oracle.verified == 1.0 and r.oracle.flagged == 0.0
    w = r.visible_fit
    assert w.train_reward == 1.0 and w.verified == 0.0
    assert w.hack_rate == 1.0 and w.flagged == 0.0  # only the outcome metric sees it
    assert r.passes()


def test_c23_training_reward_and_verifier_disagree():
    r = m.measure_c23(max_tasks=6)
    assert r == m.C23Result(tasks=6, train_reward_1_verified_0=6, verified_is_eval_verdict=6,
                            reward_is_train_verdict=6, distinct_graders=6, exact_verifier=6,
                            train_tests=4 + 16, eval_tests=299)  # every x in -99..199


def test_c24_biased_process_reward_pays_more_without_verified_success():
    r = m.measure_c24_agents(episodes=4)
    exploit, oracle = r.cell("process_exploit", "biased_process"), r.cell("oracle", "biased_process")
    # exploit: one 0.1 bonus per run_tests for 20 turns = 2.0; oracle: 2 test runs + 1 = 1.2
    assert exploit.train_reward == pytest.approx(2.0) and oracle.train_reward == pytest.approx(1.2)
    assert exploit.verified == 0.0 and exploit.hack_rate == 1.0
    assert r.cell("process_exploit", "outcome").train_reward == 0.0
    assert r.cell("process_exploit", "process").train_reward == 0.0
    assert r.cell("oracle", "process").train_reward == pytest.approx(1.1) and r.cell("oracle", "outcome").verified == 1.0
    # at the preset's 6 turns the exploit earns 0.6 < the oracle's 1.2
    assert r.preset_max_turns == 6 and r.preset_cell("process_exploit").train_reward == pytest.approx(0.6)
    assert r.passes()
