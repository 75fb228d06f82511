"""What upstream's ``test/cmd`` scripts of workloads, batch, RBAC, CRDs, storage, events,
certificates, discovery and scaling run with kubectl and found answered differently, with the
real kubectl against one ``controlplane serve`` over a socket: its controllers and scheduler on,
no nodes, and kubeadm's ``--authorization-mode Node,RBAC``, so that each controller writes as its
own service account, as kube-controller-manager's do."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from tests.e2e.test_kubectl import kubectl
from tests.test_cli import Serve, running, start_serve


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    with running(start_serve(tmp_path_factory.mktemp("testcmd2"), scheduler=True,
                             extra=("--authorization-mode", "Node,RBAC"))) as s:
        yield s


def until(check: object, timeout: float = 20) -> None:
    """Wait for ``check()`` to be true."""
    assert callable(check)
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.2)


def test_an_orphaning_delete_of_a_workload_completes_under_rbac(served: Serve) -> None:
    """``kubectl delete --cascade=orphan`` waits for the owner to go, which it does once the
    garbage collector has let go of its dependents and taken the ``orphan`` finalizer off: the
    collector's role may patch any owner, the ReplicaSet, DaemonSet and StatefulSet controllers'
    roles may not (apps.sh's ``delete deployments,rs,pods --all --cascade=orphan``)."""
    ns = "orphaning"
    kubectl(served, "create", "namespace", ns)
    kubectl(served, "-n", ns, "create", "deployment", "web", "--image=registry.k8s.io/pause:3.10", "--replicas=2")
    kubectl(served, "-n", ns, "create", "-f", "-", stdin=STATEFULSET)
    until(lambda: len(kubectl(served, "-n", ns, "get", "pods", "-o", "name").split()) == 3)
    rs = kubectl(served, "-n", ns, "get", "rs", "-o", "name").strip()
    kubectl(served, "-n", ns, "delete", "deployment", "web", "--cascade=orphan", "--timeout=20s")
    kubectl(served, "-n", ns, "delete", rs, "--cascade=orphan", "--timeout=20s")
    kubectl(served, "-n", ns, "delete", "statefulset", "db", "--cascade=orphan", "--timeout=20s")
    pods = kubectl(served, "-n", ns, "get", "pods", "-o",
                   "jsonpath={range .items[*]}{.metadata.name}={.metadata.ownerReferences}{\"\\n\"}{end}")
    kept = dict(line.split("=", 1) for line in pods.split())
    assert len(kept) == 3 and "db-0" in kept
    assert set(kept.values()) == {""}, kept  # let go, none owned any more
    revisions = kubectl(served, "-n", ns, "get", "controllerrevisions", "-o",
                        "jsonpath={.items[*].metadata.ownerReferences}")
    assert revisions == ""


STATEFULSET = """
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  serviceName: db
  replicas: 1
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec:
      containers: [{name: db, image: registry.k8s.io/pause:3.10}]
"""
