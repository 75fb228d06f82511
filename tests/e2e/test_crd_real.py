"""Real operators' CustomResourceDefinitions (``tests/e2e/crds/``: Gateway API, cert-manager,
prometheus-operator, Argo Workflows) over a socket, with kubectl and the official Python client:
each answer as kube-apiserver gives it (codes, reasons, messages, field paths)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any, cast

import orjson
import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.e2e.test_crd import as_dict
from tests.e2e.test_kubectl import KUBECTL, kubectl
from tests.test_cli import Serve

CRDS = Path(__file__).parent / "crds"


def kubectl_fails(served: Serve, *args: str, stdin: str | None = None) -> str:
    """kubectl's stderr, for a command that must fail."""
    assert KUBECTL
    env = dict(os.environ, KUBECONFIG=str(served.kubeconfig), HOME=str(served.state))
    r = subprocess.run([KUBECTL, *args], capture_output=True, text=True, env=env, input=stdin, timeout=60)
    assert r.returncode != 0, f"kubectl {' '.join(args)} succeeded: {r.stdout}"
    return r.stderr


@pytest.fixture(scope="module")
def installed(served: Serve) -> Serve:
    """Every CRD of ``crds/``, applied as a user does: client-side, then established."""
    out = kubectl(served, "apply", "-f", str(CRDS))
    assert out.count(" created") == 6, out
    kubectl(served, "wait", "--for", "condition=established", "--timeout=10s", "crd", "--all")
    return served


def test_the_crds_apply_server_side_over_their_client_side_apply(installed: Serve) -> None:
    out = kubectl(installed, "apply", "--server-side", "-f", str(CRDS))
    assert out.count("serverside-applied") == 6, out
    crd = yaml.safe_load(kubectl(installed, "get", "crd", "prometheusrules.monitoring.coreos.com", "-o", "yaml",
                                 "--show-managed-fields"))
    assert "kubectl" in {m["manager"] for m in crd["metadata"]["managedFields"] if m["operation"] == "Apply"}
    gateways = yaml.safe_load(kubectl(installed, "get", "crd", "gateways.gateway.networking.k8s.io", "-o", "yaml"))
    assert {(c["type"], c["status"], c["reason"], c["message"]) for c in gateways["status"]["conditions"]} == {
        ("NamesAccepted", "True", "NoConflicts", "no conflicts found"),
        ("Established", "True", "InitialNamesAccepted", "the initial names have been accepted"),
        ("KubernetesAPIApprovalPolicyConformant", "True", "ApprovedAnnotation",
         "approved in https://github.com/kubernetes-sigs/gateway-api/pull/4530")}  # a *.k8s.io group


GATEWAYS = """
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: gc}
spec: {controllerName: example.com/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw}
spec:
  gatewayClassName: gc
  listeners:
  - {name: http, protocol: HTTP, port: 80}
  - name: https
    protocol: HTTPS
    port: 443
    hostname: "*.example.com"
    tls: {certificateRefs: [{name: cert}]}
"""

BAD_GATEWAY = """
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: bad}
spec:
  gatewayClassName: gc
  listeners:
  - {name: http, protocol: HTTP, port: 80, tls: {certificateRefs: [{name: c}]}}
  - {name: http, protocol: HTTP, port: 81}
  - {name: tcp, protocol: TCP, port: 8080, hostname: foo.example.com}
  - {name: Bad_Name, protocol: HTTP, port: 70000}
"""


def test_gateway_api_defaults_printer_columns_and_cel_rules(installed: Serve) -> None:
    out = kubectl(installed, "apply", "-f", "-", stdin=GATEWAYS)
    assert "gatewayclass.gateway.networking.k8s.io/gc created" in out
    gw = yaml.safe_load(kubectl(installed, "get", "gtw", "gw", "-o", "yaml"))
    https = gw["spec"]["listeners"][1]  # defaults, nested in list items
    assert https["allowedRoutes"] == {"namespaces": {"from": "Same"}}
    assert https["tls"] == {"mode": "Terminate", "certificateRefs": [{"group": "", "kind": "Secret", "name": "cert"}]}
    assert [c["reason"] for c in gw["status"]["conditions"]] == ["Pending", "Pending"]  # status defaults too
    table = kubectl(installed, "get", "gatewayclasses,gateways").splitlines()
    assert table[0].split() == ["NAME", "CONTROLLER", "ACCEPTED", "AGE"]
    assert table[1].split()[:3] == ["gatewayclass.gateway.networking.k8s.io/gc", "example.com/gateway-controller",
                                    "Unknown"]
    assert table[3].split() == ["NAME", "CLASS", "ADDRESS", "PROGRAMMED", "AGE"]
    assert table[4].split()[:3] == ["gateway.gateway.networking.k8s.io/gw", "gc", "Unknown"]

    err = kubectl_fails(installed, "create", "-f", "-", stdin=BAD_GATEWAY)
    assert 'The Gateway "bad" is invalid: ' in err
    for line in [
        "spec.listeners[3].name: Invalid value: \"Bad_Name\": spec.listeners[3].name in body should match "
        "'^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$'",
        'spec.listeners[3].port: Invalid value: 70000: spec.listeners[3].port in body should be less than or '
        'equal to 65535',
        'spec.listeners[1]: Duplicate value: {"name":"http"}',
        "spec.listeners: Invalid value: tls must not be specified for protocols ['HTTP', 'TCP', 'UDP']",
        "spec.listeners: Invalid value: hostname must not be specified for protocols ['TCP', 'UDP']",
        'spec.listeners: Invalid value: Listener name must be unique within the Gateway',
    ]:
        assert f"* {line}\n" in err, (line, err)

    # a transition rule (self == oldSelf), on merge and JSON patches; a strategic merge patch is 415
    merge = '{"spec":{"controllerName":"example.com/other"}}'
    json_patch = '[{"op":"replace","path":"/spec/controllerName","value":"example.com/x"}]'
    for patch, value in ((["--type=merge", "-p", merge], "example.com/other"),
                         (["--type=json", "-p", json_patch], "example.com/x")):
        err = kubectl_fails(installed, "patch", "gatewayclass", "gc", *patch)
        # a scalar's value is shown, as upstream since 1.35
        assert err == f'The GatewayClass "gc" is invalid: spec.controllerName: Invalid value: "{value}": ' \
                      "field is immutable\n"
    err = kubectl_fails(installed, "patch", "gatewayclass", "gc", "-p", '{"spec":{"description":"x"}}')
    assert err == ("error: application/strategic-merge-patch+json is not supported by gateway.networking.k8s.io/v1, "
                   "Kind=GatewayClass: the body of the request was in an unknown format - accepted media types "
                   "include: application/json-patch+json, application/merge-patch+json, "
                   "application/apply-patch+yaml\n")
    # a required list removed: the rules are not run, as upstream says
    err = kubectl_fails(installed, "patch", "gateway", "gw", "--type=merge", "-p", '{"spec":{"listeners":null}}')
    assert err == ('The Gateway "gw" is invalid: \n* spec.listeners: Required value\n* <nil>: Invalid value: '
                   'null: some validation rules were not checked because the object was invalid; correct the '
                   "existing errors to complete validation\n")
    # served OpenAPI v3: kubectl explain, a field's type and its required children
    explain = kubectl(installed, "explain", "gateway.spec.listeners")
    assert "FIELD: listeners <[]Object>" in explain and "name\t<string> -required-" in explain


def test_the_python_client_sees_the_cel_causes(installed: Serve, api: client.ApiClient) -> None:
    objects = client.CustomObjectsApi(api)
    body: dict[str, Any] = {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway", "metadata": {"name": "py"},
            "spec": {"gatewayClassName": "gc", "listeners": [{"name": "a", "protocol": "UDP", "port": 53,
                                                              "hostname": "a.example.com"}]}}
    with pytest.raises(ApiException) as e:
        objects.create_namespaced_custom_object("gateway.networking.k8s.io", "v1", "default", "gateways", body)
    status: dict[str, Any] = orjson.loads(e.value.body)
    assert e.value.status == 422 and status["reason"] == "Invalid"
    assert status["details"] == {
        "name": "py", "group": "gateway.networking.k8s.io", "kind": "Gateway",
        "causes": [{"reason": "FieldValueInvalid", "field": "spec.listeners",
                    "message": "Invalid value: hostname must not be specified for protocols "
                               "['TCP', 'UDP']"}]}
    body["spec"]["listeners"][0]["protocol"] = "HTTP"
    # rules calling the Kubernetes CEL libraries: key.split("/") on the infrastructure's labels
    body["spec"]["infrastructure"] = {"labels": {"example.com/team": "a"}, "annotations": {"note": "b"}}
    made = as_dict(objects.create_namespaced_custom_object(
        "gateway.networking.k8s.io", "v1", "default", "gateways", body))
    assert made["spec"]["listeners"][0]["allowedRoutes"] == {"namespaces": {"from": "Same"}}


PROMETHEUS_RULE = """
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata: {name: %s}
spec:
  groups:
  - name: g
    partial_response_strategy: %s
    rules:
    - {alert: Down, expr: up == 0, for: 5m}
"""


def test_prometheus_operator_patterns_are_go_regular_expressions(installed: Serve) -> None:
    # the CRD itself has ^(?i)(abort|warn)?$, a flag Python's re refuses mid-pattern: it was installed above
    assert "prometheusrule.monitoring.coreos.com/warn created" in \
        kubectl(installed, "apply", "-f", "-", stdin=PROMETHEUS_RULE % ("warn", "WARN"))
    err = kubectl_fails(installed, "apply", "-f", "-", stdin=PROMETHEUS_RULE % ("bad", "ignore"))
    assert err == ('The PrometheusRule "bad" is invalid: spec.groups[0].partial_response_strategy: Invalid value: '
                   '"ignore": spec.groups[0].partial_response_strategy in body should match '
                   "'^(?i)(abort|warn)?$'\n")
    monitor = ("apiVersion: monitoring.coreos.com/v1\nkind: ServiceMonitor\nmetadata: {name: sm}\nspec:\n"
               "  selector: {matchLabels: {app: web}}\n  endpoints: [{port: http, interval: 30x, scheme: ftp}]\n")
    err = kubectl_fails(installed, "apply", "-f", "-", stdin=monitor)
    assert "* spec.endpoints[0].interval: Invalid value: \"30x\": spec.endpoints[0].interval in body should " \
           "match '^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$'\n" \
           in err
    assert '* spec.endpoints[0].scheme: Unsupported value: "ftp": supported values: "http", "https", "HTTP", ' \
           '"HTTPS"\n' in err


CERTIFICATE = """
apiVersion: cert-manager.io/v1
kind: Certificate
metadata: {name: c1}
spec:
  secretName: c1-tls
  dnsNames: [a.example.com]
  issuerRef: {name: ca, kind: Issuer}
  privateKey: {algorithm: ECDSA, size: 256}
  bogus: 1
"""


def test_cert_manager_unknown_fields_columns_and_status(installed: Serve) -> None:
    err = kubectl_fails(installed, "apply", "-f", "-", stdin=CERTIFICATE)  # kubectl's default: --validate=strict
    assert err.endswith('Certificate in version "v1" cannot be handled as a Certificate: strict decoding error: '
                        'unknown field "spec.bogus"\n'), err
    r = subprocess.run([KUBECTL or "kubectl", "apply", "--validate=warn", "-f", "-"], input=CERTIFICATE, text=True,
                       capture_output=True, env=dict(os.environ, KUBECONFIG=str(installed.kubeconfig)), timeout=60)
    assert r.returncode == 0 and r.stderr == 'Warning: unknown field "spec.bogus"\n'
    assert "bogus" not in kubectl(installed, "get", "cert", "c1", "-o", "jsonpath={.spec}")
    kubectl(installed, "patch", "cert", "c1", "--subresource=status", "--type=merge", "-p", orjson.dumps(
        {"status": {"conditions": [{"type": "Ready", "status": "True", "message": "issued",
                                    "lastTransitionTime": "2026-01-01T00:00:00Z"}],
                    "notAfter": "2027-01-01T00:00:00Z"}}).decode())
    table = kubectl(installed, "get", "certs", "-o", "wide").splitlines()
    assert table[0].split() == ["NAME", "READY", "SECRET", "ISSUER", "STATUS", "EXPIRATION", "AGE"]
    assert table[1].split()[:6] == ["c1", "True", "c1-tls", "ca", "issued", "2027-01-01T00:00:00Z"]
    err = kubectl_fails(installed, "create", "--validate=false", "-f", "-",
                        stdin=CERTIFICATE.replace("ECDSA", "DSA").replace("256", '"x"').replace("c1", "c2"))
    assert err == ('The Certificate "c2" is invalid: \n* spec.privateKey.algorithm: Unsupported value: "DSA": '
                   'supported values: "RSA", "ECDSA", "Ed25519"\n* spec.privateKey.size: Invalid value: "string": '
                   'spec.privateKey.size in body must be of type integer: "string"\n')


def test_argo_workflows_keep_their_unknown_fields(installed: Serve) -> None:
    wf = ("apiVersion: argoproj.io/v1alpha1\nkind: Workflow\nmetadata: {name: hello}\nspec:\n  entrypoint: main\n"
          "  templates: [{name: main, container: {image: busybox, args: [echo, hi]}}]\n")
    kubectl(installed, "apply", "-f", "-", stdin=wf)
    kubectl(installed, "patch", "wf", "hello", "--type=merge", "-p",
            '{"status":{"phase":"Running","message":"step 1","startedAt":"2026-01-01T00:00:00Z","x":{"y":1}}}')
    obj = yaml.safe_load(kubectl(installed, "get", "workflow", "hello", "-o", "yaml"))
    assert obj["spec"]["templates"][0]["container"] == {"image": "busybox", "args": ["echo", "hi"]}
    assert obj["status"]["x"] == {"y": 1}  # no status subresource: the main resource writes it
    table = kubectl(installed, "get", "wf").splitlines()
    assert table[0].split() == ["NAME", "STATUS", "AGE", "MESSAGE"]
    assert table[1].split()[:2] == ["hello", "Running"] and table[1].split()[-2:] == ["step", "1"]


def test_a_crd_too_large_for_client_side_apply_is_refused_as_upstream(installed: Serve) -> None:
    crd = yaml.safe_load((CRDS / "cert-manager.io_certificates.yaml").read_text())
    crd["metadata"] = {"name": "bigs.example.com"}
    crd["spec"]["group"] = "example.com"
    crd["spec"]["names"] = {"plural": "bigs", "singular": "big", "kind": "Big", "listKind": "BigList"}
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["description"] = "x" * 270_000
    text = yaml.safe_dump(crd)
    err = kubectl_fails(installed, "apply", "-f", "-", stdin=text)
    assert err == ('The CustomResourceDefinition "bigs.example.com" is invalid: metadata.annotations: Too long: '
                   "may not be more than 262144 bytes\n")
    assert "bigs.example.com serverside-applied" in kubectl(installed, "apply", "--server-side", "-f", "-", stdin=text)
    kubectl(installed, "apply", "--server-side", "-f", "-",
            stdin="apiVersion: example.com/v1\nkind: Big\nmetadata: {name: b}\n"
                  "spec: {secretName: s, issuerRef: {name: ca}}\n")
    assert "deleted" in kubectl(installed, "delete", "crd", "bigs.example.com")
    assert "Error from server (NotFound)" in \
        kubectl_fails(installed, "get", "--raw", "/apis/example.com/v1/namespaces/default/bigs/b")
    assert "bigs.example.com" not in kubectl(installed, "get", "crd", "-o", "name")


def test_a_crd_whose_rules_name_a_bad_reason_or_field_path_is_refused(installed: Serve) -> None:
    crd = yaml.safe_load((CRDS / "argoproj.io_workflows.yaml").read_text())
    crd["metadata"] = {"name": "ruled.example.com"}
    crd["spec"].update(group="example.com", names={"plural": "ruled", "kind": "Ruled"})
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    spec["x-kubernetes-validations"] = [{"rule": "true", "reason": "Bogus"}, {"rule": "true", "fieldPath": ".x"}]
    err = kubectl_fails(installed, "create", "-f", "-", stdin=yaml.safe_dump(crd))
    at = "spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations"
    assert err == (f'The CustomResourceDefinition "ruled.example.com" is invalid: \n* {at}[0].reason: Unsupported '
                   'value: "Bogus": supported values: "FieldValueDuplicate", "FieldValueForbidden", '
                   f'"FieldValueInvalid", "FieldValueRequired"\n* {at}[1].fieldPath: Invalid value: ".x": must be a '
                   "valid path\n")


def test_a_stricter_crd_ratchets_the_values_an_update_leaves_alone(installed: Serve) -> None:
    crd = yaml.safe_load((CRDS / "argoproj.io_workflows.yaml").read_text())
    crd["metadata"] = {"name": "ratchets.example.com"}
    crd["spec"].update(group="example.com", names={"plural": "ratchets", "kind": "Ratchet"})
    version = crd["spec"]["versions"][0]
    version.pop("additionalPrinterColumns")
    name: dict[str, Any] = {"type": "string"}
    version["schema"]["openAPIV3Schema"]["properties"]["spec"] = {
        "type": "object", "properties": {"name": name, "note": {"type": "string"}}}
    kubectl(installed, "apply", "--server-side", "-f", "-", stdin=yaml.safe_dump(crd))
    kubectl(installed, "apply", "--server-side", "-f", "-",
            stdin="apiVersion: example.com/v1alpha1\nkind: Ratchet\nmetadata: {name: r}\nspec: {name: Old_Name}\n")
    name["pattern"] = "^[a-z]+$"  # the CRD made stricter
    kubectl(installed, "apply", "--server-side", "-f", "-", stdin=yaml.safe_dump(crd))
    kubectl(installed, "patch", "ratchet", "r", "--type=merge", "-p", '{"spec":{"note":"x"}}')
    err = kubectl_fails(installed, "patch", "ratchet", "r", "--type=merge", "-p", '{"spec":{"name":"New_Name"}}')
    assert err == ('The Ratchet "r" is invalid: spec.name: Invalid value: "New_Name": spec.name in body should '
                   "match '^[a-z]+$'\n")


def test_gateway_apis_safe_upgrades_policy_judges_its_crds(installed: Serve) -> None:
    policy = CRDS / "policies" / "gateway.networking.k8s.io_vap_safeupgrades.yaml"
    kubectl(installed, "apply", "-f", str(policy))
    try:
        classes = (CRDS / "gateway.networking.k8s.io_gatewayclasses.yaml").read_text() \
            .replace("metadata:\n", "metadata:\n  labels: {e2e: vap}\n", 1)  # a change: kubectl sends it
        err = kubectl_fails(installed, "apply", "-f", "-", stdin=classes)  # its bundle-version is v0.0.0-dev
        assert "denied request: Installing CRDs with version before v1.5.0 is prohibited by default." in err, err
        out = kubectl(installed, "apply", "-f", "-", stdin=classes.replace("bundle-version: v0.0.0-dev",
                                                                            "bundle-version: v1.5.0"))
        assert "gatewayclasses.gateway.networking.k8s.io configured" in out
    finally:
        kubectl(installed, "delete", "-f", str(policy))


GADGETS = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gadgets.example.com}
spec:
  group: example.com
  names: {plural: gadgets, kind: Gadget}
  scope: Namespaced
  conversion:
    strategy: Webhook
    webhook:
      clientConfig:
        service: {name: gadget-webhook-service, namespace: gadget-system, path: /convert}
      conversionReviewVersions: [v1]
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, properties: {spec: {type: object, properties: {size: {type: integer}}}}}}
  - name: v2
    served: true
    storage: false
    schema: {openAPIV3Schema: {type: object, properties: {spec: {type: object, properties: {size: {type: integer}}}}}}
"""


def test_a_crd_with_a_conversion_webhook_is_served_as_with_none(installed: Serve, api: client.ApiClient) -> None:
    """As LeaderWorkerSet's and most kubebuilder projects' CRDs declare one (a single
    version, so never called, for LeaderWorkerSet): stored with the port defaulted,
    and objects read through another version with only their apiVersion changed."""
    out = kubectl(installed, "apply", "-f", "-", stdin=GADGETS)
    assert "gadgets.example.com created" in out
    kubectl(installed, "wait", "--for", "condition=established", "--timeout=10s", "crd", "gadgets.example.com")
    kubectl(installed, "apply", "-f", "-",
            stdin="apiVersion: example.com/v1\nkind: Gadget\nmetadata: {name: g, namespace: default}\n"
                  "spec: {size: 3}\n")
    custom = client.CustomObjectsApi(api)
    got = cast(dict[str, Any], custom.get_namespaced_custom_object("example.com", "v2", "default", "gadgets", "g"))
    assert (got["apiVersion"], got["spec"]) == ("example.com/v2", {"size": 3})
    crd = client.ApiextensionsV1Api(api).read_custom_resource_definition("gadgets.example.com")
    assert crd.spec.conversion.webhook.client_config.service.port == 443
    err = kubectl_fails(installed, "apply", "-f", "-", stdin=GADGETS.replace("conversionReviewVersions: [v1]",
                                                                             "conversionReviewVersions: [v3]"))
    assert ('spec.conversion.conversionReviewVersions: Invalid value: ["v3"]: must include at least one of v1, '
            "v1beta1") in err, err
