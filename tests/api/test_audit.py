"""The audit layer in process (api/audit.py): off without a policy, the Panic stage, stages omitted."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from controlplane.api.app import _KubeRoutes, create_app
from controlplane.api.audit import Auditing, parse_policy
from controlplane.api.auditlog import LogBackend, LogOptions
from controlplane.api.rbac import Request, User
from controlplane.config import AuditLog, Config

POLICY = "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n"


def test_without_a_policy_and_a_log_the_router_is_served_as_it_is(tmp_path: Path) -> None:
    plain = create_app(Config(data_dir=tmp_path / "a", tls=False))
    assert type(plain.state.front) is _KubeRoutes  # no layer: nothing to pay per request
    (tmp_path / "policy.yaml").write_text(POLICY)
    no_log = create_app(Config(data_dir=tmp_path / "b", tls=False, audit=AuditLog(tmp_path / "policy.yaml")))
    assert type(no_log.state.front) is _KubeRoutes  # a policy without a backend audits nothing (upstream)
    audited = create_app(Config(data_dir=tmp_path / "c", tls=False,
                                audit=AuditLog(tmp_path / "policy.yaml", str(tmp_path / "audit.log"))))
    assert isinstance(audited.state.front, Auditing)
    assert audited.state.front.discovery is not None  # (the router's attributes through the layer)


async def _call(app: Any, path: str, headers: list[tuple[bytes, bytes]] | None = None) -> list[dict[str, Any]]:
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "GET", "path": path, "raw_path": path.encode(), "query_string": b"",
             "headers": headers or [], "client": ("192.0.2.1", 4000)}
    await app(scope, receive, send)
    return sent


def _auditing(tmp_path: Path, app: Any, policy: str = POLICY) -> tuple[Auditing, Path]:
    log = tmp_path / "audit.log"
    return Auditing(app, parse_policy(policy), LogBackend(LogOptions(str(log))),
                    lambda scope: Request("get", path=scope["path"]), "user", lambda: True), log


def test_a_handler_that_raises_is_logged_at_the_panic_stage(tmp_path: Path) -> None:
    async def broken(scope: Any, receive: Any, send: Any) -> None:
        scope["user"] = User("alice", ("devs",))
        raise RuntimeError("boom")

    auditing, log = _auditing(tmp_path, broken)
    with pytest.raises(RuntimeError):
        asyncio.run(_call(auditing, "/broken"))
    stages = [json.loads(line) for line in log.read_text().splitlines()]
    assert [e["stage"] for e in stages] == ["RequestReceived", "Panic"]
    assert stages[1]["responseStatus"] == {"metadata": {}, "status": "Failure",
                                           "message": "APIServer panic'd: RuntimeError('boom')",
                                           "reason": "InternalError", "code": 500}
    assert stages[1]["user"] == {"username": "alice", "groups": ["devs"]}
    assert stages[1]["sourceIPs"] == ["192.0.2.1"]


def test_omitted_stages_are_not_written_and_the_id_is_always_returned(tmp_path: Path) -> None:
    async def hello(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": b"ok"})

    policy = POLICY + "  omitStages: [RequestReceived, ResponseComplete]\n"
    auditing, log = _auditing(tmp_path, hello, policy)
    sent = asyncio.run(_call(auditing, "/hello", [(b"audit-id", b"given")]))
    assert (b"Audit-Id", b"given") in sent[0]["headers"]
    assert not log.exists() or log.read_text() == ""
    none = "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: None\n"
    auditing, log = _auditing(tmp_path, hello, none)
    sent = asyncio.run(_call(auditing, "/hello"))
    assert any(k == b"Audit-Id" for k, _ in sent[0]["headers"]) and log.read_text() == ""


def test_a_query_that_is_no_utf8_is_still_answered_and_logged(tmp_path: Path) -> None:
    from controlplane.api.rbac import verb_of

    async def hello(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 400, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    def attributes(scope: dict[str, Any]) -> Request:
        scope["query_string"].decode()  # (as the router's parse does)
        return Request(verb_of("GET", False, False), path=scope["path"])

    log = tmp_path / "audit.log"
    auditing = Auditing(hello, parse_policy(POLICY), LogBackend(LogOptions(str(log))), attributes, "user",
                        lambda: True)

    async def call() -> list[dict[str, Any]]:
        sent: list[dict[str, Any]] = []

        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": b""}

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        await auditing({"type": "http", "method": "GET", "path": "/api/v1/pods", "query_string": b"a=\xff",
                        "headers": []}, receive, send)
        return sent

    sent = asyncio.run(call())
    assert sent[0]["status"] == 400
    events = [json.loads(line) for line in log.read_text().splitlines()]
    assert [e["stage"] for e in events] == ["RequestReceived", "ResponseComplete"]
    assert events[1]["requestURI"] == "/api/v1/pods?a=\xff" and events[1]["verb"] == "get"
