"""Two ``serve --store etcd://...`` replicas over one real etcd, each with the components on.

As kube-controller-manager and kube-scheduler replicas, they run the components under a Lease
(controlplane/leaderelection.py): one replica's ReplicaSet controller, scheduler and node
simulator act, the other stands by. Without it, a Deployment of 4 made 8 pods (each replica's
ReplicaSet controller created the 4 missing ones) and then deleted 4.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from controlplane.client import Client, resource_path
from controlplane.leaderelection import LEASE_NAME, LEASE_NAMESPACE
from tests.etcd_server import EtcdServer
from tests.test_cli import Serve, start_serve

DEPLOYMENTS = resource_path("apps", "v1", "deployments", "default")
PODS = resource_path("", "v1", "pods", "default")
LEASE = f"{resource_path('coordination.k8s.io', 'v1', 'leases', LEASE_NAMESPACE)}/{LEASE_NAME}"


def _deployment(name: str, replicas: int) -> dict[str, object]:
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}


async def _rolls_out_once(writer: Path, reader: Path, name: str, replicas: int) -> None:
    """A Deployment created through one replica runs exactly ``replicas`` pods, none deleted,
    as a watch through the other replica sees them."""
    async with Client.from_kubeconfig(writer) as w, Client.from_kubeconfig(reader) as r:
        rv = (await r.list(PODS, limit=1))["metadata"]["resourceVersion"]
        added: set[str] = set()
        deleted: set[str] = set()
        running: set[str] = set()

        async def watch() -> None:
            async for ev in r.watch(PODS, resource_version=rv, label_selector=f"app={name}"):
                pod = ev.object["metadata"]["name"]
                if ev.type == "ADDED":
                    added.add(pod)
                elif ev.type == "DELETED":
                    deleted.add(pod)
                if ev.type != "DELETED" and ev.object.get("status", {}).get("phase") == "Running":
                    running.add(pod)

        task = asyncio.create_task(watch())
        try:
            await w.create(DEPLOYMENTS, _deployment(name, replicas))
            deadline = time.monotonic() + 60
            while len(running) < replicas:
                assert time.monotonic() < deadline, (added, running)
                await asyncio.sleep(0.2)
            await asyncio.sleep(3)  # a second ReplicaSet controller would have acted by now
        finally:
            task.cancel()
        assert len(added) == replicas, added
        assert deleted == set()


async def _holder(kubeconfig: Path) -> str:
    async with Client.from_kubeconfig(kubeconfig) as c:
        holder: str = (await c.get(LEASE))["spec"]["holderIdentity"]
        return holder


def _leader(a: Serve, b: Serve) -> tuple[Serve, Serve]:
    holder = asyncio.run(_holder(a.kubeconfig))
    if holder.endswith(f":{a.port}"):
        return a, b
    assert holder.endswith(f":{b.port}"), holder
    return b, a


def test_replicas_over_etcd_run_the_components_once(tmp_path: Path) -> None:
    with EtcdServer() as etcd:
        extra = ["--store", etcd.url, "--nodes", "2"]
        (tmp_path / "a").mkdir()
        (tmp_path / "b").mkdir()
        a = start_serve(tmp_path / "a", extra=extra, scheduler=True)
        b = None
        try:
            a.wait_ready()
            b = start_serve(tmp_path / "b", extra=extra, scheduler=True)
            b.wait_ready()
            asyncio.run(_rolls_out_once(a.kubeconfig, b.kubeconfig, "web", 4))
            leader, standby = _leader(a, b)
            assert "acquired the lease" in leader.output()
            assert "acquired the lease" not in standby.output()
            # the leader stops: it releases the Lease and the other takes over within seconds
            assert leader.stop() == 0, leader.output()
            deadline = time.monotonic() + 20
            while "acquired the lease" not in standby.output():
                assert time.monotonic() < deadline, standby.output()
                time.sleep(0.2)
            asyncio.run(_rolls_out_once(standby.kubeconfig, standby.kubeconfig, "web2", 2))
        finally:
            for s in (a, b):
                if s is not None and s.proc.poll() is None:
                    s.stop()
