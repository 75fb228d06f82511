"""Compaction of a store's history on a timer, as kube-apiserver does it.

Every write keeps the version it replaced until the history is compacted, so a
store that is never compacted grows for ever: at 10,000 Lease renewals a second,
by 36 million versions an hour. kube-apiserver compacts etcd every
``--etcd-compaction-interval`` (5 minutes) to the revision it saw at the
previous tick. The history a watch or a paginated list may still ask for is
then between one and two intervals long; older, the answer is 410 Gone, and
clients relist.

Several API servers on one store (``serve --workers``, replicas over etcd)
take turns through one compare-and-swap key, ``compact_rev_key``, as upstream
does: at each tick a server tries to move the key's version on from the value
it saw at its last tick. The one that succeeds compacts; the others learn the
key's version and try again at their next tick. So the store is compacted once
an interval whatever the number of servers, and never to a revision younger
than one interval.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from .errors import Compacted, Conflict, KeyExists, StoreError
from .interface import Store

__all__ = ["COMPACT_REV_KEY", "DEFAULT_INTERVAL", "compact_turn", "run_compactor"]

log = logging.getLogger(__name__)

COMPACT_REV_KEY = b"compact_rev_key"  # outside /registry: no resource's prefix holds it
DEFAULT_INTERVAL = 300.0  # kube-apiserver's --etcd-compaction-interval


async def compact_turn(s: Store, seen_version: int, last_revision: int) -> tuple[int, int]:
    """One tick. ``seen_version``: the key's version at this server's last tick;
    ``last_revision``: the store's revision then (0 at the first tick: nothing is
    compacted at start). Returns the pair for the next tick."""
    kv = await s.get(COMPACT_REV_KEY)
    version = kv.version if kv is not None else 0
    if version == seen_version:
        value = str(last_revision).encode()
        try:
            if kv is None:
                revision = await s.create(COMPACT_REV_KEY, value)
            else:
                revision = await s.update(COMPACT_REV_KEY, value, kv.mod_revision)
        except (KeyExists, Conflict):  # another server took this turn between the read and the write
            kv = await s.get(COMPACT_REV_KEY)
            return (kv.version if kv is not None else 0), await s.revision()
        if last_revision > 0:
            try:
                await s.compact(last_revision)
                log.info("compacted the store's history up to revision %d", last_revision)
            except Compacted:
                pass  # compacted there or further already (by hand, or a server that lost a race)
        return seen_version + 1, revision
    return version, await s.revision()  # another server ticked since ours: it compacts this time


async def run_compactor(s: Store, interval: float = DEFAULT_INTERVAL,
                        on_compacted: Callable[[int], None] | None = None) -> None:
    """Take a turn every ``interval`` seconds until cancelled. After each, ``on_compacted``
    learns the store's compaction point when it has moved, whichever server compacted: as
    upstream's compactor follows ``compact_rev_key`` for its cacher, which then drops its
    snapshots from before it."""
    version, revision, known = 0, 0, 0
    while True:
        await asyncio.sleep(interval)
        try:
            version, revision = await compact_turn(s, version, revision)
            if on_compacted is not None and (point := await s.compacted_revision()) > known:
                known = point
                on_compacted(point)
        except Exception as e:  # (not a cancellation) the next tick tries again: never stop compacting
            log.warning("compacting the store failed: %s", e, exc_info=not isinstance(e, StoreError))
