"""Each empirical claim's pass rule decides PASS / FAIL from its result's numbers alone: each holds
on a hand-built result and fails when one number breaks the claim. (This is how a FAIL is tested: no
knob in the measurements exists to force one. A closed-form claim's pass rule is its tagged test;
tests/claims/test_tagged.py plants a failing one.)"""

from __future__ import annotations

from dataclasses import replace

from experiments.claims.boundaries import C17Result, CompressionBoundary
from experiments.claims.compare import (C20_GRPO_KEYS, C20_PPO_KEYS, COMPUTE_AXES, PROTOCOL_ITEMS, C19Result,
                                        C20Result, ComparedRun, DiagnosedRun)
from experiments.claims.groups import C6Result, GroupRates
from experiments.claims.process import C24TrainerResult, RewardRun
from experiments.claims.roles import C8Result


def _setting(mixed_rate: float, p_mix: float) -> GroupRates:
    return GroupRates(groups=120, mixed_groups=round(mixed_rate * 120), mixed_rate=mixed_rate, successes=480,
                      trials=960, p_hat=0.5, p_mix=p_mix)


C6 = C6Result(group_size=8, task_index=0, hard_task_index=0, independent=_setting(0.9, 0.92), ci_low=0.84,
              ci_high=0.94, shared_seed=_setting(0.0, 0.99), identical_groups=120, mixed_tasks=_setting(0.5, 0.99),
              p_train=0.9, p_heldout=0.1)


def test_c6_pass_rule():
    assert C6.passes()
    assert "inside" in C6.measured
    bad = replace(C6, independent=replace(C6.independent, p_mix=0.96))  # e.g. P_mix with a wrong G: outside [0.84, 0.94]
    assert not bad.passes() and "OUTSIDE" in bad.measured
    assert not replace(C6, shared_seed=replace(C6.shared_seed, mixed_rate=0.95)).passes()  # correlated but mixing more


C8 = C8Result(rollouts=2, rows=2, width=10, env_tokens=12, bos=2, sep=4, forced_eos=0, observation=6,
              sampled_tokens=6, env_weight_max=0.0, env_advantage_max=0.0, sampled_weight_min=1 / 6,
              sampled_is_action_mask=True, turns=4, capped=0, boundaries_ok=True, eos_ok=True, pad_positions=2,
              padding_ok=True, version_ok=True, temperature=1.0, temperatures=(1.0,), loss_real=0.0, grad_env_real=0,
              loss_tokens_real=6, loss_observations=0.1, grad_env_observations=10, loss_tokens_observations=16)


def test_c8_pass_rule():
    assert C8.passes() and "sampling temperature: stored = 1;" in C8.measured
    assert not replace(C8, env_weight_max=0.0625).passes()  # an observation token weighted
    no_temperature = replace(C8, temperatures=(None,))  # temperature not stored
    assert not no_temperature.passes() and "NOT one stored value per sample ([None])" in no_temperature.measured
    assert not replace(C8, grad_env_observations=0).passes()  # the wrong mask changes nothing


def _boundary(r=0.0, v=0.5, boot=0.7, v_reset=0.4) -> CompressionBoundary:
    # continuing: r + gamma V' - V = 0.2; relabelled terminal: r - V = -0.5
    return CompressionBoundary(end="compressed", reward=r, value=v, bootstrap=boot, value_continuation=boot,
                               value_next_first=boot, value_reset=v_reset, prefix_ok=True, terminated=False,
                               truncated=False, td_continuing=r + boot - v, td_terminal=r - v, adv_continuing=0.1,
                               adv_terminal=-0.4)


C17 = C17Result(rollouts=4, multi_segment=2, gamma=1.0, lam=0.95, boundaries=(_boundary(), _boundary(r=1.0)))


def test_c17_pass_rule():
    assert C17.passes()
    # the trainer itself labelling a compression terminal (bootstrap 0)
    relabelled = replace(C17.boundaries[1], terminated=True, bootstrap=0.0, td_continuing=1.0 - 0.5)
    assert not replace(C17, boundaries=(C17.boundaries[0], relabelled)).passes()
    # bootstrapped from the reset context
    assert not replace(C17, boundaries=(replace(C17.boundaries[0], bootstrap=0.4), C17.boundaries[1])).passes()
    empty = replace(C17, boundaries=())
    assert not empty.passes() and "no compression boundary in the batch" in empty.measured  # nothing measured


def _run(group_size: int) -> ComparedRun:
    return ComparedRun(eval_success=0.5, eval_train_success=0.6, test_budget=4, eval_tasks=8, updates=16,
                       start_success=0.3, compute={k: 300.0 for k in COMPUTE_AXES}, group_size=group_size,
                       critic="separate" if group_size == 1 else None)


C19 = C19Result(budget=256, grpo=_run(4), ppo=_run(1), protocol_items=len(PROTOCOL_ITEMS), protocol_differ=(),
                same_start=True)


def test_c19_pass_rule():
    assert C19.passes()
    bad = replace(C19, protocol_differ=("eval.samples_per_task",))
    assert not bad.passes() and "differ: eval.samples_per_task" in bad.measured
    missing = replace(C19, ppo=replace(C19.ppo, compute={**C19.ppo.compute, "compute/train_flops": None}))
    assert not missing.passes() and "train_flops: GRPO 300 vs PPO missing" in missing.measured  # an axis missing
    short = replace(C19, ppo=replace(C19.ppo, compute={**C19.ppo.compute, "compute/rollouts": 200.0}))
    assert not short.passes()  # budget not spent


def _diag(keys: tuple[str, ...]) -> DiagnosedRun:
    return DiagnosedRun(updates=3, finite_updates={k: 3 for k in keys}, all_zero_rate=0.1, all_one_rate=0.1,
                        mixed_group_rate=0.8, agg_weight_shift=0.1, ev_in_batch=0.1, success=0.5, test_budget=4,
                        recovery_rate=0.5, tool_failure_episodes=6, train_success=0.5, train_recovery_rate=0.5,
                        train_tool_failure_episodes=6, eval_split="heldout")


C20 = C20Result(budget=256, grpo=_diag(C20_GRPO_KEYS), ppo=_diag(C20_PPO_KEYS), heldout_ev=(None, 0.2, None),
                heldout_points=(0, 12, 5))


def test_c20_pass_rule():
    assert C20.passes() and "NaN/absent in 2 with 0 points (fewer than 2 points), 5 points" in C20.measured
    bad = replace(C20, grpo=replace(C20.grpo, finite_updates={**C20.grpo.finite_updates, "rollout/all_one_rate": 2}))
    assert not bad.passes() and "missing or not finite: grpo rollout/all_one_rate" in bad.measured
    assert not replace(C20, heldout_ev=(None, None, None)).passes()
    assert not replace(C20, heldout_points=(None, 12, 5)).passes()  # NaN EV without a count
    assert not replace(C20, ppo=replace(C20.ppo, eval_split="train")).passes()
    no_recovery = replace(C20, ppo=replace(C20.ppo, recovery_rate=None))
    assert not no_recovery.passes() and "ppo summary eval/recovery_rate" in no_recovery.measured


def _mode(algo: str, mode: str, r0, r1, s0, s1, frac=None) -> RewardRun:
    return RewardRun(algo=algo, mode=mode, updates=64, reward_first=r0, reward_last=r1, success_first=s0,
                     success_last=s1, turns_last=5.0, eval_train_success=s1, scored_step_frac=frac)


C24 = C24TrainerResult(budget=1024, seed=0, biased_mode="biased_process",
                       outcome=_mode("grpo", "outcome", 0.3, 0.5, 0.3, 0.5),
                       biased=_mode("grpo", "biased_process", 0.5, 1.0, 0.3, 0.4),
                       process_biased=_mode("grpo_process", "biased_process", 0.3, 0.6, 0.0, 0.1, 0.4))


def _process(**changes) -> C24TrainerResult:
    return replace(C24, process_biased=replace(C24.process_biased, **changes))


def test_c24_trainer_pass_rule():
    assert C24.passes()
    # reward - success in the last quarter 0.1 < 0.2
    assert not replace(C24, biased=replace(C24.biased, reward_last=0.5)).passes()
    # outcome reward disagreeing with verified success (0.5 vs 0.3)
    assert not replace(C24, outcome=replace(C24.outcome, success_last=0.3)).passes()
    # grpo_process: reward - success 0.6 - 0.45 = 0.15 < 0.2 (and success grew 0.45 > reward's 0.3)
    assert not _process(success_last=0.45).passes()
    # grpo_process: success grew as much as the reward (0.3 -> 0.6 and 0.0 -> 0.3): not farmed
    assert not _process(success_last=0.3, reward_last=0.6).passes()
    # the process run must be grpo_process under the biased mode
    assert not _process(algo="grpo").passes()
    assert not _process(mode="process").passes()


def test_c24_trainer_text_reports_grpo_process_next_to_grpo():
    text = C24.measured
    assert ("trainer grpo_process (step rewards as the advantage signal, same budget, start model and seed) under "
            "biased_process: train reward 0.300 -> 0.600, verified success 0.000 -> 0.100 (reward - success "
            "+0.500, need >= 0.2), scored steps 0.40 of all") in text
    assert "final verified success on train templates 0.100 (GRPO under biased_process 0.400, under outcome 0.500)" in text
