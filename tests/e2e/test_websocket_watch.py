"""Watches over a websocket, over a real socket, as fabric8's kubernetes-client asks for them
(its watches and informers try a websocket first, with an ``Origin``, and fall back to a plain
watch only on a 200 or 503 handshake answer): kube-apiserver upgrades them (101) and sends each
event as a text message (``api/websocket.py``). Before, this server answered the upgrade with the
plain chunked watch, whose body Java's websocket handshake read to its end: a fabric8 watch
without ``timeoutSeconds`` (every informer's) stalled until the server's watch timeout."""

from __future__ import annotations

import ssl
import time
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest
import websocket

from controlplane.tokens import find_admin, read_token_file
from tests.test_cli import Serve, running, start_serve

NS = "ws-watch"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    tmp = tmp_path_factory.mktemp("ws-watch")
    (tmp / "audit.yaml").write_text("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n"
                                    "  verbs: [watch]\n  resources: [{group: '', resources: [configmaps]}]\n")
    with running(start_serve(tmp, extra=("--audit-policy-file", str(tmp / "audit.yaml"),
                                         "--audit-log-path", str(tmp / "audit.log")))) as s:
        yield s


def audited_codes(s: Serve, namespace: str) -> list[tuple[str, int]]:
    """The audit log's stages and codes of the namespace's watches."""
    log = s.state.parent / "audit.log"
    events = [orjson.loads(line) for line in log.read_bytes().splitlines()] if log.exists() else []
    return [(e["stage"], e["responseStatus"]["code"]) for e in events
            if e.get("objectRef", {}).get("namespace") == namespace and "responseStatus" in e]


def token(s: Serve) -> str:
    admin = find_admin(read_token_file(s.tokens))
    assert admin is not None
    return admin.token


@pytest.fixture(scope="module")
def http(served: Serve) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=served.url, headers={"authorization": f"Bearer {token(served)}"}, timeout=15) as c:
        assert c.post("/api/v1/namespaces", json={"metadata": {"name": NS}}).status_code == 201
        yield c


def connect(s: Serve, path: str, **options: Any) -> websocket.WebSocket:
    """A websocket to ``path`` as fabric8's JDK client opens one: an ``Origin`` of the server's
    scheme, host and port (websocket-client's own, unless suppressed), the bearer token."""
    return websocket.create_connection(
        s.url.replace("https://", "wss://") + path, timeout=15,
        header=[f"Authorization: Bearer {token(s)}"], sslopt={"cert_reqs": ssl.CERT_REQUIRED,
                                                                 "ca_certs": ssl.get_default_verify_paths().cafile},
        **options)


def cm(name: str, **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": NS}, "data": data}


def message(ws: websocket.WebSocket) -> dict[str, Any]:
    """The next message: one event, in a text frame, its JSON ended by a newline."""
    opcode, data = ws.recv_data()
    assert opcode == websocket.ABNF.OPCODE_TEXT
    assert data.endswith(b"\n") and data.count(b"\n") == 1
    event: dict[str, Any] = orjson.loads(data)
    return event


def test_a_watch_upgraded_to_a_websocket_sends_each_event_as_a_message(served: Serve, http: httpx.Client) -> None:
    before = http.post(f"/api/v1/namespaces/{NS}/configmaps", json=cm("before", a="1")).json()
    rv = before["metadata"]["resourceVersion"]
    ws = connect(served, f"/api/v1/namespaces/{NS}/configmaps?allowWatchBookmarks=true&watch=true")
    try:
        assert ws.status == 101 and ws.getheaders()["upgrade"].lower() == "websocket"
        first = message(ws)  # no resourceVersion: the state first, as a plain watch
        assert (first["type"], first["object"]["metadata"]["name"]) == ("ADDED", "before")
        for name in ("a", "b", "c"):  # live events, each its own message
            assert http.post(f"/api/v1/namespaces/{NS}/configmaps", json=cm(name)).status_code == 201
        assert http.delete(f"/api/v1/namespaces/{NS}/configmaps/a").status_code == 200
        got = [message(ws) for _ in range(4)]
        assert [(e["type"], e["object"]["metadata"]["name"]) for e in got] == [
            ("ADDED", "a"), ("ADDED", "b"), ("ADDED", "c"), ("DELETED", "a")]
        ws.ping(b"still there?")
        opcode, frame = ws.recv_data_frame(control_frame=True)
        assert (opcode, frame.data) == (websocket.ABNF.OPCODE_PONG, b"still there?")
        # the client's close ends the watch: the server closes too (1000) and hangs up
        ws.send_close(websocket.STATUS_NORMAL)
        opcode, frame = ws.recv_data_frame(control_frame=True)
        assert opcode == websocket.ABNF.OPCODE_CLOSE and frame.data[:2] == b"\x03\xe8"
    finally:
        ws.shutdown()
    # audited with 101, as upstream's audit filter records a hijacked connection
    deadline = time.monotonic() + 10
    while len(audited_codes(served, NS)) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert audited_codes(served, NS) == [("ResponseStarted", 101), ("ResponseComplete", 101)]
    # from a resourceVersion, as an informer's watch after its list
    ws = connect(served, f"/api/v1/namespaces/{NS}/configmaps?watch=true&resourceVersion={rv}&timeoutSeconds=1")
    try:
        got = [message(ws) for _ in range(4)]
        assert [(e["type"], e["object"]["metadata"]["name"]) for e in got] == [
            ("ADDED", "a"), ("ADDED", "b"), ("ADDED", "c"), ("DELETED", "a")]
        # timeoutSeconds passes: the server's close frame, then the end of the connection
        opcode, frame = ws.recv_data_frame(control_frame=True)
        assert opcode == websocket.ABNF.OPCODE_CLOSE and frame.data[:2] == b"\x03\xe8"
    finally:
        ws.shutdown()


def test_a_watch_that_fails_before_its_stream_is_a_plain_status(served: Serve, http: httpx.Client) -> None:
    """As upstream: the watch is made before the handshake, so its own errors are Statuses the
    client reads off the refused handshake (fabric8 throws them as they are)."""
    with pytest.raises(websocket.WebSocketBadStatusException) as e:
        connect(served, f"/api/v1/namespaces/{NS}/configmaps?watch=true&labelSelector=a%20b")
    assert e.value.status_code == 400
    assert orjson.loads(e.value.resp_body or b"{}")["kind"] == "Status"


def test_a_bad_handshake_gets_x_net_websockets_answers(served: Serve, http: httpx.Client) -> None:
    """kube-apiserver's websocket watches are x/net's ``websocket.Handler``: no ``Origin`` 403
    (fabric8 sends one for this), a version other than 13 400 naming 13."""
    path = f"/api/v1/namespaces/{NS}/configmaps?watch=true"
    with pytest.raises(websocket.WebSocketBadStatusException) as e:
        connect(served, path, suppress_origin=True)
    assert e.value.status_code == 403
    handshake = {"connection": "Upgrade", "upgrade": "websocket", "sec-websocket-key": "dGhlIHNhbXBsZSBub25jZQ==",
                 "origin": served.url}
    r = http.get(path, headers={**handshake, "sec-websocket-version": "8"})
    assert (r.status_code, r.headers["sec-websocket-version"]) == (400, "13")
    # a request that is no upgrade is the plain watch, as before
    with http.stream("GET", path + "&timeoutSeconds=1") as r:
        assert r.status_code == 200 and r.headers["transfer-encoding"] == "chunked"
