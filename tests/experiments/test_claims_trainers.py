"""experiments.claims_trainers: each trainer-level claim check PASSes with its defaults and FAILs
when a knob violates its criterion (so the checks can fail). The start model and the training
runs of C19/C20/C24 are cached by the module, so every check pays for them once per session."""

from __future__ import annotations

import pytest
import torch


from experiments import claims_trainers as ct

torch.set_num_threads(1)
pytestmark = pytest.mark.slow



def test_c6_independent_groups_match_p_mix_and_correlated_groups_mix_less():
    measured, status = ct.check_c6()
    assert status == ct.PASS, measured
    assert "inside" in measured and "Wilson" in measured and "mixed tasks" in measured


def test_c6_fails_with_the_wrong_group_size_in_the_formula():
    measured, status = ct.check_c6(n_groups=24, formula_group_size=2)
    assert status == ct.FAIL and "OUTSIDE" in measured, measured


def test_c7_stale_behavior_logprobs_differ_from_old_ones_and_reference_is_frozen():
    measured, status = ct.check_c7()
    assert status == ct.PASS, measured
    assert "lag 1" in measured and "staleness 0" in measured


def test_c7_fails_without_staleness():
    measured, status = ct.check_c7(staleness=0)
    assert status == ct.FAIL, measured


def test_c8_observation_tokens_have_zero_weight_and_fields_are_stored():
    """Zero weights on env tokens, stored boundaries / EOS / padding / versions / sampling
    temperature, and un-masking the observation tokens changes the loss."""
    measured, status = ct.check_c8()
    assert status == ct.PASS, measured
    assert "loss weight max 0 " in measured and "un-masked" in measured


def test_c8_fails_when_the_temperature_is_not_recorded(monkeypatch):
    monkeypatch.setattr(ct, "_stored_temperature", lambda traj: None)
    measured, status = ct.check_c8()
    assert status == ct.FAIL, measured


def test_c8_fails_when_observation_tokens_enter_the_loss():
    measured, status = ct.check_c8(loss_on_observations=True)
    assert status == ct.FAIL, measured


def test_c12_short_success_and_long_failure_get_plus_and_minus_one():
    measured, status = ct.check_c12()
    assert status == ct.PASS, measured
    assert "4 turns" in measured and "10 turns" in measured and "[+1, -1]" in measured


def test_c12_fails_on_the_sample_std_convention():
    measured, status = ct.check_c12(std="sample")
    assert status == ct.FAIL, measured


def test_c13_segments_stay_two_group_members():
    measured, status = ct.check_c13()
    assert status == ct.PASS, measured
    assert "3 segments" in measured and "6 segments" in measured and "9 rows" in measured


def test_c13_fails_when_segments_are_fed_as_members():
    measured, status = ct.check_c13(split_segments=True)
    assert status == ct.FAIL and "9 entries" in measured, measured


def test_c14_grpo_advantage_is_constant_inside_each_trajectory():
    measured, status = ct.check_c14()
    assert status == ct.PASS, measured
    assert "spread 0" in measured


def test_c14_fails_for_ppo_token_level_advantages():
    measured, status = ct.check_c14(trainer_name="ppo")
    assert status == ct.FAIL, measured


def test_c17_bootstrap_is_the_value_of_the_compressed_context():
    measured, status = ct.check_c17()
    assert status == ct.PASS, measured
    assert "boundaries" in measured and "V(reset context" in measured


def test_c17_fails_when_compression_is_labelled_terminal():
    measured, status = ct.check_c17(compression_as_terminal=True, rollouts=16)
    assert status == ct.FAIL, measured


def test_c19_compute_matched_runs_report_every_axis():
    measured, status = ct.check_c19()
    assert status == ct.PASS, measured
    for axis in ct.COMPUTE_AXES:
        assert axis.split("/")[-1] in measured
    runs = ct.compare_runs(ct.C19_BUDGET, ())
    assert runs["grpo"]["config"]["algo"]["group_size"] >= 2 and runs["ppo"]["config"]["algo"]["group_size"] == 1


def test_c19_fails_when_the_protocol_differs_or_an_axis_is_missing():
    measured, status = ct.check_c19(protocol=ct.PROTOCOL_ITEMS + ("algo.group_size",))
    assert status == ct.FAIL and "differ: algo.group_size" in measured, measured
    measured, status = ct.check_c19(axes=ct.COMPUTE_AXES + ("compute/joules",))
    assert status == ct.FAIL and "joules: GRPO missing" in measured, measured


def test_c20_diagnostics_are_present():
    measured, status = ct.check_c20()
    assert status == ct.PASS, measured
    assert "all-0 groups" in measured and "held-out complete returns" in measured and "recovery" in measured


def test_c20_fails_when_a_diagnostic_is_missing():
    measured, status = ct.check_c20(ppo_keys=ct.C20_PPO_KEYS + ("critic/no_such_key",))
    assert status == ct.FAIL and "ppo critic/no_such_key" in measured, measured


def test_c24_scripted_and_trainer_parts_pass():
    measured, status = ct.check_c24()
    assert status == ct.PASS, measured
    assert "scripted agents" in measured and "trainer: GRPO x2" in measured


def test_c24_trainer_part_fails_on_an_unreachable_gap():
    measured, status = ct.check_c24(min_gap=5.0)
    assert status == ct.FAIL, measured
