"""The event window: bounded history for resuming watches, and what its events keep alive."""

from __future__ import annotations

import time

import orjson

from controlplane.watchcache.entry import CacheEvent, entry_of
from controlplane.watchcache.window import LINES_KEPT, EventWindow


def event(revision: int) -> CacheEvent:
    obj = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": f"p{revision}", "namespace": "ns", "resourceVersion": str(revision)}}
    raw = orjson.dumps(obj)
    return CacheEvent("ADDED", entry_of("pods", f"/registry/pods/ns/p{revision}".encode(), revision, raw, obj),
                      None, time.perf_counter())


def test_only_recent_events_keep_their_watch_lines_and_old_ones_rebuild_them() -> None:
    window = EventWindow(0)
    events = [event(r) for r in range(1, LINES_KEPT + 101)]
    for ev in events:
        ev.item("ADDED")  # dispatched: the line is made once for every watcher
        window.append(ev)
    assert all(ev._items is None for ev in events[:100])
    assert all(ev._items is not None for ev in events[100:])
    old = events[0].item("ADDED")  # a resumed watch still gets the same line
    assert orjson.loads(old.line)["object"]["metadata"]["name"] == "p1"
    # ...built for it and not kept: a long backlog walk must not make old events hold lines again
    assert all(ev._items is None for ev in events[:100])
    assert events[0].item("DELETED").line.startswith(b'{"type":"DELETED"')
    assert events[0]._items is None
    assert window.since(0) == events and len(window) == len(events)
