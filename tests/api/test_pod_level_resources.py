"""Pod-level resources (PodLevelResources, on since 1.34) at create: upstream's defaults
(SetDefaults_Pod's defaultHugePagePodLimits, defaultPodRequests, defaultPodLimits) and
validatePodResources' refusals, in its field paths and words, for a Pod and a template."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.client import ApiError, Client

from .test_pod_spec_validation import DEPLOYMENTS, PODS, cause, causes_of, deployment, pod, spec_with


def with_pod_level(resources: dict[str, Any], *containers: dict[str, Any], **extra: Any) -> dict[str, Any]:
    listed = [{"name": f"c{i}", "image": "nginx:1.27", "resources": r} for i, r in enumerate(containers)]
    return {"containers": listed or [{"name": "c0", "image": "nginx:1.27"}], "resources": resources, **extra}


async def test_pod_level_defaults_at_create(client: Client) -> None:
    # limits only: requests default to the containers' aggregate where they request, else the limit
    created = await client.create(PODS, pod(with_pod_level(
        {"limits": {"cpu": "2", "memory": "1Gi"}},
        {"requests": {"cpu": "500m", "memory": "100Mi"}}, {"requests": {"cpu": "1"}}), name="limits"))
    assert created["spec"]["resources"] == {"limits": {"cpu": "2", "memory": "1Gi"},
                                            "requests": {"cpu": "1500m", "memory": "100Mi"}}
    # requests only: limits default to the containers' aggregate where every container limits
    created = await client.create(PODS, pod(with_pod_level(
        {"requests": {"cpu": "2", "memory": "256Mi"}},
        {"limits": {"cpu": "1", "memory": "128Mi"}}, {"limits": {"cpu": "1"}}), name="requests"))
    assert created["spec"]["resources"] == {"requests": {"cpu": "2", "memory": "256Mi"}, "limits": {"cpu": "2"}}
    assert created["status"]["qosClass"] == "Burstable"
    # hugepages the containers limit: the pod level's limit and request too
    created = await client.create(PODS, pod(with_pod_level(
        {"requests": {"memory": "1Gi"}, "limits": {"memory": "1Gi"}},
        {"limits": {"hugepages-2Mi": "4Mi"}}, {"limits": {"hugepages-2Mi": "2Mi"}}), name="huge"))
    assert created["spec"]["resources"] == {"requests": {"memory": "1Gi", "hugepages-2Mi": "6Mi"},
                                            "limits": {"memory": "1Gi", "hugepages-2Mi": "6Mi"}}
    # a template is not defaulted (SetDefaults_Pod is a Pod's)
    d = await client.create(DEPLOYMENTS, deployment(with_pod_level({"limits": {"cpu": "2"}}, {})))
    assert d["spec"]["template"]["spec"]["resources"] == {"limits": {"cpu": "2"}}


async def test_pod_level_resources_against_the_containers(client: Client) -> None:
    found = await causes_of(client, PODS, pod(with_pod_level(
        {"requests": {"cpu": "500m", "memory": "64Mi"}, "limits": {"cpu": "1"}},
        {"requests": {"cpu": "400m", "memory": "100Mi"}}, {"requests": {"cpu": "200m"}, "limits": {"cpu": "2"}})))
    assert found == [
        cause("FieldValueInvalid", "spec.resources.requests[cpu]",
              'Invalid value: "500m": must be greater than or equal to aggregate container requests of 600m'),
        cause("FieldValueInvalid", "spec.resources.requests[memory]",
              'Invalid value: "64Mi": must be greater than or equal to aggregate container requests of 100Mi'),
        cause("FieldValueInvalid", "spec.resources.containers[1][cpu].limits",
              'Invalid value: "2": must be less than or equal to pod limits of 1')]
    # a template is held to the same, at its path
    found = await causes_of(client, DEPLOYMENTS, deployment(with_pod_level(
        {"requests": {"cpu": "100m"}}, {"requests": {"cpu": "200m", "ephemeral-storage": "1Gi"}})))
    assert found == [cause("FieldValueInvalid", "spec.template.spec.resources.requests[cpu]",
                           'Invalid value: "100m": must be greater than or equal to aggregate container '
                           "requests of 200m")]


async def test_what_pod_level_resources_may_name(client: Client) -> None:
    found = await causes_of(client, PODS, pod(with_pod_level(
        {"requests": {"ephemeral-storage": "1Gi", "cpu": "-1", "memory": "2Gi"}, "limits": {"memory": "1Gi"},
         "claims": [{"name": "gpu"}]})))
    assert found == [
        cause("FieldValueForbidden", "spec.resources.claims",
              "Forbidden: claims may not be set for Resources at pod-level"),
        cause("FieldValueNotSupported", "spec.resources.requests[ephemeral-storage]",
              'Unsupported value: "ephemeral-storage": supported values: "cpu", "hugepages-", "memory"'),
        cause("FieldValueInvalid", "spec.resources.requests[cpu]", 'Invalid value: "-1": must be greater than or '
                                                                   "equal to 0"),
        cause("FieldValueInvalid", "spec.resources.requests",
              'Invalid value: "2Gi": must be less than or equal to memory limit of 1Gi')]
    found = await causes_of(client, PODS, pod(with_pod_level({"requests": {"hugepages-2Mi": "2Mi"}})))
    assert found == [
        cause("FieldValueRequired", "spec.resources.limits",
              "Required value: Limit must be set for non overcommitable resources"),
        cause("FieldValueForbidden", "spec.resources", "Forbidden: HugePages require cpu or memory")]
    found = await causes_of(client, PODS, pod(with_pod_level({"requests": {"cpu": "1"}}, os={"name": "windows"})))
    assert cause("FieldValueForbidden", "spec.resources", "Forbidden: may not be set for a windows pod") in found


async def test_valid_pod_level_resources_are_kept(client: Client) -> None:
    whole = {"cpu": "1", "memory": "1Gi"}
    body = pod(spec_with({"resources": {"requests": {"cpu": "250m"}, "limits": {"cpu": "500m"}}},
                         resources={"requests": dict(whole), "limits": dict(whole)}))
    created = await client.create(PODS, body)
    assert created["spec"]["resources"] == {"requests": {"cpu": "1", "memory": "1Gi"},
                                            "limits": {"cpu": "1", "memory": "1Gi"}}
    assert created["status"]["qosClass"] == "Guaranteed"
    with pytest.raises(ApiError) as e:  # and an update may not change them (the spec is immutable)
        await client.patch(f"{PODS}/p", {"spec": {"resources": {"requests": {"cpu": "2"}}}}, "strategic")
    assert e.value.code == 422
