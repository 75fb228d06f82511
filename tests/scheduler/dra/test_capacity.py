"""Consumable capacity (KEP-5075): shared devices, requestPolicy rounding, consumedCapacity in the result."""

from __future__ import annotations

from fractions import Fraction

import pytest

from controlplane.quantity import format_quantity, parse_quantity
from controlplane.scheduler.dra.capacity import round_request
from controlplane.scheduler.dra.invariants import check_invariants
from controlplane.scheduler.dra.inventory import Capacity

from .helpers import DRIVER, allocate, claim, device, device_class, manager_with, pod, request, slice_

GI = 2**30
CLASS = device_class("nic", f'device.driver == "{DRIVER}"')


def q(s: str) -> Fraction:
    return parse_quantity(s)


def test_quantities() -> None:
    assert q("1Gi") == GI and q("100m") == Fraction(1, 10) and q("1.5G") == 1_500_000_000 and q("2e3") == 2000
    assert format_quantity(q("1.5Gi")) == "1536Mi" and format_quantity(Fraction(1, 2)) == "500m"
    assert format_quantity(3 * GI) == "3Gi" and format_quantity(7) == "7"
    with pytest.raises(ValueError, match="quantities must match"):
        parse_quantity("12 apples")


@pytest.mark.parametrize(("requested", "consumed"), [
    ("500Mi", "1Gi"),     # below min: min
    ("1Gi", "1Gi"),
    ("1.5Gi", "2Gi"),     # up to min + n*step
    ("2049Mi", "3Gi"),
    ("40Gi", "40Gi"),
    ("41Gi", None),       # beyond max: the device cannot be allocated
    (None, "4Gi"),        # no request: the default
])
def test_valid_range_rounding(requested: str | None, consumed: str | None) -> None:
    cap = Capacity.parse({"value": "80Gi", "requestPolicy": {
        "default": "4Gi", "validRange": {"min": "1Gi", "max": "40Gi", "step": "1Gi"}}})
    got = round_request(None if requested is None else q(requested), cap)
    assert got == (None if consumed is None else q(consumed))


def test_valid_values_rounding_and_no_policy() -> None:
    cap = Capacity.parse({"value": "100", "requestPolicy": {"default": "10", "validValues": ["10", "25", "50"]}})
    assert round_request(q("11"), cap) == 25 and round_request(q("50"), cap) == 50
    assert round_request(q("51"), cap) is None
    free = Capacity.parse({"value": "100"})
    assert round_request(q("7"), free) == 7 and round_request(None, free) == 100


def shared_nic_slice() -> dict:
    return slice_("s1", "n1", [device("nic-0", allowMultipleAllocations=True, capacity={
        "bandwidth": {"value": "10G", "requestPolicy": {"default": "1G",
                                                         "validRange": {"min": "1G", "step": "500M"}}},
        "queues": {"value": "8"}})])


def cap_request(name: str, **amounts: str) -> dict:
    return request(name, "nic", capacity={"requests": amounts})


def test_shared_device_is_allocated_until_its_capacity_runs_out() -> None:
    s = shared_nic_slice()
    m = manager_with(s, CLASS)
    # 1.2G rounds up to 1.5G; queues not requested: the whole 8 (no policy, no default).
    m.on_claim(claim("a", cap_request("nic", bandwidth="1.2G", queues="2")))
    assert allocate(m, pod("pa", "a"), "n1") is None
    result = m.claims["default/a"]["status"]["allocation"]["devices"]["results"][0]
    assert result["consumedCapacity"] == {"bandwidth": "1500M", "queues": "2"}
    assert result["shareID"] and result["device"] == "nic-0"
    # A second share on the same device, with its own shareID.
    m.on_claim(claim("b", cap_request("nic", bandwidth="4G", queues="4")))
    assert allocate(m, pod("pb", "b"), "n1") is None
    second = m.claims["default/b"]["status"]["allocation"]["devices"]["results"][0]
    assert second["device"] == "nic-0" and second["shareID"] != result["shareID"]
    # 5.5G of 10G used, 6 of 8 queues: 3 queues do not fit, 2 do.
    m.on_claim(claim("c", cap_request("nic", bandwidth="1G", queues="3")))
    assert allocate(m, pod("pc", "c"), "n1") is not None
    m.on_claim(claim("c", cap_request("nic", bandwidth="4.5G", queues="2")))
    assert allocate(m, pod("pc", "c"), "n1") is None
    assert check_invariants([s], m.claims.values()) == []
    m.on_claim(claim("d", cap_request("nic", bandwidth="1G", queues="0")))
    assert allocate(m, pod("pd", "d"), "n1") is not None  # bandwidth is exhausted


def test_request_for_a_capacity_the_device_lacks_does_not_fit() -> None:
    m = manager_with(shared_nic_slice(), CLASS)
    m.on_claim(claim("a", cap_request("nic", memory="1Gi")))
    assert allocate(m, pod("pa", "a"), "n1") is not None
    # The driver's domain may be spelled out.
    m.on_claim(claim("b", cap_request("nic", **{f"{DRIVER}/bandwidth": "1G", "queues": "1"})))
    assert allocate(m, pod("pb", "b"), "n1") is None


def test_exclusive_device_with_capacity_must_have_enough() -> None:
    s = slice_("s1", "n1", [device("gpu-small", capacity={"memory": {"value": "16Gi"}}),
                            device("gpu-big", capacity={"memory": {"value": "80Gi"}})])
    m = manager_with(s, CLASS)
    m.on_claim(claim("a", cap_request("nic", memory="40Gi")))
    assert allocate(m, pod("pa", "a"), "n1") is None
    result = m.claims["default/a"]["status"]["allocation"]["devices"]["results"][0]
    assert result["device"] == "gpu-big" and "consumedCapacity" not in result and "shareID" not in result


def test_invariant_checker_reports_capacity_overflow() -> None:
    s = shared_nic_slice()
    pool = "n1"

    def share(name: str, bw: str) -> dict:
        r = {"request": "nic", "driver": DRIVER, "pool": pool, "device": "nic-0", "shareID": f"sid-{name}",
             "consumedCapacity": {"bandwidth": bw, "queues": "1"}}
        return claim(name, cap_request("nic"), allocation={"devices": {"results": [r]}})

    assert check_invariants([s], [share("a", "6G"), share("b", "4G")]) == []
    problems = check_invariants([s], [share("a", "6G"), share("b", "5G")])
    assert problems == ["device gpu.example.com/n1/nic-0: capacity bandwidth consumed 11G > 10G"]
