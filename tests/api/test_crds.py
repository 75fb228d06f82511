"""The CRD set of one process: the registry follows it, newest revision wins."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import orjson
import pytest

import store
from controlplane.api.crd_controllers import remove_resources
from controlplane.api.crds import RETIRE_GRACE, CustomResourceDefinitions, scale_paths
from controlplane.api.errors import ApiError
from controlplane.api.fieldvalidation import request_scope, warning_headers
from controlplane.api.scale import scale_of, with_spec_replicas
from controlplane.registry import Registry
from controlplane.registry.crd import set_defaults, set_status, terminate


def definition(versions: tuple[str, ...] = ("v1",)) -> dict[str, Any]:
    crd: dict[str, Any] = {
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": "widgets", "kind": "Widget"},
                 "versions": [{"name": v, "served": True, "storage": v == versions[0],
                               "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                                   "spec": {"type": "object", "properties": {"size": {"type": "integer"}}}}}}}
                              for v in versions]},
    }
    set_defaults(crd)
    set_status(crd, None, [])
    return crd


@pytest.fixture
def crds() -> CustomResourceDefinitions:
    registry = Registry()
    crd_type = registry.get("apiextensions.k8s.io", "v1", "customresourcedefinitions")
    assert crd_type is not None
    return CustomResourceDefinitions(registry, crd_type)


def served(crds: CustomResourceDefinitions) -> list[str]:
    return sorted(t.version for t in crds._registry.all() if t.group == "example.com")


def test_observe_adds_replaces_and_removes_types(crds: CustomResourceDefinitions) -> None:
    crds.observe("widgets.example.com", definition(), 5)
    assert served(crds) == ["v1"]
    crds.observe("widgets.example.com", definition(("v1", "v2")), 6)
    assert served(crds) == ["v1", "v2"]
    crds.observe("widgets.example.com", None, 7)
    assert served(crds) == []
    assert crds.all() == []


def test_an_older_state_changes_nothing(crds: CustomResourceDefinitions) -> None:
    crds.observe("widgets.example.com", definition(("v1", "v2")), 9)
    crds.observe("widgets.example.com", definition(), 8)  # the watch delivering an older write
    assert served(crds) == ["v1", "v2"]
    crds.observe("widgets.example.com", None, 10)
    crds.observe("widgets.example.com", definition(), 9)
    assert served(crds) == []


def test_admission_of_custom_resources(crds: CustomResourceDefinitions) -> None:
    crds.observe("widgets.example.com", definition(), 5)
    rtype = crds._registry.get("example.com", "v1", "widgets")
    assert rtype is not None
    obj: dict[str, Any] = {"metadata": {"name": "w"}, "spec": {"size": 2, "colour": "red"}}
    crds.admit_resource(rtype, obj, None)
    assert obj["spec"] == {"size": 2}
    with pytest.raises(ApiError) as err:
        crds.admit_resource(rtype, {"metadata": {"name": "w"}, "spec": {"size": "big"}}, None)
    assert err.value.code == 422
    assert err.value.message == ('Widget.example.com "w" is invalid: spec.size: Invalid value: "string": '
                                 'spec.size in body must be of type integer: "string"')
    strict = {"type": "http", "method": "POST", "query_string": b"fieldValidation=Strict"}
    with request_scope(strict), pytest.raises(ApiError) as err:
        crds.admit_resource(rtype, {"metadata": {"name": "w"}, "spec": {"size": 1, "x": 1}}, None)
    assert err.value.code == 400
    assert err.value.message == ('Widget in version "v1" cannot be handled as a Widget: strict decoding error: '
                                 'unknown field "spec.x"')
    with request_scope({"type": "http", "method": "POST", "query_string": b""}):  # Warn, the default
        crds.admit_resource(rtype, {"metadata": {"name": "w"}, "spec": {"size": 1, "x": 1}}, None)
        assert warning_headers() == [(b"warning", b'299 - "unknown field \\"spec.x\\""')]


def test_no_new_resources_while_the_crd_terminates(crds: CustomResourceDefinitions) -> None:
    crd = definition()
    crds.observe("widgets.example.com", crd, 5)
    rtype = crds._registry.get("example.com", "v1", "widgets")
    assert rtype is not None
    deleting = copy.deepcopy(crd)
    terminate(deleting)
    crds.observe("widgets.example.com", deleting, 6)
    assert crds.terminating() == ["widgets.example.com"]
    with pytest.raises(ApiError) as err:
        crds.admit_resource(rtype, {"metadata": {"name": "w"}, "spec": {}}, None)
    assert err.value.code == 405
    crds.admit_resource(rtype, {"metadata": {"name": "w"}, "spec": {}}, {"metadata": {"name": "w"}})  # updates: fine


def test_admission_of_definitions_sets_the_status(crds: CustomResourceDefinitions) -> None:
    crd = definition()
    del crd["status"]
    crds.admit_definition(crd, None, None)
    assert crd["status"]["acceptedNames"]["plural"] == "widgets"
    bad = definition()
    bad["spec"]["scope"] = "Everywhere"
    with pytest.raises(ApiError) as err:
        crds.admit_definition(bad, None, None)
    assert err.value.code == 422
    assert err.value.message.startswith('CustomResourceDefinition.apiextensions.k8s.io "widgets.example.com" is '
                                        'invalid: spec.scope: Unsupported value: "Everywhere"')


def test_types_are_rebuilt_only_when_what_makes_them_changes(crds: CustomResourceDefinitions) -> None:
    crd = definition()
    crds.observe("widgets.example.com", crd, 5)
    before = crds._registry.get("example.com", "v1", "widgets")
    labelled = copy.deepcopy(crd)
    labelled["metadata"]["labels"] = {"a": "b"}
    crds.observe("widgets.example.com", labelled, 6)
    assert crds._registry.get("example.com", "v1", "widgets") is before
    changed = copy.deepcopy(crd)
    changed["spec"]["versions"][0]["additionalPrinterColumns"] = [
        {"name": "Size", "type": "integer", "jsonPath": ".spec.size"}]
    crds.observe("widgets.example.com", changed, 7)
    after = crds._registry.get("example.com", "v1", "widgets")
    assert after is not None and after is not before
    assert after.custom is not None and after.custom.printer_columns[0]["name"] == "Size"


async def test_watches_end_when_their_type_is_retired(crds: CustomResourceDefinitions) -> None:
    crds.observe("widgets.example.com", definition(), 5)
    rtype = crds._registry.get("example.com", "v1", "widgets")
    assert rtype is not None
    never: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    waiting = asyncio.ensure_future(crds.until_retired(rtype, never))
    await asyncio.sleep(0.01)
    assert not waiting.done()
    crds.observe("widgets.example.com", None, 6)
    # as upstream's tearDown, a second later: a client following the CRDs has seen it go by then
    await asyncio.sleep(RETIRE_GRACE / 2)
    assert not waiting.done()
    await asyncio.wait_for(waiting, RETIRE_GRACE + 1)
    assert never.cancelled()
    # asking about a type already retired returns at once
    await asyncio.wait_for(crds.until_retired(rtype, asyncio.get_running_loop().create_future()), 1)


def test_scale_paths_come_from_the_crd(crds: CustomResourceDefinitions) -> None:
    crd = definition()
    crd["spec"]["versions"][0]["subresources"] = {"scale": {"specReplicasPath": ".spec.size",
                                                            "statusReplicasPath": ".status.count"}}
    crds.observe("widgets.example.com", crd, 5)
    rtype = crds._registry.get("example.com", "v1", "widgets")
    assert rtype is not None and "scale" in rtype.subresources
    paths = scale_paths(rtype)
    obj = {"metadata": {"name": "w"}, "spec": {"size": 3, "selector": {"matchLabels": {"a": "b"}}},
           "status": {"count": 2}}
    assert scale_of(obj, paths)["spec"] == {"replicas": 3}
    assert scale_of(obj, paths)["status"] == {"replicas": 2}  # no labelSelectorPath: no selector
    assert with_spec_replicas(obj, 5, paths)["spec"]["size"] == 5
    builtin = crds._registry.get("apps", "v1", "deployments")
    assert builtin is not None and scale_paths(builtin).spec_replicas == ("spec", "replicas")


async def test_the_cleanup_finalizer_is_removed_through_any_number_of_conflicts(
        crds: CustomResourceDefinitions, tmp_path: Any) -> None:
    """Another writer changes the terminating CRD between each of the finalizer's reads
    and its write, 40 times in a row (each a real conflict in the store): the finalizer
    reads the newest version again each time, and the CRD is gone once the writer stops.
    It gave up after 16 conflicts, leaving the CRD Terminating for good."""
    st = store.open(f"lmdb://{tmp_path}/store")
    crd = definition()
    terminate(crd)
    crd["metadata"]["deletionTimestamp"] = "2026-12-06T00:00:00Z"
    key = crds.type.key(None, "widgets.example.com")
    interfering = 40
    conflicts: list[int] = []

    class Interfering:
        """The store, but another writer bumps the CRD after each of the first reads of it."""

        def __getattr__(self, attr: str) -> Any:
            return getattr(st, attr)

        async def get(self, k: bytes, revision: int = 0) -> store.KeyValue | None:
            nonlocal interfering
            kv = await st.get(k, revision)
            if k == key and kv is not None and interfering > 0:
                interfering -= 1
                other = orjson.loads(kv.value)
                other["metadata"].setdefault("labels", {})["touched"] = str(interfering)
                await st.update(key, orjson.dumps(other), kv.mod_revision)
            return kv

        async def update(self, k: bytes, value: bytes, expected_revision: int) -> int:
            try:
                return await st.update(k, value, expected_revision)
            except store.Conflict:
                conflicts.append(expected_revision)
                raise

        async def delete(self, k: bytes, expected_revision: int = 0) -> int:
            try:
                return await st.delete(k, expected_revision)
            except store.Conflict:
                conflicts.append(expected_revision)
                raise

    async def delete(*_: Any) -> None:
        raise AssertionError("there are no custom resources to delete")

    try:
        crds.observe("widgets.example.com", crd, await st.create(key, orjson.dumps(crd)))
        await asyncio.wait_for(remove_resources(crds, Interfering(), "widgets.example.com", delete), 30)
        assert len(conflicts) == 40
        assert await st.get(key) is None
        assert crds.get("widgets.example.com") is None
    finally:
        await st.close()
