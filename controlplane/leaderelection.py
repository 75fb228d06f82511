"""Leader election for the components, as kube-controller-manager and kube-scheduler do it.

Several ``serve`` processes over one store (replicas over a real etcd, or ``serve`` processes
sharing a data directory) each start the components (components.py). Run all at once, two
ReplicaSet controllers create every missing pod twice, two node simulators write every pod's
status twice, two schedulers race to bind. Upstream runs them under a coordination.k8s.io
Lease, and so do we: ``run_elected`` takes the Lease ``kube-system/controlplane-components``
through the API and runs the components only while it holds it, renewing it every
``retry_period``; the others stand by and take over once it has not been renewed for
``lease_duration`` (upstream's 15 s / 10 s / 2 s). A stopping leader releases the Lease
(upstream's ReleaseOnCancel) so a standby takes over within ``retry_period``.

The identity is the host and the server's address, so a server restarted after a crash takes
its own Lease back at once instead of waiting for it to expire.

Expiry is judged as client-go's leaderelection judges it, by this process's own clock: a Lease
held by another has expired once ``lease_duration`` has passed here since this process last saw
its record change, never by comparing the holder's ``renewTime`` with this clock. Replicas on
machines whose clocks disagree by more than the duration would otherwise take the Lease from a
live holder (a clock ahead) or leave a dead one's for too long (a clock behind).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import socket
import time
from collections.abc import Callable
from typing import Any

from .client import ApiError, Client

__all__ = ["LEASE_NAME", "LEASE_NAMESPACE", "identity", "run_elected"]

log = logging.getLogger("controlplane.leaderelection")

LEASE_NAMESPACE = "kube-system"
LEASE_NAME = "controlplane-components"
LEASES = f"/apis/coordination.k8s.io/v1/namespaces/{LEASE_NAMESPACE}/leases"


def identity(host: str, port: int) -> str:
    return f"{socket.gethostname()}_{host}:{port}"


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _micro(t: dt.datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class _Elector:
    def __init__(self, client: Client, me: str, lease_duration: float, name: str) -> None:
        self.client, self.me, self.lease_duration, self.name = client, me, lease_duration, name
        self.path = f"{LEASES}/{name}"
        # the Lease's record as last seen (holder, renewTime, resourceVersion), and when it was
        # first seen so on this process's monotonic clock: what expiry is measured from
        self.observed: tuple[Any, ...] | None = None
        self.observed_at = 0.0

    def _expired(self, lease: dict[str, Any]) -> bool:
        """Whether another's Lease has gone ``leaseDurationSeconds`` unchanged, as seen here."""
        spec = lease.get("spec") or {}
        record = (spec.get("holderIdentity"), spec.get("renewTime"),
                  (lease.get("metadata") or {}).get("resourceVersion"))
        now = time.monotonic()
        if record != self.observed:
            self.observed, self.observed_at = record, now
        duration = float(spec.get("leaseDurationSeconds") or self.lease_duration)
        return now - self.observed_at >= duration

    def _spec(self, lease: dict[str, Any] | None) -> dict[str, Any]:
        spec = dict((lease or {}).get("spec") or {})
        now = _micro(_now())
        if spec.get("holderIdentity") != self.me:
            spec["acquireTime"] = now
            spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + (1 if lease else 0)
        spec.update(holderIdentity=self.me, leaseDurationSeconds=max(1, round(self.lease_duration)), renewTime=now)
        return spec

    async def try_acquire_or_renew(self) -> bool:
        """One round: True if this process holds the Lease afterwards."""
        try:
            lease = await self.client.get(self.path)
        except ApiError as e:
            if e.code != 404:
                raise
            body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "metadata": {"name": self.name, "namespace": LEASE_NAMESPACE}, "spec": self._spec(None)}
            try:
                await self.client.create(LEASES, body)
            except ApiError as e2:
                if e2.code == 409:  # another took it first
                    return False
                raise
            return True
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity")
        if holder and holder != self.me and not self._expired(lease):
            return False  # held by another, renewed within its duration as seen here
        lease = dict(lease, spec=self._spec(lease))
        try:
            await self.client.update(self.path, lease)  # carries its resourceVersion: 409 if another wrote
        except ApiError as e:
            if e.code in (409, 404):
                return False
            raise
        return True

    async def release(self) -> None:
        lease = await self.client.get(self.path)
        spec = lease.get("spec") or {}
        if spec.get("holderIdentity") != self.me:
            return
        spec = dict(spec, holderIdentity=None, leaseDurationSeconds=1, renewTime=_micro(_now()))
        await self.client.update(self.path, dict(lease, spec=spec))


async def _attempt(elector: _Elector) -> bool:
    try:
        return await elector.try_acquire_or_renew()
    except (ApiError, OSError) as e:
        log.warning("components lease %s: %s", elector.name, e)
        return False
    except Exception as e:  # a transport error of the client's (httpx), the server shutting down
        log.warning("components lease %s: %s: %s", elector.name, type(e).__name__, e)
        return False


async def run_elected(client: Client, start: Callable[[], list[asyncio.Task[Any]]], me: str, *,
                      lease_duration: float = 15.0, renew_deadline: float = 10.0, retry_period: float = 2.0,
                      name: str = LEASE_NAME) -> None:
    """Runs ``start()``'s tasks while this process holds the Lease; until cancelled."""
    elector = _Elector(client, me, lease_duration, name)
    loop = asyncio.get_running_loop()
    while True:
        logged = False
        while not await _attempt(elector):  # stand by
            if not logged:
                log.info("components: waiting for the lease %s/%s (held by another server)", LEASE_NAMESPACE, name)
                logged = True
            await asyncio.sleep(retry_period)
        log.info("components: %s acquired the lease %s/%s", me, LEASE_NAMESPACE, name)
        tasks = start()
        renewed = loop.time()
        try:
            while True:
                await asyncio.sleep(retry_period)
                if await _attempt(elector):
                    renewed = loop.time()
                elif loop.time() - renewed > renew_deadline or await _lost(elector):
                    log.error("components: %s lost the lease %s/%s; stopping the components", me,
                              LEASE_NAMESPACE, name)
                    break
        except asyncio.CancelledError:
            await _stop(tasks)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(elector.release(), 2.0)
            raise
        await _stop(tasks)


async def _lost(elector: _Elector) -> bool:
    """Another server holds the Lease now (it took it over: this one stops at once)."""
    try:
        lease = await elector.client.get(elector.path)
    except Exception:
        return False
    holder = (lease.get("spec") or {}).get("holderIdentity")
    return bool(holder) and holder != elector.me


async def _stop(tasks: list[asyncio.Task[Any]]) -> None:
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
