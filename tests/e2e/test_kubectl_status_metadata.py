"""``kubectl ... --subresource=status`` over a real socket: the metadata a status write
changes is what the type's status strategy lets it change, as upstream's
(``registry/statuswrites.py``): a pod's labels do, a Deployment's do not, its annotations
do; an apply through ``/status`` owns what it changed."""

from __future__ import annotations

import json

from tests.e2e.test_kubectl import kubectl
from tests.test_cli import Serve

POD = """
apiVersion: v1
kind: Pod
metadata: {name: sm, labels: {app: sm}}
spec:
  containers: [{name: c, image: "nginx:1.27"}]
"""

DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: sm, labels: {app: sm}}
spec:
  replicas: 0
  selector: {matchLabels: {app: sm}}
  template:
    metadata: {labels: {app: sm}}
    spec:
      containers: [{name: c, image: "nginx:1.27"}]
"""

STATUS_APPLY = """
apiVersion: v1
kind: Pod
metadata: {name: sm, labels: {applied: "yes"}}
"""


def _get(served: Serve, *args: str) -> dict[str, object]:
    got: dict[str, object] = json.loads(kubectl(served, "get", *args, "-o", "json"))
    return got


def test_kubectl_status_writes_change_the_metadata_upstream_lets_them(served: Serve) -> None:
    kubectl(served, "create", "-f", "-", stdin=POD)
    kubectl(served, "create", "-f", "-", stdin=DEPLOYMENT)
    change = '{"metadata": {"labels": {"added": "yes"}, "annotations": {"note": "x"}}}'
    kubectl(served, "patch", "pod", "sm", "--subresource=status", "--type=merge", "-p", change)
    kubectl(served, "patch", "deployment", "sm", "--subresource=status", "--type=merge", "-p", change)
    pod = _get(served, "pod", "sm")["metadata"]
    deployment = _get(served, "deployment", "sm")["metadata"]
    assert isinstance(pod, dict) and isinstance(deployment, dict)
    assert (pod["labels"], pod["annotations"]) == ({"app": "sm", "added": "yes"}, {"note": "x"})
    assert deployment["labels"] == {"app": "sm"} and deployment["annotations"]["note"] == "x"

    kubectl(served, "apply", "--server-side", "--subresource=status", "--field-manager=status-applier", "-f", "-",
            stdin=STATUS_APPLY)
    pod = _get(served, "pod", "sm", "--show-managed-fields")["metadata"]
    assert isinstance(pod, dict)
    assert pod["labels"] == {"app": "sm", "added": "yes", "applied": "yes"}
    entries = [e for e in pod["managedFields"] if e["manager"] == "status-applier"]
    assert [(e["operation"], e.get("subresource"), e["fieldsV1"]) for e in entries] == [
        ("Apply", "status", {"f:metadata": {"f:labels": {"f:applied": {}}}})]
