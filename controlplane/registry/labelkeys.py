"""``matchLabelKeys`` and ``mismatchLabelKeys`` merged into a new pod's label selectors.

kube-apiserver's pod strategy (``PrepareForCreate``, with the gates
MatchLabelKeysInPodAffinity and MatchLabelKeysInPodTopologySpreadSelectorMerge, both on
by default since 1.34) turns each key of a term's ``matchLabelKeys`` that the pod's
labels hold into a requirement ``key In (value)`` appended to the term's
``labelSelector.matchExpressions``; ``mismatchLabelKeys`` (pod (anti-)affinity only)
into ``key NotIn (value)``. A key the pod's labels lack adds nothing; a term without a
``labelSelector`` (which matches no pod) is left alone; the key lists stay as they are.
Only a create does this: an update, or a template, keeps its selectors::

    >>> pod = {"metadata": {"labels": {"app": "web", "pod-template-hash": "5d4f"}},
    ...        "spec": {"topologySpreadConstraints": [{"labelSelector": {"matchLabels": {"app": "web"}},
    ...                                                 "matchLabelKeys": ["pod-template-hash", "absent"]}]}}
    >>> merge_label_keys(pod)
    >>> pod["spec"]["topologySpreadConstraints"][0]["labelSelector"]["matchExpressions"]
    [{'key': 'pod-template-hash', 'operator': 'In', 'values': ['5d4f']}]

The scheduler then counts with the merged selector as with any other; its
PodTopologySpread still applies ``matchLabelKeys`` itself too (pods stored before the
merge), which adds nothing to a selector that already holds the requirement.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["merge_label_keys"]

_AFFINITY_KINDS = ("podAffinity", "podAntiAffinity")


def merge_label_keys(pod: dict[str, Any]) -> None:
    """``pod`` (being created) with its terms' label keys merged into their selectors, in place."""
    spec = pod.get("spec")
    if not isinstance(spec, dict):
        return
    meta = pod.get("metadata")
    labels = meta.get("labels") if isinstance(meta, dict) else None
    if not labels or not isinstance(labels, dict):
        return  # no label to take a value from: nothing to merge
    spread = spec.get("topologySpreadConstraints")
    if spread and isinstance(spread, list):
        for c in spread:
            if isinstance(c, dict):
                _merge(c, labels, c.get("matchLabelKeys"), None)
    affinity = spec.get("affinity")
    if not affinity or not isinstance(affinity, dict):
        return
    for kind in _AFFINITY_KINDS:
        terms = affinity.get(kind)
        if not terms or not isinstance(terms, dict):
            continue
        for term in terms.get("requiredDuringSchedulingIgnoredDuringExecution") or ():
            if isinstance(term, dict):
                _merge(term, labels, term.get("matchLabelKeys"), term.get("mismatchLabelKeys"))
        for weighted in terms.get("preferredDuringSchedulingIgnoredDuringExecution") or ():
            term = weighted.get("podAffinityTerm") if isinstance(weighted, dict) else None
            if isinstance(term, dict):
                _merge(term, labels, term.get("matchLabelKeys"), term.get("mismatchLabelKeys"))


def _merge(term: dict[str, Any], labels: Mapping[str, Any], match: Any, mismatch: Any) -> None:
    if not match and not mismatch:
        return
    selector = term.get("labelSelector")
    if not isinstance(selector, dict):
        return  # a nil selector matches no pod: nothing to narrow (upstream's reasoning)
    added = [{"key": k, "operator": op, "values": [labels[k]]}
             for keys, op in ((match, "In"), (mismatch, "NotIn")) if isinstance(keys, list)
             for k in keys if isinstance(k, str) and isinstance(labels.get(k), str)]
    if not added:
        return
    expressions = selector.get("matchExpressions")
    if isinstance(expressions, list):
        expressions.extend(added)
    elif expressions is None:
        selector["matchExpressions"] = added
