"""``controlplane bench watchcache``: the writer's wait on the watch cache's lock
while N readers run full LISTs and WatchLists, lazy snapshots beside the naive
copy, in one run.

One process, one event loop, no HTTP: the pods cache (``ResourceCache``) is
loaded with ``--pods`` realistic pods (``controlplane.podgen``; the first
20,000 generated, the rest cloned from them under new names and uids) and fed
pod status updates at ``--writes`` per second, as the store's watch would feed
it. ``N`` reader tasks loop: a full LIST (snapshot, then walk every entry and
join its bytes into 500-item pages, as a response would) and, every other
time, a WatchList (snapshot and watcher registered together, the initial
events walked the same way). Both modes run the same script on the same
entries, for each N of ``--readers``.

Per mode and N it prints (JSON lines, ``peer``/``ratio`` on the lazy lines:
copy's value over lazy's):

- ``writer_lock_wait_{p50,p99,max}``: the applier's wait for the write lock,
  per acquisition (the updates that fell due during a long wait are applied
  in one batch afterwards: one sample; ``apply_delay`` counts them all);
- ``apply_{p50,p99}``: one batch of updates applied, lock wait included;
- ``apply_delay_{p50,p99}``: from an update's due time to its being applied
  (the cache's staleness, which consistent reads wait for);
- ``reader_snapshot_{p50,p99}``: a reader's lock wait plus what it does under
  the lock (O(1) in lazy mode, the copy in copy mode): the snapshot cost;
- ``list_{p50,p99}``: a full LIST or WatchList walk, end to end;
- ``event_loop_lag_p99``, ``writes_per_second`` achieved, ``lists``.

With ``--http-pods N``, first: ``http_paginated_list_rate``, pods per second
of a LIST of N pods in pages of 500 over HTTP from ``controlplane serve``
(``watchcache_http.py``), median of three, per mode. ``--pods 0`` skips the
in-process phase.

Then, lazy only: ``snapshot_take`` (taking one snapshot, uncontended) and
``write_after_snapshot`` (the first write after it, which copies the top
level and one leaf), at this number of pods.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import random
import statistics
import time
import uuid
from typing import Any

import orjson

from store import Event, EventType, KeyValue

from ..gcsettings import settle_heap
from ..podgen import PodGenerator, pod_key
from ..registry.attrs import Filter, attrs_of
from ..watchcache.cache import CacheConfig, ResourceCache, SnapshotMode
from ..watchcache.entry import CacheEvent, Entry, build_entry, entry_json
from ..watchcache.packing import Packer
from ..watchcache.watchers import Watcher
from . import help_text

BENCH = "watchcache"
PREFIX = b"/registry/pods/"
PAGE = 500


def emit(metric: str, value: float, unit: str, **extra: Any) -> None:
    print(json.dumps({"bench": BENCH, "metric": metric, "value": round(value, 4), "unit": unit, **extra}),
          flush=True)


def pct(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def make_pods(n: int, seed: int = 1) -> list[tuple[bytes, bytes]]:
    """``n`` (key, JSON) pairs in key order."""
    gen = PodGenerator(seed=seed)
    base = [gen.pod() for _ in range(min(n, 20_000))]
    out: list[tuple[bytes, bytes]] = []
    for i in range(n):
        pod = base[i % len(base)]
        if i >= len(base):
            meta = dict(pod["metadata"], name=f"{pod['metadata']['name']}-{i}", uid=str(uuid.UUID(int=i)))
            pod = dict(pod, metadata=meta)
        meta = pod["metadata"]
        out.append((pod_key(meta["namespace"], meta["name"]), orjson.dumps(pod)))
    out.sort()
    return out


def updates(pods: list[tuple[bytes, bytes]], count: int, seed: int = 2) -> list[tuple[bytes, bytes]]:
    """``count`` status updates of random pods, made before the clock starts."""
    rnd = random.Random(seed)
    out = []
    for _ in range(count):
        key, value = pods[rnd.randrange(len(pods))]
        pod = orjson.loads(value)
        status = pod.setdefault("status", {})
        status["phase"] = rnd.choice(["Running", "Pending", "Succeeded"])
        status.setdefault("conditions", []).append({"type": "Ready", "status": "True",
                                                    "lastTransitionTime": "2026-01-01T00:00:00Z"})
        out.append((key, orjson.dumps(pod)))
    return out


def packed_entries(pods: list[tuple[bytes, bytes]], revision: int) -> list[tuple[bytes, Entry]]:
    """The pods' entries as the server's cache holds them: packed with a dictionary
    trained on the first ``Packer.train_after`` of them (watchcache.packing)."""
    packer = Packer()
    for _, value in pods[:packer.train_after]:
        packer.pack(value)
    deadline = time.monotonic() + 60
    while not packer.trained and len(pods) >= packer.train_after and time.monotonic() < deadline:
        time.sleep(0.01)
    return [(key, build_entry("pods", key, value, revision, packer.pack)) for key, value in pods]


async def _walk(snap: Any, chunk: int) -> int:
    """A full LIST's work on a snapshot: every entry, joined into pages; returns bytes."""
    total = 0
    page: list[bytes] = []
    for n, (_, entry) in enumerate(snap.items(PREFIX, b"/registry/pods0"), 1):
        page.append(entry_json(entry))
        if len(page) == PAGE:
            total += len(b",".join(page))
            page = []
        if n % chunk == 0:
            await asyncio.sleep(0)
    return total + len(b",".join(page))


async def scenario(mode: SnapshotMode, entries: list[tuple[bytes, Entry]], ups: list[tuple[bytes, bytes]],
                   readers: int, seconds: float, writes: float, revision: int) -> dict[str, Any]:
    writer_waits: list[float] = []
    reader_waits: list[float] = []
    config = CacheConfig(mode=mode, watcher_buffer=1 << 30)
    cache = ResourceCache(PREFIX, "pods", config, revision)
    await cache.load(entries)
    cache.lock._observe_writer = writer_waits.append
    cache.lock._observe_reader = reader_waits.append
    everything = Filter.parse("pods", None, None)
    stop = asyncio.Event()
    applies: list[float] = []
    delays: list[float] = []  # an update's due time to its being applied
    snapshots: list[float] = []
    lists: list[float] = []
    lags: list[float] = []

    async def writer() -> None:
        """Applies what is due at ``writes`` per second; what fell due while it waited
        is applied as one batch, as the store's watch delivers a backlog."""
        rev = revision
        start = time.perf_counter()
        done = 0
        while not stop.is_set():
            due = int((time.perf_counter() - start) * writes) - done
            if due <= 0:
                await asyncio.sleep(1.0 / writes)
                continue
            batch = []
            for _ in range(due):
                key, value = ups[(rev - revision) % len(ups)]
                rev += 1
                batch.append(Event(EventType.PUT, KeyValue(key, value, 1, rev, 2)))
            t = time.perf_counter()
            await cache.apply(batch, rev, t)
            end = time.perf_counter()
            applies.append(end - t)
            delays.extend(end - (start + (done + k + 1) / writes) for k in range(due))
            done += due
            await asyncio.sleep(0)

    async def reader(n: int) -> None:
        watch_list = n % 2 == 1
        while not stop.is_set():
            t = time.perf_counter()
            if watch_list:
                snap, w = await cache.watch_with_state(everything)
            else:
                snap = await cache.snapshot()
            snapshots.append(time.perf_counter() - t)
            await _walk(snap, config.walk_chunk)
            if watch_list:
                w.close()
            lists.append(time.perf_counter() - t)
            watch_list = not watch_list

    async def lag() -> None:
        while not stop.is_set():
            t = time.perf_counter()
            await asyncio.sleep(0.01)
            lags.append(max(0.0, time.perf_counter() - t - 0.01))

    gc.collect()
    tasks = [asyncio.create_task(writer()), asyncio.create_task(lag())]
    tasks += [asyncio.create_task(reader(n)) for n in range(readers)]
    await asyncio.sleep(seconds)
    stop.set()
    await asyncio.gather(*tasks)
    return {
        "writer_lock_wait": writer_waits, "apply": applies,
        "reader_snapshot": snapshots, "list": lists,
        "event_loop_lag": lags, "apply_delay": delays, "writes_per_second": len(delays) / seconds,
        "lists": len(lists),
    }


def report(results: dict[str, dict[str, Any]], readers: int, pods: int) -> None:
    lazy, copy = results["lazy"], results["copy"]
    rows: list[tuple[str, str, float]] = []
    for name in ("writer_lock_wait", "apply", "apply_delay", "reader_snapshot", "list"):
        for q, label in ((0.5, "p50"), (0.99, "p99")):
            rows.append((f"{name}_{label}", name, q))
    rows.append(("writer_lock_wait_max", "writer_lock_wait", 1.0))
    rows.append(("event_loop_lag_p99", "event_loop_lag", 0.99))
    for metric, series, q in rows:
        c = pct(copy[series], q) * 1e3
        v = pct(lazy[series], q) * 1e3
        emit(metric, c, "ms", mode="copy", readers=readers, pods=pods)
        emit(metric, v, "ms", mode="lazy", readers=readers, pods=pods, peer="copy",
             ratio=round(c / v, 1) if v > 0 else None)
    for metric in ("writes_per_second", "lists"):
        emit(metric, copy[metric], "1/s" if metric == "writes_per_second" else "count", mode="copy",
             readers=readers, pods=pods)
        emit(metric, lazy[metric], "1/s" if metric == "writes_per_second" else "count", mode="lazy",
             readers=readers, pods=pods, peer="copy",
             ratio=round(lazy[metric] / copy[metric], 1) if copy[metric] else None)


async def snapshot_costs(entries: list[tuple[bytes, Entry]], ups: list[tuple[bytes, bytes]],
                         revision: int) -> None:
    cache = ResourceCache(PREFIX, "pods", CacheConfig(mode="lazy", retained_snapshots=0), revision)
    await cache.load(entries)
    takes: list[float] = []
    writes: list[float] = []
    rev = revision
    for i in range(2000):
        t = time.perf_counter()
        await cache.snapshot()
        takes.append(time.perf_counter() - t)
        key, value = ups[i % len(ups)]
        rev += 1
        t = time.perf_counter()
        await cache.apply([Event(EventType.PUT, KeyValue(key, value, 1, rev, 2))], rev, t)
        writes.append(time.perf_counter() - t)
    pods = len(entries)
    emit("snapshot_take_p50", statistics.median(takes) * 1e6, "us", mode="lazy", pods=pods)
    emit("write_after_snapshot_p50", statistics.median(writes) * 1e6, "us", mode="lazy", pods=pods)


async def http_phase(n: int) -> None:
    from .watchcache_http import http_lists

    rates, memory = await http_lists(make_pods(n))
    lazy_memory = memory["lazy"]
    emit("server_rss", lazy_memory["VmRSS"] / 2**20, "MiB", pods=n, mode="lazy",
         anon_mib=round(lazy_memory["RssAnon"] / 2**20), file_mib=round(lazy_memory["RssFile"] / 2**20),
         peak_mib=round(lazy_memory["VmHWM"] / 2**20))
    emit("server_rss_per_pod", lazy_memory["VmRSS"] / n, "bytes", pods=n, mode="lazy")
    copy, lazy = statistics.median(rates["copy"]), statistics.median(rates["lazy"])
    emit("http_paginated_list_rate", copy, "pods/s", mode="copy", pods=n, page=500)
    emit("http_paginated_list_rate", lazy, "pods/s", mode="lazy", pods=n, page=500, peer="copy",
         ratio=round(lazy / copy, 2) if copy else None)


async def kubelet_phase(kubelets: int, pods_per_node: int, rate: float, seconds: float) -> dict[str, float]:
    """``kubelets`` watchers filtered by ``spec.nodeName`` (one per node, as kubelets
    watch), each drained by its own task, while pod status updates arrive at
    ``rate`` per second spread over all nodes. Returns delivery latency (an update's
    due time to its watcher's task taking it) and process CPU per applied event."""
    base = make_pods(min(20_000, kubelets * pods_per_node))
    pods: list[tuple[bytes, bytes]] = []
    for i in range(kubelets * pods_per_node):
        _, value = base[i % len(base)]
        pod = orjson.loads(value)
        pod["metadata"]["name"] = f"kp-{i}"
        pod["spec"]["nodeName"] = f"node-{i % kubelets}"
        pods.append((pod_key(pod["metadata"]["namespace"], f"kp-{i}"), orjson.dumps(pod)))
    pods.sort()
    ups = updates(pods, 8000)
    revision = 1_000_000
    cache = ResourceCache(PREFIX, "pods", CacheConfig(mode="lazy"), revision)
    await cache.load(packed_entries(pods, revision))
    settle_heap()  # the loaded cache, as the server's startup leaves it (gcsettings); watchers come after
    watchers = []
    for n in range(kubelets):
        w = Watcher(Filter.parse("pods", None, f"spec.nodeName=node-{n}"), revision, cache.config.watcher_buffer)
        cache.watchers.add(w)
        watchers.append(w)
    delivery: list[float] = []
    stop = asyncio.Event()
    due_at: dict[int, float] = {}

    async def kubelet(w: Watcher) -> None:
        while not stop.is_set():
            await w.wakeup.wait()
            w.wakeup.clear()
            now = time.perf_counter()
            while w.buffer:
                ev, _ = w.buffer.popleft()
                delivery.append(now - due_at.get(ev.revision, now))

    applied = 0

    async def writer() -> None:
        nonlocal applied
        rev = revision
        start = time.perf_counter()
        while not stop.is_set():
            due = int((time.perf_counter() - start) * rate) - applied
            if due <= 0:
                await asyncio.sleep(1.0 / rate)
                continue
            batch = []
            for k in range(due):
                key, value = ups[(rev - revision) % len(ups)]
                rev += 1
                due_at[rev] = start + (applied + k + 1) / rate
                batch.append(Event(EventType.PUT, KeyValue(key, value, 1, rev, 2)))
            await cache.apply(batch, rev, time.perf_counter())
            applied += due
            await asyncio.sleep(0)

    tasks = [asyncio.create_task(kubelet(w)) for w in watchers]
    cpu = time.process_time()
    wtask = asyncio.create_task(writer())
    await asyncio.sleep(seconds)
    stop.set()
    await wtask
    cpu = time.process_time() - cpu
    for w in watchers:
        w.wakeup.set()
    await asyncio.gather(*tasks)
    return {"delivery_p50": pct(delivery, 0.5), "delivery_p99": pct(delivery, 0.99),
            "cpu_per_event": cpu / max(applied, 1), "events_per_second": applied / seconds,
            "watchers_closed": float(sum(w.closed for w in watchers))}


async def kubelets_phase(counts: list[int], rate: float, seconds: float) -> None:
    results = {n: await kubelet_phase(n, 2, rate, seconds) for n in counts}
    smallest = results[min(counts)]
    for n, r in results.items():
        extra: dict[str, Any] = {"kubelets": n, "updates_per_s_asked": rate}
        emit("kubelet_delivery_p50", r["delivery_p50"] * 1e3, "ms", **extra)
        emit("kubelet_delivery_p99", r["delivery_p99"] * 1e3, "ms", **extra)
        emit("kubelet_events_per_second", r["events_per_second"], "1/s", **extra)
        emit("kubelet_watchers_closed", r["watchers_closed"], "count", **extra)
        ratio = round(r["cpu_per_event"] / smallest["cpu_per_event"], 2) if n != min(counts) else None
        emit("kubelet_cpu_per_event", r["cpu_per_event"] * 1e6, "us", **extra,
             **({"peer": f"{min(counts)} kubelets", "ratio": ratio} if ratio is not None else {}))


def pods_on_nodes(count: int, nodes: int, prefix: str) -> list[tuple[bytes, bytes]]:
    """``count`` podgen pods named ``prefix-i``, spread round-robin on ``node-0``.. ``node-{nodes-1}``,
    as (key, JSON) in key order."""
    base = make_pods(min(20_000, count))
    pods: list[tuple[bytes, bytes]] = []
    for i in range(count):
        pod = orjson.loads(base[i % len(base)][1])
        pod["metadata"]["name"] = f"{prefix}-{i}"
        pod["spec"]["nodeName"] = f"node-{i % nodes}"
        pods.append((pod_key(pod["metadata"]["namespace"], f"{prefix}-{i}"), orjson.dumps(pod)))
    pods.sort()
    return pods


async def resume_phase(nodes: int, backlog: int, resumes: int) -> None:
    """A kubelet resuming its watch is handed the window's events since its revision:
    the whole cluster's, ``backlog`` pod updates over ``nodes`` nodes. Per resume,
    the cost of picking its node's events out of them three ways, on the same
    events, in turn: the naive way (the watcher's filter on each event's new and old
    version), by its index hint (``Watcher.seen``: one comparison an event), and
    from the window's index by node (``EventWindow.since`` with the hint, built once,
    timed apart, then kept with every event added)."""
    pods = pods_on_nodes(2 * nodes, nodes, "rp")
    revision = 1_000_000
    cache = ResourceCache(PREFIX, "pods", CacheConfig(mode="lazy", window_events=backlog + 1), revision)
    await cache.load(packed_entries(pods, revision))
    ups = updates(pods, backlog)
    events = [Event(EventType.PUT, KeyValue(key, value, 1, revision + i + 1, 2)) for i, (key, value) in enumerate(ups)]
    await cache.apply(events, revision + len(events), time.perf_counter())
    window = cache.window.since(revision)
    assert window is not None and len(window) == len(events)
    probe = Watcher(Filter.parse("pods", None, "spec.nodeName=node-0"), revision, 1)
    t = time.perf_counter()
    cache.window.since(revision, probe.hint_at, "node-0")  # builds the index by node
    build = time.perf_counter() - t
    rng = random.Random(3)
    ways = ("naive", "hinted", "indexed")
    times: dict[str, list[float]] = {way: [] for way in ways}
    seen: dict[str, list[tuple[CacheEvent, str]]] = {}
    for n in range(resumes):
        w = Watcher(Filter.parse("pods", None, f"spec.nodeName=node-{rng.randrange(nodes)}"), revision, 1 << 30)
        assert w.hint is not None
        for way in ways[n % 3:] + ways[:n % 3]:
            t = time.perf_counter()
            if way == "naive":
                got = [(ev, kind) for ev in window if (kind := w.kind(ev)) is not None]
            elif way == "hinted":
                got = w.seen(window)
            else:
                got = w.seen(cache.window.since(revision, w.hint_at, w.hint[1]) or [])
            times[way].append(time.perf_counter() - t)
            seen[way] = got
        assert seen["naive"] == seen["hinted"] == seen["indexed"]
    p50 = {way: statistics.median(times[way]) for way in ways}
    extra: dict[str, Any] = {"nodes": nodes, "backlog": len(window), "resumes": resumes}
    emit("resume_backlog_walk_p50", p50["naive"] * 1e3, "ms", way="naive", **extra)
    emit("resume_backlog_walk_p50", p50["hinted"] * 1e3, "ms", way="hinted", peer="naive",
         ratio=round(p50["naive"] / p50["hinted"], 2), **extra)
    emit("resume_backlog_walk_p50", p50["indexed"] * 1e3, "ms", way="indexed", peer="hinted",
         ratio=round(p50["hinted"] / p50["indexed"], 1), **extra)
    emit("resume_backlog_per_event", p50["hinted"] / len(window) * 1e9, "ns", way="hinted", **extra)
    emit("resume_index_build", build * 1e3, "ms", per_event_ns=round(build / len(window) * 1e9), **extra)


def selector_phase(pods: int, rounds: int = 7) -> None:
    """A label-selected LIST's test of each entry: ``app.kubernetes.io/name=X`` over
    ``pods`` podgen pods' attrs, by the filter's label pairs as the attrs hold them
    (``Filter.label_pairs``) beside the general way (the labels made a dict, each
    requirement evaluated), on the same entries, alternating; median of ``rounds``."""
    gen = PodGenerator(seed=1)
    objs = [gen.pod(f"ns-{i % 50}", bound=True) for i in range(pods)]
    attrs = [attrs_of("pods", o) for o in objs]
    names = sorted({str(name) for o in objs
                    if (name := (o["metadata"].get("labels") or {}).get("app.kubernetes.io/name"))})
    f = Filter.parse("pods", f"app.kubernetes.io/name={names[0]}", None)
    assert f.label_pairs is not None
    general = f.labels
    times: dict[str, list[float]] = {"pairs": [], "dict": []}
    found: dict[str, int] = {}
    for n in range(rounds):
        for way in (("pairs", "dict") if n % 2 == 0 else ("dict", "pairs")):
            t = time.perf_counter()
            if way == "pairs":
                found[way] = sum(1 for a in attrs if f.matches(a))
            else:
                found[way] = sum(1 for a in attrs if general.matches(dict(a[0]) if a[0] else None))
            times[way].append(time.perf_counter() - t)
    assert found["pairs"] == found["dict"]
    pairs, naive = statistics.median(times["pairs"]), statistics.median(times["dict"])
    emit("label_selected_match_per_entry", naive / pods * 1e9, "ns", way="dict", pods=pods, matched=found["dict"])
    emit("label_selected_match_per_entry", pairs / pods * 1e9, "ns", way="pairs", pods=pods, matched=found["pairs"],
         peer="dict", ratio=round(naive / pairs, 2))


async def node_list_phase(pods: int, nodes: int, lists: int) -> None:
    """A kubelet's LIST of its node's pods (``spec.nodeName=node-N``, the current state)
    over a cache of ``pods`` pods on ``nodes`` nodes: the node's keys read from the
    cache's index (``valueindex``) beside the walk of every entry with the filter, on the
    same snapshot, alternating; median of ``lists``. Also the index's memory (tracemalloc,
    rebuilt once from the same entries)."""
    import tracemalloc

    from ..watchcache.reads import _pick, _walk
    from ..watchcache.valueindex import ValueIndex

    items = pods_on_nodes(pods, nodes, "np")
    revision = 1_000_000
    cache = ResourceCache(PREFIX, "pods", CacheConfig(mode="lazy"), revision)
    entries = packed_entries(items, revision)
    await cache.load(entries)
    assert cache.index is not None
    end = PREFIX[:-1] + bytes([PREFIX[-1] + 1])
    rng = random.Random(5)
    times: dict[str, list[float]] = {"walk": [], "index": []}
    for n in range(lists):
        node = f"node-{rng.randrange(nodes)}"
        match = Filter.parse("pods", None, f"spec.nodeName={node}")
        got: dict[str, list[bytes]] = {}
        for way in (("walk", "index") if n % 2 == 0 else ("index", "walk")):
            t = time.perf_counter()
            if way == "walk":
                snap = await cache.snapshot()
                got[way], _ = await _walk(snap, PREFIX, end, match, 0, cache.config.walk_chunk)
            else:
                snap, keys = await cache.snapshot_with_keys(node)
                got[way], _ = await _pick(snap, keys, PREFIX, end, match, 0, cache.config.walk_chunk)
            times[way].append(time.perf_counter() - t)
        assert got["walk"] == got["index"] and got["walk"]
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    index = ValueIndex(cache.index.at)
    index.load(entries)
    size = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    walk, indexed = statistics.median(times["walk"]), statistics.median(times["index"])
    extra: dict[str, Any] = {"pods": pods, "nodes": nodes, "lists": lists}
    emit("node_list_p50", walk * 1e3, "ms", way="walk", **extra)
    emit("node_list_p50", indexed * 1e3, "ms", way="index", peer="walk", ratio=round(walk / indexed, 1), **extra)
    emit("node_index_bytes_per_pod", size / pods, "B", **extra)


async def run(args: argparse.Namespace) -> None:
    if args.selector_pods:
        selector_phase(args.selector_pods)
    if args.node_lists:
        await node_list_phase(args.node_list_pods, args.node_list_nodes, args.node_lists)
    if args.resumes:
        await resume_phase(args.resume_nodes, args.resume_backlog, args.resumes)
    if args.http_pods:
        await http_phase(args.http_pods)
    if args.kubelets:
        await kubelets_phase(args.kubelets, args.kubelet_writes, args.seconds)
    if not args.pods:
        return
    t = time.perf_counter()
    pods = make_pods(args.pods)
    ups = updates(pods, 4000)
    revision = 1_000_000
    entries = packed_entries(pods, revision)
    del pods
    settle_heap()  # the loaded state lives for the whole run: the server's GC settings (gcsettings)
    emit("setup", time.perf_counter() - t, "s", pods=args.pods)
    await snapshot_costs(entries, ups, revision)
    for n in args.readers:
        results = {mode: await scenario(mode, entries, ups, n, args.seconds, args.writes, revision)
                   for mode in ("copy", "lazy")}
        report(results, n, args.pods)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="controlplane bench watchcache", description=help_text(__doc__),
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pods", type=int, default=100_000, help="pods in the cache (default: %(default)s)")
    p.add_argument("--readers", type=lambda s: [int(x) for x in s.split(",")], default=[1, 10, 50],
                   help="comma-separated reader counts, one run per count and mode (default: 1,10,50)")
    p.add_argument("--writes", type=float, default=1000.0, help="pod updates per second asked (default: 1000)")
    p.add_argument("--seconds", type=float, default=5.0, help="per mode and reader count (default: 5)")
    p.add_argument("--http-pods", type=int, default=0, metavar="N",
                   help="first, list N pods in pages of 500 over HTTP from a real server, per mode (default: off)")
    p.add_argument("--kubelets", type=lambda s: [int(x) for x in s.split(",")], default=[], metavar="N,N",
                   help="first, the kubelet fan-out: N watchers filtered by spec.nodeName (2 pods per node), "
                        "per count, e.g. 1000,10000 (default: off)")
    p.add_argument("--kubelet-writes", type=float, default=2000.0,
                   help="pod updates per second in the kubelet fan-out (default: %(default)s)")
    p.add_argument("--node-lists", type=int, default=0, metavar="N",
                   help="first, N kubelet LISTs of one node's pods (spec.nodeName), from the cache's index beside "
                        "the walk of every entry")
    p.add_argument("--node-list-pods", type=int, default=100_000,
                   help="pods in the node-list phase (default: %(default)s)")
    p.add_argument("--node-list-nodes", type=int, default=1_000,
                   help="nodes in the node-list phase (default: %(default)s)")
    p.add_argument("--selector-pods", type=int, default=0, metavar="N",
                   help="first, a label selector tested on N pods' attrs, by label pairs beside the general "
                        "way (default: off)")
    p.add_argument("--resumes", type=int, default=0, metavar="N",
                   help="first, N kubelet watches resumed over a backlog of the whole cluster's events, "
                        "by index hint beside the naive filter (default: off)")
    p.add_argument("--resume-nodes", type=int, default=10_000, help="nodes in the resume phase (default: %(default)s)")
    p.add_argument("--resume-backlog", type=int, default=20_000,
                   help="pod updates in the resumed watches' backlog (default: %(default)s)")
    args = p.parse_args(argv)
    asyncio.run(run(args))
    return 0
