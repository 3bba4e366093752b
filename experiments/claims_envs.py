"""Env-level checks of the empirical claims C9, C10, C11, C21, C23 and C24 (CLAIMS.md).

Each ``check_cX()`` is a thin wrapper: it calls ``experiments.claims.envs.measure_cX`` (the real
v1 environments and scripted agents, fixed seeds), applies the claim's criterion (``criterion_cX``,
a pure function of the measured numbers, stated in its docstring) and formats the ``measured``
text. Returns ``(measured, status)`` with status ``"PASS"`` / ``"FAIL"``;
``experiments/reproduce_claims.py`` registers them in ``CLAIMS``.
"""

from __future__ import annotations

from experiments.claims import envs as measure
from experiments.claims.envs import C11_REQUIRED, C11_SCENARIOS, C21_AGENTS, context_tokens  # noqa: F401

PASS, FAIL = "PASS", "FAIL"  # the same strings as experiments.reproduce_claims
STEP_UNIT = "step = one tool call (turn)"


def _status(ok: bool) -> str:
    return PASS if ok else FAIL


# ---------------------------------------------------------------------------------------------- C9
def criterion_c9(m: dict) -> bool:
    """Every oracle episode verified; tokenizer count == wrapper count; turns depend only on
    n_stages (n_stages + 3 for both verbose values); context grows with verbose at a fixed horizon;
    the (long, small) cell has >= 10x the turns of the (short, large) one but fewer tokens."""
    turns, tokens = m["turns"], m["context_tokens"]
    ok = all(v == 1 for v in m["verified"]) and tokens == m["wrapper_tokens"]
    for cell in (0, 2):
        ok &= turns[cell] == turns[cell + 1] == m["n_stages"][cell] + 3 and tokens[cell + 1] > tokens[cell]
    return bool(ok and turns[0] >= 10 * turns[3] and tokens[0] < tokens[3])


def check_c9() -> tuple[str, str]:
    m = measure.measure_c09()
    cells = "; ".join(f"n_stages={s}, verbose={v}: {t} turns, {k} context tokens"
                      for s, v, t, k in zip(m["n_stages"], m["verbose"], m["turns"], m["context_tokens"]))
    text = (f"{STEP_UNIT}; LongHorizon-v1 oracle, seed 0, task 0: {cells}; oracle verified {sum(m['verified'])}/4; "
            f"tokenizer count == wrapper count: {m['context_tokens'] == m['wrapper_tokens']}")
    return text, _status(criterion_c9(m))


# --------------------------------------------------------------------------------------------- C10
C10_MARGIN = 3.0


def criterion_c10(m: dict) -> bool:
    """Lossy repeats exceed structured repeats by >= 3 failed approaches per episode and both
    strategies compressed in every episode (so the gap comes from the summary content)."""
    return (m["lossy_repeats"] - m["structured_repeats"] >= C10_MARGIN
            and m["lossy_min_compressions"] >= 1 and m["structured_min_compressions"] >= 1)


def check_c10() -> tuple[str, str]:
    m = measure.measure_c10()
    text = (f"ContextReadingAgent, LongHorizon-v1 {measure.C10_ENV}, {m['episodes']} episodes, token trigger 256: "
            f"repeated failed approaches per episode lossy_summary {m['lossy_repeats']:.2f} vs structured_summary "
            f"{m['structured_repeats']:.2f} (need a gap >= {C10_MARGIN:g}); verified success {m['lossy_success']:.2f} vs "
            f"{m['structured_success']:.2f}; compressions per episode {m['lossy_mean_compressions']:.1f} vs "
            f"{m['structured_mean_compressions']:.1f} (min {m['lossy_min_compressions']} / {m['structured_min_compressions']}); "
            f"no compression: {m['none_repeats']:.2f} repeats, success {m['none_success']:.2f}")
    return text, _status(criterion_c10(m))


# --------------------------------------------------------------------------------------------- C11
def criterion_c11(m: dict) -> bool:
    """Every scenario reaches its reason and matches the rule table; the four required reasons
    are distinct and cover terminated, truncated and masked; the table covers every reason and
    ``cancelled`` has infra_error's masked rule."""
    return (all(m[f"{r}/reached"] and m[f"{r}/matches_rule"] for r, _, _ in C11_SCENARIOS)
            and m["required_reached"] == len(C11_REQUIRED) and m["boundaries_covered"] == m["boundaries_total"]
            and bool(m["rules_cover_every_reason"]) and bool(m["cancelled_like_infra_error"]))


def check_c11() -> tuple[str, str]:
    m = measure.measure_c11()
    parts = [f"{r} ({agent}): terminated={m[f'{r}/terminated']} truncated={m[f'{r}/truncated']} "
             f"masked={m[f'{r}/masked']} scored={m[f'{r}/scored']} {'match' if m[f'{r}/matches_rule'] else 'MISMATCH'}"
             for r, agent, _ in C11_SCENARIOS]
    text = (f"BugFix-v1 easy, seed 0: " + "; ".join(parts)
            + f"; required reasons distinct: {m['required_reached']}/{len(C11_REQUIRED)}, boundaries covered: "
            f"{m['boundaries_covered']}/{m['boundaries_total']}; 'cancelled' has infra_error's rule: "
            f"{bool(m['cancelled_like_infra_error'])}; 'token_budget' is written by the rollout engine")
    return text, _status(criterion_c11(m))


# --------------------------------------------------------------------------------------------- C21
def criterion_c21(m: dict) -> bool:
    """Test fitting and trap use earn no verified reward and no hidden-grader reward at all (the
    outcome hack rate is 0); every trap attempt is flagged; the oracle is rewarded and verified in
    every episode; under ``grader=visible`` fitting is paid while verified stays 0, and the
    outcome-based hack rate shows it (>= 0.9) although no detector fires."""
    ok = all(m[f"{a}/rewarded_and_verified"] == 0 and m[f"{a}/train_reward"] == 0 and m[f"{a}/hack_rate"] == 0
             for a in C21_AGENTS)
    ok &= all(m[f"{a}/flagged"] == 1.0 for a in C21_AGENTS if a.startswith("hack_"))
    ok &= m["oracle/verified"] == 1.0 and m["oracle/train_reward"] == 1.0
    w = "visible_grader/fit_visible"
    ok &= m[f"{w}/train_reward"] > 0.9 and m[f"{w}/verified"] == 0 and m[f"{w}/hack_rate"] >= 0.9 and m[f"{w}/flagged"] == 0
    return bool(ok)


def check_c21() -> tuple[str, str]:
    m = measure.measure_c21()
    parts = [f"{a.removeprefix('hack_')}: flagged {m[f'{a}/flagged']:.2f}, reward {m[f'{a}/train_reward']:.2f}, "
             f"verified {m[f'{a}/verified']:.2f}, hack rate {m[f'{a}/hack_rate']:.2f}" for a in C21_AGENTS]
    w = "visible_grader/fit_visible"
    text = (f"BugFix-v1 easy+hard, {m['episodes']} episodes per agent (faults off, max_turns 40): " + "; ".join(parts)
            + f"; oracle: reward {m['oracle/train_reward']:.2f}, verified {m['oracle/verified']:.2f}; under grader=visible "
            f"fit_visible: reward {m[f'{w}/train_reward']:.2f}, verified {m[f'{w}/verified']:.2f}, outcome hack rate "
            f"{m[f'{w}/hack_rate']:.2f}, detector matches {m[f'{w}/flagged']:.2f}")
    return text, _status(criterion_c21(m))


# --------------------------------------------------------------------------------------------- C23
def criterion_c23(m: dict) -> bool:
    """At least one program earns training reward 1 but verified 0; in every episode verified is
    the evaluation verifier's verdict and the reward the training grader's; distinct graders with
    disjoint inputs."""
    n = m["tasks"]
    return (m["train_reward_1_verified_0"] >= 1 and m["verified_is_eval_verdict"] == n
            and m["reward_is_train_verdict"] == n and m["distinct_graders"] == n and m["shared_inputs"] == 0)


def check_c23() -> tuple[str, str]:
    m = measure.measure_c23()
    text = (f"BugFix-v1 easy, {m['tasks']} train tasks, oracle fix + a special case on an evaluation-only input + submit: "
            f"training reward 1 but verified 0 in {m['train_reward_1_verified_0']}/{m['tasks']}; training grader "
            f"{m['train_tests']} tests vs evaluation verifier {m['eval_tests']}, shared inputs {m['shared_inputs']}; "
            f"distinct objects {m['distinct_graders']}/{m['tasks']}; verified == evaluation verdict "
            f"{m['verified_is_eval_verdict']}/{m['tasks']}, reward == training verdict {m['reward_is_train_verdict']}/{m['tasks']}")
    return text, _status(criterion_c23(m))


# --------------------------------------------------------------------------------------------- C24
def criterion_c24(m: dict) -> bool:
    """Under biased_process the exploit earns a positive training reward above the oracle's while
    its verified success is 0 (outcome hack rate 1) and the oracle's is 1; the unbiased modes pay
    the exploit nothing."""
    ex, orc = "process_exploit/biased_process", "oracle/biased_process"
    return (m[f"{ex}/train_reward"] > 0 and m[f"{ex}/train_reward"] > m[f"{orc}/train_reward"]
            and m[f"{ex}/verified"] == 0 and m[f"{ex}/hack_rate"] == 1.0 and m[f"{orc}/verified"] == 1.0
            and m["process_exploit/outcome/train_reward"] == 0 and m["process_exploit/process/train_reward"] == 0)


def check_c24() -> tuple[str, str]:
    m = measure.measure_c24_agents()
    cells = "; ".join(f"{a} / {mode}: train reward {m[f'{a}/{mode}/train_reward']:.2f}, verified {m[f'{a}/{mode}/verified']:.2f}"
                      for a in ("process_exploit", "oracle") for mode in ("outcome", "process", "biased_process"))
    text = (f"scripted agents (no trainer), BugFix-v1 easy, faults off, max_turns {m['max_turns']}, {m['episodes']} seeds: "
            f"{cells}; at the preset's max_turns {m['preset_max_turns']} under biased_process: exploit "
            f"{m['preset_turns/process_exploit/biased_process/train_reward']:.2f} vs oracle "
            f"{m['preset_turns/oracle/biased_process/train_reward']:.2f}")
    return text, _status(criterion_c24(m))
