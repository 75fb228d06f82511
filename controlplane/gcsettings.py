"""The garbage collector's settings for a long-running server process.

The schemas, the registry, the OpenAPI and validation tables and a loaded
watch cache are hundreds of thousands of long-lived objects. Every full
collection would walk them again; a pod create allocates enough (its parsed
JSON) to start a collection every few requests, and py-spy showed those
walks as a tenth of the create path, and as the tail of watch delivery with
10,000 watchers. ``settle_heap`` moves what exists now out of the collector's
sight (``gc.freeze``) and makes young collections rarer. The server calls it
once started; the benchmarks call it too, so they measure the same process.
"""

from __future__ import annotations

import gc

__all__ = ["YOUNG_THRESHOLD", "settle_heap"]

YOUNG_THRESHOLD = 20_000


# Collections before the freeze. A collection untracks the tuples that hold only
# untracked objects, but a nested tuple may need a pass per level (seen: two for a
# shared label set, registry/attrs.py). One still tracked when frozen stays tracked
# for good, and so does every later tuple that holds it: the watch-cache entries of
# every new pod with those labels, which full collections would then walk again.
SETTLE_PASSES = 3


def settle_heap() -> None:
    for _ in range(SETTLE_PASSES):
        gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG_THRESHOLD, 20, 20)
