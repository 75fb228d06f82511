"""The audit webhook backend: kube-apiserver's ``--audit-webhook-*`` flags
(``plugin/pkg/audit/webhook`` behind ``plugin/pkg/audit/buffered``), and event truncation,
``--audit-log-truncate-*`` and ``--audit-webhook-truncate-*`` (``plugin/pkg/audit/truncate``).

``--audit-webhook-config-file`` is a kubeconfig: its current context's cluster ``server`` is
the URL the events are POSTed to, as an ``audit.k8s.io/v1`` ``EventList``, with the cluster's
CA and the user's client certificate or token. In ``batch`` mode, upstream's default, the
events are queued (at most ``--audit-webhook-batch-buffer-size``; past it an event is dropped
and counted in ``apiserver_audit_error_total{plugin="buffered"}``) and sent by one task in
batches of at most ``--audit-webhook-batch-max-size``, once that many are queued or the oldest
has waited ``--audit-webhook-batch-max-wait``, at most ``--audit-webhook-batch-throttle-qps``
batches a second (bursts of ``--audit-webhook-batch-throttle-burst``) unless
``--audit-webhook-batch-throttle-enable=false``. A batch the webhook refuses (a connection
error, 429 or 5xx) is sent again after ``--audit-webhook-initial-backoff``, 1.5 times longer
each time (jitter 0.2, five tries, as upstream's ``wait.Backoff``), then dropped and counted
(``plugin="webhook"``); any other answer than 2xx drops it at once.

``--audit-webhook-mode blocking`` and ``blocking-strict``, as upstream's: no queue; each event
is POSTed alone (an EventList of one, tried again as a batch is) while its request waits
(``send``; ``api/audit.py``'s ``BlockingAuditing``). In ``blocking`` a failure is counted and
the request goes on; in ``blocking-strict`` a RequestReceived event that could not be sent
fails its request with a 500 before the handler goes on (the other stages' failures are
counted only, as upstream's). A webhook that is slow or failing makes every audited request
as slow: upstream's trade, which only these modes make. With a log beside, the log's
writes are as its own mode says. The ``--audit-webhook-batch-*`` flags do not apply.

Truncation, when enabled: an event whose JSON is larger than ``max event size`` loses its
``requestObject`` and ``responseObject`` (at level ``Request`` and above) and is annotated
``audit.k8s.io/truncated: "true"``; still too large, it is dropped and counted
(``plugin="truncate"``). A webhook batch is also split so that none is larger than ``max
batch size``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import orjson

from ..client.client import KubeconfigError, kubeconfig_target
from ..metrics import AUDIT_ERRORS

__all__ = ["Truncation", "WebhookBackend", "WebhookOptions", "WEBHOOK_MODES"]

log = logging.getLogger(__name__)

WEBHOOK_MODES = ("batch", "blocking", "blocking-strict")
VERSIONS = ("audit.k8s.io/v1",)
TRUNCATED = "audit.k8s.io/truncated"
_LIST_HEAD = b'{"kind":"EventList","apiVersion":"audit.k8s.io/v1","metadata":{},"items":['
_LIST_TAIL = b"]}"
_TRIES = 5  # upstream's retry backoff Steps
_FACTOR, _JITTER = 1.5, 0.2


@dataclass(frozen=True, slots=True)
class Truncation:
    """``--audit-*-truncate-max-event-size`` and ``-max-batch-size`` (upstream's defaults: 100 KiB
    and 10 MiB), when ``--audit-*-truncate-enabled``."""

    max_event_size: int = 100 * 1024
    max_batch_size: int = 10 * 1024 * 1024

    def __post_init__(self) -> None:
        if self.max_event_size <= 0:
            raise ValueError(f"invalid truncate max event size {self.max_event_size}, must be a positive number")
        if self.max_batch_size < self.max_event_size:
            raise ValueError(f"invalid truncate max batch size {self.max_batch_size}, must be greater than "
                             f"or equal to the max event size {self.max_event_size}")

    def encode(self, event: Mapping[str, Any]) -> bytes | None:
        """The event's JSON, truncated if it must be; None (counted) if it is too large even so."""
        data = orjson.dumps(event)
        if len(data) > self.max_event_size and ("requestObject" in event or "responseObject" in event):
            event = {k: v for k, v in event.items() if k not in ("requestObject", "responseObject")}
            event["annotations"] = {**(event.get("annotations") or {}), TRUNCATED: "true"}
            data = orjson.dumps(event)
        if len(data) > self.max_event_size:
            _error("truncate", "an audit event is too large even after truncating: dropped")
            return None
        return data


@dataclass(frozen=True, slots=True)
class WebhookOptions:
    """The ``--audit-webhook-*`` flags, checked as upstream's ``AuditWebhookOptions.Validate``."""

    config_file: Path
    mode: str = "batch"
    buffer_size: int = 10000
    max_size: int = 400
    max_wait: float = 30.0
    throttle_enable: bool = True
    throttle_qps: float = 10.0
    throttle_burst: int = 15
    initial_backoff: float = 10.0
    version: str = "audit.k8s.io/v1"
    truncation: Truncation | None = None

    def __post_init__(self) -> None:
        errors = []
        if self.mode not in WEBHOOK_MODES:
            errors.append(f"invalid audit webhook mode {self.mode}, allowed modes are {','.join(WEBHOOK_MODES)!r}")
        if self.version not in VERSIONS:
            errors.append(f"invalid audit webhook version {self.version}, allowed versions are {VERSIONS[0]!r}")
        if self.buffer_size <= 0:
            errors.append(f"invalid audit batch webhook buffer size {self.buffer_size}, must be a positive number")
        if self.max_size <= 0:
            errors.append(f"invalid audit batch webhook max size {self.max_size}, must be a positive number")
        if self.max_wait <= 0:
            errors.append(f"invalid audit batch webhook max wait {self.max_wait}s, must be a positive number")
        if self.throttle_enable and (self.throttle_qps <= 0 or self.throttle_burst <= 0):
            errors.append("invalid audit batch webhook throttle: qps and burst must be positive numbers")
        if self.initial_backoff <= 0:
            errors.append(f"invalid audit webhook initial backoff {self.initial_backoff}s, must be positive")
        if errors:
            raise ValueError("; ".join(errors))


def _error(plugin: str, message: str, _logged: dict[str, float] = {}) -> None:  # noqa: B006 (one line per 10 s)
    AUDIT_ERRORS.labels(plugin).inc()
    now = time.monotonic()
    if now - _logged.get(plugin, -1e9) > 10.0:
        _logged[plugin] = now
        log.error("%s", message)


class WebhookBackend:
    """Where events go: ``process(event)`` from the event loop, ``close()`` at shutdown (what is
    queued is sent first, one try each)."""

    def __init__(self, options: WebhookOptions) -> None:
        self.options = options
        try:
            self.url, token, verify = kubeconfig_target(options.config_file)
        except KubeconfigError as e:
            raise ValueError(f"--audit-webhook-config-file: {e}") from None
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self._http = httpx.AsyncClient(verify=verify, headers=headers, timeout=30.0, trust_env=False)
        self._queue: deque[bytes] = deque()
        self._oldest = 0.0  # (monotonic) when the oldest queued event came
        self._wake: asyncio.Event | None = None
        self._worker: asyncio.Task[None] | None = None
        self._closing = False
        self._tokens = float(options.throttle_burst)
        self._refilled = time.monotonic()
        self.sent = 0  # events the webhook took
        self.blocking = options.mode != "batch"  # each event by ``send``, in the request's time (api/audit.py)
        self._strict = options.mode == "blocking-strict"

    async def send(self, event: Mapping[str, Any]) -> bool:
        """A ``blocking`` mode's: POST the event (an EventList of one) now, tried again after a
        connection error, a 429 or a 5xx as a batch is; False when it could not be sent, in
        ``blocking-strict`` only (``blocking`` ignores the failure, as upstream's
        ``ignoreErrorsBackend``; an event too large even truncated is dropped and counted, not
        a failure, as upstream's truncating backend)."""
        truncation = self.options.truncation
        data = truncation.encode(event) if truncation is not None else orjson.dumps(event)
        if data is None:
            return True
        return await self._post([data]) or not self._strict

    def process(self, event: Mapping[str, Any]) -> None:
        truncation = self.options.truncation
        data = truncation.encode(event) if truncation is not None else orjson.dumps(event)
        if data is None:
            return
        if len(self._queue) >= self.options.buffer_size:
            _error("buffered", "the audit webhook buffer queue is full: an event was dropped")
            return
        first = not self._queue  # (a batch starts: its wait starts with it)
        if first:
            self._oldest = time.monotonic()
        self._queue.append(data)
        if self._worker is None:
            self._wake = asyncio.Event()
            self._worker = asyncio.get_running_loop().create_task(self._send_forever(), name="audit-webhook")
        if first or len(self._queue) >= self.options.max_size:
            assert self._wake is not None
            self._wake.set()

    async def close(self) -> None:
        worker, self._worker = self._worker, None
        if worker is not None and self._wake is not None:
            self._closing = True
            self._wake.set()
            try:
                await asyncio.wait_for(worker, 30.0)
            except TimeoutError:
                log.error("audit webhook: %d events not sent at shutdown", len(self._queue))
        await self._http.aclose()

    async def _send_forever(self) -> None:
        """Sends a batch once ``max_size`` events wait, or the oldest has waited ``max_wait``,
        or at close. Woken by ``process`` when a batch starts and when one is full."""
        assert self._wake is not None
        options = self.options
        while True:
            if not self._queue:
                if self._closing:
                    return
                await self._wake.wait()
                self._wake.clear()
                continue
            if not self._closing and len(self._queue) < options.max_size:
                wait = options.max_wait - (time.monotonic() - self._oldest)
                if wait > 0:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._wake.wait(), wait)
                    self._wake.clear()
                    continue  # (again: full, closing, or waited long enough)
            batch = [self._queue.popleft() for _ in range(min(options.max_size, len(self._queue)))]
            if self._queue:
                self._oldest = time.monotonic()
            if options.throttle_enable and not self._closing:
                await self._throttle()
            for part in self._split(batch):
                await self._post(part)

    async def _throttle(self) -> None:
        """A token bucket of ``throttle_burst`` tokens filled at ``throttle_qps`` a second."""
        options = self.options
        now = time.monotonic()
        self._tokens = min(float(options.throttle_burst), self._tokens + (now - self._refilled) * options.throttle_qps)
        self._refilled = now
        if self._tokens < 1.0:
            await asyncio.sleep((1.0 - self._tokens) / options.throttle_qps)
            self._tokens, self._refilled = 1.0, time.monotonic()
        self._tokens -= 1.0

    def _split(self, batch: list[bytes]) -> list[list[bytes]]:
        truncation = self.options.truncation
        if truncation is None:
            return [batch]
        parts: list[list[bytes]] = [[]]
        size = 0
        for data in batch:
            if parts[-1] and size + len(data) > truncation.max_batch_size:
                parts.append([])
                size = 0
            parts[-1].append(data)
            size += len(data)
        return parts

    async def _post(self, batch: list[bytes]) -> bool:
        body = _LIST_HEAD + b",".join(batch) + _LIST_TAIL
        delay = self.options.initial_backoff
        for attempt in range(1 if self._closing else _TRIES):
            if attempt:
                await asyncio.sleep(delay * (1 + random.random() * _JITTER))
                delay *= _FACTOR
            try:
                answer = await self._http.post(self.url, content=body)
            except httpx.HTTPError as e:
                problem = f"{type(e).__name__}: {e}"
            else:
                if 200 <= answer.status_code < 300:
                    self.sent += len(batch)
                    return True
                problem = f"{answer.status_code} {answer.text[:200]}"
                if answer.status_code != 429 and answer.status_code < 500:
                    break  # (refused for good: not sent again)
        _error("webhook", f"audit webhook {self.url}: {len(batch)} events not sent: {problem}")
        return False
