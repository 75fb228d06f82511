"""A small filesystem for the disk-full tests: a tmpfs mounted for the test's length."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def small_tmpfs(where: Path, size: str) -> Iterator[Path]:
    """``where`` (made here) a tmpfs of ``size`` (mount's ``size=``, e.g. ``8m``) until the block
    ends. Needs root, as CI and ``make test`` run: without it the test fails, not skips."""
    where.mkdir()
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                         capture_output=True, text=True)
    if res.returncode != 0:
        pytest.fail(f"cannot mount a small tmpfs for the disk-full test (run as root): {res.stderr}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)
