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
    for due, batch in rota.advance(102.99):
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
    assert [due for due, _ in rota.advance(0.0)] == [0.0]
    late = list(rota.advance(2.6))  # slept through ten slot times
    assert [due for due, _ in late] == pytest.approx([0.25 * k for k in range(1, 11) if k % 4 in {
        rota.slot_of(f"n{i}") for i in range(20)}])
    assert list(rota.advance(2.6)) == []  # each handed out once
    assert rota.next_due() == pytest.approx(2.75)


def test_a_removed_node_is_no_longer_due_and_adding_twice_seats_once() -> None:
    rota = HeartbeatRota(interval=1.0, slots=2, start=0.0)
    rota.add("a")
    rota.add("a")
    rota.add("b")
    assert len(rota) == 2 and "a" in rota
    rota.discard("a")
    rota.discard("never-added")
    assert "a" not in rota
    due = [at for at, batch in rota.advance(4.99) for n in batch]
    assert due == pytest.approx([rota.offset("b") + k for k in range(5)])  # b alone, once a second


def test_bad_shapes_are_refused() -> None:
    with pytest.raises(ValueError, match="must be positive"):
        HeartbeatRota(interval=0, slots=4, start=0.0)
    with pytest.raises(ValueError, match="must be positive"):
        HeartbeatRota(interval=1.0, slots=0, start=0.0)
