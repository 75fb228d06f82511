"""The autoscaler: informers in, decisions out, all through the API.

``Autoscaler(client, catalog).run()`` installs the karpenter.sh CRDs, starts
informers on pods, nodes, NodePools, NodeClaims, the DRA objects and the
PodGroups, then runs three loops:

- **provisioning**: a batch opens when a pod becomes provisionable and closes
  after ``batch_idle`` seconds without another (1 s) or ``batch_max`` after it
  opened (10 s), as Karpenter's batcher; then the pending pods are simulated
  (``Provisioner``), a gang's new nodes pinned to one topology domain
  (``one_domain``), and a NodeClaim is created for each new node of the plan;
- **disruption**, every ``disruption_interval``: ``Disruption.decide``, then
  delete NodeClaims or launch their replacements first;
- **status**, every ``status_interval``: NodePool hash annotations and status
  (nodes, resources), NodeClaim hash stamps and ``Drifted`` conditions, the
  nodes-by-state gauge.

A pass that fails (an API error, a client timeout under load) is logged and its loop
goes on, as Karpenter's controllers requeue: one failed write never stops the
autoscaler (its component task would end, and nothing would start it again).

The ``Launcher`` plays the cloud provider and the NodeClaim lifecycle.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from ..client import ApiError, Client, InformerHandle, resource_path
from ..client.workqueue import WorkQueue
from ..controllers.events import Recorder
from ..metrics import AUTOSCALER_NODECLAIMS_CREATED as NODECLAIMS_CREATED
from ..metrics import AUTOSCALER_NODECLAIMS_DISRUPTED as NODECLAIMS_DISRUPTED
from ..metrics import AUTOSCALER_NODES as NODES
from ..metrics import AUTOSCALER_PROVISIONING as PROVISIONING
from ..metrics import AUTOSCALER_SIMULATION as SIMULATION
from ..metrics import POD_STARTUP
from ..scheduler.gang import policy_of
from .catalog import Catalog
from .crds import GROUP, NODECLAIMS, NODEPOOLS, VERSION, install
from .disruption import Decision, Disruption, drift_reason
from .labels import NODEPOOL, TERMINATION_FINALIZER, custom_label
from .launcher import Launcher, claim_path, condition, generation_of, quantities, set_condition
from .nodepool import HASH_ANNOTATION, HASH_VERSION, HASH_VERSION_ANNOTATION, NodePoolView, parse_duration
from .provisioner import NewClaim, Plan, Provisioner, daemon_overhead, one_domain
from .resources import add
from .schedfit import SchedulerFits
from .simulation import Fits
from .state import ClusterState, Simulated, is_provisionable, key

__all__ = ["Autoscaler"]

log = logging.getLogger(__name__)

Obj = dict[str, Any]

POOLS = resource_path(GROUP, VERSION, NODEPOOLS)
CLAIMS = resource_path(GROUP, VERSION, NODECLAIMS)
# NodePool status.resources always lists these (Karpenter's counter controller's BaseResources)
POOL_BASE_RESOURCES = {"cpu": "0", "ephemeral-storage": "0", "memory": "0", "nodes": "0", "pods": "0"}
# the NodePool conditions this emulator keeps (Karpenter's root Ready and two of its dependents)
POOL_CONDITIONS = ("ValidationSucceeded", "NodeClassReady", "Ready")
# Karpenter's NodeRegistrationHealthy: Unknown for a new NodePool or a new generation of one, True once
# one of its NodeClaims registers a node (not part of Ready)
REGISTRATION_HEALTHY = "NodeRegistrationHealthy"
DELETION_WORKERS = 4  # NodeClaim deletions in flight at once (upstream's garbage collector runs 20 workers)


class Autoscaler:
    def __init__(self, client: Client, catalog: Catalog | None = None, *, fits: Fits | None = None,
                 batch_idle: float = 1.0, batch_max: float = 10.0, disruption_interval: float = 1.0,
                 status_interval: float = 2.0, latency_scale: float = 1.0, drain_timeout: float = 30.0) -> None:
        self.client = client
        self.catalog = catalog if catalog is not None else Catalog.default()
        self.batch_idle = batch_idle
        self.batch_max = batch_max
        self.disruption_interval = disruption_interval
        self.status_interval = status_interval
        self.state = ClusterState()
        self.sim = Simulated(self.state, self.catalog)
        # the scheduler's filter plugins judge real nodes; ``resource_fit`` alone: pass fits=resource_fit
        self.fits: Fits = fits if fits is not None else SchedulerFits(client, self.state)
        self.provisioner = Provisioner(self.catalog, self.fits, self.sim.devices)
        self.launcher = Launcher(client, self.catalog, self.state, latency_scale=latency_scale,
                                 drain_timeout=drain_timeout, on_registered=self._registered,
                                 on_event=lambda kind, obj, reason, message, type_: self._event(
                                     kind, obj, reason, message, type_))
        self.disruption = Disruption(self.state, self.sim, self.provisioner, self.state.clock)
        self.replacing: dict[str, tuple[list[str], str, str]] = {}  # old claim -> (replacements, reason, pool)
        # claims this controller deleted whose deletion its informer has not shown yet (claim -> pool):
        # not candidates again meanwhile
        self.deleting: dict[str, str] = {}
        self.last_plan: Plan | None = None
        self._trigger = asyncio.Event()
        self._wake_disruption = asyncio.Event()  # a NodeClaim went away: budget freed
        self._pools: dict[str, tuple[str, NodePoolView]] = {}  # name -> (resourceVersion, parsed)
        self._claim_started: dict[str, float] = {}  # claim name -> when its simulation ran
        self._registered_in: set[str] = set()  # NodePools a NodeClaim of which registered since their last status
        self._pod_times: dict[str, list[float]] = {}  # pod -> [created, unschedulable, bound] (nan: not seen)
        # NodeClaims to delete (the garbage collector's part and a gone node's), retried when that fails
        self._deletions = WorkQueue()
        self._doomed: set[str] = set()  # claims queued because their node is gone or going
        self.synced = asyncio.Event()
        self._pods_listed = asyncio.Event()  # the pod informer's initial list is in: later pods are new
        self.events = Recorder(client, "karpenter")
        self._events_seen: dict[tuple[str, str, str, str], float] = {}  # (kind, uid, reason, message) -> when
        self.state.on_provisionable = self._trigger.set
        self.state.on_pod_change = self._pod_timing
        self.state.on_nodeclaim_change = self._claim_changed

    # -- running --------------------------------------------------------------------------------
    async def run(self) -> None:
        await install(self.client)
        st = self.state
        pods = self.client.informer(resource_path("", "v1", "pods"), on_add=st.pod_added,
                                    on_update=st.pod_updated, on_delete=self._pod_deleted)
        self._pods_listed = pods.synced
        informers = [
            pods,
            self.client.informer(resource_path("", "v1", "nodes"), on_add=self._node_added,
                     on_update=self._node_updated, on_delete=self._node_deleted),
            self.client.informer(POOLS, on_add=self._pool_set, on_update=lambda o, n: self._pool_set(n),
                     on_delete=self._pool_deleted),
            self.client.informer(CLAIMS, on_add=lambda c: st.nodeclaim_set(None, c),
                     on_update=st.nodeclaim_set, on_delete=st.nodeclaim_deleted),
            self.client.informer(resource_path("resource.k8s.io", "v1", "resourceslices"), on_add=st.slice_set,
                     on_update=lambda o, n: st.slice_set(n), on_delete=st.slice_deleted, optional=True),
            self._mirror(resource_path("policy", "v1", "poddisruptionbudgets"), st.pdbs),
            self._mirror(resource_path("apps", "v1", "daemonsets"), st.daemonsets),
            # (DRA's objects and DeviceTaintRules may not be served by a cluster of an earlier
            # release: taken as none, client/informer.py's optional informers)
            self._mirror(resource_path("resource.k8s.io", "v1", "resourceclaims"), st.claims, self._claim_added,
                         optional=True),
            self._mirror(resource_path("resource.k8s.io", "v1", "resourceclaimtemplates"), st.templates,
                         lambda _template: self._trigger.set(), optional=True),
            self.client.informer(resource_path("resource.k8s.io", "v1", "deviceclasses"), on_add=self._class_set,
                     on_update=lambda o, n: self._class_set(n), on_delete=st.device_classes.remove, optional=True),
            self.client.informer(resource_path("resource.k8s.io", "v1", "devicetaintrules"), on_add=self._rule_set,
                     on_update=lambda o, n: self._rule_set(n), on_delete=self._rule_deleted, optional=True),
        ]
        # gangs' topology only narrows where their new nodes go: not waited for (a server may not serve them)
        optional = [self._mirror(resource_path("scheduling.k8s.io", "v1beta1", "podgroups"), st.podgroups),
                    self._mirror(resource_path("scheduling.k8s.io", "v1beta1", "workloads"), st.workloads)]
        tasks = [asyncio.create_task(i.run(), name=f"autoscaler informer {i.path}") for i in informers + optional]
        try:
            await asyncio.gather(*(i.synced.wait() for i in informers))
            self.synced.set()
            if st.provisionable:
                self._trigger.set()
            log.info("autoscaler: synced (%d nodepools, %d nodeclaims, %d catalog types)",
                     len(st.nodepools), len(st.nodeclaims), len(self.catalog))
            for claim in list(st.nodeclaims.values()):
                self.launcher.reconcile(claim)
                self._collect_if_orphaned(claim)  # a NodePool deleted while this controller was not watching
            await asyncio.gather(self._provision_loop(), self._disruption_loop(), self._status_loop(),
                                 *(self._deletion_worker() for _ in range(DELETION_WORKERS)))
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await self.launcher.stop()

    def _mirror(self, path: str, into: dict[str, Obj],
                on_add: Callable[[Obj], None] = lambda _obj: None, optional: bool = False) -> InformerHandle:
        def put(obj: Obj) -> None:
            into[key(obj)] = obj

        def added(obj: Obj) -> None:
            put(obj)
            on_add(obj)

        def drop(obj: Obj) -> None:
            into.pop(key(obj), None)

        return self.client.informer(path, on_add=added, on_update=lambda o, n: put(n), on_delete=drop,
                                    optional=optional)

    # -- informer handlers ------------------------------------------------------------------------
    def _pod_deleted(self, pod: Obj) -> None:
        self.state.pod_deleted(pod)
        self.sim.forget(key(pod))

    def _node_added(self, node: Obj) -> None:
        self.state.node_added(node)
        self.launcher.node_changed(node)

    def _node_updated(self, old: Obj, new: Obj) -> None:
        self.state.node_updated(old, new)
        self.launcher.node_changed(new)
        meta = new.get("metadata") or {}
        if meta.get("deletionTimestamp") and TERMINATION_FINALIZER in (meta.get("finalizers") or ()):
            self._delete_claim_of(key(new))

    def _node_deleted(self, node: Obj) -> None:
        self.state.node_deleted(node)
        self._delete_claim_of(key(node))

    def _delete_claim_of(self, node: str) -> None:
        claim = self.state.nodeclaim_of_node(node)
        if claim is not None and not (claim.get("metadata") or {}).get("deletionTimestamp"):
            self._doomed.add(key(claim))
            self._deletions.add(key(claim))

    def _pool_set(self, obj: Obj) -> None:
        self.state.nodepools[key(obj)] = obj
        self._trigger.set()  # a new or changed NodePool may take pods that found no home

    def _claim_added(self, claim: Obj) -> None:
        """A claim made by hand (not by the resourceclaim controller, for a pod, from a template):
        pods naming it waited for it, and may launch now."""
        if not ((claim.get("metadata") or {}).get("annotations") or {}).get("resource.kubernetes.io/pod-claim-name"):
            self._trigger.set()

    def _class_set(self, obj: Obj) -> None:
        self.state.device_classes.add(obj)
        self._trigger.set()  # pods whose claims named it (or found no device it selects) may launch now

    def _rule_set(self, obj: Obj) -> None:
        if self.state.taint_rules.set(obj):
            self._trigger.set()  # a device it tainted may be free now (and one it taints, not)

    def _rule_deleted(self, obj: Obj) -> None:
        self.state.taint_rules.remove(obj)
        self._trigger.set()  # pods whose claims found no untainted device may go now

    def _pool_deleted(self, obj: Obj) -> None:
        self.state.nodepools.pop(key(obj), None)
        self._pools.pop(key(obj), None)
        for claim in self.state.claims_of_pool(key(obj)):
            self._collect_if_orphaned(claim)

    def _claim_changed(self, old: Obj | None, new: Obj | None) -> None:
        if new is not None:
            self.launcher.reconcile(new)
            self._collect_if_orphaned(new)
            if (new.get("metadata") or {}).get("deletionTimestamp") and not (
                    (old or {}).get("metadata") or {}).get("deletionTimestamp"):
                self._trigger.set()  # its pods need room elsewhere: a provisioning pass (as Karpenter's)
        else:
            self._doomed.discard(key(old or {}))
            self._wake_disruption.set()

    # -- the garbage collector's part -----------------------------------------------------------------
    # A NodeClaim is owned by its NodePool (ownerReferences), so upstream's garbage collector deletes
    # it once the NodePool is gone (Background propagation), whenever it looks, and the termination
    # finalizer drains and removes its node. The emulator's garbage collector does not collect
    # NodeClaims: this controller does, on the NodePool's delete event, on every NodeClaim event and
    # over all NodeClaims once its informers have synced (a NodePool deleted while it was not running).
    def _owner_gone(self, claim: Obj) -> bool:
        """Whether ``claim`` names a NodePool owner that the informer does not hold (by name and uid)."""
        for ref in (claim.get("metadata") or {}).get("ownerReferences") or ():
            if ref.get("kind") == "NodePool" and ref.get("apiVersion", "").startswith(f"{GROUP}/"):
                pool = self.state.nodepools.get(ref.get("name", ""))
                if pool is None or (ref.get("uid") and (pool.get("metadata") or {}).get("uid") != ref["uid"]):
                    return True
        return False

    def _collect_if_orphaned(self, claim: Obj) -> None:
        if not self.synced.is_set() or (claim.get("metadata") or {}).get("deletionTimestamp"):
            return  # before the NodePools are listed, every owner would look gone
        if self._owner_gone(claim):
            self._deletions.add(key(claim))

    async def _orphaned(self, claim: Obj) -> bool:
        """As the garbage collector, which asks the server before it deletes a dependent: an owner
        NodePool that is gone (404) or another object of its name (another uid)."""
        for ref in (claim.get("metadata") or {}).get("ownerReferences") or ():
            if ref.get("kind") != "NodePool" or not ref.get("apiVersion", "").startswith(f"{GROUP}/"):
                continue
            try:
                pool = await self.client.get(f"{POOLS}/{ref.get('name', '')}")
            except ApiError as e:
                if e.code == 404:
                    return True
                raise
            if ref.get("uid") and (pool.get("metadata") or {}).get("uid") != ref["uid"]:
                return True
        return False

    async def _deletion_worker(self) -> None:
        queue = self._deletions
        while True:
            name = await queue.get()
            try:
                await self._sync_deletion(name)
                queue.forget(name)
            except asyncio.CancelledError:
                raise
            except Exception as e:
                log.warning("nodeclaim %s: deleting: %s; again in %.1f s", name, e, queue.add_after_failure(name))
            finally:
                queue.done(name)

    async def _sync_deletion(self, name: str) -> None:
        claim = self.state.nodeclaims.get(name)
        if claim is None or (claim.get("metadata") or {}).get("deletionTimestamp"):
            self._doomed.discard(name)
            return
        if name in self._doomed:
            await self._delete_claim(name)
            self._doomed.discard(name)
        elif self._owner_gone(claim) and await self._orphaned(claim):
            log.info("nodeclaim %s: its nodepool is gone: deleting it", name)
            await self._delete_claim(name)

    def _registered(self, claim: Obj, seconds: float) -> None:
        pool = ((claim.get("metadata") or {}).get("labels") or {}).get(NODEPOOL)
        if pool:
            self._registered_in.add(pool)
        started = self._claim_started.pop(key(claim), None)
        PROVISIONING.observe(time.monotonic() - started if started is not None else seconds)

    def _pod_timing(self, old: Obj | None, new: Obj | None) -> None:
        # a pod the initial list brought was created before we watched; one created after it is timed,
        # though other informers (DaemonSets, PDBs...) may still be listing
        if not self._pods_listed.is_set():
            return
        if new is None:
            self._pod_times.pop(key(old or {}), None)
            return
        k = key(new)
        t = time.monotonic()
        times = self._pod_times.get(k)
        if times is None:
            if old is not None:
                return  # created before we watched: its start cannot be timed
            times = self._pod_times[k] = [t, float("nan"), float("nan")]
        if is_provisionable(new) and times[1] != times[1]:
            times[1] = t
        if (new.get("spec") or {}).get("nodeName") and times[2] != times[2]:
            times[2] = t
            POD_STARTUP.labels(part="scheduling").observe(t - times[0])
            if times[1] == times[1]:
                POD_STARTUP.labels(part="provisioning").observe(t - times[1])
        if (new.get("status") or {}).get("phase") == "Running" and times[2] == times[2]:
            POD_STARTUP.labels(part="total").observe(t - times[0])
            POD_STARTUP.labels(part="starting").observe(t - times[2])
            del self._pod_times[k]

    # -- NodePools ----------------------------------------------------------------------------------
    def pools(self) -> dict[str, NodePoolView]:
        out: dict[str, NodePoolView] = {}
        for name, obj in self.state.nodepools.items():
            meta = obj.get("metadata") or {}
            if meta.get("deletionTimestamp"):
                continue
            rv = meta.get("resourceVersion", "")
            cached = self._pools.get(name)
            if cached is None or cached[0] != rv:
                try:
                    cached = (rv, NodePoolView.parse(obj))
                except ValueError as e:
                    log.warning("nodepool %s: %s", name, e)
                    continue
                self._pools[name] = cached
            out[name] = cached[1]
        return out

    # -- provisioning ---------------------------------------------------------------------------------
    async def _provision_loop(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await self._trigger.wait()
            opened = loop.time()
            while True:
                self._trigger.clear()
                left = opened + self.batch_max - loop.time()
                if left <= 0:
                    break
                try:
                    async with asyncio.timeout(min(self.batch_idle, left)):  # (not wait_for: see reads.py)
                        await self._trigger.wait()
                except TimeoutError:
                    break
            self._trigger.clear()
            try:
                await self.provision()
            except ApiError as e:
                log.warning("provisioning: %s", e)
            except Exception:  # (a client timeout under load): the pods still pending bring it back
                log.exception("provisioning failed; again on the next batch")

    async def provision(self) -> Plan | None:
        """One provisioning pass over the pods pending now and those of the nodes being disrupted."""
        # a static NodePool (replicas) launches nothing for pending pods: it keeps its count (_keep_replicas);
        # nor does one not Ready (Karpenter's provisioner: "ignoring nodepool, not ready")
        pools = {name: p for name, p in self.pools().items() if p.replicas is None and not p.invalid}
        st = self.state
        if not pools:
            return None
        # as Karpenter's provisioner, the pods of the nodes being disrupted (replaced, or deleted and
        # not drained yet) are scheduled too: the room of a replacement launching for them is not
        # free for the pending pods, and what they lack is launched now
        leaving = {name for name, c in st.nodeclaims.items() if name in self.replacing or name in self.deleting
                   or (c.get("metadata") or {}).get("deletionTimestamp")}
        moving = [p for name in leaving for p in st.moving_pods_of((st.nodeclaims[name].get("status") or {}).get(
            "nodeName") or "")]
        if not st.provisionable and not moving:
            return None
        started = time.monotonic()
        self._refresh()
        pods = [st.pods[k] for k in list(st.provisionable) if k in st.pods]
        demands = [self.sim.demand(p) for p in (*pods, *moving)]
        usage = {name: self.sim.usage(name) for name in pools}
        overhead = daemon_overhead(st.daemonsets.values(), pools.values())
        nodes = [n for n in self.sim.nodes(overhead=overhead) if n.claim not in leaving]
        plan = self.provisioner.plan(demands, nodes, list(pools.values()), usage, overhead)
        one_domain(plan, self._gangs(pods), nodes)
        SIMULATION.observe(time.monotonic() - started)
        by_node: dict[str, list[str]] = {}
        for pod_key, node in plan.existing.items():
            by_node.setdefault(node, []).append(pod_key)
        for node, keys in by_node.items():
            st.nominate(node, keys)
        self.last_plan = plan
        for pod_key, node in plan.existing.items():
            self._nominated(pod_key, node)
        for pod_key, why in plan.unschedulable.items():
            if pod_key in st.provisionable and pod_key in st.pods:  # as Karpenter's PodFailedToScheduleEvent
                self._event("Pod", st.pods[pod_key], "FailedScheduling", f"Failed to schedule pod, {why}",
                            "Warning", dedupe=300.0)
        if plan.claims:
            log.info("provisioning: %d pods (%d of nodes being disrupted) -> %d new nodeclaims, %d onto existing "
                     "capacity, %d unschedulable", len(demands), len(moving), len(plan.claims), len(plan.existing),
                     len(plan.unschedulable))
        results = await asyncio.gather(*(self._create_claim(c, started) for c in plan.claims),
                                       return_exceptions=True)
        for r in results:
            if isinstance(r, BaseException):
                log.warning("provisioning: creating a nodeclaim: %r", r)
        return plan

    # -- events ----------------------------------------------------------------------------------------
    def _event(self, kind: str, obj: Obj, reason: str, message: str, type_: str = "Normal",
               dedupe: float = 120.0) -> None:
        """An event about ``obj``, at most once per ``dedupe`` seconds for the same object,
        reason and message (as Karpenter's recorder dedupes)."""
        meta = obj.get("metadata") or {}
        k = (kind, str(meta.get("uid") or key(obj)), reason, message)
        t = time.monotonic()
        if t - self._events_seen.get(k, float("-inf")) < dedupe:
            return
        if len(self._events_seen) > 10_000:
            self._events_seen = {e: w for e, w in self._events_seen.items() if t - w < 300.0}
        self._events_seen[k] = t
        self.events.record(kind, obj, reason, message, type_)

    def _nominated(self, pod_key: str, target: str) -> None:
        """Karpenter's ``Nominated`` event: the node or NodeClaim a pending pod should land on."""
        pod = self.state.pods.get(pod_key)
        if pod is None:
            return
        claim = self.state.nodeclaim_of_node(target) if target in self.state.nodes else self.state.nodeclaims.get(
            target)
        where = ([f"nodeclaim/{key(claim)}"] if claim is not None else []) + (
            [f"node/{target}"] if target in self.state.nodes else [])
        if not where:
            where = [f"nodeclaim/{target}"]
        self._event("Pod", pod, "Nominated", f"Pod should schedule on: {', '.join(where)}")

    def _disruption_events(self, decisions: list[Decision]) -> None:
        st = self.state
        for claim, node, why in self.disruption.blocked:
            self._event("Node", node, "DisruptionBlocked", why)
            self._event("NodeClaim", claim, "DisruptionBlocked", why)
        for claim, node, why in self.disruption.unconsolidatable:  # (Karpenter's: at most every 15 minutes)
            self._event("Node", node, "Unconsolidatable", why, dedupe=900.0)
            self._event("NodeClaim", claim, "Unconsolidatable", why, dedupe=900.0)
        for pool, reason in self.disruption.pools_blocked:  # (a budget can change every minute)
            self._event("NodePool", pool.obj, "DisruptionBlocked",
                        f"No allowed disruptions for disruption reason {reason} due to blocking budget", dedupe=60.0)
        for d in decisions:
            disrupted, owner = st.nodes.get(d.node), st.nodeclaims.get(d.claim)
            if disrupted is not None:
                self._event("Node", disrupted, "DisruptionTerminating", f"Disrupting Node: {d.reason}", dedupe=0.0)
            if owner is not None:
                self._event("NodeClaim", owner, "DisruptionTerminating", f"Disrupting NodeClaim: {d.reason}",
                            dedupe=0.0)
            if d.approved:  # a Balanced move's score, as Karpenter's ConsolidationApproved
                for kind, obj in (("Node", disrupted), ("NodeClaim", owner)):
                    if obj is not None:
                        self._event(kind, obj, "ConsolidationApproved", d.approved, dedupe=0.0)

    def _gangs(self, pods: list[Obj]) -> dict[str, tuple[str, str]]:
        """The pods of ``pods`` whose PodGroup has a topology key: pod key -> (group key, topology key)."""
        out: dict[str, tuple[str, str]] = {}
        for p in pods:
            group = ((p.get("spec") or {}).get("schedulingGroup") or {}).get("podGroupName")
            if not group:
                continue
            group_key = f"{(p.get('metadata') or {}).get('namespace', '')}/{group}"
            podgroup = self.state.podgroups.get(group_key)
            policy = policy_of(podgroup, self.state.workloads) if podgroup is not None else None
            if policy is not None and policy.topology_key:
                out[key(p)] = (group_key, policy.topology_key)
        return out

    async def _create_claim(self, claim: NewClaim, started: float) -> Obj:
        pool = claim.pool
        template = pool.obj.get("spec", {}).get("template", {})
        tmeta = template.get("metadata") or {}
        tspec = template.get("spec") or {}
        requirements = claim.claim_requirements()
        # a label the requirements allow several values of (In [a, b], Exists, Gt) gets one, so that
        # the pods that asked for it can schedule on the node (Karpenter's resolved custom labels)
        resolved = {k: v for k, r in requirements.items()
                    if custom_label(k) and (v := r.any_value()) is not None}
        spec: Obj = {
            "requirements": requirements.to_api(),
            "resources": {"requests": quantities(claim.requested)},
            "nodeClassRef": tspec.get("nodeClassRef") or {},
        }
        for field in ("taints", "startupTaints", "expireAfter", "terminationGracePeriod"):
            if tspec.get(field):
                spec[field] = tspec[field]
        body = {
            "apiVersion": f"{GROUP}/{VERSION}", "kind": "NodeClaim",
            "metadata": {
                "generateName": f"{pool.name}-",
                "labels": {**(tmeta.get("labels") or {}), **resolved, NODEPOOL: pool.name},
                "annotations": {**(tmeta.get("annotations") or {}), HASH_ANNOTATION: pool.hash,
                                HASH_VERSION_ANNOTATION: HASH_VERSION},
                "finalizers": [TERMINATION_FINALIZER],
                "ownerReferences": [{"apiVersion": f"{GROUP}/{VERSION}", "kind": "NodePool", "name": pool.name,
                                     "uid": (pool.obj.get("metadata") or {}).get("uid", ""),
                                     "blockOwnerDeletion": True}],
            },
            "spec": spec,
        }
        created = await self.client.create(CLAIMS, body)
        self.state.nominate(key(created), [p.key for p in claim.pods])
        for p in claim.pods:
            self._nominated(p.key, key(created))
        self._claim_started[key(created)] = started
        NODECLAIMS_CREATED.labels(nodepool=pool.name).inc()
        # seen at once, so that the next batch counts it before its watch event arrives
        if key(created) not in self.state.nodeclaims:
            self.state.nodeclaim_set(None, created)
        return created

    # -- disruption ---------------------------------------------------------------------------------
    async def _disruption_loop(self) -> None:
        last_retrigger = time.monotonic()
        while True:
            # every interval, and at once when a NodeClaim is gone (its budget is free again)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.disruption_interval):  # (not wait_for: see reads.py)
                    await self._wake_disruption.wait()
            self._wake_disruption.clear()
            try:
                await self.disrupt()
            except ApiError as e:
                log.warning("disruption: %s", e)
            except Exception:
                log.exception("disruption failed; again in %.1f s", self.disruption_interval)
            if self.state.provisionable and time.monotonic() - last_retrigger > self.batch_max:
                last_retrigger = time.monotonic()
                self._trigger.set()  # pods still pending: capacity or limits may have changed

    async def disrupt(self) -> list[Decision]:
        """One disruption pass: finish replacements whose new nodes are ready, then decide."""
        st = self.state
        for old, (news, _reason, _pool) in list(self.replacing.items()):
            if old not in st.nodeclaims:
                del self.replacing[old]
                continue
            claims = [st.nodeclaims.get(n) for n in news]
            if any(c is None or (c.get("metadata") or {}).get("deletionTimestamp") for c in claims):
                log.info("disruption: a replacement of %s went away; %s is kept", old, old)
                del self.replacing[old]
                await self._mark_disrupted(old, None)
                continue
            if all((condition(c, "Initialized") or {}).get("status") == "True" for c in claims if c):
                del self.replacing[old]
                await self._delete_claim(old)
        await self._expire()
        pools = self.pools()
        if not pools:
            return []
        await self._keep_replicas(pools)
        for name in list(self.deleting):
            claim = st.nodeclaims.get(name)
            if claim is None or (claim.get("metadata") or {}).get("deletionTimestamp"):
                del self.deleting[name]
        busy = {old: pool for old, (_, _, pool) in self.replacing.items()} | self.deleting
        self._refresh()
        decisions = self.disruption.decide(pools, busy)
        self._disruption_events(decisions)
        for d in decisions:
            NODECLAIMS_DISRUPTED.labels(nodepool=d.pool, reason=d.reason).inc()
            log.info("disruption: %s %s (node %s)%s", d.reason, d.claim, d.node,
                     f", replaced by {len(d.replacements)} new" if d.replacements else "")
            await self._mark_disrupted(d.claim, d.reason)
            if d.replacements:
                started = time.monotonic()
                created = await asyncio.gather(*(self._create_claim(c, started) for c in d.replacements))
                for c in created:
                    self._event("NodeClaim", c, "DisruptionLaunching", f"Launching NodeClaim: {d.reason}", dedupe=0.0)
                self.replacing[d.claim] = ([key(c) for c in created], d.reason, d.pool)
            else:
                await self._delete_claim(d.claim)
        return decisions

    async def _keep_replicas(self, pools: Mapping[str, NodePoolView]) -> None:
        """Karpenter's static capacity: each NodePool with ``replicas`` keeps that many NodeClaims
        (those being deleted, or replaced, not counted; their replacements are), launched for no
        pod, within ``limits.nodes`` (every NodeClaim of the NodePool counted); the surplus goes,
        those still launching first, then those with the fewest pods, the newest first. Neither
        way waits for a disruption budget; the drain honours the pods' PodDisruptionBudgets."""
        st = self.state
        for pool in pools.values():
            if pool.replicas is None:
                continue
            claims = st.claims_of_pool(pool.name)
            active = [c for c in claims if not (c.get("metadata") or {}).get("deletionTimestamp")
                      and key(c) not in self.deleting and key(c) not in self.replacing]
            if len(active) < pool.replicas:
                if pool.invalid:
                    continue  # as Karpenter's static provisioning: a NodePool not Ready launches nothing
                wanted = pool.replicas - len(active)
                if pool.limits is not None and "nodes" in pool.limits:
                    wanted = min(wanted, pool.limits["nodes"] // 1000 - len(claims))
                if wanted <= 0:
                    continue
                overhead = daemon_overhead(st.daemonsets.values(), [pool]).get(pool.name)
                claim = self.provisioner.static_claim(pool, overhead)
                if claim is None:
                    self._event("NodePool", pool.obj, "NoCompatibleInstanceTypes",
                                "NodePool requirements filtered out all compatible available instance types",
                                "Warning")
                    continue
                log.info("static nodepool %s: %d of %d replicas, launching %d", pool.name, len(active),
                         pool.replicas, wanted)
                started = time.monotonic()
                for _ in range(wanted):
                    await self._create_claim(dataclasses.replace(claim, pods=[]), started)
            elif len(active) > pool.replicas:
                def cost(c: Obj) -> tuple[bool, int, float]:
                    node = (c.get("status") or {}).get("nodeName") or ""
                    created = _timestamp((c.get("metadata") or {}).get("creationTimestamp")) or 0.0
                    return (_ready(c), sum(1 for _ in st.pods_of(node)) if node else 0, -created)

                surplus = sorted(active, key=cost)[:len(active) - pool.replicas]
                log.info("static nodepool %s: %d of %d replicas, deleting %s", pool.name, len(active),
                         pool.replicas, ", ".join(key(c) for c in surplus))
                for c in surplus:
                    await self._delete_claim(key(c))

    async def _expire(self) -> None:
        """Delete the NodeClaims older than their ``expireAfter`` (``Never``: never), as
        Karpenter's expiration controller: forcefully, whatever the budgets, the pods'
        ``do-not-disrupt`` or the nodes being replaced (the drain, bounded by the claim's
        ``terminationGracePeriod``, is what waits)."""
        wall = time.time()
        for name, claim in list(self.state.nodeclaims.items()):
            meta = claim.get("metadata") or {}
            if meta.get("deletionTimestamp") or name in self.deleting:
                continue
            try:
                after = parse_duration((claim.get("spec") or {}).get("expireAfter"))
                created = datetime.strptime(meta.get("creationTimestamp", ""), "%Y-%m-%dT%H:%M:%SZ")
            except ValueError:
                continue
            if after is None or wall < created.replace(tzinfo=UTC).timestamp() + after:
                continue
            pool = (meta.get("labels") or {}).get(NODEPOOL, "")
            log.info("disruption: Expired %s (expireAfter %s)", name, (claim.get("spec") or {}).get("expireAfter"))
            NODECLAIMS_DISRUPTED.labels(nodepool=pool, reason="Expired").inc()
            await self._delete_claim(name)

    async def _mark_disrupted(self, name: str, reason: str | None) -> None:
        """As Karpenter's disruption queue, before it launches replacements: the candidate's node
        tainted ``karpenter.sh/disrupted:NoSchedule`` (no new pods land on it while they launch)
        and its NodeClaim's ``DisruptionReason`` condition set (True, the reason: what its pods'
        ``Evicted`` events name). ``reason`` None: both taken back (the disruption given up)."""
        claim = self.state.nodeclaims.get(name)
        if claim is None:
            return
        node_name = (claim.get("status") or {}).get("nodeName") or ""
        node = self.state.nodes.get(node_name)
        if node is not None:
            with contextlib.suppress(ApiError):
                await self.launcher.taint(node_name, node, reason is not None)
        for _ in range(3):  # over the version read, as the status loop writes its conditions
            conditions = [c for c in (claim.get("status") or {}).get("conditions") or ()
                          if c.get("type") != "DisruptionReason"]
            if reason is not None:
                conditions = set_condition(conditions, "DisruptionReason", "True", reason, reason,
                                           generation=generation_of(claim))
            elif len(conditions) == len((claim.get("status") or {}).get("conditions") or ()):
                return
            try:
                await self.client.patch(claim_path(name, "status"), {
                    "metadata": {"resourceVersion": (claim.get("metadata") or {}).get("resourceVersion")},
                    "status": {"conditions": conditions}})
                return
            except ApiError as e:
                if e.code != 409:
                    return
            try:
                claim = await self.client.get(claim_path(name))
            except ApiError:
                return

    def _refresh(self) -> None:
        refresh = getattr(self.fits, "refresh", None)
        if refresh is not None:
            refresh()

    async def _delete_claim(self, name: str) -> None:
        claim = self.state.nodeclaims.get(name)
        if claim is not None:
            self.deleting[name] = ((claim.get("metadata") or {}).get("labels") or {}).get(NODEPOOL, "")
        try:
            await self.client.delete(claim_path(name))
        except ApiError as e:
            if e.code != 404:
                raise

    # -- status ---------------------------------------------------------------------------------------
    async def _status_loop(self) -> None:
        while True:
            try:
                await self.sync_status()
            except ApiError as e:
                log.warning("status: %s", e)
            except Exception:
                log.exception("status failed; again in %.1f s", self.status_interval)
            await asyncio.sleep(self.status_interval)

    async def sync_status(self) -> None:
        st = self.state
        pools = self.pools()
        counts = dict.fromkeys(("launching", "registered", "ready", "deleting"), 0)
        for claim in list(st.nodeclaims.values()):
            counts[_claim_state(claim)] += 1
            meta = claim.get("metadata") or {}
            pool = pools.get((meta.get("labels") or {}).get(NODEPOOL, ""))
            if pool is None or meta.get("deletionTimestamp"):
                continue
            annotations = meta.get("annotations") or {}
            if annotations.get(HASH_VERSION_ANNOTATION) != HASH_VERSION:
                # a hash of another version says nothing about drift: stamp the current one (as Karpenter)
                await self._patch_quietly(claim_path(key(claim)), {"metadata": {"annotations": {
                    HASH_ANNOTATION: pool.hash, HASH_VERSION_ANNOTATION: HASH_VERSION}}})
                continue
            status = claim.get("status") or {}
            conditions = list(status.get("conditions") or ())
            drifted = drift_reason(claim, pool)
            current = condition(claim, "Drifted")
            if drifted and (current is None or current.get("status") != "True"):
                conditions = set_condition(conditions, "Drifted", "True", drifted, generation=generation_of(claim))
            elif not drifted and current is not None:
                conditions = [c for c in conditions if c.get("type") != "Drifted"]
            # Consolidatable: consolidateAfter has passed since the node's last pod event (Karpenter's
            # nodeclaim disruption controller); not while launching, nor with consolidateAfter: Never
            node = status.get("nodeName") or ""
            ripe = _ready(claim) and node in st.nodes and self.disruption.consolidatable(node, pool)
            if ripe and condition(claim, "Consolidatable") is None:
                conditions = set_condition(conditions, "Consolidatable", "True", "Consolidatable",
                                           generation=generation_of(claim))
            elif not ripe:
                conditions = [c for c in conditions if c.get("type") != "Consolidatable"]
            patch: Obj = {}
            if conditions != list(status.get("conditions") or ()):
                patch["conditions"] = conditions
            precondition = {}
            if "conditions" in patch:
                # the list is written whole, from the informer's copy: only over that version, so a
                # condition another writer just set (DisruptionReason, Drained) is not dropped (as
                # Karpenter's MergeFromWithOptimisticLock); a conflict waits for the next pass
                precondition = {"metadata": {"resourceVersion": meta.get("resourceVersion")}}
            last = st.last_pod_event.get(node)
            if last is not None and _ready(claim):
                # lastPodEventTime, written at most every 10 s (as Karpenter's podevents controller)
                seen = time.time() - (st.clock() - last)
                stored = _timestamp(status.get("lastPodEventTime"))
                if stored is None or seen - stored >= 10.0:
                    patch["lastPodEventTime"] = datetime.fromtimestamp(seen, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            if patch:
                await self._patch_quietly(claim_path(key(claim), "status"), {**precondition, "status": patch})
        for state_name, n in counts.items():
            NODES.labels(state=state_name).set(n)
        for name, pool in pools.items():
            obj = pool.obj
            meta = obj.get("metadata") or {}
            if (meta.get("annotations") or {}).get(HASH_ANNOTATION) != pool.hash:
                await self._patch_quietly(f"{POOLS}/{name}", {"metadata": {"annotations": {
                    HASH_ANNOTATION: pool.hash, HASH_VERSION_ANNOTATION: HASH_VERSION}}})
            claims = [c for c in st.claims_of_pool(name) if not (c.get("metadata") or {}).get("deletionTimestamp")]
            # as Karpenter's counter: cpu, memory, pods, ephemeral-storage and nodes, zero when none
            resources = {**POOL_BASE_RESOURCES, **quantities(add(*(self.sim.claim_capacity(c) for c in claims)))}
            status = dict(obj.get("status") or {})
            wanted = {"nodes": len(claims), "resources": resources}
            generation = meta.get("generation")
            registration = condition(obj, REGISTRATION_HEALTHY)
            reset = registration is None or registration.get("observedGeneration") != generation
            healthy = (registration is not None and not reset and name in self._registered_in
                       and registration.get("status") != "True")
            if reset:
                self._registered_in.discard(name)  # what registered before counts for the old generation
            pool_conditions = _pool_conditions(pool)
            if reset or healthy or any(status.get(k) != v for k, v in wanted.items()) or any(
                    _differs(condition(obj, c[0]), *c[1:], generation) for c in pool_conditions):
                conditions = status.get("conditions") or []
                for ctype, cstatus, reason, message in pool_conditions:
                    conditions = set_condition(conditions, ctype, cstatus, reason, message, generation=generation)
                if reset:
                    conditions = set_condition(conditions, REGISTRATION_HEALTHY, "Unknown", "AwaitingReconciliation",
                                               "object is awaiting reconciliation", generation=generation)
                elif healthy:
                    conditions = set_condition(conditions, REGISTRATION_HEALTHY, "True", REGISTRATION_HEALTHY,
                                               generation=generation)
                    self._registered_in.discard(name)
                await self._patch_quietly(f"{POOLS}/{name}/status", {"status": {**wanted, "conditions": conditions}})

    async def _patch_quietly(self, path: str, body: Obj) -> None:
        with contextlib.suppress(ApiError):
            await self.client.patch(path, body)


def _ready(claim: Obj) -> bool:
    return (condition(claim, "Initialized") or {}).get("status") == "True"


def _pool_conditions(pool: NodePoolView) -> list[tuple[str, str, str, str]]:
    """(type, status, reason, message) of the NodePool's conditions in POOL_CONDITIONS, as
    Karpenter's: ValidationSucceeded from its runtime validation (NodePoolValidationFailed and its
    errors), NodeClassReady True (the NodeClass is not read), and the root Ready as operatorpkg
    sets it from those (False, UnhealthyDependents, "ValidationSucceeded=False")."""
    if not pool.invalid:
        return [(t, "True", t, "") for t in POOL_CONDITIONS]
    return [("ValidationSucceeded", "False", "NodePoolValidationFailed", pool.invalid),
            ("NodeClassReady", "True", "NodeClassReady", ""),
            ("Ready", "False", "UnhealthyDependents", "ValidationSucceeded=False")]


def _differs(current: Obj | None, status: str, reason: str, message: str, generation: Any) -> bool:
    return current is None or (current.get("status"), current.get("reason"), current.get("message") or "",
                               current.get("observedGeneration")) != (status, reason, message, generation)


def _timestamp(value: Any) -> float | None:
    try:
        return datetime.strptime(str(value), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()
    except ValueError:
        return None


def _claim_state(claim: Obj) -> str:
    if (claim.get("metadata") or {}).get("deletionTimestamp"):
        return "deleting"
    if (condition(claim, "Initialized") or {}).get("status") == "True":
        return "ready"
    if (condition(claim, "Registered") or {}).get("status") == "True":
        return "registered"
    return "launching"


