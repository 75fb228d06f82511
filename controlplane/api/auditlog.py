"""The audit log backend: kube-apiserver's ``--audit-log-*`` flags (``plugin/pkg/audit/log``
behind lumberjack's rotating writer).

Each event is one line: ``json`` (the ``audit.k8s.io/v1`` Event, the default) or ``legacy``
(upstream's ``EventString``: ``<received> AUDIT: id="..." stage="..." ip="..." ...``).
``PATH`` ``-`` is standard output, never rotated.

Modes, as upstream's ``--audit-log-mode``:

- ``blocking`` (upstream's default): the event loop writes the line itself, before it next
  waits for the network: the events of one turn of the loop in one ``write(2)`` on an
  ``O_APPEND`` descriptor, no fsync (lumberjack does none either);
- ``batch``: lines are queued (at most ``--audit-log-batch-buffer-size``; past it an event is
  dropped and counted in ``apiserver_audit_error_total{plugin="buffered"}``) and a worker
  thread writes whatever is queued in one ``write(2)``; the event loop never waits for the disk.

A line is written whole or not at all, and a file is only ever appended to or renamed: a
crash can lose the lines not yet written (batch mode) and leave the last one cut, never
damage the lines before it.

Rotation, as lumberjack's: once the next line would take the file past ``--audit-log-maxsize``
megabytes (0: lumberjack's 100), it is renamed ``<name>-<UTC time 2006-01-02T15-04-05.000><ext>``
and a new one opened; then, off the event loop, backups beyond ``--audit-log-maxbackup`` (0:
all kept) and those older than ``--audit-log-maxage`` days (by the time in their name; 0: no
limit) are removed, and with ``--audit-log-compress`` the others gzipped.
"""

from __future__ import annotations

import asyncio
import gzip
import logging
import os
import shutil
import threading
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import orjson

from ..gostrings import quote
from ..metrics import AUDIT_ERRORS
from .auditwebhook import Truncation

__all__ = ["FORMATS", "MODES", "LogBackend", "LogOptions", "event_string"]

log = logging.getLogger(__name__)

FORMATS = ("json", "legacy")
MODES = ("blocking", "batch")
Format = Literal["json", "legacy"]
Mode = Literal["blocking", "batch"]

MEGABYTE = 1024 * 1024
DEFAULT_MAX_SIZE = 100  # lumberjack's, in megabytes, when none is given
BACKUP_TIME = "%Y-%m-%dT%H-%M-%S"  # lumberjack's 2006-01-02T15-04-05.000 (milliseconds added)
DEFAULT_BUFFER_SIZE = 10000  # upstream's defaultBatchBufferSize


class LogOptions:
    """The ``--audit-log-*`` flags, checked as upstream's ``AuditLogOptions.Validate``."""

    def __init__(self, path: str, log_format: str = "json", mode: str = "blocking", max_age: int = 0,
                 max_backups: int = 0, max_size: int = 0, compress: bool = False,
                 buffer_size: int = DEFAULT_BUFFER_SIZE, truncation: Truncation | None = None) -> None:
        errors = []
        if log_format not in FORMATS:
            errors.append(f"invalid audit log format {log_format}, allowed formats are {','.join(FORMATS)!r}")
        if mode not in MODES:
            errors.append(f"invalid audit log mode {mode}, allowed modes are {','.join(MODES)!r}")
        for flag, value in (("maxage", max_age), ("maxbackup", max_backups), ("maxsize", max_size)):
            if value < 0:
                errors.append(f"--audit-log-{flag} {value} can't be a negative number")
        if buffer_size <= 0:
            errors.append(f"invalid audit batch log buffer size {buffer_size}, must be a positive number")
        if errors:
            raise ValueError("; ".join(errors))
        self.path, self.format, self.mode = path, log_format, mode
        self.max_age, self.max_backups, self.max_size = max_age, max_backups, max_size
        self.compress, self.buffer_size = compress, buffer_size
        self.truncation = truncation  # --audit-log-truncate-* (auditwebhook.Truncation), when enabled


class _RotatingFile:
    """lumberjack's Logger: appends, and rotates past ``max_size`` bytes. Not thread-safe:
    one writer at a time (the event loop in blocking mode, the worker thread in batch mode)."""

    def __init__(self, path: Path, max_size: int, max_backups: int, max_age: int, compress: bool) -> None:
        self.path = path
        self.max_size = max_size
        self.max_backups, self.max_age, self.compress = max_backups, max_age, compress
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        self._size = os.fstat(self._fd).st_size
        self._mill: threading.Thread | None = None

    def write(self, data: bytes) -> None:
        if len(data) > self.max_size:
            raise OSError(f"write length {len(data)} exceeds maximum file size {self.max_size}")
        if self._size + len(data) > self.max_size:
            self._rotate()
        _write_all(self._fd, data)
        self._size += len(data)

    def close(self) -> None:
        os.close(self._fd)
        mill = self._mill
        if mill is not None:
            mill.join()

    def _rotate(self) -> None:
        os.close(self._fd)
        now = time.time()
        stamp = datetime.fromtimestamp(now, UTC).strftime(BACKUP_TIME) + f".{int(now * 1000) % 1000:03d}"
        backup = self.path.with_name(f"{self.path.stem}-{stamp}{self.path.suffix}")
        while backup.exists() or backup.with_name(backup.name + ".gz").exists():  # (two rotations in a millisecond)
            now += 0.001
            stamp = datetime.fromtimestamp(now, UTC).strftime(BACKUP_TIME) + f".{int(now * 1000) % 1000:03d}"
            backup = self.path.with_name(f"{self.path.stem}-{stamp}{self.path.suffix}")
        os.replace(self.path, backup)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_TRUNC, 0o600)
        self._size = 0
        if self.max_backups or self.max_age or self.compress:
            if self._mill is not None:
                self._mill.join()  # (one at a time, as lumberjack's millRun)
            self._mill = threading.Thread(target=self.mill, name="audit-log-mill", daemon=True)
            self._mill.start()

    def backups(self) -> list[tuple[float, Path]]:
        """The rotated files of this log, newest first, with the time in their names."""
        prefix, ext = self.path.stem + "-", self.path.suffix
        found = []
        for p in self.path.parent.iterdir():
            name = p.name.removesuffix(".gz")
            if not (name.startswith(prefix) and name.endswith(ext)):
                continue
            stamp = name[len(prefix):len(name) - len(ext)]
            try:
                at = datetime.strptime(stamp[:-4], BACKUP_TIME).replace(tzinfo=UTC).timestamp() \
                    + int(stamp[-3:]) / 1000
            except ValueError:
                continue
            if stamp[-4:-3] == ".":
                found.append((at, p))
        found.sort(key=lambda f: f[0], reverse=True)
        return found

    def mill(self) -> None:
        """lumberjack's millRunOnce: old backups removed, the rest compressed if asked."""
        try:
            backups = self.backups()
            keep: list[tuple[float, Path]] = []
            seen: set[str] = set()
            for at, p in backups:
                name = p.name.removesuffix(".gz")
                counted = name in seen  # a backup and its gzipped copy count once
                seen.add(name)
                if (self.max_backups and not counted and len(seen) > self.max_backups) \
                        or (self.max_age and at < time.time() - self.max_age * 86400):
                    p.unlink(missing_ok=True)
                else:
                    keep.append((at, p))
            if self.compress:
                for _, p in keep:
                    if p.suffix != ".gz" and p.exists():
                        # with the backup's mode (0600), as lumberjack's compressLogFile: not the umask's
                        fd = os.open(p.with_name(p.name + ".gz"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
                                     p.stat().st_mode & 0o777)
                        with p.open("rb") as src, os.fdopen(fd, "wb") as raw, \
                                gzip.GzipFile(fileobj=raw, mode="wb") as dst:
                            shutil.copyfileobj(src, dst)
                        p.unlink()
        except OSError as e:
            log.error("audit log rotation: %s", e)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


class _Stdout:
    def write(self, data: bytes) -> None:
        _write_all(1, data)

    def close(self) -> None:
        pass


class LogBackend:
    """Where events go: ``process(event)`` from the event loop, ``close()`` at shutdown."""

    def __init__(self, options: LogOptions) -> None:
        self.options = options
        self.format = options.format
        self._out: _RotatingFile | _Stdout = _Stdout() if options.path == "-" else _RotatingFile(
            Path(options.path), (options.max_size or DEFAULT_MAX_SIZE) * MEGABYTE, options.max_backups,
            options.max_age, options.compress)
        self._blocking = options.mode == "blocking"
        self._pending: list[bytes] = []
        self._wake: asyncio.Event | None = None
        self._worker: asyncio.Task[None] | None = None
        self._closing = False
        self._flush_soon = False  # (blocking mode: a write is due at the end of this turn of the loop)
        self._errors_logged = 0.0

    def process(self, event: Mapping[str, Any]) -> None:
        truncation = self.options.truncation
        if truncation is None:
            line = orjson.dumps(event) + b"\n" if self.format == "json" else event_string(event).encode() + b"\n"
        else:  # (sized as upstream sizes it: the event's JSON)
            data = truncation.encode(event)
            if data is None:
                return
            line = data + b"\n" if self.format == "json" else event_string(event).encode() + b"\n"
        if self._blocking:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:  # (no loop: written at once)
                self._write(line, "log")
                return
            self._pending.append(line)
            if not self._flush_soon:  # the events of this turn of the loop, in one write
                self._flush_soon = True
                loop.call_soon(self._flush_now)
            return
        if len(self._pending) >= self.options.buffer_size:
            self._error("buffered", "the audit buffer queue is full: an event was dropped")
            return
        self._pending.append(line)
        if self._worker is None:
            self._wake = asyncio.Event()
            self._worker = asyncio.get_running_loop().create_task(self._flush_forever(), name="audit-log")
        assert self._wake is not None
        self._wake.set()

    async def close(self) -> None:
        """The queued lines written, the file closed."""
        worker, self._worker = self._worker, None
        if worker is not None and self._wake is not None:
            self._closing = True  # (the worker writes what is queued, then returns)
            self._wake.set()
            await worker
        if self._pending:
            lines, self._pending = self._pending, []
            self._write(b"".join(lines), "log")
        self._out.close()

    def _flush_now(self) -> None:
        self._flush_soon = False
        lines, self._pending = self._pending, []
        if lines:
            self._write(b"".join(lines), "log")

    async def _flush_forever(self) -> None:
        assert self._wake is not None
        while True:
            await self._wake.wait()
            self._wake.clear()
            lines, self._pending = self._pending, []
            if lines:
                await asyncio.to_thread(self._write, b"".join(lines), "log")
            if self._closing and not self._pending:
                return

    def _write(self, data: bytes, plugin: str) -> None:
        try:
            self._out.write(data)
        except OSError as e:
            self._error(plugin, f"writing the audit log failed: {e}")

    def _error(self, plugin: str, message: str) -> None:
        AUDIT_ERRORS.labels(plugin).inc()
        now = time.monotonic()
        if now - self._errors_logged > 10.0:  # one line per 10 s, not one per request
            self._errors_logged = now
            log.error("%s", message)


def _rfc3339_nano(micro_time: str) -> str:
    """``2026-12-05T17:12:23.120000Z`` as Go's RFC3339Nano writes it (trailing zeros dropped)."""
    head, _, fraction = micro_time.rstrip("Z").partition(".")
    fraction = fraction.rstrip("0")
    return f"{head}.{fraction}Z" if fraction else f"{head}Z"


def event_string(ev: Mapping[str, Any]) -> str:
    """upstream's ``EventString``: the legacy one-line form of an event."""
    user = ev.get("user") or {}
    username, groups = "<none>", "<none>"
    if user.get("username"):
        username = user["username"]
        if user.get("groups"):
            groups = ",".join(quote(g) for g in user["groups"])
    as_user, as_groups = "<self>", "<lookup>"
    impersonated = ev.get("impersonatedUser")
    if impersonated is not None:
        as_user = impersonated.get("username", "")
        if impersonated.get("groups") is not None:
            as_groups = ",".join(quote(g) for g in impersonated["groups"])
    namespace = (ev.get("objectRef") or {}).get("namespace") or "<none>"
    status = ev.get("responseStatus")
    response = str(status.get("code", 0)) if status is not None else "<deferred>"
    ips = ev.get("sourceIPs") or ()
    ip = ips[0] if ips else "<unknown>"
    fields = (("id", ev["auditID"]), ("stage", ev["stage"]), ("ip", ip), ("method", ev.get("verb", "")),
              ("user", username), ("groups", groups), ("as", as_user), ("asgroups", as_groups),
              ("user-agent", ev.get("userAgent", "")), ("namespace", namespace), ("uri", ev.get("requestURI", "")))
    quoted = " ".join(f"{k}={quote(v)}" for k, v in fields)
    return f'{_rfc3339_nano(ev["requestReceivedTimestamp"])} AUDIT: {quoted} response="{response}"'
