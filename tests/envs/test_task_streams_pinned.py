"""The task of every (difficulty, split, index) is pinned: a change to the generator that changes
what any index draws (and so every measured floor, ceiling and start-model number) fails here.

Each digest is sha256 over ``repr(make_task(spec, split, i))`` for split train then held-out,
i = 0..7 (BugFix-v2's generator). A deliberate change of the task streams updates them together
with every number it moves.
"""

from __future__ import annotations

import hashlib

import pytest

from envs.bugfix.config import make_config
from envs.bugfix.tasks import make_task

PINNED = {
    "tutorial": "8bbbaa07c0edb325",
    "easy": "acc9e47b0ab237b5",
    "medium": "423d50e75b502948",
    "hard": "f670e86a05eff24f",
    "extreme": "24405b389a67f480",
    "reading": "d83c7a6a2e14c94e",
}


@pytest.mark.parametrize("difficulty", sorted(PINNED))
def test_task_streams_unchanged(difficulty):
    spec = make_config(difficulty).task_spec
    h = hashlib.sha256()
    for split in ("train", "heldout"):
        for i in range(8):
            h.update(repr(make_task(spec, split, i)).encode())
    assert h.hexdigest()[:16] == PINNED[difficulty]
