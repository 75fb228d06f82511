"""VolumeBinding, as far as the persistent volume controller here needs it
(``controllers/volumes.py`` binds and provisions; this plugin makes pods wait for it).

PreFilter looks at the pod's PersistentVolumeClaims (``spec.volumes[].persistentVolumeClaim``):

- a claim that does not exist, or is being deleted, keeps the pod unschedulable
  (upstream's ``persistentvolumeclaim "data" not found``), until a claim event;
- a claim not bound yet whose StorageClass binds ``Immediate`` (or that has no class)
  keeps it unschedulable too (``pod has unbound immediate PersistentVolumeClaims``):
  the controller binds or provisions it, and that update requeues the pod;
- a claim not bound yet whose class is ``WaitForFirstConsumer`` lets the pod go.

PreBind, for those delayed claims, as upstream's ``BindPodVolumes``: each gets the
``volume.kubernetes.io/selected-node`` annotation naming the node chosen, for the
controller to bind or provision its volume there; then the pod waits, every second, until
every one is ``Bound``, and only then is bound itself. It waits outside the scheduler's
bound on binding cycles writing at once (``framework.BindSlot``): pods waiting for claims
that never bind do not hold up the others' bindings. A claim still unbound after
``bindTimeoutSeconds`` (600, upstream's VolumeBindingArgs default; its provisioner does not
run, say) fails the cycle with ``running PreBind plugin "VolumeBinding": binding volumes:
context deadline exceeded``, the pod back in the queue; so does a claim deleted or whose
annotation was reset meanwhile.

Filter: the volume of a bound claim may pin nodes (``spec.nodeAffinity.required``): a
node outside it gets ``node(s) had volume node affinity conflict``. A bound claim whose
volume this scheduler has not seen yet (its informer behind the claims') fails every node
with ``node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)``, as
upstream's ``checkBoundClaims``: the volume's event requeues the pod, which is never placed
without its volume's node affinity.

A pod without claims is skipped at PreFilter (one pass over its volumes).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import Any

from controlplane.client import ApiError, resource_path

from ...selectormatch import match_node_selector_terms
from ..framework import (
    ActionType,
    ClusterEvent,
    Code,
    CycleState,
    Handle,
    Status,
    WatchedResource,
    waiting_outside_the_bind_bound,
)
from ..nodeinfo import NodeInfo, PodInfo

__all__ = ["NAME", "VolumeBinding"]

NAME = "VolumeBinding"
UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"
NODE_CONFLICT = "node(s) had volume node affinity conflict"
PV_NOT_EXIST = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
SELECTED_NODE = "volume.kubernetes.io/selected-node"
BIND_TIMEOUT = 600.0  # upstream's VolumeBindingArgs.bindTimeoutSeconds default
POLL = 1.0  # upstream's BindPodVolumes checks the bindings every second
_TERMS = NAME + "/terms"
_MISSING = NAME + "/missing"
_DELAYED = NAME + "/delayed"  # the unbound claims of WaitForFirstConsumer classes, bound at PreBind


def claim_names(pod: Mapping[str, Any]) -> list[str]:
    return [str(v["persistentVolumeClaim"].get("claimName") or "")
            for v in (pod.get("spec") or {}).get("volumes") or ()
            if isinstance(v, dict) and isinstance(v.get("persistentVolumeClaim"), dict)]


class VolumeBinding:
    def __init__(self, handle: Handle, bind_timeout: float = BIND_TIMEOUT) -> None:
        self.handle = handle
        self.bind_timeout = bind_timeout

    @classmethod
    def build(cls, handle: Handle, args: Mapping[str, Any]) -> VolumeBinding:
        return cls(handle, float(args.get("bindTimeoutSeconds", BIND_TIMEOUT)))

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
        delayed: list[str] = []
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
                delayed.append(name)
                continue
            volume = volumes.get(str(bound))
            if volume is None:
                missing = True
                continue
            required = ((volume.get("spec") or {}).get("nodeAffinity") or {}).get("required") or {}
            if required.get("nodeSelectorTerms"):
                terms.append(required["nodeSelectorTerms"])
        state.write(_DELAYED, delayed)
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


    async def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        delayed: list[str] = state.get(_DELAYED) or []
        if not delayed:
            return None
        claims = self.handle.lister("persistentvolumeclaims")
        try:
            for name in delayed:
                claim = claims.get(f"{pod.namespace}/{name}")
                if claim is None or _bound(claim):
                    continue
                if ((claim.get("metadata") or {}).get("annotations") or {}).get(SELECTED_NODE) != node_name:
                    await self.handle.client.patch(
                        resource_path("", "v1", "persistentvolumeclaims", pod.namespace, name),
                        {"metadata": {"annotations": {SELECTED_NODE: node_name}}})
            deadline = time.monotonic() + self.bind_timeout
            unbound = self._unbound(delayed, pod, node_name)
            if unbound is True:
                # the wait is the controller's binding, not a write of ours: the other pods'
                # binding cycles go on meanwhile (upstream's run in goroutines of their own)
                async with waiting_outside_the_bind_bound(state):
                    while unbound is True:
                        if time.monotonic() >= deadline:
                            return _failed("context deadline exceeded")
                        await asyncio.sleep(min(POLL, max(0.0, deadline - time.monotonic())))
                        unbound = self._unbound(delayed, pod, node_name)
            return unbound if isinstance(unbound, Status) else self._fits(delayed, pod, node_name)
        except ApiError as e:
            return _failed(e.message)

    def _unbound(self, delayed: list[str], pod: PodInfo, node_name: str) -> Status | bool:
        """Whether a claim of ``delayed`` is still to be bound (True), every one is (False), or
        why the wait fails (a claim gone, or named for another node meanwhile)."""
        claims = self.handle.lister("persistentvolumeclaims")
        waiting = False
        for name in delayed:
            claim = claims.get(f"{pod.namespace}/{name}")
            if claim is None:
                return _failed(f'persistentvolumeclaim "{name}" not found')
            if _bound(claim):
                continue
            # (absent: the informer has not shown the annotation PreBind wrote yet)
            if ((claim.get("metadata") or {}).get("annotations") or {}).get(SELECTED_NODE) not in (None, node_name):
                return _failed(f'selectedNode annotation reset for PVC "{name}"')
            waiting = True
        return waiting

    def _fits(self, names: list[str], pod: PodInfo, node_name: str) -> Status | None:
        """Upstream's last check of checkBindings: each claim's volume may be used on the node
        (one provisioned for another node the claim named before is not)."""
        claims, volumes = self.handle.lister("persistentvolumeclaims"), self.handle.lister("persistentvolumes")
        node = self.handle.nodes().get(node_name)
        for name in names:
            volume_name = str(((claims.get(f"{pod.namespace}/{name}") or {}).get("spec") or {}).get("volumeName"))
            volume = volumes.get(volume_name)
            required = (((volume or {}).get("spec") or {}).get("nodeAffinity") or {}).get("required") or {}
            terms = required.get("nodeSelectorTerms")
            if terms and node is not None and not match_node_selector_terms(terms, node.labels, node.name):
                return _failed(f'pv "{volume_name}" node affinity doesn\'t match node "{node_name}": '
                               "no matching NodeSelectorTerms")
        return None


def _bound(claim: Mapping[str, Any]) -> bool:
    """Whether the controller has bound the claim (upstream's checkBindings: its volume named,
    the binding completed)."""
    return bool((claim.get("spec") or {}).get("volumeName")) and (claim.get("status") or {}).get("phase") == "Bound"


def _failed(reason: str) -> Status:
    return Status(Code.UNSCHEDULABLE, f'running PreBind plugin "{NAME}": binding volumes: {reason}', plugin=NAME)


def _uses_claims(pod: PodInfo, old: Any, new: Any) -> bool:
    return bool(claim_names(pod.obj))
