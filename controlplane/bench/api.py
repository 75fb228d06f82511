"""``controlplane bench api``: pod creates and gets per second over HTTP, beside the
ceiling of the stack (a bare ASGI app on the same uvicorn server and HTTP protocol
doing an orjson load and dump of the same body), measured in the same run.

Each ``--http-protocols`` entry (``serve --http-protocol``: this project's
``api/http1.py`` or uvicorn's httptools protocol) is measured in turn, server and
bare peer alike; a ``controlplane`` line then carries the ``uvicorn`` one's value
as ``uvicorn_value`` and the ratio to it as ``uvicorn_ratio``.

The server runs as its own process (``controlplane serve``, LMDB store). The
load comes from ``wrk`` (Debian's package; ``make bench`` installs it) with one
thread and ``--connections`` keep-alive connections, reading pre-built request
bodies; without wrk, from a minimal asyncio HTTP/1.1 client in this process,
which is itself a bottleneck on two cores (the lines then say ``"client":
"python"``). Prints JSON lines like every benchmark.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

from . import help_text

BENCH = "api"

BASELINE_APP = '''
import sys

import orjson
import uvicorn

async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    body = b""
    while True:
        m = await receive()
        body += m.get("body", b"")
        if not m.get("more_body"):
            break
    out = orjson.dumps(orjson.loads(body)) if body else b'{"kind":"Pod"}'
    await send({"type": "http.response.start", "status": 201 if body else 200,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(out)).encode())]})
    await send({"type": "http.response.body", "body": out})

if __name__ == "__main__":  # baseline.py PORT controlplane|uvicorn
    from controlplane.api.http1 import ServerProtocol

    uvicorn.run(app, port=int(sys.argv[1]), loop="uvloop", log_level="warning", access_log=False,
                http=ServerProtocol if sys.argv[2] == "controlplane" else "httptools")
'''


def emit(metric: str, value: float, unit: str, **extra: Any) -> None:
    print(json.dumps({"bench": BENCH, "metric": metric, "value": round(value, 3), "unit": unit, **extra}), flush=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_port(port: int, proc: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("server did not listen in time")


class _Conn:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    async def request(self, data: bytes) -> int:
        self.writer.write(data)
        head = await self.reader.readuntil(b"\r\n\r\n")
        status = int(head[9:12])
        length = 0
        for line in head.split(b"\r\n"):
            if line[:15].lower() == b"content-length:":
                length = int(line[15:])
        if length:
            await self.reader.readexactly(length)
        return status


def _request(method: str, path: str, body: bytes = b"", token: str | None = None) -> bytes:
    head = f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: application/json\r\n"
    if token:
        head += f"Authorization: Bearer {token}\r\n"
    if body:
        head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
    return head.encode() + b"\r\n" + body


async def _load(port: int, requests: list[bytes], connections: int, seconds: float,
                ok: tuple[int, ...]) -> tuple[int, float, list[float]]:
    """Send ``requests`` (in order, each once, round robin over connections) until done
    or ``seconds`` pass. Returns (completed, elapsed, latencies)."""
    conns = [_Conn(*await asyncio.open_connection("127.0.0.1", port)) for _ in range(connections)]
    it = iter(requests)
    latencies: list[float] = []
    errors = 0
    deadline = time.perf_counter() + seconds

    async def worker(c: _Conn) -> None:
        nonlocal errors
        for data in it:
            t = time.perf_counter()
            status = await c.request(data)
            latencies.append(time.perf_counter() - t)
            if status not in ok:
                errors += 1
            if t > deadline:
                return
    t0 = time.perf_counter()
    await asyncio.gather(*(worker(c) for c in conns))
    elapsed = time.perf_counter() - t0
    for c in conns:
        c.writer.close()
    if errors:
        raise RuntimeError(f"{errors} requests failed")
    return len(latencies), elapsed, latencies


WRK_SCRIPT = """
local items = {}
local i = 0
init = function(args)
  for line in io.lines(args[1]) do items[#items + 1] = line end
end
request = function()
  i = i + 1
  local item = items[((i - 1) % #items) + 1]
  if METHOD == "POST" then
    return wrk.format("POST", PATH, {["Content-Type"] = "application/json"}, item)
  end
  return wrk.format("GET", item)
end
done = function(summary, latency, requests)
  io.write(string.format('{"requests": %d, "seconds": %f, "bad_status": %d, "socket_errors": %d, ' ..
    '"p50_ms": %f, "p99_ms": %f}\\n', summary.requests, summary.duration / 1e6, summary.errors.status,
    summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout,
    latency:percentile(50) / 1000, latency:percentile(99) / 1000))
end
"""


def _wrk(port: int, method: str, path: str, items: list[bytes], connections: int, seconds: float,
         work: Path) -> dict[str, Any]:
    data = work / f"items-{method}.txt"
    data.write_bytes(b"\n".join(items) + b"\n")
    script = work / f"{method}.lua"
    script.write_text(f'METHOD = "{method}"\nPATH = "{path}"\n' + WRK_SCRIPT)
    out = subprocess.run(["wrk", "-t1", f"-c{connections}", f"-d{max(1, int(seconds))}s", "-s", str(script),
                          f"http://127.0.0.1:{port}{path}", "--", str(data)], capture_output=True, text=True,
                         timeout=seconds + 60, check=True).stdout
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return result


def _p(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * q))] * 1000


# What controlplane.podgen's pods name in priorityClassName, with the values they carry
PRIORITY_CLASSES = (("high-priority", 1_000_000), ("batch-low", -10))


def _versus(seen: dict[str, float], protocol: str, metric: str, rate: float) -> dict[str, Any]:
    """Remember ``rate``; for a protocol other than uvicorn's, the fields comparing it with uvicorn's."""
    seen[f"{protocol}:{metric}"] = rate
    peer = seen.get(f"uvicorn:{metric}") if protocol != "uvicorn" else None
    return {} if peer is None else {"uvicorn_value": round(peer, 1), "uvicorn_ratio": round(rate / peer, 3)}


def run(args: argparse.Namespace) -> None:
    from controlplane.podgen import PodGenerator

    gen = PodGenerator(seed=7)
    bodies = []
    for i in range(args.pods):
        pod = gen.pod(namespace="default", bound=False)
        pod["metadata"] = {"name": f"bench-{i}", "namespace": "default", "labels": pod["metadata"]["labels"]}
        # the ServiceAccount that exists (ServiceAccount admission refuses the ones podgen makes up)
        pod["spec"]["serviceAccountName"] = pod["spec"]["serviceAccount"] = "default"
        pod.pop("status", None)
        bodies.append(orjson.dumps(pod))
    work = Path(tempfile.mkdtemp(prefix="cp-bench-api-"))
    procs: list[subprocess.Popen[bytes]] = []
    try:
        (work / "baseline.py").write_text(BASELINE_APP)
        path = "/api/v1/namespaces/default/pods"
        use_wrk = shutil.which("wrk") is not None and not args.python_client

        def measure(target: int, method: str, items: list[bytes], ok: tuple[int, ...]) -> dict[str, Any]:
            if use_wrk:
                r = _wrk(target, method, path if method == "POST" else "/", items, args.connections, args.seconds,
                         work)
                if r["bad_status"] or r["socket_errors"]:
                    raise RuntimeError(f"{method} on port {target}: {r}")
                return {"n": r["requests"], "rate": r["requests"] / r["seconds"], "p50_ms": r["p50_ms"],
                        "p99_ms": r["p99_ms"]}
            if method == "GET":  # --gets requests round the paths (wrk goes round them for --seconds)
                items = [items[i % len(items)] for i in range(args.gets)]
            reqs = [_request(method, path, b) if method == "POST" else _request("GET", b.decode()) for b in items]
            n, secs, lat = asyncio.run(_load(target, reqs, args.connections, args.seconds, ok))
            return {"n": n, "rate": n / secs, "p50_ms": _p(lat, 0.5), "p99_ms": _p(lat, 0.99)}

        def baseline(protocol: str) -> tuple[dict[str, Any], dict[str, Any]]:
            """The ceiling: a bare ASGI app on the same uvicorn server and HTTP protocol."""
            bport = _free_port()
            proc = subprocess.Popen([sys.executable, "baseline.py", str(bport), protocol], cwd=work)
            procs.append(proc)
            try:
                _wait_port(bport, proc)
                return measure(bport, "POST", bodies, (201,)), measure(bport, "GET", [b"/p"], (200,))
            finally:
                proc.terminate()
                proc.wait(timeout=30)

        client = "wrk" if use_wrk else "python"
        # uvicorn's protocol first, so the controlplane lines can name it as their peer
        protocols = sorted(args.http_protocols, key=lambda p: p != "uvicorn")
        bases = {protocol: baseline(protocol) for protocol in protocols}
        for workers in args.workers:
            seen: dict[str, float] = {}
            for protocol in protocols:
                base_post, base_get = bases[protocol]
                port = _free_port()
                server = subprocess.Popen(
                    [sys.executable, "-m", "controlplane", "serve", "--port", str(port),
                     "--data-dir", str(work / f"data-{workers}-{protocol}"), "--kubeconfig-out",
                     str(work / "kubeconfig"), "--log-level", "warning", "--workers", str(workers),
                     "--http-protocol", protocol,
                     # plain HTTP, as the bare ASGI peer; no scheduler: it would answer every pod
                     # created here (no nodes) with a status write and an event, and measure itself
                     "--no-tls", "--no-scheduler"], cwd=work,
                    stdout=subprocess.DEVNULL)
                procs.append(server)
                _wait_port(port, server)
                time.sleep(1.0 + workers)  # past startup (the store opens after the port), every worker's
                import httpx

                for name, value in PRIORITY_CLASSES:  # the generated pods name them (Priority admission)
                    httpx.post(f"http://127.0.0.1:{port}/apis/scheduling.k8s.io/v1/priorityclasses", timeout=60,
                               json={"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                                     "metadata": {"name": name}, "value": value}).raise_for_status()

                created = measure(port, "POST", bodies, (201,))
                emit("pod_creates_per_s", created["rate"], "1/s", n=created["n"], connections=args.connections,
                     workers=workers, http_protocol=protocol, p50_ms=round(created["p50_ms"], 2),
                     p99_ms=round(created["p99_ms"], 2), client=client, peer="bare-asgi",
                     peer_value=round(base_post["rate"], 1), peer_n=base_post["n"],
                     ratio=round(created["rate"] / base_post["rate"], 3),
                     **_versus(seen, protocol, "creates", created["rate"]))
                # wrk abandons the requests in flight when time is up: ask the server what exists
                listed = httpx.get(f"http://127.0.0.1:{port}{path}", timeout=120).json()["items"]
                names = [f"{path}/{o['metadata']['name']}".encode() for o in listed]
                got = measure(port, "GET", names, (200,))
                emit("pod_gets_per_s", got["rate"], "1/s", n=got["n"], connections=args.connections,
                     workers=workers, http_protocol=protocol, p50_ms=round(got["p50_ms"], 2),
                     p99_ms=round(got["p99_ms"], 2), client=client, peer="bare-asgi",
                     peer_value=round(base_get["rate"], 1), peer_n=base_get["n"],
                     ratio=round(got["rate"] / base_get["rate"], 3),
                     **_versus(seen, protocol, "gets", got["rate"]))
                server.terminate()
                server.wait(timeout=60)
    finally:
        from .scheduler import stop_all  # (scheduler.py imports this module's client)

        stop_all(procs)
        shutil.rmtree(work, ignore_errors=True)


# the sizes a run takes unless its command line names them, and --quick's
_DEFAULTS = {"pods": 100_000, "gets": 60_000, "seconds": 20.0}
_QUICK = {"pods": 20_000, "gets": 10_000, "seconds": 5.0}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="controlplane bench api", description=help_text(__doc__),
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    # the sizes' defaults, and --quick's: a size given on the command line wins over both
    p.add_argument("--pods", type=int,
                   help="distinct pods to create (realistic, unbound); more than a phase can send "
                        "(default: 100,000; --quick: 20,000)")
    p.add_argument("--gets", type=int,
                   help="GETs the asyncio client sends a phase, round the pods created, within --seconds (wrk "
                        "goes round them for --seconds) (default: 60,000; --quick: 10,000)")
    p.add_argument("--connections", type=int, default=64)
    p.add_argument("--seconds", type=float, help="upper bound per phase (default: 20; --quick: 5)")
    p.add_argument("--python-client", action="store_true", help="use the asyncio client even if wrk is there")
    p.add_argument("--quick", action="store_true", help="smaller sizes and 5 s phases, for a smoke run")
    p.add_argument("--workers", type=lambda v: [int(x) for x in v.split(",")], default=[1, 2],
                   help="comma-separated: serve --workers values, each measured in turn (default: 1,2)")
    p.add_argument("--http-protocols", type=lambda v: v.split(","), default=["controlplane", "uvicorn"],
                   help="comma-separated: serve --http-protocol values, each measured in turn, uvicorn's first "
                        "(default: controlplane,uvicorn)")
    args = p.parse_args(argv)
    for name, value in (_QUICK if args.quick else _DEFAULTS).items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    run(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
