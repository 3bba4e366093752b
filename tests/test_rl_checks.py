"""rl_checks: the source document's two snippets run verbatim against this project."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

import rl_checks
from algos import metrics
from entry import run_script
from experiments.claims import closed_form

REPO = Path(__file__).resolve().parents[1]

# Copied verbatim from the source document (seed/000_012c7a9ae49ecd3d.txt). The first snippet
# defines its own mixed_group_probability: that is the claims' source snippet, run as written.
SNIPPET_MIXED = '''def mixed_group_probability(success_probability, group_size):
    if not 0 <= success_probability <= 1:
        raise ValueError("success_probability must be in [0, 1]")
    if isinstance(group_size, bool) or not isinstance(group_size, int) or group_size < 1:
        raise ValueError("group_size must be a positive integer")
    return 1 - success_probability ** group_size - (1 - success_probability) ** group_size

for success_probability in [0.02, 0.2, 0.98]:
    probability = mixed_group_probability(success_probability, 8)
    print(f"{success_probability:.0%}: {probability:.1%}")
'''

SNIPPET_GAE = '''from rl_checks import gae

rewards = [0, 0, 1]
values = [0.9, 0.3, 0.8]
next_values = [0.3, 0.8, 0]
terminated = [False, False, True]
truncated = [False, False, False]

for trace_decay in [0.5, 1.0]:
    advantages = gae(rewards, values, next_values, terminated, truncated,
                     gamma=1.0, trace_decay=trace_decay)
    print(trace_decay, [round(advantage, 3) for advantage in advantages])
'''

# What the snippets print: the same lines from the claims' measurements through ``algos`` (C5's
# P_mix at G = 8 and C15's GAE; their numbers are pinned, once, by tests/claims/test_closed_form.py).
C5, C15 = closed_form.measure_c5(), closed_form.measure_c15()
MIXED_OUTPUT = "".join(f"{p:.0%}: {v:.1%}\n" for p, v in C5.p_mix.items())
GAE_OUTPUT = "".join(f"{lam} {[round(a, 3) for a in adv]}\n" for lam, adv in ((0.5, C15.lambda_half),
                                                                             (1.0, C15.lambda_one)))


def run_snippet(code: str, tmp_path: Path) -> str:
    """``python snippet.py`` from the repository root, in this process (tests/entry.py)."""
    script = tmp_path / "snippet.py"
    script.write_text(code, encoding="utf-8")
    done = run_script(script, cwd=REPO)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_document_mixed_group_snippet_verbatim(tmp_path):
    assert run_snippet(SNIPPET_MIXED, tmp_path) == MIXED_OUTPUT


def test_document_mixed_group_snippet_with_our_function(tmp_path):
    # Same loop, but the function comes from rl_checks instead of the snippet's own definition.
    loop = SNIPPET_MIXED[SNIPPET_MIXED.index("for success_probability"):]
    code = "from rl_checks import mixed_group_probability\n\n" + loop
    assert run_snippet(code, tmp_path) == MIXED_OUTPUT


def test_document_gae_snippet_verbatim(tmp_path):
    assert run_snippet(SNIPPET_GAE, tmp_path) == GAE_OUTPUT


def test_rl_checks_is_a_thin_wrapper_over_algos():
    assert rl_checks.mixed_group_probability is metrics.mixed_group_probability
    out = rl_checks.gae([0, 0, 1], [0.9, 0.3, 0.8], [0.3, 0.8, 0], [False, False, True], [False] * 3)
    # default gamma 1.0, trace_decay 0.5: C15's example at lambda 0.5
    assert all(type(a) is float for a in out)
    assert all(math.isclose(a, b, abs_tol=1e-12) for a, b in zip(out, C15.lambda_half, strict=True))


def test_rl_checks_gae_truncation_and_compression():
    # Two steps, truncated after the second: bootstrap from V' = 2 but no recursion beyond.
    # delta1 = 1 + 0.9 * 2 - 0.5 = 2.3; delta0 = 1 + 0.9 * 0.5 - 0.5 = 0.95;
    # A0 = 0.95 + 0.9 * 0.5 * 2.3 = 1.985
    out = rl_checks.gae([1, 1], [0.5, 0.5], [0.5, 2.0], [False, False], [False, True], gamma=0.9, trace_decay=0.5)
    assert all(math.isclose(a, b, abs_tol=1e-12) for a, b in zip(out, [1.985, 2.3]))


@pytest.mark.parametrize(
    "args, match",
    [
        (([0, 1], [0.0], [0.0, 0.0], [False, False], [False, False]), r"same length\), got rewards=2, values=1, next_values=2, terminated=2, truncated=2"),
        (([0, 1], [0, 0], [0, 0], [False, 2], [False, False]), r"terminated must be bool or hold only 0/1 values, found 2"),
        (([0, "a"], [0, 0], [0, 0], [False, False], [False, False]), r"rewards must hold plain numbers"),
        ((5, [0], [0], [False], [False]), r"rewards must be a sequence with one entry per step"),
    ],
)
def test_rl_checks_gae_bad_arguments(args, match):
    with pytest.raises(ValueError, match=match):
        rl_checks.gae(*args)


def test_rl_checks_gae_bad_trace_decay():
    with pytest.raises(ValueError, match=r"^trace_decay must be a number in \[0, 1\], got 1.5"):
        rl_checks.gae([0], [0], [0], [True], [False], trace_decay=1.5)
