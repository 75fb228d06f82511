"""Workloads' selector rules and what updates may not change, in upstream's words."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from controlplane.registry.immutable import pod_update_causes, service_update_causes, workload_causes
from controlplane.registry.strategies import default, prepare


def deployment(selector: dict[str, Any], labels: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
            "spec": {"selector": selector, "template": {"metadata": {"labels": labels},
                                                        "spec": {"containers": [{"name": "c", "image": "x"}]}}}}


def fields(causes: list[dict[str, str]]) -> list[str]:
    return [c["field"] for c in causes]


@pytest.mark.parametrize("plural", ["deployments", "replicasets", "daemonsets", "statefulsets"])
def test_a_selector_must_select_the_template(plural: str) -> None:
    assert workload_causes(plural, deployment({"matchLabels": {"app": "a"}}, {"app": "a", "x": "y"}), None) == []
    mismatched = workload_causes(plural, deployment({"matchLabels": {"app": "a"}}, {"app": "b"}), None)
    assert fields(mismatched) == ["spec.template.metadata.labels"]
    assert mismatched[0]["message"] == ('Invalid value: map[string]string{"app":"b"}: `selector` does not match '
                                        "template `labels`")
    expressions = {"matchExpressions": [{"key": "app", "operator": "In", "values": ["a", "b"]}]}
    assert workload_causes(plural, deployment(expressions, {"app": "b"}), None) == []
    empty = workload_causes(plural, deployment({}, {"app": "a"}), None)
    assert fields(empty) == ["spec.selector"] and "empty selector is invalid for" in empty[0]["message"]


def test_a_workloads_selector_is_immutable_but_its_template_is_not() -> None:
    old = deployment({"matchLabels": {"app": "a"}}, {"app": "a"})
    new = deployment({"matchLabels": {"app": "a", "tier": "web"}}, {"app": "a", "tier": "web"})
    causes = workload_causes("deployments", new, old)
    assert fields(causes) == ["spec.selector"] and causes[0]["message"].endswith("field is immutable")
    rolled = copy.deepcopy(old)
    rolled["spec"]["template"]["spec"]["containers"][0]["image"] = "y"
    rolled["spec"]["replicas"] = 5
    assert workload_causes("deployments", rolled, old) == []


def test_a_stateful_sets_fixed_fields() -> None:
    old = deployment({"matchLabels": {"app": "a"}}, {"app": "a"})
    old["spec"]["serviceName"] = "s"
    renamed = copy.deepcopy(old)
    renamed["spec"]["serviceName"] = "t"
    assert fields(workload_causes("statefulsets", renamed, old)) == ["spec"]
    scaled = copy.deepcopy(old)
    scaled["spec"].update(replicas=3, minReadySeconds=5, updateStrategy={"type": "OnDelete"})
    assert workload_causes("statefulsets", scaled, old) == []


def job(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
            "spec": {"selector": {"matchLabels": {"j": "1"}}, "completions": 1, "parallelism": 1,
                     "template": {"metadata": {"labels": {"j": "1"}},
                                  "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "x"}]}},
                     **spec}}


def test_a_jobs_template_is_fixed_unless_suspended_with_no_active_pod() -> None:
    old = job()
    new = job()
    new["spec"]["template"]["spec"]["containers"][0]["image"] = "y"
    assert fields(workload_causes("jobs", new, old)) == ["spec.template"]
    # a suspended job may change where its pods go, not what they run
    old, new = job(suspend=True), job(suspend=True)
    new["spec"]["template"]["spec"]["nodeSelector"] = {"pool": "gpu"}
    new["spec"]["template"]["metadata"]["annotations"] = {"a": "b"}
    assert workload_causes("jobs", new, old) == []
    new["spec"]["template"]["spec"]["containers"][0]["image"] = "y"
    assert fields(workload_causes("jobs", new, old)) == ["spec.template"]
    # started before, it may too, as 1.37 (MutableSchedulingDirectivesForSuspendedJobs), once no pod is active
    started = {**old, "status": {"startTime": "2026-01-01T00:00:00Z"}}
    moved = job(suspend=True)
    moved["spec"]["template"]["spec"]["nodeSelector"] = {"pool": "gpu"}
    assert workload_causes("jobs", moved, started) == []
    running = {**old, "status": {"startTime": "2026-01-01T00:00:00Z", "active": 2}}
    assert fields(workload_causes("jobs", moved, running)) == ["spec.template"]


def test_a_jobs_completions_are_fixed_unless_an_indexed_job_scales() -> None:
    assert fields(workload_causes("jobs", job(completions=3), job())) == ["spec.completions"]
    elastic = job(completionMode="Indexed", completions=3, parallelism=3)
    assert workload_causes("jobs", elastic, job(completionMode="Indexed")) == []
    assert workload_causes("jobs", job(parallelism=4), job()) == []


def pod_spec(**fields: Any) -> dict[str, Any]:
    spec = {"containers": [{"name": "c", "image": "x"}], "restartPolicy": "Always",
            "tolerations": [{"key": "a", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}]}
    spec.update(fields)
    return spec


def test_a_pod_update_may_change_images_and_add_tolerations_only() -> None:
    old = pod_spec()
    assert pod_update_causes(pod_spec(containers=[{"name": "c", "image": "y"}]), old) == []
    added = pod_spec(tolerations=[*old["tolerations"], {"key": "b", "operator": "Exists"}])
    assert pod_update_causes(added, old) == []
    assert pod_update_causes(pod_spec(tolerations=[{**old["tolerations"][0], "tolerationSeconds": 10}]), old) == []
    removed = pod_update_causes(pod_spec(tolerations=[]), old)
    assert fields(removed) == ["spec.tolerations"]
    changed = pod_update_causes(pod_spec(restartPolicy="Never"), old)
    assert fields(changed) == ["spec"] and changed[0]["message"].startswith(
        "Forbidden: pod updates may not change fields other than `spec.containers[*].image`")
    assert "spec.restartPolicy" in changed[0]["message"]
    assert fields(pod_update_causes(pod_spec(nodeName="n1"), old)) == ["spec"]
    more = pod_update_causes(pod_spec(containers=[{"name": "c", "image": "x"}, {"name": "d", "image": "x"}]), old)
    assert more[0]["message"] == "Forbidden: pod updates may not add or remove containers"
    # what Go's semantic equality takes for absent: an empty list or map, a null
    assert pod_update_causes(pod_spec(volumes=[], nodeSelector={}, hostname=None), old) == []


def test_a_gated_pod_may_lose_gates_and_gain_node_constraints() -> None:
    old = pod_spec(schedulingGates=[{"name": "g1"}, {"name": "g2"}])
    assert pod_update_causes(pod_spec(schedulingGates=[{"name": "g2"}], nodeSelector={"zone": "a"}), old) == []
    added = pod_update_causes(pod_spec(schedulingGates=[{"name": "g3"}]), old)
    assert fields(added) == ["spec.schedulingGates[0].name"]


def test_a_pod_update_is_compared_with_its_defaults() -> None:
    """A PUT of the manifest a pod was created from (no defaults) changes nothing."""
    manifest: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                                "spec": {"containers": [{"name": "c", "image": "x:1"}]}}
    stored = copy.deepcopy(manifest)
    default("pods", stored)
    assert prepare("pods", copy.deepcopy(manifest), stored) == []
    retagged = copy.deepcopy(manifest)
    retagged["spec"]["containers"][0]["image"] = "x:2"
    assert prepare("pods", retagged, stored) == []
    # (to the untagged image, whose pull policy defaults to Always: a change of that too, as upstream;
    # a fresh body: prepare defaults the one it is given, as a request's decoding would)
    untagged = copy.deepcopy(manifest)
    untagged["spec"]["containers"][0]["image"] = "x"
    assert fields(prepare("pods", untagged, stored)) == ["spec"]


def service(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
            "spec": {"type": "ClusterIP", "ports": [{"port": 80}], **spec}}


def test_a_service_keeps_its_cluster_ip() -> None:
    old = service(clusterIP="10.96.0.10", clusterIPs=["10.96.0.10"])
    kept = service()
    assert service_update_causes(kept, old) == []
    assert kept["spec"]["clusterIP"] == "10.96.0.10" and kept["spec"]["clusterIPs"] == ["10.96.0.10"]
    for changed in (service(clusterIP="10.96.0.11", clusterIPs=["10.96.0.10"]), service(clusterIPs=["10.96.0.11"]),
                    service(clusterIP="10.96.0.11")):
        causes = service_update_causes(changed, old)
        assert fields(causes) == ["spec.clusterIPs[0]"] and causes[0]["message"].endswith("may not change once set")
    external = service(type="ExternalName", externalName="x.example.com", clusterIP="10.96.0.10",
                       clusterIPs=["10.96.0.10"])
    assert service_update_causes(external, old) == [] and "clusterIP" not in external["spec"]


def test_a_service_keeps_its_node_ports_and_gets_them_when_it_needs_them() -> None:
    stored = service(type="NodePort", ports=[{"name": "http", "port": 80}])
    default("services", stored)
    node_port = stored["spec"]["ports"][0]["nodePort"]
    replaced = service(type="NodePort", ports=[{"name": "http", "port": 80}])  # as a manifest says it
    assert prepare("services", replaced, stored) == []
    assert replaced["spec"]["ports"][0]["nodePort"] == node_port
    assert replaced["spec"]["clusterIP"] == stored["spec"]["clusterIP"]
    internal = service(clusterIP=stored["spec"]["clusterIP"], ports=[{"name": "http", "port": 80,
                                                                      "nodePort": node_port}])
    assert prepare("services", internal, stored) == [] and "nodePort" not in internal["spec"]["ports"][0]
    exposed = copy.deepcopy(internal)
    exposed["spec"]["type"] = "NodePort"
    assert prepare("services", exposed, internal) == []
    assert 30000 <= exposed["spec"]["ports"][0]["nodePort"] <= 32767
    assert exposed["spec"]["externalTrafficPolicy"] == "Cluster"


@pytest.mark.parametrize(("expression", "field", "message"), [
    ({"key": "a", "operator": "Is", "values": ["b"]}, "operator", 'Invalid value: "Is": not a valid selector operator'),
    ({"key": "a", "operator": "In"}, "values", "Required value: must be specified when `operator` is 'In' or 'NotIn'"),
    ({"key": "a", "operator": "Exists", "values": ["b"]}, "values",
     "Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'"),
])
def test_a_selectors_expressions_are_validated(expression: dict[str, Any], field: str, message: str) -> None:
    causes = workload_causes("deployments", deployment({"matchExpressions": [expression]}, {"a": "b"}), None)
    assert (causes[0]["field"], causes[0]["message"]) == (f"spec.selector.matchExpressions[0].{field}", message)
