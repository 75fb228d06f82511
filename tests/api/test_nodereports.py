"""NodeStatusReport (controlplane/api/nodereports.py): many Nodes' status conditions
reported in one request, each Node written as its kubelet's status patch would write it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from controlplane.client import ApiError, Client, resource_path

NODES = resource_path("", "v1", "nodes")
REPORTS = resource_path("nodes.controlplane.dev", "v1alpha1", "nodestatusreports")
T0, T1, T2, T3 = "2026-12-02T01:00:00Z", "2026-12-02T01:05:00Z", "2026-12-02T01:10:00Z", "2026-12-02T01:15:00Z"
READY = {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status"}
MEMORY = {"type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory",
          "message": "kubelet has sufficient memory available"}
REPORTED = [READY, MEMORY]


def _conditions(at: str, since: str = T0, reported: list[dict[str, str]] = REPORTED) -> list[dict[str, Any]]:
    return [{**c, "lastHeartbeatTime": at, "lastTransitionTime": since} for c in reported]


async def _nodes(client: Client, names: list[str], manager: str = "kubelet") -> dict[str, dict[str, Any]]:
    """Nodes as a kubelet registers them: created, then their status patched with the conditions."""
    out = {}
    for name in names:
        await client.create(NODES, {"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
                                    "status": {"capacity": {"cpu": "8", "pods": "110"},
                                               "images": [{"names": [f"registry.k8s.io/img-{i}:1"],
                                                           "sizeBytes": 1000 + i} for i in range(5)]}},
                            fieldManager=manager)
        out[name] = await client.patch(f"{NODES}/{name}/status", {"status": {"conditions": _conditions(T0)}},
                                       patch_type="merge", fieldManager=manager)
    return out


def _report(nodes: list[str], at: str | None = T1, reported: list[dict[str, str]] = REPORTED) -> dict[str, Any]:
    spec: dict[str, Any] = {"conditions": reported, "nodes": nodes}
    if at is not None:
        spec["heartbeatTime"] = at
    return {"spec": spec}


def _comparable(node: dict[str, Any]) -> dict[str, Any]:
    """A Node without what differs between two Nodes reported alike (names, identities, managedFields' times)."""
    meta = {k: v for k, v in node["metadata"].items() if k not in ("name", "uid", "resourceVersion",
                                                                   "creationTimestamp", "labels")}
    for e in meta["managedFields"]:
        e.pop("time")
    # entries are ordered by their times (upstream's sort), which differ when a second ticks between
    # the two Nodes' writes: compared as a set
    meta["managedFields"] = sorted(meta["managedFields"], key=lambda e: (e["manager"], e["operation"],
                                                                         e.get("subresource", "")))
    return {**node, "metadata": meta}

@pytest.fixture
def made(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """The stored versions reports were made from the whole way (``_reported``), in order:
    a report spliced from its plan adds none."""
    from controlplane.api import nodereports
    whole_way = nodereports._reported
    seen: list[bytes] = []

    def counted(*args: Any) -> Any:
        seen.append(args[1])
        return whole_way(*args)

    monkeypatch.setattr(nodereports, "_reported", counted)
    return seen



async def test_each_named_node_gets_its_heartbeat_with_its_own_revision_and_event(client: Client) -> None:
    before = await _nodes(client, ["n1", "n2", "n3"])
    listed = await client.list(NODES)
    events: list[Any] = []

    async def watch() -> None:
        async for ev in client.watch(NODES, resource_version=listed["metadata"]["resourceVersion"]):
            events.append(ev)
            if len(events) == 2:
                return

    watcher = asyncio.create_task(watch())
    answer = await client.create(REPORTS, _report(["n1", "n3", "gone", "n1"]), fieldManager="kubelet")
    assert answer["kind"] == "NodeStatusReport" and answer["status"] == {"reported": 2, "notFound": ["gone"]}
    await asyncio.wait_for(watcher, 5)
    assert [(e.type, e.object["metadata"]["name"]) for e in events] == [("MODIFIED", "n1"), ("MODIFIED", "n3")]
    for name in ("n1", "n3"):
        got = await client.get(f"{NODES}/{name}")
        old = before[name]
        assert got["status"]["conditions"] == _conditions(T1, since=T0)  # transition times kept
        assert {k: v for k, v in got["status"].items() if k != "conditions"} == \
            {k: v for k, v in old["status"].items() if k != "conditions"}
        assert got.get("spec") == old.get("spec") and got["metadata"]["labels"] == old["metadata"]["labels"]
        assert int(got["metadata"]["resourceVersion"]) > int(old["metadata"]["resourceVersion"])
        assert any(e.object == got for e in events)
    untouched = await client.get(f"{NODES}/n2")
    assert untouched["metadata"]["resourceVersion"] == before["n2"]["metadata"]["resourceVersion"]


async def test_reports_equal_the_status_patches_they_replace_the_first_whole_the_next_spliced(
        client: Client, made: list[bytes]) -> None:
    """Report one Node, merge-patch its twin with the same conditions: the two store the same
    Node, at the first report (made the whole way) and at the next ones (spliced)."""
    await _nodes(client, ["bulk", "patch"])
    for at in (T1, T2, T3):
        answer = await client.create(REPORTS, _report(["bulk"], at), fieldManager="kubelet")
        assert answer["status"] == {"reported": 1}
        await client.patch(f"{NODES}/patch/status", {"status": {"conditions": _conditions(at)}},
                           patch_type="merge", fieldManager="kubelet")
        bulk, patched = await client.get(f"{NODES}/bulk"), await client.get(f"{NODES}/patch")
        assert _comparable(bulk) == _comparable(patched)
        assert bulk["status"]["conditions"] == _conditions(at)
    assert len(made) == 1  # the first report the whole way; it learnt a plan; the next two spliced


async def test_a_node_registered_with_its_conditions_is_spliced_from_its_second_report(
        client: Client, made: list[bytes]) -> None:
    """The first report takes the heartbeats from the create's managedFields entry to the
    status entry; the plan learnt from it still makes the next report what a patch makes."""
    for name in ("bulk", "patch"):
        await client.create(NODES, {"metadata": {"name": name, "labels": {"zone": "a"}},
                                    "status": {"conditions": _conditions(T0)}}, fieldManager="kubelet")
    for at in (T1, T2, T3):
        await client.create(REPORTS, _report(["bulk"], at), fieldManager="kubelet")
        await client.patch(f"{NODES}/patch/status", {"status": {"conditions": _conditions(at)}},
                           patch_type="merge", fieldManager="kubelet")
        bulk, patched = await client.get(f"{NODES}/bulk"), await client.get(f"{NODES}/patch")
        assert _comparable(bulk) == _comparable(patched)
        # the create's entry keeps the labels; the heartbeats are the status entry's
        assert {e.get("subresource", "") for e in bulk["metadata"]["managedFields"]} == {"", "status"}
    assert len(made) == 1


async def test_a_report_that_left_a_heartbeat_where_it_was_teaches_no_plan(
        client: Client, made: list[bytes]) -> None:
    """A heartbeat the report did not move may still be another manager's: the next report,
    which moves it, changes that manager's entry too, so it goes the whole way."""
    await _nodes(client, ["bulk", "patch"])
    for name in ("bulk", "patch"):  # another manager already set Ready's heartbeat to T1
        await client.patch(f"{NODES}/{name}/status", {"status": {"conditions": [
            {**_conditions(T1)[0]}, _conditions(T0)[1]]}}, patch_type="merge", fieldManager="other")
    for at, whole in ((T1, 1), (T2, 2), (T3, 2)):
        await client.create(REPORTS, _report(["bulk"], at), fieldManager="kubelet")
        await client.patch(f"{NODES}/patch/status", {"status": {"conditions": _conditions(at)}},
                           patch_type="merge", fieldManager="kubelet")
        bulk, patched = await client.get(f"{NODES}/bulk"), await client.get(f"{NODES}/patch")
        assert _comparable(bulk) == _comparable(patched)
        assert len(made) == whole


async def test_a_changed_status_moves_its_transition_time_and_a_missing_condition_is_added(client: Client) -> None:
    await _nodes(client, ["n1"])
    not_ready = {**READY, "status": "False", "reason": "KubeletNotReady", "message": "runtime down"}
    disk = {"type": "DiskPressure", "status": "False", "reason": "KubeletHasNoDiskPressure", "message": "ok"}
    await client.create(REPORTS, _report(["n1"], T1, [not_ready, disk]), fieldManager="kubelet")
    got = {c["type"]: c for c in (await client.get(f"{NODES}/n1"))["status"]["conditions"]}
    assert got["Ready"] == {**not_ready, "lastHeartbeatTime": T1, "lastTransitionTime": T1}
    assert got["MemoryPressure"] == {**MEMORY, "lastHeartbeatTime": T0, "lastTransitionTime": T0}  # not reported
    assert got["DiskPressure"] == {**disk, "lastHeartbeatTime": T1, "lastTransitionTime": T1}
    # the same status with another message: the message changes, the transition time stays
    await client.create(REPORTS, _report(["n1"], T2, [{**not_ready, "message": "still down"}]),
                        fieldManager="kubelet")
    ready = next(c for c in (await client.get(f"{NODES}/n1"))["status"]["conditions"] if c["type"] == "Ready")
    assert ready == {**not_ready, "message": "still down", "lastHeartbeatTime": T2, "lastTransitionTime": T1}


async def test_a_node_already_at_the_heartbeat_is_not_written_again(client: Client) -> None:
    await _nodes(client, ["n1"])
    await client.create(REPORTS, _report(["n1"], T1), fieldManager="kubelet")
    rv = (await client.get(f"{NODES}/n1"))["metadata"]["resourceVersion"]
    answer = await client.create(REPORTS, _report(["n1"], T1), fieldManager="kubelet")
    assert answer["status"] == {"reported": 1}
    assert (await client.get(f"{NODES}/n1"))["metadata"]["resourceVersion"] == rv


async def test_without_a_heartbeat_time_the_servers_clock_is_used(client: Client) -> None:
    await _nodes(client, ["n1"])
    answer = await client.create(REPORTS, _report(["n1"], None), fieldManager="kubelet")
    at = answer["spec"]["heartbeatTime"]
    assert len(at) == 20 and at > T0
    assert all(c["lastHeartbeatTime"] == at for c in (await client.get(f"{NODES}/n1"))["status"]["conditions"])


async def test_a_node_another_writer_changed_is_reported_the_whole_way_over_its_version(
        client: Client, made: list[bytes]) -> None:
    await _nodes(client, ["n1"])
    await client.create(REPORTS, _report(["n1"], T1), fieldManager="kubelet")
    await client.create(REPORTS, _report(["n1"], T2), fieldManager="kubelet")
    assert len(made) == 1
    await client.patch(f"{NODES}/n1", {"metadata": {"labels": {"team": "a"}}}, patch_type="merge",
                       fieldManager="someone")
    answer = await client.create(REPORTS, _report(["n1"], T3), fieldManager="kubelet")
    assert answer["status"] == {"reported": 1} and len(made) == 2  # the plan's version was gone: the whole way
    got = await client.get(f"{NODES}/n1")
    assert got["metadata"]["labels"]["team"] == "a" and got["status"]["conditions"] == _conditions(T3)
    # selectors read the written version: the label and the heartbeat together
    listed = await client.list(NODES, labelSelector="team=a")
    assert [n["status"]["conditions"][0]["lastHeartbeatTime"] for n in listed["items"]] == [T3]
    # other conditions reported: another plan's tag, so the whole way
    await client.create(REPORTS, _report(["n1"], "2026-12-02T01:20:00Z", [READY]), fieldManager="kubelet")
    assert len(made) == 3


@pytest.mark.parametrize(("spec", "field"), [
    (None, "spec"),
    ({"conditions": REPORTED}, "spec.nodes"),
    ({"nodes": ["n1"]}, "spec.conditions"),
    ({"nodes": ["n1"], "conditions": []}, "spec.conditions"),
    ({"nodes": ["Not_A_Name"], "conditions": REPORTED}, "spec.nodes[0]"),
    ({"nodes": ["n"] * 10_001, "conditions": REPORTED}, "spec.nodes"),
    ({"nodes": ["n1"], "conditions": [{**READY, "status": "Maybe"}]}, "spec.conditions[0].status"),
    ({"nodes": ["n1"], "conditions": [READY, READY]}, "spec.conditions[1].type"),
    ({"nodes": ["n1"], "conditions": [{**READY, "lastHeartbeatTime": T1}]}, "spec.conditions[0]"),
    ({"nodes": ["n1"], "conditions": [{**READY, "reason": 3}]}, "spec.conditions[0].reason"),
    ({"nodes": ["n1"], "conditions": REPORTED, "heartbeatTime": "yesterday"}, "spec.heartbeatTime"),
])
async def test_bad_requests_are_422_and_write_nothing(client: Client, spec: Any, field: str) -> None:
    before = await _nodes(client, ["n1"])
    with pytest.raises(ApiError) as e:
        await client.create(REPORTS, {} if spec is None else {"spec": spec})
    assert e.value.code == 422 and e.value.status["details"]["causes"][0]["field"] == field
    got = await client.get(f"{NODES}/n1")
    assert got["metadata"]["resourceVersion"] == before["n1"]["metadata"]["resourceVersion"]


async def test_only_create_is_served_and_a_dry_run_writes_nothing(client: Client) -> None:
    before = await _nodes(client, ["n1"])
    for method in ("GET", "PUT", "DELETE"):
        with pytest.raises(ApiError) as e:
            await client.request(method, REPORTS if method == "GET" else f"{REPORTS}/x",
                                 {} if method == "PUT" else None)
        assert e.value.code == 405
    with pytest.raises(ApiError) as e:
        await client.create(REPORTS, {"kind": "Node", **_report(["n1"])})
    assert e.value.code == 400
    answer = await client.create(REPORTS, _report(["n1"]), dryRun="All")
    assert answer["status"] == {"reported": 1}
    got = await client.get(f"{NODES}/n1")
    assert got["metadata"]["resourceVersion"] == before["n1"]["metadata"]["resourceVersion"]


def test_a_marked_plan_is_learnt_only_where_the_marks_give_back_the_stored_bytes() -> None:
    from controlplane.api.nodereports import _MARKS, ReportPlans

    now, beat = b"2026-12-02T01:05:00Z", b"2026-12-02T01:05:00Z"  # the same second: searching would be ambiguous
    def node(t: bytes, b: bytes, other: bytes) -> bytes:
        return (b'{"metadata":{"managedFields":[{"manager":"kubelet","time":"' + other + b'"},{"manager":"kubelet",'
                b'"time":"' + t + b'","subresource":"status"}]},"status":{"conditions":[{"type":"Ready",'
                b'"lastHeartbeatTime":"' + b + b'"},{"type":"Disk","lastHeartbeatTime":"' + b + b'"}]}}')
    stored, marked = node(now, beat, now), node(_MARKS[0], _MARKS[1], now)
    attrs: Any = (None, ("n1", ""))
    plans = ReportPlans()
    plans.learn_marked(b"k", 7, "kubelet", stored, marked, _MARKS, (now, beat), (1, 2), attrs, b"tag")
    later = b"2026-12-02T01:10:00Z"
    assert plans.splice(b"k", "kubelet", (later, later), b"tag", fresh=1) == (node(later, later, now), 7, attrs)
    assert plans.splice(b"k", "kubelet", (later, beat), b"tag", fresh=1) is None  # the heartbeat is already so
    assert plans.splice(b"k", "kubelet", (later, later), b"other conditions", fresh=1) is None
    assert plans.splice(b"k", "other", (later, later), b"tag", fresh=1) is None
    # a value the marking missed: a plan would leave it behind, so nothing is learnt
    plans.learn_marked(b"m", 7, "kubelet", stored, node(_MARKS[0], beat, now), _MARKS, (now, beat), (1, 2), attrs,
                       b"tag")
    assert plans.splice(b"m", "kubelet", (later, later), b"tag", fresh=1) is None
    # marks that do not give the stored bytes back (values other than those stored): nothing learnt
    plans.learn_marked(b"w", 7, "kubelet", stored, marked, _MARKS, (now, later), (1, 2), attrs, b"tag")
    assert plans.splice(b"w", "kubelet", (later, later), b"tag", fresh=1) is None
    plans.learn_marked(b"k", 8, "kubelet", stored, stored, _MARKS, (now, beat), (1, 2), attrs, b"tag")  # no marks
    assert len(plans) == 0
