"""Why a workload has no pods, as a real cluster tells kubectl and the official client: a pod
create the API refuses (a quota, a missing service account) is a ``FailedCreate`` Warning event
on the ReplicaSet, Job, DaemonSet or StatefulSet in its controller's words, and the
ReplicaSet's and its Deployment's ``ReplicaFailure`` condition until creates succeed again
(upstream's RealPodControl, calculateStatus and syncRolloutStatus); ``kubectl events --for``
finds an apps/v1 or batch/v1 object's events; the quota's 403 names the pod by its generated
name, as validating admission sees it; a create in a namespace being deleted carries the
``NamespaceTerminating`` cause; and a stale uid or resourceVersion precondition is a 409 in
kube-apiserver's words. Against ``controlplane serve --nodes 1`` with its controllers, over a
socket."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.e2e.test_kubectl import KUBECTL, kubectl
from tests.test_cli import Serve, running, start_serve


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    with running(start_serve(tmp_path_factory.mktemp("refused"), scheduler=True, extra=("--nodes", "1"))) as s:
        yield s


def eventually(what: Callable[[], Any], timeout: float = 30) -> Any:
    """``what()`` once it is truthy."""
    deadline = time.monotonic() + timeout
    while not (got := what()):
        assert time.monotonic() < deadline, got
        time.sleep(0.2)
    return got


def conditions(served: Serve, what: str, namespace: str) -> dict[str, dict[str, Any]]:
    obj = json.loads(kubectl(served, "-n", namespace, "get", what, "-o", "json"))
    return {c["type"]: c for c in (obj.get("status") or {}).get("conditions") or ()}


EXCEEDED = "is forbidden: exceeded quota: pods, requested: pods=1, used: pods=1, limited: pods=1"
COMBINED = re.escape("(combined from similar events): ")  # the tenth refusal on (controllers/events.py)


def test_a_deployment_a_quota_refuses_says_why_until_the_quota_allows_it(served: Serve) -> None:
    kubectl(served, "create", "namespace", "capped")
    kubectl(served, "-n", "capped", "create", "quota", "pods", "--hard=pods=1")
    kubectl(served, "-n", "capped", "create", "deployment", "web", "--image=nginx", "--replicas=2")
    rs = eventually(lambda: kubectl(served, "-n", "capped", "get", "rs", "-o", "name").strip())
    failure = eventually(lambda: conditions(served, rs, "capped").get("ReplicaFailure"))
    name = rs.removeprefix("replicaset.apps/")
    assert failure["status"] == "True" and failure["reason"] == "FailedCreate"
    assert re.fullmatch(rf'pods "{name}-[a-z0-9]{{5}}" {EXCEEDED}', failure["message"]), failure
    copied = eventually(lambda: conditions(served, "deployment/web", "capped").get("ReplicaFailure"))
    assert copied == {"type": "ReplicaFailure", "status": "True", "reason": "FailedCreate",
                      "message": failure["message"], "lastUpdateTime": failure["lastTransitionTime"],
                      "lastTransitionTime": failure["lastTransitionTime"]}
    # kubectl describe shows the condition, and the refusals as the ReplicaSet controller's Warning events
    described = kubectl(served, "-n", "capped", "describe", rs).splitlines()
    assert any(line.split() == ["ReplicaFailure", "True", "FailedCreate"] for line in described), described
    refused = [line.split(None, 4) for line in described if line.split()[:2] == ["Warning", "FailedCreate"]]
    assert refused, described
    assert all(r[:2] == ["Warning", "FailedCreate"] and r[3] == "replicaset-controller" for r in refused), refused
    assert all(re.fullmatch(rf'(?:{COMBINED})?Error creating: pods "{name}-[a-z0-9]{{5}}" {EXCEEDED}', r[4])
               for r in refused), refused
    # room for both: the pod is made, and the conditions go
    kubectl(served, "-n", "capped", "patch", "quota", "pods", "-p", '{"spec": {"hard": {"pods": "5"}}}')
    eventually(lambda: "ReplicaFailure" not in conditions(served, rs, "capped"), timeout=90)
    eventually(lambda: "ReplicaFailure" not in conditions(served, "deployment/web", "capped"))
    assert len(kubectl(served, "-n", "capped", "get", "pods", "-l", "app=web", "-o", "name").split()) == 2


def test_a_missing_service_account_is_the_failed_create_of_a_job_daemonset_and_statefulset(served: Serve) -> None:
    """ServiceAccount admission refuses each pod; ``kubectl events --for`` finds the events by
    the object's kind, name and apiVersion (batch/v1, apps/v1)."""
    kubectl(served, "create", "namespace", "unnamed")
    spec: dict[str, Any] = {"serviceAccountName": "ghost", "containers": [{"name": "c", "image": "busybox"}]}
    template = {"metadata": {"labels": {"app": "x"}}, "spec": spec}
    selector = {"matchLabels": {"app": "x"}}
    manifests = [
        {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "once"}, "spec": {"template": {
            **template, "spec": {**spec, "restartPolicy": "Never"}}}},
        {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent"},
         "spec": {"selector": selector, "template": template}},
        {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db"},
         "spec": {"serviceName": "db", "replicas": 1, "selector": selector, "template": template}}]
    kubectl(served, "-n", "unnamed", "apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List",
                                                                          "items": manifests}))
    why = 'is forbidden: error looking up service account unnamed/ghost: serviceaccount "ghost" not found'
    for what, kind, message in (
            ("job/once", "Job", rf'Error creating: pods "once-" {why}'),  # (mutating admission: no name yet)
            ("daemonset/agent", "DaemonSet", rf'Error creating: pods "agent-" {why}'),
            ("statefulset/db", "StatefulSet", rf'create Pod db-0 in StatefulSet db failed error: pods "db-0" {why}')):
        def failed(what: str = what, kind: str = kind) -> list[str]:
            """The messages of the FailedCreate Warnings kubectl events prints for ``what``."""
            out = kubectl(served, "-n", "unnamed", "events", "--for", what, "--types=Warning")
            row = re.compile(rf" Warning +FailedCreate +{kind}/{what.split('/')[1]} +(.*)$")
            return [m.group(1) for line in out.splitlines() if (m := row.search(line))]
        seen = eventually(failed)
        assert all(re.fullmatch(f"(?:{COMBINED})?{message}", m) for m in seen), seen
    # each still writes its status (upstream's syncDaemonSet, performUpdate, syncJob), so kubectl
    # says what the sets wait for, where a StatefulSet's spec had looked unobserved
    def status(what: str) -> dict[str, Any]:
        return dict(json.loads(kubectl(served, "-n", "unnamed", "get", what, "-o", "json")).get("status") or {})
    assert eventually(lambda: status("daemonset/agent").get("desiredNumberScheduled")) == 1
    assert status("daemonset/agent")["currentNumberScheduled"] == 0
    assert eventually(lambda: status("statefulset/db").get("observedGeneration")) == 1
    assert status("statefulset/db")["replicas"] == 0
    assert KUBECTL
    waited = subprocess.run([KUBECTL, "-n", "unnamed", "rollout", "status", "statefulset/db", "--timeout=1s"],
                            capture_output=True, text=True, timeout=30,
                            env=dict(os.environ, KUBECONFIG=str(served.kubeconfig), HOME=str(served.state)))
    assert waited.stdout.splitlines()[0] == "Waiting for 1 pods to be ready...", waited
    job = eventually(lambda: status("job/once").get("startTime") and status("job/once"))
    assert "active" not in job and job["ready"] == 0, job


def test_a_replicaset_of_twelve_pods_describes_nine_creates_and_one_combined(served: Serve) -> None:
    """client-go's event aggregation, as kubectl describe shows a real cluster's: from the
    tenth different message of the same reason about an object, one event counts them."""
    kubectl(served, "create", "namespace", "many")
    kubectl(served, "-n", "many", "create", "deployment", "many", "--image=nginx", "--replicas=12")
    rs = eventually(lambda: kubectl(served, "-n", "many", "get", "rs", "-o", "name").strip())

    def created() -> list[str]:
        out = kubectl(served, "-n", "many", "get", "events", "--field-selector", "reason=SuccessfulCreate", "-o",
                      "jsonpath={range .items[*]}{.count} {.message}{'\\n'}{end}")
        return out.splitlines() if sum(int(line.split()[0]) for line in out.splitlines()) == 12 else []
    lines = eventually(created)
    name = rs.removeprefix("replicaset.apps/")
    assert sum(1 for line in lines if re.fullmatch(rf"1 Created pod: {name}-[a-z0-9]{{5}}", line)) == 9, lines
    assert sum(1 for line in lines if re.fullmatch(rf"3 {COMBINED}Created pod: {name}-[a-z0-9]{{5}}", line)) == 1
    described = kubectl(served, "-n", "many", "describe", rs)
    assert re.search(r"Normal +SuccessfulCreate +\S+ \(x3 over \S+\) +replicaset-controller +\(combined from "
                     rf"similar events\): Created pod: {name}-", described), described


def test_kubectl_events_for_finds_a_daemonsets_events(served: Serve) -> None:
    """Every controller's events name their object's apiVersion, which ``kubectl events --for``
    selects on (a DaemonSet's were written as v1 ones, and none were found)."""
    kubectl(served, "create", "namespace", "daemons")
    kubectl(served, "-n", "daemons", "apply", "-f", "-", stdin=json.dumps({
        "apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent"},
        "spec": {"selector": {"matchLabels": {"app": "agent"}}, "template": {
            "metadata": {"labels": {"app": "agent"}}, "spec": {"containers": [{"name": "a", "image": "agent:1"}]}}}}))
    out = eventually(lambda: kubectl(served, "-n", "daemons", "events", "--for", "daemonset/agent"))
    assert re.search(r"Normal +SuccessfulCreate +DaemonSet/agent +Created pod: agent-[a-z0-9]{5}", out), out


def test_a_create_in_a_namespace_being_deleted_names_its_cause(served: Serve, api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name="leaving")))
    core.create_namespaced_config_map("leaving", client.V1ConfigMap(metadata=client.V1ObjectMeta(
        name="held", finalizers=["example.com/hold"])))
    core.delete_namespace("leaving")
    try:
        with pytest.raises(ApiException) as e:
            core.create_namespaced_config_map("leaving", client.V1ConfigMap(metadata=client.V1ObjectMeta(
                generate_name="late-")))
        assert e.value.status == 403
        assert json.loads(e.value.body) == {
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "reason": "Forbidden",
            "code": 403, "message": 'configmaps "late-" is forbidden: unable to create new content in namespace '
                                    "leaving because it is being terminated",
            "details": {"name": "late-", "kind": "configmaps", "causes": [{
                "reason": "NamespaceTerminating", "message": "namespace leaving is being terminated",
                "field": "metadata.namespace"}]}}
    finally:
        core.patch_namespaced_config_map("held", "leaving", {"metadata": {"finalizers": None}})


def test_stale_preconditions_are_refused_in_kube_apiservers_words(served: Serve, api: client.ApiClient) -> None:
    """An update whose body carries another uid fails the storage's precondition check (an
    invalid-object StorageError); a delete's preconditions fail upstream's BeforeDelete, which
    names the object by its kind."""
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    cm = core.create_namespaced_config_map("default", client.V1ConfigMap(metadata=client.V1ObjectMeta(name="pre")))
    stale = client.V1ConfigMap(metadata=client.V1ObjectMeta(name="pre", uid="0d9c-recreated"), data={"a": "1"})
    with pytest.raises(ApiException) as e:
        core.replace_namespaced_config_map("pre", "default", stale)
    assert e.value.status == 409 and json.loads(e.value.body)["message"] == (
        'Operation cannot be fulfilled on configmaps "pre": StorageError: invalid object, Code: 4, Key: '
        "/registry/configmaps/default/pre, ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: UID in "
        f"precondition: 0d9c-recreated, UID in object meta: {cm.metadata.uid}")
    with pytest.raises(ApiException) as e:
        core.delete_namespaced_config_map("pre", "default", body=client.V1DeleteOptions(
            preconditions=client.V1Preconditions(uid="0d9c-recreated")))
    assert e.value.status == 409
    assert json.loads(e.value.body) == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "reason": "Conflict", "code": 409,
        "message": 'Operation cannot be fulfilled on ConfigMap "pre": the UID in the precondition (0d9c-recreated) '
                   f"does not match the UID in record ({cm.metadata.uid}). The object might have been deleted and "
                   "then recreated",
        "details": {"name": "pre", "kind": "ConfigMap"}}
    d = apps.create_namespaced_deployment("default", client.V1Deployment(
        metadata=client.V1ObjectMeta(name="pre"), spec=client.V1DeploymentSpec(
            replicas=0, selector=client.V1LabelSelector(match_labels={"app": "pre"}),
            template=client.V1PodTemplateSpec(
                metadata=client.V1ObjectMeta(labels={"app": "pre"}),
                spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="nginx")])))))
    with pytest.raises(ApiException) as e:
        apps.delete_namespaced_deployment("pre", "default", body=client.V1DeleteOptions(
            preconditions=client.V1Preconditions(resource_version="1")))
    assert e.value.status == 409
    body = json.loads(e.value.body)
    assert body["details"] == {"name": "pre", "group": "apps", "kind": "Deployment"}
    assert re.fullmatch(r'Operation cannot be fulfilled on Deployment\.apps "pre": the ResourceVersion in the '
                        r"precondition \(1\) does not match the ResourceVersion in record \([1-9][0-9]*\)\. The "
                        r"object might have been modified", body["message"]), body
    apps.delete_namespaced_deployment("pre", "default", body=client.V1DeleteOptions(
        preconditions=client.V1Preconditions(uid=d.metadata.uid)))
