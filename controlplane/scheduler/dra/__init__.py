"""Dynamic Resource Allocation (resource.k8s.io/v1) for the scheduler: the domain logic.

The scheduler plugin (``controlplane.scheduler.plugins.dynamic_resources``) is a
thin adapter over these modules, each a concept:

- ``quantity``: Kubernetes quantities as exact fractions;
- ``cel``: device selectors, compiled once per expression, evaluated per device;
- ``inventory``: pools and devices from ResourceSlices (counters, capacity);
- ``state``: devices in use, by allocated and by assumed claims;
- ``capacity``: consumable capacity and its ``requestPolicy`` rounding;
- ``allocator``: the search for devices, on one node, for a pod's claims;
- ``manager``: the plugin's state (informer handlers, per-node caches, binding conditions);
- ``claims``: the ResourceClaim controller (claims from templates, release when pods end);
- ``invariants``: no device beyond its counters or capacity, none allocated twice;
- ``benchdata``/``bench``: the 1,000-node partitionable-GPU inputs and ``controlplane bench dra``.
"""

from .allocator import AllocationError, Allocator, Plan, Unsatisfiable
from .cel import CelError, Selectors
from .invariants import check_invariants
from .inventory import Device, DeviceID, Inventory, Pool, PoolID
from .state import AllocatedState, Entry

__all__ = [
    "AllocatedState",
    "AllocationError",
    "Allocator",
    "CelError",
    "Device",
    "DeviceID",
    "Entry",
    "Inventory",
    "Plan",
    "Pool",
    "PoolID",
    "Selectors",
    "Unsatisfiable",
    "check_invariants",
]
