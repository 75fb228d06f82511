"""``store.lmdb.counts`` and ``LmdbStore.count``: a range counted at a revision is remembered
by steps, so the counts of the rest of a paginated list walk a step each, and stay true
however the keys change after the revision."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

import store
from store.lmdb import LmdbStore, counts
from store.lmdb.index import KeyIndex


def test_steps_split_a_count_at_the_step_after_its_start() -> None:
    memo = counts.CountMemo(kept=2)
    steps = memo.put(7, b"z", [b"a", b"d", b"g"], [3, 2, 4])
    assert steps.after == [9, 6, 4]
    assert steps.split(b"a") == (b"d", 6)  # the keys from a up to d are the caller's to count
    assert steps.split(b"e") == (b"g", 4)
    assert steps.split(b"h") == (None, 0)  # in the last step: counted up to the end
    assert memo.get(7, b"z", b"c") is steps
    assert memo.get(7, b"z", b"0") is None  # starts before what was counted
    assert memo.get(7, b"y", b"c") is None and memo.get(8, b"z", b"c") is None
    memo.put(8, b"z", [b"a"], [1])
    memo.get(7, b"z", b"c")  # used: the least recently used is 8's
    memo.put(9, b"z", [b"a"], [1])
    assert len(memo) == 2 and memo.get(8, b"z", b"a") is None and memo.get(7, b"z", b"a") is steps


def test_the_key_index_counts_what_it_can_and_names_what_it_cannot() -> None:
    index = KeyIndex(0)
    index.put(b"a", (5, 2, 2))    # created at 2, updated at 5: live at 4
    index.put(b"b", (3, 3, 1))    # created at 3: live at 4
    index.put(b"c", (6, 0, 0))    # deleted at 6: was it live at 4? the log knows
    index.put(b"d", (2, 0, 0))    # deleted at 2: dead at 4
    index.put(b"e", (8, 7, 1))    # created at 7 (perhaps again): the log knows
    index.put(b"f", (1, 1, 1))
    assert index.count_at(b"a", b"\x00", 4, 100) == (3, [b"c", b"e"], None)
    assert index.count_at(b"a", b"\x00", 4, 3) == (2, [b"c"], b"c\x00")  # three keys looked at
    assert index.count_at(b"c\x00", b"f", 4, 3) == (0, [b"e"], None)  # d and e: fewer than 3, the end
    assert index.count_at(b"c\x00", b"f", 4, 2) == (0, [b"e"], b"e\x00")
    assert index.count_at(b"e\x00", b"f", 4, 2) == (0, [], None)


@pytest.mark.asyncio
async def test_counts_at_a_revision_agree_with_the_range_from_every_start(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Steps of 4 keys, and after the revision counted at every kind of change: keys updated,
    deleted, made anew, deleted and made again; the counts from every start at that revision
    equal the range's, and once counted, one from a start walks at most the step it is in."""
    monkeypatch.setattr(counts, "STEP", 4)
    s = LmdbStore(str(tmp_path / "store"))
    try:
        prefix, end = b"/registry/pods/", store.prefix_end(b"/registry/pods/")
        keys = [prefix + b"p%03d" % i for i in range(60)]
        for k in keys[::2]:
            await s.create(k, b"v")
        rev = await s.revision()
        rnd = random.Random(5)
        for k in rnd.sample(keys, 45):
            kv = await s.get(k)
            if kv is None:
                await s.create(k, b"new")  # created after rev
            elif rnd.random() < 0.5:
                await s.update(k, b"u", 0)
            else:
                await s.delete(k)
                if rnd.random() < 0.5:
                    await s.create(k, b"again")  # a new life: the log says it was live at rev
        at_rev, _, _ = await s.range(prefix, end, revision=rev)
        assert len(at_rev) == 30
        assert await s.count(prefix, end, rev) == (30, rev)
        walked: list[int] = []
        count_at = KeyIndex.count_at

        def spy(index: KeyIndex, start: bytes, stop: bytes, revision: int,
                limit: int) -> tuple[int, list[bytes], bytes | None]:
            walked.append(len(index.range_keys(start, stop, limit)))
            return count_at(index, start, stop, revision, limit)

        monkeypatch.setattr(KeyIndex, "count_at", spy)
        for i, kv in enumerate(at_rev):
            walked.clear()
            assert await s.count(kv.key + b"\x00", end, rev) == (29 - i, rev)
            # a step of keys as they were at rev (4, about 8 keys now: some made since)
            assert sum(walked) <= 12, walked
        now, at, _ = await s.range(prefix, end)
        assert await s.count(prefix, end) == (len(now), at)
        await s.compact(at)
        with pytest.raises(store.Compacted):  # what was kept of rev is not served past its time
            await s.count(at_rev[3].key, end, rev)
    finally:
        await s.close()
