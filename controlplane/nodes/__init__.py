"""Simulated nodes and pod lifecycle (KWOK-like), as a client of the API.

- ``simulator``: ``NodeSimulator``, the kubelets of every Node annotated
  ``kwok.x-k8s.io/node: fake`` (heartbeats, pod stages, image pulls, pod IPs)
  and the node lifecycle controller's taint-based eviction for them;
- ``stages`` (with ``gotemplate``, ``jqpath``, ``native``): KWOK's Stage format;
- ``crds``: the Stage CRD, for stages kept as API objects (``--enable-crds Stage``);
- ``images``: per-node image cache and the pull model;
- ``events``: the kubelet's Events about pods' containers (Pulling, Pulled, Created, ...);
- ``ipam``: pod CIDRs and pod IPs;
- ``instancetypes``: the instance-type catalog (shared with the autoscaler);
- ``rota``: the heartbeat rota that spreads Lease renewals over the interval;
- ``wheel``: the timing wheel for every other timer (status reports, stages, evictions);
- ``failures``: failure injection through the API (``inject_failure``);
- ``component``: the starter ``controlplane serve`` runs; ``cli``: ``controlplane nodes``.

Importing this package imports nothing heavy; import the modules you need.
"""
