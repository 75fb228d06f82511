"""The ClusterRole aggregation controller of kube-controller-manager: a ClusterRole with an
``aggregationRule`` holds the rules of the ClusterRoles its selectors match
(``api/rbacpolicy.py``), kept as they change. Chains (``view`` into ``edit`` into
``admin``) settle over successive syncs, each aggregated role's update being an
event for the next."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from controlplane.api.rbacpolicy import aggregated_rules
from controlplane.client import Client, resource_path
from controlplane.client.workqueue import WorkQueue, run_controller

from .ownership import meta_of

if TYPE_CHECKING:
    from controlplane.config import Config

__all__ = ["ClusterRoleAggregator", "start"]

CLUSTER_ROLES = resource_path("rbac.authorization.k8s.io", "v1", "clusterroles")


class ClusterRoleAggregator:
    def __init__(self, client: Client) -> None:
        self.client = client
        self.queue = WorkQueue()
        self.roles = client.informer(CLUSTER_ROLES, on_add=self._changed,
                                     on_update=lambda _old, new: self._changed(new), on_delete=self._changed)

    def _changed(self, _role: dict[str, Any]) -> None:
        for name, role in self.roles.items.items():
            if role.get("aggregationRule"):
                self.queue.add(name)

    async def run(self) -> None:
        await run_controller("clusterrole aggregation controller", (self.roles,), self.queue, self.sync, 1)

    async def sync(self, name: str) -> None:
        role = self.roles.items.get(name)
        if role is None:
            return
        rules = aggregated_rules(role, list(self.roles.items.values()))
        if rules is None or rules == (role.get("rules") or []):
            return
        await self.client.patch(f"{CLUSTER_ROLES}/{name}", {
            "metadata": {"resourceVersion": meta_of(role).get("resourceVersion")}, "rules": rules})


async def start(client: Client, config: Config) -> None:
    """The component entry point (``controlplane/components.py``)."""
    await ClusterRoleAggregator(client).run()
