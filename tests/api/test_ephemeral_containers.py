"""pods/ephemeralcontainers (registry/ephemeral.py): the only way to add containers to a
pod, add-only, validated as upstream."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.client import ApiError, Client

PODS = "/api/v1/namespaces/default/pods"


@pytest.fixture
async def pod(client: Client) -> Client:
    await client.create(PODS, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"a": "1"}},
                               "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}]}})
    return client


def debugger(name: str = "dbg", **extra: Any) -> dict[str, Any]:
    return {"name": name, "image": "busybox:1.36", **extra}


async def add(c: Client, *containers: dict[str, Any]) -> dict[str, Any]:
    return await c.patch(f"{PODS}/p/ephemeralcontainers", {"spec": {"ephemeralContainers": list(containers)}},
                         "strategic")


async def test_ephemeral_containers_are_added_through_the_subresource(pod: Client) -> None:
    c = pod
    got = await add(c, debugger(targetContainerName="app"))
    assert got["kind"] == "Pod"
    [e] = got["spec"]["ephemeralContainers"]
    assert (e["name"], e["targetContainerName"], e["terminationMessagePolicy"], e["imagePullPolicy"]) == \
        ("dbg", "app", "File", "IfNotPresent")  # defaulted as a container is
    assert (await c.get(f"{PODS}/p/ephemeralcontainers"))["spec"]["ephemeralContainers"] == [e]
    # a strategic patch adds by name (without $setElementOrder the patch's items come first, as upstream);
    # a PUT of the subresource changes nothing but the ephemeral containers
    got = await add(c, debugger("dbg2"))
    assert [x["name"] for x in got["spec"]["ephemeralContainers"]] == ["dbg2", "dbg"]
    got["metadata"]["labels"] = {"a": "changed"}
    got["spec"]["containers"][0]["image"] = "other"
    got["spec"]["ephemeralContainers"].append(debugger("dbg3"))
    put = await c.update(f"{PODS}/p/ephemeralcontainers", got)
    assert [x["name"] for x in put["spec"]["ephemeralContainers"]] == ["dbg2", "dbg", "dbg3"]
    assert put["metadata"]["labels"] == {"a": "1"} and put["spec"]["containers"][0]["image"] == "nginx:1.27"


@pytest.mark.parametrize(("container", "field", "message"), [
    (debugger("app"), "spec.ephemeralContainers[0].name", 'Duplicate value: "app"'),
    ({"name": "x"}, "spec.ephemeralContainers[0].image", "Required value"),
    (debugger(ports=[{"containerPort": 80}]), "spec.ephemeralContainers[0].ports",
     "Forbidden: cannot be set for an Ephemeral Container"),
    (debugger(resources={"requests": {"cpu": "1"}}), "spec.ephemeralContainers[0].resources",
     "Forbidden: cannot be set for an Ephemeral Container"),
    (debugger(readinessProbe={"exec": {"command": ["true"]}}), "spec.ephemeralContainers[0].readinessProbe",
     "Forbidden: cannot be set for an Ephemeral Container"),
    (debugger(targetContainerName="nope"), "spec.ephemeralContainers[0].targetContainerName", 'Not found: "nope"'),
])
async def test_invalid_ephemeral_containers_are_422(pod: Client, container: dict[str, Any], field: str,
                                                     message: str) -> None:
    with pytest.raises(ApiError) as e:
        await add(pod, container)
    assert (e.value.code, e.value.reason) == (422, "Invalid")
    cause = e.value.status["details"]["causes"][0]
    assert (cause["field"], cause["message"]) == (field, message)
    assert message in e.value.message


async def test_existing_ephemeral_containers_may_not_change_or_go(pod: Client) -> None:
    c = pod
    got = await add(c, debugger())
    changed = {**got, "spec": {**got["spec"], "ephemeralContainers": [
        {**got["spec"]["ephemeralContainers"][0], "image": "other"}]}}
    with pytest.raises(ApiError) as e:
        await c.update(f"{PODS}/p/ephemeralcontainers", changed)
    assert e.value.code == 422 and 'existing ephemeral containers "dbg" may not be changed' in e.value.message
    removed = {**got, "spec": {**got["spec"], "ephemeralContainers": []}}
    with pytest.raises(ApiError) as e:
        await c.update(f"{PODS}/p/ephemeralcontainers", removed)
    assert e.value.code == 422 and 'existing ephemeral containers "dbg" may not be removed' in e.value.message
    assert len((await c.get(f"{PODS}/p"))["spec"]["ephemeralContainers"]) == 1


async def test_other_verbs_and_unknown_subresources(pod: Client) -> None:
    c = pod
    with pytest.raises(ApiError) as e:
        await c.delete(f"{PODS}/p/ephemeralcontainers")
    assert e.value.code == 405
    with pytest.raises(ApiError) as e:
        await c.get(f"{PODS}/p/nope")
    # an empty details object, as upstream's: kubectl debug reads it (and crashed on a 404 without one)
    assert (e.value.code, e.value.status.get("details")) == (404, {})
    with pytest.raises(ApiError) as e:
        await c.get(f"{PODS}/missing/ephemeralcontainers")
    assert e.value.code == 404


async def test_an_ephemeral_containers_security_context_is_checked_as_a_containers(pod: Client) -> None:
    # ValidatePodEphemeralContainersUpdate validates the whole new spec: validateContainerCommon's
    # ValidateSecurityContext for each ephemeral container, at its path
    bad = debugger(securityContext={"runAsUser": -1, "procMount": "Unmasked",
                                    "seccompProfile": {"type": "Localhost"},
                                    "appArmorProfile": {"type": "Bogus"},
                                    "windowsOptions": {"runAsUserName": "a\\b\\c"}})
    with pytest.raises(ApiError) as e:
        await add(pod, bad)
    assert e.value.code == 422 and e.value.reason == "Invalid"
    at = "spec.ephemeralContainers[0].securityContext"
    assert [(c["reason"], c["field"]) for c in e.value.status["details"]["causes"]] == [
        ("FieldValueInvalid", f"{at}.runAsUser"), ("FieldValueInvalid", f"{at}.procMount"),
        ("FieldValueRequired", f"{at}.seccompProfile.localhostProfile"),
        ("FieldValueInvalid", f"{at}.windowsOptions.runAsUserName"),
        ("FieldValueNotSupported", f"{at}.appArmorProfile.type")]
    assert "spec.ephemeralContainers[0].securityContext.runAsUser: Invalid value: -1: must be between 0 and " \
        "2147483647, inclusive" in e.value.message
    # its name and mounts as a container's
    with pytest.raises(ApiError) as e:
        await add(pod, debugger(name="Not_A_Label", volumeMounts=[{"name": "gone", "mountPath": "/x"}]))
    assert [c["field"] for c in e.value.status["details"]["causes"]] == [
        "spec.ephemeralContainers[0].name", "spec.ephemeralContainers[0].volumeMounts[0].name"]
    # a good one is added
    got = await add(pod, debugger(securityContext={"runAsUser": 1000, "seccompProfile": {"type": "RuntimeDefault"}}))
    assert got["spec"]["ephemeralContainers"][0]["securityContext"]["runAsUser"] == 1000


async def test_an_ephemeral_container_of_a_host_process_pod(client: Client) -> None:
    # validateWindowsHostProcessPod visits the ephemeral containers too
    await client.create(PODS, {"metadata": {"name": "p"}, "spec": {
        "os": {"name": "windows"}, "hostNetwork": True,
        "securityContext": {"windowsOptions": {"hostProcess": True, "runAsUserName": "NT AUTHORITY\\SYSTEM"}},
        "containers": [{"name": "app", "image": "x"}]}})
    with pytest.raises(ApiError) as e:
        await add(client, debugger(securityContext={"windowsOptions": {"hostProcess": False}}))
    assert e.value.code == 422
    assert e.value.status["details"]["causes"] == [
        {"reason": "FieldValueInvalid",
         "field": "spec.ephemeralContainers[0].securityContext.windowsOptions.hostProcess",
         "message": "Invalid value: false: pod hostProcess value must be identical if both are specified, was true"},
        {"reason": "FieldValueInvalid", "field": "spec",
         "message": 'Invalid value: "": If pod contains any hostProcess containers then all containers must be '
                    "HostProcess containers"}]
    got = await add(client, debugger(securityContext={"windowsOptions": {"hostProcess": True}}))
    assert [c["name"] for c in got["spec"]["ephemeralContainers"]] == ["dbg"]


async def test_a_mirror_pod_takes_no_ephemeral_container(client: Client) -> None:
    # ValidatePodEphemeralContainersUpdate: a static pod's mirror refuses the subresource's writes
    # (kubectl debug of kube-apiserver's pod: `The Pod "..." is invalid: []: Forbidden: ...`)
    await client.create(PODS, {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": "p", "annotations": {"kubernetes.io/config.mirror": "x"}},
        "spec": {"nodeName": "n1", "containers": [{"name": "app", "image": "nginx:1.27"}]}})
    with pytest.raises(ApiError) as e:
        await add(client, debugger())
    assert (e.value.code, e.value.reason) == (422, "Invalid")
    assert e.value.message == 'Pod "p" is invalid: []: Forbidden: static pods do not support ephemeral containers'
    assert [(c["field"], c["reason"]) for c in e.value.status["details"]["causes"]] == [("[]", "FieldValueForbidden")]
    assert "ephemeralContainers" not in (await client.get(f"{PODS}/p"))["spec"]
