"""Operators: the reads and patches of a typical operator or dashboard.

Paginated cluster-wide LISTs (``limit`` + ``continue``, at most ``max_pages``
pages), full LISTs of a namespace, label-selected LISTs across the cluster,
and writes to the objects it owns with each patch type a controller uses:
strategic merge (a Deployment's replicas), JSON merge (a ConfigMap) and
server-side apply (``fieldManager=operator``, forced).

Run alone::

    python -m loadtest.locustfiles.operators http://127.0.0.1:28500
"""

from __future__ import annotations

import random
import sys

from locust import between, run_single_user, task

from .. import objects
from .base import KubeUser, param, path_for, unique_suffix
from .controllers import namespace_for

__all__ = ["OperatorUser"]

_APPS = ["api", "worker", "frontend", "gateway", "scheduler", "indexer", "consumer", "trainer", "server"]


class OperatorUser(KubeUser):
    wait_time = between(float(param("operator_wait_min", 1.0)), float(param("operator_wait_max", 3.0)))

    def on_start(self) -> None:
        self.ns = namespace_for(random.randrange(1 << 30))
        self.name = f"op-{unique_suffix()}"
        self.max_pages = int(param("max_pages", 0))
        self.ensure("namespaces", objects.namespace(self.ns))
        self.ensure("configmaps", objects.configmap(self.ns, self.name, {"generation": "0"}), self.ns)
        self.ensure("deployments", objects.deployment(self.ns, self.name), self.ns, group="apps")
        self.act_as(f"system:serviceaccount:{self.ns}:operator")  # from here on, as an operator in its namespace
        self.generation = 0
        if param("sweep", False):  # the smoke scenario: every operation once, whatever the dice say later
            for op in (self.paginated_list, self.namespace_list, self.label_selected_list, self.get_own,
                       self.strategic_patch, self.merge_patch, self.apply):
                op()

    @task(1)
    def paginated_list(self) -> None:
        for i, _page in enumerate(self.list_pages("pods", limit=int(param("page_size", 500)))):
            if self.max_pages and i + 1 >= self.max_pages:
                break

    @task(3)
    def namespace_list(self) -> None:
        next(self.list_pages("pods", self.ns))

    @task(2)
    def label_selected_list(self) -> None:
        next(self.list_pages("pods", labelSelector=f"app.kubernetes.io/name={random.choice(_APPS)}"))

    @task(2)
    def get_own(self) -> None:
        self.call("GET", path_for("deployments", self.ns, self.name, group="apps"), "deployments")

    @task(2)
    def strategic_patch(self) -> None:
        self.patch("deployments", self.ns, self.name, {"spec": {"replicas": random.randint(0, 5)}}, "strategic",
                   group="apps")

    @task(2)
    def merge_patch(self) -> None:
        self.generation += 1
        self.patch("configmaps", self.ns, self.name, {"data": {"generation": str(self.generation)}}, "merge")

    @task(1)
    def apply(self) -> None:
        body = objects.configmap(self.ns, self.name, {"owner": "operator", "tick": str(random.randrange(100))})
        self.patch("configmaps", self.ns, self.name, body, "apply",
                   query={"fieldManager": "operator", "force": "true"})


if __name__ == "__main__":
    OperatorUser.host = sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:6443"
    run_single_user(OperatorUser)
