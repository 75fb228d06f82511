"""What the cache holds per object version, and per event.

An ``Entry`` is one object version as served: its JSON bytes with
``metadata.resourceVersion`` set, made once when the cache applies the store's
event, plus the ``Attrs`` filters need. The map, every snapshot, the event
window and every watcher share the same ``Entry``; nothing re-serialises it.
"""

from __future__ import annotations

import time
from typing import Any, NamedTuple

import orjson

from ..api.reads import WatchItem
from ..registry.attrs import Attrs

__all__ = ["CacheEvent", "Entry"]


class Entry(NamedTuple):
    """Immutable, and small: the key, the revision, the bytes and the attrs."""

    key: bytes
    revision: int  # the object's mod_revision: its resourceVersion
    raw: bytes     # the object's JSON, resourceVersion included
    attrs: Attrs

    @staticmethod
    def build(plural: str, key: bytes, value: bytes, revision: int) -> Entry:
        obj: dict[str, Any] = orjson.loads(value)
        meta = obj.get("metadata")
        if not isinstance(meta, dict):
            meta = obj["metadata"] = {}
        meta["resourceVersion"] = str(revision)
        return Entry(key, revision, orjson.dumps(obj), Attrs.of(plural, obj))

    def restamped(self, revision: int) -> Entry:
        """The same object at another revision: what a DELETED event carries."""
        obj: dict[str, Any] = orjson.loads(self.raw)
        obj["metadata"]["resourceVersion"] = str(revision)
        return Entry(self.key, revision, orjson.dumps(obj), self.attrs)


class CacheEvent:
    """One mutation as the cache saw it. ``obj`` is what the event's type sends (the
    new version; for DELETED the last version, at the delete's revision); ``prev``
    the version it replaced, for selector transitions."""

    __slots__ = ("_items", "obj", "prev", "received", "revision", "type")

    def __init__(self, kind: str, obj: Entry, prev: Entry | None, received: float) -> None:
        self.type = kind  # ADDED, MODIFIED or DELETED
        self.revision = obj.revision
        self.obj = obj
        self.prev = prev
        self.received = received  # time.perf_counter() when the store's event reached the cache
        self._items: dict[str, WatchItem] = {}

    def item(self, kind: str) -> WatchItem:
        """The watch line for this event as ``kind`` (a filtered watcher may see a
        MODIFIED as ADDED or DELETED), made once and shared by every watcher."""
        got = self._items.get(kind)
        if got is None:
            got = self._items[kind] = WatchItem.of(kind, self.obj.raw)
        return got

    @property
    def size(self) -> int:
        return len(self.obj.raw) + 200  # the bytes this event keeps alive, roughly

    def age(self) -> float:
        return time.perf_counter() - self.received
