"""A NodePool (karpenter.sh/v1) read once into what the autoscaler uses: its
requirements with Karpenter's defaults, taints, limits, weight, disruption
settings, and its template hash (drift).

The hash covers ``spec.template`` except its requirements (as Karpenter's
``hash:"ignore"``: requirements drift is checked on the labels instead); it is
written to the NodePool and to each NodeClaim launched from it as
``karpenter.sh/nodepool-hash``, with ``karpenter.sh/nodepool-hash-version``.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any

import orjson

from .labels import CAPACITY_TYPE, NODEPOOL
from .requirements import Requirement, Requirements
from .resources import Resources, parse_resources
from .validation import runtime_errors

__all__ = ["HASH_ANNOTATION", "HASH_VERSION", "HASH_VERSION_ANNOTATION", "NodePoolView", "parse_duration",
           "template_hash"]

HASH_ANNOTATION = "karpenter.sh/nodepool-hash"
HASH_VERSION_ANNOTATION = "karpenter.sh/nodepool-hash-version"
HASH_VERSION = "v3"

Obj = dict[str, Any]

_DURATION = re.compile(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?\Z")


def parse_duration(value: Any) -> float | None:
    """Seconds of a Karpenter duration (``"30s"``, ``"1h30m"``); None for ``"Never"``."""
    if value is None or value == "Never":
        return None
    if isinstance(value, int | float):
        return float(value)
    text = str(value).strip()
    m = _DURATION.match(text)
    if not text or m is None:
        raise ValueError(f"not a duration: {value!r}")
    h, mi, s = (int(g) if g else 0 for g in m.groups())
    return float(h * 3600 + mi * 60 + s)


def template_hash(nodepool: Obj) -> str:
    template = dict(((nodepool.get("spec") or {}).get("template")) or {})
    spec = dict(template.get("spec") or {})
    spec.pop("requirements", None)
    template["spec"] = spec
    canonical = orjson.dumps(template, option=orjson.OPT_SORT_KEYS)
    return str(int.from_bytes(hashlib.sha256(canonical).digest()[:8], "big"))


@dataclass(frozen=True, slots=True)
class NodePoolView:
    obj: Obj
    name: str
    weight: int
    requirements: Requirements   # template requirements, template labels, Karpenter's defaults, the nodepool label
    labels: dict[str, str]
    taints: tuple[Obj, ...]
    startup_taints: tuple[Obj, ...]
    limits: Resources | None
    consolidation_policy: str
    consolidate_after: float | None   # None: Never
    budgets: tuple[Obj, ...]
    hash: str
    node_class_ref: Obj
    # Karpenter's static capacity (``spec.replicas``): the nodes it keeps whatever the pods; None: dynamic
    replicas: int | None = None
    # why Karpenter's runtime validation refuses it (ValidationSucceeded=False: it provisions
    # nothing), its errors joined as Go's multierr; empty when valid
    invalid: str = ""

    @classmethod
    def parse(cls, obj: Obj) -> NodePoolView:
        meta = obj.get("metadata") or {}
        spec = obj.get("spec") or {}
        template = spec.get("template") or {}
        tspec = template.get("spec") or {}
        labels = dict((template.get("metadata") or {}).get("labels") or {})
        reqs = Requirements.parse(tspec.get("requirements"))
        if CAPACITY_TYPE not in reqs:  # Karpenter launches on-demand unless a NodePool allows otherwise
            reqs = reqs.intersect(Requirements([Requirement(CAPACITY_TYPE, False, frozenset(("on-demand",)))]))
        reqs = reqs.intersect(Requirements.from_labels({**labels, NODEPOOL: meta.get("name", "")}))
        disruption = spec.get("disruption") or {}
        limits = spec.get("limits")
        return cls(
            obj=obj, name=meta.get("name", ""), weight=int(spec.get("weight") or 0), requirements=reqs,
            labels=labels, taints=tuple(tspec.get("taints") or ()),
            startup_taints=tuple(tspec.get("startupTaints") or ()),
            limits=parse_resources(limits) if limits else None,
            consolidation_policy=disruption.get("consolidationPolicy", "WhenEmptyOrUnderutilized"),
            consolidate_after=parse_duration(disruption.get("consolidateAfter", "0s")),
            budgets=tuple(disruption.get("budgets") or ({"nodes": "10%"},)),
            hash=template_hash(obj),
            node_class_ref=dict(tspec.get("nodeClassRef") or {}),
            replicas=int(spec["replicas"]) if spec.get("replicas") is not None else None,
            invalid="; ".join(runtime_errors(obj)),
        )
