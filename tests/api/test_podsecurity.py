"""PodSecurity admission (api/podsecurity.py): the checks against upstream's test cases
(``staging/src/k8s.io/pod-security-admission/policy/check_*_test.go``), the labels, and the
plugin's answers: in process, then over a real socket as kubectl prints them."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from controlplane import cli
from controlplane.api import podsecurity as ps
from controlplane.api.app import create_app
from controlplane.client import ApiError, Client, resource_path
from controlplane.config import Config
from tests.e2e.test_kubectl import KUBECTL
from tests.test_cli import Serve, running, start_serve

NAMESPACES = resource_path("", "v1", "namespaces")
ENFORCE, WARN = ps.LABEL_PREFIX + "enforce", ps.LABEL_PREFIX + "warn"


def check(check_id: str, minor: int) -> ps.CheckFn:
    [c] = [c for c in ps.CHECKS if c.id == check_id]
    fn = ps._version_of(c, minor)
    assert fn is not None
    return fn


def run(check_id: str, spec: dict[str, Any], meta: dict[str, Any] | None = None, minor: int = 37) -> ps.Result:
    return check(check_id, minor)(meta or {}, spec)


def sc(**fields: Any) -> dict[str, Any]:
    return {"securityContext": fields}


# -- the checks, with upstream's cases ---------------------------------------------------------
def test_run_as_non_root() -> None:
    assert run("runAsNonRoot", {"containers": [{"name": "a"}]}) == (
        "runAsNonRoot != true", 'pod or container "a" must set securityContext.runAsNonRoot=true')
    assert run("runAsNonRoot", {**sc(runAsNonRoot=False), "containers": [{"name": "a"}]}) == (
        "runAsNonRoot != true", "pod must not set securityContext.runAsNonRoot=false")
    assert run("runAsNonRoot", {**sc(runAsNonRoot=True), "containers": [
        {"name": "a"}, {"name": "b", **sc()}, {"name": "c", **sc(runAsNonRoot=False)},
        {"name": "d", **sc(runAsNonRoot=False)}, {"name": "e", **sc(runAsNonRoot=True)}]}) == (
        "runAsNonRoot != true", 'containers "c", "d" must not set securityContext.runAsNonRoot=false')
    assert run("runAsNonRoot", {"containers": [{"name": "a"}, {"name": "b", **sc()},
                                               {"name": "d", **sc(runAsNonRoot=True)}]}) == (
        "runAsNonRoot != true", 'pod or containers "a", "b" must set securityContext.runAsNonRoot=true')
    # a user namespace relaxes it from policy 1.35 on, not before (KEP-127)
    userns = {"hostUsers": False, "containers": [{"name": "a"}]}
    assert run("runAsNonRoot", userns) is None
    assert run("runAsNonRoot", userns, minor=34) is not None


def test_host_ports() -> None:
    assert run("hostPorts", {"containers": [{"name": "a", "ports": [{"hostPort": 0}]},
                                            {"name": "b", "ports": [{"hostPort": 0}, {"hostPort": 20}]}]}) == (
        "hostPort", 'container "b" uses hostPort 20')
    assert run("hostPorts", {"containers": [
        {"name": "a", "ports": [{"hostPort": 0}]},
        {"name": "b", "ports": [{"hostPort": 0}, {"hostPort": 10}, {"hostPort": 20}]},
        {"name": "c", "ports": [{"hostPort": 0}, {"hostPort": 10}, {"hostPort": 30}]}]}) == (
        "hostPort", 'containers "b", "c" use hostPorts 10, 20, 30')


def test_selinux_options() -> None:
    containers = [{"name": n, **sc(seLinuxOptions={"type": t})} for n, t in (
        ("a", "container_t"), ("b", "container_init_t"), ("c", "container_kvm_t"), ("d", "container_engine_t"))]
    bad = [{"name": "e", **sc(seLinuxOptions={"type": "bar"})}, {"name": "f", **sc(seLinuxOptions={"user": "bar"})},
           {"name": "g", **sc(seLinuxOptions={"role": "baz"})}]
    pod_bad = sc(seLinuxOptions={"type": "foo", "user": "bar", "role": "baz"})
    assert run("seLinuxOptions", {**pod_bad, "containers": containers + bad}) == (
        "seLinuxOptions", 'pod and containers "e", "f", "g" set forbidden securityContext.seLinuxOptions: '
        'types "bar", "foo"; user may not be set; role may not be set')
    assert run("seLinuxOptions", {**pod_bad, "containers": containers}) == (
        "seLinuxOptions", 'pod set forbidden securityContext.seLinuxOptions: type "foo"; user may not be set; '
        "role may not be set")
    assert run("seLinuxOptions", sc(seLinuxOptions={"user": "bad"})) == (
        "seLinuxOptions", "pod set forbidden securityContext.seLinuxOptions: user may not be set")
    # container_engine_t is allowed from policy 1.31
    engine = {"containers": [containers[3]]}
    assert run("seLinuxOptions", engine) is None
    assert run("seLinuxOptions", engine, minor=30) == (
        "seLinuxOptions", 'container "d" set forbidden securityContext.seLinuxOptions: type "container_engine_t"')


def test_app_armor() -> None:
    assert run("appArmorProfile", sc(appArmorProfile={"type": "Unconfined"})) == (
        "forbidden AppArmor profile", 'pod must not set AppArmor profile type to "Unconfined"')
    assert run("appArmorProfile", {**sc(appArmorProfile={"type": "RuntimeDefault"}), "containers": [
        {"name": "foo", **sc(appArmorProfile={"type": "Unconfined"})}]}) == (
        "forbidden AppArmor profile", 'container "foo" must not set AppArmor profile type to "Unconfined"')
    annotated = {"annotations": {"container.apparmor.security.beta.kubernetes.io/a": "unconfined",
                                 "container.apparmor.security.beta.kubernetes.io/b": "localhost/x"}}
    assert run("appArmorProfile", {"containers": [{"name": "a"}]}, annotated) == (
        "forbidden AppArmor profile", 'annotation must not set AppArmor profile type to '
        '"container.apparmor.security.beta.kubernetes.io/a=\\"unconfined\\""')


def test_capabilities() -> None:
    spec = {"containers": [{"name": "a"}, {"name": "b", **sc(capabilities={"drop": ["ALL"], "add": ["NET_RAW"]})},
                           {"name": "c", **sc(capabilities={"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]})}]}
    assert run("capabilities_baseline", spec) == (
        "non-default capabilities", 'container "b" must not include "NET_RAW" in securityContext.capabilities.add')
    assert run("capabilities_restricted", spec) == (
        "unrestricted capabilities", 'container "a" must set securityContext.capabilities.drop=["ALL"]; '
        'container "b" must not include "NET_RAW" in securityContext.capabilities.add')
    windows = {**spec, "os": {"name": "windows"}}  # exempt from policy 1.25 on
    assert run("capabilities_restricted", windows) is None
    assert run("capabilities_restricted", windows, minor=24) is not None


def test_seccomp() -> None:
    assert run("seccompProfile_restricted", {"containers": [{"name": "a"}, {"name": "b"}]}) == (
        "seccompProfile", 'pod or containers "a", "b" must set securityContext.seccompProfile.type to '
        '"RuntimeDefault" or "Localhost"')
    assert run("seccompProfile_restricted", {**sc(seccompProfile={"type": "Unconfined"}), "containers": [
        {"name": "a", **sc(seccompProfile={"type": "RuntimeDefault"})}]}) == (
        "seccompProfile", 'pod must not set securityContext.seccompProfile.type to "Unconfined"')
    assert run("seccompProfile_baseline", {"containers": [{"name": "a"}]}) is None  # undefined is baseline
    # below policy 1.19 only the annotations counted
    meta = {"annotations": {"seccomp.security.alpha.kubernetes.io/pod": "unconfined"}}
    assert run("seccompProfile_baseline", {"containers": [{"name": "a"}]}, meta, minor=18) == (
        "seccompProfile", 'forbidden annotation seccomp.security.alpha.kubernetes.io/pod="unconfined"')
    assert run("seccompProfile_baseline", {"containers": [{"name": "a"}]}, meta) is None


def test_volumes_sysctls_probes_and_the_rest() -> None:
    assert run("restrictedVolumes", {"volumes": [{"name": "ok", "emptyDir": {}}, {"name": "img", "image": {}},
                                                 {"name": "h", "hostPath": {"path": "/"}},
                                                 {"name": "n", "nfs": {"server": "s", "path": "/"}}]}) == (
        "restricted volume types", 'volumes "h", "n" use restricted volume types "hostPath", "nfs"')
    assert run("hostPathVolumes", {"volumes": [{"name": "h", "hostPath": {"path": "/"}}]}) == (
        "hostPath volumes", 'volume "h"')
    assert run("hostNamespaces", {"hostPID": True, "hostNetwork": True}) == ("host namespaces", "hostNetwork, hostPID")
    assert run("sysctls", sc(sysctls=[{"name": "net.ipv4.tcp_rmem"}, {"name": "kernel.msgmax"}])) == (
        "forbidden sysctls", "kernel.msgmax")
    assert run("sysctls", sc(sysctls=[{"name": "net.ipv4.tcp_rmem"}]), minor=31) == (
        "forbidden sysctls", "net.ipv4.tcp_rmem")
    assert run("hostProbesAndHostLifecycle", {"containers": [
        {"name": "a", "livenessProbe": {"httpGet": {"host": "evil", "port": 80}},
         "lifecycle": {"preStop": {"tcpSocket": {"host": "other", "port": 1}}}}]}) == (
        "probe or lifecycle host", 'container "a" uses probe or lifecycle hosts "evil", "other"')
    assert run("procMount", {"containers": [{"name": "a", **sc(procMount="Unmasked")}]}) == (
        "procMount", 'container "a" must not set securityContext.procMount to "Unmasked"')
    assert run("windowsHostProcess", {**sc(windowsOptions={"hostProcess": True}), "containers": [
        {"name": "a", **sc(windowsOptions={"hostProcess": True})}]}) == (
        "hostProcess", 'pod and container "a" must not set securityContext.windowsOptions.hostProcess=true')
    assert run("allowPrivilegeEscalation", {"containers": [{"name": "a", **sc(allowPrivilegeEscalation=False)},
                                                           {"name": "b"}]}) == (
        "allowPrivilegeEscalation != false", 'container "b" must set securityContext.allowPrivilegeEscalation=false')


def test_levels_versions_and_the_order_of_reasons() -> None:
    restricted = ps.LevelVersion("restricted", None)
    privileged_pod = {"containers": [{"name": "c", **sc(privileged=True)}]}
    assert [r for r, _ in ps.evaluate(restricted, {}, privileged_pod)] == [
        "privileged", "allowPrivilegeEscalation != false", "unrestricted capabilities", "runAsNonRoot != true",
        "seccompProfile"]
    assert ps.evaluate(ps.LevelVersion("privileged", None), {}, privileged_pod) == []
    # restricted at v1.21: no capabilities_restricted yet, and it overrides nothing then
    userns = {"hostUsers": False, "containers": [{"name": "c", **sc(procMount="Unmasked")}]}
    assert "procMount" not in [r for r, _ in ps.evaluate(ps.LevelVersion("baseline", None), {}, userns)]
    assert "procMount" in [r for r, _ in ps.evaluate(restricted, {}, userns)]  # procMount_restricted
    assert ps.LevelVersion("baseline", 24).__str__() == "baseline:v1.24"
    future = ps.LevelVersion("baseline", 99)  # newer than any check: the newest checks
    assert ps.evaluate(future, {}, privileged_pod) == ps.evaluate(ps.LevelVersion("baseline", None), {}, privileged_pod)


def test_labels() -> None:
    policy, causes = ps.policy_of({ENFORCE: "restricted", ENFORCE + "-version": "v1.24", WARN: "baseline"})
    assert (str(policy.enforce), str(policy.warn), str(policy.audit), causes) == \
        ("restricted:v1.24", "baseline:latest", "privileged:latest", [])
    policy, causes = ps.policy_of({ENFORCE: "bogus", WARN: "bogus", WARN + "-version": "v1.02"})
    assert (policy.enforce.level, policy.warn.level) == ("restricted", "privileged")  # enforce fails closed
    assert causes == [
        {"reason": "FieldValueInvalid", "field": f"metadata.labels[{ENFORCE}]",
         "message": 'Invalid value: "bogus": must be one of privileged, baseline, restricted'},
        {"reason": "FieldValueInvalid", "field": f"metadata.labels[{WARN}]",
         "message": 'Invalid value: "bogus": must be one of privileged, baseline, restricted'},
        {"reason": "FieldValueInvalid", "field": f"metadata.labels[{WARN}-version]",
         "message": 'Invalid value: "v1.02": must be "latest" or "v1.x"'}]
    assert ps.policy_of(None) == (ps.DEFAULT_POLICY, [])


def test_namespace_warnings_group_pods_by_their_reasons() -> None:
    def pod(name: str, privileged: bool) -> dict[str, Any]:
        return {"metadata": {"name": name}, "spec": {"containers": [{"name": "c", **sc(privileged=privileged)}],
                                                     "hostPID": not privileged}}

    pods = [pod("b", True), pod("a", True), pod("c", True), pod("z", False)]
    assert ps.namespace_warnings("ns", ps.LevelVersion("baseline", None), pods) == [
        'existing pods in namespace "ns" violate the new PodSecurity enforce level "baseline:latest"',
        "a (and 2 other pods): privileged", "z: host namespaces"]
    assert ps.namespace_warnings("ns", ps.LevelVersion("baseline", None), pods[:1], total=3001)[0] == \
        "new PodSecurity enforce level only checked against the first 1 of 3001 existing pods"


def test_namespace_pods_are_checked_one_per_controller_first() -> None:
    """upstream's ``prioritizePods``: a pod of each controller (and every pod without one) before
    the controllers' other pods; an exempt runtime class's pods neither checked nor counted."""
    def pod(name: str, owner: str | None = None, runtime_class: str | None = None) -> dict[str, Any]:
        meta: dict[str, Any] = {"name": name}
        if owner:
            meta["ownerReferences"] = [{"uid": owner, "controller": True, "kind": "ReplicaSet", "name": owner}]
        spec: dict[str, Any] = {"containers": [{"name": "c"}], "hostPID": True}
        if runtime_class:
            spec["runtimeClassName"] = runtime_class
        return {"metadata": meta, "spec": spec}

    pods = [pod("a1", "a"), pod("a2", "a"), pod("b1", "b"), pod("lone"), pod("a3", "a"), pod("gv", None, "gvisor")]
    ordered = ps.prioritize_pods(pods, frozenset({"gvisor"}))
    assert [p["metadata"]["name"] for p in ordered] == ["a1", "b1", "lone", "a2", "a3"]
    assert ps.namespace_warnings("ns", ps.LevelVersion("baseline", None), pods,
                                 exempt_runtime_classes=frozenset({"gvisor"})) == [
        'existing pods in namespace "ns" violate the new PodSecurity enforce level "baseline:latest"',
        "a1 (and 4 other pods): host namespaces"]


# -- the plugin, in process ----------------------------------------------------------------------
def pod(name: str, **container: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "image": "nginx", **container}]}}


RESTRICTED_OK = {"securityContext": {"allowPrivilegeEscalation": False, "runAsNonRoot": True,
                                     "capabilities": {"drop": ["ALL"]},
                                     "seccompProfile": {"type": "RuntimeDefault"}}}


async def namespace(client: Client, name: str, labels: dict[str, str]) -> None:
    await client.create(NAMESPACES, {"metadata": {"name": name, "labels": labels}})


async def post(client: Client, path: str, body: dict[str, Any]) -> httpx.Response:
    app = client._app
    assert app is not None  # the in-process client (tests/api/conftest.py)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api") as http:
        return await http.post(path, json=body)


async def test_enforce_refuses_pods_with_upstreams_status(client: Client) -> None:
    await namespace(client, "locked", {ENFORCE: "restricted"})
    pods = resource_path("", "v1", "pods", "locked")
    with pytest.raises(ApiError) as e:
        await client.create(pods, pod("priv", securityContext={"privileged": True}))
    assert (e.value.code, e.value.reason) == (403, "Forbidden")
    assert e.value.message.startswith('pods "priv" is forbidden: violates PodSecurity "restricted:latest": '
                                      'privileged (container "c" must not set securityContext.privileged=true), '
                                      "allowPrivilegeEscalation != false")
    assert e.value.status["details"] == {"name": "priv", "kind": "pods"}
    await client.create(pods, pod("fine", **RESTRICTED_OK))
    # an update that changes an image is checked again; one that only relabels is not
    await client.patch(f"{pods}/fine", {"metadata": {"labels": {"a": "b"}}})
    # the ephemeralcontainers subresource is checked
    with pytest.raises(ApiError) as e:
        await client.patch(f"{pods}/fine/ephemeralcontainers", {"spec": {"ephemeralContainers": [
            {"name": "dbg", "image": "busybox"}]}}, "strategic")
    assert e.value.code == 403 and 'violates PodSecurity "restricted:latest"' in e.value.message
    # workloads are never refused, only warned
    deployments = resource_path("apps", "v1", "deployments", "locked")
    await client.create(deployments, {"metadata": {"name": "d"}, "spec": {
        "selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"}},
                                                              "spec": pod("x", securityContext={"privileged": True})[
                                                                  "spec"]}}})


async def test_pinned_versions(client: Client) -> None:
    # capabilities_restricted begins at policy v1.22: a restricted namespace pinned to v1.21 lets a pod
    # keep its capabilities; latest does not
    spec = {"securityContext": {"allowPrivilegeEscalation": False, "runAsNonRoot": True,
                                "seccompProfile": {"type": "RuntimeDefault"}}}
    await namespace(client, "old", {ENFORCE: "restricted", ENFORCE + "-version": "v1.21"})
    await namespace(client, "new", {ENFORCE: "restricted", ENFORCE + "-version": "latest"})
    await client.create(resource_path("", "v1", "pods", "old"), pod("p", **spec))
    with pytest.raises(ApiError) as e:
        await client.create(resource_path("", "v1", "pods", "new"), pod("p", **spec))
    assert e.value.message == ('pods "p" is forbidden: violates PodSecurity "restricted:latest": unrestricted '
                               'capabilities (container "c" must set securityContext.capabilities.drop=["ALL"])')


async def test_warn_on_pods_and_workload_templates(client: Client) -> None:
    await namespace(client, "warned", {WARN: "baseline"})
    answer = await post(client, resource_path("", "v1", "pods", "warned"),
                        pod("p", securityContext={"privileged": True}))
    assert answer.status_code == 201
    assert answer.headers.get_list("warning") == [
        '299 - "would violate PodSecurity \\"baseline:latest\\": privileged (container \\"c\\" must not set '
        'securityContext.privileged=true)"']
    cron = {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "cj"}, "spec": {
        "schedule": "* * * * *", "jobTemplate": {"spec": {"template": {"spec": {
            "restartPolicy": "Never", "hostNetwork": True, "containers": [{"name": "c", "image": "x"}]}}}}}}
    answer = await post(client, resource_path("batch", "v1", "cronjobs", "warned"), cron)
    assert answer.status_code == 201
    assert answer.headers.get_list("warning") == [
        '299 - "would violate PodSecurity \\"baseline:latest\\": host namespaces (hostNetwork)"']
    # a namespace without labels: the defaults, privileged, no warning
    answer = await post(client, resource_path("", "v1", "pods", "default"),
                        pod("p", securityContext={"privileged": True}))
    assert answer.status_code == 201 and not answer.headers.get_list("warning")


async def test_namespace_labels_are_validated(client: Client) -> None:
    with pytest.raises(ApiError) as e:
        await namespace(client, "bad", {ENFORCE: "strict"})
    assert (e.value.code, e.value.message) == (422, f'Namespace "bad" is invalid: metadata.labels[{ENFORCE}]: '
                                                    'Invalid value: "strict": must be one of privileged, baseline, '
                                                    "restricted")
    await namespace(client, "good", {})
    with pytest.raises(ApiError) as e:
        await client.patch(f"{NAMESPACES}/good", {"metadata": {"labels": {ENFORCE + "-version": "1.24"}}})
    assert e.value.code == 422 and 'must be "latest" or "v1.x"' in e.value.message


async def test_a_tightened_namespace_warns_of_its_pods(client: Client) -> None:
    await namespace(client, "team", {})
    pods = resource_path("", "v1", "pods", "team")
    for name in ("b", "a", "c"):
        await client.create(pods, pod(name, securityContext={"privileged": True}))
    await client.create(pods, pod("ok"))
    app = client._app
    assert app is not None
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api") as http:
        answer = await http.patch(f"{NAMESPACES}/team", content=orjson.dumps(
            {"metadata": {"labels": {ENFORCE: "baseline"}}}),
            headers={"content-type": "application/merge-patch+json"})
        assert answer.status_code == 200
        assert answer.headers.get_list("warning") == [
            '299 - "existing pods in namespace \\"team\\" violate the new PodSecurity enforce level '
            '\\"baseline:latest\\""', '299 - "a (and 2 other pods): privileged"']
        # relaxing it (same version) checks nothing
        answer = await http.patch(f"{NAMESPACES}/team", content=orjson.dumps(
            {"metadata": {"labels": {ENFORCE: "privileged"}}}),
            headers={"content-type": "application/merge-patch+json"})
        assert answer.status_code == 200 and not answer.headers.get_list("warning")


# -- an AdmissionConfiguration file ------------------------------------------------------------------
ADMISSION_CONFIGURATION = """
apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: EventRateLimit
  path: eventconfig.yaml
- name: PodSecurity
  configuration:
    apiVersion: pod-security.admission.config.k8s.io/v1
    kind: PodSecurityConfiguration
    defaults: {enforce: baseline, enforce-version: v1.30, warn: restricted}
    exemptions: {namespaces: [kube-system], runtimeClasses: [sandboxed], usernames: []}
"""


def test_load_configuration(tmp_path: Path) -> None:
    path = tmp_path / "admission.yaml"
    path.write_text(ADMISSION_CONFIGURATION)
    config = ps.load_configuration(path)
    assert (str(config.defaults.enforce), str(config.defaults.audit), str(config.defaults.warn)) == \
        ("baseline:v1.30", "privileged:latest", "restricted:latest")
    assert (config.namespaces, config.runtime_classes, config.usernames, config.labels_decide) == \
        (frozenset({"kube-system"}), frozenset({"sandboxed"}), frozenset(), False)
    # the plugin's configuration in a file of its own, named relative to this one
    (tmp_path / "psa.yaml").write_text("apiVersion: pod-security.admission.config.k8s.io/v1\n"
                                       "kind: PodSecurityConfiguration\ndefaults: {audit: restricted}\n")
    path.write_text("apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\n"
                    "plugins: [{name: PodSecurity, path: psa.yaml}]\n")
    assert str(ps.load_configuration(path).defaults.audit) == "restricted:latest"
    path.write_text(ADMISSION_CONFIGURATION.replace("enforce: baseline", "enforce: strict"))
    with pytest.raises(ValueError, match=re.escape(
            'defaults.enforce: Invalid value: "strict": must be one of privileged, baseline, restricted')):
        ps.load_configuration(path)
    with pytest.raises(SystemExit):  # the serve command refuses to start with it
        cli.main(["serve", "--admission-control-config-file", str(path)])


@pytest.fixture
async def configured(tmp_path: Path) -> AsyncIterator[Client]:
    path = tmp_path / "admission.yaml"
    path.write_text(ADMISSION_CONFIGURATION)
    app = create_app(Config(data_dir=tmp_path / "data", tls=False, scheduler=False,
                            admission_control_config_file=path))
    async with app.router.lifespan_context(app), Client.in_process(app.state.front) as c:
        yield c


async def test_configured_defaults_and_exemptions(configured: Client) -> None:
    from controlplane.metrics import POD_SECURITY_EXEMPTIONS

    c = configured
    exemptions_before = dict(POD_SECURITY_EXEMPTIONS.values)
    privileged = pod("priv", securityContext={"privileged": True})
    with pytest.raises(ApiError) as e:  # an unlabelled namespace takes the defaults
        await c.create(resource_path("", "v1", "pods", "default"), privileged)
    assert e.value.message.startswith('pods "priv" is forbidden: violates PodSecurity "baseline:v1.30": privileged')
    await c.create(resource_path("", "v1", "pods", "kube-system"), privileged)  # an exempt namespace
    classes = resource_path("node.k8s.io", "v1", "runtimeclasses")
    await c.create(classes, {"metadata": {"name": "sandboxed"}, "handler": "runsc"})
    while not (await c.list(classes, resourceVersion="0"))["items"]:  # RuntimeClass admission reads the cache
        await asyncio.sleep(0.01)
    await c.create(resource_path("", "v1", "pods", "default"), {  # an exempt runtime class
        **privileged, "spec": {**privileged["spec"], "runtimeClassName": "sandboxed"}})
    await namespace(c, "open", {ENFORCE: "privileged", WARN: "privileged"})  # labels override the defaults
    await c.create(resource_path("", "v1", "pods", "open"), privileged)
    # each exemption counted, as upstream's pod_security_exemptions_total (a namespace, a runtime class)
    assert POD_SECURITY_EXEMPTIONS.values[("create", "pod", "")] - exemptions_before.get(("create", "pod", ""), 0) == 2


# -- over a real socket, as kubectl prints it -------------------------------------------------------
@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    with running(start_serve(tmp_path_factory.mktemp("podsecurity"))) as s:
        yield s


def kubectl(served: Serve, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    assert KUBECTL
    env = dict(os.environ, KUBECONFIG=str(served.kubeconfig), HOME=str(served.state))
    return subprocess.run([KUBECTL, *args], input=stdin, capture_output=True, text=True, env=env, timeout=60)


PRIVILEGED_POD = """
apiVersion: v1
kind: Pod
metadata: {name: priv}
spec:
  containers:
  - {name: c, image: nginx, securityContext: {privileged: true}}
"""

DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      hostNetwork: true
      containers:
      - {name: web, image: nginx}
"""


def test_kubectl_prints_refusals_and_warnings(served: Serve) -> None:
    r = kubectl(served, "create", "namespace", "locked")
    assert r.returncode == 0, r.stderr
    # exemption-free defaults: an unlabelled namespace takes anything
    r = kubectl(served, "apply", "-n", "locked", "-f", "-", stdin=PRIVILEGED_POD.replace("priv}", "before}"))
    assert r.returncode == 0 and not r.stderr, r.stderr
    r = kubectl(served, "label", "namespace", "locked", f"{ENFORCE}=restricted")
    assert r.returncode == 0, r.stderr
    assert r.stderr.splitlines() == [
        'Warning: existing pods in namespace "locked" violate the new PodSecurity enforce level "restricted:latest"',
        "Warning: before: privileged, allowPrivilegeEscalation != false, unrestricted capabilities, "
        "runAsNonRoot != true, seccompProfile"]
    r = kubectl(served, "apply", "-n", "locked", "-f", "-", stdin=PRIVILEGED_POD)
    assert r.returncode == 1
    assert r.stderr.strip() == (
        'Error from server (Forbidden): error when creating "STDIN": pods "priv" is forbidden: violates '
        'PodSecurity "restricted:latest": privileged (container "c" must not set securityContext.privileged=true), '
        'allowPrivilegeEscalation != false (container "c" must set securityContext.allowPrivilegeEscalation=false), '
        'unrestricted capabilities (container "c" must set securityContext.capabilities.drop=["ALL"]), '
        'runAsNonRoot != true (pod or container "c" must set securityContext.runAsNonRoot=true), seccompProfile '
        '(pod or container "c" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")')
    r = kubectl(served, "label", "namespace", "default", f"{WARN}=baseline")
    assert r.returncode == 0, r.stderr
    r = kubectl(served, "apply", "-f", "-", stdin=DEPLOYMENT)
    assert r.returncode == 0, r.stderr
    assert r.stderr.strip() == 'Warning: would violate PodSecurity "baseline:latest": host namespaces (hostNetwork)'
    assert "deployment.apps/web created" in r.stdout
    r = kubectl(served, "label", "namespace", "default", f"{ENFORCE}=nonsense")
    assert r.returncode == 1
    assert (f'The Namespace "default" is invalid: metadata.labels[{ENFORCE}]: Invalid value: "nonsense": must be '
            "one of privileged, baseline, restricted") in r.stderr


def test_the_official_client_gets_the_403(served: Serve) -> None:
    from kubernetes import client as k8s
    from kubernetes import config

    api = config.new_client_from_config(config_file=str(served.kubeconfig))  # type: ignore[no-untyped-call]
    try:
        core = k8s.CoreV1Api(api)
        ns: Any = {"metadata": {"name": "pinned", "labels": {ENFORCE: "baseline", ENFORCE + "-version": "v1.33"}}}
        core.create_namespace(ns)
        probe = {"name": "c", "image": "x", "livenessProbe": {"httpGet": {"host": "1.2.3.4", "port": 80}}}
        body: Any = {"metadata": {"name": "probe"}, "spec": {"containers": [probe]}}
        core.create_namespaced_pod("pinned", body)  # the probe host check begins at policy v1.34
        core.patch_namespace("pinned", {"metadata": {"labels": {ENFORCE + "-version": "v1.34"}}})
        body["metadata"]["name"] = "probe2"
        with pytest.raises(k8s.ApiException) as e:
            core.create_namespaced_pod("pinned", body)
        assert e.value.status == 403
        status = orjson.loads(e.value.body or b"{}")
        assert (status["reason"], status["message"]) == ("Forbidden", (
            'pods "probe2" is forbidden: violates PodSecurity "baseline:v1.34": probe or lifecycle host '
            '(container "c" uses probe or lifecycle host "1.2.3.4")'))
    finally:
        api.close()


def pod_security_metrics(served: Serve) -> dict[str, float]:
    r = kubectl(served, "get", "--raw", "/metrics")
    assert r.returncode == 0, r.stderr
    return {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in r.stdout.splitlines()
            if line.startswith("pod_security_")}


def evaluation(decision: str, level: str, version: str, mode: str, resource: str = "pod",
               operation: str = "create") -> str:
    return (f'pod_security_evaluations_total{{decision="{decision}",mode="{mode}",policy_level="{level}",'
            f'policy_version="{version}",request_operation="{operation}",resource="{resource}",subresource=""}}')


def test_the_plugins_metrics(served: Serve) -> None:
    """upstream's pod_security_evaluations_total and pod_security_errors_total, counted where its
    plugin counts them: every pod of a fully privileged namespace is an allowed evaluation; an
    enforce level's allow or deny, an audit or warn level's deny (none beside a refusal); a
    pinned version past the server's is ``future``; a workload's template warned."""
    before = pod_security_metrics(served)
    assert kubectl(served, "create", "namespace", "psa-open").returncode == 0
    r = kubectl(served, "apply", "-n", "psa-open", "-f", "-", stdin=PRIVILEGED_POD)
    assert r.returncode == 0, r.stderr
    labels = {ENFORCE: "baseline", ENFORCE + "-version": "v1.30", ps.LABEL_PREFIX + "audit": "restricted",
              WARN: "restricted"}
    r = kubectl(served, "create", "-f", "-", stdin=orjson.dumps(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "psa-pinned", "labels": labels}}).decode())
    assert r.returncode == 0, r.stderr
    r = kubectl(served, "apply", "-n", "psa-pinned", "-f", "-", stdin=PRIVILEGED_POD)
    assert r.returncode == 1 and "Forbidden" in r.stderr  # enforce deny, audit deny, no warning
    r = kubectl(served, "apply", "-n", "psa-pinned", "-f", "-", stdin=PRIVILEGED_POD.replace(
        "{privileged: true}", "{privileged: false}").replace("priv}", "plain}"))
    assert r.returncode == 0 and "would violate" in r.stderr  # enforce allow, audit and warn deny
    r = kubectl(served, "apply", "-n", "psa-pinned", "-f", "-", stdin=DEPLOYMENT)
    assert r.returncode == 0, r.stderr  # a template: audit and warn deny, no enforce
    r = kubectl(served, "create", "-f", "-", stdin=orjson.dumps({"apiVersion": "v1", "kind": "Namespace", "metadata": {
        "name": "psa-future", "labels": {ENFORCE: "baseline", ENFORCE + "-version": "v1.99",
                                         WARN: "nonsense"}}}).decode())
    assert r.returncode == 1  # invalid labels refused on create ...
    r = kubectl(served, "create", "-f", "-", stdin=orjson.dumps({"apiVersion": "v1", "kind": "Namespace", "metadata": {
        "name": "psa-future", "labels": {ENFORCE: "baseline", ENFORCE + "-version": "v1.99"}}}).decode())
    assert r.returncode == 0, r.stderr
    r = kubectl(served, "apply", "-n", "psa-future", "-f", "-", stdin=PRIVILEGED_POD)
    assert r.returncode == 1 and 'violates PodSecurity "baseline:v1.99"' in r.stderr
    after = pod_security_metrics(served)
    delta = {k: v - before.get(k, 0.0) for k, v in after.items() if v != before.get(k, 0.0)}
    assert delta == {
        evaluation("allow", "privileged", "latest", "enforce"): 1,
        evaluation("deny", "baseline", "v1.30", "enforce"): 1,
        evaluation("allow", "baseline", "v1.30", "enforce"): 1,
        evaluation("deny", "restricted", "latest", "audit"): 2,
        evaluation("deny", "restricted", "latest", "warn"): 1,
        evaluation("deny", "restricted", "latest", "audit", "controller"): 1,
        evaluation("deny", "restricted", "latest", "warn", "controller"): 1,
        evaluation("deny", "baseline", "future", "enforce"): 1,
    }, delta
    assert "# TYPE pod_security_evaluations_total counter" in kubectl(served, "get", "--raw", "/metrics").stdout
