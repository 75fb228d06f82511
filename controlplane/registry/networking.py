"""Ingresses, IngressClasses, NetworkPolicies and EndpointSlices: defaults and validation.

As upstream's strategies:

- an Ingress needs a ``defaultBackend`` or rules; each HTTP path needs a
  ``pathType`` (``Exact`` and ``Prefix`` paths start with ``/``) and a backend
  that is a service with a port name or number, or a resource, not both;
- an IngressClass needs its ``controller``, fixed once created;
- a NetworkPolicy's ports default to TCP, and its ``policyTypes`` to
  ``Ingress`` (plus ``Egress`` when it has egress rules);
- an EndpointSlice needs an ``addressType`` (IPv4, IPv6 or FQDN), fixed once
  created; its ports default to TCP and an empty name.
"""

from __future__ import annotations

from typing import Any

__all__ = ["prepare_endpoint_slice", "prepare_ingress", "prepare_ingress_class", "prepare_network_policy"]

Obj = dict[str, Any]
Causes = list[dict[str, str]]


def _spec(obj: Obj) -> Obj:
    spec = obj.get("spec")
    return spec if isinstance(spec, dict) else {}

PATH_TYPES = ("Exact", "ImplementationSpecific", "Prefix")
ADDRESS_TYPES = ("FQDN", "IPv4", "IPv6")


def _required(field: str, detail: str = "") -> dict[str, str]:
    return {"reason": "FieldValueRequired", "field": field, "message": "Required value" + detail}


def _invalid(field: str, value: object, message: str) -> dict[str, str]:
    return {"reason": "FieldValueInvalid", "field": field, "message": f'Invalid value: "{value}": {message}'}


def _unsupported(field: str, value: object, allowed: tuple[str, ...]) -> dict[str, str]:
    shown = ", ".join(f'"{a}"' for a in allowed)
    return {"reason": "FieldValueNotSupported", "field": field,
            "message": f'Unsupported value: "{value}": supported values: {shown}'}


def _backend(backend: Any, field: str) -> Causes:
    if not isinstance(backend, dict):
        return [_required(field)]
    service, resource = backend.get("service"), backend.get("resource")
    if service and resource:
        return [_invalid(field, "", "cannot set both resource and service backends")]
    if resource:
        return [] if resource.get("kind") and resource.get("name") else [_required(f"{field}.resource")]
    if not service:
        return [_required(field, ": one of service or resource must be specified")]
    causes = [] if service.get("name") else [_required(f"{field}.service.name")]
    port = service.get("port") or {}
    if bool(port.get("name")) == bool(port.get("number")):
        causes.append(_invalid(f"{field}.service.port", port, "port name or number is required"
                               if not port.get("name") else "cannot set both port name & port number"))
    return causes


def prepare_ingress(ing: Obj, old: Obj | None) -> Causes:
    spec = _spec(ing)
    causes: Causes = []
    rules = spec.get("rules") or []
    if not rules and not spec.get("defaultBackend"):
        causes.append(_invalid("spec", "", "either `defaultBackend` or `rules` must be specified"))
    if spec.get("defaultBackend"):
        causes += _backend(spec["defaultBackend"], "spec.defaultBackend")
    for i, rule in enumerate(rules):
        http = (rule or {}).get("http")
        if http is None:
            continue
        paths = http.get("paths") or []
        if not paths:
            causes.append(_required(f"spec.rules[{i}].http.paths"))
        for j, path in enumerate(paths):
            field = f"spec.rules[{i}].http.paths[{j}]"
            kind = path.get("pathType")
            if kind is None:
                causes.append(_required(f"{field}.pathType", ": pathType must be specified"))
            elif kind not in PATH_TYPES:
                causes.append(_unsupported(f"{field}.pathType", kind, PATH_TYPES))
            elif kind != "ImplementationSpecific" and not str(path.get("path", "")).startswith("/"):
                causes.append(_invalid(f"{field}.path", path.get("path", ""), "must be an absolute path"))
            causes += _backend(path.get("backend"), f"{field}.backend")
    return causes


def prepare_ingress_class(ic: Obj, old: Obj | None) -> Causes:
    spec = _spec(ic)
    causes: Causes = [] if spec.get("controller") else [_required("spec.controller")]
    if old is not None and spec.get("controller") != (old.get("spec") or {}).get("controller"):
        causes.append(_invalid("spec.controller", spec.get("controller", ""), "field is immutable"))
    return causes


def prepare_network_policy(np: Obj, old: Obj | None) -> Causes:
    spec = np.setdefault("spec", {})
    for direction in ("ingress", "egress"):
        for rule in spec.get(direction) or ():
            for port in (rule or {}).get("ports") or ():
                if isinstance(port, dict):
                    port.setdefault("protocol", "TCP")
    if not spec.get("policyTypes"):
        spec["policyTypes"] = ["Ingress"] + (["Egress"] if spec.get("egress") else [])
    return [_unsupported(f"spec.policyTypes[{i}]", t, ("Egress", "Ingress"))
            for i, t in enumerate(spec["policyTypes"]) if t not in ("Egress", "Ingress")]


def prepare_endpoint_slice(es: Obj, old: Obj | None) -> Causes:
    for port in es.get("ports") or ():
        if isinstance(port, dict):
            port.setdefault("protocol", "TCP")
            port.setdefault("name", "")
    kind = es.get("addressType")
    causes: Causes = []
    if not kind:
        causes.append(_required("addressType"))
    elif kind not in ADDRESS_TYPES:
        causes.append(_unsupported("addressType", kind, ADDRESS_TYPES))
    elif old is not None and kind != old.get("addressType"):
        causes.append(_invalid("addressType", kind, "field is immutable"))
    for i, endpoint in enumerate(es.get("endpoints") or ()):
        if not (endpoint or {}).get("addresses"):
            causes.append(_required(f"endpoints[{i}].addresses", ": must contain at least 1 address"))
    return causes
