"""Node status reports in bulk: ``NodeStatusReport`` (``nodes.controlplane.dev/v1alpha1``),
answered, never stored. This emulator's extension, for simulated nodes.

With node leases a kubelet still posts its node's status every
nodeStatusReportFrequency (5 min) when nothing changed: a patch of
``status.conditions`` whose only news is each condition's ``lastHeartbeatTime``.
100,000 simulated nodes make 333 such patches a second, each paying the whole patch
path on a Node of several kilobytes (its images listed): the stored Node parsed, the
patch merged, managedFields compared, the schema checked, the object serialised, the
response sent and parsed. A NodeStatusReport names many Nodes and the conditions their
kubelets report::

    POST /apis/nodes.controlplane.dev/v1alpha1/nodestatusreports
    {"spec": {"heartbeatTime": "2026-12-02T01:00:00Z",
              "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                              "message": "kubelet is posting ready status"}],
              "nodes": ["node-1", "node-2"]}}
    -> 201 {..., "status": {"reported": 1, "notFound": ["node-2"]}}

Each named Node's status is written as its kubelet's status update writes it: every
reported condition gets ``lastHeartbeatTime`` = heartbeatTime, and the reported
status, reason and message; ``lastTransitionTime`` moves to heartbeatTime only where the
status changed; a condition the Node lacks is added with both times; conditions not
reported are left alone. The writer's managedFields entry (an Update of the ``status``
subresource) is recorded as for a patch of those conditions. Each Node gets its own
store write, resourceVersion and MODIFIED event; a Node another writer changed in
between is read again and reported (``bulkwrites``). A missing Node is listed in
``notFound``; nothing is created.

A Node this server reported last, unchanged since and reported again with the same
conditions by the same manager, is spliced (``SplicePlans``): each ``lastHeartbeatTime``
and the manager's managedFields ``time`` replaced in the bytes it wrote, no read and
no parse. The user needs ``patch`` on ``nodes/status`` besides ``create`` on
``nodestatusreports``.
"""

from __future__ import annotations

import time
from typing import Any

import orjson

from store import Store

from ..registry import ResourceType, managedfields
from ..registry.attrs import attrs_of
from ..registry.strategies import valid_names, validate_name
from ..registry.validation import parse_time
from .bulkwrites import Rewrite, rewrite_each
from .errors import ApiError
from .leaserenewals import GROUP, VERSION
from .reads import Reads
from .splices import SplicePlans

__all__ = ["KIND", "MAX_NODES", "PLURAL", "ReportPlans", "report_node_status"]

KIND, PLURAL = "NodeStatusReport", "nodestatusreports"
MAX_NODES = 10_000  # per request
MAX_CONDITIONS = 32
_STATUSES = ("True", "False", "Unknown")


def _invalid(rtype: ResourceType, field: str, message: str, reason: str = "FieldValueInvalid") -> ApiError:
    return ApiError.invalid(rtype, "", [{"reason": reason, "field": field, "message": message}])


def _asked(rtype: ResourceType, body: dict[str, Any]) -> tuple[list[str], list[dict[str, str]], str]:
    """The request's nodes (each once, in order), conditions and heartbeatTime (its stored form), or 422."""
    spec = body.get("spec")
    if not isinstance(spec, dict):
        raise _invalid(rtype, "spec", "Required value", "FieldValueRequired")
    names = spec.get("nodes")
    if not isinstance(names, list) or not all(type(n) is str for n in names):
        raise _invalid(rtype, "spec.nodes", "Invalid value: must be a list of Node names")
    if len(names) > MAX_NODES:
        raise _invalid(rtype, "spec.nodes", f"Too many: {len(names)}: must have at most {MAX_NODES} items",
                       "FieldValueTooMany")
    if not valid_names("nodes", names):
        for i, name in enumerate(names):
            causes = validate_name("nodes", name)
            if causes:
                raise _invalid(rtype, f"spec.nodes[{i}]", causes[0]["message"])
    conditions = spec.get("conditions")
    if not isinstance(conditions, list) or not conditions or len(conditions) > MAX_CONDITIONS:
        raise _invalid(rtype, "spec.conditions", f"Invalid value: must list 1 to {MAX_CONDITIONS} conditions")
    seen: set[str] = set()
    reported: list[dict[str, str]] = []
    for i, c in enumerate(conditions):
        field = f"spec.conditions[{i}]"
        if not isinstance(c, dict) or set(c) - {"type", "status", "reason", "message"}:
            raise _invalid(rtype, field, "Invalid value: a condition has type, status, reason and message only")
        ctype, status = c.get("type"), c.get("status")
        if type(ctype) is not str or not ctype:
            raise _invalid(rtype, f"{field}.type", "Required value", "FieldValueRequired")
        if ctype in seen:
            raise _invalid(rtype, f"{field}.type", f'Duplicate value: "{ctype}"', "FieldValueDuplicate")
        seen.add(ctype)
        if status not in _STATUSES:
            raise _invalid(rtype, f"{field}.status", f'Unsupported value: {status!r}: supported values: '
                                                     f'"True", "False", "Unknown"', "FieldValueNotSupported")
        for text in ("reason", "message"):
            if type(c.get(text, "")) is not str:
                raise _invalid(rtype, f"{field}.{text}", "Invalid value: must be a string")
        reported.append({"type": ctype, "status": status, "reason": c.get("reason", ""),
                         "message": c.get("message", "")})
    asked = spec.get("heartbeatTime")
    if asked is None:
        heartbeat = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time()))
    else:
        stored_form, why = parse_time(asked)
        if stored_form is None:
            raise _invalid(rtype, "spec.heartbeatTime", f"Invalid value: {asked!r}: {why}")
        heartbeat = stored_form
    return list(dict.fromkeys(names)), reported, heartbeat


def _apply(conditions: list[Any], reported: list[dict[str, str]], heartbeat: str) -> bool:
    """Set ``reported`` into ``conditions`` as the kubelet's status update does; True when every
    reported condition's heartbeat moved (so this write's managedFields entry owns them all)."""
    by_type = {c.get("type"): c for c in conditions if isinstance(c, dict)}
    every_beat_moved = True
    for r in reported:
        have = by_type.get(r["type"])
        if have is None:
            conditions.append({"type": r["type"], "status": r["status"], "lastHeartbeatTime": heartbeat,
                               "lastTransitionTime": heartbeat, "reason": r["reason"], "message": r["message"]})
            continue
        if have.get("status") != r["status"]:
            have["lastTransitionTime"] = heartbeat
        for field in ("status", "reason", "message"):
            if have.get(field, "") != r[field]:
                if r[field]:
                    have[field] = r[field]
                else:
                    have.pop(field, None)
        if have.get("lastHeartbeatTime") == heartbeat:
            every_beat_moved = False
        have["lastHeartbeatTime"] = heartbeat
    return every_beat_moved


def _reported(nodes: ResourceType, stored: bytes, reported: list[dict[str, str]], heartbeat: str,
              manager: str) -> tuple[dict[str, Any], bool] | None:
    """The Node stored as ``stored`` once ``manager`` reported ``reported`` at ``heartbeat``,
    and whether a ``ReportPlans`` can learn from it; None if it already holds that report.

    It can when every reported heartbeat moved: the write then gave each to the manager's
    status entry of managedFields (taking it from any other entry), and made the conditions
    what is reported. The same report at a later time, on the version written, then moves
    exactly the heartbeats and that entry's time: what a splice writes. (Whether this write
    changed more, say the first report after registering taking the heartbeats from the
    create's entry, does not matter.)"""
    obj: dict[str, Any] = orjson.loads(stored)
    status = obj.get("status")
    if not isinstance(status, dict):
        status = obj["status"] = {}
    conditions = status.get("conditions")
    if not isinstance(conditions, list):
        conditions = status["conditions"] = []
    every_beat_moved = _apply(conditions, reported, heartbeat)
    old: dict[str, Any] = orjson.loads(stored)
    if obj == old:
        return None
    managedfields.record_write(nodes, old, obj, manager, subresource="status")
    return obj, every_beat_moved


# A report's moving values in a Node's JSON: the reporter's managedFields entry's ``time``
# and each reported condition's ``lastHeartbeatTime``, both stored as 20 characters.
_TIME_FIELD = b'"time":"'
_HEARTBEAT_FIELD = b'"lastHeartbeatTime":"'
_TIME_LEN = 20


class ReportPlans(SplicePlans):
    """Where a report's values sit in each Node this process reported last (``splices``),
    tagged with the conditions reported: the next report of the same conditions by the
    same manager is splices. A plan is learnt from a report made the whole way that moved
    every reported heartbeat (``_reported``), where the marks find the manager's time once
    and the heartbeat once per reported condition. Heartbeats change neither labels nor a selectable field: the
    cache takes the attrs learnt with the plan."""

    def __init__(self) -> None:
        super().__init__(((_TIME_FIELD, _TIME_LEN), (_HEARTBEAT_FIELD, _TIME_LEN)))


# Where a report's values sit: the Node serialised with them set to these (times no clock
# gives), then put back (``SplicePlans.learn_marked``).
_MARKS = (b"0000-00-00T00:00:01Z", b"0000-00-00T00:00:02Z")


def _marked(stored: bytes, reported: list[dict[str, str]], manager: str) -> bytes | None:
    """The Node ``stored`` serialised with the manager's status entry's time and each reported
    condition's lastHeartbeatTime set to their marks; None if it has no such entry."""
    obj: dict[str, Any] = orjson.loads(stored)
    entries = [e for e in obj["metadata"].get("managedFields") or () if isinstance(e, dict)
               and e.get("manager", "") == manager and e.get("operation") == "Update"
               and e.get("subresource") == "status"]
    if len(entries) != 1:
        return None
    entries[0]["time"] = _MARKS[0].decode()
    types = {r["type"] for r in reported}
    for c in obj["status"]["conditions"]:
        if c.get("type") in types:
            c["lastHeartbeatTime"] = _MARKS[1].decode()
    return orjson.dumps(obj)


def _tag(reported: list[dict[str, str]]) -> bytes:
    return orjson.dumps(reported)


async def report_node_status(*, store_: Store, reads: Reads, nodes: ResourceType, request: dict[str, Any],
                             manager: str, prime: bool, plans: ReportPlans | None = None) -> dict[str, Any]:
    """The answered NodeStatusReport ``request`` (its ``status`` set) once every Node it
    names is written or found missing. ``prime``: hand each written version to the watch
    cache (not in a dry run). ``plans``: this server's, to splice the reports of Nodes it
    reported last."""
    names, reported, heartbeat = _asked(nodes, request)
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time()))
    values, tag = (now.encode(), heartbeat.encode()), _tag(reported)
    splicing = plans if prime else None  # a dry run neither uses the plans nor changes them

    def learn(key: bytes, revision: int, value: bytes, obj: dict[str, Any]) -> None:
        assert splicing is not None
        marked = _marked(value, reported, manager)
        if marked is not None:
            splicing.learn_marked(key, revision, manager, value, marked, _MARKS, values, (1, len(reported)),
                                  attrs_of(nodes.plural, obj), tag)

    how = Rewrite(nodes, "", lambda stored: _reported(nodes, stored, reported, heartbeat, manager), learn,
                  splicing, manager, values, tag)
    out = await rewrite_each(store_=store_, reads=reads, names=names, how=how, prime=prime)
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": KIND,
            "metadata": {},
            "spec": {"heartbeatTime": heartbeat, "conditions": reported, "nodes": names},
            "status": out.status("reported")}
