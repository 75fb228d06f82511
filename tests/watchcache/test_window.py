"""The event window: bounded history for resuming watches, and what its events keep alive."""

from __future__ import annotations

import random
import time

import orjson

from controlplane.registry.attrs import Filter
from controlplane.watchcache.entry import CacheEvent, entry_of
from controlplane.watchcache.window import INDEX_FROM, LINES_KEPT, EventWindow


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


def pod_event(revision: int, name: str, node: str, prev: CacheEvent | None) -> CacheEvent:
    obj = {"apiVersion": "v1", "kind": "Pod", "spec": {"nodeName": node},
           "metadata": {"name": name, "namespace": "ns", "resourceVersion": str(revision)}}
    raw = orjson.dumps(obj)
    entry = entry_of("pods", f"/registry/pods/ns/{name}".encode(), revision, raw, obj)
    return CacheEvent("MODIFIED" if prev else "ADDED", entry, prev.obj if prev else None, time.perf_counter())


def test_a_hinted_resume_gets_exactly_the_events_of_its_value_in_order_with_or_without_the_index() -> None:
    """``since(rev, at, value)`` is the window's events after ``rev`` whose new or old
    version has ``value`` at ``at`` (with others, for a short backlog, that the
    caller's filter drops): from the index for a long one, across evictions and
    compactions that trim the index."""
    rng = random.Random(7)
    at = Filter.parse("pods", None, "spec.nodeName=n0").position_of(("spec.nodeName", "n0"))
    window = EventWindow(0, max_events=INDEX_FROM + 3_000)
    latest: dict[str, CacheEvent] = {}
    nodes = [f"n{i}" for i in range(12)] + [""]
    revision = 0

    def of(node: str, events: list[CacheEvent]) -> list[CacheEvent]:
        return [ev for ev in events
                if ev.obj[3][1][at] == node or (ev.prev is not None and ev.prev[3][1][at] == node)]

    for _ in range(6):
        for _ in range(rng.randrange(1_000, 6_000)):
            revision += 1
            name = f"p{rng.randrange(500)}"
            ev = pod_event(revision, name, rng.choice(nodes), latest.get(name))
            latest[name] = ev
            window.extend([ev] if rng.random() < 0.5 else (ev,))
        for _ in range(20):
            since = rng.randrange(window.start, revision + 1)
            node = rng.choice([*nodes, "nowhere"])
            everything = window.since(since)
            got = window.since(since, at, node)
            assert got is not None and everything is not None
            assert of(node, got) == of(node, everything)
            assert [ev.revision for ev in got] == sorted({ev.revision for ev in got})
            if at in window._indexes:
                assert got == of(node, everything)
        assert window.since(window.start - 1, at, "n1") is None
    assert at in window._indexes  # the long backlogs were answered from the index
    for bucket in window._indexes[at].values():  # compaction trimmed what was evicted long ago
        assert bucket and bucket[-1].revision > window.start


def test_the_window_keeps_its_newest_events_within_the_count_and_bytes_bounds() -> None:
    """Evicted oldest first; ``start`` is the last evicted revision (a resume from it or
    later is served), and the bytes counted are those of the events kept."""
    events = [event(r) for r in range(1, 41)]
    window = EventWindow(0, max_events=10)
    window.extend(events[:4])
    assert window.since(0) == events[:4] and window.start == 0
    window.extend(events[4:30])  # past the count at once
    assert window.since(20) == events[20:30] and len(window) == 10 and window.start == 20
    assert window.bytes == sum(ev.size for ev in events[20:30])
    window.max_bytes = 3 * events[0].size + 10  # then the bytes bound takes the rest
    window.extend(events[30:31])
    assert window.since(28) == events[28:31] and window.start == 28
    assert window.bytes == sum(ev.size for ev in events[28:31])
