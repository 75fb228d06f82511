"""Aggregated discovery (apidiscovery.k8s.io/v2, KEP-3352): every group, version and
resource in one response from ``/api`` (the core group) and ``/apis`` (the others).

A client asks for it in ``Accept``, e.g. kubectl's::

    application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,
    application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json

and otherwise gets the per-group documents (APIVersions, APIGroupList). The
response says which it is in its ``Content-Type``. The document is built from
the Registry on each request, so types added at run time show at once.
"""

from __future__ import annotations

from typing import Any

from ..registry import Registry, ResourceType

__all__ = ["SUBRESOURCE_KINDS", "aggregated", "aggregated_version_accepted", "subresource_kind"]

_GROUP = "apidiscovery.k8s.io"

# What discovery says of a subresource whose kind is not its parent's.
SUBRESOURCE_KINDS: dict[str, dict[str, Any]] = {
    "scale": {"group": "autoscaling", "version": "v1", "kind": "Scale", "verbs": ["get", "patch", "update"]},
    "eviction": {"group": "policy", "version": "v1", "kind": "Eviction", "verbs": ["create"]},
    "binding": {"kind": "Binding", "verbs": ["create"]},
    "finalize": {"verbs": ["update"]},
    "log": {"kind": "Pod", "verbs": ["get"]},
    "exec": {"kind": "PodExecOptions", "verbs": ["create", "get"]},
    "attach": {"kind": "PodAttachOptions", "verbs": ["create", "get"]},
    "portforward": {"kind": "PodPortForwardOptions", "verbs": ["create", "get"]},
    "proxy": {"verbs": ["create", "delete", "get", "patch", "update"]},  # kind: <parent's>ProxyOptions
    "token": {"group": "authentication.k8s.io", "version": "v1", "kind": "TokenRequest", "verbs": ["create"]},
}


def subresource_kind(t: ResourceType, sub: str) -> dict[str, Any]:
    """What discovery says of ``t``'s subresource ``sub`` where it differs from ``t``'s kind
    and the verbs get, patch and update."""
    known = SUBRESOURCE_KINDS.get(sub, {})
    return {**known, "kind": f"{t.kind}ProxyOptions"} if sub == "proxy" else known


def aggregated_version_accepted(accept: str) -> str | None:
    """The apidiscovery version (``v2`` or ``v2beta1``) the Accept header asks for first, if any."""
    for clause in accept.split(","):
        params = dict(p.strip().partition("=")[::2] for p in clause.split(";")[1:])
        if params.get("g") == _GROUP and params.get("as") == "APIGroupDiscoveryList" and \
                params.get("v") in ("v2", "v2beta1"):
            return params["v"]
    return None


def content_type(version: str) -> bytes:
    return f"application/json;g={_GROUP};v={version};as=APIGroupDiscoveryList".encode()


def _resource(t: ResourceType) -> dict[str, Any]:
    r: dict[str, Any] = {
        "resource": t.plural,
        "responseKind": {"group": t.group, "version": t.version, "kind": t.kind},
        "scope": "Namespaced" if t.namespaced else "Cluster",
        "singularResource": t.singular_name,
        "verbs": list(t.verbs),
    }
    if t.short_names:
        r["shortNames"] = list(t.short_names)
    if t.categories:
        r["categories"] = list(t.categories)
    subs = []
    for sub in t.subresources:
        known = subresource_kind(t, sub)
        subs.append({
            "subresource": sub,
            "responseKind": {"group": known.get("group", t.group), "version": known.get("version", t.version),
                             "kind": known.get("kind", t.kind)},
            "verbs": known.get("verbs", ["get", "patch", "update"]),
        })
    if subs:
        r["subresources"] = subs
    return r


def aggregated(registry: Registry, core: bool, version: str = "v2") -> dict[str, Any]:
    """The APIGroupDiscoveryList for ``/api`` (``core``) or ``/apis``."""
    items = []
    for group, versions in registry.groups().items():
        if (group == "") != core:
            continue
        vs = [{"version": v, "resources": [_resource(t) for t in registry.in_group_version(group, v)],
               "freshness": "Current"} for v in versions]
        items.append({"metadata": {"name": group} if group else {}, "versions": vs})
    return {"kind": "APIGroupDiscoveryList", "apiVersion": f"{_GROUP}/{version}", "metadata": {}, "items": items}
