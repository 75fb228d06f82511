"""The audit webhook backend and truncation (api/auditwebhook.py), against a receiver on a
real socket: batches as EventLists, sent by size or by wait, retried after a 5xx, split and
truncated by size, and the flags checked as upstream's."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from controlplane.api.audit import BlockingAuditing, parse_policy
from controlplane.api.auditwebhook import TRUNCATED, Truncation, WebhookBackend, WebhookOptions
from controlplane.api.rbac import Request, User
from controlplane.metrics import AUDIT_ERRORS, AUDIT_REJECTED


class Receiver:
    """An HTTP server that records each POSTed body and answers with ``codes`` in turn (then 200)."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.paths: list[str] = []
        self.authorization: list[str] = []
        self.codes: list[int] = []
        self.got = asyncio.Event()
        self.port = 0
        self.writers: list[asyncio.StreamWriter] = []

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.writers.append(writer)
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode().split("\r\n")
                headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:] if line)}
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                code = self.codes.pop(0) if self.codes else 200
                if code == 200:
                    self.bodies.append(orjson.loads(body))
                    self.paths.append(lines[0].split()[1])
                    self.authorization.append(headers.get("authorization", ""))
                    self.got.set()
                writer.write(b"HTTP/1.1 %d X\r\ncontent-length: 2\r\ncontent-type: application/json\r\n\r\n{}"
                             % code)
                await writer.drain()


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    r = Receiver()
    server = await asyncio.start_server(r.handle, "127.0.0.1", 0)
    r.port = server.sockets[0].getsockname()[1]
    try:
        yield r
    finally:
        server.close()
        for writer in r.writers:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()
        await server.wait_closed()


def kubeconfig(tmp_path: Path, port: int) -> Path:
    path = tmp_path / "webhook.kubeconfig"
    path.write_text(f"""
apiVersion: v1
kind: Config
clusters: [{{name: audit, cluster: {{server: "http://127.0.0.1:{port}/events"}}}}]
users: [{{name: api, user: {{token: sekret}}}}]
contexts: [{{name: default, context: {{cluster: audit, user: api}}}}]
current-context: default
""")
    return path


def event(i: int, **extra: Any) -> dict[str, Any]:
    return {"kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": "RequestResponse", "auditID": f"id-{i}",
            "stage": "ResponseComplete", "requestURI": "/api/v1/namespaces/x/configmaps", "verb": "create",
            **extra}


async def test_events_go_as_event_lists_in_batches_of_the_max_size_then_by_the_wait(
        tmp_path: Path, receiver: Receiver) -> None:
    backend = WebhookBackend(WebhookOptions(kubeconfig(tmp_path, receiver.port), max_size=3, max_wait=0.3))
    for i in range(4):
        backend.process(event(i))
    await asyncio.wait_for(receiver.got.wait(), 5)
    first = receiver.bodies[0]
    assert (first["kind"], first["apiVersion"]) == ("EventList", "audit.k8s.io/v1")
    assert [e["auditID"] for e in first["items"]] == ["id-0", "id-1", "id-2"]  # full: sent at once
    assert receiver.paths[0] == "/events" and receiver.authorization[0] == "Bearer sekret"
    for _ in range(50):  # the fourth waits for max_wait, alone
        if len(receiver.bodies) == 2:
            break
        await asyncio.sleep(0.05)
    assert [e["auditID"] for e in receiver.bodies[1]["items"]] == ["id-3"]
    await backend.close()
    assert backend.sent == 4


async def test_an_event_after_a_quiet_spell_goes_within_the_wait(tmp_path: Path, receiver: Receiver) -> None:
    """Once a batch has gone and nothing waits, the next event starts a batch and its wait:
    sent after max_wait, not held until max_size more come."""
    backend = WebhookBackend(WebhookOptions(kubeconfig(tmp_path, receiver.port), max_size=50, max_wait=0.2))
    for i in (1, 2):
        receiver.got.clear()
        backend.process(event(i))
        await asyncio.wait_for(receiver.got.wait(), 5)
        await asyncio.sleep(0.3)  # (the worker idle, its queue empty)
    assert [[e["auditID"] for e in b["items"]] for b in receiver.bodies] == [["id-1"], ["id-2"]]
    await backend.close()


async def test_a_batch_the_webhook_fails_is_sent_again_after_the_backoff(tmp_path: Path, receiver: Receiver) -> None:
    receiver.codes = [503, 500]
    backend = WebhookBackend(WebhookOptions(kubeconfig(tmp_path, receiver.port), max_size=1, initial_backoff=0.05))
    backend.process(event(1))
    await asyncio.wait_for(receiver.got.wait(), 5)
    assert [e["auditID"] for e in receiver.bodies[0]["items"]] == ["id-1"] and receiver.codes == []
    await backend.close()


async def test_a_batch_refused_for_good_is_dropped_and_counted(tmp_path: Path, receiver: Receiver) -> None:
    receiver.codes = [400]
    before = AUDIT_ERRORS.labels("webhook")._value.get()
    backend = WebhookBackend(WebhookOptions(kubeconfig(tmp_path, receiver.port), max_size=1, initial_backoff=0.05))
    backend.process(event(1))
    backend.process(event(2))
    await asyncio.wait_for(receiver.got.wait(), 5)
    await backend.close()
    assert [b["items"][0]["auditID"] for b in receiver.bodies] == ["id-2"]  # the first not sent again
    assert AUDIT_ERRORS.labels("webhook")._value.get() == before + 1


async def test_a_full_buffer_drops_the_event_and_counts_it(tmp_path: Path, receiver: Receiver) -> None:
    before = AUDIT_ERRORS.labels("buffered")._value.get()
    backend = WebhookBackend(WebhookOptions(kubeconfig(tmp_path, receiver.port), buffer_size=2, max_size=5,
                                            max_wait=0.2))
    for i in range(3):
        backend.process(event(i))
    assert AUDIT_ERRORS.labels("buffered")._value.get() == before + 1
    await backend.close()
    assert [e["auditID"] for b in receiver.bodies for e in b["items"]] == ["id-0", "id-1"]


async def test_truncation_drops_the_objects_of_a_large_event_and_splits_batches(
        tmp_path: Path, receiver: Receiver) -> None:
    large = {"data": "x" * 3000}
    pad = "/api/v1/namespaces/x/configmaps?" + "p" * 1100  # each event ~1.3 KB after truncation
    truncation = Truncation(max_event_size=2000, max_batch_size=2000)
    backend = WebhookBackend(WebhookOptions(kubeconfig(tmp_path, receiver.port), max_size=3, max_wait=5,
                                            truncation=truncation))
    backend.process(event(0, requestURI=pad, requestObject=large, responseObject=large))
    backend.process(event(1, requestURI=pad, annotations={"a": "b"}, requestObject={"small": 1}))
    backend.process(event(2, requestURI=pad, requestObject={"small": 2}))
    await backend.close()
    # one batch of three, split: no two of these events fit in 2,000 bytes
    assert [[e["auditID"] for e in b["items"]] for b in receiver.bodies] == [["id-0"], ["id-1"], ["id-2"]]
    sent = [e for b in receiver.bodies for e in b["items"]]
    assert "requestObject" not in sent[0] and "responseObject" not in sent[0]
    assert sent[0]["annotations"] == {TRUNCATED: "true"}
    assert sent[1]["requestObject"] == {"small": 1} and sent[1]["annotations"] == {"a": "b"}
    before = AUDIT_ERRORS.labels("truncate")._value.get()
    assert truncation.encode(event(3, requestURI="/" + "y" * 3000)) is None  # too large even so
    assert AUDIT_ERRORS.labels("truncate")._value.get() == before + 1


def test_options_are_checked_as_upstreams(tmp_path: Path) -> None:
    path = tmp_path / "k"
    with pytest.raises(ValueError, match="invalid audit webhook mode"):
        WebhookOptions(path, mode="eventually")
    for mode in ("batch", "blocking", "blocking-strict"):
        assert WebhookOptions(path, mode=mode).mode == mode
    with pytest.raises(ValueError, match="invalid audit webhook version"):
        WebhookOptions(path, version="audit.k8s.io/v1beta1")
    with pytest.raises(ValueError, match="buffer size"):
        WebhookOptions(path, buffer_size=0)
    with pytest.raises(ValueError, match="max batch size"):
        Truncation(max_event_size=100, max_batch_size=10)
    with pytest.raises(ValueError, match="--audit-webhook-config-file"):
        WebhookBackend(WebhookOptions(path))  # (no such file)


async def test_blocking_modes_send_each_event_now_and_only_strict_reports_a_failure(
        tmp_path: Path, receiver: Receiver) -> None:
    for mode, strict in (("blocking", False), ("blocking-strict", True)):
        backend = WebhookBackend(WebhookOptions(kubeconfig(tmp_path, receiver.port), mode=mode,
                                                initial_backoff=0.01))
        assert backend.blocking
        receiver.bodies.clear()
        assert await backend.send(event(1)) is True  # sent before send returns: an EventList of one
        assert [[e["auditID"] for e in b["items"]] for b in receiver.bodies] == [["id-1"]]
        receiver.codes = [503] * 5  # every try fails
        before = AUDIT_ERRORS.labels("webhook")._value.get()
        assert await backend.send(event(2)) is (not strict)
        assert AUDIT_ERRORS.labels("webhook")._value.get() == before + 1 and len(receiver.bodies) == 1
        await backend.close()


POLICY = "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n"


async def _serve(auditing: BlockingAuditing) -> list[dict[str, Any]]:
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"{}", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    path = "/api/v1/namespaces/x/configmaps"
    await auditing({"type": "http", "method": "POST", "path": path, "raw_path": path.encode(),
                    "query_string": b"fieldManager=a&b", "headers": [], "client": ("192.0.2.1", 4000)},
                   receive, send)
    return sent


async def test_a_blocking_request_waits_for_its_events_and_strict_fails_it_before_its_handler(
        tmp_path: Path, receiver: Receiver) -> None:
    """``BlockingAuditing`` (api/audit.py): the RequestReceived event has reached the webhook
    before the handler goes on, ResponseComplete before the request is done; a webhook that
    fails makes ``blocking-strict`` answer upstream's 500 instead of running the handler."""
    seen_by_handler: list[list[str]] = []

    def stages() -> list[str]:
        return [e["stage"] for b in receiver.bodies for e in b["items"]]

    async def handler(scope: Any, receive: Any, send: Any) -> None:
        scope["user"] = User("alice", ("devs",))
        await receive()
        seen_by_handler.append(stages())
        await send({"type": "http.response.start", "status": 201, "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": b"made"})

    def auditing(mode: str) -> BlockingAuditing:
        backend = WebhookBackend(WebhookOptions(kubeconfig(tmp_path, receiver.port), mode=mode, initial_backoff=0.01))
        return BlockingAuditing(handler, parse_policy(POLICY), backend,
                                lambda scope: Request("create", "", "configmaps", "", "x"), "user", lambda: True)

    blocking = auditing("blocking")
    sent = await _serve(blocking)
    assert sent[0]["status"] == 201 and seen_by_handler == [["RequestReceived"]]
    assert stages() == ["RequestReceived", "ResponseComplete"]
    assert receiver.bodies[0]["items"][0]["user"] == {"username": "alice", "groups": ["devs"]}
    # blocking: a failing webhook is counted, the request goes on
    receiver.codes = [503] * 5
    assert (await _serve(blocking))[0]["status"] == 201 and len(seen_by_handler) == 2
    await blocking.close()
    # blocking-strict: the handler never goes on past its first read
    strict = auditing("blocking-strict")
    receiver.bodies.clear()
    receiver.codes = [503] * 5
    rejected = AUDIT_REJECTED._value.get()
    sent = await _serve(strict)
    assert len(seen_by_handler) == 2 and receiver.bodies == []  # no other event either
    assert sent[0]["status"] == 500 and (b"content-type", b"text/plain; charset=utf-8") in sent[0]["headers"]
    assert sent[1]["body"] == b'Internal Server Error: "/api/v1/namespaces/x/configmaps?fieldManager=a&amp;b": ' \
                              b"failed to store audit event\n"
    assert AUDIT_REJECTED._value.get() == rejected + 1
    assert (await _serve(strict))[0]["status"] == 201  # the webhook back: on again
    await strict.close()
