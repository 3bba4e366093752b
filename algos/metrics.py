"""Training diagnostics: mixed-group probability and rates, critic quality, clip fraction, intervals.

Pure math: tensors / numbers in, tensors / Python floats out. Undefined quantities (no elements,
zero target variance) are NaN, never a silent 0.
"""

from __future__ import annotations

import math
import numbers
import statistics

import torch
from torch import Tensor

from algos.checks import as_bool, as_float, as_group_index


def mixed_group_probability(success_probability, group_size) -> float:
    """P_mix = 1 - p^G - (1 - p)^G: probability that G independent tries, each succeeding with
    probability p, contain at least one success and at least one failure (a non-zero GRPO signal).

    ``success_probability`` p in [0, 1], ``group_size`` G a positive ``int`` (bool rejected). Same
    validation and arithmetic as the snippet rl_checks.py runs verbatim: ValueError("success_probability must be in
    [0, 1]") / ValueError("group_size must be a positive integer") (our messages append the value).
    """
    try:
        in_range = 0 <= success_probability <= 1
    except TypeError:
        in_range = False
    if not in_range:
        raise ValueError(f"success_probability must be in [0, 1], got {success_probability!r}")
    if isinstance(group_size, bool) or not isinstance(group_size, int) or group_size < 1:
        raise ValueError(f"group_size must be a positive integer, got {group_size!r}")
    return float(1 - success_probability**group_size - (1 - success_probability) ** group_size)


def group_outcome_rates(rewards: Tensor, group_ids: Tensor) -> dict[str, float]:
    """all_same = #{g : r_i equal for all i in g} / #groups;  mixed = 1 - all_same;
    all_zero = #{g : r_i = 0 for all i in g} / #groups;  all_one = #{g : r_i = 1 for all i in g} / #groups.

    Shapes: ``rewards`` [N], ``group_ids`` [N] integer (any values / order). For binary rewards
    all_zero + all_one = all_same and mixed is the rest. For non-binary rewards an all-same group
    with another value (e.g. all 0.5) counts in all_same only. Singleton groups count as all-same.
    Returns floats plus ``n_groups`` (int); with no groups the fractions are NaN.
    """
    rewards = as_float("rewards", rewards)
    if rewards.dim() != 1:
        raise ValueError(f"rewards must be 1-D [N], got shape {tuple(rewards.shape)}")
    inverse, n_groups = as_group_index(group_ids, rewards.shape[0])
    if n_groups == 0:
        nan = float("nan")
        return {"mixed": nan, "all_zero": nan, "all_one": nan, "all_same": nan, "n_groups": 0}
    lo = torch.full((n_groups,), math.inf, dtype=rewards.dtype).scatter_reduce(0, inverse, rewards, "amin")
    hi = torch.full((n_groups,), -math.inf, dtype=rewards.dtype).scatter_reduce(0, inverse, rewards, "amax")
    same = lo == hi
    all_same = same.double().mean().item()
    return {
        "mixed": (~same).double().mean().item(),
        "all_zero": (same & (lo == 0)).double().mean().item(),
        "all_one": (same & (lo == 1)).double().mean().item(),
        "all_same": all_same,
        "n_groups": n_groups,
    }


def _masked_pair(name_x: str, x: Tensor, mask: Tensor | None) -> tuple[Tensor, Tensor]:
    if not isinstance(x, Tensor):
        raise ValueError(f"{name_x} must be a torch.Tensor, got {type(x).__name__}")
    if mask is None:
        return x, torch.ones(x.shape, dtype=torch.bool)
    if not isinstance(mask, Tensor):
        raise ValueError(f"mask must be a torch.Tensor, got {type(mask).__name__}")
    if mask.shape != x.shape:
        raise ValueError(f"mask has shape {tuple(mask.shape)}, expected {tuple(x.shape)} (the shape of {name_x})")
    return x, as_bool("mask", mask)


def explained_variance(predictions: Tensor, targets: Tensor, mask: Tensor | None = None) -> float:
    """EV = 1 - Var(R - V) / Var(R) over the masked elements (population variances).

    Shapes: ``predictions`` V, ``targets`` R and ``mask`` (bool or 0/1, None = all) the same shape.
    1 = perfect, 0 = no better than predicting the mean, < 0 = worse. NaN when Var(R) = 0 (constant
    targets: no variance to explain) or when no element is selected.
    """
    if not isinstance(predictions, Tensor) or not isinstance(targets, Tensor):
        raise ValueError("predictions and targets must be torch.Tensors")
    if predictions.shape != targets.shape:
        raise ValueError(
            f"predictions has shape {tuple(predictions.shape)}, expected {tuple(targets.shape)} (the shape of targets)"
        )
    _, m = _masked_pair("targets", targets, mask)
    r = as_float("targets", targets).double()[m]
    v = as_float("predictions", predictions).double()[m]
    if r.numel() == 0:
        return float("nan")
    var_r = torch.var(r, correction=0).item()
    if var_r == 0.0:
        return float("nan")
    return 1.0 - torch.var(r - v, correction=0).item() / var_r


def explained_variance_ceiling(returns: Tensor, branch_returns: Tensor, valid: Tensor | None = None) -> float:
    """The explained variance of the TRUE value function ``V*(s) = E[G | s]`` on a set of points,
    estimated from independent continuations (branches) of each point's state:

        EV* = 1 - E_s[Var(G | s)] / Var(G)        (Var(G - V*) = E_s Var(G | s): G - V* has mean 0 given s)
        Var(G | s_p) ~ s_p^2 = sum_k (g_pk - gbar_p)^2 / (K_p - 1)   (unbiased, over p's valid branches)

    so ``1 - mean_p(s_p^2) / Var_pop(G_p)``: the most any critic of these states can reach on
    ``algos.metrics.explained_variance`` (the rest of the return's variance is the future's own
    randomness: the policy's later samples and the env's tool faults).

    Shapes: ``returns`` [P] (each point's own Monte Carlo return G_p), ``branch_returns`` [P, K]
    (the returns of K continuations from the same state), ``valid`` [P, K] bool (None = all; a
    masked or cut-off branch is False). Points with fewer than 2 valid branches are left out of
    both terms. NaN when no point is left or Var(G) = 0 over the kept points.
    """
    g = as_float("returns", returns).double()
    b = as_float("branch_returns", branch_returns).double()
    if g.dim() != 1 or b.dim() != 2 or b.shape[0] != g.shape[0]:
        raise ValueError(f"returns must be [P] and branch_returns [P, K]; got {tuple(g.shape)} and {tuple(b.shape)}")
    _, v = _masked_pair("branch_returns", b, valid)
    n = v.sum(1)
    keep = n >= 2
    if not keep.any():
        return float("nan")
    g, b, v, n = g[keep], b[keep], v[keep], n[keep].double()
    mean = (b * v).sum(1) / n
    within = (((b - mean[:, None]) ** 2) * v).sum(1) / (n - 1)
    var_g = torch.var(g, correction=0).item()
    if var_g == 0.0:
        return float("nan")
    return 1.0 - within.mean().item() / var_g


def binomial_confidence_interval(successes: int, trials: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval: with p = k/n and z = Phi^{-1}(1 - (1 - confidence)/2),
    center = (p + z^2/(2n)) / (1 + z^2/n),  half = z / (1 + z^2/n) * sqrt(p(1-p)/n + z^2/(4n^2)),
    interval = [center - half, center + half].

    ``successes`` k and ``trials`` n integers with 0 <= k <= n, n >= 1; ``confidence`` in (0, 1).
    Returns ``(low, high)`` within [0, 1]; low is exactly 0 when k = 0 and high exactly 1 when k = n.
    """
    for name, value in (("successes", successes), ("trials", trials)):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise ValueError(f"{name} must be an integer, got {value!r}")
    if trials < 1:
        raise ValueError(f"trials must be >= 1, got {trials!r}")
    if not 0 <= successes <= trials:
        raise ValueError(f"successes must be in [0, trials={trials}], got {successes!r}")
    if isinstance(confidence, bool) or not isinstance(confidence, numbers.Real) or not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be a number in (0, 1), got {confidence!r}")
    n = float(trials)
    p = successes / n
    z = statistics.NormalDist().inv_cdf(1.0 - (1.0 - float(confidence)) / 2.0)
    z2 = z * z
    center = (p + z2 / (2.0 * n)) / (1.0 + z2 / n)
    half = z / (1.0 + z2 / n) * math.sqrt(p * (1.0 - p) / n + z2 / (4.0 * n * n))
    low = 0.0 if successes == 0 else max(0.0, center - half)
    high = 1.0 if successes == trials else min(1.0, center + half)
    return low, high


def signed_advantage_mass(advantages: Tensor, weights: Tensor) -> float:
    """m = sum_{b,t} w_{b,t} A_{b,t} / sum_{b,t} w_{b,t} |A_{b,t}|,  in [-1, 1].

    The net direction in which a policy-gradient step with loss weights ``w`` (the aggregation
    weights of ``algos.losses.aggregation_weights``, >= 0) pushes the log-probabilities of the
    batch's own sampled tokens: -0.2 means 60 % of the weighted advantage mass is negative, so on
    balance the step lowers what the batch did. For advantages that sum to 0 per group (GRPO,
    RLOO) weighted per trajectory (``task-mean``) it is 0; under ``token-mean`` it is negative when
    the negative-advantage trajectories are the longer ones (claim C18's weighting). Shapes:
    ``advantages`` and ``weights`` the same shape (typically [R, T]); 0 where the denominator is 0.
    """
    a = as_float("advantages", advantages)
    w = as_float("weights", weights)
    if a.shape != w.shape:
        raise ValueError(f"weights has shape {tuple(w.shape)}, expected {tuple(a.shape)} (the shape of advantages)")
    if bool((w < 0).any()):
        raise ValueError("weights must be >= 0 (aggregation weights)")
    den = float((w * a.abs()).sum())
    return float((w * a).sum()) / den if den > 0 else 0.0
