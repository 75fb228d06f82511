"""A real, single-member etcd on loopback ports, fsync on: for benchmarks and tests.

    with LocalEtcd() as etcd:                 # or LocalEtcd("some/dir") to keep its data
        s = EtcdStore([etcd.endpoint])        # or store.open(etcd.url)
        ...
        etcd.stop()                           # the same member comes back on the same
        etcd.start()                          # ports and data, history intact

Debian's etcd 3.4 (package etcd-server, installed by ``make test`` and
``make bench``) is what CI runs; any etcd 3.4+ on PATH, or named by
``$ETCD_BIN``, works too. Nothing listens beyond 127.0.0.1.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Self

__all__ = ["MAX_REQUEST_BYTES", "LocalEtcd", "etcd_binary"]

# A value of MAX_VALUE_BYTES that zstd cannot shrink still gains a frame byte,
# a key and the protobuf envelope, so etcd's default 1.5 MiB request limit is
# too tight by a few bytes; production clusters need the same headroom.
MAX_REQUEST_BYTES = 1536 * 1024 + 64 * 1024


def etcd_binary() -> str:
    path = os.environ.get("ETCD_BIN") or shutil.which("etcd")
    if not path:
        raise RuntimeError(
            "no etcd binary found on PATH: `make test` (or `make etcd`) installs Debian's "
            "etcd-server (apt-get install etcd-server), or point $ETCD_BIN at an etcd 3.4+ binary")
    return path


# a proxy from the environment must not stand between us and loopback
_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LocalEtcd:
    """One etcd member on 127.0.0.1. ``start()`` returns once it serves linearizable reads.

    ``root`` (a temporary directory when None, removed by ``cleanup``) holds the
    member's ``data/`` and its ``etcd.log``.
    """

    def __init__(self, root: str | os.PathLike[str] | None = None,
                 startup_timeout: float = 30.0) -> None:
        self._own_dir = root is None
        self._root = Path(tempfile.mkdtemp(prefix="etcd-")) if root is None else Path(root)
        self._root.mkdir(parents=True, exist_ok=True)
        self.data_dir = self._root / "data"
        self.log_path = self._root / "etcd.log"
        self.client_port = _free_port()
        self.peer_port = _free_port()
        while self.peer_port == self.client_port:
            self.peer_port = _free_port()
        self.startup_timeout = startup_timeout
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.client_port}"

    @property
    def url(self) -> str:
        return f"etcd://{self.endpoint}"

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def _command(self) -> list[str]:
        client = f"http://127.0.0.1:{self.client_port}"
        peer = f"http://127.0.0.1:{self.peer_port}"
        return [
            etcd_binary(),
            "--name", "local",
            "--data-dir", str(self.data_dir),
            "--listen-client-urls", client,
            "--advertise-client-urls", client,
            "--listen-peer-urls", peer,
            "--initial-advertise-peer-urls", peer,
            "--initial-cluster", f"local={peer}",
            "--initial-cluster-state", "new",
            "--initial-cluster-token", f"local-{self.client_port}",
            "--max-request-bytes", str(MAX_REQUEST_BYTES),
            "--logger", "zap",
            "--log-outputs", "stderr",
        ]

    def start(self) -> None:
        if self.running:
            return
        log = open(self.log_path, "ab")  # noqa: SIM115 - held open for the process's life
        try:
            self._proc = subprocess.Popen(self._command(), stdin=subprocess.DEVNULL,
                                          stdout=log, stderr=log, start_new_session=True)
        finally:
            log.close()  # the child holds its own descriptor
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise RuntimeError(f"etcd exited with status {self._proc.returncode}:\n{self._log_tail()}")
            if self._ready():
                return
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"etcd did not become ready in {self.startup_timeout}s:\n{self._log_tail()}")

    def _ready(self) -> bool:
        # A linearizable range answers only once there is a leader and the member
        # has applied its log: the moment a store can use it.
        req = urllib.request.Request(
            f"http://{self.endpoint}/v3/kv/range", data=b'{"key":"AA==","count_only":true}',
            headers={"Content-Type": "application/json"}, method="POST")
        try:
            with _NO_PROXY.open(req, timeout=1.0) as resp:
                return bool(resp.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def _log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self, timeout: float = 10.0) -> None:
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def kill(self) -> None:
        """Stop without a clean shutdown (SIGKILL), as a crash would."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()

    def cleanup(self) -> None:
        self.stop()
        if self._own_dir:
            shutil.rmtree(self._root, ignore_errors=True)

    def __enter__(self) -> Self:
        try:
            self.start()
        except BaseException:
            self.cleanup()
            raise
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.cleanup()
