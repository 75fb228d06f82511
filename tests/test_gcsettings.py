"""gcsettings: what is put out of the cyclic collector's sight, and that nothing is lost by it."""

from __future__ import annotations

import gc
import weakref
from typing import Any

import orjson

from controlplane.client.informer import strip_managed_fields
from controlplane.client.sharing import NodeSharer, PodSharer
from controlplane.gcsettings import untrack_json, untracked
from controlplane.podgen import PodGenerator
from controlplane.registry.attrs import attrs_of
from controlplane.watchcache.entry import CacheEvent, build_entry, entry_of, restamped


def containers(value: Any) -> list[Any]:
    """Every dict and list in ``value``, itself included."""
    out: list[Any] = []
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            out.append(v)
            stack.extend(v.values())
        elif isinstance(v, list | tuple):
            out.append(v)
            stack.extend(v)
    return out


def test_the_collector_leaves_nested_tuples_and_any_dict_holder_tracked() -> None:
    """Why ``untracked`` and ``untrack_json`` exist: what CPython does by itself."""
    held = {"t": tuple([{"a": "b"} for _ in range(3)]), "d": {"x": {"y": "z"}}}
    gc.collect()
    assert gc.is_tracked(held["t"])  # a tuple holding dicts: never untracked
    assert gc.is_tracked(held["d"])  # a dict holding a dict: never untracked


def test_untracked_tuple_and_what_it_holds_is_still_freed() -> None:
    class Leaf:
        __slots__ = ("__weakref__",)

    leaf = Leaf()
    ref = weakref.ref(leaf)
    t = untracked((b"k", 1, ("a", "b"), leaf))
    assert not gc.is_tracked(t) and t[3] is leaf
    del leaf, t
    assert ref() is None  # reference counting frees it, no collection needed


def test_untrack_json_takes_every_container_and_a_change_tracks_a_dict_again() -> None:
    obj = orjson.loads(b'{"a": [{"b": [1, {"c": "d"}]}], "e": {"f": {"g": []}}, "h": "i"}')
    untrack_json(obj)
    assert not any(gc.is_tracked(c) for c in containers(obj))
    obj["e"]["f"]["x"] = [1]  # a change CPython sees: the dict is tracked again, as it must be
    assert gc.is_tracked(obj["e"]["f"])


def test_informer_transforms_hold_objects_untracked() -> None:
    gen = PodGenerator(seed=3, namespaces=2)
    sharer = PodSharer()
    pods = [sharer(orjson.loads(gen.pod_json())) for _ in range(50)]
    assert all(not gc.is_tracked(c) for p in pods for c in containers(p))
    node = orjson.loads(b'{"metadata": {"name": "n", "labels": {"a": "b"}, "managedFields": [{"x": {}}]},'
                        b' "spec": {"podCIDRs": ["10.0.0.0/24"], "taints": [{"key": "k", "effect": "NoSchedule"}]},'
                        b' "status": {"conditions": [{"type": "Ready", "status": "True"}],'
                        b' "addresses": [{"type": "InternalIP", "address": "10.1.0.1"}], "capacity": {"cpu": "4"}}}')
    node = NodeSharer()(node)
    assert "managedFields" not in node["metadata"]
    assert all(not gc.is_tracked(c) for c in containers(node))
    other = strip_managed_fields(orjson.loads(b'{"metadata": {"name": "rs", "ownerReferences": [{"uid": "u"}]},'
                                              b' "spec": {"selector": {"matchLabels": {"a": "b"}}}}'))
    assert all(not gc.is_tracked(c) for c in containers(other))


def test_watch_cache_entries_and_events_are_untracked() -> None:
    obj = {"metadata": {"name": "p", "namespace": "ns", "labels": {"app": "x", "tier": "web"}},
           "spec": {"nodeName": "n1"}, "status": {"phase": "Running"}}
    raw = orjson.dumps(obj)
    entries = [entry_of("pods", b"/registry/pods/ns/p", 5, raw, obj),
               build_entry("pods", b"/registry/pods/ns/p", raw, 5)]
    entries.append(restamped(entries[0], 6))
    for e in entries:
        assert not gc.is_tracked(e) and not gc.is_tracked(e[3])
    assert not gc.is_tracked(attrs_of("pods", obj)[1])
    ev = CacheEvent("MODIFIED", entries[2], entries[0], 0.0)
    ev.item("MODIFIED")
    assert not gc.is_tracked(ev)
    assert orjson.loads(ev.item("MODIFIED").line)["object"]["metadata"]["resourceVersion"] == "6"


def test_per_pod_and_per_node_state_of_the_components_is_untracked() -> None:
    from controlplane.nodes.ipam import PodIPs
    from controlplane.scheduler.nodeinfo import NodeInfo, PodInfo

    pod = {"metadata": {"name": "p", "namespace": "ns", "uid": "u"},
           "spec": {"nodeName": "n1", "containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}]}}
    info = PodInfo(pod)
    assert not gc.is_tracked(info) and info.tolerations == () and info.requests["cpu"] == 100
    node = NodeInfo("n1", {"metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "4", "pods": "110"}}})
    assert node.taints == ()
    node.add_pod(info)
    assert node.free_cpu == 3900 and node.pods[info.key] is info
    from controlplane.nodes.simulator import _Pod
    assert _Pod("u1", "n1", 0.0).ephemeral is _Pod("u2", "n1", 0.0).ephemeral  # not a tracked set a pod
    ips = PodIPs("10.0.0.0/30")  # two addresses: the lists and sets are made when first needed
    assert len(ips) == 0
    a, b = ips.allocate(), ips.allocate()
    ips.release(a)
    assert len(ips) == 1 and ips.allocate() == a and b == "10.0.0.2"
