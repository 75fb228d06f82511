"""The harness's own ceiling: users that GET one trivial path as fast as they can.

``python -m loadtest harness-rate`` runs this against a tiny local server (or
``/healthz`` of a real one) with the same master/worker setup as a scenario,
to state how many requests per second one Locust worker core sustains. The
users are the scenarios' (``base.KubeUser``): their connections and headers
carry the run's credentials (``LOADTEST_AUTH``) as a scenario's do.
"""

from __future__ import annotations

import os

from locust import constant, task

from loadtest.locustfiles.base import KubeUser

__all__ = ["TrivialUser"]

_PATH = os.environ.get("LOADTEST_TRIVIAL_PATH", "/healthz")


class TrivialUser(KubeUser):
    wait_time = constant(0)

    @task
    def get(self) -> None:
        self.client.get(_PATH, name="trivial", headers=self.headers)
