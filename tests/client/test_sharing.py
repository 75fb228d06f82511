"""client/sharing.py: pods held with their common parts shared, unchanged in content."""

from __future__ import annotations

import copy
import gc
from typing import Any

import orjson
import pytest

from controlplane.client import sharing
from controlplane.client.sharing import PodSharer
from controlplane.podgen import PodGenerator


def pods(n: int, seed: int = 1) -> list[bytes]:
    gen = PodGenerator(seed=seed, namespaces=2)
    return [gen.pod_json() for _ in range(n)]


def test_a_shared_pod_is_the_pod_without_managed_fields() -> None:
    sharer = PodSharer()
    for raw in pods(200):
        want = orjson.loads(raw)
        del want["metadata"]["managedFields"]
        got = sharer(orjson.loads(raw))
        assert got == want
        assert orjson.dumps(got) == orjson.dumps(want)  # key order kept too: what is written back is the same


def test_pods_of_one_template_share_its_parts() -> None:
    sharer = PodSharer()
    held = [sharer(orjson.loads(raw)) for raw in pods(300)]
    by_template: dict[str, list[dict[str, Any]]] = {}
    for p in held:
        by_template.setdefault(p["metadata"]["labels"].get("pod-template-hash", ""), []).append(p)
    a, b = next(group for h, group in by_template.items() if h and len(group) >= 2)[:2]
    assert a is not b and a["metadata"]["uid"] != b["metadata"]["uid"]
    ca, cb = a["spec"]["containers"][0], b["spec"]["containers"][0]
    assert ca is not cb  # each pod has its own containers...
    assert ca["resources"] is cb["resources"]  # ...made of the template's parts
    if "env" in ca:
        assert ca["env"] is cb["env"]
    assert a["spec"]["tolerations"] is b["spec"]["tolerations"]
    assert a["metadata"]["ownerReferences"] is b["metadata"]["ownerReferences"]
    assert sharer.shared > 0
    # what is the pod's own stays its own
    assert a["status"].get("podIP") != b["status"].get("podIP")


def test_parts_no_pod_holds_are_swept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sharing, "MIN_SWEEP", 64)
    sharer = PodSharer()
    sharer._sweep_at = 64
    kept = [sharer(orjson.loads(raw)) for raw in pods(50)]
    del kept
    gc.collect()
    for raw in pods(400, seed=2):  # other pods, other parts: the first ones' parts go
        sharer(orjson.loads(raw))
    sharer._sweep()
    assert len(sharer) == 0  # none of the pods is held any more, so none of their parts is


def test_an_equal_part_is_never_changed_through_another_pod() -> None:
    sharer = PodSharer()
    raw = pods(1)[0]
    first = sharer(orjson.loads(raw))
    before = copy.deepcopy(first)
    second = sharer(orjson.loads(raw))
    assert second == first == before and second is not first
    assert second["spec"]["containers"][0]["resources"] is first["spec"]["containers"][0]["resources"]
