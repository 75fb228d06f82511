"""Serialise once: a write's response is its stored bytes with the resourceVersion spliced in."""

from __future__ import annotations

from typing import Any

import orjson

from controlplane.api.rest import Written
from controlplane.api.stored import metadata_first as _metadata_first
from controlplane.api.stored import served_form, with_resource_version, without_resource_version


def test_the_resource_version_goes_into_the_objects_own_metadata() -> None:
    obj = _metadata_first({"spec": {"template": {"metadata": {"labels": {"a": "b"}}}},
                           "kind": "Deployment", "apiVersion": "apps/v1", "metadata": {"name": "d"}})
    assert list(obj)[:3] == ["apiVersion", "kind", "metadata"]
    served = orjson.loads(with_resource_version(orjson.dumps(obj), 42))
    assert served["metadata"] == {"resourceVersion": "42", "name": "d"}
    assert served["spec"]["template"]["metadata"] == {"labels": {"a": "b"}}


def test_empty_metadata_and_already_ordered_objects() -> None:
    obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}}
    assert _metadata_first(obj) is obj
    assert orjson.loads(with_resource_version(orjson.dumps(obj), 7))["metadata"] == {"resourceVersion": "7"}


def test_metadatas_empty_collections_are_not_stored_as_go_omits_them() -> None:
    """What the last label's removal (``kubectl label cm x k-``) or a finalizer's leaves."""
    meta: dict[str, Any] = {"name": "x", "labels": {}, "annotations": {}, "finalizers": [], "ownerReferences": [],
                            "managedFields": None, "generateName": ""}
    obj = _metadata_first({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {}})
    assert obj["metadata"] == {"name": "x", "generateName": ""} and obj["data"] == {}
    kept = {"name": "y", "labels": {"a": "b"}, "finalizers": ["f"]}
    assert _metadata_first({"apiVersion": "v1", "kind": "ConfigMap", "metadata": dict(kept)})["metadata"] == kept


def test_written_is_a_dict_that_carries_its_json() -> None:
    w = Written({"a": 1}, b'{"a":1}')
    assert w == {"a": 1} and w.raw == b'{"a":1}'
    assert orjson.loads(orjson.dumps(w)) == {"a": 1}


def test_without_resource_version_gives_back_the_stored_bytes() -> None:
    for obj in ({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}},
                {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"a": "b"}}, "spec": {}}):
        stored = orjson.dumps(obj)
        assert without_resource_version(with_resource_version(stored, 9), 9) == stored
    # bytes not shaped by with_resource_version (another revision, another key order): parsed
    odd = b'{"metadata":{"name":"p","resourceVersion":"3"},"kind":"Pod"}'
    assert orjson.loads(without_resource_version(odd, 3)) == {"metadata": {"name": "p"}, "kind": "Pod"}


def test_bytes_read_from_the_store_are_served_spliced_only_in_the_stored_form() -> None:
    """What the watch cache does with a version it did not write (``build_entry``): the splice
    where the bytes are as this server stores them, else None (parsed and serialised)."""
    stored = orjson.dumps(_metadata_first({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
                                           "spec": {"template": {"metadata": {"labels": {"a": "b"}}}}}))
    served = served_form(stored, 9)
    assert served == with_resource_version(stored, 9) and without_resource_version(served, 9) == stored
    assert orjson.loads(served)["metadata"] == {"resourceVersion": "9", "name": "d"}
    for other in (
        b'{"kind":"Deployment","spec":{"metadata":{"a":1}},"metadata":{"name":"d"}}',  # a nested metadata first
        b'{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","resourceVersion":"3"}}',  # one of its own
        b'{"apiVersion":"v1","kind":"Event","metadata":{"name":"e"},'
        b'"involvedObject":{"resourceVersion":"3"}}',  # a reference's: not told apart without a parse
        b'{"tags":["a"],"metadata":{"name":"x"}}', b'{"apiVersion":"v1","kind":"Pod"}',
    ):
        assert served_form(other, 9) is None, other
