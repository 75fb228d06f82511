"""A pod's streaming subresources, ``exec``, ``attach`` and ``portforward`` (``kubectl exec``,
``cp``, ``attach``, ``port-forward``), answered as kube-apiserver answers them when it cannot
reach the node's kubelet: a simulated node runs no kubelet server and no container.

kube-apiserver turns such a request into a kubelet URL before it connects (upstream's
``ConnectResource``, then ``streamLocation`` or ``PortForwardLocation``), and each step fails
with a Status of its own. ``connect_options`` takes the first two steps, ``refusal`` the others,
in the same order; the first failure is the answer:

1. ``dryRun`` in the query: 400 ``dryRun is not supported``;
2. the options (``PodExecOptions``, ``PodAttachOptions``, ``PodPortForwardOptions``) decode
   from the query; only a port that is not a number fails (400, the ``strconv`` error);
   booleans read as every query boolean does (``params.flag``), a string is its first value;
   then admission: the webhooks and ValidatingAdmissionPolicies that take ``CONNECT`` on the
   subresource see the options (``connect_options``) and may refuse; a mutating webhook's
   patch changes them (``KubeApi._admit_connect``, ``api/webhooks.py``);
3. the pod: 404 when it is not there;
4. the container (exec and attach): one named must be among the pod's containers, init and
   ephemeral ones included; one must be named when the pod has several (400, upstream's
   ``validateContainer`` words);
5. the node: a pod not bound yet is 400 ``pod X does not have a host assigned``; a node gone
   is 404; a node without an address 503 (upstream: 500);
6. a request that is no upgrade (neither websocket nor SPDY) is 400 ``Upgrade request
   required``;
7. the dial to the kubelet, which no simulated node answers: ``error dialing backend: ...``
   (upstream's words when the kubelet's port refuses), at once, never a hang.

Upstream answers the last two with a 500 and no reason. Here they are 503
``ServiceUnavailable``: what fails is a backend this emulator does not have, not the server,
and a 500 from this server always means a fault of its own (tests and load runs count them).
kubectl prints the message alike and exits 1 either way.

Except for an exec or attach over a websocket that offers ``v5.channel.k8s.io`` (kubectl's
first try, the JavaScript client's and the Python client's only one): kube-apiserver 1.30 and
later translates those to the kubelet's SPDY itself (``StreamTranslatorHandler``, chosen by
``IsWebSocketRequestWithStreamCloseProtocol``), and it switches protocols before it dials.
Its failed dial then comes on the stream: ``switched`` answers 101 with that subprotocol, an
empty message on the lowest channel the client reads (stdout, stderr, else the error
channel, as ``createWebSocketStreams`` signals the streams are ready), the error channel's
(3) Status, upstream's ``NewInternalError`` of the dial's error (without ``kind`` and
``apiVersion``, as ``writeStatus`` marshals it), and a close frame. A client that sees the
Status there (``Exec``'s status callback in JavaScript, ``WSClient.returncode`` in Python,
kubectl's ``error executing remote command: Internal error occurred: error dialing backend:
...``) sees what a real cluster with an unreachable kubelet sends. Portforward (its websocket
tunnels SPDY: upstream dials before it upgrades), SPDY and websockets without ``v5`` get the
Status as an HTTP answer, as before.

Over websockets, upstream also wants ``create`` on the subresource, not only ``get``
(``AuthorizePodWebsocketUpgradeCreatePermission``): see ``needs_create``. (Upstream asks it
in ``Connect``, after admission; here it is asked with the request's authorization, before.)
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Awaitable, Callable, Iterable
from typing import Any
from urllib.parse import parse_qsl

import orjson

from .errors import ApiError
from .params import flag

__all__ = ["STREAMING_SUBRESOURCES", "Undialled", "connect_options", "is_upgrade", "kubelet_address",
           "needs_create", "refusal", "switched", "translated_key"]

STREAMING_SUBRESOURCES = frozenset({"exec", "attach", "portforward"})
# the kubelet's port when the node's status names none (kube-apiserver's --kubelet-port)
KUBELET_PORT = 10250
# kube-apiserver's --kubelet-preferred-address-types, in its default order
_ADDRESS_TYPES = ("Hostname", "InternalDNS", "InternalIP", "ExternalDNS", "ExternalIP")

Getter = Callable[[str], Awaitable[dict[str, Any]]]  # a name -> the object, or raise its 404

# the remote command protocol kube-apiserver translates to SPDY itself (remotecommand's
# StreamProtocolV5Name), and its channels: stdout 1, stderr 2, error 3
STREAM_CLOSE_PROTOCOL = b"v5.channel.k8s.io"
_STDOUT, _STDERR, _ERROR = 1, 2, 3
_WEBSOCKET_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"  # RFC 6455's, for Sec-WebSocket-Accept


class Undialled(ApiError):
    """Step 7: the node's kubelet, which nothing answers."""


def is_upgrade(headers: Iterable[tuple[bytes, bytes]]) -> bool:
    """Whether a request asks to switch protocols, as upstream's ``httpstream.IsUpgradeRequest``:
    a ``Connection`` header that mentions ``upgrade``, in any case."""
    return any(k.lower() == b"connection" and b"upgrade" in v.lower() for k, v in headers)


def needs_create(method: str, subresource: str, headers: Iterable[tuple[bytes, bytes]]) -> bool:
    """Whether this request needs ``create`` on the subresource besides the ``get`` its GET
    asks: a websocket upgrade of exec, attach or portforward does, as SPDY's POST does."""
    return method == "GET" and subresource in STREAMING_SUBRESOURCES and is_upgrade(headers)


def connect_options(subresource: str, query_string: bytes) -> dict[str, Any]:
    """Steps 1 and 2: the request's options as ``v1`` JSON (``PodExecOptions``,
    ``PodAttachOptions``, ``PodPortForwardOptions``), decoded from the query as upstream's
    parameter codec does (a string its first value, a boolean ``Convert_Slice_string_To_bool``'s,
    fields left out when empty as their ``omitempty`` tags; exec's ``command`` is always
    there); a 400 raised when the request is a dry run or a port is not a number."""
    pairs = parse_qsl(query_string.decode("latin-1"), keep_blank_values=True)
    if any(k == "dryRun" for k, _ in pairs):
        raise ApiError.bad_request("dryRun is not supported")
    if subresource == "portforward":
        ports = _ports(v for k, v in pairs if k == "ports")
        return {"kind": "PodPortForwardOptions", "apiVersion": "v1", **({"ports": ports} if ports else {})}
    first: dict[str, str] = {}
    for key, value in pairs:
        first.setdefault(key, value)
    options: dict[str, Any] = {"kind": "PodExecOptions" if subresource == "exec" else "PodAttachOptions",
                               "apiVersion": "v1"}
    for key in ("stdin", "stdout", "stderr", "tty"):
        if key in first and flag(first, key):
            options[key] = True
    if first.get("container"):
        options["container"] = first["container"]
    if subresource == "exec":
        options["command"] = [v for k, v in pairs if k == "command"] or None
    return options


async def refusal(name: str, options: dict[str, Any], headers: Iterable[tuple[bytes, bytes]],
                  pod_named: Getter, node_named: Getter) -> ApiError:
    """The Status that answers a pod's exec, attach or portforward request of ``options``
    (``connect_options``, then admitted), steps 3 to 7 above."""
    pod = await pod_named(name)
    spec = pod.get("spec") or {}
    if options.get("kind") != "PodPortForwardOptions":
        _container(name, spec, str(options.get("container") or ""))
    node_name = spec.get("nodeName")
    if not node_name:
        return ApiError.bad_request(f"pod {name} does not have a host assigned")
    where = kubelet_address(await node_named(node_name))
    if not is_upgrade(headers):
        return ApiError.bad_request("Upgrade request required")
    return Undialled(503, "ServiceUnavailable",
                     f'error dialing backend: no kubelet serves node "{node_name}" ({where}): '
                     "this cluster's nodes are simulated and their containers do not run")


def translated_key(method: str, subresource: str, headers: Iterable[tuple[bytes, bytes]]) -> bytes | None:
    """The ``Sec-WebSocket-Key`` of an exec or attach that upstream hands to its stream
    translator, which upgrades before it dials: a websocket GET (``Upgrade: websocket``, a
    ``Connection`` that says upgrade, version 13, a key) offering ``v5.channel.k8s.io`` among
    its subprotocols. None for any other request."""
    if method != "GET" or subresource not in ("exec", "attach"):
        return None
    upgrade = connection = version = key = b""
    offered: list[bytes] = []
    for name, value in headers:
        lname = name.lower()
        if lname == b"upgrade":
            upgrade = value
        elif lname == b"connection":
            connection = value
        elif lname == b"sec-websocket-version":
            version = value
        elif lname == b"sec-websocket-key":
            key = value.strip()
        elif lname == b"sec-websocket-protocol":
            offered += [p.strip() for p in value.split(b",")]
    if upgrade.strip().lower() != b"websocket" or b"upgrade" not in connection.lower():
        return None
    if version.strip() != b"13" or not key or STREAM_CLOSE_PROTOCOL not in offered:
        return None
    return key


def switched(key: bytes, options: dict[str, Any], failure: ApiError) -> tuple[list[tuple[bytes, bytes]], bytes]:
    """The 101's headers and the whole websocket session that follows it, for an exec or attach
    of ``options`` whose kubelet ``failure`` says cannot be dialled: a message on the first
    channel the client reads, the error channel's Status, the close (see the module's doc)."""
    accept = base64.b64encode(hashlib.sha1(key + _WEBSOCKET_GUID).digest())  # (RFC 6455's hash)
    headers = [(b"upgrade", b"websocket"), (b"connection", b"Upgrade"),
               (b"sec-websocket-accept", accept), (b"sec-websocket-protocol", STREAM_CLOSE_PROTOCOL)]
    first = _STDOUT if options.get("stdout") else _STDERR if options.get("stderr") else _ERROR
    status = {"metadata": {}, "status": "Failure", "message": f"Internal error occurred: {failure.message}",
              "reason": "InternalError", "details": {"causes": [{"message": failure.message}]}, "code": 500}
    session = b"".join([_frame(0x2, bytes([first])), _frame(0x2, bytes([_ERROR]) + orjson.dumps(status)),
                        _frame(0x8, (1000).to_bytes(2, "big"))])  # (1000: a normal closure)
    return headers, session


def _frame(opcode: int, payload: bytes) -> bytes:
    """One final, unmasked websocket frame (a server's, RFC 6455 section 5.2)."""
    n = len(payload)
    if n < 126:
        size = bytes([n])
    elif n < 1 << 16:
        size = bytes([126]) + n.to_bytes(2, "big")
    else:
        size = bytes([127]) + n.to_bytes(8, "big")
    return bytes([0x80 | opcode]) + size + payload


def _ports(values: Iterable[str]) -> list[int]:
    """PodPortForwardOptions' ``ports``, each value a comma-separated list of numbers."""
    ports = []
    for value in values:
        for port in value.split(","):
            try:
                ports.append(int(port.strip(), 10))
            except ValueError:
                raise ApiError.bad_request(f'strconv.ParseInt: parsing "{port}": invalid syntax') from None
    return ports


def _container(pod_name: str, spec: dict[str, Any], named: str) -> None:
    """400 unless ``named`` is one of the pod's containers or, unnamed, the pod has exactly one
    (upstream's ``validateContainer``: init, regular and ephemeral containers, in that order)."""
    every = [c.get("name", "") for key in ("initContainers", "containers", "ephemeralContainers")
             for c in spec.get(key) or ()]
    if named:
        if named not in every:
            raise ApiError.bad_request(f"container {named} is not valid for pod {pod_name}")
        return
    regular = spec.get("containers") or ()
    if not regular:
        raise ApiError.bad_request(f"a container name must be specified for pod {pod_name}")
    if len(regular) > 1:
        raise ApiError.bad_request(f"a container name must be specified for pod {pod_name}, "
                                   f"choose one of: [{' '.join(every)}]")


def kubelet_address(node: dict[str, Any]) -> str:
    """``host:port`` of the node's kubelet, as upstream's ``NodeConnectionInfoGetter`` picks it."""
    status = node.get("status") or {}
    addresses = status.get("addresses") or []
    host = next((a.get("address") for kind in _ADDRESS_TYPES for a in addresses
                 if a.get("type") == kind and a.get("address")), None)
    if host is None:
        known = " ".join(f"{{{a.get('type', '')} {a.get('address', '')}}}" for a in addresses)
        raise ApiError(503, "ServiceUnavailable", f"no preferred addresses found; known addresses: [{known}]")
    port = ((status.get("daemonEndpoints") or {}).get("kubeletEndpoint") or {}).get("Port") or KUBELET_PORT
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
