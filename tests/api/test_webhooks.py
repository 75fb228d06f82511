"""Admission webhooks (api/webhooks.py, api/webhookcall.py) called as kube-apiserver calls
them: a real ``controlplane serve`` posting AdmissionReviews over HTTPS to a real webhook
server in this process (tests/api/webhook_server.py), with the real kubectl once."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, cast

import httpx
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from controlplane.api.dryrun import DRY_RUN
from controlplane.api.errors import ApiError
from controlplane.api.webhooks import AdmissionWebhooks, Hook, Invocation, Request
from controlplane.registry import Registry
from tests.api.webhook_server import WebhookServer, host_address
from tests.e2e.test_kubectl import KUBECTL
from tests.test_cli import Serve, running, start_serve

if TYPE_CHECKING:
    from controlplane.api.rest import KubeApi

MUTATING = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"
VALIDATING = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"
NS = "hooked"
PODS = f"/api/v1/namespaces/{NS}/pods"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    with running(start_serve(tmp_path_factory.mktemp("webhooks-serve"))) as s:
        yield s


@pytest.fixture(scope="module")
def strict(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    with running(start_serve(tmp_path_factory.mktemp("webhooks-all"), extra=("--admission-webhooks", "all"))) as s:
        yield s


class Api:
    """An httpx client of a served server as its admin, which keeps the configurations it makes
    and deletes them when done (they apply to the whole cluster)."""

    def __init__(self, served: Serve) -> None:
        token = yaml.safe_load(served.kubeconfig.read_text())["users"][0]["user"]["token"]
        self.http = httpx.Client(base_url=served.url, headers={"authorization": f"Bearer {token}"}, timeout=30)
        self.made: list[str] = []

    def configure(self, path: str, name: str, webhooks: list[dict[str, Any]]) -> None:
        kind = "MutatingWebhookConfiguration" if path == MUTATING else "ValidatingWebhookConfiguration"
        r = self.http.post(path, json={"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
                                       "metadata": {"name": name}, "webhooks": webhooks})
        assert r.status_code == 201, r.text
        self.made.append(f"{path}/{name}")
        self._await_cached(path, name, True)

    def _await_cached(self, path: str, name: str, present: bool) -> None:
        for _ in range(500):  # admission reads the watch cache: wait until it has caught up
            listed = self.http.get(path, params={"resourceVersion": "0"}).json()["items"]
            names = {c["metadata"]["name"] for c in listed}
            if (name in names) == present:
                return
            time.sleep(0.01)
        raise AssertionError(f"{name} never {'appeared' if present else 'went'}")

    def close(self) -> None:
        for made in self.made:
            self.http.delete(made)
            path, _, name = made.rpartition("/")
            self._await_cached(path, name, False)
        self.http.close()

    def pod(self, name: str, namespace: str = NS, **labels: str) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]}}

    def create_pod(self, name: str, namespace: str = NS, query: dict[str, str] | None = None,
                   **labels: str) -> httpx.Response:
        return self.http.post(f"/api/v1/namespaces/{namespace}/pods", json=self.pod(name, namespace, **labels),
                              params=query or {})


@pytest.fixture
def api(served: Serve) -> Iterator[Api]:
    a = Api(served)
    for ns, labels in ((NS, {"webhooks": "on"}), ("quiet", {})):
        a.http.post("/api/v1/namespaces", json={"metadata": {"name": ns, "labels": labels}})
    try:
        yield a
    finally:
        a.close()


def webhook(name: str, server: WebhookServer, path: str, **extra: Any) -> dict[str, Any]:
    """A webhook on pod creates in namespaces labelled ``webhooks: on``, at ``server``'s ``path``."""
    return {"name": name, "clientConfig": {"url": server.url(path), "caBundle": server.ca_bundle},
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}],
            "namespaceSelector": {"matchLabels": {"webhooks": "on"}},
            "sideEffects": "None", "admissionReviewVersions": ["v1"], **extra}


def test_a_mutating_webhooks_patch_is_applied_and_its_review_is_upstreams(api: Api, hook: WebhookServer) -> None:
    api.configure(MUTATING, "mutate", [webhook("mutate.example.com", hook, "/mutate")])
    r = api.create_pod("patched", app="web")
    assert r.status_code == 201, r.text
    assert r.json()["metadata"]["labels"] == {"app": "web", "mutated": "yes"}
    assert r.headers.get_list("warning") == ['299 - "mutated by the test webhook"']
    got = api.http.get(f"{PODS}/patched").json()
    assert got["metadata"]["labels"]["mutated"] == "yes" and got["metadata"]["uid"]
    assert got["spec"]["containers"][0]["imagePullPolicy"] == "Always"  # defaulted before, kept after
    (review,) = [rv for rv in hook.seen("/mutate") if rv.get("name") == "patched"]
    assert review["_query"] == "timeout=10s"
    assert review["kind"] == review["requestKind"] == {"group": "", "version": "v1", "kind": "Pod"}
    assert review["resource"] == review["requestResource"] == {"group": "", "version": "v1", "resource": "pods"}
    assert (review["namespace"], review["operation"], review["dryRun"]) == (NS, "CREATE", False)
    assert review["options"] == {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"}
    assert review["userInfo"]["username"] == "admin" and review["oldObject"] is None
    meta = review["object"]["metadata"]
    assert "uid" not in meta and "creationTimestamp" not in meta  # as upstream's admission sees a create
    # a pod in a namespace the selector leaves out is not sent
    assert api.create_pod("elsewhere", namespace="quiet").status_code == 201
    assert not [rv for rv in hook.seen("/mutate") if rv.get("namespace") == "quiet"]
    # a generated name: the webhook sees none, as upstream's
    r = api.http.post(PODS, json={**api.pod(""), "metadata": {"generateName": "gen-"}})
    assert r.status_code == 201 and r.json()["metadata"]["name"].startswith("gen-")
    generated = next(rv for rv in hook.seen("/mutate") if rv["object"]["metadata"].get("generateName") == "gen-")
    assert generated.get("name") is None


def test_a_webhook_sees_the_empty_lists_as_upstreams_does_before_they_are_stored(api: Api, hook: WebhookServer) -> None:
    """Upstream's webhooks get the object decoded from the request, as Go's JSON encoder writes
    it: an empty ``omitempty`` list left out, one without ``omitempty`` (a projected volume's
    ``sources``) ``[]``; protobuf storage makes that one nil: null in the response and reads."""
    api.configure(VALIDATING, "sees", [webhook("sees.example.com", hook, "/allow")])
    pod = api.pod("empties")
    pod["spec"]["containers"][0]["args"] = []
    pod["spec"]["volumes"] = [{"name": "p", "projected": {"sources": []}}]
    r = api.http.post(PODS, json=pod)
    assert r.status_code == 201, r.text
    (review,) = [rv for rv in hook.seen("/allow") if rv.get("name") == "empties"]
    seen = review["object"]["spec"]
    assert "args" not in seen["containers"][0]
    assert [v["projected"]["sources"] for v in seen["volumes"] if v["name"] == "p"] == [[]]
    for stored in (r.json(), api.http.get(f"{PODS}/empties").json()):
        assert [v["projected"]["sources"] for v in stored["spec"]["volumes"] if v["name"] == "p"] == [None]


def test_a_webhook_sees_a_custom_resources_whole_float_as_go_writes_it(api: Api, hook: WebhookServer) -> None:
    """A custom resource's ``port: 80.0`` is a float64 in upstream's unstructured object, which
    the AdmissionReview carries as Go's encoder writes it, ``80`` (webhook/request/admissionreview.go
    puts the object in a RawExtension, encoded by json.Marshal); it was sent as ``80.0``."""
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "floats.example.com"},
           "spec": {"group": "example.com", "scope": "Namespaced",
                    "names": {"plural": "floats", "singular": "float", "kind": "Float"},
                    "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                        "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}}
    r = api.http.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", json=crd)
    assert r.status_code == 201, r.text
    api.made.append("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/floats.example.com")
    floats = f"/apis/example.com/v1/namespaces/{NS}/floats"
    for _ in range(500):
        if api.http.get(floats).status_code == 200:
            break
        time.sleep(0.01)
    api.configure(VALIDATING, "floats", [webhook("floats.example.com", hook, "/allow", rules=[{
        "operations": ["CREATE"], "apiGroups": ["example.com"], "apiVersions": ["v1"], "resources": ["floats"]}])])
    r = api.http.post(floats, headers={"Content-Type": "application/json"}, content=(
        b'{"apiVersion":"example.com/v1","kind":"Float","metadata":{"name":"f"},"spec":{"port":80.0,"half":2.5,'
        b'"big":1e20}}'))
    assert r.status_code == 201, r.text
    (review,) = [rv for rv in hook.seen("/allow") if rv.get("name") == "f"]
    port = review["object"]["spec"]["port"]
    assert (port, type(port), review["object"]["spec"]["half"]) == (80, int, 2.5)
    # Go writes a float64 below 1e21 in plain decimal (encoding/json floatEncoder), which
    # Python's json reads as an int: it was sent as 1e+20
    big = review["object"]["spec"]["big"]
    assert (big, type(big)) == (10 ** 20, int)


def test_a_mutating_webhooks_integer_past_an_int64_in_a_custom_resource_is_a_float64(
        api: Api, hook: WebhookServer) -> None:
    """The patched custom resource is decoded into unstructured, where 2^63 is a float64, which
    Go's encoder writes back in its shortest digits: stored ``9223372036854776000``."""
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "bigs.example.com"},
           "spec": {"group": "example.com", "scope": "Namespaced",
                    "names": {"plural": "bigs", "singular": "big", "kind": "Big"},
                    "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                        "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}}
    r = api.http.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", json=crd)
    assert r.status_code == 201, r.text
    api.made.append("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/bigs.example.com")
    bigs = f"/apis/example.com/v1/namespaces/{NS}/bigs"
    for _ in range(500):
        if api.http.get(bigs).status_code == 200:
            break
        time.sleep(0.01)
    api.configure(MUTATING, "bigs", [webhook("bigs.example.com", hook, "/add-uint64", rules=[{
        "operations": ["CREATE"], "apiGroups": ["example.com"], "apiVersions": ["v1"], "resources": ["bigs"]}])])
    r = api.http.post(bigs, json={"apiVersion": "example.com/v1", "kind": "Big", "metadata": {"name": "b"},
                                  "spec": {"small": 1}})
    assert r.status_code == 201, r.text
    assert b'"spec":{"small":1,"big":9223372036854776000}' in r.content, r.text
    assert b'"big":9223372036854776000}' in api.http.get(f"{bigs}/b").content


def test_a_validating_webhooks_refusal_as_kubectl_shows_it(api: Api, hook: WebhookServer, served: Serve) -> None:
    api.configure(VALIDATING, "deny", [webhook("deny.example.com", hook, "/deny",
                                               objectSelector={"matchLabels": {"bad": "true"}})])
    manifest = json.dumps(api.pod("bad-one", bad="true") | {"metadata": {"name": "bad-one", "namespace": NS,
                                                                          "labels": {"bad": "true"}}})
    r = subprocess.run([KUBECTL or "kubectl", "create", "-f", "-"], input=manifest, capture_output=True, text=True,
                       env={"KUBECONFIG": str(served.kubeconfig), "HOME": str(served.state), "PATH": "/usr/bin"},
                       timeout=60)
    assert r.returncode == 1
    assert r.stderr.strip() == 'Error from server (Forbidden): error when creating "STDIN": admission webhook ' \
                               '"deny.example.com" denied the request: pods labelled bad are not welcome'
    r2 = api.create_pod("bad-two", bad="true")
    assert r2.status_code == 403 and r2.json()["reason"] == "Forbidden"
    assert api.create_pod("good", bad="false").status_code == 201  # the object selector leaves it out
    assert {rv["name"] for rv in hook.seen("/deny")} == {"bad-one", "bad-two"}


def test_a_refusal_without_a_status_and_a_response_for_another_request(api: Api, hook: WebhookServer) -> None:
    api.configure(VALIDATING, "bare", [webhook("bare.example.com", hook, "/deny-bare",
                                               objectSelector={"matchLabels": {"case": "bare"}}),
                                       webhook("uid.example.com", hook, "/wrong-uid",
                                               objectSelector={"matchLabels": {"case": "uid"}})])
    r = api.create_pod("bare", case="bare")
    assert (r.status_code, r.json()["message"]) == \
        (400, 'admission webhook "bare.example.com" denied the request without explanation')
    r = api.create_pod("uid", case="uid")
    assert r.status_code == 500 and r.json()["reason"] == "InternalError"
    assert r.json()["message"].startswith('Internal error occurred: failed calling webhook "uid.example.com": '
                                          'received invalid webhook response: expected response.uid="')


@pytest.mark.parametrize("policy", ["Fail", "Ignore"])
def test_failure_policy_of_an_unreachable_and_a_slow_webhook(api: Api, hook: WebhookServer, policy: str) -> None:
    api.configure(VALIDATING, "failing", [
        webhook("down.example.com", hook, "/", failurePolicy=policy, objectSelector={"matchLabels": {"case": "down"}},
                clientConfig={"url": "https://127.0.0.1:1/validate", "caBundle": hook.ca_bundle}),
        webhook("slow.example.com", hook, "/slow", failurePolicy=policy, timeoutSeconds=1,
                objectSelector={"matchLabels": {"case": "slow"}})])
    down, slow = api.create_pod("down", case="down"), api.create_pod("slow", case="slow")
    if policy == "Ignore":
        assert (down.status_code, slow.status_code) == (201, 201)
        return
    assert down.status_code == 500 and down.json()["message"] == (
        'Internal error occurred: failed calling webhook "down.example.com": failed to call webhook: Post '
        '"https://127.0.0.1:1/validate?timeout=10s": dial tcp 127.0.0.1:1: connect: connection refused')
    assert slow.status_code == 500 and slow.json()["message"] == (
        f'Internal error occurred: failed calling webhook "slow.example.com": failed to call webhook: Post '
        f'"https://127.0.0.1:{hook.port}/slow?timeout=1s": context deadline exceeded')
    assert api.http.get(f"{PODS}/down").status_code == 404


def test_match_conditions_and_rules(api: Api, hook: WebhookServer) -> None:
    api.configure(VALIDATING, "conditions", [
        webhook("cond.example.com", hook, "/deny", matchConditions=[
            {"name": "checked", "expression": "object.metadata.name.startsWith('checked-')"},
            {"name": "not-admin", "expression": "request.userInfo.username == 'admin'"}]),
        webhook("broken.example.com", hook, "/allow", matchConditions=[
            {"name": "broken", "expression": "object.metadata.labels.missing == 'x'"}],
            objectSelector={"matchLabels": {"case": "broken"}}),
        webhook("status.example.com", hook, "/deny", objectSelector={"matchLabels": {"case": "status"}},
                rules=[{"operations": ["UPDATE"], "apiGroups": [""], "apiVersions": ["v1"],
                        "resources": ["pods/status"], "scope": "Namespaced"}])])
    assert api.create_pod("checked-a").status_code == 403
    assert api.create_pod("unchecked").status_code == 201
    r = api.create_pod("broken", case="broken")  # an error in a condition, failurePolicy Fail: refused
    assert r.status_code == 403 and r.json()["message"].startswith(
        "pods \"broken\" is forbidden: expression 'object.metadata.labels.missing == 'x'' resulted in error: ")
    assert api.create_pod("status", case="status").status_code == 201  # the rule is for pods/status updates
    r = api.http.patch(f"{PODS}/status/status", json={"status": {"message": "hi"}},
                       headers={"content-type": "application/merge-patch+json"})
    assert r.status_code == 403, r.text
    assert hook.seen("/deny")[-1]["subResource"] == "status"
    assert api.http.patch(f"{PODS}/status", json={"metadata": {"annotations": {"a": "b"}}},
                          headers={"content-type": "application/merge-patch+json"}).status_code == 200


def test_match_conditions_have_upstreams_budget(api: Api, hook: WebhookServer) -> None:
    """Upstream's matcher evaluates every condition within RuntimeCELCostBudgetMatchConditions
    (2,500,000): three conditions of 900,601 iterations each (949 labels, each under the
    per-call limit) pass it, and its error refuses the request under ``Fail`` though the first
    condition is false; with 10 labels the false condition leaves the webhook out."""
    heavy = "object.metadata.labels.all(k, object.metadata.labels.all(j, k != ''))"
    api.configure(VALIDATING, "budget", [webhook("budget.example.com", hook, "/deny", matchConditions=[
        {"name": "never", "expression": "object.metadata.name == 'never'"},
        *({"name": f"heavy-{i}", "expression": heavy} for i in range(3))])])
    labelled = api.pod("costly")
    labelled["metadata"]["labels"] = {f"k{i}": "v" for i in range(949)}
    r = api.http.post(PODS, json=labelled)
    assert (r.status_code, r.json()["reason"], r.json()["message"]) == (
        403, "Forbidden", 'pods "costly" is forbidden: validation failed due to running out of cost budget, no '
                          "further validation rules will be run"), r.text
    assert api.create_pod("cheap", k0="v", k1="v").status_code == 201


@pytest.fixture(scope="module")
def rbac_served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    with running(start_serve(tmp_path_factory.mktemp("webhooks-rbac"), extra=("--authorization-mode", "RBAC"))) as s:
        yield s


def test_match_conditions_ask_the_authorizer(rbac_served: Serve, hook: WebhookServer) -> None:
    """Upstream's webhook environment: ``authorizer`` asks the server's authorizer (a service
    account's rights, the request's own resource), ``namespaceObject`` is null, a library error
    fails closed under Fail with upstream's message, and a result that is not false matches."""
    api = Api(rbac_served)
    try:
        api.http.post("/api/v1/namespaces", json={"metadata": {"name": NS, "labels": {"webhooks": "on"}}})
        writer = "authorizer.serviceAccount('hooked', 'writer').group('').resource('pods').namespace('hooked')"
        api.configure(VALIDATING, "authz", [
            webhook("authz.example.com", hook, "/deny", objectSelector={"matchLabels": {"case": "authz"}},
                    matchConditions=[
                        {"name": "no-namespace-object", "expression": "namespaceObject == null"},
                        {"name": "writer-may-create", "expression": writer + ".check('create').allowed()"},
                        {"name": "writer-may-not-delete", "expression": f"!{writer}.check('delete').allowed()"},
                        {"name": "me", "expression": "authorizer.requestResource.check('create').allowed() && "
                                                     "!authorizer.requestResource.check('create').errored()"}]),
            webhook("authz-error.example.com", hook, "/deny", objectSelector={"matchLabels": {"case": "error"}},
                    matchConditions=[{"name": "empty-path",
                                      "expression": "authorizer.path('').check('get').allowed()"}]),
            webhook("authz-ignored.example.com", hook, "/deny", failurePolicy="Ignore",
                    objectSelector={"matchLabels": {"case": "ignored"}},
                    matchConditions=[{"name": "bad-sa", "expression":
                                      "authorizer.serviceAccount('Bad', 'x').path('/x').check('get').allowed()"}]),
            webhook("dyn.example.com", hook, "/deny", objectSelector={"matchLabels": {"case": "dyn"}},
                    matchConditions=[{"name": "a-string", "expression": "object.metadata.name"}])])
        assert api.create_pod("before-binding", case="authz").status_code == 201  # writer may not create: excluded
        role = {"metadata": {"name": "pod-writer"},
                "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["create"]}]}
        assert api.http.post(f"/apis/rbac.authorization.k8s.io/v1/namespaces/{NS}/roles", json=role).status_code == 201
        binding = {"metadata": {"name": "pod-writer"},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pod-writer"},
                   "subjects": [{"kind": "ServiceAccount", "name": "writer", "namespace": NS}]}
        assert api.http.post(f"/apis/rbac.authorization.k8s.io/v1/namespaces/{NS}/rolebindings",
                             json=binding).status_code == 201
        for _ in range(200):  # the authorizer reads the bindings from its cache
            r = api.create_pod("after-binding", case="authz")
            if r.status_code != 201:
                break
            api.http.delete(f"{PODS}/after-binding")
            time.sleep(0.02)
        assert r.status_code == 403 and r.json()["message"].endswith("pods labelled bad are not welcome"), r.text
        assert [rv["name"] for rv in hook.seen("/deny") if rv["name"].endswith("-binding")] == ["after-binding"]
        r = api.create_pod("errs", case="error")
        assert r.status_code == 403 and r.json()["message"] == (
            "pods \"errs\" is forbidden: expression 'authorizer.path('').check('get').allowed()' resulted in "
            "error: path must not be empty")
        assert api.create_pod("ignored", case="ignored").status_code == 201  # the error under Ignore: excluded
        assert api.create_pod("dyn", case="dyn").status_code == 403  # a string result: called
    finally:
        api.close()


def test_dry_run_updates_and_deletes_are_sent(api: Api, hook: WebhookServer) -> None:
    rule = {"operations": ["*"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}
    api.configure(VALIDATING, "lifecycle", [webhook("all.example.com", hook, "/allow", rules=[rule],
                                                    objectSelector={"matchLabels": {"case": "life"}})])
    assert api.create_pod("dry", query={"dryRun": "All"}, case="life").status_code == 201
    assert api.http.get(f"{PODS}/dry").status_code == 404
    assert api.create_pod("life", case="life").status_code == 201
    assert api.http.patch(f"{PODS}/life", json={"metadata": {"annotations": {"x": "y"}}},
                          headers={"content-type": "application/merge-patch+json"}).status_code == 200
    assert api.http.delete(f"{PODS}/life", params={"gracePeriodSeconds": "0"}).status_code == 200
    seen = [rv for rv in hook.seen("/allow") if rv.get("name") in ("dry", "life")]
    assert [(rv["name"], rv["operation"], rv["dryRun"]) for rv in seen] == [
        ("dry", "CREATE", True), ("life", "CREATE", False), ("life", "UPDATE", False), ("life", "DELETE", False)]
    assert seen[0]["options"] == {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1", "dryRun": ["All"]}
    update, delete = seen[2], seen[3]
    assert update["options"]["kind"] == "UpdateOptions" and update["oldObject"]["metadata"].get("annotations") is None
    assert update["object"]["metadata"]["annotations"] == {"x": "y"}
    assert delete["object"] is None and delete["oldObject"]["metadata"]["name"] == "life"
    assert delete["options"]["kind"] == "DeleteOptions"


async def test_a_dry_run_refuses_a_webhook_with_side_effects() -> None:
    """v1 stores only None and NoneOnDryRun; a configuration written before (v1beta1's Unknown,
    Some) is refused in a dry run as upstream, before any call."""
    registry = Registry()
    pods = registry.get("", "v1", "pods")
    mutating = registry.get("admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations")
    validating = registry.get("admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations")
    assert pods is not None and mutating is not None and validating is not None
    webhooks = AdmissionWebhooks(cast("KubeApi", None), mutating, validating, "reachable")  # (never asked)
    hook = Hook("c", "some.example.com", {"name": "some.example.com", "sideEffects": "Some",
                                          "clientConfig": {"url": "https://127.0.0.1:1/"}}, False)
    request = Request(pods, "default", "p", "CREATE", {"metadata": {}}, None, "", {})
    token = DRY_RUN.set(True)
    try:
        with pytest.raises(ApiError) as e:
            await webhooks._call(Invocation(hook, pods), request, 0.0, [])
    finally:
        DRY_RUN.reset(token)
    assert (e.value.code, e.value.message) == (400, 'admission webhook "some.example.com" does not support dry run')


def test_reinvocation_if_needed(api: Api, hook: WebhookServer) -> None:
    """An IfNeeded webhook called before a later one changed the object is called once more."""
    api.configure(MUTATING, "a-count", [webhook("count.example.com", hook, "/count", reinvocationPolicy="IfNeeded",
                                                objectSelector={"matchLabels": {"case": "again"}})])
    api.configure(MUTATING, "b-mutate", [webhook("mutate2.example.com", hook, "/mutate",
                                                 objectSelector={"matchLabels": {"case": "again"}})])
    r = api.create_pod("again", case="again")
    assert r.status_code == 201
    assert r.json()["metadata"]["annotations"] == {"calls": "2"}
    assert r.json()["metadata"]["labels"]["mutated"] == "yes"


def test_a_webhook_has_its_whole_timeout(api: Api, hook: WebhookServer) -> None:
    api.configure(VALIDATING, "patient", [webhook("slower.example.com", hook, "/slower", timeoutSeconds=10,
                                                  objectSelector={"matchLabels": {"case": "slower"}})])
    assert api.create_pod("slower", case="slower").status_code == 201
    assert hook.seen("/slower")[-1]["_query"] == "timeout=10s"


def test_validating_webhooks_are_called_together(api: Api, hook: WebhookServer) -> None:
    api.configure(VALIDATING, "parallel", [
        webhook(f"slow{i}.example.com", hook, "/slow", timeoutSeconds=10,
                objectSelector={"matchLabels": {"case": "parallel"}}) for i in range(3)])
    started = time.monotonic()
    assert api.create_pod("parallel", case="parallel").status_code == 201
    assert time.monotonic() - started < 6  # 3 s each: at once, not one after the other


def _service_webhooks(api: Api, hook: WebhookServer) -> None:
    api.http.post("/api/v1/namespaces", json={"metadata": {"name": "webhooks"}})
    api.http.post("/api/v1/namespaces/webhooks/services", json={"metadata": {"name": "hook"}, "spec": {
        "ports": [{"name": "https", "port": 443, "targetPort": hook.port}]}})
    r = api.http.post("/api/v1/namespaces/webhooks/endpoints", json={"metadata": {"name": "hook"}, "subsets": [
        {"addresses": [{"ip": host_address()}], "ports": [{"name": "https", "port": hook.port}]}]})
    assert r.status_code == 201, r.text
    api.http.post("/api/v1/namespaces/webhooks/services", json={"metadata": {"name": "external"}, "spec": {
        "type": "ExternalName", "externalName": "localhost"}})
    api.http.post("/api/v1/namespaces/webhooks/services", json={"metadata": {"name": "simulated"}, "spec": {
        "selector": {"app": "simulated"}, "ports": [{"name": "https", "port": 443}]}})
    service = {"namespace": "webhooks", "name": "hook", "path": "/deny"}
    api.configure(VALIDATING, "by-service", [
        webhook("svc.example.com", hook, "/", clientConfig={"service": service, "caBundle": hook.ca_bundle},
                objectSelector={"matchLabels": {"case": "svc"}}),
        webhook("ext.example.com", hook, "/", objectSelector={"matchLabels": {"case": "ext"}}, clientConfig={
            "service": {**service, "name": "external", "port": hook.port}, "caBundle": hook.ca_bundle}),
        webhook("sim.example.com", hook, "/", objectSelector={"matchLabels": {"case": "sim"}},
                clientConfig={"service": {**service, "name": "simulated"}, "caBundle": hook.ca_bundle})])


def test_a_service_with_endpoints_a_user_wrote_is_called_and_simulated_ones_are_left_out(
        api: Api, hook: WebhookServer) -> None:
    _service_webhooks(api, hook)
    r = api.create_pod("via-service", case="svc")
    assert r.status_code == 403 and "svc.example.com" in r.json()["message"]
    assert hook.seen("/deny")[-1]["name"] == "via-service"
    assert hook.reviews[-1][1]["_host"] == "hook.webhooks.svc:443"  # and the certificate's name was checked
    r = api.create_pod("via-external-name", case="ext")
    assert r.status_code == 403 and "ext.example.com" in r.json()["message"], r.text
    assert hook.reviews[-1][1]["_host"] == f"external.webhooks.svc:{hook.port}"
    assert api.create_pod("via-simulated", case="sim").status_code == 201  # nothing answers: left out


def test_all_mode_applies_the_failure_policy_to_unreachable_services(strict: Serve, hook: WebhookServer) -> None:
    api = Api(strict)
    try:
        api.http.post("/api/v1/namespaces", json={"metadata": {"name": NS, "labels": {"webhooks": "on"}}})
        _service_webhooks(api, hook)
        r = api.create_pod("via-service", case="svc")
        assert r.status_code == 403, r.text
        r = api.create_pod("via-simulated", case="sim")
        assert r.status_code == 500 and r.json()["message"] == (
            'Internal error occurred: failed calling webhook "sim.example.com": failed to call webhook: Post '
            '"https://simulated.webhooks.svc:443/deny": service "simulated" is backed by simulated pods only')
    finally:
        api.close()


def test_a_patch_for_a_delete_fails_and_undecodable_patches_fail(api: Api, hook: WebhookServer) -> None:
    rule = {"operations": ["DELETE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}
    api.configure(MUTATING, "delete-patch", [webhook("patch-delete.example.com", hook, "/mutate", rules=[rule])])
    assert api.http.post(f"/api/v1/namespaces/{NS}/configmaps", json={"metadata": {"name": "cm"}}).status_code == 201
    r = api.http.delete(f"/api/v1/namespaces/{NS}/configmaps/cm")
    assert r.status_code == 500 and r.json()["message"] == (
        'Internal error occurred: admission webhook "patch-delete.example.com" attempted to modify the object, '
        "which is not supported for this operation")
    # what client-go or the json-patch library cannot decode fails the call, in Go's words
    rule = {**rule, "operations": ["CREATE"]}
    expected = {
        "not-base64": "failed to call webhook: illegal base64 data at input byte 3",
        "not-json": "received undecodable patch in webhook response: invalid character '\\'' looking for "
                    "beginning of object key string",
        "not-a-list": "received undecodable patch in webhook response: json: cannot unmarshal object into Go "
                      "value of type jsonpatch.Patch",
        # (was read as infinity, written back as null)
        "out-of-range": "received undecodable patch in webhook response: json: cannot unmarshal number 1e400 into "
                        "Go value of type float64",
    }
    api.configure(MUTATING, "undecodable-patches", [
        webhook(f"{case}.example.com", hook, f"/patch-{case}", rules=[rule],
                objectSelector={"matchLabels": {"patch": case}}) for case in expected])
    for case, reason in expected.items():
        r = api.http.post(f"/api/v1/namespaces/{NS}/configmaps", json={
            "metadata": {"name": f"cm-{case}", "labels": {"patch": case}}})
        assert r.status_code == 500 and r.json()["message"] == (
            f'Internal error occurred: failed calling webhook "{case}.example.com": {reason}'), r.text
        assert api.http.get(f"/api/v1/namespaces/{NS}/configmaps/cm-{case}").status_code == 404


def test_a_patch_applies_as_upstreams_json_patch_library(api: Api, hook: WebhookServer) -> None:
    """A webhook's patch goes through upstream's json-patch library's rules: a replace of a
    missing key adds it; one that does not apply is upstream's 500 with the library's words."""
    rule = {"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}
    api.configure(MUTATING, "json-patch-rules", [
        webhook("replace.example.com", hook, "/replace-missing", rules=[rule],
                objectSelector={"matchLabels": {"patch": "replace"}}),
        webhook("remove.example.com", hook, "/remove-missing", rules=[rule],
                objectSelector={"matchLabels": {"patch": "remove"}})])
    r = api.http.post(f"/api/v1/namespaces/{NS}/configmaps", json={
        "metadata": {"name": "replaced", "labels": {"patch": "replace"}}, "data": {"a": "1"}})
    assert r.status_code == 201, r.text
    assert r.json()["data"] == {"a": "1", "added": "yes"}
    r = api.http.post(f"/api/v1/namespaces/{NS}/configmaps", json={
        "metadata": {"name": "removed", "labels": {"patch": "remove"}}, "data": {"a": "1"}})
    assert r.status_code == 500 and r.json()["message"] == (
        "Internal error occurred: error in remove for path: '/data/nope': Unable to remove nonexistent key: nope: "
        "missing value"), r.text


def test_match_policy_equivalent_calls_a_webhook_of_another_version_with_it(api: Api, hook: WebhookServer) -> None:
    """An autoscaling/v2 write to a webhook whose rule names autoscaling/v1: called with the v1
    object (``kind`` v1, ``requestKind`` v2), its patch applied to the v2 object; with
    ``matchPolicy: Exact`` not called."""
    rule = {"operations": ["CREATE"], "apiGroups": ["autoscaling"], "apiVersions": ["v1"],
            "resources": ["horizontalpodautoscalers"]}
    api.configure(MUTATING, "hpa-v1", [webhook("hpa.example.com", hook, "/mutate", rules=[rule]),
                                       webhook("exact.example.com", hook, "/count", rules=[rule], matchPolicy="Exact")])
    target = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}
    cpu = {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 60}}
    hpa: dict[str, Any] = {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
                           "metadata": {"name": "web"}, "spec": {"scaleTargetRef": target, "maxReplicas": 5,
                                                                 "metrics": [{"type": "Resource", "resource": cpu}]}}
    r = api.http.post(f"/apis/autoscaling/v2/namespaces/{NS}/horizontalpodautoscalers", json=hpa)
    assert r.status_code == 201, r.text
    assert r.json()["metadata"]["labels"] == {"mutated": "yes"}
    assert r.json()["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"] == 60
    review = next(rv for rv in hook.seen("/mutate") if rv.get("name") == "web")
    assert review["kind"] == {"group": "autoscaling", "version": "v1", "kind": "HorizontalPodAutoscaler"}
    assert review["requestKind"] == {"group": "autoscaling", "version": "v2", "kind": "HorizontalPodAutoscaler"}
    assert review["resource"]["version"] == "v1" and review["requestResource"]["version"] == "v2"
    assert review["object"]["apiVersion"] == "autoscaling/v1"
    assert review["object"]["spec"]["targetCPUUtilizationPercentage"] == 60
    assert not [rv for rv in hook.seen("/count") if rv.get("name") == "web"]  # Exact: v2 is not v1
    r = api.http.post(f"/apis/autoscaling/v1/namespaces/{NS}/horizontalpodautoscalers", json={
        **hpa, "apiVersion": "autoscaling/v1", "metadata": {"name": "web-v1"},
        "spec": {"scaleTargetRef": target, "maxReplicas": 3}})
    assert r.status_code == 201, r.text
    assert [rv["kind"]["version"] for rv in hook.seen("/count") if rv.get("name") == "web-v1"] == ["v1"]


def _samples(api: Api, *names: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """The server's /metrics samples of the families ``names``: (sample name, labels) -> value
    (prometheus_client's parser names a counter's samples ``..._total`` even where the text has none)."""
    text = api.http.get("/metrics").text
    return {(s.name, frozenset(s.labels.items())): s.value for family in text_string_to_metric_families(text)
            if family.name in names for s in family.samples}


def _value(samples: dict[tuple[str, frozenset[tuple[str, str]]], float], sample: str, /, **labels: str) -> float:
    """The sum of the samples named ``sample`` whose labels include ``labels``."""
    wanted = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == sample and wanted <= ls)


def test_webhook_metrics_as_upstreams(api: Api, hook: WebhookServer) -> None:
    """apiserver_admission_webhook_*: a call allowed (200), patched, refused (its code, no_error),
    failed and failing open (fail_open_count; a validating webhook's failed call is 400, a
    mutating one's 503), and the match conditions' counts."""
    families = ("apiserver_admission_webhook_request", "apiserver_admission_webhook_rejection_count",
                "apiserver_admission_webhook_fail_open_count", "apiserver_admission_webhook_admission_duration_seconds",
                "apiserver_admission_match_condition_exclusions")
    down = {"url": "https://127.0.0.1:1/", "caBundle": hook.ca_bundle}
    api.configure(MUTATING, "m-metrics", [
        webhook("m.metrics.example.com", hook, "/mutate", objectSelector={"matchLabels": {"case": "metrics"}}),
        webhook("m-down.metrics.example.com", hook, "/", clientConfig=down, failurePolicy="Ignore",
                objectSelector={"matchLabels": {"case": "metrics"}})])
    api.configure(VALIDATING, "v-metrics", [
        webhook("deny.metrics.example.com", hook, "/deny", objectSelector={"matchLabels": {"case": "metrics"}},
                matchConditions=[{"name": "bad", "expression": "object.metadata.name.startsWith('bad')"}]),
        webhook("v-down.metrics.example.com", hook, "/", clientConfig=down,
                objectSelector={"matchLabels": {"case": "metrics-down"}})])
    assert api.create_pod("fine", case="metrics").status_code == 201
    assert api.create_pod("bad", case="metrics").status_code == 403
    assert api.create_pod("down", case="metrics-down").status_code == 500
    m = _samples(api, *families)
    request = "apiserver_admission_webhook_request_total"
    assert _value(m, request, name="m.metrics.example.com", type="admit", operation="CREATE", code="200",
                  rejected="false") == 2
    assert _value(m, request, name="m-down.metrics.example.com", type="admit", code="503", rejected="false") == 2
    assert _value(m, "apiserver_admission_webhook_fail_open_count_total", name="m-down.metrics.example.com",
                  type="admit") == 2
    assert _value(m, request, name="deny.metrics.example.com", type="validating", code="403", rejected="true") == 1
    assert _value(m, "apiserver_admission_webhook_rejection_count_total", name="deny.metrics.example.com",
                  type="validating", operation="CREATE", error_type="no_error", rejection_code="403") == 1
    assert _value(m, "apiserver_admission_match_condition_exclusions_total", name="deny.metrics.example.com",
                  kind="webhook", type="validating", operation="CREATE") == 1  # "fine"
    assert _value(m, request, name="v-down.metrics.example.com", code="400", rejected="true") == 1
    assert _value(m, "apiserver_admission_webhook_rejection_count_total", name="v-down.metrics.example.com",
                  error_type="calling_webhook_error", rejection_code="400") == 1
    duration = "apiserver_admission_webhook_admission_duration_seconds_count"
    assert _value(m, duration, name="deny.metrics.example.com", type="validating", operation="CREATE",
                  rejected="true") == 1
    text = api.http.get("/metrics").text  # named as client_golang names them: no _total on a *_count counter
    assert "# TYPE apiserver_admission_webhook_rejection_count counter" in text
    assert "apiserver_admission_webhook_rejection_count_total" not in text


def test_the_request_sli_leaves_webhook_time_out(api: Api, hook: WebhookServer) -> None:
    """A create that waited 0.7 s for a validating webhook: apiserver_request_duration_seconds
    counts it above 0.6 s, apiserver_request_sli_duration_seconds (as upstream's) at its own
    duration, under 0.6 s; a create without a webhook moves both alike."""
    families = ("apiserver_request_duration_seconds", "apiserver_request_sli_duration_seconds")
    api.configure(VALIDATING, "nap", [webhook("nap.example.com", hook, "/nap",
                                              objectSelector={"matchLabels": {"case": "nap"}})])
    series = {"verb": "POST", "resource": "pods", "scope": "resource", "subresource": "", "group": ""}

    def counts() -> tuple[float, float, float, float]:
        m = _samples(api, *families)
        return (_value(m, "apiserver_request_duration_seconds_bucket", le="0.6", dry_run="", **series),
                _value(m, "apiserver_request_duration_seconds_count", dry_run="", **series),
                _value(m, "apiserver_request_sli_duration_seconds_bucket", le="0.6", **series),
                _value(m, "apiserver_request_sli_duration_seconds_count", **series))

    before = counts()
    started = time.perf_counter()
    assert api.create_pod("napped", case="nap").status_code == 201
    assert time.perf_counter() - started >= 0.7
    after = counts()
    assert [b - a for a, b in zip(before, after, strict=True)] == [0, 1, 1, 1]
    assert api.create_pod("awake").status_code == 201
    again = counts()
    assert [b - a for a, b in zip(after, again, strict=True)] == [1, 1, 1, 1]


def test_subresources_with_handlers_of_their_own_are_admitted_as_upstreams(api: Api, hook: WebhookServer) -> None:
    """A binding is a CREATE of pods/binding with the Binding (of ``bindings`` in the legacy form),
    an eviction a CREATE of pods/eviction with the Eviction, a scale an UPDATE of
    deployments/scale with the Scales; a mutating webhook's patch of a Scale is what is written,
    and a refusal refuses the write."""
    def on(*resources: str, operations: tuple[str, ...] = ("CREATE", "UPDATE")) -> list[dict[str, Any]]:
        return [{"operations": list(operations), "apiGroups": ["", "apps"], "apiVersions": ["v1"],
                 "resources": list(resources)}]

    api.configure(VALIDATING, "subresources", [
        webhook("seen.sub.example.com", hook, "/", rules=on("pods/binding", "bindings", "pods/eviction",
                                                           "deployments/scale")),
        webhook("deny.sub.example.com", hook, "/deny", rules=on("pods/binding", "pods/eviction"),
                objectSelector={"matchLabels": {"bad": "true"}})])
    api.configure(MUTATING, "scale-to-3", [webhook("scale.sub.example.com", hook, "/scale-to-3",
                                                   rules=on("deployments/scale", operations=("UPDATE",)))])

    def review(kind: str, name: str) -> dict[str, Any]:
        return next(rv for rv in reversed(hook.seen("/")) if rv["kind"]["kind"] == kind and rv.get("name") == name)

    for pod in ("bound", "legacy", "evicted"):
        assert api.create_pod(pod).status_code == 201
    target = {"apiVersion": "v1", "kind": "Node", "name": "node-1"}
    r = api.http.post(f"{PODS}/bound/binding", json={"apiVersion": "v1", "kind": "Binding",
                                                     "metadata": {"name": "bound"}, "target": target})
    assert r.status_code == 201, r.text
    rv = review("Binding", "bound")
    assert (rv["operation"], rv["subResource"], rv["resource"], rv["requestKind"]["kind"]) == \
        ("CREATE", "binding", {"group": "", "version": "v1", "resource": "pods"}, "Binding")
    assert rv["object"]["target"] == target and rv["object"]["metadata"]["namespace"] == NS
    assert rv["oldObject"] is None and rv["kind"] == {"group": "", "version": "v1", "kind": "Binding"}
    r = api.http.post(f"/api/v1/namespaces/{NS}/bindings", json={"apiVersion": "v1", "kind": "Binding",
                                                                 "metadata": {"name": "legacy"}, "target": target})
    assert r.status_code == 201, r.text
    rv = review("Binding", "legacy")
    assert rv["resource"]["resource"] == "bindings" and "subResource" not in rv

    r = api.http.post(f"{PODS}/evicted/eviction", json={"apiVersion": "policy/v1", "kind": "Eviction",
                                                        "metadata": {"name": "evicted"}})
    assert r.status_code == 201, r.text
    rv = review("Eviction", "evicted")
    assert (rv["kind"], rv["operation"], rv["subResource"]) == \
        ({"group": "policy", "version": "v1", "kind": "Eviction"}, "CREATE", "eviction")
    assert rv["object"]["metadata"] == {"name": "evicted", "namespace": NS}  # (a zero creationTimestamp omitted)

    for pod in ("bad-bind", "bad-evict"):
        assert api.create_pod(pod).status_code == 201
    bad = {"bad": "true"}  # (the object selector judges the request's object: the Binding, the Eviction)
    r = api.http.post(f"{PODS}/bad-bind/binding", json={"apiVersion": "v1", "kind": "Binding", "target": target,
                                                        "metadata": {"name": "bad-bind", "labels": bad}})
    assert r.status_code == 403 and "deny.sub.example.com" in r.json()["message"], r.text
    assert "nodeName" not in api.http.get(f"{PODS}/bad-bind").json()["spec"]
    r = api.http.post(f"{PODS}/bad-evict/eviction", json={"apiVersion": "policy/v1", "kind": "Eviction",
                                                          "metadata": {"name": "bad-evict", "labels": bad}})
    assert r.status_code == 403 and "deny.sub.example.com" in r.json()["message"], r.text
    assert api.http.get(f"{PODS}/bad-evict").status_code == 200

    deployments = f"/apis/apps/v1/namespaces/{NS}/deployments"
    labels = {"app": "scaled"}
    r = api.http.post(deployments, json={"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
                                         "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                                                  "template": {"metadata": {"labels": labels},
                                                               "spec": {"containers": [{"name": "c", "image": "x"}]}}}})
    assert r.status_code == 201, r.text
    r = api.http.patch(f"{deployments}/web/scale", json={"spec": {"replicas": 2}},
                       headers={"content-type": "application/merge-patch+json"})
    assert r.status_code == 200, r.text
    assert r.json()["spec"]["replicas"] == 3  # the mutating webhook's
    assert api.http.get(f"{deployments}/web").json()["spec"]["replicas"] == 3
    rv = review("Scale", "web")
    assert (rv["kind"], rv["operation"], rv["subResource"], rv["resource"]["resource"]) == \
        ({"group": "autoscaling", "version": "v1", "kind": "Scale"}, "UPDATE", "scale", "deployments")
    assert (rv["oldObject"]["spec"]["replicas"], rv["object"]["spec"]["replicas"]) == (1, 3)
    scaled = [q for q in hook.seen("/scale-to-3") if q.get("name") == "web"]
    assert scaled and scaled[-1]["object"]["spec"]["replicas"] == 2


def test_an_evictions_delete_is_not_admitted_as_a_pods_delete(api: Api, hook: WebhookServer) -> None:
    """Upstream's EvictionREST deletes the pod through its store once the Eviction was admitted:
    a webhook refusing pod DELETEs refuses a plain delete, and neither sees nor stops an eviction."""
    api.configure(VALIDATING, "no-pod-deletes", [
        webhook("nodelete.example.com", hook, "/deny", objectSelector={"matchLabels": {"keep": "true"}},
                rules=[{"operations": ["DELETE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}])])
    for pod in ("kept", "evicted-anyway"):
        assert api.create_pod(pod, keep="true").status_code == 201
    r = api.http.delete(f"{PODS}/kept")
    assert r.status_code == 403 and "nodelete.example.com" in r.json()["message"], r.text
    seen = len(hook.seen("/deny"))
    r = api.http.post(f"{PODS}/evicted-anyway/eviction", json={"apiVersion": "policy/v1", "kind": "Eviction",
                                                               "metadata": {"name": "evicted-anyway"}})
    assert r.status_code == 201, r.text
    assert api.http.get(f"{PODS}/evicted-anyway").status_code == 404  # unbound: deleted at once
    assert len(hook.seen("/deny")) == seen
    assert api.http.get(f"{PODS}/kept").status_code == 200


def test_a_token_request_is_admitted_as_a_create_of_serviceaccounts_token(api: Api, hook: WebhookServer) -> None:
    """As upstream's TokenREST: the mutating webhooks get the TokenRequest as posted (its
    namespace filled in), the validating ones the mutated request once validated and defaulted
    (the account's name and uid, the server's audiences, an empty status); a refusal issues no token."""
    rules = [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
              "resources": ["serviceaccounts/token"]}]
    api.configure(MUTATING, "token-mutate", [webhook("mutate.token.example.com", hook, "/mutate", rules=rules)])
    api.configure(VALIDATING, "token-check", [
        webhook("seen.token.example.com", hook, "/", rules=rules),
        webhook("deny.token.example.com", hook, "/deny", rules=rules, objectSelector={"matchLabels": {"bad": "true"}})])
    url = f"/api/v1/namespaces/{NS}/serviceaccounts/default/token"
    r = api.http.post(url, json={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                                 "metadata": {"labels": {"asked": "1"}}, "spec": {"expirationSeconds": 1200}})
    assert r.status_code == 201, r.text
    assert r.json()["status"]["token"]
    kind = {"group": "authentication.k8s.io", "version": "v1", "kind": "TokenRequest"}
    (mutated,) = [rv for rv in hook.seen("/mutate") if rv["kind"] == kind]
    assert (mutated["operation"], mutated["subResource"], mutated["name"], mutated["namespace"]) == \
        ("CREATE", "token", "default", NS)
    assert mutated["resource"] == {"group": "", "version": "v1", "resource": "serviceaccounts"}
    assert mutated["object"]["metadata"] == {"namespace": NS, "labels": {"asked": "1"}}
    (validated,) = [rv for rv in hook.seen("/") if rv["kind"] == kind]
    meta = validated["object"]["metadata"]
    account = api.http.get(f"/api/v1/namespaces/{NS}/serviceaccounts/default").json()
    assert meta["labels"] == {"asked": "1", "mutated": "yes"}  # the mutating webhook's patch
    assert (meta["name"], meta["namespace"], meta["uid"]) == ("default", NS, account["metadata"]["uid"])
    assert meta["creationTimestamp"] and validated["object"]["spec"]["expirationSeconds"] == 1200
    assert validated["object"]["spec"]["audiences"] and "boundObjectRef" not in validated["object"]["spec"]
    assert validated["object"]["status"] == {"token": "", "expirationTimestamp": None}

    r = api.http.post(url, json={"metadata": {"labels": {"bad": "true"}}, "spec": {}})
    assert r.status_code == 403 and "deny.token.example.com" in r.json()["message"], r.text
    assert r.json()["kind"] == "Status"  # no TokenRequest, no token
    r = api.http.post(f"/api/v1/namespaces/{NS}/serviceaccounts/nobody/token", json={"spec": {}})
    assert r.status_code == 404, r.text  # the account is looked up after mutation, before validation
