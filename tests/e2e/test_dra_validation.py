"""resource.k8s.io/v1's validation over a socket, as real clients see it: kubectl apply of an
invalid DeviceClass prints upstream's error, and the official Python client's ApiException
carries the 422's causes."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.e2e.test_kubectl import KUBECTL, kubectl
from tests.test_cli import Serve

BAD_CLASS = """
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpus}
spec:
  selectors:
  - cel: {expression: "device.driver =="}
"""


def test_kubectl_apply_of_a_device_class_whose_selector_does_not_compile_prints_upstreams_error(
        served: Serve) -> None:
    assert KUBECTL
    env = dict(os.environ, KUBECONFIG=str(served.kubeconfig), HOME=str(served.state))
    r = subprocess.run([KUBECTL, "apply", "-f", "-"], input=BAD_CLASS, capture_output=True, text=True, env=env,
                       timeout=60)
    assert r.returncode != 0
    assert ('The DeviceClass "gpus" is invalid: spec.selectors[0].cel.expression: Invalid value: "device.driver ==": '
            "compilation failed: ERROR: <input>:1:17: Syntax error: mismatched input '<EOF>'") in r.stderr
    fixed = BAD_CLASS.replace('"device.driver =="', '"device.driver == \\"gpu.example.com\\""')
    assert "created" in kubectl(served, "apply", "-f", "-", stdin=fixed)


def test_the_python_clients_api_exception_carries_the_claims_causes(api: client.ApiClient) -> None:
    dra = client.ResourceV1Api(api)
    bad = client.ResourceV1ResourceClaim(metadata=client.V1ObjectMeta(name="probe"), spec=client.V1ResourceClaimSpec(
        devices=client.V1DeviceClaim(requests=[client.V1DeviceRequest(
            name="Bad_Name", exactly=client.V1ExactDeviceRequest(device_class_name="gpus", count=-1))])))
    with pytest.raises(ApiException) as e:
        dra.create_namespaced_resource_claim("default", bad)
    assert e.value.status == 422
    status = json.loads(e.value.body)
    assert status["reason"] == "Invalid"
    assert [(c["reason"], c["field"]) for c in status["details"]["causes"]] == [
        ("FieldValueInvalid", "spec.devices.requests[0].name"),
        ("FieldValueInvalid", "spec.devices.requests[0].exactly.count")]
    bad.spec.devices.requests[0].name, bad.spec.devices.requests[0].exactly.count = "gpu", None
    created = dra.create_namespaced_resource_claim("default", bad)
    assert (created.spec.devices.requests[0].exactly.allocation_mode, created.spec.devices.requests[0].exactly.count) \
        == ("ExactCount", 1)
