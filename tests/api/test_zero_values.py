"""The fields Go always writes: kube-apiserver decodes every write into the Go struct of its
kind and encodes it again, so a field without ``omitempty`` in k8s.io/api comes back as its
zero value ("", false, 0) when the request left it out, as a ``{}`` or ``[null]`` list item
of a status patch. The typed clients require those fields (the official Python client
refuses a whole pod list whose one container status has no ``name``): they must be stored,
on every write path. Fields that are ``omitempty`` upstream are not invented."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes import config

from controlplane.client import ApiError, Client, resource_path
from tests.test_cli import Serve, running, start_serve

PODS = resource_path("", "v1", "pods", "default")
NODES = resource_path("", "v1", "nodes")
SERVICES = resource_path("", "v1", "services", "default")
ENDPOINTS = resource_path("", "v1", "endpoints", "default")
CMS = resource_path("", "v1", "configmaps", "default")

CONTAINER_STATUS = {"name": "", "ready": False, "restartCount": 0, "image": "", "imageID": ""}


def pod(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "i"}]}}


# -- over a socket, read by the official client -----------------------------------------

@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    with running(start_serve(tmp_path_factory.mktemp("zerovalues"))) as s:
        yield s


@pytest.fixture(scope="module")
def api(served: Serve) -> Iterator[k8s.ApiClient]:
    c = config.new_client_from_config(config_file=str(served.kubeconfig))  # type: ignore[no-untyped-call]
    try:
        yield c
    finally:
        c.close()


def raw(api: k8s.ApiClient, method: str, path: str, body: Any, content_type: str = "application/json") -> Any:
    """A write the typed models would refuse to send (they require what the server fills), or
    a read whose nulls matter (the typed models read a null and a missing field alike): the
    answer's JSON."""
    params = api.param_serialize(method, path, header_params={"Content-Type": content_type,
                                                              "Accept": "application/json"},
                                 body=body, auth_settings=["BearerToken"])
    response = api.call_api(*params)
    text = response.read()  # type: ignore[no-untyped-call]
    assert response.status < 300, text
    return json.loads(text)


def test_the_python_client_lists_pods_after_status_patches_of_empty_items(api: k8s.ApiClient) -> None:
    core: Any = k8s.CoreV1Api(api)  # its models' fields are all optional to the type checker
    patches = {
        "strategic": ({"status": {"containerStatuses": [{}]}}, "application/strategic-merge-patch+json"),
        "merge": ({"status": {"containerStatuses": [None], "initContainerStatuses": [{"name": "i"}],
                              "conditions": [{"type": "Ready"}]}},  # (a type is required: a qualified name)
                  "application/merge-patch+json"),
        "json": ([{"op": "add", "path": "/status/ephemeralContainerStatuses", "value": [{"name": "e"}]}],
                 "application/json-patch+json"),
    }
    for name, (patch, content_type) in patches.items():
        core.create_namespaced_pod("default", pod(name))
        core.patch_namespaced_pod_status(name, "default", patch, _content_type=content_type)
    pods = {p.metadata.name: p for p in core.list_namespaced_pod("default").items}  # deserialised
    cs = pods["strategic"].status.container_statuses[0]
    assert (cs.name, cs.ready, cs.restart_count, cs.image, cs.image_id) == ("", False, 0, "", "")
    assert cs.container_id is None and cs.started is None  # omitempty upstream: not invented
    merged = pods["merge"].status
    assert merged.container_statuses[0].restart_count == 0 and merged.init_container_statuses[0].name == "i"
    assert (merged.conditions[0].type, merged.conditions[0].status) == ("Ready", "")
    assert pods["json"].status.ephemeral_container_statuses[0].image_id == ""
    # and a single read
    assert core.read_namespaced_pod_status("merge", "default").status.conditions[0].status == ""


def test_the_python_client_lists_nodes_created_with_bare_status_items(api: k8s.ApiClient) -> None:
    core: Any = k8s.CoreV1Api(api)  # its models' fields are all optional to the type checker
    raw(api, "POST", "/api/v1/nodes", {"metadata": {"name": "bare"},
                                        "status": {"conditions": [{}], "addresses": [{"type": "InternalIP"}],
                                                   "images": [{}], "nodeInfo": {}, "volumesAttached": [{}]}})
    raw(api, "PATCH", "/api/v1/nodes/bare/status", {"status": {"conditions": [{"type": "Ready"}, {}]}},
        "application/merge-patch+json")
    node = next(n for n in core.list_node().items if n.metadata.name == "bare")
    assert [(c.type, c.status) for c in node.status.conditions] == [("Ready", ""), ("", "")]
    assert node.status.addresses[0].address == "" and node.status.node_info.machine_id == ""
    assert node.status.volumes_attached[0].device_path == ""


def test_zero_times_are_written_as_null(api: k8s.ApiClient) -> None:
    """A plain metav1.Time field is a struct, which omitempty does not omit: kube-apiserver
    writes its zero as null (kubectl -o yaml shows a pod condition's ``lastProbeTime: null``).
    A pointer Time (a pod's ``startTime``) is omitted when nil, and ObjectMeta's
    ``creationTimestamp`` is ``omitzero`` (1.37): a template's metadata has none."""
    raw(api, "POST", "/api/v1/namespaces/default/pods", pod("times"))
    raw(api, "PATCH", "/api/v1/namespaces/default/pods/times/status", {"status": {
        "startTime": None,
        "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"},
                       {"type": "Initialized", "status": "True", "lastProbeTime": None}],
        "containerStatuses": [{"name": "c", "state": {"running": {}}, "lastState": {"terminated": {"exitCode": 1}}}]}},
        "application/merge-patch+json")
    status = raw(api, "GET", "/api/v1/namespaces/default/pods/times", None)["status"]
    assert status["conditions"] == [
        {"type": "Ready", "status": "True", "lastProbeTime": None, "lastTransitionTime": "2026-01-01T00:00:00Z"},
        {"type": "Initialized", "status": "True", "lastProbeTime": None, "lastTransitionTime": None}]
    [cs] = status["containerStatuses"]
    assert cs["state"] == {"running": {"startedAt": None}}
    assert cs["lastState"] == {"terminated": {"exitCode": 1, "startedAt": None, "finishedAt": None}}
    assert "startTime" not in status
    template = {"metadata": {"labels": {"app": "t"}, "creationTimestamp": None},
                "spec": {"containers": [{"name": "c", "image": "i"}]}}
    deployment = raw(api, "POST", "/apis/apps/v1/namespaces/default/deployments", {
        "metadata": {"name": "times"}, "spec": {"selector": {"matchLabels": {"app": "t"}}, "template": template}})
    assert deployment["spec"]["template"]["metadata"] == {"labels": {"app": "t"}}
    core: Any = k8s.CoreV1Api(api)  # and the typed client reads them
    assert core.read_namespaced_pod("times", "default").status.conditions[1].last_transition_time is None


# -- every write path, in process ---------------------------------------------------------

async def test_patches_of_every_type_store_the_zero_values(client: Client) -> None:
    for name, patch_type, patch in [
            ("s", "strategic", {"status": {"containerStatuses": [{}]}}),
            ("m", "merge", {"status": {"containerStatuses": [None]}}),
            ("j", "json", [{"op": "add", "path": "/status/containerStatuses", "value": [{"name": None}]}])]:
        await client.create(PODS, pod(name))
        patched = await client.patch(f"{PODS}/{name}/status", patch, patch_type)
        assert patched["status"]["containerStatuses"] == [CONTAINER_STATUS]
        assert (await client.get(f"{PODS}/{name}"))["status"]["containerStatuses"] == [CONTAINER_STATUS]


async def test_only_the_fields_go_always_writes_are_filled(client: Client) -> None:
    await client.create(PODS, pod("p"))
    status = (await client.patch(f"{PODS}/p/status", {"status": {
        "containerStatuses": [{"name": "c", "ready": True, "state": {"terminated": {"reason": "Done"}},
                               "volumeMounts": [{"name": "v"}]}],
        "conditions": [{"type": "Ready"}]}}, "strategic"))["status"]
    [cs] = status["containerStatuses"]
    # containerID, started, lastState... are omitempty upstream: not written
    # (a Time is a struct, which omitempty does not omit: its zero is written as null)
    assert cs == {"name": "c", "ready": True, "restartCount": 0, "image": "", "imageID": "",
                  "state": {"terminated": {"reason": "Done", "exitCode": 0, "startedAt": None, "finishedAt": None}},
                  "volumeMounts": [{"name": "v", "mountPath": ""}]}
    # reason and message are omitempty: not written
    assert status["conditions"] == [{"type": "Ready", "status": "", "lastProbeTime": None,
                                     "lastTransitionTime": None}]


async def test_updates_creates_and_applies_store_the_zero_values(client: Client) -> None:
    created = await client.create(PODS, pod("u"))
    created["status"] = {"containerStatuses": [{"name": "c"}], "podIPs": [{}]}
    with pytest.raises(ApiError) as e:  # a pod IP's zero value is no IP: upstream's validatePodIPs refuses it
        await client.update(f"{PODS}/u/status", created)
    assert e.value.status["details"]["causes"] == [
        {"reason": "FieldValueInvalid", "field": "status.podIPs[0]",
         "message": 'Invalid value: "": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)'}]
    del created["status"]["podIPs"]
    updated = await client.update(f"{PODS}/u/status", created)
    assert updated["status"]["containerStatuses"] == [CONTAINER_STATUS | {"name": "c"}]
    applied = await client.request(
        "PATCH", f"{PODS}/u/status",
        b"apiVersion: v1\nkind: Pod\nmetadata: {name: u}\nstatus: {initContainerStatuses: [{name: i}]}\n",
        "application/apply-patch+yaml", fieldManager="kubelet")
    assert applied["status"]["initContainerStatuses"] == [CONTAINER_STATUS | {"name": "i"}]
    node = await client.create(NODES, {"metadata": {"name": "n"},
                                       "status": {"conditions": [{"type": "Ready"}], "addresses": [{}]}})
    assert node["status"]["conditions"] == [{"type": "Ready", "status": "", "lastHeartbeatTime": None,
                                             "lastTransitionTime": None}]
    assert node["status"]["addresses"] == [{"type": "", "address": ""}]
    service = await client.create(SERVICES, {"metadata": {"name": "s"}, "spec": {"ports": [{"port": 80}]}})
    service["status"] = {"conditions": [{"type": "T"}], "loadBalancer": {"ingress": [{"ip": "1.2.3.4",
                                                                                     "ports": [{}]}]}}
    service = await client.update(f"{SERVICES}/s/status", service)
    assert service["status"]["conditions"] == [{"type": "T", "status": "", "reason": "", "message": "",
                                                "lastTransitionTime": None}]
    assert service["status"]["loadBalancer"]["ingress"][0]["ports"] == [{"port": 0, "protocol": ""}]
    endpoints = await client.create(ENDPOINTS, {"metadata": {"name": "e"},
                                                "subsets": [{"addresses": [{"ip": "1.2.3.4"}],
                                                             "ports": [{"name": "http", "port": 80}]}]})
    # (the protocol is SetDefaults_Endpoints', not a zero value)
    assert endpoints["subsets"][0]["ports"] == [{"name": "http", "port": 80, "protocol": "TCP"}]


async def test_an_unchanged_status_is_not_rewritten(client: Client) -> None:
    await client.create(PODS, pod("q"))
    first = await client.patch(f"{PODS}/q/status", {"status": {"containerStatuses": [{"name": "c"}]}})
    again = await client.patch(f"{PODS}/q/status", {"status": {"containerStatuses": [{"name": "c"}]}},
                               "strategic")
    assert again["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]


async def test_custom_resources_are_left_to_their_schema(client: Client) -> None:
    item = {"type": "object", "properties": {"n": {"type": "integer"}, "s": {"type": "string"}}}
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "widgets.example.com"},
           "spec": {"group": "example.com", "scope": "Namespaced",
                    "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
                    "versions": [{"name": "v1", "served": True, "storage": True, "subresources": {"status": {}},
                                  "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                                      "status": {"type": "object", "properties": {
                                          "items": {"type": "array", "items": item}}}}}}}]}}
    await client.create(resource_path("apiextensions.k8s.io", "v1", "customresourcedefinitions"), crd)
    widgets = resource_path("example.com", "v1", "widgets", "default")
    await client.create(widgets, {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}})
    patched = await client.patch(f"{widgets}/w/status", {"status": {"items": [{}]}})
    assert patched["status"]["items"] == [{}]
