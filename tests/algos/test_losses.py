"""algos.losses: hand-computed numbers, loop references, gradients and micro-batch invariance."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from algos.losses import (
    AGGREGATION_MODES,
    KL_ESTIMATORS,
    LOG_RATIO_CLAMP,
    RATIO_KINDS,
    aggregate,
    approx_kl,
    aggregation_weights,
    kl_estimate,
    ppo_clip_loss,
    sequence_ratios,
    token_ratios,
    value_loss,
)

PROPERTY = settings(max_examples=50, deadline=None)
F64 = torch.float64


def t64(x):
    return torch.tensor(x, dtype=F64)


# ------------------------------------------------------------------ ratios


# The source document's ratios (old [.5, .25, .5], new [.6, .2, .6]: per token, their product and its
# geometric mean) are claim C1 (tests/claims/test_closed_form.py, through these functions).


def test_sequence_ratios_mask_and_empty_rows():
    old = t64([[0.5, 0.25, 0.5], [0.5, 0.5, 0.5]]).log()
    new = t64([[0.6, 0.2, 0.6], [0.1, 0.9, 0.3]]).log()
    mask = torch.tensor([[1, 0, 1], [0, 0, 0]])
    # row 0: tokens 0 and 2 only: 1.2 * 1.2 = 1.44; geometric sqrt(1.44) = 1.2; row 1: no tokens -> 1
    assert torch.allclose(sequence_ratios(new, old, mask), t64([1.44, 1.0]), atol=1e-12)
    assert torch.allclose(sequence_ratios(new, old, mask, length_normalized=True), t64([1.2, 1.0]), atol=1e-12)


@PROPERTY
@given(data=st.data(), b=st.integers(1, 4), t=st.integers(1, 6), normalized=st.booleans())
def test_sequence_ratios_match_loop(data, b, t, normalized):
    lp = st.floats(-4, 0)
    new = [data.draw(st.lists(lp, min_size=t, max_size=t)) for _ in range(b)]
    old = [data.draw(st.lists(lp, min_size=t, max_size=t)) for _ in range(b)]
    mask = [data.draw(st.lists(st.booleans(), min_size=t, max_size=t)) for _ in range(b)]
    got = sequence_ratios(t64(new), t64(old), torch.tensor(mask), length_normalized=normalized)
    for i in range(b):
        total, n = 0.0, 0
        for j in range(t):
            if mask[i][j]:
                total += new[i][j] - old[i][j]
                n += 1
        s = total / n if (normalized and n) else total
        expected = math.exp(min(max(s, -LOG_RATIO_CLAMP), LOG_RATIO_CLAMP))  # the clamp at |s| = 20
        assert math.isclose(got[i].item(), expected, rel_tol=1e-9)


def test_long_sequence_ratio_is_finite_with_a_finite_gradient():
    """200 tokens at log-ratio +0.5 sum to 100; exp(100) overflows float32 (max ~3.4e38 =
    exp(88.7)). The ratio's value and slope are held at exp(20) beyond |s| = 20: finite ratio,
    finite and non-zero gradient."""
    new = torch.full((1, 200), -1.0, requires_grad=True)
    old = torch.full((1, 200), -1.5)
    mask = torch.ones(1, 200, dtype=torch.bool)
    ratio = sequence_ratios(new, old, mask)
    assert torch.isfinite(ratio).all() and ratio.item() == pytest.approx(math.exp(20.0), rel=1e-5)
    loss, clipped = ppo_clip_loss(ratio[:, None].expand(1, 200), torch.full((1, 200), -1.0))
    loss.sum().backward()
    assert torch.isfinite(loss).all() and torch.isfinite(new.grad).all()
    # A = -1 on 200 tokens, unclipped branch: dL/dlogp_t = -A * sum over the row's 200 loss
    # elements of d rho / d s = 200 * exp(20) on every token
    assert new.grad[0, 0].item() == pytest.approx(200 * math.exp(20.0), rel=1e-5)
    assert torch.exp(torch.tensor(100.0)).isinf()  # what the unbounded product would have been
    # below the bound nothing changes: 200 tokens at +0.05 -> exp(10)
    assert sequence_ratios(old + 0.05, old, mask).item() == pytest.approx(math.exp(10.0), rel=1e-4)
    assert token_ratios(t64([30.0, 1.0]), t64([0.0, 0.0])).tolist() == pytest.approx([math.exp(20.0), math.e])


def _per_row_ppo_gradient(s: float, adv: float, n_tokens: int, clip: float = 0.2) -> float:
    """d/d logp_t of one row's summed PPO loss (sequence ratio broadcast to its ``n_tokens``
    tokens, loss summed over them), in float64, one row at a time: -A * rho'(s) * n_tokens when
    PPO's min selects the unclipped term, else 0; rho'(s) = exp(min(max(s, -20), 20))."""
    rho = math.exp(s)
    unclipped = rho * adv
    clipped = min(max(rho, 1 - clip), 1 + clip) * adv
    if clipped < unclipped:
        return 0.0
    return -adv * math.exp(min(max(s, -LOG_RATIO_CLAMP), LOG_RATIO_CLAMP)) * n_tokens


@pytest.mark.parametrize("kind", ["sequence", "sequence-norm", "token"])
def test_large_ratio_with_negative_advantage_keeps_ppos_gradient(kind):
    """A row at summed log-ratio +30 with advantage -1.1 sits in PPO's unclipped branch (rho * A
    < clip(rho) * A): its gradient must not vanish. Rows at +15 (inside the bound: exact PPO),
    +30 with A > 0 and -30 with A < 0 (clipped: 0), and -30 with A > 0 (unclipped, rho ~ 0)."""
    n = 3
    rows = [(30.0, -1.1), (15.0, -1.1), (30.0, 1.1), (-30.0, -1.1), (-30.0, 1.1), (0.1, -0.7)]
    old = torch.zeros(len(rows), n, dtype=torch.float64)
    # sequence: the row sums to s; sequence-norm: its mean is s; token: every token at s
    per_token = [s / n if kind == "sequence" else s for s, _ in rows]
    new = torch.tensor([[p] * n for p in per_token], dtype=torch.float64, requires_grad=True)
    adv = torch.tensor([[a] for _, a in rows], dtype=torch.float64)
    mask = torch.ones(len(rows), n, dtype=torch.bool)
    ratio = RATIO_KINDS[kind](new, old, mask)
    loss, _ = ppo_clip_loss(ratio, adv)
    loss.sum().backward()
    for i, (s, a) in enumerate(rows):
        if kind == "token":  # each token its own ratio at log-ratio s, one loss element each
            expected = _per_row_ppo_gradient(s, a, 1)
        elif kind == "sequence":
            expected = _per_row_ppo_gradient(s, a, n)
        else:  # the mean log-ratio s: d s / d logp_t = 1 / n, n loss elements
            expected = _per_row_ppo_gradient(s, a, n) / n
        assert new.grad[i].tolist() == pytest.approx([expected] * n, rel=1e-9, abs=1e-300), (kind, s, a)
    assert new.grad[0, 0].item() > 1e8  # +30, A < 0: PPO pushes the row down, never 0


def test_ratio_kinds():
    old = t64([[0.5, 0.25, 0.5]]).log()
    new = t64([[0.6, 0.2, 0.6]]).log()
    m = torch.tensor([[True, True, False]])
    # token: 1.2, 0.8 on the mask, exactly 1 off it; sequence: 1.2 * 0.8 = 0.96 on every token;
    # sequence-norm: sqrt(0.96) = 0.979796
    assert torch.allclose(RATIO_KINDS["token"](new, old, m), t64([[1.2, 0.8, 1.0]]))
    assert torch.allclose(RATIO_KINDS["sequence"](new, old, m), t64([[0.96] * 3]))
    assert torch.allclose(RATIO_KINDS["sequence-norm"](new, old, m), t64([[0.96 ** 0.5] * 3]))


def test_ratio_bad_arguments():
    with pytest.raises(ValueError, match=r"logp_old has shape \(2,\), expected \(3,\)"):
        token_ratios(torch.zeros(3), torch.zeros(2))
    with pytest.raises(ValueError, match=r"mask has shape \(1, 2\), expected \(1, 3\)"):
        sequence_ratios(torch.zeros(1, 3), torch.zeros(1, 3), torch.ones(1, 2))
    with pytest.raises(ValueError, match=r"logp_new must be 2-D \[B, T\]"):
        sequence_ratios(torch.zeros(3), torch.zeros(3), torch.ones(3))


# ------------------------------------------------------------------ PPO clip


def test_ppo_clip_loss_numbers_and_clipped_flags():
    ratio = t64([0.5, 1.5, 0.5, 1.5, 1.0])
    adv = t64([1.0, 1.0, -1.0, -1.0, 2.0])
    loss, clipped = ppo_clip_loss(ratio, adv)
    # A=+1, r=0.5: min(0.5, 0.8) = 0.5 -> loss -0.5 (unclipped)
    # A=+1, r=1.5: min(1.5, 1.2) = 1.2 -> loss -1.2 (clipped)
    # A=-1, r=0.5: min(-0.5, -0.8) = -0.8 -> loss 0.8 (clipped)
    # A=-1, r=1.5: min(-1.5, -1.2) = -1.5 -> loss 1.5 (unclipped: ratio not limited)
    # A=+2, r=1.0: 2 -> loss -2
    assert torch.allclose(loss, t64([-0.5, -1.2, 0.8, 1.5, -2.0]), atol=1e-12)
    assert clipped.tolist() == [False, True, True, False, False]


def test_ppo_clip_higher_and_dual_clip():
    # clip-higher: clip_high 0.28, r=1.25, A=+1 -> 1.25 < 1.28, unclipped, loss -1.25
    loss, clipped = ppo_clip_loss(t64([1.25]), t64([1.0]), clip_low=0.2, clip_high=0.28)
    assert math.isclose(loss.item(), -1.25) and not clipped.item()
    # symmetric 0.2 clips it: loss -1.2
    loss, clipped = ppo_clip_loss(t64([1.25]), t64([1.0]))
    assert math.isclose(loss.item(), -1.2) and clipped.item()
    # dual clip c=3, r=4, A=-1: PPO objective min(-4, -1.2) = -4 (loss 4), capped at -c*A = 3
    loss, clipped = ppo_clip_loss(t64([4.0, 2.0]), t64([-1.0, -1.0]), dual_clip=3.0)
    # r=2: min(-2, -1.2) = -2 >= -3, not capped: loss 2
    assert torch.allclose(loss, t64([3.0, 2.0])) and clipped.tolist() == [True, False]
    # dual clip never touches A > 0: r=4, A=+1 -> ordinary clip, loss -1.2
    loss, _ = ppo_clip_loss(t64([4.0]), t64([1.0]), dual_clip=3.0)
    assert math.isclose(loss.item(), -1.2)


def test_ppo_clip_gradient_zero_exactly_where_clipped():
    ratio = t64([0.5, 1.5, 0.5, 1.5, 1.0, 5.0]).requires_grad_(True)
    adv = t64([1.0, 1.0, -1.0, -1.0, 2.0, -1.0])
    loss, clipped = ppo_clip_loss(ratio, adv, dual_clip=3.0)
    (grad,) = torch.autograd.grad(loss.sum(), ratio)
    # d(-r A)/dr = -A where unclipped, 0 where a clipped branch is used
    assert grad.tolist() == [-1.0, 0.0, 0.0, 1.0, -2.0, 0.0]
    assert clipped.tolist() == [False, True, True, False, False, True]


def test_ppo_clip_broadcasts_sequence_advantages():
    ratio = t64([[0.5, 1.5], [1.0, 1.1]])
    adv = t64([[1.0], [-2.0]])
    loss, clipped = ppo_clip_loss(ratio, adv)
    # row 0 (A=1): -0.5, -1.2 (clipped); row 1 (A=-2): min(-2, -2) = -2 -> 2; min(-2.2, -2.2) -> 2.2
    assert torch.allclose(loss, t64([[-0.5, -1.2], [2.0, 2.2]]))
    assert clipped.tolist() == [[False, True], [False, False]]


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"clip_low": 1.0}, r"clip_low must be a number in \[0.0, 1.0\), got 1.0"),
        ({"clip_low": -0.1}, r"clip_low must be a number in \[0.0, 1.0\), got -0.1"),
        ({"clip_high": -0.2}, r"clip_high must be a number in \[0.0, inf\), got -0.2"),
        ({"dual_clip": 1.0}, r"dual_clip must be a number in \(1.0, inf\), got 1.0"),
        ({"dual_clip": "3"}, r"dual_clip must be a number"),
        ({"advantages": torch.zeros(3, 1, 2)}, r"ratio shape \(2, 3\) and advantages shape \(3, 1, 2\) do not broadcast"),
    ],
)
def test_ppo_clip_bad_arguments(kwargs, match):
    args = {"ratio": torch.ones(2, 3), "advantages": torch.ones(2, 1)} | kwargs
    with pytest.raises(ValueError, match=match):
        ppo_clip_loss(**args)


@PROPERTY
@given(
    pairs=st.lists(st.tuples(st.floats(0.01, 5), st.floats(-3, 3)), min_size=1, max_size=10),
    clip_low=st.floats(0, 0.9),
    clip_high=st.floats(0, 2),
    dual=st.one_of(st.none(), st.floats(1.01, 10)),
)
def test_ppo_clip_matches_elementwise_python(pairs, clip_low, clip_high, dual):
    ratio = t64([p[0] for p in pairs]).requires_grad_(True)
    adv = t64([p[1] for p in pairs])
    loss, clipped = ppo_clip_loss(ratio, adv, clip_low, clip_high, dual)
    (grad,) = torch.autograd.grad(loss.sum(), ratio)
    for i, (r, a) in enumerate(pairs):
        obj = min(r * a, min(max(r, 1 - clip_low), 1 + clip_high) * a)
        if dual is not None and a < 0:
            obj = max(obj, dual * a)
        assert math.isclose(loss[i].item(), -obj, rel_tol=1e-12, abs_tol=1e-12)
        # the element has gradient -A unless a clipped branch was used
        assert grad[i].item() == (0.0 if clipped[i] else -a)


# ------------------------------------------------------------------ value loss


def test_value_loss_numbers():
    # unclipped: 0.5 * (1.0 - 0.0)^2 = 0.5
    assert value_loss(t64([1.0]), t64([0.0]), t64([0.0])).tolist() == [0.5]
    v, old, ret = t64([1.0, 0.9]), t64([0.0, 0.0]), t64([0.0, 1.0])
    # elem 0: (v-R)^2 = 1; clipped v = 0 + 0.2 -> (0.2)^2 = 0.04; 0.5 * max = 0.5
    # elem 1: (0.9-1)^2 = 0.01; clipped v = 0.2 -> (0.2-1)^2 = 0.64; 0.5 * max = 0.32
    assert torch.allclose(value_loss(v, old, ret, clip=0.2), t64([0.5, 0.32]), atol=1e-12)


def test_value_loss_clip_gradient_zero_when_clipped_term_wins():
    v = t64([0.9]).requires_grad_(True)
    loss = value_loss(v, t64([0.0]), t64([1.0]), clip=0.2)
    (grad,) = torch.autograd.grad(loss.sum(), v)
    assert grad.item() == 0.0  # the clipped term (constant in v beyond the clip) is the max


def test_value_loss_bad_arguments():
    with pytest.raises(ValueError, match=r"clip must be a number in \(0.0, inf\), got 0"):
        value_loss(torch.zeros(2), torch.zeros(2), torch.zeros(2), clip=0)
    with pytest.raises(ValueError, match=r"returns has shape \(3,\), expected \(2,\)"):
        value_loss(torch.zeros(2), torch.zeros(2), torch.zeros(3))


# ------------------------------------------------------------------ KL estimators


def test_kl_estimators_numbers():
    logp, ref = t64([math.log(0.5)]), t64([math.log(0.25)])
    x = math.log(0.25) - math.log(0.5)  # log(0.5) = -0.693147
    assert math.isclose(kl_estimate(logp, ref, "k1").item(), -x)  # 0.693147
    assert math.isclose(kl_estimate(logp, ref, "k2").item(), 0.5 * x * x)  # 0.240227
    assert math.isclose(kl_estimate(logp, ref, "k3").item(), 0.5 - 1 - x)  # 0.5 - 1 + 0.693147 = 0.193147
    assert kl_estimate(logp, logp).item() == 0.0


def test_kl_bad_kind_lists_names():
    with pytest.raises(ValueError, match=r"unknown KL estimator 'k4'; allowed: 'k1', 'k2', 'k3'"):
        kl_estimate(torch.zeros(2), torch.zeros(2), "k4")
    with pytest.raises(ValueError, match=r"ref_logp has shape"):
        kl_estimate(torch.zeros(2), torch.zeros(3))


@PROPERTY
@given(
    logits=st.lists(st.floats(-3, 3), min_size=2, max_size=6),
    data=st.data(),
)
def test_k1_k3_unbiased_k2_k3_nonnegative(logits, data):
    ref_logits = data.draw(st.lists(st.floats(-3, 3), min_size=len(logits), max_size=len(logits)))
    logp = torch.log_softmax(t64(logits), 0)
    ref = torch.log_softmax(t64(ref_logits), 0)
    p = logp.exp()
    exact = float((p * (logp - ref)).sum())  # KL(pi || ref)
    for kind in ("k1", "k3"):  # E_{a ~ pi}[k] = KL exactly
        assert math.isclose(float((p * kl_estimate(logp, ref, kind)).sum()), exact, abs_tol=1e-9)
    for kind in ("k2", "k3"):
        assert (kl_estimate(logp, ref, kind) >= 0).all()
    assert set(KL_ESTIMATORS) == {"k1", "k2", "k3"}


def test_approx_kl_numbers():
    # pi_old 0.5, pi_new 0.25: r = 0.5, r - 1 - log r = 0.5 - 1 + 0.693147 = 0.193147
    assert math.isclose(approx_kl(t64([math.log(0.25)]), t64([math.log(0.5)])).item(), 0.5 - 1 + math.log(2))
    # the reversed form 1/r - 1 + log r would give 2 - 1 - 0.693147 = 0.306853
    assert approx_kl(t64([-1.0]), t64([-1.0])).item() == 0.0


@PROPERTY
@given(logits=st.lists(st.floats(-3, 3), min_size=2, max_size=6), data=st.data())
def test_approx_kl_expectation_is_the_exact_kl_old_new(logits, data):
    """E_{a ~ pi_old}[r - 1 - log r] = KL(pi_old || pi_new) exactly (by enumeration of a
    small categorical), and every term is >= 0."""
    new_logits = data.draw(st.lists(st.floats(-3, 3), min_size=len(logits), max_size=len(logits)))
    old, new = torch.log_softmax(t64(logits), 0), torch.log_softmax(t64(new_logits), 0)
    p_old = old.exp()
    exact = float((p_old * (old - new)).sum())  # KL(pi_old || pi_new)
    assert math.isclose(float((p_old * approx_kl(new, old)).sum()), exact, abs_tol=1e-9)
    assert (approx_kl(new, old) >= 0).all()


def test_sampled_approx_kl_matches_the_exact_kl():
    """The Monte Carlo mean over 200k samples of pi_old is within 3 standard errors of the KL."""
    old = torch.log(t64([0.5, 0.3, 0.2]))
    new = torch.log(t64([0.2, 0.3, 0.5]))
    exact = float((old.exp() * (old - new)).sum())  # 0.3 ln 1 + (0.5 - 0.2) ln 2.5 = 0.274887
    assert exact == pytest.approx(0.3 * math.log(2.5), abs=1e-12)
    a = torch.multinomial(old.exp(), 200_000, replacement=True, generator=torch.Generator().manual_seed(0))
    k = approx_kl(new[a], old[a])
    assert abs(float(k.mean()) - exact) < 3 * float(k.std()) / math.sqrt(len(k))


# ------------------------------------------------------------------ aggregation


def weights_reference(mask, mode, traj_ids=None):
    """Per-row Python loops."""
    b, t = len(mask), len(mask[0])
    row_tokens = [sum(1 for x in r if x) for r in mask]
    total = sum(row_tokens)
    n_rows = sum(1 for n in row_tokens if n)
    out = [[0.0] * t for _ in range(b)]
    for i in range(b):
        for j in range(t):
            if not mask[i][j]:
                continue
            if mode == "token-mean":
                out[i][j] = 1 / total
            elif mode == "seq-mean-token-mean":
                out[i][j] = 1 / row_tokens[i] / n_rows
            elif mode == "seq-mean-token-sum":
                out[i][j] = 1 / n_rows
            else:
                traj_tokens = sum(row_tokens[k] for k in range(b) if traj_ids[k] == traj_ids[i])
                n_trajs = len({traj_ids[k] for k in range(b) if row_tokens[k]})
                out[i][j] = 1 / traj_tokens / n_trajs
    return out


def test_aggregation_document_slice_example():
    # Task A: 2 positions, loss 1. Task B: 6 positions, loss 3.
    mask = torch.tensor([[1, 1, 0, 0, 0, 0], [1, 1, 1, 1, 1, 1]], dtype=torch.bool)
    loss = t64([[1.0] * 6, [3.0] * 6])
    ids = torch.tensor([0, 1])
    # mean per task then mean: (1 + 3) / 2 = 2.0; over all 8 positions: (2*1 + 6*3) / 8 = 20/8 = 2.5
    assert math.isclose(aggregate(loss, aggregation_weights(mask, "task-mean", ids)).item(), 2.0, rel_tol=1e-6)
    assert math.isclose(aggregate(loss, aggregation_weights(mask, "token-mean")).item(), 2.5, rel_tol=1e-6)
    # seq-mean-token-sum: (2*1 + 6*3) / 2 rows = 10
    assert math.isclose(aggregate(loss, aggregation_weights(mask, "seq-mean-token-sum")).item(), 10.0, rel_tol=1e-6)
    # Task B sliced into two segments of 3: task-mean unchanged (2.0); per-row mean moves to
    # (1 + 3 + 3) / 3 = 2.333
    sliced = torch.tensor([[1, 1, 0], [1, 1, 1], [1, 1, 1]], dtype=torch.bool)
    loss3 = t64([[1.0] * 3, [3.0] * 3, [3.0] * 3])
    ids3 = torch.tensor([5, 9, 9])
    assert math.isclose(aggregate(loss3, aggregation_weights(sliced, "task-mean", ids3)).item(), 2.0, rel_tol=1e-6)
    assert math.isclose(aggregate(loss3, aggregation_weights(sliced, "seq-mean-token-mean")).item(), 7 / 3, rel_tol=1e-6)


def test_aggregation_all_zero_mask_and_empty_rows():
    for mode in AGGREGATION_MODES:
        w = aggregation_weights(torch.zeros(2, 3, dtype=torch.bool), mode, torch.tensor([0, 1]))
        assert w.tolist() == [[0.0] * 3] * 2, mode
    # An empty row does not count as a sequence: rows [1,1] and [0,0] -> seq-mean weights 1/2 each
    w = aggregation_weights(torch.tensor([[1, 1], [0, 0]]), "seq-mean-token-mean")
    assert w.tolist() == [[0.5, 0.5], [0.0, 0.0]]


def test_aggregation_bad_arguments():
    mask = torch.ones(2, 3, dtype=torch.bool)
    with pytest.raises(ValueError, match=r"unknown aggregation mode 'token_mean'; allowed: 'token-mean', 'seq-mean-token-mean', 'seq-mean-token-sum', 'task-mean'"):
        aggregation_weights(mask, "token_mean")
    with pytest.raises(ValueError, match=r"'task-mean' needs traj_ids"):
        aggregation_weights(mask, "task-mean")
    with pytest.raises(ValueError, match=r"traj_ids must have shape \(2,\)"):
        aggregation_weights(mask, "task-mean", torch.tensor([0, 1, 2]))
    with pytest.raises(ValueError, match=r"traj_ids must be an integer tensor"):
        aggregation_weights(mask, "task-mean", torch.tensor([0.0, 1.0]))
    with pytest.raises(ValueError, match=r"mask must be 2-D \[B, T\]"):
        aggregation_weights(torch.ones(3), "token-mean")
    with pytest.raises(ValueError, match=r"mask must be bool or hold only 0/1 values, found 0.5"):
        aggregation_weights(torch.full((2, 2), 0.5), "token-mean")
    with pytest.raises(ValueError, match=r"weights has shape \(2, 2\), expected \(2, 3\)"):
        aggregate(torch.zeros(2, 3), torch.zeros(2, 2))


@st.composite
def loss_batches(draw):
    b, t = draw(st.integers(1, 6)), draw(st.integers(1, 5))
    mask = [draw(st.lists(st.booleans(), min_size=t, max_size=t)) for _ in range(b)]
    loss = [draw(st.lists(st.floats(-5, 5), min_size=t, max_size=t)) for _ in range(b)]
    traj = draw(st.lists(st.integers(0, 3), min_size=b, max_size=b))
    parts = draw(st.lists(st.integers(0, 3), min_size=b, max_size=b))  # micro-batch of each row
    return mask, loss, traj, parts


@PROPERTY
@given(batch=loss_batches(), mode=st.sampled_from(sorted(AGGREGATION_MODES)))
def test_aggregation_weights_match_loop_reference(batch, mode):
    mask, _, traj, _ = batch
    w = aggregation_weights(torch.tensor(mask), mode, torch.tensor(traj))
    ref = weights_reference(mask, mode, traj)
    assert torch.allclose(w.double(), t64(ref), atol=1e-7)
    if any(any(r) for r in mask):
        # every mode is a normalised average of something: token-mean and the mean modes sum to 1
        if mode != "seq-mean-token-sum":
            assert math.isclose(w.sum().item(), 1.0, rel_tol=1e-5)


@PROPERTY
@given(batch=loss_batches(), mode=st.sampled_from(sorted(AGGREGATION_MODES)), pad_cols=st.integers(0, 3), pad_rows=st.integers(0, 2))
def test_micro_batch_accumulation_equals_full_batch(batch, mode, pad_cols, pad_rows):
    mask, loss_values, traj, parts = batch
    b, t = len(mask), len(mask[0])
    # Pad the batch with mask-0 columns and rows (padding carries junk losses that must not count).
    m = torch.zeros(b + pad_rows, t + pad_cols, dtype=torch.bool)
    m[:b, :t] = torch.tensor(mask)
    x = torch.full((b + pad_rows, t + pad_cols), 7.0, dtype=F64)
    x[:b, :t] = t64(loss_values)
    ids = torch.tensor(traj + [99] * pad_rows)
    parts = parts + [0] * pad_rows
    theta = t64([0.7, -1.3]).requires_grad_(True)

    def per_token_loss(rows):
        return theta[0] * x[rows] + theta[1] * x[rows] ** 2

    w = aggregation_weights(m, mode, ids)
    everything = torch.arange(b + pad_rows)
    full = aggregate(per_token_loss(everything), w[everything])
    (full_grad,) = torch.autograd.grad(full, theta)
    # Padding changes nothing: the unpadded batch gives the same total.
    unpadded = aggregate(per_token_loss(everything)[:b, :t], aggregation_weights(torch.tensor(mask), mode, torch.tensor(traj)))
    assert math.isclose(full.item(), unpadded.item(), rel_tol=1e-5, abs_tol=1e-6)
    # Uneven micro-batches (some possibly empty), each summing its own slice of the global weights.
    total, grad = 0.0, torch.zeros(2, dtype=F64)
    for part in sorted(set(parts)):
        rows = torch.tensor([i for i, p in enumerate(parts) if p == part])
        mb = aggregate(per_token_loss(rows), w[rows])
        (g,) = torch.autograd.grad(mb, theta)
        total += mb.item()
        grad += g
    assert math.isclose(total, full.item(), rel_tol=1e-9, abs_tol=1e-9)
    assert torch.allclose(grad, full_grad, rtol=1e-9, atol=1e-9)
