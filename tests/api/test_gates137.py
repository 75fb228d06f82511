"""Behaviour that 1.37's default feature gates changed from 1.34's, other than the IP fields'
(test_strict_ips.py); docs/api-compatibility.md, "Feature gates at 1.37", lists them."""

from __future__ import annotations

import pytest

from controlplane.client import ApiError, Client, resource_path

SVCS = resource_path("", "v1", "services", "default")
INGRESSES = resource_path("networking.k8s.io", "v1", "ingresses", "default")


async def test_a_services_name_may_start_with_a_digit(client: Client) -> None:
    """RelaxedServiceNameValidation (KEP-5311, beta and on in 1.36): a Service is named by a DNS
    label, no longer a DNS-1035 one; an Ingress's backend names it so too."""
    made = await client.create(SVCS, {"metadata": {"name": "1-web"}, "spec": {"ports": [{"port": 80}]}})
    assert made["metadata"]["name"] == "1-web"
    with pytest.raises(ApiError) as e:
        await client.create(SVCS, {"metadata": {"name": "web.a"}, "spec": {"ports": [{"port": 80}]}})
    assert e.value.status["details"]["causes"] == [
        {"reason": "FieldValueInvalid", "field": "metadata.name",
         "message": 'Invalid value: "web.a": must not contain dots'}]  # (IsDNS1123Label of a subdomain)
    backend = {"service": {"name": "1-web", "port": {"number": 80}}}
    await client.create(INGRESSES, {"metadata": {"name": "i"}, "spec": {"defaultBackend": backend}})
    with pytest.raises(ApiError) as e:
        await client.create(INGRESSES, {"metadata": {"name": "j"}, "spec": {"defaultBackend": {
            "service": {"name": "Web", "port": {"number": 80}}}}})
    assert [c["field"] for c in e.value.status["details"]["causes"]] == ["spec.defaultBackend.service.name"]


PODS = resource_path("", "v1", "pods", "default")
NODES = resource_path("", "v1", "nodes", None)


async def test_a_binding_puts_its_nodes_topology_labels_and_its_own_on_the_pod(client: Client) -> None:
    """PodTopologyLabelsAdmission (KEP-4742, beta and on in 1.35): the node's
    topology.kubernetes.io/zone and region, and the Binding's labels, land on the bound pod."""
    await client.create(NODES, {"metadata": {"name": "n1", "labels": {
        "topology.kubernetes.io/zone": "z1", "topology.kubernetes.io/region": "r1",
        "topology.kubernetes.io/other": "no", "kubernetes.io/hostname": "n1"}}})
    await client.create(NODES, {"metadata": {"name": "bare"}})
    for name in ("p1", "p2", "p3"):
        await client.create(PODS, {"metadata": {"name": name, "labels": {"app": "web"}},
                                   "spec": {"containers": [{"name": "c", "image": "nginx"}]}})
    binding = {"target": {"kind": "Node", "name": "n1"},
               "metadata": {"name": "p1", "labels": {"team": "a", "topology.kubernetes.io/zone": "mine"}}}
    await client.create(f"{PODS}/p1/binding", binding)
    assert (await client.get(f"{PODS}/p1"))["metadata"]["labels"] == {
        "app": "web", "team": "a", "topology.kubernetes.io/zone": "z1", "topology.kubernetes.io/region": "r1"}
    await client.create(f"{PODS}/p2/binding", {"target": {"name": "bare"}, "metadata": {"name": "p2"}})
    assert (await client.get(f"{PODS}/p2"))["metadata"]["labels"] == {"app": "web"}
    await client.create(f"{PODS}/p3/binding", {"target": {"name": "unknown"}, "metadata": {"name": "p3"}})
    assert (await client.get(f"{PODS}/p3"))["metadata"]["labels"] == {"app": "web"}


JOBS = resource_path("batch", "v1", "jobs", "default")


async def test_a_suspended_jobs_resources_and_directives_change_while_no_pod_is_active(client: Client) -> None:
    """MutablePodResourcesForSuspendedJobs and MutableSchedulingDirectivesForSuspendedJobs
    (KEP-5440, beta and on in 1.36): a suspended Job's container requests and limits, and its
    node selector, may change whether it started before or not, while none of its pods is active."""
    container = {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "4"}, "limits": {"cpu": "4"}}}
    await client.create(JOBS, {"metadata": {"name": "train"}, "spec": {"suspend": True, "template": {"spec": {
        "restartPolicy": "Never", "containers": [container]}}}})
    halved = {"spec": {"template": {"spec": {"containers": [
        {"name": "c", "resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "2"}}}]}}}}
    job = await client.patch(f"{JOBS}/train", halved, "strategic")
    assert job["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "2"}
    started = {"status": {"startTime": "2026-01-01T00:00:00Z", "active": 0}}
    await client.patch(f"{JOBS}/train/status", started)  # it ran once, and was suspended again
    moved = {"spec": {"template": {"spec": {"nodeSelector": {"pool": "gpu"}, "containers": [
        {"name": "c", "resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "1"}}}]}}}}
    job = await client.patch(f"{JOBS}/train", moved, "strategic")
    assert job["spec"]["template"]["spec"]["nodeSelector"] == {"pool": "gpu"}
    await client.patch(f"{JOBS}/train/status", {"status": {"active": 1}})
    with pytest.raises(ApiError) as e:  # a pod still runs
        await client.patch(f"{JOBS}/train", halved, "strategic")
    assert [c["field"] for c in e.value.status["details"]["causes"]] == ["spec.template"]
    await client.patch(f"{JOBS}/train/status", {"status": {"active": 0}})
    with pytest.raises(ApiError) as e:  # the image stays fixed whatever the state
        await client.patch(f"{JOBS}/train", {"spec": {"template": {"spec": {"containers": [
            {"name": "c", "image": "alpine"}]}}}}, "strategic")
    assert [c["field"] for c in e.value.status["details"]["causes"]] == ["spec.template"]
