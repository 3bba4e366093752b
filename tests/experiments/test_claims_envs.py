"""experiments.claims_envs: the thin check wrappers PASS on v1, and each criterion FAILs on
numbers that violate it (the claims table can fail)."""

from __future__ import annotations

from envs.long_horizon import LongHorizonEnv
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


def test_every_env_check_passes_on_v1():
    for check in (ce.check_c9, ce.check_c10, ce.check_c11, ce.check_c23, ce.check_c24):
        measured, status = check()
        assert status == ce.PASS, measured


def test_criteria_fail_on_violating_numbers():
    c9 = {"n_stages": [197, 197, 7, 7], "verbose": [0, 1000, 0, 1000], "turns": [200, 200, 10, 10],
          "context_tokens": [2074, 2074, 174, 174], "wrapper_tokens": [2074, 2074, 174, 174], "verified": [1] * 4}
    assert not ce.criterion_c9(c9)  # context does not grow with verbose
    c10 = {"lossy_repeats": 2.0, "structured_repeats": 0.0, "lossy_min_compressions": 3, "structured_min_compressions": 3}
    assert not ce.criterion_c10(c10) and ce.criterion_c10({**c10, "lossy_repeats": 3.0})
    c23 = {"tasks": 3, "train_reward_1_verified_0": 0, "verified_is_eval_verdict": 3, "reward_is_train_verdict": 3,
           "distinct_graders": 3, "shared_inputs": 0}
    assert not ce.criterion_c23(c23) and ce.criterion_c23({**c23, "train_reward_1_verified_0": 1})
    assert not ce.criterion_c23({**c23, "train_reward_1_verified_0": 1, "shared_inputs": 2})
