"""The EndpointSlice and Endpoints controllers (controllers/endpoints.py), inside a server with its
scheduler and four simulated nodes (which give pods their IPs and readiness)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from controlplane.api.app import create_app
from controlplane.client import ApiError, Client
from controlplane.config import Config
from controlplane.controllers.endpoints import MANAGED_BY, MAX_ENDPOINTS_PER_SLICE, SERVICE_NAME, EndpointsController
from tests.controllers.helpers import until

SERVICES = "/api/v1/namespaces/default/services"
PODS = "/api/v1/namespaces/default/pods"
SLICES = "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices"
ENDPOINTS = "/api/v1/namespaces/default/endpoints"


def pod(name: str, app: str, **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"app": app, **labels}}, "spec": {
        "terminationGracePeriodSeconds": 0,
        "containers": [{"name": "c", "image": "nginx", "ports": [{"name": "http", "containerPort": 8080}]}]}}


async def slices_of(c: Client, service: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = (await c.list(SLICES, labelSelector=f"{SERVICE_NAME}={service}"))["items"]
    return items


async def addresses(c: Client, service: str, ready: bool | None = True) -> set[str]:
    return {a for es in await slices_of(c, service) for e in es.get("endpoints") or ()
            if ready is None or e["conditions"]["ready"] is ready for a in e["addresses"]}


async def _endpoints_with(c: Client, service: str, n: int) -> dict[str, Any] | None:
    try:
        ep = await c.get(f"{ENDPOINTS}/{service}")
    except ApiError:
        return None
    subsets = ep.get("subsets") or []
    return ep if subsets and len(subsets[0].get("addresses") or ()) == n else None


async def test_a_service_gets_slices_and_endpoints_of_its_ready_pods(client: Client) -> None:
    await client.create(SERVICES, {"metadata": {"name": "web"}, "spec": {
        "selector": {"app": "web"}, "ports": [{"name": "http", "port": 80, "targetPort": "http"}]}})
    for i in range(3):
        await client.create(PODS, pod(f"web-{i}", "web"))
    await client.create(PODS, pod("other", "db"))
    ips = await until(lambda: _n_addresses(client, "web", 3))
    es = (await slices_of(client, "web"))[0]
    assert es["addressType"] == "IPv4" and es["metadata"]["labels"][MANAGED_BY] == "endpointslice-controller.k8s.io"
    assert es["ports"] == [{"name": "http", "port": 8080, "protocol": "TCP"}]  # the named port, resolved
    assert es["metadata"]["ownerReferences"][0]["kind"] == "Service"
    pods = {p["status"]["podIP"]: p for p in (await client.list(PODS, labelSelector="app=web"))["items"]}
    assert ips == set(pods)
    endpoint = next(e for e in es["endpoints"] if e["addresses"] == [next(iter(ips))])
    assert endpoint["targetRef"]["kind"] == "Pod" and endpoint["nodeName"] == \
        pods[endpoint["addresses"][0]]["spec"]["nodeName"]
    # the Endpoints object is written after the slices: wait for it, then check it
    ep = await until(lambda: _endpoints_with(client, "web", len(ips)))
    assert {a["ip"] for a in ep["subsets"][0]["addresses"]} == ips
    assert ep["subsets"][0]["ports"] == [{"name": "http", "port": 8080, "protocol": "TCP"}]
    assert ep["metadata"]["labels"]["endpoints.kubernetes.io/managed-by"] == "endpoint-controller"  # as upstream's
    # a pod leaving the selector leaves the endpoints
    await client.patch(f"{PODS}/web-0", {"metadata": {"labels": {"app": "gone"}}})
    await until(lambda: _n_addresses(client, "web", 2))
    # a deleted service takes its slices and Endpoints along
    await client.delete(f"{SERVICES}/web")
    await until(lambda: _no_slices(client, "web"))

    async def endpoints_gone() -> bool:  # deleted after the slices, by a write of its own
        try:
            await client.get(f"{ENDPOINTS}/web")
        except ApiError as e:
            return e.code == 404
        return False

    await until(endpoints_gone)


async def _n_addresses(c: Client, service: str, n: int) -> set[str] | None:
    got = await addresses(c, service)
    return got if len(got) == n else None


async def _no_slices(c: Client, service: str) -> bool:
    return not await slices_of(c, service)


async def test_a_selectorless_service_is_left_alone_and_an_empty_one_keeps_one_slice(client: Client) -> None:
    await client.create(SERVICES, {"metadata": {"name": "manual"}, "spec": {"ports": [{"port": 80}]}})
    await client.create(SERVICES, {"metadata": {"name": "nobody"}, "spec": {
        "selector": {"app": "none"}, "ports": [{"port": 80}]}})
    await until(lambda: slices_of(client, "nobody"))
    assert (await slices_of(client, "nobody"))[0]["endpoints"] is None or \
        (await slices_of(client, "nobody"))[0]["endpoints"] == []
    assert await slices_of(client, "manual") == []


async def test_a_sync_before_the_informer_shows_its_last_slice_writes_makes_no_second_slice(tmp_path: Path) -> None:
    """Two syncs of a Service in a row, the second before the slice informer shows the slice the
    first created (a loaded machine: the pod events that requeue it come faster than the slice's
    watch event): the second waits for it, as upstream's EndpointSliceTracker makes a sync of
    stale slices wait, instead of creating a second slice of the same endpoints; the slice's
    arrival brings the Service back. A slice it wrote that someone else deleted before its next
    sync (both events seen by then) holds nothing back."""
    config = Config(data_dir=tmp_path / "data", tls=False, nodes=0,
                    controllers=("*", "-endpointslice-controller", "-endpoints-controller"))
    app = create_app(config)
    async with app.router.lifespan_context(app):
        client = Client.in_process(app.state.front)
        ctl = EndpointsController(client)
        ctl.writes_endpoints = False
        running = [asyncio.create_task(i.run()) for i in (ctl.services, ctl.pods, ctl.nodes, ctl.endpoints)]
        try:
            for i in (ctl.services, ctl.pods, ctl.nodes, ctl.endpoints):
                await i.synced.wait()
            await client.create(SERVICES, {"metadata": {"name": "web"}, "spec": {
                "selector": {"app": "web"}, "ports": [{"port": 80}]}})
            await until(lambda: _holds(ctl, "default/web"))
            await _taken(ctl, "default/web")  # (the Services' adds: these syncs are called here)
            await ctl.sync("default/web")  # the slice informer is not running yet: it shows nothing
            await ctl.sync("default/web")
            made = await slices_of(client, "web")
            assert len(made) == 1
            running.append(asyncio.create_task(ctl.slices.run()))
            await ctl.slices.synced.wait()
            await until(lambda: _queued(ctl))  # the slice's add requeued the waiting Service
            await _taken(ctl, "default/web")
            await ctl.sync("default/web")  # (seen now: nothing to write)
            assert await slices_of(client, "web") == made

            await client.delete(f"{SLICES}/{made[0]['metadata']['name']}")  # by someone else
            await until(lambda: _queued(ctl))
            await _taken(ctl, "default/web")
            await ctl.sync("default/web")  # made again
            [again] = await slices_of(client, "web")
            await client.delete(f"{SLICES}/{again['metadata']['name']}")  # and again, before it is seen
            await until(lambda: _queued(ctl))  # (its deletion's event: its add's came first)
            await _taken(ctl, "default/web")
            await ctl.sync("default/web")
            assert len(await slices_of(client, "web")) == 1
        finally:
            for t in running:
                t.cancel()
            await asyncio.gather(*running, return_exceptions=True)


async def _holds(ctl: EndpointsController, key: str) -> bool:
    return key in ctl.services.items


async def _queued(ctl: EndpointsController) -> bool:
    return not ctl.queue.empty()


async def _taken(ctl: EndpointsController, key: str) -> None:
    """Take what the controller's queue holds, ``key`` among it, off it (its workers do not run here)."""
    taken = set()
    while not ctl.queue.empty():
        taken.add(got := await ctl.queue.get())
        ctl.queue.done(got)
    assert key in taken, taken


async def test_more_pods_than_a_slice_holds_spread_over_slices(client: Client) -> None:
    n = MAX_ENDPOINTS_PER_SLICE + 5
    await client.create(SERVICES, {"metadata": {"name": "many"}, "spec": {
        "selector": {"app": "many"}, "ports": [{"port": 80, "targetPort": 8080}]}})
    for i in range(n):
        await client.create(PODS, pod(f"many-{i}", "many"))
    await until(lambda: _n_addresses(client, "many", n), timeout=60)
    sizes = sorted(len(es["endpoints"]) for es in await slices_of(client, "many"))
    assert sizes == [5, MAX_ENDPOINTS_PER_SLICE]


async def test_endpoints_carry_zones_hostnames_and_the_headless_label(client: Client) -> None:
    await client.create(SERVICES, {"metadata": {"name": "db"}, "spec": {
        "clusterIP": "None", "selector": {"app": "db"}, "ports": [{"port": 5432}]}})
    for i in range(3):
        body = pod(f"db-{i}", "db")
        body["spec"].update(hostname=f"db-{i}", subdomain="db")
        await client.create(PODS, body)
    await until(lambda: _n_addresses(client, "db", 3))
    nodes = {n["metadata"]["name"]: n for n in (await client.list("/api/v1/nodes"))["items"]}
    es = (await slices_of(client, "db"))[0]
    assert es["metadata"]["labels"]["service.kubernetes.io/headless"] == ""
    for e in es["endpoints"]:  # the zone of its node, the hostname its pod asked for
        assert e["zone"] == nodes[e["nodeName"]]["metadata"]["labels"]["topology.kubernetes.io/zone"]
        assert e["hostname"] == e["targetRef"]["name"]
    ep = await until(lambda: _endpoints_with(client, "db", 3))
    assert ep["metadata"]["labels"]["service.kubernetes.io/headless"] == ""
    ips = [a["ip"] for a in ep["subsets"][0]["addresses"]]
    assert ips == sorted(ips)  # as upstream's RepackSubsets orders them
    assert {a["hostname"] for a in ep["subsets"][0]["addresses"]} == {"db-0", "db-1", "db-2"}


async def test_pods_joining_and_leaving_and_a_changed_selector_follow_the_selection(client: Client) -> None:
    """Each service keeps the set of pods it selects, with every pod event and selector change:
    a sync walks its own pods, not its namespace's."""
    await client.create(SERVICES, {"metadata": {"name": "api"}, "spec": {
        "selector": {"app": "api"}, "ports": [{"port": 80, "targetPort": 8080}]}})
    await client.create(PODS, pod("a-0", "api"))
    await client.create(PODS, pod("b-0", "batch"))
    await until(lambda: _n_addresses(client, "api", 1))
    await client.patch(f"{PODS}/b-0", {"metadata": {"labels": {"app": "api"}}})  # joins
    await until(lambda: _n_addresses(client, "api", 2))
    await client.patch(f"{SERVICES}/api", {"spec": {"selector": {"app": "batch"}}})  # selects none now

    async def none() -> bool:
        return not await addresses(client, "api", ready=None)
    await until(none)
    await client.patch(f"{SERVICES}/api", {"spec": {"selector": {"app": "api"}}})
    await until(lambda: _n_addresses(client, "api", 2))
    await client.delete(f"{PODS}/a-0", {"gracePeriodSeconds": 0})
    await until(lambda: _n_addresses(client, "api", 1))


async def test_endpoints_deleted_by_someone_else_are_written_again(client: Client) -> None:
    """The controller keeps the Endpoints from its informer (upstream's lister): one deleted
    behind its back is written again, and an unchanged one is not rewritten."""
    await client.create(SERVICES, {"metadata": {"name": "api"}, "spec": {
        "selector": {"app": "api"}, "ports": [{"port": 80, "targetPort": 8080}]}})
    await client.create(PODS, pod("api-0", "api"))
    first = await until(lambda: _endpoints_with(client, "api", 1))
    await client.delete(f"{ENDPOINTS}/api")
    again = await until(lambda: _endpoints_with(client, "api", 1))
    assert again["metadata"]["uid"] != first["metadata"]["uid"]
    assert again["subsets"] == first["subsets"]
