"""kube-controller-manager's garbage collector, in the API server, for every kind: once an
owner goes, the objects that name it in ``metadata.ownerReferences`` and no owner that is
left are deleted (``Background``, the default); ``Foreground`` and ``Orphan`` deletes of
any kind are carried out here too (the ``foregroundDeletion`` and ``orphan`` finalizers).
This is what cleans up after an operator that adopts its children (kopf's
``kopf.adopt``, controller-runtime's ``SetControllerReference``) and after every object
that names another as its owner: a ConfigMap owned by a Service, a PVC owned by a pod,
a node's Lease owned by the Node.

Upstream's collector keeps a graph of every object's owners, fed by watching every
resource. Here an owner's dependents are looked for when it goes, by one pass, and only
where some object naming an owner of its kind was written (``OwnerIndex``): every write
that carries owner references notes the owner's group and kind, and the namespace and
resource of the dependent (once each). Every write, whichever server process made it
(``serve --workers``): the process's watch cache feed hands ``observe`` every batch of
store events, each value tested for ``"ownerReferences":[`` as bytes (a value without is
not parsed; one with, whose place and owner kinds were noted before, costs a few byte
searches and a dict lookup; the bulk requests' runs of rewrites, LeaseRenewals and
NodeStatusReports, are not read: they never change owner references). A write through
this process is noted at once too (``noted``), since the feed may bring its event only
after a delete of its owner that follows it. An owner deleted at a revision the feed has
not reached yet is kept (``_unseen``) until it has: a dependent written just before
through another process, noted only when its event comes, is then looked for in the place
it opens (``_recheck``). A scan of the store, once the feed has started, notes those
written before, and so does another whenever the feed restarts (``restarted``: its watch
failed, the events between are never seen). So deleting an object whose kind nobody names
costs a dict lookup, and a pass reads only the resources in the namespaces that hold such
dependents (a cluster-scoped owner's: in every namespace that does, and the cluster-scoped
ones), each value tested for the owner's uid as bytes before it is parsed. The owners gone meanwhile in a
namespace are taken together by its next pass: the resources of a deleted
CustomResourceDefinition cost a pass or two, not one each.

Owners may also be gone before their dependents are seen: deleted before a dependent naming
them was written, never there, or deleted while no server ran. Upstream's graph holds every
object, and an owner uid it does not hold becomes a "virtual" node (graph_builder.go,
``addDependentToOwners``) that its workers look up with a live GET (``isDangling``); an
update whose references differ from the last (``referencesDiffs`` in ``processGraphChanges``)
adds the owners it names anew the same way. Here the owners a write through this process
names anew (``noted``: all of a create's, those of an update, a patch or an apply that were
not in the version it replaced) and those every dependent a scan finds names are looked up
by a task of their own (``_look_ups``), never on the write's path: in the watch cache if it
has applied every event this process has seen (``Peek``), else in the store. A write that
keeps its references (a pod's status, a Lease renewed by PUT) costs a comparison of two lists;
a binding or a bulk rewrite, which cannot change them, not even that. One not there with
that uid (absent, or another object of that name) is gone: the places that may hold its
dependents get a pass, as if it had just been deleted, those of the pairs its controller
collects included (below). The store read is the decision's (a dependent written just after
its owner, whose create the cache has not applied yet, finds it there). An owner found there
is not looked up again (``_present``: a ReplicaSet's every pod names it) until a delete of
its key is seen, by ``gone`` or in the feed (whichever process made it), or the feed restarts.
A cluster-scoped object naming a namespaced owner is left, as upstream leaves it (which also
reports it in an ``OwnerRefInvalidNamespace`` event, not written here).

For a dependent that names a gone owner, as upstream's ``attemptToDeleteItem``
(pkg/controller/garbagecollector/garbagecollector.go) classifies its references:

* one with another owner that exists and is not being deleted in the foreground keeps
  going; the references to gone owners (dangling) and to owners waiting for their
  dependents are removed from it (a merge patch against the version read);
* one with none is deleted with its uid as a precondition (one replaced by a new object of
  the same name is left alone): ``Foreground`` if an owner is waiting for it and something
  may name it in turn, else as its own finalizers say, else ``Background``.

A delete with ``propagationPolicy: Orphan`` (or ``orphanDependents``) or ``Foreground``
gives any object the ``orphan`` or ``foregroundDeletion`` finalizer (kube-apiserver's
``BeforeDelete``); ``propagate`` then removes the owner's reference from each dependent,
or deletes the dependents and waits (0.2 s, doubling to 2 s) until those whose reference
has ``blockOwnerDeletion: true`` are gone (the others are deleted but not waited for), and
removes the finalizer, as upstream's ``attemptToOrphanWorker`` and
``processDeletingDependentsItem``. Owners left so by an earlier run are resumed at start.

The collector's deletes and patches are made as upstream's, by kube-controller-manager's
service account ``system:serviceaccount:kube-system:generic-garbage-collector``
(``COLLECTOR``: admission policies and webhooks see that user), not as the user whose
delete led to them. Without auditing they are calls inside this process, not requests of
their own (nothing authorizes or audits them, and the hot path pays nothing for them); with
an audit policy (``--audit-policy-file``) they are requests of that identity to this
process (``calls``; where the server has its components' identities, as ``serve`` has from
its token file): authorized, admitted and in the audit log as upstream's.

Under ``serve --workers`` (N processes on one store) each process notes every process's
writes (its own passes need them), looks up the owners its own writes name anew, collects
the dependents of the owners deleted through it and carries out the propagation finalizers
it gave: each once in all. The scan at start notes the references stored in every process,
but only the first (``first``) looks their owners up and resumes the finalizers an earlier
run left; the workers forked with it would repeat that work. One started again in place of a
worker that died does it too: the look-ups the dead one had queued are lost with it.

Some pairs keep their controllers' collectors (``CONTROLLER_COLLECTED``): the workload
controllers' (``controllers/ownership.py``: a Deployment's ReplicaSets, a ReplicaSet's,
Job's, DaemonSet's or StatefulSet's pods, a CronJob's Jobs, the sets' ControllerRevisions),
the persistent volume controller's (the claims of pods and StatefulSets) and the
ResourceClaim controller's (the claims made for pods and PodGroups). So deleting a
ReplicaSet or a pod reads none of a namespace's pods or claims here. Those controllers follow
only owners they have seen: a dependent naming an owner that is not there (a pod naming a
ReplicaSet or Job that never existed) is collected here, as upstream's collector collects
it, when the look-up finds the owner absent; its controller leaves it (one that saw the owner
go and deletes it too meets a 404, which neither side reports).

Left, unlike upstream:

* those of the workload pairs above whose reference to an owner their controller saw go is
  not their controller's (the controllers file dependents by controller reference);
* a bound pod deleted with ``Foreground`` or ``Orphan``: its graceful deletion goes ahead
  without the finalizer, as ``Background``;
* a workload deleted with ``Foreground`` waits for the dependents its controller collects
  only; its others (a ConfigMap it owns) are deleted once it is gone, as ``Background``;
* the dependents of an owner deleted in a namespace being emptied (the namespace deleter
  deletes them anyway);
* several ``serve`` replicas over one etcd each scan at start and look the owners up (upstream
  elects one collector).
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any

import orjson

import store
from store import Event, EventRun, KeyValue, Store

from ..identities import groups_of, service_account_user
from ..registry import Registry, ResourceType
from .admissionpolicy import REQUEST_USER
from .errors import ApiError
from .rbac import User

__all__ = ["COLLECTOR", "CONTROLLER_COLLECTED", "FOREGROUND", "ORPHAN", "DeleteObject", "GarbageCollector",
           "OwnerIndex", "PatchObject"]

log = logging.getLogger(__name__)

ORPHAN = "orphan"
FOREGROUND = "foregroundDeletion"

# deletes one object through the API with these DeleteOptions
DeleteObject = Callable[[ResourceType, str | None, str, dict[str, Any]], Awaitable[object]]
# merge-patches one object through the API
PatchObject = Callable[[ResourceType, str | None, str, dict[str, Any]], Awaitable[object]]
# starts a background task
Spawn = Callable[[Awaitable[None]], None]
# an object as this process's watch cache holds it now, by its type and key: its JSON, b"" when
# the cache holds no such key, None when the cache cannot say (none for the type, or behind
# the store events this process has seen)
Peek = Callable[[ResourceType, bytes], Awaitable[bytes | None]]

# up to this many owners, a value is tested for each one's uid before it is parsed; past it
# (a CustomResourceDefinition's resources removed), for having owners at all
_NEEDLES_MAX = 8
GONE_OWNERS_KEPT = 4096  # owners lately gone, not looked up again as other owners
_SCAN_PAGE = 1000  # objects read at a time by the scan at start
_WAIT_FIRST, _WAIT_MAX = 0.2, 2.0  # seconds between a foreground owner's looks at its dependents

# (owner group, owner kind) -> the (group, plural)s of the dependents that controllers collect
# themselves, not looked for here: the workload controllers (controllers/ownership.py, by
# controller reference), the persistent volume controller (controllers/volumes.py: the claims
# of pods and StatefulSets) and the ResourceClaim controller (scheduler/dra/claims.py: the
# claims made for pods and PodGroups)
CONTROLLER_COLLECTED: dict[tuple[str, str], frozenset[tuple[str, str]]] = {
    ("apps", "Deployment"): frozenset({("apps", "replicasets")}),
    ("apps", "ReplicaSet"): frozenset({("", "pods")}),
    ("batch", "Job"): frozenset({("", "pods")}),
    ("batch", "CronJob"): frozenset({("batch", "jobs")}),
    ("apps", "DaemonSet"): frozenset({("", "pods"), ("apps", "controllerrevisions")}),
    ("apps", "StatefulSet"): frozenset({("", "pods"), ("apps", "controllerrevisions"), ("", "persistentvolumeclaims")}),
    ("", "Pod"): frozenset({("", "persistentvolumeclaims"), ("resource.k8s.io", "resourceclaims")}),
    ("scheduling.k8s.io", "PodGroup"): frozenset({("resource.k8s.io", "resourceclaims")}),
}

# a stored object that names owners (tested for as bytes before anything is parsed)
_NAMES_OWNERS = b'"ownerReferences":['
# owners deleted at revisions the store events this process has seen had not reached, kept
# until they do (``GarbageCollector.gone``); past this many the oldest are let go
_UNSEEN_MAX = 4096
# an owner reference's fields, in stored JSON
_API_VERSION, _KIND, _NAME, _UID = b'"apiVersion":"', b'"kind":"', b'"name":"', b'"uid":"'
# dependents created whose owners wait to be looked up, and the owner references read from
# them; past this many the newest are let go (with a warning: the next start's scan finds
# them), a scan looks up those it found as it goes
_UNVERIFIED_MAX = 1 << 14
_READ_CHUNK = 256  # dependents found by a scan read at a time by the look-ups
_PRESENT_MAX = 1 << 14  # owners found there, not looked up again (``GarbageCollector._present``)

# who the collector's deletes and patches are made as (admission policies and webhooks see it):
# kube-controller-manager's garbage collector's service account, as upstream's
_ACCOUNT = service_account_user("generic-garbage-collector")
COLLECTOR = User(_ACCOUNT, groups_of(_ACCOUNT) or ())

Place = tuple[str | None, str, str]  # where dependents are: (namespace, None when cluster-scoped; group; plural)


def _group(api_version: str) -> str:
    return api_version.rpartition("/")[0]


class OwnerIndex:
    """Where objects naming an owner of each kind were written: (owner's group, kind) ->
    the places (namespace, the dependent's group and plural)."""

    def __init__(self) -> None:
        self._places: dict[tuple[str, str], set[Place]] = {}
        self._seen: set[tuple[str, str, str | None, str, str]] = set()

    def note(self, rtype: ResourceType, namespace: str | None, refs: Iterable[Any]) -> list[tuple[str, str, Place]]:
        """``refs``, the owner references of an object of ``rtype`` just written in ``namespace``;
        the owner kinds (group, kind) that have a new place by it, with it (almost always none)."""
        new: list[tuple[str, str, Place]] = []
        for ref in refs:
            if not isinstance(ref, dict):
                continue
            api_version, kind = ref.get("apiVersion"), ref.get("kind")
            seen = (str(api_version), str(kind), namespace, rtype.group, rtype.plural)
            if seen in self._seen:
                continue
            self._seen.add(seen)
            group, place = _group(str(api_version)), (namespace, rtype.group, rtype.plural)
            self._places.setdefault((group, str(kind)), set()).add(place)
            new.append((group, str(kind), place))
        return new

    def note_stored(self, rtype: ResourceType, namespace: str | None, value: bytes) -> list[tuple[str, str, Place]]:
        """``note`` for a stored object's JSON (one that names owners: ``_NAMES_OWNERS`` in it),
        its references' apiVersions and kinds found as bytes, nothing parsed."""
        return self.note(rtype, namespace, ({"apiVersion": api_version.decode(errors="replace"),
                                             "kind": kind.decode(errors="replace")}
                                            for api_version, kind in _owner_kinds(value)))

    def places(self, group: str, kind: str, namespace: str | None, theirs_too: bool = False) -> list[Place]:
        """Where the dependents of an owner of ``group``/``kind`` in ``namespace`` (None: a
        cluster-scoped owner) may be: in its namespace, or anywhere for a cluster-scoped one;
        not those its workload controller collects, unless ``theirs_too`` (an owner their
        controllers never saw: one looked up and found absent)."""
        places = self._places.get((group, kind))
        if not places:
            return []
        theirs = frozenset() if theirs_too else CONTROLLER_COLLECTED.get((group, kind), frozenset())
        return [p for p in places if (namespace is None or p[0] == namespace) and (p[1], p[2]) not in theirs]

    def names(self, group: str, kind: str) -> bool:
        """Whether an object naming an owner of this kind was written (it may have dependents)."""
        return bool(self._places.get((group, kind)))


async def _as_collector(work: Awaitable[None]) -> None:
    REQUEST_USER.set(COLLECTOR)  # (in the task's own context)
    await work


def _owner_ref_bytes(value: bytes) -> list[bytes]:
    """The JSON of each owner reference in a stored object's JSON, cut as bytes at ``},{``
    (a string with an escaped quote or a bracket in it may cut one short: never a real kind)."""
    start = value.find(_NAMES_OWNERS)
    if start < 0:
        return []
    start += len(_NAMES_OWNERS)
    end = value.find(b"]", start)
    return value[start:end if end >= 0 else len(value)].split(b"},{")


def _owner_kinds(value: bytes) -> list[tuple[bytes, bytes]]:
    """The apiVersion and kind of each owner reference in a stored object's JSON, found as bytes."""
    found = []
    for ref in _owner_ref_bytes(value):
        a, k = ref.find(_API_VERSION), ref.find(_KIND)
        if a >= 0 and k >= 0:
            a, k = a + len(_API_VERSION), k + len(_KIND)
            found.append((ref[a:ref.find(b'"', a)], ref[k:ref.find(b'"', k)]))
    return found


def _owner_refs(value: bytes) -> list[tuple[bytes, bytes, bytes, bytes]]:
    """The apiVersion, kind, name and uid of each owner reference in a stored object's JSON,
    found as bytes as ``_owner_kinds`` finds them (b"" for a field a reference lacks)."""
    found = []
    for ref in _owner_ref_bytes(value):
        fields = []
        for needle in (_API_VERSION, _KIND, _NAME, _UID):
            at = ref.find(needle)
            fields.append(b"" if at < 0 else ref[at + len(needle):ref.find(b'"', at + len(needle))])
        if fields[0] and fields[1]:
            found.append((fields[0], fields[1], fields[2], fields[3]))
    return found


def _is_object(value: bytes, uid: str) -> bool:
    """Whether ``value``, an object's JSON, is the object with this uid (a uid found as bytes
    only in its own owner references is not its own: then it is parsed)."""
    if (b'"uid":"%s"' % uid.encode()) not in value:
        return False
    if _NAMES_OWNERS not in value:
        return True
    return bool((orjson.loads(value).get("metadata") or {}).get("uid") == uid)


def _owners(obj: dict[str, Any]) -> list[dict[str, Any]]:
    refs = (obj.get("metadata") or {}).get("ownerReferences") or ()
    return [ref for ref in refs if isinstance(ref, dict)]


class GarbageCollector:
    """The collector of one API server process (module docstring). ``gone`` is told of every
    object deleted from the store, ``propagate`` of every owner given a propagation finalizer."""

    def __init__(self, registry: Registry, get_store: Callable[[], Store], delete: DeleteObject,
                 patch: PatchObject, spawn: Spawn, controlled: frozenset[tuple[str, str]]) -> None:
        self.registry = registry
        self._get_store = get_store
        self._delete = delete
        self._patch = patch
        self._spawn = spawn
        # the (group, plural)s whose propagation finalizers their controllers carry out
        self.controlled = controlled
        self.index = OwnerIndex()
        self.seeded = asyncio.Event()  # the scan at start is done: passes wait for it
        self._pending: dict[str | None, tuple[set[str], set[tuple[str, str]]]] = {}  # namespace -> passes to do
        self._gone_owners: dict[str, None] = {}  # the uids of the last owners collected, oldest first
        # the revision up to which this process has seen every store event (``follow``), and
        # the owners deleted at later ones: (revision, group, kind, namespace, uid), in order
        self._seen_revision: Callable[[], int] | None = None
        self._unseen: deque[tuple[int, str, str, str | None, str]] = deque(maxlen=_UNSEEN_MAX)
        self._by_prefix: dict[bytes, ResourceType] = {}  # the served types by store prefix (``observe``)
        # the key's directory, apiVersion and kind noted (``observe``): known places, nothing to do
        self._observed_places: set[bytes] = set()
        # owner references of dependents written through this process (created, or updated to
        # name another owner) or found by a scan, whose owners are to be looked up: (the
        # dependent's namespace, apiVersion, kind, name, uid)
        self._unverified: dict[tuple[str | None, str, str, str, str], None] = {}
        # the dependents a scan found, as stored, whose references are read into those:
        # (namespace, value, apiVersion, kind)
        self._created: list[tuple[str | None, bytes, bytes, bytes]] = []
        # owners lately looked up and found there, not looked up again while they are (a
        # ReplicaSet's every pod names it): uid -> the owner's key, and key -> uid ("" while
        # it is being looked up); a delete of the key seen by ``observe`` or ``gone`` forgets it
        self._present: dict[str, bytes] = {}
        self._owner_keys: dict[bytes, str] = {}
        # whether the owners of the dependents the scan at start finds are looked up here, and
        # the propagation finalizers it finds carried out: False in a ``serve --workers``
        # process forked with the first, which does it for them all (``GarbageCollector.first``)
        self.first = True
        self._let_go = 0  # dependents not looked up (past _UNVERIFIED_MAX), since the last warning
        self._verifying = False  # a task looks them up
        self._rescan_wanted = False  # a feed restart's scan has not started (``restarted``)
        self._rescanning = False  # a task scans for them
        self._peek: Peek | None = None

    @property
    def store(self) -> Store:
        return self._get_store()

    def calls(self, delete: DeleteObject, patch: PatchObject) -> None:
        """Make the deletes and patches by these (requests to this server, audited) instead."""
        self._delete, self._patch = delete, patch

    def _start(self, work: Awaitable[None]) -> None:
        """Start ``work`` as the collector (``COLLECTOR``), not as the user whose request led to it."""
        self._spawn(_as_collector(work))

    # --- an owner gone: its dependents (Background) ------------------------------------------

    def gone(self, rtype: ResourceType, owner: dict[str, Any], revision: int = 0) -> None:
        """``owner`` (of ``rtype``) was deleted from the store at ``revision``: its dependents
        are collected by the pass of each namespace that may hold them, with those of the
        others gone meanwhile. One deleted before this process saw every store event up to
        its delete is kept until it has (``_recheck``): a dependent written just before
        through another process may be noted only then."""
        meta = owner.get("metadata") or {}
        uid = meta.get("uid")
        if not uid:
            return
        namespace = (meta.get("namespace") or None) if rtype.namespaced else None
        if self._present:
            self._forget(uid)
        if self._seen_revision is not None and revision:
            unseen, seen = self._unseen, self._seen_revision()
            if self.seeded.is_set():
                while unseen and unseen[0][0] <= seen:
                    unseen.popleft()
            if revision > seen:
                unseen.append((revision, rtype.group, rtype.kind, namespace, uid))
        if not self.index.names(rtype.group, rtype.kind):
            return  # (most deletes: nothing ever named an owner of this kind)
        self._collect(self.index.places(rtype.group, rtype.kind, namespace), uid)

    def _collect(self, places: Iterable[Place], uid: str) -> None:
        for namespace, group, plural in places:
            pending = self._pending.get(namespace)
            if pending is not None:
                pending[0].add(uid)  # the namespace's task takes it in its next pass
                pending[1].add((group, plural))
                continue
            self._pending[namespace] = ({uid}, {(group, plural)})
            self._start(self._passes(namespace))

    # --- where owners have dependents: every write's, whichever process made it ---------------

    def follow(self, revision: Callable[[], int], peek: Peek | None = None) -> None:
        """This process sees every store event (its watch cache feed calls ``observe`` with
        each batch) up to ``revision()``; then the scan at start notes those stored before.
        ``peek`` looks owners up in the watch cache before the store."""
        self._seen_revision = revision
        self._peek = peek
        self._start(self.seed())

    def restarted(self) -> None:
        """The feed restarted (its watch failed): the store events between were never seen
        here. The store is scanned again, as at start: the dependents written meanwhile noted,
        and those whose owners went meanwhile collected. (Restarts while a scan waits to
        start share it.) The owners known to be there are forgotten: their deletes may be
        among the events missed."""
        self._present.clear()
        self._owner_keys.clear()
        self._rescan_wanted = True
        if not self._rescanning:
            self._rescanning = True
            self._start(self._rescan())

    async def _rescan(self) -> None:
        try:
            await self.seeded.wait()
            while self._rescan_wanted:
                self._rescan_wanted = False
                try:
                    await self._scan(None, look_up=True)
                except store.StoreError as e:
                    log.warning("garbage collector: the owner references written while the feed restarted are not "
                                "all known: %s", e)
        finally:
            self._rescanning = False

    def observe(self, events: Sequence[Event]) -> None:
        """A batch of store events, whoever wrote them: the owner references of the objects
        written noted. A value is tested for them as bytes, and parsed only if it has some."""
        if type(events) is EventRun:
            # a bulk request's rewrites (api/bulkwrites.py: LeaseRenewals' renewTime,
            # NodeStatusReports' conditions) of objects that exist, their owner references as
            # their versions before, whose events were noted (or the scan at start found them)
            return
        owner_keys = self._owner_keys
        for ev in events:
            kv = ev.kv
            value = kv.value
            if _NAMES_OWNERS in value:
                self._observed(kv)
            elif not value and owner_keys:  # a delete (its value is empty): an owner known to be there?
                uid = owner_keys.pop(kv.key, None)
                if uid:
                    self._present.pop(uid, None)

    def _observed(self, kv: KeyValue) -> None:
        # the object's place and owner kinds as bytes, known already for nearly every write (a
        # renewal of a node's Lease): a set lookup each, nothing decoded. (Its owners are looked
        # up by the process the write went through: ``noted``.)
        key, value = kv.key, kv.value
        where = key[:key.rfind(b"/") + 1]
        observed = self._observed_places
        for api_version, kind in _owner_kinds(value):
            seen = b"%s\0%s\0%s" % (where, api_version, kind)
            if seen in observed:
                continue
            # /registry/<plural>/[<namespace>/]<name> or /registry/<group>/<plural>/[<namespace>/]<name>
            parts = key.split(b"/", 4)
            if len(parts) < 4:
                return
            rtype = self._type_at(parts)
            if rtype is None:
                self._by_prefix = {t.prefix(): t for t in self.registry.all()}  # (a type served lately)
                rtype = self._type_at(parts)
                if rtype is None:
                    return
            namespace = key[len(rtype.prefix()):].partition(b"/")[0].decode() if rtype.namespaced else None
            self._recheck(self.index.note(rtype, namespace, ({"apiVersion": api_version.decode(errors="replace"),
                                                              "kind": kind.decode(errors="replace")},)),
                          kv.mod_revision)
            observed.add(seen)

    # --- owners absent from the start: looked up ------------------------------------------------

    def _look_up(self, namespace: str | None, value: bytes, api_version: bytes, kind: bytes) -> None:
        """The owners of ``api_version`` and ``kind`` that ``value``, a dependent in ``namespace``
        found by a scan, names are looked up by a task of their own (``_look_ups``), which
        reads them from it: here, a list append."""
        if len(self._created) < _UNVERIFIED_MAX:
            self._created.append((namespace, value, api_version, kind))
        else:
            self._let_go += 1
        if not self._verifying:
            self._verifying = True
            self._start(self._looking_up())

    def _read_created(self, count: int) -> None:
        """The owner references of ``count`` of the dependents a scan found (``_created``, the
        newest), to look up once each."""
        created = self._created[-count:]
        del self._created[-count:]
        unverified = self._unverified
        for namespace, value, api_version, kind in created:
            for a, k, name, uid in _owner_refs(value):
                if uid and a == api_version and k == kind:
                    unverified[(namespace, a.decode(errors="replace"), k.decode(errors="replace"),
                                name.decode(errors="replace"), uid.decode(errors="replace"))] = None

    async def _looking_up(self) -> None:
        try:
            await self._look_ups()
        finally:
            self._verifying = False

    async def _look_ups(self) -> None:
        """Upstream's look-up of a "virtual" owner (one its graph does not hold: ``isDangling``
        in garbagecollector.go) for each reference noted by ``_look_up``: an owner the watch
        cache holds with that uid is there; else the store is read (the live look-up) and an
        owner it does not hold with that uid is gone: its dependents are collected as if it had
        just been deleted (a pass of each place that may hold them, ``attempt`` for each)."""
        unverified = self._unverified
        done = 0
        while unverified or self._created:
            if self._let_go:
                log.warning("garbage collector: the owners of %d new dependents are not looked up (more than %d "
                            "waited); the next start's scan will", self._let_go, _UNVERIFIED_MAX)
                self._let_go = 0
            if self._created and len(unverified) < _READ_CHUNK:
                self._read_created(_READ_CHUNK)
                if not unverified:
                    continue
            (namespace, api_version, kind, name, uid), _ = unverified.popitem()
            try:
                await self._look_up_one(namespace, api_version, kind, name, uid)
            except store.StoreError as e:
                log.warning("garbage collector: looking up the owner %s %s (uid %s): %s", kind, name, uid, e)
            done += 1
            if done % 64 == 0:
                await asyncio.sleep(0)  # (peeks at the cache may not yield)

    async def _look_up_one(self, namespace: str | None, api_version: str, kind: str, name: str, uid: str) -> None:
        group, _, version = api_version.rpartition("/")
        rtype = next((t for t in self.registry.in_group_version(group, version) if t.kind == kind), None)
        if rtype is None or (rtype.namespaced and namespace is None):
            # a kind not served (its dependents left, as ``_owner_state``), or a namespaced
            # owner named by a cluster-scoped object (left: upstream reports it as invalid)
            return
        owner_namespace = namespace if rtype.namespaced else None
        key = rtype.key(owner_namespace, name)
        keys = self._owner_keys
        if uid in self._present or keys.setdefault(key, "") == uid:
            return  # (looked up meanwhile)
        # (a delete of the key seen while it is looked up pops the mark: then nothing is kept)
        if self._peek is not None:
            cached = await self._peek(rtype, key)
            if cached and _is_object(cached, uid):
                self._keep(key, uid)
                return
        ref = {"apiVersion": api_version, "kind": kind, "name": name, "uid": uid}
        if await self._owner_state(namespace, ref) != "absent":
            self._keep(key, uid)
            return
        if keys.get(key) == "":
            del keys[key]
        # absent: its dependents collected, those of the pairs its controller would have
        # collected too (it never saw this owner: upstream's collector takes them)
        self._collect(self.index.places(rtype.group, rtype.kind, owner_namespace, theirs_too=True), uid)

    def _keep(self, key: bytes, uid: str) -> None:
        """The owner at ``key`` with ``uid`` was found there: not looked up again until a delete
        of the key is seen (unless a delete was seen while it was looked up)."""
        keys = self._owner_keys
        if keys.get(key) != "":
            return
        keys[key] = uid
        present = self._present
        present[uid] = key
        if len(present) > _PRESENT_MAX:
            self._forget(next(iter(present)))

    def _forget(self, uid: str) -> None:
        key = self._present.pop(uid, None)
        if key is not None and self._owner_keys.get(key) == uid:
            del self._owner_keys[key]

    def _type_at(self, parts: list[bytes]) -> ResourceType | None:
        rtype = self._by_prefix.get(b"/".join(parts[:3]) + b"/")
        if rtype is None and len(parts) == 5:
            rtype = self._by_prefix.get(b"/".join(parts[:4]) + b"/")
        return rtype

    def noted(self, rtype: ResourceType, namespace: str | None, refs: list[Any], revision: int,
              before: Sequence[Any] | None = None) -> None:
        """An object of ``rtype`` naming owners (``refs``), written through this process at
        ``revision``: noted at once (the feed's event of it may come after a delete of its
        owner that follows the write). ``before``: the references of the version it replaced
        (``()`` for a create; None, a write that does not change them): the owners it names
        anew are looked up, as upstream's graph builder looks up those an object's add or
        update names that its graph does not hold (``processGraphChanges``, ``referencesDiffs``
        in graph_builder.go). Only by the process the write went through: once, whatever the
        number of server processes."""
        self._recheck(self.index.note(rtype, namespace, refs), revision)
        if before is not None and refs != before:
            self._referenced(namespace, refs, before)

    def _referenced(self, namespace: str | None, refs: list[Any], before: Sequence[Any]) -> None:
        old = {ref.get("uid") for ref in before if isinstance(ref, dict)}
        unverified = self._unverified
        queued = False
        for ref in refs:
            if not isinstance(ref, dict):
                continue
            uid = ref.get("uid")
            if not uid or uid in old or uid in self._present:
                continue  # (an owner lately found there: every pod a ReplicaSet makes)
            if len(unverified) >= _UNVERIFIED_MAX:
                self._let_go += 1
                continue
            unverified[(namespace or None, str(ref.get("apiVersion") or ""), str(ref.get("kind") or ""),
                        str(ref.get("name") or ""), str(uid))] = None
            queued = True
        if queued and not self._verifying:
            self._verifying = True
            self._start(self._looking_up())

    def _recheck(self, new: list[tuple[str, str, Place]], revision: int) -> None:
        """An object written at ``revision`` was the first to name owners of these kinds in
        these places: the owners of them deleted after it, before this process heard of it,
        are looked for there."""
        if not new or not self._unseen:
            return
        for deleted, group, kind, namespace, uid in list(self._unseen):
            if deleted <= revision:
                continue
            places = {p for g, k, p in new if g == group and k == kind}
            if places:
                self._collect((p for p in self.index.places(group, kind, namespace) if p in places), uid)

    def _places(self, rtype: ResourceType, namespace: str | None) -> list[Place]:
        return self.index.places(rtype.group, rtype.kind, namespace if rtype.namespaced else None)

    async def _passes(self, namespace: str | None) -> None:
        try:
            await self.seeded.wait()
            while pending := self._pending.get(namespace):
                gone, resources = pending
                if not gone:
                    break
                self._pending[namespace] = (set(), set())
                await self._pass(namespace, gone, resources)
                self._gone_owners.update(dict.fromkeys(gone))
                while len(self._gone_owners) > GONE_OWNERS_KEPT:
                    del self._gone_owners[next(iter(self._gone_owners))]
        finally:
            self._pending.pop(namespace, None)

    async def _pass(self, namespace: str | None, gone: set[str], resources: set[tuple[str, str]]) -> None:
        try:
            if namespace is not None and await self._terminating(namespace):
                return
            for rtype, obj in await self._named(namespace, gone, resources):
                await self.attempt(rtype, obj, gone)
        except store.StoreError as e:
            log.warning("garbage collector: the dependents of %d owners in %s are left: %s", len(gone),
                        namespace or "the cluster scope", e)

    async def _named(self, namespace: str | None, uids: set[str], resources: Iterable[tuple[str, str]]
                     ) -> list[tuple[ResourceType, dict[str, Any]]]:
        """The objects of ``resources`` in ``namespace`` that name one of ``uids`` as an owner."""
        needles = [uid.encode() for uid in uids] if len(uids) <= _NEEDLES_MAX else [b'"ownerReferences"']
        found: list[tuple[ResourceType, dict[str, Any]]] = []
        for group, plural in resources:
            rtype = self._served(group, plural)
            if rtype is None or rtype.namespaced != (namespace is not None):
                continue
            prefix = rtype.prefix(namespace)
            kvs, _, _ = await self.store.range(prefix, store.prefix_end(prefix))
            for kv in kvs:
                if not any(needle in kv.value for needle in needles):
                    continue
                obj: dict[str, Any] = orjson.loads(kv.value)
                if any(ref.get("uid") in uids for ref in _owners(obj)):
                    obj.setdefault("metadata", {})["resourceVersion"] = str(kv.mod_revision)
                    found.append((rtype, obj))
        return found

    def _served(self, group: str, plural: str) -> ResourceType | None:
        return next((t for t in self.registry.all() if t.group == group and t.plural == plural), None)

    async def attempt(self, rtype: ResourceType, obj: dict[str, Any], gone: set[str],
                      waiting: set[str] | frozenset[str] = frozenset()) -> None:
        """Upstream's ``attemptToDeleteItem`` for ``obj``, a dependent of the owners ``gone``
        (or ``waiting``, being deleted in the foreground): kept, its references to them removed,
        while another owner is there; else deleted."""
        meta = obj.get("metadata") or {}
        if meta.get("deletionTimestamp"):
            return  # being deleted already
        namespace = meta.get("namespace") or None
        solid: list[dict[str, Any]] = []
        dangling: list[dict[str, Any]] = []
        waits: list[dict[str, Any]] = []
        for ref in _owners(obj):
            uid = ref.get("uid")
            if uid in gone or uid in self._gone_owners:
                dangling.append(ref)
            elif uid in waiting:
                waits.append(ref)
            else:
                state = await self._owner_state(namespace, ref)
                (solid if state == "solid" else waits if state == "waiting" else dangling).append(ref)
        name = meta.get("name", "")
        if solid:
            if dangling or waits:
                dropped = {ref.get("uid") for ref in (*dangling, *waits)}
                await self._drop_refs(rtype, obj, dropped)
            return
        finalizers = meta.get("finalizers") or ()
        if waits and self.index.names(rtype.group, rtype.kind):
            policy = "Foreground"
        else:
            policy = "Orphan" if ORPHAN in finalizers else "Foreground" if FOREGROUND in finalizers else "Background"
        try:
            await self._delete(rtype, namespace, name, {"propagationPolicy": policy,
                                                        "preconditions": {"uid": meta.get("uid")}})
        except ApiError as e:  # gone already (404), or replaced (409: the uid precondition)
            if e.code not in (404, 409):
                log.warning("garbage collector: deleting %s %s/%s, a dependent of a deleted owner: %s",
                            rtype.plural, namespace or "", name, e)

    async def _owner_state(self, namespace: str | None, ref: dict[str, Any]) -> str:
        """``absent``, ``waiting`` (being deleted in the foreground) or ``solid``: the owner ``ref``
        names (by its uid). One of a kind this server does not serve (any more) counts as solid,
        so that its dependents are left."""
        group, _, version = str(ref.get("apiVersion") or "").rpartition("/")
        rtype = next((t for t in self.registry.in_group_version(group, version) if t.kind == ref.get("kind")), None)
        if rtype is None:
            return "solid"
        kv = await self.store.get(rtype.key(namespace if rtype.namespaced else None, str(ref.get("name") or "")))
        if kv is None:
            return "absent"
        meta = orjson.loads(kv.value).get("metadata") or {}
        if meta.get("uid") != ref.get("uid"):
            return "absent"
        if meta.get("deletionTimestamp") and FOREGROUND in (meta.get("finalizers") or ()):
            return "waiting"
        return "solid"

    async def _drop_refs(self, rtype: ResourceType, obj: dict[str, Any], uids: set[Any]) -> None:
        """``obj`` without its references to ``uids`` (upstream's patch that deletes owner
        references), against the version read; read again on a conflict."""
        for _ in range(5):
            meta = obj.get("metadata") or {}
            refs = [ref for ref in _owners(obj) if ref.get("uid") not in uids]
            if len(refs) == len(_owners(obj)):
                return
            try:
                await self._patch(rtype, meta.get("namespace") or None, meta.get("name", ""), {"metadata": {
                    "ownerReferences": refs or None, "resourceVersion": meta.get("resourceVersion"),
                    "uid": meta.get("uid")}})
                return
            except ApiError as e:
                if e.code != 409:  # 404: gone; 422: the uid is another object's (replaced)
                    if e.code not in (404, 422):
                        log.warning("garbage collector: removing owner references from %s %s/%s: %s",
                                    rtype.plural, meta.get("namespace") or "", meta.get("name"), e)
                    return
            kv = await self.store.get(rtype.key(meta.get("namespace") or None, meta.get("name", "")))
            if kv is None:
                return
            obj = orjson.loads(kv.value)
            if (obj.get("metadata") or {}).get("uid") != meta.get("uid"):
                return
            obj["metadata"]["resourceVersion"] = str(kv.mod_revision)

    # --- Orphan and Foreground --------------------------------------------------------------

    def propagate(self, rtype: ResourceType, owner: dict[str, Any]) -> None:
        """``owner`` was given the ``orphan`` or ``foregroundDeletion`` finalizer: carry it out."""
        meta = owner.get("metadata") or {}
        if meta.get("uid"):
            self._start(self._propagate(rtype, meta.get("namespace") or None, meta.get("name", ""), meta["uid"]))

    async def _propagate(self, rtype: ResourceType, namespace: str | None, name: str, uid: str) -> None:
        await self.seeded.wait()
        wait = _WAIT_FIRST
        while True:
            try:
                kv = await self.store.get(rtype.key(namespace, name))
                if kv is None:
                    return
                owner = orjson.loads(kv.value)
                meta = owner.get("metadata") or {}
                finalizers = list(meta.get("finalizers") or ())
                if meta.get("uid") != uid or not meta.get("deletionTimestamp"):
                    return
                if ORPHAN in finalizers:
                    for dep_type, dep in await self._dependents(rtype, namespace, uid):
                        await self._drop_refs(dep_type, dep, {uid})
                    done = ORPHAN
                elif FOREGROUND in finalizers:
                    blocked = False
                    for dep_type, dep in await self._dependents(rtype, namespace, uid):
                        ref = next(r for r in _owners(dep) if r.get("uid") == uid)
                        blocked = blocked or ref.get("blockOwnerDeletion") is True
                        await self.attempt(dep_type, dep, set(), {uid})
                    if blocked:  # looked at again: the deletes above may have removed them
                        await asyncio.sleep(wait)
                        wait = min(wait * 2, _WAIT_MAX)
                        continue
                    done = FOREGROUND
                else:
                    return
                finalizers.remove(done)
                await self._patch(rtype, namespace, name, {"metadata": {
                    "finalizers": finalizers or None, "resourceVersion": str(kv.mod_revision)}})
                return
            except ApiError as e:
                if e.code == 404:
                    return
                if e.code != 409:
                    log.warning("garbage collector: the %s finalizer of %s %s/%s: %s", FOREGROUND,
                                rtype.plural, namespace or "", name, e)
                    await asyncio.sleep(wait)
                    wait = min(wait * 2, _WAIT_MAX)
            except store.StoreError as e:
                log.warning("garbage collector: the dependents of %s %s/%s: %s", rtype.plural, namespace or "",
                            name, e)
                await asyncio.sleep(wait)
                wait = min(wait * 2, _WAIT_MAX)

    async def _dependents(self, rtype: ResourceType, namespace: str | None, uid: str
                          ) -> list[tuple[ResourceType, dict[str, Any]]]:
        by_namespace: dict[str | None, set[tuple[str, str]]] = {}
        for ns, group, plural in self._places(rtype, namespace if rtype.namespaced else None):
            by_namespace.setdefault(ns, set()).add((group, plural))
        found: list[tuple[ResourceType, dict[str, Any]]] = []
        for ns, resources in by_namespace.items():
            found += await self._named(ns, {uid}, resources)
        return found

    # --- the scan at start --------------------------------------------------------------------

    async def seed(self) -> None:
        """Note the owner references stored before this process started, and resume the
        propagation finalizers an earlier run left; then the passes may go. The owners the
        dependents found name are looked up (``_look_ups``): those deleted while no server
        ran, or never there, have their dependents collected."""
        resume: list[tuple[ResourceType, dict[str, Any]]] = []
        try:
            await self._scan(resume if self.first else None, look_up=self.first)
            for rtype, obj in resume:
                self.propagate(rtype, obj)
        except store.StoreError as e:
            log.warning("garbage collector: the owner references stored before this start are not all known: %s", e)
        finally:
            self.seeded.set()
        if (self._unverified or self._created) and not self._verifying:
            self._verifying = True
            self._start(self._looking_up())

    async def _scan(self, resume: list[tuple[ResourceType, dict[str, Any]]] | None, look_up: bool) -> None:
        """Every stored object read: its owner references noted, and, with ``look_up``, its
        owners to be looked up (those of the pairs the controllers collect too: an owner
        their controller never saw is collected here); with ``resume``, the owners that wait
        for a propagation finalizer collected in it."""
        seen: set[bytes] = set()
        for rtype in self.registry.all():
            prefix = rtype.prefix()
            if prefix in seen:
                continue
            seen.add(prefix)
            start, end = prefix, store.prefix_end(prefix)
            while True:
                kvs, _, more = await self.store.range(start, end, limit=_SCAN_PAGE)
                for kv in kvs:
                    self._seed_one(rtype, kv.key, kv.value, kv.mod_revision, resume, look_up)
                if len(self._unverified) + len(self._created) >= _UNVERIFIED_MAX // 2:
                    await self._look_ups()  # (as it goes: a large store's references are not all held)
                if not more or not kvs:
                    break
                start = kvs[-1].key + b"\x00"

    def _seed_one(self, rtype: ResourceType, key: bytes, value: bytes, revision: int,
                  resume: list[tuple[ResourceType, dict[str, Any]]] | None, look_up: bool) -> None:
        namespace = key[len(rtype.prefix()):].partition(b"/")[0].decode() if rtype.namespaced else None
        if _NAMES_OWNERS in value:
            self._recheck(self.index.note_stored(rtype, namespace, value), revision)
            if look_up:
                for api_version, kind in {(a, k) for a, k in _owner_kinds(value)}:
                    self._look_up(namespace, value, api_version, kind)
        if resume is None:
            return
        if b'"deletionTimestamp"' in value and (b'"orphan"' in value or b'"foregroundDeletion"' in value):
            if (rtype.group, rtype.plural) in self.controlled:
                return  # its controller carries it out
            obj = orjson.loads(value)
            meta = obj.get("metadata") or {}
            if meta.get("deletionTimestamp") and {ORPHAN, FOREGROUND} & set(meta.get("finalizers") or ()):
                resume.append((rtype, obj))

    async def _terminating(self, namespace: str) -> bool:
        namespaces = self.registry.get("", "v1", "namespaces")
        assert namespaces is not None
        kv = await self.store.get(namespaces.key(None, namespace))
        return kv is None or bool((orjson.loads(kv.value).get("metadata") or {}).get("deletionTimestamp"))
