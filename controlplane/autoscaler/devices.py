"""DRA devices in the simulation, judged by the scheduler's own allocator
(``controlplane.scheduler.dra``), so that a node is launched only for claims the
scheduler will then allocate on it.

Two questions, two answers:

- can a pod's claims be allocated anywhere at all? ``DeviceClasses.check``
  runs the allocator's validation, as the scheduler's PreFilter does: a
  request naming a DeviceClass that does not exist, or a selector that does
  not compile, fails on every node (``request gpu: device class
  gpu.nvidia.com does not exist``), and nothing is launched for the pod until
  that changes;
- can they be allocated on this node? ``NodeDevices.fits(pods)`` allocates
  all the claims of the pods placed on the node at once, with the classes' and
  the requests' CEL selectors, counts, ``allocationMode``, ``firstAvailable``,
  capacity and constraints, as the scheduler will. A node of an instance type
  not launched yet (``TypeDevices.of(option)``) has the ResourceSlices its type
  publishes once launched (``catalog.resource_slices``), nothing in use; a real
  node (``real_node``) the ResourceSlices it publishes, less the devices the
  claims allocated there hold (``held_by_pool``).

Both kinds of node carry the DeviceTaintRules' taints (``DeviceTaintRules``), put
on the devices each rule selects by the scheduler's own inventory
(``Inventory.rule_set``): a rule tainting a real node's device NoSchedule keeps
claims that do not tolerate it off that device, and a rule selecting a driver
(and a device name) taints the devices of nodes not launched yet as well, so
that nothing is launched whose devices the scheduler would then refuse.

Per-driver counts (``devices/<driver>``, the ``DeviceClasses.driver`` of a
request's class) stay the simulation's quick test: ``resource_fit`` asks
``NodeDevices`` only once the counts fit. A class whose selectors name no
driver (``device.attributes["gpu.nvidia.com"].productName == "..."`` alone, or
no selector at all) has none: its requests are not counted, the allocator alone
judges them, and a node with no devices to allocate on holds none of them.

Answers are cached per node by the pods' claim shapes (the sorted
``PodDemand.claims_key``s: pods from one template share one) and dropped when a
DeviceClass changes (``DeviceClasses.version``) or a rule's spec does
(``DeviceTaintRules.version``, which also has the node's inventory built again): a batch of a thousand pods
from one template costs an allocation per type and per number of such pods on
a node, not one per pod. A real node's ``NodeDevices`` is made again for every
simulation (its devices in use change), and builds its inventory only when a
pod with claims is first tried there.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..scheduler.dra import AllocatedState, AllocationError, Allocator, Inventory, Selectors, Unsatisfiable
from ..scheduler.dra.extended import ExtendedNames
from ..scheduler.dra.state import entries_of
from .catalog import Option, resource_slices

if TYPE_CHECKING:
    from .simulation import PodDemand

__all__ = ["DeviceClasses", "DeviceTaintRules", "NodeDevices", "TypeDevices", "held_by_pool", "real_node"]

Obj = dict[str, Any]

MAX_ANSWERS = 4096  # claim-shape sets whose answer a node of a type keeps


class DeviceClasses:
    """The DeviceClasses, as an informer shows them (``add``, ``remove``): the objects, for
    the allocator; which driver each selects, read from its CEL selectors in the usual form
    ``device.driver == "gpu.nvidia.com"`` (the simulation's device counts; a class whose
    selectors name none has no entry); which class backs an extended resource (KEP-5004, the
    scheduler's ``ExtendedNames``). ``version`` grows with every change."""

    _DRIVER = re.compile(r"""device\.driver\s*==\s*["']([^"']+)["']""")

    def __init__(self, classes: Mapping[str, Obj] | None = None) -> None:
        self.objects: dict[str, Obj] = {}
        self.drivers: dict[str, str] = {}  # class -> the driver its selectors require, where they name one
        self.extended = ExtendedNames()  # extended resource -> the class backing it (KEP-5004)
        self.version = 0
        self.selectors = Selectors()  # compiled once for the validation and every type's allocator
        empty = Inventory()
        self._validator = Allocator(empty, AllocatedState(empty), self.objects.get, self.selectors)
        for obj in (classes or {}).values():
            self.add(obj)

    def add(self, obj: Obj) -> None:
        name = (obj.get("metadata") or {}).get("name", "")
        self._forget(name)
        self.objects[name] = obj
        self.extended.update(self.objects.values())
        for sel in (obj.get("spec") or {}).get("selectors") or ():
            m = self._DRIVER.search(((sel.get("cel") or {}).get("expression")) or "")
            if m:
                self.drivers[name] = m.group(1)
                break

    def remove(self, obj: Obj) -> None:
        self._forget((obj.get("metadata") or {}).get("name", ""))

    def _forget(self, name: str) -> None:
        self.version += 1
        self.objects.pop(name, None)
        self.drivers.pop(name, None)
        self.extended.update(self.objects.values())

    def driver(self, class_name: str) -> str | None:
        """The driver the class's devices are of, if its selectors say (else only the allocator knows)."""
        return self.drivers.get(class_name)

    def backing(self, resource: str) -> str | None:
        """The class backing an extended resource, by its ``extendedResourceName`` or the
        implicit ``deviceclass.resource.kubernetes.io/<class>`` (KEP-5004), if any."""
        return self.extended.class_for(resource)

    def check(self, claims: Sequence[Obj]) -> str | None:
        """Why ``claims`` cannot be allocated on any node (the scheduler's words), or None."""
        try:
            self._validator.validate(claims)
        except AllocationError as e:
            return str(e)
        return None


class DeviceTaintRules:
    """The DeviceTaintRules, as an informer shows them (``set``, ``remove``), for the
    inventories of the simulated nodes (``apply``). ``version`` grows when a rule's spec
    changes, not its status (the eviction controller rewrites that every few seconds)."""

    def __init__(self, rules: Iterable[Obj] = ()) -> None:
        self.objects: dict[str, Obj] = {}
        self.version = 0
        for rule in rules:
            self.set(rule)

    def set(self, rule: Obj) -> bool:
        """Keeps ``rule``; whether what it taints may have changed (a new rule, or a new spec)."""
        name = (rule.get("metadata") or {}).get("name", "")
        old = self.objects.get(name)
        self.objects[name] = rule
        if old is not None and old.get("spec") == rule.get("spec"):
            return False
        self.version += 1
        return True

    def remove(self, rule: Obj) -> None:
        if self.objects.pop((rule.get("metadata") or {}).get("name", ""), None) is not None:
            self.version += 1

    def apply(self, inventory: Inventory) -> None:
        """Puts the rules' taints on the inventory's devices, as the scheduler's does."""
        for rule in self.objects.values():
            inventory.rule_set(rule)


class NodeDevices:
    """The devices of one node: the ResourceSlices it publishes (``slices``) with the taints
    ``rules`` put on them, less what the claims allocated there hold (``allocated``). The
    inventory is built when first asked."""

    def __init__(self, node: str, slices: Sequence[Obj], classes: DeviceClasses,
                 allocated: Sequence[Obj] = (), rules: DeviceTaintRules | None = None) -> None:
        self.node = node
        self._slices = slices
        self._held = allocated
        self._classes = classes
        self._rules = rules if rules is not None else DeviceTaintRules()
        self._version = (classes.version, self._rules.version)
        self._allocator: Allocator | None = None
        self._answers: dict[tuple[str, ...], bool] = {}

    def _build(self) -> Allocator:
        inventory = Inventory()
        for body in self._slices:
            inventory.upsert(body)
        self._rules.apply(inventory)
        in_use = AllocatedState(inventory)
        for claim in self._held:
            meta = claim.get("metadata") or {}
            in_use.set_claim(f"{meta.get('namespace', '')}/{meta.get('name', '')}", entries_of(claim))
        return Allocator(inventory, in_use, self._classes.objects.get, self._classes.selectors)

    def fits(self, pods: Sequence[PodDemand]) -> bool:
        """Whether the claims of ``pods`` can all be allocated on the node at once."""
        shapes = tuple(sorted(p.claims_key for p in pods if p.claims))
        if not shapes:
            return True
        version = (self._classes.version, self._rules.version)
        if self._version != version or len(self._answers) >= MAX_ANSWERS:
            if self._version[1] != version[1]:
                self._allocator = None  # the devices' taints changed: the inventory is built again
            self._answers.clear()
            self._version = version
        ok = self._answers.get(shapes)
        if ok is None:
            if self._allocator is None:
                self._allocator = self._build()
            try:
                self._allocator.allocate(self.node, {}, [c for p in pods for c in p.claims])
                ok = True
            except (Unsatisfiable, AllocationError):
                ok = False
            self._answers[shapes] = ok
        return ok


def held_by_pool(claims: Iterable[Obj]) -> dict[tuple[str, str], list[Obj]]:
    """The allocated claims by the (driver, pool) of each device they hold."""
    out: dict[tuple[str, str], list[Obj]] = {}
    for claim in claims:
        allocation = (claim.get("status") or {}).get("allocation") or {}
        for r in (allocation.get("devices") or {}).get("results") or ():
            held = out.setdefault((r.get("driver", ""), r.get("pool", "")), [])
            if not held or held[-1] is not claim:
                held.append(claim)
    return out


def real_node(node: str, slices: Sequence[Obj], held: Mapping[tuple[str, str], list[Obj]],
              classes: DeviceClasses, rules: DeviceTaintRules | None = None) -> NodeDevices:
    """A real node's devices: its ResourceSlices, tainted by ``rules``, less what the claims
    ``held`` in their pools hold."""
    allocated: dict[int, Obj] = {}
    for s in slices:
        spec = s.get("spec") or {}
        for claim in held.get((spec.get("driver", ""), (spec.get("pool") or {}).get("name", "")), ()):
            allocated[id(claim)] = claim
    return NodeDevices(node, slices, classes, list(allocated.values()), rules)


class TypeDevices:
    """A ``NodeDevices`` per instance type, made when first asked for, its devices tainted by ``rules``."""

    def __init__(self, classes: DeviceClasses, rules: DeviceTaintRules | None = None) -> None:
        self.classes = classes
        self.rules = rules if rules is not None else DeviceTaintRules()
        self._nodes: dict[str, NodeDevices] = {}

    def of(self, option: Option) -> NodeDevices:
        got = self._nodes.get(option.name)
        if got is None:
            node = f"<{option.name}>"
            got = self._nodes[option.name] = NodeDevices(node, resource_slices(node, option.type), self.classes,
                                                       rules=self.rules)
        return got
