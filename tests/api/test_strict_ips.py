"""StrictIPCIDRValidation as 1.37 has it on (KEP-4858, registry/ipfields.py): new IPs and CIDRs
with leading zeros, IPv4-mapped IPv6 addresses and CIDRs with host bits are 422 in every legacy
field, in upstream's words and paths; an update may keep those the stored object had (written
here before the gate, seeded straight into the store)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from controlplane.api.app import create_app
from controlplane.client import ApiError, Client, resource_path
from controlplane.config import Config
from controlplane.registry.ipfields import legacy_cidr_problems, legacy_ip_problems

PODS = resource_path("", "v1", "pods", "default")
SVCS = resource_path("", "v1", "services", "default")
ENDPOINTS = resource_path("", "v1", "endpoints", "default")
SLICES = resource_path("discovery.k8s.io", "v1", "endpointslices", "default")
POLICIES = resource_path("networking.k8s.io", "v1", "networkpolicies", "default")
INGRESSES = resource_path("networking.k8s.io", "v1", "ingresses", "default")
NODES = resource_path("", "v1", "nodes", None)
DEPLOYMENTS = resource_path("apps", "v1", "deployments", "default")

ZEROS, MAPPED = "must not have leading 0s", "must not be an IPv4-mapped IPv6 address"


def causes(e: pytest.ExceptionInfo[ApiError]) -> list[tuple[str, str]]:
    assert e.value.code == 422, e.value.status
    return [(c["field"], c["message"]) for c in e.value.status["details"]["causes"]]


def test_the_legacy_parse_with_the_strict_checks() -> None:
    assert legacy_ip_problems("10.1.2.3") == legacy_ip_problems("2001:DB8:0::1") == ()  # (not canonical: valid)
    assert legacy_ip_problems("010.1.2.3") == legacy_ip_problems("::ffff:010.1.2.3") == (ZEROS,)
    assert legacy_ip_problems("::ffff:1.2.3.4") == (MAPPED,)
    assert legacy_ip_problems("fe80::1%eth0") == legacy_ip_problems("1.2.3") == \
        ("must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",)
    assert legacy_cidr_problems("10.0.0.0/8") == legacy_cidr_problems("fd00:0::/64") == ()
    assert legacy_cidr_problems("010.0.0.0/8") == legacy_cidr_problems("10.0.0.0/08") == \
        ("must not have leading 0s in IP or prefix length",)
    assert legacy_cidr_problems("::ffff:10.0.0.0/104") == ("must not have an IPv4-mapped IPv6 address",)
    assert legacy_cidr_problems("10.0.0.1/8") == ("must not have bits set beyond the prefix length",)
    assert legacy_cidr_problems("10.0.0.0/33") == legacy_cidr_problems("10.0.0.0") == \
        ("must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)",)


def pod(name: str, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "nginx"}], **spec}}


async def test_a_pods_nameservers_host_aliases_and_status_ips(client: Client) -> None:
    with pytest.raises(ApiError) as e:
        await client.create(PODS, pod("p", dnsPolicy="None", dnsConfig={"nameservers": ["8.8.8.8", "08.8.8.8"]},
                                      hostAliases=[{"ip": "::ffff:1.2.3.4", "hostnames": ["a"]}]))
    assert causes(e) == [("spec.dnsConfig.nameservers[1]", f'Invalid value: "08.8.8.8": {ZEROS}'),
                         ("spec.hostAliases[0].ip", f'Invalid value: "::ffff:1.2.3.4": {MAPPED}')]
    await client.create(PODS, pod("p"))
    status = {"status": {"podIP": "10.0.0.7", "podIPs": [{"ip": "10.0.0.7"}]}}
    await client.patch(f"{PODS}/p/status", status)
    with pytest.raises(ApiError) as e:
        await client.patch(f"{PODS}/p/status", {"status": {"podIP": "010.0.0.8", "podIPs": [{"ip": "010.0.0.8"}],
                                                  "hostIP": "10.1.0.1", "hostIPs": [{"ip": "10.1.0.1"}]}})
    assert causes(e) == [("status.podIPs[0]", f'Invalid value: "010.0.0.8": {ZEROS}')]
    with pytest.raises(ApiError) as e:
        await client.patch(f"{PODS}/p/status", {"status": {"podIPs": [{"ip": "10.0.0.7"}, {"ip": "10.0.0.7"}]}})
    assert causes(e) == [("status.podIPs", 'Invalid value: [{"IP":"10.0.0.7"},{"IP":"10.0.0.7"}]: '
                                           "may specify no more than one IP for each IP family"),
                         ("status.podIPs[1]", 'Duplicate value: {"IP":"10.0.0.7"}')]
    dual = {"status": {"podIPs": [{"ip": "10.0.0.7"}, {"ip": "fd00::7"}], "hostIP": "10.1.0.1"}}
    got = await client.patch(f"{PODS}/p/status", dual)
    assert got["status"]["hostIPs"] == [{"ip": "10.1.0.1"}]


async def test_a_services_cluster_external_and_source_range_fields(client: Client) -> None:
    body = {"metadata": {"name": "s"}, "spec": {"type": "ClusterIP", "clusterIP": "10.96.0.010",
                                               "ports": [{"port": 80}], "externalIPs": ["1.2.3.4", "::ffff:5.6.7.8",
                                                                                        "127.0.0.1"],
                                               "loadBalancerSourceRanges": [" 10.0.0.1/8"]}}
    with pytest.raises(ApiError) as e:
        await client.create(SVCS, body)
    assert causes(e) == [
        ("spec.clusterIPs[0]", f'Invalid value: "10.96.0.010": {ZEROS}'),
        ("spec.externalIPs[1]", f'Invalid value: "::ffff:5.6.7.8": {MAPPED}'),
        ("spec.externalIPs[2]", 'Invalid value: "127.0.0.1": may not be in the loopback range (127.0.0.0/8, ::1/128)'),
        ("spec.LoadBalancerSourceRanges", "Forbidden: may only be used when `type` is 'LoadBalancer'"),
        ("spec.LoadBalancerSourceRanges[0]", 'Invalid value: "10.0.0.1/8": must not have bits set beyond the '
                                             "prefix length")]
    headless = await client.create(SVCS, {"metadata": {"name": "h"}, "spec": {"clusterIP": "None",
                                                                            "ports": [{"port": 80}]}})
    assert headless["spec"]["clusterIPs"] == ["None"]  # (no address to parse)
    body["spec"] = {"type": "LoadBalancer", "ports": [{"port": 80}], "loadBalancerSourceRanges": [" 10.0.0.0/8"]}
    created = await client.create(SVCS, body)
    with pytest.raises(ApiError) as e:
        await client.patch(f"{SVCS}/s/status",
                           {"status": {"loadBalancer": {"ingress": [{"ip": "1.2.3.04", "ipMode": "VIP"}]}}})
    assert causes(e) == [("status.loadBalancer.ingress[0].ip", f'Invalid value: "1.2.3.04": {ZEROS}')]
    assert created["spec"]["loadBalancerSourceRanges"] == [" 10.0.0.0/8"]  # (trimmed only to be checked)


async def test_networking_and_discovery_fields(client: Client) -> None:
    block = {"cidr": "10.0.0.0/8", "except": ["10.1.0.0/16", "10.1.0.1/16", "11.0.0.0/16", "10.0.0.0/8"]}
    with pytest.raises(ApiError) as e:
        await client.create(POLICIES, {"metadata": {"name": "np"}, "spec": {
            "podSelector": {}, "ingress": [{"from": [{"ipBlock": block}, {"ipBlock": {"cidr": "010.0.0.0/8"}}]}]}})
    at = "spec.ingress[0].from"
    assert causes(e) == [
        (f"{at}[0].ipBlock.except[1]", 'Invalid value: "10.1.0.1/16": must not have bits set beyond the prefix length'),
        (f"{at}[0].ipBlock.except[2]", 'Invalid value: "11.0.0.0/16": must be a strict subset of `cidr`'),
        (f"{at}[0].ipBlock.except[3]", 'Invalid value: "10.0.0.0/8": must be a strict subset of `cidr`'),
        (f"{at}[1].ipBlock.cidr", 'Invalid value: "010.0.0.0/8": must not have leading 0s in IP or prefix length')]
    with pytest.raises(ApiError) as e:
        await client.create(SLICES, {"metadata": {"name": "es"}, "addressType": "IPv4",
                                     "endpoints": [{"addresses": ["10.0.0.1", "10.0.0.01"]}]})
    assert causes(e) == [("endpoints[0].addresses[1]", f'Invalid value: "10.0.0.01": {ZEROS}')]
    with pytest.raises(ApiError) as e:
        await client.create(NODES, {"metadata": {"name": "n"}, "spec": {"podCIDRs": ["10.244.0.1/24"]}})
    assert causes(e) == [("spec.podCIDRs[0]", 'Invalid value: "10.244.0.1/24": must not have bits set beyond the '
                                              "prefix length")]
    node = await client.create(NODES, {"metadata": {"name": "n"}, "spec": {"podCIDR": "fd00:0::/64"}})
    assert node["spec"]["podCIDRs"] == ["fd00:0::/64"]  # a legacy field: not canonical, still valid
    ing = await client.create(INGRESSES, {"metadata": {"name": "i"}, "spec": {
        "defaultBackend": {"service": {"name": "s", "port": {"number": 80}}}}})
    assert ing["metadata"]["name"] == "i"
    with pytest.raises(ApiError) as e:
        await client.patch(f"{INGRESSES}/i/status",
                           {"status": {"loadBalancer": {"ingress": [{"ip": "::ffff:1.2.3.4"}]}}})
    assert causes(e) == [("status.loadBalancer.ingress[0].ip", f'Invalid value: "::ffff:1.2.3.4": {MAPPED}')]


async def test_objects_stored_before_the_gate_keep_their_values(tmp_path: Path) -> None:
    """Ratcheting: an update may keep an old value (anywhere in its list), not add a new bad
    one; an Endpoints or EndpointSlice keeps its addresses only while they are unchanged."""
    app = create_app(Config(data_dir=tmp_path / "data", tls=False, scheduler=False))
    async with app.router.lifespan_context(app), Client.in_process(app.state.front) as c:
        store = app.state.front.kube.store
        meta = {"namespace": "default", "uid": "u", "creationTimestamp": "2020-01-01T00:00:00Z"}
        old: dict[str, dict[str, Any]] = {
            "endpoints": {"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "e", **meta},
                          "subsets": [{"addresses": [{"ip": "010.1.2.3"}],
                                       "ports": [{"port": 80, "protocol": "TCP"}]}]},
            "networkpolicies": {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
                                "metadata": {"name": "np", **meta},
                                "spec": {"podSelector": {}, "policyTypes": ["Egress"],
                                         "egress": [{"to": [{"ipBlock": {"cidr": "10.0.0.1/8"}}]}]}},
            "deployments": {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", **meta},
                            "spec": {"replicas": 1, "selector": {"matchLabels": {"a": "b"}}, "template": {
                                "metadata": {"labels": {"a": "b"}},
                                "spec": {"containers": [{"name": "c", "image": "nginx"}],
                                         "hostAliases": [{"ip": "::ffff:1.2.3.4", "hostnames": ["x"]}]}}}},
        }
        for plural, obj in old.items():
            await store.create(f"/registry/{plural}/default/{obj['metadata']['name']}".encode(), orjson.dumps(obj))
        labelled = {"metadata": {"labels": {"touched": "yes"}}}
        await c.patch(f"{ENDPOINTS}/e", labelled)
        with pytest.raises(ApiError) as e:  # a new address: every address is checked again
            await c.patch(f"{ENDPOINTS}/e", {"subsets": [{"addresses": [{"ip": "010.1.2.3"}, {"ip": "10.9.9.9"}],
                                                        "ports": [{"port": 80}]}]})
        assert causes(e) == [("subsets[0].addresses[0].ip", f'Invalid value: "010.1.2.3": {ZEROS}')]
        policy = await c.patch(f"{POLICIES}/np", {"spec": {"egress": [  # the old CIDR moved: kept
            {"to": [{"ipBlock": {"cidr": "192.168.0.0/16"}}, {"ipBlock": {"cidr": "10.0.0.1/8"}}]}]}})
        assert len(policy["spec"]["egress"][0]["to"]) == 2
        with pytest.raises(ApiError) as e:
            await c.patch(f"{POLICIES}/np", {"spec": {"egress": [{"to": [{"ipBlock": {"cidr": "10.0.0.2/8"}}]}]}})
        assert causes(e)[0][0] == "spec.egress[0].to[0].ipBlock.cidr"
        scaled = await c.patch(f"{DEPLOYMENTS}/d", {"spec": {"replicas": 2}})
        assert scaled["spec"]["template"]["spec"]["hostAliases"][0]["ip"] == "::ffff:1.2.3.4"
