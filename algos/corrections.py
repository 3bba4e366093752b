"""Off-policy corrections of the policy loss (``algo.off_policy_correction``), registered once by
name, and the sampler / trainer mismatch metrics (``off_policy/*``).

Pure math: tensors in, tensors out. Three log-probs of each sampled token ``a_t``, all ``[B, T]``:

- ``new``: log pi(a_t), the policy being optimised (the one carrying the gradient);
- ``old``: log pi_old(a_t), the weights at the start of the update, recomputed by the trainer;
- ``behavior``: log pi_behavior(a_t), the sampler's log-prob, recorded when the token was drawn.

A correction maps them (none of the built-in ones reads ``new``; the signature leaves room for
one that does), with the token advantages ``A`` and the loss mask, to a
:class:`Correction`: ``base``, the log-probs the PPO ratio pi / base is taken against, and
``weight``, a detached per-token multiplier of each token's loss (None: no weight; exactly 1 off
the mask). A dropped token has weight 0: it leaves the gradient but keeps its place in the loss
aggregation's denominator (``algos.losses.aggregation_weights`` reads the loss mask alone).

With ``rho_t = pi_old(a_t) / pi_behavior(a_t)`` on a loss token and a *sequence* one row of the
batch (a trajectory's segment; its loss tokens are the masked positions of the row):

====================== ========= =============================================================
name                   base      weight on a loss token t of row b
====================== ========= =============================================================
decoupled              pi_old    min(rho_t, is_cap) (token TIS)
none                   pi_old    none (stale samples used as if on-policy)
behavior-as-old        pi_behav  none (the sampler's log-probs as the PPO baseline)
sequence-tis           pi_old    min(prod_{s in b} rho_s, is_cap) on every token of the row
token-mask             pi_old    rho_t if is_low <= rho_t <= is_high else 0 (IcePop / MIS)
sequence-mask          pi_old    rho_t if is_low <= g_b <= is_high else 0, g_b = exp(mean_{s in b} log rho_s)
neg-adv-sequence-mask  pi_old    0 if A_t < 0 and D_b > neg_adv_kl_max else 1,
                                 D_b = mean_{s in b} (log pi_behavior(a_s) - log pi_old(a_s))
====================== ========= =============================================================

``g_b`` is the geometric mean of the row's per-token ratios (length-normalised, so a long row is
not masked for its length alone). ``D_b`` is the k1 estimate of KL(pi_behavior || pi_old) per
token over the row (its tokens were drawn from pi_behavior); with one advantage per row (GRPO,
RLOO) the rule drops whole rows with A < 0 (DeepSeek-V3.2's off-policy sequence masking), with
per-token advantages (GAE) the tokens of A < 0 of such a row. A row without loss tokens has
``prod = g_b = 1`` and ``D_b = 0``. Every quantity of a row is computed from that row alone, so a
micro-batch of whole rows gets the weights the full batch gives them.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import NamedTuple

import torch
from torch import Tensor

from algos import metric_keys as mk
from algos.checks import as_bool, pick


@dataclass(frozen=True)
class CorrectionParams:
    """The corrections' parameters, named as the ``algo`` config fields that set them. Each check
    raises ``ValueError`` with one line naming the bad value and the allowed range."""

    # truncation of the token / sequence ratio from above (``decoupled``, ``sequence-tis``)
    is_cap: float
    # the kept band [is_low, is_high] of ``token-mask`` / ``sequence-mask`` and of the drop-share metric
    is_low: float
    is_high: float
    # divergence threshold of ``neg-adv-sequence-mask`` (per-token KL(pi_behavior || pi_old) of a row)
    neg_adv_kl_max: float

    def __post_init__(self) -> None:
        _bounded("is_cap", self.is_cap, 1.0, math.inf, "[1, inf)", high_open=True)
        _bounded("is_low", self.is_low, 0.0, 1.0, "(0, 1]", low_open=True)
        _bounded("is_high", self.is_high, 1.0, math.inf, "[1, inf)", high_open=True)
        _bounded("neg_adv_kl_max", self.neg_adv_kl_max, 0.0, math.inf, "[0, inf]")
        if not self.is_low < self.is_high:
            raise ValueError(f"is_low={self.is_low} is not allowed with is_high={self.is_high}; allowed: "
                             f"is_low < is_high")

    @classmethod
    def of(cls, config) -> "CorrectionParams":
        """The parameters read from the same-named fields of ``config`` (the ``algo`` config)."""
        return cls(**{f.name: getattr(config, f.name) for f in fields(cls)})


def _bounded(name: str, value: object, low: float, high: float, allowed: str, low_open: bool = False,
             high_open: bool = False) -> None:
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool)
    # every comparison is False for NaN
    ok = ok and (value > low if low_open else value >= low) and (value < high if high_open else value <= high)
    if not ok:
        raise ValueError(f"{name}={value!r} is not allowed; allowed: a number in {allowed}")


class Correction(NamedTuple):
    """What the loss uses: the PPO ratio is ``pi / exp(base)`` and each token's loss is
    multiplied by ``weight`` (detached; 1 off the mask; None: no weight). Both ``[B, T]``."""

    base: Tensor
    weight: Tensor | None


# fn(new, old, behavior, advantages, mask [B, T] bool, params) -> Correction
CorrectionFn = Callable[[Tensor, Tensor, Tensor, Tensor, Tensor, CorrectionParams], Correction]


@dataclass(frozen=True)
class CorrectionSpec:
    """A registered correction: its config ``name``, the pure function and the
    :class:`CorrectionParams` fields it reads (``params``)."""

    name: str
    fn: CorrectionFn
    params: tuple[str, ...] = ()


# ``algo.off_policy_correction`` -> its spec, in registration order (the order errors list them)
CORRECTIONS: dict[str, CorrectionSpec] = {}


def register_correction(name: str, params: tuple[str, ...] = ()):
    """Decorator: ``CORRECTIONS[name] = CorrectionSpec(name, fn, params)``. A name registered
    twice, or a ``params`` entry that is no :class:`CorrectionParams` field, raises ValueError."""
    known = {f.name for f in fields(CorrectionParams)}
    unknown = [p for p in params if p not in known]
    if unknown:
        raise ValueError(f"params={unknown} are not CorrectionParams fields; allowed: {', '.join(sorted(known))}")

    def deco(fn: CorrectionFn) -> CorrectionFn:
        if name in CORRECTIONS and CORRECTIONS[name].fn is not fn:
            raise ValueError(f"off-policy correction {name!r} is already registered; pick another name")
        CORRECTIONS[name] = CorrectionSpec(name=name, fn=fn, params=tuple(params))
        return fn

    return deco


def correct(name: str, new: Tensor, old: Tensor, behavior: Tensor, advantages: Tensor, mask: Tensor,
            params: CorrectionParams) -> Correction:
    """``CORRECTIONS[name].fn(...)`` after checking the inputs: five ``[B, T]`` tensors of one
    shape, ``mask`` bool or 0/1. An unknown ``name`` raises a one-line ValueError listing the names."""
    spec = pick(CORRECTIONS, "algo.off_policy_correction", name)
    return spec.fn(new, old, behavior, advantages, _checked_mask(new, old, behavior, advantages, mask), params)


def _checked_mask(new: Tensor, old: Tensor, behavior: Tensor, advantages: Tensor, mask: Tensor) -> Tensor:
    named = {"new": new, "old": old, "behavior": behavior, "advantages": advantages, "mask": mask}
    for key, x in named.items():
        if not isinstance(x, Tensor):
            raise ValueError(f"{key} must be a torch.Tensor, got {type(x).__name__}")
        if x.dim() != 2 or x.shape != new.shape:
            raise ValueError(f"{key} has shape {tuple(x.shape)}; expected 2-D [B, T] like new {tuple(new.shape)}")
    return as_bool("mask", mask)


def _log_ratio(old: Tensor, behavior: Tensor, mask: Tensor) -> Tensor:
    """log rho_t = old - behavior on the mask, 0 off it (detached)."""
    return torch.where(mask, old - behavior, torch.zeros_like(old)).detach()


def _on_mask(weight: Tensor, mask: Tensor) -> Tensor:
    return torch.where(mask, weight, torch.ones_like(weight))


def _row_mean(x: Tensor, mask: Tensor) -> Tensor:
    """[B, 1]: the mean of ``x`` over each row's masked positions (0 for a row without any)."""
    return x.sum(dim=1, keepdim=True) / mask.sum(dim=1, keepdim=True).clamp(min=1).to(x.dtype)


@register_correction("decoupled", params=("is_cap",))
def token_tis(new: Tensor, old: Tensor, behavior: Tensor, advantages: Tensor, mask: Tensor,
              params: CorrectionParams) -> Correction:
    """Token TIS: w_t = min(rho_t, is_cap) on the mask, base pi_old."""
    w = torch.exp(old - behavior).clamp(max=params.is_cap).detach()
    return Correction(old, _on_mask(w, mask))


@register_correction("none")
def no_correction(new: Tensor, old: Tensor, behavior: Tensor, advantages: Tensor, mask: Tensor,
                  params: CorrectionParams) -> Correction:
    """No weight, base pi_old: the stale samples are used as if the old policy drew them."""
    return Correction(old, None)


@register_correction("behavior-as-old")
def behavior_as_old(new: Tensor, old: Tensor, behavior: Tensor, advantages: Tensor, mask: Tensor,
                    params: CorrectionParams) -> Correction:
    """No weight, base pi_behavior: the PPO ratio pi / pi_behavior, clipped around the sampler."""
    return Correction(behavior, None)


@register_correction("sequence-tis", params=("is_cap",))
def sequence_tis(new: Tensor, old: Tensor, behavior: Tensor, advantages: Tensor, mask: Tensor,
                 params: CorrectionParams) -> Correction:
    """Sequence TIS: every loss token of row b weighted by min(exp(sum_s log rho_s), is_cap)."""
    total = _log_ratio(old, behavior, mask).sum(dim=1, keepdim=True)
    w = torch.exp(total).clamp(max=params.is_cap).expand_as(old)
    return Correction(old, _on_mask(w, mask))


@register_correction("token-mask", params=("is_low", "is_high"))
def token_mask(new: Tensor, old: Tensor, behavior: Tensor, advantages: Tensor, mask: Tensor,
               params: CorrectionParams) -> Correction:
    """IcePop / MIS: w_t = rho_t inside [is_low, is_high], 0 outside."""
    rho = torch.exp(old - behavior).detach()
    kept = (rho >= params.is_low) & (rho <= params.is_high)
    return Correction(old, _on_mask(torch.where(kept, rho, torch.zeros_like(rho)), mask))


@register_correction("sequence-mask", params=("is_low", "is_high"))
def sequence_mask(new: Tensor, old: Tensor, behavior: Tensor, advantages: Tensor, mask: Tensor,
                  params: CorrectionParams) -> Correction:
    """Rows whose geometric-mean ratio g_b is outside [is_low, is_high] get weight 0; the tokens
    of a kept row get their own rho_t (NeMo RL's seq-mask-tis)."""
    geo = torch.exp(_row_mean(_log_ratio(old, behavior, mask), mask))
    kept = (geo >= params.is_low) & (geo <= params.is_high)
    rho = torch.exp(old - behavior).detach()
    return Correction(old, _on_mask(torch.where(kept, rho, torch.zeros_like(rho)), mask))


@register_correction("neg-adv-sequence-mask", params=("neg_adv_kl_max",))
def neg_adv_sequence_mask(new: Tensor, old: Tensor, behavior: Tensor, advantages: Tensor, mask: Tensor,
                          params: CorrectionParams) -> Correction:
    """Weight 0 on the tokens with A_t < 0 of a row whose divergence D_b exceeds neg_adv_kl_max."""
    divergence = _row_mean(-_log_ratio(old, behavior, mask), mask)
    dropped = (advantages < 0) & (divergence > params.neg_adv_kl_max)
    w = torch.where(dropped, torch.zeros_like(old), torch.ones_like(old))
    return Correction(old, _on_mask(w, mask))


# ----- mismatch metrics -----------------------------------------------------------------------


def _masked_mean(x: Tensor, mask: Tensor) -> float:
    """Mean of ``x`` over the masked positions; 0.0 when the mask is empty."""
    m = as_bool("mask", mask)
    return float(x[m].mean()) if m.any() else 0.0


def prob_ratio_error(old: Tensor, behavior: Tensor, mask: Tensor) -> float:
    """mean over loss tokens of |pi_behavior / pi_old - 1| (0 when sampler and trainer agree)."""
    return _masked_mean((torch.exp(behavior - old) - 1.0).abs(), mask)


def behavior_kl_k1(old: Tensor, behavior: Tensor, mask: Tensor) -> float:
    """mean over loss tokens of log pi_behavior - log pi_old: the k1 estimate of
    KL(pi_behavior || pi_old) per token (the tokens were drawn from pi_behavior; can be < 0)."""
    return _masked_mean(behavior - old, mask)


def band_drop_share(old: Tensor, behavior: Tensor, mask: Tensor, low: float, high: float) -> float:
    """Share of loss tokens whose rho_t = pi_old / pi_behavior lies outside [low, high]: the
    tokens ``token-mask`` with that band would drop."""
    rho = torch.exp(old - behavior)
    return _masked_mean(((rho < low) | (rho > high)).to(old.dtype), mask)


def mismatch_metrics(old: Tensor, behavior: Tensor, mask: Tensor, params: CorrectionParams) -> dict[str, float]:
    """The update's ``off_policy/*`` metrics over its loss tokens (``[B, T]`` inputs):
    ``prob_ratio_error`` (:func:`prob_ratio_error`), ``behavior_kl_k1`` (:func:`behavior_kl_k1`)
    and ``band_drop_share`` (:func:`band_drop_share` with ``params.is_low`` / ``params.is_high``)."""
    return {
        mk.OFF_POLICY_PROB_RATIO_ERROR: prob_ratio_error(old, behavior, mask),
        mk.OFF_POLICY_BEHAVIOR_KL_K1: behavior_kl_k1(old, behavior, mask),
        mk.OFF_POLICY_BAND_DROP_SHARE: band_drop_share(old, behavior, mask, params.is_low, params.is_high),
    }


__all__ = ["CORRECTIONS", "Correction", "CorrectionParams", "CorrectionSpec", "band_drop_share", "behavior_kl_k1",
           "correct", "mismatch_metrics", "prob_ratio_error", "register_correction"]
