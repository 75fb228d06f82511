"""Services' cluster IPs and node ports, as kube-apiserver's allocators give them: from the
service range (10.96.0.0/12) and the node port range (30000-32767), never twice, a
requested one that is taken or out of range refused (422 in the allocators' words),
released with the Service, and still known after a restart (they are read from the store)."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes import config

from controlplane.client import ApiError, Client, resource_path
from tests.test_cli import running, start_serve

SVCS = resource_path("", "v1", "services", "default")


def svc(name: str, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"ports": [{"port": 80}], **spec}}


async def test_a_taken_or_foreign_cluster_ip_is_refused(client: Client) -> None:
    await client.create(SVCS, svc("a", clusterIP="10.96.0.10"))
    with pytest.raises(ApiError) as e:
        await client.create(resource_path("", "v1", "services", "kube-system"), svc("b", clusterIP="10.96.0.10"))
    assert e.value.code == 422
    assert e.value.message == ('Service "b" is invalid: spec.clusterIPs: Invalid value: []string{"10.96.0.10"}: '
                               "failed to allocate IP 10.96.0.10: provided IP is already allocated")
    with pytest.raises(ApiError) as kubernetes:  # the bootstrap Service holds the first address
        await client.create(SVCS, svc("k", clusterIP="10.96.0.1"))
    assert kubernetes.value.code == 422
    with pytest.raises(ApiError) as out:
        await client.create(SVCS, svc("c", clusterIP="1.2.3.4"))
    assert out.value.message == (
        'Service "c" is invalid: spec.clusterIPs: Invalid value: []string{"1.2.3.4"}: failed to allocate IP '
        "1.2.3.4: the provided IP (1.2.3.4) is not in the valid range. The range of valid IPs is 10.96.0.0/12")
    await client.delete(f"{SVCS}/a")  # released with its Service
    again = await client.create(SVCS, svc("b", clusterIP="10.96.0.10"))
    assert again["spec"]["clusterIPs"] == ["10.96.0.10"]


async def test_allocated_cluster_ips_are_distinct_and_above_the_static_band(client: Client) -> None:
    ips: set[ipaddress.IPv4Address] = set()
    for i in range(30):
        created = await client.create(SVCS, svc(f"s{i}"))
        ip = ipaddress.IPv4Address(created["spec"]["clusterIP"])
        assert ip in ipaddress.ip_network("10.96.0.0/12") and ip >= ipaddress.IPv4Address("10.96.1.0")
        ips.add(ip)
    assert len(ips) == 30


async def test_a_taken_or_foreign_node_port_is_refused(client: Client) -> None:
    await client.create(SVCS, svc("np", type="NodePort", ports=[{"port": 80, "nodePort": 30080}]))
    with pytest.raises(ApiError) as e:
        await client.create(SVCS, svc("np2", type="LoadBalancer", ports=[{"port": 80, "nodePort": 30080}]))
    assert e.value.code == 422
    assert e.value.message == ('Service "np2" is invalid: spec.ports[0].nodePort: Invalid value: 30080: '
                               "provided port is already allocated")
    with pytest.raises(ApiError) as out:
        await client.create(SVCS, svc("np3", type="NodePort", ports=[{"port": 80, "nodePort": 80}]))
    assert out.value.message == ('Service "np3" is invalid: spec.ports[0].nodePort: Invalid value: 80: provided '
                                 "port is not in the valid range. The range of valid ports is 30000-32767")
    # an update may not take it either; the Service's own port stays its own
    await client.create(SVCS, svc("cip"))
    with pytest.raises(ApiError) as taken:
        await client.patch(f"{SVCS}/cip", {"spec": {"type": "NodePort", "ports": [{"port": 80, "nodePort": 30080}]}})
    assert taken.value.code == 422 and "provided port is already allocated" in taken.value.message
    kept = await client.patch(f"{SVCS}/np", {"metadata": {"labels": {"a": "b"}}})
    assert kept["spec"]["ports"][0]["nodePort"] == 30080
    # back to ClusterIP: the port is released, and another Service may take it
    await client.patch(f"{SVCS}/np", {"spec": {"type": "ClusterIP"}})
    moved = await client.patch(f"{SVCS}/cip", {"spec": {"type": "NodePort",
                                                          "ports": [{"port": 80, "nodePort": 30080}]}})
    assert moved["spec"]["ports"][0]["nodePort"] == 30080


async def test_allocated_node_ports_avoid_the_taken_ones(client: Client) -> None:
    ports: set[int] = set()
    for i in range(20):
        created = await client.create(SVCS, svc(f"n{i}", type="NodePort", ports=[{"port": 80, "name": "a"},
                                                                                 {"port": 81, "name": "b"}]))
        ports.update(p["nodePort"] for p in created["spec"]["ports"])
    assert len(ports) == 40 and all(30086 <= p <= 32767 for p in ports)  # the dynamic band first (KEP-3668)


async def test_session_affinity_and_traffic_policy_defaults(client: Client) -> None:
    client_ip = await client.create(SVCS, svc("aff", sessionAffinity="ClientIP"))
    assert client_ip["spec"]["sessionAffinityConfig"] == {"clientIP": {"timeoutSeconds": 10800}}
    none = await client.create(SVCS, svc("noaff", sessionAffinityConfig={"clientIP": {"timeoutSeconds": 5}}))
    assert "sessionAffinityConfig" not in none["spec"]
    ext = await client.create(SVCS, {"metadata": {"name": "ext"},
                                     "spec": {"type": "ExternalName", "externalName": "example.com"}})
    assert "internalTrafficPolicy" not in ext["spec"] and ext["spec"]["sessionAffinity"] == "None"
    cip = await client.create(SVCS, svc("cip"))
    assert cip["spec"]["internalTrafficPolicy"] == "Cluster"
    became = await client.patch(f"{SVCS}/cip", {"spec": {"type": "ExternalName", "externalName": "example.com"}})
    assert "internalTrafficPolicy" not in became["spec"] and "clusterIP" not in became["spec"]


# -- over a socket, with the official client, across a restart --------------------------

def _core(kubeconfig: Path) -> Iterator[Any]:
    api = config.new_client_from_config(config_file=str(kubeconfig))  # type: ignore[no-untyped-call]
    try:
        yield k8s.CoreV1Api(api)
    finally:
        api.close()


def test_allocations_survive_a_restart(tmp_path: Path) -> None:
    body = k8s.V1Service(metadata=k8s.V1ObjectMeta(name="web"), spec=k8s.V1ServiceSpec(
        type="NodePort", cluster_ip="10.96.0.20", ports=[k8s.V1ServicePort(port=80, node_port=30020)]))
    with running(start_serve(tmp_path)) as first:
        for core in _core(first.kubeconfig):
            created = core.create_namespaced_service("default", body)
            assert created.spec.cluster_ips == ["10.96.0.20"] and created.spec.ports[0].node_port == 30020
        first.stop()
    with running(start_serve(tmp_path, run=1, port=first.port)) as second:
        for core in _core(second.kubeconfig):
            assert body.metadata is not None and body.spec is not None
            body.metadata.name = "web2"
            with pytest.raises(k8s.ApiException) as e:
                core.create_namespaced_service("default", body)
            assert e.value.status == 422
            assert "failed to allocate IP 10.96.0.20: provided IP is already allocated" in str(e.value.body)
            body.spec.cluster_ip = None
            with pytest.raises(k8s.ApiException) as port:
                core.create_namespaced_service("default", body)
            assert port.value.status == 422
            assert "spec.ports[0].nodePort: Invalid value: 30020: provided port is already allocated" in str(
                port.value.body)
            core.delete_namespaced_service("web", "default")
            again = core.create_namespaced_service("default", body)
            assert again.spec.ports[0].node_port == 30020
