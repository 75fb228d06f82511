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

import time
from typing import Any

import orjson

from store import Store

from ..registry import ResourceType, managedfields
from ..registry.attrs import Attrs, attrs_of
from ..registry.strategies import valid_names, validate_name
from ..registry.validation import parse_micro_time
from .bulkwrites import Rewrite, rewrite_each
from .errors import ApiError
from .reads import Reads
from .splices import SplicePlans

__all__ = ["GROUP", "KIND", "MAX_LEASES", "PLURAL", "VERSION", "RenewalPlans", "renew_leases"]

GROUP, VERSION, KIND, PLURAL = "nodes.controlplane.dev", "v1alpha1", "LeaseRenewal", "leaserenewals"
MAX_LEASES = 10_000  # per request: the body stays under 1 MiB of names


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
    if not valid_names("leases", names):
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
    if not isinstance(entry, dict) or entry.get("manager", "") != manager or entry.get("operation") != "Update" \
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
    spec["renewTime"] = renew_time  # (no generation to move: a Lease has none, rest.GENERATION)
    if entry is not None:
        entry["time"] = now
    elif manager:
        managedfields.record_write(rtype, orjson.loads(stored), obj, manager)
    return obj, simple


# A renewal's two values in a Lease's JSON: the renewer's managedFields entry's ``time``
# (stored as 20 characters) and ``spec.renewTime`` (a MicroTime, 27).
_TIME_FIELD, _TIME_LEN = b'"time":"', 20
_RENEW_FIELD, _RENEW_LEN = b'"renewTime":"', 27


class RenewalPlans(SplicePlans):
    """The version of each Lease this process last renewed, and where a renewal's two
    values sit in its bytes (``splices``), so that the next renewal by the same manager
    is two splices: no read of the cache or the store, no parse, no managedFields
    comparison, no serialisation (at 100,000 nodes the server renews 10,000 Leases a
    second). A plan is learnt from a renewal made the whole way (``_renewed``) that
    changed exactly ``spec.renewTime`` and the re-timed managedFields entry of its
    manager (its sole entry), where each value is there once. The splice changes
    neither labels nor a selectable field: the cache takes the attrs learnt with the
    plan (``prime_attrs``)."""

    def __init__(self) -> None:
        super().__init__(((_TIME_FIELD, _TIME_LEN), (_RENEW_FIELD, _RENEW_LEN)))

    def learn_renewal(self, key: bytes, revision: int, manager: str, stored: bytes, renew_time: bytes,
                      now: bytes, attrs: Attrs) -> None:
        """``stored`` (written at ``revision``, with ``attrs``) is a renewal made the whole way
        by ``manager`` to ``renew_time`` at ``now``."""
        self.learn(key, revision, manager, stored, self.values(renew_time, now), (1, 1), attrs)

    def renewal(self, key: bytes, manager: str, renew_time: bytes,
                now: bytes) -> tuple[bytes, int, Attrs] | None:
        """The Lease's last version renewed here, renewed again by ``manager`` to
        ``renew_time`` at ``now``: its bytes, the revision to expect and its attrs; None
        without a plan, or when the plan already holds ``renew_time``."""
        return self.splice(key, manager, self.values(renew_time, now), fresh=1)

    @staticmethod
    def values(renew_time: bytes, now: bytes) -> tuple[bytes, bytes]:
        """A renewal's moving values, in the plans' field order (``spec.renewTime`` last)."""
        return now, renew_time


async def renew_leases(*, store_: Store, reads: Reads, leases: ResourceType, namespace: str,
                       request: dict[str, Any], manager: str, prime: bool,
                       plans: RenewalPlans | None = None) -> dict[str, Any]:
    """The answered LeaseRenewal ``request`` (its ``status`` set) once every Lease it names
    in ``namespace`` is renewed or found missing. ``prime``: hand each written version to
    the watch cache (not in a dry run). ``plans``: this server's, to splice the renewals
    of Leases it renewed last (``RenewalPlans``); none: every renewal the whole way."""
    names, renew_time = _asked(leases, request)
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time()))
    renew_bytes, now_bytes = renew_time.encode(), now.encode()
    splicing = plans if prime else None  # a dry run neither uses the plans nor changes them

    def learn(key: bytes, revision: int, value: bytes, obj: dict[str, Any]) -> None:
        assert splicing is not None
        splicing.learn_renewal(key, revision, manager, value, renew_bytes, now_bytes, attrs_of(leases.plural, obj))

    how = Rewrite(leases, namespace, lambda stored: _renewed(leases, stored, renew_time, manager, now), learn,
                  splicing, manager, RenewalPlans.values(renew_bytes, now_bytes))
    out = await rewrite_each(store_=store_, reads=reads, names=names, how=how, prime=prime)
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": KIND,
            "metadata": {"namespace": namespace},
            "spec": {"renewTime": renew_time, "leases": names}, "status": out.status("renewed")}
