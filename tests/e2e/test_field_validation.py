"""``fieldValidation`` over a socket: Strict, Warn (the default), Ignore; duplicates; required fields."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.e2e.test_kubernetes_client import bearer
from tests.test_cli import Serve

DEPLOYMENT_WITH_PROBLEMS = b"""{
  "apiVersion": "apps/v1", "kind": "Deployment",
  "metadata": {"name": "%s", "labels": {"app": "nginx"}},
  "spec": {
    "unknown1": "val1",
    "unknownDupe": "valDupe", "unknownDupe": "valDupe2",
    "paused": true, "paused": false,
    "selector": {"matchLabels": {"app": "nginx"}},
    "template": {"metadata": {"labels": {"app": "nginx"}},
      "spec": {"containers": [{"name": "nginx", "image": "nginx:latest", "unknownNested": "val1",
                               "imagePullPolicy": "Always", "imagePullPolicy": "Never"}]}}}
}"""
PROBLEMS = [
    'unknown field "spec.unknown1"',
    'unknown field "spec.unknownDupe"',
    'duplicate field "spec.paused"',
    'unknown field "spec.template.spec.containers[0].unknownNested"',
    'duplicate field "spec.template.spec.containers[0].imagePullPolicy"',
]


def warnings(r: httpx.Response) -> list[str]:
    """The texts of the ``Warning: 299 - "..."`` headers."""
    out = []
    for value in r.headers.get_list("warning"):
        assert value.startswith('299 - "') and value.endswith('"')
        out.append(value[7:-1].replace('\\"', '"').replace("\\\\", "\\"))
    return out


@pytest.fixture(scope="module")
def deployments(served: Serve) -> str:
    return f"{served.url}/apis/apps/v1/namespaces/default/deployments"


def post(served: Serve, url: str, body: bytes, **params: str) -> httpx.Response:
    return httpx.post(url, content=body, params=params,
                      headers={"content-type": "application/json", **bearer(served)})


def test_strict_fails_with_every_unknown_and_duplicate_field(served: Serve, deployments: str) -> None:
    r = post(served, deployments, DEPLOYMENT_WITH_PROBLEMS % b"strict", fieldValidation="Strict")
    assert r.status_code == 400 and r.json()["reason"] == "BadRequest"
    assert r.json()["message"] == ('Deployment in version "v1" cannot be handled as a Deployment: '
                                   "strict decoding error: " + ", ".join(PROBLEMS))
    assert httpx.get(f"{deployments}/strict", headers=bearer(served)).status_code == 404


@pytest.mark.parametrize("directive", ["Warn", None])
def test_warn_and_the_default_warn_and_drop_the_unknown_fields(served: Serve, deployments: str,
                                                               directive: str | None) -> None:
    name = f"warn-{(directive or 'default').lower()}"
    params = {"fieldValidation": directive} if directive else {}
    r = post(served, deployments, DEPLOYMENT_WITH_PROBLEMS % name.encode(), **params)
    assert r.status_code == 201, r.text
    assert warnings(r) == PROBLEMS
    spec = r.json()["spec"]
    assert "unknown1" not in spec and "unknownDupe" not in spec
    # the last of the duplicates wins: false, which upstream (an omitempty bool) leaves out; the first is true
    assert "paused" not in spec
    container = spec["template"]["spec"]["containers"][0]
    assert "unknownNested" not in container and container["imagePullPolicy"] == "Never"
    stored = httpx.get(f"{deployments}/{name}", headers=bearer(served)).json()
    assert "unknown1" not in stored["spec"]


def test_ignore_drops_silently(served: Serve, deployments: str) -> None:
    r = post(served, deployments, DEPLOYMENT_WITH_PROBLEMS % b"ignore", fieldValidation="Ignore")
    assert r.status_code == 201 and "warning" not in r.headers
    assert "unknown1" not in r.json()["spec"]


def test_a_bad_directive_is_invalid(served: Serve, deployments: str) -> None:
    r = post(served, deployments, DEPLOYMENT_WITH_PROBLEMS % b"bad", fieldValidation="Loud")
    assert r.status_code == 422
    assert r.json()["message"] == ('CreateOptions.meta.k8s.io "" is invalid: fieldValidation: Unsupported value: '
                                   '"Loud": supported values: "", "Ignore", "Strict", "Warn"')


def test_update_and_patch_are_validated_too(served: Serve) -> None:
    auth = bearer(served)
    url = f"{served.url}/api/v1/namespaces/default/configmaps"
    assert httpx.post(url, json={"metadata": {"name": "fv"}, "data": {"a": "1"}}, headers=auth).status_code == 201
    current: dict[str, Any] = httpx.get(f"{url}/fv", headers=auth).json()
    current["extra"] = 1
    r = httpx.put(f"{url}/fv", json=current, params={"fieldValidation": "Strict"}, headers=auth)
    assert r.status_code == 400
    assert r.json()["message"] == ('ConfigMap in version "v1" cannot be handled as a ConfigMap: '
                                   'strict decoding error: unknown field "extra"')
    r = httpx.put(f"{url}/fv", json=current, headers=auth)
    assert r.status_code == 200 and warnings(r) == ['unknown field "extra"'] and "extra" not in r.json()
    merge = {"content-type": "application/merge-patch+json", **auth}
    # a patch that leaves unknown fields is 422 on "patch", the patched object as its value (upstream's wording)
    r = httpx.patch(f"{url}/fv", content=b'{"data": {"b": "2", "b": "3"}, "metadata": {"bogus": 1}}',
                    params={"fieldValidation": "Strict"}, headers=merge)
    assert r.status_code == 422 and r.json()["reason"] == "Invalid"
    message = r.json()["message"]
    assert message.startswith(' "" is invalid: patch: Invalid value: "{')
    assert message.endswith('}": strict decoding error: duplicate field "data.b", unknown field "metadata.bogus"')
    cause = r.json()["details"]["causes"][0]
    assert cause["field"] == "patch" and cause["reason"] == "FieldValueInvalid"
    r = httpx.patch(f"{url}/fv", content=b'{"data": {"b": "2", "b": "3"}, "metadata": {"bogus": 1}}', headers=merge)
    assert r.status_code == 200
    assert warnings(r) == ['duplicate field "data.b"', 'unknown field "metadata.bogus"']
    assert r.json()["data"] == {"a": "1", "b": "3"} and "bogus" not in r.json()["metadata"]
    jp = {"content-type": "application/json-patch+json", **auth}
    r = httpx.patch(f"{url}/fv", json=[{"op": "add", "path": "/x", "value": 1}],
                    params={"fieldValidation": "Strict"}, headers=jp)
    assert r.status_code == 422 and r.json()["message"].endswith('strict decoding error: unknown field "x"')
    r = httpx.patch(f"{url}/fv", json=[{"op": "add", "path": "/data", "value": "not a map"}], headers=jp)
    assert r.status_code == 422
    assert r.json()["message"].endswith("json: cannot unmarshal string into Go struct field ConfigMap.data of "
                                        "type map[string]string")


def test_a_json_patchs_own_unknown_and_duplicate_fields_come_first_prefixed(served: Serve) -> None:
    """As upstream's applyJSPatch: the operations' own problems, ``json patch ...``, then the
    patched object's, unprefixed (an unknown field a patch adds is the object's)."""
    auth = bearer(served)
    url = f"{served.url}/api/v1/namespaces/default/configmaps"
    assert httpx.post(url, json={"metadata": {"name": "jp"}, "data": {"a": "1"}}, headers=auth).status_code == 201
    jp = {"content-type": "application/json-patch+json", **auth}
    ops = (b'[{"op": "add", "path": "/data/b", "value": "1", "foo": "x"},'
           b' {"op": "add", "path": "/metadata/labels", "path": "/metadata/labels", "value": {"k": "1", "k": "2"}},'
           b' {"op": "add", "path": "/x", "value": 1}]')
    problems = ['json patch unknown field "[0].foo"', 'json patch duplicate field "[1].path"',
                'json patch duplicate field "[1].value.k"', 'unknown field "x"']
    r = httpx.patch(f"{url}/jp", content=ops, params={"fieldValidation": "Strict"}, headers=jp)
    assert r.status_code == 422 and r.json()["reason"] == "Invalid", r.text
    assert r.json()["message"].startswith(' "" is invalid: patch: Invalid value: "{')
    assert r.json()["message"].endswith('}": strict decoding error: ' + ", ".join(problems))
    r = httpx.patch(f"{url}/jp", content=ops, headers=jp)  # Warn, the default
    assert r.status_code == 200 and warnings(r) == problems, r.text
    assert r.json()["data"] == {"a": "1", "b": "1"} and r.json()["metadata"]["labels"] == {"k": "2"}
    r = httpx.patch(f"{url}/jp", content=ops.replace(b"/data/b", b"/data/d"), params={"fieldValidation": "Ignore"},
                    headers=jp)
    assert r.status_code == 200 and warnings(r) == [], r.text
    # a JSON patch without problems of its own reports only the object's
    r = httpx.patch(f"{url}/jp", json=[{"op": "add", "path": "/y", "value": 1}], params={"fieldValidation": "Strict"},
                    headers=jp)
    assert r.status_code == 422 and r.json()["message"].endswith('strict decoding error: unknown field "y"')


def test_missing_required_fields_are_422_with_causes(served: Serve) -> None:
    auth = bearer(served)
    pods = f"{served.url}/api/v1/namespaces/default/pods"
    r = httpx.post(pods, json={"metadata": {"name": "nocontainers"}, "spec": {}}, headers=auth)
    assert r.status_code == 422
    body = r.json()
    assert body["reason"] == "Invalid" and body["message"] == 'Pod "nocontainers" is invalid: spec.containers: ' \
                                                              "Required value"
    assert body["details"]["kind"] == "Pod"
    assert body["details"]["causes"] == [{"reason": "FieldValueRequired", "message": "Required value",
                                          "field": "spec.containers"}]
    r = httpx.post(pods, json={"metadata": {"name": "noname"}, "spec": {"containers": [{"image": "x"}, {}]}},
                   headers=auth)
    assert r.status_code == 422
    assert [c["field"] for c in r.json()["details"]["causes"]] == ["spec.containers[0].name",
                                                                   "spec.containers[1].name"]
    assert r.json()["message"].endswith("[spec.containers[0].name: Required value, "
                                        "spec.containers[1].name: Required value]")


def test_a_value_that_cannot_be_decoded_is_400_whatever_the_directive(served: Serve) -> None:
    url = f"{served.url}/api/v1/namespaces/default/pods"
    r = httpx.post(url, json={"metadata": {"name": "spec-is-a-string"}, "spec": "oops"},
                   params={"fieldValidation": "Ignore"}, headers=bearer(served))
    assert r.status_code == 400
    assert r.json()["message"] == ('Pod in version "v1" cannot be handled as a Pod: json: cannot unmarshal string '
                                   "into Go struct field Pod.spec of type v1.PodSpec")
