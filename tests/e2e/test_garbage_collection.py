"""The garbage collector for every kind (api/dependents.py), over a real socket: the real
kubectl's ``delete --cascade=background|foreground|orphan`` and the official Python
client's ``propagation_policy``, for built-in owners (ConfigMaps, Services,
ServiceAccounts, pods, a ClusterRole, a Node) and custom resources."""

from __future__ import annotations

import asyncio
import functools
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

import store
from tests.e2e.test_crd import as_dict
from tests.e2e.test_kubectl import kubectl
from tests.e2e.test_kubernetes_client import bearer
from tests.test_cli import Serve, running, start_serve

NS = "gc"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    # the collector runs with the controllers, which run with the scheduler
    with running(start_serve(tmp_path_factory.mktemp("gc"), scheduler=True)) as s:
        yield s


@pytest.fixture(scope="module")
def v1(api: client.ApiClient) -> client.CoreV1Api:
    core = client.CoreV1Api(api)
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=NS)))
    return core


def _ref(owner: Any, block: bool | None = None, controller: bool | None = None) -> client.V1OwnerReference:
    return client.V1OwnerReference(api_version=owner.api_version or "v1", kind=owner.kind or "",
                                   name=owner.metadata.name, uid=owner.metadata.uid,
                                   block_owner_deletion=block, controller=controller)


def _cm(v1: client.CoreV1Api, name: str, *owners: client.V1OwnerReference, finalizers: list[str] | None = None,
        namespace: str = NS) -> client.V1ConfigMap:
    made: client.V1ConfigMap = v1.create_namespaced_config_map(namespace, client.V1ConfigMap(
        api_version="v1", kind="ConfigMap",
        metadata=client.V1ObjectMeta(name=name, owner_references=list(owners) or None, finalizers=finalizers)))
    made.api_version, made.kind = "v1", "ConfigMap"  # (the client's models leave them out of answers)
    return made


def _eventually(check: Callable[[], bool], timeout: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return False


def _gone(read: Callable[[], object]) -> Callable[[], bool]:
    def check() -> bool:
        try:
            read()
        except ApiException as e:
            if e.status == 404:
                return True
            raise
        return False
    return check


def _cm_gone(v1: client.CoreV1Api, name: str, namespace: str = NS) -> Callable[[], bool]:
    return _gone(lambda: v1.read_namespaced_config_map(name, namespace))


def test_kubectl_background_deletes_what_a_configmap_owns_a_secret_and_a_bare_pod(
        served: Serve, v1: client.CoreV1Api) -> None:
    owner = _cm(v1, "bg-owner")
    v1.create_namespaced_secret(NS, client.V1Secret(metadata=client.V1ObjectMeta(
        name="bg-secret", owner_references=[_ref(owner, controller=True)]), string_data={"k": "v"}))
    v1.create_namespaced_pod(NS, client.V1Pod(
        metadata=client.V1ObjectMeta(name="bg-pod", owner_references=[_ref(owner)]),
        spec=client.V1PodSpec(scheduler_name="none", containers=[client.V1Container(name="c", image="x")])))
    unrelated = _cm(v1, "bg-unrelated")
    out = kubectl(served, "delete", "-n", NS, "configmap", "bg-owner", "--cascade=background")
    assert 'configmap "bg-owner" deleted' in out
    assert _eventually(_gone(lambda: v1.read_namespaced_secret("bg-secret", NS)))
    assert _eventually(_gone(lambda: v1.read_namespaced_pod("bg-pod", NS)))
    assert v1.read_namespaced_config_map("bg-unrelated", NS).metadata.uid == unrelated.metadata.uid


def test_a_dependent_that_keeps_another_owner_stays_without_the_dangling_reference(v1: client.CoreV1Api) -> None:
    first, second = _cm(v1, "two-a"), _cm(v1, "two-b")
    _cm(v1, "two-child", _ref(first, controller=True), _ref(second))
    v1.delete_namespaced_config_map("two-a", NS)  # the Python client's default: no policy, Background

    def only_second() -> bool:
        refs = v1.read_namespaced_config_map("two-child", NS).metadata.owner_references or []
        return [r.uid for r in refs] == [second.metadata.uid]
    assert _eventually(only_second)
    v1.delete_namespaced_config_map("two-b", NS)
    assert _eventually(_cm_gone(v1, "two-child"))  # its last owner gone


def test_a_dependent_whose_owner_was_gone_before_it_was_written_is_collected(
        served: Serve, v1: client.CoreV1Api) -> None:
    """As upstream's collector, which looks up an owner its graph does not hold when it first
    sees a dependent name it: a ConfigMap written naming an owner already deleted, one naming
    a uid that never existed, one naming an existing object's name with another uid, and pods
    naming a ReplicaSet and a Job that never existed (pairs their controllers collect when
    the owner they saw goes: these they never saw) are collected; one naming a live owner
    stays."""
    late = _cm(v1, "late-owner")
    v1.delete_namespaced_config_map("late-owner", NS)
    assert _eventually(_cm_gone(v1, "late-owner"))
    live = _cm(v1, "late-live")
    _cm(v1, "late-child", _ref(late))
    kubectl(served, "apply", "-f", "-", stdin=f"""
apiVersion: v1
kind: ConfigMap
metadata:
  name: never-child
  namespace: {NS}
  ownerReferences:
  - {{apiVersion: v1, kind: ConfigMap, name: never-there, uid: {uuid.uuid4()}}}
""")
    _cm(v1, "renamed-child", client.V1OwnerReference(api_version="v1", kind="ConfigMap", name="late-live",
                                                      uid=str(uuid.uuid4())))
    _cm(v1, "live-child", _ref(live))
    for name, api_version, kind in (("synthetic-rs-pod", "apps/v1", "ReplicaSet"),
                                    ("synthetic-job-pod", "batch/v1", "Job")):
        v1.create_namespaced_pod(NS, client.V1Pod(
            metadata=client.V1ObjectMeta(name=name, owner_references=[client.V1OwnerReference(
                api_version=api_version, kind=kind, name="never", uid=str(uuid.uuid4()), controller=True,
                block_owner_deletion=True)]),
            spec=client.V1PodSpec(scheduler_name="none", containers=[client.V1Container(name="c", image="x")])))
    for name in ("late-child", "never-child", "renamed-child"):
        assert _eventually(_cm_gone(v1, name)), name
    for name in ("synthetic-rs-pod", "synthetic-job-pod"):  # (unbound: deleted at once)
        assert _eventually(_gone(functools.partial(v1.read_namespaced_pod, name, NS))), name
    time.sleep(0.5)  # (the look-ups of the others had their time)
    assert v1.read_namespaced_config_map("live-child", NS).metadata.owner_references[0].uid == live.metadata.uid


def test_an_update_that_names_an_absent_owner_is_collected(served: Serve, v1: client.CoreV1Api) -> None:
    """As upstream's graph builder compares each update's owner references with the last and
    looks up the owners added (``referencesDiffs``): a ConfigMap that kubectl patches to name
    an owner that is not there is collected; one the Python client replaces to name a live
    and an absent owner keeps the live one; one updated to name a live owner stays, and so
    it does after an update that keeps its references."""
    live = _cm(v1, "upd-live")
    _cm(v1, "upd-patched")
    kubectl(served, "patch", "-n", NS, "configmap", "upd-patched", "--type=merge", "-p",
            f'{{"metadata":{{"ownerReferences":[{{"apiVersion":"v1","kind":"ConfigMap","name":"upd-absent",'
            f'"uid":"{uuid.uuid4()}"}}]}}}}')
    replaced = _cm(v1, "upd-replaced")
    absent = client.V1OwnerReference(api_version="v1", kind="ConfigMap", name="upd-absent", uid=str(uuid.uuid4()))
    replaced.metadata.owner_references = [_ref(live), absent]
    v1.replace_namespaced_config_map("upd-replaced", NS, replaced)
    kept = _cm(v1, "upd-kept")
    kept.metadata.owner_references = [_ref(live)]
    v1.replace_namespaced_config_map("upd-kept", NS, kept)
    assert _eventually(_cm_gone(v1, "upd-patched"))

    def only_live() -> bool:
        refs = v1.read_namespaced_config_map("upd-replaced", NS).metadata.owner_references or []
        return [r.uid for r in refs] == [live.metadata.uid]
    assert _eventually(only_live)
    v1.patch_namespaced_config_map("upd-kept", NS, {"data": {"k": "v"}})  # (its references as they were)
    time.sleep(0.5)
    assert v1.read_namespaced_config_map("upd-kept", NS).metadata.owner_references[0].uid == live.metadata.uid


def test_a_dependent_written_naming_a_live_and_an_absent_owner_keeps_the_live_one(v1: client.CoreV1Api) -> None:
    live = _cm(v1, "mixed-live")
    absent = client.V1OwnerReference(api_version="v1", kind="ConfigMap", name="mixed-absent",
                                     uid=str(uuid.uuid4()), block_owner_deletion=True)
    _cm(v1, "mixed-child", absent, _ref(live))

    def only_live() -> bool:
        refs = v1.read_namespaced_config_map("mixed-child", NS).metadata.owner_references or []
        return [r.uid for r in refs] == [live.metadata.uid]
    assert _eventually(only_live)


def test_dependents_written_right_after_their_owners_are_never_collected(
        served: Serve, v1: client.CoreV1Api) -> None:
    """Each owner's create answered, its dependent written at once (through a second connection,
    so possibly before this process's watch cache has the owner): the look-up reads the store
    before it collects anything, so none goes."""
    cms = f"/api/v1/namespaces/{NS}/configmaps"
    with httpx.Client(base_url=served.url, headers=bearer(served), timeout=10) as owners, \
            httpx.Client(base_url=served.url, headers=bearer(served), timeout=10) as children:
        for i in range(40):
            owner = owners.post(cms, json={"metadata": {"name": f"quick-{i}"}}).json()
            children.post(cms, json={"metadata": {"name": f"quick-{i}-child", "ownerReferences": [
                {"apiVersion": "v1", "kind": "ConfigMap", "name": f"quick-{i}", "uid": owner["metadata"]["uid"]}]}}
                          ).raise_for_status()
        time.sleep(1.0)
        for i in range(40):
            assert children.get(f"{cms}/quick-{i}-child").status_code == 200, i


def test_kubectl_foreground_keeps_a_service_until_its_blocking_dependents_are_gone(
        served: Serve, v1: client.CoreV1Api) -> None:
    svc = v1.create_namespaced_service(NS, client.V1Service(
        metadata=client.V1ObjectMeta(name="fg-svc"),
        spec=client.V1ServiceSpec(ports=[client.V1ServicePort(port=80)])))
    svc.api_version, svc.kind = "v1", "Service"
    _cm(v1, "fg-held", _ref(svc, block=True), finalizers=["example.com/hold"])
    _cm(v1, "fg-loose", _ref(svc))  # no blockOwnerDeletion: deleted, not waited for
    kubectl(served, "delete", "-n", NS, "service", "fg-svc", "--cascade=foreground", "--wait=false")
    assert _eventually(_cm_gone(v1, "fg-loose"))
    held = v1.read_namespaced_config_map("fg-held", NS)
    assert held.metadata.deletion_timestamp is not None  # deleted, its finalizer holding it
    time.sleep(0.5)
    waiting = v1.read_namespaced_service("fg-svc", NS)
    assert waiting.metadata.deletion_timestamp is not None
    assert waiting.metadata.finalizers == ["foregroundDeletion"]
    v1.patch_namespaced_config_map("fg-held", NS, {"metadata": {"finalizers": None}})
    assert _eventually(_cm_gone(v1, "fg-held"))
    assert _eventually(_gone(lambda: v1.read_namespaced_service("fg-svc", NS)))


def test_kubectl_orphan_leaves_a_service_accounts_dependents_without_its_reference(
        served: Serve, v1: client.CoreV1Api) -> None:
    sa = v1.create_namespaced_service_account(NS, client.V1ServiceAccount(metadata=client.V1ObjectMeta(name="or-sa")))
    sa.api_version, sa.kind = "v1", "ServiceAccount"
    other = _cm(v1, "or-other")
    _cm(v1, "or-child", _ref(sa, block=True, controller=True), _ref(other))
    _cm(v1, "or-only", _ref(sa))
    kubectl(served, "delete", "-n", NS, "serviceaccount", "or-sa", "--cascade=orphan")
    assert _eventually(_gone(lambda: v1.read_namespaced_service_account("or-sa", NS)))
    time.sleep(0.3)
    assert [r.uid for r in v1.read_namespaced_config_map("or-child", NS).metadata.owner_references] == \
        [other.metadata.uid]
    assert v1.read_namespaced_config_map("or-only", NS).metadata.owner_references is None


def test_the_python_clients_foreground_and_orphan_on_a_configmap(v1: client.CoreV1Api) -> None:
    owner = _cm(v1, "py-fg")
    _cm(v1, "py-fg-child", _ref(owner, block=True))
    v1.delete_namespaced_config_map("py-fg", NS, propagation_policy="Foreground")
    assert _eventually(_cm_gone(v1, "py-fg-child"))
    assert _eventually(_cm_gone(v1, "py-fg"))
    owner = _cm(v1, "py-or")
    _cm(v1, "py-or-child", _ref(owner, block=True))
    v1.delete_namespaced_config_map("py-or", NS, orphan_dependents=True)  # the older option
    assert _eventually(_cm_gone(v1, "py-or"))
    assert v1.read_namespaced_config_map("py-or-child", NS).metadata.owner_references is None


def test_namespaced_dependents_of_a_cluster_scoped_owner(api: client.ApiClient, v1: client.CoreV1Api) -> None:
    rbac = client.RbacAuthorizationV1Api(api)
    role = rbac.create_cluster_role(client.V1ClusterRole(metadata=client.V1ObjectMeta(name="gc-owner-role")))
    ref = client.V1OwnerReference(api_version="rbac.authorization.k8s.io/v1", kind="ClusterRole",
                                  name="gc-owner-role", uid=role.metadata.uid)
    _cm(v1, "role-child", ref)
    _cm(v1, "role-child", ref, namespace="default")
    binding = rbac.create_cluster_role_binding(client.V1ClusterRoleBinding(
        metadata=client.V1ObjectMeta(name="gc-owned-binding", owner_references=[ref]),
        role_ref=client.V1RoleRef(api_group="rbac.authorization.k8s.io", kind="ClusterRole", name="gc-owner-role")))
    assert binding.metadata.owner_references
    rbac.delete_cluster_role("gc-owner-role")
    assert _eventually(_cm_gone(v1, "role-child"))
    assert _eventually(_cm_gone(v1, "role-child", "default"))
    assert _eventually(_gone(lambda: rbac.read_cluster_role_binding("gc-owned-binding")))


def test_a_nodes_lease_goes_with_the_node(api: client.ApiClient, v1: client.CoreV1Api) -> None:
    node = v1.create_node(client.V1Node(metadata=client.V1ObjectMeta(name="gc-node")))
    leases = client.CoordinationV1Api(api)
    leases.create_namespaced_lease("kube-node-lease", client.V1Lease(
        metadata=client.V1ObjectMeta(name="gc-node", owner_references=[client.V1OwnerReference(
            api_version="v1", kind="Node", name="gc-node", uid=node.metadata.uid)]),
        spec=client.V1LeaseSpec(holder_identity="gc-node", lease_duration_seconds=40)))
    v1.delete_node("gc-node")
    assert _eventually(_gone(lambda: leases.read_namespaced_lease("gc-node", "kube-node-lease")))


def test_what_a_pod_owns_goes_with_the_pod(v1: client.CoreV1Api) -> None:
    pod = v1.create_namespaced_pod(NS, client.V1Pod(
        metadata=client.V1ObjectMeta(name="pod-owner"),
        spec=client.V1PodSpec(scheduler_name="none", containers=[client.V1Container(name="c", image="x")])))
    pod.api_version, pod.kind = "v1", "Pod"
    _cm(v1, "pod-owned", _ref(pod, block=True, controller=True))  # (collected here)
    v1.create_namespaced_persistent_volume_claim(NS, client.V1PersistentVolumeClaim(  # (by the volume controller)
        metadata=client.V1ObjectMeta(name="pod-claim", owner_references=[_ref(pod, block=True, controller=True)]),
        spec=client.V1PersistentVolumeClaimSpec(
            access_modes=["ReadWriteOnce"],
            resources=client.V1VolumeResourceRequirements(requests={"storage": "1Gi"}))))
    v1.delete_namespaced_pod("pod-owner", NS, grace_period_seconds=0)
    assert _eventually(_cm_gone(v1, "pod-owned"))
    assert _eventually(_gone(lambda: v1.read_namespaced_persistent_volume_claim("pod-claim", NS)))


CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "gadgets.gc.example.com"},
    "spec": {"group": "gc.example.com", "scope": "Namespaced",
             "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
             "versions": [{"name": "v1", "served": True, "storage": True,
                           "schema": {"openAPIV3Schema": {"type": "object",
                                                          "x-kubernetes-preserve-unknown-fields": True}}}]},
}


def test_kubectl_foreground_and_orphan_on_custom_resources(served: Serve, api: client.ApiClient,
                                                           v1: client.CoreV1Api) -> None:
    definition = client.V1CustomResourceDefinition.from_dict(CRD)
    assert definition is not None
    client.ApiextensionsV1Api(api).create_custom_resource_definition(definition)
    custom = client.CustomObjectsApi(api)

    def gadget(name: str) -> dict[str, Any]:
        for _ in range(100):  # (the definition's Established a moment after its create)
            try:
                return as_dict(custom.create_namespaced_custom_object(
                    "gc.example.com", "v1", NS, "gadgets",
                    {"apiVersion": "gc.example.com/v1", "kind": "Gadget", "metadata": {"name": name}}))
            except ApiException as e:
                if e.status != 404:
                    raise
                time.sleep(0.05)
        raise AssertionError("the Gadget type was never served")

    def ref(g: dict[str, Any]) -> client.V1OwnerReference:
        return client.V1OwnerReference(api_version="gc.example.com/v1", kind="Gadget", name=g["metadata"]["name"],
                                       uid=g["metadata"]["uid"], controller=True, block_owner_deletion=True)

    fg = gadget("fg")
    _cm(v1, "gadget-held", ref(fg), finalizers=["example.com/hold"])
    kubectl(served, "delete", "-n", NS, "gadget", "fg", "--cascade=foreground", "--wait=false")
    assert _eventually(lambda: v1.read_namespaced_config_map("gadget-held", NS).metadata.deletion_timestamp
                       is not None)
    time.sleep(0.5)
    waiting = as_dict(custom.get_namespaced_custom_object("gc.example.com", "v1", NS, "gadgets", "fg"))
    assert waiting["metadata"]["finalizers"] == ["foregroundDeletion"]  # not Background any more
    v1.patch_namespaced_config_map("gadget-held", NS, {"metadata": {"finalizers": None}})
    assert _eventually(_gone(lambda: custom.get_namespaced_custom_object("gc.example.com", "v1", NS, "gadgets", "fg")))

    orphaning = gadget("orphaning")
    _cm(v1, "gadget-orphan", ref(orphaning))
    kubectl(served, "delete", "-n", NS, "gadget", "orphaning", "--cascade=orphan")
    assert _eventually(_gone(lambda: custom.get_namespaced_custom_object(
        "gc.example.com", "v1", NS, "gadgets", "orphaning")))
    assert v1.read_namespaced_config_map("gadget-orphan", NS).metadata.owner_references is None


def test_after_a_restart_dependents_written_before_are_known_and_a_foreground_delete_resumes(
        tmp_path: Path) -> None:
    """The scan at start (GarbageCollector.seed): the owner references stored by the last run,
    and an owner it left waiting for its dependents."""
    cms = f"/api/v1/namespaces/{NS}/configmaps"
    with running(start_serve(tmp_path, scheduler=True)) as first, \
            httpx.Client(base_url=first.url, headers=bearer(first), timeout=10) as http:
        http.post("/api/v1/namespaces", json={"metadata": {"name": NS}}).raise_for_status()
        owners = [http.post(cms, json={"metadata": {"name": name}}).json() for name in ("before", "waiting")]
        refs = [{"apiVersion": "v1", "kind": "ConfigMap", "name": o["metadata"]["name"], "uid": o["metadata"]["uid"],
                 "blockOwnerDeletion": True} for o in owners]
        http.post(cms, json={"metadata": {"name": "before-child", "ownerReferences": [refs[0]]}}).raise_for_status()
        http.post(cms, json={"metadata": {"name": "waiting-child", "ownerReferences": [refs[1]],
                                          "finalizers": ["example.com/hold"]}}).raise_for_status()
        http.request("DELETE", f"{cms}/waiting", json={"propagationPolicy": "Foreground"}).raise_for_status()
        assert _eventually(lambda: bool(http.get(f"{cms}/waiting-child").json()["metadata"].get("deletionTimestamp")))
        first.stop()
    with running(start_serve(tmp_path, run=1, scheduler=True)) as second, \
            httpx.Client(base_url=second.url, headers=bearer(second), timeout=10) as http:
        http.delete(f"{cms}/before").raise_for_status()
        assert _eventually(lambda: http.get(f"{cms}/before-child").status_code == 404)
        assert http.get(f"{cms}/waiting").json()["metadata"]["finalizers"] == ["foregroundDeletion"]
        http.patch(f"{cms}/waiting-child", headers={"content-type": "application/merge-patch+json"},
                   json={"metadata": {"finalizers": None}}).raise_for_status()
        assert _eventually(lambda: http.get(f"{cms}/waiting").status_code == 404)


def test_an_owner_deleted_while_no_server_ran_has_its_dependents_collected_at_start(tmp_path: Path) -> None:
    """The owner's key deleted from the store by another tool while the server is stopped (or a
    crash between an owner's delete and its collection): at the next start the scan finds
    its dependents and looks their owners up; the one whose only owner is gone is deleted,
    the one with another owner loses the reference to the gone one."""
    cms = f"/api/v1/namespaces/{NS}/configmaps"
    with running(start_serve(tmp_path, scheduler=True)) as first, \
            httpx.Client(base_url=first.url, headers=bearer(first), timeout=10) as http:
        http.post("/api/v1/namespaces", json={"metadata": {"name": NS}}).raise_for_status()
        owners = {name: http.post(cms, json={"metadata": {"name": name}}).json() for name in ("offline", "kept")}
        refs = {name: {"apiVersion": "v1", "kind": "ConfigMap", "name": name, "uid": o["metadata"]["uid"]}
                for name, o in owners.items()}
        http.post(cms, json={"metadata": {"name": "offline-child", "ownerReferences": [refs["offline"]]}}
                  ).raise_for_status()
        http.post(cms, json={"metadata": {"name": "both-child", "ownerReferences": [refs["offline"], refs["kept"]]}}
                  ).raise_for_status()
        first.stop()

    async def delete_owner() -> None:
        st = store.open(f"lmdb://{tmp_path / 'state' / 'data'}")
        try:
            assert await st.delete(f"/registry/configmaps/{NS}/offline".encode())
        finally:
            await st.close()
    asyncio.run(delete_owner())
    with running(start_serve(tmp_path, run=1, scheduler=True)) as second, \
            httpx.Client(base_url=second.url, headers=bearer(second), timeout=10) as http:
        assert http.get(f"{cms}/offline").status_code == 404
        assert _eventually(lambda: http.get(f"{cms}/offline-child").status_code == 404)
        assert _eventually(lambda: http.get(f"{cms}/both-child").json()["metadata"]["ownerReferences"]
                           == [refs["kept"]])


def _absent(fresh: Callable[[str, str], httpx.Response], path: str) -> bool:
    return fresh("GET", path).status_code == 404


def test_with_two_workers_dependents_written_through_either_process_are_collected(tmp_path: Path) -> None:
    """``serve --workers 2``: every request on a new connection, so the kernel spreads them over
    both processes. The dependents of one owner are written through both, in namespaces of
    their own (a place each, noted by the process that wrote it before): the process the
    owner's delete reaches collects them all, having noted every one from the store's events."""
    s = start_serve(tmp_path, extra=["--workers", "2"], scheduler=True)

    def fresh(method: str, path: str, body: dict[str, Any] | None = None) -> httpx.Response:
        with httpx.Client(base_url=s.url, headers=bearer(s), timeout=10) as http:  # a new connection
            return http.request(method, path, json=body)

    with running(s):
        owner = fresh("POST", "/apis/rbac.authorization.k8s.io/v1/clusterroles",
                      {"metadata": {"name": "gc-workers-owner"}, "rules": []}).json()
        ref = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "name": "gc-workers-owner",
               "uid": owner["metadata"]["uid"]}
        spaces = [f"gcw-{i}" for i in range(12)]
        for ns in spaces:
            fresh("POST", "/api/v1/namespaces", {"metadata": {"name": ns}}).raise_for_status()
        dependents = [f"/api/v1/namespaces/{ns}/{plural}/child-{k}" for ns in spaces
                      for k, plural in enumerate(("configmaps", "secrets", "configmaps"))]
        for path in dependents:
            fresh("POST", path.rpartition("/")[0],
                  {"metadata": {"name": path.rpartition("/")[2], "ownerReferences": [ref]}}).raise_for_status()
        # a namespaced owner too, its dependents in its namespace written through both processes
        cms = "/api/v1/namespaces/gcw-0/configmaps"
        local = fresh("POST", cms, {"metadata": {"name": "local-owner"}}).json()
        local_ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "local-owner",
                     "uid": local["metadata"]["uid"]}
        for i in range(20):
            fresh("POST", cms, {"metadata": {"name": f"local-{i}", "ownerReferences": [local_ref]}}
                  ).raise_for_status()
        fresh("DELETE", "/apis/rbac.authorization.k8s.io/v1/clusterroles/gc-workers-owner").raise_for_status()
        fresh("DELETE", f"{cms}/local-owner").raise_for_status()
        for path in [*dependents, *(f"{cms}/local-{i}" for i in range(20))]:
            assert _eventually(functools.partial(_absent, fresh, path)), path


def test_the_collectors_deletes_are_made_as_its_service_account(served: Serve, v1: client.CoreV1Api) -> None:
    """An admission policy that lets only kube-controller-manager's garbage collector delete the
    ConfigMaps labelled ``gc-only``: the user's own delete of one is denied, the collector's,
    after the user deleted its owner, goes through (as upstream's, the request of
    ``system:serviceaccount:kube-system:generic-garbage-collector``)."""
    group = "/apis/admissionregistration.k8s.io/v1"
    collector = "system:serviceaccount:kube-system:generic-garbage-collector"
    with httpx.Client(base_url=served.url, headers=bearer(served), timeout=10) as http:
        http.post(f"{group}/validatingadmissionpolicies", json={"metadata": {"name": "gc-only"}, "spec": {
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["DELETE"],
                                                    "resources": ["configmaps"]}]},
            "matchConditions": [{"name": "labelled", "expression": "has(oldObject.metadata.labels) && "
                                 "'gc-only' in oldObject.metadata.labels"}],
            "validations": [{"expression": f"request.userInfo.username == '{collector}'",
                             "message": "only the garbage collector"}]}}).raise_for_status()
        http.post(f"{group}/validatingadmissionpolicybindings", json={"metadata": {"name": "gc-only"}, "spec": {
            "policyName": "gc-only", "validationActions": ["Deny"]}}).raise_for_status()
        cms = f"/api/v1/namespaces/{NS}/configmaps"

        def denied() -> bool:  # (once the policy is in force: made again while it is not)
            http.post(cms, json={"metadata": {"name": "gc-only-probe", "labels": {"gc-only": ""}}})
            return http.delete(f"{cms}/gc-only-probe").status_code == 422  # (the policy's reason: Invalid)

        assert _eventually(denied)
        owner = _cm(v1, "gc-only-owner")
        _cm(v1, "gc-only-child", _ref(owner))
        http.patch(f"{cms}/gc-only-child", headers={"content-type": "application/merge-patch+json"},
                   json={"metadata": {"labels": {"gc-only": ""}}}).raise_for_status()
        try:
            v1.delete_namespaced_config_map("gc-only-owner", NS)
            assert _eventually(_cm_gone(v1, "gc-only-child"))
        finally:
            http.delete(f"{group}/validatingadmissionpolicybindings/gc-only")
            http.delete(f"{group}/validatingadmissionpolicies/gc-only")


COLLECTOR = "system:serviceaccount:kube-system:generic-garbage-collector"
AUDIT_POLICY = """apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  verbs: [delete, patch]
  resources: [{group: "", resources: [configmaps]}]
"""


def _audited(tmp: Path) -> list[str]:
    (tmp / "policy.yaml").write_text(AUDIT_POLICY)
    return ["--audit-policy-file", str(tmp / "policy.yaml"), "--audit-log-path", str(tmp / "audit.log")]


def _audit_events(tmp: Path, verb: str, name: str) -> list[dict[str, Any]]:
    import json

    lines = (tmp / "audit.log").read_text().splitlines() if (tmp / "audit.log").exists() else []
    return [e for e in map(json.loads, lines)
            if e["verb"] == verb and e.get("objectRef", {}).get("name") == name and e["stage"] == "ResponseComplete"]


def test_the_collectors_deletes_and_patches_are_audited_as_its_service_account(tmp_path: Path) -> None:
    """With an audit policy the collector's calls are requests of its own, as upstream's (those
    of kube-controller-manager's collector): its delete of a dependent, its removal of a
    dangling reference and of an owner's ``foregroundDeletion`` finalizer are in the audit log
    as ``system:serviceaccount:kube-system:generic-garbage-collector``, each once."""
    cms = f"/api/v1/namespaces/{NS}/configmaps"
    with running(start_serve(tmp_path, scheduler=True, extra=_audited(tmp_path))) as s, \
            httpx.Client(base_url=s.url, headers=bearer(s), timeout=10) as http:
        http.post("/api/v1/namespaces", json={"metadata": {"name": NS}}).raise_for_status()
        owners = {name: http.post(cms, json={"metadata": {"name": name}}).json() for name in ("a-owner", "a-kept")}
        refs = {name: {"apiVersion": "v1", "kind": "ConfigMap", "name": name, "uid": o["metadata"]["uid"],
                       "blockOwnerDeletion": True} for name, o in owners.items()}
        http.post(cms, json={"metadata": {"name": "a-child", "ownerReferences": [refs["a-owner"]]}}).raise_for_status()
        http.post(cms, json={"metadata": {"name": "a-both", "ownerReferences": [refs["a-owner"], refs["a-kept"]]}}
                  ).raise_for_status()
        http.request("DELETE", f"{cms}/a-owner", json={"propagationPolicy": "Foreground"}).raise_for_status()
        assert _eventually(lambda: http.get(f"{cms}/a-owner").status_code == 404)
        assert http.get(f"{cms}/a-child").status_code == 404
        assert http.get(f"{cms}/a-both").json()["metadata"]["ownerReferences"] == [refs["a-kept"]]
        for verb, name in (("delete", "a-child"), ("patch", "a-both"), ("patch", "a-owner")):
            assert _eventually(lambda v=verb, n=name: bool(_audit_events(tmp_path, v, n))), (verb, name)  # type: ignore[misc]
            found = _audit_events(tmp_path, verb, name)
            # (a patch may meet a conflict and be made again: each is the collector's)
            assert {e["user"]["username"] for e in found} == {COLLECTOR}, found
            assert [e["responseStatus"]["code"] // 100 for e in found][-1:] == [2], found
            assert verb == "patch" or len(found) == 1, found
        # the user's own delete is the user's
        assert [e["user"]["username"] for e in _audit_events(tmp_path, "delete", "a-owner")] == ["admin"]


def test_with_two_workers_one_process_collects_each_dependent(tmp_path: Path) -> None:
    """``serve --workers 2`` on a store whose owner was deleted while no server ran: the first
    process's scan at start looks the owners up (the other, forked with it, does not), and a
    dependent created, or updated to name an owner, through either process is looked up by
    that process alone: each dependent is deleted by one request of the collector, none
    repeated (the audit log has one delete of each)."""
    cms = f"/api/v1/namespaces/{NS}/configmaps"
    with running(start_serve(tmp_path, scheduler=True)) as first, \
            httpx.Client(base_url=first.url, headers=bearer(first), timeout=10) as http:
        http.post("/api/v1/namespaces", json={"metadata": {"name": NS}}).raise_for_status()
        owner = http.post(cms, json={"metadata": {"name": "offline"}}).json()
        ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "offline", "uid": owner["metadata"]["uid"]}
        for i in range(10):
            http.post(cms, json={"metadata": {"name": f"offline-{i}", "ownerReferences": [ref]}}).raise_for_status()
        first.stop()

    async def delete_owner() -> None:
        st = store.open(f"lmdb://{tmp_path / 'state' / 'data'}")
        try:
            assert await st.delete(f"/registry/configmaps/{NS}/offline".encode())
        finally:
            await st.close()
    asyncio.run(delete_owner())
    s = start_serve(tmp_path, run=1, scheduler=True, extra=["--workers", "2", *_audited(tmp_path)])

    def fresh(method: str, path: str, body: dict[str, Any] | None = None,
              content_type: str = "application/json") -> httpx.Response:
        with httpx.Client(base_url=s.url, headers=bearer(s), timeout=10) as http:  # a new connection
            return http.request(method, path, json=body, headers={"content-type": content_type})

    with running(s):
        names = [f"offline-{i}" for i in range(10)]
        for i in range(10):
            absent = {"apiVersion": "v1", "kind": "ConfigMap", "name": f"absent-{i}", "uid": str(uuid.uuid4())}
            fresh("POST", cms, {"metadata": {"name": f"created-{i}", "ownerReferences": [absent]}}).raise_for_status()
            fresh("POST", cms, {"metadata": {"name": f"updated-{i}"}}).raise_for_status()
            fresh("PATCH", f"{cms}/updated-{i}", {"metadata": {"ownerReferences": [absent]}},
                  "application/merge-patch+json").raise_for_status()
            names += [f"created-{i}", f"updated-{i}"]
        for name in names:
            assert _eventually(functools.partial(_absent, fresh, f"{cms}/{name}")), name
        time.sleep(1.0)  # (a second process's look-ups, were there any, had their time)
        for name in names:
            found = _audit_events(tmp_path, "delete", name)
            assert [(e["user"]["username"], e["responseStatus"]["code"]) for e in found] == [(COLLECTOR, 200)], found
