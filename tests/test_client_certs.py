"""``serve --client-ca-file``: a client certificate the CA signed authenticates its subject
(kube-apiserver's x509 authenticator), over a real TLS socket."""

from __future__ import annotations

import os
import ssl
from pathlib import Path

import httpx
import pytest

from controlplane import cli
from controlplane.api.http1 import client_subject
from controlplane.config import Config
from tests.client_certs import issue_client_cert
from tests.test_cli import Serve

REVIEW = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
REVIEWS = "/apis/authentication.k8s.io/v1/selfsubjectreviews"


def presenting(cert: tuple[Path, Path]) -> ssl.SSLContext:
    """A client context that trusts the tests' CA (SSL_CERT_FILE) and presents ``cert``."""
    context = ssl.create_default_context(cafile=os.environ["SSL_CERT_FILE"])
    context.load_cert_chain(*cert)
    return context


def test_a_client_certificate_is_its_subject_s_user_before_any_token(cert_served: Serve, tmp_path: Path) -> None:
    cert = issue_client_cert(tmp_path, "kind-admin", ("system:masters", "ops"))
    with httpx.Client(verify=presenting(cert)) as client:
        r = client.post(cert_served.url + REVIEWS, json=REVIEW)
        assert r.status_code == 201, r.text
        assert r.json()["status"]["userInfo"] == {"username": "kind-admin",
                                                  "groups": ["system:masters", "ops", "system:authenticated"]}
        # x509 comes before the token authenticators: a stale token beside the certificate is not looked at
        r = client.post(cert_served.url + REVIEWS, json=REVIEW, headers={"authorization": "Bearer stale"})
        assert r.status_code == 201 and r.json()["status"]["userInfo"]["username"] == "kind-admin"
    # without one, the connection is still taken: its requests authenticate with tokens, or get 401
    assert httpx.post(cert_served.url + REVIEWS, json=REVIEW).status_code == 401


def test_a_certificate_the_client_ca_did_not_sign_fails_the_handshake(cert_served: Serve, tmp_path: Path) -> None:
    cert = issue_client_cert(tmp_path, "mallory", ("system:masters",), ca_dir=tmp_path / "no-ca")
    with pytest.raises(httpx.HTTPError):
        # TLS 1.3 reports the refused certificate after the handshake, on the first read
        httpx.post(cert_served.url + REVIEWS, json=REVIEW, verify=presenting(cert))


def _config(*argv: str) -> Config:
    parser = cli.build_parser()
    return cli._config_from_args(parser, parser.parse_args(["serve", *argv]))


def test_a_client_ca_file_is_checked_before_serving(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty.pem").write_text("")
    with pytest.raises(ValueError, match="holds no PEM certificate"):
        cli.prepare_tls(_config("--client-ca-file", str(tmp_path / "empty.pem")))
    with pytest.raises(ValueError, match="cannot read --client-ca-file"):
        cli.prepare_tls(_config("--client-ca-file", str(tmp_path / "missing.pem")))
    for contradicting in (("--no-tls",), ("--http-protocol", "uvicorn")):
        with pytest.raises(SystemExit):
            _config("--client-ca-file", str(tmp_path / "empty.pem"), *contradicting)
        assert "--client-ca-file" in capsys.readouterr().err


def test_a_peer_certificate_s_subject_is_a_user_and_groups() -> None:
    subject = ((("countryName", "US"),), (("organizationName", "a"),), (("organizationName", "b"),),
               (("commonName", "alice"),))
    assert client_subject({"subject": subject}) == ("alice", ("a", "b"))
    assert client_subject({}) is None and client_subject(None) is None
    assert client_subject({"subject": ((("organizationName", "a"),),)}) is None  # no CN: no user
    assert ssl.CERT_OPTIONAL  # the server asks for a certificate, it does not require one
