"""ClusterTrustBundles (certificates.k8s.io/v1): validation as upstream's
``pkg/apis/certificates/validation`` (``ValidateClusterTrustBundle``, ``…Update``) with
core validation's ``ValidateSignerName`` and ``ValidateClusterTrustBundleName``.

- ``spec.trustBundle``: at most 1 MiB of PEM ``CERTIFICATE`` blocks, none with headers,
  each an X.509 CA certificate (basic constraints, CA bit), none twice, at least one;
  an update that keeps the bundle does not parse it again;
- ``spec.signerName``, when set, a ``domain/path`` signer name, and the object named
  with it as a prefix, slashes made colons (``example.com:foo:`` for ``example.com/foo``);
  without one, a name without ``:``; immutable.

The names are checked here rather than by ``strategies.validate_name``, since their rule
depends on the spec. Who may attest for a signer is admission's (``api/certificateadmission.py``).
"""

from __future__ import annotations

from typing import Any

from . import pem
from .causes import Causes, invalid, required, too_long
from .dnsnames import DNS1123_SUBDOMAIN, SUBDOMAIN_MESSAGE, dns_label_name_problems

__all__ = ["MAX_TRUST_BUNDLE_SIZE", "prepare_cluster_trust_bundle", "signer_name_causes"]

Obj = dict[str, Any]

MAX_TRUST_BUNDLE_SIZE = 1024 * 1024  # certificates.MaxTrustBundleSize
_OMITTED = "<value omitted>"
_SUBDOMAIN_MAX, _LABEL_MAX = 253, 63
# a PEM block as encoding/pem finds one: its type, then its body up to the matching END line


def _dict(value: Any) -> Obj:
    return value if isinstance(value, dict) else {}


def _subdomain_problems(value: str) -> list[str]:
    """apimachinery's ``IsDNS1123Subdomain``."""
    problems = [f"must be no more than {_SUBDOMAIN_MAX} characters"] if len(value) > _SUBDOMAIN_MAX else []
    if not DNS1123_SUBDOMAIN.match(value):
        problems.append(SUBDOMAIN_MESSAGE)
    return problems


def signer_name_causes(signer: str, at: str = "spec.signerName") -> Causes:
    """Core validation's ``ValidateSignerName``: a domain of two or more DNS labels, a ``/``,
    and a path of DNS subdomains joined by dots."""
    if not signer:
        return [required(at)]
    segments = signer.split("/")
    if len(segments) != 2:
        return [invalid(at, signer, "must be a fully qualified domain and path of the form 'example.com/signer-name'")]
    domain, path = segments
    causes: Causes = []
    if len(domain) > _SUBDOMAIN_MAX:
        causes.append(too_long(at, _SUBDOMAIN_MAX))
    labels = domain.split(".")
    for label in labels:
        problems = dns_label_name_problems(label)
        if problems:  # the first bad label only: the next would say the same
            causes += [invalid(at, domain, f"validating label {_quote(label)}: {p}") for p in problems]
            break
    if len(labels) < 2:
        causes.append(invalid(at, domain, "should be a domain with at least two segments separated by dots"))
    for label in path.split("."):
        problems = _subdomain_problems(label)
        if problems:
            causes += [invalid(at, path, f"validating label {_quote(label)}: {p}") for p in problems]
            break
    longest = _SUBDOMAIN_MAX + (_SUBDOMAIN_MAX + _LABEL_MAX + 1) + 1
    if len(signer) > longest:
        causes.append(too_long(at, longest))
    return causes


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _name_problems(name: str, signer: str) -> list[str]:
    """Core validation's ``ValidateClusterTrustBundleName``."""
    if not signer:
        if ":" in name:
            return ['ClusterTrustBundle without signer name must not have ":" in its name']
        return _subdomain_problems(name)
    prefix = signer.replace("/", ":") + ":"
    if not name.startswith(prefix):
        return [f"ClusterTrustBundle for signerName {signer} must be named with prefix {prefix}"]
    return _subdomain_problems(name[len(prefix):])


def _trust_bundle_causes(bundle: str, at: str = "spec.trustBundle") -> Causes:
    """``validateTrustBundle``: each entry's problem (and no more, if any), else a missing or
    duplicated trust anchor."""
    from cryptography import x509

    if len(bundle) > MAX_TRUST_BUNDLE_SIZE:
        return [too_long(at, MAX_TRUST_BUNDLE_SIZE)]
    causes: Causes = []
    seen: dict[bytes, list[int]] = {}
    for i, (kind, headers, der) in enumerate(pem.blocks(bundle)):
        if kind != "CERTIFICATE":
            causes.append(invalid(at, _OMITTED, f"entry {i} has bad block type: {kind}"))
            continue
        if headers:
            causes.append(invalid(at, _OMITTED, f"entry {i} has PEM block headers"))
            continue
        try:
            cert = x509.load_der_x509_certificate(der or b"")
            constraints = cert.extensions.get_extension_for_class(x509.BasicConstraints).value
        except x509.ExtensionNotFound:
            constraints = None
        except ValueError:
            causes.append(invalid(at, _OMITTED, f"entry {i} does not parse as X.509"))
            continue
        if constraints is None or not constraints.ca:
            causes.append(invalid(at, _OMITTED, f"entry {i} does not have the CA bit set"))
            continue
        seen.setdefault(der or b"", []).append(i)
    if causes:
        return causes
    if not seen:
        return [invalid(at, _OMITTED, "at least one trust anchor must be provided")]
    return [invalid(at, _OMITTED, f"duplicate trust anchor (indices [{' '.join(map(str, indices))}])")
            for indices in seen.values() if len(indices) > 1]


def prepare_cluster_trust_bundle(ctb: Obj, old: Obj | None) -> Causes:
    """The causes of a 422 for a ClusterTrustBundle written (``old`` None: created)."""
    spec = _dict(ctb.get("spec"))
    signer = spec.get("signerName") or ""
    signer = signer if isinstance(signer, str) else str(signer)
    name = _dict(ctb.get("metadata")).get("name") or ""
    causes: Causes = [invalid("metadata.name", name, p) for p in _name_problems(str(name), signer)]
    if signer:
        causes += signer_name_causes(signer)
    bundle = spec.get("trustBundle")
    bundle = bundle if isinstance(bundle, str) else ""
    old_spec = _dict(old.get("spec")) if old is not None else None
    if old_spec is None or bundle != old_spec.get("trustBundle"):  # an unchanged bundle is not parsed again
        causes += _trust_bundle_causes(bundle)
    if old_spec is not None and signer != (old_spec.get("signerName") or ""):
        causes.append(invalid("spec.signerName", signer, "field is immutable"))
    return causes
