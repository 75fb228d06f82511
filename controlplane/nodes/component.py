"""The node simulator as a component of ``controlplane serve``.

``start(client, config)`` is the starter ``controlplane.components`` runs once
the server is ready, with an in-process client: with ``--nodes N`` > 0 it
creates N nodes and simulates them, and every other node annotated
``kwok.x-k8s.io/node: fake`` (the autoscaler's, say), until the server stops,
through serve's ``--stages`` files when it has any, the Stage objects stored
with ``--enable-crds Stage``, else the built-in stages. With ``--nodes 0`` it
runs when the autoscaler does (with ``--autoscaler``, or when a NodePool is
stored as the server starts), and with ``--enable-crds Stage``, whose CRD it
installs and whose objects it follows (for nodes created by others).
"""

from __future__ import annotations

import logging

from ..client import Client
from ..config import Config

__all__ = ["start"]

log = logging.getLogger(__name__)


async def start(client: Client, config: Config) -> None:
    from_api = "Stage" in getattr(config, "enable_crds", ())
    if config.nodes <= 0 and not getattr(config, "autoscaler", False) and not from_api:
        from ..autoscaler.component import nodepool_exists

        # without --autoscaler the autoscaler still starts when a NodePool is stored (a restarted
        # cluster that had one): its nodes need their kubelet as much as with the flag
        if not await nodepool_exists(client):
            return
    from .config import FAKE_SELECTOR, SimConfig
    from .instancetypes import DEFAULT_CATALOG, created_node_type, load_catalog
    from .simulator import NodeSimulator
    from .stages import load_stages, read_stage_files

    catalog_file = getattr(config, "instance_types", None)  # --instance-types, where serve has it
    catalog = load_catalog(catalog_file) if catalog_file else DEFAULT_CATALOG
    stages = load_stages(read_stage_files(config.stages)) if config.stages else None
    # (with --nodes 0, as for the autoscaler's own nodes, the type is not used, but must be in the catalog)
    instance_type = created_node_type(catalog)
    sim = NodeSimulator(client, SimConfig(count=config.nodes, catalog=catalog, stages=stages, stages_from_api=from_api,
                                          instance_type=instance_type,
                                          node_selector=getattr(config, "manage_nodes_selector", ""),
                                          node_annotation_selector=getattr(
                                              config, "manage_nodes_annotation_selector", FAKE_SELECTOR),
                                          manage_all_nodes=getattr(config, "manage_all_nodes", False),
                                          pod_events=getattr(config, "pod_events", True),
                                          node_events=getattr(config, "node_events", True),
                                          csi_nodes=getattr(config, "csi_nodes", True),
                                          job_failure_rate=getattr(config, "job_failure_rate", 0.0),
                                          job_failure_exit_code=getattr(config, "job_failure_exit_code", 1),
                                          crash_backoff=getattr(config, "crash_backoff", 10.0),
                                          crash_backoff_max=getattr(config, "crash_backoff_max", 300.0)))
    kubelets = getattr(config, "kubelet_identities", None)
    if kubelets is not None and not kubelets():
        log.info("node simulator: RBAC without the Node authorizer denies kubelets: the nodes write as "
                 "KWOK's controller (kube-system/kwok-controller)")
        sim.kubelet_identities = False
    log.info("node simulator: creating %d nodes", config.nodes)
    await sim.run()
