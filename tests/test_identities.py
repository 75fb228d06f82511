"""The built-in components' identities (controlplane/identities.py), the Node authorizer and
the ``--authorization-mode`` list (api/nodeauthz.py), the client's views of them."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from controlplane.api.app import create_app
from controlplane.api.errors import ApiError as ServerError
from controlplane.api.nodeauthz import Authorizers, NodeAuthorizer
from controlplane.api.rbac import Request, User
from controlplane.client import ApiError, Client
from controlplane.client.client import _written
from controlplane.config import Config
from controlplane.identities import (
    API_SERVER,
    CONTROLLER_MANAGER,
    SCHEDULER,
    TOKEN_PREFIX,
    Identities,
    admin_tokens,
    identity_key,
    node_user,
    service_account_user,
)
from controlplane.tokens import TokenEntry

KEY = identity_key(["admintoken"])
assert KEY is not None
IDS = Identities(KEY)
SA_GROUPS = ("system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated")


def test_each_identity_is_upstreams_user_and_groups() -> None:
    expected = {
        SCHEDULER: ("system:kube-scheduler", ("system:authenticated",)),
        CONTROLLER_MANAGER: ("system:kube-controller-manager", ("system:authenticated",)),
        API_SERVER: ("system:apiserver", ("system:masters", "system:authenticated")),
        service_account_user("replicaset-controller"): (
            "system:serviceaccount:kube-system:replicaset-controller", SA_GROUPS),
        node_user("node-7"): ("system:node:node-7", ("system:nodes", "system:authenticated")),
    }
    for user, answer in expected.items():
        token = IDS.token(user)
        assert token.startswith(TOKEN_PREFIX) and IDS.user_of(token) == answer
    # the fixed ones are listed for the authenticator's dict; the kubelets' are not (one per node)
    static = IDS.static_tokens()
    assert IDS.token(SCHEDULER) in static and IDS.token(node_user("node-7")) not in static
    assert len(static) == len({user for user, _ in static.values()})


def test_a_forged_or_foreign_token_authenticates_nobody() -> None:
    token = IDS.token(node_user("a"))
    forged = token.replace("system:node:a/", "system:node:b/")  # another node, the same MAC
    assert IDS.user_of(forged) is None
    other = Identities(identity_key(["another-admin"]) or b"")
    assert other.user_of(token) is None  # another server's key
    assert IDS.user_of(token[:-1] + ("0" if token[-1] != "0" else "1")) is None
    assert IDS.user_of("admintoken") is None
    # only the identities of the built-in components are made or taken
    with pytest.raises(ValueError, match="not an identity of the built-in components"):
        IDS.token("admin")
    with pytest.raises(ValueError, match="not an identity of the built-in components"):
        IDS.token(service_account_user("default"))
    default = service_account_user("default")
    unknown = f"{TOKEN_PREFIX}{default}/{IDS._mac(default)}"
    assert IDS.user_of(unknown) is None
    assert IDS.user_of(f"{TOKEN_PREFIX}system:node:/{IDS._mac('system:node:')}") is None


def test_the_key_is_the_admins_so_every_process_derives_it() -> None:
    entries = [TokenEntry("t-alice", "alice", "1"), TokenEntry("t-admin", "admin", "2", ("system:masters",))]
    assert admin_tokens(entries) == ["t-admin"]
    assert identity_key(admin_tokens(entries)) == identity_key(["t-admin"]) != identity_key(["t-alice"])
    assert admin_tokens(entries[:1]) == ["t-alice"]  # no admin: the first user, as the components presented
    assert identity_key([]) is None


async def _on_node(namespace: str, name: str) -> str | None:
    return {"mine": "n1", "theirs": "n2"}.get(name)


@pytest.mark.parametrize(("request_", "allowed"), [
    (Request("patch", "", "nodes", "status", name="n2"), True),  # NodeRestriction's to refuse
    (Request("get", "", "nodes", name="n1"), True),
    (Request("get", "", "nodes", name="n2"), False),
    (Request("list", "", "nodes"), False),
    (Request("update", "coordination.k8s.io", "leases", namespace="kube-node-lease", name="n1"), True),
    (Request("update", "coordination.k8s.io", "leases", namespace="kube-node-lease", name="n2"), False),
    (Request("update", "coordination.k8s.io", "leases", namespace="kube-system", name="n1"), False),
    (Request("list", "coordination.k8s.io", "leases", namespace="kube-node-lease"), False),
    (Request("create", "storage.k8s.io", "csinodes"), True),
    (Request("delete", "storage.k8s.io", "csinodes", name="n2"), False),
    (Request("patch", "", "pods", "status", "default", "theirs"), True),  # NodeRestriction's to refuse
    (Request("list", "", "pods", field_selector="spec.nodeName=n1"), True),
    (Request("watch", "", "pods", field_selector="spec.nodeName=n2"), False),
    (Request("list", "", "pods"), False),
    (Request("update", "", "pods", "", "default", "mine"), False),  # a kubelet writes a pod's status only
    (Request("get", "", "secrets", namespace="default", name="s"), False),  # the graph's (none here)
    (Request("create", "", "events", namespace="default"), True),  # the system:node role's rules
    (Request("list", "", "services"), True),
    (Request("create", "certificates.k8s.io", "certificatesigningrequests"), True),
    (Request("delete", "", "namespaces", name="default"), False),
    (Request("list", "resource.k8s.io", "resourceslices", field_selector="nodeName=n1"), True),
    (Request("list", "resource.k8s.io", "resourceslices"), False),
])
def test_the_node_authorizer(request_: Request, allowed: bool) -> None:
    assert NodeAuthorizer(_on_node).allows("n1", request_) is allowed


def test_node_restriction_refuses_what_is_another_nodes() -> None:
    node = NodeAuthorizer(_on_node)
    kubelet = User(node_user("n1"), ("system:nodes", "system:authenticated"))

    def refusal(r: Request) -> str | None:
        try:
            asyncio.run(node.restrict(kubelet, "n1", r))
        except ServerError as e:
            return f"{e.code} {e.reason}: {e.message}"
        return None

    forbidden = "403 Forbidden: "
    assert refusal(Request("patch", "", "nodes", "status", name="n2")) == \
        forbidden + 'nodes "n2" is forbidden: node "n1" is not allowed to modify node "n2"'
    assert refusal(Request("patch", "", "nodes", "status", name="n1")) is None
    assert refusal(Request("patch", "", "pods", "status", "default", "theirs")) == forbidden + \
        'pods "theirs" is forbidden: node "n1" can only update pod status for pods with spec.nodeName set to itself'
    assert refusal(Request("patch", "", "pods", "status", "default", "mine")) is None
    assert refusal(Request("delete", "", "pods", "", "default", "theirs")) == \
        forbidden + 'pods "theirs" is forbidden: node "n1" can only delete pods with spec.nodeName set to itself'
    assert refusal(Request("create", "", "pods", "eviction", "default", "theirs")) == \
        forbidden + 'pods "theirs" is forbidden: node n1 can only evict pods with spec.nodeName set to itself'
    assert refusal(Request("get", "", "pods", "", "default", "theirs")) is None  # the authorizer's (its graph)
    assert refusal(Request("patch", "", "pods", "status", "default", "gone")) is None  # 404 later
    with pytest.raises(ServerError, match='not allowed to modify node "n2"'):
        node.admit("n1", "nodes", None, {"metadata": {"name": "n2"}}, None)
    with pytest.raises(ServerError, match="node lease with the same name"):
        node.admit("n1", "leases", None, {"metadata": {"name": "n2"}}, None)
    node.admit("n1", "csinodes", None, {"metadata": {"name": "n1"}}, None)


def test_the_modes_are_asked_in_order() -> None:
    kubelet = User(node_user("n1"), ("system:nodes", "system:authenticated"))
    alice = User("alice", ("system:authenticated",))
    admin = User("admin", ("system:masters",))
    lease = Request("update", "coordination.k8s.io", "leases", namespace="kube-node-lease", name="n1")
    node = NodeAuthorizer(_on_node)

    async def decide(modes: tuple[str, ...], user: User) -> bool:
        return await Authorizers(modes, None, node).allowed(user, lease)

    assert asyncio.run(decide(("Node",), kubelet)) and not asyncio.run(decide(("Node",), alice))
    assert asyncio.run(decide(("Node",), admin))  # system:masters, before any mode
    assert not asyncio.run(decide(("RBAC",), kubelet))  # (no RBAC objects here: nothing granted)
    assert asyncio.run(decide(("Node", "AlwaysAllow"), alice))


@pytest.mark.parametrize(("modes", "error"), [
    ("Node,RBAC", None), ("RBAC", None), ("AlwaysAllow", None), ("RBAC,Node", None),
    ("Webhook", 'authorization-mode "Webhook" is not a valid mode'),
    ("RBAC,RBAC", r'authorization-mode \["RBAC" "RBAC"\] has mode specified more than once'),
])
def test_authorization_modes_are_checked_as_kube_apiservers(tmp_path: Path, modes: str, error: str | None) -> None:
    if error is None:
        assert Config(data_dir=tmp_path, authorization_mode=modes).authorization_modes() == tuple(modes.split(","))
    else:
        with pytest.raises(ValueError, match=error):
            Config(data_dir=tmp_path, authorization_mode=modes)
    assert Config(data_dir=tmp_path, authorization_mode="RBAC").kubelet_identities() is False
    assert Config(data_dir=tmp_path, authorization_mode="Node,RBAC").kubelet_identities() is True


def test_written_names_what_a_path_writes() -> None:
    assert _written("/apis/apps/v1/namespaces/ns/replicasets/web/status") == "replicasets/status"
    assert _written("/apis/apps/v1/namespaces/ns/deployments/web") == "deployments"
    assert _written("/api/v1/nodes/n1/status") == "nodes/status"
    assert _written("/api/v1/namespaces/ns") == "namespaces"


def test_views_present_their_identity_and_the_informers_the_clients(tmp_path: Path) -> None:
    """In process, over the app: who each view is (SelfSubjectReview), the informers' lister,
    and a merge patch made as an update where the view is told to."""
    (tmp_path / "tokens.csv").write_text('admintoken,admin,1,"system:masters"\n')
    app = create_app(Config(data_dir=tmp_path / "data", tls=False, log_level="warning", scheduler=False,
                            token_auth_file=tmp_path / "tokens.csv"))
    review = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}

    async def main() -> None:
        async with app.router.lifespan_context(app), \
                Client.in_process(app.state.front, token=IDS.token(CONTROLLER_MANAGER)) as c:
            c.with_identities(IDS.token)

            async def who(view: Client) -> dict[str, Any]:
                answer = await view.create("/apis/authentication.k8s.io/v1/selfsubjectreviews", review)
                info: dict[str, Any] = answer["status"]["userInfo"]
                return info

            assert (await who(c))["username"] == "system:kube-controller-manager"
            kubelet = c.as_component("kubelet", node_user("n1"))
            assert await who(kubelet) == {"username": "system:node:n1",
                                          "groups": ["system:nodes", "system:authenticated"]}
            assert (await who(kubelet.for_informers()))["username"] == "system:kube-controller-manager"
            assert (await who(c.as_user("admintoken")))["username"] == "admin"
            # a view of a client without the key presents the client's credentials
            assert (await who(Client.in_process(app.state.front, token="admintoken")
                              .as_identity(SCHEDULER)))["username"] == "admin"
            # a forged token is refused
            with pytest.raises(ApiError) as refused:
                await who(c.as_user(IDS.token(SCHEDULER)[:-2] + "00"))
            assert refused.value.code == 401
            # patched by update: read by name, the patch applied here, PUT at its resourceVersion
            await c.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                  "metadata": {"name": "t"}})
            await c.as_user("admintoken").create("/api/v1/namespaces/t/resourcequotas", {
                "apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q"},
                "spec": {"hard": {"pods": "3"}}})
            quota = c.as_identity(service_account_user("resourcequota-controller")) \
                .updating(frozenset({"resourcequotas/status"}))
            written = await quota.patch("/api/v1/namespaces/t/resourcequotas/q/status",
                                        {"status": {"hard": {"pods": "3"}, "used": {"pods": "0"}}})
            assert written["status"] == {"hard": {"pods": "3"}, "used": {"pods": "0"}}
            assert written["metadata"]["managedFields"][-1]["operation"] == "Update"

    asyncio.run(main())
