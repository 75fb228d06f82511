"""Where the official Python client's own end-to-end tests (``kubernetes/e2e_test`` in
kubernetes-client/python) found this server answering otherwise than kube-apiserver, each
checked here through that client over the socket.

- A failed create's text: ``utils.create_from_yaml`` raises ``FailToCreateError``, whose
  message is the Status body as the server sent it, and the client's tests compare it with
  kube-apiserver's bytes: the members in ``metav1.Status``'s order (``details`` before
  ``code``), the empty ones left out, and the newline Go's JSON encoder ends every answer
  with (an object's, a list's and discovery's too).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, utils


def _pairs(body: bytes | str) -> Any:
    """``body`` decoded with every object as its list of (key, value) pairs, in the sent order."""
    return json.loads(body, object_pairs_hook=lambda pairs: pairs)


def _keys(pairs: list[tuple[str, Any]]) -> list[str]:
    return [k for k, _ in pairs]


def _member(pairs: list[tuple[str, Any]], key: str) -> Any:
    return next(v for k, v in pairs if k == key)


def test_a_conflicting_create_from_yaml_fails_with_upstreams_text(api: client.ApiClient, tmp_path: Path) -> None:
    manifest = tmp_path / "svc.yaml"
    manifest.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "mock-conflict"},
        "spec": {"ports": [{"port": 80}], "selector": {"app": "mock"}}}))
    utils.create_from_yaml(api, str(manifest), namespace="default")
    with pytest.raises(utils.FailToCreateError) as failed:
        utils.create_from_yaml(api, str(manifest), namespace="default")
    # as the client's test_create_from_multi_resource_yaml_with_conflict expects it of kube-apiserver
    assert str(failed.value) == (
        'Error from server (Conflict): {"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
        '"message":"services \\"mock-conflict\\" already exists","reason":"AlreadyExists",'
        '"details":{"name":"mock-conflict","kind":"services"},"code":409}\n')


def test_every_json_answer_ends_with_a_newline(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    core.create_namespaced_config_map("default", client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name="eol"), data={"a": "1"}))
    answers: dict[str, Any] = {  # the raw urllib3 responses
        "object": core.read_namespaced_config_map("eol", "default", _preload_content=False),
        "list": core.list_namespaced_config_map("default", _preload_content=False),
        "discovery": client.CoreApi(api).get_api_versions(_preload_content=False),
        "resources": core.get_api_resources(_preload_content=False),
    }
    for what, answer in answers.items():
        body = answer.data
        assert body.endswith(b"}\n") and not body.endswith(b"\n\n"), what
        json.loads(body)
    aggregated: Any = client.ApisApi(api).get_api_versions(_preload_content=False, _headers={
        "Accept": "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"})
    assert aggregated.headers["content-type"].startswith("application/json;g=apidiscovery.k8s.io")
    assert aggregated.data.endswith(b"}\n")
    with pytest.raises(client.ApiException) as failed:
        core.read_namespaced_config_map("absent", "default")
    assert failed.value.status == 404
    assert failed.value.body.endswith("}\n")


def test_an_invalid_objects_status_has_upstreams_member_order(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    with pytest.raises(client.ApiException) as failed:
        core.create_namespaced_config_map("default", client.V1ConfigMap(
            metadata=client.V1ObjectMeta(name="Not_A_Name")))
    assert failed.value.status == 422
    body: bytes = failed.value.body.encode() if isinstance(failed.value.body, str) else failed.value.body
    status = _pairs(body)
    assert _keys(status) == ["kind", "apiVersion", "metadata", "status", "message", "reason", "details", "code"]
    details = _member(status, "details")
    assert _keys(details) == ["name", "kind", "causes"]
    for cause in _member(details, "causes"):
        assert _keys(cause) == ["reason", "message", "field"]
    assert body.endswith(b"}\n")


def test_a_cause_without_a_field_has_none(api: client.ApiClient) -> None:
    """A static pod's resize is refused at the path ``""``, and upstream's cause then has no
    ``field`` at all (``omitempty``), not an empty one."""
    core = client.CoreV1Api(api)
    core.create_namespaced_pod("default", client.V1Pod(
        metadata=client.V1ObjectMeta(name="static", annotations={"kubernetes.io/config.mirror": "x"}),
        spec=client.V1PodSpec(node_name="n1", containers=[client.V1Container(  # (a mirror pod names its node)
            name="c", image="nginx", resources=client.V1ResourceRequirements(requests={"cpu": "100m"}))])))
    with pytest.raises(client.ApiException) as failed:
        core.patch_namespaced_pod_resize("static", "default", {"spec": {"containers": [
            {"name": "c", "resources": {"requests": {"cpu": "200m"}}}]}})
    assert failed.value.status == 422
    causes = _member(_member(_pairs(failed.value.body), "details"), "causes")
    assert [_keys(c) for c in causes] == [["reason", "message"]]
    assert _member(causes[0], "message") == "Forbidden: static pods cannot be resized"
