"""Policy-gradient losses: importance ratios, PPO clipping, value loss, KL estimators, aggregation.

Pure math: tensors in, tensors out. Every loss here is per element; reduce it with
``aggregate(loss, aggregation_weights(mask, mode, ...))`` where the weights are computed once on
the whole batch, so micro-batches / devices can each sum their slice and get the same total.

Registries picked by config name (their errors list the valid names): ``RATIO_KINDS``
(``algo.ratio``), ``KL_ESTIMATORS`` (``algo.kl_kind``), ``AGGREGATION_MODES`` (``algo.loss_agg``);
the off-policy corrections (``algo.off_policy_correction``) are ``algos.corrections.CORRECTIONS``.
"""

from __future__ import annotations

import numbers
from typing import Callable

import torch
from torch import Tensor

from algos.checks import as_bool


def _same_shape(**tensors: Tensor) -> torch.Size:
    names = list(tensors)
    for name in names:
        if not isinstance(tensors[name], Tensor):
            raise ValueError(f"{name} must be a torch.Tensor, got {type(tensors[name]).__name__}")
    shape = tensors[names[0]].shape
    for name in names[1:]:
        if tensors[name].shape != shape:
            raise ValueError(
                f"{name} has shape {tuple(tensors[name].shape)}, expected {tuple(shape)} "
                f"(the shape of {names[0]})"
            )
    return shape


def _real(name: str, value: object, low: float, high: float, low_open: bool = False, high_open: bool = False) -> float:
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool)
    if ok:
        v = float(value)
        ok = (v > low if low_open else v >= low) and (v < high if high_open else v <= high)
    if not ok:
        lb = "(" if low_open else "["
        rb = ")" if high_open else "]"
        raise ValueError(f"{name} must be a number in {lb}{low}, {high}{rb}, got {value!r}")
    return float(value)


# |log-ratio| bound of a ratio's value and slope (exp(20) ~ 4.9e8): a ratio and its gradient stay
# finite in float32 however long the sequence it multiplies over (exp overflows past x ~ 88.7)
LOG_RATIO_CLAMP = 20.0


def capped_exp(log_ratio: Tensor) -> Tensor:
    """rho = exp(clamp(s, -c, c)) with d rho / d s = exp(clamp(s, -c, c)) everywhere, c = ``LOG_RATIO_CLAMP``.

    Inside [-c, c] this is exp(s), value and gradient, bit for bit. Beyond the bound the value and
    the slope are held at exp(+-c): the gradient keeps PPO's direction for either sign of the
    advantage and only its size is capped (a plain clamp would zero it there, which silently drops
    the unclipped ``rho * A`` branch that PPO's ``min`` selects for a large ratio and a negative
    advantage). Where PPO's objective selects a clipped branch the gradient is 0 as always.
    """
    held = torch.exp(torch.clamp(log_ratio, -LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)).detach()
    return held * (1.0 + (log_ratio - log_ratio.detach()))


def token_ratios(logp_new: Tensor, logp_old: Tensor) -> Tensor:
    """rho_t = exp(log pi_new(a_t) - log pi_old(a_t)), through ``capped_exp``.

    Shapes: both inputs the same shape (typically [B, T]); returns that shape. One ratio per
    sampled token: token-level PPO clips each of these, never their product. Beyond a log-ratio
    of +-20 the ratio's value and slope are held at exp(+-20) (``capped_exp``), so a token keeps
    a gradient of PPO's sign.
    """
    _same_shape(logp_new=logp_new, logp_old=logp_old)
    return capped_exp(logp_new - logp_old)


def sequence_ratios(
    logp_new: Tensor, logp_old: Tensor, mask: Tensor, length_normalized: bool = False
) -> Tensor:
    """rho_seq = exp(s) with s = sum_t m_t (log pi_new - log pi_old), i.e. prod_t rho_t over
    masked tokens; length_normalized: s = sum_t m_t (...) / sum_t m_t (geometric mean, GSPO).
    Exponentiated through ``capped_exp``: the summed log-ratio of a long action (200 tokens at
    +0.5 each: s = 100) would overflow exp to inf, so beyond |s| = 20 the value and slope are held
    at exp(+-20); the gradient keeps PPO's direction for both signs of the advantage.

    Shapes: ``logp_new``, ``logp_old``, ``mask`` [B, T] (mask bool or 0/1, 1 = sampled token).
    Returns [B]. A row with no masked token has ratio 1.0 (empty product / log-ratio 0).
    """
    _same_shape(logp_new=logp_new, logp_old=logp_old, mask=mask)
    if logp_new.dim() != 2:
        raise ValueError(f"logp_new must be 2-D [B, T], got shape {tuple(logp_new.shape)}")
    m = as_bool("mask", mask)
    log_ratio = torch.where(m, logp_new - logp_old, torch.zeros_like(logp_new))
    total = log_ratio.sum(dim=1)
    if length_normalized:
        total = total / m.sum(dim=1).clamp(min=1).to(total.dtype)
    return capped_exp(total)


def _token_ratio_kind(logp: Tensor, base: Tensor, mask: Tensor) -> Tensor:
    return token_ratios(torch.where(mask, logp, base), base)


def _sequence_ratio_kind(logp: Tensor, base: Tensor, mask: Tensor) -> Tensor:
    return sequence_ratios(logp, base, mask)[:, None].expand_as(logp)


def _sequence_norm_ratio_kind(logp: Tensor, base: Tensor, mask: Tensor) -> Tensor:
    return sequence_ratios(logp, base, mask, length_normalized=True)[:, None].expand_as(logp)


# ``algo.ratio`` -> (logp [B, T], base [B, T], mask [B, T] bool) -> ratio [B, T] on every token:
# token: rho_t per token (exactly 1 off the mask); sequence / sequence-norm: the row's rho_seq
# broadcast to all of its tokens.
RATIO_KINDS: dict[str, Callable[[Tensor, Tensor, Tensor], Tensor]] = {
    "token": _token_ratio_kind,
    "sequence": _sequence_ratio_kind,
    "sequence-norm": _sequence_norm_ratio_kind,
}


def ppo_clip_loss(
    ratio: Tensor,
    advantages: Tensor,
    clip_low: float = 0.2,
    clip_high: float = 0.2,
    dual_clip: float | None = None,
) -> tuple[Tensor, Tensor]:
    """L = -min(rho * A, clip(rho, 1 - clip_low, 1 + clip_high) * A);
    dual clip c (A < 0 only): L = min(L, -c * A), i.e. objective = max(objective, c * A).

    Shapes: ``ratio`` and ``advantages`` broadcast (e.g. [B, T] with [B, T] or [B, 1]); both
    outputs have the broadcast shape. Returns ``(loss, clipped)``: per-element loss and a bool
    tensor, True where a clipped branch was selected (the clipped PPO term or the dual-clip cap);
    those elements have zero gradient w.r.t. the ratio. The ratio itself is never altered: clipping
    only changes which term of the objective is used. ``clip_low`` in [0, 1), ``clip_high`` >= 0
    (clip-higher: clip_high > clip_low), ``dual_clip`` None or > 1.
    """
    for name, x in (("ratio", ratio), ("advantages", advantages)):
        if not isinstance(x, Tensor):
            raise ValueError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    try:
        torch.broadcast_shapes(ratio.shape, advantages.shape)
    except RuntimeError:
        raise ValueError(
            f"ratio shape {tuple(ratio.shape)} and advantages shape {tuple(advantages.shape)} do not "
            f"broadcast; use advantages of shape {tuple(ratio.shape)} or [B, 1]"
        ) from None
    clip_low = _real("clip_low", clip_low, 0.0, 1.0, high_open=True)
    clip_high = _real("clip_high", clip_high, 0.0, float("inf"), high_open=True)
    if dual_clip is not None:
        dual_clip = _real("dual_clip", dual_clip, 1.0, float("inf"), low_open=True, high_open=True)
    unclipped = ratio * advantages
    clipped_obj = torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high) * advantages
    clipped = clipped_obj < unclipped
    objective = torch.where(clipped, clipped_obj, unclipped)
    if dual_clip is not None:
        floor = dual_clip * advantages
        capped = (advantages < 0) & (objective < floor)
        objective = torch.where(capped, floor, objective)
        clipped = clipped | capped
    return -objective, clipped


def value_loss(values: Tensor, old_values: Tensor, returns: Tensor, clip: float | None = None) -> Tensor:
    """L = 0.5 * (v - R)^2;  with clip c:
    L = 0.5 * max((v - R)^2, (v_old + clamp(v - v_old, -c, c) - R)^2).

    Shapes: all three the same shape; returns that shape (per element, reduce with
    :func:`aggregate`). ``old_values`` are the critic's predictions when the batch was collected;
    ``clip`` None (no clipping) or > 0.
    """
    _same_shape(values=values, old_values=old_values, returns=returns)
    unclipped = (values - returns) ** 2
    if clip is None:
        return 0.5 * unclipped
    clip = _real("clip", clip, 0.0, float("inf"), low_open=True, high_open=True)
    clipped_values = old_values + torch.clamp(values - old_values, -clip, clip)
    clipped_sq = (clipped_values - returns) ** 2
    return 0.5 * torch.where(clipped_sq > unclipped, clipped_sq, unclipped)


def _k1(log_ratio: Tensor) -> Tensor:
    return -log_ratio


def _k2(log_ratio: Tensor) -> Tensor:
    return 0.5 * log_ratio**2


def _k3(log_ratio: Tensor) -> Tensor:
    return torch.expm1(log_ratio) - log_ratio


# Estimators of KL(pi || ref) from samples a ~ pi, as functions of log_ratio = log ref(a) - log pi(a).
KL_ESTIMATORS: dict[str, Callable[[Tensor], Tensor]] = {"k1": _k1, "k2": _k2, "k3": _k3}


def kl_estimate(logp: Tensor, ref_logp: Tensor, kind: str = "k3") -> Tensor:
    """With x = log ref(a) - log pi(a), a sampled from pi:
    k1 = -x (unbiased, can be negative);  k2 = x^2 / 2 (biased, >= 0);
    k3 = exp(x) - 1 - x (unbiased, >= 0).

    Shapes: ``logp`` (current policy) and ``ref_logp`` (frozen reference model) the same shape;
    returns that shape, per element. ``kind`` is one of the names in ``KL_ESTIMATORS``. The
    reference is a separate frozen model: the estimate is non-zero whenever pi != ref, even when the
    PPO ratios pi / pi_old are all 1.
    """
    if kind not in KL_ESTIMATORS:
        allowed = ", ".join(repr(k) for k in KL_ESTIMATORS)
        raise ValueError(f"unknown KL estimator {kind!r}; allowed: {allowed}")
    _same_shape(logp=logp, ref_logp=ref_logp)
    return KL_ESTIMATORS[kind](ref_logp - logp)


def approx_kl(logp_new: Tensor, logp_old: Tensor) -> Tensor:
    """k = r - 1 - log r per sample, r = pi_new(a) / pi_old(a), a sampled from pi_old:
    E_old[k] = E_old[r] - 1 + KL(pi_old || pi_new) = KL(pi_old || pi_new) (E_old[r] = 1), k >= 0.

    The k3 estimator of ``KL(pi_old || pi_new)`` (``kl_estimate(logp_old, logp_new, "k3")``).
    Shapes: both inputs the same shape; returns that shape (reduce with a masked mean).
    """
    _same_shape(logp_new=logp_new, logp_old=logp_old)
    return _k3(logp_new - logp_old)


def _token_mean(m: Tensor, traj_ids: Tensor | None) -> Tensor:
    return m / m.sum().clamp(min=1.0)


def _seq_mean_token_mean(m: Tensor, traj_ids: Tensor | None) -> Tensor:
    row_tokens = m.sum(dim=1, keepdim=True)
    n_rows = (row_tokens > 0).sum().to(m.dtype).clamp(min=1.0)
    return m / row_tokens.clamp(min=1.0) / n_rows


def _seq_mean_token_sum(m: Tensor, traj_ids: Tensor | None) -> Tensor:
    n_rows = (m.sum(dim=1) > 0).sum().to(m.dtype).clamp(min=1.0)
    return m / n_rows


def _task_mean(m: Tensor, traj_ids: Tensor | None) -> Tensor:
    if traj_ids is None:
        raise ValueError("aggregation mode 'task-mean' needs traj_ids [B] (the trajectory/task id of each row)")
    _, inverse = torch.unique(traj_ids, return_inverse=True)
    n_trajs = int(inverse.max().item()) + 1 if inverse.numel() else 0
    traj_tokens = torch.zeros(n_trajs, dtype=m.dtype).index_add_(0, inverse, m.sum(dim=1))
    n_with_tokens = (traj_tokens > 0).sum().to(m.dtype).clamp(min=1.0)
    return m / traj_tokens.clamp(min=1.0)[inverse].unsqueeze(1) / n_with_tokens


# Loss aggregation mode -> per-token weights over the whole batch (the global denominator).
AGGREGATION_MODES: dict[str, Callable[[Tensor, Tensor | None], Tensor]] = {
    "token-mean": _token_mean,
    "seq-mean-token-mean": _seq_mean_token_mean,
    "seq-mean-token-sum": _seq_mean_token_sum,
    "task-mean": _task_mean,
}


def aggregation_weights(mask: Tensor, mode: str, traj_ids: Tensor | None = None) -> Tensor:
    """loss = sum_{b,t} w_{b,t} * l_{b,t}, with m the mask and, per mode:
    token-mean:           w = m / sum_{b,t} m
    seq-mean-token-mean:  w = m / (sum_t m_b) / #rows with tokens
    seq-mean-token-sum:   w = m / #rows with tokens
    task-mean:            w = m / (tokens of the row's trajectory) / #trajectories with tokens

    Shapes: ``mask`` [B, T] bool or 0/1 (1 = token in the loss), ``traj_ids`` [B] integer (rows
    holding segments of the same trajectory/task share an id; required for "task-mean", which pools
    them so that cutting a trajectory into segments does not change its weight). Returns [B, T]
    float weights. Compute them ONCE on the full batch, then slice rows: the sum over micro-batches
    of ``aggregate(loss[idx], w[idx])`` equals the full-batch loss (and gradient) for any split, and
    padding (mask 0) gets weight 0. An all-zero mask gives all-zero weights (no NaN).
    """
    if mode not in AGGREGATION_MODES:
        allowed = ", ".join(repr(k) for k in AGGREGATION_MODES)
        raise ValueError(f"unknown aggregation mode {mode!r}; allowed: {allowed}")
    if not isinstance(mask, Tensor):
        raise ValueError(f"mask must be a torch.Tensor, got {type(mask).__name__}")
    if mask.dim() != 2:
        raise ValueError(f"mask must be 2-D [B, T], got shape {tuple(mask.shape)}")
    dtype = mask.dtype if mask.dtype.is_floating_point else torch.get_default_dtype()
    m = as_bool("mask", mask).to(dtype)
    if traj_ids is not None:
        if not isinstance(traj_ids, Tensor):
            raise ValueError(f"traj_ids must be a torch.Tensor, got {type(traj_ids).__name__}")
        if traj_ids.dtype.is_floating_point or traj_ids.dtype.is_complex or traj_ids.dtype == torch.bool:
            raise ValueError(f"traj_ids must be an integer tensor (int64), got dtype {traj_ids.dtype}")
        if traj_ids.shape != (mask.shape[0],):
            raise ValueError(f"traj_ids must have shape ({mask.shape[0]},) (one id per row), got {tuple(traj_ids.shape)}")
    return AGGREGATION_MODES[mode](m, traj_ids)


def aggregate(loss: Tensor, weights: Tensor) -> Tensor:
    """L = sum_{b,t} w_{b,t} * l_{b,t}  (a scalar).

    Shapes: ``loss`` and ``weights`` the same shape (a full batch or the same row slice of both).
    Weights come from :func:`aggregation_weights` on the full batch. Positions with weight 0 must
    hold finite losses (0 * nan = nan): fill padding before computing the per-element loss.
    """
    _same_shape(loss=loss, weights=weights)
    return (loss * weights).sum()
