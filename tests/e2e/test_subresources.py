"""``scale`` and ``eviction`` subresources, over a socket, with kubectl and the Python client."""

from __future__ import annotations

import json
import os
import subprocess
import time

import httpx
import pytest
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from tests.e2e.test_kubectl import KUBECTL, kubectl
from tests.e2e.test_kubernetes_client import bearer
from tests.test_cli import Serve


def deployment(name: str, replicas: int = 1) -> client.V1Deployment:
    labels = {"app": name}
    return client.V1Deployment(
        metadata=client.V1ObjectMeta(name=name),
        spec=client.V1DeploymentSpec(
            replicas=replicas,
            selector=client.V1LabelSelector(match_labels=labels),
            template=client.V1PodTemplateSpec(
                metadata=client.V1ObjectMeta(labels=labels),
                spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="nginx")]))))


def test_scale_reads_and_writes_the_replicas(served: Serve, api: client.ApiClient) -> None:
    apps = client.AppsV1Api(api)
    apps.create_namespaced_deployment("default", deployment("scaled", 2))
    scale = apps.read_namespaced_deployment_scale("scaled", "default")
    assert scale.kind == "Scale" and scale.spec.replicas == 2 and scale.status.selector == "app=scaled"
    out = kubectl(served, "scale", "deployment/scaled", "--replicas=5")
    assert "scaled" in out
    d = apps.read_namespaced_deployment("scaled", "default")
    assert d.spec.replicas == 5
    assert d.metadata.generation == 2  # a spec change
    scale = apps.read_namespaced_deployment_scale("scaled", "default")
    scale.spec.replicas = 3
    assert apps.replace_namespaced_deployment_scale("scaled", "default", scale).spec.replicas == 3
    # a stale resourceVersion on the Scale is a conflict
    scale.spec.replicas = 4
    with pytest.raises(ApiException) as e:
        apps.replace_namespaced_deployment_scale("scaled", "default", scale)
    assert e.value.status == 409
    # negative replicas are invalid, and change nothing
    r = httpx.patch(f"{served.url}/apis/apps/v1/namespaces/default/deployments/scaled/scale",
                    headers={**bearer(served), "content-type": "application/merge-patch+json"},
                    content=b'{"spec":{"replicas":-1}}')
    assert r.status_code == 422 and r.json()["reason"] == "Invalid"
    assert r.json()["details"]["causes"] == [{"reason": "FieldValueInvalid", "field": "spec.replicas",
                                              "message": "Invalid value: -1: must be greater than or equal to 0"}]
    assert apps.read_namespaced_deployment("scaled", "default").spec.replicas == 3
    # kubectl words the 422 from the cause, as upstream's: the value named
    assert KUBECTL
    err = subprocess.run([KUBECTL, "patch", "deployment", "scaled", "--subresource=scale", "--type=merge",
                          "-p", '{"spec":{"replicas":-1}}'], capture_output=True, text=True, timeout=60,
                         env=dict(os.environ, KUBECONFIG=str(served.kubeconfig), HOME=str(served.state)))
    assert err.returncode == 1 and err.stderr.strip() == (
        'The Scale "scaled" is invalid: spec.replicas: Invalid value: -1: must be greater than or equal to 0')


def test_kubectl_get_subresource_scale_prints_upstreams_scale_columns(served: Serve, api: client.ApiClient) -> None:
    client.AppsV1Api(api).create_namespaced_deployment("default", deployment("printed", 3))
    out = kubectl(served, "get", "deployment", "printed", "--subresource=scale").splitlines()
    assert out[0].split() == ["NAME", "DESIRED", "AVAILABLE", "AGE"]
    assert out[1].split()[:3] == ["printed", "3", "0"]  # (no controllers in this server: none available)


def test_scale_of_a_missing_object_is_404_and_discovery_lists_it(served: Serve) -> None:
    r = httpx.get(f"{served.url}/apis/apps/v1/namespaces/default/deployments/nope/scale", headers=bearer(served))
    assert r.status_code == 404
    resources = httpx.get(f"{served.url}/apis/apps/v1", headers=bearer(served)).json()["resources"]
    scale = next(r for r in resources if r["name"] == "deployments/scale")
    assert (scale["group"], scale["version"], scale["kind"]) == ("autoscaling", "v1", "Scale")


def test_eviction_deletes_the_pod(served: Serve, api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    pod = client.V1Pod(metadata=client.V1ObjectMeta(name="evicted"),
                       spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="nginx")]))
    core.create_namespaced_pod("default", pod)
    eviction = client.V1Eviction(metadata=client.V1ObjectMeta(name="evicted", namespace="default"))
    core.create_namespaced_pod_eviction("evicted", "default", eviction)
    with pytest.raises(ApiException) as e:
        core.read_namespaced_pod("evicted", "default")
    assert e.value.status == 404
    with pytest.raises(ApiException) as e:
        core.create_namespaced_pod_eviction("evicted", "default", eviction)
    assert e.value.status == 404
    r = httpx.post(f"{served.url}/api/v1/namespaces/default/pods/other/eviction", headers=bearer(served),
                   json={"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "evicted"}})
    assert r.status_code == 400


def test_an_evicted_pod_gets_the_disruption_target_condition(served: Serve, api: client.ApiClient) -> None:
    # upstream's addConditionAndDeletePod: DisruptionTarget (EvictionByEvictionAPI) on the pod, then
    # the delete; a bound pod (no kubelet here) stays terminating with it, an unbound one goes with it
    core = client.CoreV1Api(api)
    for name, node in (("drained", "nowhere"), ("unbound", None)):
        core.create_namespaced_pod("default", client.V1Pod(
            metadata=client.V1ObjectMeta(name=name),
            spec=client.V1PodSpec(node_name=node, containers=[client.V1Container(name="c", image="nginx")])))
    w = watch.Watch()
    version = core.list_namespaced_pod("default").metadata.resource_version
    for name in ("drained", "unbound"):
        core.create_namespaced_pod_eviction(name, "default", client.V1Eviction(
            metadata=client.V1ObjectMeta(name=name, namespace="default")))
    pod = core.read_namespaced_pod("drained", "default")
    assert pod.metadata.deletion_timestamp is not None
    (cond,) = [c for c in pod.status.conditions or () if c.type == "DisruptionTarget"]
    assert (cond.status, cond.reason, cond.message) == ("True", "EvictionByEvictionAPI", "Eviction API: evicting")
    assert cond.last_transition_time is not None
    deleted = None
    for ev in w.stream(core.list_namespaced_pod, "default", resource_version=version, timeout_seconds=5):
        if ev["type"] == "DELETED" and ev["object"].metadata.name == "unbound":
            deleted = ev["object"]
            w.stop()
    assert deleted is not None
    assert [c.reason for c in deleted.status.conditions or () if c.type == "DisruptionTarget"] == \
        ["EvictionByEvictionAPI"]
    # a second eviction of the terminating pod keeps the condition's time, and a dry run writes nothing
    r = httpx.post(f"{served.url}/api/v1/namespaces/default/pods/drained/eviction?dryRun=All", headers=bearer(served),
                   json={"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "drained"}})
    assert r.status_code == 201
    core.create_namespaced_pod_eviction("drained", "default", client.V1Eviction(
        metadata=client.V1ObjectMeta(name="drained", namespace="default")))
    again = core.read_namespaced_pod("drained", "default")
    assert [c.last_transition_time for c in again.status.conditions if c.type == "DisruptionTarget"] == \
        [cond.last_transition_time]
    core.delete_namespaced_pod("drained", "default", grace_period_seconds=0)


def test_namespace_finalize_holds_and_releases_a_terminating_namespace(served: Serve, api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name="fin"),
                                              spec=client.V1NamespaceSpec(finalizers=["example.com/hold"])))
    ns = core.read_namespace("fin")
    assert set(ns.spec.finalizers) == {"example.com/hold", "kubernetes"}
    core.delete_namespace("fin")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:  # the server removes its own "kubernetes" finalizer
        ns = core.read_namespace("fin")
        if ns.spec.finalizers == ["example.com/hold"]:
            break
        time.sleep(0.1)
    assert ns.status.phase == "Terminating" and ns.spec.finalizers == ["example.com/hold"]
    ns.spec.finalizers = []
    core.replace_namespace_finalize("fin", ns)
    with pytest.raises(ApiException) as e:
        core.read_namespace("fin")
    assert e.value.status == 404


def test_a_node_registers_with_its_status_and_a_pod_does_not(served: Serve, api: client.ApiClient) -> None:
    """Upstream keeps a Node's status on create (the kubelet registers with it) and
    resets a Pod's (to phase Pending)."""
    core = client.CoreV1Api(api)
    node = core.create_node({"metadata": {"name": "registered"},  # type: ignore[arg-type]
                             "status": {"capacity": {"cpu": "4", "pods": "110"},
                                        "conditions": [{"type": "Ready", "status": "True"}]}})
    assert node.status.capacity == {"cpu": "4", "pods": "110"}
    assert core.read_node("registered").status.conditions[0].type == "Ready"
    pod = core.create_namespaced_pod("default", {  # type: ignore[arg-type]
        "metadata": {"name": "status-reset"}, "spec": {"containers": [{"name": "c", "image": "busybox"}]},
        "status": {"phase": "Running", "podIP": "10.0.0.1"}})
    assert pod.status.phase == "Pending" and pod.status.pod_ip is None
    core.delete_node("registered")
    core.delete_namespaced_pod("status-reset", "default")


def test_a_service_proxy_without_endpoints_names_the_service(served: Serve, api: client.ApiClient) -> None:
    """Over the socket, with the official client: upstream's 503 names the service, not the
    URL's ``scheme:name:port``, when its Endpoints have no subset."""
    core = client.CoreV1Api(api)
    core.create_namespaced_service("default", client.V1Service(
        metadata=client.V1ObjectMeta(name="idle"), spec=client.V1ServiceSpec(ports=[client.V1ServicePort(
            name="http", port=80)])))
    core.create_namespaced_endpoints("default", client.V1Endpoints(metadata=client.V1ObjectMeta(name="idle")))
    with pytest.raises(ApiException) as e:
        core.connect_get_namespaced_service_proxy("https:idle:80", "default")
    assert e.value.status == 503
    assert json.loads(e.value.body)["message"] == 'no endpoints available for service "idle"'
