"""The per-key backoff (controllers/backoff.py), as client-go's flowcontrol.Backoff steps it."""

from __future__ import annotations

from controlplane.controllers.backoff import Backoff


def test_a_key_doubles_to_the_maximum_and_starts_over_once_stable() -> None:
    b = Backoff(1.0, 4.0)
    assert not b.in_backoff("k", 0.0)
    b.next("k", 0.0)
    assert b.in_backoff("k", 0.5) and b.remaining("k", 0.5) == 0.5
    assert not b.in_backoff("k", 1.0) and not b.in_backoff("other", 0.5)
    b.next("k", 1.0)
    assert b.remaining("k", 1.0) == 2.0
    b.next("k", 3.0)
    b.next("k", 7.0)
    assert b.remaining("k", 7.0) == 4.0  # 8 s, capped
    # untouched for more than twice the maximum: out of backoff, and its next step is the first
    assert not b.in_backoff("k", 15.5)
    b.next("k", 15.5)
    assert b.remaining("k", 15.5) == 1.0


def test_stable_keys_are_forgotten() -> None:
    b = Backoff(1.0, 4.0)
    b.next("old", 0.0)
    b.next("new", 100.0)  # more than a minute on: the sweep drops what is stable
    assert "old" not in b._entries and "new" in b._entries
