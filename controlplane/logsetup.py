"""The log configuration every ``controlplane`` command starts with.

httpx says each request it makes at INFO: one line per etcd call, Lease renewal or
binding, thousands a second under load, where those lines cost more than the requests'
own work. They are kept for ``--log-level debug``."""

from __future__ import annotations

import logging

__all__ = ["configure"]

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# the HTTP clients' loggers: a line per request at INFO
_PER_REQUEST = ("httpx", "httpcore")


def configure(level: str) -> None:
    """Log at ``level`` (``debug``, ``info``, ...) to standard error, the clients' requests only at debug."""
    logging.basicConfig(level=level.upper(), format=FORMAT)
    if level.lower() != "debug":
        for name in _PER_REQUEST:
            logging.getLogger(name).setLevel(logging.WARNING)
