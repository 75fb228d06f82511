"""pods/resize (registry/resize.py): a pod's containers' cpu and memory changed in
place, everything else of the body ignored or refused, in upstream's words."""

from __future__ import annotations

import asyncio
from fractions import Fraction
from typing import Any

import pytest

from controlplane.client import ApiError, Client

PODS = "/api/v1/namespaces/default/pods"


def container(name: str = "c", **resources: Any) -> dict[str, Any]:
    return {"name": name, "image": "nginx:1.27", "resources": resources}


@pytest.fixture
async def pod(client: Client) -> Client:
    await client.create(PODS, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"a": "1"}},
                               "spec": {"containers": [container(requests={"cpu": "500m", "memory": "64Mi"})]}})
    return client


async def resize(c: Client, *containers: dict[str, Any], name: str = "p") -> dict[str, Any]:
    return await c.patch(f"{PODS}/{name}/resize", {"spec": {"containers": list(containers)}}, "strategic")


async def refusal(c: Client, body: dict[str, Any], name: str = "p") -> dict[str, str]:
    with pytest.raises(ApiError) as e:
        await c.patch(f"{PODS}/{name}/resize", body, "strategic")
    assert (e.value.code, e.value.reason) == (422, "Invalid")
    cause: dict[str, str] = e.value.status["details"]["causes"][0]
    cause.setdefault("field", "")  # (an empty one is left out, as upstream's omitempty leaves it)
    assert f"{cause['field']}: {cause['message']}" in e.value.message
    return cause


async def test_a_resize_changes_only_the_containers_resources_and_steps_the_generation(pod: Client) -> None:
    c = pod
    assert (await c.get(f"{PODS}/p/resize"))["kind"] == "Pod"
    got = await resize(c, {"name": "c", "resources": {"requests": {"cpu": "800m"}}})
    assert got["spec"]["containers"][0]["resources"] == {"requests": {"cpu": "800m", "memory": "64Mi"}}
    assert got["metadata"]["generation"] == 2
    # a PUT: labels and images sent are ignored, limits alone request the limit (defaults)
    got["metadata"]["labels"] = {"a": "changed"}
    got["spec"]["containers"][0]["image"] = "other"
    got["spec"]["containers"][0]["resources"] = {"requests": {"memory": "64Mi", "cpu": "1"}}
    put = await c.update(f"{PODS}/p/resize", got)
    assert put["metadata"]["labels"] == {"a": "1"} and put["spec"]["containers"][0]["image"] == "nginx:1.27"
    assert put["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "1"
    assert put["metadata"]["generation"] == 3
    # the same again writes nothing new
    again = await resize(c, {"name": "c", "resources": {"requests": {"cpu": "1"}}})
    assert again["metadata"]["generation"] == 3
    # the pod itself still refuses the change (only the subresource resizes)
    with pytest.raises(ApiError) as e:
        await c.patch(f"{PODS}/p", {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}]}},
                      "strategic")
    assert e.value.code == 422


async def test_discovery_lists_the_subresource(client: Client) -> None:
    resources = {r["name"]: r for r in (await client.get("/api/v1"))["resources"]}
    assert resources["pods/resize"]["kind"] == "Pod"
    assert sorted(resources["pods/resize"]["verbs"]) == ["get", "patch", "update"]


async def test_json_and_merge_patches_resize_too(pod: Client) -> None:
    got = await pod.patch(f"{PODS}/p/resize", [{"op": "replace", "path": "/spec/containers/0/resources/requests/cpu",
                                                "value": "300m"}], "json")
    assert got["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "300m"
    merged = {"spec": {"containers": [container(requests={"cpu": "400m", "memory": "64Mi"})]}}
    got = await pod.patch(f"{PODS}/p/resize", merged, "merge")
    assert got["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "400m"


@pytest.mark.parametrize(("patch", "field", "message"), [
    ({"name": "c", "resources": {"requests": {"cpu": "1", "memory": None}}}, "spec.containers[0].resources.requests",
     "Forbidden: resource requests cannot be removed"),
    ({"name": "c", "resources": {"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1"}}}, "spec",
     "Forbidden: only cpu and memory resources are mutable"),
    ({"name": "c", "resources": {"limits": {"cpu": "100m"}}}, "spec.containers[0].resources.requests",
     'Invalid value: "500m": must be less than or equal to cpu limit of 100m'),
    ({"name": "c", "resizePolicy": [{"resourceName": "cpu", "restartPolicy": "RestartContainer"}]}, "spec",
     "Forbidden: only cpu and memory resources are mutable"),
])
async def test_refused_resizes_are_422_in_upstreams_words(pod: Client, patch: dict[str, Any], field: str,
                                                          message: str) -> None:
    cause = await refusal(pod, {"spec": {"containers": [patch]}})
    assert (cause["field"], cause["message"]) == (field, message)


async def test_a_memory_limit_is_lowered_or_added_without_a_restart_policy(client: Client) -> None:
    """Since 1.34 (kubernetes#133012) a resize may lower or add a memory limit whatever the
    memory resize policy (1.33 refused it without RestartContainer); a limit still may not go."""
    limited = container(requests={"cpu": "100m", "memory": "64Mi"}, limits={"cpu": "1", "memory": "128Mi"})
    await client.create(PODS, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "m"},
                               "spec": {"containers": [limited, container("d", requests={"memory": "64Mi"})]}})
    got = await resize(client, {"name": "c", "resources": {"limits": {"memory": "96Mi"}}},
                       {"name": "d", "resources": {"limits": {"memory": "128Mi"}}}, name="m")
    assert got["spec"]["containers"][0]["resources"]["limits"]["memory"] == "96Mi"
    assert got["spec"]["containers"][1]["resources"]["limits"] == {"memory": "128Mi"}
    removed = {"name": "c", "resources": {"limits": {"cpu": None}}}
    cause = await refusal(client, {"spec": {"containers": [removed]}}, "m")
    assert cause["message"] == "Forbidden: resource limits cannot be removed"


async def test_the_qos_class_may_not_change(client: Client) -> None:
    guaranteed = container(requests={"cpu": "1", "memory": "64Mi"}, limits={"cpu": "1", "memory": "64Mi"})
    await client.create(PODS, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "g"},
                               "spec": {"containers": [guaranteed]}})
    cause = await refusal(client, {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "500m"}}}]}},
                          "g")
    assert (cause["field"], cause["message"]) == \
        ("spec", 'Invalid value: "Guaranteed": Pod QOS Class may not change as a result of resizing')
    got = await resize(client, {"name": "c", "resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "2"}}}, name="g")
    assert got["spec"]["containers"][0]["resources"]["limits"]["cpu"] == "2"


async def test_plain_init_containers_and_static_pods_are_not_resized(client: Client) -> None:
    init = {"name": "i", "image": "busybox:1.36", "resources": {"requests": {"cpu": "100m"}}}
    await client.create(PODS, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "i"},
                               "spec": {"initContainers": [init], "containers": [container()]}})
    changed = {"name": "i", "resources": {"requests": {"cpu": "1"}}}
    cause = await refusal(client, {"spec": {"initContainers": [changed]}}, "i")
    assert (cause["field"], cause["message"]) == \
        ("spec", "Forbidden: resources for non-sidecar init containers are immutable")
    sidecar = {**init, "name": "s", "restartPolicy": "Always"}
    await client.create(PODS, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "s"},
                               "spec": {"initContainers": [sidecar], "containers": [container()]}})
    got = await client.patch(f"{PODS}/s/resize", {"spec": {"initContainers": [
        {"name": "s", "resources": {"requests": {"cpu": "200m"}}}]}}, "strategic")
    assert got["spec"]["initContainers"][0]["resources"]["requests"]["cpu"] == "200m"
    await client.create(PODS, {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": "st", "annotations": {"kubernetes.io/config.mirror": "x"}},
        "spec": {"nodeName": "n1", "containers": [container()]}})  # (a mirror pod names its node)
    cause = await refusal(client, {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}},
                          "st")
    assert cause["message"] == "Forbidden: static pods cannot be resized"


async def pod_level(c: Client, name: str, resources: dict[str, Any], *containers: dict[str, Any]) -> None:
    await c.create(PODS, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                          "spec": {"resources": resources, "containers": list(containers) or [container()]}})


async def test_pod_level_resources_are_resized_as_upstreams_pod_level_resize(client: Client) -> None:
    """InPlacePodLevelResourcesVerticalScaling (beta, on since 1.36): pod-level cpu and memory
    change through the subresource (with the containers', the rest kept), in upstream's
    validatePodLevelResourcesResize's words; 1.34 refused any resize of such a pod."""
    await pod_level(client, "pl", {"requests": {"cpu": "1", "memory": "1Gi"}})
    got = await client.patch(f"{PODS}/pl/resize", {"spec": {
        "resources": {"requests": {"cpu": "2"}}, "containers": [{"name": "c", "resources": {"requests": {
            "cpu": "500m"}}}]}}, "strategic")
    assert got["spec"]["resources"] == {"requests": {"cpu": "2", "memory": "1Gi"}}
    assert got["spec"]["containers"][0]["resources"] == {"requests": {"cpu": "500m"}}
    assert got["metadata"]["generation"] == 2 and got["status"]["qosClass"] == "Burstable"
    # a pod without pod-level resources gets some, defaulted as at create (SetDefaults_Pod runs on
    # the decoded body): pod-level limits request the containers' aggregate cpu and memory where
    # they request them, the limit elsewhere
    await client.create(PODS, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "none"},
                               "spec": {"containers": [container(requests={"cpu": "100m"})]}})
    got = await client.patch(f"{PODS}/none/resize", {"spec": {"resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}},
                             "strategic")
    assert got["spec"]["resources"] == {"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "100m",
                                                                                             "memory": "1Gi"}}
    # pod-level requests alone are limited at the containers' aggregate where every container limits
    await client.create(PODS, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "capped"}, "spec": {
        "containers": [container(requests={"cpu": "100m"}, limits={"memory": "128Mi"}),
                       container("d", limits={"memory": "64Mi"})]}})
    got = await client.patch(f"{PODS}/capped/resize", {"spec": {"resources": {"requests": {"cpu": "500m"}}}},
                             "strategic")
    assert got["spec"]["resources"] == {"requests": {"cpu": "500m"}, "limits": {"memory": "192Mi"}}
    refused: list[tuple[dict[str, Any], str, str]] = [
        ({"spec": {"resources": None}}, "spec.resources", "pod-level resources cannot be removed"),
        ({"spec": {"resources": {"requests": {"memory": None}}}}, "spec.resources.requests",
         "pod-level resource requests cannot be removed"),
        ({"spec": {"resources": {"requests": {"hugepages-2Mi": "2Mi"}, "limits": {"hugepages-2Mi": "2Mi"}}}}, "spec",
         "only cpu and memory resources are mutable at pod-level"),
    ]
    for body, field, message in refused:
        cause = await refusal(client, body, "pl")
        assert (cause["field"], cause["message"]) == (field, f"Forbidden: {message}")
    # the QoS class is the pod-level resources': a Guaranteed pod stays so
    await pod_level(client, "g", {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}})
    assert (await client.get(f"{PODS}/g"))["status"]["qosClass"] == "Guaranteed"
    cause = await refusal(client, {"spec": {"resources": {"requests": {"cpu": "500m"}}}}, "g")
    assert (cause["field"], cause["message"]) == \
        ("spec", 'Invalid value: "Guaranteed": Pod QOS Class may not change as a result of resizing')
    got = await client.patch(f"{PODS}/g/resize", {"spec": {"resources": {
        "requests": {"cpu": "2"}, "limits": {"cpu": "2"}}}}, "strategic")
    assert got["spec"]["resources"]["limits"] == {"cpu": "2", "memory": "1Gi"}


async def test_renamed_containers_and_other_verbs_are_refused(pod: Client) -> None:
    got = await pod.get(f"{PODS}/p")
    got["spec"]["containers"][0]["name"] = "other"
    with pytest.raises(ApiError) as e:
        await pod.update(f"{PODS}/p/resize", got)
    assert e.value.code == 422 and "only cpu and memory resources are mutable" in e.value.message
    # a body without containers removes them: refused, as upstream's (nothing kept from the pod)
    with pytest.raises(ApiError) as e:
        await pod.update(f"{PODS}/p/resize", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}})
    assert e.value.code == 422 and "spec.containers: Required value" in e.value.message
    with pytest.raises(ApiError) as e:
        await pod.delete(f"{PODS}/p/resize")
    assert e.value.code == 405


QUOTAS = "/api/v1/namespaces/default/resourcequotas"


async def quota_used(c: Client) -> str:
    return str((await c.get(f"{QUOTAS}/compute"))["status"]["used"]["requests.cpu"])


async def test_a_resize_is_charged_to_the_quota_as_upstreams_pod_evaluator(client: Client) -> None:
    """ResourceQuota admission takes pods/resize: the growth is charged (a shrink is not given
    back at admission: upstream's delta is never negative, the controller's recount gives it
    back), and a growth over the limit is upstream's 403 exceeded quota."""
    c = client
    made = await c.create(QUOTAS, {"metadata": {"name": "compute"}, "spec": {"hard": {"requests.cpu": "1"}}})
    await c.update(f"{QUOTAS}/compute/status", {**made, "status": {"hard": {"requests.cpu": "1"},
                                                                   "used": {"requests.cpu": "0"}}})
    await c.create(PODS, {"metadata": {"name": "p"}, "spec": {"containers": [container(requests={"cpu": "500m"})]}})
    assert await quota_used(c) == "500m"
    await resize(c, {"name": "c", "resources": {"requests": {"cpu": "800m"}}})
    assert await quota_used(c) == "800m"
    with pytest.raises(ApiError) as e:
        await resize(c, {"name": "c", "resources": {"requests": {"cpu": "1200m"}}})
    assert (e.value.code, e.value.reason) == (403, "Forbidden")
    assert e.value.message == ('pods "p" is forbidden: exceeded quota: compute, requested: requests.cpu=400m, '
                               "used: requests.cpu=800m, limited: requests.cpu=1")
    assert (await c.get(f"{PODS}/p"))["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "800m"
    with pytest.raises(ApiError) as e:  # server-side apply of the subresource too
        await c.patch(f"{PODS}/p/resize", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "1500m"}}}]}}, "apply", fieldManager="vpa",
                      force=True)
    assert e.value.code == 403 and "exceeded quota: compute, requested: requests.cpu=700m" in e.value.message
    got = await c.update(f"{PODS}/p/resize", {"metadata": {"name": "p"}, "spec": {"containers": [
        container(requests={"cpu": "300m"})]}})  # a PUT too; down, without a kubelet reporting the old size
    assert got["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "300m"
    assert await quota_used(c) == "800m"  # (SubtractWithNonNegativeResult: what the kubelet still runs)
    ended = await c.get(f"{PODS}/p")  # an ended pod uses nothing, before or after
    await c.update(f"{PODS}/p/status", {**ended, "status": {**ended["status"], "phase": "Succeeded"}})
    await resize(c, {"name": "c", "resources": {"requests": {"cpu": "5"}}})
    assert await quota_used(c) == "800m"


async def test_a_resize_is_held_only_to_what_it_grows(client: Client) -> None:
    """upstream's quota admission checks only the resources whose usage goes up (zeros removed
    from the delta): a quota already over on memory (its hard lowered since) lets a cpu resize
    through."""
    c = client
    hard = {"requests.cpu": "2", "requests.memory": "1Gi"}
    made = await c.create(QUOTAS, {"metadata": {"name": "compute"}, "spec": {"hard": hard}})
    made = await c.update(f"{QUOTAS}/compute/status", {**made, "status": {
        "hard": hard, "used": {"requests.cpu": "0", "requests.memory": "0"}}})
    await c.create(PODS, {"metadata": {"name": "p"}, "spec": {"containers": [
        container(requests={"cpu": "500m", "memory": "64Mi"})]}})
    lowered = {**hard, "requests.memory": "32Mi"}
    made = await c.get(f"{QUOTAS}/compute")
    made = await c.update(f"{QUOTAS}/compute", {**made, "spec": {"hard": lowered}})
    await c.update(f"{QUOTAS}/compute/status", {**made, "status": {**made["status"], "hard": lowered}})
    got = await resize(c, {"name": "c", "resources": {"requests": {"cpu": "800m"}}})
    assert got["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "800m", "memory": "64Mi"}
    assert await quota_used(c) == "800m"


def test_a_pods_usage_counts_what_its_containers_run_with_too() -> None:
    """upstream's PodRequests with the status resources: the larger of the spec and what the
    container reports (a shrink not carried out yet counts its old size, a growth its new
    one), only what it reports once the resize is Infeasible."""
    from controlplane.registry.quota import usage

    pod: dict[str, Any] = {"spec": {"containers": [container(requests={"cpu": "300m", "memory": "1Gi"},
                                                             limits={"cpu": "2"})]},
                           "status": {"containerStatuses": [{"name": "c", "resources": {
                               "requests": {"cpu": "800m", "memory": "512Mi"}, "limits": {"cpu": "1"}}}]}}
    used = usage("", "pods", pod)
    assert (used["requests.cpu"], used["requests.memory"], used["limits.cpu"]) == \
        (Fraction(4, 5), Fraction(2**30), Fraction(2))
    pod["status"]["conditions"] = [{"type": "PodResizePending", "status": "True", "reason": "Infeasible"}]
    used = usage("", "pods", pod)
    assert (used["requests.cpu"], used["requests.memory"], used["limits.cpu"]) == \
        (Fraction(4, 5), Fraction(2**29), Fraction(1))


async def test_a_resize_is_held_to_the_namespaces_limit_ranges(client: Client) -> None:
    """LimitRanger takes pods/resize, as upstream's (and writes no annotation then: the resize
    strategy keeps only the resources)."""
    c = client
    await c.create("/api/v1/namespaces/default/limitranges", {"metadata": {"name": "bounds"}, "spec": {"limits": [
        {"type": "Container", "max": {"cpu": "1"}, "min": {"cpu": "100m"}}]}})
    await c.create(PODS, {"metadata": {"name": "p"}, "spec": {"containers": [
        container(requests={"cpu": "500m"}, limits={"cpu": "500m"})]}})
    with pytest.raises(ApiError) as e:
        await resize(c, {"name": "c", "resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "2"}}})
    assert (e.value.code, e.value.reason) == (403, "Forbidden")
    assert e.value.message == 'pods "p" is forbidden: maximum cpu usage per Container is 1, but limit is 2'
    with pytest.raises(ApiError) as e:
        await resize(c, {"name": "c", "resources": {"requests": {"cpu": "50m"}}})
    assert e.value.message == 'pods "p" is forbidden: minimum cpu usage per Container is 100m, but request is 50m'
    got = await resize(c, {"name": "c", "resources": {"requests": {"cpu": "800m"}, "limits": {"cpu": "800m"}}})
    assert got["spec"]["containers"][0]["resources"] == {"requests": {"cpu": "800m"}, "limits": {"cpu": "800m"}}
    assert "annotations" not in got["metadata"]


async def test_a_resize_gets_the_limit_range_defaults_without_the_annotation(client: Client) -> None:
    """LimitRanger's defaults apply to a resize as to a create (a limit range made after the
    pod gives it a default limit then), but the pod is not annotated: upstream's resize
    strategy keeps nothing of the write but the containers' resources."""
    c = client
    await c.create(PODS, {"metadata": {"name": "p"}, "spec": {"containers": [container(requests={"cpu": "200m"})]}})
    ranges = "/api/v1/namespaces/default/limitranges"
    await c.create(ranges, {"metadata": {"name": "defaults"}, "spec": {"limits": [
        {"type": "Container", "default": {"cpu": "1"}}]}})
    for _ in range(100):  # until the watch cache, which admission reads, has it
        if (await c.get(ranges, resourceVersion="0"))["items"]:
            break
        await asyncio.sleep(0.01)
    got = await resize(c, {"name": "c", "resources": {"requests": {"cpu": "300m"}}})
    assert got["spec"]["containers"][0]["resources"] == {"requests": {"cpu": "300m"}, "limits": {"cpu": "1"}}
    assert "annotations" not in got["metadata"]
