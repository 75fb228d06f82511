"""The built-in schemas load and answer the API server's questions."""

import importlib.resources

import orjson

from controlplane.registry import schema
from controlplane.registry.types import BUILTIN


def test_every_builtin_type_has_a_schema() -> None:
    defs = schema.definitions()
    missing = [t.kind for t in BUILTIN if defs.for_kind(t.group, t.version, t.kind) is None]
    assert missing == []


def test_refs_resolve_and_patch_metadata_is_kept() -> None:
    defs = schema.definitions()
    pod = defs.for_kind("", "v1", "Pod")
    assert pod is not None
    spec = defs.property(pod, "spec")
    assert spec is not None and schema.type_of(spec) == "object"
    containers = defs.resolve(spec)["properties"]["containers"]
    assert schema.patch_merge_key(containers) == "name"
    assert schema.patch_strategy(containers) == ("merge",)
    container = defs.items(containers)
    assert container is not None and "image" in container["properties"]
    labels = defs.property(defs.property(pod, "metadata") or {}, "labels")
    assert labels is not None and schema.type_of(labels) == "object"
    assert schema.type_of(defs.property(labels, "any-key") or {}) == "string"


def test_enum_fields_carry_upstreams_values_and_description() -> None:
    """What a running kube-apiserver publishes for a ``+enum`` field (kube-openapi's
    generators/enum.go): the sorted values, and the description's last paragraph."""
    props = schema.definitions().defs["io.k8s.api.core.v1.PodSpec"]["properties"]
    policy = props["restartPolicy"]
    assert policy["enum"] == ["Always", "Never", "OnFailure"]
    assert policy["description"].startswith("Restart policy for all containers within the pod.")
    assert policy["description"].endswith(
        "#restart-policy\n\nPossible enum values:\n - `\"Always\"`\n - `\"Never\"`\n - `\"OnFailure\"`")
    pull = schema.definitions().defs["io.k8s.api.core.v1.Container"]["properties"]["imagePullPolicy"]
    assert pull["enum"] == ["Always", "IfNotPresent", "Never"]
    assert ("\n\nPossible enum values:\n - `\"Always\"` means that kubelet always attempts to pull the latest "
            "image. Container will fail If the pull fails.\n - `\"IfNotPresent\"` means") in pull["description"]
    # an enum nested in a list or a map: the items' or values' schema has it
    service = schema.definitions().defs["io.k8s.api.core.v1.ServiceSpec"]["properties"]
    assert service["ipFamilies"]["items"]["enum"] == ["", "IPv4", "IPv6"]
    assert service["type"]["enum"] == ["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"]
    pvc = schema.definitions().defs["io.k8s.api.core.v1.PersistentVolumeClaimStatus"]["properties"]
    assert "NodeResizePending" in pvc["allocatedResourceStatuses"]["additionalProperties"]["enum"]
    # apiVersion and kind keep only the definitions' own enum (dropped from the documents)
    assert props.get("enum") is None


def test_every_enum_entry_lands_on_a_property() -> None:
    """``enums.json`` names only properties the definitions have, so no entry is silently lost."""
    table = orjson.loads(importlib.resources.files("controlplane.registry").joinpath("enums.json").read_bytes())
    defs = schema.definitions().defs
    for name, fields in table.items():
        for prop, entry in fields.items():
            node = defs[name]["properties"][prop]
            if "enum" in entry:
                assert node["enum"] == entry["enum"], (name, prop)
            for nested in ("items", "additionalProperties"):
                if nested in entry:
                    assert node[nested]["enum"] == entry[nested], (name, prop)
            if "description" in entry:
                assert node["description"].endswith(entry["description"]), (name, prop)
                assert node["description"].count(schema.ENUM_VALUES_HEADER) == 1, (name, prop)


def test_description_without_enum_is_the_go_comment_alone() -> None:
    """Table column descriptions are the types' SwaggerDoc(): no enum part."""
    node = schema.definitions().defs["io.k8s.api.core.v1.ServiceSpec"]["properties"]["type"]
    plain = schema.description_without_enum(node)
    assert plain.startswith("type determines how the Service is exposed.") and "Possible enum" not in plain
    assert node["description"].startswith(plain + "\n\nPossible enum values:\n")
    # a Go comment ending in a blank line leaves upstream one more newline before the enum part
    taint = schema.definitions().defs["io.k8s.api.resource.v1.DeviceTaint"]["properties"]["effect"]
    assert "Consumers must treat unknown effects like None.\n\n\nPossible enum values:" in taint["description"]
    assert schema.description_without_enum(taint).endswith("like None.")
    assert schema.description_without_enum({"description": "no enum"}) == "no enum"
    assert schema.description_without_enum({}) == ""
