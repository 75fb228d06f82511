"""kube-apiserver's TaintNodesByCondition admission (``plugin/pkg/admission/nodetaint``): a Node is created
with the taint ``node.kubernetes.io/not-ready:NoSchedule``, so that no pod is scheduled to it
before its kubelet says it is Ready. The node lifecycle controller (``controllers/nodelifecycle.py``)
takes the taint off once the node's conditions no longer ask for it, as upstream's
``doNoScheduleTaintingPass``: at once for a node Ready or without conditions, which then waits
``--node-startup-grace-period`` for its kubelet and is found Unknown (``unreachable``) if none
reports.

    >>> node = {"metadata": {"name": "n"}}
    >>> admit_node(node)
    >>> node["spec"]
    {'taints': [{'key': 'node.kubernetes.io/not-ready', 'effect': 'NoSchedule'}]}

Only on create, only the object itself (not ``status``), as upstream's plugin. A taint of
that key and effect already there, whatever its value, is kept and no other added (upstream's
``MatchTaint``). On by default, as upstream's; ``serve --disable-admission-plugins
TaintNodesByCondition`` turns it off (``KubeApi.taint_nodes_at_creation``), as upstream's
integration tests and scheduler_perf do where no node lifecycle controller runs. The plugin's
configuration of further taints (an AdmissionConfiguration entry, in the newest sources, where
it is named TaintNodesAtCreation) is not read.
"""

from __future__ import annotations

from typing import Any

__all__ = ["NOT_READY_TAINT", "admit_node"]

NOT_READY_TAINT = ("node.kubernetes.io/not-ready", "NoSchedule")


def admit_node(obj: dict[str, Any]) -> None:
    """Add the not-ready ``NoSchedule`` taint to a Node being created, unless it has one.
    A ``spec`` or ``taints`` of the wrong type is left for the decoder's checks to refuse."""
    spec = obj.get("spec")
    if spec is None:
        spec = obj["spec"] = {}
    elif not isinstance(spec, dict):
        return
    taints = spec.get("taints")
    if taints is None:
        taints = []
    elif not isinstance(taints, list):
        return
    key, effect = NOT_READY_TAINT
    if any(isinstance(t, dict) and t.get("key") == key and t.get("effect") == effect for t in taints):
        return
    spec["taints"] = [*taints, {"key": key, "effect": effect}]
