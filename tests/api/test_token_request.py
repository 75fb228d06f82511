"""Service account tokens (api/tokenrequest.py, api/jws.py, api/oidc.py): issued by
``serviceaccounts/<name>/token`` as RS256 JWTs under the state directory's key, checked with
``cryptography``'s primitives and the discovery's JWK set as a relying party would, authenticating
as the service account while it and its bound object exist; with the real kubectl and the official
client over a socket."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import shutil
import ssl
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from controlplane.api import jws
from controlplane.api.app import create_app
from controlplane.api.errors import ApiError
from controlplane.api.tokenrequest import ISSUER, ServiceAccountKeys, TokenIssuer, token_request
from controlplane.client import ApiError as ClientApiError
from controlplane.client import Client
from controlplane.config import Config
from controlplane.tokens import read_token_file
from tests.conftest import TEST_PKI
from tests.e2e.test_kubectl import KUBECTL, kubectl
from tests.test_cli import Serve, running, start_serve

ACCOUNT = {"metadata": {"name": "bot", "namespace": "ci", "uid": "u-1"}}
POD = {"metadata": {"name": "web", "namespace": "ci", "uid": "p-1"}, "spec": {"serviceAccountName": "bot"}}


def unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def parts(token: str) -> tuple[dict[str, Any], dict[str, Any]]:
    head, payload, _ = token.split(".")
    header: dict[str, Any] = json.loads(unb64(head))
    claims: dict[str, Any] = json.loads(unb64(payload))
    return header, claims


def verified_by_jwks(token: str, jwks: dict[str, Any]) -> dict[str, Any]:
    """The claims of ``token`` checked as a relying party checks them: the JWK its ``kid`` names,
    rebuilt from ``n`` and ``e`` (or ``x`` and ``y``), verifies its signature (raises if not)."""
    header, claims = parts(token)
    (key,) = [k for k in jwks["keys"] if k["kid"] == header["kid"]]
    assert key["alg"] == header["alg"] and key["use"] == "sig"
    signing_input = token.rsplit(".", 1)[0].encode()
    signature = unb64(token.rsplit(".", 1)[1])
    if key["kty"] == "RSA":
        public = rsa.RSAPublicNumbers(int.from_bytes(unb64(key["e"]), "big"),
                                      int.from_bytes(unb64(key["n"]), "big")).public_key()
        public.verify(signature, signing_input, padding.PKCS1v15(), hashes.SHA256())
    else:
        point = ec.EllipticCurvePublicNumbers(int.from_bytes(unb64(key["x"]), "big"),
                                              int.from_bytes(unb64(key["y"]), "big"), ec.SECP256R1())
        half = len(signature) // 2
        point.public_key().verify(encode_dss_signature(int.from_bytes(signature[:half], "big"),
                                                       int.from_bytes(signature[half:], "big")),
                                  signing_input, ec.ECDSA(hashes.SHA256()))
    return claims


def keyed(directory: Path) -> Path:
    """``directory`` holding the tests' service account key (generating one takes a few tenths of
    a second on this machine)."""
    directory.mkdir(parents=True, exist_ok=True)
    for name in ("sa.key", "sa.pub"):
        shutil.copy(TEST_PKI / name, directory / name)
    return directory


def ecdsa_key(path: Path) -> Path:
    path.write_bytes(ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    return path


class Objects:
    """A getter of the objects tokens name, as the server's watch cache answers."""

    def __init__(self, *objects: tuple[str, dict[str, Any]]) -> None:
        self.held = {(plural, o["metadata"].get("namespace"), o["metadata"]["name"]): o for plural, o in objects}

    async def __call__(self, plural: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        return self.held.get((plural, namespace, name))


def test_a_token_is_an_rs256_jws_with_upstreams_header_and_claims(tmp_path: Path) -> None:
    issuer = TokenIssuer.in_directory(keyed(tmp_path))
    before = int(time.time())
    answer = token_request(issuer, ACCOUNT, {"spec": {"expirationSeconds": 600, "audiences": ["vault"]}})
    token = answer["status"]["token"]
    header, claims = parts(token)
    public = serialization.load_pem_public_key((tmp_path / "sa.pub").read_bytes())
    der = public.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    assert header == {"alg": "RS256", "kid": base64.urlsafe_b64encode(hashlib.sha256(der).digest()).rstrip(b"=")
                      .decode()}
    assert isinstance(public, rsa.RSAPublicKey) and public.key_size == 2048
    head, payload, signature = token.split(".")
    public.verify(unb64(signature), f"{head}.{payload}".encode(), padding.PKCS1v15(), hashes.SHA256())
    assert list(claims) == sorted(claims)  # go-jose writes them as a map: sorted keys
    assert claims["aud"] == ["vault"] and claims["iss"] == ISSUER
    assert claims["sub"] == "system:serviceaccount:ci:bot"
    assert before <= claims["iat"] == claims["nbf"] <= time.time() and claims["exp"] == claims["iat"] + 600
    assert str(uuid.UUID(claims["jti"])) == claims["jti"]
    assert claims["kubernetes.io"] == {"namespace": "ci", "serviceaccount": {"name": "bot", "uid": "u-1"}}
    assert answer["metadata"]["uid"] == "u-1" and answer["spec"]["audiences"] == ["vault"]
    assert answer["status"]["expirationTimestamp"].endswith("Z")
    with pytest.raises(ApiError) as e:
        token_request(issuer, ACCOUNT, {"spec": {"audiences": "vault"}})
    assert e.value.code == 400
    with pytest.raises(ApiError) as e:
        token_request(issuer, ACCOUNT, {"metadata": {"name": "other"}, "spec": {}})
    assert e.value.code == 422 and e.value.message == ('TokenRequest.authentication.k8s.io "bot" is invalid: '
                                                       'metadata.name: Invalid value: "other": must match the '
                                                       "service account name if specified")


async def test_a_token_authenticates_while_its_account_and_pod_stand(tmp_path: Path) -> None:
    issuer = TokenIssuer.in_directory(keyed(tmp_path))
    bound = {"pod": {"name": "web", "uid": "p-1"}, "node": {"name": "n1", "uid": "n-1"}}
    token = token_request(issuer, ACCOUNT, {"spec": {}}, bound_claims=bound)["status"]["token"]
    jti = parts(token)[1]["jti"]
    objects = Objects(("serviceaccounts", ACCOUNT), ("pods", POD))
    found = await issuer.authenticate(token, objects)
    assert found is not None
    user, audiences = found
    assert audiences == [ISSUER]
    assert user.info() == {
        "username": "system:serviceaccount:ci:bot", "uid": "u-1",
        "groups": ["system:serviceaccounts", "system:serviceaccounts:ci", "system:authenticated"],
        "extra": {"authentication.kubernetes.io/credential-id": [f"JTI={jti}"],
                  "authentication.kubernetes.io/node-name": ["n1"], "authentication.kubernetes.io/node-uid": ["n-1"],
                  "authentication.kubernetes.io/pod-name": ["web"], "authentication.kubernetes.io/pod-uid": ["p-1"]}}
    again = TokenIssuer.in_directory(keyed(tmp_path))  # the key is kept: another process, a restart
    assert await again.authenticate(token, objects) == found
    other = TokenIssuer(ServiceAccountKeys(ecdsa_key(tmp_path / "other.key"), generated_in=tmp_path))
    assert await other.authenticate(token, objects) is None  # another key

    def deleted(seconds_ago: int) -> dict[str, Any]:
        when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - seconds_ago))
        return {**POD, "metadata": {**POD["metadata"], "deletionTimestamp": when}}

    for pod, stands in ((None, False), ({**POD, "metadata": {**POD["metadata"], "uid": "p-2"}}, False),
                        (deleted(120), False), (deleted(10), True)):  # a minute's leeway, as upstream
        held = Objects(("serviceaccounts", ACCOUNT), *((("pods", pod),) if pod else ()))
        assert (await issuer.authenticate(token, held) is not None) == stands, pod
    assert await issuer.authenticate(token, Objects(("pods", POD))) is None  # the account is gone
    head, payload, signature = token.split(".")
    assert await issuer.authenticate(f"{head}.{payload}.{signature[:-4]}AAAA", objects) is None
    assert await issuer.authenticate(f"{head}.{payload}x.{signature}", objects) is None


async def test_a_node_or_secret_bound_token_goes_with_its_object(tmp_path: Path) -> None:
    issuer = TokenIssuer.in_directory(keyed(tmp_path))
    node = {"metadata": {"name": "n1", "uid": "n-1"}}
    secret = {"metadata": {"name": "s", "namespace": "ci", "uid": "s-1"}}
    on_node = token_request(issuer, ACCOUNT, {"spec": {}}, bound_claims={"node": {"name": "n1", "uid": "n-1"}})
    on_secret = token_request(issuer, ACCOUNT, {"spec": {}}, bound_claims={"secret": {"name": "s", "uid": "s-1"}})
    everything = Objects(("serviceaccounts", ACCOUNT), ("nodes", node), ("secrets", secret))
    without = Objects(("serviceaccounts", ACCOUNT))
    found = await issuer.authenticate(on_node["status"]["token"], everything)
    assert found is not None and dict(found[0].extra)["authentication.kubernetes.io/node-uid"] == ("n-1",)
    assert await issuer.authenticate(on_node["status"]["token"], without) is None
    assert await issuer.authenticate(on_secret["status"]["token"], everything) is not None
    assert await issuer.authenticate(on_secret["status"]["token"], without) is None


def test_times_are_checked_with_a_minutes_leeway(tmp_path: Path) -> None:
    issuer = TokenIssuer.in_directory(keyed(tmp_path))
    now = int(time.time())
    kube = {"namespace": "ci", "serviceaccount": {"name": "bot", "uid": "u-1"}}
    for times, good in (({"exp": now - 30}, True), ({"exp": now - 90}, False), ({"nbf": now + 30}, True),
                        ({"nbf": now + 90}, False), ({"iat": now + 90}, False), ({"exp": "soon"}, False)):
        assert (issuer.claims(issuer.issue({**times, "kubernetes.io": kube})) is not None) == good, times
    assert issuer.claims(issuer.issue({"iss": "https://elsewhere", "kubernetes.io": kube})) is None


def test_kubelets_3607_second_token_is_extended_for_the_servers_audiences(tmp_path: Path) -> None:
    issuer = TokenIssuer.in_directory(keyed(tmp_path))
    bound = {"pod": {"name": "web", "uid": "p-1"}}
    kubelets = token_request(issuer, ACCOUNT, {"spec": {"expirationSeconds": 3607}}, bound_claims=bound)
    claims = parts(kubelets["status"]["token"])[1]
    assert claims["exp"] - claims["iat"] == 365 * 24 * 3600
    assert claims["kubernetes.io"]["warnafter"] == claims["iat"] + 3607
    assert kubelets["spec"]["expirationSeconds"] == 3607
    assert kubelets["status"]["expirationTimestamp"] == time.strftime(
        "%Y-%m-%dT%H:%M:%SZ", time.gmtime(claims["iat"] + 3607))  # what the client is told
    for spec, bound_to in (({"expirationSeconds": 3607, "audiences": ["vault"]}, bound),  # not the server's
                           ({"expirationSeconds": 3608}, bound), ({"expirationSeconds": 3607}, {})):  # unbound
        claims = parts(token_request(issuer, ACCOUNT, {"spec": spec}, bound_claims=bound_to)["status"]["token"])[1]
        assert claims["exp"] - claims["iat"] == spec["expirationSeconds"] and "warnafter" not in claims["kubernetes.io"]


def test_a_token_longer_than_the_maximum_is_shortened_but_kubelets_is_still_extended(tmp_path: Path) -> None:
    """Upstream's TokenREST: the request capped at --service-account-max-token-expiration first,
    then kubelet's pod-bound 3607 s token extended to a year whatever the maximum."""
    keys = ServiceAccountKeys(generated_in=keyed(tmp_path))
    capped = TokenIssuer(keys, max_seconds=7200)
    answer = token_request(capped, ACCOUNT, {"spec": {"expirationSeconds": 10_000}})
    claims = parts(answer["status"]["token"])[1]
    assert claims["exp"] - claims["iat"] == 7200 and answer["spec"]["expirationSeconds"] == 7200
    assert answer["status"]["expirationTimestamp"] == time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                                    time.gmtime(claims["iat"] + 7200))
    short = parts(token_request(capped, ACCOUNT, {"spec": {"expirationSeconds": 600}})["status"]["token"])[1]
    assert short["exp"] - short["iat"] == 600  # under the maximum: as asked

    bound = {"pod": {"name": "web", "uid": "p-1"}}
    for issuer, lifetime, warns in ((capped, 365 * 24 * 3600, True),  # the extension ignores the maximum
                                    (TokenIssuer(keys, max_seconds=3600), 3600, False),  # capped: no longer 3607
                                    (TokenIssuer(keys, extend=False), 3607, False)):
        kubelets = token_request(issuer, ACCOUNT, {"spec": {"expirationSeconds": 3607}}, bound_claims=bound)
        claims = parts(kubelets["status"]["token"])[1]
        assert claims["exp"] - claims["iat"] == lifetime
        assert ("warnafter" in claims["kubernetes.io"]) == warns
        told = min(3607, issuer.max_seconds or 3607)
        assert kubelets["spec"]["expirationSeconds"] == told
        assert kubelets["status"]["expirationTimestamp"] == time.strftime(
            "%Y-%m-%dT%H:%M:%SZ", time.gmtime(claims["iat"] + told))
    with pytest.raises(ApiError) as e:  # validated before it is capped, as upstream
        token_request(capped, ACCOUNT, {"spec": {"expirationSeconds": (1 << 32) + 1}})
    assert e.value.code == 422 and "may not specify a duration larger than 2^32 seconds" in e.value.message
    with pytest.raises(ApiError) as e:
        token_request(capped, ACCOUNT, {"spec": {"expirationSeconds": 599}})
    assert e.value.code == 422 and "may not specify a duration less than 10 minutes" in e.value.message


def test_a_checked_token_is_not_verified_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    issuer = TokenIssuer.in_directory(keyed(tmp_path))
    token = token_request(issuer, ACCOUNT, {"spec": {}})["status"]["token"]
    verified = []
    payload = jws.Verifier.payload

    def counted(self: jws.Verifier, checked: str) -> bytes | None:
        verified.append(checked)
        return payload(self, checked)

    monkeypatch.setattr(jws.Verifier, "payload", counted)
    assert all(issuer.claims(token) is not None for _ in range(3))
    assert verified == [token]


def test_given_key_files_sign_with_ecdsa_and_verify_an_earlier_key(tmp_path: Path) -> None:
    old = TokenIssuer.in_directory(keyed(tmp_path))  # the RSA key before a rotation
    old_token = token_request(old, ACCOUNT, {"spec": {}})["status"]["token"]
    signing = ecdsa_key(tmp_path / "new.key")
    rotated = TokenIssuer(ServiceAccountKeys(signing, (signing, tmp_path / "sa.pub"), generated_in=tmp_path))
    token = token_request(rotated, ACCOUNT, {"spec": {}})["status"]["token"]
    assert parts(token)[0]["alg"] == "ES256"
    jwks = {"keys": [jws.jwk(k) for k in rotated.public_keys()]}
    assert [k["kty"] for k in jwks["keys"]] == ["EC", "RSA"] and jwks["keys"][0]["crv"] == "P-256"
    assert verified_by_jwks(token, jwks)["sub"] == verified_by_jwks(old_token, jwks)["sub"]
    assert rotated.claims(old_token) is not None and rotated.claims(token) is not None
    (tmp_path / "empty.pem").write_text("no key here\n")
    with pytest.raises(jws.KeyFileError):
        ServiceAccountKeys(tmp_path / "empty.pem", generated_in=tmp_path).load()


def test_key_files_are_read_block_by_block_as_go_decodes_pem(tmp_path: Path) -> None:
    """Every kind of key block upstream's ``keyutil`` reads, after junk, a BEGIN whose END is
    another's, and 100 KiB of BEGIN lines without an END (which a regular expression pairing
    each BEGIN with a later END went over quadratically)."""
    ec_key = ec.generate_private_key(ec.SECP256R1())
    rsa_key = serialization.load_pem_private_key((TEST_PKI / "sa.key").read_bytes(), password=None)
    assert isinstance(rsa_key, rsa.RSAPrivateKey)
    pkcs1_public = rsa_key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.PKCS1)
    sec1 = ec_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                                serialization.NoEncryption())
    assert pkcs1_public.startswith(b"-----BEGIN RSA PUBLIC KEY-----") and sec1.startswith(b"-----BEGIN EC PRIVATE")
    mixed = tmp_path / "mixed.pem"
    mixed.write_bytes(b"junk\n-----BEGIN PUBLIC KEY-----\nQUJD\n-----END CERTIFICATE-----\n" + pkcs1_public
                      + sec1 + b"-----BEGIN PUBLIC KEY-----\n" * 4096)
    assert [jws.key_id(k) for k in jws.read_public_keys(mixed)] == [
        jws.key_id(rsa_key.public_key()), jws.key_id(ec_key.public_key())]
    assert jws.key_id(jws.read_private_key(mixed).public_key()) == jws.key_id(ec_key.public_key())
    (tmp_path / "begins.pem").write_bytes(b"-----BEGIN PRIVATE KEY-----\n" * 4096)
    with pytest.raises(jws.KeyFileError, match="no private key found"):
        jws.read_private_key(tmp_path / "begins.pem")


def hs256_token(secret: bytes, claims: dict[str, Any]) -> str:
    """A token as the versions before RS256 signed them (HMAC-SHA256 with ``pki/sa.key``)."""
    def b64(data: bytes) -> bytes:
        return base64.urlsafe_b64encode(data).rstrip(b"=")

    head = b64(json.dumps({"alg": "HS256", "typ": "JWT", "kid": "controlplane"}, separators=(",", ":")).encode())
    signing_input = head + b"." + b64(json.dumps(claims, separators=(",", ":")).encode())
    return (signing_input + b"." + b64(hmac.new(secret, signing_input, hashlib.sha256).digest())).decode()


def old_claims(seconds: int = 3600, **kube: Any) -> dict[str, Any]:
    now = int(time.time())
    return {"aud": [ISSUER], "exp": now + seconds, "iat": now, "iss": ISSUER, "jti": str(uuid.uuid4()),
            "kubernetes.io": {"namespace": "ci", "serviceaccount": {"name": "bot", "uid": "u-1"}, **kube},
            "nbf": now, "sub": "system:serviceaccount:ci:bot"}


async def test_the_hmac_secret_of_an_earlier_version_still_verifies_its_tokens(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    secret = os.urandom(32)
    (tmp_path / "sa.key").write_bytes(secret)  # what the versions before RS256 made
    old = hs256_token(secret, old_claims())
    issuer = TokenIssuer.in_directory(tmp_path)
    token = issuer.issue({"sub": "x"})
    assert parts(token)[0]["alg"] == "RS256" and (tmp_path / "sa.key").read_bytes().startswith(b"-----BEGIN")
    assert (tmp_path / "sa-hs256.key").read_bytes() == secret
    assert "sa-hs256.key, which still verifies the service account tokens it signed" in caplog.text
    objects = Objects(("serviceaccounts", ACCOUNT))
    found = await issuer.authenticate(old, objects)
    assert found is not None and found[0].name == "system:serviceaccount:ci:bot" and found[0].uid == "u-1"
    assert await TokenIssuer.in_directory(tmp_path).authenticate(old, objects) == found  # a restart keeps it
    assert await issuer.authenticate(old, Objects()) is None  # its account is checked as any token's
    assert issuer.claims(hs256_token(secret, old_claims(seconds=-120))) is None  # expired
    assert issuer.claims(hs256_token(os.urandom(32), old_claims())) is None  # another secret
    # HS256 is checked against the secret only: the public key's bytes as an HMAC key are no key
    public = (tmp_path / "sa.pub").read_bytes()
    assert issuer.claims(hs256_token(public, old_claims())) is None
    assert all("sa-hs256" not in json.dumps(jws.jwk(k)) for k in issuer.public_keys())

    (tmp_path / "sa-hs256.key").unlink()  # the operator retires it
    assert TokenIssuer.in_directory(tmp_path).claims(old) is None


def test_an_old_secret_under_a_given_signing_key_still_verifies(tmp_path: Path) -> None:
    secret = os.urandom(32)
    (tmp_path / "sa.key").write_bytes(secret)  # never replaced: the server signs with its own key
    issuer = TokenIssuer(ServiceAccountKeys(ecdsa_key(tmp_path / "given.key"), generated_in=tmp_path))
    assert issuer.claims(hs256_token(secret, old_claims())) is not None
    assert (tmp_path / "sa.key").read_bytes() == secret


def test_a_key_that_is_no_pem_nor_an_old_secret_is_replaced_and_said(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / "sa.key").write_bytes(b"garbage")
    assert parts(TokenIssuer.in_directory(tmp_path).issue({"sub": "x"}))[0]["alg"] == "RS256"
    assert not (tmp_path / "sa-hs256.key").exists() and "no PEM key (7 bytes): replaced" in caplog.text


def test_key_files_verify_besides_the_generated_key_through_a_rotation(tmp_path: Path) -> None:
    """The generated key rotated: the old one kept as a key file, a new one generated."""
    before = TokenIssuer.in_directory(keyed(tmp_path))
    old_token = token_request(before, ACCOUNT, {"spec": {}})["status"]["token"]
    (tmp_path / "sa.key").rename(tmp_path / "old.key")
    (tmp_path / "sa.pub").unlink()
    rotated = TokenIssuer(ServiceAccountKeys(key_files=(tmp_path / "old.key",), generated_in=tmp_path))
    token = token_request(rotated, ACCOUNT, {"spec": {}})["status"]["token"]
    assert parts(token)[0]["kid"] != parts(old_token)[0]["kid"]
    assert rotated.claims(old_token) is not None and rotated.claims(token) is not None
    assert len(rotated.public_keys()) == 2  # both listed in /openid/v1/jwks
    assert TokenIssuer.in_directory(tmp_path).claims(old_token) is None  # without the key file


async def test_the_discovery_documents_verify_the_tokens_issued(tmp_path: Path) -> None:
    keyed(tmp_path / "pki")
    app = create_app(Config(data_dir=tmp_path / "data", tls=False, scheduler=False, port=7443))
    async with app.router.lifespan_context(app), Client.in_process(app.state.front) as c:
        configuration = await c.get("/.well-known/openid-configuration")
        assert configuration == {"issuer": ISSUER, "jwks_uri": "http://127.0.0.1:7443/openid/v1/jwks",
                                 "response_types_supported": ["id_token"], "subject_types_supported": ["public"],
                                 "id_token_signing_alg_values_supported": ["RS256"]}
        jwks = await c.get("/openid/v1/jwks")
        assert list(jwks["keys"][0]) == ["use", "kty", "kid", "alg", "n", "e"]  # go-jose's order
        await c.create("/api/v1/namespaces/default/serviceaccounts", {"metadata": {"name": "bot"}})
        issued = await c.create("/api/v1/namespaces/default/serviceaccounts/bot/token", {"spec": {}})
        claims = verified_by_jwks(issued["status"]["token"], jwks)
        assert claims["iss"] == configuration["issuer"] and claims["aud"] == [ISSUER]
        with pytest.raises(ClientApiError) as e:
            await c.request("POST", "/openid/v1/jwks", {})
        assert e.value.code == 405
        assert "/openid/v1/jwks" in (await c.get("/"))["paths"]


async def test_an_issuer_that_is_no_https_url_has_no_discovery(tmp_path: Path) -> None:
    app = create_app(Config(data_dir=tmp_path / "data", tls=False, scheduler=False,
                            service_account_issuers=("kubernetes/serviceaccount",)))
    assert app.state.front.discovery is None
    assert app.state.front.kube.token_issuer.issuer == "kubernetes/serviceaccount"


@pytest.fixture(scope="module")
def rbac(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    with running(start_serve(tmp_path_factory.mktemp("tokens"), extra=("--authorization-mode", "RBAC"))) as s:
        yield s


def as_token(served: Serve, token: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, KUBECONFIG=str(served.kubeconfig), HOME=str(served.state))
    return subprocess.run([KUBECTL or "kubectl", "--token", token, *args], capture_output=True, text=True,
                          env=env, timeout=60)


def test_kubectl_create_token_and_use_it(rbac: Serve) -> None:
    kubectl(rbac, "create", "serviceaccount", "bot")
    token = kubectl(rbac, "create", "token", "bot", "--duration=15m").strip()
    who = json.loads(as_token(rbac, token, "auth", "whoami", "-o", "json").stdout)
    assert who["status"]["userInfo"]["username"] == "system:serviceaccount:default:bot"
    denied = as_token(rbac, token, "get", "pods")
    assert denied.returncode != 0 and 'User "system:serviceaccount:default:bot" cannot list resource "pods"' \
        in denied.stderr
    kubectl(rbac, "create", "role", "pod-reader", "--verb=get,list", "--resource=pods")
    kubectl(rbac, "create", "rolebinding", "bot-reads", "--role=pod-reader", "--serviceaccount=default:bot")
    deadline = time.monotonic() + 10
    while (allowed := as_token(rbac, token, "get", "pods")).returncode != 0:
        assert time.monotonic() < deadline, allowed.stderr
        time.sleep(0.1)
    short = subprocess.run([KUBECTL or "kubectl", "create", "token", "bot", "--duration=1m"], capture_output=True,
                           text=True, timeout=60,
                           env=dict(os.environ, KUBECONFIG=str(rbac.kubeconfig), HOME=str(rbac.state)))
    assert short.returncode != 0 and "may not specify a duration less than 10 minutes" in short.stderr
    assert as_token(rbac, token + "x", "get", "pods").returncode != 0


def test_the_default_roles_are_aggregated_and_bindable(rbac: Serve) -> None:
    def rules(role: str) -> list[dict[str, object]]:
        got: list[dict[str, object]] = json.loads(kubectl(rbac, "get", "clusterrole", role, "-o", "json"))["rules"]
        return got or []

    deadline = time.monotonic() + 10
    while not (rules("view") and rules("edit") and rules("admin")):  # the aggregation controller fills them
        assert time.monotonic() < deadline
        time.sleep(0.1)
    view, edit, admin = rules("view"), rules("edit"), rules("admin")
    assert all(r in edit for r in view) and all(r in admin for r in edit)
    assert not any("secrets" in r["resources"] for r in view)  # type: ignore[operator]
    assert any("roles" in r["resources"] for r in admin) and not any("roles" in r["resources"] for r in edit)  # type: ignore[operator]
    # a custom role labelled to aggregate extends view (and through it edit and admin)
    kubectl(rbac, "apply", "-f", "-", stdin=json.dumps({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "widgets-view", "labels": {"rbac.authorization.k8s.io/aggregate-to-view": "true"}},
        "rules": [{"apiGroups": ["example.com"], "resources": ["widgets"], "verbs": ["get"]}]}))
    deadline = time.monotonic() + 10
    while not any("widgets" in r["resources"] for r in rules("admin")):  # type: ignore[operator]
        assert time.monotonic() < deadline
        time.sleep(0.1)
    kubectl(rbac, "create", "serviceaccount", "viewer")
    kubectl(rbac, "create", "rolebinding", "viewer-view", "--clusterrole=view", "--serviceaccount=default:viewer")
    token = kubectl(rbac, "create", "token", "viewer").strip()
    deadline = time.monotonic() + 10
    while as_token(rbac, token, "get", "configmaps").returncode != 0:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert as_token(rbac, token, "get", "secrets").returncode != 0


def test_kubectl_as_impersonates_when_the_requester_may(rbac: Serve) -> None:
    who = json.loads(kubectl(rbac, "auth", "whoami", "--as=bob", "--as-group=devs", "-o", "json"))
    assert who["status"]["userInfo"] == {"username": "bob", "groups": ["devs", "system:authenticated"]}
    assert kubectl(rbac, "auth", "can-i", "list", "pods", "--as=nobody", "--as-group=system:masters").strip() == "yes"
    env = dict(os.environ, KUBECONFIG=str(rbac.kubeconfig), HOME=str(rbac.state))
    denied = subprocess.run([KUBECTL or "kubectl", "get", "pods", "--as=nobody"], capture_output=True, text=True,
                            env=env, timeout=60)
    assert denied.returncode != 0 and 'User "nobody" cannot list resource "pods"' in denied.stderr
    kubectl(rbac, "create", "serviceaccount", "imp")
    token = kubectl(rbac, "create", "token", "imp").strip()
    refused = as_token(rbac, token, "get", "pods", "--as=alice")  # 1.37: the constrained mode's refusal first
    assert refused.returncode != 0 and 'pods is forbidden: User "system:serviceaccount:default:imp" cannot ' \
        'impersonate-on:user-info:list resource "pods" in API group "" in the namespace "default"' in refused.stderr


DEPUTY = """
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: deputy}
rules:
- {apiGroups: [authentication.k8s.io], resources: [users], resourceNames: [carol], verbs: ["impersonate:user-info"]}
- {apiGroups: [authentication.k8s.io], resources: [nodes], verbs: ["impersonate:arbitrary-node"]}
- {apiGroups: [authentication.k8s.io], resources: [selfsubjectreviews],
   verbs: ["impersonate-on:arbitrary-node:create"]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: deputy}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: deputy}
subjects: [{kind: ServiceAccount, name: deputy, namespace: default}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: deputy-lists-pods, namespace: default}
rules: [{apiGroups: [""], resources: [pods], verbs: ["impersonate-on:user-info:list"]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: deputy-lists-pods, namespace: default}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: deputy-lists-pods}
subjects: [{kind: ServiceAccount, name: deputy, namespace: default}]
"""


def test_kubectl_as_with_constrained_impersonation_grants(rbac: Serve) -> None:
    """ConstrainedImpersonation (KEP-5284, on since 1.36): a requester granted
    impersonate:user-info on a user and impersonate-on:user-info:list on pods may list pods as
    that user and nothing else; impersonate:arbitrary-node makes a node of system:nodes."""
    kubectl(rbac, "create", "serviceaccount", "deputy")
    kubectl(rbac, "apply", "-f", "-", stdin=DEPUTY)  # (kubectl create role checks resources by discovery)
    kubectl(rbac, "create", "role", "carol-lists-pods", "--verb=list", "--resource=pods")
    kubectl(rbac, "create", "rolebinding", "carol-lists-pods", "--role=carol-lists-pods", "--user=carol")
    token = kubectl(rbac, "create", "token", "deputy").strip()
    deadline = time.monotonic() + 10
    while (listed := as_token(rbac, token, "get", "pods", "--as=carol")).returncode != 0:
        assert time.monotonic() < deadline, listed.stderr
        time.sleep(0.1)
    refused = as_token(rbac, token, "get", "configmaps", "--as=carol")
    assert refused.returncode != 0 and 'configmaps is forbidden: User "system:serviceaccount:default:deputy" ' \
        'cannot impersonate-on:user-info:list resource "configmaps" in API group "" in the namespace "default"' \
        in refused.stderr
    other = as_token(rbac, token, "get", "pods", "--as=dave")
    assert other.returncode != 0 and 'users.authentication.k8s.io "dave" is forbidden: User ' \
        '"system:serviceaccount:default:deputy" cannot impersonate:user-info resource "users" in API group ' \
        '"authentication.k8s.io" at the cluster scope' in other.stderr
    while (node := as_token(rbac, token, "auth", "whoami", "--as=system:node:n1", "-o", "json")).returncode != 0:
        assert time.monotonic() < deadline + 10, node.stderr
        time.sleep(0.1)
    assert json.loads(node.stdout)["status"]["userInfo"] == {"username": "system:node:n1",
                                                              "groups": ["system:nodes", "system:authenticated"]}


def test_kubectl_as_uid_and_impersonated_extras_reach_whoami(rbac: Serve) -> None:
    who = json.loads(kubectl(rbac, "auth", "whoami", "--as=bob", "--as-uid=1234", "-o", "json"))
    assert who["status"]["userInfo"] == {"username": "bob", "uid": "1234", "groups": ["system:authenticated"]}
    # extras have no kubectl flag: client-go's ImpersonationConfig.Extra sends these headers
    admin = read_token_file(rbac.tokens)[0]
    review = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    headers = [("Authorization", f"Bearer {admin.token}"), ("Impersonate-User", "bob"),
               ("Impersonate-Extra-Example.com%2Fteam", "blue"), ("Impersonate-Extra-Scopes", "view"),
               ("Impersonate-Extra-Scopes", "edit")]
    with httpx.Client(base_url=rbac.url, verify=ssl.create_default_context(cafile=TEST_PKI / "ca.crt")) as http:
        answered = http.post("/apis/authentication.k8s.io/v1/selfsubjectreviews", json=review, headers=headers)
        assert answered.status_code == 201, answered.text
        assert answered.json()["status"]["userInfo"]["extra"] == {"example.com/team": ["blue"],
                                                                  "scopes": ["view", "edit"]}
        alone = http.post("/apis/authentication.k8s.io/v1/selfsubjectreviews", json=review,
                          headers=[headers[0], ("Impersonate-Uid", "1234")])
        assert alone.status_code == 400 and alone.json()["reason"] == "BadRequest"

    kubectl(rbac, "create", "serviceaccount", "imp-users")
    kubectl(rbac, "create", "clusterrole", "impersonate-users", "--verb=impersonate", "--resource=users")
    kubectl(rbac, "create", "clusterrolebinding", "imp-users", "--clusterrole=impersonate-users",
            "--serviceaccount=default:imp-users")
    token = kubectl(rbac, "create", "token", "imp-users").strip()
    deadline = time.monotonic() + 10
    while (as_bob := as_token(rbac, token, "auth", "whoami", "--as=bob")).returncode != 0:
        assert time.monotonic() < deadline, as_bob.stderr
        time.sleep(0.1)
    refused = as_token(rbac, token, "get", "pods", "--as=bob", "--as-uid=1234")  # (whoami hides a 403)
    # legacy refuses the uid; the 403 is the first mode's, constrained user-info's (1.37)
    assert refused.returncode != 0 and 'pods is forbidden: User "system:serviceaccount:default:imp-users" cannot ' \
        'impersonate-on:user-info:list resource "pods" in API group "" in the namespace "default"' in refused.stderr


def test_a_pod_bound_tokens_user_carries_its_pod_and_node_in_whoami(rbac: Serve) -> None:
    kubectl(rbac, "create", "serviceaccount", "nodebot")
    kubectl(rbac, "apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "Node",
                                                        "metadata": {"name": "whoami-node"}}))
    kubectl(rbac, "apply", "-f", "-", stdin=json.dumps({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "placed"},
        "spec": {"serviceAccountName": "nodebot", "nodeName": "whoami-node",
                 "containers": [{"name": "c", "image": "nginx"}]}}))
    pod_uid = kubectl(rbac, "get", "pod", "placed", "-o", "jsonpath={.metadata.uid}").strip()
    node_uid = kubectl(rbac, "get", "node", "whoami-node", "-o", "jsonpath={.metadata.uid}").strip()
    token = kubectl(rbac, "create", "token", "nodebot", "--bound-object-kind=Pod",
                    "--bound-object-name=placed").strip()
    who = as_token(rbac, token, "auth", "whoami", "-o", "yaml")
    assert who.returncode == 0, who.stderr
    info = yaml.safe_load(who.stdout)["status"]["userInfo"]
    assert info["extra"] == {"authentication.kubernetes.io/credential-id": [f"JTI={parts(token)[1]['jti']}"],
                             "authentication.kubernetes.io/node-name": ["whoami-node"],
                             "authentication.kubernetes.io/node-uid": [node_uid],
                             "authentication.kubernetes.io/pod-name": ["placed"],
                             "authentication.kubernetes.io/pod-uid": [pod_uid]}
    assert info["uid"] == kubectl(rbac, "get", "sa", "nodebot", "-o", "jsonpath={.metadata.uid}").strip()


def test_auth_can_i_list_shows_the_rules_that_apply(rbac: Serve) -> None:
    kubectl(rbac, "create", "namespace", "lister")
    kubectl(rbac, "-n", "lister", "create", "role", "cm-reader", "--verb=get,list", "--resource=configmaps")
    kubectl(rbac, "-n", "lister", "create", "rolebinding", "carol-reads", "--role=cm-reader", "--user=carol")
    deadline = time.monotonic() + 10
    while "configmaps" not in (out := kubectl(rbac, "-n", "lister", "auth", "can-i", "--list", "--as=carol")):
        assert time.monotonic() < deadline, out
        time.sleep(0.1)
    rows = {line.split()[0]: line for line in out.splitlines()[1:] if line.strip()}
    assert "[get list]" in rows["configmaps"]
    assert "selfsubjectaccessreviews.authorization.k8s.io" in rows
    assert "secrets" not in rows  # nothing else in this namespace
    elsewhere = kubectl(rbac, "-n", "default", "auth", "can-i", "--list", "--as=carol")
    assert "configmaps" not in elsewhere


def test_a_deleted_account_takes_its_tokens_along(rbac: Serve) -> None:
    kubectl(rbac, "create", "serviceaccount", "temp")
    token = kubectl(rbac, "create", "token", "temp").strip()
    assert as_token(rbac, token, "auth", "whoami").returncode == 0
    kubectl(rbac, "delete", "serviceaccount", "temp")
    gone = as_token(rbac, token, "auth", "whoami")
    assert gone.returncode != 0 and "Unauthorized" in gone.stderr
    kubectl(rbac, "create", "serviceaccount", "temp")  # another account of that name: another uid
    assert as_token(rbac, token, "auth", "whoami").returncode != 0


def test_the_issuer_discovery_over_a_socket(rbac: Serve) -> None:
    """What Vault's and SPIFFE's verifiers fetch: the configuration as the admin reads it, the keys
    as any service account may (the bootstrap ``system:service-account-issuer-discovery``
    binding), and the keys verify what ``kubectl create token`` gives."""
    configuration = json.loads(kubectl(rbac, "get", "--raw", "/.well-known/openid-configuration"))
    assert configuration == {"issuer": ISSUER, "jwks_uri": f"https://127.0.0.1:{rbac.port}/openid/v1/jwks",
                             "response_types_supported": ["id_token"], "subject_types_supported": ["public"],
                             "id_token_signing_alg_values_supported": ["RS256"]}
    kubectl(rbac, "create", "serviceaccount", "oidc")
    token = kubectl(rbac, "create", "token", "oidc").strip()
    read = as_token(rbac, token, "get", "--raw", "/openid/v1/jwks")
    assert read.returncode == 0, read.stderr
    claims = verified_by_jwks(token, json.loads(read.stdout))
    assert claims["sub"] == "system:serviceaccount:default:oidc" and claims["iss"] == configuration["issuer"]
    refused = subprocess.run([KUBECTL or "kubectl", "get", "--raw", "/openid/v1/jwks", "--as=alice"],
                             capture_output=True, text=True, timeout=60,
                             env=dict(os.environ, KUBECONFIG=str(rbac.kubeconfig), HOME=str(rbac.state)))
    assert refused.returncode != 0 and "Forbidden" in refused.stderr  # not a service account

    api = k8s_config.new_client_from_config(config_file=str(rbac.kubeconfig))  # type: ignore[no-untyped-call]
    try:
        # (typed as str, which the client makes with str() of the decoded JSON: read the raw answer)
        official: Any = k8s.WellKnownApi(api).get_service_account_issuer_open_id_configuration(
            _preload_content=False)
        assert json.loads(official.data) == configuration
        keys: Any = k8s.OpenidApi(api).get_service_account_issuer_open_id_keyset(_preload_content=False)
        assert keys.headers["Content-Type"] == "application/jwk-set+json"
        assert keys.headers["Cache-Control"] == "public, max-age=3600"
        assert verified_by_jwks(token, json.loads(keys.data)) == claims
    finally:
        api.close()


def test_a_token_for_another_audience_is_not_for_the_api(rbac: Serve) -> None:
    kubectl(rbac, "create", "serviceaccount", "vaulted")
    token = kubectl(rbac, "create", "token", "vaulted", "--audience=vault").strip()
    assert parts(token)[1]["aud"] == ["vault"]
    refused = as_token(rbac, token, "auth", "whoami")
    assert refused.returncode != 0 and "Unauthorized" in refused.stderr


def test_a_deleted_pods_token_stops_authenticating(rbac: Serve) -> None:
    kubectl(rbac, "create", "serviceaccount", "podbot")
    kubectl(rbac, "apply", "-f", "-", stdin=json.dumps({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bound"},
        "spec": {"serviceAccountName": "podbot", "containers": [{"name": "c", "image": "nginx"}]}}))
    pod_uid = kubectl(rbac, "get", "pod", "bound", "-o", "jsonpath={.metadata.uid}").strip()
    token = kubectl(rbac, "create", "token", "podbot", "--bound-object-kind=Pod", "--bound-object-name=bound").strip()
    who = as_token(rbac, token, "auth", "whoami", "-o", "json")
    assert who.returncode == 0, who.stderr
    info = json.loads(who.stdout)["status"]["userInfo"]
    assert info["extra"]["authentication.kubernetes.io/pod-name"] == ["bound"]
    assert info["extra"]["authentication.kubernetes.io/pod-uid"] == [pod_uid]
    assert info["extra"]["authentication.kubernetes.io/credential-id"] == [f"JTI={parts(token)[1]['jti']}"]
    kubectl(rbac, "delete", "pod", "bound", "--grace-period=0", "--force")
    gone = as_token(rbac, token, "auth", "whoami")
    assert gone.returncode != 0 and "Unauthorized" in gone.stderr


@pytest.fixture(scope="module")
def upgraded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Serve, bytes]]:
    """A server started on the state directory of a version that signed tokens with an HMAC
    secret (``pki/sa.key``, 32 bytes), and that secret."""
    tmp = tmp_path_factory.mktemp("upgraded")
    pki = tmp / "state" / "pki"
    shutil.copytree(TEST_PKI, pki)
    secret = os.urandom(32)
    (pki / "sa.key").write_bytes(secret)
    (pki / "sa.pub").unlink()
    with running(start_serve(tmp, extra=("--service-account-max-token-expiration", "2h"))) as s:
        yield s, secret


def test_an_upgrade_keeps_the_hs256_tokens_of_the_earlier_version(upgraded: tuple[Serve, bytes]) -> None:
    served, secret = upgraded
    kubectl(served, "create", "serviceaccount", "legacy")
    uid = kubectl(served, "get", "serviceaccount", "legacy", "-o", "jsonpath={.metadata.uid}").strip()
    claims = old_claims(namespace="default", serviceaccount={"name": "legacy", "uid": uid})
    claims["sub"] = "system:serviceaccount:default:legacy"
    who = as_token(served, hs256_token(secret, claims), "auth", "whoami", "-o", "json")
    assert who.returncode == 0, who.stderr
    assert json.loads(who.stdout)["status"]["userInfo"]["username"] == "system:serviceaccount:default:legacy"
    output = served.output()
    assert "which still verifies the service account tokens it signed until they expire" in output
    assert "are still accepted until they expire: delete " in output
    new = kubectl(served, "create", "token", "legacy").strip()
    assert parts(new)[0]["alg"] == "RS256" and as_token(served, new, "auth", "whoami").returncode == 0


def test_the_maximum_token_expiration_over_a_socket(upgraded: tuple[Serve, bytes]) -> None:
    served, _ = upgraded
    env = dict(os.environ, KUBECONFIG=str(served.kubeconfig), HOME=str(served.state))
    asked = subprocess.run([KUBECTL or "kubectl", "create", "token", "default", "--duration=5h"],
                           capture_output=True, text=True, env=env, timeout=60)
    assert asked.returncode == 0, asked.stderr
    assert "Warning: requested expiration of 18000 seconds shortened to 7200 seconds" in asked.stderr
    claims = parts(asked.stdout.strip())[1]
    assert claims["exp"] - claims["iat"] == 7200

    kubectl(served, "apply", "-f", "-", stdin=json.dumps({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "projected"},
        "spec": {"containers": [{"name": "c", "image": "nginx"}]}}))
    answer = json.loads(kubectl(served, "create", "token", "default", "--bound-object-kind=Pod",
                                "--bound-object-name=projected", "--duration=3607s", "-o", "json"))
    claims = parts(answer["status"]["token"])[1]
    assert claims["exp"] - claims["iat"] == 365 * 24 * 3600  # kubelet's: a year, past the maximum
    assert claims["kubernetes.io"]["warnafter"] == claims["iat"] + 3607
    assert answer["status"]["expirationTimestamp"] == time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                                    time.gmtime(claims["iat"] + 3607))
    assert "enabling tokens valid up to 31536000 seconds, which is longer than service-account-max-token-" \
        "expiration set to 2h0m0s seconds" in served.output()


def test_an_rsa_signing_key_whose_numbers_disagree_is_refused(tmp_path: Path) -> None:
    """The signing key's numbers are checked as Go's ``rsa.PrivateKey.Validate`` checks them (not
    OpenSSL's primality tests, a tenth of a second a start): one whose private exponent or CRT
    coefficient is not the modulus's is refused, where signing with it would make tokens no
    public key verifies."""
    good = serialization.load_pem_private_key((TEST_PKI / "sa.key").read_bytes(), password=None)
    assert isinstance(good, rsa.RSAPrivateKey)
    n = good.private_numbers()
    path = tmp_path / "bad.key"
    for bad in (rsa.RSAPrivateNumbers(n.p, n.q, n.d + 2, n.dmp1, n.dmq1, n.iqmp, n.public_numbers),
                rsa.RSAPrivateNumbers(n.p, n.q, n.d, n.dmp1, n.dmq1, n.iqmp + 1, n.public_numbers)):
        key = bad.private_key(unsafe_skip_rsa_key_validation=True)
        path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
        with pytest.raises(jws.KeyFileError, match="invalid private key"):
            jws.read_private_key(path)
    assert jws.key_id(jws.read_private_key(TEST_PKI / "sa.key").public_key()) == jws.key_id(good.public_key())
