"""The bootstrap RBAC policy as data (api/rbacpolicy.py, controllerpolicy.py, namespacepolicy.py)
against upstream's 1.34 golden files, and its reconciliation (api/rbacreconcile.py) on a store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

import store
from controlplane.api.componentpolicy import COMPONENT_ROLE_BINDINGS, COMPONENT_ROLES
from controlplane.api.rbacpolicy import AUTOUPDATE
from controlplane.api.rbacreconcile import (
    POLICY,
    breakdown,
    covers,
    ensure_rbac_policy,
    missing_rules,
    reconciled_binding,
    reconciled_role,
)
from controlplane.registry.types import Registry

# upstream 1.34's ClusterRoles (testdata/cluster-roles.yaml and controller-roles.yaml), with
# 1.37's system:controller:device-taint-eviction-controller (DRADeviceTaints, GA) and
# system:cluster-trust-bundle-discovery (ClusterTrustBundle, GA in 1.37) and the storage version
# migrator's (StorageVersionMigrator, GA in 1.37) and system:node's rule for PodCertificateRequests
# (upstream's NodeRules adds one under the PodCertificateRequest gate, GA in 1.37; its verbs here
# are the kubelet's needs, not read from upstream), but the roles
# only in the feature-gated golden files (podcertificaterequestcleaner, the
# ClusterTrustBundle publisher, ...). system:aggregated-metrics-reader is metrics-server's, not
# the bootstrap policy's (it carries no rbac-defaults label).
UPSTREAM_CLUSTER_ROLES = {
    "admin", "cluster-admin", "edit", "view", "system:aggregate-to-admin", "system:aggregate-to-edit",
    "system:aggregate-to-view", "system:auth-delegator", "system:basic-user", "system:cluster-trust-bundle-discovery",
    "system:certificates.k8s.io:certificatesigningrequests:nodeclient",
    "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient",
    "system:certificates.k8s.io:kube-apiserver-client-approver",
    "system:certificates.k8s.io:kube-apiserver-client-kubelet-approver",
    "system:certificates.k8s.io:kubelet-serving-approver", "system:certificates.k8s.io:legacy-unknown-approver",
    "system:discovery", "system:heapster", "system:kube-aggregator", "system:kube-controller-manager",
    "system:kube-dns", "system:kube-scheduler", "system:kubelet-api-admin", "system:monitoring", "system:node",
    "system:node-bootstrapper", "system:node-problem-detector", "system:node-proxier",
    "system:persistent-volume-provisioner", "system:public-info-viewer", "system:service-account-issuer-discovery",
    "system:volume-scheduler",
    *(f"system:controller:{c}" for c in (
        "attachdetach-controller", "certificate-controller", "clusterrole-aggregation-controller",
        "cronjob-controller", "daemon-set-controller", "deployment-controller", "device-taint-eviction-controller",
        "disruption-controller",
        "endpoint-controller", "endpointslice-controller", "endpointslicemirroring-controller",
        "ephemeral-volume-controller", "expand-controller", "generic-garbage-collector", "horizontal-pod-autoscaler",
        "job-controller", "legacy-service-account-token-cleaner", "namespace-controller", "node-controller",
        "persistent-volume-binder", "pod-garbage-collector", "pv-protection-controller", "pvc-protection-controller",
        "replicaset-controller", "replication-controller", "resource-claim-controller", "resourcequota-controller",
        "root-ca-cert-publisher", "route-controller", "selinux-warning-controller", "service-account-controller",
        "service-cidrs-controller", "service-controller", "statefulset-controller",
        "storage-version-migrator-controller", "ttl-after-finished-controller",
        "ttl-controller", "validatingadmissionpolicy-status-controller",
        "volumeattributesclass-protection-controller")),
}

# testdata/*.yaml, 1.34: the scheduler's rules but the resourceclaims create/delete of
# DRAExtendedResource (alpha in 1.34, on in the golden files from 1.36), with the devicetaintrules
# read of DRADeviceTaintRules (GA in 1.37)
UPSTREAM_RULES = yaml.safe_load("""
system:node:
- {apiGroups: [authentication.k8s.io], resources: [tokenreviews], verbs: [create]}
- {apiGroups: [authorization.k8s.io], resources: [localsubjectaccessreviews, subjectaccessreviews], verbs: [create]}
- {apiGroups: [""], resources: [services], verbs: [get, list, watch]}
- {apiGroups: [""], resources: [nodes], verbs: [create, get, list, watch]}
- {apiGroups: [""], resources: [nodes/status], verbs: [patch, update]}
- {apiGroups: [""], resources: [nodes], verbs: [patch, update]}
- {apiGroups: ["", events.k8s.io], resources: [events], verbs: [create, patch, update]}
- {apiGroups: [""], resources: [pods], verbs: [get, list, watch]}
- {apiGroups: [""], resources: [pods], verbs: [create, delete]}
- {apiGroups: [""], resources: [pods/status], verbs: [patch, update]}
- {apiGroups: [""], resources: [pods/eviction], verbs: [create]}
- {apiGroups: [""], resources: [configmaps, secrets], verbs: [get, list, watch]}
- {apiGroups: [""], resources: [persistentvolumeclaims, persistentvolumes], verbs: [get]}
- {apiGroups: [""], resources: [endpoints], verbs: [get]}
- {apiGroups: [certificates.k8s.io], resources: [certificatesigningrequests], verbs: [create, get, list, watch]}
- {apiGroups: [coordination.k8s.io], resources: [leases], verbs: [create, delete, get, patch, update]}
- {apiGroups: [storage.k8s.io], resources: [volumeattachments], verbs: [get]}
- {apiGroups: [""], resources: [serviceaccounts/token], verbs: [create]}
- {apiGroups: [""], resources: [persistentvolumeclaims/status], verbs: [get, patch, update]}
- {apiGroups: [storage.k8s.io], resources: [csidrivers], verbs: [get, list, watch]}
- {apiGroups: [storage.k8s.io], resources: [csinodes], verbs: [create, delete, get, patch, update]}
- {apiGroups: [node.k8s.io], resources: [runtimeclasses], verbs: [get, list, watch]}
- {apiGroups: [resource.k8s.io], resources: [resourceclaims], verbs: [get]}
- {apiGroups: [resource.k8s.io], resources: [resourceslices], verbs: [deletecollection]}
- {apiGroups: [""], resources: [serviceaccounts], verbs: [get]}
- {apiGroups: [certificates.k8s.io], resources: [clustertrustbundles], verbs: [get, list, watch]}
- {apiGroups: [certificates.k8s.io], resources: [podcertificaterequests], verbs: [create, get, list, watch]}
system:kube-scheduler:
- {apiGroups: ["", events.k8s.io], resources: [events], verbs: [create, patch, update]}
- {apiGroups: [coordination.k8s.io], resources: [leases], verbs: [create]}
- {apiGroups: [coordination.k8s.io], resourceNames: [kube-scheduler], resources: [leases],
   verbs: [get, list, update, watch]}
- {apiGroups: [coordination.k8s.io], resources: [leasecandidates],
   verbs: [create, delete, deletecollection, get, list, patch, update, watch]}
- {apiGroups: [""], resources: [nodes], verbs: [get, list, watch]}
- {apiGroups: [""], resources: [pods], verbs: [delete, get, list, watch]}
- {apiGroups: [""], resources: [bindings, pods/binding], verbs: [create]}
- {apiGroups: [""], resources: [pods/status], verbs: [patch, update]}
- {apiGroups: [""], resources: [replicationcontrollers, services], verbs: [get, list, watch]}
- {apiGroups: [apps, extensions], resources: [replicasets], verbs: [get, list, watch]}
- {apiGroups: [apps], resources: [statefulsets], verbs: [get, list, watch]}
- {apiGroups: [policy], resources: [poddisruptionbudgets], verbs: [get, list, watch]}
- {apiGroups: [""], resources: [persistentvolumeclaims, persistentvolumes], verbs: [get, list, watch]}
- {apiGroups: [authentication.k8s.io], resources: [tokenreviews], verbs: [create]}
- {apiGroups: [authorization.k8s.io], resources: [subjectaccessreviews], verbs: [create]}
- {apiGroups: [storage.k8s.io], resources: [csinodes], verbs: [get, list, watch]}
- {apiGroups: [storage.k8s.io], resources: [volumeattachments], verbs: [get, list, watch]}
- {apiGroups: [""], resources: [namespaces], verbs: [get, list, watch]}
- {apiGroups: [storage.k8s.io], resources: [csidrivers], verbs: [get, list, watch]}
- {apiGroups: [storage.k8s.io], resources: [csistoragecapacities], verbs: [get, list, watch]}
- {apiGroups: [resource.k8s.io], resources: [deviceclasses], verbs: [get, list, watch]}
- {apiGroups: [resource.k8s.io], resources: [resourceclaims], verbs: [get, list, patch, update, watch]}
- {apiGroups: [resource.k8s.io], resources: [resourceclaims/status], verbs: [get, list, patch, update, watch]}
- {apiGroups: [""], resources: [pods/finalizers], verbs: [update]}
- {apiGroups: [resource.k8s.io], resources: [resourceslices], verbs: [get, list, watch]}
- {apiGroups: [resource.k8s.io], resources: [devicetaintrules], verbs: [get, list, watch]}
system:controller:deployment-controller:
- {apiGroups: [apps, extensions], resources: [deployments], verbs: [get, list, update, watch]}
- {apiGroups: [apps, extensions], resources: [deployments/status], verbs: [update]}
- {apiGroups: [apps, extensions], resources: [deployments/finalizers], verbs: [update]}
- {apiGroups: [apps, extensions], resources: [replicasets],
   verbs: [create, delete, get, list, patch, update, watch]}
- {apiGroups: [""], resources: [pods], verbs: [get, list, update, watch]}
- {apiGroups: ["", events.k8s.io], resources: [events], verbs: [create, patch, update]}
""")


def _policy(plural: str) -> dict[str, dict[str, Any]]:
    return {obj["metadata"]["name"]: obj for p, obj in POLICY if p == plural}


def test_the_cluster_roles_are_upstreams_and_labelled_as_its_own() -> None:
    roles = _policy("clusterroles")
    defaults = {name for name, r in roles.items() if r["metadata"]["labels"].get("kubernetes.io/bootstrapping")}
    assert defaults == UPSTREAM_CLUSTER_ROLES
    # besides: metrics-server's, and the built-in components' own (api/componentpolicy.py), labelled as this
    # server's, as are their bindings
    ours = {r["metadata"]["name"] for r in COMPONENT_ROLES}
    assert set(roles) - defaults == {"system:aggregated-metrics-reader", *ours}
    assert {b["metadata"]["name"] for b in COMPONENT_ROLE_BINDINGS} == ours
    for p, obj in POLICY:
        meta = obj["metadata"]
        if meta["name"] in ours:
            assert meta["labels"] == {"app.kubernetes.io/managed-by": "controlplane"}, meta["name"]
        elif meta["name"] in defaults or p != "clusterroles":
            assert meta["labels"]["kubernetes.io/bootstrapping"] == "rbac-defaults", meta["name"]
            assert meta["annotations"] == {AUTOUPDATE: "true"}, meta["name"]


@pytest.mark.parametrize("name", sorted(UPSTREAM_RULES))
def test_rules_are_upstreams_golden_ones(name: str) -> None:
    ours = _policy("clusterroles")[name]["rules"]
    assert [dict(sorted(r.items())) for r in ours] == UPSTREAM_RULES[name]
    assert list(ours[0]) == ["verbs", "apiGroups", "resources"]  # Go's field order, as served


def test_the_bindings_name_upstreams_subjects() -> None:
    bindings = _policy("clusterrolebindings")
    assert bindings["system:discovery"]["subjects"] == bindings["system:basic-user"]["subjects"] == [
        {"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "system:authenticated"}]
    assert [s["name"] for s in bindings["system:public-info-viewer"]["subjects"]] == [
        "system:authenticated", "system:unauthenticated"]
    assert "subjects" not in bindings["system:node"]  # bound to nobody: the Node authorizer's business
    assert bindings["system:controller:deployment-controller"]["subjects"] == [
        {"kind": "ServiceAccount", "name": "deployment-controller", "namespace": "kube-system"}]
    assert {n for n in bindings if n.startswith("system:controller:")} == {
        r for r in UPSTREAM_CLUSTER_ROLES if r.startswith("system:controller:")}
    assert set(_policy("rolebindings")) == {
        "system:controller:bootstrap-signer", "system::extension-apiserver-authentication-reader",
        "system::leader-locking-kube-controller-manager", "system::leader-locking-kube-scheduler",
        "system:controller:cloud-provider", "system:controller:token-cleaner"}
    namespaced = [(obj["metadata"]["namespace"], obj["metadata"]["name"]) for p, obj in POLICY if p == "roles"]
    assert ("kube-public", "system:controller:bootstrap-signer") in namespaced and len(namespaced) == 7


def test_rules_are_broken_down_and_covered_as_upstreams() -> None:
    rule = {"verbs": ["get", "update"], "apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["a", "b"]}
    assert len(breakdown(rule)) == 4 and breakdown({"verbs": ["get"], "nonResourceURLs": ["/x", "/y"]}) == [
        {"verbs": ["get"], "nonResourceURLs": ["/x"]}, {"verbs": ["get"], "nonResourceURLs": ["/y"]}]
    star = {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}
    assert all(covers(star, sub) for sub in breakdown(rule))
    assert covers({"verbs": ["get"], "apiGroups": [""], "resources": ["*/status"]},
                  {"verbs": ["get"], "apiGroups": [""], "resources": ["pods/status"]})
    assert not covers({"verbs": ["get"], "apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["a"]},
                      {"verbs": ["get"], "apiGroups": [""], "resources": ["configmaps"]})  # all of them: no
    assert covers({"verbs": ["get"], "nonResourceURLs": ["/api/*"]}, {"verbs": ["get"], "nonResourceURLs": ["/api/v1"]})
    assert missing_rules([star], [rule]) == []
    assert missing_rules([{**rule, "verbs": ["get"]}], [rule]) == [
        {"verbs": ["update"], "apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["a"]},
        {"verbs": ["update"], "apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["b"]}]


def test_a_protected_object_is_left_alone_and_an_updatable_one_gets_what_it_lacks() -> None:
    expected = _policy("clusterroles")["system:heapster"]
    trimmed = {**expected, "metadata": {"name": "system:heapster", "labels": {"mine": "x"}},
               "rules": [{**expected["rules"][0], "verbs": ["get"]}, {"verbs": ["*"], "apiGroups": ["x.io"],
                                                                       "resources": ["*"]}]}
    out = reconciled_role(trimmed, expected)
    assert out is not None
    assert out["rules"][:2] == trimmed["rules"]  # kept, the administrator's own rule too
    assert {"verbs": ["list"], "apiGroups": [""], "resources": ["pods"]} in out["rules"][2:]
    assert out["metadata"]["labels"] == {"mine": "x", "kubernetes.io/bootstrapping": "rbac-defaults"}
    assert out["metadata"]["annotations"] == {AUTOUPDATE: "true"}
    assert reconciled_role(out, expected) is None  # nothing lacking: nothing written
    protected = {**trimmed, "metadata": {"name": "system:heapster", "annotations": {AUTOUPDATE: "false"}}}
    assert reconciled_role(protected, expected) is None
    binding = _policy("clusterrolebindings")["system:discovery"]
    mine = {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "me"}
    reconciled = reconciled_binding({**binding, "subjects": [mine]}, binding)
    assert reconciled is not None and reconciled["subjects"] == [mine, *binding["subjects"]]


async def _read(s: store.Store, key: bytes) -> dict[str, Any]:
    kv = await s.get(key)
    assert kv is not None
    obj: dict[str, Any] = orjson.loads(kv.value)
    return obj


async def test_reconciled_at_each_start_as_upstreams_hook(tmp_path: Path) -> None:
    """A deleted default role comes back, one with autoupdate "false" is left as it was, one
    whose rule was taken away gets it back (broken down); a binding its subjects."""
    registry = Registry()
    s = store.open(f"lmdb://{tmp_path}")
    try:
        await ensure_rbac_policy(s, registry)
        roles = registry.get("rbac.authorization.k8s.io", "v1", "clusterroles")
        bindings = registry.get("rbac.authorization.k8s.io", "v1", "clusterrolebindings")
        assert roles is not None and bindings is not None
        kvs, _, _ = await s.range(roles.prefix(), store.prefix_end(roles.prefix()))
        assert len(kvs) == len(_policy("clusterroles"))
        view = await _read(s, roles.key(None, "view"))
        assert {"verbs": ["get", "list", "watch"], "apiGroups": [""], "resources": ["namespaces"]} in view["rules"]

        async def rewrite(key: bytes, change: Any) -> None:
            kv = await s.get(key)
            assert kv is not None
            obj = orjson.loads(kv.value)
            change(obj)
            await s.update(key, orjson.dumps(obj), kv.mod_revision)

        heapster, dns = roles.key(None, "system:heapster"), roles.key(None, "system:kube-dns")
        await s.delete(roles.key(None, "system:discovery"))
        await rewrite(heapster, lambda o: o.update(rules=o["rules"][1:]))
        await rewrite(dns, lambda o: o.update(rules=[], metadata={**o["metadata"], "annotations": {
            AUTOUPDATE: "false"}}))
        await rewrite(bindings.key(None, "system:basic-user"), lambda o: o.update(subjects=[]))
        uid = (await _read(s, heapster))["metadata"]["uid"]

        await ensure_rbac_policy(s, registry)  # the next start

        discovery = await _read(s, roles.key(None, "system:discovery"))
        assert discovery["rules"] == _policy("clusterroles")["system:discovery"]["rules"]
        back = await _read(s, heapster)
        assert back["metadata"]["uid"] == uid
        assert back["rules"][-1] == {"verbs": ["watch"], "apiGroups": [""], "resources": ["pods"]}
        assert missing_rules(back["rules"], _policy("clusterroles")["system:heapster"]["rules"]) == []
        assert (await _read(s, dns))["rules"] == []
        basic = await _read(s, bindings.key(None, "system:basic-user"))
        assert basic["subjects"] == _policy("clusterrolebindings")["system:basic-user"]["subjects"]
        revision = await s.revision()
        await ensure_rbac_policy(s, registry)
        assert await s.revision() == revision  # nothing lacking: nothing written
    finally:
        await s.close()
