"""Service account tokens: ``serviceaccounts/<name>/token`` (TokenRequest), and their authentication.

A TokenRequest (authentication.k8s.io/v1) for an existing ServiceAccount is answered
with a JWT signed as kube-apiserver signs them (``jws.py``: RS256 with the generated
``pki/sa.key``, or the algorithm of ``--service-account-signing-key-file``; a ``kid``
derived from the public key) whose claims are upstream's (``pkg/serviceaccount/claims.go``):
``aud``, ``exp``, ``iat``, ``iss`` (the first ``--service-account-issuer``), ``jti`` (a
random UUID), ``nbf``, ``sub`` ``system:serviceaccount:<namespace>:<name>``, and
``kubernetes.io`` with the namespace, the service account's name and uid, the bound
object's (a pod's with its node's) and ``warnafter`` for the kubelet's extended tokens.
``expirationSeconds`` defaults to an hour and may not be under ten minutes nor over 2^32
seconds (422); audiences default to the server's (``--api-audiences``, by default the
issuers). As upstream's TokenREST, after the bound object is looked up: a request for more
than ``--service-account-max-token-expiration`` (``TokenIssuer.max_seconds``, 0: no
limit) is shortened to it, with a warning, ``spec.expirationSeconds`` and
``status.expirationTimestamp`` saying so; then a pod-bound token asked for 3607 s for the
server's audiences is kubelet's projected token: with
``--service-account-extend-token-expiration`` (``TokenIssuer.extend``, on by default) it
is valid a year whatever the maximum (``exp``), warning after the 3607 s (``warnafter``),
while the TokenRequest tells its client 3607 s. This is what ``kubectl create token``
asks for.

A bearer token that is such a JWT authenticates (``TokenIssuer.authenticate``, as
upstream's ``JWTTokenAuthenticator`` and its validator) when one of the verifying keys
signed it (or, HS256, the secret an earlier version signed with, while the state directory
keeps it: ``pki.py``), its ``iss`` is one of the issuers, it is within ``nbf``..``exp`` (a minute of
leeway either side, as go-jose's), its service account exists with the uid it names, and
so does its bound object: a deleted (or recreated) pod, secret or node, or one deleted
more than a minute ago and still terminating, takes its tokens along. The user is
``system:serviceaccount:<namespace>:<name>`` with the account's uid, the groups
``system:serviceaccounts`` and ``system:serviceaccounts:<namespace>``, and the extras
``authentication.kubernetes.io/pod-name``, ``pod-uid``, ``node-name``, ``node-uid`` and
``credential-id`` (``JTI=<jti>``). The signature and claims of a token are checked once
and kept (``CACHE_SIZE`` tokens): an RSA verification costs about 60 µs, and every request
of a pod presents the same token; its times and bound objects are checked every time.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from ..config import SA_EXTENDED_SECONDS, SA_WARN_ONLY_SECONDS
from ..pki import ensure_service_account_key, legacy_service_account_secret
from .errors import ApiError
from .fieldvalidation import add_warning
from .jws import KeyFileError, PublicKey, Signer, Verifier, read_private_key, read_public_keys
from .rbac import User

__all__ = ["AUDIENCE", "ISSUER", "ServiceAccountKeys", "TokenIssuer", "Verified", "account_of", "account_user",
           "token_request", "token_request_looked_up"]

ISSUER = "https://kubernetes.default.svc.cluster.local"  # kubeadm's, kind's: the default here
AUDIENCE = ISSUER
DEFAULT_SECONDS = 3600
MIN_SECONDS = 600
MAX_SECONDS = 1 << 32
WARN_ONLY_SECONDS = SA_WARN_ONLY_SECONDS  # kubelet asks this for projected tokens: extended, warned about after
EXTENDED_SECONDS = SA_EXTENDED_SECONDS  # upstream's ExpirationExtensionSeconds
LEEWAY = 60  # go-jose's DefaultLeeway, for exp, nbf, iat and a bound object's deletion
CACHE_SIZE = 4096  # tokens whose signature and claims were checked

EXTRA_POD_NAME = "authentication.kubernetes.io/pod-name"
EXTRA_POD_UID = "authentication.kubernetes.io/pod-uid"
EXTRA_NODE_NAME = "authentication.kubernetes.io/node-name"
EXTRA_NODE_UID = "authentication.kubernetes.io/node-uid"
EXTRA_CREDENTIAL_ID = "authentication.kubernetes.io/credential-id"


class ServiceAccountKeys:
    """The key that signs tokens and the keys that verify them, read on first use: the
    generated ``sa.key`` of a state directory (made then if absent, ``pki.py``), or
    ``--service-account-signing-key-file``; and ``--service-account-key-file`` (the public
    keys: with a signing key file, all of them, its own when none are given, as kube-apiserver
    defaults them; with the generated key, those besides it, such as the key it replaced).
    The HMAC secret an earlier version of the state directory signed with, if kept
    (``legacy_secret``), verifies the HS256 tokens it signed."""

    def __init__(self, signing_key_file: Path | None = None, key_files: tuple[Path, ...] = (),
                 generated_in: Path | None = None) -> None:
        if signing_key_file is None and generated_in is None:
            raise ValueError("a signing key file or a directory to generate one in")
        self.signing_key_file = signing_key_file
        self.key_files = key_files
        self.generated_in = generated_in
        self._loaded: tuple[Signer, Verifier] | None = None

    def load(self) -> tuple[Signer, Verifier]:
        """The signer and verifier (raises ``jws.KeyFileError`` or ``OSError``)."""
        if self._loaded is None:
            path = self.signing_key_file
            if path is None:
                assert self.generated_in is not None
                path = ensure_service_account_key(self.generated_in)
                files = (path, *self.key_files)
            else:
                files = self.key_files or (path,)
            signer = Signer(read_private_key(path))
            legacy = self.legacy_secret()
            self._loaded = signer, Verifier((k for f in files for k in read_public_keys(f)),
                                            secrets=() if legacy is None else (legacy[1],))
        return self._loaded

    def legacy_secret(self) -> tuple[Path, bytes] | None:
        """(its file, the secret): the earlier version's HMAC secret the state directory keeps,
        if any (``pki.py``)."""
        return legacy_service_account_secret(self.generated_in) if self.generated_in is not None else None


class TokenIssuer:
    """Issues and verifies the tokens of ``issuers`` (the first one signs) for ``audiences``."""

    def __init__(self, keys: ServiceAccountKeys, issuers: tuple[str, ...] = (ISSUER,),
                 audiences: tuple[str, ...] = (), max_seconds: int = 0, extend: bool = True) -> None:
        self.keys = keys
        self.issuers = issuers or (ISSUER,)
        self.audiences = audiences or self.issuers  # kube-apiserver's --api-audiences default
        self.max_seconds = max_seconds  # --service-account-max-token-expiration (0: none)
        self.extend = extend  # --service-account-extend-token-expiration
        self._verified: dict[str, Verified] = {}  # token -> what its checked claims say, oldest first

    @classmethod
    def in_directory(cls, directory: Path) -> TokenIssuer:
        """The issuer of the key generated in ``directory/sa.key`` (made on first use)."""
        return cls(ServiceAccountKeys(generated_in=directory))

    @property
    def issuer(self) -> str:
        return self.issuers[0]

    def public_keys(self) -> list[PublicKey]:
        return self.keys.load()[1].keys

    def issue(self, claims: dict[str, Any]) -> str:
        """The signed token of ``claims``, ``iss`` set to the issuer unless they have one."""
        return self.keys.load()[0].sign({"iss": self.issuer, **claims})

    def claims(self, token: str) -> dict[str, Any] | None:
        """The claims of a genuine token of these issuers naming a service account, within its
        validity (``LEEWAY`` either side); None otherwise. Checked once per token, then kept."""
        verified = self._current(token)
        return verified.claims if verified is not None else None

    def _current(self, token: str) -> Verified | None:
        verified = self._verified.get(token)
        if verified is None:
            claims = self._checked(token)
            if claims is None:
                return None
            verified = Verified(claims)
            if len(self._verified) >= CACHE_SIZE:
                del self._verified[next(iter(self._verified))]
            self._verified[token] = verified
        now = time.time()
        if verified.expires + LEEWAY < now or verified.starts - LEEWAY > now:
            return None
        return verified

    def _checked(self, token: str) -> dict[str, Any] | None:
        payload = self.keys.load()[1].payload(token)
        if payload is None:
            return None
        try:
            claims = orjson.loads(payload)
        except orjson.JSONDecodeError:
            return None
        if not isinstance(claims, dict) or claims.get("iss") not in self.issuers:
            return None
        if any(k in claims and (not isinstance(claims[k], int | float) or isinstance(claims[k], bool))
               for k in ("exp", "nbf", "iat")):
            return None
        kube = claims.get("kubernetes.io")
        if not isinstance(kube, dict) or not isinstance(kube.get("namespace"), str) or not kube["namespace"]:
            return None
        account = kube.get("serviceaccount")
        if not isinstance(account, dict) or not isinstance(account.get("name"), str) or not account["name"]:
            return None
        if any(k in kube and not _is_ref(kube[k]) for k in ("pod", "secret", "node")):
            return None
        return claims

    async def authenticate(self, token: str, get: Getter) -> tuple[User, list[str]] | None:
        """The user a token authenticates and the audiences it names, or None: its claims
        (``claims``), then its service account and bound objects as they are now, read
        through ``get(plural, namespace, name)`` (None when missing)."""
        verified = self._current(token)
        if verified is None or not await _objects_stand(verified.claims, get):
            return None
        return verified.user, verified.audiences


class Verified:
    """A checked token's claims, and what they say: its times, user and audiences."""

    __slots__ = ("audiences", "claims", "expires", "starts", "user")

    def __init__(self, claims: dict[str, Any]) -> None:
        self.claims = claims
        self.expires: float = claims.get("exp", float("inf"))
        self.starts: float = max(claims.get("nbf", 0), claims.get("iat", 0))
        self.user = account_user(claims)
        audiences = claims.get("aud")
        self.audiences = [audiences] if isinstance(audiences, str) else [str(a) for a in audiences or ()]


Getter = Callable[[str, str | None, str], Awaitable[dict[str, Any] | None]]
Admit = Callable[[dict[str, Any]], Awaitable[None]]


def _is_ref(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get("name"), str) and isinstance(value.get("uid", ""), str)


def _gone(obj: dict[str, Any] | None, uid: str, now: float) -> bool:
    """Whether a token's account or bound object no longer stands: missing, another uid (deleted
    and made again), or deleted more than ``LEEWAY`` ago and still terminating."""
    if obj is None:
        return True
    meta = obj.get("metadata") or {}
    if str(meta.get("uid") or "") != uid:
        return True
    deleted = meta.get("deletionTimestamp")
    if isinstance(deleted, str):
        try:
            return datetime.fromisoformat(deleted.replace("Z", "+00:00")).timestamp() < now - LEEWAY
        except ValueError:
            return True
    return False


async def _objects_stand(claims: dict[str, Any], get: Getter) -> bool:
    """Upstream's validator: the service account, and the pod, secret or node the token is
    bound to (not the node of a pod-bound token: the pod goes with it), as they are now."""
    now = time.time()
    kube = claims["kubernetes.io"]
    namespace, name, uid = account_of(claims)
    if _gone(await get("serviceaccounts", namespace, name), uid, now):
        return False
    for kind, plural in (("secret", "secrets"), ("pod", "pods")):
        ref = kube.get(kind)
        if ref is not None and _gone(await get(plural, namespace, ref["name"]), ref.get("uid", ""), now):
            return False
    node = kube.get("node")
    return not (node is not None and "pod" not in kube
                and _gone(await get("nodes", None, node["name"]), node.get("uid", ""), now))


def account_user(claims: dict[str, Any]) -> User:
    """The user checked claims name, with upstream's extras: the pod and node a token is bound
    to, its credential id (``JTI=<jti>``)."""
    kube = claims["kubernetes.io"]
    namespace, name, uid = account_of(claims)
    extra: list[tuple[str, tuple[str, ...]]] = []
    if (pod := kube.get("pod")) is not None:
        extra += [(EXTRA_POD_NAME, (pod["name"],)), (EXTRA_POD_UID, (pod.get("uid", ""),))]
    if (node := kube.get("node")) is not None:
        extra.append((EXTRA_NODE_NAME, (node["name"],)))
        if node.get("uid"):
            extra.append((EXTRA_NODE_UID, (node["uid"],)))
    if isinstance(jti := claims.get("jti"), str) and jti:
        extra.append((EXTRA_CREDENTIAL_ID, (f"JTI={jti}",)))
    return User(f"system:serviceaccount:{namespace}:{name}",
                ("system:serviceaccounts", f"system:serviceaccounts:{namespace}"), uid=uid,
                extra=tuple(sorted(extra))).with_authenticated()


def account_of(claims: dict[str, Any]) -> tuple[str, str, str]:
    """The (namespace, name, uid) of the service account verified claims name."""
    kube = claims["kubernetes.io"]
    account = kube["serviceaccount"]
    return str(kube["namespace"]), str(account["name"]), str(account.get("uid") or "")


async def token_request_looked_up(issuer: TokenIssuer, account: dict[str, Any], body: Any,
                                  get: Getter, admit: Admit | None = None) -> dict[str, Any]:
    """``token_request`` with its bound object looked up through ``get(plural, namespace, name)``
    (None when missing), as upstream's TokenREST does after validating the request: a missing
    object is 404, a pod of another service account 400, a ``uid`` that is not the object's 409;
    a pod's token names its node too (ServiceAccountTokenPodNodeInfo), without a uid if the
    node is gone. ``admit``, when given, is validating admission, called between the two as
    upstream's ``createValidation``, with the TokenRequest as defaulted (the account's name,
    namespace and uid, the audiences, its creation time, an empty status)."""
    checked = token_request(issuer, account, body, bound_claims={}, sign=False)  # the validation first
    if admit is not None:  # the request's own metadata (labels, annotations) kept, as upstream's req
        asked_meta = body.get("metadata")
        checked["metadata"] = {**(asked_meta if isinstance(asked_meta, dict) else {}), **checked["metadata"]}
        if checked["spec"]["boundObjectRef"] is None:
            del checked["spec"]["boundObjectRef"]  # (omitempty)
        checked["status"] = {"token": "", "expirationTimestamp": None}
        await admit(checked)
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


def _invalid(name: str, causes: list[dict[str, str]]) -> ApiError:
    """Upstream's NewInvalid of a TokenRequest (its validation names no object: ``""``)."""
    listed = ", ".join(f"{c['field']}: {c['message']}" for c in causes)
    return ApiError(422, "Invalid", f'TokenRequest.authentication.k8s.io "{name}" is invalid: '
                    + (listed if len(causes) == 1 else f"[{listed}]"),
                    {"name": name, "group": "authentication.k8s.io", "kind": "TokenRequest", "causes": causes}
                    if name else {"group": "authentication.k8s.io", "kind": "TokenRequest", "causes": causes})


def _undecodable(value: Any, field: str, go_type: str) -> ApiError:
    """A spec field of another JSON type, in the words of Go's decoder (a 400, not a 422)."""
    if isinstance(value, bool):
        kind = "bool"
    elif isinstance(value, int) and go_type == "int64":
        kind = f"number {value}"  # (past int64)
    else:
        kind = {str: "string", list: "array", dict: "object", float: "number"}.get(type(value), "number")
    return ApiError.bad_request(f'TokenRequest in version "v1" cannot be handled as a TokenRequest: json: cannot '
                                f"unmarshal {kind} into Go struct field TokenRequestSpec.spec.{field} of type "
                                f"{go_type}")


def token_request(issuer: TokenIssuer, account: dict[str, Any], body: Any,
                  bound_claims: dict[str, Any] | None = None, sign: bool = True) -> dict[str, Any]:
    """The TokenRequest answered for ``account`` (the stored ServiceAccount), from the request ``body``;
    ``bound_claims``, when given, are the ``kubernetes.io`` claims of its bound object
    (``token_request_looked_up``), else they are taken from its ``boundObjectRef`` as it is.
    Without ``sign``, the request is only validated."""
    if not isinstance(body, dict) or body.get("kind") not in (None, "TokenRequest"):
        raise ApiError.bad_request("the request body must be a TokenRequest")
    spec = body.get("spec") or {}
    if not isinstance(spec, dict):
        raise ApiError.bad_request("spec must be an object")
    meta = account.get("metadata") or {}
    namespace, name = meta.get("namespace", ""), meta.get("name", "")
    asked_meta = body.get("metadata") or {}
    for field, value in (("name", name), ("namespace", namespace)):  # the body may name the URL's account only
        given = asked_meta.get(field) if isinstance(asked_meta, dict) else None
        if given and given != value:
            raise _invalid(name, [{"reason": "FieldValueInvalid", "field": f"metadata.{field}",
                                   "message": f'Invalid value: "{given}": must match the service account '
                                              f"{field} if specified"}])
    seconds = spec.get("expirationSeconds")
    seconds = DEFAULT_SECONDS if seconds is None else seconds
    if not isinstance(seconds, int) or isinstance(seconds, bool) or not -2**63 <= seconds < 2**63:
        raise _undecodable(seconds, "expirationSeconds", "int64")
    causes = []
    if not isinstance(seconds, int) or isinstance(seconds, bool) or seconds < MIN_SECONDS:
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
        raise _invalid("", causes)
    given = spec.get("audiences")
    if given is not None and not isinstance(given, list):
        raise _undecodable(given, "audiences", "[]string")
    for audience in given or ():
        if not isinstance(audience, str):
            raise _undecodable(audience, "audiences", "string")
    audiences = list(given or ()) or list(issuer.audiences)
    if sign and issuer.max_seconds and seconds > issuer.max_seconds:
        add_warning(f"requested expiration of {seconds} seconds shortened to {issuer.max_seconds} seconds")
        seconds = issuer.max_seconds
    now = int(time.time())
    kube: dict[str, Any] = {"namespace": namespace, "serviceaccount": {"name": name, "uid": meta.get("uid", "")}}
    if bound_claims is not None:
        kube.update(bound_claims)
    elif bound:
        kube[str(bound["kind"]).lower()] = {"name": bound.get("name", ""), "uid": bound.get("uid", "")}
    lifetime = seconds
    if issuer.extend and "pod" in kube and seconds == WARN_ONLY_SECONDS and set(audiences) <= set(issuer.audiences):
        lifetime = EXTENDED_SECONDS  # kubelet's projected token: good a year, stale after the hour
        kube["warnafter"] = now + seconds
    claims = {"aud": audiences, "exp": now + lifetime, "iat": now, "iss": issuer.issuer, "jti": str(uuid.uuid4()),
              "kubernetes.io": kube, "nbf": now, "sub": f"system:serviceaccount:{namespace}:{name}"}
    expires = datetime.fromtimestamp(now + seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    try:
        token = issuer.issue(claims) if sign else ""
    except (OSError, KeyFileError) as e:  # the generated key could not be made or read
        raise ApiError(500, "InternalError", f"Internal error occurred: failed to generate token: {e}",
                       {"causes": [{"message": f"failed to generate token: {e}"}]}) from None
    return {"kind": "TokenRequest", "apiVersion": "authentication.k8s.io/v1",
            "metadata": {"name": name, "namespace": namespace, "uid": meta.get("uid", ""),
                         "creationTimestamp": datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")},
            "spec": {"audiences": audiences, "expirationSeconds": seconds, "boundObjectRef": bound},
            "status": {"token": token, "expirationTimestamp": expires}}
