"""LeaseRenewal (controlplane/api/leaserenewals.py): many Leases renewed in one request,
each as the kubelet's PUT would renew it."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest

from controlplane.client import ApiError, Client, resource_path

LEASES = resource_path("coordination.k8s.io", "v1", "leases", "kube-node-lease")
RENEWALS = resource_path("nodes.controlplane.dev", "v1alpha1", "leaserenewals", "kube-node-lease")
T0, T1 = "2026-12-02T01:00:00.000000Z", "2026-12-02T01:00:10.123456Z"
T2, T3, T4 = "2026-12-02T01:00:20.000001Z", "2026-12-02T01:00:30.999999Z", "2026-12-02T01:00:40.500000Z"


async def _leases(client: Client, names: list[str], manager: str = "kubelet") -> dict[str, dict[str, Any]]:
    """(kube-node-lease is one of the namespaces the server starts with)"""
    out = {}
    for name in names:
        out[name] = await client.create(LEASES, {"metadata": {"name": name}, "spec": {
            "holderIdentity": name, "leaseDurationSeconds": 40, "renewTime": T0}}, fieldManager=manager)
    return out


def _comparable(lease: dict[str, Any]) -> dict[str, Any]:
    """A Lease without what differs between two Leases renewed alike (names, identities, times of managedFields)."""
    meta = {k: v for k, v in lease["metadata"].items() if k not in ("name", "uid", "resourceVersion",
                                                                     "creationTimestamp")}
    for e in meta["managedFields"]:
        e.pop("time")
    return {**lease, "metadata": meta, "spec": {**lease["spec"], "holderIdentity": ""}}


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

    assert _comparable(bulk) == _comparable(put)


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
    # the names are matched together, joined by newlines: one holding a newline is still refused
    ({"leases": ["n1", "n2\nn3"]}, "spec.leases[1]"),
    ({"leases": ["n1", "n" * 254]}, "spec.leases[1]"),
    ({"leases": ["n1", "n2", ""]}, "spec.leases[2]"),
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
    resources = {r["name"]: r for r in listed["resources"]}
    assert sorted(resources) == ["leaserenewals", "nodestatusreports"]
    assert resources["leaserenewals"]["namespaced"] and resources["leaserenewals"]["verbs"] == ["create"]
    assert not resources["nodestatusreports"]["namespaced"] and resources["nodestatusreports"]["verbs"] == ["create"]


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


# -- renewals spliced into the bytes of the version this server renewed last ---------------
def _counting_whole_way(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the Leases renewed the whole way (parsed, compared, serialised) from now on."""
    from controlplane.api import leaserenewals

    seen: list[str] = []
    whole_way = leaserenewals._renewed

    def counted(rtype: Any, stored: bytes, *args: Any) -> Any:
        seen.append(orjson.loads(stored)["metadata"]["name"])
        return whole_way(rtype, stored, *args)

    monkeypatch.setattr(leaserenewals, "_renewed", counted)
    return seen


async def test_the_next_renewal_of_a_version_renewed_here_is_spliced_and_stores_what_a_put_would(
        client: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    whole_way = _counting_whole_way(monkeypatch)
    await _leases(client, ["bulk", "put"])
    for t in (T1, T2, T3):
        answer = await client.create(RENEWALS, {"spec": {"renewTime": t, "leases": ["bulk"]}}, fieldManager="kubelet")
        assert answer["status"] == {"renewed": 1}
        put = await client.get(f"{LEASES}/put")
        put["spec"]["renewTime"] = t
        await client.update(f"{LEASES}/put", put, fieldManager="kubelet")
    assert whole_way == ["bulk"]  # the first renewal only: the next two were spliced
    bulk, put = await client.get(f"{LEASES}/bulk"), await client.get(f"{LEASES}/put")
    assert bulk["spec"]["renewTime"] == T3 and "generation" not in bulk["metadata"]

    assert _comparable(bulk) == _comparable(put)
    # the same again at once: nothing written, as the whole way would
    answer = await client.create(RENEWALS, {"spec": {"renewTime": T3, "leases": ["bulk"]}}, fieldManager="kubelet")
    assert answer["status"] == {"renewed": 1}
    assert (await client.get(f"{LEASES}/bulk"))["metadata"]["resourceVersion"] == bulk["metadata"]["resourceVersion"]


async def test_a_spliced_version_keeps_what_filters_read_and_its_events_carry_it(client: Client) -> None:
    await client.create(LEASES, {"metadata": {"name": "n1", "labels": {"zone": "a"}},
                                 "spec": {"holderIdentity": "n1", "renewTime": T0}}, fieldManager="kubelet")
    await client.create(RENEWALS, {"spec": {"renewTime": T1, "leases": ["n1"]}}, fieldManager="kubelet")
    listed = await client.list(LEASES)
    events: list[Any] = []

    async def watch() -> None:
        async for ev in client.watch(LEASES, resource_version=listed["metadata"]["resourceVersion"],
                                     label_selector="zone=a", field_selector="metadata.name=n1"):
            events.append(ev)
            return

    watcher = asyncio.create_task(watch())
    await client.create(RENEWALS, {"spec": {"renewTime": T2, "leases": ["n1"]}}, fieldManager="kubelet")
    await asyncio.wait_for(watcher, 5)
    got = await client.get(f"{LEASES}/n1")
    assert events[0].type == "MODIFIED" and events[0].object == got and got["spec"]["renewTime"] == T2
    selected = await client.list(LEASES, labelSelector="zone=a", fieldSelector="metadata.name=n1")
    assert [item["spec"]["renewTime"] for item in selected["items"]] == [T2]


async def test_a_version_another_writer_made_is_renewed_the_whole_way_then_spliced_again(
        client: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    whole_way = _counting_whole_way(monkeypatch)
    await _leases(client, ["n1"])
    await client.create(RENEWALS, {"spec": {"renewTime": T1, "leases": ["n1"]}}, fieldManager="kubelet")
    await client.patch(f"{LEASES}/n1", {"metadata": {"labels": {"zone": "b"}}}, patch_type="merge",
                       fieldManager="kubelet")
    await client.create(RENEWALS, {"spec": {"renewTime": T2, "leases": ["n1"]}}, fieldManager="kubelet")
    await client.create(RENEWALS, {"spec": {"renewTime": T3, "leases": ["n1"]}}, fieldManager="kubelet")
    assert whole_way == ["n1", "n1"]  # the first, and the one after the patch
    got = await client.get(f"{LEASES}/n1")
    assert got["metadata"]["labels"] == {"zone": "b"} and got["spec"]["renewTime"] == T3
    selected = await client.list(LEASES, labelSelector="zone=b")
    assert [item["spec"]["renewTime"] for item in selected["items"]] == [T3]
    # another manager's renewal of a spliced version goes the whole way, and takes the field;
    # with two managers' entries, every renewal goes the whole way
    await client.create(RENEWALS, {"spec": {"renewTime": T4, "leases": ["n1"]}}, fieldManager="other")
    await client.create(RENEWALS, {"spec": {"renewTime": T1, "leases": ["n1"]}}, fieldManager="other")
    assert whole_way == ["n1"] * 4
    got = await client.get(f"{LEASES}/n1")
    entries = {e["manager"]: e["fieldsV1"] for e in got["metadata"]["managedFields"]}
    assert entries["other"] == {"f:spec": {"f:renewTime": {}}} and got["spec"]["renewTime"] == T1


def test_a_plan_is_learnt_only_where_each_value_is_there_once_and_used_only_where_the_bytes_agree() -> None:
    from controlplane.api.leaserenewals import RenewalPlans

    now, renew = b"2026-12-02T01:00:10Z", T1.encode()
    stored = (b'{"metadata":{"name":"n1","annotations":{"note":"x"},"managedFields":[{"manager":"kubelet",'
              b'"time":"' + now + b'"}]},"spec":{"renewTime":"' + renew + b'"}}')
    attrs: Any = (None, ("n1", "kube-node-lease"))
    plans = RenewalPlans()
    plans.learn_renewal(b"k", 7, "kubelet", stored, renew, now, attrs)
    later, renew2 = b"2026-12-02T01:00:20Z", T2.encode()
    spliced = stored.replace(now, later).replace(renew, renew2)
    assert plans.renewal(b"k", "kubelet", renew2, later) == (spliced, 7, attrs)
    assert plans.renewal(b"k", "kubelet", renew, later) is None  # already at that time: the whole way checks
    assert plans.renewal(b"k", "other", renew2, later) is None  # another manager
    assert plans.renewal(b"k", "kubelet", b"2026-12-02T01:00:20.5Z", later) is None  # not a stored MicroTime
    assert plans.renewal(b"none", "kubelet", renew2, later) is None
    plans.written([(b"k", 7, 9)], RenewalPlans.values(renew2, later))
    assert plans.renewal(b"k", "kubelet", T3.encode(), now) == (
        spliced.replace(later, now).replace(renew2, T3.encode()), 9, attrs)
    plans.written([(b"k", 7, 11)], RenewalPlans.values(renew, now))  # not the plan's version: ignored
    assert plans.renewal(b"k", "kubelet", renew, now) is not None
    plans.forget(b"k")
    assert plans.renewal(b"k", "kubelet", renew2, later) is None
    # an annotation holding the same time: the value is there twice, nothing learnt
    twice = stored.replace(b'"note":"x"', b'"time":"' + now + b'"')
    plans.learn_renewal(b"t", 7, "kubelet", twice, renew, now, attrs)
    assert plans.renewal(b"t", "kubelet", renew2, later) is None


async def test_a_lease_has_no_generation_as_upstreams_strategy_sets_none(client: Client) -> None:
    created = await client.create(LEASES, {"metadata": {"name": "n0"},
                                           "spec": {"holderIdentity": "n0", "renewTime": T0}})
    assert "generation" not in created["metadata"]
    created["spec"]["renewTime"] = T1
    updated = await client.update(f"{LEASES}/n0", created)
    assert "generation" not in updated["metadata"]
    # what a client sends is kept (upstream's BeforeCreate leaves it), never moved by an update (BeforeUpdate)
    sent = await client.create(LEASES, {"metadata": {"name": "n1", "generation": 5},
                                        "spec": {"holderIdentity": "n1", "renewTime": T0}})
    assert sent["metadata"]["generation"] == 5
    sent["spec"]["renewTime"] = T1
    sent["metadata"]["generation"] = 9
    assert (await client.update(f"{LEASES}/n1", sent))["metadata"]["generation"] == 5
    pod = await client.create(resource_path("", "v1", "pods", "default"), {
        "metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "x"}]}})
    assert pod["metadata"]["generation"] == 1  # (other types as before)
