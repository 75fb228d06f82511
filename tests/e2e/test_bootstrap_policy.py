"""upstream's bootstrap RBAC policy over a socket (``serve --authorization-mode RBAC``): what the
system users and the controllers' service accounts may do, asked through the real kubectl; what a
user without bindings and one without credentials get; the policy read through the official
client's models; and its reconciliation when the server starts on a store that has drifted."""

from __future__ import annotations

import asyncio
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import yaml
from kubernetes import client, config

import store
from controlplane.api.rbacpolicy import AUTOUPDATE
from controlplane.api.rbacreconcile import ensure_rbac_policy
from controlplane.registry.types import Registry
from tests.api.test_bootstrap_policy import UPSTREAM_CLUSTER_ROLES, UPSTREAM_RULES
from tests.e2e.test_kubectl import KUBECTL, kubectl
from tests.e2e.test_kubernetes_client import bearer
from tests.test_cli import Serve, running, start_serve

TOKENS = 'admin-token,admin,1,"system:masters"\nalice-token,alice,2\n'


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    tmp = tmp_path_factory.mktemp("bootstrap-policy")
    (tmp / "tokens.csv").write_text(TOKENS)
    with running(start_serve(tmp, extra=("--token-auth-file", str(tmp / "tokens.csv"),
                                          "--authorization-mode", "RBAC"))) as s:
        yield s


def can_i(served: Serve, *args: str) -> str:
    """``kubectl auth can-i`` as the admin (impersonating with ``--as``): its answer, whatever its status."""
    env = dict(os.environ, KUBECONFIG=str(served.kubeconfig), HOME=str(served.state))
    r = subprocess.run([KUBECTL or "kubectl", "auth", "can-i", *args], capture_output=True, text=True, env=env,
                       timeout=60)
    assert r.returncode in (0, 1), r.stderr
    return r.stdout.strip()


def test_system_users_and_controllers_may_what_upstreams_may(served: Serve) -> None:
    assert can_i(served, "create", "bindings", "--as=system:kube-scheduler") == "yes"
    assert can_i(served, "update", "leases/kube-scheduler", "-n", "kube-system", "--as=system:kube-scheduler") == "yes"
    assert can_i(served, "delete", "nodes", "--as=system:kube-scheduler") == "no"
    deployments = "--as=system:serviceaccount:kube-system:deployment-controller"
    assert can_i(served, "update", "replicasets", deployments) == "yes"
    assert can_i(served, "update", "deployments/status", "-n", "prod", deployments) == "yes"
    assert can_i(served, "delete", "deployments", deployments) == "no"
    assert can_i(served, "list", "pods", "--as=alice") == "no"
    rules = yaml.safe_load(kubectl(served, "get", "clusterrole", "system:node", "-o", "yaml"))["rules"]
    assert rules == UPSTREAM_RULES["system:node"]  # kubectl's YAML, as a 1.34 cluster's


def test_a_user_without_bindings_gets_discovery_and_nobody_the_resources(served: Serve) -> None:
    with httpx.Client(base_url=served.url, headers={"authorization": "Bearer alice-token"}, timeout=10) as alice, \
            httpx.Client(base_url=served.url, timeout=10) as nobody:
        for path in ("/api", "/apis", "/apis/apps/v1", "/version", "/healthz", "/openapi/v2", "/openapi/v3/api/v1"):
            assert alice.get(path).status_code == 200, path  # system:discovery, system:public-info-viewer
        denied = alice.get("/api/v1/namespaces/default/pods")
        assert denied.status_code == 403 and denied.json()["reason"] == "Forbidden"
        assert alice.get("/metrics").status_code == 403  # system:monitoring's
        for path in ("/version", "/healthz", "/livez", "/readyz"):
            assert nobody.get(path).status_code == 200, path
        assert nobody.get("/api").status_code == 401  # over TLS a request without credentials is refused


def test_the_policy_through_the_official_client(served: Serve) -> None:
    with config.new_client_from_config(config_file=str(served.kubeconfig)) as api:
        rbac = client.RbacAuthorizationV1Api(api)
        roles = rbac.list_cluster_role(label_selector="kubernetes.io/bootstrapping=rbac-defaults").items
        assert {r.metadata.name for r in roles} == UPSTREAM_CLUSTER_ROLES
        role = rbac.read_cluster_role("system:controller:deployment-controller")
        assert api.sanitize_for_serialization(role.rules) == UPSTREAM_RULES["system:controller:deployment-controller"]
        assert role.metadata.annotations == {AUTOUPDATE: "true"}
        assert rbac.read_cluster_role_binding("system:node").subjects is None
        leader = rbac.read_namespaced_role_binding("system::leader-locking-kube-scheduler", "kube-system")
        assert [(s.kind, s.name) for s in leader.subjects] == [("User", "system:kube-scheduler"),
                                                                 ("ServiceAccount", "kube-scheduler")]
    alice = client.Configuration()
    config.load_kube_config(config_file=str(served.kubeconfig), client_configuration=alice)
    alice.api_key = {"authorization": "Bearer alice-token"}
    with client.ApiClient(alice) as api:
        review = client.AuthorizationV1Api(api).create_self_subject_rules_review(
            client.V1SelfSubjectRulesReview(spec=client.V1SelfSubjectRulesReviewSpec(namespace="default")))
    urls = {u for r in review.status.non_resource_rules for u in r.non_resource_urls}
    assert {"/api", "/apis/*", "/version", "/livez"} <= urls and "/metrics" not in urls
    assert any("selfsubjectaccessreviews" in r.resources for r in review.status.resource_rules)


async def _drifted(data: Path) -> None:
    """A store as a previous server left it, then changed by hand: a default role deleted, one
    protected (autoupdate "false") and emptied, one with a rule taken away, a binding emptied."""
    registry = Registry()
    s = store.open(f"lmdb://{data}")
    try:
        await ensure_rbac_policy(s, registry)
        roles = registry.get("rbac.authorization.k8s.io", "v1", "clusterroles")
        bindings = registry.get("rbac.authorization.k8s.io", "v1", "clusterrolebindings")
        assert roles is not None and bindings is not None

        async def rewrite(key: bytes, **fields: Any) -> None:
            kv = await s.get(key)
            assert kv is not None
            await s.update(key, orjson.dumps({**orjson.loads(kv.value), **fields}), kv.mod_revision)

        await s.delete(roles.key(None, "system:controller:deployment-controller"))
        await rewrite(roles.key(None, "system:kube-dns"), rules=[], metadata={
            "name": "system:kube-dns", "uid": "u", "annotations": {AUTOUPDATE: "false"}})
        kv = await s.get(roles.key(None, "system:node"))
        assert kv is not None
        await rewrite(roles.key(None, "system:node"), rules=orjson.loads(kv.value)["rules"][1:])
        await rewrite(bindings.key(None, "system:discovery"), subjects=[])
    finally:
        await s.close()


def test_the_policy_is_reconciled_when_the_server_starts(tmp_path: Path) -> None:
    """The drifted policy put back at start, but for the protected role; and, the server being
    plain HTTP, a request without credentials gets the public information
    (system:public-info-viewer) and not discovery, the OpenAPI documents included (upstream's 403)."""
    (tmp_path / "state" / "data").mkdir(parents=True)
    asyncio.run(_drifted(tmp_path / "state" / "data"))
    with running(start_serve(tmp_path, tls=False, extra=("--authorization-mode", "RBAC"))) as s, \
            httpx.Client(base_url=s.url, headers=bearer(s), timeout=10) as admin, \
            httpx.Client(base_url=s.url, timeout=10) as nobody:
        def read(path: str) -> dict[str, Any]:
            r = admin.get(f"/apis/rbac.authorization.k8s.io/v1/{path}")
            assert r.status_code == 200, r.text
            body: dict[str, Any] = r.json()
            return body

        got = read("clusterroles/system:controller:deployment-controller")
        assert [dict(sorted(r.items())) for r in got["rules"]] == UPSTREAM_RULES[
            "system:controller:deployment-controller"]  # back
        dns = read("clusterroles/system:kube-dns")
        assert not dns.get("rules") and dns["metadata"]["annotations"] == {AUTOUPDATE: "false"}  # left alone
        assert read("clusterroles/system:node")["rules"][-1] == {
            "verbs": ["create"], "apiGroups": ["authentication.k8s.io"],
            "resources": ["tokenreviews"]}  # the rule taken away, put back at the end
        assert [subject["name"] for subject in read("clusterrolebindings/system:discovery")["subjects"]] == [
            "system:authenticated"]
        for path in ("/version", "/healthz", "/livez", "/readyz"):
            assert nobody.get(path).status_code == 200, path
        for path in ("/api", "/openapi/v2", "/openapi/v3"):
            denied = nobody.get(path)
            assert denied.status_code == 403, path
            assert denied.json()["message"] == f'forbidden: User "system:anonymous" cannot get path "{path}"'
        assert admin.get("/openapi/v3").status_code == 200
