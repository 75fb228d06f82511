"""API Priority and Fairness's configuration kept, as kube-apiserver's config controller and
bootstrap ensurer keep it (``registry/flowcontrol.py``); the API server applies it to
requests (``api/flowcontrol.py``).

- Each FlowSchema's ``Dangling`` condition says whether the PriorityLevelConfiguration
  it names exists (False, reason ``Found``) or not (True, ``NotFound``), in upstream's
  words; it moves when schemas or levels come and go.
- The bootstrap ensurer, once a minute and when one is deleted: the bootstrap objects
  missing are created again, and their spec set back as ``restores`` says (mandatory
  ones always, suggested ones while their ``autoupdate-spec`` annotation is ``"true"``).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from controlplane.client import ApiError, Client, resource_path
from controlplane.client.workqueue import WorkQueue, run_controller
from controlplane.registry.flowcontrol import bootstrap_objects, restores

from .ownership import meta_of

if TYPE_CHECKING:
    from controlplane.config import Config

__all__ = ["FlowSchemaController", "dangling_condition", "start"]

Obj = dict[str, Any]
GROUP = "flowcontrol.apiserver.k8s.io"
SCHEMAS = resource_path(GROUP, "v1", "flowschemas")
LEVELS = resource_path(GROUP, "v1", "prioritylevelconfigurations")
_BOOTSTRAP = bootstrap_objects()
_ENSURE = "\x00ensure"  # the queue's key for the ensurer: never a FlowSchema's name
ENSURE_SECONDS = 60.0  # as upstream's ensurer, once a minute


def dangling_condition(level: str, exists: bool) -> Obj:
    """A FlowSchema's ``Dangling`` condition (without its transition time)."""
    if exists:
        return {"type": "Dangling", "status": "False", "reason": "Found",
                "message": f'This FlowSchema references the PriorityLevelConfiguration object named "{level}" '
                           "and it exists"}
    return {"type": "Dangling", "status": "True", "reason": "NotFound",
            "message": f'This FlowSchema references the PriorityLevelConfiguration object named "{level}" '
                       "but there is no such object"}


class FlowSchemaController:
    def __init__(self, client: Client) -> None:
        self.client = client
        self.queue = WorkQueue()
        self.schemas = client.informer(SCHEMAS, on_add=self._schema, on_update=lambda _old, new: self._schema(new),
                                       on_delete=self._deleted)
        self.levels = client.informer(LEVELS, on_add=self._level, on_update=lambda _old, new: None,
                                      on_delete=self._level_deleted)

    def _schema(self, fs: Obj) -> None:
        self.queue.add(meta_of(fs).get("name") or "")

    def _deleted(self, _obj: Obj) -> None:
        self.queue.add(_ENSURE)

    def _level(self, pl: Obj) -> None:
        name = meta_of(pl).get("name")
        for key, fs in self.schemas.items.items():
            if ((fs.get("spec") or {}).get("priorityLevelConfiguration") or {}).get("name") == name:
                self.queue.add(key)

    def _level_deleted(self, pl: Obj) -> None:
        self._level(pl)
        self.queue.add(_ENSURE)

    async def run(self) -> None:
        await run_controller("apf configuration controller", (self.schemas, self.levels), self.queue, self.sync, 1,
                             on_synced=lambda: self.queue.add(_ENSURE))

    async def sync(self, key: str) -> None:
        if key == _ENSURE:
            self.queue.add_after(_ENSURE, ENSURE_SECONDS)
            await self.ensure()
            return
        fs = self.schemas.items.get(key)
        if fs is None:
            return
        level = str(((fs.get("spec") or {}).get("priorityLevelConfiguration") or {}).get("name") or "")
        condition = dangling_condition(level, level in self.levels.items)
        held_status = fs.get("status")
        status: Obj = held_status if isinstance(held_status, dict) else {}
        conditions = [c for c in status.get("conditions") or () if isinstance(c, dict)]
        old = next((c for c in conditions if c.get("type") == "Dangling"), None)
        if old is not None and all(old.get(k) == v for k, v in condition.items()):
            return
        condition["lastTransitionTime"] = old["lastTransitionTime"] \
            if old is not None and old.get("status") == condition["status"] and old.get("lastTransitionTime") \
            else datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        kept = [c for c in conditions if c.get("type") != "Dangling"]
        await self.client.update(f"{SCHEMAS}/{key}/status", {**fs, "status": {**status,
                                                                             "conditions": [*kept, condition]}})

    async def ensure(self) -> None:
        for plural, wanted, mandatory in _BOOTSTRAP:
            name = wanted["metadata"]["name"]
            path = SCHEMAS if plural == "flowschemas" else LEVELS
            held = (self.schemas if plural == "flowschemas" else self.levels).items.get(name)
            if held is None:
                try:
                    await self.client.create(path, wanted)
                except ApiError as e:
                    if e.code != 409:  # (created meanwhile: the informer will say)
                        raise
            elif held.get("spec") != wanted["spec"] and restores(plural, held, mandatory):
                meta = dict(meta_of(held))  # (its resourceVersion: a precondition)
                if mandatory:
                    meta["annotations"] = {**(meta.get("annotations") or {}), **wanted["metadata"]["annotations"]}
                await self.client.update(f"{path}/{name}", {**held, "metadata": meta, "spec": wanted["spec"]})


async def start(client: Client, config: Config) -> None:
    """The component entry point (``controlplane/components.py``)."""
    await FlowSchemaController(client).run()
