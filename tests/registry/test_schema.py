"""The built-in schemas load and answer the API server's questions."""

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
