"""The HTTP phase of ``controlplane bench watchcache --http-pods N``: pods listed
in pages of 500 over HTTP from a real ``controlplane serve``, once per snapshot
mode.

The pods are written straight into an LMDB store (this process), then a server
is started on it (its own process, ``--watch-cache-snapshot lazy`` or
``copy``), and its pods cache loads them. One client, one keep-alive
connection, follows the continue tokens from the first page to the last;
every page after the first comes from the snapshot the first was read from.
A first, untimed pass parses every page and checks that every pod came.
"""

from __future__ import annotations

import asyncio
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import orjson

import store

__all__ = ["http_lists"]

_LOADED = re.compile(r'controlplane_watch_cache_lock_wait_seconds_count\{resource="pods",role="writer"\} [1-9]')


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _fill(url: str, pods: list[tuple[bytes, bytes]]) -> None:
    st = store.open(url)
    try:
        sem = asyncio.Semaphore(512)

        async def put(key: bytes, value: bytes) -> None:
            async with sem:
                await st.create(key, value)
        await asyncio.gather(*(put(k, v) for k, v in pods))
    finally:
        await st.close()


class _Client:
    """A minimal HTTP/1.1 keep-alive GET client: httpx's pure-Python parsing of
    multi-megabyte pages would measure the client, not the server."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    async def get(self, path: str) -> bytes:
        self.writer.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: application/json\r\n\r\n".encode())
        head = await self.reader.readuntil(b"\r\n\r\n")
        if head[9:12] != b"200":
            raise RuntimeError(f"GET {path}: {head[:12]!r}")
        headers = dict(line.split(b": ", 1) for line in head.split(b"\r\n")[1:] if b": " in line)
        lowered = {k.lower(): v for k, v in headers.items()}
        if b"content-length" in lowered:
            return await self.reader.readexactly(int(lowered[b"content-length"]))
        parts: list[bytes] = []
        while True:  # chunked
            size = int((await self.reader.readuntil(b"\r\n"))[:-2], 16)
            data = await self.reader.readexactly(size + 2)
            if not size:
                return b"".join(parts)
            parts.append(data[:-2])


async def _paginate(client: _Client, limit: int, verify: bool) -> tuple[int, float, set[str]]:
    """One paginated LIST of every pod: (pods, seconds, revisions of the pages). With
    ``verify`` every page is parsed and its items counted; without, only the list's
    metadata (which this server writes first) is, so that the client's JSON
    parsing (tens of ms per 2 MB page here) does not stand in for the server."""
    t = time.perf_counter()
    count, token, revisions = 0, "", set()
    while True:
        params: dict[str, Any] = {"limit": limit}
        if token:
            params["continue"] = token
        raw = await client.get("/api/v1/pods?" + urlencode(params))
        if verify:
            body = orjson.loads(raw)
            count += len(body["items"])
            meta = body["metadata"]
        else:
            meta = orjson.loads(raw[:raw.index(b',"items":[')] + b"}")["metadata"]
            count += limit if meta.get("continue") else 0
        revisions.add(meta["resourceVersion"])
        token = meta.get("continue") or ""
        if not token:
            return count, time.perf_counter() - t, revisions


def _memory(pid: int) -> dict[str, int]:
    """The server's resident memory now, and its peak, in bytes (``/proc/PID/status``)."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM", "RssAnon", "RssFile"):
            out[name] = int(value.split()[0]) * 1024
    return out


async def _serve_and_list(data: Path, mode: str, pods: int, rounds: int, limit: int,
                          memory: dict[str, dict[str, int]]) -> list[float]:
    port = _free_port()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "controlplane", "serve", "--port", str(port), "--data-dir", str(data),
        "--store", f"lmdb://{data}", "--kubeconfig-out", str(data.parent / "kubeconfig"), "--log-level",
        "warning", "--watch-cache-snapshot", mode, "--no-tls",
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, cwd=data.parent)
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=600) as probe:
            deadline = time.monotonic() + 600
            while True:  # up, and the cache loaded (a consistent read waits for it)
                try:
                    r = await probe.get("/api/v1/pods", params={"limit": 1})
                    if r.status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline or proc.returncode is not None:
                    raise RuntimeError("the server did not serve lists in time")
                await asyncio.sleep(0.2)
            # the pods cache has loaded once its load has taken the write lock (a
            # consistent read served earlier came from the store, after 3 s)
            while not _LOADED.search((await probe.get("/metrics")).text):
                if time.monotonic() > deadline:
                    raise RuntimeError("the pods cache did not load in time")
                await asyncio.sleep(0.5)
        memory[mode] = _memory(proc.pid)
        client = _Client(*await asyncio.open_connection("127.0.0.1", port))
        count, _, revisions = await _paginate(client, limit, verify=True)
        if count != pods or len(revisions) != 1:
            raise RuntimeError(f"listed {count} of {pods} pods at {len(revisions)} revisions")
        rates = []
        for _ in range(rounds):
            _, seconds, revisions = await _paginate(client, limit, verify=False)
            if len(revisions) != 1:
                raise RuntimeError(f"one list's pages came from {len(revisions)} revisions")
            rates.append(pods / seconds)
        client.writer.close()
        return rates
    finally:
        proc.terminate()
        await proc.wait()


async def http_lists(pods: list[tuple[bytes, bytes]], rounds: int = 3, limit: int = 500,
                     ) -> tuple[dict[str, list[float]], dict[str, dict[str, int]]]:
    """Pods per second of a paginated LIST of every pod, per mode, ``rounds`` times;
    and the server's memory once its cache had loaded, per mode (``_memory``)."""
    work = Path(tempfile.mkdtemp(prefix="bench-watchcache-"))
    memory: dict[str, dict[str, int]] = {}
    try:
        data = work / "data"
        await _fill(f"lmdb://{data}", pods)
        rates = {mode: await _serve_and_list(data, mode, len(pods), rounds, limit, memory)
                 for mode in ("copy", "lazy")}
        return rates, memory
    finally:
        shutil.rmtree(work, ignore_errors=True)
