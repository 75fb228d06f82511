"""Matching of the selectors objects carry: metav1.LabelSelector, NodeSelectorTerms, tolerations.

Shared by the scheduler's plugins, the controllers and admission (policies, webhooks, RBAC
aggregation), as upstream's component-helpers are; a module of its own so that what imports it
does not import the scheduler (and numpy with it)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["match_label_selector", "match_node_selector_terms", "node_matches_pod_selectors", "tolerates",
           "untolerated_taint"]


def _match_expression(labels: Mapping[str, str], expr: Mapping[str, Any]) -> bool:
    key = expr.get("key", "")
    op = expr.get("operator", "")
    values: list[str] = expr.get("values") or []
    if op == "In":
        return key in labels and labels[key] in values
    if op == "NotIn":
        return key not in labels or labels[key] not in values
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    if op in ("Gt", "Lt"):  # node selector requirements only
        try:
            have, want = int(labels[key]), int(values[0])
        except (KeyError, ValueError, IndexError):
            return False
        return have > want if op == "Gt" else have < want
    return False


def match_label_selector(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """metav1.LabelSelector semantics: None matches nothing, ``{}`` matches everything."""
    if selector is None:
        return False
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    return all(_match_expression(labels, e) for e in selector.get("matchExpressions") or ())


def match_node_selector_terms(terms: list[dict[str, Any]], labels: Mapping[str, str], name: str) -> bool:
    """NodeSelectorTerms are ORed; within a term, matchExpressions and matchFields are ANDed.
    An empty term matches no node (as upstream)."""
    for term in terms:
        exprs = term.get("matchExpressions") or ()
        fields = term.get("matchFields") or ()
        if not exprs and not fields:
            continue
        if not all(_match_expression(labels, e) for e in exprs):
            continue
        if not all(_match_expression({"metadata.name": name}, f) for f in fields):
            continue
        return True
    return False


def node_matches_pod_selectors(pod_selector: Mapping[str, str], affinity: Mapping[str, Any],
                               labels: Mapping[str, str], name: str) -> bool:
    """``spec.nodeSelector`` and required node affinity, as NodeAffinity's Filter."""
    for k, v in pod_selector.items():
        if labels.get(k) != v:
            return False
    na = affinity.get("nodeAffinity") if affinity else None
    if na:
        req = na.get("requiredDuringSchedulingIgnoredDuringExecution")
        if req is not None:
            return match_node_selector_terms(req.get("nodeSelectorTerms") or [], labels, name)
    return True


def tolerates(tolerations: Sequence[dict[str, Any]], taint: Mapping[str, Any]) -> bool:
    """Does one of ``tolerations`` tolerate ``taint``? (upstream ``ToleratesTaint``)."""
    key = taint.get("key", "")
    effect = taint.get("effect", "")
    for t in tolerations:
        te = t.get("effect") or ""
        if te and te != effect:
            continue
        tk = t.get("key") or ""
        op = t.get("operator") or "Equal"
        if op == "Exists":
            if not tk or tk == key:
                return True
            continue
        if tk == key and (t.get("value") or "") == (taint.get("value") or ""):
            return True
    return False


def untolerated_taint(taints: Sequence[Mapping[str, Any]],
                      tolerations: Sequence[dict[str, Any]]) -> Mapping[str, Any] | None:
    """The first ``NoSchedule`` or ``NoExecute`` taint of ``taints`` no toleration tolerates
    (upstream's ``FindMatchingUntoleratedTaint`` with ``DoNotScheduleTaintsFilterFunc``), or None."""
    for t in taints:
        if t.get("effect") in ("NoSchedule", "NoExecute") and not tolerates(tolerations, t):
            return t
    return None
