"""The DaemonSet controller of kube-controller-manager (apps/v1), as an API client.

A DaemonSet runs one pod on every node its pod template fits: the node matches
the template's ``nodeSelector`` and required node affinity, and the pod tolerates
the node's ``NoSchedule`` and ``NoExecute`` taints. The tolerations upstream adds
to every daemon pod count here too (not-ready, unreachable, the pressure taints,
unschedulable, and network-unavailable for host-network pods), so a cordoned
node keeps its daemon. Each pod is created unbound. A required node affinity on
``metadata.name`` pins it to its node, and the default scheduler places it (its
NodeAffinity PreFilter then looks at that one node, as upstream's does). A pod
on a node that no longer fits is deleted, as upstream's NodeShouldRunDaemonPod
decides: a node whose labels no longer match, or with a ``NoExecute`` taint the
pod does not tolerate. An untolerated ``NoSchedule`` taint only stops new pods
(the running one counts as misscheduled): a NotReady node, tainted
``not-ready:NoSchedule``, keeps its daemons.

Updates: the template's hash is the ``controller-revision-hash`` label.
``RollingUpdate`` (the default) is upstream's rollingUpdate (``Rollout``): without
``maxSurge``, old pods are deleted on up to ``maxUnavailable`` nodes at a time
(default 1, a percentage rounded up), each node's new pod created once its old one
is gone; with ``maxSurge``, a new pod starts beside the old one on up to that many
nodes and the old one goes once the new one is available. The old pod a node
tainted ``NoSchedule`` kept is replaced by none: it is deleted as the rollout
reaches it (with surge, once the pods available elsewhere cover every node owed
one). A pass that created or deleted pods leaves the rollout to the next, as
upstream's expectations do. ``OnDelete`` replaces a pod only when it is deleted.
A daemon pod that failed (phase ``Failed``) is deleted, with a ``FailedDaemonPod``
Warning, and its node gets a new one once it is gone (at once with ``maxSurge``), as
upstream's podsShouldBeOnNode; a node's failed pods are killed at most once per
backoff (1 s doubling to 15 min, per DaemonSet generation and node), so a pod the
node keeps failing is not recreated in a hot loop.
Status as upstream: desiredNumberScheduled, currentNumberScheduled,
numberMisscheduled, numberReady, numberAvailable, numberUnavailable,
updatedNumberScheduled, observedGeneration. That is what ``kubectl rollout
status daemonset`` reads. A pod is available once Ready for ``minReadySeconds``.
Templates are kept as ControllerRevisions (``history.py``: ``kubectl rollout
history/undo``).
"""

from __future__ import annotations

import asyncio
import copy
import math
import time
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from controlplane.client import ApiError, Client, resource_path
from controlplane.client.workqueue import run_controller
from controlplane.selectormatch import node_matches_pod_selectors, tolerates

from .backoff import Backoff
from .events import namespace_terminating
from .history import REVISION_HASH
from .ownership import key_of, meta_of
from .readiness import available as pods_available
from .revisioned import RevisionedSetController

if TYPE_CHECKING:
    from controlplane.config import Config

__all__ = ["FAILED_POD_BACKOFF", "REVISION_HASH", "DaemonSetController", "Rollout", "daemon_tolerations", "start"]

# upstream's failedPodsBackoff: the first failed pod of a node is killed at once, the next ones
# after 1 s, 2 s, ... up to 15 min (seconds)
FAILED_POD_BACKOFF = (1.0, 900.0)


def daemon_tolerations(spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The pod's tolerations with those upstream adds to every daemon pod."""
    out = list(spec.get("tolerations") or ())
    wanted = [("node.kubernetes.io/not-ready", "NoExecute"), ("node.kubernetes.io/unreachable", "NoExecute"),
              ("node.kubernetes.io/disk-pressure", "NoSchedule"), ("node.kubernetes.io/memory-pressure", "NoSchedule"),
              ("node.kubernetes.io/pid-pressure", "NoSchedule"), ("node.kubernetes.io/unschedulable", "NoSchedule")]
    if spec.get("hostNetwork"):
        wanted.append(("node.kubernetes.io/network-unavailable", "NoSchedule"))
    for key, effect in wanted:
        if not any(t.get("key") == key and t.get("effect") == effect for t in out):
            out.append({"key": key, "operator": "Exists", "effect": effect})
    return out


def _fits(template_spec: Mapping[str, Any], tolerations: list[dict[str, Any]],
          node: Mapping[str, Any]) -> tuple[bool, bool]:
    """Upstream's NodeShouldRunDaemonPod: (should run, should continue running). A node whose
    taints the pod does not tolerate gets no new daemon pod, but keeps the one it has unless an
    untolerated taint is ``NoExecute``: a NotReady node's ``not-ready:NoSchedule`` keeps its daemons."""
    meta = meta_of(node)
    if not node_matches_pod_selectors(template_spec.get("nodeSelector") or {}, template_spec.get("affinity") or {},
                                      meta.get("labels") or {}, meta.get("name", "")):
        return False, False
    untolerated = [t.get("effect") for t in (node.get("spec") or {}).get("taints") or ()
                   if t.get("effect") in ("NoSchedule", "NoExecute") and not tolerates(tolerations, t)]
    return not untolerated, "NoExecute" not in untolerated


def _pinned(spec: dict[str, Any], node: str) -> dict[str, Any]:
    """``spec`` with its required node affinity's terms narrowed to ``node`` (upstream's
    ReplaceDaemonSetPodNodeNameNodeAffinity: a matchFields term on ``metadata.name``)."""
    affinity = spec.setdefault("affinity", {})
    node_affinity = affinity.setdefault("nodeAffinity", {})
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    pin = {"key": "metadata.name", "operator": "In", "values": [node]}
    terms = [dict(t, matchFields=[pin]) for t in required.get("nodeSelectorTerms") or ()] or [{"matchFields": [pin]}]
    node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {"nodeSelectorTerms": terms}
    return spec


def _node_of(pod: Mapping[str, Any]) -> str:
    """The node a daemon pod is for: its binding, else its pinning affinity."""
    spec = pod.get("spec") or {}
    if spec.get("nodeName"):
        return str(spec["nodeName"])
    terms = ((((spec.get("affinity") or {}).get("nodeAffinity") or {})
              .get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms")) or ()
    for term in terms:
        for f in term.get("matchFields") or ():
            if f.get("key") == "metadata.name" and f.get("values"):
                return str(f["values"][0])
    return ""


def _ready(pod: Mapping[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or ())


def _active(pod: Mapping[str, Any]) -> bool:
    return not meta_of(pod).get("deletionTimestamp") and not _terminal(pod)


def _terminal(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def _failed(pod: Mapping[str, Any]) -> bool:
    """A failed daemon pod nobody deletes yet: the controller's to kill."""
    return (pod.get("status") or {}).get("phase") == "Failed" and not meta_of(pod).get("deletionTimestamp")


def _available(pod: Mapping[str, Any], min_ready: float) -> bool:
    return pods_available((pod,), min_ready)[0] == 1


def _updated(pod: Mapping[str, Any], current_hash: str) -> bool:
    return (meta_of(pod).get("labels") or {}).get(REVISION_HASH) == current_hash


def _oldest_first(pods: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Upstream's podByCreationTimestampAndPhase: bound pods first, then the oldest, then by name."""
    return sorted(pods, key=lambda p: (not (p.get("spec") or {}).get("nodeName"),
                                       meta_of(p).get("creationTimestamp", ""), meta_of(p).get("name", "")))


class DaemonSetController(RevisionedSetController):
    kind = "DaemonSet"
    prefix = "ds"

    def __init__(self, client: Client, workers: int = 2) -> None:
        super().__init__(client, workers, "daemonset-controller")
        self.daemonsets = self._sets_informer("daemonsets")
        self.nodes = client.informer("/api/v1/nodes", on_add=self._node_added, on_update=self._node_updated,
                                     on_delete=self._node_added)
        # the nodes each DaemonSet wants, by (its generation, the nodes' version): recomputed only when
        # either changes, since a sync runs at every event of its pods (100,000 nodes x pods otherwise)
        self._nodes_version = 0
        self._wanted: dict[str, tuple[int, int, set[str], set[str]]] = {}
        # by "<DaemonSet uid>/<its observed generation>/<node>", as upstream's failedPodsBackoffKey
        self.failed_backoff = Backoff(*FAILED_POD_BACKOFF)

    # -- events
    def _forget(self, uid: str) -> None:
        self._wanted.pop(uid, None)

    def _all(self) -> None:
        self._nodes_version += 1
        for key in self._keys.values():
            self.queue.add("ds:" + key)

    def _node_added(self, node: dict[str, Any]) -> None:
        self._all()

    def _node_updated(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        # heartbeats change a node's status only; what decides placement is its labels and taints
        if (meta_of(old).get("labels") != meta_of(new).get("labels")
                or (old.get("spec") or {}).get("taints") != (new.get("spec") or {}).get("taints")):
            self._all()

    def _observe(self, owner: str, pod: dict[str, Any]) -> None:
        # besides "+<pod>" and "-<pod>", the expectations hold "node:<node>" for a pod being
        # created for a node (its name is the server's to choose) until one of that node shows
        self.expectations.seen(owner, "node:" + _node_of(pod))

    # -- running
    async def run(self) -> None:
        await run_controller("daemonset controller", (self.daemonsets, self.nodes, self.pods, self.history.informer),
                             self.queue, self._handle, self.workers)

    # -- a DaemonSet
    async def sync(self, key: str) -> None:
        ds = self.daemonsets.items.get(key)
        if ds is None:
            return
        owned = await self._pods_to_sync(ds)
        if owned is None:
            return
        meta = meta_of(ds)
        uid = str(meta.get("uid", ""))
        spec = ds.get("spec") or {}
        template = spec.get("template") or {}
        template_spec = template.get("spec") or {}
        tolerations = daemon_tolerations(template_spec)
        running = {str((meta_of(p).get("labels") or {}).get(REVISION_HASH, "")) for p in owned.values()}
        revision, _, collisions = await self.history.record(ds, template,
                                                            {f"{meta.get('name', '')}-{h}" for h in running})
        # the pods' hash is their revision's (named with the collision count: upstream's label of it)
        current_hash = revision.removeprefix(f"{meta.get('name', '')}-")
        if collisions != int((ds.get("status") or {}).get("collisionCount") or 0):
            await self.client.patch(resource_path("apps", "v1", "daemonsets", meta.get("namespace"),
                                                  meta.get("name"), "status"),
                                    {"status": {"collisionCount": collisions}})
        generation = int(meta.get("generation", 1) or 1)
        cached = self._wanted.get(uid)
        if cached is not None and cached[:2] == (generation, self._nodes_version):
            wanted, keep = cached[2], cached[3]
        else:
            wanted, keep = set(), set()
            for n in self.nodes.items.values():
                run, stay = _fits(template_spec, tolerations, n)
                if run:
                    wanted.add(meta_of(n).get("name", ""))
                if stay:
                    keep.add(meta_of(n).get("name", ""))
            self._wanted[uid] = (generation, self._nodes_version, wanted, keep)
        by_node: dict[str, list[dict[str, Any]]] = {}
        failed: dict[str, list[dict[str, Any]]] = {}
        terminating: set[str] = set()
        for pod in owned.values():
            if _active(pod):
                by_node.setdefault(_node_of(pod), []).append(pod)
            elif meta_of(pod).get("deletionTimestamp") and not _terminal(pod):
                terminating.add(_node_of(pod))
            elif _failed(pod):
                failed.setdefault(_node_of(pod), []).append(pod)
        strategy = spec.get("updateStrategy") or {}
        rolling = strategy.get("type", "RollingUpdate") == "RollingUpdate"
        rolling_update = strategy.get("rollingUpdate") or {} if rolling else {}
        surge, unavailable = _update_budget(rolling_update, len(wanted))
        surging = _scaled(rolling_update.get("maxSurge", 0), 1) > 0  # upstream's AllowsSurge
        min_ready = float(spec.get("minReadySeconds") or 0)
        doomed, missing = _manage(by_node, terminating, failed, wanted, keep, current_hash, surging, min_ready)
        doomed += self._failed_to_kill(ds, failed, keep)
        if rolling and not doomed and not missing:
            # (upstream's rolling update waits for the writes of this pass to be seen first)
            plan = Rollout(by_node, terminating, wanted, current_hash, min_ready)
            doomed, missing = plan.surge(surge) if surge else plan.replace(unavailable)
        try:
            if doomed:
                await asyncio.gather(*(self._delete_pod(ds, p, f"Deleted pod: {meta_of(p).get('name')}")
                                       for p in doomed))
            if missing:
                await self._create_pods(ds, template, current_hash, missing)
        except ApiError:  # the status is written even if a pod's write failed (upstream's syncDaemonSet)
            await self._write_status(ds, wanted, by_node, doomed, current_hash)
            raise
        await self._write_status(ds, wanted, by_node, doomed, current_hash)

    def _failed_to_kill(self, ds: dict[str, Any], failed: Mapping[str, list[dict[str, Any]]],
                        keep: set[str]) -> list[dict[str, Any]]:
        """Upstream's podsShouldBeOnNode for the failed pods of the nodes that keep their daemon:
        each is killed (with a ``FailedDaemonPod`` Warning) unless its node is in backoff, whose
        end brings the DaemonSet back."""
        meta = meta_of(ds)
        generation = (ds.get("status") or {}).get("observedGeneration", 0)
        now = time.monotonic()
        doomed: list[dict[str, Any]] = []
        for node, pods in failed.items():
            if node not in keep:
                continue  # manage deletes every pod of such a node
            key = f"{meta.get('uid', '')}/{generation}/{node}"
            for pod in pods:
                wait = self.failed_backoff.remaining(key, now)
                if wait > 0:
                    self.queue.add_after("ds:" + key_of(ds), wait + 0.01)
                    continue
                self.failed_backoff.next(key, now)
                pmeta = meta_of(pod)
                self.events.record("DaemonSet", ds, "FailedDaemonPod",
                                   f"Found failed daemon pod {pmeta.get('namespace')}/{pmeta.get('name')} on node "
                                   f"{node}, will try to kill it", "Warning")
                doomed.append(pod)
        return doomed

    async def _create_pods(self, ds: dict[str, Any], template: dict[str, Any], current_hash: str,
                           nodes: list[str]) -> None:
        meta = meta_of(ds)
        uid = str(meta.get("uid", ""))
        tmeta = template.get("metadata") or {}
        path = resource_path("", "v1", "pods", meta.get("namespace"))

        async def create(node: str) -> None:
            spec = _pinned(copy.deepcopy(template.get("spec") or {}), node)
            spec["tolerations"] = daemon_tolerations(spec)
            pod_meta: dict[str, Any] = {
                "generateName": f"{meta['name']}-", "namespace": meta.get("namespace"),
                # (pod-template-generation: deprecated upstream, still set by its controller)
                "labels": {**(tmeta.get("labels") or {}), REVISION_HASH: current_hash,
                           "pod-template-generation": str(meta.get("generation", 1))},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": meta["name"], "uid": uid,
                                     "controller": True, "blockOwnerDeletion": True}]}
            if tmeta.get("annotations"):
                pod_meta["annotations"] = dict(tmeta["annotations"])
            self.expectations.expect(uid, "node:" + node)
            try:
                created = await self.client.create(path, {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta,
                                                          "spec": spec})
            except BaseException as e:
                self.expectations.seen(uid, "node:" + node)
                if isinstance(e, ApiError) and not namespace_terminating(e):  # (upstream's RealPodControl)
                    self.events.record("DaemonSet", ds, "FailedCreate", f"Error creating: {e.message}", "Warning")
                raise
            name = meta_of(created).get("name", "")
            if name not in self.pods_of.of(uid):
                # by name from now: an event of another pod on the node (the old one, when surging)
                # settles "node:" too
                self.expectations.expect(uid, "+" + name)
            self.expectations.seen(uid, "node:" + node)
            self.events.record("DaemonSet", ds, "SuccessfulCreate", f"Created pod: {meta_of(created).get('name')}")

        results = await asyncio.gather(*(create(n) for n in nodes[:500]), return_exceptions=True)
        errors = [r for r in results if isinstance(r, BaseException)]
        if errors:
            raise errors[0]

    async def _write_status(self, ds: dict[str, Any], wanted: set[str], by_node: dict[str, list[dict[str, Any]]],
                            doomed: list[dict[str, Any]], current_hash: str) -> None:
        """Upstream's updateDaemonSetStatus: a node that should run a daemon pod counts by its oldest
        one (ready, available, updated), so a node surging to its new pod counts as updated once its
        old one goes."""
        gone = {id(p) for p in doomed}
        placed = {n: _oldest_first(p for p in ps if id(p) not in gone) for n, ps in by_node.items()}
        placed = {n: ps for n, ps in placed.items() if ps}
        firsts = [placed[n][0] for n in wanted if n in placed]
        min_ready = float((ds.get("spec") or {}).get("minReadySeconds") or 0)
        available, _ = pods_available(firsts, min_ready)
        # (any ready pod about to become available may move a rollout on, the oldest or not)
        _, soonest = pods_available((p for ps in placed.values() for p in ps), min_ready)
        if soonest is not None:
            self.queue.add_after("ds:" + key_of(ds), soonest + 0.1)
        status = {"desiredNumberScheduled": len(wanted), "currentNumberScheduled": len(firsts),
                  "numberMisscheduled": sum(1 for n in placed if n not in wanted),
                  "numberReady": sum(1 for p in firsts if _ready(p)),
                  "numberAvailable": available, "numberUnavailable": len(wanted) - available,
                  "updatedNumberScheduled": sum(1 for p in firsts if _updated(p, current_hash)),
                  "observedGeneration": meta_of(ds).get("generation", 1)}
        old = ds.get("status") or {}
        if all(old.get(k, 0) == v for k, v in status.items()):
            return
        meta = meta_of(ds)
        always = ("desiredNumberScheduled", "currentNumberScheduled", "numberMisscheduled", "numberReady")
        await self.client.patch(
            resource_path("apps", "v1", "daemonsets", meta.get("namespace"), meta.get("name"), "status"),
            {"status": {k: v if k in always else v or None for k, v in status.items()}})


def _manage(by_node: Mapping[str, list[dict[str, Any]]], terminating: set[str],
            failed: Mapping[str, list[dict[str, Any]]], wanted: set[str], keep: set[str], current_hash: str,
            surging: bool, min_ready: float) -> tuple[list[dict[str, Any]], list[str]]:
    """Upstream's manage: the pods to delete (those of a node that no longer keeps its daemon, failed
    ones too, and a node's excess) and the nodes to give a pod (those that should run one and have
    none running; without surge, a node whose pod is still terminating, or failed and not yet
    killed, waits for it to be gone, one pod a node). A failed pod of a node that keeps its daemon
    is the controller's to kill, within its backoff."""
    doomed: list[dict[str, Any]] = []
    for node in sorted(by_node.keys() | failed.keys()):
        pods = by_node.get(node, [])
        if node not in keep:
            doomed.extend(pods + failed.get(node, []))  # the node no longer fits, or taints it NoExecute
        elif len(pods) > 1:
            doomed.extend(_excess(pods, current_hash, surging, min_ready))
    missing = sorted(n for n in wanted if n not in by_node and (surging or (n not in terminating and n not in failed)))
    return doomed, missing


def _excess(pods: list[dict[str, Any]], current_hash: str, surging: bool,
            min_ready: float) -> list[dict[str, Any]]:
    """The pods a node holds too many of: all but the oldest; when surging, all but the oldest of the
    current revision and the oldest of an earlier one, and that old one too once it is not ready or
    the new one is available."""
    ordered = _oldest_first(pods)
    if not surging:
        return ordered[1:]
    first_new = next((p for p in ordered if _updated(p, current_hash)), None)
    first_old = next((p for p in ordered if not _updated(p, current_hash)), None)
    excess = [p for p in ordered if p is not first_new and p is not first_old]
    if first_new is not None and first_old is not None and (
            not _ready(first_old) or _available(first_new, min_ready)):
        excess.append(first_old)
    return excess


class Rollout:
    """One pass of upstream's rollingUpdate (pkg/controller/daemon/update.go): which old pods to
    delete and which nodes to give a new pod, over every node that holds a daemon pod (one that
    should no longer get one but keeps its pod, tainted ``NoSchedule`` since, included) or should.

    Without surge, an old pod is deleted at once when it is not available, else while fewer than
    ``maxUnavailable`` nodes are unavailable (a node with no pod, a new one not available yet, or an
    old one being replaced), and the next pass creates its replacement where the node should run
    one. With ``maxSurge``, a new pod is created beside an old one (at once beside an unavailable
    one, else on up to ``maxSurge`` nodes whose new pod is not available yet) and the old one goes
    once the new one is available; an old pod on a node that should no longer run one is deleted
    once that leaves as many pods available as nodes should run one."""

    def __init__(self, by_node: Mapping[str, list[dict[str, Any]]], terminating: set[str], wanted: set[str],
                 current_hash: str, min_ready: float) -> None:
        self.by_node = by_node
        self.nodes = sorted(set(by_node) | wanted | terminating)
        self.wanted = wanted
        self.current_hash = current_hash
        self.min_ready = min_ready

    def _pair(self, node: str) -> tuple[dict[str, Any] | None, dict[str, Any] | None] | None:
        """The node's (new, old) pod, each None when it has none; None when it holds two of one."""
        pods = self.by_node.get(node, [])
        new = [p for p in pods if _updated(p, self.current_hash)]
        old = [p for p in pods if not _updated(p, self.current_hash)]
        if len(new) > 1 or len(old) > 1:
            return None  # the next pass of manage deletes the excess
        return (new[0] if new else None), (old[0] if old else None)

    def replace(self, max_unavailable: int) -> tuple[list[dict[str, Any]], list[str]]:
        """Without surge: the old pods to delete (their nodes get their new pod from manage)."""
        unavailable = 0
        doomed: list[dict[str, Any]] = []
        candidates: list[dict[str, Any]] = []
        for node in self.nodes:
            pair = self._pair(node)
            if pair is None:
                unavailable += 1
                continue
            new, old = pair
            if (new is None) == (old is None):
                unavailable += 1  # nothing yet, or both: manage's to settle
            elif new is not None:
                unavailable += not _available(new, self.min_ready)
            elif old is not None and not _available(old, self.min_ready):
                doomed.append(old)  # costs nothing: it is down already
                unavailable += 1
            elif old is not None:
                candidates.append(old)
        return doomed + candidates[:max(max_unavailable - unavailable, 0)], []

    def surge(self, max_surge: int) -> tuple[list[dict[str, Any]], list[str]]:
        """With surge: the old pods to delete and the nodes to give a new pod beside their old one."""
        surging = available = 0
        doomed: list[dict[str, Any]] = []
        sunset: list[dict[str, Any]] = []  # available old pods of nodes that should no longer run one
        at_once: list[str] = []
        candidates: list[str] = []
        for node in self.nodes:
            pair = self._pair(node)
            if pair is None:
                surging += 1
                continue
            new, old = pair
            counted = old if old is not None else new
            available += counted is not None and _available(counted, self.min_ready)
            if old is None:
                continue  # manage's to handle
            if new is None and not _available(old, self.min_ready):
                if node in self.wanted:
                    at_once.append(node)
                else:
                    doomed.append(old)
            elif new is None:
                if node not in self.wanted:
                    sunset.append(old)
                elif surging < max_surge:
                    candidates.append(node)
            elif not _available(new, self.min_ready):
                surging += 1
            else:
                doomed.append(old)
        # the sunset nodes' pods go only while the pods available elsewhere cover every node owed one
        doomed.extend(sunset[:max(available - len(self.wanted), 0)])
        return doomed, at_once + candidates[:max(max_surge - surging, 0)]


def _update_budget(rolling_update: Mapping[str, Any], desired: int) -> tuple[int, int]:
    """(maxSurge, maxUnavailable) as counts of nodes, as upstream's updatedDesiredNodeCounts: a
    percentage of the nodes that should run a pod, rounded up; 1 unavailable when both are 0."""
    surge = _scaled(rolling_update.get("maxSurge", 0), desired)
    unavailable = _scaled(rolling_update.get("maxUnavailable", 1), desired)
    if desired and not surge and not unavailable:
        unavailable = 1
    return surge, unavailable


def _scaled(value: Any, total: int) -> int:
    """An IntOrString as upstream's GetScaledValueFromIntOrPercent rounding up (``"25%"`` of 10
    is 3); anything else counts 0."""
    if isinstance(value, int) and not isinstance(value, bool):
        return max(value, 0)
    text = str(value)
    if text.endswith("%") and text[:-1].isdigit():
        return math.ceil(int(text[:-1]) * total / 100)
    return 0


async def start(client: Client, config: Config) -> None:
    """The component entry point (``controlplane/components.py``): the parts ``--controllers``
    turns on."""
    controller = DaemonSetController(client)
    controller.syncs = config.controller_enabled("daemonset-controller")
    controller.collects = config.controller_enabled("garbage-collector-controller")
    await controller.run()
