"""A container's own restart policy and restart rules (ContainerRestartRules, KEP-5307, beta
and on since 1.35; RestartAllContainersOnContainerExits, KEP-5532, beta and on in 1.36):
accepted on containers, init containers and sidecars, and refused in the words and at the
paths of upstream's ``validateContainerRestartPolicy``, for a Pod and a workload's template.
kubectl's side is tests/e2e/test_container_restart_rules.py."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.client import ApiError, Client, resource_path
from tests.api.test_pod_spec_validation import cause, causes_of

PODS = resource_path("", "v1", "pods", "default")
DEPLOYMENTS = resource_path("apps", "v1", "deployments", "default")
JOBS = resource_path("batch", "v1", "jobs", "default")

RESTART_ON_42 = [{"action": "Restart", "exitCodes": {"operator": "In", "values": [42]}}]
RESTART_ALL_ON_88 = [{"action": "RestartAllContainers", "exitCodes": {"operator": "In", "values": [88]}}]
POLICIES = '"Always", "Never", "OnFailure"'
ACTIONS = '"Restart", "RestartAllContainers"'


def container(name: str = "app", **fields: Any) -> dict[str, Any]:
    return {"name": name, "image": "busybox", **fields}


def pod(name: str, *containers: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"containers": list(containers), **spec}}


async def test_containers_init_containers_and_sidecars_keep_their_own_restart_rules(client: Client) -> None:
    """The documentation's restart-on-exit-codes pod, and an LWS-like one: a sidecar agent
    (restartPolicy Always) that restarts every container when it exits 88, a plain init
    container with its own policy, a worker that asks for a restart of all on its failures."""
    worker = container("worker", restartPolicy="Never", restartPolicyRules=[
        {"action": "RestartAllContainers", "exitCodes": {"operator": "NotIn", "values": [0]}},
        {"action": "Restart", "exitCodes": {"operator": "In"}}])
    marker = container("marker", restartPolicy="OnFailure")
    agent = container("agent", restartPolicy="Always", restartPolicyRules=RESTART_ALL_ON_88,
                      readinessProbe={"httpGet": {"path": "/ready", "port": 8080}})
    lws = pod("lws-0", worker, initContainers=[marker, agent])
    made = await client.create(PODS, lws)
    assert [c.get("restartPolicyRules") for c in made["spec"]["initContainers"]] == [None, RESTART_ALL_ON_88]
    assert made["spec"]["containers"][0]["restartPolicyRules"] == worker["restartPolicyRules"]
    assert made["spec"]["restartPolicy"] == "Always"  # the pod's own still defaulted
    docs = pod("restart-on-exit-codes", container("restart-on-exit-codes", restartPolicy="Never",
                                                  restartPolicyRules=RESTART_ON_42), restartPolicy="Never")
    made = await client.create(PODS, docs)
    assert made["spec"]["containers"][0]["restartPolicyRules"] == RESTART_ON_42
    assert (await client.get(f"{PODS}/restart-on-exit-codes"))["spec"]["containers"][0]["restartPolicy"] == "Never"
    # a regular container may now say Always too, in a pod that says Never
    await client.create(PODS, pod("keeps", container(restartPolicy="Always"), restartPolicy="Never"))


async def test_restart_rules_are_refused_in_upstreams_words(client: Client) -> None:
    too_many_codes = {"action": "Restart", "exitCodes": {"operator": "In", "values": list(range(256))}}
    body = pod("bad",
               container("nopolicy", restartPolicyRules=RESTART_ON_42),
               container("rules", restartPolicy="Sometimes", restartPolicyRules=[
                   {"action": "Restart"}, {"exitCodes": {"values": [1]}},
                   {"action": "Stop", "exitCodes": {"operator": "Equals"}}, too_many_codes]),
               container("toomany", restartPolicy="Never", restartPolicyRules=RESTART_ON_42 * 21),
               container("empty", restartPolicy=""))
    at = "spec.containers"
    assert await causes_of(client, PODS, body) == [
        cause("FieldValueRequired", f"{at}[0].restartPolicy",
              "Required value: must specify restartPolicy when restart rules are used"),
        cause("FieldValueNotSupported", f"{at}[1].restartPolicy",
              f'Unsupported value: "Sometimes": supported values: {POLICIES}'),
        cause("FieldValueRequired", f"{at}[1].restartPolicyRules[0].exitCodes", "Required value: must be specified"),
        cause("FieldValueNotSupported", f"{at}[1].restartPolicyRules[1].action",
              f'Unsupported value: "": supported values: {ACTIONS}'),
        cause("FieldValueNotSupported", f"{at}[1].restartPolicyRules[1].exitCodes.operator",
              'Unsupported value: "": supported values: "In", "NotIn"'),
        cause("FieldValueNotSupported", f"{at}[1].restartPolicyRules[2].action",
              f'Unsupported value: "Stop": supported values: {ACTIONS}'),
        cause("FieldValueNotSupported", f"{at}[1].restartPolicyRules[2].exitCodes.operator",
              'Unsupported value: "Equals": supported values: "In", "NotIn"'),
        cause("FieldValueTooMany", f"{at}[1].restartPolicyRules[3].exitCodes.values",
              "Too many: 256: must have at most 255 items"),
        cause("FieldValueTooMany", f"{at}[2].restartPolicyRules", "Too many: 21: must have at most 20 items"),
        cause("FieldValueNotSupported", f"{at}[3].restartPolicy",
              f'Unsupported value: "": supported values: {POLICIES}'),
    ]


async def test_init_containers_say_it_before_their_name_is_checked(client: Client) -> None:
    """validateInitContainers checks the restart policy before the name's uniqueness; an init
    container's policy may be any of the three now (1.34: only Always)."""
    body = pod("init", container(), initContainers=[
        container("app", restartPolicyRules=RESTART_ON_42),
        container("sidecar", restartPolicy="Always", restartPolicyRules=[{"action": "Stop", "exitCodes": {
            "operator": "In", "values": [1]}}]),
        container("odd", restartPolicy="Sometimes")])
    at = "spec.initContainers"
    assert await causes_of(client, PODS, body) == [
        cause("FieldValueRequired", f"{at}[0].restartPolicy",
              "Required value: must specify restartPolicy when restart rules are used"),
        cause("FieldValueDuplicate", f"{at}[0].name", 'Duplicate value: "app"'),
        cause("FieldValueNotSupported", f"{at}[1].restartPolicyRules[0].action",
              f'Unsupported value: "Stop": supported values: {ACTIONS}'),
        cause("FieldValueNotSupported", f"{at}[2].restartPolicy",
              f'Unsupported value: "Sometimes": supported values: {POLICIES}'),
    ]


async def test_workload_templates_take_them_at_their_paths(client: Client) -> None:
    """ValidatePodTemplateSpec validates a template's containers as a pod's: a Deployment,
    which needs its pods' restartPolicy Always, may still give a container Never; a Job's bad
    rule is refused at spec.template.spec."""
    template = {"metadata": {"labels": {"app": "a"}}, "spec": {"containers": [
        container(restartPolicy="Never", restartPolicyRules=RESTART_ALL_ON_88)]}}
    made = await client.create(DEPLOYMENTS, {"metadata": {"name": "d"}, "spec": {
        "selector": {"matchLabels": {"app": "a"}}, "template": template}})
    assert made["spec"]["template"]["spec"]["containers"][0]["restartPolicyRules"] == RESTART_ALL_ON_88
    job_template = {"spec": {"restartPolicy": "Never", "containers": [
        container(restartPolicy="OnFailure", restartPolicyRules=[{"action": "Restart"}])]}}
    assert await causes_of(client, JOBS, {"metadata": {"name": "j"}, "spec": {"template": job_template}}) == [
        cause("FieldValueRequired", "spec.template.spec.containers[0].restartPolicyRules[0].exitCodes",
              "Required value: must be specified")]


async def test_a_pods_restart_rules_do_not_change_after_its_create(client: Client) -> None:
    """Like every container field but the image (and resources, through resize)."""
    await client.create(PODS, pod("fixed", container(restartPolicy="Never", restartPolicyRules=RESTART_ON_42)))
    got = await client.get(f"{PODS}/fixed")
    got["spec"]["containers"][0]["restartPolicyRules"] = RESTART_ALL_ON_88
    with pytest.raises(ApiError) as e:
        await client.update(f"{PODS}/fixed", got)
    assert e.value.code == 422
    [only] = e.value.status["details"]["causes"]
    assert only["field"] == "spec" and only["message"].startswith("Forbidden: pod updates may not change fields")


async def test_an_ephemeral_container_may_not_have_them(client: Client) -> None:
    await client.create(PODS, pod("debugged", container()))
    got = await client.get(f"{PODS}/debugged")
    got["spec"]["ephemeralContainers"] = [{"name": "dbg", "image": "busybox", "restartPolicyRules": RESTART_ON_42}]
    with pytest.raises(ApiError) as e:
        await client.update(f"{PODS}/debugged/ephemeralcontainers", got)
    assert e.value.status["details"]["causes"] == [
        cause("FieldValueForbidden", "spec.ephemeralContainers[0].restartPolicyRules",
              "Forbidden: cannot be set for an Ephemeral Container")]
