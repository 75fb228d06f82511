"""The store contract (``store.interface``), checked on every backend.

Each test runs once on LMDB and once on a real etcd server.
"""

from __future__ import annotations

import asyncio
import os
import random

import pytest

import store
from controlplane.podgen import PodGenerator
from store import Event, EventType, KeyValue
from store.bench import has_dictionary

pytestmark = pytest.mark.asyncio


def pend(prefix: bytes) -> bytes:
    return store.prefix_end(prefix)


async def next_events(w: object, n: int, timeout: float = 10.0) -> list[Event]:
    """The next ``n`` events of a watch, whatever lists they come in."""
    out: list[Event] = []
    it = w.__aiter__()  # type: ignore[attr-defined]
    while len(out) < n:
        out.extend(await asyncio.wait_for(it.__anext__(), timeout))
    return out


async def test_revisions_grow_by_one_per_mutation(kv: store.Store, prefix: bytes) -> None:
    r0 = await kv.revision()
    assert r0 >= 1
    r1 = await kv.create(prefix + b"a", b"1")
    r2 = await kv.update(prefix + b"a", b"2", r1)
    r3 = await kv.delete(prefix + b"a")
    assert (r1, r2, r3) == (r0 + 1, r0 + 2, r0 + 3)
    assert await kv.revision() == r3


async def test_key_fields_follow_creates_updates_and_deletes(kv: store.Store, prefix: bytes) -> None:
    k = prefix + b"obj"
    r1 = await kv.create(k, b"v1")
    r2 = await kv.update(k, b"v2", r1)
    assert await kv.get(k) == KeyValue(k, b"v2", r1, r2, 2)
    r3 = await kv.update(k, b"v3", 0)  # 0: unconditional
    assert await kv.get(k) == KeyValue(k, b"v3", r1, r3, 3)
    await kv.delete(k, r3)
    assert await kv.get(k) is None
    r5 = await kv.create(k, b"again")  # a new life starts at version 1
    assert await kv.get(k) == KeyValue(k, b"again", r5, r5, 1)


async def test_create_of_existing_key_raises_key_exists(kv: store.Store, prefix: bytes) -> None:
    await kv.create(prefix + b"a", b"1")
    rev = await kv.revision()
    with pytest.raises(store.KeyExists):
        await kv.create(prefix + b"a", b"2")
    assert await kv.revision() == rev
    assert (await kv.get(prefix + b"a")).value == b"1"  # type: ignore[union-attr]


async def test_update_and_delete_of_missing_key_raise_not_found(kv: store.Store, prefix: bytes) -> None:
    with pytest.raises(store.NotFound):
        await kv.update(prefix + b"nope", b"x", 0)
    with pytest.raises(store.NotFound):
        await kv.update(prefix + b"nope", b"x", 5)
    with pytest.raises(store.NotFound):
        await kv.delete(prefix + b"nope")
    r = await kv.create(prefix + b"gone", b"x")
    await kv.delete(prefix + b"gone", r)
    with pytest.raises(store.NotFound):
        await kv.update(prefix + b"gone", b"y", r)


async def test_stale_expected_revision_raises_conflict(kv: store.Store, prefix: bytes) -> None:
    k = prefix + b"c"
    r1 = await kv.create(k, b"1")
    r2 = await kv.update(k, b"2", r1)
    with pytest.raises(store.Conflict) as e:
        await kv.update(k, b"3", r1)
    assert e.value.actual == r2
    with pytest.raises(store.Conflict):
        await kv.delete(k, r1)
    assert await kv.get(k) == KeyValue(k, b"2", r1, r2, 2)


async def test_update_many_answers_each_update_in_order_with_its_own_revision(kv: store.Store,
                                                                              prefix: bytes) -> None:
    a, b, c = prefix + b"a", prefix + b"b", prefix + b"c"
    ra, rb = await kv.create(a, b"a1"), await kv.create(b, b"b1")
    results = await store.update_many(kv, [(a, b"a2", ra), (b, b"b2", ra), (c, b"c2", 0), (b, b"b3", 0)])
    assert isinstance(results[0], int) and isinstance(results[3], int) and results[0] != results[3]
    # its expected revision is a's; whether b's unconditional update came first is the backend's business
    assert isinstance(results[1], store.Conflict) and results[1].actual in (rb, results[3])
    assert isinstance(results[2], store.NotFound)
    assert (await kv.get(a)) == KeyValue(a, b"a2", ra, results[0], 2)
    assert (await kv.get(b)) == KeyValue(b, b"b3", rb, results[3], 2)  # the failed one wrote nothing
    assert await kv.get(c) is None
    assert await store.update_many(kv, []) == []
    # a value too large fails alone: the others are written
    big = b"x" * (store.MAX_VALUE_BYTES + 1)
    results = await store.update_many(kv, [(a, big, 0), (b, b"b4", 0)])
    assert isinstance(results[0], store.ValueTooLarge) and isinstance(results[1], int)
    assert (await kv.get(b)) is not None and (await kv.get(b)).value == b"b4"  # type: ignore[union-attr]


async def test_reads_at_past_revisions(kv: store.Store, prefix: bytes) -> None:
    k = prefix + b"h"
    revs = [await kv.create(k, b"v0")]
    for i in range(1, 40):  # long enough to cross history keyframes
        revs.append(await kv.update(k, f"v{i}".encode() * (i + 20), revs[-1]))
    rdel = await kv.delete(k)
    for i, r in enumerate(revs):
        got = await kv.get(k, r)
        assert got is not None and got.value == (f"v{i}".encode() * (i + 20) if i else b"v0")
        assert (got.create_revision, got.mod_revision, got.version) == (revs[0], r, i + 1)
    assert await kv.get(k, rdel) is None
    assert await kv.get(k, revs[0] - 1) is None


async def test_revision_ahead_of_the_store_raises_future_revision(kv: store.Store, prefix: bytes) -> None:
    await kv.create(prefix + b"a", b"1")
    with pytest.raises(store.FutureRevision):
        await kv.get(prefix + b"a", await kv.revision() + 1000)


async def test_range_limit_more_and_paging_at_one_revision(kv: store.Store, prefix: bytes) -> None:
    keys = [prefix + f"k{i:03d}".encode() for i in range(25)]
    for k in random.Random(1).sample(keys, len(keys)):
        await kv.create(k, k)
    kvs, rev, more = await kv.range(prefix, pend(prefix), limit=10)
    assert [x.key for x in kvs] == keys[:10] and more
    await kv.create(prefix + b"k0005", b"added after the first page")
    await kv.delete(keys[20])
    seen = list(kvs)
    while more:
        kvs, r, more = await kv.range(seen[-1].key + b"\x00", pend(prefix), revision=rev, limit=10)
        assert r == rev
        seen.extend(kvs)
    assert [x.key for x in seen] == keys  # the whole list as it was at ``rev``
    assert all(x.value == x.key for x in seen)
    now, _, more = await kv.range(prefix, pend(prefix))
    assert len(now) == 25 and not more and prefix + b"k0005" in [x.key for x in now]


async def test_range_at_a_past_revision_sees_deleted_and_old_values(kv: store.Store, prefix: bytes) -> None:
    ra = await kv.create(prefix + b"a", b"a1")
    await kv.create(prefix + b"b", b"b1")
    before = await kv.revision()
    await kv.update(prefix + b"a", b"a2", ra)
    await kv.delete(prefix + b"b")
    await kv.create(prefix + b"c", b"c1")
    old, rev, _ = await kv.range(prefix, pend(prefix), revision=before)
    assert rev == before
    assert [(x.key, x.value) for x in old] == [(prefix + b"a", b"a1"), (prefix + b"b", b"b1")]
    cur, _, _ = await kv.range(prefix, pend(prefix))
    assert [(x.key, x.value) for x in cur] == [(prefix + b"a", b"a2"), (prefix + b"c", b"c1")]


async def test_range_end_conventions(kv: store.Store, prefix: bytes) -> None:
    await kv.create(prefix + b"a", b"1")
    await kv.create(prefix + b"ab", b"2")
    one, _, more = await kv.range(prefix + b"a", b"")
    assert [x.key for x in one] == [prefix + b"a"] and not more
    rest, _, _ = await kv.range(prefix + b"a", b"\x00")  # every key from start on
    assert [x.key for x in rest][:2] == [prefix + b"a", prefix + b"ab"]


async def test_count_is_the_length_of_the_range_at_any_revision(kv: store.Store, prefix: bytes) -> None:
    """``count`` (etcd's count_only range) agrees with ``range`` at every revision of a history of
    creates, updates, deletes and keys made again, from any start: the rest of a list after
    each of its pages, at the first page's revision, however the keys changed since."""
    rnd = random.Random(3)
    names = [prefix + f"k{i:03d}".encode() for i in range(60)]
    revisions = []
    for _ in range(240):
        k = rnd.choice(names)
        try:
            if rnd.random() < 0.3:
                revisions.append(await kv.delete(k))
            else:
                revisions.append(await kv.update(k, b"u", 0))
        except store.NotFound:
            revisions.append(await kv.create(k, b"c"))
    end = pend(prefix)
    for rev in [revisions[0], *rnd.sample(revisions, 6), revisions[-1]]:
        whole, _, _ = await kv.range(prefix, end, revision=rev)
        assert await kv.count(prefix, end, rev) == (len(whole), rev)
        for i in range(0, len(whole), 7):  # the keys after each page of 7, as a paginated list asks
            assert await kv.count(whole[i].key + b"\x00", end, rev) == (len(whole) - i - 1, rev)
        if whole:
            middle = whole[len(whole) // 2].key
            assert (await kv.count(prefix, middle, rev))[0] == len(whole) // 2
    now, at, _ = await kv.range(prefix, end)
    assert await kv.count(prefix, end) == (len(now), at)


async def test_count_end_conventions_and_revision_errors(kv: store.Store, prefix: bytes) -> None:
    r1 = await kv.create(prefix + b"a", b"1")
    await kv.create(prefix + b"ab", b"2")
    rdel = await kv.delete(prefix + b"a")
    assert await kv.count(prefix + b"a", b"") == (0, rdel)  # end b"": the one key
    assert await kv.count(prefix + b"a", b"", r1) == (1, r1)
    assert await kv.count(prefix + b"ab", b"", r1) == (0, r1)
    # b"\x00": every key from start on (other tests' keys too, on a shared etcd): as range says
    rest, _, _ = await kv.range(prefix, b"\x00", revision=rdel)
    assert await kv.count(prefix, b"\x00", rdel) == (len(rest), rdel)
    with pytest.raises(store.FutureRevision):
        await kv.count(prefix, pend(prefix), await kv.revision() + 1000)
    await kv.compact(rdel)
    with pytest.raises(store.Compacted):
        await kv.count(prefix, pend(prefix), r1)
    assert await kv.count(prefix, pend(prefix), rdel) == (1, rdel)


async def test_compaction(kv: store.Store, prefix: bytes) -> None:
    k = prefix + b"x"
    r1 = await kv.create(k, b"1")
    r2 = await kv.update(k, b"2", r1)
    r3 = await kv.update(k, b"3", r2)
    await kv.compact(r2)
    assert await kv.compacted_revision() >= r2
    with pytest.raises(store.Compacted):
        await kv.get(k, r1)
    with pytest.raises(store.Compacted):
        await kv.range(prefix, pend(prefix), revision=r1)
    assert (await kv.get(k, r2)).value == b"2"  # type: ignore[union-attr]
    assert (await kv.get(k, r3)).value == b"3"  # type: ignore[union-attr]
    with pytest.raises(store.Compacted):
        await kv.compact(r1)
    with pytest.raises(store.FutureRevision):
        await kv.compact(await kv.revision() + 100)
    w = kv.watch(prefix, pend(prefix), r1)
    with pytest.raises(store.Compacted):
        await next_events(w, 1)
    w2 = kv.watch(prefix, pend(prefix), r2)  # from the compaction point itself: allowed
    events = await next_events(w2, 2)
    assert [e.kv.mod_revision for e in events] == [r2, r3]
    await w2.aclose()  # type: ignore[attr-defined]


async def test_watch_replays_history_then_follows_live_writes(kv: store.Store, prefix: bytes) -> None:
    r1 = await kv.create(prefix + b"a", b"1")
    r2 = await kv.update(prefix + b"a", b"2", r1)
    r3 = await kv.create(prefix + b"b", b"3")
    w = kv.watch(prefix, pend(prefix), r1)
    got = await next_events(w, 3)
    assert [(e.type, e.kv.key, e.kv.value, e.kv.mod_revision) for e in got] == [
        (EventType.PUT, prefix + b"a", b"1", r1),
        (EventType.PUT, prefix + b"a", b"2", r2),
        (EventType.PUT, prefix + b"b", b"3", r3),
    ]
    writes = [kv.create(prefix + f"live{i}".encode(), b"v") for i in range(50)]
    await asyncio.gather(*writes)
    live = await next_events(w, 50)
    revs = [e.kv.mod_revision for e in live]
    assert revs == sorted(revs) and len(set(revs)) == 50 and revs[0] == r3 + 1
    await w.aclose()  # type: ignore[attr-defined]


async def test_watch_from_now_filters_by_range_and_reports_deletes(kv: store.Store, prefix: bytes) -> None:
    await kv.create(prefix + b"in/old", b"x")
    w = kv.watch(prefix + b"in/", pend(prefix + b"in/"))
    first = asyncio.ensure_future(next_events(w, 2))
    await asyncio.sleep(0.2)  # the watch is established before the writes
    await kv.create(prefix + b"out", b"ignored")
    r = await kv.create(prefix + b"in/new", b"v")
    rd = await kv.delete(prefix + b"in/new", r)
    events = await first
    assert [(e.type, e.kv.key, e.kv.mod_revision) for e in events] == [
        (EventType.PUT, prefix + b"in/new", r), (EventType.DELETE, prefix + b"in/new", rd)]
    assert events[1].kv == KeyValue(prefix + b"in/new", b"", 0, rd, 0)
    await w.aclose()  # type: ignore[attr-defined]


async def test_watch_with_prev_kv(kv: store.Store, prefix: bytes) -> None:
    k = prefix + b"p"
    r1 = await kv.create(k, b"one" * 40)
    r2 = await kv.update(k, b"two" * 40, r1)
    r3 = await kv.delete(k)
    w = kv.watch(prefix, pend(prefix), r1, prev_kv=True)
    e1, e2, e3 = await next_events(w, 3)
    assert e1.prev_kv is None
    assert e2.prev_kv == KeyValue(k, b"one" * 40, r1, r1, 1)
    assert e3.prev_kv == KeyValue(k, b"two" * 40, r1, r2, 2) and e3.kv.mod_revision == r3
    await w.aclose()  # type: ignore[attr-defined]


async def test_concurrent_writers_lose_no_update(kv: store.Store, prefix: bytes) -> None:
    k = prefix + b"counter"
    await kv.create(k, b"0")

    async def incr(times: int) -> int:
        conflicts = 0
        for _ in range(times):
            while True:
                cur = await kv.get(k)
                assert cur is not None
                try:
                    await kv.update(k, str(int(cur.value) + 1).encode(), cur.mod_revision)
                    break
                except store.Conflict:
                    conflicts += 1
        return conflicts

    conflicts = await asyncio.gather(*(incr(15) for _ in range(16)))
    final = await kv.get(k)
    assert final is not None and final.value == b"240" and final.version == 241
    assert sum(conflicts) > 0  # the writers really did race


async def test_values_round_trip_byte_for_byte(kv: store.Store, prefix: bytes) -> None:
    rng = random.Random(7)
    values = [b"", b"\x00", b"\x00\x01\x02\x03", os.urandom(100), b"a" * 10_000,
              os.urandom(300_000), bytes(rng.getrandbits(8) for _ in range(5000)),
              b"\x00" * store.MAX_VALUE_BYTES, os.urandom(store.MAX_VALUE_BYTES)]
    for i, v in enumerate(values):
        await kv.create(prefix + b"v%d" % i, v)
    for i, v in enumerate(values):
        got = await kv.get(prefix + b"v%d" % i)
        assert got is not None and got.value == v, i
    kvs, _, _ = await kv.range(prefix, pend(prefix))
    assert sorted(x.value for x in kvs) == sorted(values)


async def test_oversized_values_and_bad_keys_are_refused_and_write_nothing(kv: store.Store, prefix: bytes) -> None:
    rev = await kv.revision()
    with pytest.raises(store.ValueTooLarge):
        await kv.create(prefix + b"big", b"x" * (store.MAX_VALUE_BYTES + 1))
    await kv.create(prefix + b"small", b"x")
    with pytest.raises(store.ValueTooLarge):
        await kv.update(prefix + b"small", b"x" * (store.MAX_VALUE_BYTES + 1), 0)
    with pytest.raises(store.InvalidRequest):
        await kv.create(b"", b"x")
    with pytest.raises(store.InvalidRequest):
        await kv.create(prefix + b"k" * store.MAX_KEY_BYTES, b"x")
    assert await kv.revision() == rev + 1
    assert await kv.get(prefix + b"big") is None


async def test_realistic_objects_are_compressed_transparently_and_shared(store_url: str, prefix: bytes) -> None:
    """Enough pods to train a dictionary; a second store on the same data reads them all."""
    pods = PodGenerator(seed=3).pods(1500)
    pfx = b"/registry/pods" + prefix
    a = store.open(store_url)
    try:
        sem = asyncio.Semaphore(32)

        async def put(k: bytes, v: bytes) -> None:
            async with sem:
                await a.create(pfx + k, v)
        await asyncio.gather(*(put(k, v) for k, v in pods))
        for _ in range(100):  # training runs in the background
            if await has_dictionary(a, b"/registry/pods/"):
                break
            await asyncio.sleep(0.1)
        assert await has_dictionary(a, b"/registry/pods/")
        more = PodGenerator(seed=4).pods(50)
        for k, v in more:
            await a.create(pfx + k, v)
        expected = {pfx + k: v for k, v in pods + more}
    finally:
        await a.close()
    b = store.open(store_url)  # a fresh process's view: dictionaries come from the store
    try:
        kvs, _, _ = await b.range(pfx, pend(pfx))
        assert {x.key: x.value for x in kvs} == expected
    finally:
        await b.close()
