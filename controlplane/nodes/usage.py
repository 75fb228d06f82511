"""What a simulated container uses: the numbers behind ``metrics.k8s.io``.

Simulated containers run nothing, so their usage is declared, as KWOK declares
it (``kwok.x-k8s.io/v1alpha1`` ResourceUsage and ClusterResourceUsage, and the
``usage-from-annotation`` rule KWOK ships): a pod's annotations
``kwok.x-k8s.io/usage-cpu`` and ``kwok.x-k8s.io/usage-memory`` give the usage
of each of its containers; without them a container uses 1m of CPU and 1Mi of
memory. Annotating a Deployment's pod template therefore drives a
HorizontalPodAutoscaler, and ``kubectl annotate pods`` changes the load at once.

A node uses what its running pods use (no system overhead is modelled).

Only running pods have metrics, as only running containers are measured by a
kubelet: a pod bound to a node, in phase Running and not being deleted.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from controlplane.quantity import QuantityError, binary_quantity, canonical_quantity, nanos

__all__ = ["DEFAULT_CPU_NANOS", "DEFAULT_MEMORY_BYTES", "NOTHING", "USAGE_CPU", "USAGE_MEMORY", "Usage",
           "container_usages", "measured", "pod_usage"]

USAGE_CPU = "kwok.x-k8s.io/usage-cpu"
USAGE_MEMORY = "kwok.x-k8s.io/usage-memory"
DEFAULT_CPU_NANOS = 1_000_000  # 1m
DEFAULT_MEMORY_BYTES = 1 << 20  # 1Mi


@dataclass(frozen=True, slots=True)
class Usage:
    cpu_nanos: int  # nanocores: metrics-server's unit
    memory_bytes: int

    def __add__(self, other: Usage) -> Usage:
        return Usage(self.cpu_nanos + other.cpu_nanos, self.memory_bytes + other.memory_bytes)

    def quantities(self) -> dict[str, str]:
        """As metrics-server writes them: CPU a DecimalSI quantity of nanocores, memory a BinarySI
        one of bytes, each canonical as ``resource.Quantity`` marshals it (``150m``, not
        ``150000000n``; ``48Mi``, not ``49152Ki``; a measured ``2308955n`` or ``14544Ki`` as is)."""
        return {"cpu": canonical_quantity(f"{self.cpu_nanos}n"), "memory": binary_quantity(self.memory_bytes)}


NOTHING = Usage(0, 0)


def measured(pod: Mapping[str, Any]) -> bool:
    """Whether a kubelet would report ``pod``'s containers: bound, Running, not being deleted."""
    meta = pod.get("metadata") or {}
    return bool((pod.get("spec") or {}).get("nodeName")) and (pod.get("status") or {}).get("phase") == "Running" \
        and not meta.get("deletionTimestamp")


def _annotated(annotations: Mapping[str, Any], key: str, default: int, memory: bool) -> int:
    text = annotations.get(key)
    if not isinstance(text, str):
        return default
    try:
        value = nanos(text.strip())
    except (QuantityError, ValueError, ZeroDivisionError):
        return default  # an unreadable annotation is ignored, as KWOK's expression falls back
    value = max(value, 0)
    return -(-value // 1_000_000_000) if memory else value  # bytes are whole; CPU stays in nanocores


def container_usages(pod: Mapping[str, Any]) -> list[tuple[str, Usage]]:
    """Each of ``pod``'s (regular) containers with what it uses now."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    each = Usage(_annotated(annotations, USAGE_CPU, DEFAULT_CPU_NANOS, memory=False),
                 _annotated(annotations, USAGE_MEMORY, DEFAULT_MEMORY_BYTES, memory=True))
    return [(str(c.get("name", "")), each) for c in (pod.get("spec") or {}).get("containers") or ()
            if isinstance(c, dict)]


def pod_usage(pod: Mapping[str, Any]) -> Usage:
    total = NOTHING
    for _, usage in container_usages(pod):
        total = total + usage
    return total
