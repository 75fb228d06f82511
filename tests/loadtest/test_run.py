"""The harness's pieces, without a run: its options, its --out, its --target checks."""

from __future__ import annotations

import argparse
import contextlib
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

from loadtest import kubeauth, report, run, scenarios
from loadtest.kubeauth import bearer
from tests.test_cli import Serve


def resolved(*argv: str) -> tuple[str | None, str, bool]:
    """``run._resolve_target``'s answer, with the credentials' bearer token."""
    target, auth, binder = run._resolve_target(parse(*argv))
    return target, auth.token, binder


def parse(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    run.add_arguments(p)
    return p.parse_args(["smoke", *argv])


@pytest.mark.parametrize(("text", "seconds"), [("45", 45.0), ("2.5", 2.5), ("90s", 90.0), ("10m", 600.0),
                                               ("1h30m", 5400.0), ("1500ms", 1.5)])
def test_duration_is_seconds_or_a_go_duration(text: str, seconds: float) -> None:
    assert parse("--duration", text).duration == seconds


@pytest.mark.parametrize(("text", "seconds"), [("30", 30.0), ("30s", 30.0), ("1.5m", 90.0), ("2m30s", 150.0),
                                               ("0.5", 0.5)])
def test_workers_wait_is_a_duration_as_duration_is(text: str, seconds: float) -> None:
    # it took whole seconds only: `--workers-wait 5m` was refused where `--duration 5m` was not
    assert parse("--workers-wait", text).workers_wait == seconds


@pytest.mark.parametrize("argv", [("--workers-wait", "10x"), ("--workers-wait", "-1s"), ("--workers-wait", "inf"),
                                  ("--duration", "0"), ("--duration", "-5"), ("--duration", "nan"),
                                  ("--duration", "inf"), ("--duration", "10x"), ("--users", "-1"),
                                  ("--scale", "0"), ("--scale", "-1"), ("--processes", "-1"),
                                  ("--scrape-interval", "0"), ("--workers-wait", "0"),
                                  ("--pod-rate", "0"), ("--pod-rate", "-3"), ("--master-port", "70000"),
                                  ("--master-port", "-1"), ("--port", "65536"), ("--port", "x")])
def test_bad_options_are_refused_with_a_message(argv: tuple[str, ...], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        parse(*argv)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {argv[0]}:" in err and "Traceback" not in err


def test_harness_rates_help_is_plain_text(capsys: pytest.CaptureFixture[str]) -> None:
    from loadtest import harnessrate

    with pytest.raises(SystemExit) as e:
        harnessrate.main(["--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert "``" not in out  # the docstring's markup was shown raw
    assert "How fast the harness itself can go: python -m loadtest harness-rate." in out


def test_worker_counts_must_add_up() -> None:
    with pytest.raises(SystemExit, match="--processes 0 runs no worker here"):
        run._check_args(parse("--processes", "0"))
    with pytest.raises(SystemExit, match="give at least 2"):
        run._check_args(parse("--processes", "2", "--expect-workers", "1"))
    run._check_args(parse("--processes", "0", "--expect-workers", "3"))  # remote workers only
    run._check_args(parse("--processes", "2", "--expect-workers", "6"))


@pytest.mark.parametrize(("argv", "message"), [
    (("smoke", "--users", "5"), "--users does not apply to smoke"),
    (("smoke", "--shape", "spike"), "--shape does not apply to smoke"),
    (("million", "--quick", "--users", "3"), "--users does not apply to million.*; --scale sizes it"),
    (("smoke", "--scale", "2"), "--scale does not apply to smoke"),
])
def test_options_the_scenario_would_ignore_are_refused(argv: tuple[str, ...], message: str) -> None:
    # smoke and million have only fixed users: --users and --shape had silently no effect
    p = argparse.ArgumentParser()
    run.add_arguments(p)
    args = p.parse_args(argv)
    with pytest.raises(SystemExit, match=message):
        run._check_plan(args, scenarios.build(args.scenario, quick=args.quick, scale=args.scale,
                                              users=args.users, shape=args.shape))


@pytest.mark.parametrize("argv", [("churn", "--users", "3", "--shape", "spike", "--scale", "0.5"),
                                  ("million", "--scale", "0.01"), ("gang", "--quick", "--users", "2"), ("smoke",)])
def test_options_the_scenario_applies_are_accepted(argv: tuple[str, ...]) -> None:
    p = argparse.ArgumentParser()
    run.add_arguments(p)
    args = p.parse_args(argv)
    run._check_plan(args, scenarios.build(args.scenario, quick=args.quick, scale=args.scale, users=args.users,
                                          shape=args.shape))


def test_a_reused_out_loses_the_last_run_s_results(tmp_path: Path) -> None:
    # a run that ends before Locust writes its results must not be reported with the last run's
    for name in ("locust.json", "locust_stats.csv", "server.jsonl", "summary.json", "report.html", "run.json",
                 "latency.png", "locust-worker3.log", "locust-worker3.err"):
        (tmp_path / name).write_text("old")
    (tmp_path / "notes.txt").write_text("mine")
    (tmp_path / "server").mkdir()
    run._prepare_out(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt", "server"]
    assert report.build(tmp_path)["overall"] == "incomplete"


def test_an_out_that_cannot_be_written_is_refused_before_any_load(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    # an existing --out on a read-only file system: a traceback from the clean-up, or, once that
    # had nothing to remove, a run whose results could not be written at its end
    import errno

    def read_only(self: Path, data: bytes) -> int:
        raise OSError(errno.EROFS, "Read-only file system", str(self))

    monkeypatch.setattr(Path, "write_bytes", read_only)
    with pytest.raises(SystemExit, match=f"cannot write to --out {tmp_path}: Read-only file system"):
        run._prepare_out(tmp_path)


def test_an_out_with_other_files_is_refused(tmp_path: Path) -> None:
    # --out . in a checkout: its files named like a run's (report.html...) must not be removed
    (tmp_path / "report.html").write_text("someone's")
    (tmp_path / "server").mkdir()
    with pytest.raises(SystemExit, match="not an earlier run's"):
        run._prepare_out(tmp_path)
    assert (tmp_path / "report.html").read_text() == "someone's"
    run._prepare_out(tmp_path / "new")  # a new directory
    (tmp_path / "empty").mkdir()
    run._prepare_out(tmp_path / "empty")  # an empty one


def test_an_out_that_is_a_file_is_refused(tmp_path: Path) -> None:
    f = tmp_path / "f"
    f.write_text("")
    with pytest.raises(SystemExit, match="exists and is not a directory"):
        run._prepare_out(f)


def _kubeconfig(path: Path, server: str | None = "https://10.0.0.1:6443", token: str | None = "t0k") -> Path:
    cluster = {"server": server} if server else {}
    user = {"token": token} if token else {}
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "k", "cluster": cluster}], "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}]}))
    return path


def test_a_kubeconfig_s_server_is_the_target_and_its_scheduler_places_the_pods(tmp_path: Path) -> None:
    kc = _kubeconfig(tmp_path / "kc")
    # the binder is for a server the harness starts with --no-scheduler, never for a kubeconfig's server
    assert resolved("--kubeconfig", str(kc)) == ("https://10.0.0.1:6443", "t0k", False)
    assert resolved("--kubeconfig", str(kc), "--token", "x", "--target", "http://h:1") == (
        "http://h:1", "x", False)
    assert resolved("--kubeconfig", str(kc), "--binder", "on")[2] is True
    assert resolved() == (None, "", True)
    assert resolved("--binder", "off") == (None, "", False)


def test_a_target_s_trailing_slash_is_dropped(tmp_path: Path) -> None:
    # Locust would send //api/v1/... and every user would die on it
    assert resolved("--target", "https://10.0.0.1:6443/")[0] == "https://10.0.0.1:6443"
    kc = _kubeconfig(tmp_path / "kc", server="https://10.0.0.2:6443/")
    assert resolved("--kubeconfig", str(kc))[0] == "https://10.0.0.2:6443"


def test_server_options_with_a_target_are_refused(tmp_path: Path) -> None:
    # they were silently ignored: the run loaded the --target without them
    with pytest.raises(SystemExit, match="--server-arg is for the server the harness starts"):
        resolved("--target", "https://10.0.0.1:6443", "--server-arg=--components-process")
    with pytest.raises(SystemExit, match=r"--port is for .* \(the kubeconfig's server\)"):
        resolved("--kubeconfig", str(_kubeconfig(tmp_path / "kc")), "--port", "7000")
    assert resolved("--server-arg=--components-process", "--port", "7000")[0] is None
    # and the credentials of a target without one: the harness's own server, whose load went without them
    with pytest.raises(SystemExit, match="--token is for a --target"):
        resolved("--token", "abc")


def test_the_server_the_harness_starts_runs_without_the_controllers_its_users_play() -> None:
    for name in ("smoke", "churn", "list-storm", "kubelets", "million"):
        assert scenarios.build(name, quick=True).played_controllers == ["replicaset-controller"], name
    assert scenarios.build("gang", quick=True).played_controllers == []
    assert run._controllers_arg(["replicaset-controller"], ["--components-process"]) == [
        "--controllers", "*,-replicaset-controller"]
    assert run._controllers_arg([], ["--components-process"]) == []
    # the server's own --controllers, given with --server-arg, decides alone
    assert run._controllers_arg(["replicaset-controller"], ["--controllers", "*"]) == []
    assert run._controllers_arg(["replicaset-controller"], ["--controllers=*,-job"]) == []


def test_a_kubeconfig_s_token_file_is_read(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("from-file\n")
    kc = _kubeconfig(tmp_path / "kc", token=None)
    doc = json.loads(kc.read_text())
    doc["users"][0]["user"] = {"tokenFile": str(tmp_path / "token")}
    kc.write_text(json.dumps(doc))
    assert resolved("--kubeconfig", str(kc))[1] == "from-file"
    doc["users"][0]["user"] = {"tokenFile": str(tmp_path / "missing")}
    kc.write_text(json.dumps(doc))
    with pytest.raises(SystemExit, match="cannot read the tokenFile"):
        resolved("--kubeconfig", str(kc))


def test_a_kubeconfig_s_relative_token_file_is_beside_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # client-go resolves a kubeconfig's relative paths against the kubeconfig's directory; the
    # harness read the working directory's file
    (tmp_path / "cluster").mkdir()
    (tmp_path / "cluster" / "token").write_text("beside\n")
    (tmp_path / "token").write_text("in-the-working-directory\n")
    kc = _kubeconfig(tmp_path / "cluster" / "kc", token=None)
    doc = json.loads(kc.read_text())
    doc["users"][0]["user"] = {"tokenFile": "token"}
    kc.write_text(json.dumps(doc))
    monkeypatch.chdir(tmp_path)
    assert resolved("--kubeconfig", "cluster/kc")[1] == "beside"


def test_unreadable_kubeconfigs_are_refused_with_a_message(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="cannot read --kubeconfig"):
        resolved("--kubeconfig", str(tmp_path / "missing"))
    (tmp_path / "bad").write_text("clusters: [")
    with pytest.raises(SystemExit, match="is not YAML"):
        resolved("--kubeconfig", str(tmp_path / "bad"))
    with pytest.raises(SystemExit, match="names no cluster server"):
        resolved("--kubeconfig", str(_kubeconfig(tmp_path / "kc", server=None)))
    # not a kubeconfig's shape: an AttributeError traceback
    (tmp_path / "odd").write_text("current-context: c\ncontexts: [c]\nusers: u\nclusters: 3\n")
    with pytest.raises(SystemExit, match="context was not found for specified context: c"):
        resolved("--kubeconfig", str(tmp_path / "odd"))
    (tmp_path / "odd").write_text("current-context: c\ncontexts:\n- {name: c, context: x}\n")
    with pytest.raises(SystemExit, match="is not a kubeconfig: the context of 'c' in contexts is not a mapping"):
        resolved("--kubeconfig", str(tmp_path / "odd"))


def test_a_kubeconfig_s_context_is_chosen_as_kubectl_s_context(tmp_path: Path) -> None:
    # a kubeconfig of several clusters (EKS's, GKE's) had to have its current-context edited
    kc = _kubeconfig(tmp_path / "kc")
    doc = json.loads(kc.read_text())
    doc["clusters"].append({"name": "k2", "cluster": {"server": "https://10.0.0.2:6443"}})
    doc["users"].append({"name": "u2", "user": {"token": "other"}})
    doc["contexts"].append({"name": "prod", "context": {"cluster": "k2", "user": "u2"}})
    kc.write_text(json.dumps(doc))
    assert resolved("--kubeconfig", str(kc))[:2] == ("https://10.0.0.1:6443", "t0k")
    assert resolved("--kubeconfig", str(kc), "--context", "prod")[:2] == ("https://10.0.0.2:6443", "other")
    # client-go's words for a context the kubeconfig lacks, given or current (the run had gone on with no
    # credentials, to a 401 that blamed the user)
    with pytest.raises(SystemExit, match=r"kc: context was not found for specified context: nope$"):
        resolved("--kubeconfig", str(kc), "--context", "nope")
    kc.write_text(json.dumps({**doc, "current-context": "gone"}))
    with pytest.raises(SystemExit, match="context was not found for specified context: gone"):
        resolved("--kubeconfig", str(kc))
    with pytest.raises(SystemExit, match="--context names a context of a --kubeconfig"):
        resolved("--context", "prod")


class _JsonHandler(BaseHTTPRequestHandler):
    """A fake API server's handler: JSON answers, no log lines."""

    def _json(self, code: int, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@contextlib.contextmanager
def _serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """``handler`` served on a free port of this host while in the block: its URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


class _Api(_JsonHandler):
    """/api for every token; pods and namespaces for the token "admin" only (as RBAC would)."""

    def _answer(self) -> None:
        admin = self.headers.get("authorization") == "Bearer admin"
        if self.headers.get("authorization") in (None, "Bearer stale"):
            code, body = 401, {"kind": "Status", "code": 401, "reason": "Unauthorized"}
        elif self.path == "/api" or admin:
            code, body = 200, {"kind": "APIVersions"}
        else:
            code, body = 403, {"kind": "Status", "code": 403, "reason": "Forbidden",
                               "message": 'pods is forbidden: User "alice" cannot list resource "pods"'}
        self._json(code, body)

    def do_GET(self) -> None:
        self._answer()

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        self._answer()


@pytest.fixture
def api() -> Iterator[str]:
    with _serving(_Api) as url:
        yield url


def test_a_user_the_authorizer_refuses_stops_the_run_before_any_load(api: str, tmp_path: Path) -> None:
    run._check_target(api, bearer("admin"))
    with pytest.raises(SystemExit, match=r'GET /api/v1/pods answered 403 \(pods is forbidden: User "alice"'):
        run._check_target(api, bearer("alice"))
    with pytest.raises(SystemExit, match=r"refused the credentials.*pass --token or --kubeconfig"):
        run._check_target(api, bearer(""))
    no_user = run._resolve_target(parse("--kubeconfig", str(_kubeconfig(tmp_path / "kc", api, token=None))))[1]
    with pytest.raises(SystemExit, match="the kubeconfig's user has no credentials: pass --token"):
        run._check_target(api, no_user)
    # a token the server does not know: the message does not ask for the --token just given
    with pytest.raises(SystemExit, match=r"\(401\); the token given with --token: not one it knows"):
        run._check_target(api, bearer("stale"))
    stale = run._resolve_target(parse("--kubeconfig", str(_kubeconfig(tmp_path / "kc", api, token="stale"))))[1]
    with pytest.raises(SystemExit, match=r"\(401\); the token of --kubeconfig: not one it knows"):
        run._check_target(api, stale)


def test_an_own_server_that_refuses_anonymous_clients_is_said_before_any_load(api: str) -> None:
    # `--server-arg=--authorization-mode=RBAC`: the harness's server is plain HTTP and its clients send no
    # token, so every request of the load was a 403 for the whole run (283 of 283 in a smoke run)
    said = run._anonymous_refusal(api)  # the _Api server answers 401 without a token
    assert said is not None and said.startswith("the server the harness started answered 401 to GET /api/v1/pods")
    assert "--authorization-mode RBAC" in said and "--target and --kubeconfig" in said
    assert run._anonymous_refusal(f"http://127.0.0.1:{run._free_port()}") is None  # not for this check to say


def test_the_report_command_wants_a_run_directory(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="is not a run's directory"):
        run.main(["report", str(tmp_path / "missing")])
    with pytest.raises(SystemExit, match="is not a run's directory"):
        run.main(["report", str(tmp_path)])


_KUBELET_DELETES = r'''
import json, orjson
from loadtest.locustfiles.base import WatchEvent
from loadtest.locustfiles.kubelets import KubeletUser

k = object.__new__(KubeletUser)  # no Locust environment: only the pod handling is exercised
k.started, k.deleting, k.unsynced = {"ns/p"}, set(), {}
calls = []
answers = [503, 200]  # the first delete fails: the next event of the pod tries again


class Answer:
    def __init__(self, status):
        self.status = status


def call(method, path, name, body=None, **kw):
    calls.append([method, path, name, body, list(kw["expected"])])
    return Answer(answers.pop(0))


k.call = call
pod = {"metadata": {"namespace": "ns", "name": "p", "uid": "u1", "deletionTimestamp": "2026-01-01T00:00:00Z"},
       "spec": {"nodeName": "n"}, "status": {"phase": "Running"}}
line = orjson.dumps({"type": "MODIFIED", "object": pod})
k._pod_event(WatchEvent("MODIFIED", "4", line, 0.0))
k._pod_event(WatchEvent("MODIFIED", "5", line, 0.1))  # the same deletion again: tried again, the first having failed
k._pod_event(WatchEvent("MODIFIED", "6", line, 0.2))  # and once it succeeded, no more
k._pod_event(WatchEvent("DELETED", "7", orjson.dumps({"type": "DELETED", "object": pod}), 0.3))
print(json.dumps({"calls": calls, "deleting": sorted(k.deleting), "started": sorted(k.started)}))
'''


def test_a_kubelet_finishes_the_graceful_deletion_of_its_pods() -> None:
    # the server keeps a deleted bound pod Terminating (holding its node's resources and its claims'
    # GPUs) until its kubelet deletes it with grace 0; a kubelet that never did left every deleted pod
    # there, and gangs waited for GPUs that were never freed. Locust monkey-patches with gevent:
    # a process of its own.
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", _KUBELET_DELETES], capture_output=True, text=True, timeout=60,
                          cwd=Path(__file__).resolve().parents[2])
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    # recorded apart from the controllers' deletes, which the quota run counts against the creates
    assert seen["calls"] == [["DELETE", "/api/v1/namespaces/ns/pods/p", "pods [kubelet]",
                              {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0,
                               "preconditions": {"uid": "u1"}}, [404, 409]]] * 2
    assert seen["deleting"] == [] and seen["started"] == []


_READY_COUNT = r"""
import json, random
from collections import OrderedDict
import orjson
from loadtest.locustfiles.base import WatchEvent
from loadtest.locustfiles.controllers import ReplicaSetController

c = object.__new__(ReplicaSetController)  # no Locust environment: only the bookkeeping is exercised
c.pods, c.running, c.ready, c._last_running = OrderedDict(), set(), 0, 0.0
c.ns, c.rs, c.concurrency, c.selector = "ns", "rs", 4, {}
rng = random.Random(7)


def event(kind, name, phase):
    pod = {"metadata": {"namespace": "ns", "name": name}, "spec": {"nodeName": "n"}, "status": {"phase": phase}}
    c._pod_event(WatchEvent(kind, "1", orjson.dumps({"type": kind, "object": pod}), 0.0))


class Factory:
    def pod(self, ns, name, selector):
        return {"metadata": {"name": name}}


class Answer:
    status = 201


def create(plural, pod, ns, track):
    if rng.random() < 0.2:  # its Running event seen before the create's answer
        event("MODIFIED", pod["metadata"]["name"], "Running")
    return Answer()


c.factory, c.create, c.call = Factory(), create, lambda *a, **kw: None
bad, seen = 0, []
for step in range(3000):
    r = rng.random()
    if r < 0.3:
        c._create_pods(rng.randint(1, 3))
        seen = list(c.pods) + seen[:50]
    elif r < 0.65 and seen:
        event("MODIFIED", rng.choice(seen), "Running")
    elif r < 0.85 and c.pods:
        c._delete_pods(rng.randint(1, 3))
    elif seen:
        event("DELETED", rng.choice(seen), "Running")  # a pod of its own or one it deleted earlier
    bad += c.ready != sum(1 for n in c.pods if n in c.running)
c._pods_listed([{"metadata": {"name": n}, "status": {"phase": "Running"}} for n in list(c.pods)[:5]])
print(json.dumps({"bad": bad, "pods": len(c.pods), "ready_after_list": c.ready,
                  "expected_after_list": min(5, len(c.pods))}))
"""


def test_a_controller_counts_its_ready_pods_as_they_change() -> None:
    # the status write and the wait for Running read how many of the controller's pods run at every task:
    # kept as pods are created, seen Running, deleted and relisted, never walked
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", _READY_COUNT], capture_output=True, text=True, timeout=60,
                          cwd=Path(__file__).resolve().parents[2])
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen["bad"] == 0 and seen["pods"] > 0
    assert seen["ready_after_list"] == seen["expected_after_list"]


def test_failed_scrapes_are_counted_with_what_they_got(api: str, tmp_path: Path) -> None:
    # /metrics refused (the _Api server answers 401 without a token) or not Prometheus text (its JSON
    # for "admin"): counted, with the last answer for the report, and the watcher goes on
    import httpx

    from loadtest.serverwatch import ServerWatcher

    lines = (tmp_path / "server.jsonl").open("w")
    refused = ServerWatcher(api, tmp_path)
    with httpx.Client() as client:
        refused.scrape_once(client, lines)
    assert (refused.errors, refused.last_error) == (1, "401 Unauthorized")
    garbled = ServerWatcher(api, tmp_path, bearer("admin"))
    with garbled.auth.httpx_client() as client:
        garbled.scrape_once(client, lines)
        garbled.scrape_once(client, lines)
    assert garbled.errors == 2 and (garbled.last_error or "").startswith("not Prometheus text")
    assert garbled.first is None and not (tmp_path / "metrics-last.prom").exists()
    lines.close()


def test_a_server_that_refuses_connections_is_timed_from_the_first_refusal(api: str, tmp_path: Path) -> None:
    # what stops the load against a --target that died (its own server's exit stops it at once)
    import httpx

    from loadtest.serverwatch import ServerWatcher

    lines = (tmp_path / "server.jsonl").open("w")
    gone = ServerWatcher(f"http://127.0.0.1:{run._free_port()}", tmp_path)

    def since() -> float | None:
        return gone.unreachable_since

    with httpx.Client() as client:
        gone.scrape_once(client, lines)
        first = since()
        gone.scrape_once(client, lines)
        assert first is not None and since() == first and gone.unreachable_for() > 0
        assert gone.errors == 2 and (gone.last_error or "").startswith("ConnectError")
        gone.url = f"{api}/metrics"  # back: answered, even with a 401
        gone.scrape_once(client, lines)
    assert since() is None and gone.unreachable_for() == 0.0 and gone.last_error == "401 Unauthorized"
    lines.close()


_PACER = r'''
import json
from loadtest.locustfiles.controllers import Pacer

now = [100.0]
slept = []


def sleep(s):
    slept.append(round(s, 6))
    now[0] += s


p = Pacer(20.0, 50, clock=lambda: now[0], sleep=sleep)  # one controller's share: 20 pods/s
first = p.next - 100.0
starts = []
for _ in range(4):
    p.take(p.burst)
    starts.append(round(now[0] - 100.0 - first, 6))
now[0] += 5.0  # the server was slow for 5 s: the missed slots are not made up
p.take(p.burst)
late = round(p.next - now[0], 6)
print(json.dumps({"burst": p.burst, "first": first, "starts": starts, "late": late,
                  "tiny": Pacer(0.5, 50, clock=lambda: 0.0, sleep=sleep).burst}))
'''


def test_a_paced_controller_writes_in_slots_at_its_share_of_the_rate() -> None:
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", _PACER], capture_output=True, text=True, timeout=60,
                          cwd=Path(__file__).resolve().parents[2])
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen["burst"] == 10  # about two bursts a second, never more than the scenario's burst
    assert 0.0 <= seen["first"] <= 0.5  # a random phase within one slot
    assert seen["starts"] == [0.0, 0.5, 1.0, 1.5]  # 10 pods every 0.5 s: 20 a second
    assert seen["late"] == 0.5  # after a stall, the next slot is one burst away, not a catch-up burst
    assert seen["tiny"] == 1  # a controller whose share is under one pod a second writes one at a time


def test_the_progress_counts_pods_bound_by_a_target_s_scheduler() -> None:
    # against a --target its scheduler binds the pods: no pods/binding of the harness's, but the
    # controllers see their pods bound on their watches
    def row(n: int) -> dict[str, str]:
        return {"Request Count": str(n), "Failure Count": "0", "99%": "12"}

    stats = {("POST", "pods"): row(22), ("LATENCY", "pod create→bound"): row(20),
             ("", "Aggregated"): {"Requests/s": "14.780103362811", "Failure Count": "0"}}
    rows = dict(run._progress_rows(stats, {}))
    assert rows["pods created"] == "22"
    assert rows["pods bound"] == "20"
    assert rows["requests/s (all)"] == "14.8"
    stats[("POST", "pods/binding")] = row(21)  # the harness's binder
    assert dict(run._progress_rows(stats, {}))["pods bound"] == "21"
    assert dict(run._progress_rows({}, {}))["requests/s (all)"] == "–"


def test_without_a_terminal_progress_is_a_line_now_and_then(capsys: pytest.CaptureFixture[str]) -> None:
    # a CI log or nohup: no live table, but not silence for the whole run either
    progress = run._Progress("lines", "loadtest churn", every=30.0)
    stats = {("POST", "pods"): {"Request Count": "40", "Failure Count": "0"},
             ("", "Aggregated"): {"Requests/s": "12.34", "Failure Count": "0"}}
    progress.update(10.0, 300.0, "ramp 1/4", stats, {})
    assert capsys.readouterr().err == ""
    progress.update(31.0, 300.0, "ramp 1/4", stats, {})
    progress.update(40.0, 300.0, "ramp 1/4", stats, {})
    assert capsys.readouterr().err == ("loadtest churn: ramp 1/4, 31 / 300 s; pods created 40, bound 0, deleted 0; "
                                       "requests/s 12.3, failures 0\n")
    run._Progress("off", "loadtest churn").update(100.0, 300.0, "peak", stats, {})
    assert capsys.readouterr().err == ""


def test_the_load_s_clock_starts_when_locust_s_master_starts_its_shape(tmp_path: Path) -> None:
    # a remote worker that joined 90 s into a --quick run (within --workers-wait's 120 s) met a run
    # whose clock had started with the master: past its duration and a minute, the harness had ended
    # it, and the worker made no load
    log = tmp_path / "locust-master.log"
    clock = run._LoadStart(log)
    assert not clock.poll() and clock.joined == 0  # no log yet
    log.write_text("[2026-12-07 04:00:24,328] vm/INFO/locust.runners: vm_60a4 (index 0) reported as ready. "
                   "1 workers connected.\n[2026-12-07 04:00:29,330] vm/INFO/root: Waiting for workers to be ready, "
                   "1 of 2 conn")
    assert not clock.poll() and clock.joined == 1
    with log.open("a") as f:
        f.write("ected\n[2026-12-07 04:01:53,291] vm/INFO/locust.runners: vm_1c26 (index 1) reported as ready. "
                "2 workers connected.\n[2026-12-07 04:01:53,480] vm/INFO/locust.runners: Shape test starting.\n")
    assert clock.poll() and clock.joined == 2
    at = clock.at
    assert at is not None and clock.epoch is not None
    assert clock.poll() and clock.at == at  # once
    # a master that does not say so (another Locust's wording): requests in the statistics start it
    quiet = run._LoadStart(tmp_path / "absent.log")
    assert not quiet.poll() and quiet.poll(loaded=True) and quiet.at is not None


def test_without_a_terminal_the_wait_for_workers_is_a_line_now_and_then(capsys: pytest.CaptureFixture[str]) -> None:
    # while the master waits for remote workers the progress said "done, 30 / 20 s" of a load not begun
    progress = run._Progress("lines", "loadtest smoke", every=30.0)
    progress.waiting(10.0, 1, 2)
    assert capsys.readouterr().err == ""
    progress.waiting(31.0, 1, 2)
    progress.waiting(40.0, 1, 2)
    assert capsys.readouterr().err == "loadtest smoke: waiting for Locust's workers, 1 of 2 joined, 31 s\n"
    progress.waiting(65.0, 1, 2)
    assert "1 of 2 joined, 65 s" in capsys.readouterr().err
    stats = {("", "Aggregated"): {"Requests/s": "1.0", "Failure Count": "0"}}
    progress.update(10.0, 300.0, "steady", stats, {})  # the load's lines are timed by the load, from its start
    assert capsys.readouterr().err == ""
    progress.update(30.0, 300.0, "steady", stats, {})
    assert "steady, 30 / 300 s" in capsys.readouterr().err


def test_remote_workers_are_warned_of_loopback_addresses() -> None:
    # the docs' example binds 0.0.0.0 and loads a --target others reach; the defaults do neither
    assert run._remote_notes("0.0.0.0", "https://api.example:6443") == []
    master, server = run._remote_notes("127.0.0.1", "http://127.0.0.1:41000")
    assert "--master-bind-host 0.0.0.0" in master and "a loopback address" in server
    assert len(run._remote_notes("0.0.0.0", "https://localhost:6443")) == 1


@pytest.mark.parametrize("argv", [("--processes", "0"), ("--users", "0"), ("--duration", "0"), ("--duration", "x")])
def test_harness_rate_refuses_bad_options(argv: tuple[str, ...], capsys: pytest.CaptureFixture[str]) -> None:
    from loadtest.harnessrate import main as harness_rate

    with pytest.raises(SystemExit) as e:
        harness_rate(list(argv))
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {argv[0]}:" in err and "Traceback" not in err


def test_a_certificate_the_kubeconfig_does_not_trust_says_what_to_give(cert_served: Serve, tmp_path: Path) -> None:
    # over the socket: the run said only CERTIFICATE_VERIFY_FAILED
    from tests.client_certs import issue_client_cert

    other_ca, _ = issue_client_cert(tmp_path, "not-the-ca")  # a certificate that signed nothing of the server's
    kc = _kubeconfig(tmp_path / "kc", server=cert_served.url, token="admin")
    doc = json.loads(kc.read_text())
    doc["clusters"][0]["cluster"]["certificate-authority"] = str(other_ca)
    kc.write_text(json.dumps(doc))
    with pytest.raises(SystemExit, match=r"CERTIFICATE_VERIFY_FAILED.*signed by the CA the kubeconfig's cluster gives"):
        run._check_target(cert_served.url, kubeauth.for_target(kc, None, None)[1])
    doc["clusters"][0]["cluster"] = {"server": cert_served.url, "tls-server-name": "elsewhere.example"}
    kc.write_text(json.dumps(doc))  # the tests' CA is the system's (SSL_CERT_FILE): only the name is wrong
    with pytest.raises(SystemExit, match=r"mismatch.*the kubeconfig's tls-server-name gives the name to verify"):
        run._check_target(cert_served.url, kubeauth.for_target(kc, None, None)[1])


def test_a_target_of_the_wrong_scheme_is_said_so_by_run_and_harness_rate(cert_served: Serve, api: str) -> None:
    """Over sockets: a TLS server given as http:// hangs up ("Server disconnected"), and a plain
    one given as https:// answers no TLS; run and harness-rate both say which scheme it wants
    (harness-rate said only "Server disconnected")."""
    from loadtest.harnessrate import _check_target as check_rate_target

    as_http = cert_served.url.replace("https://", "http://")
    as_https = api.replace("http://", "https://")
    for target, hint in ((as_http, "(a server with TLS, as controlplane serve without --no-tls, is https://)"),
                         (as_https, "(it does not speak TLS: a server started with --no-tls is http://)")):
        with pytest.raises(SystemExit) as rate:
            check_rate_target(target, "/healthz", bearer("admin"))
        with pytest.raises(SystemExit) as scenario:
            run._check_target(target, bearer("admin"))
        for said in (str(rate.value), str(scenario.value)):
            assert f"cannot reach {target}" in said and said.endswith(hint), said


# discovery of a cluster older than the Workload API: no scheduling.k8s.io/v1beta1, and
# resource.k8s.io/v1 without ResourceClaimTemplates
_OLD_CLUSTER = {"/api/v1": ["namespaces", "pods", "pods/status", "pods/binding", "nodes", "nodes/status", "configmaps"],
                "/apis/apps/v1": ["deployments", "replicasets", "replicasets/status"],
                "/apis/coordination.k8s.io/v1": ["leases"],
                "/apis/resource.k8s.io/v1": ["deviceclasses", "resourceslices", "resourceclaims"]}


class _OldCluster(_JsonHandler):
    def do_GET(self) -> None:
        names = _OLD_CLUSTER.get(self.path)
        code, body = (200, {"kind": "APIResourceList", "resources": [{"name": n} for n in names]}) if names else (
            404, {"kind": "Status", "code": 404, "reason": "NotFound"})
        self._json(code, body)


def test_a_target_without_the_scenario_s_apis_stops_the_run_before_any_load() -> None:
    # a cluster without the Workload API failed every training job's request for the whole run
    with _serving(_OldCluster) as target:
        no_binder = {"BinderUser": 0}
        for name in ("churn", "kubelets", "list-storm", "million"):
            plan = scenarios.build(name, quick=True)
            run._check_resources(target, bearer(""), scenarios.Plan(**{**plan.__dict__, "fixed": {**plan.fixed,
                                                                                          **no_binder}}))
        gang = scenarios.build("gang", quick=True)
        with pytest.raises(SystemExit) as e:
            run._check_resources(target, bearer(""),
                                 scenarios.Plan(**{**gang.__dict__, "fixed": {**gang.fixed, **no_binder}}))
        assert str(e.value) == (
            f"loadtest: {target} does not serve what the gang scenario's clients call: resourceclaimtemplates of "
            "resource.k8s.io/v1, called by TrainingJobUser; scheduling.k8s.io/v1beta1 (for podgroups, workloads), "
            "called by TrainingJobUser. The clients make Kubernetes 1.37's requests: choose a scenario that does "
            "not need these")
        # the harness's binder watches PodGroups: against such a cluster, its scheduler places the pods
        with pytest.raises(SystemExit, match=r"podgroups\), called by BinderUser. Give --binder off"):
            run._check_resources(target, bearer(""), scenarios.build("churn", quick=True))


_PARTIAL_LIST = r'''
import json
from loadtest.answer import Answer
from loadtest.locustfiles.base import Reflector


def page(status, rv, cont, names):
    body = {"metadata": {"resourceVersion": rv, "continue": cont}, "items": [{"metadata": {"name": n}} for n in names]}
    return Answer(status, json.dumps(body).encode() if status == 200 else b'{"kind":"Status"}', 0.0)


class User:
    pages = [page(200, "10", "c1", ["a", "b"]), page(500, "", "", [])]  # the second page fails

    def list_pages(self, *args, **kw):
        yield from self.pages


listed = []
r = Reflector(User(), "pods", page_size=2, on_list=listed.append)
r._list()
partial = {"rv": r.rv, "synced": r.synced.is_set(), "listed": listed[:]}
User.pages = [page(200, "12", "c2", ["a", "b"]), page(200, "12", "", ["c"])]
r._list()
print(json.dumps({"partial": partial, "rv": r.rv, "count": r.count, "synced": r.synced.is_set(),
                  "listed": [[i["metadata"]["name"] for i in items] for items in listed]}))
'''


def test_a_reflector_whose_list_fails_part_way_lists_again() -> None:
    # a page after the first failed: the reflector kept the first page's revision and watched from
    # it, never learning of the objects on the pages it did not get (nor syncing)
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", _PARTIAL_LIST], capture_output=True, text=True, timeout=60,
                          cwd=Path(__file__).resolve().parents[2])
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen["partial"] == {"rv": None, "synced": False, "listed": []}  # run() lists again, it does not watch
    assert seen == {**seen, "rv": "12", "count": 3, "synced": True, "listed": [["a", "b", "c"]]}


# a watch's answer as the reflector reads it (its status and lines): the two scripts below use it
_FAKE_WATCH = r'''
class Stream:
    def __init__(self, lines):
        self.lines = list(lines)

    def readline(self, sep):
        return self.lines.pop(0) if self.lines else b""

    def release(self):
        pass


class Resp:
    def __init__(self, status, lines=()):
        self.status_code, self._response = status, Stream(lines)
'''


_WATCH_LIST = r'''
import json
from loadtest.answer import Answer
from loadtest.locustfiles.base import Reflector


def added(name, rv):
    event = {"type": "ADDED", "object": {"metadata": {"name": name, "resourceVersion": rv}}}
    return json.dumps(event, separators=(",", ":")).encode() + b"\n"  # as the server writes it


END = (b'{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"50",'
       b'"annotations":{"k8s.io/initial-events-end":"true"}}}}\n')


class User:
    answers = []
    watches = []

    def open_watch(self, path, name, query, expected=()):
        self.watches.append([query.get("sendInitialEvents"), query.get("resourceVersion"), list(expected)])
        return self.answers.pop(0)

    def list_pages(self, *args, **kw):
        yield Answer(200, b'{"metadata": {"resourceVersion": "40"}, "items": [{"metadata": {"name": "a"}}]}', 0.0)


seen = {}
# the initial events come in key order, with the objects' own revisions; the stream breaks before
# the end bookmark: not a point to watch from, the WatchList starts over
r = Reflector(User(), "pods", watch_list=True)
User.answers = [Resp(200, [added("a", "45"), added("b", "12")])]
r._watch()
seen["broken"] = [r.rv, r.synced.is_set()]
User.answers = [Resp(200, [added("a", "45"), added("b", "12"), END])]
r._watch()
seen["whole"] = [r.rv, r.synced.is_set(), r.count]
# a server without WatchList refuses it (422 Invalid): a LIST instead, as client-go falls back
r = Reflector(User(), "pods", watch_list=True)
User.answers = [Resp(422)]
r._watch()
seen["refused"] = [r.rv, r.synced.is_set(), r.count]
seen["watches"] = User.watches
print(json.dumps(seen))
'''


def test_a_watch_list_is_whole_at_its_end_bookmark_and_falls_back_to_a_list() -> None:
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", _FAKE_WATCH + _WATCH_LIST], capture_output=True, text=True, timeout=60,
                          cwd=Path(__file__).resolve().parents[2])
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen["broken"] == [None, False]  # it watched from "12", an object's revision, before
    assert seen["whole"] == ["50", True, 2]
    assert seen["refused"] == ["40", True, 1]  # it retried the WatchList each second, failing, before
    assert seen["watches"] == [["true", None, [400, 422]]] * 3


_RELIST = r"""
import json
from loadtest.answer import Answer
from loadtest.locustfiles.base import Reflector

EXPIRED = (b'{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure",'
           b'"reason":"Expired","code":410}}\n')


class User:
    lists = []
    answers = []

    def list_pages(self, plural, namespace=None, group="", version="v1", limit=0, **query):
        self.lists.append(query)
        yield Answer(200, b'{"metadata": {"resourceVersion": "40"}, "items": []}', 0.0)

    def open_watch(self, path, name, query, expected=()):
        return self.answers.pop(0)


r = Reflector(User(), "pods", field_selector="spec.nodeName=n1")
r._list()
User.answers = [Resp(200, [EXPIRED])]  # the watch's revision was compacted: an ERROR event on the stream
r._watch()
r._list()
User.answers = [Resp(410)]  # or the watch refused with 410
r._watch()
r._list()
print(json.dumps({"lists": User.lists, "relists": r.relists}))
"""


def test_a_reflector_lists_from_the_watch_cache_first_and_consistently_after_a_410() -> None:
    # client-go's reflector: its first LIST is resourceVersion=0 ("for performance reasons ... served
    # from the watch cache", which ignores limit there: the whole list, the reads the watch cache's
    # lock scenario is about); after a 410 the revision it had is gone, and it lists consistently.
    # The harness's reflectors made every LIST a consistent, paginated one
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", _FAKE_WATCH + _RELIST], capture_output=True, text=True, timeout=60,
                          cwd=Path(__file__).resolve().parents[2])
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    node = {"fieldSelector": "spec.nodeName=n1"}
    assert seen == {"lists": [{**node, "resourceVersion": "0"}, node, node], "relists": 2}


def test_a_quota_run_s_phase_stays_done_once_every_pod_is_deleted() -> None:
    assert [run._quota_phase(40, c, d) for c, d in ((10, 0), (40, 0), (40, 12), (40, 40), (40, 40))] == [
        "creating", "running", "deleting", "done", "done"]


def test_a_kubeconfig_user_with_an_auth_provider_is_told_to_pass_a_token(api: str, tmp_path: Path) -> None:
    # client certificates and exec plugins are used (tests/loadtest/test_kubeauth.py); the
    # auth-providers (gcp, azure, oidc) are not
    kc = _kubeconfig(tmp_path / "kc", server=api, token=None)
    doc = json.loads(kc.read_text())
    doc["users"][0]["user"] = {"auth-provider": {"name": "gcp"}}
    kc.write_text(json.dumps(doc))
    with pytest.raises(SystemExit, match=r"has no credentials the harness can use, only an auth-provider \(gcp\), "
                                         "which the harness does not run: pass --token"):
        run.main(["run", "churn", "--quick", "--kubeconfig", str(kc), "--out", str(tmp_path / "out")])


class _Rbac(_JsonHandler):
    """SelfSubjectAccessReviews answered as RBAC would for a user who may do everything with pods and
    namespaces but nothing with Nodes or Leases; the token "old" gets a server without the API."""

    def do_POST(self) -> None:
        review = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)))
        attrs = review["spec"]["resourceAttributes"]
        if self.headers.get("authorization") == "Bearer old":
            code, body = 404, {"kind": "Status", "code": 404}
        else:
            allowed = attrs["resource"] not in ("nodes", "leases")
            code, body = 201, {**review, "status": {"allowed": allowed}}
        self._json(code, body)


def test_calls_the_authorizer_denies_stop_the_run_before_any_load() -> None:
    # a user allowed to list pods and create namespaces (what _check_target probes) but not to
    # register Nodes ran the whole scenario, every kubelet call failing 403
    with _serving(_Rbac) as target:
        with pytest.raises(SystemExit) as e:
            run._check_access(target, bearer("t"), scenarios.build("kubelets", quick=True))
        assert str(e.value) == (
            f"loadtest: {target} does not allow this user calls the kubelets scenario's clients make: "
            "leases.coordination.k8s.io (create get update), nodes (create), nodes/status (patch) for KubeletUser; "
            "leases.coordination.k8s.io (list watch) for InformerUser; nodes (list watch) for BinderUser, "
            "InformerUser; use an admin's credentials (a user in system:masters, or bound to cluster-admin)")
        churn = scenarios.build("churn", quick=True)  # its informers follow pods: no Nodes, no Leases
        run._check_access(target, bearer("t"), scenarios.Plan(**{**churn.__dict__, "fixed": {"InformerUser": 1}}))
        run._check_access(target, bearer("old"), scenarios.build("kubelets", quick=True))  # no reviews: not checked


class _NoImpersonation(_JsonHandler):
    """SelfSubjectAccessReviews of a user who may impersonate users but not groups or service accounts."""

    def do_POST(self) -> None:
        review = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)))
        attrs = review["spec"]["resourceAttributes"]
        allowed = attrs["verb"] != "impersonate" or attrs["resource"] == "users"
        self._json(201, {**review, "status": {"allowed": allowed}})


def test_impersonation_a_target_refuses_stops_the_run_before_any_load() -> None:
    # --impersonate on against a cluster that does not let this user impersonate would fail every
    # request the clients make as their identities
    with _serving(_NoImpersonation) as target:
        with pytest.raises(SystemExit) as e:
            run._check_impersonation(target, bearer("t"))
        assert str(e.value) == (f"loadtest: {target} does not let this user impersonate groups, serviceaccounts "
                                "(--impersonate on); use an admin's credentials or --impersonate off")
    with _serving(_Rbac) as target:  # allowed (it denies Nodes and Leases only)
        run._check_impersonation(target, bearer("t"))
        run._check_impersonation(target, bearer("old"))  # no reviews: not checked


_BINDER = r'''
import json
import gevent
import gevent.queue
import orjson
from loadtest.locustfiles.base import WatchEvent
from loadtest.locustfiles.binder import MAX_PODS_PER_NODE, BinderUser

b = object.__new__(BinderUser)  # no Locust environment: only the placement is exercised
b.nodes, b.free_gpus, b.heap, b._rr, b.gpu_nodes = {}, {}, [], 0, 0
b.queue, b.queued = gevent.queue.Queue(), set()
b._add_node({"metadata": {"name": "n1"}, "status": {}})
placed = [b._least_loaded() for _ in range(MAX_PODS_PER_NODE + 1)]
seen = {"full": placed[-1], "placed": len([n for n in placed if n])}
pod = {"metadata": {"namespace": "ns", "name": "p1"}, "spec": {"nodeName": "n1"}}
b._bound_pod_event(WatchEvent("DELETED", "9", orjson.dumps({"type": "DELETED", "object": pod}), 0.0))
seen["after_a_delete"] = b._least_loaded()
# a binding refused (the pod deleted meanwhile) takes no room
b._bound_pod_event(WatchEvent("DELETED", "10", orjson.dumps({"type": "DELETED", "object": pod}), 0.0))


class Answer:
    status = 404


b.call = lambda *a, **kw: Answer()
g = gevent.spawn(b._bind_loop)
b.queue.put({"metadata": {"namespace": "ns", "name": "p2"}, "spec": {}})
gevent.sleep(0.05)
g.kill()
seen["count"] = b.nodes["n1"]
seen["heap"] = len(b.heap) <= 4 * len(b.nodes) + 64
print(json.dumps(seen))
'''


def test_the_binder_s_nodes_get_their_room_back_when_pods_go() -> None:
    # a node was full for good once 110 pods had been placed on it: list-storm --quick bound
    # 1,100 of its 2,596 pods (10 kubelets), the rest pending to the end
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", _BINDER], capture_output=True, text=True, timeout=60,
                          cwd=Path(__file__).resolve().parents[2])
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen == {"full": None, "placed": 110, "after_a_delete": "n1", "count": 109, "heap": True}


def test_a_locust_process_that_failed_says_why(tmp_path: Path) -> None:
    # a master whose port was taken died at once: the run reported "incomplete, 0 requests" after
    # waiting 30 s for its workers, and the reason was in locust-master.err alone
    class Proc:
        def __init__(self, returncode: int) -> None:
            self.returncode = returncode

    (tmp_path / "locust-master.err").write_text(
        "Traceback (most recent call last):\n  ...\nlocust.exception.RPCError: Socket bind failure: "
        "Address already in use (addr='tcp://127.0.0.1:5557')\n\n")
    (tmp_path / "locust-worker1.err").write_text("")
    assert run._locust_failures(tmp_path, Proc(1), [Proc(-9), Proc(2), Proc(0)]) == [
        "Locust's master exited with 1: locust.exception.RPCError: Socket bind failure: Address already in use "
        f"(addr='tcp://127.0.0.1:5557') (see {tmp_path / 'locust-master.err'})",
        f"Locust's worker 1 exited with 2 (see {tmp_path / 'locust-worker1.log'})"]  # its .err is empty
    assert run._locust_failures(tmp_path, Proc(0), [Proc(0)]) == []
    assert run._locust_failures(tmp_path, None, [Proc(0)]) == []  # a master the caller explains itself


# --------------------------------------------------------------------------- the pager, after a continue token expired

class _Compacted(_JsonHandler):
    """Five ConfigMaps, paginated; the continue token of the second page has expired (410 Expired,
    as kube-apiserver words it when the list's revision was compacted between the pages)."""

    asked: ClassVar[list[str]] = []
    lock = threading.Lock()

    def do_GET(self) -> None:
        with self.lock:
            self.asked.append(self.path)
        items = [{"metadata": {"name": f"cm{i}"}} for i in range(5)]
        if "continue=" in self.path:
            self._json(410, {"kind": "Status", "apiVersion": "v1", "metadata": {"continue": "fresh"},
                             "status": "Failure", "reason": "Expired", "code": 410,
                             "message": "The provided continue parameter is too old to display a consistent list"})
        elif "limit=" in self.path:
            self._json(200, {"kind": "ConfigMapList", "metadata": {"resourceVersion": "10", "continue": "c1"},
                             "items": items[:2]})
        else:
            self._json(200, {"kind": "ConfigMapList", "metadata": {"resourceVersion": "20"}, "items": items})


PAGER = r"""
import json, sys
from locust import events as locust_events
from locust.env import Environment
from loadtest.locustfiles.base import KubeUser, Reflector

env = Environment(events=locust_events)  # the users fire into Locust's events
events = []
env.events.request.add_listener(lambda request_type, name, exception=None, **kw: events.append(
    [request_type, name, None if exception is None else str(exception)]))


class User(KubeUser):
    host = sys.argv[1]


user = User(env)
pages = [[type(p).__name__, p.status, len((p.body or {}).get("items") or ())]
         for p in user.list_pages("configmaps", "ns", limit=2)]
reflector = Reflector(user, "configmaps", "ns", page_size=2, on_list=lambda items: None)
reflector._list()
print(json.dumps({"pages": pages, "events": events, "reflector": [reflector.rv, reflector.count,
                                                                  reflector.synced.is_set()]}))
"""


@pytest.fixture
def compacted() -> Iterator[str]:
    _Compacted.asked = []
    with _serving(_Compacted) as url:
        yield url


def test_an_expired_continue_token_is_expected_and_the_list_is_read_whole(compacted: str) -> None:
    # client-go's pager lists again without limit when a later page's token has expired (its
    # FullListIfExpired); the harness failed the 410 and its informers started over, to fail again
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", PAGER, compacted], capture_output=True, text=True, timeout=60,
                          cwd=Path(__file__).resolve().parents[2])
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen["pages"] == [["Answer", 200, 2], ["WholeList", 200, 5]]
    name = "configmaps [namespace]"
    assert seen["events"][:4] == [["GET", name, None], ["EXPECTED", f"410 {name}", None], ["GET", name, None],
                                  ["GET", name, None]]
    assert not [e for e in seen["events"] if e[2]]  # no failure
    # the whole list is the one first asked for: no limit, no continue
    assert _Compacted.asked[:3] == ["/api/v1/namespaces/ns/configmaps?limit=2",
                                    "/api/v1/namespaces/ns/configmaps?limit=2&continue=c1",
                                    "/api/v1/namespaces/ns/configmaps"]
    # a reflector's list is the whole list's: its objects and its revision
    assert seen["reflector"] == ["20", 5, True]


class _Scheduled(_JsonHandler):
    """Pods in ``default``: created as the probe, then marked unschedulable by a scheduler (or not,
    or the create refused, by ``mode``); deletes recorded."""

    mode: ClassVar[str] = "scheduler"
    deleted: ClassVar[list[str]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)))
        if self.mode == "refused":
            self._json(403, {"kind": "Status", "code": 403, "reason": "Forbidden", "message": "violates PodSecurity"})
            return
        self._json(201, {**body, "metadata": {**body["metadata"], "name": "probe-x1"}})

    def do_GET(self) -> None:
        conditions = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]
        self._json(200, {"metadata": {"name": "probe-x1"},
                         "status": {"conditions": conditions if self.mode == "scheduler" else []}})

    def do_DELETE(self) -> None:
        type(self).deleted.append(self.path)
        self._json(200, {"kind": "Status", "status": "Success"})


def test_a_target_s_scheduler_is_found_by_the_probe_pod_it_marks(capsys: pytest.CaptureFixture[str]) -> None:
    _Scheduled.deleted = []
    with _serving(_Scheduled) as url:
        _Scheduled.mode = "scheduler"
        assert run._binder_needed(url, bearer("admin"), wait=5) is False  # its scheduler places the pods
        _Scheduled.mode = "refused"  # admission refused the probe: no telling, the cluster's scheduler assumed
        assert run._binder_needed(url, bearer("admin"), wait=0.3) is False
    assert "could not probe for a scheduler" in capsys.readouterr().err
    assert _Scheduled.deleted == ["/api/v1/namespaces/default/pods/probe-x1?gracePeriodSeconds=0"]


def test_a_target_without_a_scheduler_gets_the_harness_s_binder(cert_served: Serve,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    # serve --no-scheduler: with --binder auto the harness's binder was off against every --target,
    # and the run's pods stayed pending, its pod startup verdict "no data" ("the clients make none")
    from loadtest import kubeauth

    target, auth = kubeauth.for_target(cert_served.kubeconfig, None, None)
    assert target is not None
    assert run._binder_needed(target, auth, wait=0.5) is True
    assert "no scheduler took up a probe pod within 0.5 s: the harness's binder places the pods" in \
        capsys.readouterr().err
    with auth.httpx_client(timeout=10) as client:  # the probe is gone
        pods = client.get(f"{target}/api/v1/namespaces/default/pods", params={"labelSelector": "loadtest=true"})
    assert [p["metadata"]["name"] for p in pods.json()["items"]
            if p["metadata"]["name"].startswith("loadtest-scheduler-probe-")] == []


_RUN_NODES = r'''
import json
from loadtest import objects
from loadtest.locustfiles.binder import run_nodes, run_pods
pod = objects.PodFactory(run="ab12").pod("ns", "p", {"a": "b"})
print(json.dumps({"selector": run_nodes(), "labels": objects.node("n1", run="ab12")["metadata"]["labels"],
                  "pods": run_pods(), "pod": pod["metadata"]["labels"]}))
'''


@pytest.mark.parametrize(("params", "selector"), [('{"run_id": "ab12"}', "loadtest/run=ab12"),
                                                  ("{}", "loadtest=true")])
def test_the_binder_places_its_run_s_pods_on_its_run_s_nodes_only(params: str, selector: str) -> None:
    # against a target with nodes of its own (serve --nodes, a cluster's, an earlier run's left without
    # a kubelet), the binder placed pods there, which nothing ran: smoke's gang timed out
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run([sys.executable, "-c", _RUN_NODES], capture_output=True, text=True, timeout=60,
                          cwd=root, env={**os.environ, "LOADTEST_PARAMS": params})
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen["selector"] == selector
    assert seen["labels"]["loadtest/run"] == "ab12" and seen["labels"]["loadtest"] == "true"
    # nor does it place pods other than its run's: a target's own pending pod (a user's, while no
    # scheduler ran) was bound to a load-test node, and that node's kubelet reported it Running
    assert seen["pods"] == ("loadtest/run=ab12" if "run_id" in params else "")
    assert seen["pod"]["loadtest/run"] == "ab12" and seen["pod"]["a"] == "b"


def test_each_run_has_an_id_its_workers_share(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import signal

    seen: list[dict[str, object]] = []

    def drive(args: argparse.Namespace, plan: scenarios.Plan, *rest: object) -> dict[str, object]:
        seen.append(json.loads(plan.environment()["LOADTEST_PARAMS"]))
        raise KeyboardInterrupt

    monkeypatch.setattr(run, "_drive", drive)
    monkeypatch.setattr(run, "_Server", _NoServer)
    monkeypatch.setattr(signal, "signal", lambda *a: None)  # the harness's handlers, not pytest's
    for _ in range(2):
        with pytest.raises(KeyboardInterrupt):
            run.run(parse("--quick", "--out", str(tmp_path / "out")))
    ids = [p["run_id"] for p in seen]
    assert len(set(ids)) == 2 and all(isinstance(i, str) and len(i) == 8 for i in ids)


class _NoServer:
    """In place of the server the harness starts."""

    url = "http://127.0.0.1:1"
    command = ""

    def __init__(self, *args: object, **kwargs: object) -> None:
        pass

    def wait_ready(self) -> None:
        pass

    def check_alive(self) -> None:
        pass

    def refusal(self) -> str | None:
        return None

    def stop(self) -> int:
        return 0


_WORKER_NAMES = r'''
import json, os
os.environ["LOADTEST_WORKER"] = "HOSTNAME"
from loadtest.locustfiles.base import unique_suffix, worker_label

print(json.dumps({"suffix": unique_suffix(), "labels": [worker_label(n) for n in (
    "Worker_3.example.com", "w0", "---", "a" * 40)], "pid": os.getpid()}))
'''


def test_a_remote_worker_s_name_becomes_a_dns_label_in_object_names() -> None:
    # the printed command for remote workers said LOADTEST_WORKER=HOSTNAME, and an operator types a host
    # name: its uppercase letters, dots and underscores went into Node, Lease and namespace names, and
    # every one of their creates was a 422 Invalid. A process of its own: Locust monkey-patches with gevent
    import re
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", _WORKER_NAMES], capture_output=True, text=True, timeout=60,
                          cwd=Path(__file__).resolve().parents[2])
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert re.fullmatch(r"hostname-[0-9a-f]+-0", seen["suffix"])
    assert seen["labels"] == ["worker-3-example-com", "w0", str(seen["pid"]), "a" * 20]


def _summary(*verdicts: str, failures: int = 0, incomplete: tuple[str, ...] = ()) -> dict[str, object]:
    return {"failures": failures, "incomplete_because": list(incomplete),
            "verdicts": [{"title": f"slo {i}", "verdict": v} for i, v in enumerate(verdicts)]}


@pytest.mark.parametrize(("summary", "interrupted", "fail_on_slo", "code", "line"), [
    (_summary("pass", "no data"), False, True, 0, "PASS (exit 0): complete, no request failed, 1 SLO verdict "
                                                  "passed, 1 without data"),
    # a verdict from too few samples neither passes nor fails, said apart from one without any
    (_summary("pass", "too few samples", "no data"), False, True, 0, "PASS (exit 0): complete, no request failed, "
                                                                     "1 SLO verdict passed, 1 with too few samples, "
                                                                     "1 without data"),
    # clusterloader2 exits non-zero when a measurement fails: a failed verdict was exit code 0
    (_summary("pass", "fail"), False, True, 1, "FAIL (exit 1): 1 of 2 SLO verdicts failed: slo 1"),
    (_summary("pass", "fail"), False, False, 0, "PASS (exit 0, --no-fail-on-slo): complete, no request failed; "
                                                "1 of 2 SLO verdicts failed: slo 1"),
    # failed requests fail the run whatever --no-fail-on-slo says
    (_summary("pass", failures=3), False, False, 1, "FAIL (exit 1): 3 requests failed"),
    (_summary("fail", failures=1), False, True, 1, "FAIL (exit 1): 1 request failed; 1 of 1 SLO verdict failed: "
                                                   "slo 0"),
    # an incomplete run's verdicts judge less than the plan's load: its own code, before any failure
    (_summary("fail", failures=2, incomplete=("a worker died", "no scrape")), False, True, 3,
     "INCOMPLETE (exit 3): a worker died; no scrape; 2 requests failed"),
    (_summary("pass", incomplete=("interrupted",)), True, True, 130, "INTERRUPTED (exit 130): a partial report"),
])
def test_the_exit_code_says_how_the_run_went(summary: dict[str, object], interrupted: bool, fail_on_slo: bool,
                                             code: int, line: str) -> None:
    assert run.outcome(summary, interrupted=interrupted, fail_on_slo=fail_on_slo) == (code, line)


def test_run_help_lists_the_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        run.main(["run", "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert "--no-fail-on-slo" in out
    codes = out[out.index("exit codes:"):]
    for code, _ in run.EXIT_CODES:
        assert f"\n  {code:<5}" in codes, code
    assert "--no-fail-on-slo)" in codes  # not cut at its hyphens


@pytest.mark.parametrize(("argv", "said"), [
    (["run", "smoke", "--users", "3"], "loadtest: --users does not apply to smoke"),  # the harness's own check
    (["run", "smoke", "--duration", "0"], "argument --duration: must be more than 0 seconds"),  # argparse's
    (["report", "/nonexistent"], "is not a run's directory"),
])
def test_a_run_refused_before_any_load_exits_2(argv: list[str], said: str) -> None:
    # the harness's one-line refusals exited 1, the code of a run whose requests or verdicts failed
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "loadtest", *argv], capture_output=True, text=True, timeout=60,
                          cwd=Path(__file__).resolve().parents[2])
    assert proc.returncode == 2, proc.stderr
    assert said in proc.stderr and "Traceback" not in proc.stderr


def test_the_harness_does_not_import_locust() -> None:
    # Locust patches the standard library with gevent's (threads become greenlets) in the process that
    # imports it: the harness's /metrics watcher thread then stalled its end by 30 s
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", "import sys, loadtest.run, loadtest.report; "
                           "print(sorted(m for m in ('gevent', 'locust') if m in sys.modules))"],
                          capture_output=True, text=True, timeout=60, cwd=Path(__file__).resolve().parents[2])
    assert proc.stdout.strip() == "[]", proc.stderr


_WORKER_WATCH = r'''
import json, sys, types
from pathlib import Path
from locust.runners import STATE_INIT, STATE_MISSING, STATE_RUNNING, STATE_STOPPED
from loadtest.locustfiles.workers import _Watch


class Clients:
    def __init__(self):
        self.nodes = {}

    @property
    def all(self):
        return list(self.nodes.values())


runner = types.SimpleNamespace(state=STATE_INIT, clients=Clients(), worker_count=0, shape_greenlet=object())
node = lambda cid, state: types.SimpleNamespace(id=cid, state=state)
w = _Watch(runner, Path(sys.argv[1]))
steps = []
runner.clients.nodes = {"a": node("a", STATE_INIT), "b": node("b", STATE_INIT), "c": node("c", STATE_INIT)}
steps.append(w.check())  # joins before the test: nothing
w.on_report("a", {"loadtest_worker": "host-a", "loadtest_pid": 11})
w.on_heartbeat("a", 100.0)
runner.state = STATE_RUNNING
runner.clients.nodes = {k: node(k, STATE_RUNNING) for k in "abc"}
steps.append(w.check())
runner.clients.nodes["a"].state = STATE_MISSING  # a: no heartbeat
del runner.clients.nodes["b"]  # b: quit
steps.append(w.check())
runner.clients.nodes["a"].state = STATE_RUNNING  # a: heartbeats again
steps.append(w.check())
runner.state = STATE_STOPPED  # the end of the test: c's quit is not recorded
runner.clients.nodes = {"a": node("a", STATE_RUNNING)}
steps.append(w.check())
runner.state = STATE_RUNNING  # a test again, with a alone
steps.append(w.check())
del runner.clients.nodes["a"]  # a quits, the last worker: the master stops the test at once
w.on_test_stopping(environment=None)  # (before it leaves the running state)
runner.state = STATE_STOPPED
steps.append(w.check())
print(json.dumps({"steps": steps, "file": json.loads(Path(sys.argv[1]).read_text())}))
'''


def test_the_master_records_the_workers_that_leave_the_test(tmp_path: Path) -> None:
    # over Locust's master's list of workers (a process of its own: Locust patches with gevent)
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", _WORKER_WATCH, str(tmp_path / "left.json")], capture_output=True,
                          text=True, timeout=60, cwd=Path(__file__).resolve().parents[2])
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen["steps"] == [False, False, True, True, False, False, False]
    b, a, last = seen["file"]["left"]  # in the order the master saw them
    assert (a["worker"], a["pid"], a["how"], a["last_heard"]) == ("host-a", 11, "missing", 100.0)
    assert a["back_at"] is not None and a["back_at"] >= a["at"]
    # b never reported: named by Locust's id; c went on (a, missing, makes no load), and took its users
    assert (b["worker"], b["pid"], b["how"], b["back_at"], b["others"]) == ("b", None, "quit", None, 1)
    # the last worker's quit, seen as the master stopped the test for it: no worker went on
    assert (last["worker"], last["how"], last["others"]) == ("host-a", "quit", 0)


@pytest.mark.parametrize(("entry", "lost", "said"), [
    ({"how": "missing", "others": 2}, True, "stopped answering its master after 10 s of load"),
    ({"how": "quit", "others": 2}, False, "quit after 40 s of load, before the run's end (Ctrl-C on it, or its own "
                                          "exit): its master handed its users to the 2 other workers, which started "
                                          "them anew"),
    ({"how": "quit", "others": 1}, False, "to the 1 other worker, which started them anew"),
    ({"how": "quit", "others": 0}, True, "quit after 40 s of load, before the run's end, the last worker: its master "
                                         "ended the load there"),
    ({"how": "quit"}, True, "if any were left"),  # an older harness's run.json: as it was judged then
])
def test_only_a_worker_whose_load_was_lost_makes_the_run_incomplete(tmp_path: Path, entry: dict[str, Any],
                                                                      lost: bool, said: str) -> None:
    # a remote worker that quit cleanly (Ctrl-C on it) while others went on made the run incomplete, though
    # Locust's master had handed its users to the others (a quit, unlike a heartbeat gone missing)
    from loadtest import leftworkers
    from tests.loadtest.test_report import write_run

    left = {"worker": "host3", "local": False, "last_heard": 10.0, "at": 40.0, "back_at": None, **entry}
    assert leftworkers.lost(left) is lost
    assert said in leftworkers.said(left, 30)
    write_run(tmp_path)
    ran = json.loads((tmp_path / "run.json").read_text())
    (tmp_path / "run.json").write_text(json.dumps({**ran, "workers_left": [left]}))
    summary = report.build(tmp_path)
    assert summary["complete"] is not lost
    assert summary["incomplete_because"] == ([leftworkers.said(left, 30)] if lost else [])
    assert summary["workers_quit"] == ([] if lost else [leftworkers.said(left, 30)])
    page = (tmp_path / "report.html").read_text()
    assert ("<th>Workers that quit</th>" in page) is not lost and ("<th>Not complete</th>" in page) is lost
    code, _ = run.outcome(summary, interrupted=False)
    assert code == (run.EXIT_INCOMPLETE if lost else run.EXIT_PASS)


def test_the_harness_says_each_worker_that_left_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import os
    import socket
    import types

    from loadtest import leftworkers

    path = tmp_path / "left.json"
    here = socket.gethostname()
    local = [types.SimpleNamespace(pid=os.getpid()), types.SimpleNamespace(pid=os.getpid() + 1)]
    entries = [
        # a local worker whose exit the harness saw already: said once, by the harness
        {"worker": "w1", "id": f"{here}_x", "pid": os.getpid() + 1, "how": "missing", "last_heard": 1005.0,
         "at": 1035.0, "back_at": None},
        {"worker": "host3", "id": "host3_y", "pid": os.getpid(), "how": "missing", "last_heard": 1010.25,
         "at": 1040.0, "back_at": None, "others": 1},
    ]
    path.write_text(json.dumps({"left": entries}))
    left, seen = leftworkers.read(path, -1.0, [], local, {1: 5.0}, 1000.0)
    assert left == [{"worker": "host3", "how": "missing", "local": False, "last_heard": 10.2, "at": 40.0,
                     "back_at": None, "others": 1}]
    err = capsys.readouterr().err
    assert err == ("loadtest: Locust's worker host3 (remote) stopped answering its master after 10.2 s of load "
                   f"(no heartbeat for {leftworkers.heartbeat_liveness()} s: killed, stalled, or its machine or "
                   "network gone); its users made no load after that\n")
    assert leftworkers.read(path, seen, left, local, {1: 5.0}, 1000.0) == (left, seen)  # unchanged: not read
    entries[1]["back_at"] = 1050.0
    path.write_text(json.dumps({"left": entries}))
    left, _ = leftworkers.read(path, -1.0, left, local, {1: 5.0}, 1000.0, final=True)
    assert left[0]["back_at"] == 50.0 and capsys.readouterr().err == ""  # not said again
    assert leftworkers.said(left[0], 30).endswith("gone); it came back after 50 s")


@pytest.mark.parametrize(("change", "code", "last"), [
    ({}, 0, "loadtest smoke: PASS (exit 0): complete, no request failed, "),
    ({"slow_startup": True}, 1, "loadtest smoke: FAIL (exit 1): 1 of "),
    ({"slow_startup": True, "no_fail_on_slo": True}, 0, "loadtest smoke: PASS (exit 0, --no-fail-on-slo): "),
    ({"run": {"workers_lost": [{"worker": 1, "exit": -9, "at": 18.2}]}}, 3,
     "loadtest smoke: INCOMPLETE (exit 3): Locust's worker 1 exited with -9 after 18.2 s of load"),
    ({"run": {"interrupted": True, "load_seconds": 30.6}}, 130,
     "loadtest smoke: INTERRUPTED (exit 130): a partial report"),
])
def test_the_report_command_exits_as_the_run_did(tmp_path: Path, change: dict[str, Any], code: int,
                                                  last: str) -> None:
    # it exited 0 whatever the report said, so a CI job that rebuilt a copied run's report could not judge it
    import subprocess
    import sys

    from tests.loadtest.test_report import write_run

    write_run(tmp_path, slow_startup=change.get("slow_startup", False))
    ran = json.loads((tmp_path / "run.json").read_text())
    (tmp_path / "run.json").write_text(json.dumps({**ran, **change.get("run", {})}))
    proc = subprocess.run([sys.executable, "-m", "loadtest", "report", str(tmp_path),
                           *(["--no-fail-on-slo"] if change.get("no_fail_on_slo") else [])],
                          capture_output=True, text=True, timeout=120, cwd=Path(__file__).resolve().parents[2])
    assert proc.returncode == code, proc.stderr
    assert proc.stderr.rstrip().splitlines()[-1].startswith(last), proc.stderr
    # stdout stays the summary's totals, one JSON line
    assert json.loads(proc.stdout)["scenario"] == "smoke"
    # and the code is the one run gives the same summary
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert run.outcome(summary, interrupted=bool(change.get("run", {}).get("interrupted")),
                       fail_on_slo=not change.get("no_fail_on_slo"))[0] == code


def test_the_report_command_lists_its_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        run.main(["report", "--help"])
    out = capsys.readouterr().out
    codes = out[out.index("exit codes"):]
    for code, _ in run.EXIT_CODES:
        assert f"\n  {code:<5}" in codes, code
    assert "--no-fail-on-slo" in out


def test_a_reader_that_stops_early_gets_no_traceback() -> None:
    """``python -m loadtest scenarios | head -1``: the harness stops quietly (exit 1) when the
    reader of its stdout goes away, as a Unix command does, not with a BrokenPipeError."""
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-m", "loadtest", "scenarios"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=Path(__file__).resolve().parents[2])
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # before it writes: its writes meet a closed pipe
    with proc.stderr:
        stderr = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 1, stderr
    assert "Traceback" not in stderr and "BrokenPipe" not in stderr, stderr
