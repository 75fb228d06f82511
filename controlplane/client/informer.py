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
from collections.abc import Callable
from typing import Any

from .client import ApiError, Client

__all__ = ["Informer", "object_key"]

log = logging.getLogger(__name__)

Handler = Callable[[dict[str, Any]], None]
UpdateHandler = Callable[[dict[str, Any], dict[str, Any]], None]


def object_key(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata", {})
    ns = meta.get("namespace")
    return f"{ns}/{meta['name']}" if ns else str(meta["name"])


def _nothing(*_: Any) -> None:
    pass


class Informer:
    def __init__(self, client: Client, path: str, *, field_selector: str | None = None,
                 label_selector: str | None = None, on_add: Handler | None = None,
                 on_update: UpdateHandler | None = None, on_delete: Handler | None = None,
                 page_size: int = 500) -> None:
        self.client = client
        self.path = path
        self.field_selector = field_selector
        self.label_selector = label_selector
        self.on_add: Handler = on_add or _nothing
        self.on_update: UpdateHandler = on_update or _nothing
        self.on_delete: Handler = on_delete or _nothing
        self.page_size = page_size
        self.items: dict[str, dict[str, Any]] = {}
        self.resource_version = ""
        self.synced = asyncio.Event()  # set after the first list has been delivered
        self.relists = 0

    async def run(self) -> None:
        backoff = 0.1
        need_list = True
        while True:
            try:
                if need_list:
                    await self._list()
                    need_list = False
                await self._watch()
                backoff = 0.1
            except ApiError as e:
                if e.code == 410:
                    log.info("informer %s: %s; listing again", self.path, e.message)
                    need_list = True
                    continue
                log.warning("informer %s: %s", self.path, e)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # a dropped connection, a server restart
                log.warning("informer %s: %r", self.path, e)
            await asyncio.sleep(backoff * (1 + random.random()))
            backoff = min(backoff * 2, 5.0)

    async def _list(self) -> None:
        fresh: dict[str, dict[str, Any]] = {}
        cont = None
        while True:
            page = await self.client.list(self.path, limit=self.page_size, fieldSelector=self.field_selector,
                                          labelSelector=self.label_selector, **({"continue": cont} if cont else {}))
            for obj in page.get("items", ()):
                fresh[object_key(obj)] = obj
            cont = page.get("metadata", {}).get("continue")
            if not cont:
                break
        self.resource_version = page["metadata"]["resourceVersion"]
        old, self.items = self.items, fresh
        if self.synced.is_set():
            self.relists += 1
        for key, obj in old.items():
            if key not in fresh:
                self.on_delete(obj)
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
            key = object_key(obj)
            if ev.type == "DELETED":
                self.items.pop(key, None)
                self.on_delete(obj)
            else:
                before = self.items.get(key)
                self.items[key] = obj
                if before is None:
                    self.on_add(obj)
                else:
                    self.on_update(before, obj)
