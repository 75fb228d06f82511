"""Service account tokens: ``serviceaccounts/<name>/token`` (TokenRequest), and their authentication.

A TokenRequest (authentication.k8s.io/v1) for an existing ServiceAccount is answered
with a JWT whose claims are upstream's (``iss``, ``sub``
``system:serviceaccount:<namespace>:<name>``, ``aud``, ``exp``, ``iat``, ``nbf``,
``jti``, and ``kubernetes.io`` with the namespace, the service account's name and
uid, and the bound object if any) and its ``expirationTimestamp``.
``expirationSeconds`` defaults to an hour and may not be under ten minutes (422);
audiences default to the server's. This is what ``kubectl create token`` asks for.

A bearer token that is such a JWT authenticates as its service account, with the
groups ``system:serviceaccounts`` and ``system:serviceaccounts:<namespace>``, until
it expires, and while its service account exists with the uid it was issued for
(a deleted account's tokens stop working, as upstream). Tokens are signed with
HMAC-SHA256 under a key every server process of one state directory shares
(``pki/sa.key``, made once); upstream signs with RS256, which a client never
checks. Unlike upstream, a token bound to a pod or secret outlives that object.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from .errors import ApiError
from .rbac import User

__all__ = ["AUDIENCE", "ISSUER", "TokenIssuer", "account_of", "account_user", "token_request",
           "token_request_looked_up"]

ISSUER = "https://kubernetes.default.svc.cluster.local"
AUDIENCE = ISSUER
DEFAULT_SECONDS = 3600
MIN_SECONDS = 600
MAX_SECONDS = 1 << 32
_HEADER = base64.urlsafe_b64encode(orjson.dumps({"alg": "HS256", "typ": "JWT", "kid": "controlplane"})).rstrip(b"=")


def _b64(data: bytes) -> bytes:
    return base64.urlsafe_b64encode(data).rstrip(b"=")


def _unb64(data: bytes) -> bytes:
    return base64.urlsafe_b64decode(data + b"=" * (-len(data) % 4))


class TokenIssuer:
    def __init__(self, key: bytes) -> None:
        self._key = key

    @classmethod
    def in_directory(cls, directory: Path) -> TokenIssuer:
        """The issuer of the key in ``directory/sa.key``, made (0600) by the first process to ask."""
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / "sa.key"
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            for _ in range(100):  # another process is writing it
                key = path.read_bytes()
                if len(key) == 32:
                    return cls(key)
                time.sleep(0.01)
            raise RuntimeError(f"{path}: not a 32-byte key") from None
        key = os.urandom(32)
        try:
            os.write(fd, key)
            os.fsync(fd)
        finally:
            os.close(fd)
        return cls(key)

    def _sign(self, signing_input: bytes) -> bytes:
        return _b64(hmac.new(self._key, signing_input, hashlib.sha256).digest())

    def issue(self, claims: dict[str, Any]) -> str:
        signing_input = _HEADER + b"." + _b64(orjson.dumps(claims))
        return (signing_input + b"." + self._sign(signing_input)).decode()

    def authenticate(self, token: str) -> User | None:
        """The service account a token of this issuer names, if it is genuine and not expired
        (whether the account still exists is the caller's to check: ``claims``)."""
        claims = self.claims(token)
        return None if claims is None else account_user(claims)

    def claims(self, token: str) -> dict[str, Any] | None:
        """A genuine, unexpired token's claims, naming a service account; None otherwise."""
        raw = token.encode()
        head, dot, signature = raw.rpartition(b".")
        if not dot or head.count(b".") != 1 or not hmac.compare_digest(self._sign(head), signature):
            return None
        try:
            claims = orjson.loads(_unb64(head.partition(b".")[2]))
        except (ValueError, orjson.JSONDecodeError):
            return None
        if not isinstance(claims, dict) or claims.get("iss") != ISSUER or int(claims.get("exp", 0)) < time.time():
            return None
        kube = claims.get("kubernetes.io") or {}
        if not isinstance(kube, dict) or not kube.get("namespace") \
                or not (kube.get("serviceaccount") or {}).get("name"):
            return None
        return claims


def account_of(claims: dict[str, Any]) -> tuple[str, str, str]:
    """The (namespace, name, uid) of the service account verified claims name."""
    kube = claims["kubernetes.io"]
    account = kube["serviceaccount"]
    return str(kube["namespace"]), str(account["name"]), str(account.get("uid") or "")


def account_user(claims: dict[str, Any]) -> User:
    namespace, name, _uid = account_of(claims)
    return User(f"system:serviceaccount:{namespace}:{name}",
                ("system:serviceaccounts", f"system:serviceaccounts:{namespace}")).with_authenticated()


Getter = Callable[[str, str | None, str], Awaitable[dict[str, Any] | None]]


async def token_request_looked_up(issuer: TokenIssuer, account: dict[str, Any], body: Any,
                                  get: Getter) -> dict[str, Any]:
    """``token_request`` with its bound object looked up through ``get(plural, namespace, name)``
    (None when missing), as upstream's TokenREST does after validating the request: a missing
    object is 404, a pod of another service account 400, a ``uid`` that is not the object's 409;
    a pod's token names its node too (ServiceAccountTokenPodNodeInfo), without a uid if the
    node is gone."""
    token_request(issuer, account, body, bound_claims={})  # the validation first, as upstream
    ref = body["spec"].get("boundObjectRef") if isinstance(body.get("spec"), dict) else None
    if not isinstance(ref, dict):
        return token_request(issuer, account, body)
    kind, name = str(ref["kind"]), str(ref.get("name") or "")
    api_version = str(ref.get("apiVersion") or "v1")
    if "/" in api_version:  # upstream binds core objects only
        raise ApiError.bad_request(f"cannot bind token to object of type {api_version}, Kind={kind}")
    meta = account.get("metadata") or {}
    plural = kind.lower() + "s"
    obj = await get(plural, None if kind == "Node" else str(meta.get("namespace", "")), name)
    if obj is None:
        raise ApiError(404, "NotFound", f'{plural} "{name}" not found', {"name": name, "kind": plural})
    uid = str((obj.get("metadata") or {}).get("uid") or "")
    claims: dict[str, Any] = {kind.lower(): {"name": name, "uid": uid}}
    if kind == "Pod":
        account_name = meta.get("name", "")
        pod_spec = obj.get("spec") or {}
        if pod_spec.get("serviceAccountName") != account_name:
            raise ApiError.bad_request(f'cannot bind token for serviceaccount "{account_name}" to pod running '
                                       "with different serviceaccount name.")
        if node_name := pod_spec.get("nodeName"):
            node = await get("nodes", None, str(node_name))
            node_uid = (node or {}).get("metadata", {}).get("uid")
            claims["node"] = {"name": node_name, **({"uid": node_uid} if node_uid else {})}
    if ref.get("uid") and ref["uid"] != uid:
        raise ApiError(409, "Conflict", f'Operation cannot be fulfilled on {kind} "{name}": the UID in the bound '
                       f"object reference ({ref['uid']}) does not match the UID in record. The object might have "
                       "been deleted and then recreated", {"name": name, "kind": kind})
    return token_request(issuer, account, body, bound_claims=claims)


def token_request(issuer: TokenIssuer, account: dict[str, Any], body: Any,
                  bound_claims: dict[str, Any] | None = None) -> dict[str, Any]:
    """The TokenRequest answered for ``account`` (the stored ServiceAccount), from the request ``body``;
    ``bound_claims``, when given, are the ``kubernetes.io`` claims of its bound object
    (``token_request_looked_up``), else they are taken from its ``boundObjectRef`` as it is."""
    if not isinstance(body, dict) or body.get("kind") not in (None, "TokenRequest"):
        raise ApiError.bad_request("the request body must be a TokenRequest")
    spec = body.get("spec") or {}
    if not isinstance(spec, dict):
        raise ApiError.bad_request("spec must be an object")
    meta = account.get("metadata") or {}
    namespace, name = meta.get("namespace", ""), meta.get("name", "")
    seconds = spec.get("expirationSeconds")
    seconds = DEFAULT_SECONDS if seconds is None else seconds
    causes = []
    if not isinstance(seconds, int) or seconds < MIN_SECONDS:
        causes.append({"reason": "FieldValueInvalid", "field": "spec.expirationSeconds",
                       "message": f"Invalid value: {seconds}: may not specify a duration less than 10 minutes"})
    elif seconds > MAX_SECONDS:
        causes.append({"reason": "FieldValueInvalid", "field": "spec.expirationSeconds",
                       "message": f"Invalid value: {seconds}: may not specify a duration larger than 2^32 seconds"})
    bound = spec.get("boundObjectRef")
    if bound is not None and (not isinstance(bound, dict) or bound.get("kind") not in ("Pod", "Secret", "Node")):
        causes.append({"reason": "FieldValueNotSupported", "field": "spec.boundObjectRef.kind",
                       "message": 'Unsupported value: supported values: "Pod", "Secret", "Node"'})
    if causes:  # upstream's NewInvalid names no object here: `TokenRequest.authentication.k8s.io "" is invalid`
        raise ApiError(422, "Invalid", 'TokenRequest.authentication.k8s.io "" is invalid: '
                       + ", ".join(f"{c['field']}: {c['message']}" for c in causes),
                       {"group": "authentication.k8s.io", "kind": "TokenRequest", "causes": causes})
    given = spec.get("audiences")
    if given is not None and (not isinstance(given, list) or not all(isinstance(a, str) for a in given)):
        raise ApiError.bad_request("spec.audiences must be a list of strings")
    audiences = list(given or ()) or [AUDIENCE]
    now = int(time.time())
    kube: dict[str, Any] = {"namespace": namespace, "serviceaccount": {"name": name, "uid": meta.get("uid", "")}}
    if bound_claims is not None:
        kube.update(bound_claims)
    elif bound:
        kube[str(bound["kind"]).lower()] = {"name": bound.get("name", ""), "uid": bound.get("uid", "")}
    claims = {"aud": audiences, "exp": now + seconds, "iat": now, "iss": ISSUER, "jti": str(uuid.uuid4()),
              "kubernetes.io": kube, "nbf": now, "sub": f"system:serviceaccount:{namespace}:{name}"}
    expires = datetime.fromtimestamp(now + seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"kind": "TokenRequest", "apiVersion": "authentication.k8s.io/v1",
            "metadata": {"name": name, "namespace": namespace,
                         "creationTimestamp": datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")},
            "spec": {"audiences": audiences, "expirationSeconds": seconds, "boundObjectRef": bound},
            "status": {"token": issuer.issue(claims), "expirationTimestamp": expires}}
