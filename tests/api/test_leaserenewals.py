"""LeaseRenewal (controlplane/api/leaserenewals.py): many Leases renewed in one request,
each as the kubelet's PUT would renew it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from controlplane.client import ApiError, Client, resource_path

LEASES = resource_path("coordination.k8s.io", "v1", "leases", "kube-node-lease")
RENEWALS = resource_path("nodes.controlplane.dev", "v1alpha1", "leaserenewals", "kube-node-lease")
T0, T1 = "2026-12-02T01:00:00.000000Z", "2026-12-02T01:00:10.123456Z"


async def _leases(client: Client, names: list[str], manager: str = "kubelet") -> dict[str, dict[str, Any]]:
    """(kube-node-lease is one of the namespaces the server starts with)"""
    out = {}
    for name in names:
        out[name] = await client.create(LEASES, {"metadata": {"name": name}, "spec": {
            "holderIdentity": name, "leaseDurationSeconds": 40, "renewTime": T0}}, fieldManager=manager)
    return out


async def test_each_named_lease_is_renewed_with_its_own_revision_and_event(client: Client) -> None:
    before = await _leases(client, ["n1", "n2", "n3"])
    listed = await client.list(LEASES)
    events: list[Any] = []

    async def watch() -> None:
        async for ev in client.watch(LEASES, resource_version=listed["metadata"]["resourceVersion"]):
            events.append(ev)
            if len(events) == 2:
                return

    watcher = asyncio.create_task(watch())
    answer = await client.create(RENEWALS, {"spec": {"renewTime": T1, "leases": ["n1", "n3", "gone", "n1"]}},
                                 fieldManager="kubelet")
    assert answer["kind"] == "LeaseRenewal" and answer["status"] == {"renewed": 2, "notFound": ["gone"]}
    await asyncio.wait_for(watcher, 5)
    assert [(e.type, e.object["metadata"]["name"]) for e in events] == [("MODIFIED", "n1"), ("MODIFIED", "n3")]
    revisions = set()
    for name in ("n1", "n3"):
        got = await client.get(f"{LEASES}/{name}")
        old = before[name]
        assert got["spec"] == {**old["spec"], "renewTime": T1}  # nothing else of the spec moved
        assert got["metadata"]["uid"] == old["metadata"]["uid"]
        assert int(got["metadata"]["resourceVersion"]) > int(old["metadata"]["resourceVersion"])
        revisions.add(got["metadata"]["resourceVersion"])
        [entry] = got["metadata"]["managedFields"]
        assert entry["manager"] == "kubelet" and entry["fieldsV1"] == old["metadata"]["managedFields"][0]["fieldsV1"]
        assert entry["time"] >= old["metadata"]["managedFields"][0]["time"]
        assert any(e.object == got for e in events)  # the event carries the stored version
    assert len(revisions) == 2
    untouched = await client.get(f"{LEASES}/n2")
    assert untouched["metadata"]["resourceVersion"] == before["n2"]["metadata"]["resourceVersion"]


async def test_renewal_equals_the_put_it_replaces(client: Client) -> None:
    """The stored Lease after a renewal is the one a PUT of the new renewTime stores."""
    await _leases(client, ["bulk", "put"])
    await client.create(RENEWALS, {"spec": {"renewTime": T1, "leases": ["bulk"]}}, fieldManager="kubelet")
    put = await client.get(f"{LEASES}/put")
    put["spec"]["renewTime"] = T1
    await client.update(f"{LEASES}/put", put, fieldManager="kubelet")
    bulk, put = await client.get(f"{LEASES}/bulk"), await client.get(f"{LEASES}/put")

    def comparable(lease: dict[str, Any]) -> dict[str, Any]:
        meta = {k: v for k, v in lease["metadata"].items() if k not in ("name", "uid", "resourceVersion",
                                                                         "creationTimestamp")}
        for e in meta["managedFields"]:
            e.pop("time")
        return {**lease, "metadata": meta, "spec": {**lease["spec"], "holderIdentity": ""}}

    assert comparable(bulk) == comparable(put)


async def test_another_managers_renewal_takes_the_field_as_an_update_would(client: Client) -> None:
    await _leases(client, ["n1"], manager="kubelet")
    await client.create(RENEWALS, {"spec": {"renewTime": T1, "leases": ["n1"]}}, fieldManager="other")
    entries = {e["manager"]: e["fieldsV1"] for e in (await client.get(f"{LEASES}/n1"))["metadata"]["managedFields"]}
    assert entries["other"] == {"f:spec": {"f:renewTime": {}}}
    assert "f:renewTime" not in entries["kubelet"]["f:spec"]


async def test_a_lease_already_at_the_time_is_not_written_again(client: Client) -> None:
    before = await _leases(client, ["n1"])
    answer = await client.create(RENEWALS, {"spec": {"renewTime": T0, "leases": ["n1"]}}, fieldManager="kubelet")
    assert answer["status"] == {"renewed": 1}
    got = await client.get(f"{LEASES}/n1")
    assert got["metadata"]["resourceVersion"] == before["n1"]["metadata"]["resourceVersion"]


async def test_without_a_renew_time_the_servers_clock_is_used(client: Client) -> None:
    await _leases(client, ["n1"])
    answer = await client.create(RENEWALS, {"spec": {"leases": ["n1"]}}, fieldManager="kubelet")
    got = await client.get(f"{LEASES}/n1")
    assert got["spec"]["renewTime"] == answer["spec"]["renewTime"] > T0


async def test_many_leases_in_chunks(client: Client) -> None:
    names = [f"n{i}" for i in range(1100)]  # more than one chunk of the store's submissions
    await asyncio.gather(*(client.create(LEASES, {"metadata": {"name": n}, "spec": {"renewTime": T0}})
                           for n in names))
    answer = await client.create(RENEWALS, {"spec": {"renewTime": T1, "leases": names}})
    assert answer["status"] == {"renewed": len(names)}
    listed = await client.list(LEASES)
    assert {item["spec"]["renewTime"] for item in listed["items"]} == {T1}


@pytest.mark.parametrize(("spec", "field"), [
    (None, "spec"),
    ({"leases": "n1"}, "spec.leases"),
    ({"leases": [1]}, "spec.leases"),
    ({"leases": ["Not_A_Name"]}, "spec.leases[0]"),
    ({"leases": ["n"] * 10_001}, "spec.leases"),
    ({"leases": ["n1"], "renewTime": "yesterday"}, "spec.renewTime"),
    ({"leases": ["n1"], "renewTime": "2026-12-02T01:00:00Z"}, "spec.renewTime"),  # a Time, not a MicroTime
])
async def test_bad_requests_are_422_and_write_nothing(client: Client, spec: Any, field: str) -> None:
    before = await _leases(client, ["n1"])
    body: dict[str, Any] = {} if spec is None else {"spec": spec}
    with pytest.raises(ApiError) as e:
        await client.create(RENEWALS, body)
    assert e.value.code == 422 and e.value.status["details"]["causes"][0]["field"] == field
    got = await client.get(f"{LEASES}/n1")
    assert got["metadata"]["resourceVersion"] == before["n1"]["metadata"]["resourceVersion"]


async def test_only_create_is_served_and_the_kind_must_match(client: Client) -> None:
    await _leases(client, ["n1"])
    for method in ("GET", "PUT", "DELETE"):
        with pytest.raises(ApiError) as e:
            await client.request(method, RENEWALS if method == "GET" else f"{RENEWALS}/x",
                                 {} if method == "PUT" else None)
        assert e.value.code == 405
    with pytest.raises(ApiError) as e:
        await client.create(RENEWALS, {"kind": "Lease", "spec": {"leases": ["n1"]}})
    assert e.value.code == 400
    with pytest.raises(ApiError) as e:
        await client.request("POST", RENEWALS, "leases: [n1]", content_type="text/plain")
    assert e.value.code == 415


async def test_discovery_lists_the_resource(client: Client) -> None:
    listed = await client.get("/apis/nodes.controlplane.dev/v1alpha1")
    [resource] = listed["resources"]
    assert resource["name"] == "leaserenewals" and resource["namespaced"] and resource["verbs"] == ["create"]


async def test_renewals_racing_another_writer_lose_none_of_its_writes(client: Client) -> None:
    """Renewals start from the cache's version; one that lost to another writer's patch
    is read again (once the cache has the winner) and renewed over it, never over the
    stale version."""
    await _leases(client, ["n1", "n2"])

    async def renew(i: int) -> None:
        answer = await client.create(RENEWALS, {"spec": {"renewTime": f"2026-12-02T01:01:{i:02d}.000000Z",
                                                         "leases": ["n1", "n2"]}}, fieldManager="kubelet")
        assert answer["status"] == {"renewed": 2}

    async def label(i: int) -> None:
        await client.patch(f"{LEASES}/n1", {"metadata": {"labels": {f"k{i}": "v"}}}, patch_type="merge")

    await asyncio.gather(*(f(i) for i in range(30) for f in (renew, label)))
    got = await client.get(f"{LEASES}/n1")
    assert got["metadata"]["labels"] == {f"k{i}": "v" for i in range(30)}  # no patch undone by a renewal
    assert got["spec"]["renewTime"].startswith("2026-12-02T01:01:")
