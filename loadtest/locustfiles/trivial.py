"""The harness's own ceiling: users that GET one trivial path as fast as they can.

``python -m loadtest harness-rate`` runs this against a tiny local server (or
``/healthz`` of a real one) with the same master/worker setup as a scenario,
to state how many requests per second one Locust worker core sustains.
"""

from __future__ import annotations

import os

from locust import FastHttpUser, constant, task

__all__ = ["TrivialUser"]

_PATH = os.environ.get("LOADTEST_TRIVIAL_PATH", "/healthz")


class TrivialUser(FastHttpUser):
    wait_time = constant(0)

    @task
    def get(self) -> None:
        self.client.get(_PATH, name="trivial")
