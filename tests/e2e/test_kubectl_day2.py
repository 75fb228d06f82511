"""Day-2 kubectl against ``controlplane serve --nodes 2`` with its controllers: NoExecute
taints (controllers/tainteviction.py), a paused Deployment (controllers/workloads.py), a
DaemonSet rolled out with ``maxSurge`` (controllers/daemonsets.py), a new
HorizontalPodAutoscaler's first syncs (controllers/podautoscaler.py), a pod resized in
place (``kubectl patch --subresource resize``, actuated by the simulated kubelet) and one
debugged (``kubectl debug``, its ephemeral container run by the simulated kubelet), and a pod's
observed generation following its spec (KEP-5067)."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_kubectl import KUBECTL, kubectl
from tests.test_cli import Serve, running, start_serve


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    # (autoscalers reconciled every 4 s, not 15, and the pods' CPU counted once they are ready,
    # not once ready for a whole 15 s metric window: kube-controller-manager's flags; the test of a
    # new autoscaler then has its measured first sync 4 s after its create)
    with running(start_serve(tmp_path_factory.mktemp("day2"), scheduler=True,
                             extra=("--nodes", "2", "--horizontal-pod-autoscaler-sync-period", "4s",
                                    "--horizontal-pod-autoscaler-cpu-initialization-period", "0s"))) as s:
        yield s


def eventually(what: Callable[[], Any], timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = what()
        if got:
            return got
        assert time.monotonic() < deadline, f"not within {timeout} s"
        time.sleep(0.2)


TAINTED = """
apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  nodeName: sim-node-1
  terminationGracePeriodSeconds: 0
  tolerations: {tolerations}
  containers: [{{name: c, image: "nginx:1.27"}}]
"""


def test_a_noexecute_taint_evicts_the_pods_that_do_not_tolerate_it(served: Serve) -> None:
    pods = {"plain": "[]",
            "forever": "[{key: maint, operator: Exists, effect: NoExecute}]",
            "brief": "[{key: maint, operator: Equal, value: 'yes', effect: NoExecute, tolerationSeconds: 2}]",
            "long": "[{key: maint, operator: Exists, effect: NoExecute, tolerationSeconds: 600}]"}
    for name, tolerations in pods.items():
        kubectl(served, "apply", "-f", "-", stdin=TAINTED.format(name=name, tolerations=tolerations))

    def names() -> list[str]:
        return kubectl(served, "get", "pods", "--field-selector", "spec.nodeName=sim-node-1", "-o",
                       "jsonpath={range .items[*]}{.metadata.name}{' '}{.metadata.deletionTimestamp}{'\\n'}{end}"
                       ).split("\n")

    kubectl(served, "taint", "nodes", "sim-node-1", "maint=yes:NoExecute")
    # at once for the pod without a toleration, after 2 s for the one tolerating it for 2 s
    eventually(lambda: sorted(line.strip() for line in names() if len(line.split()) == 1) == ["forever", "long"])
    events = kubectl(served, "get", "events", "--field-selector", "reason=TaintManagerEviction", "-o",
                     "jsonpath={range .items[*]}{.message}{'\\n'}{end}")
    assert "Marking for deletion Pod default/plain" in events and "Marking for deletion Pod default/brief" in events
    # the taint goes: the eviction scheduled for ten minutes is off
    kubectl(served, "taint", "nodes", "sim-node-1", "maint-")
    eventually(lambda: "Cancelling deletion of Pod default/long" in kubectl(
        served, "get", "events", "--field-selector", "reason=TaintManagerEviction", "-o",
        "jsonpath={range .items[*]}{.message}{'\\n'}{end}"))
    assert sorted(line.split()[0] for line in names() if line.strip()) == ["forever", "long"]
    kubectl(served, "delete", "pod", "forever", "long", "--grace-period=0", "--force")


def test_a_paused_deployment_says_so_and_still_scales(served: Serve) -> None:
    def progressing() -> dict[str, Any]:
        d = json.loads(kubectl(served, "get", "deployment", "paused", "-o", "json"))
        return next(c for c in d["status"].get("conditions", ()) if c["type"] == "Progressing")

    kubectl(served, "create", "deployment", "paused", "--image=nginx:1.27", "--replicas=1")
    kubectl(served, "rollout", "status", "deployment/paused", "--timeout=60s")
    kubectl(served, "rollout", "pause", "deployment/paused")
    eventually(lambda: progressing()["reason"] == "DeploymentPaused")
    assert progressing()["status"] == "Unknown" and progressing()["message"] == "Deployment is paused"
    # a change of template waits for the resume; a change of size does not (the old ReplicaSet takes it)
    kubectl(served, "set", "image", "deployment/paused", "nginx=nginx:1.28")
    kubectl(served, "scale", "deployment/paused", "--replicas=2")
    eventually(lambda: kubectl(served, "get", "rs", "-l", "app=paused", "-o",
                               "jsonpath={range .items[*]}{.spec.replicas}{' '}{end}").split() == ["2"])
    kubectl(served, "rollout", "resume", "deployment/paused")
    assert "successfully rolled out" in kubectl(served, "rollout", "status", "deployment/paused", "--timeout=60s")
    assert eventually(lambda: progressing()["reason"] == "NewReplicaSetAvailable")
    sizes = kubectl(served, "get", "rs", "-l", "app=paused", "-o",
                    "jsonpath={range .items[*]}{.spec.template.spec.containers[0].image}={.spec.replicas}{' '}{end}")
    assert sorted(sizes.split()) == ["nginx:1.27=0", "nginx:1.28=2"]


SURGING = """
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: surging}
spec:
  selector: {matchLabels: {app: surging}}
  updateStrategy: {type: RollingUpdate, rollingUpdate: {maxUnavailable: 0, maxSurge: 1}}
  template:
    metadata: {labels: {app: surging}}
    spec:
      terminationGracePeriodSeconds: 0
      tolerations: [{operator: Exists}]
      containers: [{name: a, image: "agent:1"}]
"""


def test_a_daemonset_with_max_surge_starts_each_new_pod_beside_the_old_one(served: Serve) -> None:
    kubectl(served, "apply", "-f", "-", stdin=SURGING)
    kubectl(served, "rollout", "status", "daemonset/surging", "--timeout=60s")
    assert KUBECTL
    watch = subprocess.Popen([KUBECTL, "get", "pods", "-l", "app=surging", "--watch", "--output-watch-events",
                              "-o", "jsonpath={.type} {.object.metadata.name}{'\\n'}"],
                             stdout=subprocess.PIPE, text=True,
                             env=dict(os.environ, KUBECONFIG=str(served.kubeconfig), HOME=str(served.state)))
    assert watch.stdout is not None
    try:
        events = [watch.stdout.readline(), watch.stdout.readline()]  # the two pods there: the watch is open
        kubectl(served, "set", "image", "daemonset/surging", "a=agent:2")
        assert "successfully rolled out" in kubectl(served, "rollout", "status", "daemonset/surging",
                                                    "--timeout=60s")
    finally:
        watch.terminate()
        events.append(watch.communicate(timeout=10)[0])
    images = kubectl(served, "get", "pods", "-l", "app=surging", "-o",
                     "jsonpath={range .items[*]}{.spec.containers[0].image}{' '}{end}").split()
    assert images == ["agent:2", "agent:2"]
    # each node had its new pod (3 pods in all) before its old one went: maxUnavailable 0
    present: set[str] = set()
    most = 0
    for line in "".join(events).splitlines():
        kind, name = line.split()
        if kind == "ADDED":
            present.add(name)
        elif kind == "DELETED":
            present.discard(name)
        most = max(most, len(present))
    assert most == 3, events


LOADED = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: idle}
spec:
  replicas: 3
  selector: {matchLabels: {app: idle}}
  template:
    metadata:
      labels: {app: idle}
      annotations: {kwok.x-k8s.io/usage-cpu: 1m}
    spec:
      containers:
      - {name: app, image: "nginx:1.27", resources: {requests: {cpu: 100m}}}
"""


def test_a_new_autoscaler_does_not_scale_down_before_its_stabilisation_window(served: Serve) -> None:
    """Upstream records the current size as a new HPA's first recommendation: with 1% of its
    requests used, the Deployment keeps its 3 replicas for the 5 minutes of the window."""
    kubectl(served, "apply", "-f", "-", stdin=LOADED)
    kubectl(served, "rollout", "status", "deployment/idle", "--timeout=60s")
    kubectl(served, "autoscale", "deployment/idle", "--cpu=50%", "--min=1", "--max=5")

    def measured() -> dict[str, Any] | None:
        hpa = json.loads(kubectl(served, "get", "hpa", "idle", "-o", "json"))
        conditions = {c["type"]: c for c in (hpa.get("status") or {}).get("conditions", ())}
        return conditions if (conditions.get("ScalingActive") or {}).get("status") == "True" else None

    conditions = eventually(measured, timeout=60)
    assert conditions["AbleToScale"]["reason"] == "ScaleDownStabilized", conditions
    assert kubectl(served, "get", "deployment", "idle", "-o", "jsonpath={.spec.replicas}") == "3"


def test_a_server_dry_run_drain_evicts_nothing(served: Serve) -> None:
    """kubectl puts the dry run in the Eviction's deleteOptions, not the query: the pod stays,
    and its budget is checked but not charged (upstream's propagateDryRun, checkAndDecrement)."""
    kubectl(served, "run", "dry", "--image=nginx:1.27", "--labels=app=dry",
            "--overrides", '{"spec": {"nodeName": "sim-node-0"}}')
    kubectl(served, "create", "poddisruptionbudget", "dry", "--selector=app=dry", "--max-unavailable=1")
    eventually(lambda: kubectl(served, "get", "pdb", "dry", "-o", "jsonpath={.status.disruptionsAllowed}") == "1")
    out = kubectl(served, "drain", "sim-node-0", "--dry-run=server", "--force", "--ignore-daemonsets")
    assert "evicting pod default/dry (server dry run)" in out and "drained (server dry run)" in out
    time.sleep(0.5)
    assert kubectl(served, "get", "pod", "dry", "-o", "jsonpath={.metadata.deletionTimestamp}") == ""
    assert kubectl(served, "get", "node", "sim-node-0", "-o", "jsonpath={.spec.unschedulable}") == ""
    assert kubectl(served, "get", "pdb", "dry", "-o",
                   "jsonpath={.status.disruptionsAllowed}{.status.disruptedPods}") == "1"


def failing(served: Serve, *args: str) -> tuple[float, str]:
    """kubectl ``args``, which must exit 1: the seconds it took and what it printed on stderr."""
    assert KUBECTL
    env = dict(os.environ, KUBECONFIG=str(served.kubeconfig), HOME=str(served.state))
    start = time.monotonic()
    r = subprocess.run([KUBECTL, *args], capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL,
                       timeout=30)
    assert r.returncode == 1, (args, r.stdout, r.stderr)
    return time.monotonic() - start, r.stderr


def test_exec_cp_attach_port_forward_and_proxy_fail_at_once_as_with_an_unreachable_kubelet(served: Serve) -> None:
    """A kubelet that cannot be dialled (api/streaming.py): exec, cp and attach's websocket
    (v5.channel.k8s.io) is upgraded and told on its error channel, as upstream's stream
    translator tells it; port-forward's gets the Status as an answer. kubectl exits 1 at once,
    the pod found, where it said the resource did not exist."""
    kubectl(served, "run", "shell", "--image=busybox:1.36", "--overrides", '{"spec": {"nodeName": "sim-node-1"}}')
    kubectl(served, "wait", "pod/shell", "--for=condition=Ready", "--timeout=30s")
    dial = 'error dialing backend: no kubelet serves node "sim-node-1"'
    for args in (("exec", "shell", "--", "ls"), ("cp", "shell:/etc/hosts", str(served.state / "hosts")),
                 ("attach", "shell"), ("port-forward", "pod/shell", "0:80")):
        took, err = failing(served, *args)
        assert dial in err and "not found" not in err and took < 10, (args, err)
        said = "error: Internal error occurred: " if args[0] != "port-forward" else "unable to upgrade connection: "
        assert said + dial in err, (args, err)
    _, err = failing(served, "exec", "shell", "-c", "other", "--", "ls")  # kubectl checks this one itself
    assert "container other is not valid for pod shell" in err
    # the proxy subresources (api/proxying.py): upstream's 503 for a backend it cannot dial
    for raw in ("/api/v1/nodes/sim-node-1/proxy/metrics", "/api/v1/namespaces/default/pods/shell/proxy/"):
        _, err = failing(served, "get", "--raw", raw)
        assert "Error from server (ServiceUnavailable): error trying to reach service:" in err, (raw, err)
    kubectl(served, "delete", "pod", "shell", "--grace-period=0", "--force")


def test_a_user_certificate_requested_approved_and_issued_with_kubectl(served: Serve) -> None:
    """The flow of upstream's "issue a certificate for a user" task: a CSR for the client
    signer, ``kubectl certificate approve`` (a protobuf PUT of /approval), and the signer
    (controllers/certificates.py) issuing it with the cluster CA; ``kubectl get csr`` prints
    upstream's columns, and a request the signer refuses gets Failed."""
    from cryptography import x509

    from tests.api.test_certificate_signing_requests import request_pem

    manifest = ("apiVersion: certificates.k8s.io/v1\nkind: CertificateSigningRequest\nmetadata: {{name: {name}}}\n"
                "spec: {{request: {request}, signerName: kubernetes.io/kube-apiserver-client, "
                "expirationSeconds: 86400, usages: [{usage}]}}\n")
    for name, usage in (("jane", "client auth"), ("wrong", "server auth")):
        kubectl(served, "apply", "-f", "-", stdin=manifest.format(name=name, request=request_pem(), usage=usage))
        assert "approved" in kubectl(served, "certificate", "approve", name)

    def rows() -> dict[str, list[str]]:
        return {line.split()[0]: line.split() for line in kubectl(served, "get", "csr").splitlines()}

    eventually(lambda: rows()["jane"][-1] == "Approved,Issued" and rows()["wrong"][-1] == "Approved,Failed")
    assert rows()["NAME"] == ["NAME", "AGE", "SIGNERNAME", "REQUESTOR", "REQUESTEDDURATION", "CONDITION"]
    assert rows()["jane"][2:5] == ["kubernetes.io/kube-apiserver-client", "admin", "24h"]
    issued = kubectl(served, "get", "csr", "jane", "-o", "jsonpath={.status.certificate}")
    cert = x509.load_pem_x509_certificate(base64.b64decode(issued))
    ca = x509.load_pem_x509_certificate((served.state / "pki" / "ca.crt").read_bytes())
    cert.verify_directly_issued_by(ca)
    assert cert.subject.rfc4514_string() == "O=devs,CN=jane"
    _, err = failing(served, "certificate", "deny", "jane")
    assert 'certificate signing request "jane" is already Approved' in err



def test_an_issued_user_certificate_logs_kubectl_in(served: Serve, tmp_path: Path) -> None:
    """The end of upstream's "issue a certificate for a user" task: the certificate the signer
    issued (with the generated CA, the cluster's) authenticates its subject, as on a kubeadm or
    kind cluster, whose kube-apiserver trusts that CA for clients."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    request = (x509.CertificateSigningRequestBuilder()
               .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "joan"),
                                        x509.NameAttribute(NameOID.ORGANIZATION_NAME, "ops")]))
               .sign(key, hashes.SHA256()))
    pem = base64.b64encode(request.public_bytes(serialization.Encoding.PEM)).decode()
    kubectl(served, "apply", "-f", "-", stdin=(
        "apiVersion: certificates.k8s.io/v1\nkind: CertificateSigningRequest\nmetadata: {name: joan}\n"
        f"spec: {{request: {pem}, signerName: kubernetes.io/kube-apiserver-client, usages: [client auth]}}\n"))
    kubectl(served, "certificate", "approve", "joan")
    # a signer's requests, by field selector, as upstream's
    assert "certificatesigningrequest.certificates.k8s.io/joan" in kubectl(
        served, "get", "csr", "-o", "name", "--field-selector", "spec.signerName=kubernetes.io/kube-apiserver-client")
    assert kubectl(served, "get", "csr", "-o", "name", "--field-selector", "spec.signerName=example.com/none") == ""
    issued = eventually(lambda: kubectl(served, "get", "csr", "joan", "-o", "jsonpath={.status.certificate}"))
    (tmp_path / "joan.crt").write_bytes(base64.b64decode(issued))
    (tmp_path / "joan.key").write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                                          serialization.PrivateFormat.PKCS8,
                                                          serialization.NoEncryption()))
    r = subprocess.run([KUBECTL, "--kubeconfig", os.devnull, "--server", served.url,
                        "--certificate-authority", str(served.state / "pki" / "ca.crt"),
                        "--client-certificate", str(tmp_path / "joan.crt"), "--client-key", str(tmp_path / "joan.key"),
                        "auth", "whoami", "-o", "json"], capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, HOME=str(tmp_path)))
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["status"]["userInfo"] == {"username": "joan",
                                                          "groups": ["ops", "system:authenticated"]}


RESIZED = """
apiVersion: v1
kind: Pod
metadata: {name: resized}
spec:
  nodeName: sim-node-0
  terminationGracePeriodSeconds: 0
  containers: [{name: c, image: "nginx:1.27", resources: {requests: {cpu: 200m, memory: 64Mi}}}]
"""


def test_kubectl_patch_subresource_resize_is_actuated_by_the_simulated_kubelet(served: Serve) -> None:
    """KEP-1287 in place: the resize subresource takes the new requests, the node's kubelet
    reports them running; a change the subresource refuses is 422 in upstream's words."""
    kubectl(served, "apply", "-f", "-", stdin=RESIZED)

    def reported_cpu() -> str:
        return kubectl(served, "get", "pod", "resized", "-o",
                       "jsonpath={.status.containerStatuses[0].resources.requests.cpu}")

    assert eventually(reported_cpu) == "200m"
    out = kubectl(served, "patch", "pod", "resized", "--subresource", "resize", "--patch",
                  '{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"800m"}}}]}}')
    assert out.strip() == "pod/resized patched"
    eventually(lambda: reported_cpu() == "800m")
    got = json.loads(kubectl(served, "get", "pod", "resized", "-o", "json"))
    assert got["metadata"]["generation"] == 2 and got["status"]["observedGeneration"] == 2
    assert got["status"]["containerStatuses"][0]["resources"]["requests"] == {"cpu": "800m", "memory": "64Mi"}
    assert got["spec"]["containers"][0]["image"] == "nginx:1.27"
    env = dict(os.environ, KUBECONFIG=str(served.kubeconfig), HOME=str(served.state))
    refused = subprocess.run([KUBECTL, "patch", "pod", "resized", "--subresource", "resize", "--patch",
                              '{"spec":{"containers":[{"name":"c","resources":{"requests":{"memory":null}}}]}}'],
                             capture_output=True, text=True, env=env, timeout=60)
    assert refused.returncode == 1
    assert 'The Pod "resized" is invalid: spec.containers[0].resources.requests: Forbidden: resource requests ' \
           "cannot be removed" in refused.stderr


POD_LEVEL = """
apiVersion: v1
kind: Pod
metadata: {name: pod-level}
spec:
  nodeName: sim-node-0
  terminationGracePeriodSeconds: 0
  resources: {requests: {cpu: 200m, memory: 64Mi}}
  containers: [{name: c, image: "nginx:1.27"}]
"""


def test_kubectl_resizes_pod_level_resources_in_place(served: Serve) -> None:
    """KEP-5419 (InPlacePodLevelResourcesVerticalScaling, on at 1.37): the resize subresource
    takes new pod-level cpu, the node's kubelet reports it in ``status.resources``; removing
    them is 422 in upstream's words."""
    kubectl(served, "apply", "-f", "-", stdin=POD_LEVEL)

    def reported_cpu() -> str:
        return kubectl(served, "get", "pod", "pod-level", "-o", "jsonpath={.status.resources.requests.cpu}")

    assert eventually(reported_cpu) == "200m"
    out = kubectl(served, "patch", "pod", "pod-level", "--subresource", "resize", "--patch",
                  '{"spec":{"resources":{"requests":{"cpu":"400m"}}}}')
    assert out.strip() == "pod/pod-level patched"
    eventually(lambda: reported_cpu() == "400m")
    env = dict(os.environ, KUBECONFIG=str(served.kubeconfig), HOME=str(served.state))
    refused = subprocess.run([KUBECTL, "patch", "pod", "pod-level", "--subresource", "resize", "--type", "json",
                              "--patch", '[{"op":"remove","path":"/spec/resources"}]'],
                             capture_output=True, text=True, env=env, timeout=60)
    assert refused.returncode == 1
    assert refused.stderr == (  # (the containers alone would be BestEffort)
        'The Pod "pod-level" is invalid: \n'
        '* spec: Invalid value: "Burstable": Pod QOS Class may not change as a result of resizing\n'
        "* spec.resources: Forbidden: pod-level resources cannot be removed\n")


POD_LEVEL_BIG = """
apiVersion: v1
kind: Pod
metadata: {name: pod-level-big}
spec:
  terminationGracePeriodSeconds: 0
  resources: {requests: {cpu: "48"}}
  containers: [{name: c, image: "nginx:1.27", resources: {requests: {cpu: 100m}}}]
"""

POD_LEVEL_SHORT = """
apiVersion: v1
kind: Pod
metadata: {name: pod-level-short}
spec:
  resources: {requests: {cpu: 100m}}
  containers: [{name: c, image: "nginx:1.27", resources: {requests: {cpu: 500m}}}]
"""


def test_kubectl_pod_level_requests_are_validated_and_scheduled_by(served: Serve) -> None:
    """PodLevelResources: a pod requesting 48 cpus at pod level fits no 32-cpu node, where
    its containers' 100m would; a pod-level request below its containers' is 422 in
    upstream's words."""
    kubectl(served, "apply", "-f", "-", stdin=POD_LEVEL_BIG)
    got = kubectl(served, "get", "pod", "pod-level-big", "-o", "jsonpath={.spec.resources}")
    assert json.loads(got) == {"requests": {"cpu": "48"}}

    def unschedulable() -> str:
        return kubectl(served, "get", "pod", "pod-level-big", "-o",
                       'jsonpath={.status.conditions[?(@.type=="PodScheduled")].message}')

    assert "Insufficient cpu" in eventually(unschedulable)
    assert kubectl(served, "get", "pod", "pod-level-big", "-o", "jsonpath={.spec.nodeName}") == ""
    env = dict(os.environ, KUBECONFIG=str(served.kubeconfig), HOME=str(served.state))
    refused = subprocess.run([KUBECTL, "apply", "-f", "-"], input=POD_LEVEL_SHORT,
                             capture_output=True, text=True, env=env, timeout=60)
    assert refused.returncode == 1
    assert 'The Pod "pod-level-short" is invalid: spec.resources.requests[cpu]: Invalid value: "100m": must be ' \
           "greater than or equal to aggregate container requests of 500m" in refused.stderr
    kubectl(served, "delete", "pod", "pod-level-big", "--wait=false")


DEBUGGED = """
apiVersion: v1
kind: Pod
metadata: {name: debugged}
spec:
  nodeName: sim-node-0
  containers: [{name: c, image: "nginx:1.27"}]
"""


def test_kubectl_debug_runs_its_container_as_a_kubelet_reports_it(served: Serve) -> None:
    """``kubectl debug``: the simulated kubelet pulls the image, starts the container, reports it
    running (``kubectl wait`` on it returns) with the kubelet's events naming it; no ``started``
    in its status (the kubelet's prober sets it for regular and init containers only)."""
    kubectl(served, "apply", "-f", "-", stdin=DEBUGGED)
    kubectl(served, "wait", "--for=condition=Ready", "pod/debugged", "--timeout=30s")
    kubectl(served, "debug", "debugged", "-c", "dbg", "--image=busybox:1.36", "--", "sleep", "1d")
    kubectl(served, "wait", "pod/debugged", "--timeout=30s",
            "--for=jsonpath={.status.ephemeralContainerStatuses[0].state.running.startedAt}")
    [status] = json.loads(kubectl(served, "get", "pod", "debugged", "-o", "json"))["status"][
        "ephemeralContainerStatuses"]
    assert status["name"] == "dbg" and status["ready"] is False and "started" not in status
    assert status["imageID"] == "busybox:1.36@sha256:simulated"

    def events() -> list[str]:
        out = kubectl(served, "get", "events", "-o", "jsonpath={range .items[*]}{.reason}{' '}{end}",
                      "--field-selector", "involvedObject.fieldPath=spec.ephemeralContainers{dbg}")
        return out.split() if len(out.split()) == 4 else []

    assert sorted(eventually(events)) == ["Created", "Pulled", "Pulling", "Started"]


OBSERVED = """
apiVersion: v1
kind: Pod
metadata: {name: observed}
spec:
  terminationGracePeriodSeconds: 0
  containers: [{name: c, image: "nginx:1.27"}]
"""


def test_a_pods_observed_generation_follows_its_spec(served: Serve) -> None:
    """KEP-5067 over a socket: a pod the scheduler binds runs with the generation it was
    created at observed (the status and the kubelet's conditions; the binding's PodScheduled
    has none of its own, the kubelet's next status gives it one); ``kubectl set image`` makes
    a new generation, which the kubelet's next status reports, as the official client reads."""
    from kubernetes import client, config

    kubectl(served, "apply", "-f", "-", stdin=OBSERVED)
    kubectl(served, "wait", "--for=condition=Ready", "pod/observed", "--timeout=30s")
    assert kubectl(served, "get", "pod", "observed", "-o",
                   "jsonpath={.metadata.generation}/{.status.observedGeneration}") == "1/1"
    kubectl(served, "set", "image", "pod/observed", "c=nginx:1.28")
    kubectl(served, "wait", "pod/observed", "--timeout=30s", "--for=jsonpath={.status.observedGeneration}=2")
    with config.new_client_from_config(config_file=str(served.kubeconfig)) as api:
        pod = client.CoreV1Api(api).read_namespaced_pod("observed", "default")
    assert pod.metadata.generation == 2 and pod.status.observed_generation == 2
    by_type = {c.type: c.observed_generation for c in pod.status.conditions}
    assert by_type == {"PodReadyToStartContainers": 2, "Initialized": 2, "Ready": 2, "ContainersReady": 2,
                       "PodScheduled": 2}


BARE_NODE = """
apiVersion: v1
kind: Node
metadata: {{name: {name}}}
spec: {spec}
"""


def test_a_node_is_created_not_ready_tainted_and_the_lifecycle_controller_takes_it_off(served: Serve) -> None:
    """TaintNodesAtCreation (upstream's plugin/pkg/admission/nodetaint): ``kubectl create`` of a
    bare Node answers it with ``node.kubernetes.io/not-ready:NoSchedule``, a server dry run too;
    a taint of that key and effect the node brings (another value) is kept, not doubled. The
    node lifecycle controller then takes the taint off a node without conditions, as upstream's
    NoSchedule pass does (the node waits for its startup grace period to be found Unknown)."""
    not_ready = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}
    dry = json.loads(kubectl(served, "create", "--dry-run=server", "-o", "json", "-f", "-",
                             stdin=BARE_NODE.format(name="bare", spec="{}")))
    assert dry["spec"]["taints"] == [not_ready]
    created = json.loads(kubectl(served, "create", "-o", "json", "-f", "-",
                                 stdin=BARE_NODE.format(name="bare", spec="{}")))
    assert created["spec"]["taints"] == [not_ready]
    own = [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"},
           {"key": "node.kubernetes.io/not-ready", "value": "mine", "effect": "NoSchedule"}]
    brought = json.loads(kubectl(served, "create", "-o", "json", "-f", "-",
                                 stdin=BARE_NODE.format(name="bare-own", spec=json.dumps({"taints": own}))))
    assert brought["spec"]["taints"] == own
    try:
        eventually(lambda: kubectl(served, "get", "node", "bare", "-o", "jsonpath={.spec.taints}") == "")
        # the user's taint stays; the controller's key is its own whatever the value
        eventually(lambda: json.loads(kubectl(served, "get", "node", "bare-own", "-o", "jsonpath={.spec.taints}"))
                   == own[:1])
        # an update is no create: a taint taken off is not put back
        kubectl(served, "taint", "node", "bare-own", "dedicated-")
        assert kubectl(served, "get", "node", "bare-own", "-o", "jsonpath={.spec.taints}") == ""
    finally:
        kubectl(served, "delete", "node", "bare", "bare-own")
