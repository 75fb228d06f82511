"""Writes that leave an object as it was write nothing, over a real socket: no new
resourceVersion, no watch event, the managedFields' times as they were. Upstream's field
manager records a write's time when the fields it sees change, but it sees the object before
its strategy and defaults; the registry's ``IgnoreManagedFieldsTimestampsTransformer`` then
gives back the old times to an object otherwise unchanged, so a write that only moved a time
is no write. Here the clock moves a second at each write, so every such time would move."""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from controlplane.api import rest
from controlplane.registry import managedfields, typed
from tests.front_socket import front_on_socket

RCTS = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaimtemplates"
HPAS = "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers"
STRATEGIC = {"Content-Type": "application/strategic-merge-patch+json"}
MERGE = {"Content-Type": "application/merge-patch+json"}
APPLY = {"Content-Type": "application/apply-patch+yaml"}


@pytest.fixture
async def http(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[httpx.AsyncClient]:
    seconds = itertools.count(int(time.time()))

    def ticking() -> str:  # a second later at every write: a time recorded is always a new one
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(next(seconds)))

    monkeypatch.setattr(managedfields, "_now", ticking)
    async with front_on_socket(tmp_path) as (port, _), \
            httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as c:
        yield c


async def _no_event_before(http: httpx.AsyncClient, collection: str, name: str, after: str, then: str) -> None:
    """The first event on ``name`` since ``after`` is the write at ``then``."""
    url = f"{collection}?watch=1&resourceVersion={after}&fieldSelector=metadata.name%3D{name}"
    async with http.stream("GET", url) as r:
        async for line in r.aiter_lines():
            if line.strip():
                event = json.loads(line)
                assert event["object"]["metadata"]["resourceVersion"] == then, event
                return
    raise AssertionError("the watch ended without an event")


async def _same(http: httpx.AsyncClient, url: str, before: dict[str, Any], r: httpx.Response) -> None:
    assert r.status_code == 200, r.text
    assert r.json()["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    assert (await http.get(url)).json() == before  # managedFields' times included


async def test_a_patch_of_an_atomic_list_without_its_defaults_writes_nothing(http: httpx.AsyncClient) -> None:
    # kubectl apply's (client-side) second patch: the requests list is atomic, so it is sent whole,
    # without the count and allocationMode the first write's defaults added
    requests = [{"name": "r", "exactly": {"deviceClassName": "gpu"}}]
    r = await http.post(RCTS, params={"fieldManager": "kubectl-client-side-apply"}, json={
        "metadata": {"name": "t"}, "spec": {"spec": {"devices": {"requests": requests}}}})
    assert r.status_code == 201, r.text
    created = r.json()
    assert created["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] == 1
    patch = {"spec": {"spec": {"devices": {"requests": requests}}}}
    for headers in (STRATEGIC, MERGE):
        r = await http.patch(f"{RCTS}/t", params={"fieldManager": "kubectl-client-side-apply"}, headers=headers,
                             content=json.dumps(patch))
        await _same(http, f"{RCTS}/t", created, r)
    # and a PUT of what the first write sent
    body = {"metadata": {"name": "t", "resourceVersion": created["metadata"]["resourceVersion"]},
            "spec": {"spec": {"devices": {"requests": requests}}}}
    r = await http.put(f"{RCTS}/t", params={"fieldManager": "kubectl-client-side-apply"}, json=body)
    await _same(http, f"{RCTS}/t", created, r)
    r = await http.patch(f"{RCTS}/t", headers=MERGE, content=b'{"metadata":{"labels":{"a":"b"}}}')
    assert r.status_code == 200, r.text
    await _no_event_before(http, RCTS, "t", created["metadata"]["resourceVersion"],
                           r.json()["metadata"]["resourceVersion"])


APPLIED = [
    # a quantity applied in another form than its canonical one, tolerations (atomic) without what defaulting adds
    ("/apis/node.k8s.io/v1/runtimeclasses", {
        "apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "o"}, "handler": "kata",
        "overhead": {"podFixed": {"cpu": "1000m", "memory": "0.5Gi"}},
        "scheduling": {"tolerations": [{"key": "k", "value": "v", "effect": "NoSchedule"}]}}),
    # empty maps and lists, which the stored object has as none (the previous fuzz run's RuntimeClass)
    ("/apis/node.k8s.io/v1/runtimeclasses", {
        "apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "o"}, "handler": "runc",
        "overhead": {"podFixed": {}}, "scheduling": {"nodeSelector": {}, "tolerations": []}}),
    # an atomic list of ports without the protocol defaulting adds
    ("/apis/networking.k8s.io/v1/namespaces/default/networkpolicies", {
        "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": {"name": "o"},
        "spec": {"podSelector": {}, "ingress": [{"from": [{"podSelector": {}}], "ports": [{"port": "http"}]}]}}),
    # an atomic list of requests without their count and allocationMode
    (RCTS, {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "o"},
            "spec": {"spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu"}}]}}}}),
]


@pytest.mark.parametrize(("collection", "config"), APPLIED,
                         ids=["runtimeclass", "runtimeclass-empty", "networkpolicy", "claimtemplate"])
async def test_the_same_apply_twice_writes_nothing(http: httpx.AsyncClient, collection: str,
                                                   config: dict[str, Any]) -> None:
    url = f"{collection}/o"
    r = await http.patch(url, params={"fieldManager": "fz"}, headers=APPLY, content=json.dumps(config))
    assert r.status_code == 201, r.text
    created = r.json()
    for force in ("false", "true"):
        r = await http.patch(url, params={"fieldManager": "fz", "force": force}, headers=APPLY,
                             content=json.dumps(config))
        await _same(http, url, created, r)
    r = await http.patch(url, headers=MERGE, content=b'{"metadata":{"labels":{"a":"b"}}}')
    assert r.status_code == 200, r.text
    await _no_event_before(http, collection, "o", created["metadata"]["resourceVersion"],
                           r.json()["metadata"]["resourceVersion"])


async def test_an_hpa_status_written_back_as_read_writes_nothing(http: httpx.AsyncClient) -> None:
    # upstream's v2 status writes currentMetrics (no omitempty): null from the start, so the status read
    # back and written is the stored one
    r = await http.post(HPAS, json={"metadata": {"name": "h"}, "spec": {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d"}, "maxReplicas": 3}})
    assert r.status_code == 201, r.text
    created = r.json()
    assert created["status"] == {"currentMetrics": None, "desiredReplicas": 0}
    r = await http.put(f"{HPAS}/h/status", json=created)
    await _same(http, f"{HPAS}/h", created, r)
    r = await http.put(f"{HPAS}/h", json=created)
    await _same(http, f"{HPAS}/h", created, r)


async def test_a_write_that_changes_something_still_records_its_time(http: httpx.AsyncClient) -> None:
    r = await http.post(RCTS, params={"fieldManager": "m"}, json={
        "metadata": {"name": "t", "labels": {"a": "1"}},
        "spec": {"spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu"}}]}}}})
    assert r.status_code == 201, r.text
    created = r.json()
    r = await http.patch(f"{RCTS}/t", params={"fieldManager": "m"}, headers=MERGE,
                         content=b'{"metadata":{"labels":{"a":"2"}}}')
    assert r.status_code == 200, r.text
    changed = r.json()
    assert changed["metadata"]["resourceVersion"] != created["metadata"]["resourceVersion"]
    assert changed["metadata"]["managedFields"][0]["time"] != created["metadata"]["managedFields"][0]["time"]


async def test_a_claims_request_written_as_the_same_quantity_is_no_change_of_its_spec(http: httpx.AsyncClient) -> None:
    # kubectl apply of a manifest saying 1e9, which YAML reads as a number: the patch says 1000000000,
    # stored 1G; upstream's ValidatePersistentVolumeClaimUpdate compares the specs semantically
    claims = "/api/v1/namespaces/default/persistentvolumeclaims"
    r = await http.post(claims, json={"metadata": {"name": "c"}, "spec": {
        "accessModes": ["ReadWriteOnce"], "storageClassName": "standard",
        "resources": {"requests": {"storage": "1e9"}}}})
    assert r.status_code == 201, r.text
    assert r.json()["spec"]["resources"]["requests"]["storage"] == "1e9"
    r = await http.patch(f"{claims}/c", headers=MERGE,
                         content=b'{"spec":{"resources":{"requests":{"storage":1000000000}}}}')
    assert r.status_code == 200, r.text
    assert r.json()["spec"]["resources"]["requests"]["storage"] == "1G"
    # another value is still refused on a claim not bound
    r = await http.patch(f"{claims}/c", headers=MERGE, content=b'{"spec":{"resources":{"requests":{"storage":"2G"}}}}')
    assert r.status_code == 422, r.text
    assert "spec is immutable after creation" in r.json()["message"]


JOB_TEMPLATE = {"spec": {"restartPolicy": "Never", "containers": [
    {"name": "c", "image": "pause", "resources": {"requests": {"memory": "129e6", "cpu": "1"}}}]}}


async def test_a_quantity_in_another_format_is_the_same_template(http: httpx.AsyncClient) -> None:
    # kubectl apply of a manifest saying memory: 129e6, which YAML reads as a number: the patch says
    # 129000000, stored 129M; upstream's strategies and validation compare with Semantic.DeepEqual
    jobs = "/apis/batch/v1/namespaces/default/jobs"
    r = await http.post(jobs, json={"metadata": {"name": "j"}, "spec": {"template": JOB_TEMPLATE}})
    assert r.status_code == 201, r.text
    requests: dict[str, Any] = {"memory": 129000000}
    patch = {"spec": {"template": {"spec": {"containers": [{"name": "c", "resources": {"requests": requests}}]}}}}
    r = await http.patch(f"{jobs}/j", headers=STRATEGIC, content=json.dumps(patch))
    assert r.status_code == 200, r.text  # not 422 spec.template: field is immutable
    assert r.json()["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["memory"] == "129M"
    requests["memory"] = "130M"
    r = await http.patch(f"{jobs}/j", headers=STRATEGIC, content=json.dumps(patch))
    assert r.status_code == 422, r.text  # another value still is a change

    pods = "/api/v1/namespaces/default/pods"
    r = await http.post(pods, json={"metadata": {"name": "p"}, "spec": JOB_TEMPLATE["spec"]})
    assert r.status_code == 201, r.text
    requests["memory"] = 129000000
    r = await http.patch(f"{pods}/p", headers=STRATEGIC, content=json.dumps(patch["spec"]["template"]))
    assert r.status_code == 200, r.text  # not 422 pod updates may not change fields other than ...

    deployments = "/apis/apps/v1/namespaces/default/deployments"
    r = await http.post(deployments, json={"metadata": {"name": "d"}, "spec": {
        "selector": {"matchLabels": {"a": "b"}},
        "template": {"metadata": {"labels": {"a": "b"}}, "spec": JOB_TEMPLATE["spec"] | {"restartPolicy": "Always"}}}})
    assert r.status_code == 201, r.text
    assert r.json()["metadata"]["generation"] == 1
    r = await http.patch(f"{deployments}/d", headers=STRATEGIC, content=json.dumps(patch))
    assert r.status_code == 200, r.text
    assert r.json()["metadata"]["generation"] == 1  # the same spec: no new generation (but a write: new bytes)


async def test_a_subresource_written_back_as_read_writes_nothing(http: httpx.AsyncClient) -> None:
    # a namespace's finalize and a pod's ephemeralcontainers, each PUT with the object as read
    r = await http.post("/api/v1/namespaces", json={"metadata": {"name": "n"}})
    assert r.status_code == 201, r.text
    namespace = r.json()
    r = await http.put("/api/v1/namespaces/n/finalize", json=namespace)
    await _same(http, "/api/v1/namespaces/n", namespace, r)
    pods = "/api/v1/namespaces/default/pods"
    r = await http.post(pods, json={"metadata": {"name": "p"},
                                    "spec": {"containers": [{"name": "c", "image": "pause"}]}})
    assert r.status_code == 201, r.text
    pod = r.json()
    r = await http.put(f"{pods}/p/ephemeralcontainers", json=pod)
    await _same(http, f"{pods}/p", pod, r)  # no new generation, no managedFields entry for the subresource
    r = await http.patch(f"{pods}/p", headers=MERGE, content=b'{"metadata":{"labels":{"a":"b"}}}')
    assert r.status_code == 200, r.text
    await _no_event_before(http, pods, "p", pod["metadata"]["resourceVersion"], r.json()["metadata"]["resourceVersion"])
    # a change still is one
    r = await http.put("/api/v1/namespaces/n/finalize", json={**namespace, "spec": {"finalizers": []}})
    assert r.status_code == 200, r.text
    assert r.json()["metadata"]["resourceVersion"] != namespace["metadata"]["resourceVersion"]


async def test_a_claims_capacity_request_as_the_same_quantity_is_no_change_of_its_spec(
        http: httpx.AsyncClient) -> None:
    claims = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims"
    capacity: dict[str, Any] = {"memory": "1e9"}
    request = {"name": "r", "exactly": {"deviceClassName": "gpu", "capacity": {"requests": capacity}}}
    r = await http.post(claims, json={"metadata": {"name": "c"}, "spec": {"devices": {"requests": [request]}}})
    assert r.status_code == 201, r.text
    capacity["memory"] = 1000000000  # (stored 1G)
    patch = {"spec": {"devices": {"requests": [request]}}}
    r = await http.patch(f"{claims}/c", headers=MERGE, content=json.dumps(patch))
    assert r.status_code == 200, r.text  # not 422 spec: field is immutable
    capacity["memory"] = "2G"
    r = await http.patch(f"{claims}/c", headers=MERGE, content=json.dumps(patch))
    assert r.status_code == 422, r.text


async def test_a_suspended_jobs_scheduling_change_keeps_its_quantities_by_value(http: httpx.AsyncClient) -> None:
    # a suspended Job's template may change its scheduling directives; the rest of it is compared
    # with Semantic.DeepEqual, so an emptyDir's sizeLimit written 1e9 (a number to kubectl's YAML:
    # 1000000000, stored 1G) where the stored one says 1e9 is no change of it
    jobs = "/apis/batch/v1/namespaces/default/jobs"
    template = {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "pause"}],
                         "volumes": [{"name": "v", "emptyDir": {"sizeLimit": "1e9"}}]}}
    r = await http.post(jobs, json={"metadata": {"name": "s"}, "spec": {"suspend": True, "template": template}})
    assert r.status_code == 201, r.text
    volumes = [{"name": "v", "emptyDir": {"sizeLimit": 1000000000}}]
    patch: dict[str, Any] = {"spec": {"template": {"spec": {"nodeSelector": {"zone": "a"}, "volumes": volumes}}}}
    r = await http.patch(f"{jobs}/s", headers=STRATEGIC, content=json.dumps(patch))
    assert r.status_code == 200, r.text  # not 422 spec.template: field is immutable
    spec = r.json()["spec"]["template"]["spec"]
    assert spec["nodeSelector"] == {"zone": "a"} and spec["volumes"][0]["emptyDir"]["sizeLimit"] == "1G"
    patch["spec"]["template"]["spec"]["volumes"][0]["emptyDir"]["sizeLimit"] = "2G"
    r = await http.patch(f"{jobs}/s", headers=STRATEGIC, content=json.dumps(patch))
    assert r.status_code == 422, r.text  # another value still is a change
    assert "spec.template: Invalid value" in r.json()["message"]


async def test_a_suspended_jobs_affinity_may_change_only_its_node_affinity(http: httpx.AsyncClient) -> None:
    # upstream's validatePodTemplateUpdate lets a suspended Job's template change its node affinity
    # (added, changed, dropped with an affinity that held nothing else) but not a pod
    # (anti-)affinity: that is 422 spec.template: field is immutable
    jobs = "/apis/batch/v1/namespaces/default/jobs"
    template = {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "pause"}]}}
    r = await http.post(jobs, json={"metadata": {"name": "s"}, "spec": {"suspend": True, "template": template}})
    assert r.status_code == 201, r.text
    node = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}}
    anti = {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": "kubernetes.io/hostname"}]}

    async def affinity(value: Any) -> httpx.Response:
        patch = {"spec": {"template": {"spec": {"affinity": value}}}}
        return await http.patch(f"{jobs}/s", headers=MERGE, content=json.dumps(patch))

    r = await affinity({"nodeAffinity": node})
    assert r.status_code == 200, r.text
    assert r.json()["spec"]["template"]["spec"]["affinity"] == {"nodeAffinity": node}
    r = await affinity(None)  # an affinity of a node affinity alone may go
    assert r.status_code == 200 and "affinity" not in r.json()["spec"]["template"]["spec"], r.text
    for value in ({"podAntiAffinity": anti}, {"nodeAffinity": node, "podAffinity": anti}):
        r = await affinity(value)
        assert r.status_code == 422, r.text
        status = r.json()
        assert status["reason"] == "Invalid" and status["details"]["causes"][0]["field"] == "spec.template"
        assert "spec.template: Invalid value: " in status["message"]
        assert status["message"].endswith(": field is immutable")


async def test_a_resize_resending_a_quantity_in_another_format_changes_nothing_else(http: httpx.AsyncClient) -> None:
    # ValidatePodResize compares each container, its cpu and memory aside, with Semantic.DeepEqual:
    # an ephemeral-storage stored 1e9 and resent as the number 1000000000 (stored 1G) is the same
    pods = "/api/v1/namespaces/default/pods"
    resources = {"requests": {"cpu": "100m", "ephemeral-storage": "1e9"}, "limits": {"ephemeral-storage": "1e9"}}
    r = await http.post(pods, json={"metadata": {"name": "p"}, "spec": {
        "initContainers": [{"name": "i", "image": "pause", "resources": resources}],
        "containers": [{"name": "c", "image": "pause", "resources": resources}]}})
    assert r.status_code == 201, r.text
    requests: dict[str, Any] = {"cpu": "200m", "ephemeral-storage": 1000000000}
    patch = {"spec": {"containers": [{"name": "c", "resources": {"requests": requests}}]}}
    r = await http.patch(f"{pods}/p/resize", headers=STRATEGIC, content=json.dumps(patch))
    assert r.status_code == 200, r.text  # not 422 only cpu and memory resources are mutable
    assert r.json()["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "200m", "ephemeral-storage": "1G"}
    init_requests: dict[str, Any] = {"ephemeral-storage": 1000000000}
    init = {"spec": {"initContainers": [{"name": "i", "resources": {"requests": init_requests}}]}}
    r = await http.patch(f"{pods}/p/resize", headers=STRATEGIC, content=json.dumps(init))
    assert r.status_code == 200, r.text  # not 422 resources for non-sidecar init containers are immutable
    requests["ephemeral-storage"] = "2G"  # another value still is refused
    r = await http.patch(f"{pods}/p/resize", headers=STRATEGIC, content=json.dumps(patch))
    assert r.status_code == 422 and "only cpu and memory resources are mutable" in r.json()["message"], r.text
    init_requests["ephemeral-storage"] = "2G"
    r = await http.patch(f"{pods}/p/resize", headers=STRATEGIC, content=json.dumps(init))
    assert r.status_code == 422 and "non-sidecar init containers are immutable" in r.json()["message"], r.text


async def test_a_pods_overhead_matches_its_runtime_class_by_value(http: httpx.AsyncClient) -> None:
    # the RuntimeClass admission compares an overhead the pod states with the class's with
    # Semantic.DeepEqual: 0.25 cpu is 250m, a memory sent 1000000000 (stored 1G) is 1e9
    r = await http.post("/apis/node.k8s.io/v1/runtimeclasses", json={
        "metadata": {"name": "kata"}, "handler": "kata",
        "overhead": {"podFixed": {"cpu": "250m", "memory": "1e9"}}})
    assert r.status_code == 201, r.text
    pods = "/api/v1/namespaces/default/pods"
    overhead: dict[str, Any] = {"cpu": "0.25", "memory": 1000000000}
    pod: dict[str, Any] = {"metadata": {"name": "p"}, "spec": {"runtimeClassName": "kata", "overhead": overhead,
                                                               "containers": [{"name": "c", "image": "pause"}]}}
    r = await http.post(pods, json=pod)
    assert r.status_code == 201, r.text  # not 403 Pod's Overhead doesn't match RuntimeClass's defined Overhead
    assert r.json()["spec"]["overhead"] == {"cpu": "250m", "memory": "1e9"}  # the class's, as upstream sets it
    overhead["memory"], pod["metadata"]["name"] = "2G", "q"
    r = await http.post(pods, json=pod)
    assert r.status_code == 403, r.text  # another value still does not match
    assert "Pod's Overhead doesn't match RuntimeClass's defined Overhead" in r.json()["message"]


async def test_a_claims_allocation_resent_with_the_same_quantities_is_unchanged(http: httpx.AsyncClient) -> None:
    # ValidateResourceClaimStatusUpdate holds a set allocation with ValidateImmutableField
    # (Semantic.DeepEqual): a consumed capacity stored 1e9 and resent as 1000000000 (1G) is the same
    claims = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims"
    request = {"name": "r", "exactly": {"deviceClassName": "gpu", "capacity": {"requests": {"memory": "1e9"}}}}
    r = await http.post(claims, json={"metadata": {"name": "c"}, "spec": {"devices": {"requests": [request]}}})
    assert r.status_code == 201, r.text
    consumed: dict[str, Any] = {"memory": "1e9"}
    result = {"request": "r", "driver": "gpu.example.com", "pool": "n1", "device": "gpu-0",
              "shareID": "1f0e4b2c-0000-4000-8000-000000000001", "consumedCapacity": consumed}
    status: dict[str, Any] = {"allocation": {"devices": {"results": [result]}}}
    r = await http.patch(f"{claims}/c/status", headers=MERGE, content=json.dumps({"status": status}))
    assert r.status_code == 200, r.text
    consumed["memory"] = 1000000000
    status["reservedFor"] = [{"resource": "pods", "name": "p", "uid": "1f0e4b2c-0000-4000-8000-000000000002"}]
    r = await http.patch(f"{claims}/c/status", headers=MERGE, content=json.dumps({"status": status}))
    assert r.status_code == 200, r.text  # not 422 status.allocation: field is immutable
    assert r.json()["status"]["reservedFor"][0]["name"] == "p"
    consumed["memory"] = "2G"
    r = await http.patch(f"{claims}/c/status", headers=MERGE, content=json.dumps({"status": status}))
    assert r.status_code == 422 and "status.allocation: Invalid value" in r.json()["message"], r.text


async def test_a_resize_to_the_same_quantities_is_no_new_generation(http: httpx.AsyncClient) -> None:
    # the pod strategy's updatePodGeneration compares the specs with Semantic.DeepEqual
    pods = "/api/v1/namespaces/default/pods"
    r = await http.post(pods, json={"metadata": {"name": "p"}, "spec": {"containers": [
        {"name": "c", "image": "pause", "resources": {"requests": {"cpu": "100m", "memory": "1e9"}}}]}})
    assert r.status_code == 201, r.text
    assert r.json()["metadata"]["generation"] == 1
    requests: dict[str, Any] = {"cpu": "0.1", "memory": 1000000000}
    patch = {"spec": {"containers": [{"name": "c", "resources": {"requests": requests}}]}}
    r = await http.patch(f"{pods}/p/resize", headers=STRATEGIC, content=json.dumps(patch))
    assert r.status_code == 200, r.text
    assert r.json()["metadata"]["generation"] == 1  # the same spec
    requests["cpu"] = "200m"
    r = await http.patch(f"{pods}/p/resize", headers=STRATEGIC, content=json.dumps(patch))
    assert r.status_code == 200, r.text
    assert r.json()["metadata"]["generation"] == 2  # another cpu request is a new one


async def test_a_write_that_moved_only_a_time_compares_the_objects_once(
        http: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch) -> None:
    # revert_times' comparison is the no-op test: the registry does not compare the objects again
    # (one comparison for each attempt, each attempt calling revert_times once)
    requests = [{"name": "r", "exactly": {"deviceClassName": "gpu"}}]
    manager = {"fieldManager": "kubectl-client-side-apply"}
    r = await http.post(RCTS, params=manager, json={
        "metadata": {"name": "t"}, "spec": {"spec": {"devices": {"requests": requests}}}})
    assert r.status_code == 201, r.text
    created = r.json()
    config = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "a"},
              "spec": {"spec": {"devices": {"requests": requests}}}}
    r = await http.patch(f"{RCTS}/a", params={"fieldManager": "fz"}, headers=APPLY, content=json.dumps(config))
    assert r.status_code == 201, r.text
    applied = r.json()
    comparisons, reverts = [0], [0]
    equal, revert_times = typed.equal, managedfields.revert_times

    def counted_equal(a: Any, b: Any) -> bool:
        comparisons[0] += 1
        return equal(a, b)

    def counted_revert(*args: Any) -> bool:
        reverts[0] += 1
        return revert_times(*args)

    monkeypatch.setattr(rest, "equal", counted_equal)  # (the registry's no-op test, and _unchanged's)
    monkeypatch.setattr(managedfields, "revert_times", counted_revert)
    body = {"metadata": {"name": "t", "resourceVersion": created["metadata"]["resourceVersion"]},
            "spec": {"spec": {"devices": {"requests": requests}}}}
    patch = json.dumps({"spec": {"spec": {"devices": {"requests": requests}}}})
    writes = [  # each would move a time only: the requests sent without the defaults the first write added
        ("PATCH", "t", created, manager, MERGE, patch),
        ("PATCH", "t", created, manager, STRATEGIC, patch),
        ("PUT", "t", created, manager, {"Content-Type": "application/json"}, json.dumps(body)),
        ("PATCH", "a", applied, {"fieldManager": "fz"}, APPLY, json.dumps(config))]
    for method, name, before, params, headers, content in writes:
        comparisons[0] = reverts[0] = 0
        r = await http.request(method, f"{RCTS}/{name}", params=params, headers=headers, content=content)
        await _same(http, f"{RCTS}/{name}", before, r)
        assert reverts[0] >= 1 and comparisons[0] == reverts[0], (method, headers, comparisons, reverts)
