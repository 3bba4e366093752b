"""Anchor-state keys: a stable 63-bit hash of a canonical description of an env state.

``info["state_key"]`` (BugFix, LongHorizon, PairFix) identifies the state an agent acts in, so a
step-level estimator (GiGPO, ``algos/gigpo.py``) can group the steps of a GRPO group that were
taken in the same state, whichever member and turn reached it. Each env decides which of its
fields go into the description (see its docstring); this module only turns the description into
a number:

    key = int.from_bytes(blake2b(canonical_json(parts), digest_size=8), "big") >> 1   in [0, 2**63)

``canonical_json``: JSON with sorted keys, no whitespace, tuples written as lists. The key is a
pure function of ``parts``: independent of the process (never Python's salted ``hash()``), the
platform and the order dicts were filled in.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Hashable

KEY_BITS = 63
_PERSON = b"agentrl-state-v1"  # blake2b personalisation (16 bytes): keys of no other hash collide


def canonical_json(parts) -> bytes:
    """``parts`` (nested str / int / float / bool / None / list / tuple / dict with str keys) as
    canonical UTF-8 JSON. ``TypeError`` for anything else (a set, an object): its order or its
    text would not be canonical."""
    return json.dumps(parts, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False).encode("utf-8")


def stable_state_key(parts) -> int:
    """The non-negative 63-bit key of ``parts`` (formula in the module docstring); equal parts give
    equal keys in every process, different parts give different keys except with probability
    about ``2**-63`` per pair."""
    digest = hashlib.blake2b(canonical_json(parts), digest_size=8, person=_PERSON).digest()
    return int.from_bytes(digest, "big") >> (64 - KEY_BITS)


class KeyMemo:
    """A bounded memo ``state -> key`` for an env's ``state_key()``: ``memo.get(state, compute)``
    returns the key stored for the hashable raw ``state`` or stores ``compute()``. A step that
    changes nothing, or a state met before (every reset of a GRPO group's task), then costs a dict
    lookup, not a JSON dump and a hash. Emptied when it holds ``max_entries`` (never wrong, only
    slower). The caller guarantees that equal raw states have equal keys."""

    def __init__(self, max_entries: int = 4096) -> None:
        self.max_entries = max_entries
        self._memo: dict[Hashable, int] = {}

    def get(self, state: Hashable, compute: Callable[[], int]) -> int:
        key = self._memo.get(state)
        if key is None:
            if len(self._memo) >= self.max_entries:
                self._memo.clear()
            key = self._memo[state] = compute()
        return key


__all__ = ["KEY_BITS", "KeyMemo", "canonical_json", "stable_state_key"]
