"""Protobuf request bodies (controlplane/api/protobuf): the decoder on hand-built wire bytes,
the schema generator on small sources, and the API's answers (kubectl itself: tests/e2e)."""

from __future__ import annotations

import struct
from pathlib import Path

import orjson
import pytest

from controlplane.api import protobuf
from controlplane.api.protobuf import generate
from controlplane.api.protobuf.schema import MESSAGES, PACKAGES
from controlplane.client import ApiError, Client
from controlplane.config import Config


# -- the wire, written by hand -----------------------------------------------------
def varint(n: int) -> bytes:
    n &= 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def num(field: int, n: int) -> bytes:
    return varint(field << 3) + varint(n)


def msg(field: int, *parts: bytes) -> bytes:
    body = b"".join(parts)
    return varint(field << 3 | 2) + varint(len(body)) + body


def text(field: int, s: str | bytes) -> bytes:
    return msg(field, s.encode() if isinstance(s, str) else s)


def envelope(api_version: str, kind: str, *obj: bytes) -> bytes:
    return protobuf.MAGIC + msg(1, text(1, api_version), text(2, kind)) + msg(2, *obj)


def entry(field: int, key: str, value: bytes) -> bytes:
    """A map entry: key as field 1, the value's bytes (field 2) as given."""
    return msg(field, text(1, key), value)


def meta(name: str, *more: bytes) -> bytes:
    # as Go writes a plain field: always, zero values included (generateName "", generation 0)
    return msg(1, text(1, name), text(2, ""), text(3, ""), num(7, 0), msg(8), *more)


# -- decoding ----------------------------------------------------------------------------
def test_a_configmap_with_labels_and_binary_data() -> None:
    body = envelope("v1", "ConfigMap",
                    meta("cm", entry(11, "app", text(2, "web")), entry(11, "empty", text(2, ""))),
                    entry(2, "a", text(2, "b")), entry(3, "bin", text(2, b"\x00\xff")))
    assert protobuf.decode(body) == {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "cm", "labels": {"app": "web", "empty": ""}},
        "data": {"a": "b"}, "binaryData": {"bin": "AP8="}}


def test_a_storage_version_migration_and_a_cluster_trust_bundle() -> None:
    # storagemigration.k8s.io/v1 and certificates.k8s.io/v1 (GA in 1.37): the GroupResource of
    # the spec, the trust bundle; a plain string's zero ("" group: the core group) is left out
    svm = envelope("storagemigration.k8s.io/v1", "StorageVersionMigration", meta("m"),
                   msg(2, msg(1, text(1, ""), text(2, "secrets"))), msg(3, text(2, "")))
    assert protobuf.decode(svm) == {
        "apiVersion": "storagemigration.k8s.io/v1", "kind": "StorageVersionMigration", "metadata": {"name": "m"},
        "spec": {"resource": {"resource": "secrets"}}, "status": {}}
    ctb = envelope("certificates.k8s.io/v1", "ClusterTrustBundle", meta("example.com:foo:a"),
                   msg(2, text(1, "example.com/foo"), text(2, "PEM")))
    assert protobuf.decode(ctb)["spec"] == {"signerName": "example.com/foo", "trustBundle": "PEM"}


def test_a_plain_zero_is_unset_and_a_pointer_zero_is_kept() -> None:
    # DeploymentSpec: replicas (1) is *int32, minReadySeconds (5) and paused (7) are plain
    body = envelope("apps/v1", "Deployment", meta("d"), msg(2, num(1, 0), num(5, 0), num(7, 0), msg(4)))
    spec = protobuf.decode(body)["spec"]
    assert spec == {"replicas": 0, "strategy": {}}


def test_negative_integers_repeated_and_packed() -> None:
    # ContainerPort.hostPort (plain int32) negative: 10-byte two's complement varint
    port = msg(6, text(1, ""), num(3, 80), num(2, -1))
    pod = envelope("v1", "Pod", meta("p"), msg(2, msg(2, text(1, "c"), text(2, "img"), port)))
    container = protobuf.decode(pod)["spec"]["containers"][0]
    assert container == {"name": "c", "image": "img", "ports": [{"containerPort": 80, "hostPort": -1}]}
    # Capabilities.add is repeated string; SupplementalGroups (PodSecurityContext, 4) repeated int64, packed
    packed = msg(4, varint(1000) + varint(2000))
    pod = envelope("v1", "Pod", meta("p"), msg(2, msg(14, packed, num(4, 3000))))
    assert protobuf.decode(pod)["spec"]["securityContext"] == {"supplementalGroups": [1000, 2000, 3000]}


def test_special_forms() -> None:
    quantity = entry(2, "cpu", msg(2, text(1, "250m")))
    resources = msg(8, quantity)  # Container.resources.requests
    ttl = num(1, 5400 * 10**9)  # a Duration of 1.5 h
    pod = envelope("v1", "Pod",
                   meta("p", msg(9, num(1, 1_764_547_200))),  # deletionTimestamp, a *Time
                   msg(2, msg(2, text(1, "c"), resources,
                              msg(11, msg(1, msg(2, text(1, "/healthz"), msg(2, num(1, 1), text(3, "http"))))))))
    obj = protobuf.decode(pod)
    assert obj["metadata"] == {"name": "p", "deletionTimestamp": "2025-12-01T00:00:00Z"}
    container = obj["spec"]["containers"][0]
    assert container["resources"] == {"requests": {"cpu": "250m"}}
    assert container["readinessProbe"] == {"httpGet": {"path": "/healthz", "port": "http"}}
    assert protobuf._go_duration(5400 * 10**9) == "1h30m0s"
    assert [protobuf._go_duration(n) for n in (0, 1_500_000_000, 90 * 10**9, 2_500_000, -3)] == [
        "0s", "1.5s", "1m30s", "2.5ms", "-3ns"]
    assert ttl  # (Duration fields appear in few built-in types; the form is checked above)
    # a MicroTime (events.k8s.io/v1 Event.eventTime, field 2), with microseconds
    event = envelope("events.k8s.io/v1", "Event", meta("e"), msg(2, num(1, 1_764_547_200), num(2, 123_456_789)))
    assert protobuf.decode(event)["eventTime"] == "2025-12-01T00:00:00.123456Z"


def test_embedded_inline_and_list_aliases() -> None:
    # EphemeralContainer embeds EphemeralContainerCommon inline (field 1)
    ephemeral = msg(34, msg(1, text(1, "debug"), text(2, "busybox")), text(2, "c"))
    pod = envelope("v1", "Pod", meta("p"), msg(2, ephemeral))
    assert protobuf.decode(pod)["spec"]["ephemeralContainers"] == [
        {"name": "debug", "image": "busybox", "targetContainerName": "c"}]
    # SubjectAccessReviewSpec.extra is map<string, ExtraValue>, an ExtraValue a list of strings
    review = envelope("authorization.k8s.io/v1", "SubjectAccessReview", meta("r"),
                      msg(2, text(3, "bob"), entry(5, "scopes", msg(2, text(1, "a"), text(1, "b")))))
    assert protobuf.decode(review)["spec"] == {"user": "bob", "extra": {"scopes": ["a", "b"]}}


def test_unknown_fields_are_skipped_as_upstream() -> None:
    body = envelope("v1", "Namespace", meta("ns", num(999, 7), msg(998, b"junk")),
                    varint(997 << 3 | 1) + b"\x00" * 8, varint(996 << 3 | 5) + b"\x00" * 4)
    assert protobuf.decode(body) == {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns"}}


def test_options_kinds_of_any_group_version_are_meta_v1() -> None:
    options = envelope("apps/v1", "DeleteOptions", num(1, 0), text(4, "Foreground"), text(5, "All"))
    assert protobuf.decode(options) == {"apiVersion": "apps/v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0,
                                        "propagationPolicy": "Foreground", "dryRun": ["All"]}


@pytest.mark.parametrize(("body", "message"), [
    (b'{"kind": "Pod"}', "prefix"),
    (protobuf.MAGIC + b"\x0a\x05\x0a", "past the end"),
    (envelope("v1", "Pod", b"\x0a\x80"), "varint"),
    (envelope("v1", "Pod", msg(1, text(1, b"\xff\xfe"))), "UTF-8"),
    (envelope("v1", "Pod", msg(1, num(1, 5))), "wire type"),
    (envelope("v1", "Pod", varint(1 << 3 | 3)), "wire type 3"),
    (protobuf.MAGIC + msg(1, text(1, "v1"), text(2, "Pod")) + text(3, "gzip"), "content encoding"),
])
def test_bad_bodies_are_errors(body: bytes, message: str) -> None:
    with pytest.raises(protobuf.ProtobufError, match=message):
        protobuf.decode(body)


def test_kinds_without_a_protobuf_form() -> None:
    for api_version, kind in (("apiextensions.k8s.io/v1", "CustomResourceDefinition"), ("v1", "NoSuchKind"),
                              ("", "")):
        with pytest.raises(protobuf.UnknownKind):
            protobuf.decode(envelope(api_version, kind))


def test_deep_nesting_is_refused() -> None:
    raw = envelope("v1", "Namespace", meta("x"))
    for _ in range(protobuf._MAX_DEPTH + 2):  # a ControllerRevision whose data holds a ControllerRevision ...
        raw = envelope("apps/v1", "ControllerRevision", meta("r"), msg(2, text(1, raw)))
    with pytest.raises(protobuf.ProtobufError, match="nested too deeply"):
        protobuf.decode(raw)


def test_a_float_field() -> None:
    assert protobuf._Reader(struct.pack("<d", 0.25), 0, 8, 0).scalar("d", 1) == 0.25


# -- the schema and its generator -----------------------------------------------------------
def test_the_schema_covers_the_served_built_in_groups() -> None:
    from controlplane.registry import BUILTIN

    # metrics.k8s.io is only read (answers are JSON), so no request body of it is ever decoded;
    # nodes.controlplane.dev is this emulator's own, with no protobuf form (a body of it is 415);
    # apiregistration.k8s.io's types are kube-aggregator's, as apiextensions' are its server's, not k8s.io/api's
    served = {t.api_version for t in BUILTIN
              if t.group not in ("apiextensions.k8s.io", "apiregistration.k8s.io", "metrics.k8s.io",
                                 "nodes.controlplane.dev")}
    assert served <= set(PACKAGES)
    for t in BUILTIN:
        if t.api_version in PACKAGES and not t.kind.endswith("Review"):
            assert f"{PACKAGES[t.api_version]}.{t.kind}" in MESSAGES, t.kind


def test_the_generator_joins_the_proto_and_the_go_types(tmp_path: Path) -> None:
    package = tmp_path / "api" / "widgets" / "v1"
    package.mkdir(parents=True)
    (package / "generated.proto").write_text(
        'syntax = "proto2";\npackage k8s.io.api.widgets.v1;\n'
        "message Widget {\n"
        "  optional .k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta metadata = 1;\n"
        "  optional int32 replicas = 2;\n"
        "  repeated string tags = 3;\n"
        "  map<string, string> sizes = 4;\n"
        "  optional Common common = 5;\n"
        "}\n")
    (package / "types.go").write_text(
        "type Widget struct {\n"
        '\tmetav1.ObjectMeta `json:"metadata,omitempty" protobuf:"bytes,1,opt,name=metadata"`\n'
        '\tReplicas *int32 `json:"count,omitempty" protobuf:"varint,2,opt,name=replicas"`\n'
        '\tTags []string `json:"tags" protobuf:"bytes,3,rep,name=tags"`\n'
        '\tSizes map[string]string `json:"sizes,omitempty" protobuf:"bytes,4,rep,name=sizes"`\n'
        '\tCommon `json:",inline" protobuf:"bytes,5,opt"`\n'
        "}\n")
    _, protos = generate.parse_proto((package / "generated.proto").read_text())
    go = generate.parse_go((package / "types.go").read_text())
    assert protos["k8s.io.api.widgets.v1.Widget"][3] == (4, "sizes", ("map", "s", "s"), False)
    assert go["Widget"]["replicas"] == ("count", True) and go["Widget"]["tags"] == ("tags", False)
    assert generate._embedded("common", "k8s.io.api.widgets.v1.Common") == ("", False)


# -- through the API -------------------------------------------------------------------------
async def test_the_api_decodes_protobuf_and_answers_415_for_custom_resources(tmp_path: Path) -> None:
    from controlplane.api.app import create_app

    app = create_app(Config(data_dir=tmp_path, tls=False, scheduler=False))
    async with app.router.lifespan_context(app):
        c = Client.in_process(app.state.front)
        pb = protobuf.CONTENT_TYPE
        body = envelope("v1", "ConfigMap", meta("from-pb"), entry(2, "k", text(2, "v")))
        created = await c.request("POST", "/api/v1/namespaces/default/configmaps", body, pb)
        assert created["data"] == {"k": "v"} and created["metadata"]["resourceVersion"]
        update = envelope("v1", "ConfigMap", meta("from-pb", text(6, created["metadata"]["resourceVersion"])),
                          entry(2, "k", text(2, "w")))
        updated = await c.request("PUT", "/api/v1/namespaces/default/configmaps/from-pb", update, pb)
        assert updated["data"] == {"k": "w"}
        with pytest.raises(ApiError) as e:  # a truncated body: 400, nothing stored
            await c.request("POST", "/api/v1/namespaces/default/configmaps", body[:-3], pb)
        assert (e.value.code, e.value.reason) == (400, "BadRequest")
        with pytest.raises(ApiError) as e:  # the wrong kind for the path: as with JSON
            await c.request("POST", "/api/v1/namespaces/default/configmaps", envelope("v1", "Secret", meta("s")),
                            pb)
        assert e.value.code == 400
        crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
               "metadata": {"name": "widgets.example.com"},
               "spec": {"group": "example.com", "names": {"plural": "widgets", "kind": "Widget"},
                        "scope": "Namespaced", "versions": [{"name": "v1", "served": True, "storage": True,
                                                             "schema": {"openAPIV3Schema": {"type": "object"}}}]}}
        await c.create("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
        with pytest.raises(ApiError) as e:
            await c.request("POST", "/apis/example.com/v1/namespaces/default/widgets",
                            envelope("example.com/v1", "Widget", meta("w")), pb)
        assert (e.value.code, e.value.reason) == (415, "UnsupportedMediaType")
        deleted = await c.request("DELETE", "/api/v1/namespaces/default/configmaps/from-pb",
                                  envelope("v1", "DeleteOptions", text(4, "Background")), pb)
        assert deleted["status"] == "Success"
        assert orjson.loads(protobuf.as_json(envelope("v1", "Namespace", meta("n")))) == {
            "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n"}}


async def test_an_envelope_is_typed_as_upstreams_decoder_types_it(client: Client) -> None:
    pb, cms = protobuf.CONTENT_TYPE, "/api/v1/namespaces/default/configmaps"
    # no apiVersion or kind: the endpoint's, as copyKindDefaults (it was 415)
    untyped = protobuf.MAGIC + msg(2, meta("untyped"), entry(2, "k", text(2, "v")))
    created = await client.request("POST", cms, untyped, pb)
    assert (created["kind"], created["data"]) == ("ConfigMap", {"k": "v"})
    # a kind the scheme does not have: 400 as for a JSON body naming it, nothing stored (it was 415)
    for api_version, kind in (("v1", "Frob"), ("nope/v9", "ConfigMap")):
        with pytest.raises(ApiError) as e:
            await client.request("POST", cms, envelope(api_version, kind, meta("x")), pb)
        assert (e.value.code, e.value.reason) == (400, "BadRequest")
        assert e.value.message.startswith(f'{kind} in version "{api_version.rpartition("/")[2]}" cannot be '
                                          f'handled as a ConfigMap: no kind "{kind}" is registered')
    # a message of the schema that is no kind, a wrapper of a list (ExtraValue): the same 400 (it was a 500)
    with pytest.raises(ApiError) as e:
        await client.request("POST", cms, envelope("certificates.k8s.io/v1", "ExtraValue", text(1, "a")), pb)
    assert (e.value.code, e.value.reason) == (400, "BadRequest")
    assert e.value.message.startswith('ExtraValue in version "v1" cannot be handled as a ConfigMap: no kind '
                                      '"ExtraValue" is registered')
    with pytest.raises(ApiError) as e:  # a subresource's body is its own type: one with no form here stays 415
        await client.request("POST", "/api/v1/namespaces/default/pods/p/eviction",
                             envelope("policy/v1beta1", "Eviction", meta("p")), pb)
    assert e.value.code == 415
    with pytest.raises(ApiError) as e:  # the prefix alone: upstream's "empty body"
        await client.request("POST", cms, protobuf.MAGIC, pb)
    assert e.value.code == 400 and e.value.message.endswith("empty body")
    assert [i["metadata"]["name"] for i in (await client.get(cms))["items"]] == ["untyped"]
    # a DELETE's untyped envelope is DeleteOptions, as its decoder defaults it (it was the URL's kind)
    deleted = await client.request("DELETE", f"{cms}/untyped", protobuf.MAGIC + msg(2, text(4, "Orphan")), pb)
    assert deleted["status"] == "Success"
