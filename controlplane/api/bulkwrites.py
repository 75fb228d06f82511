"""Many objects of one type rewritten by one request, each in a store write of its own.

The loop LeaseRenewal (``leaserenewals``) and NodeStatusReport (``nodereports``) share.
Every named object is written as its own update would write it: its own revision, its
own MODIFIED event; only the writes are handed to the store together, so it commits
them in one group. An object is made either by splicing the version this process wrote
last (``SplicePlans``: no read, no parse) or the whole way from its current version (the
watch cache's newest, as an update starts from it; after a conflict, the cache's once it
holds the version the conflict named, else the store's). A write beaten by another
writer is made again from the version that beat it, up to ``ATTEMPTS`` times; a missing
object is reported, never created.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

import store
from store import Store

from ..registry import ResourceType
from ..registry.attrs import Attrs
from .errors import ApiError
from .reads import Reads
from .splices import SplicePlans
from .stored import with_resource_version, without_resource_version

__all__ = ["ATTEMPTS", "CHUNK", "Outcome", "Rewrite", "rewrite_each"]

# the objects handed to the store at once: the loop yields between chunks, so a large
# request does not hold other requests back for the whole of it
CHUNK = 512
ATTEMPTS = 64  # per object, when other writers keep coming in between (as many as an update tries)


@dataclass(frozen=True)
class Rewrite:
    """What one request does to each object it names."""

    rtype: ResourceType
    namespace: str
    # the object made from its stored bytes, and whether only the plans' moving values
    # changed (a plan can be learnt from it); None: it already is so, nothing to write
    whole: Callable[[bytes], tuple[dict[str, Any], bool] | None]
    # a whole-way write that ``whole`` called learnable, stored at a revision: learn its plan
    learn: Callable[[bytes, int, bytes, dict[str, Any]], None]
    plans: SplicePlans | None  # None: a dry run, which neither uses the plans nor changes them
    # what a splice from a plan writes: the moving values (in the plans' field order), by
    # which field manager, with which tag; the last value is the one that must change
    manager: str = ""
    values: tuple[bytes, ...] = ()
    tag: bytes = b""


@dataclass
class Outcome:
    done: int  # written, or already so
    missing: list[str]
    conflicts: list[str]  # other writers kept changing them: not written

    def status(self, done_as: str) -> dict[str, Any]:
        """The answer's ``status``: the count written (as ``done_as``), then what was missing
        and what kept conflicting, when any."""
        status: dict[str, Any] = {done_as: self.done}
        if self.missing:
            status["notFound"] = self.missing
        if self.conflicts:
            status["conflicts"] = self.conflicts
        return status


async def _at_least(reads: Reads, rtype: ResourceType, namespace: str, name: str,
                    revision: int) -> tuple[bytes, int] | None:
    """The object's served JSON and revision once the cache holds ``revision`` or later (a
    conflict names the version that beat this write: at a store too busy for the cache to
    keep up, waiting for it is cheaper than a read of the store's encoded value); None to
    read the store (no revision known, the cache not there in time, or no object)."""
    if revision <= 0:
        return None
    try:
        raw = await reads.get(rtype, namespace, name, str(revision))
    except ApiError:  # 504: the cache did not get there in time
        return None
    if raw is None:
        return None
    obj = orjson.loads(raw)
    served = int(obj["metadata"]["resourceVersion"])
    return (raw, served) if served >= revision else None


async def _write_spliced(store_: Store, reads: Reads, how: Rewrite, keys: list[bytes], names: list[str],
                         spliced: list[tuple[bytes, int, Attrs]], behind: dict[str, int], out: Outcome) -> list[str]:
    """``rewrite_each``'s first attempt where every object of the chunk was spliced: the
    writes, the plans' moves and the cache's primes, each in one pass. Returns the names
    to make again the whole way (their plan is forgotten: someone wrote since; ``behind``
    takes the revision each conflict named)."""
    plans = how.plans
    assert plans is not None
    results = await store.update_many(store_, [(key, made[0], made[1])
                                               for key, made in zip(keys, spliced, strict=True)])
    done: list[tuple[bytes, int, int]] = []
    primes: list[tuple[bytes, int, bytes, Attrs]] = []
    again: list[str] = []
    for key, name, (value, base, attrs), result in zip(keys, names, spliced, results, strict=True):
        if isinstance(result, int):
            done.append((key, base, result))
            primes.append((key, result, with_resource_version(value, result), attrs))
            continue
        plans.forget(key)
        if isinstance(result, store.Conflict):
            again.append(name)
            behind[name] = result.actual
        elif isinstance(result, store.NotFound):
            out.missing.append(name)
        else:
            raise result
    out.done += len(done)
    if done:
        plans.written(done, how.values)
        reads.prime_attrs(how.rtype, primes)
    return again


async def rewrite_each(*, store_: Store, reads: Reads, names: list[str], how: Rewrite, prime: bool) -> Outcome:
    """Write each of ``names`` as ``how`` says. ``prime``: hand each written version to the
    watch cache (not in a dry run, where nothing is written)."""
    rtype, namespace, plans = how.rtype, how.namespace, how.plans
    out = Outcome(0, [], [])
    for start in range(0, len(names), CHUNK):
        if start:
            await asyncio.sleep(0)
        pending = names[start:start + CHUNK]
        behind: dict[str, int] = {}  # the revision a conflict said the object is at
        for attempt in range(ATTEMPTS):
            # (name, key, value, the revision it was made from; the object made the whole way and
            # whether a plan can be learnt from it, or None and the attrs of a splice)
            writes: list[tuple[str, bytes, bytes, int, dict[str, Any] | None, bool, Attrs | None]] = []
            prefix = rtype.prefix(namespace if rtype.namespaced else None)
            keys = [prefix + name.encode() for name in pending]
            spliced = plans.splice_many(keys, how.manager, how.values, how.tag, fresh=len(how.values) - 1) \
                if attempt == 0 and plans is not None else None
            if spliced is not None and prime and None not in spliced:
                # every object spliced (a heartbeat's usual case): written and primed as arrays
                pending = await _write_spliced(store_, reads, how, keys, pending, spliced,  # type: ignore[arg-type]
                                               behind, out)
                if not pending:
                    break
                continue
            for n, name in enumerate(pending):
                key = keys[n]
                if spliced is not None:
                    planned = spliced[n]
                    if planned is not None:
                        writes.append((name, key, planned[0], planned[1], None, False, planned[2]))
                        continue
                found = reads.latest(rtype, key) if attempt == 0 else await _at_least(
                    reads, rtype, namespace, name, behind.get(name, 0))
                if found is not None:
                    current, revision = without_resource_version(found[0], found[1]), found[1]
                else:
                    kv = await store_.get(key)
                    if kv is None:
                        out.missing.append(name)
                        continue
                    current, revision = kv.value, kv.mod_revision
                made = how.whole(current)
                if made is None:
                    out.done += 1
                    continue
                obj, learnable = made
                writes.append((name, key, orjson.dumps(obj), revision, obj, learnable, None))
            results = await store.update_many(store_, [(key, value, rev) for _, key, value, rev, *_ in writes])
            pending = []
            # the splices stored (key, the plan's revision, the revision taken), and what the
            # watch cache is handed for them (key, revision, served JSON, attrs)
            spliced_done: list[tuple[bytes, int, int]] = []
            primes: list[tuple[bytes, int, bytes, Attrs]] = []
            for (name, key, value, base, whole, learnable, same_attrs), result in zip(writes, results, strict=True):
                if isinstance(result, int):
                    out.done += 1
                    if not prime:
                        continue  # a dry run: nothing was written
                    served = with_resource_version(value, result)
                    if same_attrs is not None:
                        spliced_done.append((key, base, result))
                        primes.append((key, result, served, same_attrs))
                    elif whole is not None:
                        whole["metadata"]["resourceVersion"] = str(result)
                        reads.prime(rtype, key, result, served, whole)
                        if learnable and plans is not None:
                            how.learn(key, result, value, whole)
                    continue
                if whole is None and plans is not None:
                    plans.forget(key)  # written since the plan's version: the whole way from now
                if isinstance(result, store.Conflict):
                    pending.append(name)  # changed since it was read: read it again
                    behind[name] = result.actual
                elif isinstance(result, store.NotFound):
                    out.missing.append(name)
                else:
                    raise result
            if plans is not None and spliced_done:
                plans.written(spliced_done, how.values)
            if primes:
                reads.prime_attrs(rtype, primes)
            if not pending:
                break
        out.conflicts += pending
    return out
