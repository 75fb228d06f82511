"""The read side of the API: get, list and watch, as one small interface with two
implementations, ``StoreReads`` (straight from the store) and the watch cache's
``controlplane.watchcache.CacheReads`` (which falls back to ``StoreReads``).

The handlers in ``rest.py`` parse a request into ``ListOptions`` or
``WatchOptions`` (here, so both implementations see the same validated input)
and call ``Reads``. Objects come back as JSON bytes with
``metadata.resourceVersion`` set, ready to be spliced into a response.

resourceVersion rules (the API conventions' table; rv is the parameter):

==============  =====================  ===========================================
rv              resourceVersionMatch   list / get serves
==============  =====================  ===========================================
unset           unset                  the most recent state (a consistent read)
"0"             unset, NotOlderThan    any state (what the cache has)
N               unset, no limit        a state not older than N
N               unset, with limit      exactly N (legacy pagination)
N               NotOlderThan           a state not older than N
N               Exact                  exactly N
==============  =====================  ===========================================
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import math
import os
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

import store
from store import EventType, Store

from ..registry import ResourceType
from ..registry.attrs import Attrs, Filter, SelectorError, attrs_of
from .errors import ApiError
from .params import flag, go_int64

__all__ = [
    "resource_version_param",
    "BOOKMARK_SECONDS",
    "ErrorWatch",
    "ListOptions",
    "Listed",
    "Reads",
    "StoreReads",
    "WatchItem",
    "WatchOptions",
    "WatchStream",
    "bookmark_object",
    "check_list_integers",
    "list_options",
    "stamp",
    "too_large_resource_version",
    "unselective",
    "watch_options",
]

# kube-apiserver sends a watch bookmark about once a minute; tests shorten it
BOOKMARK_SECONDS = float(os.environ.get("CONTROLPLANE_WATCH_BOOKMARK_SECONDS", "60"))
PRE_DEADLINE_BOOKMARK = 2.0


def stamp(value: bytes, revision: int) -> tuple[bytes, dict[str, Any]]:
    """A stored value as served: its JSON with ``metadata.resourceVersion``, and the object."""
    obj: dict[str, Any] = orjson.loads(value)
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        meta = obj["metadata"] = {}
    meta["resourceVersion"] = str(revision)
    return orjson.dumps(obj), obj


def too_large_resource_version(asked: int, current: int) -> ApiError:
    """Upstream's ``NewTooLargeResourceVersionError`` (a ``NewTimeoutError``: its message
    says "Timeout: "; the answer's ``Retry-After`` header is the details' seconds)."""
    return ApiError(504, "Timeout", f"Timeout: Too large resource version: {asked}, current: {current}",
                    {"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
                     "retryAfterSeconds": 1})


# -- options ----------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ListOptions:
    filter: Filter
    limit: int = 0                   # 0: everything
    resource_version: str = ""       # "" unset, "0", or a decimal revision
    match: str = ""                  # "", "Exact" or "NotOlderThan"
    start: bytes | None = None       # from a continue token: the first key of this page
    continue_revision: int = 0       # from a continue token: the revision every page is read at

    @property
    def revision(self) -> int:
        return int(self.resource_version) if self.resource_version else 0

    @property
    def exact(self) -> bool:
        """Whether the list must be at exactly ``revision``."""
        return self.revision > 0 and (self.match == "Exact" or (not self.match and self.limit > 0))


@dataclass(frozen=True, slots=True)
class WatchOptions:
    filter: Filter
    resource_version: str = ""
    send_initial_events: bool | None = None
    bookmarks: bool = False
    deadline: float = math.inf  # time.monotonic() at which the server ends the watch (timeoutSeconds)

    def next_bookmark(self, now: float) -> float:
        """When an idle watch's next bookmark is due, from ``now``: every
        ``BOOKMARK_SECONDS``, and once more ``PRE_DEADLINE_BOOKMARK`` seconds before
        the deadline, as upstream's cacheWatcher. The client then resumes from a
        revision seconds old, so the backlog it is handed (the whole resource's
        events since, walked for a filtered watch) is seconds long, not a minute.
        ``math.inf`` once that last one is sent: a pre-deadline time less than
        half a second away is taken as the one just sent (the loop's timers may
        fire early)."""
        periodic, last = now + BOOKMARK_SECONDS, self.deadline - PRE_DEADLINE_BOOKMARK
        if periodic <= last:
            return periodic
        return last if last >= now + 0.5 else math.inf

    @property
    def revision(self) -> int:
        return int(self.resource_version) if self.resource_version else 0

    @property
    def initial_events(self) -> bool:
        """Whether the stream starts with the current state as ADDED events."""
        if self.send_initial_events is None:
            return self.revision == 0  # legacy: rv unset or "0" means "get state and start"
        return self.send_initial_events


def _filter(rtype: ResourceType, namespace: str | None, query: dict[str, str], name: str | None = None) -> Filter:
    try:
        custom = rtype.custom
        return Filter.parse(rtype.fields_key, query.get("labelSelector"), query.get("fieldSelector"), namespace, name,
                            custom is not None, custom.selectable_fields if custom is not None else None)
    except SelectorError as e:
        raise ApiError.bad_request(str(e)) from e


def resource_version_param(query: dict[str, str]) -> str:
    """The ``resourceVersion`` parameter, canonical ("007" is "7"), or a 400."""
    raw = query.get("resourceVersion") or ""
    if raw and (not raw.isdigit() or not raw.isascii()):
        raise ApiError.bad_request(f"invalid resource version: {raw!r}")
    return str(int(raw)) if raw else ""


def _limit(query: dict[str, str]) -> int:
    raw = query.get("limit") or ""
    value = go_int64(raw) if raw else 0
    if value is None:
        raise ApiError.bad_request(f"invalid limit: {raw!r}")
    return max(value, 0)  # kube-apiserver treats a negative limit as none


def check_list_integers(query: dict[str, str]) -> None:
    """The 400 of a ``limit`` or ``timeoutSeconds`` that is no int64, which every request
    that decodes ListOptions gets (a deletecollection too, whose list ignores them here)."""
    _limit(query)
    _check_timeout(query)


def _check_timeout(query: dict[str, str]) -> None:
    """``timeoutSeconds`` is decoded into ListOptions for a list too, which has no use for it:
    one that is no int64 is upstream's 400 there as well."""
    timeout = query.get("timeoutSeconds") or ""
    if timeout and go_int64(timeout) is None:
        raise ApiError.bad_request(f"invalid timeoutSeconds: {timeout!r}")


_LIST_OPTIONS = ResourceType("meta.k8s.io", "v1", "ListOptions", "listoptions", False)


def _invalid_options(field: str, reason: str, message: str) -> ApiError:
    """422 against ``ListOptions.meta.k8s.io``, as upstream's ValidateListOptions."""
    return ApiError.invalid(_LIST_OPTIONS, "", [{"reason": reason, "field": field, "message": message}])


_FORBIDDEN = "FieldValueForbidden"


def _check_list_match(rv: str, query: dict[str, str]) -> None:
    """The 422 of a list's ``resourceVersionMatch`` or ``sendInitialEvents`` that upstream's
    ValidateListOptions refuses (the first it finds)."""
    match = query.get("resourceVersionMatch") or ""
    if match not in ("", "Exact", "NotOlderThan"):
        raise _invalid_options("resourceVersionMatch", "FieldValueNotSupported",
                               f'Unsupported value: "{match}": supported values: "Exact", "NotOlderThan"')
    if match and not rv:
        raise _invalid_options("resourceVersionMatch", "FieldValueForbidden",
                               "Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided")
    if match == "Exact" and rv == "0":
        raise _invalid_options("resourceVersionMatch", "FieldValueForbidden",
                               'Forbidden: resourceVersionMatch "exact" is forbidden for resourceVersion "0"')
    if "sendInitialEvents" in query:  # present at all, even false, as upstream
        raise _invalid_options("sendInitialEvents", _FORBIDDEN, "Forbidden: sendInitialEvents is forbidden for list")
    if match and query.get("continue"):
        raise _invalid_options("resourceVersionMatch", "FieldValueForbidden",
                               "Forbidden: resourceVersionMatch is forbidden when continue is provided")


def list_options(rtype: ResourceType, namespace: str | None, query: dict[str, str]) -> ListOptions:
    rv = resource_version_param(query)
    match = query.get("resourceVersionMatch") or ""
    _check_list_match(rv, query)
    token = query.get("continue") or ""
    start, continue_revision = None, 0
    if token:
        start, continue_revision = decode_continue(token, rtype.prefix(namespace))  # first, as upstream
        if rv not in ("", "0"):
            raise ApiError.bad_request("specifying resource version is not allowed when using continue")
        rv = ""
    limit = _limit(query)
    _check_timeout(query)
    if rv == "0":
        limit = 0  # "0" is served whole from the cache, ``limit`` ignored, as upstream's cacher (computeListLimit)
    return ListOptions(_filter(rtype, namespace, query), limit, rv, match, start, continue_revision)


def watch_options(rtype: ResourceType, namespace: str | None, query: dict[str, str],
                  deadline: float = math.inf, legacy_path: bool = False, name: str | None = None) -> WatchOptions:
    """A watch's options, or the 422 or 400 upstream answers them with.

    ``legacy_path``: the watch is asked for by a deprecated ``/watch/`` path, where, without
    ``?watch=true`` too, upstream validates the options as a list's (its options then do not
    say watch): no ``sendInitialEvents``, and a ``resourceVersionMatch`` that passes is
    ignored. ``name``: the object such a path names (``/api/v1/watch/namespaces/NS/pods/NAME``),
    watched as upstream watches it, by a ``metadata.name`` field selector."""
    rv = resource_version_param(query)
    _limit(query)  # (a watch ignores it, but it is decoded into ListOptions all the same)
    _check_timeout(query)
    if legacy_path and not flag(query, "watch"):
        _check_list_match(rv, query)
        return WatchOptions(_filter(rtype, namespace, query, name), rv, None,
                            bool(flag(query, "allowWatchBookmarks")), deadline)
    initial = flag(query, "sendInitialEvents")
    match = query.get("resourceVersionMatch") or ""
    # every violation, in upstream's order (validateWatchOptions)
    causes: list[dict[str, str]] = []
    if initial is not None and match != "NotOlderThan":
        causes.append({"reason": _FORBIDDEN, "field": "resourceVersionMatch",
                       "message": "Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"})
    if match and initial is None:
        causes.append({"reason": _FORBIDDEN, "field": "resourceVersionMatch", "message": "Forbidden: "
                       "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided"})
    if match and match != "NotOlderThan":
        causes.append({"reason": "FieldValueNotSupported", "field": "resourceVersionMatch",
                       "message": f'Unsupported value: "{match}": supported values: "NotOlderThan"'})
    if match and query.get("continue"):  # (a watch ignores the token, but not beside a match)
        causes.append({"reason": _FORBIDDEN, "field": "resourceVersionMatch",
                       "message": "Forbidden: resourceVersionMatch is forbidden when continue is provided"})
    if causes:
        raise ApiError.invalid(_LIST_OPTIONS, "", causes)
    return WatchOptions(_filter(rtype, namespace, query, name), rv, initial,
                        bool(flag(query, "allowWatchBookmarks")), deadline)


# a continue token's revision meaning "the latest", which the 410 of an expired token offers
# (upstream's -1: a list that goes on may then be inconsistent)
LATEST = -1
INCONSISTENT_CONTINUE = (
    "The provided continue parameter is too old to display a consistent list result. You can start a new "
    "list without the continue parameter, or use the continue token in this response to retrieve the "
    "remainder of the results. Continuing with the provided token results in an inconsistent list - objects "
    "that were created, modified, or deleted between the time the first chunk was returned and now may show "
    "up in the list.")


def encode_continue(start: bytes, prefix: bytes, revision: int) -> str:
    """A list's continue token, as upstream's ``storage.EncodeContinue``: the next key relative
    to the list's ``prefix`` (so a token read against another list's prefix names a key of that
    list), with the revision the pages are read at, in unpadded URL-safe base64.

    >>> encode_continue(b"/registry/pods/ns/b\\x00", b"/registry/pods/ns/", 7)
    'eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6Nywic3RhcnQiOiJiXHUwMDAwIn0'
    """
    relative = start[len(prefix):] if start.startswith(prefix) else start
    token = orjson.dumps({"v": "meta.k8s.io/v1", "rv": revision,
                          "start": relative.decode("utf-8", "surrogateescape")})
    return base64.urlsafe_b64encode(token).rstrip(b"=").decode()


def decode_continue(token: str, prefix: bytes) -> tuple[bytes, int]:
    """The first key and the revision of the page a continue token asks for, read as upstream's
    ``storage.DecodeContinue``: its key is taken relative to this list's ``prefix``, so a token
    of another resource's, namespace's or selector's list is no error, it goes on from that
    key here; one that does not decode, or whose key climbs out of the prefix (``../``), is a 400
    ``invalid continue token: continue key is not valid...``. Revision 0 means "the latest"."""
    data = _raw_url_base64(token)
    try:
        decoded = orjson.loads(data)
    except orjson.JSONDecodeError:
        raise _invalid_continue(_go_json_error(data)) from None
    if decoded is None:
        decoded = {}
    if not isinstance(decoded, dict):
        raise _invalid_continue(f"json: cannot unmarshal {_json_kind(decoded)} into Go value of type "
                                "storage.continueToken")
    version, revision, start = decoded.get("v", ""), decoded.get("rv", 0), decoded.get("start", "")
    for field, value, go_type in (("v", version, "string"), ("rv", revision, "int64"), ("start", start, "string")):
        if value is None:
            continue
        if go_type == "int64" and (isinstance(value, bool) or not isinstance(value, int)
                                   or not -(1 << 63) <= value < (1 << 63)):
            number = f"number {value}" if isinstance(value, int | float) and not isinstance(value, bool) else \
                _json_kind(value)
            raise _invalid_continue(f"json: cannot unmarshal {number} into Go struct field continueToken.{field} "
                                    "of type int64")
        if go_type == "string" and not isinstance(value, str):
            raise _invalid_continue(f"json: cannot unmarshal {_json_kind(value)} into Go struct field "
                                    f"continueToken.{field} of type string")
    version, revision, start = version or "", revision or 0, start or ""
    if version != "meta.k8s.io/v1":
        raise ApiError.bad_request("invalid continue token: continue key is not valid: server does not recognize "
                                   f"this encoded version {version}")
    if revision == 0:
        raise ApiError.bad_request("invalid continue token: continue key is not valid: incorrect encoded start "
                                   "resourceVersion (version meta.k8s.io/v1)")
    if not start:
        raise ApiError.bad_request("invalid continue token: continue key is not valid: encoded start key empty "
                                   "(version meta.k8s.io/v1)")
    key = start if start.startswith("/") else "/" + start
    if not _clean_path(key):  # no climbing out of this list's prefix
        raise _invalid_continue(start)
    return prefix + key[1:].encode("utf-8", "surrogateescape"), max(revision, 0)  # < 0: the latest


def _invalid_continue(why: str) -> ApiError:
    return ApiError.bad_request(f"invalid continue token: continue key is not valid: {why}")


_BASE64_URL = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


def _raw_url_base64(token: str) -> bytes:
    """``token`` decoded as Go's ``base64.RawURLEncoding`` (no padding), or its 400."""
    raw = token.encode("utf-8", "surrogateescape")
    bad = next((i for i, c in enumerate(raw) if c not in _BASE64_URL), None)
    if bad is None and len(raw) % 4 == 1:
        bad = len(raw) - 1  # a lone last character holds no whole byte
    if bad is not None:
        raise _invalid_continue(f"illegal base64 data at input byte {bad}")
    try:
        return base64.urlsafe_b64decode(raw + b"=" * (-len(raw) % 4))
    except (binascii.Error, ValueError):  # (the checks above leave none)
        raise _invalid_continue("illegal base64 data at input byte 0") from None


def _clean_path(key: str) -> bool:
    """Whether Go's ``path.Clean`` leaves the absolute path ``key`` as it is."""
    if key == "/":
        return True
    return not key.endswith("/") and all(part not in ("", ".", "..") for part in key[1:].split("/"))


def _json_kind(value: Any) -> str:
    """What Go's decoder calls a JSON value it cannot put into a field."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    return "string" if isinstance(value, str) else "array" if isinstance(value, list) else "object"


def _go_json_error(data: bytes) -> str:
    """encoding/json's words for the most common ways ``data`` is no JSON."""
    text = data.lstrip(b" \t\r\n")
    if not text:
        return "unexpected end of JSON input"
    first = text[:1]
    if first not in b'{["-0123456789tfn':
        char = chr(first[0]) if first.isascii() and first.decode().isprintable() else f"\\x{first[0]:02x}"
        return f"invalid character '{char}' looking for beginning of value"
    return "unexpected end of JSON input" if not text.rstrip().endswith((b"}", b"]", b'"')) else \
        "invalid character after top-level value"


def unselective(match: Filter, namespace: str | None) -> bool:
    """No selector beyond the URL's namespace (which the key range already applies): a page
    of such a list carries ``remainingItemCount``, as upstream's when its predicate is
    ``Empty()``; a selector's count would include objects it filters out, so upstream gives none,
    even for a field selector that only says the URL's namespace again (``Filter.selective``)."""
    return not match.selective and match.labels.empty and all(
        (name, equal, value) == ("metadata.namespace", True, namespace) for name, equal, value in match.terms)


# -- results ----------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Listed:
    items: list[bytes]          # each object's JSON, with its resourceVersion
    revision: int               # the revision the list was read at
    next_start: bytes | None    # the next page's first key, when more remain
    # objects after this page, when more remain and no selector filtered the list
    # (``metadata.remainingItemCount``, as upstream); None when unknown
    remaining: int | None = None
    prefix: bytes = b""         # the list's key prefix, which the token's key is relative to

    @property
    def continue_token(self) -> str | None:
        return encode_continue(self.next_start, self.prefix, self.revision) if self.next_start is not None else None


@dataclass(frozen=True, slots=True)
class WatchItem:
    """One event of a watch stream: its type, its object's JSON, and the line to send."""

    type: str    # ADDED, MODIFIED, DELETED, BOOKMARK, ERROR
    raw: bytes
    line: bytes

    @staticmethod
    def of(kind: str, raw: bytes) -> WatchItem:
        return WatchItem(kind, raw, b'{"type":"' + kind.encode() + b'","object":' + raw + b"}\n")


def bookmark_object(rtype: ResourceType, revision: int, end_of_initial: bool = False) -> bytes:
    meta: dict[str, Any] = {"resourceVersion": str(revision)}
    if end_of_initial:
        meta["annotations"] = {"k8s.io/initial-events-end": "true"}
    return orjson.dumps({"kind": rtype.kind, "apiVersion": rtype.api_version, "metadata": meta})


class WatchStream(Protocol):
    """Lists of ``WatchItem`` in order; ends (``StopAsyncIteration``) when the server
    ends the watch, after which the client may resume from the last revision it saw."""

    def __aiter__(self) -> WatchStream: ...

    async def __anext__(self) -> list[WatchItem]: ...

    async def aclose(self) -> None: ...


class ErrorWatch:
    """A watch that sends one ERROR event and ends: what upstream's cacher answers a valid
    watch it cannot start (``newErrWatcher``), e.g. a WatchList from a revision it does
    not reach in time (200, then the 504 Status as an event, not a 504 answer)."""

    def __init__(self, error: ApiError) -> None:
        self._items = [WatchItem.of("ERROR", orjson.dumps(error.status()))]

    def __aiter__(self) -> ErrorWatch:
        return self

    async def __anext__(self) -> list[WatchItem]:
        if not self._items:
            raise StopAsyncIteration
        out, self._items = self._items, []
        return out

    async def aclose(self) -> None:
        self._items = []


class Reads(Protocol):
    """The reads every handler goes through."""

    def prime(self, rtype: ResourceType, key: bytes, revision: int, raw: bytes, obj: dict[str, Any]) -> None:
        """A write of this process made ``obj`` at ``revision``, served as ``raw``: a cache
        may take them for that version instead of decoding the store's bytes again."""

    def prime_attrs(self, rtype: ResourceType, written: list[tuple[bytes, int, bytes, Attrs]]) -> None:
        """As ``prime``, for versions (key, revision, served JSON, attrs) whose labels and
        selectable fields are known to be ``attrs`` (made by a change no filter reads from
        a version that had them)."""

    def latest(self, rtype: ResourceType, key: bytes) -> tuple[bytes, int] | None:
        """The newest version of ``key`` this server holds in memory, at once: its JSON
        (resourceVersion included) and revision; None when it holds none. A hint for a
        write to start from (upstream's ``cachedExistingObject``): it may be stale, so a
        write from it must expect its revision and, on conflict, start again from the store."""

    def generation(self, rtype: ResourceType) -> int | None:
        """A number that changes whenever the objects of ``rtype`` this server holds in
        memory change, for what is derived from all of them (the default PriorityClass);
        None when it holds none (derive afresh)."""

    async def get(self, rtype: ResourceType, namespace: str | None, name: str,
                  resource_version: str = "") -> bytes | None:
        """The object's JSON, or None if it does not exist."""

    async def list(self, rtype: ResourceType, namespace: str | None, options: ListOptions) -> Listed:
        """One page of the list. Raises ``ApiError`` (410 for a compacted revision,
        504 for one the server has not reached)."""

    async def watch(self, rtype: ResourceType, namespace: str | None, options: WatchOptions) -> WatchStream:
        """A started watch. Raises ``ApiError`` for what is known before the stream
        starts; a revision too old for the history surfaces as an ERROR item (410)."""


# -- the store-backed reads -----------------------------------------------------------
class StoreReads:
    """Every read straight from the store (no cache): the reference semantics, and
    the watch cache's fallback."""

    def __init__(self, get_store: Any) -> None:
        self._get_store = get_store  # () -> Store; raises ApiError 503 while the store is not open

    def prime(self, rtype: ResourceType, key: bytes, revision: int, raw: bytes, obj: dict[str, Any]) -> None:
        return None  # nothing cached

    def prime_attrs(self, rtype: ResourceType, written: list[tuple[bytes, int, bytes, Attrs]]) -> None:
        return None  # nothing cached

    def latest(self, rtype: ResourceType, key: bytes) -> tuple[bytes, int] | None:
        return None  # nothing cached

    def generation(self, rtype: ResourceType) -> int | None:
        return None  # nothing cached

    @property
    def store(self) -> Store:
        s: Store = self._get_store()
        return s

    async def get(self, rtype: ResourceType, namespace: str | None, name: str,
                  resource_version: str = "") -> bytes | None:
        kv = await self.store.get(rtype.key(namespace, name))
        return None if kv is None else stamp(kv.value, kv.mod_revision)[0]

    async def list(self, rtype: ResourceType, namespace: str | None, options: ListOptions) -> Listed:
        prefix = rtype.prefix(namespace)
        end = store.prefix_end(prefix)
        start = options.start if options.start is not None else prefix
        revision = options.continue_revision or (options.revision if options.exact else 0)
        limit, match = options.limit, options.filter
        items: list[bytes] = []
        more = False
        try:
            while True:  # with a selector, read on until the page has ``limit`` matches
                kvs, rev, more = await self.store.range(start, end, revision=revision,
                                                        limit=max(limit - len(items), 0) if limit else 0)
                revision = rev
                for kv in kvs:
                    raw, obj = stamp(kv.value, kv.mod_revision)
                    if match.everything or match.matches(attrs_of(rtype.fields_key, obj)):
                        items.append(raw)
                if kvs:
                    start = kvs[-1].key + b"\x00"
                if not more or not limit or len(items) >= limit:
                    break
            remaining = None
            if more and unselective(match, namespace):
                # upstream's etcd3 store takes it from the page's range response (etcd counts the
                # whole range at the page's revision): the keys after this page, at that revision
                remaining, _ = await self.store.count(start, end, revision)
        except store.FutureRevision as e:  # (an exact revision past the store's: the cache's answer)
            raise too_large_resource_version(e.revision, e.current) from e
        except store.Compacted as e:
            if options.start is None:  # upstream's etcd3 store's words (interpretListError)
                raise ApiError.gone("The resourceVersion for the provided list is too old.") from e
            # as upstream's etcd3 store: a token to go on from the same key at the latest revision
            gone = ApiError.gone(INCONSISTENT_CONTINUE)
            gone.list_meta = {"continue": encode_continue(options.start, prefix, LATEST)}
            raise gone from e
        if not options.exact and options.revision > revision:
            raise too_large_resource_version(options.revision, revision)
        return Listed(items, revision, start if more else None, remaining, prefix)

    async def watch(self, rtype: ResourceType, namespace: str | None, options: WatchOptions) -> WatchStream:
        prefix = rtype.prefix(namespace)
        initial: list[WatchItem] = []
        if options.initial_events:
            kvs, rev, _ = await self.store.range(prefix, store.prefix_end(prefix), revision=0)
            if options.revision > rev:
                return ErrorWatch(too_large_resource_version(options.revision, rev))
            for kv in kvs:
                raw, obj = stamp(kv.value, kv.mod_revision)
                if options.filter.everything or options.filter.matches(attrs_of(rtype.fields_key, obj)):
                    initial.append(WatchItem.of("ADDED", raw))
            if options.send_initial_events and options.bookmarks:  # as upstream: only to a client that asks
                initial.append(WatchItem.of("BOOKMARK", bookmark_object(rtype, rev, end_of_initial=True)))
            start = rev + 1
        else:
            start = options.revision + 1
        events = self.store.watch(prefix, store.prefix_end(prefix), start, prev_kv=True)
        return _StoreWatch(rtype, options, events, initial, start - 1)


class _StoreWatch:
    """A watch read from the store's own watch: the reference for the cache's."""

    def __init__(self, rtype: ResourceType, options: WatchOptions, events: AsyncIterator[Sequence[store.Event]],
                 initial: list[WatchItem], delivered: int) -> None:
        self._rtype = rtype
        self._options = options
        self._events = events.__aiter__()
        self._pending = initial
        self._delivered = delivered  # every event of the range up to here has been sent
        self._next: asyncio.Future[Sequence[store.Event]] | None = None
        self._done = False
        self._next_bookmark = options.next_bookmark(time.monotonic())

    def __aiter__(self) -> _StoreWatch:
        return self

    async def __anext__(self) -> list[WatchItem]:
        if self._pending:
            out, self._pending = self._pending, []
            return out
        while not self._done:
            if self._next is None:
                self._next = asyncio.ensure_future(self._events.__anext__())
            timeout = max(self._next_bookmark - time.monotonic(), 0) \
                if self._options.bookmarks and self._next_bookmark < math.inf else None
            done, _ = await asyncio.wait({self._next}, timeout=timeout)
            if not done:
                self._next_bookmark = self._options.next_bookmark(time.monotonic())
                return [WatchItem.of("BOOKMARK", bookmark_object(self._rtype, self._delivered))]
            fut, self._next = self._next, None
            try:
                events = fut.result()
            except StopAsyncIteration:
                break
            except store.Compacted as err:
                self._done = True
                gone = ApiError.gone(f"too old resource version: {self._options.revision} ({err.compacted})")
                return [WatchItem.of("ERROR", orjson.dumps(gone.status()))]
            out = self._translate(events)
            if out:
                return out
        raise StopAsyncIteration

    def _translate(self, events: Sequence[store.Event]) -> list[WatchItem]:
        match, plural = self._options.filter, self._rtype.fields_key
        out: list[WatchItem] = []
        for ev in events:
            self._delivered = ev.kv.mod_revision
            old = stamp(ev.prev_kv.value, ev.kv.mod_revision) if ev.prev_kv is not None else None
            if ev.type is EventType.DELETE:
                if old is not None and (match.everything or match.matches(attrs_of(plural, old[1]))):
                    out.append(WatchItem.of("DELETED", old[0]))
                continue
            raw, new = stamp(ev.kv.value, ev.kv.mod_revision)
            if match.everything:
                out.append(WatchItem.of("ADDED" if ev.kv.version == 1 else "MODIFIED", raw))
                continue
            # objects entering or leaving the selector are ADDED or DELETED, as upstream
            was = old is not None and ev.kv.version > 1 and match.matches(attrs_of(plural, old[1]))
            if match.matches(attrs_of(plural, new)):
                out.append(WatchItem.of("MODIFIED" if was else "ADDED", raw))
            elif was:  # the previous version at the event's revision, as upstream's cacheWatcher
                assert old is not None
                out.append(WatchItem.of("DELETED", old[0]))
        return out

    async def aclose(self) -> None:
        self._done = True
        if self._next is not None:
            self._next.cancel()
            with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration, store.StoreError):
                await self._next
        aclose = getattr(self._events, "aclose", None)
        if aclose is not None:
            await aclose()

