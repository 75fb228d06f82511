"""APIServices and API Priority and Fairness's configuration with the real kubectl against
``controlplane serve`` over a socket: discovery lists them, ``kubectl get`` prints upstream's
columns, a user's FlowSchema and APIService get their conditions; the official Python client's
typed models read and write them."""

from __future__ import annotations

import time

import pytest
from kubernetes import client

from tests.e2e.test_kubectl import kubectl
from tests.test_cli import Serve


def _rows(text: str) -> dict[str, list[str]]:
    lines = text.strip().splitlines()
    return {line.split()[0]: line.split() for line in lines[1:]}


def _eventually(served: Serve, args: tuple[str, ...], wanted: str, timeout: float = 20.0) -> str:
    deadline = time.monotonic() + timeout
    while True:
        out = kubectl(served, *args)
        if wanted in out or time.monotonic() > deadline:
            return out
        time.sleep(0.2)


def test_kubectl_api_resources_lists_them(served: Serve) -> None:
    out = kubectl(served, "api-resources", "--api-group=apiregistration.k8s.io")
    assert "apiservices" in out and "apiregistration.k8s.io/v1" in out and "APIService" in out
    out = kubectl(served, "api-resources", "--api-group=flowcontrol.apiserver.k8s.io", "-o", "name")
    assert out.split() == ["flowschemas.flowcontrol.apiserver.k8s.io",
                           "prioritylevelconfigurations.flowcontrol.apiserver.k8s.io"]


def test_kubectl_get_apiservices_prints_local_and_available(served: Serve) -> None:
    out = kubectl(served, "get", "apiservices")
    assert out.splitlines()[0].split() == ["NAME", "SERVICE", "AVAILABLE", "AGE"]
    rows = _rows(out)
    assert rows["v1."][1:3] == ["Local", "True"]
    assert rows["v1.apps"][1:3] == ["Local", "True"]
    assert rows["v1.flowcontrol.apiserver.k8s.io"][1:3] == ["Local", "True"]


def test_an_apiservice_of_a_missing_service_is_not_available(served: Serve) -> None:
    kubectl(served, "apply", "-f", "-", stdin="""
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {name: v1beta1.custom.metrics.k8s.io}
spec:
  group: custom.metrics.k8s.io
  version: v1beta1
  groupPriorityMinimum: 100
  versionPriority: 100
  insecureSkipTLSVerify: true
  service: {namespace: monitoring, name: prometheus-adapter}
""")
    out = _eventually(served, ("get", "apiservice", "v1beta1.custom.metrics.k8s.io"), "ServiceNotFound")
    row = _rows(out)["v1beta1.custom.metrics.k8s.io"]
    assert row[1:4] == ["monitoring/prometheus-adapter", "False", "(ServiceNotFound)"]


def test_kubectl_get_flowschemas_and_priority_levels(served: Serve) -> None:
    out = kubectl(served, "get", "flowschemas")
    assert out.splitlines()[0].split() == ["NAME", "PRIORITYLEVEL", "MATCHINGPRECEDENCE", "DISTINGUISHERMETHOD",
                                           "AGE", "MISSINGPL"]
    rows = _rows(out)
    assert rows["exempt"][1:4] == ["exempt", "1", "<none>"] and rows["exempt"][-1] == "False"
    assert rows["kube-scheduler"][1:4] == ["workload-high", "800", "ByNamespace"]
    # in the order they are matched (upstream's printer sorts by matching precedence, then name)
    assert [line.split()[0] for line in out.splitlines()[1:4]] == ["exempt", "probes", "system-leader-election"]
    out = kubectl(served, "get", "prioritylevelconfigurations")
    assert out.splitlines()[0].split() == ["NAME", "TYPE", "NOMINALCONCURRENCYSHARES", "QUEUES", "HANDSIZE",
                                           "QUEUELENGTHLIMIT", "AGE"]
    rows = _rows(out)
    assert rows["exempt"][1:6] == ["Exempt", "<none>", "<none>", "<none>", "<none>"]
    assert rows["workload-low"][1:6] == ["Limited", "100", "128", "6", "50"]


def test_a_users_flowschema_naming_no_level_is_dangling(served: Serve) -> None:
    kubectl(served, "apply", "-f", "-", stdin="""
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: FlowSchema
metadata: {name: batch-jobs}
spec:
  priorityLevelConfiguration: {name: batch}
  distinguisherMethod: {type: ByUser}
  rules:
  - subjects: [{kind: ServiceAccount, serviceAccount: {namespace: batch, name: "*"}}]
    resourceRules: [{verbs: [list, watch], apiGroups: ["*"], resources: ["*"], namespaces: ["*"]}]
""")
    out = _eventually(served, ("get", "flowschema", "batch-jobs"), " True")
    assert _rows(out)["batch-jobs"][1:4] == ["batch", "1000", "ByUser"] and out.split()[-1] == "True"


def test_the_python_client_reads_and_writes_them(api: client.ApiClient) -> None:
    """The official client's typed models take what the server answers (required fields there)."""
    services = client.ApiregistrationV1Api(api).list_api_service().items
    core = next(s for s in services if s.metadata.name == "v1.")
    assert (core.spec.group_priority_minimum, core.spec.version_priority) == (18000, 1)
    assert core.status.conditions[0].reason == "Local"
    flow = client.FlowcontrolApiserverV1Api(api)
    level = flow.read_priority_level_configuration("workload-high")
    assert level.spec.limited.limit_response.queuing.queues == 128
    made = flow.create_flow_schema(client.V1FlowSchema(
        metadata=client.V1ObjectMeta(name="typed"),
        spec=client.V1FlowSchemaSpec(
            priority_level_configuration=client.V1PriorityLevelConfigurationReference(name="workload-low"),
            rules=[client.V1PolicyRulesWithSubjects(
                subjects=[client.FlowcontrolV1Subject(kind="Group", group=client.V1GroupSubject(name="ci"))],
                non_resource_rules=[client.V1NonResourcePolicyRule(verbs=["get"], non_resource_urls=["/metrics"])])])))
    assert made.spec.matching_precedence == 1000
    with pytest.raises(client.ApiException) as e:
        flow.patch_flow_schema("typed", {"spec": {"matchingPrecedence": 1}})
    assert e.value.status == 422
