"""A real operator framework against ``controlplane serve``: kopf (``python -m kopf run``) as
its users run it, in its own process, with the server's kubeconfig and peering on; the test
drives it with the official client and reads what it did. Its watches (resumed, ended with
a CRD), its status, merge and JSON patches, its finalizer, its timers, its events, its
``kopf.adopt`` children and their garbage collection, and its peering keep-alives must all
work as against kube-apiserver: any error or unexpected warning in its log fails the test."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import pytest
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from tests.e2e.test_crd import as_dict
from tests.test_cli import Serve, running, start_serve

T = TypeVar("T")

NS = "operated"
GROUP, VERSION, PLURAL, KIND = "e2e.controlplane.dev", "v1", "widgets", "Widget"
CRD_NAME = f"{PLURAL}.{GROUP}"
PEERING = "e2e"
FINALIZER = "e2e.controlplane.dev/cleanup"
DEADLINE = 20.0  # generous for a loaded 2-core machine; each wait ends as soon as it holds

OPERATOR = f'''
import kopf
import kubernetes

GROUP, VERSION, PLURAL = {GROUP!r}, {VERSION!r}, {PLURAL!r}


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_):
    settings.persistence.finalizer = {FINALIZER!r}
    settings.watching.server_timeout = 30
    # A timer mid-tick when kopf stops (or its object's deletion begins) is waited for, up to
    # this; by default kopf gives it a few loop cycles only, and on a loaded machine its tick
    # (a thread, then a status patch) takes longer: at exit kopf then warns that it left the
    # timer orphaned.
    settings.background.instant_exit_timeout = 5.0


@kopf.on.create(GROUP, VERSION, PLURAL)
def create_child(body, name, namespace, spec, patch, **_):
    child = {{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {{"name": name + "-child"}},
             "data": {{"field": spec.get("field", "")}}}}
    kopf.adopt(child)
    kubernetes.client.CoreV1Api().create_namespaced_config_map(namespace, child)
    patch.status["child"] = child["metadata"]["name"]
    kopf.info(body, reason="ChildCreated", message="created " + child["metadata"]["name"])


@kopf.on.update(GROUP, VERSION, PLURAL, field="spec.field")
def field_changed(name, namespace, old, new, patch, **_):
    kubernetes.client.CoreV1Api().patch_namespaced_config_map(
        name + "-child", namespace, {{"data": {{"field": new}}}})
    patch.status["field"] = {{"old": old, "new": new}}


# Idempotent, as kopf asks of its handlers: it may run one again after it succeeded. It does when
# the object's timer is mid-tick as its deletion begins (nolar/kopf#882): the handler succeeds and
# kopf forgets that, but keeps the finalizer until the timer has stopped; the tick's status patch
# then shows it the object still finalized and it runs the handler again.
@kopf.on.delete(GROUP, VERSION, PLURAL)
def say_farewell(name, namespace, **_):
    try:
        kubernetes.client.CoreV1Api().create_namespaced_config_map(
            namespace, {{"metadata": {{"name": name + "-farewell"}}}})
    except kubernetes.client.exceptions.ApiException as e:
        if e.status != 409:  # AlreadyExists: an earlier run made it
            raise


@kopf.timer(GROUP, VERSION, PLURAL, interval=1)
def tick(status, patch, **_):
    patch.status["ticks"] = status.get("ticks", 0) + 1
'''

CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": CRD_NAME},
    "spec": {"group": GROUP, "scope": "Namespaced",
             "names": {"plural": PLURAL, "singular": "widget", "kind": KIND},
             "versions": [{"name": VERSION, "served": True, "storage": True, "subresources": {"status": {}},
                           "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                               "spec": {"type": "object", "properties": {"field": {"type": "string"}}},
                               "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}}}]},
}

# kopf's own peering.yaml, namespaced half
PEERING_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "kopfpeerings.kopf.dev"},
    "spec": {"group": "kopf.dev", "scope": "Namespaced",
             "names": {"plural": "kopfpeerings", "singular": "kopfpeering", "kind": "KopfPeering"},
             "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                 "type": "object", "properties": {
                     "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}}}]},
}

# What kopf may log at WARNING or above here: that the CRD is gone (while it is) and nothing else.
EXPECTED_WARNINGS = (re.compile(r"Unresolved resources cannot be served \(try creating their CRDs\): "
                                rf"Selector\(group='{re.escape(GROUP)}', version='{VERSION}', \w+='{PLURAL}'\)"),)
LEVEL = re.compile(r"\[(WARNING|ERROR|CRITICAL) *\] (.*)")


@dataclass
class Operator:
    proc: subprocess.Popen[bytes]
    log: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def problems(self) -> list[str]:
        """Every line of kopf's log that says something went wrong and was not expected."""
        text = self.output()
        found = [line for line in text.splitlines()
                 if (m := LEVEL.search(line)) and not any(w.search(m.group(2)) for w in EXPECTED_WARNINGS)]
        found += [m for m in ("Traceback", "Multidimensional multitasker") if m in text]
        return found

    def assert_clean(self) -> None:
        assert self.proc.poll() is None, f"kopf exited with {self.proc.returncode}:\n{self.output()}"
        assert not self.problems(), self.output()


@dataclass
class Cluster:
    served: Serve
    api: client.ApiClient
    operator: Operator

    @property
    def core(self) -> client.CoreV1Api:
        return client.CoreV1Api(self.api)

    @property
    def custom(self) -> client.CustomObjectsApi:
        return client.CustomObjectsApi(self.api)

    @property
    def crds(self) -> client.ApiextensionsV1Api:
        return client.ApiextensionsV1Api(self.api)

    def wait(self, what: str, check: Callable[[], T | None], timeout: float = DEADLINE) -> T:
        """``check()``'s first truthy value; fails with kopf's log after ``timeout``."""
        deadline = time.monotonic() + timeout
        while True:
            value = check()
            if value:
                return value
            if time.monotonic() > deadline:
                pytest.fail(f"{what}: not within {timeout} s; kopf's log:\n{self.operator.output()}")
            if self.operator.proc.poll() is not None:
                pytest.fail(f"{what}: kopf exited with {self.operator.proc.returncode}:\n{self.operator.output()}")
            time.sleep(0.1)

    def widget(self, name: str) -> dict[str, Any] | None:
        try:
            return as_dict(self.custom.get_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, name))
        except ApiException as e:
            if e.status == 404:
                return None
            raise

    def config_map(self, name: str) -> client.V1ConfigMap | None:
        try:
            return self.core.read_namespaced_config_map(name, NS)
        except ApiException as e:
            if e.status == 404:
                return None
            raise

    def config_map_gone(self, name: str) -> bool:
        return self.config_map(name) is None

    def create_widget(self, name: str, field: str) -> None:
        self.custom.create_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, {
            "apiVersion": f"{GROUP}/{VERSION}", "kind": KIND, "metadata": {"name": name}, "spec": {"field": field}})

    def handled(self, name: str) -> dict[str, Any]:
        """The widget once kopf's create handler has run and its finalizer is on."""
        def handled() -> dict[str, Any] | None:
            w = self.widget(name)
            if w and "child" in w.get("status", {}) and FINALIZER in w["metadata"].get("finalizers", []):
                return w
            return None
        return self.wait(f"{name} handled", handled)

    def peering(self) -> dict[str, Any]:
        return as_dict(self.custom.get_namespaced_custom_object("kopf.dev", "v1", NS, "kopfpeerings", PEERING))

    def crd_established(self) -> bool:
        try:
            crd = self.crds.read_custom_resource_definition(CRD_NAME)
        except ApiException as e:
            if e.status == 404:
                return False
            raise
        return any(c.type == "Established" and c.status == "True" for c in crd.status.conditions or ())


def _start_operator(served: Serve, tmp: Path) -> Operator:
    module = tmp / "operator.py"
    module.write_text(OPERATOR)
    log = tmp / "kopf.log"
    env = dict(os.environ, KUBECONFIG=str(served.kubeconfig), HOME=str(tmp))
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "kopf", "run", "--peering", PEERING, "--namespace", NS, str(module)],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, cwd=tmp)
    return Operator(proc, log)


def _stop(operator: Operator) -> int:
    if operator.proc.poll() is None:
        operator.proc.send_signal(signal.SIGTERM)
        try:
            operator.proc.wait(timeout=DEADLINE)
        except subprocess.TimeoutExpired:
            operator.proc.kill()
            operator.proc.wait()
            pytest.fail(f"kopf did not exit within {DEADLINE} s of SIGTERM:\n{operator.output()}")
    return operator.proc.returncode


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    tmp = tmp_path_factory.mktemp("kopf")
    # the scheduler brings the controllers, and with them the collection of adopted children
    with running(start_serve(tmp, scheduler=True)) as served:
        api = config.new_client_from_config(config_file=str(served.kubeconfig))
        try:
            client.CoreV1Api(api).create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=NS)))
            extensions = client.ApiextensionsV1Api(api)
            extensions.create_custom_resource_definition(_sent(PEERING_CRD))
            extensions.create_custom_resource_definition(_sent(CRD))
            client.CustomObjectsApi(api).create_namespaced_custom_object(
                "kopf.dev", "v1", NS, "kopfpeerings",
                {"apiVersion": "kopf.dev/v1", "kind": "KopfPeering", "metadata": {"name": PEERING}})
            operator = _start_operator(served, tmp)
            try:
                yield Cluster(served, api, operator)
            finally:
                _stop(operator)
        finally:
            api.close()


def test_the_operator_joins_its_peering(cluster: Cluster) -> None:
    peers = cluster.wait("kopf's keep-alive in its peering", lambda: cluster.peering().get("status"))
    (peer,) = peers.values()
    assert (peer["priority"], peer["lifetime"]) == (0, 60)
    assert datetime.fromisoformat(peer["lastseen"]).tzinfo is not None
    cluster.operator.assert_clean()


def test_a_new_resource_gets_its_status_finalizer_and_adopted_child(cluster: Cluster) -> None:
    cluster.create_widget("first", "one")
    widget = cluster.handled("first")
    assert widget["status"]["child"] == "first-child"
    child = cluster.config_map("first-child")
    assert child is not None
    assert child.data == {"field": "one"}
    (ref,) = child.metadata.owner_references
    assert (ref.api_version, ref.kind, ref.name, ref.uid, ref.controller, ref.block_owner_deletion) == (
        f"{GROUP}/{VERSION}", KIND, "first", widget["metadata"]["uid"], True, True)
    # kopf keeps what it handled in an annotation; the handler's event (kopf.info) is the object's
    assert "kopf.zalando.org/last-handled-configuration" in widget["metadata"]["annotations"]
    (event,) = cluster.wait("the handler's event", lambda: cluster.core.list_namespaced_event(
        NS, field_selector="involvedObject.name=first,reason=ChildCreated").items)
    assert (event.type, event.message, event.involved_object.uid) == (
        "Normal", "created first-child", widget["metadata"]["uid"])
    cluster.operator.assert_clean()


def test_a_changed_field_runs_its_handler(cluster: Cluster) -> None:
    cluster.create_widget("second", "before")
    cluster.handled("second")
    cluster.custom.patch_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, "second", {"spec": {"field": "after"}})
    widget = cluster.wait("the field handler's status", lambda: (w := cluster.widget("second"))
                          and w["status"].get("field") and w)
    assert widget["status"]["field"] == {"old": "before", "new": "after"}
    cluster.wait("the child updated",
                 lambda: (c := cluster.config_map("second-child")) and c.data == {"field": "after"})
    cluster.operator.assert_clean()


def test_the_timer_keeps_ticking(cluster: Cluster) -> None:
    cluster.create_widget("third", "x")
    cluster.handled("third")
    cluster.wait("three ticks", lambda: (cluster.widget("third") or {}).get("status", {}).get("ticks", 0) >= 3)
    cluster.operator.assert_clean()


def test_a_deleted_resource_waits_for_its_handler_then_takes_its_child(cluster: Cluster) -> None:
    cluster.create_widget("fourth", "x")
    cluster.create_widget("bystander", "x")
    cluster.handled("fourth")
    cluster.handled("bystander")
    assert cluster.config_map("fourth-child") is not None
    cluster.custom.delete_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, "fourth")
    cluster.wait("the deletion handler", lambda: cluster.config_map("fourth-farewell"))
    cluster.wait("the widget gone once its finalizer is removed", lambda: cluster.widget("fourth") is None)
    cluster.wait("its adopted child collected", partial(cluster.config_map_gone, "fourth-child"))
    assert cluster.config_map("bystander-child") is not None  # another owner's child stays
    cluster.operator.assert_clean()


def test_the_operator_survives_its_crd_going_and_serves_it_again(cluster: Cluster) -> None:
    cluster.create_widget("doomed", "x")
    cluster.handled("doomed")
    # the CRD's deletion deletes its resources (the other tests' too), and kopf's finalizer holds
    # each until its deletion handler has run
    left = [w["metadata"]["name"] for w in
            as_dict(cluster.custom.list_namespaced_custom_object(GROUP, VERSION, NS, PLURAL))["items"]]
    cluster.crds.delete_custom_resource_definition(CRD_NAME)
    for name in left:
        cluster.wait(f"{name}'s deletion handler", partial(cluster.config_map, f"{name}-farewell"))
    cluster.wait("the CRD gone", partial(_crd_gone, cluster))
    cluster.wait("kopf noticing it", lambda: any(w.search(cluster.operator.output()) for w in EXPECTED_WARNINGS))
    for name in left:
        cluster.wait(f"{name}'s child collected", partial(cluster.config_map_gone, f"{name}-child"))
    cluster.operator.assert_clean()

    cluster.crds.create_custom_resource_definition(_sent(CRD))
    cluster.wait("the CRD established again", cluster.crd_established)
    cluster.create_widget("reborn", "again")
    widget = cluster.handled("reborn")
    assert widget["status"]["child"] == "reborn-child"
    cluster.operator.assert_clean()


def test_the_operator_stops_cleanly_and_leaves_its_peering(cluster: Cluster) -> None:
    cluster.wait("kopf's keep-alive in its peering", lambda: cluster.peering().get("status"))
    assert _stop(cluster.operator) == 0, cluster.operator.output()
    assert not cluster.operator.problems(), cluster.operator.output()
    peering = cluster.peering()
    assert not peering.get("status"), peering


def _sent(body: dict[str, Any]) -> Any:
    """A body the client sends as it is (its models are typed; a dict serialises the same)."""
    return body


def _crd_gone(cluster: Cluster) -> bool:
    try:
        cluster.crds.read_custom_resource_definition(CRD_NAME)
    except ApiException as e:
        if e.status == 404:
            return True
        raise
    return False
