"""A ``controlplane serve`` per test module, on a free port, stopped after."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client, config

from tests.test_cli import Serve, running, start_serve


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    with running(start_serve(tmp_path_factory.mktemp("e2e"))) as s:
        yield s


@pytest.fixture(scope="module")
def api(served: Serve) -> Iterator[client.ApiClient]:
    """The official client, configured from the server's kubeconfig (TLS, token)."""
    c = config.new_client_from_config(config_file=str(served.kubeconfig))
    try:
        yield c
    finally:
        c.close()
