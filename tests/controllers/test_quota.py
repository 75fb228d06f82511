"""ResourceQuotas: the admission that charges creates (api/quota.py) and the controller that
counts usage (controllers/quota.py), inside a server with its controllers and simulated nodes."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.client import ApiError, Client
from tests.controllers.helpers import until

QUOTAS = "/api/v1/namespaces/default/resourcequotas"
PODS = "/api/v1/namespaces/default/pods"
CMS = "/api/v1/namespaces/default/configmaps"
SERVICES = "/api/v1/namespaces/default/services"
DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"


def pod(name: str, cpu: str | None = "100m", memory: str | None = "64Mi", **spec: Any) -> dict[str, Any]:
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    return {"metadata": {"name": name}, "spec": {
        "terminationGracePeriodSeconds": 0, **spec,
        "containers": [{"name": "c", "image": "busybox", "resources": {"requests": requests} if requests else {}}]}}


async def counted(c: Client, name: str) -> dict[str, Any]:
    """The quota once its controller has counted it (status.used for every hard resource)."""
    async def ready() -> dict[str, Any] | None:
        q = await c.get(f"{QUOTAS}/{name}")
        status = q.get("status") or {}
        return status if set(status.get("used") or {}) == set(q["spec"]["hard"]) else None
    got: dict[str, Any] = await until(ready)
    return got


async def used(c: Client, name: str) -> dict[str, str]:
    return dict(((await c.get(f"{QUOTAS}/{name}")).get("status") or {}).get("used") or {})


async def test_pods_are_charged_refused_over_the_limit_and_given_back_when_deleted(client: Client) -> None:
    await client.create(QUOTAS, {"metadata": {"name": "compute"}, "spec": {"hard": {
        "pods": "2", "requests.cpu": "250m", "requests.memory": "1Gi"}}})
    status = await counted(client, "compute")
    assert status["hard"] == {"pods": "2", "requests.cpu": "250m", "requests.memory": "1Gi"}
    assert status["used"] == {"pods": "0", "requests.cpu": "0", "requests.memory": "0"}
    await client.create(PODS, pod("a"))
    assert await used(client, "compute") == {"pods": "1", "requests.cpu": "100m", "requests.memory": "64Mi"}
    with pytest.raises(ApiError) as e:
        await client.create(PODS, pod("big", cpu="200m"))
    assert e.value.code == 403 and e.value.reason == "Forbidden"
    assert 'pods "big" is forbidden: exceeded quota: compute, requested: requests.cpu=200m, ' \
           "used: requests.cpu=100m, limited: requests.cpu=250m" in e.value.message
    with pytest.raises(ApiError) as e:
        await client.create(PODS, pod("vague", cpu=None))
    assert e.value.code == 403 and "failed quota: compute: must specify requests.cpu for: c" in e.value.message
    await client.create(PODS, pod("b"))
    with pytest.raises(ApiError) as e:
        await client.create(PODS, pod("c", cpu="10m", memory="1Mi"))
    assert "exceeded quota: compute, requested: pods=1, used: pods=2, limited: pods=2" in e.value.message
    # a dry run is checked but charges nothing
    await client.delete(f"{PODS}/b")
    await until(lambda: _used_is(client, "compute", "pods", "1"))
    await client.create(PODS, pod("dry"), dryRun="All")
    assert (await used(client, "compute"))["pods"] == "1"


async def _used_is(c: Client, name: str, resource: str, want: str) -> bool:
    return (await used(c, name)).get(resource) == want


async def test_a_pod_with_pod_level_resources_is_charged_them(client: Client) -> None:
    """PodLevelResources: the pod-level requests and limits are what the pod uses of the
    resources they name (its containers' sum of the others), at admission and in the
    controller's count; its containers need not state what the quota limits; and a pod whose
    containers say nothing is not BestEffort when its pod level says something."""
    await client.create(QUOTAS, {"metadata": {"name": "compute"}, "spec": {"hard": {
        "requests.cpu": "1", "requests.memory": "1Gi", "limits.memory": "2Gi"}}})
    await client.create(QUOTAS, {"metadata": {"name": "besteffort"}, "spec": {
        "hard": {"pods": "0"}, "scopes": ["BestEffort"]}})
    await counted(client, "compute")
    await counted(client, "besteffort")
    body = pod("pl", cpu="100m", memory=None)
    body["spec"]["resources"] = {"requests": {"cpu": "600m", "memory": "256Mi"}, "limits": {"memory": "512Mi"}}
    await client.create(PODS, body)
    assert await until(lambda: _used_exactly(client, "compute", {
        "requests.cpu": "600m", "requests.memory": "256Mi", "limits.memory": "512Mi"}))
    quiet = pod("quiet", cpu=None, memory=None)  # its containers state nothing; not BestEffort
    quiet["spec"]["resources"] = {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"memory": "128Mi"}}
    await client.create(PODS, quiet)
    again = pod("pl2", cpu="100m", memory=None)
    again["spec"]["resources"] = {"requests": {"cpu": "600m", "memory": "256Mi"}, "limits": {"memory": "512Mi"}}
    with pytest.raises(ApiError) as e:
        await client.create(PODS, again)
    assert e.value.code == 403
    assert "exceeded quota: compute, requested: requests.cpu=600m, used: requests.cpu=700m, " \
           "limited: requests.cpu=1" in e.value.message


async def _used_exactly(c: Client, name: str, want: dict[str, str]) -> bool:
    return await used(c, name) == want


async def test_object_counts_and_service_node_ports(client: Client) -> None:
    await client.create(QUOTAS, {"metadata": {"name": "objects"}, "spec": {"hard": {
        "configmaps": "1", "count/deployments.apps": "1", "services.nodeports": "1"}}})
    await counted(client, "objects")
    await client.create(CMS, {"metadata": {"name": "one"}, "data": {}})
    with pytest.raises(ApiError) as e:
        await client.create(CMS, {"metadata": {"name": "two"}, "data": {}})
    assert e.value.code == 403 and "exceeded quota: objects, requested: configmaps=1" in e.value.message
    with pytest.raises(ApiError) as e:
        await client.create(SERVICES, {"metadata": {"name": "np"}, "spec": {
            "type": "NodePort", "ports": [{"name": "http", "port": 80}, {"name": "https", "port": 443}]}})
    assert "services.nodeports=2" in e.value.message
    await client.create(SERVICES, {"metadata": {"name": "cip"}, "spec": {"ports": [{"port": 80}]}})
    # the controller's count agrees with what admission charged, and notices a deletion
    await client.delete(f"{CMS}/one")
    await until(lambda: _used_is(client, "objects", "configmaps", "0"))
    await client.create(CMS, {"metadata": {"name": "two"}, "data": {}})


async def test_scopes_choose_the_pods_a_quota_covers(client: Client) -> None:
    await client.create(QUOTAS, {"metadata": {"name": "besteffort"}, "spec": {
        "hard": {"pods": "1"}, "scopes": ["BestEffort"]}})
    await client.create(QUOTAS, {"metadata": {"name": "critical"}, "spec": {
        "hard": {"pods": "5"}, "scopeSelector": {"matchExpressions": [
            {"scopeName": "PriorityClass", "operator": "In", "values": ["system-cluster-critical"]}]}}})
    await counted(client, "besteffort")
    await counted(client, "critical")
    await client.create(PODS, pod("free", cpu=None, memory=None))  # best effort: the first quota
    with pytest.raises(ApiError) as e:
        await client.create(PODS, pod("free2", cpu=None, memory=None))
    assert "exceeded quota: besteffort" in e.value.message
    await client.create(PODS, pod("sized"))  # has requests: not best effort, no priority class: neither
    await client.create(PODS, pod("vip", priorityClassName="system-cluster-critical"))
    assert await used(client, "critical") == {"pods": "1"}
    assert await used(client, "besteffort") == {"pods": "1"}


async def test_a_converted_type_is_charged_without_converting_the_quota(client: Client) -> None:
    """An autoscaling/v1 HPA is stored as v2: the quota read and written while it is created
    must stay a quota, not be put through the HPA's conversion."""
    await client.create(QUOTAS, {"metadata": {"name": "hpas"}, "spec": {"hard": {
        "count/horizontalpodautoscalers.autoscaling": "1"}}})
    await counted(client, "hpas")
    v1 = "/apis/autoscaling/v1/namespaces/default/horizontalpodautoscalers"
    ref = {"kind": "Deployment", "name": "web"}
    await client.create(v1, {"metadata": {"name": "a"}, "spec": {"scaleTargetRef": ref, "maxReplicas": 2}})
    quota = await client.get(f"{QUOTAS}/hpas")
    assert quota["kind"] == "ResourceQuota" and quota["spec"]["hard"] == {
        "count/horizontalpodautoscalers.autoscaling": "1"}
    assert quota["status"]["used"] == {"count/horizontalpodautoscalers.autoscaling": "1"}
    with pytest.raises(ApiError) as e:
        await client.create(v1, {"metadata": {"name": "b"}, "spec": {"scaleTargetRef": ref, "maxReplicas": 2}})
    assert e.value.code == 403 and "exceeded quota: hpas" in e.value.message


async def test_an_ended_pod_counts_as_an_object_but_uses_nothing(client: Client) -> None:
    """upstream's PodUsageFunc: count/pods tracks every pod stored, pods and the compute
    resources only those that have not ended."""
    await client.create(QUOTAS, {"metadata": {"name": "both"}, "spec": {"hard": {
        "pods": "5", "count/pods": "5", "requests.cpu": "1"}}})
    await counted(client, "both")
    made = await client.create(PODS, pod("done", nodeName="nowhere"))  # (no kubelet runs it)
    await client.update(f"{PODS}/done/status", {**made, "status": {**(made.get("status") or {}),
                                                                   "phase": "Succeeded"}})
    await until(lambda: _used_is(client, "both", "pods", "0"))
    assert await used(client, "both") == {"pods": "0", "count/pods": "1", "requests.cpu": "0"}
