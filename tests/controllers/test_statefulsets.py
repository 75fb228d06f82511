"""The StatefulSet controller (controllers/statefulsets.py), inside a server with its scheduler and
four simulated nodes."""

from __future__ import annotations

import asyncio
from typing import Any

from controlplane.client import ApiError, Client
from controlplane.controllers.statefulsets import POD_INDEX, POD_NAME, REVISION_HASH
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
