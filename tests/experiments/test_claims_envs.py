"""experiments.claims_envs: each env-level claim check PASSes on the real envs and FAILs when its
criterion is violated (so the claims table can actually fail)."""

from __future__ import annotations

import dataclasses

from envs.long_horizon import LongHorizonEnv
from envs.stop import STOP_RULES, Boundary, StopReason
from experiments import claims_envs as ce
from experiments import reproduce_claims as rc


def test_registry_uses_the_env_checks():
    for cid in ("C9", "C10", "C11", "C21", "C23"):
        claim = rc.CLAIMS[cid]
        assert claim.kind == "empirical"
        assert claim.check is getattr(ce, f"check_{cid.lower()}")
    # C24 runs the scripted check of this module and adds a trainer run (experiments.claims.process)
    assert rc.CLAIMS["C24"].check is rc.check_c24


def test_context_tokens_follow_the_interfaces_layout():
    env = LongHorizonEnv(verbose=8)
    obs0, _ = env.reset(seed=0)
    obs1, *_ = env.step("status")
    # task statement 72 tokens + [BOS] + [SEP]; then "status" + EOS + 13-token output + SEP
    assert ce.context_tokens([obs0], []) == 74
    assert ce.context_tokens([obs0, obs1], ["status"]) == 74 + 1 + 1 + 13 + 1


def test_c9_passes_and_states_the_step_unit():
    measured, status = ce.check_c9()
    assert status == ce.PASS, measured
    assert ce.STEP_UNIT in measured and "200 turns" in measured and "10 turns" in measured


def test_c9_fails_when_the_context_knob_does_nothing():
    measured, status = ce.check_c9(large_verbose=0)  # same verbose: context cannot grow independently
    assert status == ce.FAIL, measured


def test_c10_passes_and_reports_success_rates():
    measured, status = ce.check_c10()
    assert status == ce.PASS, measured
    assert "verified success" in measured and "no compression" in measured


def test_c10_fails_when_the_comparison_is_flipped():
    measured, status = ce.check_c10(lossy="structured_summary", structured="lossy_summary", episodes=10)
    assert status == ce.FAIL, measured
    measured, status = ce.check_c10(lossy="lossy_summary", structured="lossy_summary", episodes=10)
    assert status == ce.FAIL, measured


def test_c11_passes_with_every_required_reason():
    measured, status = ce.check_c11()
    assert status == ce.PASS, measured
    for reason in ce.C11_REQUIRED:
        assert f"-> {reason} " in measured
    assert "MISMATCH" not in measured


def test_c11_fails_when_the_rule_table_disagrees_with_the_episodes():
    rules = dict(STOP_RULES)
    rules[StopReason.MAX_TURNS] = dataclasses.replace(rules[StopReason.MAX_TURNS], boundary=Boundary.TERMINATED)
    measured, status = ce.check_c11(rules=rules)
    assert status == ce.FAIL and "MISMATCH" in measured
    incomplete = {r: rule for r, rule in STOP_RULES.items() if r is not StopReason.CANCELLED}
    assert ce.check_c11(rules=incomplete)[1] == ce.FAIL


def test_c21_passes_for_every_registered_hack_agent():
    measured, status = ce.check_c21(episodes=6)
    assert status == ce.PASS, measured
    for name in ce.HACK_AGENTS:
        assert f"{name.removeprefix('hack_')}: flagged 12/12" in measured


def test_c21_fails_when_an_agent_earns_reward_or_goes_uncounted(monkeypatch):
    monkeypatch.setattr(ce, "HACK_AGENTS", ("hack_edit_tests", "oracle"))
    measured, status = ce.check_c21(episodes=4)
    assert status == ce.FAIL, measured  # the oracle is rewarded and raises no flag
    measured, status = ce.check_c21(hack_agents=("empty_submit",), episodes=4)
    assert status == ce.FAIL and "flagged 0/8" in measured  # no reward, but no attempt counted


def test_c23_passes_with_a_program_the_two_graders_disagree_on():
    measured, status = ce.check_c23()
    assert status == ce.PASS, measured
    assert "verified 0 in 10/10" in measured


def test_c23_fails_without_a_divergent_program():
    # a special case for inputs neither grader uses: both agree, nothing shows the separation
    measured, status = ce.check_c23(exploit="insert 1 if x > 99 then return 0")
    assert status == ce.FAIL and "verified 0 in 0/10" in measured


def test_c24_passes_with_the_scripted_exploit():
    measured, status = ce.check_c24()
    assert status == ce.PASS, measured
    assert measured.startswith("scripted agents")


def test_c24_fails_for_an_unbiased_reward_or_a_budget_where_the_exploit_earns_less():
    assert ce.check_c24(reward_mode="process", episodes=3)[1] == ce.FAIL
    assert ce.check_c24(max_turns=11, episodes=3)[1] == ce.FAIL  # 1.1 < the oracle's 1.2
