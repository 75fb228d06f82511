"""Resource types: what the API server serves, declared once.

Each ``ResourceType`` says where its objects live in the URL space and in the
store, and what discovery says about it. Adding a resource is a declaration
here (plus, later, its strategy: validation, defaulting, status split).

Storage keys follow kube-apiserver's layout, so the codec's per-prefix
dictionaries split the same way etcd's data does::

    /registry/<plural>/<namespace>/<name>     namespaced, built-in group
    /registry/<plural>/<name>                 cluster-scoped, built-in group
    /registry/<group>/<plural>/...            custom resources
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .versions import priority

if TYPE_CHECKING:
    from .custom import CustomVersion

__all__ = ["BUILTIN", "Registry", "ResourceType"]

_PREFIXES_MAX = 4096  # namespaces a type remembers the prefix of (past that, it starts again)

ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


@dataclass(frozen=True, slots=True)
class ResourceType:
    group: str            # "" for the core group
    version: str
    kind: str
    plural: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ALL_VERBS
    storage_group: str | None = None  # set for custom resources: keys under /registry/<group>/
    singular: str = field(default="")
    # what a served version of a CustomResourceDefinition adds (schema, printer
    # columns); None for built-in types
    custom: CustomVersion | None = field(default=None, compare=False)
    # prefix() by namespace (None: the type's), made once: every write and read needs a key
    _prefixes: dict[str | None, bytes] = field(default_factory=dict, init=False, compare=False, repr=False)

    @property
    def group_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def api_version(self) -> str:
        return self.group_version

    @property
    def list_kind(self) -> str:
        return self.custom.list_kind if self.custom is not None and self.custom.list_kind else self.kind + "List"

    @property
    def fields_key(self) -> str:
        """What the selectable fields of this type's objects are known by (``selectors.selectable_fields``):
        its plural, or a custom resource's ``custom_fields_key``."""
        return self.custom.fields_key if self.custom is not None and self.custom.fields_key else self.plural

    @property
    def singular_name(self) -> str:
        return self.singular or self.kind.lower()

    def prefix(self, namespace: str | None = None) -> bytes:
        """The store prefix of this type's objects (in one namespace, if given)."""
        prefixes = self._prefixes
        made = prefixes.get(namespace)
        if made is None:
            base = f"/registry/{self.storage_group}/{self.plural}/" if self.storage_group else \
                f"/registry/{self.plural}/"
            if self.namespaced and namespace:
                base += namespace + "/"
            made = base.encode()
            if len(prefixes) >= _PREFIXES_MAX:
                prefixes.clear()
            prefixes[namespace] = made
        return made

    def key(self, namespace: str | None, name: str) -> bytes:
        return self.prefix(namespace if self.namespaced else None) + name.encode()


def _core(kind: str, plural: str, namespaced: bool = True, **kw: object) -> ResourceType:
    return ResourceType("", "v1", kind, plural, namespaced, **kw)  # type: ignore[arg-type]


BUILTIN: tuple[ResourceType, ...] = (
    _core("Namespace", "namespaces", False, short_names=("ns",), subresources=("status", "finalize"),
          verbs=tuple(v for v in ALL_VERBS if v != "deletecollection")),  # as upstream: no collection delete
    _core("Pod", "pods", short_names=("po",), categories=("all",),
          subresources=("status", "binding", "eviction", "log", "ephemeralcontainers", "resize", "exec", "attach",
                        "portforward", "proxy")),
    _core("Node", "nodes", False, short_names=("no",), subresources=("status", "proxy")),
    _core("Service", "services", short_names=("svc",), categories=("all",), subresources=("status", "proxy")),
    _core("Endpoints", "endpoints", short_names=("ep",), singular="endpoints"),
    _core("ConfigMap", "configmaps", short_names=("cm",)),
    _core("Secret", "secrets"),
    _core("ServiceAccount", "serviceaccounts", short_names=("sa",), subresources=("token",)),
    _core("ReplicationController", "replicationcontrollers", short_names=("rc",), categories=("all",),
          subresources=("status", "scale")),
    _core("Event", "events", short_names=("ev",)),
    # volumes: registry/volumes.py; bound by controllers/volumes.py
    _core("PersistentVolumeClaim", "persistentvolumeclaims", short_names=("pvc",), subresources=("status",)),
    _core("PersistentVolume", "persistentvolumes", False, short_names=("pv",), subresources=("status",)),
    # quotas: registry/quota.py
    _core("ResourceQuota", "resourcequotas", short_names=("quota",), subresources=("status",)),
    _core("LimitRange", "limitranges", short_names=("limits",)),
    _core("PodTemplate", "podtemplates"),
    # never stored: a Binding binds the pod it names (the legacy form of pods/binding, api/rest.py)
    _core("Binding", "bindings", verbs=("create",)),
    # never stored: computed on each read (api/componentstatus.py); deprecated upstream since 1.19
    _core("ComponentStatus", "componentstatuses", False, short_names=("cs",), verbs=("get", "list")),
    ResourceType("coordination.k8s.io", "v1", "Lease", "leases", True),
    # stored with core/v1 Events (/registry/events/), converted: registry/conversion.py
    ResourceType("events.k8s.io", "v1", "Event", "events", True, short_names=("ev",)),
    ResourceType("apps", "v1", "Deployment", "deployments", True, short_names=("deploy",), categories=("all",),
                 subresources=("status", "scale")),
    ResourceType("apps", "v1", "ReplicaSet", "replicasets", True, short_names=("rs",), categories=("all",),
                 subresources=("status", "scale")),
    ResourceType("apps", "v1", "DaemonSet", "daemonsets", True, short_names=("ds",), categories=("all",),
                 subresources=("status",)),
    ResourceType("apps", "v1", "StatefulSet", "statefulsets", True, short_names=("sts",), categories=("all",),
                 subresources=("status", "scale")),
    ResourceType("apps", "v1", "ControllerRevision", "controllerrevisions", True),
    ResourceType("batch", "v1", "Job", "jobs", True, categories=("all",), subresources=("status",)),
    ResourceType("batch", "v1", "CronJob", "cronjobs", True, short_names=("cj",), categories=("all",),
                 subresources=("status",)),
    ResourceType("scheduling.k8s.io", "v1", "PriorityClass", "priorityclasses", False, short_names=("pc",)),
    # enforced by pods/eviction (api/disruption.py), its status kept by controllers/disruption.py
    ResourceType("policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets", True, short_names=("pdb",),
                 subresources=("status",)),
    ResourceType("autoscaling", "v2", "HorizontalPodAutoscaler", "horizontalpodautoscalers", True,
                 short_names=("hpa",), categories=("all",), subresources=("status",)),
    # stored as autoscaling/v2, converted: registry/conversion.py
    ResourceType("autoscaling", "v1", "HorizontalPodAutoscaler", "horizontalpodautoscalers", True,
                 short_names=("hpa",), categories=("all",), subresources=("status",)),
    # networking: registry/networking.py
    ResourceType("networking.k8s.io", "v1", "Ingress", "ingresses", True, short_names=("ing",),
                 subresources=("status",)),
    ResourceType("networking.k8s.io", "v1", "IngressClass", "ingressclasses", False),
    ResourceType("networking.k8s.io", "v1", "NetworkPolicy", "networkpolicies", True, short_names=("netpol",)),
    # Service IP ranges and allocated cluster IPs (registry/servicecidrs.py; written by api/allocations.py)
    ResourceType("networking.k8s.io", "v1", "ServiceCIDR", "servicecidrs", False, subresources=("status",)),
    ResourceType("networking.k8s.io", "v1", "IPAddress", "ipaddresses", False),
    ResourceType("discovery.k8s.io", "v1", "EndpointSlice", "endpointslices", True),
    ResourceType("storage.k8s.io", "v1", "StorageClass", "storageclasses", False, short_names=("sc",)),
    # the CSI objects: registry/csi.py; a simulated kubelet registers its node's CSINode (nodes/simulator.py)
    ResourceType("storage.k8s.io", "v1", "CSIDriver", "csidrivers", False),
    ResourceType("storage.k8s.io", "v1", "CSINode", "csinodes", False),
    ResourceType("storage.k8s.io", "v1", "CSIStorageCapacity", "csistoragecapacities", True),
    ResourceType("storage.k8s.io", "v1", "VolumeAttachment", "volumeattachments", False, subresources=("status",)),
    ResourceType("storage.k8s.io", "v1", "VolumeAttributesClass", "volumeattributesclasses", False,
                 short_names=("vac",)),
    # issued by the signer, controllers/certificates.py (registry/certificates.py)
    ResourceType("certificates.k8s.io", "v1", "CertificateSigningRequest", "certificatesigningrequests", False,
                 short_names=("csr",), subresources=("status", "approval")),
    # trust anchors, validated (registry/trustbundles.py), attested by signer (api/certificateadmission.py)
    ResourceType("certificates.k8s.io", "v1", "ClusterTrustBundle", "clustertrustbundles", False),
    # a pod's kubelet asks a signer for its podCertificate volume; validated, the status's
    # rules and the signer's "sign" checked (registry/podcertificates.py), NodeRestriction's
    # checks of a kubelet's request (api/nodeauthz.py)
    ResourceType("certificates.k8s.io", "v1", "PodCertificateRequest", "podcertificaterequests", True,
                 subresources=("status",)),
    ResourceType("node.k8s.io", "v1", "RuntimeClass", "runtimeclasses", False),
    # run by controllers/storagemigration.py (registry/storagemigration.py)
    ResourceType("storagemigration.k8s.io", "v1", "StorageVersionMigration", "storageversionmigrations", False,
                 subresources=("status",)),
    # webhook configurations: stored and served, never called (registry/webhooks.py)
    ResourceType("admissionregistration.k8s.io", "v1", "MutatingWebhookConfiguration",
                 "mutatingwebhookconfigurations", False, categories=("api-extensions",)),
    ResourceType("admissionregistration.k8s.io", "v1", "ValidatingWebhookConfiguration",
                 "validatingwebhookconfigurations", False, categories=("api-extensions",)),
    # enforced at every write: api/admissionpolicy.py
    ResourceType("admissionregistration.k8s.io", "v1", "ValidatingAdmissionPolicy", "validatingadmissionpolicies",
                 False, categories=("api-extensions",), subresources=("status",)),
    ResourceType("admissionregistration.k8s.io", "v1", "ValidatingAdmissionPolicyBinding",
                 "validatingadmissionpolicybindings", False, categories=("api-extensions",)),
    # applied in the mutating phase of every write: api/mutatingpolicy.py
    ResourceType("admissionregistration.k8s.io", "v1", "MutatingAdmissionPolicy", "mutatingadmissionpolicies",
                 False, categories=("api-extensions",)),
    ResourceType("admissionregistration.k8s.io", "v1", "MutatingAdmissionPolicyBinding",
                 "mutatingadmissionpolicybindings", False, categories=("api-extensions",)),
    ResourceType("rbac.authorization.k8s.io", "v1", "Role", "roles", True),
    ResourceType("rbac.authorization.k8s.io", "v1", "RoleBinding", "rolebindings", True),
    ResourceType("rbac.authorization.k8s.io", "v1", "ClusterRole", "clusterroles", False),
    ResourceType("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding", "clusterrolebindings", False),
    ResourceType("scheduling.k8s.io", "v1beta1", "Workload", "workloads", True),
    ResourceType("scheduling.k8s.io", "v1beta1", "PodGroup", "podgroups", True, subresources=("status",)),
    ResourceType("resource.k8s.io", "v1", "DeviceClass", "deviceclasses", False),
    ResourceType("resource.k8s.io", "v1", "ResourceSlice", "resourceslices", False),
    ResourceType("resource.k8s.io", "v1", "ResourceClaim", "resourceclaims", True, subresources=("status",)),
    ResourceType("resource.k8s.io", "v1", "ResourceClaimTemplate", "resourceclaimtemplates", True),
    # taints put on the devices a rule selects (registry/devicetaintrules.py)
    ResourceType("resource.k8s.io", "v1", "DeviceTaintRule", "devicetaintrules", False, subresources=("status",)),
    # reviews: answered, never stored (api/reviews.py)
    ResourceType("authorization.k8s.io", "v1", "SelfSubjectAccessReview", "selfsubjectaccessreviews", False,
                 verbs=("create",)),
    ResourceType("authorization.k8s.io", "v1", "SelfSubjectRulesReview", "selfsubjectrulesreviews", False,
                 verbs=("create",)),
    ResourceType("authentication.k8s.io", "v1", "SelfSubjectReview", "selfsubjectreviews", False,
                 verbs=("create",)),
    ResourceType("authorization.k8s.io", "v1", "SubjectAccessReview", "subjectaccessreviews", False,
                 verbs=("create",)),
    ResourceType("authorization.k8s.io", "v1", "LocalSubjectAccessReview", "localsubjectaccessreviews", True,
                 verbs=("create",)),
    ResourceType("authentication.k8s.io", "v1", "TokenReview", "tokenreviews", False, verbs=("create",)),
    # bulk lease renewals for simulated nodes: answered, never stored (api/leaserenewals.py)
    ResourceType("nodes.controlplane.dev", "v1alpha1", "LeaseRenewal", "leaserenewals", True, verbs=("create",)),
    # bulk node status reports for simulated nodes: answered, never stored (api/nodereports.py)
    ResourceType("nodes.controlplane.dev", "v1alpha1", "NodeStatusReport", "nodestatusreports", False,
                 verbs=("create",)),
    # the resource metrics API: answered from the pods and nodes, never stored (api/resourcemetrics.py)
    ResourceType("metrics.k8s.io", "v1beta1", "NodeMetrics", "nodes", False, verbs=("get", "list"),
                 storage_group="metrics.k8s.io"),
    ResourceType("metrics.k8s.io", "v1beta1", "PodMetrics", "pods", True, verbs=("get", "list"),
                 storage_group="metrics.k8s.io"),
    ResourceType("apiextensions.k8s.io", "v1", "CustomResourceDefinition", "customresourcedefinitions", False,
                 short_names=("crd", "crds"), categories=("api-extensions",), subresources=("status",)),
    # one local APIService per served group/version; others stored, never proxied to (registry/apiservices.py)
    ResourceType("apiregistration.k8s.io", "v1", "APIService", "apiservices", False,
                 categories=("api-extensions",), subresources=("status",)),
    # API Priority and Fairness's configuration: stored and kept, never applied (registry/flowcontrol.py)
    ResourceType("flowcontrol.apiserver.k8s.io", "v1", "FlowSchema", "flowschemas", False, subresources=("status",)),
    ResourceType("flowcontrol.apiserver.k8s.io", "v1", "PriorityLevelConfiguration", "prioritylevelconfigurations",
                 False, subresources=("status",)),
)


class Registry:
    """The served types, found by (group, version, plural), by kind, and by group.

    Custom resources come and go with their CustomResourceDefinitions (``add``,
    ``remove``); the versions of their groups are kept in version priority order.
    A built-in type is never replaced or removed by a custom one."""

    def __init__(self, types: Iterable[ResourceType] = BUILTIN) -> None:
        self._by_path: dict[tuple[str, str, str], ResourceType] = {}
        self._groups: dict[str, list[str]] = {}
        for t in types:
            self.add(t)

    def add(self, t: ResourceType) -> bool:
        """Serve ``t``; False (and nothing changes) if a built-in type has its path."""
        path = (t.group, t.version, t.plural)
        held = self._by_path.get(path)
        if held is not None and held.custom is None and t.custom is not None:
            return False
        self._by_path[path] = t
        versions = self._groups.setdefault(t.group, [])
        if t.version not in versions:
            versions.append(t.version)
            if t.custom is not None:
                versions.sort(key=priority)
        return True

    def remove(self, t: ResourceType) -> None:
        """Stop serving ``t`` (if it is still the type at its path)."""
        path = (t.group, t.version, t.plural)
        if self._by_path.get(path) is not t:
            return
        del self._by_path[path]
        if not any(g == t.group and v == t.version for g, v, _ in self._by_path):
            versions = self._groups[t.group]
            versions.remove(t.version)
            if not versions:
                del self._groups[t.group]

    def get(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self._by_path.get((group, version, plural))

    def all(self) -> list[ResourceType]:
        return list(self._by_path.values())

    def in_group_version(self, group: str, version: str) -> Iterator[ResourceType]:
        return (t for (g, v, _), t in self._by_path.items() if g == group and v == version)

    def groups(self) -> dict[str, list[str]]:
        """group -> its versions, preferred first (the core group is "")."""
        return {g: list(v) for g, v in self._groups.items()}
