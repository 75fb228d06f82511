"""RBAC's privilege-escalation prevention over a real server (``--authorization-mode RBAC``),
with the real kubectl impersonating users (``--as``): a Role or ClusterRole only within the
writer's permissions (or with ``escalate``), a binding only of a role the writer may ``bind`` or
whose permissions it holds, an aggregationRule only for who holds every permission; upstream's
403 messages; the admin unaffected."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.e2e.test_kubectl import KUBECTL, kubectl
from tests.test_cli import Serve, running, start_serve

TOKENS = 'admin-token,admin,1,"system:masters"\nalice-token,alice,2\n'
RBAC = "/apis/rbac.authorization.k8s.io/v1"

# every user may write roles and bindings (anywhere) and clusterroles; what else each holds in dev:
# alice nothing, carol get/list pods, erin the escalate verb on roles, frank that verb on the role "named",
# bob bind of the Role "pod-reader"
SETUP = """
apiVersion: v1
kind: Namespace
metadata: {name: dev}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: role-maker}
rules:
- apiGroups: [rbac.authorization.k8s.io]
  resources: [roles, rolebindings, clusterroles, clusterrolebindings]
  verbs: [create, get, list, update, patch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: role-makers}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: role-maker}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: alice}
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: bob}
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: carol}
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: erin}
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: frank}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: pod-reader, namespace: dev}
rules:
- {apiGroups: [""], resources: [pods], verbs: [get, list]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: pod-writer, namespace: dev}
rules:
- {apiGroups: [""], resources: [pods], verbs: [create, delete]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: carol-reads, namespace: dev}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: pod-reader}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: carol}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: escalator, namespace: dev}
rules:
- {apiGroups: [rbac.authorization.k8s.io], resources: [roles], verbs: [escalate]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: erin-escalates, namespace: dev}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: escalator}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: erin}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: named-escalator, namespace: dev}
rules:
- {apiGroups: [rbac.authorization.k8s.io], resources: [roles], verbs: [escalate], resourceNames: [named]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: frank-escalates-named, namespace: dev}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: named-escalator}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: frank}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: binder, namespace: dev}
rules:
- {apiGroups: [rbac.authorization.k8s.io], resources: [roles], verbs: [bind], resourceNames: [pod-reader]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: bob-binds, namespace: dev}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: binder}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: bob}
"""

GRANT = 'is attempting to grant RBAC permissions not currently held:\n'


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    tmp = tmp_path_factory.mktemp("rbacesc")
    tokens = tmp / "tokens.csv"
    tokens.write_text(TOKENS)
    with running(start_serve(tmp, extra=("--token-auth-file", str(tokens), "--authorization-mode", "RBAC"))) as s:
        kubectl(s, "apply", "-f", "-", stdin=SETUP)
        deadline = time.monotonic() + 10  # the bindings take effect once they reach the cache
        while kubectl_run(s, "auth", "can-i", "bind", "roles/pod-reader", "-n", "dev", "--as", "bob").returncode \
                or kubectl_run(s, "auth", "can-i", "get", "pods", "-n", "dev", "--as", "carol").returncode:
            assert time.monotonic() < deadline, "the setup's bindings never took effect"
            time.sleep(0.1)
        yield s


def kubectl_run(served: Serve, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    assert KUBECTL
    env = dict(os.environ, KUBECONFIG=str(served.kubeconfig), HOME=str(served.state))
    return subprocess.run([KUBECTL, *args], capture_output=True, text=True, env=env, input=stdin, timeout=60)


def refused(served: Serve, *args: str, stdin: str | None = None) -> str:
    """kubectl's error output of a command the server must refuse."""
    r = kubectl_run(served, *args, stdin=stdin)
    assert r.returncode != 0, f"kubectl {' '.join(args)} succeeded: {r.stdout}"
    return r.stderr


def test_a_role_granting_what_the_user_lacks_is_refused_with_upstreams_message(served: Serve) -> None:
    err = refused(served, "create", "role", "reader", "--verb=get", "--resource=pods", "-n", "dev", "--as", "alice")
    assert err.strip() == (
        'Error from server (Forbidden): roles.rbac.authorization.k8s.io "reader" is forbidden: user "alice" '
        f'(groups=["system:authenticated"]) {GRANT}'
        '{APIGroups:[""], Resources:["pods"], Verbs:["get"]}'), err
    # carol holds get and list on pods in dev: she may grant them there, not elsewhere, nor more
    kubectl(served, "create", "role", "reader", "--verb=get,list", "--resource=pods", "-n", "dev", "--as", "carol")
    err = refused(served, "create", "role", "reader", "--verb=get", "--resource=pods", "-n", "default",
                  "--as", "carol")
    assert 'user "carol"' in err and '{APIGroups:[""], Resources:["pods"], Verbs:["get"]}' in err
    err = refused(served, "create", "role", "more", "--verb=get,watch,delete", "--resource=pods,secrets",
                  "-n", "dev", "--as", "carol")
    assert err.rstrip().endswith(f'{GRANT}{{APIGroups:[""], Resources:["pods"], Verbs:["watch" "delete"]}}\n'
                                 '{APIGroups:[""], Resources:["secrets"], Verbs:["get" "watch" "delete"]}'), err
    assert "NotFound" in refused(served, "get", "role", "more", "-n", "dev")


def test_the_answer_is_a_forbidden_status(served: Serve) -> None:
    with httpx.Client(base_url=served.url, headers={"authorization": "Bearer alice-token"}, timeout=10,
                      verify=False) as alice:
        r = alice.post(f"{RBAC}/namespaces/dev/roles", json={
            "metadata": {"name": "sneaky"}, "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]})
    assert r.status_code == 403, r.text
    body = r.json()
    assert (body["kind"], body["status"], body["reason"], body["code"]) == ("Status", "Failure", "Forbidden", 403)
    assert body["details"] == {"name": "sneaky", "group": "rbac.authorization.k8s.io", "kind": "roles"}
    assert body["message"] == ('roles.rbac.authorization.k8s.io "sneaky" is forbidden: user "alice" '
                               f'(groups=["system:authenticated"]) {GRANT}'
                               '{APIGroups:["*"], Resources:["*"], Verbs:["*"]}')


def test_updates_patches_and_applies_are_checked_too(served: Serve) -> None:
    kubectl(served, "create", "role", "carols", "--verb=get", "--resource=pods", "-n", "dev", "--as", "carol")
    err = refused(served, "label", "role", "carols", "-n", "dev", "a=b", "--as", "alice")
    assert 'roles.rbac.authorization.k8s.io "carols" is forbidden: user "alice"' in err, err
    applied = ('{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "applied", '
               '"namespace": "dev"}, "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]}')
    err = refused(served, "apply", "--server-side", "-f", "-", "--as", "alice", stdin=applied)
    assert 'roles.rbac.authorization.k8s.io "applied" is forbidden' in err, err
    kubectl(served, "apply", "--server-side", "-f", "-", "--as", "carol", stdin=applied)
    # what the garbage collector changes (finalizers, owner references) is not checked
    kubectl(served, "patch", "role", "carols", "-n", "dev", "--type=merge", "-p",
            '{"metadata": {"finalizers": ["example.com/keep"]}}', "--as", "alice")
    kubectl(served, "patch", "role", "carols", "-n", "dev", "--type=merge", "-p",
            '{"metadata": {"finalizers": null}}', "--as", "alice")


def test_the_escalate_verb_allows_any_rules(served: Serve) -> None:
    kubectl(served, "create", "role", "wide", "--verb=*", "--resource=secrets,pods", "-n", "dev", "--as", "erin")
    kubectl(served, "label", "role", "wide", "-n", "dev", "a=b", "--as", "erin")
    err = refused(served, "create", "role", "wide", "--verb=*", "--resource=secrets", "-n", "default", "--as", "erin")
    assert 'user "erin"' in err  # escalate is granted in dev only


def test_escalate_by_name_needs_the_name_in_the_url(served: Serve) -> None:
    """As upstream's ``RoleEscalationAuthorized`` asks by the request's name: a POST names none;
    a PUT that creates, an update and an apply do."""
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "named"},
            "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]}
    with httpx.Client(base_url=served.url, headers={"authorization": "Bearer admin-token",
                                                    "impersonate-user": "frank"}, timeout=10, verify=False) as frank:
        r = frank.post(f"{RBAC}/namespaces/dev/roles", json=role)
        assert r.status_code == 403 and GRANT in r.json()["message"], r.text
        r = frank.put(f"{RBAC}/namespaces/dev/roles/named", json=role)
        assert r.status_code == 201, r.text
        r = frank.put(f"{RBAC}/namespaces/dev/roles/named", json={**r.json(), "rules": [
            {"apiGroups": [""], "resources": ["secrets"], "verbs": ["*"]}]})
        assert r.status_code == 200, r.text
        r = frank.put(f"{RBAC}/namespaces/dev/roles/other", json={**role, "metadata": {"name": "other"}})
        assert r.status_code == 403, r.text
        assert r.json()["message"].startswith('roles.rbac.authorization.k8s.io "other" is forbidden: user "frank"')


def test_a_binding_needs_bind_on_the_role_or_its_permissions(served: Serve) -> None:
    err = refused(served, "create", "rolebinding", "alice-reads", "--role=pod-reader", "--user=zed", "-n", "dev",
                  "--as", "alice")
    assert ('rolebindings.rbac.authorization.k8s.io "alice-reads" is forbidden: user "alice" '
            f'(groups=["system:authenticated"]) {GRANT}'
            '{APIGroups:[""], Resources:["pods"], Verbs:["get" "list"]}') in err, err
    # bob may bind pod-reader (by name), not pod-writer
    kubectl(served, "create", "rolebinding", "bob-reads", "--role=pod-reader", "--user=zed", "-n", "dev", "--as", "bob")
    err = refused(served, "create", "rolebinding", "bob-writes", "--role=pod-writer", "--user=zed", "-n", "dev",
                  "--as", "bob")
    assert '{APIGroups:[""], Resources:["pods"], Verbs:["create" "delete"]}' in err, err
    # carol holds pod-reader's permissions in dev: she may bind it there (a ClusterRole too), not cluster-wide
    kubectl(served, "create", "rolebinding", "carol-reads-2", "--role=pod-reader", "--user=zed", "-n", "dev",
            "--as", "carol")
    kubectl(served, "create", "clusterrole", "cluster-pod-reader", "--verb=get", "--resource=pods")
    kubectl(served, "create", "rolebinding", "carol-reads-3", "--clusterrole=cluster-pod-reader", "--user=zed",
            "-n", "dev", "--as", "carol")
    err = refused(served, "create", "clusterrolebinding", "carol-everywhere", "--clusterrole=cluster-pod-reader",
                  "--user=zed", "--as", "carol")
    assert 'clusterrolebindings.rbac.authorization.k8s.io "carol-everywhere" is forbidden: user "carol"' in err, err
    # a role that does not exist: upstream's lookup's 404
    err = refused(served, "create", "rolebinding", "nothing", "--role=missing", "--user=zed", "-n", "dev",
                  "--as", "alice")
    assert 'roles.rbac.authorization.k8s.io "missing" not found' in err, err


def test_a_namespace_admin_may_delegate_the_default_roles_it_holds(served: Serve) -> None:
    """The usual delegation: ``admin`` bound in a namespace may bind ``admin``, ``edit`` and ``view``
    there (their aggregated rules are within its own), not ``cluster-admin``."""
    kubectl(served, "create", "rolebinding", "nina-admin", "--clusterrole=admin", "--user=nina", "-n", "dev")
    deadline = time.monotonic() + 10
    while kubectl_run(served, "auth", "can-i", "create", "rolebindings", "-n", "dev", "--as", "nina").returncode:
        assert time.monotonic() < deadline, "nina's binding never took effect"
        time.sleep(0.1)
    for role in ("view", "edit", "admin"):
        kubectl(served, "create", "rolebinding", f"zed-{role}", f"--clusterrole={role}", "--user=zed", "-n", "dev",
                "--as", "nina")
    err = refused(served, "create", "rolebinding", "zed-all", "--clusterrole=cluster-admin", "--user=zed",
                  "-n", "dev", "--as", "nina")
    assert err.rstrip().endswith(f'{GRANT}{{APIGroups:["*"], Resources:["*"], Verbs:["*"]}}\n'
                                 '{NonResourceURLs:["*"], Verbs:["*"]}'), err
    kubectl(served, "create", "role", "nina-pods", "--verb=get,list,watch,create,update,patch,delete",
            "--resource=pods,deployments.apps", "-n", "dev", "--as", "nina")
    err = refused(served, "create", "role", "nina-star", "--verb=*", "--resource=pods", "-n", "dev", "--as", "nina")
    assert err.rstrip().endswith('{APIGroups:[""], Resources:["pods"], Verbs:["*"]}'), err  # verbs listed are no *


def test_an_aggregation_rule_needs_every_permission(served: Serve) -> None:
    err = refused(served, "create", "clusterrole", "gathered", "--aggregation-rule=example.com/agg=true",
                  "--as", "alice")
    assert ('clusterroles.rbac.authorization.k8s.io "gathered" is forbidden: must have cluster-admin privileges '
            'to use the aggregationRule') in err, err
    kubectl(served, "create", "clusterrole", "gathered", "--aggregation-rule=example.com/agg=true")
    # a ClusterRole that aggregates cannot be changed by them either, not even to stop aggregating
    err = refused(served, "patch", "clusterrole", "gathered", "--type=json", "-p",
                  '[{"op": "remove", "path": "/aggregationRule"}]', "--as", "alice")
    assert "must have cluster-admin privileges to use the aggregationRule" in err, err
    err = refused(served, "label", "clusterrole", "gathered", "a=b", "--as", "alice")
    assert "must have cluster-admin privileges to use the aggregationRule" in err, err
    # the aggregation controller is no master: its service account may escalate clusterroles (upstream's role)
    kubectl(served, "create", "clusterrole", "piece", "--verb=get", "--resource=configmaps")
    kubectl(served, "label", "clusterrole", "piece", "example.com/agg=true")
    deadline = time.monotonic() + 10
    while "configmaps" not in kubectl(served, "get", "clusterrole", "gathered", "-o", "jsonpath={.rules}"):
        assert time.monotonic() < deadline, "the aggregation controller did not write the aggregated rules"
        time.sleep(0.1)


def test_the_admin_is_unaffected(served: Serve) -> None:
    kubectl(served, "create", "clusterrole", "everything", "--verb=*", "--resource=*.*")
    kubectl(served, "create", "clusterrolebinding", "everything", "--clusterrole=everything", "--user=zed")
    kubectl(served, "create", "rolebinding", "admin-writes", "--role=pod-writer", "--user=zed", "-n", "dev")
