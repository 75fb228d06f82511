"""core/v1 NodeSelector matching, as ResourceSlices and allocation results use it.

A NodeSelector is a list of terms, ORed; each term's ``matchExpressions`` (on
labels) and ``matchFields`` (only ``metadata.name``) are ANDed::

    {"nodeSelectorTerms": [{"matchExpressions": [{"key": "rack", "operator": "In", "values": ["r1"]}]}]}
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["node_name_selector", "node_selector_matches"]


def _requirement(req: Mapping[str, Any], value: str | None) -> bool:
    op = req.get("operator")
    values = req.get("values") or []
    if op == "In":
        return value is not None and value in values
    if op == "NotIn":
        return value is None or value not in values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if op in ("Gt", "Lt"):
        if value is None or len(values) != 1:
            return False
        try:
            have, want = int(value), int(values[0])
        except ValueError:
            return False
        return have > want if op == "Gt" else have < want
    return False


def node_selector_matches(selector: Mapping[str, Any] | None, node_name: str, labels: Mapping[str, str]) -> bool:
    """Whether the node with ``node_name`` and ``labels`` matches; no selector matches every node."""
    if not selector:
        return True
    for term in selector.get("nodeSelectorTerms") or []:
        exprs = term.get("matchExpressions") or []
        fields = term.get("matchFields") or []
        if not exprs and not fields:
            continue  # an empty term matches nothing
        if all(_requirement(r, labels.get(r.get("key", ""))) for r in exprs) and all(
            _requirement(r, node_name if r.get("key") == "metadata.name" else None) for r in fields
        ):
            return True
    return False


def node_name_selector(node_name: str) -> dict[str, Any]:
    """The selector an allocation of node-local devices carries (upstream's form)."""
    return {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node_name]}]}]}
