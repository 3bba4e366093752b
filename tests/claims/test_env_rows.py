"""The env rows of the claims table (C9, C10, C11, C23, C24 scripted part): each criterion in
``experiments/reproduce_claims.py`` PASSes on the real measurement and FAILs on numbers that
violate it (the claims table can fail)."""

from __future__ import annotations

import pytest

from envs.long_horizon import LongHorizonEnv
from experiments import reproduce_claims as rc
from experiments.claims import criteria
from experiments.claims import envs as envs_claims


def test_context_tokens_follow_the_interfaces_layout():
    env = LongHorizonEnv(verbose=8)
    obs0, _ = env.reset(seed=0)
    obs1, *_ = env.step("status")
    # task statement 72 tokens + [BOS] + [SEP]; then "status" + EOS + 13-token output + SEP
    assert envs_claims.context_tokens([obs0], []) == 74
    assert envs_claims.context_tokens([obs0, obs1], ["status"]) == 74 + 1 + 1 + 13 + 1


@pytest.mark.slow
@pytest.mark.parametrize("cid", ["C9", "C10", "C11", "C23"])
def test_env_row_passes(cid):
    text, status = rc.run_claim(rc.CLAIMS[cid])
    assert status == rc.PASS, text


def test_scripted_c24_part_passes():
    m = envs_claims.measure_c24_agents()
    assert criteria.c24_agents_passes(m), criteria.c24_agents_text(m)


def test_env_criteria_fail_on_violating_numbers():
    c9 = {"n_stages": [197, 197, 7, 7], "verbose": [0, 1000, 0, 1000], "turns": [199, 199, 9, 9],
          "context_tokens": [2464, 2464, 184, 184], "wrapper_tokens": [2464, 2464, 184, 184], "verified": [1] * 4}
    assert not criteria.c9_passes(c9)  # context does not grow with verbose
    assert criteria.c9_passes({**c9, "context_tokens": [2464, 219164, 184, 7884], "wrapper_tokens": [2464, 219164, 184, 7884]})
    assert not criteria.c9_passes({**c9, "turns": [200, 200, 10, 10]})  # not n_stages + 2
    c10 = {"lossy_repeats": 2.0, "structured_repeats": 0.0, "lossy_min_compressions": 3, "structured_min_compressions": 3,
           "v3_lossy_wrong_fixes": 3.0, "v3_structured_wrong_fixes": 0.0, "v3_lossy_min_compressions": 3,
           "v3_structured_min_compressions": 3}
    assert not criteria.c10_passes(c10) and criteria.c10_passes({**c10, "lossy_repeats": 3.0})
    assert not criteria.c10_passes({**c10, "lossy_repeats": 3.0, "v3_lossy_wrong_fixes": 2.9})  # v3 gap 2.9 < 3
    assert not criteria.c10_passes({**c10, "lossy_repeats": 3.0, "v3_lossy_min_compressions": 0})
    c23 = {"tasks": 3, "train_reward_1_verified_0": 0, "verified_is_eval_verdict": 3, "reward_is_train_verdict": 3,
           "distinct_graders": 3, "exact_verifier": 3}
    assert not criteria.c23_passes(c23) and criteria.c23_passes({**c23, "train_reward_1_verified_0": 1})
    assert not criteria.c23_passes({**c23, "train_reward_1_verified_0": 1, "exact_verifier": 2})
