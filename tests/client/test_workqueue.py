"""client-go's work queue (client/workqueue.py): a key added for later waits once, for the
soonest time asked, as the delaying queue's AddAfter."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from controlplane.client import workqueue
from controlplane.client.workqueue import NotDone, WorkQueue, run_controller


async def test_add_after_keeps_one_timer_a_key_the_soonest() -> None:
    queue = WorkQueue()
    for _ in range(100):  # a sync that asks again each time it runs
        queue.add_after("job:a", 0.2)
    queue.add_after("job:a", 0.05)  # sooner: replaces the wait
    queue.add_after("job:a", 0.3)  # later: the sooner one stays
    assert len(queue._waiting) == 1
    loop = asyncio.get_running_loop()
    start = loop.time()
    assert await asyncio.wait_for(queue.get(), 1) == "job:a"
    assert 0.04 <= loop.time() - start < 0.19  # at the soonest, not at 0.2 or 0.3
    queue.done("job:a")
    assert not queue._waiting
    await asyncio.sleep(0.3)
    assert queue.empty()  # added once, not once a call


async def test_add_after_without_a_delay_adds_at_once() -> None:
    queue = WorkQueue()
    queue.add_after("k", 0)
    assert await asyncio.wait_for(queue.get(), 1) == "k" and not queue._waiting


async def test_a_key_not_done_is_handled_again_and_logged_in_a_line(caplog: Any, monkeypatch: Any) -> None:
    monkeypatch.setattr(workqueue, "RETRY_FIRST", 0.01)
    queue = WorkQueue()
    handled: list[str] = []
    again = asyncio.Event()

    async def handle(key: str) -> None:
        handled.append(key)
        if len(handled) == 1:
            raise NotDone("not approved yet")
        again.set()

    queue.add("k")
    caplog.set_level(logging.INFO, logger=workqueue.__name__)
    task = asyncio.create_task(run_controller("c", [], queue, handle, workers=1))
    try:
        await asyncio.wait_for(again.wait(), 5)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert handled == ["k", "k"]
    [record] = [r for r in caplog.records if "not approved yet" in r.getMessage()]
    assert record.exc_info is None and record.levelno == logging.INFO
