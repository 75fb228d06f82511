"""networking.k8s.io/v1 ServiceCIDR and IPAddress, as kube-apiserver 1.33+ serves them: the
default ServiceCIDR ``kubernetes`` (Ready), an IPAddress per allocated cluster IP, made and
deleted with its Service, one made by hand reserving its address, ServiceCIDRs of a user's
extending the ranges (not while being deleted), both types validated in upstream's words,
and their ``kubectl get`` columns."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from controlplane.api.app import create_app
from controlplane.api.tables import as_table
from controlplane.client import ApiError, Client, resource_path
from controlplane.config import Config

SVCS = resource_path("", "v1", "services", "default")
CIDRS = resource_path("networking.k8s.io", "v1", "servicecidrs")
IPS = resource_path("networking.k8s.io", "v1", "ipaddresses")


def svc(name: str, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"ports": [{"port": 80}], **spec}}


def ip_address(ip: str, **ref: str) -> dict[str, Any]:
    return {"metadata": {"name": ip}, "spec": {"parentRef": ref}}


async def invalid(c: Client, path: str, body: dict[str, Any], update: bool = False) -> str:
    with pytest.raises(ApiError) as e:
        await (c.update(path, body) if update else c.create(path, body))
    assert e.value.code == 422 and e.value.reason == "Invalid", e.value.message
    return e.value.message


async def test_the_default_service_cidr_is_ready_from_the_start(client: Client) -> None:
    sc = await client.get(f"{CIDRS}/kubernetes")
    assert sc["spec"] == {"cidrs": ["10.96.0.0/12"]}
    assert sc["metadata"]["finalizers"] == ["networking.k8s.io/service-cidr-finalizer"]
    [ready] = sc["status"]["conditions"]
    assert (ready["type"], ready["status"], ready["message"]) == \
        ("Ready", "True", "Kubernetes default Service CIDR is ready")


async def test_an_ip_address_per_cluster_ip_made_and_deleted_with_its_service(client: Client) -> None:
    kubernetes = await client.get(f"{IPS}/10.96.0.1")  # the bootstrap Service's
    assert kubernetes["spec"]["parentRef"] == {"group": "", "resource": "services", "namespace": "default",
                                               "name": "kubernetes"}
    created = await client.create(SVCS, svc("web"))
    ip = created["spec"]["clusterIP"]
    got = await client.get(f"{IPS}/{ip}")
    assert got["metadata"]["labels"] == {"ipaddress.kubernetes.io/ip-family": "IPv4",
                                         "ipaddress.kubernetes.io/managed-by": "ipallocator.k8s.io"}
    assert got["spec"]["parentRef"] == {"group": "", "resource": "services", "namespace": "default", "name": "web"}
    headless = await client.create(SVCS, svc("headless", clusterIP="None"))
    listed = {i["metadata"]["name"] for i in (await client.list(IPS))["items"]}
    assert listed == {"10.96.0.1", ip} and headless["spec"]["clusterIPs"] == ["None"]
    await client.delete(f"{SVCS}/web")
    with pytest.raises(ApiError) as e:
        await client.get(f"{IPS}/{ip}")
    assert e.value.code == 404


async def test_an_ip_address_made_by_hand_reserves_its_address(client: Client) -> None:
    await client.create(IPS, ip_address("10.96.0.20", group="gateway.networking.k8s.io", resource="gateways",
                                        namespace="default", name="gw"))
    message = await invalid(client, SVCS, svc("b", clusterIP="10.96.0.20"))
    assert message == ('Service "b" is invalid: spec.clusterIPs: Invalid value: []string{"10.96.0.20"}: '
                       "failed to allocate IP 10.96.0.20: provided IP is already allocated")
    # even one naming the Service that asks (the allocator takes only what it made)
    await client.create(IPS, ip_address("10.96.0.21", resource="services", namespace="default", name="c"))
    assert "provided IP is already allocated" in await invalid(client, SVCS, svc("c", clusterIP="10.96.0.21"))
    await client.delete(f"{IPS}/10.96.0.20")
    assert (await client.create(SVCS, svc("b", clusterIP="10.96.0.20")))["spec"]["clusterIP"] == "10.96.0.20"


async def test_a_users_service_cidr_extends_the_ranges_until_it_is_deleted(client: Client) -> None:
    message = await invalid(client, SVCS, svc("a", clusterIP="10.200.0.5"))
    assert "The range of valid IPs is 10.96.0.0/12" in message
    await client.create(CIDRS, {"metadata": {"name": "extra"}, "spec": {"cidrs": ["10.200.0.0/24"]}})
    a = await client.create(SVCS, svc("a", clusterIP="10.200.0.5"))
    assert a["spec"]["clusterIPs"] == ["10.200.0.5"]
    assert (await client.get(f"{IPS}/10.200.0.5"))["spec"]["parentRef"]["name"] == "a"
    # the network and broadcast addresses are no Service's
    assert "not in the valid range" in await invalid(client, SVCS, svc("n", clusterIP="10.200.0.255"))
    # being deleted (held by its finalizer): no new IPs from it; those it holds are still released
    await client.patch(f"{CIDRS}/extra", {"metadata": {"finalizers": ["example.com/hold"]}})
    await client.delete(f"{CIDRS}/extra")
    assert (await client.get(f"{CIDRS}/extra"))["metadata"]["deletionTimestamp"]  # (consistent: the cache has it)
    assert "not in the valid range" in await invalid(client, SVCS, svc("b", clusterIP="10.200.0.6"))
    await client.delete(f"{SVCS}/a")
    with pytest.raises(ApiError) as e:
        await client.get(f"{IPS}/10.200.0.5")
    assert e.value.code == 404


async def test_a_service_cidrs_status_is_written_as_its_strategy_leaves_it(client: Client) -> None:
    """Upstream's PrepareForCreate and PrepareForUpdate change nothing: a create or an update
    of the object itself writes the status it carries; a server-side apply does not (the
    status is a reset field); ``/status`` writes only the status."""
    ready = {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z", "reason": "Given",
             "message": "as sent"}
    created = await client.create(CIDRS, {"metadata": {"name": "given"}, "spec": {"cidrs": ["10.201.0.0/24"]},
                                          "status": {"conditions": [ready]}})
    assert created["status"] == {"conditions": [ready]}
    assert (await client.get(f"{CIDRS}/given"))["status"] == {"conditions": [ready]}
    changed = {**ready, "status": "False", "reason": "Changed"}
    updated = await client.update(f"{CIDRS}/given", {**created, "status": {"conditions": [changed]}})
    assert updated["status"] == {"conditions": [changed]}
    applied = await client.patch(f"{CIDRS}/given", {
        "apiVersion": "networking.k8s.io/v1", "kind": "ServiceCIDR", "metadata": {"name": "given"},
        "spec": {"cidrs": ["10.201.0.0/24"]}, "status": {"conditions": [ready]}}, patch_type="apply",
        fieldManager="me")
    assert applied["status"] == {"conditions": [changed]}
    new = await client.patch(f"{CIDRS}/applied", {
        "apiVersion": "networking.k8s.io/v1", "kind": "ServiceCIDR", "metadata": {"name": "applied"},
        "spec": {"cidrs": ["10.202.0.0/24"]}, "status": {"conditions": [ready]}}, patch_type="apply",
        fieldManager="me")
    assert not new.get("status")


async def test_ip_addresses_are_validated_as_upstream(client: Client) -> None:
    ref = {"resource": "services", "namespace": "default", "name": "x"}
    for name, problem in (("10.96.0.010", "must not have leading 0s"),
                          ("2001:DB8::1", 'must be in canonical form ("2001:db8::1")'),
                          ("::ffff:10.0.0.1", "must not be an IPv4-mapped IPv6 address"),
                          ("web", "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)")):
        assert await invalid(client, IPS, ip_address(name, **ref)) == \
            f'IPAddress.networking.k8s.io "{name}" is invalid: metadata.name: Invalid value: "{name}": {problem}'
    assert await invalid(client, IPS, ip_address("10.96.0.30", resource="", name="a/b", namespace="..")) == (
        'IPAddress.networking.k8s.io "10.96.0.30" is invalid: [spec.parentRef.resource: Required value, '
        "spec.parentRef.name: Invalid value: \"a/b\": may not contain '/', "
        "spec.parentRef.namespace: Invalid value: \"..\": may not be '..']")
    assert "spec.parentRef: Required value" in await invalid(client, IPS, {"metadata": {"name": "10.96.0.30"},
                                                                          "spec": {}})
    made = await client.create(IPS, ip_address("2001:db8::1", **ref))
    assert await invalid(client, f"{IPS}/2001:db8::1", {**made, "spec": {"parentRef": {**ref, "name": "y"}}},
                         update=True) == (
        'IPAddress.networking.k8s.io "2001:db8::1" is invalid: spec.parentRef: Invalid value: '
        '{"Group":"","Resource":"services","Namespace":"default","Name":"y"}: field is immutable')
    assert await invalid(client, f"{IPS}/2001:db8::1", {**made, "spec": {"parentRef": {**ref, "name": ""}}},
                         update=True) == (  # validated as at create, then held to the old one
        'IPAddress.networking.k8s.io "2001:db8::1" is invalid: [spec.parentRef.name: Required value, '
        'spec.parentRef: Invalid value: {"Group":"","Resource":"services","Namespace":"default","Name":""}: '
        "field is immutable]")


async def test_an_ip_address_is_named_by_its_generate_name_as_it_is(client: Client) -> None:
    """Upstream's IPAddress strategy generates names with a no-op generator: the name is the
    generateName, and a second create of it is a 409."""
    body = {"metadata": {"generateName": "10.96.0.60"},
            "spec": {"parentRef": {"resource": "services", "namespace": "default", "name": "x"}}}
    assert (await client.create(IPS, body))["metadata"]["name"] == "10.96.0.60"
    with pytest.raises(ApiError) as e:
        await client.create(IPS, body)
    assert (e.value.code, e.value.reason, e.value.message) == \
        (409, "AlreadyExists", 'ipaddresses.networking.k8s.io "10.96.0.60" already exists')


async def test_service_cidrs_are_validated_as_upstream(client: Client) -> None:
    def body(*cidrs: str) -> dict[str, Any]:
        return {"metadata": {"name": "x"}, "spec": {"cidrs": list(cidrs)}}

    prefix = 'ServiceCIDR.networking.k8s.io "x" is invalid: '
    assert await invalid(client, CIDRS, body()) == prefix + "spec.cidrs: Required value: at least one CIDR required"
    assert await invalid(client, CIDRS, body("10.0.0.1/24", "fd00::/064")) == prefix + (
        '[spec.cidrs[0]: Invalid value: "10.0.0.1/24": must not have bits set beyond the prefix length, '
        'spec.cidrs[1]: Invalid value: "fd00::/064": must not have leading 0s in IP or prefix length]')
    assert await invalid(client, CIDRS, body("10.0.0.0/24", "10.1.0.0/24")) == prefix + (
        'spec.cidrs: Invalid value: ["10.0.0.0/24","10.1.0.0/24"]: may specify no more than one IP for each IP '
        "family, i.e 192.168.0.0/24 and 2001:db8::/64")
    assert await invalid(client, CIDRS, body("10.0.0.0/24", "fd00::/64", "10.1.0.0/24")) == prefix + (
        'spec.cidrs: Invalid value: {"CIDRs":["10.0.0.0/24","fd00::/64","10.1.0.0/24"]}: may only hold up to 2 '
        "values")
    assert await invalid(client, CIDRS, body("FD00::/64")) == prefix + \
        'spec.cidrs[0]: Invalid value: "FD00::/64": must be in canonical form ("fd00::/64")'
    made = await client.create(CIDRS, body("10.0.0.0/24"))
    assert await invalid(client, f"{CIDRS}/x", {**made, "spec": {"cidrs": ["10.1.0.0/24"]}}, update=True) == \
        prefix + 'spec.cidrs[0]: Invalid value: "10.1.0.0/24": field is immutable'
    # single- to dual-stack: a second family may be added
    dual = await client.update(f"{CIDRS}/x", {**made, "spec": {"cidrs": ["10.0.0.0/24", "fd00::/64"]}})
    assert dual["spec"]["cidrs"] == ["10.0.0.0/24", "fd00::/64"]
    assert await invalid(client, f"{CIDRS}/x", {**dual, "spec": {"cidrs": ["10.0.0.0/24"]}}, update=True) == \
        prefix + 'spec.cidrs: Invalid value: ["10.0.0.0/24"]: field is immutable'


async def test_the_tables_have_upstreams_columns(client: Client) -> None:
    await client.create(IPS, ip_address("10.96.0.40", group="gateway.networking.k8s.io", resource="Gateways",
                                        name="gw"))
    cidrs = as_table("servicecidrs", (await client.list(CIDRS))["items"], None)
    assert [c["name"] for c in cidrs["columnDefinitions"]] == ["Name", "CIDRs", "Age"]
    assert cidrs["rows"][0]["cells"][:2] == ["kubernetes", "10.96.0.0/12"]
    ips = as_table("ipaddresses", (await client.list(IPS))["items"], None)
    assert [c["name"] for c in ips["columnDefinitions"]] == ["Name", "ParentRef"]
    assert sorted(r["cells"] for r in ips["rows"]) == [["10.96.0.1", "services/default/kubernetes"],
                                                       ["10.96.0.40", "gateways.gateway.networking.k8s.io/gw"]]


async def test_the_repair_leaves_ip_addresses_it_did_not_make(tmp_path: Path) -> None:
    """An IPAddress without the allocator's label is its maker's, however old and whatever it
    names (upstream's RepairIPAddress skips it); a leaked one of the allocator's goes."""
    app = create_app(Config(data_dir=tmp_path / "data", tls=False, scheduler=False))
    async with app.router.lifespan_context(app), Client.in_process(app.state.front) as c:
        kube = app.state.front.kube
        made = ip_address("10.96.0.50", resource="services", namespace="default", name="gone")
        made["metadata"]["creationTimestamp"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 3600))
        st = kube.store
        await st.create(b"/registry/ipaddresses/10.96.0.50", orjson.dumps(made))
        managed = {**made, "metadata": {**made["metadata"], "name": "10.96.0.51", "labels": {
            "ipaddress.kubernetes.io/managed-by": "ipallocator.k8s.io"}}}
        await st.create(b"/registry/ipaddresses/10.96.0.51", orjson.dumps(managed))
        done = await kube.allocations.repair()
        assert done["deleted"] == 1
        assert await st.get(b"/registry/ipaddresses/10.96.0.50") is not None
        assert await st.get(b"/registry/ipaddresses/10.96.0.51") is None
        assert (await c.get(f"{IPS}/10.96.0.50"))["spec"]["parentRef"]["name"] == "gone"
