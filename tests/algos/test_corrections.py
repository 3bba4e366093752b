"""algos.corrections: hand-computed weights of every off-policy correction, properties of each,
the parameter checks, the mismatch metrics, and the trainer's use of both."""

from __future__ import annotations

import copy
import math
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from algos.configs import ConfigError
from algos.corrections import (
    CORRECTIONS,
    CorrectionParams,
    band_drop_share,
    behavior_kl_k1,
    correct,
    mismatch_metrics,
    prob_ratio_error,
    register_correction,
)
from algos.registry import make_trainer
from algos.trainer import SPLIT_COST_KEYS
from experiments.runtime.schema import AlgoConfig
from synthetic_trajectories import make_traj

torch.set_num_threads(1)
PROPERTY = settings(max_examples=50, deadline=None)
F64 = torch.float64
DOCS = Path(__file__).resolve().parents[2] / "docs"


def t64(rows):
    return torch.tensor(rows, dtype=F64)


def params(is_cap=1.5, is_low=0.8, is_high=2.5, neg_adv_kl_max=0.1):
    return CorrectionParams(is_cap=is_cap, is_low=is_low, is_high=is_high, neg_adv_kl_max=neg_adv_kl_max)


# Two rows. Row 0: pi_old [0.5, 0.25, 0.5], pi_behavior [0.25, 0.25, 0.1], the last token off the
# mask: rho = [2, 1, (5)]; A = +1. Row 1: pi_old [0.1, 0.4, 0.2], pi_behavior [0.4, 0.4, 0.1], all
# three on the mask: rho = [0.25, 1, 2]; A = -1.
OLD = t64([[0.5, 0.25, 0.5], [0.1, 0.4, 0.2]]).log()
BEHAVIOR = t64([[0.25, 0.25, 0.1], [0.4, 0.4, 0.1]]).log()
NEW = OLD + 0.1
ADV = t64([[1.0, 1.0, 1.0], [-1.0, -1.0, -1.0]])
MASK = torch.tensor([[True, True, False], [True, True, True]])


def weights(name, p=None, adv=ADV):
    base, w = correct(name, NEW, OLD, BEHAVIOR, adv, MASK, p or params())
    return base, w


def test_decoupled_none_and_behavior_as_old_keep_their_numbers():
    # decoupled (token TIS, cap 1.5): min(2, 1.5) = 1.5, min(1, 1.5) = 1, off the mask 1;
    # row 1: min(0.25, 1.5) = 0.25, 1, min(2, 1.5) = 1.5
    base, w = weights("decoupled")
    assert torch.equal(base, OLD)
    assert torch.allclose(w, t64([[1.5, 1.0, 1.0], [0.25, 1.0, 1.5]]))
    base, w = weights("none")
    assert torch.equal(base, OLD) and w is None
    base, w = weights("behavior-as-old")
    assert torch.equal(base, BEHAVIOR) and w is None


def test_sequence_tis_numbers():
    # row 0: prod rho over the mask = 2 * 1 = 2 -> min(2, 1.5) = 1.5 on its two loss tokens, 1 off
    # the mask; row 1: 0.25 * 1 * 2 = 0.5 -> 0.5 on all three
    base, w = weights("sequence-tis")
    assert torch.equal(base, OLD)
    assert torch.allclose(w, t64([[1.5, 1.5, 1.0], [0.5, 0.5, 0.5]]))
    # cap 3: row 0 keeps 2
    assert torch.allclose(weights("sequence-tis", params(is_cap=3.0))[1], t64([[2.0, 2.0, 1.0], [0.5, 0.5, 0.5]]))


def test_token_mask_numbers():
    # band [0.8, 2.5]: row 0: 2 and 1 inside (kept with their rho), off the mask 1;
    # row 1: 0.25 < 0.8 -> 0, 1 and 2 kept
    base, w = weights("token-mask")
    assert torch.equal(base, OLD)
    assert torch.allclose(w, t64([[2.0, 1.0, 1.0], [0.0, 1.0, 2.0]]))
    # band [0.5, 1.5]: row 0: 2 > 1.5 -> 0; row 1: 0.25 -> 0, 2 -> 0
    assert torch.allclose(weights("token-mask", params(is_low=0.5, is_high=1.5))[1], t64([[0.0, 1.0, 1.0], [0.0, 1.0, 0.0]]))


def test_sequence_mask_numbers():
    # geometric means: row 0 sqrt(2 * 1) = 1.41421 (in [0.8, 2.5]: kept, each token its rho);
    # row 1 (0.25 * 1 * 2)^(1/3) = 0.5^(1/3) = 0.793701 < 0.8: every token 0
    base, w = weights("sequence-mask")
    assert torch.equal(base, OLD)
    assert torch.allclose(w, t64([[2.0, 1.0, 1.0], [0.0, 0.0, 0.0]]))
    # is_low 0.79 < 0.793701: row 1 kept too
    assert torch.allclose(weights("sequence-mask", params(is_low=0.79))[1], t64([[2.0, 1.0, 1.0], [0.25, 1.0, 2.0]]))
    # is_high 1.4 < 1.41421: row 0 dropped (its off-mask token keeps 1)
    assert torch.allclose(weights("sequence-mask", params(is_low=0.79, is_high=1.4))[1],
                          t64([[0.0, 0.0, 1.0], [0.25, 1.0, 2.0]]))


def test_neg_adv_sequence_mask_numbers():
    # D = mean over the row's loss tokens of log pi_behavior - log pi_old = -mean log rho:
    # row 0: -(log 2 + 0) / 2 = -0.346574; row 1: -(log 0.25 + 0 + log 2) / 3 = log 2 / 3 = 0.231049.
    # kl_max 0.1: row 1 (A = -1, D > 0.1) dropped; row 0 has A = +1 (kept whatever D)
    base, w = weights("neg-adv-sequence-mask")
    assert torch.equal(base, OLD)
    assert torch.allclose(w, t64([[1.0, 1.0, 1.0], [0.0, 0.0, 0.0]]))
    # kl_max 0.24 > 0.231049: nothing dropped
    assert torch.allclose(weights("neg-adv-sequence-mask", params(neg_adv_kl_max=0.24))[1], torch.ones(2, 3, dtype=F64))
    # both rows A = -1: row 0's D = -0.346574 is below any threshold >= 0, so it stays
    assert torch.allclose(weights("neg-adv-sequence-mask", adv=-ADV.abs())[1], t64([[1.0, 1.0, 1.0], [0.0, 0.0, 0.0]]))
    # per-token advantages: only the negative ones of a divergent row go
    mixed = t64([[1.0, 1.0, 1.0], [-1.0, 0.5, -2.0]])
    assert torch.allclose(weights("neg-adv-sequence-mask", adv=mixed)[1], t64([[1.0, 1.0, 1.0], [0.0, 1.0, 0.0]]))


def test_mismatch_metrics_numbers():
    # loss tokens' pi_behavior / pi_old = 1 / rho: [0.5, 1, 4, 1, 0.5]; |x - 1| = [0.5, 0, 3, 0, 0.5]
    # -> 4 / 5 = 0.8
    assert prob_ratio_error(OLD, BEHAVIOR, MASK) == pytest.approx(0.8)
    # k1: mean of -log rho = -(log 2 + 0 + log 0.25 + 0 + log 2) / 5 = 0; row 1 alone: log 2 / 3
    assert behavior_kl_k1(OLD, BEHAVIOR, MASK) == pytest.approx(0.0, abs=1e-12)
    assert behavior_kl_k1(OLD[1:], BEHAVIOR[1:], MASK[1:]) == pytest.approx(math.log(2) / 3)
    # band [0.8, 2.5]: rho [2, 1, 0.25, 1, 2] -> only 0.25 outside: 1 / 5; band [0.5, 1.5]: 2, 0.25, 2 -> 3 / 5
    assert band_drop_share(OLD, BEHAVIOR, MASK, 0.8, 2.5) == pytest.approx(0.2)
    assert band_drop_share(OLD, BEHAVIOR, MASK, 0.5, 1.5) == pytest.approx(0.6)
    assert mismatch_metrics(OLD, BEHAVIOR, MASK, params()) == pytest.approx(
        {"off_policy/prob_ratio_error": 0.8, "off_policy/behavior_kl_k1": 0.0, "off_policy/band_drop_share": 0.2}, abs=1e-12)
    empty = torch.zeros_like(MASK)
    assert set(mismatch_metrics(OLD, BEHAVIOR, empty, params()).values()) == {0.0}


# ------------------------------------------------------------------ checks


@pytest.mark.parametrize("field, value, allowed", [
    ("is_cap", 0.5, r"\[1, inf\)"), ("is_cap", math.inf, r"\[1, inf\)"), ("is_cap", math.nan, r"\[1, inf\)"),
    ("is_low", 0.0, r"\(0, 1\]"), ("is_low", 1.5, r"\(0, 1\]"), ("is_high", 0.9, r"\[1, inf\)"),
    ("neg_adv_kl_max", -0.1, r"\[0, inf\]"), ("is_cap", True, r"\[1, inf\)"),
])
def test_bad_parameters_are_one_line_errors_naming_the_value_and_the_range(field, value, allowed):
    with pytest.raises(ValueError, match=rf"^{field}={value!r} is not allowed; allowed: a number in {allowed}$"):
        params(**{field: value})
    with pytest.raises(ConfigError, match=rf"^algo.{field}={value!r} is not allowed; allowed: a number in {allowed}$"):
        AlgoConfig(name="grpo", **{field: value})


def test_an_empty_band_and_an_unknown_name_are_rejected_before_compute():
    with pytest.raises(ConfigError, match=r"^algo.is_low=1.0 is not allowed with is_high=1.0; allowed: is_low < is_high$"):
        AlgoConfig(name="grpo", is_low=1.0, is_high=1.0)
    names = "decoupled, none, behavior-as-old, sequence-tis, token-mask, sequence-mask, neg-adv-sequence-mask"
    with pytest.raises(ConfigError, match=rf"^algo.off_policy_correction='vtrace' is not a valid choice; allowed: {names}$"):
        AlgoConfig(name="grpo", off_policy_correction="vtrace")
    with pytest.raises(ValueError, match=rf"^algo.off_policy_correction='vtrace' unknown; allowed: {names}$"):
        correct("vtrace", NEW, OLD, BEHAVIOR, ADV, MASK, params())
    with pytest.raises(ValueError, match=r"advantages has shape \(2, 1\); expected 2-D \[B, T\] like new \(2, 3\)"):
        correct("decoupled", NEW, OLD, BEHAVIOR, ADV[:, :1], MASK, params())
    with pytest.raises(ValueError, match=r"mask must be bool or hold only 0/1 values, found 2.0"):
        correct("decoupled", NEW, OLD, BEHAVIOR, ADV, MASK * 2.0, params())


def test_registration_is_once_per_name_and_every_name_is_documented():
    with pytest.raises(ValueError, match=r"'decoupled' is already registered"):
        register_correction("decoupled")(lambda *a: None)
    with pytest.raises(ValueError, match=r"params=\['cap'\] are not CorrectionParams fields"):
        register_correction("other", params=("cap",))
    text = (DOCS / "algorithms.md").read_text()
    for name, spec in CORRECTIONS.items():
        assert f"`{name}`" in text, name
        for p in spec.params:
            assert f"`algo.{p}`" in text, (name, p)


# ------------------------------------------------------------------ properties

logps = st.floats(-6.0, 0.0, allow_nan=False)


@st.composite
def batches(draw):
    b, t = draw(st.integers(1, 4)), draw(st.integers(1, 5))
    cells = st.lists(logps, min_size=b * t, max_size=b * t)
    old, behavior = (torch.tensor(draw(cells), dtype=F64).view(b, t) for _ in range(2))
    adv = torch.tensor(draw(st.lists(st.floats(-2, 2), min_size=b * t, max_size=b * t)), dtype=F64).view(b, t)
    mask = torch.tensor(draw(st.lists(st.booleans(), min_size=b * t, max_size=b * t))).view(b, t)
    p = CorrectionParams(is_cap=draw(st.floats(1.0, 5.0)), is_low=draw(st.floats(0.05, 1.0)),
                         is_high=draw(st.floats(1.01, 5.0)), neg_adv_kl_max=draw(st.floats(0.0, 1.0)))
    return old, behavior, adv, mask, p


@PROPERTY
@given(batches(), st.sampled_from(sorted(CORRECTIONS)), st.data())
def test_every_correction_is_detached_row_local_and_one_off_the_mask(batch, name, data):
    old, behavior, adv, mask, p = (x.clone().requires_grad_(True) if i < 2 else x for i, x in enumerate(batch))
    new = old.detach().clone().requires_grad_(True)
    base, w = correct(name, new, old, behavior, adv, mask, p)
    assert base is (behavior if name == "behavior-as-old" else old)
    if w is None:
        return
    assert not w.requires_grad and bool((w >= 0).all()) and bool(torch.isfinite(w).all())
    assert bool((w[~mask] == 1).all())
    rows = torch.tensor(sorted(data.draw(st.sets(st.integers(0, old.shape[0] - 1), min_size=1))))
    _, w_rows = correct(name, new[rows], old[rows], behavior[rows], adv[rows], mask[rows], p)
    assert torch.allclose(w_rows, w[rows])  # a micro-batch of whole rows gets the batch's weights


@PROPERTY
@given(batches())
def test_token_corrections_follow_the_ratio(batch):
    old, behavior, adv, mask, p = batch
    rho = torch.exp(old - behavior)
    w = correct("decoupled", old, old, behavior, adv, mask, p).weight
    assert torch.allclose(w[mask], torch.minimum(rho, torch.tensor(p.is_cap, dtype=F64))[mask])
    w = correct("token-mask", old, old, behavior, adv, mask, p).weight
    inside = (rho >= p.is_low) & (rho <= p.is_high)
    assert torch.allclose(w[mask & inside], rho[mask & inside]) and bool((w[mask & ~inside] == 0).all())
    # the drop-share metric counts exactly the tokens token-mask zeroes
    share = float((w[mask] == 0).to(F64).mean()) if mask.any() else 0.0
    assert band_drop_share(old, behavior, mask, p.is_low, p.is_high) == pytest.approx(share)


@PROPERTY
@given(batches())
def test_sequence_corrections_follow_a_loop_reference(batch):
    old, behavior, adv, mask, p = batch
    tis = correct("sequence-tis", old, old, behavior, adv, mask, p).weight
    seq_mask = correct("sequence-mask", old, old, behavior, adv, mask, p).weight
    neg = correct("neg-adv-sequence-mask", old, old, behavior, adv, mask, p).weight
    for b in range(old.shape[0]):
        logs = [float(old[b, t] - behavior[b, t]) for t in range(old.shape[1]) if mask[b, t]]
        n = max(len(logs), 1)
        geo, divergence = math.exp(sum(logs) / n), -sum(logs) / n
        kept = p.is_low <= geo <= p.is_high
        # a statistic within rounding of its threshold may fall either side: not checked
        near = min(abs(geo - p.is_low), abs(geo - p.is_high)) < 1e-9, abs(divergence - p.neg_adv_kl_max) < 1e-12
        for t in range(old.shape[1]):
            if not mask[b, t]:
                continue
            assert tis[b, t].item() == pytest.approx(min(math.exp(sum(logs)), p.is_cap), rel=1e-9)
            rho = math.exp(float(old[b, t] - behavior[b, t]))
            if not near[0]:
                assert seq_mask[b, t].item() == pytest.approx(rho if kept else 0.0, rel=1e-9)
            if not near[1]:
                dropped = adv[b, t].item() < 0 and divergence > p.neg_adv_kl_max
                assert neg[b, t].item() == (0.0 if dropped else 1.0)


@PROPERTY
@given(batches())
def test_no_mismatch_means_nothing_corrected_and_zero_metrics(batch):
    old, _, adv, mask, p = batch
    for name in CORRECTIONS:
        w = correct(name, old, old, old, adv, mask, p).weight
        assert w is None or torch.allclose(w, torch.ones_like(w)), name
    assert mismatch_metrics(old, old, mask, p) == {"off_policy/prob_ratio_error": 0.0, "off_policy/behavior_kl_k1": 0.0,
                                                   "off_policy/band_drop_share": 0.0}


@PROPERTY
@given(batches(), st.floats(0.0, 1.0))
def test_a_larger_divergence_threshold_drops_a_subset(batch, extra):
    old, behavior, adv, mask, p = batch
    looser = CorrectionParams(p.is_cap, p.is_low, p.is_high, p.neg_adv_kl_max + extra)
    strict = correct("neg-adv-sequence-mask", old, old, behavior, adv, mask, p).weight == 0
    loose = correct("neg-adv-sequence-mask", old, old, behavior, adv, mask, looser).weight == 0
    assert bool((loose <= strict).all()) and not bool((strict & (adv >= 0)).any())


@PROPERTY
@given(batches())
def test_mismatch_metrics_bounds(batch):
    old, behavior, _, mask, p = batch
    m = mismatch_metrics(old, behavior, mask, p)
    assert m["off_policy/prob_ratio_error"] >= 0 and 0 <= m["off_policy/band_drop_share"] <= 1
    expected = float((behavior - old)[mask].mean()) if mask.any() else 0.0
    assert m["off_policy/behavior_kl_k1"] == pytest.approx(expected, rel=1e-12, abs=1e-12)


# ------------------------------------------------------------------ in the trainer


def _model():
    from algos.policy import PolicyModel, PolicyShape

    torch.manual_seed(0)
    return PolicyModel(PolicyShape(vocab_size=50, d_model=16, n_layers=1, n_heads=2, max_len=256, critic="none"))


def _stale_trajs():
    """Two groups of 3; the sampler's log-probs drawn in [-5, -3] around the tiny model's ~-3.9,
    so pi_old / pi_behavior spreads over about [0.4, 3]."""
    shapes = [([2, 1], 1.0), ([1, 1, 1], 0.0), ([3], 1.0), ([1, 2], 0.0), ([2], 1.0), ([1, 1, 1], 0.0)]
    trajs = [make_traj(turns, r, group=i // 3, seed=10 + i) for i, (turns, r) in enumerate(shapes)]
    g = torch.Generator().manual_seed(5)
    for traj in trajs:
        for seg in traj.segments:
            seg.behavior_logp = [-3.0 - 2.0 * float(torch.rand((), generator=g)) for _ in seg.behavior_logp]
    return trajs


def _update(name, micro):
    algo = AlgoConfig(name="grpo", epochs=2, micro_batch_rows=micro, lr=1e-2, off_policy_correction=name,
                      is_low=0.7, is_high=1.5, neg_adv_kl_max=0.0)
    record = make_trainer("grpo", algo, _model()).update_record(copy.deepcopy(_stale_trajs()))
    record.metrics.pop("train/update_seconds")
    return record


@pytest.mark.parametrize("name", list(CORRECTIONS))
def test_the_trainer_logs_the_mismatch_and_its_numbers_do_not_depend_on_the_split(name):
    whole, single = _update(name, 12), _update(name, 1)
    assert whole.metrics.keys() == single.metrics.keys()
    for key, value in whole.metrics.items():
        if key not in SPLIT_COST_KEYS:
            assert single.metrics[key] == pytest.approx(value, rel=1e-4, abs=1e-6), key
    expected = mismatch_metrics(whole.inputs.old_logp, whole.batch.behavior_logp, whole.inputs.loss_mask,
                                CorrectionParams(is_cap=2.0, is_low=0.7, is_high=1.5, neg_adv_kl_max=0.0))
    assert {k: whole.metrics[k] for k in expected} == pytest.approx(expected)
    assert 0 < expected["off_policy/band_drop_share"] < 1  # the band cuts this batch, so the masks act
    assert ("train/is_weight" in whole.metrics) == (name not in ("none", "behavior-as-old"))


def test_masking_corrections_change_the_update():
    """On the same stale batch the masks zero some tokens, so their policy loss differs from the
    unweighted one's (and from each other's)."""
    losses = {name: _update(name, 12).metrics["train/policy_loss"] for name in CORRECTIONS}
    for name in ("token-mask", "sequence-mask", "neg-adv-sequence-mask", "sequence-tis"):
        assert losses[name] != pytest.approx(losses["none"], rel=1e-3), name
