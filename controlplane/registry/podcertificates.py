"""PodCertificateRequests (certificates.k8s.io/v1, GA in 1.37): defaults, validation and
the two update strategies of upstream's ``pkg/registry/certificates/podcertificaterequest``
with ``pkg/apis/certificates/validation`` (``ValidatePodCertificateRequestCreate``,
``…Update``, ``…StatusUpdate``).

- create: ``spec.signerName`` a ``domain/path`` signer name; ``podName``,
  ``serviceAccountName`` and ``nodeName`` DNS subdomains; ``podUID``,
  ``serviceAccountUID`` and ``nodeUID`` set, at most 128 bytes; ``maxExpirationSeconds``
  (86400 when left out, v1's default) in ``[3600, 7862400]``, ``[3600, 86400]`` for the
  ``kubernetes.io`` signers; ``unverifiedUserAnnotations`` as annotations, each key
  domain-prefixed; ``stubPKCS10Request`` a DER PKCS#10 request of at most 10 KiB, empty
  (no subject, no attributes), whose signature holds, for an Ed25519, ECDSA P-256/384/521
  or RSA 3072/4096 key; the status starts empty;
- an update through the object keeps the status and may not change the spec
  (``spec: field is immutable``);
- through ``/status`` the spec stays; the instances of ``Issued``, ``Denied`` and
  ``Failed`` the request already had are kept as they were; a condition without a
  ``lastTransitionTime`` gets the old one of its type and status, else now. At most one
  of those three types, each ``True``, no other type; the conditions as metav1's
  ``ValidateConditions``. A request once issued, denied or failed keeps its status; one
  denied or failed has nothing but conditions; one issued has a PEM chain (at most
  100 KiB) whose leaf is an X.509 certificate for the requested key, lives 1 hour to
  ``maxExpirationSeconds``, and whose ``notBefore``/``notAfter`` are the status's
  (``notBefore`` within 5 minutes of now), ``beginRefreshAt`` 10 minutes inside both
  ends; any other status write is refused. Who may write a chain (``sign`` on the signer)
  is the API's check (``api/certificateadmission.py``), as upstream's status strategy's.

Upstream's 1.37 sources of the v1 validation were not available to read here: the rules
and words above are upstream's 1.35 validation (``pkixPublicKey``/``proofOfPossession``),
carried over to v1's ``stubPKCS10Request`` as the 1.37 KEP describes it (the key types,
the signature as proof of possession, an empty request); the words of the checks on the
stub request itself and of the domain-prefix rule are this module's own.
"""

from __future__ import annotations

import base64
import binascii
from datetime import UTC, datetime, timedelta
from typing import Any

from ..gostrings import quote
from . import pem
from .causes import Causes, cause, forbidden, invalid, not_supported, required, too_long
from .drafields import conditions_causes
from .podvalidation import label_key_problems, subdomain_problems
from .trustbundles import signer_name_causes

__all__ = ["CONDITION_TYPES", "DEFAULT_MAX_EXPIRATION_SECONDS", "prepare_pod_certificate_request",
           "sign_forbidden", "stub_public_key"]

Obj = dict[str, Any]

CONDITION_TYPES = ("Issued", "Denied", "Failed")  # PodCertificateRequestConditionType*
DEFAULT_MAX_EXPIRATION_SECONDS = 86400  # v1's +default
MIN_MAX_EXPIRATION_SECONDS = 60 * 60  # certificates.MinMaxExpirationSeconds
MAX_MAX_EXPIRATION_SECONDS = 91 * 24 * 60 * 60  # MaxMaxExpirationSeconds
KUBERNETES_MAX_MAX_EXPIRATION_SECONDS = 24 * 60 * 60  # KubernetesMaxMaxExpirationSeconds
MAX_STUB_REQUEST_SIZE = 10 * 1024  # as MaxPKIXPublicKeySize: an RSA 4096 key and some margin
MAX_CERTIFICATE_CHAIN_SIZE = 100 * 1024  # MaxCertificateChainSize
MAX_UID_LENGTH = 128
MAX_USER_ANNOTATIONS = 256 * 1024  # as metadata's annotations
_CHAIN, _NOT_BEFORE, _NOT_AFTER, _REFRESH = ("status.certificateChain", "status.notBefore", "status.notAfter",
                                             "status.beginRefreshAt")
_STUB = "spec.stubPKCS10Request"
_CURVES = {"secp224r1": "P-224", "secp256r1": "P-256", "secp384r1": "P-384", "secp521r1": "P-521"}


def _dict(value: Any) -> Obj:
    return value if isinstance(value, dict) else {}


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _omitted(field: str, detail: str) -> dict[str, str]:
    """``field.Invalid(path, field.OmitValueType{}, detail)``: no value shown."""
    return cause("FieldValueInvalid", field, f"Invalid value: {detail}")


def _invalid_text(field: str, value: str, detail: str) -> dict[str, str]:
    return cause("FieldValueInvalid", field, f"Invalid value: {quote(value)}: {detail}")


def go_time(moment: datetime) -> str:
    """A time as Go's ``Time.String`` prints a UTC one (what ``field.Invalid`` shows)."""
    text = moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")
    if moment.microsecond:
        text += f".{moment.microsecond:06d}".rstrip("0")
    return text + " +0000 UTC"


def go_duration(delta: timedelta) -> str:
    """A duration as Go's ``Duration.String`` prints it (``1h0m0s``, ``30m0s``, ``59s``)."""
    seconds = int(delta.total_seconds())
    sign, seconds = ("-", -seconds) if seconds < 0 else ("", seconds)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{sign}{hours}h{minutes}m{secs}s"
    if minutes:
        return f"{sign}{minutes}m{secs}s"
    return f"{sign}{secs}s"


def _parse_time(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# -- the spec ------------------------------------------------------------------------
def _kubernetes_signer(signer: str) -> bool:
    """Core validation's ``IsKubernetesSignerName``: ``kubernetes.io`` or a subdomain of it."""
    host = signer.partition("/")[0]
    return host == "kubernetes.io" or host.endswith(".kubernetes.io")


def _user_annotation_causes(annotations: Any, at: str = "spec.unverifiedUserAnnotations") -> Causes:
    """As metadata's annotations (qualified-name keys, lower-cased; 256 KiB in all), each key
    with a domain prefix besides."""
    if not isinstance(annotations, dict):
        return []
    causes: Causes = []
    size = 0
    for key, value in annotations.items():
        key = str(key)
        problems = label_key_problems(key.lower())
        causes += [invalid(at, key, p) for p in problems]
        if not problems and "/" not in key:
            causes.append(invalid(at, key, "must be domain-prefixed (e.g. 'example.com/key')"))
        size += len(key.encode()) + len(_text(value).encode())
    if size > MAX_USER_ANNOTATIONS:
        causes.append(too_long(at, MAX_USER_ANNOTATIONS))
    return causes


def _decode_bytes(value: Any) -> bytes | None:
    """A ``[]byte`` field's base64, as Go's JSON decoding reads it (None: not base64)."""
    if value is None:
        return b""
    if not isinstance(value, str):
        return None
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return None


def stub_public_key(stub: Any) -> tuple[Any, Causes]:
    """The public key of a ``spec.stubPKCS10Request`` (base64 of its DER), and the causes of
    a 422 when the request is not what kube-apiserver takes: a PKCS#10 request of at most
    10 KiB, with no subject and no attributes, signed by the key it carries, one of Ed25519,
    ECDSA on P-256, P-384 or P-521, RSA of 3072 or 4096 bits."""
    from cryptography import x509
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

    raw = _decode_bytes(stub)
    if raw is None:
        return None, [_omitted(_STUB, "must be base64-encoded")]
    if not raw:
        return None, [required(_STUB)]
    if len(raw) > MAX_STUB_REQUEST_SIZE:
        return None, [too_long(_STUB, MAX_STUB_REQUEST_SIZE)]
    try:
        request = x509.load_der_x509_csr(raw)
    except ValueError:
        return None, [_omitted(_STUB, "must be a DER-encoded PKCS#10 certificate signing request")]
    try:
        key = request.public_key()
    except (UnsupportedAlgorithm, ValueError):
        key = None
    if isinstance(key, ec.EllipticCurvePublicKey):
        curve = _CURVES.get(key.curve.name, key.curve.name)
        if curve not in ("P-256", "P-384", "P-521"):
            return None, [invalid(_STUB, f"curve {curve}", "elliptic public keys must use curve P256 or P384")]
    elif isinstance(key, rsa.RSAPublicKey):
        bits = (key.key_size + 7) // 8 * 8
        if bits not in (3072, 4096):
            return None, [invalid(_STUB, f"{bits}-bit modulus", "RSA keys must have modulus size 3072 or 4096")]
    elif not isinstance(key, ed25519.Ed25519PublicKey):
        return None, [_omitted(_STUB, "unknown public key type; supported types are Ed25519, ECDSA, and RSA")]
    if not request.is_signature_valid:
        return None, [_omitted(_STUB, "could not verify proof-of-possession signature")]
    if len(request.subject) or len(request.attributes) or len(request.extensions):
        return None, [_omitted(_STUB, "must be a stub request: no subject, no attributes and no extensions")]
    return key, []


def _spec_causes(spec: Obj) -> Causes:
    """``ValidatePodCertificateRequestCreate``'s checks of the spec, in its order."""
    signer = _text(spec.get("signerName"))
    causes = signer_name_causes(signer)
    if spec.get("unverifiedUserAnnotations") is not None:
        causes += _user_annotation_causes(spec.get("unverifiedUserAnnotations"))
    for name_field, uid_field in (("podName", "podUID"), ("serviceAccountName", "serviceAccountUID"),
                                  ("nodeName", "nodeUID")):
        name = _text(spec.get(name_field))
        causes += [invalid(f"spec.{name_field}", name, p) for p in subdomain_problems(name)]
        uid = _text(spec.get(uid_field))
        if not uid:
            causes.append(invalid(f"spec.{uid_field}", uid, "must not be empty"))
        if len(uid.encode()) > MAX_UID_LENGTH:
            causes.append(too_long(f"spec.{uid_field}", MAX_UID_LENGTH))
    seconds = spec.get("maxExpirationSeconds")
    if seconds is None:
        return [*causes, required("spec.maxExpirationSeconds", "must be set")]
    top = KUBERNETES_MAX_MAX_EXPIRATION_SECONDS if _kubernetes_signer(signer) else MAX_MAX_EXPIRATION_SECONDS
    if not isinstance(seconds, int) or isinstance(seconds, bool) or not MIN_MAX_EXPIRATION_SECONDS <= seconds <= top:
        causes.append(invalid("spec.maxExpirationSeconds", seconds,
                              f"must be in the range [{MIN_MAX_EXPIRATION_SECONDS}, {top}]"))
    return causes + stub_public_key(spec.get("stubPKCS10Request"))[1]


# -- the status ----------------------------------------------------------------------
def _conditions(status: Obj) -> list[Obj]:
    return [c for c in status.get("conditions") or () if isinstance(c, dict)]


def _terminal(status: Obj, kind: str) -> bool:
    return any(c.get("type") == kind and c.get("status") == "True" for c in _conditions(status))


def _prepare_status(status: Obj, old_status: Obj) -> None:
    """The status strategy's ``PrepareForUpdate``: the old instances of each terminal type
    kept when their number did not change, then the conditions' missing transition times."""
    conditions = status.get("conditions")
    if not isinstance(conditions, list):
        return
    old_conditions = _conditions(old_status)
    for kind in CONDITION_TYPES:
        new_at = [i for i, c in enumerate(conditions) if isinstance(c, dict) and c.get("type") == kind]
        old_of = [c for c in old_conditions if c.get("type") == kind]
        if len(new_at) == len(old_of):
            for i, kept in zip(new_at, old_of, strict=True):
                conditions[i] = kept
    now = _now()
    for i, c in enumerate(conditions):
        if isinstance(c, dict) and not c.get("lastTransitionTime"):
            same = next((o for o in old_conditions if o.get("type") == c.get("type")
                         and o.get("status") == c.get("status") and o.get("lastTransitionTime")), None)
            conditions[i] = {**c, "lastTransitionTime": same["lastTransitionTime"] if same else now}


def _same(a: Any, b: Any) -> bool:
    """apimachinery's semantic equality of two statuses: times by the moment they name, an
    empty list or map as a missing one."""
    if isinstance(a, dict) or isinstance(b, dict):
        a, b = _dict(a), _dict(b)
        keys = {k for k in (*a, *b) if a.get(k) not in (None, "", [], {}) or b.get(k) not in (None, "", [], {})}
        return all(_same(a.get(k), b.get(k)) for k in keys)
    if isinstance(a, list) or isinstance(b, list):
        a, b = a or [], b or []
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    ta, tb = _parse_time(a), _parse_time(b)
    if ta is not None and tb is not None:
        return ta == tb
    return bool(a == b or (a in (None, "") and b in (None, "")))


def _issued_causes(status: Obj, spec: Obj, now: datetime) -> Causes:
    """The checks of a transition to ``Issued``, each returning at its first problem as upstream's."""
    from email.utils import parseaddr

    from cryptography import x509
    from cryptography.exceptions import UnsupportedAlgorithm

    chain = _text(status.get("certificateChain"))
    if len(chain.encode()) > MAX_CERTIFICATE_CHAIN_SIZE:
        return [too_long(_CHAIN, MAX_CERTIFICATE_CHAIN_SIZE)]
    blocks = [(block.kind, block.der) for block in pem.blocks(chain)]
    if not blocks:
        return [_invalid_text(_CHAIN, chain, "issued certificate chain must contain at least one certificate")]
    kind, der = blocks[0]
    if kind != "CERTIFICATE":
        return [_invalid_text(_CHAIN, chain,
                              "issued certificate chain must consist entirely of CERTIFICATE PEM blocks")]
    try:
        leaf = x509.load_der_x509_certificate(der or b"")
        try:
            leaf_key = leaf.public_key()
        except UnsupportedAlgorithm:  # Go parses a key of an algorithm it does not know as none
            leaf_key = None
        names = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        dns_names = names.get_values_for_type(x509.DNSName)
        emails = names.get_values_for_type(x509.RFC822Name)
    except x509.ExtensionNotFound:
        dns_names, emails = [], []
    except (ValueError, x509.DuplicateExtension):  # (Go's parser refuses duplicate extensions)
        return [_invalid_text(_CHAIN, chain, "leaf certificate does not parse as valid X.509")]
    causes: Causes = []
    for name in dns_names:
        if name == "":
            causes.append(_invalid_text(_CHAIN, name, "leaf certificate should not contain empty DNSName"))
        if ".." in name:
            causes.append(_invalid_text(_CHAIN, name, "leaf certificate's DNSName should not contain '..'"))
        if name.startswith(".") or name.endswith("."):
            causes.append(_invalid_text(_CHAIN, name, "leaf certificate's DNSName should not start or end with '.'"))
    for email in emails:
        if "@" not in parseaddr(email)[1]:
            causes.append(_invalid_text(_CHAIN, email, "leaf certificate should not contain invalid EmailAddress"))
    wanted, _ = stub_public_key(spec.get("stubPKCS10Request"))
    if wanted is None:
        return [*causes, _omitted(_STUB, "must be a valid PKCS#10 certificate signing request")]
    from cryptography.hazmat.primitives import serialization

    def spki(key: Any) -> bytes:
        return bytes(key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo))
    if leaf_key is None or spki(wanted) != spki(leaf_key):
        return [*causes, _invalid_text(_CHAIN, chain, "leaf certificate was not issued to the requested public key")]
    not_before, not_after, refresh = (_parse_time(status.get(f)) for f in ("notBefore", "notAfter", "beginRefreshAt"))
    if not_before is None:
        causes.append(required(_NOT_BEFORE, "must be present and consistent with the issued certificate"))
    if not_after is None:
        causes.append(required(_NOT_AFTER, "must be present and consistent with the issued certificate"))
    if refresh is None:
        causes.append(required(_REFRESH, "must be present and in the range [notbefore+10min, notafter-10min]"))
    if causes or not_before is None or not_after is None or refresh is None:
        return causes
    leaf_before, leaf_after = leaf.not_valid_before_utc, leaf.not_valid_after_utc
    if not_before != leaf_before:
        return [cause("FieldValueInvalid", _NOT_BEFORE, f"Invalid value: {go_time(not_before)}: must be set to the "
                      "NotBefore time encoded in the leaf certificate")]
    if not now - timedelta(minutes=5) < not_before < now + timedelta(minutes=5):
        return [cause("FieldValueInvalid", _NOT_BEFORE, f"Invalid value: {go_time(not_before)}: must be set to "
                      "within 5 minutes of kube-apiserver's current time")]
    if not_after != leaf_after:
        return [cause("FieldValueInvalid", _NOT_AFTER, f"Invalid value: {go_time(not_after)}: must be set to the "
                      "NotAfter time encoded in the leaf certificate")]
    lifetime = leaf_after - leaf_before
    if lifetime < timedelta(hours=1):
        return [cause("FieldValueInvalid", _CHAIN, f"Invalid value: {go_duration(lifetime)}: leaf certificate "
                      "lifetime must be >= 1 hour")]
    limit = spec.get("maxExpirationSeconds")
    if isinstance(limit, int) and lifetime > timedelta(seconds=limit):
        return [cause("FieldValueInvalid", _CHAIN, f"Invalid value: {go_duration(lifetime)}: leaf certificate "
                      f"lifetime must be <= spec.maxExpirationSeconds ({limit})")]
    if refresh < not_before + timedelta(minutes=10):
        return [cause("FieldValueInvalid", _REFRESH, f"Invalid value: {go_time(refresh)}: must be at least 10 "
                      "minutes after status.notBefore")]
    if refresh > not_after - timedelta(minutes=10):
        return [cause("FieldValueInvalid", _REFRESH, f"Invalid value: {go_time(refresh)}: must be at least 10 "
                      "minutes before status.notAfter")]
    for kind, der in blocks[1:]:
        if kind != "CERTIFICATE":  # (upstream's message has the typo)
            return [_invalid_text(_CHAIN, chain, "issued certificate chain must consist entirely of CERTFICATE PEM "
                                  "blocks")]
        try:
            x509.load_der_x509_certificate(der or b"")
        except ValueError:
            return [_invalid_text(_CHAIN, chain, "intermediate certificate does not parse as valid X.509")]
    return []


def _status_causes(status: Obj, old_status: Obj, spec: Obj, now: datetime) -> Causes:
    """``ValidatePodCertificateRequestStatusUpdate`` (the spec is the stored one)."""
    causes: Causes = []
    listed = status.get("conditions")
    conditions: list[Any] = listed if isinstance(listed, list) else []
    known = 0
    for i, c in enumerate(conditions):
        c = _dict(c)
        kind = _text(c.get("type"))
        if kind in CONDITION_TYPES:
            known += 1
            if known > 1:
                causes.append(invalid(f"status.conditions[{i}].type", kind,
                                      'There may be at most one condition with type "Issued", "Denied", or "Failed"'))
            if c.get("status") != "True":
                causes.append(not_supported(f"status.conditions[{i}].status", _text(c.get("status")), ("True",)))
        else:
            causes.append(not_supported(f"status.conditions[{i}].type", kind, CONDITION_TYPES))
    causes += conditions_causes(conditions, "status.conditions")
    if causes:
        return causes
    if any(_terminal(old_status, kind) for kind in CONDITION_TYPES):
        if not _same(status, old_status):
            return [_omitted("status", "immutable after PodCertificateRequest is issued, denied, or failed")]
        return []
    if _terminal(status, "Denied") or _terminal(status, "Failed"):
        if not _same(status, {"conditions": status.get("conditions")}):
            return [_omitted("status", "non-condition status fields must be empty when denying or failing the "
                                       "PodCertificateRequest")]
        return []
    if _terminal(status, "Issued"):
        return _issued_causes(status, spec, now)
    if not _same(status, old_status):
        return [_omitted("status", 'status is immutable unless transitioning to "Issued", "Denied", or "Failed"')]
    return []


# -- every write ---------------------------------------------------------------------
def _default(pcr: Obj) -> None:
    """v1's defaults, as every request is decoded: ``maxExpirationSeconds`` 86400."""
    spec = pcr.get("spec")
    if isinstance(spec, dict) and spec.get("maxExpirationSeconds") is None:
        spec["maxExpirationSeconds"] = DEFAULT_MAX_EXPIRATION_SECONDS


def prepare_pod_certificate_request(pcr: Obj, old: Obj | None, now: datetime | None = None) -> Causes:
    """The causes of a 422 for a PodCertificateRequest written (``old`` None: created),
    ``pcr`` defaulted and its status prepared in place. An update through the object comes
    with the stored status (the API keeps it), one through ``/status`` with the stored spec
    (the API keeps it): a status unlike the stored one is a ``/status`` write."""
    _default(pcr)
    spec = _dict(pcr.get("spec"))
    if old is None:
        return _spec_causes(spec)
    old_spec = _dict(old.get("spec"))
    if not _same(spec, old_spec):
        return [cause("FieldValueInvalid", "spec", f"Invalid value: {_go_struct(spec)}: field is immutable")]
    status, old_status = _dict(pcr.get("status")), _dict(old.get("status"))
    if status is old_status or status == old_status:
        return []
    status = pcr["status"] = dict(status)
    if isinstance(status.get("conditions"), list):
        status["conditions"] = list(status["conditions"])
    _prepare_status(status, old_status)
    return _status_causes(status, old_status, old_spec, now or datetime.now(UTC))


def _go_struct(value: Any) -> str:
    import orjson

    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


def sign_forbidden(user_name: str, signer: str) -> dict[str, str]:
    """The status strategy's refusal of a chain written by one who may not ``sign`` for the
    signer (a 422 cause, as upstream's strategy returns it)."""
    return forbidden("spec.signerName", f'User "{user_name}" is not permitted to "sign" for signer "{signer}"')
