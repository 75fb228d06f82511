"""The ports of the EndpointSlices and Endpoints the controllers write for a Service
(controllers/endpoints.py), as upstream's: each Service port's ``appProtocol`` carried over, an
unnamed port's empty name kept on a slice (a pointer there) and left out of an Endpoints subset
(``omitempty``), read with kubectl and the official client over a socket."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client, config

from tests.e2e.test_kubectl import kubectl
from tests.e2e.test_kubectl_day2 import eventually
from tests.test_cli import Serve, running, start_serve


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    with running(start_serve(tmp_path_factory.mktemp("ports"), scheduler=True, extra=("--nodes", "1"))) as s:
        yield s


MANIFEST = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: c
        image: "nginx:1.27"
        ports: [{name: http, containerPort: 8080}, {name: grpc, containerPort: 9090}]
---
apiVersion: v1
kind: Service
metadata: {name: plain}
spec:
  selector: {app: web}
  ports: [{port: 80, targetPort: http}]
---
apiVersion: v1
kind: Service
metadata: {name: typed}
spec:
  selector: {app: web}
  ports:
  - {name: http, port: 80, targetPort: http, appProtocol: http}
  - {name: grpc, port: 9090, targetPort: grpc, appProtocol: kubernetes.io/h2c}
"""


def _json(served: Serve, *args: str) -> Any:
    return json.loads(kubectl(served, "get", *args, "-o", "json"))


def test_endpoint_ports_carry_the_services_names_and_app_protocols(served: Serve) -> None:
    kubectl(served, "apply", "-f", "-", stdin=MANIFEST)
    kubectl(served, "rollout", "status", "deployment/web", "--timeout=60s")

    def ready(service: str) -> bool:
        subsets = _json(served, "endpoints", service).get("subsets") or []
        return len(subsets) == 1 and len(subsets[0].get("addresses") or ()) == 2

    for service in ("plain", "typed"):
        eventually(lambda service=service: ready(service))  # type: ignore[misc]
    assert _json(served, "endpoints", "plain")["subsets"][0]["ports"] == [{"port": 8080, "protocol": "TCP"}]
    assert sorted(_json(served, "endpoints", "typed")["subsets"][0]["ports"], key=lambda p: p["port"]) == [
        {"name": "http", "port": 8080, "protocol": "TCP", "appProtocol": "http"},
        {"name": "grpc", "port": 9090, "protocol": "TCP", "appProtocol": "kubernetes.io/h2c"}]
    (plain,) = _json(served, "endpointslices", "-l", "kubernetes.io/service-name=plain")["items"]
    assert plain["ports"] == [{"name": "", "port": 8080, "protocol": "TCP"}]

    api = config.new_client_from_config(config_file=str(served.kubeconfig))
    try:
        (typed,) = client.DiscoveryV1Api(api).list_namespaced_endpoint_slice(
            "default", label_selector="kubernetes.io/service-name=typed").items
        assert {(p.name, p.port, p.app_protocol) for p in typed.ports or ()} == {
            ("http", 8080, "http"), ("grpc", 9090, "kubernetes.io/h2c")}
        endpoints = client.CoreV1Api(api).read_namespaced_endpoints("plain", "default")
        assert [(p.name, p.port, p.app_protocol) for p in endpoints.subsets[0].ports] == [(None, 8080, None)]
    finally:
        api.close()
