"""CustomResourceDefinitions: defaults, validation, status (naming and establishing),
the types they serve, and the registry's dynamic part."""

from __future__ import annotations

import copy
from typing import Any

from controlplane.registry import Registry
from controlplane.registry.crd import (
    CLEANUP_FINALIZER,
    established,
    problems,
    served_types,
    set_defaults,
    set_status,
    stored_version_problems,
    terminate,
)
from controlplane.registry.versions import priority

SCHEMA = {"type": "object", "properties": {"spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}


def crd(plural: str = "widgets", group: str = "example.com", kind: str = "Widget", **spec: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {"group": group, "scope": "Namespaced", "names": {"plural": plural, "kind": kind, "shortNames": ["wd"]},
                 "versions": [{"name": "v1", "served": True, "storage": True,
                               "schema": {"openAPIV3Schema": copy.deepcopy(SCHEMA)}}]},
    }
    obj["spec"].update(spec)
    set_defaults(obj)
    return obj


def fields(obj: dict[str, Any], old: dict[str, Any] | None = None) -> dict[str, str]:
    return {c["field"]: c["message"] for c in problems(obj, old)}


def test_defaults() -> None:
    obj = crd()
    assert obj["spec"]["names"]["singular"] == "widget"
    assert obj["spec"]["names"]["listKind"] == "WidgetList"
    assert obj["spec"]["conversion"] == {"strategy": "None"}
    assert problems(obj) == []


def test_the_name_must_be_plural_dot_group() -> None:
    obj = crd()
    obj["metadata"]["name"] = "gadgets.example.com"
    assert fields(obj) == {"metadata.name": 'Invalid value: "gadgets.example.com": must be '
                                            'spec.names.plural+"."+spec.group'}


def test_group_names_and_scope() -> None:
    assert fields(crd(group="example"))["spec.group"] == 'Invalid value: "example": should be a domain with at ' \
                                                         'least one dot'
    assert "metadata.annotations[api-approved.kubernetes.io]" in fields(crd(group="foo.k8s.io"))
    bad = crd(plural="Widgets")
    assert fields(bad)["spec.names.plural"].startswith('Invalid value: "Widgets": a DNS-1035 label')
    assert fields(crd(scope="Global"))["spec.scope"] == \
        'Unsupported value: "Global": supported values: "Cluster", "Namespaced"'
    no_kind = crd()
    del no_kind["spec"]["names"]["kind"]
    assert fields(no_kind)["spec.names.kind"] == "Required value"
    assert fields(crd(), old=crd(scope="Cluster")) == {}  # not established yet
    established_old = crd(scope="Cluster")
    set_status(established_old, None, [])
    assert fields(crd(), old=established_old)["spec.scope"] == 'Invalid value: "Namespaced": field is immutable'
    renamed = crd()
    renamed["spec"]["names"]["kind"] = "Gadget"
    assert fields(renamed, old=established_old)["spec.names.kind"] == 'Invalid value: "Gadget": field is immutable'
    assert "spec.group" in fields(crd(group="other.io"), old=crd())
    assert fields(crd(conversion={"strategy": "Webhook"})) == {
        "spec.conversion.webhookClientConfig": "Required value: required when strategy is set to Webhook",
        "spec.conversion.conversionReviewVersions": "Required value"}
    assert fields(crd(conversion={"strategy": "Auto"}))["spec.conversion.strategy"] == \
        'Unsupported value: "Auto": supported values: "None", "Webhook"'


WEBHOOK: dict[str, Any] = {"clientConfig": {"service": {"name": "lws-webhook-service", "namespace": "lws-system",
                                        "path": "/convert"}},
           "conversionReviewVersions": ["v1"]}


def test_a_conversion_webhook_is_accepted_as_upstream_validates_it() -> None:
    """As LeaderWorkerSet's and kubebuilder projects' CRDs declare it; the port defaults to 443."""
    obj = crd(conversion={"strategy": "Webhook", "webhook": copy.deepcopy(WEBHOOK)})
    assert fields(obj) == {}
    assert obj["spec"]["conversion"]["webhook"]["clientConfig"]["service"]["port"] == 443
    by_url = {"clientConfig": {"url": "https://convert.example.com:9443/convert", "caBundle": "Cg=="},
              "conversionReviewVersions": ["v1beta1", "v1"]}
    assert fields(crd(conversion={"strategy": "Webhook", "webhook": by_url})) == {}


def test_a_conversion_webhook_refused_where_upstream_refuses_it() -> None:
    def webhook_fields(**changes: Any) -> dict[str, str]:
        webhook = {**copy.deepcopy(WEBHOOK), **changes}
        return fields(crd(conversion={"strategy": "Webhook", "webhook": webhook}))

    both = {"url": "https://x.example.com", "service": WEBHOOK["clientConfig"]["service"]}
    assert webhook_fields(clientConfig=both) == {
        "spec.conversion.webhookClientConfig": "Required value: exactly one of url or service is required"}
    assert webhook_fields(clientConfig={"url": "http://x.example.com/c?a=1"}) == {
        "spec.conversion.webhookClientConfig.url":
            'Invalid value: "a=1": query parameters are not permitted in the URL'}
    url = webhook_fields(clientConfig={"url": "http://x.example.com"})
    assert url["spec.conversion.webhookClientConfig.url"] == \
        'Invalid value: "http": \'https\' is the only allowed URL scheme; desired format: https://host[/path]'
    service = {"name": "", "namespace": "ns", "port": 0, "path": "/Convert//x"}
    assert webhook_fields(clientConfig={"service": service}) == {
        "spec.conversion.webhookClientConfig.service.name": "Required value",
        "spec.conversion.webhookClientConfig.service.port":
            "Invalid value: 0: port is not valid: must be between 1 and 65535, inclusive",
        "spec.conversion.webhookClientConfig.service.path":
            'Invalid value: "/Convert//x": segment[1] may not be empty'}
    paths = [c["message"] for c in problems(crd(conversion={"strategy": "Webhook", "webhook": {
        **WEBHOOK, "clientConfig": {"service": service}}})) if c["field"].endswith(".path")]
    assert paths == ['Invalid value: "/Convert//x": segment[0]: a lowercase RFC 1123 subdomain must consist of '
                     "lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric "
                     "character (e.g. 'example.com', regex used for validation is "
                     "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
                     'Invalid value: "/Convert//x": segment[1] may not be empty']
    assert webhook_fields(conversionReviewVersions=["v2", "v2"]) == {
        "spec.conversion.conversionReviewVersions[1]": 'Invalid value: "v2": duplicate version',
        "spec.conversion.conversionReviewVersions": 'Invalid value: ["v2","v2"]: must include at least one of '
                                                    "v1, v1beta1"}
    assert fields(crd(conversion={"strategy": "None", "webhook": WEBHOOK})) == {
        "spec.conversion.webhookClientConfig": "Forbidden: should not be set when strategy is not set to Webhook",
        "spec.conversion.conversionReviewVersions":
            "Forbidden: should not be set when strategy is not set to Webhook"}


def test_exactly_one_storage_version_and_a_schema_each() -> None:
    two = crd(versions=[{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": SCHEMA}},
                        {"name": "v2", "served": True, "storage": True, "schema": {"openAPIV3Schema": SCHEMA}}])
    assert fields(two)["spec.versions"] == 'Invalid value: ["v1","v2"]: must have exactly one version marked as ' \
                                           'storage version'
    no_schema = crd(versions=[{"name": "v1", "served": True, "storage": True}])
    assert fields(no_schema) == {"spec.versions[0].schema.openAPIV3Schema": "Required value: schemas are required"}
    assert fields(crd(versions=[]))["spec.versions"] == "Required value"
    dup = crd(versions=[{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": SCHEMA}},
                        {"name": "v1", "served": True, "storage": False, "schema": {"openAPIV3Schema": SCHEMA}}])
    assert fields(dup)["spec.versions"] == 'Invalid value: ["v1","v1"]: must contain unique version names'


def test_printer_columns_are_validated() -> None:
    obj = crd()
    obj["spec"]["versions"][0]["additionalPrinterColumns"] = [{"name": "X", "type": "text", "jsonPath": ".spec.x"},
                                                              {"name": "Y", "type": "string"}]
    got = fields(obj)  # one version: its columns are the CRD's, as upstream's internal type holds them
    assert got["spec.additionalPrinterColumns[0].type"] == \
        'Invalid value: "text": must be one of boolean,date,integer,number,string'
    assert got["spec.additionalPrinterColumns[1].JSONPath"] == "Required value"


def test_problems_of_what_every_version_shares_are_reported_once_at_the_top_level() -> None:
    scale = {"scale": {"specReplicasPath": "spec.replicas", "labelSelectorPath": ".metadata.labels"}}
    bad_schema = {"type": "object", "properties": {"a": {"type": "string", "pattern": "(?=x)"}}}
    same = {"served": True, "schema": {"openAPIV3Schema": bad_schema}, "subresources": scale}
    obj = crd(versions=[{"name": "v1", "storage": True, **same}, {"name": "v2", "storage": False, **same}])
    assert fields(obj) == {
        "spec.validation.openAPIV3Schema.properties[a].pattern": 'Invalid value: "(?=x)": must be a valid regular '
            "expression, but isn't: error parsing regexp: invalid or unsupported Perl syntax: `(?=`",
        "spec.subresources.scale.specReplicasPath": 'Invalid value: "spec.replicas": must be a simple json path '
            "starting with .",
        "spec.subresources.scale.statusReplicasPath": "Required value",
        "spec.subresources.scale.labelSelectorPath": 'Invalid value: ".metadata.labels": should be a json path '
            "under either .spec or .status",
    }
    obj["spec"]["versions"][1]["subresources"] = {}  # no longer shared: each version's own path
    assert "spec.versions[0].subresources.scale.statusReplicasPath" in fields(obj)


def test_status_accepts_names_and_establishes() -> None:
    obj = crd()
    set_status(obj, None, [])
    status = obj["status"]
    assert status["acceptedNames"] == {"plural": "widgets", "singular": "widget", "shortNames": ["wd"],
                                       "kind": "Widget", "listKind": "WidgetList"}
    assert {c["type"]: c["status"] for c in status["conditions"]} == {"NamesAccepted": "True", "Established": "True"}
    assert status["storedVersions"] == ["v1"]
    assert established(obj)


def test_a_name_another_crd_accepted_is_not_accepted() -> None:
    first = crd()
    set_status(first, None, [])
    second = crd(plural="gizmos", kind="Gizmo")
    second["spec"]["names"]["shortNames"] = ["wd"]
    set_status(second, None, [first])
    names = {c["type"]: c for c in second["status"]["conditions"]}
    assert names["NamesAccepted"]["status"] == "False"
    assert names["NamesAccepted"]["message"] == '"wd" is already in use'
    assert names["Established"]["status"] == "False"
    assert served_types(second) == []
    # each name is accepted on its own: only the short name is held back
    assert second["status"]["acceptedNames"] == {"plural": "gizmos", "singular": "gizmo", "kind": "Gizmo",
                                                 "listKind": "GizmoList"}
    other_group = crd(group="other.io")
    set_status(other_group, None, [first])
    assert established(other_group)  # names are per group


def test_stored_versions_must_still_be_versions() -> None:
    old = crd()
    set_status(old, None, [])
    v2_only = crd(versions=[{"name": "v2", "served": True, "storage": True, "schema": {"openAPIV3Schema": SCHEMA}}])
    set_status(v2_only, old, [old])
    assert v2_only["status"]["storedVersions"] == ["v1", "v2"]
    assert [(c["field"], c["message"]) for c in stored_version_problems(v2_only)] == [
        ("status.storedVersions[0]", 'Invalid value: "v1": must appear in spec.versions')]
    v2_only["status"]["storedVersions"] = ["v2"]  # after a storage migration, through /status
    assert stored_version_problems(v2_only) == []


def test_stored_versions_accumulate() -> None:
    old = crd()
    set_status(old, None, [])
    new = crd(versions=[{"name": "v1", "served": True, "storage": False, "schema": {"openAPIV3Schema": SCHEMA}},
                        {"name": "v2", "served": True, "storage": True, "schema": {"openAPIV3Schema": SCHEMA}}])
    set_status(new, old, [old])
    assert new["status"]["storedVersions"] == ["v1", "v2"]


def test_served_types_one_per_served_version() -> None:
    obj = crd(versions=[{"name": "v1beta1", "served": True, "storage": False, "schema": {"openAPIV3Schema": SCHEMA}},
                        {"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": SCHEMA},
                         "subresources": {"status": {}}},
                        {"name": "v0", "served": False, "storage": False, "schema": {"openAPIV3Schema": SCHEMA}}])
    assert served_types(obj) == []  # not established yet
    set_status(obj, None, [])
    types = served_types(obj)
    assert [(t.version, t.subresources) for t in types] == [("v1beta1", ()), ("v1", ("status",))]
    t = types[1]
    assert (t.group, t.kind, t.plural, t.namespaced, t.short_names) == ("example.com", "Widget", "widgets", True,
                                                                        ("wd",))
    assert t.key("ns", "w") == b"/registry/example.com/widgets/ns/w"
    assert types[0].prefix() == types[1].prefix()  # all versions share the storage
    assert t.custom is not None and t.custom.crd == "widgets.example.com"


def test_deprecated_versions_carry_a_warning() -> None:
    obj = crd(versions=[{"name": v, "served": True, "storage": v == "v1", "deprecated": v != "v1",
                         "schema": {"openAPIV3Schema": SCHEMA}} for v in ("v1alpha1", "v1", "v1beta1")])
    obj["spec"]["versions"][2]["deprecationWarning"] = "v1beta1 goes in 1.40"
    set_status(obj, None, [])
    warnings = {t.version: t.custom.deprecation_warning for t in served_types(obj) if t.custom is not None}
    assert warnings == {"v1alpha1": "example.com/v1alpha1 Widget is deprecated; use example.com/v1 Widget",
                        "v1": "", "v1beta1": "v1beta1 goes in 1.40"}


def test_terminate_adds_the_cleanup_finalizer() -> None:
    obj = crd()
    set_status(obj, None, [])
    terminate(obj)
    assert obj["metadata"]["finalizers"] == [CLEANUP_FINALIZER]
    assert any(c["type"] == "Terminating" and c["status"] == "True" for c in obj["status"]["conditions"])


def test_registry_adds_and_removes_custom_types_in_version_priority() -> None:
    registry = Registry()
    obj = crd(versions=[{"name": v, "served": True, "storage": v == "v1", "schema": {"openAPIV3Schema": SCHEMA}}
                        for v in ("v1alpha1", "v1", "v2beta1")])
    set_status(obj, None, [])
    types = served_types(obj)
    for t in types:
        assert registry.add(t)
    assert registry.groups()["example.com"] == ["v1", "v2beta1", "v1alpha1"]
    assert registry.get("example.com", "v1", "widgets") is types[1]
    for t in types:
        registry.remove(t)
    assert "example.com" not in registry.groups()
    assert registry.get("example.com", "v1", "widgets") is None


def test_a_custom_type_never_replaces_a_builtin() -> None:
    registry = Registry()
    obj = crd(plural="deployments", group="apps", kind="Deployment")
    set_status(obj, None, [])
    t = served_types(obj)[0]
    assert not registry.add(t)
    builtin = registry.get("apps", "v1", "deployments")
    assert builtin is not None and builtin.custom is None
    registry.remove(t)
    assert registry.get("apps", "v1", "deployments") is builtin


def test_version_priority() -> None:
    assert sorted(["v1beta1", "foo", "v1", "v2alpha1", "v2", "v10", "v1beta2", "bar"], key=priority) == \
        ["v10", "v2", "v1", "v1beta2", "v1beta1", "v2alpha1", "bar", "foo"]


def test_a_protected_groups_crd_says_whether_its_api_was_approved() -> None:
    def approval(annotation: str | None) -> tuple[str, str, str]:
        obj = crd(group="x.k8s.io")
        if annotation is not None:
            obj["metadata"]["annotations"] = {"api-approved.kubernetes.io": annotation}
        set_status(obj, None, [])
        (got,) = [c for c in obj["status"]["conditions"] if c["type"] == "KubernetesAPIApprovalPolicyConformant"]
        return got["status"], got["reason"], got["message"]

    assert approval("https://github.com/kubernetes-sigs/gateway-api/pull/4530") == (
        "True", "ApprovedAnnotation", "approved in https://github.com/kubernetes-sigs/gateway-api/pull/4530")
    assert approval("unapproved, experimental") == (
        "False", "UnapprovedAnnotation", 'not approved: "unapproved, experimental"')
    assert approval("yes") == ("False", "InvalidAnnotation", 'protected groups must have approval annotation '
                               '"api-approved.kubernetes.io" with either a URL or a reason starting with '
                               '"unapproved", see https://github.com/kubernetes/enhancements/pull/1111')
    plain = crd()
    set_status(plain, None, [])
    assert [c["type"] for c in plain["status"]["conditions"]] == ["NamesAccepted", "Established"]


def test_a_crd_failing_the_ratcheted_list_checks_may_still_be_updated_as_upstream() -> None:
    # requireMapListKeysMapSetValidation: a new CRD's map-list keys are required or defaulted,
    # but one stored before the check may keep its schema through updates
    keyed = {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["a"],
             "items": {"type": "object", "properties": {"a": {"type": "string"}}}}
    schema = {"type": "object", "properties": {"spec": {"type": "object", "properties": {"x": keyed}}}}
    old = crd()
    old["spec"]["versions"][0]["schema"]["openAPIV3Schema"] = schema
    set_defaults(old)
    field = "spec.validation.openAPIV3Schema.properties[spec].properties[x].items.properties[a].default"
    assert field in fields(old)
    new = copy.deepcopy(old)
    new["metadata"]["labels"] = {"touched": "yes"}
    assert field not in fields(new, old)
    # the unratcheted checks still hold on that update
    keyed["x-kubernetes-list-type"] = "bogus"
    assert "spec.validation.openAPIV3Schema.properties[spec].properties[x].x-kubernetes-list-type" in fields(
        copy.deepcopy(old), old)
