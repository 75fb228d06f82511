"""The raw values of recently written keys, so an update's delta needs no read.

A status update is compressed as a delta against the key's previous version;
that version was usually written moments ago, and keeping its raw bytes here
spares decoding it from the log. Bounded by entries, least recently written
out first.

The writer puts and readers get, all on the event loop.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from typing import Any

# (mod_revision, version, raw value)
Recent = tuple[int, int, bytes]


class RecentValues:
    __slots__ = ("_values", "capacity")

    def __init__(self, capacity: int = 16_384) -> None:
        self._values: OrderedDict[bytes, Recent] = OrderedDict()
        self.capacity = capacity

    def get(self, key: bytes) -> Recent | None:
        return self._values.get(key)

    def value_at(self, key: bytes, revision: int) -> bytes | None:
        r = self._values.get(key)
        return r[2] if r is not None and r[0] == revision else None

    def put(self, key: bytes, revision: int, version: int, value: bytes) -> None:
        values = self._values
        values[key] = (revision, version, value)
        values.move_to_end(key)
        if len(values) > self.capacity:
            values.popitem(last=False)

    def put_changes(self, changes: Iterable[Any]) -> None:
        """Each of a committed batch's ``Change``s in turn: a put's value is its key's
        newest, a delete's key is forgotten (``put`` and ``discard`` inlined: a call of
        each per write was 3% of a Lease renewal)."""
        values = self._values
        move = values.move_to_end
        for ch in changes:
            if ch.value is not None:
                values[ch.key] = (ch.revision, ch.version, ch.value)
                move(ch.key)
            else:
                values.pop(ch.key, None)
        while len(values) > self.capacity:
            values.popitem(last=False)

    def discard(self, key: bytes) -> None:
        self._values.pop(key, None)
