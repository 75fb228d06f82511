"""Calling a webhook as kube-apiserver calls one: where it is (a ``url``, or a
``service`` resolved to an address this machine can reach), the TLS it is trusted
with (its ``caBundle``, else the system roots) and the POST itself, with the
errors worded as client-go's REST client words them (``Post "https://...":
context deadline exceeded``).

Admission webhooks (``api/webhooks.py``) use it, and so do CRD conversion webhooks
(``api/crdconversion.py``): it takes a ``clientConfig`` and a JSON body, whatever the review.

A ``service`` reference names a Service; this emulator runs no pods, so only
these Services lead somewhere (``resolve``):

    ExternalName        its ``externalName`` host, at the reference's port
    without a selector  the addresses of the Endpoints or EndpointSlices a user
                        wrote for it (the usual way to run a webhook outside a
                        cluster), at the endpoint port of the Service port named

Either way the TLS server name is ``<service>.<namespace>.svc``, as upstream's.
Any other Service (one with a selector: its pods are simulated) is
``Unreachable``, as is one that does not exist.
"""

from __future__ import annotations

import asyncio
import base64
import socket
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx
import orjson

__all__ = ["CallError", "Endpoint", "Unreachable", "WebhookClients", "resolve"]

Obj = dict[str, Any]
# (kind, namespace, name) -> the object, or None; kind is "services", "endpoints" or
# "endpointslices" (for these, the name is the Service's: every slice of it)
Lookup = Callable[[str, str, str], Awaitable[Any]]


class CallError(Exception):
    """The call failed (client-go's words in ``str()``); ``status`` is the Status the
    webhook answered with, if it answered one with an error code."""

    def __init__(self, message: str, status: Obj | None = None) -> None:
        super().__init__(message)
        self.status = status


class Unreachable(CallError):
    """Nothing on this machine can answer for the Service: it is backed only by
    simulated pods, or is missing."""


@dataclass(frozen=True, slots=True)
class Endpoint:
    url: str  # as upstream builds it, for the request line and the errors (https://svc.ns.svc:443/path)
    host: str  # where to connect
    port: int
    server_name: str  # the name the certificate must carry (SNI and verification)
    ca_bundle: str  # base64 PEM, "" for the system roots


def _service_url(name: str, namespace: str, port: int, path: str) -> str:
    return f"https://{name}.{namespace}.svc:{port}{path or ''}"


async def resolve(config: Obj, lookup: Lookup) -> Endpoint:
    """Where the webhook of ``clientConfig`` ``config`` answers."""
    ca = str(config.get("caBundle") or "")
    url = config.get("url")
    if url:
        parts = urlsplit(str(url))
        host = parts.hostname or ""
        return Endpoint(str(url), host, parts.port or 443, host, ca)
    ref = config.get("service") or {}
    name, namespace = str(ref.get("name") or ""), str(ref.get("namespace") or "")
    port = int(ref.get("port") or 443)
    shown = _service_url(name, namespace, port, str(ref.get("path") or ""))
    server_name = f"{name}.{namespace}.svc"
    service = await lookup("services", namespace, name)
    if service is None:
        raise Unreachable(f'Post "{shown}": service "{name}" not found')
    spec = service.get("spec") or {}
    if spec.get("type") == "ExternalName":
        return Endpoint(shown, str(spec.get("externalName") or ""), port, server_name, ca)
    if spec.get("selector"):
        raise Unreachable(f'Post "{shown}": service "{name}" is backed by simulated pods only')
    port_name = ""
    for service_port in spec.get("ports") or ():
        if service_port.get("port") == port:
            port_name = str(service_port.get("name") or "")
            break
    else:
        raise Unreachable(f'Post "{shown}": service "{name}" has no port {port}')
    for address, target in await _addresses(lookup, namespace, name, port_name):
        return Endpoint(shown, address, target, server_name, ca)
    raise Unreachable(f'Post "{shown}": no endpoints available for service "{name}"')


async def _addresses(lookup: Lookup, namespace: str, name: str, port_name: str) -> list[tuple[str, int]]:
    """The (address, port)s a user wrote for a selector-less Service: its EndpointSlices' ready
    endpoints, else its Endpoints' addresses, at the port named ``port_name``."""
    found: list[tuple[str, int]] = []
    for eps in await lookup("endpointslices", namespace, name) or ():
        ports = [p for p in eps.get("ports") or () if str(p.get("name") or "") == port_name]
        if not ports or not isinstance(ports[0].get("port"), int):
            continue
        for endpoint in eps.get("endpoints") or ():
            if (endpoint.get("conditions") or {}).get("ready") is False:
                continue
            found.extend((address, ports[0]["port"]) for address in endpoint.get("addresses") or ())
    if found:
        return found
    endpoints = await lookup("endpoints", namespace, name)
    for subset in (endpoints or {}).get("subsets") or ():
        ports = [p for p in subset.get("ports") or () if str(p.get("name") or "") == port_name]
        if ports and isinstance(ports[0].get("port"), int):
            found.extend((str(a.get("ip")), ports[0]["port"]) for a in subset.get("addresses") or () if a.get("ip"))
    return found


class WebhookClients:
    """HTTP clients per trust (CA bundle and server name), kept for their connections: a
    webhook called on every write pays its TLS handshake once, as upstream's cached clients."""

    def __init__(self) -> None:
        self._clients: dict[tuple[str, str], httpx.AsyncClient] = {}

    def _client(self, endpoint: Endpoint) -> httpx.AsyncClient:
        key = (endpoint.ca_bundle, endpoint.server_name)
        client = self._clients.get(key)
        if client is None:
            context = ssl.create_default_context()
            if endpoint.ca_bundle:
                try:
                    pem = base64.b64decode(endpoint.ca_bundle).decode()
                    context = ssl.create_default_context(cadata=pem)
                except (ValueError, ssl.SSLError) as e:
                    raise CallError(f"unable to load root certificates: {e}") from e
            # (no timeout of httpx's own: each call's is the webhook's timeoutSeconds, below)
            client = self._clients[key] = httpx.AsyncClient(verify=context, trust_env=False, timeout=None)
        return client

    async def post(self, endpoint: Endpoint, body: bytes, timeout: float) -> Obj:
        """POST ``body`` (JSON) with ``?timeout=<n>s``, as upstream; the JSON answered, or a
        ``CallError`` in client-go's words."""
        seconds = max(1, int(-(-timeout // 1)))
        shown = f"{endpoint.url}{'&' if '?' in endpoint.url else '?'}timeout={seconds}s"
        parts = urlsplit(endpoint.url)
        host = f"[{endpoint.host}]" if ":" in endpoint.host else endpoint.host
        target = f"https://{host}:{endpoint.port}{parts.path or '/'}?{'' if not parts.query else parts.query + '&'}" \
                 f"timeout={seconds}s"
        headers = {"content-type": "application/json", "accept": "application/json, */*",
                   "user-agent": "kube-apiserver-admission", "host": parts.netloc}
        client = self._client(endpoint)
        try:
            async with asyncio.timeout(timeout):
                response = await client.post(target, content=body, headers=headers,
                                             extensions={"sni_hostname": endpoint.server_name})
        except TimeoutError as e:
            raise CallError(f'Post "{shown}": context deadline exceeded') from e
        except httpx.ConnectError as e:
            raise CallError(f'Post "{shown}": {_connect_error(e, endpoint)}') from e
        except httpx.HTTPError as e:
            raise CallError(f'Post "{shown}": {e or type(e).__name__}') from e
        try:
            answer = orjson.loads(response.content) if response.content else None
        except orjson.JSONDecodeError:
            answer = None
        if not 200 <= response.status_code < 300:
            if isinstance(answer, dict) and answer.get("kind") == "Status":
                raise CallError(str(answer.get("message") or ""), answer)
            text = response.text.strip()
            raise CallError(f"the server responded with the status code {response.status_code} but did not "
                            "return more information" if not text else
                            f"an error on the server ({text[:256]}) has prevented the request from succeeding",
                            {"code": response.status_code})
        if not isinstance(answer, dict):
            raise CallError("couldn't get version/kind; json parse error: the response is not a JSON object")
        return answer

    async def close(self) -> None:
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            await client.aclose()


def _connect_error(error: httpx.ConnectError, endpoint: Endpoint) -> str:
    """A connection's failure as Go's net and crypto/tls packages word the common ones."""
    chain: list[BaseException] = []
    cause: BaseException | None = error
    while cause is not None and len(chain) < 8:
        chain.append(cause)
        cause = cause.__cause__ or cause.__context__
    text = " ".join(str(e) for e in chain)
    where = f"{endpoint.host}:{endpoint.port}"
    if any(isinstance(e, ssl.SSLCertVerificationError) for e in chain) or "CERTIFICATE_VERIFY_FAILED" in text:
        if "Hostname mismatch" in text or "IP address mismatch" in text:
            return f"tls: failed to verify certificate: x509: certificate is valid for other names, " \
                   f"not {endpoint.server_name}"
        return "tls: failed to verify certificate: x509: certificate signed by unknown authority"
    if any(isinstance(e, ConnectionRefusedError) for e in chain):
        return f"dial tcp {where}: connect: connection refused"
    if any(isinstance(e, socket.gaierror) for e in chain):
        return f"dial tcp: lookup {endpoint.host}: no such host"
    return f"dial tcp {where}: {str(error) or type(error).__name__}"
