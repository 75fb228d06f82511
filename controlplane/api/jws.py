"""Compact JWS as kube-apiserver signs service account tokens: keys, key ids, signatures.

A token is ``BASE64URL(header) . BASE64URL(claims) . BASE64URL(signature)`` (no padding),
its header ``{"alg":"RS256","kid":"<key id>"}``. The algorithm follows the signing key, as
upstream's (``pkg/serviceaccount/jwt.go``): RS256 for an RSA key, ES256/ES384/ES512 for
an ECDSA key on P-256/P-384/P-521. The key id is derived from the public key, so every
server holding the same key names it alike: the unpadded base64url of the SHA-256 of the
key's DER ``SubjectPublicKeyInfo``. A verifier picks its keys by the token's ``kid``
(all of them when it has none), as upstream's ``StaticPublicKeysGetter``.

``jwk`` is a public key as ``/openid/v1/jwks`` lists it, in go-jose's field order
(``use``, ``kty``, ``kid``, ``crv``, ``alg``, ``x``, ``y``, ``n``, ``e``).

Key files are PEM, as kube-apiserver reads ``--service-account-key-file`` and
``--service-account-signing-key-file``: any number of public keys, private keys (their
public half) and certificates (their key) in one file.

A verifier may also hold HMAC secrets: this server signed its tokens HS256 before it signed
them as upstream does, and a state directory may keep that secret (``pki.py``) so the tokens
it signed stay valid until they expire. A token's ``alg`` picks the kind of key: HS256 is
checked against the secrets only, never against a public key (whose bytes anyone may read),
and the secrets are never listed as JWKs.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import orjson
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature, encode_dss_signature

from ..registry.pem import blocks as pem_blocks

__all__ = ["HMAC_ALGORITHM", "KeyFileError", "PrivateKey", "PublicKey", "Signer", "Verifier", "algorithm", "jwk",
           "key_id", "read_private_key", "read_public_keys"]

PrivateKey = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey
PublicKey = rsa.RSAPublicKey | ec.EllipticCurvePublicKey

# ECDSA: curve name -> (JWS algorithm, hash, bytes of r and of s in the signature)
_CURVES: dict[str, tuple[str, hashes.HashAlgorithm, int]] = {
    "secp256r1": ("ES256", hashes.SHA256(), 32),
    "secp384r1": ("ES384", hashes.SHA384(), 48),
    "secp521r1": ("ES512", hashes.SHA512(), 66),
}
_JWK_CURVES = {"secp256r1": "P-256", "secp384r1": "P-384", "secp521r1": "P-521"}
HMAC_ALGORITHM = "HS256"  # the earlier version's tokens: verified with ``Verifier.secrets`` only


class KeyFileError(ValueError):
    """A key file holds no usable key (kube-apiserver refuses to start on one)."""


def b64(data: bytes) -> bytes:
    return base64.urlsafe_b64encode(data).rstrip(b"=")


def unb64(data: bytes) -> bytes:
    """Unpadded base64url, strictly (raises ``binascii.Error`` or ``ValueError``)."""
    if not re.fullmatch(rb"[A-Za-z0-9_-]*", data):
        raise ValueError("not base64url")
    return base64.urlsafe_b64decode(data + b"=" * (-len(data) % 4))


def key_id(public_key: PublicKey) -> str:
    """The key id upstream derives: base64url (unpadded) of SHA-256 over the DER public key."""
    der = public_key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return b64(hashlib.sha256(der).digest()).decode()


def algorithm(public_key: PublicKey) -> str:
    """The JWS algorithm a key signs with (RS256, or ES256/384/512 by curve)."""
    if isinstance(public_key, rsa.RSAPublicKey):
        return "RS256"
    if isinstance(public_key, ec.EllipticCurvePublicKey) and public_key.curve.name in _CURVES:
        return _CURVES[public_key.curve.name][0]
    raise KeyFileError(f"unsupported key type {type(public_key).__name__}: must be RSA or ECDSA (P-256/384/521)")


def _uint(n: int, size: int = 0) -> str:
    return b64(n.to_bytes(size or max(1, (n.bit_length() + 7) // 8), "big")).decode()


def jwk(public_key: PublicKey) -> dict[str, str]:
    """The public key as a JSON Web Key, with its ``kid`` and ``alg``, ``use: sig``."""
    head = {"use": "sig", "kty": "RSA" if isinstance(public_key, rsa.RSAPublicKey) else "EC",
            "kid": key_id(public_key)}
    if isinstance(public_key, rsa.RSAPublicKey):
        numbers = public_key.public_numbers()
        return {**head, "alg": "RS256", "n": _uint(numbers.n), "e": _uint(numbers.e)}
    point = public_key.public_numbers()
    size = _CURVES[public_key.curve.name][2]
    return {**head, "crv": _JWK_CURVES[public_key.curve.name], "alg": algorithm(public_key),
            "x": _uint(point.x, size), "y": _uint(point.y, size)}


class Signer:
    """Signs claims with one private key, naming it by its key id."""

    def __init__(self, key: PrivateKey) -> None:
        self.key = key
        self.public_key: PublicKey = key.public_key()
        self.algorithm = algorithm(self.public_key)
        self._header = b64(orjson.dumps({"alg": self.algorithm, "kid": key_id(self.public_key)}))

    def sign(self, claims: dict[str, Any]) -> str:
        signing_input = self._header + b"." + b64(orjson.dumps(claims, option=orjson.OPT_SORT_KEYS))
        if isinstance(self.key, rsa.RSAPrivateKey):
            signature = self.key.sign(signing_input, padding.PKCS1v15(), hashes.SHA256())
        else:  # JWS wants r || s, each of the curve's size; cryptography gives DER
            _alg, digest, size = _CURVES[self.key.curve.name]
            r, s = decode_dss_signature(self.key.sign(signing_input, ec.ECDSA(digest)))
            signature = r.to_bytes(size, "big") + s.to_bytes(size, "big")
        return (signing_input + b"." + b64(signature)).decode()


class Verifier:
    """Checks a token's signature against the public keys it was given, and an HS256 one against
    the HMAC ``secrets`` (an earlier version's, ``pki.py``)."""

    def __init__(self, keys: Iterable[PublicKey], secrets: Iterable[bytes] = ()) -> None:
        self.secrets = tuple(secrets)
        self.keys: list[PublicKey] = []
        self._by_id: dict[str, list[PublicKey]] = {}
        for key in keys:
            algorithm(key)  # supported, or KeyFileError
            if any(key_id(key) == key_id(k) for k in self.keys):
                continue
            self.keys.append(key)
            self._by_id.setdefault(key_id(key), []).append(key)

    def payload(self, token: str) -> bytes | None:
        """The claims' JSON of a token one of the keys signed, None if none did (or it is no JWS)."""
        raw = token.encode()
        signing_input, dot, signature_b64 = raw.rpartition(b".")
        header_b64, dot2, payload_b64 = signing_input.partition(b".")
        if not dot or not dot2:
            return None
        try:
            header = orjson.loads(unb64(header_b64))
            signature = unb64(signature_b64)
            payload = unb64(payload_b64)
        except (ValueError, binascii.Error, orjson.JSONDecodeError):
            return None
        if not isinstance(header, dict) or not isinstance(header.get("alg"), str):
            return None
        if header["alg"] == HMAC_ALGORITHM:
            return payload if any(_hmac_verifies(s, signature, signing_input) for s in self.secrets) else None
        kid = header.get("kid")
        keys = self._by_id.get(kid, []) if isinstance(kid, str) and kid else self.keys
        for key in keys:
            if algorithm(key) == header["alg"] and _verifies(key, signature, signing_input):
                return payload
        return None


def _hmac_verifies(secret: bytes, signature: bytes, signing_input: bytes) -> bool:
    return hmac.compare_digest(hmac.new(secret, signing_input, hashlib.sha256).digest(), signature)


def _verifies(key: PublicKey, signature: bytes, signing_input: bytes) -> bool:
    try:
        if isinstance(key, rsa.RSAPublicKey):
            key.verify(signature, signing_input, padding.PKCS1v15(), hashes.SHA256())
        else:
            _alg, digest, size = _CURVES[key.curve.name]
            if len(signature) != 2 * size:
                return False
            der = encode_dss_signature(int.from_bytes(signature[:size], "big"), int.from_bytes(signature[size:], "big"))
            key.verify(der, signing_input, ec.ECDSA(digest))
    except InvalidSignature:
        return False
    return True


def _blocks(path: Path) -> list[tuple[str, bytes]]:
    """The (type, DER) of each PEM block of the file at ``path``, found in one pass as Go's
    ``pem.Decode`` finds them (``registry/pem.py``; a regular expression pairing each BEGIN
    with a later END backtracked quadratically over a file of BEGIN lines)."""
    try:
        data = path.read_bytes()
    except OSError as e:
        raise KeyFileError(f"cannot read {path}: {e.strerror or e}") from None
    return [(block.kind, block.der) for block in pem_blocks(data.decode("latin-1"))]


def read_private_key(path: Path) -> PrivateKey:
    """The first private key of a PEM file (``--service-account-signing-key-file``)."""
    for label, block in _blocks(path):
        if "PRIVATE KEY" in label:
            try:
                key = serialization.load_der_private_key(block, password=None, unsafe_skip_rsa_key_validation=True)
            except (ValueError, TypeError) as e:
                raise KeyFileError(f"{path}: {e}") from None
            if not isinstance(key, rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey):
                raise KeyFileError(f"{path}: unsupported key type {type(key).__name__}: must be RSA or ECDSA")
            if isinstance(key, rsa.RSAPrivateKey) and not _consistent(key.private_numbers()):
                raise KeyFileError(f"{path}: crypto/rsa: invalid private key: its numbers do not agree")
            algorithm(key.public_key())
            return key
    raise KeyFileError(f"{path}: no private key found (PEM)")


def _consistent(numbers: rsa.RSAPrivateNumbers) -> bool:
    """An RSA private key's numbers agree with each other, as Go's ``rsa.PrivateKey.Validate``
    checks them when kube-apiserver parses its key (the primes' product is the modulus, the
    exponents are inverses modulo each prime less one), and with the CRT values its signatures
    are made with. Not OpenSSL's own check, which tests the primes' primality too: 100-300 ms of
    CPU for a 2048-bit key, at every start of the server and of each of its processes."""
    p, q, d, e = numbers.p, numbers.q, numbers.d, numbers.public_numbers.e
    return (p > 1 and q > 1 and p * q == numbers.public_numbers.n and d * e % (p - 1) == 1
            and d * e % (q - 1) == 1 and numbers.dmp1 == d % (p - 1) and numbers.dmq1 == d % (q - 1)
            and numbers.iqmp * q % p == 1)


def read_public_keys(path: Path) -> list[PublicKey]:
    """Every public key of a PEM file (``--service-account-key-file``): public keys, the public
    half of private keys, the key of certificates."""
    keys: list[PublicKey] = []
    for label, block in _blocks(path):
        try:
            if label == "CERTIFICATE":
                key: Any = x509.load_der_x509_certificate(block).public_key()
            elif "PRIVATE KEY" in label:  # (its public half only: nothing of the private one is used)
                key = serialization.load_der_private_key(block, password=None,
                                                         unsafe_skip_rsa_key_validation=True).public_key()
            elif "PUBLIC KEY" in label:
                key = serialization.load_der_public_key(block)
            else:
                continue
        except (ValueError, TypeError) as e:
            raise KeyFileError(f"{path}: {e}") from None
        if not isinstance(key, rsa.RSAPublicKey | ec.EllipticCurvePublicKey):
            raise KeyFileError(f"{path}: unsupported key type {type(key).__name__}: must be RSA or ECDSA")
        algorithm(key)
        keys.append(key)
    if not keys:
        raise KeyFileError(f"{path}: no public key found (PEM)")
    return keys
