"""The persistent volume controller of kube-controller-manager, with a simulated
dynamic provisioner: what makes a PersistentVolumeClaim ``Bound``.

For each claim:

- without a ``storageClassName``, it gets the default StorageClass (the one
  annotated ``storageclass.kubernetes.io/is-default-class: "true"``, the newest if
  several), as upstream's retroactive default class assignment;
- it is bound to the smallest ``Available`` PersistentVolume that fits: same class
  and volume mode, every access mode the claim asks for, at least its size, and the
  claim's label selector; a volume whose ``claimRef`` names the claim (pre-bound),
  or the volume the claim names in ``volumeName``, is taken first;
- failing that, a claim whose class has an external provisioner is handed to it as
  upstream's ``provisionClaimOperationExternal`` does: the claim gets the
  ``volume.kubernetes.io/storage-provisioner`` annotation (and its beta form) naming
  it, and an ``ExternalProvisioning`` event. The simulated provisioner then acts for
  the provisioners that run here: those a CSIDriver object of the same name
  registers, as a CSI driver's deployment does, and those ``serve
  --volume-provisioners`` names (``*``: every one). It creates a new volume
  (``pvc-<uid>``, a ``csi`` source of the provisioner's name, the class's reclaim
  policy), at once for ``Immediate`` classes, and for ``WaitForFirstConsumer`` ones once
  the scheduler has chosen a node for a pod that mounts the claim (its PreBind writes the
  claim's ``volume.kubernetes.io/selected-node`` annotation, then waits for the claim to be
  bound; the node is the volume's node affinity), or once such a pod is on a node.
  A claim of any other provisioner stays ``Pending``, as on a cluster where nothing
  runs it, and is provisioned once its CSIDriver appears;
- the events upstream's binder records about a claim it cannot bind, each time it
  syncs one: ``FailedBinding`` (no class), ``WaitForFirstConsumer`` or
  ``WaitForPodScheduled`` (a class that waits, no pod on a node yet), Warning
  ``ProvisioningFailed`` (a class that does not exist; ``kubernetes.io/no-provisioner``,
  which provisions nothing, as upstream).

Binding writes both sides as upstream: the volume's ``claimRef`` and ``Bound``
phase; the claim's ``volumeName``, ``bind-completed`` and ``bound-by-controller``
annotations, then its ``Bound`` phase, access modes and capacity.

For each volume: a new one becomes ``Available``; once its claim is gone it is
``Released``, then deleted if its reclaim policy is ``Delete``.

The garbage collector's part for claims: a claim owned by pods or StatefulSets
(``persistentVolumeClaimRetentionPolicy: Delete``) is deleted once all its owners
are gone, and loses the references of those gone while another remains.

Protection, as upstream's admission and protection controllers: the API gives
claims ``kubernetes.io/pvc-protection`` and volumes ``kubernetes.io/pv-protection``
at create (while this controller runs); a claim being deleted keeps its
finalizer while a pod that has not ended mounts it, a volume while it is Bound.
A released volume is reclaimed after it is marked ``Released``.

The scheduler's VolumeBinding plugin (``scheduler/plugins/volumebinding.py``) holds a
pod until its Immediate claims are bound. Not simulated: attach/detach and mounts,
expansion, snapshots.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from controlplane.api.defaultclass import STORAGE_DEFAULT, newest_default
from controlplane.client import ApiError, Client, held_in, resource_path
from controlplane.client.workqueue import WorkQueue, run_controller
from controlplane.identities import service_account_user
from controlplane.quantity import QuantityError, parse_quantity
from controlplane.selectormatch import match_label_selector

from .events import Recorder
from .ownership import key_of, meta_of, owner_exists

if TYPE_CHECKING:
    from controlplane.config import Config

__all__ = ["DEFAULT_CLASS_ANNOTATION", "VolumeController", "start"]

log = logging.getLogger(__name__)

DEFAULT_CLASS_ANNOTATION = "storageclass.kubernetes.io/is-default-class"
SELECTED_NODE = "volume.kubernetes.io/selected-node"
PVC_PROTECTION = "kubernetes.io/pvc-protection"  # added at create by the API (api/rest.py) with this controller
PV_PROTECTION = "kubernetes.io/pv-protection"
NO_PROVISIONER = "kubernetes.io/no-provisioner"
# set by the binder on a claim it hands to an external provisioner (upstream's setClaimProvisioner)
STORAGE_PROVISIONER = "volume.kubernetes.io/storage-provisioner"
BETA_STORAGE_PROVISIONER = "volume.beta.kubernetes.io/storage-provisioner"
EVERY_PROVISIONER = "*"
CLAIMS = resource_path("", "v1", "persistentvolumeclaims")
VOLUMES = resource_path("", "v1", "persistentvolumes")
CLASSES = resource_path("storage.k8s.io", "v1", "storageclasses")
CSI_DRIVERS = resource_path("storage.k8s.io", "v1", "csidrivers")

Obj = dict[str, Any]


def _size(resources: Any) -> Any:
    try:
        return parse_quantity((resources or {}).get("storage", 0))
    except QuantityError:
        return None


def _mounts(pod: Obj, claim: str) -> bool:
    """Whether ``pod`` mounts the claim named ``claim`` (of its namespace)."""
    return any(((volume or {}).get("persistentVolumeClaim") or {}).get("claimName") == claim
               for volume in (pod.get("spec") or {}).get("volumes") or () if isinstance(volume, dict))


def _claim_path(namespace: str, name: str = "", sub: str = "") -> str:
    return resource_path("", "v1", "persistentvolumeclaims", namespace, name or None, sub or None)


def _volume_path(name: str = "", sub: str = "") -> str:
    return resource_path("", "v1", "persistentvolumes", None, name or None, sub or None)


class VolumeController:
    # the persistent volume binder, the two protection controllers and the garbage collector's
    # part for claims, each turned off on its own by ``serve --controllers`` (``start``)
    binds = protects_claims = protects_volumes = collects = True

    def __init__(self, client: Client, workers: int = 2, provisioners: frozenset[str] = frozenset()) -> None:
        self.client = client
        # the provisioners the simulated one acts for without a CSIDriver (``*``: every one)
        self.provisioners = provisioners
        # the garbage collector's part for claims as its service account: the binder's role reads no owner
        self.gc_client = client.as_identity(service_account_user("generic-garbage-collector"))
        self.workers = workers
        self.queue = WorkQueue()
        self.events = Recorder(client, "persistentvolume-controller")
        self.claims = client.informer(CLAIMS, on_add=self._claim_changed,
                                      on_update=lambda _old, new: self._claim_changed(new),
                                      on_delete=self._claim_deleted)
        self.volumes = client.informer(VOLUMES, on_add=self._volume_changed,
                                       on_update=lambda _old, new: self._volume_changed(new),
                                       on_delete=self._volume_changed)
        self.classes = client.informer(CLASSES, on_add=self._class_changed,
                                       on_update=lambda _old, new: self._class_changed(new))
        # a CSI driver registered: the claims waiting for its provisioner are provisioned
        self.drivers = client.informer(CSI_DRIVERS, on_add=self._class_changed)
        self.pods = client.informer("/api/v1/pods", on_add=self._pod_changed,
                                    on_update=lambda _old, new: self._pod_changed(new),
                                    on_delete=self._pod_deleted)
        self.sets = client.informer(resource_path("apps", "v1", "statefulsets"), on_delete=self._owner_deleted)
        self._consumers: dict[str, str] = {}  # claim key -> a node a pod mounting it is on
        self._owned: dict[str, set[str]] = {}  # owner uid -> keys of the claims it owns

    # -- events
    def _claim_changed(self, pvc: Obj) -> None:
        key = key_of(pvc)
        self.queue.add("claim:" + key)
        refs = meta_of(pvc).get("ownerReferences")
        if refs:
            for ref in refs:
                self._owned.setdefault(str(ref.get("uid", "")), set()).add(key)
            self.queue.add("owners:" + key)

    def _pod_deleted(self, pod: Obj) -> None:
        self._pod_gone(pod)
        self._owner_deleted(pod)

    def _owner_deleted(self, owner: Obj) -> None:
        for key in self._owned.pop(str(meta_of(owner).get("uid", "")), ()):
            self.queue.add("owners:" + key)

    def _claim_deleted(self, pvc: Obj) -> None:
        self._consumers.pop(key_of(pvc), None)
        for ref in meta_of(pvc).get("ownerReferences") or ():
            keys = self._owned.get(str(ref.get("uid", "")))
            if keys is not None:
                keys.discard(key_of(pvc))
                if not keys:
                    del self._owned[str(ref.get("uid", ""))]
        name = (pvc.get("spec") or {}).get("volumeName")
        if name:
            self.queue.add("volume:" + name)

    def _volume_changed(self, pv: Obj) -> None:
        self.queue.add("volume:" + str(meta_of(pv).get("name", "")))
        spec = pv.get("spec") or {}
        ref = spec.get("claimRef")
        if ref:
            self.queue.add(f"claim:{ref.get('namespace', '')}/{ref.get('name', '')}")
        elif (pv.get("status") or {}).get("phase") == "Available" and not meta_of(pv).get("deletionTimestamp"):
            # a claim synced before this volume was Available found nothing and waits: upstream's
            # periodic resync (--pvclaimbinder-sync-period, 15 s) retries it; here the volume's
            # event does, for the unbound claims of its class
            self._unbound_claims_retry(spec.get("storageClassName") or "")

    def _unbound_claims_retry(self, class_name: str) -> None:
        for key, pvc in self.claims.items.items():
            if (pvc.get("status") or {}).get("phase") != "Bound" and not meta_of(pvc).get("deletionTimestamp") \
                    and ((pvc.get("spec") or {}).get("storageClassName") or "") == class_name:
                self.queue.add("claim:" + key)

    def _class_changed(self, _sc: Obj) -> None:
        for key, pvc in self.claims.items.items():
            if (pvc.get("status") or {}).get("phase") != "Bound":
                self.queue.add("claim:" + key)

    def _pod_gone(self, pod: Obj) -> None:
        """A pod deleted or ended: a claim it mounted that waits on its deletion may go now."""
        for volume in (pod.get("spec") or {}).get("volumes") or ():
            claim = ((volume or {}).get("persistentVolumeClaim") or {}).get("claimName") if isinstance(volume, dict) \
                else None
            key = f"{meta_of(pod).get('namespace', '')}/{claim}"
            if claim and meta_of(self.claims.items.get(key) or {}).get("deletionTimestamp"):
                self.queue.add("claim:" + key)

    def _pod_changed(self, pod: Obj) -> None:
        spec = pod.get("spec") or {}
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            self._pod_gone(pod)
        node = spec.get("nodeName")
        if not node:
            # a consumer not scheduled yet: its claims' events say they wait for it (upstream's
            # binder says so at its next periodic sync)
            for volume in spec.get("volumes") or ():
                source = volume.get("persistentVolumeClaim") if isinstance(volume, dict) else None
                key = f"{meta_of(pod).get('namespace', '')}/{(source or {}).get('claimName')}"
                if source and ((self.claims.items.get(key) or {}).get("status") or {}).get("phase") == "Pending":
                    self.queue.add("claim:" + key)
            return
        for volume in spec.get("volumes") or ():
            source = volume.get("persistentVolumeClaim") if isinstance(volume, dict) else None
            if source and source.get("claimName"):
                key = f"{meta_of(pod).get('namespace', '')}/{source['claimName']}"
                if key not in self._consumers:
                    self._consumers[key] = node
                    self.queue.add("claim:" + key)

    # -- running
    async def run(self) -> None:
        await run_controller("persistentvolume controller",
                             (self.claims, self.volumes, self.classes, self.drivers, self.pods, self.sets),
                             self.queue, self.sync, self.workers)

    async def sync(self, key: str) -> None:
        kind, _, rest = key.partition(":")
        if kind == "claim":
            await self.sync_claim(rest)
        elif kind == "owners":
            if self.collects:
                await self.collect_claim(rest)
        else:
            await self.sync_volume(rest)

    def _alive(self, namespace: str, ref: Obj) -> bool:
        informer = {"Pod": self.pods, "StatefulSet": self.sets}.get(str(ref.get("kind")))
        if informer is None:
            return True  # an owner of a kind not followed here: left to be
        owner = informer.items.get(f"{namespace}/{ref.get('name', '')}")
        return owner is not None and meta_of(owner).get("uid") == ref.get("uid")

    async def collect_claim(self, key: str) -> None:
        pvc = self.claims.items.get(key)
        if pvc is None or meta_of(pvc).get("deletionTimestamp"):
            return
        meta = meta_of(pvc)
        refs = meta.get("ownerReferences") or []
        alive = [r for r in refs if self._alive(meta.get("namespace", ""), r)
                 or await owner_exists(self.gc_client, pvc, str(r.get("uid", "")))]  # informers may lag
        if len(alive) == len(refs):
            return
        path = _claim_path(meta.get("namespace", ""), meta.get("name", ""))
        try:
            if alive:
                await self.gc_client.patch(path, {"metadata": {"ownerReferences": alive,
                                                               "resourceVersion": meta.get("resourceVersion")}})
            else:
                await self.gc_client.delete(path, {"kind": "DeleteOptions", "apiVersion": "v1",
                                                "propagationPolicy": "Background",
                                                "preconditions": {"uid": meta.get("uid")}})
        except ApiError as e:
            if e.code not in (404, 409):
                raise

    def default_class(self) -> Obj | None:
        """The class DefaultStorageClass admission gives (upstream's GetDefaultClass): marked by the
        annotation or its beta form, the newest of several, the first name in the same second."""
        return newest_default(list(self.classes.items.values()), STORAGE_DEFAULT)

    async def sync_claim(self, key: str) -> None:
        pvc = self.claims.items.get(key)
        if pvc is None:
            return
        if meta_of(pvc).get("deletionTimestamp"):
            if self.protects_claims and PVC_PROTECTION in (meta_of(pvc).get("finalizers") or ()) \
                    and not self._in_use(pvc):
                await self._release(_claim_path(meta_of(pvc).get("namespace", ""), meta_of(pvc).get("name", "")),
                                    pvc, PVC_PROTECTION)
            return
        if not self.binds:
            return
        meta, spec = meta_of(pvc), pvc.get("spec") or {}
        namespace, name = meta.get("namespace", ""), meta.get("name", "")
        if "storageClassName" not in spec:
            default = self.default_class()
            if default is not None:
                await self.client.patch(_claim_path(namespace, name), {
                    "metadata": {"resourceVersion": meta.get("resourceVersion")},
                    "spec": {"storageClassName": meta_of(default).get("name")}})
                return  # the update comes back as an event
        if (pvc.get("status") or {}).get("phase") == "Bound":
            return
        volume = self._find_volume(pvc)
        if volume is not None:
            await self._bind(pvc, volume)
            return
        if spec.get("volumeName"):
            return  # waits for the volume it names
        class_name = spec.get("storageClassName") or ""
        if not class_name:
            self.events.record("PersistentVolumeClaim", pvc, "FailedBinding",
                               "no persistent volumes available for this claim and no storage class is set")
            return
        sc = self.classes.items.get(class_name)
        if sc is None:
            self.events.record("PersistentVolumeClaim", pvc, "ProvisioningFailed",
                               f'storageclass.storage.k8s.io "{class_name}" not found', "Warning")
            return
        node = None
        if sc.get("volumeBindingMode") == "WaitForFirstConsumer":
            node = (meta.get("annotations") or {}).get(SELECTED_NODE) or self._consumers.get(key)
            if node is None:
                self._record_waiting(pvc)
                return
        provisioner = str(sc.get("provisioner") or "")
        if provisioner in ("", NO_PROVISIONER):
            self.events.record("PersistentVolumeClaim", pvc, "ProvisioningFailed",
                               f"no volume plugin matched name: {provisioner}", "Warning")
            return
        annotations = meta.get("annotations") or {}
        if annotations.get(STORAGE_PROVISIONER) != provisioner \
                or annotations.get(BETA_STORAGE_PROVISIONER) != provisioner:
            await self.client.patch(_claim_path(namespace, name), {"metadata": {
                "resourceVersion": meta.get("resourceVersion"),
                "annotations": {STORAGE_PROVISIONER: provisioner, BETA_STORAGE_PROVISIONER: provisioner}}})
            return  # handed on the updated claim's event
        self.events.record("PersistentVolumeClaim", pvc, "ExternalProvisioning",
                           f"Waiting for a volume to be created either by the external provisioner '{provisioner}' "
                           "or manually by the system administrator. If volume creation is delayed, please verify "
                           "that the provisioner is running and correctly registered.")
        if self._runs(provisioner):
            await self._provision(pvc, sc, node)

    def _runs(self, provisioner: str) -> bool:
        """Whether a provisioner runs here: a CSI driver registered (its CSIDriver object), or one
        ``serve --volume-provisioners`` names."""
        return EVERY_PROVISIONER in self.provisioners or provisioner in self.provisioners \
            or provisioner in self.drivers.items

    def _record_waiting(self, pvc: Obj) -> None:
        """Upstream's event about a claim of a class that waits for its first consumer."""
        meta = meta_of(pvc)
        pods = held_in(self.pods.items, meta.get("namespace", ""))
        waiting = sorted(str(meta_of(pod).get("name", "")) for pod in pods
                         if not (pod.get("spec") or {}).get("nodeName") and _mounts(pod, meta.get("name", "")))
        if not waiting:
            self.events.record("PersistentVolumeClaim", pvc, "WaitForFirstConsumer",
                               "waiting for first consumer to be created before binding")
        elif len(waiting) == 1:
            self.events.record("PersistentVolumeClaim", pvc, "WaitForPodScheduled",
                               f"waiting for pod {waiting[0]} to be scheduled")
        else:
            self.events.record("PersistentVolumeClaim", pvc, "WaitForPodScheduled",
                               f"waiting for pods {','.join(waiting)} to be scheduled")

    def _find_volume(self, pvc: Obj) -> Obj | None:
        meta, spec = meta_of(pvc), pvc.get("spec") or {}
        uid = meta.get("uid")
        named = spec.get("volumeName")
        if named:
            pv = self.volumes.items.get(named)
            ref = (pv or {}).get("spec", {}).get("claimRef")
            if pv is not None and (not ref or ref.get("uid") in (None, "", uid)):
                return pv
            return None
        want = _size((spec.get("resources") or {}).get("requests"))
        modes = set(spec.get("accessModes") or ())
        best: Obj | None = None
        for pv in self.volumes.items.values():
            pv_spec = pv.get("spec") or {}
            ref = pv_spec.get("claimRef")
            if ref:
                if ref.get("namespace") == meta.get("namespace") and ref.get("name") == meta.get("name") \
                        and ref.get("uid") in (None, "", uid):
                    return pv  # pre-bound to this claim
                continue
            if (pv.get("status") or {}).get("phase") != "Available" or meta_of(pv).get("deletionTimestamp"):
                continue
            if (pv_spec.get("storageClassName") or "") != (spec.get("storageClassName") or ""):
                continue
            if pv_spec.get("volumeMode", "Filesystem") != spec.get("volumeMode", "Filesystem"):
                continue
            if not modes <= set(pv_spec.get("accessModes") or ()):
                continue
            size = _size(pv_spec.get("capacity"))
            if want is None or size is None or size < want:
                continue
            if spec.get("selector") and not match_label_selector(spec["selector"],
                                                                   meta_of(pv).get("labels") or {}):
                continue
            if best is None or size < _size((best.get("spec") or {}).get("capacity")):
                best = pv
        return best

    async def _provision(self, pvc: Obj, sc: Obj, node: str | None) -> None:
        meta, spec = meta_of(pvc), pvc.get("spec") or {}
        namespace, name = meta.get("namespace", ""), meta.get("name", "")
        if node is not None and (meta.get("annotations") or {}).get(SELECTED_NODE) != node:
            await self.client.patch(_claim_path(namespace, name), {
                "metadata": {"resourceVersion": meta.get("resourceVersion"), "annotations": {SELECTED_NODE: node}}})
            return  # provisioned on the updated claim's event
        provisioner = sc["provisioner"]
        pv_name = f"pvc-{meta.get('uid')}"
        pv_spec: Obj = {
            "capacity": {"storage": (spec.get("resources") or {}).get("requests", {}).get("storage")},
            "accessModes": list(spec.get("accessModes") or ()),
            "persistentVolumeReclaimPolicy": sc.get("reclaimPolicy", "Delete"),
            "storageClassName": meta_of(sc).get("name"),
            "volumeMode": spec.get("volumeMode", "Filesystem"),
            "csi": {"driver": provisioner, "volumeHandle": pv_name, "fsType": "ext4"},
            "claimRef": {"kind": "PersistentVolumeClaim", "apiVersion": "v1", "namespace": namespace,
                         "name": name, "uid": meta.get("uid"), "resourceVersion": meta.get("resourceVersion")},
        }
        if sc.get("mountOptions"):
            pv_spec["mountOptions"] = sc["mountOptions"]
        if node is not None:
            pv_spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]}}
        self.events.record("PersistentVolumeClaim", pvc, "Provisioning",
                           f'External provisioner is provisioning volume for claim "{namespace}/{name}"')
        try:
            await self.client.create(_volume_path(), {
                "apiVersion": "v1", "kind": "PersistentVolume",
                "metadata": {"name": pv_name, "annotations": {"pv.kubernetes.io/provisioned-by": provisioner}},
                "spec": pv_spec})
        except ApiError as e:
            if e.code != 409:
                raise
            return  # provisioned already; binding follows the volume's event
        self.events.record("PersistentVolumeClaim", pvc, "ProvisioningSucceeded",
                           f"Successfully provisioned volume {pv_name}")

    async def _bind(self, pvc: Obj, pv: Obj) -> None:
        meta, spec = meta_of(pvc), pvc.get("spec") or {}
        namespace, name = meta.get("namespace", ""), meta.get("name", "")
        pv_meta, pv_spec = meta_of(pv), pv.get("spec") or {}
        pv_name = pv_meta.get("name", "")
        ref = pv_spec.get("claimRef") or {}
        if ref.get("uid") != meta.get("uid"):  # claim the volume first: two claims never share one
            await self.client.patch(_volume_path(pv_name), {
                "metadata": {"resourceVersion": pv_meta.get("resourceVersion")},
                "spec": {"claimRef": {"kind": "PersistentVolumeClaim", "apiVersion": "v1", "namespace": namespace,
                                      "name": name, "uid": meta.get("uid"),
                                      "resourceVersion": meta.get("resourceVersion")}}})
            return  # the volume's event brings the claim back here
        if (pv.get("status") or {}).get("phase") != "Bound":
            await self.client.patch(_volume_path(pv_name, "status"), {"status": {"phase": "Bound"}})
        annotations = meta.get("annotations") or {}
        if spec.get("volumeName") != pv_name or annotations.get("pv.kubernetes.io/bind-completed") != "yes":
            marks = {"pv.kubernetes.io/bind-completed": "yes"}
            if not spec.get("volumeName"):
                marks["pv.kubernetes.io/bound-by-controller"] = "yes"
            await self.client.patch(_claim_path(namespace, name), {
                "metadata": {"resourceVersion": meta.get("resourceVersion"), "annotations": marks},
                "spec": {"volumeName": pv_name}})
            return  # the status follows on the updated claim
        await self.client.patch(_claim_path(namespace, name, "status"), {"status": {
            "phase": "Bound", "accessModes": list(pv_spec.get("accessModes") or ()),
            "capacity": dict(pv_spec.get("capacity") or {})}})

    def _in_use(self, pvc: Obj) -> bool:
        """Whether a pod that has not ended mounts the claim (the pvc-protection controller's test)."""
        meta = meta_of(pvc)
        namespace, name = meta.get("namespace"), meta.get("name")
        for pod in held_in(self.pods.items, namespace or ""):
            if (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed") and _mounts(pod, name or ""):
                return True
        return False

    async def _release(self, path: str, obj: Obj, finalizer: str) -> None:
        """Remove a protection finalizer: the object may go."""
        meta = meta_of(obj)
        try:
            await self.client.patch(path, {"metadata": {
                "resourceVersion": meta.get("resourceVersion"),
                "finalizers": [f for f in meta.get("finalizers") or () if f != finalizer] or None}})
        except ApiError as e:
            if e.code != 404:
                raise

    async def sync_volume(self, name: str) -> None:
        pv = self.volumes.items.get(name)
        if pv is None:
            return
        if meta_of(pv).get("deletionTimestamp"):
            if self.protects_volumes and PV_PROTECTION in (meta_of(pv).get("finalizers") or ()) \
                    and (pv.get("status") or {}).get("phase") != "Bound":
                await self._release(_volume_path(name), pv, PV_PROTECTION)
            return
        if not self.binds:
            return
        spec, phase = pv.get("spec") or {}, (pv.get("status") or {}).get("phase")
        ref = spec.get("claimRef")
        if not ref:
            if phase != "Available":
                await self.client.patch(_volume_path(name, "status"), {"status": {"phase": "Available"}})
            return
        claim = self.claims.items.get(f"{ref.get('namespace', '')}/{ref.get('name', '')}")
        if claim is not None and ref.get("uid") in (None, "", meta_of(claim).get("uid")):
            return  # bound, or being bound by the claim's sync
        if phase == "Bound" or (phase == "Released" and claim is None):
            if spec.get("persistentVolumeReclaimPolicy") == "Delete" and phase == "Released":
                try:
                    await self.client.delete(_volume_path(name))
                except ApiError as e:
                    if e.code != 404:
                        raise
                return
            if phase != "Released":  # released first, then reclaimed (its event brings it back here)
                await self.client.patch(_volume_path(name, "status"), {"status": {
                    "phase": "Released", "reason": "", "message": ""}})
        elif phase in (None, "Pending"):
            await self.client.patch(_volume_path(name, "status"), {"status": {"phase": "Available"}})


async def start(client: Client, config: Config) -> None:
    """The component entry point (``controlplane/components.py``): the parts ``--controllers``
    turns on."""
    controller = VolumeController(client, provisioners=frozenset(config.volume_provisioners))
    controller.binds = config.controller_enabled("persistentvolume-binder-controller")
    controller.protects_claims = config.controller_enabled("persistentvolumeclaim-protection-controller")
    controller.protects_volumes = config.controller_enabled("persistentvolume-protection-controller")
    controller.collects = config.controller_enabled("garbage-collector-controller")
    await controller.run()
