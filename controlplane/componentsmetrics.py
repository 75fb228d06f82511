"""The ``--components-process`` child's metrics, on the API server's ``/metrics``.

With ``serve --components-process`` the scheduler, the node simulator, the autoscaler and
the controllers run in a process of their own (cli.py), and what they record is in that
process's copy of the registry: the API server's ``/metrics`` had only its own idle copies
of those series (zeros), and the scheduler's attempts, the simulated nodes' image pulls and
lease lag, the autoscaler's provisioning were exported nowhere. Now the server's
``/metrics`` shows the child's values of ``COMPONENTS_METRICS`` in place of its own:

- the first server process names a Unix socket in Linux's abstract namespace after its own
  pid (``announce``, before it forks anything) and puts the name in its environment, which
  the components child, the ``--workers`` processes and their replacements inherit;
- the child listens there (``serving``) and answers every connection with the exposition of
  ``COMPONENTS_METRICS``, then closes it;
- every API server process of the port reads it in its ``/metrics`` handler (``fetch``, in
  the handler's worker thread, off the event loop) and writes it after its own exposition,
  from which those families are left out (``metrics.exposition``'s ``skip``).

A child that does not answer within ``FETCH_TIMEOUT`` (restarting, or not started yet)
leaves those families out of that scrape: absent, not zeros, so that no counter seems to
go back to zero and start again. The abstract namespace needs no file to clean up and no
path short enough for ``sun_path``; it is Linux's, as the rest of ``serve``'s process
handling (``PR_SET_PDEATHSIG``, ``SO_REUSEPORT``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
from collections.abc import AsyncIterator

__all__ = ["ENV", "announce", "fetch", "serving", "skipped_families"]

log = logging.getLogger(__name__)

ENV = "CONTROLPLANE_COMPONENTS_METRICS"  # the abstract socket's name (without its leading NUL)
FETCH_TIMEOUT = 1.0  # seconds the server's /metrics waits for the child's exposition
READ_LIMIT = 64 * 1024 * 1024  # bytes of an exposition: far past any (the components' are a few hundred KB)


def announce() -> str:
    """Name the child's socket after this process (the first server process) and export the
    name to the processes it starts; returns it."""
    name = f"controlplane-components-metrics-{os.getpid()}"
    os.environ[ENV] = name
    return name


def _address() -> str | None:
    name = os.environ.get(ENV)
    return "\0" + name if name else None


def skipped_families() -> frozenset[str]:
    """The families this process's ``/metrics`` takes from the child rather than from its own
    registry; empty when the components are not in a process of their own."""
    if _address() is None:
        return frozenset()
    from .metrics import COMPONENTS_METRICS

    # (every one is a prometheus_client metric, which describes itself; a Collector need not)
    return frozenset(m.name for collector in COMPONENTS_METRICS
                     for m in collector.describe())  # type: ignore[attr-defined]


def fetch(timeout: float = FETCH_TIMEOUT) -> bytes:
    """The child's exposition of ``COMPONENTS_METRICS``, or ``b""`` if there is no child or it
    does not answer in time. Blocking: call it off the event loop."""
    address = _address()
    if address is None:
        return b""
    chunks: list[bytes] = []
    size = 0
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(timeout)
            s.connect(address)
            while size < READ_LIMIT:
                chunk = s.recv(1 << 16)
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
            else:
                return b""
    except OSError as e:  # (socket.timeout is one)
        log.debug("the components process's metrics: %r", e)
        return b""
    return b"".join(chunks)


@contextlib.asynccontextmanager
async def serving() -> AsyncIterator[None]:
    """In the components child: answer every connection on the announced socket with the
    exposition of ``COMPONENTS_METRICS`` while the block runs (nothing if none was announced,
    or if the name is taken: a child started again while the one before is still closing)."""
    address = _address()
    if address is None:
        yield
        return
    import asyncio

    from prometheus_client import CollectorRegistry

    from .metrics import COMPONENTS_METRICS, exposition
    from .metricsserver import send_and_close

    registry = CollectorRegistry(auto_describe=True)
    for collector in COMPONENTS_METRICS:
        registry.register(collector)

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await send_and_close(writer, exposition(registry))  # every connection is the server's scrape

    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(address)
    except OSError as e:
        sock.close()
        log.warning("the components' metrics are not served: %s", e)
        yield
        return
    server = await asyncio.start_unix_server(answer, sock=sock)
    try:
        yield
    finally:
        server.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(server.wait_closed(), 1.0)
