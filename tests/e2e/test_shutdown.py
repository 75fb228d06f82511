"""``controlplane serve`` told to stop (SIGTERM) while it works, as kube-apiserver stops: a
watch ends cleanly at once (its client watches again, elsewhere), a request already running
is answered before the process exits, and a write it answered is there after a restart."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml

from tests.api.webhook_server import WebhookServer, webhook_server
from tests.test_cli import Serve, killed_after, start_serve

NS = "stopping"
CONFIGMAPS = f"/api/v1/namespaces/{NS}/configmaps"


@pytest.fixture
def hook(tmp_path: Path) -> Iterator[WebhookServer]:
    (tmp_path / "hook").mkdir()
    with webhook_server(tmp_path / "hook") as server:
        yield server


def _slow_hook_on_configmaps(http: httpx.Client, hook: WebhookServer) -> None:
    """Creates of ConfigMaps in NS wait 3 s for the webhook (its /slow) before they are stored."""
    r = http.post("/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations", json={
        "metadata": {"name": "slow"},
        "webhooks": [{"name": "slow.example.com", "sideEffects": "None", "admissionReviewVersions": ["v1"],
                      "clientConfig": {"url": hook.url("/slow"), "caBundle": hook.ca_bundle},
                      "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                                 "resources": ["configmaps"]}],
                      "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": NS}}}]})
    assert r.status_code == 201, r.text
    deadline = time.monotonic() + 10  # admission reads the watch cache: until it has the configuration
    while not http.get("/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
                       params={"resourceVersion": "0"}).json()["items"]:
        assert time.monotonic() < deadline
        time.sleep(0.01)


def _admin(s: Serve) -> dict[str, str]:
    """The kubeconfig's bearer token, over TLS (a --no-tls server takes anonymous requests)."""
    if not s.url.startswith("https:"):
        return {}
    return {"authorization": "Bearer " + yaml.safe_load(s.kubeconfig.read_text())["users"][0]["user"]["token"]}


@pytest.mark.parametrize("tls", [True, False], ids=["tls", "plain"])
def test_a_stop_ends_watches_cleanly_and_answers_the_write_in_flight_which_stays(
        tmp_path: Path, hook: WebhookServer, tls: bool) -> None:
    s = start_serve(tmp_path, tls=tls)
    with killed_after(s):
        s.wait_ready()
        with httpx.Client(base_url=s.url, timeout=30, headers=_admin(s)) as http:
            assert http.post("/api/v1/namespaces", json={"metadata": {"name": NS}}).status_code == 201
            _slow_hook_on_configmaps(http, hook)
            answered: list[httpx.Response] = []
            writer = threading.Thread(target=lambda: answered.append(http.post(CONFIGMAPS, json={
                "metadata": {"name": "in-flight"}, "data": {"k": "v"}})))
            with httpx.Client(base_url=s.url, timeout=30, headers=_admin(s)) as watching, \
                    watching.stream("GET", CONFIGMAPS, params={"watch": "1"}) as watch:
                writer.start()
                deadline = time.monotonic() + 10
                while not hook.seen("/slow"):  # the create is running: in admission, not yet stored
                    assert time.monotonic() < deadline
                    time.sleep(0.01)
                s.proc.send_signal(signal.SIGTERM)
                # the watch's stream ends as a stream ends (its last chunk), not cut off, and at
                # once: while the write (3 s in its webhook) still runs
                assert list(watch.iter_lines()) == []
                assert not answered
            writer.join(10)
            assert answered and answered[0].status_code == 201, answered and answered[0].text
            acked = answered[0].json()["metadata"]["resourceVersion"]
            assert s.proc.wait(10) == 0
    again = start_serve(tmp_path, run=1, port=s.port, tls=tls)
    try:
        again.wait_ready()
        kept = httpx.get(f"{again.url}{CONFIGMAPS}/in-flight", timeout=10, headers=_admin(again))
        assert kept.status_code == 200 and kept.json()["metadata"]["resourceVersion"] == acked
        assert kept.json()["data"] == {"k": "v"}
    finally:
        again.stop()
