"""``python -m loadtest run smoke --quick`` end to end: the harness starts
``controlplane serve``, runs Locust (a master and a worker process) with every
kind of client, scrapes /metrics, and writes a complete report with no
unexpected failure."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from loadtest import report


@pytest.mark.slow
@pytest.mark.timeout(150)
def test_smoke_quick_end_to_end(tmp_path: Path) -> None:
    out = tmp_path / "run"
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "loadtest", "run", "smoke", "--quick", "--out", str(out),
                           "--no-progress"], capture_output=True, text=True, timeout=140, cwd=tmp_path)
    wall = time.monotonic() - started
    logs = "".join(p.read_text(errors="replace")[-3000:] for p in sorted(out.glob("locust-*.err")))
    assert proc.returncode == 0, proc.stdout + proc.stderr + logs
    assert wall < 90
    summary = json.loads((out / "summary.json").read_text())
    assert summary["complete"] is True
    assert summary["failures"] == 0, summary["failed_entries"]
    assert summary["scrapes"] >= 5
    assert summary["requests"] > 100
    run = json.loads((out / "run.json").read_text())
    assert run["master_exit"] == 0 and run["worker_exits"] == [0] and run["server_exit"] == 0
    # every kind of client made its traffic
    seen = {(e["type"], e["name"]) for e in summary["entries"]}
    for entry in [("POST", "pods"), ("DELETE", "pods"), ("PATCH", "pods/status"), ("POST", "pods/binding"),
                  ("PUT", "leases"), ("POST", "nodes"), ("PATCH", "replicasets/status"), ("GET", "pods [watch]"),
                  ("GET", "pods [cluster]"), ("GET", "pods [namespace]"), ("PATCH", "deployments"),
                  ("PATCH", "configmaps"), ("POST", "workloads"), ("POST", "podgroups"),
                  ("POST", "resourceclaimtemplates"), ("POST", "resourceslices"),
                  ("LATENCY", "pod startup"), ("LATENCY", "pod create→bound"), ("LATENCY", "watch delivery pods"),
                  ("LATENCY", "gang startup")]:
        assert entry in seen, entry
    assert any(t == "LATENCY" and n.startswith("informer sync pods (watchlist)") for t, n in seen) or \
        any(t == "LATENCY" and n.startswith("informer sync pods (list)") for t, n in seen)
    verdicts = {v["key"]: v["verdict"] for v in summary["verdicts"]}
    for key in ("mutating", "get", "list-namespace", "list-cluster", "pod-startup", "event-delivery"):
        assert verdicts[key] != "no data", key
    for p in report.PLOTS:
        assert (out / f"{p}.png").stat().st_size > 1000
    assert "SLOs:" in (out / "report.html").read_text()
    for name in ("locust_stats.csv", "locust_stats_history.csv", "locust.json", "server.jsonl", "plan.json"):
        assert (out / name).stat().st_size > 0, name


@pytest.mark.timeout(90)
def test_missing_workers_end_the_run_with_a_message(tmp_path: Path) -> None:
    # one local worker of the two expected: the master gives up after --workers-wait, the run says why
    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "loadtest", "run", "smoke", "--quick", "--duration", "5",
                           "--expect-workers", "2", "--workers-wait", "3", "--out", str(out), "--no-progress"],
                          capture_output=True, text=True, timeout=80, cwd=tmp_path)
    assert proc.returncode == 1
    assert "gave up after 3 s: fewer than the 2 expected workers joined" in proc.stderr
    assert json.loads((out / "summary.json").read_text())["overall"] == "incomplete"
