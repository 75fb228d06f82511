"""``componentstatuses`` (core/v1 ComponentStatus, deprecated upstream since 1.19 but
still served): ``kubectl get cs`` lists ``scheduler``, ``controller-manager`` and
``etcd-0``, each with one ``Healthy`` condition.

Nothing is stored: each read computes the answer, as upstream's componentstatus REST
(pkg/registry/core/componentstatus) probes on each read. The scheduler and the
controller manager run inside this server (or are left out on purpose), so they are
reported healthy, ``ok``, as their ``/healthz`` answers upstream; ``etcd-0`` is this
server's store, healthy when it answers. Only get and list (no watch), with label and
field selectors on the object metadata fields, as upstream; every read carries
upstream's deprecation warning.
"""

from __future__ import annotations

from typing import Any

from ..registry.attrs import Filter, SelectorError, attrs_of
from .errors import ApiError

__all__ = ["DEPRECATION", "PLURAL", "component_statuses"]

DEPRECATION = "v1 ComponentStatus is deprecated in v1.19+"
PLURAL = "componentstatuses"
_COMPONENTS = ("scheduler", "controller-manager", "etcd-0")


def _status(name: str, healthy: bool, message: str, error: str = "") -> dict[str, Any]:
    condition = {"type": "Healthy", "status": "True" if healthy else "False", "message": message}
    if error:
        condition["error"] = error
    return {"kind": "ComponentStatus", "apiVersion": "v1", "metadata": {"name": name}, "conditions": [condition]}


async def _store_check(revision: Any) -> tuple[bool, str]:
    try:
        await revision()
    except Exception as e:  # any failure of the store is its health
        return False, str(e) or type(e).__name__
    return True, ""


async def component_statuses(store_revision: Any, name: str | None,
                             query: dict[str, str]) -> dict[str, Any]:
    """The ComponentStatus ``name``, or (``name`` None) the ComponentStatusList the
    query's selectors choose; ``store_revision`` is the store's ``revision`` (its probe)."""
    if name is not None and name not in _COMPONENTS:
        raise ApiError(404, "NotFound", f'componentstatuses "{name}" not found',
                       {"name": name, "kind": PLURAL})
    wanted = _COMPONENTS if name is None else (name,)
    items = []
    for component in wanted:
        if component == "etcd-0":
            healthy, error = await _store_check(store_revision)
            items.append(_status(component, healthy, "ok" if healthy else "", error))
        else:
            items.append(_status(component, True, "ok"))
    if name is not None:
        return items[0]
    try:
        selected = Filter.parse(PLURAL, query.get("labelSelector"), query.get("fieldSelector"))
    except SelectorError as e:
        raise ApiError.bad_request(str(e)) from e
    if not selected.everything:
        items = [i for i in items if selected.matches(attrs_of(PLURAL, i))]
    return {"kind": "ComponentStatusList", "apiVersion": "v1", "metadata": {}, "items": items}
