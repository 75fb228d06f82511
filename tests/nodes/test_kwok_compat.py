"""KWOK's own material run against the simulator: where it behaved otherwise than KWOK's controller."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from controlplane.client import Client
from controlplane.nodes.simulator import NodeSimulator
from controlplane.nodes.stages import load_stages
from tests.nodes.conftest import PODS, eventually, fast, pod, simulating

REFUSED_STAGE = """
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata: {name: pod-broken}
spec:
  resourceRef: {apiGroup: v1, kind: Pod}
  selector:
    matchLabels: {broken: "yes"}
  next:
    statusTemplate: |
      conditions: "not a list"
"""


def _count_patches(monkeypatch: pytest.MonkeyPatch, suffix: str) -> list[int]:
    """The simulated kubelets' patches of a path ending in ``suffix``: the list gets one item each."""
    seen: list[int] = []
    real_kubelet = NodeSimulator._kubelet

    class Counting:
        def __init__(self, inner: Client) -> None:
            self.inner = inner

        async def patch(self, path: str, body: Any, **kw: Any) -> dict[str, Any]:
            if path.endswith(suffix):
                seen.append(1)
            return await self.inner.patch(path, body, **kw)

        def __getattr__(self, name: str) -> Any:
            return getattr(self.inner, name)

    monkeypatch.setattr(NodeSimulator, "_kubelet", lambda sim, node: Counting(real_kubelet(sim, node)))
    return seen


async def test_a_stage_write_the_server_refuses_is_logged_and_not_made_again(
        client: Client, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """A stage whose template renders what the API refuses (here 422: ``conditions`` a string) was
    tried again every second for as long as the pod lived, with nothing logged above debug: a
    broken Stage gave one doomed write a second per pod, silently. KWOK's controller logs
    ``failed to apply stage`` and retries only what ``shouldRetry`` says may pass later (no
    answer, 429, 503, timeouts); the pod's next change draws a stage again."""
    patches = _count_patches(monkeypatch, "/pods/broken/status")
    caplog.set_level(logging.WARNING, logger="controlplane.nodes.simulator")
    async with simulating(client, fast(stages=load_stages(REFUSED_STAGE))):
        body = pod("broken", "sim-node-0")
        body["metadata"]["labels"] = {"broken": "yes"}
        await client.create(PODS, body)
        await eventually(lambda: asyncio.sleep(0, result=patches))
        await asyncio.sleep(2.5)  # two retries' worth at the old rate
        assert len(patches) == 1
        [record] = [r for r in caplog.records if "pod-broken" in r.getMessage()]
        assert "default/broken" in record.getMessage() and "422" in record.getMessage()
        # its next change draws the stage again, as KWOK's next event of the pod does
        await client.patch(f"{PODS}/broken", {"metadata": {"labels": {"touched": "1"}}}, patch_type="merge")
        await eventually(lambda: asyncio.sleep(0, result=len(patches) == 2))
