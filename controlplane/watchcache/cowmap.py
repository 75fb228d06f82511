"""A sorted map from ``bytes`` keys with O(1) snapshots: chunked copy-on-write.

The map is a two-level tree. The top level is two parallel Python lists: the
first key of every leaf (``firsts``, for ``bisect``) and the leaves. A leaf
holds up to ``2 * LEAF`` sorted keys and their values in two parallel lists::

    firsts: [b"/a", b"/k", b"/t"]
    leaves: [Leaf(keys=[b"/a", b"/c", ...]), Leaf(keys=[b"/k", ...]), Leaf(...)]

``snapshot()`` hands out the current top-level lists as a frozen ``View`` and
starts a new *epoch*; it copies nothing. The invariant that makes this safe:

    a list (top level or leaf) whose epoch is older than the map's current
    epoch may be referenced by a ``View`` and is never mutated again.

So the writer copies before it mutates: the top level once per epoch
(``len(leaves)`` pointers: about 2,000 for a million keys) and each leaf it
touches once per epoch (at most ``2 * LEAF`` pointers). A reader walks a
``View`` without any lock while the writer goes on; a ``View`` costs memory
only for the leaves the writer has replaced since it was taken.

Values are opaque to the map (the watch cache stores its entries here).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from typing import Generic, TypeVar

__all__ = ["LEAF", "CowSortedMap", "View"]

V = TypeVar("V")

# Leaves hold LEAF..2*LEAF keys (fewer only for the last ones after deletes);
# 256 keeps a leaf copy around a microsecond and the top level small.
LEAF = 256


class _Leaf(Generic[V]):
    __slots__ = ("epoch", "keys", "values")

    def __init__(self, keys: list[bytes], values: list[V], epoch: int) -> None:
        self.keys = keys
        self.values = values
        self.epoch = epoch  # the epoch in which this leaf's lists were made; see the module docstring


class View(Generic[V]):
    """An immutable state of a ``CowSortedMap``: read it from any task, without a lock."""

    __slots__ = ("_firsts", "_leaves", "_size")

    def __init__(self, firsts: list[bytes], leaves: list[_Leaf[V]], size: int) -> None:
        self._firsts = firsts
        self._leaves = leaves
        self._size = size

    def __len__(self) -> int:
        return self._size

    def get(self, key: bytes) -> V | None:
        return _get(self._firsts, self._leaves, key)

    def items(self, start: bytes = b"", end: bytes | None = None) -> Iterator[tuple[bytes, V]]:
        """``(key, value)`` for keys in ``[start, end)`` in key order (``end=None``: no bound)."""
        firsts, leaves = self._firsts, self._leaves
        i = max(bisect_right(firsts, start) - 1, 0)
        for leaf in leaves[i:]:
            keys, values = leaf.keys, leaf.values
            j = bisect_left(keys, start) if keys and keys[0] < start else 0
            if end is not None and keys and keys[-1] >= end:
                stop = bisect_left(keys, end)
                yield from zip(keys[j:stop], values[j:stop], strict=True)
                return
            yield from zip(keys[j:], values[j:], strict=True)

    def leaf_count(self) -> int:
        return len(self._leaves)


def _get(firsts: list[bytes], leaves: list[_Leaf[V]], key: bytes) -> V | None:
    i = bisect_right(firsts, key) - 1
    if i < 0:
        return None
    leaf = leaves[i]
    j = bisect_left(leaf.keys, key)
    if j < len(leaf.keys) and leaf.keys[j] == key:
        return leaf.values[j]
    return None


class CowSortedMap(Generic[V]):
    """The writer's side: ``set``, ``delete``, and ``snapshot()`` in O(1).

    Not thread-safe: one writer (the cache's applier) mutates it; readers only
    ever see ``View`` objects."""

    def __init__(self) -> None:
        self._firsts: list[bytes] = []
        self._leaves: list[_Leaf[V]] = []
        self._size = 0
        self._epoch = 0       # bumped by snapshot(): everything made before is shared
        self._top_epoch = 0   # the epoch of the current _firsts/_leaves lists

    def __len__(self) -> int:
        return self._size

    def get(self, key: bytes) -> V | None:
        return _get(self._firsts, self._leaves, key)

    def snapshot(self) -> View[V]:
        view = View(self._firsts, self._leaves, self._size)
        self._epoch += 1
        return view

    def load_sorted(self, items: list[tuple[bytes, V]]) -> None:
        """Replace the contents with ``items`` (strictly increasing keys): the initial list."""
        self._epoch += 1
        self._top_epoch = self._epoch
        self._firsts, self._leaves = [], []
        for i in range(0, len(items), LEAF):
            chunk = items[i:i + LEAF]
            self._firsts.append(chunk[0][0])
            self._leaves.append(_Leaf([k for k, _ in chunk], [v for _, v in chunk], self._epoch))
        self._size = len(items)

    # -- copy-on-write ---------------------------------------------------------
    def _own_top(self) -> None:
        if self._top_epoch != self._epoch:
            self._firsts = self._firsts.copy()
            self._leaves = self._leaves.copy()
            self._top_epoch = self._epoch

    def _own_leaf(self, i: int) -> _Leaf[V]:
        leaf = self._leaves[i]
        if leaf.epoch != self._epoch:
            self._own_top()
            leaf = _Leaf(leaf.keys.copy(), leaf.values.copy(), self._epoch)
            self._leaves[i] = leaf
        return leaf

    # -- writes -----------------------------------------------------------------
    def set(self, key: bytes, value: V) -> V | None:
        """Insert or replace; returns the value replaced, if any."""
        if not self._leaves:
            self._own_top()
            self._firsts.append(key)
            self._leaves.append(_Leaf([key], [value], self._epoch))
            self._size = 1
            return None
        i = max(bisect_right(self._firsts, key) - 1, 0)
        probe = self._leaves[i]
        j = bisect_left(probe.keys, key)
        if j < len(probe.keys) and probe.keys[j] == key:
            leaf = self._own_leaf(i)
            old = leaf.values[j]
            leaf.values[j] = value
            return old
        leaf = self._own_leaf(i)
        leaf.keys.insert(j, key)
        leaf.values.insert(j, value)
        self._size += 1
        if j == 0:  # a new smallest key (only possible in leaf 0)
            self._firsts[i] = key
        if len(leaf.keys) > 2 * LEAF:
            self._split(i)
        return None

    def _split(self, i: int) -> None:
        self._own_top()
        leaf = self._leaves[i]
        half = len(leaf.keys) // 2
        right = _Leaf(leaf.keys[half:], leaf.values[half:], self._epoch)
        del leaf.keys[half:]
        del leaf.values[half:]
        self._leaves.insert(i + 1, right)
        self._firsts.insert(i + 1, right.keys[0])

    def delete(self, key: bytes) -> V | None:
        """Remove ``key``; returns its value, or None if absent."""
        i = bisect_right(self._firsts, key) - 1
        if i < 0:
            return None
        probe = self._leaves[i]
        j = bisect_left(probe.keys, key)
        if j >= len(probe.keys) or probe.keys[j] != key:
            return None
        leaf = self._own_leaf(i)
        del leaf.keys[j]
        old = leaf.values.pop(j)
        self._size -= 1
        if not leaf.keys:
            self._own_top()
            del self._leaves[i]
            del self._firsts[i]
            return old
        if j == 0:
            self._firsts[i] = leaf.keys[0]
        if len(leaf.keys) < LEAF // 4 and i + 1 < len(self._leaves):
            self._merge(i)
        return old

    def _merge(self, i: int) -> None:
        """Fold a sparse leaf into its right neighbour (splitting again if too big)."""
        self._own_top()
        leaf = self._own_leaf(i)
        right = self._leaves[i + 1]
        leaf.keys.extend(right.keys)
        leaf.values.extend(right.values)
        del self._leaves[i + 1]
        del self._firsts[i + 1]
        if len(leaf.keys) > 2 * LEAF:
            self._split(i)
