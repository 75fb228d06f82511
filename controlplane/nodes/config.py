"""The node simulator's settings, with upstream's defaults where upstream has one."""

from __future__ import annotations

from dataclasses import dataclass, field

from .images import ImageCatalog
from .instancetypes import CREATED_NODE_TYPE, DEFAULT_CATALOG, InstanceType
from .stages import Stage

__all__ = ["FAKE_NODE_ANNOTATION", "FAKE_SELECTOR", "FAILURE_ANNOTATION", "SimConfig"]

# KWOK's convention: a Node with this annotation is simulated, whoever created it.
FAKE_NODE_ANNOTATION = "kwok.x-k8s.io/node"
FAKE_SELECTOR = f"{FAKE_NODE_ANNOTATION}=fake"  # KWOK's --manage-nodes-with-annotation-selector, as kwokctl runs it
# Failure injection through the API: "unreachable" (the kubelet stops: no lease, no
# status; Ready becomes Unknown) or "not-ready" (the kubelet reports Ready=False).
FAILURE_ANNOTATION = "nodes.controlplane.io/failure"


@dataclass(frozen=True)
class SimConfig:
    count: int = 0  # nodes to create at start (names ``{name_prefix}{i}``)
    name_prefix: str = "sim-node-"
    instance_type: str = CREATED_NODE_TYPE
    catalog: tuple[InstanceType, ...] = DEFAULT_CATALOG
    zones: int = 3
    racks_per_zone: int = 8
    # The kubelet's lease: 40 s duration, renewed every quarter of it (KEP-589).
    lease_duration_seconds: int = 40
    renew_interval: float = 10.0
    # Renewals are spread over the interval in batches this far apart: a batch's writes
    # reach the store together and share its group commits (a lone write costs the server
    # about 2.5 times as much CPU), while staying well inside the 2 s lag budget.
    heartbeat_batch: float = 0.5
    # A batch's renewals go as LeaseRenewals (``api/leaserenewals.py``, at most
    # ``renewals_per_request`` Leases each) when the server serves them, as PUTs otherwise.
    lease_renewals: bool = True
    renewals_per_request: int = 2000
    # A healthy node's periodic status report goes as NodeStatusReports (``api/nodereports.py``,
    # up to ``renewals_per_request`` Nodes each) when the server serves them, as a patch otherwise.
    bulk_status_reports: bool = True
    # nodeStatusUpdateFrequency (10 s) is how often the kubelet computes its status;
    # with leases it posts it only on a change or after nodeStatusReportFrequency (5 min).
    status_report_frequency: float = 300.0
    job_seconds: float = 1.0  # how long a restartPolicy Never/OnFailure pod runs (default stages)
    # the built-in stages' failure model (``podfailure``): each run of a Job's pod (one without the
    # sim.controlplane.dev/ annotations, which say their own) fails so often, exiting this code
    job_failure_rate: float = 0.0
    job_failure_exit_code: int = 1
    # the kubelet's crash-loop back-off (kuberuntime's): 10 s doubling to 5 min, reset by a run of
    # twice the maximum
    crash_backoff: float = 10.0
    crash_backoff_max: float = 300.0
    stages: list[Stage] | None = None  # None: the defaults (``stages.default_stages``)
    # KWOK's ``--enable-crds Stage``: the stages are the Stage objects stored in the API server
    # (``nodes/crds.py``, installed if absent), followed as they change; ``stages`` must be None
    stages_from_api: bool = False
    cluster_cidr: str = "10.0.0.0/8"  # pod CIDRs are carved from it
    node_network: str = "172.16.0.0/12"  # nodes' InternalIPs
    tick: float = 0.05  # the timing wheel's resolution, seconds
    write_concurrency: int = 64  # API writes in flight at once
    serialize_image_pulls: bool = True  # the kubelet's serializeImagePulls
    # the kubelet's CSINode (storage.k8s.io/v1), created as it registers its Node (one create a
    # node, named after it, owned by it, no drivers) and deleted with it, as a kubelet's CSI
    # node-info manager does; the scheduler's and CSI sidecars' readers expect one per node
    csi_nodes: bool = True
    # the kubelet's Events about pods' containers (Pulling, Pulled, Created, Started, Killing:
    # ``nodes/events.py``), three or more writes a pod; off: ``kubectl describe pod`` shows none
    pod_events: bool = True
    # the kubelet's Events about its node (Starting, the pressure conditions, NodeAllocatableEnforced,
    # NodeReady, NodeSchedulable, ...: ``nodes/events.py``), six writes a node at registration
    node_events: bool = True
    image_catalog: ImageCatalog | None = None  # image sizes; None: the built-in one
    preloaded_images: tuple[str, ...] = ("registry.k8s.io/pause:3.10",)
    seed: int | None = None
    extra_labels: dict[str, str] = field(default_factory=dict)
    # KWOK's --manage-nodes-with-label-selector: only the fake nodes whose labels match are this
    # simulator's (two simulators on one server each take their own); the nodes it creates get
    # the selector's ``key=value`` labels. Empty: every fake node.
    node_selector: str = ""
    # KWOK's --manage-nodes-with-annotation-selector: which nodes are fake, by their annotations (KWOK's
    # convention, ``kwok.x-k8s.io/node=fake``, by default); the nodes it creates get its ``key=value``
    # annotations. Empty: every node the label selector takes.
    node_annotation_selector: str = "kwok.x-k8s.io/node=fake"
    # KWOK's --manage-all-nodes: every node is this simulator's, whatever its labels and annotations
    manage_all_nodes: bool = False
