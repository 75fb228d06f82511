"""An exec and an attach as the official JavaScript client (``@kubernetes/client-node`` 2.x,
``Exec``, ``Attach``) makes them, over a real socket: a websocket offering its five
subprotocols, v5 first. kube-apiserver (1.30 and later) upgrades such a request before it
dials the kubelet and reports the failed dial on the error channel (``api/streaming.py``);
the client hands that Status to its status callback. Answered 503 instead, the client's
websocket library rejected the connection with ``Unexpected server response: 503`` and the
Status was lost. Driven here by ``websocket-client`` (the ``kubernetes`` package's), no node
or npm needed."""

from __future__ import annotations

import json
import ssl

import httpx
import websocket
import yaml

from tests.test_cli import Serve

JS_PROTOCOLS = ["v5.channel.k8s.io", "v4.channel.k8s.io", "v3.channel.k8s.io", "v2.channel.k8s.io", "channel.k8s.io"]
PODS = "/api/v1/namespaces/default/pods"


def test_an_exec_and_an_attach_over_the_javascript_clients_websocket_get_the_dial_on_the_error_channel(
        served: Serve) -> None:
    config = yaml.safe_load(served.kubeconfig.read_text())
    token = config["users"][0]["user"]["token"]
    auth = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=served.url, headers=auth) as c:
        assert c.post("/api/v1/nodes", json={"metadata": {"name": "js-node"}}).status_code == 201
        address = {"status": {"addresses": [{"type": "InternalIP", "address": "10.2.0.9"}]}}
        assert c.patch("/api/v1/nodes/js-node/status", json=address,
                       headers={"content-type": "application/merge-patch+json"}).status_code == 200
        assert c.post(PODS, json={"metadata": {"name": "js"}, "spec": {
            "nodeName": "js-node", "containers": [{"name": "c", "image": "busybox"}]}}).status_code == 201
    dial = 'error dialing backend: no kubelet serves node "js-node" (10.2.0.9:10250): ' \
           "this cluster's nodes are simulated and their containers do not run"
    wss = served.url.replace("https://", "wss://")
    for query, ready in (("exec?command=echo&command=hi&container=c&stdout=true&stderr=true&tty=false", 1),
                         ("attach?container=c&stdin=true&stdout=false&stderr=true&tty=false", 2)):
        ws = websocket.create_connection(f"{wss}{PODS}/js/{query}", subprotocols=JS_PROTOCOLS,
                                         header=[f"Authorization: Bearer {token}"],
                                         sslopt={"cert_reqs": ssl.CERT_REQUIRED}, timeout=10)
        try:
            assert ws.getsubprotocol() == "v5.channel.k8s.io"
            assert ws.recv_data(control_frame=True) == (websocket.ABNF.OPCODE_BINARY, bytes([ready]))
            opcode, data = ws.recv_data(control_frame=True)
            assert (opcode, data[:1]) == (websocket.ABNF.OPCODE_BINARY, b"\x03")
            assert json.loads(data[1:]) == {
                "metadata": {}, "status": "Failure", "message": f"Internal error occurred: {dial}",
                "reason": "InternalError", "details": {"causes": [{"message": dial}]}, "code": 500}
            opcode, data = ws.recv_data(control_frame=True)
            assert (opcode, data) == (websocket.ABNF.OPCODE_CLOSE, b"\x03\xe8")
        finally:
            ws.shutdown()  # (the server has closed its end after its close frame)
    # a port-forward's websocket is not translated (upstream dials first): the Status, as an HTTP answer
    r = httpx.get(f"{served.url}{PODS}/js/portforward?ports=80", headers={
        **auth, "Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
        "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==", "Sec-WebSocket-Protocol": "v4.channel.k8s.io"})
    assert (r.status_code, r.json()["message"]) == (503, dial)
