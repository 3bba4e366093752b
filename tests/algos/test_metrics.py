"""algos.metrics: hand-computed numbers, loop references, properties."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from algos.metrics import (
    binomial_confidence_interval,
    explained_variance,
    explained_variance_ceiling,
    group_outcome_rates,
    mixed_group_probability,
)

PROPERTY = settings(max_examples=50, deadline=None)


# ------------------------------------------------------------------ mixed-group probability


def test_mixed_group_probability_formula_and_edges():
    # the source document's numbers (G = 8, p = 0.02, 0.2, 0.98) are claim C5 (tests/claims/test_closed_form.py)
    assert math.isclose(mixed_group_probability(0.2, 8), 1 - 0.2**8 - 0.8**8, rel_tol=0, abs_tol=0)
    assert mixed_group_probability(0.5, 1) == 0.0  # one try can never be mixed
    assert mixed_group_probability(0, 8) == 0.0 and mixed_group_probability(1, 8) == 0.0


@pytest.mark.parametrize("p", [-0.01, 1.01, float("nan"), "0.5", None])
def test_mixed_group_probability_rejects_bad_p(p):
    with pytest.raises(ValueError, match=r"^success_probability must be in \[0, 1\]"):
        mixed_group_probability(p, 8)


@pytest.mark.parametrize("g", [True, False, 0, -3, 8.0, "8", None])
def test_mixed_group_probability_rejects_bad_group_size(g):
    with pytest.raises(ValueError, match=r"^group_size must be a positive integer"):
        mixed_group_probability(0.5, g)


@PROPERTY
@given(p=st.floats(0, 1), g=st.integers(1, 64))
def test_mixed_group_probability_properties(p, g):
    value = mixed_group_probability(p, g)
    # same as rl_checks.py's expression, symmetric in p <-> 1-p, and a probability
    assert value == 1 - p**g - (1 - p) ** g
    assert math.isclose(value, mixed_group_probability(1 - p, g), abs_tol=1e-12)
    assert -1e-12 <= value <= 1


# ------------------------------------------------------------------ group outcome rates


def test_group_outcome_rates_binary():
    # groups (ids need not be sorted): 4 -> [0, 0], 2 -> [1, 1, 1], 9 -> [0, 1], 7 -> [1]
    rewards = torch.tensor([0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 1.0, 1.0])
    ids = torch.tensor([4, 2, 4, 2, 9, 9, 2, 7])
    rates = group_outcome_rates(rewards, ids)
    # 4 groups: all-zero {4} = 1/4; all-one {2, 7} = 2/4; mixed {9} = 1/4
    assert rates == {"mixed": 0.25, "all_zero": 0.25, "all_one": 0.5, "all_same": 0.75, "n_groups": 4}


def test_group_outcome_rates_non_binary_and_empty():
    rewards = torch.tensor([0.5, 0.5, 0.2, 0.9, 0.0, 0.0])
    ids = torch.tensor([0, 0, 1, 1, 2, 2])
    rates = group_outcome_rates(rewards, ids)
    # group 0 all 0.5 (all-same, neither zero nor one); group 1 mixed; group 2 all zero
    assert rates == {"mixed": 1 / 3, "all_zero": 1 / 3, "all_one": 0.0, "all_same": 2 / 3, "n_groups": 3}
    empty = group_outcome_rates(torch.zeros(0), torch.zeros(0, dtype=torch.int64))
    assert empty["n_groups"] == 0 and math.isnan(empty["mixed"])


@PROPERTY
@given(rewards=st.lists(st.sampled_from([0.0, 1.0]), min_size=1, max_size=20), data=st.data())
def test_group_outcome_rates_match_loop(rewards, data):
    ids = data.draw(st.lists(st.integers(0, 4), min_size=len(rewards), max_size=len(rewards)))
    groups: dict[int, list[float]] = {}
    for g, r in zip(ids, rewards):
        groups.setdefault(g, []).append(r)
    n = len(groups)
    rates = group_outcome_rates(torch.tensor(rewards), torch.tensor(ids))
    assert rates["all_zero"] == sum(all(r == 0 for r in rs) for rs in groups.values()) / n
    assert rates["all_one"] == sum(all(r == 1 for r in rs) for rs in groups.values()) / n
    assert math.isclose(rates["mixed"], sum(len(set(rs)) > 1 for rs in groups.values()) / n)
    assert math.isclose(rates["mixed"] + rates["all_zero"] + rates["all_one"], 1.0)


def test_group_outcome_rates_bad_arguments():
    with pytest.raises(ValueError, match=r"group_ids must have shape \(3,\) like rewards"):
        group_outcome_rates(torch.zeros(3), torch.zeros(2, dtype=torch.int64))
    with pytest.raises(ValueError, match=r"rewards must be 1-D"):
        group_outcome_rates(torch.zeros(1, 3), torch.zeros(3, dtype=torch.int64))


# ------------------------------------------------------------------ explained variance


def test_explained_variance_numbers():
    targets = torch.tensor([1.0, 2.0, 3.0, 4.0])
    # Var(R) = mean((-1.5, -.5, .5, 1.5)^2) = 1.25
    assert explained_variance(targets, targets) == 1.0
    assert math.isclose(explained_variance(torch.full((4,), 2.5), targets), 0.0, abs_tol=1e-12)
    # predictions [1, 2, 3, 3]: residual [0, 0, 0, 1], Var = mean([.25^2 * 3 + .75^2]) = 0.1875
    # EV = 1 - 0.1875 / 1.25 = 0.85
    assert math.isclose(explained_variance(torch.tensor([1.0, 2.0, 3.0, 3.0]), targets), 0.85, rel_tol=1e-12)
    # constant targets: nothing to explain -> nan
    assert math.isnan(explained_variance(torch.zeros(3), torch.ones(3)))


def test_explained_variance_mask():
    targets = torch.tensor([1.0, 2.0, 3.0, 4.0, 100.0])
    preds = torch.tensor([1.0, 2.0, 3.0, 3.0, -100.0])
    mask = torch.tensor([1, 1, 1, 1, 0])
    assert math.isclose(explained_variance(preds, targets, mask), 0.85, rel_tol=1e-12)
    assert math.isnan(explained_variance(preds, targets, torch.zeros(5)))
    with pytest.raises(ValueError, match=r"predictions has shape \(4,\), expected \(5,\)"):
        explained_variance(preds[:4], targets)
    with pytest.raises(ValueError, match=r"mask has shape \(4,\), expected \(5,\)"):
        explained_variance(preds, targets, mask[:4])


# ------------------------------------------------------------------ Wilson interval


def test_wilson_numbers():
    # z = 1.9599640, z^2 = 3.8414588; n = 10, p = 0.5:
    # center = (0.5 + 0.1920729) / 1.3841459 = 0.5;
    # half = 1.9599640 / 1.3841459 * sqrt(0.025 + 3.8414588 / 400) = 1.4160097 * 0.1860206 = 0.2634069
    # -> (0.2365931, 0.7634069)
    low, high = binomial_confidence_interval(5, 10)
    assert math.isclose(low, 0.2365931, abs_tol=1e-6) and math.isclose(high, 0.7634069, abs_tol=1e-6)
    # k = 0: low exactly 0, high = z^2 / (n + z^2) = 3.8414588 / 13.8414588 = 0.2775328
    low, high = binomial_confidence_interval(0, 10)
    assert low == 0.0 and math.isclose(high, 0.2775328, abs_tol=1e-6)
    low, high = binomial_confidence_interval(10, 10)
    assert high == 1.0 and math.isclose(low, 1 - 0.2775328, abs_tol=1e-6)


@PROPERTY
@given(trials=st.integers(1, 500), data=st.data(), conf=st.floats(0.5, 0.999))
def test_wilson_properties(trials, data, conf):
    k = data.draw(st.integers(0, trials))
    low, high = binomial_confidence_interval(k, trials, conf)
    assert 0.0 <= low <= k / trials <= high <= 1.0
    wider = binomial_confidence_interval(k, trials, min(0.9999, conf + 0.0005))
    assert wider[0] <= low + 1e-12 and wider[1] >= high - 1e-12


@pytest.mark.parametrize(
    "args, match",
    [
        ((11, 10), r"successes must be in \[0, trials=10\], got 11"),
        ((-1, 10), r"successes must be in \[0, trials=10\], got -1"),
        ((1, 0), r"trials must be >= 1, got 0"),
        ((1.5, 10), r"successes must be an integer, got 1.5"),
        ((1, 10, 1.0), r"confidence must be a number in \(0, 1\), got 1.0"),
        ((1, 10, 95), r"confidence must be a number in \(0, 1\), got 95"),
    ],
)
def test_wilson_bad_arguments(args, match):
    with pytest.raises(ValueError, match=match):
        binomial_confidence_interval(*args)


# ---------------------------------------------------------------------------------------------
# explained_variance_ceiling: EV* = 1 - mean_p s_p^2 / Var_pop(G)
# ---------------------------------------------------------------------------------------------
def test_ev_ceiling_hand_computed():
    # s^2 = [0, 0, 0.5, 0.5] (two branches: (1-0)^2/2 ... = 0.5), mean 0.25; Var(G) of [1,0,1,0] = 0.25 -> 0
    g = torch.tensor([1.0, 0.0, 1.0, 0.0])
    assert explained_variance_ceiling(g, torch.tensor([[1.0, 1.0], [0.0, 0.0], [1.0, 0.0], [1.0, 0.0]])) == pytest.approx(0.0)
    # K = 3: point 0 branches (2, 0, 1): mean 1, s^2 = (1 + 1 + 0) / 2 = 1; point 1: 0 -> mean 0.5;
    # Var(G) of [2, 0] = 1 -> 1 - 0.5 = 0.5
    assert explained_variance_ceiling(torch.tensor([2.0, 0.0]), torch.tensor([[2.0, 0.0, 1.0], [0.0, 0.0, 0.0]])) == pytest.approx(0.5)
    # a point with one valid branch leaves both terms: G = [1, 0] (Var 0.25), s^2 = [0, 0] -> 1
    b = torch.tensor([[1.0, 1.0, 1.0], [0.0, 0.0, 0.0], [1.0, 0.0, 0.0]])
    valid = torch.tensor([[True, True, True], [True, True, True], [True, False, False]])
    assert explained_variance_ceiling(torch.tensor([1.0, 0.0, 1.0]), b, valid) == pytest.approx(1.0)
    # undefined: constant returns, or no point with 2 valid branches
    assert math.isnan(explained_variance_ceiling(torch.tensor([1.0, 1.0]), torch.tensor([[1.0, 0.0], [0.0, 1.0]])))
    assert math.isnan(explained_variance_ceiling(torch.tensor([1.0, 0.0]), torch.ones(2, 2), torch.tensor([[True, False], [False, True]])))
    with pytest.raises(ValueError, match=r"\[P, K\]"):
        explained_variance_ceiling(torch.zeros(3), torch.zeros(2, 4))


def test_ev_ceiling_recovers_the_true_value_functions_ev():
    # states with success probability p in {0.1, 0.5, 0.9}; G and 8 branches ~ Bernoulli(p).
    # EV of V* = p: 1 - E[p(1-p)] / Var(G) = 1 - (0.09 + 0.25 + 0.09) / 3 / 0.25 = 0.42667
    gen = torch.Generator().manual_seed(0)
    p = torch.tensor([0.1, 0.5, 0.9])[torch.randint(3, (6000,), generator=gen)]
    g = torch.bernoulli(p, generator=gen)
    b = torch.bernoulli(p[:, None].expand(-1, 8), generator=gen)
    assert explained_variance_ceiling(g, b) == pytest.approx(0.42667, abs=0.03)
    assert explained_variance(p, g) == pytest.approx(0.42667, abs=0.03)  # the true V*'s own EV
    # the branch MEAN is a noisy V*: its EV is ~ 1 - (1 + 1/8)(1 - EV*) = 0.355, below the ceiling
    assert explained_variance(b.mean(1), g) == pytest.approx(0.355, abs=0.03)


def test_signed_advantage_mass_hand_computed():
    """A group of two: a 2-token success (A = +1) and a 6-token failure (A = -1), one row each.
    token-mean: w = 1/8 per token -> sum w A = (2 - 6) / 8 = -0.5, sum w |A| = 8 / 8 = 1 -> -0.5.
    task-mean: w = 1/2/2 on the success's tokens, 1/6/2 on the failure's -> 0.5 - 0.5 = 0."""
    from algos.losses import aggregation_weights
    from algos.metrics import signed_advantage_mass

    mask = torch.tensor([[1, 1, 0, 0, 0, 0], [1, 1, 1, 1, 1, 1]])
    adv = torch.tensor([[1.0, 1.0, 0, 0, 0, 0], [-1.0] * 6])
    tok = aggregation_weights(mask, "token-mean")
    task = aggregation_weights(mask, "task-mean", traj_ids=torch.tensor([0, 1]))
    assert signed_advantage_mass(adv, tok) == pytest.approx(-0.5)
    assert signed_advantage_mass(adv, task) == pytest.approx(0.0, abs=1e-7)
    # advantages 3x larger: the same mass (a ratio of weighted sums); all zero: 0, not NaN
    assert signed_advantage_mass(3 * adv, tok) == pytest.approx(-0.5)
    assert signed_advantage_mass(torch.zeros(2, 6), tok) == 0.0
    with pytest.raises(ValueError, match=r"weights has shape \(2, 5\), expected \(2, 6\)"):
        signed_advantage_mass(adv, tok[:, :5])
    with pytest.raises(ValueError, match="weights must be >= 0"):
        signed_advantage_mass(adv, -tok)
