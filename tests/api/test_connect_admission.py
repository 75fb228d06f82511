"""Admission of CONNECT requests (``kubectl exec``, ``attach``, ``port-forward``, the proxy
subresources): webhooks and ValidatingAdmissionPolicies that match ``operations: [CONNECT]``
see the options decoded from the query as the object and may refuse before anything would
connect, as upstream's ``ConnectResource``; a real ``controlplane serve``, a real HTTPS webhook
server (tests/api/webhook_server.py) and the real kubectl."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.api.test_webhooks import MUTATING, NS, PODS, VALIDATING, Api
from tests.api.webhook_server import WebhookServer
from tests.e2e.test_kubectl import KUBECTL
from tests.test_cli import Serve, running, start_serve

POLICIES = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies"
BINDINGS = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings"
SPDY = {"connection": "Upgrade", "upgrade": "SPDY/3.1", "x-stream-protocol-version": "v4.channel.k8s.io"}
CONNECTED = ["pods/exec", "pods/attach", "pods/portforward", "pods/proxy", "services/proxy", "nodes/proxy"]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    with running(start_serve(tmp_path_factory.mktemp("connect-serve"))) as s:
        yield s


@pytest.fixture
def api(served: Serve) -> Iterator[Api]:
    a = Api(served)
    for ns, labels in ((NS, {"webhooks": "on"}), ("quiet", {})):
        a.http.post("/api/v1/namespaces", json={"metadata": {"name": ns, "labels": labels}})
    for ns in (NS, "quiet"):
        a.http.post(f"/api/v1/namespaces/{ns}/pods", json=a.pod("web", ns))
    r = a.http.patch(f"{PODS}/web/status", json={"status": {"phase": "Running"}},  # (kubectl port-forward asks)
                     headers={"content-type": "application/merge-patch+json"})
    assert r.status_code == 200, r.text
    try:
        yield a
    finally:
        a.close()


def connect_hook(name: str, server: WebhookServer, path: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "clientConfig": {"url": server.url(path), "caBundle": server.ca_bundle},
            "rules": [{"operations": ["CONNECT"], "apiGroups": [""], "apiVersions": ["v1"], "resources": CONNECTED}],
            "namespaceSelector": {"matchLabels": {"webhooks": "on"}},
            "sideEffects": "None", "admissionReviewVersions": ["v1"], **extra}


def kubectl_failing(served: Serve, *args: str) -> str:
    """kubectl ``args``, which must exit 1: what it printed on stderr."""
    assert KUBECTL
    env = dict(os.environ, KUBECONFIG=str(served.kubeconfig), HOME=str(served.state))
    r = subprocess.run([KUBECTL, *args], capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL, timeout=30)
    assert r.returncode == 1, (args, r.stdout, r.stderr)
    return r.stderr.strip()


def test_a_validating_webhook_refuses_kubectl_exec_with_the_options_as_the_object(
        api: Api, hook: WebhookServer, served: Serve) -> None:
    api.configure(VALIDATING, "no-exec", [connect_hook("no-exec.example.com", hook, "/deny-connect")])
    err = kubectl_failing(served, "exec", "-n", NS, "web", "--", "cat", "/etc/hosts")
    # (kubectl's words for a refused SPDY upgrade, after its websocket one was refused too)
    assert err == 'error: unable to upgrade connection: admission webhook "no-exec.example.com" denied the ' \
                  "request: no exec into web (cat /etc/hosts)"
    # upstream's review of a CONNECT: the options' kind, the options as the object, no old one, no options
    review = hook.seen("/deny-connect")[-1]
    assert review["kind"] == review["requestKind"] == {"group": "", "version": "v1", "kind": "PodExecOptions"}
    assert review["resource"] == review["requestResource"] == {"group": "", "version": "v1", "resource": "pods"}
    assert (review["subResource"], review["requestSubResource"], review["operation"]) == ("exec", "exec", "CONNECT")
    assert (review["name"], review["namespace"], review["userInfo"]["username"]) == ("web", NS, "admin")
    assert review["object"] == {"kind": "PodExecOptions", "apiVersion": "v1", "stdout": True, "stderr": True,
                                "container": "c", "command": ["cat", "/etc/hosts"]}
    assert review["oldObject"] is None and review["options"] is None and review["dryRun"] is False
    # attach and port-forward alike, each with its own options
    err = kubectl_failing(served, "attach", "-n", NS, "web")
    assert err.endswith('admission webhook "no-exec.example.com" denied the request: no attach into web (attach)')
    err = kubectl_failing(served, "port-forward", "-n", NS, "pod/web", "0:80")
    assert 'denied the request: no portforward into web (portforward)' in err
    forwarded = [rv["object"] for rv in hook.seen("/deny-connect") if rv["subResource"] == "portforward"]
    # (kubectl names its ports in the streams' headers, not the query)
    assert forwarded and all(o == {"kind": "PodPortForwardOptions", "apiVersion": "v1"} for o in forwarded)
    assert api.http.post(f"{PODS}/web/portforward", params={"ports": "80,8080"}, headers=SPDY).status_code == 403
    assert hook.seen("/deny-connect")[-1]["object"]["ports"] == [80, 8080]
    attached = next(rv["object"] for rv in hook.seen("/deny-connect") if rv["subResource"] == "attach")
    assert attached["kind"] == "PodAttachOptions" and "command" not in attached
    # the proxy subresources: the path after proxy/ is the options' path
    r = api.http.get(f"{PODS}/web/proxy/healthz/")
    assert (r.status_code, r.json()["message"]) == \
        (403, 'admission webhook "no-exec.example.com" denied the request: no proxy into web (proxy)')
    assert hook.seen("/deny-connect")[-1]["object"] == {"kind": "PodProxyOptions", "apiVersion": "v1",
                                                        "path": "/healthz/"}
    # a node's (cluster-scoped: the namespace selector does not apply), before the node is looked up
    r = api.http.get("/api/v1/nodes/no-such-node:9100/proxy/metrics")
    assert (r.status_code, r.json()["message"]) == \
        (403, 'admission webhook "no-exec.example.com" denied the request: no proxy into no-such-node:9100 (proxy)')
    review = hook.seen("/deny-connect")[-1]
    assert review["object"] == {"kind": "NodeProxyOptions", "apiVersion": "v1", "path": "/metrics"}
    assert review["kind"] == {"group": "", "version": "v1", "kind": "NodeProxyOptions"} and "namespace" not in review
    # a pod in a namespace the selector leaves out is not sent: the request goes on to its dial
    before = len(hook.seen("/deny-connect"))
    r = api.http.post("/api/v1/namespaces/quiet/pods/web/exec", params={"command": "ls"}, headers=SPDY)
    assert r.status_code == 400 and r.json()["message"] == "pod web does not have a host assigned"
    assert len(hook.seen("/deny-connect")) == before
    # a dry run or a port that is not a number is refused before admission, as upstream
    for query in ({"command": "ls", "dryRun": "All"},):
        assert api.http.post(f"{PODS}/web/exec", params=query, headers=SPDY).status_code == 400
    assert api.http.post(f"{PODS}/web/portforward", params={"ports": "http"}, headers=SPDY).status_code == 400
    assert len(hook.seen("/deny-connect")) == before


def test_an_object_selector_never_takes_a_connects_options(api: Api, hook: WebhookServer) -> None:
    """Options have no metadata: a selector that is not empty takes none (upstream's object
    matcher), even one that only asks for a label to be absent; an empty one takes all."""
    absent = {"matchExpressions": [{"key": "app", "operator": "DoesNotExist"}]}
    api.configure(VALIDATING, "selective", [connect_hook("selective.example.com", hook, "/deny-connect",
                                                         objectSelector=absent)])
    r = api.http.post(f"{PODS}/web/exec", params={"command": "ls"}, headers=SPDY)
    assert r.status_code == 400 and r.json()["message"] == "pod web does not have a host assigned"
    api.configure(VALIDATING, "everything", [connect_hook("everything.example.com", hook, "/deny-connect",
                                                          objectSelector={"matchLabels": {}})])
    r = api.http.post(f"{PODS}/web/exec", params={"command": "ls"}, headers=SPDY)
    assert r.status_code == 403 and "everything.example.com" in r.json()["message"]


def test_a_mutating_webhooks_patch_changes_the_options_connected_with(api: Api, hook: WebhookServer) -> None:
    api.configure(MUTATING, "repoint", [connect_hook("repoint.example.com", hook, "/connect-container")])
    r = api.http.post(f"{PODS}/web/exec", params={"command": "ls", "stdin": "true"}, headers=SPDY)
    # the container the webhook put in the options is the one looked for in the pod
    assert (r.status_code, r.json()["message"]) == (400, "container patched is not valid for pod web")
    review = hook.seen("/connect-container")[-1]
    assert review["object"] == {"kind": "PodExecOptions", "apiVersion": "v1", "stdin": True, "command": ["ls"]}


def test_a_validating_admission_policy_refuses_exec(api: Api, served: Serve) -> None:
    policy = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
              "metadata": {"name": "no-shells"}, "spec": {
                  "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                                          "operations": ["CONNECT"], "resources": ["pods/exec"]}]},
                  "validations": [{"expression": "object.kind != 'PodExecOptions' || !object.command.exists("
                                                 "c, c.endsWith('sh'))",
                                   "messageExpression": "'no shells in ' + request.name + ' (' + "
                                                        "request.subResource + ', ' + request.kind.kind + ')'",
                                   "reason": "Forbidden"}]}}
    binding = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
               "metadata": {"name": "no-shells"}, "spec": {"policyName": "no-shells", "validationActions": ["Deny"]}}
    for path, obj in ((POLICIES, policy), (BINDINGS, binding)):
        r = api.http.post(path, json=obj)
        assert r.status_code == 201, r.text
        api.made.append(f"{path}/no-shells")
    for _ in range(500):  # admission reads the watch cache
        if api.http.get(BINDINGS, params={"resourceVersion": "0"}).json()["items"]:
            break
        time.sleep(0.01)
    err = kubectl_failing(served, "exec", "-n", NS, "web", "--", "/bin/sh", "-c", "id")
    assert err == "error: unable to upgrade connection: pods \"web\" is forbidden: ValidatingAdmissionPolicy " \
                  "'no-shells' with binding " \
                  "'no-shells' denied request: no shells in web (exec, PodExecOptions)"
    r = api.http.post(f"{PODS}/web/exec", params={"command": "ls"}, headers=SPDY)  # not a shell: on to the dial
    assert r.status_code == 400 and r.json()["message"] == "pod web does not have a host assigned"
