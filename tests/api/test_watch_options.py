"""When an idle watch's bookmarks are due (``WatchOptions.next_bookmark``)."""

from __future__ import annotations

import math

from controlplane.api.reads import BOOKMARK_SECONDS, PRE_DEADLINE_BOOKMARK, WatchOptions
from controlplane.registry.attrs import Filter


def options(deadline: float = math.inf) -> WatchOptions:
    return WatchOptions(Filter.parse("pods", None, None), bookmarks=True, deadline=deadline)


def test_without_a_deadline_bookmarks_are_periodic() -> None:
    assert options().next_bookmark(100.0) == 100.0 + BOOKMARK_SECONDS


def test_the_last_bookmark_comes_just_before_the_deadline_and_none_after() -> None:
    deadline = 100.0 + BOOKMARK_SECONDS + 30.0
    o = options(deadline)
    assert o.next_bookmark(100.0) == 100.0 + BOOKMARK_SECONDS             # a periodic one first
    last = deadline - PRE_DEADLINE_BOOKMARK
    assert o.next_bookmark(100.0 + BOOKMARK_SECONDS) == last               # then the one before the end
    assert o.next_bookmark(last) == math.inf                               # that one sent: no more
    assert o.next_bookmark(last - 0.001) == math.inf                       # nor if its timer fired early


def test_a_watch_shorter_than_the_margin_gets_no_timed_bookmark() -> None:
    assert options(100.0 + PRE_DEADLINE_BOOKMARK / 2).next_bookmark(100.0) == math.inf
