"""ServiceAccount admission (api/serviceaccount.py): a new pod gets ``default`` when it names
no ServiceAccount, is refused (403) when its ServiceAccount does not exist, and gets the
``kube-api-access-*`` projected volume mounted in its containers unless automounting is
off; mirror pods are left alone and refused what upstream refuses them."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import orjson
import pytest

from controlplane.api import serviceaccount
from controlplane.client import ApiError, Client, resource_path
from controlplane.podgen import PodGenerator

PODS = resource_path("", "v1", "pods", "default")
ACCOUNTS = resource_path("", "v1", "serviceaccounts", "default")
PATH = "/var/run/secrets/kubernetes.io/serviceaccount"
# what kube-apiserver writes (TokenVolumeSource), but for the name's random suffix
PROJECTED = {"sources": [
    {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
    {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
    {"downwardAPI": {"items": [{"path": "namespace",
                                "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
], "defaultMode": 420}


def pod(name: str, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "busybox"}], **spec}}


def token_volumes(created: dict[str, Any]) -> list[dict[str, Any]]:
    return [v for v in created["spec"].get("volumes") or () if v["name"].startswith("kube-api-access-")]


async def test_a_pod_gets_the_default_account_and_its_token_volume_in_every_container(client: Client) -> None:
    created = await client.create(PODS, pod("p", initContainers=[{"name": "i", "image": "busybox"}], containers=[
        {"name": "a", "image": "busybox"},
        {"name": "b", "image": "busybox", "volumeMounts": [{"name": "own", "mountPath": PATH}]}],
        volumes=[{"name": "own", "emptyDir": {}}]))
    spec = created["spec"]
    assert spec["serviceAccountName"] == spec["serviceAccount"] == "default"
    [volume] = token_volumes(created)
    assert re.fullmatch(r"kube-api-access-[bcdfghjklmnpqrstvwxz2456789]{5}", volume["name"])
    assert volume["projected"] == PROJECTED and list(volume) == ["name", "projected"]
    mount = {"name": volume["name"], "readOnly": True, "mountPath": PATH}
    assert spec["initContainers"][0]["volumeMounts"] == [mount]
    assert spec["containers"][0]["volumeMounts"] == [mount]
    assert spec["containers"][1]["volumeMounts"] == [{"name": "own", "mountPath": PATH}]  # its own mount stays
    again = await client.create(PODS, pod("q"))
    assert token_volumes(again)[0]["name"] != volume["name"]  # a suffix of its own


async def test_a_kube_api_access_volume_the_pod_has_is_the_one_mounted(client: Client) -> None:
    created = await client.create(PODS, pod("p", volumes=[{"name": "kube-api-access-mine", "emptyDir": {}}]))
    assert created["spec"]["volumes"] == [{"name": "kube-api-access-mine", "emptyDir": {}}]
    assert created["spec"]["containers"][0]["volumeMounts"] == [
        {"name": "kube-api-access-mine", "readOnly": True, "mountPath": PATH}]


async def test_automounting_is_the_pods_choice_else_the_accounts(client: Client) -> None:
    await client.create(ACCOUNTS, {"metadata": {"name": "quiet"}, "automountServiceAccountToken": False,
                                   "imagePullSecrets": [{"name": "registry"}]})
    off = await client.create(PODS, pod("off", automountServiceAccountToken=False))
    assert "volumes" not in off["spec"] and "volumeMounts" not in off["spec"]["containers"][0]
    quiet = await client.create(PODS, pod("quiet", serviceAccountName="quiet"))
    assert not token_volumes(quiet) and "volumeMounts" not in quiet["spec"]["containers"][0]
    assert quiet["spec"]["imagePullSecrets"] == [{"name": "registry"}]  # the account's, the pod having none
    loud = await client.create(PODS, pod("loud", serviceAccountName="quiet", automountServiceAccountToken=True,
                                         imagePullSecrets=[{"name": "mine"}]))
    assert len(token_volumes(loud)) == 1 and loud["spec"]["imagePullSecrets"] == [{"name": "mine"}]


async def test_a_pod_whose_account_does_not_exist_is_refused_mounted_or_not(client: Client) -> None:
    for name, spec in [("ghost", {}), ("quiet-ghost", {"automountServiceAccountToken": False})]:
        with pytest.raises(ApiError) as e:
            await client.create(PODS, pod(name, serviceAccountName="robot", **spec))
        assert e.value.code == 403 and e.value.reason == "Forbidden"
        assert e.value.message == (f'pods "{name}" is forbidden: error looking up service account '
                                   'default/robot: serviceaccount "robot" not found')
    await client.create(ACCOUNTS, {"metadata": {"name": "robot"}})  # read from the store if the cache lags
    assert (await client.create(PODS, pod("ghost", serviceAccountName="robot")))["spec"]["serviceAccount"] == "robot"


async def test_a_missing_default_account_is_asked_again_then_refused(client: Client,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(serviceaccount, "RETRY_SECONDS", (0.0, 0.0))
    await client.delete(f"{ACCOUNTS}/default")
    while (await client.list(ACCOUNTS, resourceVersion="0"))["items"]:  # admission reads the watch cache
        await asyncio.sleep(0.01)
    with pytest.raises(ApiError) as e:
        await client.create(PODS, {"metadata": {"generateName": "web-"}, "spec": pod("")["spec"]})
    assert e.value.code == 403 and e.value.message == (
        'pods "web-" is forbidden: error looking up service account default/default: '
        'serviceaccount "default" not found')


async def test_a_default_account_written_while_a_pod_waits_for_it_admits_the_pod(
        client: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    # as when a pod's create sees its namespace a moment before the namespace's create
    # has written the namespace's default ServiceAccount
    monkeypatch.setattr(serviceaccount, "RETRY_SECONDS", (0.05, 0.05))
    await client.delete(f"{ACCOUNTS}/default")
    while (await client.list(ACCOUNTS, resourceVersion="0"))["items"]:
        await asyncio.sleep(0.01)
    waiting = asyncio.ensure_future(client.create(PODS, pod("early")))
    await asyncio.sleep(0.02)
    assert not waiting.done()
    await client.create(ACCOUNTS, {"metadata": {"name": "default"}})
    assert len(token_volumes(await waiting)) == 1


async def test_a_namespace_s_pods_can_be_created_as_soon_as_it_is(client: Client) -> None:
    for i in range(20):  # its default account is written before the namespace's create answers
        await client.create(resource_path("", "v1", "namespaces"), {"metadata": {"name": f"fresh-{i}"}})
        created = await client.create(resource_path("", "v1", "pods", f"fresh-{i}"), pod("p"))
        assert len(token_volumes(created)) == 1


async def test_a_podgen_pod_which_mounts_its_own_volume_passes_untouched(client: Client) -> None:
    body = PodGenerator(seed=3).pod(namespace="default", bound=False)
    body["metadata"] = {"name": "gen"}
    body.pop("status")
    body["spec"].pop("priorityClassName", None)
    body["spec"].pop("priority", None)
    body["spec"]["serviceAccountName"] = body["spec"]["serviceAccount"] = "default"
    created = await client.create(PODS, orjson.loads(orjson.dumps(body)))
    assert created["spec"]["volumes"] == body["spec"]["volumes"]
    for key in ("containers", "initContainers"):
        assert [c["volumeMounts"] for c in created["spec"].get(key) or ()] == \
            [c["volumeMounts"] for c in body["spec"].get(key) or ()]


async def test_mirror_pods_are_left_alone_and_refused_accounts_secrets_and_tokens(client: Client) -> None:
    mirror = {"kubernetes.io/config.mirror": "abc"}
    # (a mirror pod names its node: ValidatePodSpecificAnnotations)
    created = await client.create(PODS, {**pod("static", nodeName="n1"),
                                         "metadata": {"name": "static", "annotations": mirror}})
    assert "serviceAccountName" not in created["spec"] and "serviceAccount" not in created["spec"]
    assert "volumes" not in created["spec"]
    refused: list[tuple[str, dict[str, Any], str]] = [
        ("named", {"serviceAccountName": "default"}, "a mirror pod may not reference service accounts"),
        ("secret", {"volumes": [{"name": "s", "secret": {"secretName": "s"}}]},
         "a mirror pod may not reference secrets"),
        ("token", {"volumes": [{"name": "t", "projected": {"sources": [
            {"serviceAccountToken": {"path": "token"}}]}}]},
         "a mirror pod may not use ServiceAccountToken volume projections")]
    for name, spec, why in refused:
        with pytest.raises(ApiError) as e:
            await client.create(PODS, {**pod(name, **spec), "metadata": {"name": name, "annotations": mirror}})
        assert e.value.code == 403 and e.value.message == f'pods "{name}" is forbidden: {why}'


async def test_an_update_that_leaves_the_account_out_keeps_it(client: Client) -> None:
    created = await client.create(PODS, pod("p"))
    body = {**created, "spec": {k: v for k, v in created["spec"].items()
                                if k not in ("serviceAccountName", "serviceAccount")}}
    updated = await client.update(f"{PODS}/p", body)
    assert updated["spec"]["serviceAccountName"] == updated["spec"]["serviceAccount"] == "default"


async def test_ephemeral_containers_get_no_mount_as_upstream_admits_creates_only(client: Client) -> None:
    await client.create(PODS, pod("p"))
    debug = {"name": "debugger", "image": "busybox", "targetContainerName": "c"}
    added = await client.patch(f"{PODS}/p/ephemeralcontainers", {"spec": {"ephemeralContainers": [debug]}},
                               patch_type="strategic")
    assert "volumeMounts" not in added["spec"]["ephemeralContainers"][0]
