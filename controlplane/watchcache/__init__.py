"""The watch cache: every read of the API served from memory, kept current by the
store's event stream (DESIGN.md, issue 4).

- ``cowmap``: the sorted map with O(1) copy-on-write snapshots.
- ``rwlock``: the cache's lock, with its waits measured.
- ``entry``: an object version as served (bytes made once) and a cache event.
- ``window``: the recent events, for resuming watches.
- ``watchers``: watcher buffers and the index that fans events out.
- ``cache``: one resource's cache (the applier, snapshots, freshness).
- ``feed``: the caches of a server, fed by one watch on the store.
- ``reads``: the API's ``Reads`` served from the caches.
"""

from .cache import CacheConfig, ResourceCache, SnapshotMode
from .feed import WatchCaches
from .reads import CacheReads

__all__ = ["CacheConfig", "CacheReads", "ResourceCache", "SnapshotMode", "WatchCaches"]
