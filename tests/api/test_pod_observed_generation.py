"""A pod's generation and observed generations as kube-apiserver 1.34 keeps them (KEP-5067):
the generation is 1 at create and steps with each change of the spec and with a graceful
deletion, never with metadata or status; a pods/status write that leaves an observed
generation out (or writes 0) keeps the stored one, the pod's and each condition's by type;
the binding's PodScheduled=True carries none."""

from __future__ import annotations

from typing import Any

from controlplane.client import Client, resource_path
from controlplane.registry.observedgeneration import keep_observed_generations

PODS = resource_path("", "v1", "pods", "default")
CONTAINERS = [{"name": "c", "image": "nginx"}]


async def make(client: Client, name: str, **spec: Any) -> dict[str, Any]:
    return await client.create(PODS, {"metadata": {"name": name}, "spec": {"containers": CONTAINERS, **spec}})


async def test_a_spec_change_steps_the_generation_and_metadata_or_status_do_not(client: Client) -> None:
    await make(client, "g", nodeName="n1")
    labelled = await client.patch(f"{PODS}/g", {"metadata": {"labels": {"a": "b"}}})
    assert labelled["metadata"]["generation"] == 1
    status = await client.patch(f"{PODS}/g/status", {"status": {"phase": "Running", "observedGeneration": 1}})
    assert status["metadata"]["generation"] == 1
    deadline = await client.patch(f"{PODS}/g", {"spec": {"activeDeadlineSeconds": 60}})
    assert deadline["metadata"]["generation"] == 2
    image = await client.patch(f"{PODS}/g", {"spec": {"containers": [{"name": "c", "image": "nginx:2"}]}},
                               "strategic")
    assert image["metadata"]["generation"] == 3
    await client.delete(f"{PODS}/g", {"gracePeriodSeconds": 30})
    deleting = await client.get(f"{PODS}/g")
    assert deleting["metadata"]["deletionTimestamp"] and deleting["metadata"]["generation"] == 4
    assert deleting["status"]["observedGeneration"] == 1  # the kubelet's to move


async def test_a_status_write_without_observed_generations_keeps_the_stored_ones(client: Client) -> None:
    await make(client, "k", nodeName="n1")
    await client.patch(f"{PODS}/k", {"spec": {"activeDeadlineSeconds": 60}})
    kubelet = {"observedGeneration": 2, "phase": "Running", "conditions": [
        {"type": "Ready", "status": "True", "observedGeneration": 2},
        {"type": "PodScheduled", "status": "True", "observedGeneration": 2},
        {"type": "example.com/gate", "status": "True"}]}
    await client.patch(f"{PODS}/k/status", {"status": kubelet})
    # a writer that knows nothing of the field (an older kubelet, a KWOK stage): a merge
    # patch replacing the conditions, a 0 in the status
    older = await client.patch(f"{PODS}/k/status", {"status": {"observedGeneration": 0, "conditions": [
        {"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "False", "observedGeneration": 0},
        {"type": "example.com/gate", "status": "False"}, {"type": "Initialized", "status": "True"}]}})
    assert older["status"]["observedGeneration"] == 2
    assert {c["type"]: c.get("observedGeneration") for c in older["status"]["conditions"]} == {
        "PodScheduled": 2, "Ready": 2, "example.com/gate": None, "Initialized": None}
    # a PUT of the status as read back with the field dropped, as a client without it sends
    current = await client.get(f"{PODS}/k")
    del current["status"]["observedGeneration"]
    for c in current["status"]["conditions"]:
        c.pop("observedGeneration", None)
    put = await client.update(f"{PODS}/k/status", current)
    assert put["status"]["observedGeneration"] == 2
    assert [c.get("observedGeneration") for c in put["status"]["conditions"]] == [2, 2, None, None]
    # any value set is taken, one going back included
    back = await client.patch(f"{PODS}/k/status", {"status": {"observedGeneration": 1}})
    assert back["status"]["observedGeneration"] == 1


def test_a_repeated_condition_type_takes_the_stored_values_in_order() -> None:
    old = {"conditions": [{"type": "X", "observedGeneration": 3}, {"type": "X", "observedGeneration": 4}]}
    new = {"conditions": [{"type": "X"}, {"type": "X", "observedGeneration": 9}, {"type": "X"}]}
    kept = keep_observed_generations(new, old)
    assert [c.get("observedGeneration") for c in kept["conditions"]] == [3, 9, None]
    assert new["conditions"][0] == {"type": "X"}  # the write's own dicts untouched
    assert keep_observed_generations(new, None) is new


async def test_the_binding_writes_pod_scheduled_without_an_observed_generation(client: Client) -> None:
    await make(client, "b")
    await client.patch(f"{PODS}/b/status", {"status": {"conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "observedGeneration": 1}]}},
        "strategic")
    await client.create(f"{PODS}/b/binding", {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "b"},
                                              "target": {"kind": "Node", "name": "n1"}})
    bound = await client.get(f"{PODS}/b")
    scheduled = [c for c in bound["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert len(scheduled) == 1 and scheduled[0]["status"] == "True" and "observedGeneration" not in scheduled[0]
