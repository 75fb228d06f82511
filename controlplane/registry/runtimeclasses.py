"""node.k8s.io/v1 RuntimeClasses, validated as upstream's ``ValidateRuntimeClass`` and
``ValidateRuntimeClassUpdate`` check them, in their words: the ``handler`` a DNS label that
never changes, ``overhead.podFixed`` checked as a container's limits are (a standard
resource name for containers or a domain-prefixed one, quantities not negative and an
extended resource's whole, hugepages
whole pages and only beside cpu or memory, reported under ``overhead.limits`` as upstream reuses the
container check with the path ``overhead``), and ``scheduling``'s node selector as labels
and its tolerations as a pod's. The classes' admission of pods is ``api/runtimeclass.py``.

    >>> prepare_runtime_class({"handler": "Not Valid!"}, None)[0]["field"]
    'handler'
"""

from __future__ import annotations

from typing import Any

from ..quantity import QuantityError, parse_quantity
from .causes import Causes, forbidden, invalid
from .podresources import hugepage_divisible
from .podvalidation import dns_label_problems, labels_causes, tolerations_causes
from .volumes import BadQuantity

__all__ = ["prepare_runtime_class"]

_CONTAINER_RESOURCES = ("cpu", "memory", "ephemeral-storage")  # and hugepages-<size>


def _extended(name: str) -> bool:
    """``IsExtendedResourceName``, near enough: a domain-prefixed name outside ``kubernetes.io``."""
    domain = name.partition("/")[0]
    return "/" in name and not (domain == "kubernetes.io" or domain.endswith(".kubernetes.io")) \
        and not name.startswith("requests.")


def _resource_causes(name: str, quantity: Any, at: str) -> Causes:
    """``validateContainerResourceName``, ``ValidateResourceQuantityValue`` and
    ``validateResourceQuantityHugePageValue`` of one limit: a standard name, a quantity not
    negative, whole for an extended resource, whole pages for a hugepage."""
    causes: Causes = []
    if "/" not in name and name not in _CONTAINER_RESOURCES and not name.startswith("hugepages-"):
        causes.append(invalid(at, name, "must be a standard resource for containers"))
    try:
        amount = parse_quantity(quantity)
    except QuantityError as e:
        raise BadQuantity(f"{at}: {e}") from e
    if amount < 0:
        causes.append(invalid(at, str(quantity), "must be greater than or equal to 0"))
    if _extended(name) and amount.denominator != 1:
        causes.append(invalid(at, str(quantity), "must be an integer"))
    if name.startswith("hugepages-") and not hugepage_divisible(name, quantity):
        causes.append(invalid(at, str(quantity), f"{quantity} is not positive integer multiple of {name}"))
    return causes


def _overhead_causes(overhead: Any) -> Causes:
    fixed = overhead.get("podFixed") if isinstance(overhead, dict) else None
    if not isinstance(fixed, dict):
        return []
    causes: Causes = []
    for name, quantity in fixed.items():
        causes += _resource_causes(str(name), quantity, f"overhead.limits[{name}]")
    if any(str(n).startswith("hugepages-") for n in fixed) and not ({"cpu", "memory"} & set(fixed)):
        causes.append(forbidden("overhead", "HugePages require cpu or memory"))
    return causes


def _scheduling_causes(scheduling: Any) -> Causes:
    if not isinstance(scheduling, dict):
        return []
    causes: Causes = []
    selector, tolerations = scheduling.get("nodeSelector"), scheduling.get("tolerations")
    if isinstance(selector, dict):
        causes += labels_causes(selector, "scheduling.nodeSelector")
    if isinstance(tolerations, list):
        causes += tolerations_causes(tolerations, "scheduling.tolerations")
    return causes


def prepare_runtime_class(rc: dict[str, Any], old: dict[str, Any] | None) -> Causes:
    """``ValidateRuntimeClass`` (a create and an update alike), and at an update the handler kept."""
    handler = rc.get("handler")
    text = handler if isinstance(handler, str) else ""
    causes = [invalid("handler", text, p) for p in dns_label_problems(text)]
    causes += _overhead_causes(rc.get("overhead")) + _scheduling_causes(rc.get("scheduling"))
    if old is not None and handler != old.get("handler"):
        causes.append(invalid("handler", text, "field is immutable"))
    return causes
