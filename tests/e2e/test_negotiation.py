"""What a response is written as, by the request's Accept header (api/negotiation.py), over a
socket: YAML when it is preferred, 406 when nothing the server writes is accepted."""

from __future__ import annotations

import httpx
import yaml

from tests.e2e.test_kubernetes_client import bearer
from tests.test_cli import Serve

CMS = "/api/v1/namespaces/default/configmaps"


def test_yaml_when_preferred_and_406_when_nothing_is_accepted(served: Serve) -> None:
    auth = bearer(served)
    made = httpx.post(served.url + CMS, json={"metadata": {"name": "neg"}, "data": {"b": "2", "a": "1"}},
                      headers={**auth, "accept": "application/yaml"})
    assert made.status_code == 201 and made.headers["content-type"] == "application/yaml"
    doc = yaml.safe_load(made.text)
    assert doc["kind"] == "ConfigMap" and doc["data"] == {"a": "1", "b": "2"}
    assert made.text.index("apiVersion:") < made.text.index("data:") < made.text.index("kind:")  # keys sorted
    listed = httpx.get(served.url + CMS, headers={**auth, "accept": "application/json;q=0.5, application/yaml"})
    assert listed.headers["content-type"] == "application/yaml"
    assert "neg" in [i["metadata"]["name"] for i in yaml.safe_load(listed.text)["items"]]
    missing = httpx.get(f"{served.url}{CMS}/nope", headers={**auth, "accept": "application/yaml"})
    assert missing.status_code == 404 and yaml.safe_load(missing.text)["reason"] == "NotFound"
    for accept in ("text/html", "application/xml, text/plain"):
        refused = httpx.get(f"{served.url}{CMS}/neg", headers={**auth, "accept": accept})
        assert refused.status_code == 406 and refused.json()["reason"] == "NotAcceptable"
        assert refused.json()["message"] == ("only the following media types are accepted: application/json, "
                                             "application/yaml, application/vnd.kubernetes.protobuf")
    browser = httpx.get(f"{served.url}{CMS}/neg", headers={**auth, "accept": "text/html,*/*;q=0.8"})
    assert browser.status_code == 200 and browser.json()["metadata"]["name"] == "neg"
    watched = httpx.get(served.url + CMS, params={"watch": "true", "timeoutSeconds": "1"},
                        headers={**auth, "accept": "application/yaml"})
    assert watched.status_code == 406
