"""The criteria beside the claims table decide PASS / FAIL from numbers alone: each holds on a
hand-built dict shaped like its measurement and fails when one number breaks the claim. (This is
how a FAIL is tested: no knob in the measurements exists to force one.)"""

from __future__ import annotations

import copy

from experiments.claims import criteria
from experiments.claims import closed_form as cf
from experiments.claims.compare import C20_GRPO_KEYS, C20_MEAN_KEYS, C20_PPO_KEYS, C20_TASK_KEYS, COMPUTE_AXES, PROTOCOL_ITEMS


def _broken(m: dict, path: tuple, value) -> dict:
    bad = copy.deepcopy(m)
    obj = bad
    for key in path[:-1]:
        obj = obj[key]
    obj[path[-1]] = value
    return bad


def test_closed_form_criterion_fails_on_a_wrong_number():
    m = cf.measure_c2()
    assert criteria.c2_passes(m)
    assert not criteria.c2_passes(_broken(m, ("std",), 0.5773))  # the sample-std convention's sqrt(1/3)
    m = cf.measure_c16()
    assert criteria.c16_passes(m)
    assert not criteria.c16_passes(_broken(m, ("continue_residual",), -0.6))  # compression treated as terminal


def _setting(mixed_rate: float, p_mix: float, **extra) -> dict:
    return {"groups": 120, "mixed_groups": round(mixed_rate * 120), "mixed_rate": mixed_rate, "successes": 480,
            "trials": 960, "p_hat": 0.5, "p_mix": p_mix, **extra}


C6 = {"group_size": 8, "task_index": 0, "hard_task_index": 0,
      "independent": _setting(0.9, 0.92, ci_low=0.84, ci_high=0.94),
      "shared_seed": _setting(0.0, 0.99, identical_groups=120),
      "mixed_tasks": _setting(0.5, 0.99, p_train=0.9, p_heldout=0.1)}


def test_c6_criterion():
    assert criteria.c6_passes(C6)
    assert "inside" in criteria.c6_text(C6)
    bad = _broken(C6, ("independent", "p_mix"), 0.96)  # e.g. P_mix with a wrong G: outside [0.84, 0.94]
    assert not criteria.c6_passes(bad) and "OUTSIDE" in criteria.c6_text(bad)
    assert not criteria.c6_passes(_broken(C6, ("shared_seed", "mixed_rate"), 0.95))  # correlated but mixing more


C8 = {"rollouts": 2, "rows": 2, "width": 10, "env_tokens": 12, "bos": 2, "sep": 4, "forced_eos": 0, "observation": 6,
      "sampled_tokens": 6, "env_weight_max": 0.0, "env_advantage_max": 0.0, "sampled_weight_min": 1 / 6,
      "sampled_is_action_mask": True, "turns": 4, "capped": 0, "boundaries_ok": True, "eos_ok": True,
      "pad_positions": 2, "padding_ok": True, "version_ok": True, "temperature": 1.0, "temperatures": [1.0],
      "loss_real": 0.0, "grad_env_real": 0, "loss_tokens_real": 6, "loss_observations": 0.1,
      "grad_env_observations": 10, "loss_tokens_observations": 16}


def test_c8_criterion():
    assert criteria.c8_passes(C8)
    assert not criteria.c8_passes(_broken(C8, ("env_weight_max",), 0.0625))  # an observation token weighted
    assert not criteria.c8_passes(_broken(C8, ("temperatures",), [None]))  # temperature not stored
    assert not criteria.c8_passes(_broken(C8, ("grad_env_observations",), 0))  # the wrong mask changes nothing


def _boundary(r=0.0, V=0.5, boot=0.7, V_reset=0.4) -> dict:
    # continuing: r + gamma V' - V = 0.2; relabelled terminal: r - V = -0.5
    return {"end": "compressed", "r": r, "V": V, "boot": boot, "V_cont": boot, "V_next_first": boot,
            "V_reset": V_reset, "prefix_ok": True, "terminated": False, "truncated": False,
            "td_c": r + boot - V, "td_t": r - V, "adv_c": 0.1, "adv_t": -0.4}


C17 = {"rollouts": 4, "multi_segment": 2, "gamma": 1.0, "lam": 0.95, "boundaries": [_boundary(), _boundary(r=1.0)]}


def test_c17_criterion():
    assert criteria.c17_passes(C17)
    # the trainer itself labelling a compression terminal (bootstrap 0)
    bad = copy.deepcopy(C17)
    bad["boundaries"][1].update(terminated=True, boot=0.0, td_c=1.0 - 0.5)
    assert not criteria.c17_passes(bad)
    assert not criteria.c17_passes(_broken(C17, ("boundaries", 0, "boot"), 0.4))  # bootstrapped from the reset context
    assert not criteria.c17_passes({**C17, "boundaries": []})  # nothing measured is not a PASS


def _run(group_size: int) -> dict:
    return {"eval/success": 0.5, "eval_train/success": 0.6, "eval/test_budget": 4, "eval/tasks": 8, "updates": 16,
            "start_model/success": 0.3, **{k: 300.0 for k in COMPUTE_AXES}, "group_size": group_size,
            "critic": "separate" if group_size == 1 else None}


C19 = {"budget": 256, "grpo": _run(4), "ppo": _run(1), "protocol_items": len(PROTOCOL_ITEMS),
       "protocol_differ": [], "same_start": True}


def test_c19_criterion():
    assert criteria.c19_passes(C19)
    bad = {**C19, "protocol_differ": ["eval.samples_per_task"]}
    assert not criteria.c19_passes(bad) and "differ: eval.samples_per_task" in criteria.c19_text(bad)
    assert not criteria.c19_passes(_broken(C19, ("ppo", "compute/train_flops"), None))  # an axis missing
    assert not criteria.c19_passes(_broken(C19, ("ppo", "compute/rollouts"), 200.0))  # budget not spent


def _diag(keys: tuple, summary: dict) -> dict:
    return {"updates": 3, "finite_updates": {k: 3 for k in keys}, "means": {k: 0.1 for k in C20_MEAN_KEYS},
            "summary": summary, "eval_split": "heldout"}


SUMMARY = {k: 0.5 for k in C20_TASK_KEYS}
C20 = {"budget": 256, "grpo": _diag(C20_GRPO_KEYS, SUMMARY),
       "ppo": {**_diag(C20_PPO_KEYS, SUMMARY), "heldout_ev": [None, 0.2, None], "heldout_points": [0, 12, 5]}}


def test_c20_criterion():
    assert criteria.c20_passes(C20)
    bad = _broken(C20, ("grpo", "finite_updates", "rollout/all_one_rate"), 2)
    assert not criteria.c20_passes(bad) and "grpo rollout/all_one_rate" in criteria.c20_text(bad)
    assert not criteria.c20_passes(_broken(C20, ("ppo", "heldout_ev"), [None, None, None]))
    assert not criteria.c20_passes(_broken(C20, ("ppo", "heldout_points"), [None, 12, 5]))  # NaN EV without a count
    assert not criteria.c20_passes(_broken(C20, ("ppo", "eval_split"), "train"))


def _mode(r0, r1, s0, s1) -> dict:
    return {"updates": 64, "reward_first": r0, "reward_last": r1, "success_first": s0, "success_last": s1,
            "turns_last": 5.0, "eval_train_success": s1}


C24 = {"budget": 1024, "seed": 0, "biased_mode": "biased_process",
       "outcome": _mode(0.3, 0.5, 0.3, 0.5), "biased": _mode(0.5, 1.0, 0.3, 0.4),
       "process_biased": {**_mode(0.3, 0.6, 0.0, 0.1), "algo": "grpo_process", "mode": "biased_process",
                          "scored_step_frac": 0.4}}


def test_c24_trainer_criterion():
    assert criteria.c24_trainer_passes(C24)
    # reward - success in the last quarter 0.1 < 0.2
    assert not criteria.c24_trainer_passes(_broken(C24, ("biased", "reward_last"), 0.5))
    # outcome reward disagreeing with verified success (0.5 vs 0.3)
    assert not criteria.c24_trainer_passes(_broken(C24, ("outcome", "success_last"), 0.3))
    # grpo_process: reward - success 0.6 - 0.45 = 0.15 < 0.2 (and success grew 0.45 > reward's 0.3)
    assert not criteria.c24_trainer_passes(_broken(C24, ("process_biased", "success_last"), 0.45))
    # grpo_process: success grew as much as the reward (0.3 -> 0.6 and 0.0 -> 0.3): not farmed
    assert not criteria.c24_trainer_passes(_broken(_broken(C24, ("process_biased", "success_last"), 0.3),
                                             ("process_biased", "reward_last"), 0.6))
    # the process run must be grpo_process under the biased mode
    assert not criteria.c24_trainer_passes(_broken(C24, ("process_biased", "algo"), "grpo"))
    assert not criteria.c24_trainer_passes(_broken(C24, ("process_biased", "mode"), "process"))


def test_c24_trainer_text_reports_grpo_process_next_to_grpo():
    text = criteria.c24_trainer_text(C24)
    assert ("trainer grpo_process (step rewards as the advantage signal, same budget, start model and seed) under "
            "biased_process: train reward 0.300 -> 0.600, verified success 0.000 -> 0.100 (reward - success "
            "+0.500, need >= 0.2), scored steps 0.40 of all") in text
    assert "final verified success on train templates 0.100 (GRPO under biased_process 0.400, under outcome 0.500)" in text
