"""The CertificateSigningRequest admission plugins of kube-apiserver (enabled by default there):

- ``CertificateSubjectRestriction``: a create of a request for
  ``kubernetes.io/kube-apiserver-client`` whose subject has the organization
  ``system:masters`` is refused: its certificate would make its holder a superuser;
- ``CertificateApproval``: an update through ``/approval`` needs the verb ``approve``
  on the resource ``signers`` (group ``certificates.k8s.io``) named after the stored
  request's ``spec.signerName``, or after its domain (``kubernetes.io/*``);
- ``CertificateSigning``: an update through ``/status`` that changes the certificate or
  the conditions needs the verb ``sign`` on ``signers`` likewise;
- a PodCertificateRequest's status strategy (``pkg/registry/certificates/podcertificaterequest``,
  not an admission plugin upstream: its 422 comes with validation): a ``/status`` write that
  changes anything in the status (issues a chain, or denies or fails the request: upstream's
  newer strategy compares the whole status, its older one the chain only) needs the verb
  ``sign`` on ``signers`` likewise;
- ``ClusterTrustBundleAttest`` (``plugin/pkg/admission/certificates/ctbattest``): a create
  or update of a ClusterTrustBundle with a ``spec.signerName`` needs the verb ``attest``
  on ``signers`` likewise (the new object's signer: validation keeps it unchanged), but
  for an update that changes only what the garbage collector writes (owner references,
  finalizers).

Each refusal is a 403 Forbidden worded as upstream's admission errors
(``certificatesigningrequests.certificates.k8s.io "x" is forbidden: ...``). The two
authorization checks ask the server's authorizer (``--authorization-mode RBAC``) about
the requesting user, as upstream's plugins ask the configured one: without an authorizer
(AlwaysAllow) or a user (no authentication) everyone may, and the masters always may.
"""

from __future__ import annotations

from typing import Any

from ..registry.certificates import parse_request
from ..registry.podcertificates import sign_forbidden
from ..registry.types import ResourceType
from .errors import ApiError
from .rbac import Authorizes, Request, User

__all__ = ["check_attest", "check_pod_certificate_signer", "check_signer_permission", "check_subject"]

Obj = dict[str, Any]
GROUP = "certificates.k8s.io"
CLIENT_SIGNER = "kubernetes.io/kube-apiserver-client"
MASTERS = "system:masters"
VERB_OF_SUBRESOURCE = {"approval": "approve", "status": "sign"}  # CertificateApproval, CertificateSigning


def _dict(value: Any) -> Obj:
    return value if isinstance(value, dict) else {}


def _forbidden(rtype: ResourceType, name: str, why: str) -> ApiError:
    """upstream's admission.NewForbidden: the group-qualified resource, the object's name."""
    return ApiError(403, "Forbidden", f'{rtype.plural}.{rtype.group} "{name}" is forbidden: {why}',
                    ApiError._details(rtype, name))


def _name(csr: Obj) -> str:
    meta = _dict(csr.get("metadata"))
    return str(meta.get("name") or meta.get("generateName") or "")


def check_subject(rtype: ResourceType, csr: Obj) -> None:
    """CertificateSubjectRestriction, on a create: raise its 403 for a client request of the masters."""
    from cryptography.x509.oid import NameOID

    spec = _dict(csr.get("spec"))
    if spec.get("signerName") != CLIENT_SIGNER:
        return
    request, why = parse_request(spec.get("request"))
    if request is None:
        raise _forbidden(rtype, _name(csr), f"failed to parse CSR: {why}")
    if any(a.value == MASTERS for a in request.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)):
        raise _forbidden(rtype, _name(csr), f"use of {CLIENT_SIGNER} signer with {MASTERS} group is not allowed")


def _changed_by_signing(csr: Obj, old: Obj) -> bool:
    """Whether a ``/status`` write changes what only a signer may: the certificate or the conditions."""
    status = _dict(csr.get("status"))
    old_status = _dict(old.get("status"))
    return bool(status.get("certificate") != old_status.get("certificate")
                or (status.get("conditions") or []) != (old_status.get("conditions") or []))


async def _may(authorizer: Authorizes, user: User, verb: str, signer: str) -> bool:
    """upstream's IsAuthorizedForSignerName: the signer by name, else its domain's wildcard."""
    if await authorizer.allowed(user, Request(verb, GROUP, "signers", name=signer)):
        return True
    return await authorizer.allowed(user, Request(verb, GROUP, "signers", name=signer.split("/")[0] + "/*"))


async def check_signer_permission(authorizer: Authorizes | None, user: User | None, rtype: ResourceType,
                                  csr: Obj, old: Obj, subresource: str | None) -> None:
    """CertificateApproval (``/approval``) and CertificateSigning (``/status``), on an update
    of ``old`` into ``csr``: raise their 403 unless ``user`` may approve (sign) for the
    stored request's signer."""
    verb = VERB_OF_SUBRESOURCE.get(subresource or "")
    if verb is None or authorizer is None or user is None:
        return
    if verb == "sign" and not _changed_by_signing(csr, old):
        return
    spec = _dict(old.get("spec"))
    signer = str(spec.get("signerName") or "")
    if not await _may(authorizer, user, verb, signer):
        raise _forbidden(rtype, _name(old), f'user not permitted to {verb} requests with signerName "{signer}"')


def _only_gc_fields_changed(ctb: Obj, old: Obj) -> bool:
    """upstream's ``rbac.IsOnlyMutatingGCFields``: the objects equal but for the metadata
    the garbage collector writes (and what the server itself moves at every write)."""
    moved = ("ownerReferences", "finalizers", "managedFields", "resourceVersion", "generation")

    def kept(obj: Obj) -> Obj:
        meta = {k: v for k, v in _dict(obj.get("metadata")).items() if k not in moved}
        return {**{k: v for k, v in obj.items() if k != "metadata"}, "metadata": meta}
    return kept(ctb) == kept(old)


async def check_attest(authorizer: Authorizes | None, user: User | None, rtype: ResourceType,
                       ctb: Obj, old: Obj | None) -> None:
    """ClusterTrustBundleAttest, on a create (``old`` None) or update of a ClusterTrustBundle:
    raise its 403 unless ``user`` may attest for the bundle's signer."""
    signer = str(_dict(ctb.get("spec")).get("signerName") or "")
    if not signer or authorizer is None or user is None:
        return
    if old is not None and _only_gc_fields_changed(ctb, old):
        return
    if not await _may(authorizer, user, "attest", signer):
        raise _forbidden(rtype, _name(ctb), f'user not permitted to attest for signerName "{signer}"')


def _set_fields(status: Any) -> Obj:
    """``status`` without its empty fields: upstream compares the typed status, where an absent
    field and an empty one (``conditions: []``, ``certificateChain: ""``) are one zero value."""
    return {k: v for k, v in _dict(status).items() if v not in (None, "", [], {})}


async def check_pod_certificate_signer(authorizer: Authorizes | None, user: User | None, rtype: ResourceType,
                                       pcr: Obj, old: Obj) -> None:
    """A PodCertificateRequest's ``/status`` write of ``old`` into ``pcr`` (as the strategy
    prepared it): its 422 unless ``user`` may sign for the stored request's signer, when the
    write changes the status at all."""
    if authorizer is None or user is None:
        return
    if _set_fields(pcr.get("status")) == _set_fields(old.get("status")):
        return
    signer = str(_dict(old.get("spec")).get("signerName") or "")
    if not await _may(authorizer, user, "sign", signer):
        raise ApiError.invalid(rtype, _name(old), [sign_forbidden(user.name, signer)])
