"""Every random stream of a run, by name, with its numeric value in one place.

All randomness of a run is derived from (run seed, update index, stream), so a resumed run draws
exactly what an uninterrupted one would. Two kinds of derivation exist: hashed streams
(:func:`mix_seed` of the parts and a :class:`Stream` id) and affine ones (a seed times a stride
plus an offset, :class:`Affine`). The values below are the ones every recorded number was measured
with; changing one changes every run's numbers.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from enum import IntEnum


def mix_seed(*parts: int) -> int:
    """A deterministic 31-bit seed from integers (run seed, update index, stream id)."""
    h = hashlib.sha256(",".join(str(int(p)) for p in parts).encode()).digest()
    return int.from_bytes(h[:4], "little") & 0x7FFFFFFF


class Stream(IntEnum):
    """Stream ids of the hashed streams: the last part of :func:`mix_seed`'s arguments."""

    TASK_DRAW = 1  #: which train tasks an update draws (``update_requests``'s generator)
    ENV_SEEDS = 2  #: env seeds of an update's rollout requests
    SAMPLING = 3  #: token sampling of an update's rollouts
    CEILING_ROLLOUTS = 17  #: value_ceiling: the policy's rollouts the points are taken from
    CEILING_BRANCHES = 23  #: value_ceiling: token sampling of the branches
    CEILING_RESEED = 29  #: value_ceiling: env reseed of branch k of point p
    NONSTATIONARITY_EVAL = 31  #: claim C22 part 1: env seeds and token sampling of its evaluations
    CRITIC_PROBE_FIT = 37  #: claim C22 part 2: env seeds of the probe's fit episodes
    CRITIC_PROBE_HELDOUT = 41  #: claim C22 part 2: env seeds of the probe's held-out episodes


def stream_seed(*parts: int, stream: Stream) -> int:
    """``mix_seed(*parts, stream)``: the seed of ``stream`` at ``parts`` (run seed, update, ...)."""
    return mix_seed(*parts, int(stream))


@dataclass(frozen=True)
class Affine:
    """An affine stream: ``seed * stride + offset + index`` (modulo ``modulus`` when set)."""

    stride: int
    offset: int = 0
    modulus: int | None = None

    def __call__(self, seed: int, index: int = 0) -> int:
        v = seed * self.stride + self.offset + index
        return v % self.modulus if self.modulus else v


#: evaluation env seeds of run seed ``s``: ``(7919 s + 424242) mod (2^31 - 1)``
EVAL = Affine(stride=7_919, offset=424_242, modulus=2**31 - 1)
#: env seed of warm-start demonstration ``i``: ``100003 warmstart.seed + i``
DEMO = Affine(stride=100_003)
#: critic_probe: task index of rollout ``i`` of sample seed ``s``: ``7919 s + i`` (mod train tasks)
PROBE_TASKS = Affine(stride=7_919)


def seed_eval_seed(seed: int) -> int:
    """The evaluation seed of run seed ``seed`` (:data:`EVAL`)."""
    return EVAL(seed)


__all__ = ["DEMO", "EVAL", "PROBE_TASKS", "Affine", "Stream",
           "mix_seed", "seed_eval_seed", "stream_seed"]
