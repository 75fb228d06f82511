"""The DaemonSet controller (controllers/daemonsets.py), inside a server with its scheduler and
four simulated nodes."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from controlplane.client import ApiError, Client
from controlplane.controllers import daemonsets
from controlplane.controllers.daemonsets import (
    REVISION_HASH,
    Rollout,
    _excess,
    _manage,
    _update_budget,
    daemon_tolerations,
)
from controlplane.nodes.failures import inject_failure
from controlplane.scheduler.plugins.nodes import _named_nodes
from tests.controllers.helpers import until

DAEMONSETS = "/apis/apps/v1/namespaces/default/daemonsets"
PODS = "/api/v1/namespaces/default/pods"
NODES = {f"sim-node-{i}" for i in range(4)}


def daemonset(name: str, image: str = "agent:1", **template_spec: Any) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name},
            "spec": {"selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"terminationGracePeriodSeconds": 0,
                                           "containers": [{"name": "a", "image": image}], **template_spec}}}}


@pytest.fixture
async def c(client: Client) -> Client:
    """The client, once the four simulated nodes exist."""
    async def all_nodes() -> bool:
        return {n["metadata"]["name"] for n in (await client.list("/api/v1/nodes"))["items"]} >= NODES

    await until(all_nodes)
    return client


async def live_pods(c: Client, name: str) -> list[dict[str, Any]]:
    items = (await c.list(PODS, labelSelector=f"app={name}"))["items"]
    return [p for p in items if not p["metadata"].get("deletionTimestamp")]


async def on_nodes(c: Client, name: str, nodes: set[str], image: str | None = None) -> bool:
    pods = await live_pods(c, name)
    ready = [p for p in pods if any(cond["type"] == "Ready" and cond["status"] == "True"
                                    for cond in (p.get("status") or {}).get("conditions") or ())]
    placed = sorted(p["spec"].get("nodeName", "") for p in ready
                    if image is None or p["spec"]["containers"][0]["image"] == image)
    return placed == sorted(nodes) and len(pods) == len(nodes)


def test_daemon_pods_tolerate_what_upstream_adds() -> None:
    keys = {(t["key"], t["effect"]) for t in daemon_tolerations({"tolerations": [
        {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]})}
    assert ("gpu", "NoSchedule") in keys and ("node.kubernetes.io/unschedulable", "NoSchedule") in keys
    assert ("node.kubernetes.io/not-ready", "NoExecute") in keys
    assert ("node.kubernetes.io/network-unavailable", "NoSchedule") not in keys
    assert ("node.kubernetes.io/network-unavailable", "NoSchedule") in {
        (t["key"], t["effect"]) for t in daemon_tolerations({"hostNetwork": True})}


def pod(node: str, revision: str, ready: bool = True, name: str = "", created: str = "2026-01-01T00:00:00Z"
        ) -> dict[str, Any]:
    conditions = [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}] if ready else []
    return {"metadata": {"name": name or f"{node}-{revision}", "creationTimestamp": created,
                         "labels": {REVISION_HASH: revision}},
            "spec": {"nodeName": node}, "status": {"phase": "Running", "conditions": conditions}}


def names(pods: list[dict[str, Any]]) -> list[str]:
    return [p["metadata"]["name"] for p in pods]


def test_the_update_budget_is_upstreams_rounded_up_and_never_both_zero() -> None:
    assert _update_budget({"maxUnavailable": "25%", "maxSurge": 0}, 10) == (0, 3)
    assert _update_budget({"maxUnavailable": 0, "maxSurge": "10%"}, 4) == (1, 0)
    assert _update_budget({"maxUnavailable": 0, "maxSurge": 0}, 4) == (0, 1)
    assert _update_budget({"maxUnavailable": "1%", "maxSurge": 0}, 0) == (0, 0)


def test_without_surge_every_node_holding_an_old_pod_is_a_candidate() -> None:
    wanted = {"a", "b", "c"}
    by_node = {n: [pod(n, "old")] for n in ("a", "b", "c", "tainted")}
    assert names(Rollout(by_node, set(), wanted, "new", 0).replace(1)[0]) == ["a-old"]
    assert names(Rollout(by_node, set(), wanted, "new", 0).replace(4)[0]) == ["a-old", "b-old", "c-old",
                                                                            "tainted-old"]
    # an old pod down already goes at once, the tainted node's too, and uses the budget up
    by_node["tainted"] = [pod("tainted", "old", ready=False)]
    assert names(Rollout(by_node, set(), wanted, "new", 0).replace(1)[0]) == ["tainted-old"]
    # a node owed a pod it has not got (or still terminating) is unavailable: nothing more goes
    del by_node["tainted"]
    by_node["a"] = [pod("a", "new", ready=False)]
    assert Rollout(by_node, set(), wanted, "new", 0).replace(1) == ([], [])
    assert Rollout({"b": by_node["b"]}, {"a"}, {"a", "b"}, "new", 0).replace(1) == ([], [])


def test_with_surge_new_pods_start_beside_the_old_and_replace_them_once_available() -> None:
    wanted = {"a", "b", "c"}
    by_node = {n: [pod(n, "old")] for n in wanted}
    assert Rollout(by_node, set(), wanted, "new", 0).surge(1) == ([], ["a"])
    by_node["a"].append(pod("a", "new", ready=False))
    assert Rollout(by_node, set(), wanted, "new", 0).surge(1) == ([], [])
    by_node["a"][1] = pod("a", "new")
    doomed, create = Rollout(by_node, set(), wanted, "new", 0).surge(1)
    assert names(doomed) == ["a-old"] and create == ["b"]
    # an old pod down already gets its new one at once, beyond maxSurge
    by_node["c"] = [pod("c", "old", ready=False)]
    doomed, create = Rollout(by_node, set(), wanted, "new", 0).surge(1)
    assert names(doomed) == ["a-old"] and create == ["c", "b"]


def test_with_surge_a_node_that_should_no_longer_run_one_loses_its_pod_once_the_rest_cover() -> None:
    # upstream's fix for kubernetes#118823: the rollout does not surge onto a node tainted NoSchedule
    by_node = {n: [pod(n, "old")] for n in ("a", "b", "tainted")}
    doomed, create = Rollout(by_node, set(), {"a", "b"}, "new", 0).surge(1)
    assert names(doomed) == ["tainted-old"] and create == ["a"]
    by_node["a"] = [pod("a", "old", ready=False)]
    doomed, create = Rollout(by_node, set(), {"a", "b"}, "new", 0).surge(1)
    assert doomed == [] and create == ["a", "b"]  # 2 available for 2 nodes owed one: it stays
    by_node["tainted"] = [pod("tainted", "old", ready=False)]
    assert names(Rollout(by_node, set(), {"a", "b"}, "new", 0).surge(1)[0]) == ["tainted-old"]


def test_a_surging_node_keeps_its_old_pod_until_the_new_one_is_available() -> None:
    old, new = pod("a", "old", created="2026-01-01T00:00:00Z"), pod("a", "new", ready=False,
                                                                   created="2026-01-01T00:00:01Z")
    assert _excess([old, new], "new", True, 0) == []
    assert _excess([old, new], "new", False, 0) == [new]
    assert _excess([old, pod("a", "new")], "new", True, 0) == [old]
    down = pod("a", "old", ready=False)
    assert _excess([down, new], "new", True, 0) == [down]
    extra = pod("a", "new", name="a-new-2", created="2026-01-01T00:00:02Z")
    assert _excess([old, new, extra], "new", True, 0) == [extra]
    # a node whose pod is terminating waits for it to be gone, unless the DaemonSet surges
    assert _manage({}, {"a"}, {}, {"a", "b"}, {"a", "b"}, "new", False, 0) == ([], ["b"])
    assert _manage({}, {"a"}, {}, {"a", "b"}, {"a", "b"}, "new", True, 0) == ([], ["a", "b"])


def test_a_node_with_a_failed_pod_waits_for_it_to_be_killed_unless_surging() -> None:
    failed = {"a": [pod("a", "new", ready=False)], "gone": [pod("gone", "new", ready=False)]}
    # the failed pod of a node that keeps its daemon is the controller's to kill (within its backoff);
    # that of a node that no longer fits goes with the rest
    assert _manage({}, set(), failed, {"a", "b"}, {"a", "b"}, "new", False, 0) == ([failed["gone"][0]], ["b"])
    assert _manage({}, set(), failed, {"a", "b"}, {"a", "b"}, "new", True, 0) == ([failed["gone"][0]], ["a", "b"])


def test_node_affinity_on_names_narrows_the_candidates() -> None:
    def terms(*ts: dict[str, Any]) -> dict[str, Any]:
        return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(ts)}}}

    pin = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["a", "b"]}]}
    assert _named_nodes(terms(pin)) == {"a", "b"}
    assert _named_nodes(terms(pin, {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["c"]}]})) \
        == {"a", "b", "c"}
    assert _named_nodes(terms(pin, {"matchExpressions": [{"key": "x", "operator": "Exists"}]})) is None
    assert _named_nodes(None) is None and _named_nodes({"nodeAffinity": {}}) is None


async def test_one_pod_per_node_even_a_cordoned_one(c: Client) -> None:
    await c.patch("/api/v1/nodes/sim-node-0", {"spec": {"unschedulable": True}})
    await c.create(DAEMONSETS, daemonset("agent"))
    await until(lambda: on_nodes(c, "agent", NODES))
    pod = (await live_pods(c, "agent"))[0]
    (term,) = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"]
    assert term["matchFields"] == [{"key": "metadata.name", "operator": "In", "values": [pod["spec"]["nodeName"]]}]
    assert pod["metadata"]["labels"][REVISION_HASH] and pod["metadata"]["ownerReferences"][0]["kind"] == "DaemonSet"
    assert pod["metadata"]["labels"]["pod-template-generation"] == "1"

    async def status_done() -> bool:
        s = (await c.get(f"{DAEMONSETS}/agent")).get("status") or {}
        return (s.get("desiredNumberScheduled"), s.get("numberReady"), s.get("updatedNumberScheduled"),
                s.get("observedGeneration")) == (4, 4, 4, 1)

    await until(status_done)


async def test_a_rolling_update_replaces_one_node_at_a_time(c: Client) -> None:
    await c.create(DAEMONSETS, daemonset("roll"))
    await until(lambda: on_nodes(c, "roll", NODES))
    worst = 0
    done = asyncio.Event()

    async def watch_unavailable() -> None:
        nonlocal worst
        while not done.is_set():
            pods = await live_pods(c, "roll")
            ready_nodes = {p["spec"].get("nodeName") for p in pods if any(
                cond["type"] == "Ready" and cond["status"] == "True"
                for cond in (p.get("status") or {}).get("conditions") or ())}
            worst = max(worst, len(NODES - ready_nodes))
            await asyncio.sleep(0.01)

    watcher = asyncio.create_task(watch_unavailable())
    try:
        await c.patch(f"{DAEMONSETS}/roll", {"spec": {"template": {"spec": {"containers": [
            {"name": "a", "image": "agent:2"}]}}}}, patch_type="strategic")
        await until(lambda: on_nodes(c, "roll", NODES, image="agent:2"))
    finally:
        done.set()
        await watcher
    assert worst <= 1  # maxUnavailable 1 (the default)


async def test_nodes_that_stop_fitting_lose_their_pod_and_new_ones_gain_one(c: Client) -> None:
    await c.patch("/api/v1/nodes/sim-node-1", {"metadata": {"labels": {"gpu": "yes"}}})
    await c.create(DAEMONSETS, daemonset("gpu", nodeSelector={"gpu": "yes"}))
    await until(lambda: on_nodes(c, "gpu", {"sim-node-1"}))
    await c.patch("/api/v1/nodes/sim-node-2", {"metadata": {"labels": {"gpu": "yes"}}})
    await until(lambda: on_nodes(c, "gpu", {"sim-node-1", "sim-node-2"}))
    await c.patch("/api/v1/nodes/sim-node-1", {"metadata": {"labels": {"gpu": None}}})
    await until(lambda: on_nodes(c, "gpu", {"sim-node-2"}))
    # a NoExecute taint the pods do not tolerate takes the node out too
    await c.patch("/api/v1/nodes/sim-node-2", {"spec": {"taints": [{"key": "x", "effect": "NoExecute"}]}})

    async def none_left() -> bool:
        return not await live_pods(c, "gpu")

    await until(none_left)


async def test_a_node_tainted_noschedule_keeps_its_daemon_pod_and_gets_no_new_one(c: Client) -> None:
    # upstream's NodeShouldRunDaemonPod: an untolerated NoSchedule taint stops new daemon pods but
    # not the running one, nor does a tolerated NoExecute one; so a NotReady node (its not-ready
    # taints: NoSchedule, and NoExecute which daemon pods tolerate) keeps its daemons
    await c.create(DAEMONSETS, daemonset("stay", tolerations=[{"key": "y", "operator": "Exists",
                                                                "effect": "NoExecute"}]))
    await until(lambda: on_nodes(c, "stay", NODES))
    before = {p["spec"]["nodeName"]: p["metadata"]["uid"] for p in await live_pods(c, "stay")}
    await c.patch("/api/v1/nodes/sim-node-1", {"spec": {"taints": [{"key": "x", "effect": "NoSchedule"}]}})
    await c.patch("/api/v1/nodes/sim-node-2", {"spec": {"taints": [{"key": "x", "effect": "NoSchedule"},
                                                                   {"key": "y", "effect": "NoExecute"}]}})

    async def misscheduled() -> bool:
        s = (await c.get(f"{DAEMONSETS}/stay")).get("status") or {}
        return (s.get("desiredNumberScheduled"), s.get("numberMisscheduled")) == (2, 2)

    await until(misscheduled)
    await asyncio.sleep(0.5)
    assert {p["spec"]["nodeName"]: p["metadata"]["uid"] for p in await live_pods(c, "stay")} == before
    # a pod deleted there is not replaced: the node no longer gets new daemon pods
    on_1 = next(p["metadata"]["name"] for p in await live_pods(c, "stay") if p["spec"]["nodeName"] == "sim-node-1")
    await c.delete(f"{PODS}/{on_1}")

    async def gone_from_node_1() -> bool:
        return {p["spec"]["nodeName"] for p in await live_pods(c, "stay")} == NODES - {"sim-node-1"}

    await until(gone_from_node_1)
    await asyncio.sleep(0.5)
    assert await gone_from_node_1()


async def test_deleting_a_daemonset_collects_its_pods(c: Client) -> None:
    await c.create(DAEMONSETS, daemonset("gone"))
    await until(lambda: on_nodes(c, "gone", NODES))
    await c.delete(f"{DAEMONSETS}/gone", {"kind": "DeleteOptions", "apiVersion": "v1",
                                          "propagationPolicy": "Background"})

    async def collected() -> bool:
        try:
            await c.get(f"{DAEMONSETS}/gone")
            return False
        except ApiError:
            return not await live_pods(c, "gone")

    await until(collected)


async def test_a_daemonset_deleted_with_orphan_and_made_again_adopts_its_pods(c: Client) -> None:
    """Upstream's collector lets go of the pods and revisions; the new DaemonSet adopts them
    (ClaimPods, ClaimControllerRevisions) rather than running a second pod on every node."""
    await c.create(DAEMONSETS, daemonset("orph"))
    await until(lambda: on_nodes(c, "orph", NODES))
    before = {p["metadata"]["uid"] for p in await live_pods(c, "orph")}
    revisions = "/apis/apps/v1/namespaces/default/controllerrevisions"
    (revision,) = (await c.list(revisions, labelSelector="app=orph"))["items"]
    await c.delete(f"{DAEMONSETS}/orph", {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Orphan"})

    async def orphaned() -> bool:
        try:
            await c.get(f"{DAEMONSETS}/orph")
            return False
        except ApiError:
            return all(not p["metadata"].get("ownerReferences") for p in await live_pods(c, "orph"))

    await until(orphaned)
    kept = await c.get(f"{revisions}/{revision['metadata']['name']}")
    assert not kept["metadata"].get("ownerReferences")
    new = (await c.create(DAEMONSETS, daemonset("orph")))["metadata"]["uid"]

    async def adopted() -> bool:
        pods = await live_pods(c, "orph")
        return all([r["uid"] for r in p["metadata"].get("ownerReferences") or ()] == [new] for p in pods)

    await until(adopted)
    await asyncio.sleep(1)  # no second pod comes
    assert {p["metadata"]["uid"] for p in await live_pods(c, "orph")} == before
    assert await on_nodes(c, "orph", NODES)
    again = await c.get(f"{revisions}/{revision['metadata']['name']}")
    assert [r["uid"] for r in again["metadata"]["ownerReferences"]] == [new]


async def test_a_not_ready_node_keeps_its_daemon_pod(c: Client) -> None:
    await c.create(DAEMONSETS, daemonset("agent"))
    await until(lambda: on_nodes(c, "agent", NODES))
    uid = next(p["metadata"]["uid"] for p in await live_pods(c, "agent") if p["spec"]["nodeName"] == "sim-node-3")
    await inject_failure(c, "sim-node-3", "not-ready")

    async def tainted() -> bool:
        taints = (await c.get("/api/v1/nodes/sim-node-3"))["spec"].get("taints") or []
        return {(t["key"], t["effect"]) for t in taints} >= {
            ("node.kubernetes.io/not-ready", "NoSchedule"), ("node.kubernetes.io/not-ready", "NoExecute")}

    await until(tainted)
    await asyncio.sleep(1.0)
    assert uid in {p["metadata"]["uid"] for p in await live_pods(c, "agent")}


async def test_a_rolling_update_replaces_the_old_pod_of_a_node_tainted_noschedule_without_a_new_one(c: Client) -> None:
    # upstream's rollingUpdate (maxSurge 0) weighs every node holding a daemon pod, not only those
    # that should run one: the old pod kept on a node tainted NoSchedule since is a candidate like
    # any other, deleted within maxUnavailable, and its node (which gets no new daemon pod) is left
    await c.create(DAEMONSETS, daemonset("kept"))
    await until(lambda: on_nodes(c, "kept", NODES))
    await c.patch("/api/v1/nodes/sim-node-1", {"spec": {"taints": [{"key": "x", "effect": "NoSchedule"}]}})

    async def misscheduled() -> bool:
        s = (await c.get(f"{DAEMONSETS}/kept")).get("status") or {}
        return (s.get("desiredNumberScheduled"), s.get("numberMisscheduled")) == (3, 1)

    await until(misscheduled)
    await c.patch(f"{DAEMONSETS}/kept", {"spec": {"template": {"spec": {"containers": [
        {"name": "a", "image": "agent:2"}]}}}}, patch_type="strategic")
    await until(lambda: on_nodes(c, "kept", NODES - {"sim-node-1"}, image="agent:2"))

    async def rolled_out() -> bool:
        s = (await c.get(f"{DAEMONSETS}/kept")).get("status") or {}
        return (s.get("desiredNumberScheduled"), s.get("updatedNumberScheduled"), s.get("numberAvailable"),
                s.get("numberMisscheduled", 0)) == (3, 3, 3, 0)

    await until(rolled_out)


async def test_a_surging_rolling_update_never_leaves_a_node_without_a_ready_pod(c: Client) -> None:
    await c.create(DAEMONSETS, {**daemonset("surge"), "spec": {
        **daemonset("surge")["spec"], "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {
            "maxUnavailable": 0, "maxSurge": 1}}}})
    await until(lambda: on_nodes(c, "surge", NODES))
    worst, most = 0, 0
    done = asyncio.Event()

    async def watch() -> None:
        nonlocal worst, most
        while not done.is_set():
            pods = await live_pods(c, "surge")
            ready_nodes = {p["spec"].get("nodeName") for p in pods if any(
                cond["type"] == "Ready" and cond["status"] == "True"
                for cond in (p.get("status") or {}).get("conditions") or ())}
            worst = max(worst, len(NODES - ready_nodes))
            most = max(most, len(pods))
            await asyncio.sleep(0.01)

    watcher = asyncio.create_task(watch())
    try:
        await c.patch(f"{DAEMONSETS}/surge", {"spec": {"template": {"spec": {"containers": [
            {"name": "a", "image": "agent:2"}]}}}}, patch_type="strategic")
        await until(lambda: on_nodes(c, "surge", NODES, image="agent:2"))
    finally:
        done.set()
        await watcher
    assert worst == 0 and most == len(NODES) + 1  # maxUnavailable 0, maxSurge 1

    async def rolled_out() -> bool:
        s = (await c.get(f"{DAEMONSETS}/surge")).get("status") or {}
        return (s.get("updatedNumberScheduled"), s.get("numberAvailable")) == (4, 4)

    await until(rolled_out)


async def test_a_failed_daemon_pod_is_killed_and_replaced_within_a_backoff(
        c: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [1000.0]  # the controller's, for its backoff: moved by hand
    monkeypatch.setattr(daemonsets, "time", SimpleNamespace(monotonic=lambda: clock[0]))
    await c.create(DAEMONSETS, daemonset("crash"))
    await until(lambda: on_nodes(c, "crash", NODES))

    async def fail_on(node: str) -> str:
        (victim,) = [p for p in await live_pods(c, "crash") if p["spec"]["nodeName"] == node]
        await c.patch(f"{PODS}/{victim['metadata']['name']}/status", {"status": {"phase": "Failed"}})
        return str(victim["metadata"]["name"])

    async def replaced(name: str) -> bool:
        return name not in {p["metadata"]["name"] for p in await live_pods(c, "crash")} and \
            await on_nodes(c, "crash", NODES)

    first = await fail_on("sim-node-1")
    await until(lambda: replaced(first))
    events = [e for e in (await c.list("/api/v1/namespaces/default/events"))["items"]
              if e["reason"] == "FailedDaemonPod"]
    assert [(e["type"], e["message"], e["involvedObject"]["name"]) for e in events] == [
        ("Warning", f"Found failed daemon pod default/{first} on node sim-node-1, will try to kill it", "crash")]
    # the node's next failure within its backoff (1 s) is left alone, and gets no pod beside it
    second = await fail_on("sim-node-1")
    await asyncio.sleep(0.3)
    pods = await live_pods(c, "crash")
    assert [p["status"]["phase"] for p in pods if p["spec"]["nodeName"] == "sim-node-1"] == ["Failed"]
    clock[0] += 1.5  # the backoff is over: the next sync kills it
    await c.patch(f"{DAEMONSETS}/crash", {"metadata": {"annotations": {"poke": "1"}}})
    await until(lambda: replaced(second))
