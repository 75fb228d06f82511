"""The fourth fuzzing round's findings, over a real socket (httpx to the project's HTTP/1.1
protocol): the bodies of the subresource writes handled on their own (Scale, Eviction,
TokenRequest, Binding) decoded as upstream's handlers decode them, and a write's query
options validated as its options kind; each answer a Status of upstream's code, reason and
words, and what was stored left as it was."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from tests.api import test_bad_input_http
from tests.api.test_bad_input_http import Served

NS = "/api/v1/namespaces/default"
DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"
SCALE = f"{DEPLOYMENTS}/d/scale"
CMS = f"{NS}/configmaps"
MERGE = {"Content-Type": "application/merge-patch+json"}
SCHEME = 'in scheme "k8s.io/kubernetes/pkg/api/legacyscheme/scheme.go:30"'
served = test_bad_input_http.served  # the fixture: a server on a socket, and its in-process client


def message_of(resp: httpx.Response, code: int, reason: str) -> str:
    status: dict[str, Any] = resp.json()
    assert (resp.status_code, status["kind"], status["code"], status.get("reason")) == (
        code, "Status", code, reason), status
    return str(status["message"])


def scale(**fields: Any) -> dict[str, Any]:
    return {"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "d"}, "spec": {"replicas": 3},
            **fields}


async def deployment(served: Served) -> str:
    template = {"metadata": {"labels": {"app": "d"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}
    created = await served.client.create(DEPLOYMENTS, {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "d"}}, "template": template}})
    return str(created["metadata"]["resourceVersion"])


async def test_a_scale_put_is_decoded_as_a_scale(served: Served) -> None:
    # each was a 200 that scaled the Deployment (another kind's body, a status that is no
    # Scale's, an unknown field under Strict), or a 400 in words of this server's own
    version = await deployment(served)
    bad: list[tuple[dict[str, Any], dict[str, str], str]] = [
        (scale(status={"replicas": "x"}), {}, "json: cannot unmarshal string into Go struct field "
                                              "ScaleStatus.status.replicas of type int32"),
        (scale(apiVersion="apps/v1"), {}, f'no kind "Scale" is registered for version "apps/v1" {SCHEME}'),
        (scale(bogus=1), {"fieldValidation": "Strict"}, 'strict decoding error: unknown field "bogus"'),
    ]
    for body, params, why in bad:
        resp = await served.http.put(SCALE, json=body, params=params)
        assert message_of(resp, 400, "BadRequest") == f'Scale in version "v1" cannot be handled as a Scale: {why}'
    resp = await served.http.put(SCALE, json=scale(kind="Deployment"))
    assert message_of(resp, 400, "BadRequest") == ('Deployment in version "v1" cannot be handled as a Scale: no kind '
                                                   f'"Deployment" is registered for version "autoscaling/v1" {SCHEME}')
    stored = await served.client.get(f"{DEPLOYMENTS}/d")
    assert (stored["spec"]["replicas"], stored["metadata"]["resourceVersion"]) == (1, version)
    # an unknown field is dropped with a warning otherwise, and the Scale written
    resp = await served.http.put(SCALE, json=scale(bogus=1))
    assert resp.status_code == 200, resp.text
    assert resp.headers["warning"] == '299 - "unknown field \\"bogus\\""'
    assert (await served.client.get(f"{DEPLOYMENTS}/d"))["spec"]["replicas"] == 3


async def test_a_scale_patch_that_does_not_decode_is_the_patchers_422(served: Served) -> None:
    # upstream's patcher decodes the patched Scale and answers 422 against ``patch``: it was a 400
    version = await deployment(served)
    for patch, content_type, why in (
            ({"spec": {"replicas": "3"}}, "application/merge-patch+json",
             "json: cannot unmarshal string into Go struct field ScaleSpec.spec.replicas of type int32"),
            ([{"op": "replace", "path": "/spec/replicas", "value": 1 << 31}], "application/json-patch+json",
             "json: cannot unmarshal number 2147483648 into Go struct field ScaleSpec.spec.replicas of type int32"),
            ({"spec": {"replicas": "3"}}, "application/strategic-merge-patch+json", "unrecognized type: int32")):
        resp = await served.http.patch(SCALE, json=patch, headers={"Content-Type": content_type})
        message = message_of(resp, 422, "Invalid")
        assert message.startswith(' "" is invalid: patch: Invalid value: ') and message.endswith(why), message
    resp = await served.http.patch(SCALE, json={"spec": {"replicas": 2, "bogus": 1}}, headers=MERGE,
                                   params={"fieldValidation": "Strict"})
    assert message_of(resp, 422, "Invalid").endswith('strict decoding error: unknown field "spec.bogus"')
    stored = await served.client.get(f"{DEPLOYMENTS}/d")
    assert (stored["spec"]["replicas"], stored["metadata"]["resourceVersion"]) == (1, version)
    resp = await served.http.patch(SCALE, json={"spec": {"replicas": 2}}, headers=MERGE)
    assert resp.status_code == 200 and resp.json()["spec"]["replicas"] == 2, resp.text


async def test_an_eviction_and_a_token_request_are_decoded_as_theirs(served: Served) -> None:
    # "gracePeriodSeconds must be an integer, not 'x'" and the like were this server's words;
    # a TokenRequest of another group, or with an unknown field under Strict, issued a token
    await served.client.create(f"{NS}/pods", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                                              "spec": {"containers": [{"name": "c", "image": "nginx"}]}})
    await served.client.create(f"{NS}/serviceaccounts", {"apiVersion": "v1", "kind": "ServiceAccount",
                                                          "metadata": {"name": "sa"}})
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "p"}}
    prefix = 'Eviction in version "v1" cannot be handled as a Eviction: '
    for body, params, why in (
            ({**eviction, "deleteOptions": {"gracePeriodSeconds": "x"}}, {},
             "json: cannot unmarshal string into Go struct field DeleteOptions.deleteOptions.gracePeriodSeconds of "
             "type int64"),
            ({**eviction, "deleteOptions": 5}, {},
             "json: cannot unmarshal number into Go struct field Eviction.deleteOptions of type v1.DeleteOptions"),
            ({**eviction, "bogus": 1}, {"fieldValidation": "Strict"}, 'strict decoding error: unknown field "bogus"')):
        resp = await served.http.post(f"{NS}/pods/p/eviction", json=body, params=params)
        assert message_of(resp, 400, "BadRequest") == prefix + why
    assert (await served.http.get(f"{NS}/pods/p")).status_code == 200  # not evicted
    token = f"{NS}/serviceaccounts/sa/token"
    resp = await served.http.post(token, json={"apiVersion": "v1", "kind": "TokenRequest", "spec": {}})
    assert message_of(resp, 400, "BadRequest") == ('TokenRequest in version "v1" cannot be handled as a TokenRequest: '
                                                   f'no kind "TokenRequest" is registered for version "v1" {SCHEME}')
    request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}}
    resp = await served.http.post(token, json={**request, "bogus": 1}, params={"fieldValidation": "Strict"})
    assert message_of(resp, 400, "BadRequest") == ('TokenRequest in version "v1" cannot be handled as a TokenRequest: '
                                                   'strict decoding error: unknown field "bogus"')
    resp = await served.http.post(token, json=request)
    assert resp.status_code == 201 and resp.json()["status"]["token"], resp.text


async def test_a_bindings_unknown_fields_follow_the_directive(served: Served) -> None:
    # an unknown field of the target passed as a plain binding, under Strict too
    await served.client.create(f"{NS}/pods", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                                              "spec": {"containers": [{"name": "c", "image": "nginx"}]}})
    binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p"}}
    for body, field in (({**binding, "target": {"name": "n1", "bogus": "x"}}, "target.bogus"),
                        ({**binding, "target": {"name": "n1"}, "bogus": 1}, "bogus")):
        resp = await served.http.post(f"{NS}/pods/p/binding", json=body, params={"fieldValidation": "Strict"})
        assert message_of(resp, 400, "BadRequest") == ('Binding in version "v1" cannot be handled as a Binding: '
                                                       f'strict decoding error: unknown field "{field}"')
    assert "nodeName" not in (await served.client.get(f"{NS}/pods/p"))["spec"]
    for method in ("GET", "PUT", "PATCH", "DELETE"):  # ("the binding subresource is not served yet")
        resp = await served.http.request(method, f"{NS}/pods/p/binding", json=binding)
        assert message_of(resp, 405, "MethodNotAllowed") == ("the server does not allow this method on the requested "
                                                             "resource")
    resp = await served.http.post(f"{NS}/pods/p/binding", json={**binding, "target": {"name": "n1", "bogus": "x"}})
    assert resp.status_code == 201, resp.text
    assert resp.headers["warning"] == '299 - "unknown field \\"target.bogus\\""'
    assert (await served.client.get(f"{NS}/pods/p"))["spec"]["nodeName"] == "n1"


async def test_a_writes_options_are_validated_as_its_options_kind(served: Served) -> None:
    # dryRun=Some was a 400 of this server's words, a bad fieldManager PatchOptions' 422 whatever
    # the verb, and a subresource write took any fieldValidation
    await deployment(served)
    resp = await served.http.post(CMS, json={"metadata": {"name": "c"}},
                                  params={"dryRun": "Some", "fieldManager": "a\x01"})
    assert message_of(resp, 422, "Invalid") == (
        'CreateOptions.meta.k8s.io "" is invalid: [fieldManager: Invalid value: "a\\x01": invalid character U+0001 '
        '(at position 1), dryRun: Unsupported value: ["Some"]: supported values: "All"]')
    resp = await served.http.put(SCALE, json=scale(), params={"fieldValidation": "Bogus"})
    assert message_of(resp, 422, "Invalid") == (
        'UpdateOptions.meta.k8s.io "" is invalid: fieldValidation: Unsupported value: "Bogus": supported values: "", '
        '"Ignore", "Strict", "Warn"')
    resp = await served.http.post(f"{NS}/pods/p/eviction", params={"fieldValidation": "Bogus"},
                                  json={"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "p"}})
    assert message_of(resp, 422, "Invalid").startswith('CreateOptions.meta.k8s.io "" is invalid: fieldValidation: ')
    assert (await served.http.get(f"{CMS}/c")).status_code == 404
    await served.client.create(CMS, {"metadata": {"name": "c"}})
    resp = await served.http.delete(f"{CMS}/c", params={"dryRun": "x", "propagationPolicy": "Bogus"})
    assert message_of(resp, 422, "Invalid") == (
        'DeleteOptions.meta.k8s.io "" is invalid: [propagationPolicy: Unsupported value: "Bogus": supported values: '
        '"Foreground", "Background", "Orphan", "nil", dryRun: Unsupported value: ["x"]: supported values: "All"]')
    # a read has no such options: upstream ignores them
    assert (await served.http.get(CMS, params={"dryRun": "x"})).status_code == 200
    assert (await served.http.get(f"{CMS}/c")).status_code == 200


async def test_a_workloads_status_is_validated_as_upstreams_status_update(served: Served) -> None:
    # replicas -1, readyReplicas above replicas, observedGeneration -1 were stored through /status
    await deployment(served)
    status_path = f"{DEPLOYMENTS}/d/status"
    before = await served.client.get(f"{DEPLOYMENTS}/d")
    for status, causes in (
            ({"replicas": -1}, ["status.replicas: Invalid value: -1: must be greater than or equal to 0"] + [
                f"status.{f}: Invalid value: 0: cannot be greater than status.replicas"  # (as Go compares them)
                for f in ("updatedReplicas", "readyReplicas", "availableReplicas")]),
            ({"observedGeneration": -1, "replicas": 1, "readyReplicas": 2, "availableReplicas": 2},
             ["status.observedGeneration: Invalid value: -1: must be greater than or equal to 0",
              "status.readyReplicas: Invalid value: 2: cannot be greater than status.replicas",
              "status.availableReplicas: Invalid value: 2: cannot be greater than status.replicas"]),
            ({"replicas": 2, "readyReplicas": 1, "availableReplicas": 2},
             ["status.availableReplicas: Invalid value: 2: cannot be greater than readyReplicas"])):
        resp = await served.http.patch(status_path, json={"status": status}, headers=MERGE)
        assert message_of(resp, 422, "Invalid").startswith('Deployment.apps "d" is invalid: ')
        assert [f"{c['field']}: {c['message']}" for c in resp.json()["details"]["causes"]] == causes
    after = await served.client.get(f"{DEPLOYMENTS}/d")
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    resp = await served.http.patch(status_path, json={"status": {"replicas": 2, "readyReplicas": 2,
                                                                 "collisionCount": 3}}, headers=MERGE)
    assert resp.status_code == 200, resp.text
    resp = await served.http.patch(status_path, json={"status": {"collisionCount": 1}}, headers=MERGE)
    assert [c["message"] for c in resp.json()["details"]["causes"]] == ["Invalid value: 1: cannot be decremented"]
    # a spec write keeps the stored status, and is not held to it
    resp = await served.http.patch(f"{DEPLOYMENTS}/d", json={"spec": {"replicas": 2}}, headers=MERGE)
    assert resp.status_code == 200, resp.text


async def test_an_eviction_checks_its_budget_as_upstreams_check_and_decrement(served: Served) -> None:
    # a budget not yet observed was one 429 message without its cause or retry; one recording
    # more than 2000 unconfirmed evictions a 429 where upstream forbids more (403)
    pods, budgets = f"{NS}/pods", "/apis/policy/v1/namespaces/default/poddisruptionbudgets"
    await served.client.create(pods, {"apiVersion": "v1", "kind": "Pod",
                                      "metadata": {"name": "p", "labels": {"a": "b"}},
                                      "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "nginx"}]}})
    await served.http.patch(f"{pods}/p/status", headers=MERGE, json={"status": {
        "phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}})
    await served.client.create(budgets, {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                                         "metadata": {"name": "pdb"},
                                         "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"a": "b"}}}})
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "p"}}

    async def evict_with(status: dict[str, Any]) -> httpx.Response:
        resp = await served.http.patch(f"{budgets}/pdb/status", headers=MERGE, json={"status": status})
        assert resp.status_code == 200, resp.text
        return await served.http.post(f"{pods}/p/eviction", json=eviction)

    resp = await evict_with({"observedGeneration": 0, "disruptionsAllowed": 1, "currentHealthy": 1,
                             "desiredHealthy": 0, "expectedPods": 1})
    assert message_of(resp, 429, "TooManyRequests") == ("Cannot evict pod as it would violate the pod's disruption "
                                                        "budget.")
    details = resp.json()["details"]
    assert (details["causes"], details["retryAfterSeconds"], resp.headers["retry-after"]) == (
        [{"reason": "DisruptionBudget", "message": "The disruption budget pdb is still being processed by the "
                                                   "server."}], 10, "10")
    unconfirmed = {f"gone-{i}": "2026-01-01T00:00:00Z" for i in range(2001)}
    resp = await evict_with({"observedGeneration": 1, "disruptionsAllowed": 1, "disruptedPods": unconfirmed})
    assert message_of(resp, 403, "Forbidden") == ('poddisruptionbudget.policy "pdb" is forbidden: DisruptedPods map '
                                                  "too big - too many evictions not confirmed by PDB controller")
    resp = await evict_with({"disruptionsAllowed": 0, "currentHealthy": 1, "desiredHealthy": 1, "disruptedPods": None})
    assert resp.json()["details"]["causes"][0]["message"] == ("The disruption budget pdb needs 1 healthy pods and has "
                                                             "1 currently")
    assert (await served.http.get(f"{pods}/p")).status_code == 200  # never evicted
    resp = await evict_with({"observedGeneration": 1, "disruptionsAllowed": 1, "currentHealthy": 1,
                             "desiredHealthy": 0})
    assert resp.status_code == 201, resp.text


async def test_a_custom_resources_scale_paths_hold_int32s_as_upstreams_validator_says(served: Served) -> None:
    # replicas "x", 2.5 or 2^40 at the CRD's specReplicasPath were stored, and its /scale then
    # served a Scale no typed client could read
    crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    resp = await served.http.post(crds, json={
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "loose.fz.io"},
        "spec": {"group": "fz.io", "scope": "Namespaced",
                 "names": {"plural": "loose", "singular": "loos", "kind": "Loose"},
                 "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                     "type": "object", "x-kubernetes-preserve-unknown-fields": True}},
                     "subresources": {"status": {}, "scale": {
                         "specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas",
                         "labelSelectorPath": ".status.selector"}}}]}})
    assert resp.status_code == 201, resp.text
    loose = "/apis/fz.io/v1/namespaces/default/loose"
    for _ in range(50):
        if (await served.http.get(loose)).status_code == 200:
            break
        await asyncio.sleep(0.1)

    def item(replicas: Any) -> dict[str, Any]:
        return {"apiVersion": "fz.io/v1", "kind": "Loose", "metadata": {"name": "l"}, "spec": {"replicas": replicas}}

    for replicas, cause in (
            ("x", ".spec.replicas: Invalid value: 0: .spec.replicas accessor error: x is of the type string, "
                  "expected int64"),
            (2.5, ".spec.replicas: Invalid value: 0: .spec.replicas accessor error: 2.5 is of the type float64, "
                  "expected int64"),
            (-3, ".spec.replicas: Invalid value: -3: should be a non-negative integer"),
            (1 << 40, ".spec.replicas: Invalid value: 1099511627776: should be less than or equal to 2147483647"),
            # past int64: a float64 to Go, printed in its shortest digits
            (1 << 64, ".spec.replicas: Invalid value: 0: .spec.replicas accessor error: 18446744073709552000 is of "
                      "the type float64, expected int64")):
        resp = await served.http.post(loose, json=item(replicas))
        message_of(resp, 422, "Invalid")
        assert [f"{c['field']}: {c['message']}" for c in resp.json()["details"]["causes"]] == [cause]
    resp = await served.http.post(loose, json=item(2))
    assert resp.status_code == 201, resp.text
    resp = await served.http.patch(f"{loose}/l/status", headers=MERGE,
                                   json={"status": {"replicas": "y", "selector": 5}})
    message_of(resp, 422, "Invalid")
    assert [c["field"] for c in resp.json()["details"]["causes"]] == [".status.replicas", ".status.selector"]
    resp = await served.http.get(f"{loose}/l/scale")
    assert (resp.json()["spec"], resp.json()["status"]) == ({"replicas": 2}, {"replicas": 0})


async def test_an_apply_without_any_query_still_needs_its_manager(served: Served) -> None:
    config = b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"}}'
    resp = await served.http.patch(CMS + "/c", content=config, headers={"Content-Type": "application/apply-patch+yaml"})
    assert message_of(resp, 422, "Invalid") == ('PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: '
                                                "is required for apply patch")
    assert (await served.http.get(CMS + "/c")).status_code == 404
