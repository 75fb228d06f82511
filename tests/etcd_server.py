"""The etcd tests run against: ``EtcdServer``, a ``store.etcd.local.LocalEtcd``.

    with EtcdServer() as etcd:
        s = store.open(etcd.url)          # "etcd://127.0.0.1:PORT"
        ...
        etcd.stop()                       # the same member comes back on the same
        etcd.start()                      # ports and data dir, history intact

``EtcdCluster(3)`` is three such members forming one cluster, for what only a cluster
shows (a member lost, quorum lost): ``cluster.url`` names them all, ``cluster.members[i]``
stops, kills and starts one.

``etcd_binary()`` raises with a clear message when there is no etcd: ``make test``
installs Debian's etcd-server.
"""

from __future__ import annotations

import contextlib
import time
from concurrent.futures import ThreadPoolExecutor
from types import TracebackType
from typing import Self

import httpx

from store.etcd.local import MAX_REQUEST_BYTES, LocalEtcd, etcd_binary

__all__ = ["MAX_REQUEST_BYTES", "EtcdCluster", "EtcdServer", "etcd_binary"]


class EtcdServer(LocalEtcd):
    """One etcd member on 127.0.0.1 in a temporary directory (see ``LocalEtcd``)."""


class _Member(EtcdServer):
    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name
        self.initial_cluster = self.token = ""

    def _command(self) -> list[str]:
        own = {"--name": self.name, "--initial-cluster": self.initial_cluster,
               "--initial-cluster-token": self.token}
        command = super()._command()
        for flag, value in own.items():
            command[command.index(flag) + 1] = value
        return command


class EtcdCluster:
    """``n`` etcd members on 127.0.0.1, one cluster; ``start()`` returns once it has a leader."""

    def __init__(self, n: int = 3) -> None:
        self.members = [_Member(f"m{i}") for i in range(n)]
        peers = ",".join(f"{m.name}=http://127.0.0.1:{m.peer_port}" for m in self.members)
        for m in self.members:
            m.initial_cluster, m.token = peers, f"cluster-{self.members[0].client_port}"

    @property
    def url(self) -> str:
        return "etcd://" + ",".join(m.endpoint for m in self.members)

    def leader(self, timeout: float = 10.0) -> int:
        """The index of the member that leads (the one whose status names itself leader)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for i, m in enumerate(self.members):
                if not m.running:
                    continue
                with contextlib.suppress(httpx.HTTPError, ValueError, KeyError):
                    status = httpx.post(f"http://{m.endpoint}/v3/maintenance/status", json={}, timeout=1.0).json()
                    if status.get("leader") == status["header"]["member_id"]:
                        return i
            time.sleep(0.05)
        raise RuntimeError(f"no member of the cluster led within {timeout}s")

    def start(self) -> None:
        # a member of a new cluster serves only once a quorum has met: start them together
        with ThreadPoolExecutor(len(self.members)) as pool:
            for done in [pool.submit(m.start) for m in self.members]:
                done.result()

    def cleanup(self) -> None:
        for m in self.members:
            m.cleanup()

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
