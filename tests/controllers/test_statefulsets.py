"""The StatefulSet controller (controllers/statefulsets.py), inside a server with its scheduler and
four simulated nodes."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from controlplane.client import ApiError, Client
from controlplane.controllers.statefulsets import (
    POD_INDEX,
    POD_NAME,
    REVISION_HASH,
    Plan,
    claim_owners,
    max_unavailable,
)
from tests.controllers.helpers import until

SETS = "/apis/apps/v1/namespaces/default/statefulsets"
PODS = "/api/v1/namespaces/default/pods"


def statefulset(name: str, replicas: int, image: str = "db:1", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": name},
            "spec": {"serviceName": name, "replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"terminationGracePeriodSeconds": 0,
                                           "containers": [{"name": "c", "image": image}]}}, **spec}}


def ready(pod: dict[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or ()
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


async def pods(c: Client, app: str) -> dict[str, dict[str, Any]]:
    items = (await c.list(PODS, labelSelector=f"app={app}"))["items"]
    return {p["metadata"]["name"]: p for p in items if not p["metadata"].get("deletionTimestamp")}


async def rolled_out(c: Client, name: str) -> bool:
    """What ``kubectl rollout status statefulset`` checks."""
    s = await c.get(f"{SETS}/{name}")
    st, replicas = s.get("status") or {}, s["spec"]["replicas"]
    return bool(st.get("observedGeneration", 0) >= s["metadata"]["generation"]) and \
        st.get("readyReplicas", 0) == replicas and st.get("updatedReplicas", 0) == replicas and \
        st.get("currentRevision") == st.get("updateRevision")


async def test_ordered_pods_with_stable_names(client: Client) -> None:
    c = client
    order: list[str] = []
    early: list[str] = []  # pods created while one before them was not Ready
    listed = await c.list(PODS)

    async def watch() -> None:
        async for ev in c.watch(PODS, resource_version=listed["metadata"]["resourceVersion"]):
            if ev.type == "ADDED" and ev.object["metadata"]["name"].startswith("db-"):
                # each pod is created only once all before it are Ready
                before = await pods(c, "db")
                if not all(ready(p) for n, p in before.items() if n != ev.object["metadata"]["name"]):
                    early.append(ev.object["metadata"]["name"])
                order.append(ev.object["metadata"]["name"])

    watcher = asyncio.create_task(watch())
    try:
        await c.create(SETS, statefulset("db", 3))
        await until(lambda: rolled_out(c, "db"))
    finally:
        watcher.cancel()
    assert order == ["db-0", "db-1", "db-2"] and early == []
    assert (await c.get(f"{SETS}/db"))["status"]["collisionCount"] == 0  # a pointer upstream always sets
    got = await pods(c, "db")
    pod = got["db-1"]
    assert (pod["spec"]["hostname"], pod["spec"]["subdomain"]) == ("db-1", "db")
    labels = pod["metadata"]["labels"]
    assert (labels[POD_NAME], labels[POD_INDEX], bool(labels[REVISION_HASH])) == ("db-1", "1", True)
    # a deleted pod comes back under its name; scaling down removes the highest ordinals
    uid = pod["metadata"]["uid"]
    await c.delete(f"{PODS}/db-1")

    async def back() -> bool:
        now = await pods(c, "db")
        return "db-1" in now and now["db-1"]["metadata"]["uid"] != uid and ready(now["db-1"])

    await until(back)
    await c.patch(f"{SETS}/db", {"spec": {"replicas": 1}})

    async def scaled() -> bool:
        return sorted(await pods(c, "db")) == ["db-0"]

    await until(scaled)


async def test_a_rolling_update_goes_from_the_highest_ordinal_down_to_the_partition(client: Client) -> None:
    c = client
    await c.create(SETS, statefulset("part", 4, updateStrategy={"type": "RollingUpdate",
                                                                "rollingUpdate": {"partition": 2}}))
    await until(lambda: rolled_out(c, "part"))
    await c.patch(f"{SETS}/part", {"spec": {"template": {"spec": {"containers": [
        {"name": "c", "image": "db:2"}]}}}}, patch_type="strategic")

    async def images() -> dict[str, str] | None:
        got = await pods(c, "part")
        out = {n: p["spec"]["containers"][0]["image"] for n, p in got.items() if ready(p)}
        return out if len(out) == 4 else None

    async def partitioned() -> bool:
        return await images() == {"part-0": "db:1", "part-1": "db:1", "part-2": "db:2", "part-3": "db:2"}

    await until(partitioned)
    # a pod below the partition that is lost comes back as it was, not with the new template
    uid = (await pods(c, "part"))["part-0"]["metadata"]["uid"]
    await c.delete(f"{PODS}/part-0")

    async def back_as_it_was() -> bool:
        pod = (await pods(c, "part")).get("part-0")
        return pod is not None and pod["metadata"]["uid"] != uid and ready(pod)

    await until(back_as_it_was)
    assert await partitioned()
    await c.patch(f"{SETS}/part", {"spec": {"updateStrategy": {"rollingUpdate": {"partition": 0}}}})
    await until(lambda: rolled_out(c, "part"))
    assert set((await images() or {}).values()) == {"db:2"}


async def test_parallel_creates_them_all_and_deletion_collects_them(client: Client) -> None:
    c = client
    await c.create(SETS, statefulset("par", 3, podManagementPolicy="Parallel"))
    await until(lambda: rolled_out(c, "par"))
    await c.delete(f"{SETS}/par", {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"})

    async def collected() -> bool:
        try:
            await c.get(f"{SETS}/par")
            return False
        except ApiError:
            return not await pods(c, "par")

    await until(collected)


async def test_a_pod_in_its_grace_period_still_counts_among_replicas_not_updated(client: Client) -> None:
    """As upstream's computeReplicaStatus: while a scaled-away pod runs out its grace period it
    is among ``replicas`` and ``readyReplicas``, but not among ``current``/``updatedReplicas``."""
    c = client
    body = statefulset("grace", 2, podManagementPolicy="Parallel")
    body["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = 30
    await c.create(SETS, body)
    await until(lambda: rolled_out(c, "grace"))
    await c.patch(f"{SETS}/grace", {"spec": {"replicas": 1}})

    async def counted() -> dict[str, Any] | None:
        st: dict[str, Any] = (await c.get(f"{SETS}/grace")).get("status") or {}
        return st if st.get("updatedReplicas") == 1 else None

    st = await until(counted)
    leaving = (await c.get(f"{PODS}/grace-1"))["metadata"]
    assert leaving.get("deletionTimestamp")  # (still in its 30 s)
    assert (st["replicas"], st["readyReplicas"], st["currentReplicas"], st["updatedReplicas"]) == (2, 2, 1, 1)


def image(pod: dict[str, Any]) -> str:
    return str(pod["spec"]["containers"][0]["image"])


async def replacements(c: Client, old: Callable[[dict[str, Any]], bool], out: list[tuple[str, str]]) -> None:
    """Record, as a rollout goes, each pod of the old template going (``gone``) and each pod of
    another becoming Ready (``ready``), in the order the watch shows them."""
    listed = await c.list(PODS)
    seen: set[tuple[str, str]] = set()
    async for ev in c.watch(PODS, resource_version=listed["metadata"]["resourceVersion"]):
        pod = ev.object
        if ev.type == "DELETED" or pod["metadata"].get("deletionTimestamp"):
            what = ("gone", pod["metadata"]["name"]) if old(pod) else None
        else:
            what = ("ready", pod["metadata"]["name"]) if ready(pod) and not old(pod) else None
        if what is not None and what not in seen:
            seen.add(what)
            out.append(what)


async def test_max_unavailable_replaces_that_many_pods_at_once(client: Client) -> None:
    """MaxUnavailableStatefulSet (on in 1.37): two old pods go before any new one is Ready."""
    c = client
    await c.create(SETS, statefulset("mu", 4, podManagementPolicy="Parallel",
                                     updateStrategy={"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 2}}))
    await until(lambda: rolled_out(c, "mu"))
    events: list[tuple[str, str]] = []
    watcher = asyncio.create_task(replacements(c, lambda p: image(p) == "db:1", events))
    try:
        await asyncio.sleep(0.1)
        await c.patch(f"{SETS}/mu", {"spec": {"template": {"spec": {"containers": [
            {"name": "c", "image": "db:2"}]}}}}, patch_type="strategic")
        await until(lambda: rolled_out(c, "mu"))
    finally:
        watcher.cancel()
    assert set(events[:2]) == {("gone", "mu-3"), ("gone", "mu-2")}, events
    assert {n for kind, n in events if kind == "gone"} == {"mu-0", "mu-1", "mu-2", "mu-3"}


async def test_parallel_replaces_old_pods_that_never_became_available_at_once(client: Client) -> None:
    """kubernetes#137409, fixed in 1.37: a first revision whose pods cannot run (here they fit
    no node) does not hold up the next under Parallel; its pods all go, beyond the budget."""
    c = client
    body = statefulset("fix", 2, podManagementPolicy="Parallel")
    body["spec"]["template"]["spec"]["nodeSelector"] = {"pool": "none"}
    await c.create(SETS, body)

    async def both_pending() -> bool:
        return sorted(await pods(c, "fix")) == ["fix-0", "fix-1"]

    await until(both_pending)
    events: list[tuple[str, str]] = []
    watcher = asyncio.create_task(replacements(c, lambda p: bool(p["spec"].get("nodeSelector")), events))
    try:
        await asyncio.sleep(0.1)
        await c.patch(f"{SETS}/fix", {"spec": {"template": {"spec": {"nodeSelector": None}}}})
        await until(lambda: rolled_out(c, "fix"))
    finally:
        watcher.cancel()
    assert set(events[:2]) == {("gone", "fix-0"), ("gone", "fix-1")}, events


async def test_a_pod_that_ended_is_replaced_under_its_name(client: Client) -> None:
    """Failed or Succeeded alike (an evicted pod's phase is its containers' exit's), as upstream."""
    c = client
    await c.create(SETS, statefulset("ended", 1))
    await until(lambda: rolled_out(c, "ended"))
    uid = (await pods(c, "ended"))["ended-0"]["metadata"]["uid"]
    await c.patch(f"{PODS}/ended-0/status", {"status": {"phase": "Succeeded"}})

    async def replaced() -> bool:
        pod = (await pods(c, "ended")).get("ended-0")
        return pod is not None and pod["metadata"]["uid"] != uid and ready(pod)

    await until(replaced)


async def test_a_set_deleted_with_orphan_and_made_again_takes_its_pods_and_history_back(client: Client) -> None:
    """``kubectl delete sts --cascade=orphan`` then the set again (how a set's immutable fields are
    changed): upstream's collector lets go of the pods and the ControllerRevisions, and the new set
    adopts both (ClaimPods, for the pods named as its own; ClaimControllerRevisions)."""
    c = client
    await c.create(SETS, statefulset("orph", 2))
    await until(lambda: rolled_out(c, "orph"))
    before = {n: p["metadata"]["uid"] for n, p in (await pods(c, "orph")).items()}
    revisions = "/apis/apps/v1/namespaces/default/controllerrevisions"
    (revision,) = (await c.list(revisions, labelSelector="app=orph"))["items"]
    # a bare pod the selector matches but not named as the set's is left alone
    await c.create(PODS, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "orph-x", "labels": {"app": "orph"}},
                          "spec": {"containers": [{"name": "c", "image": "db:1"}]}})
    await c.delete(f"{SETS}/orph", {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Orphan"})

    async def gone() -> bool:
        try:
            await c.get(f"{SETS}/orph")
        except ApiError as e:
            return e.code == 404
        return False

    await until(gone)
    kept = await c.get(f"{revisions}/{revision['metadata']['name']}")
    assert not kept["metadata"].get("ownerReferences")  # let go, not collected
    assert all(not p["metadata"].get("ownerReferences") for p in (await pods(c, "orph")).values())
    new = (await c.create(SETS, statefulset("orph", 2)))["metadata"]["uid"]

    async def adopted() -> bool:
        now = await pods(c, "orph")
        owners = {n: [r["uid"] for r in p["metadata"].get("ownerReferences") or ()] for n, p in now.items()}
        return owners == {"orph-0": [new], "orph-1": [new], "orph-x": []} and await rolled_out(c, "orph")

    await until(adopted)
    assert {n: p["metadata"]["uid"] for n, p in (await pods(c, "orph")).items() if n != "orph-x"} == before
    (again,) = (await c.list(revisions, labelSelector="app=orph"))["items"]
    assert again["metadata"]["uid"] == revision["metadata"]["uid"]
    assert [r["uid"] for r in again["metadata"]["ownerReferences"]] == [new]


async def test_ordinals_start_where_the_set_says(client: Client) -> None:
    c = client
    await c.create(SETS, statefulset("ord", 2, podManagementPolicy="Parallel", ordinals={"start": 3}))
    await until(lambda: rolled_out(c, "ord"))
    got = await pods(c, "ord")
    assert {n: p["metadata"]["labels"][POD_INDEX] for n, p in got.items()} == {"ord-3": "3", "ord-4": "4"}
    assert got["ord-4"]["spec"]["hostname"] == "ord-4"
    await c.patch(f"{SETS}/ord", {"spec": {"ordinals": {"start": 0}}})

    async def moved() -> bool:
        return sorted(await pods(c, "ord")) == ["ord-0", "ord-1"] and await rolled_out(c, "ord")

    await until(moved)


async def test_ordered_pods_wait_for_min_ready_seconds(client: Client) -> None:
    """OrderedReady creates the next pod once the one before has been Ready for minReadySeconds
    (timestamps are to the second: 2 s here, at least 1 s seen)."""
    c = client
    listed = await c.list(PODS)
    ready_at: dict[str, float] = {}
    created_at: dict[str, float] = {}

    async def watch() -> None:
        async for ev in c.watch(PODS, resource_version=listed["metadata"]["resourceVersion"]):
            name, now = ev.object["metadata"]["name"], asyncio.get_running_loop().time()
            created_at.setdefault(name, now)
            if ready(ev.object):
                ready_at.setdefault(name, now)

    watcher = asyncio.create_task(watch())
    try:
        await c.create(SETS, statefulset("slow", 2, minReadySeconds=2))

        async def second() -> bool:
            return "slow-1" in created_at

        await until(second)
    finally:
        watcher.cancel()
    assert created_at["slow-1"] - ready_at["slow-0"] >= 1.0, (ready_at, created_at)


def test_max_unavailable_is_a_count_or_a_percent_rounded_down_at_least_one() -> None:
    assert [max_unavailable(v, 5) for v in (None, 1, 3, "40%", "10%", "100%")] == [1, 1, 3, 2, 1, 5]


def test_a_pod_below_the_partition_is_made_with_the_current_revision() -> None:
    sts = statefulset("p", 4, updateStrategy={"type": "RollingUpdate", "rollingUpdate": {"partition": 2}})
    plan = Plan.of(sts)
    assert [plan.keeps_current(i, 0) for i in range(4)] == [True, True, False, False]
    # a rolling update without parameters: where the rollout has not reached (currentReplicas)
    plan = Plan.of(statefulset("p", 4, updateStrategy={"type": "RollingUpdate"}))
    assert [plan.keeps_current(i, 3) for i in range(4)] == [True, True, True, False]
    assert not Plan.of(statefulset("p", 4, updateStrategy={"type": "OnDelete"})).keeps_current(0, 4)


def test_claim_owners_follow_the_retention_policy() -> None:
    """upstream's updateClaimOwnerRefForSetAndPod, for each policy and a pod kept or scaled away."""
    def owned(when_deleted: str, when_scaled: str, scaled_down: bool, refs: list[dict[str, Any]] | None = None
              ) -> list[tuple[str, str]] | None:
        sts = {"metadata": {"name": "s", "uid": "S"}, "spec": {"persistentVolumeClaimRetentionPolicy": {
            "whenDeleted": when_deleted, "whenScaled": when_scaled}}}
        got = claim_owners(refs or [], sts, {"metadata": {"name": "s-0", "uid": "P"}}, scaled_down)
        return None if got is None else [(r["kind"], r["uid"]) for r in got]

    assert [owned(d, w, down) for d, w, down in (
        ("Retain", "Retain", True), ("Delete", "Retain", False), ("Delete", "Retain", True),
        ("Retain", "Delete", False), ("Retain", "Delete", True), ("Delete", "Delete", False),
        ("Delete", "Delete", True))] == [
        [], [("StatefulSet", "S")], [("StatefulSet", "S")], [], [("Pod", "P")], [("StatefulSet", "S")], [("Pod", "P")]]
    # another owner stays; another controller's claim gets none of ours; a set of that name before is left alone
    other = {"apiVersion": "v1", "kind": "ConfigMap", "name": "c", "uid": "C"}
    assert owned("Delete", "Retain", False, [other]) == [("ConfigMap", "C"), ("StatefulSet", "S")]
    assert owned("Delete", "Retain", False, [{**other, "controller": True}]) == [("ConfigMap", "C")]
    stale = {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "s", "uid": "OLD", "controller": True}
    assert owned("Delete", "Delete", True, [stale]) is None
