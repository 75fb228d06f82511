"""A pod's ``spec.os`` (KEP-2802), as upstream's ``validateOS``, ``validateWindows`` and
``validateLinux`` check it at the end of ``ValidatePodSpec``: the name linux or windows; a
Windows pod sets none of the Linux-only fields, in its security context nor in any
container's; a Linux pod sets no ``windowsOptions``. For a Pod, every workload template, the
``ephemeralcontainers`` subresource, and through kubectl and the official client over a socket.
A spec without ``os`` is checked as before."""

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
JOBS = resource_path("batch", "v1", "jobs", "default")
NOT_WINDOWS = "Forbidden: cannot be set for a windows pod"
NOT_LINUX = "Forbidden: windows options cannot be set for a linux pod"


def pod(spec: dict[str, Any], name: str = "p") -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": spec}


def forbidden(field: str, message: str = NOT_WINDOWS) -> dict[str, str]:
    return {"reason": "FieldValueForbidden", "field": field, "message": message}


async def causes_of(client: Client, path: str, body: dict[str, Any]) -> list[dict[str, str]]:
    with pytest.raises(ApiError) as e:
        await client.create(path, body)
    assert e.value.code == 422, e.value
    assert e.value.reason == "Invalid"
    found: list[dict[str, str]] = e.value.status["details"]["causes"]
    for c in found:
        assert f"{c['field']}: {c['message']}" in e.value.message
    return found


LINUX_CONTAINER = {"appArmorProfile": {"type": "RuntimeDefault"}, "seLinuxOptions": {"level": "s0"},
                   "seccompProfile": {"type": "RuntimeDefault"}, "capabilities": {"drop": ["ALL"]},
                   "readOnlyRootFilesystem": True, "privileged": False, "allowPrivilegeEscalation": False,
                   "procMount": "Default", "runAsUser": 1000, "runAsGroup": 1000,
                   "runAsNonRoot": True, "windowsOptions": {"runAsUserName": "ContainerUser"}}  # (these two allowed)
LINUX_POD = {"appArmorProfile": {"type": "RuntimeDefault"}, "seLinuxOptions": {"level": "s0"},
             "seccompProfile": {"type": "RuntimeDefault"}, "fsGroup": 2000, "fsGroupChangePolicy": "Always",
             "sysctls": [{"name": "kernel.shm_rmid_forced", "value": "0"}], "runAsUser": 1000, "runAsGroup": 1000,
             "supplementalGroups": [3000], "supplementalGroupsPolicy": "Merge", "seLinuxChangePolicy": "Recursive",
             "runAsNonRoot": True, "windowsOptions": {"runAsUserName": "ContainerUser"}}


async def test_the_reported_case_a_windows_pods_container_apparmor_profile(client: Client) -> None:
    body = pod({"os": {"name": "windows"}, "containers": [
        {"name": "c", "image": "x", "securityContext": {"appArmorProfile": {"type": "RuntimeDefault"}}}]})
    with pytest.raises(ApiError) as e:
        await client.create(PODS, body)
    assert e.value.code == 422
    assert e.value.message == ('Pod "p" is invalid: spec.containers[0].securityContext.appArmorProfile: '
                               "Forbidden: cannot be set for a windows pod")


async def test_a_windows_pod_sets_no_linux_field_in_upstreams_order(client: Client) -> None:
    spec = {"os": {"name": "windows"}, "hostUsers": True, "hostPID": True, "hostIPC": True,
            "shareProcessNamespace": False, "securityContext": LINUX_POD,
            "initContainers": [{"name": "init", "image": "x", "securityContext": {"runAsUser": 0}}],
            "containers": [{"name": "c", "image": "x", "securityContext": LINUX_CONTAINER},
                           {"name": "plain", "image": "x", "securityContext": {"runAsNonRoot": True}}]}
    pod_level = ["securityContext.appArmorProfile", "securityContext.seLinuxOptions", "hostUsers", "hostPID",
                 "hostIPC", "securityContext.seccompProfile", "securityContext.fsGroup",
                 "securityContext.fsGroupChangePolicy", "securityContext.sysctls", "shareProcessNamespace",
                 "securityContext.runAsUser", "securityContext.runAsGroup", "securityContext.supplementalGroups",
                 "securityContext.supplementalGroupsPolicy", "securityContext.seLinuxChangePolicy"]
    container = ["appArmorProfile", "seLinuxOptions", "seccompProfile", "capabilities", "readOnlyRootFilesystem",
                 "privileged", "allowPrivilegeEscalation", "procMount", "runAsUser", "runAsGroup"]
    found = await causes_of(client, PODS, pod(spec))
    # the checks of the fields themselves come first (the seccomp and AppArmor profiles are valid:
    # no cause), and an unmasked-less procMount and the hostPID beside shareProcessNamespace=false pass
    assert found == [forbidden(f"spec.{f}") for f in pod_level] + \
        [forbidden("spec.initContainers[0].securityContext.runAsUser")] + \
        [forbidden(f"spec.containers[0].securityContext.{f}") for f in container]


async def test_a_windows_pods_false_host_namespaces_and_empty_sysctls_are_no_setting(client: Client) -> None:
    # hostPID and hostIPC are plain booleans upstream, sysctls counted by length; hostNetwork is
    # allowed (HostProcess pods need it), so are runAsNonRoot and windowsOptions
    spec = {"os": {"name": "windows"}, "hostPID": False, "hostIPC": False, "hostNetwork": True,
            "securityContext": {"runAsNonRoot": True, "sysctls": [],
                                "windowsOptions": {"gmsaCredentialSpecName": "gmsa", "runAsUserName": "u"}},
            "containers": [{"name": "c", "image": "x", "securityContext": {
                "runAsNonRoot": True, "windowsOptions": {"runAsUserName": "NT AUTHORITY\\NETWORK SERVICE"}}}]}
    created = await client.create(PODS, pod(spec))
    assert created["spec"]["os"] == {"name": "windows"}
    assert created["spec"]["containers"][0]["securityContext"]["windowsOptions"]["runAsUserName"] == \
        "NT AUTHORITY\\NETWORK SERVICE"


async def test_a_windows_pods_empty_supplemental_groups_are_sent(client: Client) -> None:
    # Go decodes [] as an empty, non-nil slice: validateWindows forbids it as it forbids [1];
    # a Linux pod's (or a pod without an OS) is stored without it, as protobuf stores none
    windows: dict[str, Any] = {"os": {"name": "windows"}, "securityContext": {"supplementalGroups": []},
               "containers": [{"name": "c", "image": "x"}]}
    assert await causes_of(client, PODS, pod(windows)) == [forbidden("spec.securityContext.supplementalGroups")]
    statefulset: dict[str, Any] = {"metadata": {"name": "s"}, "spec": {
        "selector": {"matchLabels": {"a": "b"}},
        "template": {"metadata": {"labels": {"a": "b"}}, "spec": {**windows, "os": {"name": "linux"}}}}}
    deployment = {**statefulset, "metadata": {"name": "d"}}
    assert await causes_of(client, DEPLOYMENTS, {**deployment, "spec": {**deployment["spec"], "template": {
        "metadata": {"labels": {"a": "b"}}, "spec": windows}}}) == [
        forbidden("spec.template.spec.securityContext.supplementalGroups")]
    for os_ in ({"name": "linux"}, None):
        spec = {**windows, "os": os_, "securityContext": {"supplementalGroups": [], "runAsNonRoot": True}}
        created = await client.create(PODS, pod(spec, name=f"p-{str(bool(os_)).lower()}"))
        assert created["spec"]["securityContext"] == {"runAsNonRoot": True}
        got = await client.get(f"{PODS}/p-{str(bool(os_)).lower()}")
        assert got["spec"]["securityContext"] == {"runAsNonRoot": True}
        got["spec"]["securityContext"]["supplementalGroups"] = []  # an update's too (not a change)
        updated = await client.update(f"{PODS}/p-{str(bool(os_)).lower()}", got)
        assert updated["spec"]["securityContext"] == {"runAsNonRoot": True}
    for path in (DEPLOYMENTS, resource_path("apps", "v1", "statefulsets", "default")):
        created = await client.create(path, deployment if path == DEPLOYMENTS else statefulset)
        assert created["spec"]["template"]["spec"]["securityContext"] == {}
        assert (await client.get(f"{path}/{created['metadata']['name']}"))["spec"]["template"]["spec"][
            "securityContext"] == {}


async def test_a_linux_pod_sets_no_windows_options(client: Client) -> None:
    spec = {"os": {"name": "linux"}, "securityContext": {**LINUX_POD, "windowsOptions": {}},
            "initContainers": [{"name": "i", "image": "x",
                                "securityContext": {"windowsOptions": {"hostProcess": False}}}],
            "containers": [{"name": "c", "image": "x", "securityContext": LINUX_CONTAINER}]}
    assert await causes_of(client, PODS, pod(spec)) == [
        forbidden("spec.securityContext.windowsOptions", NOT_LINUX),
        forbidden("spec.initContainers[0].securityContext.windowsOptions", NOT_LINUX),
        forbidden("spec.containers[0].securityContext.windowsOptions", NOT_LINUX)]
    # without windowsOptions every Linux field is a Linux pod's to set
    linux_pod = {k: v for k, v in LINUX_POD.items() if k != "windowsOptions"}
    linux_container = {k: v for k, v in LINUX_CONTAINER.items() if k != "windowsOptions"}
    ok = {"os": {"name": "linux"}, "hostPID": True, "securityContext": linux_pod,
          "containers": [{"name": "c", "image": "x", "securityContext": linux_container}]}
    assert (await client.create(PODS, pod(ok, name="linux")))["spec"]["os"] == {"name": "linux"}


async def test_the_name_linux_or_windows(client: Client) -> None:
    # an unknown name is reported at the PodOS (upstream's NotSupported on its path), a missing
    # or empty one at its name; the OS's own checks are skipped then
    plan9 = {"os": {"name": "plan9"}, "securityContext": {"windowsOptions": {}, "runAsUser": 1},
             "containers": [{"name": "c", "image": "x"}]}
    assert await causes_of(client, PODS, pod(plan9)) == [
        {"reason": "FieldValueNotSupported", "field": "spec.os",
         "message": 'Unsupported value: "plan9": supported values: "linux", "windows"'}]
    assert await causes_of(client, PODS, pod({"os": {"name": "Windows"}, "containers": [
        {"name": "c", "image": "x"}]})) == [
        {"reason": "FieldValueNotSupported", "field": "spec.os",
         "message": 'Unsupported value: "Windows": supported values: "linux", "windows"'}]
    for os_ in ({}, {"name": ""}, {"name": None}):
        assert await causes_of(client, PODS, pod({"os": os_, "containers": [{"name": "c", "image": "x"}]})) == [
            {"reason": "FieldValueRequired", "field": "spec.os.name", "message": "Required value: cannot be empty"}]
    # and after the spec's other checks, as ValidatePodSpec's last
    found = await causes_of(client, PODS, pod({"os": {"name": "x"}, "restartPolicy": "Sometimes",
                                               "containers": [{"name": "c", "image": "x"}]}))
    assert [c["field"] for c in found] == ["spec.restartPolicy", "spec.os"]


async def test_an_update_may_not_change_the_os(client: Client) -> None:
    created = await client.create(PODS, pod({"os": {"name": "linux"}, "containers": [
        {"name": "c", "image": "x", "securityContext": {"runAsUser": 1}}]}))
    created["spec"]["os"] = {"name": "windows"}
    with pytest.raises(ApiError) as e:
        await client.update(f"{PODS}/p", created)
    assert e.value.code == 422
    causes = e.value.status["details"]["causes"]
    # the new spec is validated as a Windows pod's, then found to change more than it may
    assert causes[0] == forbidden("spec.containers[0].securityContext.runAsUser")
    assert causes[1]["field"] == "spec" and causes[1]["message"].startswith(
        "Forbidden: pod updates may not change fields other than `spec.containers[*].image`")
    assert len(causes) == 2
    del created["spec"]["os"]
    with pytest.raises(ApiError) as e:
        await client.update(f"{PODS}/p", created)
    assert [c["field"] for c in e.value.status["details"]["causes"]] == ["spec"]
    # an image may still change
    created["spec"]["os"] = {"name": "linux"}
    created["spec"]["containers"][0]["image"] = "y"
    assert (await client.update(f"{PODS}/p", created))["spec"]["containers"][0]["image"] == "y"


async def test_an_ephemeral_container_of_a_windows_pod(client: Client) -> None:
    await client.create(PODS, pod({"os": {"name": "windows"}, "containers": [{"name": "c", "image": "x"}]}))
    debug = {"name": "debug", "image": "busybox", "securityContext": {"capabilities": {"add": ["NET_ADMIN"]}}}
    with pytest.raises(ApiError) as e:
        await client.patch(f"{PODS}/p/ephemeralcontainers", {"spec": {"ephemeralContainers": [debug]}},
                           patch_type="strategic")
    assert e.value.code == 422
    assert e.value.status["details"]["causes"] == [
        forbidden("spec.ephemeralContainers[0].securityContext.capabilities")]
    debug["securityContext"] = {"windowsOptions": {"runAsUserName": "ContainerAdministrator"}}
    got = await client.patch(f"{PODS}/p/ephemeralcontainers", {"spec": {"ephemeralContainers": [debug]}},
                             patch_type="strategic")
    assert [c["name"] for c in got["spec"]["ephemeralContainers"]] == ["debug"]


async def test_workload_templates_at_their_paths(client: Client) -> None:
    container: dict[str, Any] = {"name": "c", "image": "x", "securityContext": {"privileged": True}}
    spec: dict[str, Any] = {"os": {"name": "windows"}, "securityContext": {"fsGroup": 1}, "containers": [container]}
    deployment = {"metadata": {"name": "d"}, "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {
        "metadata": {"labels": {"a": "b"}}, "spec": spec}}}
    expected = ["securityContext.fsGroup", "containers[0].securityContext.privileged"]
    assert await causes_of(client, DEPLOYMENTS, deployment) == [
        forbidden(f"spec.template.spec.{f}") for f in expected]
    job = {"metadata": {"name": "j"}, "spec": {"template": {"spec": {**spec, "restartPolicy": "Never"}}}}
    assert await causes_of(client, JOBS, job) == [forbidden(f"spec.template.spec.{f}") for f in expected]
    # a template's OS may change with the template
    del spec["securityContext"], container["securityContext"]
    created = await client.create(DEPLOYMENTS, deployment)
    created["spec"]["template"]["spec"]["os"] = {"name": "linux"}
    updated = await client.update(f"{DEPLOYMENTS}/d", created)
    assert updated["spec"]["template"]["spec"]["os"] == {"name": "linux"}


# -- windowsOptions and HostProcess pods (any pod's: not only one with spec.os windows) --------------
async def test_windows_options_are_checked(client: Client) -> None:
    subdomain = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
                 "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
                 r"validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
    users = ["a\\b\\c", "x\x01", ".bad\\...", "dom.ain\\us:er", "d\\", "d" * 256 + "\\u", "u" * 105]
    spec = {"securityContext": {"windowsOptions": {"gmsaCredentialSpecName": "Bad_Name", "gmsaCredentialSpec": "",
                                                   "runAsUserName": ""}},
            "containers": [{"name": f"c{i}", "image": "x", "securityContext": {"windowsOptions": {"runAsUserName": u}}}
                           for i, u in enumerate(users)]}
    def bad(i: int, value: str, message: str) -> dict[str, str]:
        return {"reason": "FieldValueInvalid", "field": f"spec.containers[{i}].securityContext.windowsOptions."
                "runAsUserName", "message": f"Invalid value: {value}: {message}"}
    assert await causes_of(client, PODS, pod(spec)) == [
        bad(0, '"a\\\\b\\\\c"', "runAsUserName cannot contain more than one backslash"),
        bad(1, '"x\\x01"', "runAsUserName cannot contain control characters"),
        bad(2, '".bad\\\\..."', "runAsUserName's Domain doesn't match the NetBios nor the DNS format"),
        bad(2, '".bad\\\\..."', "runAsUserName's User cannot contain only periods or spaces"),
        bad(3, '"dom.ain\\\\us:er"',
            'runAsUserName\'s User cannot contain the following characters: "/\\:;|=,+*?<>@[]'),
        bad(4, '"d\\\\"', "runAsUserName's User cannot be empty"),
        bad(5, '"' + "d" * 256 + '\\\\u"', "runAsUserName's Domain length must be under 256 characters"),
        bad(5, '"' + "d" * 256 + '\\\\u"', "runAsUserName's Domain doesn't match the NetBios nor the DNS format"),
        bad(6, '"' + "u" * 105 + '"', "runAsUserName's User length must not be longer than 104 characters"),
        {"reason": "FieldValueInvalid", "field": "spec.securityContext.windowsOptions.gmsaCredentialSpecName",
         "message": f'Invalid value: "Bad_Name": {subdomain}'},
        {"reason": "FieldValueInvalid", "field": "spec.securityContext.windowsOptions.gmsaCredentialSpec",
         "message": 'Invalid value: "": gmsaCredentialSpec cannot be an empty string'},
        {"reason": "FieldValueInvalid", "field": "spec.securityContext.windowsOptions.runAsUserName",
         "message": 'Invalid value: "": runAsUserName cannot be an empty string'}]
    good = ["ContainerUser", "NT AUTHORITY\\SYSTEM", "corp.example.com\\svc-web", "CORP\\web"]
    ok = {"os": {"name": "windows"}, "securityContext": {"windowsOptions": {
        "gmsaCredentialSpecName": "gmsa-webapp", "gmsaCredentialSpec": "{}"}},
        "containers": [{"name": f"c{i}", "image": "x", "securityContext": {"windowsOptions": {"runAsUserName": u}}}
                       for i, u in enumerate(good)]}
    await client.create(PODS, pod(ok, name="users"))


async def test_a_host_process_pod_has_only_host_process_containers_and_the_hosts_network(client: Client) -> None:
    def host_process(value: bool) -> dict[str, Any]:
        return {"windowsOptions": {"hostProcess": value}}
    spec = {"os": {"name": "windows"}, "securityContext": host_process(True),
            "initContainers": [{"name": "i", "image": "x", "securityContext": host_process(False)}],
            "containers": [{"name": "c", "image": "x"}]}
    assert await causes_of(client, PODS, pod(spec)) == [
        {"reason": "FieldValueInvalid", "field": "spec.initContainers[0].securityContext.windowsOptions.hostProcess",
         "message": "Invalid value: false: pod hostProcess value must be identical if both are specified, was true"},
        {"reason": "FieldValueInvalid", "field": "spec", "message": 'Invalid value: "": If pod contains any '
         "hostProcess containers then all containers must be HostProcess containers"},
        {"reason": "FieldValueInvalid", "field": "spec.hostNetwork",
         "message": "Invalid value: false: hostNetwork must be true if pod contains any hostProcess containers"}]
    # inherited from the pod, or set on every container, with the host's network: valid
    ok = {"os": {"name": "windows"}, "hostNetwork": True, "securityContext": host_process(True),
          "initContainers": [{"name": "i", "image": "x", "securityContext": host_process(True)}],
          "containers": [{"name": "c", "image": "x"}]}
    assert (await client.create(PODS, pod(ok, name="hpc")))["spec"]["hostNetwork"] is True


# -- over a real socket, as the official client and kubectl see it -----------------------------------
@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    with running(start_serve(tmp_path_factory.mktemp("podos"))) as s:
        yield s


def test_the_official_client_gets_the_422(served: Serve) -> None:
    from kubernetes import client as k8s
    from kubernetes import config

    api = config.new_client_from_config(config_file=str(served.kubeconfig))  # type: ignore[no-untyped-call]
    try:
        core = k8s.CoreV1Api(api)
        body: Any = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "win"},
                     "spec": {"os": {"name": "windows"}, "containers": [
                         {"name": "c", "image": "x",
                          "securityContext": {"appArmorProfile": {"type": "RuntimeDefault"}}}]}}
        with pytest.raises(k8s.ApiException) as e:
            core.create_namespaced_pod("default", body)
        assert e.value.status == 422
        status = orjson.loads(e.value.body or b"{}")
        assert status["reason"] == "Invalid" and status["details"]["kind"] == "Pod"
        assert status["message"] == ('Pod "win" is invalid: spec.containers[0].securityContext.appArmorProfile: '
                                     "Forbidden: cannot be set for a windows pod")
        body["spec"]["containers"][0]["securityContext"] = {"windowsOptions": {"runAsUserName": "ContainerUser"}}
        created: Any = core.create_namespaced_pod("default", body)
        assert created.spec.os.name == "windows"
    finally:
        api.close()


def test_kubectl_prints_the_422(served: Serve) -> None:
    assert KUBECTL
    manifest = """
apiVersion: v1
kind: Pod
metadata: {name: beos}
spec:
  os: {name: beos}
  containers: [{name: c, image: x}]
"""
    env = dict(os.environ, KUBECONFIG=str(served.kubeconfig), HOME=str(served.state))
    r = subprocess.run([KUBECTL, "apply", "-f", "-"], input=manifest, capture_output=True, text=True, env=env,
                       timeout=60)
    assert r.returncode == 1
    assert ('The Pod "beos" is invalid: spec.os: Unsupported value: "beos": supported values: "linux", "windows"'
            in r.stderr)
