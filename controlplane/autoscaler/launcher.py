"""The cloud provider of the emulator, and a NodeClaim's life from launch to
termination, as Karpenter's lifecycle and termination controllers drive it.

- **Launch**: the cheapest instance type and offering the NodeClaim's
  requirements allow, that holds its requested resources, is "bought": the
  NodeClaim gets its labels, ``providerID``, capacity and allocatable, and
  ``Launched=True`` at once.
- **Registration**, the type's launch latency later: the Node is created
  (annotated ``kwok.x-k8s.io/node: fake`` for the node simulator to adopt;
  labelled with the NodePool, instance type, zone, capacity type, and the
  node simulator's topology: region, and a rack of the zone
  (``topology_labels``); the template's taints; owned by the NodeClaim;
  Karpenter's termination finalizer), then, for a type with GPUs, its
  ResourceSlice (resource.k8s.io/v1, one pool per node and driver). The
  NodeClaim gets ``nodeName`` and ``Registered``. The Node is created as
  Karpenter's KWOK provider creates it: capacity and allocatable, phase
  Pending, no conditions; its kubelet (the node simulator's ``node-initialize``
  stage, or a user's) posts the conditions, addresses and ``nodeInfo``.
- **Initialization**: once the Node is Ready and without the taints a starting node
  carries (``labels.EPHEMERAL_TAINTS``: kube-apiserver's ``not-ready`` one), it is labelled
  ``karpenter.sh/initialized`` and the NodeClaim gets ``Initialized`` and
  ``Ready`` True (startup taints are not applied, since nothing in the
  emulator would remove them). Without a kubelet it stays Registered.
- **Termination** (the NodeClaim deleted; its finalizer holds it): the Node is
  tainted ``karpenter.sh/disrupted:NoSchedule``, its pods evicted through
  ``pods/eviction`` and awaited until gone (see ``Launcher.drain``), its
  ResourceSlices and the Node deleted, then the finalizer removed.
"""

from __future__ import annotations

import asyncio
import logging
import time
import zlib
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from ..client import ApiError, Client, resource_path
from .catalog import Catalog, Offering, Option, provider_labels, resource_slices
from .crds import GROUP, NODECLAIMS, VERSION
from .labels import (
    CAPACITY_TYPE,
    DISRUPTED_TAINT,
    DO_NOT_DISRUPT,
    EPHEMERAL_TAINTS,
    FAKE_NODE_ANNOTATION,
    HOSTNAME,
    INITIALIZED,
    RACK,
    RACKS_PER_ZONE,
    REGION,
    REGION_NAME,
    REGISTERED,
    TERMINATION_FINALIZER,
    ZONE,
    rack_name,
)
from .nodepool import parse_duration
from .provisioner import choose
from .requirements import Requirements, tolerates
from .resources import format_quantity, parse_resources
from .state import ClusterState, is_reschedulable, key

__all__ = ["RETRY_FIRST", "RETRY_MAX", "Launcher", "condition", "generation_of", "now", "set_condition",
           "topology_labels"]

log = logging.getLogger(__name__)

Obj = dict[str, Any]

NODES = resource_path("", "v1", "nodes")
SLICES = resource_path("resource.k8s.io", "v1", "resourceslices")

DEFAULT_GRACE_SECONDS = 30.0  # a pod's terminationGracePeriodSeconds when it sets none
# how long past a pod's grace period its kubelet may take to remove it (and the informer to tell us)
GRACE_MARGIN_SECONDS = 5.0
EVICTION_RETRY_SECONDS = 1.0  # a drain's retry of an eviction its PodDisruptionBudget refused (429)
# the eviction API's refusal of a pod several PodDisruptionBudgets cover (a 500, as upstream's)
MULTIPLE_PDBS = "more than one PodDisruptionBudget"
STUCK_TERMINATING_SECONDS = 60.0  # a terminating pod this long past its deletion time is not waited for


def _namespace_terminating(e: ApiError) -> bool:
    """Whether a create was refused because its namespace is being deleted (the 403 of
    upstream's NamespaceLifecycle, with its ``NamespaceTerminating`` cause)."""
    causes = (e.status.get("details") or {}).get("causes") or ()
    return e.code == 403 and any(isinstance(c, dict) and c.get("reason") == "NamespaceTerminating" for c in causes)


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def condition(obj: Obj, ctype: str) -> Obj | None:
    for c in (obj.get("status") or {}).get("conditions") or ():
        if c.get("type") == ctype:
            return dict(c)
    return None


def generation_of(obj: Obj) -> int | None:
    """The object's ``metadata.generation``, which a condition Karpenter sets observes (operatorpkg)."""
    generation = (obj.get("metadata") or {}).get("generation")
    return generation if isinstance(generation, int) else None


def set_condition(conditions: list[Obj], ctype: str, status: str, reason: str, message: str = "",
                  generation: int | None = None) -> list[Obj]:
    """``conditions`` with ``ctype`` set; its lastTransitionTime changes only with its status."""
    out = [dict(c) for c in conditions]
    for c in out:
        if c.get("type") == ctype:
            if c.get("status") != status:
                c["lastTransitionTime"] = now()
            c.update(status=status, reason=reason, message=message)
            if generation is not None:
                c["observedGeneration"] = generation
            return out
    c = {"type": ctype, "status": status, "reason": reason, "message": message, "lastTransitionTime": now()}
    if generation is not None:
        c["observedGeneration"] = generation
    out.append(c)
    return out


def topology_labels(name: str, zone: str, reqs: Requirements) -> dict[str, str]:
    """The region and rack labels of node ``name`` launched in ``zone``, as the node
    simulator gives its own nodes: the region, and a rack of the zone chosen by a
    hash of the name (the same name, the same rack), the first from there that
    ``reqs`` allow. A label whose requirement allows none of these values is left
    out (the labels ``reqs`` pin are the NodeClaim's anyway)."""
    out: dict[str, str] = {}
    region = reqs.get(REGION)
    if region is None or region.allows(REGION_NAME):
        out[REGION] = REGION_NAME
    rack = reqs.get(RACK)
    start = zlib.crc32(name.encode())
    for i in range(RACKS_PER_ZONE):
        candidate = rack_name(zone, start + i)
        if rack is None or rack.allows(candidate):
            out[RACK] = candidate
            break
    return out


def claim_path(name: str | None = None, subresource: str | None = None) -> str:
    return resource_path(GROUP, VERSION, NODECLAIMS, None, name, subresource)


EventSink = Callable[[str, Obj, str, str, str], None]

RETRY_FIRST = 1.0  # a failed launch's or termination's first retry, in seconds (doubling after each failure)
RETRY_MAX = 60.0


class Launcher:
    def __init__(self, client: Client, catalog: Catalog, state: ClusterState, *,
                 drain_timeout: float = 30.0, latency_scale: float = 1.0,
                 on_registered: Callable[[Obj, float], None] | None = None,
                 on_event: EventSink | None = None) -> None:
        self.client = client
        self.catalog = catalog
        self.state = state
        self.drain_timeout = drain_timeout
        self.latency_scale = latency_scale
        self.on_registered = on_registered or (lambda claim, seconds: None)
        # (kind, object, reason, message, type): the termination's events, as Karpenter's terminator
        self.on_event: EventSink = on_event or (lambda kind, obj, reason, message, type_: None)
        self._tasks: dict[str, asyncio.Task[None]] = {}  # claim name -> its launch or termination
        # claim name -> what a launch waiting for its instance, or for its Node to turn Ready, awaits
        # (the time, node_changed, a deletion)
        self._waiting: dict[str, asyncio.Future[None]] = {}
        self._failures: dict[str, int] = {}  # claim name -> its failed launches or terminations in a row
        self._stopped = False

    def reconcile(self, claim: Obj) -> None:
        """Start what ``claim`` needs next, unless already under way."""
        name = key(claim)
        meta = claim.get("metadata") or {}
        if name in self._tasks:
            if meta.get("deletionTimestamp"):
                self._wake(name)  # a launch waiting for its Node gives way to the termination (_done)
            return
        work = None
        if meta.get("deletionTimestamp"):
            if TERMINATION_FINALIZER in (meta.get("finalizers") or ()):
                work = self._terminate(name)
        elif (condition(claim, "Registered") or {}).get("status") != "True":
            work = self._launch(name)
        elif (condition(claim, "Initialized") or {}).get("status") != "True":
            work = self._initialize(name, claim)
        if work is not None:
            kind = "terminate" if meta.get("deletionTimestamp") else "launch"
            task = asyncio.create_task(work, name=f"{kind} nodeclaim {name}")
            self._tasks[name] = task
            task.add_done_callback(lambda t, n=name: self._done(n, t))  # type: ignore[misc]

    def _done(self, name: str, task: asyncio.Task[None]) -> None:
        self._tasks.pop(name, None)
        self._waiting.pop(name, None)
        if task.cancelled():
            return
        failed = task.exception() is not None
        claim = self.state.nodeclaims.get(name)
        if claim is not None and (claim.get("metadata") or {}).get("deletionTimestamp") and \
                not task.get_name().startswith("terminate "):
            if failed:
                log.warning("nodeclaim %s: %r", name, task.exception())
            self.reconcile(claim)  # deleted while it launched: its termination starts now
        elif failed:
            # again after a delay that doubles with each failure in a row, as Karpenter's controllers
            # requeue: the NodeClaim may get no event of its own (Registered, never Initialized)
            n = self._failures.get(name, 0)
            self._failures[name] = n + 1
            delay = min(RETRY_FIRST * 2 ** n, RETRY_MAX)
            log.warning("nodeclaim %s: %r; again in %.1f s", name, task.exception(), delay)
            asyncio.get_running_loop().call_later(delay, self._retry, name)
        else:
            self._failures.pop(name, None)

    def _retry(self, name: str) -> None:
        claim = self.state.nodeclaims.get(name)
        if claim is None:
            self._failures.pop(name, None)
        elif not self._stopped:
            self.reconcile(claim)

    def node_changed(self, node: Obj) -> None:
        """A Node was added or changed: a launch waiting for it to turn Ready goes on."""
        if _node_initializable(node):
            self._wake(self.state.claim_of.get(key(node), key(node)))

    def _wake(self, name: str) -> None:
        waiter = self._waiting.pop(name, None)
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def stop(self) -> None:
        self._stopped = True
        for t in list(self._tasks.values()):
            t.cancel()
        await asyncio.gather(*self._tasks.values(), return_exceptions=True)

    # -- launch and registration ------------------------------------------------------------------
    async def _launch(self, name: str) -> None:
        started = asyncio.get_running_loop().time()
        claim = self.state.nodeclaims.get(name)
        if claim is None:
            return
        launched = (condition(claim, "Launched") or {}).get("status") == "True"
        option = self.catalog.get(((claim.get("metadata") or {}).get("labels") or {}).get(
            "node.kubernetes.io/instance-type", ""))
        if not launched or option is None:
            chosen = choose(self.catalog, claim)
            if chosen is None:
                await self._fail_launch(claim, "no instance type in the catalog satisfies the requirements")
                return
            option, offering = chosen
            claim = await self._mark_launched(claim, option, offering)
        latency = option.type.launch_latency_seconds * self.latency_scale
        await self._until(name, claim, started + latency)
        # (the informer's copy may not have the Launched write yet: registering from it would drop it)
        claim = _newer(self.state.nodeclaims.get(name), claim)
        if (claim.get("metadata") or {}).get("deletionTimestamp"):
            return
        claim = await self._register(claim, option)
        self.on_registered(claim, asyncio.get_running_loop().time() - started)
        await self._initialize(name, claim)

    async def _until(self, name: str, claim: Obj, when: float) -> None:
        """Wait until the loop's time ``when`` (the instance is up), or until the NodeClaim is
        deleted (``reconcile`` wakes it): a claim deleted while it launches is terminated at
        once, as Karpenter's, not once its launch latency is over."""
        loop = asyncio.get_running_loop()
        while loop.time() < when:
            if (_newer(self.state.nodeclaims.get(name), claim).get("metadata") or {}).get("deletionTimestamp"):
                return
            waiter: asyncio.Future[None] = loop.create_future()
            self._waiting[name] = waiter
            try:
                await asyncio.wait_for(waiter, when - loop.time())
            except TimeoutError:
                return
            finally:
                if self._waiting.get(name) is waiter:
                    del self._waiting[name]

    async def _fail_launch(self, claim: Obj, message: str) -> None:
        status = dict(claim.get("status") or {})
        status["conditions"] = set_condition(status.get("conditions") or [], "Launched", "False",
                                             "LaunchFailed", message, generation=generation_of(claim))
        await self.client.patch(claim_path(key(claim), "status"), {"status": status})
        log.warning("nodeclaim %s: %s", key(claim), message)
        # Karpenter deletes a NodeClaim that cannot launch; the pods go back to provisioning
        await self._delete(claim_path(key(claim)))

    async def _mark_launched(self, claim: Obj, option: Option, offering: Offering) -> Obj:
        name = key(claim)
        reqs = Requirements.parse((claim.get("spec") or {}).get("requirements"))
        labels = {**topology_labels(name, offering.zone, reqs), **reqs.labels(), **option.type.labels(),
                  **provider_labels(option.type), CAPACITY_TYPE: offering.capacity_type, ZONE: offering.zone}
        claim = await self.client.patch(claim_path(name), {"metadata": {"labels": labels}})
        capacity = option.type.capacity()
        status = dict(claim.get("status") or {})
        status.update(providerID=f"kwok://{name}", imageID="kwok://emulated", capacity=capacity,
                      allocatable=dict(capacity))
        conditions = status.get("conditions") or []
        generation = generation_of(claim)
        conditions = set_condition(conditions, "Launched", "True", "Launched", generation=generation)
        for ctype in ("Registered", "Initialized", "Ready"):
            if condition({"status": {"conditions": conditions}}, ctype) is None:
                conditions = set_condition(conditions, ctype, "Unknown", "AwaitingReconciliation",
                                           "object is awaiting reconciliation", generation=generation)
        status["conditions"] = conditions
        return await self.client.patch(claim_path(name, "status"), {"status": status})

    async def _register(self, claim: Obj, option: Option) -> Obj:
        """Create the Node (as Karpenter's KWOK provider: no conditions, phase Pending; its
        kubelet posts the rest) and its ResourceSlices; the NodeClaim, Registered, returned."""
        name = key(claim)
        meta = claim.get("metadata") or {}
        spec = claim.get("spec") or {}
        labels = {**(meta.get("labels") or {}), HOSTNAME: name, REGISTERED: "true"}
        capacity = option.type.capacity()
        node = {
            "apiVersion": "v1", "kind": "Node",
            "metadata": {
                "name": name, "labels": labels,
                # Karpenter's registration copies all the NodeClaim's annotations (the NodePool
                # template's and its own) and labels onto the Node
                "annotations": {FAKE_NODE_ANNOTATION: "fake", **(meta.get("annotations") or {})},
                "finalizers": [TERMINATION_FINALIZER],
                "ownerReferences": [{"apiVersion": f"{GROUP}/{VERSION}", "kind": "NodeClaim", "name": name,
                                     "uid": meta.get("uid", ""), "blockOwnerDeletion": True}],
            },
            "spec": {"providerID": f"kwok://{name}", **({"taints": spec["taints"]} if spec.get("taints") else {})},
            "status": {"capacity": capacity, "allocatable": dict(capacity), "phase": "Pending"},
        }
        try:
            created = await self.client.create(NODES, node)
        except ApiError as e:
            if e.code != 409:
                raise
            created = await self.client.get(f"{NODES}/{name}")
        if not (created.get("status") or {}).get("allocatable"):
            # a create may drop the status (as the API does for most types): the kubelet then posts it
            created = await self.client.patch(f"{NODES}/{name}/status", {"status": node["status"]})
        status = dict(claim.get("status") or {})
        conditions = set_condition(status.get("conditions") or [], "Registered", "True", "Registered",
                                   generation=generation_of(claim))
        status.update(nodeName=name, conditions=conditions, lastPodEventTime=now())
        registered, *_ = await asyncio.gather(
            self.client.patch(claim_path(name, "status"), {"status": status}),
            *(self._publish_slice(body) for body in resource_slices(
                name, option.type, (created.get("metadata") or {}).get("uid", ""))))
        registered_claim: Obj = registered
        return registered_claim

    async def _initialize(self, name: str, claim: Obj) -> None:
        """Once the claim's Node is Ready (its kubelet says so), label it initialized and the
        NodeClaim Initialized and Ready, as Karpenter's initialization; wait until then."""
        node_name = (claim.get("status") or {}).get("nodeName") or name
        while True:
            claim = _newer(self.state.nodeclaims.get(name), claim)
            if (claim.get("metadata") or {}).get("deletionTimestamp"):
                return
            node = self.state.nodes.get(node_name)
            if node is not None and _node_initializable(node):
                break
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiting[name] = waiter
            await waiter
        if ((node.get("metadata") or {}).get("labels") or {}).get(INITIALIZED) != "true":
            await self.client.patch(f"{NODES}/{node_name}", {"metadata": {"labels": {INITIALIZED: "true"}}})
        status = dict(claim.get("status") or {})
        generation = generation_of(claim)
        conditions = set_condition(status.get("conditions") or [], "Initialized", "True", "Initialized",
                                   generation=generation)
        conditions = set_condition(conditions, "Ready", "True", "Ready", generation=generation)
        await self.client.patch(claim_path(name, "status"), {"status": {"conditions": conditions}})

    async def _publish_slice(self, body: Obj) -> None:
        try:
            await self.client.create(SLICES, body)
        except ApiError as e:
            if e.code != 409:
                raise

    # -- termination ------------------------------------------------------------------------------
    async def _terminate(self, name: str) -> None:
        claim = self.state.nodeclaims.get(name)
        if claim is None:
            return
        node_name = (claim.get("status") or {}).get("nodeName") or name
        node = self.state.nodes.get(node_name)
        if node is not None:
            # Karpenter's termination conditions: Drained Unknown while draining, then Drained,
            # VolumesDetached (none here) and InstanceTerminating True
            if condition(claim, "Drained") is None:
                claim = await self._set_conditions(claim, [("Drained", "Unknown", "Draining", "Draining")])
            await self.drain(node, _grace_deadline(claim))
            claim = _newer(self.state.nodeclaims.get(name), claim)
            await self._set_conditions(claim, [(c, "True", c, "") for c in
                                               ("Drained", "VolumesDetached", "InstanceTerminating")])
            node = self.state.nodes.get(node_name, node)
            await asyncio.gather(self._remove_finalizer(f"{NODES}/{node_name}", node),
                                 *(self._delete(f"{SLICES}/{key(s)}") for s in self.state.slices_of(node_name)))
            await self._delete(f"{NODES}/{node_name}")
        claim = _newer(self.state.nodeclaims.get(name), claim)
        await self._remove_finalizer(claim_path(name), claim)

    async def _set_conditions(self, claim: Obj, conditions: list[tuple[str, str, str, str]]) -> Obj:
        """``claim`` with ``conditions`` (type, status, reason, message) set in its status; as it was if
        it is gone."""
        current = (claim.get("status") or {}).get("conditions") or []
        for ctype, status, reason, message in conditions:
            current = set_condition(current, ctype, status, reason, message, generation=generation_of(claim))
        try:
            patched: Obj = await self.client.patch(claim_path(key(claim), "status"),
                                                   {"status": {"conditions": current}})
        except ApiError as e:
            if e.code != 404:
                raise
            return claim
        return patched

    async def drain(self, node: Obj, deadline: float | None = None) -> None:
        """Taint the node, evict its pods, and wait until every pod bound to it has
        gone (those evicted now and those already terminating). Its Node must not be
        deleted before: its kubelet would go with it and leave them Terminating for
        ever. As Karpenter's terminator without a ``terminationGracePeriod``, the wait
        has no end: an eviction refused by a PodDisruptionBudget (429) is tried again
        every ``EVICTION_RETRY_SECONDS``, and a pod annotated
        ``karpenter.sh/do-not-disrupt: "true"`` is not evicted, only waited for (its
        annotation removed, it is evicted). A terminating pod is waited for until a
        minute past its deletion time (Karpenter's "stuck terminating": its kubelet
        is gone). After ``drain_timeout`` a blocked drain is logged, once.

        ``deadline`` (wall clock, from the NodeClaim's ``terminationGracePeriod``)
        bounds it: refused evictions are retried until then, and the pods still there
        are then deleted, whatever their budgets and annotations say, as Karpenter's
        terminator does once the grace period has elapsed."""
        if deadline is not None:
            await self._drain_until(node, deadline)
            return
        name = key(node)
        await self._taint(name, node)
        loop = asyncio.get_running_loop()
        started, next_eviction, warned = loop.time(), 0.0, False
        while self._occupied(name, stuck_after=STUCK_TERMINATING_SECONDS):
            if loop.time() >= next_eviction:
                pods = [p for p in self.state.pods_of(name) if _drainable(p) and not _do_not_disrupt(p)]
                await asyncio.gather(*(self._evict_once(p) for p in pods))
                next_eviction = loop.time() + EVICTION_RETRY_SECONDS
                self._failed_draining(node)
            if not warned and loop.time() - started > self.drain_timeout:
                warned = True
                log.warning("node %s: drain blocked for %.0f s (disruption budgets, do-not-disrupt pods or long "
                            "grace periods); waiting, as Karpenter does without a terminationGracePeriod",
                            name, self.drain_timeout)
            await asyncio.sleep(0.1)  # the informer empties both indexes; polling them is simplest

    async def _taint(self, name: str, node: Obj) -> None:
        await self.taint(name, node, True)

    async def taint(self, name: str, node: Obj, disrupted: bool) -> None:
        """Put ``karpenter.sh/disrupted:NoSchedule`` on node ``name`` (or, not ``disrupted``, take it
        off), as Karpenter's ``RequireNoScheduleTaint``."""
        taints = list((node.get("spec") or {}).get("taints") or [])
        has = any(t.get("key") == DISRUPTED_TAINT["key"] for t in taints)
        if has == disrupted:
            return
        if disrupted:
            taints.append(dict(DISRUPTED_TAINT))
        else:
            taints = [t for t in taints if t.get("key") != DISRUPTED_TAINT["key"]]
        try:
            await self.client.patch(f"{NODES}/{name}", {"spec": {"taints": taints}})
        except ApiError as e:
            if e.code != 404:
                raise

    async def _drain_until(self, node: Obj, deadline: float) -> None:
        """``drain`` bounded by the NodeClaim's terminationGracePeriod: evictions (not of
        do-not-disrupt pods) retried until ``deadline``, then the pods left deleted."""
        name = key(node)
        await self._taint(name, node)
        loop = asyncio.get_running_loop()
        until = loop.time() + max(0.0, deadline - time.time())
        pods = [p for p in self.state.pods_of(name) if is_reschedulable(p) and _drainable(p)]
        await asyncio.gather(*(self.evict(p, until) for p in pods if not _do_not_disrupt(p)))
        while loop.time() < until and self._occupied(name):
            self._failed_draining(node)
            await asyncio.sleep(0.1)
        left = [p for p in (*self.state.pods_of(name), *self.state.terminating_pods_of(name)) if _drainable(p)]
        if not left:
            return
        log.info("node %s: terminationGracePeriod elapsed: deleting its %d pods", name, len(left))
        for p in left:
            meta = p.get("metadata") or {}
            if not meta.get("deletionTimestamp"):
                await self._delete(resource_path("", "v1", "pods", meta.get("namespace"), meta.get("name")))
        limit = max(_grace(p) for p in left) + GRACE_MARGIN_SECONDS
        end = loop.time() + limit
        while loop.time() < end and self._occupied(name):  # noqa: ASYNC110
            await asyncio.sleep(0.1)

    def _failed_draining(self, node: Obj) -> None:
        """Karpenter's ``FailedDraining`` on a Node whose pods are still there."""
        name = key(node)
        waiting = sum(1 for p in (*self.state.pods_of(name), *self.state.terminating_pods_of(name)) if _drainable(p))
        if waiting:
            self.on_event("Node", self.state.nodes.get(name, node), "FailedDraining",
                          f"Failed to drain node, {waiting} pods are waiting to be evicted", "Warning")

    def _occupied(self, name: str, stuck_after: float | None = None) -> bool:
        """Whether pods are still bound to node ``name``: running ones that must go elsewhere, or
        terminating ones (with ``stuck_after``, not those that many seconds past their deletion time);
        not those that tolerate the disrupted taint (``_drainable``)."""
        if any(_drainable(p) for p in self.state.pods_of(name)):
            return True
        if stuck_after is None:
            return any(_drainable(p) for p in self.state.terminating_pods_of(name))
        now = time.time()
        return any(_drainable(p) and not _stuck(p, now, stuck_after) for p in self.state.terminating_pods_of(name))

    async def _evict_once(self, pod: Obj) -> bool:
        """One eviction of ``pod``: done or gone (404, 409): False; refused by its budget (429, or the
        500 of several budgets): True, with Karpenter's ``FailedDraining`` event on the node. A done
        one gets Karpenter's ``Evicted`` event."""
        meta = pod.get("metadata") or {}
        try:
            await self.client.create(
                resource_path("", "v1", "pods", meta.get("namespace"), meta.get("name"), "eviction"),
                {"apiVersion": "policy/v1", "kind": "Eviction",
                 "metadata": {"name": meta.get("name"), "namespace": meta.get("namespace")}})
        except ApiError as e:
            # several budgets: the eviction API's 500, which Karpenter retries as it does a 429
            several = e.code == 500 and MULTIPLE_PDBS in str(e.message)
            if _namespace_terminating(e):
                # NamespaceLifecycle's 403: Karpenter logs it and tries again; the namespace's
                # deletion takes the pod meanwhile, and the next eviction finds it gone
                log.info("evicting %s/%s: %s", meta.get("namespace"), meta.get("name"), e.message)
                return True
            if e.code not in (404, 409, 429) and not several:
                raise
            if e.code in (404, 409):
                return False
            node = self.state.nodes.get((pod.get("spec") or {}).get("nodeName") or "")
            if node is not None:
                why = "eviction does not support multiple PDBs" if several else "evicting pod violates a PDB"
                self.on_event("Node", node, "FailedDraining", f"Failed to drain node, {why} "
                              f"(Pod={meta.get('namespace')}/{meta.get('name')})", "Warning")
            return True
        self.on_event("Pod", pod, "Evicted", f"Evicted pod: {self._eviction_reason(pod)}", "Normal")
        return False

    def _eviction_reason(self, pod: Obj) -> str:
        """Why a pod is evicted, as Karpenter's: its NodeClaim's ``DisruptionReason`` (Underutilized,
        Empty, Drifted), else "Forceful Termination" (a NodeClaim deleted, expired)."""
        claim = self.state.nodeclaim_of_node((pod.get("spec") or {}).get("nodeName") or "")
        cond = condition(claim, "DisruptionReason") if claim is not None else None
        if cond is not None and cond.get("status") == "True" and cond.get("reason"):
            return str(cond["reason"])
        return "Forceful Termination"

    async def evict(self, pod: Obj, until: float) -> None:
        """Evict ``pod``; a refusal for its PodDisruptionBudget (429) is retried every
        ``EVICTION_RETRY_SECONDS`` until ``until`` (loop time), as Karpenter's terminator
        retries, then given up (the drain's deadline deletes what is left)."""
        loop = asyncio.get_running_loop()
        while True:
            if not await self._evict_once(pod) or loop.time() >= until:
                return
            await asyncio.sleep(EVICTION_RETRY_SECONDS)

    async def _remove_finalizer(self, path: str, obj: Obj) -> None:
        finalizers = [f for f in (obj.get("metadata") or {}).get("finalizers") or () if f != TERMINATION_FINALIZER]
        try:
            await self.client.patch(path, {"metadata": {"finalizers": finalizers}})
        except ApiError as e:
            if e.code != 404:
                raise

    async def _delete(self, path: str) -> None:
        try:
            await self.client.delete(path)
        except ApiError as e:
            if e.code != 404:
                raise


def _node_ready(node: Obj) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (node.get("status") or {}).get("conditions") or ())


def _node_initializable(node: Obj) -> bool:
    """Ready, and without the taints of a starting node (Karpenter's initialization waits for
    ``KnownEphemeralTaintsRemoved``: the not-ready one kube-apiserver gave it at its create goes
    when the node lifecycle controller sees it Ready, or at once if it saw it first)."""
    return _node_ready(node) and not any((t.get("key"), t.get("effect")) in EPHEMERAL_TAINTS
                                         for t in (node.get("spec") or {}).get("taints") or ())


def _newer(a: Obj | None, b: Obj) -> Obj:
    """Of two versions of an object, the later (by resourceVersion): the informer's may lag a write."""
    if a is None:
        return b
    try:
        rv_a = int((a.get("metadata") or {}).get("resourceVersion") or 0)
        rv_b = int((b.get("metadata") or {}).get("resourceVersion") or 0)
    except ValueError:
        return a
    return a if rv_a >= rv_b else b


def _drainable(pod: Obj) -> bool:
    """Whether a drain evicts and waits for ``pod``: not if it tolerates the disrupted taint
    (Karpenter's ``IsDrainable``: it could be scheduled straight back; it goes with the node)."""
    return not tolerates((pod.get("spec") or {}).get("tolerations"), DISRUPTED_TAINT)


def _do_not_disrupt(pod: Obj) -> bool:
    return ((pod.get("metadata") or {}).get("annotations") or {}).get(DO_NOT_DISRUPT) == "true"


def _grace_deadline(claim: Obj) -> float | None:
    """When (wall clock) the NodeClaim's ``terminationGracePeriod`` ends: its deletion
    time plus the period; None without one."""
    period = (claim.get("spec") or {}).get("terminationGracePeriod")
    if not period:
        return None
    try:
        seconds = parse_duration(period)
    except ValueError:
        return None
    if seconds is None:
        return None
    deleted = (claim.get("metadata") or {}).get("deletionTimestamp")
    try:
        start = datetime.strptime(deleted, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp() if deleted \
            else time.time()
    except ValueError:
        start = time.time()
    return start + seconds


def _stuck(pod: Obj, now: float, after: float) -> bool:
    """Whether a terminating pod is ``after`` seconds past its deletion time (Karpenter's
    ``IsStuckTerminating``: its kubelet will not remove it)."""
    deleted = (pod.get("metadata") or {}).get("deletionTimestamp")
    try:
        at = datetime.strptime(str(deleted), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()
    except ValueError:
        return False
    return now > at + after


def _grace(pod: Obj) -> float:
    """The seconds its kubelet has to stop the pod: what its deletion set, else its spec's."""
    meta = pod.get("metadata") or {}
    seconds = meta.get("deletionGracePeriodSeconds")
    if seconds is None:
        seconds = (pod.get("spec") or {}).get("terminationGracePeriodSeconds")
    return float(seconds) if isinstance(seconds, int | float) else DEFAULT_GRACE_SECONDS


def capacity_of(claim: Obj) -> dict[str, int]:
    return parse_resources((claim.get("status") or {}).get("capacity"))


def quantities(r: dict[str, int]) -> dict[str, str]:
    return {k: format_quantity(k, v) for k, v in sorted(r.items()) if not k.startswith("devices/")}
