"""DeviceTaintRules over a socket, as kubectl sees them: applied from YAML, listed by
``kubectl get devicetaintrules``, refused in upstream's words, their status read back."""

from __future__ import annotations

import json
import os
import subprocess

from tests.e2e.test_kubectl import KUBECTL, kubectl
from tests.test_cli import Serve

RULE = """
apiVersion: resource.k8s.io/v1
kind: DeviceTaintRule
metadata: {name: gpu-0-maintenance}
spec:
  deviceSelector: {driver: gpu.example.com, pool: node-1, device: gpu-0}
  taint: {key: example.com/maintenance, value: planned, effect: NoExecute}
"""


def test_kubectl_applies_lists_and_reads_a_device_taint_rule(served: Serve) -> None:
    assert "devicetaintrule.resource.k8s.io/gpu-0-maintenance created" in kubectl(served, "apply", "-f", "-",
                                                                                    stdin=RULE)
    listed = kubectl(served, "get", "devicetaintrules")
    header, row = listed.splitlines()
    assert header.split() == ["NAME", "CREATED", "AT"] and row.startswith("gpu-0-maintenance ")
    got = json.loads(kubectl(served, "get", "devicetaintrule", "gpu-0-maintenance", "-o", "json"))
    assert got["spec"]["taint"]["timeAdded"].endswith("Z") and got["metadata"]["generation"] == 1
    changed = RULE.replace("effect: NoExecute", "effect: NoSchedule")
    assert "configured" in kubectl(served, "apply", "-f", "-", stdin=changed)
    got = json.loads(kubectl(served, "get", "devicetaintrule", "gpu-0-maintenance", "-o", "json"))
    assert got["metadata"]["generation"] == 2 and got["spec"]["taint"]["effect"] == "NoSchedule"
    assert "devicetaintrules" in kubectl(served, "api-resources", "--api-group=resource.k8s.io")


def test_kubectl_apply_of_a_bad_rule_prints_upstreams_error(served: Serve) -> None:
    env = dict(os.environ, KUBECONFIG=str(served.kubeconfig), HOME=str(served.state))
    bad = RULE.replace("gpu-0-maintenance", "bad").replace("effect: NoExecute", "effect: PreferNoSchedule")
    r = subprocess.run([KUBECTL, "apply", "-f", "-"], input=bad, capture_output=True, text=True, env=env,
                       timeout=60)
    assert r.returncode != 0
    assert ('The DeviceTaintRule "bad" is invalid: spec.taint.effect: Unsupported value: "PreferNoSchedule": '
            'supported values: "NoExecute", "NoSchedule", "None"') in r.stderr


def test_kubectl_replace_without_a_resource_version_is_an_unconditional_update(served: Serve) -> None:
    # upstream's deviceTaintRuleStrategy.AllowUnconditionalUpdate is true, as the other DRA types':
    # a PUT without metadata.resourceVersion overwrites the stored rule (no 409, no 422)
    rule = RULE.replace("gpu-0-maintenance", "replaced")
    assert "created" in kubectl(served, "create", "-f", "-", stdin=rule)
    assert "replaced" in kubectl(served, "replace", "-f", "-", stdin=rule.replace("value: planned", "value: now"))
    got = json.loads(kubectl(served, "get", "devicetaintrule", "replaced", "-o", "json"))
    assert got["spec"]["taint"]["value"] == "now" and got["metadata"]["generation"] == 2
