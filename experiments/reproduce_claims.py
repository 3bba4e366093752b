"""One row per claim of docs/claims.md: ID, what was checked, expected, measured, status.

``python -m experiments.reproduce_claims`` prints the table and exits 1 if any row is FAIL;
``--only C9 C13`` runs those rows only.

A row is three parts: a measurement ``measure_cNN() -> dict`` of numbers (``experiments/claims/``:
closed-form rows on hand-sized inputs through ``algos``, empirical rows on the real envs, rollout
engine, trainers and training entry point), its criterion ``cNN_passes(m) -> bool`` and the text
of its "measured" column ``cNN_text(m) -> str``, both in ``experiments/claims/criteria.py`` (the
env rows C9, C10, C11, C21, C23 and C24's scripted part measure in ``experiments/claims/envs.py``).
This file holds the table and its runner. OPTIONAL rows do not fail the run.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from experiments.claims import boundaries, closed_form, compare, groups, process, roles
from experiments.claims import criteria as cr
from experiments.claims import envs as envs_claims
from experiments.claims.multiagent import measure_c22

PASS, FAIL, OPTIONAL = "PASS", "FAIL", "OPTIONAL"
STATUSES = (PASS, FAIL, OPTIONAL)


@dataclass(frozen=True)
class Claim:
    """A claim row: ``check()`` returns ``(measured, status)`` with status in ``STATUSES``;
    ``kind`` is "closed-form" (computed with ``algos``) or "empirical" (runs envs / trainers)."""

    id: str
    what: str
    expected: str
    check: Callable[[], tuple[str, str]]
    kind: str = "closed-form"


def measured(measure: Callable[[], dict], passes: Callable[[dict], bool],
             text: Callable[[dict], str]) -> Callable[[], tuple[str, str]]:
    """The check of a row: run ``measure`` once, then ``(text(m), PASS if passes(m) else FAIL)``."""

    def check() -> tuple[str, str]:
        m = measure()
        return text(m), PASS if passes(m) else FAIL

    return check


def optional(reason: str) -> Callable[[], tuple[str, str]]:
    """A check for an optional claim that is not run."""
    return lambda: (reason, OPTIONAL)


def check_c24() -> tuple[str, str]:
    """C24 = the scripted-agent check (env row) and the trainer measurement; PASS when both pass."""
    scripted = envs_claims.measure_c24_agents()
    m = process.measure_c24_trainer()
    ok = cr.c24_agents_passes(scripted) and cr.c24_trainer_passes(m)
    return f"{cr.c24_agents_text(scripted)} || {cr.c24_trainer_text(m)}", PASS if ok else FAIL


_ROWS: list[Claim] = [
    Claim("C1", "token vs sequence ratio, old [.5,.25,.5] new [.6,.2,.6]", "tokens [1.2, 0.8, 1.2]; product 1.152; token-level PPO uses per-token ratios", measured(closed_form.measure_c1, cr.c1_passes, cr.c1_text)),
    Claim("C2", "GRPO group advantage, population std, r=[0,0,1,1]", "mean 0.5, std 0.5, A [-1, -1, 1, 1]", measured(closed_form.measure_c2, cr.c2_passes, cr.c2_text)),
    Claim("C3", "all-same groups [0,0,0,0], [1,1,1,1]; autograd on a tiny policy", "A all 0; task-reward grad exactly 0; k3 KL grad non-zero", measured(closed_form.measure_c3, cr.c3_passes, cr.c3_text)),
    Claim("C4", "conventions: std ddof, std division, token vs sequence mean", "each pair differs on the same data", measured(closed_form.measure_c4, cr.c4_passes, cr.c4_text)),
    Claim("C5", "P_mix = 1 - p^G - (1-p)^G, G=8, and validation", "14.9%, 83.2%, 14.9%; ValueError on bad p / G", measured(closed_form.measure_c5, cr.c5_passes, cr.c5_text)),
    Claim("C6", "measured mixed-group rate vs P_mix (real rollout engine, GRPO groups; shared-seed and mixed-task groups)", "within binomial CI; lower when correlated", measured(groups.measure_c6, cr.c6_passes, cr.c6_text), "empirical"),
    Claim("C7", "behavior / old / reference / verifier are separate roles (async rollout + GRPO trainer)", "stale behavior log-probs differ from recomputed old ones; both stored; equal when synchronous; reference frozen copy", measured(roles.measure_c7, cr.c7_passes, cr.c7_text), "empirical"),
    Claim("C8", "tool output is observation, not action (real rollout batch, GRPO update)", "observation tokens get zero loss weight; per-sample fields stored; un-masking changes the loss", measured(roles.measure_c8, cr.c8_passes, cr.c8_text), "empirical"),
    Claim("C9", "long context is not long horizon (LongHorizon oracle, 2x2 n_stages x verbose)", "step unit stated; horizon and context configurable independently", measured(envs_claims.measure_c09, cr.c9_passes, cr.c9_text), "empirical"),
    Claim("C10", "lossy summary drops what the next decision needs (ContextReadingAgent, lossy vs structured)", "more repeated fixes with 'tests failed' summary", measured(envs_claims.measure_c10, cr.c10_passes, cr.c10_text), "empirical"),
    Claim("C11", "stopping is not one thing (real BugFix episodes per stop reason)", "distinct stop reasons, each with continue / score rule", measured(envs_claims.measure_c11, cr.c11_passes, cr.c11_text), "empirical"),
    Claim("C12", "group comparison without aligned steps (real BugFix episodes, GRPO update)", "4-step success vs 10-step failure compared by outcome: A +1 / -1 on every action token", measured(groups.measure_c12, cr.c12_passes, cr.c12_text), "empirical"),
    Claim("C13", "segments are not independent answers (LongHorizon + compression, GRPO update)", "3 + 6 segments stay 2 group members", measured(groups.measure_c13, cr.c13_passes, cr.c13_text), "empirical"),
    Claim("C14", "outcome-only GRPO: one advantage per trajectory (real rollout batch)", "all action tokens of a trajectory share A", measured(groups.measure_c14, cr.c14_passes, cr.c14_text), "empirical"),
    Claim("C15", "3-step GAE, r=[0,0,1], V=[.9,.3,.8], V'=[.3,.8,0], gamma 1", "lambda .5: [-0.3, 0.6, 0.2]; lambda 1: [0.1, 0.7, 0.2]", measured(closed_form.measure_c15, cr.c15_passes, cr.c15_text)),
    Claim("C16", "compression vs terminal flag, r=0, V=.6, V'=.8, gamma .9", "continue: target 0.72, residual +0.12; terminal: 0, -0.6", measured(closed_form.measure_c16, cr.c16_passes, cr.c16_text)),
    Claim("C17", "bootstrap from the real continuation after compression (PPO on real compressed rollouts)", "GAE uses V(compressed context), never a reset task; terminal flag gives r - V", measured(boundaries.measure_c17, cr.c17_passes, cr.c17_text), "empirical"),
    Claim("C18", "slice weighting: task A 2 x loss 1, task B 6 x loss 3", "task-mean 2.0, token-mean 2.5; same under micro-batching", measured(closed_form.measure_c18, cr.c18_passes, cr.c18_text)),
    Claim("C19", "compute-matched GRPO vs PPO comparison (two experiments.train runs)", "rollouts, tokens, tool time, train compute side by side; fixed protocol", measured(compare.measure_c19, cr.c19_passes, cr.c19_text), "empirical"),
    Claim("C20", "training-side and task-side diagnostics (C19's runs)", "all-0/all-1 rates, held-out critic EV, slicing shift, success at equal budget, recovery, unseen templates", measured(compare.measure_c20, cr.c20_passes, cr.c20_text), "empirical"),
    Claim("C21", "reward hacking earns nothing (every BugFix hack agent, easy + hard)", "edited tests / read answers never rewarded; counted", measured(envs_claims.measure_c21, cr.c21_passes, cr.c21_text), "empirical"),
    Claim("C22", "multi-agent non-stationarity and a centralized critic (PairFix-v2, ppo_independent runs B frozen vs training; critic inputs on noisy-oracle episodes)", "B training shifts A's received messages more than B frozen (interval > 0); central inputs' held-out EV > local (interval > 0)", measured(measure_c22, cr.c22_passes, cr.c22_text), "empirical"),
    Claim("C23", "training judge is not independent evidence (BugFix graders)", "evaluation verifier separate from training reward", measured(envs_claims.measure_c23, cr.c23_passes, cr.c23_text), "empirical"),
    Claim("C24", "process rewards add signal but can be biased (scripted agents + GRPO and grpo_process trainer runs)", "biased variant: higher train reward, not higher verified success", check_c24, "empirical"),
    Claim("C25", "PPO clipping is not a KL penalty (autograd)", "clipped token grad 0; ratio not limited; KL grad != 0 at ratios 1", measured(closed_form.measure_c25, cr.c25_passes, cr.c25_text)),
]

CLAIMS: dict[str, Claim] = {claim.id: claim for claim in _ROWS}


def run_claim(claim: Claim) -> tuple[str, str]:
    """``claim.check()``, with an exception or an unknown status turned into a FAIL row."""
    try:
        text, status = claim.check()
    except Exception as exc:  # a crashing check is a failed claim, reported in its row
        return f"check raised {type(exc).__name__}: {exc}", FAIL
    if status not in STATUSES:
        return f"check returned unknown status {status!r} ({text})", FAIL
    return text, status


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def main(claims: Mapping[str, Claim] | None = None, argv: Sequence[str] | None = None) -> int:
    """Print the claims table (markdown) and a summary line; return 1 if any row is FAIL, else 0.
    ``argv``: the command line (``--only ID ...``); an unknown ID exits 2 before any row runs."""
    claims = CLAIMS if claims is None else claims
    parser = argparse.ArgumentParser(prog="python -m experiments.reproduce_claims",
                                     description="One row per claim of docs/claims.md; exit 1 if any row is FAIL.")
    parser.add_argument("--only", nargs="+", metavar="ID", help="run these claim IDs only (e.g. C9 C13)")
    args = parser.parse_args([] if argv is None else list(argv))
    if args.only:
        unknown = [cid for cid in args.only if cid not in claims]
        if unknown:
            parser.error(f"--only {' '.join(unknown)} unknown; allowed: {', '.join(claims)}")
        claims = {cid: claims[cid] for cid in claims if cid in args.only}
    results = {cid: run_claim(claim) for cid, claim in claims.items()}
    print("| ID | what was checked | expected | measured | status |")
    print("|---|---|---|---|---|")
    for cid, claim in claims.items():
        text, status = results[cid]
        print(f"| {cid} | {_cell(claim.what)} | {_cell(claim.expected)} | {_cell(text)} | {status} |")
    statuses = [status for _, status in results.values()]
    parts = []
    for kind in ("closed-form", "empirical"):
        ran = [results[cid][1] for cid, claim in claims.items() if claim.kind == kind and results[cid][1] in (PASS, FAIL)]
        parts.append(f"{kind}: {ran.count(PASS)}/{len(ran)} PASS")
    parts.append(f"optional: {statuses.count(OPTIONAL)}")
    print()
    print(", ".join(parts))
    return 1 if FAIL in statuses else 0


if __name__ == "__main__":
    sys.exit(main(argv=sys.argv[1:]))
