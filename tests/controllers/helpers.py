"""Waiting for a controller to converge."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any


async def until(check: Callable[[], Any], timeout: float = 20.0, message: str = "timed out") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = await check()
        if got:
            return got
        assert time.monotonic() < deadline, message
        await asyncio.sleep(0.05)
