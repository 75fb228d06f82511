"""The generated CA and serving certificate (controlplane.pki)."""

from __future__ import annotations

from pathlib import Path

from cryptography import x509

from controlplane.pki import ensure_serving_pki


def sans(path: Path) -> tuple[set[str], set[str]]:
    cert = x509.load_pem_x509_certificate(path.read_bytes())
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return set(san.get_values_for_type(x509.DNSName)), {str(i) for i in san.get_values_for_type(x509.IPAddress)}


def test_the_ca_is_kept_and_the_certificate_follows_the_host(tmp_path: Path) -> None:
    first = ensure_serving_pki(tmp_path, "127.0.0.1")
    ca, cert = first.ca_file.read_bytes(), first.cert_file.read_bytes()
    dns, ips = sans(first.cert_file)
    assert {"localhost", "kubernetes.default.svc"} <= dns and {"127.0.0.1", "::1"} <= ips
    assert (first.key_file.stat().st_mode & 0o777) == 0o600
    again = ensure_serving_pki(tmp_path, "127.0.0.1")
    assert again.cert_file.read_bytes() == cert  # still good: reused
    other = ensure_serving_pki(tmp_path, "10.9.8.7")
    assert other.ca_file.read_bytes() == ca  # kubeconfigs written earlier stay valid
    assert "10.9.8.7" in sans(other.cert_file)[1]
    issued = x509.load_pem_x509_certificate(other.cert_file.read_bytes())
    authority = x509.load_pem_x509_certificate(ca)
    assert issued.issuer == authority.subject
    issued.verify_directly_issued_by(authority)
