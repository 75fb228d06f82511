"""What a component that installs its own CustomResourceDefinitions through the API
shares: the collection's path, and the wait until a CRD is served (its
``Established`` condition True), after which its resources can be written."""

from __future__ import annotations

import asyncio

from .client import Client, resource_path

__all__ = ["CRD_PATH", "wait_established"]

CRD_PATH = resource_path("apiextensions.k8s.io", "v1", "customresourcedefinitions")


async def wait_established(client: Client, names: tuple[str, ...], timeout: float = 10.0) -> None:
    """Return once every CRD of ``names`` is established; TimeoutError after ``timeout`` s."""
    deadline = asyncio.get_running_loop().time() + timeout
    for name in names:
        while True:
            crd = await client.get(f"{CRD_PATH}/{name}")
            if any(c.get("type") == "Established" and c.get("status") == "True"
                   for c in (crd.get("status") or {}).get("conditions") or ()):
                break
            if asyncio.get_running_loop().time() > deadline:
                raise TimeoutError(f"CRD {name} not established after {timeout} s")
            await asyncio.sleep(0.05)
