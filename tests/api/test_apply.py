"""The HTTP side of server-side apply: options, the applied body, the conflict Status."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from controlplane.api.apply import APPLY_YAML, apply_options, conflict_error, manager_of, parse_config, yaml_as_json
from controlplane.api.errors import ApiError
from controlplane.client import Client
from controlplane.client.client import ApiError as ClientError
from controlplane.registry import BUILTIN
from controlplane.registry.managedfields import Conflict, Conflicts

CONFIGMAPS = next(t for t in BUILTIN if t.plural == "configmaps")


def test_apply_options() -> None:
    opts = apply_options({"fieldManager": "kubectl", "force": "true"}, APPLY_YAML)
    assert opts is not None and opts.manager == "kubectl" and opts.force
    assert apply_options({}, "application/merge-patch+json") is None


def test_manager_of_a_request() -> None:
    assert manager_of({"fieldManager": "mine"}, {b"user-agent": b"kubectl/v1.37.0"}) == "mine"
    assert manager_of({}, {b"user-agent": b"kubectl/v1.37.0 (linux/amd64) kubernetes/abc"}) == "kubectl"
    assert manager_of({}, {}) == ""


def test_parse_config_reads_yaml_as_kubernetes_does() -> None:
    body = b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {when: 2024-01-01, 1: one}\n"
    config = parse_config(CONFIGMAPS, "default", "c", body)
    assert config["data"] == {"when": "2024-01-01", "1": "one"}
    assert parse_config(CONFIGMAPS, "default", "c", b'{"apiVersion":"v1","kind":"ConfigMap"}')["metadata"] == {}


def test_yaml_keys_are_the_strings_go_writes_for_them() -> None:
    # sigs.k8s.io/yaml: a bool key is "true"/"false", a number its Go spelling, each its own key
    # (PyYAML's keys True and 1 were one, written "True"); a null key and a float JSON cannot
    # hold are errors, as Go's json.Marshal (a .nan was stored as an empty string)
    body = b"{on: a, off: b, 1: c, 1.5: d, 1234567.0: e, 100000.0: f, .inf: g}"
    assert yaml_as_json(body) == (b'{"true":"a","false":"b","1":"c","1.5":"d","1.234567e+06":"e","100000":"f",'
                                  b'".inf":"g"}')
    for bad, message in ((b"data: {~: x}", "unsupported map key of type: <nil>"),
                         (b"data: {[a]: x}", "unsupported map key of type: list"),
                         (b"data: {a: .nan}", "json: unsupported value: NaN"),
                         (b"spec: {replicas: -.inf}", "json: unsupported value: -Inf")):
        with pytest.raises(ApiError) as err:
            yaml_as_json(bad)
        assert err.value.code == 400 and message in err.value.message


def test_a_json_body_is_read_as_json_and_flow_yaml_as_yaml() -> None:
    # kubectl sends JSON: read so, 1e3 is the number Go reads (YAML 1.1 would leave a string)
    assert yaml_as_json(b'{"n": 1e3, "s": "\\ud83d\\ude00"}') == '{"n":1000.0,"s":"\U0001f600"}'.encode()
    config = parse_config(CONFIGMAPS, "default", "c", b'{"apiVersion":"v1","kind":"ConfigMap","data":{"s":"\\u00e9"}}')
    assert config["data"] == {"s": "\u00e9"}
    # a body that only looks like JSON is YAML's flow style
    config = parse_config(CONFIGMAPS, "default", "c", b"{apiVersion: v1, kind: ConfigMap, metadata: {name: c}}")
    assert config["metadata"] == {"name": "c"}


@pytest.mark.parametrize("body", [
    b"[1, 2]",
    b"kind: ConfigMap\nmetadata: {name: c}",
    b"apiVersion: v1\nkind: Secret\nmetadata: {name: c}",
    b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: other}",
    b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: elsewhere}",
    b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, managedFields: []}",
    b"apiVersion: v1\nkind: ConfigMap\nmetadata: [1]",
    b"a: [",
    b"a: 1\n---\nb: 2\n",
    b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\nbinaryData: {x: !!binary aGk=}",
    b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: !!set {a}",
    b"[" * 100_000,
])
def test_parse_config_rejects_with_400(body: bytes) -> None:
    with pytest.raises(ApiError) as err:
        parse_config(CONFIGMAPS, "default", "c", body)
    assert err.value.code == 400


@pytest.mark.parametrize(("body", "message"), [
    (b"metadata: {name: c}\ndata: {a: b}", "invalid object type: /, Kind="),  # says no type at all
    (b"kind: ConfigMap\nmetadata: {name: c}", "invalid object type: /, Kind=ConfigMap"),
    (b"apiVersion: v1\nkind: Secret", "invalid object type: /v1, Kind=Secret"),
    (b"apiVersion: apps/v1\nkind: ConfigMap", "invalid object type: apps/v1, Kind=ConfigMap"),
    (b"apiVersion: a/b/c\nkind: ConfigMap", "invalid object type: /, Kind="),  # no group version: no kind either
])
def test_an_applied_configuration_of_another_type_is_refused_by_the_version_check(body: bytes, message: str) -> None:
    with pytest.raises(ApiError) as err:
        parse_config(CONFIGMAPS, "default", "c", body)
    assert (err.value.code, err.value.message) == (400, message)


def test_conflict_status() -> None:
    err = conflict_error(Conflicts([Conflict('"kubectl-edit" using apps/v1', ".spec.replicas")]))
    status = err.status()
    assert status["code"] == 409 and status["reason"] == "Conflict"
    assert status["message"] == ('Apply failed with 1 conflict: conflict with "kubectl-edit" using apps/v1: '
                                 ".spec.replicas")
    assert status["details"]["causes"] == [{"type": "FieldManagerConflict", "field": ".spec.replicas",
                                            "message": 'conflict with "kubectl-edit" using apps/v1'}]


SECRETS = "/api/v1/namespaces/default/secrets"
DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"
CONFIGMAPS_PATH = "/api/v1/namespaces/default/configmaps"


def managers(obj: dict[str, Any]) -> dict[tuple[str, str, str], dict[str, Any]]:
    return {(e["manager"], e["operation"], e.get("subresource", "")): e["fieldsV1"]
            for e in obj["metadata"].get("managedFields", [])}


async def test_secret_string_data_is_recorded_as_data_and_applies_over_it(client: Client) -> None:
    created = await client.create(SECRETS, {"metadata": {"name": "ss"}, "stringData": {"password": "hunter2"}},
                                  fieldManager="kubectl-client-side-apply")
    fields = managers(created)[("kubectl-client-side-apply", "Update", "")]
    assert "f:stringData" not in fields and fields["f:data"] == {".": {}, "f:password": {}}
    patched = await client.patch(f"{SECRETS}/ss", {"stringData": {"user": "me"}}, fieldManager="kubectl-patch")
    assert managers(patched)[("kubectl-patch", "Update", "")] == {"f:data": {"f:user": {}}}
    config = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "ss"},
              "stringData": {"password": "hunter3"}}
    applied = await client.patch(f"{SECRETS}/ss", config, "apply", fieldManager="kubectl")
    assert applied["data"]["password"] == "aHVudGVyMw==" and "stringData" not in applied
    assert managers(applied)[("kubectl", "Apply", "")] == {"f:stringData": {"f:password": {}}}


async def test_an_apply_that_drops_a_defaulted_field_gets_the_default_again(client: Client) -> None:
    config: dict[str, Any] = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s1"}, "type": "Opaque",
                              "data": {"a": "YQ=="}}
    await client.patch(f"{SECRETS}/s1", config, "apply", fieldManager="kubectl")
    del config["type"]
    applied = await client.patch(f"{SECRETS}/s1", config, "apply", fieldManager="kubectl")
    assert applied["type"] == "Opaque"
    assert managers(applied)[("kubectl", "Apply", "")] == {"f:data": {"f:a": {}}}


async def test_an_apply_never_prunes_the_objects_kind_whatever_managed_fields_a_client_wrote(client: Client) -> None:
    # a client may write managedFields (an update's are taken as sent): one that gives manager "a"
    # a root f:kind, which "a"'s next apply prunes as a field it no longer applies; the object
    # keeps its type's kind and apiVersion (upstream decodes the merge into the type), never a 500
    config = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "kept"}, "data": {"a": "YQ=="}}
    await client.patch(f"{SECRETS}/kept", config, "apply", fieldManager="a")
    stored = await client.get(f"{SECRETS}/kept")
    owns_kind: dict[str, Any] = {"f:kind": {}, "f:data": {"f:a": {}}}
    stored["metadata"]["managedFields"] = [{"manager": "a", "operation": "Apply", "apiVersion": "v1",
                                            "fieldsType": "FieldsV1", "fieldsV1": owns_kind}]
    await client.update(f"{SECRETS}/kept", stored)
    applied = await client.patch(f"{SECRETS}/kept", config, "apply", fieldManager="a", force=True)
    assert (applied["kind"], applied["apiVersion"]) == ("Secret", "v1")
    read = await client.get(f"{SECRETS}/kept")
    assert (read["kind"], read["apiVersion"], read["data"]) == ("Secret", "v1", {"a": "YQ=="})


def deployment(replicas: int) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d1"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "d1"}},
                     "template": {"metadata": {"labels": {"app": "d1"}},
                                  "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}


async def test_a_scale_write_owns_the_replicas_and_a_later_apply_conflicts(client: Client) -> None:
    await client.patch(f"{DEPLOYMENTS}/d1", deployment(1), "apply", fieldManager="kubectl")
    scale = await client.patch(f"{DEPLOYMENTS}/d1/scale", {"spec": {"replicas": 2}}, fieldManager="scaler")
    assert scale["spec"]["replicas"] == 2 and "managedFields" not in scale["metadata"]
    d = await client.get(f"{DEPLOYMENTS}/d1")
    assert managers(d)[("scaler", "Update", "scale")] == {"f:spec": {"f:replicas": {}}}
    assert "f:replicas" not in managers(d)[("kubectl", "Apply", "")]["f:spec"]
    entry = next(e for e in d["metadata"]["managedFields"] if e.get("subresource") == "scale")
    assert entry["apiVersion"] == "apps/v1" and entry["operation"] == "Update"
    with pytest.raises(ClientError) as err:
        await client.patch(f"{DEPLOYMENTS}/d1", deployment(1), "apply", fieldManager="kubectl")
    assert err.value.code == 409
    assert err.value.message == ('Apply failed with 1 conflict: conflict with "scaler" with subresource "scale" '
                                 "using apps/v1: .spec.replicas")
    assert (await client.get(f"{DEPLOYMENTS}/d1"))["spec"]["replicas"] == 2
    # a PUT of the Scale that keeps the replicas changes no ownership
    unchanged = await client.update(f"{DEPLOYMENTS}/d1/scale", {"kind": "Scale", "apiVersion": "autoscaling/v1",
                                                                  "metadata": {"name": "d1"},
                                                                  "spec": {"replicas": 2}}, fieldManager="other")
    assert unchanged["spec"]["replicas"] == 2
    assert ("other", "Update", "scale") not in managers(await client.get(f"{DEPLOYMENTS}/d1"))
    forced = await client.patch(f"{DEPLOYMENTS}/d1", deployment(1), "apply", fieldManager="kubectl", force=True)
    assert forced["spec"]["replicas"] == 1 and ("scaler", "Update", "scale") not in managers(forced)


async def test_an_apply_with_another_uid_is_refused_as_a_patch_is(client: Client) -> None:
    # the applied uid is merged in, then held immutable by the update's metadata validation (it
    # was dropped, and the apply answered 200); the object's own uid applies as any field
    cms = "/api/v1/namespaces/default/configmaps"
    created = await client.create(cms, {"metadata": {"name": "c"}})
    def config(uid: str) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "uid": uid}}

    with pytest.raises(ClientError) as e:
        await client.patch(f"{cms}/c", config("other"), "apply", fieldManager="m")
    assert (e.value.code, e.value.message) == (
        422, 'ConfigMap "c" is invalid: metadata.uid: Invalid value: "other": field is immutable')
    assert await client.get(f"{cms}/c") == created
    uid = created["metadata"]["uid"]
    assert (await client.patch(f"{cms}/c", config(uid), "apply", fieldManager="m"))["metadata"]["uid"] == uid


def fields_json(obj: dict[str, Any], manager: str) -> str:
    """A manager's ``fieldsV1`` as the response wrote it (the client keeps the order of the keys)."""
    entry = next(e for e in obj["metadata"]["managedFields"] if e["manager"] == manager)
    return orjson.dumps(entry["fieldsV1"]).decode()


async def test_fields_v1_keys_come_in_upstreams_sorted_order(client: Client) -> None:
    """structured-merge-diff writes a set sorted (``.`` first, fields by name, then list keys
    by their values, numbers as numbers), whatever order the object had its fields in."""
    config = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web",
                                                                          "labels": {"tier": "fe", "app": "web"}},
              "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}}, "template": {
                  "metadata": {"labels": {"app": "web"}},
                  "spec": {"containers": [
                      {"name": "web", "image": "nginx",
                       "ports": [{"containerPort": 8080}, {"containerPort": 80, "protocol": "UDP"},
                                 {"containerPort": 80}],
                       "env": [{"name": "b", "value": "2"}, {"name": "B", "value": "1"}]},
                      {"name": "log", "image": "busybox"}]}}}}
    applied = await client.patch(f"{DEPLOYMENTS}/web", config, "apply", fieldManager="kubectl")
    container = ('"k:{\\"name\\":\\"web\\"}":{".":{},"f:env":{"k:{\\"name\\":\\"B\\"}":{".":{},"f:name":{},'
                 '"f:value":{}},"k:{\\"name\\":\\"b\\"}":{".":{},"f:name":{},"f:value":{}}},"f:image":{},"f:name":{},'
                 '"f:ports":{"k:{\\"containerPort\\":80,\\"protocol\\":\\"TCP\\"}":{".":{},"f:containerPort":{}},'
                 '"k:{\\"containerPort\\":80,\\"protocol\\":\\"UDP\\"}":{".":{},"f:containerPort":{},"f:protocol":{}},'
                 '"k:{\\"containerPort\\":8080,\\"protocol\\":\\"TCP\\"}":{".":{},"f:containerPort":{}}}}')
    assert fields_json(applied, "kubectl") == (
        '{"f:metadata":{"f:labels":{"f:app":{},"f:tier":{}}},"f:spec":{"f:replicas":{},"f:selector":{},'
        '"f:template":{"f:metadata":{"f:labels":{"f:app":{}}},"f:spec":{"f:containers":{'
        '"k:{\\"name\\":\\"log\\"}":{".":{},"f:image":{},"f:name":{}},' + container + '}}}}}')
    # an update's entry too, and the ones a client sends in another order are written sorted
    created = await client.create(CONFIGMAPS_PATH, {"metadata": {"name": "c", "labels": {"z": "1", "a": "2"}},
                                                    "data": {"b": "1", "a": "2"}}, fieldManager="maker")
    assert fields_json(created, "maker") == ('{"f:data":{".":{},"f:a":{},"f:b":{}},'
                                             '"f:metadata":{"f:labels":{".":{},"f:a":{},"f:z":{}}}}')
    sent = {"manager": "other", "operation": "Update", "apiVersion": "v1", "fieldsType": "FieldsV1",
            "fieldsV1": {"f:metadata": {"f:labels": {"f:z": {}, ".": {}}}, "f:data": {"f:b": {}}}}
    replaced = await client.patch(f"{CONFIGMAPS_PATH}/c", {"metadata": {"managedFields": [sent]}})
    assert fields_json(replaced, "other") == '{"f:data":{"f:b":{}},"f:metadata":{"f:labels":{".":{},"f:z":{}}}}'
