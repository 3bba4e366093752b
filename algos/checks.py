"""Input checks shared by the pure-math modules of ``algos`` (``advantages``, ``losses``, ``metrics``)
and the config-name lookup of its registries (:func:`pick`).

Each check returns its input in the form the math reads (a float or bool tensor, a group index, a
checked number) or raises a one-line ``ValueError`` naming the argument, the bad value and what is
allowed, before any compute. No math here beyond the conversion.
"""

from __future__ import annotations

import math
import numbers

import torch
from torch import Tensor


def pick(registry: dict, field: str, name: str):
    """``registry[name]`` for a config value ``field=name``, or a one-line
    ``ValueError("<field>=<name> unknown; allowed: <names>")`` listing the registry's names."""
    if name not in registry:
        raise ValueError(f"{field}={name!r} unknown; allowed: {', '.join(registry)}")
    return registry[name]


def check_unit_interval(name: str, value: float) -> float:
    """``value`` as a float when it is a real number in [0, 1] (a bool is not)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must be a number in [0, 1], got {value!r}")
    return float(value)


def check_eps(eps: float) -> float:
    """``eps`` as a float when it is a finite real number >= 0 (a bool is not)."""
    if isinstance(eps, bool) or not isinstance(eps, numbers.Real) or not (eps >= 0.0 and math.isfinite(eps)):
        raise ValueError(f"eps must be a finite number >= 0, got {eps!r}")
    return float(eps)


def as_float(name: str, x: Tensor) -> Tensor:
    """A real tensor as is when floating point, else in the default float dtype."""
    if not isinstance(x, Tensor):
        raise ValueError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.dtype.is_floating_point:
        return x
    if x.dtype.is_complex:
        raise ValueError(f"{name} must be real-valued, got dtype {x.dtype}")
    return x.to(torch.get_default_dtype())


def as_bool(name: str, x: Tensor) -> Tensor:
    """A bool tensor from a bool tensor or a numeric tensor holding only 0 and 1."""
    if not isinstance(x, Tensor):
        raise ValueError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.dtype == torch.bool:
        return x
    if not bool(((x == 0) | (x == 1)).all()):
        bad = x[(x != 0) & (x != 1)].flatten()[0].item()
        raise ValueError(f"{name} must be bool or hold only 0/1 values, found {bad!r}")
    return x != 0


def as_group_index(group_ids: Tensor, n: int) -> tuple[Tensor, int]:
    """``(index [N] into 0 .. n_groups - 1, n_groups)`` of an integer ``group_ids`` [N=n] (any values, any order)."""
    if not isinstance(group_ids, Tensor):
        raise ValueError(f"group_ids must be a torch.Tensor, got {type(group_ids).__name__}")
    if group_ids.dtype.is_floating_point or group_ids.dtype.is_complex or group_ids.dtype == torch.bool:
        raise ValueError(f"group_ids must be an integer tensor (int64), got dtype {group_ids.dtype}")
    if group_ids.shape != (n,):
        raise ValueError(f"group_ids must have shape ({n},) like rewards, got {tuple(group_ids.shape)}")
    uniques, inverse = torch.unique(group_ids, return_inverse=True)
    return inverse, int(uniques.numel())


def check_steps(step_values: Tensor, step_mask: Tensor, n: int, name: str) -> tuple[Tensor, Tensor]:
    """``(float [N, S], bool [N, S])`` from a per-step value tensor and its mask."""
    step_values = as_float(name, step_values)
    if step_values.dim() != 2 or step_values.shape[0] != n:
        raise ValueError(f"{name} must be 2-D [N={n}, S], got shape {tuple(step_values.shape)}")
    mask = as_bool("step_mask", step_mask)
    if mask.shape != step_values.shape:
        raise ValueError(f"step_mask has shape {tuple(mask.shape)}, expected {tuple(step_values.shape)} "
                         f"(the shape of {name})")
    return step_values, mask


def check_values_inputs(step_returns: Tensor, step_mask: Tensor, group_ids: Tensor, anchor_ids: Tensor):
    """``(returns [N, S], mask [N, S], group index [N], number of groups)``, or a one-line ``ValueError``."""
    n = step_returns.shape[0] if isinstance(step_returns, Tensor) and step_returns.dim() else -1
    ret, mask = check_steps(step_returns, step_mask, n, "step_returns")
    group_index, n_groups = as_group_index(group_ids, n)
    if not isinstance(anchor_ids, Tensor) or anchor_ids.shape != ret.shape:
        got = tuple(anchor_ids.shape) if isinstance(anchor_ids, Tensor) else type(anchor_ids).__name__
        raise ValueError(f"anchor_ids has shape {got}, expected {tuple(ret.shape)}")
    return ret, mask, group_index, n_groups


def check_gae_inputs(
    rewards: Tensor,
    values: Tensor,
    next_values: Tensor,
    terminated: Tensor,
    truncated: Tensor,
    mask: Tensor | None,
) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]:
    """``(rewards, values, next_values, terminated, truncated, mask)`` of :func:`algos.advantages.gae`: the
    float three in their promoted dtype, the flags and mask as bool (mask None: all True), all [B, T]."""
    named = {
        "rewards": rewards,
        "values": values,
        "next_values": next_values,
        "terminated": terminated,
        "truncated": truncated,
    }
    if mask is not None:
        named["mask"] = mask
    for name, x in named.items():
        if not isinstance(x, Tensor):
            raise ValueError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    shape = rewards.shape
    if len(shape) != 2:
        raise ValueError(f"rewards must be 2-D [B, T], got shape {tuple(shape)}")
    for name, x in named.items():
        if x.shape != shape:
            raise ValueError(
                f"{name} has shape {tuple(x.shape)}, expected {tuple(shape)} (the shape of rewards)"
            )
    floats = [as_float(n, x) for n, x in (("rewards", rewards), ("values", values), ("next_values", next_values))]
    dtype = torch.promote_types(torch.promote_types(floats[0].dtype, floats[1].dtype), floats[2].dtype)
    r, v, nv = (x.to(dtype) for x in floats)
    term = as_bool("terminated", terminated)
    trunc = as_bool("truncated", truncated)
    m = torch.ones(shape, dtype=torch.bool) if mask is None else as_bool("mask", mask)
    return r, v, nv, term, trunc, m


def check_lam(name: str, lam: float | Tensor, r: Tensor) -> float | Tensor:
    """A number in [0, 1] as a float, or a [B] tensor of numbers in [0, 1] (B = rows of ``r``) as a
    [B, 1] column of ``r``'s dtype (it broadcasts over the row's positions)."""
    if not isinstance(lam, Tensor):
        return check_unit_interval(name, lam)
    if lam.shape != (r.shape[0],):
        raise ValueError(f"{name} must be a number or a [B={r.shape[0]}] tensor, got shape {tuple(lam.shape)}")
    col = as_float(name, lam).to(r.dtype)
    if not bool(((col >= 0) & (col <= 1)).all()):
        bad = col[~((col >= 0) & (col <= 1))][0].item()
        raise ValueError(f"{name} values must be in [0, 1], got {bad!r}")
    return col[:, None]
