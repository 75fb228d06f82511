"""Less common kubectl habits, with the real kubectl against one ``controlplane serve`` (the
e2e conftest's) over a socket, where they were answered otherwise than kube-apiserver does."""

from __future__ import annotations

import os
import subprocess

from tests.e2e.test_kubectl import KUBECTL, kubectl
from tests.e2e.test_kubectl_sweep import failing
from tests.test_cli import Serve


def test_a_field_selector_is_read_without_trimming_spaces(served: Serve) -> None:
    """Upstream's fields.ParseSelector splits each term at its operator and trims nothing
    (kubectl trims only the flag's ends): ``metadata.name = x`` names the field
    ``"metadata.name "``, which the field label conversion refuses (400), and
    ``metadata.name= x`` asks for the name " x", which no object has. Both selected ``x``
    here, so a selector that fails on a real cluster worked against this one."""
    kubectl(served, "create", "configmap", "spaced")
    kubectl(served, "run", "spaced", "--image=nginx")
    err = failing(served, "get", "configmaps", "--field-selector", "metadata.name = spaced")
    assert err.strip() == (
        'Error from server (BadRequest): Unable to find "/v1, Resource=configmaps" that match label selector "", '
        'field selector "metadata.name = spaced": "metadata.name " is not a known field selector: only '
        '"metadata.name", "metadata.namespace"')
    err = failing(served, "get", "pods", "--field-selector", "metadata.name=spaced, status.phase=Pending")
    assert err.strip().endswith('field label not supported:  status.phase')
    assert kubectl(served, "get", "configmaps", "--field-selector", "metadata.name= spaced", "-o", "name") == ""
    assert kubectl(served, "get", "pods", "--field-selector", "metadata.name=spaced,status.phase=Pending",
                   "-o", "name") == "pod/spaced\n"
    assert kubectl(served, "get", "configmaps", "--field-selector", "metadata.name=spaced",
                   "-o", "name") == "configmap/spaced\n"


def _run(served: Serve, *args: str, stdin: str | None = None) -> tuple[str, str]:
    """kubectl ``args``, which must succeed: its stdout and stderr (where its warnings go)."""
    assert KUBECTL
    env = dict(os.environ, KUBECONFIG=str(served.kubeconfig), HOME=str(served.state))
    r = subprocess.run([KUBECTL, *args], capture_output=True, text=True, env=env, input=stdin, timeout=60)
    assert r.returncode == 0, (args, r.stderr)
    return r.stdout, r.stderr


WARNED_POD = """
apiVersion: v1
kind: Pod
metadata:
  name: warned
  annotations: {scheduler.alpha.kubernetes.io/critical-pod: ""}
spec:
  nodeSelector: {beta.kubernetes.io/os: linux}
  containers:
  - name: c
    image: nginx
    ports: [{containerPort: 80}, {containerPort: 80}]
    env: [{name: A, value: "1"}, {name: A, value: "2"}]
    resources: {limits: {memory: 100m}}
"""


def test_pods_and_workloads_get_upstreams_warnings(served: Serve) -> None:
    """kube-apiserver answers a valid write whose pod spec uses what is deprecated or
    ambiguous with ``Warning`` headers (pkg/api/pod/warnings.go; a pod's or workload's name
    that is no DNS label, from their strategies' WarningsOnCreate), which kubectl prints as
    ``Warning: ...``; a workload's update warns only when its generation moves. None came."""
    _, err = _run(served, "apply", "-f", "-", stdin=WARNED_POD)
    assert err.splitlines() == [
        'Warning: spec.nodeSelector[beta.kubernetes.io/os]: deprecated since v1.14; use "kubernetes.io/os" instead',
        'Warning: metadata.annotations[scheduler.alpha.kubernetes.io/critical-pod]: non-functional in v1.16+; '
        'use the "priorityClassName" field instead',
        'Warning: spec.containers[0].resources.limits[memory]: fractional byte value "100m" is invalid, must be an '
        "integer",  # and again for the requests, which default to the limits before upstream warns
        'Warning: spec.containers[0].resources.requests[memory]: fractional byte value "100m" is invalid, must be '
        "an integer",
        'Warning: spec.containers[0].env[1]: hides previous definition of "A", which may be dropped when using apply',
        "Warning: spec.containers[0].ports[1]: duplicate port definition with spec.containers[0].ports[0]",
    ]
    _, err = _run(served, "create", "deployment", "web.v1", "--image=nginx")
    assert err.splitlines() == [
        "Warning: metadata.name: this is used in Pod names and hostnames, which can result in surprising behavior; "
        "a DNS label is recommended: [must not contain dots]"]
    _, err = _run(served, "patch", "deployment", "web.v1", "-p",
                  '{"spec": {"template": {"spec": {"nodeSelector": {"beta.kubernetes.io/arch": "amd64"}}}}}')
    assert err.splitlines() == [
        "Warning: spec.template.spec.nodeSelector[beta.kubernetes.io/arch]: deprecated since v1.14; use "
        '"kubernetes.io/arch" instead']
    _, err = _run(served, "label", "deployment", "web.v1", "tier=web")  # the generation stays: no warning
    assert err == ""
    _, err = _run(served, "create", "deployment", "plain", "--image=nginx")
    assert err == ""
    _, err = _run(served, "create", "-f", "-", stdin="""
apiVersion: v1
kind: Pod
metadata: {generateName: gen-}
spec: {containers: [{name: c, image: nginx}]}
""")  # the name it gets is a DNS label
    assert err == ""


def test_an_ingress_class_annotation_is_warned_of(served: Serve) -> None:
    """Upstream's Ingress strategy warns at create of the deprecated class annotation without
    ``spec.ingressClassName``; none came."""
    ingress = """
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: annotated, annotations: {kubernetes.io/ingress.class: nginx}}
spec:
  defaultBackend: {service: {name: web, port: {number: 80}}}
"""
    _, err = _run(served, "apply", "-f", "-", stdin=ingress)
    assert err.splitlines() == [
        "Warning: annotation \"kubernetes.io/ingress.class\" is deprecated, please use 'spec.ingressClassName' "
        "instead"]
    _, err = _run(served, "annotate", "ingress", "annotated", "note=1")  # an update: none
    assert err == ""


def test_a_claims_beta_class_annotation_is_warned_of(served: Serve) -> None:
    """Upstream's PersistentVolumeClaim strategy warns at create and update of the beta
    storage class annotation and of a fractional storage request; none came."""
    claim = """
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: beta-class, annotations: {volume.beta.kubernetes.io/storage-class: slow}}
spec:
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 1.5}}
"""
    words = ['Warning: metadata.annotations[volume.beta.kubernetes.io/storage-class]: deprecated since v1.8; use '
             '"storageClassName" attribute instead',
             'Warning: spec.resources.requests[storage]: fractional byte value "1500m" is invalid, must be an integer']
    _, err = _run(served, "apply", "-f", "-", stdin=claim)
    assert err.splitlines() == words
    _, err = _run(served, "label", "pvc", "beta-class", "tier=db")
    assert err.splitlines() == words


def test_a_services_ignored_fields_are_warned_of(served: Serve) -> None:
    """Upstream's service strategy warns (GetWarningsForService) of what a headless or
    ExternalName Service ignores; none came."""
    service = """
apiVersion: v1
kind: Service
metadata: {name: headless}
spec:
  clusterIP: None
  sessionAffinity: ClientIP
  externalName: x.example.com
  ports: [{port: 80}]
"""
    _, err = _run(served, "apply", "-f", "-", stdin=service)
    assert err.splitlines() == ["Warning: spec.SessionAffinity is ignored for headless services",
                                'Warning: spec.externalName is ignored when spec.type is not "ExternalName"']


def test_overlapping_volume_paths_and_a_templates_apparmor_annotation_are_warned_of(served: Serve) -> None:
    """Upstream warns (pkg/api/pod/warnings.go) of a volume's items at overlapping paths, of a
    projected source overlapping the service account token, and of a template's deprecated
    AppArmor annotation without its field; none came."""
    deployment = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: overlapping}
spec:
  selector: {matchLabels: {app: overlapping}}
  template:
    metadata:
      labels: {app: overlapping}
      annotations: {container.apparmor.security.beta.kubernetes.io/c: runtime/default}
    spec:
      containers: [{name: c, image: nginx}]
      volumes:
      - name: conf
        configMap: {name: conf, items: [{key: a, path: etc}, {key: b, path: etc/b}]}
      - name: access
        projected:
          sources:
          - serviceAccountToken: {path: token}
          - secret: {name: extra, items: [{key: t, path: token}]}
"""
    _, err = _run(served, "apply", "-f", "-", stdin=deployment)
    assert err.splitlines() == [
        'Warning: volume "conf" (ConfigMap "conf"): overlapping paths: "etc/b" with "etc"',
        'Warning: volume "access" (Projected): overlapping paths: "token" (Secret "extra") with "token" '
        '(ServiceAccountToken)',
        'Warning: spec.template.metadata.annotations[container.apparmor.security.beta.kubernetes.io/c]: deprecated '
        'since v1.30; use the "appArmorProfile" field instead']


def test_a_services_source_ranges_and_external_ips_are_warned_of(served: Serve) -> None:
    """Upstream's GetWarningsForService warns of a load balancer source range not in standard
    form (here an IPv6 one not in RFC 5952 form) and of external IPs (deprecated); none came."""
    service = """
apiVersion: v1
kind: Service
metadata: {name: ranged}
spec:
  type: LoadBalancer
  externalIPs: [192.0.2.10]
  loadBalancerSourceRanges: [10.0.0.0/8, "2001:DB8::/32"]
  ports: [{port: 80}]
"""
    _, err = _run(served, "apply", "-f", "-", stdin=service)
    assert err.splitlines() == [
        "Warning: spec.externalIPs is deprecated and may no longer be implemented in some clusters",
        'Warning: spec.loadBalancerSourceRanges[1]: IPv6 CIDR value "2001:DB8::/32" should be in RFC 5952 '
        'canonical format ("2001:db8::/32")']


def test_an_indexed_jobs_many_completions_are_warned_of(served: Serve) -> None:
    """Upstream's Job strategy (WarningsForJobSpec) warns of an Indexed Job of more than 10^5
    completions and a parallelism above 10^4; none came. (Suspended: no pods are made.)"""
    job = """
apiVersion: batch/v1
kind: Job
metadata: {name: many-indexes}
spec:
  suspend: true
  completionMode: Indexed
  completions: 100001
  parallelism: 10001
  template:
    spec:
      restartPolicy: Never
      containers: [{name: c, image: busybox}]
"""
    _, err = _run(served, "apply", "-f", "-", stdin=job)
    assert err.splitlines() == [
        "Warning: spec: In Indexed Jobs with a number of completions higher than 10^5 and a parallelism higher than "
        "10^4, Kubernetes might not be able to track completedIndexes when a big number of indexes fail"]
    _run(served, "delete", "job", "many-indexes", "--wait=false")
