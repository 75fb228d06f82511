"""Upstream's ValidatePodSpec beyond containers: tolerations, affinity, probes and lifecycle
hooks, security contexts, topology spread constraints, the node selector and node name.
Each refused write is a 422 Invalid whose causes carry upstream's field paths and words, for
a Pod and for a workload's template (``spec.template.spec...``); valid specs still pass."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from typing import Any

import orjson
import pytest

from controlplane.client import ApiError, Client, resource_path
from tests.e2e.test_kubectl import KUBECTL
from tests.test_cli import Serve, running, start_serve

PODS = resource_path("", "v1", "pods", "default")
DEPLOYMENTS = resource_path("apps", "v1", "deployments", "default")
DAEMONSETS = resource_path("apps", "v1", "daemonsets", "default")
JOBS = resource_path("batch", "v1", "jobs", "default")
CRONJOBS = resource_path("batch", "v1", "cronjobs", "default")

LABEL_KEY_HINT = ("must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
                  "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation "
                  "is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")
LABEL_VALUE_HINT = ("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
                    "and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or "
                    "'12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')")
SUBDOMAIN_HINT = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
                  "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
                  r"validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
REQ = "requiredDuringSchedulingIgnoredDuringExecution"
PREF = "preferredDuringSchedulingIgnoredDuringExecution"


def spec_with(container: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    return {"containers": [{"name": "app", "image": "nginx:1.27", **(container or {})}], **extra}


def pod(spec: dict[str, Any], name: str = "p") -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": spec}


def deployment(spec: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": "d"}, "spec": {"selector": {"matchLabels": {"app": "a"}},
                                                "template": {"metadata": {"labels": {"app": "a"}}, "spec": spec}}}


def cause(reason: str, field: str, message: str) -> dict[str, str]:
    return {"reason": reason, "field": field, "message": message}


async def causes_of(client: Client, path: str, body: dict[str, Any]) -> list[dict[str, str]]:
    """The causes of the 422 a create of ``body`` must get (each also in the message)."""
    with pytest.raises(ApiError) as e:
        await client.create(path, body)
    assert e.value.code == 422, e.value
    assert e.value.reason == "Invalid"
    found: list[dict[str, str]] = e.value.status["details"]["causes"]
    for c in found:
        assert f"{c['field']}: {c['message']}" in e.value.message
    return found


# -- what is valid stays valid -----------------------------------------------------------------
VALID = spec_with(
    {"livenessProbe": {"httpGet": {"port": 8080}, "successThreshold": 0},
     "readinessProbe": {"tcpSocket": {"port": "http"}, "periodSeconds": 5},
     "startupProbe": {"exec": {"command": ["true"]}, "failureThreshold": 30},
     "ports": [{"name": "http", "containerPort": 8080}],
     "lifecycle": {"preStop": {"sleep": {"seconds": 5}}, "postStart": {"httpGet": {"port": 8080}}},
     "securityContext": {"runAsUser": 1000, "runAsGroup": 1000, "seccompProfile": {"type": "RuntimeDefault"},
                         "appArmorProfile": {"type": "Localhost", "localhostProfile": "k8s-nginx"}}},
    initContainers=[{"name": "sidecar", "image": "envoy", "restartPolicy": "Always",
                     "readinessProbe": {"grpc": {"port": 9901}}}],
    nodeSelector={"kubernetes.io/os": "linux", "disk": ""},
    nodeName="node-1.example",
    securityContext={"runAsNonRoot": True, "fsGroup": 2000, "supplementalGroups": [3000],
                     "sysctls": [{"name": "net.ipv4.ip_local_port_range", "value": "1024 65000"}],
                     "fsGroupChangePolicy": "OnRootMismatch", "seccompProfile": {"type": "Localhost",
                                                                                 "localhostProfile": "p.json"}},
    tolerations=[{"operator": "Exists"}, {"key": "gpu", "operator": "Equal", "value": "a100", "effect": "NoSchedule"},
                 {"key": "example.com/spot", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60},
                 {"key": "dedicated", "value": "infra"}],
    affinity={
        "nodeAffinity": {
            REQ: {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["a", "b"]},
                {"key": "cores", "operator": "Gt", "values": ["4"]},
                {"key": "spot", "operator": "DoesNotExist"}]},
                {"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["node-2"]}]}]},
            PREF: [{"weight": 100, "preference": {"matchExpressions": [
                {"key": "disk", "operator": "In", "values": ["not a label value, allowed here"]}]}}]},
        "podAffinity": {REQ: [{"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "kubernetes.io/hostname",
                               "namespaces": ["default"]}]},
        "podAntiAffinity": {PREF: [{"weight": 1, "podAffinityTerm": {
            "labelSelector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["web"]}]},
            "matchLabelKeys": ["pod-template-hash"], "topologyKey": "topology.kubernetes.io/zone"}}]}},
    topologySpreadConstraints=[
        {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule",
         "minDomains": 2, "labelSelector": {"matchLabels": {"app": "web"}}, "nodeTaintsPolicy": "Honor"},
        {"maxSkew": 2, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "ScheduleAnyway"}])


async def test_a_pod_using_every_field_validly_is_accepted_and_defaulted(client: Client) -> None:
    created = await client.create(PODS, pod(VALID, name="ok"))
    c = created["spec"]["containers"][0]
    # SetDefaults_Probe: a zero count is defaulted; SetDefaults_HTTPGetAction holds for hooks too
    assert c["livenessProbe"]["successThreshold"] == 1
    assert c["livenessProbe"]["httpGet"] == {"port": 8080, "path": "/", "scheme": "HTTP"}
    assert c["lifecycle"]["postStart"]["httpGet"] == {"port": 8080, "path": "/", "scheme": "HTTP"}
    assert created["spec"]["tolerations"][:4] == VALID["tolerations"]
    # a workload's template says the same, and is accepted too
    await client.create(DEPLOYMENTS, deployment({k: v for k, v in VALID.items() if k != "nodeName"}))


# -- tolerations ---------------------------------------------------------------------------------
async def test_tolerations(client: Client) -> None:
    tolerations = [
        {"operator": "Exists", "value": "x"},
        {"operator": "Equal", "value": "v"},
        {"key": "a/b/c", "operator": "Exists"},
        {"key": "k", "operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": 5},
        {"key": "k", "operator": "Contains", "effect": "NoAdmit"},
        {"key": "k", "value": "-bad-"},
    ]
    assert await causes_of(client, PODS, pod(spec_with(tolerations=tolerations))) == [
        cause("FieldValueInvalid", "spec.tolerations[0].operator",
              "Invalid value: \"x\": value must be empty when `operator` is 'Exists'"),
        cause("FieldValueInvalid", "spec.tolerations[1].operator",
              'Invalid value: "Equal": operator must be Exists when `key` is empty, which means "match all values '
              'and all keys"'),
        cause("FieldValueInvalid", "spec.tolerations[2].key",
              f"Invalid value: \"a/b/c\": a valid label key {LABEL_KEY_HINT} with an optional DNS subdomain prefix "
              "and '/' (e.g. 'example.com/MyName')"),
        cause("FieldValueInvalid", "spec.tolerations[3].effect",
              "Invalid value: \"NoSchedule\": effect must be 'NoExecute' when `tolerationSeconds` is set"),
        cause("FieldValueNotSupported", "spec.tolerations[4].operator",
              'Unsupported value: "Contains": supported values: "Equal", "Exists"'),
        cause("FieldValueNotSupported", "spec.tolerations[4].effect",
              'Unsupported value: "NoAdmit": supported values: "NoSchedule", "PreferNoSchedule", "NoExecute"'),
        cause("FieldValueInvalid", "spec.tolerations[5].operator", f'Invalid value: "-bad-": {LABEL_VALUE_HINT}'),
    ]


async def test_an_update_adding_a_bad_toleration_is_refused(client: Client) -> None:
    created = await client.create(PODS, pod(spec_with(), name="u"))
    created["spec"]["tolerations"].append({"key": "k", "operator": "Exists", "effect": "Sometimes"})
    with pytest.raises(ApiError) as e:
        await client.update(f"{PODS}/u", created)
    assert e.value.code == 422
    assert e.value.status["details"]["causes"] == [
        cause("FieldValueNotSupported", "spec.tolerations[2].effect",
              'Unsupported value: "Sometimes": supported values: "NoSchedule", "PreferNoSchedule", "NoExecute"')]
    created["spec"]["tolerations"][2]["effect"] = "NoExecute"  # an addition, valid: accepted
    updated = await client.update(f"{PODS}/u", created)
    assert updated["spec"]["tolerations"][2]["key"] == "k"


# -- affinity ------------------------------------------------------------------------------------
async def test_node_affinity(client: Client) -> None:
    affinity: dict[str, Any] = {"nodeAffinity": {REQ: {"nodeSelectorTerms": []}}}
    assert await causes_of(client, PODS, pod(spec_with(affinity=affinity))) == [
        cause("FieldValueRequired", f"spec.affinity.nodeAffinity.{REQ}.nodeSelectorTerms",
              "Required value: must have at least one node selector term")]
    term = {"matchExpressions": [{"key": "a", "operator": "Near", "values": ["x"]},
                                 {"key": "b", "operator": "In"},
                                 {"key": "c", "operator": "Exists", "values": ["x"]},
                                 {"key": "d", "operator": "Lt", "values": ["1", "2"]},
                                 {"key": "e", "operator": "In", "values": ["no spaces"]}],
            "matchFields": [{"key": "metadata.labels", "operator": "In", "values": ["n"]},
                            {"key": "metadata.name", "operator": "Exists", "values": ["Node_1"]}]}
    affinity = {"nodeAffinity": {REQ: {"nodeSelectorTerms": [term]},
                                 PREF: [{"weight": 0, "preference": {"matchExpressions": [
                                     {"key": "e", "operator": "In", "values": ["no spaces"]}]}}]}}
    at = f"spec.affinity.nodeAffinity.{REQ}.nodeSelectorTerms[0]"
    assert await causes_of(client, PODS, pod(spec_with(affinity=affinity))) == [
        cause("FieldValueInvalid", f"{at}.matchExpressions[0].operator",
              'Invalid value: "Near": not a valid selector operator'),
        cause("FieldValueRequired", f"{at}.matchExpressions[1].values",
              "Required value: must be specified when `operator` is 'In' or 'NotIn'"),
        cause("FieldValueForbidden", f"{at}.matchExpressions[2].values",
              "Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'"),
        cause("FieldValueRequired", f"{at}.matchExpressions[3].values",
              "Required value: must be specified single value when `operator` is 'Lt' or 'Gt'"),
        cause("FieldValueInvalid", f"{at}.matchExpressions[4].values[0]",
              f'Invalid value: "no spaces": {LABEL_VALUE_HINT}'),
        cause("FieldValueInvalid", f"{at}.matchFields[0].key",
              'Invalid value: "metadata.labels": not a valid field selector key'),
        cause("FieldValueInvalid", f"{at}.matchFields[1].operator",
              'Invalid value: "Exists": not a valid selector operator'),
        cause("FieldValueInvalid", f"{at}.matchFields[1].values[0]", f'Invalid value: "Node_1": {SUBDOMAIN_HINT}'),
        # a preferred term's label values are not checked, its weight is
        cause("FieldValueInvalid", f"spec.affinity.nodeAffinity.{PREF}[0].weight",
              "Invalid value: 0: must be in the range 1-100"),
    ]


async def test_pod_affinity_and_anti_affinity(client: Client) -> None:
    affinity = {
        "podAffinity": {REQ: [{"labelSelector": {"matchExpressions": [{"key": "app", "operator": "In"}]},
                               "topologyKey": ""}]},
        "podAntiAffinity": {PREF: [{"weight": 101, "podAffinityTerm": {
            "topologyKey": "zone", "namespaces": ["Prod"], "matchLabelKeys": ["a"], "mismatchLabelKeys": ["b"]}}]}}
    anti = f"spec.affinity.podAntiAffinity.{PREF}[0]"
    assert await causes_of(client, PODS, pod(spec_with(affinity=affinity))) == [
        cause("FieldValueRequired", f"spec.affinity.podAffinity.{REQ}[0].labelSelector.matchExpressions[0].values",
              "Required value: must be specified when `operator` is 'In' or 'NotIn'"),
        cause("FieldValueRequired", f"spec.affinity.podAffinity.{REQ}[0].topologyKey",
              "Required value: can not be empty"),
        # an empty topology key is not a label key either, as upstream says it
        cause("FieldValueInvalid", f"spec.affinity.podAffinity.{REQ}[0].topologyKey",
              'Invalid value: "": name part must be non-empty'),
        cause("FieldValueInvalid", f"spec.affinity.podAffinity.{REQ}[0].topologyKey",
              f'Invalid value: "": name part {LABEL_KEY_HINT}'),
        cause("FieldValueInvalid", f"{anti}.weight", "Invalid value: 101: must be in the range 1-100"),
        cause("FieldValueInvalid", f"{anti}.podAffinityTerm.namespace",
              "Invalid value: \"Prod\": a lowercase RFC 1123 label must consist of lower case alphanumeric "
              "characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or "
              "'123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"),
        cause("FieldValueForbidden", f"{anti}.podAffinityTerm.matchLabelKeys",
              "Forbidden: must not be specified when labelSelector is not set"),
        cause("FieldValueForbidden", f"{anti}.podAffinityTerm.mismatchLabelKeys",
              "Forbidden: must not be specified when labelSelector is not set"),
    ]


# -- probes and lifecycle hooks ----------------------------------------------------------------------
async def test_probes_and_hooks(client: Client) -> None:
    container = {
        "livenessProbe": {"exec": {"command": ["x"]}, "httpGet": {"port": 80}, "successThreshold": 3,
                          "periodSeconds": -1, "terminationGracePeriodSeconds": 0},
        "readinessProbe": {"tcpSocket": {"port": "http--x"}, "terminationGracePeriodSeconds": 5},
        "startupProbe": {"initialDelaySeconds": 5},
        "lifecycle": {"postStart": {"httpGet": {"port": 70000, "scheme": "FTP",
                                                "httpHeaders": [{"name": "X Y", "value": "1"}]}},
                      "preStop": {"sleep": {"seconds": 31}}}}
    at = "spec.containers[0]"
    assert await causes_of(client, PODS, pod(spec_with(container))) == [
        cause("FieldValueInvalid", f"{at}.lifecycle.postStart.httpGet.port",
              "Invalid value: 70000: must be between 1 and 65535, inclusive"),
        cause("FieldValueNotSupported", f"{at}.lifecycle.postStart.httpGet.scheme",
              'Unsupported value: "FTP": supported values: "HTTP", "HTTPS"'),
        cause("FieldValueInvalid", f"{at}.lifecycle.postStart.httpGet.httpHeaders",
              "Invalid value: \"X Y\": a valid HTTP header must consist of alphanumeric characters or '-' (e.g. "
              "'X-Header-Name', regex used for validation is '[-A-Za-z0-9]+')"),
        cause("FieldValueInvalid", f"{at}.lifecycle.preStop.sleep",
              "Invalid value: 31: must be non-negative and less than terminationGracePeriodSeconds (30)"),
        cause("FieldValueForbidden", f"{at}.livenessProbe.httpGet",
              "Forbidden: may not specify more than 1 handler type"),
        cause("FieldValueInvalid", f"{at}.livenessProbe.periodSeconds",
              "Invalid value: -1: must be greater than or equal to 0"),
        cause("FieldValueInvalid", f"{at}.livenessProbe.terminationGracePeriodSeconds",
              "Invalid value: 0: must be greater than 0"),
        cause("FieldValueInvalid", f"{at}.livenessProbe.successThreshold", "Invalid value: 3: must be 1"),
        cause("FieldValueInvalid", f"{at}.readinessProbe.tcpSocket.port",
              'Invalid value: "http--x": must not contain consecutive hyphens'),
        cause("FieldValueInvalid", f"{at}.readinessProbe.terminationGracePeriodSeconds",
              "Invalid value: 5: must not be set for readinessProbes"),
        cause("FieldValueRequired", f"{at}.startupProbe", "Required value: must specify a handler type"),
    ]


async def test_init_containers_have_probes_only_as_sidecars(client: Client) -> None:
    spec = spec_with(initContainers=[
        {"name": "init", "image": "busybox", "livenessProbe": {"exec": {"command": ["x"]}}, "lifecycle": {}},
        {"name": "sidecar", "image": "envoy", "restartPolicy": "Always", "startupProbe": {"grpc": {}}}])
    spec["containers"][0]["restartPolicy"] = "Always"  # a container's own: valid since 1.35
    assert await causes_of(client, PODS, pod(spec)) == [
        cause("FieldValueForbidden", "spec.initContainers[0].lifecycle",
              "Forbidden: may not be set for init containers without restartPolicy=Always"),
        cause("FieldValueForbidden", "spec.initContainers[0].livenessProbe",
              "Forbidden: may not be set for init containers without restartPolicy=Always"),
        cause("FieldValueInvalid", "spec.initContainers[1].startupProbe.grpc.port",
              "Invalid value: 0: must be between 1 and 65535, inclusive"),
    ]


# -- security contexts --------------------------------------------------------------------------------
async def test_security_contexts(client: Client) -> None:
    container = {"securityContext": {"runAsUser": -1, "procMount": "Unmasked",
                                     "seccompProfile": {"type": "Localhost"}, "appArmorProfile": {"type": ""}}}
    security = {"fsGroup": -2, "runAsGroup": 2147483648, "supplementalGroups": [1, -3],
                "sysctls": [{"name": "net.core.somaxconn", "value": "1024"},
                            {"name": "net.core.somaxconn", "value": "1"}, {"name": "Bad!", "value": "1"}],
                "fsGroupChangePolicy": "Sometimes", "seccompProfile": {"type": ""},
                "appArmorProfile": {"type": "Unconfined", "localhostProfile": "p"}}
    assert await causes_of(client, PODS, pod(spec_with(container, securityContext=security))) == [
        cause("FieldValueInvalid", "spec.containers[0].securityContext.runAsUser",
              "Invalid value: -1: must be between 0 and 2147483647, inclusive"),
        cause("FieldValueInvalid", "spec.containers[0].securityContext.procMount",
              'Invalid value: "Unmasked": `hostUsers` must be false to use `Unmasked`'),
        cause("FieldValueRequired", "spec.containers[0].securityContext.seccompProfile.localhostProfile",
              "Required value: must be set when seccomp type is Localhost"),
        cause("FieldValueRequired", "spec.containers[0].securityContext.appArmorProfile.type",
              "Required value: type is required when appArmorProfile is set"),
        cause("FieldValueInvalid", "spec.securityContext.fsGroup",
              "Invalid value: -2: must be between 0 and 2147483647, inclusive"),
        cause("FieldValueInvalid", "spec.securityContext.runAsGroup",
              "Invalid value: 2147483648: must be between 0 and 2147483647, inclusive"),
        cause("FieldValueInvalid", "spec.securityContext.supplementalGroups[1]",
              "Invalid value: -3: must be between 0 and 2147483647, inclusive"),
        cause("FieldValueDuplicate", "spec.securityContext.sysctls[1].name", 'Duplicate value: "net.core.somaxconn"'),
        cause("FieldValueInvalid", "spec.securityContext.sysctls[2].name",
              'Invalid value: "Bad!": must have at most 253 characters and match regex '
              r"^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?$"),
        cause("FieldValueNotSupported", "spec.securityContext.fsGroupChangePolicy",
              'Unsupported value: "Sometimes": supported values: "Always", "OnRootMismatch"'),
        cause("FieldValueRequired", "spec.securityContext.seccompProfile.type",
              "Required value: type is required when seccompProfile is set"),
        cause("FieldValueInvalid", "spec.securityContext.appArmorProfile.localhostProfile",
              'Invalid value: "p": can only be set when AppArmor type is Localhost'),
    ]
    # in a user namespace, an unmasked /proc is allowed
    ok = spec_with({"securityContext": {"procMount": "Unmasked"}}, hostUsers=False,
                   securityContext={"seccompProfile": {"type": "Unconfined"}})
    assert (await client.create(PODS, pod(ok, name="userns")))["spec"]["hostUsers"] is False


async def test_a_user_namespace_shares_no_host_namespace(client: Client) -> None:
    # validateHostUsers (after validateWindowsHostProcessPod, before the service account's name):
    # hostNetwork too, UserNamespacesHostNetworkSupport being alpha, off by default
    userns = spec_with(hostUsers=False, hostNetwork=True, hostPID=True, hostIPC=True, nodeName="Bad_Node")
    message = "Forbidden: when `pod.Spec.HostUsers` is false"
    found = await causes_of(client, PODS, pod(userns))
    assert found[:3] == [cause("FieldValueForbidden", f"spec.{f}", message)
                         for f in ("hostNetwork", "HostPID", "HostIPC")]
    assert [c["field"] for c in found[3:]] == ["spec.nodeName"]
    assert await causes_of(client, DEPLOYMENTS, deployment(spec_with(hostUsers=False, hostPID=True))) == [
        cause("FieldValueForbidden", "spec.template.spec.HostPID", message)]
    # false host namespaces, or the host's user namespace, are fine
    ok = spec_with(hostUsers=False, hostNetwork=False, hostPID=False, hostIPC=False)
    assert (await client.create(PODS, pod(ok, name="userns")))["spec"]["hostUsers"] is False
    host = spec_with(hostUsers=True, hostNetwork=True, hostPID=True, hostIPC=True)
    assert (await client.create(PODS, pod(host, name="host")))["spec"]["hostPID"] is True


# -- topology spread, node selector, node name -------------------------------------------------------
async def test_topology_spread_constraints(client: Client) -> None:
    constraints = [
        {"maxSkew": 0, "topologyKey": "", "whenUnsatisfiable": "Never", "minDomains": 2},
        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway", "minDomains": 0},
        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway", "nodeAffinityPolicy": "Always",
         "matchLabelKeys": ["app"]},
        {"maxSkew": 1, "topologyKey": "host", "whenUnsatisfiable": "DoNotSchedule",
         "labelSelector": {"matchLabels": {"app": "no spaces"}}}]
    at = "spec.topologySpreadConstraints"
    assert await causes_of(client, PODS, pod(spec_with(topologySpreadConstraints=constraints))) == [
        cause("FieldValueInvalid", f"{at}[0].maxSkew", "Invalid value: 0: must be greater than zero"),
        cause("FieldValueRequired", f"{at}[0].topologyKey", "Required value: can not be empty"),
        cause("FieldValueNotSupported", f"{at}[0].whenUnsatisfiable",
              'Unsupported value: "Never": supported values: "DoNotSchedule", "ScheduleAnyway"'),
        cause("FieldValueInvalid", f"{at}[0].minDomains",
              "Invalid value: 2: can only use minDomains if whenUnsatisfiable=DoNotSchedule, not Never"),
        cause("FieldValueDuplicate", f"{at}[1].{{topologyKey, whenUnsatisfiable}}",
              'Duplicate value: "{zone, ScheduleAnyway}"'),
        cause("FieldValueInvalid", f"{at}[1].minDomains", "Invalid value: 0: must be greater than zero"),
        cause("FieldValueInvalid", f"{at}[1].minDomains",
              "Invalid value: 0: can only use minDomains if whenUnsatisfiable=DoNotSchedule, not ScheduleAnyway"),
        cause("FieldValueNotSupported", f"{at}[2].nodeAffinityPolicy",
              'Unsupported value: "Always": supported values: "Honor", "Ignore"'),
        cause("FieldValueForbidden", f"{at}[2].matchLabelKeys",
              "Forbidden: must not be specified when labelSelector is not set"),
        cause("FieldValueInvalid", f"{at}[3].labelSelector.matchLabels",
              f'Invalid value: "no spaces": {LABEL_VALUE_HINT}'),
    ]


async def test_node_selector_and_node_name(client: Client) -> None:
    spec = spec_with(nodeSelector={"example.com/": "x", "disk": "ssd!"}, nodeName="Node_1")
    assert await causes_of(client, PODS, pod(spec)) == [
        cause("FieldValueInvalid", "spec.nodeSelector", 'Invalid value: "example.com/": name part must be non-empty'),
        cause("FieldValueInvalid", "spec.nodeSelector", f'Invalid value: "example.com/": name part {LABEL_KEY_HINT}'),
        cause("FieldValueInvalid", "spec.nodeSelector", f'Invalid value: "ssd!": {LABEL_VALUE_HINT}'),
        cause("FieldValueInvalid", "spec.nodeName", f'Invalid value: "Node_1": {SUBDOMAIN_HINT}'),
    ]


# -- workload templates ------------------------------------------------------------------------------
async def test_workload_templates_get_the_same_checks_at_their_paths(client: Client) -> None:
    bad = spec_with({"readinessProbe": {}}, tolerations=[{"key": "k", "operator": "Exists", "value": "v"}],
                    affinity={"podAntiAffinity": {PREF: [{"weight": 0, "podAffinityTerm": {"topologyKey": "z"}}]}})
    expected = [
        ("FieldValueRequired", "containers[0].readinessProbe", "Required value: must specify a handler type"),
        ("FieldValueInvalid", f"affinity.podAntiAffinity.{PREF}[0].weight",
         "Invalid value: 0: must be in the range 1-100"),
        ("FieldValueInvalid", "tolerations[0].operator",
         "Invalid value: \"v\": value must be empty when `operator` is 'Exists'"),
    ]
    assert await causes_of(client, DEPLOYMENTS, deployment(bad)) == [
        cause(r, f"spec.template.spec.{f}", m) for r, f, m in expected]
    daemonset = deployment(bad)
    assert await causes_of(client, DAEMONSETS, daemonset) == [
        cause(r, f"spec.template.spec.{f}", m) for r, f, m in expected]
    job = {"metadata": {"name": "j"}, "spec": {"template": {"spec": {**bad, "restartPolicy": "Never"}}}}
    assert await causes_of(client, JOBS, job) == [cause(r, f"spec.template.spec.{f}", m) for r, f, m in expected]
    cron = {"metadata": {"name": "c"}, "spec": {"schedule": "* * * * *", "jobTemplate": {"spec": job["spec"]}}}
    assert await causes_of(client, CRONJOBS, cron) == [
        cause(r, f"spec.jobTemplate.spec.template.spec.{f}", m) for r, f, m in expected]


# -- over a real socket, as the official client and kubectl see it -----------------------------------
@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    with running(start_serve(tmp_path_factory.mktemp("podspecvalidation"))) as s:
        yield s


def test_the_official_client_gets_the_422(served: Serve) -> None:
    from kubernetes import client as k8s
    from kubernetes import config

    api = config.new_client_from_config(config_file=str(served.kubeconfig))  # type: ignore[no-untyped-call]
    try:
        core = k8s.CoreV1Api(api)
        body: Any = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "tolerant"},
                     "spec": {"containers": [{"name": "a", "image": "x"}],
                              "tolerations": [{"key": "gpu", "effect": "NoSchedule", "tolerationSeconds": 10}]}}
        with pytest.raises(k8s.ApiException) as e:
            core.create_namespaced_pod("default", body)
        assert e.value.status == 422
        status = orjson.loads(e.value.body or b"{}")
        assert status["reason"] == "Invalid" and status["details"]["kind"] == "Pod"
        assert status["message"] == ('Pod "tolerant" is invalid: spec.tolerations[0].effect: Invalid value: '
                                     "\"NoSchedule\": effect must be 'NoExecute' when `tolerationSeconds` is set")
        body["spec"]["tolerations"][0]["effect"] = "NoExecute"
        created: Any = core.create_namespaced_pod("default", body)
        assert created.spec.tolerations[0].toleration_seconds == 10
    finally:
        api.close()


def test_kubectl_prints_the_422(served: Serve) -> None:
    assert KUBECTL
    manifest = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: web
        image: nginx:1.27
        livenessProbe: {httpGet: {port: 80}, successThreshold: 2}
"""
    env = dict(os.environ, KUBECONFIG=str(served.kubeconfig), HOME=str(served.state))
    r = subprocess.run([KUBECTL, "apply", "-f", "-"], input=manifest, capture_output=True, text=True, env=env,
                       timeout=60)
    assert r.returncode == 1
    assert ('The Deployment "web" is invalid: spec.template.spec.containers[0].livenessProbe.successThreshold: '
            "Invalid value: 2: must be 1") in r.stderr
    r = subprocess.run([KUBECTL, "apply", "-f", "-"], input=manifest.replace("successThreshold: 2", "periodSeconds: 5"),
                       capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "deployment.apps/web created" in r.stdout
