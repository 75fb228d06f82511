"""Entries' bodies compressed once a resource is large: what goes in comes out."""

from __future__ import annotations

import time

import orjson

from controlplane.podgen import PodGenerator
from controlplane.watchcache.entry import build_entry, entry_json, restamped
from controlplane.watchcache.packing import PACKED, Packer, json_size, unpack


def _until_trained(packer: Packer) -> None:
    deadline = time.monotonic() + 30
    while not packer.trained:
        assert time.monotonic() < deadline, "no dictionary was trained"
        time.sleep(0.01)


def test_small_resources_stay_json_at_their_exact_size() -> None:
    packer = Packer(train_after=1000)
    raw = orjson.dumps({"kind": "Pod", "metadata": {"name": "a"}})
    body = packer.pack(raw)
    assert body == raw and unpack(body) == raw and not packer.trained


def test_after_training_bodies_are_packed_and_unpack_to_the_same_json() -> None:
    gen = PodGenerator(seed=3)
    pods = [orjson.dumps(gen.pod()) for _ in range(300)]
    packer = Packer(train_after=200)
    early = [packer.pack(p) for p in pods[:200]]
    _until_trained(packer)
    late = [packer.pack(p) for p in pods[200:]]
    assert all(b[0] != PACKED for b in early)
    assert all(b[0] == PACKED for b in late)
    assert [unpack(b) for b in early + late] == pods
    packed, plain = sum(map(len, late)), sum(map(len, pods[200:]))
    assert packed * 4 < plain, (packed, plain)


def test_a_bodys_json_size_is_read_without_unpacking_it() -> None:
    gen = PodGenerator(seed=5)
    pods = [orjson.dumps(gen.pod()) for _ in range(120)]
    packer = Packer(train_after=100)
    for p in pods[:100]:
        assert json_size(packer.pack(p)) == len(p)
    _until_trained(packer)
    bodies = [packer.pack(p) for p in pods[100:]]
    assert all(b[0] == PACKED for b in bodies)
    assert [json_size(b) for b in bodies] == [len(p) for p in pods[100:]]


def test_entries_built_and_restamped_through_a_trained_packer() -> None:
    gen = PodGenerator(seed=4)
    packer = Packer(train_after=50)
    for _ in range(50):
        packer.pack(orjson.dumps(gen.pod()))
    _until_trained(packer)
    pod = gen.pod()
    entry = build_entry("pods", b"/registry/pods/a/b", orjson.dumps(pod), 7, packer.pack)
    assert entry[2][0] == PACKED
    served = orjson.loads(entry_json(entry))
    assert served["metadata"]["resourceVersion"] == "7"
    assert served["spec"] == pod["spec"]
    gone = restamped(entry, 9, packer.pack)
    assert orjson.loads(entry_json(gone))["metadata"]["resourceVersion"] == "9"
    assert gone[3] is entry[3]


def test_two_packers_dictionaries_never_mix() -> None:
    gen = PodGenerator(seed=5)
    a, b = Packer(train_after=30), Packer(train_after=30)
    for _ in range(30):
        a.pack(orjson.dumps(gen.pod()))
        b.pack(orjson.dumps({"kind": "ConfigMap", "data": {"k": gen.pod()["metadata"]["name"]}}))
    _until_trained(a)
    _until_trained(b)
    pod = orjson.dumps(gen.pod())
    cm = orjson.dumps({"kind": "ConfigMap", "data": {"k": "v"}})
    assert unpack(a.pack(pod)) == pod and unpack(b.pack(cm)) == cm
    assert unpack(a.pack(cm)) == cm
