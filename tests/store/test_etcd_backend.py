"""What only the etcd backend has: a real etcd under it, shared by several stores.

The shared contract lives in ``test_contract.py``; these tests cover the etcd
side of it: dictionaries shared through etcd, the reserved key prefix, watches
across store instances and across an etcd restart, the compaction point seen
from another store, and how a stopped etcd is reported.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import signal
import uuid
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest
import pytest_asyncio
import zstandard

import store
from controlplane.podgen import PodGenerator
from store.codec import ZSTD_DICT, Codec, CodecConfig
from store.etcd import RESERVED_PREFIX, EtcdStore
from store.etcd.backend import _Gateway, _user_spans
from tests.etcd_server import EtcdCluster, EtcdServer

pytestmark = pytest.mark.asyncio

SMALL_TRAINING = CodecConfig(train_after=200, dict_size=16 * 1024)


@pytest.fixture(scope="module")
def server() -> Iterator[EtcdServer]:
    with EtcdServer() as s:
        yield s


@pytest.fixture
def own_server() -> Iterator[EtcdServer]:
    """An etcd of the test's own, free to be stopped."""
    with EtcdServer() as s:
        yield s


@pytest.fixture
def prefix() -> bytes:
    return f"/t/{uuid.uuid4().hex[:12]}/".encode()


@pytest_asyncio.fixture
async def kv(server: EtcdServer) -> AsyncIterator[EtcdStore]:
    s = EtcdStore([server.endpoint])
    try:
        yield s
    finally:
        await s.close()


def pend(p: bytes) -> bytes:
    return store.prefix_end(p)


def a_dictionary() -> bytes:
    """A real zstd dictionary (the store's module server is shared: no junk in it)."""
    return zstandard.train_dictionary(8192, [v for _, v in PodGenerator(seed=5).pods(200)]).as_bytes()


async def raw_value(server: EtcdServer, key: bytes) -> bytes:
    """What etcd itself holds under ``key``, past the store."""
    async with httpx.AsyncClient(trust_env=False) as c:
        r = await c.post(f"http://{server.endpoint}/v3/kv/range",
                         json={"key": base64.b64encode(key).decode()})
        kvs = r.json().get("kvs", [])
        return base64.b64decode(kvs[0]["value"]) if kvs else b""


async def next_events(w: AsyncIterator[list[store.Event]], n: int, timeout: float = 10.0) -> list[store.Event]:
    out: list[store.Event] = []
    while len(out) < n:
        out.extend(await asyncio.wait_for(w.__anext__(), timeout))
    return out


async def wait_for_dictionary(codec: Codec, prefix: bytes, timeout: float = 30.0) -> int:
    for _ in range(int(timeout / 0.05)):
        dict_id = codec.active_dictionary(prefix)
        if dict_id is not None:
            return dict_id
        await asyncio.sleep(0.05)
    raise AssertionError(f"no dictionary was trained for {prefix!r}")


# -- opening -----------------------------------------------------------------------

async def test_store_open_makes_an_etcd_store(server: EtcdServer) -> None:
    s = store.open(server.url)  # outside any request: the HTTP clients come at first use
    try:
        assert isinstance(s, EtcdStore)
        assert isinstance(s, store.Store)
        assert await s.revision() >= 1
    finally:
        await s.close()


async def test_a_dead_endpoint_is_skipped(server: EtcdServer, prefix: bytes) -> None:
    dead = EtcdServer()  # ports reserved, never started: nothing listens there
    dead.cleanup()
    s = EtcdStore([dead.endpoint, server.endpoint])
    try:
        rev = await s.create(prefix + b"a", b"1")
        assert (await s.get(prefix + b"a")).value == b"1"  # type: ignore[union-attr]
        assert await s.revision() >= rev
    finally:
        await s.close()


# -- compression dictionaries shared through etcd ------------------------------------

async def test_dictionary_trained_by_one_store_serves_another(server: EtcdServer, prefix: bytes) -> None:
    group = b"/registry/" + prefix.strip(b"/").replace(b"/", b"-") + b"/"  # a prefix of the test's own
    pods = PodGenerator(seed=11).pods(400)
    a, b, c, d = (EtcdStore([server.endpoint], codec=Codec(SMALL_TRAINING)) for _ in range(4))
    try:
        # b watches from before anything is written, with a codec that knows no dictionary
        w = b.watch(group, pend(group))
        first = asyncio.ensure_future(w.__anext__())
        await asyncio.sleep(0.2)

        for k, v in pods[:300]:
            await a.create(group + k, v)
        dict_id = await wait_for_dictionary(a.codec, group)
        for k, v in pods[300:]:
            await a.create(group + k, v)

        # what etcd holds for the later writes is compressed with a's dictionary
        frame = await raw_value(server, group + pods[-1][0])
        assert frame[0] == ZSTD_DICT and Codec.frame_dict_id(frame) == dict_id
        assert len(frame) < len(pods[-1][1]) / 2

        # the others learn the dictionary from etcd when a value needs it: d by a read...
        assert not d.codec.has_dictionary(dict_id)
        kvs, _, _ = await d.range(group, pend(group))
        assert {kv.key: kv.value for kv in kvs} == {group + k: v for k, v in pods}
        assert d.codec.has_dictionary(dict_id)
        # ... and b by its watch
        events = list(await first) + await next_events(w, len(pods) - len(await first))
        assert [e.kv.value for e in events] == [v for _, v in pods]
        await w.aclose()  # type: ignore[attr-defined]

        # c loads every stored dictionary before its first write, and compresses with it
        k, v = PodGenerator(seed=12).pods(1)[0]
        await c.create(group + k, v)
        assert c.codec.active_dictionary(group) == dict_id
        assert Codec.frame_dict_id(await raw_value(server, group + k)) == dict_id
        assert (await a.get(group + k)).value == v  # type: ignore[union-attr]
    finally:
        for s in (a, b, c, d):
            await s.close()


async def test_dictionary_ids_are_allocated_without_collisions(server: EtcdServer) -> None:
    a, b = EtcdStore([server.endpoint]), EtcdStore([server.endpoint])
    try:
        ids = await asyncio.gather(*(s._store_dictionary(b"/registry/ids-test/", a_dictionary())
                                     for s in (a, b, a, b)))
        assert len(set(ids)) == 4
    finally:
        await a.close()
        await b.close()


# -- the reserved prefix -------------------------------------------------------------

async def test_user_spans_cut_out_the_reserved_keys() -> None:
    end = pend(RESERVED_PREFIX)
    assert _user_spans(b"/registry/", b"/registry0") == [(b"/registry/", b"/registry0")]
    assert _user_spans(b"/", b"\x00") == [(b"/", RESERVED_PREFIX), (end, b"\x00")]
    assert _user_spans(b"", b"\x00") == [(b"\x00", RESERVED_PREFIX), (end, b"\x00")]
    assert _user_spans(RESERVED_PREFIX + b"x", b"\x00") == [(end, b"\x00")]
    assert _user_spans(RESERVED_PREFIX, end) == []
    assert _user_spans(RESERVED_PREFIX + b"k", b"") == []
    assert _user_spans(b"/a", b"/b") == [(b"/a", b"/b")]


async def test_reserved_keys_are_refused_and_hidden(server: EtcdServer, kv: EtcdStore) -> None:
    reserved = RESERVED_PREFIX + b"mine"
    for call in (kv.create(reserved, b"x"), kv.update(reserved, b"x", 0), kv.delete(reserved),
                 kv.get(reserved)):
        with pytest.raises(store.InvalidRequest):
            await call
    # a dictionary lives there, yet a range over every key does not show it
    await kv._store_dictionary(b"/registry/hidden-test/", a_dictionary())
    kvs, rev, more = await kv.range(b"\x00", b"\x00")
    assert not more and rev == await kv.revision()
    assert not [x for x in kvs if x.key.startswith(RESERVED_PREFIX)]
    assert await kv.range(RESERVED_PREFIX, pend(RESERVED_PREFIX)) == ([], rev, False)


async def test_limits_and_paging_across_the_reserved_gap(kv: EtcdStore) -> None:
    lo, hi = b"/controlplane.stora-" + uuid.uuid4().hex.encode(), b"/controlplane.store0-" + uuid.uuid4().hex.encode()
    await kv.create(lo, b"below")
    await kv._store_dictionary(b"/registry/gap-test/", a_dictionary())
    await kv.create(hi, b"above")
    start, end = lo, hi + b"\x00"
    page1, rev, more = await kv.range(start, end, limit=1)
    assert [x.key for x in page1] == [lo] and more
    page2, rev2, more = await kv.range(lo + b"\x00", end, revision=rev, limit=1)
    assert [x.key for x in page2] == [hi] and rev2 == rev and not more
    both, _, more = await kv.range(start, end, limit=2)
    assert [x.key for x in both] == [lo, hi] and not more


async def test_watch_over_everything_skips_reserved_writes(kv: EtcdStore, prefix: bytes) -> None:
    w = kv.watch(b"/", b"\x00")
    first = asyncio.ensure_future(w.__anext__())
    await asyncio.sleep(0.2)
    await kv._store_dictionary(b"/registry/watch-test/", a_dictionary())
    rev = await kv.create(prefix + b"after", b"x")
    events = await first
    while not [e for e in events if e.kv.key == prefix + b"after"]:
        events.extend(await asyncio.wait_for(w.__anext__(), 10))
    assert not [e for e in events if e.kv.key.startswith(RESERVED_PREFIX)]
    assert [e.revision for e in events if e.kv.key.startswith(prefix)] == [rev]
    await w.aclose()  # type: ignore[attr-defined]


# -- several stores on one etcd --------------------------------------------------------

async def test_watch_sees_writes_of_another_store(server: EtcdServer, prefix: bytes) -> None:
    a, b = EtcdStore([server.endpoint]), EtcdStore([server.endpoint])
    try:
        w = a.watch(prefix, pend(prefix), prev_kv=True)
        first = asyncio.ensure_future(w.__anext__())
        await asyncio.sleep(0.2)
        r1 = await b.create(prefix + b"x", b"one" * 100)
        r2 = await b.update(prefix + b"x", b"two", r1)
        r3 = await b.delete(prefix + b"x")
        events = list(await first)
        events += await next_events(w, 3 - len(events))
        assert [(e.type, e.revision) for e in events] == [
            (store.EventType.PUT, r1), (store.EventType.PUT, r2), (store.EventType.DELETE, r3)]
        assert events[0].kv.value == b"one" * 100 and events[1].prev_kv.value == b"one" * 100  # type: ignore[union-attr]
        assert events[2].kv == store.KeyValue(prefix + b"x", b"", 0, r3, 0)
        await w.aclose()  # type: ignore[attr-defined]
    finally:
        await a.close()
        await b.close()


async def test_watch_from_now_includes_a_write_made_right_after_iteration_begins(kv: EtcdStore,
                                                                                  prefix: bytes) -> None:
    for _ in range(5):  # the watch learns etcd's revision over the network, the write races it
        w = kv.watch(prefix, pend(prefix))
        first = asyncio.ensure_future(w.__anext__())
        await asyncio.sleep(0)  # iteration has begun
        rev = await kv.create(prefix + uuid.uuid4().hex.encode(), b"x")
        assert (await asyncio.wait_for(first, 10))[0].revision == rev
        await w.aclose()  # type: ignore[attr-defined]


async def test_compaction_point_is_seen_by_other_stores(server: EtcdServer, prefix: bytes) -> None:
    a, b = EtcdStore([server.endpoint]), EtcdStore([server.endpoint])
    try:
        revs = [await a.create(prefix + b"%d" % i, b"v") for i in range(20)]
        await a.compact(revs[7])
        assert await a.compacted_revision() == revs[7]
        assert await b.compacted_revision() == revs[7]  # found without a write, by probing reads
        await b.compact(revs[15])
        assert await a.compacted_revision() == revs[15]
        with pytest.raises(store.Compacted) as e:
            await a.get(prefix + b"1", revs[10])
        assert e.value.compacted == revs[15]
        with pytest.raises(store.Compacted) as e:
            await a.compact(revs[12])
        assert e.value.compacted == revs[15]
        w = b.watch(prefix, pend(prefix), revs[3])
        with pytest.raises(store.Compacted) as e:
            await w.__anext__()
        assert e.value.compacted == revs[15]
    finally:
        await a.close()
        await b.close()


# -- etcd going away -----------------------------------------------------------------

async def test_stopped_etcd_is_unavailable_and_the_store_recovers(own_server: EtcdServer, prefix: bytes) -> None:
    s = EtcdStore([own_server.endpoint], timeout=2.0)
    try:
        r1 = await s.create(prefix + b"a", b"1")
        own_server.stop()
        for call in (s.create(prefix + b"b", b"2"), s.update(prefix + b"a", b"2", r1), s.delete(prefix + b"a"),
                     s.get(prefix + b"a"), s.range(prefix, pend(prefix)), s.revision(), s.compact(r1),
                     s.compacted_revision()):
            with pytest.raises(store.Unavailable):
                await call
        own_server.start()
        assert (await s.get(prefix + b"a")).value == b"1"  # type: ignore[union-attr]
        assert await s.create(prefix + b"b", b"2") > r1
    finally:
        await s.close()


async def test_a_write_etcd_leaves_unanswered_has_an_unknown_outcome(own_server: EtcdServer,
                                                                     prefix: bytes) -> None:
    """An etcd that stops answering (SIGSTOP: connections stand, nothing comes back) after a
    write was sent: ``OutcomeUnknown`` (an ``Unavailable``), as the write may yet be applied; a
    read failing so is only ``Unavailable``, and the store answers again once etcd does."""
    s = EtcdStore([own_server.endpoint], timeout=0.5)
    pid = own_server._proc.pid  # type: ignore[union-attr]
    try:
        await s.create(prefix + b"a", b"1")
        os.kill(pid, signal.SIGSTOP)
        try:
            with pytest.raises(store.OutcomeUnknown):
                await s.create(prefix + b"b", b"2")
            with pytest.raises(store.Unavailable) as read:
                await s.get(prefix + b"a")
            assert not isinstance(read.value, store.OutcomeUnknown)
        finally:
            os.kill(pid, signal.SIGCONT)
        assert (await s.get(prefix + b"a")).value == b"1"  # type: ignore[union-attr]
    finally:
        await s.close()


_TIMED_OUT = [(503, {"error": "etcdserver: request timed out", "code": 14,
                     "message": "etcdserver: request timed out"}),
              # a member with no leader to propose to (a lone member of three): gRPC UNKNOWN
              (500, {"error": "context deadline exceeded", "code": 2, "message": "context deadline exceeded"})]


@pytest.mark.parametrize(("status", "body"), _TIMED_OUT, ids=["request-timed-out", "context-deadline"])
@pytest.mark.parametrize(("read", "unknown"), [(False, True), (True, False)])
async def test_etcds_request_timed_out_leaves_a_write_unknown(monkeypatch: pytest.MonkeyPatch, status: int,
                                                               body: dict[str, object], read: bool,
                                                               unknown: bool) -> None:
    """etcd's own timeouts (no quorum in time) come after the proposal was made, or while it
    waited for a leader: a write's outcome is unknown, a read's is not; both are ``Unavailable``."""
    def timed_out(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, json=body)

    gw = _Gateway(["127.0.0.1:2379"], 1.0)
    mocked = httpx.AsyncClient(transport=httpx.MockTransport(timed_out))
    monkeypatch.setattr(gw, "client", lambda: mocked)
    with pytest.raises(store.Unavailable) as e:
        await gw.call("/v3/kv/range" if read else "/v3/kv/txn", {}, read=read)
    assert isinstance(e.value, store.OutcomeUnknown) is unknown
    assert str(body["message"]) in str(e.value)
    await mocked.aclose()


async def test_a_read_refused_for_an_election_waits_for_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """A read answered "leader changed" or "no leader" (an election under way: the leader
    was killed) is asked again, of the next member and then after a pause, as etcd's client
    retries a read refused as UNAVAILABLE, until one answers or the call's time is up; a
    write so refused is not sent again."""
    answers = [(503, {"error": "etcdserver: leader changed", "code": 14, "message": "etcdserver: leader changed"}),
               (503, {"error": "etcdserver: no leader", "code": 14, "message": "etcdserver: no leader"}),
               (200, {"header": {"revision": "7"}, "count": "0"})]
    asked: list[str] = []

    def electing(request: httpx.Request) -> httpx.Response:
        asked.append(str(request.url.port))
        status, body = answers[min(len(asked), len(answers)) - 1]
        return httpx.Response(status, json=body)

    gw = _Gateway(["127.0.0.1:2379", "127.0.0.1:2380"], 1.0)
    mocked = httpx.AsyncClient(transport=httpx.MockTransport(electing))
    monkeypatch.setattr(gw, "client", lambda: mocked)
    assert (await gw.call("/v3/kv/range", {}, read=True))["header"]["revision"] == "7"
    assert asked == ["2379", "2380", "2379"]  # the next member, then a round again
    assert gw.current == 0

    asked.clear()
    answers[2] = answers[0]  # the election never ends: the read fails once its time is up
    started = asyncio.get_running_loop().time()
    with pytest.raises(store.Unavailable, match=r"leader changed|no leader"):
        await gw.call("/v3/kv/range", {}, read=True, timeout=0.3)
    assert asyncio.get_running_loop().time() - started < 1.0 and len(asked) > 2

    asked.clear()
    with pytest.raises(store.Unavailable) as write:
        await gw.call("/v3/kv/txn", {}, read=False)
    assert not isinstance(write.value, store.OutcomeUnknown) and asked == ["2379"]
    await mocked.aclose()


def _leaderless(member: EtcdServer) -> bool:
    with contextlib.suppress(httpx.HTTPError):
        status = httpx.post(f"http://{member.endpoint}/v3/maintenance/status", json={}, timeout=1.0).json()
        return bool(status.get("leader", "0") == "0")
    return False


async def test_a_cluster_without_quorum_leaves_a_write_unknown_until_a_member_returns(prefix: bytes) -> None:
    """Two members of three killed: the one left has no leader and answers a write, after
    etcd's request timeout, with a bare "context deadline exceeded" (HTTP 500 from its
    gateway). That is ``OutcomeUnknown`` (the API's 504 Timeout), not a storage failure (500).
    A member back: the same store writes again, and nothing acknowledged is lost."""
    with EtcdCluster(3) as cluster:
        first, *others = cluster.members
        s = EtcdStore([first.endpoint, *(m.endpoint for m in others)], timeout=9.0)
        try:
            r1 = await s.create(prefix + b"a", b"1")
            for m in others:
                m.kill()
            deadline = asyncio.get_running_loop().time() + 10
            while not await asyncio.to_thread(_leaderless, first):
                assert asyncio.get_running_loop().time() < deadline, "the lone member kept a leader"
                await asyncio.sleep(0.1)
            with pytest.raises(store.OutcomeUnknown) as e:
                await s.create(prefix + b"b", b"2")
            assert "context deadline exceeded" in str(e.value) or "timed out" in str(e.value), e.value
            await asyncio.to_thread(others[0].start)
            assert await s.create(prefix + b"c", b"3") > r1
            assert (await s.get(prefix + b"a")).value == b"1"  # type: ignore[union-attr]
        finally:
            await s.close()


async def test_a_watch_leaves_a_member_that_hangs(prefix: bytes) -> None:
    """The member a watch streams from stops answering (SIGSTOP: its connections stand,
    nothing comes through) while the others go on committing writes: the watch gives that
    stream up once it has been silent for ``watch_idle`` and the member fails a read in as
    long, and reopens on another member, every write delivered once and in order."""
    with EtcdCluster(3) as cluster:
        # a follower hangs (a leader's would take writes away for an election as well)
        leader = cluster.leader()
        hung = cluster.members[(leader + 1) % 3]
        others = [m for m in cluster.members if m is not hung]
        s = EtcdStore([hung.endpoint, *(m.endpoint for m in others)], watch_idle=0.5)
        writer = EtcdStore([m.endpoint for m in others])
        pid = hung._proc.pid  # type: ignore[union-attr]
        try:
            r0 = await writer.create(prefix + b"0", b"0")
            w = s.watch(prefix, pend(prefix), r0)
            assert [e.revision for e in await next_events(w, 1)] == [r0]
            os.kill(pid, signal.SIGSTOP)
            try:
                revs = [await writer.create(prefix + b"%d" % i, b"v") for i in range(1, 4)]
                assert [e.revision for e in await next_events(w, 3, timeout=5)] == revs
            finally:
                os.kill(pid, signal.SIGCONT)
            more = await writer.create(prefix + b"4", b"v")
            assert [e.revision for e in await next_events(w, 1)] == [more]
            await w.aclose()  # type: ignore[attr-defined]
        finally:
            await s.close()
            await writer.close()


async def test_watch_survives_an_etcd_restart_without_gap_or_duplicate(own_server: EtcdServer,
                                                                       prefix: bytes) -> None:
    s = EtcdStore([own_server.endpoint], timeout=20.0)
    try:
        r0 = await s.create(prefix + b"0", b"0")
        w = s.watch(prefix, pend(prefix), r0)
        assert [e.revision for e in await next_events(w, 1)] == [r0]
        own_server.stop()
        await asyncio.sleep(0.3)  # the stream breaks; the watch keeps trying
        own_server.start()
        revs = [await s.create(prefix + b"%d" % i, b"v") for i in range(1, 4)]
        assert [e.revision for e in await next_events(w, 3, timeout=20)] == revs
        await w.aclose()  # type: ignore[attr-defined]
    finally:
        await s.close()


async def test_watch_reports_unavailable_when_etcd_stays_down(own_server: EtcdServer, prefix: bytes) -> None:
    s = EtcdStore([own_server.endpoint], timeout=1.0)
    try:
        w = s.watch(prefix, pend(prefix))
        first = asyncio.ensure_future(w.__anext__())
        await asyncio.sleep(0.2)
        own_server.stop()
        with pytest.raises(store.Unavailable):
            await asyncio.wait_for(first, 15)
    finally:
        await s.close()


async def test_a_watch_passes_on_values_written_past_the_store(server: EtcdServer, kv: EtcdStore,
                                                                 prefix: bytes) -> None:
    """A key another program put into the cluster (``etcdctl put``) holds no store frame: a
    watch over it hands its value over as etcd holds it and goes on, where it used to fail
    with ``CorruptStore`` (and the watch caches' feed, over every key, dropped every cache of
    every replica). A read of the key still says ``CorruptStore``."""
    w = kv.watch(prefix, pend(prefix))
    first = asyncio.ensure_future(next_events(w, 2))
    await asyncio.sleep(0.2)
    async with httpx.AsyncClient(trust_env=False) as c:
        r = await c.post(f"http://{server.endpoint}/v3/kv/put",
                         json={"key": base64.b64encode(prefix + b"foreign").decode(),
                               "value": base64.b64encode(b"bar").decode()})
        assert r.status_code == 200
    rev = await kv.create(prefix + b"own", b"value")
    events = await first
    assert [(e.kv.key, e.kv.value) for e in events] == [(prefix + b"foreign", b"bar"), (prefix + b"own", b"value")]
    assert events[1].revision == rev
    with pytest.raises(store.CorruptStore):
        await kv.get(prefix + b"foreign")
    await w.aclose()  # type: ignore[attr-defined]


async def test_close_ends_watches(kv: EtcdStore, prefix: bytes) -> None:
    w = kv.watch(prefix, pend(prefix))
    waiting = asyncio.ensure_future(w.__anext__())
    await asyncio.sleep(0.2)
    await kv.close()
    with pytest.raises(StopAsyncIteration):
        await asyncio.wait_for(waiting, 5)
    with pytest.raises(store.StoreError):
        await kv.revision()


async def test_largest_value_round_trips(kv: EtcdStore, prefix: bytes) -> None:
    value = os.urandom(store.MAX_VALUE_BYTES)  # incompressible: the frame is one byte larger
    rev = await kv.create(prefix + b"big", value)
    got = await kv.get(prefix + b"big")
    assert got is not None and got.value == value and got.mod_revision == rev
