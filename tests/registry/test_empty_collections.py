"""Empty lists and maps of the built-in kinds, as kube-apiserver reads them back from its
protobuf storage (``registry/validation.py``: ``Findings.emptied``, ``empty_collections``):
left out where the Go field is ``omitempty``, null where it is not (``_NIL_WRITTEN``); and the
zero values of ``omitempty`` scalars, which Go leaves out (``Shape.omit_zero``)."""

from __future__ import annotations

import copy
from typing import Any

from controlplane.registry.schema import definitions, type_of
from controlplane.registry.validation import (
    _NIL_WRITTEN,
    _omit_zero,
    empty_collections,
    fill_zeros,
    same_once_stored,
    shape_at,
    shape_of,
    stored_form,
)


def _decoded(group: str, version: str, kind: str, obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` as the write path leaves it: the walk's zeros filled, its empties settled."""
    shape = shape_of(group, version, kind)
    assert shape is not None
    found = shape.check(obj)
    assert not found.mismatched and not found.problems
    fill_zeros(found.unfilled)
    empty_collections(found.emptied)
    return obj


def test_omitempty_lists_and_maps_sent_empty_are_left_out() -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {}, "annotations": {}},
           "spec": {"containers": [{"name": "c", "image": "x", "args": [], "command": [], "env": [], "ports": [],
                                    "volumeMounts": [], "resources": {"limits": {}, "requests": {}}}],
                    "tolerations": [], "volumes": [], "nodeSelector": {}, "initContainers": [],
                    "imagePullSecrets": []}}
    assert _decoded("", "v1", "Pod", pod) == {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "x", "resources": {}}]}}


def test_empty_structs_are_values_and_kept() -> None:
    spec = {"containers": [{"name": "c", "image": "x", "resources": {}, "securityContext": {}}],
            "securityContext": {}, "volumes": [{"name": "v", "emptyDir": {}}], "affinity": {}}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": copy.deepcopy(spec)}
    assert _decoded("", "v1", "Pod", pod)["spec"] == spec


def test_lists_without_omitempty_read_back_null_empty_absent_or_null() -> None:
    empty = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "r"}, "rules": []}
    absent = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "r"}}
    null = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "r"}, "rules": None}
    for role in (empty, absent, null):
        assert _decoded("rbac.authorization.k8s.io", "v1", "Role", role)["rules"] is None
    slice_ = {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "metadata": {"name": "s"},
              "addressType": "IPv4", "endpoints": [{"addresses": ["10.0.0.1"], "conditions": {}}]}
    got = _decoded("discovery.k8s.io", "v1", "EndpointSlice", slice_)
    assert got["ports"] is None and got["endpoints"] == [{"addresses": ["10.0.0.1"], "conditions": {}}]


def test_nested_fields_without_omitempty_only_in_structs_that_are_there() -> None:
    """A projected volume's ``sources: []`` is null; a pod without a projected volume gets none."""
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
           "spec": {"containers": [{"name": "c", "image": "x"}],
                    "volumes": [{"name": "v", "projected": {"sources": []}}, {"name": "w", "emptyDir": {}}]}}
    assert _decoded("", "v1", "Pod", pod)["spec"]["volumes"] == [
        {"name": "v", "projected": {"sources": None}}, {"name": "w", "emptyDir": {}}]


def test_a_template_is_decoded_as_a_pod_is() -> None:
    deploy = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
              "spec": {"selector": {"matchLabels": {"app": "d"}, "matchExpressions": []},
                       "template": {"metadata": {"labels": {"app": "d"}, "annotations": {}},
                                    "spec": {"containers": [{"name": "c", "image": "x", "args": []}],
                                             "tolerations": []}}}}
    assert _decoded("apps", "v1", "Deployment", deploy)["spec"] == {
        "selector": {"matchLabels": {"app": "d"}},
        "template": {"metadata": {"labels": {"app": "d"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}}}


def test_items_of_a_list_and_values_of_a_map_are_not_fields() -> None:
    """Only struct fields are omitted: an empty string in a list, an empty value of a map stay."""
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "labels": {"a": ""}}, "data": {"k": ""}}
    assert _decoded("", "v1", "ConfigMap", copy.deepcopy(cm)) == cm


def test_an_empty_value_of_the_wrong_type_is_still_a_mismatch() -> None:
    shape = shape_of("", "v1", "Pod")
    assert shape is not None
    found = shape.check({"metadata": {"labels": []}, "spec": {"tolerations": {}}})
    assert found.mismatched == [("metadata.labels", "array", "object"), ("spec.tolerations", "object", "array")]
    assert found.emptied == []


def test_every_field_of_the_table_is_a_list_or_map_of_its_definition() -> None:
    defs = definitions()
    for name, fields in _NIL_WRITTEN.items():
        node = defs.defs.get(name)
        assert node is not None, name
        for f in fields:
            prop = node.get("properties", {}).get(f)
            assert prop is not None, (name, f)
            target = defs.resolve(prop) if "$ref" in prop else prop
            assert type_of(target) == "array" or "additionalProperties" in target, (name, f)


def test_zero_scalars_of_omitempty_fields_are_left_out_and_pointers_zeros_kept() -> None:
    spec = {"containers": [{"name": "c", "image": "x", "workingDir": "", "tty": False}],
            "hostname": "", "hostNetwork": False, "priorityClassName": "", "nodeName": "n",
            "automountServiceAccountToken": False, "terminationGracePeriodSeconds": 0, "priority": 0}
    status = {"conditions": [{"type": "Ready", "status": "False", "reason": "", "message": "",
                              "observedGeneration": 0}],
              "containerStatuses": [{"name": "c", "ready": False, "restartCount": 0, "image": "", "imageID": ""}]}
    pod = _decoded("", "v1", "Pod", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                                     "spec": spec, "status": status})
    assert pod["spec"] == {"containers": [{"name": "c", "image": "x"}], "nodeName": "n",
                           "automountServiceAccountToken": False, "terminationGracePeriodSeconds": 0, "priority": 0}
    assert pod["status"]["conditions"] == [{"type": "Ready", "status": "False", "lastProbeTime": None,
                                            "lastTransitionTime": None}]
    # no omitempty: written whatever their value
    assert pod["status"]["containerStatuses"] == [{"name": "c", "ready": False, "restartCount": 0, "image": "",
                                                   "imageID": ""}]
    deployment = _decoded("apps", "v1", "Deployment", {"spec": {
        "replicas": 0, "minReadySeconds": 0, "paused": False, "selector": {},
        "template": {"spec": {"containers": [], "hostNetwork": False}}}})
    assert deployment["spec"] == {"replicas": 0, "selector": {}, "template": {"spec": {"containers": None}}}


def test_a_zero_of_the_wrong_type_is_still_a_mismatch() -> None:
    shape = shape_of("", "v1", "Pod")
    assert shape is not None
    found = shape.check({"spec": {"hostNetwork": 0, "hostname": False}})
    assert found.mismatched == [("spec.hostNetwork", "number", "bool"), ("spec.hostname", "bool", "string")]
    assert found.emptied == []


def test_every_field_of_the_zero_scalars_table_is_a_scalar_of_its_definition() -> None:
    defs = definitions()
    table = _omit_zero()
    assert "hostNetwork" in table["io.k8s.api.core.v1.PodSpec"]
    assert "automountServiceAccountToken" not in table["io.k8s.api.core.v1.PodSpec"]  # a pointer
    assert "replicas" not in table["io.k8s.api.apps.v1.DeploymentSpec"]
    for name, fields in table.items():
        node = defs.defs.get(name)
        assert node is not None, name
        for f in fields:
            prop = node.get("properties", {}).get(f)
            assert prop is not None, (name, f)
            assert type_of(prop) in ("string", "integer", "number", "boolean"), (name, f)
            assert prop.get("format") not in ("date-time", "byte", "int-or-string"), (name, f)


def test_a_zero_omitempty_scalar_and_none_are_the_same_go_value() -> None:
    spec = shape_at(shape_of("", "v1", "Pod"), "spec")
    stored = {"containers": [{"name": "c", "image": "x", "workingDir": ""}], "hostname": "", "hostNetwork": False}
    sent = {"containers": [{"name": "c", "image": "x"}]}
    assert same_once_stored(sent, stored, spec)
    assert not same_once_stored({**sent, "hostname": "h"}, stored, spec)
    # a pointer's zero is a value
    assert not same_once_stored({**sent, "terminationGracePeriodSeconds": 0}, sent, spec)


def test_object_metas_zero_scalars_are_left_out_and_its_pointers_zeros_kept() -> None:
    """ObjectMeta's strings and ``generation`` are ``omitempty`` (apimachinery's ``metav1``), in a
    template's metadata too, and so are a managedFields entry's; an owner reference's strings are
    always written and its ``controller`` is a pointer."""
    zeros = {"name": "", "generateName": "", "namespace": "", "selfLink": "", "uid": "", "resourceVersion": "",
             "generation": 0}
    deployment = _decoded("apps", "v1", "Deployment", {"metadata": {
        **zeros, "deletionGracePeriodSeconds": 0,
        "ownerReferences": [{"apiVersion": "v1", "kind": "X", "name": "o", "uid": "u", "controller": False,
                             "blockOwnerDeletion": False}],
        "managedFields": [{"manager": "m", "operation": "Update", "apiVersion": "apps/v1", "fieldsType": "FieldsV1",
                           "fieldsV1": {}, "subresource": ""}]},
        "spec": {"selector": {}, "template": {"metadata": {**zeros, "labels": {"a": "b"}},
                                               "spec": {"containers": [{"name": "c", "image": "i"}]}}}})
    assert deployment["metadata"] == {
        "deletionGracePeriodSeconds": 0,
        "ownerReferences": [{"apiVersion": "v1", "kind": "X", "name": "o", "uid": "u", "controller": False,
                             "blockOwnerDeletion": False}],
        "managedFields": [{"manager": "m", "operation": "Update", "apiVersion": "apps/v1", "fieldsType": "FieldsV1",
                           "fieldsV1": {}}]}
    assert deployment["spec"]["template"]["metadata"] == {"labels": {"a": "b"}}


def test_an_empty_list_as_a_maps_value_is_null_once_stored() -> None:
    """A CSR's ``spec.extra`` is a ``map[string]ExtraValue`` (a ``[]string``): protobuf storage
    decodes an empty one as nil, written null. Decoded (what admission sees) it is still ``[]``,
    as Go's JSON encoder writes an empty non-nil slice; a list that is not empty, and a value of
    the wrong type, are what they were."""
    shape = shape_of("certificates.k8s.io", "v1", "CertificateSigningRequest")
    assert shape is not None
    csr: dict[str, Any] = {"spec": {"extra": {"a": [], "b": ["x"]}}}
    found = shape.check(csr)
    empty_collections(found.emptied, decoded=True)
    assert csr["spec"]["extra"] == {"a": [], "b": ["x"]}
    sent = csr["spec"]["extra"]
    stored_form(shape, csr, None, False)
    assert csr["spec"]["extra"] == {"a": None, "b": ["x"]}
    assert sent == {"a": [], "b": ["x"]}  # (a copy was made: the decoded map may be shared)
    changed: dict[str, Any] = {"spec": {"extra": {"a": []}}}  # a mutation's result, walked whole
    stored_form(shape, changed, None, True)
    assert changed["spec"]["extra"] == {"a": None}
    assert shape.check({"spec": {"extra": {"a": {}}}}).mismatched == [("spec.extra.a", "object", "array")]
    # an update's [] is the stored null
    spec = shape_at(shape, "spec")
    assert same_once_stored({"extra": {"a": []}}, {"extra": {"a": None}}, spec)
