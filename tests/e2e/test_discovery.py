"""Aggregated discovery (apidiscovery.k8s.io/v2) and the per-group documents, over a socket."""

from __future__ import annotations

import os
import subprocess

import httpx

from tests.e2e.test_kubectl import KUBECTL
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
