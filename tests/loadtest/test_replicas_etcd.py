"""``loadtest run smoke --quick`` spread over two ``controlplane serve`` replicas over one real
etcd, as docker-compose.yml's run over three: both replicas serve the load, each is scraped, and
the report is complete, its server-side verdicts from both."""

from __future__ import annotations

import json
import os
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from loadtest import report
from loadtest.promtext import parse
from tests.etcd_server import EtcdServer
from tests.test_cli import STARTUP_TIMEOUT, free_port

ROOT = Path(__file__).resolve().parents[2]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}


def _requests_answered(url: str, ca: Path) -> float:
    """What a replica's /metrics counts of the requests it answered (``apiserver_request_total``)."""
    r = httpx.get(f"{url}/metrics", verify=ssl.create_default_context(cafile=ca), timeout=10)
    r.raise_for_status()
    return parse(r.text, 0.0).sum("apiserver_request_total") or 0.0


@pytest.fixture
def replicas(tmp_path: Path) -> Iterator[tuple[list[str], Path]]:
    """Two replicas over one etcd: (their URLs, the first one's kubeconfig). They share their data
    directories' parent, so the CA (pki/) and the admin's token (tokens.csv) made by whichever
    comes first; as the harness's own server, they leave the pods to its binder and the
    ReplicaSets' status to its controller user."""
    state = tmp_path / "state"
    state.mkdir()
    with EtcdServer() as etcd:
        procs: list[tuple[subprocess.Popen[bytes], str, Path]] = []
        try:
            for name in ("a", "b"):
                port = free_port()
                log = tmp_path / f"serve-{name}.log"
                with log.open("wb") as out:
                    proc = subprocess.Popen(
                        [sys.executable, "-m", "controlplane", "serve", "--port", str(port), "--store", etcd.url,
                         "--data-dir", str(state / f"data-{name}"),
                         "--kubeconfig-out", str(state / f"kubeconfig-{name}"), "--no-scheduler",
                         "--controllers", "*,-replicaset-controller", "--log-level", "warning"],
                        stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=tmp_path, env=_env())
                procs.append((proc, f"https://127.0.0.1:{port}", log))
            deadline = time.monotonic() + 2 * STARTUP_TIMEOUT
            for proc, url, log in procs:
                while True:
                    assert proc.poll() is None, log.read_text()
                    assert time.monotonic() < deadline, log.read_text()
                    try:
                        ca = ssl.create_default_context(cafile=state / "pki" / "ca.crt")
                        if httpx.get(f"{url}/readyz", verify=ca, timeout=2).status_code == 200:
                            break
                    except (httpx.TransportError, OSError):  # (OSError: the CA not written yet)
                        pass
                    time.sleep(0.1)
            yield [url for _, url, _ in procs], state / "kubeconfig-a"
        finally:
            for proc, _, _ in procs:
                proc.terminate()
            for proc, _, _ in procs:
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()


@pytest.mark.slow
@pytest.mark.timeout(150)
def test_smoke_spread_over_two_replicas_over_one_etcd(tmp_path: Path, replicas: tuple[list[str], Path]) -> None:
    urls, kubeconfig = replicas
    ca = kubeconfig.parent / "pki" / "ca.crt"
    before = [_requests_answered(u, ca) for u in urls]
    out = tmp_path / "run"
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "loadtest", "run", "smoke", "--quick", "--duration", "12",
                           "--target", ",".join(urls),
                           "--kubeconfig", str(kubeconfig), "--binder", "on", "--out", str(out), "--no-progress"],
                          capture_output=True, text=True, timeout=140, cwd=tmp_path, env=_env())
    wall = time.monotonic() - started
    logs = "".join(p.read_text(errors="replace")[-3000:] for p in sorted(out.glob("locust-*.err")))
    summary = json.loads((out / "summary.json").read_text())
    assert summary["complete"] is True, proc.stdout + proc.stderr + logs
    assert summary["failures"] == 0, summary["failed_entries"]
    failed = [v["title"] for v in summary["verdicts"] if v["verdict"] == "fail"]  # (a loaded machine's latencies)
    assert proc.returncode == (1 if failed else 0), proc.stdout + proc.stderr + logs
    assert wall < 90
    # both replicas served the load, as their /metrics count it, and the report shows each
    after = [_requests_answered(u, ca) for u in urls]
    for u, b, a in zip(urls, before, after, strict=True):
        assert a - b > 50, (u, b, a)
    assert [r["target"] for r in summary["replicas"]] == urls
    # (the report counts between its first and last scrape, a shorter span than ``before``/``after``'s:
    # that each replica's count is there and moved is the claim; how much, the lines above check)
    for r in summary["replicas"]:
        assert r["scraped"] and r["requests"] > 0 and r["cpu_seconds"] > 0 and r["peak_rss_bytes"] > 0, r
        assert r["event_loop_lag_p99_s"] is not None, r
    for name in ("metrics-first.prom", "metrics-last.prom", "metrics-first-2.prom", "metrics-last-2.prom"):
        assert (out / name).stat().st_size > 1000, name
    lines = [json.loads(x) for x in (out / "server.jsonl").read_text().splitlines()]
    assert len(lines) >= 5 and all([r["target"] for r in x["replicas"]] == urls for x in lines)
    # the server-side verdicts read both replicas' histograms; the clients' latencies across a
    # write and a watch matched resourceVersions of one etcd, whichever replica each was on
    seen = {(e["type"], e["name"]) for e in summary["entries"]}
    for entry in [("POST", "pods"), ("POST", "pods/binding"), ("PATCH", "pods/status"), ("GET", "pods [watch]"),
                  ("LATENCY", "watch delivery pods"), ("LATENCY", "pod startup"), ("LATENCY", "gang startup")]:
        assert entry in seen, entry
    verdicts = {v["key"]: v for v in summary["verdicts"]}
    for key in ("mutating", "list-namespace", "list-cluster", "pod-startup", "event-delivery", "writer-lock-wait"):
        assert verdicts[key]["verdict"] != "no data", verdicts[key]
    assert json.loads((out / "plan.json").read_text())["targets"] == urls
    assert json.loads((out / "run.json").read_text())["targets"] == urls
    assert "<h2>Replicas</h2>" in (out / "report.html").read_text()
    for p in report.PLOTS:
        assert (out / f"{p}.png").stat().st_size > 1000, p
