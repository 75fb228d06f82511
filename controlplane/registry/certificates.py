"""CertificateSigningRequests (certificates.k8s.io/v1): validation and the three update
strategies of upstream's ``pkg/registry/certificates/certificates/strategy.go``.

- create: ``spec.request`` must be a PEM ``CERTIFICATE REQUEST`` whose signature holds,
  ``spec.usages`` given and known, ``spec.signerName`` a qualified ``domain/path`` (not the
  legacy one), ``spec.expirationSeconds`` at least 600; the requesting user's name, uid,
  groups and extra are written into the spec (``requestor``) and the status starts empty,
  so that nobody creates a pre-approved request;
- every update keeps the spec; through the object itself the status too (only metadata
  moves), through ``/status`` the approval conditions (``Approved``, ``Denied``) stay as
  they were, through ``/approval`` the certificate does; an approval condition, once
  there, may not be removed, and ``Approved`` and ``Denied`` exclude each other;
- a condition without times gets them (``lastUpdateTime``, ``lastTransitionTime``).

``extract_condition`` is the CONDITION column of ``kubectl get csr`` (``Approved,Issued``).
The signer, which issues approved requests, is ``controllers/certificates.py``.
"""

from __future__ import annotations

import base64
import binascii
from datetime import UTC, datetime
from typing import Any

__all__ = ["APPROVAL_TYPES", "USAGES", "extract_condition", "parse_request", "prepare_csr", "set_requestor"]

Obj = dict[str, Any]
Causes = list[dict[str, str]]

APPROVAL_TYPES = ("Approved", "Denied")
LEGACY_SIGNER = "kubernetes.io/legacy-unknown"
# upstream's KeyUsage values (certificates/v1)
USAGES = ("signing", "digital signature", "content commitment", "key encipherment", "key agreement",
          "data encipherment", "cert sign", "crl sign", "encipher only", "decipher only", "any", "server auth",
          "client auth", "code signing", "email protection", "s/mime", "ipsec end system", "ipsec tunnel",
          "ipsec user", "timestamping", "ocsp signing", "microsoft sgc", "netscape sgc")
MIN_EXPIRATION_SECONDS = 600


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _dict(value: Any) -> Obj:
    return value if isinstance(value, dict) else {}


def _go_bytes(raw: bytes) -> str:
    """``raw`` as Go's ``%#v`` prints a ``[]byte``, as upstream's Invalid value shows it."""
    return "[]byte{" + ", ".join(f"0x{b:x}" for b in raw) + "}"


def parse_request(encoded: Any) -> tuple[Any, str]:
    """``(x509.CertificateSigningRequest, "")`` of a base64 ``spec.request``, or ``(None, why)``
    in upstream's words (``ParseCSR``, then the signature check)."""
    from cryptography import x509

    try:
        raw = base64.b64decode(encoded, validate=True) if isinstance(encoded, str) else b""
    except (binascii.Error, ValueError):
        raw = b""
    start = raw.find(b"-----BEGIN CERTIFICATE REQUEST-----")
    if start < 0:
        return None, "PEM block type must be CERTIFICATE REQUEST"
    try:
        csr = x509.load_pem_x509_csr(raw[start:])
    except ValueError as e:
        return None, f"x509: malformed certificate request: {e}"
    if not csr.is_signature_valid:
        return None, "x509: ECDSA verification failure"
    return csr, ""


def _spec_causes(spec: Obj) -> Causes:
    causes: Causes = []
    _, why = parse_request(spec.get("request"))
    if why:
        try:
            raw = base64.b64decode(spec.get("request") or "")
        except (binascii.Error, ValueError):
            raw = b""
        causes.append({"reason": "FieldValueInvalid", "field": "spec.request",
                       "message": f"Invalid value: {_go_bytes(raw)}: {why}"})
    usages = spec.get("usages") or []
    if not usages:
        causes.append({"reason": "FieldValueRequired", "field": "spec.usages", "message": "Required value"})
    seen: set[str] = set()
    for i, usage in enumerate(usages):
        if usage not in USAGES:
            shown = ", ".join(f'"{u}"' for u in sorted(USAGES))
            causes.append({"reason": "FieldValueNotSupported", "field": f"spec.usages[{i}]",
                           "message": f'Unsupported value: "{usage}": supported values: {shown}'})
        elif usage in seen:
            causes.append({"reason": "FieldValueDuplicate", "field": f"spec.usages[{i}]",
                           "message": f'Duplicate value: "{usage}"'})
        seen.add(str(usage))
    signer = spec.get("signerName")
    if not signer:
        causes.append({"reason": "FieldValueRequired", "field": "spec.signerName", "message": "Required value"})
    elif signer == LEGACY_SIGNER:
        causes.append({"reason": "FieldValueInvalid", "field": "spec.signerName",
                       "message": f'Invalid value: "{signer}": the legacy signerName is not allowed via this API '
                                  "version"})
    elif "/" not in str(signer) or not str(signer).partition("/")[0] or not str(signer).partition("/")[2]:
        causes.append({"reason": "FieldValueInvalid", "field": "spec.signerName",
                       "message": f'Invalid value: "{signer}": must be a fully qualified domain and path of the '
                                  "form 'example.com/signer-name'"})
    seconds = spec.get("expirationSeconds")
    if seconds is not None and isinstance(seconds, int) and seconds < MIN_EXPIRATION_SECONDS:
        causes.append({"reason": "FieldValueInvalid", "field": "spec.expirationSeconds",
                       "message": f"Invalid value: {seconds}: may not specify a duration less than 600 seconds "
                                  "(10 minutes)"})
    return causes


def _condition_causes(conditions: list[Obj], old_conditions: list[Obj] | None) -> Causes:
    causes: Causes = []
    seen: set[str] = set()
    for i, c in enumerate(conditions):
        kind, status = c.get("type"), c.get("status")
        field = f"status.conditions[{i}]"
        if not kind:
            causes.append({"reason": "FieldValueRequired", "field": f"{field}.type", "message": "Required value"})
        elif kind in (*APPROVAL_TYPES, "Failed"):
            if kind in seen:
                causes.append({"reason": "FieldValueDuplicate", "field": f"{field}.type",
                               "message": f'Duplicate value: "{kind}"'})
            if status != "True":
                causes.append({"reason": "FieldValueNotSupported", "field": f"{field}.status",
                               "message": f'Unsupported value: "{status or ""}": supported values: "True"'})
        if not status and kind not in (*APPROVAL_TYPES, "Failed"):
            causes.append({"reason": "FieldValueRequired", "field": f"{field}.status", "message": "Required value"})
        seen.add(str(kind))
    if {"Approved", "Denied"} <= seen:
        causes.append({"reason": "FieldValueInvalid", "field": "status.conditions",
                       "message": "Invalid value: \"Approved\": Approved and Denied conditions are mutually exclusive"})
    for kind in APPROVAL_TYPES:
        if old_conditions is not None and any(c.get("type") == kind for c in old_conditions) and kind not in seen:
            causes.append({"reason": "FieldValueForbidden", "field": "status.conditions",
                           "message": f'Forbidden: updates may not remove a condition of type "{kind}"'})
    return causes


def _stamp(conditions: list[Obj], old_conditions: list[Obj]) -> None:
    """Times for the conditions that have none: now, or the old instance's transition time
    when its status did not change (upstream's populateConditionTimestamps)."""
    now = _now()
    for c in conditions:
        if not c.get("lastUpdateTime"):  # (absent or null: a zero Time, written as null)
            c["lastUpdateTime"] = now
        if not c.get("lastTransitionTime"):
            old = next((o for o in old_conditions if o.get("type") == c.get("type")), None)
            kept = old.get("lastTransitionTime") if old is not None and old.get("status") == c.get("status") else None
            c["lastTransitionTime"] = kept or now


def set_requestor(csr: Obj, user: Any) -> None:
    """A create's spec names who asked (a ``rbac.User``, or None) and nothing else; the
    status starts empty: ``{}``, as Go writes the struct (no pointer), which clients that
    set ``status.conditions`` on what they read (the Python client's approval) rely on."""
    spec = csr.setdefault("spec", {})
    for field in ("username", "uid", "groups", "extra"):
        spec.pop(field, None)
    if user is not None:
        spec["username"] = user.name
        if user.uid:
            spec["uid"] = user.uid
        if user.groups:
            spec["groups"] = list(user.groups)
        if user.extra:
            spec["extra"] = {k: list(v) for k, v in user.extra}
    csr["status"] = {}


def prepare_csr(csr: Obj, old: Obj | None, subresource: str | None = None) -> Causes:
    """Validate a write of ``csr`` (``old`` None: a create) after applying the strategy of
    ``subresource`` (None, ``status`` or ``approval``) in place."""
    if old is None:
        return _spec_causes(_dict(csr.get("spec")))
    csr["spec"] = old.get("spec")
    old_status = _dict(old.get("status"))
    old_conditions = [c for c in old_status.get("conditions") or () if isinstance(c, dict)]
    if subresource is None:
        csr["status"] = old_status
        return []
    status = csr["status"] = dict(_dict(csr.get("status")))
    conditions = [dict(c) for c in status.get("conditions") or () if isinstance(c, dict)]
    if subresource == "approval":
        if "certificate" in old_status:
            status["certificate"] = old_status["certificate"]
        else:
            status.pop("certificate", None)
    else:  # /status: the approval conditions stay as they were
        conditions = [c for c in conditions if c.get("type") not in APPROVAL_TYPES]
        conditions[:0] = [c for c in old_conditions if c.get("type") in APPROVAL_TYPES]
    _stamp(conditions, old_conditions)
    status["conditions"] = conditions
    if not conditions:
        status.pop("conditions")
    return _condition_causes(conditions, old_conditions)


def extract_condition(csr: Obj) -> str:
    """``Approved,Issued``, ``Denied``, ``Pending``, ... as upstream's printer."""
    kinds = {c.get("type") for c in _dict(csr.get("status")).get("conditions") or () if isinstance(c, dict)}
    shown = "Denied" if "Denied" in kinds else "Approved" if "Approved" in kinds else "Pending"
    if "Failed" in kinds:
        shown += ",Failed"
    if _dict(csr.get("status")).get("certificate"):
        shown += ",Issued"
    return shown
