"""Object UIDs and generateName suffixes from the pooled random bytes (api/uids.py)."""

from __future__ import annotations

import collections
import os
import re
import uuid

from controlplane.api import uids
from controlplane.api.uids import SUFFIX_ALPHABET, new_uid, random_suffix


def test_uids_are_version_4_uuids_as_uuid4_formats_them() -> None:
    for _ in range(2000):  # several pools' worth
        uid = new_uid()
        parsed = uuid.UUID(uid)
        assert str(parsed) == uid
        assert parsed.version == 4
        assert parsed.variant == uuid.RFC_4122


def test_uids_do_not_repeat() -> None:
    assert len({new_uid() for _ in range(10_000)}) == 10_000


def test_generate_name_suffixes_use_apimachinerys_alphabet_each_character_equally() -> None:
    """``util/rand``'s alphabet: no vowels, no 0, 1 or 3 (what name-parsing tools match)."""
    assert SUFFIX_ALPHABET == "bcdfghjklmnpqrstvwxz2456789"
    for length in (1, 5, 12):
        assert re.fullmatch(f"[{SUFFIX_ALPHABET}]{{{length}}}", random_suffix(length))
    assert len({random_suffix(5) for _ in range(200)}) > 190
    counts = collections.Counter("".join(random_suffix(5) for _ in range(27_000)))
    assert set(counts) == set(SUFFIX_ALPHABET)
    assert all(4_300 < n < 5_700 for n in counts.values())  # 5,000 each expected, σ ≈ 69: ±10σ


def test_a_forked_child_does_not_reuse_the_parents_pool() -> None:
    new_uid()  # the pool holds unused bytes now
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report its next UID
        os.close(read)
        os.write(write, new_uid().encode())
        os._exit(0)
    os.close(write)
    child = os.read(read, 100).decode()
    os.close(read)
    os.waitpid(pid, 0)
    assert uuid.UUID(child).version == 4
    assert child != new_uid()  # the parent's next one: the child would have taken it from a copied pool


def test_the_pool_refills_when_spent() -> None:
    seen = set()
    for _ in range(uids._POOL_SIZE // 16 * 3):  # three pools
        seen.add(new_uid())
    assert len(seen) == uids._POOL_SIZE // 16 * 3
