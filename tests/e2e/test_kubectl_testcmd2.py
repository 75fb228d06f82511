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
from tests.e2e.test_kubectl_sweep import failing
from tests.test_cli import Serve, running, start_serve


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    with running(start_serve(tmp_path_factory.mktemp("testcmd2"), scheduler=True,
                             extra=("--authorization-mode", "Node,RBAC",
                                    "--volume-provisioners", "example.com/simulated"))) as s:
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
    collector's role may patch any owner, the ReplicaSet, ReplicationController, DaemonSet and
    StatefulSet controllers' roles may not (apps.sh's ``delete deployments,rs,pods --all
    --cascade=orphan``)."""
    ns = "orphaning"
    kubectl(served, "create", "namespace", ns)
    kubectl(served, "-n", ns, "create", "deployment", "web", "--image=registry.k8s.io/pause:3.10", "--replicas=2")
    kubectl(served, "-n", ns, "create", "-f", "-", stdin=STATEFULSET)
    kubectl(served, "-n", ns, "create", "-f", "-", stdin="""
apiVersion: v1
kind: ReplicationController
metadata: {name: legacy}
spec:
  replicas: 1
  template:
    metadata: {labels: {app: legacy}}
    spec: {containers: [{name: c, image: registry.k8s.io/pause:3.10}]}
""")
    until(lambda: len(kubectl(served, "-n", ns, "get", "pods", "-o", "name").split()) == 4)
    rs = kubectl(served, "-n", ns, "get", "rs", "-o", "name").strip()
    kubectl(served, "-n", ns, "delete", "deployment", "web", "--cascade=orphan", "--timeout=20s")
    kubectl(served, "-n", ns, "delete", rs, "--cascade=orphan", "--timeout=20s")
    kubectl(served, "-n", ns, "delete", "statefulset", "db", "--cascade=orphan", "--timeout=20s")
    kubectl(served, "-n", ns, "delete", "rc", "legacy", "--cascade=orphan", "--timeout=20s")
    pods = kubectl(served, "-n", ns, "get", "pods", "-o",
                   "jsonpath={range .items[*]}{.metadata.name}={.metadata.ownerReferences}{\"\\n\"}{end}")
    kept = dict(line.split("=", 1) for line in pods.split())
    assert len(kept) == 4 and "db-0" in kept
    assert set(kept.values()) == {""}, kept  # let go, none owned any more
    revisions = kubectl(served, "-n", ns, "get", "controllerrevisions", "-o",
                        "jsonpath={.items[*].metadata.ownerReferences}")
    assert revisions == ""


def test_a_list_of_custom_resources_that_keep_unknown_fields_applies(served: Serve) -> None:
    """kubectl validates a ``kind: List`` against ``/openapi/v2``, where a custom resource
    whose schema keeps unknown fields is an object naming no field, so the fields beside
    ``apiVersion``, ``kind`` and ``metadata`` pass (crd.sh's ``multi-crd-list.yaml``); one
    with a closed schema still has its fields checked."""
    for plural, kind, schema in (("gizmos", "Gizmo", "{type: object, x-kubernetes-preserve-unknown-fields: true}"),
                                 ("gauges", "Gauge", "{type: object, properties: {size: {type: integer}}}")):
        kubectl(served, "apply", "-f", "-", stdin=f"""
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {{name: {plural}.testcmd.example.com}}
spec:
  group: testcmd.example.com
  scope: Namespaced
  names: {{plural: {plural}, kind: {kind}}}
  versions:
  - {{name: v1, served: true, storage: true, schema: {{openAPIV3Schema: {schema}}}}}
""")
        kubectl(served, "wait", f"crd/{plural}.testcmd.example.com", "--for=condition=Established")
    items = """
apiVersion: v1
kind: List
items:
- {apiVersion: testcmd.example.com/v1, kind: Gizmo, metadata: {name: in-list}, someField: %s,
   nestedField: {someSubfield: x}}
"""
    until(lambda: "gizmos" in kubectl(served, "api-resources", "--api-group=testcmd.example.com"))
    out = kubectl(served, "apply", "-f", "-", stdin=items % "field1")
    assert out.strip() == "gizmo.testcmd.example.com/in-list created"
    kubectl(served, "apply", "-f", "-", stdin=items % "modified")
    assert kubectl(served, "get", "gizmo/in-list", "-o", "jsonpath={.someField}") == "modified"
    err = failing(served, "apply", "-f", "-", stdin="""
apiVersion: v1
kind: List
items:
- {apiVersion: testcmd.example.com/v1, kind: Gauge, metadata: {name: in-list}, size: 1, colour: red}
""")
    assert 'unknown field "colour" in com.example.testcmd.v1.Gauge' in err


def test_volumes_claims_and_endpoints_are_written_as_the_roles_allow(served: Serve) -> None:
    """The persistent volume controller binds and releases by update (its role and the
    protection controllers' grant no patch of claims or volumes), so a volume becomes
    Available and ``kubectl delete pv`` completes (storage.sh), a claim is bound, and a
    StatefulSet's retention policy takes its claims away with it, the collector's part reading
    the set as the collector; a deleted Service's Endpoints go as the endpoints controller's."""
    ns = "volumes"
    kubectl(served, "create", "namespace", ns)
    kubectl(served, "create", "-f", "-", stdin="""
{"kind": "PersistentVolume", "apiVersion": "v1", "metadata": {"name": "pv0001"},
 "spec": {"capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/tmp/data01"}}}
""")
    until(lambda: kubectl(served, "get", "pv", "pv0001", "-o", "jsonpath={.status.phase}") == "Available")
    kubectl(served, "delete", "pv", "pv0001", "--timeout=20s")
    kubectl(served, "-n", ns, "apply", "-f", "-", stdin="""
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: testcmd2-immediate}
provisioner: example.com/simulated
volumeBindingMode: Immediate
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: plain}
spec: {storageClassName: testcmd2-immediate, accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
""")
    kubectl(served, "-n", ns, "apply", "-f", "-", stdin=STATEFULSET.replace("  replicas: 1\n", """  replicas: 1
  persistentVolumeClaimRetentionPolicy: {whenDeleted: Delete}
  volumeClaimTemplates:
  - metadata: {name: data}
    spec: {storageClassName: testcmd2-immediate, accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
"""))
    phases = "jsonpath={range .items[*]}{.metadata.name}={.status.phase} {end}"
    until(lambda: kubectl(served, "-n", ns, "get", "pvc", "-o", phases).split() == ["data-db-0=Bound", "plain=Bound"])
    kubectl(served, "-n", ns, "delete", "pvc", "plain", "--timeout=20s")
    kubectl(served, "-n", ns, "delete", "statefulset", "db", "--timeout=20s")
    until(lambda: kubectl(served, "-n", ns, "get", "pvc", "-o", "name") == "")
    kubectl(served, "-n", ns, "create", "service", "clusterip", "web", "--tcp=80")
    until(lambda: "web" in kubectl(served, "-n", ns, "get", "endpoints", "-o", "name"))
    kubectl(served, "-n", ns, "delete", "service", "web")
    until(lambda: kubectl(served, "-n", ns, "get", "endpoints,endpointslices", "-o", "name") == "")


def test_a_cronjob_whose_schedule_never_comes_is_warned_about(served: Serve) -> None:
    """``59 23 31 2 *`` parses but no date has it: upstream's cron library finds no next time
    and its controller records ``InvalidSchedule`` on each sync, which ``kubectl events``
    shows (events.sh); the CronJob creates no Job."""
    ns = "never"
    kubectl(served, "create", "namespace", ns)
    kubectl(served, "-n", ns, "create", "cronjob", "pi", "--schedule=59 23 31 2 *",
            "--image=registry.k8s.io/perl", "--", "perl", "-Mbignum=bpi", "-wle", "print bpi(20)")
    until(lambda: "InvalidSchedule" in kubectl(served, "-n", ns, "events", "--for=Cronjob/pi"))
    line = kubectl(served, "-n", ns, "events", "--for=Cronjob/pi", "--types=Warning", "--no-headers").strip()
    assert line.split()[1:4] == ["Warning", "InvalidSchedule", "CronJob/pi"], line
    assert line.endswith("invalid schedule: 59 23 31 2 * : time difference between two schedules is less than "
                         "1 second")
    assert kubectl(served, "-n", ns, "events", "--for=Cronjob/pi", "--types=Normal") == ""
    assert kubectl(served, "-n", ns, "get", "jobs", "-o", "name") == ""


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
