"""The index of a cache's current keys by one field's value, against its definition."""

from __future__ import annotations

import random
import time

import orjson

from controlplane.registry.attrs import field_names
from controlplane.watchcache.entry import CacheEvent, Entry, entry_of, restamped
from controlplane.watchcache.valueindex import LIST_MAX, ValueIndex

AT = field_names("pods").index("spec.nodeName")


def version(name: str, node: str, revision: int) -> Entry:
    obj = {"apiVersion": "v1", "kind": "Pod", "spec": {"nodeName": node},
           "metadata": {"name": name, "namespace": "ns", "resourceVersion": str(revision)}}
    return entry_of("pods", f"/registry/pods/ns/{name}".encode(), revision, orjson.dumps(obj), obj)


def test_the_index_is_the_states_keys_by_value_through_binds_moves_deletes_and_a_crowded_node() -> None:
    """Random writes, with one node holding far more than LIST_MAX pods (KWOK-style) and then
    drained: after each batch, ``keys(v)`` is exactly the sorted keys of the state's entries
    whose value is ``v``; unbound pods (``""``) are not held."""
    rng = random.Random(3)
    index = ValueIndex(AT)
    state: dict[bytes, Entry] = {}
    nodes = ["", "crowded", "a", "b"]
    revision = 0
    for batch in range(40):
        events: list[CacheEvent] = []
        for _ in range(200):
            revision += 1
            name = f"p{rng.randrange(1_500)}"
            key = f"/registry/pods/ns/{name}".encode()
            prev = state.get(key)
            draining = batch >= 30
            if prev is not None and (rng.random() < 0.15 or (draining and rng.random() < 0.8)):
                events.append(CacheEvent("DELETED", restamped(prev, revision), prev, time.perf_counter()))
                del state[key]
                continue
            if draining:
                continue
            node = "crowded" if rng.random() < 0.7 else rng.choice(nodes)
            entry = version(name, node, revision)
            events.append(CacheEvent("MODIFIED" if prev else "ADDED", entry, prev, time.perf_counter()))
            state[key] = entry
        index.apply(events)
        for node in nodes[1:]:
            assert index.keys(node) == sorted(k for k, e in state.items() if e[3][1][AT] == node)
        assert index.keys("") == []
        if batch == 29:
            assert len(index.keys("crowded")) > LIST_MAX  # held in a dict by now
    assert len(index) == sum(1 for e in state.values() if e[3][1][AT])
    fresh = ValueIndex(AT)
    fresh.load(sorted(state.items()))
    assert all(fresh.keys(n) == index.keys(n) for n in nodes)
