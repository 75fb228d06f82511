"""The HTTP side of server-side apply: options, the applied body, the conflict Status."""

from __future__ import annotations

import pytest

from controlplane.api.apply import APPLY_YAML, apply_options, conflict_error, manager_of, parse_config
from controlplane.api.errors import ApiError
from controlplane.registry import BUILTIN
from controlplane.registry.managedfields import Conflict, Conflicts

CONFIGMAPS = next(t for t in BUILTIN if t.plural == "configmaps")


def test_apply_options() -> None:
    opts = apply_options({"fieldManager": "kubectl", "force": "true"}, APPLY_YAML)
    assert opts is not None and opts.manager == "kubectl" and opts.force
    assert apply_options({}, "application/merge-patch+json") is None
    with pytest.raises(ApiError) as err:
        apply_options({}, APPLY_YAML)
    assert err.value.code == 422 and err.value.details is not None
    assert err.value.details["causes"] == [{"reason": "FieldValueRequired", "field": "fieldManager",
                                            "message": "Required value: is required for apply patch"}]
    with pytest.raises(ApiError) as err:
        apply_options({"force": "true"}, "application/merge-patch+json")
    assert err.value.code == 422 and "may not be specified for non-apply patch" in err.value.message
    with pytest.raises(ApiError) as err:
        apply_options({"fieldManager": "m" * 129}, APPLY_YAML)
    assert err.value.code == 422


def test_manager_of_a_request() -> None:
    assert manager_of({"fieldManager": "mine"}, {b"user-agent": b"kubectl/v1.37.0"}) == "mine"
    assert manager_of({}, {b"user-agent": b"kubectl/v1.37.0 (linux/amd64) kubernetes/abc"}) == "kubectl"
    assert manager_of({}, {}) == ""


def test_parse_config_reads_yaml_as_kubernetes_does() -> None:
    body = b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {when: 2024-01-01, 1: one}\n"
    config = parse_config(CONFIGMAPS, "default", "c", body)
    assert config["data"] == {"when": "2024-01-01", "1": "one"}
    assert parse_config(CONFIGMAPS, "default", "c", b'{"apiVersion":"v1","kind":"ConfigMap"}')["metadata"] == {}


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


def test_conflict_status() -> None:
    err = conflict_error(Conflicts([Conflict('"kubectl-edit" using apps/v1', ".spec.replicas")]))
    status = err.status()
    assert status["code"] == 409 and status["reason"] == "Conflict"
    assert status["message"] == ('Apply failed with 1 conflict: conflict with "kubectl-edit" using apps/v1: '
                                 ".spec.replicas")
    assert status["details"]["causes"] == [{"type": "FieldManagerConflict", "field": ".spec.replicas",
                                            "message": 'conflict with "kubectl-edit" using apps/v1'}]
