"""The in-memory key index: each key's latest record, and the keys in order.

etcd keeps the same structure (``treeIndex``) in memory and rebuilds it from
its log at start; so do we (``LmdbStore`` scans the log at open). Older
versions are reached from the latest record through ``prev_revision`` links in
the log, so the index holds one small tuple per key.

Key order is kept lazily: writes only add a new key to ``_unsorted`` (O(1));
the first range after them merges those into ``_sorted`` (Timsort merges two
sorted runs in linear time). Creates are the hot path and ranges over the
store are rare (the watch cache serves lists), so this beats a balanced tree,
whose every insert costs a few microseconds of byte-string comparisons.

Threads: only the event loop thread mutates the index, and the writer (on the
loop too) reads single entries with ``entries.get``.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator
from typing import Any

# (mod_revision, create_revision, version); a tombstone (deleted key kept until
# compaction, so reads at older revisions can walk back) has create_revision 0.
Entry = tuple[int, int, int]


def is_live(entry: Entry | None) -> bool:
    return entry is not None and entry[1] != 0


# dropped keys the sorted lists may keep before a compaction merges them out (``drop_tombstones_below``)
DEAD_KEYS_KEPT = 1024


class KeyIndex:
    __slots__ = ("entries", "revision", "_sorted", "_unsorted", "_removed")

    def __init__(self, revision: int, entries: dict[bytes, Entry] | None = None) -> None:
        self.entries: dict[bytes, Entry] = entries if entries is not None else {}
        self.revision = revision  # every record up to here is reflected
        self._sorted: list[bytes] = sorted(self.entries)
        self._unsorted: list[bytes] = []
        self._removed = 0  # keys dropped from ``entries`` but still in ``_sorted``

    def __len__(self) -> int:
        return len(self.entries)

    def get(self, key: bytes) -> Entry | None:
        return self.entries.get(key)

    def put(self, key: bytes, entry: Entry) -> None:
        if key not in self.entries:
            self._unsorted.append(key)
        self.entries[key] = entry

    def put_changes(self, changes: Iterable[Any]) -> None:
        """``put`` of each committed ``Change`` (its key's latest record), in one loop; an
        ``UpdateRun``'s entries in one ``dict.update`` (its keys are known already, as an
        update's are: if some were not, every key of the run is listed as new, and the
        next ``_order`` drops the repeats)."""
        entries, unsorted = self.entries, self._unsorted
        for c in changes:
            if c.is_run:
                known = len(entries)
                entries.update(zip(c.keys, c.entries, strict=True))
                if len(entries) != known:
                    unsorted += c.keys
                continue
            key = c.key
            if key not in entries:
                unsorted.append(key)
            entries[key] = (c.revision, c.create_revision, c.version)

    def drop_tombstone(self, key: bytes, revision: int) -> None:
        """Forget ``key`` if its latest record is still the tombstone at ``revision``."""
        e = self.entries.get(key)
        if e is not None and e[0] == revision and e[1] == 0:
            del self.entries[key]
            self._removed += 1

    def drop_tombstones_below(self, revision: int) -> None:
        """Forget deleted keys whose tombstone compaction has removed (reads skip them anyway)."""
        gone = [k for k, e in self.entries.items() if e[1] == 0 and e[0] < revision]
        for k in gone:
            del self.entries[k]
        self._removed += len(gone)
        if self._removed > max(DEAD_KEYS_KEPT, len(self.entries) // 4):
            # the key lists drop dropped keys only when a range reads them (``_order``); a server
            # whose reads the watch cache serves ranges the store rarely, so with churn of new
            # names they kept every key ever created (a soak: one a create). Merged here, at a
            # compaction, once the dead keys are a quarter of the live ones: two sorted runs,
            # near-linear
            self._order()

    def _order(self) -> list[bytes]:
        if self._unsorted or self._removed:
            entries = self.entries
            merged = self._sorted + sorted(self._unsorted)
            merged.sort()
            # a key dropped and re-added is listed twice; a dropped one not at all
            merged = [k for i, k in enumerate(merged) if (i == 0 or merged[i - 1] != k) and k in entries]
            self._sorted = merged
            self._unsorted = []
            self._removed = 0
        return self._sorted

    def range_keys(self, start: bytes, end: bytes, limit: int) -> list[bytes]:
        """Up to ``limit`` keys in ``[start, end)``; ``end == b"\\x00"`` means no upper bound.
        Keys dropped since the last merge may still be listed: check ``entries``."""
        order = self._order()
        i = bisect.bisect_left(order, start)
        j = len(order) if end == b"\x00" else bisect.bisect_left(order, end, i)
        return order[i:min(j, i + limit)]

    def count_at(self, start: bytes, end: bytes, revision: int, limit: int) -> tuple[int, list[bytes], bytes | None]:
        """Of the first ``limit`` keys in ``[start, end)``: how many the index alone shows were
        live at ``revision``, the keys it cannot tell about (changed since ``revision`` and not
        in a life begun by then: their state at ``revision`` is in the log), and where the next
        call goes on from (None: the range is done)."""
        keys = self.range_keys(start, end, limit)
        entries = self.entries
        live = 0
        unsure: list[bytes] = []
        for key in keys:
            e = entries.get(key)
            if e is None:  # dropped since the last merge
                continue
            mod, create, _ = e
            if mod <= revision:  # its latest record is the one visible at ``revision``
                if create:
                    live += 1
            elif 0 < create <= revision:  # a life that had begun by ``revision`` and goes on
                live += 1
            else:  # deleted since, or created since (perhaps after an earlier life)
                unsure.append(key)
        return live, unsure, (keys[-1] + b"\x00" if len(keys) == limit else None)

    def iter_keys(self) -> Iterator[bytes]:
        return iter(self._order())
