"""The harness's credentials (loadtest/kubeauth.py): kubeconfigs with client certificates and
exec plugins, for its httpx clients (preflight checks, /metrics) and its Locust users, against a
served ``controlplane serve --client-ca-file`` (tests/conftest.py's ``cert_served``)."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from loadtest import kubeauth, run, scenarios
from loadtest.kubeauth import CredentialsError
from loadtest.serverwatch import ServerWatcher
from tests.client_certs import issue_client_cert
from tests.test_cli import Serve

ROOT = Path(__file__).resolve().parents[2]
REVIEW = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
REVIEWS = "/apis/authentication.k8s.io/v1/selfsubjectreviews"
V1 = "client.authentication.k8s.io/v1"


def b64(data: str | bytes) -> str:
    return base64.b64encode(data.encode() if isinstance(data, str) else data).decode()


def kubeconfig(path: Path, server: str, user: dict[str, Any], cluster: dict[str, Any] | None = None) -> Path:
    ca = os.environ["SSL_CERT_FILE"]  # the tests' CA (tests/conftest.py), which the servers' certificates chain to
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "k", "cluster": {"server": server, "certificate-authority": ca, **(cluster or {})}}],
        "users": [{"name": "u", "user": user}], "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}]}))
    return path


PLUGIN = r'''
import json, os, sys, time
from pathlib import Path
here = Path(sys.argv[1])
runs = int((here / "runs").read_text()) + 1 if (here / "runs").exists() else 1
(here / "runs").write_text(str(runs))
(here / "exec-info").write_text(os.environ["KUBERNETES_EXEC_INFO"])
(here / "env").write_text(os.environ.get("PLUGIN_GREETING", ""))
status = json.loads((here / "status.json").read_text())
expires_in = status.pop("expiresIn", None)
if expires_in is not None:  # (whole seconds: it expires up to a second sooner)
    status["expirationTimestamp"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + expires_in))
print(json.dumps({"apiVersion": os.environ.get("PLUGIN_VERSION", "client.authentication.k8s.io/v1"),
                  "kind": "ExecCredential", "status": status}))
'''


def exec_user(directory: Path, status: dict[str, Any], **stanza: Any) -> dict[str, Any]:
    """A kubeconfig user whose exec plugin (a Python script) prints ``status`` in an ExecCredential,
    counting its runs in ``directory/runs`` and keeping what it was told in ``directory/exec-info``."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "plugin.py").write_text(PLUGIN)
    (directory / "status.json").write_text(json.dumps(status))
    return {"exec": {"apiVersion": V1, "command": sys.executable, "args": [str(directory / "plugin.py"),
                                                                         str(directory)],
                     "interactiveMode": "Never", "env": [{"name": "PLUGIN_GREETING", "value": "hello"}], **stanza}}


def admin_token(served: Serve) -> str:
    return served.tokens.read_text().split(",", 1)[0]


def whoami(auth: kubeauth.Credentials, server: str) -> str:
    with auth.httpx_client(timeout=10) as client:
        r = client.post(server + REVIEWS, json=REVIEW)
    assert r.status_code == 201, r.text
    return str(r.json()["status"]["userInfo"]["username"])


# --------------------------------------------------------------------------- reading kubeconfigs

def test_a_kubeconfig_s_client_certificate_ca_and_server_name_are_read(tmp_path: Path) -> None:
    cert, key = issue_client_cert(tmp_path / "pki", "alice")
    kc = kubeconfig(tmp_path / "kc", "https://10.0.0.1:6443", {"client-certificate": "pki/alice.crt",
                                                               "client-key-data": b64(key.read_bytes())},
                    {"tls-server-name": "kubernetes", "certificate-authority-data": b64("CA PEM")})
    auth, server = kubeauth.from_kubeconfig(kc)
    # a relative path is the kubeconfig's directory's, as clientcmd resolves it
    assert (server, auth.cert_pem, auth.key_pem) == ("https://10.0.0.1:6443", cert.read_text(), key.read_text())
    assert (auth.ca_pem, auth.tls_server_name, auth.verify, auth.authorization()) == ("CA PEM", "kubernetes",
                                                                                      True, None)
    assert kubeauth.from_kubeconfig(kubeconfig(tmp_path / "kc2", "https://h", {"token": "t"},
                                               {"insecure-skip-tls-verify": True}))[0].verify is False
    basic = kubeauth.from_kubeconfig(kubeconfig(tmp_path / "kc3", "https://h", {"username": "u", "password": "p"}))
    assert basic[0].authorization() == "Basic " + b64("u:p")
    # --token alone verifies nothing, as before
    assert kubeauth.bearer("t").verify is False


@pytest.mark.parametrize(("user", "message"), [
    ({"client-certificate-data": b64("C")}, "a client certificate without its key"),
    ({"client-certificate-data": "%%%", "client-key-data": "%%%"}, "client-certificate-data is not base64"),
    ({"client-certificate": "missing.crt", "client-key": "missing.key"}, "cannot read the client certificate"),
    ({"exec": {"command": "aws", "apiVersion": "client.authentication.k8s.io/v1alpha1"}}, "v1alpha1 is not one"),
    ({"exec": {"command": "aws", "apiVersion": V1}}, "interactiveMode must be specified"),
    ({"exec": {"command": "aws", "apiVersion": V1, "interactiveMode": "Always"}},
     "exec plugin cannot support interactive mode: standard input is not a terminal"),
    ({"exec": {"command": "aws", "apiVersion": V1, "interactiveMode": "Sometimes"}}, "invalid interactiveMode"),
    ({"exec": {"apiVersion": V1, "interactiveMode": "Never"}}, "names no command"),
])
def test_kubeconfig_users_the_harness_cannot_use_are_refused_with_a_message(tmp_path: Path, user: dict[str, Any],
                                                                            message: str) -> None:
    with pytest.raises(CredentialsError, match=message):
        kubeauth.from_kubeconfig(kubeconfig(tmp_path / "kc", "https://h", user))
    with pytest.raises(SystemExit, match=f"^loadtest: .*{message}"):
        run._resolve_target(run_args("--kubeconfig", str(tmp_path / "kc")))


def run_args(*argv: str) -> Any:
    import argparse

    p = argparse.ArgumentParser()
    run.add_arguments(p)
    return p.parse_args(["smoke", *argv])


def test_credentials_reach_the_workers_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    user = {**exec_user(tmp_path / "p", {"token": "x"}, provideClusterInfo=True),
            "client-certificate-data": b64("C"), "client-key-data": b64("K")}
    auth, _ = kubeauth.from_kubeconfig(kubeconfig(tmp_path / "kc", "https://h", user, {"tls-server-name": "n"}))
    monkeypatch.setenv(kubeauth.ENV, auth.to_env())
    again = kubeauth.from_env()
    assert (again.exec, again.cert_pem, again.ca_pem, again.tls_server_name, again.verify) == (
        auth.exec, "C", auth.ca_pem, "n", True)
    monkeypatch.delenv(kubeauth.ENV)
    monkeypatch.setenv("LOADTEST_TOKEN", "old")  # a locustfile run alone, as before
    assert kubeauth.from_env().authorization() == "Bearer old"


# --------------------------------------------------------------------------- token files

class Clock:
    """kubeauth's clock, moved by the test."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.now = 1000.0
        monkeypatch.setattr(kubeauth, "_clock", lambda: self.now)


def test_a_token_file_is_read_again_after_50_seconds_as_client_go(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock(monkeypatch)
    (tmp_path / "token").write_text("first\n")
    auth, _ = kubeauth.from_kubeconfig(kubeconfig(tmp_path / "kc", "https://h", {"tokenFile": "token"}))
    assert auth.authorization() == "Bearer first"
    generation = auth.generation
    (tmp_path / "token").write_text("second\n")  # rotated (a projected token's kubelet, a vault agent)
    clock.now += 49
    assert auth.authorization() == "Bearer first"  # kept a while, as client-go's cached token source
    clock.now += 2
    assert auth.authorization() == "Bearer second" and auth.generation > generation
    (tmp_path / "token").unlink()  # unreadable, then empty: the last token read is kept
    clock.now += 60
    assert auth.authorization() == "Bearer second"
    (tmp_path / "token").write_text("")
    clock.now += 60
    assert auth.authorization() == "Bearer second"

    # a kubeconfig's token and tokenFile: the file wins, as client-go's; --token wins over both
    (tmp_path / "token").write_text("from-file")
    both = kubeconfig(tmp_path / "kc2", "https://h", {"token": "inline", "tokenFile": "token"})
    assert kubeauth.from_kubeconfig(both)[0].authorization() == "Bearer from-file"
    _, given = kubeauth.for_target(both, "flag", None)
    clock.now += 60
    assert given.authorization() == "Bearer flag"


def test_a_token_file_travels_to_the_workers_by_its_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock(monkeypatch)
    (tmp_path / "token").write_text("first")
    auth, _ = kubeauth.from_kubeconfig(kubeconfig(tmp_path / "kc", "https://h", {"tokenFile": "token"}))
    monkeypatch.setenv(kubeauth.ENV, auth.to_env())
    (tmp_path / "token").write_text("second")
    local = kubeauth.from_env()  # a local worker reads the file itself
    assert local.authorization() == "Bearer second"
    (tmp_path / "token").unlink()  # a remote worker, without the file: the token it was sent
    clock.now += 60
    assert kubeauth.from_env().authorization() == "Bearer first"
    (tmp_path / "token").write_text("third")
    monkeypatch.chdir(tmp_path)  # a kubeconfig named relatively: its file by an absolute path all the same
    assert kubeauth.from_kubeconfig(Path("kc"))[0].token_file == str(tmp_path / "token")


def test_a_rotated_token_file_is_taken_by_the_harness_s_clients(cert_served: Serve, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock(monkeypatch)
    admin = admin_token(cert_served)
    (tmp_path / "token").write_text(admin)
    auth, _ = kubeauth.from_kubeconfig(kubeconfig(tmp_path / "kc", cert_served.url, {"tokenFile": "token"}))
    assert whoami(auth, cert_served.url) == "admin"
    with auth.httpx_client(timeout=10) as client:
        name = f"rotated-{os.getpid()}"
        made = client.post(f"{cert_served.url}/api/v1/namespaces/default/serviceaccounts",
                           json={"metadata": {"name": name}})
        assert made.status_code == 201, made.text
        issued = client.post(f"{cert_served.url}/api/v1/namespaces/default/serviceaccounts/{name}/token",
                             json={"spec": {}})
        assert issued.status_code == 201, issued.text
    (tmp_path / "token").write_text(issued.json()["status"]["token"])
    clock.now += 51
    assert whoami(auth, cert_served.url) == f"system:serviceaccount:default:{name}"


# --------------------------------------------------------------------------- exec plugins

def test_a_missing_exec_command_is_client_go_s_error_with_its_install_hint(tmp_path: Path) -> None:
    user = {"exec": {"apiVersion": V1, "command": "no-such-auth-plugin", "interactiveMode": "IfAvailable",
                     "installHint": "no-such-auth-plugin: install it with `brew install no-such-auth-plugin`"}}
    auth, _ = kubeauth.from_kubeconfig(kubeconfig(tmp_path / "kc", "https://h", user))
    with pytest.raises(CredentialsError) as e:
        auth.authorization()
    said = str(e.value)
    assert said.startswith("exec: executable no-such-auth-plugin not found\n\nIt looks like you are trying to use "
                           "a client-go credential plugin that is not installed.")
    assert said.endswith("\n\nno-such-auth-plugin: install it with `brew install no-such-auth-plugin`")
    (tmp_path / "fails").write_text("#!/bin/sh\nexit 3\n")
    (tmp_path / "fails").chmod(0o755)
    failing, _ = kubeauth.from_kubeconfig(kubeconfig(tmp_path / "kc", "https://h", {"exec": {
        "apiVersion": V1, "command": str(tmp_path / "fails"), "interactiveMode": "Never"}}))
    with pytest.raises(CredentialsError, match=f"^exec: executable {tmp_path / 'fails'} failed with exit code 3$"):
        failing.authorization()


def test_interactive_modes_never_and_if_available_run_the_plugin_without_a_terminal(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plugin = tmp_path / "plugin"
    for mode, version in (("Never", V1), ("IfAvailable", V1), (None, "client.authentication.k8s.io/v1beta1")):
        user = exec_user(plugin, {"token": "t"})
        user["exec"]["apiVersion"] = version
        if mode is None:  # v1beta1's default: IfAvailable
            del user["exec"]["interactiveMode"]
        else:
            user["exec"]["interactiveMode"] = mode
        auth, _ = kubeauth.from_kubeconfig(kubeconfig(tmp_path / "kc", "https://h", user))
        monkeypatch.setenv("PLUGIN_VERSION", version)
        assert auth.authorization() == "Bearer t"
        assert json.loads((plugin / "exec-info").read_text())["spec"]["interactive"] is False


def test_an_exec_plugin_runs_as_client_go_runs_it(tmp_path: Path) -> None:
    plugin = tmp_path / "plugin"
    user = exec_user(plugin, {"token": "first", "expiresIn": 60}, provideClusterInfo=True)
    auth, _ = kubeauth.from_kubeconfig(kubeconfig(tmp_path / "kc", "https://h:6443", user,
                                                  {"tls-server-name": "kubernetes"}))
    assert auth.authorization() == "Bearer first" and auth.authorization() == "Bearer first"
    assert (plugin / "runs").read_text() == "1"  # kept while it has not expired
    info = json.loads((plugin / "exec-info").read_text())
    ca = Path(os.environ["SSL_CERT_FILE"]).read_text()
    assert info == {"apiVersion": V1, "kind": "ExecCredential", "spec": {"interactive": False, "cluster": {
        "server": "https://h:6443", "tls-server-name": "kubernetes", "certificate-authority-data": b64(ca)}}}
    assert (plugin / "env").read_text() == "hello"
    # a 401 for the credentials in use runs it again; one for credentials already replaced does not
    (plugin / "status.json").write_text(json.dumps({"token": "second"}))
    generation = auth.generation
    auth.unauthorized(generation)
    auth.unauthorized(generation)
    assert auth.authorization() == "Bearer second" and (plugin / "runs").read_text() == "2"
    # without provideClusterInfo the plugin is told no cluster
    auth, _ = kubeauth.from_kubeconfig(kubeconfig(tmp_path / "kc", "https://h:6443", exec_user(plugin, {"token": "t"})))
    auth.authorization()
    assert json.loads((plugin / "exec-info").read_text())["spec"] == {"interactive": False}


def test_provide_cluster_info_tells_the_plugin_the_cluster_as_client_go_s_exec_cluster(tmp_path: Path) -> None:
    plugin = tmp_path / "plugin"
    extension = {"audience": "sts.example.com", "region": "eu-west-1"}
    auth, _ = kubeauth.from_kubeconfig(kubeconfig(
        tmp_path / "kc", "https://eks:443", exec_user(plugin, {"token": "t"}, provideClusterInfo=True),
        {"insecure-skip-tls-verify": True, "proxy-url": "http://proxy:3128", "disable-compression": True,
         "extensions": [{"name": "client.authentication.k8s.io/exec", "extension": extension},
                        {"name": "another", "extension": {"x": 1}}]}))
    assert auth.authorization() == "Bearer t"
    cluster = json.loads((plugin / "exec-info").read_text())["spec"]["cluster"]
    assert cluster == {"server": "https://eks:443", "insecure-skip-tls-verify": True,
                       "certificate-authority-data": cluster["certificate-authority-data"],
                       "proxy-url": "http://proxy:3128", "disable-compression": True, "config": extension}


def test_an_exec_plugin_s_expired_credentials_are_asked_for_again(tmp_path: Path) -> None:
    plugin = tmp_path / "plugin"
    auth, _ = kubeauth.from_kubeconfig(kubeconfig(tmp_path / "kc", "https://h",
                                                  exec_user(plugin, {"token": "a", "expiresIn": 2})))
    assert auth.authorization() == "Bearer a"
    (plugin / "status.json").write_text(json.dumps({"token": "b"}))
    assert auth.authorization() == "Bearer a"  # (it expires 1-2 s after the plugin ran)
    time.sleep(2.1)
    assert auth.authorization() == "Bearer b" and (plugin / "runs").read_text() == "2"


@pytest.mark.parametrize(("status", "version", "message"), [
    ({}, V1, "didn't return a token or cert/key pair"),
    ({"clientCertificateData": "C"}, V1, "returned only certificate or key"),
    ({"token": "t"}, "client.authentication.k8s.io/v1beta1", "configured to use API version .*v1, plugin "
                                                              "returned version .*v1beta1"),
    ({"token": "t", "expirationTimestamp": "soon"}, V1, "is not RFC 3339"),
])
def test_an_exec_plugin_s_bad_answers_are_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 status: dict[str, Any], version: str, message: str) -> None:
    monkeypatch.setenv("PLUGIN_VERSION", version)
    auth, _ = kubeauth.from_kubeconfig(kubeconfig(tmp_path / "kc", "https://h", exec_user(tmp_path / "p", status)))
    with pytest.raises(CredentialsError, match=message):
        auth.authorization()


# --------------------------------------------------------------------------- the harness's clients, served

def test_the_preflight_checks_and_scrapes_authenticate_with_a_client_certificate(cert_served: Serve,
                                                                                 tmp_path: Path) -> None:
    cert, key = issue_client_cert(tmp_path, "kind-admin", ("system:masters",))
    kc = kubeconfig(tmp_path / "kc", cert_served.url, {"client-certificate": str(cert), "client-key": str(key)})
    target, auth, _ = run._resolve_target(run_args("--kubeconfig", str(kc)))
    assert (target, whoami(auth, cert_served.url)) == (cert_served.url, "kind-admin")
    # they refused the kubeconfig before ("has no bearer token, only a client certificate")
    run._check_target(cert_served.url, auth)
    run._check_resources(cert_served.url, auth, scenarios.build("churn", quick=True))
    run._check_access(cert_served.url, auth, scenarios.build("churn", quick=True))
    watcher = ServerWatcher(cert_served.url, tmp_path, auth)
    with auth.httpx_client(timeout=10) as client, (tmp_path / "server.jsonl").open("w") as lines:
        watcher.scrape_once(client, lines)
    assert watcher.errors == 0 and watcher.first is not None


def test_the_preflight_checks_run_an_exec_plugin_and_name_it_when_refused(cert_served: Serve, tmp_path: Path) -> None:
    user = exec_user(tmp_path / "p", {"token": admin_token(cert_served)})
    auth, _ = kubeauth.from_kubeconfig(kubeconfig(tmp_path / "kc", cert_served.url, user))
    run._check_target(cert_served.url, auth)
    assert whoami(auth, cert_served.url) == "admin"
    (tmp_path / "p" / "status.json").write_text(json.dumps({"token": "stale"}))
    auth, _ = kubeauth.from_kubeconfig(kubeconfig(tmp_path / "kc", cert_served.url, user))
    with pytest.raises(SystemExit, match=r"refused the credentials \(401\); what the exec plugin \(python.*\) gave "
                                         "of --kubeconfig: not one it knows"):
        run._check_target(cert_served.url, auth)


LOCUST_USERS = r'''
import json, os, sys, time
from pathlib import Path
from locust.env import Environment
from loadtest import kubeauth
from loadtest.locustfiles.base import KubeUser

server = sys.argv[1]
seen = {}
env = Environment()
for kc in sys.argv[2:]:
    auth, _ = kubeauth.from_kubeconfig(Path(kc))
    os.environ[kubeauth.ENV] = auth.to_env()
    import loadtest.locustfiles.base as base
    base._CREDENTIALS = None  # each kubeconfig's credentials, as each run's worker has its own

    class User(KubeUser):
        host = server

    user = User(env)
    review = user.call("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", "ssr",
                       {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
    seen[Path(kc).name] = [review.status, ((review.body or {}).get("status") or {}).get("userInfo", {}).get("username")]

print(json.dumps(seen))
'''


def test_the_locust_users_authenticate_with_certificates_and_exec_plugins(cert_served: Serve,
                                                                        tmp_path: Path) -> None:
    cert, key = issue_client_cert(tmp_path, "kind-admin", ("system:masters",))
    kubeconfig(tmp_path / "cert", cert_served.url, {"client-certificate-data": b64(cert.read_bytes()),
                                                     "client-key-data": b64(key.read_bytes())})
    kubeconfig(tmp_path / "exec-token", cert_served.url,
               exec_user(tmp_path / "p1", {"token": admin_token(cert_served)}))
    ops, ops_key = issue_client_cert(tmp_path, "eks-ops", ("system:masters",))
    kubeconfig(tmp_path / "exec-cert", cert_served.url, exec_user(tmp_path / "p2", {
        "clientCertificateData": ops.read_text(), "clientKeyData": ops_key.read_text()}))
    proc = subprocess.run([sys.executable, "-c", LOCUST_USERS, cert_served.url,
                           *(str(tmp_path / n) for n in ("cert", "exec-token", "exec-cert"))],
                          capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen["cert"] == [201, "kind-admin"]
    assert seen["exec-token"] == [201, "admin"]
    assert seen["exec-cert"] == [201, "eks-ops"]



# --------------------------------------------------------------------------- harness-rate

def test_harness_rate_checks_its_target_with_the_run_s_credentials(cert_served: Serve, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from loadtest.harnessrate import _check_target
    from loadtest.harnessrate import main as harness_rate

    monkeypatch.setenv("LOADTEST_TRIVIAL_PATH", "/api")  # (cert_served's /healthz takes anyone)
    with pytest.raises(SystemExit, match=r"/api refused the credentials \(401\); pass --token or --kubeconfig"):
        harness_rate(["--target", cert_served.url])
    with pytest.raises(SystemExit, match=r"refused the credentials \(401\); the token of --kubeconfig"):
        harness_rate(["--kubeconfig", str(kubeconfig(tmp_path / "kc", cert_served.url, {"token": "stale"}))])
    # --context: the stale context is current, the chosen one's client certificate is taken (over the socket)
    cert, key = issue_client_cert(tmp_path, "kind-admin", ("system:masters",))
    kc = kubeconfig(tmp_path / "kc2", cert_served.url, {"token": "stale"})
    doc = json.loads(kc.read_text())
    doc["users"].append({"name": "admin", "user": {"client-certificate": str(cert), "client-key": str(key)}})
    doc["contexts"].append({"name": "admin", "context": {"cluster": "k", "user": "admin"}})
    kc.write_text(json.dumps(doc))
    target, auth = kubeauth.for_target(kc, None, None, "admin")
    _check_target(target or "", "/api", auth)  # no SystemExit: the server took the certificate
    target, auth = kubeauth.for_target(kc, None, None)  # the current context's stale token
    with pytest.raises(SystemExit, match="refused the credentials"):
        _check_target(target or "", "/api", auth)


def test_harness_rate_s_users_present_the_kubeconfig_s_client_certificate(cert_served: Serve,
                                                                         tmp_path: Path) -> None:
    # its Locust users GET a path that takes only authenticated users (/api over TLS), trusting the
    # server by the kubeconfig's CA; they sent no credentials and took no CA before. (8 s: the rate is
    # measured from a second after the first request, and in a 5 s run on a loaded machine that window
    # once saw no request finish.)
    cert, key = issue_client_cert(tmp_path, "kind-admin", ("system:masters",))
    kc = kubeconfig(tmp_path / "kc", cert_served.url, {"client-certificate": str(cert), "client-key": str(key)})
    proc = subprocess.run([sys.executable, "-m", "loadtest", "harness-rate", "--kubeconfig", str(kc),
                           "--users", "2", "--duration", "8"], capture_output=True, text=True, timeout=60, cwd=ROOT,
                          env={**os.environ, "LOADTEST_TRIVIAL_PATH": "/api"})
    assert proc.returncode == 0, proc.stderr
    metrics = {m["metric"]: m for m in map(json.loads, proc.stdout.splitlines())}
    assert metrics["failures"]["value"] == 0 and metrics["requests/s"]["value"] > 0
    assert metrics["requests/s"]["target"] == cert_served.url
