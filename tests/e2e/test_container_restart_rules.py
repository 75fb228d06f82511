"""kubectl applies pods whose containers set their own restart policy and rules
(ContainerRestartRules, RestartAllContainersOnContainerExits, on in 1.37): the pod of
the restart policy documentation, and one as LeaderWorkerSet's in-place group restart
makes it, with an agent sidecar that restarts every container when it exits 88. A rule
without a policy is refused as kube-apiserver prints it. The server's checks in full are
tests/api/test_container_restart_rules.py."""

from __future__ import annotations

import json
import os
import subprocess

from tests.e2e.test_kubectl import KUBECTL, kubectl
from tests.test_cli import Serve

# the documentation's example (concepts/workloads/pods/pod-lifecycle, "Container restart
# rules"): restart in place on exit code 42, else never
RESTART_ON_EXIT_CODES = """
apiVersion: v1
kind: Pod
metadata:
  name: restart-on-exit-codes
spec:
  restartPolicy: Never
  containers:
  - name: restart-on-exit-codes
    image: registry.k8s.io/busybox:1.27.2
    command: ['sh', '-c', 'sleep 60 && exit 0']
    restartPolicy: Never
    restartPolicyRules:
    - action: Restart
      exitCodes:
        operator: In
        values: [42]
"""

# a leader pod as LWS's in-place restart shapes it: a restartable init container (the
# agent) whose exit 88 restarts the whole group's containers, and a worker whose failures
# ask for the same
LWS_LEADER = """
apiVersion: v1
kind: Pod
metadata:
  name: lws-leader-0
  labels: {leaderworkerset.sigs.k8s.io/name: lws}
spec:
  initContainers:
  - name: agent
    image: registry.k8s.io/lws/agent:v0.8.0
    restartPolicy: Always
    readinessProbe:
      httpGet: {path: /ready, port: 8080}
    restartPolicyRules:
    - action: RestartAllContainers
      exitCodes: {operator: In, values: [88]}
  containers:
  - name: worker
    image: registry.k8s.io/pause:3.10
    restartPolicy: Always
    restartPolicyRules:
    - action: RestartAllContainers
      exitCodes: {operator: In, values: [1, 2]}
"""


def test_kubectl_applies_pods_with_container_restart_rules(served: Serve) -> None:
    assert "created" in kubectl(served, "apply", "-f", "-", stdin=RESTART_ON_EXIT_CODES)
    assert "created" in kubectl(served, "apply", "-f", "-", stdin=LWS_LEADER)
    docs = json.loads(kubectl(served, "get", "pod", "restart-on-exit-codes", "-o", "json"))
    [c] = docs["spec"]["containers"]
    assert c["restartPolicy"] == "Never"
    assert c["restartPolicyRules"] == [{"action": "Restart", "exitCodes": {"operator": "In", "values": [42]}}]
    lws = json.loads(kubectl(served, "get", "pod", "lws-leader-0", "-o", "json"))
    [agent] = lws["spec"]["initContainers"]
    assert agent["restartPolicyRules"] == [
        {"action": "RestartAllContainers", "exitCodes": {"operator": "In", "values": [88]}}]
    assert lws["spec"]["containers"][0]["restartPolicyRules"][0]["exitCodes"]["values"] == [1, 2]
    # a second apply finds nothing changed: the fields round-trip as kubectl sent them
    assert "unchanged" in kubectl(served, "apply", "-f", "-", stdin=LWS_LEADER)
    # and server-side apply owns them (restartPolicyRules an atomic list)
    ssa = LWS_LEADER.replace("name: lws-leader-0", "name: lws-leader-1")
    assert "serverside-applied" in kubectl(served, "apply", "--server-side", "-f", "-", stdin=ssa)
    applied = json.loads(kubectl(served, "get", "pod", "lws-leader-1", "-o", "json", "--show-managed-fields"))
    [entry] = [m for m in applied["metadata"]["managedFields"] if m["operation"] == "Apply"]
    worker_fields = entry["fieldsV1"]["f:spec"]["f:containers"]['k:{"name":"worker"}']
    assert worker_fields["f:restartPolicyRules"] == {} and worker_fields["f:restartPolicy"] == {}


def test_kubectl_prints_a_rule_without_a_restart_policy_as_upstream_does(served: Serve) -> None:
    assert KUBECTL
    manifest = RESTART_ON_EXIT_CODES.replace("name: restart-on-exit-codes\nspec", "name: no-policy\nspec") \
        .replace("    restartPolicy: Never\n    restartPolicyRules", "    restartPolicyRules")
    env = dict(os.environ, KUBECONFIG=str(served.kubeconfig), HOME=str(served.state))
    r = subprocess.run([KUBECTL, "apply", "-f", "-"], input=manifest, capture_output=True, text=True, env=env,
                       timeout=60)
    assert r.returncode == 1
    assert r.stderr.strip().endswith(
        'The Pod "no-policy" is invalid: spec.containers[0].restartPolicy: Required value: '
        "must specify restartPolicy when restart rules are used"), r.stderr
