"""ControllerRevisions of StatefulSets and DaemonSets (controllers/history.py): one per template,
numbered, made newest again on a return to an old template, trimmed to the history limit, and
collected with their set; and what ``kubectl rollout undo`` sends back restores the template."""

from __future__ import annotations

from typing import Any

from controlplane.client import Client
from controlplane.controllers.history import REVISION_HASH
from controlplane.controllers.workloads import pod_template_hash
from tests.controllers.helpers import until
from tests.controllers.test_daemonsets import DAEMONSETS, daemonset
from tests.controllers.test_statefulsets import SETS, pods, rolled_out, statefulset

REVISIONS = "/apis/apps/v1/namespaces/default/controllerrevisions"
PODS = "/api/v1/namespaces/default/pods"


async def revisions(c: Client, owner: str) -> dict[int, dict[str, Any]]:
    items = (await c.list(REVISIONS))["items"]
    return {r["revision"]: r for r in items
            if any(ref["name"] == owner and ref.get("controller") for ref in r["metadata"].get("ownerReferences", []))}


def image_of(revision: dict[str, Any]) -> str:
    return str(revision["data"]["spec"]["template"]["spec"]["containers"][0]["image"])


async def test_a_statefulset_keeps_its_templates_as_revisions_and_undo_restores_one(client: Client) -> None:
    c = client
    sts = statefulset("hist", 2, podManagementPolicy="Parallel", revisionHistoryLimit=1)
    sts["metadata"]["annotations"] = {"kubernetes.io/change-cause": "first"}
    await c.create(SETS, sts)
    await until(lambda: rolled_out(c, "hist"))
    first = (await revisions(c, "hist"))[1]
    assert first["data"]["spec"]["template"]["$patch"] == "replace" and image_of(first) == "db:1"
    assert first["metadata"]["annotations"]["kubernetes.io/change-cause"] == "first"
    assert first["metadata"]["labels"][REVISION_HASH] in first["metadata"]["name"]
    status = (await c.get(f"{SETS}/hist"))["status"]
    assert status["currentRevision"] == status["updateRevision"] == first["metadata"]["name"]
    assert {p["metadata"]["labels"][REVISION_HASH] for p in (await pods(c, "hist")).values()} == \
        {first["metadata"]["name"]}
    for image in ("db:2", "db:3"):
        await c.patch(f"{SETS}/hist", {"spec": {"template": {"spec": {"containers": [
            {"name": "c", "image": image}]}}}}, patch_type="strategic")
        await until(lambda: rolled_out(c, "hist"))
    history = await until(lambda: _numbered(c, "hist", [2, 3]))  # one old revision kept: 1 is trimmed
    assert [image_of(history[n]) for n in (2, 3)] == ["db:2", "db:3"]
    # kubectl rollout undo --to-revision=2: the revision's data as a strategic merge patch
    await c.patch(f"{SETS}/hist", history[2]["data"], patch_type="strategic")
    await until(lambda: rolled_out(c, "hist"))
    back = await until(lambda: _numbered(c, "hist", [3, 4]))
    assert image_of(back[4]) == "db:2" and back[4]["metadata"]["name"] == history[2]["metadata"]["name"]
    assert {p["spec"]["containers"][0]["image"] for p in (await pods(c, "hist")).values()} == {"db:2"}
    # deleting the set collects its revisions
    await c.delete(f"{SETS}/hist")
    await until(lambda: _numbered(c, "hist", []))


async def _numbered(c: Client, owner: str, numbers: list[int]) -> dict[int, dict[str, Any]] | None:
    """The owner's revisions once they are numbered ``numbers`` (``{0: {}}`` for none at all)."""
    got = await revisions(c, owner)
    if sorted(got) != numbers:
        return None
    return got or {0: {}}


async def test_a_daemonset_records_a_revision_per_template(client: Client) -> None:
    c = client
    await c.create(DAEMONSETS, daemonset("agent"))
    await until(lambda: _numbered(c, "agent", [1]))
    await c.patch(f"{DAEMONSETS}/agent", {"spec": {"template": {"spec": {"containers": [
        {"name": "a", "image": "agent:2"}]}}}}, patch_type="strategic")
    history = await until(lambda: _numbered(c, "agent", [1, 2]))
    assert image_of(history[2]) == "agent:2"
    assert history[2]["metadata"]["labels"][REVISION_HASH] in history[2]["metadata"]["name"]


async def _squat(c: Client, plural: str, body: dict[str, Any]) -> str:
    """The name the set ``body`` would give its first revision (its template as the API stores
    it, read from a twin with no pods), taken by a ControllerRevision of other data that no set
    owns and no selector matches."""
    twin = {**body, "metadata": {"name": body["metadata"]["name"] + "-twin"}}
    if plural == "statefulsets":
        twin["spec"] = {**twin["spec"], "replicas": 0}
    else:  # a DaemonSet's pods only on nodes that do not exist
        twin["spec"] = {**twin["spec"], "template": {**twin["spec"]["template"], "spec": {
            **twin["spec"]["template"]["spec"], "nodeSelector": {"nowhere": "true"}}}}
    stored = await c.create(f"/apis/apps/v1/namespaces/default/{plural}", twin)
    template = stored["spec"]["template"]
    if plural == "daemonsets":
        template["spec"].pop("nodeSelector")
    await c.delete(f"/apis/apps/v1/namespaces/default/{plural}/{twin['metadata']['name']}")
    name = f"{body['metadata']['name']}-{pod_template_hash(template)}"
    await c.create(REVISIONS, {"apiVersion": "apps/v1", "kind": "ControllerRevision",
                               "metadata": {"name": name, "labels": {"app": "squatter"}},
                               "data": {"spec": {"template": {"$patch": "replace", "metadata": {}}}}, "revision": 1})
    return name


async def test_a_revision_name_taken_by_another_bumps_the_sets_collision_count(client: Client) -> None:
    """The name of a set's new revision is a ControllerRevision of other data, not the set's: its
    ``status.collisionCount`` goes to 1 and the revision is named by the hash with that count, its
    pods labelled with it (upstream's CreateControllerRevision); the other revision is left alone.
    It was taken for the set's own and its pods labelled with a revision it did not hold."""
    c = client
    sts = statefulset("coll", 1)
    taken = await _squat(c, "statefulsets", sts)
    await c.create(SETS, sts)
    await until(lambda: rolled_out(c, "coll"))
    got = await c.get(f"{SETS}/coll")
    assert got["status"]["collisionCount"] == 1
    revision = f"coll-{pod_template_hash(got['spec']['template'], 1)}"
    assert got["status"]["updateRevision"] == revision != taken
    assert (await pods(c, "coll"))["coll-0"]["metadata"]["labels"][REVISION_HASH] == revision
    assert [r["metadata"]["name"] for r in (await revisions(c, "coll")).values()] == [revision]
    assert not (await c.get(f"{REVISIONS}/{taken}"))["metadata"].get("ownerReferences")
    # a DaemonSet's the same way, its pods labelled with the new revision's hash
    ds = daemonset("dcoll")
    taken = await _squat(c, "daemonsets", ds)
    await c.create(DAEMONSETS, ds)

    async def collided() -> bool:
        d = await c.get(f"{DAEMONSETS}/dcoll")
        return bool((d.get("status") or {}).get("collisionCount") == 1 and d["status"].get("numberReady"))

    await until(collided)
    d = await c.get(f"{DAEMONSETS}/dcoll")
    hash_ = pod_template_hash(d["spec"]["template"], 1)
    assert [r["metadata"]["name"] for r in (await revisions(c, "dcoll")).values()] == [f"dcoll-{hash_}"]
    daemon_pods = (await c.list(PODS, labelSelector="app=dcoll"))["items"]
    assert daemon_pods and {p["metadata"]["labels"][REVISION_HASH] for p in daemon_pods} == {hash_}
