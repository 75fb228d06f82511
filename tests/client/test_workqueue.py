"""client-go's work queue (client/workqueue.py): a key added for later waits once, for the
soonest time asked, as the delaying queue's AddAfter."""

from __future__ import annotations

import asyncio

from controlplane.client.workqueue import WorkQueue


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
