"""The store on a real etcd v3 cluster, through etcd's gRPC JSON gateway.

Every call is one HTTP POST to the gateway (``/v3/kv/...``), whose JSON is
etcd's protobuf messages (``api/etcdserverpb/rpc.proto``) with ``bytes``
base64-encoded and ``int64`` as decimal strings; a field left out is zero. A
watch is one long POST to ``/v3/watch`` whose response streams
newline-delimited ``{"result": WatchResponse}`` objects.

How the contract maps onto etcd::

    create    txn  if create_revision(k) == 0  then put          else -      -> KeyExists
    update    txn  if mod_revision(k) == exp   then put          else range  -> NotFound | Conflict
              (exp 0: if create_revision(k) > 0 then put, else NotFound)
    delete    txn  as update, with delete_range
    get/range range at a revision: etcd's own compaction and future checks
    watch     etcd watch, reopened at the first undelivered revision if the stream breaks
    compact   compaction with physical=true (returns once the old versions are gone)

Reserved keys
    Keys under ``RESERVED_PREFIX`` (``/controlplane.store/``) belong to the
    store: the codec's trained dictionaries live there, so that every process
    and replica on the cluster shares them. Single-key calls on a reserved key
    raise ``InvalidRequest``; ranges and watches skip reserved keys. Storing a
    dictionary is an etcd write, so it takes one revision, like a mutation by
    another client would (once per trained dictionary: rare).

The compaction point
    etcd 3.4 does not expose its compaction revision, but it refuses a read at
    revision ``r`` as compacted exactly when ``r`` is below it. So
    ``compacted_revision()`` searches that predicate, from a lower bound this
    process already knows (its own compactions, refused reads, watch
    cancellations) up to the current revision: one read when nothing changed,
    about log2(revision) reads after another process compacted. It writes
    nothing, so any number of processes agree.

Request size
    etcd refuses requests above ``--max-request-bytes`` (1.5 MiB by default). A
    value of ``MAX_VALUE_BYTES`` that does not compress gains a frame byte, the
    key and the txn around it, so run etcd with ``--max-request-bytes`` of at
    least 1.6 MiB (``tests/etcd_server.py`` does).
"""

from __future__ import annotations

import asyncio
import binascii
import contextlib
import logging
import struct
import time
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

import httpx
import orjson
import zstandard

from ..codec import Codec, UnknownDictionary
from ..errors import (
    Compacted,
    Conflict,
    CorruptStore,
    FutureRevision,
    InvalidRequest,
    KeyExists,
    NotFound,
    OutcomeUnknown,
    StorageFull,
    StoreError,
    Unavailable,
    ValueTooLarge,
)
from ..interface import MAX_KEY_BYTES, MAX_VALUE_BYTES, Event, EventType, KeyValue, prefix_end
from .transport import GatewayTransport

__all__ = ["RESERVED_PREFIX", "EtcdStore"]

log = logging.getLogger(__name__)

RESERVED_PREFIX = b"/controlplane.store/"
_RESERVED_END = prefix_end(RESERVED_PREFIX)

# One key per dictionary: the id as 10 decimal digits (every u32 fits, and key
# order is id order), so "the highest id" is one reverse range of limit 1.
#   value = prefix length: u32 BE | prefix | zstd dictionary bytes
_DICT_PREFIX = RESERVED_PREFIX + b"codec/dict/"
_DICT_END = prefix_end(_DICT_PREFIX)
_PREFIX_LEN = struct.Struct(">I")
_MAX_DICT_ID = 2**32 - 1

# Never written: reading it is the cheapest way to ask for a revision, or to
# learn whether a revision is compacted.
_PROBE_KEY = RESERVED_PREFIX + b"probe"

# Compressing a value this large takes milliseconds: do it off the event loop.
_THREAD_ENCODE_BYTES = 256 * 1024
# Batches a watch's reader may run ahead of its consumer before it stops reading
# the stream (then etcd buffers, and catches the watch up from history if need be).
_WATCH_QUEUE = 256
# A watch stream silent this long has its member asked, with a read of its own that must
# answer within the same time, whether it still serves: a member that hangs (a paused VM,
# SIGSTOP, a dead link whose connections stand) or has lost its leader would otherwise
# hold every watch on it silent for as long as that lasts. kube-apiserver's etcd client
# notices the first by its gRPC keepalive (30 s, then 10 s for the answer) and the second
# by watching with WithRequireLeader; both then reopen the watch on another member.
_WATCH_IDLE = 5.0
_CONNECTIONS = 128
_HEADERS = {"content-type": "application/json", "accept-encoding": "identity"}


def _b64(data: bytes) -> str:
    return binascii.b2a_base64(data, newline=False).decode("ascii")


_unb64 = binascii.a2b_base64
_PROBE = _b64(_PROBE_KEY)


def _revision(answer: dict[str, Any]) -> int:
    return int(answer["header"].get("revision", 0))


def _dict_key(dict_id: int) -> bytes:
    return _DICT_PREFIX + b"%010d" % dict_id


def _check_key(key: bytes | bytearray | memoryview) -> bytes:
    if not isinstance(key, bytes):
        key = bytes(key)
    if not key or len(key) > MAX_KEY_BYTES:
        raise InvalidRequest(f"key must be 1 to {MAX_KEY_BYTES} bytes, got {len(key)}")
    if key.startswith(RESERVED_PREFIX):
        raise InvalidRequest(f"keys under {RESERVED_PREFIX!r} are reserved for the store: {key!r}")
    return key


def _check_value(value: bytes | bytearray | memoryview) -> bytes:
    if not isinstance(value, bytes):
        value = bytes(value)
    if len(value) > MAX_VALUE_BYTES:
        raise ValueTooLarge(len(value), MAX_VALUE_BYTES)
    return value


def _user_spans(start: bytes, end: bytes) -> list[tuple[bytes, bytes]]:
    """``[start, end)`` less the reserved keys, as etcd (key, range_end) pairs.

    >>> _user_spans(b"/registry/", b"/registry0")
    [(b'/registry/', b'/registry0')]
    >>> _user_spans(b"/", b"\\x00")
    [(b'/', b'/controlplane.store/'), (b'/controlplane.store0', b'\\x00')]
    """
    if end == b"":
        return [] if start.startswith(RESERVED_PREFIX) else [(start, b"")]
    start = start or b"\x00"  # etcd wants a key; no key sorts below this one
    unbounded = end == b"\x00"
    if start >= _RESERVED_END or (not unbounded and end <= RESERVED_PREFIX):
        return [(start, end)]
    spans = []
    if start < RESERVED_PREFIX:
        spans.append((start, RESERVED_PREFIX))
    if unbounded or end > _RESERVED_END:
        spans.append((max(start, _RESERVED_END), end))
    return spans


# -- the JSON gateway ------------------------------------------------------------

class _RevisionCompacted(StoreError):
    """etcd's ErrCompacted; the caller knows which revision it asked for."""


class _RevisionInFuture(StoreError):
    """etcd's ErrFutureRev; the caller knows which revision it asked for."""


class _Electing(StoreError):
    """Every member that answered a read refused it for an election under way."""


class _StreamBroken(StoreError):
    """A watch stream ended or failed; the watch reopens it."""


_UNAVAILABLE_CODES = {4, 10, 14}  # gRPC DEADLINE_EXCEEDED, ABORTED, UNAVAILABLE
_UNAVAILABLE_MESSAGES = ("no leader", "timed out", "leader changed", "not capable", "stopped",
                         "too many requests", "server is not ready", "context deadline exceeded")
# A write answered so was proposed, or waited to be, until etcd's request timeout: it may
# still be committed. etcd 3.4 says "etcdserver: request timed out" (gRPC UNAVAILABLE, HTTP
# 503) when the proposal was made and no quorum committed it in time, and a bare "context
# deadline exceeded" (gRPC UNKNOWN, HTTP 500) when its member had no leader to propose to
# for that long, as a lone member left of three has.
_TIMED_OUT_MESSAGES = ("timed out", "context deadline exceeded")
# A read refused so meets an election under way: another member, or the same a moment
# later, answers it (etcd's ErrLeaderChanged and ErrNoLeader, gRPC UNAVAILABLE).
_ELECTING_MESSAGES = ("leader changed", "no leader")


def _gateway_error(status: int, body: dict[str, Any], text: str) -> StoreError:
    message = str(body.get("message") or body.get("error") or text or f"HTTP {status}")
    code = body.get("code")
    if "required revision has been compacted" in message:
        return _RevisionCompacted(message)
    if "required revision is a future revision" in message:
        return _RevisionInFuture(message)
    if "request is too large" in message:
        return InvalidRequest(f"etcd refused the request as too large ({message}): "
                              "run etcd with --max-request-bytes of at least 1.6 MiB")
    if "database space exceeded" in message:  # (etcd's words name it: "etcdserver: mvcc: ...")
        return StorageFull(message)
    if code in _UNAVAILABLE_CODES or status in (502, 503, 504) \
            or any(m in message for m in _UNAVAILABLE_MESSAGES):
        return Unavailable(f"etcd: {message}")
    if code == 3:  # INVALID_ARGUMENT
        return InvalidRequest(f"etcd: {message}")
    return StoreError(f"etcd answered HTTP {status}: {message}")


def _answer(resp: httpx.Response) -> dict[str, Any]:
    try:
        body = orjson.loads(resp.content)
    except orjson.JSONDecodeError:
        body = None
    if resp.status_code == 200 and isinstance(body, dict):
        return body
    raise _gateway_error(resp.status_code, body if isinstance(body, dict) else {}, resp.text[:200])


class _Gateway:
    """POSTs to one cluster's gateways, moving to the next member when one is down.

    A request goes to the next member only when it cannot have reached etcd
    (no connection) or cannot change anything (a read). A write that failed
    midway has an unknown outcome: that is ``OutcomeUnknown``, never a silent
    second attempt that could apply it twice.
    """

    def __init__(self, endpoints: list[str], timeout: float) -> None:
        self.bases = [(e if "://" in e else "http://" + e).rstrip("/") for e in endpoints]
        for base in self.bases:
            httpx.URL(base)  # a malformed endpoint fails here, not at the first call
        self.timeout = timeout
        self.current = 0  # the member that answered last: first in line for the next call
        self._loop: asyncio.AbstractEventLoop | None = None
        self._client: httpx.AsyncClient | None = None
        self._streams: httpx.AsyncClient | None = None
        self._urls: dict[tuple[int, str], httpx.URL] = {}
        self._timeouts = httpx.Timeout(timeout).as_dict()

    def _check_loop(self) -> None:
        # httpx's connections belong to the event loop that opened them; a new
        # loop (a test's, say) gets new clients instead of broken ones.
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            self._loop = loop
            self._client = self._streams = None

    def client(self) -> httpx.AsyncClient:
        self._check_loop()
        if self._client is None:
            self._client = httpx.AsyncClient(
                transport=GatewayTransport(max_connections=_CONNECTIONS), timeout=self.timeout,
                headers=_HEADERS, trust_env=False)
        return self._client

    def stream_client(self) -> httpx.AsyncClient:
        # Watches hold their connection for their whole life: connections of their
        # own, without a cap, keep them from starving ordinary calls.
        self._check_loop()
        if self._streams is None:
            self._streams = httpx.AsyncClient(
                transport=GatewayTransport(max_connections=None, live_bodies=True),
                timeout=httpx.Timeout(self.timeout, read=None), headers=_HEADERS, trust_env=False)
        return self._streams

    async def call(self, path: str, body: dict[str, Any], *, read: bool,
                   timeout: float | None = None) -> dict[str, Any]:
        """One call, on the member that answered last, else on the next ones. A read a
        member refuses for an election under way ("leader changed", "no leader") goes on to
        the next member, and round again after a pause while the call's time lasts, as
        etcd's client retries a read refused as UNAVAILABLE: a leader's failure delays a
        read by the election (a second or two) rather than failing it."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (self.timeout if timeout is None else timeout)
        pause = 0.05
        while True:
            try:
                return await self._round(path, body, read=read, timeout=timeout)
            except _Electing as e:
                if loop.time() + pause >= deadline:
                    raise Unavailable(str(e)) from e
                await asyncio.sleep(pause)
                pause = min(pause * 2, 0.5)

    async def _round(self, path: str, body: dict[str, Any], *, read: bool,
                     timeout: float | None) -> dict[str, Any]:
        client = self.client()
        content = orjson.dumps(body)
        limits = self._timeouts if timeout is None else httpx.Timeout(timeout).as_dict()
        n = len(self.bases)
        first = self.current
        failure: Exception | None = None
        electing: Unavailable | None = None
        for i in range(n):
            index = (first + i) % n
            url = self._urls.get((index, path))
            if url is None:
                url = self._urls[(index, path)] = httpx.URL(self.bases[index] + path)
            try:
                # a Request of a parsed URL skips the client's URL and header merging,
                # a quarter of its cost per call
                resp = await client.send(httpx.Request("POST", url, headers=_HEADERS, content=content,
                                                       extensions={"timeout": limits}))
            except httpx.PoolTimeout as e:
                raise Unavailable(f"no free connection to etcd within {self.timeout}s") from e
            except (httpx.ConnectError, httpx.ConnectTimeout) as e:
                failure = e
                continue
            except httpx.HTTPError as e:
                if read:
                    failure = e
                    continue
                raise OutcomeUnknown(f"etcd at {self.bases[index]} failed during a write, whose outcome "
                                     f"is unknown: {e!r}") from e
            if read:
                try:
                    answer = _answer(resp)
                except Unavailable as e:
                    if not any(m in str(e) for m in _ELECTING_MESSAGES):
                        raise
                    electing = e
                    continue
                self.current = index
                return answer
            self.current = index
            try:
                return _answer(resp)
            except Unavailable as e:
                # etcd's ErrTimeout family ("request timed out", "... possibly due to previous
                # leader failure") and its leaderless deadline: see _TIMED_OUT_MESSAGES
                if any(m in str(e) for m in _TIMED_OUT_MESSAGES):
                    raise OutcomeUnknown(f"{e}: the write's outcome is unknown") from e
                raise
        if electing is not None:
            raise _Electing(str(electing)) from electing
        raise Unavailable(f"no etcd member answered ({', '.join(self.bases)}): {failure!r}") from failure

    async def serves(self, index: int, timeout: float) -> bool:
        """Whether member ``index`` answers a linearizable read within ``timeout``: it runs,
        and has a leader and a quorum behind it."""
        url = httpx.URL(self.bases[index] + "/v3/kv/range")
        body = orjson.dumps({"key": _PROBE, "count_only": True})
        try:
            resp = await self.client().send(httpx.Request(
                "POST", url, headers=_HEADERS, content=body,
                extensions={"timeout": httpx.Timeout(timeout).as_dict()}))
        except httpx.HTTPError:
            return False
        return resp.status_code == 200

    def leave(self, index: int) -> None:
        """Member ``index`` failed: the next call starts with the one after it."""
        if self.current == index:
            self.current = (index + 1) % len(self.bases)

    async def stream(self, path: str, body: dict[str, Any],
                     index: int | None = None) -> AsyncGenerator[dict[str, Any], None]:
        """The messages of one streaming call, on member ``index`` (the current one by
        default); any failure is ``_StreamBroken`` (and a connection failure moves to the
        next member)."""
        client = self.stream_client()
        if index is None:
            index = self.current
        base = self.bases[index]
        try:
            async with client.stream("POST", base + path, content=orjson.dumps(body)) as resp:
                if resp.status_code != 200:
                    await resp.aread()
                    raise _StreamBroken(str(_answer(resp)))
                pending = bytearray()
                async for chunk in resp.aiter_bytes():
                    pending += chunk
                    done = 0
                    while (newline := pending.find(b"\n", done)) >= 0:
                        line = pending[done:newline]
                        done = newline + 1
                        if line.strip():
                            yield orjson.loads(line)
                    del pending[:done]
                if pending.strip():
                    yield orjson.loads(pending)
        except (httpx.ConnectError, httpx.ConnectTimeout) as e:
            self.leave(index)
            raise _StreamBroken(f"cannot connect to etcd at {base}: {e!r}") from e
        except httpx.HTTPError as e:
            raise _StreamBroken(f"watch stream from {base} failed: {e!r}") from e
        except orjson.JSONDecodeError as e:
            raise _StreamBroken(f"watch stream from {base} sent something that is not JSON: {e}") from e

    async def aclose(self) -> None:
        clients = [c for c in (self._client, self._streams) if c is not None]
        self._client = self._streams = None
        if self._loop is not asyncio.get_running_loop():
            return  # they belong to a loop that is gone: nothing left to close from here
        for c in clients:
            await c.aclose()


# -- watches ---------------------------------------------------------------------

_END = object()  # queued when the store closes: the consumer's iteration ends


class _Watch:
    """The etcd side of one ``watch()``: a task that reads the gateway's stream
    into a queue the consumer drains.

    ``next_rev`` is the first revision not yet handed to the consumer. When the
    stream breaks (member restart, failover) the task reopens it at ``next_rev``,
    so each revision is delivered once and in order; etcd itself delivers one
    stream in revision order without gaps.
    """

    def __init__(self, store: EtcdStore, start: bytes, end: bytes, next_rev: int, prev_kv: bool) -> None:
        self.store = store
        request: dict[str, Any] = {"key": _b64(start or b"\x00"), "prev_kv": prev_kv}
        if end:
            request["range_end"] = _b64(end)
        self.request = request
        self.filter_reserved = _user_spans(start, end) != [(start or b"\x00", end)]
        self.next_rev = next_rev
        self.queue: asyncio.Queue[Any] = asyncio.Queue(_WATCH_QUEUE)
        self.task: asyncio.Task[None] | None = None
        self.created = False
        self.heard = 0.0  # when the stream last brought anything (monotonic)
        self.own_writes: list[asyncio.Future[int]] = []  # see EtcdStore._starting
        self.stopped = False

    def stop(self) -> None:
        self.stopped = True
        if self.task is not None:
            self.task.cancel()
        with contextlib.suppress(asyncio.QueueFull):
            # wakes a consumer waiting on the queue; a full queue means none is
            # waiting, and the next call sees ``stopped`` first
            self.queue.put_nowait(_END)

    async def run(self) -> None:
        try:
            if self.next_rev == 0:
                self.next_rev = await self._first_revision()
            failing_since: float | None = None
            delay = 0.05
            while True:
                try:
                    await self._follow()
                    reason = "etcd ended the watch stream"
                except (_StreamBroken, Unavailable) as e:
                    reason = str(e)
                if self.created:  # the stream worked for a while: a fresh failure
                    self.created = False
                    failing_since, delay = None, 0.05
                now = time.monotonic()
                if failing_since is None:
                    failing_since = now
                elif now - failing_since > self.store.timeout:
                    raise Unavailable(f"watch could not reach etcd for {self.store.timeout}s: {reason}")
                log.debug("watch stream broke (%s); reopening at revision %d", reason, self.next_rev)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)
        except asyncio.CancelledError:
            raise
        except Exception as e:  # the consumer re-raises it; a bug must not look like a quiet watch
            await self.queue.put(e)

    async def _first_revision(self) -> int:
        """The revision after etcd's current one, or the store's first write since
        iteration began if that is older (etcd committed it before our read)."""
        try:
            current = await self.store.revision()
        finally:
            self.store._started(self.own_writes)
        own = [r for r in await asyncio.gather(*self.own_writes) if r]
        return min([current + 1, *own])

    async def _follow(self) -> None:
        """One stream, read by a task of its own while this one watches over it: when it
        has been silent for ``EtcdStore.watch_idle`` and its member does not answer a read in as
        long, the stream is given up (``_StreamBroken``) and the member left."""
        gw, idle = self.store._gw, self.store.watch_idle
        index = gw.current
        self.heard = time.monotonic()
        reader = asyncio.get_running_loop().create_task(self._read(index))
        try:
            while True:
                done, _ = await asyncio.wait([reader], timeout=idle)
                if done:
                    return reader.result()
                if time.monotonic() - self.heard < idle or await gw.serves(index, idle):
                    continue
                if reader.done():  # it ended while the member was being asked
                    return reader.result()
                gw.leave(index)
                raise _StreamBroken(f"etcd at {gw.bases[index]} left the watch silent and did not answer a "
                                    f"read in {idle:g}s")
        finally:
            if not reader.done():
                reader.cancel()
                await asyncio.wait([reader])

    async def _read(self, index: int) -> None:
        body = {"create_request": dict(self.request, start_revision=self.next_rev)}
        async with contextlib.aclosing(self.store._gw.stream("/v3/watch", body, index)) as messages:
            async for message in messages:
                self.heard = time.monotonic()
                result = message.get("result")
                if result is None:
                    raise _StreamBroken(f"etcd watch error: {message.get('error', message)}")
                if result.get("created"):
                    self.created = True
                raw = result.get("events")
                if raw:
                    batch = await self.store._events(raw, self.next_rev, self.filter_reserved)
                    self.next_rev = max(self.next_rev, int(raw[-1]["kv"]["mod_revision"]) + 1)
                    if batch:
                        await self.queue.put(batch)
                if result.get("canceled"):
                    compacted = int(result.get("compact_revision", 0))
                    if compacted:
                        self.store._raise_compact_floor(compacted)
                        raise Compacted(self.next_rev, compacted)
                    raise _StreamBroken(f"etcd canceled the watch: {result.get('cancel_reason', '')}")


# -- the store -------------------------------------------------------------------

class EtcdStore:
    """The store on an etcd v3 cluster: ``EtcdStore(["127.0.0.1:2379", ...])``.

    Safe to create outside an event loop (``store.open`` is synchronous): the
    HTTP clients are made at first use, in the loop that uses them.
    """

    def __init__(self, endpoints: list[str] | str, codec: Codec | None = None, timeout: float = 10.0,
                 watch_idle: float = _WATCH_IDLE) -> None:
        if isinstance(endpoints, str):
            endpoints = [e.strip() for e in endpoints.split(",") if e.strip()]
        if not endpoints:
            raise ValueError("EtcdStore needs at least one endpoint, HOST:PORT")
        self.endpoints = list(endpoints)
        self.codec = codec or Codec()
        self.timeout = timeout
        self.watch_idle = watch_idle  # see _WATCH_IDLE
        self._gw = _Gateway(self.endpoints, timeout)
        # One list per watch that is fixing its start (start_revision=0): every write
        # issued meanwhile adds a future of its revision (0 if it failed), so the
        # watch includes the writes its caller made after it began iterating.
        self._starting: list[list[asyncio.Future[int]]] = []
        self._compact_floor = 0   # etcd's compaction point is known to be at or above this
        self._dicts_loaded = False
        self._dicts_loading: asyncio.Task[None] | None = None
        self._training: set[bytes] = set()   # prefixes with a training task under way
        self._tasks: set[asyncio.Task[None]] = set()
        self._watches: set[_Watch] = set()
        self._foreign = 0  # values a watch met that the store did not write (see _event_kv)
        self._closed = False

    def __repr__(self) -> str:
        return f"EtcdStore({self.endpoints!r})"

    # -- plumbing --------------------------------------------------------------
    async def _call(self, path: str, body: dict[str, Any], *, read: bool,
                    timeout: float | None = None) -> dict[str, Any]:
        if self._closed:
            raise StoreError("store is closed")
        return await self._gw.call(path, body, read=read, timeout=timeout)

    async def _txn(self, compare: dict[str, Any], success: dict[str, Any],
                   failure: dict[str, Any] | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"compare": [compare], "success": [success]}
        if failure is not None:
            body["failure"] = [failure]
        if not self._starting:
            return await self._call("/v3/kv/txn", body, read=False)
        done: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        for waiting in self._starting:
            waiting.append(done)
        revision = 0
        try:
            answer = await self._call("/v3/kv/txn", body, read=False)
            if answer.get("succeeded"):
                revision = _revision(answer)
            return answer
        finally:
            done.set_result(revision)

    async def _range(self, body: dict[str, Any], revision: int) -> dict[str, Any]:
        """A range request, with etcd's revision errors made the store's."""
        try:
            return await self._call("/v3/kv/range", body, read=True)
        except _RevisionCompacted:
            raise await self._compacted_error(revision) from None
        except _RevisionInFuture:
            raise FutureRevision(revision, await self.revision()) from None

    def _started(self, own_writes: list[asyncio.Future[int]]) -> None:
        # by identity: every empty list is equal to every other
        self._starting = [w for w in self._starting if w is not own_writes]

    def _raise_compact_floor(self, revision: int) -> None:
        if revision > self._compact_floor:
            self._compact_floor = revision

    async def _compacted_error(self, revision: int) -> Compacted:
        self._raise_compact_floor(revision + 1)  # refused at `revision`: the point lies above it
        return Compacted(revision, await self.compacted_revision())

    # -- values ----------------------------------------------------------------
    def _kv(self, d: dict[str, Any]) -> KeyValue:
        key = _unb64(d["key"])
        value = d.get("value")
        try:
            data = self.codec.decode(_unb64(value)) if value else b""
        except (ValueError, struct.error, zstandard.ZstdError) as e:
            raise CorruptStore(f"the value of {key!r} is not a store frame: {e}") from e
        return KeyValue(key, data, int(d.get("create_revision", 0)), int(d.get("mod_revision", 0)),
                        int(d.get("version", 0)))

    async def _kvs(self, raw: list[dict[str, Any]]) -> list[KeyValue]:
        while True:
            try:
                return [self._kv(d) for d in raw]
            except UnknownDictionary as e:  # trained by another process since we loaded ours
                await self._fetch_dictionary(e.dict_id)

    def _event_kv(self, d: dict[str, Any]) -> KeyValue:
        """``_kv``, but a value that is no store frame is handed over as etcd holds it.

        Such a value was written past the store, by another program sharing the cluster
        (``etcdctl put``, ``etcdctl check perf``, another application's prefix): a watch
        over the whole keyspace (the watch caches' feed) must not fail on it, as
        kube-apiserver, which watches only its own prefix, never meets it. ``get`` and
        ``range`` of such a key still raise ``CorruptStore``."""
        try:
            return self._kv(d)
        except CorruptStore as e:
            key = _unb64(d["key"])
            self._foreign += 1
            if self._foreign & (self._foreign - 1) == 0:  # the 1st, 2nd, 4th, 8th...: a flood logs little
                log.warning("a watch passes on a value the store did not write (%d so far): %s", self._foreign, e)
            return KeyValue(key, _unb64(d.get("value", "")), int(d.get("create_revision", 0)),
                            int(d.get("mod_revision", 0)), int(d.get("version", 0)))

    def _event(self, e: dict[str, Any]) -> Event:
        kv = e["kv"]
        prev = e.get("prev_kv")
        prev_kv = self._event_kv(prev) if prev is not None else None
        if e.get("type") == "DELETE":
            return Event(EventType.DELETE, KeyValue(_unb64(kv["key"]), b"", 0, int(kv["mod_revision"]), 0),
                         prev_kv)
        return Event(EventType.PUT, self._event_kv(kv), prev_kv)

    async def _events(self, raw: list[dict[str, Any]], next_rev: int, filter_reserved: bool) -> list[Event]:
        while True:
            try:
                events = [self._event(e) for e in raw]
                break
            except UnknownDictionary as e:
                await self._fetch_dictionary(e.dict_id)
        if events[0].kv.mod_revision < next_rev:  # already delivered before a reconnect
            events = [e for e in events if e.kv.mod_revision >= next_rev]
        if filter_reserved:
            events = [e for e in events if not e.kv.key.startswith(RESERVED_PREFIX)]
        return events

    async def _frame(self, key: bytes, value: bytes) -> str:
        if len(value) >= _THREAD_ENCODE_BYTES:
            return _b64(await asyncio.to_thread(self.codec.encode, key, value))
        return _b64(self.codec.encode(key, value))

    # -- dictionaries ----------------------------------------------------------
    async def _ready(self) -> None:
        """Load the cluster's dictionaries once, before the first write compresses anything."""
        if self._closed:
            raise StoreError("store is closed")
        task = self._dicts_loading
        if task is None or task.get_loop() is not asyncio.get_running_loop():
            task = self._dicts_loading = asyncio.ensure_future(self._load_dictionaries())
        try:
            await asyncio.shield(task)  # one caller's cancellation must not cancel the others' load
        except Exception:
            if task.done():
                self._dicts_loading = None  # the next write tries again
            raise
        self._dicts_loaded = True

    def _add_dictionary(self, key: bytes, value: bytes) -> None:
        """Raises ``CorruptStore`` for a record that is not a dictionary."""
        try:
            dict_id = int(key[len(_DICT_PREFIX):])
            if self.codec.has_dictionary(dict_id):
                return
            (n,) = _PREFIX_LEN.unpack_from(value)
            self.codec.add_dictionary(dict_id, value[4:4 + n], value[4 + n:])
        except (ValueError, struct.error, zstandard.ZstdError) as e:
            raise CorruptStore(f"{key!r} does not hold a compression dictionary: {e}") from e

    async def _load_dictionaries(self) -> None:
        start = _DICT_PREFIX
        while True:
            answer = await self._call("/v3/kv/range", {"key": _b64(start), "range_end": _b64(_DICT_END),
                                                       "limit": 16}, read=True)
            kvs = answer.get("kvs", ())
            for kv in kvs:
                try:
                    self._add_dictionary(_unb64(kv["key"]), _unb64(kv.get("value", "")))
                except CorruptStore:
                    # one bad record must not stop every write; a value that needs it
                    # fails alone, when _fetch_dictionary meets the record again
                    log.exception("skipping a damaged compression dictionary")
            if not answer.get("more"):
                return
            start = _unb64(kvs[-1]["key"]) + b"\x00"

    async def _fetch_dictionary(self, dict_id: int) -> None:
        answer = await self._call("/v3/kv/range", {"key": _b64(_dict_key(dict_id))}, read=True)
        kvs = answer.get("kvs")
        if not kvs:
            raise CorruptStore(f"a value refers to compression dictionary {dict_id}, which etcd does not hold")
        self._add_dictionary(_unb64(kvs[0]["key"]), _unb64(kvs[0].get("value", "")))

    def _wrote(self, key: bytes, value: bytes, answer: dict[str, Any]) -> int:
        codec = self.codec
        if len(value) >= codec.config.min_sample:
            codec.observe(key, value)
            for prefix in codec.training_due():
                if prefix not in self._training and not self._closed:
                    self._training.add(prefix)
                    task = asyncio.get_running_loop().create_task(self._train(prefix))
                    self._tasks.add(task)
                    task.add_done_callback(self._tasks.discard)
        return _revision(answer)

    async def _train(self, prefix: bytes) -> None:
        try:
            await self._load_dictionaries()  # another replica may have trained this prefix already
            if prefix not in self.codec.training_due():
                return
            data = await asyncio.to_thread(self.codec.train, prefix)
            if data is None or self._closed:
                return
            dict_id = await self._store_dictionary(prefix, data)
            self.codec.add_dictionary(dict_id, prefix, data)
            log.info("trained compression dictionary %d for %r (%d bytes)", dict_id, prefix, len(data))
        except Exception:
            log.exception("training a compression dictionary for %r failed", prefix)
        finally:
            self._training.discard(prefix)

    async def _store_dictionary(self, prefix: bytes, data: bytes) -> int:
        """Store under the next free id, one above the highest stored, so the newest
        dictionary is the one every process activates (the codec picks the highest)."""
        value = _b64(_PREFIX_LEN.pack(len(prefix)) + prefix + data)
        last = await self._call("/v3/kv/range", {
            "key": _b64(_DICT_PREFIX), "range_end": _b64(_DICT_END), "limit": 1, "keys_only": True,
            "sort_order": "DESCEND", "sort_target": "KEY"}, read=True)
        kvs = last.get("kvs")
        dict_id = int(_unb64(kvs[0]["key"])[len(_DICT_PREFIX):]) + 1 if kvs else 1
        while dict_id <= _MAX_DICT_ID:
            key = _b64(_dict_key(dict_id))
            answer = await self._txn({"key": key, "target": "CREATE", "result": "EQUAL", "create_revision": 0},
                                     {"request_put": {"key": key, "value": value}})
            if answer.get("succeeded"):
                return dict_id
            dict_id += 1  # another process took this id a moment ago
        raise StoreError("no compression dictionary id left")

    # -- the Store interface ---------------------------------------------------
    async def create(self, key: bytes, value: bytes) -> int:
        key, value = _check_key(key), _check_value(value)
        if not self._dicts_loaded:
            await self._ready()
        k = _b64(key)
        answer = await self._txn({"key": k, "target": "CREATE", "result": "EQUAL", "create_revision": 0},
                                 {"request_put": {"key": k, "value": await self._frame(key, value)}})
        if not answer.get("succeeded"):
            raise KeyExists(key)
        return self._wrote(key, value, answer)

    @staticmethod
    def _guard(k: str, expected: int) -> tuple[dict[str, Any], dict[str, Any] | None]:
        """The txn compare for an expected revision, and the failure op that tells why it failed."""
        if expected < 0:
            raise InvalidRequest(f"expected_revision must be >= 0, got {expected}")
        if expected == 0:
            return {"key": k, "target": "CREATE", "result": "GREATER", "create_revision": 0}, None
        return ({"key": k, "target": "MOD", "result": "EQUAL", "mod_revision": expected},
                {"request_range": {"key": k, "keys_only": True}})

    @staticmethod
    def _refusal(key: bytes, expected: int, answer: dict[str, Any]) -> StoreError:
        if expected:
            kvs = answer["responses"][0]["response_range"].get("kvs")
            if kvs:
                return Conflict(key, expected, int(kvs[0]["mod_revision"]))
        return NotFound(key)

    async def update(self, key: bytes, value: bytes, expected_revision: int) -> int:
        key, value = _check_key(key), _check_value(value)
        if not self._dicts_loaded:
            await self._ready()
        k = _b64(key)
        compare, failure = self._guard(k, expected_revision)
        answer = await self._txn(compare, {"request_put": {"key": k, "value": await self._frame(key, value)}},
                                 failure)
        if not answer.get("succeeded"):
            raise self._refusal(key, expected_revision, answer)
        return self._wrote(key, value, answer)

    async def delete(self, key: bytes, expected_revision: int = 0) -> int:
        key = _check_key(key)
        k = _b64(key)
        compare, failure = self._guard(k, expected_revision)
        answer = await self._txn(compare, {"request_delete_range": {"key": k}}, failure)
        if not answer.get("succeeded"):
            raise self._refusal(key, expected_revision, answer)
        return _revision(answer)

    async def get(self, key: bytes, revision: int = 0) -> KeyValue | None:
        key = _check_key(key)
        if revision < 0:
            raise InvalidRequest(f"revision must be >= 0, got {revision}")
        body: dict[str, Any] = {"key": _b64(key)}
        if revision:
            body["revision"] = revision
        kvs = (await self._range(body, revision)).get("kvs")
        return (await self._kvs(kvs))[0] if kvs else None

    async def range(self, start: bytes, end: bytes, revision: int = 0,
                    limit: int = 0) -> tuple[list[KeyValue], int, bool]:
        if not start and not end:
            raise InvalidRequest("range of nothing: start and end are both empty")
        if revision < 0 or limit < 0:
            raise InvalidRequest(f"revision and limit must be >= 0, got {revision} and {limit}")
        spans = _user_spans(bytes(start), bytes(end))
        if not spans:  # only reserved keys: nothing to read, but the revision still is checked
            answer = await self._range({"key": _PROBE, "count_only": True, "revision": revision}, revision)
            return [], revision or _revision(answer), False
        out: list[KeyValue] = []
        more = False
        at = revision
        for span_start, span_end in spans:
            body: dict[str, Any] = {"key": _b64(span_start)}
            if span_end:
                body["range_end"] = _b64(span_end)
            if at:
                body["revision"] = at  # later spans read the snapshot the first one did
            if limit and len(out) >= limit:
                # the limit is filled: only ask whether anything lies beyond it
                body["count_only"] = True
                answer = await self._range(body, at)
                more = int(answer.get("count", 0)) > 0
                break
            if limit:
                body["limit"] = limit - len(out)
            answer = await self._range(body, at)
            at = at or _revision(answer)
            kvs = answer.get("kvs")
            if kvs:
                out.extend(await self._kvs(kvs))
            if answer.get("more"):
                more = True
                break
        return out, at, more

    async def count(self, start: bytes, end: bytes, revision: int = 0) -> tuple[int, int]:
        """See ``Store.count``: etcd's ``count_only`` range per span of user keys, each at
        the revision the first was read at."""
        if not start and not end:
            raise InvalidRequest("count of nothing: start and end are both empty")
        if revision < 0:
            raise InvalidRequest(f"revision must be >= 0, got {revision}")
        spans = _user_spans(bytes(start), bytes(end))
        if not spans:  # only reserved keys: none to count, but the revision still is checked
            spans = [(_PROBE_KEY, b"")]  # (never written: counts 0)
        n = 0
        at = revision
        for span_start, span_end in spans:
            body: dict[str, Any] = {"key": _b64(span_start), "count_only": True}
            if span_end:
                body["range_end"] = _b64(span_end)
            if at:
                body["revision"] = at
            answer = await self._range(body, at)
            at = at or _revision(answer)
            n += int(answer.get("count", 0))
        return n, at

    def watch(self, start: bytes, end: bytes, start_revision: int = 0,
              prev_kv: bool = False) -> AsyncIterator[list[Event]]:
        """See ``Store.watch``. ``start_revision=0`` starts after etcd's current revision
        when iteration begins, and includes every write this store issues from then on
        (even one that etcd commits before the watch has learnt that revision)."""
        return self._watch(bytes(start), bytes(end), start_revision, prev_kv)

    async def _watch(self, start: bytes, end: bytes, start_revision: int,
                     prev_kv: bool) -> AsyncIterator[list[Event]]:
        if self._closed:
            raise StoreError("store is closed")
        if not start and not end:
            raise InvalidRequest("watch of nothing: start and end are both empty")
        if start_revision < 0:
            raise InvalidRequest(f"start_revision must be >= 0, got {start_revision}")
        w = _Watch(self, start, end, start_revision, prev_kv)
        if start_revision == 0:
            self._starting.append(w.own_writes)  # now, before anything else can run
        self._watches.add(w)
        w.task = asyncio.get_running_loop().create_task(w.run())
        try:
            held: Any = None
            while True:
                if w.stopped:  # the store closed: what is still queued goes unread
                    return
                item = held if held is not None else await w.queue.get()
                held = None
                if item is _END:
                    return
                if isinstance(item, BaseException):
                    raise item
                batch: list[Event] = item
                while not w.queue.empty():  # hand over everything already read, as one list
                    more = w.queue.get_nowait()
                    if not isinstance(more, list):
                        held = more
                        break
                    batch.extend(more)
                yield batch
        finally:
            self._watches.discard(w)
            self._started(w.own_writes)
            w.stop()
            if w.task is not asyncio.current_task():
                await asyncio.wait([w.task])

    async def compact(self, revision: int) -> None:
        if revision <= 0:
            raise Compacted(revision, await self.compacted_revision())
        try:
            # physical: etcd answers once the superseded versions are gone from its
            # backend; that takes longer than an ordinary call on a big database
            await self._call("/v3/kv/compaction", {"revision": revision, "physical": True}, read=False,
                             timeout=max(self.timeout, 60.0))
        except _RevisionCompacted:
            self._raise_compact_floor(revision)  # etcd refuses a compaction at or below its point
            raise Compacted(revision, await self.compacted_revision()) from None
        except _RevisionInFuture:
            raise FutureRevision(revision, await self.revision()) from None
        self._raise_compact_floor(revision)

    async def revision(self) -> int:
        return _revision(await self._call("/v3/kv/range", {"key": _PROBE, "count_only": True}, read=True))

    async def _compacted_below(self, revision: int) -> bool:
        """Whether etcd refuses reads at ``revision`` as compacted."""
        try:
            await self._call("/v3/kv/range", {"key": _PROBE, "count_only": True, "revision": revision}, read=True)
        except _RevisionCompacted:
            return True
        return False

    async def compacted_revision(self) -> int:
        floor = self._compact_floor
        lo = max(floor, 1)
        if not await self._compacted_below(lo):
            # the point is at least `floor` and no read at `lo` is refused: it is `floor`
            # (or 1 where floor is 0: compacting at 1 drops nothing, so 0 is as true)
            return floor
        hi = await self.revision()  # reads at the current revision are never refused
        while hi - lo > 1:  # invariant: reads at lo are refused, at hi they are not
            mid = (lo + hi) // 2
            if await self._compacted_below(mid):
                lo = mid
            else:
                hi = mid
        self._raise_compact_floor(hi)
        return hi

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        loop = asyncio.get_running_loop()
        watches = list(self._watches)
        for w in watches:
            w.stop()
        for t in self._tasks:
            t.cancel()
        pending = [t for t in [*(w.task for w in watches if w.task), *self._tasks] if t.get_loop() is loop]
        if pending:
            await asyncio.wait(pending)
        await self._gw.aclose()
