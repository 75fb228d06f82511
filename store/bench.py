"""``controlplane bench store``: the store's speed and size, beside its peers, in one run.

Prints one JSON object per line, ``{"bench": "store", "metric", "value", "unit", ...}``,
with ``peer`` and ``ratio`` where a side-by-side peer ran in the same run:

- ``codec``: bytes per realistic pod and microseconds per compress+decompress for
  raw JSON, DEFLATE level 1 (what Kubernetes 1.38 uses), zstd without and with
  the trained dictionary (``--codec-pods``: 3 in 13 train it, the rest are measured);
- ``creates``: durable creates per second with 64 concurrent writers, on LMDB and
  on a real etcd (started here, fsync on) through the same ``Store`` interface;
- ``disk``: bytes on disk per pod for ``--pods`` pods, then after ten status
  updates to each of ``--updated`` of them;
- ``range``: keys per second of a full range at a past revision, values decoded.

The pods come from ``controlplane.podgen``: ``--unique`` distinct pods are
generated and reused under distinct keys (each value is compressed on its own,
so reuse does not flatter the sizes).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import zlib
from collections.abc import Iterator
from typing import Any

import zstandard

from . import interface
from .codec import Codec

BENCH = "store"


def emit(metric: str, value: float, unit: str, **extra: Any) -> None:
    line = {"bench": BENCH, "metric": metric, "value": round(value, 3), "unit": unit, **extra}
    print(json.dumps(line), flush=True)


def _pods(unique: int) -> list[tuple[bytes, bytes]]:
    from controlplane.podgen import PodGenerator

    return PodGenerator(seed=42).pods(unique)


def _keys(pods: list[tuple[bytes, bytes]], n: int) -> Iterator[tuple[bytes, bytes]]:
    for i in range(n):
        key, value = pods[i % len(pods)]
        yield (key if i < len(pods) else key + b"-%d" % (i // len(pods))), value


# -- codec ---------------------------------------------------------------------
def bench_codec(pods: list[tuple[bytes, bytes]], n: int = 13_000) -> Codec:
    """The codec figures over the first ``n`` pods: the dictionary trained on 3 in 13 of them
    (3,000 of the default 13,000), the sizes and times measured on the rest."""
    cut = n * 3 // 13
    train, test = pods[:cut], pods[cut:n]
    codec = Codec()
    for k, v in train:
        codec.observe(k, v)
    data = codec.train(b"/registry/pods/")
    assert data is not None
    codec.add_dictionary(1, b"/registry/pods/", data)
    plain = zstandard.ZstdCompressor(level=codec.config.level)
    plain_d = zstandard.ZstdDecompressor()

    def timed(enc: Any, dec: Any) -> tuple[float, float]:
        frames = [enc(k, v) for k, v in test]
        best = []
        for _ in range(3):
            t0 = time.perf_counter()
            for (k, v) in test:
                enc(k, v)
            for f in frames:
                dec(f)
            t2 = time.perf_counter()
            best.append(t2 - t0)
        assert all(dec(f) == v for f, (_, v) in zip(frames[:200], test[:200], strict=False))
        return statistics.mean(len(f) for f in frames), min(best) / len(test) * 1e6

    raw = statistics.mean(len(v) for _, v in test)
    results = {
        "raw": (raw, 0.0),
        "deflate1": timed(lambda k, v: zlib.compress(v, 1), zlib.decompress),
        "zstd": timed(lambda k, v: plain.compress(v), plain_d.decompress),
        "zstd_dict": timed(codec.encode, codec.decode),
    }
    for name, (size, us) in results.items():
        extra: dict[str, Any] = {"codec": name}
        if name == "zstd_dict":
            extra.update(peer="deflate1", ratio=round(results["deflate1"][0] / size, 2),
                         ratio_to_raw=round(raw / size, 2))
        emit("bytes_per_pod", size, "bytes", **extra)
        if us:
            emit("compress_decompress_us", us, "us", codec=name,
                 **({"peer": "deflate1", "ratio": round(results["deflate1"][1] / us, 2)}
                    if name == "zstd_dict" else {}))
    return codec


# -- creates -------------------------------------------------------------------
async def _creates(s: interface.Store, items: list[tuple[bytes, bytes]], writers: int,
                   seconds: float) -> tuple[int, float]:
    it = iter(items)
    deadline = time.perf_counter() + seconds
    done = 0

    async def writer() -> None:
        nonlocal done
        for k, v in it:
            await s.create(k, v)
            done += 1
            if time.perf_counter() > deadline:
                return
    t0 = time.perf_counter()
    await asyncio.gather(*(writer() for _ in range(writers)))
    return done, time.perf_counter() - t0


async def _warm_dictionary(s: interface.Store, pods: list[tuple[bytes, bytes]], tag: bytes) -> None:
    """Stores in service have their dictionaries: train one before measuring."""
    sem = asyncio.Semaphore(64)

    async def put(k: bytes, v: bytes) -> None:
        async with sem:  # same prefix as the measured keys, so the same dictionary
            await s.create(k.replace(b"/registry/pods/", b"/registry/pods/" + tag, 1), v)
    await asyncio.gather(*(put(k, v) for k, v in pods[:2000]))
    for _ in range(300):
        if await has_dictionary(s, b"/registry/pods/"):
            return
        await asyncio.sleep(0.1)


async def has_dictionary(s: interface.Store, prefix: bytes) -> bool:
    """Whether the store has trained a dictionary for ``prefix`` (each backend knows how)."""
    from .lmdb import LmdbStore

    if isinstance(s, LmdbStore):
        return prefix in s.dictionary_prefixes()
    codec: Codec = s.codec  # type: ignore[attr-defined]
    return codec.active_dictionary(prefix) is not None


async def bench_creates(pods: list[tuple[bytes, bytes]], workdir: str, n: int, writers: int,
                        etcd_seconds: float, with_etcd: bool) -> None:
    from .lmdb import LmdbStore

    s = LmdbStore(os.path.join(workdir, "creates"))
    sizes: list[int] = []
    s.commit_observer = lambda size, _sec: sizes.append(size)
    try:
        await _warm_dictionary(s, pods, b"warm-")
        sizes.clear()
        items = list(_keys(pods, n))
        done, secs = await _creates(s, items, writers, 600)
    finally:
        await s.close()
    lmdb_rate = done / secs
    emit("batch_size_median", statistics.median(sizes), "ops", backend="lmdb")
    if not with_etcd:
        emit("creates_per_s", lmdb_rate, "1/s", backend="lmdb", writers=writers, n=done)
        return
    from .etcd import EtcdStore
    from .etcd.local import LocalEtcd

    with LocalEtcd(os.path.join(workdir, "etcd")) as etcd:
        e = EtcdStore([etcd.endpoint])
        try:
            await _warm_dictionary(e, pods, b"warm-")
            edone, esecs = await _creates(e, items, writers, etcd_seconds)
        finally:
            await e.close()
    etcd_rate = edone / esecs
    emit("creates_per_s", etcd_rate, "1/s", backend="etcd", writers=writers, n=edone)
    emit("creates_per_s", lmdb_rate, "1/s", backend="lmdb", writers=writers, n=done,
         peer="etcd", ratio=round(lmdb_rate / etcd_rate, 2))


# -- disk and range --------------------------------------------------------------
def _status_update(value: bytes, i: int) -> bytes:
    """A kubelet-like status write: restart count, container id and a condition flip."""
    import orjson

    pod = orjson.loads(value)
    for cs in pod.get("status", {}).get("containerStatuses", []):
        cs["restartCount"] = cs.get("restartCount", 0) + 1
        cs["containerID"] = "containerd://" + os.urandom(32).hex()
    for cond in pod.get("status", {}).get("conditions", []):
        if cond["type"] == "Ready":
            cond["status"] = "False" if i % 2 else "True"
            cond["lastTransitionTime"] = f"2026-11-30T10:{i % 60:02d}:00Z"
    return orjson.dumps(pod)


async def bench_disk_and_range(pods: list[tuple[bytes, bytes]], workdir: str, n: int, updated: int,
                               writers: int) -> None:
    from .lmdb import LmdbStore

    path = os.path.join(workdir, "disk")
    s = LmdbStore(path, auto_compact_interval=0)
    try:
        await _warm_dictionary(s, pods, b"warm-")
        items = list(_keys(pods, n))
        t0 = time.perf_counter()
        for i in range(0, n, 100_000):
            await _creates(s, items[i:i + 100_000], writers, 3600)
        load_secs = time.perf_counter() - t0
        emit("load_creates_per_s", n / load_secs, "1/s", backend="lmdb", n=n)
        after_load = await s.revision()
        await s.wait_applied()
        u = s.usage()
        emit("disk_bytes_per_pod", u["used_bytes"] / n, "bytes", pods=n, total_mb=round(u["used_bytes"] / 1e6, 1))

        # ten status updates to each of ``updated`` pods (revisions kept: no compaction)
        subset = items[:updated]
        revs = {k: 0 for k, _ in subset}
        for round_ in range(10):
            upd = iter([(k, _status_update(v, round_)) for k, v in subset])

            async def writer(it: Iterator[tuple[bytes, bytes]]) -> None:
                for k, v in it:
                    revs[k] = await s.update(k, v, 0)
            await asyncio.gather(*(writer(upd) for _ in range(writers)))
        await s.wait_applied()
        u2 = s.usage()
        growth = (u2["used_bytes"] - u["used_bytes"]) / updated
        emit("disk_bytes_per_status_update", growth / 10, "bytes", updated_pods=updated)
        emit("disk_growth_after_10_updates", (u["used_bytes"] / n + growth) / (u["used_bytes"] / n), "x",
             note="bytes per pod after ten status updates each / before")
        emit("disk_bytes_per_pod_projected_10_updates", u["used_bytes"] / n + growth, "bytes", pods=n)

        # a full range at the revision right after the load: updated keys walk back
        t0 = time.perf_counter()
        total = 0
        decoded = 0
        start = b"/registry/pods/"
        end = interface.prefix_end(start)
        while True:
            kvs, _, more = await s.range(start, end, revision=after_load, limit=10_000)
            total += len(kvs)
            decoded += sum(len(kv.value) for kv in kvs)
            if not more:
                break
            start = kvs[-1].key + b"\x00"
        secs = time.perf_counter() - t0
        emit("range_keys_per_s", total / secs, "1/s", keys=total, revision="past",
             decoded_mb_per_s=round(decoded / secs / 1e6, 1))
    finally:
        await s.close()


async def run(args: argparse.Namespace) -> None:
    unique = min(args.unique, args.pods)
    pods = _pods(max(unique, args.codec_pods))
    bench_codec(pods, args.codec_pods)
    workdir = tempfile.mkdtemp(prefix="cp-bench-store-", dir=args.workdir)
    try:
        await bench_creates(pods, workdir, args.creates, args.writers, args.etcd_seconds, not args.no_etcd)
        await bench_disk_and_range(pods, workdir, args.pods, min(args.updated, args.pods), args.writers)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


# the sizes a run takes unless its command line names them, and --quick's
_DEFAULTS = {"pods": 1_000_000, "updated": 50_000, "creates": 200_000, "unique": 50_000, "etcd_seconds": 15.0}
_QUICK = {"pods": 30_000, "updated": 3_000, "creates": 20_000, "unique": 15_000, "etcd_seconds": 3.0}


def main(argv: list[str] | None = None) -> int:
    from controlplane.bench import help_text

    p = argparse.ArgumentParser(prog="controlplane bench store", description=help_text(__doc__),
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    # the sizes' defaults, and --quick's: a size given on the command line wins over both
    p.add_argument("--pods", type=int, help="pods for the disk and range figures (default: 1,000,000; --quick: 30,000)")
    p.add_argument("--updated", type=int,
                   help="pods that get ten status updates each (default: 50,000; --quick: 3,000)")
    p.add_argument("--creates", type=int,
                   help="creates for the LMDB throughput figure (default: 200,000; --quick: 20,000)")
    p.add_argument("--unique", type=int, help="distinct pods generated (default: 50,000; --quick: 15,000)")
    p.add_argument("--writers", type=int, default=64)
    p.add_argument("--codec-pods", type=int, default=13_000,
                   help="pods for the codec figures, 3 in 13 of them to train its dictionary (default: 13,000; "
                        "fewer make a rougher figure, in less time)")
    p.add_argument("--etcd-seconds", type=float, help="how long the etcd peer takes creates (default: 15; --quick: 3)")
    p.add_argument("--no-etcd", action="store_true", help="skip the etcd peer")
    p.add_argument("--workdir", default=None, help="where the stores live (default: the system temp dir)")
    p.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    args = p.parse_args(argv)
    if args.codec_pods < 130:
        p.error(f"--codec-pods {args.codec_pods}: at least 130 (30 to train the dictionary on)")
    sizes = _QUICK if args.quick else _DEFAULTS
    for name, value in sizes.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    if args.workdir is not None:
        # made here, before a minute of codec figures, rather than failing in mkdtemp after them
        try:
            os.makedirs(args.workdir, exist_ok=True)
        except OSError as e:
            p.error(f"--workdir {args.workdir}: {e.strerror}")
    try:
        import uvloop

        uvloop.run(run(args))
    except ImportError:  # pragma: no cover
        asyncio.run(run(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
