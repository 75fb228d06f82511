"""``--authorization-mode Node,RBAC`` (kubeadm's): the Node authorizer, NodeRestriction, and
the modes in order.

kube-apiserver asks its authorizers in the order ``--authorization-mode`` lists them; the
first to allow decides, and a request none allows is denied (upstream's union authorizer:
these authorizers never deny outright, they allow or have no opinion, and the reasons of
those with none are joined into the 403's message). Members of ``system:masters`` are
allowed before any (upstream's privileged-group authorizer). ``Authorizers`` is that chain;
``AlwaysAllow`` in it allows whatever reaches it.

The Node authorizer (upstream's ``plugin/pkg/auth/authorizer/node/node_authorizer.go``) has
an opinion on kubelets only: users named ``system:node:<node>`` in the group ``system:nodes``
(identities.py). As upstream's, with ``AuthorizeNodeWithSelectors`` (on since 1.32):

- its Node: get (and list/watch by ``metadata.name``) of its own only; create, update,
  patch and ``nodes/status`` allowed, NodeRestriction limiting them to its own;
- its pods: get of a pod bound to it, list/watch with ``fieldSelector=spec.nodeName=<node>``
  (or by name, of one bound to it), create and delete (mirror pods), ``pods/status`` update
  and patch and ``pods/eviction``: NodeRestriction limits them to pods bound to it;
- its Lease in ``kube-node-lease`` and its CSINode: get, create, update, patch, delete, by
  their name; ResourceSlices: create (NodeRestriction: its own ``spec.nodeName``), list,
  watch and deletecollection with ``fieldSelector=nodeName=<node>``, get, update, patch
  and delete of a slice whose ``spec.nodeName`` is the node;
- the graph's objects, each only where a pod bound to the node references it (``NodeGraph``):
  get, list and watch (by ``metadata.name``) of Secrets and ConfigMaps; get of
  PersistentVolumeClaims (and ``status`` update and patch), of PersistentVolumes whose
  ``claimRef`` is such a claim, of ResourceClaims; ``serviceaccounts/token`` create for the
  pods' service accounts; get of the VolumeAttachments whose ``spec.nodeName`` is the node;
- anything else: what the ``system:node`` ClusterRole's rules allow (events, services,
  CSRs, ...), as upstream evaluates ``NodeRules()``.

Refused, it has no opinion and says why in upstream's words (``no relationship found between
node 'n1' and this object``, ``can only get individual resources of this type``, ...); the
next mode (RBAC) decides.

The graph. Upstream keeps one (``graph.go``), fed by informers on pods, PVs, VolumeAttachments
and ResourceSlices: edges secret/configmap/pvc/resourceclaim/serviceaccount -> pod -> node,
pv -> pvc (its ``claimRef``), secret -> pv, volumeattachment/resourceslice -> node. Here the
same question is answered at request time from the watch caches (``Objects``): the pods bound
to the node come from the pod cache's index by ``spec.nodeName`` (the one a kubelet's LIST
uses), ~10-110 keys; what each references (``pod_references``: volumes, ``envFrom``, ``env``
``valueFrom``, ``imagePullSecrets``, projected sources, the service account, ``<pod>-<volume>``
for an ephemeral volume's claim, the claims of ``spec.resourceClaims`` by name or through
``status.resourceClaimStatuses``, ``status.extendedResourceClaimStatus``) is parsed once per
pod version and kept (a few hundred bytes a pod, dropped wholesale past ``MEMO_MAX`` pods).
A pod is one cache lookup of its ``spec.nodeName`` field (no parse), a PV, a
VolumeAttachment or a ResourceSlice one lookup and parse. No index is kept on the
watch caches' write path (a pod's writes, the hot path, cost nothing more), and a decision is
a walk of the node's pods' memoised references: microseconds (docs/operations.md has the
figures). As upstream's graph lags its informers, a pod this process's cache has not seen
yet relates nothing; the kubelet retries.

NodeRestriction (upstream's ``plugin/pkg/admission/noderestriction/admission.go``) is on with
the Node mode, as kubeadm enables both. Each refusal is a 403 worded as upstream's:

- Nodes: its own only (``node "a" is not allowed to modify node "b"``); created without
  ``spec.configSource``, updated without a new one, without changing ``spec.taints``; the
  labels it sets or changes only the kubelet's (``kubernetes.io/hostname``, ``/arch``,
  ``/os``, the instance-type and topology ones and their beta forms, the
  ``kubelet.kubernetes.io/`` and ``node.kubernetes.io/`` prefixes) or outside
  ``kubernetes.io`` and ``k8s.io``, never ``node-restriction.kubernetes.io/``;
- pods: creates of mirror pods only, bound to itself, owned by its Node (as controller, with
  its UID, no ``blockOwnerDeletion``), referencing no service account, secret, configmap,
  cluster trust bundle or claim; deletes, evictions and status writes of pods bound to it,
  the status writes changing neither the labels nor ``status.resourceClaimStatuses``;
- ``persistentvolumeclaims/status``: nothing but ``status.capacity``, ``conditions``,
  ``allocatedResources`` and ``allocatedResourceStatuses``;
- ``serviceaccounts/token``: bound to a pod (with its UID) bound to the node;
- its Lease and CSINode by name; ResourceSlices created with its ``spec.nodeName``;
- CertificateSigningRequests for the kubelet signers: its own name as the subject's CN;
- PodCertificateRequests (created only): its own node name and UID, for a pod that exists
  with the request's UID, is bound to the node, Pending or Running, not a mirror pod, runs
  as the request's service account (with its UID) (the 1.37 KEP's rules) and mounts a
  ``podCertificate`` projection of the request's signer (what 1.37's changelog is reported
  to add); upstream's words for them were not available to read, these are the emulator's.

A write naming its object is checked before the body is read (``restrict``: the pod's node
from the watch cache's ``spec.nodeName``); a create or an update, once its object is made,
in admission (``admit``); a NodeStatusReport (api/nodereports.py) names its own Node only
(a LeaseRenewal, naming no lease in its authorization, gets no opinion from the Node
authorizer: the simulated kubelets send both as KWOK's controller, not as a node).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from typing import Any, Protocol

from ..identities import NODES_GROUP, node_of
from ..registry.certificates import parse_request
from .errors import ApiError
from .rbac import MASTERS, Authorizer, Request, Rules, User, _rules
from .rbacpolicy import CLUSTER_ROLES

__all__ = ["Authorizers", "NodeAuthorizer", "NodeGraph", "Objects", "kubelet", "pod_references"]

NODE_LEASE_NAMESPACE = "kube-node-lease"
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
MEMO_MAX = 200_000  # pods whose references are kept (~300 bytes each); past it, started over

_LEASE_VERBS = frozenset({"get", "create", "update", "patch", "delete"})
_READS = frozenset({"get", "list", "watch"})
# the references a pod's volumes make to secrets by ``secretRef`` (upstream's VisitPodSecretNames)
_SECRET_REF_VOLUMES = ("cephfs", "cinder", "flexVolume", "rbd", "scaleIO", "iscsi", "storageos")
# the labels a kubelet sets on its Node (k8s.io/kubelet/pkg/apis's kubeletLabels, kubeletLabelNamespaces)
_KUBELET_LABELS = frozenset({
    "kubernetes.io/hostname", "topology.kubernetes.io/zone", "topology.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/region",
    "beta.kubernetes.io/instance-type", "node.kubernetes.io/instance-type", "kubernetes.io/os",
    "kubernetes.io/arch", "beta.kubernetes.io/os", "beta.kubernetes.io/arch"})
_KUBELET_LABEL_NAMESPACES = ("kubelet.kubernetes.io", "node.kubernetes.io")
_NODE_RESTRICTION_NAMESPACE = "node-restriction.kubernetes.io"
_KUBELET_SIGNERS = frozenset({"kubernetes.io/kubelet-serving", "kubernetes.io/kube-apiserver-client-kubelet"})
_CSRS = "certificatesigningrequests.certificates.k8s.io"
_PCRS = "podcertificaterequests.certificates.k8s.io"

PodNode = Callable[[str, str], Awaitable[str | None]]  # (namespace, name) -> the pod's spec.nodeName, None if none
Refs = frozenset[tuple[str, str]]  # (plural, name) of what a pod references, in its namespace


class Objects(Protocol):
    """What the Node authorizer reads, from the watch caches (api/app.py), synchronously."""

    def pods_on(self, node: str) -> list[tuple[bytes, int, Any]]:
        """(key, revision, handle) of each pod bound to ``node`` now; ``load`` parses a handle."""
        ...

    def load(self, handle: Any) -> dict[str, Any]: ...

    def pod_node(self, namespace: str, name: str) -> str | None:
        """The cached pod's ``spec.nodeName`` ("" unbound), None if no such pod: no parse."""
        ...

    def get(self, group: str, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
        """The cached object, parsed; None if none."""
        ...


def kubelet(user: User) -> str | None:
    """The node whose kubelet ``user`` is, or None (upstream's NodeIdentity)."""
    if NODES_GROUP not in user.groups:
        return None
    node = node_of(user.name)
    return node or None


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _name(ref: Any, field: str = "name") -> str:
    value = _dict(ref).get(field)
    return value if isinstance(value, str) else ""


def _containers(spec: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for field in ("initContainers", "containers", "ephemeralContainers"):
        for c in _list(spec.get(field)):
            if isinstance(c, dict):
                yield c


def pod_secrets(pod: dict[str, Any]) -> Iterator[str]:
    """The secrets a pod references (upstream's ``VisitPodSecretNames``, all containers)."""
    spec = _dict(pod.get("spec"))
    for ref in _list(spec.get("imagePullSecrets")):
        yield _name(ref)
    for c in _containers(spec):
        for source in _list(c.get("envFrom")):
            yield _name(_dict(source).get("secretRef"))
        for env in _list(c.get("env")):
            yield _name(_dict(_dict(env).get("valueFrom")).get("secretKeyRef"))
    for v in _list(spec.get("volumes")):
        v = _dict(v)
        yield _name(v.get("secret"), "secretName")
        yield _name(v.get("azureFile"), "secretName")
        yield _name(_dict(v.get("csi")).get("nodePublishSecretRef"))
        for kind in _SECRET_REF_VOLUMES:
            yield _name(_dict(v.get(kind)).get("secretRef"))
        for source in _list(_dict(v.get("projected")).get("sources")):
            yield _name(_dict(source).get("secret"))


def pod_configmaps(pod: dict[str, Any]) -> Iterator[str]:
    """The configmaps a pod references (upstream's ``VisitPodConfigmapNames``, all containers)."""
    spec = _dict(pod.get("spec"))
    for c in _containers(spec):
        for source in _list(c.get("envFrom")):
            yield _name(_dict(source).get("configMapRef"))
        for env in _list(c.get("env")):
            yield _name(_dict(_dict(env).get("valueFrom")).get("configMapKeyRef"))
    for v in _list(spec.get("volumes")):
        v = _dict(v)
        yield _name(v.get("configMap"))
        for source in _list(_dict(v.get("projected")).get("sources")):
            yield _name(_dict(source).get("configMap"))


def pod_references(pod: dict[str, Any]) -> Refs:
    """What ``pod`` references in its namespace, as upstream's ``Graph.AddPod`` draws its edges:
    ``(plural, name)`` of its secrets, configmaps, persistentvolumeclaims (an ephemeral volume's
    is ``<pod>-<volume>``), resourceclaims (by name, or as ``status.resourceClaimStatuses``
    names a template's) and its serviceaccount."""
    spec, status = _dict(pod.get("spec")), _dict(pod.get("status"))
    refs = {("secrets", n) for n in pod_secrets(pod) if n}
    refs.update(("configmaps", n) for n in pod_configmaps(pod) if n)
    account = spec.get("serviceAccountName")
    if isinstance(account, str) and account:
        refs.add(("serviceaccounts", account))
    pod_name = _name(pod.get("metadata"))
    for v in _list(spec.get("volumes")):
        v = _dict(v)
        claim = _name(v.get("persistentVolumeClaim"), "claimName")
        if claim:
            refs.add(("persistentvolumeclaims", claim))
        if isinstance(v.get("ephemeral"), dict) and _name(v):
            refs.add(("persistentvolumeclaims", f"{pod_name}-{_name(v)}"))
    generated = {_name(s): _name(s, "resourceClaimName") for s in _list(status.get("resourceClaimStatuses"))}
    for claim in _list(spec.get("resourceClaims")):
        claim_name = _name(claim, "resourceClaimName") or generated.get(_name(claim), "")
        if claim_name:
            refs.add(("resourceclaims", claim_name))
    extended = _name(status.get("extendedResourceClaimStatus"), "resourceClaimName")
    if extended:
        refs.add(("resourceclaims", extended))
    return frozenset(refs)


def pv_secrets(pv: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(namespace, name) of the secrets a PersistentVolume shows the kubelet (upstream's
    ``VisitPVSecretNames``, the kubelet-visible ones); a reference without a namespace is in
    its claim's."""
    spec = _dict(pv.get("spec"))
    claim_ns = _name(spec.get("claimRef"), "namespace")

    def ref(r: Any) -> tuple[str, str]:
        return (_name(r, "namespace") or claim_ns, _name(r))

    csi = _dict(spec.get("csi"))
    for field in ("nodeStageSecretRef", "nodePublishSecretRef", "nodeExpandSecretRef"):
        yield ref(csi.get(field))
    azure = _dict(spec.get("azureFile"))
    yield (_name(azure, "secretNamespace") or claim_ns, _name(azure, "secretName"))
    for kind in _SECRET_REF_VOLUMES:
        yield ref(_dict(spec.get(kind)).get("secretRef"))


class NodeGraph:
    """Whether a node's pods relate it to an object (upstream's ``hasPathFrom``), from
    ``Objects`` at request time; each pod version's references parsed once."""

    def __init__(self, objects: Objects) -> None:
        self.objects = objects
        self._refs: dict[bytes, tuple[int, str, Refs]] = {}  # pod key -> (revision, namespace, references)

    def references(self, node: str, plural: str, namespace: str, name: str,
                   claims: list[tuple[str, str]] | None = None) -> bool:
        """Whether a pod bound to ``node`` references ``plural`` ``namespace/name``; the claims
        (namespace, name) its pods reference are added to ``claims`` on the way, if given."""
        wanted = (plural, name)
        memo, objects = self._refs, self.objects
        for key, revision, handle in objects.pods_on(node):
            known = memo.get(key)
            if known is None or known[0] != revision:
                pod = objects.load(handle)
                if len(memo) >= MEMO_MAX:
                    memo.clear()
                known = memo[key] = (revision, _name(pod.get("metadata"), "namespace"), pod_references(pod))
            if known[1] == namespace and wanted in known[2]:
                return True
            if claims is not None:
                claims.extend((known[1], n) for p, n in known[2] if p == "persistentvolumeclaims")
        return False

    def has_path(self, node: str, plural: str, namespace: str, name: str) -> bool:
        """Whether ``plural`` ``namespace/name`` relates to ``node`` as upstream's graph draws it."""
        objects = self.objects
        if plural == "pods":
            return objects.pod_node(namespace, name) == node
        if plural in ("volumeattachments", "resourceslices"):
            group = "storage.k8s.io" if plural == "volumeattachments" else "resource.k8s.io"
            found = objects.get(group, plural, "", name)
            return found is not None and _dict(found.get("spec")).get("nodeName") == node
        if plural == "persistentvolumes":
            pv = objects.get("", "persistentvolumes", "", name)
            claim = _dict(_dict(pv.get("spec")).get("claimRef")) if pv is not None else {}
            return bool(claim) and self.references(node, "persistentvolumeclaims", _name(claim, "namespace"),
                                                   _name(claim))
        claims: list[tuple[str, str]] | None = [] if plural == "secrets" else None
        if self.references(node, plural, namespace, name, claims):
            return True
        return bool(claims) and self._pv_secret(namespace, name, claims or [])

    def _pv_secret(self, namespace: str, name: str, claims: list[tuple[str, str]]) -> bool:
        """node <- pod <- pvc <- pv <- secret, for the node's pods' ``claims``: their PVs (found
        by the claim's ``spec.volumeName``, held if the PV's ``claimRef`` names the claim back)."""
        objects = self.objects
        for claim_ns, claim_name in claims:
            claim = objects.get("", "persistentvolumeclaims", claim_ns, claim_name)
            volume = _name(_dict(claim.get("spec")), "volumeName") if claim is not None else ""
            pv = objects.get("", "persistentvolumes", "", volume) if volume else None
            if pv is None:
                continue
            back = _dict(_dict(pv.get("spec")).get("claimRef"))
            if (_name(back, "namespace"), _name(back)) == (claim_ns, claim_name) and \
                    (namespace, name) in pv_secrets(pv):
                return True
        return False


def _no_relationship(node: str) -> str:
    return f"no relationship found between node '{node}' and this object"


class NodeAuthorizer:
    def __init__(self, pod_node: PodNode, objects: Objects | None = None) -> None:
        self.pod_node = pod_node
        self.graph = NodeGraph(objects) if objects is not None else None
        role = next(r for r in CLUSTER_ROLES if r["metadata"]["name"] == "system:node")
        self._rules = _rules(role)  # upstream's NodeRules(): the system:node ClusterRole's

    def allows(self, node: str, r: Request) -> bool:
        """Whether ``node``'s kubelet is allowed ``r`` (False: no opinion)."""
        return self.decide(node, r)[0]

    def decide(self, node: str, r: Request) -> tuple[bool, str]:
        """Upstream's ``Authorize`` for ``node``'s kubelet: allowed, or no opinion and why."""
        if r.resource:
            group, resource, sub, verb = r.api_group, r.resource, r.subresource, r.verb
            if not group and resource in ("secrets", "configmaps"):
                if verb not in _READS:
                    return False, "can only read resources of this type"
                if sub:
                    return False, "cannot read subresource"
                if not r.namespace:
                    return False, "can only read namespaced object of this type"
                return self._related(node, r)
            if not group and resource == "persistentvolumeclaims" and sub == "status":
                if verb not in ("update", "patch"):
                    return False, "can only get/update/patch this type"
                return self._related(node, r)
            if (group, resource) in (("", "persistentvolumeclaims"), ("", "persistentvolumes"),
                                     ("resource.k8s.io", "resourceclaims"), ("storage.k8s.io", "volumeattachments")):
                if verb != "get":
                    return False, "can only get individual resources of this type"
                if sub:
                    return False, "cannot get subresource"
                return self._related(node, r)
            if not group and resource == "serviceaccounts":
                if verb != "create" or not r.name:
                    return False, "can only create tokens for individual service accounts"
                if sub != "token":
                    return False, "can only create token subresource of serviceaccount"
                return self._related(node, r)
            if group == "coordination.k8s.io" and resource == "leases":
                if verb not in _LEASE_VERBS:
                    return False, "can only get, create, update, patch, or delete a node lease"
                if r.namespace != NODE_LEASE_NAMESPACE:
                    return False, f'can only access leases in the "{NODE_LEASE_NAMESPACE}" system namespace'
                if verb != "create" and r.name != node:
                    return False, "can only access node lease with the same name as the requesting node"
                return True, ""
            if group == "storage.k8s.io" and resource == "csinodes":
                if verb not in _LEASE_VERBS:
                    return False, "can only get, create, update, patch, or delete a CSINode"
                if sub:
                    return False, "cannot authorize CSINode subresources"
                if verb != "create" and r.name != node:
                    return False, "can only access CSINode with the same name as the requesting node"
                return True, ""
            if group == "resource.k8s.io" and resource == "resourceslices":
                if sub:
                    return False, "cannot authorize ResourceSlice subresources"
                if verb == "create":
                    return True, ""  # NodeRestriction: its own spec.nodeName
                if verb in ("get", "update", "patch", "delete"):
                    return self._related(node, r)
                if verb in ("list", "watch", "deletecollection"):
                    if _selects(r.field_selector, "nodeName", node):
                        return True, ""
                    return False, "can only list/watch/deletecollection resourceslices with nodeName field selector"
                return False, ("only the following verbs are allowed for a ResourceSlice: get, watch, list, "
                               "create, update, patch, delete, deletecollection")
            if not group and resource == "nodes":
                if not sub:
                    if verb in ("create", "update", "patch"):
                        return True, ""  # NodeRestriction: its own only
                    if verb in _READS:
                        if r.name == node:
                            return True, ""
                        if not r.name:
                            return False, f"node '{node}' cannot read all nodes, only its own Node object"
                        return False, f"node '{node}' cannot read '{r.name}', only its own Node object"
                return (True, "") if sub == "status" and verb in ("update", "patch") else (False, "")
            if not group and resource == "pods":
                if not sub:
                    if verb == "get":
                        return self._related(node, r)
                    if verb in ("list", "watch"):
                        if _selects(r.field_selector, "spec.nodeName", node):
                            return True, ""
                        if r.name:
                            return self._related(node, r)
                        return False, "can only list/watch pods with spec.nodeName field selector"
                    if verb in ("create", "delete"):
                        return True, ""  # mirror pods; NodeRestriction: bound to it
                elif (sub == "status" and verb in ("update", "patch")) or (sub == "eviction" and verb == "create"):
                    return True, ""  # NodeRestriction: pods bound to it
                return False, ""
        return any(rule.allows(r) for rule in self._rules), ""

    def _related(self, node: str, r: Request) -> tuple[bool, str]:
        """Upstream's ``authorize``: a path in the graph from the named object to the node."""
        if not r.name:
            return False, "No Object name found"
        if self.graph is not None and self.graph.has_path(node, r.resource, r.namespace, r.name):
            return True, ""
        return False, _no_relationship(node)

    async def restrict(self, user: User, node: str, r: Request) -> None:
        """NodeRestriction of a request that names its object, before its body is read
        (``admit`` checks the object once made): a 403 worded as upstream's when ``node``'s
        kubelet may not write it."""
        group, resource, sub, verb = r.api_group, r.resource, r.subresource, r.verb
        if group or not r.name:
            return
        if resource == "nodes" and verb not in _READS and r.name != node:
            raise _forbidden("nodes", r.name, f'node "{node}" is not allowed to modify node "{r.name}"')
        if resource != "pods":
            return
        if sub == "status" and verb in ("update", "patch"):
            why = f'node "{node}" can only update pod status for pods with spec.nodeName set to itself'
        elif not sub and verb == "delete":
            why = f'node "{node}" can only delete pods with spec.nodeName set to itself'
        elif sub == "eviction" and verb == "create":
            why = f"node {node} can only evict pods with spec.nodeName set to itself"
        else:
            return
        bound = await self.pod_node(r.namespace, r.name)
        if bound is None or bound == node:
            return  # (no such pod: the request answers 404)
        raise _forbidden("pods", r.name, why)

    def admit(self, node: str, plural: str, subresource: str | None, obj: dict[str, Any],
              old: dict[str, Any] | None) -> None:
        """NodeRestriction of ``node``'s kubelet's create (``old`` None) or update of ``obj``, a
        built-in ``plural``: a 403 worded as upstream's where it may not."""
        meta = _dict(obj.get("metadata"))
        name = _name(meta)
        if plural == "nodes":
            self._admit_node(node, name, obj, old)
        elif plural == "pods":
            if old is None:
                self._admit_mirror_pod(node, name, obj)
            elif subresource == "status":
                if (_dict(meta.get("labels"))) != _dict(_dict(old.get("metadata")).get("labels")):
                    raise _forbidden("pods", name, f'node "{node}" cannot update labels through pod status')
                if _claim_statuses(obj) != _claim_statuses(old):
                    raise _forbidden("pods", name, f'node "{node}" cannot update resource claim statues')
        elif plural == "persistentvolumeclaims" and old is not None:
            if subresource != "status":
                raise _forbidden("persistentvolumeclaims", name, "may only update PVC status")
            changed = _pvc_changes(old, obj)
            if changed:
                raise _forbidden("persistentvolumeclaims", name,
                                 f'node "{node}" is not allowed to update fields other than status.capacity and '
                                 f"status.conditions: {', '.join(changed)}")
        elif old is not None:
            return
        elif plural == "leases" and name != node:
            raise _forbidden("leases.coordination.k8s.io", name,
                             "can only access node lease with the same name as the requesting node")
        elif plural == "csinodes" and name != node:
            raise _forbidden("csinodes.storage.k8s.io", name,
                             "can only access CSINode with the same name as the requesting node")
        elif plural == "resourceslices" and _dict(obj.get("spec")).get("nodeName") != node:
            raise _forbidden("resourceslices.resource.k8s.io", name,
                             "can only create ResourceSlice with the same NodeName as the requesting node")
        elif plural == "certificatesigningrequests":
            _admit_csr(node, name or _name(meta, "generateName"), _dict(obj.get("spec")))
        elif plural == "podcertificaterequests":
            self._admit_pod_certificate_request(node, name or _name(meta, "generateName"), _name(meta, "namespace"),
                                                _dict(obj.get("spec")))

    def _admit_node(self, node: str, name: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        if name != node:
            raise _forbidden("nodes", name, f'node "{node}" is not allowed to modify node "{name}"')
        spec = _dict(obj.get("spec"))
        labels = _dict(_dict(obj.get("metadata")).get("labels"))
        if old is None:
            if spec.get("configSource") is not None:
                raise _forbidden("nodes", name,
                                 f'node "{node}" is not allowed to create pods with a non-nil configSource')
            refused = forbidden_labels(labels, {})
            if refused:
                raise _forbidden("nodes", name,
                                 f'node "{node}" is not allowed to set the following labels: {", ".join(refused)}')
            return
        old_spec = _dict(old.get("spec"))
        if spec.get("configSource") is not None and spec.get("configSource") != old_spec.get("configSource"):
            raise _forbidden("nodes", name,
                             f'node "{node}" is not allowed to update configSource to a new non-nil configSource')
        if (spec.get("taints") or []) != (old_spec.get("taints") or []):
            raise _forbidden("nodes", name, f'node "{node}" is not allowed to modify taints')
        refused = forbidden_labels(labels, _dict(_dict(old.get("metadata")).get("labels")))
        if refused:
            raise _forbidden("nodes", name, f"is not allowed to modify labels: {', '.join(refused)}")

    def _admit_mirror_pod(self, node: str, name: str, pod: dict[str, Any]) -> None:
        """upstream's ``admitPodCreate``: a kubelet creates its static pods' mirrors only."""
        meta, spec = _dict(pod.get("metadata")), _dict(pod.get("spec"))

        def refuse(why: str) -> ApiError:
            return _forbidden("pods", name, why)

        if MIRROR_ANNOTATION not in _dict(meta.get("annotations")):
            raise refuse(f'pod does not have "{MIRROR_ANNOTATION}" annotation, node "{node}" can only create '
                         "mirror pods")
        if spec.get("nodeName") != node:
            raise refuse(f'node "{node}" can only create pods with spec.nodeName set to itself')
        owners = _list(meta.get("ownerReferences"))
        if len(owners) > 1:
            raise refuse(f'node "{node}" can only create pods with a single owner reference set to itself')
        if not owners:
            raise refuse(f'node "{node}" can only create pods with an owner reference set to itself')
        owner = _dict(owners[0])
        if (owner.get("apiVersion"), owner.get("kind"), owner.get("name")) != ("v1", "Node", node):
            raise refuse(f'node "{node}" can only create pods with an owner reference set to itself')
        if owner.get("controller") is not True:
            raise refuse(f'node "{node}" can only create pods with a controller owner reference set to itself')
        if owner.get("blockOwnerDeletion") is True:
            raise refuse(f'node "{node}" must not set blockOwnerDeletion on an owner reference')
        found = self.graph.objects.get("", "nodes", "", node) if self.graph is not None else None
        if found is None:
            raise ApiError(404, "NotFound", f'nodes "{node}" not found', {"name": node, "kind": "nodes"})
        uid = _name(found.get("metadata"), "uid")
        if owner.get("uid") != uid:
            raise refuse(f"node {node} UID mismatch: expected {uid} got {owner.get('uid') or ''}")
        if spec.get("serviceAccountName"):
            raise refuse(f'node "{node}" can not create pods that reference a service account')
        if any(pod_secrets(pod)):
            raise refuse(f'node "{node}" can not create pods that reference secrets')
        if any(pod_configmaps(pod)):
            raise refuse(f'node "{node}" can not create pods that reference configmaps')
        volumes = [_dict(v) for v in _list(spec.get("volumes"))]
        if any(_dict(s).get("clusterTrustBundle") is not None
               for v in volumes for s in _list(_dict(v.get("projected")).get("sources"))):
            raise refuse(f'node "{node}" can not create pods that reference clustertrustbundles')
        if any(v.get("persistentVolumeClaim") is not None for v in volumes):
            raise refuse(f'node "{node}" can not create pods that reference persistentvolumeclaims')

    def _admit_pod_certificate_request(self, node: str, name: str, namespace: str, spec: dict[str, Any]) -> None:
        """A kubelet asks for a certificate only for a pod bound to it, as that pod, its service
        account and its node are now, and for a signer the pod mounts a ``podCertificate`` of."""
        def refuse(why: str) -> ApiError:
            return _forbidden(_PCRS, name, why)

        def uid(obj: dict[str, Any] | None) -> str:
            return _name(_dict(obj).get("metadata"), "uid")

        if spec.get("nodeName") != node:
            raise refuse(f'node "{node}" can only create PodCertificateRequests with spec.nodeName set to itself')
        objects = self.graph.objects if self.graph is not None else None
        found = objects.get("", "nodes", "", node) if objects is not None else None
        if found is None or spec.get("nodeUID") != uid(found):
            raise refuse(f'spec.nodeUID "{spec.get("nodeUID") or ""}" is not the UID of node "{node}"')
        pod_name = str(spec.get("podName") or "")
        pod = objects.get("", "pods", namespace, pod_name) if objects is not None else None
        if pod is None:
            raise refuse(f'pod "{namespace}/{pod_name}" named in the PodCertificateRequest does not exist')
        if spec.get("podUID") != uid(pod):
            raise refuse(f'spec.podUID "{spec.get("podUID") or ""}" is not the UID of pod "{namespace}/{pod_name}"')
        pod_spec, pod_meta = _dict(pod.get("spec")), _dict(pod.get("metadata"))
        if pod_spec.get("nodeName") != node:
            raise refuse(f'pod "{namespace}/{pod_name}" is not bound to node "{node}"')
        if MIRROR_ANNOTATION in _dict(pod_meta.get("annotations")):
            raise refuse(f'pod "{namespace}/{pod_name}" is a mirror pod')
        phase = _dict(pod.get("status")).get("phase")
        if phase not in ("Pending", "Running"):
            raise refuse(f'pod "{namespace}/{pod_name}" is {phase or "in no phase"}, not Pending or Running')
        account = str(spec.get("serviceAccountName") or "")
        if account != (pod_spec.get("serviceAccountName") or "default"):
            raise refuse(f'pod "{namespace}/{pod_name}" does not run as service account "{account}"')
        found = objects.get("", "serviceaccounts", namespace, account) if objects is not None else None
        if found is None or spec.get("serviceAccountUID") != uid(found):
            raise refuse(f'spec.serviceAccountUID "{spec.get("serviceAccountUID") or ""}" is not the UID of service '
                         f'account "{namespace}/{account}"')
        signer = spec.get("signerName")
        if not any(_dict(_dict(source).get("podCertificate")).get("signerName") == signer
                   for volume in _list(pod_spec.get("volumes"))
                   for source in _list(_dict(_dict(volume).get("projected")).get("sources"))):
            raise refuse(f'pod "{namespace}/{pod_name}" does not mount a podCertificate projected volume for signer '
                         f'"{signer}"')

    @staticmethod
    def admit_node_report(node: str, names: list[Any]) -> None:
        """A kubelet's NodeStatusReport (api/nodereports.py) writes its own Node's status only,
        as its patch of ``nodes/status`` would."""
        for name in names:
            if name != node:
                raise _forbidden("nodes", str(name), f'node "{node}" is not allowed to modify node "{name}"')

    def admit_token(self, node: str, namespace: str, account: str, request: dict[str, Any]) -> None:
        """upstream's ``admitServiceAccount``: a kubelet's TokenRequest binds the token to a pod
        bound to it, with the pod's UID."""
        ref = _dict(_dict(request.get("spec")).get("boundObjectRef"))
        if ref.get("apiVersion") != "v1" or ref.get("kind") != "Pod" or not _name(ref):
            raise _forbidden("serviceaccounts", account, "node requested token not bound to a pod")
        if not ref.get("uid"):
            raise _forbidden("serviceaccounts", account, "node requested token with a pod binding without a uid")
        pod = self.graph.objects.get("", "pods", namespace, _name(ref)) if self.graph is not None else None
        if pod is None:
            raise ApiError(404, "NotFound", f'pods "{_name(ref)}" not found', {"name": _name(ref), "kind": "pods"})
        if ref.get("uid") != _name(pod.get("metadata"), "uid"):
            raise _forbidden("serviceaccounts", account,
                             f"the UID in the bound object reference ({ref.get('uid')}) does not match the UID in "
                             "record. The object might have been deleted and then recreated")
        if _dict(pod.get("spec")).get("nodeName") != node:
            raise _forbidden("serviceaccounts", account,
                             "node requested token bound to a pod scheduled on a different node")


def _admit_csr(node: str, name: str, spec: dict[str, Any]) -> None:
    """upstream's ``admitCSR``: a kubelet's request for a kubelet signer names itself (the
    ``AllowInsecureKubeletCertificateSigningRequests`` gate off, as by default)."""
    if spec.get("signerName") not in _KUBELET_SIGNERS:
        return
    from cryptography.x509.oid import NameOID

    request, why = parse_request(spec.get("request"))
    if request is None:
        raise _forbidden(_CSRS, name, f"unable to parse csr: {why}")
    names = request.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    if not names or names[0].value != f"system:node:{node}":
        raise _forbidden(_CSRS, name, f"can only create a node CSR with CN=system:node:{node}")


def forbidden_labels(labels: dict[str, Any], old: dict[str, Any]) -> list[str]:
    """The labels set, changed or removed (``labels`` against ``old``) that a kubelet may not
    touch, sorted (upstream's ``getForbiddenLabels``)."""
    changed = {k for k, v in labels.items() if old.get(k) != v} | {k for k in old if k not in labels}
    refused = []
    for label in changed:
        namespace = label.partition("/")[0] if "/" in label else ""
        restricted = namespace == _NODE_RESTRICTION_NAMESPACE or namespace.endswith("." + _NODE_RESTRICTION_NAMESPACE)
        if restricted or (_kubernetes_namespace(namespace) and not _kubelet_label(label, namespace)):
            refused.append(label)
    return sorted(refused)


def _kubernetes_namespace(namespace: str) -> bool:
    return namespace in ("kubernetes.io", "k8s.io") or namespace.endswith((".kubernetes.io", ".k8s.io"))


def _kubelet_label(label: str, namespace: str) -> bool:
    return label in _KUBELET_LABELS or any(namespace == ns or namespace.endswith("." + ns)
                                           for ns in _KUBELET_LABEL_NAMESPACES)


def _claim_statuses(pod: dict[str, Any]) -> list[tuple[str, str | None]]:
    return [(_name(s), _dict(s).get("resourceClaimName"))
            for s in _list(_dict(pod.get("status")).get("resourceClaimStatuses"))]


_PVC_STATUS_FIELDS = ("capacity", "conditions", "allocatedResources", "allocatedResourceStatuses")


def _pvc_changes(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """The fields a PVC status write changes besides those a kubelet may (upstream's
    ``admitPVCStatus``: resourceVersion and managedFields aside)."""
    changed = []
    for part in sorted(set(old) | set(new)):
        was, now = old.get(part), new.get(part)
        if part == "metadata":
            was, now = _dict(was), _dict(now)
            for field in sorted(set(was) | set(now)):
                if field not in ("resourceVersion", "managedFields") and was.get(field) != now.get(field):
                    changed.append(f"metadata.{field}")
        elif part == "status":
            was, now = _dict(was), _dict(now)
            for field in sorted(set(was) | set(now)):
                if field not in _PVC_STATUS_FIELDS and was.get(field) != now.get(field):
                    changed.append(f"status.{field}")
        elif was != now:
            changed.append(part)
    return changed


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
    """The ``--authorization-mode`` list in order (``Config.authorization_modes``): ``rbac`` serves the RBAC mode
    (and, in any mode, resolves the rules a user holds for RBAC's escalation check, api/rbacescalation.py),
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

    async def denial(self, user: User, r: Request) -> str:
        """Why a request none allowed was denied: the reasons of the authorizers without an
        opinion, in order, joined by newlines as upstream's union authorizer joins them (the
        Node authorizer's for a kubelet; RBAC's only when a binding of the user's does not resolve)."""
        reasons = []
        for mode in self.modes:
            if mode == "Node":
                node = kubelet(user) if self.node is not None else None
                if node is not None and self.node is not None:
                    reasons.append(self.node.decide(node, r)[1])
            elif mode == "RBAC" and self.rbac is not None:
                reasons.append(await self.rbac.denial(user, r))
        return "\n".join(reason for reason in reasons if reason)

    async def rules_for(self, user: User, namespace: str) -> Rules:
        """The rules of the modes in order, as upstream's union of rule resolvers: everything under
        AlwaysAllow, none from the Node authorizer (which calls a kubelet's list incomplete), RBAC's."""
        resource_rules: list[dict[str, Any]] = []
        non_resource_rules: list[dict[str, Any]] = []
        incomplete, errors = False, []
        for mode in self.modes:
            if mode == "AlwaysAllow":
                resource_rules.append({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]})
                non_resource_rules.append({"verbs": ["*"], "nonResourceURLs": ["*"]})
            elif mode == "Node" and self.node is not None and kubelet(user) is not None:
                incomplete = True
                errors.append("node authorizer does not support user rule resolution")
            elif mode == "RBAC" and self.rbac is not None:
                got = await self.rbac.rules_for(user, namespace)
                resource_rules += got.resource_rules
                non_resource_rules += got.non_resource_rules
                incomplete, errors = incomplete or got.incomplete, errors + got.errors
        return Rules(resource_rules, non_resource_rules, incomplete, errors)
