"""The ``scale`` subresource of custom resources: an ``autoscaling/v1`` Scale read
from, and written to, the paths the CRD names (``specReplicasPath``,
``statusReplicasPath``, ``labelSelectorPath``).

    scale = scale_of(rtype, widget)          # GET .../widgets/w1/scale
    set_replicas(rtype, widget, new_scale)   # PUT/PATCH: spec replicas into the object
"""

from __future__ import annotations

from typing import Any

from ..registry import ResourceType
from .errors import ApiError

__all__ = ["scale_of", "set_replicas"]

Obj = dict[str, Any]
SCALE_KIND, SCALE_API_VERSION = "Scale", "autoscaling/v1"


def _path(path: str) -> list[str]:
    return [p for p in path.split(".") if p]


def _get(obj: Any, path: str) -> Any:
    for p in _path(path):
        if not isinstance(obj, dict):
            return None
        obj = obj.get(p)
    return obj


def scale_of(rtype: ResourceType, obj: Obj) -> Obj:
    """The Scale of ``obj``; a replica count the object does not have is 0."""
    assert rtype.custom is not None and rtype.custom.scale is not None
    paths = rtype.custom.scale
    meta = obj.get("metadata", {})
    spec_replicas = _get(obj, paths.get("specReplicasPath", ""))
    status_replicas = _get(obj, paths.get("statusReplicasPath", ""))
    status: Obj = {"replicas": status_replicas if isinstance(status_replicas, int) else 0}
    selector = _get(obj, paths["labelSelectorPath"]) if paths.get("labelSelectorPath") else None
    if isinstance(selector, str) and selector:
        status["selector"] = selector
    scale_meta = {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
                  if k in meta}
    return {"kind": SCALE_KIND, "apiVersion": SCALE_API_VERSION, "metadata": scale_meta,
            "spec": {"replicas": spec_replicas if isinstance(spec_replicas, int) else 0}, "status": status}


def set_replicas(rtype: ResourceType, obj: Obj, scale: Any) -> None:
    """Write ``scale``'s ``spec.replicas`` into ``obj`` (422 if it is not a count)."""
    assert rtype.custom is not None and rtype.custom.scale is not None
    name = obj.get("metadata", {}).get("name", "")
    if not isinstance(scale, dict) or scale.get("kind") not in (None, SCALE_KIND):
        raise ApiError.bad_request(f"the body must be an {SCALE_API_VERSION} {SCALE_KIND}")
    replicas = (scale.get("spec") or {}).get("replicas", 0) if isinstance(scale.get("spec"), dict | None) else None
    if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
        field = "spec.replicas"
        detail = "must be greater than or equal to 0" if isinstance(replicas, int) else "must be an integer"
        raise ApiError(422, "Invalid", f'{SCALE_KIND}.autoscaling "{name}" is invalid: {field}: Invalid value: '
                       f"{replicas}: {detail}",
                       {"name": name, "group": "autoscaling", "kind": SCALE_KIND,
                        "causes": [{"reason": "FieldValueInvalid", "field": field,
                                    "message": f"Invalid value: {replicas}: {detail}"}]})
    *parents, last = _path(rtype.custom.scale["specReplicasPath"])
    cur = obj
    for p in parents:
        nxt = cur.get(p)
        if not isinstance(nxt, dict):
            nxt = cur[p] = {}
        cur = nxt
    cur[last] = replicas
