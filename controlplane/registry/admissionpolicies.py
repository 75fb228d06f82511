"""ValidatingAdmissionPolicy (admissionregistration.k8s.io/v1) at its write: the CEL
expressions it holds must compile, as upstream's validation requires of its
``validations[i].expression`` and ``.messageExpression``, ``matchConditions[i].expression``,
``variables[i].expression`` and ``auditAnnotations[i].valueExpression``::

    prepare_validating_admission_policy({"spec": {"validations": [{"expression": "object.x >"}]}}, None)
    # [{"reason": "FieldValueInvalid", "field": "spec.validations[0].expression",
    #   "message": 'Invalid value: "object.x >": compilation failed: ERROR: <input>:1:11: ...'}]

Only syntax is checked (the interpreter has no type checker); upstream reports type errors
against the policy's ``paramKind`` and matched kinds in ``status.typeChecking`` rather than
refusing the write, and that status is not written here. The policy is evaluated by
``api/admissionpolicy.py``.
"""

from __future__ import annotations

from typing import Any

from .causes import Causes, invalid, objects
from .expressions import compile_error

__all__ = ["prepare_validating_admission_policy"]

_EXPRESSIONS = (("validations", "expression"), ("validations", "messageExpression"),
                ("matchConditions", "expression"), ("variables", "expression"),
                ("auditAnnotations", "valueExpression"))


def prepare_validating_admission_policy(policy: dict[str, Any], old: dict[str, Any] | None) -> Causes:
    """The causes of a 422 for the policy's expressions that do not compile, in upstream's
    order (each list in turn, each item's expression before its message expression)."""
    spec = policy.get("spec")
    causes: Causes = []
    if not isinstance(spec, dict):
        return causes
    for section in dict.fromkeys(section for section, _ in _EXPRESSIONS):
        items = spec.get(section)
        if not isinstance(items, list):
            continue
        for path, item in objects(items, f"spec.{section}", causes):
            for key in (key for s, key in _EXPRESSIONS if s == section):
                text = item.get(key)
                why = compile_error(text) if isinstance(text, str) and text.strip() else None
                if why is not None:
                    causes.append(invalid(f"{path}.{key}", text, why))
    return causes
