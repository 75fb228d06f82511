"""DeleteOptions: what a DELETE of one object or of a collection asks for.

As upstream's delete handler, the options come from the body when there is one
(kubectl sends ``{"kind": "DeleteOptions", ..., "dryRun": ["All"]}``), else from
the query (``gracePeriodSeconds``, ``propagationPolicy``, ``orphanDependents``).
The ``dryRun`` query parameter's ``All`` is honoured either way: a dry run asked
for anywhere is a dry run (another value is validated with the query's options,
and ignored beside a body, as upstream ignores the query then). They are validated as ``ValidateDeleteOptions``: a 422
naming ``DeleteOptions.meta.k8s.io``.

``propagationPolicy`` is carried out by the workload controllers' garbage
collector for the kinds they own (``KubeApi._delete`` gives an owner deleted with
``Orphan`` or ``Foreground`` the collector's finalizer; controllers/ownership.py);
for other kinds it is checked and has no effect: dependents stay (as with ``Orphan``).
"""

from __future__ import annotations

from typing import Any

from ..registry.types import ResourceType
from .errors import ApiError, json_object
from .params import flag, go_int64, values_of
from .writeoptions import dry_run_problem

__all__ = ["PROPAGATION_POLICIES", "delete_options"]

PROPAGATION_POLICIES = ("Foreground", "Background", "Orphan")
_OPTIONS_TYPE = ResourceType("meta.k8s.io", "v1", "DeleteOptions", "deleteoptions", False)


def delete_options(query: dict[str, str], body: bytes) -> dict[str, Any]:
    """The DeleteOptions of a DELETE, validated; ``dryRun`` is True when it asks for one."""
    if body.strip():
        options = _decode(body)
    else:
        options = {}
        if query.get("gracePeriodSeconds") not in (None, ""):
            options["gracePeriodSeconds"] = _integer(query["gracePeriodSeconds"], "gracePeriodSeconds")
        if query.get("propagationPolicy"):
            options["propagationPolicy"] = query["propagationPolicy"]
        orphan = flag(query, "orphanDependents")
        if orphan is not None:
            options["orphanDependents"] = orphan
        if "dryRun" in query:
            options["dryRun"] = values_of(query, "dryRun")
    _validate(options)
    options["dryRun"] = bool(options.get("dryRun")) or query.get("dryRun") == "All"
    return options


def _decode(body: bytes) -> dict[str, Any]:
    options = json_object(body, "the DeleteOptions body")
    if options.get("kind") not in (None, "DeleteOptions"):
        raise ApiError.bad_request(f"the body of a DELETE must be DeleteOptions, not {options['kind']}")
    grace = options.get("gracePeriodSeconds")
    if grace is not None and (isinstance(grace, bool) or not isinstance(grace, int)):
        raise ApiError.bad_request(f"gracePeriodSeconds must be an integer, not {grace!r}")
    dry = options.get("dryRun")
    if dry is not None and (not isinstance(dry, list) or not all(isinstance(d, str) for d in dry)):
        raise ApiError.bad_request(f"dryRun must be a list of strings, not {dry!r}")
    pre = options.get("preconditions")
    if pre is not None:  # (upstream's decoder fails on these; a 500 there, a 400 here as the others)
        if not isinstance(pre, dict):
            raise ApiError.bad_request(f"preconditions must be an object, not {pre!r}")
        for key in ("uid", "resourceVersion"):
            if not isinstance(pre.get(key), str | None):
                raise ApiError.bad_request(f"preconditions.{key} must be a string, not {pre[key]!r}")
    return options


def _integer(raw: str, what: str) -> int:
    value = go_int64(raw)
    if value is None:
        raise ApiError.bad_request(f"invalid {what}: {raw!r}")
    return value


def _validate(options: dict[str, Any]) -> None:
    """ValidateDeleteOptions: each problem a cause of one 422 (a policy beside orphanDependents
    that is no policy either is two), a policy's supported values with its "nil"."""
    causes: list[dict[str, str]] = []
    policy = options.get("propagationPolicy")
    if options.get("orphanDependents") is not None and policy is not None:
        causes.append({"reason": "FieldValueInvalid", "field": "propagationPolicy",
                       "message": f'Invalid value: "{policy}": orphanDependents and deletionPropagation cannot '
                                  "be both set"})
    if policy is not None and policy not in PROPAGATION_POLICIES:
        causes.append({"reason": "FieldValueNotSupported", "field": "propagationPolicy",
                       "message": f'Unsupported value: "{policy}": supported values: '
                                  + ", ".join(f'"{p}"' for p in (*PROPAGATION_POLICIES, "nil"))})
    dry_run = dry_run_problem(options.get("dryRun") or [])
    if dry_run is not None:
        causes.append(dry_run)
    if causes:
        raise ApiError.invalid(_OPTIONS_TYPE, "", causes)
