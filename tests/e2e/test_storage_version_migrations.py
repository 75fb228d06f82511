"""StorageVersionMigrations (storagemigration.k8s.io/v1) over a socket, with the controllers under
``--authorization-mode RBAC``: served in discovery, created, listed (upstream's columns),
described and read by kubectl and the official client; run by the storage version migrator as
its own service account (``Running`` then ``Succeeded``, or ``Failed`` for a resource not
served); refused in upstream's words (registry/storagemigration.py)."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client, config

from tests.e2e.test_kubectl import KUBECTL, kubectl
from tests.e2e.test_rbac import as_user
from tests.test_cli import Serve, running, start_serve

TOKENS = 'admin-token,admin,1,"system:masters"\n'
SVMS = "/apis/storagemigration.k8s.io/v1/storageversionmigrations"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    tmp = tmp_path_factory.mktemp("svm")
    tokens = tmp / "tokens.csv"
    tokens.write_text(TOKENS)
    extra = ("--token-auth-file", str(tokens), "--authorization-mode", "RBAC", "--nodes", "0")
    with running(start_serve(tmp, scheduler=True, extra=extra)) as s:
        yield s


def _migration(name: str, group: str, resource: str) -> str:
    return json.dumps({"apiVersion": "storagemigration.k8s.io/v1", "kind": "StorageVersionMigration",
                       "metadata": {"name": name}, "spec": {"resource": {"group": group, "resource": resource}}})


def _refused(served: Serve, *args: str, stdin: str) -> str:
    env = dict(os.environ, KUBECONFIG=str(served.kubeconfig), HOME=str(served.state))
    r = subprocess.run([KUBECTL, *args], input=stdin, capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode != 0, r.stdout
    return r.stderr


def _finished(served: Serve, name: str, timeout: float = 20.0) -> dict[str, Any]:
    """The migration once it has a Succeeded or Failed condition."""
    deadline = time.monotonic() + timeout
    while True:
        svm = json.loads(kubectl(served, "get", "storageversionmigration", name, "-o", "json"))
        kinds = {c["type"] for c in svm["status"].get("conditions") or () if c["status"] == "True"}
        if kinds & {"Succeeded", "Failed"} or time.monotonic() > deadline:
            return dict(svm)
        time.sleep(0.1)


def test_kubectl_creates_a_migration_the_migrator_runs(served: Serve) -> None:
    resources = kubectl(served, "api-resources", "--api-group=storagemigration.k8s.io")
    assert any(line.split() == ["storageversionmigrations", "storagemigration.k8s.io/v1", "false",
                                "StorageVersionMigration"] for line in resources.splitlines())
    kubectl(served, "create", "deployment", "web", "--image=nginx")
    assert "deployments created" in kubectl(served, "create", "-f", "-",
                                            stdin=_migration("deployments", "apps", "deployments"))
    svm = _finished(served, "deployments")
    conditions = {c["type"]: c for c in svm["status"]["conditions"]}
    assert conditions["Succeeded"]["status"] == "True"
    assert conditions["Succeeded"]["reason"] == "StorageVersionMigrationSucceeded"
    assert conditions["Running"]["status"] == "False"
    assert conditions["Running"]["reason"] == "StorageVersionMigrationInProgress"
    assert int(svm["status"]["resourceVersion"]) > 0
    rows = [line.split() for line in kubectl(served, "get", "storageversionmigrations").splitlines()]
    assert rows[0] == ["NAME", "RESOURCE"] and ["deployments", "deployments.apps"] in rows
    described = kubectl(served, "describe", "storageversionmigration", "deployments")
    assert "Kind:         StorageVersionMigration" in described and "StorageVersionMigrationSucceeded" in described


def test_a_core_resource_migrates_and_an_unknown_one_fails(served: Serve) -> None:
    kubectl(served, "create", "-f", "-", stdin=_migration("configmaps", "", "configmaps"))
    kubectl(served, "create", "-f", "-", stdin=_migration("widgets", "example.com", "widgets"))
    succeeded = {c["type"]: c["status"] for c in _finished(served, "configmaps")["status"]["conditions"]}
    assert succeeded == {"Running": "False", "Succeeded": "True"}
    failed = _finished(served, "widgets")["status"]
    assert [(c["type"], c["status"], c["reason"], c["message"]) for c in failed["conditions"]] == [
        ("Failed", "True", "StorageVersionMigrationFailed", "resource does not exist in discovery")]


def test_the_official_client_creates_lists_and_reads_a_migration(served: Serve) -> None:
    with config.new_client_from_config(config_file=str(served.kubeconfig)) as c:
        api = client.StoragemigrationV1Api(c)
        api.create_storage_version_migration(client.V1StorageVersionMigration(
            metadata=client.V1ObjectMeta(name="secrets"),
            spec=client.V1StorageVersionMigrationSpec(resource=client.V1GroupResource(group="", resource="secrets"))))
        assert "secrets" in [m.metadata.name for m in api.list_storage_version_migration().items]
        read = api.read_storage_version_migration("secrets")
        assert read.spec.resource.resource == "secrets"


@pytest.mark.parametrize(("name", "group", "resource", "error"), [
    ("none", "apps", "", "spec.resource.resource: Required value: resource is required to be set"),
    ("upper", "apps", "Deployments", 'spec.resource.resource: Invalid value: "Deployments": a DNS-1035 label must '
     "consist of lower case alphanumeric characters or '-', start with an alphabetic character"),
    ("group", "Apps", "deployments", 'spec.resource.group: Invalid value: "Apps": a lowercase RFC 1123 subdomain'),
])
def test_a_bad_migration_is_refused_in_upstreams_words(served: Serve, name: str, group: str, resource: str,
                                                       error: str) -> None:
    stderr = _refused(served, "create", "-f", "-", stdin=_migration(name, group, resource))
    assert f'The StorageVersionMigration "{name}" is invalid: {error}' in stderr


def test_the_spec_is_immutable_and_success_final(served: Serve) -> None:
    kubectl(served, "create", "-f", "-", stdin=_migration("services", "", "services"))
    stderr = _refused(served, "patch", "storageversionmigration", "services", "--type", "merge", "-p",
                      '{"spec": {"resource": {"resource": "endpoints"}}}', stdin="")
    assert ('spec: Invalid value: storagemigration.StorageVersionMigrationSpec{Resource:v1.GroupResource{Group:"", '
            'Resource:"endpoints"}}: field is immutable') in stderr
    svm = _finished(served, "services")
    with as_user(served, "admin-token") as admin:
        status = {**svm["status"], "conditions": [c for c in svm["status"]["conditions"] if c["type"] != "Succeeded"]}
        r = admin.put(f"{SVMS}/services/status", json={**svm, "status": status})
        assert r.status_code == 422, r.text
        assert "Success condition cannot be set to false once it is true" in r.json()["message"]
        changed = {**svm["status"], "resourceVersion": "1"}
        r = admin.put(f"{SVMS}/services/status", json={**svm, "status": changed})
        assert r.status_code == 422
        assert r.json()["message"] == ('StorageVersionMigration.storagemigration.k8s.io "services" is invalid: '
                                       'status.resourceVersion: Invalid value: "1": field is immutable')
