"""kubectl commands a platform engineer's sweep against upstream found answered differently,
with the real kubectl against one ``controlplane serve`` over a socket: a CronJob's job
template as ``SetObjectDefaults_CronJob`` defaults it, a Service's IP families as upstream's
allocator (``initIPFamilyFields``) settles them on a single-stack cluster, and the pods'
``status.podIPs`` field selector."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest

from tests.e2e.test_kubectl import kubectl
from tests.e2e.test_kubectl_sweep import failing
from tests.test_cli import Serve, running, start_serve


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    with running(start_serve(tmp_path_factory.mktemp("platform"), scheduler=True)) as s:  # (its controllers)
        yield s


def test_a_cron_jobs_template_keeps_what_it_says_and_its_job_gets_the_job_defaults(served: Serve) -> None:
    """SetDefaults_Job is the Job's, not the CronJob's: the template's job spec gets no
    completions, parallelism, backoffLimit, ... (its pod spec is defaulted as every pod
    template's), and the Job made from it gets them at its own create."""
    for dry in ("--dry-run=server", None):
        args = ["create", "cronjob", "nightly", "--image=busybox", "--schedule=0 3 * * *", "-o", "json"]
        cron = json.loads(kubectl(served, *args, *([dry] if dry else [])))
        job_spec = cron["spec"]["jobTemplate"]["spec"]
        assert sorted(job_spec) == ["template"]
        pod = job_spec["template"]["spec"]
        assert (pod["restartPolicy"], pod["dnsPolicy"], pod["containers"][0]["imagePullPolicy"]) == \
            ("OnFailure", "ClusterFirst", "Always")
        assert {k: cron["spec"][k] for k in ("concurrencyPolicy", "suspend", "successfulJobsHistoryLimit",
                                             "failedJobsHistoryLimit")} == \
            {"concurrencyPolicy": "Allow", "suspend": False, "successfulJobsHistoryLimit": 3,
             "failedJobsHistoryLimit": 1}
    stored = json.loads(kubectl(served, "get", "cronjob", "nightly", "-o", "json"))
    assert sorted(stored["spec"]["jobTemplate"]["spec"]) == ["template"]
    job = json.loads(kubectl(served, "create", "job", "now", "--from=cronjob/nightly", "-o", "json"))
    assert {k: job["spec"].get(k) for k in ("completions", "parallelism", "backoffLimit", "completionMode",
                                            "suspend", "podReplacementPolicy", "manualSelector")} == \
        {"completions": 1, "parallelism": 1, "backoffLimit": 6, "completionMode": "NonIndexed", "suspend": False,
         "podReplacementPolicy": "TerminatingOrFailed", "manualSelector": False}
    # a pod failure policy's condition patterns are defaulted in the template too (their type's defaulter)
    manifest = {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "guarded"}, "spec": {
        "schedule": "0 4 * * *", "jobTemplate": {"spec": {
            "podFailurePolicy": {"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]},
            "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}}}}
    guarded = json.loads(kubectl(served, "create", "-f", "-", "-o", "json", stdin=json.dumps(manifest)))
    job_spec = guarded["spec"]["jobTemplate"]["spec"]
    assert job_spec["podFailurePolicy"]["rules"][0]["onPodConditions"] == [{"type": "DisruptionTarget",
                                                                              "status": "True"}]
    assert "podReplacementPolicy" not in job_spec


def _service(name: str, **spec: object) -> str:
    return json.dumps({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
                       "spec": {"ports": [{"port": 80}], **spec}})


def test_a_headless_service_without_a_selector_asks_for_both_families(served: Serve) -> None:
    """Upstream's special case: such a Service defaults to RequireDualStack and is given the
    other family beside the first, even on a single-stack cluster; with a selector, or told
    SingleStack, it keeps one; an update that leaves the policy out keeps it."""
    def families(name: str, **spec: object) -> tuple[str, list[str]]:
        out = json.loads(kubectl(served, "create", "-f", "-", "-o", "json", stdin=_service(name, **spec)))
        return out["spec"]["ipFamilyPolicy"], out["spec"]["ipFamilies"]

    assert families("open", clusterIP="None") == ("RequireDualStack", ["IPv4", "IPv6"])
    assert families("open6", clusterIP="None", ipFamilies=["IPv6"]) == ("RequireDualStack", ["IPv6", "IPv4"])
    assert families("open-prefer", clusterIP="None", ipFamilyPolicy="PreferDualStack") == \
        ("PreferDualStack", ["IPv4", "IPv6"])
    assert families("open-single", clusterIP="None", ipFamilyPolicy="SingleStack") == ("SingleStack", ["IPv4"])
    assert families("selected", clusterIP="None", selector={"app": "db"}) == ("SingleStack", ["IPv4"])
    assert families("prefer", selector={"app": "db"}, ipFamilyPolicy="PreferDualStack") == \
        ("PreferDualStack", ["IPv4"])
    put = json.loads(kubectl(served, "get", "svc", "open-single", "-o", "json"))
    del put["spec"]["ipFamilyPolicy"]
    put["spec"]["ports"][0]["port"] = 81
    replaced = json.loads(kubectl(served, "replace", "-f", "-", "-o", "json", stdin=json.dumps(put)))
    assert (replaced["spec"]["ipFamilyPolicy"], replaced["spec"]["ipFamilies"]) == ("SingleStack", ["IPv4"])


def test_a_service_asking_for_what_a_single_stack_cluster_lacks_is_refused(served: Serve) -> None:
    """initIPFamilyFields's 422s, before validation's: dual stack required, a family the cluster
    has no range for, two families with SingleStack (the default)."""
    refused: dict[str, tuple[dict[str, object], str]] = {
        "require": ({"ipFamilyPolicy": "RequireDualStack"}, 'spec.ipFamilyPolicy: Invalid value: "RequireDualStack": '
                    "this cluster is not configured for dual-stack services"),
        "six": ({"ipFamilies": ["IPv6"]}, 'spec.ipFamilies[0]: Invalid value: "IPv6": not configured on this cluster'),
        "both": ({"ipFamilies": ["IPv4", "IPv6"]}, 'spec.ipFamilyPolicy: Invalid value: "SingleStack": must be '
                 "'RequireDualStack' or 'PreferDualStack' when multiple IP families are specified"),
        "both-prefer": ({"ipFamilies": ["IPv4", "IPv6"], "ipFamilyPolicy": "PreferDualStack"},
                        'spec.ipFamilies[1]: Invalid value: "IPv6": not configured on this cluster'),
    }
    for name, (spec, message) in refused.items():
        err = failing(served, "create", "-f", "-", stdin=_service(name, selector={"app": "x"}, **spec))
        assert err.strip() == f'The Service "{name}" is invalid: {message}', err
    assert 'services "require" not found' in failing(served, "get", "svc", "require")


def test_the_pods_status_pod_ips_selector_is_taken_as_an_empty_field(served: Serve) -> None:
    """Upstream's label conversion takes ``status.podIPs``, its field set has none: ``=x``
    selects no pod, ``!=x`` and ``=`` every pod, where a field it does not take is 400."""
    kubectl(served, "run", "ips", "--image=nginx")
    assert kubectl(served, "get", "pods", "--field-selector=status.podIPs=10.0.0.1", "-o", "name") == ""
    assert kubectl(served, "get", "pods", "-l", "run=ips", "--field-selector=status.podIPs!=10.0.0.1", "-o",
                   "name") == "pod/ips\n"
    assert kubectl(served, "get", "pods", "--field-selector=status.podIPs=,metadata.name=ips", "-o", "name") == \
        "pod/ips\n"
    err = failing(served, "get", "pods", "--field-selector=status.hostIP=10.0.0.1")
    assert err.strip() == ('Error from server (BadRequest): Unable to find "/v1, Resource=pods" that match label '
                           'selector "", field selector "status.hostIP=10.0.0.1": field label not supported: '
                           "status.hostIP")


def test_empty_lists_read_back_as_kube_apiservers_protobuf_storage_gives_them(served: Serve) -> None:
    """What kube-apiserver stores is protobuf, where an empty list is nothing: a list Go writes
    without ``omitempty`` (a Role's ``rules``, an EndpointSlice's ``endpoints`` and ``ports``)
    reads back as null, absent or empty; an ``omitempty`` one (an Endpoints' ``subsets``) not at
    all. The placeholder slice and the Endpoints of a Service that selects no pod are so."""
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "none"}, "rules": []}
    assert json.loads(kubectl(served, "create", "-f", "-", "-o", "json", stdin=json.dumps(role)))["rules"] is None
    created = kubectl(served, "create", "clusterrole", "gathered", "--aggregation-rule=team=a", "-o", "json")
    assert json.loads(created)["rules"] is None
    assert json.loads(kubectl(served, "get", "clusterrole", "gathered", "-o", "json"))["rules"] is None
    kubectl(served, "create", "service", "clusterip", "lonely", "--tcp=80")
    kubectl(served, "wait", "endpoints/lonely", "--for=create", "--timeout=30s")
    deadline = time.monotonic() + 30
    while not (slices := json.loads(kubectl(served, "get", "endpointslice", "-l",
                                            "kubernetes.io/service-name=lonely", "-o", "json"))["items"]):
        assert time.monotonic() < deadline, "no EndpointSlice for the Service"
        time.sleep(0.1)
    (placeholder,) = slices
    assert ("endpoints", None) in placeholder.items() and ("ports", None) in placeholder.items()
    assert "subsets" not in json.loads(kubectl(served, "get", "endpoints", "lonely", "-o", "json"))


def test_a_pod_created_on_its_node_gets_the_nodes_topology_labels(served: Serve) -> None:
    """PodTopologyLabels admits a pod created with ``spec.nodeName`` (``kubectl debug node/x``
    makes one) as it admits a binding: the node's zone and region labels, over the pod's own;
    a node it does not know gives none."""
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "rack-7", "labels": {
        "topology.kubernetes.io/zone": "zone-b", "topology.kubernetes.io/region": "eu-1", "disk": "ssd"}}}
    kubectl(served, "create", "-f", "-", stdin=json.dumps(node))

    def created(name: str, node_name: str) -> dict[str, str]:
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {
            "app": name, "topology.kubernetes.io/zone": "mine"}}, "spec": {
            "nodeName": node_name, "containers": [{"name": "c", "image": "busybox"}]}}
        out = json.loads(kubectl(served, "create", "-f", "-", "-o", "json", stdin=json.dumps(pod)))
        labels: dict[str, str] = out["metadata"]["labels"]
        return labels

    assert created("placed", "rack-7") == {"app": "placed", "topology.kubernetes.io/zone": "zone-b",
                                           "topology.kubernetes.io/region": "eu-1"}
    assert created("nowhere", "rack-404") == {"app": "nowhere", "topology.kubernetes.io/zone": "mine"}
