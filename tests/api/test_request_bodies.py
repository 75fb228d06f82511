"""Bad request bodies over a real socket, in every framing and encoding the server takes, as
kube-apiserver answers them: a Status of the right code, never a 500 or a request that hangs,
and the stored objects untouched. The API server runs in this process under uvicorn with the
project's HTTP/1.1 protocol (api/http1.py), so a test may shorten the server's timeouts."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest

from controlplane.api import rest
from controlplane.api.app import create_app
from controlplane.api.http1 import ServerProtocol
from controlplane.client import Client
from controlplane.config import Config

CMS = "/api/v1/namespaces/default/configmaps"
SEED = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "seed"}, "data": {"k": "v"}}


@dataclass
class Served:
    port: int
    client: Client  # in process, for seeding and reading back
    seed: dict[str, Any]


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Served]:
    import uvicorn

    app = create_app(Config(data_dir=tmp_path / "data", tls=False, scheduler=False))
    async with app.router.lifespan_context(app), Client.in_process(app.state.front) as c:
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        server = uvicorn.Server(uvicorn.Config(app.state.front, http=ServerProtocol, lifespan="off",
                                               log_level="warning", loop="none"))
        task = asyncio.create_task(server.serve(sockets=[sock]))
        while not server.started:
            await asyncio.sleep(0.01)
        try:
            yield Served(sock.getsockname()[1], c, await c.create(CMS, SEED))
        finally:
            server.should_exit = True
            await task


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
    monkeypatch.setattr(rest, "BODY_TIMEOUT", 0.2)
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
