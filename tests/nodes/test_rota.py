"""The heartbeat rota (controlplane.nodes.rota)."""

from __future__ import annotations

import pytest

from controlplane.nodes.rota import HeartbeatRota


def test_each_node_is_due_once_an_interval_at_its_offset() -> None:
    rota = HeartbeatRota(interval=1.0, slots=4, start=100.0)
    names = [f"node-{i}" for i in range(40)]
    for name in names:
        rota.add(name)
    assert len(rota) == 40
    seen: dict[str, list[float]] = {}
    for step in range(1, 31):  # a loop ticking every 0.1 s for 3 s
        for due, batch in rota.advance(100.0 + step * 0.1 - 0.01):
            for name in batch:
                seen.setdefault(name, []).append(due)
    assert sorted(seen) == sorted(names)
    for name, times in seen.items():
        first = 100.0 + rota.offset(name)
        assert times == pytest.approx([first, first + 1.0, first + 2.0])
    assert {rota.offset(n) for n in names} <= {0.0, 0.25, 0.5, 0.75}


def test_a_stalled_loop_gets_every_batch_it_overslept_with_its_own_due_time() -> None:
    rota = HeartbeatRota(interval=1.0, slots=4, start=0.0)
    for i in range(20):
        rota.add(f"n{i}")
    seated = {rota.slot_of(f"n{i}") for i in range(20)}
    assert [due for due, _ in rota.advance(0.0)] == [0.0]
    late = list(rota.advance(0.9))  # slept through three slot times, less than an interval
    assert [due for due, _ in late] == pytest.approx([0.25 * k for k in (1, 2, 3) if k in seated])
    assert list(rota.advance(0.9)) == []  # each handed out once
    assert rota.next_due() == pytest.approx(1.0)


def test_a_loop_behind_by_more_than_an_interval_gets_each_slot_once_at_its_last_time() -> None:
    """As a kubelet whose renew loop stalled: one renewal, not one per interval missed (and
    nodes seated before the loop starts are not due at times before it)."""
    rota = HeartbeatRota(interval=1.0, slots=4, start=0.0)
    for i in range(20):
        rota.add(f"n{i}")
    late = list(rota.advance(3.6))
    assert sorted(n for _, batch in late for n in batch) == sorted(f"n{i}" for i in range(20))
    assert all(2.6 < due <= 3.6 for due, _ in late)
    assert [due for due, _ in late] == sorted(due for due, _ in late)
    assert rota.next_due() == pytest.approx(3.75)


def test_a_removed_node_is_no_longer_due_and_adding_twice_seats_once() -> None:
    rota = HeartbeatRota(interval=1.0, slots=2, start=0.0)
    rota.add("a")
    rota.add("a")
    rota.add("b")
    assert len(rota) == 2 and "a" in rota
    rota.discard("a")
    rota.discard("never-added")
    assert "a" not in rota
    due = [at for step in range(1, 51) for at, batch in rota.advance(step * 0.1 - 0.01) for n in batch]
    assert due == pytest.approx([rota.offset("b") + k for k in range(5)])  # b alone, once a second


def test_bad_shapes_are_refused() -> None:
    with pytest.raises(ValueError, match="must be positive"):
        HeartbeatRota(interval=0, slots=4, start=0.0)
    with pytest.raises(ValueError, match="must be positive"):
        HeartbeatRota(interval=1.0, slots=0, start=0.0)
