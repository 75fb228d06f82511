"""The audit log backend (api/auditlog.py): lines, modes and lumberjack-style rotation."""

from __future__ import annotations

import asyncio
import gzip
import json
import os
from pathlib import Path

import pytest

from controlplane.api.auditlog import LogBackend, LogOptions, _RotatingFile
from controlplane.metrics import AUDIT_ERRORS


def event(i: int, pad: int = 0) -> dict[str, object]:
    return {"kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": "Metadata", "auditID": f"id-{i}",
            "stage": "ResponseComplete", "requestURI": "/api/v1/pods" + "x" * pad, "verb": "list",
            "requestReceivedTimestamp": "2026-12-05T17:12:23.120000Z",
            "stageTimestamp": "2026-12-05T17:12:23.130000Z"}


def lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_blocking_mode_writes_each_event_as_it_comes(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "audit.log"  # (its directory made, as upstream's ensureLogFile)
    backend = LogBackend(LogOptions(str(path)))
    backend.process(event(1))
    assert lines(path) == [event(1)]  # written before process returns
    assert path.stat().st_mode & 0o777 == 0o600
    backend.process(event(2))
    assert [e["auditID"] for e in lines(path)] == ["id-1", "id-2"]
    asyncio.run(backend.close())


def test_the_legacy_format_is_one_text_line(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    backend = LogBackend(LogOptions(str(path), "legacy"))
    backend.process(event(1))
    asyncio.run(backend.close())
    assert path.read_text().startswith('2026-12-05T17:12:23.12Z AUDIT: id="id-1" stage="ResponseComplete"')


def test_batch_mode_writes_off_the_loop_and_close_flushes(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"

    async def main() -> None:
        backend = LogBackend(LogOptions(str(path), mode="batch"))
        for i in range(500):
            backend.process(event(i))
        await asyncio.sleep(0.2)  # the worker thread took them
        assert len(lines(path)) == 500
        for i in range(500, 510):
            backend.process(event(i))
        await backend.close()  # what is still queued is written

    asyncio.run(main())
    assert [e["auditID"] for e in lines(path)] == [f"id-{i}" for i in range(510)]


def test_batch_mode_drops_past_its_buffer_and_counts_it(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    before = AUDIT_ERRORS.labels("buffered")._value.get()

    async def main() -> None:
        backend = LogBackend(LogOptions(str(path), mode="batch", buffer_size=3))
        for i in range(5):  # (all before the worker runs: the loop is not given up in between)
            backend.process(event(i))
        await backend.close()

    asyncio.run(main())
    assert len(lines(path)) == 3
    assert AUDIT_ERRORS.labels("buffered")._value.get() - before == 2


def test_a_write_that_fails_is_counted_not_raised(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    backend = LogBackend(LogOptions(str(path)))
    before = AUDIT_ERRORS.labels("log")._value.get()
    out = backend._out
    assert isinstance(out, _RotatingFile)
    os.close(out._fd)
    out._fd = os.open(os.devnull, os.O_RDONLY)  # writes now fail with EBADF
    backend.process(event(1))
    assert AUDIT_ERRORS.labels("log")._value.get() - before == 1


def test_rotation_keeps_maxbackup_files_named_as_lumberjack(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    out = _RotatingFile(path, max_size=1000, max_backups=2, max_age=0, compress=False)
    line = b"x" * 299 + b"\n"
    for _ in range(12):  # 3 lines a file: 4 files
        out.write(line)
        if out._mill is not None:
            out._mill.join()
    out.close()
    backups = sorted(p.name for p in tmp_path.iterdir() if p.name != "audit.log")
    assert len(backups) == 2
    for name in backups:  # audit-2026-12-05T17-12-23.123.log
        assert name.startswith("audit-") and name.endswith(".log") and name[-8] == "."
    assert path.read_bytes() == line * 3
    assert all((tmp_path / n).read_bytes() == line * 3 for n in backups)  # only whole lines in each


def test_rotation_removes_backups_older_than_maxage_and_compresses(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    old = tmp_path / "audit-2020-01-01T00-00-00.000.log"
    old.write_text("old\n")
    unrelated = tmp_path / "other-2020-01-01T00-00-00.000.log"
    unrelated.write_text("keep\n")
    out = _RotatingFile(path, max_size=10, max_backups=0, max_age=1, compress=True)
    out.write(b"123456789\n")
    out.write(b"abcdefghi\n")  # rotates
    out.close()  # (waits for the mill)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert old.name not in names and unrelated.name in names
    gz = [n for n in names if n.endswith(".log.gz")]
    assert len(gz) == 1 and gzip.decompress((tmp_path / gz[0]).read_bytes()) == b"123456789\n"
    assert path.read_bytes() == b"abcdefghi\n"
    # the gzipped backup as private as the log it was (lumberjack keeps the mode), whatever the umask
    assert (tmp_path / gz[0]).stat().st_mode & 0o777 == path.stat().st_mode & 0o777 == 0o600


def test_a_line_longer_than_the_maximum_is_refused(tmp_path: Path) -> None:
    out = _RotatingFile(tmp_path / "audit.log", max_size=10, max_backups=0, max_age=0, compress=False)
    with pytest.raises(OSError, match="write length 11 exceeds maximum file size 10"):
        out.write(b"x" * 11)
    out.close()


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"log_format": "xml"}, "invalid audit log format xml, allowed formats are 'json,legacy'"),
    ({"mode": "async"}, "invalid audit log mode async, allowed modes are 'blocking,batch'"),
    ({"max_age": -1}, "--audit-log-maxage -1 can't be a negative number"),
    ({"max_backups": -2}, "--audit-log-maxbackup -2 can't be a negative number"),
    ({"max_size": -3}, "--audit-log-maxsize -3 can't be a negative number"),
])
def test_bad_options_are_refused(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        LogOptions("audit.log", **kwargs)  # type: ignore[arg-type]


def test_a_path_of_dash_is_standard_output(capfd: pytest.CaptureFixture[str]) -> None:
    backend = LogBackend(LogOptions("-"))
    backend.process(event(7))
    asyncio.run(backend.close())
    out = capfd.readouterr().out
    assert [json.loads(line) for line in out.splitlines()] == [event(7)]
