"""A node's Events as kubectl shows them, against ``controlplane serve --nodes 1`` with its
controllers: the simulated kubelet's (``nodes/events.py``) and the node lifecycle controller's
(``controllers/nodelifecycle.py``), over a real socket."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.test_kubectl import kubectl
from tests.e2e.test_kubectl_day2 import eventually
from tests.test_cli import Serve, running, start_serve

NODE = "sim-node-0"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    with running(start_serve(tmp_path_factory.mktemp("nodeevents"), scheduler=True, extra=("--nodes", "1"))) as s:
        yield s


def _events_section(out: str) -> str:
    return out[out.index("\nEvents:"):]


def test_kubectl_describe_node_shows_the_kubelets_and_the_node_controllers_events(served: Serve) -> None:
    def described() -> str:
        out = _events_section(kubectl(served, "describe", "node", NODE))
        return out if "NodeReady" in out and "RegisteredNode" in out else ""

    events = eventually(described)
    rows = {line.split()[1]: line for line in events.splitlines() if line.strip().startswith("Normal")}
    for reason, source, message in (
            ("Starting", "kubelet", "Starting kubelet."),
            ("NodeHasSufficientMemory", "kubelet", f"Node {NODE} status is now: NodeHasSufficientMemory"),
            ("NodeHasNoDiskPressure", "kubelet", f"Node {NODE} status is now: NodeHasNoDiskPressure"),
            ("NodeHasSufficientPID", "kubelet", f"Node {NODE} status is now: NodeHasSufficientPID"),
            ("NodeAllocatableEnforced", "kubelet", "Updated Node Allocatable limit across pods"),
            ("NodeReady", "kubelet", f"Node {NODE} status is now: NodeReady"),
            ("RegisteredNode", "node-controller", f"Node {NODE} event: Registered Node {NODE} in Controller")):
        assert reason in rows, events
        assert f" {source} " in rows[reason] and rows[reason].rstrip().endswith(message), rows[reason]


def test_kubectl_events_for_the_node_and_a_cordon_seen_by_its_kubelet(served: Serve) -> None:
    kubectl(served, "cordon", NODE)
    try:
        def listed() -> str:
            out = kubectl(served, "events", "--for", f"node/{NODE}")
            return out if "NodeNotSchedulable" in out else ""

        out = eventually(listed)
        assert f"Node {NODE} status is now: NodeNotSchedulable" in out
        for reason in ("Starting", "NodeReady", "RegisteredNode"):
            assert reason in out, out
        assert all(f"Node/{NODE}" in line for line in out.splitlines()[1:] if line.strip()), out
    finally:
        kubectl(served, "uncordon", NODE)
    eventually(lambda: "NodeSchedulable " in kubectl(served, "events", "--for", f"node/{NODE}"))


def test_node_events_name_no_namespace_in_their_reference(served: Serve) -> None:
    # they carried `involvedObject.namespace: ""`, which kube-apiserver never writes (every field of an
    # ObjectReference is omitempty); the events themselves are in default, as client-go records them,
    # and `involvedObject.namespace=` (kubectl describe node's selector) still finds them
    import httpx

    from tests.e2e.test_kubernetes_client import bearer

    selector = f"involvedObject.kind=Node,involvedObject.name={NODE},involvedObject.namespace="

    def listed() -> list[dict[str, Any]]:
        with httpx.Client(base_url=served.url, headers=bearer(served), timeout=10) as http:
            r = http.get("/api/v1/events", params={"fieldSelector": selector})
        assert r.status_code == 200, r.text
        items: list[dict[str, Any]] = r.json()["items"]
        reasons = {e["reason"] for e in items}
        return items if {"NodeReady", "RegisteredNode"} <= reasons else []

    items = eventually(listed)
    for e in items:
        assert "namespace" not in e["involvedObject"] and e["metadata"]["namespace"] == "default", e
