"""StorageVersionMigrations (storagemigration.k8s.io/v1, GA in 1.37): validation as upstream's
``pkg/apis/storagemigration/validation`` and its registry strategy.

- create: ``spec.resource.resource`` required, a DNS-1035 label; ``spec.resource.group``, when
  set, a DNS subdomain (as an APIService's); the status starts empty (``{}``);
- update: the spec is immutable (``spec: Invalid value: ...: field is immutable``);
- ``/status``: ``resourceVersion`` fixed once set; the conditions as metav1's
  ``ValidateConditions`` wants them, ``Succeeded`` and ``Failed`` never both true, ``Running``
  not true beside either, and neither set back to false once true.

The migration itself is kube-controller-manager's, ``controllers/storagemigration.py``.
"""

from __future__ import annotations

import json
from typing import Any

from .causes import Causes, invalid, required, show
from .dnsnames import DNS1123_SUBDOMAIN, SUBDOMAIN_MESSAGE, dns1035_problems
from .drafields import conditions_causes

__all__ = ["RUNNING", "SUCCEEDED", "FAILED", "condition_true", "prepare_storage_version_migration"]

Obj = dict[str, Any]
RUNNING, SUCCEEDED, FAILED = "Running", "Succeeded", "Failed"


def _dict(value: Any) -> Obj:
    return value if isinstance(value, dict) else {}


def _text(value: Any) -> str:
    return value if isinstance(value, str) else "" if value is None else str(value)


def condition_true(svm: Obj, kind: str) -> bool:
    """Whether ``svm`` has the condition ``kind`` with status True (``meta.IsStatusConditionTrue``)."""
    return any(isinstance(c, dict) and c.get("type") == kind and c.get("status") == "True"
               for c in _dict(svm.get("status")).get("conditions") or ())


def _go_spec(spec: Obj) -> str:
    """The spec as ``field.Invalid`` prints the internal struct (``%#v``)."""
    resource = _dict(spec.get("resource"))
    group, plural = show(_text(resource.get("group"))), show(_text(resource.get("resource")))
    inner = f"v1.GroupResource{{Group:{group}, Resource:{plural}}}"
    return f"storagemigration.StorageVersionMigrationSpec{{Resource:{inner}}}"


def _shown(field: str, shown: str, detail: str) -> dict[str, str]:
    return {"reason": "FieldValueInvalid", "field": field, "message": f"Invalid value: {shown}: {detail}"}


def _spec_causes(spec: Obj) -> Causes:
    resource = _dict(spec.get("resource"))
    plural, group = _text(resource.get("resource")), _text(resource.get("group"))
    causes: Causes = []
    if not plural:
        causes.append(required("spec.resource.resource", "resource is required to be set"))
    else:
        problems = dns1035_problems(plural)
        if problems:
            causes.append(invalid("spec.resource.resource", plural, ",".join(problems)))
    if group:
        problems = ["must be no more than 253 characters"] if len(group) > 253 else []
        if not DNS1123_SUBDOMAIN.match(group):
            problems.append(SUBDOMAIN_MESSAGE)
        if problems:
            causes.append(invalid("spec.resource.group", group, ",".join(problems)))
    return causes


def _status_causes(svm: Obj, old: Obj) -> Causes:
    status, old_status = _dict(svm.get("status")), _dict(old.get("status"))
    causes: Causes = []
    version = _text(status.get("resourceVersion"))
    if version and not (version.isascii() and version.isdigit()):  # (the wording of v1beta1's ParseInt check)
        quoted = show(version)
        why = f"failed to parse resource version {quoted}: strconv.ParseInt: parsing {quoted}: invalid syntax"
        causes.append(invalid("status.resourceVersion", version, why))
    conditions = status.get("conditions") or []
    conditions = conditions if isinstance(conditions, list) else []
    causes += conditions_causes(conditions, "status.conditions")
    old_version = _text(old_status.get("resourceVersion"))
    if old_version and old_version != version:
        causes.append(invalid("status.resourceVersion", version, "field is immutable"))
    shown = json.dumps(conditions, separators=(",", ":"))
    succeeded, failed, running = (condition_true(svm, k) for k in (SUCCEEDED, FAILED, RUNNING))
    if succeeded and failed:
        causes.append(_shown("status.conditions", shown, "Both success and failed conditions cannot be true at the "
                                                          "same time"))
    if succeeded and running:
        causes.append(_shown("status.conditions", shown, "Running condition cannot be true when success condition "
                                                          "is true"))
    if failed and running:
        causes.append(_shown("status.conditions", shown, "Running condition cannot be true when failed condition "
                                                          "is true"))
    if condition_true(old, SUCCEEDED) and not succeeded:
        causes.append(_shown("status.conditions", shown, "Success condition cannot be set to false once it is true"))
    if condition_true(old, FAILED) and not failed:
        causes.append(_shown("status.conditions", shown, "Failed condition cannot be set to false once it is true"))
    return causes


def prepare_storage_version_migration(svm: Obj, old: Obj | None) -> Causes:
    """The causes of a 422 for a StorageVersionMigration written (``old`` None: created). A
    status write carries the stored spec itself, an update of the object the stored status."""
    if old is None:
        svm["status"] = {}  # PrepareForCreate: nobody creates a migration already run
        return _spec_causes(_dict(svm.get("spec")))
    causes: Causes = []
    spec, old_spec = svm.get("spec"), old.get("spec")
    if spec is not old_spec:
        causes += _spec_causes(_dict(spec))
        if _dict(spec) != _dict(old_spec):
            causes.append(_shown("spec", _go_spec(_dict(spec)), "field is immutable"))
    if svm.get("status") is not old.get("status") and svm.get("status") != old.get("status"):
        causes += _status_causes(svm, old)
    return causes
