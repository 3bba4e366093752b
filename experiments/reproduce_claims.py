"""One row per claim of CLAIMS.md: ID, what was checked, expected, measured, status.

``python -m experiments.reproduce_claims`` prints the table and exits 1 if any row is FAIL.
Closed-form rows are computed with the project's own ``algos`` code (never a re-typed formula).
Empirical rows need the environments / trainers / experiments and report PENDING until a later
change replaces their ``check`` in ``CLAIMS``; they never print PASS without running anything.
PENDING and OPTIONAL rows do not fail the run.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import torch

from algos.advantages import gae, group_advantages, group_mean_std
from algos.losses import (
    aggregate,
    aggregation_weights,
    kl_estimate,
    ppo_clip_loss,
    sequence_ratios,
    token_ratios,
)
from algos.metrics import mixed_group_probability
from experiments.claims_envs import check_c9, check_c10, check_c11, check_c21, check_c23
from experiments.claims_trainers import (
    check_c6,
    check_c7,
    check_c8,
    check_c12,
    check_c13,
    check_c14,
    check_c17,
    check_c19,
    check_c20,
    check_c24,
)

PASS, FAIL, PENDING, OPTIONAL = "PASS", "FAIL", "PENDING", "OPTIONAL"
STATUSES = (PASS, FAIL, PENDING, OPTIONAL)


@dataclass(frozen=True)
class Claim:
    """A claim row: ``check()`` returns ``(measured, status)`` with status in ``STATUSES``;
    ``kind`` is "closed-form" (computed with ``algos``) or "empirical" (runs envs / trainers)."""

    id: str
    what: str
    expected: str
    check: Callable[[], tuple[str, str]]
    kind: str = "closed-form"


def _fmt(values) -> str:
    return "[" + ", ".join(f"{float(v):.4g}" for v in values) + "]"


def _status(ok: bool) -> str:
    return PASS if ok else FAIL


def _close(a, b, tol: float = 1e-9) -> bool:
    return torch.allclose(torch.as_tensor(a, dtype=torch.float64), torch.as_tensor(b, dtype=torch.float64), atol=tol, rtol=0)


# ---------------------------------------------------------------- closed-form checks


def check_c1() -> tuple[str, str]:
    old = torch.tensor([[0.5, 0.25, 0.5]], dtype=torch.float64).log()
    new = torch.tensor([[0.6, 0.2, 0.6]], dtype=torch.float64).log()
    mask = torch.ones_like(old, dtype=torch.bool)
    per_token = token_ratios(new, old)[0]
    product = sequence_ratios(new, old, mask)[0]
    geo = sequence_ratios(new, old, mask, length_normalized=True)[0]
    # Token-level surrogate with A = 1 (no clipping active at clip 0.25): mean of the token ratios,
    # which is not the product; using the product per token would change the objective.
    loss, _ = ppo_clip_loss(per_token, torch.ones(3, dtype=torch.float64), clip_low=0.25, clip_high=0.25)
    token_objective = -loss.mean()
    ok = (
        _close(per_token, [1.2, 0.8, 1.2])
        and _close(product, 1.152)
        and _close(token_objective, 3.2 / 3)
        and not _close(token_objective, product, tol=1e-3)
    )
    measured = (
        f"token ratios {_fmt(per_token)}; product {float(product):.4g}; "
        f"token-level surrogate (A=1) {float(token_objective):.4g} != {float(product):.4g}; "
        f"geometric mean (GSPO) {float(geo):.4g}"
    )
    return measured, _status(ok)


def check_c2() -> tuple[str, str]:
    rewards = torch.tensor([0.0, 0.0, 1.0, 1.0], dtype=torch.float64)
    ids = torch.zeros(4, dtype=torch.int64)
    mean, std, _ = group_mean_std(rewards, ids, std="population")
    adv = group_advantages(rewards, ids, std="population")
    ok = _close(mean, 0.5) and _close(std, 0.5) and _close(adv, [-1, -1, 1, 1], tol=1e-5)
    return f"mean {float(mean[0]):.4g}, std {float(std[0]):.4g}, advantages {_fmt(adv)}", _status(ok)


def _tiny_policy_grads(rewards: list[float]) -> tuple[torch.Tensor, float, float]:
    """4 responses x 2 tokens from a 3-word softmax policy theta; old = current (ratios 1), frozen
    reference != current. Returns (advantages, |grad| of the task-reward term, |grad| of k3 KL)."""
    theta = torch.tensor([0.3, -0.2, 0.1], dtype=torch.float64, requires_grad=True)
    ref_logits = torch.tensor([0.0, 0.5, -0.5], dtype=torch.float64)
    tokens = torch.tensor([[0, 1], [2, 2], [1, 0], [0, 2]])
    mask = torch.ones(4, 2, dtype=torch.bool)
    logp = torch.log_softmax(theta, dim=0)[tokens]
    ref_logp = torch.log_softmax(ref_logits, dim=0)[tokens]
    adv = group_advantages(torch.tensor(rewards, dtype=torch.float64), torch.zeros(4, dtype=torch.int64))
    weights = aggregation_weights(mask, "token-mean").to(torch.float64)
    pg_loss, _ = ppo_clip_loss(token_ratios(logp, logp.detach()), adv[:, None])
    (pg_grad,) = torch.autograd.grad(aggregate(pg_loss, weights), theta)
    logp = torch.log_softmax(theta, dim=0)[tokens]
    (kl_grad,) = torch.autograd.grad(aggregate(kl_estimate(logp, ref_logp, "k3"), weights), theta)
    return adv, float(pg_grad.abs().max()), float(kl_grad.abs().max())


def check_c3() -> tuple[str, str]:
    parts, ok = [], True
    for rewards in ([0.0] * 4, [1.0] * 4):
        adv, pg, kl = _tiny_policy_grads(rewards)
        ok &= bool((adv == 0).all()) and pg == 0.0 and kl > 0.0
        parts.append(f"r={_fmt(rewards)}: A={_fmt(adv)}, max abs grad: task term {pg:.3g}, k3 KL term {kl:.3g}")
    return "; ".join(parts), _status(ok)


def check_c4() -> tuple[str, str]:
    rewards = torch.tensor([0.0, 0.0, 1.0, 1.0], dtype=torch.float64)
    ids = torch.zeros(4, dtype=torch.int64)
    pop = group_advantages(rewards, ids, std="population", eps=0.0)
    sample = group_advantages(rewards, ids, std="sample", eps=0.0)
    raw = group_advantages(rewards, ids, std="none")
    # Two responses, 1 token with loss 1 and 3 tokens with loss 0:
    # token-mean (1 + 0 + 0 + 0) / 4 = 0.25; sequence mean (1/1 + 0/3) / 2 = 0.5.
    mask = torch.tensor([[1, 0, 0], [1, 1, 1]], dtype=torch.bool)
    loss = torch.tensor([[1.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    tok = float(aggregate(loss, aggregation_weights(mask, "token-mean")))
    seq = float(aggregate(loss, aggregation_weights(mask, "seq-mean-token-mean")))
    ok = (
        _close(pop, [-1, -1, 1, 1])
        and _close(sample, [-math.sqrt(0.75)] * 2 + [math.sqrt(0.75)] * 2)
        and _close(raw, [-0.5, -0.5, 0.5, 0.5])
        and _close(tok, 0.25, tol=1e-6)
        and _close(seq, 0.5, tol=1e-6)
    )
    measured = (
        f"r=[0,0,1,1]: population std A={_fmt(pop)} vs sample std {_fmt(sample)}; "
        f"no std division {_fmt(raw)}; loss [1] & [0,0,0]: token-mean {tok:.4g} vs seq-mean {seq:.4g}"
    )
    return measured, _status(ok)


def check_c5() -> tuple[str, str]:
    shown = {p: f"{mixed_group_probability(p, 8):.1%}" for p in (0.02, 0.2, 0.98)}
    rejected = []
    for p, g in ((1.5, 8), (-0.1, 8), (0.5, True), (0.5, 0), (0.5, 8.0)):
        try:
            mixed_group_probability(p, g)
        except ValueError:
            rejected.append(f"({p!r}, {g!r})")
    ok = shown == {0.02: "14.9%", 0.2: "83.2%", 0.98: "14.9%"} and len(rejected) == 5
    measured = "G=8: " + ", ".join(f"p={p}: {v}" for p, v in shown.items()) + f"; ValueError for {' '.join(rejected)}"
    return measured, _status(ok)


def check_c15() -> tuple[str, str]:
    as_row = lambda xs: torch.tensor([xs], dtype=torch.float64)  # noqa: E731
    rewards, values, next_values = as_row([0, 0, 1]), as_row([0.9, 0.3, 0.8]), as_row([0.3, 0.8, 0.0])
    terminated = torch.tensor([[False, False, True]])
    truncated = torch.zeros(1, 3, dtype=torch.bool)
    half, _ = gae(rewards, values, next_values, terminated, truncated, gamma=1.0, lam=0.5)
    one, _ = gae(rewards, values, next_values, terminated, truncated, gamma=1.0, lam=1.0)
    full_return_minus_value = 1.0 - values[0]
    ok = _close(half[0], [-0.3, 0.6, 0.2]) and _close(one[0], [0.1, 0.7, 0.2]) and _close(one[0], full_return_minus_value)
    return f"lambda 0.5 -> {_fmt(half[0])}; lambda 1 -> {_fmt(one[0])} (= 1 - V)", _status(ok)


def check_c16() -> tuple[str, str]:
    reward, value, next_value = (torch.tensor([[x]], dtype=torch.float64) for x in (0.0, 0.6, 0.8))
    no = torch.tensor([[False]])
    cont_adv, cont_target = gae(reward, value, next_value, no, no, gamma=0.9, lam=0.95)
    term_adv, term_target = gae(reward, value, next_value, ~no, no, gamma=0.9, lam=0.95)
    ok = (
        _close(cont_target, 0.72)
        and _close(cont_adv, 0.12)
        and _close(term_target, 0.0)
        and _close(term_adv, -0.6)
    )
    measured = (
        f"compression (no flag): target {float(cont_target):.4g}, residual {float(cont_adv):+.4g}; "
        f"terminated: target {float(term_target):.4g}, residual {float(term_adv):+.4g}"
    )
    return measured, _status(ok)


def check_c18() -> tuple[str, str]:
    # Task A: 2 positions with loss 1 (row 0). Task B: 6 positions with loss 3, sliced into two
    # segments of 3 (rows 1, 2). Padding to width 4.
    mask = torch.tensor([[1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 0]], dtype=torch.bool)
    loss = torch.tensor([[1.0] * 4, [3.0] * 4, [3.0] * 4]) * mask
    traj_ids = torch.tensor([0, 1, 1])
    w_task = aggregation_weights(mask, "task-mean", traj_ids)
    w_tok = aggregation_weights(mask, "token-mean")
    task = float(aggregate(loss, w_task))
    tok = float(aggregate(loss, w_tok))
    splits = ([0], [1, 2])
    task_mb = sum(float(aggregate(loss[i], w_task[i])) for i in splits)
    tok_mb = sum(float(aggregate(loss[i], w_tok[i])) for i in splits)
    # A per-micro-batch denominator (token-mean inside each micro-batch, then averaged) drifts.
    local = sum(float(aggregate(loss[i], aggregation_weights(mask[i], "token-mean"))) for i in splits) / len(splits)
    per_segment = float(aggregate(loss, aggregation_weights(mask, "seq-mean-token-mean")))
    ok = (
        _close(task, 2.0, 1e-6)
        and _close(tok, 2.5, 1e-6)
        and _close(task_mb, 2.0, 1e-6)
        and _close(tok_mb, 2.5, 1e-6)
        and not _close(local, 2.5, 1e-3)
    )
    measured = (
        f"task-mean {task:.4g}, token-mean {tok:.4g}; micro-batches {list(splits)} with global weights: "
        f"{task_mb:.4g} / {tok_mb:.4g}; per-micro-batch token-mean would give {local:.4g}, "
        f"per-segment mean {per_segment:.4g}"
    )
    return measured, _status(ok)


def check_c25() -> tuple[str, str]:
    # Two tokens at ratio 1.5 (clip 0.2): A=+1 is beyond the range in its advantage's direction
    # (clipped, zero gradient); A=-1 is not (unclipped, gradient flows; the ratio is not limited).
    logp_old = torch.log(torch.tensor([0.4, 0.4], dtype=torch.float64))
    logp_new = (logp_old + math.log(1.5)).requires_grad_(True)
    adv = torch.tensor([1.0, -1.0], dtype=torch.float64)
    ratio = token_ratios(logp_new, logp_old)
    loss, clipped = ppo_clip_loss(ratio, adv, clip_low=0.2, clip_high=0.2)
    (grad,) = torch.autograd.grad(loss.sum(), logp_new)
    # KL to a frozen reference with the current policy equal to the old one (all ratios 1).
    theta = torch.tensor([0.3, -0.2, 0.1], dtype=torch.float64, requires_grad=True)
    tokens = torch.tensor([0, 1, 2, 0])
    logp = torch.log_softmax(theta, 0)[tokens]
    ref_logp = torch.log_softmax(torch.tensor([0.0, 0.5, -0.5], dtype=torch.float64), 0)[tokens]
    ratios_now = token_ratios(logp, logp.detach())
    kl = kl_estimate(logp, ref_logp, "k3").mean()
    (kl_grad,) = torch.autograd.grad(kl, theta)
    ok = (
        clipped.tolist() == [True, False]
        and float(grad[0]) == 0.0
        and _close(grad[1], 1.5)
        and _close(ratio.detach(), [1.5, 1.5])
        and _close(loss.detach(), [-1.2, 1.5])
        and bool((ratios_now == 1).all())
        and float(kl.detach()) > 0
        and float(kl_grad.abs().max()) > 0
    )
    measured = (
        f"r=1.5: A=+1 clipped, dL/dlogp {float(grad[0]):.3g}; A=-1 unclipped, dL/dlogp {float(grad[1]):.3g}; "
        f"ratios after loss {_fmt(ratio.detach())}; ratios all 1: k3 KL {float(kl.detach()):.3g}, "
        f"max abs grad {float(kl_grad.abs().max()):.3g}"
    )
    return measured, _status(ok)


def pending(needs: str) -> Callable[[], tuple[str, str]]:
    """A check for a row whose evidence needs code that is not in the tree yet."""
    return lambda: (f"needs {needs}", PENDING)


def optional(reason: str) -> Callable[[], tuple[str, str]]:
    """A check for an optional claim that is not run."""
    return lambda: (reason, OPTIONAL)


TRAINERS, EXPERIMENTS = "#4 (trainers)", "#5 (experiments)"

_ROWS: list[Claim] = [
    Claim("C1", "token vs sequence ratio, old [.5,.25,.5] new [.6,.2,.6]", "tokens [1.2, 0.8, 1.2]; product 1.152; token-level PPO uses per-token ratios", check_c1),
    Claim("C2", "GRPO group advantage, population std, r=[0,0,1,1]", "mean 0.5, std 0.5, A [-1, -1, 1, 1]", check_c2),
    Claim("C3", "all-same groups [0,0,0,0], [1,1,1,1]; autograd on a tiny policy", "A all 0; task-reward grad exactly 0; k3 KL grad non-zero", check_c3),
    Claim("C4", "conventions: std ddof, std division, token vs sequence mean", "each pair differs on the same data", check_c4),
    Claim("C5", "P_mix = 1 - p^G - (1-p)^G, G=8, and validation", "14.9%, 83.2%, 14.9%; ValueError on bad p / G", check_c5),
    Claim("C6", "measured mixed-group rate vs P_mix (real rollout engine, GRPO groups; shared-seed and mixed-task groups)", "within binomial CI; lower when correlated", check_c6, "empirical"),
    Claim("C7", "behavior / old / reference / verifier are separate roles (async rollout + GRPO trainer)", "stale behavior log-probs differ from recomputed old ones; both stored; equal when synchronous; reference frozen copy", check_c7, "empirical"),
    Claim("C8", "tool output is observation, not action (real rollout batch, GRPO update)", "observation tokens get zero loss weight; per-sample fields stored; un-masking changes the loss", check_c8, "empirical"),
    Claim("C9", "long context is not long horizon (LongHorizon oracle, 2x2 n_stages x verbose)", "step unit stated; horizon and context configurable independently", check_c9, "empirical"),
    Claim("C10", "lossy summary drops what the next decision needs (ContextReadingAgent, lossy vs structured)", "more repeated fixes with 'tests failed' summary", check_c10, "empirical"),
    Claim("C11", "stopping is not one thing (real BugFix episodes per stop reason)", "distinct stop reasons, each with continue / score rule", check_c11, "empirical"),
    Claim("C12", "group comparison without aligned steps (real BugFix episodes, GRPO update)", "4-step success vs 10-step failure compared by outcome: A +1 / -1 on every action token", check_c12, "empirical"),
    Claim("C13", "segments are not independent answers (LongHorizon + compression, GRPO update)", "3 + 6 segments stay 2 group members", check_c13, "empirical"),
    Claim("C14", "outcome-only GRPO: one advantage per trajectory (real rollout batch)", "all action tokens of a trajectory share A", check_c14, "empirical"),
    Claim("C15", "3-step GAE, r=[0,0,1], V=[.9,.3,.8], V'=[.3,.8,0], gamma 1", "lambda .5: [-0.3, 0.6, 0.2]; lambda 1: [0.1, 0.7, 0.2]", check_c15),
    Claim("C16", "compression vs terminal flag, r=0, V=.6, V'=.8, gamma .9", "continue: target 0.72, residual +0.12; terminal: 0, -0.6", check_c16),
    Claim("C17", "bootstrap from the real continuation after compression (PPO on real compressed rollouts)", "GAE uses V(compressed context), never a reset task; terminal flag gives r - V", check_c17, "empirical"),
    Claim("C18", "slice weighting: task A 2 x loss 1, task B 6 x loss 3", "task-mean 2.0, token-mean 2.5; same under micro-batching", check_c18),
    Claim("C19", "compute-matched GRPO vs PPO comparison (two experiments.train runs)", "rollouts, tokens, tool time, train compute side by side; fixed protocol", check_c19, "empirical"),
    Claim("C20", "training-side and task-side diagnostics (C19's runs)", "all-0/all-1 rates, held-out critic EV, slicing shift, success at equal budget, recovery, unseen templates", check_c20, "empirical"),
    Claim("C21", "reward hacking earns nothing (every BugFix hack agent, easy + hard)", "edited tests / read answers never rewarded; counted", check_c21, "empirical"),
    Claim("C22", "multi-agent non-stationarity (optional)", "centralized critic, local actors", optional(f"optional; needs {EXPERIMENTS}"), "empirical"),
    Claim("C23", "training judge is not independent evidence (BugFix graders)", "evaluation verifier separate from training reward", check_c23, "empirical"),
    Claim("C24", "process rewards add signal but can be biased (scripted agents + GRPO trainer runs)", "biased variant: higher train reward, not higher verified success", check_c24, "empirical"),
    Claim("C25", "PPO clipping is not a KL penalty (autograd)", "clipped token grad 0; ratio not limited; KL grad != 0 at ratios 1", check_c25),
]

CLAIMS: dict[str, Claim] = {claim.id: claim for claim in _ROWS}


def run_claim(claim: Claim) -> tuple[str, str]:
    """``claim.check()``, with an exception or an unknown status turned into a FAIL row."""
    try:
        measured, status = claim.check()
    except Exception as exc:  # a crashing check is a failed claim, reported in its row
        return f"check raised {type(exc).__name__}: {exc}", FAIL
    if status not in STATUSES:
        return f"check returned unknown status {status!r} ({measured})", FAIL
    return measured, status


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def main(claims: Mapping[str, Claim] | None = None) -> int:
    """Print the claims table (markdown) and a summary line; return 1 if any row is FAIL, else 0."""
    claims = CLAIMS if claims is None else claims
    results = {cid: run_claim(claim) for cid, claim in claims.items()}
    print("| ID | what was checked | expected | measured | status |")
    print("|---|---|---|---|---|")
    for cid, claim in claims.items():
        measured, status = results[cid]
        print(f"| {cid} | {_cell(claim.what)} | {_cell(claim.expected)} | {_cell(measured)} | {status} |")
    statuses = [status for _, status in results.values()]
    parts = []
    for kind in ("closed-form", "empirical"):
        ran = [results[cid][1] for cid, claim in claims.items() if claim.kind == kind and results[cid][1] in (PASS, FAIL)]
        parts.append(f"{kind}: {ran.count(PASS)}/{len(ran)} PASS")
    parts += [f"pending: {statuses.count(PENDING)}", f"optional: {statuses.count(OPTIONAL)}"]
    print()
    print(", ".join(parts))
    return 1 if FAIL in statuses else 0


if __name__ == "__main__":
    sys.exit(main())
