"""Pods and Nodes held by an informer, with what they have in common held once.

A process that follows every pod (the scheduler, the controllers, the node
simulator: ``serve --components-process``) holds one parsed copy of each, and
most of a pod is its template's: the containers' resources, env, ports, probes
and mounts, the volumes' sources, the tolerations, affinity and labels are the
same for every pod of a ReplicaSet; condition types and statuses, images and
phases are the same few strings everywhere, and the pods that started in the same
second have the same conditions. ``PodSharer`` replaces each such
part of a new pod by the equal part already held, if there is one (hash-consing),
so a million pods of a thousand templates carry a thousand copies of those parts,
not a million. The parts that differ (names, uids, IPs, timestamps) stay the
pod's own. A pod parsed from JSON costs about half as much held this way
(docs/benchmarks.md).

Nodes are the same story at 100,000 of them: a simulated Node parses to about
29 KB of objects, most of it the same for every node of its instance type
(capacity, allocatable, images, the conditions' words, the node info's versions).
``NodeSharer`` shares those parts; names, uids, addresses, CIDRs, machine ids and
heartbeat times stay the node's own.

The rule that makes sharing safe is the one informers already have: handlers must
not change the objects they are given. A part held by many pods changed in place
would change all of them.

The table of held parts is keyed by a hash of their JSON; equal hashes are
compared before a part is shared. Parts no pod holds any more are swept out when
the table has doubled since the last sweep.

What either transform returns is out of the cyclic collector's sight
(``gcsettings.untrack_json``): held for minutes or hours, a hundred thousand
Nodes' or a million Pods' dicts and lists would otherwise be walked again by
every full collection, a pause of seconds.
"""

from __future__ import annotations

import sys
from typing import Any

import orjson

from ..gcsettings import untrack_json

__all__ = ["NodeSharer", "PodSharer", "Sharer"]

_dumps = orjson.dumps
_intern = sys.intern

# fields of a pod's spec held whole when equal (each is the template's, or the admission's defaults)
_SPEC_PARTS = ("tolerations", "affinity", "nodeSelector", "securityContext", "topologySpreadConstraints",
               "dnsConfig", "overhead", "readinessGates", "imagePullSecrets", "hostAliases", "resourceClaims",
               "schedulingGates", "os", "resources")
_META_PARTS = ("labels", "annotations", "ownerReferences", "finalizers")
# short, repeated strings of conditions and container statuses
_STATUS_STRINGS = ("type", "status", "reason", "lastTransitionTime", "name", "image", "imageID")
MIN_SWEEP = 4096


class Sharer:
    """The table of held parts (hash-consing): ``_same`` answers the held part equal to
    the one given. Subclasses are the transforms, one per kind."""

    def __init__(self) -> None:
        self._held: dict[int, Any] = {}
        self._sweep_at = MIN_SWEEP
        self.shared = 0  # parts replaced by an equal held one (for tests and benchmarks)

    def __len__(self) -> int:
        return len(self._held)

    def _same(self, part: Any) -> Any:
        """The held part equal to ``part`` (``part`` itself, now held, if none is)."""
        if not part:
            return part
        try:
            key = hash(_dumps(part))
        except TypeError:  # not JSON (a transform before this one made it so): left alone
            return part
        held = self._held.get(key)
        if held is None:
            self._held[key] = part
            if len(self._held) >= self._sweep_at:
                self._sweep()
            return part
        if held is part:
            return part
        if held == part:
            self.shared += 1
            return held
        return part  # a hash collision: kept as it is

    def _sweep(self) -> None:
        """Forget the parts only this table holds (no pod refers to them any more)."""
        held = self._held
        getrefcount = sys.getrefcount
        for key in list(held):
            if getrefcount(held[key]) <= 2:  # the table's reference and getrefcount's argument
                del held[key]
        self._sweep_at = max(MIN_SWEEP, 2 * len(held))

    @staticmethod
    def _strings(entry: dict[str, Any], fields: tuple[str, ...] = _STATUS_STRINGS) -> None:
        for f in fields:
            v = entry.get(f)
            if isinstance(v, str):
                entry[f] = _intern(v)


class PodSharer(Sharer):
    """A transform for pod informers (``Informer(transform=...)``): equal parts of the pods it
    sees become one object. Takes ownership of the pod it is given."""

    def __call__(self, pod: dict[str, Any]) -> dict[str, Any]:
        same = self._same
        meta = pod.get("metadata")
        if isinstance(meta, dict):
            meta.pop("managedFields", None)  # as strip_managed_fields
            for f in _META_PARTS:
                if f in meta:
                    meta[f] = same(meta[f])
        spec = pod.get("spec")
        if isinstance(spec, dict):
            for f in _SPEC_PARTS:
                if f in spec:
                    spec[f] = same(spec[f])
            for f, v in spec.items():
                if isinstance(v, str):
                    spec[f] = _intern(v)
            volumes = spec.get("volumes")
            if isinstance(volumes, list):
                spec["volumes"] = [self._volume(v) for v in volumes]
            for field in ("containers", "initContainers", "ephemeralContainers"):
                for c in spec.get(field) or ():
                    if isinstance(c, dict):
                        for f, v in c.items():
                            c[f] = _intern(v) if isinstance(v, str) else same(v)
        status = pod.get("status")
        if isinstance(status, dict):
            for f, v in status.items():
                if isinstance(v, str) and f != "podIP":
                    status[f] = _intern(v)
            if "hostIPs" in status:
                status["hostIPs"] = same(status["hostIPs"])
            for field in ("conditions", "containerStatuses", "initContainerStatuses"):
                entries = status.get(field)
                if isinstance(entries, list):
                    for entry in entries:
                        if isinstance(entry, dict):
                            self._strings(entry)
                            if "resources" in entry:
                                entry["resources"] = same(entry["resources"])
                            if "volumeMounts" in entry:
                                entry["volumeMounts"] = same(entry["volumeMounts"])
            if "conditions" in status:  # the same for the pods that changed state in the same second
                status["conditions"] = same(status["conditions"])
        untrack_json(pod)  # last: inserting a dict into a dict tracks it again
        return pod

    def _volume(self, volume: Any) -> Any:
        """A volume: its source is the template's (or the service account admission's), its name
        often the pod's own (``kube-api-access-<random>``)."""
        if isinstance(volume, dict):
            same = self._same
            for f, v in volume.items():
                if f != "name":
                    volume[f] = same(v)
        return volume


# fields of a node held whole when equal: its instance type's, its runtime's, its cluster's
_NODE_SPEC_PARTS = ("taints", "configSource")
_NODE_STATUS_PARTS = ("capacity", "allocatable", "images", "daemonEndpoints", "volumesInUse", "volumesAttached",
                      "config", "features", "runtimeHandlers")
_CONDITION_STRINGS = ("type", "status", "reason", "message", "lastHeartbeatTime", "lastTransitionTime")


class NodeSharer(Sharer):
    """A transform for node informers: equal parts of the nodes it sees become one object,
    and their repeated strings one string. Takes ownership of the node it is given."""

    def __call__(self, node: dict[str, Any]) -> dict[str, Any]:
        same = self._same
        meta = node.get("metadata")
        if isinstance(meta, dict):
            meta.pop("managedFields", None)  # as strip_managed_fields
            for f in ("annotations", "ownerReferences", "finalizers"):
                if f in meta:
                    meta[f] = same(meta[f])
            labels = meta.get("labels")
            if isinstance(labels, dict):  # (the hostname label makes each node's set its own)
                for k, v in labels.items():
                    if isinstance(v, str):
                        labels[k] = _intern(v)
        spec = node.get("spec")
        if isinstance(spec, dict):
            for f in _NODE_SPEC_PARTS:
                if f in spec:
                    spec[f] = same(spec[f])
        status = node.get("status")
        if isinstance(status, dict):
            for f in _NODE_STATUS_PARTS:
                if f in status:
                    status[f] = same(status[f])
            info = status.get("nodeInfo")
            if isinstance(info, dict):  # versions and platform shared; machine, system and boot ids not
                for f, v in info.items():
                    if isinstance(v, str) and not f.endswith("ID"):
                        info[f] = _intern(v)
            conditions = status.get("conditions")
            if isinstance(conditions, list):  # whole when equal: the nodes that posted in the same second
                for i, entry in enumerate(conditions):
                    if isinstance(entry, dict):
                        self._strings(entry, _CONDITION_STRINGS)
                        conditions[i] = same(entry)
            for entry in status.get("addresses") or ():
                if isinstance(entry, dict) and isinstance(entry.get("type"), str):
                    entry["type"] = _intern(entry["type"])
        untrack_json(node)  # last: inserting a dict into a dict tracks it again
        return node

