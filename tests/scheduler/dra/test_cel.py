"""CEL selectors of DeviceClasses and requests: upstream's `device` variable, compiled once."""

from __future__ import annotations

import pytest

from controlplane.scheduler.dra.cel import CelError, DeviceEnv, Selectors, compile_selector

from .helpers import DRIVER, allocate, claim, device, device_class, manager_with, pod, request, slice_

GPU = {"name": "gpu-0", "attributes": {"model": {"string": "H100"}, "index": {"int": 3}, "nvlink": {"bool": True},
                                       "driverVersion": {"version": "550.54.15"},
                                       "numa.example.com/node": {"int": 1}},
       "capacity": {"memory": {"value": "80Gi"}}}


@pytest.mark.parametrize(("expr", "want"), [
    (f'device.driver == "{DRIVER}"', True),
    (f'device.attributes["{DRIVER}"].model == "H100"', True),
    (f'device.attributes["{DRIVER}"].index >= 2 && device.attributes["{DRIVER}"].nvlink', True),
    ('device.attributes["numa.example.com"].node == 1', True),
    (f'device.capacity["{DRIVER}"].memory.compareTo(quantity("40Gi")) >= 0', True),
    (f'device.capacity["{DRIVER}"].memory.isGreaterThan(quantity("80Gi"))', False),
    (f'device.capacity["{DRIVER}"].memory == quantity("80Gi")', True),
    (f'device.attributes["{DRIVER}"].driverVersion.isGreaterThan(semver("550.9.0"))', True),
    (f'device.attributes["{DRIVER}"].driverVersion.isLessThan(semver("550.54.15-rc1"))', False),
    ('"model" in device.attributes["other.example.com"]', False),  # a missing domain is an empty map
    (f'device.attributes["{DRIVER}"].model.startsWith("H1")', True),
    ("device.allowMultipleAllocations", False),
])
def test_device_environment(expr: str, want: bool) -> None:
    assert compile_selector(expr).matches(DeviceEnv(DRIVER, GPU)) is want


def test_errors() -> None:
    with pytest.raises(CelError, match="compilation failed"):
        compile_selector("device.driver ==")
    env = DeviceEnv(DRIVER, GPU)
    with pytest.raises(CelError, match="no such key"):
        compile_selector('device.attributes["other.example.com"].model == "x"').matches(env)
    with pytest.raises(CelError, match="could not be converted to bool"):
        compile_selector("device.driver").matches(env)


def test_each_expression_is_compiled_once() -> None:
    sel = Selectors()
    for _ in range(3):
        sel.get("device.driver == 'a'")
    for _ in range(2):
        with pytest.raises(CelError):
            sel.get("device.driver ==")
    assert sel.compilations == 2


def test_class_and_request_selectors_pick_devices() -> None:
    s = slice_("s1", "n1", [
        device("a100", attributes={"model": {"string": "A100"}}, capacity={"memory": {"value": "40Gi"}}),
        device("h100", attributes={"model": {"string": "H100"}}, capacity={"memory": {"value": "80Gi"}})])
    big = device_class("big", f'device.capacity["{DRIVER}"].memory.compareTo(quantity("64Gi")) >= 0')
    anygpu = device_class("any", f'device.driver == "{DRIVER}"')
    m = manager_with(s, big, anygpu)
    m.on_claim(claim("c1", request("gpu", "big")))
    assert allocate(m, pod("p1", "c1"), "n1") is None
    assert m.claims["default/c1"]["status"]["allocation"]["devices"]["results"][0]["device"] == "h100"
    sel = [{"cel": {"expression": f'device.attributes["{DRIVER}"].model == "A100"'}}]
    m.on_claim(claim("c2", request("gpu", "any", selectors=sel)))
    assert allocate(m, pod("p2", "c2"), "n1") is None
    assert m.claims["default/c2"]["status"]["allocation"]["devices"]["results"][0]["device"] == "a100"
    m.on_claim(claim("c3", request("gpu", "big")))
    assert allocate(m, pod("p3", "c3"), "n1") is not None
    # Evaluated per distinct device and expression, not per pod or node.
    assert m.selectors.compilations == 3


def test_a_bad_selector_or_missing_class_makes_the_pod_unschedulable_with_the_reason() -> None:
    from controlplane.scheduler.dra.manager import Unschedulable

    s = slice_("s1", "n1", [device("d0")])
    m = manager_with(s, device_class("bad", "device.driver =="))
    m.on_claim(claim("c1", request("gpu", "bad")))
    with pytest.raises(Unschedulable, match="class bad: selector #0: compilation failed"):
        m.pre_filter(pod("p1", "c1"))
    m.on_claim(claim("c2", request("gpu", "nope")))
    with pytest.raises(Unschedulable, match="device class nope does not exist"):
        m.pre_filter(pod("p2", "c2"))
