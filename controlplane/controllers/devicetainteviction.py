"""The device taint eviction controller of kube-controller-manager (KEP-5055, upstream's
``pkg/controller/devicetainteviction``): pods go when a device allocated to one of their
ResourceClaims is tainted ``NoExecute`` and the claim does not tolerate it.

A device's NoExecute taints are those its ResourceSlice lists (the pool's newest
generation) and those of the DeviceTaintRules that select it (``registry/devicetaintrules.py``'s
``selects``: driver, pool and device name). For every allocated claim, as upstream's
``claimEvictionTime`` decides it, each such taint of each allocated device is weighed
against the tolerations its allocation result carries (only those of effect NoExecute):

- not tolerated: the pods go at the taint's ``timeAdded``;
- tolerated with ``tolerationSeconds``: at ``timeAdded`` plus the shortest of them (a
  negative one counts as 0); tolerated without: never, for this taint.

The claim's time is the earliest of its taints'; a pod's, the earliest of its claims'
(named by ``resourceClaimName``, or by its status for a template's), counting only claims
reserved for the pod, or for its PodGroup (KEP-5729: a claim reserved for
``scheduling.k8s.io`` ``podgroups`` reaches every pod of that group, ``spec.schedulingGroup``),
and only once it is bound to a node. At that time the pod gets the
event ``DeviceTaintManagerEviction`` (``Marking for deletion``), the ``DisruptionTarget``
condition (``DeletionByDeviceTaintManager``) and is deleted with a UID precondition; a pod
already being deleted is left alone, one evicted is not evicted again. A taint removed or
tolerated before then cancels it (``Cancelling deletion``).

Each DeviceTaintRule gets upstream's ``EvictionInProgress`` condition in its status:
written at once when the rule is created or its spec changes, then again at most every
10 s while its pods are being evicted (``observedGeneration`` the rule's generation):

- NoExecute: True ``PodsPendingEviction`` (``2 pods need to be evicted in 1 namespace.``)
  while pods it taints wait for their time, then False ``Completed`` once it evicted some,
  or ``NotStarted`` if it never did;
- None: False ``NoEffect``, saying once what NoExecute would do (devices published and
  allocated that it selects, pods it would evict);
- NoSchedule: False ``OtherEffect`` (eviction only happens for NoExecute).

The message ends with the pods the rule evicted since the controller started.
"""

from __future__ import annotations

import datetime
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import httpx

from controlplane.client import ApiError, Client, resource_path
from controlplane.client.workqueue import WorkQueue, run_controller
from controlplane.podgeneration import observing
from controlplane.registry.devicetaintrules import selects

from .events import Recorder
from .ownership import key_of, meta_of

if TYPE_CHECKING:
    from controlplane.config import Config

__all__ = ["DeviceTaintEvictionController", "Eviction", "claim_eviction", "start", "toleration_seconds"]

REASON = "DeviceTaintManagerEviction"
CONDITION = "EvictionInProgress"
STATUS_PERIOD = 10.0  # upstream's ruleStatusPeriod
RETRY_SECONDS = 1.0
EVICTED_MEMORY = 500  # UIDs of pods evicted, remembered so that they are not evicted again
GROUP, VERSION = "resource.k8s.io", "v1"
log = logging.getLogger(__name__)

Obj = Mapping[str, Any]
SliceTaints = Callable[[str, str, str], Sequence[Obj]]


@dataclass(frozen=True)
class Eviction:
    """When a pod (or claim) is to go, and the rules among the taints that make it go."""

    when: float  # seconds since the epoch
    rules: tuple[str, ...] = ()

    def joined(self, other: Eviction | None) -> Eviction:
        if other is None:
            return self
        return Eviction(min(self.when, other.when), tuple(sorted({*self.rules, *other.rules})))


def _epoch(stamp: Any) -> float:
    """An RFC 3339 time as seconds since the epoch (now if missing or unreadable)."""
    try:
        return datetime.datetime.fromisoformat(str(stamp)).timestamp()
    except ValueError:
        return time.time()


def _now_stamp() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _tolerates(toleration: Obj, taint: Obj) -> bool:
    """``resourceclaim.ToleratesTaint`` for a NoExecute toleration (the caller checks the effect)."""
    key = toleration.get("key") or ""
    if key and key != taint.get("key"):
        return False
    if toleration.get("operator", "Equal") == "Exists":
        return True
    return (toleration.get("value") or "") == (taint.get("value") or "")


def toleration_seconds(taint: Obj, tolerations: Iterable[Obj]) -> float | None:
    """How long ``tolerations`` let a NoExecute taint be: None when not at all, ``inf``
    when for ever, else the shortest ``tolerationSeconds`` of those that match (0 at least)."""
    found: float | None = None
    for toleration in tolerations:
        if toleration.get("effect") != "NoExecute" or not _tolerates(toleration, taint):
            continue
        seconds = toleration.get("tolerationSeconds")
        if seconds is None:
            return float("inf")
        seconds = max(float(seconds), 0.0)
        found = seconds if found is None else min(found, seconds)
    return found


def _taint_eviction(taint: Obj, tolerations: Iterable[Obj]) -> float | None:
    """When one taint makes its pods go, or None (tolerated for ever)."""
    seconds = toleration_seconds(taint, tolerations)
    if seconds == float("inf"):
        return None
    return _epoch(taint.get("timeAdded")) + (seconds or 0.0)


def claim_eviction(claim: Obj, slice_taints: SliceTaints, rules: Mapping[str, Obj]) -> Eviction | None:
    """The eviction an allocated claim's devices call for (``rules``: the NoExecute rules by
    name; ``slice_taints(driver, pool, device)``: the NoExecute taints its slice lists)."""
    eviction: Eviction | None = None
    allocation = (claim.get("status") or {}).get("allocation") or {}
    for result in (allocation.get("devices") or {}).get("results") or ():
        driver, pool, device = result.get("driver", ""), result.get("pool", ""), result.get("device", "")
        tolerations = result.get("tolerations") or ()
        tainted: list[tuple[Obj, str | None]] = [(t, None) for t in slice_taints(driver, pool, device)]
        tainted += [(rule["spec"]["taint"], name) for name, rule in rules.items()
                    if selects(rule, driver, pool, device)]
        for taint, rule_name in tainted:
            when = _taint_eviction(taint, tolerations)
            if when is not None:
                eviction = Eviction(when, (rule_name,) if rule_name else ()).joined(eviction)
    return eviction


def pod_claim_names(pod: Obj) -> list[str]:
    """The ResourceClaims a pod uses: by name, or as its status names a template's."""
    statuses = {s.get("name"): s.get("resourceClaimName")
                for s in (pod.get("status") or {}).get("resourceClaimStatuses") or ()}
    names = []
    for ref in (pod.get("spec") or {}).get("resourceClaims") or ():
        name = ref.get("resourceClaimName") or (statuses.get(ref.get("name")) if ref.get("resourceClaimTemplateName")
                                                else None)
        if name:
            names.append(name)
    return names


def _group_of(pod: Obj) -> str | None:
    """``namespace/podGroupName`` of a pod of a PodGroup, or None."""
    group = ((pod.get("spec") or {}).get("schedulingGroup") or {}).get("podGroupName")
    return f"{meta_of(pod).get('namespace', '')}/{group}" if group else None


def _is_group_ref(ref: Obj) -> bool:
    return ref.get("apiGroup") == "scheduling.k8s.io" and ref.get("resource") == "podgroups"


def _reserved_for(claim: Obj, pod: Obj) -> bool:
    """Whether the claim is reserved for the pod, or for the pod's PodGroup (KEP-5729).

    The group's entry is matched by name: the pods that name the group are its consumers, as
    upstream's controller finds them (an index of pods by PodGroup), scheduled or not."""
    uid = meta_of(pod).get("uid")
    group = ((pod.get("spec") or {}).get("schedulingGroup") or {}).get("podGroupName")
    for ref in (claim.get("status") or {}).get("reservedFor") or ():
        if ref.get("uid") == uid:
            return True
        if group and _is_group_ref(ref) and ref.get("name") == group:
            return True
    return False


class PublishedTaints:
    """The NoExecute taints ResourceSlices publish, by device, from each pool's newest generation."""

    def __init__(self) -> None:
        self.pools: dict[tuple[str, str], dict[str, Obj]] = {}  # (driver, pool) -> slice name -> slice

    @staticmethod
    def pool_of(slice_: Obj) -> tuple[str, str]:
        spec = slice_.get("spec") or {}
        return str(spec.get("driver", "")), str((spec.get("pool") or {}).get("name", ""))

    def set(self, slice_: Obj) -> None:
        self.pools.setdefault(self.pool_of(slice_), {})[str(meta_of(slice_).get("name"))] = slice_

    def remove(self, slice_: Obj) -> None:
        pool = self.pools.get(self.pool_of(slice_))
        if pool is not None:
            pool.pop(str(meta_of(slice_).get("name")), None)
            if not pool:
                del self.pools[self.pool_of(slice_)]

    def current(self, driver: str, pool: str) -> list[Obj]:
        slices = list((self.pools.get((driver, pool)) or {}).values())
        if not slices:
            return []
        newest = max(int(((s.get("spec") or {}).get("pool") or {}).get("generation") or 0) for s in slices)
        return [s for s in slices if int(((s.get("spec") or {}).get("pool") or {}).get("generation") or 0) == newest]

    def devices(self) -> Iterable[tuple[str, str, Obj]]:
        for driver, pool in self.pools:
            for slice_ in self.current(driver, pool):
                for device in (slice_.get("spec") or {}).get("devices") or ():
                    yield driver, pool, device

    def taints(self, driver: str, pool: str, device: str) -> list[Obj]:
        for slice_ in self.current(driver, pool):
            for d in (slice_.get("spec") or {}).get("devices") or ():
                if d.get("name") == device:
                    return [t for t in d.get("taints") or () if t.get("effect") == "NoExecute"]
        return []


def _no_execute_of(slice_: Obj | None) -> Any:
    """What of a slice the controller's decisions depend on: its generation and NoExecute taints."""
    if slice_ is None:
        return None
    spec = slice_.get("spec") or {}
    return ((spec.get("pool") or {}).get("generation"),
            [(d.get("name"), [t for t in d.get("taints") or () if t.get("effect") == "NoExecute"])
             for d in spec.get("devices") or () if d.get("taints")])


def _plural(n: int, one: str, many: str) -> str:
    return one if n == 1 else f"{n} {many}"


class DeviceTaintEvictionController:
    def __init__(self, client: Client, workers: int = 2) -> None:
        self.client = client
        self.workers = workers
        self.queue = WorkQueue()
        self.events = Recorder(client, "device-taint-eviction-controller")
        self.published = PublishedTaints()
        self.rules: dict[str, Obj] = {}  # every rule, by name
        self.evicting: dict[str, Obj] = {}  # the NoExecute ones
        self.scheduled: dict[str, tuple[str, Eviction]] = {}  # pod key -> (uid, its eviction)
        self.evicted: dict[str, None] = {}  # uids of pods evicted (oldest first, bounded)
        self.evicted_by_rule: dict[str, int] = {}  # rule uid -> pods it evicted
        self.members: dict[str, set[str]] = {}  # "ns/podgroup" -> keys of its pods with claims
        self.pods = client.informer("/api/v1/pods", on_add=self._pod_added, on_update=self._pod_updated,
                                    on_delete=self._pod_deleted)
        self.claims = client.informer(resource_path(GROUP, VERSION, "resourceclaims"), on_add=self._claim_changed,
                                      on_update=self._claim_updated, on_delete=self._claim_changed)
        self.slices = client.informer(resource_path(GROUP, VERSION, "resourceslices"), on_add=self._slice_added,
                                      on_update=self._slice_updated, on_delete=self._slice_deleted)
        self.rule_informer = client.informer(resource_path(GROUP, VERSION, "devicetaintrules"),
                                             on_add=lambda r: self._rule_changed(None, r), on_update=self._rule_changed,
                                             on_delete=lambda r: self._rule_changed(r, None))

    # -- events
    def _pod_added(self, pod: dict[str, Any]) -> None:
        if not (pod.get("spec") or {}).get("resourceClaims"):
            return
        group = _group_of(pod)
        if group is not None:
            self.members.setdefault(group, set()).add(key_of(pod))
        if (pod.get("spec") or {}).get("nodeName"):
            self.queue.add("pod:" + key_of(pod))

    def _pod_updated(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        # as upstream: only a binding or other claims change the decision (not the condition it writes)
        if (old.get("spec") or {}).get("nodeName") != (new.get("spec") or {}).get("nodeName") or \
                (old.get("status") or {}).get("resourceClaimStatuses") != \
                (new.get("status") or {}).get("resourceClaimStatuses"):
            self._pod_added(new)

    def _pod_deleted(self, pod: dict[str, Any]) -> None:
        self.scheduled.pop(key_of(pod), None)
        group = _group_of(pod)
        members = self.members.get(group) if group is not None else None
        if members is not None:
            members.discard(key_of(pod))
            if not members:
                del self.members[str(group)]

    def _claim_changed(self, claim: dict[str, Any]) -> None:
        ns = meta_of(claim).get("namespace", "")
        for ref in (claim.get("status") or {}).get("reservedFor") or ():
            if ref.get("resource") == "pods" and not ref.get("apiGroup"):
                self.queue.add(f"pod:{ns}/{ref.get('name', '')}")
            elif _is_group_ref(ref):  # reserved for a PodGroup: every pod of the group
                for key in self.members.get(f"{ns}/{ref.get('name', '')}", ()):
                    self.queue.add("pod:" + key)

    def _claim_updated(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        if old.get("status") != new.get("status"):
            self._claim_changed(old)
            self._claim_changed(new)

    def _slice_added(self, slice_: dict[str, Any]) -> None:
        self._slice_updated(None, slice_)

    def _slice_updated(self, old: dict[str, Any] | None, new: dict[str, Any]) -> None:
        if old is not None and PublishedTaints.pool_of(old) != PublishedTaints.pool_of(new):
            self.published.remove(old)
        self.published.set(new)
        if _no_execute_of(old) != _no_execute_of(new) and (old is not None or _no_execute_of(new)[1]):
            self.queue.add("all")

    def _slice_deleted(self, slice_: dict[str, Any]) -> None:
        self.published.remove(slice_)
        if _no_execute_of(slice_)[1]:
            self.queue.add("all")

    def _rule_changed(self, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        rule = new if new is not None else old
        assert rule is not None
        name = str(meta_of(rule).get("name"))
        if new is None:
            self.rules.pop(name, None)
            self.evicted_by_rule.pop(str(meta_of(rule).get("uid")), None)
        else:
            self.rules[name] = new
        if old is None or (new is not None and old.get("spec") != new.get("spec")):
            self.queue.add("rule:" + name)  # once at once, before evicting anything
        was = self.evicting.pop(name, None)
        if new is not None and ((new.get("spec") or {}).get("taint") or {}).get("effect") == "NoExecute":
            self.evicting[name] = new
        if was is not None or name in self.evicting:
            self.queue.add("all")

    # -- decisions
    def _claim(self, namespace: str, name: str) -> Obj | None:
        return self.claims.items.get(f"{namespace}/{name}")

    def pod_eviction(self, pod: Obj, rules: Mapping[str, Obj] | None = None) -> Eviction | None:
        """When a bound pod must go for the taints on its claims' devices, or None."""
        if not (pod.get("spec") or {}).get("nodeName"):
            return None
        meta = meta_of(pod)
        eviction: Eviction | None = None
        for name in pod_claim_names(pod):
            claim = self._claim(str(meta.get("namespace", "")), name)
            if claim is None or not _reserved_for(claim, pod):
                continue
            found = claim_eviction(claim, self.published.taints, self.evicting if rules is None else rules)
            if found is not None:
                eviction = found.joined(eviction)
        return eviction

    def _process(self, pod: Obj) -> None:
        key, uid = key_of(pod), str(meta_of(pod).get("uid", ""))
        eviction = None if uid in self.evicted else self.pod_eviction(pod)
        scheduled = self.scheduled.get(key)
        if eviction is None:
            if scheduled is not None:
                del self.scheduled[key]
                self.events.record("Pod", pod, REASON, "Cancelling deletion")
            return
        self.scheduled[key] = (uid, eviction)
        self.queue.add_after("evict:" + key, eviction.when - time.time())
        for name in eviction.rules:  # eviction in progress: the rule's status follows, not at once
            self.queue.add_after("rule:" + name, STATUS_PERIOD)

    async def sync(self, item: str) -> None:
        kind, _, key = item.partition(":")
        if kind == "all":
            for claim in list(self.claims.items.values()):
                if (claim.get("status") or {}).get("allocation"):
                    self._claim_changed(claim)
            for key in list(self.scheduled):  # a pod whose claims lost their taints meanwhile
                self.queue.add("pod:" + key)
        elif kind == "pod":
            pod = self.pods.items.get(key)
            if pod is None:
                self.scheduled.pop(key, None)
            else:
                self._process(pod)
        elif kind == "evict":
            await self._evict(key)
        elif kind == "rule":
            await self._rule_status(key)

    async def _evict(self, key: str) -> None:
        scheduled = self.scheduled.get(key)
        if scheduled is None:
            return
        uid, eviction = scheduled
        wait = eviction.when - time.time()
        if wait > 0:  # the time moved since this was queued
            self.queue.add_after("evict:" + key, wait)
            return
        ns, name = key.split("/", 1)
        path = resource_path("", "v1", "pods", ns, name)
        try:
            await self._delete(path, uid)
        except ApiError as e:
            if e.code not in (404, 409):  # gone, or another pod by now
                self._retry(key, e)
                return
        except (OSError, TimeoutError, httpx.HTTPError) as e:
            self._retry(key, e)
            return
        if self.scheduled.get(key) is scheduled:
            del self.scheduled[key]
        self.evicted[uid] = None
        if len(self.evicted) > EVICTED_MEMORY:
            del self.evicted[next(iter(self.evicted))]
        for rule_name in eviction.rules:
            rule = self.rules.get(rule_name)
            if rule is not None:
                rule_uid = str(meta_of(rule).get("uid"))
                self.evicted_by_rule[rule_uid] = self.evicted_by_rule.get(rule_uid, 0) + 1
                self.queue.add_after("rule:" + rule_name, STATUS_PERIOD)

    async def _delete(self, path: str, uid: str) -> None:
        """``addConditionAndDeletePod``: the pod's DisruptionTarget condition, then its deletion."""
        pod = await self.client.get(path)
        if meta_of(pod).get("uid") != uid:
            raise ApiError(404, "NotFound", "replaced by another pod of that name")
        if meta_of(pod).get("deletionTimestamp"):
            return  # being deleted already
        self.events.record("Pod", pod, REASON, "Marking for deletion")
        conditions = (pod.get("status") or {}).get("conditions") or ()
        if not any(c.get("type") == "DisruptionTarget" and c.get("status") == "True"
                   and c.get("reason") == "DeletionByDeviceTaintManager" for c in conditions):
            await self.client.patch(path + "/status", {"status": {"conditions": [observing(
                {"type": "DisruptionTarget", "status": "True", "reason": "DeletionByDeviceTaintManager",
                 "message": "Device Taint manager: deleting due to NoExecute taint",
                 "lastTransitionTime": _now_stamp()}, pod)]}}, patch_type="strategic")
        await self.client.delete(path, {"preconditions": {"uid": uid}})

    def _retry(self, key: str, error: BaseException) -> None:
        log.warning("device taint eviction of pod %s failed (%r); again in %.0f s", key, error, RETRY_SECONDS)
        self.queue.add_after("evict:" + key, RETRY_SECONDS)

    # -- the rules' status
    async def _rule_status(self, name: str) -> None:
        rule = self.rules.get(name)
        if rule is None:
            return
        meta = meta_of(rule)
        generation = int(meta.get("generation") or 0)
        existing = next((c for c in (rule.get("status") or {}).get("conditions") or ()
                         if c.get("type") == CONDITION), None)
        if existing is not None and existing.get("observedGeneration") == generation:
            since = time.time() - _epoch(existing.get("lastTransitionTime"))
            if since < STATUS_PERIOD:
                self.queue.add_after("rule:" + name, STATUS_PERIOD - since)
                return
        status, reason, message = self._rule_condition(name, rule)
        evicted = self.evicted_by_rule.get(str(meta.get("uid")), 0)
        if evicted:
            message = (message + " " if message else "") + \
                f"{_plural(evicted, '1 pod', 'pods')} evicted since starting the controller."
        condition = {"type": CONDITION, "status": status, "reason": reason, "message": message,
                     "observedGeneration": generation}
        if existing is not None and all(existing.get(k, "") == v for k, v in condition.items()):
            return
        condition["lastTransitionTime"] = _now_stamp()
        await self.client.patch(resource_path(GROUP, VERSION, "devicetaintrules", None, name) + "/status",
                                {"status": {"conditions": [condition]}},
                                patch_type="strategic")

    def _rule_condition(self, name: str, rule: Obj) -> tuple[str, str, str]:
        """(status, reason, message) of the rule's condition, before its evicted count."""
        effect = ((rule.get("spec") or {}).get("taint") or {}).get("effect")
        if effect == "NoExecute":
            pending = [k for k, (_, ev) in self.scheduled.items() if name in ev.rules]
            if pending:
                namespaces = len({k.split("/", 1)[0] for k in pending})
                need = "1 pod needs" if len(pending) == 1 else f"{len(pending)} pods need"
                return "True", "PodsPendingEviction", \
                    f"{need} to be evicted in {_plural(namespaces, '1 namespace', 'different namespaces')}."
            uid = str(meta_of(rule).get("uid"))
            return "False", "Completed" if self.evicted_by_rule.get(uid) else "NotStarted", ""
        if effect == "None":
            return "False", "NoEffect", self._simulated(name, rule)
        return "False", "OtherEffect", "Eviction only happens for the NoExecute effect."

    def _simulated(self, name: str, rule: Obj) -> str:
        """What the rule would do with effect NoExecute, in upstream's words."""
        as_no_execute = {**rule, "spec": {**rule["spec"], "taint": {**rule["spec"]["taint"], "effect": "NoExecute"}}}
        rules = {**self.evicting, name: as_no_execute}
        published = sum(selects(rule, d, p, dev.get("name", "")) for d, p, dev in self.published.devices())
        allocated, pods, namespaces = 0, 0, set()
        for claim in self.claims.items.values():
            results = (((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results")
            allocated += sum(selects(rule, r.get("driver", ""), r.get("pool", ""), r.get("device", ""))
                             for r in results or ())
        for pod in self.pods.items.values():
            eviction = self.pod_eviction(pod, rules) if not meta_of(pod).get("deletionTimestamp") else None
            if eviction is not None and name in eviction.rules:
                pods += 1
                namespaces.add(meta_of(pod).get("namespace"))
        return (f"{_plural(published, '1 published device', 'published devices')} selected. "
                f"{_plural(allocated, '1 allocated device', 'allocated devices')} selected. "
                f"{_plural(pods, '1 pod would', 'pods would')} be evicted in "
                f"{_plural(len(namespaces), '1 namespace', 'different namespaces')} if the effect was NoExecute. "
                "This information will not be updated again. Recreate the DeviceTaintRule to trigger an update.")

    async def run(self) -> None:
        await run_controller("device taint eviction controller",
                             (self.pods, self.claims, self.slices, self.rule_informer), self.queue, self.sync,
                             self.workers)


async def start(client: Client, config: Config) -> None:
    """The component entry point (``controlplane/components.py``)."""
    await DeviceTaintEvictionController(client).run()
