"""The copy-on-write sorted map: snapshots are O(1), isolated, and equal to a dict at their time."""

from __future__ import annotations

import gc
import random

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from controlplane.watchcache.cowmap import LEAF, CowSortedMap
from controlplane.watchcache.entry import Entry, build_entry


def _key(i: int) -> bytes:
    return b"/registry/pods/ns/p%06d" % i


def test_snapshot_is_isolated_from_later_writes() -> None:
    m: CowSortedMap[int] = CowSortedMap()
    m.load_sorted([(_key(i), i) for i in range(5 * LEAF)])
    view = m.snapshot()
    for i in range(0, 5 * LEAF, 3):
        m.set(_key(i), -i)
    for i in range(1, 5 * LEAF, 7):
        m.delete(_key(i))
    m.set(b"/registry/pods/ns/a-new-one", 1)
    assert [v for _, v in view.items()] == list(range(5 * LEAF))
    assert view.get(_key(3)) == 3
    assert view.get(b"/registry/pods/ns/a-new-one") is None
    assert m.get(_key(3)) == -3
    assert m.get(_key(1)) is None


def test_snapshot_costs_no_copy_and_a_write_copies_one_leaf() -> None:
    m: CowSortedMap[int] = CowSortedMap()
    m.load_sorted([(_key(i), i) for i in range(20 * LEAF)])
    before = list(m._leaves)
    view = m.snapshot()
    assert view._leaves is m._leaves  # nothing copied to take it
    m.set(_key(5), 0)
    changed = [i for i, (a, b) in enumerate(zip(before, m._leaves, strict=True)) if a is not b]
    assert changed == [0]
    assert view._leaves is not m._leaves


def test_range_bounds() -> None:
    m: CowSortedMap[int] = CowSortedMap()
    for i in range(3 * LEAF):
        m.set(_key(i), i)
    view = m.snapshot()
    got = [v for _, v in view.items(_key(LEAF - 2), _key(2 * LEAF + 5))]
    assert got == list(range(LEAF - 2, 2 * LEAF + 5))
    assert [v for _, v in view.items(_key(10), _key(10))] == []
    assert [v for _, v in view.items(b"/registry/pods/ns/q")] == []


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 3 * LEAF)), max_size=2000), st.integers(0, 2**32))
def test_every_snapshot_equals_the_dict_at_its_time(ops: list[tuple[bool, int]], seed: int) -> None:
    rnd = random.Random(seed)
    m: CowSortedMap[int] = CowSortedMap()
    model: dict[bytes, int] = {}
    taken = []
    for n, (put, i) in enumerate(ops):
        if put:
            m.set(_key(i), n)
            model[_key(i)] = n
        else:
            assert m.delete(_key(i)) == model.pop(_key(i), None)
        if rnd.random() < 0.05:
            taken.append((m.snapshot(), sorted(model.items())))
    taken.append((m.snapshot(), sorted(model.items())))
    for view, expected in taken:
        assert list(view.items()) == expected
        assert len(view) == len(expected)
        for k, v in expected[:20]:
            assert view.get(k) == v
        for _ in range(5):  # count agrees with the items in any range
            a, b = sorted((_key(rnd.randrange(3 * LEAF + 2)), _key(rnd.randrange(3 * LEAF + 2))))
            assert view.count(a, b) == sum(1 for k, _ in expected if a <= k < b)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.tuples(st.integers(0, 3 * LEAF), st.booleans()), max_size=600), max_size=8))
def test_apply_many_is_set_and_delete_in_turn(chunks: list[list[tuple[int, bool]]]) -> None:
    """A chunk applied at once leaves the map, and every snapshot taken before, as the
    same writes one by one would (a leaf copied once a chunk is never one a view holds)."""
    m: CowSortedMap[int] = CowSortedMap()
    m.load_sorted([(_key(i), -i) for i in range(0, 3 * LEAF, 2)])
    model = {_key(i): -i for i in range(0, 3 * LEAF, 2)}
    taken = []
    for c, chunk in enumerate(chunks):
        taken.append((m.snapshot(), sorted(model.items())))
        changes = [(_key(i), None if delete else c * 10_000 + n) for n, (i, delete) in enumerate(chunk)]
        m.apply_many(changes)
        for key, value in changes:
            if value is None:
                model.pop(key, None)
            else:
                model[key] = value
        assert list(m.live().items()) == sorted(model.items())
        assert len(m) == len(model)
    for view, expected in taken:
        assert list(view.items()) == expected


def test_apply_many_copies_a_leaf_once_a_chunk() -> None:
    m: CowSortedMap[int] = CowSortedMap()
    m.load_sorted([(_key(i), i) for i in range(4 * LEAF)])
    view = m.snapshot()
    first_leaf = m._leaves[0]
    m.apply_many([(_key(i), -i) for i in range(LEAF // 2)])
    assert m._leaves[0] is not first_leaf and view._leaves[0] is first_leaf
    assert [m.get(_key(i)) for i in range(3)] == [0, -1, -2]
    assert [view.get(_key(i)) for i in range(3)] == [0, 1, 2]
    assert all(a is b for a, b in zip(view._leaves[1:], m._leaves[1:], strict=True))


def test_the_cyclic_gc_stops_tracking_leaves_and_entries() -> None:
    """The cache's bulk must not be walked by every collection (see entry.py)."""
    m: CowSortedMap[Entry] = CowSortedMap()
    pod = {"metadata": {"name": "p", "namespace": "ns", "labels": {"app": "web"}}, "spec": {"nodeName": "n1"}}
    m.load_sorted([(_key(i), build_entry("pods", _key(i), orjson.dumps(pod), i + 1)) for i in range(3 * LEAF)])
    m.set(_key(5), build_entry("pods", _key(5), orjson.dumps(pod), 10_000))
    for _ in range(6):  # one nesting level per pass, at worst
        gc.collect()
    for leaf in m._leaves:
        assert not gc.is_tracked(leaf)
    assert not gc.is_tracked(m.get(_key(5)))


def test_a_sample_spreads_over_the_whole_map() -> None:
    m: CowSortedMap[int] = CowSortedMap()
    assert m.snapshot().sample(8) == []
    m.load_sorted([(_key(i), i) for i in range(40 * LEAF)])
    picked = m.snapshot().sample(8)
    assert len(picked) == 8 and picked == sorted(picked)
    assert picked[0] < 5 * LEAF and picked[-1] >= 35 * LEAF  # from one end to the other
    m.load_sorted([(_key(i), i) for i in range(3 * LEAF)])  # fewer leaves than asked: several from each
    picked = m.snapshot().sample(8)
    assert len(picked) == 8 and len(set(picked)) == 8 and picked[-1] >= 2 * LEAF
    m.load_sorted([(_key(i), i) for i in range(5)])
    assert sorted(m.snapshot().sample(8)) == [0, 1, 2, 3, 4]
