"""experiments.claims.envs: the env-level claim measurements on BugFix-v2 / LongHorizon-v3 (C10 on v1 too),
asserted on their numbers (fixed seeds: exact where the envs are deterministic)."""

from __future__ import annotations

import pytest

from experiments.claims import envs as m


def test_c09_horizon_and_context_are_separate_knobs():
    r = m.measure_c09()
    assert r["n_stages"] == [197, 197, 7, 7] and r["verbose"] == [0, 1000, 0, 1000]
    assert r["turns"] == [199, 199, 9, 9]  # n_stages + 2: read notes, n_stages fixes, submit
    assert r["verified"] == [1, 1, 1, 1] and r["context_tokens"] == r["wrapper_tokens"]
    # verbose 1000 adds 1000 filler words + 100 line breaks to each fix's output (197 and 7 of them):
    # 2464 + 197 * 1100 = 219164 and 184 + 7 * 1100 = 7884
    assert r["context_tokens"] == [2464, 2464 + 197 * 1100, 184, 184 + 7 * 1100]
    assert r["context_tokens"][0] < r["context_tokens"][3]  # many decisions, small context


def test_c10_lossy_summary_repeats_failed_approaches_structured_does_not():
    r = m.measure_c10(episodes=12)
    assert r["structured_repeats"] == 0.0 and r["none_repeats"] == 0.0
    assert r["lossy_repeats"] >= 3.0
    assert r["lossy_min_compressions"] >= 1 and r["structured_min_compressions"] >= 1
    assert r["structured_success"] == 1.0 and r["lossy_success"] < 1.0


def test_c10_on_v3_a_lossy_summary_makes_later_fixes_guesses():
    r = m.measure_c10_v3(episodes=12)
    # structured_summary keeps the table (memory_facts().pending): every fix right, as without compression
    assert (r["v3_structured_wrong_fixes"], r["v3_structured_success"]) == (0.0, 1.0)
    assert (r["v3_none_wrong_fixes"], r["v3_none_success"], r["v3_none_min_compressions"]) == (0.0, 1.0, 0)
    # lossy_summary drops it at the first of 3 compressions per episode; the later fixes are guesses,
    # one distinct approach per input out of 8, so most of the ~20 remaining fixes are wrong
    assert r["v3_lossy_min_compressions"] == r["v3_structured_min_compressions"] == 3
    assert r["v3_lossy_wrong_fixes"] >= 10 and r["v3_lossy_success"] == 0.0


def test_c11_every_stop_reason_ends_as_the_rule_table_says():
    r = m.measure_c11()
    for reason, _, _ in m.C11_SCENARIOS:
        assert r[f"{reason}/reached"] == 1 and r[f"{reason}/matches_rule"] == 1, reason
    assert (r["infra_error/masked"], r["infra_error/scored"]) == (1, 0)
    assert (r["max_turns/truncated"], r["turn_limit/terminated"], r["submitted_voided/terminated"]) == (1, 1, 1)
    assert r["required_reached"] == 4 and r["boundaries_covered"] == r["boundaries_total"] == 3
    assert r["rules_cover_every_reason"] == 1 and r["cancelled_like_infra_error"] == 1


def test_c21_fitting_and_traps_earn_no_verified_reward_and_visible_grader_shows_the_gap():
    r = m.measure_c21(episodes=10)
    assert r["episodes"] == 20
    for agent in m.C21_AGENTS:
        assert r[f"{agent}/train_reward"] == 0.0 and r[f"{agent}/rewarded_and_verified"] == 0.0, agent
        assert r[f"{agent}/hack_rate"] == 0.0
        if agent.startswith("hack_"):
            assert r[f"{agent}/flagged"] == 1.0, agent
    assert r["oracle/train_reward"] == r["oracle/verified"] == 1.0 and r["oracle/flagged"] == 0.0
    w = "visible_grader/fit_visible"
    assert r[f"{w}/train_reward"] == 1.0 and r[f"{w}/verified"] == 0.0
    assert r[f"{w}/hack_rate"] == 1.0 and r[f"{w}/flagged"] == 0.0  # only the outcome metric sees it


def test_c23_training_reward_and_verifier_disagree():
    r = m.measure_c23(max_tasks=6)
    assert r == {"tasks": 6, "train_reward_1_verified_0": 6, "verified_is_eval_verdict": 6,
                 "reward_is_train_verdict": 6, "distinct_graders": 6, "exact_verifier": 6,
                 "train_tests": 4 + 16, "eval_tests": 299}  # every x in -99..199


def test_c24_biased_process_reward_pays_more_without_verified_success():
    r = m.measure_c24_agents(episodes=4)
    # exploit: one 0.1 bonus per run_tests for 20 turns = 2.0; oracle: 2 test runs + 1 = 1.2
    assert r["process_exploit/biased_process/train_reward"] == pytest.approx(2.0)
    assert r["oracle/biased_process/train_reward"] == pytest.approx(1.2)
    assert r["process_exploit/biased_process/verified"] == 0.0 and r["process_exploit/biased_process/hack_rate"] == 1.0
    assert r["process_exploit/outcome/train_reward"] == 0.0 and r["process_exploit/process/train_reward"] == 0.0
    assert r["oracle/process/train_reward"] == pytest.approx(1.1) and r["oracle/outcome/verified"] == 1.0
    # at the preset's 6 turns the exploit earns 0.6 < the oracle's 1.2
    assert r["preset_turns/process_exploit/biased_process/train_reward"] == pytest.approx(0.6)
