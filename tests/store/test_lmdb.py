"""What only the LMDB engine does: files, processes, crashes, growth, compaction, history."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import lmdb
import pytest

import store
from store.lmdb import LmdbStore
from store.lmdb import engine as engine_mod
from tests.tmpfs import small_tmpfs

pytestmark = pytest.mark.asyncio
ROOT = Path(__file__).resolve().parents[2]


def worker(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "tests.store.lmdb_worker", *args], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def log_records(s: LmdbStore) -> int:
    return s.usage()["records"]


async def test_reopen_keeps_everything_and_revisions_continue(tmp_path: Path) -> None:
    s = LmdbStore(str(tmp_path / "db"))
    r1 = await s.create(b"/a", b"1" * 100)
    r2 = await s.update(b"/a", b"2" * 100, r1)
    r3 = await s.create(b"/b", b"b")
    await s.delete(b"/b", r3)
    await s.close()
    s = LmdbStore(str(tmp_path / "db"))
    try:
        assert await s.revision() == r3 + 1
        assert (await s.get(b"/a")).value == b"2" * 100  # type: ignore[union-attr]
        assert (await s.get(b"/a", r1)).value == b"1" * 100  # type: ignore[union-attr]
        assert (await s.get(b"/b", r3)).value == b"b"  # type: ignore[union-attr]
        assert await s.get(b"/b") is None
        assert await s.create(b"/c", b"c") == r3 + 2
        assert r2 == r1 + 1
    finally:
        await s.close()


async def test_a_second_process_reads_writes_and_watches_the_same_store(tmp_path: Path) -> None:
    path = str(tmp_path / "db")
    s = LmdbStore(path, poll_interval=0.002)
    try:
        start = await s.create(b"/mine/0", b"from parent")
        w = s.watch(b"/theirs/", store.prefix_end(b"/theirs/"), start)
        p = worker("write", path, "/theirs/", "200", "8")
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
        acks = {line.split()[1].encode(): int(line.split()[2]) for line in out.splitlines()}
        assert len(acks) == 200
        seen: dict[bytes, int] = {}
        async def drain() -> None:
            async for events in w:
                for e in events:
                    assert e.kv.key not in seen
                    seen[e.kv.key] = e.kv.mod_revision
                if len(seen) == 200:
                    return
        await asyncio.wait_for(drain(), 30)
        assert seen == acks
        # interleaved writers: ours and theirs share one revision sequence
        mine = await s.create(b"/mine/1", b"after")
        assert mine == max(acks.values()) + 1
        assert (await s.get(b"/theirs/0000007")).value == b"/theirs/0000007" * 20  # type: ignore[union-attr]
        r = worker("read", path, "/mine/1")
        assert r.communicate(timeout=60)[0].strip() == "after"
        # their watch sees our writes
        wp = worker("watch", path, "/mine/", str(mine + 1), "3")
        assert wp.stdout is not None and wp.stdout.readline().strip() == "ready"
        revs = [await s.create(f"/mine/x{i}".encode(), b"v") for i in range(3)]
        out, err = wp.communicate(timeout=60)
        assert [int(line.split()[2]) for line in out.splitlines()] == revs, err
    finally:
        await s.close()


async def test_kill_9_during_64_concurrent_writers_loses_no_acknowledged_write(tmp_path: Path) -> None:
    path = str(tmp_path / "db")
    acked: dict[bytes, int] = {}
    with worker("write", path, "/crash/", "1000000", "64") as p:
        assert p.stdout is not None and p.stderr is not None
        deadline = time.monotonic() + 60
        while len(acked) < 3000 and time.monotonic() < deadline:
            line = p.stdout.readline()
            if not line:
                break
            _, ack_key, ack_rev = line.split()
            acked[ack_key.encode()] = int(ack_rev)
        os.kill(p.pid, signal.SIGKILL)
        # acks already written to the pipe before the kill count too
        for line in p.stdout.read().splitlines():
            parts = line.split()
            if len(parts) == 3:
                acked[parts[1].encode()] = int(parts[2])
        p.wait()
        assert p.returncode == -signal.SIGKILL
        assert len(acked) >= 3000, p.stderr.read()
    s = LmdbStore(path)
    try:
        kvs, at, _ = await s.range(b"/crash/", store.prefix_end(b"/crash/"))
        stored = {kv.key: kv for kv in kvs}
        for key, r in acked.items():
            assert key in stored, key
            assert stored[key].mod_revision == r and stored[key].value == key * 20
        assert at >= max(acked.values())
        assert await s.create(b"/after-crash", b"x") == at + 1
    finally:
        await s.close()


async def test_kill_9_during_bulk_updates_loses_no_acknowledged_update(tmp_path: Path) -> None:
    """``update_many`` hands the writer one request for many updates, answered at once:
    every update it acknowledged is in the store after a kill -9, at its revision."""
    path = str(tmp_path / "db")
    acked: list[tuple[bytes, int, int]] = []
    with worker("update", path, "/bulk/", "500", "200") as p:
        assert p.stdout is not None and p.stderr is not None
        deadline = time.monotonic() + 60
        while len(acked) < 3000 and time.monotonic() < deadline:
            line = p.stdout.readline()
            if not line:
                break
            _, name, number, times = line.split()
            acked.append((name.encode(), int(number), int(times)))
        os.kill(p.pid, signal.SIGKILL)
        for line in p.stdout.read().splitlines():
            parts = line.split()
            if len(parts) == 4:
                acked.append((parts[1].encode(), int(parts[2]), int(parts[3])))
        p.wait()
        assert len(acked) >= 3000, p.stderr.read()
    s = LmdbStore(path)
    try:
        revisions = [rev for _, rev, _ in acked]
        assert len(set(revisions)) == len(revisions)  # each update its own revision
        for key, rev, round_ in acked:
            kv = await s.get(key, rev)
            assert kv is not None and kv.mod_revision == rev and kv.value == key + b"@%d" % round_
        assert await s.revision() >= max(revisions)
    finally:
        await s.close()



@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
async def test_the_applier_outlives_a_stop_signal_to_the_group(tmp_path: Path, sig: int) -> None:
    """Ctrl-C, or a SIGTERM to `serve`'s process group, reaches the applier too: it goes on
    until the store, closing, closes its pipe, and is not replaced meanwhile."""
    s = LmdbStore(str(tmp_path / "db"))
    try:
        await s.create(b"/a", b"1")  # (the first write starts it)
        applier = s._applier
        assert applier is not None
        deadline = time.monotonic() + 10
        while s.usage()["unapplied"]:  # the write applied: past its start, where it says what it ignores
            assert time.monotonic() < deadline
            await asyncio.sleep(0.01)
        applier.send_signal(sig)
        with pytest.raises(subprocess.TimeoutExpired):
            applier.wait(0.5)
        await s.create(b"/b", b"2")
        assert s._applier is applier
    finally:
        await s.close()
    assert applier.returncode == 0


async def test_an_applier_that_cannot_apply_says_so_once_retrying_and_once_applying_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """On a full disk the applier retries every RETRY_SECONDS; it said so each time, twice a
    second into a log that is often on that disk."""
    from store.lmdb import applier as applier_mod

    path = str(tmp_path / "db")
    await LmdbStore(path).close()
    applier = applier_mod.Applier(path)
    failures = iter([True] * 40)

    def apply_once() -> bool:
        if next(failures, False):
            raise OSError(28, "No space left on device")
        return False

    monkeypatch.setattr(applier, "apply_once", apply_once)
    monkeypatch.setattr(applier_mod, "RETRY_SECONDS", 0.001)
    read, write = os.pipe()
    stdin = os.fdopen(read, "r")
    monkeypatch.setattr(sys, "stdin", stdin)
    closer = asyncio.get_running_loop().call_later(0.5, os.close, write)  # the owner's pipe closes
    try:
        await asyncio.to_thread(applier.run, 0.001, 0.001)
    finally:
        closer.cancel()
        applier.close()
        stdin.close()
    said = capsys.readouterr().err.splitlines()
    assert said == ["store applier: [Errno 28] No space left on device; retrying every 0.001 s",
                    "store applier: applying again"]

async def test_a_full_map_grows_itself(tmp_path: Path) -> None:
    s = LmdbStore(str(tmp_path / "db"), map_size=256 * 1024)
    try:
        values = {f"/grow/{i:04d}".encode(): os.urandom(20_000) for i in range(200)}  # ~4 MB
        await asyncio.gather(*(s.create(k, v) for k, v in values.items()))
        await s.close()  # the applier's last pass moves everything into LMDB, growing the map
        s = LmdbStore(str(tmp_path / "db"), map_size=256 * 1024)
        kvs, _, _ = await s.range(b"/grow/", store.prefix_end(b"/grow/"))
        assert {kv.key: kv.value for kv in kvs} == values
        assert s.usage()["records"] == 200
        assert s._env.info()["map_size"] > 256 * 1024
    finally:
        await s.close()


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 3 MiB filesystem (tmpfs) for the disk-full test; needs root, as CI and `make test` run."""
    with small_tmpfs(tmp_path / "small", "3m") as mnt:
        yield mnt


async def test_a_full_disk_gives_a_clear_error_and_loses_nothing_acknowledged(small_disk: Path) -> None:
    path = str(small_disk / "db")
    s = LmdbStore(path)
    acked: dict[bytes, bytes] = {}
    error: BaseException | None = None
    try:
        for i in range(1000):
            k, v = f"/full/{i:04d}".encode(), os.urandom(50_000)
            try:
                await s.create(k, v)
            except store.StorageFull as e:
                error = e
                break
            acked[k] = v
        assert isinstance(error, store.StorageFull) and "disk full" in str(error)
        assert acked
        # still readable, and still refusing cleanly
        assert (await s.get(next(iter(acked)))).value == acked[next(iter(acked))]  # type: ignore[union-attr]
        with pytest.raises(store.StorageFull):
            await s.create(b"/full/more", os.urandom(200_000))
    finally:
        await s.close()
    # Still full: the store cannot move its WAL into LMDB, and says so, touching nothing.
    with pytest.raises(store.StorageFull):
        LmdbStore(path)
    # Space freed (as an operator would): everything acknowledged is there.
    subprocess.run(["mount", "-o", "remount,size=64m", str(small_disk)], check=True)
    s = LmdbStore(path)
    try:
        kvs, _, _ = await s.range(b"/full/", store.prefix_end(b"/full/"))
        assert {kv.key: kv.value for kv in kvs} == acked
    finally:
        await s.close()


async def test_foreign_or_corrupt_files_are_refused_and_left_untouched(tmp_path: Path) -> None:
    f = tmp_path / "a-file"
    f.write_bytes(b"precious")
    with pytest.raises(store.CorruptStore):
        LmdbStore(str(f))
    assert f.read_bytes() == b"precious"

    d = tmp_path / "foreign-dir"
    d.mkdir()
    (d / "notes.txt").write_text("mine")
    with pytest.raises(store.CorruptStore):
        LmdbStore(str(d))
    assert os.listdir(d) == ["notes.txt"]

    g = tmp_path / "garbage"
    g.mkdir()
    (g / "data.mdb").write_bytes(os.urandom(8192))
    before = (g / "data.mdb").read_bytes()
    with pytest.raises(store.CorruptStore):
        LmdbStore(str(g))
    assert (g / "data.mdb").read_bytes() == before

    other = tmp_path / "other-lmdb"
    env = lmdb.open(str(other), max_dbs=4)
    with env.begin(write=True) as txn:
        txn.put(b"someone", b"else's")
    env.close()
    before = (other / "data.mdb").read_bytes()
    with pytest.raises(store.CorruptStore):
        LmdbStore(str(other))
    assert (other / "data.mdb").read_bytes() == before


async def test_an_empty_data_file_is_another_opener_creating_the_store(tmp_path: Path) -> None:
    """Processes opening a new directory together (serve --workers 2): one may find the
    data file the other's LMDB open has just created, still empty. A new store, not a
    foreign file (it was refused as 'not an LMDB file', and that server exited)."""
    path = tmp_path / "db"
    path.mkdir()
    (path / "data.mdb").write_bytes(b"")
    s = LmdbStore(str(path))
    try:
        rev = await s.create(b"/k", b"v")
        kv = await s.get(b"/k")
        assert kv is not None and kv.mod_revision == rev
    finally:
        await s.close()


async def test_compaction_removes_superseded_history_from_disk(tmp_path: Path) -> None:
    path = tmp_path / "db"
    s = LmdbStore(str(path))
    try:
        keys = [f"/c/{i}".encode() for i in range(50)]
        revs = {k: await s.create(k, b"v0" * 50) for k in keys}
        for n in range(1, 10):
            for k in keys:
                revs[k] = await s.update(k, f"v{n}".encode() * 50, revs[k])
        for k in keys[:10]:
            await s.delete(k)
        assert log_records(s) == 50 * 10 + 10
        await s.compact(await s.revision())
        for _ in range(100):
            if log_records(s) == 41:  # the latest of 40 keys, and the tombstone at the point
                break
            await asyncio.sleep(0.05)
        assert log_records(s) == 41
        kvs, _, _ = await s.range(b"/c/", store.prefix_end(b"/c/"))
        assert sorted(kv.key for kv in kvs) == sorted(keys[10:])
        assert all(kv.value == b"v9" * 50 and kv.version == 10 for kv in kvs)
        assert await s.create(keys[0], b"reborn") > 0  # a dropped tombstone's key can live again
    finally:
        await s.close()


async def test_automatic_compaction_keeps_history_bounded(tmp_path: Path) -> None:
    path = tmp_path / "db"
    s = LmdbStore(str(path), auto_compact_interval=0.2)
    try:
        rev = await s.create(b"/lease", b"0" * 64)
        for i in range(1, 301):
            rev = await s.update(b"/lease", str(i).encode() * 64, rev)
            if i % 100 == 0:
                await asyncio.sleep(0.25)
        for _ in range(200):  # the policy ticks every 0.2 s; the applier then compacts
            if await s.compacted_revision() > 1 and log_records(s) < 200:
                break
            await asyncio.sleep(0.05)
        assert await s.compacted_revision() > 1
        assert log_records(s) < 200
    finally:
        await s.close()


async def test_history_is_stored_as_deltas_and_reads_back_exactly(tmp_path: Path) -> None:
    import orjson

    from controlplane.podgen import PodGenerator
    sizes = {}
    for deltas in (True, False):
        path = tmp_path / f"db-{deltas}"
        s = LmdbStore(str(path), history_deltas=deltas)
        gen = PodGenerator(seed=9)
        pods = [gen.pod() for _ in range(300)]
        keys = [f"/registry/pods/{p['metadata']['namespace']}/{p['metadata']['name']}".encode() for p in pods]
        values = [orjson.dumps(p) for p in pods]
        # each round's writes submitted together (committed in groups, not a sync each)
        history = {k: [(rev, v)] for k, v, rev in
                   zip(keys, values, await asyncio.gather(*(s.create(k, v) for k, v in zip(keys, values, strict=True))),
                       strict=True)}
        for _ in range(10):
            values = [orjson.dumps(gen.status_update(p)) for p in pods]
            revs = await asyncio.gather(*(s.update(k, v, history[k][-1][0]) for k, v in zip(keys, values, strict=True)))
            for k, v, rev in zip(keys, values, revs, strict=True):
                history[k].append((rev, v))
        for k, versions in list(history.items())[:40]:
            for rev, v in versions:
                assert (await s.get(k, rev)).value == v  # type: ignore[union-attr]
        await s.close()
        s = LmdbStore(str(path))  # everything in LMDB now
        sizes[deltas] = s.usage(scan=True)["record_bytes"]
        await s.close()
    assert sizes[True] < sizes[False] * 0.5, sizes


async def test_a_watcher_that_falls_behind_catches_up_from_the_log(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine_mod, "_WATCH_BUFFER", 50)
    s = LmdbStore(str(tmp_path / "db"))
    try:
        w = s.watch(b"/w/", store.prefix_end(b"/w/"))
        it = w.__aiter__()
        first = asyncio.ensure_future(it.__anext__())
        await asyncio.sleep(0.05)
        revs = [await s.create(b"/w/first", b"x")]
        await first
        revs += list(await asyncio.gather(*(s.create(f"/w/{i:04d}".encode(), b"v") for i in range(500))))
        got: list[int] = []
        while len(got) < 500:
            got += [e.kv.mod_revision for e in await asyncio.wait_for(it.__anext__(), 10)]
        assert got == sorted(revs[1:])
        await w.aclose()  # type: ignore[attr-defined]
    finally:
        await s.close()


async def test_compaction_in_the_middle_of_a_delta_chain_keeps_later_versions_readable(tmp_path: Path) -> None:
    s = LmdbStore(str(tmp_path / "db"), keyframe_every=8)
    try:
        k = b"/registry/leases/kube-node-lease/node-1"
        base = b'{"kind":"Lease","spec":{"holderIdentity":"node-1","renewTime":"%d"},"pad":"' + b"x" * 300 + b'"}'
        revs = [await s.create(k, base % 0)]
        for i in range(1, 30):
            revs.append(await s.update(k, base % i, revs[-1]))
        middle = revs[12]  # version 13: a delta against version 12
        await s.compact(middle)
        for _ in range(100):
            if s.usage()["records"] == 30 - 12:
                break
            await asyncio.sleep(0.05)
        assert s.usage()["records"] == 30 - 12
        await s.close()
        s = LmdbStore(str(tmp_path / "db"))  # no recent values: everything is decoded from disk
        for i in range(12, 30):
            assert (await s.get(k, revs[i])).value == base % i  # type: ignore[union-attr]
        w = s.watch(k, b"", middle)
        events: list[store.Event] = []
        async for batch in w:
            events += batch
            if len(events) == 30 - 12:
                break
        assert [e.kv.value for e in events] == [base % i for i in range(12, 30)]
    finally:
        await s.close()


async def test_a_torn_write_at_the_end_of_the_wal_is_cut_off_at_open(tmp_path: Path) -> None:
    from store.lmdb import wal

    path = tmp_path / "db"
    s = LmdbStore(str(path))
    revs = [await s.create(f"/torn/{i}".encode(), b"v%d" % i) for i in range(10)]
    await s.close()
    # A crash in the middle of a batch: a record header promising more than was written.
    segments = wal.segment_names(str(path / "wal"))
    if not segments:  # the applier's last pass deleted the only segment: write one
        segments = [(revs[-1] + 1, str(path / "wal" / f"{revs[-1] + 1:020d}.wal"))]
        with open(segments[-1][1], "wb") as f:
            f.write(b"\x00" * 4096)
    _first, seg = segments[-1]
    with open(seg, "r+b") as f:
        data = f.read()
        end = len(data.rstrip(b"\x00"))
        f.seek(end)
        f.write(wal.encode(revs[-1] + 1, b"x" * 500)[:300])
    s = LmdbStore(str(path))
    try:
        assert await s.revision() == revs[-1]
        r = await s.create(b"/torn/after", b"ok")
        assert r == revs[-1] + 1
    finally:
        await s.close()
    s = LmdbStore(str(path))
    try:
        kvs, _, _ = await s.range(b"/torn/", store.prefix_end(b"/torn/"))
        assert len(kvs) == 11 and (await s.get(b"/torn/after")).value == b"ok"  # type: ignore[union-attr]
    finally:
        await s.close()


async def test_concurrent_writes_share_commits_and_each_commit_is_reported(tmp_path: Path) -> None:
    s = LmdbStore(str(tmp_path / "db"))
    batches: list[tuple[int, float]] = []
    s.commit_observer = lambda size, seconds: batches.append((size, seconds))
    try:
        await asyncio.gather(*(s.create(f"/gc/{i}".encode(), b"v" * 200) for i in range(2000)))
        assert sum(size for size, _ in batches) == 2000
        assert max(size for size, _ in batches) > 1  # grouped: fewer fsyncs than writes
        assert all(0 < seconds < 60 for _, seconds in batches)  # durations, not clock readings
    finally:
        await s.close()


async def test_bulk_updates_commit_together_and_count_as_one_write_each(tmp_path: Path) -> None:
    s = LmdbStore(str(tmp_path / "db"))
    batches: list[tuple[int, float]] = []
    try:
        keys = [f"/bulk/{i}".encode() for i in range(300)]
        created = await asyncio.gather(*(s.create(key, b"v" * 200) for key in keys))
        s.commit_observer = lambda size, seconds: batches.append((size, seconds))
        ops = s.stats["ops"]
        results = await store.update_many(s, [(key, b"w" * 200, rev) for key, rev in zip(keys, created, strict=True)])
        assert results == list(range(max(created) + 1, max(created) + 301))
        assert [size for size, _ in batches] == [300]  # one commit, of 300 writes
        assert s.stats["ops"] == ops + 300
    finally:
        await s.close()


async def test_a_batch_of_wal_records_is_encoded_as_each_record_alone() -> None:
    from store.lmdb import wal

    records = [(7, b"first"), (8, b""), (9, bytes(range(256)) * 3)]
    assert wal.encode_many(records) == b"".join(wal.encode(rev, payload) for rev, payload in records)


async def test_a_key_dropped_by_compaction_and_created_again_is_listed_once(tmp_path: Path) -> None:
    s = LmdbStore(str(tmp_path / "db"), auto_compact_interval=0.1)
    try:
        r = await s.create(b"/pods/web-0", b"v1")
        await s.delete(b"/pods/web-0", r)
        await s.create(b"/pods/other", b"x")
        for _ in range(100):  # two policy ticks: the tombstone is compacted and dropped from the index
            if b"/pods/web-0" not in s._index.entries:
                break
            await asyncio.sleep(0.05)
        assert b"/pods/web-0" not in s._index.entries
        await s.range(b"/pods/", store.prefix_end(b"/pods/"))  # the key order is merged once here
        await s.create(b"/pods/web-0", b"v2")
        kvs, _, _ = await s.range(b"/pods/", store.prefix_end(b"/pods/"))
        assert [kv.key for kv in kvs] == [b"/pods/other", b"/pods/web-0"]
    finally:
        await s.close()


async def test_a_watch_from_a_future_revision_starts_there(tmp_path: Path) -> None:
    s = LmdbStore(str(tmp_path / "db"))
    try:
        now = await s.revision()
        w = s.watch(b"/f/", store.prefix_end(b"/f/"), now + 3)
        revs = [await s.create(f"/f/{i}".encode(), b"v") for i in range(4)]
        got: list[int] = []
        it = w.__aiter__()
        while len(got) < 2:
            got += [e.kv.mod_revision for e in await asyncio.wait_for(it.__anext__(), 5)]
        assert got == revs[2:]
        await w.aclose()  # type: ignore[attr-defined]
    finally:
        await s.close()


async def test_an_empty_new_wal_segment_does_not_hang_readers(tmp_path: Path) -> None:
    """A writer killed between creating a segment and writing to it leaves zeros behind."""
    from store.lmdb import wal

    path = tmp_path / "db"
    s = LmdbStore(str(path))
    last = [await s.create(f"/e/{i}".encode(), b"v") for i in range(3)][-1]
    await s.close()
    empty = path / "wal" / f"{last + 1:020d}.wal"
    empty.write_bytes(b"\x00" * 4096)
    reader = wal.WalReader(str(path / "wal"))
    reader.seek(last + 1)
    assert list(reader.read()) == []  # returns: nothing there yet
    reader.close()
    s = LmdbStore(str(path))
    try:
        assert await s.create(b"/e/after", b"v") == last + 1
    finally:
        await s.close()


async def test_wal_segments_start_small_and_double_up_to_the_largest(tmp_path: Path) -> None:
    """A store that writes little holds a small segment on disk; a busy one grows to big ones."""
    from store.lmdb import wal

    writer = wal.WalWriter(str(tmp_path))
    record = wal.encode(1, b"x" * (256 << 10))
    sizes: list[tuple[int, int]] = []
    rev = 1
    for _ in range(40):
        first, _start, _end = writer.append(rev, record)
        rev += 1
        size = os.path.getsize(tmp_path / f"{first:020d}.wal")
        if not sizes or sizes[-1] != (first, size):
            sizes.append((first, size))
    writer.close()
    assert sizes[0][1] == wal.FIRST_SEGMENT_BYTES
    grown = [size for _, size in sizes]
    assert grown == sorted(grown) and grown[1] == 2 * grown[0]
    assert max(grown) <= wal.SEGMENT_BYTES


async def test_two_writer_processes_share_one_revision_sequence(tmp_path: Path) -> None:
    """Both processes' acknowledged writes survive, each revision used once."""
    path = str(tmp_path / "db")
    LmdbStore(path)._env.close()  # create the store once, then let the processes race on it
    procs = [worker("write", path, f"/p{n}/", "1500", "16") for n in range(2)]
    acks: dict[bytes, int] = {}
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        for line in out.splitlines():
            _, key, rev = line.split()
            acks[key.encode()] = int(rev)
    assert len(acks) == 3000
    assert len(set(acks.values())) == 3000  # no revision reused
    s = LmdbStore(path)
    try:
        kvs, at, _ = await s.range(b"/p", b"/q")
        assert {kv.key: kv.mod_revision for kv in kvs} == acks
        assert sorted(acks.values()) == list(range(at - 2999, at + 1))  # one gapless sequence
    finally:
        await s.close()


async def test_killing_one_of_two_writer_processes_loses_nothing_acknowledged(tmp_path: Path) -> None:
    path = str(tmp_path / "db")
    LmdbStore(path)._env.close()
    acks: dict[bytes, int] = {}

    def collect(out: str) -> None:
        for line in out.splitlines():
            parts = line.split()
            if len(parts) == 3:
                acks[parts[1].encode()] = int(parts[2])

    with worker("write", path, "/victim/", "1000000", "32") as victim:
        survivor = worker("write", path, "/survivor/", "3000", "32")
        assert victim.stdout is not None
        for _ in range(1500):  # let the victim get going beside the survivor
            line = victim.stdout.readline()
            if not line:
                break
            collect(line)
        os.kill(victim.pid, signal.SIGKILL)
        collect(victim.stdout.read())
        victim.wait()
    out, err = survivor.communicate(timeout=120)
    assert survivor.returncode == 0, err
    collect(out)
    assert sum(k.startswith(b"/survivor/") for k in acks) == 3000
    assert len(set(acks.values())) == len(acks)  # no revision acknowledged twice
    s = LmdbStore(path)
    try:
        kvs, at, _ = await s.range(b"/", b"\x00")
        stored = {kv.key: kv.mod_revision for kv in kvs}
        for key, rev in acks.items():
            assert stored.get(key) == rev, key
        assert await s.create(b"/after", b"x") == at + 1
    finally:
        await s.close()


async def test_live_watch_events_carry_their_commit_time(tmp_path: Path) -> None:
    """The watch cache measures delivery from the commit (DESIGN.md), not from receipt."""
    s = store.open(f"lmdb://{tmp_path}/db")
    try:
        w = s.watch(b"/a/", b"/a0", await s.revision() + 1)
        got = asyncio.ensure_future(anext(aiter(w)))
        await asyncio.sleep(0.1)
        before = time.perf_counter()
        await s.create(b"/a/x", b"v")
        after = time.perf_counter()
        (event,) = await asyncio.wait_for(got, 5)
        assert before < event.committed <= after
        await w.aclose()  # type: ignore[attr-defined]
    finally:
        await s.close()


async def test_a_writer_resumes_before_the_watchers_of_its_write(tmp_path: Path) -> None:
    """Both wake at the loop's next turn, the writer first: the API server's handler then
    hands the watch cache the object it serialised before the cache's feed sees the event
    (``prime``), sparing the cache a decode of the stored bytes."""
    s = store.open(f"lmdb://{tmp_path}/db")
    try:
        w = s.watch(b"/a/", b"/a0", await s.revision() + 1)
        resumed: list[str] = []

        async def watcher() -> None:
            await anext(aiter(w))
            resumed.append("watcher")

        async def writer() -> None:
            await s.create(b"/a/x", b"v")
            resumed.append("writer")

        watching = asyncio.ensure_future(watcher())
        await asyncio.sleep(0.1)  # the watcher waits for live events
        await asyncio.wait_for(asyncio.gather(writer(), watching), 5)
        assert resumed == ["writer", "watcher"]
        await w.aclose()  # type: ignore[attr-defined]
    finally:
        await s.close()


async def test_a_record_read_while_it_is_being_copied_in_is_read_again_not_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A reader ahead of the durable mark (recovery) may read a record's head before its
    revision bytes are in the file, and its body once they are: the record is taken
    (its revision read with the body, under the crc), not refused as out of sequence."""
    from store.lmdb import wal

    first, second = wal.encode(1, b"a" * 100), wal.encode(2, b"b" * 100)
    segment = tmp_path / f"{1:020d}.wal"
    segment.write_bytes(first + second + b"\x00" * 4096)
    real = os.pread
    copied = [False]

    def pread(fd: int, n: int, offset: int) -> bytes:
        got = real(fd, n, offset)
        at = len(first) + 8 - offset  # the second record's revision bytes, in what was read
        if at >= 0 and at + 8 <= len(got) and not copied[0]:
            copied[0] = True
            return got[:at] + b"\x00" * 8 + got[at + 8:]  # not copied in yet
        return got

    monkeypatch.setattr(os, "pread", pread)
    reader = wal.WalReader(str(tmp_path))
    assert reader.seek(1)
    assert list(reader.read()) == [(1, b"a" * 100), (2, b"b" * 100)]
    assert copied[0]
    with open(segment, "r+b") as f:  # a whole record out of sequence is still an error
        f.seek(len(first) + len(second))
        f.write(wal.encode(7, b"c"))
    with pytest.raises(RuntimeError, match="WAL revision 7 where 3 was expected"):
        list(reader.read())
    reader.close()


async def test_small_values_keep_their_full_frames_and_large_ones_become_deltas(tmp_path: Path) -> None:
    """A delta costs the applier a zstd context built around the previous version: an update
    whose full frame is under DELTA_MIN_FRAME (a Lease) keeps it; a large one (a pod's
    status update) is stored as a delta. Every version reads back exactly."""
    import orjson

    from controlplane.podgen import PodGenerator
    from store.codec import DELTA
    from store.lmdb import layout
    from store.lmdb.applier import DELTA_MIN_FRAME

    path = str(tmp_path / "db")
    s = LmdbStore(path)
    gen = PodGenerator(seed=3)
    versions: dict[bytes, list[tuple[int, bytes]]] = {}
    for i in range(200):  # enough of each prefix for its dictionary
        lease: dict[str, Any] = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                 "metadata": {"name": f"n{i}", "namespace": "kube-node-lease"},
                 "spec": {"holderIdentity": f"n{i}", "leaseDurationSeconds": 40,
                          "renewTime": f"2026-12-02T01:00:00.{i:06d}Z"}}
        pod = gen.pod()
        for k, v in ((f"/registry/leases/kube-node-lease/n{i}".encode(), orjson.dumps(lease)),
                     (f"/registry/pods/{pod['metadata']['namespace']}/{pod['metadata']['name']}".encode(),
                      orjson.dumps(pod))):
            versions[k] = [(await s.create(k, v), v)]
        for j in range(1, 4):
            lease["spec"]["renewTime"] = f"2026-12-02T01:00:{j:02d}.{i:06d}Z"
            k = f"/registry/leases/kube-node-lease/n{i}".encode()
            v = orjson.dumps(lease)
            versions[k].append((await s.update(k, v, versions[k][-1][0]), v))
            pod = gen.status_update(pod)
            k = f"/registry/pods/{pod['metadata']['namespace']}/{pod['metadata']['name']}".encode()
            v = orjson.dumps(pod)
            versions[k].append((await s.update(k, v, versions[k][-1][0]), v))
    await s.close()
    s = LmdbStore(path)  # everything in LMDB now
    try:
        kinds: dict[bool, list[int]] = {True: [], False: []}  # lease? -> frame kinds of its updates
        with s._read() as txn:
            for k, vs in versions.items():
                for rev, _ in vs[1:]:
                    buf = s._record_buf(txn, rev)
                    assert buf is not None
                    frame = layout.decode_record(bytes(buf)).frame
                    kinds[k.startswith(b"/registry/leases/")].append(frame[0])
                    if k.startswith(b"/registry/leases/"):
                        assert len(frame) < DELTA_MIN_FRAME
        assert DELTA not in kinds[True]
        assert kinds[False].count(DELTA) > len(kinds[False]) // 2
        for k, vs in versions.items():
            for rev, v in vs:
                assert (await s.get(k, rev)).value == v  # type: ignore[union-attr]
    finally:
        await s.close()


async def test_the_wal_reader_reads_records_of_any_size_across_its_read_ahead(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Records are read a chunk at a time (from FIRST_READ_AHEAD up to READ_AHEAD bytes), not
    two preads a record: records across a chunk's end, larger than any chunk, or read a few
    at a time all come back whole and in order, and a torn record after them stops the
    reader until it is whole."""
    from store.lmdb import wal

    real, preads = os.pread, [0]

    def pread(fd: int, n: int, offset: int) -> bytes:
        preads[0] += 1
        return real(fd, n, offset)

    monkeypatch.setattr(os, "pread", pread)

    sizes = [1, 10, wal.FIRST_READ_AHEAD, 3, wal.READ_AHEAD + 5, *([100] * 5000), 7]
    records = [(1 + i, bytes([i % 251]) * size) for i, size in enumerate(sizes)]
    data = wal.encode_many(records)
    torn = wal.encode(len(records) + 1, b"t" * 300)
    segment = tmp_path / f"{1:020d}.wal"
    segment.write_bytes(data + torn[:200] + b"\x00" * 4096)
    reader = wal.WalReader(str(tmp_path))
    assert reader.seek(1)
    got = list(reader.read(3))
    got += list(reader.read(2))
    got += list(reader.read())
    assert got == records
    assert preads[0] < 40  # 5,007 records, 4.5 MB
    assert list(reader.read()) == []  # torn: not taken
    with open(segment, "r+b") as f:  # now whole
        f.seek(len(data))
        f.write(torn)
    assert list(reader.read()) == [(len(records) + 1, b"t" * 300)]
    assert reader.seek(3) and next(iter(reader.read(1))) == records[2]  # back to the middle
    reader.close()


async def test_bulk_updates_reach_every_watcher_each_as_its_own_event(tmp_path: Path) -> None:
    """``update_many``'s updates are published as a run (``EventRun``: arrays) to a watch of
    every key, and as an ``Event`` each to a watch of some keys: every watcher, here and
    in another process (which reads them from the WAL), sees each update at its own
    revision with its own value; a watch of another prefix sees none of them."""
    path = str(tmp_path / "db")
    s = LmdbStore(path, poll_interval=0.002)
    try:
        keys = [f"/run/{i:04d}".encode() for i in range(300)]
        created = await asyncio.gather(*(s.create(key, b"v0") for key in keys))
        start = max(created) + 1
        everything = s.watch(b"\x00", b"\x00", start)
        with_prev = s.watch(b"/run/", store.prefix_end(b"/run/"), start, prev_kv=True)
        other = s.watch(b"/other/", store.prefix_end(b"/other/"), start)
        wp = worker("watch", path, "/run/", str(start), "300")
        assert wp.stdout is not None and wp.stdout.readline().strip() == "ready"
        runs = 0

        async def drain(w: Any, n: int) -> list[store.Event]:
            nonlocal runs
            got: list[store.Event] = []
            while len(got) < n:
                batch = await anext(w)
                if isinstance(batch, store.EventRun):
                    runs += 1
                    assert list(batch) == [batch[i] for i in range(len(batch))] and len(batch[1:3]) == 2
                got += batch
            return got

        # following live writes (registered, caught up) before the writes
        draining = [asyncio.create_task(drain(w, n)) for w, n in ((everything, 301), (with_prev, 300), (other, 1))]
        await asyncio.sleep(0.1)
        results = await store.update_many(s, [(key, b"v1-" + key, rev) for key, rev in zip(keys, created, strict=True)])
        assert results == list(range(start, start + 300))
        marker = await s.create(b"/other/marker", b"m")
        seen, prevs, others = await asyncio.wait_for(asyncio.gather(*draining), 10)
        assert runs == 1  # the watch of every key was handed the run as one
        assert [(e.type, e.kv.key, e.kv.value, e.kv.mod_revision, e.kv.create_revision, e.kv.version, e.prev_kv)
                for e in seen[:300]] == [(store.EventType.PUT, key, b"v1-" + key, rev, created[i], 2, None)
                                         for i, (key, rev) in enumerate(zip(keys, results, strict=True))]
        assert seen[300].kv.key == b"/other/marker"
        assert [(e.kv.key, e.kv.mod_revision, e.prev_kv.value if e.prev_kv else None) for e in prevs] == [
            (key, rev, b"v0") for key, rev in zip(keys, results, strict=True)]
        assert [e.kv.mod_revision for e in others] == [marker]
        out, err = wp.communicate(timeout=60)
        assert [(line.split()[1].encode(), int(line.split()[2])) for line in out.splitlines()] == list(
            zip(keys, results, strict=True)), err
        for w in (everything, with_prev, other):
            await w.aclose()  # type: ignore[attr-defined]
    finally:
        await s.close()


async def test_a_watch_of_one_key_sees_its_update_in_the_middle_of_a_bulk_run(tmp_path: Path) -> None:
    """A watch of a single key (``end == b""``) inside a run of ``update_many``'s keys, not
    its least one, is handed that key's update."""
    s = LmdbStore(str(tmp_path / "db"))
    try:
        keys = [b"/run/a", b"/run/b", b"/run/c"]
        created = [await s.create(key, b"v0") for key in keys]
        start = max(created) + 1
        middle = s.watch(b"/run/b", b"", start)
        everything = s.watch(b"\x00", b"\x00", start)  # (so the run is published as one)

        async def next_batch() -> Sequence[store.Event]:
            return await anext(middle)

        first = asyncio.create_task(next_batch())
        await asyncio.sleep(0.05)
        results = await store.update_many(s, [(key, b"v1", rev) for key, rev in zip(keys, created, strict=True)])
        events = await asyncio.wait_for(first, 5)
        assert [(e.kv.key, e.kv.mod_revision) for e in events] == [(b"/run/b", results[1])]
        for w in (middle, everything):
            await w.aclose()  # type: ignore[attr-defined]
    finally:
        await s.close()


async def test_the_applier_process_imports_neither_asyncio_nor_the_engine() -> None:
    """Every store open starts an applier process; importing the store's contract (asyncio)
    and engine there doubled its start (about 0.17 s of CPU, against 0.08)."""
    import subprocess
    import sys

    code = ("import sys, store.lmdb.applier; "
            "print(sorted(m for m in ('asyncio', 'store.interface', 'store.lmdb.engine') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


async def test_openers_see_every_other_open_of_the_store_and_not_their_own(tmp_path: Path) -> None:
    from store.lmdb import wal

    mine = wal.Openers(str(tmp_path))
    assert not mine.others()
    second = wal.Openers(str(tmp_path))  # another open in this process counts (an open file's lock)
    assert mine.others() and second.others()
    second.close()
    assert not mine.others()
    code = ("import sys, time\nfrom store.lmdb import wal\no = wal.Openers(sys.argv[1])\n"
            "print(o.others(), flush=True)\ntime.sleep(60)")
    with subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], cwd=ROOT, stdout=subprocess.PIPE,
                          text=True) as p:
        try:
            assert p.stdout is not None and p.stdout.readline().strip() == "True"
            assert mine.others()
        finally:
            p.kill()  # a process that dies holds nothing
    assert not mine.others()
    mine.close()


async def test_a_watched_store_polls_for_other_processes_closely_only_while_one_has_it_open(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = str(tmp_path / "db")
    s = LmdbStore(path, poll_interval=0.002, alone_poll_interval=0.2)
    polls = 0
    catch_up = s._catch_up

    def counted(upto: int = 0) -> None:
        nonlocal polls
        polls += 1
        catch_up(upto)

    monkeypatch.setattr(s, "_catch_up", counted)
    try:
        start = await s.create(b"/mine/0", b"v")
        w = s.watch(b"/theirs/", store.prefix_end(b"/theirs/"), start)
        async def first() -> Sequence[store.Event]:
            return await anext(w)
        waiting = asyncio.create_task(first())  # a watcher registers when first waited on
        await asyncio.sleep(1.0)
        alone = polls
        other = worker("watch", path, "/other/", "0", "1")  # another process that has it open
        try:
            assert other.stdout is not None and other.stdout.readline().strip() == "ready"
            await asyncio.sleep(0.3)  # the poll that notices it, then the close ones
            polls = 0
            await asyncio.sleep(0.5)
            shared = polls
            await s.create(b"/other/done", b"v")  # the one event it waits for
            other.communicate(timeout=30)
        finally:
            other.kill()
            if other.stdout is not None:
                other.stdout.close()
            if other.stderr is not None:
                other.stderr.close()
        waiting.cancel()
    finally:
        await s.close()
    assert alone <= 7, alone  # every 0.2 s, not every 2 ms
    assert shared >= 25, (alone, shared)  # every 2 ms: about 250 on an idle machine
