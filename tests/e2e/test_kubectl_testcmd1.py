"""What upstream's kubectl command tests (``test/cmd/get.sh``, ``core.sh``, ``create.sh``,
``delete.sh``, ``apply.sh`` and their kin, run against kube-apiserver and
kube-controller-manager) expect back, found answered differently here: the real kubectl
against one ``controlplane serve`` (its controllers and scheduler, no nodes) over a socket."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from controlplane.client import Client
from controlplane.controllers.systemnamespaces import SystemNamespacesController
from tests.e2e.test_kubectl import kubectl
from tests.e2e.test_kubectl_sweep import failing
from tests.test_cli import Serve, running, start_serve


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    with running(start_serve(tmp_path_factory.mktemp("testcmd1"), scheduler=True)) as s:
        yield s


def test_a_path_nothing_serves_is_answered_in_go_restfuls_words(served: Serve) -> None:
    """get.sh: ``kubectl get pod valid-pod --subresource=scale``. kube-apiserver answers a path
    under a served group version that no route takes as go-restful does, through
    ``NewGenericServerResponse``: the bare message, no path, details present but empty; a
    method no route takes likewise."""
    kubectl(served, "create", "configmap", "routed")
    err = failing(served, "get", "configmap", "routed", "--subresource=scale")
    assert err.strip() == "Error from server (NotFound): the server could not find the requested resource"
    err = failing(served, "get", "--raw", "/apis/apps/v1/nothing")
    assert err.strip() == "Error from server (NotFound): the server could not find the requested resource"
    err = failing(served, "create", "--raw", "/api/v1/namespaces/default/configmaps/routed", "-f", "-", stdin="{}")
    assert err.strip() == ("Error from server (MethodNotAllowed): the server does not allow this method on the "
                           "requested resource")


def test_a_budget_that_covers_no_pod_says_so_in_its_events(served: Serve) -> None:
    """core.sh creates budgets over ``app=rails`` with no such pods: kube-controller-manager's
    disruption controller records a Normal ``NoPods`` event at each sync, from the source
    ``controllermanager``, which ``kubectl describe pdb`` lists."""
    kubectl(served, "create", "pdb", "lonely", "--selector=app=rails", "--min-available=2")
    deadline = time.monotonic() + 30
    while True:
        events = json.loads(kubectl(served, "get", "events", "--field-selector",
                                    "involvedObject.name=lonely,involvedObject.kind=PodDisruptionBudget", "-o", "json"))
        if events["items"] or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    (event,) = events["items"]
    assert (event["type"], event["reason"], event["message"]) == ("Normal", "NoPods", "No matching pods found")
    assert event["source"] == {"component": "controllermanager"}
    assert event["involvedObject"]["apiVersion"] == "policy/v1"
    described = kubectl(served, "describe", "pdb", "lonely")
    assert "NoPods" in described and "controllermanager  No matching pods found" in described


FRONTEND = """
apiVersion: v1
kind: ReplicationController
metadata: {name: frontend}
spec:
  replicas: 3
  template:
    metadata:
      labels: {app: guestbook, tier: frontend}
    spec:
      terminationGracePeriodSeconds: 0
      containers:
      - name: php-redis
        image: gcr.io/google_samples/gb-frontend:v4
"""


def _until(what: str, check: Callable[[], bool], seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


def _pods(served: Serve, namespace: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = json.loads(kubectl(served, "get", "pods", "-n", namespace, "-o", "json"))["items"]
    return [p for p in items if not p["metadata"].get("deletionTimestamp")]


def test_a_replication_controller_keeps_its_pods(served: Serve) -> None:
    """core.sh's ReplicationController blocks: kube-controller-manager's replicationcontroller
    controller (the ReplicaSet controller over the v1 kind) makes the template's pods, owned by
    the ReplicationController, says so in events from ``replication-controller``, writes the
    status ``kubectl describe rc`` reads, follows ``kubectl scale``, and the garbage collector
    deletes the pods with it (not those of one deleted ``--cascade=orphan``, which the next
    controller of their labels adopts)."""
    kubectl(served, "create", "namespace", "rc")
    kubectl(served, "create", "-n", "rc", "-f", "-", stdin=FRONTEND)
    _until("three pods", lambda: len(_pods(served, "rc")) == 3)
    rc = json.loads(kubectl(served, "get", "rc", "frontend", "-n", "rc", "-o", "json"))
    for pod in _pods(served, "rc"):
        assert pod["metadata"]["generateName"] == "frontend-"
        assert pod["metadata"]["ownerReferences"] == [
            {"apiVersion": "v1", "kind": "ReplicationController", "name": "frontend", "uid": rc["metadata"]["uid"],
             "controller": True, "blockOwnerDeletion": True}]
    _until("the status counted", lambda: json.loads(kubectl(
        served, "get", "rc", "frontend", "-n", "rc", "-o", "json"))["status"].get("fullyLabeledReplicas") == 3)
    status = json.loads(kubectl(served, "get", "rc", "frontend", "-n", "rc", "-o", "json"))["status"]
    assert "terminatingReplicas" not in status and status["replicas"] == 3 and status["observedGeneration"] == 1
    described = kubectl(served, "describe", "rc", "frontend", "-n", "rc")
    assert "Replicas:     3 current / 3 desired" in described
    assert "SuccessfulCreate" in described and "replication-controller  Created pod: frontend-" in described

    kubectl(served, "scale", "--current-replicas=3", "--replicas=1", "rc", "frontend", "-n", "rc")
    _until("one pod", lambda: len(_pods(served, "rc")) == 1)
    (kept,) = _pods(served, "rc")
    kubectl(served, "delete", "rc", "frontend", "-n", "rc", "--cascade=orphan")
    _until("released", lambda: not _pods(served, "rc")[0]["metadata"].get("ownerReferences"))
    kubectl(served, "create", "-n", "rc", "-f", "-", stdin=FRONTEND)
    _until("adopted and two more", lambda: len(_pods(served, "rc")) == 3)
    assert kept["metadata"]["name"] in {p["metadata"]["name"] for p in _pods(served, "rc")}
    kubectl(served, "delete", "rc", "frontend", "-n", "rc")
    _until("collected", lambda: not _pods(served, "rc"))


def test_a_deleted_system_namespace_comes_back(served: Serve) -> None:
    """core.sh's ``kubectl delete namespace -n my-namespace --all`` deletes every namespace it
    may: ``kube-node-lease`` too (only default, kube-system and kube-public are immortal).
    kube-apiserver's system namespaces controller makes it again at its next sync (every
    minute; here one with a short interval, over the socket, as the server's own runs)."""
    err = failing(served, "delete", "namespace", "kube-node-lease", "kube-public")
    assert 'namespaces "kube-public" is forbidden: this namespace may not be deleted' in err
    _until("gone", lambda: "kube-node-lease" not in kubectl(served, "get", "namespaces", "-o", "name"))

    async def sync() -> None:
        async with Client.from_kubeconfig(served.kubeconfig) as client:
            await SystemNamespacesController(client, interval=0).sync()

    asyncio.run(sync())
    created = json.loads(kubectl(served, "get", "namespace", "kube-node-lease", "-o", "json"))
    assert created["status"]["phase"] == "Active"
    assert created["metadata"]["labels"] == {"kubernetes.io/metadata.name": "kube-node-lease"}


def test_a_body_that_is_no_json_object_is_unrecognized_in_gos_words(served: Serve, tmp_path: Path) -> None:
    """create.sh: ``kubectl create --raw /api/v1/namespaces -f valid-pod.yaml`` sends the YAML
    as JSON. kube-apiserver's serializer cannot read a kind from it, and its create (or
    update) handler says so with the kind it wanted, Go's ``encoding/json`` error and the
    body's first 30 bytes (in hex, or as text for what starts as an object)."""
    manifest = tmp_path / "valid-pod.yaml"
    manifest.write_text("apiVersion: v1\nkind: Pod\nmetadata:\n  name: valid-pod\n")
    err = failing(served, "create", "--raw", "/api/v1/namespaces", "-f", str(manifest))
    assert err.strip() == (
        "Error from server (BadRequest): the object provided is unrecognized (must be of type Namespace): "
        "couldn't get version/kind; json parse error: invalid character 'a' looking for beginning of value "
        f"({manifest.read_bytes()[:30].hex()} ...)")
    err = failing(served, "create", "--raw", "/api/v1/namespaces/default/configmaps", "-f", "-",
                  stdin='{"metadata": {"name": "x"}, "data": {"a" "b"}}')
    assert err.strip().endswith(": couldn't get version/kind; json parse error: invalid character '\"' after "
                                'object key ({"metadata": {"name": "x"}, "d ...)')
    err = failing(served, "replace", "--raw", "/api/v1/namespaces/default/configmaps/x", "-f", "-", stdin="[1, 2]")
    assert err.strip() == (
        "Error from server (BadRequest): the object provided is unrecognized (must be of type ConfigMap): "
        "couldn't get version/kind; json parse error: json: cannot unmarshal array into Go value of type "
        'struct { APIVersion string "json:\\"apiVersion,omitempty\\""; Kind string "json:\\"kind,omitempty\\"" } '
        "(5b312c20325d)")
    err = failing(served, "create", "--raw", "/api/v1/namespaces/default/configmaps", "-f", "-", stdin='{"a": tru')
    assert "json parse error: unexpected end of JSON input ({\"a\": tru)" in err


def test_a_pod_without_all_its_templates_labels_is_not_fully_labeled(served: Serve) -> None:
    """``fullyLabeledReplicas`` counts the pods that carry the template's labels, which may be
    more than the selector's (upstream's calculateStatus): a pod adopted from a
    ReplicationController deleted ``--cascade=orphan`` lacks the new template's extra label."""
    kubectl(served, "create", "namespace", "labels")
    first = FRONTEND.replace("replicas: 3", "replicas: 1").replace(
        "template:", "selector: {app: guestbook}\n  template:").replace(", tier: frontend", "")
    kubectl(served, "create", "-n", "labels", "-f", "-", stdin=first)
    _until("its pod", lambda: len(_pods(served, "labels")) == 1)
    kubectl(served, "delete", "rc", "frontend", "-n", "labels", "--cascade=orphan")
    _until("released", lambda: not _pods(served, "labels")[0]["metadata"].get("ownerReferences"))
    second = FRONTEND.replace("replicas: 3", "replicas: 1").replace(
        "template:", "selector: {app: guestbook}\n  template:")
    kubectl(served, "create", "-n", "labels", "-f", "-", stdin=second)
    _until("adopted", lambda: bool(_pods(served, "labels")[0]["metadata"].get("ownerReferences")))

    def status() -> dict[str, Any]:
        got: dict[str, Any] = json.loads(kubectl(served, "get", "rc", "frontend", "-n", "labels", "-o", "json"))
        return got.get("status") or {}

    _until("counted", lambda: status().get("replicas") == 1)  # (no nodes here: never ready)
    assert len(_pods(served, "labels")) == 1 and "fullyLabeledReplicas" not in status()
