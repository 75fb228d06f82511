"""The provisioning simulation: where would these pending pods go, and which
nodes must be launched for those that fit nowhere?

As Karpenter's scheduler: pods are taken largest first; each goes to an
existing node (a real one, or a NodeClaim still launching) if one fits it, else
to a node this plan already opens, else opens a new one. A new node is a set
of instance-type *options*, narrowed as pods join it to the types that still
hold them all (and whose labels agree with every pod's requirements); when the
plan is done, each new node is launched as the cheapest option left, in the
cheapest offering (zone, capacity type) its requirements allow. Unlike
Karpenter, a pod joins a new node only if that costs no more than a node of
its own would (the node may have to grow to a dearer type): packing never
makes the plan dearer than one node per pod.

NodePools are tried by weight, heaviest first. A NodePool's ``limits`` bound the
capacity of its nodes: an option is dropped if, with what the NodePool already
has and the largest option of each node the plan opened in it, it would
exceed a limit::

    plan = Provisioner(catalog).plan(pods, existing_nodes, nodepools, usage)
    for claim in plan.claims: claim.launch  # -> (Option, Offering), the cheapest

A pod's topology narrows where it goes, as Karpenter's topology: its spread
constraints, its required pod affinity and anti-affinity (``_spread``, with the
domains ``_domains`` finds; ``_hosts`` and ``may_share_a_node`` for the
hostname), a ScheduleAnyway spread held to until the pod fits nowhere.

A gang that must run in one topology domain (a PodGroup's
``schedulingConstraints.topology`` on the zone or rack label) gets its new
nodes in one: ``one_domain`` pins them to one zone, and one rack of it.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..selectormatch import match_label_selector
from .catalog import Catalog, Offering, Option
from .devices import TypeDevices
from .labels import CAPACITY_TYPE, HOSTNAME, INSTANCE_TYPE, RACK, RACKS_PER_ZONE, ZONE, may_be_undefined, rack_name
from .nodepool import NodePoolView
from .requirements import Requirement, Requirements, pod_requirement_terms, tolerates
from .resources import Resources, add, fits, format_quantity, parse_resources, pod_requests
from .simulation import Fits, PodDemand, SimNode, resource_fit

__all__ = ["NewClaim", "Plan", "Provisioner", "cheapest", "choose", "daemon_overhead", "daemon_requests",
           "min_values_unmet", "one_domain"]

Obj = dict[str, Any]

MAX_INSTANCE_TYPES = 60  # Karpenter hands a NodeClaim at most this many, cheapest first
MAX_SPREAD_TRIES = 32    # the domains (one of each spread key) a spread pod's new node is tried in, emptiest first


@dataclass(slots=True)
class NewClaim:
    pool: NodePoolView
    requirements: Requirements
    options: list[Option]
    pods: list[PodDemand] = field(default_factory=list)
    requested: Resources = field(default_factory=dict)
    reserve: Resources = field(default_factory=dict)  # the largest option: what limits hold back for it
    rejected: set[object] = field(default_factory=set)

    @property
    def launch(self) -> tuple[Option, Offering]:
        chosen = cheapest(self.options, self.requirements)
        assert chosen is not None, "a claim always keeps an option that holds its pods"
        return chosen

    def ranked(self) -> list[Option]:
        """The options left, cheapest first, at most MAX_INSTANCE_TYPES: what the NodeClaim names."""
        return sorted(self.options, key=lambda o: _price(o, self.requirements))[:MAX_INSTANCE_TYPES]

    def claim_requirements(self) -> Requirements:
        """The NodeClaim's ``spec.requirements``: the merged ones (``minValues`` kept), with the
        instance types left (``ranked``)."""
        names = frozenset(o.name for o in self.ranked())
        return self.requirements.intersect(Requirements([Requirement(INSTANCE_TYPE, False, names)]))


def min_values_unmet(options: Sequence[Option], reqs: Requirements) -> list[str]:
    """The keys whose ``minValues`` the options do not meet, as Karpenter's
    ``SatisfiesMinValues``: the instance types must between them offer at least that many
    distinct values of the key (here, of those the requirement allows)."""
    unmet = []
    for key, r in reqs.items():
        if r.min_values is None:
            continue
        seen: set[str] = set()
        for o in options:
            own = o.requirements.get(key)
            if own is not None and not own.complement:
                seen.update(v for v in own.values if r.allows(v))
            if len(seen) >= r.min_values:
                break
        else:
            unmet.append(key)
    return unmet


def min_values_message(keys: Sequence[str]) -> str:
    return f"minValues requirement is not met for label(s) ({', '.join(sorted(keys))})"


def _price(o: Option, reqs: Requirements) -> float:
    offering = o.cheapest(reqs)
    return offering.price if offering is not None else float("inf")


def cheapest(options: Sequence[Option], reqs: Requirements) -> tuple[Option, Offering] | None:
    best: tuple[Option, Offering] | None = None
    for o in options:
        if not o.requirements.intersects(reqs):
            continue
        offering = o.cheapest(reqs)
        if offering is not None and (best is None or offering.price < best[1].price):
            best = (o, offering)
    return best


def choose(catalog: Catalog, claim: Obj) -> tuple[Option, Offering] | None:
    """What the cloud provider launches for ``claim``: the cheapest compatible
    offering of a type that holds the claim's requests."""
    spec = claim.get("spec") or {}
    reqs = Requirements.parse(spec.get("requirements"))
    requests = parse_resources((spec.get("resources") or {}).get("requests"))
    return cheapest([o for o in catalog if fits(requests, o.allocatable)], reqs)


@dataclass(slots=True)
class Plan:
    existing: dict[str, str] = field(default_factory=dict)   # pod key -> node (or in-flight claim) name
    claims: list[NewClaim] = field(default_factory=list)
    unschedulable: dict[str, str] = field(default_factory=dict)  # pod key -> why
    usage: Mapping[str, Resources] = field(default_factory=dict)  # each NodePool's capacity before the plan
    overhead: Mapping[str, Resources] = field(default_factory=dict)  # each NodePool's DaemonSet pods' requests
    alone: dict[tuple[str, object], float] = field(default_factory=dict)  # (pool, pod signature) -> a node's price
    # (pool, pod signature) -> the requirements and options of a node opened for such a pod (None: none can be)
    opened: dict[tuple[str, object], tuple[Requirements, list[Option]] | None] = field(default_factory=dict)
    # pod signature -> the keys whose minValues stopped a node opening for such a pod
    inflexible: dict[object, list[str]] = field(default_factory=dict)
    # pod signature -> NodePool name -> why that NodePool refused such a pod, in Karpenter's words
    # (in the order the NodePools were tried: the pod's FailedScheduling message lists them all)
    refused: dict[object, dict[str, str]] = field(default_factory=dict)
    # shared claim (namespace/name) -> the node, or new node, the first of its pods went to: the others follow
    homes: dict[str, SimNode | NewClaim] = field(default_factory=dict)
    # the required pod anti-affinity terms on other keys than the hostname of the pods on the nodes, and
    # where those pods are (None until a pod's placement first asks)
    anti: list[tuple[Obj, Obj, SimNode | NewClaim]] | None = None
    # (pod signature, key, the spread's node policies) -> the domains a spread constraint counts
    domains: dict[tuple[object, ...], frozenset[str]] = field(default_factory=dict)


def daemon_overhead(daemonsets: Iterable[Obj], pools: Iterable[NodePoolView]) -> dict[str, Resources]:
    """Karpenter's daemonset overhead: for each NodePool, the requests of the DaemonSets whose
    pods its new nodes would run (the pod template tolerates the NodePool's taints and its node
    requirements are compatible with the NodePool's), which a new node must hold beside the
    pods it is launched for."""
    daemonsets = list(daemonsets)
    if not daemonsets:
        return {}
    return {pool.name: daemon_requests(daemonsets, pool.requirements, pool.taints, may_be_undefined)
            for pool in pools}


def daemon_requests(daemonsets: Iterable[Obj], requirements: Requirements, taints: Iterable[Obj],
                    allowed: Callable[[str], bool] = lambda _key: False) -> Resources:
    """The requests of the DaemonSets whose pods would run on a node of ``requirements`` and
    ``taints`` (``allowed``: the labels a pod may require that ``requirements`` do not define,
    as Karpenter's ``Compatible``; for an existing node's labels, none)."""
    taints = [t for t in taints if t.get("effect") in ("NoSchedule", "NoExecute")]
    total: Resources = {}
    for ds in daemonsets:
        pod = {"spec": ((ds.get("spec") or {}).get("template") or {}).get("spec") or {}}
        tolerations = pod["spec"].get("tolerations") or ()
        if not all(tolerates(tolerations, t) for t in taints):
            continue
        if not any(requirements.intersects(term) and requirements.undefined(term, allowed) is None
                   for term in pod_requirement_terms(pod)):
            continue
        total = add(total, pod_requests(pod))
    return total


def _size(p: PodDemand) -> tuple[int, ...]:
    r = p.requests
    devices = sum(v for k, v in r.items() if k.startswith("devices/") or k == "nvidia.com/gpu")
    return (devices, r.get("cpu", 0), r.get("memory", 0))


def _elementwise_max(many: Sequence[Mapping[str, int]], keys: Sequence[str]) -> Resources:
    return {k: max((m.get(k, 0) for m in many), default=0) for k in keys}


class Provisioner:
    def __init__(self, catalog: Catalog, fits: Fits = resource_fit, devices: TypeDevices | None = None) -> None:
        self.catalog = catalog
        self.fits = fits
        # the devices of a node of each type, for the pods' claims (None: counted per driver only)
        self.devices = devices

    def plan(self, pods: Sequence[PodDemand], existing: Sequence[SimNode], pools: Sequence[NodePoolView],
             usage: Mapping[str, Resources] | None = None,
             overhead: Mapping[str, Resources] | None = None) -> Plan:
        """Place ``pods`` on ``existing`` nodes or on new ones from ``pools``;
        ``usage`` is the capacity each NodePool's nodes already have (for limits),
        ``overhead`` what the DaemonSets' pods will take on each NodePool's new nodes
        (``daemon_overhead``). ``existing`` nodes' ``requested`` grow with the pods placed on them."""
        plan = Plan(usage=usage or {}, overhead=overhead or {})
        pools = sorted(pools, key=lambda p: (-p.weight, p.name))
        waiting: list[PodDemand] = []
        for pod in sorted(pods, key=_size, reverse=True):
            if pod.unschedulable is not None:
                plan.unschedulable[pod.key] = pod.unschedulable  # on every node, as the scheduler's PreFilter
                continue
            if any(c.key in plan.homes for c in pod.shared):
                self._onto_home(pod, plan)
                continue
            if not self._settle(pod, existing, pools, plan):
                waiting.append(pod)
        # as Karpenter's queue, pods that must be with others are tried again while one more gets a place
        # (those they must be with may have been placed after them)
        while waiting:
            left = [p for p in waiting if not self._settle(p, existing, pools, plan)]
            if len(left) == len(waiting):
                break
            waiting = left
        if any(r.min_values is not None for c in plan.claims for r in c.requirements.values()):
            # Karpenter's Truncate: the instance types a NodeClaim names must still meet minValues
            kept = []
            for claim in plan.claims:
                if unmet := min_values_unmet(claim.ranked(), claim.requirements):
                    for p in claim.pods:
                        plan.unschedulable[p.key] = min_values_message(unmet)
                else:
                    kept.append(claim)
            plan.claims = kept
        return plan

    def _settle(self, pod: PodDemand, existing: Sequence[SimNode], pools: Sequence[NodePoolView],
                plan: Plan) -> bool:
        """Place the pod (relaxing its ScheduleAnyway spreads, as Karpenter's preferences, while it
        fits nowhere), or record why not. False if it may fit once other pods are placed: it
        must be with pods not placed yet."""
        while isinstance(placed := self._place(pod, existing, pools, plan), str):
            relaxed = _relaxed(pod)
            if relaxed is None:
                break
            pod = relaxed
        if isinstance(placed, str):
            plan.unschedulable[pod.key] = placed
            return not placed.startswith(NO_PODS_TO_BE_WITH)
        plan.unschedulable.pop(pod.key, None)
        for c in pod.shared:
            plan.homes[c.key] = placed
        if plan.anti is not None:
            plan.anti += [(pod.obj, t, placed) for t in _keyed_anti_affinity(pod.obj)]
        return True

    def _place(self, pod: PodDemand, existing: Sequence[SimNode], pools: Sequence[NodePoolView],
               plan: Plan) -> SimNode | NewClaim | str:
        """Where the pod goes (an existing node, a node this plan opened, a new one), or why nowhere."""
        hosts = self._hosts(pod, existing, plan)
        if isinstance(hosts, str):
            return hosts
        nodes, claims, may_open = hosts
        spread = [s for s in spreads(pod.obj) if s.key != HOSTNAME]  # (hostname: may_share_a_node)
        affine = self._affine_domains(pod, existing, pools, plan)
        if isinstance(affine, str):
            return affine
        if spread or affine:
            return self._spread(pod, spread, affine, existing, pools, plan, hosts)
        sig = pod.signature
        where = self._onto_existing(pod, sig, nodes, plan) or self._onto_new(pod, sig, plan, claims, alone=may_open)
        if where is None:
            if not may_open:
                return HOLDERS_FULL
            where = self._open(pod, pools, plan)
            if where is None:
                return _why_not(plan, sig)
            plan.claims.append(where)
        return where

    def _hosts(self, pod: PodDemand, existing: Sequence[SimNode], plan: Plan,
               ) -> tuple[Sequence[SimNode], Sequence[NewClaim], bool] | str:
        """The nodes the pod's required pod affinity on the hostname lets it go to, as Karpenter's
        topology: for each term, those holding a pod it selects (bound, or placed by this plan);
        if none does, any node when the pod selects itself (the first of its kind), else none.
        The existing nodes, this plan's nodes, and whether it may open one (not if it must join
        others: then also whatever joining costs)."""
        terms = [t for t in _required_affinity(pod.obj) if t.get("topologyKey") == HOSTNAME]
        nodes: Sequence[SimNode] = existing
        claims: Sequence[NewClaim] = plan.claims
        may_open = True
        for t in terms:
            with_nodes = [n for n in existing if any(_term_matches(pod.obj, t, o) for o in n.pods)]
            with_claims = [c for c in plan.claims if any(_term_matches(pod.obj, t, p.obj) for p in c.pods)]
            if with_nodes or with_claims:
                holding = {id(m) for m in (*with_nodes, *with_claims)}
                nodes = [n for n in nodes if id(n) in holding]
                claims = [c for c in claims if id(c) in holding]
                may_open = False
            elif not _term_matches(pod.obj, t, pod.obj):
                return f"{NO_PODS_TO_BE_WITH} on its node (pod affinity on {HOSTNAME})"
        return nodes, claims, may_open

    def _affine_domains(self, pod: PodDemand, existing: Sequence[SimNode], pools: Sequence[NodePoolView],
                        plan: Plan) -> dict[str, list[str]] | str:
        """The domains the pod's required pod affinity on other keys than the hostname lets it go
        to, by key, as Karpenter's topology: for each term, those holding a pod it selects (on an
        existing node, or on a new node of this plan pinned to the domain) that its node affinity
        allows; if none does, every domain of the key (``_domains``) when the pod selects itself,
        else none (why, then)."""
        out: dict[str, list[str]] = {}
        for t in _required_affinity(pod.obj):
            key = str(t.get("topologyKey") or "")
            if key == HOSTNAME:
                continue
            found = _domains_holding(existing, key, pod.obj, t)
            for c in plan.claims:
                r = c.requirements.get(key)
                if r is not None and (d := r.single()) is not None and any(_term_matches(pod.obj, t, p.obj)
                                                                           for p in c.pods):
                    found.add(d)
            found = {d for d in found if any(term.get(key) is None or term[key].allows(d) for term in pod.terms)}
            if not found:
                if not _term_matches(pod.obj, t, pod.obj):
                    return f"{NO_PODS_TO_BE_WITH} in its {key} domain (pod affinity on {key})"
                found = set(self._domains(Spread(key, 0, {}, None, True, False, False), pod, existing, pools, plan))
            out[key] = sorted(found & set(out[key])) if key in out else sorted(found)
            if not out[key]:
                return f"{NO_PODS_TO_BE_WITH} in one {key} domain (pod affinity on {key})"
        for t in _required_anti_affinity(pod.obj):
            key = str(t.get("topologyKey") or "")
            if key == HOSTNAME:
                continue  # (may_share_a_node)
            free = set(out[key]) if key in out else set(
                self._domains(Spread(key, 0, {}, None, True, False, False), pod, existing, pools, plan))
            free -= _domains_holding(existing, key, pod.obj, t)
            for c in plan.claims:
                if any(_term_matches(pod.obj, t, p.obj) for p in c.pods):
                    # every domain the node may still land in, as Karpenter records an anti-affinity's
                    r = c.requirements.get(key)
                    free = {d for d in free if r is not None and not r.allows(d)}
            out[key] = sorted(free)
            if not free:
                return (f"incompatible with the pod's anti-affinity: every {key} domain holds a pod it must not "
                        "be with")
        for owner, t, where in self._anti_owners(existing, plan):
            key = str(t.get("topologyKey") or "")
            if owner is pod.obj or not _term_matches(owner, t, pod.obj):
                continue
            free = set(out[key]) if key in out else set(
                self._domains(Spread(key, 0, {}, None, True, False, False), pod, existing, pools, plan))
            r = where.labels.get(key) if isinstance(where, SimNode) else where.requirements.get(key)
            free = {d for d in free if r is not None and not r.allows(d)}  # (not pinned: every domain it may be in)
            out[key] = sorted(free)
            if not free:
                return (f"incompatible with the anti-affinity of pod {_pod_name(owner)}: every {key} domain "
                        "holds it or may")
        return out

    def _anti_owners(self, existing: Sequence[SimNode], plan: Plan) -> list[tuple[Obj, Obj, SimNode | NewClaim]]:
        """The required pod anti-affinity terms on other keys than the hostname of the pods on
        the existing nodes and this plan's new nodes, with where each pod is (Karpenter's inverse
        topologies): found once a plan, then kept up as pods are placed (``_settle``)."""
        if plan.anti is None:
            # (most pods have no affinity: looked at without a call each)
            plan.anti = [(p, t, n) for n in existing for p in n.pods if (p.get("spec") or {}).get("affinity")
                         for t in _keyed_anti_affinity(p)]
            plan.anti += [(p.obj, t, c) for c in plan.claims for p in c.pods for t in _keyed_anti_affinity(p.obj)]
        return plan.anti

    def static_claim(self, pool: NodePoolView, overhead: Resources | None = None) -> NewClaim | None:
        """A node of a static NodePool (``replicas``), launched for no pod: the instance types its
        requirements allow that have an offering and hold its DaemonSets' pods; None if none does."""
        requested = dict(overhead or {})
        options = [o for o in self.catalog if o.requirements.intersects(pool.requirements)
                   and o.cheapest(pool.requirements.intersect(o.requirements)) is not None
                   and fits(requested, o.allocatable)]
        if not options:
            return None
        claim = NewClaim(pool, pool.requirements, options, requested=requested)
        return claim if cheapest(claim.options, claim.requirements) is not None else None

    def _spread(self, pod: PodDemand, spread: list[Spread], affine: Mapping[str, list[str]],
                existing: Sequence[SimNode], pools: Sequence[NodePoolView], plan: Plan,
                hosts: tuple[Sequence[SimNode], Sequence[NewClaim], bool]) -> SimNode | NewClaim | str:
        """Place a pod with topologySpreadConstraints on keys other than the hostname, as
        Karpenter's topology: on each key, the domains it may go to are those where one more
        matching pod (if it matches itself) keeps every constraint's skew over the domains its
        node affinity allows (the global minimum 0 while fewer than ``minDomains`` are). The
        matching pods are counted on the existing nodes and on this plan's new nodes pinned to a
        domain, those of the nodes the constraint's node filter takes (``nodeAffinityPolicy``,
        ``nodeTaintsPolicy``); the domains are those ``_domains`` finds. An existing node in
        allowed domains if one fits; else a new node pinned to a domain of each key, the
        emptiest first, joining one of this plan's or opening one. ``affine``: the domains its pod
        affinity allows, by key; ``hosts``: the nodes its pod affinity on the hostname allows
        (``_hosts``). Where it went, or why not."""
        allowed: dict[str, list[str]] = dict(affine)
        load: dict[tuple[str, str], int] = {}
        for s in spread:
            domains = self._domains(s, pod, existing, pools, plan)
            own = {d for d in domains if any(term.get(s.key) is None or term[s.key].allows(d) for term in pod.terms)}
            counts = _counts(pod, s, existing, plan)
            least = min((counts.get(d, 0) for d in own), default=0)
            if s.min_domains is not None and len(own) < s.min_domains:
                least = 0  # (KEP-3022: too few domains, as if an empty one were there)
            mine = 1 if _selects(pod.obj, s) else 0
            ok = {d for d in own if counts.get(d, 0) + mine - least <= s.skew}
            allowed[s.key] = sorted(ok & set(allowed[s.key])) if s.key in allowed else sorted(ok)
            for d in ok:
                load[(s.key, d)] = load.get((s.key, d), 0) + counts.get(d, 0)
        for k in affine:
            for d in allowed[k]:
                load.setdefault((k, d), 0)
        for k, values in allowed.items():
            if not values:
                return f"incompatible with the pod's topology spread constraints: no {k} domain keeps their skew"
        nodes, claims, may_open = hosts
        anywhere = _in_domains(pod, allowed)
        node = self._onto_existing(anywhere, anywhere.signature, nodes, plan)
        if node is not None:
            return node
        keys = sorted(allowed)
        combos = sorted((c for c in itertools.product(*(allowed[k] for k in keys)) if _agree(keys, c)),
                        key=lambda c: (sum(load[(k, d)] for k, d in zip(keys, c, strict=True)), c))
        if not combos:
            return f"incompatible with the pod's topology constraints: no {RACK} of the {ZONE} domains allowed"
        first = None
        for combo in combos[:MAX_SPREAD_TRIES]:
            one = _in_domains(pod, {k: [d] for k, d in zip(keys, combo, strict=True)})
            first = first or one.signature
            where = self._onto_new(one, one.signature, plan, claims, alone=may_open)
            if where is None and may_open and (where := self._open(one, pools, plan)) is not None:
                plan.claims.append(where)
            if where is not None:
                return where
        return _why_not(plan, first) if may_open else HOLDERS_FULL  # (the emptiest domain's reasons)

    def _domains(self, s: Spread, pod: PodDemand, existing: Sequence[SimNode], pools: Sequence[NodePoolView],
                 plan: Plan) -> frozenset[str]:
        """The domains of ``s.key`` the constraint counts, as Karpenter's domain groups: the
        values its new nodes can take (the zones and capacity types of the offerings, this
        provider's racks of those zones, the values an ``In`` of the NodePool's requirements,
        template labels or the instance types' labels gives the key) in the NodePools whose
        requirements meet a term of the pod's node affinity (unless ``nodeAffinityPolicy:
        Ignore``) and whose taints it tolerates (with ``nodeTaintsPolicy: Honor``); and the
        existing nodes' values (their labels and taints held to the same)."""
        cache_key = (pod.signature, s.key, s.honor_affinity, s.honor_taints)
        cached = plan.domains.get(cache_key)
        if cached is not None:
            return cached
        out: set[str] = set()
        for pool in pools:
            if s.honor_taints and not all(tolerates(pod.tolerations, t) for t in pool.taints
                                          if t.get("effect") in ("NoSchedule", "NoExecute")):
                continue
            terms = [pool.requirements.intersect(t) for t in pod.terms
                     if pool.requirements.intersects(t) and pool.requirements.undefined(t, may_be_undefined) is None]
            if not s.honor_affinity:
                terms = [pool.requirements]
            for reqs in terms:
                out |= self._new_values(s.key, reqs)
        for n in existing:
            r = n.labels.get(s.key)
            if r is None or (value := r.single()) is None:
                continue
            if s.honor_affinity and not any(n.labels.compatible(t) for t in pod.terms):
                continue
            if s.honor_taints and not all(tolerates(pod.tolerations, t) for t in n.taints
                                          if t.get("effect") in ("NoSchedule", "NoExecute")):
                continue
            out.add(value)
        plan.domains[cache_key] = frozenset(out)
        return plan.domains[cache_key]

    def _new_values(self, key: str, reqs: Requirements) -> set[str]:
        """The values of label ``key`` a new node of ``reqs`` can have."""
        out: set[str] = set()
        own = reqs.get(key)
        for o in self.catalog:
            if not o.requirements.intersects(reqs):
                continue
            merged = reqs.intersect(o.requirements)
            if key in (ZONE, CAPACITY_TYPE, RACK):
                for off in o.offerings:
                    if o.cheapest(merged.intersect(Requirements([Requirement(ZONE, False, frozenset((off.zone,))),
                                                                  Requirement(CAPACITY_TYPE, False,
                                                                              frozenset((off.capacity_type,)))]))):
                        if key == RACK:
                            racks = (rack_name(off.zone, i) for i in range(RACKS_PER_ZONE))
                            out.update(rack for rack in racks if own is None or own.allows(rack))
                        else:
                            out.add(off.zone if key == ZONE else off.capacity_type)
            elif (r := merged.get(key)) is not None and not r.complement:
                out.update(v for v in r.values if r.allows(v))
        return out

    def _onto_home(self, pod: PodDemand, plan: Plan) -> None:
        """Place a pod where a claim it shares went with an earlier pod (the scheduler puts it
        where the claim is allocated), asking only for its other claims; else it is unschedulable."""
        homed = [c.key for c in pod.shared if c.key in plan.homes]
        home = plan.homes[homed[0]]
        if any(plan.homes[k] is not home for k in homed):
            plan.unschedulable[pod.key] = (f"resourceclaims {', '.join(homed)} go to different nodes "
                                           "with their other pods")
            return
        rest = pod.without(homed)
        sig = rest.signature
        placed = (self._onto_existing(rest, sig, [home], plan) if isinstance(home, SimNode)
                  else self._onto_new(rest, sig, plan, [home], alone=False))
        if placed is None:
            plan.unschedulable[pod.key] = (f"resourceclaim {homed[0]} goes to {_name(home)} with its other pods, "
                                           "which cannot hold the pod")
            return
        for c in rest.shared:
            plan.homes[c.key] = home

    def _onto_existing(self, pod: PodDemand, sig: object, existing: Sequence[SimNode], plan: Plan,
                       ) -> SimNode | None:
        for node in existing:
            if sig in node.rejected:
                continue
            if (node.node is None or node.placed) and not may_share_a_node(pod.obj, node.pods):
                # a NodeClaim still launching, which the scheduler's plugins do not judge; or a node
                # holding pods this plan placed (not bound yet), which they do not see: as
                # Karpenter's topology records them
                if _hostname_rules(pod.obj):
                    node.rejected.add(sig)
                continue
            if self.fits(pod, node):
                node.requested = add(node.requested, pod.requests)
                node.pods.append(pod.obj)
                node.placed += 1
                if pod.claims:
                    node.claimed.append(pod)
                plan.existing[pod.key] = node.name
                return node
            node.rejected.add(sig)
        return None

    def _narrow(self, pod: PodDemand, claim: NewClaim, reqs: Requirements, limit_room: Resources | None,
                ) -> list[Option]:
        keep: list[Option] = []
        claimed = [p for p in claim.pods if p.claims] if pod.claims and self.devices is not None else []
        for o in claim.options:
            merged = reqs.intersect(o.requirements)
            if not o.requirements.intersects(reqs) or o.cheapest(merged) is None:
                continue
            if limit_room is not None and any(o.allocatable.get(k, 0) > v for k, v in limit_room.items()):
                continue
            hypothetical = SimNode(f"<{o.name}>", merged, list(claim.pool.taints), o.allocatable,
                                   dict(claim.requested), nodepool=claim.pool.name,
                                   devices=self.devices.of(o) if self.devices is not None else None,
                                   claimed=claimed)
            if self.fits(pod, hypothetical):
                keep.append(o)
        return keep

    def _onto_new(self, pod: PodDemand, sig: object, plan: Plan, claims: Sequence[NewClaim], alone: bool = True,
                  ) -> NewClaim | None:
        """Put the pod on the first of ``claims`` that can hold it (and, with ``alone``, costs no
        more with it than without it plus a node of its own)."""
        for claim in claims:
            if sig in claim.rejected:
                continue
            if not all(tolerates(pod.tolerations, t) for t in claim.pool.taints
                       if t.get("effect") in ("NoSchedule", "NoExecute")):
                claim.rejected.add(sig)
                continue
            if not may_share_a_node(pod.obj, [p.obj for p in claim.pods]):
                if _hostname_rules(pod.obj):  # its own rules: alike pods are kept off too (not others')
                    claim.rejected.add(sig)
                continue
            for term in pod.terms:
                if not claim.requirements.intersects(term) or claim.requirements.undefined(term, may_be_undefined):
                    continue
                reqs = claim.requirements.intersect(term)
                options = self._narrow(pod, claim, reqs, self._room(claim.pool, plan, claim))
                if options and min_values_unmet(options, reqs):
                    options = []  # the node would lose the flexibility its NodePool asks for
                if options and alone and not self._worth_joining(pod, sig, claim, options, reqs, plan):
                    break
                if options:
                    claim.requirements = reqs
                    claim.options = options
                    claim.pods.append(pod)
                    claim.requested = add(claim.requested, pod.requests)
                    claim.reserve = self._reserve(claim)
                    plan.existing.pop(pod.key, None)
                    return claim
            claim.rejected.add(sig)
        return None

    def _worth_joining(self, pod: PodDemand, sig: object, claim: NewClaim, options: list[Option],
                       reqs: Requirements, plan: Plan) -> bool:
        """Whether the node with the pod costs no more than the node without it plus
        a node of its own: packing never makes the plan dearer."""
        before = cheapest(claim.options, claim.requirements)
        after = cheapest(options, reqs)
        if before is None or after is None:
            return True
        alone = plan.alone.get((claim.pool.name, sig))
        if alone is None:
            fresh = self._open(pod, [claim.pool], plan)
            alone = fresh.launch[1].price if fresh is not None else float("inf")
            plan.alone[(claim.pool.name, sig)] = alone
        return after[1].price <= before[1].price + alone + 1e-9

    def _open(self, pod: PodDemand, pools: Sequence[NodePoolView], plan: Plan) -> NewClaim | None:
        sig = pod.signature
        for pool in pools:
            if pool.limits is None and (pool.name, sig) in plan.opened:
                # pods alike open alike nodes: narrow once (limits change the answer; without them, nothing does)
                opened = plan.opened[(pool.name, sig)]
                if opened is None:
                    continue
                reqs, options = opened
                return NewClaim(pool, reqs, list(options), [pod], add(plan.overhead.get(pool.name, {}), pod.requests))
            refused = plan.refused.setdefault(sig, {})
            overhead = plan.overhead.get(pool.name, {})
            why = f'incompatible with nodepool "{pool.name}", daemonset overhead={_resources_text(overhead)}, '
            untolerated = [t for t in pool.taints if t.get("effect") in ("NoSchedule", "NoExecute")
                           and not tolerates(pod.tolerations, t)]
            if untolerated:
                refused.setdefault(pool.name, why + "; ".join(f"did not tolerate taint (taint={_taint_text(t)})"
                                                              for t in untolerated))
                continue
            for term in pod.terms:
                if (conflict := pool.requirements.conflict(term)) is not None:
                    refused.setdefault(pool.name, f"{why}incompatible requirements, {conflict}")
                    continue
                if (key := pool.requirements.undefined(term, may_be_undefined)) is not None:
                    refused.setdefault(pool.name,
                                       f'{why}incompatible requirements, label "{key}" does not have known values')
                    continue
                reqs = pool.requirements.intersect(term)
                claim = NewClaim(pool, reqs, list(self.catalog), requested=dict(overhead))
                room = self._room(pool, plan, None)
                options = self._narrow(pod, claim, reqs, room)
                if options and (unmet := min_values_unmet(options, reqs)):
                    plan.inflexible[sig] = unmet
                    options = []
                elif not options:
                    refused.setdefault(pool.name, self._no_type(pod, claim, reqs, room, why))
                if options:
                    claim.options = options
                    claim.pods.append(pod)
                    claim.requested = add(claim.requested, pod.requests)
                    claim.reserve = self._reserve(claim)
                    plan.opened[(pool.name, sig)] = (reqs, options)
                    return claim
            plan.opened[(pool.name, sig)] = None
        return None

    def _no_type(self, pod: PodDemand, claim: NewClaim, reqs: Requirements, room: Resources | None,
                 why: str) -> str:
        """Why no instance type of ``claim``'s NodePool holds ``pod``, as Karpenter says it: its
        limits, or which of the requirements, the requests (with the DaemonSets') and the
        offerings no type met."""
        if room is not None and room.get("nodes", 1) <= 0:
            return f'node limits have been exhausted for nodepool "{claim.pool.name}"'
        if room is not None and self._narrow(pod, claim, reqs, None):
            return f'all available instance types exceed limits for nodepool "{claim.pool.name}"'
        requests = add(claim.requested, pod.requests)
        met = any(o.requirements.intersects(reqs) for o in claim.options)
        big = any(fits(requests, o.allocatable) for o in claim.options)
        offered = any(o.cheapest(reqs) is not None for o in claim.options)
        missing = [what for what, ok in (("met the scheduling requirements", met), ("had enough resources", big),
                                         ("had a required offering", offered)) if not ok]
        if len(missing) > 1:
            text = f"no instance type {' or '.join(missing)}"
        elif not met:
            text = "no instance type met all requirements"
        elif not big:
            text = "no instance type has enough resources"
        elif not offered:
            text = "no instance type has the required offering"
        elif pod.claims:  # (not Karpenter's: the DRA allocator found no type's devices enough)
            text = "no instance type has devices that satisfy the pod's resource claims"
        else:  # each alone met by some type, never all three by one
            text = "no instance type met the requirements/resources/offering tuple"
        return f"{why}{text}, requirements={reqs.describe()}, resources={_resources_text(requests)}"

    def _reserve(self, claim: NewClaim) -> Resources:
        if claim.pool.limits is None:
            return {}
        return _elementwise_max([o.allocatable for o in claim.options], list(claim.pool.limits))

    def _room(self, pool: NodePoolView, plan: Plan, claim: NewClaim | None) -> Resources | None:
        """What the NodePool's limits leave for one more node (or for ``claim``'s)."""
        if pool.limits is None:
            return None
        used = add(plan.usage.get(pool.name, {}),
                   *(c.reserve for c in plan.claims if c.pool.name == pool.name and c is not claim))
        return {k: limit - used.get(k, 0) for k, limit in pool.limits.items()}


@dataclass(frozen=True, slots=True)
class Spread:
    """A pod's topologySpreadConstraint, as Karpenter's topology holds it."""

    key: str
    skew: int
    selector: Obj                # the labelSelector with its matchLabelKeys' values
    min_domains: int | None
    honor_affinity: bool         # nodeAffinityPolicy: Honor (the default)
    honor_taints: bool           # nodeTaintsPolicy: Honor (Ignore by default)
    soft: bool                   # whenUnsatisfiable: ScheduleAnyway


def spreads(pod: Obj) -> list[Spread]:
    """The pod's topologySpreadConstraints. ScheduleAnyway ones too: Karpenter holds a new node
    to them until the pod fits nowhere (``_relaxed``)."""
    out = []
    labels = (pod.get("metadata") or {}).get("labels") or {}
    for c in (pod.get("spec") or {}).get("topologySpreadConstraints") or ():
        selector = dict(c.get("labelSelector") or {})
        keys = [k for k in c.get("matchLabelKeys") or () if k in labels]
        if keys:
            selector["matchExpressions"] = [*(selector.get("matchExpressions") or ()),
                                            *({"key": k, "operator": "In", "values": [labels[k]]} for k in keys)]
        least = c.get("minDomains")
        out.append(Spread(str(c.get("topologyKey") or ""), int(c.get("maxSkew") or 1), selector,
                          int(least) if least is not None else None,
                          c.get("nodeAffinityPolicy") != "Ignore", c.get("nodeTaintsPolicy") == "Honor",
                          c.get("whenUnsatisfiable") == "ScheduleAnyway"))
    return out


NO_PODS_TO_BE_WITH = "incompatible with the pod's affinity: no pod it must be with"
HOLDERS_FULL = ("incompatible with the pod's affinity: no node holding the pods it must be with on "
                f"{HOSTNAME} can take it")


def _required_anti_affinity(pod: Obj) -> list[Obj]:
    anti = (((pod.get("spec") or {}).get("affinity") or {}).get("podAntiAffinity") or {})
    return list(anti.get("requiredDuringSchedulingIgnoredDuringExecution") or ())


def _keyed_anti_affinity(pod: Obj) -> list[Obj]:
    return [t for t in _required_anti_affinity(pod) if t.get("topologyKey") and t.get("topologyKey") != HOSTNAME]


def _pod_name(pod: Obj) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def _required_affinity(pod: Obj) -> list[Obj]:
    affinity = (((pod.get("spec") or {}).get("affinity") or {}).get("podAffinity") or {})
    return list(affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or ())


def _relaxed(pod: PodDemand) -> PodDemand | None:
    """The pod less its first ScheduleAnyway spread constraint (Karpenter's
    ``removeTopologySpreadScheduleAnyway``); None if it has none left."""
    spec = pod.obj.get("spec") or {}
    constraints = list(spec.get("topologySpreadConstraints") or ())
    for i, c in enumerate(constraints):
        if c.get("whenUnsatisfiable") == "ScheduleAnyway":
            obj = {**pod.obj, "spec": {**spec, "topologySpreadConstraints": constraints[:i] + constraints[i + 1:]}}
            return dataclasses.replace(pod, obj=obj)
    return None


def _selects(pod: Obj, s: Spread) -> bool:
    return match_label_selector(s.selector, (pod.get("metadata") or {}).get("labels") or {})


def _why_not(plan: Plan, sig: object) -> str:
    unmet, refused = plan.inflexible.get(sig), plan.refused.get(sig)
    return (min_values_message(unmet) if unmet else "; ".join(refused.values()) if refused
            else "no NodePool and instance type can hold the pod")


def may_share_a_node(pod: Obj, others: Sequence[Obj]) -> bool:
    """Whether ``pod`` may join ``others`` on a node not launched yet, as Karpenter's topology
    judges one: no required pod anti-affinity on the hostname between it and them (either way),
    and its hostname topologySpreadConstraints (DoNotSchedule) keep their maxSkew (a new node
    can always be had, so the least loaded hostname holds none)."""
    if not others:
        return True
    for term in _hostname_anti_affinity(pod):
        if any(_term_matches(pod, term, o) for o in others):
            return False
    for o in others:
        if any(_term_matches(o, term, pod) for term in _hostname_anti_affinity(o)):
            return False
    for s in spreads(pod):
        if s.key != HOSTNAME:
            continue
        term = {"labelSelector": s.selector}
        if sum(1 for o in others if _term_matches(pod, term, o)) + _selects(pod, s) > s.skew:
            return False
    return True


def _hostname_rules(pod: Obj) -> bool:
    """Whether the pod has hostname rules of its own (anti-affinity, spread): the same for the
    pods of its signature, so a node they keep it off keeps them off too."""
    return bool(_hostname_anti_affinity(pod)) or any(
        c.get("topologyKey") == HOSTNAME for c in (pod.get("spec") or {}).get("topologySpreadConstraints") or ())


def _hostname_anti_affinity(pod: Obj) -> list[Obj]:
    anti = (((pod.get("spec") or {}).get("affinity") or {}).get("podAntiAffinity") or {})
    return [t for t in anti.get("requiredDuringSchedulingIgnoredDuringExecution") or ()
            if t.get("topologyKey") == HOSTNAME]


def _domains_holding(existing: Sequence[SimNode], key: str, owner: Obj, term: Obj) -> set[str]:
    """The ``key`` domains of the existing nodes that hold a pod the affinity ``term`` of
    ``owner`` selects (a node without one value of ``key`` is in no domain of it)."""
    out: set[str] = set()
    for n in existing:
        r = n.labels.get(key)
        if r is not None and (d := r.single()) is not None and any(_term_matches(owner, term, o) for o in n.pods):
            out.add(d)
    return out


def _term_matches(owner: Obj, term: Obj, other: Obj) -> bool:
    """Whether the pod affinity ``term`` of ``owner`` selects ``other`` (its namespaces: the
    term's, else the owner's; a namespaceSelector, any)."""
    meta = other.get("metadata") or {}
    namespaces = term.get("namespaces") or ([] if term.get("namespaceSelector") is not None
                                            else [(owner.get("metadata") or {}).get("namespace")])
    if namespaces and meta.get("namespace") not in namespaces:
        return False
    selector = term.get("labelSelector")
    return selector is not None and match_label_selector(selector, meta.get("labels") or {})


def _counts(pod: PodDemand, s: Spread, existing: Sequence[SimNode], plan: Plan) -> dict[str, int]:
    """The pods of ``pod``'s namespace ``s`` selects, per domain of ``s.key``: on the existing
    nodes (with those this plan put there) and on this plan's new nodes pinned to a domain, of
    the nodes the constraint's node filter takes (their labels meet a term of the pod's node
    affinity, unless ``nodeAffinityPolicy: Ignore``; with ``nodeTaintsPolicy: Honor``, the pod
    tolerates their taints)."""
    namespace = (pod.obj.get("metadata") or {}).get("namespace")

    selector = s.selector

    def matching(pods: Iterable[Obj]) -> int:
        n = 0
        for p in pods:
            meta = p.get("metadata") or {}
            if meta.get("namespace") == namespace and match_label_selector(selector, meta.get("labels") or {}):
                n += 1
        return n

    def taken(labels: Requirements, taints: Iterable[Obj], compatible: Callable[[Requirements], bool]) -> bool:
        if s.honor_affinity and not any(compatible(t) for t in pod.terms):
            return False
        return not s.honor_taints or all(tolerates(pod.tolerations, t) for t in taints
                                         if t.get("effect") in ("NoSchedule", "NoExecute"))

    counts: dict[str, int] = {}
    for n in existing:
        r = n.labels.get(s.key)
        if r is not None and (d := r.single()) is not None and taken(n.labels, n.taints, n.labels.compatible):
            counts[d] = counts.get(d, 0) + matching(n.pods)
    for c in plan.claims:
        r = c.requirements.get(s.key)
        if r is not None and (d := r.single()) is not None and taken(c.requirements, c.pool.taints,
                                                                     c.requirements.intersects):
            counts[d] = counts.get(d, 0) + matching(p.obj for p in c.pods)
    return counts


def _agree(keys: Sequence[str], combo: Sequence[str]) -> bool:
    """Whether a domain of each of ``keys`` can be one node's: a rack lies in its zone."""
    pinned = dict(zip(keys, combo, strict=True))
    return RACK not in pinned or ZONE not in pinned or _rack_zone(pinned[RACK]) == pinned[ZONE]


def _rack_zone(rack: str) -> str:
    """The zone of this provider's rack (``rack_name``)."""
    return rack.rsplit("-rack-", 1)[0]


def _in_domains(pod: PodDemand, domains: Mapping[str, Sequence[str]]) -> PodDemand:
    """``pod`` with its node affinity narrowed to ``domains`` (by key; a rack pins its zone too)."""
    pins = [Requirement(k, False, frozenset(v)) for k, v in domains.items()]
    if RACK in domains:  # (intersected with the zones pinned, if any: none left if they disagree)
        pins.append(Requirement(ZONE, False, frozenset(_rack_zone(r) for r in domains[RACK])))
    only = Requirements(pins)
    return dataclasses.replace(pod, terms=tuple(term.intersect(only) for term in pod.terms))


def _resources_text(r: Mapping[str, int]) -> str:
    """Resources as Karpenter's messages print them: JSON of their quantities, by name."""
    return json.dumps({k: format_quantity(k, v) for k, v in sorted(r.items()) if not k.startswith("devices/")},
                      separators=(",", ":"))


def _taint_text(t: Mapping[str, Any]) -> str:
    """``key=value:Effect`` (``key:Effect`` without a value), as Karpenter prints a taint."""
    value = t.get("value")
    return f"{t.get('key')}{'=' + str(value) if value else ''}:{t.get('effect')}"


def _name(where: SimNode | NewClaim) -> str:
    return f"node {where.name}" if isinstance(where, SimNode) else f"a new node of NodePool {where.pool.name}"


def one_domain(plan: Plan, gangs: Mapping[str, tuple[str, str]], existing: Sequence[SimNode]) -> None:
    """Pin the new nodes ``plan`` opened for each gang to one domain of its topology
    key, so that the gang fits in one: ``gangs`` maps a pod's key to its group's
    key and topology key. For the zone or the rack label, the claims holding the
    group's pods are narrowed to one zone (where the group's pods placed on
    existing nodes are, else the cheapest they all allow) and, for the rack, one
    rack of it: a rack from a hash of the group's key, so that the group's later
    batches land in the same one. Other keys are left alone."""
    by_name = {n.name: n for n in existing}
    groups: dict[str, tuple[str, set[str]]] = {}
    for pod_key, (group, topology) in gangs.items():
        if topology in (ZONE, RACK):
            groups.setdefault(group, (topology, set()))[1].add(pod_key)
    for group, (topology, members) in sorted(groups.items()):
        claims = [c for c in plan.claims if any(p.key in members for p in c.pods)]
        if not claims:
            continue
        placed = [by_name[plan.existing[m]] for m in sorted(members) if plan.existing.get(m) in by_name]
        zone, rack = _domain(group, topology, claims, placed)
        if zone is None:
            continue  # the nodes have no zone in common: nothing to pin
        pin = [Requirement(ZONE, False, frozenset((zone,)))]
        if rack is not None:
            pin.append(Requirement(RACK, False, frozenset((rack,))))
        for c in claims:
            c.requirements = c.requirements.intersect(Requirements(pin))
            c.options = [o for o in c.options if o.requirements.intersects(c.requirements)
                         and o.cheapest(c.requirements) is not None]


def _domain(group: str, topology: str, claims: Sequence[NewClaim], placed: Sequence[SimNode],
            ) -> tuple[str | None, str | None]:
    """The zone (and, for the rack key, the rack) ``one_domain`` pins ``claims`` to:
    the first domain every claim allows, trying those of ``placed`` first, then
    each zone by the claims' total price, and its racks from the group's hash."""
    def pinned(zone: str, rack: str | None) -> Requirements:
        return Requirements([Requirement(ZONE, False, frozenset((zone,)))]
                            + ([Requirement(RACK, False, frozenset((rack,)))] if rack is not None else []))

    def cost(zone: str, rack: str | None) -> float | None:
        """What the claims cost in the domain; None if one cannot be there."""
        total = 0.0
        for c in claims:
            chosen = cheapest(c.options, c.requirements.intersect(pinned(zone, rack)))
            if chosen is None:
                return None
            total += chosen[1].price
        return total

    def label(node: SimNode, k: str) -> str | None:
        return node.labels[k].single() if k in node.labels else None

    with_rack = topology == RACK
    candidates = [(label(n, ZONE), label(n, RACK) if with_rack else None) for n in placed]
    zones = {o.zone for c in claims for opt in c.options for o in opt.offerings}
    costs = {z: cost(z, None) for z in zones}
    first = zlib.crc32(group.encode())
    for z in sorted((z for z in zones if costs[z] is not None), key=lambda z: (costs[z], z)):
        candidates += [(z, rack_name(z, first + i)) for i in range(RACKS_PER_ZONE)] if with_rack else [(z, None)]
    for zone, rack in candidates:
        if zone is not None and (rack is not None or not with_rack) and cost(zone, rack) is not None:
            return zone, rack
    return None, None
