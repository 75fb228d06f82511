"""PodCertificateRequests' strategy and validation (registry/podcertificates.py), case by case:
a valid request, each bad spec field in upstream's words, the spec immutable, and the status
rules (terminal conditions, the issued chain and its times)."""

from __future__ import annotations

import base64
import copy
import datetime
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from cryptography.x509.oid import NameOID

from controlplane.registry.podcertificates import go_duration, go_time, prepare_pod_certificate_request
from controlplane.registry.strategies import prepare

NOW = datetime.datetime(2026, 12, 6, 12, 0, 0, tzinfo=datetime.UTC)
Key = Any


def stub_request(key: Key, subject: x509.Name | None = None) -> str:
    """The base64 of a PKCS#10 request as a kubelet makes it: empty, signed by ``key``."""
    algorithm = None if isinstance(key, ed25519.Ed25519PrivateKey) else hashes.SHA256()
    csr = x509.CertificateSigningRequestBuilder().subject_name(subject or x509.Name([])).sign(key, algorithm)
    return base64.b64encode(csr.public_bytes(serialization.Encoding.DER)).decode()


KEY = ec.generate_private_key(ec.SECP256R1())


def request(**spec: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "signerName": "example.com/signer", "podName": "app", "podUID": "pod-uid", "serviceAccountName": "default",
        "serviceAccountUID": "sa-uid", "nodeName": "node-1", "nodeUID": "node-uid",
        "stubPKCS10Request": stub_request(KEY)}
    fields.update(spec)
    return {"apiVersion": "certificates.k8s.io/v1", "kind": "PodCertificateRequest",
            "metadata": {"name": "req", "namespace": "default"},
            "spec": {k: v for k, v in fields.items() if v is not None}, "status": {}}


def messages(causes: list[dict[str, str]]) -> list[str]:
    return [f"{c['field']}: {c['message']}" for c in causes]


def test_a_valid_request_is_defaulted_and_passes() -> None:
    pcr = request()
    assert prepare("podcertificaterequests", pcr, None) == []
    assert pcr["spec"]["maxExpirationSeconds"] == 86400


@pytest.mark.parametrize("key", [
    ed25519.Ed25519PrivateKey.generate(), ec.generate_private_key(ec.SECP384R1()),
    ec.generate_private_key(ec.SECP521R1()), rsa.generate_private_key(65537, 3072)])
def test_each_supported_key_type_passes(key: Key) -> None:
    assert prepare_pod_certificate_request(request(stubPKCS10Request=stub_request(key)), None) == []


@pytest.mark.parametrize(("spec", "error"), [
    ({"signerName": ""}, "spec.signerName: Required value"),
    ({"signerName": "foo"}, "spec.signerName: Invalid value: \"foo\": must be a fully qualified domain and path of "
     "the form 'example.com/signer-name'"),
    ({"podName": "App"}, 'spec.podName: Invalid value: "App": a lowercase RFC 1123 subdomain must consist of lower '
     "case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. "
     "'example.com', regex used for validation is "
     "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"),
    ({"podUID": ""}, 'spec.podUID: Invalid value: "": must not be empty'),
    ({"serviceAccountUID": "u" * 129}, "spec.serviceAccountUID: Too long: may not be more than 128 bytes"),
    ({"nodeUID": None}, 'spec.nodeUID: Invalid value: "": must not be empty'),
    ({"maxExpirationSeconds": 100}, "spec.maxExpirationSeconds: Invalid value: 100: must be in the range "
     "[3600, 7862400]"),
    ({"maxExpirationSeconds": 86401, "signerName": "kubernetes.io/kube-apiserver-client-pod"},
     "spec.maxExpirationSeconds: Invalid value: 86401: must be in the range [3600, 86400]"),
    ({"maxExpirationSeconds": 86401, "signerName": "sub.kubernetes.io/x"},
     "spec.maxExpirationSeconds: Invalid value: 86401: must be in the range [3600, 86400]"),
    ({"stubPKCS10Request": None}, "spec.stubPKCS10Request: Required value"),
    ({"stubPKCS10Request": base64.b64encode(b"not der").decode()},
     "spec.stubPKCS10Request: Invalid value: must be a DER-encoded PKCS#10 certificate signing request"),
    ({"stubPKCS10Request": base64.b64encode(b"x" * 10241).decode()},
     "spec.stubPKCS10Request: Too long: may not be more than 10240 bytes"),
    ({"stubPKCS10Request": stub_request(rsa.generate_private_key(65537, 2048))},
     'spec.stubPKCS10Request: Invalid value: "2048-bit modulus": RSA keys must have modulus size 3072 or 4096'),
    ({"stubPKCS10Request": stub_request(ec.generate_private_key(ec.SECP224R1()))},
     'spec.stubPKCS10Request: Invalid value: "curve P-224": elliptic public keys must use curve P256 or P384'),
    ({"stubPKCS10Request": stub_request(KEY, x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "x")]))},
     "spec.stubPKCS10Request: Invalid value: must be a stub request: no subject, no attributes and no extensions"),
    ({"unverifiedUserAnnotations": {"plain": "v"}},
     "spec.unverifiedUserAnnotations: Invalid value: \"plain\": must be domain-prefixed (e.g. 'example.com/key')"),
])
def test_each_bad_field_is_refused(spec: dict[str, Any], error: str) -> None:
    assert error in messages(prepare_pod_certificate_request(request(**spec), None))


def test_a_stub_request_whose_signature_fails_is_refused() -> None:
    raw = bytearray(base64.b64decode(request()["spec"]["stubPKCS10Request"]))
    raw[-5] ^= 0xFF  # inside the signature
    pcr = request(stubPKCS10Request=base64.b64encode(bytes(raw)).decode())
    assert messages(prepare_pod_certificate_request(pcr, None)) == [
        "spec.stubPKCS10Request: Invalid value: could not verify proof-of-possession signature"]


def test_the_spec_is_immutable_and_an_update_keeps_the_default() -> None:
    old = request()
    prepare_pod_certificate_request(old, None)
    same = copy.deepcopy(old)
    del same["spec"]["maxExpirationSeconds"]  # left out: defaulted as it is decoded, so unchanged
    assert prepare_pod_certificate_request(same, old) == []
    changed = copy.deepcopy(old)
    changed["spec"]["podName"] = "other"
    causes = prepare_pod_certificate_request(changed, old)
    assert len(causes) == 1 and causes[0]["field"] == "spec"
    assert causes[0]["message"].endswith(": field is immutable")


def _issued(key: Key, not_before: datetime.datetime, lifetime: datetime.timedelta,
            dns: list[str] | None = None) -> str:
    ca_key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "signer")])
    builder = x509.CertificateBuilder().subject_name(x509.Name([])).issuer_name(name).public_key(key.public_key()) \
        .serial_number(x509.random_serial_number()).not_valid_before(not_before) \
        .not_valid_after(not_before + lifetime)
    if dns:
        builder = builder.add_extension(x509.SubjectAlternativeName([x509.DNSName(d) for d in dns]), critical=False)
    return builder.sign(ca_key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM).decode()


def _stamp(moment: datetime.datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _status_write(old: dict[str, Any], status: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    new = copy.deepcopy(old)
    new["status"] = status
    return new, messages(prepare_pod_certificate_request(new, old, now=NOW))


def _stored() -> dict[str, Any]:
    pcr = request()
    assert prepare_pod_certificate_request(pcr, None) == []
    return pcr


def _issued_status(chain: str, not_before: datetime.datetime, not_after: datetime.datetime,
                   refresh: datetime.datetime) -> dict[str, Any]:
    return {"conditions": [{"type": "Issued", "status": "True", "reason": "Signed", "message": ""}],
            "certificateChain": chain, "notBefore": _stamp(not_before), "notAfter": _stamp(not_after),
            "beginRefreshAt": _stamp(refresh)}


def test_an_issued_status_is_taken_and_then_immutable() -> None:
    old = _stored()
    chain = _issued(KEY, NOW, datetime.timedelta(hours=24))
    new, errors = _status_write(old, _issued_status(chain, NOW, NOW + datetime.timedelta(hours=24),
                                                    NOW + datetime.timedelta(hours=12)))
    assert errors == []
    assert new["status"]["conditions"][0]["lastTransitionTime"]  # stamped
    later = copy.deepcopy(new["status"])
    later["beginRefreshAt"] = _stamp(NOW + datetime.timedelta(hours=13))
    assert _status_write(new, later)[1] == [
        "status: Invalid value: immutable after PodCertificateRequest is issued, denied, or failed"]


@pytest.mark.parametrize(("change", "error"), [
    ({"certificateChain": "nothing"}, 'status.certificateChain: Invalid value: "nothing": issued certificate chain '
     "must contain at least one certificate"),
    ({"notBefore": None}, "status.notBefore: Required value: must be present and consistent with the issued "
     "certificate"),
    ({"beginRefreshAt": None}, "status.beginRefreshAt: Required value: must be present and in the range "
     "[notbefore+10min, notafter-10min]"),
    ({"notBefore": _stamp(NOW + datetime.timedelta(seconds=1))},
     "status.notBefore: Invalid value: 2026-12-06 12:00:01 +0000 UTC: must be set to the NotBefore time encoded in "
     "the leaf certificate"),
    ({"notAfter": _stamp(NOW)}, "status.notAfter: Invalid value: 2026-12-06 12:00:00 +0000 UTC: must be set to the "
     "NotAfter time encoded in the leaf certificate"),
    ({"beginRefreshAt": _stamp(NOW + datetime.timedelta(minutes=5))},
     "status.beginRefreshAt: Invalid value: 2026-12-06 12:05:00 +0000 UTC: must be at least 10 minutes after "
     "status.notBefore"),
    ({"beginRefreshAt": _stamp(NOW + datetime.timedelta(hours=24))},
     "status.beginRefreshAt: Invalid value: 2026-12-07 12:00:00 +0000 UTC: must be at least 10 minutes before "
     "status.notAfter"),
    ({"conditions": [{"type": "Issued", "status": "False", "reason": "R", "message": ""}]},
     'status.conditions[0].status: Unsupported value: "False": supported values: "True"'),
    ({"conditions": [{"type": "Ready", "status": "True", "reason": "R", "message": ""}]},
     'status.conditions[0].type: Unsupported value: "Ready": supported values: "Issued", "Denied", "Failed"'),
    ({"conditions": [{"type": "Issued", "status": "True", "reason": "R"},
                     {"type": "Denied", "status": "True", "reason": "R"}]},
     'status.conditions[1].type: Invalid value: "Denied": There may be at most one condition with type "Issued", '
     '"Denied", or "Failed"'),
    ({"conditions": [{"type": "Issued", "status": "True"}]}, "status.conditions[0].reason: Required value: must be "
     "set"),
])
def test_a_bad_issued_status_is_refused(change: dict[str, Any], error: str) -> None:
    chain = _issued(KEY, NOW, datetime.timedelta(hours=24))
    status = _issued_status(chain, NOW, NOW + datetime.timedelta(hours=24), NOW + datetime.timedelta(hours=12))
    status.update(change)
    status = {k: v for k, v in status.items() if v is not None}
    assert error in _status_write(_stored(), status)[1]


def test_an_issued_chain_is_checked_against_the_key_the_lifetime_and_the_clock() -> None:
    other = ec.generate_private_key(ec.SECP256R1())
    day = datetime.timedelta(hours=24)
    errors = _status_write(_stored(), _issued_status(_issued(other, NOW, day), NOW, NOW + day,
                                                     NOW + day / 2))[1]
    assert len(errors) == 1 and errors[0].endswith("leaf certificate was not issued to the requested public key")
    short = datetime.timedelta(minutes=30)
    errors = _status_write(_stored(), _issued_status(_issued(KEY, NOW, short), NOW, NOW + short, NOW + short / 2))[1]
    assert errors == ["status.certificateChain: Invalid value: 30m0s: leaf certificate lifetime must be >= 1 hour"]
    long = datetime.timedelta(hours=25)
    errors = _status_write(_stored(), _issued_status(_issued(KEY, NOW, long), NOW, NOW + long, NOW + day / 2))[1]
    assert errors == ["status.certificateChain: Invalid value: 25h0m0s: leaf certificate lifetime must be <= "
                      "spec.maxExpirationSeconds (86400)"]
    early = NOW - datetime.timedelta(minutes=6)
    errors = _status_write(_stored(), _issued_status(_issued(KEY, early, day), early, early + day, NOW))[1]
    assert errors == ["status.notBefore: Invalid value: 2026-12-06 11:54:00 +0000 UTC: must be set to within 5 "
                      "minutes of kube-apiserver's current time"]
    errors = _status_write(_stored(), _issued_status(_issued(KEY, NOW, day, dns=["a..b"]), NOW, NOW + day,
                                                     NOW + day / 2))[1]
    assert errors == ["status.certificateChain: Invalid value: \"a..b\": leaf certificate's DNSName should not "
                      "contain '..'"]


def test_a_denial_carries_only_conditions_and_then_holds() -> None:
    denied = {"conditions": [{"type": "Denied", "status": "True", "reason": "UnsupportedKeyType",
                              "message": "use ED25519"}]}
    new, errors = _status_write(_stored(), denied)
    assert errors == []
    assert _status_write(new, {"conditions": []})[1] == [
        "status: Invalid value: immutable after PodCertificateRequest is issued, denied, or failed"]
    with_chain = {**denied, "certificateChain": "x"}
    assert _status_write(_stored(), with_chain)[1] == [
        "status: Invalid value: non-condition status fields must be empty when denying or failing the "
        "PodCertificateRequest"]


def test_a_pending_status_may_not_change_but_to_a_terminal_one() -> None:
    assert _status_write(_stored(), {"notBefore": _stamp(NOW)})[1] == [
        'status: Invalid value: status is immutable unless transitioning to "Issued", "Denied", or "Failed"']


def test_a_terminal_condition_keeps_its_stored_instance() -> None:
    new, errors = _status_write(_stored(), {"conditions": [{"type": "Failed", "status": "True", "reason": "Boom",
                                                            "message": "first"}]})
    assert errors == []
    stamped = new["status"]["conditions"][0]
    again = {"conditions": [{"type": "Failed", "status": "True", "reason": "Boom", "message": "rewritten"}]}
    kept, errors = _status_write(new, again)
    assert errors == [] and kept["status"]["conditions"] == [stamped]


def test_go_formats() -> None:
    assert go_time(NOW) == "2026-12-06 12:00:00 +0000 UTC"
    assert go_duration(datetime.timedelta(hours=1)) == "1h0m0s"
    assert go_duration(datetime.timedelta(seconds=59)) == "59s"


def test_a_chain_the_crypto_library_cannot_fully_read_is_a_422_not_an_error() -> None:
    """A leaf whose key is of an algorithm cryptography does not know (``UnsupportedAlgorithm``)
    or whose extensions repeat (``DuplicateExtension``) raised past the validation (a 500): Go
    parses the first key as none (not the requested one) and refuses the duplicates (no valid
    X.509). (A stub request with a repeated extension has attributes: no stub, as before.)"""
    day = datetime.timedelta(hours=24)
    chain = leaf_of_an_unknown_key_type(KEY, NOW, day)
    errors = _status_write(_stored(), _issued_status(chain, NOW, NOW + day, NOW + day / 2))[1]
    assert len(errors) == 1 and errors[0].endswith("leaf certificate was not issued to the requested public key")

    san = x509.SubjectAlternativeName([x509.DNSName("a.example")])
    twice = _duplicated(x509.CertificateBuilder().subject_name(x509.Name([])).issuer_name(x509.Name([]))
                        .public_key(KEY.public_key()).serial_number(1).not_valid_before(NOW)
                        .not_valid_after(NOW + day).add_extension(san, critical=False), san)
    der = twice.sign(KEY, hashes.SHA256()).public_bytes(serialization.Encoding.DER)
    errors = _status_write(_stored(), _issued_status(_pem(der), NOW, NOW + day, NOW + day / 2))[1]
    assert len(errors) == 1 and errors[0].endswith("leaf certificate does not parse as valid X.509"), errors

    stub = stub_with_a_repeated_extension(KEY)
    assert messages(prepare_pod_certificate_request(request(stubPKCS10Request=stub), None)) == [
        "spec.stubPKCS10Request: Invalid value: must be a stub request: no subject, no attributes and no extensions"]


def stub_with_a_repeated_extension(key: Key) -> str:
    """The base64 of a PKCS#10 request signed by ``key`` that has the same extension twice."""
    san = x509.SubjectAlternativeName([x509.DNSName("a.example")])
    builder = _duplicated(x509.CertificateSigningRequestBuilder().subject_name(x509.Name([]))
                          .add_extension(san, critical=False), san)
    return base64.b64encode(builder.sign(key, hashes.SHA256()).public_bytes(serialization.Encoding.DER)).decode()


def leaf_of_an_unknown_key_type(key: Key, not_before: datetime.datetime, lifetime: datetime.timedelta) -> str:
    """A PEM leaf for ``key`` (an EC key) whose key algorithm is an identifier nobody knows."""
    der = x509.load_pem_x509_certificate(_issued(key, not_before, lifetime).encode()).public_bytes(
        serialization.Encoding.DER)
    ec_key_oid = bytes.fromhex("06072a8648ce3d0201")  # id-ecPublicKey
    assert der.count(ec_key_oid) == 1
    return _pem(der.replace(ec_key_oid, bytes.fromhex("06072a8648ce3d0209")))


def _pem(der: bytes) -> str:
    body = base64.b64encode(der).decode()
    return "-----BEGIN CERTIFICATE-----\n" + "\n".join(body[i:i + 64] for i in range(0, len(body), 64)) + \
        "\n-----END CERTIFICATE-----\n"


def _duplicated(builder: Any, extension: x509.ExtensionType) -> Any:
    """``builder`` with ``extension`` a second time (the builders refuse to add it twice)."""
    return type(builder)(**{**_builder_fields(builder), "extensions": [
        *builder._extensions, x509.Extension(extension.oid, False, extension)]})


def _builder_fields(builder: Any) -> dict[str, Any]:
    if isinstance(builder, x509.CertificateSigningRequestBuilder):
        return {"subject_name": builder._subject_name, "attributes": builder._attributes}
    return {"issuer_name": builder._issuer_name, "subject_name": builder._subject_name,
            "public_key": builder._public_key, "serial_number": builder._serial_number,
            "not_valid_before": builder._not_valid_before, "not_valid_after": builder._not_valid_after}


def test_a_chain_of_begin_lines_without_an_end_has_no_certificate() -> None:
    """100 KiB of BEGIN lines and no END (registry/pem.py's one pass; the regular expression
    before took 5 s of the event loop's CPU over it)."""
    unended = "-----BEGIN A-----\n" * 5600
    errors = _status_write(_stored(), _issued_status(unended, NOW, NOW + datetime.timedelta(hours=2),
                                                     NOW + datetime.timedelta(hours=1)))[1]
    assert errors == ['status.certificateChain: Invalid value: "' + "-----BEGIN A-----\\n" * 5600 +
                      '": issued certificate chain must contain at least one certificate']
