"""pods/exec, attach and portforward (api/streaming.py): the Status kube-apiserver answers at
each step before it would dial the node's kubelet, and the failed dial, since no simulated
node runs one; never a 404 that says the pod does not exist."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.client import Client

PODS = "/api/v1/namespaces/default/pods"
WEBSOCKET = {"connection": "Upgrade", "upgrade": "websocket", "sec-websocket-version": "13",
             "sec-websocket-key": "dGhlIHNhbXBsZSBub25jZQ==", "sec-websocket-protocol": "v5.channel.k8s.io"}
SPDY = {"connection": "Upgrade", "upgrade": "SPDY/3.1", "x-stream-protocol-version": "v4.channel.k8s.io"}


def pod(name: str, *containers: str, node: str | None = None, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": c, "image": "nginx:1.27"} for c in containers],
                     **({"nodeName": node} if node else {}), **spec}}


async def ask(c: Client, method: str, path: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
    r = await c.http.request(method, path, headers=headers)
    return r.status_code, r.json()


@pytest.fixture
async def pods(client: Client) -> Client:
    await client.create("/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
    await client.patch("/api/v1/nodes/n1/status", {"status": {
        "addresses": [{"type": "InternalIP", "address": "10.1.0.7"}],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 10255}}}}, "merge")
    await client.create(PODS, pod("web", "app", node="n1"))
    await client.create(PODS, pod("two", "a", "b", node="n1", initContainers=[{"name": "init", "image": "busybox"}]))
    await client.create(PODS, pod("pending", "app"))
    await client.create(PODS, pod("orphan", "app", node="gone"))
    return client


def frames(data: bytes) -> list[tuple[int, bytes]]:
    """A server's websocket frames (final, unmasked): (opcode, payload) each."""
    out = []
    while data:
        assert data[0] & 0x80 and not data[1] & 0x80, data[:2]
        n, at = data[1], 2
        if n == 126:
            n, at = int.from_bytes(data[2:4], "big"), 4
        elif n == 127:
            n, at = int.from_bytes(data[2:10], "big"), 10
        out.append((data[0] & 0x0F, data[at:at + n]))
        data = data[at + n:]
    return out


async def test_an_upgrade_to_a_bound_pod_fails_at_the_dial_to_its_kubelet(pods: Client) -> None:
    v4 = {**WEBSOCKET, "sec-websocket-protocol": "v4.channel.k8s.io"}
    for method, headers, subs in (("GET", WEBSOCKET, ("portforward?ports=80,8080",)),
                                  ("GET", v4, ("exec?command=ls&stdout=true", "attach?stdout=1")),
                                  ("POST", SPDY, ("exec?command=ls&stdout=true", "attach?stdout=1",
                                                  "portforward?ports=80,8080"))):
        for sub in subs:
            code, status = await ask(pods, method, f"{PODS}/web/{sub}", headers)
            assert code == 503, (method, sub, status)
            assert status["message"].startswith('error dialing backend: no kubelet serves node "n1" (10.1.0.7:10255)')
            assert status["reason"] == "ServiceUnavailable" and status["code"] == 503  # (upstream: 500)
    # no upgrade: upstream's 400, once the pod, its container and its node are found
    assert await ask(pods, "GET", f"{PODS}/web/exec?command=ls") == (400, {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": "Upgrade request required", "reason": "BadRequest", "code": 400})
    assert (await ask(pods, "PUT", f"{PODS}/web/exec", SPDY))[0] == 405


async def test_a_v5_websocket_exec_or_attach_is_upgraded_and_told_of_the_dial_on_its_error_channel(
        pods: Client) -> None:
    """As kube-apiserver's stream translator (1.30 and later): 101 with the subprotocol, an empty
    message on the first channel read, the dial's InternalError on channel 3, a close."""
    offered = {**WEBSOCKET, "sec-websocket-protocol": "v5.channel.k8s.io, v4.channel.k8s.io, channel.k8s.io"}
    dial = 'error dialing backend: no kubelet serves node "n1" (10.1.0.7:10255): ' \
           "this cluster's nodes are simulated and their containers do not run"
    for sub, first in (("exec?command=ls&stdout=true&stderr=true", 1), ("exec?command=ls&stderr=1", 2),
                       ("attach?stdin=true", 3), ("two/attach?container=init&stdout=1", 1)):
        path = f"{PODS}/{sub}" if sub.startswith("two/") else f"{PODS}/web/{sub}"
        r = await pods.http.request("GET", path, headers=offered)
        assert r.status_code == 101, (sub, r.text)
        assert (r.headers["upgrade"], r.headers["connection"], r.headers["sec-websocket-protocol"]) == \
            ("websocket", "Upgrade", "v5.channel.k8s.io")
        assert r.headers["sec-websocket-accept"] == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="  # RFC 6455's example key's
        assert "content-length" not in r.headers and "transfer-encoding" not in r.headers
        (op1, ready), (op2, error), (op3, close) = frames(r.content)
        assert (op1, ready, op2, error[:1], op3, close) == (2, bytes([first]), 2, b"\x03", 8, b"\x03\xe8"), sub
        assert error[1:] == (b'{"metadata":{},"status":"Failure","message":"Internal error occurred: %s",'
                             b'"reason":"InternalError","details":{"causes":[{"message":"%s"}]},"code":500}'
                             % (dial.encode(), dial.encode())).replace(b'"n1"', b'\\"n1\\"'), sub
    # the steps before the dial answer as before, over HTTP (upstream's location comes first)
    code, status = await ask(pods, "GET", f"{PODS}/pending/exec?command=ls", offered)
    assert (code, status["message"]) == (400, "pod pending does not have a host assigned")
    code, status = await ask(pods, "GET", f"{PODS}/web/exec?command=ls&container=other", offered)
    assert (code, status["message"]) == (400, "container other is not valid for pod web")
    # not a handshake upstream's websocket server takes: the Status, as for any other upgrade
    for broken in ({**offered, "sec-websocket-version": "8"}, {k: v for k, v in offered.items()
                                                               if k != "sec-websocket-key"}):
        assert (await ask(pods, "GET", f"{PODS}/web/exec?command=ls", broken))[0] == 503


STEPS = [  # (path, code, message): one app for them all, each case a request
    ("nope/exec?command=ls", 404, 'pods "nope" not found'),
    ("web/exec?command=ls&container=other", 400, "container other is not valid for pod web"),
    ("two/exec?command=ls", 400, "a container name must be specified for pod two, choose one of: [init a b]"),
    ("two/attach?container=init", 503, None),  # an init container is one of the pod's
    ("pending/exec?command=ls", 400, "pod pending does not have a host assigned"),
    ("pending/portforward?ports=80", 400, "pod pending does not have a host assigned"),
    ("orphan/exec?command=ls", 404, 'nodes "gone" not found'),
    ("web/portforward?ports=http", 400, 'strconv.ParseInt: parsing "http": invalid syntax'),
    ("web/exec?command=ls&dryRun=All", 400, "dryRun is not supported"),
]


async def test_each_step_before_the_dial_fails_as_upstream(pods: Client) -> None:
    for path, code, message in STEPS:
        got, status = await ask(pods, "POST", f"{PODS}/{path}", SPDY)
        assert got == code and status["code"] == code, (path, status)
        assert message is None or status["message"] == message, (path, status)


async def test_discovery_lists_the_streaming_subresources(client: Client) -> None:
    listed = {r["name"]: r for r in (await client.get("/api/v1"))["resources"]}
    for sub, kind in (("exec", "PodExecOptions"), ("attach", "PodAttachOptions"),
                      ("portforward", "PodPortForwardOptions")):
        assert listed[f"pods/{sub}"]["kind"] == kind and listed[f"pods/{sub}"]["verbs"] == ["create", "get"]


async def test_the_proxy_subresources_fail_as_upstreams_proxy_when_nothing_answers(pods: Client) -> None:
    """pods, services and nodes ``/proxy[/path]`` (api/proxying.py): upstream's steps to the
    address, then its proxy transport's 503 for a dial that fails."""
    await pods.create("/api/v1/namespaces/default/services", {"apiVersion": "v1", "kind": "Service", "metadata": {
        "name": "svc"}, "spec": {"selector": {"a": "b"}, "ports": [{"name": "http", "port": 80}]}})
    await pods.create("/api/v1/namespaces/default/endpoints", {"apiVersion": "v1", "kind": "Endpoints", "metadata": {
        "name": "svc"}, "subsets": [{"addresses": [{"ip": "10.2.0.9"}], "ports": [{"name": "http", "port": 8080}]}]})
    await pods.patch(f"{PODS}/web/status", {"status": {"podIP": "10.2.0.9", "podIPs": [{"ip": "10.2.0.9"}]}}, "merge")
    unreachable = "error trying to reach service: this server does not forward to "
    for path, code, message in [
        (f"{PODS}/web/proxy/healthz?x=1", 503, unreachable + "http://10.2.0.9"),
        (f"{PODS}/https:web:8443/proxy", 503, unreachable + "https://10.2.0.9:8443"),
        (f"{PODS}/pending/proxy/", 400, "address not allowed"),  # no IP yet
        (f"{PODS}/ftp:web:21/proxy/", 400, 'invalid pod request "ftp:web:21"'),
        (f"{PODS}/nope/proxy/", 404, 'pods "nope" not found'),
        ("/api/v1/namespaces/default/services/svc:http/proxy/a/b", 503, unreachable + "http://10.2.0.9:8080"),
        ("/api/v1/namespaces/default/services/svc:80/proxy/", 503, unreachable + "http://10.2.0.9:8080"),
        ("/api/v1/namespaces/default/services/svc:81/proxy/", 503, 'no service port 81 found for service "svc"'),
        ("/api/v1/namespaces/default/services/svc/proxy/", 503, 'no endpoints available for service "svc"'),
        ("/api/v1/nodes/n1/proxy/metrics", 503, unreachable + "https://10.1.0.7:10255"),
        ("/api/v1/nodes/n1:9100/proxy/metrics", 503, unreachable + "http://10.1.0.7:9100"),
        ("/api/v1/nodes/gone/proxy/", 404, 'nodes "gone" not found'),
        (f"{PODS}/web/proxy/?dryRun=All", 400, "dryRun is not supported"),
    ]:
        got, status = await ask(pods, "GET", path)
        assert got == code and status["code"] == code, (path, status)
        assert status["message"].startswith(message), (path, status)
    assert (await ask(pods, "DELETE", f"{PODS}/web/proxy/x"))[0] == 503  # any method a backend may take
    assert (await ask(pods, "GET", f"{PODS}/web/status/x"))[0] == 404  # only a proxy's path goes on
    listed = {r["name"]: r for r in (await pods.get("/api/v1"))["resources"]}
    assert (listed["services/proxy"]["kind"], listed["nodes/proxy"]["verbs"]) == \
        ("ServiceProxyOptions", ["create", "delete", "get", "patch", "update"])


async def test_a_service_without_endpoints_is_named_by_its_name_not_the_urls_id(client: Client) -> None:
    """Upstream names the service (not ``name:port``) when its Endpoints have no subset, and
    the URL's id when no subset has a ready address on the port."""
    await client.create("/api/v1/namespaces/default/services", {"apiVersion": "v1", "kind": "Service", "metadata": {
        "name": "idle"}, "spec": {"ports": [{"name": "http", "port": 80}]}})
    await client.create("/api/v1/namespaces/default/endpoints", {"apiVersion": "v1", "kind": "Endpoints",
                                                                 "metadata": {"name": "idle"}})
    got, status = await ask(client, "GET", "/api/v1/namespaces/default/services/https:idle:80/proxy/")
    assert (got, status["message"]) == (503, 'no endpoints available for service "idle"')
    await client.patch("/api/v1/namespaces/default/endpoints/idle", {"subsets": [
        {"notReadyAddresses": [{"ip": "10.2.0.9"}], "ports": [{"name": "http", "port": 8080}]}]}, "merge")
    got, status = await ask(client, "GET", "/api/v1/namespaces/default/services/idle:http/proxy/")
    assert (got, status["message"]) == (503, 'no endpoints available for service "idle:http"')


async def test_a_pod_whose_ip_is_not_global_unicast_is_no_proxy_address(pods: Client) -> None:
    """Upstream's pod ResourceLocation refuses an IP that is not global unicast (loopback,
    link-local such as a cloud's metadata address): 400 before any dial. (An IPv4-mapped one,
    ``::ffff:127.0.0.1``, is no longer a pod IP a status may write: StrictIPCIDRValidation.)"""
    for ip, code in (("127.0.0.1", 400), ("169.254.169.254", 400), ("fe80::1", 400),
                     ("10.2.0.9", 503), ("fd00::9", 503)):
        await pods.patch(f"{PODS}/web/status", {"status": {"podIP": ip, "podIPs": [{"ip": ip}]}}, "merge")
        got, status = await ask(pods, "GET", f"{PODS}/web/proxy/")
        assert got == code, (ip, status)
        assert code != 400 or status["message"] == "address not allowed"
