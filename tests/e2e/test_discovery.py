"""Aggregated discovery (apidiscovery.k8s.io/v2) and the per-group documents, over a socket."""

from __future__ import annotations

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

