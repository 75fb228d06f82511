"""``observe_many``: the same histogram as one ``observe`` per amount."""

from __future__ import annotations

import random

from prometheus_client import CollectorRegistry, Histogram, generate_latest

from controlplane.metrics import observe_many


def _exposed(registry: CollectorRegistry) -> list[str]:
    return [line for line in generate_latest(registry).decode().splitlines() if "_created" not in line]


def test_observe_many_counts_as_observe_one_by_one() -> None:
    rng = random.Random(7)
    amounts = [rng.choice([0.0, 0.0005, 0.001, 0.01, 0.1000001, 0.5, 1.0, 2.0, -1.0]) for _ in range(1000)]
    one_by_one, batched = CollectorRegistry(), CollectorRegistry()
    a = Histogram("d", "d", ["r"], buckets=(0.001, 0.01, 0.1, 1.0), registry=one_by_one).labels(r="pods")
    b = Histogram("d", "d", ["r"], buckets=(0.001, 0.01, 0.1, 1.0), registry=batched).labels(r="pods")
    for amount in amounts:
        a.observe(amount)
    observe_many(b, amounts)
    observe_many(b, [])
    observe_many(b, amounts[:1])
    a.observe(amounts[0])
    assert _exposed(one_by_one) == _exposed(batched)
