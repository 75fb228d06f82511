"""What ``GET /version`` answers: kube-apiserver's ``version.Info``, for the
Kubernetes release whose API this server emulates (DESIGN.md: 1.37).

``goVersion`` and ``compiler`` say honestly what runs: Python, not Go. Clients
(kubectl, the kubernetes client) only require the fields to be present.
"""

from __future__ import annotations

import platform
import sys
from typing import Any

__all__ = ["KUBE_MAJOR", "KUBE_MINOR", "GIT_VERSION", "version_info"]

KUBE_MAJOR = "1"
KUBE_MINOR = "37"
GIT_VERSION = f"v{KUBE_MAJOR}.{KUBE_MINOR}.0-controlplane"

# Go's names for the machines Python calls otherwise.
_GOARCH = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64", "i686": "386", "i386": "386"}


def version_info() -> dict[str, Any]:
    machine = platform.machine().lower()
    return {
        "major": KUBE_MAJOR,
        "minor": KUBE_MINOR,
        "emulationMajor": KUBE_MAJOR,
        "emulationMinor": KUBE_MINOR,
        "minCompatibilityMajor": KUBE_MAJOR,
        "minCompatibilityMinor": str(int(KUBE_MINOR) - 1),
        "gitVersion": GIT_VERSION,
        "gitCommit": "",
        "gitTreeState": "",
        "buildDate": "1970-01-01T00:00:00Z",
        "goVersion": f"python{platform.python_version()}",
        "compiler": sys.implementation.name,
        "platform": f"{sys.platform}/{_GOARCH.get(machine, machine)}",
    }
