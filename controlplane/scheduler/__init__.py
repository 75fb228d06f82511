"""The scheduler (issue 5): kube-scheduler's framework, queues and plugins over the API.

Modules: ``framework`` (extension-point Protocols, Status/Code, CycleState,
plugin Registry), ``nodeinfo`` (PodInfo, NodeInfo), ``cache`` (nodes, bound and
assumed pods), ``queue`` (activeQ, backoffQ, unschedulable pods), ``plugins/``
(the in-tree plugins), ``gang`` (PodGroup quorum and topology), ``scheduler``
(the loop, informers, binder), ``writer`` (its writes; direct ASGI calls inside
``serve``), ``feasibility`` (which nodes could a pod fit on, without the loop:
for the autoscaler)::

    from controlplane.scheduler.feasibility import feasible_nodes
    fits, why_not = feasible_nodes(pod, [node_a, node_template])
"""
