"""kube-controller-manager's ``csrcleaner``: old CertificateSigningRequests deleted, as
upstream's cleaner (requests pile up where kubelets renew their certificates).

Every ``POLL_INTERVAL`` (an hour, as upstream's; the first pass once the informer has
listed) each request is deleted that is:

- approved and issued, its ``Approved`` condition last updated over an hour ago;
- denied, or failed, that condition last updated over an hour ago;
- pending (no condition at all) and created over 24 hours ago;
- approved and issued with a certificate whose ``notAfter`` has passed.

A sweep that fails (a delete timing out under load) is logged and the next one tries
again, as upstream's ``wait.Until`` loop goes on.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import datetime
import logging
from typing import TYPE_CHECKING, Any

from controlplane.client import ApiError, Client

from .certificates import CSRS
from .ownership import meta_of

if TYPE_CHECKING:
    from controlplane.config import Config

__all__ = ["POLL_INTERVAL", "CsrCleaner", "expired", "start"]

log = logging.getLogger(__name__)

POLL_INTERVAL = 3600.0
APPROVED_EXPIRATION = datetime.timedelta(hours=1)
DENIED_EXPIRATION = datetime.timedelta(hours=1)  # failed ones too, as upstream's
PENDING_EXPIRATION = datetime.timedelta(hours=24)


def _time(value: Any) -> datetime.datetime | None:
    try:
        return datetime.datetime.strptime(str(value), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.UTC)
    except ValueError:
        return None  # (a zero time: never old)


def _older(value: Any, age: datetime.timedelta, now: datetime.datetime) -> bool:
    when = _time(value)
    return when is not None and now - when > age


def _certificate_expired(encoded: Any, now: datetime.datetime) -> bool:
    from cryptography import x509

    try:
        cert = x509.load_pem_x509_certificate(base64.b64decode(str(encoded), validate=True))
    except (binascii.Error, ValueError):
        return False
    return now > cert.not_valid_after_utc


def expired(csr: dict[str, Any], now: datetime.datetime) -> bool:
    """Whether upstream's cleaner deletes ``csr`` at ``now``."""
    status = csr.get("status") or {}
    conditions = [c for c in status.get("conditions") or () if isinstance(c, dict)]
    issued = bool(status.get("certificate"))
    for c in conditions:
        kind = c.get("type")
        if kind == "Approved" and issued and (_older(c.get("lastUpdateTime"), APPROVED_EXPIRATION, now)
                                              or _certificate_expired(status["certificate"], now)):
            return True
        if kind in ("Denied", "Failed") and _older(c.get("lastUpdateTime"), DENIED_EXPIRATION, now):
            return True
    return not conditions and _older(meta_of(csr).get("creationTimestamp"), PENDING_EXPIRATION, now)


class CsrCleaner:
    def __init__(self, client: Client, interval: float = POLL_INTERVAL) -> None:
        self.client = client
        self.interval = interval
        self.csrs = client.informer(CSRS)

    async def sweep(self) -> None:
        now = datetime.datetime.now(datetime.UTC)
        for name, csr in list(self.csrs.items.items()):
            if expired(csr, now):
                try:
                    await self.client.delete(f"{CSRS}/{name}")
                except ApiError as e:
                    if e.code != 404:
                        log.warning("csr cleaner: cannot delete %s: %s", name, e)

    async def run(self) -> None:
        informer = asyncio.create_task(self.csrs.run())
        try:
            await self.csrs.synced.wait()
            while True:
                try:
                    await self.sweep()
                except Exception:  # a sweep's failure (a timeout, ...) must not end the cleaner: the next tries
                    log.exception("csr cleaner: sweep failed")
                await asyncio.sleep(self.interval)
        finally:
            informer.cancel()
            await asyncio.gather(informer, return_exceptions=True)


async def start(client: Client, config: Config) -> None:
    """The component entry point (``controlplane/components.py``)."""
    await CsrCleaner(client).run()
