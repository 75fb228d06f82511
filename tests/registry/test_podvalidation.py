"""Upstream's hand-written validation of pod specs, workload templates and Services, through
the API: each refused write is a 422 Invalid whose causes carry upstream's field paths and
words; valid objects are still accepted."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest

from controlplane.client import ApiError, Client, resource_path
from controlplane.tokens import find_admin, read_token_file
from tests.test_cli import Serve, running, start_serve

PODS = resource_path("", "v1", "pods", "default")
SERVICES = resource_path("", "v1", "services", "default")
RCS = resource_path("", "v1", "replicationcontrollers", "default")
DEPLOYMENTS = resource_path("apps", "v1", "deployments", "default")
REPLICASETS = resource_path("apps", "v1", "replicasets", "default")
STATEFULSETS = resource_path("apps", "v1", "statefulsets", "default")
DAEMONSETS = resource_path("apps", "v1", "daemonsets", "default")
JOBS = resource_path("batch", "v1", "jobs", "default")
CRONJOBS = resource_path("batch", "v1", "cronjobs", "default")

LABEL_HINT = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
              "start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for "
              "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')")


def pod_spec(**extra: Any) -> dict[str, Any]:
    return {"containers": [{"name": "app", "image": "nginx:1.27"}], **extra}


def pod(spec: dict[str, Any], name: str = "p") -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": spec}


def template(spec: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"labels": {"app": "a"}}, "spec": spec}


def deployment(spec: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"metadata": {"name": "d"},
            "spec": {"selector": {"matchLabels": {"app": "a"}}, "template": template(spec), **extra}}


async def invalid(client: Client, path: str, body: dict[str, Any]) -> list[dict[str, str]]:
    """The causes of the 422 a create of ``body`` must get."""
    with pytest.raises(ApiError) as e:
        await client.create(path, body)
    assert e.value.code == 422, e.value
    assert e.value.reason == "Invalid"
    details = e.value.status["details"]
    causes: list[dict[str, str]] = details["causes"]
    for c in causes:  # the message lists each cause as `field: message`
        assert f"{c['field']}: {c['message']}" in e.value.message
    return causes


def only(causes: list[dict[str, str]]) -> dict[str, str]:
    assert len(causes) == 1, causes
    return causes[0]


# -- pods -----------------------------------------------------------------------------------------
async def test_a_valid_pod_is_accepted(client: Client) -> None:
    spec = pod_spec(volumes=[{"name": "data"}], initContainers=[{"name": "init", "image": "busybox"}])
    spec["containers"][0].update({
        "ports": [{"containerPort": 80, "name": "http"}, {"containerPort": 53, "protocol": "UDP"}],
        "env": [{"name": "LOG_LEVEL", "value": "debug"}, {"name": "my.env-name", "value": "x"}],
        "resources": {"requests": {"cpu": "500m", "memory": "64Mi"}, "limits": {"cpu": "1", "memory": "64Mi"}},
        "volumeMounts": [{"name": "data", "mountPath": "/data"}], "imagePullPolicy": "Never"})
    created = await client.create(PODS, pod(spec, name="ok"))
    assert created["spec"]["containers"][0]["image"] == "nginx:1.27"


async def test_a_pod_needs_containers_with_images(client: Client) -> None:
    cause = only(await invalid(client, PODS, pod({"containers": []})))
    assert cause == {"reason": "FieldValueRequired", "field": "spec.containers", "message": "Required value"}
    cause = only(await invalid(client, PODS, pod({"containers": [{"name": "a"}]})))
    assert cause == {"reason": "FieldValueRequired", "field": "spec.containers[0].image", "message": "Required value"}


async def test_the_whole_message_names_the_pod(client: Client) -> None:
    with pytest.raises(ApiError) as e:
        await client.create(PODS, pod({"containers": [{"name": "a"}]}, name="web"))
    assert e.value.message == 'Pod "web" is invalid: spec.containers[0].image: Required value'
    with pytest.raises(ApiError) as e:
        await client.create(PODS, pod({"containers": [{"name": "a"}], "restartPolicy": "Sometimes"}, name="web"))
    assert e.value.message == ('Pod "web" is invalid: [spec.containers[0].image: Required value, '
                               'spec.restartPolicy: Unsupported value: "Sometimes": supported values: '
                               '"Always", "OnFailure", "Never"]')


async def test_container_names_are_unique_dns_labels(client: Client) -> None:
    spec = {"containers": [{"name": "C_bad", "image": "x"}]}
    cause = only(await invalid(client, PODS, pod(spec)))
    assert cause == {"reason": "FieldValueInvalid", "field": "spec.containers[0].name",
                     "message": f'Invalid value: "C_bad": {LABEL_HINT}'}
    spec = {"containers": [{"name": "a", "image": "x"}, {"name": "a", "image": "y"}]}
    cause = only(await invalid(client, PODS, pod(spec)))
    assert cause == {"reason": "FieldValueDuplicate", "field": "spec.containers[1].name",
                     "message": 'Duplicate value: "a"'}
    # across containers and init containers
    spec = {"containers": [{"name": "a", "image": "x"}], "initContainers": [{"name": "a", "image": "y"}]}
    cause = only(await invalid(client, PODS, pod(spec)))
    assert cause == {"reason": "FieldValueDuplicate", "field": "spec.initContainers[0].name",
                     "message": 'Duplicate value: "a"'}


async def test_container_ports(client: Client) -> None:
    spec = pod_spec()
    spec["containers"][0]["ports"] = [{"containerPort": 70000}]
    cause = only(await invalid(client, PODS, pod(spec)))
    assert cause == {"reason": "FieldValueInvalid", "field": "spec.containers[0].ports[0].containerPort",
                     "message": "Invalid value: 70000: must be between 1 and 65535, inclusive"}
    spec["containers"][0]["ports"] = [{"containerPort": 80, "protocol": "XTP"}]
    cause = only(await invalid(client, PODS, pod(spec)))
    assert cause == {"reason": "FieldValueNotSupported", "field": "spec.containers[0].ports[0].protocol",
                     "message": 'Unsupported value: "XTP": supported values: "SCTP", "TCP", "UDP"'}


@pytest.mark.parametrize(("field", "value", "supported"), [
    ("restartPolicy", "Sometimes", '"Always", "OnFailure", "Never"'),
    ("dnsPolicy", "Weird", '"ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"'),
])
async def test_pod_policies(client: Client, field: str, value: str, supported: str) -> None:
    cause = only(await invalid(client, PODS, pod(pod_spec(**{field: value}))))
    assert cause == {"reason": "FieldValueNotSupported", "field": f"spec.{field}",
                     "message": f'Unsupported value: "{value}": supported values: {supported}'}


async def test_image_pull_policy(client: Client) -> None:
    spec = pod_spec()
    spec["containers"][0]["imagePullPolicy"] = "Sometimes"
    cause = only(await invalid(client, PODS, pod(spec)))
    assert cause == {"reason": "FieldValueNotSupported", "field": "spec.containers[0].imagePullPolicy",
                     "message": 'Unsupported value: "Sometimes": supported values: "Always", "IfNotPresent", '
                                '"Never"'}


async def test_env_var_names(client: Client) -> None:
    spec = pod_spec()
    spec["containers"][0]["env"] = [{"name": "1 bad=", "value": "v"}]
    cause = only(await invalid(client, PODS, pod(spec)))
    assert cause == {"reason": "FieldValueInvalid", "field": "spec.containers[0].env[0].name",
                     "message": 'Invalid value: "1 bad=": a valid environment variable name must consist only '
                                "of printable ASCII characters other than '='"}
    spec["containers"][0]["env"] = [{"name": "1 relaxed.name-ok", "value": "v"}]  # printable ASCII is fine
    await client.create(PODS, pod(spec, name="relaxed"))


async def test_requests_may_not_exceed_limits(client: Client) -> None:
    spec = pod_spec()
    spec["containers"][0]["resources"] = {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}
    cause = only(await invalid(client, PODS, pod(spec)))
    assert cause == {"reason": "FieldValueInvalid", "field": "spec.containers[0].resources.requests",
                     "message": 'Invalid value: "2": must be less than or equal to cpu limit of 1'}
    # an extended resource's request must equal its limit
    spec["containers"][0]["resources"] = {"requests": {"example.com/gpu": "1"}, "limits": {"example.com/gpu": "2"}}
    cause = only(await invalid(client, PODS, pod(spec)))
    assert cause["message"] == 'Invalid value: "1": must be equal to example.com/gpu limit of 2'


async def test_volume_mounts_name_a_volume_and_volume_names_are_unique(client: Client) -> None:
    spec = pod_spec()
    spec["containers"][0]["volumeMounts"] = [{"name": "x", "mountPath": "/x"}]
    cause = only(await invalid(client, PODS, pod(spec)))
    assert cause == {"reason": "FieldValueNotFound", "field": "spec.containers[0].volumeMounts[0].name",
                     "message": 'Not found: "x"'}
    spec = pod_spec(volumes=[{"name": "v", "emptyDir": {}}, {"name": "v", "emptyDir": {}}])
    cause = only(await invalid(client, PODS, pod(spec)))
    assert cause == {"reason": "FieldValueDuplicate", "field": "spec.volumes[1].name",
                     "message": 'Duplicate value: "v"'}


async def test_a_pod_update_validates_the_new_spec(client: Client) -> None:
    created = await client.create(PODS, pod(pod_spec(), name="u"))
    changed = copy.deepcopy(created)
    changed["spec"]["containers"][0]["image"] = ""
    with pytest.raises(ApiError) as e:
        await client.update(f"{PODS}/u", changed)
    assert e.value.code == 422
    assert {"reason": "FieldValueRequired", "field": "spec.containers[0].image",
            "message": "Required value"} in e.value.status["details"]["causes"]
    # an image change is still allowed, and a label patch leaves the spec alone
    changed["spec"]["containers"][0]["image"] = "nginx:1.28"
    updated = await client.update(f"{PODS}/u", changed)
    assert updated["spec"]["containers"][0]["image"] == "nginx:1.28"
    patched = await client.patch(f"{PODS}/u", {"metadata": {"labels": {"a": "b"}}})
    assert patched["metadata"]["labels"] == {"a": "b"}


# -- workloads ------------------------------------------------------------------------------------
async def test_valid_workloads_are_accepted(client: Client) -> None:
    await client.create(DEPLOYMENTS, deployment(pod_spec(), replicas=2, strategy={"type": "Recreate"}))
    job = {"metadata": {"name": "j"}, "spec": {"template": {"spec": pod_spec(restartPolicy="Never")}}}
    await client.create(JOBS, job)
    cron = {"metadata": {"name": "c"}, "spec": {"schedule": "*/5 * * * *", "jobTemplate": {
        "spec": {"template": {"spec": pod_spec(restartPolicy="OnFailure")}}}}}
    await client.create(CRONJOBS, cron)


@pytest.mark.parametrize("path", [DEPLOYMENTS, REPLICASETS, STATEFULSETS, RCS])
async def test_replicas_may_not_be_negative(client: Client, path: str) -> None:
    body = deployment(pod_spec(), replicas=-1)
    if path == RCS:
        body["spec"]["selector"] = {"app": "a"}
    if path == STATEFULSETS:
        body["spec"]["serviceName"] = "s"
    cause = only(await invalid(client, path, body))
    assert cause == {"reason": "FieldValueInvalid", "field": "spec.replicas",
                     "message": "Invalid value: -1: must be greater than or equal to 0"}


async def test_deployment_strategy_type(client: Client) -> None:
    cause = only(await invalid(client, DEPLOYMENTS, deployment(pod_spec(), strategy={"type": "Bogus"})))
    assert cause["reason"] == "FieldValueNotSupported" and cause["field"] == "spec.strategy"
    assert cause["message"] == ('Unsupported value: apps.DeploymentStrategy{Type:"Bogus", '
                                'RollingUpdate:(*apps.RollingUpdateDeployment)(nil)}: supported values: '
                                '"Recreate", "RollingUpdate"')


DEPLOYMENT_ROLLING = "spec.strategy.rollingUpdate"


@pytest.mark.parametrize(("bounds", "causes"), [
    ({"maxUnavailable": 0, "maxSurge": 0}, [("FieldValueInvalid", f"{DEPLOYMENT_ROLLING}.maxUnavailable",
                                             "Invalid value: 0: may not be 0 when `maxSurge` is 0")]),
    ({"maxUnavailable": "0%", "maxSurge": "0%"}, [("FieldValueInvalid", f"{DEPLOYMENT_ROLLING}.maxUnavailable",
                                                   "Invalid value: 0%: may not be 0 when `maxSurge` is 0")]),
    # upstream's order: both bounds' forms, then the pair, then maxUnavailable's percentage (a surge may pass 100%)
    ({"maxUnavailable": "150%", "maxSurge": -1}, [
        ("FieldValueInvalid", f"{DEPLOYMENT_ROLLING}.maxSurge",
         "Invalid value: -1: must be greater than or equal to 0"),
        ("FieldValueInvalid", f"{DEPLOYMENT_ROLLING}.maxUnavailable",
         "Invalid value: 150%: must not be greater than 100%")]),
    ({"maxUnavailable": "x", "maxSurge": 0}, [
        ("FieldValueInvalid", f"{DEPLOYMENT_ROLLING}.maxUnavailable",
         "Invalid value: x: a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  "
         "or '93%', regex used for validation is '[0-9]+%')"),
        ("FieldValueInvalid", f"{DEPLOYMENT_ROLLING}.maxUnavailable",
         "Invalid value: x: may not be 0 when `maxSurge` is 0")]),
])
async def test_deployment_rolling_update_bounds(client: Client, bounds: dict[str, Any],
                                                causes: list[tuple[str, str, str]]) -> None:
    body = deployment(pod_spec(), strategy={"type": "RollingUpdate", "rollingUpdate": bounds})
    got = await invalid(client, DEPLOYMENTS, body)
    assert [(c["reason"], c["field"], c["message"]) for c in got] == causes


async def test_deployment_rolling_update_bounds_accepted(client: Client) -> None:
    for name, bounds in (("surge", {"maxUnavailable": 0, "maxSurge": "200%"}), ("both", {"maxUnavailable": 1,
                                                                                         "maxSurge": 1})):
        body = deployment(pod_spec(), strategy={"type": "RollingUpdate", "rollingUpdate": bounds})
        body["metadata"]["name"] = name
        assert (await client.create(DEPLOYMENTS, body))["spec"]["strategy"]["rollingUpdate"] == bounds


ROLLING = "spec.updateStrategy.rollingUpdate"
PERCENT_HINT = ("a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or "
                "'93%', regex used for validation is '[0-9]+%')")


def rolling(**bounds: Any) -> dict[str, Any]:
    return {"type": "RollingUpdate", "rollingUpdate": bounds}


async def test_daemon_set_strategies_accepted_and_defaulted(client: Client) -> None:
    for name, strategy in (("plain", None), ("surge", rolling(maxUnavailable=0, maxSurge="100%")),
                           ("pct", rolling(maxUnavailable="10%")), ("ondelete", {"type": "OnDelete"}),
                           ("ondelete-rolling", {"type": "OnDelete", "rollingUpdate": {"maxSurge": -1}})):
        body = deployment(pod_spec()) if strategy is None else deployment(pod_spec(), updateStrategy=strategy)
        body["metadata"]["name"] = name
        created = await client.create(DAEMONSETS, body)
        if strategy is None:
            assert created["spec"]["updateStrategy"] == rolling(maxUnavailable=1, maxSurge=0)
        elif name == "pct":
            assert created["spec"]["updateStrategy"]["rollingUpdate"] == {"maxUnavailable": "10%", "maxSurge": 0}


@pytest.mark.parametrize(("strategy", "causes"), [
    (rolling(maxUnavailable=-1), [("FieldValueInvalid", f"{ROLLING}.maxUnavailable",
                                   "Invalid value: -1: must be greater than or equal to 0")]),
    (rolling(maxUnavailable=0, maxSurge="150%"), [("FieldValueInvalid", f"{ROLLING}.maxSurge",
                                                   "Invalid value: 150%: must not be greater than 100%")]),
    # a string without % is no percent, but reads as the number it is (IntValue): not zero
    (rolling(maxUnavailable="5"), [("FieldValueInvalid", f"{ROLLING}.maxUnavailable",
                                    f"Invalid value: 5: {PERCENT_HINT}")]),
    (rolling(maxUnavailable=""), [("FieldValueInvalid", f"{ROLLING}.maxUnavailable",
                                   f"Invalid value: : {PERCENT_HINT}"),
                                  ("FieldValueRequired", f"{ROLLING}.maxUnavailable",
                                   "Required value: cannot be 0 when maxSurge is 0")]),
    (rolling(maxUnavailable=0), [("FieldValueRequired", f"{ROLLING}.maxUnavailable",
                                  "Required value: cannot be 0 when maxSurge is 0")]),
    (rolling(maxUnavailable="0%", maxSurge="0%"), [("FieldValueRequired", f"{ROLLING}.maxUnavailable",
                                                    "Required value: cannot be 0 when maxSurge is 0")]),
    (rolling(maxSurge=1), [("FieldValueInvalid", f"{ROLLING}.maxSurge",
                            "Invalid value: 1: may not be set when maxUnavailable is non-zero")]),
    # upstream's order: both bounds' forms, then both percentages, then the pair
    (rolling(maxUnavailable="200%", maxSurge=-2), [
        ("FieldValueInvalid", f"{ROLLING}.maxSurge", "Invalid value: -2: must be greater than or equal to 0"),
        ("FieldValueInvalid", f"{ROLLING}.maxUnavailable", "Invalid value: 200%: must not be greater than 100%"),
        ("FieldValueInvalid", f"{ROLLING}.maxSurge", "Invalid value: -2: may not be set when maxUnavailable is "
                                                     "non-zero")]),
    ({"type": "Bogus"}, [("FieldValueNotSupported", "spec.updateStrategy",
                          'Unsupported value: apps.DaemonSetUpdateStrategy{Type:"Bogus", '
                          'RollingUpdate:(*apps.RollingUpdateDaemonSet)(nil)}: supported values: "RollingUpdate", '
                          '"OnDelete"')]),
])
async def test_daemon_set_update_strategy(client: Client, strategy: dict[str, Any],
                                          causes: list[tuple[str, str, str]]) -> None:
    got = await invalid(client, DAEMONSETS, deployment(pod_spec(), updateStrategy=strategy))
    assert [(c["reason"], c["field"], c["message"]) for c in got] == causes


async def test_daemon_set_counts_and_strategy_on_update(client: Client) -> None:
    got = await invalid(client, DAEMONSETS, deployment(pod_spec(), minReadySeconds=-1, revisionHistoryLimit=-3))
    assert [(c["field"], c["message"]) for c in got] == [
        ("spec.minReadySeconds", "Invalid value: -1: must be greater than or equal to 0"),
        ("spec.revisionHistoryLimit", "Invalid value: -3: must be greater than or equal to 0")]
    created = await client.create(DAEMONSETS, deployment(pod_spec()))
    created["spec"]["updateStrategy"]["rollingUpdate"]["maxSurge"] = "25%"
    with pytest.raises(ApiError) as e:
        await client.update(f"{DAEMONSETS}/d", created)
    assert e.value.code == 422
    assert e.value.status["details"]["causes"] == [{
        "reason": "FieldValueInvalid", "field": f"{ROLLING}.maxSurge",
        "message": "Invalid value: 25%: may not be set when maxUnavailable is non-zero"}]


@pytest.mark.parametrize("path", [DEPLOYMENTS, REPLICASETS, STATEFULSETS, DAEMONSETS, RCS])
async def test_replicated_templates_restart_always(client: Client, path: str) -> None:
    body = deployment(pod_spec(restartPolicy="Never"))
    if path == RCS:
        body["spec"]["selector"] = {"app": "a"}
    cause = only(await invalid(client, path, body))
    assert cause == {"reason": "FieldValueNotSupported", "field": "spec.template.spec.restartPolicy",
                     "message": 'Unsupported value: "Never": supported values: "Always"'}


async def test_job_templates_do_not_restart_always(client: Client) -> None:
    job = {"metadata": {"name": "j"}, "spec": {"template": {"spec": pod_spec()}}}  # defaulted to Always
    cause = only(await invalid(client, JOBS, job))
    assert cause == {"reason": "FieldValueNotSupported", "field": "spec.template.spec.restartPolicy",
                     "message": 'Unsupported value: "Always": supported values: "OnFailure", "Never"'}
    cron = {"metadata": {"name": "c"}, "spec": {"schedule": "@hourly", "jobTemplate": {
        "spec": {"template": {"spec": pod_spec(restartPolicy="Always")}}}}}
    cause = only(await invalid(client, CRONJOBS, cron))
    assert cause["field"] == "spec.jobTemplate.spec.template.spec.restartPolicy"


async def test_templates_are_validated_as_pod_specs(client: Client) -> None:
    spec = {"containers": [{"name": "a"}], "volumes": [{"name": "v"}, {"name": "v"}]}
    causes = await invalid(client, DEPLOYMENTS, deployment(spec))
    assert {(c["field"], c["message"]) for c in causes} == {
        ("spec.template.spec.containers[0].image", "Required value"),
        ("spec.template.spec.volumes[1].name", 'Duplicate value: "v"')}
    job = {"metadata": {"name": "j"}, "spec": {"template": {"spec": {"containers": [], "restartPolicy": "Never"}}}}
    cause = only(await invalid(client, JOBS, job))
    assert cause["field"] == "spec.template.spec.containers"


async def test_a_statefulset_template_may_mount_its_claim_templates(client: Client) -> None:
    # upstream leaves a StatefulSet's pod spec to its pods (ValidatePodTemplateSpecForStatefulSet):
    # a mount names a volumeClaimTemplate, not a volume
    spec = pod_spec()
    spec["containers"][0]["volumeMounts"] = [{"name": "data", "mountPath": "/data"}]
    sts = deployment(spec, volumeClaimTemplates=[{"metadata": {"name": "data"}, "spec": {
        "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}])
    await client.create(STATEFULSETS, sts)
    bad = deployment(pod_spec(restartPolicy="Never"))
    assert only(await invalid(client, STATEFULSETS, bad))["field"] == "spec.template.spec.restartPolicy"


async def test_a_workload_update_validates_its_template_but_not_a_status_write(client: Client) -> None:
    await client.create(DEPLOYMENTS, deployment(pod_spec()))
    with pytest.raises(ApiError) as e:
        await client.patch(f"{DEPLOYMENTS}/d", {"spec": {"replicas": -3}})
    assert e.value.code == 422 and "spec.replicas: Invalid value: -3" in e.value.message
    with pytest.raises(ApiError) as e:
        await client.patch(f"{DEPLOYMENTS}/d", {"spec": {"template": {"spec": {"dnsPolicy": "Weird"}}}})
    assert e.value.code == 422 and "spec.template.spec.dnsPolicy" in e.value.message
    status = await client.patch(f"{DEPLOYMENTS}/d/status", {"status": {"observedGeneration": 1}})
    assert status["status"]["observedGeneration"] == 1


# -- services ---------------------------------------------------------------------------------------
def service(spec: dict[str, Any], name: str = "s") -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": spec}


async def test_valid_services_are_accepted(client: Client) -> None:
    await client.create(SERVICES, service({"ports": [{"port": 80, "targetPort": "http"}], "selector": {"a": "b"}}))
    await client.create(SERVICES, service({"clusterIP": "None"}, name="headless"))
    await client.create(SERVICES, service({"type": "ExternalName", "externalName": "example.com"}, name="ext"))
    await client.create(SERVICES, service({"type": "NodePort", "ports": [
        {"name": "http", "port": 80}, {"name": "https", "port": 443}]}, name="np"))


async def test_a_service_needs_ports(client: Client) -> None:
    cause = only(await invalid(client, SERVICES, service({"selector": {"a": "b"}})))
    assert cause == {"reason": "FieldValueRequired", "field": "spec.ports", "message": "Required value"}


async def test_service_ports_and_type(client: Client) -> None:
    causes = await invalid(client, SERVICES, service({"ports": [{"port": 70000}]}))
    assert causes == [  # the target port defaults to the port, and is checked as upstream checks it
        {"reason": "FieldValueInvalid", "field": "spec.ports[0].port",
         "message": "Invalid value: 70000: must be between 1 and 65535, inclusive"},
        {"reason": "FieldValueInvalid", "field": "spec.ports[0].targetPort",
         "message": "Invalid value: 70000: must be between 1 and 65535, inclusive"}]
    cause = only(await invalid(client, SERVICES, service({"type": "Bogus", "ports": [{"port": 80}]})))
    assert cause == {"reason": "FieldValueNotSupported", "field": "spec.type",
                     "message": 'Unsupported value: "Bogus": supported values: "ClusterIP", "ExternalName", '
                                '"LoadBalancer", "NodePort"'}
    ports = [{"name": "web", "port": 80}, {"name": "web", "port": 81}]
    cause = only(await invalid(client, SERVICES, service({"ports": ports})))
    assert cause == {"reason": "FieldValueDuplicate", "field": "spec.ports[1].name",
                     "message": 'Duplicate value: "web"'}
    ports = [{"name": "web", "port": 80}, {"port": 81}]
    cause = only(await invalid(client, SERVICES, service({"ports": ports})))
    assert cause == {"reason": "FieldValueRequired", "field": "spec.ports[1].name", "message": "Required value"}


async def test_a_service_update_is_validated(client: Client) -> None:
    created = await client.create(SERVICES, service({"ports": [{"port": 80}]}))
    created["spec"]["ports"].append({"port": 81})
    with pytest.raises(ApiError) as e:
        await client.update(f"{SERVICES}/s", created)
    assert e.value.code == 422
    assert e.value.status["details"]["causes"] == [
        {"reason": "FieldValueRequired", "field": "spec.ports[0].name", "message": "Required value"},
        {"reason": "FieldValueRequired", "field": "spec.ports[1].name", "message": "Required value"}]


# -- over a real socket, as kubectl and client-go see it -----------------------------------------
@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    with running(start_serve(tmp_path_factory.mktemp("podvalidation"))) as s:
        yield s


def test_over_a_socket_with_the_official_client(served: Serve) -> None:
    from kubernetes import client as k8s
    from kubernetes import config

    api = config.new_client_from_config(config_file=str(served.kubeconfig))  # type: ignore[no-untyped-call]
    try:
        core = k8s.CoreV1Api(api)
        body: Any = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bad"},
                "spec": {"containers": [{"name": "a", "image": "x", "ports": [{"containerPort": 70000}]}]}}
        with pytest.raises(k8s.ApiException) as e:
            core.create_namespaced_pod("default", body)
        assert e.value.status == 422
        status = orjson.loads(e.value.body or b"{}")
        assert status["reason"] == "Invalid" and status["details"]["kind"] == "Pod"
        assert status["message"] == ('Pod "bad" is invalid: spec.containers[0].ports[0].containerPort: '
                                     "Invalid value: 70000: must be between 1 and 65535, inclusive")
        body["spec"]["containers"][0]["ports"][0]["containerPort"] = 8080
        created: Any = core.create_namespaced_pod("default", body)
        assert created.spec.containers[0].ports[0].container_port == 8080
    finally:
        api.close()


def test_over_a_socket_a_service_without_ports(served: Serve) -> None:
    admin = find_admin(read_token_file(served.tokens))
    assert admin is not None
    r = httpx.post(f"{served.url}/api/v1/namespaces/default/services",
                   headers={"authorization": f"Bearer {admin.token}"},
                   json={"metadata": {"name": "noports"}, "spec": {"selector": {"a": "b"}}})
    assert r.status_code == 422
    assert r.json()["details"]["causes"] == [{"reason": "FieldValueRequired", "field": "spec.ports",
                                              "message": "Required value"}]


def test_over_a_socket_a_daemon_set_surging_and_unavailable(served: Serve) -> None:
    admin = find_admin(read_token_file(served.tokens))
    assert admin is not None
    body = deployment(pod_spec(), updateStrategy=rolling(maxUnavailable="10%", maxSurge=2))
    r = httpx.post(f"{served.url}/apis/apps/v1/namespaces/default/daemonsets",
                   headers={"authorization": f"Bearer {admin.token}"}, json=body)
    assert r.status_code == 422
    assert r.json()["message"] == ('DaemonSet.apps "d" is invalid: spec.updateStrategy.rollingUpdate.maxSurge: '
                                   "Invalid value: 2: may not be set when maxUnavailable is non-zero")
