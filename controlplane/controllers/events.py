"""Events the controllers record about their objects (``kubectl describe`` shows them):
core/v1 Events written in the background, as client-go's record.EventRecorder does
for kube-controller-manager. At most ``MAX_PENDING`` unwritten events are kept,
beyond which they are dropped, as the broadcaster's bounded queue drops them; a
failed write is logged and forgotten.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Mapping
from typing import Any

from controlplane.client import Client, resource_path

__all__ = ["MAX_PENDING", "Recorder"]

log = logging.getLogger(__name__)

MAX_PENDING = 1000
API_VERSIONS = {"Deployment": "apps/v1", "ReplicaSet": "apps/v1", "Job": "batch/v1", "Pod": "v1",
                "HorizontalPodAutoscaler": "autoscaling/v2"}


class Recorder:
    def __init__(self, client: Client, component: str) -> None:
        self.client = client
        self.component = component
        self.pending = 0
        self.dropped = 0
        self._tasks: set[asyncio.Task[None]] = set()

    def record(self, kind: str, obj: Mapping[str, Any], reason: str, message: str, type_: str = "Normal") -> None:
        """An event about ``obj``, a ``kind`` (list items need not carry their kind)."""
        if self.pending >= MAX_PENDING:
            self.dropped += 1
            return
        self.pending += 1
        task = asyncio.get_running_loop().create_task(self._write(kind, obj, reason, message, type_))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _write(self, kind: str, obj: Mapping[str, Any], reason: str, message: str, type_: str) -> None:
        meta = obj.get("metadata") or {}
        ns = meta.get("namespace") or "default"
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time()))
        event = {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": f"{meta.get('name', '')}.{time.time_ns():x}{os.urandom(2).hex()}", "namespace": ns},
            "involvedObject": {"apiVersion": API_VERSIONS.get(kind, "v1"), "kind": kind,
                               "namespace": ns, "name": meta.get("name", ""), "uid": meta.get("uid", ""),
                               "resourceVersion": meta.get("resourceVersion", "")},
            "reason": reason, "message": message, "type": type_,
            "source": {"component": self.component}, "reportingComponent": self.component,
            "reportingInstance": self.component, "firstTimestamp": now, "lastTimestamp": now, "count": 1,
        }
        try:
            await self.client.create(resource_path("", "v1", "events", ns), event)
        except Exception as e:  # an event is best effort: never the controller's failure
            log.debug("event not written: %r", e)
        finally:
            self.pending -= 1
