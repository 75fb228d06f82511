"""The autoscaler's Prometheus metrics, on the server's registry
(``controlplane.metrics.REGISTRY``; defined here so that they exist only where
the autoscaler runs). Durations in seconds.

- ``controlplane_autoscaler_provisioning_seconds``: from a batch of pending pods
  being simulated to the Node of each NodeClaim it created being registered.
- ``controlplane_autoscaler_scheduling_simulation_seconds``: one simulation.
- ``controlplane_autoscaler_nodeclaims_created_total{nodepool}``,
  ``controlplane_autoscaler_nodeclaims_disrupted_total{nodepool, reason}``.
- ``controlplane_autoscaler_nodes{state}``: NodeClaims by state (launching,
  registered, ready, deleting).
- ``controlplane_pod_startup_seconds{part}``: a pod's startup as the
  autoscaler observes it, by part: ``total`` (created → Running),
  ``scheduling`` (created → bound), ``provisioning`` (marked unschedulable →
  bound, for pods that waited for capacity), ``starting`` (bound → Running:
  image pull and container start, as the node simulator plays them; its own
  pull-time metric has the pull alone).
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

from ..metrics import REGISTRY

__all__ = ["NODECLAIMS_CREATED", "NODECLAIMS_DISRUPTED", "NODES", "POD_STARTUP", "PROVISIONING", "SIMULATION"]

_SECONDS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 3.0, 5.0, 7.5, 10.0, 15.0, 20.0, 30.0, 45.0, 60.0, 90.0,
            120.0, 180.0, 300.0)

PROVISIONING = Histogram(
    "controlplane_autoscaler_provisioning_seconds",
    "From the simulation that created a NodeClaim to its Node being registered.",
    buckets=_SECONDS, registry=REGISTRY,
)
SIMULATION = Histogram(
    "controlplane_autoscaler_scheduling_simulation_seconds",
    "Duration of one provisioning simulation (pending pods onto existing and new nodes).",
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0), registry=REGISTRY,
)
NODECLAIMS_CREATED = Counter(
    "controlplane_autoscaler_nodeclaims_created_total", "NodeClaims created, by NodePool.", ["nodepool"],
    registry=REGISTRY,
)
NODECLAIMS_DISRUPTED = Counter(
    "controlplane_autoscaler_nodeclaims_disrupted_total",
    "NodeClaims disrupted, by NodePool and reason (Drifted, Empty, Underutilized).", ["nodepool", "reason"],
    registry=REGISTRY,
)
NODES = Gauge(
    "controlplane_autoscaler_nodes", "NodeClaims by state (launching, registered, ready, deleting).", ["state"],
    registry=REGISTRY,
)
POD_STARTUP = Histogram(
    "controlplane_pod_startup_seconds",
    "Pod startup as the autoscaler observes it, by part (total, scheduling, provisioning, starting).", ["part"],
    buckets=_SECONDS, registry=REGISTRY,
)
