"""What installing real projects' manifests (docs/api-compatibility.md, "Installing real
projects' manifests") found, each reduced to a minimal object, over a socket with kubectl."""

from __future__ import annotations

import os
import subprocess

import orjson

from tests.e2e.test_kubectl import KUBECTL, kubectl
from tests.test_cli import Serve

# calico's operator CRDs (Istio's spec.dscpMark) give an int-or-string field a type as well
MARKS = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: marks.example.com}
spec:
  group: example.com
  scope: Cluster
  names: {plural: marks, singular: mark, kind: Mark}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              dscpMark: {type: integer, x-kubernetes-int-or-string: true, pattern: ^.*}
              pools:
                type: array
                items:
                  type: object
                  properties:
                    name: {type: string}
                    disableBGPExport: {type: boolean, default: false}
"""

MARK = """
apiVersion: example.com/v1
kind: Mark
metadata: {name: %s}
spec:
  dscpMark: %s
  pools: [{name: default-ipv4-ippool}]
"""


def _installed(served: Serve) -> None:
    kubectl(served, "apply", "-f", "-", stdin=MARKS)
    kubectl(served, "wait", "--for", "condition=established", "--timeout=10s", "crd/marks.example.com")


def _generation(served: Serve, name: str) -> int:
    return int(kubectl(served, "get", "mark", name, "-o", "jsonpath={.metadata.generation}"))


def test_an_int_or_string_field_may_have_a_type_and_takes_both(served: Serve) -> None:
    _installed(served)
    kubectl(served, "create", "-f", "-", stdin=MARK % ("by-number", "23"))
    kubectl(served, "create", "-f", "-", stdin=MARK % ("by-name", "EF"))
    got = orjson.loads(kubectl(served, "get", "marks", "-o", "json"))
    assert {m["metadata"]["name"]: m["spec"]["dscpMark"] for m in got["items"]} == {"by-number": 23, "by-name": "EF"}


def test_a_write_that_leaves_a_default_out_is_no_new_generation(served: Serve) -> None:
    # calico's Installation, created with `kubectl create` and then diffed: the merge patch
    # replaces a list whose items the server defaulted; decoded, it is the object stored
    _installed(served)
    kubectl(served, "create", "-f", "-", stdin=MARK % ("diffed", "1"))
    assert KUBECTL
    env = dict(os.environ, KUBECONFIG=str(served.kubeconfig), HOME=str(served.state))
    diff = subprocess.run([KUBECTL, "diff", "-f", "-"], input=MARK % ("diffed", "1"), capture_output=True,
                          text=True, env=env, timeout=60)
    assert (diff.returncode, diff.stdout) == (0, ""), diff.stdout + diff.stderr
    kubectl(served, "patch", "mark", "diffed", "--type=merge", "-p",
            '{"spec": {"pools": [{"name": "default-ipv4-ippool"}]}}')
    assert _generation(served, "diffed") == 1
    stored = orjson.loads(kubectl(served, "get", "mark", "diffed", "-o", "json"))
    stored["spec"]["pools"] = [{"name": "default-ipv4-ippool"}]  # a PUT without the default
    kubectl(served, "replace", "-f", "-", stdin=orjson.dumps(stored).decode())
    assert _generation(served, "diffed") == 1
    kubectl(served, "patch", "mark", "diffed", "--type=merge", "-p", '{"spec": {"pools": [{"name": "other"}]}}')
    assert _generation(served, "diffed") == 2  # a change of the spec still is one


def test_a_server_side_apply_that_leaves_a_default_out_is_no_new_generation(served: Serve) -> None:
    # `kubectl apply --server-side` of calico's custom-resources.yaml, again and again: as
    # upstream's, each apply replaces the atomic list, defaulted before it is compared, so the
    # spec and its generation stay (and the resourceVersion: but for the applier's time in
    # managedFields, put back as upstream's registry does, nothing changed)
    _installed(served)
    kubectl(served, "apply", "--server-side", "-f", "-", stdin=MARK % ("applied", "1"))
    first = orjson.loads(kubectl(served, "get", "mark", "applied", "-o", "json"))
    for _ in range(2):
        kubectl(served, "apply", "--server-side", "-f", "-", stdin=MARK % ("applied", "1"))
        again = orjson.loads(kubectl(served, "get", "mark", "applied", "-o", "json"))
        assert again["spec"]["pools"] == [{"name": "default-ipv4-ippool", "disableBGPExport": False}]
        assert again["metadata"]["generation"] == 1
        assert again["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    kubectl(served, "apply", "--server-side", "-f", "-", stdin=MARK % ("applied", "2"))
    assert _generation(served, "applied") == 2
