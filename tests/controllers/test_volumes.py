"""The persistent volume controller and its simulated provisioner (controllers/volumes.py), and
StatefulSets' volumeClaimTemplates, inside a server with its scheduler and four simulated nodes."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from controlplane.api.app import create_app
from controlplane.client import ApiError, Client
from controlplane.config import Config
from controlplane.scheduler.plugins import volumebinding
from tests.controllers.helpers import until
from tests.controllers.test_statefulsets import SETS, rolled_out, statefulset

PVCS = "/api/v1/namespaces/default/persistentvolumeclaims"
PVS = "/api/v1/persistentvolumes"
CLASSES = "/apis/storage.k8s.io/v1/storageclasses"
DRIVERS = "/apis/storage.k8s.io/v1/csidrivers"
PODS = "/api/v1/namespaces/default/pods"


def claim(name: str, size: str = "1Gi", **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}, **spec}}


def volume(name: str, size: str, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"disk": name}},
            "spec": {"capacity": {"storage": size}, "accessModes": ["ReadWriteOnce", "ReadOnlyMany"],
                     "hostPath": {"path": f"/mnt/{name}"}, **spec}}


async def storage_class(c: Client, body: dict[str, Any]) -> None:
    """``body``, a StorageClass, created with the CSIDriver that registers its provisioner: the
    simulated provisioner acts for registered drivers only."""
    try:
        await c.create(DRIVERS, {"metadata": {"name": body["provisioner"]}, "spec": {}})
    except ApiError as e:
        if e.code != 409:
            raise
    await c.create(CLASSES, body)


async def phase(c: Client, path: str) -> str:
    try:
        return str(((await c.get(path)).get("status") or {}).get("phase"))
    except ApiError as e:
        if e.code == 404:
            return "Gone"
        raise


async def test_a_claim_binds_the_smallest_available_volume_that_fits(client: Client) -> None:
    for name, size in (("big", "100Gi"), ("small", "2Gi"), ("tiny", "500Mi")):
        await client.create(PVS, volume(name, size))
    await until(lambda: _all(client, PVS, "Available", 3))
    await client.create(PVCS, claim("data", "1Gi", storageClassName=""))
    await until(lambda: _is(client, f"{PVCS}/data", "Bound"))
    pvc = await client.get(f"{PVCS}/data")
    assert pvc["spec"]["volumeName"] == "small"
    assert pvc["status"]["capacity"] == {"storage": "2Gi"}
    assert pvc["status"]["accessModes"] == ["ReadWriteOnce", "ReadOnlyMany"]
    assert pvc["metadata"]["annotations"]["pv.kubernetes.io/bind-completed"] == "yes"
    pv = await client.get(f"{PVS}/small")
    assert pv["status"]["phase"] == "Bound" and pv["spec"]["claimRef"]["uid"] == pvc["metadata"]["uid"]
    # a selector narrows the choice; a claim that nothing fits waits
    await client.create(PVCS, claim("picky", "1Gi", storageClassName="", selector={"matchLabels": {"disk": "big"}}))
    await until(lambda: _is(client, f"{PVCS}/picky", "Bound"))
    assert (await client.get(f"{PVCS}/picky"))["spec"]["volumeName"] == "big"
    await client.create(PVCS, claim("huge", "1Ti", storageClassName=""))
    await client.create(PVCS, claim("rwx", "100Mi", storageClassName="", accessModes=["ReadWriteMany"]))
    assert await phase(client, f"{PVCS}/huge") == "Pending" and await phase(client, f"{PVCS}/rwx") == "Pending"
    # the claim goes: its Retain volume is Released, never handed to another claim
    await client.delete(f"{PVCS}/data")
    await until(lambda: _is(client, f"{PVS}/small", "Released"))
    await client.create(PVCS, claim("after", "400Mi", storageClassName=""))
    await until(lambda: _is(client, f"{PVCS}/after", "Bound"))
    assert (await client.get(f"{PVCS}/after"))["spec"]["volumeName"] == "tiny"
    assert await phase(client, f"{PVS}/small") == "Released"


async def test_a_claim_made_before_its_volume_binds_once_the_volume_is_available(client: Client) -> None:
    """The claim's sync finds nothing and waits; the volume turning Available brings it back (the
    race the typed client's sweep met on a slow machine: a claim synced before the volume's
    Available phase was written)."""
    await client.create(PVCS, claim("early", "1Gi", storageClassName="manual"))
    await client.create(PVCS, claim("other", "1Gi", storageClassName="slow"))
    await asyncio.sleep(0.3)
    assert await phase(client, f"{PVCS}/early") == "Pending"
    await client.create(PVS, volume("later", "5Gi", storageClassName="manual"))
    await until(lambda: _is(client, f"{PVCS}/early", "Bound"))
    assert (await client.get(f"{PVCS}/early"))["status"]["capacity"] == {"storage": "5Gi"}
    assert await phase(client, f"{PVCS}/other") == "Pending"  # another class: not this volume


async def _is(c: Client, path: str, want: str) -> bool:
    return await phase(c, path) == want


async def _all(c: Client, path: str, want: str, n: int) -> bool:
    items = (await c.list(path))["items"]
    return len(items) == n and all((i.get("status") or {}).get("phase") == want for i in items)


async def test_the_default_class_provisions_and_deleting_the_claim_deletes_its_volume(client: Client) -> None:
    await storage_class(client, {"metadata": {"name": "standard", "annotations": {
        "storageclass.kubernetes.io/is-default-class": "true"}}, "provisioner": "csi.example.com"})
    await client.create(PVCS, claim("logs", "5Gi"))  # no class named: the default one is assigned
    await until(lambda: _is(client, f"{PVCS}/logs", "Bound"))
    pvc = await client.get(f"{PVCS}/logs")
    assert pvc["spec"]["storageClassName"] == "standard"
    pv = await client.get(f"{PVS}/{pvc['spec']['volumeName']}")
    assert pv["metadata"]["name"] == f"pvc-{pvc['metadata']['uid']}"
    assert pv["spec"]["csi"]["driver"] == "csi.example.com"
    assert pv["spec"]["persistentVolumeReclaimPolicy"] == "Delete"
    assert pv["metadata"]["annotations"]["pv.kubernetes.io/provisioned-by"] == "csi.example.com"
    await client.delete(f"{PVCS}/logs")
    await until(lambda: _is(client, f"{PVS}/{pv['metadata']['name']}", "Gone"))


async def test_wait_for_first_consumer_provisions_on_the_node_of_the_first_pod(client: Client) -> None:
    await storage_class(client, {"metadata": {"name": "local"}, "provisioner": "local.csi.example.com",
                                  "volumeBindingMode": "WaitForFirstConsumer"})
    await client.create(PVCS, claim("scratch", storageClassName="local"))
    await client.create(PVCS, claim("static", storageClassName="none"))  # a class that does not exist: waits
    assert await phase(client, f"{PVCS}/scratch") == "Pending"
    await client.create(PODS, {"metadata": {"name": "user"}, "spec": {
        "containers": [{"name": "c", "image": "busybox"}],
        "volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "scratch"}}]}})
    await until(lambda: _is(client, f"{PVCS}/scratch", "Bound"))

    async def placed() -> bool:  # once its claim is bound (the scheduler's PreBind waits for it)
        return bool((await client.get(f"{PODS}/user"))["spec"].get("nodeName"))

    await until(placed)
    pod, pvc = await client.get(f"{PODS}/user"), await client.get(f"{PVCS}/scratch")
    node = pod["spec"]["nodeName"]
    assert pvc["metadata"]["annotations"]["volume.kubernetes.io/selected-node"] == node
    pv = await client.get(f"{PVS}/{pvc['spec']['volumeName']}")
    term = pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]
    assert term == {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}
    assert await phase(client, f"{PVCS}/static") == "Pending"


async def test_statefulset_pods_get_their_own_claims_and_scale_down_deletes_them(client: Client) -> None:
    await storage_class(client, {"metadata": {"name": "fast"}, "provisioner": "csi.example.com"})
    sts = statefulset("db", 3, volumeClaimTemplates=[{"metadata": {"name": "data", "labels": {"tier": "db"}},
                                                      "spec": {"storageClassName": "fast",
                                                               "accessModes": ["ReadWriteOnce"],
                                                               "resources": {"requests": {"storage": "1Gi"}}}}],
                      persistentVolumeClaimRetentionPolicy={"whenScaled": "Delete", "whenDeleted": "Retain"})
    sts["spec"]["podManagementPolicy"] = "Parallel"
    await client.create(SETS, sts)
    await until(lambda: rolled_out(client, "db"))
    for i in range(3):
        pvc = await client.get(f"{PVCS}/data-db-{i}")
        assert pvc["metadata"]["labels"] == {"tier": "db", "app": "db"}
        pod = await client.get(f"{PODS}/db-{i}")
        assert {"name": "data", "persistentVolumeClaim": {"claimName": f"data-db-{i}"}} in pod["spec"]["volumes"]
    await until(lambda: _all(client, PVCS, "Bound", 3))
    await client.patch(f"{SETS}/db", {"spec": {"replicas": 1}})
    await until(lambda: _is(client, f"{PVCS}/data-db-2", "Gone"))
    await until(lambda: _is(client, f"{PVCS}/data-db-1", "Gone"))
    assert await phase(client, f"{PVCS}/data-db-0") == "Bound"
    # a pod replaced (not scaled away) keeps its claim, which the new pod mounts again
    await client.delete(f"{PODS}/db-0")
    await until(lambda: rolled_out(client, "db"))
    assert await phase(client, f"{PVCS}/data-db-0") == "Bound"


async def test_scale_down_deletes_the_claims_when_the_set_would_delete_them_too(client: Client) -> None:
    """Both policies ``Delete``: a scaled-away pod's claims lose the set's reference and get the
    pod's, so they go with the pod (upstream's updateClaimOwnerRefForSetAndPod); the set keeps
    the others, which go with it."""
    await storage_class(client, {"metadata": {"name": "fast"}, "provisioner": "csi.example.com"})
    sts = statefulset("both", 2, volumeClaimTemplates=[{"metadata": {"name": "data"}, "spec": {
        "storageClassName": "fast", "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}],
                      persistentVolumeClaimRetentionPolicy={"whenScaled": "Delete", "whenDeleted": "Delete"})
    sts["spec"]["podManagementPolicy"] = "Parallel"
    await client.create(SETS, sts)
    await until(lambda: rolled_out(client, "both"))
    await until(lambda: _all(client, PVCS, "Bound", 2))
    await client.patch(f"{SETS}/both", {"spec": {"replicas": 1}})
    await until(lambda: _is(client, f"{PVCS}/data-both-1", "Gone"))
    kept = await client.get(f"{PVCS}/data-both-0")
    assert [r["kind"] for r in kept["metadata"]["ownerReferences"]] == ["StatefulSet"]


async def test_a_retention_policy_changed_later_is_carried_over_to_the_claims(client: Client) -> None:
    """Claims made under ``Retain`` get the set's reference once ``whenDeleted`` is Delete, and
    lose it when it is Retain again; a scale-down under ``whenScaled: Delete`` then takes the
    scaled-away pod's claim (upstream's ClaimsMatchRetentionPolicy, at every sync)."""
    await storage_class(client, {"metadata": {"name": "fast"}, "provisioner": "csi.example.com"})
    sts = statefulset("later", 2, podManagementPolicy="Parallel", volumeClaimTemplates=[{
        "metadata": {"name": "data"}, "spec": {"storageClassName": "fast", "accessModes": ["ReadWriteOnce"],
                                               "resources": {"requests": {"storage": "1Gi"}}}}])
    uid = (await client.create(SETS, sts))["metadata"]["uid"]
    await until(lambda: _all(client, PVCS, "Bound", 2))

    async def owners(name: str) -> list[tuple[str, str]]:
        refs = (await client.get(f"{PVCS}/{name}"))["metadata"].get("ownerReferences") or []
        return [(r["kind"], r["uid"]) for r in refs if r.get("controller")]

    async def owned_by_the_set() -> bool:
        return [await owners(f"data-later-{i}") for i in range(2)] == [[("StatefulSet", uid)]] * 2

    assert await owners("data-later-0") == []
    await client.patch(f"{SETS}/later", {"spec": {"persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Delete"}}})
    await until(owned_by_the_set)
    await client.patch(f"{SETS}/later", {"spec": {"replicas": 1, "persistentVolumeClaimRetentionPolicy": {
        "whenDeleted": "Retain", "whenScaled": "Delete"}}})
    await until(lambda: _is(client, f"{PVCS}/data-later-1", "Gone"))

    async def released() -> bool:
        return await owners("data-later-0") == []

    await until(released)


async def test_a_claims_owners_changed_by_someone_else_are_put_back_at_once(client: Client) -> None:
    """Under ``whenDeleted: Delete`` a claim is the set's; someone stripping its references
    while the set's pods are quiet gets the set synced again by the claim's event, which
    puts them back (no pod event was coming to do it)."""
    await storage_class(client, {"metadata": {"name": "fast"}, "provisioner": "csi.example.com"})
    sts = statefulset("kept", 1, volumeClaimTemplates=[{"metadata": {"name": "data"}, "spec": {
        "storageClassName": "fast", "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}],
                      persistentVolumeClaimRetentionPolicy={"whenScaled": "Retain", "whenDeleted": "Delete"})
    uid = (await client.create(SETS, sts))["metadata"]["uid"]
    await until(lambda: rolled_out(client, "kept"))
    await until(lambda: _is(client, f"{PVCS}/data-kept-0", "Bound"))
    await asyncio.sleep(0.5)  # the pod's last events handled
    await client.patch(f"{PVCS}/data-kept-0", {"metadata": {"ownerReferences": None}})

    async def owned_again() -> bool:
        refs = (await client.get(f"{PVCS}/data-kept-0"))["metadata"].get("ownerReferences") or []
        return [(r["kind"], r["uid"]) for r in refs] == [("StatefulSet", uid)]

    await until(owned_again, timeout=10)


async def test_the_claim_of_a_pending_pod_deleted_is_made_again(client: Client) -> None:
    """A pod that cannot be scheduled stays Pending; its claim deleted (its protection
    finalizer forced off) is made again, as upstream's createMissingPersistentVolumeClaims,
    once the claim's deletion brings the set back."""
    await storage_class(client, {"metadata": {"name": "fast"}, "provisioner": "csi.example.com"})
    sts = statefulset("stuck", 1, volumeClaimTemplates=[{"metadata": {"name": "data"}, "spec": {
        "storageClassName": "fast", "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}])
    sts["spec"]["template"]["spec"]["nodeSelector"] = {"nowhere": "true"}
    await client.create(SETS, sts)
    await until(lambda: _is(client, f"{PODS}/stuck-0", "Pending"))
    await until(lambda: _unschedulable_because(client, "stuck-0"))
    old = await client.get(f"{PVCS}/data-stuck-0")
    await asyncio.sleep(0.5)  # the pod's last events handled
    await client.delete(f"{PVCS}/data-stuck-0")
    await client.patch(f"{PVCS}/data-stuck-0", {"metadata": {"finalizers": None}})

    async def made_again() -> bool:
        try:
            pvc = await client.get(f"{PVCS}/data-stuck-0")
        except ApiError as e:
            if e.code == 404:
                return False
            raise
        return bool(pvc["metadata"]["uid"] != old["metadata"]["uid"])

    await until(made_again, timeout=10)
    assert await phase(client, f"{PODS}/stuck-0") == "Pending"


async def test_a_claim_in_use_waits_for_its_pod_before_it_goes(client: Client) -> None:
    await storage_class(client, {"metadata": {"name": "std"}, "provisioner": "csi.example.com"})
    pvc = await client.create(PVCS, claim("held", storageClassName="std"))
    assert pvc["metadata"]["finalizers"] == ["kubernetes.io/pvc-protection"]
    await until(lambda: _is(client, f"{PVCS}/held", "Bound"))
    volume = (await client.get(f"{PVCS}/held"))["spec"]["volumeName"]
    assert (await client.get(f"{PVS}/{volume}"))["metadata"]["finalizers"] == ["kubernetes.io/pv-protection"]
    await client.create(PODS, {"metadata": {"name": "holder"}, "spec": {
        "terminationGracePeriodSeconds": 0, "containers": [{"name": "c", "image": "busybox"}],
        "volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "held"}}]}})
    await client.delete(f"{PVCS}/held")
    await asyncio.sleep(0.5)
    held = await client.get(f"{PVCS}/held")  # Terminating: a pod mounts it
    assert held["metadata"]["deletionTimestamp"] and held["status"]["phase"] == "Bound"
    await client.delete(f"{PODS}/holder")
    await until(lambda: _is(client, f"{PVCS}/held", "Gone"))
    await until(lambda: _is(client, f"{PVS}/{volume}", "Gone"))  # released, reclaimed, unprotected


async def _unschedulable_because(c: Client, pod: str) -> str:
    conditions = ((await c.get(f"{PODS}/{pod}")).get("status") or {}).get("conditions") or []
    return next((str(x.get("message")) for x in conditions if x.get("type") == "PodScheduled"
                 and x.get("status") == "False"), "")


async def test_a_pod_waits_for_its_immediate_claims_to_be_bound(client: Client) -> None:
    """The scheduler's VolumeBinding: a missing claim, or one not bound whose class binds
    at once, keeps the pod Pending until the controller binds it."""
    mounts = {"containers": [{"name": "c", "image": "busybox"}],
              "volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "later"}}]}
    await client.create(PODS, {"metadata": {"name": "waiter"}, "spec": mounts})

    async def says(text: str) -> bool:
        return text in await _unschedulable_because(client, "waiter")

    await until(lambda: says('persistentvolumeclaim "later" not found'))
    await client.create(PVCS, claim("later"))  # no class, and no default class yet
    await until(lambda: says("pod has unbound immediate PersistentVolumeClaims"))
    assert not (await client.get(f"{PODS}/waiter"))["spec"].get("nodeName")
    await storage_class(client, {"metadata": {"name": "std", "annotations": {
        "storageclass.kubernetes.io/is-default-class": "true"}}, "provisioner": "csi.example.com"})

    async def running() -> bool:
        return ((await client.get(f"{PODS}/waiter")).get("status") or {}).get("phase") == "Running"

    await until(running)
    assert await phase(client, f"{PVCS}/later") == "Bound"


async def test_a_pod_goes_where_its_bound_volume_is(client: Client) -> None:
    async def four_nodes() -> bool:
        return len((await client.list("/api/v1/nodes"))["items"]) == 4

    await until(four_nodes)
    target = sorted(n["metadata"]["name"] for n in (await client.list("/api/v1/nodes"))["items"])[-1]
    await client.create(PVS, volume("local-disk", "5Gi", nodeAffinity={"required": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In",
                                                     "values": [target]}]}]}}))
    await until(lambda: _is(client, f"{PVS}/local-disk", "Available"))
    await client.create(PVCS, claim("pinned", storageClassName=""))
    await until(lambda: _is(client, f"{PVCS}/pinned", "Bound"))
    await client.create(PODS, {"metadata": {"name": "local"}, "spec": {
        "containers": [{"name": "c", "image": "busybox"}],
        "volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "pinned"}}]}})

    async def placed() -> bool:
        return bool((await client.get(f"{PODS}/local"))["spec"].get("nodeName"))

    await until(placed)
    assert (await client.get(f"{PODS}/local"))["spec"]["nodeName"] == target


async def _claim_events(c: Client, claim_name: str) -> dict[str, tuple[str, str]]:
    """The claim's events: reason -> (type, message)."""
    events = (await c.list("/api/v1/namespaces/default/events"))["items"]
    return {str(e["reason"]): (str(e["type"]), str(e["message"])) for e in events
            if e["involvedObject"].get("kind") == "PersistentVolumeClaim" and e["involvedObject"]["name"] == claim_name}


async def test_a_claim_waits_for_a_provisioner_that_nothing_runs_until_its_driver_registers(client: Client) -> None:
    """As upstream's binder hands a claim to an external provisioner: the claim is annotated with
    its name and gets an ExternalProvisioning event; nothing provisions it until a CSIDriver of
    that name registers the driver."""
    await client.create(CLASSES, {"metadata": {"name": "remote"}, "provisioner": "nfs.csi.example.com"})
    await client.create(PVCS, claim("orphan", storageClassName="remote"))
    waiting = ("Normal", "Waiting for a volume to be created either by the external provisioner "
               "'nfs.csi.example.com' or manually by the system administrator. If volume creation is "
               "delayed, please verify that the provisioner is running and correctly registered.")

    async def handed() -> bool:
        return (await _claim_events(client, "orphan")).get("ExternalProvisioning") == waiting

    await until(handed)
    pvc = await client.get(f"{PVCS}/orphan")
    assert pvc["status"]["phase"] == "Pending" and not pvc["spec"].get("volumeName")
    annotations = pvc["metadata"]["annotations"]
    assert annotations["volume.kubernetes.io/storage-provisioner"] == "nfs.csi.example.com"
    assert annotations["volume.beta.kubernetes.io/storage-provisioner"] == "nfs.csi.example.com"
    assert not (await client.list(PVS))["items"]
    await client.create(DRIVERS, {"metadata": {"name": "nfs.csi.example.com"}, "spec": {}})
    await until(lambda: _is(client, f"{PVCS}/orphan", "Bound"))
    pv = await client.get(f"{PVS}/{(await client.get(f'{PVCS}/orphan'))['spec']['volumeName']}")
    assert pv["spec"]["csi"]["driver"] == "nfs.csi.example.com"
    assert "ProvisioningSucceeded" in await _claim_events(client, "orphan")


async def test_an_unbindable_claim_says_why_as_upstreams_binder(client: Client) -> None:
    await client.create(PVCS, claim("classless", storageClassName=""))
    await client.create(PVCS, claim("unknown", storageClassName="missing"))
    await client.create(CLASSES, {"metadata": {"name": "static"}, "provisioner": "kubernetes.io/no-provisioner"})
    await client.create(PVCS, claim("manual", storageClassName="static"))
    await client.create(CLASSES, {"metadata": {"name": "later"}, "provisioner": "csi.example.com",
                                  "volumeBindingMode": "WaitForFirstConsumer"})
    await client.create(PVCS, claim("lazy", storageClassName="later"))
    expected = {
        "classless": ("FailedBinding", ("Normal", "no persistent volumes available for this claim and no storage "
                                                  "class is set")),
        "unknown": ("ProvisioningFailed", ("Warning", 'storageclass.storage.k8s.io "missing" not found')),
        "manual": ("ProvisioningFailed", ("Warning", "no volume plugin matched name: kubernetes.io/no-provisioner")),
        "lazy": ("WaitForFirstConsumer", ("Normal", "waiting for first consumer to be created before binding")),
    }
    for name, (reason, event) in expected.items():
        async def said(name: str = name, reason: str = reason, event: tuple[str, str] = event) -> bool:
            return (await _claim_events(client, name)).get(reason) == event

        await until(said, message=name)
    # a consumer that cannot be scheduled: the claim waits for it by name
    await client.create(PODS, {"metadata": {"name": "stuck"}, "spec": {
        "nodeSelector": {"no-such": "node"}, "containers": [{"name": "c", "image": "busybox"}],
        "volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "lazy"}}]}})

    async def waits_for_the_pod() -> bool:
        return (await _claim_events(client, "lazy")).get("WaitForPodScheduled") == (
            "Normal", "waiting for pod stuck to be scheduled")

    await until(waits_for_the_pod)
    for name in expected:
        assert await phase(client, f"{PVCS}/{name}") == "Pending"


@pytest.fixture
async def quick_binds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Client]:
    """A server whose scheduler waits 2 s, not upstream's 600, for a pod's volumes at PreBind, and
    that runs no provisioner but those a CSIDriver registers."""
    monkeypatch.setattr(volumebinding, "BIND_TIMEOUT", 2.0)
    app = create_app(Config(data_dir=tmp_path / "data", tls=False, nodes=2, volume_provisioners=()))
    async with app.router.lifespan_context(app):
        yield Client.in_process(app.state.front)


async def test_a_pod_waits_unbound_for_the_volume_its_first_consumer_claim_needs(quick_binds: Client) -> None:
    """Upstream's PreBind (BindPodVolumes): the scheduler names its node on the claim, then
    binds the pod only once the claim is bound; a provisioner that nothing runs leaves the pod
    unbound, failing each wait with upstream's words, until its driver registers."""
    client = quick_binds
    await client.create(CLASSES, {"metadata": {"name": "later"}, "provisioner": "lazy.csi.example.com",
                                  "volumeBindingMode": "WaitForFirstConsumer"})
    await client.create(PVCS, claim("lazy", storageClassName="later"))
    await client.create(PODS, {"metadata": {"name": "consumer"}, "spec": {
        "containers": [{"name": "c", "image": "busybox"}],
        "volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "lazy"}}]}})

    async def timed_out() -> bool:
        events = (await client.list("/api/v1/namespaces/default/events"))["items"]
        return any(e["reason"] == "FailedScheduling" and e["involvedObject"]["name"] == "consumer"
                   and e["message"] == 'running PreBind plugin "VolumeBinding": binding volumes: '
                                       "context deadline exceeded" for e in events)

    await until(timed_out)
    pvc = await client.get(f"{PVCS}/lazy")
    assert pvc["status"]["phase"] == "Pending"
    assert pvc["metadata"]["annotations"]["volume.kubernetes.io/selected-node"].startswith("sim-node-")
    assert "ExternalProvisioning" in await _claim_events(client, "lazy")
    assert not (await client.get(f"{PODS}/consumer"))["spec"].get("nodeName")
    await client.create(DRIVERS, {"metadata": {"name": "lazy.csi.example.com"}, "spec": {}})
    await until(lambda: _is(client, f"{PVCS}/lazy", "Bound"))

    async def placed() -> str:
        return str((await client.get(f"{PODS}/consumer"))["spec"].get("nodeName") or "")

    node = await until(placed)
    pvc = await client.get(f"{PVCS}/lazy")
    assert pvc["metadata"]["annotations"]["volume.kubernetes.io/selected-node"] == node
    pv = await client.get(f"{PVS}/{pvc['spec']['volumeName']}")
    assert pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] == [node]
