"""``pod_facts``: what a parse of a pod's watch event would say, read from its bytes, or
nothing where its bytes alone cannot say it."""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pytest

from loadtest.objects import PodFactory, pod_running_status
from loadtest.podlines import PodFacts, facts_of, pod_facts


def _line(pod: dict[str, Any], kind: str = "MODIFIED") -> bytes:
    return orjson.dumps({"type": kind, "object": pod})


def _pods() -> list[dict[str, Any]]:
    """A load pod through its life, as this server writes it (metadata first)."""
    created = PodFactory().pod("ns-1", "web-0a1b", {"app": "web"})
    created["metadata"] = {"resourceVersion": "12", **created["metadata"]}
    created["status"] = {"phase": "Pending", "qosClass": "Burstable"}
    bound = copy.deepcopy(created)
    bound["spec"]["nodeName"] = "node-7"
    running = copy.deepcopy(bound)
    running["status"] = pod_running_status(bound, "2026-12-05T01:00:00Z", "10.1.2.3")["status"]
    running["status"].setdefault("phase", "Running")
    deleting = copy.deepcopy(running)
    deleting["metadata"]["deletionTimestamp"] = "2026-12-05T01:01:00Z"
    return [created, bound, running, deleting]


@pytest.mark.parametrize("index", range(4))
def test_the_facts_of_a_load_pod_are_those_of_its_parse(index: int) -> None:
    pod = _pods()[index]
    assert pod_facts(_line(pod)) == facts_of(pod)


def test_labels_annotations_and_owners_of_the_same_names_are_not_taken_for_the_fields() -> None:
    pod = _pods()[1]
    pod["metadata"]["labels"] = {"phase": "Running", "nodeName": "elsewhere", "name": "other"}
    pod["metadata"]["annotations"] = {"namespace": "other", "deletionTimestamp": "never"}
    pod["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web",
                                           "uid": "u", "controller": True}]
    facts = pod_facts(_line(pod))
    assert facts is not None
    assert (facts.key, facts.node_name, facts.phase) == ("ns-1/web-0a1b", "node-7", "Pending")
    # a deletionTimestamp annotation reads as a deletion: the kubelet confirms it on the parsed pod
    assert facts.deleting and not facts_of(pod).deleting


def test_kube_apiservers_field_order_reads_the_same() -> None:
    # Go's order: kind and apiVersion, then metadata (name, generateName, namespace, ...), spec, status
    pod = {"kind": "Pod", "apiVersion": "v1",
           "metadata": {"name": "p", "generateName": "p-", "namespace": "default", "uid": "u",
                        "deletionTimestamp": None,
                        "managedFields": [{"fieldsV1": {"f:spec": {"f:nodeName": {}}, "f:status": {"f:phase": {}}}}]},
           "spec": {"containers": [{"name": "c", "image": "i"}], "nodeName": "n-1"},
           "status": {"phase": "Running", "nominatedNodeName": "n-2"}}
    assert pod_facts(_line(pod)) == PodFacts("default/p", "n-1", "Running", False)


def test_what_the_bytes_cannot_say_is_left_to_a_parse() -> None:
    pod = _pods()[2]
    pod["spec"]["nodeName"] = 'odd"name'  # an escape in the value
    assert pod_facts(_line(pod)) is None
    assert pod_facts(b'{"type":"ADDED","object":{"kind":"Pod"}}') is None  # no metadata
    unbound = _pods()[0]
    del unbound["status"]
    assert pod_facts(_line(unbound)) == PodFacts("ns-1/web-0a1b", "", "", False)
