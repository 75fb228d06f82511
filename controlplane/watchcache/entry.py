"""What the cache holds per object version, and per event.

An ``Entry`` is one object version as served: its JSON bytes with
``metadata.resourceVersion`` set, made once when the cache applies the store's
event and kept packed (``packing``), plus the attrs filters need. The map,
every snapshot, the event window and every watcher share the same ``Entry``;
nothing re-serialises it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Final

import orjson

from ..api.reads import WatchItem
from ..api.stored import served_form
from ..gcsettings import untracked
from ..registry.attrs import Attrs, attrs_of
from .packing import unpack

__all__ = ["ATTRS", "BODY", "KEY", "REVISION", "CacheEvent", "Entry", "build_entry", "entry_json", "entry_of",
           "exact", "restamped"]


# An entry is a plain tuple ``(key, revision, raw, attrs)``, indexed by these
# names: an exact tuple of bytes, an int and tuples of strings, made untracked
# by the cyclic GC (``untracked``: the GC itself would leave many tracked), and
# so, in turn, are the map's leaves that hold entries (a class instance, a
# NamedTuple or a dict would stay tracked, and every collection would walk the
# whole cache).
#   key       the store key
#   revision  the object's mod_revision: its resourceVersion
#   body      the object's JSON, resourceVersion included, packed (``entry_json`` reads it)
#   attrs     (labels, fields): see registry.attrs
Entry = tuple[bytes, int, bytes, Attrs]
KEY: Final = 0
REVISION: Final = 1
BODY: Final = 2
ATTRS: Final = 3

Pack = Callable[[bytes], bytes]


def exact(raw: bytes) -> bytes:
    """``raw`` copied to its exact size (orjson's output keeps its growth slack)."""
    return bytes(memoryview(raw))


def entry_json(entry: Entry) -> bytes:
    """The JSON an entry serves."""
    return unpack(entry[BODY])


def build_entry(plural: str, key: bytes, value: bytes, revision: int, pack: Pack = exact) -> Entry:
    """The entry of a version read from the store (``value``): its served JSON is the
    stored bytes with the resourceVersion spliced in, as the writer would have made it
    (``prime``), where they are in the stored form; else the object serialised again."""
    obj: dict[str, Any] = orjson.loads(value)
    served = served_form(value, revision)
    if served is None:
        meta = obj.get("metadata")
        if not isinstance(meta, dict):
            meta = obj["metadata"] = {}
        meta["resourceVersion"] = str(revision)
        served = orjson.dumps(obj)
    return untracked((key, revision, pack(served), attrs_of(plural, obj)))


def entry_of(plural: str, key: bytes, revision: int, raw: bytes, obj: dict[str, Any], pack: Pack = exact) -> Entry:
    """The entry of a version whose served JSON (``raw``) the writer already made from ``obj``."""
    return untracked((key, revision, pack(raw), attrs_of(plural, obj)))


_META, _RV = b'"metadata":{', b'"resourceVersion":"'


def restamped(entry: Entry, revision: int, pack: Pack = exact) -> Entry:
    """The same object at another revision: what a DELETED event carries. JSON in the
    served form (``stored.with_resource_version``: metadata the first object in it, its
    resourceVersion the first key) has the number replaced in place, a tenth of the
    cost of a parse and a serialisation (a pod of 4 KB: 1.5 µs against 14); other JSON
    is parsed and serialised again."""
    raw = entry_json(entry)
    brace = raw.find(_META) + len(_META) - 1  # metadata's opening brace
    stamp = _RV + b"%d" % entry[REVISION] + b'"'
    if brace >= len(_META) - 1 and raw.find(b"{", 1) == brace and raw.startswith(stamp, brace + 1):
        served = b"%s%s%d%s" % (raw[:brace + 1], _RV, revision, raw[brace + 1 + len(stamp) - 1:])
    else:
        obj: dict[str, Any] = orjson.loads(raw)
        obj["metadata"]["resourceVersion"] = str(revision)
        served = orjson.dumps(obj)
    return untracked((entry[KEY], revision, pack(served), entry[ATTRS]))


class CacheEvent:
    """One mutation as the cache saw it. ``obj`` is what the event's type sends (the
    new version; for DELETED the last version, at the delete's revision); ``prev``
    the version it replaced, for selector transitions (and what a watcher it leaves
    is sent, ``_json``)."""

    __slots__ = ("_items", "_recent", "obj", "prev", "received", "revision", "size", "type")

    def __init__(self, kind: str, obj: Entry, prev: Entry | None, received: float) -> None:
        self.type = kind  # ADDED, MODIFIED or DELETED
        self.revision = obj[REVISION]
        self.obj = obj
        self.size = len(obj[BODY]) + 200  # the bytes this event keeps alive, roughly
        self.prev = prev
        # time.perf_counter() when the store committed the revision, when it says
        # (this process's LMDB writes), else when its event reached the cache
        self.received = received
        self._items: dict[str, WatchItem] | None = None
        self._recent = True  # its lines are kept once built, until ``forget_lines``
        # out of the cyclic GC's sight: nothing it holds leads back to it, and a window
        # holds up to 100,000 of them a resource, walked by every full collection
        untracked(self)

    def item(self, kind: str) -> WatchItem:
        """The watch line for this event as ``kind`` (a filtered watcher may see a
        MODIFIED as ADDED or DELETED), made once and shared by every watcher while
        the event is recent (``forget_lines``). An older event's line is built for
        the watcher that asks (one resuming, or far behind) and not kept: kept,
        every event a long backlog walk touched held its line until it left the
        window (77,000 lines, 0.7 GB, in the ``million`` load test at 0.05)."""
        if not self._recent:
            return WatchItem.of(kind, self._json(kind))
        items = self._items
        if items is None:
            items = self._items = {}
        got = items.get(kind)
        if got is None:
            got = items[kind] = WatchItem.of(kind, self._json(kind))
        return got

    def _json(self, kind: str) -> bytes:
        """The object ``kind`` sends: an object leaving a watcher's selector (a MODIFIED
        seen as DELETED) is its previous version at this event's revision, as upstream's
        cacheWatcher sends it; otherwise ``obj``."""
        if kind == "DELETED" and self.type != "DELETED" and self.prev is not None:
            return entry_json(restamped(self.prev, self.revision))
        return entry_json(self.obj)

    def forget_lines(self) -> None:
        """Drop the shared watch lines: the unpacked JSON is about ten times the packed
        entry the window keeps, and only watchers far behind (or resuming) still ask.
        For good: a line built later for one of them is not kept either."""
        self._items = None
        self._recent = False

    def age(self) -> float:
        return time.perf_counter() - self.received
