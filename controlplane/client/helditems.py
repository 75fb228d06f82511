"""An informer's objects, the recently written ones parsed and the others packed.

A shared informer holds every pod of the cluster. Parsed, with what pods have in
common shared (``client/sharing.py``), a podgen pod still costs about 7 KB
(``controlplane bench informer``): 7 GB at a million pods, where the watch cache
holds the same pod packed in about 500 bytes. Most of those pods are cold: a
Running pod is read again when it changes (a status write, its deletion), a
few times in its life.

``PackedItems`` is the informer's ``items`` mapping for such collections: the
``hot`` most recently written objects are held parsed, as a plain dict would
hold them; older ones are packed (compact JSON, zstd with a dictionary trained
on the first thousand, ``watchcache.packing.Packer``, the watch cache's own).
Reading a packed one parses it again (a fresh object each time, not shared with
anything: about 15 µs for a 4 KB pod); writing one makes it hot again.

Invariants, kept by every method here: a key is in ``_hot`` or in ``_cold``,
never both; ``_hot`` holds at most ``hot`` objects, the oldest written first.
Iterating walks the keys without parsing; ``values()`` and ``items()`` parse
every packed object (a relist or a late joiner's replay: rare, and as costly as
the list that made them).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator, MutableMapping
from typing import Any

import orjson

from ..gcsettings import untrack_json
from ..watchcache.packing import Packer, unpack

__all__ = ["HOT", "PackedItems"]

Obj = dict[str, Any]
# objects held parsed: the pods being scheduled, started, changed or deleted now (at
# 1,000 pods/s, 20 s of them) and what a component reads again soon after its own write
HOT = 20_000


class PackedItems(MutableMapping[str, Obj]):
    """A mapping of keys to parsed objects that holds all but the ``hot`` newest packed."""

    def __init__(self, hot: int = HOT, packer: Packer | None = None) -> None:
        if hot < 1:
            raise ValueError("hot must be at least 1")
        self.hot = hot
        self._hot: OrderedDict[str, Obj] = OrderedDict()
        self._cold: dict[str, bytes] = {}
        self._packer = packer if packer is not None else Packer()
        self.unpacked = 0  # packed objects parsed again (for tests and benchmarks)

    def __getitem__(self, key: str) -> Obj:
        obj = self._hot.get(key)
        if obj is not None:
            return obj
        body = self._cold[key]
        self.unpacked += 1
        parsed: Obj = orjson.loads(unpack(body))
        untrack_json(parsed)  # as what the informers' transforms return (gcsettings)
        return parsed

    def get(self, key: str, default: Any = None) -> Any:  # (a hot hit without the exception path)
        obj = self._hot.get(key)
        if obj is not None:
            return obj
        if key not in self._cold:
            return default
        return self[key]

    def __setitem__(self, key: str, obj: Obj) -> None:
        hot = self._hot
        if hot.pop(key, None) is None:
            self._cold.pop(key, None)
        hot[key] = obj
        if len(hot) > self.hot:
            old_key, old = hot.popitem(last=False)
            self._cold[old_key] = self._packer.pack(orjson.dumps(old))

    def __delitem__(self, key: str) -> None:
        if self._hot.pop(key, None) is None:
            del self._cold[key]

    def __contains__(self, key: object) -> bool:
        return key in self._hot or key in self._cold

    def __len__(self) -> int:
        return len(self._hot) + len(self._cold)

    def __iter__(self) -> Iterator[str]:
        # a copy of the keys: a handler run during the walk may change the mapping
        return iter([*self._cold, *self._hot])

    @property
    def packed(self) -> int:
        """How many objects are held packed."""
        return len(self._cold)
