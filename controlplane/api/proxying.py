"""The ``proxy`` subresources of pods, services and nodes (``kubectl proxy`` then
``/api/v1/namespaces/NS/services/NAME/proxy/...``, ``kubectl get --raw
/api/v1/nodes/NAME/proxy/metrics``), answered as kube-apiserver answers them when nothing
listens where it would forward: a simulated pod serves nothing and a simulated node runs no
kubelet.

Before anything, admission: the request's ``PodProxyOptions``, ``ServiceProxyOptions`` or
``NodeProxyOptions`` (``proxy_options``) go to the webhooks and policies that take ``CONNECT``
on the subresource, which may refuse. Then kube-apiserver finds where to forward (upstream's
``ResourceLocation`` of each registry), each step failing with a Status of its own, then dials; ``refusal`` takes the
same steps and returns the first failure, which is the answer:

- the name on the URL may carry a scheme and a port (``name``, ``name:port``,
  ``https:name:port``; upstream's ``SplitSchemeNamePort``): anything else is 400
  ``invalid pod request "..."`` (``service``, ``node``);
- a pod: 404 when absent; 400 ``address not allowed`` before it has an IP, or when its IP is
  not global unicast (loopback, link-local, multicast: upstream's ``IsGlobalUnicast``);
- a service: 404 when absent; a port given by number must be one of the service's (503
  ``no service port N found for service "x"``); its Endpoints 404 when absent; none ready on
  the port asked is 503 ``no endpoints available for service "x"``;
- a node: 404 when absent; its kubelet's address as for ``exec`` (``streaming.py``), or, for
  another port, its address if an IP neither loopback nor link-local (400 ``address not
  allowed``);
- then the dial, which this server does not make: 503 ``error trying to reach service:
  ...``, the words of upstream's proxy transport when a dial fails, at once. (The
  ``kubernetes`` Service's endpoint is this server itself, which upstream would reach.)
"""

from __future__ import annotations

import ipaddress
from collections.abc import Awaitable, Callable
from typing import Any

from .errors import ApiError
from .streaming import kubelet_address

__all__ = ["PROXY_METHODS", "proxy_options", "refusal"]

# upstream's proxyMethods: what a proxy subresource forwards
PROXY_METHODS = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"})
_SCHEMES = ("", "http", "https")
_NOUNS = {"pods": "pod", "services": "service", "nodes": "node"}

Getter = Callable[[str], Awaitable[dict[str, Any]]]  # a name -> the object, or raise its 404


def proxy_options(kind: str, path: str, after: list[str]) -> dict[str, Any]:
    """The request's options as upstream's admission sees them: ``PodProxyOptions``,
    ``ServiceProxyOptions`` or ``NodeProxyOptions`` (``kind``: the resource's kind), whose
    ``path`` is the URL's after ``proxy`` (``after``, its segments), with a leading slash and
    the URL's trailing one (upstream's ``getRequestOptions``); left out when empty."""
    tail = "/".join(after)
    if tail and not tail.startswith("/"):
        tail = "/" + tail
    if path.endswith("/") and not tail.endswith("/"):
        tail += "/"
    return {"kind": f"{kind}ProxyOptions", "apiVersion": "v1", **({"path": tail} if tail else {})}


async def refusal(plural: str, id_on_url: str, get: Getter, endpoints_of: Getter) -> ApiError:
    """The Status that answers a request to ``<plural>/<id_on_url>/proxy[/...]``; ``get`` reads
    an object of ``plural``, ``endpoints_of`` a service's Endpoints."""
    scheme, name, port = _split(id_on_url, _NOUNS[plural])
    obj = await get(name)
    if plural == "pods":
        where = _pod_address(obj, port)
    elif plural == "services":
        where = await _service_address(obj, id_on_url, name, port, endpoints_of)
    else:
        scheme, where = _node_address(obj, scheme, port)
    return ApiError(503, "ServiceUnavailable",
                    f"error trying to reach service: this server does not forward to {scheme or 'http'}://{where}: "
                    "the cluster's pods and nodes are simulated and serve nothing")


def _split(id_on_url: str, noun: str) -> tuple[str, str, str]:
    """``(scheme, name, port)`` of ``name``, ``name:port`` or ``scheme:name:port``."""
    parts = id_on_url.split(":")
    if len(parts) == 1:
        scheme, name, port = "", parts[0], ""
    elif len(parts) == 2:
        scheme, name, port = "", parts[0], parts[1]
    elif len(parts) == 3:
        scheme, name, port = parts
    else:
        scheme, name, port = "", "", ""
    if not name or scheme not in _SCHEMES:
        raise ApiError.bad_request(f'invalid {noun} request "{id_on_url}"')
    return scheme, name, port


def _node_address(node: dict[str, Any], scheme: str, port: str) -> tuple[str, str]:
    """The node's kubelet (https) unless another port is asked, which only an IP may take
    (upstream's ``IsProxyableIP``: not loopback, not link-local)."""
    kubelet = kubelet_address(node)
    host, _, kubelet_port = kubelet.rpartition(":")
    if not port or port == kubelet_port:
        return "https", kubelet
    try:
        ip = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        raise ApiError.bad_request("address not allowed") from None
    if ip.is_loopback or ip.is_link_local:
        raise ApiError.bad_request("address not allowed")
    return scheme, f"{host}:{port}"


def _pod_address(pod: dict[str, Any], port: str) -> str:
    """The pod's first IP and the port asked, else its first declared container port."""
    status, spec = pod.get("status") or {}, pod.get("spec") or {}
    ips = [p.get("ip") for p in status.get("podIPs") or ()] or [status.get("podIP")]
    ip = ips[0] if ips else None
    if not ip or not _global_unicast(ip):
        raise ApiError.bad_request("address not allowed")
    if not port:
        port = next((str(p["containerPort"]) for c in spec.get("containers") or ()
                     for p in c.get("ports") or () if "containerPort" in p), "")
    host = f"[{ip}]" if ":" in ip else ip
    return f"{host}:{port}" if port else host


def _global_unicast(text: str) -> bool:
    """Whether ``text`` is an IP that Go's ``IsGlobalUnicast`` takes: not loopback, link-local
    (a cloud's metadata address), multicast, unspecified or the IPv4 broadcast address."""
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return not (ip.is_loopback or ip.is_link_local or ip.is_multicast or ip.is_unspecified
                or ip == ipaddress.IPv4Address("255.255.255.255"))


async def _service_address(service: dict[str, Any], id_on_url: str, name: str, port: str,
                           endpoints_of: Getter) -> str:
    """An address ready behind the service's port named (or numbered) ``port``; the messages
    name the service as upstream's do (its name when its Endpoints have no subset, the URL's
    id when no subset has a ready address on the port)."""
    if port.isdigit():
        declared = next((p for p in (service.get("spec") or {}).get("ports") or ()
                         if str(p.get("port")) == port), None)
        if declared is None:
            raise ApiError(503, "ServiceUnavailable", f'no service port {port} found for service "{name}"')
        port = declared.get("name") or ""
    endpoints = await endpoints_of(name)
    if not endpoints.get("subsets"):
        raise ApiError(503, "ServiceUnavailable", f'no endpoints available for service "{name}"')
    for subset in endpoints.get("subsets") or ():
        ready = subset.get("addresses") or ()
        match = next((p for p in subset.get("ports") or () if (p.get("name") or "") == port), None)
        if ready and match is not None and ready[0].get("ip"):
            ip = ready[0]["ip"]
            return f"[{ip}]:{match.get('port')}" if ":" in ip else f"{ip}:{match.get('port')}"
    raise ApiError(503, "ServiceUnavailable", f'no endpoints available for service "{id_on_url}"')
