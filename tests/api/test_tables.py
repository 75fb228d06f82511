"""Built-in types' table columns and cells, as kubectl's server-side printers
(pkg/printers/internalversion) make them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from controlplane.api.tables import _parse_ts, as_table, human_duration

CREATED = "2026-01-01T00:00:00Z"


def meta(name: str = "x", **more: Any) -> dict[str, Any]:
    return {"name": name, "creationTimestamp": CREATED, **more}


def row(plural: str, obj: dict[str, Any]) -> dict[str, Any]:
    """The cells of one object, by column name."""
    table = as_table(plural, [obj], None)
    return dict(zip([c["name"] for c in table["columnDefinitions"]], table["rows"][0]["cells"], strict=True))


def columns(plural: str) -> list[tuple[str, int]]:
    return [(c["name"], c["priority"]) for c in as_table(plural, [], None)["columnDefinitions"]]


def ago(**delta: float) -> str:
    return (datetime.now(UTC) - timedelta(**delta)).strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.mark.parametrize(("seconds", "shown"), [
    (-5, "<invalid>"), (-1, "0s"), (59, "59s"), (119, "119s"), (125, "2m5s"), (600, "10m"), (3 * 3600, "3h"),
    (3 * 3600 + 60, "3h1m"), (30 * 3600, "30h"), (3 * 86400 + 3600, "3d1h"), (100 * 86400, "100d"),
    (800 * 86400, "2y70d"), (365 * 3 * 86400, "3y"), (365 * 9 * 86400 + 5 * 86400, "9y"),
])
def test_ages_as_human_duration(seconds: float, shown: str) -> None:
    assert human_duration(seconds) == shown


def test_event_columns_and_wide_cells() -> None:
    assert columns("events") == [("Last Seen", 0), ("Type", 0), ("Reason", 0), ("Object", 0), ("Subobject", 1),
                                 ("Source", 1), ("Message", 0), ("First Seen", 1), ("Count", 1), ("Name", 1)]
    event = {"metadata": meta("web.1"), "involvedObject": {"kind": "Pod", "name": "web", "fieldPath": "spec.c"},
             "type": "Normal", "reason": "Pulled", "message": " pulled \n", "source": {"component": "kubelet",
                                                                                      "host": "n1"},
             "firstTimestamp": ago(minutes=5), "lastTimestamp": ago(seconds=30), "count": 4}
    assert row("events", event) == {"Last Seen": "30s", "Type": "Normal", "Reason": "Pulled", "Object": "pod/web",
                                    "Subobject": "spec.c", "Source": "kubelet, n1", "Message": "pulled",
                                    "First Seen": "5m", "Count": 4, "Name": "web.1"}


def test_event_written_through_events_k8s_io() -> None:
    """No first/last timestamps: the event time (a MicroTime); a series' last observation and
    count; the reporting controller and instance as the source; a kind without a name."""
    event = {"metadata": meta("e"), "involvedObject": {"kind": "Node"}, "reason": "R",
             "eventTime": (datetime.now(UTC) - timedelta(minutes=3)).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
             "series": {"count": 7, "lastObservedTime": (datetime.now(UTC) - timedelta(seconds=20))
                        .strftime("%Y-%m-%dT%H:%M:%S.%fZ")},
             "reportingComponent": "default-scheduler", "reportingInstance": "sched-0"}
    cells = row("events", event)
    assert (cells["Last Seen"], cells["First Seen"], cells["Count"]) == ("20s", "3m", 7)
    assert (cells["Object"], cells["Source"]) == ("node", "default-scheduler, sched-0")
    singleton = row("events", {"metadata": meta("e"), "involvedObject": {"kind": "Pod", "name": "p"},
                               "firstTimestamp": ago(seconds=10), "source": {"component": "c"}})
    assert (singleton["Last Seen"], singleton["Count"], singleton["Source"]) == ("10s", 1, "c")


def test_node_roles_and_unknown_wide_cells() -> None:
    node = {"metadata": meta("n", labels={"node-role.kubernetes.io/worker": "", "node-role.kubernetes.io/": "",
                                          "kubernetes.io/role": "master"}),
            "spec": {"unschedulable": True}, "status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}}
    cells = row("nodes", node)
    assert (cells["Status"], cells["Roles"]) == ("NotReady,SchedulingDisabled", "master,worker")
    assert (cells["OS-Image"], cells["Kernel-Version"], cells["Container-Runtime"]) == ("<unknown>",) * 3
    assert (cells["Internal-IP"], cells["External-IP"]) == ("<none>", "<none>")


@pytest.mark.parametrize(("spec", "status", "cluster_ip", "external_ip", "ports"), [
    ({"type": "ClusterIP", "clusterIPs": ["10.0.0.1"], "clusterIP": "10.0.0.1"}, {}, "10.0.0.1", "<none>", "<none>"),
    ({"type": "NodePort", "clusterIP": "10.0.0.2", "externalIPs": ["1.1.1.1", "2.2.2.2"],
      "ports": [{"port": 80, "nodePort": 30001, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}]}, {},
     "10.0.0.2", "1.1.1.1,2.2.2.2", "80:30001/TCP,53/UDP"),
    ({"type": "LoadBalancer", "clusterIP": "10.0.0.3"}, {"loadBalancer": {}}, "10.0.0.3", "<pending>", "<none>"),
    ({"type": "LoadBalancer", "externalIPs": ["9.9.9.9"]},
     {"loadBalancer": {"ingress": [{"ip": "5.5.5.5"}, {"hostname": "a.example"}, {"ip": "5.5.5.5"}]}},
     "<none>", "5.5.5.5,a.example,9.9.9.9", "<none>"),
    ({"type": "ExternalName", "externalName": "db.example"}, {}, "<none>", "db.example", "<none>"),
])
def test_service_ips_and_ports(spec: dict[str, Any], status: dict[str, Any], cluster_ip: str, external_ip: str,
                               ports: str) -> None:
    cells = row("services", {"metadata": meta(), "spec": spec, "status": status})
    assert (cells["Cluster-IP"], cells["External-IP"], cells["Port(s)"]) == (cluster_ip, external_ip, ports)
    assert cells["Selector"] == "<none>"


SELECTOR = {"matchLabels": {"b": "2", "a": "1"},
            "matchExpressions": [{"key": "tier", "operator": "In", "values": ["z", "a"]},
                                 {"key": "aa", "operator": "Exists"}, {"key": "c", "operator": "DoesNotExist"}]}
SHOWN = "a=1,aa,b=2,!c,tier in (a,z)"


def workload(selector: Any = None, **spec: Any) -> dict[str, Any]:
    template = {"spec": {"containers": [{"name": "a", "image": "i1"}, {"name": "b", "image": "i2"}]}}
    return {"metadata": meta(), "spec": {"selector": selector, "template": template, **spec}, "status": {}}


@pytest.mark.parametrize("plural", ["replicasets", "daemonsets", "jobs"])
def test_wide_selectors_as_format_label_selector(plural: str) -> None:
    cells = row(plural, workload(SELECTOR))
    assert (cells["Containers"], cells["Images"], cells["Selector"]) == ("a,b", "i1,i2", SHOWN)
    assert row(plural, workload())["Selector"] == "<none>"


def test_deployment_selector_is_empty_not_none() -> None:
    assert row("deployments", workload(SELECTOR))["Selector"] == SHOWN
    assert row("deployments", workload({}))["Selector"] == ""


def test_cronjob_wide_columns_and_suspend() -> None:
    assert columns("cronjobs")[-3:] == [("Containers", 1), ("Images", 1), ("Selector", 1)]
    cj = {"metadata": meta(), "spec": {"schedule": "* * * * *", "jobTemplate": workload(SELECTOR)}}
    cells = row("cronjobs", cj)
    assert (cells["Suspend"], cells["Containers"], cells["Selector"]) == ("<unset>", "a,b", SHOWN)
    cj["spec"]["suspend"] = False
    assert row("cronjobs", cj)["Suspend"] == "False"


@pytest.mark.parametrize(("conditions", "deleted", "status"), [
    ([], False, "Running"),
    ([{"type": "Complete", "status": "True"}], True, "Complete"),
    ([{"type": "FailureTarget", "status": "True"}, {"type": "Failed", "status": "True"}], False, "Failed"),
    ([{"type": "Suspended", "status": "True"}], True, "Terminating"),
    ([{"type": "FailureTarget", "status": "True"}, {"type": "Suspended", "status": "True"}], False, "Suspended"),
    ([{"type": "FailureTarget", "status": "True"}], False, "FailureTarget"),
    ([{"type": "SuccessCriteriaMet", "status": "True"}], False, "Running"),
])
def test_job_status(conditions: list[dict[str, Any]], deleted: bool, status: str) -> None:
    job = workload()
    job["status"]["conditions"] = conditions
    if deleted:
        job["metadata"]["deletionTimestamp"] = CREATED
    assert row("jobs", job)["Status"] == status


def test_persistent_volume_claim_cells() -> None:
    pending = {"metadata": meta(), "spec": {"resources": {"requests": {"storage": "1Gi"}}},
               "status": {"phase": "Pending", "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"]}}
    cells = row("persistentvolumeclaims", pending)
    assert [cells[c] for c in ("Status", "Volume", "Capacity", "Access Modes", "StorageClass",
                               "VolumeAttributesClass", "VolumeMode")] == \
        ["Pending", "", "", "", "", "<unset>", "<unset>"]
    bound = {"metadata": meta(deletionTimestamp=CREATED,
                              annotations={"volume.beta.kubernetes.io/storage-class": "old"}),
             "spec": {"volumeName": "pv1", "storageClassName": "new", "volumeMode": "Block"},
             "status": {"phase": "Bound", "capacity": {"storage": "1024Mi"},
                        "accessModes": ["ReadWriteMany", "ReadWriteOnce"]}}
    cells = row("persistentvolumeclaims", bound)
    assert [cells[c] for c in ("Status", "Volume", "Capacity", "Access Modes", "StorageClass", "VolumeMode")] == \
        ["Terminating", "pv1", "1Gi", "RWO,RWX", "old", "Block"]


def test_persistent_volume_cells() -> None:
    pv = {"metadata": meta(), "spec": {"accessModes": ["ReadWriteOnce"], "persistentVolumeReclaimPolicy": "Retain"},
          "status": {"phase": "Available"}}
    cells = row("persistentvolumes", pv)
    assert [cells[c] for c in ("Capacity", "Status", "Claim", "StorageClass", "VolumeMode")] == \
        ["0", "Available", "", "", "<unset>"]
    pv["spec"].update(capacity={"storage": "2048Mi"}, storageClassName="fast",
                      claimRef={"namespace": "ns", "name": "c"})
    pv["metadata"]["deletionTimestamp"] = CREATED
    cells = row("persistentvolumes", pv)
    assert [cells[c] for c in ("Capacity", "Status", "Claim", "StorageClass")] == \
        ["2Gi", "Terminating", "ns/c", "fast"]


def test_storage_class_defaults() -> None:
    sc = {"metadata": meta("s", annotations={"storageclass.beta.kubernetes.io/is-default-class": "true"}),
          "provisioner": "p"}
    assert list(row("storageclasses", sc).values())[:5] == ["s (default)", "p", "Delete", "Immediate", False]


def test_resource_quota_columns_and_quantities() -> None:
    assert columns("resourcequotas") == [("Name", 0), ("Request", 0), ("Limit", 0), ("Age", 0)]
    quota = {"metadata": meta(), "status": {"hard": {"requests.cpu": "2000m", "pods": "10",
                                                     "limits.memory": "2048Mi", "limits": "1"},
                                            "used": {"pods": "3", "limits.memory": "512Mi"}}}
    cells = row("resourcequotas", quota)
    assert (cells["Request"], cells["Limit"]) == ("limits: 0/1, pods: 3/10, requests.cpu: 0/2",
                                                  "limits.memory: 512Mi/2Gi")


def test_ingress_hosts_address_and_class_parameters() -> None:
    rules = [{"host": "a"}, {"host": "b"}, {}, {"host": "d"}, {"host": "e"}]
    ing = {"metadata": meta(), "spec": {"rules": rules},
           "status": {"loadBalancer": {"ingress": [{"ip": "2.2.2.2"}, {"hostname": "lb"}, {"ip": "1.1.1.1"}]}}}
    cells = row("ingresses", ing)
    assert (cells["Class"], cells["Hosts"], cells["Address"], cells["Ports"]) == \
        ("<none>", "a,b,d + 2 more...", "1.1.1.1,2.2.2.2,lb", "80")
    assert row("ingresses", {"metadata": meta(), "spec": {"rules": [{}]}})["Hosts"] == "*"
    params = {"apiGroup": "k8s.example.com", "kind": "Params", "name": "p"}
    cls = {"metadata": meta(), "spec": {"controller": "c", "parameters": params}}
    assert row("ingressclasses", cls)["Parameters"] == "Params.k8s.example.com/p"
    del params["apiGroup"]
    assert row("ingressclasses", cls)["Parameters"] == "Params/p"


def test_endpoints_port_by_port() -> None:
    ep = {"metadata": meta(), "subsets": [
        {"addresses": [{"ip": "10.0.0.1"}, {"ip": "fd00::1"}], "ports": [{"port": 80}, {"port": 443}]}]}
    assert row("endpoints", ep)["Endpoints"] == "10.0.0.1:80,[fd00::1]:80,10.0.0.1:443 + 1 more..."
    headless = {"metadata": meta(), "subsets": [{"addresses": [{"ip": "10.0.0.1"}]}]}
    assert row("endpoints", headless)["Endpoints"] == "10.0.0.1"
    assert row("endpoints", {"metadata": meta(), "subsets": [{"notReadyAddresses": [{"ip": "1.1.1.1"}],
                                                              "ports": [{"port": 80}]}]})["Endpoints"] == ""
    assert row("endpoints", {"metadata": meta()})["Endpoints"] == "<none>"


def test_hpa_targets() -> None:
    metrics = [
        {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization",
                                                                    "averageUtilization": 50}}},
        {"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue",
                                                                       "averageValue": "1024Mi"}}},
        {"type": "Pods", "pods": {"metric": {"name": "qps"}, "target": {"type": "AverageValue",
                                                                        "averageValue": "1k"}}}]
    current = [{"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 12}}},
               {"type": "Resource", "resource": {"name": "memory", "current": {"averageValue": "512Mi"}}}]
    hpa = {"metadata": meta(), "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "maxReplicas": 5,
                                        "metrics": metrics}, "status": {"currentMetrics": current}}
    cells = row("horizontalpodautoscalers", hpa)
    assert (cells["Reference"], cells["Targets"], cells["MinPods"], cells["MaxPods"], cells["Replicas"]) == \
        ("Deployment/web", "cpu: 12%/50%, memory: 512Mi/1Gi + 1 more...", "<unset>", 5, 0)
    external = {"type": "External", "external": {"metric": {"name": "q"}, "target": {"type": "AverageValue",
                                                                                     "averageValue": "30"}}}
    hpa["spec"]["metrics"] = [metrics[2], external]
    hpa["spec"]["minReplicas"] = 2
    hpa["status"]["currentMetrics"] = [{"type": "Pods", "pods": {"current": {"averageValue": "500"}}}]
    cells = row("horizontalpodautoscalers", hpa)
    assert (cells["Targets"], cells["MinPods"]) == ("500/1k, <unknown>/30 (avg)", "2")
    hpa["spec"]["metrics"] = []
    assert row("horizontalpodautoscalers", hpa)["Targets"] == "<none>"


def test_policy_binding_param_ref() -> None:
    def param_ref(ref: Any) -> str:
        binding = {"metadata": meta(), "spec": {"policyName": "p", "paramRef": ref}}
        return str(row("validatingadmissionpolicybindings", binding)["ParamRef"])
    assert param_ref(None) == "<unset>"
    assert param_ref({"name": "cfg", "namespace": "ns"}) == "ns/cfg"
    assert param_ref({"name": "cfg"}) == "*/cfg"
    assert param_ref({"selector": {"matchLabels": {"a": "b"}}}) == "a=b"


def test_network_policy_selector_sorted() -> None:
    np = {"metadata": meta(), "spec": {"podSelector": SELECTOR}}
    assert row("networkpolicies", np)["Pod-Selector"] == SHOWN
    assert row("networkpolicies", {"metadata": meta(), "spec": {"podSelector": {}}})["Pod-Selector"] == "<none>"


@pytest.mark.parametrize(("text", "parsed"), [
    ("2026-01-01T00:00:00Z", datetime(2026, 1, 1, tzinfo=UTC)),
    ("2026-01-01T00:00:00.123456Z", datetime(2026, 1, 1, 0, 0, 0, 123456, tzinfo=UTC)),  # a MicroTime
    ("2026-01-01T00:00:00.5Z", datetime(2026, 1, 1, 0, 0, 0, 500000, tzinfo=UTC)),
    ("2026-1-1T00:00:00Z", datetime(2026, 1, 1, tzinfo=UTC)),  # not ISO: strptime's reading, as before
    ("2026-01-01T02:00:00+02:00", datetime(2026, 1, 1, tzinfo=UTC)),
    ("yesterday", None), (None, None), ("", None),
])
def test_a_timestamp_is_read_in_utc_whatever_form_it_was_written_in(text: Any, parsed: datetime | None) -> None:
    assert _parse_ts(text) == parsed


NAME_DOC = "Name must be unique within a namespace. Is required when creating resources, although some"
AGE_DOC = "CreationTimestamp is a timestamp representing the server time when this object was created."


def descriptions(plural: str) -> dict[str, str]:
    return {c["name"]: c["description"] for c in as_table(plural, [], None)["columnDefinitions"]}


def test_columns_are_described_as_upstreams_printers_describe_them() -> None:
    """Upstream's own sentences, or the API docs of the field a column shows (the release's
    definitions); Name and Age are ObjectMeta's name and creationTimestamp."""
    pods = descriptions("pods")
    assert pods["Name"].startswith(NAME_DOC) and pods["Age"].startswith(AGE_DOC)
    assert pods["Ready"] == "The aggregate readiness state of this pod for accepting traffic."
    assert pods["IP"] == ("podIP address allocated to the pod. Routable at least within the cluster. "
                          "Empty if not yet allocated.")
    assert descriptions("events")["Object"] == "The object that this event is about."
    assert descriptions("nodes")["Internal-IP"].startswith("List of addresses reachable to the node.")
    assert descriptions("persistentvolumes")["StorageClass"] == "StorageClass of the pv"
    assert descriptions("apiservices")["Available"] == "Whether this service is available."
    # an enum field's column: its SwaggerDoc(), without the enum part the OpenAPI description has
    service_type = descriptions("services")["Type"]
    assert service_type.startswith("type determines how the Service is exposed. Defaults to ClusterIP.")
    assert service_type.endswith("#publishing-services-service-types") and "Possible enum" not in service_type
    default = descriptions("roles")  # no printer: Name and Created At
    assert default["Name"].startswith(NAME_DOC) and default["Created At"].startswith(AGE_DOC)


def test_every_built_in_column_has_a_description() -> None:
    """Each quoted field exists in the definitions: no column is left empty but upstream's own
    empty one (a RuntimeClass's Handler quotes ObjectMeta's "handler") and metrics-server's."""
    from controlplane.api.tables import COLUMNS

    empty = {(plural, name) for plural in COLUMNS for name, text in descriptions(plural).items() if not text}
    assert empty == {("runtimeclasses", "Handler")} | {
        (plural, name) for plural in ("nodes.metrics.k8s.io", "pods.metrics.k8s.io")
        for name in ("Name", "CPU", "Memory", "Window")}


def test_the_definitions_are_made_once_per_table() -> None:
    first = as_table("pods", [], None)["columnDefinitions"]
    again = as_table("pods", [], None)["columnDefinitions"]
    assert first == again and all(a is b for a, b in zip(first, again, strict=True))
    assert as_table("pods", [], None, columns=False)["columnDefinitions"] == []
