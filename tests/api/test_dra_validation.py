"""resource.k8s.io/v1's DeviceClasses, ResourceClaims (and their status), ResourceClaimTemplates
and ResourceSlices: defaulted and validated as upstream's (registry/dra.py, registry/resourceslices.py);
upstream's documentation examples stored as they are."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from controlplane.client import ApiError, Client, resource_path
from controlplane.registry.strategies import prepare

CLASSES = resource_path("resource.k8s.io", "v1", "deviceclasses", None)
CLAIMS = resource_path("resource.k8s.io", "v1", "resourceclaims", "default")
TEMPLATES = resource_path("resource.k8s.io", "v1", "resourceclaimtemplates", "default")
SLICES = resource_path("resource.k8s.io", "v1", "resourceslices", None)
LABEL_HINT = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start "
              "and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
              "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')")
SUBDOMAIN_HINT = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and "
                  "must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation "
                  r"is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
REQUEST_REF = "must be the name of a request in the claim or the name of a request and a subrequest separated by '/'"

# upstream's documentation examples (concepts/scheduling-eviction/dynamic-resource-allocation)
DOCS_CLASS = {"metadata": {"name": "example-device-class"},
              "spec": {"selectors": [{"cel": {"expression": 'device.driver == "driver.example.com"'}}]}}
DOCS_TEMPLATE = {"metadata": {"name": "example-resource-claim-template"}, "spec": {"spec": {"devices": {"requests": [
    {"name": "gpu-claim", "exactly": {"deviceClassName": "example-device-class", "selectors": [{"cel": {
        "expression": 'device.attributes["driver.example.com"].type == "gpu" &&\n'
                      'device.capacity["driver.example.com"].memory == quantity("64Gi")'}}]}}]}}}}
DOCS_PRIORITIZED_CLAIM = {"metadata": {"name": "prioritized"}, "spec": {"devices": {"requests": [
    {"name": "req-0", "firstAvailable": [
        {"name": "large-black", "deviceClassName": "resource.example.com", "selectors": [{"cel": {
            "expression": 'device.attributes["resource-driver.example.com"].color == "black" &&\n'
                          'device.attributes["resource-driver.example.com"].size == "large"'}}]},
        {"name": "small-white", "deviceClassName": "resource.example.com", "count": 2, "selectors": [{"cel": {
            "expression": 'device.attributes["resource-driver.example.com"].color == "white" &&\n'
                          'device.attributes["resource-driver.example.com"].size == "small"'}}]}]}]}}}
DOCS_SLICE = {"metadata": {"name": "cat-slice"}, "spec": {
    "driver": "resource-driver.example.com", "pool": {"generation": 1, "name": "black-cat-pool",
                                                      "resourceSliceCount": 1},
    "allNodes": True, "devices": [{"name": "large-black-cat", "attributes": {
        "color": {"string": "black"}, "size": {"string": "large"}, "cat": {"bool": True}}}]}}


def causes(e: pytest.ExceptionInfo[ApiError]) -> list[tuple[str, str, str]]:
    assert e.value.code == 422, e.value.status
    return [(c["reason"], c["field"], c["message"]) for c in e.value.status["details"]["causes"]]


def claim(name: str, *requests: dict[str, Any], **devices: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"devices": {"requests": list(requests), **devices}}}


def gpu(name: str = "gpu", **exactly: Any) -> dict[str, Any]:
    return {"name": name, "exactly": {"deviceClassName": "gpu.example.com", **exactly}}


def device_slice(name: str, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {
        "driver": "gpu.example.com", "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
        "nodeName": "n1", "devices": [{"name": "gpu-0"}], **spec}}


async def test_upstreams_documentation_examples_are_stored_defaulted(client: Client) -> None:
    assert (await client.create(CLASSES, copy.deepcopy(DOCS_CLASS)))["spec"] == DOCS_CLASS["spec"]
    template = await client.create(TEMPLATES, copy.deepcopy(DOCS_TEMPLATE))
    exactly = template["spec"]["spec"]["devices"]["requests"][0]["exactly"]
    assert (exactly["allocationMode"], exactly["count"]) == ("ExactCount", 1)  # upstream's v1 defaults
    prioritized = await client.create(CLAIMS, copy.deepcopy(DOCS_PRIORITIZED_CLAIM))
    subs = prioritized["spec"]["devices"]["requests"][0]["firstAvailable"]
    assert [(s["allocationMode"], s["count"]) for s in subs] == [("ExactCount", 1), ("ExactCount", 2)]
    assert (await client.create(SLICES, copy.deepcopy(DOCS_SLICE)))["spec"] == DOCS_SLICE["spec"]


async def test_a_device_class_whose_selector_does_not_compile_is_refused_in_cel_gos_words(client: Client) -> None:
    with pytest.raises(ApiError) as e:
        await client.create(CLASSES, {"metadata": {"name": "bad"}, "spec": {"selectors": [
            {"cel": {"expression": "device.driver =="}}, {"cel": {"expression": 'gpu.model == "x"'}}, {},
            {"cel": {"expression": 'device.driver == "a" &&\n  size(device.attributes) > 0 &&\n  model'}},
            {"cel": {"expression": 'device.drivr == "a" || device.driver > 1'}},
            {"cel": {"expression": 'device.attributes["gpu.example.com"].model == "a100" && '
                                   'device.capacity["gpu.example.com"].memory.compareTo(quantity("1Gi")) >= 0 && '
                                   "device.allowMultipleAllocations"}}]}})
    assert causes(e) == [
        ("FieldValueInvalid", "spec.selectors[0].cel.expression",
         'Invalid value: "device.driver ==": compilation failed: ERROR: <input>:1:17: Syntax error: mismatched '
         "input '<EOF>' expecting {'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, "
         "NUM_UINT, STRING, BYTES, IDENTIFIER}\n | device.driver ==\n | ................^"),
        ("FieldValueInvalid", "spec.selectors[1].cel.expression",
         "Invalid value: \"gpu.model == \\\"x\\\"\": compilation failed: ERROR: <input>:1:1: undeclared reference "
         "to 'gpu' (in container '')\n | gpu.model == \"x\"\n | ^"),
        ("FieldValueRequired", "spec.selectors[2].cel", "Required value"),
        ("FieldValueInvalid", "spec.selectors[3].cel.expression",
         'Invalid value: "device.driver == \\"a\\" &&\\n  size(device.attributes) > 0 &&\\n  model": compilation '
         "failed: ERROR: <input>:3:3: undeclared reference to 'model' (in container '')\n |   model\n | ..^"),
        ("FieldValueInvalid", "spec.selectors[4].cel.expression",
         'Invalid value: "device.drivr == \\"a\\" || device.driver > 1": compilation failed: ERROR: <input>:1:7: '
         "undefined field 'drivr'\n | device.drivr == \"a\" || device.driver > 1\n | ......^\n"
         "ERROR: <input>:1:38: found no matching overload for '_>_' applied to '(string, int)'\n"
         " | device.drivr == \"a\" || device.driver > 1\n | .....................................^")]


async def test_a_device_classs_selectors_and_configs_are_bounded_and_its_config_opaque(client: Client) -> None:
    many = [{"cel": {"expression": "true"}}] * 33
    with pytest.raises(ApiError) as e:
        await client.create(CLASSES, {"metadata": {"name": "many"}, "spec": {"selectors": many, "config": [
            {}, {"opaque": {"driver": "", "parameters": ["not", "an", "object"]}}],
            "extendedResourceName": "gpus"}})
    assert causes(e) == [
        ("FieldValueTooMany", "spec.selectors", "Too many: 33: must have at most 32 items"),
        ("FieldValueRequired", "spec.config[0].opaque", "Required value"),
        ("FieldValueRequired", "spec.config[1].opaque.driver", "Required value"),
        ("FieldValueInvalid", "spec.config[1].opaque.driver", f'Invalid value: "": {SUBDOMAIN_HINT}'),
        ("FieldValueInvalid", "spec.config[1].opaque.parameters",
         'Invalid value: "<value omitted>": must be a valid JSON object'),
        ("FieldValueInvalid", "spec.extendedResourceName", 'Invalid value: "gpus": must be a valid extended '
                                                           "resource name")]


async def test_a_claims_requests_are_held_to_upstreams_rules(client: Client) -> None:
    with pytest.raises(ApiError) as e:  # the probe's claim
        await client.create(CLAIMS, claim("probe", {"name": "Bad_Name", "exactly": {"deviceClassName": "",
                                                                                      "count": -1}}))
    assert causes(e) == [
        ("FieldValueInvalid", "spec.devices.requests[0].name", f'Invalid value: "Bad_Name": {LABEL_HINT}'),
        ("FieldValueRequired", "spec.devices.requests[0].exactly.deviceClassName", "Required value"),
        ("FieldValueInvalid", "spec.devices.requests[0].exactly.count", "Invalid value: -1: must be greater than zero")]
    with pytest.raises(ApiError) as e:
        await client.create(CLAIMS, claim(
            "rules", {"name": "both", "exactly": {"deviceClassName": "a"}, "firstAvailable": [
                {"name": "s", "deviceClassName": "a"}]}, {"name": "neither"},
            gpu("all", allocationMode="All", count=2), gpu("some", allocationMode="Some"), gpu("all"),
            {"name": "subs", "firstAvailable": [{"name": "x", "deviceClassName": "Not.Valid"},
                                                {"name": "x", "deviceClassName": "b"}]},
            constraints=[{"requests": ["all", "nope", "subs/y", "a/b/c"]}],
            config=[{"requests": ["subs/x"], "opaque": {"driver": "gpu.example.com", "parameters": {"a": 1}}}]))
    assert causes(e) == [
        ("FieldValueInvalid", "spec.devices.requests[0]", "Invalid value: null: exactly one of `exactly` or "
                                                          "`firstAvailable` is required, but multiple fields are set"),
        ("FieldValueRequired", "spec.devices.requests[1]",
         "Required value: exactly one of `exactly` or `firstAvailable` is required"),
        ("FieldValueInvalid", "spec.devices.requests[2].exactly.count",
         "Invalid value: 2: must not be specified when allocationMode is 'All'"),
        ("FieldValueNotSupported", "spec.devices.requests[3].exactly.allocationMode",
         'Unsupported value: "Some": supported values: "All", "ExactCount"'),
        ("FieldValueInvalid", "spec.devices.requests[5].firstAvailable[0].deviceClassName",
         f'Invalid value: "Not.Valid": {SUBDOMAIN_HINT}'),
        ("FieldValueDuplicate", "spec.devices.requests[5].firstAvailable[1]", 'Duplicate value: "x"'),
        ("FieldValueDuplicate", "spec.devices.requests[4]", 'Duplicate value: "all"'),
        ("FieldValueInvalid", "spec.devices.constraints[0].requests[1]", f'Invalid value: "nope": {REQUEST_REF}'),
        ("FieldValueInvalid", "spec.devices.constraints[0].requests[2]", f'Invalid value: "subs/y": {REQUEST_REF}'),
        ("FieldValueInvalid", "spec.devices.constraints[0].requests[3]", f'Invalid value: "a/b/c": {REQUEST_REF}'),
        ("FieldValueRequired", "spec.devices.constraints[0].matchAttribute", "Required value")]
    with pytest.raises(ApiError) as e:
        await client.create(CLAIMS, claim("many", *(gpu(f"r{i}") for i in range(33))))
    assert causes(e) == [("FieldValueTooMany", "spec.devices.requests", "Too many: 33: must have at most 32 items")]


async def test_a_claims_spec_is_immutable_but_its_defaults_are_no_change(client: Client) -> None:
    created = await client.create(CLAIMS, claim("fixed", gpu()))
    assert created["spec"]["devices"]["requests"][0]["exactly"]["allocationMode"] == "ExactCount"
    again = claim("fixed", gpu())  # as kubectl apply sends it again: without the defaults
    again["metadata"]["labels"] = {"app": "x"}
    assert (await client.update(f"{CLAIMS}/fixed", again))["metadata"]["labels"] == {"app": "x"}
    with pytest.raises(ApiError) as e:
        await client.patch(f"{CLAIMS}/fixed", {"spec": {"devices": {"requests": [gpu(count=2)]}}})
    [(reason, field, message)] = causes(e)
    assert (reason, field) == ("FieldValueInvalid", "spec") and message.endswith(": field is immutable")


def test_a_spec_stored_before_its_defaults_were_given_may_be_written_again_with_them() -> None:
    stored = claim("old", gpu())  # as a server before the defaults stored it
    again = claim("old", gpu())
    assert prepare("resourceclaims", again, stored) == []
    assert again["spec"]["devices"]["requests"][0]["exactly"]["count"] == 1
    template = {"metadata": {"name": "t"}, "spec": {"spec": stored["spec"]}}
    assert prepare("resourceclaimtemplates", copy.deepcopy(template), template) == []
    changed = {"metadata": {"name": "t"}, "spec": {"spec": claim("t", gpu(count=2))["spec"]}}
    assert [c["field"] for c in prepare("resourceclaimtemplates", changed, template)] == ["spec"]


def allocation(*results: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"devices": {"results": list(results)}, **extra}


def result(request: str = "gpu", device: str = "gpu-0", **extra: Any) -> dict[str, Any]:
    return {"request": request, "driver": "gpu.example.com", "pool": "n1", "device": device, **extra}


POD = {"resource": "pods", "name": "p", "uid": "1f0e4b2c-0000-4000-8000-000000000001"}


async def test_a_claims_status_is_written_once_allocated_and_reserved_as_upstream_allows(client: Client) -> None:
    await client.create(CLAIMS, claim("c", gpu()))
    status = f"{CLAIMS}/c/status"
    with pytest.raises(ApiError) as e:
        await client.patch(status, {"status": {"reservedFor": [POD, {"resource": "pods"}]}})
    assert causes(e) == [("FieldValueRequired", "status.reservedFor[1].name", "Required value"),
                         ("FieldValueRequired", "status.reservedFor[1].uid", "Required value"),
                         ("FieldValueForbidden", "status.reservedFor",
                          "Forbidden: may not be specified when `allocated` is not set")]
    with pytest.raises(ApiError) as e:
        await client.patch(status, {"status": {"allocation": allocation(
            result("nope", "GPU_0", shareID="not-a-uuid"), {**result(), "pool": "", "driver": "Bad_Driver"}),
            "devices": [{"driver": "gpu.example.com", "pool": "n1", "device": "gpu-9"}]}})
    assert causes(e) == [
        ("FieldValueInvalid", "status.devices[0]",
         "Invalid value: gpu.example.com/n1/gpu-9: must be an allocated device in the claim"),
        ("FieldValueInvalid", "status.allocation.devices.results[0].request", f'Invalid value: "nope": {REQUEST_REF}'),
        ("FieldValueInvalid", "status.allocation.devices.results[0].device", f'Invalid value: "GPU_0": {LABEL_HINT}'),
        ("FieldValueInvalid", "status.allocation.devices.results[0].shareID",
         'Invalid value: "not-a-uuid": error validating uid: invalid UUID length: 10'),
        ("FieldValueInvalid", "status.allocation.devices.results[1].driver",
         f'Invalid value: "Bad_Driver": {SUBDOMAIN_HINT}'),
        ("FieldValueRequired", "status.allocation.devices.results[1].pool", "Required value")]
    written = await client.patch(status, {"status": {"allocation": allocation(result()), "reservedFor": [POD]}})
    assert written["status"]["reservedFor"] == [POD]
    with pytest.raises(ApiError) as e:  # an allocation is written once
        await client.patch(status, {"status": {"allocation": allocation(result(device="gpu-1"))}})
    [(reason, field, message)] = causes(e)
    assert (reason, field) == ("FieldValueInvalid", "status.allocation") and message.endswith(": field is immutable")
    with pytest.raises(ApiError) as e:
        await client.patch(status, {"status": {"reservedFor": [POD, POD]}})
    assert causes(e) == [("FieldValueDuplicate", "status.reservedFor[1]", f'Duplicate value: "{POD["uid"]}"')]
    with pytest.raises(ApiError) as e:
        await client.patch(status, {"status": {"reservedFor": [
            {**POD, "uid": f"00000000-0000-4000-8000-{i:012d}"} for i in range(257)]}})
    assert causes(e) == [("FieldValueTooMany", "status.reservedFor", "Too many: 257: must have at most 256 items")]
    # released, then deallocated: both allowed
    await client.patch(status, {"status": {"reservedFor": None}})
    assert "allocation" not in (await client.patch(status, {"status": {"allocation": None}}))["status"]
    # a device seen valid before is still checked against the claim's own requests
    await client.create(CLAIMS, claim("other", {"name": "req", "firstAvailable": [
        {"name": "big", "deviceClassName": "gpu.example.com"}]}))
    with pytest.raises(ApiError) as e:
        await client.patch(f"{CLAIMS}/other/status", {"status": {"allocation": allocation(result())}})
    assert causes(e) == [("FieldValueInvalid", "status.allocation.devices.results[0].request",
                          f'Invalid value: "gpu": {REQUEST_REF}')]
    for request in ("req/big", "req"):  # upstream takes a request with subrequests by its name alone too
        written = await client.patch(f"{CLAIMS}/other/status", {"status": {"allocation": allocation(result(request))}})
        assert written["status"]["allocation"]["devices"]["results"][0]["request"] == request
        await client.patch(f"{CLAIMS}/other/status", {"status": {"allocation": None}})


async def test_a_claim_template_is_validated_at_its_nested_paths_and_fixed(client: Client) -> None:
    with pytest.raises(ApiError) as e:
        await client.create(TEMPLATES, {"metadata": {"name": "t"}, "spec": {
            "metadata": {"name": "mine", "labels": {"bad key!": "x"}},
            "spec": {"devices": {"requests": [gpu("A")]}}}})
    assert [c[:2] for c in causes(e)] == [("FieldValueInvalid", "spec.metadata.labels"),
                                          ("FieldValueForbidden", "spec.metadata.name"),
                                          ("FieldValueInvalid", "spec.spec.devices.requests[0].name")]
    await client.create(TEMPLATES, {"metadata": {"name": "t"}, "spec": {"spec": {"devices": {"requests": [gpu()]}}}})
    with pytest.raises(ApiError) as e:
        await client.patch(f"{TEMPLATES}/t", {"spec": {"metadata": {"labels": {"a": "b"}}}})
    assert [c[:2] for c in causes(e)] == [("FieldValueInvalid", "spec")]


async def test_a_resource_slice_is_held_to_upstreams_rules(client: Client) -> None:
    with pytest.raises(ApiError) as e:  # the probe's slice
        await client.create(SLICES, device_slice("probe", driver="Not A Driver", pool={"name": "",
                                                                                       "resourceSliceCount": 1}))
    assert causes(e) == [
        ("FieldValueInvalid", "spec.driver", f'Invalid value: "Not A Driver": {SUBDOMAIN_HINT}'),
        ("FieldValueRequired", "spec.pool.name", "Required value")]
    with pytest.raises(ApiError) as e:
        await client.create(SLICES, device_slice(
            "rules", allNodes=True, pool={"name": "n1", "resourceSliceCount": 0}, sharedCounters=[], devices=[
                {"name": "d0", "attributes": {"both": {"int": 1, "bool": True}, "v": {"version": "1.2"},
                                              "bad-name": {"string": "x"}},
                 "taints": [{"key": "example.com/broken", "effect": "Sometimes"}]},
                {"name": "d0", "nodeName": "n1"}]))
    assert causes(e) == [
        ("FieldValueInvalid", "spec.pool.resourceSliceCount", "Invalid value: 0: must be greater than zero"),
        ("FieldValueInvalid", "spec", 'Invalid value: "{`nodeName`, `allNodes`}": exactly one of `nodeName`, '
                                      "`nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required, but multiple "
                                      "fields are set"),
        ("FieldValueInvalid", "spec", 'Invalid value: "": only one of `sharedCounters` or `devices` is allowed'),
        ("FieldValueInvalid", "spec.devices[0].attributes[both]",
         'Invalid value: {"bool":true,"int":1}: exactly one value must be specified'),
        ("FieldValueInvalid", "spec.devices[0].attributes[v].version",
         'Invalid value: "1.2": must be a string compatible with semver.org spec 2.0.0'),
        ("FieldValueInvalid", "spec.devices[0].attributes",
         "Invalid value: \"bad-name\": a valid C identifier must start with alphabetic character or '_', followed "
         "by a string of alphanumeric characters or '_' (e.g. 'my_name',  or 'MY_NAME',  or 'MyName', regex used "
         "for validation is '[A-Za-z_][A-Za-z0-9_]*')"),
        ("FieldValueNotSupported", "spec.devices[0].taints[0].effect",
         'Unsupported value: "Sometimes": supported values: "NoExecute", "NoSchedule", "None"'),
        ("FieldValueInvalid", "spec.devices[1]", "Invalid value: null: `nodeName`, `nodeSelector` and `allNodes` "
                                                 "can only be set if `perDeviceNodeSelection` is set to true in the "
                                                 "ResourceSlice spec"),
        ("FieldValueDuplicate", "spec.devices[1]", 'Duplicate value: "d0"')]
    with pytest.raises(ApiError) as e:
        await client.create(SLICES, device_slice("nowhere", nodeName=None))
    assert causes(e) == [("FieldValueRequired", "spec", "Required value: exactly one of `nodeName`, `nodeSelector`, "
                                                        "`allNodes`, `perDeviceNodeSelection` is required")]


async def test_a_resource_slices_devices_are_bounded_by_upstreams_limits(client: Client) -> None:
    plain = [{"name": f"d{i}"} for i in range(129)]
    tainted = [{"name": f"d{i}", "taints": [{"key": "k", "effect": "NoSchedule"}]} for i in range(65)]
    for name, devices, limit in (("plain", plain, 128), ("tainted", tainted, 64)):
        with pytest.raises(ApiError) as e:
            await client.create(SLICES, device_slice(name, devices=devices))
        assert causes(e) == [("FieldValueTooMany", "spec.devices",
                              f"Too many: {len(devices)}: must have at most {limit} items")]
    attributes = {f"a{i}": {"int": i} for i in range(33)}
    with pytest.raises(ApiError) as e:
        await client.create(SLICES, device_slice("wide", devices=[{"name": "d0", "attributes": attributes}]))
    assert causes(e) == [("FieldValueInvalid", "spec.devices[0]",
                          "Invalid value: 33: the total number of attributes and capacities must not exceed 32")]
    taints = [{"key": f"k{i}", "effect": "NoSchedule"} for i in range(17)]
    with pytest.raises(ApiError) as e:
        await client.create(SLICES, device_slice("tainted", devices=[{"name": "d0", "taints": taints}]))
    assert causes(e) == [("FieldValueTooMany", "spec.devices[0].taints", "Too many: 17: must have at most 16 items")]


async def test_a_resource_slices_driver_pool_and_node_are_fixed_and_taints_stamped(client: Client) -> None:
    created = await client.create(SLICES, device_slice("s", devices=[
        {"name": "gpu-0", "taints": [{"key": "example.com/unhealthy", "value": "true", "effect": "NoSchedule"}]}]))
    assert created["spec"]["devices"][0]["taints"][0]["timeAdded"].endswith("Z")  # SetDefaults_DeviceTaint
    changed = copy.deepcopy(created)
    changed["spec"].update(driver="nic.example.com", nodeName="n2", pool={**created["spec"]["pool"], "name": "n2"})
    with pytest.raises(ApiError) as e:
        await client.update(f"{SLICES}/s", changed)
    assert causes(e) == [("FieldValueInvalid", "spec.pool.name", 'Invalid value: "n2": field is immutable'),
                         ("FieldValueInvalid", "spec.driver", 'Invalid value: "nic.example.com": field is immutable'),
                         ("FieldValueInvalid", "spec.nodeName", 'Invalid value: "n2": field is immutable')]
    created["spec"]["pool"]["generation"] = 2  # a driver's republication
    assert (await client.update(f"{SLICES}/s", created))["spec"]["pool"]["generation"] == 2


async def test_a_selector_calling_a_function_of_no_cel_library_is_refused(client: Client) -> None:
    """A function neither cel-go's nor Kubernetes' is an undeclared reference, at the call's
    parenthesis; the libraries' own (lowerAscii, quantity, semver) are not."""
    with pytest.raises(ApiError) as e:
        await client.create(CLASSES, {"metadata": {"name": "lower"}, "spec": {"selectors": [
            {"cel": {"expression": 'device.driver.toLower() == "a"'}}]}})
    assert causes(e) == [("FieldValueInvalid", "spec.selectors[0].cel.expression",
                          'Invalid value: "device.driver.toLower() == \\"a\\"": compilation failed: ERROR: '
                          "<input>:1:22: undeclared reference to 'toLower' (in container '')\n"
                          ' | device.driver.toLower() == "a"\n | .....................^')]
    await client.create(CLASSES, {"metadata": {"name": "lower"}, "spec": {"selectors": [
        {"cel": {"expression": 'device.driver.lowerAscii() == "a" && '
                               'device.capacity["a.example.com"].memory.isGreaterThan(quantity("1Gi"))'}}]}})


async def test_a_selector_too_dear_to_run_is_refused(client: Client) -> None:
    """Upstream's own example (its validation tests): seven loops over ten items each, far
    over the 1,000,000 a selector may cost (85,555,551); five, 855,551, pass."""
    def loops(n: int) -> str:
        inner = "int('1'.find('[0-9]*')) < 100"
        for i in range(n):
            inner = f"[1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(x{i}, {inner})"
        return inner

    with pytest.raises(ApiError) as e:
        await client.create(CLASSES, {"metadata": {"name": "dear"}, "spec": {"selectors": [
            {"cel": {"expression": loops(7)}}]}})
    assert causes(e) == [("FieldValueForbidden", "spec.selectors[0].cel.expression",
                          "Forbidden: too complex, exceeds cost limit")]
    await client.create(CLASSES, {"metadata": {"name": "dear"}, "spec": {"selectors": [
        {"cel": {"expression": loops(5)}}]}})
