"""A StatefulSet spec as upstream's ``ValidateStatefulSetSpec`` checks what is its own
(pkg/apis/apps/validation): ``podManagementPolicy`` (``OrderedReady`` or ``Parallel``), the
update strategy (``rollingupdate``), ``persistentVolumeClaimRetentionPolicy`` (each of
``whenDeleted`` and ``whenScaled`` ``Retain`` or ``Delete``), and ``replicas``,
``minReadySeconds``, ``revisionHistoryLimit`` and ``ordinals.start`` not negative, in
upstream's order. Its selector, template labels and restart policy are the other
workloads' rules (``immutable``, ``podvalidation``). Each answers the causes of a 422
Invalid, in upstream's words::

    stateful_set_spec_causes({"podManagementPolicy": "Serial", ...}, None)
    # one cause: spec.podManagementPolicy: Invalid value: "Serial": must be 'OrderedReady' or 'Parallel'

The spec is the defaulted one: an empty policy, strategy type or retention is defaulted,
so upstream's "Required value" for them is never said. A ``revisionHistoryLimit`` below
zero, accepted before 1.33, is refused unless the stored object already had it (an update
of an old object that keeps it goes through).
"""

from __future__ import annotations

from typing import Any

from .causes import Causes, invalid, not_supported
from .rollingupdate import stateful_set_strategy_causes

__all__ = ["stateful_set_spec_causes"]

Obj = dict[str, Any]

_POLICIES = ("OrderedReady", "Parallel")
_RETENTION = ("Retain", "Delete")  # in upstream's order, not sorted
_NONNEGATIVE = "must be greater than or equal to 0"


def _negative(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value < 0


def _retention_causes(policy: Any, path: str) -> Causes:
    """``ValidatePersistentVolumeClaimRetentionPolicy``: each rule Retain or Delete."""
    if not isinstance(policy, dict):
        return []
    return [not_supported(f"{path}.{rule}", policy.get(rule), _RETENTION)
            for rule in ("whenDeleted", "whenScaled") if policy.get(rule) not in _RETENTION]


def _counts(spec: Obj, old_spec: Obj | None) -> Causes:
    """``replicas``, ``minReadySeconds``, ``revisionHistoryLimit`` (one the stored object
    already had excepted) and ``ordinals.start`` not negative."""
    causes = [invalid(f"spec.{field}", spec[field], _NONNEGATIVE)
              for field in ("replicas", "minReadySeconds") if _negative(spec.get(field))]
    limit = spec.get("revisionHistoryLimit")
    if _negative(limit) and (old_spec is None or old_spec.get("revisionHistoryLimit") != limit):
        causes.append(invalid("spec.revisionHistoryLimit", limit, _NONNEGATIVE))
    ordinals = spec.get("ordinals")
    start = ordinals.get("start") if isinstance(ordinals, dict) else None
    if _negative(start):
        causes.append(invalid("spec.ordinals.start", start, _NONNEGATIVE))
    return causes


def stateful_set_spec_causes(spec: Obj, old_spec: Obj | None) -> Causes:
    """What a (defaulted) StatefulSet ``spec`` must say of its own, ``old_spec`` the stored
    one on an update."""
    causes: Causes = []
    policy = spec.get("podManagementPolicy")
    if policy not in _POLICIES:
        causes.append(invalid("spec.podManagementPolicy", policy, "must be 'OrderedReady' or 'Parallel'"))
    causes += stateful_set_strategy_causes(spec.get("updateStrategy"), "spec.updateStrategy")
    causes += _retention_causes(spec.get("persistentVolumeClaimRetentionPolicy"),
                                "spec.persistentVolumeClaimRetentionPolicy")
    return causes + _counts(spec, old_spec)
