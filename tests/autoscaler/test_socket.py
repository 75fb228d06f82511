"""Over a real socket: ``controlplane serve --autoscaler`` (the whole loop in one
server: the scheduler finds the pod unschedulable, the autoscaler launches a
node, the scheduler binds the pod there, the node simulator runs it) and the
standalone ``controlplane autoscaler`` beside a server, serving its own metrics."""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from kubernetes import client as k8s
from kubernetes import config
from kubernetes.client.exceptions import ApiException

from controlplane.client import Client, resource_path
from tests.autoscaler.helpers import (
    CLAIM_TEMPLATE,
    CLAIMS,
    DEVICE_CLASS,
    NODES,
    PODS,
    POOLS,
    SLICES,
    nodepool,
    pending_pods,
    pod,
    wait_for,
)
from tests.test_cli import Serve, start_serve
from tests.test_metricsserver import metrics_url

CLASSES = resource_path("resource.k8s.io", "v1", "deviceclasses")
TEMPLATES = resource_path("resource.k8s.io", "v1", "resourceclaimtemplates", "default")
CATALOG = {"instanceTypes": [
    {"name": "cpu-small", "cpu": "2", "memory": "8Gi", "pods": 20, "price": 0.1, "launchLatencySeconds": 0.5},
    # the node simulator in serve wants its default type (cpu-large) in the catalog, even with --nodes 0
    {"name": "cpu-large", "cpu": "32", "memory": "128Gi", "price": 1.6, "launchLatencySeconds": 0.5},
    {"name": "gpu-2x", "cpu": "16", "memory": "64Gi", "price": 2.0, "launchLatencySeconds": 0.5,
     "extendedResources": {"nvidia.com/gpu": "2"}, "gpus": [{"model": "L4", "memory": "24Gi", "count": 2}],
     "zones": ["zone-x"]},
    # dearer than gpu-2x: only a claim that asks for its GPU by name gets it
    {"name": "gpu-1x-h100", "cpu": "16", "memory": "64Gi", "price": 5.0, "launchLatencySeconds": 0.5,
     "gpus": [{"model": "H100", "memory": "80Gi", "count": 1, "attributes": {"productName": "NVIDIA H100 80GB HBM3"}}]},
]}


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Serve]:
    """The server with the scheduler, the node simulator and the autoscaler inside."""
    catalog = tmp_path / "types.yaml"
    catalog.write_text(yaml.safe_dump(CATALOG))
    s = start_serve(tmp_path, extra=("--autoscaler", "--instance-types", str(catalog)), scheduler=True)
    try:
        s.wait_ready()
        yield s
    finally:
        s.stop()


async def test_serve_autoscaler_launches_a_gpu_node_whose_pods_run(served: Serve) -> None:
    async with Client.from_kubeconfig(served.kubeconfig) as client:
        async def pools_served() -> bool:
            try:
                await client.list(POOLS)
                return True
            except Exception:
                return False

        await wait_for(pools_served, timeout=20)
        await client.create(POOLS, nodepool("gpu", consolidate_after="Never"))
        await pending_pods(client, [pod("g", "1", gpus=2)])
        nodes: list[dict[str, Any]] = await wait_for(lambda: _items(client, NODES), timeout=20)
        node = nodes[0]
        labels = node["metadata"]["labels"]
        assert labels["node.kubernetes.io/instance-type"] == "gpu-2x"
        assert labels["topology.kubernetes.io/zone"] == "zone-x"
        # the NodeClaim's registration and the ResourceSlice follow the Node's creation
        async def registered() -> list[dict[str, Any]] | None:
            claims = await _items(client, CLAIMS)
            return claims if all(c.get("status", {}).get("nodeName") for c in claims) else None

        claims = await wait_for(registered, timeout=10)
        assert [c["status"]["nodeName"] for c in claims] == [node["metadata"]["name"]]
        slices = await wait_for(lambda: _items(client, SLICES), timeout=10)
        assert [len(s["spec"]["devices"]) for s in slices] == [2]
        async def running() -> bool:
            p = await client.get(f"{PODS}/g")
            return bool(p["status"].get("phase") == "Running" and p["spec"]["nodeName"] == node["metadata"]["name"])

        await wait_for(running, timeout=20)
        # its kubelet (the node simulator) posted what a kubelet posts: addresses, conditions, nodeInfo
        status = (await client.get(f"{NODES}/{node['metadata']['name']}"))["status"]
        assert [a["type"] for a in status["addresses"]] == ["InternalIP", "Hostname"]
        assert len(status["conditions"]) == 5 and status["nodeInfo"]["kubeletVersion"]

        async def metrics() -> str | None:
            text = httpx.get(f"{served.url}/metrics").text
            return text if 'controlplane_autoscaler_nodes{state="ready"} 1.0' in text else None

        text = await wait_for(metrics, timeout=10)
        assert 'controlplane_autoscaler_nodeclaims_created_total{nodepool="gpu"} 1.0' in text
        assert "controlplane_autoscaler_provisioning_seconds_count 1.0" in text
        assert 'controlplane_pod_startup_seconds_count{part="provisioning"} 1.0' in text
        assert 'controlplane_pod_startup_seconds_count{part="total"} 1.0' in text

    # the official client gets Karpenter's validation errors: a NodeClaim's spec is immutable, and
    # labels, requirement keys and taint keys follow Karpenter's patterns (a requirement's values are
    # its runtime validation's: its CRD's pattern for them checks nothing)
    api = config.new_client_from_config(config_file=str(served.kubeconfig))  # type: ignore[no-untyped-call]
    try:
        custom: Any = k8s.CustomObjectsApi(api)
        with pytest.raises(ApiException) as e:
            custom.patch_cluster_custom_object("karpenter.sh", "v1", "nodeclaims", claims[0]["metadata"]["name"],
                                               {"spec": {"expireAfter": "1h"}})
        assert e.value.status == 422 and "spec is immutable" in str(e.value.body)
        custom.patch_cluster_custom_object("karpenter.sh", "v1", "nodeclaims", claims[0]["metadata"]["name"],
                                           {"metadata": {"labels": {"team": "a"}}})  # its metadata is not
        bad = nodepool("bad", requirements=[{"key": "bad key", "operator": "In", "values": ["a b"]}],
                       taints=[{"key": "", "effect": "NoSchedule"}])
        bad["spec"]["template"]["metadata"] = {"labels": {"team": "has space"}}
        with pytest.raises(ApiException) as e:
            custom.create_cluster_custom_object("karpenter.sh", "v1", "nodepools", bad)
        assert e.value.status == 422 and e.value.body is not None
        body = json.loads(e.value.body)
        assert body["reason"] == "Invalid" and sorted(c["field"] for c in body["details"]["causes"]) == [
            "spec.template.metadata.labels.team", "spec.template.spec.requirements[0].key",
            "spec.template.spec.taints[0].key"]  # minLength only
    finally:
        api.close()


async def test_serve_autoscaler_launches_the_type_whose_gpu_a_claim_selects(served: Serve) -> None:
    """A claim selecting an H100 by its productName gets the node type whose devices match, as
    the scheduler's allocator judges them, not the cheapest type with any GPU of the driver (the
    pod would stay pending there); the scheduler allocates the H100 and the pod runs."""
    async with Client.from_kubeconfig(served.kubeconfig) as client:
        await wait_for(lambda: _served(client, POOLS), timeout=20)
        await client.create(POOLS, nodepool("gpu", consolidate_after="Never"))
        await client.create(CLASSES, DEVICE_CLASS)
        template: dict[str, Any] = copy.deepcopy(CLAIM_TEMPLATE)
        template["spec"]["spec"]["devices"]["requests"][0]["exactly"]["selectors"] = [{"cel": {"expression": (
            'device.attributes["gpu.nvidia.com"].productName == "NVIDIA H100 80GB HBM3"')}}]
        await client.create(TEMPLATES, template)
        await pending_pods(client, [pod("h", "1", dra=True)])

        async def running() -> dict[str, Any] | None:
            p = await client.get(f"{PODS}/h")
            return p if p["status"].get("phase") == "Running" else None

        node = (await wait_for(running, timeout=30))["spec"]["nodeName"]
        labels = (await client.get(f"{NODES}/{node}"))["metadata"]["labels"]
        assert labels["node.kubernetes.io/instance-type"] == "gpu-1x-h100"
        claims = await _items(client, resource_path("resource.k8s.io", "v1", "resourceclaims", "default"))
        assert [r["pool"] for c in claims for r in c["status"]["allocation"]["devices"]["results"]] == [node]
        assert [c["metadata"]["labels"]["node.kubernetes.io/instance-type"] for c in await _items(client, CLAIMS)] \
            == ["gpu-1x-h100"]


async def test_serve_autoscaler_launches_the_type_for_an_extended_resource_a_productname_class_backs(
        served: Serve) -> None:
    """KEP-5004 through a class that names no driver (its one selector reads a device's
    productName): the pod's ``example.com/h100`` is allocated by the scheduler through a claim
    of its own, and the autoscaler launches the type whose devices that claim gets (nothing
    was launched: the class's devices were counted against a driver named after it)."""
    async with Client.from_kubeconfig(served.kubeconfig) as client:
        await wait_for(lambda: _served(client, POOLS), timeout=20)
        await client.create(POOLS, nodepool("gpu", consolidate_after="Never"))
        await client.create(CLASSES, {
            "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "h100"},
            "spec": {"extendedResourceName": "example.com/h100", "selectors": [{"cel": {"expression": (
                'device.attributes["gpu.nvidia.com"].productName == "NVIDIA H100 80GB HBM3"')}}]}})
        body = pod("x", "1")
        body["spec"]["containers"][0]["resources"]["limits"] = {"example.com/h100": "1"}
        await pending_pods(client, [body])

        async def running() -> dict[str, Any] | None:
            p = await client.get(f"{PODS}/x")
            return p if p["status"].get("phase") == "Running" else None

        got = await wait_for(running, timeout=30)
        labels = (await client.get(f"{NODES}/{got['spec']['nodeName']}"))["metadata"]["labels"]
        assert labels["node.kubernetes.io/instance-type"] == "gpu-1x-h100"
        assert [c["resourceName"] for c in got["status"]["extendedResourceClaimStatus"]["requestMappings"]] == [
            "example.com/h100"]


async def _served(client: Client, path: str) -> bool:
    try:
        await client.list(path)
        return True
    except Exception:
        return False


async def _items(client: Client, path: str) -> list[dict[str, Any]]:
    return list((await client.list(path))["items"])


async def test_standalone_autoscaler_against_a_server(tmp_path: Path) -> None:
    s = start_serve(tmp_path, scheduler=True)
    proc: subprocess.Popen[bytes] | None = None
    try:
        s.wait_ready()
        with (tmp_path / "autoscaler.log").open("wb") as log:
            proc = subprocess.Popen([sys.executable, "-m", "controlplane", "autoscaler", "--kubeconfig",
                                     str(s.kubeconfig), "--latency-scale", "0.01", "--metrics-address", "127.0.0.1:0"],
                                    stdout=log, stderr=log, stdin=subprocess.DEVNULL)
        async with Client.from_kubeconfig(s.kubeconfig) as client:
            async def pools_served() -> bool:
                try:
                    await client.list(POOLS)
                    return True
                except Exception:
                    return False

            await wait_for(pools_served, timeout=30)
            await client.create(POOLS, nodepool("default", consolidate_after="Never"))
            await pending_pods(client, [pod("p", "1")])
            nodes: list[dict[str, Any]] = await wait_for(lambda: _items(client, NODES), timeout=30)
            # the built-in catalog's cheapest type that holds the pod
            assert nodes[0]["metadata"]["labels"]["node.kubernetes.io/instance-type"] == "cpu-small"

            # its own metrics, on its own port, as Karpenter's controller serves them (the server's have none)
            own = metrics_url(tmp_path / "autoscaler.log")

            async def metrics() -> str | None:  # the NodeClaims by state are counted every 2 s
                text = httpx.get(f"{own}/metrics").text
                return text if "controlplane_autoscaler_provisioning_seconds_count 1.0" in text and \
                    'controlplane_autoscaler_nodes{state="registered"} 1.0' in text else None  # no kubelet: not ready

            text = await wait_for(metrics, timeout=10)
            assert 'controlplane_autoscaler_nodeclaims_created_total{nodepool="default"} 1.0' in text
            assert re.search(r"^controlplane_autoscaler_scheduling_simulation_seconds_count [1-9]", text, re.M)
            assert "apiserver_request_total" not in text and "controlplane_nodes_image_pull" not in text
            assert httpx.get(f"{own}/readyz").text == "ok" and httpx.get(f"{own}/nodepools").status_code == 404
            assert "controlplane_autoscaler_nodeclaims_created_total{" not in httpx.get(f"{s.url}/metrics").text
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=10)
        s.stop()


async def test_a_gpu_node_runs_its_dra_pod_under_node_rbac(tmp_path: Path) -> None:
    """``--authorization-mode Node,RBAC``: the autoscaler's GPU node publishes its ResourceSlice,
    its kubelet (the node simulator, as ``system:node:<node>``) runs the pod whose claim the
    scheduler allocated from it, and nobody is refused anything on the way; the node's kubelet
    may read the pod's generated claim (the Node authorizer's graph, through
    ``status.resourceClaimStatuses``) and its node's slice, another node's kubelet neither."""
    from tests.e2e.test_identities import POLICY, TOKENS, audited

    catalog = tmp_path / "types.yaml"
    catalog.write_text(yaml.safe_dump(CATALOG))
    (tmp_path / "tokens.csv").write_text(TOKENS)
    (tmp_path / "policy.yaml").write_text(POLICY)
    s = start_serve(tmp_path, scheduler=True, extra=(
        "--autoscaler", "--instance-types", str(catalog), "--token-auth-file", str(tmp_path / "tokens.csv"),
        "--authorization-mode", "Node,RBAC", "--audit-policy-file", str(tmp_path / "policy.yaml"),
        "--audit-log-path", str(tmp_path / "audit.log")))
    try:
        s.wait_ready()
        async with Client.from_kubeconfig(s.kubeconfig) as client:
            await wait_for(lambda: _served(client, POOLS), timeout=20)
            await client.create(POOLS, nodepool("gpu", consolidate_after="Never"))
            await client.create(CLASSES, DEVICE_CLASS)
            await client.create(TEMPLATES, CLAIM_TEMPLATE)
            await pending_pods(client, [pod("d", "1", dra=True)])

            async def running() -> dict[str, Any] | None:
                p = await client.get(f"{PODS}/d")
                return p if p["status"].get("phase") == "Running" else None

            ran = await wait_for(running, timeout=40)
            node = ran["spec"]["nodeName"]
            claim = ran["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
            slices = [x["metadata"]["name"] for x in await _items(client, SLICES) if x["spec"]["nodeName"] == node]
            assert slices

        def as_kubelet(name: str, path: str) -> int:
            return httpx.get(f"{s.url}{path}", verify=False, timeout=10, headers={
                "authorization": "Bearer admintoken", "impersonate-user": f"system:node:{name}",
                "impersonate-group": "system:nodes"}).status_code

        claim_path = f"/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/{claim}"
        slice_path = f"/apis/resource.k8s.io/v1/resourceslices/{slices[0]}"
        assert as_kubelet(node, claim_path) == 200 and as_kubelet(node, slice_path) == 200
        assert as_kubelet("elsewhere", claim_path) == 403 and as_kubelet("elsewhere", slice_path) == 403
        events = audited(s)
        refused = [(e["user"]["username"], e["verb"], e.get("objectRef", {}).get("resource"))
                   for e in events if e.get("responseStatus", {}).get("code") in (401, 403)]
        assert not refused, refused
        written = {f"{e['objectRef']['resource']}/{e['objectRef'].get('subresource', '')}".rstrip("/")
                   for e in events
                   if e.get("user", {}).get("username") == f"system:node:{node}" and e["stage"] == "ResponseComplete"}
        assert {"nodes/status", "leases", "csinodes", "pods/status", "events"} <= written, written
    finally:
        s.stop()
