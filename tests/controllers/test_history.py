"""ControllerRevisions of StatefulSets and DaemonSets (controllers/history.py): one per template,
numbered, made newest again on a return to an old template, trimmed to the history limit, and
collected with their set; and what ``kubectl rollout undo`` sends back restores the template."""

from __future__ import annotations

from typing import Any

from controlplane.client import Client
from controlplane.controllers.history import REVISION_HASH
from tests.controllers.helpers import until
from tests.controllers.test_daemonsets import DAEMONSETS, daemonset
from tests.controllers.test_statefulsets import SETS, pods, rolled_out, statefulset

REVISIONS = "/apis/apps/v1/namespaces/default/controllerrevisions"


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
