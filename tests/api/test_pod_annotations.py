"""The annotations of a pod kube-apiserver reads (``registry/podannotations.py``), over a real
socket, as clients see them. Its deprecated AppArmor annotations beside its ``appArmorProfile``
fields, as 1.34+ (KEP-24 phase 2, kubernetes/kubernetes#131989): copied into the fields at a create
and warned of (the pod strategy's ``applyAppArmorVersionSkew``), checked against the fields and the
containers, fixed once the pod exists (``ValidatePodSpecificAnnotations``,
``ValidatePodSpecificAnnotationUpdates``, ``validateAppArmorAnnotationsAndFieldsMatchOnCreate``);
the mirror pod, seccomp and deletion cost annotations beside them."""

from __future__ import annotations

import asyncio
import os
import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.api.test_validation_gaps import causes_of
from tests.e2e.test_kubectl import KUBECTL
from tests.front_socket import front_on_socket
from tests.test_cli import Serve, running, start_serve

PODS = "/api/v1/namespaces/default/pods"
AA = "container.apparmor.security.beta.kubernetes.io/"
MERGE = {"Content-Type": "application/merge-patch+json"}


def warned(key: str) -> str:
    words = 'deprecated since v1.30; use the \\"appArmorProfile\\" field instead'
    return f'299 - "metadata.annotations[{AA}{key}]: {words}"'


@pytest.fixture
async def http(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    async with front_on_socket(tmp_path) as (port, _), \
            httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
        yield client


def pod(name: str, annotations: dict[str, str], **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "annotations": annotations},
            "spec": {"containers": [{"name": "a", "image": "x"}], **spec}}


def profiles(stored: dict[str, Any]) -> dict[str, Any]:
    spec = stored["spec"]
    return {c["name"]: (c.get("securityContext") or {}).get("appArmorProfile")
            for c in spec.get("initContainers", []) + spec["containers"]}


async def test_an_annotation_without_its_field_is_copied_into_it_at_create_and_warned_of(
        http: httpx.AsyncClient) -> None:
    body = pod("copied", {AA + "a": "localhost/k8s-nginx", AA + "b": "runtime/default", AA + "own": "unconfined",
                          "team": "web"},
               securityContext={"appArmorProfile": {"type": "RuntimeDefault"}},
               initContainers=[{"name": "i", "image": "x"}])
    body["spec"]["containers"] += [{"name": "b", "image": "x"}, {"name": "own", "image": "x", "securityContext": {
        "appArmorProfile": {"type": "Unconfined"}}}]
    r = await http.post(PODS, json=body)
    assert r.status_code == 201, r.text
    # a: copied; b: the pod's own profile already, left; own: its own field kept, the annotation
    # saying the same
    assert profiles(r.json()) == {"i": None, "a": {"type": "Localhost", "localhostProfile": "k8s-nginx"},
                                  "b": None, "own": {"type": "Unconfined"}}
    assert r.headers.get_list("warning") == [warned("a")]
    assert r.json()["metadata"]["annotations"] == body["metadata"]["annotations"]  # kept, never the reverse
    assert profiles((await http.get(f"{PODS}/copied")).json())["a"] == {"type": "Localhost",
                                                                        "localhostProfile": "k8s-nginx"}
    # an annotation that means no valid profile ("localhost/" names none) is warned of, nothing copied;
    # the containers are visited as upstream visits them, init containers first
    body = pod("nothing", {AA + "a": "unconfined", AA + "i": "localhost/"},
               initContainers=[{"name": "i", "image": "x"}])
    r = await http.post(PODS, json=body)
    assert r.status_code == 201 and profiles(r.json()) == {"i": None, "a": {"type": "Unconfined"}}, r.text
    assert r.headers.get_list("warning") == [warned("i"), warned("a")]
    # a field is no longer copied into an annotation (1.34+); a Windows pod's annotation is left alone
    r = await http.post(PODS, json=pod("fields", {}, securityContext={"appArmorProfile": {"type": "Unconfined"}}))
    assert r.status_code == 201 and r.json()["metadata"].get("annotations") is None, r.text
    r = await http.post(PODS, json=pod("windows", {AA + "a": "runtime/default"}, os={"name": "windows"}))
    assert r.status_code == 201 and profiles(r.json()) == {"a": None} and not r.headers.get_list("warning"), r.text


async def test_annotations_that_name_no_container_or_profile_or_disagree_are_422(http: httpx.AsyncClient) -> None:
    r = await http.post(PODS, json=pod("stray", {AA + "gone": "bogus"}))
    assert causes_of(r) == [f'metadata.annotations[{AA}gone]: Invalid value: "gone": container not found',
                            f'metadata.annotations[{AA}gone]: Invalid value: "bogus": '
                            'invalid AppArmor profile name: "bogus"']
    body = pod("disagree", {AA + "a": "unconfined", AA + "b": "localhost/y"})
    body["spec"]["containers"][0]["securityContext"] = {"appArmorProfile": {"type": "RuntimeDefault"}}
    body["spec"]["containers"].append({"name": "b", "image": "x", "securityContext": {
        "appArmorProfile": {"type": "Localhost", "localhostProfile": "x"}}})
    r = await http.post(PODS, json=body)
    assert causes_of(r) == [
        "spec.containers[0].securityContext.appArmorProfile.type: Forbidden: "
        "apparmor type in annotation and field must match",
        "spec.containers[1].securityContext.appArmorProfile.localhostProfile: Forbidden: "
        "apparmor profile in annotation and field must match"]
    assert r.json()["message"].startswith('Pod "disagree" is invalid: [spec.containers[0]')
    # a pod-level profile that disagrees is not refused: the annotation becomes the container's own
    r = await http.post(PODS, json=pod("pod-level", {AA + "a": "unconfined"},
                                       securityContext={"appArmorProfile": {"type": "RuntimeDefault"}}))
    assert r.status_code == 201 and profiles(r.json()) == {"a": {"type": "Unconfined"}}, r.text
    r = await http.post(PODS, json=pod("mirror", {"kubernetes.io/config.mirror": "abc"}))
    assert causes_of(r) == ['metadata.annotations[kubernetes.io/config.mirror]: Invalid value: "abc": '
                            "must set spec.nodeName if mirror pod annotation is set"]


async def test_apparmor_annotations_are_fixed_once_the_pod_exists(http: httpx.AsyncClient) -> None:
    r = await http.post(PODS, json=pod("fixed", {AA + "a": "runtime/default"}))
    assert r.status_code == 201, r.text
    url = f"{PODS}/fixed"
    changed = f"metadata.annotations[{AA}a]: Forbidden: may not remove or update AppArmor annotations"
    for change in ({AA + "a": "unconfined"}, {AA + "a": None}):
        r = await http.patch(url, json={"metadata": {"annotations": change}}, headers=MERGE)
        assert causes_of(r) == [changed]
    # an annotation added is refused, and checked as at a create (upstream checks it twice: the
    # message says each once)
    r = await http.patch(url, json={"metadata": {"annotations": {AA + "b": "unconfined"}}}, headers=MERGE)
    stray = f'metadata.annotations[{AA}b]: Invalid value: "b": container not found'
    assert causes_of(r) == [stray, f"metadata.annotations[{AA}b]: Forbidden: may not add AppArmor annotations", stray]
    assert r.json()["message"] == f'Pod "fixed" is invalid: [{stray}, metadata.annotations[{AA}b]: Forbidden: ' \
        "may not add AppArmor annotations]"
    r = await http.patch(url, json={"metadata": {"annotations": {"kubernetes.io/config.mirror": "x"}}}, headers=MERGE)
    assert causes_of(r)[:2] == ['metadata.annotations[kubernetes.io/config.mirror]: Invalid value: "x": '
                                "must set spec.nodeName if mirror pod annotation is set",
                                "metadata.annotations[kubernetes.io/config.mirror]: Forbidden: "
                                "may not add mirror pod annotation"]
    # other annotations change freely; the pod written back as read is taken, its copied field kept
    r = await http.patch(url, json={"metadata": {"annotations": {"team": "web"}}}, headers=MERGE)
    assert r.status_code == 200, r.text
    r = await http.put(url, json=r.json())
    assert r.status_code == 200 and profiles(r.json()) == {"a": {"type": "RuntimeDefault"}}, r.text
    assert not r.headers.get_list("warning")  # (upstream warns of a pod's annotations at its create only)


# -- the real clients ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    with running(start_serve(tmp_path_factory.mktemp("apparmor"))) as s:
        yield s


def test_kubectl_prints_the_warning_and_the_official_client_reads_the_field(served: Serve) -> None:
    from kubernetes import client as k8s
    from kubernetes import config

    assert KUBECTL
    manifest = f"""
apiVersion: v1
kind: Pod
metadata:
  name: legacy
  annotations: {{{AA}web: localhost/k8s-nginx}}
spec:
  containers: [{{name: web, image: nginx}}]
"""
    env = dict(os.environ, KUBECONFIG=str(served.kubeconfig), HOME=str(served.state))
    r = subprocess.run([KUBECTL, "apply", "-f", "-"], input=manifest, capture_output=True, text=True, env=env,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    assert (f"Warning: metadata.annotations[{AA}web]: deprecated since v1.30; "
            'use the "appArmorProfile" field instead') in r.stderr
    api = config.new_client_from_config(config_file=str(served.kubeconfig))  # type: ignore[no-untyped-call]
    try:
        core = k8s.CoreV1Api(api)
        got: Any = core.read_namespaced_pod("legacy", "default")
        profile = got.spec.containers[0].security_context.app_armor_profile
        assert (profile.type, profile.localhost_profile) == ("Localhost", "k8s-nginx")
        with pytest.raises(k8s.ApiException) as e:
            core.patch_namespaced_pod("legacy", "default", {"metadata": {"annotations": {AA + "web": "unconfined"}}})
        assert e.value.status == 422
        assert "may not remove or update AppArmor annotations" in (e.value.body or "")
    finally:
        api.close()


async def test_a_workload_templates_annotations_are_checked_at_its_paths(http: httpx.AsyncClient) -> None:
    # ValidatePodTemplateSpec runs the pod's checks, on every write of the template (upstream's
    # "OnCreate" check included: kubernetes/kubernetes#128306 shows a Deployment refused by it)
    deployments = "/apis/apps/v1/namespaces/default/deployments"
    template: dict[str, Any] = {
        "metadata": {"labels": {"app": "web"}, "annotations": {AA + "web": "unconfined", AA + "gone": "localhost/p"}},
        "spec": {"containers": [{"name": "web", "image": "nginx", "securityContext": {
            "appArmorProfile": {"type": "RuntimeDefault"}}}]}}
    body = {"metadata": {"name": "web"}, "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": template}}
    r = await http.post(deployments, json=body)
    assert causes_of(r) == [
        f'spec.template.annotations[{AA}gone]: Invalid value: "gone": container not found',
        "spec.template.spec.containers[0].securityContext.appArmorProfile.type: Forbidden: "
        "apparmor type in annotation and field must match"]
    del template["metadata"]["annotations"][AA + "gone"]
    template["spec"]["containers"][0]["securityContext"]["appArmorProfile"]["type"] = "Unconfined"
    r = await http.post(deployments, json=body)
    assert r.status_code == 201, r.text
    jobs = "/apis/batch/v1/namespaces/default/cronjobs"
    cron = {"metadata": {"name": "nightly"}, "spec": {"schedule": "0 0 * * *", "jobTemplate": {"spec": {"template": {
        "metadata": {"annotations": {AA + "stray": "runtime/default"}},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "job", "image": "busybox"}]}}}}}}
    r = await http.post(jobs, json=cron)
    assert causes_of(r) == [f'spec.jobTemplate.spec.template.annotations[{AA}stray]: Invalid value: "stray": '
                            "container not found"]


# -- the other annotations ValidatePodSpecificAnnotations reads ---------------------------------------
SECCOMP_POD = "seccomp.security.alpha.kubernetes.io/pod"
SECCOMP = "container.seccomp.security.alpha.kubernetes.io/"
COST = "controller.kubernetes.io/pod-deletion-cost"


async def test_seccomp_annotations_name_profiles_and_agree_with_the_fields(http: httpx.AsyncClient) -> None:
    body = pod("seccomp", {SECCOMP_POD: "localhost/../x", SECCOMP + "a": "docker/default", SECCOMP + "b": "bogus"},
               securityContext={"seccompProfile": {"type": "Unconfined"}})
    body["spec"]["containers"][0]["securityContext"] = {"seccompProfile": {"type": "Localhost",
                                                                           "localhostProfile": "/abs"}}
    r = await http.post(PODS, json=body)
    assert causes_of(r) == [  # (upstream's annotation paths: a child, not a key)
        f'metadata.annotations.{SECCOMP_POD}: Invalid value: "../x": must not contain \'..\'',
        f'metadata.annotations.{SECCOMP}b: Invalid value: "bogus": must be a valid seccomp profile',
        'spec.containers[0].securityContext.seccompProfile.localhostProfile: Invalid value: "/abs": '
        "must be a relative path",
        "spec.securityContext.seccompProfile.type: Forbidden: seccomp type in annotation and field must match",
        "spec.containers[0].securityContext.seccompProfile.type: Forbidden: seccomp type in annotation and field "
        "must match"]
    body = pod("agree", {SECCOMP_POD: "unconfined", SECCOMP + "a": "docker/default"},
               securityContext={"seccompProfile": {"type": "Unconfined"}})
    body["spec"]["containers"][0]["securityContext"] = {"seccompProfile": {"type": "RuntimeDefault"}}
    r = await http.post(PODS, json=body)
    assert r.status_code == 201, r.text


async def test_a_deletion_cost_is_a_32_bit_integer(http: httpx.AsyncClient) -> None:
    for value in ("+10", "007", "", "2147483648", "1e3", "-"):
        r = await http.post(PODS, json=pod("cost", {COST: value}))
        assert causes_of(r) == [f'metadata.annotations[{COST}]: Invalid value: "{value}": must be a 32bit integer']
    for value in ("0", "-2147483648", "2147483647"):
        r = await http.post(PODS, json=pod(f"cost{value}".replace("-", "m"), {COST: value}))
        assert r.status_code == 201, r.text
    r = await http.patch(f"{PODS}/cost0", json={"metadata": {"annotations": {COST: "1.5"}}}, headers=MERGE)
    bad = f'metadata.annotations[{COST}]: Invalid value: "1.5": must be a 32bit integer'
    assert causes_of(r) == [bad, bad] and r.json()["message"] == f'Pod "cost0" is invalid: {bad}'  # (checked twice)


TOLERATIONS = "scheduler.alpha.kubernetes.io/tolerations"


async def test_the_tolerations_annotation_is_json_tolerations_each_valid(http: httpx.AsyncClient) -> None:
    # ValidateTolerationsInPodAnnotations: encoding/json's first error into []core.Toleration (an
    # Invalid of the annotations naming the key), else ValidateTolerations at a child path
    not_json = f'metadata.annotations: Invalid value: "{TOLERATIONS}": '
    for value, problem in (
            ("gpu", "invalid character 'g' looking for beginning of value"),
            ("[{", "unexpected end of JSON input"),
            ('{"key": "gpu"}', "json: cannot unmarshal object into Go value of type []core.Toleration"),
            ('["gpu"]', "json: cannot unmarshal string into Go value of type core.Toleration"),
            ('[{"key": 1}]', "json: cannot unmarshal number into Go struct field Toleration.Key of type string"),
            ('[{"operator": true}]', "json: cannot unmarshal bool into Go struct field Toleration.Operator of type "
                                     "core.TolerationOperator"),
            ('[{"key": "k", "effect": "NoExecute", "tolerationSeconds": 1.5}]',
             "json: cannot unmarshal number 1.5 into Go struct field Toleration.TolerationSeconds of type int64")):
        r = await http.post(PODS, json=pod("tolerant", {TOLERATIONS: value}))
        assert causes_of(r) == [not_json + problem], value
    bad = '[{"KEY": "a b", "operator": "Exists", "value": "v"}, null, {"key": "k", "tolerationSeconds": 5}]'
    r = await http.post(PODS, json=pod("tolerant", {TOLERATIONS: bad, COST: "x"}))
    at = f"metadata.annotations.{TOLERATIONS}"
    assert causes_of(r) == [  # (before the deletion cost, as upstream's order)
        f'{at}[0].key: Invalid value: "a b": name part must consist of alphanumeric characters, \'-\', \'_\' or '
        "'.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', "
        "regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
        f"{at}[0].operator: Invalid value: \"v\": value must be empty when `operator` is 'Exists'",
        f'{at}[1].operator: Invalid value: "": operator must be Exists when `key` is empty, which means "match all '
        'values and all keys"',
        f"{at}[2].effect: Invalid value: \"\": effect must be 'NoExecute' when `tolerationSeconds` is set",
        f'metadata.annotations[{COST}]: Invalid value: "x": must be a 32bit integer']
    for name, value in (("empty", ""), ("none", "null"), ("nothing", "[]"),
                        ("good", '[{"key": "gpu", "operator": "Exists", "effect": "NoExecute", '
                                 '"tolerationSeconds": 60, "ignored": 1}]')):
        r = await http.post(PODS, json=pod(name, {TOLERATIONS: value}))
        assert r.status_code == 201, r.text
        assert r.json()["metadata"]["annotations"][TOLERATIONS] == value  # (kept as sent, not applied)
    r = await http.patch(f"{PODS}/good", json={"metadata": {"annotations": {TOLERATIONS: "[1]"}}}, headers=MERGE)
    checked = f'{not_json}json: cannot unmarshal number into Go value of type core.Toleration'
    assert causes_of(r) == [checked, checked]  # (an update checks them twice, as upstream)
    deployments = "/apis/apps/v1/namespaces/default/deployments"
    template = {"metadata": {"labels": {"app": "web"}, "annotations": {TOLERATIONS: '[{"effect": "Never"}]'}},
                "spec": {"containers": [{"name": "web", "image": "nginx"}]}}
    body = {"metadata": {"name": "web"}, "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": template}}
    r = await http.post(deployments, json=body)
    at = f"spec.template.annotations.{TOLERATIONS}[0]"
    assert causes_of(r) == [
        f'{at}.operator: Invalid value: "": operator must be Exists when `key` is empty, which means "match all '
        'values and all keys"',
        f'{at}.effect: Unsupported value: "Never": supported values: "NoSchedule", "PreferNoSchedule", "NoExecute"']


async def test_every_update_checks_the_annotations_again(tmp_path: Path) -> None:
    # ValidatePodUpdate (and ValidatePodStatusUpdate) run ValidatePodSpecificAnnotations on the new
    # annotations, unchanged too: a pod stored with a bad one (before a check existed) can only be
    # updated once it is fixed; but the deletion cost, AllowInvalidPodDeletionCost, may stay bad
    import orjson

    from controlplane.api.app import create_app
    from controlplane.api.http1 import ServerProtocol
    from controlplane.config import Config
    from tests.front_socket import serving

    app = create_app(Config(data_dir=tmp_path / "data", tls=False, scheduler=False))
    async with app.router.lifespan_context(app), serving(app.state.front, http=ServerProtocol) as port, \
            httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as http:
        kube = app.state.front.kube
        rtype = kube.registry.get("", "v1", "pods")
        meta = {"namespace": "default", "uid": "u", "creationTimestamp": "2020-01-01T00:00:00Z"}
        legacy = {
            "tolerations": {TOLERATIONS: '[{"key": "k", "operator": "Sometimes"}]'},
            "seccomp": {"seccomp.security.alpha.kubernetes.io/pod": "bogus"},
            "cost": {COST: "1.5"},
        }
        for name, annotations in legacy.items():
            stored = pod(name, annotations)
            stored["metadata"].update(meta, uid=name)
            stored["spec"]["containers"][0].update(terminationMessagePolicy="File", imagePullPolicy="Always")
            await kube.store.create(rtype.key("default", name), orjson.dumps(stored))
        for name in legacy:
            for _ in range(500):  # (the watch cache learns of them)
                if (await http.get(f"{PODS}/{name}")).status_code == 200:
                    break
                await asyncio.sleep(0.01)
        label = {"metadata": {"labels": {"touched": "yes"}}}
        r = await http.patch(f"{PODS}/tolerations", json=label, headers=MERGE)
        words = (f"metadata.annotations.{TOLERATIONS}[0].operator: Unsupported value: \"Sometimes\": "
                 'supported values: "Equal", "Exists"')
        assert causes_of(r) == [words, words]  # (checked twice on an update, as upstream)
        r = await http.patch(f"{PODS}/seccomp", json=label, headers=MERGE)
        assert causes_of(r) == ['metadata.annotations.seccomp.security.alpha.kubernetes.io/pod: Invalid value: '
                                '"bogus": must be a valid seccomp profile'] * 2
        # a status write too
        status = {"status": {"conditions": [{"type": "example.com/ready", "status": "True"}]}}
        r = await http.patch(f"{PODS}/seccomp/status", json=status, headers=MERGE)
        assert causes_of(r) == ['metadata.annotations.seccomp.security.alpha.kubernetes.io/pod: Invalid value: '
                                '"bogus": must be a valid seccomp profile']  # (once: ValidatePodStatusUpdate)
        # an invalid deletion cost stored may stay (or change to another invalid one)
        r = await http.patch(f"{PODS}/cost", json=label, headers=MERGE)
        assert r.status_code == 200, r.text
        r = await http.patch(f"{PODS}/cost", json={"metadata": {"annotations": {COST: "x"}}}, headers=MERGE)
        assert r.status_code == 200 and r.json()["metadata"]["annotations"][COST] == "x", r.text
        # fixed, the update goes through
        r = await http.patch(f"{PODS}/seccomp", json={"metadata": {"labels": {"touched": "yes"}, "annotations": {
            "seccomp.security.alpha.kubernetes.io/pod": "runtime/default"}}}, headers=MERGE)
        assert r.status_code == 200, r.text
