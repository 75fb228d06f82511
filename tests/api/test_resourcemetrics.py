"""metrics.k8s.io/v1beta1 (api/resourcemetrics.py): PodMetrics and NodeMetrics answered
from the pods' declared usage (nodes/usage.py), with metrics-server's shapes and errors."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.client import ApiError, Client
from controlplane.nodes.usage import USAGE_CPU, USAGE_MEMORY

METRICS = "/apis/metrics.k8s.io/v1beta1"
PODS = "/api/v1/namespaces/default/pods"


async def node(c: Client, name: str, ready: bool = True, **labels: str) -> None:
    await c.create("/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name,
                                                                                      "labels": labels}})
    got = await c.get(f"/api/v1/nodes/{name}")
    got["status"] = {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
                     "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}
    await c.update(f"/api/v1/nodes/{name}/status", got)


async def pod(c: Client, name: str, node_name: str, phase: str = "Running", containers: int = 1,
              annotations: dict[str, str] | None = None, namespace: str = "default", **labels: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/pods"
    await c.create(path, {"apiVersion": "v1", "kind": "Pod",
                          "metadata": {"name": name, "labels": labels, "annotations": annotations or {}},
                          "spec": {"nodeName": node_name,
                                   "containers": [{"name": f"c{i}", "image": "x"} for i in range(containers)]}})
    got = await c.get(f"{path}/{name}")
    got["status"] = {"phase": phase}
    await c.update(f"{path}/{name}/status", got)


@pytest.fixture
async def cluster(client: Client) -> Client:
    await node(client, "n1", zone="a")
    await node(client, "n2", zone="b")
    await node(client, "down", ready=False)
    await pod(client, "busy", "n1", containers=2, annotations={USAGE_CPU: "250m", USAGE_MEMORY: "100Mi"}, app="web")
    await pod(client, "idle", "n1", app="web")
    await pod(client, "other", "n2", app="db")
    await pod(client, "waiting", "n2", phase="Pending", app="web")
    return client


def usage_of(item: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(c["name"], c["usage"]["cpu"], c["usage"]["memory"]) for c in item["containers"]]


async def test_pod_metrics_list_and_get(cluster: Client) -> None:
    c = cluster
    listed = await c.list(f"{METRICS}/namespaces/default/pods")
    assert (listed["kind"], listed["apiVersion"]) == ("PodMetricsList", "metrics.k8s.io/v1beta1")
    by_name = {i["metadata"]["name"]: i for i in listed["items"]}
    assert sorted(by_name) == ["busy", "idle", "other"]  # a pending pod has no running containers to measure
    # the annotation applies to each container, as KWOK's usage-from-annotation does
    assert usage_of(by_name["busy"]) == [("c0", "250m", "100Mi"), ("c1", "250m", "100Mi")]
    assert usage_of(by_name["idle"]) == [("c0", "1m", "1Mi")]  # KWOK's default
    busy = by_name["busy"]
    assert (busy["kind"], busy["window"], busy["metadata"]["namespace"]) == ("PodMetrics", "15s", "default")
    assert busy["metadata"]["labels"] == {"app": "web"} and busy["timestamp"]
    got = await c.get(f"{METRICS}/namespaces/default/pods/busy")
    assert usage_of(got) == usage_of(busy)
    selected = await c.list(f"{METRICS}/namespaces/default/pods", labelSelector="app=web")
    assert sorted(i["metadata"]["name"] for i in selected["items"]) == ["busy", "idle"]
    by_field = await c.list(f"{METRICS}/pods", fieldSelector="metadata.name=other")
    assert [i["metadata"]["name"] for i in by_field["items"]] == ["other"]
    assert (await c.list(f"{METRICS}/namespaces/kube-system/pods"))["items"] == []


async def test_node_metrics_sum_their_running_pods(cluster: Client) -> None:
    c = cluster
    listed = await c.list(f"{METRICS}/nodes")
    assert listed["kind"] == "NodeMetricsList"
    usage = {i["metadata"]["name"]: i["usage"] for i in listed["items"]}
    assert usage == {"n1": {"cpu": "501m", "memory": "201Mi"},  # 2 x 250m + 1m; 2 x 100Mi + 1Mi
                     "n2": {"cpu": "1m", "memory": "1Mi"}}  # a NotReady node is not scraped
    one = await c.get(f"{METRICS}/nodes/n1")
    assert (one["kind"], one["usage"], one["metadata"]["labels"]) == ("NodeMetrics", usage["n1"], {"zone": "a"})
    by_label = await c.list(f"{METRICS}/nodes", labelSelector="zone=b")
    assert [i["metadata"]["name"] for i in by_label["items"]] == ["n2"]


async def test_usage_follows_the_annotations(cluster: Client) -> None:
    c = cluster
    got = await c.get(f"{PODS}/idle")
    got["metadata"]["annotations"] = {USAGE_CPU: "2", USAGE_MEMORY: "1Gi"}
    await c.update(f"{PODS}/idle", got)
    assert usage_of(await c.get(f"{METRICS}/namespaces/default/pods/idle")) == [("c0", "2", "1Gi")]
    got["metadata"]["annotations"] = {USAGE_CPU: "lots"}  # unreadable: the default, as KWOK falls back
    await c.update(f"{PODS}/idle", {**got, "metadata": {**got["metadata"], "resourceVersion": None}})
    assert usage_of(await c.get(f"{METRICS}/namespaces/default/pods/idle")) == [("c0", "1m", "1Mi")]


async def test_quantities_are_canonical_as_metrics_server_marshals_them(cluster: Client) -> None:
    """CPU a DecimalSI count of nanocores, memory a BinarySI count of bytes, written as
    ``resource.Quantity`` marshals them: whole millicores as ``m``, a measured rate that is not
    in nanocores; whole Mi as ``Mi``, other multiples of 1024 in ``Ki``, the rest in bytes."""
    c = cluster
    got = await c.get(f"{PODS}/idle")
    for cpu, memory, shown in (("2308955n", "14544Ki", ("2308955n", "14544Ki")),
                               ("1500n", "1536", ("1500n", "1536")),
                               ("0", "1000", ("0", "1k")),
                               ("1.5", "1.5Gi", ("1500m", "1536Mi"))):
        got["metadata"]["annotations"] = {USAGE_CPU: cpu, USAGE_MEMORY: memory}
        got = await c.update(f"{PODS}/idle", got)
        assert usage_of(await c.get(f"{METRICS}/namespaces/default/pods/idle")) == [("c0", *shown)], (cpu, memory)


async def test_errors_are_metrics_server_statuses(cluster: Client) -> None:
    c = cluster
    for path, message in ((f"{METRICS}/namespaces/default/pods/waiting", 'podmetrics.metrics.k8s.io '
                                                                          '"default/waiting" not found'),
                          (f"{METRICS}/namespaces/default/pods/nope", 'podmetrics.metrics.k8s.io '
                                                                       '"default/nope" not found'),
                          (f"{METRICS}/nodes/down", 'nodemetrics.metrics.k8s.io "down" not found')):
        with pytest.raises(ApiError) as e:
            await c.get(path)
        assert (e.value.code, e.value.reason, e.value.message) == (404, "NotFound", message)
    with pytest.raises(ApiError) as e:  # read-only, as metrics-server
        await c.create(f"{METRICS}/namespaces/default/pods", {"metadata": {"name": "x"}})
    assert e.value.code == 405
    with pytest.raises(ApiError) as e:
        await c.delete(f"{METRICS}/nodes/n1")
    assert e.value.code == 405
    with pytest.raises(ApiError) as e:
        await c.list(f"{METRICS}/namespaces/default/pods", watch="true")
    assert e.value.code == 405
    with pytest.raises(ApiError) as e:
        await c.list(f"{METRICS}/namespaces/default/pods", labelSelector="a in (")
    assert e.value.code == 400


async def test_discovery(cluster: Client) -> None:
    c = cluster
    group = await c.get("/apis/metrics.k8s.io")
    assert group["preferredVersion"]["version"] == "v1beta1"
    resources = {r["name"]: r for r in (await c.get(METRICS))["resources"]}
    assert (resources["pods"]["kind"], resources["pods"]["namespaced"], resources["pods"]["verbs"]) == \
        ("PodMetrics", True, ["get", "list"])
    assert (resources["nodes"]["kind"], resources["nodes"]["namespaced"]) == ("NodeMetrics", False)
