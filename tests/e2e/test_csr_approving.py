"""``serve --authorization-mode RBAC`` with its controllers, over a socket: kube-controller-manager's
csrapproving approves a kubelet's client request once its requestor may ask for one, also when the
grant is bound after the request (upstream's approver asks again, rate-limited)."""

from __future__ import annotations

import base64
import time
from collections.abc import Iterator

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.e2e.test_rbac import RBAC, as_user, wait_status
from tests.test_cli import Serve, running, start_serve

TOKENS = 'admin-token,admin,1,"system:masters"\nkubelet-token,kubelet-boot,2\n'
CSRS = "/apis/certificates.k8s.io/v1/certificatesigningrequests"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    tmp = tmp_path_factory.mktemp("csrapproving")
    tokens = tmp / "tokens.csv"
    tokens.write_text(TOKENS)
    extra = ("--token-auth-file", str(tokens), "--authorization-mode", "RBAC")
    with running(start_serve(tmp, scheduler=True, extra=extra)) as s:
        yield s


def _kubelet_request() -> str:
    subject = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "system:nodes"),
                         x509.NameAttribute(NameOID.COMMON_NAME, "system:node:late")])
    csr = x509.CertificateSigningRequestBuilder().subject_name(subject).sign(
        ec.generate_private_key(ec.SECP256R1()), hashes.SHA256())
    return base64.b64encode(csr.public_bytes(serialization.Encoding.PEM)).decode()


def _bind(admin: httpx.Client, name: str, role: str) -> None:
    r = admin.post(f"{RBAC}/clusterrolebindings", json={
        "metadata": {"name": name}, "subjects": [{"kind": "User", "name": "kubelet-boot"}],
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role}})
    assert r.status_code == 201, r.text


def test_a_kubelet_request_is_approved_once_its_requestor_is_granted_nodeclient(served: Serve) -> None:
    with as_user(served, "admin-token") as admin, as_user(served, "kubelet-token") as kubelet:
        _bind(admin, "kubelet-boot-request", "system:node-bootstrapper")
        body = {"metadata": {"name": "late"}, "spec": {
            "request": _kubelet_request(), "signerName": "kubernetes.io/kube-apiserver-client-kubelet",
            "usages": ["digital signature", "client auth"]}}
        created = wait_status(lambda: kubelet.post(CSRS, json=body), 201)
        assert created.status_code == 201, created.text

        def conditions() -> list[dict[str, object]]:
            return list((admin.get(f"{CSRS}/late").json().get("status") or {}).get("conditions") or ())

        time.sleep(0.5)  # the approver has asked about it: not allowed yet
        assert conditions() == []
        _bind(admin, "kubelet-boot-nodeclient", "system:certificates.k8s.io:certificatesigningrequests:nodeclient")
        deadline = time.monotonic() + 15
        while not (found := conditions()):
            assert time.monotonic() < deadline, "never approved"
            time.sleep(0.1)
        assert [(c["type"], c["reason"]) for c in found] == [("Approved", "AutoApproved")]
