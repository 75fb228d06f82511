"""The root CA publisher (controllers/rootca.py): kube-root-ca.crt in every namespace, put back."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from controlplane.api.app import create_app
from controlplane.client import Client
from controlplane.config import Config
from controlplane.controllers.rootca import NAME, RootCaPublisher, ca_bundle
from tests.controllers.helpers import until

BUNDLE = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[Client]:
    app = create_app(Config(data_dir=tmp_path / "data", tls=False, scheduler=False))
    async with app.router.lifespan_context(app):
        c = Client.in_process(app.state.front)
        task = asyncio.create_task(RootCaPublisher(c, BUNDLE).run())
        try:
            yield c
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


async def test_every_namespace_gets_the_bundle_and_keeps_it(client: Client) -> None:
    c = client

    async def bundle_in(namespace: str) -> bool:
        try:
            cm = await c.get(f"/api/v1/namespaces/{namespace}/configmaps/{NAME}")
        except Exception:
            return False
        return bool(cm["data"] == {"ca.crt": BUNDLE} and "kubernetes.io/description" in cm["metadata"]["annotations"])

    for namespace in ("default", "kube-system", "kube-public", "kube-node-lease"):
        await until(functools.partial(bundle_in, namespace))
    await c.create("/api/v1/namespaces", {"metadata": {"name": "team"}})
    await until(lambda: bundle_in("team"))
    await c.patch(f"/api/v1/namespaces/team/configmaps/{NAME}", {"data": {"ca.crt": "tampered", "extra": "x"}})
    await until(lambda: bundle_in("team"))  # put back, the extra key gone
    await c.delete(f"/api/v1/namespaces/team/configmaps/{NAME}")
    await until(lambda: bundle_in("team"))


def test_the_bundle_is_what_clients_trust(tmp_path: Path) -> None:
    config = Config(data_dir=tmp_path / "data")
    assert ca_bundle(dataclasses.replace(config, tls=False)) is None
    config.pki_dir.mkdir(parents=True)
    (config.pki_dir / "ca.crt").write_text(BUNDLE)
    assert ca_bundle(config) == BUNDLE
    chain = tmp_path / "chain.pem"
    chain.write_text(BUNDLE + BUNDLE)
    assert ca_bundle(dataclasses.replace(config, tls_cert_file=chain, tls_private_key_file=chain)) == BUNDLE + BUNDLE
