"""Service account tokens (api/tokenrequest.py): issued by ``serviceaccounts/<name>/token``,
authenticating as the service account until they expire, with the real kubectl over a socket."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from controlplane.api.errors import ApiError
from controlplane.api.tokenrequest import ISSUER, TokenIssuer, token_request
from tests.e2e.test_kubectl import KUBECTL, kubectl
from tests.test_cli import Serve, running, start_serve

ACCOUNT = {"metadata": {"name": "bot", "namespace": "ci", "uid": "u-1"}}


def test_a_token_names_its_account_until_it_expires(tmp_path: Path) -> None:
    issuer = TokenIssuer.in_directory(tmp_path)
    answer = token_request(issuer, ACCOUNT, {"spec": {"expirationSeconds": 600, "audiences": ["vault"]}})
    token = answer["status"]["token"]
    user = issuer.authenticate(token)
    assert user is not None and user.name == "system:serviceaccount:ci:bot"
    assert set(user.groups) == {"system:serviceaccounts", "system:serviceaccounts:ci", "system:authenticated"}
    assert answer["spec"]["audiences"] == ["vault"] and answer["status"]["expirationTimestamp"].endswith("Z")
    assert TokenIssuer.in_directory(tmp_path).authenticate(token) == user  # the key is kept: every process
    assert TokenIssuer.in_directory(tmp_path / "other").authenticate(token) is None  # another key
    head, payload, signature = token.split(".")
    assert issuer.authenticate(f"{head}.{payload}.{signature[:-2]}xx") is None
    with pytest.raises(ApiError) as e:
        token_request(issuer, ACCOUNT, {"spec": {"audiences": "vault"}})
    assert e.value.code == 400
    expired = issuer.issue({"iss": ISSUER, "exp": int(time.time()) - 1,
                            "kubernetes.io": {"namespace": "ci", "serviceaccount": {"name": "bot"}}})
    assert issuer.authenticate(expired) is None


@pytest.fixture(scope="module")
def rbac(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    with running(start_serve(tmp_path_factory.mktemp("tokens"), extra=("--authorization-mode", "RBAC"))) as s:
        yield s


def as_token(served: Serve, token: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, KUBECONFIG=str(served.kubeconfig), HOME=str(served.state))
    return subprocess.run([KUBECTL or "kubectl", "--token", token, *args], capture_output=True, text=True,
                          env=env, timeout=60)


def test_kubectl_create_token_and_use_it(rbac: Serve) -> None:
    kubectl(rbac, "create", "serviceaccount", "bot")
    token = kubectl(rbac, "create", "token", "bot", "--duration=15m").strip()
    who = json.loads(as_token(rbac, token, "auth", "whoami", "-o", "json").stdout)
    assert who["status"]["userInfo"]["username"] == "system:serviceaccount:default:bot"
    denied = as_token(rbac, token, "get", "pods")
    assert denied.returncode != 0 and 'User "system:serviceaccount:default:bot" cannot list resource "pods"' \
        in denied.stderr
    kubectl(rbac, "create", "role", "pod-reader", "--verb=get,list", "--resource=pods")
    kubectl(rbac, "create", "rolebinding", "bot-reads", "--role=pod-reader", "--serviceaccount=default:bot")
    deadline = time.monotonic() + 10
    while (allowed := as_token(rbac, token, "get", "pods")).returncode != 0:
        assert time.monotonic() < deadline, allowed.stderr
        time.sleep(0.1)
    short = subprocess.run([KUBECTL or "kubectl", "create", "token", "bot", "--duration=1m"], capture_output=True,
                           text=True, timeout=60,
                           env=dict(os.environ, KUBECONFIG=str(rbac.kubeconfig), HOME=str(rbac.state)))
    assert short.returncode != 0 and "may not specify a duration less than 10 minutes" in short.stderr
    assert as_token(rbac, token + "x", "get", "pods").returncode != 0


def test_the_default_roles_are_aggregated_and_bindable(rbac: Serve) -> None:
    def rules(role: str) -> list[dict[str, object]]:
        got: list[dict[str, object]] = json.loads(kubectl(rbac, "get", "clusterrole", role, "-o", "json"))["rules"]
        return got or []

    deadline = time.monotonic() + 10
    while not (rules("view") and rules("edit") and rules("admin")):  # the aggregation controller fills them
        assert time.monotonic() < deadline
        time.sleep(0.1)
    view, edit, admin = rules("view"), rules("edit"), rules("admin")
    assert all(r in edit for r in view) and all(r in admin for r in edit)
    assert not any("secrets" in r["resources"] for r in view)  # type: ignore[operator]
    assert any("roles" in r["resources"] for r in admin) and not any("roles" in r["resources"] for r in edit)  # type: ignore[operator]
    # a custom role labelled to aggregate extends view (and through it edit and admin)
    kubectl(rbac, "apply", "-f", "-", stdin=json.dumps({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "widgets-view", "labels": {"rbac.authorization.k8s.io/aggregate-to-view": "true"}},
        "rules": [{"apiGroups": ["example.com"], "resources": ["widgets"], "verbs": ["get"]}]}))
    deadline = time.monotonic() + 10
    while not any("widgets" in r["resources"] for r in rules("admin")):  # type: ignore[operator]
        assert time.monotonic() < deadline
        time.sleep(0.1)
    kubectl(rbac, "create", "serviceaccount", "viewer")
    kubectl(rbac, "create", "rolebinding", "viewer-view", "--clusterrole=view", "--serviceaccount=default:viewer")
    token = kubectl(rbac, "create", "token", "viewer").strip()
    deadline = time.monotonic() + 10
    while as_token(rbac, token, "get", "configmaps").returncode != 0:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert as_token(rbac, token, "get", "secrets").returncode != 0


def test_kubectl_as_impersonates_when_the_requester_may(rbac: Serve) -> None:
    who = json.loads(kubectl(rbac, "auth", "whoami", "--as=bob", "--as-group=devs", "-o", "json"))
    assert who["status"]["userInfo"] == {"username": "bob", "groups": ["devs", "system:authenticated"]}
    assert kubectl(rbac, "auth", "can-i", "list", "pods", "--as=nobody", "--as-group=system:masters").strip() == "yes"
    env = dict(os.environ, KUBECONFIG=str(rbac.kubeconfig), HOME=str(rbac.state))
    denied = subprocess.run([KUBECTL or "kubectl", "get", "pods", "--as=nobody"], capture_output=True, text=True,
                            env=env, timeout=60)
    assert denied.returncode != 0 and 'User "nobody" cannot list resource "pods"' in denied.stderr
    kubectl(rbac, "create", "serviceaccount", "imp")
    token = kubectl(rbac, "create", "token", "imp").strip()
    refused = as_token(rbac, token, "get", "pods", "--as=alice")
    assert refused.returncode != 0 and 'users "alice" is forbidden: User "system:serviceaccount:default:imp" ' \
        'cannot impersonate resource "users" in API group "" at the cluster scope' in refused.stderr


def test_auth_can_i_list_shows_the_rules_that_apply(rbac: Serve) -> None:
    kubectl(rbac, "create", "namespace", "lister")
    kubectl(rbac, "-n", "lister", "create", "role", "cm-reader", "--verb=get,list", "--resource=configmaps")
    kubectl(rbac, "-n", "lister", "create", "rolebinding", "carol-reads", "--role=cm-reader", "--user=carol")
    deadline = time.monotonic() + 10
    while "configmaps" not in (out := kubectl(rbac, "-n", "lister", "auth", "can-i", "--list", "--as=carol")):
        assert time.monotonic() < deadline, out
        time.sleep(0.1)
    rows = {line.split()[0]: line for line in out.splitlines()[1:] if line.strip()}
    assert "[get list]" in rows["configmaps"]
    assert "selfsubjectaccessreviews.authorization.k8s.io" in rows
    assert "secrets" not in rows  # nothing else in this namespace
    elsewhere = kubectl(rbac, "-n", "default", "auth", "can-i", "--list", "--as=carol")
    assert "configmaps" not in elsewhere


def test_a_deleted_account_takes_its_tokens_along(rbac: Serve) -> None:
    kubectl(rbac, "create", "serviceaccount", "temp")
    token = kubectl(rbac, "create", "token", "temp").strip()
    assert as_token(rbac, token, "auth", "whoami").returncode == 0
    kubectl(rbac, "delete", "serviceaccount", "temp")
    gone = as_token(rbac, token, "auth", "whoami")
    assert gone.returncode != 0 and "Unauthorized" in gone.stderr
    kubectl(rbac, "create", "serviceaccount", "temp")  # another account of that name: another uid
    assert as_token(rbac, token, "auth", "whoami").returncode != 0
