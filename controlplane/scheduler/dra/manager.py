"""The DRA plugin's state: what the informers show, what the scheduler assumed, per-node answers.

``DraManager`` is fed by informers (``on_slice``, ``on_class``, ``on_claim`` and
their deletes) and answers the extension points for one pod at a time::

    pc = mgr.pre_filter(pod)              # None: the pod has no claims; raises Unschedulable
    reason = mgr.filter(pc, node_name, labels)   # None: fits
    reason = mgr.reserve(pc, node_name, labels)  # holds the devices in memory (assumed)
    mgr.unreserve(pc)                      # lets them go
    reason = await mgr.pre_bind(client, pc, pod, node_name)   # writes status.allocation + reservedFor

``filter`` answers are cached per (claim specs, node) against the versions of
the node's pools (slices and allocations): pods made from one template ask the
same question, and a node found full stays full until something on it changes.

Binding conditions (KEP-5007): when an allocated device has
``bindingConditions``, ``pre_bind`` waits until the claim's ``status.devices``
entry for it has all of them True; any ``bindingFailureConditions`` True, or
``binding_timeout`` seconds, releases the allocation and fails the cycle so
the pod is scheduled again.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from controlplane.client import ApiError, resource_path
from controlplane.gostrings import quote

from ..columns import Ints
from .allocator import AllocationError, Allocator, Plan, Unsatisfiable, claim_signature
from .cel import Selectors
from .extended import ANNOTATION as EXTENDED_ANNOTATION
from .extended import ExtendedNames, ExtendedRequest, extended_claim, extended_requests, request_mappings
from .groups import consumer as group_consumer
from .groups import group_claim_names, group_name, owner_podgroup, status_claim_name
from .inventory import Inventory
from .nodeselector import node_selector_matches
from .state import AllocatedState, entries_of
from .verdicts import UNKNOWN, RowVerdicts

__all__ = ["FINALIZER", "BindingFailed", "DraManager", "PodClaims", "Unschedulable", "binding_state"]

FINALIZER = "resource.kubernetes.io/delete-protection"
RESERVED_FOR_MAX = 256  # resourceapi.ResourceClaimReservedForMaxSize
MAX_SIGNATURES = 512  # distinct claim specs whose Filter answers are kept
# Filter's reasons, in upstream's words (its plugin's): the node cannot hold what the claims
# still need; a claim already allocated is tied to other nodes (its allocation's nodeSelector)
CANNOT_ALLOCATE = "cannot allocate all claims"
NOT_AVAILABLE_ON_NODE = "resourceclaim not available on the node"


class Unschedulable(Exception):
    """The pod cannot be scheduled now (a claim missing, in use elsewhere, being deleted...)."""


class BindingFailed(Exception):
    """PreBind gave up: a binding failure condition, a timeout, or a write that failed."""


def _key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


@dataclass(slots=True)
class PodClaims:
    """One pod's claims for one scheduling cycle (upstream's cycle state for the plugin)."""

    pod_key: str
    pod_uid: str
    claims: list[Mapping[str, Any]]  # in pod.spec.resourceClaims order, deduplicated
    to_allocate: list[int]  # indices into claims that have no allocation yet
    signature: str
    reserved: tuple[str, Plan] | None = None  # node, plan held by reserve
    written: list[str] = field(default_factory=list)  # claim keys whose status pre_bind wrote
    # The claims already allocated: (name, their allocation's node selector), checked per node.
    allocated: list[tuple[str, Mapping[str, Any] | None]] = field(default_factory=list)
    # The filter cache's entries for claims like these, by node: (generations..., answer).
    answers: dict[str, tuple[int, int, int, Plan | str]] = field(default_factory=dict)
    # Per claim, whom ``reservedFor`` names: the pod, or its PodGroup for the group's claims (KEP-5729).
    consumers: list[dict[str, str]] = field(default_factory=list)
    # The group's claims (by index): the allocation this pod was filtered and reserved against
    # (the API's, a sibling's Reserve's, or its own Reserve's). PreBind binds with that one only.
    expected: dict[int, Mapping[str, Any]] | None = None
    # Extended resources backed by DRA (``extended.py``): the index of the claim held in memory
    # for them, their requests, and the cycle's claims without it, for a node offering every one
    # of those resources itself (a device plugin's: upstream asks DRA only where the node does not)
    extended: int | None = None
    extended_requests: list[ExtendedRequest] = field(default_factory=list)
    device_plugin: PodClaims | None = None


def pod_claim_names(pod: Mapping[str, Any]) -> list[tuple[str, str | None]]:
    """(pod claim name, ResourceClaim name or None while the controller has not created it)."""
    statuses = {s.get("name"): s.get("resourceClaimName")
                for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []}
    out: list[tuple[str, str | None]] = []
    for rc in (pod.get("spec") or {}).get("resourceClaims") or []:
        name = rc.get("name", "")
        if rc.get("resourceClaimName"):
            out.append((name, rc["resourceClaimName"]))
        elif rc.get("resourceClaimTemplateName"):
            out.append((name, statuses.get(name)))
    return out


def _rv(obj: Mapping[str, Any]) -> int:
    try:
        return int((obj.get("metadata") or {}).get("resourceVersion") or 0)
    except ValueError:
        return 0


def _generated_for(claim: Mapping[str, Any]) -> tuple[str, str] | None:
    """(owner uid, claim name in the owner) of a claim generated for a pod or a PodGroup."""
    meta = claim.get("metadata") or {}
    pod_claim = (meta.get("annotations") or {}).get("resource.kubernetes.io/pod-claim-name")
    if not pod_claim:
        return None
    for ref in meta.get("ownerReferences") or []:
        if ref.get("controller") and ref.get("kind") in ("Pod", "PodGroup") and ref.get("uid"):
            return str(ref["uid"]), str(pod_claim)
    return None


def binding_state(claim: Mapping[str, Any]) -> tuple[bool, str | None]:
    """(all binding conditions met, the failure condition that is True if any) for an allocated claim."""
    alloc = (claim.get("status") or {}).get("allocation") or {}
    devices = (claim.get("status") or {}).get("devices") or []
    ready = True
    for r in (alloc.get("devices") or {}).get("results") or []:
        want = r.get("bindingConditions") or []
        fail = r.get("bindingFailureConditions") or []
        if not want and not fail:
            continue
        conds: dict[str, Mapping[str, Any]] = {}
        for d in devices:
            if (d.get("driver"), d.get("pool"), d.get("device")) == (r.get("driver"), r.get("pool"), r.get("device")) \
                    and (d.get("shareID") or None) == (r.get("shareID") or None):
                conds = {c.get("type", ""): c for c in d.get("conditions") or []}
        for f in fail:
            c = conds.get(f)
            if c is not None and c.get("status") == "True":  # upstream's isClaimReadyForBinding words
                return False, f"reason={c.get('reason', '')}, message={quote(str(c.get('message') or ''))}"
        if any((conds.get(w) or {}).get("status") != "True" for w in want):
            ready = False
    return ready, None


def _has_binding_conditions(allocation: Mapping[str, Any]) -> bool:
    return any(r.get("bindingConditions") for r in (allocation.get("devices") or {}).get("results") or ())


def _devices(allocation: Mapping[str, Any]) -> list[tuple[Any, ...]]:
    return sorted((r.get("request"), r.get("driver"), r.get("pool"), r.get("device"), r.get("shareID") or None)
                  for r in (allocation.get("devices") or {}).get("results") or ())


def same_allocation(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Whether two allocations are one: the same devices for the same requests, on the same nodes."""
    return a is b or (a.get("nodeSelector") == b.get("nodeSelector") and _devices(a) == _devices(b))


# In a group claim's users: pods bound before this scheduler kept count may use the claim.
_EARLIER = ""


class DraManager:
    def __init__(self, binding_timeout: float = 600.0, cache: bool = True) -> None:
        self.inventory = Inventory()
        self.state = AllocatedState(self.inventory)
        self.classes: dict[str, Mapping[str, Any]] = {}
        self.extended_names = ExtendedNames()
        self.claims: dict[str, Mapping[str, Any]] = {}
        self.cache = cache  # False: every cache off, CEL compiled per use (the benchmark's naive peer)
        self.selectors = Selectors(cache)
        self.allocator = Allocator(self.inventory, self.state, self.classes.get, self.selectors, cache)
        self.binding_timeout = binding_timeout
        # Filter answers by claim signature, then node (see ``_plan``).
        self._filter_cache: dict[str, dict[str, tuple[int, int, int, Plan | str]]] = {}
        # The same answers' verdicts by node row, for the scheduler's walk (``filter_rows``).
        self.verdicts = RowVerdicts()
        self._watchers: dict[str, list[asyncio.Event]] = {}
        # Claims made for a pod from a template, by (pod uid, pod claim name): found even before the
        # claim controller's write of the pod's status.resourceClaimStatuses reaches the scheduler.
        self._generated: dict[tuple[str, str], str] = {}
        # The PodGroups (``ns/name`` -> object), for claims shared by a group (set by the plugin).
        self.podgroups: Callable[[], Mapping[str, Mapping[str, Any]]] = dict
        # Allocations Reserve holds in memory, by claim key: a group's claim allocated for one
        # member is, for its siblings' cycles, allocated there before PreBind writes it.
        self._assumed_alloc: dict[str, dict[str, Any]] = {}
        # The pods whose PreBind wrote a group claim's reservation (release frees it with the last).
        self._group_users: dict[str, set[str]] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self.filter_calls = 0
        self.filter_cache_hits = 0

    # -- informer handlers

    def on_slice(self, obj: Mapping[str, Any]) -> None:
        self.inventory.upsert(obj)

    def on_slice_delete(self, obj: Mapping[str, Any]) -> None:
        self.inventory.remove(obj)

    def on_rule(self, obj: Mapping[str, Any]) -> None:
        """A DeviceTaintRule added or changed: its taint on the devices it selects."""
        self.inventory.rule_set(obj)

    def on_rule_delete(self, obj: Mapping[str, Any]) -> None:
        self.inventory.rule_remove(obj)

    def on_class(self, obj: Mapping[str, Any]) -> None:
        self.classes[obj["metadata"]["name"]] = obj
        self._class_changed()

    def on_class_delete(self, obj: Mapping[str, Any]) -> None:
        self.classes.pop(obj["metadata"]["name"], None)
        self._class_changed()

    def _class_changed(self) -> None:
        self.extended_names.update(self.classes.values())
        # Selector results are cached per device by selector text, which a class change
        # alters; the per-node answers are not, so drop them.
        self._filter_cache.clear()
        self.verdicts.clear()

    def on_claim(self, obj: Mapping[str, Any]) -> None:
        key = _key(obj)
        have = self.claims.get(key)
        if have is obj:
            return  # seen already (the plugin records claims before the queue's PreEnqueue)
        if have is not None and _rv(obj) < _rv(have):
            # Older than what PreBind already wrote and recorded (the informer catching up):
            # taking it would drop an allocation and free its devices for a second claim.
            return
        self.claims[key] = obj
        if (obj.get("status") or {}).get("allocation"):
            self._assumed_alloc.pop(key, None)
        else:
            self._group_users.pop(key, None)
        gen = _generated_for(obj)
        if gen is not None:
            self._generated[gen] = obj["metadata"]["name"]
        self.state.set_claim(key, entries_of(obj))
        for ev in self._watchers.get(key, ()):
            ev.set()

    def on_claim_delete(self, obj: Mapping[str, Any]) -> None:
        key = _key(obj)
        self.claims.pop(key, None)
        self._group_users.pop(key, None)
        self._locks.pop(key, None)
        gen = _generated_for(obj)
        if gen is not None and self._generated.get(gen) == obj["metadata"]["name"]:
            del self._generated[gen]
        self.state.set_claim(key, [])
        for ev in self._watchers.get(key, ()):
            ev.set()

    # -- extension points

    def _group_of(self, pod: Mapping[str, Any]) -> tuple[Mapping[str, Any] | None, set[str]]:
        """The pod's PodGroup and the names of its claims that are the group's (KEP-5729)."""
        group = group_name(pod)
        if group is None:
            return None, set()
        podgroup = self.podgroups().get(f"{(pod.get('metadata') or {}).get('namespace', '')}/{group}")
        return podgroup, group_claim_names(pod, podgroup)

    def _resolve(self, pod: Mapping[str, Any]) -> list[tuple[str, str | None, Mapping[str, Any] | None]]:
        """(pod claim name, ResourceClaim name or None, the PodGroup if the claim is the group's)."""
        uid = (pod.get("metadata") or {}).get("uid", "")
        podgroup, shared = self._group_of(pod)
        out: list[tuple[str, str | None, Mapping[str, Any] | None]] = []
        for pod_claim, claim_name in pod_claim_names(pod):
            if podgroup is not None and pod_claim in shared:
                if claim_name is None:
                    claim_name = status_claim_name(podgroup, pod_claim) or self._generated.get(
                        ((podgroup.get("metadata") or {}).get("uid", ""), pod_claim))
                out.append((pod_claim, claim_name, podgroup))
            else:
                out.append((pod_claim, claim_name or self._generated.get((uid, pod_claim)), None))
        return out

    def missing_claim(self, pod: Mapping[str, Any]) -> str | None:
        """Why the pod cannot be tried yet, or None: PreEnqueue's question, as upstream's
        ``foreachPodResourceClaim`` asks it there (and again in PreFilter): a claim not
        created, being deleted, or generated for another pod."""
        meta = pod.get("metadata") or {}
        ns, uid = meta.get("namespace", ""), meta.get("uid", "")
        for pod_claim, name, podgroup in self._resolve(pod):
            if name is None:
                return f'waiting for resource claim "{pod_claim}" to be created from its template'
            claim = self.claims.get(f"{ns}/{name}")
            if claim is None:
                return f'resourceclaim "{name}" not found'
            cmeta = claim.get("metadata") or {}
            if cmeta.get("deletionTimestamp"):
                return f'resourceclaim "{name}" is being deleted'
            if podgroup is None and any(ref.get("controller") and ref.get("kind") == "Pod"
                                        and ref.get("uid") not in ("", None, uid)
                                        for ref in cmeta.get("ownerReferences") or ()):
                return f'resourceclaim "{name}" was not created for this pod'
        return None

    def pre_filter(self, pod: Mapping[str, Any]) -> PodClaims | None:
        ext = extended_requests(pod, self.extended_names)
        if not ext and not pod_claim_names(pod):
            return None
        meta = pod.get("metadata") or {}
        ns, uid = meta.get("namespace", ""), meta.get("uid", "")
        claims: list[Mapping[str, Any]] = []
        consumers: list[dict[str, str]] = []
        expected: dict[int, Mapping[str, Any]] | None = None
        seen: set[str] = set()
        pod_consumer = {"resource": "pods", "name": meta.get("name", ""), "uid": uid}
        for pod_claim, claim_name, podgroup in self._resolve(pod):
            if claim_name is None:
                raise Unschedulable(f'waiting for resource claim "{pod_claim}" to be created from its template')
            if claim_name in seen:
                continue
            seen.add(claim_name)
            claim = self.claims.get(f"{ns}/{claim_name}")
            if claim is None:
                raise Unschedulable(f'resourceclaim "{claim_name}" not found')
            cmeta = claim.get("metadata") or {}
            if cmeta.get("deletionTimestamp"):
                raise Unschedulable(f'resourceclaim "{claim_name}" is being deleted')
            who = group_consumer(podgroup) if podgroup is not None else pod_consumer
            if podgroup is not None:
                owner = owner_podgroup(claim)
                if owner is not None and owner[1] != who["uid"]:
                    raise Unschedulable(f'resourceclaim "{claim_name}" was not created for this pod group')
            for ref in cmeta.get("ownerReferences") or []:
                if ref.get("controller") and ref.get("kind") == "Pod" and ref.get("uid") not in ("", None, uid):
                    raise Unschedulable(f'resourceclaim "{claim_name}" was not created for this pod')
            reserved = (claim.get("status") or {}).get("reservedFor") or []
            if len(reserved) >= RESERVED_FOR_MAX and not any(r.get("uid") == who["uid"] for r in reserved):
                raise Unschedulable(f'resourceclaim "{claim_name}" is in use by too many consumers')
            if podgroup is not None:
                if expected is None:
                    expected = {}
                held = (claim.get("status") or {}).get("allocation")
                if not held:
                    held = self._assumed_alloc.get(_key(claim))
                    if held is not None:  # a sibling's Reserve allocated it: use that allocation
                        claim = {**claim, "status": {**(claim.get("status") or {}), "allocation": held}}
                if held:
                    expected[len(claims)] = held
            claims.append(claim)
            consumers.append(who)
        if not ext:
            return self._pod_claims(pod, claims, consumers, expected)
        plain = self._pod_claims(pod, list(claims), list(consumers), expected) if claims else None
        claims.append(extended_claim(pod, ext))
        consumers.append(pod_consumer)
        pc = self._pod_claims(pod, claims, consumers, expected)
        pc.extended, pc.extended_requests, pc.device_plugin = len(claims) - 1, ext, plain
        return pc

    def _pod_claims(self, pod: Mapping[str, Any], claims: list[Mapping[str, Any]],
                    consumers: list[dict[str, str]], expected: dict[int, Mapping[str, Any]] | None) -> PodClaims:
        meta = pod.get("metadata") or {}
        ns, uid = meta.get("namespace", ""), meta.get("uid", "")
        to_allocate = [i for i, c in enumerate(claims) if not (c.get("status") or {}).get("allocation")]
        if to_allocate:
            try:
                # Bad classes or selectors fail every node alike: say so once.
                self.allocator.validate([claims[i] for i in to_allocate])
            except AllocationError as e:
                raise Unschedulable(str(e)) from None
        sig = claim_signature([claims[i] for i in to_allocate])
        allocated = [(c["metadata"]["name"], ((c.get("status") or {}).get("allocation") or {}).get("nodeSelector"))
                     for i, c in enumerate(claims) if i not in to_allocate]
        answers: dict[str, tuple[int, int, int, Plan | str]] = {}
        if self.cache:
            if sig not in self._filter_cache and len(self._filter_cache) >= MAX_SIGNATURES:
                self._filter_cache.clear()  # many distinct claim specs: start over rather than grow
                self.verdicts.clear()
            answers = self._filter_cache.setdefault(sig, {})
        return PodClaims(f"{ns}/{meta.get('name', '')}", uid, claims, to_allocate, sig, allocated=allocated,
                         answers=answers, consumers=consumers, expected=expected)

    def _plan(self, pc: PodClaims, node_name: str, labels: Mapping[str, str]) -> Plan | str:
        # Everything an answer for this node depends on: the slices (any change), the allocations
        # in its own pools and in shared pools. A claim in a pool unknown to the inventory bumps
        # the shared generation (its pool has no node), so none is missed.
        self.filter_calls += 1
        st = self.state
        inv_version, shared, own = self.inventory.version, st.shared_generation, st.node_generation.get(node_name, 0)
        cached = pc.answers.get(node_name)
        if cached is not None and cached[0] == inv_version and cached[1] == shared and cached[2] == own:
            self.filter_cache_hits += 1
            return cached[3]
        try:
            answer: Plan | str = self.allocator.allocate(node_name, labels, [pc.claims[i] for i in pc.to_allocate])
        except Unsatisfiable:
            # upstream's Filter gives one reason whatever the node lacks (its allocator returns
            # no result, not why), so the nodes' reasons fold into one count in FailedScheduling
            answer = CANNOT_ALLOCATE
        except AllocationError as e:
            answer = str(e)
        pc.answers[node_name] = (inv_version, shared, own, answer)
        return answer

    def subrequests(self, pc: PodClaims, node_name: str, labels: Mapping[str, str]) -> list[set[str]] | None:
        """Per claim of ``pc``, the requests its allocation on this node would name
        (``"gpu/latest"`` for a ``firstAvailable`` entry): the claims already allocated by
        their results, the others by the plan ``filter`` found (its cache); None if the node
        cannot hold them."""
        out = [{str(r.get("request", "")) for r in ((c.get("status") or {}).get("allocation") or {})
                .get("devices", {}).get("results") or ()} for c in pc.claims]
        if pc.to_allocate:
            plan = self._plan(pc, node_name, labels)
            if plan.__class__ is str:
                return None
            assert isinstance(plan, Plan)
            for n, i in enumerate(pc.to_allocate):
                out[i] = {p.alt.request for p in plan.picks[n]}
        return out

    def filter(self, pc: PodClaims, node_name: str, labels: Mapping[str, str]) -> str | None:
        """None when the node can satisfy the pod's claims, else why not."""
        for _, selector in pc.allocated:
            if selector and not node_selector_matches(selector, node_name, labels):
                return NOT_AVAILABLE_ON_NODE
        if not pc.to_allocate:
            return None
        answer = self._plan(pc, node_name, labels)
        return answer if answer.__class__ is str else None

    def filter_rows(self, pc: PodClaims, nodes: Sequence[Any], rows: Ints, wanted: int) -> Ints:
        """``filter`` over ``nodes[i]`` (NodeInfos) for each i of ``rows``: the rows that pass,
        in order, the first ``wanted`` of them. Over the scheduler's node columns, the
        verdicts are read as a column (``verdicts.py``) and only the unknown ones computed;
        otherwise the answer cache is looked up inline. Either way the generations are read
        once: ``_plan`` only computes, it changes neither the inventory nor the allocated state."""
        if not pc.to_allocate and not pc.allocated:
            return rows[:wanted]
        columns = getattr(nodes, "columns", None)
        if columns is not None and self.cache and not pc.allocated:
            return self._filter_columns(pc, nodes, columns, rows, wanted)
        keep: list[int] = []
        inv_version, shared, own = self.inventory.version, self.state.shared_generation, self.state.node_generation
        answers = pc.answers
        looked = hits = 0
        for i in rows.tolist():
            node = nodes[i]
            name = node.name
            if pc.allocated and any(sel and not node_selector_matches(sel, name, node.labels)
                                    for _, sel in pc.allocated):
                continue  # (``filter``'s first test)
            if pc.to_allocate:
                looked += 1
                cached = answers.get(name)
                if cached is not None and cached[0] == inv_version and cached[1] == shared \
                        and cached[2] == own.get(name, 0):
                    hits += 1
                    answer = cached[3]
                else:
                    answer = self._plan(pc, name, node.labels)  # (it counts its own call)
                    looked -= 1
                if answer.__class__ is str:
                    continue
            keep.append(i)
            if len(keep) >= wanted:
                break
        self.filter_calls += looked
        self.filter_cache_hits += hits
        return np.asarray(keep, dtype=np.int64)

    def _filter_columns(self, pc: PodClaims, nodes: Sequence[Any], columns: Any, rows: Ints, wanted: int) -> Ints:
        changed = self.state.changed_nodes
        if changed:
            where = columns.row
            self.verdicts.invalidate(where[n] for n in changed if n in where)
            changed.clear()
        epoch = (self.inventory.version, self.state.shared_generation, id(columns), columns.removals)
        col = self.verdicts.column(pc.signature, epoch, columns.size)
        v = col[rows]
        unknown = np.flatnonzero(v == UNKNOWN)
        examined, computed = len(rows), 0
        if len(unknown):
            known_passes = np.cumsum(v == 1)  # passes among the known verdicts up to each position
            found = 0
            for pos in unknown.tolist():
                if known_passes[pos] + found >= wanted:  # enough pass before this one
                    examined = pos
                    break
                i = int(rows[pos])
                node = nodes[i]
                ok = self._plan(pc, node.name, node.labels).__class__ is not str  # (it counts itself)
                v[pos] = col[i] = 1 if ok else 0
                found += ok
                computed += 1
        self.filter_calls += examined - computed
        self.filter_cache_hits += examined - computed
        return rows[np.flatnonzero(v == 1)[:wanted]]

    def reserve(self, pc: PodClaims, node_name: str, labels: Mapping[str, str]) -> str | None:
        """Hold the devices for the pod on ``node_name`` (in memory); None on success."""
        if not pc.to_allocate:
            return None
        answer = self._plan(pc, node_name, labels)  # recomputed if anything changed since filter
        if isinstance(answer, str):
            return answer
        for n, i in enumerate(pc.to_allocate):
            key = _key(pc.claims[i])
            self.state.assume(key, answer.entries(n))
            if pc.expected is not None and pc.consumers[i]["resource"] != "pods":
                pc.expected[i] = self._assumed_alloc[key] = answer.allocation(n, node_name)
        pc.reserved = (node_name, answer)
        return None

    def copies(self, pc: PodClaims, node_name: str, labels: Mapping[str, str], limit: int,
               held: list[str]) -> int:
        """How many pods with claims like ``pc``'s (siblings from the same templates) the
        node's devices hold at once, up to ``limit``: their own claims allocated one after the
        other, each seeing the devices the previous ones took. What they take stays held,
        under the keys appended to ``held``, until ``release_copies(held)``, so a walk over a
        gang's candidate domain counts devices of pools shared by its nodes once. A group's
        claims (KEP-5729) are allocated once for all: they count as ``filter`` found them."""
        if self.filter(pc, node_name, labels) is not None:
            return 0
        own = [i for i in pc.to_allocate if not pc.consumers or pc.consumers[i]["resource"] == "pods"]
        if not own:
            return limit
        claims = [pc.claims[i] for i in own]
        n = 0
        while n < limit:
            try:
                plan = self.allocator.allocate(node_name, labels, claims)
            except (Unsatisfiable, AllocationError):
                break
            for j in range(len(claims)):
                key = f"\0copies/{len(held)}"
                held.append(key)
                self.state.assume(key, plan.entries(j))
            n += 1
        return n

    def release_copies(self, held: list[str]) -> None:
        """Let go what ``copies`` held."""
        for key in held:
            self.state.forget(key)
        held.clear()

    def unreserve(self, pc: PodClaims) -> None:
        """Forget what ``reserve`` held (idempotent; fine without a reserve)."""
        if pc.reserved is None:
            return
        for i in pc.to_allocate:
            key = _key(pc.claims[i])
            self.state.forget(key)
            if pc.expected is not None:
                mine = pc.expected.pop(i, None)
                if mine is not None and self._assumed_alloc.get(key) is mine:  # not a later member's
                    del self._assumed_alloc[key]
        pc.reserved = None

    async def pre_bind(self, client: Any, pc: PodClaims, pod: Mapping[str, Any], node_name: str,
                       waiting_outside: contextlib.AbstractAsyncContextManager[Any] | None = None,
                       on_wait: Callable[[], None] | None = None) -> None:
        """Write each claim's allocation and reservation; wait for binding conditions, inside
        ``waiting_outside`` (the binding cycle's place among the writers given up meanwhile:
        ``framework.BindSlot``), having called ``on_wait`` (the plugin's event).

        Raises ``BindingFailed`` (after releasing what it wrote) when it cannot finish."""
        plan = pc.reserved[1] if pc.reserved is not None and pc.reserved[0] == node_name else None
        waiting: list[str] = []
        try:
            for i, claim in enumerate(pc.claims):
                if pc.consumers and pc.consumers[i]["resource"] != "pods":
                    # A group's claim: its members' PreBinds run side by side; one writes at a time.
                    async with self._locks.setdefault(_key(claim), asyncio.Lock()):
                        if await self._bind_group_claim(client, pc, i):
                            waiting.append(_key(claim))
                elif await self._bind_claim(client, pc, i, pod, node_name, plan):
                    waiting.append(_key(claim))
        except ApiError as e:
            await self.release(client, pc, pod)
            raise BindingFailed(f"writing resourceclaim status: {e}") from None
        except BindingFailed:
            await self.release(client, pc, pod)
            raise
        if waiting:
            if on_wait is not None:
                on_wait()
            try:
                async with waiting_outside or contextlib.nullcontext():
                    await self._wait_binding(waiting)
            except BindingFailed:
                await self.release(client, pc, pod)
                raise

    async def _bind_claim(self, client: Any, pc: PodClaims, i: int, pod: Mapping[str, Any], node_name: str,
                          plan: Plan | None) -> bool:
        """PreBind's write for the pod's claim ``i``: True when it must wait for binding conditions."""
        if i == pc.extended and plan is not None:
            await self._create_extended_claim(client, pc, i, pod)
        claim = pc.claims[i]
        meta = pod.get("metadata") or {}
        consumer = {"resource": "pods", "name": meta.get("name", ""), "uid": meta.get("uid", "")}
        cmeta = claim["metadata"]
        key = _key(claim)
        path = resource_path("resource.k8s.io", "v1", "resourceclaims", cmeta["namespace"], cmeta["name"])
        latest = self.claims.get(key, claim)
        status = dict(latest.get("status") or {})
        reserved = list(status.get("reservedFor") or [])
        allocating = i in pc.to_allocate
        if not allocating and any(r.get("uid") == consumer["uid"] for r in reserved):
            return False
        if allocating:
            if plan is None:
                raise BindingFailed(f"claim {cmeta['name']}: no reserved allocation for node {node_name}")
            if status.get("allocation"):
                raise BindingFailed(f"claim {cmeta['namespace']}/{cmeta['name']} got allocated elsewhere in the "
                                    "meantime")
            latest = await self._add_finalizer(client, path, latest)
            status["allocation"] = plan.allocation(pc.to_allocate.index(i), node_name)
        reserved.append(consumer)
        status["reservedFor"] = reserved
        updated = await client.update(path + "/status", {**latest, "status": status})
        if key not in pc.written:  # (an extended-resource claim is in since its create)
            pc.written.append(key)
        self.on_claim(updated)
        return allocating and _has_binding_conditions(status["allocation"])

    async def _create_extended_claim(self, client: Any, pc: PodClaims, i: int, pod: Mapping[str, Any]) -> None:
        """The claim for the pod's extended resources, held in memory until now, created in the
        API (owned by the pod; the finalizer is added after, as to any claim: on the create the
        claim controller would take it off a claim without consumers) and recorded in the pod's
        ``status.extendedResourceClaimStatus``; the devices Reserve held move to its key."""
        meta = pod.get("metadata") or {}
        ns, name = meta.get("namespace", ""), meta.get("name", "")
        stand_in = pc.claims[i]
        body = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                "metadata": {"generateName": f"{name}-extended-resources-", "namespace": ns,
                             "annotations": {EXTENDED_ANNOTATION: "true"},
                             "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": name,
                                                  "uid": meta.get("uid", ""), "controller": True,
                                                  "blockOwnerDeletion": True}]},
                "spec": stand_in["spec"]}
        created = await client.create(resource_path("resource.k8s.io", "v1", "resourceclaims", ns), body)
        held = self.state._assumed.get(_key(stand_in))
        if held is not None:
            self.state.assume(_key(created), held)
            self.state.forget(_key(stand_in))
        pc.claims[i] = created
        self.on_claim(created)
        pc.written.append(_key(created))  # (release deletes it)
        await client.patch(resource_path("", "v1", "pods", ns, name) + "/status",
                           {"status": {"extendedResourceClaimStatus": {
                               "resourceClaimName": created["metadata"]["name"],
                               "requestMappings": request_mappings(pc.extended_requests)}}},
                           patch_type="merge")

    async def _bind_group_claim(self, client: Any, pc: PodClaims, i: int) -> bool:
        """PreBind for a claim of the pod's PodGroup (KEP-5729), under the claim's lock: True when
        the pod must wait for binding conditions.

        The pod binds with the allocation it was filtered and reserved against (``pc.expected``),
        whoever writes it: the first member's PreBind writes it and the group's reservation, the
        others find them. If the claim now holds another allocation (its members were unreserved
        and another member reserved it elsewhere), or none any more, the pod is not bound: it is
        scheduled again. Every member waits for the devices' binding conditions, as upstream's
        PreBind waits for those of all the pod's claims."""
        claim = pc.claims[i]
        consumer = pc.consumers[i]
        cmeta = claim["metadata"]
        key = _key(claim)
        name = cmeta["name"]
        latest = self.claims.get(key, claim)
        status = dict(latest.get("status") or {})
        reserved = list(status.get("reservedFor") or [])
        expected = pc.expected.get(i) if pc.expected is not None else None
        if expected is None:
            raise BindingFailed(f"claim {name}: no allocation was reserved for this pod")
        current = status.get("allocation") or self._assumed_alloc.get(key)
        if current is None:
            raise BindingFailed(f"claim {name}: its group's allocation was given up")
        if not same_allocation(current, expected):
            raise BindingFailed(f"claim {name}: allocated to other devices or nodes since this pod was scheduled")
        for_group = any(r.get("uid") == consumer["uid"] for r in reserved)
        users = self._group_users.get(key)
        if users is None:
            users = self._group_users[key] = set()
            if status.get("allocation") and for_group:
                users.add(_EARLIER)  # reserved before this scheduler kept count: bound members may use it
        users.add(pc.pod_uid)
        pc.written.append(key)  # (release takes the pod out of the group's users)
        if not status.get("allocation") or not for_group:
            path = resource_path("resource.k8s.io", "v1", "resourceclaims", cmeta["namespace"], name)
            if not status.get("allocation"):  # held by a member's Reserve: the first PreBind writes it
                latest = await self._add_finalizer(client, path, latest)
                status["allocation"] = expected
            if not for_group:
                reserved.append(consumer)
                status["reservedFor"] = reserved
            self.on_claim(await client.update(path + "/status", {**latest, "status": status}))
        return _has_binding_conditions(status["allocation"])

    @staticmethod
    async def _add_finalizer(client: Any, path: str, latest: Mapping[str, Any]) -> Mapping[str, Any]:
        meta = latest.get("metadata") or {}
        if FINALIZER in (meta.get("finalizers") or []):
            return latest
        result: Mapping[str, Any] = await client.patch(path, {"metadata": {
            "finalizers": [*(meta.get("finalizers") or []), FINALIZER],
            "resourceVersion": meta.get("resourceVersion")}})
        return result

    async def _wait_binding(self, keys: list[str]) -> None:
        deadline = time.monotonic() + self.binding_timeout
        events = {k: asyncio.Event() for k in keys}
        for k, ev in events.items():
            self._watchers.setdefault(k, []).append(ev)
        try:
            pending = set(keys)
            while pending:
                for k in list(pending):
                    claim = self.claims.get(k)
                    if claim is None:
                        raise BindingFailed(f"resourceclaim {k} was deleted while waiting for binding conditions")
                    if not (claim.get("status") or {}).get("allocation"):
                        raise BindingFailed(f"resourceclaim {k} was deallocated while waiting for binding conditions")
                    ok, failure = binding_state(claim)
                    if failure:
                        raise BindingFailed(f"claim {k.partition('/')[2]} binding failed: {failure}")
                    if ok:
                        pending.discard(k)
                if not pending:
                    return
                left = deadline - time.monotonic()
                if left <= 0:  # upstream's words when its poll's deadline passes
                    raise BindingFailed("device binding timeout")
                waits = [asyncio.ensure_future(events[k].wait()) for k in pending]
                _, not_done = await asyncio.wait(waits, timeout=left, return_when=asyncio.FIRST_COMPLETED)
                for w in not_done:
                    w.cancel()
                for k in pending:
                    events[k].clear()
        finally:
            for k, ev in events.items():
                lst = self._watchers.get(k, [])
                if ev in lst:
                    lst.remove(ev)
                if not lst:
                    self._watchers.pop(k, None)

    async def release(self, client: Any, pc: PodClaims, pod: Mapping[str, Any]) -> None:
        """Undo what ``pre_bind`` wrote: the pod leaves reservedFor; claims it allocated lose the allocation.

        A group's claim stays reserved for the group while another member's PreBind uses it
        (wrote it or found it written), and loses its allocation with the last of them."""
        uid = (pod.get("metadata") or {}).get("uid", "")
        allocated_keys = {_key(pc.claims[i]) for i in pc.to_allocate}
        consumers = {_key(c): pc.consumers[i] for i, c in enumerate(pc.claims)} if pc.consumers else {}
        for key in pc.written:
            who = consumers.get(key) or {"uid": uid, "resource": "pods"}
            if who["resource"] != "pods":
                async with self._locks.setdefault(key, asyncio.Lock()):  # not while a member's PreBind writes
                    await self._release_group_claim(client, key, uid, who)
                continue
            claim = self.claims.get(key)
            if claim is None:
                continue
            ns, name = key.split("/", 1)
            path = resource_path("resource.k8s.io", "v1", "resourceclaims", ns, name) + "/status"
            status = dict(claim.get("status") or {})
            status["reservedFor"] = [r for r in status.get("reservedFor") or [] if r.get("uid") != uid]
            if not status["reservedFor"]:
                status.pop("reservedFor")  # omitted when empty, as kube-apiserver stores it
                if key in allocated_keys:
                    status.pop("allocation", None)
                    status.pop("devices", None)
            try:
                self.on_claim(await client.update(path, {**claim, "status": status}))
                if (claim.get("metadata") or {}).get("annotations", {}).get(EXTENDED_ANNOTATION) == "true":
                    # the scheduler's own claim goes, as upstream's Unreserve deletes it (the claim
                    # controller takes the finalizer off a claim left without consumers)
                    await client.delete(path.removesuffix("/status"))
            except ApiError:
                continue  # the claim controller releases claims whose consumers are gone
        pc.written.clear()
        self.unreserve(pc)

    async def _release_group_claim(self, client: Any, key: str, uid: str, who: Mapping[str, Any]) -> None:
        users = self._group_users.get(key)
        if users is None:
            return  # freed already (by the last member, or deallocated)
        users.discard(uid)
        if users:
            return
        del self._group_users[key]
        claim = self.claims.get(key)
        if claim is None:
            return
        status = dict(claim.get("status") or {})
        status["reservedFor"] = [r for r in status.get("reservedFor") or [] if r.get("uid") != who["uid"]]
        if not status["reservedFor"]:
            status.pop("reservedFor")  # omitted when empty, as kube-apiserver stores it
            status.pop("allocation", None)
            status.pop("devices", None)
        if status == (claim.get("status") or {}):
            return
        ns, name = key.split("/", 1)
        path = resource_path("resource.k8s.io", "v1", "resourceclaims", ns, name) + "/status"
        with contextlib.suppress(ApiError):  # the claim controller frees it once the PodGroup is gone
            self.on_claim(await client.update(path, {**claim, "status": status}))
