"""The source document's own small API, so its two snippets run verbatim against this project.

``from rl_checks import gae`` and ``from rl_checks import mixed_group_probability`` are thin
wrappers over ``algos`` (one implementation of the math): plain Python lists for ONE episode in,
plain Python floats out.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from algos.advantages import gae as _gae
from algos.metrics import mixed_group_probability

__all__ = ["gae", "mixed_group_probability"]


def _row(name: str, values: Sequence, dtype: torch.dtype) -> torch.Tensor:
    try:
        items = list(values)
    except TypeError:
        raise ValueError(f"{name} must be a sequence with one entry per step, got {values!r}") from None
    try:
        return torch.tensor([items], dtype=dtype)
    except (TypeError, ValueError, RuntimeError):
        raise ValueError(f"{name} must hold plain numbers (bools for flags), got {items!r}") from None


def gae(rewards, values, next_values, terminated, truncated, gamma=1.0, trace_decay=0.5) -> list[float]:
    """delta_t = r_t + gamma * (1 - terminated_t) * V'_t - V_t;
    A_t = delta_t + gamma * trace_decay * (1 - (terminated_t | truncated_t)) * A_{t+1}.

    One episode: every argument a list of length T (rewards / values / next_values numbers,
    terminated / truncated bools). ``trace_decay`` is GAE's lambda. Returns the T advantages as
    Python floats. Computed by ``algos.advantages.gae`` on a [1, T] float64 batch.
    """
    rows = [
        _row("rewards", rewards, torch.float64),
        _row("values", values, torch.float64),
        _row("next_values", next_values, torch.float64),
        # Flags go in as numbers so that algos rejects anything but False/True/0/1.
        _row("terminated", terminated, torch.float64),
        _row("truncated", truncated, torch.float64),
    ]
    names = ("rewards", "values", "next_values", "terminated", "truncated")
    lengths = {name: r.shape[1] for name, r in zip(names, rows)}
    if len(set(lengths.values())) != 1:
        listed = ", ".join(f"{name}={n}" for name, n in lengths.items())
        raise ValueError(f"all five lists must have one entry per step (the same length), got {listed}")
    try:
        advantages, _ = _gae(*rows, gamma=gamma, lam=trace_decay)
    except ValueError as err:
        if str(err).startswith("lam "):  # name the argument as this API spells it
            raise ValueError("trace_decay" + str(err)[len("lam"):]) from None
        raise
    return [float(a) for a in advantages[0].tolist()]
