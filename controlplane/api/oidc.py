"""The service account issuer's OpenID Connect discovery, as kube-apiserver serves it
(``pkg/serviceaccount/openidmetadata.go``, ``pkg/routes/openidmetadata.go``).

- ``GET /.well-known/openid-configuration``: the provider configuration, ``issuer`` (the
  first ``--service-account-issuer``), ``jwks_uri``, ``response_types_supported``
  ``["id_token"]``, ``subject_types_supported`` ``["public"]`` and
  ``id_token_signing_alg_values_supported`` (the verifying keys' algorithms, sorted);
- ``GET /openid/v1/jwks``: the verifying keys as a JWK set (``application/jwk-set+json``).

Both are rendered once (the keys change only with a restart) and say ``Cache-Control:
public, max-age=3600``. ``jwks_uri`` is ``--service-account-jwks-uri``, else the keys' path
on this server's address. As upstream, they are served only for an issuer that is an
``https`` URL without query or fragment (relying parties fetch the configuration under
it); for another issuer the paths are not found and the reason is logged. Reading them
is a non-resource ``get``: every service account may, through the bootstrap
``system:service-account-issuer-discovery`` role (``rbac.py``); Vault, SPIFFE and
workload-identity federation read them to verify tokens without asking the server.
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import urlsplit

import orjson

from .jws import algorithm, jwk
from .tokenrequest import TokenIssuer

__all__ = ["CONFIGURATION_PATH", "JWKS_PATH", "PATHS", "Discovery", "discovery_for"]

log = logging.getLogger(__name__)

CONFIGURATION_PATH = "/.well-known/openid-configuration"
JWKS_PATH = "/openid/v1/jwks"
PATHS = frozenset({CONFIGURATION_PATH, JWKS_PATH})
CACHE_CONTROL = b"public, max-age=3600"


def _https_url_problem(what: str, url: str) -> str | None:
    parts = urlsplit(url)
    if parts.scheme != "https":
        return f"{what} {url!r} has invalid scheme, must be https"
    if parts.query:
        return f"{what} {url!r} has disallowed query"
    if parts.fragment:
        return f"{what} {url!r} has disallowed fragment"
    return None


def discovery_for(issuer: TokenIssuer, jwks_uri: str, server_url: str) -> Discovery | None:
    """The documents of ``issuer``, their keys at ``jwks_uri`` (or ``server_url`` + the
    keys' path); None, logged, when the issuer or the URI is no https URL, as upstream."""
    uri = jwks_uri or server_url.rstrip("/") + JWKS_PATH
    problem = _https_url_problem("service account issuer", issuer.issuer) or \
        (_https_url_problem("jwks_uri", uri) if jwks_uri else None)
    if problem is not None:
        log.warning("the service account issuer discovery endpoints are not served: %s", problem)
        return None
    return Discovery(issuer, uri)


class Discovery:
    """The two documents, rendered on first use (the keys are read then)."""

    def __init__(self, issuer: TokenIssuer, jwks_uri: str) -> None:
        self.issuer = issuer
        self.jwks_uri = jwks_uri
        self._rendered: dict[str, tuple[bytes, bytes]] | None = None  # path -> (content type, body)

    def documents(self) -> dict[str, tuple[bytes, bytes]]:
        if self._rendered is None:
            keys = self.issuer.public_keys()
            configuration = {"issuer": self.issuer.issuer, "jwks_uri": self.jwks_uri,
                             "response_types_supported": ["id_token"], "subject_types_supported": ["public"],
                             "id_token_signing_alg_values_supported": sorted({algorithm(k) for k in keys})}
            self._rendered = {
                CONFIGURATION_PATH: (b"application/json", orjson.dumps(configuration)),
                JWKS_PATH: (b"application/jwk-set+json", orjson.dumps({"keys": [jwk(k) for k in keys]})),
            }
        return self._rendered

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        """ASGI: GET of one of ``PATHS`` (the caller checked who asks); another method is 405."""
        if scope["method"] != "GET":
            body = orjson.dumps({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                 "message": "the server does not allow this method on the requested resource",
                                 "reason": "MethodNotAllowed", "details": {}, "code": 405})
            await _respond(send, 405, b"application/json", body, ())
            return
        content_type, body = self.documents()[scope["path"].rstrip("/")]  # (a trailing slash: the same route)
        await _respond(send, 200, content_type, body, ((b"cache-control", CACHE_CONTROL),))


async def _respond(send: Any, status: int, content_type: bytes, body: bytes,
                   headers: tuple[tuple[bytes, bytes], ...]) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", content_type), (b"content-length", str(len(body)).encode()),
                            *headers]})
    await send({"type": "http.response.body", "body": body})
