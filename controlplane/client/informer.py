"""List, then watch from the list's revision, forever: client-go's reflector.

``items`` mirrors the server's objects of one collection (by ``namespace/name``,
or ``name`` when cluster-scoped). Handlers run in revision order on the
informer's task, synchronously: a handler that must do I/O queues work
elsewhere, as a client-go event handler does.

The rule that keeps it exact is kine's and the watch cache's: the watch starts
at the list's ``resourceVersion``, so it carries every change after the list
and none before. A watch that ends is resumed from the last revision seen
(bookmarks keep that recent); one answered 410 Gone means the server no longer
has that revision, so the informer lists again and reports the difference.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable, MutableMapping
from typing import Any

from ..gcsettings import untrack_json
from .client import ApiError, Client
from .helditems import PackedItems
from .sharing import NodeSharer, PodSharer

__all__ = ["Informer", "InformerHandle", "SharedInformer", "held_in", "object_key", "strip_managed_fields"]

log = logging.getLogger(__name__)

Handler = Callable[[dict[str, Any]], None]
UpdateHandler = Callable[[dict[str, Any], dict[str, Any]], None]
Transform = Callable[[dict[str, Any]], dict[str, Any]]
Items = MutableMapping[str, dict[str, Any]]


def object_key(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata", {})
    ns = meta.get("namespace")
    return f"{ns}/{meta['name']}" if ns else str(meta["name"])


def held_in(items: Items, namespace: str) -> list[dict[str, Any]]:
    """The objects of ``namespace`` an informer holds, found by their keys
    (``namespace/name``): of a ``PackedItems``, only those are parsed."""
    prefix = namespace + "/"
    return [obj for key in list(items) if key.startswith(prefix) and (obj := items.get(key)) is not None]


def strip_managed_fields(obj: dict[str, Any]) -> dict[str, Any]:
    """What kube-scheduler's and the controllers' informers hold: the object without
    its managedFields (a fifth of a parsed pod, read by no controller). An update
    sent without managedFields keeps the stored ones, so writing such an object
    back loses nothing."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
    untrack_json(obj)  # held for long: out of the cyclic collector's sight (gcsettings)
    return obj


def without_managed_fields(obj: dict[str, Any]) -> dict[str, Any]:
    """``strip_managed_fields`` for an object handed on but not held (a DELETED event's):
    what the handlers see is the same, and the collector's sight does not matter."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
    return obj


def _nothing(*_: Any) -> None:
    pass


NOT_SERVED_RETRY = 30.0  # seconds between lists of an optional collection the server does not serve


class Informer:
    def __init__(self, client: Client, path: str, *, field_selector: str | None = None,
                 label_selector: str | None = None, on_add: Handler | None = None,
                 on_update: UpdateHandler | None = None, on_delete: Handler | None = None,
                 page_size: int = 500, transform: Transform | None = None,
                 transform_deleted: Transform | None = None,
                 items_factory: Callable[[], Items] = dict) -> None:
        self.client = client
        # applied to each object before it is held and handed on (client-go's SetTransform)
        self.transform = transform
        # applied instead to a DELETED event's object, which is handed on but never held: a
        # transform whose work is only for holding (sharing parts, hiding from the collector)
        # may give a lighter one (the shared informer's pods and nodes: ``without_managed_fields``)
        self.transform_deleted = transform_deleted if transform_deleted is not None else transform
        self.path = path
        self.field_selector = field_selector
        self.label_selector = label_selector
        self.on_add: Handler = on_add or _nothing
        self.on_update: UpdateHandler = on_update or _nothing
        self.on_delete: Handler = on_delete or _nothing
        self.page_size = page_size
        # what holds the objects: a dict, or for pods ``PackedItems`` (client/helditems.py)
        self.items_factory = items_factory
        self.items: Items = items_factory()
        self.resource_version = ""
        self.synced = asyncio.Event()  # set after the first list has been delivered
        self.relists = 0
        # A collection the server may not serve (an API of a later release, a feature gate
        # off): a 404 to its list counts as synced with nothing in it, and the list is tried
        # again every NOT_SERVED_RETRY seconds, so that a component run against an older
        # cluster starts, where client-go's informer never syncs. Not for what must exist.
        self.optional = False
        self.served = True  # False while an optional collection's list answers 404

    async def run(self) -> None:
        backoff = 0.1
        need_list = True
        while True:
            try:
                if need_list:
                    await self._list()
                    need_list = False
                    if not self.served:
                        log.info("informer %s: served now", self.path)
                        self.served = True
                await self._watch()
                backoff = 0.1
            except ApiError as e:
                if e.code == 410:
                    log.info("informer %s: %s; listing again", self.path, e.message)
                    need_list = True
                    continue
                if e.code == 404 and need_list and self.optional:
                    if self.served:
                        log.warning("informer %s: not served by this server (404); taken as empty, listed "
                                    "again every %g s", self.path, NOT_SERVED_RETRY)
                        self.served = False
                    self.synced.set()
                    await asyncio.sleep(NOT_SERVED_RETRY)
                    continue
                log.warning("informer %s: %s", self.path, e)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # a dropped connection, a server restart
                log.warning("informer %s: %r", self.path, e)
            await asyncio.sleep(backoff * (1 + random.random()))
            backoff = min(backoff * 2, 5.0)

    async def _list(self) -> None:
        fresh = self.items_factory()
        cont = None
        while True:
            page = await self.client.list(self.path, limit=self.page_size, fieldSelector=self.field_selector,
                                          labelSelector=self.label_selector, **({"continue": cont} if cont else {}))
            transform = self.transform
            for obj in page.get("items", ()):
                fresh[object_key(obj)] = transform(obj) if transform is not None else obj
            cont = page.get("metadata", {}).get("continue")
            if not cont:
                break
        self.resource_version = page["metadata"]["resourceVersion"]
        old, self.items = self.items, fresh
        if self.synced.is_set():
            self.relists += 1
        for key in old:  # (by key: a packed object is parsed only if it is needed)
            if key not in fresh:
                self.on_delete(old[key])
        for key, obj in fresh.items():
            before = old.get(key)
            if before is None:
                self.on_add(obj)
            elif before["metadata"].get("resourceVersion") != obj["metadata"].get("resourceVersion"):
                self.on_update(before, obj)
        self.synced.set()

    async def _watch(self) -> None:
        async for ev in self.client.watch(self.path, resource_version=self.resource_version,
                                          field_selector=self.field_selector, label_selector=self.label_selector,
                                          timeout_seconds=random.randint(300, 600)):
            obj = ev.object
            rv = obj.get("metadata", {}).get("resourceVersion")
            if rv:
                self.resource_version = rv
            if ev.type == "BOOKMARK":
                continue
            transform = self.transform_deleted if ev.type == "DELETED" else self.transform
            if transform is not None:
                obj = transform(obj)
            key = object_key(obj)
            if ev.type == "DELETED":
                if key in self.items:  # (not pop: it would parse a packed object for nothing)
                    del self.items[key]
                self.on_delete(obj)
            else:
                before = self.items.get(key)
                self.items[key] = obj
                if before is None:
                    self.on_add(obj)
                else:
                    self.on_update(before, obj)


class SharedInformer(Informer):
    """One list and watch of a collection for every component of a process that wants
    it (client-go's shared informer): each object is fetched, parsed and held once,
    and handed to each component's handlers in turn (pods with their common parts shared:
    ``client/sharing.py``; other objects without managedFields). Components take an
    ``InformerHandle`` (``Client.informer``); the watch runs while one of their
    ``run()`` runs. Handlers must not change the objects they are given."""

    def __init__(self, client: Client, path: str, page_size: int = 500) -> None:
        # pods, the many objects, hold what they have in common once (client/sharing.py)
        core = "/apis/" not in path
        pods = core and path.rstrip("/").endswith("/pods")
        transform: Transform = PodSharer() if pods \
            else NodeSharer() if core and path.rstrip("/").endswith("/nodes") else strip_managed_fields
        # a deleted pod's or node's parts are not shared: it is not held (PodSharer costs about
        # 31 µs a pod, dropping managedFields alone 4: half the sharing of a run's deletions)
        # and all but the newest pods packed (client/helditems.py): most are Running, and cold
        super().__init__(client, path, page_size=page_size, on_add=self._add, on_update=self._update,
                         on_delete=self._delete, transform=transform, transform_deleted=without_managed_fields,
                         items_factory=PackedItems if pods else dict)
        self.handles: list[InformerHandle] = []
        self._task: asyncio.Task[None] | None = None

    def _add(self, obj: dict[str, Any]) -> None:
        for h in self.handles:
            h.on_add(obj)

    def _update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        for h in self.handles:
            h.on_update(old, new)

    def _delete(self, obj: dict[str, Any]) -> None:
        for h in self.handles:
            h.on_delete(obj)

    def join(self, handle: InformerHandle) -> None:
        """Deliver to ``handle`` from now on; what is already held arrives as adds at once."""
        self.handles.append(handle)
        if self.synced.is_set():
            items = self.items
            for key in list(items):  # one at a time: packed objects are parsed as they are handed on
                obj = items.get(key)
                if obj is not None:
                    handle.on_add(obj)
            handle.synced.set()
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(Informer.run(self), name=f"informer {self.path}")

    def leave(self, handle: InformerHandle) -> None:
        if handle in self.handles:
            self.handles.remove(handle)
        if not self.handles and self._task is not None:
            self._task.cancel()
            self._task = None

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


class InformerHandle:
    """A component's view of a ``SharedInformer``: its handlers, and ``run()``/``synced``
    as an ``Informer`` of its own would have them (``synced`` once its handlers have
    seen the whole list)."""

    def __init__(self, shared: SharedInformer, on_add: Handler | None = None, on_update: UpdateHandler | None = None,
                 on_delete: Handler | None = None) -> None:
        self.shared = shared
        self.path = shared.path
        self.on_add: Handler = on_add or _nothing
        self.on_update: UpdateHandler = on_update or _nothing
        self.on_delete: Handler = on_delete or _nothing
        self.synced = asyncio.Event()

    @property
    def items(self) -> Items:
        return self.shared.items

    @property
    def relists(self) -> int:
        return self.shared.relists

    async def run(self) -> None:
        self.shared.join(self)
        try:
            if not self.synced.is_set():
                await self.shared.synced.wait()  # the list's adds reached this handle's handlers
                self.synced.set()
            await asyncio.Event().wait()  # until cancelled, as Informer.run
        finally:
            self.shared.leave(self)
