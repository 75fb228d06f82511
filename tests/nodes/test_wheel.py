"""The timing wheel (controlplane.nodes.wheel)."""

from __future__ import annotations

from controlplane.nodes.wheel import TimingWheel


def test_items_fire_in_time_order_including_beyond_one_revolution() -> None:
    w: TimingWheel[str] = TimingWheel(tick=0.1, slots=10, start=0.0)  # one revolution: 1 s
    w.schedule(0.35, "a")
    w.schedule(2.55, "far")  # two revolutions and a half ahead
    w.schedule(0.05, "b")
    w.schedule(-1.0, "past")  # fires at the next tick
    assert len(w) == 4
    assert list(w.advance(0.0)) == ["past"]
    assert list(w.advance(0.1)) == ["b"]
    assert list(w.advance(0.35)) == []
    assert list(w.advance(0.4)) == ["a"]
    assert list(w.advance(2.5)) == []
    assert list(w.advance(2.6)) == ["far"]
    assert len(w) == 0


def test_a_late_advance_delivers_every_due_tick() -> None:
    w: TimingWheel[int] = TimingWheel(tick=0.01, slots=100, start=0.0)
    for i in range(1000):
        w.schedule(i * 0.003, i)
    assert list(w.advance(10.0)) == list(range(1000))
