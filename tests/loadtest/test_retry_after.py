"""The Locust users' calls as client-go's rest client makes them under API Priority and
Fairness: a 429 (or 5xx) with ``Retry-After`` is sent again after it, at most ten times; one
without it is the answer. Over a real socket, against a server that says busy twice."""

from __future__ import annotations

import http.server
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

USERS = r'''
import json, sys
from locust import events
from locust.env import Environment
from loadtest.locustfiles.base import KubeUser

class User(KubeUser):
    host = sys.argv[1]

user = User(Environment())
recorded = []
events.request.add_listener(lambda **kw: recorded.append([kw["request_type"], kw["name"], kw["exception"] is not None]))
answers = {path: user.call("POST", "/" + path, path, {}).status for path in ("busy", "plain", "always")}
print(json.dumps({"answers": answers, "recorded": recorded}))
'''


@pytest.fixture
def busy_server() -> Iterator[tuple[str, dict[str, int]]]:
    hits = {"busy": 0, "plain": 0, "always": 0}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length") or 0))
            path = self.path.strip("/")
            hits[path] += 1
            if path == "busy" and hits[path] > 2:
                self.send_response(201)
            else:
                self.send_response(429)
                if path != "plain":
                    self.send_header("Retry-After", "0.05")
            self.send_header("content-type", "application/json")
            self.send_header("content-length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, *_: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", hits
    finally:
        server.shutdown()
        server.server_close()


def test_a_429_with_retry_after_is_sent_again_as_client_go_does(busy_server: tuple[str, dict[str, int]]) -> None:
    url, hits = busy_server
    proc = subprocess.run([sys.executable, "-c", USERS, url], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen["answers"] == {"busy": 201, "plain": 429, "always": 429}
    assert hits == {"busy": 3, "plain": 1, "always": 11}  # the first try and client-go's ten retries
    calls = [r for r in seen["recorded"] if r[0] == "POST"]
    assert calls == [["POST", "busy", False], ["POST", "plain", True], ["POST", "always", True]]
    retried = [r[1] for r in seen["recorded"] if r[0] == "EXPECTED"]
    assert retried == ["retried 429 busy"] * 2 + ["retried 429 always"] * 10
