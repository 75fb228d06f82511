"""Validation gaps left by earlier rounds, each over a real socket (httpx to the project's
HTTP/1.1 protocol): what upstream refuses answered with its 422 (or other Status) in its
words and field paths, what it accepts stored."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from controlplane.client import Client
from tests.front_socket import front_on_socket

NS = "/api/v1/namespaces/default"


@dataclass
class Served:
    http: httpx.AsyncClient
    client: Client  # in process, for seeding and reading back


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Served]:
    async with front_on_socket(tmp_path) as (port, c), \
            httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as http:
        yield Served(http, c)


def causes_of(resp: httpx.Response, code: int = 422, reason: str = "Invalid") -> list[str]:
    """The Status's causes as ``field: message`` lines, once its code and reason are checked."""
    status: dict[str, Any] = resp.json()
    assert (resp.status_code, status["kind"], status["code"], status.get("reason")) == (
        code, "Status", code, reason), status
    return [f"{c.get('field', '')}: {c['message']}" for c in (status.get("details") or {}).get("causes", [])]


# -- hugepages: whole pages ----------------------------------------------------------------------
def _pod(name: str, resources: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "image": "nginx", "resources": resources}]}}


async def test_a_containers_hugepages_are_whole_pages(served: Served) -> None:
    at = "spec.containers[0].resources"
    bad = [
        ({"requests": {"memory": "1Gi", "hugepages-2Mi": "3Mi"}, "limits": {"hugepages-2Mi": "3Mi"}},
         [f'{at}.limits[hugepages-2Mi]: Invalid value: "3Mi": 3Mi is not positive integer multiple of hugepages-2Mi',
          f'{at}.requests[hugepages-2Mi]: Invalid value: "3Mi": 3Mi is not positive integer multiple of '
          "hugepages-2Mi"]),
        ({"limits": {"memory": "1Gi", "hugepages-1Gi": "1500Mi"}},
         [f'{at}.limits[hugepages-1Gi]: Invalid value: "1500Mi": 1500Mi is not positive integer multiple of '
          "hugepages-1Gi"]),
        # a page size that is not a quantity divides nothing
        ({"limits": {"cpu": "1", "hugepages-huge": "1"}},
         [f'{at}.limits[hugepages-huge]: Invalid value: "1": 1 is not positive integer multiple of hugepages-huge']),
    ]
    for resources, expected in bad:
        found = causes_of(await served.http.post(f"{NS}/pods", json=_pod("h", resources)))
        for cause in expected:
            assert cause in found, found
    assert (await served.http.get(f"{NS}/pods/h")).status_code == 404
    # a workload's template too, at its path
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": {
        "selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"}}, "spec": _pod(
            "", {"limits": {"memory": "1Gi", "hugepages-2Mi": "1Mi"}})["spec"]}}}
    found = causes_of(await served.http.post("/apis/apps/v1/namespaces/default/deployments", json=deployment))
    assert ('spec.template.spec.containers[0].resources.limits[hugepages-2Mi]: Invalid value: "1Mi": 1Mi is not '
            "positive integer multiple of hugepages-2Mi") in found, found
    # whole pages (and none) are taken
    good = {"requests": {"memory": "1Gi", "hugepages-2Mi": "4Mi"}, "limits": {"hugepages-2Mi": "4Mi",
                                                                                "hugepages-1Gi": "0"}}
    resp = await served.http.post(f"{NS}/pods", json=_pod("h", good))
    assert resp.status_code == 201, resp.text


async def test_a_runtime_class_overheads_hugepages_are_whole_pages(served: Served) -> None:
    rc: dict[str, Any] = {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "rc"},
                          "handler": "h", "overhead": {"podFixed": {"memory": "10Mi", "hugepages-2Mi": "5Mi"}}}
    found = causes_of(await served.http.post("/apis/node.k8s.io/v1/runtimeclasses", json=rc))
    assert found == ['overhead.limits[hugepages-2Mi]: Invalid value: "5Mi": 5Mi is not positive integer multiple '
                     "of hugepages-2Mi"]
    rc["overhead"]["podFixed"]["hugepages-2Mi"] = "6Mi"
    resp = await served.http.post("/apis/node.k8s.io/v1/runtimeclasses", json=rc)
    assert resp.status_code == 201, resp.text


# -- $deleteFromPrimitiveList of a field that is not a list --------------------------------------
async def test_a_deletion_list_of_a_field_that_is_not_a_list_merges_as_upstreams(served: Served) -> None:
    deployments = "/apis/apps/v1/namespaces/default/deployments"
    container = {"name": "c", "image": "nginx", "args": ["1", "2"]}
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {
        "name": "d", "labels": {"a": "1", "b": "2"}, "finalizers": ["x/y", "x/z"]}, "spec": {
        "minReadySeconds": 1, "selector": {"matchLabels": {"a": "b"}},
        "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [container]}}}}
    assert (await served.http.post(deployments, json=deployment)).status_code == 201

    async def patch(body: dict[str, Any]) -> httpx.Response:
        return await served.http.patch(f"{deployments}/d", json=body,
                                       headers={"Content-Type": "application/strategic-merge-patch+json"})

    # a scalar field of another type, or one not there, is left as it was (not refused)
    resp = await patch({"spec": {"$deleteFromPrimitiveList/minReadySeconds": [1],
                                 "$deleteFromPrimitiveList/paused": [True]}})
    assert resp.status_code == 200, resp.text
    assert resp.json()["spec"]["minReadySeconds"] == 1 and "paused" not in resp.json()["spec"]
    # a map is merged as the directive's map; a list of any strategy loses the values
    resp = await patch({"metadata": {"$deleteFromPrimitiveList/labels": {"a": None},
                                     "$deleteFromPrimitiveList/finalizers": ["x/y"]},
                        "spec": {"template": {"spec": {"containers": [
                            {"name": "c", "$deleteFromPrimitiveList/args": ["1"]}]}}}})
    assert resp.status_code == 200, resp.text
    got = resp.json()
    assert (got["metadata"]["labels"], got["metadata"]["finalizers"],
            got["spec"]["template"]["spec"]["containers"][0]["args"]) == ({"b": "2"}, ["x/z"], ["2"])
    # a scalar of the directive's type is set to it, as upstream's merge falls through to its default case
    resp = await patch({"spec": {"$deleteFromPrimitiveList/minReadySeconds": 5}})
    assert resp.status_code == 200, resp.text
    assert resp.json()["spec"]["minReadySeconds"] == 5
    # the directive without its field is the 400 of a malformed patch
    status = (await patch({"metadata": {"$deleteFromPrimitiveList": ["x/z"]}})).json()
    assert (status["code"], status["reason"], status["message"]) == (
        400, "BadRequest", "invalid patch format of primitive list")


# -- a Job's spec.managedBy ----------------------------------------------------------------------
async def test_a_jobs_manager_is_a_short_domain_prefixed_path_fixed_once_set(served: Served) -> None:
    jobs = "/apis/batch/v1/namespaces/default/jobs"

    def job(manager: str) -> dict[str, Any]:
        return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}, "spec": {
            "managedBy": manager, "template": {"spec": {"restartPolicy": "Never",
                                                        "containers": [{"name": "c", "image": "busybox"}]}}}}

    long_path = "acme.io/" + "a" * 56
    bad = [("", ["spec.managedBy: Required value"]),
           ("job-controller", ['spec.managedBy: Invalid value: "job-controller": must be a domain-prefixed path '
                               '(such as "acme.io/foo")']),
           ("Acme.io/x", ['spec.managedBy: Invalid value: "Acme.io": a lowercase RFC 1123 subdomain must consist of '
                          "lower case alphanumeric characters, '-' or '.', and must start and end with an "
                          "alphanumeric character (e.g. 'example.com', regex used for validation is "
                          r"'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"]),
           ("acme.io/a b", ['spec.managedBy: Invalid value: "a b": Invalid path (regex used for validation is '
                            "'[A-Za-z0-9/\\-._~%!$&'()*+,;=:]+')"]),
           (long_path, ["spec.managedBy: Too long: may not be more than 63 bytes"])]
    for manager, expected in bad:
        assert causes_of(await served.http.post(jobs, json=job(manager))) == expected, manager
    # a CronJob's job template is the same Job spec
    cron = {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "cj"}, "spec": {
        "schedule": "* * * * *", "jobTemplate": {"spec": job("x")["spec"]}}}
    assert causes_of(await served.http.post("/apis/batch/v1/namespaces/default/cronjobs", json=cron)) == [
        'spec.jobTemplate.spec.managedBy: Invalid value: "x": must be a domain-prefixed path (such as "acme.io/foo")']
    resp = await served.http.post(jobs, json=job("kueue.x-k8s.io/multikueue"))
    assert resp.status_code == 201, resp.text
    stored = resp.json()
    stored["spec"]["managedBy"] = "acme.io/other"
    found = causes_of(await served.http.put(f"{jobs}/j", json=stored))
    assert found == ['spec.managedBy: Invalid value: "acme.io/other": field is immutable'], found


# -- a ResourceClaim request's count and allocation mode ----------------------------------------
async def test_a_device_requests_count_follows_its_allocation_mode(served: Served) -> None:
    claims = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims"

    def claim(name: str, *requests: dict[str, Any]) -> dict[str, Any]:
        return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name},
                "spec": {"devices": {"requests": list(requests)}}}

    # v1's count is omitempty: 0 is "not set", so ExactCount's default of 1 takes it (SetDefaults_ExactDeviceRequest)
    resp = await served.http.post(claims, json=claim("zero", {"name": "a", "exactly": {
        "deviceClassName": "gpu", "count": 0}}, {"name": "b", "exactly": {
            "deviceClassName": "gpu", "allocationMode": "All", "count": 0}}))
    assert resp.status_code == 201, resp.text
    a, b = (r["exactly"] for r in resp.json()["spec"]["devices"]["requests"])
    assert (a["allocationMode"], a["count"], b["allocationMode"], "count" in b) == ("ExactCount", 1, "All", False)
    found = causes_of(await served.http.post(claims, json=claim(
        "bad", {"name": "a", "exactly": {"deviceClassName": "gpu", "count": -2}},
        {"name": "b", "exactly": {"deviceClassName": "gpu", "allocationMode": "All", "count": 3}},
        {"name": "c", "firstAvailable": [
            {"name": "x", "deviceClassName": "gpu", "count": -1},
            {"name": "y", "deviceClassName": "gpu", "allocationMode": "All", "count": 1},
            {"name": "z", "deviceClassName": "gpu", "allocationMode": "Most"}]})))
    assert found == [
        "spec.devices.requests[0].exactly.count: Invalid value: -2: must be greater than zero",
        "spec.devices.requests[1].exactly.count: Invalid value: 3: must not be specified when allocationMode is 'All'",
        "spec.devices.requests[2].firstAvailable[0].count: Invalid value: -1: must be greater than zero",
        "spec.devices.requests[2].firstAvailable[1].count: Invalid value: 1: must not be specified when "
        "allocationMode is 'All'",
        'spec.devices.requests[2].firstAvailable[2].allocationMode: Unsupported value: "Most": supported values: '
        '"All", "ExactCount"'], found


# -- a Service's sessionAffinityConfig -----------------------------------------------------------
async def test_a_services_affinity_config_is_defaulted_before_it_is_validated(served: Served) -> None:
    # upstream's SetDefaults_Service clears the config under None and fills a missing ClientIP
    # timeout in before ValidateService runs, so its "must not be set" Forbidden is unreachable
    # through the API: the config of a Service without ClientIP affinity is dropped, on every write
    svcs = f"{NS}/services"
    merge = {"Content-Type": "application/merge-patch+json"}
    body = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}, "spec": {
        "ports": [{"port": 80}], "sessionAffinity": "ClientIP", "sessionAffinityConfig": {
            "clientIP": {"timeoutSeconds": 60}}}}
    resp = await served.http.post(svcs, json=body)
    assert resp.status_code == 201, resp.text
    assert resp.json()["spec"]["sessionAffinityConfig"] == {"clientIP": {"timeoutSeconds": 60}}
    resp = await served.http.patch(f"{svcs}/s", json={"spec": {"sessionAffinity": "None"}}, headers=merge)
    assert resp.status_code == 200, resp.text
    assert resp.json()["spec"]["sessionAffinity"] == "None" and "sessionAffinityConfig" not in resp.json()["spec"]
    for timeout in (0, 86401):
        found = causes_of(await served.http.patch(f"{svcs}/s", json={"spec": {
            "sessionAffinity": "ClientIP", "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": timeout}}}},
            headers=merge))
        assert found == [f"spec.sessionAffinityConfig.clientIP.timeoutSeconds: Invalid value: {timeout}: must be "
                         "greater than 0 and less than 86400"], found
    resp = await served.http.patch(f"{svcs}/s", json={"spec": {
        "sessionAffinity": "ClientIP", "sessionAffinityConfig": {"clientIP": {}}}}, headers=merge)
    assert resp.status_code == 200, resp.text
    assert resp.json()["spec"]["sessionAffinityConfig"] == {"clientIP": {"timeoutSeconds": 10800}}
    found = causes_of(await served.http.patch(f"{svcs}/s", json={"spec": {"sessionAffinity": "Sticky"}},
                                              headers=merge))
    assert found == ['spec.sessionAffinity: Unsupported value: "Sticky": supported values: "ClientIP", "None"'], found


# -- a PersistentVolumeClaim's update --------------------------------------------------------------
async def test_only_a_bound_claims_request_changes(served: Served) -> None:
    pvcs, merge = f"{NS}/persistentvolumeclaims", {"Content-Type": "application/merge-patch+json"}
    fixed = ("spec: Forbidden: spec is immutable after creation except resources.requests and "
             "volumeAttributesClassName for bound claims")
    assert (await served.http.post("/apis/storage.k8s.io/v1/storageclasses", json={
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "grows"},
        "provisioner": "example.com/none", "allowVolumeExpansion": True})).status_code == 201
    claim = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "c"}, "spec": {
        "accessModes": ["ReadWriteOnce"], "storageClassName": "grows", "volumeAttributesClassName": "fast",
        "resources": {"requests": {"storage": "1Gi"}}}}
    assert (await served.http.post(pvcs, json=claim)).status_code == 201
    # unbound: the request is as fixed as the rest of the spec (422 before the resize admission's 403)
    for size in ("2Gi", "512Mi"):
        found = causes_of(await served.http.patch(f"{pvcs}/c", json={
            "spec": {"resources": {"requests": {"storage": size}}}}, headers=merge))
        assert found == [fixed], found
    # a request written otherwise but of the same value is no change; the volume name is set once
    resp = await served.http.patch(f"{pvcs}/c", json={"spec": {"resources": {"requests": {"storage": "1024Mi"}},
                                                               "volumeName": "pv-1"}}, headers=merge)
    assert resp.status_code == 200, resp.text
    found = causes_of(await served.http.patch(f"{pvcs}/c", json={"spec": {"volumeName": "pv-2"}}, headers=merge))
    assert found == [fixed], found
    # the volume attributes class changes, but is not unset or emptied once set; the mode is fixed
    resp = await served.http.patch(f"{pvcs}/c", json={"spec": {"volumeAttributesClassName": "slow"}}, headers=merge)
    assert resp.status_code == 200, resp.text
    found = causes_of(await served.http.patch(f"{pvcs}/c", json={"spec": {"volumeAttributesClassName": None}},
                                              headers=merge))
    assert found == ["spec.volumeAttributesClassName: Forbidden: update from non-nil value to nil is forbidden"]
    found = causes_of(await served.http.patch(f"{pvcs}/c", json={"spec": {"volumeAttributesClassName": ""}},
                                              headers=merge))
    assert found == ["spec.volumeAttributesClassName: Forbidden: update from non-nil value to an empty string is "
                     "forbidden"], found
    found = causes_of(await served.http.patch(f"{pvcs}/c", json={"spec": {"volumeMode": "Block"}}, headers=merge))
    assert found == [fixed, 'volumeMode: Invalid value: "Block": field is immutable'], found
    # bound: the storage request grows (where the class allows it), and other requests stay fixed
    resp = await served.http.patch(f"{pvcs}/c/status", json={"status": {
        "phase": "Bound", "capacity": {"storage": "1Gi"}}}, headers=merge)
    assert resp.status_code == 200, resp.text
    resp = await served.http.patch(f"{pvcs}/c", json={"spec": {"resources": {"requests": {"storage": "3Gi"}}}},
                                   headers=merge)
    assert resp.status_code == 200, resp.text
    assert resp.json()["spec"]["resources"]["requests"]["storage"] == "3Gi"
    found = causes_of(await served.http.patch(f"{pvcs}/c", json={"spec": {"resources": {"limits": {
        "storage": "5Gi"}}}}, headers=merge))
    assert found == [fixed], found
    # and shrinks back, but not to its capacity
    found = causes_of(await served.http.patch(f"{pvcs}/c", json={"spec": {"resources": {"requests": {
        "storage": "1Gi"}}}}, headers=merge))
    assert found == ["spec.resources.requests.storage: Forbidden: field can not be less than status.capacity"], found
    resp = await served.http.patch(f"{pvcs}/c", json={"spec": {"resources": {"requests": {"storage": "2Gi"}}}},
                                   headers=merge)
    assert resp.status_code == 200, resp.text


async def test_a_claims_class_is_set_once_from_none_or_from_its_beta_annotation(served: Served) -> None:
    pvcs, merge = f"{NS}/persistentvolumeclaims", {"Content-Type": "application/merge-patch+json"}
    beta = "volume.beta.kubernetes.io/storage-class"

    def claim(name: str, annotations: dict[str, str]) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {
            "name": name, "annotations": annotations}, "spec": {
            "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}

    assert (await served.http.post(pvcs, json=claim("plain", {}))).status_code == 201
    resp = await served.http.patch(f"{pvcs}/plain", json={"spec": {"storageClassName": "standard"}}, headers=merge)
    assert resp.status_code == 200, resp.text
    found = causes_of(await served.http.patch(f"{pvcs}/plain", json={"spec": {"storageClassName": "other"}},
                                              headers=merge))
    assert found == ["spec: Forbidden: spec is immutable after creation except resources.requests and "
                     "volumeAttributesClassName for bound claims"], found
    assert (await served.http.post(pvcs, json=claim("annotated", {beta: "gold"}))).status_code == 201
    found = causes_of(await served.http.patch(f"{pvcs}/annotated", json={"metadata": {"annotations": {
        beta: "silver"}}}, headers=merge))
    assert found == [f'metadata.annotations.{beta}: Invalid value: "silver": field is immutable'], found
    # the annotation's class may move into the field, the annotation then dropped
    resp = await served.http.patch(f"{pvcs}/annotated", json={"metadata": {"annotations": {beta: None}},
                                                              "spec": {"storageClassName": "gold"}}, headers=merge)
    assert resp.status_code == 200, resp.text


# -- a CRD schema's multipleOf, enum and format ---------------------------------------------------
async def test_a_crd_schemas_unknown_formats_are_taken_with_a_warning(served: Served) -> None:
    # ValidateCustomResourceDefinitionOpenAPISchema checks neither multipleOf's sign nor the enum's
    # values against the type; a format its type does not know is taken, and warned of
    crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"

    def crd(properties: dict[str, Any]) -> dict[str, Any]:
        return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                "metadata": {"name": "widgets.example.com"}, "spec": {
                    "group": "example.com", "scope": "Namespaced",
                    "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                    "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                        "type": "object", "properties": {"spec": {"type": "object", "properties": properties}}}}}]}}

    properties = {"size": {"type": "integer", "multipleOf": 0, "format": "int16"},
                  "colour": {"type": "string", "enum": [1, "red"], "format": "colour"},
                  "at": {"type": "string", "format": "date-time"},
                  "ratio": {"type": "number", "format": "double"},
                  "tags": {"type": "array", "items": {"type": "string", "format": "k8s-short-name"}}}
    resp = await served.http.post(crds, json=crd(properties))
    assert resp.status_code == 201, resp.text
    warnings = sorted(resp.headers.get_list("warning"))
    assert warnings == ['299 - "unrecognized format \\"colour\\""', '299 - "unrecognized format \\"int16\\""'], warnings
    # an update warns only of the formats it brings
    stored = resp.json()
    spec_properties = stored["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    spec_properties["flag"] = {"type": "boolean", "format": "yes-no"}
    resp = await served.http.put(f"{crds}/widgets.example.com", json=stored)
    assert resp.status_code == 200, resp.text
    assert resp.headers.get_list("warning") == ['299 - "unrecognized format \\"yes-no\\""']


# -- a pod's scheduling group, a PodGroup's and a Workload's references ------------------------------
_SUBDOMAIN = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and "
              "must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
              r"'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")


async def test_a_pods_scheduling_group_names_a_podgroup_and_stays(served: Served) -> None:
    def pod(group: Any) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "member"},
                "spec": {"schedulingGroup": group, "containers": [{"name": "c", "image": "nginx"}]}}

    found = causes_of(await served.http.post(f"{NS}/pods", json=pod({})))
    assert found == ['spec.schedulingGroup: Invalid value: "": must specify one of: `podGroupName`'], found
    found = causes_of(await served.http.post(f"{NS}/pods", json=pod({"podGroupName": "Gang_1"})))
    assert found == [f'spec.schedulingGroup.podGroupName: Invalid value: "Gang_1": {_SUBDOMAIN}'], found
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": {
        "selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"}},
                                                              "spec": pod({"podGroupName": "x" * 254})["spec"]}}}
    found = causes_of(await served.http.post("/apis/apps/v1/namespaces/default/deployments", json=deployment))
    assert found[0] == "spec.template.spec.schedulingGroup.podGroupName: Invalid value: " \
                       f'"{"x" * 254}": must be no more than 253 bytes', found
    # the PodGroup need not exist yet; the group is then fixed with the rest of the spec
    resp = await served.http.post(f"{NS}/pods", json=pod({"podGroupName": "gang.v1"}))
    assert resp.status_code == 201, resp.text
    found = causes_of(await served.http.patch(f"{NS}/pods/member", json={"spec": {"schedulingGroup": {
        "podGroupName": "other"}}}, headers={"Content-Type": "application/merge-patch+json"}))
    assert len(found) == 1 and found[0].startswith("spec: Forbidden: pod updates may not change fields"), found


async def test_podgroup_and_workload_references_are_validated_as_137s_declarations(served: Served) -> None:
    api = "/apis/scheduling.k8s.io/v1beta1/namespaces/default"
    workload: dict[str, Any] = {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "Workload",
                                "metadata": {"name": "w"}, "spec": {
        "controllerRef": {"apiGroup": "Batch", "kind": "Job/x", "name": ".."},
        "podGroupTemplates": [{"name": "workers", "schedulingPolicy": {"gang": {"minCount": 2}},
                               "priority": 1_000_000_001}]}}
    found = causes_of(await served.http.post(f"{api}/workloads", json=workload))
    assert found == [
        f'spec.controllerRef.apiGroup: Invalid value: "Batch": {_SUBDOMAIN}',
        "spec.controllerRef.kind: Invalid value: \"Job/x\": may not contain '/'",
        "spec.controllerRef.name: Invalid value: \"..\": may not be '..'",
        "spec.podGroupTemplates[0].priority: Invalid value: 1000000001: must be less than or equal to 1000000000",
    ], found
    workload["spec"]["controllerRef"] = {"apiGroup": "batch", "kind": "Job", "name": "train"}
    del workload["spec"]["podGroupTemplates"][0]["priority"]
    resp = await served.http.post(f"{api}/workloads", json=workload)
    assert resp.status_code == 201, resp.text

    def group(name: str, **spec: Any) -> dict[str, Any]:
        return {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup", "metadata": {"name": name},
                "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}, **spec}}

    # a Workload's name is a long name (dots allowed), its template's a short one
    bad = group("g", workloadRef={"workloadName": "w", "templateName": "workers.v1"}, priorityClassName="High",
                resourceClaims=[{"name": "gpu", "resourceClaimName": "a"}, {"name": "gpu", "resourceClaimName": "b"},
                                {"name": "nic"}, {"name": "x", "resourceClaimName": "c",
                                                  "resourceClaimTemplateName": "t"}])
    union = "`resourceClaimName`, `resourceClaimTemplateName`"
    found = causes_of(await served.http.post(f"{api}/podgroups", json=bad))
    assert found == ['spec.workloadRef.templateName: Invalid value: "workers.v1": must not contain dots',
                     f'spec.priorityClassName: Invalid value: "High": {_SUBDOMAIN}',
                     'spec.resourceClaims[1]: Duplicate value: {"name":"gpu","resourceClaimName":"b"}',
                     f'spec.resourceClaims[2]: Invalid value: "": must specify one of: {union}',
                     'spec.resourceClaims[3]: Invalid value: "{resourceClaimName, resourceClaimTemplateName}": '
                     f"must specify exactly one of: {union}"], found
    resp = await served.http.post(f"{api}/podgroups", json=group(
        "g", workloadRef={"workloadName": "train.v1", "templateName": "workers"}))
    assert resp.status_code == 201, resp.text


# -- ValidatePodCreate's and ValidatePodTemplateSpec's own checks -------------------------------------
async def test_ephemeral_containers_and_a_gated_pods_node_are_refused_at_create(served: Served) -> None:
    pods, deployments = f"{NS}/pods", "/apis/apps/v1/namespaces/default/deployments"
    containers = [{"name": "c", "image": "nginx"}]
    r = await served.http.post(pods, json={"metadata": {"name": "debugged"}, "spec": {
        "containers": containers, "ephemeralContainers": [{"name": "d", "image": "busybox"}]}})
    assert causes_of(r) == ["spec.ephemeralContainers: Forbidden: cannot be set on create"]
    r = await served.http.post(pods, json={"metadata": {"name": "gated"}, "spec": {
        "containers": containers, "nodeName": "n1", "schedulingGates": [{"name": "example.com/wait"}]}})
    assert causes_of(r) == ["spec.nodeName: Forbidden: cannot be set until all schedulingGates have been cleared"]
    r = await served.http.post(deployments, json={"metadata": {"name": "web"}, "spec": {
        "selector": {"matchLabels": {"app": "web"}}, "template": {"metadata": {"labels": {"app": "web"}}, "spec": {
            "containers": containers, "ephemeralContainers": [{"name": "d", "image": "busybox"}]}}}})
    assert causes_of(r) == ["spec.template.spec.ephemeralContainers: Forbidden: "
                            "ephemeral containers not allowed in pod template"]
    # the gate may go first, then the node be set: what the scheduler's binding does
    r = await served.http.post(pods, json={"metadata": {"name": "gated"}, "spec": {
        "containers": containers, "schedulingGates": [{"name": "example.com/wait"}]}})
    assert r.status_code == 201, r.text
