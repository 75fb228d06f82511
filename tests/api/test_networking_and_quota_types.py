"""Ingresses, NetworkPolicies, EndpointSlices, ResourceQuotas, LimitRanges and
HorizontalPodAutoscalers (autoscaling/v2, and v1 converted to it): served, defaulted
and validated as upstream's strategies."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.client import ApiError, Client, resource_path

INGRESSES = resource_path("networking.k8s.io", "v1", "ingresses", "default")
POLICIES = resource_path("networking.k8s.io", "v1", "networkpolicies", "default")
SLICES = resource_path("discovery.k8s.io", "v1", "endpointslices", "default")
QUOTAS = resource_path("", "v1", "resourcequotas", "default")
LIMITS = resource_path("", "v1", "limitranges", "default")
HPA_V2 = resource_path("autoscaling", "v2", "horizontalpodautoscalers", "default")
HPA_V1 = resource_path("autoscaling", "v1", "horizontalpodautoscalers", "default")


def ingress(name: str, path: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"rules": [{"host": "a.example", "http": {"paths": [path]}}]}}


BACKEND = {"service": {"name": "web", "port": {"number": 80}}}


async def test_ingress_paths_need_a_type_and_a_service_port(client: Client) -> None:
    ok = await client.create(INGRESSES, ingress("ok", {"path": "/", "pathType": "Prefix", "backend": BACKEND}))
    assert ok["status"] == {"loadBalancer": {}}
    for name, path, text in [
        ("no-type", {"path": "/", "backend": BACKEND}, "pathType: Required value"),
        ("relative", {"path": "api", "pathType": "Exact", "backend": BACKEND}, "must be an absolute path"),
        ("no-port", {"path": "/", "pathType": "Prefix", "backend": {"service": {"name": "web", "port": {}}}},
         "port name or number is required"),
    ]:
        with pytest.raises(ApiError) as e:
            await client.create(INGRESSES, ingress(name, path))
        assert e.value.code == 422 and text in e.value.message, name
    with pytest.raises(ApiError) as e:
        await client.create(INGRESSES, {"metadata": {"name": "empty"}, "spec": {}})
    assert e.value.code == 422 and "either `defaultBackend` or `rules` must be specified" in e.value.message


async def test_network_policy_and_endpoint_slice_defaults(client: Client) -> None:
    np = await client.create(POLICIES, {"metadata": {"name": "db"}, "spec": {
        "podSelector": {"matchLabels": {"app": "db"}},
        "ingress": [{"ports": [{"port": 5432}]}], "egress": [{}]}})
    assert np["spec"]["policyTypes"] == ["Ingress", "Egress"]
    assert np["spec"]["ingress"][0]["ports"][0]["protocol"] == "TCP"
    es = await client.create(SLICES, {"metadata": {"name": "web-1"}, "addressType": "IPv4",
                                      "endpoints": [{"addresses": ["10.0.0.1"]}], "ports": [{"port": 80}]})
    assert es["ports"] == [{"port": 80, "protocol": "TCP", "name": ""}]
    with pytest.raises(ApiError) as e:
        await client.create(SLICES, {"metadata": {"name": "bad"}, "addressType": "IPv5", "endpoints": []})
    assert e.value.code == 422 and 'Unsupported value: "IPv5"' in e.value.message


async def test_quota_quantities_and_limit_range_defaults(client: Client) -> None:
    with pytest.raises(ApiError) as e:
        await client.create(QUOTAS, {"metadata": {"name": "q"}, "spec": {"hard": {"cpu": "two"}}})
    assert e.value.code == 400
    with pytest.raises(ApiError) as e:
        await client.create(QUOTAS, {"metadata": {"name": "q"}, "spec": {"hard": {"cpu": "-1"}}})
    assert e.value.code == 422 and "must be greater than or equal to 0" in e.value.message
    lr = await client.create(LIMITS, {"metadata": {"name": "l"}, "spec": {"limits": [
        {"type": "Container", "max": {"cpu": "2"}, "min": {"memory": "64Mi"}, "default": {"memory": "256Mi"}}]}})
    item = lr["spec"]["limits"][0]
    assert item["default"] == {"memory": "256Mi", "cpu": "2"}  # cpu from max
    assert item["defaultRequest"] == {"memory": "256Mi", "cpu": "2"}  # from the default limit, before min


async def test_hpa_v2_defaults_and_v1_is_the_same_object(client: Client) -> None:
    ref = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}
    v2 = await client.create(HPA_V2, {"metadata": {"name": "web"}, "spec": {
        "scaleTargetRef": ref, "maxReplicas": 5, "behavior": {"scaleDown": {"stabilizationWindowSeconds": 60}}}})
    assert v2["spec"]["minReplicas"] == 1
    assert v2["spec"]["metrics"] == [{"type": "Resource", "resource": {"name": "cpu", "target": {
        "type": "Utilization", "averageUtilization": 80}}}]
    assert v2["spec"]["behavior"]["scaleUp"]["policies"][0] == {"type": "Pods", "value": 4, "periodSeconds": 15}
    assert v2["spec"]["behavior"]["scaleDown"]["stabilizationWindowSeconds"] == 60
    v1 = await client.get(f"{HPA_V1}/web")
    assert v1["apiVersion"] == "autoscaling/v1" and v1["spec"]["targetCPUUtilizationPercentage"] == 80
    assert "autoscaling.alpha.kubernetes.io/behavior" in v1["metadata"]["annotations"]
    assert v1["status"] == {"currentReplicas": 0, "desiredReplicas": 0}
    v1["spec"]["targetCPUUtilizationPercentage"] = 60
    await client.update(f"{HPA_V1}/web", v1)
    again = await client.get(f"{HPA_V2}/web")  # the behavior a v1 client cannot see survived its update
    assert again["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"] == 60
    assert again["spec"]["behavior"]["scaleDown"]["stabilizationWindowSeconds"] == 60
    assert "annotations" not in again["metadata"]
    with pytest.raises(ApiError) as e:
        await client.create(HPA_V1, {"metadata": {"name": "bad"}, "spec": {
            "scaleTargetRef": ref, "minReplicas": 4, "maxReplicas": 2}})
    assert e.value.code == 422 and "must be greater than or equal to `minReplicas`" in e.value.message


async def test_malformed_values_are_refused_or_dropped_never_a_500(client: Client) -> None:
    with pytest.raises(ApiError) as e:  # a list where a quantity goes: the decoder's 400
        await client.create(LIMITS, {"metadata": {"name": "bad"}, "spec": {"limits": [
            {"type": "Container", "max": {"cpu": []}}]}})
    assert e.value.code == 400 and "quantities must match the regular expression" in e.value.message
    # a v1 HPA's carried annotation that is not a list of metrics is dropped, not stored as metrics
    await client.create(HPA_V1, {"metadata": {"name": "odd", "annotations": {
        "autoscaling.alpha.kubernetes.io/metrics": '{"a": 1}'}}, "spec": {
        "scaleTargetRef": {"kind": "Deployment", "name": "web"}, "maxReplicas": 2}})
    v2 = await client.get(f"{HPA_V2}/odd")
    assert v2["spec"]["metrics"] == [{"type": "Resource", "resource": {"name": "cpu", "target": {
        "type": "Utilization", "averageUtilization": 80}}}]
