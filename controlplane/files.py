"""Small file helpers shared by the server's startup steps."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["write_private"]


def write_private(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically, readable by the owner only (0600).

    Credentials (token files, kubeconfigs) go through here: a reader sees the
    old file or the new one, never half of one, and never a world-readable token.
    A file that already holds ``data``, owner-only, is left as it is: every start
    writes the kubeconfig again, and on a full disk that write failed first, before
    the store could say that the disk is full.
    """
    try:
        if path.stat().st_mode & 0o777 == 0o600 and path.read_bytes() == data:
            return
    except OSError:
        pass  # (none yet, or unreadable: written below)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
