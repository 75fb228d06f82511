"""Aggregated discovery (apidiscovery.k8s.io/v2) and the per-group documents, over a socket."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import time

import httpx
from kubernetes import client

from tests.e2e.test_kubectl import KUBECTL, kubectl
from tests.e2e.test_kubernetes_client import bearer
from tests.test_cli import Serve

AGGREGATED = ("application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
              "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json")


def test_aggregated_discovery_lists_every_group_version_and_resource(served: Serve) -> None:
    r = httpx.get(f"{served.url}/apis", headers={**bearer(served), "accept": AGGREGATED})
    assert r.status_code == 200
    assert r.headers["content-type"] == "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
    doc = r.json()
    assert doc["kind"] == "APIGroupDiscoveryList" and doc["apiVersion"] == "apidiscovery.k8s.io/v2"
    groups = {g["metadata"]["name"]: g for g in doc["items"]}
    assert {"apps", "batch", "coordination.k8s.io", "resource.k8s.io", "scheduling.k8s.io"} <= set(groups)
    apps = groups["apps"]["versions"][0]
    assert apps["version"] == "v1" and apps["freshness"] == "Current"
    deploy = next(r for r in apps["resources"] if r["resource"] == "deployments")
    assert deploy["responseKind"] == {"group": "apps", "version": "v1", "kind": "Deployment"}
    assert deploy["scope"] == "Namespaced" and deploy["shortNames"] == ["deploy"]
    scale = next(s for s in deploy["subresources"] if s["subresource"] == "scale")
    assert scale["responseKind"] == {"group": "autoscaling", "version": "v1", "kind": "Scale"}

    core = httpx.get(f"{served.url}/api", headers={**bearer(served), "accept": AGGREGATED}).json()
    assert [item["metadata"] for item in core["items"]] == [{}]
    pods = next(r for r in core["items"][0]["versions"][0]["resources"] if r["resource"] == "pods")
    assert {s["subresource"] for s in pods["subresources"]} >= {"status", "binding", "eviction"}


def test_without_the_accept_header_the_group_list_is_served(served: Serve) -> None:
    r = httpx.get(f"{served.url}/apis", headers=bearer(served))
    assert r.headers["content-type"] == "application/json"
    assert r.json()["kind"] == "APIGroupList"


def test_kubectl_discovers_in_two_requests(served: Serve) -> None:
    assert KUBECTL
    env = dict(os.environ, KUBECONFIG=str(served.kubeconfig), HOME=str(served.state / "fresh-home"))
    r = subprocess.run([KUBECTL, "api-resources", "-v=6"], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    gets = [line for line in r.stderr.splitlines() if 'verb="GET"' in line]
    assert len(gets) == 2, gets  # /api and /apis, nothing per group-version
    assert "deployments" in r.stdout and "resourceclaims" in r.stdout


GADGETS = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gadgets.%(group)s}
spec:
  group: %(group)s
  scope: Namespaced
  names: {plural: gadgets, kind: Gadget}
  versions:
  - {name: %(version)s, served: true, storage: true, schema: {openAPIV3Schema: {type: object}}}
"""


def _group_names(served: Serve) -> list[str]:
    return [g["name"] for g in json.loads(kubectl(served, "get", "--raw", "/apis"))["groups"]]


def test_groups_are_listed_as_the_aggregator_lists_them(served: Serve, api: client.ApiClient) -> None:
    """/apis (kubectl get --raw, the official client): the aggregator's group first, then by
    groupPriorityMinimum, ties by APIService name (b.example.com's v1 before a.example.com's
    v2); aggregated discovery: ties by group name. Preferred versions by versionPriority."""
    for group, version in (("a.example.com", "v2"), ("b.example.com", "v1")):
        kubectl(served, "apply", "-f", "-", stdin=GADGETS % {"group": group, "version": version})
    deadline = time.monotonic() + 20
    while not {"a.example.com", "b.example.com"} <= set(names := _group_names(served)):
        assert time.monotonic() < deadline, names
        time.sleep(0.1)
    assert names[:6] == ["apiregistration.k8s.io", "apps", "events.k8s.io", "authentication.k8s.io",
                         "authorization.k8s.io", "autoscaling"]
    assert names[-4:] == ["b.example.com", "nodes.controlplane.dev", "a.example.com", "metrics.k8s.io"]

    listed = client.ApisApi(api).get_api_versions().groups
    assert [g.name for g in listed] == names
    autoscaling = next(g for g in listed if g.name == "autoscaling")
    assert autoscaling.preferred_version.group_version == "autoscaling/v2"

    doc = httpx.get(f"{served.url}/apis", headers={**bearer(served), "accept": AGGREGATED}).json()
    aggregated = [item["metadata"]["name"] for item in doc["items"]]
    assert aggregated[:2] == ["apiregistration.k8s.io", "apps"]
    assert aggregated[-4:] == ["a.example.com", "b.example.com", "nodes.controlplane.dev", "metrics.k8s.io"]
    assert sorted(aggregated) == sorted(names)
    versions = kubectl(served, "api-versions").split()  # (kubectl sorts them)
    assert "autoscaling/v2" in versions and "b.example.com/v1" in versions



# upstream's test data (test/integration/etcd's storageversionhashdata): the hashes of the
# storage versions, the same for every served version that shares a storage
_UPSTREAM_HASHES = {
    "v1/pods": "xPOwRZ+Yhw8=", "v1/events": "r2yiGXH7wu8=", "v1/namespaces": "Q3oi5N2YM8M=",
    "apps/v1/deployments": "8aSe+NMegvE=", "events.k8s.io/v1/events": "r2yiGXH7wu8=",
    "autoscaling/v1/horizontalpodautoscalers": "qwQve8ut294=",
    "autoscaling/v2/horizontalpodautoscalers": "qwQve8ut294=",
    "flowcontrol.apiserver.k8s.io/v1/flowschemas": "GJVAJZSZBIw=",
}
_UNSTORED = ("v1/bindings", "v1/componentstatuses", "authentication.k8s.io/v1/tokenreviews",
             "authorization.k8s.io/v1/selfsubjectaccessreviews", "metrics.k8s.io/v1beta1/pods")

SPROCKETS = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: sprockets.svh.example.com}
spec:
  group: svh.example.com
  scope: Namespaced
  names: {plural: sprockets, kind: Sprocket}
  versions:
  - {name: v1, served: true, storage: false, schema: {openAPIV3Schema: {type: object}}}
  - {name: v1beta1, served: true, storage: true, schema: {openAPIV3Schema: {type: object}}}
"""


def _hashes(served: Serve, group_version: str) -> dict[str, str | None]:
    """A group-version's resources and their storageVersionHash (empty while it is not served)."""
    path = f"/api/{group_version}" if group_version == "v1" else f"/apis/{group_version}"
    r = httpx.get(f"{served.url}{path}", headers=bearer(served))
    if r.status_code == 404:
        return {}
    assert r.status_code == 200, r.text
    return {res["name"]: res.get("storageVersionHash") for res in r.json()["resources"]}


def test_resource_lists_carry_the_storage_version_hash(served: Serve, api: client.ApiClient) -> None:
    """APIResourceList entries have upstream's storageVersionHash: of the version the type is
    stored as (events.k8s.io's Events are core Events; autoscaling/v1 HPAs are stored as v2; a
    CRD's storage version), none on subresources or types without a storage; aggregated
    discovery has no such field."""
    for gvr, expected in _UPSTREAM_HASHES.items():
        group_version, _, plural = gvr.rpartition("/")
        assert _hashes(served, group_version)[plural] == expected, gvr
    for gvr in _UNSTORED:
        group_version, _, plural = gvr.rpartition("/")
        assert _hashes(served, group_version)[plural] is None, gvr
    core = _hashes(served, "v1")
    assert core["pods/status"] is None and core["pods/binding"] is None

    resources = client.CoreV1Api(api).get_api_resources().resources  # the official client reads it
    assert next(r for r in resources if r.name == "pods").storage_version_hash == "xPOwRZ+Yhw8="

    kubectl(served, "apply", "-f", "-", stdin=SPROCKETS)
    deadline = time.monotonic() + 20
    while True:
        served_as = [_hashes(served, f"svh.example.com/{v}").get("sprockets") for v in ("v1", "v1beta1")]
        if None not in served_as:
            break
        assert time.monotonic() < deadline, served_as
        time.sleep(0.1)
    stored = base64.b64encode(hashlib.sha256(b"svh.example.com/v1beta1/Sprocket").digest()[:8]).decode()
    assert served_as == [stored, stored]

    doc = httpx.get(f"{served.url}/api", headers={**bearer(served), "accept": AGGREGATED}).json()
    pods = next(r for r in doc["items"][0]["versions"][0]["resources"] if r["resource"] == "pods")
    assert "storageVersionHash" not in pods
