"""The built-in components act as upstream's identities (controlplane/identities.py), not as
the admin: a real ``controlplane serve`` with its scheduler, controllers and simulated nodes,
``--authorization-mode Node,RBAC`` (kubeadm's) and an audit log, driven over its socket."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from controlplane.identities import Identities, admin_tokens, identity_key, node_user
from controlplane.tokens import read_token_file
from tests.test_cli import Serve, running, start_serve

POLICY = """
apiVersion: audit.k8s.io/v1
kind: Policy
rules:
- level: None
  nonResourceURLs: ["/healthz*", "/readyz*", "/livez*"]
- level: Metadata
  verbs: [create, update, patch, delete]
  omitStages: [RequestReceived]
"""
TOKENS = 'admintoken,admin,uid-admin,"system:masters"\n'
SA_GROUPS = ("system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated")
NODE_GROUPS = ("system:nodes", "system:authenticated")


def _serve(tmp: Path, modes: str, *extra: str) -> Serve:
    (tmp / "policy.yaml").write_text(POLICY)
    (tmp / "tokens.csv").write_text(TOKENS)
    return start_serve(tmp, scheduler=True, extra=(
        "--nodes", "2", "--token-auth-file", str(tmp / "tokens.csv"), "--authorization-mode", modes,
        "--audit-policy-file", str(tmp / "policy.yaml"), "--audit-log-path", str(tmp / "audit.log"), *extra))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    with running(_serve(tmp_path_factory.mktemp("identities"), "Node,RBAC")) as s:
        yield s


def admin(served: Serve) -> httpx.Client:
    return httpx.Client(base_url=served.url, headers={"authorization": "Bearer admintoken"}, verify=False,
                        timeout=10)


def until(check: Callable[[], Any], timeout: float = 40.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.2)


def audited(served: Serve) -> list[dict[str, Any]]:
    path = served.state.parent / "audit.log"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def logged(served: Serve, match: Callable[[dict[str, Any]], bool]) -> list[dict[str, Any]]:
    return until(lambda: [e for e in audited(served) if e["stage"] == "ResponseComplete" and match(e)]) or []


def resource(e: dict[str, Any]) -> str:
    ref = e.get("objectRef") or {}
    return f"{ref.get('resource', '')}/{ref['subresource']}" if ref.get("subresource") else ref.get("resource", "")


def run_deployment(served: Serve, name: str, replicas: int = 2) -> list[dict[str, Any]]:
    """A Deployment created by the admin, until its pods run and its status says so."""
    with admin(served) as c:
        r = c.post("/apis/apps/v1/namespaces/default/deployments", json={
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}})
        assert r.status_code == 201, r.text

        def running_pods() -> list[dict[str, Any]]:
            pods = c.get("/api/v1/namespaces/default/pods", params={"labelSelector": f"app={name}"}).json()["items"]
            up = [p for p in pods if p["status"].get("phase") == "Running"]
            return up if len(up) == replicas else []

        pods: list[dict[str, Any]] = until(running_pods)
        assert pods, c.get("/api/v1/namespaces/default/pods").text
        available = until(lambda: c.get(f"/apis/apps/v1/namespaces/default/deployments/{name}").json()
                          .get("status", {}).get("availableReplicas") == replicas)
        assert available, c.get(f"/apis/apps/v1/namespaces/default/deployments/{name}").text
        return pods


def test_each_component_acts_as_upstreams_identity(cluster: Serve) -> None:
    pods = run_deployment(cluster, "web")
    pod = pods[0]
    name, node = pod["metadata"]["name"], pod["spec"]["nodeName"]

    def user_of(e: dict[str, Any]) -> tuple[str, tuple[str, ...]]:
        return e["user"]["username"], tuple(e["user"]["groups"])

    # the scheduler's binding
    bound = logged(cluster, lambda e: resource(e) == "pods/binding" and e["objectRef"].get("name") == name)
    assert bound and user_of(bound[0]) == ("system:kube-scheduler", ("system:authenticated",))
    # the ReplicaSet controller's pod create, and the Deployment controller's ReplicaSet create
    created = logged(cluster, lambda e: resource(e) == "pods" and e["verb"] == "create"
                     and e["responseStatus"]["code"] == 201 and e["objectRef"].get("namespace") == "default")
    assert created and {user_of(e) for e in created} == {
        ("system:serviceaccount:kube-system:replicaset-controller", SA_GROUPS)}
    sets = logged(cluster, lambda e: resource(e) == "replicasets" and e["verb"] == "create")
    assert sets and user_of(sets[0]) == ("system:serviceaccount:kube-system:deployment-controller", SA_GROUPS)
    # the status of the objects, written as the roles of their controllers allow: update, not patch
    status = logged(cluster, lambda e: resource(e) == "replicasets/status" and e["responseStatus"]["code"] == 200)
    assert status and {(e["verb"], e["user"]["username"]) for e in status} == {
        ("update", "system:serviceaccount:kube-system:replicaset-controller")}
    # the kubelet's status of its pod, its node's registration and its Lease
    written = logged(cluster, lambda e: resource(e) == "pods/status" and e["objectRef"].get("name") == name
                     and e["responseStatus"]["code"] == 200)
    # (and the scheduler's PodScheduled=False, when the pod came before an untainted Ready node)
    writers = {user_of(e) for e in written}
    assert (node_user(node), NODE_GROUPS) in writers
    assert writers <= {(node_user(node), NODE_GROUPS), ("system:kube-scheduler", ("system:authenticated",))}
    lease = logged(cluster, lambda e: resource(e) == "leases" and e["verb"] == "create"
                   and (e["objectRef"].get("namespace") == "kube-node-lease"))
    assert {e["user"]["username"] for e in lease} == {node_user("sim-node-0"), node_user("sim-node-1")}
    registered = logged(cluster, lambda e: resource(e) == "nodes" and e["verb"] == "create")
    assert {e["user"]["username"] for e in registered} == {node_user("sim-node-0"), node_user("sim-node-1")}
    # the Lease renewals in bulk: KWOK's controller's service account (no one kubelet's)
    renewals = logged(cluster, lambda e: resource(e) == "leaserenewals" and e["responseStatus"]["code"] == 201)
    assert renewals and user_of(renewals[0]) == ("system:serviceaccount:kube-system:kwok-controller", SA_GROUPS)
    # the admin wrote only what this test asked (the Deployment); no component's request was refused
    everything = [e for e in audited(cluster) if e["stage"] == "ResponseComplete"]
    assert {resource(e) for e in everything if e["user"]["username"] == "admin"} == {"deployments"}
    refused = [e for e in everything if e.get("responseStatus", {}).get("code") in (401, 403)]
    assert refused == [], refused[:3]


def test_the_controllers_service_accounts_exist(cluster: Serve) -> None:
    with admin(cluster) as c:
        def accounts() -> set[str]:
            items = c.get("/api/v1/namespaces/kube-system/serviceaccounts").json()["items"]
            return {a["metadata"]["name"] for a in items}

        expected = {"replicaset-controller", "deployment-controller", "generic-garbage-collector", "node-controller",
                    "endpointslice-controller", "job-controller", "kwok-controller", "karpenter"}
        assert until(lambda: expected <= accounts()), accounts()


def test_identity_tokens_are_not_taken_over_a_socket(cluster: Serve) -> None:
    """The components run in the server's process: their credentials are refused from outside,
    even genuine ones (made with the admin's token, as the server makes them)."""
    key = identity_key(admin_tokens(read_token_file(cluster.state.parent / "tokens.csv")))
    assert key is not None
    ids = Identities(key)
    for user in ("system:kube-scheduler", node_user("sim-node-0")):
        r = httpx.get(f"{cluster.url}/api/v1/namespaces", headers={"authorization": f"Bearer {ids.token(user)}"},
                      verify=False, timeout=10)
        assert r.status_code == 401 and r.json()["reason"] == "Unauthorized"


def test_a_kubelet_writes_its_own_node_and_pods_only(cluster: Serve) -> None:
    """Node,RBAC: the Node authorizer and NodeRestriction (the kubelet impersonated by the admin,
    as ``kubectl --as system:node:sim-node-0 --as-group system:nodes``)."""
    kubelet = {"impersonate-user": node_user("sim-node-0"), "impersonate-group": "system:nodes"}
    merge = {"content-type": "application/merge-patch+json"}
    with admin(cluster) as c:
        until(lambda: c.get("/api/v1/nodes/sim-node-1").status_code == 200)
        own = c.patch("/api/v1/nodes/sim-node-0/status", headers={**kubelet, **merge},
                      json={"status": {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]}})
        assert own.status_code == 200, own.text
        other = c.patch("/api/v1/nodes/sim-node-1", headers={**kubelet, **merge},
                        json={"metadata": {"labels": {"x": "y"}}})
        assert other.status_code == 403
        assert other.json()["message"] == ('nodes "sim-node-1" is forbidden: node "sim-node-0" is not allowed to '
                                           'modify node "sim-node-1"')
        assert c.patch("/api/v1/nodes/sim-node-1/status", headers={**kubelet, **merge},
                       json={"status": {}}).status_code == 403
        assert c.delete("/api/v1/nodes/sim-node-1", headers=kubelet).status_code == 403
        # created with another node's name: refused by name once the body is read
        made = c.post("/api/v1/nodes", headers=kubelet, json={"apiVersion": "v1", "kind": "Node",
                                                               "metadata": {"name": "sim-node-9"}})
        assert made.status_code == 403 and 'not allowed to modify node "sim-node-9"' in made.json()["message"]
        # a read of all nodes: upstream's AuthorizeNodeWithSelectors allows its own only
        assert c.get("/api/v1/nodes", headers=kubelet).status_code == 403
        assert c.get("/api/v1/nodes/sim-node-0", headers=kubelet).status_code == 200
        # another node's Lease
        lease = c.put("/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/sim-node-1", headers=kubelet,
                      json={"metadata": {"name": "sim-node-1"}, "spec": {}})
        assert lease.status_code == 403
        # a pod bound to another node: its status and its deletion
        pods = run_deployment(cluster, "spread", replicas=4)
        theirs = next((p for p in pods if p["spec"]["nodeName"] != "sim-node-0"), None)
        assert theirs is not None, [p["spec"]["nodeName"] for p in pods]
        path = f"/api/v1/namespaces/default/pods/{theirs['metadata']['name']}"
        r = c.patch(f"{path}/status", headers={**kubelet, **merge}, json={"status": {"message": "x"}})
        assert r.status_code == 403 and r.json()["message"].endswith(
            'node "sim-node-0" can only update pod status for pods with spec.nodeName set to itself')
        assert c.delete(path, headers=kubelet).json()["message"].endswith(
            'node "sim-node-0" can only delete pods with spec.nodeName set to itself')
        assert c.get(path, headers=kubelet).status_code == 403
        ours = [p for p in pods if p["spec"]["nodeName"] == "sim-node-0"]
        for p in ours:  # (the scheduler spreads the four: sim-node-0 has some, most likely)
            assert c.get(f"/api/v1/namespaces/default/pods/{p['metadata']['name']}", headers=kubelet).status_code == 200
        # a scoped list of its pods, not everyone's; nor anything RBAC does not give it
        assert c.get("/api/v1/pods", headers=kubelet, params={"fieldSelector": "spec.nodeName=sim-node-0"}
                     ).status_code == 200
        assert c.get("/api/v1/pods", headers=kubelet).status_code == 403
        assert c.get("/api/v1/namespaces/default/secrets", headers=kubelet).status_code == 403


def test_rbac_without_node_still_runs_the_simulated_nodes(tmp_path: Path) -> None:
    """Under RBAC alone upstream denies kubelets (the system:node binding has no subjects): the
    simulated nodes then write as KWOK's controller, and the cluster still runs its pods."""
    with running(_serve(tmp_path, "RBAC")) as s:
        pods = run_deployment(s, "web")
        name = pods[0]["metadata"]["name"]
        written = logged(s, lambda e: resource(e) == "pods/status" and e["objectRef"].get("name") == name
                         and e["user"]["username"] != "system:kube-scheduler")
        assert written and {e["user"]["username"] for e in written} == {
            "system:serviceaccount:kube-system:kwok-controller"}
        assert not [e for e in audited(s) if e.get("responseStatus", {}).get("code") in (401, 403)]


def test_the_components_process_and_workers_act_as_the_identities_too(tmp_path: Path) -> None:
    """``--components-process --workers 2``: the components' requests reach every server process
    over the socket, each of which makes and checks the same identities (the key is the admin's)."""
    (tmp_path / "tokens.csv").write_text(TOKENS)
    with running(start_serve(tmp_path, scheduler=True, extra=(
            "--nodes", "2", "--token-auth-file", str(tmp_path / "tokens.csv"), "--authorization-mode", "Node,RBAC",
            "--components-process", "--workers", "2"))) as s:
        run_deployment(s, "web")
        with admin(s) as c:
            # the scheduler's events name it, and they were allowed (as system:kube-scheduler under RBAC)
            events = c.get("/api/v1/namespaces/default/events").json()["items"]
            assert any(e.get("reason") == "Scheduled" for e in events)
