"""CertificateSigningRequests (registry/certificates.py): validated as upstream's, the
requestor written by the server, each update strategy changing only what it owns; and the
signer (controllers/certificates.py) issuing a certificate of the cluster CA."""

from __future__ import annotations

import asyncio
import base64
import datetime
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from controlplane.api.app import create_app
from controlplane.client import ApiError, Client
from controlplane.config import Config
from controlplane.controllers.certificates import refusal, sign

CSRS = "/apis/certificates.k8s.io/v1/certificatesigningrequests"


def request_pem(cn: str = "jane", org: str = "devs") -> str:
    key = ec.generate_private_key(ec.SECP256R1())
    csr = (x509.CertificateSigningRequestBuilder()
           .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn),
                                    x509.NameAttribute(NameOID.ORGANIZATION_NAME, org)]))
           .sign(key, hashes.SHA256()))
    return base64.b64encode(csr.public_bytes(serialization.Encoding.PEM)).decode()


def csr(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest", "metadata": {"name": name},
            "spec": {"request": request_pem(), "signerName": "kubernetes.io/kube-apiserver-client",
                     "usages": ["client auth"], **spec}}


APPROVED = {"type": "Approved", "status": "True", "reason": "KubectlApprove", "message": "ok"}


async def test_a_request_is_validated_and_its_requestor_is_the_servers_to_write(client: Client) -> None:
    cases: list[tuple[dict[str, Any], str, str]] = [
        ({"request": base64.b64encode(b"hi").decode()}, "spec.request",
         "Invalid value: []byte{0x68, 0x69}: PEM block type must be CERTIFICATE REQUEST"),
        ({"usages": []}, "spec.usages", "Required value"),
        ({"usages": ["client auth", "flying"]}, "spec.usages[1]", 'Unsupported value: "flying"'),
        ({"signerName": ""}, "spec.signerName", "Required value"),
        ({"signerName": "kubernetes.io/legacy-unknown"}, "spec.signerName",
         "the legacy signerName is not allowed via this API version"),
        ({"signerName": "no-slash"}, "spec.signerName", "must be a fully qualified domain and path"),
        ({"expirationSeconds": 599}, "spec.expirationSeconds",
         "Invalid value: 599: may not specify a duration less than 600 seconds (10 minutes)"),
    ]
    for spec, field, message in cases:
        with pytest.raises(ApiError) as e:
            await client.create(CSRS, csr("bad", **spec))
        assert e.value.code == 422, spec
        causes = e.value.status["details"]["causes"]
        assert any(c["field"] == field and message in c["message"] for c in causes), (spec, causes)
    # the requestor is whoever asks (no one, in this process): what the body says of it is dropped
    made = await client.create(CSRS, {**csr("jane", username="root", groups=["system:masters"]),
                                      "status": {"conditions": [APPROVED]}})
    assert "username" not in made["spec"] and "groups" not in made["spec"]
    assert made["status"] == {}  # an empty struct, as Go writes it: never missing, never approved


async def test_each_update_changes_only_what_its_strategy_owns(client: Client) -> None:
    made = await client.create(CSRS, csr("jane"))
    # the object itself: metadata only
    made["metadata"]["labels"] = {"team": "a"}
    made["spec"]["usages"] = ["server auth"]
    made["status"] = {"conditions": [APPROVED]}
    put = await client.update(f"{CSRS}/jane", made)
    assert put["metadata"]["labels"] == {"team": "a"} and put["spec"]["usages"] == ["client auth"]
    assert put["status"] == {}
    # /status may not approve
    put["status"] = {"conditions": [APPROVED], "certificate": base64.b64encode(b"x").decode()}
    status = await client.update(f"{CSRS}/jane/status", put)
    assert "conditions" not in status["status"]
    # /approval approves (times filled in), and keeps the certificate as it was
    approved = await client.update(f"{CSRS}/jane/approval", {**status, "status": {
        "conditions": [APPROVED], "certificate": base64.b64encode(b"y").decode()}})
    [condition] = approved["status"]["conditions"]
    assert condition["type"] == "Approved" and condition["lastUpdateTime"] and condition["lastTransitionTime"]
    assert approved["status"]["certificate"] == base64.b64encode(b"x").decode()
    [entry] = [e for e in approved["metadata"]["managedFields"] if e.get("subresource") == "approval"]
    assert list(entry["fieldsV1"]["f:status"]) == ["f:conditions"]  # the approver owns its condition
    for conditions, message in (([], 'updates may not remove a condition of type "Approved"'),
                                ([APPROVED, {**APPROVED, "type": "Denied"}],
                                 "Approved and Denied conditions are mutually exclusive")):
        with pytest.raises(ApiError) as e:
            await client.update(f"{CSRS}/jane/approval", {**approved, "status": {"conditions": conditions}})
        assert e.value.code == 422 and message in e.value.message
    with pytest.raises(ApiError) as e:
        await client.request("POST", f"{CSRS}/jane/approval", approved)
    assert e.value.code == 405


def test_the_signer_issues_the_request_with_its_usages_and_duration() -> None:
    ca_key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test-ca")])
    now = datetime.datetime.now(datetime.UTC).replace(microsecond=0)
    ca = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(ca_key.public_key())
          .serial_number(1).not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
          .sign(ca_key, hashes.SHA256()))
    pem = sign(csr("jane", expirationSeconds=3600), ca, ca_key, now)
    cert = x509.load_pem_x509_certificate(pem)
    assert cert.subject.rfc4514_string() == "O=devs,CN=jane" and cert.issuer == name
    assert cert.not_valid_after_utc - now == datetime.timedelta(hours=1)
    assert list(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value) == \
        [ExtendedKeyUsageOID.CLIENT_AUTH]
    cert.verify_directly_issued_by(ca)


def test_a_client_signers_refusal_names_the_usage_as_upstreams_signer() -> None:
    """kube-apiserver-client: the first usage it does not allow, or the missing ``client auth``,
    in upstream's words (validAPIServerClientUsages); none for a request it signs."""
    client = "kubernetes.io/kube-apiserver-client"
    request = None  # (this signer looks at the usages only)
    assert refusal(client, request, ["digital signature", "client auth", "server auth", "code signing"]) == \
        "invalid usage for client certificate: server auth"
    assert refusal(client, request, ["digital signature", "key encipherment"]) == \
        "missing required usage for client certificate: client auth"
    assert refusal(client, request, ["key encipherment", "client auth"]) == ""


async def test_a_client_request_of_the_masters_is_refused_as_upstreams_subject_restriction(client: Client) -> None:
    """CertificateSubjectRestriction: kube-apiserver-client with the organization system:masters
    is a 403 at create, whoever asks; another signer may carry it."""
    masters = csr("root", request=request_pem("root", "system:masters"))
    with pytest.raises(ApiError) as e:
        await client.create(CSRS, masters)
    assert e.value.code == 403 and e.value.status["reason"] == "Forbidden"
    assert e.value.message == ('certificatesigningrequests.certificates.k8s.io "root" is forbidden: use of '
                               "kubernetes.io/kube-apiserver-client signer with system:masters group is not allowed")
    assert e.value.status["details"] == {"name": "root", "group": "certificates.k8s.io",
                                         "kind": "certificatesigningrequests"}
    await client.create(CSRS, {**masters, "spec": {**masters["spec"], "signerName": "example.com/signer"}})


TOKENS = 'admin-token,admin,1,"system:masters"\nalice-token,alice,2\n'
RBAC = "/apis/rbac.authorization.k8s.io/v1"


@pytest.fixture
async def rbac_app(tmp_path: Path) -> AsyncIterator[Any]:
    tokens = tmp_path / "tokens.csv"
    tokens.write_text(TOKENS)
    app = create_app(Config(data_dir=tmp_path / "data", tls=False, scheduler=False, token_auth_file=tokens,
                            authorization_mode="RBAC", kubeconfig_out=tmp_path / "kubeconfig"))
    async with app.router.lifespan_context(app):
        yield app.state.front


async def _grant(admin: Client, name: str, rules: list[dict[str, Any]]) -> None:
    await admin.create(f"{RBAC}/clusterroles", {"metadata": {"name": name}, "rules": rules})
    await admin.create(f"{RBAC}/clusterrolebindings", {
        "metadata": {"name": name}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                                "name": name},
        "subjects": [{"kind": "User", "name": "alice", "apiGroup": "rbac.authorization.k8s.io"}]})


async def _refused(do: Any) -> ApiError:
    with pytest.raises(ApiError) as e:
        await do()
    return e.value


async def _until_allowed(do: Any) -> Any:
    """``do()`` until the authorizer has seen the binding just written (its cache, a moment later)."""
    for _ in range(100):
        try:
            return await do()
        except ApiError as e:
            if e.code != 403:
                raise
            await asyncio.sleep(0.02)
    return await do()


async def test_approving_needs_approve_on_the_signer_and_signing_sign(rbac_app: Any) -> None:
    """CertificateApproval and CertificateSigning: the subresource's RBAC rule lets the request
    in, then the user must also approve (sign) for the stored request's signer, by name or by
    its domain's wildcard, with upstream's 403; the masters may anyway."""
    async with Client.in_process(rbac_app, token="admin-token") as admin, \
            Client.in_process(rbac_app, token="alice-token") as alice:
        made = await admin.create(CSRS, csr("jane"))
        await _grant(admin, "csr-writer", [{"apiGroups": ["certificates.k8s.io"], "verbs": ["get", "update"],
                                            "resources": ["certificatesigningrequests",
                                                          "certificatesigningrequests/approval",
                                                          "certificatesigningrequests/status"]}])
        approved = {**made, "status": {"conditions": [APPROVED]}}
        await _until_allowed(lambda: alice.get(f"{CSRS}/jane"))
        e = await _refused(lambda: alice.update(f"{CSRS}/jane/approval", approved))
        assert e.code == 403 and e.message == (
            'certificatesigningrequests.certificates.k8s.io "jane" is forbidden: user not permitted to approve '
            'requests with signerName "kubernetes.io/kube-apiserver-client"')
        assert e.status["details"] == {"name": "jane", "group": "certificates.k8s.io",
                                       "kind": "certificatesigningrequests"}
        # the domain's wildcard, as upstream's second check, approves for every kubernetes.io signer
        await _grant(admin, "approver", [{"apiGroups": ["certificates.k8s.io"], "resources": ["signers"],
                                          "resourceNames": ["kubernetes.io/*"], "verbs": ["approve"]}])
        done = await _until_allowed(lambda: alice.update(f"{CSRS}/jane/approval", approved))
        assert [c["type"] for c in done["status"]["conditions"]] == ["Approved"]
        # approving is not signing: a certificate through /status needs sign
        signed = {**done, "status": {**done["status"], "certificate": base64.b64encode(b"pem").decode()}}
        e = await _refused(lambda: alice.update(f"{CSRS}/jane/status", signed))
        assert e.code == 403 and e.message.endswith(
            'user not permitted to sign requests with signerName "kubernetes.io/kube-apiserver-client"')
        unchanged = await alice.update(f"{CSRS}/jane/status", done)  # changes neither: nothing to sign
        assert "certificate" not in unchanged["status"]
        signed = {**unchanged, "status": {**unchanged["status"], "certificate": signed["status"]["certificate"]}}
        await _grant(admin, "signer", [{"apiGroups": ["certificates.k8s.io"], "resources": ["signers"],
                                        "resourceNames": ["kubernetes.io/kube-apiserver-client"], "verbs": ["sign"]}])
        issued = await _until_allowed(lambda: alice.update(f"{CSRS}/jane/status", signed))
        assert issued["status"]["certificate"] == signed["status"]["certificate"]
        # the signer the request names is the stored one's, whatever the write says
        other = await admin.create(CSRS, csr("other", signerName="example.com/x"))
        e = await _refused(lambda: alice.update(f"{CSRS}/other/approval", {
            **other, "spec": {**other["spec"], "signerName": "kubernetes.io/kube-apiserver-client"},
            "status": {"conditions": [APPROVED]}}))
        assert e.code == 403 and 'signerName "example.com/x"' in e.message
        assert (await admin.update(f"{CSRS}/other/approval", {**other, "status": {"conditions": [APPROVED]}}))


async def test_requests_are_listed_and_watched_by_their_signer(client: Client) -> None:
    """``spec.signerName`` is a field selector, as upstream's (certificates/v1 conversion.go):
    what a signer lists and watches its requests by; other fields are refused."""
    await client.create(CSRS, csr("a"))
    await client.create(CSRS, csr("b", signerName="example.com/x"))
    got = await client.list(CSRS, fieldSelector="spec.signerName=example.com/x")
    assert [i["metadata"]["name"] for i in got["items"]] == ["b"]
    got = await client.list(CSRS, fieldSelector="spec.signerName!=example.com/x,metadata.name!=c")
    assert [i["metadata"]["name"] for i in got["items"]] == ["a"]
    events = []
    async for event in client.watch(CSRS, field_selector="spec.signerName=example.com/x", timeout_seconds=1):
        events.append((event.type, event.object["metadata"]["name"]))
    assert events == [("ADDED", "b")]
    with pytest.raises(ApiError) as e:
        await client.list(CSRS, fieldSelector="spec.username=admin")
    assert e.value.code == 400 and e.value.message == "field label not supported: spec.username"
