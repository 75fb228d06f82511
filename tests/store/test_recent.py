"""The store's recent raw values (``store.lmdb.recent``)."""

from __future__ import annotations


def test_recent_values_keep_the_newest_of_each_key_within_their_capacity() -> None:
    from store.lmdb.layout import DELETE, PUT
    from store.lmdb.recent import RecentValues
    from store.lmdb.writer import Change

    recent = RecentValues(capacity=8)
    for i in range(20):  # a batch of one write each
        recent.put_changes([Change(100 + i, PUT, b"k%d" % i, 100 + i, 1, 0, b"v%d" % i)])
    kept = [i for i in range(20) if recent.get(b"k%d" % i) is not None]
    assert 4 <= len(kept) <= 8 and kept == list(range(20 - len(kept), 20))  # the latest written, no gaps
    recent.put_changes([Change(200, PUT, b"k19", 1, 2, 119, b"new"),
                        Change(201, DELETE, b"k18", 0, 0, 118, None)])  # a delete forgets the key
    assert recent.value_at(b"k19", 200) == b"new" and recent.value_at(b"k19", 119) is None
    assert recent.get(b"k18") is None
    recent.discard(b"k19")
    assert recent.get(b"k19") is None


def test_a_run_of_updates_is_kept_as_the_run_and_answers_for_each_of_its_keys() -> None:
    from store.lmdb.layout import DELETE
    from store.lmdb.recent import RecentValues
    from store.lmdb.writer import Change, UpdateRun

    recent = RecentValues(capacity=1000)
    keys = [b"k%d" % i for i in range(5)]
    run = UpdateRun(300, keys, [b"v%d" % i for i in range(5)], [(300 + i, 7, 3) for i in range(5)], [1] * 5)
    recent.put_changes([run])
    assert [recent.value_at(key, 300 + i) for i, key in enumerate(keys)] == [b"v%d" % i for i in range(5)]
    assert recent.value_at(b"k1", 300) is None and recent.value_at(b"k1", 299) is None  # not its revision
    assert recent.get(b"k4") == (304, 3, b"v4")
    recent.put_changes([Change(400, DELETE, b"k2", 0, 0, 302, None)])
    assert recent.get(b"k2") is None and recent.value_at(b"k3", 303) == b"v3"
