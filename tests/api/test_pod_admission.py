"""The admission plugins that change a new pod: LimitRanger (api/limitranger.py), LimitRange
defaults applied and pods and claims outside the ranges refused (403); RuntimeClass
(api/runtimeclass.py), overhead and scheduling from the pod's class; and a pod's limits
standing in for the requests it leaves out (SetDefaults_Pod)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import orjson
import pytest

from controlplane.client import ApiError, Client, resource_path
from tests.test_cli import Serve, running, start_serve

PODS = resource_path("", "v1", "pods", "default")
PVCS = resource_path("", "v1", "persistentvolumeclaims", "default")
LIMITS = resource_path("", "v1", "limitranges", "default")


def pod(name: str, resources: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"containers": [
        {"name": "c", "image": "busybox", **({"resources": resources} if resources is not None else {})}]}}


async def test_limits_stand_in_for_missing_requests(client: Client) -> None:
    created = await client.create(PODS, pod("p", {"limits": {"cpu": "1", "memory": "1Gi"},
                                                  "requests": {"cpu": "500m"}}))
    assert created["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "500m", "memory": "1Gi"}


async def test_a_limit_range_defaults_new_pods_and_refuses_those_outside_it(client: Client) -> None:
    await client.create(LIMITS, {"metadata": {"name": "cpu"}, "spec": {"limits": [
        {"type": "Container", "default": {"cpu": "500m", "memory": "256Mi"}, "defaultRequest": {"cpu": "200m"},
         "max": {"cpu": "1"}, "min": {"cpu": "100m"}},
        {"type": "Pod", "max": {"memory": "1Gi"}},
        {"type": "PersistentVolumeClaim", "max": {"storage": "10Gi"}}]}})
    while not (await client.list(LIMITS, resourceVersion="0"))["items"]:  # admission reads the watch cache
        await asyncio.sleep(0.01)
    created = await client.create(PODS, pod("bare"))
    resources = created["spec"]["containers"][0]["resources"]
    # the default request of memory is its default limit (LimitRange defaulting)
    assert resources == {"limits": {"cpu": "500m", "memory": "256Mi"}, "requests": {"cpu": "200m", "memory": "256Mi"}}
    assert created["metadata"]["annotations"]["kubernetes.io/limit-ranger"] == \
        "LimitRanger plugin set: cpu, memory request for container c; cpu, memory limit for container c"
    sized = {"requests": {"cpu": "300m", "memory": "64Mi"}, "limits": {"cpu": "800m", "memory": "128Mi"}}
    kept = await client.create(PODS, pod("sized", sized))
    assert kept["spec"]["containers"][0]["resources"] == sized
    assert "kubernetes.io/limit-ranger" not in (kept["metadata"].get("annotations") or {})
    for name, resources, text in [
        ("greedy", {"limits": {"cpu": "2"}}, "maximum cpu usage per Container is 1, but limit is 2"),
        ("tiny", {"requests": {"cpu": "50m"}}, "minimum cpu usage per Container is 100m, but request is 50m"),
        ("fat", {"limits": {"memory": "2Gi"}}, "maximum memory usage per Pod is 1Gi, but limit is 2Gi"),
    ]:
        with pytest.raises(ApiError) as e:
            await client.create(PODS, pod(name, resources))
        assert e.value.code == 403 and f'pods "{name}" is forbidden: ' in e.value.message, name
        assert text in e.value.message, (name, e.value.message)
    with pytest.raises(ApiError) as e:
        await client.create(PVCS, {"metadata": {"name": "big"}, "spec": {
            "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "20Gi"}}}})
    assert e.value.code == 403 and e.value.message == (  # maxRequestConstraint's words: a claim's request
        'persistentvolumeclaims "big" is forbidden: maximum storage usage per PersistentVolumeClaim is 10Gi, '
        'but request is 20Gi')
    # other namespaces are not limited
    await client.create(resource_path("", "v1", "namespaces"), {"metadata": {"name": "free"}})
    await client.create(resource_path("", "v1", "pods", "free"), pod("greedy", {"limits": {"cpu": "2"}}))


async def test_a_claims_update_is_held_to_the_ranges_made_since(client: Client) -> None:
    # upstream's LimitRanger validates a claim at its updates too (SupportsAttributes: Pods and
    # PersistentVolumeClaims, a pod's update only at resize), and checks the whole claim
    claim = {"metadata": {"name": "data", "finalizers": ["example.com/hold"]}, "spec": {
        "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "20Gi"}}}}
    await client.create(PVCS, claim)
    await client.create(LIMITS, {"metadata": {"name": "storage"}, "spec": {"limits": [
        {"type": "PersistentVolumeClaim", "max": {"storage": "10Gi"}}]}})
    while not (await client.list(LIMITS, resourceVersion="0"))["items"]:  # admission reads the watch cache
        await asyncio.sleep(0.01)
    with pytest.raises(ApiError) as e:
        await client.patch(f"{PVCS}/data", {"metadata": {"labels": {"tier": "db"}}}, patch_type="merge")
    assert e.value.code == 403
    assert e.value.message == ('persistentvolumeclaims "data" is forbidden: maximum storage usage per '
                               'PersistentVolumeClaim is 10Gi, but request is 20Gi')
    # its status is another subresource: not LimitRanger's
    await client.patch(f"{PVCS}/data/status", {"status": {"phase": "Pending"}}, patch_type="merge")
    # a claim being deleted is not (upstream's runLimitFunc skips an old object with a deletion
    # timestamp): its finalizers come off one at a time, or it would be held forever
    await client.delete(f"{PVCS}/data")
    left = await client.patch(f"{PVCS}/data", {"metadata": {"finalizers": ["example.com/hold"]}}, patch_type="merge")
    assert left["metadata"]["finalizers"] == ["example.com/hold"] and left["metadata"]["deletionTimestamp"]


async def test_a_pod_outside_several_ranges_is_told_the_first_ones_problems_once(client: Client) -> None:
    # upstream's Validate stops at the first range the pod is outside of, and aggregates its
    # errors as Go's utilerrors does (each once, several in brackets): every range's were joined
    for name in ("a", "b"):
        await client.create(LIMITS, {"metadata": {"name": name}, "spec": {"limits": [
            {"type": "Container", "maxLimitRequestRatio": {"cpu": "4"}, "max": {"memory": "1Gi"}}]}})
    while len((await client.list(LIMITS, resourceVersion="0"))["items"]) < 2:
        await asyncio.sleep(0.01)
    two = {"name": "d", "image": "busybox", "resources": {"requests": {"cpu": "100m"}, "limits": {"cpu": "2"}}}
    spec = pod("p", {"requests": {"cpu": "100m"}, "limits": {"cpu": "2"}})
    with pytest.raises(ApiError) as e:
        await client.create(PODS, spec)
    assert e.value.message == ('pods "p" is forbidden: cpu max limit to request ratio per Container is 4, but '
                               'provided ratio is 20.000000')
    spec["spec"]["containers"].append(two)  # the same problem twice, and another
    spec["spec"]["containers"][0]["resources"]["limits"]["memory"] = "2Gi"
    with pytest.raises(ApiError) as e:
        await client.create(PODS, spec)
    assert e.value.message == ('pods "p" is forbidden: [maximum memory usage per Container is 1Gi, but limit is '
                               '2Gi, cpu max limit to request ratio per Container is 4, but provided ratio is '
                               '20.000000]')


async def test_pod_limits_take_the_pod_level_cpu_and_memory_and_the_init_containers(client: Client) -> None:
    """Upstream's plugin holds a ``Pod`` range to podRequests/podLimits: the containers' sum
    with init containers and sidecars counted as the scheduler counts them, and the pod-level
    cpu and memory (PodLevelResources) in its place; its messages as minConstraint,
    maxConstraint and limitRequestRatioConstraint word them."""
    await client.create(LIMITS, {"metadata": {"name": "pods"}, "spec": {"limits": [
        {"type": "Pod", "max": {"cpu": "1"}, "min": {"memory": "64Mi"}, "maxLimitRequestRatio": {"memory": "2"}}]}})
    while not (await client.list(LIMITS, resourceVersion="0"))["items"]:
        await asyncio.sleep(0.01)

    def two(level: dict[str, Any] | None, cpu_limit: str = "600m") -> dict[str, Any]:
        body = pod("p", {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"cpu": cpu_limit, "memory": "64Mi"}})
        body["spec"]["containers"].append({"name": "d", "image": "busybox", "resources": {
            "requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"cpu": cpu_limit, "memory": "64Mi"}}})
        if level is not None:
            body["spec"]["resources"] = level
        return body

    async def refused(body: dict[str, Any]) -> str:
        with pytest.raises(ApiError) as e:
            await client.create(PODS, body)
        assert e.value.code == 403 and e.value.reason == "Forbidden"
        return e.value.message

    # the containers' limits add up to 1200m: over the Pod maximum without pod-level limits ...
    assert await refused(two(None)) == 'pods "p" is forbidden: maximum cpu usage per Pod is 1, but limit is 1200m'
    # ... but the pod-level cpu limit is the pod's (each container's limit within it)
    level = {"requests": {"cpu": "500m", "memory": "128Mi"}, "limits": {"cpu": "1", "memory": "256Mi"}}
    created = await client.create(PODS, two(level))
    assert created["spec"]["resources"] == level
    # a pod-level limit above the maximum is refused in its words, whatever the containers say
    assert await refused({**two({**level, "limits": {"cpu": "2", "memory": "256Mi"}}), "metadata": {"name": "q"}}) \
        == 'pods "q" is forbidden: maximum cpu usage per Pod is 1, but limit is 2'
    # the ratio is the pod level's memory limit over its request (512Mi / 128Mi = 4)
    wide = {"requests": {"cpu": "500m", "memory": "128Mi"}, "limits": {"cpu": "1", "memory": "512Mi"}}
    assert await refused({**two(wide), "metadata": {"name": "r"}}) == \
        'pods "r" is forbidden: memory max limit to request ratio per Pod is 2, but provided ratio is 4.000000'
    # a plain init container's limit counts when it is above the containers' sum
    init = pod("s", {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"cpu": "100m", "memory": "64Mi"}})
    init["spec"]["initContainers"] = [{"name": "i", "image": "busybox", "resources": {
        "requests": {"cpu": "2", "memory": "64Mi"}, "limits": {"cpu": "2", "memory": "64Mi"}}}]
    assert await refused(init) == 'pods "s" is forbidden: maximum cpu usage per Pod is 1, but limit is 2'
    # no request at all is its own message, for the minimum and for the ratio
    bare = pod("u", {"limits": {"cpu": "100m"}})
    assert await refused(bare) == ('pods "u" is forbidden: [minimum memory usage per Pod is 64Mi.  No request is '
                                   'specified, memory max limit to request ratio per Pod is 2, but no request is '
                                   'specified or request is 0]')


async def test_a_runtime_class_gives_its_pods_overhead_and_scheduling(client: Client) -> None:
    classes = resource_path("node.k8s.io", "v1", "runtimeclasses")
    await client.create(classes, {"metadata": {"name": "nvidia"}, "handler": "nvidia",
                                  "overhead": {"podFixed": {"cpu": "250m", "memory": "120Mi"}},
                                  "scheduling": {"nodeSelector": {"gpu": "true"},
                                                 "tolerations": [{"key": "gpu", "operator": "Exists"}]}})
    while not (await client.list(classes, resourceVersion="0"))["items"]:  # admission reads the watch cache
        await asyncio.sleep(0.01)
    gpu = pod("trainer")
    gpu["spec"]["runtimeClassName"] = "nvidia"
    created = await client.create(PODS, gpu)
    assert created["spec"]["overhead"] == {"cpu": "250m", "memory": "120Mi"}
    assert created["spec"]["nodeSelector"] == {"gpu": "true"}
    assert {"key": "gpu", "operator": "Exists"} in created["spec"]["tolerations"]
    missing = pod("lost")
    missing["spec"]["runtimeClassName"] = "kata"
    with pytest.raises(ApiError) as e:
        await client.create(PODS, missing)
    assert e.value.code == 403 and 'pod rejected: RuntimeClass "kata" not found' in e.value.message
    clash = pod("clash")
    clash["spec"].update(runtimeClassName="nvidia", nodeSelector={"gpu": "false"})
    with pytest.raises(ApiError) as e:
        await client.create(PODS, clash)
    assert e.value.code == 403 and "conflict: runtimeClass.scheduling.nodeSelector[gpu]" in e.value.message


# -- over a real socket, as the official client sees it ----------------------------------------------
@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    with running(start_serve(tmp_path_factory.mktemp("podadmission"))) as s:
        yield s


def test_the_official_client_sees_pod_level_resources_limited_and_defaulted(served: Serve) -> None:
    """A Pod range held to the pod-level cpu (403 in LimitRanger's words), and a resize that adds
    pod-level limits requesting the containers' aggregate (SetDefaults_Pod), through
    kubernetes-client's CoreV1Api."""
    from kubernetes import client as k8s
    from kubernetes import config

    api = config.new_client_from_config(config_file=str(served.kubeconfig))  # type: ignore[no-untyped-call]
    try:
        core = k8s.CoreV1Api(api)
        limits: Any = {"metadata": {"name": "pods"}, "spec": {"limits": [{"type": "Pod", "max": {"cpu": "1"}}]}}
        core.create_namespaced_limit_range("default", limits)
        body: Any = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "level"}, "spec": {
            "resources": {"requests": {"cpu": "500m"}, "limits": {"cpu": "2"}},
            "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "100m"}}}]}}
        # (a namespace the cache shows no range in is read consistently: the range applies at once)
        with pytest.raises(k8s.ApiException) as e:
            core.create_namespaced_pod("default", body)
        status = orjson.loads(e.value.body or b"{}")
        assert (e.value.status, status["reason"]) == (403, "Forbidden")
        assert status["message"] == 'pods "level" is forbidden: maximum cpu usage per Pod is 1, but limit is 2'
        body["spec"]["resources"]["limits"]["cpu"] = "1"
        created: Any = core.create_namespaced_pod("default", body)
        assert created.spec.resources.limits == {"cpu": "1"}
        plain: Any = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "plain"}, "spec": {
            "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "100m"},
                                                                         "limits": {"cpu": "500m"}}}]}}
        core.create_namespaced_pod("default", plain)
        resized: Any = core.patch_namespaced_pod_resize("plain", "default", {"spec": {"resources": {
            "limits": {"cpu": "800m", "memory": "1Gi"}}}})
        assert resized.spec.resources.requests == {"cpu": "100m", "memory": "1Gi"}
        assert resized.spec.resources.limits == {"cpu": "800m", "memory": "1Gi"}
    finally:
        api.close()


def test_a_pod_stating_an_overhead_needs_a_runtime_class_that_defines_one(served: Serve) -> None:
    """Upstream's RuntimeClass plugin (validateOverhead) refuses a pod whose spec.overhead no
    class gave: naming no class, or a class without an overhead, 403 in its words; the class's
    scheduling is still merged first, and a pod stating none is admitted."""
    from kubernetes import client as k8s
    from kubernetes import config

    api = config.new_client_from_config(config_file=str(served.kubeconfig))  # type: ignore[no-untyped-call]
    try:
        core, node = k8s.CoreV1Api(api), k8s.NodeV1Api(api)
        namespace: Any = {"metadata": {"name": "overhead"}}
        core.create_namespace(namespace)  # (no LimitRange of the test above)
        plain: Any = {"metadata": {"name": "plain"}, "handler": "runc",
                      "scheduling": {"nodeSelector": {"runtime": "runc"}}}
        node.create_runtime_class(plain)
        while not node.list_runtime_class(resource_version="0").items:  # admission reads the watch cache
            time.sleep(0.01)

        def body(name: str, **spec: Any) -> Any:
            return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                    "spec": {**spec, "containers": [{"name": "c", "image": "busybox"}]}}

        for name, spec in (("bare", {}), ("classed", {"runtimeClassName": "plain"})):
            with pytest.raises(k8s.ApiException) as e:
                core.create_namespaced_pod("overhead", body(name, overhead={"cpu": "10m"}, **spec))
            status = orjson.loads(e.value.body or b"{}")
            assert (e.value.status, status["reason"]) == (403, "Forbidden")
            assert status["message"] == (f'pods "{name}" is forbidden: pod rejected: Pod Overhead set without '
                                         "corresponding RuntimeClass defined Overhead")
        # the scheduling conflict is the mutating half's, found first
        with pytest.raises(k8s.ApiException) as e:
            core.create_namespaced_pod("overhead", body("clash", runtimeClassName="plain", overhead={"cpu": "10m"},
                                                       nodeSelector={"runtime": "kata"}))
        message = orjson.loads(e.value.body or b"{}")["message"]
        assert "conflict: runtimeClass.scheduling.nodeSelector[runtime]" in message
        created: Any = core.create_namespaced_pod("overhead", body("fine", runtimeClassName="plain", overhead={}))
        assert created.spec.overhead is None and created.spec.node_selector == {"runtime": "runc"}
    finally:
        api.close()
