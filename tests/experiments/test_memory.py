"""experiments.runtime.memory: freed heap pages go back to the OS (glibc), numbers are untouched."""

import sys

import pytest

from experiments.runtime.memory import release_freed_memory


def _resident_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 2**20


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/statm; malloc_trim is glibc's")
def test_freed_heap_blocks_are_returned_to_the_os():
    """200 MB of 100 kB blocks (below glibc's 128 kB mmap threshold, so they live on the heap);
    all but the last are freed. The last one pins the top of the heap, so free() alone cannot
    shrink it: the pages stay resident until malloc_trim(0) hands them back."""
    blocks = [bytearray(100_000) for _ in range(2000)]
    for b in blocks:
        b[::4096] = b"\x01" * len(b[::4096])  # touch every page
    pin = blocks[-1]
    del blocks
    before = _resident_mb()
    assert release_freed_memory() is True
    after = _resident_mb()
    assert before - after > 100, (before, after)
    assert len(pin) == 100_000
