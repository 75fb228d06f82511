"""A Karpenter-like node autoscaler (karpenter.sh/v1 NodePool and NodeClaim).

An API client like the scheduler and the node simulator: it watches pods,
nodes, NodePools and NodeClaims, and writes through the API. Pending pods the
scheduler found unschedulable are batched and simulated onto existing and
hypothetical nodes (``provisioner``); NodeClaims are created for the nodes to
launch, and after the instance type's launch latency their Nodes (adopted by
the node simulator) and ResourceSlices appear (``launcher``). Empty and
under-used nodes are consolidated, and nodes drifted from their NodePool
replaced, within the NodePools' disruption budgets (``disruption``).
"""
