"""The syncer process (store/lmdb/syncer.py) and the writer's use of it: requests are
answered once durable, a dead syncer is replaced without losing an acknowledged write,
and a failed fdatasync makes the store refuse writes."""

from __future__ import annotations

import asyncio
import errno
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import store
from store.errors import StoreError
from store.lmdb import LmdbStore
from store.lmdb import syncer as syncer_mod
from store.lmdb.writer import _SyncProcess


def _replies(proc: subprocess.Popen[bytes], until_seq: int) -> list[tuple[int, int]]:
    assert proc.stdout is not None
    got: list[tuple[int, int]] = []
    while not got or got[-1][0] < until_seq:
        data = proc.stdout.read(syncer_mod.REPLY.size)
        assert len(data) == syncer_mod.REPLY.size, "the syncer exited"
        got.append(syncer_mod.REPLY.unpack(data))
    return got


def test_the_syncer_answers_each_request_once_durable_and_says_why_it_could_not(tmp_path: Path) -> None:
    (tmp_path / syncer_mod.SEGMENT_NAME.format(1)).write_bytes(b"\x00" * 4096)
    (tmp_path / syncer_mod.SEGMENT_NAME.format(9)).write_bytes(b"\x00" * 4096)
    proc = subprocess.Popen([sys.executable, "-S", _SyncProcess.script, str(tmp_path)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
    assert proc.stdin is not None
    try:
        proc.stdin.write(syncer_mod.REQUEST.pack(1, 1))
        assert _replies(proc, 1) == [(1, 0)]
        # several at once, across a new segment: answered up to the highest, all durable
        proc.stdin.write(syncer_mod.REQUEST.pack(2, 1) + syncer_mod.REQUEST.pack(3, 9))
        got = _replies(proc, 3)
        assert got[-1] == (3, 0) and all(failed == 0 for _, failed in got)
        proc.stdin.write(syncer_mod.REQUEST.pack(4, 77))  # no such segment
        assert _replies(proc, 4) == [(4, errno.ENOENT)]
        proc.stdin.write(syncer_mod.REQUEST.pack(5, 9))  # and it goes on
        assert _replies(proc, 5) == [(5, 0)]
        proc.stdin.close()
        assert proc.wait(timeout=10) == 0  # its stdin closed: it ends
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_the_syncer_outlives_a_stop_signal_to_the_group_and_ends_with_its_stdin(tmp_path: Path, sig: int) -> None:
    # Ctrl-C (SIGINT) reaches `serve`'s whole process group, and so does a SIGTERM to the group
    # (systemd's stop, kill -- -PGID): the syncer must go on answering until the server,
    # stopping, closes its pipe (it died and was replaced, while the server shut down)
    (tmp_path / syncer_mod.SEGMENT_NAME.format(1)).write_bytes(b"\x00" * 4096)
    proc = subprocess.Popen([sys.executable, "-S", _SyncProcess.script, str(tmp_path)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0)
    assert proc.stdin is not None and proc.stderr is not None
    try:
        proc.stdin.write(syncer_mod.REQUEST.pack(1, 1))
        assert _replies(proc, 1) == [(1, 0)]  # running, past its start
        proc.send_signal(sig)
        proc.stdin.write(syncer_mod.REQUEST.pack(2, 1))
        assert _replies(proc, 2) == [(2, 0)]
        proc.stdin.close()
        assert proc.wait(timeout=10) == 0
        assert proc.stderr.read() == b""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()


@pytest.mark.asyncio
async def test_a_killed_syncer_is_replaced_and_no_acknowledged_write_is_lost(tmp_path: Path) -> None:
    path = str(tmp_path / "db")
    s = LmdbStore(path)
    acked: dict[bytes, int] = {}

    async def writer(w: int) -> None:
        for i in range(150):
            key = b"/k/%02d/%03d" % (w, i)
            acked[key] = await s.create(key, key * 10)

    try:
        await s.create(b"/first", b"x")
        writes = asyncio.gather(*(writer(w) for w in range(32)))
        for _ in range(3):
            await asyncio.sleep(0.05)
            proc = s._writer._syncer._proc  # type: ignore[union-attr]
            assert proc is not None
            proc.kill()
        await asyncio.wait_for(writes, 60)
    finally:
        await s.close()
    assert len(acked) == 32 * 150
    s = LmdbStore(path)
    try:
        kvs, _, _ = await s.range(b"/k/", store.prefix_end(b"/k/"))
        assert {kv.key: kv.mod_revision for kv in kvs} == acked
    finally:
        await s.close()


@pytest.mark.asyncio
async def test_a_failed_fdatasync_fails_the_batch_and_every_later_write(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A real process that answers every request with EIO, as a syncer whose disk failed."""
    failing = tmp_path / "failing_syncer.py"
    failing.write_text(
        "import os, struct, sys\n"
        "req, rep = struct.Struct('<QQ'), struct.Struct('<Qq')\n"
        "while True:\n"
        "    data = os.read(0, req.size)\n"
        "    if not data:\n"
        "        sys.exit(0)\n"
        "    seq, _ = req.unpack(data)\n"
        f"    os.write(1, rep.pack(seq, {errno.EIO}))\n")
    monkeypatch.setattr(_SyncProcess, "script", str(failing))
    s = LmdbStore(str(tmp_path / "db"))
    reported: list[float] = []
    s.commit_observer = lambda _size, seconds: reported.append(seconds)
    try:
        with pytest.raises(StoreError, match="fdatasync"):
            await s.create(b"/a", b"1")
        with pytest.raises(StoreError, match="refuses writes"):
            await s.create(b"/b", b"2")
        kvs, _, _ = await s.range(b"/", b"0")  # nothing was published as durable
        assert kvs == []
        assert reported and all(0 <= seconds < 60 for seconds in reported)  # failed batches are timed too
        assert os.path.isdir(tmp_path / "db")
    finally:
        await s.close()
