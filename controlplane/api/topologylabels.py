"""The PodTopologyLabels admission of ``pods/binding`` (KEP-4742; PodTopologyLabelsAdmission,
beta and on by default since 1.35): a pod bound to a Node gets the node's
``topology.kubernetes.io/zone`` and ``topology.kubernetes.io/region`` labels, so that the
Downward API can show them to its containers; the Binding's own ``metadata.labels`` are
put on the pod too, as an external scheduler may set labels with its binding.

    >>> bound_labels({"metadata": {"labels": {"team": "a"}}}, {"topology.kubernetes.io/zone": "z1"})
    {'team': 'a', 'topology.kubernetes.io/zone': 'z1'}

A pod created with ``spec.nodeName`` set gets its node's topology labels over its own too
(``KubeApi._built_in_create_admission``). Upstream's plugin reads the Node from its
informer's cache and does nothing for a node it has not seen; here the watch cache's latest
version is read (``NodeTopology``), with no store read on a binding's or a create's path.
"""

from __future__ import annotations

from typing import Any

import orjson

__all__ = ["TOPOLOGY_LABELS", "NodeTopology", "bound_labels"]

TOPOLOGY_LABELS = ("topology.kubernetes.io/zone", "topology.kubernetes.io/region")
_MARK = b'"topology.kubernetes.io/'  # (a node's JSON without it has none: no need to parse it)


class NodeTopology:
    """Nodes' topology labels by the stored revision they were read at.

    Invariant: ``_seen[name]`` is ``(revision, labels)`` for the last version of the node
    read; a binding parses its node's JSON only when the node changed since (nodes are
    written far less often than pods are bound to them). Bounded: cleared whole when full.
    """

    def __init__(self, most: int = 1 << 14) -> None:
        self._seen: dict[str, tuple[int, dict[str, str]]] = {}
        self._most = most

    def labels(self, name: str, raw: bytes | None, revision: int) -> dict[str, str]:
        """The topology labels of node ``name`` whose stored JSON at ``revision`` is ``raw``
        (None: not known, no labels)."""
        if raw is None:
            return {}
        seen = self._seen.get(name)
        if seen is not None and seen[0] == revision:
            return seen[1]
        found: dict[str, str] = {}
        if _MARK in raw:
            meta = orjson.loads(raw).get("metadata")
            labels = meta.get("labels") if isinstance(meta, dict) else None
            if isinstance(labels, dict):
                found = {k: v for k in TOPOLOGY_LABELS if isinstance(v := labels.get(k), str)}
        if len(self._seen) >= self._most:
            self._seen.clear()
        self._seen[name] = (revision, found)
        return found


def bound_labels(binding: dict[str, Any], node_labels: dict[str, str]) -> dict[str, str]:
    """What a binding writes over its pod's labels: the Binding's own string labels, then
    its node's topology labels over them, as the plugin merges the node's into the Binding's."""
    meta = binding.get("metadata")
    given = meta.get("labels") if isinstance(meta, dict) else None
    if not given and not node_labels:
        return {}
    labels = {k: v for k, v in given.items() if isinstance(k, str) and isinstance(v, str)} \
        if isinstance(given, dict) else {}
    labels.update(node_labels)
    return labels
