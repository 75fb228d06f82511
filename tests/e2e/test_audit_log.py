"""Audit logging (api/audit.py) of a real ``controlplane serve`` (RBAC, a token file, a policy
and a log), driven by the real kubectl and httpx over its socket."""

from __future__ import annotations

import asyncio
import http.server
import json
import re
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

import store
from controlplane.registry.types import Registry
from tests.e2e.test_kubectl_openapi import ok, run
from tests.test_cli import Serve, running, start_serve

POLICY = """
apiVersion: audit.k8s.io/v1
kind: Policy
rules:
- level: None
  nonResourceURLs: ["/healthz*", "/readyz*", "/livez*"]
- level: None
  resources: [{group: coordination.k8s.io, resources: [leases]}]
- level: RequestResponse
  resources: [{group: "", resources: [configmaps]}]
  omitManagedFields: true
- level: Request
  resources: [{group: "", resources: [pods]}]
- level: Metadata
  omitStages: [RequestReceived]
"""
TOKENS = 'admintoken,admin,uid-admin,"system:masters"\nalicetoken,alice,uid-alice,"devs"\n'
MICRO_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z\Z")


@pytest.fixture(scope="module")
def audited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    tmp = tmp_path_factory.mktemp("audit")
    (tmp / "policy.yaml").write_text(POLICY)
    (tmp / "tokens.csv").write_text(TOKENS)
    with running(start_serve(tmp, extra=(
            "--token-auth-file", str(tmp / "tokens.csv"), "--authorization-mode", "RBAC",
            "--audit-policy-file", str(tmp / "policy.yaml"), "--audit-log-path", str(tmp / "audit.log")))) as s:
        yield s


def log_of(served: Serve) -> Path:
    return served.state.parent / "audit.log"


def events(served: Serve, match: Callable[[dict[str, Any]], bool], stages: int = 1,
           timeout: float = 10.0) -> list[dict[str, Any]]:
    """The logged events ``match`` takes, once there are ``stages`` of them (the last one is
    written as the handler returns, a moment after the client has its answer)."""
    deadline = time.monotonic() + timeout
    while True:
        complete = log_of(served).read_text().split("\n")[:-1]  # (not a line the server is still writing)
        found = [e for e in map(json.loads, complete) if match(e)]
        if len(found) >= stages or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def by_kubectl(verb: str, uri: str) -> Callable[[dict[str, Any]], bool]:
    return lambda e: e["verb"] == verb and e["requestURI"].split("?")[0] == uri \
        and e.get("userAgent", "").startswith("kubectl/")


def complete(found: list[dict[str, Any]]) -> dict[str, Any]:
    done = [e for e in found if e["stage"] == "ResponseComplete"]
    assert len(done) == 1, found
    return done[0]


def test_a_create_is_logged_at_each_stage_with_its_objects(audited: Serve) -> None:
    ok(audited, "create", "configmap", "cm-a", "--from-literal=a=b")
    found = events(audited, by_kubectl("create", "/api/v1/namespaces/default/configmaps"), stages=2)
    assert [e["stage"] for e in found] == ["RequestReceived", "ResponseComplete"]
    received, done = found
    assert received["auditID"] == done["auditID"] and uuid.UUID(done["auditID"])
    assert received["stageTimestamp"] == received["requestReceivedTimestamp"] == done["requestReceivedTimestamp"]
    assert MICRO_TIME.match(done["stageTimestamp"]) and done["stageTimestamp"] >= done["requestReceivedTimestamp"]
    assert "responseStatus" not in received and "requestObject" not in received
    assert done["kind"] == "Event" and done["apiVersion"] == "audit.k8s.io/v1"
    assert done["level"] == "RequestResponse"
    # as the authenticator knows the user: the token file's uid column too (it was dropped)
    assert done["user"] == {"username": "admin", "uid": "uid-admin", "groups": ["system:masters",
                                                                               "system:authenticated"]}
    assert done["sourceIPs"] == ["127.0.0.1"]
    # the name comes from the body (kubectl sends protobuf: the JSON it decodes to is logged)
    assert done["objectRef"] == {"resource": "configmaps", "namespace": "default", "name": "cm-a",
                                 "apiVersion": "v1"}
    assert done["responseStatus"] == {"metadata": {}, "code": 201}
    assert done["requestObject"]["data"] == {"a": "b"}
    answer = done["responseObject"]
    assert answer["kind"] == "ConfigMap" and answer["metadata"]["uid"]
    assert "managedFields" not in answer["metadata"]  # omitManagedFields (the create wrote some)
    assert done["annotations"] == {"authorization.k8s.io/decision": "allow", "authorization.k8s.io/reason": ""}


def test_get_list_patch_and_delete(audited: Serve) -> None:
    ok(audited, "create", "configmap", "cm-b", "--from-literal=a=b")
    ok(audited, "get", "configmap", "cm-b")
    ok(audited, "get", "configmaps")
    ok(audited, "patch", "configmap", "cm-b", "-p", '{"data":{"c":"d"}}')
    ok(audited, "delete", "configmap", "cm-b")
    # kubectl get's, kubectl patch's own (the object it patches) and kubectl delete's wait for the delete
    gets = [e for e in events(audited, by_kubectl("get", "/api/v1/namespaces/default/configmaps/cm-b"), 6)
            if e["stage"] == "ResponseComplete"]
    assert [e["responseStatus"]["code"] for e in gets] == [200, 200, 404]
    got = gets[0]
    assert got["objectRef"]["name"] == "cm-b" and "requestObject" not in got
    assert got["responseObject"]["kind"] == "Table"  # (kubectl get asks for one)
    assert gets[1]["responseObject"]["kind"] == "ConfigMap"
    listed = complete(events(audited, lambda e: by_kubectl("list", "/api/v1/namespaces/default/configmaps")(e)
                             and "fieldSelector" not in e["requestURI"], 2))  # (not kubectl delete's wait)
    assert listed["objectRef"] == {"resource": "configmaps", "namespace": "default", "apiVersion": "v1"}
    names = [row["cells"][0] for row in listed["responseObject"]["rows"]]
    assert "cm-b" in names
    patched = complete(events(audited, by_kubectl("patch", "/api/v1/namespaces/default/configmaps/cm-b"), 2))
    assert patched["requestObject"] == {"data": {"c": "d"}}  # the patch as sent
    assert patched["responseObject"]["data"] == {"a": "b", "c": "d"}
    deleted = complete(events(audited, by_kubectl("delete", "/api/v1/namespaces/default/configmaps/cm-b"), 2))
    assert deleted["requestObject"]["propagationPolicy"] == "Background"  # the DeleteOptions
    assert deleted["responseStatus"]["code"] == 200


def test_failures_carry_the_status_message_and_reason(audited: Serve) -> None:
    assert run(audited, "get", "configmap", "missing").returncode == 1
    missing = complete(events(audited, by_kubectl("get", "/api/v1/namespaces/default/configmaps/missing"), 2))
    assert missing["responseStatus"] == {"metadata": {}, "status": "Failure",
                                         "message": 'configmaps "missing" not found', "reason": "NotFound",
                                         "details": {"name": "missing", "kind": "configmaps"}, "code": 404}
    assert run(audited, "create", "configmap", "Bad_Name").returncode == 1
    invalid = complete(events(audited, lambda e: by_kubectl("create", "/api/v1/namespaces/default/configmaps")(e)
                              and e.get("objectRef", {}).get("name") == "Bad_Name", 2))
    assert invalid["responseStatus"]["code"] == 422 and invalid["responseStatus"]["reason"] == "Invalid"
    assert invalid["responseStatus"]["message"].startswith('ConfigMap "Bad_Name" is invalid: metadata.name')
    assert run(audited, "--token=alicetoken", "get", "configmaps").returncode == 1
    refused = events(audited, lambda e: e["user"].get("username") == "alice" and e["verb"] == "list"
                     and e["objectRef"]["resource"] == "configmaps")
    refused_event = complete(refused)
    assert refused_event["responseStatus"]["code"] == 403 and refused_event["responseStatus"]["reason"] == "Forbidden"
    assert refused_event["annotations"] == {"authorization.k8s.io/decision": "forbid",
                                            "authorization.k8s.io/reason": ""}


def test_rbac_says_which_binding_allowed(audited: Serve) -> None:
    ok(audited, "create", "rolebinding", "alice-view", "--clusterrole=view", "--group=devs")
    deadline = time.monotonic() + 10  # until the binding reaches the authorizer's cache (api/rbac.py)
    while (r := run(audited, "--token=alicetoken", "get", "services")).returncode != 0:
        assert time.monotonic() < deadline and "forbidden" in r.stderr, r.stderr
        time.sleep(0.05)
    allowed = events(audited, lambda e: e["user"].get("username") == "alice" and e["verb"] == "list"
                     and e["objectRef"]["resource"] == "services" and e["responseStatus"]["code"] == 200)
    assert allowed[0]["annotations"] == {
        "authorization.k8s.io/decision": "allow",
        "authorization.k8s.io/reason": 'RBAC: allowed by RoleBinding "alice-view/default" of ClusterRole "view" '
                                       'to Group "devs"'}
    assert allowed[0]["user"]["groups"] == ["devs", "system:authenticated"]


def test_impersonation_logs_both_users(audited: Serve) -> None:
    assert run(audited, "--as=alice", "--as-group=devs", "get", "secrets").returncode == 1  # view reads none
    found = events(audited, lambda e: "impersonatedUser" in e and e.get("objectRef", {}).get("resource") == "secrets")
    e = complete(found)
    assert e["user"]["username"] == "admin"
    assert e["impersonatedUser"] == {"username": "alice", "groups": ["devs", "system:authenticated"]}
    assert e["annotations"]["authorization.k8s.io/decision"] == "forbid"


def test_a_watch_starts_and_completes_without_its_stream(audited: Serve) -> None:
    ok(audited, "create", "configmap", "cm-w", "--from-literal=a=b")
    with pytest.raises(subprocess.TimeoutExpired):  # kubectl watches until killed
        run_for(audited, 3.0, "get", "configmaps", "--watch")
    found = events(audited, by_kubectl("watch", "/api/v1/namespaces/default/configmaps"), stages=3)
    assert [e["stage"] for e in found] == ["RequestReceived", "ResponseStarted", "ResponseComplete"]
    started, done = found[1], found[2]
    assert started["responseStatus"] == {"metadata": {}, "code": 200} and "responseObject" not in started
    assert done["responseStatus"]["code"] == 200 and "responseObject" not in done  # (never a stream's)
    assert done["stageTimestamp"] > started["stageTimestamp"]


def run_for(served: Serve, seconds: float, *args: str) -> None:
    import os

    from tests.e2e.test_kubectl import KUBECTL

    assert KUBECTL
    env = dict(os.environ, KUBECONFIG=str(served.kubeconfig), HOME=str(served.state))
    subprocess.run([KUBECTL, *args], capture_output=True, env=env, timeout=seconds)


def test_pod_security_audit_mode_goes_to_the_annotations(audited: Serve) -> None:
    ok(audited, "create", "namespace", "audited-psa")
    ok(audited, "label", "namespace", "audited-psa", "pod-security.kubernetes.io/audit=restricted")
    ok(audited, "-n", "audited-psa", "run", "web", "--image=nginx")
    e = complete(events(audited, by_kubectl("create", "/api/v1/namespaces/audited-psa/pods"), 2))
    assert e["level"] == "Request" and e["requestObject"]["spec"]["containers"][0]["image"] == "nginx"
    assert "responseObject" not in e
    notes = e["annotations"]
    assert notes["pod-security.kubernetes.io/enforce-policy"] == "privileged:latest"
    assert notes["pod-security.kubernetes.io/audit-violations"].startswith(
        'would violate PodSecurity "restricted:latest": allowPrivilegeEscalation != false (container "web" must '
        "set securityContext.allowPrivilegeEscalation=false)")


def test_pod_security_names_a_namespaces_invalid_labels_in_the_error_annotation(tmp_path: Path) -> None:
    """Labels the plugin cannot parse (upstream refuses them at a namespace's write, so they come
    from before the plugin was on: written here into the stopped server's store) are reported
    in upstream's ``pod-security.kubernetes.io/error`` annotation of every pod and workload
    checked in the namespace, and counted in ``pod_security_errors_total``; the enforce level
    they leave is ``restricted``."""
    (tmp_path / "policy.yaml").write_text("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: [{level: Metadata}]\n")
    extra = ("--audit-policy-file", str(tmp_path / "policy.yaml"), "--audit-log-path", str(tmp_path / "audit.log"))
    with running(start_serve(tmp_path, extra=extra)) as s:
        ok(s, "create", "namespace", "psa-broken")
    namespaces = Registry().get("", "v1", "namespaces")
    assert namespaces is not None

    async def break_labels() -> None:
        st = store.open(f"lmdb://{s.state / 'data'}")
        try:
            kv = await st.get(namespaces.key(None, "psa-broken"))
            assert kv is not None
            ns = orjson.loads(kv.value)
            ns["metadata"]["labels"].update({"pod-security.kubernetes.io/enforce": "bogus",
                                             "pod-security.kubernetes.io/enforce-version": "v1.x.y"})
            await st.update(kv.key, orjson.dumps(ns), kv.mod_revision)
        finally:
            await st.close()

    asyncio.run(break_labels())
    with running(start_serve(tmp_path, run=1, extra=extra)) as s:
        r = run(s, "-n", "psa-broken", "run", "web", "--image=nginx")
        assert r.returncode == 1 and 'violates PodSecurity "restricted:latest"' in r.stderr, r.stderr
        ok(s, "-n", "psa-broken", "create", "deployment", "web", "--image=nginx")
        metrics = ok(s, "get", "--raw", "/metrics").stdout
        pod = complete(events(s, by_kubectl("create", "/api/v1/namespaces/psa-broken/pods"), 2))
        deployment = complete(events(s, by_kubectl("create", "/apis/apps/v1/namespaces/psa-broken/deployments"), 2))
    error = ('Failed to parse policy: [metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: "bogus": '
             "must be one of privileged, baseline, restricted, "
             'metadata.labels[pod-security.kubernetes.io/enforce-version]: Invalid value: "v1.x.y": '
             'must be "latest" or "v1.x"]')
    assert pod["responseStatus"]["code"] == 403
    assert pod["annotations"]["pod-security.kubernetes.io/error"] == error
    assert pod["annotations"]["pod-security.kubernetes.io/enforce-policy"] == "restricted:latest"
    assert deployment["annotations"]["pod-security.kubernetes.io/error"] == error
    assert "pod-security.kubernetes.io/enforce-policy" not in deployment["annotations"]  # (pods only)
    for resource in ("pod", "controller"):
        assert (f'pod_security_errors_total{{fatal="false",request_operation="create",resource="{resource}",'
                f'subresource=""}} 1') in metrics


def test_the_audit_id_header_and_a_failed_authentication(audited: Serve) -> None:
    admin = {"Authorization": "Bearer admintoken"}
    with httpx.Client(base_url=audited.url, verify=False, timeout=10) as c:
        r = c.get("/api/v1/namespaces/default/configmaps", headers=admin)
        assert r.status_code == 200
        generated = r.headers["Audit-Id"]
        assert uuid.UUID(generated)
        assert complete(events(audited, lambda e: e["auditID"] == generated, 2))["verb"] == "list"
        r = c.get("/api/v1/namespaces/default/configmaps", headers={**admin, "Audit-ID": "mine-1"})
        assert r.headers["Audit-Id"] == "mine-1"  # the client's own, as upstream echoes it
        assert complete(events(audited, lambda e: e["auditID"] == "mine-1", 2))["verb"] == "list"
        r = c.get("/healthz")  # a level None request still has its id
        assert r.status_code == 200 and uuid.UUID(r.headers["Audit-Id"])
        r = c.get("/api/v1/namespaces", headers={"Authorization": "Bearer wrong", "X-Forwarded-For": "10.9.8.7"})
        assert r.status_code == 401
        failed = events(audited, lambda e: e["auditID"] == r.headers["Audit-Id"])
        assert len(failed) == 1 and failed[0]["stage"] == "ResponseStarted" and failed[0]["user"] == {}
        assert failed[0]["responseStatus"] == {"metadata": {}, "message": "Authentication failed, attempted: bearer",
                                               "code": 401}
        assert failed[0]["sourceIPs"] == ["10.9.8.7", "127.0.0.1"]
        assert "annotations" not in failed[0]
        time.sleep(0.2)
        metrics = c.get("/metrics", headers=admin).text
    assert re.search(r"^apiserver_audit_event_total \d+", metrics, re.M)
    assert re.search(r'^apiserver_audit_level_total\{level="None"\} [1-9]', metrics, re.M)
    assert re.search(r'^apiserver_audit_level_total\{level="RequestResponse"\} [1-9]', metrics, re.M)
    scraped = complete(events(audited, lambda e: e["requestURI"] == "/metrics", 1))
    assert scraped["verb"] == "get" and "objectRef" not in scraped
    assert scraped["annotations"] == {"authorization.k8s.io/decision": "allow", "authorization.k8s.io/reason": ""}
    none = [e for e in map(json.loads, log_of(audited).read_text().splitlines())
            if e["requestURI"].startswith("/healthz") or e.get("objectRef", {}).get("resource") == "leases"]
    assert none == []  # level None: not logged


def test_a_bad_policy_file_stops_serve(tmp_path: Path) -> None:
    (tmp_path / "policy.yaml").write_text("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: [{users: [a]}]\n")
    s = start_serve(tmp_path, extra=("--audit-policy-file", str(tmp_path / "policy.yaml"),
                                     "--audit-log-path", str(tmp_path / "audit.log")))
    assert s.proc.wait(timeout=60) == 2
    assert (f"argument --audit-policy-file: rules[0].level: Required value: from file {tmp_path / 'policy.yaml'}"
            in s.output())
    s = start_serve(tmp_path, run=1, extra=("--audit-log-path", "-", "--audit-log-format", "xml"))
    assert s.proc.wait(timeout=60) == 2
    assert "invalid audit log format xml, allowed formats are 'json,legacy'" in s.output()
    s = start_serve(tmp_path, run=2, extra=("--audit-webhook-config-file", str(tmp_path / "none.yaml")))
    assert s.proc.wait(timeout=60) == 2
    assert "argument --audit-webhook-config-file: cannot read the kubeconfig" in s.output()
    s = start_serve(tmp_path, run=3, extra=("--audit-webhook-mode", "eventually"))
    assert s.proc.wait(timeout=60) == 2
    assert "invalid audit webhook mode eventually, allowed modes are 'batch,blocking,blocking-strict'" in s.output()


def _audit_receiver(tmp_path: Path,
                    receive: Callable[[str, str, dict[str, Any]], int]) -> http.server.ThreadingHTTPServer:
    """An audit webhook on a socket, serving: each POST's path, Authorization and JSON body to
    ``receive``, answered with the status it returns; ``tmp_path/webhook.yaml`` the
    kubeconfig that names it (with the token ``hooktoken``). The caller shuts it down."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(receive(self.path, self.headers.get("Authorization", ""), json.loads(body)))
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    (tmp_path / "webhook.yaml").write_text(
        "apiVersion: v1\nkind: Config\n"
        f"clusters: [{{name: audit, cluster: {{server: 'http://127.0.0.1:{server.server_port}/audit'}}}}]\n"
        "users: [{name: api, user: {token: hooktoken}}]\n"
        "contexts: [{name: d, context: {cluster: audit, user: api}}]\ncurrent-context: d\n")
    return server


def test_a_webhook_backend_receives_the_events_as_event_lists(tmp_path: Path) -> None:
    """``--audit-webhook-config-file`` (a kubeconfig naming the receiver) beside the log: the
    same events reach both, the webhook's in EventLists POSTed with the kubeconfig's token,
    the large ones truncated (``--audit-webhook-truncate-enabled``)."""
    received: list[tuple[str, str, dict[str, Any]]] = []

    def receive(path: str, authorization: str, body: dict[str, Any]) -> int:
        received.append((path, authorization, body))
        return 200

    server = _audit_receiver(tmp_path, receive)
    (tmp_path / "policy.yaml").write_text(POLICY)
    try:
        with running(start_serve(tmp_path, extra=(
                "--audit-policy-file", str(tmp_path / "policy.yaml"), "--audit-log-path", str(tmp_path / "audit.log"),
                "--audit-webhook-config-file", str(tmp_path / "webhook.yaml"),
                "--audit-webhook-batch-max-wait", "200ms",
                "--audit-webhook-truncate-enabled", "--audit-webhook-truncate-max-event-size", "4000"))) as s:
            ok(s, "create", "configmap", "small", "--from-literal=a=b")
            ok(s, "create", "configmap", "large", "--from-literal=a=" + "x" * 5000)
            uri = "/api/v1/namespaces/default/configmaps"
            deadline = time.monotonic() + 60
            while True:  # (by_kubectl: not the root CA publisher's kube-root-ca.crt)
                hooked = [e for _, _, body in received for e in body["items"] if by_kubectl("create", uri)(e)]
                done = {e["objectRef"].get("name"): e for e in hooked if e["stage"] == "ResponseComplete"}
                if {"small", "large"} <= set(done):
                    break
                assert time.monotonic() < deadline, [(e["stage"], e["objectRef"]) for e in hooked]
                time.sleep(0.1)
            assert {(p, a) for p, a, _ in received} == {("/audit", "Bearer hooktoken")}
            assert all((b["kind"], b["apiVersion"]) == ("EventList", "audit.k8s.io/v1") for _, _, b in received)
            assert done["small"]["requestObject"]["data"] == {"a": "b"}
            assert "requestObject" not in done["large"] and "responseObject" not in done["large"]
            assert done["large"]["annotations"]["audit.k8s.io/truncated"] == "true"
            logged = {e["auditID"] for e in map(json.loads, (tmp_path / "audit.log").read_text().splitlines())}
            assert {e["auditID"] for e in hooked} <= logged  # the same events in the log
    finally:
        server.shutdown()
        server.server_close()


def test_blocking_strict_sends_each_event_in_the_requests_time_and_fails_it_when_it_cannot(tmp_path: Path) -> None:
    """``--audit-webhook-mode blocking-strict``: a request's RequestReceived event has reached
    the webhook before kubectl has its answer; while the webhook fails, an audited request
    fails with upstream's 500 before anything is written, and one the policy leaves out goes on."""
    received: list[dict[str, Any]] = []
    failing = threading.Event()

    def receive(path: str, authorization: str, body: dict[str, Any]) -> int:
        if failing.is_set():
            return 503
        received.extend(body["items"])
        return 200

    server = _audit_receiver(tmp_path, receive)
    (tmp_path / "policy.yaml").write_text("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n"
                                          "- level: Metadata\n  verbs: [create]\n"
                                          "  resources: [{group: '', resources: [configmaps]}]\n")
    uri = "/api/v1/namespaces/default/configmaps"
    try:
        with running(start_serve(tmp_path, extra=(
                "--audit-policy-file", str(tmp_path / "policy.yaml"),
                "--audit-webhook-config-file", str(tmp_path / "webhook.yaml"),
                "--audit-webhook-mode", "blocking-strict", "--audit-webhook-initial-backoff", "10ms"))) as s:
            ok(s, "create", "configmap", "kept", "--from-literal=a=b")
            # no wait: the event was sent before the answer
            assert [e["stage"] for e in received if by_kubectl("create", uri)(e)][:1] == ["RequestReceived"]
            deadline = time.monotonic() + 10  # ResponseComplete: sent once the answer went out
            while [e["stage"] for e in received if by_kubectl("create", uri)(e)] != \
                    ["RequestReceived", "ResponseComplete"]:
                assert time.monotonic() < deadline, received
                time.sleep(0.01)
            failing.set()
            r = run(s, "create", "configmap", "refused", "--from-literal=a=b")
            assert r.returncode == 1
            assert r.stderr.strip() == (  # (upstream's text/plain answer, its & escaped, in kubectl's words)
                'error: failed to create configmap: an error on the server ("Internal Server Error: '
                '\\"/api/v1/namespaces/default/configmaps?fieldManager=kubectl-create&amp;fieldValidation=Strict'
                '\\": failed to store audit event") has prevented the request from succeeding (post configmaps)')
            metrics = [line for line in ok(s, "get", "--raw", "/metrics").stdout.splitlines()
                       if line.startswith("apiserver_audit_")]  # (not audited: the policy takes creates only)
            assert "apiserver_audit_requests_rejected_total 1.0" in metrics, metrics
            assert 'apiserver_audit_error_total{plugin="webhook"} 1.0' in metrics, metrics  # (after five tries)
            failing.clear()
            assert "refused" not in ok(s, "get", "configmaps", "-o", "name").stdout  # never written
            ok(s, "create", "configmap", "after", "--from-literal=a=b")
    finally:
        server.shutdown()
        server.server_close()
