"""A load spread over several API server replicas (``run --target A --target B``), without a
server: how users are spread, the options, the scrapes of every replica and the report built
from them. tests/loadtest/test_replicas_etcd.py runs it end to end over a real etcd."""

from __future__ import annotations

import argparse
import doctest
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from loadtest import report, run, serverwatch
from loadtest.promtext import parse
from loadtest.serverwatch import ReplicasWatcher, interval_line, replicas_line
from tests.loadtest.test_promtext import registry_text
from tests.loadtest.test_report import write_run

ROOT = Path(__file__).resolve().parents[2]

# the users' side runs in a process of its own: importing Locust monkey-patches this one
USERS = r'''
import doctest, json, os
from collections import Counter
from locust.env import Environment
from loadtest.locustfiles import base
from loadtest.locustfiles.base import KubeUser

class BinderUser(KubeUser):
    host = "https://first"

class KubeletUser(KubeUser):
    host = "https://first"

env = Environment()
kubelets = [KubeletUser(env).host for _ in range(3)]
binder = BinderUser(env)
base.TARGETS = []
alone = KubeletUser(env)
# a class of 6 users in each of 2 workers over 3 targets, 1 in each of 3, 5 in 1 over 2: the
# counts per target, within each worker and in all
spreads = []
for n_workers, per_worker, n_targets in ((2, 6, 3), (3, 1, 3), (1, 5, 2)):
    per = [Counter(base.spread_index(k, 0, w, n_targets) for k in range(per_worker)) for w in range(n_workers)]
    spreads.append([[c[t] for t in range(n_targets)] for c in [*per, sum(per, Counter())]])
print(json.dumps({"kubelets": kubelets, "binder": binder.host, "client": binder.client.base_url,
                  "alone": alone.host, "spreads": spreads,
                  "classes": [base.spread_index(0, place, 0, 2) for place in range(4)],
                  "doctests": doctest.testmod(base).failed}))
'''


def test_users_spread_over_the_targets_each_keeping_one() -> None:
    params = {"targets": ["https://a", "https://b"], "_fixed": {"BinderUser": 1, "KubeletUser": 3}}
    proc = subprocess.run([sys.executable, "-c", USERS], capture_output=True, text=True, timeout=60, cwd=ROOT,
                          env={**os.environ, "LOADTEST_PARAMS": json.dumps(params),
                               "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])})
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen["doctests"] == 0
    # KubeletUser is the second class (sorted): its users start at the second target and go round
    assert seen["kubelets"] == ["https://b", "https://a", "https://b"]
    assert seen["binder"] == "https://a" and seen["client"].rstrip("/") == "https://a"
    assert seen["alone"] == "https://first"  # one target: Locust's --host, as ever
    for counts in seen["spreads"]:
        for per_target in counts:  # each worker's, then all of them
            assert max(per_target) - min(per_target) <= 1, counts
    assert seen["classes"] == [0, 1, 0, 1]  # classes of one user each land on different targets


def test_doctests() -> None:
    for module in (serverwatch, run):
        assert doctest.testmod(module).failed == 0, module


def _args(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    run.add_arguments(p)
    return p.parse_args(["smoke", *argv])


def test_several_targets_repeated_or_comma_separated() -> None:
    args = _args("--target", "https://a:6443/,https://b:6443", "--target", "https://c:6443", "--token", "t")
    assert run._target_list(args.target) == ["https://a:6443", "https://b:6443", "https://c:6443"]
    target, auth, binder = run._resolve_target(args)
    assert (target, auth.token, binder) == ("https://a:6443", "t", False)  # the first: the checks and probes
    with pytest.raises(SystemExit, match="https://a:6443 is given more than once"):
        run._target_list(["https://a:6443", "https://a:6443/"])
    with pytest.raises(SystemExit, match="has an empty URL"):
        run._target_list(["https://a:6443,"])
    assert run._target_list(None) == []


def test_a_line_of_several_replicas_sums_histograms_and_counters_and_keeps_the_worst_lag() -> None:
    a0, a1 = parse(registry_text({("pods", "writer"): [5e-6] * 10}, scheduled=1), 0), \
        parse(registry_text({("pods", "writer"): [5e-6] * 30}, scheduled=4), 2)
    b0, b1 = parse(registry_text({("pods", "writer"): [5e-3] * 2}), 0), \
        parse(registry_text({("pods", "writer"): [5e-3] * 7}), 2)
    latest = [interval_line(a0, a1, None), interval_line(b0, b1, None)]
    latest[0]["rss_bytes"], latest[1]["rss_bytes"] = 100.0, 300.0
    latest[0]["cpu_seconds"], latest[1]["cpu_seconds"] = 1.0, 2.0
    latest[1]["event_loop_lag"] = {"count": 5, "p50": 0.001, "p99": 0.4}
    line = replicas_line(2.0, ["https://a", "https://b"], [(a0, a1), (b0, b1)], latest)
    assert line["lock_wait_writer"]["count"] == 20 + 5  # both replicas' intervals
    assert line["scheduled_total"] == 4 and line["cpu_seconds"] == 3.0
    assert line["event_loop_lag"]["p99"] == 0.4 and line["event_loop_lag"]["worst_replica"] == "https://b"
    assert (line["rss_bytes"], line["rss_worst_replica"]) == (300.0, "https://b")
    assert [r["target"] for r in line["replicas"]] == ["https://a", "https://b"]
    assert line["replicas"][0]["lock_wait_writer"]["count"] == 20 and "at" not in line["replicas"][0]
    # b's scrape failed this time: its observations wait for the next interval, its counters stay
    line = replicas_line(4.0, ["https://a", "https://b"], [(a0, a1), (b1, None)], latest)
    assert line["lock_wait_writer"]["count"] == 20 and line["cpu_seconds"] == 3.0
    assert line["replicas"][1] == {"target": "https://b"} and line["rss_bytes"] == 100.0


class _Metrics(BaseHTTPRequestHandler):
    text = ""

    def do_GET(self) -> None:
        body = type(self).text.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_: object) -> None:
        pass


@pytest.fixture
def two_metrics() -> Iterator[list[tuple[str, type[_Metrics]]]]:
    servers = []
    for observations in ([5e-6] * 10, [5e-6] * 3):
        handler = type("M", (_Metrics,), {"text": registry_text({("pods", "writer"): observations})})
        s = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=s.serve_forever, daemon=True).start()
        servers.append((s, handler))
    try:
        yield [(f"http://127.0.0.1:{s.server_address[1]}", h) for s, h in servers]
    finally:
        for s, _ in servers:
            s.shutdown()
            s.server_close()


def test_the_replicas_watcher_scrapes_each_and_says_which_is_gone(tmp_path: Path,
                                                                  two_metrics: list[tuple[str, type[_Metrics]]]
                                                                  ) -> None:
    (a, _), (b, b_handler) = two_metrics
    gone = f"http://127.0.0.1:{run._free_port()}"
    watcher = ReplicasWatcher([a, b, gone], tmp_path)
    with httpx.Client() as client, (tmp_path / "server.jsonl").open("w") as lines:
        watcher.scrape_once(client, lines)
        b_handler.text = registry_text({("pods", "writer"): [5e-6] * 8})
        watcher.scrape_once(client, lines)
    for name in ("metrics-first.prom", "metrics-last.prom", "metrics-first-2.prom", "metrics-last-2.prom"):
        assert (tmp_path / name).exists(), name
    assert not (tmp_path / "metrics-last-3.prom").exists()
    assert (tmp_path / "metrics-last-2.prom").read_text() == b_handler.text
    first, second = (json.loads(x) for x in (tmp_path / "server.jsonl").read_text().splitlines())
    assert "lock_wait_writer" not in first  # no interval yet
    assert second["lock_wait_writer"]["count"] == 5  # a's 0 more, b's 5 more
    assert [r["target"] for r in second["replicas"]] == [a, b, gone] and second["replicas"][2] == {"target": gone}
    assert watcher.errors == 2 and (watcher.last_error or "").startswith(f"{gone}: ConnectError")
    assert watcher.unreachable_for() > 0 and watcher.unreachable_target == gone


def test_the_report_of_several_replicas_sums_their_histograms_and_shows_each(tmp_path: Path) -> None:
    write_run(tmp_path)  # replica 1's files, as one target's
    (tmp_path / "metrics-first-2.prom").write_text(registry_text({("pods", "writer"): []}))
    slow_loop = registry_text({("pods", "writer"): [5e-3] * 100})
    for part, before, after in (('_bucket{le="0.1"}', "1.0", "100.0"), ('_bucket{le="+Inf"}', "1.0", "100.0"),
                                ("_count", "1.0", "100.0")):  # 99 lags of 10-100 ms more than its first scrape
        line = f"controlplane_event_loop_lag_seconds{part} "
        slow_loop = slow_loop.replace(line + before, line + after)
    (tmp_path / "metrics-last-2.prom").write_text(slow_loop + 'apiserver_request_total{code="200",verb="GET"} 42\n')
    lines = [{"at": 2.0 * i, "lock_wait_writer": {"count": 50, "p50": 5e-6, "p99": 9e-6},
              "event_loop_lag": {"count": 200, "p50": 1e-4, "p99": 2e-3, "worst_replica": "https://b"},
              "rss_bytes": 200e6, "cpu_seconds": 1.0 * i,
              "replicas": [{"target": "https://a", "rss_bytes": 100e6, "cpu_seconds": 0.5 * i,
                            "event_loop_lag": {"count": 100, "p50": 1e-4, "p99": 1e-3}},
                           {"target": "https://b", "rss_bytes": 200e6 + i, "cpu_seconds": 0.5 * i,
                            "event_loop_lag": {"count": 100, "p50": 1e-4, "p99": 2e-3}}]} for i in range(6)]
    (tmp_path / "server.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    ran = json.loads((tmp_path / "run.json").read_text())
    (tmp_path / "run.json").write_text(json.dumps({**ran, "target": "https://a",
                                                   "targets": ["https://a", "https://b"]}))
    summary = report.build(tmp_path)
    lock = next(v for v in summary["verdicts"] if v["key"] == "writer-lock-wait")
    # replica 1's 549 observations and replica 2's 100, whose 5 ms fail the 1 ms target
    assert lock["samples"] == 549 + 100 and lock["verdict"] == "fail"
    assert [r["target"] for r in summary["replicas"]] == ["https://a", "https://b"]
    a, b = summary["replicas"]
    assert a["scraped"] and b["scraped"] and b["requests"] == 42 and a["requests"] is None
    assert a["peak_rss_bytes"] == 100e6 and b["peak_rss_bytes"] == 200e6 + 5
    assert a["event_loop_lag_p99_s"] is None  # no lag observed between its first scrape and its last
    assert 0.01 < b["event_loop_lag_p99_s"] <= 0.1
    assert summary["peak_server_rss_bytes"] == 200e6  # the worst replica's
    html = (tmp_path / "report.html").read_text()
    assert "<h2>Replicas</h2>" in html and "https://a, https://b (the users spread over them)" in html
    for p in report.PLOTS:
        assert (tmp_path / f"{p}.png").stat().st_size > 1000, p


def test_one_target_s_report_has_no_replicas(tmp_path: Path) -> None:
    write_run(tmp_path)
    summary = report.build(tmp_path)
    assert "replicas" not in summary and "<h2>Replicas</h2>" not in (tmp_path / "report.html").read_text()


def test_a_stale_replica_s_scrapes_are_removed_from_a_reused_out(tmp_path: Path) -> None:
    (tmp_path / "plan.json").write_text("{}")
    for name in ("metrics-first-2.prom", "metrics-last-3.prom"):
        (tmp_path / name).write_text("x")
    run._prepare_out(tmp_path)
    assert not list(tmp_path.glob("metrics-*.prom"))


def test_a_replica_that_stopped_taking_connections_is_named(tmp_path: Path) -> None:
    write_run(tmp_path)
    ran = json.loads((tmp_path / "run.json").read_text())
    (tmp_path / "run.json").write_text(json.dumps({**ran, "targets": ["https://a", "https://b"],
                                                   "target_unreachable_at": 12.0, "unreachable_target": "https://b"}))
    summary = report.build(tmp_path)
    assert summary["incomplete_because"] == ["the target https://b refused connections from 12 s of load on",
                                             "no /metrics scrape of the replica https://b"]
    assert summary["overall"] == "incomplete"
    assert "https://b refused connections from 12 s of load on; the load was stopped" in \
        (tmp_path / "report.html").read_text()
