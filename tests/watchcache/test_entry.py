"""Entries: a DELETED event's version restamped at the delete's revision."""

from __future__ import annotations

import orjson
import pytest

from controlplane.api.stored import with_resource_version
from controlplane.watchcache.entry import entry_json, entry_of, restamped
from controlplane.watchcache.packing import Packer


@pytest.mark.parametrize("served", [
    # the served form: metadata first, its resourceVersion first (spliced in place)
    with_resource_version(b'{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","annotations":'
                          b'{"x":"\\"resourceVersion\\":\\"7\\""}},"spec":{"template":{"metadata":'
                          b'{"resourceVersion":"7"}}}}', 7),
    with_resource_version(b'{"apiVersion":"v1","kind":"Pod","metadata":{}}', 7),
    # not the served form (parsed and serialised again): metadata after another object,
    # a nested metadata first, the resourceVersion not first
    b'{"spec":{"metadata":{"resourceVersion":"7"}},"metadata":{"resourceVersion":"7","name":"p"}}',
    b'{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","resourceVersion":"7"}}',
    b'{"apiVersion":"v1","kind":"Pod","metadata":{"resourceVersion":"70"}}',
])
@pytest.mark.parametrize("packed", [False, True])
def test_restamped_sets_only_the_objects_own_resource_version(served: bytes, packed: bool) -> None:
    obj = orjson.loads(served)
    pack = Packer(0).pack if packed else (lambda b: b)
    entry = entry_of("pods", b"/registry/pods/ns/p", 7, served, obj, pack)
    again = restamped(entry, 12, pack)
    want = orjson.loads(served)
    want["metadata"]["resourceVersion"] = "12"
    assert orjson.loads(entry_json(again)) == want
    assert again[1] == 12 and again[3] == entry[3]
