"""The syncer: a process that makes the write-ahead log durable on request.

Why a process and not a thread: a thread of the server that calls
``fdatasync`` gives up the GIL for the call and must take it back to report
that the batch is durable. While the event loop is busy it rarely gets it back
soon: the loop releases the GIL around each of its own system calls and takes
it again before a waiting thread wakes (CPython's convoy effect), so each hand-off
waited for the loop to fall idle. Measured in ``bench dra --api``: 20 ms median
from a write's submission to its answer, of which the ``fdatasync`` was 0.4 ms.
This process holds no GIL of the server's: the loop appends a batch to the WAL
itself, writes one request to this process's stdin, and reads the reply from its
stdout when the loop's selector says it is there.

Protocol (both ways fixed-size, native little-endian):

    request  u64 sequence, u64 segment (the first revision its name carries)
    reply    u64 sequence, i64 errno (0: every request up to that sequence is durable)

Requests that arrive together are answered by one ``fdatasync`` per segment and
one reply, for the highest sequence among them. An ``fdatasync`` that fails is
reported (the store then refuses writes; a failed sync cannot be retried
safely) and this process goes on. It exits when its stdin closes: the server
stopped, or died. It ignores SIGINT and SIGTERM, as the applier does: a Ctrl-C on the terminal, or
a SIGTERM to the group (systemd's stop), reaches the whole process group, and the
server, stopping, still syncs its last writes through this process before it
closes the pipe.

It runs as ``python -S syncer.py WAL_DIR``: the standard library only, so that it
starts in milliseconds.
"""

from __future__ import annotations

import errno
import os
import signal
import struct
import sys

REQUEST = struct.Struct("<QQ")
REPLY = struct.Struct("<Qq")
SEGMENT_NAME = "{:020d}.wal"  # as store.lmdb.wal names them


def serve(directory: str, requests: int, replies: int) -> int:
    open_segments: dict[int, int] = {}  # segment -> descriptor, kept while it is the newest asked for
    unread = b""
    while True:
        data = os.read(requests, 1 << 16)
        if not data:
            return 0
        unread += data
        whole = len(unread) - len(unread) % REQUEST.size
        asked = [REQUEST.unpack_from(unread, i) for i in range(0, whole, REQUEST.size)]
        unread = unread[whole:]
        if not asked:
            continue
        sequence = max(seq for seq, _ in asked)
        failed = 0
        try:
            for segment in sorted({seg for _, seg in asked}):
                fd = open_segments.get(segment)
                if fd is None:
                    fd = os.open(os.path.join(directory, SEGMENT_NAME.format(segment)), os.O_RDONLY)
                    open_segments[segment] = fd
                os.fdatasync(fd)
            newest = max(open_segments)
            for segment in [s for s in open_segments if s < newest]:  # synced to their end already
                os.close(open_segments.pop(segment))
        except OSError as e:
            failed = e.errno or errno.EIO
        os.write(replies, REPLY.pack(sequence, failed))


if __name__ == "__main__":
    # Ctrl-C, or a SIGTERM to the process group (systemd's stop): the server stops it (the docstring)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    sys.exit(serve(sys.argv[1], 0, 1))
