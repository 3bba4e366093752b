"""The ``reset(options=...)`` contract both envs share (docs/interfaces.md).

``options = {"task_index": int, "split": "train" | "heldout"}``, both optional. One parser, so
the envs accept and reject exactly the same option dicts; what an index means (wrap around or a
range check) stays with each env, which knows its task catalogue.
"""

from __future__ import annotations

import numpy as np

SPLITS = ("train", "heldout")
RESET_OPTIONS = ("task_index", "split")


def parse_reset_options(options: dict | None) -> tuple[str, int | None]:
    """``(split, task_index or None)`` of a reset options dict; ``ValueError`` naming the bad
    key or value and the allowed ones (unknown keys, a split outside SPLITS, a non-int index)."""
    options = dict(options or {})
    unknown = set(options) - set(RESET_OPTIONS)
    if unknown:
        raise ValueError(f"unknown reset option(s) {sorted(unknown)}; allowed: {', '.join(RESET_OPTIONS)}")
    split = options.get("split", "train")
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; allowed: {', '.join(SPLITS)}")
    index = options.get("task_index")
    if index is None:
        return split, None
    if isinstance(index, bool) or not isinstance(index, (int, np.integer)):
        raise ValueError(f"task_index must be an int, got {index!r}")
    return split, int(index)
