"""The CSR signer (controllers/certificates.py): what each built-in signer refuses to sign, in
upstream's words (signer.go, ValidateKubeletClientCSR, ValidateKubeletServingCSR), as the
``Failed`` condition it sets, and a request that fits signed."""

from __future__ import annotations

import asyncio
import base64
import datetime
import ipaddress
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from controlplane.api.app import create_app
from controlplane.client import ApiError, Client
from controlplane.config import Config
from controlplane.controllers.certificates import CsrSigner, refusal
from tests.controllers.helpers import until

CSRS = "/apis/certificates.k8s.io/v1/certificatesigningrequests"
KUBELET_CLIENT = "kubernetes.io/kube-apiserver-client-kubelet"
KUBELET_SERVING = "kubernetes.io/kubelet-serving"
KEY = ec.generate_private_key(ec.SECP256R1())


def request(cn: str = "system:node:n1", orgs: tuple[str, ...] = ("system:nodes",),
            names: tuple[x509.GeneralName, ...] = ()) -> x509.CertificateSigningRequest:
    attributes = [x509.NameAttribute(NameOID.COMMON_NAME, cn),
                  *(x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in orgs)]
    builder = x509.CertificateSigningRequestBuilder().subject_name(x509.Name(attributes))
    if names:
        builder = builder.add_extension(x509.SubjectAlternativeName(list(names)), critical=False)
    return builder.sign(KEY, hashes.SHA256())


DNS = x509.DNSName("n1.example.com")
IP = x509.IPAddress(ipaddress.ip_address("10.0.0.1"))
EMAIL = x509.RFC822Name("n1@example.com")
URI = x509.UniformResourceIdentifier("spiffe://n1")
CLIENT_USAGES = ["digital signature", "client auth"]
SERVING_USAGES = ["digital signature", "key encipherment", "server auth"]


@pytest.mark.parametrize(("signer", "req", "usages", "why"), [
    (KUBELET_CLIENT, request(), CLIENT_USAGES, ""),
    (KUBELET_CLIENT, request(), [*CLIENT_USAGES, "key encipherment"], ""),
    (KUBELET_CLIENT, request(orgs=("system:nodes", "devs")), CLIENT_USAGES, "subject organization is not system:nodes"),
    (KUBELET_CLIENT, request(orgs=()), CLIENT_USAGES, "subject organization is not system:nodes"),
    (KUBELET_CLIENT, request(names=(DNS,)), CLIENT_USAGES, "DNS subjectAltNames are not allowed"),
    (KUBELET_CLIENT, request(names=(EMAIL,)), CLIENT_USAGES, "Email subjectAltNames are not allowed"),
    (KUBELET_CLIENT, request(names=(IP,)), CLIENT_USAGES, "IP subjectAltNames are not allowed"),
    (KUBELET_CLIENT, request(names=(URI,)), CLIENT_USAGES, "URI subjectAltNames are not allowed"),
    (KUBELET_CLIENT, request(cn="jane"), ["client auth"],  # the name is checked before the usages
     "subject common name does not begin with system:node:"),
    (KUBELET_CLIENT, request(), ["client auth"],
     "usages did not match [client auth digital signature key encipherment]"),
    (KUBELET_SERVING, request(names=(DNS, IP)), SERVING_USAGES, ""),
    (KUBELET_SERVING, request(names=(IP,)), ["digital signature", "server auth"], ""),
    (KUBELET_SERVING, request(), SERVING_USAGES, "DNS or IP subjectAltName is required"),
    (KUBELET_SERVING, request(names=(DNS, EMAIL)), SERVING_USAGES, "Email subjectAltNames are not allowed"),
    (KUBELET_SERVING, request(names=(DNS, URI)), SERVING_USAGES, "URI subjectAltNames are not allowed"),
    (KUBELET_SERVING, request(cn="jane", names=(DNS,)), ["server auth"],  # the usages before the name
     "usages did not match [digital signature key encipherment server auth]"),
    (KUBELET_SERVING, request(cn="jane", names=(DNS,)), SERVING_USAGES,
     "subject common name does not begin with system:node:"),
])
def test_the_kubelet_signers_refuse_as_upstreams(signer: str, req: Any, usages: list[str], why: str) -> None:
    assert refusal(signer, req, usages) == why


def _ca() -> tuple[x509.Certificate, Any]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test-ca")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(1).not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
            .sign(key, hashes.SHA256()))
    return cert, key


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[Client]:
    app = create_app(Config(data_dir=tmp_path / "data", tls=False, scheduler=False))
    async with app.router.lifespan_context(app):
        c = Client.in_process(app.state.front)
        task = asyncio.create_task(CsrSigner(c, *_ca()).run())
        try:
            yield c
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


async def _approved(client: Client, name: str, req: x509.CertificateSigningRequest, usages: list[str]) -> None:
    pem = base64.b64encode(req.public_bytes(serialization.Encoding.PEM)).decode()
    made = await client.create(CSRS, {"metadata": {"name": name}, "spec": {
        "request": pem, "signerName": KUBELET_CLIENT, "usages": usages}})
    await client.update(f"{CSRS}/{name}/approval", {**made, "status": {"conditions": [
        {"type": "Approved", "status": "True", "reason": "AutoApproved", "message": "ok"}]}})


async def test_an_approved_kubelet_request_that_does_not_fit_is_failed_and_one_that_does_issued(
        client: Client) -> None:
    await _approved(client, "intruder", request(orgs=("system:masters",)), CLIENT_USAGES)
    await _approved(client, "n1", request(), CLIENT_USAGES)

    async def settled(name: str) -> dict[str, Any] | None:
        got = await client.get(f"{CSRS}/{name}")
        status = got.get("status") or {}
        return status if status.get("certificate") or len(status.get("conditions") or ()) > 1 else None

    failed = await until(lambda: settled("intruder"))
    assert "certificate" not in failed
    [condition] = [c for c in failed["conditions"] if c["type"] == "Failed"]
    assert (condition["status"], condition["reason"], condition["message"]) == \
        ("True", "SignerValidationFailure", "subject organization is not system:nodes")
    issued = await until(lambda: settled("n1"))
    cert = x509.load_pem_x509_certificate(base64.b64decode(issued["certificate"]))
    assert cert.subject.rfc4514_string() == "O=system:nodes,CN=system:node:n1"


TOKENS = ('admin-token,admin,1,"system:masters"\nboot-token,system:bootstrap:abc,2,"system:bootstrappers"\n'
          'n2-token,system:node:n2,3,"system:nodes"\nmallory-token,mallory,4\n')
RBAC = "/apis/rbac.authorization.k8s.io/v1"


@pytest.fixture
async def rbac_front(tmp_path: Path) -> AsyncIterator[Any]:
    """An RBAC server whose kubelet requestors may ask for client certificates as upstream's
    bootstrap (kubeadm binds the same roles), with the approver running as the admin."""
    from controlplane.controllers.csrapproving import CsrApprover

    tokens = tmp_path / "tokens.csv"
    tokens.write_text(TOKENS)
    app = create_app(Config(data_dir=tmp_path / "data", tls=False, scheduler=False, token_auth_file=tokens,
                            authorization_mode="RBAC", kubeconfig_out=tmp_path / "kubeconfig"))
    async with app.router.lifespan_context(app), Client.in_process(app.state.front, token="admin-token") as admin:
        groups = [{"kind": "Group", "name": g}
                    for g in ("system:bootstrappers", "system:nodes", "system:authenticated")]
        for name, role, subjects in (
                ("boot", "system:certificates.k8s.io:certificatesigningrequests:nodeclient", groups[:1]),
                ("nodes", "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient", groups[1:2]),
                ("request", "system:node-bootstrapper", groups[2:])):
            await admin.create(f"{RBAC}/clusterrolebindings", {
                "metadata": {"name": name}, "subjects": subjects,
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role}})
        task = asyncio.create_task(CsrApprover(admin).run())
        try:
            yield app.state.front
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


async def _requested(front: Any, token: str, name: str, req: x509.CertificateSigningRequest,
                     usages: list[str]) -> None:
    pem = base64.b64encode(req.public_bytes(serialization.Encoding.PEM)).decode()
    body = {"metadata": {"name": name}, "spec": {"request": pem, "signerName": KUBELET_CLIENT, "usages": usages}}
    async with Client.in_process(front, token=token) as c:
        for _ in range(100):  # until the bindings just written have reached the authorizer's cache
            try:
                await c.create(CSRS, body)
                return
            except ApiError as e:
                if e.code != 403:
                    raise
                await asyncio.sleep(0.02)
        await c.create(CSRS, body)


async def test_kubelet_client_requests_are_approved_for_requestors_who_may_ask(rbac_front: Any) -> None:
    """csrapproving as upstream's sarApprover: selfnodeclient for a node's own name, nodeclient
    for a bootstrap token; nothing for a requestor without either, or a request that is not a
    kubelet client's."""
    await _requested(rbac_front, "boot-token", "boot", request(cn="system:node:n1"), CLIENT_USAGES)
    await _requested(rbac_front, "n2-token", "self", request(cn="system:node:n2"), CLIENT_USAGES)
    await _requested(rbac_front, "n2-token", "other-node", request(cn="system:node:n3"), CLIENT_USAGES)
    await _requested(rbac_front, "mallory-token", "mallory", request(cn="system:node:n1"), CLIENT_USAGES)
    await _requested(rbac_front, "boot-token", "misshapen", request(cn="system:node:n1", orgs=("devs",)),
                     CLIENT_USAGES)
    async with Client.in_process(rbac_front, token="admin-token") as admin:
        async def conditions(name: str) -> list[dict[str, Any]]:
            return list(((await admin.get(f"{CSRS}/{name}")).get("status") or {}).get("conditions") or ())

        boot = await until(lambda: conditions("boot"))
        assert [(c["type"], c["reason"], c["message"]) for c in boot] == [
            ("Approved", "AutoApproved", "Auto approving kubelet client certificate after SubjectAccessReview.")]
        own = await until(lambda: conditions("self"))
        assert own[0]["message"] == "Auto approving self kubelet client certificate after SubjectAccessReview."
        await _requested(rbac_front, "boot-token", "last", request(cn="system:node:n9"), CLIENT_USAGES)
        await until(lambda: conditions("last"))  # the approver has handled the ones before it
        for name in ("other-node", "mallory", "misshapen"):  # not its own name, no grant, not a kubelet's
            assert await conditions(name) == [], name


def _issued(not_after: datetime.datetime) -> str:
    cert_key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "x")])
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(cert_key.public_key())
            .serial_number(1).not_valid_before(not_after - datetime.timedelta(days=1)).not_valid_after(not_after)
            .sign(cert_key, hashes.SHA256()))
    return base64.b64encode(cert.public_bytes(serialization.Encoding.PEM)).decode()


NOW = datetime.datetime(2026, 6, 1, 12, 0, tzinfo=datetime.UTC)


def _at(delta: datetime.timedelta) -> str:
    return (NOW - delta).strftime("%Y-%m-%dT%H:%M:%SZ")


def _condition(kind: str, ago: datetime.timedelta) -> dict[str, Any]:
    return {"type": kind, "status": "True", "lastUpdateTime": _at(ago)}


HOUR, MINUTE = datetime.timedelta(hours=1), datetime.timedelta(minutes=1)
VALID = _issued(NOW + HOUR)


@pytest.mark.parametrize(("created", "status", "gone"), [
    (2 * HOUR, {"conditions": [_condition("Approved", 61 * MINUTE)], "certificate": VALID}, True),
    (2 * HOUR, {"conditions": [_condition("Approved", 59 * MINUTE)], "certificate": VALID}, False),
    (2 * HOUR, {"conditions": [_condition("Approved", 61 * MINUTE)]}, False),  # approved, not issued: waits
    (2 * HOUR, {"conditions": [_condition("Approved", MINUTE)], "certificate": _issued(NOW - MINUTE)}, True),
    (2 * HOUR, {"conditions": [_condition("Denied", 61 * MINUTE)]}, True),
    (2 * HOUR, {"conditions": [_condition("Denied", 59 * MINUTE)]}, False),
    (2 * HOUR, {"conditions": [_condition("Approved", MINUTE), _condition("Failed", 61 * MINUTE)]}, True),
    (25 * HOUR, {}, True),
    (23 * HOUR, {}, False),
])
def test_the_cleaner_deletes_what_upstreams_does(created: datetime.timedelta, status: dict[str, Any],
                                                 gone: bool) -> None:
    from controlplane.controllers.csrcleaner import expired

    assert expired({"metadata": {"name": "x", "creationTimestamp": _at(created)}, "status": status}, NOW) is gone


async def test_a_sweep_deletes_the_old_requests(client: Client) -> None:
    from controlplane.controllers.csrcleaner import CsrCleaner

    pem = base64.b64encode(request().public_bytes(serialization.Encoding.PEM)).decode()
    for name in ("old", "new"):
        await client.create(CSRS, {"metadata": {"name": name}, "spec": {
            "request": pem, "signerName": "example.com/x", "usages": ["client auth"]}})
    made = await client.get(f"{CSRS}/old")
    long_ago = (datetime.datetime.now(datetime.UTC) - 2 * HOUR).strftime("%Y-%m-%dT%H:%M:%SZ")
    await client.update(f"{CSRS}/old/approval", {**made, "status": {"conditions": [
        {"type": "Denied", "status": "True", "reason": "No", "lastUpdateTime": long_ago}]}})
    cleaner = CsrCleaner(client, interval=0.05)
    task = asyncio.create_task(cleaner.run())
    try:
        async def names() -> list[str] | None:
            left = [c["metadata"]["name"] for c in (await client.get(CSRS))["items"]]
            return left if left == ["new"] else None
        assert await until(names) == ["new"]
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_failed_sweep_does_not_end_the_cleaner(client: Client) -> None:
    from controlplane.controllers.csrcleaner import CsrCleaner

    pem = base64.b64encode(request().public_bytes(serialization.Encoding.PEM)).decode()
    await client.create(CSRS, {"metadata": {"name": "old", "creationTimestamp": "2020-01-01T00:00:00Z"}, "spec": {
        "request": pem, "signerName": "example.com/x", "usages": ["client auth"]}})
    made = await client.get(f"{CSRS}/old")
    await client.update(f"{CSRS}/old/approval", {**made, "status": {"conditions": [
        {"type": "Denied", "status": "True", "reason": "No", "lastUpdateTime": "2020-01-01T00:00:00Z"}]}})
    cleaner = CsrCleaner(client, interval=0.05)
    real_delete, failures = client.delete, list[str]()

    class Flaky:  # the first delete times out, as a client under load may
        def __getattr__(self, name: str) -> Any:
            return getattr(client, name)

        async def delete(self, path: str, **kwargs: Any) -> Any:
            if not failures:
                failures.append(path)
                raise TimeoutError(path)
            return await real_delete(path, **kwargs)

    cleaner.client = Flaky()  # type: ignore[assignment]
    task = asyncio.create_task(cleaner.run())
    try:
        async def gone() -> bool:
            return not (await client.get(CSRS))["items"]
        assert await until(gone)
        assert failures == [f"{CSRS}/old"]
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_kubelet_request_is_approved_once_its_requestor_is_granted_after_it(rbac_front: Any) -> None:
    """As upstream's approver requeues a recognized request the review did not allow: a
    requestor bound to the nodeclient role after its request still gets it approved."""
    await _requested(rbac_front, "mallory-token", "late", request(cn="system:node:n7"), CLIENT_USAGES)
    async with Client.in_process(rbac_front, token="admin-token") as admin:
        async def conditions() -> list[dict[str, Any]]:
            return list(((await admin.get(f"{CSRS}/late")).get("status") or {}).get("conditions") or ())

        await asyncio.sleep(0.2)  # the approver has asked once and been refused
        assert await conditions() == []
        await admin.create(f"{RBAC}/clusterrolebindings", {
            "metadata": {"name": "mallory"}, "subjects": [{"kind": "User", "name": "mallory"}],
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": "system:certificates.k8s.io:certificatesigningrequests:nodeclient"}})
        approved = await until(conditions, timeout=10.0)
        assert [(c["type"], c["reason"]) for c in approved] == [("Approved", "AutoApproved")]
