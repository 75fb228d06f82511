"""``python -m loadtest run smoke --quick`` end to end: the harness starts
``controlplane serve``, runs Locust (a master and a worker process) with every
kind of client, scrapes /metrics, and writes a complete report with no
unexpected failure."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from loadtest import report

ROOT = Path(__file__).resolve().parents[2]


def _env() -> dict[str, str]:
    """This checkout's packages first: the harness runs from a temporary directory, where an editable
    install made from another checkout would otherwise be imported."""
    import os

    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}

def _as_a_terminal_starts_it() -> None:
    """A command typed at a terminal has Ctrl-C's default action, whatever this test process was
    given: a pytest a shell started in the background (``make test > log &``) ignores SIGINT, its
    workers and what they start too, and the Locust worker's Ctrl-C then did nothing (no test
    leaves it ignored: ``tests/signalguard.py`` fails one that would)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _smoke_in_a_session(tmp_path: Path, duration: str) -> tuple[subprocess.Popen[str], Path]:
    """``loadtest run smoke --quick`` in a session of its own (its process group: a terminal's
    Ctrl-C goes to all of it), and the run's output directory."""
    out = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "loadtest", "run", "smoke", "--quick", "--duration", duration,
                             "--out", str(out), "--no-progress"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=tmp_path, env=_env(), start_new_session=True)
    return proc, out


def _requests_made(out: Path) -> bool:
    """The load is under way: Locust's stats (its workers report every 3 s) have a request. (A
    pod create came some seconds later: the ReplicaSet controller user is among the last started,
    at the smoke scenario's 1.8 users a second, and creates its pods once its informer synced.)"""
    stats = out / "locust_stats.csv"
    rows = stats.read_text().splitlines()[1:] if stats.exists() else []
    return any(not row.startswith(",") and int(row.split(",")[2] or 0) > 0 for row in rows)



@pytest.mark.slow
@pytest.mark.timeout(150)
def test_smoke_quick_end_to_end(tmp_path: Path) -> None:
    out = tmp_path / "run"
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "loadtest", "run", "smoke", "--quick", "--out", str(out),
                           "--no-progress"], capture_output=True, text=True, timeout=140, cwd=tmp_path, env=_env())
    wall = time.monotonic() - started
    logs = "".join(p.read_text(errors="replace")[-3000:] for p in sorted(out.glob("locust-*.err")))
    assert wall < 90
    summary = json.loads((out / "summary.json").read_text())
    assert summary["complete"] is True, proc.stdout + proc.stderr + logs
    assert summary["failures"] == 0, summary["failed_entries"]
    # what this test asserts is a complete run without failed requests; its latency verdicts are a
    # loaded CI machine's, and a failed one exits 1 (the code CI reads), which is all it may change
    failed = [v["title"] for v in summary["verdicts"] if v["verdict"] == "fail"]
    assert proc.returncode == (1 if failed else 0), proc.stdout + proc.stderr + logs
    last = proc.stdout.rstrip().splitlines()[-1]
    if failed:
        assert last == (f"loadtest smoke: FAIL (exit 1): {len(failed)} of {len(summary['verdicts'])} SLO verdicts "
                        f"failed: {', '.join(failed)}"), last
    else:
        assert last.startswith("loadtest smoke: PASS (exit 0): complete, no request failed, "), last
    assert summary["scrapes"] >= 5
    assert summary["requests"] > 100
    # the harness's own server counts its responses' waits for slow readers (0 or more)
    blocked = summary["server_write_blocked"]
    assert blocked is not None and blocked["blocks"] >= 0 and blocked["seconds"] >= 0
    run = json.loads((out / "run.json").read_text())
    assert run["master_exit"] == 0 and run["worker_exits"] == [0] and run["server_exit"] == 0
    # its controller user plays the ReplicaSet controller: the server runs without its own
    assert "--controllers '*,-replicaset-controller'" in run["server_command"]
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
    # the clients came as the identities they stand for (--impersonate auto: on for the harness's own
    # server), so API Priority and Fairness put them where a cluster's would go
    assert json.loads((out / "plan.json").read_text())["impersonate"] is True
    dispatched = {line.partition("{")[2].partition("}")[0] for line in
                  (out / "metrics-last.prom").read_text(errors="replace").splitlines()
                  if line.startswith("apiserver_flowcontrol_dispatched_requests_total{")}
    for schema, level in (("system-nodes", "system"), ("system-node-high", "node-high"),
                          ("kube-system-service-accounts", "workload-high"), ("kube-scheduler", "workload-high"),
                          ("service-accounts", "workload-low")):
        assert f'flow_schema="{schema}",priority_level="{level}"' in dispatched, (schema, dispatched)


@pytest.mark.timeout(90)
def test_missing_workers_end_the_run_with_a_message(tmp_path: Path) -> None:
    # one local worker of the two expected: the master gives up after --workers-wait, the run says why
    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "loadtest", "run", "smoke", "--quick", "--duration", "5",
                           "--expect-workers", "2", "--workers-wait", "2.5s", "--out", str(out), "--no-progress"],
                          capture_output=True, text=True, timeout=80, cwd=tmp_path, env=_env())
    assert proc.returncode == 3  # not complete
    # a duration, as --duration takes (Locust's master waits whole seconds: 3)
    assert "gave up after 2.5 s: fewer than the 2 expected workers joined, so no load ran" in proc.stderr
    # and the last word says so, not the verdicts the server's own traffic passed
    assert "loadtest smoke: no load ran: fewer than the 2 expected Locust workers joined within 2.5 s" in proc.stdout
    assert "SLOs" not in proc.stdout
    # the master's exit code 1 is that giving up: no line sends the user to its empty .err
    assert "Locust's master exited" not in proc.stderr
    assert json.loads((out / "summary.json").read_text())["overall"] == "incomplete"
    assert json.loads((out / "run.json").read_text())["workers_missing_after"] == 2.5
    assert "<th>Load</th><td>none: fewer than the 2 expected Locust workers joined within 2.5 s" in \
        (out / "report.html").read_text()


@pytest.mark.timeout(90)
def test_ctrl_c_while_waiting_for_workers_says_no_load_ran(tmp_path: Path) -> None:
    # interrupted before a remote worker joined: the report said "after 13.5 s of load" and the
    # verdicts the server's own traffic passed, as if a load had run
    import os
    import signal

    out = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "loadtest", "run", "smoke", "--quick", "--processes", "0",
                             "--expect-workers", "1", "--out", str(out), "--no-progress"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=tmp_path, env=_env(), start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while not (out / "locust-master.log").exists():  # the server is up, the master waits for a worker
            assert time.monotonic() < deadline and proc.poll() is None, "the master never started"
            time.sleep(0.2)
        time.sleep(1.0)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, stdout + stderr
    assert "loadtest smoke: no load ran: interrupted before Locust started it (its master was waiting for 1 worker)" \
        in stdout
    assert "SLOs" not in stdout
    assert _session(proc.pid) == []  # neither Locust's master nor the server is left running
    run = json.loads((out / "run.json").read_text())
    assert run["interrupted"] is True and run["load_started"] is False
    summary = json.loads((out / "summary.json").read_text())
    assert summary["overall"] == "incomplete"
    assert summary["incomplete_because"][0] == "interrupted (Ctrl-C, SIGTERM or SIGHUP) before Locust started the load"
    assert "<th>Load</th><td>none: interrupted before Locust started it" in (out / "report.html").read_text()


def _session(sid: int) -> list[int]:
    """The processes of session ``sid`` (field 6 of /proc/PID/stat)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == sid and fields[0] != "Z":
            found.append(int(stat.parent.name))
    return found


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_ctrl_c_in_a_terminal_still_writes_the_results(tmp_path: Path) -> None:
    # a terminal's Ctrl-C is SIGINT to its whole foreground process group: the harness, and (unless they
    # have groups of their own) Locust's master, its worker and the server. A master that got that SIGINT
    # and then the harness's was killed before it wrote locust.json, and the server died under the load.
    import os
    import signal

    proc, out = _smoke_in_a_session(tmp_path, "40")
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # until the load is under way
            if _requests_made(out):
                break
            time.sleep(0.2)
        else:
            raise AssertionError("no request was made within 60 s")
        os.killpg(proc.pid, signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, stdout + stderr
    assert "interrupted; stopping the load and writing a partial report" in stderr
    assert _session(proc.pid) == []  # neither Locust nor the server is left running
    run = json.loads((out / "run.json").read_text())
    assert run["interrupted"] is True and run["master_exit"] == 0 and run["server_exit"] == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["overall"] == "incomplete" and summary["requests"] > 0  # what it had, from locust.json
    assert summary["incomplete_because"][0].startswith("interrupted (Ctrl-C, SIGTERM or SIGHUP) after ")
    assert "  not complete: interrupted (Ctrl-C, SIGTERM or SIGHUP) after " in stdout
    assert "Traceback" not in (out / "server" / "serve.log").read_text()


@pytest.mark.timeout(60)
def test_harness_rate_stopped_by_sigterm_leaves_no_process(tmp_path: Path) -> None:
    # SIGTERM killed harness-rate alone: its tiny server ran on for good, Locust to the end of --duration
    import os
    import signal

    proc = subprocess.Popen([sys.executable, "-m", "loadtest", "harness-rate", "--duration", "40"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path, env=_env(),
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while True:  # until the tiny server, Locust's master and its worker run
            cmds = []
            for pid in _session(proc.pid):
                with contextlib.suppress(OSError):  # gone meanwhile
                    cmds.append(Path(f"/proc/{pid}/cmdline").read_bytes())
            if any(b"--worker" in c for c in cmds) and any(b"uvicorn" in c for c in cmds):
                break
            assert time.monotonic() < deadline and proc.poll() is None, "harness-rate did not start Locust"
            time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, stderr
    assert "loadtest harness-rate: interrupted" in stderr
    assert _session(proc.pid) == []

