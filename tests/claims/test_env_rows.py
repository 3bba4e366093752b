"""The env rows of the claims table (C9, C10, C11, C23, C24 scripted part): each pass rule PASSes on
the real measurement and FAILs on numbers that violate it (the claims table can fail)."""

from __future__ import annotations

import dataclasses

import pytest

from envs.long_horizon import LongHorizonEnv
from experiments import reproduce_claims as rc
from experiments.claims import envs as envs_claims
from experiments.claims.envs import C9Result, C10Result, C23Result, HorizonCell, SummaryArm, SummaryArms


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
    assert m.passes(), m.measured


def _c9(turns, tokens) -> C9Result:
    return C9Result(cells=tuple(HorizonCell(n_stages=s, verbose=v, turns=t, context_tokens=k, wrapper_tokens=k,
                                            verified=1)
                                for s, v, t, k in zip([197, 197, 7, 7], [0, 1000, 0, 1000], turns, tokens)))


def _arms(lossy: float, lossy_min: int = 3) -> SummaryArms:
    return SummaryArms(episodes=30, counted="x", lossy=SummaryArm(lossy, 0.5, 3.0, lossy_min),
                       structured=SummaryArm(0.0, 1.0, 3.0, 3), none=SummaryArm(0.0, 1.0, 0.0, 0))


def test_env_pass_rules_fail_on_violating_numbers():
    grows = [2464, 219164, 184, 7884]
    assert _c9([199, 199, 9, 9], grows).passes()
    assert not _c9([199, 199, 9, 9], [2464, 2464, 184, 184]).passes()  # context does not grow with verbose
    assert not _c9([200, 200, 10, 10], grows).passes()  # not n_stages + 2
    unverified = _c9([199, 199, 9, 9], grows)
    unverified = C9Result(cells=(dataclasses.replace(unverified.cells[0], verified=0), *unverified.cells[1:]))
    assert not unverified.passes()
    assert not C10Result(v1=_arms(2.0), v3=_arms(3.0)).passes()
    assert C10Result(v1=_arms(3.0), v3=_arms(3.0)).passes()
    assert not C10Result(v1=_arms(3.0), v3=_arms(2.9)).passes()  # v3 gap 2.9 < 3
    assert not C10Result(v1=_arms(3.0), v3=_arms(3.0, lossy_min=0)).passes()  # an episode without compression
    c23 = C23Result(tasks=3, train_reward_1_verified_0=0, verified_is_eval_verdict=3, reward_is_train_verdict=3,
                    distinct_graders=3, exact_verifier=3, train_tests=20, eval_tests=299)
    assert not c23.passes() and dataclasses.replace(c23, train_reward_1_verified_0=1).passes()
    assert not dataclasses.replace(c23, train_reward_1_verified_0=1, exact_verifier=2).passes()
