"""Client certificates for the tests, signed by the tests' CA (tests/conftest.py's ``TEST_PKI``),
which a server started with ``--client-ca-file TEST_PKI/ca.crt`` trusts for clients, as a
kubeadm cluster's one CA signs its serving certificate and its admin's client certificate."""

from __future__ import annotations

import datetime
from pathlib import Path

__all__ = ["issue_client_cert"]


def issue_client_cert(directory: Path, common_name: str, organizations: tuple[str, ...] = (),
                      ca_dir: Path | None = None) -> tuple[Path, Path]:
    """(certificate file, key file) for ``common_name`` in ``organizations``, written into
    ``directory``; signed by the CA in ``ca_dir`` (the tests' CA by default), or self-signed
    when ``ca_dir`` holds none (a certificate no server trusts)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    from tests.conftest import TEST_PKI

    ca_dir = TEST_PKI if ca_dir is None else ca_dir
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([*(x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations),
                         x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    if (ca_dir / "ca.key").exists():
        ca_cert = x509.load_pem_x509_certificate((ca_dir / "ca.crt").read_bytes())
        signer = serialization.load_pem_private_key((ca_dir / "ca.key").read_bytes(), password=None)
        issuer = ca_cert.subject
    else:
        signer, issuer = key, subject
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
            .sign(signer, hashes.SHA256()))  # type: ignore[arg-type]
    directory.mkdir(parents=True, exist_ok=True)
    cert_file, key_file = directory / f"{common_name}.crt", directory / f"{common_name}.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_file, key_file
