"""The ``reset(options=...)`` contract both envs share (docs/interfaces.md).

``options = {"task_index": int, "split": "train" | "heldout"}``, both optional. One parser, so
the envs accept and reject exactly the same option dicts, and one rule for the index: the task
pools are procedural, so any index >= 0 is a task, and a reset without one draws it from the
env's ``np_random``.
"""

from __future__ import annotations

import numpy as np

SPLITS = ("train", "heldout")
RANDOM_TASK_RANGE = 1 << 30  # reset without task_index draws the index from np_random in [0, this)
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


def task_from_options(options: dict | None, np_random: np.random.Generator) -> tuple[str, int]:
    """``(split, task_index)`` of a reset: ``parse_reset_options``, an index drawn from
    ``np_random`` in ``[0, RANDOM_TASK_RANGE)`` when none is given; ``ValueError`` for a negative one."""
    split, index = parse_reset_options(options)
    if index is None:
        index = int(np_random.integers(RANDOM_TASK_RANGE))
    elif index < 0:
        raise ValueError(f"task_index={index} invalid; allowed: an int >= 0")
    return split, index
