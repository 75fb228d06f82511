"""A store view in a served version's shape, for types stored as another version's.

events.k8s.io/v1 Events are stored as core/v1 Events (``registry.conversion``).
While a request for such a type is handled, ``KubeApi.store`` is a
``ConvertingStore`` (``CONVERSION`` is set for the request's context): values
read come back in the served shape, values written go down in the stored
shape, so the handlers work in one shape throughout. Reads through the watch
cache (which holds the stored shape) are converted by the handlers.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from contextvars import ContextVar

import orjson

from store import Store
from store.interface import KeyValue

from ..registry.conversion import Conversion
from .storeview import StoreView

__all__ = ["CONVERSION", "ConvertingStore", "served_bytes", "unconverted"]

CONVERSION: ContextVar[Conversion | None] = ContextVar("controlplane_conversion", default=None)


@contextlib.contextmanager
def unconverted() -> Iterator[None]:
    """Reads and writes of other types within a request for a converted one (admission
    reading quotas while an autoscaling/v1 HPA is created): in their stored shape."""
    token = CONVERSION.set(None)
    try:
        yield
    finally:
        CONVERSION.reset(token)


def served_bytes(conversion: Conversion, stored: bytes) -> bytes:
    return orjson.dumps(conversion.from_storage(orjson.loads(stored)))


def _stored_bytes(conversion: Conversion, served: bytes) -> bytes:
    return orjson.dumps(conversion.to_storage(orjson.loads(served)))


class ConvertingStore(StoreView):
    def __init__(self, real: Store, conversion: Conversion) -> None:
        super().__init__(real)
        self._conv = conversion

    def _served(self, kv: KeyValue) -> KeyValue:
        return dataclasses.replace(kv, value=served_bytes(self._conv, kv.value))

    async def create(self, key: bytes, value: bytes) -> int:
        return await self._real.create(key, _stored_bytes(self._conv, value))

    async def update(self, key: bytes, value: bytes, expected_revision: int) -> int:
        return await self._real.update(key, _stored_bytes(self._conv, value), expected_revision)

    async def delete(self, key: bytes, expected_revision: int = 0) -> int:
        return await self._real.delete(key, expected_revision)

    async def get(self, key: bytes, revision: int = 0) -> KeyValue | None:
        kv = await self._real.get(key, revision)
        return None if kv is None else self._served(kv)

    async def range(self, start: bytes, end: bytes, revision: int = 0,
                    limit: int = 0) -> tuple[list[KeyValue], int, bool]:
        kvs, rev, more = await self._real.range(start, end, revision, limit)
        return [self._served(kv) for kv in kvs], rev, more
