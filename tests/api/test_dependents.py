"""The garbage collector's index of where owners of each kind have dependents (api/dependents.py)."""

from __future__ import annotations

from controlplane.api.dependents import OwnerIndex
from controlplane.registry import Registry, ResourceType

REGISTRY = Registry()


def _type(plural: str, group: str = "") -> ResourceType:
    return next(t for t in REGISTRY.all() if t.plural == plural and t.group == group)


def test_places_are_the_dependents_namespaces_and_resources_by_owner_kind() -> None:
    index = OwnerIndex()
    configmaps, secrets, leases = _type("configmaps"), _type("secrets"), _type("leases", "coordination.k8s.io")
    index.note(configmaps, "a", [{"apiVersion": "v1", "kind": "Service", "name": "s", "uid": "1"}])
    index.note(secrets, "b", [{"apiVersion": "v1", "kind": "Service", "name": "s", "uid": "2"}])
    index.note(leases, "kube-node-lease", [{"apiVersion": "v1", "kind": "Node", "name": "n", "uid": "3"}])
    assert index.places("", "Service", "a") == [("a", "", "configmaps")]  # a namespaced owner: its namespace
    assert index.places("", "Node", None) == [("kube-node-lease", "coordination.k8s.io", "leases")]
    assert index.names("", "Service") and not index.names("", "ConfigMap")
    assert index.places("", "ConfigMap", "a") == []


def test_the_pairs_controllers_collect_are_not_looked_for() -> None:
    index = OwnerIndex()
    ref = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "1", "controller": True}
    index.note(_type("pods"), "a", [ref])
    index.note(_type("configmaps"), "a", [ref])
    assert index.places("apps", "ReplicaSet", "a") == [("a", "", "configmaps")]
    index.note(_type("persistentvolumeclaims"), "a", [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "2"}])
    # (the persistent volume controller's)
    assert index.names("", "Pod") and index.places("", "Pod", "a") == []
