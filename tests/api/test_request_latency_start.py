"""A request's latency in the API's request metrics starts when the HTTP server took the
request up (``RECEIVED_SCOPE_KEY``, api/http1.py), not when its handler first ran: the wait
for a busy event loop is part of what a client waits, and of upstream's SLI, which counts
from the moment the apiserver gets the request."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from controlplane.api.app import create_app
from controlplane.api.http1 import RECEIVED_SCOPE_KEY
from controlplane.config import Config
from controlplane.metrics import REQUEST_BUCKETS, REQUESTS


async def _get(app: Any, path: str, received: float | None) -> int:
    scope: dict[str, Any] = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET",
                             "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"",
                             "root_path": "", "headers": [(b"host", b"x")], "client": ("127.0.0.1", 1),
                             "server": ("127.0.0.1", 2), "state": {}}
    if received is not None:
        scope[RECEIVED_SCOPE_KEY] = received
    status = 0

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]

    await app(scope, receive, send)
    return status


def _over(resource: str, seconds: float) -> int:
    """Requests for ``resource`` answered 404 that took more than ``seconds``."""
    first = next(i for i, b in enumerate(REQUEST_BUCKETS) if b >= seconds) + 1
    return int(sum(sum(counts[first:-1]) for key, counts in REQUESTS.series.items()
                   if key[4] == resource and key[-1] == "404"))


async def test_the_wait_before_the_handler_ran_is_counted(tmp_path: Path) -> None:
    app = create_app(Config(data_dir=tmp_path / "data", tls=False, scheduler=False))
    async with app.router.lifespan_context(app):
        front = app.state.front
        before = _over("configmaps", 2.0)
        assert await _get(front, "/api/v1/namespaces/default/configmaps/nope", time.perf_counter() - 2.5) == 404
        assert _over("configmaps", 2.0) == before + 1
        # a scope without the stamp (another ASGI server): timed from the handler's start, as before
        assert await _get(front, "/api/v1/namespaces/default/configmaps/nope", None) == 404
        assert _over("configmaps", 2.0) == before + 1
