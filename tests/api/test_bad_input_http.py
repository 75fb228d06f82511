"""Bad input the third fuzzing round found answered wrongly, over a real socket (httpx to the
project's HTTP/1.1 protocol): each answer a Status of upstream's code and reason, and what
was stored before left as it was."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from controlplane.client import Client
from tests.front_socket import front_on_socket

NS = "/api/v1/namespaces/default"
CMS = f"{NS}/configmaps"


@dataclass
class Served:
    http: httpx.AsyncClient
    client: Client  # in process, for seeding and reading back


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Served]:
    async with front_on_socket(tmp_path) as (port, c), \
            httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as http:
        yield Served(http, c)


def assert_status(resp: httpx.Response, code: int, reason: str) -> dict[str, Any]:
    status: dict[str, Any] = resp.json()
    assert (resp.status_code, status["kind"], status["code"], status.get("reason")) == (
        code, "Status", code, reason), status
    return status


async def test_a_json_patch_applies_as_upstreams_json_patch_library(served: Served) -> None:
    """Upstream's json-patch library (v4) departs from the RFC: a replace of a missing key adds
    it, a negative index counts from the end; what it cannot apply is the generic 422."""
    await served.client.create(CMS, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
        "name": "go-rules", "annotations": {"kept": "1"}, "finalizers": ["a.example.com/x", "a.example.com/y"]}})
    resp = await served.http.patch(f"{CMS}/go-rules", json=[
        {"op": "replace", "path": "/metadata/annotations/added", "value": "yes"},
        {"op": "remove", "path": "/metadata/finalizers/-1"}], headers={"Content-Type": "application/json-patch+json"})
    assert resp.status_code == 200, resp.text
    meta = resp.json()["metadata"]
    assert (meta["annotations"], meta["finalizers"]) == ({"kept": "1", "added": "yes"}, ["a.example.com/x"])
    resp = await served.http.patch(f"{CMS}/go-rules", json=[{"op": "remove", "path": "/metadata/finalizers/-2"}],
                                   headers={"Content-Type": "application/json-patch+json"})
    status = assert_status(resp, 422, "Invalid")
    assert status["message"] == "the server rejected our request due to an error in our request"


async def test_json_patch_copies_are_bounded_as_upstreams_accumulated_copy_limit(served: Served) -> None:
    # each copy of the annotations into themselves doubled them: forty of them in a 4 KB body
    # held the event loop and grew the server past 10 GB
    stored = await served.client.create(CMS, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
        "name": "doubled", "annotations": {"a": "x" * 10}}})
    doubling = [{"op": "copy", "from": "/metadata/annotations", "path": f"/metadata/annotations/z{i}"}
                for i in range(40)]
    started = time.monotonic()
    resp = await served.http.patch(f"{CMS}/doubled", json=doubling,
                                   headers={"Content-Type": "application/json-patch+json"})
    assert time.monotonic() - started < 10
    status = assert_status(resp, 422, "Invalid")
    assert status["message"] == "the server rejected our request due to an error in our request"
    assert status["details"]["causes"][0]["message"].startswith(
        "Unable to complete the copy, the accumulated size increase of copy is ")
    assert status["details"]["causes"][0]["message"].endswith(", exceeding the limit 3145728")
    got = await served.client.get(f"{CMS}/doubled")
    assert got["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]
    # copies within the limit still apply
    copies = [{"op": "copy", "from": "/metadata/annotations/a", "path": f"/metadata/annotations/b{i}"}
              for i in range(3)]
    resp = await served.http.patch(f"{CMS}/doubled", json=copies,
                                   headers={"Content-Type": "application/json-patch+json"})
    assert resp.status_code == 200, resp.text
    assert resp.json()["metadata"]["annotations"] == {"a": "x" * 10, "b0": "x" * 10, "b1": "x" * 10, "b2": "x" * 10}


async def test_quantities_and_times_take_ascii_digits_only_as_go_parses_them(served: Served) -> None:
    # Python's \d matched any script's digits (and int() read them): a request of "١" cpu and a
    # Lease renewed at "٢٠٢٦-..." were stored, and every typed client then failed to decode them
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [
        {"name": "c", "image": "nginx", "resources": {"requests": {"cpu": "\u0661"}}}]}}
    resp = await served.http.post(f"{NS}/pods", json=pod)
    status = assert_status(resp, 400, "BadRequest")
    assert "quantities must match the regular expression" in status["message"]
    lease: dict[str, Any] = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "l"},
             "spec": {"renewTime": "\u0662\u0660\u0662\u0666-01-01T00:00:00.000000Z"}}
    resp = await served.http.post("/apis/coordination.k8s.io/v1/namespaces/default/leases", json=lease)
    assert_status(resp, 400, "BadRequest")
    assert (await served.http.get(f"{NS}/pods/p")).status_code == 404  # nothing stored
    assert (await served.http.get("/apis/coordination.k8s.io/v1/namespaces/default/leases/l")).status_code == 404
    # ASCII ones still go through
    lease["spec"]["renewTime"] = "2026-01-01T00:00:00.000000Z"
    resp = await served.http.post("/apis/coordination.k8s.io/v1/namespaces/default/leases", json=lease)
    assert resp.status_code == 201, resp.text


CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


def widget_crd(field: dict[str, Any]) -> dict[str, Any]:
    schema = {"type": "object", "properties": {"spec": {"type": "object", "properties": {"x": field}}}}
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.fz.io"},
            "spec": {"group": "fz.io", "scope": "Namespaced",
                     "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
                     "versions": [{"name": "v1", "served": True, "storage": True,
                                   "schema": {"openAPIV3Schema": schema}}]}}


async def test_crd_schemas_misusing_x_kubernetes_extensions_are_refused_as_upstream(served: Served) -> None:
    # each was stored, and the server then served and pruned custom resources by a schema
    # upstream never accepts (a map list without keys could not even pair items)
    at = "spec.validation.openAPIV3Schema.properties[spec].properties[x]"
    item: dict[str, Any] = {"type": "object", "properties": {"a": {"type": "string"}}}
    bad: list[tuple[dict[str, Any], str]] = [
        ({"type": "array", "x-kubernetes-list-type": "map", "items": item},
         f"{at}.x-kubernetes-list-map-keys: Required value: must not be empty if x-kubernetes-list-type is map"),
        ({"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["b"], "items": item},
         f'{at}.x-kubernetes-list-map-keys: Invalid value: ["b"]: entries must all be names of item properties'),
        ({"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["a"], "items": item},
         f"{at}.items.properties[a].default: Required value: this property is in x-kubernetes-list-map-keys, so it "
         "must have a default or be a required property"),
        ({"type": "array", "x-kubernetes-list-type": "bogus", "items": {"type": "string"}},
         f'{at}.x-kubernetes-list-type: Unsupported value: "bogus": supported values: "atomic", "set", "map"'),
        ({"type": "string", "x-kubernetes-list-type": "atomic"},
         f'{at}.type: Invalid value: "string": must be array if x-kubernetes-list-type is specified'),
        ({"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "object"}},
         f"{at}.items.x-kubernetes-map-type: Invalid value: null: must be atomic as item of a list with "
         "x-kubernetes-list-type=set"),
        ({"type": "array", "x-kubernetes-list-map-keys": ["a"], "items": item},
         f"{at}.x-kubernetes-list-type: Required value: must be map if x-kubernetes-list-map-keys is non-empty"),
        ({"type": "object", "x-kubernetes-map-type": "bogus"},
         f'{at}.x-kubernetes-map-type: Unsupported value: "bogus": supported values: "atomic", "granular"'),
        ({"type": "object", "x-kubernetes-preserve-unknown-fields": False},
         f"{at}.x-kubernetes-preserve-unknown-fields: Invalid value: false: must be true or undefined"),
        # a map list's item schema whose properties or required are of another type: were 500s (the
        # keys looked up in them)
        ({"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["a"],
          "items": {**item, "required": ["a"], "properties": "-1"}},
         f'{at}.items.properties: Invalid value: "-1": must be an object'),
        ({"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["a"],
          "items": {**item, "required": 5}},
         f"{at}.items.required: Invalid value: 5: must be an array of strings"),
    ]
    for field, cause in bad:
        resp = await served.http.post(CRDS, json=widget_crd(field))
        status = assert_status(resp, 422, "Invalid")
        assert cause in [f"{c['field']}: {c['message']}" for c in status["details"]["causes"]], status
    assert (await served.http.get(f"{CRDS}/widgets.fz.io")).status_code == 404
    # a map list keyed by a required scalar is fine
    good = {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["a"],
            "items": {**item, "required": ["a"]}}
    resp = await served.http.post(CRDS, json=widget_crd(good))
    assert resp.status_code == 201, resp.text


async def test_container_resources_are_validated_as_upstreams_resource_requirements(served: Served) -> None:
    # a negative cpu request, a resource named "bogus resource!", a Pod's "pods", a fractional
    # GPU were all stored (the scheduler then counted negative requests)
    def pod(resources: dict[str, Any]) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "r"},
                "spec": {"containers": [{"name": "c", "image": "nginx", "resources": resources}]}}

    at = "spec.containers[0].resources"
    bad = [
        ({"requests": {"cpu": "-1"}}, f'{at}.requests[cpu]: Invalid value: "-1": must be greater than or equal to 0'),
        ({"requests": {"memory": "-1Gi"}, "limits": {"memory": "1Gi"}},
         f'{at}.requests[memory]: Invalid value: "-1Gi": must be greater than or equal to 0'),
        ({"requests": {"pods": "1"}}, f'{at}.requests[pods]: Invalid value: "pods": must be a standard resource for '
                                      "containers"),
        ({"requests": {"bogus": "1"}}, f'{at}.requests[bogus]: Invalid value: "bogus": must be a standard resource '
                                       "type or fully qualified"),
        ({"limits": {"example.com/gpu": "1.5"}}, f'{at}.limits[example.com/gpu]: Invalid value: "1500m": must be an '
                                                 "integer"),
        ({"requests": {"example.com/gpu": "1"}}, f"{at}.limits: Required value: Limit must be set for non "
                                                 "overcommitable resources"),
        ({"limits": {"hugepages-2Mi": "2Mi"}}, f"{at}: Forbidden: HugePages require cpu or memory"),
    ]
    for resources, cause in bad:
        status = assert_status(await served.http.post(f"{NS}/pods", json=pod(resources)), 422, "Invalid")
        assert cause in [f"{c['field']}: {c['message']}" for c in status["details"]["causes"]], status
    assert (await served.http.get(f"{NS}/pods/r")).status_code == 404
    ok = {"requests": {"cpu": "100m", "memory": "64Mi", "example.com/gpu": "1"}, "limits": {"example.com/gpu": "1"}}
    resp = await served.http.post(f"{NS}/pods", json=pod(ok))
    assert resp.status_code == 201, resp.text


async def test_a_pods_deadline_hostname_and_subdomain_are_validated(served: Served) -> None:
    # ValidatePodSpec: activeDeadlineSeconds -1 and a hostname "A_b" were stored
    def pod(**spec: Any) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "d"},
                "spec": {"containers": [{"name": "c", "image": "nginx"}], **spec}}

    bad = [(pod(activeDeadlineSeconds=-1),
            "spec.activeDeadlineSeconds: Invalid value: -1: must be between 1 and 2147483647, inclusive"),
           (pod(hostname="A_b"), 'spec.hostname: Invalid value: "A_b": a lowercase RFC 1123 label must consist of'),
           (pod(subdomain="s" * 64),
            f'spec.subdomain: Invalid value: "{"s" * 64}": must be no more than 63 characters')]
    for body, cause in bad:
        status = assert_status(await served.http.post(f"{NS}/pods", json=body), 422, "Invalid")
        assert any(f"{c['field']}: {c['message']}".startswith(cause) for c in status["details"]["causes"]), status
    resp = await served.http.post(f"{NS}/pods", json=pod(activeDeadlineSeconds=30, hostname="h", subdomain="s"))
    assert resp.status_code == 201, resp.text


async def test_access_reviews_selectors_are_validated_as_upstream(served: Served) -> None:
    # a raw selector beside requirements, an empty selector, an In without values were allowed
    def review(resource: dict[str, Any]) -> dict[str, Any]:
        return {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
                "spec": {"user": "bob", "resourceAttributes": {"verb": "list", "resource": "pods", **resource}}}

    at = "spec.resourceAttributes"
    bad: list[tuple[dict[str, Any], str]] = [
        ({"fieldSelector": {"rawSelector": "a==b", "requirements": [{"key": "a", "operator": "In", "values": ["b"]}]}},
         f'{at}.fieldSelector.rawSelector: Invalid value: "a==b": may not specified at the same time as requirements'),
        ({"labelSelector": {}}, f"{at}.labelSelector.requirements: Required value: when {at}.labelSelector is "
                                "specified, requirements or rawSelector is required"),
        ({"fieldSelector": {"requirements": [{"key": "a", "operator": "In"}]}},
         f"{at}.fieldSelector.requirements[0].values: Required value: must be specified when `operator` is 'In' or "
         "'NotIn'"),
    ]
    for resource, cause in bad:
        resp = await served.http.post("/apis/authorization.k8s.io/v1/subjectaccessreviews", json=review(resource))
        status = assert_status(resp, 422, "Invalid")
        assert cause in [f"{c['field']}: {c['message']}" for c in status["details"]["causes"]], status
    # an operator this server does not know is a newer client's: allowed, as upstream
    resp = await served.http.post("/apis/authorization.k8s.io/v1/subjectaccessreviews", json=review(
        {"labelSelector": {"requirements": [{"key": "a", "operator": "Newer"}]}}))
    assert resp.status_code == 201, resp.text


async def test_a_token_requests_fields_of_another_type_are_a_400_as_gos_decoder_says(served: Served) -> None:
    # expirationSeconds "x" was the 422 of a too-short duration, 2^63 the 422 of a too-long one
    await served.client.create(f"{NS}/serviceaccounts", {"apiVersion": "v1", "kind": "ServiceAccount",
                                                          "metadata": {"name": "sa"}})
    prefix = ('TokenRequest in version "v1" cannot be handled as a TokenRequest: json: cannot unmarshal '
              "{} into Go struct field TokenRequestSpec.spec.{}")
    for spec, words in (({"expirationSeconds": "x"}, ("string", "expirationSeconds of type int64")),
                        ({"expirationSeconds": 2**63}, (f"number {2**63}", "expirationSeconds of type int64")),
                        ({"expirationSeconds": 1.5}, ("number 1.5", "expirationSeconds of type int64")),
                        ({"audiences": [5]}, ("number", "audiences of type string"))):
        resp = await served.http.post(f"{NS}/serviceaccounts/sa/token", json={
            "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec})
        assert assert_status(resp, 400, "BadRequest")["message"] == prefix.format(*words)
    resp = await served.http.post(f"{NS}/serviceaccounts/sa/token", json={
        "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 60}})
    assert_status(resp, 422, "Invalid")


async def test_a_services_families_policies_and_app_protocols_are_validated(served: Served) -> None:
    # ipFamilies ["IPv7"], ipFamilyPolicy "Bogus" and internalTrafficPolicy "Bogus" were stored beside
    # the IPv4 address the allocator gave, an affinity timeout of 0 and a ClusterIP's external policy too
    def svc(spec: dict[str, Any], ports: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
                "spec": {"ports": ports or [{"port": 80}], **spec}}

    bad = [
        (svc({"ipFamilies": ["IPv7"]}), 'spec.ipFamilies[0]: Unsupported value: "IPv7": supported values: "IPv4", '
                                        '"IPv6"'),
        (svc({"ipFamilyPolicy": "Bogus"}), 'spec.ipFamilyPolicy: Unsupported value: "Bogus": supported values: '
                                           '"PreferDualStack", "RequireDualStack", "SingleStack"'),
        (svc({"internalTrafficPolicy": "Bogus"}), 'spec.internalTrafficPolicy: Unsupported value: "Bogus": supported '
                                                  'values: "Cluster", "Local"'),
        (svc({"externalTrafficPolicy": "Local"}), 'spec.externalTrafficPolicy: Invalid value: "Local": may only be set '
                                                  "for externally-accessible services"),
        (svc({"type": "NodePort", "externalTrafficPolicy": "Bogus"}),
         'spec.externalTrafficPolicy: Unsupported value: "Bogus": supported values: "Cluster", "Local"'),
        (svc({"sessionAffinity": "ClientIP", "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 0}}}),
         "spec.sessionAffinityConfig.clientIP.timeoutSeconds: Invalid value: 0: must be greater than 0 and less than "
         "86400"),
        (svc({}, [{"port": 80, "appProtocol": "bad proto!"}]),
         'spec.ports[0].appProtocol: Invalid value: "bad proto!"'),
    ]
    for body, cause in bad:
        status = assert_status(await served.http.post(f"{NS}/services", json=body), 422, "Invalid")
        assert any(f"{c['field']}: {c['message']}".startswith(cause) for c in status["details"]["causes"]), status
    assert (await served.http.get(f"{NS}/services/s")).status_code == 404
    resp = await served.http.post(f"{NS}/services", json=svc(
        {"type": "NodePort", "externalTrafficPolicy": "Local", "ipFamilies": ["IPv4"]},
        [{"port": 80, "appProtocol": "kubernetes.io/h2c"}]))
    assert resp.status_code == 201, resp.text
    # a NodePort made a ClusterIP loses its external policy, as upstream's strategy drops it
    resp = await served.http.patch(f"{NS}/services/s", json={"spec": {"type": "ClusterIP"}},
                                   headers={"Content-Type": "application/merge-patch+json"})
    assert resp.status_code == 200, resp.text
    assert "externalTrafficPolicy" not in resp.json()["spec"]


async def test_workload_counts_and_enums_are_validated_as_upstream(served: Served) -> None:
    # a Deployment's negative minReadySeconds and progress deadline, a CronJob's concurrency
    # policy "Bogus" and negative history limits, a Job's completion mode "Bogus" were stored
    template = {"metadata": {"labels": {"app": "d"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}
    job_spec = {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "x"}]}}}

    def deployment(**spec: Any) -> dict[str, Any]:
        return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "w"},
                "spec": {"selector": {"matchLabels": {"app": "d"}}, "template": template, **spec}}

    def cron_job(**spec: Any) -> dict[str, Any]:
        return {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "w"},
                "spec": {"schedule": "* * * * *", "jobTemplate": {"spec": job_spec}, **spec}}

    deployments = "/apis/apps/v1/namespaces/default/deployments"
    cron_jobs = "/apis/batch/v1/namespaces/default/cronjobs"
    bad = [
        (deployments, deployment(minReadySeconds=-1), "spec.minReadySeconds: Invalid value: -1: must be greater than "
                                                      "or equal to 0"),
        (deployments, deployment(revisionHistoryLimit=-1), "spec.revisionHistoryLimit: Invalid value: -1: must be "
                                                           "greater than or equal to 0"),
        (deployments, deployment(progressDeadlineSeconds=5, minReadySeconds=5),
         "spec.progressDeadlineSeconds: Invalid value: 5: must be greater than minReadySeconds"),
        (cron_jobs, cron_job(concurrencyPolicy="Bogus"), 'spec.concurrencyPolicy: Unsupported value: "Bogus": '
                                                         'supported values: "Allow", "Forbid", "Replace"'),
        (cron_jobs, cron_job(successfulJobsHistoryLimit=-1), "spec.successfulJobsHistoryLimit: Invalid value: -1: "
                                                             "must be greater than or equal to 0"),
        (cron_jobs, cron_job(startingDeadlineSeconds=-1), "spec.startingDeadlineSeconds: Invalid value: -1: must be "
                                                          "greater than or equal to 0"),
        ("/apis/batch/v1/namespaces/default/jobs",
         {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "w"}, "spec": {**job_spec,
                                                                                       "completionMode": "Bogus"}},
         'spec.completionMode: Unsupported value: "Bogus": supported values: "NonIndexed", "Indexed"'),
    ]
    for path, body, cause in bad:
        status = assert_status(await served.http.post(path, json=body), 422, "Invalid")
        assert cause in [f"{c['field']}: {c['message']}" for c in status["details"]["causes"]], status
    resp = await served.http.post(deployments, json=deployment(minReadySeconds=5, progressDeadlineSeconds=60))
    assert resp.status_code == 201, resp.text
    resp = await served.http.post(cron_jobs, json=cron_job(concurrencyPolicy="Forbid", failedJobsHistoryLimit=0))
    assert resp.status_code == 201, resp.text


async def test_a_crd_status_write_may_not_accept_names_that_are_no_names(served: Served) -> None:
    # acceptedNames.plural "BAD!" written through /status was served as the resource's path:
    # discovery listed "BAD!" and the custom resources' URL answered 404
    good = {"type": "array", "items": {"type": "string"}}
    resp = await served.http.post(CRDS, json=widget_crd(good))
    assert resp.status_code == 201, resp.text
    resp = await served.http.patch(f"{CRDS}/widgets.fz.io/status", json={"status": {"acceptedNames": {
        "plural": "BAD!", "kind": "Widget"}}}, headers={"Content-Type": "application/merge-patch+json"})
    status = assert_status(resp, 422, "Invalid")
    assert [c["field"] for c in status["details"]["causes"]] == ["status.acceptedNames.plural"]
    for _ in range(50):  # the CRD established, its resources are still served under their plural
        if (await served.http.get("/apis/fz.io/v1/namespaces/default/widgets")).status_code == 200:
            break
        await asyncio.sleep(0.1)
    assert (await served.http.get("/apis/fz.io/v1/namespaces/default/widgets")).status_code == 200
    crd = (await served.http.get(f"{CRDS}/widgets.fz.io")).json()
    assert crd["status"]["acceptedNames"]["plural"] == "widgets"


async def test_a_patch_body_that_is_not_json_is_a_400_in_upstreams_words(served: Served) -> None:
    """Upstream's patch handler decodes a JSON or merge patch strictly first under Strict and
    Warn (the default), a strategic merge patch alone: Go's syntax error, never Python's."""
    stored = await served.client.create(CMS, {"apiVersion": "v1", "kind": "ConfigMap",
                                              "metadata": {"name": "patched"}, "data": {"a": "1"}})
    cases = [
        ("application/json-patch+json", "", b"[{'op': 'add'}]",
         "error decoding patch: invalid character '\\'' looking for beginning of object key string"),
        ("application/json-patch+json", "Ignore", b"[{'op': 'add'}]",
         "invalid character '\\'' looking for beginning of object key string"),
        ("application/merge-patch+json", "Strict", b'{"data": {"a": 2,}}',
         "error decoding patch: invalid character '}' looking for beginning of object key string"),
        ("application/merge-patch+json", "Ignore", b'{"data": ', "Invalid JSON Patch"),
        ("application/strategic-merge-patch+json", "", b"data:\n  a: 2\n",
         "invalid character 'd' looking for beginning of value"),
        ("application/merge-patch+json", "", b"", "error decoding patch: unexpected end of JSON input"),
    ]
    for content_type, directive, body, message in cases:
        params = {"fieldValidation": directive} if directive else {}
        resp = await served.http.patch(f"{CMS}/patched", content=body, params=params,
                                       headers={"Content-Type": content_type})
        status = assert_status(resp, 400, "BadRequest")
        assert status["message"] == message, (content_type, directive, body)
    # what Go's decoder reads and orjson does not: an integer past 64 bits is a number to it
    resp = await served.http.patch(f"{CMS}/patched", content=b'{"metadata": {"labels": {"n": 18446744073709551616}}}',
                                   headers={"Content-Type": "application/merge-patch+json"})
    status = assert_status(resp, 422, "Invalid")
    assert status["message"].endswith("json: cannot unmarshal number into Go struct field ObjectMeta.metadata.labels "
                                      "of type string")
    got = await served.client.get(f"{CMS}/patched")
    assert got["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]


async def test_a_patch_number_past_a_float64_is_refused_never_stored_as_null(served: Served) -> None:
    """Go's decoder refuses a number past a float64's range (``strconv.ParseFloat``'s range
    error); Python's would read infinity, which orjson writes back as null: a merge patch's null
    removes the key. Upstream's patch handler answers the decoder's error, and nothing changes."""
    stored = await served.client.create(CMS, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
        "name": "huge", "annotations": {"kept": "yes"}}, "data": {"a": "1"}})
    why = "json: cannot unmarshal number 1e400 into Go value of type float64"
    cases = [
        ("application/merge-patch+json", "", b'{"metadata": {"annotations": {"kept": 1e400}}}',
         f"error decoding patch: {why}"),
        ("application/json-patch+json", "Strict",
         b'[{"op": "replace", "path": "/metadata/annotations/kept", "value": 1e400}]', f"error decoding patch: {why}"),
        ("application/strategic-merge-patch+json", "", b'{"metadata": {"annotations": {"kept": 1e400}}}', why),
        ("application/merge-patch+json", "Ignore", b'{"metadata": {"annotations": {"kept": 1e400}}}', why),
        # with invalid UTF-8 beside it (what sends the body to Go's lenient reading)
        ("application/merge-patch+json", "", b'{"metadata": {"annotations": {"kept": 1e400, "x": "\xff"}}}',
         f"error decoding patch: {why}"),
    ]
    for content_type, directive, body, message in cases:
        params = {"fieldValidation": directive} if directive else {}
        resp = await served.http.patch(f"{CMS}/huge", content=body, params=params,
                                       headers={"Content-Type": content_type})
        status = assert_status(resp, 400, "BadRequest")
        assert status["message"] == message, (content_type, directive, body)
    got = await served.client.get(f"{CMS}/huge")
    assert got["metadata"]["annotations"] == {"kept": "yes"}
    assert got["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]
    # a custom resource's field that holds any JSON: the infinity was stored as null
    any_json = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    resp = await served.http.post(CRDS, json=widget_crd(any_json))
    assert resp.status_code == 201, resp.text
    widgets = "/apis/fz.io/v1/namespaces/default/widgets"
    resp = await served.http.post(widgets, json={"apiVersion": "fz.io/v1", "kind": "Widget", "metadata": {"name": "w"},
                                                 "spec": {"x": {"n": 1}}})
    assert resp.status_code == 201, resp.text
    resp = await served.http.patch(f"{widgets}/w", content=b'{"spec": {"x": {"n": 1e400}}}',
                                   headers={"Content-Type": "application/merge-patch+json"})
    assert assert_status(resp, 400, "BadRequest")["message"] == f"error decoding patch: {why}"
    assert (await served.http.get(f"{widgets}/w")).json()["spec"] == {"x": {"n": 1}}


async def test_a_patch_nested_past_orjsons_writer_is_a_400_not_a_500(served: Served) -> None:
    """orjson reads 1024 levels and writes 255: a patch between the two (read by orjson, or by
    Go's lenient reading for its invalid UTF-8) failed as the patched object, or the patch
    itself, was written back: a 500. It is the body's fault, as JSON nested past the walks."""
    stored = await served.client.create(CMS, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "deep"},
                                              "data": {"a": "1"}})
    deep = b"[" * 300 + b"]" * 300
    cases = [
        ("application/merge-patch+json", "", b'{"data": {"b": ' + deep + b"}}"),
        ("application/merge-patch+json", "Ignore", b'{"data": {"b": ' + deep + b"}}"),
        ("application/json-patch+json", "", b'[{"op": "add", "path": "/data/b", "value": ' + deep + b"}]"),
        ("application/merge-patch+json", "", b'{"data": {"c": "\xff", "b": ' + deep + b"}}"),
    ]
    for content_type, directive, body in cases:
        params = {"fieldValidation": directive} if directive else {}
        resp = await served.http.patch(f"{CMS}/deep", content=body, params=params,
                                       headers={"Content-Type": content_type})
        status = assert_status(resp, 400, "BadRequest")
        assert status["message"] == "the object is nested too deeply to be handled", (content_type, directive)
    got = await served.client.get(f"{CMS}/deep")
    assert got["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]


async def test_a_create_or_update_body_is_read_as_gos_decoder_reads_it(served: Served) -> None:
    """Invalid UTF-8 and a lone surrogate escape (what Python's json.dumps writes of a
    surrogate-escaped str) are U+FFFD to Go's decoder, as a patch's already were: a create, an
    update and an eviction were 400 in orjson's words (``no low surrogate in string``)."""
    resp = await served.http.post(CMS, content=b'{"metadata": {"name": "odd"}, "data": {"a": "\\ud800", "b": "\xff"}}',
                                  headers={"Content-Type": "application/json"})
    assert resp.status_code == 201, resp.text
    assert resp.json()["data"] == {"a": "\ufffd", "b": "\ufffd"}
    resp = await served.http.put(f"{CMS}/odd", content=b'{"metadata": {"name": "odd"}, "data": {"a": "\\udc00x"}}',
                                 headers={"Content-Type": "application/json"})
    assert resp.status_code == 200, resp.text
    assert (await served.client.get(f"{CMS}/odd"))["data"] == {"a": "\ufffdx"}
    # a number past a float64's range is still Go's refusal, and JSON of another type still unrecognized
    resp = await served.http.post(CMS, content=b'{"metadata": {"name": "inf", "labels": {"a": "\xff"}}, "n": 1e400}',
                                  headers={"Content-Type": "application/json"})
    assert assert_status(resp, 400, "BadRequest")["message"] == (
        'ConfigMap in version "v1" cannot be handled as a ConfigMap: json: cannot unmarshal number 1e400 into Go '
        "value of type float64")
    resp = await served.http.post(CMS, content=b'["\xff"]', headers={"Content-Type": "application/json"})
    assert assert_status(resp, 400, "BadRequest")["message"].startswith(
        "the object provided is unrecognized (must be of type ConfigMap): couldn't get version/kind; json parse "
        "error: json: cannot unmarshal array")
    deep = b"[" * 300 + b"]" * 300
    resp = await served.http.post(CMS, content=b'{"metadata": {"name": "deep2"}, "x": "\xff", "y": ' + deep + b"}",
                                  headers={"Content-Type": "application/json"})
    assert assert_status(resp, 400, "BadRequest")["message"] == "the object is nested too deeply to be handled"


async def test_a_cel_rules_failed_conversion_or_overflow_is_worded_as_cel_go(served: Served) -> None:
    # the interpreter's own words reached the client ("Function 'int' error: string parse
    # error: invalid digit found in string. Check function arguments and their types.")
    for rule, value, why in (("int(self) > 0", "abc", "type conversion error from 'string' to 'int'"),
                             ("duration(self) > duration('1s')", "soon",
                              "type conversion error from 'string' to 'google.protobuf.Duration'"),
                             ("self + 9223372036854775807 > 0", 1, "integer overflow")):
        field = {"type": "string" if isinstance(value, str) else "integer",
                 "x-kubernetes-validations": [{"rule": rule}]}
        resp = await served.http.post(CRDS, json=widget_crd(field))
        assert resp.status_code == 201, resp.text
        for _ in range(50):
            if (await served.http.get("/apis/fz.io/v1/namespaces/default/widgets")).status_code == 200:
                break
            await asyncio.sleep(0.1)
        resp = await served.http.post("/apis/fz.io/v1/namespaces/default/widgets", json={
            "apiVersion": "fz.io/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"x": value}})
        status = assert_status(resp, 422, "Invalid")
        kind = "string" if isinstance(value, str) else "integer"
        assert [c["message"] for c in status["details"]["causes"]] == [
            f'Invalid value: "{kind}": {why} evaluating rule: {rule}'], status
        assert (await served.http.delete(f"{CRDS}/widgets.fz.io")).status_code == 200
        for _ in range(50):
            if (await served.http.get(f"{CRDS}/widgets.fz.io")).status_code == 404:
                break
            await asyncio.sleep(0.1)


async def test_a_custom_resources_applied_metadata_is_typed_as_object_meta(served: Served) -> None:
    # applied over an existing object, these were stored, and every PUT of the object read
    # back was then refused (400: cannot unmarshal ... into Go struct field ObjectMeta)
    widgets = "/apis/fz.io/v1/namespaces/default/widgets"
    assert (await served.http.post(CRDS, json=widget_crd({"type": "integer"}))).status_code == 201
    for _ in range(50):
        if (await served.http.get(widgets)).status_code == 200:
            break
        await asyncio.sleep(0.1)
    widget = {"apiVersion": "fz.io/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"x": 1}}
    created = await served.client.create(widgets, widget)
    apply = {"Content-Type": "application/apply-patch+yaml"}
    # structured-merge-diff's words (typed/validate.go); finalizers are a set (``+listType=set``),
    # whose explicit null no item can be named by (helpers.go ``setItemToPathElement``)
    for meta, why in (({"labels": {"a": 1}}, ".metadata.labels.a: expected string, got "
                                             "&value.valueUnstructured{Value:1}"),
                      ({"finalizers": "x"}, ".metadata.finalizers: expected list, got &{x}"),
                      ({"ownerReferences": 5}, ".metadata.ownerReferences: expected list, got &{5}"),
                      ({"finalizers": [None]}, ".metadata.finalizers: element 0: associative list without keys "
                                               "has an element that's an explicit null")):
        resp = await served.http.patch(f"{widgets}/w", params={"fieldManager": "m", "force": "true"}, headers=apply,
                                       json={**widget, "metadata": {"name": "w", **meta}})
        status = assert_status(resp, 400, "BadRequest")
        assert status["message"] == f"failed to create typed patch object (/w; fz.io/v1, Kind=Widget): {why}"
    stored = await served.client.get(f"{widgets}/w")
    assert stored["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    assert (await served.http.put(f"{widgets}/w", json=stored)).status_code == 200


async def test_a_custom_resources_applied_configuration_is_typed_by_its_crds_schema(served: Served) -> None:
    """The field manager types a custom resource's configuration by its CRD's schema, as a
    built-in's (structured-merge-diff's words): a value of another type is the apply's 400, not
    the validation's 422, and a map list's items are named by their keys. What the schema
    preserves (``x-kubernetes-preserve-unknown-fields``) beside the properties it declares
    there, and an embedded resource's apiVersion, kind and metadata, are not typed."""
    widgets = "/apis/fz.io/v1/namespaces/default/widgets"
    item = {"type": "object", "required": ["name"],
            "properties": {"name": {"type": "string"}, "n": {"type": "integer"},
                           "raw": {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                                   "properties": {"n": {"type": "integer"}}},
                           "res": {"type": "object", "x-kubernetes-embedded-resource": True,
                                   "x-kubernetes-preserve-unknown-fields": True}}}
    assert (await served.http.post(CRDS, json=widget_crd({
        "type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
        "items": item}))).status_code == 201
    for _ in range(50):
        if (await served.http.get(widgets)).status_code == 200:
            break
        await asyncio.sleep(0.1)
    apply = {"Content-Type": "application/apply-patch+yaml"}

    async def applied(x: Any) -> httpx.Response:
        config = {"apiVersion": "fz.io/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"x": x}}
        return await served.http.patch(f"{widgets}/w", params={"fieldManager": "m", "force": "true"}, headers=apply,
                                       json=config)

    ok = [{"name": "a", "n": 1, "raw": {"any": ["thing"]},
           "res": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": "v"}}}]
    assert (await applied(ok)).status_code == 201
    for x, why in (([{"name": "a", "n": "one"}], '.spec.x[name="a"].n: expected numeric (int or float), got string'),
                   ({"name": "a"}, ".spec.x: expected list, got &{map[name:a]}"),
                   ([{"name": "a", "m": 1}], '.spec.x[name="a"].m: field not declared in schema'),
                   ([{"name": "a"}, {"name": "a"}], '.spec.x: duplicate entries for key [name="a"]'),
                   ([{"name": "a", "raw": {"n": [1]}}],
                    '.spec.x[name="a"].raw.n: expected numeric (int or float), got []interface {}')):
        status = assert_status(await applied(x), 400, "BadRequest")
        assert status["message"] == f"failed to create typed patch object (/w; fz.io/v1, Kind=Widget): {why}"
    assert (await served.client.get(f"{widgets}/w"))["spec"]["x"] == ok


async def test_an_applied_item_with_some_of_its_keys_is_merged_and_then_validated(served: Served) -> None:
    """structured-merge-diff v6 names a map list's item by the key fields it has (optional
    map keys): a port applied without its containerPort is ``[protocol="TCP"]``, merged as a
    new port, and the merged Deployment's validation refuses it (422 ``Required value``).
    It was the apply's 400 ``omits key field "containerPort"``."""
    deployments = "/apis/apps/v1/namespaces/default/deployments"
    container: dict[str, Any] = {"name": "c", "image": "i", "ports": [{"containerPort": 80}]}
    config = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "keys"},
              "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {
                  "metadata": {"labels": {"a": "b"}}, "spec": {"containers": [container]}}}}
    apply = {"Content-Type": "application/apply-patch+yaml"}
    resp = await served.http.patch(f"{deployments}/keys", params={"fieldManager": "m"}, headers=apply, json=config)
    assert resp.status_code == 201, resp.text
    container["ports"] = [{"name": "http"}]
    resp = await served.http.patch(f"{deployments}/keys", params={"fieldManager": "m"}, headers=apply, json=config)
    status = assert_status(resp, 422, "Invalid")
    assert [(c["field"], c["message"]) for c in status["details"]["causes"]] == [
        ("spec.template.spec.containers[0].ports[0].containerPort", "Required value")]


async def test_a_persistent_volumes_required_node_affinity_needs_a_term(served: Served) -> None:
    # validateVolumeNodeAffinity's ValidateNodeSelector: [] was taken, stored null, and then
    # every update of the volume read back was refused (nodeSelectorTerms: Required value)
    for i, required in enumerate(({}, {"nodeSelectorTerms": []}, {"nodeSelectorTerms": None})):
        resp = await served.http.post("/api/v1/persistentvolumes", json={
            "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": f"pv{i}"},
            "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/x"},
                     "nodeAffinity": {"required": required}}})
        status = assert_status(resp, 422, "Invalid")
        assert [(c["field"], c["message"]) for c in status["details"]["causes"]] == [
            ("spec.nodeAffinity.required.nodeSelectorTerms",
             "Required value: must have at least one node selector term")]
