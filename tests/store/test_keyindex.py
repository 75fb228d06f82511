"""``store.lmdb.index.KeyIndex``: what it keeps of keys deleted and compacted away."""

from __future__ import annotations

from store.lmdb.index import DEAD_KEYS_KEPT, KeyIndex


def test_compaction_forgets_deleted_keys_even_when_nothing_ranges_the_index() -> None:
    """A server whose reads the watch cache serves ranges the store's index rarely; with churn
    of new names (a create, then a delete, of each) its key lists kept every key ever created
    until a range merged them: a soak's slow leak of one key a create."""
    index = KeyIndex(0)
    revision = 0
    for i in range(10 * DEAD_KEYS_KEPT):
        key = b"/registry/configmaps/ns/c%d" % i
        revision += 1
        index.put(key, (revision, revision, 1))  # created
        revision += 1
        index.put(key, (revision, 0, 0))  # deleted: its tombstone
        if i % DEAD_KEYS_KEPT == 0:
            index.drop_tombstones_below(revision + 1)  # a compaction past it
    index.drop_tombstones_below(revision + 1)
    assert len(index) == 0
    assert len(index._sorted) + len(index._unsorted) <= DEAD_KEYS_KEPT  # not 10,240
    assert index.range_keys(b"/registry/", b"\x00", 10) == []


def test_live_keys_stay_listed_in_order_across_the_merge() -> None:
    index = KeyIndex(0)
    for i in range(3 * DEAD_KEYS_KEPT):
        index.put(b"k%05d" % i, (i + 1, i + 1, 1))
    for i in range(0, 3 * DEAD_KEYS_KEPT, 2):  # every other one deleted
        index.put(b"k%05d" % i, (10**6 + i, 0, 0))
    index.drop_tombstones_below(2 * 10**6)
    assert list(index.iter_keys()) == [b"k%05d" % i for i in range(1, 3 * DEAD_KEYS_KEPT, 2)]
