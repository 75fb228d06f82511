"""A standalone component's own HTTP endpoint: ``/metrics``, ``/healthz``, ``/livez``, ``/readyz``.

``controlplane scheduler``, ``nodes`` and ``autoscaler`` run against any API server, whose
``/metrics`` knows nothing of them; each serves its own, as the real components do on a port
of their own: kube-scheduler on 10259, Karpenter's controller on 8080 (its ``METRICS_PORT``;
health probes on 8081), KWOK's controller on 10247 (``--server-address``). One flag names
the address for the three (``add_argument``)::

    --metrics-address 127.0.0.1:10259    the default: loopback, the upstream component's port
    --metrics-address 0.0.0.0:10259      every IPv4 interface (:10259: every interface)
    --metrics-address 127.0.0.1:0        a port the kernel picks, logged at start
    --metrics-address off                none

``/metrics`` is the component's registry (metrics.py ``component_registry``): its own
metrics and the process's, in the same text format as the API server's. ``/healthz`` and
``/livez`` answer ``ok`` while the process's loop runs (``ping``); ``/readyz`` adds
``informer-sync``, passed once the component's informers have listed what they watch
(kube-scheduler's ``sched-handler-sync``). ``?verbose`` lists the checks, and a failure is
HTTP 500 with the list, as the API server answers (api/app.py). Nothing is authenticated:
it is plain HTTP, where kube-scheduler serves HTTPS and authorizes ``/metrics``; hence the
loopback default. Other paths are 404, other methods than GET and HEAD 405.

The socket is bound before the command connects to its API server (``listen``), so that an
address given and in use stops the command at once, in one line (exit code 1). A default
address in use (a second ``controlplane nodes`` on the machine, another program on 8080) is
only a warning: the command runs without metrics, as it did before it served any.

The server is a few lines of asyncio rather than uvicorn: it reads a request's head, writes
one answer and closes the connection (``Connection: close``), which is all a scrape every few
seconds or a probe needs, and it leaves the command's signal handling alone. asyncio is
imported when the server starts: the command's parser, built by every ``controlplane``
command, imports only this module's flag parts.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs

if TYPE_CHECKING:
    import asyncio

    from prometheus_client import CollectorRegistry

__all__ = ["DEFAULT_HOST", "Address", "AddressInUse", "add_argument", "listen", "parse_address", "send_and_close",
           "serving"]

log = logging.getLogger("controlplane.metricsserver")

DEFAULT_HOST = "127.0.0.1"
OFF = ("", "off")
HEAD_LIMIT = 16 * 1024  # bytes of a request's head: a scraper's or a probe's is a few hundred
HEAD_TIMEOUT = 10.0  # seconds a connection has to send its head
_TEXT = "text/plain; charset=utf-8"


@dataclass(frozen=True, slots=True)
class Address:
    host: str  # "" for every interface
    port: int  # 0: the kernel picks one
    given: bool = True  # typed by the user (not the default): failing to listen on it stops the command

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


class AddressInUse(Exception):
    """A given ``--metrics-address`` cannot be listened on; the message is the command's one line."""


def parse_address(text: str) -> Address | None:
    """``--metrics-address``'s value: ``HOST:PORT``, ``[IPv6]:PORT``, ``:PORT``; None for ``off``
    (or empty). A ValueError says what is wrong (argparse reports it as the flag's error)."""
    text = text.strip()
    if text.lower() in OFF:
        return None
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"not HOST:PORT (a port from 0 to 65535), nor off: {text!r}")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        raise ValueError(f"an IPv6 host goes in brackets, as [::1]:PORT: {text!r}")
    return Address(host, int(port))


def _argument(text: str) -> Address | None:
    import argparse

    try:
        return parse_address(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def add_argument(parser: Any, default_port: int, upstream: str) -> None:
    """The ``--metrics-address`` flag on a command's parser, defaulting to loopback and
    ``default_port`` (``upstream``'s: named in the help)."""
    default = Address(DEFAULT_HOST, default_port, given=False)
    parser.add_argument("--metrics-address", metavar="HOST:PORT", type=_argument, default=default,
                        help=f"serve /metrics, /healthz, /livez and /readyz over plain HTTP there (default: "
                             f"{default}, {upstream}'s port; if it is in use, a warning and no metrics); "
                             ":PORT for every interface, port 0 for one the kernel picks, off for none")


def listen(command: str, address: Address | None) -> socket.socket | None:
    """A socket listening on ``address``; None if it is off, or is the default and cannot be
    listened on (a warning then). A given address that cannot be raises ``AddressInUse``."""
    if address is None:
        return None
    try:
        return _bind(address)
    except OSError as e:
        # (create_server's message repeats the address: the errno's says it all)
        reason = os.strerror(e.errno) if e.errno and not isinstance(e, socket.gaierror) else e.strerror or str(e)
        if address.given:
            raise AddressInUse(f"{command}: error: cannot serve metrics on {address}: {reason}") from None
        log.warning("%s: not serving metrics: cannot listen on %s: %s (--metrics-address HOST:PORT to choose "
                    "another address, off for none)", command, address, reason)
        return None


def _bind(address: Address) -> socket.socket:
    if not address.host and socket.has_dualstack_ipv6():
        return socket.create_server(("", address.port), family=socket.AF_INET6, dualstack_ipv6=True)
    family = socket.getaddrinfo(address.host or None, address.port, type=socket.SOCK_STREAM,
                                flags=socket.AI_PASSIVE)[0][0]
    return socket.create_server((address.host, address.port), family=family)


@contextlib.asynccontextmanager
async def serving(command: str, sock: socket.socket | None, registry: CollectorRegistry,
                  synced: Callable[[], bool]) -> AsyncIterator[None]:
    """Serve on ``sock`` (nothing if None) while the block runs, with the loop's lag and the
    collector's pauses recorded; ``synced`` is the ``informer-sync`` check."""
    if sock is None:
        yield
        return
    import asyncio

    from .metrics import monitor_event_loop_lag, observe_gc_pauses

    endpoint = _Endpoint(registry, synced)
    server = await asyncio.start_server(endpoint.answer, sock=sock, limit=HEAD_LIMIT)
    lag = asyncio.create_task(monitor_event_loop_lag(), name="event-loop-lag")
    observe_gc_pauses()
    host, port = sock.getsockname()[:2]
    log.info("%s: serving metrics on http://%s/metrics", command, Address(host, port))
    try:
        yield
    finally:
        lag.cancel()
        server.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(server.wait_closed(), 1.0)


class _Endpoint:
    def __init__(self, registry: CollectorRegistry, synced: Callable[[], bool]) -> None:
        self.registry = registry
        always: Callable[[], bool] = lambda: True
        ping = ("ping", always, "")
        self.checks: dict[str, list[tuple[str, Callable[[], bool], str]]] = {
            "/healthz": [ping], "/livez": [ping],
            "/readyz": [ping, ("informer-sync", synced, "the informers have not listed yet")]}

    async def answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        import asyncio

        answer: bytes | None = None
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEAD_TIMEOUT)
        except asyncio.LimitOverrunError:
            answer = _response(431, "Request Header Fields Too Large", _TEXT, b"request head too large\n")
        except (asyncio.IncompleteReadError, TimeoutError, ConnectionError, OSError):
            pass  # gone, or silent: nothing to answer
        else:
            answer = self.respond(head)
        await send_and_close(writer, answer)

    def respond(self, head: bytes) -> bytes:
        """The whole HTTP response to a request of head ``head``."""
        parts = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            return _response(400, "Bad Request", _TEXT, b"malformed request line\n")
        method, target, _ = parts
        path, _, query = target.partition("?")
        if path != "/metrics" and path not in self.checks:
            status, reason, kind, body = 404, "Not Found", _TEXT, b"404 page not found\n"  # Go's ServeMux
        elif method not in ("GET", "HEAD"):
            return _response(405, "Method Not Allowed", _TEXT, b"method not allowed\n", b"Allow: GET, HEAD\r\n")
        elif path == "/metrics":
            from .metrics import CONTENT_TYPE, exposition

            status, reason, kind, body = 200, "OK", CONTENT_TYPE, exposition(self.registry)
        else:
            status, reason, kind, body = self._health(path, "verbose" in parse_qs(query, keep_blank_values=True))
        return _response(status, reason, kind, b"" if method == "HEAD" else body, length=len(body))

    def _health(self, path: str, verbose: bool) -> tuple[int, str, str, bytes]:
        """As the API server's checks answer (api/app.py): ``ok``; the list if verbose or failing."""
        endpoint = path.lstrip("/")
        lines: list[str] = []
        failed = False
        for name, passes, reason in self.checks[path]:
            if passes():
                lines.append(f"[+]{name} ok")
            else:
                failed = True
                lines.append(f"[-]{name} failed: reason withheld")
                log.info("%s check failed: %s: %s", endpoint, name, reason)
        if failed:
            return 500, "Internal Server Error", _TEXT, ("\n".join(lines) + f"\n{endpoint} check failed\n").encode()
        if verbose:
            return 200, "OK", _TEXT, ("\n".join(lines) + f"\n{endpoint} check passed\n").encode()
        return 200, "OK", _TEXT, b"ok"


async def send_and_close(writer: asyncio.StreamWriter, data: bytes | None) -> None:
    """Write ``data`` (if any) to a connection and close it, whatever the peer has done
    meanwhile (gone, reset): a scrape or a probe is one request a connection."""
    try:
        if data is not None:
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        writer.close()
        with contextlib.suppress(Exception):
            await writer.wait_closed()


def _response(status: int, reason: str, content_type: str, body: bytes, extra: bytes = b"",
              length: int | None = None) -> bytes:
    head = (f"HTTP/1.1 {status} {reason}\r\nContent-Type: {content_type}\r\n"
            f"Content-Length: {len(body) if length is None else length}\r\n"
            "X-Content-Type-Options: nosniff\r\nConnection: close\r\n").encode()
    return head + extra + b"\r\n" + body
