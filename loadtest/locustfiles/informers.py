"""Informers: list, then watch with bookmarks; relist on 410.

The first LIST asks for ``resourceVersion=0`` (the watch cache's whole list), a relist
after a 410 is a consistent one, paginated: client-go's reflector (``base.Reflector``).

Half of them (``watch_list_fraction``) start with a WatchList instead of a
LIST: a watch with ``sendInitialEvents=true`` that streams the current state
as ADDED events and marks its end with a BOOKMARK annotated
``k8s.io/initial-events-end``, as client-go does with the WatchListClient
feature. The time from start to synced is reported as ``informer sync <resource>``.
They keep counts, not objects: a hundred informers of a million pods must not
be the harness's bottleneck.

Run alone::

    python -m loadtest.locustfiles.informers http://127.0.0.1:28500
"""

from __future__ import annotations

import random
import sys
import time

from locust import constant, run_single_user, task

from ..scenarios import INFORMER_RESOURCES
from .base import KubeUser, Reflector, fire_latency, param

__all__ = ["InformerUser"]



class InformerUser(KubeUser):
    wait_time = constant(float(param("relist_every", 0)) or 30.0)
    concurrency = 2

    def on_start(self) -> None:
        self.resource = random.choice(list(param("informer_resources", ["pods"])))
        self.relist_every = float(param("relist_every", 0))
        self.last_start = 0.0
        self.act_as("system:serviceaccount:loadtest:informer")  # an operator's cache, in its own pod
        self._start()

    def _start(self) -> None:
        group, version = INFORMER_RESOURCES.get(self.resource, ("", "v1"))
        watch_list = random.random() < float(param("watch_list_fraction", 0.5))
        started = self.last_start = time.perf_counter()
        self.reflector = Reflector(self, self.resource, group=group, version=version, watch_list=watch_list,
                                   page_size=int(param("informer_page_size", 500)),
                                   timeout_seconds=random.randint(300, 600))
        self.watch_greenlet = self.reflector.start()
        timeout = float(param("informer_sync_timeout", 300))
        kind = "watchlist" if watch_list else "list"
        synced = self.reflector.synced.wait(timeout=timeout)
        fire_latency(f"informer sync {self.resource} ({kind})", time.perf_counter() - started,
                     None if synced else TimeoutError(f"not synced within {timeout:g} s"))

    @task
    def resync(self) -> None:
        """Informers do nothing on their own between events. With ``relist_every``
        (the list-storm) the informer starts over, as a restarted controller does."""
        if self.relist_every and time.perf_counter() - self.last_start >= self.relist_every:
            self.watch_greenlet.kill(block=False)
            self.greenlets.remove(self.watch_greenlet)
            self._start()


if __name__ == "__main__":
    InformerUser.host = sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:6443"
    run_single_user(InformerUser)
