"""What every write of some built-in types goes through, as upstream's strategies and
v1 conversions: a Secret's stringData merged into data, config keys and immutability,
the namespace name label, create-on-update (Leases, Events, RBAC), field selectors on
absent bools and numbers."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from controlplane.client import ApiError, Client, resource_path

SECRETS = resource_path("", "v1", "secrets", "default")
CMS = resource_path("", "v1", "configmaps", "default")
LEASES = resource_path("coordination.k8s.io", "v1", "leases", "default")


def b64(s: str) -> str:
    return base64.b64encode(s.encode()).decode()


async def test_secret_string_data_is_merged_into_data(client: Client) -> None:
    created = await client.create(SECRETS, {"metadata": {"name": "s"}, "data": {"a": b64("old"), "b": b64("b")},
                                            "stringData": {"a": "new", "c": "see"}})
    assert "stringData" not in created and created["type"] == "Opaque"
    assert created["data"] == {"a": b64("new"), "b": b64("b"), "c": b64("see")}
    stored = await client.get(f"{SECRETS}/s")
    assert stored["data"] == created["data"] and "stringData" not in stored
    # on update and patch too
    stored["stringData"] = {"d": "dee"}
    updated = await client.update(f"{SECRETS}/s", stored)
    assert updated["data"]["d"] == b64("dee") and "stringData" not in updated
    patched = await client.patch(f"{SECRETS}/s", {"stringData": {"e": "ee"}})
    assert patched["data"]["e"] == b64("ee") and "stringData" not in patched
    # a write that drops the type gets the default again, as every upstream decode does
    assert (await client.patch(f"{SECRETS}/s", {"type": None}))["type"] == "Opaque"
    current = await client.get(f"{SECRETS}/s")
    del current["type"]
    assert (await client.update(f"{SECRETS}/s", current))["type"] == "Opaque"


async def test_secret_data_must_be_base64_and_typed_secrets_hold_their_keys(client: Client) -> None:
    with pytest.raises(ApiError) as e:
        await client.create(SECRETS, {"metadata": {"name": "bad"}, "data": {"k": "not base64!!"}})
    assert e.value.code == 400 and "base64" in e.value.message
    with pytest.raises(ApiError) as e:
        await client.create(SECRETS, {"metadata": {"name": "tls"}, "type": "kubernetes.io/tls",
                                      "data": {"tls.key": b64("k")}})
    assert e.value.code == 422 and "data[tls.crt]: Required value" in e.value.message
    await client.create(SECRETS, {"metadata": {"name": "tls"}, "type": "kubernetes.io/tls",
                                  "stringData": {"tls.key": "k", "tls.crt": "c"}})
    with pytest.raises(ApiError) as e:
        await client.patch(f"{SECRETS}/tls", {"type": "Opaque"})
    assert e.value.code == 422 and "type" in e.value.message


async def test_config_keys_size_and_immutability(client: Client) -> None:
    with pytest.raises(ApiError) as e:
        await client.create(CMS, {"metadata": {"name": "k"}, "data": {"bad key": "v"}})
    assert e.value.code == 422 and "a valid config key" in e.value.message
    with pytest.raises(ApiError) as e:
        await client.create(CMS, {"metadata": {"name": "big"}, "data": {"k": "x" * (1024 * 1024 + 1)}})
    assert e.value.code == 422 and "Too long: may not be more than 1048576 bytes" in e.value.message
    await client.create(CMS, {"metadata": {"name": "frozen"}, "data": {"k": "v"}, "immutable": True})
    with pytest.raises(ApiError) as e:
        await client.patch(f"{CMS}/frozen", {"data": {"k": "changed"}})
    assert e.value.code == 422 and "field is immutable when `immutable` is set" in e.value.message
    with pytest.raises(ApiError) as e:
        await client.patch(f"{CMS}/frozen", {"immutable": False})
    assert e.value.code == 422
    # its metadata may still change
    labelled = await client.patch(f"{CMS}/frozen", {"metadata": {"labels": {"a": "b"}}})
    assert labelled["metadata"]["labels"] == {"a": "b"} and labelled["data"] == {"k": "v"}


async def test_namespaces_carry_their_name_label(client: Client) -> None:
    nss = resource_path("", "v1", "namespaces")
    created = await client.create(nss, {"metadata": {"name": "team-a", "labels": {"x": "y"}}})
    assert created["metadata"]["labels"] == {"x": "y", "kubernetes.io/metadata.name": "team-a"}
    patched = await client.patch(f"{nss}/team-a", {"metadata": {"labels": {"kubernetes.io/metadata.name": None}}})
    assert patched["metadata"]["labels"]["kubernetes.io/metadata.name"] == "team-a"
    listed = await client.list(nss, labelSelector="kubernetes.io/metadata.name=team-a")
    assert [n["metadata"]["name"] for n in listed["items"]] == ["team-a"]


async def test_an_update_of_a_missing_lease_creates_it_but_not_of_a_missing_configmap(client: Client) -> None:
    lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "node-1"},
             "spec": {"holderIdentity": "node-1", "leaseDurationSeconds": 40}}
    created = await client.update(f"{LEASES}/node-1", lease)
    assert created["metadata"]["uid"] and created["spec"]["holderIdentity"] == "node-1"
    assert (await client.get(f"{LEASES}/node-1"))["metadata"]["uid"] == created["metadata"]["uid"]
    with pytest.raises(ApiError) as e:
        await client.update(f"{CMS}/missing", {"metadata": {"name": "missing"}, "data": {}})
    assert e.value.code == 404


async def test_field_selectors_match_the_zero_value_of_an_absent_field(client: Client) -> None:
    nodes = resource_path("", "v1", "nodes")
    await client.create(nodes, {"metadata": {"name": "plain"}})
    await client.create(nodes, {"metadata": {"name": "cordoned"}, "spec": {"unschedulable": True}})
    names = [n["metadata"]["name"] for n in
             (await client.list(nodes, fieldSelector="spec.unschedulable=false"))["items"]]
    assert names == ["plain"]
    names = [n["metadata"]["name"] for n in
             (await client.list(nodes, fieldSelector="spec.unschedulable!=false"))["items"]]
    assert names == ["cordoned"]


APPS = "/apis/apps/v1/namespaces/default"
TEMPLATE = {"metadata": {"labels": {"app": "w"}},
            "spec": {"containers": [{"name": "c", "image": "nginx:1.27",
                                     "readinessProbe": {"httpGet": {"port": 80}}}]}}


async def test_workloads_get_their_defaults_and_the_status_fields_go_always_sends(client: Client) -> None:
    selector = {"matchLabels": {"app": "w"}}
    sts = await client.create(f"{APPS}/statefulsets", {"metadata": {"name": "s"}, "spec": {
        "serviceName": "s", "selector": selector, "template": TEMPLATE}})
    assert sts["status"] == {"replicas": 0, "availableReplicas": 0}
    assert sts["spec"]["replicas"] == 1 and sts["spec"]["podManagementPolicy"] == "OrderedReady"
    assert sts["spec"]["updateStrategy"] == {"type": "RollingUpdate",  # maxUnavailable: MaxUnavailableStatefulSet
                                             "rollingUpdate": {"partition": 0, "maxUnavailable": 1}}
    template = sts["spec"]["template"]["spec"]
    assert template["restartPolicy"] == "Always" and template["dnsPolicy"] == "ClusterFirst"
    probe = template["containers"][0]["readinessProbe"]
    assert probe == {"httpGet": {"port": 80, "path": "/", "scheme": "HTTP"}, "timeoutSeconds": 1,
                     "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3}
    assert "tolerations" not in template and "serviceAccountName" not in template  # pod admission only
    rs = await client.create(f"{APPS}/replicasets", {"metadata": {"name": "r"}, "spec": {
        "selector": selector, "template": TEMPLATE}})
    assert rs["status"] == {"replicas": 0} and rs["spec"]["replicas"] == 1
    ds = await client.create(f"{APPS}/daemonsets", {"metadata": {"name": "d"}, "spec": {
        "selector": selector, "template": TEMPLATE}})
    assert ds["status"] == {"currentNumberScheduled": 0, "numberMisscheduled": 0, "desiredNumberScheduled": 0,
                            "numberReady": 0}
    dep = await client.create(f"{APPS}/deployments", {"metadata": {"name": "web"}, "spec": {
        "selector": selector, "template": TEMPLATE}})
    assert dep["spec"]["strategy"] == {"type": "RollingUpdate",
                                       "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}}
    assert (dep["spec"]["replicas"], dep["spec"]["revisionHistoryLimit"],
            dep["spec"]["progressDeadlineSeconds"]) == (1, 10, 600)
    # a status write that leaves the always-present fields out gets them back
    status = await client.patch(f"{APPS}/statefulsets/s/status", {"status": {"replicas": None}})
    assert status["status"]["replicas"] == 0


async def test_a_job_gets_its_selector_and_labels_from_its_uid(client: Client) -> None:
    template = {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}
    job = await client.create("/apis/batch/v1/namespaces/default/jobs",
                              {"metadata": {"name": "train"}, "spec": {"template": template}})
    uid, spec = job["metadata"]["uid"], job["spec"]
    assert spec["selector"] == {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
    assert spec["template"]["metadata"]["labels"] == {
        "controller-uid": uid, "batch.kubernetes.io/controller-uid": uid, "job-name": "train",
        "batch.kubernetes.io/job-name": "train"}
    assert (spec["completions"], spec["parallelism"], spec["backoffLimit"], spec["completionMode"],
            spec["suspend"]) == (1, 1, 6, "NonIndexed", False)
    # SetDefaults_Job: a Job without labels of its own shows its template's (kubectl describe job)
    assert job["metadata"]["labels"] == spec["template"]["metadata"]["labels"]
    own = await client.create("/apis/batch/v1/namespaces/default/jobs",
                              {"metadata": {"name": "own", "labels": {"team": "a"}}, "spec": {"template": template}})
    assert own["metadata"]["labels"] == {"team": "a"}


async def test_malformed_times_and_quantities_are_refused_as_go_decodes_them(client: Client) -> None:
    pods = resource_path("", "v1", "pods", "default")
    bad: dict[str, Any] = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i", "resources": {
        "requests": {"cpu": "lots"}}}]}}
    with pytest.raises(ApiError) as e:
        await client.create(pods, bad)
    assert e.value.code == 400 and "quantities must match the regular expression" in e.value.message
    bad["spec"]["containers"][0]["resources"]["requests"] = {"cpu": "250m", "memory": 1073741824}
    await client.create(pods, bad)  # a JSON number is a quantity too
    lease = {"metadata": {"name": "l"}, "spec": {"renewTime": "2026-11-30T10:00:00.000000Z"}}
    await client.create(LEASES, lease)
    with pytest.raises(ApiError) as e:
        await client.patch(f"{LEASES}/l", {"spec": {"renewTime": "notatime"}})
    assert e.value.code == 422 and 'parsing time "notatime"' in e.value.message
    with pytest.raises(ApiError) as e:
        await client.patch(f"{pods}/p/status", {"status": {"conditions": [
            {"type": "Ready", "status": "True", "lastTransitionTime": "yesterday"}]}})
    assert e.value.code == 422
    assert (await client.get(f"{LEASES}/l"))["spec"]["renewTime"] == "2026-11-30T10:00:00.000000Z"


async def test_labels_and_annotations_are_validated_as_upstream(client: Client) -> None:
    for labels in ({"bad key!": "v"}, {"k": "has space"}, {"k": "v" * 64}, {"x" * 64: "v"}, {"Bad_Prefix/k": "v"}):
        with pytest.raises(ApiError) as e:
            await client.create(CMS, {"metadata": {"name": "lab", "labels": labels}})
        assert e.value.code == 422 and "metadata.labels" in e.value.message, labels
    for value in ("x" * (256 * 1024), "é" * (128 * 1024)):  # bytes, not characters, as Go's len counts
        with pytest.raises(ApiError) as e:
            await client.create(CMS, {"metadata": {"name": "ann", "annotations": {"a": value}}})
        assert e.value.code == 422
        assert "metadata.annotations: Too long: may not be more than 262144 bytes" in e.value.message
    ok = await client.create(CMS, {"metadata": {
        "name": "fine", "labels": {"app.kubernetes.io/name": "web", "empty": "", "v": "1.2_3-x"},
        "annotations": {"example.com/note": "any text"}}})
    with pytest.raises(ApiError) as e:  # updates too
        await client.patch(f"{CMS}/fine", {"metadata": {"labels": {"k": "-bad"}}})
    assert e.value.code == 422 and ok["metadata"]["labels"]["empty"] == ""


PODS = "/api/v1/namespaces/default/pods"


def _container(**resources: dict[str, str]) -> dict[str, Any]:
    return {"name": f"c{len(resources)}", "image": "busybox", "resources": resources}


async def test_a_pod_gets_its_qos_class_at_create(client: Client) -> None:
    cases = {
        "best": [{"name": "c", "image": "busybox"}],
        "guaranteed": [_container(limits={"cpu": "1", "memory": "1Gi"})],  # requests default to the limits
        "burstable": [_container(requests={"cpu": "100m"})],
        "mixed": [_container(limits={"cpu": "1", "memory": "1Gi"}), {"name": "side", "image": "busybox"}],
    }
    for name, containers in cases.items():
        made = await client.create(PODS, {"metadata": {"name": name}, "spec": {"containers": containers}})
        assert made["status"]["qosClass"] == {"best": "BestEffort", "guaranteed": "Guaranteed",
                                              "burstable": "Burstable", "mixed": "Burstable"}[name], name


async def test_a_pod_update_is_defaulted_and_keeps_the_default_tolerations(client: Client) -> None:
    """A PUT or patch leaving out defaulted fields stores them defaulted, and the
    DefaultTolerationSeconds admission puts the not-ready/unreachable tolerations back on
    update too, as upstream."""
    made = await client.create(PODS, {"metadata": {"name": "p"}, "spec": {"containers": [
        {"name": "c", "image": "busybox"}]}})
    defaults = made["spec"]["tolerations"]
    assert {t["key"] for t in defaults} == {"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"}
    made["spec"].pop("restartPolicy")
    made["spec"]["containers"][0].pop("imagePullPolicy")
    made["spec"]["tolerations"] = []
    updated = await client.update(f"{PODS}/p", made)
    assert updated["spec"]["restartPolicy"] == "Always"
    assert updated["spec"]["containers"][0]["imagePullPolicy"] == "Always"
    assert updated["spec"]["tolerations"] == defaults
    added = {"key": "k", "operator": "Exists", "effect": "NoSchedule"}
    patched = await client.patch(f"{PODS}/p", {"spec": {"tolerations": [added]}}, patch_type="merge")
    assert patched["spec"]["tolerations"] == [added, *defaults]


async def test_null_or_empty_defaulted_fields_are_defaulted_not_refused(client: Client) -> None:
    """Go decodes null into the zero value and the defaulting functions fill it: a Helm
    chart's empty ``imagePullPolicy:`` is defaulted, as upstream."""
    pod = await client.create(PODS, {"metadata": {"name": "nulls"}, "spec": {
        "restartPolicy": None, "dnsPolicy": "", "containers": [{
            "name": "c", "image": "busybox:1.36", "imagePullPolicy": None, "terminationMessagePolicy": None,
            "ports": [{"containerPort": 80, "protocol": None}]}]}})
    spec = pod["spec"]
    assert (spec["restartPolicy"], spec["dnsPolicy"]) == ("Always", "ClusterFirst")
    c = spec["containers"][0]
    assert (c["imagePullPolicy"], c["terminationMessagePolicy"], c["ports"][0]["protocol"]) == (
        "IfNotPresent", "File", "TCP")
    svc = await client.create("/api/v1/namespaces/default/services", {"metadata": {"name": "nulls"}, "spec": {
        "type": None, "sessionAffinity": None, "ports": [{"port": 80, "protocol": None}]}})
    assert (svc["spec"]["type"], svc["spec"]["sessionAffinity"], svc["spec"]["ports"][0]["protocol"]) == (
        "ClusterIP", "None", "TCP")
    d = await client.create("/apis/apps/v1/namespaces/default/deployments", {
        "metadata": {"name": "nulls"}, "spec": {
            "replicas": None, "strategy": {"type": None}, "selector": {"matchLabels": {"app": "n"}},
            "template": {"metadata": {"labels": {"app": "n"}},
                         "spec": {"containers": [{"name": "c", "image": "busybox", "imagePullPolicy": ""}]}}}})
    assert (d["spec"]["replicas"], d["spec"]["strategy"]["type"]) == (1, "RollingUpdate")
    zero = await client.create("/apis/apps/v1/namespaces/default/deployments", {
        "metadata": {"name": "zero"}, "spec": {
            "replicas": 0, "selector": {"matchLabels": {"app": "z"}},
            "template": {"metadata": {"labels": {"app": "z"}}, "spec": {"containers": [
                {"name": "c", "image": "busybox"}]}}}})
    assert zero["spec"]["replicas"] == 0  # a zero is a value


async def test_qos_class_follows_admission_and_stays(client: Client) -> None:
    """The class is made after the LimitRanger's defaults, and a status write without it keeps it."""
    await client.create("/api/v1/namespaces/default/limitranges", {"metadata": {"name": "defaults"}, "spec": {
        "limits": [{"type": "Container", "default": {"cpu": "1", "memory": "1Gi"},
                    "defaultRequest": {"cpu": "1", "memory": "1Gi"}}]}})
    body = {"metadata": {"name": "ranged"}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
    pod = await client.create(PODS, body)  # at once: the LimitRanger reads a namespace it has none for
    assert pod["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "1", "memory": "1Gi"}
    assert pod["status"]["qosClass"] == "Guaranteed"
    written = await client.update(f"{PODS}/ranged/status", {**pod, "status": {"phase": "Pending"}})
    assert written["status"]["qosClass"] == "Guaranteed"


async def test_an_update_that_leaves_out_defaults_changes_no_generation(client: Client) -> None:
    made = await client.create(PODS, {"metadata": {"name": "gen"}, "spec": {"containers": [
        {"name": "c", "image": "busybox"}]}})
    made["spec"].pop("restartPolicy")
    made["spec"]["tolerations"] = []
    updated = await client.update(f"{PODS}/gen", made)
    assert updated["metadata"]["generation"] == made["metadata"]["generation"]
    assert updated["spec"]["restartPolicy"] == "Always"


async def test_pod_ips_and_host_ips_agree_with_their_singular_fields(client: Client) -> None:
    """As upstream's v1 PodStatus conversion: a kubelet that writes only ``podIP``/``hostIP``
    (KWOK's general stages) gets the lists too; a list alone gives the singular field; a
    singular field that differs from the list's first entry wins."""
    pod = await client.create(PODS, {"metadata": {"name": "ips"}, "spec": {"containers": [
        {"name": "c", "image": "busybox"}]}})
    status = {"phase": "Running", "podIP": "10.1.0.5", "hostIP": "10.0.0.2"}
    written = await client.update(f"{PODS}/ips/status", {**pod, "status": status})
    assert written["status"]["podIPs"] == [{"ip": "10.1.0.5"}]
    assert written["status"]["hostIPs"] == [{"ip": "10.0.0.2"}]
    assert written["status"]["qosClass"] == "BestEffort"
    written = await client.patch(f"{PODS}/ips/status", {"status": {
        "podIP": None, "podIPs": [{"ip": "10.1.0.6"}, {"ip": "fd00::6"}],
        "hostIP": "10.0.0.3"}}, patch_type="merge")
    assert written["status"]["podIP"] == "10.1.0.6"
    assert written["status"]["podIPs"] == [{"ip": "10.1.0.6"}, {"ip": "fd00::6"}]
    assert written["status"]["hostIPs"] == [{"ip": "10.0.0.3"}]  # the singular one wins
    assert (await client.get(f"{PODS}/ips"))["status"]["podIP"] == "10.1.0.6"


async def test_admin_access_needs_the_namespace_label(client: Client) -> None:
    # KEP-5018: adminAccess in a ResourceClaim or ResourceClaimTemplate is allowed only in a
    # namespace labelled resource.kubernetes.io/admin-access: "true" (dra-example-driver's
    # demo/examples/admin-access labels its namespace so)
    namespaces = resource_path("", "v1", "namespaces")
    await client.create(namespaces, {"metadata": {"name": "plain"}})
    await client.create(namespaces, {"metadata": {"name": "admin",
                                                  "labels": {"resource.kubernetes.io/admin-access": "true"}}})
    admin: dict[str, Any] = {"deviceClassName": "gpu.example.com", "allocationMode": "All", "adminAccess": True}
    requests = [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}},
                {"name": "admin-gpu", "exactly": admin}]
    claim: dict[str, Any] = {"metadata": {"name": "c"}, "spec": {"devices": {"requests": requests}}}
    template: dict[str, Any] = {"metadata": {"name": "t"}, "spec": {"spec": {"devices": {"requests": requests}}}}
    for plural, body, kind in (("resourceclaims", claim, "ResourceClaim"),
                               ("resourceclaimtemplates", template, "ResourceClaimTemplate")):
        with pytest.raises(ApiError) as e:
            await client.create(resource_path("resource.k8s.io", "v1", plural, "plain"), body)
        assert e.value.code == 422
        assert str(e.value.message) == (
            f'{kind}.resource.k8s.io "{body["metadata"]["name"]}" is invalid: spec.devices.requests[1].adminAccess: '
            "Forbidden: admin access to devices requires the `resource.kubernetes.io/admin-access: true` label "
            "on the containing namespace")
        await client.create(resource_path("resource.k8s.io", "v1", plural, "admin"), body)
    # without adminAccess (or with it false) any namespace will do
    admin["adminAccess"] = False
    await client.create(resource_path("resource.k8s.io", "v1", "resourceclaims", "plain"), claim)
