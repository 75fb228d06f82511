"""``GET pods/<name>/log``.

PodLogOptions, the query, is read and validated as kube-apiserver does before it looks the
pod up (``LogREST.Get``): a number that does not parse is 400 (the parameter codec's
``strconv.ParseInt`` error), a value out of range 422 against ``PodLogOptions``
(``ValidatePodLogOptions``).

``follow`` holds the (empty) stream of a running container open until that instance of the
container stops running, as a kubelet's log stream ends when the container exits: its status
leaves ``running`` (or a new instance replaces it), the pod goes terminal, or the pod is
deleted. It learns that from a watch of the one pod (``metadata.name``, an indexed field of
the watch cache's fan-out, so an idle follower costs an event nothing and a timer nothing),
and it ends at once when the client goes. ``pods/log`` is a long-running request upstream
(no request timeout), and PodLogOptions has no ``timeoutSeconds``."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import orjson

from ..registry.types import ResourceType
from ..registry.validation import parse_time
from .errors import ApiError
from .params import go_int64
from .reads import Reads, watch_options

__all__ = ["follow", "running_instance", "validate_log_options"]

log = logging.getLogger(__name__)

Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

# after a watch of the pod ends without an answer (too old a revision, a watcher closed):
# the pause before the pod is read again and watched anew
REWATCH_PAUSE = 1.0

_OPTIONS_TYPE = ResourceType("", "v1", "PodLogOptions", "podlogoptions", False)
_STREAMS = ("All", "Stderr", "Stdout")


def _int(query: dict[str, str], key: str) -> int | None:
    raw = query.get(key)
    if raw is None or raw == "":
        return None
    value = go_int64(raw)
    if value is None:
        why = "value out of range" if raw.lstrip("+-").isdigit() and raw.isascii() else "invalid syntax"
        raise ApiError.bad_request(f'strconv.ParseInt: parsing "{raw}": {why}')
    return value


def validate_log_options(name: str, query: dict[str, str]) -> None:
    """Raise the Status kube-apiserver answers for these log options, if any."""
    tail, limit, since = _int(query, "tailLines"), _int(query, "limitBytes"), _int(query, "sinceSeconds")
    since_time = query.get("sinceTime") or None
    if since_time is not None:
        _, why = parse_time(since_time)  # a metav1.Time, as the query's decoder reads it (RFC 3339)
        if why:
            raise ApiError.bad_request(why)
    causes: list[dict[str, str]] = []

    def cause(reason: str, field: str, message: str) -> None:
        causes.append({"reason": reason, "field": field, "message": message})

    if tail is not None and tail < 0:
        cause("FieldValueInvalid", "tailLines", f"Invalid value: {tail}: must be greater than or equal to 0")
    if limit is not None and limit < 1:
        cause("FieldValueInvalid", "limitBytes", f"Invalid value: {limit}: must be greater than 0")
    if since is not None and since_time is not None:
        cause("FieldValueForbidden", "", "Forbidden: at most one of `sinceTime` or `sinceSeconds` may be specified")
    elif since is not None and since < 1:
        cause("FieldValueInvalid", "sinceSeconds", f"Invalid value: {since}: must be greater than 0")
    stream = query.get("stream")
    if stream is not None:
        if stream not in _STREAMS:
            cause("FieldValueNotSupported", "stream", f'Unsupported value: "{stream}": supported values: '
                  + ", ".join(f'"{s}"' for s in _STREAMS))
        if stream != "All" and tail is not None:
            cause("FieldValueForbidden", "", "Forbidden: `tailLines` and specific `stream` are mutually "
                  "exclusive for now")
    if causes:
        raise ApiError.invalid(_OPTIONS_TYPE, name, causes)


_STATUS_LISTS = ("initContainerStatuses", "ephemeralContainerStatuses", "containerStatuses")
Instance = tuple[str, str, int]


def running_instance(pod: dict[str, Any], container: str) -> Instance | None:
    """Which instance of ``container`` runs in ``pod`` (the pod's uid, the container's ID and
    restart count), or None when none runs: its state is not ``running``, or the pod is
    terminal. A different answer for a later version of the pod means the instance a log
    stream follows has ended."""
    status = pod.get("status") or {}
    if status.get("phase") in ("Succeeded", "Failed"):
        return None
    for key in _STATUS_LISTS:
        for found in status.get(key) or ():
            if isinstance(found, dict) and found.get("name") == container:
                state = found.get("state")
                if not isinstance(state, dict) or "running" not in state:
                    return None
                restarts = found.get("restartCount")
                return (str((pod.get("metadata") or {}).get("uid") or ""), str(found.get("containerID") or ""),
                        restarts if isinstance(restarts, int) else 0)
    return None


async def follow(reads: Reads, rtype: ResourceType, namespace: str | None, pod: dict[str, Any], container: str,
                 receive: Receive, send: Send) -> None:
    """Answer ``follow=true`` for ``container`` of ``pod`` (the version just read): a chunked
    ``text/plain`` stream, open while that container's instance runs (``running_instance``),
    ended when it stops or the pod goes; nothing is held once the client has gone."""
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})

    async def disconnected() -> None:
        while (await receive())["type"] != "http.disconnect":
            pass

    gone = asyncio.ensure_future(disconnected())
    running = asyncio.ensure_future(_until_stopped(reads, rtype, namespace, pod, container))
    try:
        await asyncio.wait({gone, running}, return_when=asyncio.FIRST_COMPLETED)
        if running.done() and not running.cancelled() and running.exception() is not None:
            log.warning("following the log of pod %s/%s ended by %r", namespace,
                        (pod.get("metadata") or {}).get("name"), running.exception())
        if not gone.done():
            with contextlib.suppress(OSError):
                await send({"type": "http.response.body", "body": b"", "more_body": False})
    finally:
        for task in (gone, running):
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await running


async def _until_stopped(reads: Reads, rtype: ResourceType, namespace: str | None, pod: dict[str, Any],
                         container: str) -> None:
    """Return once the instance of ``container`` running in ``pod`` no longer runs."""
    instance = running_instance(pod, container)
    name = str((pod.get("metadata") or {}).get("name") or "")
    revision = str((pod.get("metadata") or {}).get("resourceVersion") or "")
    selector = f"metadata.name={name}"
    while instance is not None:
        try:
            stream = await reads.watch(rtype, namespace, watch_options(
                rtype, namespace, {"fieldSelector": selector, "resourceVersion": revision}))
        except ApiError:
            stream = None
        if stream is not None:
            try:
                async for items in stream:
                    for item in items:
                        if item.type == "DELETED":
                            return
                        if item.type == "ERROR":  # 410 and the like: read the pod afresh below
                            break
                        if item.type in ("ADDED", "MODIFIED"):
                            obj = orjson.loads(item.raw)
                            if running_instance(obj, container) != instance:
                                return
                            revision = str(obj["metadata"]["resourceVersion"])
                    else:
                        continue
                    break
            finally:
                await stream.aclose()
        # the watch ended without saying: look at the pod as it is now, and watch it from there
        await asyncio.sleep(REWATCH_PAUSE)
        raw = await reads.get(rtype, namespace, name)
        if raw is None:
            return
        now = orjson.loads(raw)
        if running_instance(now, container) != instance:
            return
        revision = str(now["metadata"]["resourceVersion"])
