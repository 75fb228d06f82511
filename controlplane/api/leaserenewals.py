"""Lease renewals in bulk: ``LeaseRenewal`` (``nodes.controlplane.dev/v1alpha1``),
answered, never stored. This emulator's extension, for simulated nodes.

A kubelet renews its node's Lease with one PUT every 10 s, so 100,000 simulated nodes
are 10,000 PUTs a second, each paying the whole write path (the body parsed and
checked against the schema, managedFields compared, the object serialised, the
response sent) to move one field. A LeaseRenewal names many Leases of one namespace
and one ``renewTime``::

    POST /apis/nodes.controlplane.dev/v1alpha1/namespaces/kube-node-lease/leaserenewals
    {"spec": {"renewTime": "2026-12-02T01:00:00.000000Z", "leases": ["node-1", "node-2"]}}
    -> 201 {..., "status": {"renewed": 1, "notFound": ["node-2"]}}

Each named Lease is updated as the kubelet's PUT updates it: ``spec.renewTime`` set,
the writer's managedFields entry re-timed (upstream re-times an entry whenever a
field it owns changes value), its own store write with its own resourceVersion and
MODIFIED event. Only the writes are submitted together, so the store commits them
in one group. The update is unconditional, as the kubelet's: a Lease another writer
changed in between is read again and renewed. A missing one is reported in
``notFound`` for the caller to create; nothing is created here.

The user needs ``update`` on ``leases`` in the namespace besides ``create`` on
``leaserenewals`` (checked by the server's authorizer before the body is read).
``controlplane.nodes`` uses this when discovery lists it and PUTs each Lease
otherwise (against any other API server).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import orjson

import store
from store import Store

from ..registry import ResourceType, managedfields
from ..registry.attrs import Attrs, attrs_of
from ..registry.strategies import validate_name
from ..registry.validation import parse_micro_time
from .errors import ApiError
from .reads import Reads
from .stored import with_resource_version, without_resource_version

__all__ = ["GROUP", "KIND", "MAX_LEASES", "PLURAL", "VERSION", "RenewalPlans", "renew_leases"]

GROUP, VERSION, KIND, PLURAL = "nodes.controlplane.dev", "v1alpha1", "LeaseRenewal", "leaserenewals"
MAX_LEASES = 10_000  # per request: the body stays under 1 MiB of names
# the leases handed to the store at once: the loop yields between chunks, so a large
# request does not hold other requests back for the whole of it
CHUNK = 512
ATTEMPTS = 64  # per lease, when other writers keep coming in between (as many as an update tries)


def _invalid(rtype: ResourceType, field: str, message: str) -> ApiError:
    return ApiError.invalid(rtype, "", [{"reason": "FieldValueInvalid", "field": field, "message": message}])


def _asked(rtype: ResourceType, body: dict[str, Any]) -> tuple[list[str], str]:
    """The request's leases (each once, in order) and renewTime (its stored form), or 422."""
    spec = body.get("spec")
    if not isinstance(spec, dict):
        raise ApiError.invalid(rtype, "", [{"reason": "FieldValueRequired", "field": "spec",
                                            "message": "Required value"}])
    names = spec.get("leases")
    if not isinstance(names, list) or not all(type(n) is str for n in names):
        raise _invalid(rtype, "spec.leases", "Invalid value: must be a list of Lease names")
    if len(names) > MAX_LEASES:
        raise ApiError.invalid(rtype, "", [{"reason": "FieldValueTooMany", "field": "spec.leases",
                                            "message": f"Too many: {len(names)}: must have at most "
                                                       f"{MAX_LEASES} items"}])
    for i, name in enumerate(names):
        causes = validate_name("leases", name)
        if causes:
            raise _invalid(rtype, f"spec.leases[{i}]", causes[0]["message"])
    asked = spec.get("renewTime")
    if asked is None:
        now = time.time()
        renew_time = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1e6):06d}Z"
    else:
        stored_form, why = parse_micro_time(asked)
        if stored_form is None:
            raise _invalid(rtype, "spec.renewTime", f"Invalid value: {asked!r}: {why}")
        renew_time = stored_form
    return list(dict.fromkeys(names)), renew_time


def _owns_alone(entries: Any, manager: str) -> dict[str, Any] | None:
    """The manager's Update entry when it is the only entry and owns ``spec.renewTime``
    (every renewal of a Lease its holder created): re-timing it is all managedFields
    needs. None otherwise: the general comparison decides."""
    if not isinstance(entries, list) or len(entries) != 1:
        return None
    entry = entries[0]
    if not isinstance(entry, dict) or entry.get("manager") != manager or entry.get("operation") != "Update" \
            or entry.get("subresource"):
        return None
    spec = (entry.get("fieldsV1") or {}).get("f:spec")
    return entry if isinstance(spec, dict) and "f:renewTime" in spec else None


def _renewed(rtype: ResourceType, stored: bytes, renew_time: str, manager: str,
             now: str) -> tuple[dict[str, Any], bool] | None:
    """The Lease stored as ``stored`` once renewed by ``manager``, and whether that changed
    exactly ``spec.renewTime`` and the time of the manager's sole managedFields entry (a
    ``RenewalPlans`` can learn it); None if it already holds ``renew_time`` (an update that
    changes nothing writes nothing, as upstream)."""
    obj: dict[str, Any] = orjson.loads(stored)
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        spec = obj["spec"] = {}
    elif spec.get("renewTime") == renew_time:
        return None
    meta = obj["metadata"]
    entry = _owns_alone(meta.get("managedFields"), manager)
    simple = entry is not None
    spec["renewTime"] = renew_time  # (no generation to move: a Lease has none, rest.WITHOUT_GENERATION)
    if entry is not None:
        entry["time"] = now
    elif manager:
        managedfields.record_write(rtype, orjson.loads(stored), obj, manager)
    return obj, simple


# A renewal's two values in a Lease's JSON: ``spec.renewTime`` (a MicroTime, stored
# as 27 characters) and the renewer's managedFields entry's ``time`` (20).
_RENEW_FIELD, _RENEW_LEN = b'"renewTime":"', 27
_TIME_FIELD, _TIME_LEN = b'"time":"', 20
PLANS_MAX = 1_000_000  # Leases remembered; past it the plans start over


class RenewalPlans:
    """The version of each Lease this process last renewed, and where a renewal's two
    values sit in its bytes, so that the next renewal is two splices: no read of the
    cache or the store, no parse, no managedFields comparison, no serialisation (at
    100,000 nodes the server renews 10,000 Leases a second).

    A plan is learnt from a renewal made the whole way (``_renewed``) that changed
    exactly ``spec.renewTime`` and the re-timed managedFields entry of its manager
    (its sole entry): the bytes then hold each value once. The next renewal by the
    same manager splices the bytes, after checking the bytes around both values, and
    is written expecting the plan's revision: if anyone wrote the Lease since (another
    writer, another API server over the same store), the store answers a conflict
    and the renewal goes the whole way from the version it names. The revision names
    the bytes, so a plan is never applied to a version it was not made from. The
    splice changes neither labels nor a selectable field: the cache takes the attrs
    learnt with the plan (``prime_attrs``)."""

    def __init__(self) -> None:
        # Lease key -> (revision, manager, stored bytes, renewTime's offset, time's, attrs)
        self._plans: dict[bytes, tuple[int, str, bytes, int, int, Attrs]] = {}

    def learn(self, key: bytes, revision: int, manager: str, stored: bytes, renew_time: bytes,
              now: bytes, attrs: Attrs) -> None:
        """``stored`` (written at ``revision``, with ``attrs``) is a renewal made the whole way
        by ``manager`` to ``renew_time`` at ``now``: remember it and where both values sit,
        when each is there once."""
        renew = _RENEW_FIELD + renew_time + b'"'
        at_renew = stored.find(renew)
        timed = _TIME_FIELD + now + b'"'
        at_time = stored.find(timed)
        if at_renew < 0 or at_time < 0 or stored.rfind(renew) != at_renew or stored.rfind(timed) != at_time:
            self._plans.pop(key, None)
            return
        if len(self._plans) >= PLANS_MAX:
            self._plans.clear()
        self._plans[key] = (revision, manager, stored, at_renew + len(_RENEW_FIELD), at_time + len(_TIME_FIELD),
                            attrs)

    def renewal(self, key: bytes, manager: str, renew_time: bytes,
                now: bytes) -> tuple[bytes, int, Attrs] | None:
        """The Lease's last version renewed here, renewed again by ``manager`` to
        ``renew_time`` at ``now``: its bytes, the revision to expect and its attrs; None
        without a plan, or when the plan already holds ``renew_time`` (the whole way then
        checks the current version, which may be another's)."""
        plan = self._plans.get(key)
        if plan is None or plan[1] != manager or len(renew_time) != _RENEW_LEN or len(now) != _TIME_LEN:
            return None
        stored, r, t = plan[2], plan[3], plan[4]
        if not (t < r and stored[r - len(_RENEW_FIELD):r] == _RENEW_FIELD and stored[t - len(_TIME_FIELD):t]
                == _TIME_FIELD and stored[r + _RENEW_LEN:r + _RENEW_LEN + 1] == b'"'
                and stored[t + _TIME_LEN:t + _TIME_LEN + 1] == b'"') or stored[r:r + _RENEW_LEN] == renew_time:
            return None
        return (b"".join((stored[:t], now, stored[t + _TIME_LEN:r], renew_time, stored[r + _RENEW_LEN:])), plan[0],
                plan[5])

    def written(self, key: bytes, base: int, revision: int, stored: bytes) -> None:
        """A renewal spliced from the plan at ``base`` was written at ``revision`` as ``stored``."""
        plan = self._plans.get(key)
        if plan is not None and plan[0] == base:
            self._plans[key] = (revision, plan[1], stored, plan[3], plan[4], plan[5])

    def forget(self, key: bytes) -> None:
        """The Lease changed under the plan (a conflict): renew it the whole way next."""
        self._plans.pop(key, None)


async def _at_least(reads: Reads, leases: ResourceType, namespace: str, name: str,
                    revision: int) -> tuple[bytes, int] | None:
    """The lease's served JSON and revision once the cache holds ``revision`` or later (a
    conflict names the version that beat this write: at a store too busy for the cache to
    keep up, waiting for it is cheaper than a read of the store's encoded value); None to
    read the store (no revision known, the cache not there in time, or no lease)."""
    if revision <= 0:
        return None
    try:
        raw = await reads.get(leases, namespace, name, str(revision))
    except ApiError:  # 504: the cache did not get there in time
        return None
    if raw is None:
        return None
    obj = orjson.loads(raw)
    served = int(obj["metadata"]["resourceVersion"])
    return (raw, served) if served >= revision else None


async def renew_leases(*, store_: Store, reads: Reads, leases: ResourceType, namespace: str,
                       request: dict[str, Any], manager: str, prime: bool,
                       plans: RenewalPlans | None = None) -> dict[str, Any]:
    """The answered LeaseRenewal ``request`` (its ``status`` set) once every Lease it names
    in ``namespace`` is renewed or found missing. ``prime``: hand each written version to
    the watch cache (not in a dry run). ``plans``: this server's, to splice the renewals
    of Leases it renewed last (``RenewalPlans``); none: every renewal the whole way."""
    names, renew_time = _asked(leases, request)
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    renew_bytes, now_bytes = renew_time.encode(), now.encode()
    splicing = plans if prime else None  # a dry run neither uses the plans nor changes them
    renewed, missing, conflicts = 0, [], []
    for start in range(0, len(names), CHUNK):
        if start:
            await asyncio.sleep(0)
        pending = names[start:start + CHUNK]
        behind: dict[str, int] = {}  # the revision a conflict said the lease is at
        for attempt in range(ATTEMPTS):
            # (name, key, value, the revision it was made from; the object made the whole way and
            # whether a plan can be learnt from it, or None and the attrs of a splice)
            writes: list[tuple[str, bytes, bytes, int, dict[str, Any] | None, bool, Attrs | None]] = []
            for name in pending:
                key = leases.key(namespace, name)
                if attempt == 0 and splicing is not None:
                    spliced = splicing.renewal(key, manager, renew_bytes, now_bytes)
                    if spliced is not None:
                        writes.append((name, key, spliced[0], spliced[1], None, False, spliced[2]))
                        continue
                # the cache's newest version, as a PUT starts from it; after a conflict the
                # cache's once it has the version the conflict named, else the store's
                found = reads.latest(leases, key) if attempt == 0 else await _at_least(
                    reads, leases, namespace, name, behind.get(name, 0))
                if found is not None:
                    current, revision = without_resource_version(found[0], found[1]), found[1]
                else:
                    kv = await store_.get(key)
                    if kv is None:
                        missing.append(name)
                        continue
                    current, revision = kv.value, kv.mod_revision
                made = _renewed(leases, current, renew_time, manager, now)
                if made is None:
                    renewed += 1
                    continue
                obj, learnable = made
                writes.append((name, key, orjson.dumps(obj), revision, obj, learnable, None))
            results = await store.update_many(store_, [(key, value, rev) for _, key, value, rev, *_ in writes])
            pending = []
            for (name, key, value, base, whole, learnable, same_attrs), result in zip(writes, results, strict=True):
                if isinstance(result, int):
                    renewed += 1
                    if not prime:
                        continue  # a dry run: nothing was written
                    served = with_resource_version(value, result)
                    if same_attrs is not None:
                        if splicing is not None:
                            splicing.written(key, base, result, value)
                        reads.prime_attrs(leases, key, result, served, same_attrs)
                    elif whole is not None:
                        whole["metadata"]["resourceVersion"] = str(result)
                        reads.prime(leases, key, result, served, whole)
                        if learnable and splicing is not None:
                            splicing.learn(key, result, manager, value, renew_bytes, now_bytes,
                                           attrs_of(leases.plural, whole))
                    continue
                if whole is None and splicing is not None:
                    splicing.forget(key)  # written since the plan's version: the whole way from now
                if isinstance(result, store.Conflict):
                    pending.append(name)  # changed since it was read: read it again
                    behind[name] = result.actual
                elif isinstance(result, store.NotFound):
                    missing.append(name)
                else:
                    raise result
            if not pending:
                break
        conflicts += pending
    status: dict[str, Any] = {"renewed": renewed}
    if missing:
        status["notFound"] = missing
    if conflicts:
        status["conflicts"] = conflicts
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": KIND,
            "metadata": {"namespace": namespace, "creationTimestamp": None},
            "spec": {"renewTime": renew_time, "leases": names}, "status": status}
