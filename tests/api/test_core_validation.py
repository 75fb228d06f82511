"""Nodes, Endpoints and PodTemplates validated as kube-apiserver validates them
(registry/corevalidation.py): they used to be stored whatever they said."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from controlplane.client import ApiError, Client, resource_path
from controlplane.client.transport import open_stream

NODES = resource_path("", "v1", "nodes", None)
ENDPOINTS = resource_path("", "v1", "endpoints", "default")
TEMPLATES = resource_path("", "v1", "podtemplates", "default")


def causes(e: pytest.ExceptionInfo[ApiError]) -> list[tuple[str, str, str]]:
    assert e.value.code == 422
    return [(c["reason"], c["field"], c["message"]) for c in e.value.status["details"]["causes"]]


def node(name: str, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": spec}


# -- Nodes ----------------------------------------------------------------------------------------
async def test_a_nodes_taints_are_checked_and_reported_under_the_metadata_as_upstream(client: Client) -> None:
    with pytest.raises(ApiError) as e:
        await client.create(NODES, node("n1", taints=[
            {"key": "a", "effect": "Bogus"}, {"key": "-bad-", "value": "v", "effect": "NoSchedule"},
            {"key": "dup", "effect": "NoExecute"}, {"key": "dup", "effect": "NoExecute"}, {"key": "k", "effect": ""}]))
    got = causes(e)
    assert got[0] == ("FieldValueNotSupported", "metadata.taints[0].effect",
                      'Unsupported value: "Bogus": supported values: "NoSchedule", "PreferNoSchedule", "NoExecute"')
    assert got[1][:2] == ("FieldValueInvalid", "metadata.taints[1].key")
    assert got[2] == ("FieldValueDuplicate", "metadata.taints[3]",
                      'Duplicate value: {"Key":"dup","Value":"","Effect":"NoExecute","TimeAdded":null}: '
                      'taints must be unique by key and effect pair')
    assert got[3] == ("FieldValueRequired", "metadata.taints[4].effect", "Required value")


async def test_a_nodes_pod_cidrs_are_checked_at_create_and_fixed_once_set(client: Client) -> None:
    with pytest.raises(ApiError) as e:
        await client.create(NODES, node("n1", podCIDR="notacidr"))
    assert causes(e) == [("FieldValueInvalid", "spec.podCIDRs[0]", 'Invalid value: "notacidr": must be a valid '
                          "CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)")]
    with pytest.raises(ApiError) as e:
        await client.create(NODES, node("n1", podCIDRs=["10.0.0.0/24", "10.0.1.0/24"]))
    assert causes(e) == [("FieldValueInvalid", "spec.podCIDRs", 'Invalid value: ["10.0.0.0/24","10.0.1.0/24"]: '
                          "may specify no more than one CIDR for each IP family")]
    created = await client.create(NODES, node("n1", podCIDR="10.0.0.0/24"))
    assert created["spec"]["podCIDRs"] == ["10.0.0.0/24"]  # as the v1 conversion fills it
    dual = await client.create(NODES, node("n2", podCIDRs=["10.0.2.0/24", "fd00::/64"]))
    assert dual["spec"]["podCIDR"] == "10.0.2.0/24"
    with pytest.raises(ApiError) as e:
        await client.patch(f"{NODES}/n1", {"spec": {"podCIDR": "10.0.9.0/24", "podCIDRs": ["10.0.9.0/24"]}})
    assert causes(e) == [("FieldValueForbidden", "spec.podCIDRs",
                          'Forbidden: node updates may not change podCIDR except from "" to valid')]
    unset = await client.create(NODES, node("n3"))
    assert "podCIDRs" not in unset["spec"]
    assigned = await client.patch(f"{NODES}/n3", {"spec": {"podCIDR": "10.0.3.0/24"}})  # the IPAM's first write
    assert assigned["spec"]["podCIDRs"] == ["10.0.3.0/24"]


async def test_a_nodes_provider_id_is_fixed_once_set(client: Client) -> None:
    await client.create(NODES, node("n1"))
    await client.patch(f"{NODES}/n1", {"spec": {"providerID": "kwok://n1"}})
    with pytest.raises(ApiError) as e:
        await client.patch(f"{NODES}/n1", {"spec": {"providerID": "aws://i-1"}})
    assert causes(e) == [("FieldValueForbidden", "spec.providerID",
                          'Forbidden: node updates may not change providerID except from "" to valid')]


async def test_a_nodes_capacity_is_not_negative_and_whole_where_it_counts(client: Client) -> None:
    with pytest.raises(ApiError) as e:
        await client.create(NODES, {"metadata": {"name": "n1"}, "status": {
            "capacity": {"cpu": "-1", "pods": "1500m", "nvidia.com/gpu": "0.5", "memory": "1Gi"}}})
    assert causes(e) == [
        ("FieldValueInvalid", "status.capacity.cpu", 'Invalid value: "-1": must be greater than or equal to 0'),
        ("FieldValueInvalid", "status.capacity.pods", 'Invalid value: "1500m": must be an integer'),
        # (shown canonical, as upstream marshals the Quantity it parsed)
        ("FieldValueInvalid", "status.capacity.nvidia.com/gpu", 'Invalid value: "500m": must be an integer')]
    await client.create(NODES, {"metadata": {"name": "n1"}, "status": {"capacity": {"cpu": "500m", "pods": "110"}}})
    with pytest.raises(ApiError) as e:  # a status update too, and its addresses are not repeated
        await client.patch(f"{NODES}/n1/status", {"status": {
            "allocatable": {"memory": "-1Ki"},
            "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}] * 2}})
    assert causes(e) == [
        ("FieldValueInvalid", "status.allocatable.memory", 'Invalid value: "-1Ki": must be greater than or equal to 0'),
        ("FieldValueDuplicate", "status.addresses[1]",
         'Duplicate value: {"Type":"InternalIP","Address":"10.0.0.1"}')]
    with pytest.raises(ApiError) as e:  # not a quantity: the decoder's, on the patch as upstream's patcher says
        await client.patch(f"{NODES}/n1/status", {"status": {"capacity": {"cpu": "lots"}}})
    assert e.value.code == 422 and "quantities must match the regular expression" in str(e.value)


# -- Endpoints ------------------------------------------------------------------------------------
async def test_endpoints_addresses_and_ports_are_checked(client: Client) -> None:
    with pytest.raises(ApiError) as e:
        await client.create(ENDPOINTS, {"metadata": {"name": "e1"}, "subsets": [
            {"addresses": [{"ip": "notanip"}, {"ip": "127.0.0.1", "hostname": "Not_A_Label"},
                           {"ip": "10.1.1.1", "nodeName": "Bad Node"}],
             "notReadyAddresses": [{"ip": "169.254.1.1"}],
             "ports": [{"port": 70000}, {"name": "b", "port": 80, "protocol": "ICMP"}]},
            {"ports": [{"port": 80}]}]})
    got = causes(e)
    assert got[:2] == [
        ("FieldValueInvalid", "subsets[0].addresses[0].ip",
         'Invalid value: "notanip": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)'),
        ("FieldValueInvalid", "subsets[0].addresses[0].ip", 'Invalid value: "notanip": must be a valid IP address')]
    fields = [f for _, f, _ in got]
    assert fields[2:] == ["subsets[0].addresses[1].hostname", "subsets[0].addresses[1].ip",
                          "subsets[0].addresses[2].nodeName", "subsets[0].notReadyAddresses[0].ip",
                          "subsets[0].ports[0].name", "subsets[0].ports[0].port", "subsets[0].ports[1].protocol",
                          "subsets[1]"]
    assert got[3][2] == 'Invalid value: "127.0.0.1": may not be in the loopback range (127.0.0.0/8, ::1/128)'
    assert got[-1] == ("FieldValueRequired", "subsets[1]", "Required value: must specify `addresses` or "
                       "`notReadyAddresses`")


async def test_valid_endpoints_are_stored_with_their_ports_protocol(client: Client) -> None:
    created = await client.create(ENDPOINTS, {"metadata": {"name": "e1"}, "subsets": [
        {"addresses": [{"ip": "10.1.1.1", "hostname": "web-0", "nodeName": "node-1"}],
         "notReadyAddresses": [{"ip": "2001:db8::1"}], "ports": [{"port": 80}]}]})
    assert created["subsets"][0]["ports"] == [{"port": 80, "protocol": "TCP"}]
    await client.create(ENDPOINTS, {"metadata": {"name": "e2"}})  # no subsets: a Service without pods


async def test_endpoints_addresses_in_legacy_forms_are_refused_as_1_37_refuses_them(client: Client) -> None:
    """StrictIPCIDRValidation on (1.36 on): leading zeros and IPv4-mapped addresses are 422; a
    non-canonical IPv6 one is valid and warned about; none for the endpoints controller's."""
    ips = ["01.02.03.04", "fd00::1234", "::ffff:1.2.3.4", "2001:DB8:0::1", "::ffff:010.1.2.3"]
    body = {"metadata": {"name": "odd"}, "subsets": [{"addresses": [{"ip": ip} for ip in ips[:3]],
                                                      "notReadyAddresses": [{"ip": ip} for ip in ips[3:]]}]}
    with pytest.raises(ApiError) as e:
        await client.create(ENDPOINTS, body)
    assert causes(e) == [
        ("FieldValueInvalid", "subsets[0].addresses[0].ip", 'Invalid value: "01.02.03.04": must not have leading 0s'),
        ("FieldValueInvalid", "subsets[0].addresses[2].ip",
         'Invalid value: "::ffff:1.2.3.4": must not be an IPv4-mapped IPv6 address'),
        ("FieldValueInvalid", "subsets[0].notReadyAddresses[1].ip",
         'Invalid value: "::ffff:010.1.2.3": must not have leading 0s')]
    body = {"metadata": {"name": "odd"}, "subsets": [{"addresses": [{"ip": "fd00::1234"}, {"ip": "2001:DB8:0::1"}]}]}
    status, headers, answer = await open_stream(client._app, "POST", ENDPOINTS.encode(), b"",
                                                [(b"content-type", b"application/json")], orjson.dumps(body))
    created = orjson.loads(b"".join([chunk async for chunk in answer]))
    assert status == 201 and created["subsets"][0]["addresses"][1]["ip"] == "2001:DB8:0::1"  # as written
    warnings = [v.decode() for k, v in headers if k == b"warning" and b"subsets" in v]
    assert warnings == ['299 - "subsets[0].addresses[1].ip: IPv6 address \\"2001:DB8:0::1\\" should be in RFC 5952 '
                        'canonical format (\\"2001:db8::1\\")"']
    body["metadata"] = {"name": "managed", "labels": {"endpoints.kubernetes.io/managed-by": "endpoint-controller"}}
    status, headers, answer = await open_stream(client._app, "POST", ENDPOINTS.encode(), b"",
                                                [(b"content-type", b"application/json")], orjson.dumps(body))
    await answer.aclose()
    assert status == 201 and not [v for k, v in headers if k == b"warning" and b"subsets" in v]


# -- PodTemplates ---------------------------------------------------------------------------------
async def test_a_pod_templates_spec_is_a_pods_defaulted_and_checked(client: Client) -> None:
    with pytest.raises(ApiError) as e:
        await client.create(TEMPLATES, {"metadata": {"name": "t1"}, "template": {"spec": {"containers": []}}})
    assert causes(e) == [("FieldValueRequired", "template.spec.containers", "Required value")]
    with pytest.raises(ApiError) as e:
        await client.create(TEMPLATES, {"metadata": {"name": "t1"}, "template": {
            "metadata": {"labels": {"app": "-x-"}},
            "spec": {"containers": [{"name": "c", "image": "nginx"}],
                     "ephemeralContainers": [{"name": "d", "image": "busybox"}]}}})
    assert [f for _, f, _ in causes(e)] == ["template.labels", "template.spec.ephemeralContainers"]
    created = await client.create(TEMPLATES, {"metadata": {"name": "t1"}, "template": {
        "spec": {"containers": [{"name": "c", "image": "nginx"}]}}})
    spec = created["template"]["spec"]
    assert (spec["restartPolicy"], spec["dnsPolicy"], spec["terminationGracePeriodSeconds"]) == \
        ("Always", "ClusterFirst", 30)
    assert spec["containers"][0]["imagePullPolicy"] == "Always"  # no tag: latest


# -- EndpointSlices, Secrets, Services, LimitRanges -------------------------------------------------
SLICES = resource_path("discovery.k8s.io", "v1", "endpointslices", "default")
SECRETS = resource_path("", "v1", "secrets", "default")
SERVICES = resource_path("", "v1", "services", "default")
LIMITS = resource_path("", "v1", "limitranges", "default")


async def test_an_endpoint_slices_addresses_are_of_its_type_and_its_ports_named_apart(client: Client) -> None:
    with pytest.raises(ApiError) as e:
        await client.create(SLICES, {"metadata": {"name": "s1"}, "addressType": "IPv4", "endpoints": [
            {"addresses": ["2001:db8::1"], "hostname": "Bad_Host"}, {"addresses": ["10.0.0.1"] * 101}],
            "ports": [{"port": 80, "protocol": "ICMP"}, {"port": 81}]})
    assert causes(e) == [
        ("FieldValueInvalid", "endpoints[0].addresses[0]",
         'Invalid value: "2001:db8::1": must be a valid IPv4 address'),
        ("FieldValueInvalid", "endpoints[0].hostname", 'Invalid value: "Bad_Host": a lowercase RFC 1123 label must '
         "consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character "
         "(e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"),
        ("FieldValueTooMany", "endpoints[1].addresses", "Too many: 101: must have at most 100 items"),
        ("FieldValueNotSupported", "ports[0].protocol", 'Unsupported value: "ICMP": supported values: "SCTP", "TCP", '
         '"UDP"'),
        ("FieldValueDuplicate", "ports[1].name", 'Duplicate value: ""')]
    with pytest.raises(ApiError) as e:
        await client.create(SLICES, {"metadata": {"name": "s1"}, "addressType": "FQDN",
                                     "endpoints": [{"addresses": ["localhost"]}]})
    assert causes(e) == [("FieldValueInvalid", "endpoints[0].addresses[0]", 'Invalid value: "localhost": should be '
                          "a domain with at least two segments separated by dots")]
    created = await client.create(SLICES, {"metadata": {"name": "s1"}, "addressType": "FQDN",
                                           "endpoints": [{"addresses": ["db.example.com."]}],
                                           "ports": [{"port": 5432}]})
    assert created["ports"] == [{"name": "", "port": 5432, "protocol": "TCP"}]


async def test_typed_secrets_hold_what_their_type_asks(client: Client) -> None:
    with pytest.raises(ApiError) as e:
        await client.create(SECRETS, {"metadata": {"name": "s1"}, "type": "kubernetes.io/dockerconfigjson",
                                      "stringData": {".dockerconfigjson": "[1]"}})
    assert causes(e) == [("FieldValueInvalid", "data[.dockerconfigjson]", 'Invalid value: "<secret contents '
                          'redacted>": json: cannot unmarshal array into Go value of type map[string]interface {}')]
    with pytest.raises(ApiError) as e:
        await client.create(SECRETS, {"metadata": {"name": "s1"}, "type": "kubernetes.io/basic-auth"})
    assert [f for _, f, _ in causes(e)] == ["data[username]", "data[password]"]
    with pytest.raises(ApiError) as e:
        await client.create(SECRETS, {"metadata": {"name": "s1"}, "type": "kubernetes.io/service-account-token"})
    assert [f for _, f, _ in causes(e)] == ["metadata.annotations[kubernetes.io/service-account.name]"]
    await client.create(SECRETS, {"metadata": {"name": "s1"}, "type": "kubernetes.io/dockerconfigjson",
                                  "stringData": {".dockerconfigjson": '{"auths": {}}'}})
    await client.create(SECRETS, {"metadata": {"name": "s2"}, "type": "kubernetes.io/basic-auth",
                                  "stringData": {"password": "p"}})


async def test_an_external_name_is_a_dns_subdomain(client: Client) -> None:
    with pytest.raises(ApiError) as e:
        await client.create(SERVICES, {"metadata": {"name": "ext"}, "spec": {"type": "ExternalName",
                                                                            "externalName": "Not A Name"}})
    assert [(r, f) for r, f, _ in causes(e)] == [("FieldValueInvalid", "spec.externalName")]
    created = await client.create(SERVICES, {"metadata": {"name": "ext"}, "spec": {
        "type": "ExternalName", "externalName": "db.example.com."}})
    assert created["spec"]["externalName"] == "db.example.com."


async def test_a_limit_ranges_bounds_are_in_order(client: Client) -> None:
    with pytest.raises(ApiError) as e:
        await client.create(LIMITS, {"metadata": {"name": "l1"}, "spec": {"limits": [
            {"type": "Container", "min": {"cpu": "2"}, "max": {"cpu": "1"}, "maxLimitRequestRatio": {"memory": "500m"}},
            {"type": "Pod", "default": {"cpu": "1"}}, {"type": "Container"}, {"type": "Widget"},
            {"type": "PersistentVolumeClaim"}]}})
    assert causes(e) == [
        ("FieldValueInvalid", "spec.limits[0].min[cpu]", 'Invalid value: "2": min value 2 is greater than max value 1'),
        ("FieldValueInvalid", "spec.limits[0].defaultRequest[cpu]",
         'Invalid value: "1": min value 2 is greater than default request value 1'),
        ("FieldValueInvalid", "spec.limits[0].default[cpu]", 'Invalid value: "2": min value 2 is greater than default '
         "value 1"),
        ("FieldValueInvalid", "spec.limits[0].maxLimitRequestRatio[memory]",
         'Invalid value: "500m": ratio 500m is less than 1'),
        ("FieldValueForbidden", "spec.limits[1].default", "Forbidden: may not be specified when `type` is 'Pod'"),
        ("FieldValueDuplicate", "spec.limits[2].type", 'Duplicate value: "Container"'),
        ("FieldValueInvalid", "spec.limits[3].type", 'Invalid value: "Widget": must be a standard limit type or '
         "fully qualified"),
        ("FieldValueRequired", "spec.limits[4].limits", "Required value: either minimum or maximum storage value is "
         "required, but neither was provided")]
    created = await client.create(LIMITS, {"metadata": {"name": "l1"}, "spec": {"limits": [
        {"type": "Container", "max": {"nvidia.com/gpu": "2"}}, {"type": "example.com/Widget", "max": {"cpu": "1"}}]}})
    assert created["spec"]["limits"][0]["defaultRequest"] == {"nvidia.com/gpu": "2"}


async def test_a_limit_ranges_resources_are_standard_or_qualified(client: Client) -> None:
    with pytest.raises(ApiError) as e:
        await client.create(LIMITS, {"metadata": {"name": "l1"}, "spec": {"limits": [
            {"type": "Container", "max": {"zz5": "1", "storage": "1Gi", "example.com/widget": "2"}},
            {"type": "PersistentVolumeClaim", "max": {"zz5": "1", "storage": "1Gi"}}]}})
    assert causes(e) == [
        ("FieldValueInvalid", "spec.limits[0].max[zz5]", 'Invalid value: "zz5": must be a standard resource type '
         "or fully qualified"),
        ("FieldValueInvalid", "spec.limits[0].max[zz5]", 'Invalid value: "zz5": must be a standard resource for '
         "containers"),
        ("FieldValueInvalid", "spec.limits[0].max[storage]", 'Invalid value: "storage": must be a standard resource '
         "for containers"),
        ("FieldValueInvalid", "spec.limits[1].max[zz5]", 'Invalid value: "zz5": must be a standard resource type '
         "or fully qualified")]
