"""A sorted map from ``bytes`` keys with O(1) snapshots: immutable leaves under a
copy-on-write top level.

The map is a two-level tree. The top level is two parallel Python lists: the
first key of every leaf (``firsts``, for ``bisect``) and the leaves. A leaf is
a pair of tuples, its sorted keys and their values (``LEAF`` to ``2 * LEAF`` of
them, fewer only after deletes)::

    firsts: [b"/a", b"/k", b"/t"]
    leaves: [((b"/a", b"/c", ...), (v1, v2, ...)), ((b"/k", ...), (...)), ...]

Leaves are never mutated: a write builds the leaf anew (O(LEAF)). Being tuples
of bytes and of immutable values, CPython's cyclic GC stops tracking them after
one pass, so the bulk of the cache is never traversed by a collection (lists
would be, at every collection of their generation).

``snapshot()`` hands out the current top-level lists as a frozen ``View`` and
starts a new *epoch*; it copies nothing. The invariant that makes this safe:

    top-level lists made in an epoch older than the map's current one may be
    referenced by a ``View`` and are never mutated again.

So the writer copies the top level (``len(leaves)`` pointers: about 4,000 for
a million keys) at its first write of an epoch. A reader walks a ``View``
without any lock while the writer goes on.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from typing import Generic, TypeVar

__all__ = ["LEAF", "CowSortedMap", "View"]

V = TypeVar("V")

LEAF = 256

Leaf = tuple[tuple[bytes, ...], tuple[V, ...]]


class View(Generic[V]):
    """An immutable state of a ``CowSortedMap``: read it from any task, without a lock."""

    __slots__ = ("_firsts", "_leaves", "_size")

    def __init__(self, firsts: list[bytes], leaves: list[Leaf[V]], size: int) -> None:
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
        for keys, values in leaves[i:]:
            j = bisect_left(keys, start) if keys and keys[0] < start else 0
            if end is not None and keys and keys[-1] >= end:
                stop = bisect_left(keys, end)
                yield from zip(keys[j:stop], values[j:stop], strict=True)
                return
            yield from zip(keys[j:], values[j:], strict=True)

    def count(self, start: bytes, end: bytes) -> int:
        """How many keys lie in ``[start, end)``: two bisections per end leaf and the
        sizes of the leaves between (O(leaves), each a C-level ``len``)."""
        firsts, leaves = self._firsts, self._leaves
        if not leaves:
            return 0
        i = max(bisect_right(firsts, start) - 1, 0)
        k = max(bisect_right(firsts, end) - 1, 0)
        first_keys = leaves[i][0]
        if i == k:
            return max(bisect_left(first_keys, end) - bisect_left(first_keys, start), 0)
        head = len(first_keys) - bisect_left(first_keys, start)
        middle = sum([len(keys) for keys, _ in leaves[i + 1:k]])
        return head + middle + bisect_left(leaves[k][0], end)

    def leaf_count(self) -> int:
        return len(self._leaves)

    def sample(self, k: int) -> list[V]:
        """Up to ``k`` values spread over the whole map, in O(k): one from each of ``k``
        evenly spaced leaves, or several from each when there are fewer leaves::

            view.sample(4)  # the middle values of leaves 0, n/4, n/2 and 3n/4
        """
        leaves = self._leaves
        n = len(leaves)
        if n >= k:
            picked = (leaves[i * n // k][1] for i in range(k))
            return [values[len(values) // 2] for values in picked if values]
        out: list[V] = []
        per = -(-k // n) if n else 0
        for _, values in leaves:
            m = len(values)
            take = min(per, m)
            out.extend(values[j * m // take] for j in range(take))
        return out[:k]


def _get(firsts: list[bytes], leaves: list[Leaf[V]], key: bytes) -> V | None:
    i = bisect_right(firsts, key) - 1
    if i < 0:
        return None
    keys, values = leaves[i]
    j = bisect_left(keys, key)
    if j < len(keys) and keys[j] == key:
        return values[j]
    return None


class CowSortedMap(Generic[V]):
    """The writer's side: ``set``, ``delete``, and ``snapshot()`` in O(1).

    Not thread-safe: one writer (the cache's applier) mutates it; readers only
    ever see ``View`` objects."""

    def __init__(self) -> None:
        self._firsts: list[bytes] = []
        self._leaves: list[Leaf[V]] = []
        self._size = 0
        self._epoch = 0       # bumped by snapshot(): the top-level lists are then shared
        self._top_epoch = 0   # the epoch of the current _firsts/_leaves lists

    def __len__(self) -> int:
        return self._size

    def get(self, key: bytes) -> V | None:
        return _get(self._firsts, self._leaves, key)

    def snapshot(self) -> View[V]:
        view = View(self._firsts, self._leaves, self._size)
        self._epoch += 1
        return view

    def live(self) -> View[V]:
        """A view of the current state that is valid only until the next write (the
        copy mode reads it while holding the lock the writer needs)."""
        return View(self._firsts, self._leaves, self._size)

    def load_sorted(self, items: list[tuple[bytes, V]]) -> None:
        """Replace the contents with ``items`` (strictly increasing keys): the initial list."""
        self._epoch += 1
        self._top_epoch = self._epoch
        self._firsts, self._leaves = [], []
        for i in range(0, len(items), LEAF):
            chunk = items[i:i + LEAF]
            self._firsts.append(chunk[0][0])
            self._leaves.append((tuple(k for k, _ in chunk), tuple(v for _, v in chunk)))
        self._size = len(items)

    def _own_top(self) -> None:
        if self._top_epoch != self._epoch:
            self._firsts = self._firsts.copy()
            self._leaves = self._leaves.copy()
            self._top_epoch = self._epoch

    def _put_leaf(self, i: int, keys: tuple[bytes, ...], values: tuple[V, ...]) -> None:
        """Install leaf ``i`` (splitting it if too big, dropping it if empty)."""
        self._own_top()
        if not keys:
            del self._leaves[i]
            del self._firsts[i]
            return
        if len(keys) > 2 * LEAF:
            half = len(keys) // 2
            self._leaves[i] = (keys[:half], values[:half])
            self._firsts[i] = keys[0]
            self._leaves.insert(i + 1, (keys[half:], values[half:]))
            self._firsts.insert(i + 1, keys[half])
            return
        self._leaves[i] = (keys, values)
        self._firsts[i] = keys[0]

    def set(self, key: bytes, value: V) -> V | None:
        """Insert or replace; returns the value replaced, if any."""
        if not self._leaves:
            self._own_top()
            self._firsts.append(key)
            self._leaves.append(((key,), (value,)))
            self._size = 1
            return None
        i = max(bisect_right(self._firsts, key) - 1, 0)
        keys, values = self._leaves[i]
        j = bisect_left(keys, key)
        # a leaf anew through a list: tuple(list) copies half as slowly as slices unpacked into one
        if j < len(keys) and keys[j] == key:
            replaced = list(values)
            replaced[j] = value
            self._put_leaf(i, keys, tuple(replaced))
            return values[j]
        grown_keys, grown_values = list(keys), list(values)
        grown_keys.insert(j, key)
        grown_values.insert(j, value)
        self._put_leaf(i, tuple(grown_keys), tuple(grown_values))
        self._size += 1
        return None

    def apply_many(self, changes: list[tuple[bytes, V | None]]) -> None:
        """Set each ``(key, value)`` in turn, or delete ``key`` where ``value`` is None:
        as ``set`` and ``delete`` one by one, but a leaf whose present keys are replaced is
        copied once for the call, not once a write (a chunk of Lease renewals, sorted,
        falls into a few leaves). The copies are this call's own until installed, so
        writing into them breaks no view; they are installed before any change that
        reshapes the tree (an insert, a delete) and at the end."""
        firsts, leaves = self._firsts, self._leaves
        opened: dict[int, list[V]] = {}  # leaf index -> its values, copied in this call
        for key, value in changes:
            if value is not None and leaves:
                i = max(bisect_right(firsts, key) - 1, 0)
                keys = leaves[i][0]
                j = bisect_left(keys, key)
                if j < len(keys) and keys[j] == key:
                    values = opened.get(i)
                    if values is None:
                        values = opened[i] = list(leaves[i][1])
                    values[j] = value
                    continue
            if opened:
                self._install(opened)
                opened = {}
            if value is None:
                self.delete(key)
            else:
                self.set(key, value)
            firsts, leaves = self._firsts, self._leaves
        if opened:
            self._install(opened)

    def _install(self, opened: dict[int, list[V]]) -> None:
        self._own_top()
        leaves = self._leaves
        for i, values in opened.items():
            leaves[i] = (leaves[i][0], tuple(values))

    def delete(self, key: bytes) -> V | None:
        """Remove ``key``; returns its value, or None if absent."""
        i = bisect_right(self._firsts, key) - 1
        if i < 0:
            return None
        keys, values = self._leaves[i]
        j = bisect_left(keys, key)
        if j >= len(keys) or keys[j] != key:
            return None
        old = values[j]
        keys, values = (*keys[:j], *keys[j + 1:]), (*values[:j], *values[j + 1:])
        self._size -= 1
        if keys and len(keys) < LEAF // 4 and i + 1 < len(self._leaves):
            right_keys, right_values = self._leaves[i + 1]
            self._own_top()
            del self._leaves[i + 1]
            del self._firsts[i + 1]
            keys, values = keys + right_keys, values + right_values
        self._put_leaf(i, keys, values)
        return old
