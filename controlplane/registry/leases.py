"""coordination.k8s.io/v1 Leases, validated as upstream's ``ValidateLeaseSpec`` checks them, in
its words: a duration above 0, transitions not negative, a ``strategy`` of upstream's
(``OldestEmulationVersion``) or a qualified name with a prefix, and a ``preferredHolder``
only beside a strategy (coordinated leader election's fields, stored in v1 whatever the
feature gate: upstream's strategy drops neither).

A Lease PUT or patch comes here (``strategies.prepare``); the bulk renewals of simulated
nodes (``api/leaserenewals.py``) splice a renew time into stored bytes and do not, so
nothing here is on their path. An object without the coordinated fields costs a few
lookups::

    >>> prepare_lease({"spec": {"leaseDurationSeconds": -3}}, None)[0]["message"]
    'Invalid value: -3: must be greater than 0'
"""

from __future__ import annotations

from typing import Any

from .causes import Causes, forbidden, invalid, not_supported
from .podvalidation import label_key_problems

__all__ = ["STRATEGIES", "prepare_lease"]

STRATEGIES = ("OldestEmulationVersion",)  # upstream's validLeaseStrategies


def _strategy_causes(strategy: Any) -> Causes:
    """``ValidateCoordinatedLeaseStrategy``, called with ``spec.strategy`` as its path, which
    names the field once more itself: upstream reports ``spec.strategy.strategy``."""
    text = str(strategy)
    at = "spec.strategy.strategy"
    if "/" not in text:
        return [] if text in STRATEGIES else [not_supported(at, text, STRATEGIES)]
    return [invalid(at, text, p) for p in label_key_problems(text)]


def prepare_lease(lease: dict[str, Any], old: dict[str, Any] | None) -> Causes:
    """``ValidateLeaseSpec`` (an update's is checked as a create's)."""
    spec = lease.get("spec")
    if not isinstance(spec, dict):
        return []
    causes: Causes = []
    duration, transitions = spec.get("leaseDurationSeconds"), spec.get("leaseTransitions")
    if isinstance(duration, int) and duration <= 0:
        causes.append(invalid("spec.leaseDurationSeconds", duration, "must be greater than 0"))
    if isinstance(transitions, int) and transitions < 0:
        causes.append(invalid("spec.leaseTransitions", transitions, "must be greater than or equal to 0"))
    strategy = spec.get("strategy")
    if strategy is not None:
        causes += _strategy_causes(strategy)
    if spec.get("preferredHolder") and not strategy:
        causes.append(forbidden("spec.preferredHolder", "may only be specified if `strategy` is defined"))
    return causes
