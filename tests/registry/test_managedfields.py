"""managedFields on writes, and server-side apply: ownership, pruning, conflicts, force."""

from __future__ import annotations

import base64
import copy
from typing import Any

import pytest

from controlplane.registry import BUILTIN, ResourceType
from controlplane.registry import managedfields as mf
from controlplane.registry.fieldpath import paths

DEPLOYMENTS = next(t for t in BUILTIN if t.plural == "deployments")
CONFIGMAPS = next(t for t in BUILTIN if t.plural == "configmaps")
PODS = next(t for t in BUILTIN if t.plural == "pods")


def deployment(replicas: int = 2, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default", "labels": labels or {"app": "web"}},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"containers": [{"name": "web", "image": "nginx:1"}]}}}}


def entries(obj: dict[str, Any]) -> dict[tuple[str, str, str], mf.Entry]:
    got = mf.decode(obj["metadata"].get("managedFields", []))
    assert got is not None
    return {e.key: e for e in got}


def owned(obj: dict[str, Any], manager: str, operation: str, sub: str = "") -> list[tuple[str, ...]]:
    return paths(entries(obj)[(manager, operation, sub)].fields)


def updated(rtype: ResourceType, old: dict[str, Any], change: Any, manager: str,
            subresource: str | None = None) -> dict[str, Any]:
    new = copy.deepcopy(old)
    change(new)
    mf.record_write(rtype, old, new, manager, subresource)
    return new


def test_create_records_an_update_entry_without_server_fields() -> None:
    obj = deployment()
    obj["metadata"]["uid"] = "u"
    mf.record_write(DEPLOYMENTS, None, obj, "kubectl-create")
    [entry] = obj["metadata"]["managedFields"]
    assert entry["manager"] == "kubectl-create" and entry["operation"] == "Update"
    assert entry["apiVersion"] == "apps/v1" and entry["fieldsType"] == "FieldsV1" and entry["time"].endswith("Z")
    fields = entry["fieldsV1"]
    assert "f:apiVersion" not in fields and "f:kind" not in fields
    assert set(fields["f:metadata"]) == {"f:labels"}  # not name, namespace, uid
    assert fields["f:spec"]["f:replicas"] == {}
    assert "subresource" not in entry


def test_update_takes_changed_fields_from_other_managers() -> None:
    obj = deployment()
    mf.record_write(DEPLOYMENTS, None, obj, "creator")
    scaled = updated(DEPLOYMENTS, obj, lambda o: o["spec"].__setitem__("replicas", 5), "scaler")
    assert owned(scaled, "scaler", "Update") == [("f:spec", "f:replicas")]
    assert ("f:spec", "f:replicas") not in owned(scaled, "creator", "Update")


def test_removed_fields_leave_every_set_and_empty_entries_go() -> None:
    obj = deployment(labels={"app": "web", "tier": "x"})
    mf.record_write(DEPLOYMENTS, None, obj, "creator")
    labelled = updated(DEPLOYMENTS, obj, lambda o: o["metadata"]["labels"].__setitem__("team", "a"), "labeller")
    dropped = updated(DEPLOYMENTS, labelled, lambda o: o["metadata"]["labels"].pop("team"), "creator")
    assert ("creator", "Update", "") in entries(dropped)
    assert ("labeller", "Update", "") not in entries(dropped)


def test_no_change_keeps_entries_and_times() -> None:
    obj = deployment()
    mf.record_write(DEPLOYMENTS, None, obj, "creator")
    same = updated(DEPLOYMENTS, obj, lambda o: None, "someone-else")
    assert same["metadata"]["managedFields"] == obj["metadata"]["managedFields"]


def test_status_writes_are_recorded_with_their_subresource_and_own_only_status() -> None:
    obj = deployment()
    mf.record_write(DEPLOYMENTS, None, obj, "creator")
    status = updated(DEPLOYMENTS, obj, lambda o: o.__setitem__("status", {"replicas": 2}), "controller", "status")
    assert owned(status, "controller", "Update", "status") == [("f:status", "f:replicas")]
    [e] = [e for e in status["metadata"]["managedFields"] if e["manager"] == "controller"]
    assert e["subresource"] == "status"
    # through the object itself, status is nobody's
    main = updated(DEPLOYMENTS, obj, lambda o: o.__setitem__("status", {"replicas": 9}), "other")
    assert ("other", "Update", "") not in entries(main)


def test_managed_fields_sent_by_the_client() -> None:
    obj = deployment()
    mf.record_write(DEPLOYMENTS, None, obj, "creator")
    kept = updated(DEPLOYMENTS, obj, lambda o: o["metadata"].pop("managedFields"), "other")
    assert ("creator", "Update", "") in entries(kept)  # a client unaware of managedFields drops nothing
    # [{}] and [] clear them, as upstream's isResetManagedFields (its integration tests
    # TestClearManagedFieldsWithUpdate and ...WithUpdateEmptyList)
    resets: list[list[dict[str, Any]]] = [[{}], []]
    for cleared in resets:
        reset = updated(DEPLOYMENTS, obj, lambda o, c=cleared: o["metadata"].__setitem__("managedFields", c), "other")
        assert "managedFields" not in reset["metadata"]
    bad = updated(DEPLOYMENTS, obj, lambda o: o["metadata"].__setitem__("managedFields", [{"manager": 1}]), "x")
    assert ("creator", "Update", "") in entries(bad)  # undecodable: the stored ones


def test_an_object_whose_managed_fields_were_cleared_is_tracked_again_only_by_an_apply() -> None:
    # upstream's skipNonAppliedManager: an update of an object without managedFields tracks
    # nothing (they were re-made by the next update here); a create always tracks
    obj = deployment()
    obj["metadata"]["managedFields"] = [{}]
    mf.record_write(DEPLOYMENTS, None, obj, "creator")
    assert ("creator", "Update", "") in entries(obj)
    obj = updated(DEPLOYMENTS, obj, lambda o: o["metadata"].__setitem__("managedFields", [{}]), "other")
    for sub in (None, "status"):
        later = updated(DEPLOYMENTS, obj, lambda o: o["metadata"]["labels"].__setitem__("x", "y"), "other", sub)
        assert "managedFields" not in later["metadata"]
    applied = mf.apply(DEPLOYMENTS, obj, {"apiVersion": "apps/v1", "kind": "Deployment",
                                          "metadata": {"name": "web", "labels": {"x": "y"}}}, "applier")
    assert {e[:2] for e in entries(applied)} == {("before-first-apply", "Update"), ("applier", "Apply")}


def test_at_most_ten_update_entries() -> None:
    obj = deployment()
    mf.record_write(DEPLOYMENTS, None, obj, "m0")
    for i in range(1, 13):
        obj = updated(DEPLOYMENTS, obj, lambda o, i=i: o["metadata"]["labels"].__setitem__(f"l{i}", "v"), f"m{i}")
    managers = {e["manager"] for e in obj["metadata"]["managedFields"]}
    assert len(managers) == 10 and "ancient-changes" in managers and "m12" in managers


def test_apply_creates_owns_exactly_the_configuration() -> None:
    obj = mf.apply(DEPLOYMENTS, None, deployment(), "kubectl")
    [e] = obj["metadata"]["managedFields"]
    assert e["operation"] == "Apply" and e["manager"] == "kubectl"
    assert ("f:spec", "f:replicas") in paths(e["fieldsV1"])
    assert obj["spec"]["replicas"] == 2


def test_reapply_removes_what_is_no_longer_applied_unless_owned_by_another() -> None:
    cfg = deployment(labels={"app": "web", "tier": "x"})
    obj = mf.apply(DEPLOYMENTS, None, cfg, "kubectl")
    obj = updated(DEPLOYMENTS, obj, lambda o: o["metadata"]["labels"].__setitem__("team", "a"), "editor")
    cfg2 = deployment(labels={"app": "web", "team": "a"})  # drops tier; team is shared with editor
    out = mf.apply(DEPLOYMENTS, obj, cfg2, "kubectl")
    assert out["metadata"]["labels"] == {"app": "web", "team": "a"}
    cfg3 = deployment(labels={"app": "web"})  # drops team, which editor still owns
    out = mf.apply(DEPLOYMENTS, out, cfg3, "kubectl")
    assert out["metadata"]["labels"] == {"app": "web", "team": "a"}


def test_reapply_removes_list_items_by_key() -> None:
    cfg = deployment()
    cfg["spec"]["template"]["spec"]["containers"].append({"name": "side", "image": "busybox"})
    obj = mf.apply(DEPLOYMENTS, None, cfg, "kubectl")
    out = mf.apply(DEPLOYMENTS, obj, deployment(), "kubectl")
    assert [c["name"] for c in out["spec"]["template"]["spec"]["containers"]] == ["web"]


def test_conflict_with_an_updater_and_force() -> None:
    obj = mf.apply(DEPLOYMENTS, None, deployment(replicas=2), "kubectl")
    scaled = updated(DEPLOYMENTS, obj, lambda o: o["spec"].__setitem__("replicas", 5), "kubectl-scale")
    with pytest.raises(mf.Conflicts) as err:
        mf.apply(DEPLOYMENTS, scaled, deployment(replicas=3), "kubectl")
    assert [(c.manager, c.path) for c in err.value.conflicts] == [('"kubectl-scale" using apps/v1', ".spec.replicas")]
    assert str(err.value) == ('Apply failed with 1 conflict: conflict with "kubectl-scale" using apps/v1: '
                              ".spec.replicas")
    forced = mf.apply(DEPLOYMENTS, scaled, deployment(replicas=3), "kubectl", force=True)
    assert forced["spec"]["replicas"] == 3
    assert ("kubectl-scale", "Update", "") not in entries(forced)  # it lost its only field
    assert ("f:spec", "f:replicas") in owned(forced, "kubectl", "Apply")


def test_same_value_is_shared_not_a_conflict() -> None:
    obj = mf.apply(DEPLOYMENTS, None, deployment(replicas=2), "a")
    both = mf.apply(DEPLOYMENTS, obj, deployment(replicas=2), "b")
    assert ("f:spec", "f:replicas") in owned(both, "a", "Apply")
    assert ("f:spec", "f:replicas") in owned(both, "b", "Apply")
    with pytest.raises(mf.Conflicts) as err:
        mf.apply(DEPLOYMENTS, both, deployment(replicas=4), "b")
    assert err.value.conflicts[0].manager == '"a"'  # appliers are named without a version


def test_several_conflicts_are_listed_by_manager() -> None:
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "1", "b": "2"}}
    obj = mf.apply(CONFIGMAPS, None, cm, "one")
    cm2 = copy.deepcopy(cm)
    cm2["data"] = {"a": "x", "b": "y"}
    with pytest.raises(mf.Conflicts) as err:
        mf.apply(CONFIGMAPS, obj, cm2, "two")
    assert str(err.value) == 'Apply failed with 2 conflicts: conflicts with "one":\n- .data.a\n- .data.b'


def test_noop_apply_changes_nothing() -> None:
    obj = mf.apply(DEPLOYMENTS, None, deployment(), "kubectl")
    again = mf.apply(DEPLOYMENTS, obj, deployment(), "kubectl")
    assert again == obj


def test_apply_through_status_owns_status_only() -> None:
    obj = mf.apply(DEPLOYMENTS, None, deployment(), "kubectl")
    cfg = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
           "spec": {"replicas": 7}, "status": {"replicas": 1}}
    out = mf.apply(DEPLOYMENTS, obj, cfg, "ctrl", subresource="status")
    assert out["status"] == {"replicas": 1} and out["spec"]["replicas"] == 2
    assert owned(out, "ctrl", "Apply", "status") == [("f:status", "f:replicas")]


def test_apply_to_the_object_ignores_status_of_a_kind_with_a_status_subresource() -> None:
    cfg = deployment()
    cfg["status"] = {"replicas": 3}
    obj = mf.apply(DEPLOYMENTS, None, cfg, "kubectl")
    assert "status" not in obj
    assert all(p[0] != "f:status" for p in owned(obj, "kubectl", "Apply"))


def test_apply_of_an_invalid_list_is_a_shape_error() -> None:
    cfg = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"image": "x"}]}}
    with pytest.raises(mf.ShapeError):
        mf.apply(PODS, None, cfg, "kubectl")


def test_manager_from_user_agent() -> None:
    assert mf.manager_from_user_agent("kubectl/v1.37.0 (linux/amd64) kubernetes/abc") == "kubectl"
    assert mf.manager_from_user_agent("OpenAPI-Generator/31.0.0/python") == "OpenAPI-Generator"
    assert len(mf.manager_from_user_agent("x" * 300)) == 128


def test_first_apply_to_an_unowned_object_conflicts_with_before_first_apply() -> None:
    obj = deployment(replicas=2)
    obj["metadata"]["uid"] = "u"
    with pytest.raises(mf.Conflicts) as err:
        mf.apply(DEPLOYMENTS, obj, deployment(replicas=3), "kubectl")
    assert [(c.manager, c.path) for c in err.value.conflicts] == [
        ('"before-first-apply" using apps/v1', ".spec.replicas")]
    same = mf.apply(DEPLOYMENTS, obj, deployment(replicas=2), "kubectl")
    assert set(entries(same)) == {("before-first-apply", "Update", ""), ("kubectl", "Apply", "")}


def test_remembered_sets_are_the_walked_ones_and_stay_unchanged() -> None:
    from controlplane.podgen import PodGenerator
    from controlplane.registry import typed
    from controlplane.registry.shapes import shape_for

    gen = PodGenerator(seed=3, namespaces=1, templates_per_namespace=1)
    a, b = gen.pod(bound=False), gen.pod(bound=False)
    for p in (a, b):
        p["metadata"].pop("managedFields", None)
    assert a["spec"] == b["spec"]  # replicas of one template
    shape = shape_for("", "v1", "Pod")
    typed._memo.clear()
    walked = typed._created(copy.deepcopy(a), shape)  # no memo
    mf.record_write(PODS, None, a, "creator")
    mf.record_write(PODS, None, b, "creator")
    assert a["metadata"]["managedFields"][0]["fieldsV1"]["f:spec"] == walked["f:spec"]
    shared = copy.deepcopy(b["metadata"]["managedFields"])
    changed = updated(PODS, a, lambda o: o["spec"]["containers"][0].__setitem__("image", "other"), "editor")
    assert ("editor", "Update", "") in entries(changed)
    assert b["metadata"]["managedFields"] == shared  # the other pod's (shared) set is untouched


def test_an_object_too_deep_to_walk_gets_no_managed_fields() -> None:
    deep: dict[str, Any] = {}
    node = deep
    for _ in range(900):
        node["x"] = {}
        node = node["x"]
    old = {"metadata": {"name": "c"}, "data": {}}
    new = {"metadata": {"name": "c"}, "data": {}, "extra": deep}
    mf.record_write(CONFIGMAPS, old, new, "m")
    assert "managedFields" not in new["metadata"]


def test_managed_fields_sent_back_as_stored_are_the_stored_ones() -> None:
    # a client writing back what it read: the entries are taken as stored, unchecked;
    # the result is the one a client unaware of managedFields gets, malformed stored sets included
    obj = deployment()
    mf.record_write(DEPLOYMENTS, None, obj, "creator")
    obj["metadata"]["managedFields"][0]["fieldsV1"] = {"x:bad": {}}  # not a valid set, yet stored

    def scale(o: dict[str, Any]) -> None:
        o["spec"]["replicas"] = 3

    def scale_unaware(o: dict[str, Any]) -> None:
        scale(o)
        o["metadata"].pop("managedFields")

    echoed = updated(DEPLOYMENTS, obj, scale, "other")
    unaware = updated(DEPLOYMENTS, obj, scale_unaware, "other")
    assert echoed["metadata"]["managedFields"] == unaware["metadata"]["managedFields"]
    assert ("creator", "Update", "") in entries_unchecked(echoed)


def entries_unchecked(obj: dict[str, Any]) -> dict[tuple[str, str, str], mf.Entry]:
    got = mf.decode(obj["metadata"].get("managedFields", []), trusted=True)
    assert got is not None
    return {e.key: e for e in got}


def test_one_entry_is_neither_capped_nor_reordered() -> None:
    obj = deployment()
    mf.record_write(DEPLOYMENTS, None, obj, "creator")
    assert [e["manager"] for e in obj["metadata"]["managedFields"]] == ["creator"]
    for i in range(12):
        obj = updated(DEPLOYMENTS, obj, lambda o, i=i: o["metadata"]["labels"].__setitem__(f"l{i}", "x"), f"m{i}")
    assert len(obj["metadata"]["managedFields"]) == mf.MAX_UPDATE_ENTRIES


SECRETS = next(t for t in BUILTIN if t.plural == "secrets")


def secret(**fields: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "default"}, **fields}


def stored_secret(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` as the Secret strategy stores it: ``stringData`` folded into ``data``."""
    out = copy.deepcopy(obj)
    for k, v in (out.pop("stringData", None) or {}).items():
        out.setdefault("data", {})[k] = base64.b64encode(v.encode()).decode()
    return out


def test_secret_writes_own_the_data_keys_their_string_data_becomes() -> None:
    created = secret(type="Opaque", stringData={"password": "hunter2"})
    mf.record_write(SECRETS, None, created, "kubectl-client-side-apply")
    assert sorted(owned(created, "kubectl-client-side-apply", "Update")) == [
        ("f:data",), ("f:data", "f:password"), ("f:type",)]
    live = stored_secret(created)
    new = updated(SECRETS, live, lambda o: o.__setitem__("stringData", {"user": "me", "password": "hunter2"}),
                  "kubectl-edit")
    assert owned(new, "kubectl-edit", "Update") == [("f:data", "f:user")]  # the password is the same value
    assert ("f:data", "f:password") in owned(new, "kubectl-client-side-apply", "Update")


def test_applying_string_data_over_client_side_applied_data_does_not_conflict() -> None:
    created = secret(type="Opaque", stringData={"password": "hunter2"})
    mf.record_write(SECRETS, None, created, "kubectl-client-side-apply")
    live = stored_secret(created)
    applied = mf.apply(SECRETS, live, secret(stringData={"password": "hunter3"}), "kubectl")
    # as upstream, the applier owns what its configuration says; the strategy folds it into data
    assert owned(applied, "kubectl", "Apply") == [("f:stringData", "f:password")]
    assert applied["stringData"] == {"password": "hunter3"}
    assert ("f:data", "f:password") in owned(applied, "kubectl-client-side-apply", "Update")


def test_a_removed_field_with_a_default_is_defaulted_again_and_owned_by_nobody() -> None:
    applied = mf.apply(SECRETS, None, secret(type="Opaque", data={"a": "YQ=="}), "kubectl")
    assert ("f:type",) in owned(applied, "kubectl", "Apply")

    def default(obj: dict[str, Any]) -> None:
        obj.setdefault("type", "Opaque")

    without = mf.apply(SECRETS, applied, secret(data={"a": "YQ=="}), "kubectl", defaults=default)
    assert without["type"] == "Opaque"
    assert owned(without, "kubectl", "Apply") == [("f:data", "f:a")]
    assert applied["type"] == "Opaque" and "type" in applied  # the live object is left as it was
    undefaulted = mf.apply(SECRETS, applied, secret(data={"a": "YQ=="}), "kubectl")
    assert "type" not in undefaulted


def test_a_scale_write_takes_the_replicas_and_a_later_apply_conflicts() -> None:
    live = mf.apply(DEPLOYMENTS, None, deployment(replicas=1), "kubectl")
    scaled = copy.deepcopy(live)
    scaled["spec"]["replicas"] = 2
    mf.record_scale(DEPLOYMENTS, live, scaled, "kubectl")
    scale_entry = entries(scaled)[("kubectl", "Update", "scale")]
    assert paths(scale_entry.fields) == [("f:spec", "f:replicas")] and scale_entry.api_version == "apps/v1"
    assert ("f:spec", "f:replicas") not in owned(scaled, "kubectl", "Apply")
    encoded = next(e for e in scaled["metadata"]["managedFields"] if e.get("subresource") == "scale")
    assert encoded["operation"] == "Update" and encoded["time"].endswith("Z")
    with pytest.raises(mf.Conflicts) as err:
        mf.apply(DEPLOYMENTS, scaled, deployment(replicas=1), "kubectl")
    assert err.value.message() == ('Apply failed with 1 conflict: conflict with "kubectl" with subresource '
                                   '"scale" using apps/v1: .spec.replicas')
    forced = mf.apply(DEPLOYMENTS, scaled, deployment(replicas=1), "kubectl", force=True)
    assert ("kubectl", "Update", "scale") not in entries(forced)
    assert forced["spec"]["replicas"] == 1
    # applying the value the scale wrote shares it instead
    shared = mf.apply(DEPLOYMENTS, scaled, deployment(replicas=2), "kubectl")
    assert ("f:spec", "f:replicas") in owned(shared, "kubectl", "Apply")
    assert ("kubectl", "Update", "scale") in entries(shared)


def test_a_scale_write_that_changes_nothing_changes_no_ownership() -> None:
    live = mf.apply(DEPLOYMENTS, None, deployment(replicas=2), "kubectl")
    same = copy.deepcopy(live)
    mf.record_scale(DEPLOYMENTS, live, same, "hpa")
    assert same["metadata"]["managedFields"] == live["metadata"]["managedFields"]


def test_a_scale_write_at_a_custom_replicas_path() -> None:
    widgets = ResourceType(group="example.com", version="v1", plural="widgets", kind="Widget", namespaced=True)
    live: dict[str, Any] = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
                            "spec": {"size": 1, "color": "red"}}
    mf.record_write(widgets, None, live, "creator")
    scaled = copy.deepcopy(live)
    scaled["spec"]["size"] = 3
    mf.record_scale(widgets, live, scaled, "scaler", ("spec", "size"))
    assert owned(scaled, "scaler", "Update", "scale") == [("f:spec", "f:size")]
    assert ("f:spec", "f:size") not in owned(scaled, "creator", "Update")
    assert ("f:spec", "f:color") in owned(scaled, "creator", "Update")


def _entry(time: str, fields: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"manager": "m", "operation": "Update", "apiVersion": "v1", "time": time,
            "fieldsType": "FieldsV1", "fieldsV1": fields or {"f:data": {"f:k": {}}}}


def _configmap(data: str, *entries: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": "c", "managedFields": list(entries)}, "data": {"k": data}}


@pytest.mark.parametrize(("new", "same", "times"), [
    # only a time moved: old's times put back, and the objects are the same
    (_configmap("v", _entry("2026-01-01T00:00:01Z")), True, "2026-01-01T00:00:00Z"),
    # a time moved and the data too: the new time stands
    (_configmap("w", _entry("2026-01-01T00:00:01Z")), False, "2026-01-01T00:00:01Z"),
    # nothing moved at all
    (_configmap("v", _entry("2026-01-01T00:00:00Z")), True, "2026-01-01T00:00:00Z"),
    # an entry owning other fields is a change, time and all
    (_configmap("v", _entry("2026-01-01T00:00:01Z", {"f:data": {}})), False, "2026-01-01T00:00:01Z"),
    # no managedFields to compare
    ({"metadata": {"name": "c"}, "data": {"k": "v"}}, False, None),
], ids=["time-only", "time-and-data", "unchanged", "other-fields", "no-managed-fields"])
def test_revert_times_answers_whether_the_objects_are_the_same_with_one_comparison(
        new: dict[str, Any], same: bool, times: str | None) -> None:
    # the caller's no-op test is revert_times' answer: the objects are compared once, not again by the caller
    old = _configmap("v", _entry("2026-01-01T00:00:00Z"))
    new = copy.deepcopy(new)
    calls: list[tuple[dict[str, Any], dict[str, Any]]] = []

    def counted(a: dict[str, Any], b: dict[str, Any]) -> bool:
        calls.append((a, b))
        return a == b

    assert mf.revert_times(new, old, counted) is same
    assert len(calls) == 1 and calls[0][0] is new and calls[0][1] is old
    assert [e["time"] for e in new["metadata"].get("managedFields", [])] == ([times] if times else [])
