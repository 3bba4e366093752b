"""Hypothesis strategies of GAE inputs shared by the estimator property tests
(tests/algos/test_advantages.py, tests/algos/test_decoupled_gae.py). Not a test module; importable
from any test because pyproject's pytest ``pythonpath`` includes ``tests``."""

import torch
from hypothesis import strategies as st

F64 = torch.float64
small = st.floats(-3, 3, allow_nan=False, width=64)
unit = st.floats(0, 1)
FLAG_KEYS = ("terminated", "truncated", "mask")


@st.composite
def gae_batches(draw):
    """``{rewards, values, next_values, terminated, truncated, mask}``: B x T nested lists, B in
    1..4, T in 1..9, floats in [-3, 3] and independent booleans."""
    b, t = draw(st.integers(1, 4)), draw(st.integers(1, 9))

    def mat(elements):
        return [draw(st.lists(elements, min_size=t, max_size=t)) for _ in range(b)]

    return {"rewards": mat(small), "values": mat(small), "next_values": mat(small),
            "terminated": mat(st.booleans()), "truncated": mat(st.booleans()), "mask": mat(st.booleans())}


def as_tensors(batch: dict) -> dict:
    """A :func:`gae_batches` draw as tensors: bool flags and mask, float64 numbers."""
    return {k: torch.tensor(x, dtype=torch.bool if k in FLAG_KEYS else F64) for k, x in batch.items()}
