"""Well-known label, annotation, taint and finalizer names (Karpenter's and Kubernetes')."""

from __future__ import annotations

from ..nodes.config import SimConfig

__all__ = ["ALLOW_UNDEFINED", "ARCH", "CAPACITY_TYPE", "DISRUPTED_TAINT", "DO_NOT_DISRUPT", "EPHEMERAL_TAINTS",
           "FAKE_NODE_ANNOTATION", "PROVIDER_DOMAINS", "may_be_undefined",
           "HOSTNAME",
           "INITIALIZED", "INSTANCE_TYPE", "NODEPOOL", "OS", "RACK", "RACKS_PER_ZONE", "REGION", "REGION_NAME",
           "REGISTERED", "TERMINATION_FINALIZER", "WELL_KNOWN", "ZONE", "custom_label", "device_resource",
           "rack_name"]

INSTANCE_TYPE = "node.kubernetes.io/instance-type"
ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
RACK = "topology.controlplane.io/rack"
# the node simulator's topology, which launched nodes share: one region, racks named after their zone
REGION_NAME = "region-1"
RACKS_PER_ZONE = SimConfig.racks_per_zone
ARCH = "kubernetes.io/arch"
OS = "kubernetes.io/os"
HOSTNAME = "kubernetes.io/hostname"
CAPACITY_TYPE = "karpenter.sh/capacity-type"
NODEPOOL = "karpenter.sh/nodepool"
REGISTERED = "karpenter.sh/registered"
INITIALIZED = "karpenter.sh/initialized"
DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"
TERMINATION_FINALIZER = "karpenter.sh/termination"
# Karpenter taints a node it is about to disrupt, so nothing new lands on it
DISRUPTED_TAINT = {"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}
# Karpenter's KnownEphemeralTaints, (key, effect): put on a node while it starts (kube-apiserver's
# TaintNodesByCondition, the node lifecycle controller, an external cloud provider, Karpenter's
# registration) and expected to go, so not held against a node of a NodePool's until it is initialized
EPHEMERAL_TAINTS = frozenset({("node.kubernetes.io/not-ready", "NoSchedule"),
                              ("node.kubernetes.io/not-ready", "NoExecute"),
                              ("node.kubernetes.io/unreachable", "NoSchedule"),
                              ("node.cloudprovider.kubernetes.io/uninitialized", "NoSchedule"),
                              ("karpenter.sh/unregistered", "NoExecute")})
# the node simulator (controlplane.nodes) adopts every Node with this annotation, as KWOK does
FAKE_NODE_ANNOTATION = "kwok.x-k8s.io/node"


# labels the cloud provider (the launcher) or the kubelet sets from the offering, the node or the
# NodePool: a requirement on one of them gives a NodeClaim no label of its own (Karpenter's
# WellKnownLabels and RestrictedLabels)
WELL_KNOWN = frozenset((INSTANCE_TYPE, ZONE, REGION, RACK, ARCH, OS, HOSTNAME, CAPACITY_TYPE, NODEPOOL, REGISTERED,
                        INITIALIZED, "node.kubernetes.io/windows-build"))

# Karpenter's WellKnownLabels (pkg/apis/v1/labels.go), with the labels this emulator's provider
# gives every node (region, rack), as KWOK's provider adds its karpenter.kwok.sh/instance-* ones: a
# pod may require them of a new node whose NodePool names them not. Any other label a pod requires
# (In, Exists, Gt, Lt) must be one its NodePool's requirements or template labels define, or the
# NodePool cannot provision for it: Karpenter's 'label "k" does not have known values'.
ALLOW_UNDEFINED = frozenset((NODEPOOL, ZONE, REGION, INSTANCE_TYPE, ARCH, OS, CAPACITY_TYPE,
                             "node.kubernetes.io/windows-build", RACK))
# the cloud providers' own label domains, whose labels each registers as well-known
# (karpenter.kwok.sh/instance-family, karpenter.k8s.aws/instance-generation, ...)
PROVIDER_DOMAINS = ("karpenter.kwok.sh", "karpenter.k8s.aws", "karpenter.azure.com")


def may_be_undefined(key: str) -> bool:
    """Whether a pod may require label ``key`` of a NodePool that does not define it."""
    return key in ALLOW_UNDEFINED or key.partition("/")[0] in PROVIDER_DOMAINS

# Karpenter's RestrictedLabelDomains and their LabelDomainExceptions (pkg/apis/v1/labels.go)
RESTRICTED_DOMAINS = ("kubernetes.io", "k8s.io", "karpenter.sh")
DOMAIN_EXCEPTIONS = ("node.kubernetes.io", "node-restriction.kubernetes.io", "kops.k8s.io")


def _in_domain(domain: str, suffixes: tuple[str, ...]) -> bool:
    return any(domain == d or domain.endswith("." + d) for d in suffixes)


def custom_label(key: str) -> bool:
    """Whether ``key`` is a label of the user's, which a NodeClaim gets from its requirements:
    not a well-known one, and not in a restricted domain (``kubernetes.io``, ``k8s.io``,
    ``karpenter.sh`` and their subdomains) unless in one of its exceptions, as Karpenter's
    ``IsRestrictedNodeLabel``: ``failure-domain.beta.kubernetes.io/zone`` is not copied (it
    could contradict the zone launched), ``node-restriction.kubernetes.io/team`` is."""
    if key in WELL_KNOWN:
        return False
    domain = key.partition("/")[0] if "/" in key else ""
    return _in_domain(domain, DOMAIN_EXCEPTIONS) or not _in_domain(domain, RESTRICTED_DOMAINS)


def rack_name(zone: str, index: int) -> str:
    """Rack ``index`` of ``zone``, named as the node simulator names its own
    (``zone-a-rack-3``): a rack lies in one zone."""
    return f"{zone}-rack-{index % RACKS_PER_ZONE}"


def device_resource(driver: str) -> str:
    """The pseudo resource counting a node's DRA devices of ``driver`` in the
    simulation (``devices/gpu.nvidia.com``): never written to a Node."""
    return f"devices/{driver}"
