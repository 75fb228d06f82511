"""DeviceTaintRules in the scheduler (scheduler/dra/inventory.py): a rule's taint is on every
device its selector picks, as if its slice listed it, so the allocator refuses such devices to
claims that do not tolerate it; the rule changed or gone, the devices are free again."""

from __future__ import annotations

from typing import Any

from controlplane.scheduler.dra.inventory import DeviceID, Inventory

from .helpers import (
    DRIVER,
    allocate,
    allocated_devices,
    claim,
    device,
    device_class,
    manager_with,
    pod,
    request,
    slice_,
)

CLASS = device_class("gpu", f'device.driver == "{DRIVER}"')
UNHEALTHY = {"key": "example.com/unhealthy", "value": "true", "effect": "NoSchedule"}


def rule(name: str, taint: dict[str, Any] = UNHEALTHY, **selector: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"deviceSelector": selector, "taint": taint}}


def test_a_rule_taints_the_devices_its_selector_picks_and_no_others() -> None:
    inv = Inventory()
    inv.upsert(slice_("n1", "n1", [device("gpu-0", taints=[{"key": "own", "effect": "NoExecute"}]),
                                   device("gpu-1")]))
    inv.upsert(slice_("n2", "n2", [device("gpu-0")]))
    inv.upsert(slice_("nic", "n1", [device("gpu-0")], driver="nic.example.com", pool="nic-n1"))
    before = inv.version
    inv.rule_set(rule("one", driver=DRIVER, pool="n1", device="gpu-0"))
    assert inv.version > before  # what was computed from the old taints is stale

    def taints(driver: str, pool: str, name: str) -> list[str]:
        found = inv.device(DeviceID(driver, pool, name))
        assert found is not None
        return [t["key"] for t in found.taints]

    assert taints(DRIVER, "n1", "gpu-0") == ["own", "example.com/unhealthy"]  # the slice's first
    assert taints(DRIVER, "n1", "gpu-1") == []
    assert taints(DRIVER, "n2", "gpu-0") == []
    inv.rule_set(rule("every-gpu-0", device="gpu-0"))  # no driver, no pool: all of them
    assert taints("nic.example.com", "nic-n1", "gpu-0") == ["example.com/unhealthy"]
    assert taints(DRIVER, "n2", "gpu-0") == ["example.com/unhealthy"]
    inv.rule_set({"metadata": {"name": "every-gpu-0"}, "spec": {"taint": UNHEALTHY}})  # no selector: no device
    assert taints(DRIVER, "n2", "gpu-0") == []
    inv.rule_remove(rule("one"))
    assert taints(DRIVER, "n1", "gpu-0") == ["own"]


def test_the_allocator_refuses_a_tainted_device_and_gives_it_to_a_claim_that_tolerates_it() -> None:
    m = manager_with(slice_("n1", "n1", [device("gpu-0")]), CLASS)
    m.on_rule(rule("broken", driver=DRIVER, device="gpu-0"))
    m.on_claim(claim("plain", request("gpu", "gpu")))
    assert allocate(m, pod("p1", "plain"), "n1") is not None  # its only device is tainted
    tolerant = request("gpu", "gpu", tolerations=[{"key": "example.com/unhealthy", "operator": "Exists",
                                                   "effect": "NoSchedule"}])
    m.on_claim(claim("tolerant", tolerant))
    assert allocate(m, pod("p2", "tolerant"), "n1") is None
    assert allocated_devices(m, "tolerant") == ["gpu-0"]


def test_a_rule_changed_to_an_effect_that_does_not_block_or_deleted_frees_the_device() -> None:
    m = manager_with(slice_("n1", "n1", [device("gpu-0")]), CLASS)
    m.on_rule(rule("maint", pool="n1"))
    m.on_claim(claim("c", request("gpu", "gpu")))
    assert allocate(m, pod("p1", "c"), "n1") is not None
    m.on_rule(rule("maint", {**UNHEALTHY, "effect": "None"}, pool="n1"))  # informs, blocks nothing
    assert allocate(m, pod("p1", "c"), "n1") is None
    m2 = manager_with(slice_("n1", "n1", [device("gpu-0")]), CLASS)
    m2.on_rule(rule("maint", pool="n1"))
    m2.on_claim(claim("d", request("gpu", "gpu")))
    assert allocate(m2, pod("p2", "d"), "n1") is not None
    m2.on_rule_delete(rule("maint"))
    assert allocate(m2, pod("p2", "d"), "n1") is None
