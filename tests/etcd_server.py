"""The etcd tests run against: ``EtcdServer``, a ``store.etcd.local.LocalEtcd``.

    with EtcdServer() as etcd:
        s = store.open(etcd.url)          # "etcd://127.0.0.1:PORT"
        ...
        etcd.stop()                       # the same member comes back on the same
        etcd.start()                      # ports and data dir, history intact

``etcd_binary()`` raises with a clear message when there is no etcd: ``make test``
installs Debian's etcd-server.
"""

from __future__ import annotations

from store.etcd.local import MAX_REQUEST_BYTES, LocalEtcd, etcd_binary

__all__ = ["MAX_REQUEST_BYTES", "EtcdServer", "etcd_binary"]


class EtcdServer(LocalEtcd):
    """One etcd member on 127.0.0.1 in a temporary directory (see ``LocalEtcd``)."""
