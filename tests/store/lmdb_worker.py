"""A second process for the LMDB tests: ``python -m tests.store.lmdb_worker MODE PATH ...``.

Modes:
  write PATH PREFIX N CONCURRENCY   create N keys with CONCURRENCY writers; print
                                    "ack KEY REV" (flushed) as each is acknowledged
  update PATH PREFIX N CHUNK        create N keys, then update them round and round with
                                    ``store.update_many`` of CHUNK keys; print
                                    "ack KEY REV ROUND" (flushed) for each acknowledged
  watch PATH PREFIX FROM N          print "ev KEY REV" for the first N events from FROM
  read  PATH KEY                    print the value of KEY (or "none")
"""

from __future__ import annotations

import asyncio
import sys

import store


async def write(path: str, prefix: str, n: int, concurrency: int) -> None:
    s = store.open(f"lmdb://{path}")
    it = iter(range(n))
    out = sys.stdout

    async def writer() -> None:
        for i in it:
            key = f"{prefix}{i:07d}".encode()
            rev = await s.create(key, key * 20)
            out.write(f"ack {key.decode()} {rev}\n")
            out.flush()
    await asyncio.gather(*(writer() for _ in range(concurrency)))
    await s.close()


async def update(path: str, prefix: str, n: int, chunk: int) -> None:
    s = store.open(f"lmdb://{path}")
    keys = [f"{prefix}{i:07d}".encode() for i in range(n)]
    await asyncio.gather(*(s.create(key, b"0") for key in keys))
    out = sys.stdout
    for round_ in range(1, 1 << 30):
        for start in range(0, n, chunk):
            part = keys[start:start + chunk]
            results = await store.update_many(s, [(key, key + b"@%d" % round_, 0) for key in part])
            out.write("".join(f"ack {key.decode()} {rev} {round_}\n" for key, rev in zip(part, results, strict=True)))
            out.flush()


async def watch(path: str, prefix: str, start: int, n: int) -> None:
    s = store.open(f"lmdb://{path}")
    print("ready", flush=True)
    got = 0
    async for events in s.watch(prefix.encode(), store.prefix_end(prefix.encode()), start):
        for e in events:
            print(f"ev {e.kv.key.decode()} {e.kv.mod_revision}", flush=True)
            got += 1
        if got >= n:
            break
    await s.close()


async def read(path: str, key: str) -> None:
    s = store.open(f"lmdb://{path}")
    kv = await s.get(key.encode())
    print(kv.value.decode() if kv else "none", flush=True)
    await s.close()


def main() -> None:
    mode, path, *rest = sys.argv[1:]
    if mode == "write":
        asyncio.run(write(path, rest[0], int(rest[1]), int(rest[2])))
    elif mode == "update":
        asyncio.run(update(path, rest[0], int(rest[1]), int(rest[2])))
    elif mode == "watch":
        asyncio.run(watch(path, rest[0], int(rest[1]), int(rest[2])))
    elif mode == "read":
        asyncio.run(read(path, rest[0]))
    else:
        raise SystemExit(f"unknown mode {mode}")


if __name__ == "__main__":
    main()
