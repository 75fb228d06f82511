"""A pod's Secrets and ConfigMaps, as a kubelet needs them before it starts the pod
(``nodes/refs.py``): a missing one (or key) keeps the pod Pending, in upstream's words, until
it exists."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from controlplane.client import Client, resource_path
from controlplane.nodes.refs import env_error, has_volume_refs, volume_errors
from controlplane.nodes.stages import load_stages
from tests.nodes.conftest import PODS, eventually, fast, pod, simulating

SECRETS = resource_path("", "v1", "secrets", "default")
CONFIGMAPS = resource_path("", "v1", "configmaps", "default")
EVENTS = resource_path("", "v1", "events", "default")
FAST_STAGES = Path(__file__).with_name("kwok-fast-stages.yaml")


def _secret(name: str, **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name},
            "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}}


def _configmap(name: str, **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}


def _with_env(name: str, env: list[dict[str, Any]] | None = None,
              env_from: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    body = pod(name, "sim-node-0")
    if env is not None:
        body["spec"]["containers"][0]["env"] = env
    if env_from is not None:
        body["spec"]["containers"][0]["envFrom"] = env_from
    return body


def _with_volume(name: str, volume: dict[str, Any]) -> dict[str, Any]:
    body = pod(name, "sim-node-0")
    body["spec"]["volumes"] = [volume]
    body["spec"]["containers"][0]["volumeMounts"] = [{"name": volume["name"], "mountPath": "/v"}]
    return body


async def _waiting(client: Client, name: str) -> dict[str, Any]:
    status = (await client.get(f"{PODS}/{name}")).get("status") or {}
    states = [s.get("state", {}).get("waiting") for s in status.get("containerStatuses") or ()]
    return states[0] if states and states[0] and status.get("phase") == "Pending" else {}


async def _phase(client: Client, name: str) -> str:
    return str(((await client.get(f"{PODS}/{name}")).get("status") or {}).get("phase", ""))


async def _warnings(client: Client, name: str, reason: str) -> list[tuple[str, str]]:
    return [(e["involvedObject"].get("fieldPath", ""), e["message"]) for e in (await client.list(EVENTS))["items"]
            if e["involvedObject"].get("name") == name and e["reason"] == reason and e["type"] == "Warning"
            and e["source"].get("component") == "kubelet"]


# ---------------------------------------------------------------- the checks, as upstream words them

def _spec_pod(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"namespace": "ns", "name": "p"}, "spec": spec}


def test_env_errors_in_upstreams_words() -> None:
    secrets = {"ns/db": {"data": {"user": "dQ=="}}}
    configmaps = {"ns/cfg": {"data": {"a": "1"}, "binaryData": {"b": "Ag=="}}}

    def err(container: dict[str, Any]) -> str | None:
        got = env_error(container, "ns", secrets, configmaps)
        return got[0] if got else None

    def ref(kind: str, name: str, key: str, optional: bool | None = None) -> dict[str, Any]:
        sel: dict[str, Any] = {"name": name, "key": key}
        if optional is not None:
            sel["optional"] = optional
        return {"name": "X", "valueFrom": {kind: sel}}

    assert err({"env": [ref("secretKeyRef", "nope", "k")]}) == 'secret "nope" not found'
    assert err({"env": [ref("secretKeyRef", "db", "password")]}) == "couldn't find key password in Secret ns/db"
    assert err({"env": [ref("configMapKeyRef", "nope", "k")]}) == 'configmap "nope" not found'
    # a ConfigMap's env key is looked up in data only, as the kubelet's
    assert err({"env": [ref("configMapKeyRef", "cfg", "b")]}) == "couldn't find key b in ConfigMap ns/cfg"
    assert err({"env": [ref("secretKeyRef", "db", "user"), ref("configMapKeyRef", "cfg", "a")]}) is None
    assert err({"env": [ref("secretKeyRef", "nope", "k", True), ref("configMapKeyRef", "cfg", "z", True)]}) is None
    assert err({"env": [ref("secretKeyRef", "nope", "k", False)]}) == 'secret "nope" not found'
    assert err({"envFrom": [{"secretRef": {"name": "nope"}}]}) == 'secret "nope" not found'
    assert err({"envFrom": [{"configMapRef": {"name": "nope", "optional": True}}]}) is None
    # envFrom first, as makeEnvironmentVariables reads it first
    assert err({"env": [ref("secretKeyRef", "gone", "k")], "envFrom": [{"configMapRef": {"name": "nope"}}]}) == \
        'configmap "nope" not found'
    assert err({"env": [{"name": "A", "value": "1"}, {"name": "B", "valueFrom": {"fieldRef": {
        "fieldPath": "metadata.name"}}}]}) is None
    assert env_error({"env": [ref("secretKeyRef", "nope", "k")]}, "ns", secrets, configmaps) == \
        ('secret "nope" not found', ("secret", "ns/nope"))


def test_volume_errors_in_upstreams_words() -> None:
    secrets = {"ns/tls": {"data": {"tls.crt": "eA=="}}}
    configmaps = {"ns/cfg": {"data": {"a": "1"}, "binaryData": {"b": "Ag=="}}}

    def errs(*volumes: dict[str, Any]) -> list[str]:
        return [m for m, _ in volume_errors(_spec_pod(volumes=list(volumes)), secrets, configmaps)]

    prefix = 'MountVolume.SetUp failed for volume "v" : '
    assert errs({"name": "v", "secret": {"secretName": "nope"}}) == [prefix + 'secret "nope" not found']
    assert errs({"name": "v", "secret": {"secretName": "nope", "optional": True}}) == []
    assert errs({"name": "v", "secret": {"secretName": "tls", "items": [{"key": "tls.key", "path": "k"}]}}) == \
        [prefix + "references non-existent secret key: tls.key"]
    assert errs({"name": "v", "configMap": {"name": "nope"}}) == [prefix + 'configmap "nope" not found']
    assert errs({"name": "v", "configMap": {"name": "cfg", "items": [{"key": "b", "path": "b"}]}}) == []
    assert errs({"name": "v", "configMap": {"name": "cfg", "items": [{"key": "z", "path": "z"}]}}) == \
        [prefix + "configmap references non-existent config key: z"]
    assert errs({"name": "v", "projected": {"sources": [
        {"serviceAccountToken": {"path": "token"}}, {"configMap": {"name": "nope"}},
        {"downwardAPI": {"items": []}}]}}) == [prefix + 'configmap "nope" not found']
    # several sources failing: one error of them all, as utilerrors' aggregate prints it
    assert errs({"name": "v", "projected": {"sources": [
        {"configMap": {"name": "nope"}}, {"secret": {"name": "gone"}}, {"secret": {"name": "nope2", "optional": True}},
        {"secret": {"name": "tls", "items": [{"key": "x", "path": "x"}]}}]}}) == \
        [prefix + '[configmap "nope" not found, secret "gone" not found, references non-existent secret key: x]']
    assert errs({"name": "v", "emptyDir": {}}, {"name": "w", "projected": {"sources": [
        {"configMap": {"name": "cfg", "items": [{"key": "a", "path": "a"}]}}]}}) == []
    volumes = [{"name": "v", "secret": {"secretName": "nope"}},
               {"name": "w", "configMap": {"name": "cfg", "items": [{"key": "z", "path": "z"}]}}]
    assert [w for _, w in volume_errors(_spec_pod(volumes=volumes), secrets, configmaps)] == \
        [{("secret", "ns/nope")}, {("configmap", "ns/cfg")}]
    # the ServiceAccount admission's token volume is passed over (its root CA is everywhere)
    token = {"name": "kube-api-access-x7k2p", "projected": {"sources": [{"configMap": {"name": "kube-root-ca.crt"}}]}}
    assert not has_volume_refs(_spec_pod(volumes=[token])) and volume_errors(_spec_pod(volumes=[token]), {}, {}) == []


# ---------------------------------------------------------------- through a simulated kubelet

async def test_a_missing_secret_in_env_waits_in_create_container_config_error(client: Client) -> None:
    async with simulating(client, fast(count=1)):
        await client.create(PODS, _with_env("web", env=[
            {"name": "PASSWORD", "valueFrom": {"secretKeyRef": {"name": "db", "key": "password"}}}]))
        waiting = await eventually(lambda: _waiting(client, "web"), timeout=5)
        assert waiting == {"reason": "CreateContainerConfigError", "message": 'secret "db" not found'}
        failed = await eventually(lambda: _warnings(client, "web", "Failed"))
        assert failed == [("spec.containers{c}", 'Error: secret "db" not found')]
        # the Secret without the key: the kubelet's next try says so
        await client.create(SECRETS, _secret("db", user="u"))

        async def key_missing() -> dict[str, Any]:
            w = await _waiting(client, "web")
            return w if w.get("message") == "couldn't find key password in Secret default/db" else {}

        assert (await eventually(key_missing))["reason"] == "CreateContainerConfigError"
        assert ("spec.containers{c}", "Error: couldn't find key password in Secret default/db") in \
            await eventually(lambda: _warnings(client, "web", "Failed"))
        assert await _phase(client, "web") == "Pending"
        # the key added: the pod starts
        await client.patch(f"{SECRETS}/db", {"data": {"password": "cA=="}})
        await eventually(lambda: _is(client, "web", "Running"))


async def _is(client: Client, name: str, phase: str) -> bool:
    return await _phase(client, name) == phase


async def test_a_missing_configmap_in_env_from_and_optional_references(client: Client) -> None:
    async with simulating(client, fast(count=1)):
        await client.create(PODS, _with_env("opt", env=[
            {"name": "A", "valueFrom": {"configMapKeyRef": {"name": "none", "key": "a", "optional": True}}}],
            env_from=[{"secretRef": {"name": "none", "optional": True}}]))
        await client.create(PODS, _with_env("cfg", env_from=[{"configMapRef": {"name": "settings"}}]))
        await eventually(lambda: _is(client, "opt", "Running"))
        waiting = await eventually(lambda: _waiting(client, "cfg"), timeout=5)
        assert waiting == {"reason": "CreateContainerConfigError", "message": 'configmap "settings" not found'}
        assert await _warnings(client, "cfg", "Failed") == [
            ("spec.containers{c}", 'Error: configmap "settings" not found')]
        await client.create(CONFIGMAPS, _configmap("settings", mode="fast"))
        await eventually(lambda: _is(client, "cfg", "Running"))


async def test_a_missing_secret_volume_keeps_the_pod_container_creating(client: Client) -> None:
    async with simulating(client, fast(count=1)):
        await client.create(PODS, _with_volume("web", {"name": "certs", "secret": {"secretName": "tls"}}))
        mount = await eventually(lambda: _warnings(client, "web", "FailedMount"))
        assert mount == [("", 'MountVolume.SetUp failed for volume "certs" : secret "tls" not found')]
        assert await eventually(lambda: _waiting(client, "web")) == {"reason": "ContainerCreating"}
        # the volumes come before the images: nothing pulled yet
        assert not [e for e in (await client.list(EVENTS))["items"]
                    if e["involvedObject"].get("name") == "web" and e["reason"] in ("Pulling", "Pulled")]
        await client.create(SECRETS, _secret("tls", **{"tls.crt": "x"}))
        await eventually(lambda: _is(client, "web", "Running"))


async def test_a_missing_configmap_in_a_projected_volume(client: Client) -> None:
    await client.create(CONFIGMAPS, _configmap("base", **{"ca.crt": "x"}))
    async with simulating(client, fast(count=1)):
        await client.create(PODS, _with_volume("web", {"name": "all", "projected": {"sources": [
            {"configMap": {"name": "base", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
            {"configMap": {"name": "extra"}}]}}))
        await client.create(PODS, _with_volume("fine", {"name": "ca", "projected": {"sources": [
            {"configMap": {"name": "base", "items": [{"key": "ca.crt", "path": "ca.crt"}]}}]}}))
        mount = await eventually(lambda: _warnings(client, "web", "FailedMount"))
        assert mount == [("", 'MountVolume.SetUp failed for volume "all" : configmap "extra" not found')]
        await eventually(lambda: _is(client, "fine", "Running"))
        assert await _phase(client, "web") == "Pending"
        await client.create(CONFIGMAPS, _configmap("extra", a="1"))
        await eventually(lambda: _is(client, "web", "Running"))


async def test_an_init_containers_missing_secret_keeps_the_pod_initializing(client: Client) -> None:
    async with simulating(client, fast(count=1)):
        body = pod("web", "sim-node-0")
        body["spec"]["initContainers"] = [{"name": "setup", "image": "registry.k8s.io/pause:3.10", "env": [
            {"name": "T", "valueFrom": {"secretKeyRef": {"name": "token", "key": "t"}}}]}]
        await client.create(PODS, body)

        async def init_waiting() -> dict[str, Any]:
            status = (await client.get(f"{PODS}/web")).get("status") or {}
            inits = status.get("initContainerStatuses") or ()
            return inits[0]["state"].get("waiting", {}) if inits else {}

        assert await eventually(init_waiting) == {"reason": "CreateContainerConfigError",
                                                  "message": 'secret "token" not found'}
        status = (await client.get(f"{PODS}/web"))["status"]
        assert status["containerStatuses"][0]["state"] == {"waiting": {"reason": "PodInitializing"}}
        assert {c["type"]: c["status"] for c in status["conditions"]}["Initialized"] == "False"
        assert await _warnings(client, "web", "Failed") == [
            ("spec.initContainers{setup}", 'Error: secret "token" not found')]
        await client.create(SECRETS, _secret("token", t="x"))
        await eventually(lambda: _is(client, "web", "Running"))


async def test_a_user_stage_file_starts_the_pod_as_kwok_does(client: Client) -> None:
    """KWOK checks no reference: with a user's stages the pod runs as they say."""
    stages = load_stages(FAST_STAGES.read_text())
    async with simulating(client, fast(count=1, stages=stages)):
        await client.create(PODS, _with_env("web", env=[
            {"name": "P", "valueFrom": {"secretKeyRef": {"name": "db", "key": "password"}}}]))
        await client.create(PODS, _with_volume("vol", {"name": "certs", "secret": {"secretName": "tls"}}))
        await eventually(lambda: _is(client, "web", "Running"))
        await eventually(lambda: _is(client, "vol", "Running"))


async def test_a_running_pod_is_left_alone_when_its_secret_goes(client: Client) -> None:
    """The check is the start's: a running pod whose Secret is deleted keeps running, as a
    kubelet's running containers keep their environment."""
    async with simulating(client, fast(count=1)):
        await client.create(SECRETS, _secret("db", password="p"))
        await client.create(PODS, _with_env("web", env=[
            {"name": "P", "valueFrom": {"secretKeyRef": {"name": "db", "key": "password"}}}]))
        await eventually(lambda: _is(client, "web", "Running"))
        await client.delete(f"{SECRETS}/db")
        await client.patch(f"{PODS}/web", {"metadata": {"labels": {"touched": "yes"}}})
        assert await _phase(client, "web") == "Running"
        assert await _warnings(client, "web", "Failed") == []


async def test_pods_bound_before_the_simulator_started(client: Client) -> None:
    """Pods the simulator finds at its start are looked at once it has listed the Secrets:
    one whose Secret exists starts without a FailedMount, one whose does not waits."""
    await client.create(SECRETS, _secret("tls", **{"tls.crt": "x"}))
    await client.create(PODS, _with_volume("has", {"name": "certs", "secret": {"secretName": "tls"}}))
    await client.create(PODS, _with_volume("lacks", {"name": "certs", "secret": {"secretName": "other"}}))
    async with simulating(client, fast(count=1)) as sim:
        await eventually(lambda: _is(client, "has", "Running"))
        assert await eventually(lambda: _warnings(client, "lacks", "FailedMount")) == [
            ("", 'MountVolume.SetUp failed for volume "certs" : secret "other" not found')]
        assert await _warnings(client, "has", "FailedMount") == []
        assert set(sim._blocked) == {"default/lacks"}


async def test_a_waiting_pod_deleted_is_deleted_at_once_and_forgotten(client: Client) -> None:
    async with simulating(client, fast(count=1)) as sim:
        await client.create(PODS, _with_env("web", env_from=[{"secretRef": {"name": "none"}}]))
        await eventually(lambda: _waiting(client, "web"))
        assert set(sim._blocked) == {"default/web"} and set(sim._awaiting) == {("secret", "default/none")}
        await client.delete(f"{PODS}/web")

        async def gone() -> bool:
            return not [p for p in (await client.list(PODS))["items"] if p["metadata"]["name"] == "web"]

        await eventually(gone)
        await eventually(lambda: _async(not sim._blocked and not sim._awaiting))


async def _async(value: bool) -> bool:
    return value


async def test_the_other_containers_run_beside_one_that_cannot_be_created(client: Client) -> None:
    """As the kubelet starts each container on its own: the pod Pending, 1/2 ready, and
    kubectl's STATUS the waiting one's reason."""
    async with simulating(client, fast(count=1)):
        body = _with_env("web", env_from=[{"secretRef": {"name": "app"}}])
        body["spec"]["containers"].insert(0, {"name": "proxy", "image": "registry.k8s.io/pause:3.10"})
        await client.create(PODS, body)

        async def statuses() -> dict[str, Any]:
            status = (await client.get(f"{PODS}/web")).get("status") or {}
            got = {s["name"]: s for s in status.get("containerStatuses") or ()}
            return got if "waiting" in (got.get("c") or {}).get("state", {}) and status["phase"] == "Pending" else {}

        got = await eventually(statuses)
        assert got["c"]["state"]["waiting"] == {"reason": "CreateContainerConfigError",
                                                "message": 'secret "app" not found'}
        assert "running" in got["proxy"]["state"] and got["proxy"]["ready"] is True
        assert [s["ready"] for s in got.values()] == [True, False]
        await client.create(SECRETS, _secret("app", a="1"))
        await eventually(lambda: _is(client, "web", "Running"))
