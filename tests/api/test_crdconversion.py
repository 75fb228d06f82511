"""CRD conversion webhooks (api/crdconversion.py) called as kube-apiserver calls them: a real
``controlplane serve`` posting ConversionReviews over HTTPS to a real webhook server in this
process (tests/api/webhook_server.py ``/convert``: v1's ``spec.size`` is v2's ``spec.replicas``),
with the real kubectl once."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from controlplane.api.crdconversion import ConversionWebhooks
from controlplane.api.errors import ApiError
from controlplane.api.webhookcall import WebhookClients
from controlplane.registry.crd import served_types
from tests.api.test_webhooks import MUTATING, Api, _samples, _value, webhook
from tests.api.webhook_server import WebhookServer
from tests.e2e.test_kubectl import KUBECTL
from tests.test_cli import Serve, running, start_serve

GROUP = "conv.example.com"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


def _path(version: str, plural: str = "widgets", name: str = "") -> str:
    return f"/apis/{GROUP}/{version}/namespaces/default/{plural}" + (f"/{name}" if name else "")


def _crd(kind: str, client_config: dict[str, Any]) -> dict[str, Any]:
    plural = kind.lower() + "s"

    def version(name: str, field: str, storage: bool) -> dict[str, Any]:
        spec = {"type": "object", "properties": {field: {"type": "integer"}}}
        return {"name": name, "served": True, "storage": storage,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": spec}}}}

    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.{GROUP}"},
            "spec": {"group": GROUP, "scope": "Namespaced",
                     "names": {"plural": plural, "singular": kind.lower(), "kind": kind},
                     "versions": [version("v1", "size", True), version("v2", "replicas", False)],
                     "conversion": {"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1", "v1beta1"],
                                                                       "clientConfig": client_config}}}}


def _define(api: Api, kind: str, client_config: dict[str, Any]) -> None:
    r = api.http.post(CRDS, json=_crd(kind, client_config))
    assert r.status_code == 201, r.text
    api.made.append(f"{CRDS}/{kind.lower()}s.{GROUP}")
    for _ in range(500):  # established, and served in both versions
        if all(api.http.get(_path(v, kind.lower() + "s")).status_code == 200 for v in ("v1", "v2")):
            return
        time.sleep(0.01)
    raise AssertionError(f"{kind} never served")


def _create(api: Api, version: str, plural: str, name: str, spec: dict[str, Any]) -> httpx.Response:
    kind = plural[:-1].capitalize()
    return api.http.post(_path(version, plural), json={"apiVersion": f"{GROUP}/{version}", "kind": kind,
                                                       "metadata": {"name": name}, "spec": spec})


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    with running(start_serve(tmp_path_factory.mktemp("conversion-serve"))) as s:
        yield s


@pytest.fixture(scope="module")
def api(served: Serve, hook: WebhookServer) -> Iterator[Api]:
    made = Api(served)
    _define(made, "Widget", {"url": hook.url("/convert"), "caBundle": hook.ca_bundle})
    try:
        yield made
    finally:
        made.close()
        made.http.close()


def test_a_v1_object_read_as_v2_is_converted_by_the_webhook(api: Api, hook: WebhookServer) -> None:
    r = _create(api, "v1", "widgets", "small", {"size": 3})
    assert r.status_code == 201, r.text
    assert r.json()["spec"] == {"size": 3}
    assert not [q for q in hook.seen("/convert") if q["objects"][0]["metadata"]["name"] == "small"]  # stored as is

    got = api.http.get(_path("v2", name="small"))
    assert got.status_code == 200, got.text
    obj = got.json()
    assert obj["apiVersion"] == f"{GROUP}/v2" and obj["kind"] == "Widget"
    assert obj["spec"] == {"replicas": 3}  # renamed by the webhook
    assert obj["metadata"]["labels"] == {"converted-to": "v2"}  # labels may change
    assert obj["metadata"]["generation"] == 1  # the rest of the metadata is restored, as upstream's
    review = [q for q in hook.seen("/convert") if q["objects"][0]["metadata"]["name"] == "small"][-1]
    assert review["desiredAPIVersion"] == f"{GROUP}/v2" and review["uid"]
    assert [o["apiVersion"] for o in review["objects"]] == [f"{GROUP}/v1"]
    assert review["_query"] == "timeout=30s"

    # read in the stored version: no call
    before = len(hook.seen("/convert"))
    assert api.http.get(_path("v1", name="small")).json()["spec"] == {"size": 3}
    assert len(hook.seen("/convert")) == before


def test_a_create_in_v2_is_stored_in_v1_and_an_update_converts_its_old_object(api: Api, hook: WebhookServer) -> None:
    r = _create(api, "v2", "widgets", "large", {"replicas": 7})
    assert r.status_code == 201, r.text
    assert r.json()["apiVersion"] == f"{GROUP}/v2" and r.json()["spec"] == {"replicas": 7}
    # the answer is what was stored, converted back: both calls' labels, the metadata restored
    assert r.json()["metadata"]["labels"] == {"converted-to": "v2"} and r.json()["metadata"]["generation"] == 1
    assert r.json()["metadata"]["resourceVersion"]
    reviews = [q for q in hook.seen("/convert") if q["objects"][0]["metadata"]["name"] == "large"]
    assert [q["desiredAPIVersion"] for q in reviews] == [f"{GROUP}/v1", f"{GROUP}/v2"]  # stored, then back
    before = len(hook.seen("/convert"))
    stored = api.http.get(_path("v1", name="large")).json()
    assert stored["spec"] == {"size": 7} and stored["metadata"]["labels"] == {"converted-to": "v1"}
    assert len(hook.seen("/convert")) == before  # stored in v1: read without a call

    # a merge patch through v2 applies to the stored object as v2 shows it
    patched = api.http.patch(_path("v2", name="large"), json={"spec": {"replicas": 8}},
                             headers={"content-type": "application/merge-patch+json"})
    assert patched.status_code == 200, patched.text
    assert patched.json()["spec"] == {"replicas": 8}
    assert patched.json()["metadata"]["resourceVersion"] != r.json()["metadata"]["resourceVersion"]
    assert api.http.get(_path("v1", name="large")).json()["spec"] == {"size": 8}


def test_a_list_is_converted_in_one_review_and_a_watch_is_converted(api: Api, hook: WebhookServer) -> None:
    for name, size in (("l1", 1), ("l2", 2)):
        assert _create(api, "v1", "widgets", name, {"size": size}).status_code == 201
    before = len(hook.seen("/convert"))
    listed = api.http.get(_path("v2"))
    assert listed.status_code == 200, listed.text
    body = listed.json()
    assert body["apiVersion"] == f"{GROUP}/v2" and body["kind"] == "WidgetList"
    by_name = {i["metadata"]["name"]: i for i in body["items"]}
    assert by_name["l1"]["spec"] == {"replicas": 1} and by_name["l2"]["spec"] == {"replicas": 2}
    assert all(i["apiVersion"] == f"{GROUP}/v2" and "size" not in i["spec"] for i in body["items"])
    reviews = hook.seen("/convert")[before:]
    assert len(reviews) == 1 and len(reviews[0]["objects"]) == len(body["items"])

    with api.http.stream("GET", _path("v2"), params={"watch": "1", "resourceVersion": "0",
                                                     "timeoutSeconds": "2"}) as w:
        events = [json.loads(line) for line in w.iter_lines() if line]
    added = {e["object"]["metadata"]["name"]: e["object"] for e in events if e["type"] == "ADDED"}
    assert added["l1"]["spec"] == {"replicas": 1} and added["l1"]["apiVersion"] == f"{GROUP}/v2"
    assert added["l2"]["spec"] == {"replicas": 2} and "size" not in added["l2"]["spec"]


def test_kubectl_reads_the_other_version(api: Api, served: Serve) -> None:
    assert _create(api, "v1", "widgets", "kubectl", {"size": 4}).status_code == 201
    out = subprocess.run([KUBECTL, "--kubeconfig", str(served.kubeconfig), "get", f"widgets.v2.{GROUP}",
                          "kubectl", "-n", "default", "-o", "json"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["spec"] == {"replicas": 4}


@pytest.mark.parametrize(("path", "why"), [
    ("/convert-fail", "failed: cannot convert widgets today"),
    ("/convert-short", "returned 0 objects, expected 1"),
    ("/convert-rename", "returned invalid object: must have the same name: x != x-renamed"),
])
def test_a_failed_conversion_is_upstreams_500(api: Api, hook: WebhookServer, path: str, why: str) -> None:
    kind = {"/convert-fail": "Failing", "/convert-short": "Short", "/convert-rename": "Renaming"}[path]
    plural = kind.lower() + "s"
    _define(api, kind, {"url": hook.url(path), "caBundle": hook.ca_bundle})
    assert _create(api, "v1", plural, "x", {"size": 1}).status_code == 201  # stored as is: no call

    got = api.http.get(_path("v2", plural, "x"))
    assert got.status_code == 500
    status = got.json()
    assert status["message"] == f"conversion webhook for {GROUP}/v1, Kind={kind} {why}"
    assert "reason" not in status and status["code"] == 500

    listed = api.http.get(_path("v2", plural))
    assert listed.status_code == 500
    assert listed.json()["message"].startswith(f"conversion webhook for {GROUP}/v1, Kind={kind}List ")

    created = _create(api, "v2", plural, "y", {"replicas": 1})
    assert created.status_code == 500
    assert created.json()["message"].startswith(f"conversion webhook for {GROUP}/v2, Kind={kind} ")
    assert api.http.get(_path("v1", plural, "y")).status_code == 404  # nothing stored


def test_an_unreachable_webhook_is_left_out_in_reachable_mode(api: Api) -> None:
    # a Service backed by (simulated) pods: nothing on this machine answers for it
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "converter"},
               "spec": {"selector": {"app": "converter"}, "ports": [{"port": 443}]}}
    assert api.http.post("/api/v1/namespaces/default/services", json=service).status_code == 201
    api.made.append("/api/v1/namespaces/default/services/converter")
    _define(api, "Gadget", {"service": {"name": "converter", "namespace": "default", "path": "/convert"}})
    assert _create(api, "v1", "gadgets", "g", {"size": 2}).status_code == 201
    got = api.http.get(_path("v2", "gadgets", "g"))
    assert got.status_code == 200, got.text
    assert got.json()["apiVersion"] == f"{GROUP}/v2"
    assert "spec" not in got.json() or got.json()["spec"] == {}  # None conversion: v2's schema prunes size


def test_an_unreachable_webhook_fails_in_all_mode(tmp_path_factory: pytest.TempPathFactory) -> None:
    with running(start_serve(tmp_path_factory.mktemp("conversion-all"), extra=("--admission-webhooks", "all"))) as s:
        api = Api(s)
        try:
            _define(api, "Gadget", {"service": {"name": "missing", "namespace": "default", "path": "/convert"}})
            assert _create(api, "v1", "gadgets", "g", {"size": 2}).status_code == 201
            got = api.http.get(_path("v2", "gadgets", "g"))
            assert got.status_code == 500
            assert got.json()["message"] == (f'conversion webhook for {GROUP}/v1, Kind=Gadget failed: Post '
                                             f'"https://missing.default.svc:443/convert": service "missing" not found')
        finally:
            api.close()
            api.http.close()


async def test_review_versions_and_response_checks(hook: WebhookServer) -> None:
    """v1beta1 when it is the only version listed; a v1 answer of another kind is refused."""
    crd = _crd("Widget", {"url": hook.url("/convert"), "caBundle": hook.ca_bundle})
    crd["spec"]["conversion"]["webhook"]["conversionReviewVersions"] = ["v1beta1"]
    crd["status"] = {"acceptedNames": {"plural": "widgets", "kind": "Widget"},
                     "conditions": [{"type": "Established", "status": "True"}]}
    v2 = next(t for t in served_types(crd) if t.version == "v2")

    async def lookup(kind: str, namespace: str, name: str) -> None:
        return None

    clients = WebhookClients()
    conversions = ConversionWebhooks(clients, lookup, "all")
    try:
        obj = {"apiVersion": f"{GROUP}/v1", "kind": "Widget", "metadata": {"name": "a", "uid": "u"},
               "spec": {"size": 1}}
        out = await conversions.served(v2, [json.dumps(obj).encode()])
        assert json.loads(out[0])["spec"] == {"replicas": 1}
        assert hook.reviews[-1][1]["desiredAPIVersion"] == f"{GROUP}/v2"
        assert hook.reviews[-1][1]["_review"] == "apiextensions.k8s.io/v1beta1"

        crd["spec"]["conversion"]["webhook"]["conversionReviewVersions"] = ["v2"]
        v2 = next(t for t in served_types(crd) if t.version == "v2")
        with pytest.raises(ApiError) as e:
            await conversions.served(v2, [json.dumps(obj).encode()])
        assert e.value.message == "no supported conversion review versions"  # (upstream's, unwrapped)
    finally:
        await clients.close()


def test_an_admission_webhook_of_the_other_version_gets_the_object_converted(api: Api, hook: WebhookServer) -> None:
    """``matchPolicy: Equivalent``: a webhook for v1 widgets called for a v2 create gets the object
    as the conversion webhook turns it into v1, and its patch is converted back."""
    rule = {"apiGroups": [GROUP], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["widgets"]}
    selector = {"matchLabels": {"admit": "me"}}
    api.configure(MUTATING, "widgets-v1", [webhook("widgets.v1.test", hook, "/mutate", rules=[rule],
                                                    namespaceSelector={}, objectSelector=selector)])
    r = api.http.post(_path("v2"), json={"apiVersion": f"{GROUP}/v2", "kind": "Widget",
                                         "metadata": {"name": "admitted", "labels": {"admit": "me"}},
                                         "spec": {"replicas": 6}})
    assert r.status_code == 201, r.text
    review = [q for q in hook.seen("/mutate") if q.get("name") == "admitted"][-1]
    assert review["kind"]["version"] == "v1" and review["requestKind"]["version"] == "v2"
    assert review["object"]["apiVersion"] == f"{GROUP}/v1" and review["object"]["spec"] == {"size": 6}
    assert r.json()["spec"] == {"replicas": 6} and r.json()["metadata"]["labels"]["mutated"] == "yes"
    assert api.http.get(_path("v1", name="admitted")).json()["metadata"]["labels"]["mutated"] == "yes"


def test_a_dry_run_write_in_the_other_version_calls_no_webhook(api: Api, hook: WebhookServer) -> None:
    before = len(hook.seen("/convert"))
    r = api.http.post(_path("v2"), params={"dryRun": "All"},
                      json={"apiVersion": f"{GROUP}/v2", "kind": "Widget", "metadata": {"name": "dry"},
                            "spec": {"replicas": 2}})
    assert r.status_code == 201, r.text
    assert r.json()["spec"] == {"replicas": 2} and "resourceVersion" not in r.json()["metadata"]
    assert len(hook.seen("/convert")) == before
    assert api.http.get(_path("v1", name="dry")).status_code == 404


def test_conversion_metrics_as_upstreams(api: Api, hook: WebhookServer) -> None:
    """apiserver_conversion_webhook_request_total / _duration_seconds by result and failure type,
    and apiserver_crd_conversion_webhook_duration_seconds by CRD and versions."""
    families = ("apiserver_conversion_webhook_request", "apiserver_crd_conversion_webhook_duration_seconds")
    before = _samples(api, *families)
    assert _create(api, "v1", "widgets", "metered", {"size": 2}).status_code == 201
    assert api.http.get(_path("v2", name="metered")).status_code == 200
    _define(api, "Meter", {"url": hook.url("/convert-fail"), "caBundle": hook.ca_bundle})
    assert _create(api, "v1", "meters", "m", {"size": 1}).status_code == 201
    assert api.http.get(_path("v2", "meters", "m")).status_code == 500
    after = _samples(api, *families)

    def grew(sample: str, **labels: str) -> float:
        return _value(after, sample, **labels) - _value(before, sample, **labels)

    assert grew("apiserver_conversion_webhook_request_total", result="success", failure_type="") == 1
    assert grew("apiserver_conversion_webhook_request_total", result="failure",
                failure_type="conversion_webhook_malformed_response_failure") == 1
    assert grew("apiserver_crd_conversion_webhook_duration_seconds_count", crd_name=f"widgets.{GROUP}",
                from_version="v1", to_version="v2", succeeded="true") == 1
    assert grew("apiserver_crd_conversion_webhook_duration_seconds_count", crd_name=f"meters.{GROUP}",
                from_version="v1", to_version="v2", succeeded="false") == 1
