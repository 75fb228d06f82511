"""The ``scale`` subresource: an ``autoscaling/v1`` Scale view of an object's replicas.

Deployments, ReplicaSets, StatefulSets and ReplicationControllers (and custom
resources that declare it) expose ``.../<name>/scale``. Reading it gives::

    {"kind": "Scale", "apiVersion": "autoscaling/v1",
     "metadata": {name, namespace, uid, resourceVersion, creationTimestamp},
     "spec": {"replicas": spec.replicas},
     "status": {"replicas": status.replicas, "selector": "<label selector string>"}}

Writing it (PUT, or a PATCH applied to that view) changes only the parent's
``spec.replicas``; the Scale's ``resourceVersion``, when set, is the parent's
and is checked as an update precondition. ``kubectl scale`` and the
HorizontalPodAutoscaler use this.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..registry.causes import invalid
from ..registry.managedfields import value_at
from .errors import ApiError

__all__ = ["ScalePaths", "replicas_of_scale", "scale_of", "with_spec_replicas"]


@dataclass(frozen=True, slots=True)
class ScalePaths:
    """Where a type keeps its replicas (custom resources name them in their CRD)."""

    spec_replicas: tuple[str, ...] = ("spec", "replicas")
    status_replicas: tuple[str, ...] = ("status", "replicas")
    label_selector: tuple[str, ...] | None = None  # None: ``spec.selector`` as a LabelSelector object


BUILTIN = ScalePaths()


def selector_string(selector: Any) -> str:
    """A ``metav1.LabelSelector`` (or, for ReplicationControllers, a plain map) as a selector string."""
    if not isinstance(selector, dict):
        return ""
    if "matchLabels" not in selector and "matchExpressions" not in selector:
        labels: dict[str, Any] = selector  # ReplicationController: spec.selector is a map
        return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))
    parts = [f"{k}={v}" for k, v in sorted((selector.get("matchLabels") or {}).items())]
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key", ""), expr.get("operator", ""), expr.get("values") or []
        if op == "In":
            parts.append(f"{key} in ({','.join(sorted(values))})")
        elif op == "NotIn":
            parts.append(f"{key} notin ({','.join(sorted(values))})")
        elif op == "Exists":
            parts.append(key)
        elif op == "DoesNotExist":
            parts.append(f"!{key}")
    return ",".join(parts)


def scale_of(obj: dict[str, Any], paths: ScalePaths = BUILTIN) -> dict[str, Any]:
    """The Scale view of ``obj`` (which carries its ``metadata.resourceVersion``)."""
    meta = obj.get("metadata", {})
    scale_meta = {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
                  if k in meta}
    if paths.label_selector is None:
        selector = selector_string(value_at(obj, ("spec", "selector")))
    else:
        raw = value_at(obj, paths.label_selector)
        selector = raw if isinstance(raw, str) else ""
    status: dict[str, Any] = {"replicas": value_at(obj, paths.status_replicas) or 0}
    if selector:
        status["selector"] = selector
    return {"kind": "Scale", "apiVersion": "autoscaling/v1", "metadata": scale_meta,
            "spec": {"replicas": value_at(obj, paths.spec_replicas) or 0}, "status": status}


def with_spec_replicas(obj: dict[str, Any], replicas: int, paths: ScalePaths = BUILTIN) -> dict[str, Any]:
    """``obj`` with ``replicas`` written at its spec replicas path (objects made on the way)."""
    *parents, last = paths.spec_replicas
    cur = obj
    for part in parents:
        if not isinstance(cur.get(part), dict):
            cur[part] = {}
        cur = cur[part]
    cur[last] = replicas
    return obj


def replicas_of_scale(scale: Any, name: str, namespace: str | None = None,
                      body: bool = False) -> tuple[int, int]:
    """The replicas a written Scale asks for, and its resourceVersion precondition (0: none).

    An invalid Scale is a 422 (negative replicas) or a 400 (not a Scale, or replicas that
    are no int32, a status of another type). ``body``: ``scale`` is a PUT's body, which
    must name the object as upstream's update handler checks it (``checkName``): one
    without a name, ``{}``, is a 400, where it scaled the object to zero. A Scale in
    another namespace than ``namespace`` (the URL's) is a 400 in the words of
    ``checkName`` for a PUT, of the patch handler's namespace check for a patch."""
    if not isinstance(scale, dict):
        raise ApiError.bad_request("the request body must be a Scale object")
    if scale.get("kind") not in (None, "Scale"):
        raise ApiError.bad_request(f"expected a Scale, got kind {scale.get('kind')!r}")
    meta = scale.get("metadata") or {}
    if not isinstance(meta, dict):
        raise ApiError.bad_request("metadata must be an object")
    if meta.get("name") != name and (body or meta.get("name") is not None):
        raise ApiError.name_mismatch(meta.get("name"), name)
    if namespace and meta.get("namespace") not in (None, "", namespace):
        if body:
            raise ApiError.namespace_mismatch(meta["namespace"], namespace)
        raise ApiError.bad_request("the namespace of the provided object does not match the namespace sent on "
                                   "the request")
    spec = scale.get("spec")
    if spec is not None and not isinstance(spec, dict):
        raise _undecodable(spec, "Scale.spec", "v1.ScaleSpec")
    status = scale.get("status")
    if status is not None and not isinstance(status, dict):
        raise _undecodable(status, "Scale.status", "v1.ScaleStatus")
    replicas = spec.get("replicas") if spec else None
    if replicas is None:
        replicas = 0  # absent or null: Go's zero
    if isinstance(replicas, bool) or not isinstance(replicas, int) or not -_INT32 <= replicas < _INT32:
        raise _undecodable(replicas, "ScaleSpec.spec.replicas", "int32")
    if replicas < 0:  # the cause's message is field.Error's body, which kubectl prints after the field
        cause = invalid("spec.replicas", replicas, "must be greater than or equal to 0")
        raise ApiError(422, "Invalid", f'Scale.autoscaling "{name}" is invalid: spec.replicas: {cause["message"]}',
                       {"name": name, "group": "autoscaling", "kind": "Scale", "causes": [cause]})
    rv = meta.get("resourceVersion") or ""
    try:
        expected = int(rv) if rv else 0
    except ValueError as e:
        raise ApiError.bad_request(f"invalid resourceVersion {rv!r}") from e
    return replicas, expected


_INT32 = 1 << 31


def _undecodable(value: Any, field: str, go_type: str) -> ApiError:
    """A value Go's decoder cannot put into the Scale's field: a 400, as upstream's."""
    if isinstance(value, bool):
        given = "bool"
    elif isinstance(value, int | float):
        given = f"number {value}"
    else:
        given = "string" if isinstance(value, str) else "array" if isinstance(value, list) else "object"
    return ApiError.bad_request(f'Scale in version "v1" cannot be handled as a Scale: json: cannot unmarshal '
                                f"{given} into Go struct field {field} of type {go_type}")
