"""The raw values of recently written keys, so an update's delta needs no read.

A status update is compressed as a delta against the key's previous version;
that version was usually written moments ago, and keeping its raw bytes here
spares decoding it from the log. Bounded by entries: two plain dicts, the
younger taking every write; when it holds half the capacity it becomes the
older and the older is dropped whole. So between half the capacity and all of
it is kept, the least recently written going first, and a write is one dict
store (a least-recently-used OrderedDict cost three operations a write, 5% of
a Lease renewal, for keys such as 100,000 Leases that come round too rarely to
be found here anyway).

The writer puts and readers get, all on the event loop.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

# (mod_revision, version, raw value)
Recent = tuple[int, int, bytes]


class RecentValues:
    """Each key's entry is its ``Recent`` tuple, or the ``UpdateRun`` (``store.lmdb.writer``)
    that wrote it last: a run's keys are put with one ``dict.update``, no tuple each, and
    its arrays answer for them (the value of ``keys[i]`` at revision ``first + i``)."""

    __slots__ = ("_older", "_younger", "capacity")

    def __init__(self, capacity: int = 16_384) -> None:
        self._younger: dict[bytes, Any] = {}
        self._older: dict[bytes, Any] = {}
        self.capacity = capacity

    def get(self, key: bytes) -> Recent | None:
        r = self._younger.get(key)
        if r is None:
            r = self._older.get(key)
        if r is None or type(r) is tuple:
            return r
        i = len(r.keys) - 1 - r.keys[::-1].index(key)  # the run's last write of it
        return r.first + i, r.entries[i][2], r.values[i]

    def value_at(self, key: bytes, revision: int) -> bytes | None:
        r = self._younger.get(key)
        if r is None:
            r = self._older.get(key)
            if r is None:
                return None
        if type(r) is tuple:
            return r[2] if r[0] == revision else None
        i = revision - r.first
        return r.values[i] if 0 <= i < len(r.keys) and r.keys[i] == key else None

    def put_changes(self, changes: Iterable[Any]) -> None:
        """Each of a committed batch's ``Change``s (or ``UpdateRun``s) in turn: a put's value
        is its key's newest, a delete's key is forgotten."""
        younger, older = self._younger, self._older
        for ch in changes:
            if ch.is_run:
                younger.update(dict.fromkeys(ch.keys, ch))
            elif ch.value is not None:
                younger[ch.key] = (ch.revision, ch.version, ch.value)
            else:
                younger.pop(ch.key, None)
                older.pop(ch.key, None)
        self._age()

    def discard(self, key: bytes) -> None:
        self._younger.pop(key, None)
        self._older.pop(key, None)

    def _age(self) -> None:
        if len(self._younger) >= max(self.capacity // 2, 1):
            self._older, self._younger = self._younger, {}
