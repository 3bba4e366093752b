"""experiments.claims.boundaries: the relabelling helper on a hand-built layout, and the numbers
behind C17 on real compressed PPO rollouts."""

from __future__ import annotations

import pytest
import torch

from algos.decisions import GAELayout
from experiments.claims import boundaries

torch.set_num_threads(1)


def _layout() -> GAELayout:
    """One trajectory, 3 decision points; points 0, 1 in segment row 0 (then a compression), point
    2 in row 1; the task ends after point 2."""
    t = lambda xs, dtype=torch.float64: torch.tensor([xs], dtype=dtype)  # noqa: E731
    owner = torch.tensor([[-1, -1, -1, 0, -1, 1], [-1, -1, -1, -1, 2, -1]])
    return GAELayout(rows=t([0, 0, 1], torch.long), cols=t([3, 5, 4], torch.long), mask=t([1, 1, 1], torch.bool),
                     rewards=t([0.0, 0.0, 1.0]), values=t([0.5, 0.6, 0.8]), next_values=t([0.6, 0.8, 0.0]),
                     terminated=t([False, False, True], torch.bool), truncated=t([False, False, False], torch.bool),
                     owner=owner)


def test_relabelling_a_compression_terminal_is_built_as_input():
    lay = _layout()
    where = boundaries.segment_boundaries(lay)
    assert where == [(0, 1)]
    wrong = boundaries.as_terminal(lay, where)
    assert wrong.terminated.tolist() == [[False, True, True]] and wrong.next_values.tolist() == [[0.6, 0.0, 0.0]]
    assert lay.terminated.tolist() == [[False, False, True]] and lay.next_values[0, 1] == 0.8  # a new layout
    # lambda 0, gamma 1: real [0 + .6 - .5, 0 + .8 - .6, 1 - .8] = [.1, .2, .2]; relabelled point 1: 0 - .6
    assert boundaries._gae(lay, 1.0, 0.0)[0].tolist() == pytest.approx([0.1, 0.2, 0.2])
    assert boundaries._gae(wrong, 1.0, 0.0)[0].tolist() == pytest.approx([0.1, -0.6, 0.2])
    # lambda 1: real returns-to-go minus V [1 - .5, 1 - .6, 1 - .8]; relabelled: the recursion stops at point 1
    assert boundaries._gae(lay, 1.0, 1.0)[0].tolist() == pytest.approx([0.5, 0.4, 0.2])
    assert boundaries._gae(wrong, 1.0, 1.0)[0].tolist() == pytest.approx([-0.5, -0.6, 0.2])


@pytest.mark.slow
def test_c17_bootstrap_is_the_value_of_the_compressed_context():
    m = boundaries.measure_c17()
    assert m.passes()  # the claim's pass rule holds on the same numbers
    bs = m.boundaries
    assert m.rollouts == 32 and m.multi_segment > 0 and len(bs) >= m.multi_segment
    assert m.gamma == 1.0
    for b in bs:
        assert b.end == "compressed" and b.prefix_ok and not b.terminated and not b.truncated
        assert b.bootstrap == pytest.approx(b.value_continuation, abs=1e-4) == b.value_next_first
        assert abs(b.value_continuation - b.value_reset) > 1e-6
        assert b.td_continuing == pytest.approx(b.reward + b.bootstrap - b.value, abs=1e-5)
        assert b.td_terminal == pytest.approx(b.reward - b.value, abs=1e-5)
    # the mislabelling changes the advantages at the boundaries
    assert max(abs(b.adv_continuing - b.adv_terminal) for b in bs) > 1e-3
