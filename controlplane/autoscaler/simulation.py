"""The nodes and pods a scheduling simulation works on, and the question it asks
of each pair: does this pod fit on this (possibly hypothetical) node?

``Fits`` is that question. ``resource_fit`` answers it with what Karpenter's
simulation checks itself: taints tolerated, node labels compatible with the
pod's node selector and required node affinity, requests (DRA devices counted
per driver, where the class names its driver) within allocatable, the node
selectors of its claims allocated already, and, on a node with devices (of an
instance type not launched yet, or publishing ResourceSlices), the pod's
claims allocated there by the scheduler's allocator (``devices``). The scheduler's filter plugins answer it
for real nodes; to use them, pass another ``Fits`` (one line where the
controller builds its ``Provisioner``).

A pod's demand is computed once (``PodDemand``): its requests, its node
requirement terms, its tolerations, and the DRA devices its ResourceClaims ask
for, as ``devices/<driver>`` counts (``labels.device_resource``) and as the
claims themselves, for the allocator. An extended resource a DeviceClass backs
(KEP-5004) is asked through the claim the scheduler would make for it
(``scheduler.dra.extended.extended_claim``). A claim made from a template that
the resourceclaim controller has not made yet is simulated from the template.
Why no node can hold the pod, as the scheduler's PreFilter and PreEnqueue say:
a request's DeviceClass does not exist (``DeviceClasses.check``), a claim it
names does not exist, or its template does not (nothing will make the claim):
nothing is launched for it until that changes (``claim_refs``: what a cached
demand depends on).

A claim several pods name (``resourceClaimName``, a ``SharedClaim``) is
allocated once, where the first of them goes; the others go there too, without
asking for it again (``PodDemand.without``), and on a node it counts once
(``total_requests``). So is a PodGroup's claim (KEP-5729): the pods of the group
whose claim matches one of the group's share the claim made for the group (its
status, then each pod's, names it); before it is made, it is simulated from its
template once for the group.

A claim already allocated counts by where its devices are. For a pending pod
it needs nothing new. For a bound pod, devices local to its node (the
allocation's node selector names the node, or they come from a pool the node's
ResourceSlices publish) count: they are taken on that node while the pod runs
there, and a pod moved off the node (consolidation, drift) needs as many again
wherever it goes. Devices not tied to the node (network-attached, ``allNodes``)
stay allocated wherever the pod goes and never count. Either way the pod goes
only where the allocation's node selector allows (``PodDemand.pins``): a
pending pod whose claim is allocated on a node only to that node.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..scheduler.dra.allocator import claim_signature
from ..scheduler.dra.extended import extended_claim, extended_requests
from ..scheduler.dra.groups import group_claim_names, group_name, status_claim_name
from ..scheduler.dra.nodeselector import node_selector_matches
from .devices import DeviceClasses
from .labels import device_resource
from .requirements import Requirements, pod_requirement_terms, tolerates
from .resources import Resources, add, fits, parse_quantity, pod_requests

__all__ = ["DeviceClasses", "DeviceModel", "Fits", "PodDemand", "SharedClaim", "SimNode", "claim_refs", "demand",
           "node_local", "resource_fit", "total_requests"]

Obj = dict[str, Any]


class DeviceModel(Protocol):
    """The devices of a node the simulation can allocate on (``devices.NodeDevices``)."""

    def fits(self, pods: Sequence[PodDemand]) -> bool: ...


@dataclass(slots=True)
class SimNode:
    """A node in the simulation: a real Node, a NodeClaim not yet registered, or a
    hypothetical one of an instance type. ``requested`` grows as pods are placed."""

    name: str
    labels: Requirements
    taints: Sequence[Obj]
    allocatable: Resources
    requested: Resources = field(default_factory=dict)
    node: Obj | None = None          # the Node, if there is one
    pods: list[Obj] = field(default_factory=list)  # its bound pods, then those the plan places there
    slices: list[Obj] = field(default_factory=list)  # its ResourceSlices (published or to publish)
    nodepool: str | None = None
    claim: str | None = None
    # signatures of pods that did not fit: a node only fills up, so they never will
    rejected: set[Any] = field(default_factory=set)
    # a node of an instance type not launched yet: its devices, and the pods with claims placed on it
    devices: DeviceModel | None = None
    claimed: list[PodDemand] = field(default_factory=list)
    # how many of ``pods`` the plan placed (pending pods nominated here): a real node's scheduler
    # plugins see only the bound ones
    placed: int = 0


@dataclass(frozen=True, slots=True)
class SharedClaim:
    """A ResourceClaim the pod names (``resourceClaimName``), or its PodGroup's claim, which
    other pods share: allocated once, on the node the first of them goes to, and the others
    must follow."""

    key: str             # namespace/name
    requests: Resources  # its devices, counted per driver (in the pod's requests too)


@dataclass(frozen=True, slots=True)
class PodDemand:
    obj: Obj
    key: str                       # namespace/name
    requests: Resources            # with devices/<driver> for DRA claims
    terms: tuple[Requirements, ...]
    tolerations: tuple[Obj, ...]
    # the ResourceClaims the pod needs allocated, as the allocator takes them (name and spec), and
    # their shape (pods from one template share it)
    claims: tuple[Obj, ...] = ()
    claims_key: str = ""
    # why its claims can be allocated on no node (a DeviceClass missing, a claim not made yet): nothing is
    # launched for it
    unschedulable: str | None = None
    # a claim whose class names no driver: not in ``requests``, only the allocator can judge it
    uncounted: bool = False
    shared: tuple[SharedClaim, ...] = ()  # the claims among ``claims`` it names (other pods may too)
    # the node selectors of its claims allocated already: it goes only where they all match
    pins: tuple[Obj, ...] = ()

    @property
    def signature(self) -> str:
        """Pods with the same signature fit the same nodes. A string: its hash is
        computed once, and the simulation looks it up in many sets."""
        return repr((sorted(self.requests.items()), self.claims_key, self.terms, self.tolerations,
                     (self.obj.get("spec") or {}).get("affinity"),
                     (self.obj.get("spec") or {}).get("topologySpreadConstraints"), self.pins))

    def without(self, keys: Collection[str]) -> PodDemand:
        """The demand less the shared claims ``keys``: they are allocated where the pod goes already."""
        gone = [c for c in self.shared if c.key in keys]
        if not gone:
            return self
        requests = dict(self.requests)
        for c in gone:
            for k, v in c.requests.items():
                requests[k] -= v
        claims = tuple(c for c in self.claims
                       if f"{c['metadata'].get('namespace', '')}/{c['metadata']['name']}" not in keys)
        shared = tuple(c for c in self.shared if c.key not in keys)
        return dataclasses.replace(self, requests={k: v for k, v in requests.items() if v}, claims=claims,
                                   claims_key=claim_signature(claims) if claims else "", shared=shared,
                                   uncounted=self.uncounted and bool(claims))


class Fits(Protocol):
    def __call__(self, pod: PodDemand, node: SimNode) -> bool: ...


def resource_fit(pod: PodDemand, node: SimNode) -> bool:
    for taint in node.taints:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not tolerates(pod.tolerations, taint):
            return False
    if not any(node.labels.compatible(term) for term in pod.terms):
        return False
    if not fits(add(node.requested, pod.requests), node.allocatable):
        return False
    if pod.pins and not all(_pinned_to(selector, node) for selector in pod.pins):
        return False
    if not pod.claims:
        return True
    if node.devices is None:
        return not pod.uncounted  # counted per driver, or nothing to allocate on
    return node.devices.fits([*node.claimed, pod])


def _pinned_to(selector: Obj, node: SimNode) -> bool:
    """Whether an allocation's node selector takes ``node``: a real node by its name and labels;
    one not registered yet by its labels alone (its name is not known: a selector naming a
    node, as one of node-local devices does, takes none)."""
    if node.node is not None:
        return node_selector_matches(selector, node.name,
                                     (node.node.get("metadata") or {}).get("labels") or {})
    return any(not term.get("matchFields") and term.get("matchExpressions")
               and node.labels.compatible(Requirements.parse(term["matchExpressions"]))
               for term in selector.get("nodeSelectorTerms") or ())




def _claim_devices(spec: Mapping[str, Any], classes: DeviceClasses) -> tuple[Resources, bool]:
    """The devices a claim asks for, counted per driver where the class names one; and
    whether every request was counted (else only the allocator can judge the claim)."""
    out: Resources = {}
    counted = True
    for req in ((spec.get("devices") or {}).get("requests")) or ():
        exactly = req.get("exactly") or req  # v1 nests the request under "exactly"; v1beta1 did not
        cls = exactly.get("deviceClassName")
        if not cls:
            # firstAvailable: count the first alternative (the cheapest to satisfy is the scheduler's choice)
            subs = req.get("firstAvailable") or []
            if not subs:
                continue
            exactly = subs[0]
            cls = exactly.get("deviceClassName", "")
        driver = classes.driver(cls)
        if driver is None:
            counted = False
            continue
        count = 1 if exactly.get("allocationMode", "ExactCount") == "All" else int(exactly.get("count", 1))
        key = device_resource(driver)
        out[key] = out.get(key, 0) + count * 1000
    return out, counted


def node_local(allocation: Mapping[str, Any], node: str, node_slices: Sequence[Obj]) -> bool:
    """Whether an allocation's devices are on ``node``, and go away with it: its
    node selector names the node (as the scheduler writes it for node-local
    devices), or one of its devices comes from a pool ``node_slices`` publish."""
    for term in ((allocation.get("nodeSelector") or {}).get("nodeSelectorTerms")) or ():
        for f in term.get("matchFields") or ():
            if f.get("key") == "metadata.name" and f.get("operator") == "In" and node in (f.get("values") or ()):
                return True
    pools = {((s.get("spec") or {}).get("driver"), ((s.get("spec") or {}).get("pool") or {}).get("name"))
             for s in node_slices}
    return any((r.get("driver"), r.get("pool")) in pools
               for r in ((allocation.get("devices") or {}).get("results")) or ())


def _no_slices(node: str) -> Sequence[Obj]:
    return ()


def claim_refs(pod: Obj, claims: Mapping[str, Obj], templates: Mapping[str, Obj],
               podgroups: Mapping[str, Obj] | None = None) -> tuple[Obj | None, ...]:
    """The ResourceClaims, ResourceClaimTemplates and PodGroup the pod's demand is made
    from, as ``claims``, ``templates`` and ``podgroups`` hold them now (None where
    missing): a cached demand stands while they are the same objects."""
    meta = pod.get("metadata") or {}
    ns = meta.get("namespace", "")
    status = pod.get("status") or {}
    statuses = {s.get("name"): s.get("resourceClaimName") for s in status.get("resourceClaimStatuses") or ()}
    out: list[Obj | None] = []
    group = group_name(pod)
    if group and podgroups is not None:
        out.append(podgroups.get(f"{ns}/{group}"))
    for rc in (pod.get("spec") or {}).get("resourceClaims") or ():
        name = rc.get("resourceClaimName") or statuses.get(rc.get("name"))
        out.append(claims.get(f"{ns}/{name}") if name else None)
        if rc.get("resourceClaimTemplateName"):
            out.append(templates.get(f"{ns}/{rc['resourceClaimTemplateName']}"))
    return tuple(out)


def demand(pod: Obj, claims: Mapping[str, Obj], templates: Mapping[str, Obj], classes: DeviceClasses,
           node_slices: Callable[[str], Sequence[Obj]] = _no_slices,
           podgroups: Mapping[str, Obj] | None = None) -> PodDemand:
    """The pod's demand; ``claims``, ``templates`` and ``podgroups`` by namespace/name,
    ``node_slices`` the ResourceSlices of a node (see the module's docstring for
    which allocated claims count, which are shared, and which claims make the pod
    unschedulable)."""
    meta = pod.get("metadata") or {}
    ns = meta.get("namespace", "")
    spec = pod.get("spec") or {}
    bound = spec.get("nodeName")
    requests = pod_requests(pod)
    to_allocate: list[Obj] = []
    shared: list[SharedClaim] = []
    pins: list[Obj] = []
    counted = True
    why: str | None = None

    def ask(name: str, claim_spec: Mapping[str, Any]) -> Resources:
        nonlocal requests, counted
        devices, all_counted = _claim_devices(claim_spec, classes)
        requests = add(requests, devices)
        counted = counted and all_counted
        to_allocate.append({"metadata": {"name": name, "namespace": ns}, "spec": claim_spec})
        return devices

    # an extended resource a DeviceClass backs (KEP-5004) is allocated through the scheduler's own claim
    # (a bound pod without that claim got it from the node's device plugin)
    if not bound or (pod.get("status") or {}).get("extendedResourceClaimStatus"):
        backed = extended_requests(pod, classes.extended)
        if backed:
            requests = {k: v for k, v in requests.items() if k not in {r.resource for r in backed}}
            ext = extended_claim(pod, backed)
            ask(ext["metadata"]["name"], ext["spec"])
    statuses = {s.get("name"): s.get("resourceClaimName")
                for s in (pod.get("status") or {}).get("resourceClaimStatuses") or ()}
    group = group_name(pod)
    podgroup = (podgroups or {}).get(f"{ns}/{group}") if group else None
    of_group = group_claim_names(pod, podgroup)  # the pod's claims that are its PodGroup's (KEP-5729)
    for rc in spec.get("resourceClaims") or ():
        named = rc.get("resourceClaimName")
        name = named or statuses.get(rc.get("name"))
        if not name and podgroup is not None and rc.get("name") in of_group:
            # the group's claim, made for the group (its status names it before each member's does)
            name = status_claim_name(podgroup, str(rc.get("name")))
        claim_spec: Mapping[str, Any] | None = None
        if name and f"{ns}/{name}" in claims:
            claim = claims[f"{ns}/{name}"]
            allocation = (claim.get("status") or {}).get("allocation")
            if allocation and not (bound and node_local(allocation, bound, node_slices(bound))):
                # pending, or its devices stay allocated wherever the pod goes: nothing new needed, but the
                # pod goes only where they are available (the scheduler's rule for an allocated claim)
                if allocation.get("nodeSelector"):
                    pins.append(allocation["nodeSelector"])
                continue
            claim_spec = claim.get("spec")
        elif named:
            why = why or f'resourceclaim "{named}" not found'
        elif rc.get("resourceClaimTemplateName"):
            template = templates.get(f"{ns}/{rc['resourceClaimTemplateName']}")
            if template is None:  # the resourceclaim controller makes nothing: the scheduler waits
                why = why or f'waiting for resource claim "{rc.get("name", "")}" to be created from its template'
            else:
                claim_spec = ((template.get("spec") or {}).get("spec"))
        if claim_spec:
            grouped = rc.get("name") in of_group
            # a group's claim not made yet is simulated once for the group, under one name all its pods use
            made_as = name or (f"{group}-{rc.get('name', '')}" if grouped
                               else f"{meta.get('name', '')}-{rc.get('name', '')}")
            devices = ask(made_as, claim_spec)
            if named or grouped:
                shared.append(SharedClaim(f"{ns}/{made_as}", devices))
    return PodDemand(pod, f"{ns}/{meta.get('name', '')}", requests, tuple(pod_requirement_terms(pod)),
                     tuple(spec.get("tolerations") or ()), tuple(to_allocate),
                     claim_signature(to_allocate) if to_allocate else "",
                     why or (classes.check(to_allocate) if to_allocate else None),
                     uncounted=not counted, shared=tuple(shared), pins=tuple(pins))


def total_requests(pods: Iterable[PodDemand]) -> Resources:
    """What ``pods`` on one node request together: a claim several of them share counted once."""
    total: Resources = {}
    seen: set[str] = set()
    for p in pods:
        total = add(total, p.requests)
        for s in p.shared:
            if s.key in seen:
                total = {k: v - s.requests.get(k, 0) for k, v in total.items()}
            seen.add(s.key)
    return total


def node_devices(slices: Sequence[Obj]) -> Resources:
    """The DRA devices ResourceSlices publish, counted per driver."""
    out: Resources = {}
    for s in slices:
        spec = s.get("spec") or {}
        key = device_resource(spec.get("driver", ""))
        out[key] = out.get(key, 0) + 1000 * len(spec.get("devices") or ())
    return out


def gpu_count(value: Any) -> int:
    return parse_quantity(value) // 1000
