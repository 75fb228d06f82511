"""What the load's clients read of a pod in a watch event, without parsing the event.

A ReplicaSet-like controller needs of each event only its pod's name, whether it is bound
and its phase; a kubelet needs the whole pod only to start it or to finish its deletion,
and otherwise its name. Parsing each 5 KB line for that cost a Locust worker about a
seventh of its CPU in the ``million`` scenario (every pod's five events parsed by its
controller and four by its kubelet), where on a small machine that CPU is the server's.

:func:`pod_facts` reads them from the line's bytes, relying on the order in which both
this server and kube-apiserver write a pod: ``metadata`` before ``spec`` and ``status``,
and in it ``name`` and ``namespace`` before any other field of those names (owner
references, labels and annotations come after them); ``spec.nodeName`` and
``status.phase`` are the last fields of their names (a label or an annotation named so is
in the metadata, before them). A value with an escape in it, or a line not laid out so,
gives ``None``: the caller parses the event then.

No Locust import here, so tests can use it without gevent's patching.
"""

from __future__ import annotations

from typing import Any, NamedTuple

__all__ = ["PodFacts", "facts_of", "pod_facts"]

_METADATA = b'"metadata":{'
_NAME = b'"name":"'
_NAMESPACE = b'"namespace":"'
_NODE_NAME = b'"nodeName":"'
_PHASE = b'"phase":"'
_DELETION = b'"deletionTimestamp":"'


class PodFacts(NamedTuple):
    key: str          # namespace/name
    node_name: str    # "" while unbound
    phase: str        # "" if the pod has none
    deleting: bool    # metadata.deletionTimestamp is set


def pod_facts(line: bytes) -> PodFacts | None:
    """The facts of the pod in a watch event's ``line``, or ``None`` if they cannot be read
    from its bytes alone (see the module's docstring)."""
    meta = line.find(_METADATA)
    if meta < 0:
        return None
    name = _string(line, line.find(_NAME, meta), len(_NAME))
    namespace = _string(line, line.find(_NAMESPACE, meta), len(_NAMESPACE))
    node_name = _string(line, line.rfind(_NODE_NAME, meta), len(_NODE_NAME), "")
    phase = _string(line, line.rfind(_PHASE, meta), len(_PHASE), "")
    if name is None or namespace is None or node_name is None or phase is None:
        return None
    # "deletionTimestamp":null is not a deletion; a label or annotation so named would be read as
    # one, so the caller confirms it on the parsed pod (a pod is deleted once: it is rare)
    deleting = line.find(_DELETION, meta) >= 0
    return PodFacts(f"{namespace}/{name}", node_name, phase, deleting)


def facts_of(pod: dict[str, Any]) -> PodFacts:
    """The same facts of a parsed pod."""
    meta = pod.get("metadata") or {}
    return PodFacts(f"{meta.get('namespace')}/{meta.get('name')}", str((pod.get("spec") or {}).get("nodeName") or ""),
                    str((pod.get("status") or {}).get("phase") or ""), bool(meta.get("deletionTimestamp")))


def _string(line: bytes, at: int, marker: int, missing: str | None = None) -> str | None:
    """The JSON string whose key's marker (``"key":"``, ``marker`` bytes long) starts at ``at``;
    ``missing`` if there is no such key, ``None`` if the string holds an escape (then only a
    parse reads it right)."""
    if at < 0:
        return missing
    start = at + marker
    end = line.find(b'"', start)
    value = line[start:end]
    if end < 0 or b"\\" in value:
        return None
    return value.decode()
