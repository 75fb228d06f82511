"""Whole floats (``3.0``, ``80.0``) in request bodies and patches, over a real socket, as
kube-apiserver's decoders take them (``controlplane/gonumbers.py``):

- a create's or update's body, a JSON or merge patch's result: decoded into the Go struct
  by sigs.k8s.io/json, whose ``literalStore`` parses an int field's number with
  ``strconv.ParseInt`` and names the text it refused (``number 3.0``);
- a strategic merge patch's result: apimachinery's ``runtime.DefaultUnstructuredConverter``
  (``converter.go`` ``fromUnstructured``), which takes a float64 for an int when
  ``sv.Float() == math.Trunc(sv.Float())`` and converts it as ``reflect.Value.Convert``
  does, else ``cannot convert float64 to int32``;
- a server-side apply's body: apimachinery's ``util/yaml.Unmarshal`` (sigs.k8s.io/yaml made
  it JSON with ``json.Marshal``, so ``3.0`` is ``3``, then decoded with ``UseNumber``);
- a custom resource: decoded into unstructured (``util/json``: int64 when the text parses
  as one, else float64), validated so, and written back by Go's encoder, ``80``.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from tests.api.test_bad_input_http import Served, served
from tests.api.test_bad_input_http import assert_status as status

__all__ = ["served"]  # the fixture, imported for the tests below

DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
WIDGETS = "/apis/example.com/v1/namespaces/default/widgets"
JSON = {"Content-Type": "application/json"}
SMP = {"Content-Type": "application/strategic-merge-patch+json"}
MERGE = {"Content-Type": "application/merge-patch+json"}
JSON_PATCH = {"Content-Type": "application/json-patch+json"}
APPLY = {"Content-Type": "application/apply-patch+yaml"}




def deployment(replicas: str = "1") -> bytes:
    """A Deployment's JSON with ``replicas`` written as given (``3.0``: Python would say 3.0 too,
    but the text is the point)."""
    return (b'{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d","namespace":"default"},'
            b'"spec":{"replicas":%s,"selector":{"matchLabels":{"app":"d"}},"template":{"metadata":{"labels":'
            b'{"app":"d"}},"spec":{"containers":[{"name":"a","image":"x","ports":[{"containerPort":80}]}]}}}}'
            % replicas.encode())


async def test_a_create_or_update_with_a_whole_float_for_an_int_is_gos_400(served: Served) -> None:
    """sigs.k8s.io/json ``literalStore`` (decode.go): an int field's number goes through
    ``strconv.ParseInt``, which refuses ``3.0``; its ``UnmarshalTypeError`` names the number
    (``Value: "number " + string(item)``), which create.go's ``transformDecodeError`` puts after
    ``... cannot be handled as a Deployment``, the number as the body wrote it. It said
    ``number`` alone here."""
    why = "json: cannot unmarshal number {} into Go struct field DeploymentSpec.spec.replicas of type int32"
    for text in ("3.0", "3.5", "1e2", "3.00", "-0.0"):
        r = await served.http.post(DEPLOYMENTS, content=deployment(text), headers=JSON)
        assert status(r, 400, "BadRequest")["message"] == \
            'Deployment in version "v1" cannot be handled as a Deployment: ' + why.format(text)
    await served.client.create(DEPLOYMENTS, json.loads(deployment()))
    r = await served.http.put(f"{DEPLOYMENTS}/d", content=deployment("3.0"), headers=JSON)
    assert status(r, 400, "BadRequest")["message"].endswith(why.format("3.0"))
    assert (await served.client.get(f"{DEPLOYMENTS}/d"))["spec"]["replicas"] == 1


async def test_a_strategic_merge_patch_takes_a_whole_float_for_an_int(served: Served) -> None:
    """apiserver patch.go ``applyPatchToObject`` decodes the merged map with
    ``DefaultUnstructuredConverter.FromUnstructuredWithValidation``; converter.go's
    ``fromUnstructured`` sets an int field from a float64 when it equals its ``math.Trunc``
    (``replicas: 3.0`` is 3, a new port ``containerPort: 8080.0`` 8080), converting with
    ``reflect.Value.Convert`` (an int64 past an int32 keeps its low 32 bits: 4294967299 is 3);
    an IntOrString takes the float through its UnmarshalJSON of Go's encoding of it (``2.0``
    is ``2``). 3.5 stays ``cannot convert float64 to int32``, 422 against ``patch`` with the
    patch as ``%+v`` prints it. All of these were that 422 here."""
    await served.client.create(DEPLOYMENTS, json.loads(deployment()))
    r = await served.http.patch(f"{DEPLOYMENTS}/d", content=b'{"spec":{"replicas":3.0}}', headers=SMP)
    assert r.status_code == 200, r.text
    assert b'"replicas":3,' in r.content and r.json()["spec"]["replicas"] == 3
    r = await served.http.patch(f"{DEPLOYMENTS}/d", headers=SMP, content=(
        b'{"spec":{"strategy":{"rollingUpdate":{"maxSurge":2.0}},"template":{"spec":{"containers":'
        b'[{"name":"a","ports":[{"containerPort":8080.0}]}]}}}}'))
    assert r.status_code == 200, r.text
    spec = r.json()["spec"]
    assert spec["strategy"]["rollingUpdate"]["maxSurge"] == 2
    assert [p["containerPort"] for p in spec["template"]["spec"]["containers"][0]["ports"]] == [8080, 80]
    assert b"8080.0" not in r.content and b'"maxSurge":2}' in r.content, r.text
    r = await served.http.patch(f"{DEPLOYMENTS}/d", content=b'{"spec":{"replicas":4294967299}}', headers=SMP)
    assert r.status_code == 200 and r.json()["spec"]["replicas"] == 3, r.text
    r = await served.http.patch(f"{DEPLOYMENTS}/d", content=b'{"spec":{"replicas":3.5}}', headers=SMP)
    assert status(r, 422, "Invalid")["message"] == \
        ' "" is invalid: patch: Invalid value: "map[spec:map[replicas:3.5]]": cannot convert float64 to int32'
    r = await served.http.patch(f"{DEPLOYMENTS}/d", content=b'{"spec":{"strategy":{"rollingUpdate":{"maxSurge":2.5}}}}',
                                headers=SMP)
    assert status(r, 422, "Invalid")["message"].endswith(
        ": json: cannot unmarshal number 2.5 into Go value of type int32")
    assert (await served.client.get(f"{DEPLOYMENTS}/d"))["spec"]["replicas"] == 3


@pytest.mark.parametrize(("headers", "patch"), [
    (MERGE, b'{"spec":{"replicas":3.0}}'),
    (JSON_PATCH, b'[{"op":"replace","path":"/spec/replicas","value":3.0}]'),
])
async def test_a_json_or_merge_patchs_whole_float_for_an_int_is_422(served: Served, headers: dict[str, str],
                                                                   patch: bytes) -> None:
    """apiserver patch.go ``jsonPatcher.applyPatchToCurrentObject``: the patch is applied to
    the object's JSON (the json-patch library keeps a value's text), and the result decoded
    into the Go struct with ``runtime.DecodeInto``: the decoder's error (``number 3.0``, as
    for a create) is a 422 against ``patch``, the patched JSON its value."""
    await served.client.create(DEPLOYMENTS, json.loads(deployment()))
    r = await served.http.patch(f"{DEPLOYMENTS}/d", content=patch, headers=headers)
    body = status(r, 422, "Invalid")
    assert body["message"].startswith(' "" is invalid: patch: Invalid value: "{')
    assert body["message"].endswith('": json: cannot unmarshal number 3.0 into Go struct field '
                                    "DeploymentSpec.spec.replicas of type int32")
    assert body["details"]["causes"][0]["field"] == "patch"
    assert '\\"replicas\\":3.0,' in body["message"]
    assert (await served.client.get(f"{DEPLOYMENTS}/d"))["spec"]["replicas"] == 1


@pytest.mark.parametrize(("headers", "patch", "text"), [
    (MERGE, b'{"spec":{"replicas":1e2}}', "1e2"),
    (MERGE, b'{"spec":{"replicas":1.50}}', "1.50"),
    (JSON_PATCH, b'[{"op":"replace","path":"/spec/replicas","value":1E+2}]', "1E+2"),
    (JSON_PATCH, b'[{"op":"add","path":"/spec/template/spec/containers/-","value":{"name":"b","image":"y",'
                 b'"ports":[{"containerPort":8.080e3}]}}]', "8.080e3"),
    (MERGE, b'{"spec":{"template":{"spec":{"containers":[{"name":"a","image":"x","ports":[{"containerPort":'
            b'-0.0}]}]}}}}', "-0.0"),
])
async def test_a_json_or_merge_patchs_refused_float_is_named_as_the_patch_wrote_it(
        served: Served, headers: dict[str, str], patch: bytes, text: str) -> None:
    """Upstream's json-patch library (v4) keeps each value's raw JSON (a ``lazyNode``) through
    a merge patch and a JSON patch, so the patched JSON holds the number as the patch wrote
    it, and the Go decoder's error names that text (``number 1e2``), the 422's invalid value
    shows it too. It said ``number 100.0`` (Python's writing of the float) here."""
    await served.client.create(DEPLOYMENTS, json.loads(deployment()))
    r = await served.http.patch(f"{DEPLOYMENTS}/d", content=patch, headers=headers)
    message = status(r, 422, "Invalid")["message"]
    assert f": json: cannot unmarshal number {text} into Go struct field " in message, message
    assert f'\\":{text}' in message and "100.0" not in message and "8080.0" not in message, message


async def test_a_server_side_apply_takes_a_whole_float_for_an_int(served: Served) -> None:
    """apiserver patch.go ``applyPatcher``: the body is read by apimachinery's
    ``util/yaml.Unmarshal``, sigs.k8s.io/yaml's ``yamlToJSONTarget`` (go-yaml, then
    ``json.Marshal``: ``3.0`` is written ``3``) and a ``UseNumber`` decoding made int64 by
    ``ConvertMapNumbers``: a whole float is an int before structured-merge-diff types it (whose
    ``validateScalar`` takes any number for a ``Numeric`` anyway: 3.5 merges). The merge is
    then converted to the Go type (structuredmerge.go ``Apply``, ``toVersioned``: the scheme's
    ``unstructuredToTyped``), whose converter refuses 3.5 for an int32; upstream's status is
    a 500, a 400 here. Both were 400 ``expected int, got number`` here."""
    config = deployment("3.0")
    r = await served.http.patch(f"{DEPLOYMENTS}/d", params={"fieldManager": "m"}, content=config, headers=APPLY)
    assert r.status_code == 201, r.text
    assert b'"replicas":3,' in r.content
    yaml_config = (b"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n"
                   b"spec: {replicas: 4.0, strategy: {rollingUpdate: {maxSurge: 2.0}}}\n")
    r = await served.http.patch(f"{DEPLOYMENTS}/d", params={"fieldManager": "n", "force": "true"},
                                content=yaml_config, headers=APPLY)
    assert r.status_code == 200, r.text
    assert r.json()["spec"]["replicas"] == 4 and r.json()["spec"]["strategy"]["rollingUpdate"]["maxSurge"] == 2
    for text, why in [(b"3.5", "cannot convert float64 to int32"),
                      (b"1, strategy: {rollingUpdate: {maxSurge: 2.5}}",
                       "json: cannot unmarshal number 2.5 into Go value of type int32")]:
        r = await served.http.patch(f"{DEPLOYMENTS}/d", params={"fieldManager": "n", "force": "true"}, headers=APPLY,
                                    content=b"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n"
                                            b"spec: {replicas: %s}\n" % text)
        assert status(r, 400, "BadRequest")["message"] == (
            "failed to convert new object (/d; apps/v1, Kind=Deployment) to proper version: unable to convert "
            f"unstructured object to apps/v1, Kind=Deployment: {why}")
    assert (await served.client.get(f"{DEPLOYMENTS}/d"))["spec"]["replicas"] == 4


def widget_crd() -> dict[str, Any]:
    spec = {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
            "properties": {"replicas": {"type": "integer"}, "port": {"type": "integer"},
                           "ratio": {"type": "number"}}}
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                     "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                     "versions": [{"name": "v1", "served": True, "storage": True,
                                   "subresources": {"scale": {"specReplicasPath": ".spec.replicas",
                                                              "statusReplicasPath": ".status.replicas"}},
                                   "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": spec}}}}]}}


async def served_widgets(served: Served) -> None:
    await served.client.create(CRDS, widget_crd())
    for _ in range(100):
        if (await served.http.get(WIDGETS)).status_code == 200:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("widgets never served")


async def test_a_custom_resources_whole_floats_are_stored_as_go_writes_them(served: Served) -> None:
    """A custom resource's body is decoded into unstructured (apimachinery util/json:
    ``convertNumber`` gives an int64 when the text parses as one, else a float64), validated
    as a float64 (kube-openapi's type validator takes a whole one for an ``integer``), and
    encoded by Go's JSON encoder, which writes float64 80 as ``80``: stored, served by the
    create itself (etcd3 store.go decodes the stored bytes into its answer) and read back as
    80. Non-whole floats and those past an int64 stay floats. It stored ``80.0`` here."""
    await served_widgets(served)
    body = (b'{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":'
            b'{"port":80.0,"ratio":2.0,"free":[1.0,{"x":1e2}],"half":2.5,"huge":1e300}}')
    r = await served.http.post(WIDGETS, content=body, headers=JSON)
    assert r.status_code == 201, r.text
    want = b'"spec":{"port":80,"ratio":2,"free":[1,{"x":100}],"half":2.5,"huge":1e+300}'
    assert want in r.content
    assert want in (await served.http.get(f"{WIDGETS}/w")).content
    r = await served.http.get(WIDGETS, params={"watch": "1", "resourceVersion": "0", "timeoutSeconds": "1"})
    assert want in r.content.splitlines()[0]
    # each patch's result too, and a dry run's answer
    r = await served.http.patch(f"{WIDGETS}/w", content=b'{"spec":{"port":81.0}}', headers=MERGE)
    assert r.status_code == 200 and b'"port":81,' in r.content, r.text
    r = await served.http.patch(f"{WIDGETS}/w", content=b'[{"op":"replace","path":"/spec/ratio","value":3.0}]',
                                headers=JSON_PATCH)
    assert r.status_code == 200 and b'"ratio":3,' in r.content, r.text
    r = await served.http.post(WIDGETS, params={"dryRun": "All"}, headers=JSON,
                               content=body.replace(b'"name":"w"', b'"name":"x"'))
    assert r.status_code == 201 and want in r.content, r.text
    # the same value sent again as a float changes nothing: no write
    before = (await served.http.get(f"{WIDGETS}/w")).json()["metadata"]["resourceVersion"]
    r = await served.http.patch(f"{WIDGETS}/w", content=b'{"spec":{"port":81.0}}', headers=MERGE)
    assert r.json()["metadata"]["resourceVersion"] == before


async def test_a_custom_resources_whole_float_is_a_float_until_stored(served: Served) -> None:
    """What upstream's strategy sees is the float64 its decoding made: ValidateScaleSpec's
    ``NestedInt64`` refuses ``replicas: 3.0`` (``3 is of the type float64, expected int64``)
    where a server-side apply, whose YAML decoding made it an int64, is taken."""
    await served_widgets(served)
    config = b'{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"replicas":3.0}}'
    r = await served.http.post(WIDGETS, content=config, headers=JSON)
    assert status(r, 422, "Invalid")["details"]["causes"][0]["message"] == \
        "Invalid value: 0: .spec.replicas accessor error: 3 is of the type float64, expected int64"
    r = await served.http.patch(f"{WIDGETS}/w", params={"fieldManager": "m"}, content=config, headers=APPLY)
    assert r.status_code == 201 and b'"replicas":3}' in r.content, r.text
    assert (await served.http.get(f"{WIDGETS}/w/scale")).json()["spec"]["replicas"] == 3


async def test_a_custom_resources_floats_are_written_as_gos_encoder_writes_them(served: Served) -> None:
    """Go's encoding/json (``floatEncoder``) writes a float64 in plain decimal for
    1e-6 <= |x| < 1e21 and with an exponent outside, ``e-07`` cleaned up to ``e-7``: a float
    past an int64 (1e20, read back a float64) is stored and served ``100000000000000000000``.
    orjson changes form at 1e16 and 1e-5: ``1e+20`` and ``1.5e-6`` were stored and served here."""
    await served_widgets(served)
    body = (b'{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":'
            b'{"big":1e20,"near":9.3e18,"tiny":1.5e-6,"micro":1e-6,"huge":1e21,"small":1e-7,"ratio":2.5,'
            b'"text":"1e+20"}}')
    want = (b'"spec":{"big":100000000000000000000,"near":9300000000000000000,"tiny":0.0000015,"micro":0.000001,'
            b'"huge":1e+21,"small":1e-7,"ratio":2.5,"text":"1e+20"}')
    r = await served.http.post(WIDGETS, content=body, headers=JSON)
    assert r.status_code == 201 and want in r.content, r.text
    assert want in (await served.http.get(f"{WIDGETS}/w")).content
    assert want in (await served.http.get(WIDGETS)).content
    r = await served.http.get(WIDGETS, params={"watch": "1", "resourceVersion": "0", "timeoutSeconds": "1"})
    assert want in r.content.splitlines()[0]
    r = await served.http.patch(f"{WIDGETS}/w", content=b'{"spec":{"big":2e20}}', headers=MERGE)
    assert r.status_code == 200 and b'"big":200000000000000000000,' in r.content, r.text
    assert (await served.http.get(f"{WIDGETS}/w")).json()["spec"]["big"] == 2e20
    r = await served.http.delete(f"{WIDGETS}/w")  # (the object deleted is the answer)
    assert r.status_code == 200 and b'"big":200000000000000000000,' in r.content, r.text


async def test_a_custom_resources_integer_past_an_int64_is_a_float64_as_go_decodes_it(served: Served) -> None:
    """apimachinery's util/json gives an int64 only when the number's text parses as one:
    ``9223372036854775808`` (2^63) is a float64, validated so (an ``integer`` field refuses it,
    as it refuses 2^70) and written back in its shortest digits, ``9223372036854776000``; read
    back, and sent again so, it is the same number (no write). 2^64 - 1 is ``18446744073709552000``.
    orjson read 2^63 to 2^64 - 1 as ints, stored as sent."""
    await served_widgets(served)
    body = (b'{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":'
            b'{"big":9223372036854775808,"max":18446744073709551615,"int64":9223372036854775807,'
            b'"list":[9223372036854775809],"text":"9223372036854775808"}}')
    want = (b'"spec":{"big":9223372036854776000,"max":18446744073709552000,"int64":9223372036854775807,'
            b'"list":[9223372036854776000],"text":"9223372036854775808"}')
    r = await served.http.post(WIDGETS, content=body, headers=JSON)
    assert r.status_code == 201 and want in r.content, r.text
    got = await served.http.get(f"{WIDGETS}/w")
    assert want in got.content
    rv = got.json()["metadata"]["resourceVersion"]
    r = await served.http.put(f"{WIDGETS}/w", content=got.content, headers=JSON)  # as read: no write
    assert r.status_code == 200 and r.json()["metadata"]["resourceVersion"] == rv, r.text
    r = await served.http.patch(f"{WIDGETS}/w", content=b'{"spec":{"big":9223372036854775808}}', headers=MERGE)
    assert r.json()["metadata"]["resourceVersion"] == rv, r.text
    r = await served.http.patch(f"{WIDGETS}/w", content=b'[{"op":"add","path":"/spec/added",'
                                b'"value":9223372036854775808}]', headers=JSON_PATCH)
    assert r.status_code == 200 and b'"added":9223372036854776000}' in r.content, r.text
    r = await served.http.patch(f"{WIDGETS}/w", params={"fieldManager": "m"}, headers=APPLY,
                                content=b"apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n"
                                        b"spec: {applied: 9223372036854775808}\n")
    assert r.status_code == 200 and b'"applied":9223372036854776000}' in r.content, r.text
    for field in (b"port", b"replicas"):  # integer fields: a float64 past 2^53 is no integer to them
        r = await served.http.patch(f"{WIDGETS}/w", content=b'{"spec":{"%s":9223372036854775808}}' % field,
                                    headers=MERGE)
        assert status(r, 422, "Invalid")["details"]["causes"][0]["message"] == \
            f'Invalid value: "number": spec.{field.decode()} in body must be of type integer: "number"'
