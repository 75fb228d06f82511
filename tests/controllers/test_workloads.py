"""The Deployment and ReplicaSet controllers and their garbage collection (controllers/workloads.py),
inside a server with its scheduler and simulated nodes, through the in-process client."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from controlplane.api.app import create_app
from controlplane.client import ApiError, Client
from controlplane.config import Config
from controlplane.controllers.workloads import HASH_LABEL, REVISION, WorkloadController, pod_template_hash
from tests.controllers.helpers import until

DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"
REPLICASETS = "/apis/apps/v1/namespaces/default/replicasets"
PODS = "/api/v1/namespaces/default/pods"


def deployment(name: str, replicas: int, image: str = "nginx:1.27", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"terminationGracePeriodSeconds": 0,
                                           "containers": [{"name": "c", "image": image}]}}, **spec}}


async def pods_of(c: Client, app: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = (await c.list(PODS, labelSelector=f"app={app}"))["items"]
    return items


def live(pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [p for p in pods if not p["metadata"].get("deletionTimestamp")]


async def rolled_out(c: Client, name: str) -> bool:
    """What ``kubectl rollout status`` checks."""
    d = await c.get(f"{DEPLOYMENTS}/{name}")
    s, replicas = d.get("status") or {}, d["spec"]["replicas"]
    return bool(s.get("observedGeneration", 0) >= d["metadata"]["generation"]) and \
        s.get("updatedReplicas", 0) == replicas and s.get("replicas", 0) == replicas and \
        s.get("availableReplicas", 0) == replicas


def test_the_pod_template_hash_is_a_stable_label_value() -> None:
    template = deployment("x", 1)["spec"]["template"]
    h = pod_template_hash(template)
    assert h == pod_template_hash(dict(reversed(list(template.items()))))  # key order does not matter
    assert h != pod_template_hash(deployment("x", 1, image="other")["spec"]["template"])
    assert h != pod_template_hash(template, collisions=1)
    assert h.isalnum() and len(h) <= 10 and not set(h) & set("aeiou013")


async def test_a_deployment_runs_its_pods_through_a_replicaset(client: Client) -> None:
    c = client
    await c.create(DEPLOYMENTS, deployment("web", 3))
    await until(lambda: rolled_out(c, "web"))
    (rs,) = (await c.list(REPLICASETS))["items"]
    h = rs["metadata"]["labels"][HASH_LABEL]
    assert rs["metadata"]["name"] == f"web-{h}" and rs["metadata"]["annotations"][REVISION] == "1"
    assert rs["spec"]["selector"]["matchLabels"] == {"app": "web", HASH_LABEL: h}
    assert rs["metadata"]["ownerReferences"][0]["kind"] == "Deployment"
    pods = await pods_of(c, "web")
    assert len(pods) == 3
    for pod in pods:
        assert pod["metadata"]["name"].startswith(f"web-{h}-")
        # (and its node's zone and region, which the binding put there: PodTopologyLabelsAdmission)
        own = {k: v for k, v in pod["metadata"]["labels"].items() if not k.startswith("topology.kubernetes.io/")}
        assert own == {"app": "web", HASH_LABEL: h}
        (ref,) = pod["metadata"]["ownerReferences"]
        assert (ref["kind"], ref["uid"], ref["controller"]) == ("ReplicaSet", rs["metadata"]["uid"], True)
        assert pod["status"]["phase"] == "Running"
    d = await c.get(f"{DEPLOYMENTS}/web")
    assert {cond["type"]: cond["reason"] for cond in d["status"]["conditions"]} == {
        "Available": "MinimumReplicasAvailable", "Progressing": "NewReplicaSetAvailable"}
    assert d["metadata"]["annotations"][REVISION] == "1"
    rs = await c.get(f"{REPLICASETS}/{rs['metadata']['name']}")
    assert {k: rs["status"][k] for k in ("replicas", "readyReplicas", "availableReplicas")} == {
        "replicas": 3, "readyReplicas": 3, "availableReplicas": 3}

    # scale down: the controller deletes, and a pod deleted by hand is replaced
    await c.patch(f"{DEPLOYMENTS}/web", {"spec": {"replicas": 2}})
    await until(lambda: rolled_out(c, "web"))
    assert len(live(await pods_of(c, "web"))) == 2
    victim = live(await pods_of(c, "web"))[0]["metadata"]["name"]
    await c.delete(f"{PODS}/{victim}")

    async def replaced() -> bool:
        names = {p["metadata"]["name"] for p in live(await pods_of(c, "web"))}
        return len(names) == 2 and victim not in names

    await until(replaced)


async def test_a_rolling_update_stays_within_surge_and_unavailability(client: Client) -> None:
    c = client
    await c.create(DEPLOYMENTS, deployment("roll", 8, strategy={
        "type": "RollingUpdate", "rollingUpdate": {"maxSurge": 2, "maxUnavailable": 1}}))
    await until(lambda: rolled_out(c, "roll"))
    seen: list[tuple[int, int]] = []  # (live pods, ready live pods) at each pod event
    state: dict[str, dict[str, Any]] = {}
    listed = await c.list(PODS)

    async def watch() -> None:
        async for event in c.watch(PODS, resource_version=listed["metadata"]["resourceVersion"]):
            pod = event.object
            if event.type == "BOOKMARK":
                continue
            if event.type == "DELETED":
                state.pop(pod["metadata"]["name"], None)
            else:
                state[pod["metadata"]["name"]] = pod
            alive = live(list(state.values()))
            ready = [p for p in alive if any(cond["type"] == "Ready" and cond["status"] == "True"
                                              for cond in (p.get("status") or {}).get("conditions") or ())]
            seen.append((len(alive), len(ready)))

    for pod in listed["items"]:
        state[pod["metadata"]["name"]] = pod
    watcher = asyncio.create_task(watch())
    try:
        await c.patch(f"{DEPLOYMENTS}/roll", {"spec": {"template": {"spec": {"containers": [
            {"name": "c", "image": "nginx:1.28"}]}}}}, patch_type="strategic")
        await asyncio.sleep(0.2)
        await until(lambda: rolled_out(c, "roll"))
    finally:
        watcher.cancel()
    assert seen, "no pod events"
    assert max(n for n, _ in seen) <= 8 + 2, seen  # maxSurge
    assert min(r for _, r in seen) >= 8 - 1 - 2, seen  # maxUnavailable (ready lags binding by a stage)
    images = {p["spec"]["containers"][0]["image"] for p in live(await pods_of(c, "roll"))}
    assert images == {"nginx:1.28"}
    sets = {rs["metadata"]["annotations"][REVISION]: rs["spec"]["replicas"]
            for rs in (await c.list(REPLICASETS))["items"]}
    assert sets == {"1": 0, "2": 8}


async def test_recreate_removes_the_old_pods_before_the_new(client: Client) -> None:
    c = client
    await c.create(DEPLOYMENTS, deployment("re", 3, strategy={"type": "Recreate"}))
    await until(lambda: rolled_out(c, "re"))
    await c.patch(f"{DEPLOYMENTS}/re", {"spec": {"template": {"spec": {"containers": [
        {"name": "c", "image": "nginx:1.28"}]}}}}, patch_type="strategic")
    mixed = False

    async def done() -> bool:
        nonlocal mixed
        images = {p["spec"]["containers"][0]["image"] for p in live(await pods_of(c, "re"))}
        mixed = mixed or len(images) > 1
        return await rolled_out(c, "re")

    await until(done)
    assert not mixed


async def test_deleting_a_deployment_collects_its_replicasets_and_pods(client: Client) -> None:
    c = client
    await c.create(DEPLOYMENTS, deployment("gc", 2))
    await until(lambda: rolled_out(c, "gc"))
    await c.delete(f"{DEPLOYMENTS}/gc", {"kind": "DeleteOptions", "apiVersion": "v1",
                                          "propagationPolicy": "Background"})

    async def collected() -> bool:
        return not (await c.list(REPLICASETS))["items"] and not await pods_of(c, "gc")

    await until(collected)


async def test_orphan_keeps_the_dependents_and_a_new_owner_adopts_them(client: Client) -> None:
    c = client
    await c.create(DEPLOYMENTS, deployment("orph", 2))
    await until(lambda: rolled_out(c, "orph"))
    (rs,) = (await c.list(REPLICASETS))["items"]
    deleting = await c.delete(f"{DEPLOYMENTS}/orph", {"kind": "DeleteOptions", "apiVersion": "v1",
                                                       "propagationPolicy": "Orphan"})
    assert "orphan" in deleting["metadata"]["finalizers"]

    async def gone() -> bool:
        try:
            await c.get(f"{DEPLOYMENTS}/orph")
        except ApiError as e:
            return e.code == 404
        return False

    await until(gone)
    kept = await c.get(f"{REPLICASETS}/{rs['metadata']['name']}")
    assert not kept["metadata"].get("ownerReferences") and kept["metadata"]["uid"] == rs["metadata"]["uid"]
    assert len(live(await pods_of(c, "orph"))) == 2
    await c.create(DEPLOYMENTS, deployment("orph", 2))
    await until(lambda: rolled_out(c, "orph"))
    (again,) = (await c.list(REPLICASETS))["items"]
    assert again["metadata"]["uid"] == rs["metadata"]["uid"]  # adopted, not replaced
    assert again["metadata"]["ownerReferences"][0]["name"] == "orph"


async def test_foreground_waits_for_the_dependents(client: Client) -> None:
    c = client
    d = deployment("fg", 2)
    d["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = 2  # the pods take 2 s to go
    await c.create(DEPLOYMENTS, d)
    await until(lambda: rolled_out(c, "fg"))
    await c.delete(f"{DEPLOYMENTS}/fg", {"kind": "DeleteOptions", "apiVersion": "v1",
                                         "propagationPolicy": "Foreground"})
    await asyncio.sleep(0.5)
    held = await c.get(f"{DEPLOYMENTS}/fg")
    assert held["metadata"]["finalizers"] == ["foregroundDeletion"] and held["metadata"]["deletionTimestamp"]
    assert await pods_of(c, "fg")  # terminating, not gone yet

    async def all_gone() -> bool:
        try:
            await c.get(f"{DEPLOYMENTS}/fg")
            return False
        except ApiError as e:
            return e.code == 404 and not await pods_of(c, "fg") and not (await c.list(REPLICASETS))["items"]

    await until(all_gone)


async def test_a_rollout_without_progress_exceeds_its_deadline(client: Client) -> None:
    c = client
    stuck = deployment("stuck", 2, progressDeadlineSeconds=2)
    stuck["spec"]["template"]["spec"]["nodeSelector"] = {"zone": "nowhere"}  # its pods never schedule
    await c.create(DEPLOYMENTS, stuck)

    async def progressing() -> dict[str, Any] | None:
        conds = ((await c.get(f"{DEPLOYMENTS}/stuck")).get("status") or {}).get("conditions") or ()
        return next((x for x in conds if x["type"] == "Progressing"), None)

    first = await until(progressing)
    assert (first["status"], first["reason"]) == ("True", "ReplicaSetUpdated")

    async def exceeded() -> dict[str, Any] | None:
        cond = await progressing()
        return cond if cond is not None and cond["reason"] == "ProgressDeadlineExceeded" else None

    cond = await until(exceeded, timeout=15)
    assert cond["status"] == "False" and cond["message"].endswith("has timed out progressing.")
    # a healthy deployment with the same deadline completes instead
    await c.create(DEPLOYMENTS, deployment("fine", 2, progressDeadlineSeconds=2))
    await until(lambda: _complete(c, "fine"))


async def _complete(c: Client, name: str) -> bool:
    conds = ((await c.get(f"{DEPLOYMENTS}/{name}")).get("status") or {}).get("conditions") or ()
    return any(x["type"] == "Progressing" and x["reason"] == "NewReplicaSetAvailable" for x in conds)


async def test_min_ready_seconds_delays_availability(client: Client) -> None:
    c = client
    await c.create(DEPLOYMENTS, deployment("slow", 1, minReadySeconds=2))

    async def counts() -> tuple[int, int]:
        st = (await c.get(f"{DEPLOYMENTS}/slow")).get("status") or {}
        return int(st.get("readyReplicas", 0) or 0), int(st.get("availableReplicas", 0) or 0)

    async def ready_not_available() -> bool:
        return await counts() == (1, 0)

    await until(ready_not_available)
    started = time.monotonic()

    async def available() -> bool:
        return await counts() == (1, 1)

    await until(available, timeout=15)
    assert time.monotonic() - started > 0.5  # it waited for the pod to stay ready


async def test_a_changed_min_ready_seconds_reaches_the_current_replicaset(client: Client) -> None:
    c = client
    await c.create(DEPLOYMENTS, deployment("tuned", 1))

    async def rs_min_ready(want: int) -> bool:
        sets = (await c.list("/apis/apps/v1/namespaces/default/replicasets", labelSelector="app=tuned"))["items"]
        return len(sets) == 1 and sets[0]["spec"].get("minReadySeconds", 0) == want

    await until(lambda: rs_min_ready(0))
    await c.patch(f"{DEPLOYMENTS}/tuned", {"spec": {"minReadySeconds": 3}})
    await until(lambda: rs_min_ready(3))  # the same ReplicaSet (the template did not change)


async def test_a_template_brought_back_takes_the_next_revision_and_annotations_follow(client: Client) -> None:
    """What ``kubectl rollout undo`` and ``rollout history`` rely on: the ReplicaSet of a
    template brought back becomes the newest revision (its old one in revision-history),
    and the Deployment's annotations (change-cause) reach its new ReplicaSet."""
    c = client
    await c.create(DEPLOYMENTS, deployment("undo", 2))
    await until(lambda: rolled_out(c, "undo"))

    async def set_image(image: str, cause: str) -> None:
        await c.patch(f"{DEPLOYMENTS}/undo", {
            "metadata": {"annotations": {"kubernetes.io/change-cause": cause}},
            "spec": {"template": {"spec": {"containers": [{"name": "c", "image": image}]}}}}, patch_type="strategic")
        await until(lambda: rolled_out(c, "undo"))

    async def revisions() -> dict[str, tuple[str, str | None, str | None]]:
        """image -> (revision, revision-history, change-cause) of each ReplicaSet."""
        out = {}
        for rs in (await c.list(REPLICASETS))["items"]:
            a = rs["metadata"]["annotations"]
            out[rs["spec"]["template"]["spec"]["containers"][0]["image"]] = (
                a[REVISION], a.get("deployment.kubernetes.io/revision-history"), a.get("kubernetes.io/change-cause"))
        return out

    await set_image("nginx:1.28", "to 1.28")
    assert await revisions() == {"nginx:1.27": ("1", None, None), "nginx:1.28": ("2", None, "to 1.28")}
    await set_image("nginx:1.27", "back to 1.27")  # as rollout undo: the first template again

    async def undone() -> bool:
        return (await revisions()).get("nginx:1.27") == ("3", "1", "back to 1.27")

    await until(undone)
    assert (await c.get(f"{DEPLOYMENTS}/undo"))["metadata"]["annotations"][REVISION] == "3"
    assert {p["spec"]["containers"][0]["image"] for p in live(await pods_of(c, "undo"))} == {"nginx:1.27"}


async def test_a_replicaset_name_taken_by_another_bumps_the_collision_count(client: Client) -> None:
    """A ReplicaSet named as the Deployment's new one would be, not its own and of another
    template: the Deployment's ``status.collisionCount`` goes to 1 and its ReplicaSet is named
    by the hash with that count (upstream's getNewReplicaSet); the other one is left alone, and
    the controller's own ReplicaSet, once made, bumps nothing more."""
    c = client
    d = await c.create(DEPLOYMENTS, deployment("clash", 2, paused=True))
    first = f"clash-{pod_template_hash(d['spec']['template'])}"
    squatter = deployment("squat", 1)["spec"]
    squatter["selector"]["matchLabels"][HASH_LABEL] = "x"
    squatter["template"]["metadata"]["labels"][HASH_LABEL] = "x"
    await c.create(REPLICASETS, {"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                 "metadata": {"name": first}, "spec": squatter})
    await c.patch(f"{DEPLOYMENTS}/clash", {"spec": {"paused": False}})
    await until(lambda: rolled_out(c, "clash"))
    d = await c.get(f"{DEPLOYMENTS}/clash")
    assert d["status"]["collisionCount"] == 1
    second = f"clash-{pod_template_hash(d['spec']['template'], 1)}"
    assert second != first
    rs = await c.get(f"{REPLICASETS}/{second}")
    assert rs["metadata"]["ownerReferences"][0]["uid"] == d["metadata"]["uid"]
    assert rs["spec"]["template"]["metadata"]["labels"][HASH_LABEL] == second.removeprefix("clash-")
    assert len(live(await pods_of(c, "clash"))) == 2
    other = await c.get(f"{REPLICASETS}/{first}")
    assert not other["metadata"].get("ownerReferences") and other["spec"]["template"]["metadata"]["labels"]["app"] \
        == "squat"
    # scaled, the Deployment keeps its ReplicaSet (found by its template) and its count
    await c.patch(f"{DEPLOYMENTS}/clash", {"spec": {"replicas": 3}})
    await until(lambda: rolled_out(c, "clash"))
    assert (await c.get(f"{DEPLOYMENTS}/clash"))["status"]["collisionCount"] == 1
    names = {r["metadata"]["name"] for r in (await c.list(REPLICASETS))["items"]}
    assert names >= {first, second} and not any(n.startswith("clash-") for n in names - {first, second})


async def test_pods_being_deleted_are_counted_as_terminating_replicas(client: Client) -> None:
    """DeploymentReplicaSetTerminatingReplicas (KEP-3973, beta and on since 1.35): a ReplicaSet
    counts its pods being deleted that have not finished, its Deployment sums them; 0, not
    absent, when there are none."""
    c = client
    body = deployment("term", 2)
    body["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = 30
    await c.create(DEPLOYMENTS, body)
    await until(lambda: rolled_out(c, "term"))

    async def terminating(want: int) -> bool:
        d = await c.get(f"{DEPLOYMENTS}/term")
        (rs,) = (await c.list(REPLICASETS, labelSelector="app=term"))["items"]
        return bool(d["status"].get("terminatingReplicas") == want and rs["status"].get("terminatingReplicas") == want)

    await until(lambda: terminating(0))
    await c.patch(f"{DEPLOYMENTS}/term", {"spec": {"replicas": 1}})
    await until(lambda: terminating(1))  # the pod scaled away has 30 s to stop
    d = await c.get(f"{DEPLOYMENTS}/term")
    assert (d["status"]["replicas"], d["status"]["availableReplicas"]) == (1, 1)
    (gone,) = [p for p in await pods_of(c, "term") if p["metadata"].get("deletionTimestamp")]
    await c.delete(f"{PODS}/{gone['metadata']['name']}", {"gracePeriodSeconds": 0}, gracePeriodSeconds="0")
    await until(lambda: terminating(0))


async def test_a_replicaset_status_counts_its_pods_as_they_were_before_its_deletes(tmp_path: Path) -> None:
    """The pod a scale-down deletes is seen being deleted (its event) before the delete returns,
    as in process it can be: the status that sync writes still counts the pods as the sync found
    them (2 replicas, 0 terminating: upstream's calculateStatus of the lists manageReplicas got),
    never 2 replicas and 1 terminating, which its Deployment summed as 2 and 1; the next sync
    writes 1 and 1."""
    config = Config(data_dir=tmp_path / "data", tls=False, nodes=0, controllers=("*", "-replicaset-controller"))
    app = create_app(config)
    async with app.router.lifespan_context(app):
        client = Client.in_process(app.state.front)
        ctl = WorkloadController(client, deployments=False, collects=False)
        written: list[dict[str, Any]] = []
        real = ctl.rs_client

        class EventFirst:
            """The ReplicaSet controller's client: a pod delete returns once the informer shows it."""

            async def delete(self, path: str, *args: Any, **kw: Any) -> Any:
                got = await real.delete(path, *args, **kw)
                key = "default/" + path.rsplit("/", 1)[1]
                await until(lambda: _shown_deleted(ctl, key))
                return got

            async def patch(self, path: str, body: Any, **kw: Any) -> Any:
                if path.endswith("/status"):
                    written.append(body["status"])
                return await real.patch(path, body, **kw)

            def __getattr__(self, name: str) -> Any:
                return getattr(real, name)

        ctl.rs_client = EventFirst()  # type: ignore[assignment]
        running = [asyncio.create_task(i.run()) for i in (ctl.replicasets, ctl.pods)]
        try:
            for i in (ctl.replicasets, ctl.pods):
                await i.synced.wait()
            body = deployment("held", 2)["spec"]
            body["template"]["metadata"]["finalizers"] = ["example.com/hold"]  # its pods stay terminating
            await client.create(REPLICASETS, {"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                              "metadata": {"name": "held"}, "spec": body})
            await until(lambda: _shown(ctl, "default/held", 1))
            await ctl.sync_replicaset("default/held")
            await until(lambda: _owns(ctl, "default/held", 2))
            await client.patch(f"{REPLICASETS}/held", {"spec": {"replicas": 1}})
            await until(lambda: _shown(ctl, "default/held", 2))
            written.clear()
            await ctl.sync_replicaset("default/held")
            assert [(w.get("replicas"), w.get("terminatingReplicas")) for w in written] == [(2, 0)]
            await ctl.sync_replicaset("default/held")
            assert [(w.get("replicas"), w.get("terminatingReplicas")) for w in written] == [(2, 0), (1, 1)]
        finally:
            for t in running:
                t.cancel()
            for p in (await client.list(PODS, labelSelector="app=held"))["items"]:
                await client.patch(f"{PODS}/{p['metadata']['name']}", {"metadata": {"finalizers": None}})


async def _shown(ctl: WorkloadController, key: str, generation: int) -> bool:
    rs = ctl.replicasets.items.get(key)
    return rs is not None and rs["metadata"].get("generation") == generation


async def _owns(ctl: WorkloadController, key: str, count: int) -> bool:
    rs = ctl.replicasets.items[key]
    pods = ctl.pods_of.of(rs["metadata"]["uid"])
    return len(pods) == count and not ctl.expectations.waiting(rs["metadata"]["uid"])


async def _shown_deleted(ctl: WorkloadController, key: str) -> bool:
    pod = ctl.pods.items.get(key)
    return pod is None or bool(pod["metadata"].get("deletionTimestamp"))
