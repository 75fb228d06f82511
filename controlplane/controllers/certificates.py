"""The CSR signer of kube-controller-manager (``csrsigning``): an approved
CertificateSigningRequest for one of the built-in signers gets its certificate, signed by the
cluster CA (the server's generated ``pki/ca.crt``, as ``--cluster-signing-cert-file``).

- Signers: ``kubernetes.io/kube-apiserver-client``, ``kubernetes.io/kube-apiserver-client-kubelet``
  and ``kubernetes.io/kubelet-serving``; requests for others wait for their own signer, as
  upstream's.
- Each signer checks what it signs, as upstream's (``refusal``), and a request that fails
  gets the ``Failed`` condition (``SignerValidationFailure``, upstream's message), never a
  certificate: ``kube-apiserver-client`` allows only the usages ``client auth`` (required),
  ``digital signature`` and ``key encipherment``; ``kube-apiserver-client-kubelet`` wants
  the organization ``system:nodes`` alone, the common name ``system:node:<name>``, no
  subjectAltName, and the usages ``client auth`` and ``digital signature`` (``key
  encipherment`` optional); ``kubelet-serving`` the same subject, at least one DNS or IP
  subjectAltName (no email, no URI), and ``server auth`` in place of ``client auth``.
- The certificate: the request's subject and key, its usages as key usages, valid from five
  minutes back (clock skew, as upstream's backdating) for ``spec.expirationSeconds`` or a
  year (``--cluster-signing-duration``), whichever is shorter.
- Not run when the server serves plain HTTP or its certificate is the user's own
  (``--tls-cert-file``): there is no cluster CA key to sign with.
"""

from __future__ import annotations

import base64
import datetime
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from controlplane.client import ApiError, Client, resource_path
from controlplane.client.workqueue import WorkQueue, run_controller
from controlplane.registry.certificates import parse_request

from .ownership import meta_of

if TYPE_CHECKING:
    from controlplane.config import Config

__all__ = ["SIGNERS", "CsrSigner", "refusal", "sign", "start"]

log = logging.getLogger(__name__)

CSRS = resource_path("certificates.k8s.io", "v1", "certificatesigningrequests")
CLIENT_SIGNER = "kubernetes.io/kube-apiserver-client"
KUBELET_CLIENT = "kubernetes.io/kube-apiserver-client-kubelet"
KUBELET_SERVING = "kubernetes.io/kubelet-serving"
SIGNERS = (CLIENT_SIGNER, KUBELET_CLIENT, KUBELET_SERVING)
CLIENT_USAGES = frozenset({"client auth", "digital signature", "key encipherment"})
KUBELET_CLIENT_USAGES = CLIENT_USAGES  # all three, key encipherment optional
SERVING_USAGES = frozenset({"server auth", "digital signature", "key encipherment"})
SIGNING_DURATION = datetime.timedelta(days=365)
BACKDATE = datetime.timedelta(minutes=5)


def _client_usage_problem(usages: list[str]) -> str:
    """kube-apiserver-client's check (upstream's validAPIServerClientUsages): the first usage
    it does not allow, else a missing ``client auth``."""
    refused = next((u for u in usages if u not in CLIENT_USAGES), None)
    if refused is not None:
        return f"invalid usage for client certificate: {refused}"
    if "client auth" not in usages:
        return "missing required usage for client certificate: client auth"
    return ""


def _names(request: Any) -> tuple[list[str], list[Any], list[str], list[Any]]:
    """The request's subjectAltNames: DNS names, IP addresses, emails, URIs."""
    from cryptography import x509

    try:
        sans = request.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return [], [], [], []
    return (sans.get_values_for_type(x509.DNSName), sans.get_values_for_type(x509.IPAddress),
            sans.get_values_for_type(x509.RFC822Name), sans.get_values_for_type(x509.UniformResourceIdentifier))


def _kubelet_problem(signer: str, request: Any, usages: list[str]) -> str:
    """The kubelet signers' checks, in upstream's order and words (ValidateKubeletClientCSR,
    ValidateKubeletServingCSR): the organization exactly ``system:nodes``, the names a client
    may not carry or a server must, the common name ``system:node:<name>``, and the usages
    exactly the required ones (``key encipherment`` optional, for non-RSA keys)."""
    from cryptography.x509.oid import NameOID

    organizations = [a.value for a in request.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)]
    common = [a.value for a in request.subject.get_attributes_for_oid(NameOID.COMMON_NAME)]
    dns, ips, emails, uris = _names(request)
    serving = signer == KUBELET_SERVING
    required = SERVING_USAGES if serving else KUBELET_CLIENT_USAGES
    usage_problem = "" if set(usages) in (required, required - {"key encipherment"}) else \
        f"usages did not match [{' '.join(sorted(required))}]"
    if organizations != ["system:nodes"]:
        return "subject organization is not system:nodes"
    if serving:
        if not dns and not ips:
            return "DNS or IP subjectAltName is required"
    elif dns:
        return "DNS subjectAltNames are not allowed"
    if emails:
        return "Email subjectAltNames are not allowed"
    if not serving and ips:
        return "IP subjectAltNames are not allowed"
    if uris:
        return "URI subjectAltNames are not allowed"
    if serving and usage_problem:  # (the serving check looks at the usages before the name)
        return usage_problem
    if not (common and str(common[0]).startswith("system:node:")):
        return "subject common name does not begin with system:node:"
    return usage_problem


def refusal(signer: str, request: Any, usages: list[str]) -> str:
    """Why ``signer`` refuses to sign ``request`` (a parsed x509 request) for ``usages``, in
    upstream's words, or ``""``: the message of the ``Failed`` condition its signer sets."""
    if signer == CLIENT_SIGNER:
        return _client_usage_problem(usages)
    return _kubelet_problem(signer, request, usages)


def sign(csr_obj: dict[str, Any], ca_cert: Any, ca_key: Any, now: datetime.datetime) -> bytes:
    """The PEM certificate for ``csr_obj``'s request, signed by ``ca_cert``/``ca_key``."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.x509.oid import ExtendedKeyUsageOID

    spec = csr_obj.get("spec") or {}
    request, why = parse_request(spec.get("request"))
    if request is None:
        raise ValueError(why)
    usages = set(spec.get("usages") or ())
    lifetime = SIGNING_DURATION
    if isinstance(spec.get("expirationSeconds"), int):
        lifetime = min(lifetime, datetime.timedelta(seconds=spec["expirationSeconds"]))
    extended = [oid for usage, oid in (("client auth", ExtendedKeyUsageOID.CLIENT_AUTH),
                                       ("server auth", ExtendedKeyUsageOID.SERVER_AUTH)) if usage in usages]
    builder = (x509.CertificateBuilder().subject_name(request.subject).issuer_name(ca_cert.subject)
               .public_key(request.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - BACKDATE).not_valid_after(now + lifetime)
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True))
    if usages & {"digital signature", "key encipherment"}:  # (no bits, no extension: as Go's x509)
        builder = builder.add_extension(x509.KeyUsage(
            digital_signature="digital signature" in usages, key_encipherment="key encipherment" in usages,
            content_commitment=False, data_encipherment=False, key_agreement=False, key_cert_sign=False,
            crl_sign=False, encipher_only=False, decipher_only=False), critical=True)
    if extended:
        builder = builder.add_extension(x509.ExtendedKeyUsage(extended), critical=False)
    try:  # the names a serving certificate asks for
        names = request.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        builder = builder.add_extension(names, critical=False)
    except x509.ExtensionNotFound:
        pass
    return builder.sign(ca_key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM)


class CsrSigner:
    def __init__(self, client: Client, ca_cert: Any, ca_key: Any) -> None:
        self.client = client
        self.ca_cert, self.ca_key = ca_cert, ca_key
        self.queue = WorkQueue()
        self.csrs = client.informer(CSRS, on_add=self._changed, on_update=lambda _old, new: self._changed(new))

    def _changed(self, csr: dict[str, Any]) -> None:
        self.queue.add(str(meta_of(csr).get("name", "")))

    async def run(self) -> None:
        await run_controller("csr signer", (self.csrs,), self.queue, self.sync, 1)

    async def sync(self, name: str) -> None:
        csr = self.csrs.items.get(name)
        if csr is None:
            return
        spec, status = csr.get("spec") or {}, csr.get("status") or {}
        kinds = {c.get("type") for c in status.get("conditions") or ()}
        if spec.get("signerName") not in SIGNERS or "Approved" not in kinds or kinds & {"Denied", "Failed"} \
                or status.get("certificate"):
            return
        request, why = parse_request(spec.get("request"))
        if request is None:  # (validation let it in: a request stored before it was checked)
            log.warning("csr signer: cannot parse %s: %s", name, why)
            return
        problem = refusal(str(spec["signerName"]), request, list(spec.get("usages") or ()))
        new_status = dict(status)
        if problem:
            now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            new_status["conditions"] = [*(status.get("conditions") or ()), {
                "type": "Failed", "status": "True", "reason": "SignerValidationFailure", "message": problem,
                "lastUpdateTime": now, "lastTransitionTime": now}]
        else:
            pem = sign(csr, self.ca_cert, self.ca_key, datetime.datetime.now(datetime.UTC))
            new_status["certificate"] = base64.b64encode(pem).decode()
        try:
            await self.client.update(f"{CSRS}/{name}/status", {**csr, "status": new_status})
        except ApiError as e:
            if e.code not in (404, 409):  # gone, or changed meanwhile: its event comes back
                raise


def _cluster_ca(config: Config) -> tuple[Any, Any] | None:
    """The generated CA and its key, or None when the server has none."""
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    if not config.tls or config.tls_cert_file is not None:
        return None
    pki = Path(config.pki_dir)
    try:
        cert = x509.load_pem_x509_certificate((pki / "ca.crt").read_bytes())
        key = serialization.load_pem_private_key((pki / "ca.key").read_bytes(), password=None)
    except (OSError, ValueError) as e:
        log.warning("csr signer: no cluster CA in %s: %s", pki, e)
        return None
    return cert, key


async def start(client: Client, config: Config) -> None:
    """The component entry point (``controlplane/components.py``)."""
    ca = _cluster_ca(config)
    if ca is not None:
        await CsrSigner(client, *ca).run()
