"""A standalone command's own /metrics and health checks (controlplane/metricsserver.py): the
flag, the answers over a socket, a given address in use (what each registry holds: test_metrics.py).
The commands serving them against a real server: tests/scheduler/test_e2e.py,
tests/nodes/test_standalone.py, tests/autoscaler/test_socket.py."""

from __future__ import annotations

import asyncio
import re
import socket
import time
from pathlib import Path

import pytest

from controlplane import metrics
from controlplane.cli import main
from controlplane.metrics import SCHEDULER_METRICS, component_registry
from controlplane.metricsserver import Address, listen, parse_address, serving

SERVING = re.compile(r"serving metrics on (http://\S+)/metrics")


def metrics_url(log: Path, timeout: float = 20.0) -> str:
    """The base URL a command started with ``--metrics-address HOST:0`` logged it serves on."""
    deadline = time.monotonic() + timeout
    while True:
        found = SERVING.search(log.read_text()) if log.exists() else None
        if found:
            return found.group(1)
        assert time.monotonic() < deadline, f"no 'serving metrics' line in {log}:\n{log.read_text()}"
        time.sleep(0.05)


@pytest.mark.parametrize(("text", "address"), [
    ("127.0.0.1:10259", Address("127.0.0.1", 10259)),
    (":8080", Address("", 8080)),
    ("[::1]:0", Address("::1", 0)),
    ("localhost:10247", Address("localhost", 10247)),
    ("off", None), ("", None), ("OFF", None),
])
def test_the_flag_takes_host_port_or_off(text: str, address: Address | None) -> None:
    assert parse_address(text) == address


@pytest.mark.parametrize("text", ["10259", "127.0.0.1", "127.0.0.1:http", "127.0.0.1:65536", "::1:80"])
def test_the_flag_refuses_what_is_no_address(text: str) -> None:
    with pytest.raises(ValueError, match=r"HOST:PORT|brackets"):
        parse_address(text)


async def _get(port: int, request: bytes) -> tuple[int, dict[str, str], bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request)
    await writer.drain()
    raw = await reader.read()  # the server closes after its answer
    writer.close()
    await writer.wait_closed()
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:])
    assert int(headers["Content-Length"]) == len(body) or request.startswith(b"HEAD")
    return int(lines[0].split(" ")[1]), headers, body


async def test_the_endpoint_answers_over_a_socket() -> None:
    synced = [False]
    registry = component_registry(SCHEDULER_METRICS)
    sock = socket.create_server(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    async with serving("controlplane test", sock, registry, lambda: synced[0]):
        status, headers, body = await _get(port, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        assert status == 200 and headers["Content-Type"] == metrics.CONTENT_TYPE
        assert "# TYPE controlplane_scheduler_schedule_attempts_total counter" in body.decode()
        assert (await _get(port, b"GET /healthz HTTP/1.1\r\n\r\n"))[::2] == (200, b"ok")
        assert (await _get(port, b"GET /livez HTTP/1.0\r\n\r\n"))[::2] == (200, b"ok")
        # not ready until the informers have listed: 500 with the list, as the API server's
        assert (await _get(port, b"GET /readyz HTTP/1.1\r\n\r\n"))[::2] == (
            500, b"[+]ping ok\n[-]informer-sync failed: reason withheld\nreadyz check failed\n")
        synced[0] = True
        assert (await _get(port, b"GET /readyz?verbose HTTP/1.1\r\n\r\n"))[::2] == (
            200, b"[+]ping ok\n[+]informer-sync ok\nreadyz check passed\n")
        status, headers, body = await _get(port, b"HEAD /metrics HTTP/1.1\r\n\r\n")
        assert status == 200 and body == b"" and int(headers["Content-Length"]) > 0
        assert (await _get(port, b"GET /metrics/x HTTP/1.1\r\n\r\n"))[::2] == (404, b"404 page not found\n")
        assert (await _get(port, b"GET /api/v1/pods HTTP/1.1\r\n\r\n"))[0] == 404
        status, headers, _ = await _get(port, b"POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n")
        assert status == 405 and headers["Allow"] == "GET, HEAD"
        assert (await _get(port, b"nonsense\r\n\r\n"))[0] == 400
        assert (await _get(port, b"GET /" + b"x" * 20_000 + b" HTTP/1.1\r\n\r\n"))[0] == 431
    assert sock.fileno() == -1  # closed with the block


@pytest.mark.parametrize("command", ["scheduler", "nodes", "autoscaler"])
def test_a_given_address_in_use_is_one_line_and_exit_1(tmp_path: Path, command: str,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        # before the kubeconfig is read, or the server reached: nothing else is tried
        assert main([command, "--kubeconfig", str(tmp_path / "none"), "--metrics-address", f"127.0.0.1:{port}"]) == 1
    err = capsys.readouterr().err
    assert err == f"controlplane {command}: error: cannot serve metrics on 127.0.0.1:{port}: Address already in use\n"


def test_the_default_address_in_use_is_a_warning_and_no_metrics(caplog: pytest.LogCaptureFixture) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        assert listen("controlplane nodes", Address("127.0.0.1", port, given=False)) is None
    assert caplog.messages == [f"controlplane nodes: not serving metrics: cannot listen on 127.0.0.1:{port}: Address "
                               "already in use (--metrics-address HOST:PORT to choose another address, off for none)"]
    assert listen("controlplane nodes", None) is None  # off


def test_a_bad_address_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["nodes", "--kubeconfig", "k", "--metrics-address", "10247"])
    assert e.value.code == 2
    assert "argument --metrics-address: not HOST:PORT (a port from 0 to 65535), nor off: '10247'" in \
        capsys.readouterr().err
