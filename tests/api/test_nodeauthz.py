"""The Node authorizer's graph part and NodeRestriction's object checks (api/nodeauthz.py),
over a store of objects as the watch caches would answer them."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from controlplane.api.errors import ApiError
from controlplane.api.nodeauthz import Authorizers, NodeAuthorizer, forbidden_labels, pod_references
from controlplane.api.rbac import Request, User, forbidden
from controlplane.identities import node_user


class Objects:
    """nodeauthz.Objects over dicts; counts the pods it parses."""

    def __init__(self, *objects: dict[str, Any]) -> None:
        self.objects: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.revisions: dict[tuple[str, str, str], int] = {}
        self.loads = 0
        for obj in objects:
            self.put(obj)

    def put(self, obj: dict[str, Any]) -> None:
        plural = obj["kind"].lower() + "s"
        meta = obj["metadata"]
        key = (plural, meta.get("namespace", ""), meta["name"])
        self.objects[key] = obj
        self.revisions[key] = self.revisions.get(key, 0) + 1

    def pods_on(self, node: str) -> list[tuple[bytes, int, Any]]:
        return [(f"{ns}/{name}".encode(), self.revisions[(p, ns, name)], obj)
                for (p, ns, name), obj in sorted(self.objects.items())
                if p == "pods" and obj.get("spec", {}).get("nodeName") == node]

    def load(self, handle: Any) -> dict[str, Any]:
        self.loads += 1
        loaded: dict[str, Any] = handle
        return loaded

    def get(self, group: str, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
        return self.objects.get((plural, namespace, name))

    def pod_node(self, namespace: str, name: str) -> str | None:
        found = self.objects.get(("pods", namespace, name))
        return found["spec"].get("nodeName", "") if found is not None else None


def pod(name: str, node: str, spec: dict[str, Any] | None = None, status: dict[str, Any] | None = None,
        namespace: str = "default") -> dict[str, Any]:
    return {"kind": "Pod", "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}"},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "i"}], **(spec or {})},
            "status": status or {}}


WEB = pod("web", "n1", {
    "serviceAccountName": "web-sa",
    "imagePullSecrets": [{"name": "pull"}],
    "containers": [{"name": "c", "image": "i",
                    "envFrom": [{"configMapRef": {"name": "env-cm"}}, {"secretRef": {"name": "env-secret"}}],
                    "env": [{"name": "K", "valueFrom": {"secretKeyRef": {"name": "key-secret", "key": "k"}}}]}],
    "initContainers": [{"name": "i", "image": "i",
                        "env": [{"name": "C", "valueFrom": {"configMapKeyRef": {"name": "init-cm", "key": "k"}}}]}],
    "volumes": [{"name": "s", "secret": {"secretName": "mounted"}},
                {"name": "p", "projected": {"sources": [{"secret": {"name": "proj-secret"}},
                                                        {"configMap": {"name": "proj-cm"}},
                                                        {"serviceAccountToken": {"path": "t"}}]}},
                {"name": "data", "persistentVolumeClaim": {"claimName": "data"}},
                {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}},
                {"name": "csi", "csi": {"driver": "d", "nodePublishSecretRef": {"name": "csi-secret"}}}],
    "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "gpu-template"},
                       {"name": "shared", "resourceClaimName": "shared-claim"}]},
    status={"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "web-gpu-x7k2p"}]})
OTHER = pod("other", "n2", {"volumes": [{"name": "s", "secret": {"secretName": "theirs"}},
                                        {"name": "d", "persistentVolumeClaim": {"claimName": "their-data"}}]})
PV = {"kind": "PersistentVolume", "metadata": {"name": "pv-data"},
      "spec": {"claimRef": {"namespace": "default", "name": "data"},
               "csi": {"driver": "d", "nodeStageSecretRef": {"name": "stage-secret"},
                       "nodePublishSecretRef": {"name": "driver-secret", "namespace": "kube-system"},
                       "controllerPublishSecretRef": {"name": "controller-secret", "namespace": "default"}}}}
PVC: dict[str, Any] = {"kind": "PersistentVolumeClaim", "metadata": {"name": "data", "namespace": "default"},
       "spec": {"volumeName": "pv-data"}}
THEIR_PV = {"kind": "PersistentVolume", "metadata": {"name": "pv-theirs"},
            "spec": {"claimRef": {"namespace": "default", "name": "their-data"}}}
VA = {"kind": "VolumeAttachment", "metadata": {"name": "va-1"}, "spec": {"nodeName": "n1"}}
VA2 = {"kind": "VolumeAttachment", "metadata": {"name": "va-2"}, "spec": {"nodeName": "n2"}}
SLICE = {"kind": "ResourceSlice", "metadata": {"name": "n1-gpu"}, "spec": {"nodeName": "n1"}}
SLICE2 = {"kind": "ResourceSlice", "metadata": {"name": "n2-gpu"}, "spec": {"nodeName": "n2"}}
NODE = {"kind": "Node", "metadata": {"name": "n1", "uid": "node-uid"}}


async def _nowhere(namespace: str, name: str) -> str | None:
    return None


def authorizer(*extra: dict[str, Any]) -> tuple[NodeAuthorizer, Objects]:
    objects = Objects(WEB, OTHER, PV, PVC, THEIR_PV, VA, VA2, SLICE, SLICE2, NODE, *extra)
    return NodeAuthorizer(_nowhere, objects), objects


NO_PATH = "no relationship found between node 'n1' and this object"


def test_a_pods_references_are_upstreams_edges() -> None:
    assert pod_references(WEB) == {
        ("serviceaccounts", "web-sa"), ("secrets", "pull"), ("secrets", "env-secret"), ("secrets", "key-secret"),
        ("secrets", "mounted"), ("secrets", "proj-secret"), ("secrets", "csi-secret"), ("configmaps", "env-cm"),
        ("configmaps", "init-cm"), ("configmaps", "proj-cm"), ("persistentvolumeclaims", "data"),
        ("persistentvolumeclaims", "web-scratch"), ("resourceclaims", "web-gpu-x7k2p"),
        ("resourceclaims", "shared-claim")}
    # a template's claim not made yet: no edge (upstream's resourceclaim.Name errs)
    assert ("resourceclaims", "gpu-template") not in pod_references(WEB)


@pytest.mark.parametrize(("request_", "allowed", "reason"), [
    # secrets and configmaps: get, and list/watch by metadata.name (the request's name)
    (Request("get", "", "secrets", namespace="default", name="mounted"), True, ""),
    (Request("watch", "", "secrets", namespace="default", name="env-secret"), True, ""),
    (Request("list", "", "configmaps", namespace="default", name="init-cm"), True, ""),
    (Request("get", "", "secrets", namespace="default", name="theirs"), False, NO_PATH),
    (Request("get", "", "secrets", namespace="other", name="mounted"), False, NO_PATH),  # another namespace
    (Request("list", "", "secrets", namespace="default"), False, "No Object name found"),
    (Request("list", "", "secrets"), False, "can only read namespaced object of this type"),
    (Request("update", "", "secrets", namespace="default", name="mounted"), False,
     "can only read resources of this type"),
    # node <- pod <- pvc <- pv <- secret (a kubelet-visible one only)
    (Request("get", "", "secrets", namespace="default", name="stage-secret"), True, ""),
    (Request("get", "", "secrets", namespace="kube-system", name="driver-secret"), True, ""),
    (Request("get", "", "secrets", namespace="default", name="driver-secret"), False, NO_PATH),
    (Request("get", "", "secrets", namespace="default", name="controller-secret"), False, NO_PATH),
    # claims and volumes
    (Request("get", "", "persistentvolumeclaims", namespace="default", name="data"), True, ""),
    (Request("get", "", "persistentvolumeclaims", namespace="default", name="web-scratch"), True, ""),
    (Request("get", "", "persistentvolumeclaims", namespace="default", name="their-data"), False, NO_PATH),
    (Request("list", "", "persistentvolumeclaims", namespace="default", name="data"), False,
     "can only get individual resources of this type"),
    (Request("patch", "", "persistentvolumeclaims", "status", "default", "data"), True, ""),
    (Request("get", "", "persistentvolumeclaims", "status", "default", "data"), False,
     "can only get/update/patch this type"),
    (Request("get", "", "persistentvolumes", name="pv-data"), True, ""),
    (Request("get", "", "persistentvolumes", name="pv-theirs"), False, NO_PATH),
    (Request("get", "", "persistentvolumes", name="missing"), False, NO_PATH),
    (Request("get", "resource.k8s.io", "resourceclaims", namespace="default", name="web-gpu-x7k2p"), True, ""),
    (Request("get", "resource.k8s.io", "resourceclaims", namespace="default", name="shared-claim"), True, ""),
    (Request("get", "resource.k8s.io", "resourceclaims", namespace="default", name="gpu-template"), False, NO_PATH),
    (Request("get", "storage.k8s.io", "volumeattachments", name="va-1"), True, ""),
    (Request("get", "storage.k8s.io", "volumeattachments", name="va-2"), False, NO_PATH),
    # service account tokens for its pods' accounts only
    (Request("create", "", "serviceaccounts", "token", "default", "web-sa"), True, ""),
    (Request("create", "", "serviceaccounts", "token", "default", "default"), False, NO_PATH),
    (Request("get", "", "serviceaccounts", namespace="default", name="web-sa"), False,
     "can only create tokens for individual service accounts"),
    # its ResourceSlices by their spec.nodeName
    (Request("get", "resource.k8s.io", "resourceslices", name="n1-gpu"), True, ""),
    (Request("delete", "resource.k8s.io", "resourceslices", name="n2-gpu"), False, NO_PATH),
    (Request("list", "resource.k8s.io", "resourceslices"), False,
     "can only list/watch/deletecollection resourceslices with nodeName field selector"),
    # pods: by the graph too
    (Request("get", "", "pods", namespace="default", name="web"), True, ""),
    (Request("get", "", "pods", namespace="default", name="other"), False, NO_PATH),
    (Request("watch", "", "pods", namespace="default", name="other"), False, NO_PATH),
    (Request("list", "", "pods"), False, "can only list/watch pods with spec.nodeName field selector"),
    (Request("list", "", "nodes"), False, "node 'n1' cannot read all nodes, only its own Node object"),
    (Request("get", "", "nodes", name="n2"), False, "node 'n1' cannot read 'n2', only its own Node object"),
    (Request("update", "coordination.k8s.io", "leases", namespace="default", name="n1"), False,
     'can only access leases in the "kube-node-lease" system namespace'),
])
def test_the_graph_relates_a_node_to_what_its_pods_reference(request_: Request, allowed: bool, reason: str) -> None:
    node, _ = authorizer()
    assert node.decide("n1", request_) == (allowed, reason)


def test_the_denial_names_the_node_authorizers_reason() -> None:
    node, _ = authorizer()
    kubelet = User(node_user("n1"), ("system:nodes", "system:authenticated"))
    r = Request("get", "", "secrets", namespace="default", name="theirs")
    chain = Authorizers(("Node", "RBAC"), None, node)
    assert not asyncio.run(chain.allowed(kubelet, r))
    assert forbidden(kubelet, r, asyncio.run(chain.denial(kubelet, r))).message == (
        'secrets "theirs" is forbidden: User "system:node:n1" cannot get resource "secrets" in API group "" in the '
        "namespace \"default\": no relationship found between node 'n1' and this object")
    assert asyncio.run(chain.denial(User("alice", ()), r)) == ""


def test_a_kubelets_rules_review_is_incomplete_as_upstream_s_node_authorizer_says() -> None:
    # upstream's NodeAuthorizer.RulesFor enumerates nothing for a node and calls the list incomplete
    node, _ = authorizer()
    kubelet = User(node_user("n1"), ("system:nodes", "system:authenticated"))
    chain = Authorizers(("Node", "RBAC"), None, node)
    assert asyncio.run(chain.rules_for(kubelet, "default")) == \
        ([], [], True, ["node authorizer does not support user rule resolution"])
    assert asyncio.run(chain.rules_for(User("alice", ()), "default")) == ([], [], False, [])
    assert asyncio.run(Authorizers(("AlwaysAllow",), None, None).rules_for(User("alice", ()), "default")) == (
        [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}], [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
        False, [])


def test_a_pods_references_are_parsed_once_per_version() -> None:
    node, objects = authorizer()
    r = Request("get", "", "secrets", namespace="default", name="mounted")
    assert node.allows("n1", r) and objects.loads == 1
    assert node.allows("n1", r) and objects.loads == 1
    # the pod rebound elsewhere (deleted and made again), or a new version: parsed again
    objects.put({**WEB, "spec": {**WEB["spec"], "nodeName": "n2"}})
    assert not node.allows("n1", r) and node.allows("n2", r)
    assert objects.loads == 3  # web's new version, and other (on n2) the first time
    assert node.allows("n2", r) and objects.loads == 3


def test_a_decision_over_a_full_node_takes_microseconds() -> None:
    """110 pods on the node (the kubelet's default maximum), each mounting two secrets: the
    memoised references make a decision a walk of 110 small sets."""
    pods = [pod(f"p{i}", "n1", {"volumes": [{"name": "a", "secret": {"secretName": f"s{i}"}},
                                            {"name": "b", "configMap": {"name": f"c{i}"}}]}) for i in range(110)]
    node, _ = authorizer(*pods)
    hit = Request("get", "", "secrets", namespace="default", name="s109")
    miss = Request("get", "", "secrets", namespace="default", name="nope")
    assert node.allows("n1", hit) and not node.allows("n1", miss)
    n = 200
    started = time.perf_counter()
    for _ in range(n):
        node.allows("n1", miss)
    per = (time.perf_counter() - started) / n
    assert per < 0.005, per  # (about 50 µs here; a loose bound for a loaded machine)


def refusal(node: NodeAuthorizer, plural: str, obj: dict[str, Any], old: dict[str, Any] | None = None,
            subresource: str | None = None) -> str | None:
    try:
        node.admit("n1", plural, subresource, obj, old)
    except ApiError as e:
        return e.message if (e.code, e.reason) == (403, "Forbidden") else f"{e.code} {e.reason}"
    return None


def test_a_kubelet_sets_only_the_kubelets_labels_on_its_node() -> None:
    node, _ = authorizer()
    allowed = {"kubernetes.io/hostname": "n1", "kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux",
               "node.kubernetes.io/instance-type": "m5.large", "beta.kubernetes.io/instance-type": "m5.large",
               "topology.kubernetes.io/zone": "a", "topology.kubernetes.io/region": "r",
               "failure-domain.beta.kubernetes.io/zone": "a", "kubelet.kubernetes.io/x": "1",
               "node.kubernetes.io/exclude-from-external-load-balancers": "", "sub.node.kubernetes.io/y": "1",
               "example.com/anything": "ok", "plain": "ok"}
    assert forbidden_labels(allowed, {}) == []
    assert forbidden_labels({"node-role.kubernetes.io/control-plane": "", "node-restriction.kubernetes.io/a": "b",
                             "x.node-restriction.kubernetes.io/b": "", "k8s.io/x": "", "foo.k8s.io/y": ""}, {}) == [
        "foo.k8s.io/y", "k8s.io/x", "node-restriction.kubernetes.io/a", "node-role.kubernetes.io/control-plane",
        "x.node-restriction.kubernetes.io/b"]
    made = {"kind": "Node", "metadata": {"name": "n1", "labels": {**allowed, "node-role.kubernetes.io/gpu": ""}}}
    assert refusal(node, "nodes", made) == ('nodes "n1" is forbidden: node "n1" is not allowed to set the following '
                                            "labels: node-role.kubernetes.io/gpu")
    old: dict[str, Any] = {"kind": "Node",
                           "metadata": {"name": "n1", "labels": {"node-restriction.kubernetes.io/pool": "a"}},
                           "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]}}
    assert refusal(node, "nodes", {**old, "metadata": {"name": "n1", "labels": {}}}, old) == (
        'nodes "n1" is forbidden: is not allowed to modify labels: node-restriction.kubernetes.io/pool')
    kept = {**old, "metadata": {"name": "n1", "labels": {**old["metadata"]["labels"], "team": "x"}}}
    assert refusal(node, "nodes", kept, old) is None
    assert refusal(node, "nodes", {**kept, "spec": {}}, old) == \
        'nodes "n1" is forbidden: node "n1" is not allowed to modify taints'
    assert refusal(node, "nodes", {**made, "metadata": {"name": "n1"}, "spec": {"configSource": {}}}) == \
        'nodes "n1" is forbidden: node "n1" is not allowed to create pods with a non-nil configSource'


def mirror(**spec: Any) -> dict[str, Any]:
    return {"kind": "Pod", "metadata": {
        "name": "etcd-n1", "namespace": "kube-system", "annotations": {"kubernetes.io/config.mirror": "hash"},
        "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "n1", "uid": "node-uid",
                             "controller": True}]},
        "spec": {"nodeName": "n1", "containers": [{"name": "etcd", "image": "etcd"}], **spec}}


def test_a_kubelet_creates_only_mirror_pods_referencing_nothing() -> None:
    node, _ = authorizer()
    assert refusal(node, "pods", mirror()) is None
    plain = mirror()
    plain["metadata"]["annotations"] = {}
    assert refusal(node, "pods", plain) == ('pods "etcd-n1" is forbidden: pod does not have '
                                            '"kubernetes.io/config.mirror" annotation, node "n1" can only create '
                                            "mirror pods")
    assert refusal(node, "pods", mirror(nodeName="n2")) == \
        'pods "etcd-n1" is forbidden: node "n1" can only create pods with spec.nodeName set to itself'
    secret = mirror(volumes=[{"name": "s", "secret": {"secretName": "etcd-certs"}}])
    assert refusal(node, "pods", secret) == \
        'pods "etcd-n1" is forbidden: node "n1" can not create pods that reference secrets'
    assert refusal(node, "pods", mirror(containers=[{"name": "c", "envFrom": [{"configMapRef": {"name": "x"}}]}])) \
        == 'pods "etcd-n1" is forbidden: node "n1" can not create pods that reference configmaps'
    assert refusal(node, "pods", mirror(serviceAccountName="default")) == \
        'pods "etcd-n1" is forbidden: node "n1" can not create pods that reference a service account'
    assert refusal(node, "pods", mirror(volumes=[{"name": "d", "persistentVolumeClaim": {"claimName": "d"}}])) == \
        'pods "etcd-n1" is forbidden: node "n1" can not create pods that reference persistentvolumeclaims'
    foreign = mirror()
    foreign["metadata"]["ownerReferences"][0]["uid"] = "stale"
    assert refusal(node, "pods", foreign) == 'pods "etcd-n1" is forbidden: node n1 UID mismatch: expected node-uid ' \
                                             "got stale"
    orphan = mirror()
    orphan["metadata"]["ownerReferences"] = []
    assert refusal(node, "pods", orphan) == \
        'pods "etcd-n1" is forbidden: node "n1" can only create pods with an owner reference set to itself'


def test_a_kubelets_pod_status_pvc_status_and_slices() -> None:
    node, _ = authorizer()
    relabelled = {**WEB, "metadata": {**WEB["metadata"], "labels": {"app": "x"}}}
    assert refusal(node, "pods", relabelled, WEB, "status") == \
        'pods "web" is forbidden: node "n1" cannot update labels through pod status'
    moved = {**WEB, "status": {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "other"}]}}
    assert refusal(node, "pods", moved, WEB, "status") == \
        'pods "web" is forbidden: node "n1" cannot update resource claim statues'
    assert refusal(node, "pods", {**WEB, "status": {**WEB["status"], "phase": "Running"}}, WEB, "status") is None
    grown = {**PVC, "status": {"capacity": {"storage": "2Gi"}, "conditions": []}}
    assert refusal(node, "persistentvolumeclaims", grown, PVC, "status") is None
    relabelled_pvc = {**grown, "metadata": {**PVC["metadata"], "labels": {"a": "b"}}}
    assert refusal(node, "persistentvolumeclaims", relabelled_pvc, PVC, "status") == (
        'persistentvolumeclaims "data" is forbidden: node "n1" is not allowed to update fields other than '
        "status.capacity and status.conditions: metadata.labels")
    assert refusal(node, "resourceslices", SLICE2) == ('resourceslices.resource.k8s.io "n2-gpu" is forbidden: can '
                                                      "only create ResourceSlice with the same NodeName as the "
                                                      "requesting node")
    assert refusal(node, "resourceslices", SLICE) is None


def test_a_kubelets_token_is_bound_to_a_pod_on_its_node() -> None:
    node, _ = authorizer()

    def token(ref: dict[str, Any] | None) -> str | None:
        try:
            node.admit_token("n1", "default", "web-sa", {"spec": {"boundObjectRef": ref} if ref else {}})
        except ApiError as e:
            return f"{e.code} {e.message}"
        return None

    prefix = '403 serviceaccounts "web-sa" is forbidden: '
    assert token({"apiVersion": "v1", "kind": "Pod", "name": "web", "uid": "uid-web"}) is None
    assert token(None) == prefix + "node requested token not bound to a pod"
    assert token({"apiVersion": "v1", "kind": "Pod", "name": "web"}) == \
        prefix + "node requested token with a pod binding without a uid"
    assert token({"apiVersion": "v1", "kind": "Pod", "name": "other", "uid": "uid-other"}) == \
        prefix + "node requested token bound to a pod scheduled on a different node"
    assert token({"apiVersion": "v1", "kind": "Pod", "name": "web", "uid": "old"}).startswith(  # type: ignore[union-attr]
        prefix + "the UID in the bound object reference (old) does not match")
    assert token({"apiVersion": "v1", "kind": "Pod", "name": "gone", "uid": "u"}) == '404 pods "gone" not found'


def csr_request(common_name: str) -> str:
    """A base64 PEM certificate request for ``common_name`` (as ``spec.request`` holds it)."""
    import base64

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    request = x509.CertificateSigningRequestBuilder().subject_name(x509.Name([
        x509.NameAttribute(NameOID.ORGANIZATION_NAME, "system:nodes"),
        x509.NameAttribute(NameOID.COMMON_NAME, common_name)])).sign(key, hashes.SHA256())
    return base64.b64encode(request.public_bytes(serialization.Encoding.PEM)).decode()


def test_a_kubelets_csr_for_a_kubelet_signer_names_itself() -> None:
    node, _ = authorizer()

    def csr(signer: str, request: str) -> dict[str, Any]:
        return {"kind": "CertificateSigningRequest", "metadata": {"name": "csr-1"},
                "spec": {"signerName": signer, "request": request, "usages": ["client auth"]}}

    prefix = 'certificatesigningrequests.certificates.k8s.io "csr-1" is forbidden: '
    client = "kubernetes.io/kube-apiserver-client-kubelet"
    assert refusal(node, "certificatesigningrequests", csr(client, csr_request("system:node:n1"))) is None
    assert refusal(node, "certificatesigningrequests", csr(client, csr_request("system:node:n2"))) == \
        prefix + "can only create a node CSR with CN=system:node:n1"
    assert refusal(node, "certificatesigningrequests",
                   csr("kubernetes.io/kubelet-serving", csr_request("system:node:n2"))) == \
        prefix + "can only create a node CSR with CN=system:node:n1"
    assert refusal(node, "certificatesigningrequests", csr(client, "bm90IGEgcmVxdWVzdA==")) == \
        prefix + "unable to parse csr: PEM block type must be CERTIFICATE REQUEST"
    # other signers: the signer's own checks, not NodeRestriction's
    assert refusal(node, "certificatesigningrequests",
                   csr("kubernetes.io/kube-apiserver-client", csr_request("system:node:n2"))) is None
