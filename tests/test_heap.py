"""``heap.release_free_heap``: the C heap's free pages go back to the system."""

from __future__ import annotations

import subprocess
import sys

PROBE = r"""
import sys
from controlplane.heap import release_free_heap

def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096

blocks = [bytearray(100 * 1024) for _ in range(1000)]  # 100 MB of heap blocks (below the mmap threshold)
keep = bytearray(100 * 1024)                            # one live above them: the heap's top cannot shrink
for b in blocks:
    b[::4096] = b"x" * len(b[::4096])                   # touched: resident
del blocks                                              # 100 MB free inside the heap
before = rss()
took = release_free_heap()
after = rss()
print(before - after, took)
"""


def test_the_free_pages_inside_the_heap_go_back_to_the_system() -> None:
    # in a process of its own: what the test process's heap holds is not this test's to measure
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True).stdout.split()
    released, took = int(out[0]), float(out[1])
    assert released > 50_000_000, released  # of the 100 MB freed under a live block
    assert took >= 0
