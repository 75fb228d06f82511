"""The Status a request gets when the store fails under it.

A write the store sent and got no answer for (``store.OutcomeUnknown``: etcd stopped answering
or said "request timed out") may still be applied: upstream's answer to a request its storage
did not finish is the timeout filter's 504 ``Timeout`` ("... may still be processing the
request" in kubectl's words), never a 503 that says it was not. A store that cannot be reached
at all stays a 503 ``ServiceUnavailable``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import store
from controlplane.api.app import create_app
from controlplane.client import ApiError, Client, resource_path
from controlplane.config import Config

CONFIGMAPS = resource_path("", "v1", "configmaps", "default")


@pytest.mark.parametrize(("failure", "code", "reason"), [
    (store.OutcomeUnknown("etcd at http://127.0.0.1:2379 failed during a write, whose outcome is unknown"),
     504, "Timeout"),
    (store.Unavailable("no etcd member answered"), 503, "ServiceUnavailable"),
])
async def test_a_failed_write_says_whether_it_may_have_been_applied(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failure: store.StoreError, code: int, reason: str) -> None:
    app = create_app(Config(data_dir=tmp_path / "data", tls=False, scheduler=False))
    async with app.router.lifespan_context(app), Client.in_process(app.state.front) as c:
        kv = app.state.front.kube.store

        async def failing(*args: Any, **kwargs: Any) -> int:
            raise failure

        monkeypatch.setattr(kv, "create", failing)
        with pytest.raises(ApiError) as e:
            await c.create(CONFIGMAPS, {"metadata": {"name": "a"}})
        assert (e.value.code, e.value.reason) == (code, reason)
        assert str(failure) in e.value.message
        if code == 504:
            assert e.value.message.startswith("Timeout: request did not complete within requested timeout - ")
