"""Bad input as kube-apiserver answers it: a Status of the right code, never a 500, and
nothing stored that the readers of the object could not decode (a null where Go keeps
a zero value, a value of another type, an integer past its Go type)."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.client import ApiError, Client, resource_path

PODS = resource_path("", "v1", "pods", "default")
CMS = resource_path("", "v1", "configmaps", "default")
DEPLOYMENTS = resource_path("apps", "v1", "deployments", "default")
APPLY = "application/apply-patch+yaml"


def pod(name: str, spec: Any = None) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "i"}]} if spec is None
            else spec}


def deployment(name: str, replicas: Any = 1) -> dict[str, Any]:
    return {"metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "c", "image": "i"}]}}}}


async def refused(call: Any, code: int) -> ApiError:
    with pytest.raises(ApiError) as e:
        await call
    assert e.value.code == code, e.value
    return e.value


async def test_a_null_spec_is_an_empty_one_not_a_500(client: Client) -> None:
    e = await refused(client.create(PODS, pod("p", None) | {"spec": None}), 422)
    assert e.message == 'Pod "p" is invalid: spec.containers: Required value'


@pytest.mark.parametrize(("patch_type", "patch"), [
    ("merge", {"spec": None}),
    ("strategic", {"$patch": "replace", "metadata": {"name": "p"}}),
    ("json", [{"op": "remove", "path": "/spec"}]),
    (None, {"metadata": {"name": "p"}}),  # a PUT without a spec
])
async def test_an_update_without_a_pod_spec_is_validated_not_stored(client: Client, patch_type: str | None,
                                                                    patch: Any) -> None:
    # Go decodes the missing spec as the zero PodSpec, which pod validation refuses: a pod
    # without containers was stored, and the kubelet and scheduler read a spec that was gone
    created = await client.create(PODS, pod("p"))
    call = client.update(f"{PODS}/p", patch) if patch_type is None else client.patch(f"{PODS}/p", patch, patch_type)
    e = await refused(call, 422)
    assert e.message.startswith('Pod "p" is invalid: [spec.containers: Required value, ')
    stored = await client.get(f"{PODS}/p")
    assert stored["spec"] == created["spec"]
    assert stored["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]


async def test_a_null_item_of_a_list_is_its_zero_value(client: Client) -> None:
    # Go decodes [null] of structs as one empty struct: its required fields are missing
    e = await refused(client.create(PODS, pod("p", {"containers": [None]})), 422)
    assert "spec.containers[0].name: Required value" in e.message
    e = await refused(client.create(CMS, {"metadata": {"name": "c", "ownerReferences": [None]}}), 422)
    assert "metadata.ownerReferences[0].uid: Required value" in e.message
    e = await refused(client.create(CMS, {"metadata": {"name": "c", "finalizers": [None]}}), 422)
    assert 'metadata.finalizers: Invalid value: ""' in e.message
    # and of strings the empty string, of a map's values their zero value
    created = await client.create(PODS, pod("p", {"containers": [
        {"name": "c", "image": "i", "command": [None, "x"], "resources": {"limits": {"cpu": None}}}],
        "nodeSelector": {"zone": None}}))
    container = created["spec"]["containers"][0]
    assert container["command"] == ["", "x"] and container["resources"]["limits"] == {"cpu": "0"}
    assert created["spec"]["nodeSelector"] == {"zone": ""}
    stored = await client.get(f"{PODS}/p")
    assert stored["spec"]["containers"][0]["command"] == ["", "x"]


async def test_a_null_field_is_no_field(client: Client) -> None:
    created = await client.create(CMS, {"metadata": {"name": "c", "labels": {"a": None}, "annotations": None},
                                        "data": None})
    assert created["metadata"]["labels"] == {"a": ""}
    assert "annotations" not in created["metadata"] and "data" not in created
    # a replicas of null is unset: defaulted
    assert (await client.create(DEPLOYMENTS, deployment("d", None)))["spec"]["replicas"] == 1


async def test_a_json_patch_cannot_store_a_null_item(client: Client) -> None:
    await client.create(DEPLOYMENTS, deployment("d"))
    patched = await client.patch(f"{DEPLOYMENTS}/d/status",
                                 [{"op": "add", "path": "/status/conditions", "value": [None]}], "json")
    # an empty DeploymentCondition, written back with the fields Go always writes
    empty = {"type": "", "status": "", "lastUpdateTime": None, "lastTransitionTime": None}
    assert patched["status"]["conditions"] == [empty]
    assert (await client.get(f"{DEPLOYMENTS}/d"))["status"]["conditions"] == [empty]


async def test_an_integer_past_its_go_type_is_not_decoded(client: Client) -> None:
    e = await refused(client.create(DEPLOYMENTS, deployment("d", 1 << 40)), 400)
    assert e.message == ('Deployment in version "v1" cannot be handled as a Deployment: json: cannot unmarshal '
                         "number 1099511627776 into Go struct field DeploymentSpec.spec.replicas of type int32")
    await client.create(DEPLOYMENTS, deployment("d", 3))
    e = await refused(client.patch(f"{DEPLOYMENTS}/d", {"spec": {"replicas": 1 << 31}}), 422)
    assert "of type int32" in e.message
    assert (await client.get(f"{DEPLOYMENTS}/d"))["spec"]["replicas"] == 3


@pytest.mark.parametrize(("replicas", "message"), [
    (1 << 40, "cannot unmarshal number 1099511627776 into Go struct field ScaleSpec.spec.replicas of type int32"),
    ("3", "cannot unmarshal string into Go struct field ScaleSpec.spec.replicas of type int32"),
])
async def test_a_scale_takes_an_int32(client: Client, replicas: Any, message: str) -> None:
    await client.create(DEPLOYMENTS, deployment("d", 2))
    scale = await client.get(f"{DEPLOYMENTS}/d/scale")
    scale["spec"]["replicas"] = replicas
    e = await refused(client.update(f"{DEPLOYMENTS}/d/scale", scale), 400)
    assert message in e.message
    # a patch's result that does not decode is upstream's patcher's 422 against ``patch``
    e = await refused(client.patch(f"{DEPLOYMENTS}/d/scale", {"spec": {"replicas": replicas}}), 422)
    assert e.message.startswith(' "" is invalid: patch: Invalid value: ') and message in e.message
    assert (await client.get(f"{DEPLOYMENTS}/d"))["spec"]["replicas"] == 2


async def test_an_apply_to_an_existing_object_is_typed_as_its_create(client: Client) -> None:
    async def apply(config: str) -> dict[str, Any]:
        return await client.request("PATCH", f"{CMS}/c", f"apiVersion: v1\nkind: ConfigMap\n{config}".encode(),
                                    APPLY, fieldManager="m")

    await apply("metadata: {name: c}\ndata: {k: v}\n")
    # structured-merge-diff's words (typed/validate.go ``validateScalar``): ``%#v`` and ``%v`` of
    # the *value.valueUnstructured it holds
    for config, why in [("data: {k: 1}\n", ".data.k: expected string, got &value.valueUnstructured{Value:1}"),
                        ('immutable: "yes"\n', ".immutable: expected boolean, got &{yes}"),
                        ("metadata: {labels: {a: {b: c}}}\n", ".metadata.labels.a: expected string, got "
                         '&value.valueUnstructured{Value:map[string]interface {}{"b":"c"}}'),
                        ("bogus: 1\n", ".bogus: field not declared in schema")]:
        e = await refused(apply(config), 400)
        assert e.message == f"failed to create typed patch object (/; /v1, Kind=ConfigMap): {why}"  # (no name)
    stored = await client.get(f"{CMS}/c")
    assert stored["data"] == {"k": "v"} and "immutable" not in stored and "labels" not in stored["metadata"]
    # nor is a new object created from such a configuration
    e = await refused(client.request("PATCH", f"{CMS}/new", b"apiVersion: v1\nkind: ConfigMap\nbogus: 1\n", APPLY,
                                     fieldManager="m"), 400)
    assert e.message.endswith(".bogus: field not declared in schema")


async def test_a_binding_names_a_node(client: Client) -> None:
    await client.create(PODS, pod("p"))

    async def bind(target: Any) -> dict[str, Any]:
        return await client.create(f"{PODS}/p/binding", {"apiVersion": "v1", "kind": "Binding",
                                                         "metadata": {"name": "p"}, "target": target})

    e = await refused(bind({"kind": "Pod", "name": "n"}), 422)
    assert e.message == 'Pod "p" is invalid: target.kind: Unsupported value: "Pod": supported values: "Node", ' \
                        '"<empty>"'
    e = await refused(bind({"name": 5}), 400)
    assert "cannot unmarshal number into Go struct field ObjectReference.target.name of type string" in e.message
    await refused(bind("n"), 400)
    assert "nodeName" not in (await client.get(f"{PODS}/p"))["spec"]
    await bind({"kind": "Node", "name": "n"})
    assert (await client.get(f"{PODS}/p"))["spec"]["nodeName"] == "n"


async def test_a_quantity_is_stored_as_a_string(client: Client) -> None:
    # a JSON number is a quantity Go writes back as a string (canonical, as every quantity):
    # the typed clients read no other
    created = await client.create(PODS, pod("p", {"containers": [
        {"name": "c", "image": "i", "resources": {"limits": {"cpu": 2, "memory": 0.5}}}]}))
    assert created["spec"]["containers"][0]["resources"]["limits"] == {"cpu": "2", "memory": "500m"}
    assert (await client.get(f"{PODS}/p"))["spec"]["containers"][0]["resources"]["requests"] == \
        {"cpu": "2", "memory": "500m"}
    for bad in (True, {"a": 1}, [1]):
        await refused(client.create(PODS, pod("q", {"containers": [
            {"name": "c", "image": "i", "resources": {"limits": {"cpu": bad}}}]})), 400)


@pytest.mark.parametrize("request_", ["1e999999999", "1" * 5000])
async def test_a_quantity_of_absurd_size_is_answered_at_once(client: Client, request_: str) -> None:
    """A request of ten to the billionth or of 5,000 digits above its limit is the 422 of any
    request above its limit: it held the event loop for minutes, or was a 500 (a Python int
    of over 4,300 digits)."""
    e = await refused(client.create(PODS, pod("absurd", {"containers": [
        {"name": "c", "image": "i", "resources": {"requests": {"cpu": request_}, "limits": {"cpu": "2"}}}]})), 422)
    assert "must be less than or equal to cpu limit of 2" in e.message


@pytest.mark.parametrize(("target_port", "found"), [
    (True, "bool"), ({"a": 1}, "object"), ([80], "array"), (1.5, "number 1.5"), (1 << 40, "number 1099511627776"),
])
async def test_an_int_or_string_is_an_int32_or_a_string(client: Client, target_port: Any, found: str) -> None:
    """IntOrString (a Service's targetPort, a probe's port, maxSurge) decodes a string, else an
    int32: anything else is refused as its UnmarshalJSON refuses it, never stored (a typed
    client could not read it back)."""
    services = resource_path("", "v1", "services", "default")
    e = await refused(client.create(services, {"metadata": {"name": "s"},
                                               "spec": {"ports": [{"port": 80, "targetPort": target_port}]}}), 400)
    assert e.message == ('Service in version "v1" cannot be handled as a Service: json: cannot unmarshal '
                         f"{found} into Go value of type int32")
    for ok in (8080, "http"):
        created = await client.create(services, {"metadata": {"generateName": "s-"},
                                                 "spec": {"ports": [{"port": 80, "targetPort": ok}]}})
        assert created["spec"]["ports"][0]["targetPort"] == ok
    body = deployment("d")
    body["spec"]["strategy"] = {"rollingUpdate": {"maxSurge": target_port}}
    await refused(client.create(DEPLOYMENTS, body), 400)


@pytest.mark.parametrize(("patch", "query", "message"), [
    # Strict and Warn (the default) decode the patch as a map first
    ([{"op": "add", "path": "/data/a", "value": "1"}], {},
     "error decoding patch: json: cannot unmarshal array into Go value of type map[string]interface {}"),
    ("x", {"fieldValidation": "Strict"},
     "error decoding patch: json: cannot unmarshal string into Go value of type map[string]interface {}"),
    # the merge patch library's own refusal
    (b"null", {}, "Invalid JSON Patch"),
    (5, {"fieldValidation": "Ignore"}, "Invalid JSON Patch"),
])
async def test_a_merge_patch_that_is_no_object_is_400_as_upstreams_patch_handler_says(
        client: Client, patch: Any, query: dict[str, str], message: str) -> None:
    await client.create(CMS, {"metadata": {"name": "merged"}, "data": {"a": "0"}})
    e = await refused(client.patch(f"{CMS}/merged", patch, **query), 400)
    assert (e.reason, e.message) == ("BadRequest", message)


async def test_an_array_merge_patch_under_ignore_replaces_the_object_which_does_not_decode(client: Client) -> None:
    await client.create(CMS, {"metadata": {"name": "merged"}})
    e = await refused(client.patch(f"{CMS}/merged", [1, None], fieldValidation="Ignore"), 422)
    assert e.message == (' "" is invalid: patch: Invalid value: "[1,null]": couldn\'t get version/kind; json parse '
                         'error: json: cannot unmarshal array into Go value of type struct { APIVersion string '
                         '"json:\\"apiVersion,omitempty\\""; Kind string "json:\\"kind,omitempty\\"" }')
