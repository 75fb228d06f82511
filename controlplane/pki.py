"""The serving certificate, and the service account signing key: made once, kept.

kube-apiserver serves only TLS, and client-go sends bearer tokens only over
TLS, so token authentication needs it. Without ``--tls-cert-file``, ``serve``
keeps a small PKI beside the data directory (``.controlplane/pki/`` by
default)::

    ca.crt, ca.key               a self-signed CA (10 years), made once and kept,
                                 so kubeconfigs written earlier stay valid
    apiserver.crt, apiserver.key  the serving certificate, signed by the CA, for
                                 localhost, 127.0.0.1, ::1, the kubernetes service
                                 names and the ``--host`` address; re-issued when
                                 it does not cover the host or nears its end
    sa.key, sa.pub               the RSA key (2048 bits) that signs service account
                                 tokens (RS256), and its public half, as kubeadm
                                 names them; made once (``ensure_service_account_key``),
                                 so tokens issued before a restart stay valid
    sa-hs256.key                 the 32-byte HMAC secret that signed service account
                                 tokens (HS256) before they were signed as upstream's,
                                 moved here from sa.key when the RSA key replaced it: it
                                 still verifies the tokens it signed, until they expire
                                 (``legacy_service_account_secret``); delete it to refuse them

The kubeconfig carries ``ca.crt`` as ``certificate-authority-data``. Keys are
ECDSA P-256: cheap handshakes, and accepted by Go, Python and OpenSSL clients.
``cryptography`` is imported only here, so a server started without TLS, or
with its own certificate, does not pay for it.
"""

from __future__ import annotations

import datetime
import fcntl
import ipaddress
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .files import write_private

__all__ = ["SA_KEY", "SA_LEGACY_SECRET", "SA_PUB", "ServingPki", "ensure_serving_pki", "ensure_service_account_key",
           "legacy_service_account_secret", "serving_names"]

log = logging.getLogger(__name__)

CA_DAYS = 3650
SERVING_DAYS = 365
RENEW_BEFORE = datetime.timedelta(days=30)
SA_KEY, SA_PUB = "sa.key", "sa.pub"
SA_LEGACY_SECRET = "sa-hs256.key"  # the HMAC secret of the versions before RS256
LEGACY_SECRET_BYTES = 32
SA_KEY_BITS = 2048
SERVICE_NAMES = ("localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
                 "kubernetes.default.svc.cluster.local")


@dataclass(frozen=True, slots=True)
class ServingPki:
    ca_file: Path
    cert_file: Path
    key_file: Path


def serving_names(host: str, extra: Sequence[str] = ()) -> tuple[list[str], list[str]]:
    """The DNS names and IP addresses the serving certificate must cover for ``--host``
    and the ``--tls-san`` names ``extra`` (a wildcard address covers no name of its own)."""
    dns, ips = list(SERVICE_NAMES), ["127.0.0.1", "::1"]
    wanted = [host] if host and host not in ("0.0.0.0", "::") else []
    for name in [*wanted, *extra]:
        try:
            ip = str(ipaddress.ip_address(name))
            if ip not in ips:
                ips.append(ip)
        except ValueError:
            if name not in dns:
                dns.append(name)
    return dns, ips


def ensure_serving_pki(directory: Path, host: str, extra_names: Sequence[str] = ()) -> ServingPki:
    """The CA and serving certificate in ``directory``, made or renewed as needed.

    Servers sharing a state directory may start together: the work is done
    under an exclusive lock on ``directory/.lock``, so they agree on one CA. They
    should be given the same ``host`` and ``extra_names``: a certificate that does
    not cover a server's names is issued again, for its names alone."""
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / ".lock", "a+b") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _ensure_locked(directory, host, extra_names)


def ensure_service_account_key(directory: Path) -> Path:
    """``directory/sa.key``, the service account signing key, made (with ``sa.pub``) if absent.

    Every server process of one state directory signs with it and accepts what the others
    signed; they may start together, so it is made under the lock the CA is. The secret of an
    earlier version (32 random bytes, HMAC) found there is moved to ``sa-hs256.key``, where it
    still verifies the tokens it signed (``legacy_service_account_secret``), and said so in
    the log; anything else that is no PEM key is replaced, and said so."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / SA_KEY
    if _is_pem(path):
        return path
    with open(directory / ".lock", "a+b") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not _is_pem(path):
            _retire(path, directory / SA_LEGACY_SECRET)
            _write_service_account_key(directory)
    return path


def legacy_service_account_secret(directory: Path) -> tuple[Path, bytes] | None:
    """(its file, the secret): the HMAC secret an earlier version signed service account tokens
    with, if the state directory keeps it: ``sa-hs256.key``, or ``sa.key`` not yet replaced (a
    server given ``--service-account-signing-key-file`` never replaces it)."""
    for path in (directory / SA_LEGACY_SECRET, directory / SA_KEY):
        try:
            data = path.read_bytes()
        except OSError:
            continue
        if len(data) == LEGACY_SECRET_BYTES and not data.startswith(b"-----BEGIN"):
            return path, data
    return None


def _is_pem(path: Path) -> bool:
    try:
        return path.read_bytes().startswith(b"-----BEGIN")
    except FileNotFoundError:
        return False


def _retire(path: Path, legacy: Path) -> None:
    """Move an earlier version's HMAC secret out of the signing key's way (the lock held)."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return
    if size == LEGACY_SECRET_BYTES:
        os.replace(path, legacy)
        log.warning("%s is the HS256 secret of an earlier version: moved to %s, which still verifies the "
                    "service account tokens it signed until they expire (delete it to refuse them); new "
                    "tokens are signed RS256 with a new %s", path, legacy, path.name)
    else:
        log.warning("%s is no PEM key (%d bytes): replaced by a new RSA key; the tokens it signed, if any, "
                    "no longer authenticate", path, size)


def _write_service_account_key(directory: Path) -> None:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=SA_KEY_BITS)
    pem = serialization.Encoding.PEM
    write_private(directory / SA_PUB, key.public_key().public_bytes(
        pem, serialization.PublicFormat.SubjectPublicKeyInfo))
    write_private(directory / SA_KEY, key.private_bytes(pem, serialization.PrivateFormat.TraditionalOpenSSL,
                                                        serialization.NoEncryption()))


def _ensure_locked(directory: Path, host: str, extra_names: Sequence[str]) -> ServingPki:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    pki = ServingPki(directory / "ca.crt", directory / "apiserver.crt", directory / "apiserver.key")
    ca_key_file = directory / "ca.key"
    now = datetime.datetime.now(datetime.UTC)
    pem = serialization.Encoding.PEM

    def write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
        write_private(path, key.private_bytes(pem, serialization.PrivateFormat.PKCS8,
                                              serialization.NoEncryption()))

    if pki.ca_file.exists() and ca_key_file.exists():
        ca_cert = x509.load_pem_x509_certificate(pki.ca_file.read_bytes())
        loaded = serialization.load_pem_private_key(ca_key_file.read_bytes(), password=None)
        if not isinstance(loaded, ec.EllipticCurvePrivateKey):
            raise ValueError(f"{ca_key_file}: not an ECDSA key")
        ca_key = loaded
    else:
        ca_key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "controlplane-ca")])
        ca_cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
                   .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(minutes=5))
                   .not_valid_after(now + datetime.timedelta(days=CA_DAYS))
                   .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
                   .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                                content_commitment=False, key_encipherment=False,
                                                data_encipherment=False, key_agreement=False,
                                                encipher_only=False, decipher_only=False), critical=True)
                   .sign(ca_key, hashes.SHA256()))
        write_key(ca_key_file, ca_key)
        write_private(pki.ca_file, ca_cert.public_bytes(pem))
        pki.cert_file.unlink(missing_ok=True)  # signed by the old CA, if any

    dns, ips = serving_names(host, extra_names)
    if pki.cert_file.exists() and pki.key_file.exists():
        cert = x509.load_pem_x509_certificate(pki.cert_file.read_bytes())
        try:
            san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
            covered = (set(dns) <= set(san.get_values_for_type(x509.DNSName))
                       and {ipaddress.ip_address(i) for i in ips} <= set(san.get_values_for_type(x509.IPAddress)))
        except x509.ExtensionNotFound:
            covered = False
        if covered and cert.issuer == ca_cert.subject and cert.not_valid_after_utc - now > RENEW_BEFORE:
            return pki

    key = ec.generate_private_key(ec.SECP256R1())
    alt_names: list[x509.GeneralName] = [x509.DNSName(d) for d in dns]
    alt_names += [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]))
            .issuer_name(ca_cert.subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=SERVING_DAYS))
            .add_extension(x509.SubjectAlternativeName(alt_names), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    write_key(pki.key_file, key)
    write_private(pki.cert_file, cert.public_bytes(pem))
    return pki
