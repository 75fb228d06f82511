"""kubectl as people use it day to day: version, -A, get -w, describe with events, delete --wait."""

from __future__ import annotations

import os
import queue
import subprocess
import time

from tests.e2e.test_kubectl import KUBECTL, kubectl, watching
from tests.test_cli import Serve

POD = """
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: {ns}, labels: {{app: flow}}}}
spec:
  containers: [{{name: c, image: "nginx:1.27"}}]
"""

EVENT = """
apiVersion: v1
kind: Event
metadata: {{name: {name}.scheduled, namespace: default}}
involvedObject: {{kind: Pod, namespace: default, name: {name}, uid: {uid}}}
reason: Scheduled
message: Successfully assigned default/{name} to node-1
type: Normal
source: {{component: default-scheduler}}
firstTimestamp: "2026-11-30T08:00:00Z"
lastTimestamp: "2026-11-30T08:00:00Z"
count: 1
"""


def test_version_reports_the_server(served: Serve) -> None:
    out = kubectl(served, "version", "-o", "json")
    assert '"serverVersion"' in out and '"minor": "37"' in out


def test_all_namespaces(served: Serve) -> None:
    kubectl(served, "create", "namespace", "flow-a", "--dry-run=client", "-o", "yaml")  # client-side only
    kubectl(served, "apply", "-f", "-", stdin="apiVersion: v1\nkind: Namespace\nmetadata: {name: flow-a}\n")
    kubectl(served, "apply", "-f", "-", stdin=POD.format(name="a0", ns="flow-a"))
    kubectl(served, "apply", "-f", "-", stdin=POD.format(name="d0", ns="default"))
    rows = [line.split()[:2] for line in kubectl(served, "get", "pods", "-A", "-l", "app=flow").splitlines()]
    assert rows[0] == ["NAMESPACE", "NAME"]
    assert sorted(rows[1:]) == [["default", "d0"], ["flow-a", "a0"]]


def test_get_watch_sees_added_modified_deleted(served: Serve) -> None:
    kinds: list[str] = []
    # (entered once the watch is open, where a fixed second's sleep assumed kubectl starts that fast
    # on a loaded machine; then the events are read until the deletion's, not for a fixed time)
    with watching(served, "pods", "--output-watch-events", "-l", "app=watched", "--no-headers") as lines:
        kubectl(served, "apply", "-f", "-", stdin=POD.format(name="w0", ns="default").replace("app: flow",
                                                                                           "app: watched"))
        kubectl(served, "label", "pod", "w0", "tier=web")
        kubectl(served, "delete", "pod", "w0", "--wait=false")
        deadline = time.monotonic() + 30
        while not kinds or kinds[-1] != "DELETED":
            try:
                line = lines.get(timeout=max(deadline - time.monotonic(), 0.01))
            except queue.Empty:
                break
            if line.strip():
                kinds.append(line.split()[0])
    assert kinds and kinds[0] == "ADDED" and "MODIFIED" in kinds and kinds[-1] == "DELETED", kinds


def test_describe_pod_shows_its_events(served: Serve) -> None:
    kubectl(served, "apply", "-f", "-", stdin=POD.format(name="described", ns="default"))
    uid = kubectl(served, "get", "pod", "described", "-o", "jsonpath={.metadata.uid}")
    kubectl(served, "apply", "-f", "-", stdin=EVENT.format(name="described", uid=uid))  # describe selects by uid
    out = kubectl(served, "describe", "pod", "described")
    assert "Name:" in out and "described" in out and "nginx:1.27" in out
    events = out[out.index("Events:"):]
    assert "Scheduled" in events and "Successfully assigned default/described to node-1" in events


def test_delete_waits_until_the_object_is_gone(served: Serve) -> None:
    kubectl(served, "apply", "-f", "-", stdin=POD.format(name="doomed", ns="default"))
    started = time.monotonic()
    out = kubectl(served, "delete", "pod", "doomed")  # --wait=true: kubectl watches until the pod is gone
    assert 'pod "doomed" deleted' in out
    assert time.monotonic() - started < 30
    assert kubectl(served, "get", "pods", "--field-selector", "metadata.name=doomed", "-o", "name") == ""


SECRET = """
apiVersion: v1
kind: Secret
metadata: {name: creds, namespace: default}
stringData: {username: admin}
"""


def test_secret_string_data_namespace_label_and_zero_value_field_selector(served: Serve) -> None:
    kubectl(served, "apply", "-f", "-", stdin=SECRET)
    assert kubectl(served, "get", "secret", "creds", "-o", "jsonpath={.data.username}") == "YWRtaW4="
    # as upstream, a re-apply sends stringData again (the live object never shows it)
    assert "configured" in kubectl(served, "apply", "-f", "-", stdin=SECRET)
    assert kubectl(served, "get", "secret", "creds", "-o", "jsonpath={.stringData}") == ""
    kubectl(served, "apply", "-f", "-", stdin="apiVersion: v1\nkind: Namespace\nmetadata: {name: labelled}\n")
    out = kubectl(served, "get", "ns", "-l", "kubernetes.io/metadata.name=labelled", "-o", "name")
    assert out.split() == ["namespace/labelled"]
    kubectl(served, "apply", "-f", "-", stdin="apiVersion: v1\nkind: Node\nmetadata: {name: sel-node}\n")
    out = kubectl(served, "get", "nodes", "--field-selector", "spec.unschedulable=false", "-o", "name")
    assert "node/sel-node" in out.split()


GANG = """
apiVersion: scheduling.k8s.io/v1beta1
kind: Workload
metadata: {name: train}
spec:
  podGroupTemplates: [{name: workers, schedulingPolicy: {gang: {minCount: 8}}}]
---
apiVersion: scheduling.k8s.io/v1beta1
kind: PodGroup
metadata: {name: train-workers}
spec:
  podGroupTemplateRef: {workload: {workloadName: train, podGroupTemplateName: workers}}
  schedulingPolicy: {gang: {minCount: 8}}
---
apiVersion: scheduling.k8s.io/v1beta1
kind: PodGroup
metadata: {name: train-workers-137}
spec:
  workloadRef: {workloadName: train, templateName: workers}
  schedulingPolicy: {gang: {minCount: 8}}
---
apiVersion: v1
kind: Pod
metadata: {name: worker-0}
spec:
  schedulingGroup: {podGroupName: train-workers}
  containers: [{name: c, image: "trainer:1"}]
"""


def test_the_gang_manifests_apply_with_strict_validation(served: Serve) -> None:
    # both the 1.37 workloadRef and the earlier podGroupTemplateRef shape (the issue's) are accepted
    out = kubectl(served, "apply", "--validate=strict", "-f", "-", stdin=GANG)
    assert "podgroup.scheduling.k8s.io/train-workers created" in out and "pod/worker-0 created" in out
    ref = kubectl(served, "get", "podgroup", "train-workers", "-o", "jsonpath={.spec.podGroupTemplateRef.workload}")
    assert "podGroupTemplateName" in ref


WORKLOADS = """
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  serviceName: db
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec: {containers: [{name: pg, image: "postgres:17"}]}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec: {nodeSelector: {role: edge}, containers: [{name: a, image: "agent:1"}]}
---
apiVersion: batch/v1
kind: Job
metadata: {name: once}
spec:
  template:
    spec: {restartPolicy: Never, containers: [{name: c, image: busybox}]}
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: batch-low}
value: 100
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: readers}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: reader}
subjects: [{kind: User, name: alice}]
"""


def test_get_prints_upstream_columns_for_workloads_and_rbac(served: Serve) -> None:
    kubectl(served, "apply", "-f", "-", stdin=WORKLOADS)
    head = {kind: kubectl(served, "get", kind).splitlines()[0].split()
            for kind in ("statefulsets", "daemonsets", "jobs", "rolebindings")}
    assert head["statefulsets"] == ["NAME", "READY", "AGE"]
    assert head["daemonsets"] == ["NAME", "DESIRED", "CURRENT", "READY", "UP-TO-DATE", "AVAILABLE", "NODE",
                                  "SELECTOR", "AGE"]
    assert head["jobs"] == ["NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"]
    assert head["rolebindings"] == ["NAME", "ROLE", "AGE"]
    assert kubectl(served, "get", "sts", "db", "--no-headers").split()[1] == "0/1"
    assert "role=edge" in kubectl(served, "get", "ds", "agent", "--no-headers")
    assert kubectl(served, "get", "job", "once", "--no-headers").split()[1:3] == ["Running", "0/1"]
    assert kubectl(served, "get", "rolebinding", "readers", "--no-headers").split()[1] == "Role/reader"
    pc = kubectl(served, "get", "priorityclass", "batch-low", "--no-headers").split()
    assert pc[1:3] == ["100", "false"] and pc[-1] == "PreemptLowerPriority"


def test_logs_of_a_simulated_container_are_empty(served: Serve) -> None:
    # on a node, as a kubelet is asked for the log only then (a pod with no node has an empty one)
    kubectl(served, "apply", "-f", "-", stdin=POD.format(name="talker", ns="default") + "  nodeName: node-a\n")
    kubectl(served, "patch", "pod", "talker", "--subresource=status", "--type=merge", "-p",
            '{"status": {"phase": "Running", "containerStatuses": [{"name": "c", "image": "nginx:1.27", '
            '"imageID": "", "ready": true, "restartCount": 0, "state": {"running": {}}}]}}')
    assert kubectl(served, "logs", "talker") == ""
    # (``-f`` holds the stream while the container runs: tests/e2e/test_pod_logs.py)
    assert KUBECTL
    bad = subprocess.run([KUBECTL, "--kubeconfig", str(served.kubeconfig), "logs", "talker", "-c", "nope"],
                         capture_output=True, text=True, timeout=30)
    assert bad.returncode != 0 and "container nope is not valid for pod talker" in bad.stderr
    previous = subprocess.run([KUBECTL, "--kubeconfig", str(served.kubeconfig), "logs", "talker", "--previous"],
                              capture_output=True, text=True, timeout=30)
    assert previous.returncode != 0
    assert 'previous terminated container "c" in pod "talker" not found' in previous.stderr


SERVICES = """
apiVersion: v1
kind: Service
metadata: {name: np}
spec: {type: NodePort, selector: {app: web}, ports: [{port: 80}]}
---
apiVersion: v1
kind: Service
metadata: {name: lb}
spec: {type: LoadBalancer, selector: {app: web}, ports: [{port: 443}]}
---
apiVersion: v1
kind: Service
metadata: {name: ext}
spec: {type: ExternalName, externalName: example.com}
---
apiVersion: v1
kind: Service
metadata: {name: headless}
spec: {clusterIP: None, selector: {app: web}, ports: [{port: 5432}]}
"""


def test_services_of_each_type_as_kube_apiserver_allocates_them(served: Serve) -> None:
    kubectl(served, "apply", "-f", "-", stdin=SERVICES)
    rows = {line.split()[0]: line.split() for line in kubectl(served, "get", "svc", "--no-headers").splitlines()}
    node_port = int(rows["np"][4].split(":")[1].split("/")[0])
    assert 30000 <= node_port <= 32767 and rows["np"][4].startswith("80:")
    assert rows["lb"][3] == "<pending>" and rows["lb"][4].startswith("443:")
    assert rows["ext"][2] == "<none>" and rows["ext"][3] == "example.com"
    assert rows["headless"][2] == "None"
    ext = kubectl(served, "get", "svc", "ext", "-o", "jsonpath={.spec.clusterIPs}{.spec.ipFamilies}")
    assert ext == ""
    assert kubectl(served, "get", "svc", "headless", "-o", "jsonpath={.spec.clusterIPs}") == '["None"]'
    policy = kubectl(served, "get", "svc", "lb", "-o", "jsonpath={.spec.externalTrafficPolicy}")
    assert policy == "Cluster"


def test_kubectl_debug_adds_an_ephemeral_container(served: Serve) -> None:
    kubectl(served, "apply", "-f", "-", stdin=POD.format(name="debugged", ns="default"))
    kubectl(served, "debug", "debugged", "--image=busybox:1.36", "-c", "dbg", "--target=c")
    names = kubectl(served, "get", "pod", "debugged", "-o", "jsonpath={.spec.ephemeralContainers[*].name}")
    assert names == "dbg"
    assert "Ephemeral Containers:" in kubectl(served, "describe", "pod", "debugged")
    # a second debug container: kubectl's patch orders the list, the first stays
    kubectl(served, "debug", "debugged", "--image=busybox:1.36", "-c", "dbg2")
    names = kubectl(served, "get", "pod", "debugged", "-o", "jsonpath={.spec.ephemeralContainers[*].name}")
    assert names == "dbg dbg2"
    # once a kubelet reports it running (this server has no simulated nodes), its logs read as a container's
    kubectl(served, "patch", "pod", "debugged", "--subresource=status", "--type=merge", "-p",
            '{"status": {"phase": "Running", "ephemeralContainerStatuses": [{"name": "dbg", "image": "busybox:1.36", '
            '"imageID": "", "ready": false, "restartCount": 0, "state": {"running": {}}}]}}')
    assert kubectl(served, "logs", "debugged", "-c", "dbg") == ""


IMMUTABLE = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: frozen, namespace: default}
spec:
  selector: {matchLabels: {app: frozen}}
  template:
    metadata: {labels: {app: frozen}}
    spec: {containers: [{name: c, image: "nginx:1.27"}]}
---
apiVersion: v1
kind: Pod
metadata: {name: frozen, namespace: default}
spec:
  containers: [{name: c, image: "nginx:1.27"}]
"""


def test_apply_of_a_changed_immutable_field_fails_as_upstream(served: Serve) -> None:
    """What GitOps tools look for to recreate an object: ``field is immutable``, 422."""
    kubectl(served, "apply", "-f", "-", stdin=IMMUTABLE)
    env = dict(os.environ, KUBECONFIG=str(served.kubeconfig), HOME=str(served.state))
    relabelled = IMMUTABLE.split("---")[0].replace("{app: frozen}", "{app: thawed}")
    r = subprocess.run([KUBECTL, "apply", "-f", "-"], input=relabelled, capture_output=True, text=True, env=env,
                       timeout=60)
    assert r.returncode != 0
    assert 'The Deployment "frozen" is invalid: spec.selector: Invalid value:' in r.stderr
    assert "field is immutable" in r.stderr
    pod = IMMUTABLE.split("---")[1].replace("containers:", "restartPolicy: Never\n  containers:")
    r = subprocess.run([KUBECTL, "apply", "-f", "-"], input=pod, capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode != 0 and "pod updates may not change fields other than" in r.stderr
    # what may change does
    assert "configured" in kubectl(served, "apply", "-f", "-", stdin=IMMUTABLE.replace("1.27", "1.28"))
    assert kubectl(served, "get", "pod", "frozen", "-o", "jsonpath={.spec.containers[0].image}") == "nginx:1.28"


DRA_OBJECTS = """
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpus}
spec: {}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: one-gpu, namespace: default}
spec:
  spec:
    devices:
      requests: [{name: gpu, exactly: {deviceClassName: gpus}}]
"""


def test_get_prints_upstreams_columns_for_device_classes_and_claim_templates(served: Serve) -> None:
    kubectl(served, "apply", "-f", "-", stdin=DRA_OBJECTS)
    for kind, name in (("deviceclasses", "gpus"), ("resourceclaimtemplates", "one-gpu")):
        lines = kubectl(served, "get", kind).splitlines()
        assert lines[0].split() == ["NAME", "AGE"]
        assert lines[1].split()[0] == name
