"""Updates and patches start from the watch cache's version (upstream's cachedExistingObject)
and from the store's when that one is stale: no lost write, no false 409."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import orjson
import pytest

from controlplane.client import ApiError, Client, resource_path

CMS = resource_path("", "v1", "configmaps", "default")


def cm(name: str, **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}


async def test_unconditional_updates_racing_all_land(client: Client) -> None:
    await client.create(CMS, cm("race"))

    async def put(i: int) -> None:
        current = await client.get(f"{CMS}/race")
        body = {**current, "data": {**(current.get("data") or {}), f"k{i}": "v"}}
        body["metadata"].pop("resourceVersion")
        await client.update(f"{CMS}/race", body)

    await asyncio.gather(*(put(i) for i in range(20)))
    # each update replaces the whole object: the last one wins, but none failed with 409


async def test_patches_racing_all_apply(client: Client) -> None:
    await client.create(CMS, cm("patched"))
    await asyncio.gather(*(client.patch(f"{CMS}/patched", {"data": {f"k{i}": "v"}}) for i in range(30)))
    got = await client.get(f"{CMS}/patched")
    assert got["data"] == {f"k{i}": "v" for i in range(30)}  # no patch lost to a stale starting point


async def test_an_update_right_after_a_write_with_its_resource_version_succeeds(client: Client) -> None:
    created = await client.create(CMS, cm("seq", a="1"))
    obj = created
    for i in range(20):  # each write's answer is the next one's precondition, before any cache catches up
        obj = await client.update(f"{CMS}/seq", {**obj, "data": {"a": str(i)}})
    assert (await client.get(f"{CMS}/seq"))["data"] == {"a": "19"}
    stale = {**created, "data": {"a": "stale"}}
    with pytest.raises(ApiError) as e:
        await client.update(f"{CMS}/seq", stale)
    assert e.value.code == 409
    with pytest.raises(ApiError) as e:
        await client.patch(f"{CMS}/seq", {"metadata": {"resourceVersion": created["metadata"]["resourceVersion"]},
                                          "data": {"a": "stale"}})
    assert e.value.code == 409
    assert (await client.get(f"{CMS}/seq"))["data"] == {"a": "19"}


async def test_patches_racing_a_delete_get_404_never_500(client: Client) -> None:
    for round_ in range(5):
        name = f"doomed-{round_}"
        await client.create(CMS, cm(name))

        async def patch(i: int, name: str = name) -> int:
            try:
                await client.patch(f"{CMS}/{name}", {"data": {f"k{i}": "v"}})
                return 200
            except ApiError as e:
                return e.code

        results = await asyncio.gather(*(patch(i) for i in range(10)), client.delete(f"{CMS}/{name}"),
                                       *(patch(i) for i in range(10, 20)))
        codes = {r for r in results if isinstance(r, int)}
        assert codes <= {200, 404}, codes


def test_store_errors_no_verb_answered_map_to_their_status() -> None:
    import store
    from controlplane.api.rest import _store_error

    assert _store_error(store.NotFound(b"/k")).code == 404
    assert _store_error(store.Conflict(b"/k", 1, 2)).reason == "Conflict"
    assert _store_error(store.KeyExists(b"/k")).reason == "AlreadyExists"


async def test_requests_are_observed_by_verb_resource_and_code(client: Client) -> None:
    from controlplane.metrics import REGISTRY

    def count(**labels: str) -> float:
        return REGISTRY.get_sample_value("controlplane_request_duration_seconds_count", labels) or 0.0

    post = {"verb": "POST", "resource": "configmaps", "subresource": "", "scope": "namespace", "code": "201"}
    missing = {"verb": "GET", "resource": "configmaps", "subresource": "", "scope": "resource", "code": "404"}
    before_post, before_missing = count(**post), count(**missing)
    await client.create(CMS, cm("observed"))
    with pytest.raises(ApiError):
        await client.get(f"{CMS}/absent")
    assert count(**post) == before_post + 1
    assert count(**missing) == before_missing + 1


def serve_stale(app: Any, name: str, version: dict[str, Any]) -> None:
    """Make the server's watch cache answer ``version`` as the newest of ConfigMap ``name``
    (a cache behind the store), for the writes that start from it."""
    reads = app.state.front.kube.reads
    latest = reads.latest
    raw = orjson.dumps(version)

    def stale(rtype: Any, key: bytes) -> Any:
        hit = latest(rtype, key)
        if hit is None or not key.endswith(b"/" + name.encode()):
            return hit
        return raw, int(version["metadata"]["resourceVersion"])

    reads.latest = stale


async def test_a_delete_starts_from_the_cache_and_judges_preconditions_on_the_stores_version(
        tmp_path: Path) -> None:
    """A delete reads the cache's version first, as updates do; when that version is stale
    (here: the cache made to answer the first version of the object), its preconditions are
    judged on the store's version, not refused, and the delete expects the store's revision."""
    from controlplane.api.app import create_app
    from controlplane.config import Config

    app = create_app(Config(data_dir=tmp_path / "data", tls=False, scheduler=False))
    async with app.router.lifespan_context(app), Client.in_process(app.state.front) as c:
        first = await c.create(CMS, cm("d", a="1"))
        newest = await c.update(f"{CMS}/d", {**first, "data": {"a": "2"}})
        serve_stale(app, "d", first)
        with pytest.raises(ApiError) as e:
            await c.delete(f"{CMS}/d", {"preconditions": {"resourceVersion": first["metadata"]["resourceVersion"]}})
        assert e.value.code == 409  # stale on the store's version too
        with pytest.raises(ApiError) as e:
            await c.delete(f"{CMS}/d", {"preconditions": {"uid": "not-its-uid"}})
        assert e.value.code == 409
        await c.delete(f"{CMS}/d", {"preconditions": {"resourceVersion": newest["metadata"]["resourceVersion"]}})
        with pytest.raises(ApiError) as e:
            await c.get(f"{CMS}/d")
        assert e.value.code == 404


async def test_deletes_right_after_writes_with_their_resource_version_succeed(client: Client) -> None:
    for i in range(20):
        made = await client.create(CMS, cm(f"gone-{i}"))
        updated = await client.update(f"{CMS}/gone-{i}", {**made, "data": {"a": str(i)}})
        await client.delete(f"{CMS}/gone-{i}", {"preconditions": {
            "resourceVersion": updated["metadata"]["resourceVersion"], "uid": made["metadata"]["uid"]}})
    assert not (await client.list(CMS)).get("items")


async def test_a_delete_an_admission_policy_denies_on_a_stale_version_is_judged_on_the_stores(
        tmp_path: Path) -> None:
    """As upstream's conditional delete, a validating admission policy's refusal of the
    cache's version is checked again on a fresh read: the label that made it refuse was
    taken off before the delete."""
    from controlplane.api.app import create_app
    from controlplane.config import Config

    policies = resource_path("admissionregistration.k8s.io", "v1", "validatingadmissionpolicies")
    bindings = resource_path("admissionregistration.k8s.io", "v1", "validatingadmissionpolicybindings")
    app = create_app(Config(data_dir=tmp_path / "data", tls=False, scheduler=False))
    async with app.router.lifespan_context(app), Client.in_process(app.state.front) as c:
        await c.create(policies, {"metadata": {"name": "protect"}, "spec": {
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                                    "operations": ["DELETE"], "resources": ["configmaps"]}]},
            "validations": [{"expression": "!has(oldObject.metadata.labels) "
                                           "|| !('protected' in oldObject.metadata.labels)"}]}})
        await c.create(bindings, {"metadata": {"name": "protect"}, "spec": {
            "policyName": "protect", "validationActions": ["Deny"]}})
        first = await c.create(CMS, {**cm("locked"), "metadata": {"name": "locked", "labels": {"protected": "y"}}})
        while True:  # the binding is in force (admission reads the watch cache)
            try:
                await c.delete(f"{CMS}/locked", {"dryRun": ["All"]})
            except ApiError:
                break
            await asyncio.sleep(0.01)
        unlocked = {**first, "metadata": {**first["metadata"], "labels": {}}}
        await c.update(f"{CMS}/locked", unlocked)
        serve_stale(app, "locked", first)
        await c.delete(f"{CMS}/locked")
        with pytest.raises(ApiError) as e:
            await c.get(f"{CMS}/locked")
        assert e.value.code == 404


async def test_an_update_or_patch_refused_on_a_stale_version_is_judged_on_the_stores(tmp_path: Path) -> None:
    """As upstream's GuaranteedUpdate, a write refused on the cache's version (which may be
    behind) is tried again on the store's: here a terminating object's own deletionTimestamp,
    sent back by an update and a patch, was 'field is immutable' against the version from
    before the delete."""
    from controlplane.api.app import create_app
    from controlplane.config import Config

    app = create_app(Config(data_dir=tmp_path / "data", tls=False, scheduler=False))
    async with app.router.lifespan_context(app), Client.in_process(app.state.front) as c:
        first = await c.create(CMS, {**cm("held"), "metadata": {"name": "held", "finalizers": ["example.com/f"]}})
        await c.delete(f"{CMS}/held")
        terminating = await c.get(f"{CMS}/held")
        serve_stale(app, "held", first)
        body = {**terminating, "data": {"a": "1"}}
        body["metadata"] = {k: v for k, v in terminating["metadata"].items() if k != "resourceVersion"}
        assert (await c.update(f"{CMS}/held", body))["data"] == {"a": "1"}
        patched = await c.patch(f"{CMS}/held", {"metadata": {
            "deletionTimestamp": terminating["metadata"]["deletionTimestamp"]}, "data": {"a": "2"}})
        assert patched["data"] == {"a": "2"}
        # a refusal the store's version earns too still stands
        with pytest.raises(ApiError) as e:
            await c.patch(f"{CMS}/held", {"metadata": {"deletionGracePeriodSeconds": 30}})
        assert e.value.code == 422
