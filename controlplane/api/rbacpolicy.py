"""The ClusterRoles and ClusterRoleBindings of upstream's bootstrap policy (its ``policy.go``),
as kube-apiserver 1.34 writes them at start, and ClusterRole aggregation.

Every object here is what ``kubectl get clusterrole NAME -o yaml`` shows on a 1.34 cluster, up
to its uid, timestamps and resourceVersion: the rules as upstream's golden files list them
(each list sorted, as upstream's rule builder sorts it), the label
``kubernetes.io/bootstrapping: rbac-defaults`` and the annotation
``rbac.authorization.kubernetes.io/autoupdate: "true"``. ``controllerpolicy.py`` holds the
``system:controller:*`` roles, ``namespacepolicy.py`` the Roles of kube-system and kube-public,
``rbacreconcile.py`` how they are written at start.

Feature-gated rules and roles are those of the gates' 1.34 defaults: left out are the
rules of features that were alpha (off) in 1.34 and on in later golden files, the
scheduler's ``create``/``delete`` of ResourceClaims (DRAExtendedResource) and
``system:monitoring``'s ``/statusz`` (ComponentStatusz).

``view``, ``edit`` and ``admin`` are aggregated roles, as upstream: each has an
``aggregationRule`` selecting ClusterRoles by a label
(``rbac.authorization.k8s.io/aggregate-to-<role>: "true"``) and its rules are the
union of theirs, kept by the aggregation controller (``controllers/clusterroles.py``).
The rules come from ``system:aggregate-to-view``, ``-edit`` and ``-admin``; ``view``
itself aggregates to ``edit`` and ``edit`` to ``admin``, so each grants what the one
before grants. A custom ClusterRole labelled ``aggregate-to-view: "true"`` (as a CRD's
operator installs) extends all three; so does ``system:aggregated-metrics-reader``,
which metrics-server installs (the resource metrics, ``api/resourcemetrics.py``, are
served here), with metrics-server's labels rather than the bootstrap ones. None of them
may resize a pod (``pods/resize``): upstream grants that to no default role.

The CertificateSigningRequest roles are among them: an approver role for each built-in
signer (``approve`` on ``signers``), the kubelets' ``nodeclient``/``selfnodeclient`` (which
the approving controller asks about) and ``system:node-bootstrapper`` (to request).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..selectormatch import match_label_selector

__all__ = ["ADDON_ROLES", "AGGREGATE_LABEL", "AUTOUPDATE", "BOOTSTRAP_LABELS", "CLUSTER_ROLES",
           "CLUSTER_ROLE_BINDINGS", "CORE", "EVENTS", "READ", "RW", "SIGNER_NAMES", "WRITE", "aggregated_rules",
           "bootstrap_binding", "bootstrap_role", "group", "rule", "service_account", "urls", "user"]

Obj = dict[str, Any]

AGGREGATE_LABEL = "rbac.authorization.k8s.io/aggregate-to-{}"
AUTOUPDATE = "rbac.authorization.kubernetes.io/autoupdate"
BOOTSTRAP_LABELS = {"kubernetes.io/bootstrapping": "rbac-defaults"}
RBAC_GROUP = "rbac.authorization.k8s.io"

READ = "get list watch"
WRITE = "create delete deletecollection patch update"
RW = f"{READ} {WRITE}"
CORE = [""]  # the legacy API group
AUTHN, AUTHZ = ["authentication.k8s.io"], ["authorization.k8s.io"]
APPS, BATCH, COORDINATION = ["apps"], ["batch"], ["coordination.k8s.io"]
CERTIFICATES, RESOURCE, STORAGE = ["certificates.k8s.io"], ["resource.k8s.io"], ["storage.k8s.io"]


def rule(verbs: str, groups: Sequence[str], resources: str, names: str = "") -> Obj:
    """A resource rule; ``verbs``, ``resources`` and ``names`` are space-separated. Each list is
    sorted and its fields in Go's order (verbs, apiGroups, resources, resourceNames), as
    upstream's ``NewRule(...).RuleOrDie()`` makes them.

    >>> rule("watch get", CORE, "pods", names="p")
    {'verbs': ['get', 'watch'], 'apiGroups': [''], 'resources': ['pods'], 'resourceNames': ['p']}
    """
    out: Obj = {"verbs": sorted(set(verbs.split())), "apiGroups": sorted(set(groups)),
                "resources": sorted(set(resources.split()))}
    if names:
        out["resourceNames"] = sorted(set(names.split()))
    return out


def urls(verbs: str, paths: str) -> Obj:
    """A non-resource rule (``nonResourceURLs``), sorted as ``rule``'s lists."""
    return {"verbs": sorted(set(verbs.split())), "nonResourceURLs": sorted(set(paths.split()))}


EVENTS = rule("create patch update", ["", "events.k8s.io"], "events")  # upstream's eventsRule()


def _metadata(name: str, labels: Mapping[str, str] | None, namespace: str | None = None) -> Obj:
    meta: Obj = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    meta["labels"] = {**BOOTSTRAP_LABELS, **(labels or {})}
    meta["annotations"] = {AUTOUPDATE: "true"}
    return meta


def bootstrap_role(name: str, rules: list[Obj], labels: Mapping[str, str] | None = None,
                 aggregate_from: str | None = None, kind: str = "ClusterRole", namespace: str | None = None) -> Obj:
    """A bootstrap (Cluster)Role: labelled and annotated as upstream's; ``aggregate_from`` makes
    it an aggregated role selecting ``aggregate-to-<aggregate_from>``."""
    role: Obj = {"apiVersion": f"{RBAC_GROUP}/v1", "kind": kind, "metadata": _metadata(name, labels, namespace),
                 "rules": rules or None}  # (none: Go's nil slice, read back as null)
    if aggregate_from is not None:
        role["aggregationRule"] = {"clusterRoleSelectors": [
            {"matchLabels": {AGGREGATE_LABEL.format(aggregate_from): "true"}}]}
    return role


def user(name: str) -> Obj:
    return {"kind": "User", "apiGroup": RBAC_GROUP, "name": name}


def group(name: str) -> Obj:
    return {"kind": "Group", "apiGroup": RBAC_GROUP, "name": name}


def service_account(name: str, namespace: str = "kube-system") -> Obj:
    return {"kind": "ServiceAccount", "name": name, "namespace": namespace}


def bootstrap_binding(name: str, subjects: list[Obj], role: str | None = None, kind: str = "ClusterRoleBinding",
                    namespace: str | None = None) -> Obj:
    """A bootstrap (Cluster)RoleBinding of ``role`` (by default the ClusterRole, or in a
    namespace the Role, of the binding's name) to ``subjects``; none makes no ``subjects`` field,
    as upstream's ``system:node`` binding has none."""
    ref_kind = "Role" if kind == "RoleBinding" else "ClusterRole"
    binding: Obj = {"apiVersion": f"{RBAC_GROUP}/v1", "kind": kind, "metadata": _metadata(name, None, namespace),
                    "roleRef": {"apiGroup": RBAC_GROUP, "kind": ref_kind, "name": role or name}}
    if subjects:
        binding["subjects"] = subjects
    return binding


def _aggregate_to(*roles: str) -> dict[str, str]:
    return {AGGREGATE_LABEL.format(r): "true" for r in roles}


SIGNER_NAMES = ("kubernetes.io/kube-apiserver-client", "kubernetes.io/kube-apiserver-client-kubelet",
                "kubernetes.io/kubelet-serving", "kubernetes.io/legacy-unknown")


def _approver(signer: str) -> Obj:
    """``system:certificates.k8s.io:<signer>-approver``: may approve the signer's requests
    (api/certificateadmission.py asks), bound to no one by default."""
    return bootstrap_role(f"system:certificates.k8s.io:{signer.split('/')[1]}-approver",
                        [rule("approve", CERTIFICATES, "signers", names=signer)])


_VIEW = bootstrap_role("system:aggregate-to-view", [
    rule(READ, CORE, "configmaps endpoints persistentvolumeclaims persistentvolumeclaims/status pods "
                     "replicationcontrollers replicationcontrollers/scale serviceaccounts services services/status"),
    rule(READ, CORE, "bindings limitranges namespaces/status pods/log pods/status replicationcontrollers/status "
                     "resourcequotas resourcequotas/status"),
    # reading namespaces at the namespace scope is reading *this* namespace (which ones a user may see)
    rule(READ, CORE, "namespaces"),
    rule(READ, ["", "events.k8s.io"], "events"),
    rule(READ, ["discovery.k8s.io"], "endpointslices"),
    rule(READ, APPS, "controllerrevisions daemonsets daemonsets/status deployments deployments/scale "
                     "deployments/status replicasets replicasets/scale replicasets/status statefulsets "
                     "statefulsets/scale statefulsets/status"),
    rule(READ, ["autoscaling"], "horizontalpodautoscalers horizontalpodautoscalers/status"),
    rule(READ, BATCH, "cronjobs cronjobs/status jobs jobs/status"),
    rule(READ, ["extensions"], "daemonsets daemonsets/status deployments deployments/scale deployments/status "
                               "ingresses ingresses/status networkpolicies replicasets replicasets/scale "
                               "replicasets/status replicationcontrollers/scale"),
    rule(READ, ["policy"], "poddisruptionbudgets poddisruptionbudgets/status"),
    rule(READ, ["networking.k8s.io"], "ingresses ingresses/status networkpolicies"),
    rule(READ, RESOURCE, "resourceclaims resourceclaims/status resourceclaimtemplates"),
], _aggregate_to("view"))

_EDIT = bootstrap_role("system:aggregate-to-edit", [
    # reading what could escalate: secrets, and the subresources that reach into pods
    rule(READ, CORE, "pods/attach pods/exec pods/portforward pods/proxy secrets services/proxy"),
    rule("impersonate", CORE, "serviceaccounts"),
    rule(WRITE, CORE, "pods pods/attach pods/exec pods/portforward pods/proxy"),
    rule("create", CORE, "pods/eviction"),
    # not endpoints, since upstream's 1.22 (CVE-2021-25740)
    rule(WRITE, CORE, "configmaps persistentvolumeclaims replicationcontrollers replicationcontrollers/scale "
                      "secrets serviceaccounts services services/proxy"),
    rule("create", CORE, "serviceaccounts/token"),
    rule(WRITE, ["", "events.k8s.io"], "events"),
    rule(WRITE, APPS, "daemonsets deployments deployments/rollback deployments/scale replicasets replicasets/scale "
                      "statefulsets statefulsets/scale"),
    rule(WRITE, ["autoscaling"], "horizontalpodautoscalers"),
    rule(WRITE, BATCH, "cronjobs jobs"),
    rule(WRITE, ["extensions"], "daemonsets deployments deployments/rollback deployments/scale ingresses "
                                "networkpolicies replicasets replicasets/scale replicationcontrollers/scale"),
    rule(WRITE, ["policy"], "poddisruptionbudgets"),
    rule(WRITE, ["networking.k8s.io"], "ingresses networkpolicies"),
    rule(RW, COORDINATION, "leases"),
    rule(WRITE, RESOURCE, "resourceclaims resourceclaimtemplates"),
], _aggregate_to("edit"))

_ADMIN = bootstrap_role("system:aggregate-to-admin", [
    rule("create", AUTHZ, "localsubjectaccessreviews"),
    rule(RW, [RBAC_GROUP], "rolebindings roles"),
], _aggregate_to("admin"))

# what the kubelets need to run their pods (the Node authorizer and NodeRestriction narrow it upstream)
_NODE = bootstrap_role("system:node", [
    rule("create", AUTHN, "tokenreviews"),
    rule("create", AUTHZ, "localsubjectaccessreviews subjectaccessreviews"),
    rule(READ, CORE, "services"),
    rule("create get list watch", CORE, "nodes"),
    rule("patch update", CORE, "nodes/status"),
    rule("patch update", CORE, "nodes"),
    EVENTS,
    rule(READ, CORE, "pods"),
    rule("create delete", CORE, "pods"),  # mirror pods
    rule("patch update", CORE, "pods/status"),
    rule("create", CORE, "pods/eviction"),
    rule(READ, CORE, "configmaps secrets"),
    rule("get", CORE, "persistentvolumeclaims persistentvolumes"),
    rule("get", CORE, "endpoints"),
    rule("create get list watch", CERTIFICATES, "certificatesigningrequests"),
    rule("create delete get patch update", COORDINATION, "leases"),
    rule("get", STORAGE, "volumeattachments"),
    rule("create", CORE, "serviceaccounts/token"),
    rule("get patch update", CORE, "persistentvolumeclaims/status"),
    rule(READ, STORAGE, "csidrivers"),
    rule("create delete get patch update", STORAGE, "csinodes"),
    rule(READ, ["node.k8s.io"], "runtimeclasses"),
    rule("get", RESOURCE, "resourceclaims"),
    rule("deletecollection", RESOURCE, "resourceslices"),
    rule("get", CORE, "serviceaccounts"),
    rule(READ, CERTIFICATES, "clustertrustbundles"),  # the clusterTrustBundle projected volume
    # the podCertificate projected volume (GA in 1.37): a kubelet asks, then watches for the chain
    # (upstream's NodeRules has a rule for them; these verbs are the kubelet's needs, not read from it)
    rule("create get list watch", CERTIFICATES, "podcertificaterequests"),
])

_SCHEDULER = bootstrap_role("system:kube-scheduler", [
    EVENTS,
    rule("create", COORDINATION, "leases"),  # leader election
    rule("get list update watch", COORDINATION, "leases", names="kube-scheduler"),
    rule(RW, COORDINATION, "leasecandidates"),
    rule(READ, CORE, "nodes"),
    rule("delete get list watch", CORE, "pods"),
    rule("create", CORE, "bindings pods/binding"),
    rule("patch update", CORE, "pods/status"),
    rule(READ, CORE, "replicationcontrollers services"),
    rule(READ, ["apps", "extensions"], "replicasets"),
    rule(READ, APPS, "statefulsets"),
    rule(READ, ["policy"], "poddisruptionbudgets"),
    rule(READ, CORE, "persistentvolumeclaims persistentvolumes"),
    rule("create", AUTHN, "tokenreviews"),  # (delegated authentication and authorization)
    rule("create", AUTHZ, "subjectaccessreviews"),
    rule(READ, STORAGE, "csinodes"),
    rule(READ, STORAGE, "volumeattachments"),
    rule(READ, CORE, "namespaces"),
    rule(READ, STORAGE, "csidrivers"),
    rule(READ, STORAGE, "csistoragecapacities"),
    rule(READ, RESOURCE, "deviceclasses"),  # dynamic resource allocation, GA in 1.34
    rule(f"{READ} patch update", RESOURCE, "resourceclaims"),
    rule(f"{READ} patch update", RESOURCE, "resourceclaims/status"),
    rule("update", CORE, "pods/finalizers"),
    rule(READ, RESOURCE, "resourceslices"),
    rule(READ, RESOURCE, "devicetaintrules"),  # DRADeviceTaintRules, GA in 1.37: rules taint devices
])

CLUSTER_ROLES: tuple[Obj, ...] = (
    bootstrap_role("admin", [], aggregate_from="admin"),
    bootstrap_role("cluster-admin", [rule("*", ["*"], "*"), urls("*", "*")]),
    bootstrap_role("edit", [], _aggregate_to("admin"), aggregate_from="edit"),
    _ADMIN, _EDIT, _VIEW,
    bootstrap_role("system:auth-delegator", [rule("create", AUTHN, "tokenreviews"),
                                           rule("create", AUTHZ, "subjectaccessreviews")]),
    bootstrap_role("system:basic-user", [rule("create", AUTHZ, "selfsubjectaccessreviews selfsubjectrulesreviews"),
                                       rule("create", AUTHN, "selfsubjectreviews")]),
    *(bootstrap_role(f"system:certificates.k8s.io:certificatesigningrequests:{kind}",
                   [rule("create", CERTIFICATES, f"certificatesigningrequests/{kind}")])
      for kind in ("nodeclient", "selfnodeclient")),
    *(_approver(signer) for signer in SIGNER_NAMES),
    # every service account may read the trust anchors a pod can mount (ClusterTrustBundle, GA in 1.37)
    bootstrap_role("system:cluster-trust-bundle-discovery", [rule(READ, CERTIFICATES, "clustertrustbundles")]),
    bootstrap_role("system:discovery", [urls("get", "/api /api/* /apis /apis/* /healthz /livez /openapi /openapi/* "
                                                  "/readyz /version /version/")]),
    bootstrap_role("system:heapster", [rule(READ, CORE, "events namespaces nodes pods"),
                                     rule(READ, ["extensions"], "deployments")]),
    bootstrap_role("system:kube-aggregator", [rule(READ, CORE, "endpoints services")]),
    bootstrap_role("system:kube-controller-manager", [
        EVENTS,
        rule("create", COORDINATION, "leases"),
        rule("get update", COORDINATION, "leases", names="kube-controller-manager"),
        rule("create", CORE, "secrets serviceaccounts"),  # the controllers' own service accounts and tokens
        rule("delete", CORE, "secrets"),
        rule("get", CORE, "configmaps namespaces secrets serviceaccounts"),
        rule("update", CORE, "secrets serviceaccounts"),
        rule("create", AUTHN, "tokenreviews"),
        rule("create", AUTHZ, "subjectaccessreviews"),
        rule("list watch", ["*"], "*"),  # every shared informer
        rule("create", CORE, "serviceaccounts/token"),
    ]),
    bootstrap_role("system:kube-dns", [rule("list watch", CORE, "endpoints services")]),
    _SCHEDULER,
    bootstrap_role("system:kubelet-api-admin", [
        rule(READ, CORE, "nodes"),
        rule("proxy", CORE, "nodes"),
        rule("*", CORE, "nodes/log nodes/metrics nodes/proxy nodes/stats"),
        rule("*", CORE, "nodes/configz nodes/healthz nodes/pods"),
    ]),
    # /metrics and the health checks' details (the API server's and the kubelets')
    bootstrap_role("system:monitoring", [
        urls("get", "/healthz /healthz/* /livez /livez/* /metrics /metrics/slis /readyz /readyz/*"),
        rule("get", CORE, "nodes/metrics"),
    ]),
    _NODE,
    bootstrap_role("system:node-bootstrapper", [rule("create get list watch", CERTIFICATES,
                                                   "certificatesigningrequests")]),
    bootstrap_role("system:node-problem-detector", [rule("get", CORE, "nodes"), rule("patch", CORE, "nodes/status"),
                                                  EVENTS]),
    bootstrap_role("system:node-proxier", [
        rule("list watch", CORE, "endpoints services"),
        rule(READ, CORE, "nodes"),
        EVENTS,
        rule("list watch", ["networking.k8s.io"], "servicecidrs"),
        rule("list watch", ["discovery.k8s.io"], "endpointslices"),
    ]),
    bootstrap_role("system:persistent-volume-provisioner", [
        rule("create delete get list watch", CORE, "persistentvolumes"),
        rule("get list update watch", CORE, "persistentvolumeclaims"),
        rule(READ, STORAGE, "storageclasses"),
        rule("watch", CORE, "events"),
        EVENTS,
    ]),
    bootstrap_role("system:public-info-viewer", [urls("get", "/healthz /livez /readyz /version /version/")]),
    # the service account issuer's discovery documents (api/oidc.py)
    bootstrap_role("system:service-account-issuer-discovery", [
        urls("get", "/.well-known/openid-configuration /.well-known/openid-configuration/ /openid/v1/jwks "
                    "/openid/v1/jwks/")]),
    bootstrap_role("system:volume-scheduler", [
        rule("get list patch update watch", CORE, "persistentvolumes"),
        rule(READ, STORAGE, "storageclasses"),
        rule("get list patch update watch", CORE, "persistentvolumeclaims"),
    ]),
    bootstrap_role("view", [], _aggregate_to("edit"), aggregate_from="view"),
)

CLUSTER_ROLE_BINDINGS: tuple[Obj, ...] = (
    bootstrap_binding("cluster-admin", [group("system:masters")]),
    bootstrap_binding("system:basic-user", [group("system:authenticated")]),
    bootstrap_binding("system:cluster-trust-bundle-discovery", [group("system:serviceaccounts")]),
    bootstrap_binding("system:discovery", [group("system:authenticated")]),
    bootstrap_binding("system:kube-controller-manager", [user("system:kube-controller-manager")]),
    bootstrap_binding("system:kube-dns", [service_account("kube-dns")]),
    bootstrap_binding("system:kube-scheduler", [user("system:kube-scheduler")]),
    bootstrap_binding("system:monitoring", [group("system:monitoring")]),
    bootstrap_binding("system:node", []),  # the Node authorizer's business since 1.8
    bootstrap_binding("system:node-proxier", [user("system:kube-proxy")]),
    bootstrap_binding("system:public-info-viewer", [group("system:authenticated"), group("system:unauthenticated")]),
    bootstrap_binding("system:service-account-issuer-discovery", [group("system:serviceaccounts")]),
    bootstrap_binding("system:volume-scheduler", [user("system:kube-scheduler")]),
)

# not upstream's bootstrap policy but metrics-server's manifest: the resource metrics for view, edit and admin
ADDON_ROLES: tuple[Obj, ...] = ({
    "apiVersion": f"{RBAC_GROUP}/v1", "kind": "ClusterRole",
    "metadata": {"name": "system:aggregated-metrics-reader",
                 "labels": {"k8s-app": "metrics-server", **_aggregate_to("view", "edit", "admin")}},
    "rules": [rule(READ, ["metrics.k8s.io"], "pods nodes")]},)


def aggregated_rules(role: Mapping[str, Any], roles: Iterable[Mapping[str, Any]]) -> list[Obj] | None:
    """The rules an aggregated ClusterRole should hold: those of every other ClusterRole
    one of its selectors matches, in name order, each once. None if it aggregates nothing."""
    aggregation = role.get("aggregationRule")
    if not isinstance(aggregation, dict):
        return None
    selectors = [s for s in aggregation.get("clusterRoleSelectors") or () if isinstance(s, dict)]
    name = (role.get("metadata") or {}).get("name")
    out: list[Obj] = []
    for other in sorted(roles, key=lambda r: str((r.get("metadata") or {}).get("name", ""))):
        meta = other.get("metadata") or {}
        if meta.get("name") == name or not any(match_label_selector(s, meta.get("labels") or {}) for s in selectors):
            continue
        for r in other.get("rules") or ():
            if r not in out:
                out.append(dict(r))
    return out
