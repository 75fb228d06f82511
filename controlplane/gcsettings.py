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

import ctypes
import gc
from typing import Any, TypeVar

__all__ = ["YOUNG_THRESHOLD", "settle_heap", "untrack_json", "untracked"]

_T = TypeVar("_T")

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


# void PyObject_GC_UnTrack(void *op): public C API; ctypes.pythonapi calls it holding the GIL
_gc_untrack = ctypes.pythonapi.PyObject_GC_UnTrack
_gc_untrack.argtypes = [ctypes.py_object]
_gc_untrack.restype = None


def untracked(value: _T) -> _T:
    """``value`` out of the cyclic collector's sight now, rather than when (or if) a
    collection gets to it.

    For a tuple, or an object of a class with ``__slots__``, that nothing it holds
    leads back to: its items atoms (str, bytes, int, float, bool, None), tuples of
    them, or objects that hold no reference to it. Then no cycle runs through it and
    none is lost; reference counting frees it as before. What it holds stays as the
    collector has it.

    Why: the collector untracks a tuple of untracked objects itself, but only in a
    collection that meets the tuple after its items, and it walks reachable objects
    parent first, so a nested tuple (a watch-cache entry holds its attrs, which hold
    its label pairs) is left tracked a level at a time, promoted, and walked by every
    full collection: a census at 100,000 nodes found 441,000 entries still tracked.
    An instance of a class it tracks for as long as it lives (384,000 ``CacheEvent``
    of the event windows)."""
    _gc_untrack(value)
    return value


def untrack_json(value: Any) -> None:
    """Every dict and list of ``value``, parsed JSON, out of the collector's sight.

    The collector never stops tracking a list, nor a dict or tuple that holds a dict
    or list (``_PyObject_GC_MAY_BE_TRACKED`` counts any dict as maybe tracked), so a
    parsed object held for long, an informer's Node or Pod, is walked by every full
    collection: four to nine containers a Node, 400,000 to 900,000 objects at 100,000
    nodes. Parsed JSON cannot hold a cycle (a shared part makes it a DAG, not a loop),
    so out of sight nothing collectable is lost; reference counting still frees it.

    A container already untracked is skipped with what it holds: CPython untracks
    only dicts of atoms, and this function a container after what it holds. A dict
    changed afterwards is tracked again by CPython if what it is given needs it; a
    list is not, which is one more reason (besides sharing) why handlers must not
    change what an informer gives them."""
    kind = type(value)
    if kind is dict:
        for v in value.values():
            if (type(v) is dict or type(v) is list) and gc.is_tracked(v):
                untrack_json(v)
    elif kind is list:
        for v in value:
            if (type(v) is dict or type(v) is list) and gc.is_tracked(v):
                untrack_json(v)
    else:
        return
    _gc_untrack(value)
