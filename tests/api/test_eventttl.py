"""Events expire a TTL after their last write (``--event-ttl``), as by upstream's etcd leases:
without it, the Events the kubelets and controllers record pile up for as long as the
server runs (a soak of pod churn stored 12,000 in its first three minutes)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import store
from controlplane.api.app import create_app
from controlplane.api.eventttl import EventExpiry
from controlplane.client import Client
from controlplane.config import Config
from store.interface import Event, EventType, KeyValue


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def put(key: bytes, revision: int) -> Event:
    return Event(EventType.PUT, KeyValue(key, b"{}", revision, revision, 1))


async def test_an_event_goes_a_ttl_after_its_last_write_and_nothing_is_kept_of_it(tmp_path: Path) -> None:
    s = store.open(f"lmdb://{tmp_path / 'data'}")
    clock = Clock()
    expiry = EventExpiry(lambda: s, ttl=100.0, clock=clock)
    try:
        a, b, cm = b"/registry/events/ns/a", b"/registry/events/ns/b", b"/registry/configmaps/ns/c"
        revs = {k: await s.create(k, b"{}") for k in (a, b, cm)}
        expiry.observe([put(k, r) for k, r in revs.items()])
        assert len(expiry) == 2  # Events only
        clock.now = 50.0
        ra = await s.update(a, b"{}", revs[a])  # a written again: its time starts again
        expiry.observe([put(a, ra)])
        assert await expiry.expire_due() == 0
        clock.now = 100.0
        assert await expiry.expire_due() == 1
        assert await s.get(b) is None and await s.get(a) is not None and await s.get(cm) is not None
        clock.now = 150.0
        assert await expiry.expire_due() == 1
        assert await s.get(a) is None
        # nothing held for the Events gone: the leak this guards against is per write, not per Event
        assert len(expiry) == 0 and not expiry._due

        # many Events created and deleted by a client: each delete forgets its key at once,
        # and the queue drains as their deadlines pass, deleting nothing
        for i in range(200):
            key = b"/registry/events/ns/e%d" % i
            r = await s.create(key, b"{}")
            expiry.observe([put(key, r)])
            d = await s.delete(key)
            expiry.observe([Event(EventType.DELETE, KeyValue(key, b"", 0, d, 0))])
        assert len(expiry) == 0
        clock.now = 300.0
        assert await expiry.expire_due() == 0
        assert not expiry._due

        # an Event stored before this process started is given the whole TTL from its start
        await s.create(b"/registry/events/ns/old", b"{}")
        later = EventExpiry(lambda: s, ttl=100.0, clock=clock)
        await later.seed()
        assert len(later) == 1
        clock.now = 399.0
        assert await later.expire_due() == 0
        clock.now = 400.0
        assert await later.expire_due() == 1 and await s.get(b"/registry/events/ns/old") is None
    finally:
        await s.close()


async def test_the_server_expires_events_of_both_apis_and_watchers_see_them_go(tmp_path: Path) -> None:
    app = create_app(Config(data_dir=tmp_path / "data", tls=False, scheduler=False, event_ttl=0.3))
    async with app.router.lifespan_context(app), Client.in_process(app.state.front) as c:
        core = "/api/v1/namespaces/default/events"
        listed = await c.list(core)
        await c.create(core, {"metadata": {"name": "core"}, "involvedObject": {"kind": "Pod", "name": "p"},
                              "reason": "R", "message": "m", "type": "Normal"})
        await c.create("/apis/events.k8s.io/v1/namespaces/default/events",
                       {"metadata": {"name": "new"}, "eventTime": "2026-12-07T08:00:00.000000Z",
                        "reportingController": "x/y", "reportingInstance": "i", "action": "A", "reason": "R",
                        "type": "Normal", "regarding": {"kind": "Pod", "name": "p"}})
        deleted: set[str] = set()

        async def watch() -> None:
            async for ev in c.watch(core, resource_version=listed["metadata"]["resourceVersion"]):
                if ev.type == "DELETED":
                    deleted.add(ev.object["metadata"]["name"])
                    if deleted == {"core", "new"}:
                        return

        await asyncio.wait_for(watch(), 10)
        assert (await c.list(core))["items"] == []
        expiry = app.state.server.event_expiry
        assert expiry is not None and len(expiry) == 0


async def test_a_ttl_of_zero_keeps_events(tmp_path: Path) -> None:
    app = create_app(Config(data_dir=tmp_path / "data", tls=False, scheduler=False, event_ttl=0))
    async with app.router.lifespan_context(app):
        assert app.state.server.event_expiry is None
