"""Session-wide test setup: one CA for every ``controlplane serve`` the tests start.

Servers serve TLS by default. Each test server gets a copy of one PKI made here
(``start_serve`` puts it into the server's state directory, where ``serve``
reuses it), and ``SSL_CERT_FILE`` makes httpx trust its CA, so tests reach any
server with a plain ``httpx.get(served.url + ...)``. kubectl and the
``kubernetes`` client trust it through the kubeconfig, as users' clients do.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from controlplane.pki import ensure_serving_pki

TEST_PKI = Path(tempfile.mkdtemp(prefix="controlplane-test-pki-"))


def pytest_configure(config: pytest.Config) -> None:
    pki = ensure_serving_pki(TEST_PKI, "127.0.0.1")
    os.environ["SSL_CERT_FILE"] = str(pki.ca_file)


def pytest_unconfigure(config: pytest.Config) -> None:
    shutil.rmtree(TEST_PKI, ignore_errors=True)
