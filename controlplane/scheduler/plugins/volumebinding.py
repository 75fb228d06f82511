"""VolumeBinding, as far as the persistent volume controller here needs it
(``controllers/volumes.py`` binds and provisions; this plugin makes pods wait for it).

PreFilter looks at the pod's PersistentVolumeClaims (``spec.volumes[].persistentVolumeClaim``):

- a claim that does not exist, or is being deleted, keeps the pod unschedulable
  (upstream's ``persistentvolumeclaim "data" not found``), until a claim event;
- a claim not bound yet whose StorageClass binds ``Immediate`` (or that has no class)
  keeps it unschedulable too (``pod has unbound immediate PersistentVolumeClaims``):
  the controller binds or provisions it, and that update requeues the pod;
- a claim not bound yet whose class is ``WaitForFirstConsumer`` lets the pod go: the
  controller provisions its volume for the node the pod lands on.

Filter: the volume of a bound claim may pin nodes (``spec.nodeAffinity.required``): a
node outside it gets ``node(s) had volume node affinity conflict``. A bound claim whose
volume this scheduler has not seen yet (its informer behind the claims') fails every node
with ``node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)``, as
upstream's ``checkBoundClaims``: the volume's event requeues the pod, which is never placed
without its volume's node affinity.

A pod without claims is skipped at PreFilter (one pass over its volumes).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..framework import ActionType, ClusterEvent, Code, CycleState, Handle, Status, WatchedResource
from ..nodeinfo import NodeInfo, PodInfo
from .selectors import match_node_selector_terms

__all__ = ["NAME", "VolumeBinding"]

NAME = "VolumeBinding"
UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"
NODE_CONFLICT = "node(s) had volume node affinity conflict"
PV_NOT_EXIST = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
_TERMS = NAME + "/terms"
_MISSING = NAME + "/missing"


def claim_names(pod: Mapping[str, Any]) -> list[str]:
    return [str(v["persistentVolumeClaim"].get("claimName") or "")
            for v in (pod.get("spec") or {}).get("volumes") or ()
            if isinstance(v, dict) and isinstance(v.get("persistentVolumeClaim"), dict)]


class VolumeBinding:
    def __init__(self, handle: Handle) -> None:
        self.handle = handle

    @classmethod
    def build(cls, handle: Handle, args: Mapping[str, Any]) -> VolumeBinding:
        return cls(handle)

    def name(self) -> str:
        return NAME

    def resources_to_watch(self) -> list[WatchedResource]:
        return [WatchedResource("", "v1", "persistentvolumeclaims"),
                WatchedResource("", "v1", "persistentvolumes", namespaced=False),
                WatchedResource("storage.k8s.io", "v1", "storageclasses", namespaced=False)]

    def events_to_register(self) -> list[ClusterEvent]:
        changed = ActionType.ADD | ActionType.UPDATE
        return [ClusterEvent("persistentvolumeclaims", changed, _uses_claims),
                ClusterEvent("persistentvolumes", changed, _uses_claims),
                ClusterEvent("storageclasses", changed, _uses_claims)]

    def pre_filter(self, state: CycleState, pod: PodInfo) -> Status | None:
        names = claim_names(pod.obj)
        if not names:
            state.skip_filter.add(NAME)
            return Status(Code.SKIP)
        claims, volumes = self.handle.lister("persistentvolumeclaims"), self.handle.lister("persistentvolumes")
        classes = self.handle.lister("storageclasses")
        terms: list[list[dict[str, Any]]] = []
        missing = False  # a bound claim's volume not in the informer yet
        for name in names:
            claim = claims.get(f"{pod.namespace}/{name}")
            if claim is None:
                return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, f'persistentvolumeclaim "{name}" not found',
                              plugin=NAME)
            if (claim.get("metadata") or {}).get("deletionTimestamp"):
                return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                              f'persistentvolumeclaim "{name}" is being deleted', plugin=NAME)
            spec = claim.get("spec") or {}
            bound = spec.get("volumeName") if (claim.get("status") or {}).get("phase") == "Bound" else None
            if not bound:
                sc = classes.get(str(spec.get("storageClassName") or ""))
                if sc is None or sc.get("volumeBindingMode") != "WaitForFirstConsumer":
                    return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, UNBOUND_IMMEDIATE, plugin=NAME)
                continue
            volume = volumes.get(str(bound))
            if volume is None:
                missing = True
                continue
            required = ((volume.get("spec") or {}).get("nodeAffinity") or {}).get("required") or {}
            if required.get("nodeSelectorTerms"):
                terms.append(required["nodeSelectorTerms"])
        if not terms and not missing:
            state.skip_filter.add(NAME)
            return Status(Code.SKIP)
        state.write(_TERMS, terms)
        state.write(_MISSING, missing)
        return None

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        if state.read(_MISSING):
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, PV_NOT_EXIST, plugin=NAME)
        for terms in state.read(_TERMS):
            if not match_node_selector_terms(terms, node.labels, node.name):
                return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, NODE_CONFLICT, plugin=NAME)
        return None


def _uses_claims(pod: PodInfo, old: Any, new: Any) -> bool:
    return bool(claim_names(pod.obj))
