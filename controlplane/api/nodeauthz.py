"""``--authorization-mode Node,RBAC`` (kubeadm's): the Node authorizer, NodeRestriction, and
the modes in order.

kube-apiserver asks its authorizers in the order ``--authorization-mode`` lists them; the
first to allow decides, and a request none allows is denied (upstream's union authorizer:
these authorizers never deny outright, they allow or have no opinion). Members of
``system:masters`` are allowed before any (upstream's privileged-group authorizer).
``Authorizers`` is that chain; ``AlwaysAllow`` in it allows whatever reaches it.

The Node authorizer (upstream's ``plugin/pkg/auth/authorizer/node/node_authorizer.go``) has
an opinion on kubelets only: users named ``system:node:<node>`` in the group ``system:nodes``
(identities.py). As upstream's, with ``AuthorizeNodeWithSelectors`` (on since 1.32):

- its Node: get (and list/watch by ``metadata.name``) of its own only; create, update,
  patch and ``nodes/status`` allowed, NodeRestriction limiting them to its own;
- its pods: get of a pod bound to it, list/watch with ``fieldSelector=spec.nodeName=<node>``
  (or by name, of one bound to it), create and delete (mirror pods), ``pods/status`` update
  and patch and ``pods/eviction``: NodeRestriction limits them to pods bound to it;
- its Lease in ``kube-node-lease`` and its CSINode: get, create, update, patch, delete, by
  their name; ResourceSlices: create, and list/watch with ``fieldSelector=nodeName=<node>``;
- anything else: what the ``system:node`` ClusterRole's rules allow (events, services,
  CSRs, ...), as upstream evaluates ``NodeRules()``.

Upstream authorizes a kubelet's reads of Secrets, ConfigMaps, PersistentVolumeClaims and
PersistentVolumes, ResourceClaims, VolumeAttachments, ResourceSlices by name and the
``serviceaccounts/token`` it asks for its pods by a graph of what the pods bound to the node
reference (``graph.go``, fed by informers). That graph is not built here: those requests get
no opinion, so a kubelet is allowed them only where RBAC grants them (the simulated kubelets
make none).

NodeRestriction (upstream's ``plugin/pkg/admission/noderestriction``) is on with the Node
mode, as kubeadm enables both: a kubelet may write only its own Node (``node "a" is not
allowed to modify node "b"``), its own Lease and CSINode, the status of and evictions and
deletes of pods bound to it, each refused with upstream's 403 message. A write naming its
object is checked before the body is read (the pod's node from the watch cache's
``spec.nodeName``); a create, by the object's name, in admission (``restrict_create``). Not
checked: the labels a kubelet may set on its Node, its taints, its mirror pods' owner and
references, its ResourceSlices' node.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from ..identities import NODES_GROUP, node_of
from .errors import ApiError
from .rbac import MASTERS, Authorizer, Request, User, _rules, forbidden
from .rbacpolicy import CLUSTER_ROLES

__all__ = ["Authorizers", "NodeAuthorizer", "kubelet"]

NODE_LEASE_NAMESPACE = "kube-node-lease"

# the objects upstream authorizes through its graph (not built here: no opinion)
_GRAPH = frozenset({("", "secrets"), ("", "configmaps"), ("", "persistentvolumeclaims"), ("", "persistentvolumes"),
                    ("resource.k8s.io", "resourceclaims"), ("storage.k8s.io", "volumeattachments"),
                    ("", "serviceaccounts")})
_LEASE_VERBS = frozenset({"get", "create", "update", "patch", "delete"})

PodNode = Callable[[str, str], Awaitable[str | None]]  # (namespace, name) -> the pod's spec.nodeName, None if none


def kubelet(user: User) -> str | None:
    """The node whose kubelet ``user`` is, or None (upstream's NodeIdentity)."""
    if NODES_GROUP not in user.groups:
        return None
    node = node_of(user.name)
    return node or None


class NodeAuthorizer:
    def __init__(self, pod_node: PodNode) -> None:
        self.pod_node = pod_node
        role = next(r for r in CLUSTER_ROLES if r["metadata"]["name"] == "system:node")
        self._rules = _rules(role)  # upstream's NodeRules(): the system:node ClusterRole's

    def allows(self, node: str, r: Request) -> bool:
        """Whether ``node``'s kubelet is allowed ``r`` (False: no opinion)."""
        field_selector = r.field_selector
        if r.resource:
            group, resource, sub, verb = r.api_group, r.resource, r.subresource, r.verb
            if (group, resource) in _GRAPH:
                return False
            if (group == "coordination.k8s.io" and resource == "leases") or \
                    (group == "storage.k8s.io" and resource == "csinodes"):
                return verb in _LEASE_VERBS and not sub and \
                    (resource != "leases" or r.namespace == NODE_LEASE_NAMESPACE) and \
                    (verb == "create" or r.name == node)
            if group == "resource.k8s.io" and resource == "resourceslices":
                if sub:
                    return False
                if verb in ("list", "watch", "deletecollection"):
                    return _selects(field_selector, "nodeName", node)
                return verb == "create"  # get/update/patch/delete: the graph's (not built)
            if not group and resource == "nodes":
                if not sub:
                    if verb in ("create", "update", "patch"):
                        return True  # NodeRestriction: its own only
                    return verb in ("get", "list", "watch") and r.name == node
                return sub == "status" and verb in ("update", "patch")
            if not group and resource == "pods":
                if not sub:
                    if verb in ("create", "delete"):
                        return True  # mirror pods; NodeRestriction: bound to it
                    if verb in ("list", "watch") and _selects(field_selector, "spec.nodeName", node):
                        return True
                    return verb in ("get", "list", "watch") and bool(r.name)  # NodeRestriction checks the pod
                if sub == "status":
                    return verb in ("update", "patch")
                if sub == "eviction":
                    return verb == "create"
                return False
        return any(rule.allows(r) for rule in self._rules)

    async def restrict(self, user: User, node: str, r: Request) -> None:
        """NodeRestriction of a request that names its object (``restrict_create`` checks a
        create's): a 403 worded as upstream's when ``node``'s kubelet may not write it; also the
        graph's part for a read of one pod, which must be bound to the node."""
        group, resource, sub, verb = r.api_group, r.resource, r.subresource, r.verb
        if group or not r.name:
            return
        if resource == "nodes" and verb not in ("get", "list", "watch") and r.name != node:
            raise _forbidden("nodes", r.name, f'node "{node}" is not allowed to modify node "{r.name}"')
        if resource != "pods":
            return
        if sub == "status" and verb in ("update", "patch"):
            why = f'node "{node}" can only update pod status for pods with spec.nodeName set to itself'
        elif not sub and verb == "delete":
            why = f'node "{node}" can only delete pods with spec.nodeName set to itself'
        elif sub == "eviction" and verb == "create":
            why = f"node {node} can only evict pods with spec.nodeName set to itself"
        elif not sub and verb in ("get", "list", "watch"):
            why = ""
        else:
            return
        bound = await self.pod_node(r.namespace, r.name)
        if bound is None or bound == node:
            return  # (no such pod: the request answers 404)
        if not why:  # a read: the graph finds no path, no opinion, and RBAC grants kubelets none
            raise forbidden(user, r, f"no relationship found between node '{node}' and this object")
        raise _forbidden("pods", r.name, why)

    @staticmethod
    def restrict_create(node: str, plural: str, obj: dict[str, Any]) -> None:
        """NodeRestriction of a kubelet's create of a Node, Lease or CSINode: its own name only."""
        name = str((obj.get("metadata") or {}).get("name") or "")
        if name == node:
            return
        if plural == "nodes":
            raise _forbidden("nodes", name, f'node "{node}" is not allowed to modify node "{name}"')
        if plural == "leases":
            raise _forbidden("leases.coordination.k8s.io", name,
                             "can only access node lease with the same name as the requesting node")
        if plural == "csinodes":
            raise _forbidden("csinodes.storage.k8s.io", name,
                             "can only access CSINode with the same name as the requesting node")


def _selects(field_selector: str, field: str, value: str) -> bool:
    """Whether ``field_selector`` has the term ``field=value`` (or ``==``)."""
    for part in field_selector.split(","):
        key, op, wanted = part.partition("==") if "==" in part else part.partition("=")
        if op and not key.endswith("!") and key.strip() == field and wanted.strip() == value:
            return True
    return False


def _forbidden(resource: str, name: str, why: str) -> ApiError:
    """NodeRestriction's refusal (``admission.NewForbidden``): ``<resource> "<name>" is forbidden: <why>``."""
    kind, _, group = resource.partition(".")
    details: dict[str, Any] = {"name": name, "kind": kind}
    if group:
        details["group"] = group
    return ApiError(403, "Forbidden", f'{resource} "{name}" is forbidden: {why}', details)


class Authorizers:
    """The ``--authorization-mode`` list in order (``Config.authorization_modes``): ``rbac`` serves the RBAC mode,
    ``node`` the Node mode. Answers as ``rbac.Authorizer`` does."""

    def __init__(self, modes: tuple[str, ...], rbac: Authorizer | None, node: NodeAuthorizer | None) -> None:
        self.modes = modes
        self.rbac = rbac
        self.node = node if "Node" in modes else None

    async def allowed(self, user: User, r: Request) -> bool:
        if MASTERS in user.groups:
            return True
        for mode in self.modes:
            if mode == "AlwaysAllow":
                return True
            if mode == "Node":
                node = kubelet(user) if self.node is not None else None
                if node is not None and self.node is not None and self.node.allows(node, r):
                    return True
            elif mode == "RBAC" and self.rbac is not None and await self.rbac.allowed(user, r):
                return True
        return False

    async def reason(self, user: User, r: Request) -> str:
        """The allowing authorizer's reason: RBAC's binding, "" for the others (as upstream's)."""
        if MASTERS in user.groups:
            return ""
        for mode in self.modes:
            if mode == "AlwaysAllow":
                return ""
            if mode == "Node":
                node = kubelet(user) if self.node is not None else None
                if node is not None and self.node is not None and self.node.allows(node, r):
                    return ""
            elif mode == "RBAC" and self.rbac is not None and await self.rbac.allowed(user, r):
                return await self.rbac.reason(user, r)
        return ""

    async def rules_for(self, user: User, namespace: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """RBAC's rules for ``user`` (upstream's Node authorizer enumerates none); everything
        under AlwaysAllow."""
        if "AlwaysAllow" in self.modes:
            return [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}], \
                [{"verbs": ["*"], "nonResourceURLs": ["*"]}]
        if self.rbac is None:
            return [], []
        return await self.rbac.rules_for(user, namespace)
