"""Aggregated discovery (apidiscovery.k8s.io/v2, KEP-3352): every group, version and
resource in one response from ``/api`` (the core group) and ``/apis`` (the others).

A client asks for it in ``Accept``, e.g. kubectl's::

    application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,
    application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json

and otherwise gets the per-group documents (APIVersions, APIGroupList). The
response says which it is in its ``Content-Type``. The document is built from
the Registry on each request, so types added at run time show at once.

Groups and versions are listed as kube-apiserver's aggregator lists them, by the
priorities of their APIServices (``registry/apiservices.py``: upstream's table, custom
resources' 1000 and 100), which kubectl and the clients take the preferred version from:

- a group's versions: higher ``versionPriority`` first, then by Kubernetes' version order
  (GA before beta before alpha, newest first); the first is the preferred one;
- ``/apis`` (an APIGroupList: ``group_list_order``): ``apiregistration.k8s.io`` first,
  then each group where the first of its APIServices falls when they are sorted by
  ``groupPriorityMinimum``, higher first, ties by the APIService's name
  (``<version>.<group>``), as ``SortedByGroupAndVersion``;
- aggregated discovery (``aggregated_order``): a group's priority is the highest of its
  versions' (``apiregistration.k8s.io``'s 20001), higher first, ties by the group's name.

    >>> [g for g, _ in group_list_order({"apps": ["v1"], "zz.example.com": ["v1"], "batch": ["v1"],
    ...                                  "apiregistration.k8s.io": ["v1"]})]
    ['apiregistration.k8s.io', 'apps', 'batch', 'zz.example.com']
    >>> version_order("autoscaling", ["v1", "v2"])
    ['v2', 'v1']

The per-version documents (``/api/v1``, ``/apis/<group>/<version>``: APIResourceList) give
each stored resource the ``storageVersionHash`` of the group, version and kind its objects
are stored as (``storage_version_hash``), as upstream's installer and CRD handler do; a
client (kube-storage-version-migrator) sees it change when the storage version does. The
subresources, and the types answered without a storage (bindings, componentstatuses, the
reviews, the metrics), have none; nor has aggregated discovery, whose APIResourceDiscovery
has no such field.
"""

from __future__ import annotations

import base64
import hashlib
from functools import cache
from typing import Any

from ..registry import Registry, ResourceType
from ..registry.apiservices import APIREGISTRATION_GROUP, APIREGISTRATION_GROUP_PRIORITY, priority_of
from ..registry.conversion import conversion_for
from ..registry.versions import priority as kube_version_order

__all__ = ["SUBRESOURCE_KINDS", "aggregated", "aggregated_order", "aggregated_version_accepted", "group_list_order",
           "storage_version_hash", "subresource_kind", "version_order"]

Groups = dict[str, list[str]]  # group -> its versions (Registry.groups)

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


@cache
def _gvk_hash(group: str, version: str, kind: str) -> str:
    """Upstream's ``discovery.StorageVersionHash``: the first 8 bytes of the SHA-256 of
    ``group/version/kind``, in standard base64.

    >>> _gvk_hash("", "v1", "Pod")
    'xPOwRZ+Yhw8='
    """
    return base64.b64encode(hashlib.sha256(f"{group}/{version}/{kind}".encode()).digest()[:8]).decode()


def storage_version_hash(t: ResourceType) -> str:
    """The ``storageVersionHash`` of ``t`` in its APIResourceList: from the version its
    objects are stored as (a custom resource's storage version; events.k8s.io/v1 Events
    are stored as core v1 Events, autoscaling/v1 HorizontalPodAutoscalers as v2); "" for a
    type without a storage (one that cannot be watched: bindings, the reviews, ...)."""
    if "watch" not in t.verbs:
        return ""
    if t.custom is not None:
        return _gvk_hash(t.group, t.custom.storage_version or t.version, t.kind)
    conversion = conversion_for(t.group, t.version, t.kind)
    if conversion is not None:
        group, _, version = conversion.stored_api_version.rpartition("/")
        return _gvk_hash(group, version, t.kind)
    return _gvk_hash(t.group, t.version, t.kind)


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


def version_order(group: str, versions: list[str]) -> list[str]:
    """A group's versions, the preferred one first (the module's docstring)."""
    return sorted(versions, key=lambda v: (-priority_of(group, v)[1], kube_version_order(v)))


def group_list_order(groups: Groups) -> list[tuple[str, list[str]]]:
    """The named groups as ``/apis`` lists them, each with its versions in order."""
    ordered = [APIREGISTRATION_GROUP] if APIREGISTRATION_GROUP in groups else []
    apiservices = sorted(((group, v) for group, versions in groups.items() if group for v in versions),
                         key=lambda gv: (-priority_of(*gv)[0], f"{gv[1]}.{gv[0]}"))
    for group, _ in apiservices:
        if group not in ordered:
            ordered.append(group)
    return [(group, version_order(group, groups[group])) for group in ordered]


def _group_priority(group: str, versions: list[str]) -> int:
    if group == APIREGISTRATION_GROUP:
        return APIREGISTRATION_GROUP_PRIORITY
    return max((priority_of(group, v)[0] for v in versions), default=0)


def aggregated_order(groups: Groups) -> list[tuple[str, list[str]]]:
    """The groups as aggregated discovery lists them, each with its versions in order."""
    ordered = sorted(groups, key=lambda group: (-_group_priority(group, groups[group]), group))
    return [(group, version_order(group, groups[group])) for group in ordered]


def aggregated(registry: Registry, core: bool, version: str = "v2") -> dict[str, Any]:
    """The APIGroupDiscoveryList for ``/api`` (``core``) or ``/apis``."""
    items = []
    for group, versions in aggregated_order(registry.groups()):
        if (group == "") != core:
            continue
        vs = [{"version": v, "resources": [_resource(t) for t in registry.in_group_version(group, v)],
               "freshness": "Current"} for v in versions]
        items.append({"metadata": {"name": group} if group else {}, "versions": vs})
    return {"kind": "APIGroupDiscoveryList", "apiVersion": f"{_GROUP}/{version}", "metadata": {}, "items": items}
