"""Advantage estimators: GRPO group-relative advantages, RLOO, process-supervised GRPO, GiGPO step
groups, critic-free grouped state values with GAE over steps, and GAE across episode and segment ends (one lambda, or one for the actor's advantages and
one for the critic's targets; a number or one per row, e.g. the length-adaptive lambda).

Pure math: tensors in, tensors out; no environment, no I/O (its input checks: ``algos.checks``).
Boundary semantics (docs/algorithms.md):

- ``terminated[t]``: the task ended after the action at ``t``. No bootstrap from the next state and
  the GAE recursion stops.
- ``truncated[t]``: an outside limit cut the episode after ``t``. Bootstrap from ``next_values[t]``
  (V of the real next state), but the recursion stops.
- compression boundary: neither flag. Bootstrap from ``next_values[t]`` = V(compressed context the
  episode actually continued from) and the recursion continues into the next segment, laid out
  later in the same row.
- ``mask``: marks decision (action) positions. Everything else (observations, padding, prompt) is
  skipped by the recursion and gets advantage 0 and return 0.
"""

from __future__ import annotations

import math
import numbers
from typing import Callable

import torch
from torch import Tensor

from algos.checks import (as_bool, as_float, as_group_index, check_eps, check_gae_inputs, check_lam, check_steps,
                          check_unit_interval, check_values_inputs)

# std convention name -> delta degrees of freedom of the group std (None: do not divide by a std).
STD_CONVENTIONS: dict[str, int | None] = {
    "population": 0,  # rl_checks.py's convention: [0, 0, 1, 1] -> std 0.5
    "sample": 1,  # Bessel-corrected: [0, 0, 1, 1] -> std sqrt(1/3)
    "none": None,  # Dr. GRPO style: A = r - mean, no division
}


def _ddof_for(std: str) -> int | None:
    if std not in STD_CONVENTIONS:
        allowed = ", ".join(repr(k) for k in STD_CONVENTIONS)
        raise ValueError(f"unknown std convention {std!r}; allowed: {allowed}")
    return STD_CONVENTIONS[std]


def group_mean_std(
    rewards: Tensor, group_ids: Tensor, std: str = "population"
) -> tuple[Tensor, Tensor, Tensor]:
    """mean_g = sum_{i in g} r_i / n_g;  std_g = sqrt(sum_{i in g} (r_i - mean_g)^2 / (n_g - ddof)).

    Shapes: ``rewards`` [N] float, ``group_ids`` [N] integer (any values, any order). Returns three
    [N] tensors broadcast back to the members: the group mean, the group std and ``constant`` (bool,
    True where every reward of the member's group is identical, singleton groups included).
    ``std`` names the convention: "population" (ddof=0), "sample" (ddof=1); for "none" the std is
    all ones. For a constant group the std is exactly 0 (any convention except "none").
    """
    ddof = _ddof_for(std)
    rewards = as_float("rewards", rewards)
    if rewards.dim() != 1:
        raise ValueError(f"rewards must be 1-D [N], got shape {tuple(rewards.shape)}")
    n = rewards.shape[0]
    inverse, n_groups = as_group_index(group_ids, n)

    counts = torch.zeros(n_groups, dtype=rewards.dtype).index_add_(0, inverse, torch.ones_like(rewards))
    sums = torch.zeros(n_groups, dtype=rewards.dtype).index_add_(0, inverse, rewards)
    mean = (sums / counts)[inverse]
    lo = torch.full((n_groups,), math.inf, dtype=rewards.dtype).scatter_reduce(0, inverse, rewards, "amin")
    hi = torch.full((n_groups,), -math.inf, dtype=rewards.dtype).scatter_reduce(0, inverse, rewards, "amax")
    constant = (lo == hi)[inverse]
    if ddof is None:
        return mean, torch.ones_like(rewards), constant
    centered = torch.where(constant, torch.zeros_like(rewards), rewards - mean)
    # std_g = s_g * sqrt(sum (c_i / s_g)^2 / (n_g - ddof)) with s_g = max_i |c_i|: the same number,
    # but squares of tiny deviations (e.g. rewards 0 and 2e-309) no longer underflow to a zero std
    # of a non-constant group (which made A = c / 0 = +-inf at eps = 0)
    scale = torch.zeros(n_groups, dtype=rewards.dtype).scatter_reduce(0, inverse, centered.abs(), "amax")
    scale = torch.where(scale > 0, scale, torch.ones_like(scale))
    unit = centered / scale[inverse]
    sq = torch.zeros(n_groups, dtype=rewards.dtype).index_add_(0, inverse, unit * unit)
    # (n_g - ddof) >= 1 for every non-constant group (it has >= 2 members); clamp keeps constant
    # singleton groups under ddof=1 at 0 / 1 instead of 0 / 0.
    group_std = (scale * torch.sqrt(sq / (counts - ddof).clamp(min=1.0)))[inverse]
    return mean, torch.where(constant, torch.zeros_like(group_std), group_std), constant


def group_advantages(
    rewards: Tensor, group_ids: Tensor, std: str = "population", eps: float = 1e-6
) -> Tensor:
    """A_i = (r_i - mean_g) / (std_g + eps)   (std="none": A_i = r_i - mean_g), g the group of i.

    Shapes: ``rewards`` [N] (float; int/bool are converted), ``group_ids`` [N] integer; members of a
    group share an id, ids need not be contiguous or sorted. Returns [N].
    ``std``: "population" (ddof=0, rl_checks.py's convention and the default), "sample" (ddof=1),
    "none" (no division). ``eps`` >= 0 guards the division; it never creates signal: groups whose
    rewards are all identical (singletons included) get exactly 0.0, not r/eps-sized noise.
    """
    _ddof_for(std)
    check_eps(eps)
    mean, group_std, constant = group_mean_std(rewards, group_ids, std)
    rewards = as_float("rewards", rewards)
    centered = torch.where(constant, torch.zeros_like(rewards), rewards - mean)
    if STD_CONVENTIONS[std] is None:
        return centered
    # Constant groups have centered == 0 and std == 0: keep the denominator at 1 so that
    # eps=0 gives 0 / 1 = 0 there rather than 0 / 0.
    denom = torch.where(constant, torch.ones_like(group_std), group_std + eps)
    return centered / denom


def rloo_advantages(rewards: Tensor, group_ids: Tensor) -> Tensor:
    """A_i = r_i - (sum_{j in g, j != i} r_j) / (n_g - 1)   (leave-one-out baseline; n_g = 1: A_i = 0).

    Equivalently A_i = n_g / (n_g - 1) * (r_i - mean_g). Shapes: ``rewards`` [N] (float; int/bool
    are converted), ``group_ids`` [N] integer (any values, any order). Returns [N]. A group whose
    rewards are all identical (singletons included) gets exactly 0.0.
    """
    rewards = as_float("rewards", rewards)
    if rewards.dim() != 1:
        raise ValueError(f"rewards must be 1-D [N], got shape {tuple(rewards.shape)}")
    n = rewards.shape[0]
    inverse, n_groups = as_group_index(group_ids, n)
    _, _, constant = group_mean_std(rewards, group_ids, "none")
    counts = torch.zeros(n_groups, dtype=rewards.dtype).index_add_(0, inverse, torch.ones_like(rewards))[inverse]
    sums = torch.zeros(n_groups, dtype=rewards.dtype).index_add_(0, inverse, rewards)[inverse]
    others = (sums - rewards) / (counts - 1).clamp(min=1.0)
    return torch.where(constant, torch.zeros_like(rewards), rewards - others)


def process_group_advantages(
    step_rewards: Tensor,
    step_mask: Tensor,
    group_ids: Tensor,
    std: str = "population",
    eps: float = 1e-6,
) -> Tensor:
    """r~[i, s] = (r[i, s] - mu_g) / (sigma_g + eps);   A[i, s] = sum_{s' >= s, mask[i, s']} r~[i, s'].

    Process-supervised GRPO (DeepSeekMath section 4.1.3): ``mu_g`` and ``sigma_g`` are the mean and
    std (``std``: population | sample; "none": r~ = r - mu_g, no division) of ALL masked step
    rewards of ALL members of group g (g = group of i); each step's advantage is the sum of the
    normalised rewards of the steps from its own step on. A group whose masked step rewards are
    all equal gets r~ = 0 (exactly). Shapes: ``step_rewards`` [N, S] float, ``step_mask`` [N, S]
    bool (or 0/1) marking real steps, ``group_ids`` [N] integer. Returns [N, S]; unmasked steps 0.
    """
    _ddof_for(std)
    eps = check_eps(eps)
    first = as_float("step_rewards", step_rewards)
    n = first.shape[0] if first.dim() else -1
    r, mask = check_steps(step_rewards, step_mask, n, "step_rewards")
    as_group_index(group_ids, n)
    rows = torch.arange(r.shape[0])[:, None].expand_as(mask)
    normalised = torch.zeros_like(r)
    normalised[mask] = group_advantages(r[mask], group_ids[rows[mask]], std=std, eps=eps)
    to_go = torch.flip(torch.cumsum(torch.flip(normalised, [1]), 1), [1])
    return torch.where(mask, to_go, torch.zeros_like(to_go))


def gigpo_advantages(
    episode_rewards: Tensor,
    group_ids: Tensor,
    step_returns: Tensor,
    step_mask: Tensor,
    anchor_ids: Tensor,
    omega: float = 1.0,
    std: str = "population",
    eps: float = 1e-6,
) -> Tensor:
    """A[i, s] = A_E[i] + omega * A_S[i, s] on masked steps, 0 elsewhere   (GiGPO), with

        A_E[i]    = (R_i - mean_g R) / (std_g R + eps)       = group_advantages(episode_rewards)
        A_S[i, s] = (G[i, s] - mean_k G) / (std_k G + eps)   over the step group k of (i, s):
                    every masked (j, s') with group_ids[j] == group_ids[i] and
                    anchor_ids[j, s'] == anchor_ids[i, s] (the same state, reached at any turn,
                    by any member, the trajectory itself included).

    ``std`` (population | sample | none: centred only) and ``eps`` apply to both levels;
    singleton and constant groups (episode or step level) give exactly 0. ``G = step_returns``
    are the discounted returns-to-go per step (``discounted_returns`` with ``algo.gamma``).
    Shapes: ``episode_rewards`` [N] float, ``group_ids`` [N] integer, ``step_returns`` [N, S]
    float, ``step_mask`` [N, S] bool (or 0/1), ``anchor_ids`` [N, S] integer (int64; values at
    unmasked steps are ignored), ``omega`` a finite number >= 0. Returns [N, S].
    """
    _ddof_for(std)
    eps = check_eps(eps)
    if isinstance(omega, bool) or not isinstance(omega, numbers.Real) or not (omega >= 0.0 and math.isfinite(omega)):
        raise ValueError(f"omega must be a finite number >= 0, got {omega!r}")
    episode_adv = group_advantages(episode_rewards, group_ids, std=std, eps=eps)
    n = episode_adv.shape[0]
    ret, mask = check_steps(step_returns, step_mask, n, "step_returns")
    if not isinstance(anchor_ids, Tensor) or anchor_ids.dtype.is_floating_point or anchor_ids.dtype.is_complex \
            or anchor_ids.dtype == torch.bool:
        got = anchor_ids.dtype if isinstance(anchor_ids, Tensor) else type(anchor_ids).__name__
        raise ValueError(f"anchor_ids must be an integer tensor (int64), got {got}")
    if anchor_ids.shape != ret.shape:
        raise ValueError(f"anchor_ids has shape {tuple(anchor_ids.shape)}, expected {tuple(ret.shape)} "
                         f"(the shape of step_returns)")
    group_index, _ = as_group_index(group_ids, n)
    rows = torch.arange(n)[:, None].expand_as(mask)
    pairs = torch.stack([group_index[rows[mask]], anchor_ids[mask].to(torch.int64)], dim=1)
    step_group = torch.unique(pairs, dim=0, return_inverse=True)[1] if pairs.shape[0] else pairs[:, 0]
    step_adv = torch.zeros_like(ret)
    step_adv[mask] = group_advantages(ret[mask], step_group, std=std, eps=eps)
    total = episode_adv.to(ret.dtype)[:, None] + float(omega) * step_adv
    return torch.where(mask, total, torch.zeros_like(total))


def step_group_counts(group_ids: Tensor, step_mask: Tensor, anchor_ids: Tensor) -> tuple[int, Tensor]:
    """``(number of step groups of size >= 2, size [N, S] of each masked step's step group, 0
    elsewhere)``; step groups as in :func:`gigpo_advantages` (same group id, same anchor id)."""
    mask = as_bool("step_mask", step_mask)
    n = mask.shape[0]
    group_index, _ = as_group_index(group_ids, n)
    rows = torch.arange(n)[:, None].expand_as(mask)
    pairs = torch.stack([group_index[rows[mask]], anchor_ids[mask].to(torch.int64)], dim=1)
    sizes = torch.zeros(mask.shape, dtype=torch.long)
    if not pairs.shape[0]:
        return 0, sizes
    _, inverse, counts = torch.unique(pairs, dim=0, return_inverse=True, return_counts=True)
    sizes[mask] = counts[inverse]
    return int((counts >= 2).sum()), sizes


def _group_return_totals(returns: Tensor, group_index: Tensor, n_groups: int) -> tuple[Tensor, Tensor]:
    """``(members [N], total [N])``: the size of each trajectory's group and the sum of its members'
    returns ``returns[:, 0]`` (0 for a trajectory without steps)."""
    first = returns[:, 0] if returns.shape[1] else torch.zeros(returns.shape[0], dtype=returns.dtype)
    members = torch.zeros(n_groups, dtype=returns.dtype).index_add_(0, group_index, torch.ones_like(first))
    total = torch.zeros(n_groups, dtype=returns.dtype).index_add_(0, group_index, first)
    return members[group_index], total[group_index]


def _visit_totals(returns: Tensor, mask: Tensor, owner: Tensor, anchor_ids: Tensor) -> tuple[Tensor, Tensor]:
    """``(count, total)`` per masked step (row-major): how many masked steps share its
    ``(owner, anchor)`` and the sum of their returns-to-go; ``owner`` [N] is each row's group index
    (visits in the group) or its row (the trajectory's own visits)."""
    rows = torch.arange(mask.shape[0])[:, None].expand_as(mask)
    pairs = torch.stack([owner[rows[mask]], anchor_ids[mask].to(torch.int64)], dim=1)
    if not pairs.shape[0]:
        empty = torch.zeros(0, dtype=returns.dtype)
        return empty, empty
    _, visit = torch.unique(pairs, dim=0, return_inverse=True)
    k = int(visit.max()) + 1
    own = returns[mask]
    count = torch.zeros(k, dtype=returns.dtype).index_add_(0, visit, torch.ones_like(own))
    total = torch.zeros(k, dtype=returns.dtype).index_add_(0, visit, own)
    return count[visit], total[visit]


def grouped_state_values(step_returns: Tensor, step_mask: Tensor, group_ids: Tensor, anchor_ids: Tensor) -> Tensor:
    """V[i, s] = mean of G over the visits of step (i, s)'s state in its group; V[i, s] = mean_j G[j, 0]
    over the group's trajectories when the state is visited once   (the critic-free state value).

    The visits of (i, s) are every masked (j, s') with ``group_ids[j] == group_ids[i]`` and
    ``anchor_ids[j, s'] == anchor_ids[i, s]`` (:func:`gigpo_advantages`'s step group: the same
    state reached at any turn, by any member). ``G = step_returns`` are the returns-to-go per step
    (:func:`discounted_returns`), so ``G[j, 0]`` is trajectory j's return and the fallback is the
    group's mean return, GRPO's baseline. Shapes: ``step_returns`` [N, S] float, ``step_mask``
    [N, S] bool (or 0/1; each row's steps first, padding after), ``group_ids`` [N] integer,
    ``anchor_ids`` [N, S] integer. Returns [N, S]; unmasked steps 0.
    """
    ret, mask, group_index, n_groups = check_values_inputs(step_returns, step_mask, group_ids, anchor_ids)
    members, total = _group_return_totals(ret, group_index, n_groups)
    values = (total / members)[:, None].expand_as(ret).clone()
    count, visits_total = _visit_totals(ret, mask, group_index, anchor_ids)
    values[mask] = torch.where(count >= 2, visits_total / count.clamp(min=1), values[mask])
    return torch.where(mask, values, torch.zeros_like(values))


def held_out_state_values(step_returns: Tensor, step_mask: Tensor, group_ids: Tensor,
                          anchor_ids: Tensor) -> tuple[Tensor, Tensor]:
    """``(V_out [N, S], defined [N, S])``: the grouped state value of each step computed without
    its own trajectory (the value quality a critic's held-out EV is compared with):

        V_out[i, s] = mean of G over the visits of (i, s)'s state by the OTHER members of its group
                      (else their mean return mean_{j != i} G[j, 0]; undefined in a group of one)

    Visits and ``G`` as in :func:`grouped_state_values`; ``defined`` marks the masked steps whose
    trajectory has another member in its group. Unmasked or undefined entries are 0.
    """
    ret, mask, group_index, n_groups = check_values_inputs(step_returns, step_mask, group_ids, anchor_ids)
    members, total = _group_return_totals(ret, group_index, n_groups)
    first = ret[:, 0] if ret.shape[1] else torch.zeros(ret.shape[0], dtype=ret.dtype)
    values = ((total - first) / (members - 1).clamp(min=1))[:, None].expand_as(ret).clone()
    count, visits_total = _visit_totals(ret, mask, group_index, anchor_ids)
    own_count, own_total = _visit_totals(ret, mask, torch.arange(ret.shape[0]), anchor_ids)
    rest = count - own_count  # visits of the state by the other members
    values[mask] = torch.where(rest > 0, (visits_total - own_total) / rest.clamp(min=1), values[mask])
    defined = mask & (members >= 2)[:, None]
    return torch.where(defined, values, torch.zeros_like(values)), defined


def grouped_value_advantages(
    step_rewards: Tensor,
    step_mask: Tensor,
    group_ids: Tensor,
    anchor_ids: Tensor,
    terminated: Tensor,
    truncated: Tensor,
    gamma: float,
    lam: float,
    normalise: str = "none",
    std: str = "population",
    eps: float = 1e-6,
) -> tuple[Tensor, Tensor]:
    """A = GAE over each trajectory's steps on the critic-free state values V of
    :func:`grouped_state_values`:

        G[i, s]  = r[i, s] + gamma * G[i, s + 1]                    (0 past a terminated or truncated last step)
        V[i, s]  = grouped_state_values(G)                          (visits of the state in the group)
        V'[i, s] = V[i, s + 1]; at a truncated last step the group's mean return; at a terminated one 0
        delta    = r + gamma * V' - V,   A[i, s] = delta[i, s] + gamma * lam * A[i, s + 1]   (:func:`gae`)

    The steps of a trajectory are its turns over all its segments, so a compression boundary inside
    an episode neither cuts G nor the recursion. ``normalise``: ``none`` or ``group`` (A standardised
    over every masked step of the group with ``std`` and ``eps``, :func:`group_advantages`; a group
    whose advantages are all equal gets 0). Shapes: ``step_rewards``, ``terminated``, ``truncated``
    [N, S], ``step_mask`` [N, S] bool (each row's steps first), ``group_ids`` [N] integer,
    ``anchor_ids`` [N, S] integer. Returns ``(A, V)``, both [N, S], 0 at unmasked steps.
    """
    gamma = check_unit_interval("gamma", gamma)
    lam = check_unit_interval("lam", lam)
    if normalise not in GROUPED_VALUE_NORMS:
        raise ValueError(f"normalise={normalise!r} unknown; allowed: {', '.join(GROUPED_VALUE_NORMS)}")
    _ddof_for(std)
    eps = check_eps(eps)
    r = as_float("step_rewards", step_rewards)
    mask = as_bool("step_mask", step_mask)
    term, trunc = as_bool("terminated", terminated), as_bool("truncated", truncated)
    returns = discounted_returns(r, term, trunc, gamma=gamma, mask=mask)
    values = grouped_state_values(returns, mask, group_ids, anchor_ids)
    n = r.shape[0]
    members, total = _group_return_totals(returns, *as_group_index(group_ids, n))
    fallback = total / members
    next_values = torch.zeros_like(values)
    next_values[:, :-1] = values[:, 1:]
    next_values = torch.where(trunc, fallback[:, None].expand_as(values), next_values)
    adv, _ = gae(r, values, next_values, term, trunc, gamma=gamma, lam=lam, mask=mask)
    if normalise == "group" and mask.any():
        rows = torch.arange(n)[:, None].expand_as(mask)
        adv = adv.clone()
        adv[mask] = group_advantages(adv[mask], group_ids[rows[mask]], std=std, eps=eps)
    return torch.where(mask, adv, torch.zeros_like(adv)), values


# ``algo.normalise`` of the grouped-value estimator: none, or standardised per group over its steps
GROUPED_VALUE_NORMS = ("none", "group")


def gae(
    rewards: Tensor,
    values: Tensor,
    next_values: Tensor,
    terminated: Tensor,
    truncated: Tensor,
    gamma: float,
    lam: float | Tensor,
    mask: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """delta_t = r_t + gamma * (1 - terminated_t) * V'_t - V_t;
    A_t = delta_t + gamma * lam * (1 - (terminated_t | truncated_t)) * A_next;  R_t = A_t + V_t.

    Shapes: every input [B, T]; rewards/values/next_values float, terminated/truncated bool (or 0/1).
    ``next_values[t]`` = V'_t is the value of the state the episode actually continued to after the
    action at t (after a compression: the compressed context). ``mask`` [B, T] bool (or 0/1) marks
    the decision positions (None: all). "next" is the next position t' > t in the same row with
    mask=1: the recursion jumps over masked positions, whose rewards, values and flags are ignored
    and whose advantage and return are 0. A compression boundary carries neither flag, so the
    recursion continues into the next segment of the same row; ``terminated`` stops bootstrap and
    recursion, ``truncated`` only the recursion. ``gamma`` in [0, 1]; ``lam`` a number in [0, 1]
    or a [B] tensor of per-row values in [0, 1] (a row's own lambda, e.g. :func:`length_adaptive_lam`).
    Returns ``(advantages, returns)``, both [B, T] in the promoted float dtype of the inputs.
    A backward loop over T (only columns holding any action), vectorized over B.
    """
    gamma = check_unit_interval("gamma", gamma)
    lam = lam if isinstance(lam, Tensor) else check_unit_interval("lam", lam)
    r, v, nv, term, trunc, m = check_gae_inputs(rewards, values, next_values, terminated, truncated, mask)
    lam = check_lam("lam", lam, r)
    batch, horizon = r.shape
    delta = r + gamma * (~term).to(r.dtype) * nv - v
    carry_factor = gamma * lam * (~(term | trunc)).to(r.dtype)
    zero = torch.zeros(batch, dtype=r.dtype)
    columns = [zero] * horizon
    carry = zero  # advantage at the next action position of each row (0 past the row's end)
    active = m.any(dim=0).tolist()
    for t in range(horizon - 1, -1, -1):
        if not active[t]:
            continue
        here = delta[:, t] + carry_factor[:, t] * carry
        columns[t] = torch.where(m[:, t], here, zero)
        carry = torch.where(m[:, t], here, carry)
    advantages = torch.stack(columns, dim=1) if horizon else torch.zeros_like(r)
    returns = torch.where(m, advantages + v, torch.zeros_like(advantages))
    return advantages, returns


def decoupled_gae(
    rewards: Tensor,
    values: Tensor,
    next_values: Tensor,
    terminated: Tensor,
    truncated: Tensor,
    gamma: float,
    lam_actor: float | Tensor,
    lam_critic: float | Tensor,
    mask: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """A_t = GAE(gamma, lam_actor)_t;   R_t = GAE(gamma, lam_critic)_t + V_t   (VC-PPO's decoupled GAE).

    Advantages for the actor and regression targets for the critic from one set of inputs, each
    with its own trace decay; both are :func:`gae` (same shapes, mask and boundary rules: a
    compression carries neither flag and continues both recursions from V of the compressed
    context, ``terminated`` stops bootstrap and recursion, ``truncated`` only the recursion).
    With ``lam_critic = 1`` and each next value the next point's value (V'_k = V_{k+1} up to the
    episode's last point n, as at a compression that bootstraps from the next segment's first
    point), the sum telescopes: R_t = sum_{k=t..n} gamma^(k-t) r_k, plus gamma^(n+1-t) V'_n when
    n ends in a truncation. That is the Monte Carlo return where the episode terminated. Either
    lambda is a number in [0, 1] or a [B] tensor of per-row values. Equal numbers run one
    :func:`gae`, so the result is that call's. Returns ``(advantages, returns)``, both [B, T].
    """
    for name, lam in (("lam_actor", lam_actor), ("lam_critic", lam_critic)):
        if not isinstance(lam, Tensor):
            check_unit_interval(name, lam)
    adv, ret = gae(rewards, values, next_values, terminated, truncated, gamma=gamma, lam=lam_actor, mask=mask)
    if not isinstance(lam_actor, Tensor) and not isinstance(lam_critic, Tensor) and lam_actor == lam_critic:
        return adv, ret
    _, ret = gae(rewards, values, next_values, terminated, truncated, gamma=gamma, lam=lam_critic, mask=mask)
    return adv, ret


def length_adaptive_lam(points: Tensor, alpha: float) -> Tensor:
    """lambda_i = clamp(1 - 1 / (alpha * l_i), 0, 1)   (VAPO's length-adaptive lambda, clamped at 0).

    ``points`` [N] (integer or float): l_i, the decision points of trajectory i (over all its
    segments). From sum_t lambda^t = 1 / (1 - lambda) = alpha * l: the TD errors' total weight
    grows in proportion to the trajectory's length, and lambda^l ~ e^(-1/alpha) for large l.
    ``alpha`` a finite number > 0. Non-decreasing in l; l <= 1 / alpha (l = 0 included) gives 0.
    Returns [N] float64.
    """
    if isinstance(alpha, bool) or not isinstance(alpha, numbers.Real) or not (alpha > 0 and math.isfinite(alpha)):
        raise ValueError(f"alpha must be a finite number > 0, got {alpha!r}")
    if not isinstance(points, Tensor) or points.dim() != 1:
        got = tuple(points.shape) if isinstance(points, Tensor) else type(points).__name__
        raise ValueError(f"points must be a 1-D torch.Tensor [N], got {got}")
    scaled = float(alpha) * points.to(torch.float64)
    lam = torch.where(scaled > 1.0, 1.0 - 1.0 / scaled.clamp(min=1.0), torch.zeros_like(scaled))
    return lam.clamp(0.0, 1.0)


def relative_position_lam(points: Tensor, q: float) -> Tensor:
    """lambda_i = q ** (1 / (l_i - 1))   (the relative-position actor lambda; l_i >= 2).

    ``points`` [N] (integer or float): l_i, the decision points of trajectory i (over all its
    segments). With gamma = 1 and a critic that predicts nothing, the outcome reaches decision k of
    l (k = 1 .. l) with weight lambda^(l - k): the first decision keeps exactly ``q`` of it at every
    length (lambda^(l - 1) = q), the last all of it; where ``length_adaptive_lam``'s share at the
    first decision drifts with l. A trajectory of one decision point or none has no earlier
    decision to weigh: lambda = ``q``. ``q`` a number in (0, 1]. Non-decreasing in l. Returns [N]
    float64.
    """
    if isinstance(q, bool) or not isinstance(q, numbers.Real) or not 0.0 < q <= 1.0:
        raise ValueError(f"q must be a number in (0, 1], got {q!r}")
    if not isinstance(points, Tensor) or points.dim() != 1:
        got = tuple(points.shape) if isinstance(points, Tensor) else type(points).__name__
        raise ValueError(f"points must be a 1-D torch.Tensor [N], got {got}")
    span = (points.to(torch.float64) - 1.0).clamp(min=1.0)
    return torch.pow(torch.full_like(span, float(q)), 1.0 / span)


def discounted_returns(
    rewards: Tensor,
    terminated: Tensor,
    truncated: Tensor,
    gamma: float,
    mask: Tensor | None = None,
) -> Tensor:
    """G_t = r_t + gamma * (1 - (terminated_t | truncated_t)) * G_next   (Monte Carlo return-to-go).

    Shapes and mask as in :func:`gae` ([B, T]; "next" = next mask=1 position in the row, masked
    positions get 0). No value function is involved, so a truncated episode is cut without a
    bootstrap. Computed as ``gae`` with V = V' = 0 and lam = 1, i.e. the same recursion.
    """
    if not isinstance(rewards, Tensor):
        raise ValueError(f"rewards must be a torch.Tensor, got {type(rewards).__name__}")
    zeros = torch.zeros_like(as_float("rewards", rewards))
    advantages, _ = gae(rewards, zeros, zeros, terminated, truncated, gamma=gamma, lam=1.0, mask=mask)
    return advantages


def _token_points(action_mask: Tensor, turn_first: Tensor) -> Tensor:
    return as_bool("action_mask", action_mask)


def _turn_points(action_mask: Tensor, turn_first: Tensor) -> Tensor:
    return as_bool("turn_first", turn_first) & as_bool("action_mask", action_mask)


# ``algo.value_level`` -> (action_mask [R, T], turn_first [R, T]) -> decision points [R, T] bool.
# token: every sampled token is a decision point; turn: the first sampled token of each tool call
# (one value per turn). Every sampled token belongs to the last decision point at or before it
# (its own for token level, its turn's first token for turn level): the point's reward is the sum
# of its tokens' rewards and its advantage is broadcast back to them.
VALUE_LEVELS: dict[str, Callable[[Tensor, Tensor], Tensor]] = {
    "token": _token_points,
    "turn": _turn_points,
}
