"""What platform teams' clients ask of a cluster, where this server used to answer otherwise than
kube-apiserver: a pod log's options validated before the pod is looked up (``LogREST.Get``), and
a SubjectAccessReview denied by RBAC without a reason, so ``kubectl auth can-i`` prints ``no``; a
TokenRequest's bound object looked up (``kubectl create token --bound-object-kind``); the 1 MiB
limit of a Secret's data and a ConfigMap's binaryData counted in decoded bytes."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from kubernetes import client, config

from tests.e2e.test_kubectl import KUBECTL, kubectl
from tests.e2e.test_kubernetes_client import bearer
from tests.test_cli import Serve, running, start_serve


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    with running(start_serve(tmp_path_factory.mktemp("sweep"), scheduler=True, extra=("--nodes", "1"))) as s:
        yield s


@pytest.fixture(scope="module")
def core(served: Serve) -> Iterator[client.CoreV1Api]:
    api = config.new_client_from_config(config_file=str(served.kubeconfig))
    try:
        yield client.CoreV1Api(api)
    finally:
        api.close()


@pytest.fixture(scope="module")
def running_pod(served: Serve, core: client.CoreV1Api) -> str:
    kubectl(served, "run", "logs-0", "--image=nginx:1.27")
    deadline = time.monotonic() + 30
    while core.read_namespaced_pod("logs-0", "default").status.phase != "Running":
        assert time.monotonic() < deadline, "the pod did not run within 30 s"
        time.sleep(0.2)
    return "logs-0"


def _raw(served: Serve, path: str) -> httpx.Response:
    return httpx.get(served.url + path, headers=bearer(served), timeout=30)


# --------------------------------------------------------------------------- pods/log options

def test_valid_log_options_read_the_running_container(core: client.CoreV1Api, running_pod: str) -> None:
    assert core.read_namespaced_pod_log(running_pod, "default", tail_lines=10, limit_bytes=100,
                                        since_seconds=60, timestamps=True) == ""


@pytest.mark.parametrize(("options", "message"), [
    ({"tail_lines": -1}, "tailLines: Invalid value: -1: must be greater than or equal to 0"),
    ({"limit_bytes": 0}, "limitBytes: Invalid value: 0: must be greater than 0"),
    ({"since_seconds": 0}, "sinceSeconds: Invalid value: 0: must be greater than 0"),
])
def test_out_of_range_log_options_are_422_against_podlogoptions(core: client.CoreV1Api, running_pod: str,
                                                                options: dict[str, Any], message: str) -> None:
    with pytest.raises(client.ApiException) as e:
        core.read_namespaced_pod_log(running_pod, "default", **options)
    assert e.value.status == 422
    status = yaml.safe_load(e.value.body)
    assert status["reason"] == "Invalid"
    assert status["message"] == f'PodLogOptions "{running_pod}" is invalid: {message}'
    assert status["details"]["kind"] == "PodLogOptions" and status["details"]["name"] == running_pod


def test_log_options_are_validated_before_the_pod_is_looked_up(served: Serve) -> None:
    r = _raw(served, "/api/v1/namespaces/default/pods/no-such-pod/log?sinceSeconds=5"
                     "&sinceTime=2026-01-01T00:00:00Z")
    assert r.status_code == 422, r.text
    assert r.json()["message"] == ('PodLogOptions "no-such-pod" is invalid: : Forbidden: at most one of '
                                   "`sinceTime` or `sinceSeconds` may be specified")


def test_a_log_option_that_is_not_a_number_is_400(served: Serve, running_pod: str) -> None:
    r = _raw(served, f"/api/v1/namespaces/default/pods/{running_pod}/log?tailLines=ten")
    assert r.status_code == 400, r.text
    assert r.json()["reason"] == "BadRequest"
    assert r.json()["message"] == 'strconv.ParseInt: parsing "ten": invalid syntax'


@pytest.mark.parametrize("since_time", ["2024-01-01", "2024-01-01T00:00:00", "2024-13-01T00:00:00Z"])
def test_a_log_since_time_is_an_rfc_3339_time(served: Serve, running_pod: str, since_time: str) -> None:
    r = _raw(served, f"/api/v1/namespaces/default/pods/{running_pod}/log?sinceTime={since_time}")
    assert r.status_code == 400, r.text
    assert r.json()["message"].startswith(f'parsing time "{since_time}"')
    ok = _raw(served, f"/api/v1/namespaces/default/pods/{running_pod}/log?sinceTime=2024-01-01T00:00:00%2B01:00")
    assert ok.status_code == 200, ok.text


def test_a_log_stream_is_one_of_upstreams(served: Serve, running_pod: str) -> None:
    ok = _raw(served, f"/api/v1/namespaces/default/pods/{running_pod}/log?stream=Stderr")
    assert ok.status_code == 200 and ok.text == ""
    r = _raw(served, f"/api/v1/namespaces/default/pods/{running_pod}/log?stream=Stdin")
    assert r.status_code == 422
    assert r.json()["details"]["causes"][0]["field"] == "stream"
    both = _raw(served, f"/api/v1/namespaces/default/pods/{running_pod}/log?stream=Stdout&tailLines=5")
    assert both.status_code == 422
    assert "`tailLines` and specific `stream` are mutually exclusive for now" in both.json()["message"]


UNSCHEDULABLE = """
apiVersion: v1
kind: Pod
metadata: {name: nowhere}
spec:
  nodeSelector: {no-such-label: "true"}
  initContainers: [{name: setup, image: busybox}]
  containers: [{name: a, image: nginx}, {name: b, image: nginx}]
"""


def test_a_pod_without_a_node_has_an_empty_log(served: Serve, core: client.CoreV1Api) -> None:
    kubectl(served, "apply", "-f", "-", stdin=UNSCHEDULABLE)
    assert core.read_namespaced_pod("nowhere", "default").spec.node_name is None
    assert core.read_namespaced_pod_log("nowhere", "default", container="a") == ""
    with pytest.raises(client.ApiException) as e:
        core.read_namespaced_pod_log("nowhere", "default")
    assert e.value.status == 400
    assert yaml.safe_load(e.value.body)["message"] == ("a container name must be specified for pod nowhere, choose "
                                                       "one of: [a b] or one of the init containers: [setup]")


# --------------------------------------------------------------------------- auth can-i

@pytest.fixture(scope="module")
def rbac(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    with running(start_serve(tmp_path_factory.mktemp("sweep-rbac"),
                             extra=("--authorization-mode", "RBAC"))) as s:
        yield s


def test_auth_can_i_prints_a_bare_no_when_rbac_denies(rbac: Serve) -> None:
    env = dict(os.environ, KUBECONFIG=str(rbac.kubeconfig), HOME=str(rbac.state))
    assert KUBECTL
    r = subprocess.run([KUBECTL, "auth", "can-i", "create", "pods", "--as=bob"], capture_output=True, text=True,
                       env=env, timeout=60)
    assert (r.returncode, r.stdout) == (1, "no\n"), r.stderr
    assert kubectl(rbac, "auth", "can-i", "create", "pods").strip() == "yes"


# --------------------------------------------------------------------------- kubectl create token

def _kubectl_fails(served: Serve, *args: str) -> str:
    env = dict(os.environ, KUBECONFIG=str(served.kubeconfig), HOME=str(served.state))
    assert KUBECTL
    r = subprocess.run([KUBECTL, *args], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode != 0, r.stdout
    return r.stderr


def _claims(token: str) -> dict[str, object]:
    payload = token.split(".")[1]
    claims: dict[str, object] = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    return claims


def test_a_token_bound_to_a_pod_names_the_pod_and_its_node(served: Serve, core: client.CoreV1Api,
                                                           running_pod: str) -> None:
    pod = core.read_namespaced_pod(running_pod, "default")
    node = core.read_node(pod.spec.node_name)
    token = kubectl(served, "create", "token", "default", "--bound-object-kind=Pod",
                    f"--bound-object-name={running_pod}").strip()
    kube = _claims(token)["kubernetes.io"]
    assert isinstance(kube, dict)
    assert kube["pod"] == {"name": running_pod, "uid": pod.metadata.uid}
    assert kube["node"] == {"name": node.metadata.name, "uid": node.metadata.uid}


def test_a_token_bound_to_a_missing_or_other_object_is_refused(served: Serve, core: client.CoreV1Api,
                                                               running_pod: str) -> None:
    missing = _kubectl_fails(served, "create", "token", "default", "--bound-object-kind=Pod",
                             "--bound-object-name=no-such-pod")
    assert 'pods "no-such-pod" not found' in missing
    kubectl(served, "create", "serviceaccount", "other")
    other = _kubectl_fails(served, "create", "token", "other", "--bound-object-kind=Pod",
                           f"--bound-object-name={running_pod}")
    assert ('cannot bind token for serviceaccount "other" to pod running with different serviceaccount name.'
            in other)
    stale = _kubectl_fails(served, "create", "token", "default", "--bound-object-kind=Pod",
                           f"--bound-object-name={running_pod}", "--bound-object-uid=not-its-uid")
    assert ('Operation cannot be fulfilled on Pod "logs-0": the UID in the bound object reference (not-its-uid) '
            "does not match the UID in record") in stale
    with pytest.raises(client.ApiException) as e:
        core.create_namespaced_service_account_token("default", "default", client.AuthenticationV1TokenRequest(
            spec=client.V1TokenRequestSpec(audiences=[], bound_object_ref=client.V1BoundObjectReference(
                kind="Secret", api_version="v1", name="gone"))))
    assert e.value.status == 404


def test_a_token_under_ten_minutes_is_refused_in_upstreams_words(served: Serve) -> None:
    assert ('error: failed to create token: TokenRequest.authentication.k8s.io "" is invalid: '
            "spec.expirationSeconds: Invalid value: 60: may not specify a duration less than 10 minutes"
            in _kubectl_fails(served, "create", "token", "default", "--duration=1m"))


# --------------------------------------------------------------------------- 1 MiB of data, decoded

def test_the_1mib_limit_counts_decoded_bytes_of_a_secret_and_of_binary_data(served: Serve,
                                                                             tmp_path: Path) -> None:
    blob = tmp_path / "blob.bin"
    blob.write_bytes(os.urandom(900_000))  # 1.2 MB once in base64: under the limit, as upstream counts it
    kubectl(served, "create", "secret", "generic", "blob", f"--from-file={blob}")
    kubectl(served, "create", "configmap", "blob", f"--from-file={blob}")  # not UTF-8: binaryData
    cm = json.loads(kubectl(served, "get", "configmap", "blob", "-o", "json"))
    assert set(cm["binaryData"]) == {"blob.bin"}
    blob.write_bytes(os.urandom(1024 * 1024 + 1))
    assert ('Secret "big" is invalid: data: Too long: may not be more than 1048576 bytes'
            in _kubectl_fails(served, "create", "secret", "generic", "big", f"--from-file={blob}"))
    assert ('ConfigMap "big" is invalid: : Too long: may not be more than 1048576 bytes'
            in _kubectl_fails(served, "create", "configmap", "big", f"--from-file={blob}"))


def test_a_quota_of_cpu_requests_refuses_a_pod_that_states_none(served: Serve, core: client.CoreV1Api) -> None:
    """Upstream checks a quota's constraints for every quota that matches, whatever the pod would
    be charged: a quota of ``requests.cpu`` alone refuses a pod whose containers request no cpu."""
    kubectl(served, "create", "namespace", "quota-sweep")
    kubectl(served, "-n", "quota-sweep", "create", "quota", "q", "--hard=requests.cpu=1")
    pod = client.V1Pod(metadata=client.V1ObjectMeta(name="p"),
                       spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="nginx")]))
    deadline = time.monotonic() + 10
    while True:  # the quota applies once the watch cache has it, moments after its write
        try:
            core.create_namespaced_pod("quota-sweep", pod)
        except client.ApiException as e:
            refused = e
            break
        core.delete_namespaced_pod("p", "quota-sweep", grace_period_seconds=0)
        assert time.monotonic() < deadline, "the quota never applied"
        time.sleep(0.2)
    status = yaml.safe_load(refused.body)
    assert (refused.status, status["reason"]) == (403, "Forbidden")
    assert status["message"] == 'pods "p" is forbidden: failed quota: q: must specify requests.cpu for: c'
    assert status["details"] == {"name": "p", "kind": "pods"}  # as upstream's StatusDetails: group omitted
    pod.spec.init_containers = [client.V1Container(name="init", image="busybox")]
    pod.spec.containers.append(client.V1Container(name="b", image="nginx", resources=client.V1ResourceRequirements(
        requests={"cpu": "100m"})))
    pod.spec.containers.append(client.V1Container(name="a", image="nginx"))
    with pytest.raises(client.ApiException) as grouped:
        core.create_namespaced_pod("quota-sweep", pod)
    assert yaml.safe_load(grouped.value.body)["message"] == ('pods "p" is forbidden: failed quota: q: must specify '
                                                             "requests.cpu for: a,c,init")


# --------------------------------------------------------------------------- validation of Nodes, Endpoints

BAD_NODE = """
apiVersion: v1
kind: Node
metadata: {name: tainted}
spec:
  taints: [{key: dedicated, value: gpu, effect: NoSchedulePlease}]
"""


def test_kubectl_apply_of_a_node_with_a_bad_taint_shows_upstreams_error(served: Serve) -> None:
    env = dict(os.environ, KUBECONFIG=str(served.kubeconfig), HOME=str(served.state))
    assert KUBECTL
    r = subprocess.run([KUBECTL, "apply", "-f", "-"], input=BAD_NODE, capture_output=True, text=True, env=env,
                       timeout=60)
    err = r.stderr
    assert r.returncode == 1
    assert 'The Node "tainted" is invalid: metadata.taints[0].effect: Unsupported value: "NoSchedulePlease": ' \
        'supported values: "NoSchedule", "PreferNoSchedule", "NoExecute"' in err, err


def test_the_python_client_reads_an_endpoints_422_with_its_causes(core: client.CoreV1Api) -> None:
    endpoints = client.V1Endpoints(metadata=client.V1ObjectMeta(name="loopback"), subsets=[client.V1EndpointSubset(
        addresses=[client.V1EndpointAddress(ip="127.0.0.1")], ports=[client.CoreV1EndpointPort(port=80)])])
    with pytest.raises(client.ApiException) as e:
        core.create_namespaced_endpoints("default", endpoints)
    status = json.loads(e.value.body)
    assert (e.value.status, status["reason"]) == (422, "Invalid")
    assert status["details"]["causes"] == [{
        "reason": "FieldValueInvalid", "field": "subsets[0].addresses[0].ip",
        "message": 'Invalid value: "127.0.0.1": may not be in the loopback range (127.0.0.0/8, ::1/128)'}]
