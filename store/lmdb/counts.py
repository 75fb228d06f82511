"""Counts of the keys in a range at a revision (``LmdbStore.count``), remembered by steps.

LMDB has no count of a range, and the store's key index (``store.lmdb.index``) tells a key's
state at a past revision only by looking at it: a count is a walk over the range's keys. The
pages of one paginated list ask for one such count each, of the keys after the page, all at
one revision and up to one end: walked afresh, a list of N keys in pages of P costs N²/2P
key looks, and its first pages cost more than their reading.

A key's state at a revision never changes once the store is past it, so a count need not be
walked twice. The first count of ``[start, end)`` at ``revision`` walks it in steps of
``STEP`` keys and keeps, for each step, the key it begins at and how many live keys lie
from there to ``end`` (``Steps``). A later count at that revision and end, from a start at or
after the first one's, walks only from its start to the next step's beginning (at most a
step of keys, and those made since) and adds what was kept for the rest: a list's every page
after the first counts in a step's time, and the memory is two entries a step.

Keys made after ``revision`` and dropped tombstones change the key index, not what was live
at ``revision``: a step's count stays true. A compaction past ``revision`` makes the count
refused (``Compacted``) before it is looked up, so nothing kept is read past its time.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import OrderedDict
from dataclasses import dataclass
from itertools import accumulate

__all__ = ["KEPT", "STEP", "CountMemo", "Steps"]

STEP = 1_000  # keys a step of a count walks
KEPT = 16     # counts kept (ranges at a revision), the least recently used dropped first


@dataclass(frozen=True, slots=True)
class Steps:
    """A counted range at one revision: ``starts[i]`` begins step ``i`` (``starts[0]`` is the
    range's start; step ``i`` ends where step ``i + 1`` begins, the last at the range's end),
    and ``after[i]`` keys were live at the revision from ``starts[i]`` on."""

    starts: list[bytes]
    after: list[int]

    def split(self, start: bytes) -> tuple[bytes | None, int]:
        """For a count from ``start`` (not before ``starts[0]``): where the step after the one
        ``start`` falls in begins (None: it is the last), and the live keys from there on. The
        keys from ``start`` up to it are the caller's to count."""
        i = bisect_right(self.starts, start)  # the step after start's
        if i == len(self.starts):
            return None, 0
        return self.starts[i], self.after[i]


class CountMemo:
    """The counts kept, by (revision, end). Used on the event loop thread only."""

    __slots__ = ("_kept", "kept")

    def __init__(self, kept: int = KEPT) -> None:
        self.kept = kept
        self._kept: OrderedDict[tuple[int, bytes], Steps] = OrderedDict()

    def __len__(self) -> int:
        return len(self._kept)

    def get(self, revision: int, end: bytes, start: bytes) -> Steps | None:
        """The count kept of a range at ``revision`` to ``end`` that covers ``start`` on."""
        steps = self._kept.get((revision, end))
        if steps is None or start < steps.starts[0]:
            return None
        self._kept.move_to_end((revision, end))
        return steps

    def put(self, revision: int, end: bytes, starts: list[bytes], lives: list[int]) -> Steps:
        """Keep a count walked in steps: ``lives[i]`` keys live in step ``i``, which begins at
        ``starts[i]``. Returns it (its ``after[0]`` is the whole count)."""
        after = list(accumulate(reversed(lives)))[::-1]
        steps = Steps(starts, after)
        self._kept[revision, end] = steps
        self._kept.move_to_end((revision, end))
        while len(self._kept) > self.kept:
            self._kept.popitem(last=False)
        return steps
