"""The components that run inside ``controlplane serve`` beside the API.

Each is an API client (the scheduler, the node simulator, ...): it gets a
``Client.in_process`` over this server's app, so it goes through the whole API
(authentication, admission, validation, the watch cache) without a socket,
and nothing in it may reach the store behind the API's back (DESIGN.md).

A component is registered here by name as ``"module:function"`` with a
predicate on the configuration; the module is imported only when the
component runs, so ``serve`` starts fast. The function runs as a background
task until the server stops (it is cancelled then)::

    async def start(client: Client, config: Config) -> None: ...

A component that plays controllers of kube-controller-manager names them, by
upstream's canonical names, in ``controllers``: it runs when ``--controllers``
turns on any of them (controllermanager.py), and reads ``config`` to know which
of its parts to run (``workload-controllers`` plays the Deployment and
ReplicaSet controllers and the garbage collector's part for them, each turned
off on its own). The others (the scheduler, the simulated kubelets, the
autoscaler, kube-apiserver's own controllers) name none and ignore the list.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .identities import API_SERVER, SCHEDULER, service_account_user

if TYPE_CHECKING:
    from .client import Client
    from .config import Config

__all__ = ["COMPONENTS", "UPDATED", "Component", "enabled", "installed_crds", "start"]

log = logging.getLogger(__name__)

Start = Callable[["Client", "Config"], Coroutine[Any, Any, None]]


@dataclass(frozen=True)
class Component:
    name: str
    target: str  # "module:function"
    wanted: Callable[[Config], bool]
    # the program it stands for: its requests' User-Agent, so the field manager of its writes (Client.as_agent)
    agent: str = "kube-controller-manager"
    # the kube-controller-manager controllers it plays (their canonical names); () for another program's
    controllers: tuple[str, ...] = ()
    # who its requests are from (identities.py): upstream's identity of the program, or of the controller's
    # service account; a component playing several controllers writes as each where it can (Client.as_identity)
    user: str = ""

    def load(self) -> Start:
        module, _, function = self.target.partition(":")
        start: Start = getattr(importlib.import_module(module), function)
        return start


GC = "garbage-collector-controller"  # its part for the kinds a component owns runs with that component

COMPONENTS: list[Component] = [
    Component("scheduler", "controlplane.scheduler.scheduler:start", lambda config: config.scheduler,
              agent="kube-scheduler", user=SCHEDULER),
    # simulated nodes: with --nodes N > 0, or when the autoscaler runs (--autoscaler, or a NodePool stored: its
    # nodes need a kubelet); nodes/component.py decides, with one list call when neither flag says
    Component("nodes", "controlplane.nodes.component:start", lambda config: True, agent="kubelet",
              user=service_account_user("kwok-controller")),
    # with --autoscaler, or if a NodePool is stored when the server starts (one list call)
    Component("autoscaler", "controlplane.autoscaler.component:start", lambda config: True, agent="karpenter",
              user=service_account_user("karpenter")),
    # kube-controller-manager's resourceclaim controller: claims from templates, released when pods end.
    # Tied to the scheduler's flag: without a scheduler nothing allocates claims.
    Component("resourceclaim-controller", "controlplane.scheduler.dra.claims:start", lambda config: config.scheduler,
              controllers=("resourceclaim-controller",), user=service_account_user("resource-claim-controller")),
    # kube-controller-manager's deployment and replicaset controllers, and their part of the garbage
    # collector (controllers/workloads.py). Tied to the scheduler's flag too: API tests run without
    # both, and the API adds the collector's finalizers only when it runs (api/app.py)
    Component("workload-controllers", "controlplane.controllers.workloads:start", lambda config: config.scheduler,
              controllers=("deployment-controller", "replicaset-controller", GC),
              user=service_account_user("deployment-controller")),
    # kube-controller-manager's replicationcontroller controller: the ReplicaSet controller's code over
    # ReplicationControllers, and the collector's part for their pods (controllers/workloads.py)
    Component("replicationcontroller-controller", "controlplane.controllers.workloads:start_replication",
              lambda config: config.scheduler, controllers=("replicationcontroller-controller", GC),
              user=service_account_user("replication-controller")),
    Component("job-controller", "controlplane.controllers.jobs:start", lambda config: config.scheduler,
              controllers=("job-controller", "ttl-after-finished-controller", GC),
              user=service_account_user("job-controller")),
    Component("cronjob-controller", "controlplane.controllers.cronjobs:start", lambda config: config.scheduler,
              controllers=("cronjob-controller", GC), user=service_account_user("cronjob-controller")),
    Component("daemonset-controller", "controlplane.controllers.daemonsets:start", lambda config: config.scheduler,
              controllers=("daemonset-controller", GC), user=service_account_user("daemon-set-controller")),
    Component("disruption-controller", "controlplane.controllers.disruption:start", lambda config: config.scheduler,
              controllers=("disruption-controller",), user=service_account_user("disruption-controller")),
    # the node lifecycle controller: Ready Unknown for a node whose Lease and status stand still, and the
    # taints from node conditions: not-ready/unreachable NoExecute (Ready False/Unknown, whoever wrote it),
    # at each zone's rate, and the NoSchedule ones of TaintNodesByCondition
    Component("node-lifecycle-controller", "controlplane.controllers.nodelifecycle:start",
              lambda config: config.scheduler,
              controllers=("node-lifecycle-controller",), user=service_account_user("node-controller")),
    # pods leave nodes tainted NoExecute (`kubectl taint nodes n k=v:NoExecute`, the node lifecycle
    # controller's not-ready/unreachable) unless they tolerate it
    Component("taint-eviction-controller", "controlplane.controllers.tainteviction:start",
              lambda config: config.scheduler,
              controllers=("taint-eviction-controller",), user=service_account_user("node-controller")),
    # pods leave devices tainted NoExecute by their ResourceSlice or a DeviceTaintRule unless their claims
    # tolerate it; the rules' EvictionInProgress condition (controllers/devicetainteviction.py)
    Component("device-taint-eviction-controller", "controlplane.controllers.devicetainteviction:start",
              lambda config: config.scheduler,
              controllers=("device-taint-eviction-controller",),
              user=service_account_user("device-taint-eviction-controller")),
    # a PodGroup being deleted keeps its protection finalizer while a pod of it has not ended
    # (controllers/podgroupprotection.py); the API adds it with the controllers (api/app.py)
    Component("podgroup-protection-controller", "controlplane.controllers.podgroupprotection:start",
              lambda config: config.scheduler,
              controllers=("podgroup-protection-controller",),
              user=service_account_user("podgroup-protection-controller")),
    # pods bound to a node that no longer exists are failed and deleted after 40 s (PodGC's orphans)
    Component("pod-garbage-collector", "controlplane.controllers.podgc:start", lambda config: config.scheduler,
              controllers=("pod-garbage-collector-controller",), user=service_account_user("pod-garbage-collector")),
    Component("statefulset-controller", "controlplane.controllers.statefulsets:start",
              lambda config: config.scheduler,
              controllers=("statefulset-controller", GC), user=service_account_user("statefulset-controller")),
    Component("persistentvolume-controller", "controlplane.controllers.volumes:start",
              lambda config: config.scheduler,
              controllers=("persistentvolume-binder-controller", "persistentvolumeclaim-protection-controller",
                           "persistentvolume-protection-controller", GC),
              user=service_account_user("persistent-volume-binder")),
    Component("resourcequota-controller", "controlplane.controllers.quota:start", lambda config: config.scheduler,
              controllers=("resourcequota-controller",), user=service_account_user("resourcequota-controller")),
    Component("endpointslice-controller", "controlplane.controllers.endpoints:start",
              lambda config: config.scheduler,
              controllers=("endpointslice-controller", "endpoints-controller"),
              user=service_account_user("endpointslice-controller")),
    # reads metrics.k8s.io, which the API serves from the pods' declared usage (api/resourcemetrics.py)
    Component("horizontal-pod-autoscaler", "controlplane.controllers.podautoscaler:start",
              lambda config: config.scheduler,
              controllers=("horizontal-pod-autoscaler-controller",),
              user=service_account_user("horizontal-pod-autoscaler")),
    # the default roles are created at start in every mode (api/rbacpolicy.py); their rules are aggregated here
    Component("clusterrole-aggregation-controller", "controlplane.controllers.clusterroles:start",
              lambda config: True,
              controllers=("clusterrole-aggregation-controller",),
              user=service_account_user("clusterrole-aggregation-controller")),
    # kube-root-ca.crt in every namespace, when the server serves TLS (controllers/rootca.py)
    Component("root-ca-cert-publisher", "controlplane.controllers.rootca:start", lambda config: config.scheduler,
              controllers=("root-ca-certificate-publisher-controller",),
              user=service_account_user("root-ca-cert-publisher")),
    # approved CSRs of the built-in signers issued with the generated CA (controllers/certificates.py)
    Component("csrsigning-controller", "controlplane.controllers.certificates:start",
              lambda config: config.scheduler,
              controllers=("certificatesigningrequest-signing-controller",),
              user=service_account_user("certificate-controller")),
    # kubelet client CSRs approved when their requestor may ask for one (controllers/csrapproving.py)
    Component("csrapproving-controller", "controlplane.controllers.csrapproving:start",
              lambda config: config.scheduler,
              controllers=("certificatesigningrequest-approving-controller",),
              user=service_account_user("certificate-controller")),
    # old CSRs deleted: issued, denied or failed an hour ago, pending for a day (controllers/csrcleaner.py)
    Component("csrcleaner-controller", "controlplane.controllers.csrcleaner:start", lambda config: config.scheduler,
              controllers=("certificatesigningrequest-cleaner-controller",),
              user=service_account_user("certificate-controller")),
    # StorageVersionMigrations run: Running, the resource listed, Succeeded (controllers/storagemigration.py)
    Component("storage-version-migrator-controller", "controlplane.controllers.storagemigration:start",
              lambda config: config.scheduler, controllers=("storage-version-migrator-controller",),
              user=service_account_user("storage-version-migrator-controller")),
    # a namespace's `default` ServiceAccount put back when deleted (controllers/serviceaccounts.py)
    Component("serviceaccount-controller", "controlplane.controllers.serviceaccounts:start",
              lambda config: config.scheduler,
              controllers=("serviceaccount-controller",), user=service_account_user("service-account-controller")),
    # ServiceCIDRs' finalizer and Ready condition; one being deleted held while IPs are in it
    # (controllers/servicecidrs.py)
    Component("service-cidrs-controller", "controlplane.controllers.servicecidrs:start",
              lambda config: config.scheduler,
              controllers=("service-cidr-controller",), user=service_account_user("service-cidrs-controller")),
    # the default ServiceCIDR made again when deleted, set Ready, every 10 s, in every mode, as kube-apiserver's own
    # controller (controllers/defaultservicecidr.py)
    Component("default-service-cidr-controller", "controlplane.controllers.defaultservicecidr:start",
              lambda config: True, agent="kube-apiserver", user=API_SERVER),
    # kube-system, kube-public, kube-node-lease and default made again when deleted, every minute, in every mode,
    # as kube-apiserver's own controller (controllers/systemnamespaces.py)
    Component("system-namespaces-controller", "controlplane.controllers.systemnamespaces:start", lambda config: True,
              agent="kube-apiserver", user=API_SERVER),
    # custom resources' local APIServices and every APIService's Available condition, in every mode, as
    # kube-apiserver's own controllers (controllers/apiservices.py)
    Component("apiservice-controller", "controlplane.controllers.apiservices:start", lambda config: True,
              agent="kube-apiserver", user=API_SERVER),
    # FlowSchemas' Dangling condition, mandatory APF objects put back (controllers/flowschemas.py)
    Component("apf-configuration-controller", "controlplane.controllers.flowschemas:start", lambda config: True,
              agent="kube-apiserver", user=API_SERVER),
]


def installed_crds(config: Config) -> tuple[str, ...]:
    """The CustomResourceDefinitions (``<plural>.<group>``) the components of a server so
    configured install through the API once they start: Karpenter's NodePool and NodeClaim
    with ``--autoscaler``, KWOK's Stage with ``--enable-crds Stage``. A server reports ready
    (``/readyz``) once they are served, so that a script may write such objects as soon as
    it is, whichever process the components run in."""
    names: list[str] = []
    if config.autoscaler:
        names += ["nodepools.karpenter.sh", "nodeclaims.karpenter.sh"]
    if "Stage" in config.enable_crds:
        names.append("stages.kwok.x-k8s.io")
    return tuple(names)


def enabled(config: Config) -> list[Component]:
    if not config.components:  # an extra API server process (serve --workers): they run in the first
        return []
    return [c for c in COMPONENTS if c.wanted(config)
            and (not c.controllers or any(config.controller_enabled(name) for name in c.controllers))]


# what kube-controller-manager's controllers write by update, not patch (their roles grant only that: the
# status of their objects, UpdateStatus, the Deployment's own annotations, and the claims and volumes the
# persistent volume controller binds, the protection controllers release and the StatefulSet controller's
# retention policy owns): under RBAC the emulated ones' merge patches of these go as a read and an update
# (Client.updating)
UPDATED = frozenset({
    "cronjobs/status", "daemonsets/status", "deployments", "deployments/status", "horizontalpodautoscalers/status",
    "jobs/status", "persistentvolumeclaims", "persistentvolumeclaims/status", "persistentvolumes",
    "persistentvolumes/status", "poddisruptionbudgets/status", "replicasets/status", "replicationcontrollers/status",
    "resourcequotas/status", "statefulsets/status",
})


def start(client: Client, config: Config, components: list[Component], where: str = "") -> list[asyncio.Task[None]]:
    """Start ``components`` as tasks, each with ``client`` as its identity and program
    (``Client.as_component``), after the service accounts they act as are made where missing
    (``identities.ensure_service_accounts``, a task too). ``where``: said in the log."""
    from .identities import ensure_service_accounts

    tasks = [asyncio.create_task(ensure_service_accounts(client), name="service-accounts")]
    # a patch costs the server less than a read and an update: those only where RBAC needs them
    rbac = "RBAC" in config.authorization_modes()
    for component in components:
        log.info("starting %s as %s%s", component.name, component.user, where)
        view = client.as_component(component.agent, component.user)
        if component.controllers and rbac:  # kube-controller-manager's, where their roles decide
            view = view.updating(UPDATED)
        started = component.load()(view, config)
        tasks.append(asyncio.create_task(started, name=component.name))
    for task in tasks:
        task.add_done_callback(_report_failure)
    return tasks


def _report_failure(task: asyncio.Task[None]) -> None:
    """A component that ends with an error says so at once: its task is only gathered when the
    server stops, and the server goes on without it (its nodes never made, its pods never placed)."""
    if not task.cancelled() and (error := task.exception()) is not None:
        log.error("component %s stopped: %s: %s", task.get_name(), type(error).__name__, error, exc_info=error)
