"""How fast the harness itself can go: ``python -m loadtest harness-rate``.

Runs Locust exactly as a scenario does (a headless master and ``--processes``
worker processes, the scenarios' users, statistics to CSV) with users that GET
one trivial path without pause, against a tiny local ASGI server (uvicorn +
httptools answering ``ok``) or ``--target``'s ``/healthz`` (the path
``LOADTEST_TRIVIAL_PATH`` names). A target's credentials are the scenarios'
(``--kubeconfig``, ``--token``: ``loadtest.kubeauth``), checked once before the
run: the users present them as a scenario's do, and trust the server as the
kubeconfig says. Reports the requests per second and, from ``/proc``, the
workers' CPU seconds, so the figure is per core of Locust worker: the ceiling
above which a scenario measures the harness, not the server. One JSON line per
metric, as ``controlplane bench`` prints.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

import httpx

from . import kubeauth
from .kubeauth import Credentials, CredentialsError
from .serverwatch import proc_usage

__all__ = ["PATH_ENV", "app", "main"]

PATH_ENV = "LOADTEST_TRIVIAL_PATH"  # what the users GET (locustfiles/trivial.py)


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """The trivial endpoint: 200 ``ok`` for any HTTP request."""
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/plain"), (b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"ok"})


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _check_target(target: str, path: str, auth: Credentials) -> None:
    """Fail before the run when ``target`` is not reached, or refuses the credentials, at ``path``."""
    from .run import _refused, _scheme_hint

    try:
        with auth.httpx_client(timeout=10) as client:
            r = client.get(target + path)
    except (httpx.HTTPError, CredentialsError) as e:  # (an exec plugin that failed)
        raise SystemExit(f"loadtest harness-rate: cannot reach {target}: {e}{_scheme_hint(target, e)}") from None
    if r.status_code in (401, 403):
        raise SystemExit(f"loadtest harness-rate: {target}{path} refused the credentials ({r.status_code}); "
                         f"{_refused(auth)}")


def main(argv: list[str] | None = None) -> int:
    from .run import terminated_by_signals

    # SIGTERM (a CI job's end, timeout) killed the harness alone and left the tiny server running
    # for good, and Locust to the end of its --duration; SIGINT from a background shell was ignored.
    # They, and SIGHUP, unwind through the finally blocks below, which stop them all
    try:
        with terminated_by_signals():
            return _main(argv)
    except KeyboardInterrupt:
        print("loadtest harness-rate: interrupted", file=sys.stderr)
        return 130


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    """Terminate those of ``procs`` still running; kill those that do not end within 10 s."""
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _main(argv: list[str] | None) -> int:
    from .run import _at_least, _seconds

    # the docstring without its reST markup, which --help showed raw
    p = argparse.ArgumentParser(prog="python -m loadtest harness-rate", description=__doc__.replace("``", ""))
    p.add_argument("--processes", type=_at_least(1), default=1,
                   help="Locust worker processes (default: %(default)s)")
    p.add_argument("--users", type=_at_least(1), default=32, help="users in all (default: %(default)s)")
    p.add_argument("--duration", type=_seconds, default=10.0,
                   help="length of the run, in seconds or as 30s, 1m (default: 10)")
    p.add_argument("--target", help="a server whose /healthz to use instead of the tiny local one "
                                    "(default: --kubeconfig's server, if given)")
    p.add_argument("--kubeconfig", type=Path,
                   help="credentials for --target, as a scenario takes them: its current context's user and its "
                        "cluster's CA")
    p.add_argument("--context", metavar="NAME",
                   help="the --kubeconfig's context to use, as kubectl's --context (default: its current one)")
    p.add_argument("--token", help="bearer token for --target (default: from --kubeconfig)")
    args = p.parse_args(argv)

    try:
        target, auth = kubeauth.for_target(args.kubeconfig, args.token, args.target, args.context)
    except CredentialsError as e:
        raise SystemExit(f"loadtest harness-rate: {e}") from None
    path = os.environ.get(PATH_ENV, "/healthz")
    env = {**os.environ, PATH_ENV: path, kubeauth.ENV: auth.to_env()}
    server = None
    children: list[subprocess.Popen[bytes]] = []
    if target is not None:
        _check_target(target, path, auth)
    else:
        port = _free_port()
        server = subprocess.Popen([sys.executable, "-m", "uvicorn", "loadtest.harnessrate:app", "--port", str(port),
                                   "--http", "httptools", "--loop", "uvloop", "--log-level", "warning",
                                   "--no-access-log"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        target = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100 if server is not None else 0):
            try:
                httpx.get(target + "/", timeout=1)
                break
            except httpx.TransportError:
                time.sleep(0.1)
        with TemporaryDirectory(prefix="harness-rate-") as tmp:
            out = Path(tmp)
            locust = [sys.executable, "-m", "locust", "-f", str(Path(__file__).parent / "locustfiles" / "trivial.py"),
                      "--host", target]
            mport = _free_port()
            master = subprocess.Popen(
                [*locust, "--master", "--headless", "--expect-workers", str(args.processes), "--master-bind-port",
                 str(mport), "-u", str(args.users), "-r", str(args.users), "-t", f"{args.duration:g}s",
                 "--csv", str(out / "locust"), "--only-summary", "--loglevel", "WARNING"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
            children.append(master)
            workers = [subprocess.Popen([*locust, "--worker", "--master-port", str(mport), "--loglevel", "WARNING"],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
                       for _ in range(args.processes)]
            children.extend(workers)
            samples: list[tuple[float, float]] = []  # (epoch, CPU seconds of all workers)
            while master.poll() is None:
                usages = [proc_usage(w.pid) for w in workers]
                if all(u is not None for u in usages):
                    samples.append((time.time(), sum(u[1] for u in usages if u is not None)))
                time.sleep(0.25)
            for w in workers:
                w.wait(timeout=30)
            with (out / "locust_stats.csv").open(newline="") as f:
                rows = {r["Name"]: r for r in csv.DictReader(f)}
            with (out / "locust_stats_history.csv").open(newline="") as f:
                history = [(float(r["Timestamp"]), int(r["Total Request Count"])) for r in csv.DictReader(f)
                           if r["Name"] == "Aggregated"]
        row = rows.get("trivial", {})
        failures = int(row.get("Failure Count") or 0)
        # The steady part only: from a second after the first request to the last full second, so neither
        # the workers' start (imports) nor the stop counts against them.
        started = next((t for t, n in history if n > 0), 0.0) + 1.0
        window = [(t, n) for t, n in history if t >= started]
        cpu_window = [(t, c) for t, c in samples if window and window[0][0] <= t <= window[-1][0]]
        if len(window) < 2 or len(cpu_window) < 2:
            print("harness-rate: the run was too short to measure", file=sys.stderr)
            return 1
        seconds = window[-1][0] - window[0][0]
        requests = window[-1][1] - window[0][1]
        cpu = cpu_window[-1][1] - cpu_window[0][1]
        cpu_seconds = cpu_window[-1][0] - cpu_window[0][0]
        rps = requests / seconds
        cores = cpu / cpu_seconds
        common = {"bench": "harness", "processes": args.processes, "users": args.users, "target": target,
                  "window_s": round(seconds, 1)}
        for metric, value, unit in (("requests/s", rps, "req/s"),
                                    ("worker CPU", cores, "cores"),
                                    ("requests/s per worker core", rps / cores if cores else 0.0, "req/s/core"),
                                    ("failures", float(failures), "requests"),
                                    ("p50", float(row.get("50%") or 0), "ms"),
                                    ("p99", float(row.get("99%") or 0), "ms")):
            print(json.dumps({**common, "metric": metric, "value": round(value, 3), "unit": unit}))
    finally:
        _stop(children + ([server] if server is not None else []))
    return 0
