"""Everyday kubectl workflows that once differed from a real cluster, through the real kubectl
over the server's socket."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import time
from pathlib import Path
from typing import Any

from tests.e2e.test_kubectl import KUBECTL
from tests.e2e.test_kubectl_openapi import ok, run
from tests.test_cli import Serve


def edit(served: Serve, tmp: Path, sed: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``kubectl edit`` with a ``KUBE_EDITOR`` that edits the file with ``sed``; kubectl keeps
    a refused edit in ``tmp`` (its ``TMPDIR``)."""
    script = tmp / "editor.sh"
    script.write_text(f"#!/bin/sh\nsed -i '{sed}' \"$1\"\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    env = dict(os.environ, KUBECONFIG=str(served.kubeconfig), HOME=str(served.state), KUBE_EDITOR=str(script),
               TMPDIR=str(tmp))
    return subprocess.run([KUBECTL, "edit", *args], capture_output=True, text=True, env=env, timeout=60)


def test_edit_adding_an_unknown_field_names_the_patch_as_go_prints_it(served: Serve, tmp_path: Path) -> None:
    ok(served, "create", "configmap", "edited", "--from-literal=x=1")
    r = edit(served, tmp_path, r"s/^  name: edited$/  name: edited\n  foo: bar/", "configmap", "edited")
    assert r.returncode == 1 and 'error: configmaps "edited" is invalid' in r.stderr
    # upstream's strategic merge patch handler names the patch's own map (%+v), not the patched object
    # (kubectl reopens the editor with the errors on top, then keeps the file once it gives up)
    kept = "".join(p.read_text() for p in tmp_path.glob("kubectl-edit-*.yaml"))
    assert ('# * patch: Invalid value: "map[metadata:map[foo:bar]]": strict decoding error: '
            'unknown field "metadata.foo"') in kept
    ok_edit = edit(served, tmp_path, 's/x: "1"/x: "2"/', "configmap", "edited")
    assert ok_edit.returncode == 0, ok_edit.stderr
    assert ok(served, "get", "configmap", "edited", "-o", "jsonpath={.data.x}").stdout == "2"


CLAIM = """
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: %s}
spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}%s}
"""

INGRESS = """
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: %s}
spec: {defaultBackend: {service: {name: web, port: {number: 80}}}%s}
"""


def test_a_new_claim_and_ingress_get_the_default_class_in_the_create_answer(served: Serve) -> None:
    """DefaultStorageClass and DefaultIngressClass admission: the class is in what the create
    answers (``kubectl apply -o jsonpath``), not written later; the newest default wins."""
    def created(manifest: str) -> str:
        return ok(served, "create", "-f", "-", "-o", "jsonpath={.spec.storageClassName}{.spec.ingressClassName}",
                  stdin=manifest).stdout

    assert created(CLAIM % ("before", "")) == ""  # no default yet: none set
    assert created(INGRESS % ("before", "")) == ""
    for n in ("old", "new"):
        ok(served, "create", "-f", "-", stdin=f"""
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {{name: {n}-sc, annotations: {{storageclass.kubernetes.io/is-default-class: "true"}}}}
provisioner: example.com/none
---
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata: {{name: {n}-ic, annotations: {{ingressclass.kubernetes.io/is-default-class: "true"}}}}
spec: {{controller: example.com/none}}
""")
        if n == "old":
            time.sleep(1.1)  # a second apart: the newest is the later one
    assert created(CLAIM % ("defaulted", "")) == "new-sc"
    assert created(CLAIM % ("chosen", ", storageClassName: old-sc")) == "old-sc"
    assert created(CLAIM % ("none", ', storageClassName: ""')) == ""  # "" asks for no class
    beta = CLAIM.replace("{name: %s}", "{name: %s, annotations: {volume.beta.kubernetes.io/storage-class: old-sc}}")
    assert created(beta % ("beta", "")) == ""
    assert created(INGRESS % ("defaulted", "")) == "new-ic"
    assert created(INGRESS % ("chosen", ", ingressClassName: old-ic")) == "old-ic"
    legacy = INGRESS.replace("{name: %s}", "{name: %s, annotations: {kubernetes.io/ingress.class: nginx}}")
    assert created(legacy % ("legacy", "")) == ""


def test_a_claim_grows_only_bound_and_where_its_class_allows_expansion(served: Serve) -> None:
    """PersistentVolumeClaimResize admission, through ``kubectl patch`` as a user resizes a claim."""
    ok(served, "create", "-f", "-", stdin="""
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: grows}
provisioner: example.com/none
allowVolumeExpansion: true
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: fixed}
provisioner: example.com/none
""")
    for claim, sc in (("growing", "grows"), ("stuck", "fixed")):
        ok(served, "create", "-f", "-", stdin=CLAIM % (claim, f", storageClassName: {sc}"))
    bigger = '{"spec":{"resources":{"requests":{"storage":"2Gi"}}}}'
    r = run(served, "patch", "pvc", "growing", "-p", bigger)
    # an unbound claim's request is refused by its update validation, which upstream's store runs
    # before the validating admission (so the plugin's 'Only bound persistent volume claims can be
    # expanded' is not reached through the API)
    assert r.returncode == 1
    assert ('The PersistentVolumeClaim "growing" is invalid: spec: Forbidden: spec is immutable after creation '
            "except resources.requests and volumeAttributesClassName for bound claims") in r.stderr
    for claim in ("growing", "stuck"):
        ok(served, "patch", "pvc", claim, "--subresource=status", "-p", '{"status":{"phase":"Bound"}}')
    ok(served, "patch", "pvc", "growing", "-p", bigger)
    assert ok(served, "get", "pvc", "growing", "-o", "jsonpath={.spec.resources.requests.storage}").stdout == "2Gi"
    r = run(served, "patch", "pvc", "stuck", "-p", bigger)
    assert r.returncode == 1
    assert ('persistentvolumeclaims "stuck" is forbidden: only dynamically provisioned pvc can be resized and the '
            "storageclass that provisions the pvc must support resize") in r.stderr
    ok(served, "label", "pvc", "stuck", "size=same")  # an update that does not grow it is no concern of the plugin


def test_a_local_load_balancer_gets_a_health_check_node_port_kept_until_it_is_no_longer_local(served: Serve) -> None:
    """Upstream's allocHealthCheckNodePort, patchAllocatedValues, dropTypeDependentFields and
    their validation, through ``kubectl``."""
    def spec(name: str) -> dict[str, Any]:
        r = ok(served, "get", "service", name, "-o", "json")
        return dict(json.loads(r.stdout)["spec"])

    ok(served, "create", "-f", "-", stdin="""
apiVersion: v1
kind: Service
metadata: {name: lb}
spec: {type: LoadBalancer, externalTrafficPolicy: Local, selector: {app: lb}, ports: [{port: 80}]}
""")
    port = spec("lb")["healthCheckNodePort"]
    assert isinstance(port, int) and 30000 <= port <= 32767 and port != spec("lb")["ports"][0]["nodePort"]
    ok(served, "label", "service", "lb", "x=y")  # an update leaving it out keeps it
    assert spec("lb")["healthCheckNodePort"] == port
    other = port + 1 if port < 32767 else port - 1
    r = run(served, "patch", "service", "lb", "-p", json.dumps({"spec": {"healthCheckNodePort": other}}))
    assert r.returncode == 1 and "spec.healthCheckNodePort: Forbidden: field is immutable" in r.stderr
    ok(served, "patch", "service", "lb", "-p", '{"spec":{"externalTrafficPolicy":"Cluster"}}')
    assert "healthCheckNodePort" not in spec("lb")  # no longer needed: let go
    ok(served, "patch", "service", "lb", "-p", '{"spec":{"externalTrafficPolicy":"Local"}}')
    assert isinstance(spec("lb")["healthCheckNodePort"], int)  # needed again: allocated again
    r = run(served, "create", "-f", "-", stdin="""
apiVersion: v1
kind: Service
metadata: {name: np}
spec: {type: NodePort, healthCheckNodePort: 31999, selector: {app: np}, ports: [{port: 80}]}
""")
    assert r.returncode == 1
    assert ("spec.healthCheckNodePort: Invalid value: 31999: may only be set when `type` is 'LoadBalancer' and "
            "`externalTrafficPolicy` is 'Local'") in r.stderr
    r = run(served, "create", "-f", "-", stdin="""
apiVersion: v1
kind: Service
metadata: {name: lb-out}
spec: {type: LoadBalancer, externalTrafficPolicy: Local, healthCheckNodePort: 80, ports: [{port: 80}]}
""")  # refused in the allocator's words (a 422 here; upstream answers its allocator's error as a 500)
    assert r.returncode == 1
    assert ("spec.healthCheckNodePort: Invalid value: 80: provided port is not in the valid range. The range of "
            "valid ports is 30000-32767") in r.stderr, r.stderr
    assert run(served, "get", "service", "lb-out").returncode == 1
