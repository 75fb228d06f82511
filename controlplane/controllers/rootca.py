"""The root CA publisher of kube-controller-manager: every namespace holds a ConfigMap
``kube-root-ca.crt`` with the CA that signs the API server's certificate (``ca.crt``),
the bundle a pod's service account volume mounts to trust the API. Made when a
namespace appears, and put back when it is deleted or changed; none in a namespace
that is terminating, and none at all when the server serves plain HTTP."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from controlplane.client import ApiError, Client, resource_path
from controlplane.client.workqueue import WorkQueue, run_controller

from .ownership import meta_of

if TYPE_CHECKING:
    from controlplane.config import Config

__all__ = ["NAME", "RootCaPublisher", "ca_bundle", "start"]

log = logging.getLogger(__name__)

NAME = "kube-root-ca.crt"
DESCRIPTION = ("Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints "
               "such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across "
               "distributions of Kubernetes clusters.")
NAMESPACES = resource_path("", "v1", "namespaces")
CONFIGMAPS = resource_path("", "v1", "configmaps")


def ca_bundle(config: Config) -> str | None:
    """What the server's clients trust: the given certificate's chain, or the generated CA."""
    if not config.tls:
        return None
    path = config.tls_cert_file if config.tls_cert_file is not None else Path(config.pki_dir) / "ca.crt"
    try:
        return path.read_text()
    except OSError as e:
        log.warning("root CA publisher: cannot read %s: %s", path, e)
        return None


class RootCaPublisher:
    def __init__(self, client: Client, bundle: str) -> None:
        self.client = client
        self.bundle = bundle
        self.queue = WorkQueue()
        self.namespaces = client.informer(NAMESPACES, on_add=self._namespace,
                                          on_update=lambda _old, new: self._namespace(new))
        self.configmaps = client.informer(CONFIGMAPS, on_update=lambda _old, new: self._configmap(new),
                                          on_delete=self._configmap)

    def _namespace(self, ns: dict[str, Any]) -> None:
        self.queue.add(str(meta_of(ns).get("name", "")))

    def _configmap(self, cm: dict[str, Any]) -> None:
        meta = meta_of(cm)
        if meta.get("name") == NAME:
            self.queue.add(str(meta.get("namespace", "")))

    async def run(self) -> None:
        await run_controller("root CA publisher", (self.namespaces, self.configmaps), self.queue, self.sync, 1)

    async def sync(self, namespace: str) -> None:
        ns = self.namespaces.items.get(namespace)
        if ns is None or meta_of(ns).get("deletionTimestamp") or (ns.get("status") or {}).get("phase") == \
                "Terminating":
            return
        wanted = {"ca.crt": self.bundle}
        current = self.configmaps.items.get(f"{namespace}/{NAME}")
        try:
            if current is None:
                await self.client.create(resource_path("", "v1", "configmaps", namespace), {
                    "apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": NAME, "annotations": {"kubernetes.io/description": DESCRIPTION}},
                    "data": wanted})
            elif current.get("data") != wanted:
                await self.client.patch(f"{resource_path('', 'v1', 'configmaps', namespace)}/{NAME}", {
                    "metadata": {"resourceVersion": meta_of(current).get("resourceVersion")},
                    "data": {**dict.fromkeys(current.get("data") or {}), **wanted}})
        except ApiError as e:
            if e.code not in (403, 404, 409):  # terminating or gone meanwhile; raced: the event comes back
                raise


async def start(client: Client, config: Config) -> None:
    """The component entry point (``controlplane/components.py``)."""
    bundle = ca_bundle(config)
    if bundle is None:
        return
    await RootCaPublisher(client, bundle).run()
