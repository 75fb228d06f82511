"""What a chart installs beside its workloads, with the real kubectl against ``controlplane serve``
(its controllers and two simulated nodes) over a socket: storage classes, claims bound by the
volume controller, StatefulSet claim templates, quotas that refuse, ingresses, network policies,
autoscalers, and their ``kubectl get`` columns."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator

import pytest
from kubernetes import client, config

from tests.e2e.test_kubectl import KUBECTL, kubectl
from tests.test_cli import Serve, running, start_serve

CHART = """
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: standard, annotations: {storageclass.kubernetes.io/is-default-class: "true"}}
provisioner: rancher.io/local-path
volumeBindingMode: WaitForFirstConsumer
---
apiVersion: v1
kind: Service
metadata: {name: db}
spec: {clusterIP: None, selector: {app: db}, ports: [{port: 5432}]}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  serviceName: db
  replicas: 2
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec:
      terminationGracePeriodSeconds: 0
      containers: [{name: pg, image: "postgres:16"}]
  volumeClaimTemplates:
  - metadata: {name: data}
    spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 10Gi}}}
---
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata: {name: nginx}
spec: {controller: k8s.io/ingress-nginx}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: web}
spec:
  ingressClassName: nginx
  tls: [{hosts: [web.example.com], secretName: web-tls}]
  rules:
  - host: web.example.com
    http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: db, port: {number: 5432}}}}]}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: db-only}
spec:
  podSelector: {matchLabels: {app: db}}
  ingress: [{from: [{podSelector: {matchLabels: {role: api}}}], ports: [{port: 5432}]}]
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: db}
spec: {maxUnavailable: 1, selector: {matchLabels: {app: db}}}
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    # as a kind cluster, where local-path-provisioner runs the default class's provisioner
    with running(start_serve(tmp_path_factory.mktemp("chart"), scheduler=True,
                             extra=("--nodes", "2", "--volume-provisioners", "rancher.io/local-path"))) as s:
        yield s


def wait_for(served: Serve, check: str, *args: str, timeout: float = 30.0) -> str:
    deadline = time.monotonic() + timeout
    while True:
        out = kubectl(served, *args)
        if check in out:
            return out
        assert time.monotonic() < deadline, out
        time.sleep(0.2)


def test_a_chart_applies_and_its_claims_bind(cluster: Serve) -> None:
    assert KUBECTL
    out = kubectl(cluster, "apply", "-f", "-", stdin=CHART)
    for created in ("storageclass.storage.k8s.io/standard created", "statefulset.apps/db created",
                    "ingress.networking.k8s.io/web created", "networkpolicy.networking.k8s.io/db-only created"):
        assert created in out
    kubectl(cluster, "rollout", "status", "statefulset/db", "--timeout=60s")
    for i in range(2):
        wait_for(cluster, "Bound", "get", "pvc", f"data-db-{i}")
    lines = kubectl(cluster, "get", "pvc").splitlines()
    assert lines[0].split() == ["NAME", "STATUS", "VOLUME", "CAPACITY", "ACCESS", "MODES", "STORAGECLASS",
                                "VOLUMEATTRIBUTESCLASS", "AGE"]
    assert lines[1].split()[:2] == ["data-db-0", "Bound"] and "10Gi" in lines[1] and "RWO" in lines[1]
    assert "standard (default)" in kubectl(cluster, "get", "storageclass")
    assert "web.example.com" in kubectl(cluster, "get", "ingress", "web") and "80, 443" in \
        kubectl(cluster, "get", "ingress", "web")
    assert "app=db" in kubectl(cluster, "get", "networkpolicy", "db-only")
    policy = json.loads(kubectl(cluster, "get", "networkpolicy", "db-only", "-o", "json"))
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    pv = json.loads(kubectl(cluster, "get", "pv", "-o", "json"))["items"]
    assert sorted(p["spec"]["claimRef"]["name"] for p in pv) == ["data-db-0", "data-db-1"]


def test_kubectl_generators_for_quotas_ingresses_and_autoscalers(cluster: Serve) -> None:
    kubectl(cluster, "create", "namespace", "team")
    kubectl(cluster, "-n", "team", "create", "quota", "q", "--hard=pods=1,requests.cpu=1")
    wait_for(cluster, "pods: 0/1", "-n", "team", "get", "quota", "q")
    kubectl(cluster, "-n", "team", "run", "one", "--image=nginx", "--overrides",
            '{"spec":{"containers":[{"name":"one","image":"nginx","resources":{"requests":{"cpu":"100m"}}}]}}')
    env_run = [KUBECTL or "kubectl", "-n", "team", "run", "two", "--image=nginx", "--overrides",
               '{"spec":{"containers":[{"name":"two","image":"nginx","resources":{"requests":{"cpu":"100m"}}}]}}']
    r = subprocess.run(env_run, capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, KUBECONFIG=str(cluster.kubeconfig), HOME=str(cluster.state)))
    assert r.returncode != 0 and 'pods "two" is forbidden: exceeded quota: q' in r.stderr
    assert "pods: 1/1" in kubectl(cluster, "-n", "team", "get", "quota", "q")
    kubectl(cluster, "-n", "team", "create", "ingress", "api", "--class=nginx",
            "--rule=api.example.com/v1*=api:8080")
    rule = json.loads(kubectl(cluster, "-n", "team", "get", "ingress", "api", "-o", "json"))["spec"]["rules"][0]
    assert rule["http"]["paths"][0]["pathType"] == "Prefix" and rule["host"] == "api.example.com"
    kubectl(cluster, "-n", "team", "create", "deployment", "api", "--image=nginx", "--replicas=0")
    kubectl(cluster, "-n", "team", "autoscale", "deployment", "api", "--min=2", "--max=5", "--cpu=50%")
    row = kubectl(cluster, "-n", "team", "get", "hpa", "api").splitlines()[1].split()
    assert row[:7] == ["api", "Deployment/api", "cpu:", "<unknown>/50%", "2", "5", "0"]


WEBHOOKS = """
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: policy-webhook}
webhooks:
- name: validate.policy.example.com
  rules: [{apiGroups: [""], apiVersions: ["v1"], operations: ["CREATE"], resources: ["configmaps"]}]
  admissionReviewVersions: ["v1"]
  sideEffects: None
  clientConfig: {service: {name: policy, namespace: policy-system, path: /validate}}
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: inject-webhook}
webhooks:
- name: inject.sidecar.example.com
  admissionReviewVersions: ["v1"]
  sideEffects: NoneOnDryRun
  clientConfig: {url: "https://inject.example.com/mutate"}
"""


def test_a_chart_installs_its_webhook_configurations(cluster: Serve) -> None:
    out = kubectl(cluster, "apply", "--validate=strict", "-f", "-", stdin=WEBHOOKS)
    assert "validatingwebhookconfiguration.admissionregistration.k8s.io/policy-webhook created" in out
    got = json.loads(kubectl(cluster, "get", "validatingwebhookconfiguration", "policy-webhook", "-o", "json"))
    hook = got["webhooks"][0]  # upstream's defaults
    assert (hook["failurePolicy"], hook["matchPolicy"], hook["timeoutSeconds"], hook["rules"][0]["scope"],
            hook["clientConfig"]["service"]["port"]) == ("Fail", "Equivalent", 10, "*", 443)
    mutating = json.loads(kubectl(cluster, "get", "mutatingwebhookconfiguration", "inject-webhook", "-o", "json"))
    assert mutating["webhooks"][0]["reinvocationPolicy"] == "Never"
    assert kubectl(cluster, "get", "mutatingwebhookconfigurations").splitlines()[0].split() == \
        ["NAME", "WEBHOOKS", "AGE"]
    # never called: a configmap the validating webhook matches is created (nothing runs behind it)
    kubectl(cluster, "create", "configmap", "unvalidated", "--from-literal=a=b")
    bad = WEBHOOKS.replace("sideEffects: None\n", "sideEffects: Some\n").replace("policy-webhook", "bad-webhook")
    r = subprocess.run([KUBECTL or "kubectl", "apply", "-f", "-"], input=bad, capture_output=True, text=True,
                       timeout=60, env=dict(os.environ, KUBECONFIG=str(cluster.kubeconfig), HOME=str(cluster.state)))
    assert r.returncode != 0
    assert 'webhooks[0].sideEffects: Unsupported value: "Some"' in r.stderr


CSI = """
apiVersion: storage.k8s.io/v1
kind: CSIDriver
metadata: {name: ebs.csi.aws.com}
spec: {attachRequired: true, podInfoOnMount: false, fsGroupPolicy: File}
---
apiVersion: storage.k8s.io/v1
kind: VolumeAttachment
metadata: {name: csi-0123}
spec: {attacher: ebs.csi.aws.com, nodeName: sim-node-0, source: {persistentVolumeName: pv-0123}}
---
apiVersion: storage.k8s.io/v1
kind: VolumeAttributesClass
metadata: {name: gold}
driverName: ebs.csi.aws.com
parameters: {iops: "3000"}
"""


def test_kubectl_serves_the_csi_objects_and_each_node_has_its_csi_node(cluster: Serve) -> None:
    """What a CSI driver's chart installs and its sidecars read, kubectl's way: api-resources,
    apply (client-side, with its strategic patch for a change), get's columns; the simulated
    kubelets' CSINodes."""
    resources = kubectl(cluster, "api-resources", "--api-group=storage.k8s.io", "-o", "name").split()
    assert set(resources) >= {"csidrivers.storage.k8s.io", "csinodes.storage.k8s.io",
                              "csistoragecapacities.storage.k8s.io", "volumeattachments.storage.k8s.io",
                              "volumeattributesclasses.storage.k8s.io"}
    nodes = wait_for(cluster, "sim-node-1", "get", "csinodes").splitlines()
    assert nodes[0].split() == ["NAME", "DRIVERS", "AGE"]
    assert [line.split()[:2] for line in nodes[1:]] == [["sim-node-0", "0"], ["sim-node-1", "0"]]
    out = kubectl(cluster, "apply", "-f", "-", stdin=CSI)
    for created in ("csidriver.storage.k8s.io/ebs.csi.aws.com created",
                    "volumeattachment.storage.k8s.io/csi-0123 created",
                    "volumeattributesclass.storage.k8s.io/gold created"):
        assert created in out
    drivers = kubectl(cluster, "get", "csidrivers").splitlines()
    assert drivers[0].split() == ["NAME", "ATTACHREQUIRED", "PODINFOONMOUNT", "STORAGECAPACITY", "TOKENREQUESTS",
                                  "REQUIRESREPUBLISH", "MODES", "AGE"]
    assert drivers[1].split()[:7] == ["ebs.csi.aws.com", "true", "false", "false", "<unset>", "false", "Persistent"]
    attachments = kubectl(cluster, "get", "volumeattachments").splitlines()
    assert attachments[0].split() == ["NAME", "ATTACHER", "PV", "NODE", "ATTACHED", "AGE"]
    assert attachments[1].split()[:5] == ["csi-0123", "ebs.csi.aws.com", "pv-0123", "sim-node-0", "false"]
    assert kubectl(cluster, "get", "vac", "gold").splitlines()[1].split()[:2] == ["gold", "ebs.csi.aws.com"]
    changed = kubectl(cluster, "apply", "-f", "-", stdin=CSI.replace("podInfoOnMount: false", "podInfoOnMount: true"))
    assert "csidriver.storage.k8s.io/ebs.csi.aws.com configured" in changed
    moved = CSI.replace("nodeName: sim-node-0", "nodeName: sim-node-1")
    r = subprocess.run([KUBECTL or "kubectl", "apply", "-f", "-"], input=moved, capture_output=True, text=True,
                       timeout=60, env=dict(os.environ, KUBECONFIG=str(cluster.kubeconfig), HOME=str(cluster.state)))
    assert r.returncode != 0 and "spec: Invalid value:" in r.stderr and "field is immutable" in r.stderr


EXTRA_RANGE = """
apiVersion: networking.k8s.io/v1
kind: ServiceCIDR
metadata: {name: extra}
spec: {cidrs: [10.200.0.0/24]}
---
apiVersion: networking.k8s.io/v1
kind: IPAddress
metadata: {name: 10.200.0.9}
spec: {parentRef: {group: gateway.networking.k8s.io, resource: gateways, namespace: default, name: gw}}
"""


def test_service_cidrs_and_ip_addresses_with_kubectl(cluster: Serve) -> None:
    """networking.k8s.io/v1 ServiceCIDR and IPAddress as kubectl sees them: the default range,
    an IPAddress per cluster IP, a range of the user's that Services may then ask IPs of, held
    by its finalizer while one of them lies in it, and an IPAddress made by hand reserving its IP."""
    lines = kubectl(cluster, "get", "servicecidrs").splitlines()
    assert lines[0].split() == ["NAME", "CIDRS", "AGE"] and lines[1].split()[:2] == ["kubernetes", "10.96.0.0/12"]
    assert kubectl(cluster, "get", "servicecidr", "kubernetes", "-o",
                   "jsonpath={.status.conditions[0].type}={.status.conditions[0].status}") == "Ready=True"
    lines = kubectl(cluster, "get", "ipaddresses", "10.96.0.1").splitlines()
    assert lines[0].split() == ["NAME", "PARENTREF"] and lines[1].split() == ["10.96.0.1",
                                                                              "services/default/kubernetes"]
    out = kubectl(cluster, "apply", "-f", "-", stdin=EXTRA_RANGE)
    assert "servicecidr.networking.k8s.io/extra created" in out and "ipaddress.networking.k8s.io/10.200.0.9 created" \
        in out
    wait_for(cluster, "Ready=True", "get", "servicecidr", "extra", "-o",
             "jsonpath={.status.conditions[0].type}={.status.conditions[0].status}")
    kubectl(cluster, "create", "service", "clusterip", "pinned", "--clusterip=10.200.0.7", "--tcp=80:80")
    assert kubectl(cluster, "get", "ipaddress", "10.200.0.7", "--no-headers").split() == \
        ["10.200.0.7", "services/default/pinned"]
    r = subprocess.run([KUBECTL or "kubectl", "create", "service", "clusterip", "taken", "--clusterip=10.200.0.9",
                        "--tcp=80:80"], capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, KUBECONFIG=str(cluster.kubeconfig), HOME=str(cluster.state)))
    assert r.returncode != 0
    assert ('Service "taken" is invalid: spec.clusterIPs: Invalid value: []string{"10.200.0.9"}: failed to '
            "allocate IP 10.200.0.9: provided IP is already allocated") in r.stderr
    kubectl(cluster, "delete", "servicecidr", "extra", "--wait=false")
    wait_for(cluster, "Terminating", "get", "servicecidr", "extra", "-o", "jsonpath={.status.conditions[0].reason}")
    kubectl(cluster, "delete", "service", "pinned")
    kubectl(cluster, "delete", "ipaddress", "10.200.0.9")
    kubectl(cluster, "wait", "--for=delete", "servicecidr/extra", "--timeout=30s")
    # the official client decodes both into its models
    api = config.new_client_from_config(config_file=str(cluster.kubeconfig))
    try:
        networking = client.NetworkingV1Api(api)
        ready = networking.read_service_cidr("kubernetes").status.conditions[0]
        assert (ready.type, ready.status, ready.reason) == ("Ready", "True", "")
        ips = {i.metadata.name: i.spec.parent_ref for i in networking.list_ip_address().items}
        assert ips["10.96.0.1"].name == "kubernetes" and "10.200.0.7" not in ips
    finally:
        api.close()
