"""Every command's log configuration (controlplane.logsetup)."""

from __future__ import annotations

import subprocess
import sys


def _levels(level: str) -> list[str]:
    code = (f"import logging; from controlplane.logsetup import configure; configure({level!r}); "
            "print(*(logging.getLogger(n).getEffectiveLevel() for n in ('httpx', 'httpcore', 'controlplane.x')))")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()


def test_the_http_clients_requests_are_logged_only_at_debug() -> None:
    # httpx says every request at INFO: a line per etcd call or Lease renewal, thousands a second
    assert _levels("info") == ["30", "30", "20"]
    assert _levels("warning") == ["30", "30", "30"]
    assert _levels("debug") == ["10", "10", "10"]
