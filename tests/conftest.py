"""Session-wide test setup: one CA for every ``controlplane serve`` the tests start.

Servers serve TLS by default. Each test server gets a copy of one PKI made here
(``start_serve`` puts it into the server's state directory, where ``serve``
reuses it), and ``SSL_CERT_FILE`` makes httpx trust its CA, so tests reach any
server with a plain ``httpx.get(served.url + ...)``. kubectl and the
``kubernetes`` client trust it through the kubeconfig, as users' clients do.

Every test must leave the process's signal handling as it found it (``tests/signalguard.py``
fails the one that does not).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from controlplane.pki import ensure_service_account_key, ensure_serving_pki

if TYPE_CHECKING:
    from tests.test_cli import Serve

pytest_plugins = ("tests.signalguard",)

TEST_PKI = Path(tempfile.mkdtemp(prefix="controlplane-test-pki-"))


def pytest_configure(config: pytest.Config) -> None:
    pki = ensure_serving_pki(TEST_PKI, "127.0.0.1")
    ensure_service_account_key(TEST_PKI)  # copied with the rest: no server of the tests makes its own
    os.environ["SSL_CERT_FILE"] = str(pki.ca_file)


def pytest_unconfigure(config: pytest.Config) -> None:
    shutil.rmtree(TEST_PKI, ignore_errors=True)


@pytest.fixture(scope="session")
def cert_served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    """One ``controlplane serve`` for the session that takes client certificates the tests' CA
    signed (``--client-ca-file``, tests/client_certs.py) and compacts its history each half
    second (continue tokens and watches from a second back get 410 Expired)."""
    from tests.test_cli import running, start_serve

    with running(start_serve(tmp_path_factory.mktemp("cert-served"), extra=(
            "--client-ca-file", str(TEST_PKI / "ca.crt"), "--etcd-compaction-interval", "0.5"))) as s:
        yield s
