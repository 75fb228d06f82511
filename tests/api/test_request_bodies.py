"""Bad request bodies over a real socket, in every framing and encoding the server takes, as
kube-apiserver answers them: a Status of the right code, never a 500 or a request that hangs,
and the stored objects untouched. The API server runs in this process under uvicorn with the
project's HTTP/1.1 protocol (api/http1.py), so a test may shorten the server's timeouts.
The last test is the hand-run fuzzer's committed form: valid bodies of four kinds in the seven
encodings the server takes (protobuf, JSON, YAML, four patch types), mutated at the byte level
(special bytes inserted, truncated, cut, flipped) 300 times from a fixed seed."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest

from controlplane.api import http1, rest
from controlplane.api.errors import ApiError
from controlplane.client import Client
from tests.front_socket import front_on_socket

CMS = "/api/v1/namespaces/default/configmaps"
SEED = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "seed"}, "data": {"k": "v"}}


@dataclass
class Served:
    port: int
    client: Client  # in process, for seeding and reading back
    seed: dict[str, Any]


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Served]:
    async with front_on_socket(tmp_path) as (port, c):
        yield Served(port, c, await c.create(CMS, SEED))


async def exchange(port: int, request: bytes, timeout: float = 10,
                   until_closed: bool = False) -> tuple[int, dict[str, Any], bool]:
    """Send ``request`` as is; the answer's status, its Status body, and (``until_closed``)
    whether the server then closed the connection."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(request)
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout)
        lines = head.decode().split("\r\n")
        headers = dict(line.lower().split(": ", 1) for line in lines[1:] if line)
        body = await asyncio.wait_for(reader.readexactly(int(headers["content-length"])), timeout)
        closed = until_closed and await asyncio.wait_for(reader.read(), timeout) == b""
        return int(lines[0].split()[1]), orjson.loads(body), closed
    finally:
        writer.close()


def post(path: str, body: bytes, content_type: str = "application/json", length: int | None = None,
         extra: str = "") -> bytes:
    head = (f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: {content_type}\r\n"
            f"Content-Length: {len(body) if length is None else length}\r\n{extra}\r\n")
    return head.encode() + body


def assert_status(status: dict[str, Any], code: int, reason: str) -> None:
    assert (status["kind"], status["apiVersion"], status["code"], status.get("reason")) == (
        "Status", "v1", code, reason), status


async def assert_seed_unchanged(s: Served) -> None:
    listed = await s.client.get(CMS)
    assert [i["metadata"]["resourceVersion"] for i in listed["items"]] == [s.seed["metadata"]["resourceVersion"]]


# -- framing -------------------------------------------------------------------------------------
async def test_a_body_shorter_than_its_length_is_504_at_the_request_timeout(
        served: Served, monkeypatch: pytest.MonkeyPatch) -> None:
    # kube-apiserver's timeout filter answers a handler still reading its body at --request-timeout;
    # the request held its connection and task forever
    monkeypatch.setattr(http1, "BODY_TIMEOUT", 0.2)  # (this protocol's receive times the body itself)
    body = orjson.dumps({**SEED, "metadata": {"name": "short"}})
    code, status, closed = await exchange(served.port, post(CMS, body, length=len(body) + 100), until_closed=True)
    assert code == 504 and closed
    assert_status(status, 504, "Timeout")
    assert status["message"] == "Timeout: request did not complete within the allotted timeout"
    chunked = (f"POST {CMS} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
               "Transfer-Encoding: chunked\r\n\r\n10\r\n{\"metadata\":").encode()  # stops mid-chunk
    code, status, closed = await exchange(served.port, chunked, until_closed=True)
    assert code == 504 and closed
    await assert_seed_unchanged(served)


async def test_a_body_read_through_uvicorns_protocol_is_bounded_too(monkeypatch: pytest.MonkeyPatch) -> None:
    # (--http-protocol uvicorn: no exchange in the scope, so the read itself is under a timeout)
    monkeypatch.setattr(rest, "BODY_TIMEOUT", 0.05)

    async def never() -> dict[str, Any]:
        await asyncio.sleep(10)
        raise AssertionError("not reached")

    with pytest.raises(ApiError) as refused:
        await rest.KubeApi._body({"headers": [(b"content-length", b"10")]}, never)
    assert (refused.value.code, refused.value.reason) == (504, "Timeout")


async def test_a_body_declared_past_the_limit_is_413_before_it_is_sent(served: Served) -> None:
    code, status, closed = await exchange(served.port, post(CMS, b"", length=rest.MAX_BODY + 1),
                                          until_closed=True)
    assert code == 413 and closed
    assert_status(status, 413, "RequestEntityTooLarge")
    assert status["message"] == "Request entity too large: limit is 3145728"
    await assert_seed_unchanged(served)


# -- YAML ----------------------------------------------------------------------------------------
async def test_yaml_bodies_decode_as_go_reads_them(served: Served) -> None:
    on = b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: keys}\ndata: {on: a, 8080: b}\n"
    code, created, _ = await exchange(served.port, post(CMS, on, "application/yaml"))
    assert code == 201 and created["data"] == {"true": "a", "8080": "b"}
    for bad in (b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: nan}\ndata: {a: .nan}\n",
                b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: null-key}\ndata: {~: a}\n",
                b"a: &a [x,x,x,x,x,x,x,x,x]\n" + b"".join(  # a billion laughs
                    b"%c: &%c [%s]\n" % (98 + i, 98 + i, b",".join([b"*%c" % (97 + i)] * 9)) for i in range(9)),
                b"!!python/object/apply:os.system ['true']\n",
                b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: two}\n---\napiVersion: v1\n"):
        code, status, _ = await exchange(served.port, post(CMS, bad, "application/yaml"))
        assert code == 400, status
        assert_status(status, 400, "BadRequest")
    assert [i["metadata"]["name"] for i in (await served.client.get(CMS))["items"]] == ["keys", "seed"]


# -- DeleteOptions --------------------------------------------------------------------------------
async def test_delete_options_are_decoded_by_their_content_type(served: Served) -> None:
    # upstream negotiates a decoder for a DELETE's body that is not empty: YAML is read (it was
    # refused as JSON that does not parse), a type it has no decoder for is 415 (it was 400)
    def delete(body: bytes, content_type: str) -> bytes:
        return (f"DELETE {CMS}/seed HTTP/1.1\r\nHost: x\r\nContent-Type: {content_type}\r\n"
                f"Content-Length: {len(body)}\r\n\r\n").encode() + body

    code, status, _ = await exchange(served.port, delete(b"dryRun: [All]\npropagationPolicy: Orphan\n",
                                                         "application/yaml"))
    assert code == 200 and status["details"]["name"] == "seed"
    await assert_seed_unchanged(served)  # a dry run: the YAML's options were read
    code, status, _ = await exchange(served.port, delete(b"dryRun: All", "text/plain"))
    assert code == 415
    assert_status(status, 415, "UnsupportedMediaType")
    code, status, _ = await exchange(served.port, delete(b"[All]", "application/yaml"))
    assert code == 400
    await assert_seed_unchanged(served)
    code, status, _ = await exchange(served.port, delete(b"", "text/plain"))  # no body: no decoder
    assert code == 200
    assert (await served.client.list(CMS))["items"] == []


async def test_a_subresources_body_is_decoded_by_its_content_type_too(served: Served) -> None:
    # a binding, an eviction and a token request: YAML read (the binding's was parsed as JSON),
    # a type without a decoder 415 (it was parsed as JSON, 400)
    pods = "/api/v1/namespaces/default/pods"
    await served.client.create(pods, {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}})
    await served.client.create("/api/v1/nodes", {"metadata": {"name": "n"}})
    for sub, body in (("binding", b"target: {kind: Node, name: n}"), ("eviction", b"metadata: {name: p}")):
        code, status, _ = await exchange(served.port, post(f"{pods}/p/{sub}", body, "text/plain"))
        assert code == 415
        assert_status(status, 415, "UnsupportedMediaType")
    code, status, _ = await exchange(served.port, post(f"{pods}/p/binding", b"metadata: {name: p}\n"
                                                       b"target: {kind: Node, name: n}\n", "application/yaml"))
    assert code == 201, status
    assert (await served.client.get(f"{pods}/p"))["spec"]["nodeName"] == "n"


# -- fuzzed over the socket ----------------------------------------------------------------------
def _varint(n: int) -> bytes:
    n &= 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(number: int, kind: Any, value: Any) -> bytes:
    """One field of a message, written by the wire schema the server decodes with."""
    if kind in ("i", "b"):
        return _varint(number << 3) + _varint(int(value))
    data: bytes
    if kind == "s":
        data = value.encode()
    elif kind == "k8s.io.apimachinery.pkg.api.resource.Quantity":
        data = _field(1, "s", str(value))
    elif kind == "k8s.io.apimachinery.pkg.util.intstr.IntOrString":
        data = _field(1, "i", 1) + _field(3, "s", value) if isinstance(value, str) else _field(2, "i", value)
    else:
        data = _message(kind, value)
    return _varint(number << 3 | 2) + _varint(len(data)) + data


def _message(name: str, obj: dict[str, Any]) -> bytes:
    from controlplane.api.protobuf.schema import MESSAGES

    out = b""
    for number, json_name, kind, repeated, _ in MESSAGES[name]:
        value = obj.get(json_name)
        if value is None:
            continue
        if isinstance(kind, tuple):  # a map: entries of key 1 and value 2
            out += b"".join(_varint(number << 3 | 2) + _varint(len(e)) + e
                            for k, v in value.items() for e in [_field(1, kind[1], k) + _field(2, kind[2], v)])
        else:
            out += b"".join(_field(number, kind, item) for item in (value if repeated else [value]))
    return out


def protobuf_of(obj: dict[str, Any]) -> bytes:
    from controlplane.api import protobuf
    from controlplane.api.protobuf.schema import PACKAGES

    raw = _message(f"{PACKAGES[obj['apiVersion']]}.{obj['kind']}", obj)
    type_meta = _field(1, "s", obj["apiVersion"]) + _field(2, "s", obj["kind"])
    return protobuf.MAGIC + _varint(10) + _varint(len(type_meta)) + type_meta + _varint(18) + _varint(len(raw)) + raw


POD: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "spec": {"containers": [
    {"name": "c", "image": "nginx", "ports": [{"containerPort": 80}], "resources": {"requests": {"cpu": "100m"}}}]}}
FUZZED: list[tuple[str, dict[str, Any]]] = [  # (collection, a valid object of a kind with a protobuf form)
    (CMS, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"labels": {"a": "b"}}, "data": {"k": "v"}}),
    ("/api/v1/namespaces/default/pods", POD),
    ("/api/v1/namespaces/default/services", {"apiVersion": "v1", "kind": "Service", "spec": {
        "selector": {"app": "x"}, "ports": [{"name": "h", "port": 80, "targetPort": "http"}]}}),
    ("/apis/apps/v1/namespaces/default/deployments", {"apiVersion": "apps/v1", "kind": "Deployment", "spec": {
        "replicas": 0, "selector": {"matchLabels": {"app": "x"}},
        "template": {"metadata": {"labels": {"app": "x"}}, "spec": POD["spec"]}}}),
]
ENCODINGS = ["application/vnd.kubernetes.protobuf", "application/json", "application/yaml",
             "application/merge-patch+json", "application/strategic-merge-patch+json", "application/json-patch+json",
             "application/apply-patch+yaml"]
SPECIALS = [b"\x00", b"\xff", b"\\", b'"', b"{", b"]", b":", b"\n", b"&a", b"*a", b"!!python/object ", b"~", b"1e999",
            b"\\ud800", b"\xef\xbb\xbf", b"<<: ", b"? ", b"---\n", b"NaN", b"9" * 25, b"\x80" * 11, b"\x0a\xff\xff\x03"]
FUZZ_ITERATIONS = 300


def _body(encoding: str, obj: dict[str, Any]) -> bytes:
    import yaml

    if encoding == "application/vnd.kubernetes.protobuf":
        return protobuf_of(obj)
    if encoding == "application/json-patch+json":
        return orjson.dumps([{"op": "replace", "path": "/metadata/labels", "value": {"a": "c"}},
                             {"op": "test", "path": "/metadata/name", "value": obj["metadata"]["name"]}])
    return yaml.safe_dump(obj).encode() if "yaml" in encoding else orjson.dumps(obj)


def _mutated(body: bytes, rnd: Any) -> bytes:
    out = bytearray(body)
    for _ in range(rnd.choice((1, 1, 2, 3))):
        at, roll = rnd.randrange(len(out) + 1), rnd.random()
        if roll < 0.4:
            out[at:at] = rnd.choice(SPECIALS)
        elif roll < 0.6:
            del out[at:]  # truncated
        elif roll < 0.8:
            del out[at:at + rnd.randint(1, 8)]
        elif out:
            out[min(at, len(out) - 1)] = rnd.randrange(256)
    return bytes(out)


async def test_mutated_bodies_in_every_encoding_are_answered_with_a_status(served: Served) -> None:
    import random

    import httpx

    rnd = random.Random(20261205)
    for collection, obj in FUZZED:  # the object each PUT and patch writes to
        await served.client.create(collection, {**obj, "metadata": {**obj.get("metadata", {}), "name": "t"}})
    answered: dict[int, int] = {}
    wrong: list[str] = []  # an answer that is not a 2xx, nor a 4xx Status of its code
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{served.port}", timeout=10) as web:
        for i in range(FUZZ_ITERATIONS):
            collection, seed = rnd.choice(FUZZED)
            encoding = rnd.choice(ENCODINGS)
            patching = "patch" in encoding
            name = "t" if patching or rnd.random() < 0.3 else f"fz{i}"
            obj = {**seed, "metadata": {**seed.get("metadata", {}), "name": name}}
            body = _mutated(_body(encoding, obj), rnd)
            method = "PATCH" if patching else "POST" if name != "t" else "PUT"
            url = collection if method == "POST" else f"{collection}/t"
            r = await web.request(method, url, content=body, headers={"content-type": encoding},
                                  params={"fieldManager": "fz"} if "apply" in encoding else None)
            answered[r.status_code] = answered.get(r.status_code, 0) + 1
            if r.status_code >= 300:
                status = orjson.loads(r.content)
                if not 400 <= r.status_code < 500 or status.get("kind") != "Status" \
                        or status.get("code") != r.status_code or not status.get("reason"):
                    wrong.append(f"{method} {url} {encoding}: {r.status_code} {r.text}\nbody: {body!r}")
        for collection, _ in FUZZED:  # every stored object still reads back
            assert (await web.get(collection)).status_code == 200
    assert not wrong, "\n".join(wrong)
    assert sum(n for code, n in answered.items() if code < 300) > 10 and answered.get(400, 0) > FUZZ_ITERATIONS // 3
    assert await served.client.get(f"{CMS}/seed") == served.seed  # (no request names it)
