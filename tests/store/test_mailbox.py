"""The writer's mailbox (store/lmdb/writer.py): a wake-up is never lost, however puts
and takes interleave across threads."""

from __future__ import annotations

import random
import threading
import time

from store.lmdb.writer import _Mailbox


def test_every_item_is_taken_promptly_across_threads() -> None:
    box: _Mailbox[int] = _Mailbox()
    n = 20_000
    taken: list[int] = []
    slow: list[float] = []

    def consume() -> None:
        while len(taken) < n:
            started = time.monotonic()
            got = box.take(64, 5.0)  # a lost wake-up shows as a take that waits its timeout
            if got and time.monotonic() - started > 2.0:
                slow.append(time.monotonic() - started)
            taken.extend(got)

    consumer = threading.Thread(target=consume)
    consumer.start()
    rnd = random.Random(5)
    for i in range(n):
        box.put(i)
        if rnd.random() < 0.01:
            time.sleep(rnd.random() / 1000)  # let the consumer go idle now and then
    consumer.join(30)
    assert not consumer.is_alive()
    assert taken == list(range(n))
    assert not slow
