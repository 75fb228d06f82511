"""The disruption controller of kube-controller-manager: the status of each
PodDisruptionBudget (policy/v1), which ``pods/eviction`` reads and charges
(``api/rest.py``, ``_charge_budget``).

For each budget, over the pods its selector covers in its namespace
(``registry/disruption.py``), it writes expectedPods, currentHealthy,
desiredHealthy, disruptionsAllowed, observedGeneration and the
``DisruptionAllowed`` condition (SufficientPods or InsufficientPods). A budget whose
bound it cannot read (one stored before budgets were validated: ``minAvailable:
"1e9999"``) allows no disruption: the condition False, SyncFailed, with the reason, as
upstream's ``failSafe`` writes it. An eviction
records its pod in ``disruptedPods``. Such a pod stops counting as healthy, and
leaves that map once it is being deleted or gone, or after two minutes (upstream's
DeletionTimeout), whichever comes first: the budget is handled again when that time
comes, as upstream requeues it for a recheck, since no event says so.

The pods each budget covers are kept from pod events, so a sync costs the budget's
pods, not the cluster's. All pods are walked only when a budget appears or its
selector changes.

A budget whose selector covers no pod gets a Normal ``NoPods`` event, "No matching pods
found", at each sync, from upstream's source (``controllermanager``), as ``kubectl describe
pdb`` shows it.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from controlplane.client import Client, held_in, resource_path
from controlplane.client.workqueue import WorkQueue, run_controller
from controlplane.registry.disruption import BadBudget, budget, covers

from .events import Recorder
from .ownership import key_of, meta_of

if TYPE_CHECKING:
    from controlplane.config import Config

__all__ = ["DELETION_TIMEOUT", "DisruptionController", "start"]

DELETION_TIMEOUT = 120.0  # seconds a recorded eviction waits for its pod's deletion to be seen


def _parse(ts: Any) -> datetime.datetime | None:
    try:
        return datetime.datetime.strptime(str(ts), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.UTC)
    except ValueError:
        return None


class DisruptionController:
    def __init__(self, client: Client, workers: int = 2) -> None:
        self.client = client
        self.workers = workers
        self.queue = WorkQueue()
        self.events = Recorder(client, "controllermanager")  # upstream's source for this controller
        self.budgets = client.informer(resource_path("policy", "v1", "poddisruptionbudgets"),
                                       on_add=self._budget_changed, on_update=self._budget_updated,
                                       on_delete=self._budget_deleted)
        self.pods = client.informer("/api/v1/pods", on_add=self._pod_changed,
                                    on_update=lambda _old, new: self._pod_changed(new), on_delete=self._pod_deleted)
        self._by_namespace: dict[str, set[str]] = {}  # namespace -> budget keys
        self._covered: dict[str, dict[str, dict[str, Any]]] = {}  # budget key -> pod key -> pod

    # -- events
    def _budget_changed(self, pdb: dict[str, Any]) -> None:
        key = key_of(pdb)
        self._by_namespace.setdefault(meta_of(pdb).get("namespace", ""), set()).add(key)
        self._covered[key] = {key_of(p): p for p in held_in(self.pods.items, meta_of(pdb).get("namespace", ""))
                              if covers(pdb, p)}
        self.queue.add(key)

    def _budget_updated(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        if (old.get("spec") or {}).get("selector") != (new.get("spec") or {}).get("selector") \
                or key_of(new) not in self._covered:
            self._budget_changed(new)
        else:
            self.queue.add(key_of(new))

    def _budget_deleted(self, pdb: dict[str, Any]) -> None:
        key = key_of(pdb)
        self._covered.pop(key, None)
        keys = self._by_namespace.get(meta_of(pdb).get("namespace", ""))
        if keys is not None:
            keys.discard(key)

    def _pod_changed(self, pod: dict[str, Any]) -> None:
        keys = self._by_namespace.get(meta_of(pod).get("namespace", ""))
        if not keys:
            return
        pod_key = key_of(pod)
        for key in keys:
            pdb = self.budgets.items.get(key)
            covered = self._covered.setdefault(key, {})
            if pdb is not None and covers(pdb, pod):
                covered[pod_key] = pod
                self.queue.add(key)
            elif covered.pop(pod_key, None) is not None:
                self.queue.add(key)

    def _pod_deleted(self, pod: dict[str, Any]) -> None:
        keys = self._by_namespace.get(meta_of(pod).get("namespace", ""))
        if not keys:
            return
        pod_key = key_of(pod)
        for key in keys:
            if self._covered.get(key, {}).pop(pod_key, None) is not None:
                self.queue.add(key)

    # -- running
    async def run(self) -> None:
        await run_controller("disruption controller", (self.budgets, self.pods), self.queue, self.sync,
                             self.workers)

    async def sync(self, key: str) -> None:
        pdb = self.budgets.items.get(key)
        if pdb is None:
            return
        meta = meta_of(pdb)
        status = pdb.get("status") or {}
        covered = self._covered.get(key, {})
        if not covered:
            self.events.record("PodDisruptionBudget", pdb, "NoPods", "No matching pods found")
        by_name = {meta_of(p).get("name", ""): p for p in covered.values()}
        now = datetime.datetime.now(datetime.UTC)
        disrupted: dict[str, str] = {}
        recheck: float | None = None  # seconds until the first recorded eviction that holds expires
        for name, when in (status.get("disruptedPods") or {}).items():
            pod = by_name.get(name)
            at = _parse(when)
            left = DELETION_TIMEOUT - (now - at).total_seconds() if at is not None else 0.0
            if pod is None or meta_of(pod).get("deletionTimestamp") or at is None or left < 0:
                continue  # its deletion is seen, or it never came: the eviction no longer holds
            disrupted[name] = when
            recheck = left if recheck is None else min(recheck, left)
        if recheck is not None:
            # an eviction whose deletion never comes stops holding then, with no event to say so:
            # the budget is handled again at that time (upstream's enqueuePdbForRecheck)
            self.queue.add_after(key, recheck + 0.1)
        counted = [p for p in covered.values() if meta_of(p).get("name") not in disrupted]
        try:
            numbers = budget(pdb, counted)
        except BadBudget as e:
            await self._fail_safe(pdb, str(e), now)
            return
        numbers["expectedPods"] += len(disrupted)
        numbers["disruptionsAllowed"] = max(numbers["currentHealthy"] - numbers["desiredHealthy"], 0)
        allowed = numbers["disruptionsAllowed"] > 0
        condition = {"type": "DisruptionAllowed", "status": "True" if allowed else "False",
                     "reason": "SufficientPods" if allowed else "InsufficientPods",
                     "message": "", "observedGeneration": meta.get("generation", 1)}
        old_condition = next((c for c in status.get("conditions") or () if c.get("type") == "DisruptionAllowed"), None)
        if old_condition is not None and old_condition.get("status") == condition["status"]:
            condition["lastTransitionTime"] = old_condition.get("lastTransitionTime")
        else:
            condition["lastTransitionTime"] = now.strftime("%Y-%m-%dT%H:%M:%SZ")
        new = {**numbers, "observedGeneration": meta.get("generation", 1), "conditions": [condition]}
        before = status.get("disruptedPods") or {}
        if all(status.get(k) == v for k, v in new.items() if k != "conditions") and before == disrupted \
                and _same_condition(old_condition, condition):
            return
        # a merge patch merges maps: the entries that go are written as null
        new["disruptedPods"] = {**{n: None for n in before if n not in disrupted}, **disrupted} or None
        await self.client.patch(
            resource_path("policy", "v1", "poddisruptionbudgets", meta.get("namespace"), meta.get("name"), "status"),
            {"metadata": {"resourceVersion": meta.get("resourceVersion")}, "status": new})


    async def _fail_safe(self, pdb: dict[str, Any], why: str, now: datetime.datetime) -> None:
        """Upstream's ``failSafe``: no disruption allowed, the condition saying why; the
        other numbers as they were."""
        meta, status = meta_of(pdb), pdb.get("status") or {}
        condition = {"type": "DisruptionAllowed", "status": "False", "reason": "SyncFailed", "message": why,
                     "observedGeneration": status.get("observedGeneration", 0)}
        conditions = [c for c in status.get("conditions") or () if c.get("type") != "DisruptionAllowed"]
        old_condition = next((c for c in status.get("conditions") or () if c.get("type") == "DisruptionAllowed"), None)
        if status.get("disruptionsAllowed") == 0 and old_condition is not None \
                and _same_condition(old_condition, condition) and old_condition.get("message") == why:
            return
        condition["lastTransitionTime"] = now.strftime("%Y-%m-%dT%H:%M:%SZ")
        if old_condition is not None and old_condition.get("status") == "False":
            condition["lastTransitionTime"] = old_condition.get("lastTransitionTime")
        await self.client.patch(
            resource_path("policy", "v1", "poddisruptionbudgets", meta.get("namespace"), meta.get("name"), "status"),
            {"metadata": {"resourceVersion": meta.get("resourceVersion")},
             "status": {"disruptionsAllowed": 0, "conditions": [*conditions, condition]}})


def _same_condition(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> bool:
    return old is not None and all(old.get(k) == new.get(k) for k in ("status", "reason", "observedGeneration"))


async def start(client: Client, config: Config) -> None:
    """The component entry point (``controlplane/components.py``)."""
    await DisruptionController(client).run()
