"""Over a real socket: ``controlplane serve --nodes 3`` and ``controlplane nodes`` against it."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from controlplane.client import ApiError, Client, resource_path
from controlplane.nodes.config import FAILURE_ANNOTATION
from tests.e2e.test_kubectl import kubectl
from tests.nodes.conftest import NODES, PODS, eventually, pod
from tests.test_cli import start_serve

LEASES = resource_path("coordination.k8s.io", "v1", "leases", "kube-node-lease")


async def _ready(client: Client, node: str) -> bool:
    try:
        n = await client.get(f"{NODES}/{node}")
    except ApiError:
        return False
    return any(c["type"] == "Ready" and c["status"] == "True" for c in n.get("status", {}).get("conditions", []))


async def test_serve_with_nodes_runs_pods_and_renews_leases(tmp_path: Path) -> None:
    serve = start_serve(tmp_path, extra=("--nodes", "3"))
    cli: subprocess.Popen[bytes] | None = None
    try:
        serve.wait_ready()
        async with Client.from_kubeconfig(serve.kubeconfig) as client:
            for i in range(3):
                await eventually(lambda i=i: _ready(client, f"sim-node-{i}"), timeout=20)  # type: ignore[misc]
            first = await eventually(lambda: _lease(client, "sim-node-1"), timeout=10)
            web = pod("web", "sim-node-1")
            web["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "250m", "memory": "64Mi"},
                                                         "limits": {"memory": "128Mi"}}
            web["spec"]["containers"].append({"name": "log", "image": "registry.k8s.io/pause:3.10",
                                              "resources": {"requests": {"cpu": "50m"}}})
            await client.create(PODS, web)

            async def running() -> bool:
                return bool((await client.get(f"{PODS}/web"))["status"].get("phase") == "Running")

            await eventually(running, timeout=10)
            got = await client.get(f"{PODS}/web")
            assert got["status"]["podIP"] and got["status"]["containerStatuses"][0]["ready"] is True
            # what the simulated 1.37 kubelet allocated: each container's requests, the pod's aggregate,
            # a memory limit at pod level only were every container limited (allocated.py)
            assert [cs.get("allocatedResources") for cs in got["status"]["containerStatuses"]] == \
                [{"cpu": "250m", "memory": "64Mi"}, {"cpu": "50m"}]
            assert got["status"]["allocatedResources"] == {"cpu": "300m", "memory": "64Mi"}
            assert got["status"]["resources"] == {"requests": {"cpu": "300m", "memory": "64Mi"}}

            async def described() -> list[str]:  # the simulated kubelet's events, as kubectl shows them
                out = kubectl(serve, "describe", "pod", "web")
                lines = [" ".join(line.split()) for line in out.split("Events:", 1)[-1].splitlines()]
                return lines if any("Started" in line for line in lines) else []

            events = await eventually(described, timeout=10)
            # (a kubectl of 1.35 or later puts the container's field path before the message)
            for reason, message in (("Pulled", 'Container image "registry.k8s.io/pause:3.10" already present on '
                                               "machine and can be accessed by the pod"),
                                    ("Created", "Container created"), ("Started", "Container started")):
                shown = rf"Normal {reason} \S+ kubelet (spec\.containers\{{c\}}: )?{re.escape(message)}"
                assert any(re.fullmatch(shown, line) for line in events), (reason, events)

            async def renewed() -> bool:
                return bool(await _lease(client, "sim-node-1") != first)

            await eventually(renewed, timeout=15, interval=0.5)  # the default 10 s interval

            # the standalone simulator, against the same server
            with (tmp_path / "nodes.err").open("wb") as err:
                cli = subprocess.Popen(
                    [sys.executable, "-m", "controlplane", "nodes", "--kubeconfig", str(serve.kubeconfig),
                     "--count", "2", "--name-prefix", "cli-node-", "--renew-interval", "1"],
                    stdout=subprocess.DEVNULL, stderr=err, stdin=subprocess.DEVNULL)
            await eventually(lambda: _ready(client, "cli-node-1"), timeout=20)
            fail = subprocess.run(
                [sys.executable, "-m", "controlplane", "nodes", "--kubeconfig", str(serve.kubeconfig),
                 "--fail", "cli-node-1", "--mode", "not-ready"], capture_output=True, timeout=30)
            assert fail.returncode == 0, fail.stderr
            node = await client.get(f"{NODES}/cli-node-1")
            assert node["metadata"]["annotations"][FAILURE_ANNOTATION] == "not-ready"

            async def not_ready() -> bool:
                n = await client.get(f"{NODES}/cli-node-1")
                return any(c["type"] == "Ready" and c["status"] == "False" for c in n["status"]["conditions"])

            await eventually(not_ready, timeout=10)
            bad = subprocess.run(
                [sys.executable, "-m", "controlplane", "nodes", "--kubeconfig", str(serve.kubeconfig),
                 "--fail", "no-such-node"], capture_output=True, timeout=30)
            assert bad.returncode == 1 and b"not found" in bad.stderr.lower()
    finally:
        if cli is not None:
            cli.terminate()
            cli.wait(10)
        serve.proc.terminate()
        serve.proc.wait(20)


async def _lease(client: Client, node: str) -> str | None:
    try:
        got: str | None = (await client.get(f"{LEASES}/{node}"))["spec"]["renewTime"]
        return got
    except ApiError:
        return None
