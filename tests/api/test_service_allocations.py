"""Services' cluster IPs and node ports, as kube-apiserver's allocators give them: from the
service range (10.96.0.0/12) and the node port range (30000-32767), never twice (each
claimed in the store, as upstream's IPAddress objects, so not even by concurrent writes
through several processes), a requested one that is taken or out of range refused (422 in
the allocators' words), released with the Service, and still known after a restart."""

from __future__ import annotations

import asyncio
import ipaddress
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
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


async def test_a_requested_health_check_node_port_out_of_range_or_taken_is_refused(client: Client) -> None:
    """As upstream's allocHealthCheckNodePort, in its words, when the Service comes to need the
    port, after the ``nodePort``s; a 422 here where upstream's is a 500 (NewInternalError): bad
    input is never a 500 on this server."""
    local = {"type": "LoadBalancer", "externalTrafficPolicy": "Local"}
    out_of_range = "provided port is not in the valid range. The range of valid ports is 30000-32767"
    for port in (80, 40000):
        with pytest.raises(ApiError) as e:
            await client.create(SVCS, svc("hc", healthCheckNodePort=port, **local))
        assert (e.value.code, e.value.reason) == (422, "Invalid")
        assert f"spec.healthCheckNodePort: Invalid value: {port}: {out_of_range}" in e.value.message
    created = await client.create(SVCS, svc("hc", healthCheckNodePort=31001, **local))
    assert created["spec"]["healthCheckNodePort"] == 31001
    with pytest.raises(ApiError) as taken:
        await client.create(SVCS, svc("hc2", healthCheckNodePort=31001, **local))
    assert taken.value.code == 422 and \
        "spec.healthCheckNodePort: Invalid value: 31001: provided port is already allocated" in taken.value.message
    with pytest.raises(ApiError) as first:  # the node ports are allocated before it
        await client.create(SVCS, svc("hc2", healthCheckNodePort=80, ports=[{"port": 80, "nodePort": 31001}],
                                      **local))
    assert first.value.code == 422 and "spec.ports[0].nodePort: Invalid value: 31001: provided port is already " \
        "allocated" in first.value.message
    # an update that makes a Service need one asks the allocator too; one that keeps it does not
    await client.create(SVCS, svc("later", type="LoadBalancer"))
    with pytest.raises(ApiError) as update:
        await client.patch(f"{SVCS}/later", {"spec": {"externalTrafficPolicy": "Local", "healthCheckNodePort": 65000}})
    assert update.value.code == 422 and f"Invalid value: 65000: {out_of_range}" in update.value.message
    kept = await client.patch(f"{SVCS}/hc", {"metadata": {"labels": {"a": "b"}}})
    assert kept["spec"]["healthCheckNodePort"] == 31001
    await client.delete(f"{SVCS}/hc")  # released with its Service
    again = await client.create(SVCS, svc("hc2", healthCheckNodePort=31001, **local))
    assert again["spec"]["healthCheckNodePort"] == 31001


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


# -- claimed in the store: one Service per value, whatever runs concurrently -------------

async def _burst(url: str, bodies: list[dict[str, Any]]) -> list[tuple[int, dict[str, Any]]]:
    """``bodies`` created at once, each on a connection of its own (over ``--workers`` the
    kernel spreads them over the processes)."""
    limits = httpx.Limits(max_connections=len(bodies), max_keepalive_connections=0)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=60) as c:
        async def one(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
            r = await c.post("/api/v1/namespaces/default/services", json=body)
            return r.status_code, r.json()
        return await asyncio.gather(*(one(b) for b in bodies))


@pytest.mark.parametrize("workers", [1, 2])
def test_concurrent_creates_never_share_a_cluster_ip_or_node_port(tmp_path: Path, workers: int) -> None:
    """Many creates at once over a socket, on one process or two over one store: every
    allocated value is one Service's; of the creates asking for one value, one gets it
    and the others a 422 (kube-apiserver's allocators claim each value in storage)."""
    extra = ("--workers", str(workers)) if workers > 1 else ()
    with running(start_serve(tmp_path, tls=False, extra=extra)) as s:
        dynamic = [svc(f"d{i}", type="NodePort") for i in range(150)]
        same_ip = [svc(f"ip{i}", clusterIP="10.96.0.77") for i in range(15)]
        same_port = [svc(f"port{i}", type="NodePort", ports=[{"port": 80, "nodePort": 30077}]) for i in range(15)]
        answers = asyncio.run(_burst(s.url, dynamic + same_ip + same_port))
        made = [o for code, o in answers[:150] if code == 201]
        assert len(made) == 150, [o for code, o in answers[:150] if code != 201][:3]
        ips = [o["spec"]["clusterIP"] for o in made]
        ports = [o["spec"]["ports"][0]["nodePort"] for o in made]
        assert len(set(ips)) == 150 and len(set(ports)) == 150
        assert "10.96.0.77" not in ips and 30077 not in ports  # (the static bands: dynamic values come above)
        for wanted, field, start in (("10.96.0.77", "spec.clusterIPs", 150), ("30077", "spec.ports[0].nodePort", 165)):
            codes = sorted(code for code, _ in answers[start:start + 15])
            assert codes == [201] + [422] * 14, codes
            refused = next(o for code, o in answers[start:start + 15] if code == 422)
            assert refused["reason"] == "Invalid" and refused["details"]["causes"][0]["field"] == field
            assert "already allocated" in refused["message"] and wanted in refused["message"]
        # what the store holds agrees: listed, every value once
        listed = httpx.get(f"{s.url}/api/v1/services").json()["items"]
        all_ips = [o["spec"]["clusterIP"] for o in listed]
        all_ports = [p["nodePort"] for o in listed for p in o["spec"]["ports"] if p.get("nodePort")]
        assert len(all_ips) == len(set(all_ips)) == 150 + 2 + 1  # (and the kubernetes Service)
        assert len(all_ports) == len(set(all_ports)) == 151


async def test_a_failed_or_dry_run_write_claims_nothing(client: Client) -> None:
    """What a write that is refused after its claims (here: AlreadyExists) or that is only
    a dry run asked for is free for the next Service."""
    await client.create(SVCS, svc("a", clusterIP="10.96.0.30"))
    with pytest.raises(ApiError) as e:
        await client.create(SVCS, svc("a", type="NodePort", clusterIP="10.96.0.31",
                                      ports=[{"port": 80, "nodePort": 30031}]))
    assert e.value.code == 409
    dry = await client.create(SVCS, svc("dry", type="NodePort", clusterIP="10.96.0.32",
                                        ports=[{"port": 80, "nodePort": 30032}]), dryRun="All")
    assert dry["spec"]["clusterIP"] == "10.96.0.32"
    b = await client.create(SVCS, svc("b", type="NodePort", clusterIP="10.96.0.31",
                                      ports=[{"port": 80, "nodePort": 30031}]))
    c = await client.create(SVCS, svc("c", type="NodePort", clusterIP="10.96.0.32",
                                      ports=[{"port": 80, "nodePort": 30032}]))
    assert (b["spec"]["clusterIP"], c["spec"]["ports"][0]["nodePort"]) == ("10.96.0.31", 30032)
    # refused for one value (the port "b" holds): the other (a free IP) is not kept either
    with pytest.raises(ApiError) as port:
        await client.create(SVCS, svc("e", type="NodePort", clusterIP="10.96.0.33",
                                      ports=[{"port": 80, "nodePort": 30031}]))
    assert port.value.code == 422 and "provided port is already allocated" in port.value.message
    assert (await client.create(SVCS, svc("f", clusterIP="10.96.0.33")))["spec"]["clusterIP"] == "10.96.0.33"
    # a dry run still refuses what is taken, as the real write would
    with pytest.raises(ApiError) as taken:
        await client.create(SVCS, svc("d", clusterIP="10.96.0.31"), dryRun="All")
    assert taken.value.code == 422 and "provided IP is already allocated" in taken.value.message


async def test_released_on_delete_and_type_change_and_reused(client: Client) -> None:
    await client.create(SVCS, svc("lb", type="LoadBalancer", clusterIP="10.96.0.40",
                                  ports=[{"port": 80, "nodePort": 30040}]))
    await client.patch(f"{SVCS}/lb", {"spec": {"type": "ExternalName", "externalName": "example.com"}})
    # an ExternalName holds neither: both are free for others
    other = await client.create(SVCS, svc("other", type="NodePort", clusterIP="10.96.0.40",
                                          ports=[{"port": 80, "nodePort": 30040}]))
    assert other["spec"]["clusterIP"] == "10.96.0.40"
    # back from ExternalName: a new cluster IP is allocated, distinct
    back = await client.patch(f"{SVCS}/lb", {"spec": {"type": "ClusterIP", "externalName": None}})
    assert back["spec"]["clusterIP"] not in ("10.96.0.40", None)
    await client.delete(f"{SVCS}/other")
    again = await client.create(SVCS, svc("again", type="NodePort", clusterIP="10.96.0.40",
                                          ports=[{"port": 80, "nodePort": 30040}]))
    assert again["spec"]["ports"][0]["nodePort"] == 30040


async def test_the_repair_deletes_leaked_claims_and_claims_for_unclaimed_services(tmp_path: Path) -> None:
    """A claim left by a process that died before its Service was written goes once older
    than the grace period; a Service stored without its claims (older data) gets them
    (upstream's repair controllers)."""
    from controlplane.api.app import create_app
    from controlplane.config import Config

    app = create_app(Config(data_dir=tmp_path / "data", tls=False, scheduler=False))
    async with app.router.lifespan_context(app), Client.in_process(app.state.front) as c:
        kube = app.state.front.kube
        st = kube.store
        # a claim whose Service never came (the allocator's: an IPAddress without its label is left alone)
        leaked = {"apiVersion": "networking.k8s.io/v1", "kind": "IPAddress",
                  "metadata": {"name": "10.96.0.50", "creationTimestamp": "2020-01-01T00:00:00Z",
                               "labels": {"ipaddress.kubernetes.io/managed-by": "ipallocator.k8s.io"}},
                  "spec": {"parentRef": {"group": "", "resource": "services", "namespace": "default",
                                         "name": "ghost"}}}
        await st.create(b"/registry/ipaddresses/10.96.0.50", orjson.dumps(leaked))
        # a Service stored without claims
        stored = {"apiVersion": "v1", "kind": "Service",
                  "metadata": {"name": "old", "namespace": "default", "uid": "u-old",
                               "creationTimestamp": "2020-01-01T00:00:00Z"},
                  "spec": {"type": "NodePort", "clusterIP": "10.96.0.60", "clusterIPs": ["10.96.0.60"],
                           "ports": [{"port": 80, "protocol": "TCP", "targetPort": 80, "nodePort": 30060}]}}
        await st.create(b"/registry/services/default/old", orjson.dumps(stored))
        with pytest.raises(ApiError) as e:
            await c.create(SVCS, svc("x", clusterIP="10.96.0.50"))
        assert e.value.code == 422  # claimed, if by no one
        done = await kube.allocations.repair()
        assert done == {"created": 2, "repointed": 0, "deleted": 1, "duplicates": 0}
        x = await c.create(SVCS, svc("x", clusterIP="10.96.0.50"))
        assert x["spec"]["clusterIP"] == "10.96.0.50"
        claim = orjson.loads((await st.get(b"/registry/ipaddresses/10.96.0.50")).value)
        assert claim["kind"] == "IPAddress" and claim["spec"]["parentRef"] == {
            "group": "", "resource": "services", "namespace": "default", "name": "x"}
        assert claim["metadata"]["labels"]["ipaddress.kubernetes.io/managed-by"] == "ipallocator.k8s.io"
        for field, value in (("clusterIP", "10.96.0.60"), ("nodePort", 30060)):
            body = svc("y", clusterIP=value) if field == "clusterIP" else \
                svc("y", type="NodePort", ports=[{"port": 80, "nodePort": value}])
            with pytest.raises(ApiError) as taken:
                await c.create(SVCS, body)
            assert taken.value.code == 422 and "already allocated" in taken.value.message
        # a young claim no Service holds (a write in flight elsewhere) is left alone
        await st.create(b"/registry/servicenodeports/30070", orjson.dumps({
            "kind": "ServiceNodePort", "metadata": {"name": "30070", "creationTimestamp": _rfc3339_now()},
            "spec": {"parentRef": {"group": "", "resource": "services", "namespace": "default", "name": "z"}}}))
        assert (await kube.allocations.repair())["deleted"] == 0
        kube.allocations.leak_grace = 0.0
        assert (await kube.allocations.repair())["deleted"] == 1
        assert await st.get(b"/registry/servicenodeports/30070") is None


def _rfc3339_now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


async def test_server_side_apply_claims_and_releases_as_other_writes(client: Client) -> None:
    def applied(name: str, **spec: Any) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
                "spec": {"ports": [{"port": 80, "protocol": "TCP"}], **spec}}

    made = await client.patch(f"{SVCS}/ssa", applied("ssa", type="NodePort"), "apply", fieldManager="t")
    port = made["spec"]["ports"][0]["nodePort"]
    with pytest.raises(ApiError) as e:
        await client.patch(f"{SVCS}/ssa2", applied("ssa2", clusterIP=made["spec"]["clusterIP"]), "apply",
                           fieldManager="t")
    assert e.value.code == 422 and "provided IP is already allocated" in e.value.message
    await client.patch(f"{SVCS}/ssa", applied("ssa", type="ClusterIP"), "apply", fieldManager="t")
    other = await client.create(SVCS, svc("other", type="NodePort", ports=[{"port": 80, "nodePort": port}]))
    assert other["spec"]["ports"][0]["nodePort"] == port


async def test_node_ports_claimed_elsewhere_are_found_and_a_full_range_is_a_500(tmp_path: Path) -> None:
    """Claims this process never heard of (another process's, since its last repair) are
    collisions at the claim: the write picks again, reads the claims afresh when the picks
    keep colliding, and gets one of the ports still free; with none left, upstream's 500."""
    from controlplane.api.app import create_app
    from controlplane.config import Config

    app = create_app(Config(data_dir=tmp_path / "data", tls=False, scheduler=False))
    async with app.router.lifespan_context(app), Client.in_process(app.state.front) as c:
        st = app.state.front.kube.store
        free = {30001, 30500, 31000, 32000, 32767}
        claim = orjson.dumps({"kind": "ServiceNodePort", "metadata": {"creationTimestamp": _rfc3339_now()},
                              "spec": {"parentRef": {"group": "", "resource": "services", "namespace": "default",
                                                     "name": "elsewhere"}}})
        taken = [p for p in range(30000, 32768) if p not in free]
        for at in range(0, len(taken), 500):
            await asyncio.gather(*(st.create(f"/registry/servicenodeports/{p}".encode(), claim)
                                   for p in taken[at:at + 500]))
        got = set()
        for i in range(5):
            made = await c.create(SVCS, svc(f"n{i}", type="NodePort"))
            got.add(made["spec"]["ports"][0]["nodePort"])
        assert got == free
        with pytest.raises(ApiError) as full:
            await c.create(SVCS, svc("n5", type="NodePort"))
        assert full.value.code == 500 and "range is full" in full.value.message
        assert (await c.list(SVCS))["items"][-1]["metadata"]["name"] != "n5"


async def test_a_write_whose_claim_fails_leaves_none_of_its_other_claims(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The store failing one claim of a write (its node port) fails the write, and the claims
    made alongside (its cluster IP, written a little later) are taken back, not left to the
    repair: the IP is free for the next Service at once."""
    import store
    from controlplane.api.allocations import PORT_PREFIX
    from controlplane.api.app import create_app
    from controlplane.config import Config

    app = create_app(Config(data_dir=tmp_path / "data", tls=False, scheduler=False))
    async with app.router.lifespan_context(app), Client.in_process(app.state.front) as c:
        allocations = app.state.front.kube.allocations
        claim = allocations.claim

        async def flaky(key: bytes, owner: tuple[str, str]) -> int | None:
            if key.startswith(PORT_PREFIX):
                raise store.Unavailable("the store is away")
            await asyncio.sleep(0.05)
            revision: int | None = await claim(key, owner)
            return revision

        monkeypatch.setattr(allocations, "claim", flaky)
        with pytest.raises(ApiError) as e:
            await c.create(SVCS, svc("a", type="NodePort", clusterIP="10.96.0.90",
                                     ports=[{"port": 80, "nodePort": 30090}]))
        assert e.value.code >= 500
        monkeypatch.setattr(allocations, "claim", claim)
        await asyncio.sleep(0.2)
        assert await app.state.front.kube.store.get(b"/registry/ipaddresses/10.96.0.90") is None
        made = await c.create(SVCS, svc("b", clusterIP="10.96.0.90"))
        assert made["spec"]["clusterIP"] == "10.96.0.90"
