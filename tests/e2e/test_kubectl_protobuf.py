"""kubectl's commands that send protobuf bodies (its generators, ``auth can-i``, ``drain``'s
evictions), and the rollouts of what they create, with the real kubectl against
``controlplane serve`` over a socket."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.test_kubectl import KUBECTL, kubectl
from tests.test_cli import Serve, running, start_serve


def test_generators_create_what_they_say(served: Serve) -> None:
    assert "namespace/pb created" in kubectl(served, "create", "namespace", "pb")
    kubectl(served, "-n", "pb", "create", "configmap", "cm", "--from-literal=a=b", "--from-literal=empty=")
    kubectl(served, "-n", "pb", "create", "secret", "generic", "s", "--from-literal=k=v")
    kubectl(served, "-n", "pb", "create", "deployment", "web", "--image=nginx:1.27", "--replicas=0", "--port=8080")
    kubectl(served, "-n", "pb", "create", "service", "clusterip", "svc", "--tcp=80:8080")
    kubectl(served, "-n", "pb", "create", "job", "j", "--image=busybox", "--", "sleep", "1")
    kubectl(served, "-n", "pb", "create", "role", "r", "--verb=get,list", "--resource=pods")
    kubectl(served, "-n", "pb", "create", "rolebinding", "rb", "--role=r", "--user=bob")
    kubectl(served, "-n", "pb", "create", "serviceaccount", "sa")
    kubectl(served, "create", "priorityclass", "pb-high", "--value=1000", "--description=d")

    def get(*what: str) -> dict[str, Any]:
        got: dict[str, Any] = json.loads(kubectl(served, "-n", "pb", "get", *what, "-o", "json"))
        return got

    assert get("configmap", "cm")["data"] == {"a": "b", "empty": ""}
    assert get("secret", "s")["data"] == {"k": "dg=="}
    deployment = get("deployment", "web")
    assert deployment["spec"]["replicas"] == 0  # a pointer's zero is kept, not defaulted to 1
    assert deployment["spec"]["selector"] == {"matchLabels": {"app": "web"}}
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert (container["image"], container["ports"]) == ("nginx:1.27", [{"containerPort": 8080, "protocol": "TCP"}])
    assert container["imagePullPolicy"] == "IfNotPresent"  # the plain empty string was unset: defaulted
    assert deployment["spec"]["strategy"]["rollingUpdate"] == {"maxSurge": "25%", "maxUnavailable": "25%"}
    port = get("service", "svc")["spec"]["ports"][0]
    assert (port["port"], port["targetPort"], port["protocol"]) == (80, 8080, "TCP")  # IntOrString as an int
    job = get("job", "j")["spec"]["template"]["spec"]
    assert job["containers"][0]["command"] == ["sleep", "1"] and job["restartPolicy"] == "Never"
    assert get("role", "r")["rules"] == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]
    binding = get("rolebinding", "rb")
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"}
    assert binding["subjects"] == [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "bob"}]
    priority = json.loads(kubectl(served, "get", "priorityclass", "pb-high", "-o", "json"))
    assert (priority["value"], priority["description"]) == (1000, "d")


def test_auth_can_i_is_answered(served: Serve) -> None:
    assert kubectl(served, "auth", "can-i", "create", "pods").strip() == "yes"


@pytest.fixture(scope="module")
def with_nodes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    with running(start_serve(tmp_path_factory.mktemp("drain"), scheduler=True, extra=("--nodes", "2"))) as s:
        yield s


def test_drain_evicts_the_pods_of_a_node(with_nodes: Serve) -> None:
    for name in ("d0", "d1"):
        kubectl(with_nodes, "run", name, "--image=nginx:1.27", "--overrides",
                '{"spec": {"nodeSelector": {"kubernetes.io/hostname": "sim-node-1"}}}')
    deadline = time.monotonic() + 30
    while kubectl(with_nodes, "get", "pods", "--field-selector", "spec.nodeName=sim-node-1",
                  "-o", "name").split() != ["pod/d0", "pod/d1"]:
        assert time.monotonic() < deadline, "the pods were not bound"
        time.sleep(0.2)
    out = kubectl(with_nodes, "drain", "sim-node-1", "--force", "--grace-period=1", "--timeout=30s")
    assert "pod/d0 evicted" in out and "pod/d1 evicted" in out and "node/sim-node-1 drained" in out
    assert kubectl(with_nodes, "get", "node", "sim-node-1", "-o", "jsonpath={.spec.unschedulable}") == "true"


def test_a_deployment_rolls_out_rolls_back_and_is_collected(with_nodes: Serve) -> None:
    def rolled_out() -> bool:
        return "successfully rolled out" in kubectl(with_nodes, "rollout", "status", "deployment/roll",
                                                    "--timeout=60s")

    def image() -> str:
        return kubectl(with_nodes, "get", "deployment", "roll", "-o",
                       "jsonpath={.spec.template.spec.containers[0].image}")

    kubectl(with_nodes, "create", "deployment", "roll", "--image=nginx:1.27", "--replicas=0")
    assert rolled_out()
    # revision 2: pods that go at once (kubectl's 30 s grace period would hold the deletes below)
    kubectl(with_nodes, "patch", "deployment", "roll", "-p",
            '{"spec": {"replicas": 4, "template": {"spec": {"terminationGracePeriodSeconds": 0}}}}')
    assert rolled_out()
    kubectl(with_nodes, "set", "image", "deployment/roll", "nginx=nginx:1.28")  # revision 3
    assert rolled_out() and image() == "nginx:1.28"
    pods = kubectl(with_nodes, "get", "pods", "-l", "app=roll", "-o",
                   "jsonpath={range .items[*]}{.spec.containers[0].image} {.metadata.deletionTimestamp}{'\\n'}{end}")
    assert [line.split()[0] for line in pods.splitlines() if len(line.split()) == 1] == ["nginx:1.28"] * 4
    history = kubectl(with_nodes, "rollout", "history", "deployment/roll")
    assert [line.split()[0] for line in history.splitlines()[2:] if line.strip()] == ["1", "2", "3"]
    kubectl(with_nodes, "rollout", "undo", "deployment/roll")  # back to revision 2's template
    assert rolled_out() and image() == "nginx:1.27"
    kubectl(with_nodes, "scale", "deployment/roll", "--replicas=2")
    assert rolled_out()
    assert len(kubectl(with_nodes, "get", "pods", "-l", "app=roll", "--field-selector=status.phase=Running",
                       "-o", "name").split()) >= 2
    kubectl(with_nodes, "delete", "deployment", "roll", "--wait=true", "--timeout=60s")
    deadline = time.monotonic() + 30
    while kubectl(with_nodes, "get", "replicasets,pods", "-l", "app=roll", "-o", "name").split():
        assert time.monotonic() < deadline, "the replicasets and pods were not collected"
        time.sleep(0.2)


def test_a_job_completes_and_kubectl_wait_sees_it(with_nodes: Serve) -> None:
    kubectl(with_nodes, "create", "job", "once", "--image=busybox", "--", "true")
    assert "condition met" in kubectl(with_nodes, "wait", "--for=condition=complete", "job/once", "--timeout=60s")
    row = kubectl(with_nodes, "get", "job", "once", "--no-headers").split()
    assert row[:3] == ["once", "Complete", "1/1"]
    kubectl(with_nodes, "delete", "job", "once")  # kubectl sends Background: the pod goes too
    deadline = time.monotonic() + 30
    while kubectl(with_nodes, "get", "pods", "-l", "job-name=once", "-o", "name").strip():
        assert time.monotonic() < deadline, "the job's pod was not collected"
        time.sleep(0.2)


def test_a_cronjob_is_served_and_a_job_made_from_it_runs(with_nodes: Serve) -> None:
    kubectl(with_nodes, "create", "cronjob", "nightly", "--schedule=0 3 * * *", "--image=busybox", "--", "true")
    row = kubectl(with_nodes, "get", "cronjob", "nightly", "--no-headers").split()
    assert row[:6] == ["nightly", "0", "3", "*", "*", "*"] and row[6:9] == ["<none>", "False", "0"]
    kubectl(with_nodes, "create", "job", "manual", "--from=cronjob/nightly")
    assert "condition met" in kubectl(with_nodes, "wait", "--for=condition=complete", "job/manual", "--timeout=60s")
    owner = kubectl(with_nodes, "get", "job", "manual", "-o", "jsonpath={.metadata.ownerReferences[0].kind}")
    assert owner == "CronJob"
    # SetDefaults_Job: the Job shows its template's labels (kubectl describe job: Labels)
    assert kubectl(with_nodes, "get", "job", "manual", "-o", "jsonpath={.metadata.labels.job-name}") == "manual"


STATEFUL_AND_DAEMON = """
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  serviceName: db
  replicas: 2
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec:
      terminationGracePeriodSeconds: 0
      containers: [{name: db, image: "db:1"}]
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      terminationGracePeriodSeconds: 0
      containers: [{name: a, image: "agent:1"}]
"""


def test_statefulsets_and_daemonsets_roll_out(with_nodes: Serve) -> None:
    kubectl(with_nodes, "apply", "-f", "-", stdin=STATEFUL_AND_DAEMON)
    assert "roll out complete" in kubectl(with_nodes, "rollout", "status", "statefulset/db", "--timeout=60s")
    assert "successfully rolled out" in kubectl(with_nodes, "rollout", "status", "daemonset/agent", "--timeout=60s")
    assert kubectl(with_nodes, "get", "pods", "-l", "app=db", "-o", "name").split() == ["pod/db-0", "pod/db-1"]
    placed = kubectl(with_nodes, "get", "pods", "-l", "app=agent", "-o", "jsonpath={.items[*].spec.nodeName}")
    assert sorted(placed.split()) == ["sim-node-0", "sim-node-1"]  # one per node (this server has two)
    kubectl(with_nodes, "set", "image", "statefulset/db", "db=db:2")
    assert "roll out complete" in kubectl(with_nodes, "rollout", "status", "statefulset/db", "--timeout=60s")


PARTITIONED = """
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: web}
spec:
  serviceName: web
  replicas: 3
  podManagementPolicy: Parallel
  updateStrategy: {type: RollingUpdate, rollingUpdate: {partition: 1, maxUnavailable: %s}}
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      terminationGracePeriodSeconds: 0
      containers: [{name: web, image: "web:1"}]
"""


def test_a_partitioned_statefulset_rolls_out_down_to_its_partition(with_nodes: Serve) -> None:
    """kubectl rollout status reads a partitioned rollout as upstream's controller writes its
    status; a StatefulSet that could never roll (maxUnavailable 0) is refused as upstream."""
    env = dict(os.environ, KUBECONFIG=str(with_nodes.kubeconfig), HOME=str(with_nodes.state))
    r = subprocess.run([KUBECTL, "apply", "-f", "-"], input=PARTITIONED % 0, capture_output=True, text=True,
                       env=env, timeout=60)
    assert r.returncode == 1
    assert ('The StatefulSet "web" is invalid: spec.updateStrategy.rollingUpdate.maxUnavailable: Invalid value: 0: '
            "cannot be 0") in r.stderr
    kubectl(with_nodes, "apply", "-f", "-", stdin=PARTITIONED % '"50%"')
    assert "partitioned roll out complete: 3 new pods" in kubectl(with_nodes, "rollout", "status", "statefulset/web",
                                                                  "--timeout=60s")
    kubectl(with_nodes, "set", "image", "statefulset/web", "web=web:2")
    out = kubectl(with_nodes, "rollout", "status", "statefulset/web", "--timeout=60s")
    assert "partitioned roll out complete: 2 new pods have been updated" in out
    images = kubectl(with_nodes, "get", "pods", "-l", "app=web", "-o",
                     'jsonpath={range .items[*]}{.metadata.name}={.spec.containers[0].image} {end}')
    assert sorted(images.split()) == ["web-0=web:1", "web-1=web:2", "web-2=web:2"]
