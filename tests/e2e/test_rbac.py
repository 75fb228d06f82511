"""``serve --authorization-mode RBAC``: requests allowed by the roles bound to their user,
denied with upstream's 403 otherwise; system:masters may do everything."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import time
from collections.abc import Callable, Iterator

import httpx
import pytest

from tests.e2e.test_kubectl import KUBECTL, kubectl
from tests.test_cli import Serve, running, start_serve

TOKENS = ('admin-token,admin,1,"system:masters"\nalice-token,alice,2\nbob-token,bob,3,"team,ops"\ncarol-token,carol,4\n'
          'dave-token,dave,5,"system:monitoring"\nerin-token,erin,6\n')
RBAC = "/apis/rbac.authorization.k8s.io/v1"


@pytest.fixture(scope="module")
def rbac_served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    tmp = tmp_path_factory.mktemp("rbac")
    tokens = tmp / "tokens.csv"
    tokens.write_text(TOKENS)
    with running(start_serve(tmp, extra=("--token-auth-file", str(tokens), "--authorization-mode", "RBAC"))) as s:
        yield s


def as_user(served: Serve, token: str) -> httpx.Client:
    return httpx.Client(base_url=served.url, headers={"authorization": f"Bearer {token}"}, timeout=10)


def wait_status(do: Callable[[], httpx.Response], expected: int, timeout: float = 5.0) -> httpx.Response:
    """``do()`` until it answers ``expected`` (a binding takes effect once it reaches the cache)."""
    deadline = time.monotonic() + timeout
    while True:
        r = do()
        if r.status_code == expected or time.monotonic() > deadline:
            return r
        time.sleep(0.05)


def test_roles_bound_to_a_user_allow_and_everything_else_is_forbidden(rbac_served: Serve) -> None:
    with as_user(rbac_served, "admin-token") as admin, as_user(rbac_served, "alice-token") as alice, \
            as_user(rbac_served, "bob-token") as bob:
        _roles_bound(admin, alice, bob)


def _roles_bound(admin: httpx.Client, alice: httpx.Client, bob: httpx.Client) -> None:
    r = alice.get("/api/v1/namespaces/default/pods")
    assert r.status_code == 403 and r.json()["reason"] == "Forbidden"
    assert r.json()["message"] == ('pods is forbidden: User "alice" cannot list resource "pods" in API group "" in '
                                   'the namespace "default"')
    assert alice.get("/api").status_code == 200 and alice.get("/apis/apps/v1").status_code == 200  # discovery
    assert admin.post("/api/v1/namespaces", json={"metadata": {"name": "dev"}}).status_code == 201
    assert admin.post(f"{RBAC}/namespaces/dev/roles", json={
        "metadata": {"name": "pod-reader"},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}]}).status_code == 201
    assert admin.post(f"{RBAC}/namespaces/dev/rolebindings", json={
        "metadata": {"name": "alice-reads"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                                         "name": "pod-reader"},
        "subjects": [{"kind": "User", "name": "alice"}]}).status_code == 201
    assert wait_status(lambda: alice.get("/api/v1/namespaces/dev/pods"), 200).status_code == 200
    assert alice.get("/api/v1/namespaces/dev/pods", params={"watch": "1", "timeoutSeconds": "1"}).status_code == 200
    assert alice.get("/api/v1/namespaces/default/pods").status_code == 403  # the binding is in dev only
    denied = alice.post("/api/v1/namespaces/dev/pods", json={
        "metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}})
    assert denied.status_code == 403 and 'cannot create resource "pods"' in denied.json()["message"]
    assert alice.get("/api/v1/namespaces/dev/pods/p/log").status_code == 403  # pods/log is not pods
    # a ClusterRole bound to a group, cluster-wide
    assert admin.post(f"{RBAC}/clusterroles", json={
        "metadata": {"name": "node-reader"},
        "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]}]}).status_code == 201
    assert admin.post(f"{RBAC}/clusterrolebindings", json={
        "metadata": {"name": "team-reads-nodes"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "node-reader"},
        "subjects": [{"kind": "Group", "name": "team"}]}).status_code == 201
    assert wait_status(lambda: bob.get("/api/v1/nodes"), 200).status_code == 200
    r = alice.get("/api/v1/nodes")
    assert r.status_code == 403 and r.json()["message"].endswith('in API group "" at the cluster scope')
    # a binding's removal takes the access away again
    assert admin.delete(f"{RBAC}/namespaces/dev/rolebindings/alice-reads").status_code == 200
    assert wait_status(lambda: alice.get("/api/v1/namespaces/dev/pods"), 403).status_code == 403


def test_the_admin_kubeconfig_works_and_cluster_admin_is_bootstrapped(rbac_served: Serve) -> None:
    assert "default" in kubectl(rbac_served, "get", "namespaces", "-o", "name")
    out = kubectl(rbac_served, "get", "clusterrolebinding", "cluster-admin", "-o",
                  "jsonpath={.roleRef.name} {.subjects[0].name}")
    assert out == "cluster-admin system:masters"


def test_metrics_are_for_system_monitoring_and_the_masters(rbac_served: Serve) -> None:
    """As upstream's bootstrap policy: ``/metrics`` needs a rule allowing ``get`` on the path
    (the ``system:monitoring`` role, bound to that group); any other signed-in user gets 403,
    worded as upstream's; the health checks stay open."""
    with as_user(rbac_served, "admin-token") as admin, as_user(rbac_served, "carol-token") as carol, \
            as_user(rbac_served, "dave-token") as dave:
        assert admin.get("/metrics").status_code == 200
        assert "apiserver_request_total" in dave.get("/metrics").text
        r = carol.get("/metrics")
        assert r.status_code == 403 and r.json()["message"] == 'forbidden: User "carol" cannot get path "/metrics"'
        assert carol.get("/readyz").status_code == 200
        role = admin.get(f"{RBAC}/clusterroles/system:monitoring").json()
        assert {"nonResourceURLs": ["/healthz", "/healthz/*", "/livez", "/livez/*", "/metrics", "/metrics/slis",
                                    "/readyz", "/readyz/*"], "verbs": ["get"]} in role["rules"]
    with httpx.Client(base_url=rbac_served.url, timeout=10, verify=False) as nobody:
        assert nobody.get("/metrics").status_code == 401


def test_self_reviews_answer_for_the_requesting_user(rbac_served: Serve) -> None:
    # what the Python client's AuthorizationV1Api / AuthenticationV1Api send (kubectl sends protobuf: 415)
    with as_user(rbac_served, "bob-token") as bob:
        who = bob.post("/apis/authentication.k8s.io/v1/selfsubjectreviews",
                       json={"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
        assert who.status_code == 201
        # the token file's uid column is the user's, as upstream's tokenfile authenticator keeps it
        assert who.json()["status"]["userInfo"] == {"username": "bob", "uid": "3",
                                                    "groups": ["team", "ops", "system:authenticated"]}
        ask = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
               "spec": {"resourceAttributes": {"verb": "list", "resource": "secrets", "namespace": "default"}}}
        r = bob.post("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", json=ask)
        assert r.status_code == 201 and r.json()["status"]["allowed"] is False
        assert bob.get("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews").status_code == 403  # authz first
    with as_user(rbac_served, "admin-token") as admin:
        r = admin.post("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", json=ask)
        assert r.json()["status"]["allowed"] is True
        assert admin.get("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews").status_code == 405
        review = admin.post("/apis/authentication.k8s.io/v1/tokenreviews",
                            json={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                                  "spec": {"token": "alice-token"}})
        assert review.status_code == 201 and review.json()["status"]["user"] == {
            "username": "alice", "uid": "2", "groups": ["system:authenticated"]}
    who = json.loads(until_ok(lambda: as_token(rbac_served, "carol-token", "auth", "whoami", "-o", "json")))
    assert who["status"]["userInfo"] == {"username": "carol", "uid": "4", "groups": ["system:authenticated"]}


def test_a_lease_renewal_needs_update_on_the_leases_too(rbac_served: Serve) -> None:
    """Over a real socket: bob may create leaserenewals, but until he may update leases
    in the namespace the renewal is forbidden and no Lease moves."""
    renewals = "/apis/nodes.controlplane.dev/v1alpha1/namespaces/kube-node-lease/leaserenewals"
    leases = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"
    body = {"spec": {"renewTime": "2026-12-02T01:00:10.000000Z", "leases": ["bob-node"]}}
    with as_user(rbac_served, "admin-token") as admin, as_user(rbac_served, "bob-token") as bob:
        assert admin.post(leases, json={"metadata": {"name": "bob-node"}, "spec": {
            "renewTime": "2026-12-02T01:00:00.000000Z"}}).status_code == 201
        assert bob.post(renewals, json=body).status_code == 403
        for name, rule in (("renew", {"apiGroups": ["nodes.controlplane.dev"], "resources": ["leaserenewals"],
                                      "verbs": ["create"]}),
                           ("leases", {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                                       "verbs": ["update"]})):
            assert admin.post(f"{RBAC}/namespaces/kube-node-lease/roles", json={
                "metadata": {"name": f"bob-{name}"}, "rules": [rule]}).status_code == 201
            assert admin.post(f"{RBAC}/namespaces/kube-node-lease/rolebindings", json={
                "metadata": {"name": f"bob-{name}"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": f"bob-{name}"},
                "subjects": [{"kind": "User", "name": "bob"}]}).status_code == 201
            if name == "renew":
                deadline = time.monotonic() + 5  # until the binding reaches the cache
                while 'cannot create resource "leaserenewals"' in (denied := bob.post(renewals, json=body)).text \
                        and time.monotonic() < deadline:
                    time.sleep(0.05)
                assert denied.status_code == 403 and 'cannot update resource "leases"' in denied.json()["message"]
                assert admin.get(f"{leases}/bob-node").json()["spec"]["renewTime"].endswith("00.000000Z")
        r = wait_status(lambda: bob.post(renewals, json=body), 201)
        assert r.status_code == 201 and r.json()["status"] == {"renewed": 1}
        assert admin.get(f"{leases}/bob-node").json()["spec"]["renewTime"] == "2026-12-02T01:00:10.000000Z"


def test_a_node_status_report_needs_patch_on_nodes_status_too(rbac_served: Serve) -> None:
    """Over a real socket: carol may create nodestatusreports, but until she may patch
    nodes/status the report is forbidden and no Node moves."""
    reports = "/apis/nodes.controlplane.dev/v1alpha1/nodestatusreports"
    body = {"spec": {"heartbeatTime": "2026-12-02T01:05:00Z", "nodes": ["carol-node"],
                     "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]}}
    with as_user(rbac_served, "admin-token") as admin, as_user(rbac_served, "carol-token") as carol:
        assert admin.post("/api/v1/nodes", json={"metadata": {"name": "carol-node"}}).status_code == 201
        assert carol.post(reports, json=body).status_code == 403
        for name, rule in (("report", {"apiGroups": ["nodes.controlplane.dev"], "resources": ["nodestatusreports"],
                                       "verbs": ["create"]}),
                           ("status", {"apiGroups": [""], "resources": ["nodes/status"], "verbs": ["patch"]})):
            assert admin.post(f"{RBAC}/clusterroles", json={
                "metadata": {"name": f"carol-{name}"}, "rules": [rule]}).status_code == 201
            assert admin.post(f"{RBAC}/clusterrolebindings", json={
                "metadata": {"name": f"carol-{name}"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": f"carol-{name}"},
                "subjects": [{"kind": "User", "name": "carol"}]}).status_code == 201
            if name == "report":
                deadline = time.monotonic() + 5  # until the binding reaches the cache
                while 'cannot create resource "nodestatusreports"' in (denied := carol.post(reports, json=body)).text \
                        and time.monotonic() < deadline:
                    time.sleep(0.05)
                assert denied.status_code == 403 and 'cannot patch resource "nodes/status"' in denied.json()["message"]
                assert "conditions" not in admin.get("/api/v1/nodes/carol-node").json().get("status", {})
        r = wait_status(lambda: carol.post(reports, json=body), 201)
        assert r.status_code == 201 and r.json()["status"] == {"reported": 1}
        [ready] = admin.get("/api/v1/nodes/carol-node").json()["status"]["conditions"]
        assert ready["lastHeartbeatTime"] == ready["lastTransitionTime"] == "2026-12-02T01:05:00Z"


def test_a_websocket_exec_needs_create_as_a_spdy_one_does(rbac_served: Serve) -> None:
    """Over a real socket: a websocket upgrade is a GET, yet exec, attach and portforward want
    ``create`` on the subresource too (upstream's AuthorizePodWebsocketUpgradeCreatePermission);
    the edit role grants it."""
    exec_path = "/api/v1/namespaces/dev-exec/pods/p/exec?command=ls&stdout=true"
    websocket = {"connection": "Upgrade", "upgrade": "websocket", "sec-websocket-version": "13",
                 "sec-websocket-key": "dGhlIHNhbXBsZSBub25jZQ==", "sec-websocket-protocol": "v5.channel.k8s.io"}
    with as_user(rbac_served, "admin-token") as admin, as_user(rbac_served, "carol-token") as carol:
        assert admin.post("/api/v1/namespaces", json={"metadata": {"name": "dev-exec"}}).status_code == 201
        assert admin.post(f"{RBAC}/namespaces/dev-exec/roles", json={
            "metadata": {"name": "exec-get"},
            "rules": [{"apiGroups": [""], "resources": ["pods/exec"], "verbs": ["get"]}]}).status_code == 201
        assert admin.post(f"{RBAC}/namespaces/dev-exec/rolebindings", json={
            "metadata": {"name": "carol-exec-get"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "exec-get"},
            "subjects": [{"kind": "User", "name": "carol"}]}).status_code == 201
        deadline = time.monotonic() + 5  # until the binding reaches the cache
        while "cannot get" in (denied := carol.get(exec_path, headers=websocket)).text and time.monotonic() < deadline:
            time.sleep(0.05)
        assert denied.status_code == 403 and denied.json()["message"] == (
            'pods "p" is forbidden: User "carol" cannot create resource "pods/exec" in API group "" in the '
            'namespace "dev-exec"')
        assert carol.get(exec_path).status_code == 404  # a GET that is no upgrade needs get alone: no pod p
        assert admin.post(f"{RBAC}/namespaces/dev-exec/rolebindings", json={
            "metadata": {"name": "carol-edits"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
            "subjects": [{"kind": "User", "name": "carol"}]}).status_code == 201
        r = wait_status(lambda: carol.get(exec_path, headers=websocket), 404)
        assert r.status_code == 404 and r.json()["message"] == 'pods "p" not found'
        assert carol.post(exec_path, headers={"connection": "Upgrade", "upgrade": "SPDY/3.1"}).status_code == 404


def test_a_head_request_is_authorized_as_a_get(rbac_served: Serve) -> None:
    """Over a real socket: HEAD (a proxy takes it) needs ``get``, as upstream's RequestInfo
    reads it; the request then goes on (no pod p: 404), where a verb ``head`` was refused."""
    with as_user(rbac_served, "admin-token") as admin, as_user(rbac_served, "dave-token") as dave:
        assert admin.post("/api/v1/namespaces", json={"metadata": {"name": "dev-head"}}).status_code == 201
        assert admin.post(f"{RBAC}/namespaces/dev-head/roles", json={
            "metadata": {"name": "proxy-get"},
            "rules": [{"apiGroups": [""], "resources": ["pods/proxy"], "verbs": ["get"]}]}).status_code == 201
        assert admin.post(f"{RBAC}/namespaces/dev-head/rolebindings", json={
            "metadata": {"name": "dave-proxy-get"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "proxy-get"},
            "subjects": [{"kind": "User", "name": "dave"}]}).status_code == 201
        path = "/api/v1/namespaces/dev-head/pods/p/proxy/healthz"
        assert wait_status(lambda: dave.get(path), 404).status_code == 404  # the binding is in effect
        assert dave.head(path).status_code == 404


def test_a_list_or_watch_of_one_name_by_field_selector_is_authorized_for_that_name(rbac_served: Serve) -> None:
    """Over a real socket: upstream's RequestInfo takes ``fieldSelector=metadata.name=x`` as the
    request's name, so a role limited to ``resourceNames: [x]`` may list and watch x that way
    (client-go's single-object informers, a kubelet's watch of one Secret); a named GET with
    ``watch`` stays a ``get``."""
    with as_user(rbac_served, "admin-token") as admin, as_user(rbac_served, "bob-token") as bob:
        assert admin.post("/api/v1/namespaces", json={"metadata": {"name": "dev-one"}}).status_code == 201
        for name in ("cm1", "cm2"):
            assert admin.post("/api/v1/namespaces/dev-one/configmaps",
                              json={"metadata": {"name": name}}).status_code == 201
        assert admin.post(f"{RBAC}/namespaces/dev-one/roles", json={
            "metadata": {"name": "one-cm"}, "rules": [{"apiGroups": [""], "resources": ["configmaps"],
                                                      "resourceNames": ["cm1"], "verbs": ["list", "watch"]}]}
        ).status_code == 201
        assert admin.post(f"{RBAC}/namespaces/dev-one/rolebindings", json={
            "metadata": {"name": "bob-one-cm"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "one-cm"},
            "subjects": [{"kind": "User", "name": "bob"}]}).status_code == 201
        cms = "/api/v1/namespaces/dev-one/configmaps"
        listed = wait_status(lambda: bob.get(cms, params={"fieldSelector": "metadata.name=cm1"}), 200)
        assert listed.status_code == 200 and [i["metadata"]["name"] for i in listed.json()["items"]] == ["cm1"]
        watched = bob.get(cms, params={"fieldSelector": "metadata.name==cm1", "watch": "true",
                                       "timeoutSeconds": "1"})
        assert watched.status_code == 200 and '"cm1"' in watched.text
        assert bob.get(cms, params={"fieldSelector": "metadata.name=cm2"}).status_code == 403
        assert bob.get(cms).status_code == 403  # all of them: no name
        assert bob.get(f"{cms}/cm1", params={"watch": "true", "timeoutSeconds": "1"}).status_code == 403  # a get


def test_the_name_a_field_selector_gives_is_upstreams_parse_of_it(rbac_served: Serve) -> None:
    """The selector read as fields.ParseSelector reads it, before the request is served: of
    two ``metadata.name`` terms the first sorted names the request (both must hold: nothing
    listed); a selector that fails to parse (a bare term, an unescaped ``=`` in a value
    escaped past a comma) or a query whose ListOptions fail to decode names nothing, and
    the user limited to a name is refused before the 400 the admin gets."""
    with as_user(rbac_served, "admin-token") as admin, as_user(rbac_served, "bob-token") as bob:
        assert admin.post("/api/v1/namespaces", json={"metadata": {"name": "dev-fs"}}).status_code == 201
        for name in ("cm1", "cm2"):
            assert admin.post("/api/v1/namespaces/dev-fs/configmaps",
                              json={"metadata": {"name": name}}).status_code == 201
        assert admin.post(f"{RBAC}/namespaces/dev-fs/roles", json={
            "metadata": {"name": "one-cm"}, "rules": [{"apiGroups": [""], "resources": ["configmaps"],
                                                      "resourceNames": ["cm1"], "verbs": ["list", "watch"]}]}
        ).status_code == 201
        assert admin.post(f"{RBAC}/namespaces/dev-fs/rolebindings", json={
            "metadata": {"name": "bob-one-cm"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "one-cm"},
            "subjects": [{"kind": "User", "name": "bob"}]}).status_code == 201
        cms = "/api/v1/namespaces/dev-fs/configmaps"
        both = {"fieldSelector": "metadata.name=cm2,metadata.name=cm1"}
        listed = wait_status(lambda: bob.get(cms, params=both), 200)
        assert listed.status_code == 200 and listed.json()["items"] == []
        watched = bob.get(cms, params={**both, "watch": "true", "timeoutSeconds": "1"})
        assert watched.status_code == 200 and watched.text == ""
        for params in ({"fieldSelector": "metadata.name=cm1,bogus"}, {"fieldSelector": "x=1\\,metadata.name=cm1"},
                       {"fieldSelector": "metadata.name=cm1", "labelSelector": "a in (b"},
                       {"fieldSelector": "metadata.name=cm1", "limit": "many"}):
            for watch in ({}, {"watch": "true", "timeoutSeconds": "1"}):
                denied = bob.get(cms, params={**params, **watch})
                assert denied.status_code == 403, (params, watch, denied.text)
                assert denied.json()["message"].startswith(
                    f'configmaps is forbidden: User "bob" cannot {"watch" if watch else "list"} resource')
            assert admin.get(cms, params=params).status_code == 400


def test_a_legacy_watch_path_is_authorized_as_a_watch_of_the_name_on_its_path(rbac_served: Serve) -> None:
    """``/api/v1/watch/namespaces/NS/configmaps/NAME`` is verb ``watch`` on NAME, whatever
    ``?watch`` says; the list path under ``/watch/`` names nothing, its field selector
    included (upstream's RequestInfo takes no selector from a verb given by the path)."""
    with as_user(rbac_served, "admin-token") as admin, as_user(rbac_served, "bob-token") as bob:
        assert admin.post("/api/v1/namespaces", json={"metadata": {"name": "dev-lw"}}).status_code == 201
        for name in ("cm1", "cm2"):
            assert admin.post("/api/v1/namespaces/dev-lw/configmaps",
                              json={"metadata": {"name": name}}).status_code == 201
        assert admin.post(f"{RBAC}/namespaces/dev-lw/roles", json={
            "metadata": {"name": "watch-cm1"}, "rules": [{"apiGroups": [""], "resources": ["configmaps"],
                                                         "resourceNames": ["cm1"], "verbs": ["watch"]}]}
        ).status_code == 201
        assert admin.post(f"{RBAC}/namespaces/dev-lw/rolebindings", json={
            "metadata": {"name": "bob-watch-cm1"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "watch-cm1"},
            "subjects": [{"kind": "User", "name": "bob"}]}).status_code == 201
        legacy = "/api/v1/watch/namespaces/dev-lw/configmaps"
        watched = wait_status(lambda: bob.get(f"{legacy}/cm1", params={"watch": "false", "timeoutSeconds": "1"}),
                              200)
        lines = [json.loads(line) for line in watched.text.splitlines()]
        assert [(e["type"], e["object"]["metadata"]["name"]) for e in lines] == [("ADDED", "cm1")]
        assert bob.get(f"{legacy}/cm2", params={"timeoutSeconds": "1"}).status_code == 403
        assert bob.get(legacy, params={"fieldSelector": "metadata.name=cm1", "timeoutSeconds": "1"}
                       ).status_code == 403


def as_token(served: Serve, token: str, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """kubectl as the user of ``token`` (the admin kubeconfig's server and CA)."""
    env = dict(os.environ, KUBECONFIG=str(served.kubeconfig), HOME=str(served.state))
    return subprocess.run([KUBECTL or "kubectl", "--token", token, *args], capture_output=True, text=True, env=env,
                          input=stdin, timeout=60)


def until_ok(do: Callable[[], subprocess.CompletedProcess[str]], timeout: float = 5.0) -> str:
    """``do()`` until it succeeds (a binding takes effect once it reaches the cache)."""
    deadline = time.monotonic() + timeout
    while (r := do()).returncode != 0:
        assert time.monotonic() < deadline, r.stderr
        time.sleep(0.05)
    return r.stdout


def _request_pem() -> str:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    csr = (x509.CertificateSigningRequestBuilder()
           .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "erin")]))
           .sign(ec.generate_private_key(ec.SECP256R1()), hashes.SHA256()))
    return base64.b64encode(csr.public_bytes(serialization.Encoding.PEM)).decode()


def test_kubectl_certificate_approve_needs_approve_on_the_signer(rbac_served: Serve) -> None:
    """CertificateApproval over the socket: carol may update CSRs' approval, yet kubectl
    certificate approve is upstream's 403 until she is bound to the bootstrapped approver role."""
    kubectl(rbac_served, "apply", "-f", "-", stdin=json.dumps({
        "apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest", "metadata": {"name": "erin"},
        "spec": {"request": _request_pem(), "signerName": "kubernetes.io/kube-apiserver-client",
                 "usages": ["client auth"]}}))
    kubectl(rbac_served, "create", "clusterrole", "csr-approval", "--verb=get,list,update",
            "--resource=certificatesigningrequests,certificatesigningrequests/approval")
    kubectl(rbac_served, "create", "clusterrolebinding", "carol-csr-approval", "--clusterrole=csr-approval",
            "--user=carol")
    until_ok(lambda: as_token(rbac_served, "carol-token", "get", "csr", "erin"))
    denied = as_token(rbac_served, "carol-token", "certificate", "approve", "erin")
    assert denied.returncode != 0
    assert 'certificatesigningrequests.certificates.k8s.io "erin" is forbidden: user not permitted to approve ' \
        'requests with signerName "kubernetes.io/kube-apiserver-client"' in denied.stderr
    kubectl(rbac_served, "create", "clusterrolebinding", "carol-approves",
            "--clusterrole=system:certificates.k8s.io:kube-apiserver-client-approver", "--user=carol")
    until_ok(lambda: as_token(rbac_served, "carol-token", "certificate", "approve", "erin"))
    assert kubectl(rbac_served, "get", "csr", "erin", "-o", "jsonpath={.status.conditions[0].type}") == "Approved"


def test_kubectl_patch_subresource_resize_is_its_own_grant_and_charged_to_the_quota(rbac_served: Serve) -> None:
    """pods/resize over the socket as a non-admin: the default edit role does not grant it (as
    upstream's); granted, a growth past the namespace's quota is upstream's 403 exceeded quota."""
    kubectl(rbac_served, "create", "namespace", "shop")
    kubectl(rbac_served, "create", "rolebinding", "bob-edits", "--clusterrole=edit", "--user=bob", "-n", "shop")
    kubectl(rbac_served, "apply", "-n", "shop", "-f", "-", stdin=json.dumps({
        "apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "compute"},
        "spec": {"hard": {"requests.cpu": "1"}}}))
    quota = json.loads(kubectl(rbac_served, "get", "resourcequota", "compute", "-n", "shop", "-o", "json"))
    quota["status"] = {"hard": {"requests.cpu": "1"}, "used": {"requests.cpu": "0"}}  # (no quota controller here)
    kubectl(rbac_served, "replace", "--subresource", "status", "-f", "-", stdin=json.dumps(quota))
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"},
           "spec": {"containers": [{"name": "web", "image": "nginx:1.27", "resources": {"requests": {"cpu": "500m"}}}]}}
    until_ok(lambda: as_token(rbac_served, "bob-token", "apply", "-n", "shop", "-f", "-", stdin=json.dumps(pod)))
    grow = ("patch", "pod", "web", "-n", "shop", "--subresource", "resize", "-p",
            '{"spec":{"containers":[{"name":"web","resources":{"requests":{"cpu":"2"}}}]}}')
    denied = as_token(rbac_served, "bob-token", *grow)
    assert denied.returncode != 0 and 'cannot get resource "pods/resize"' in denied.stderr  # kubectl reads first
    kubectl(rbac_served, "create", "role", "resizer", "--verb=get,patch", "--resource=pods/resize", "-n", "shop")
    kubectl(rbac_served, "create", "rolebinding", "bob-resizes", "--role=resizer", "--user=bob", "-n", "shop")
    deadline = time.monotonic() + 5
    while 'resource "pods/resize"' in (over := as_token(rbac_served, "bob-token", *grow)).stderr:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert over.returncode != 0 and 'pods "web" is forbidden: exceeded quota: compute, requested: ' \
        'requests.cpu=1500m, used: requests.cpu=500m, limited: requests.cpu=1' in over.stderr
    as_token(rbac_served, "bob-token", *grow[:-1], '{"spec":{"containers":[{"name":"web","resources":'
             '{"requests":{"cpu":"800m"}}}]}}').check_returncode()
    used = kubectl(rbac_served, "get", "resourcequota", "compute", "-n", "shop", "-o",
                   "jsonpath={.status.used.requests\\.cpu}")
    assert used == "800m"


# `kubectl auth can-i --list` of a user bound to nothing, as kube-apiserver answers it over the bootstrap
# policy: system:basic-user's self reviews, system:discovery's paths and system:public-info-viewer's (the
# health checks and /version twice: both roles grant them), in kubectl's order
PLAIN_USER_RULES = """\
Resources                                       Non-Resource URLs   Resource Names   Verbs
selfsubjectreviews.authentication.k8s.io        []                  []               [create]
selfsubjectaccessreviews.authorization.k8s.io   []                  []               [create]
selfsubjectrulesreviews.authorization.k8s.io    []                  []               [create]
                                                [/api/*]            []               [get]
                                                [/api]              []               [get]
                                                [/apis/*]           []               [get]
                                                [/apis]             []               [get]
                                                [/healthz]          []               [get]
                                                [/healthz]          []               [get]
                                                [/livez]            []               [get]
                                                [/livez]            []               [get]
                                                [/openapi/*]        []               [get]
                                                [/openapi]          []               [get]
                                                [/readyz]           []               [get]
                                                [/readyz]           []               [get]
                                                [/version/]         []               [get]
                                                [/version/]         []               [get]
                                                [/version]          []               [get]
                                                [/version]          []               [get]
"""


def test_a_binding_to_a_missing_role_is_the_reason_of_a_denial_as_upstream_s(rbac_served: Serve) -> None:
    """Over a real socket and with the real kubectl: upstream's RBAC authorizer gives no reason for
    a denial unless a binding of the user's does not resolve; then the 403, `kubectl auth can-i`
    and a rules review's evaluationError name it (the list still complete)."""
    assert as_token(rbac_served, "erin-token", "auth", "can-i", "--list", "-n", "ghostly").stdout == \
        PLAIN_USER_RULES
    denied = as_token(rbac_served, "erin-token", "auth", "can-i", "list", "pods", "-n", "ghostly")
    assert (denied.returncode, denied.stdout) == (1, "no\n")
    with as_user(rbac_served, "admin-token") as admin:
        assert admin.post("/api/v1/namespaces", json={"metadata": {"name": "ghostly"}}).status_code == 201
        assert admin.post(f"{RBAC}/namespaces/ghostly/rolebindings", json={
            "metadata": {"name": "erin-ghost"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "ghost"},
            "subjects": [{"kind": "User", "name": "erin", "apiGroup": "rbac.authorization.k8s.io"}]}
            ).status_code == 201
    why = 'RBAC: role.rbac.authorization.k8s.io "ghost" not found'
    deadline = time.monotonic() + 5
    while (denied := as_token(rbac_served, "erin-token", "auth", "can-i", "list", "pods", "-n", "ghostly")
           ).stdout == "no\n" and time.monotonic() < deadline:
        time.sleep(0.05)
    assert (denied.returncode, denied.stdout) == (1, f"no - {why}\n")
    assert as_token(rbac_served, "erin-token", "auth", "can-i", "list", "pods", "-n", "default").stdout == "no\n"
    got = as_token(rbac_served, "erin-token", "get", "pods", "-n", "ghostly")
    assert got.returncode == 1 and got.stderr.strip() == (
        'Error from server (Forbidden): pods is forbidden: User "erin" cannot list resource "pods" in API group "" '
        f'in the namespace "ghostly": {why}')
    # kubectl warns only of an incomplete list: RBAC's is complete, its errors in evaluationError
    listed = as_token(rbac_served, "erin-token", "auth", "can-i", "--list", "-n", "ghostly")
    assert (listed.stdout, listed.stderr) == (PLAIN_USER_RULES, "")
    with as_user(rbac_served, "erin-token") as erin:
        review = erin.post("/apis/authorization.k8s.io/v1/selfsubjectrulesreviews",
                            json={"spec": {"namespace": "ghostly"}}).json()
        assert review["status"]["incomplete"] is False
        assert review["status"]["evaluationError"] == 'role.rbac.authorization.k8s.io "ghost" not found'
        # an allowed review says which binding allowed it, as upstream's RBAC authorizer
        allowed = erin.post("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", json={"spec": {
            "resourceAttributes": {"verb": "create", "group": "authorization.k8s.io",
                                   "resource": "selfsubjectaccessreviews"}}}).json()
        assert allowed["status"] == {"allowed": True, "reason": 'RBAC: allowed by ClusterRoleBinding '
                                     '"system:basic-user" of ClusterRole "system:basic-user" to Group '
                                     '"system:authenticated"'}


def test_a_rules_review_lists_each_bindings_rules_as_their_role_writes_them(rbac_served: Serve) -> None:
    """Upstream's resolver lists every rule of every binding that applies, verbs in the role's
    order and nothing merged (kubectl compacts and sorts them): a Role with ``watch, get`` bound
    twice is two rules, and `kubectl auth can-i --list` prints it once as ``[watch get]``."""
    with as_user(rbac_served, "admin-token") as admin:
        assert admin.post("/api/v1/namespaces", json={"metadata": {"name": "ordered"}}).status_code == 201
        assert admin.post(f"{RBAC}/namespaces/ordered/roles", json={"metadata": {"name": "watcher"}, "rules": [
            {"apiGroups": [""], "resources": ["secrets"], "verbs": ["watch", "get"]}]}).status_code == 201
        for name in ("first", "second"):
            assert admin.post(f"{RBAC}/namespaces/ordered/rolebindings", json={
                "metadata": {"name": name},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "watcher"},
                "subjects": [{"kind": "User", "name": "dave", "apiGroup": "rbac.authorization.k8s.io"}]}
                ).status_code == 201
    rule = {"verbs": ["watch", "get"], "apiGroups": [""], "resources": ["secrets"]}
    with as_user(rbac_served, "dave-token") as dave:
        deadline = time.monotonic() + 5
        while True:
            status = dave.post("/apis/authorization.k8s.io/v1/selfsubjectrulesreviews",
                               json={"spec": {"namespace": "ordered"}}).json()["status"]
            if status["resourceRules"].count(rule) == 2 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
    assert status["resourceRules"].count(rule) == 2 and "evaluationError" not in status
    # the bindings of the cluster first, as upstream visits them
    assert status["resourceRules"][-2:] == [rule, rule]
    listed = as_token(rbac_served, "dave-token", "auth", "can-i", "--list", "-n", "ordered").stdout
    assert listed.count("secrets") == 1
    [line] = [line for line in listed.splitlines() if line.startswith("secrets ")]
    assert line.split() == ["secrets", "[]", "[]", "[watch", "get]"]
