"""StatefulSets' claims with kubectl against ``controlplane serve --nodes 2
--volume-provisioners rancher.io/local-path``: a class whose provisioner the simulated one
stands in for, and one whose provisioner nothing runs until its CSIDriver registers it, as
``kubectl describe pvc`` shows them on a cluster (controllers/volumes.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.e2e.test_kubectl import kubectl
from tests.e2e.test_kubectl_day2 import eventually
from tests.test_cli import Serve, running, start_serve


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    with running(start_serve(tmp_path_factory.mktemp("volumes"), scheduler=True,
                             extra=("--nodes", "2", "--volume-provisioners", "rancher.io/local-path"))) as s:
        yield s


def _set(name: str, storage_class: str) -> str:
    return f"""
apiVersion: apps/v1
kind: StatefulSet
metadata: {{name: {name}}}
spec:
  serviceName: {name}
  replicas: 1
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:
      terminationGracePeriodSeconds: 0
      containers:
      - name: c
        image: "redis:7"
        volumeMounts: [{{name: data, mountPath: /data}}]
  volumeClaimTemplates:
  - metadata: {{name: data}}
    spec:
      storageClassName: {storage_class}
      accessModes: [ReadWriteOnce]
      resources: {{requests: {{storage: 1Gi}}}}
"""


MANIFEST = """
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: local-path}
provisioner: rancher.io/local-path
volumeBindingMode: WaitForFirstConsumer
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: slow}
provisioner: slow.csi.example.com
---""" + _set("db", "local-path") + "---" + _set("cache", "slow")

WAITING = ("Waiting for a volume to be created either by the external provisioner '{}' or manually by the "
           "system administrator. If volume creation is delayed, please verify that the provisioner is "
           "running and correctly registered.")


def test_claims_are_provisioned_only_by_a_provisioner_that_runs(served: Serve) -> None:
    kubectl(served, "apply", "-f", "-", stdin=MANIFEST)
    # rancher.io/local-path runs (--volume-provisioners): the claim is provisioned on its pod's node
    kubectl(served, "rollout", "status", "statefulset/db", "--timeout=60s")
    assert kubectl(served, "get", "pvc", "data-db-0", "-o", "jsonpath={.status.phase}") == "Bound"
    described = kubectl(served, "describe", "pvc", "data-db-0")
    assert "volume.kubernetes.io/storage-provisioner: rancher.io/local-path" in described
    assert WAITING.format("rancher.io/local-path") in " ".join(described.split())
    node = kubectl(served, "get", "pod", "db-0", "-o", "jsonpath={.spec.nodeName}")
    assert kubectl(served, "get", "pvc", "data-db-0",
                   "-o", r"jsonpath={.metadata.annotations.volume\.kubernetes\.io/selected-node}") == node

    # nothing runs slow.csi.example.com: the claim, and the pod that mounts it, wait
    def handed() -> bool:
        described = " ".join(kubectl(served, "describe", "pvc", "data-cache-0").split())
        return "ExternalProvisioning" in described and WAITING.format("slow.csi.example.com") in described

    eventually(handed)
    assert kubectl(served, "get", "pvc", "data-cache-0", "-o", "jsonpath={.status.phase}") == "Pending"
    assert kubectl(served, "get", "pod", "cache-0", "-o", "jsonpath={.status.phase}") == "Pending"
    assert "data-cache-0" not in kubectl(served, "get", "pv")
    # its driver installed: the claim is provisioned and the pod starts
    kubectl(served, "apply", "-f", "-", stdin="""
apiVersion: storage.k8s.io/v1
kind: CSIDriver
metadata: {name: slow.csi.example.com}
spec: {attachRequired: false}
""")
    kubectl(served, "wait", "--for=jsonpath={.status.phase}=Bound", "pvc/data-cache-0", "--timeout=60s")
    kubectl(served, "rollout", "status", "statefulset/cache", "--timeout=60s")
    assert "Successfully provisioned volume pvc-" in kubectl(served, "describe", "pvc", "data-cache-0")


def test_a_pod_whose_first_consumer_claim_nothing_provisions_stays_unbound(served: Serve) -> None:
    """The scheduler's PreBind names the node it chose on the claim and waits for the claim to
    be bound before binding the pod (upstream's BindPodVolumes): nothing runs the class's
    provisioner, so the claim is handed to it on that node and the pod stays Pending, on no
    node, rather than running without its volume."""
    kubectl(served, "apply", "-f", "-", stdin="""
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: lazy-nothing}
provisioner: nothing.csi.example.com
volumeBindingMode: WaitForFirstConsumer
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: lazy}
spec: {storageClassName: lazy-nothing, accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
---
apiVersion: v1
kind: Pod
metadata: {name: lazy-user}
spec:
  containers: [{name: c, image: busybox, command: [sleep, "3600"]}]
  volumes: [{name: v, persistentVolumeClaim: {claimName: lazy}}]
""")

    def handed() -> bool:
        described = " ".join(kubectl(served, "describe", "pvc", "lazy").split())
        return "volume.kubernetes.io/selected-node: sim-node-" in described \
            and WAITING.format("nothing.csi.example.com") in described

    eventually(handed)
    assert kubectl(served, "get", "pvc", "lazy", "-o", "jsonpath={.status.phase}") == "Pending"
    assert kubectl(served, "get", "pod", "lazy-user", "-o", "jsonpath={.status.phase}/{.spec.nodeName}") == "Pending/"
