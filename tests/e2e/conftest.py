"""A ``controlplane serve`` per test module, on a free port, stopped after."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.test_cli import Serve, start_serve


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    s = start_serve(tmp_path_factory.mktemp("e2e"))
    try:
        s.wait_ready()
        yield s
    finally:
        if s.proc.poll() is None:
            s.stop()
