"""A real HTTPS admission webhook server for the tests, in a thread of the test process: its
own CA, a certificate for 127.0.0.1, ``hook.webhooks.svc`` and ``external.webhooks.svc`` (the
names the API server asks for when a ``service`` reference leads here), and an answer per path:

    /allow     allowed
    /deny      refused with 403 and a message (``status.reason`` Forbidden)
    /deny-bare refused with no status at all
    /mutate    a JSONPatch: a label ``mutated: "yes"`` (and a warning)
    /count     a JSONPatch: an annotation counting the calls it saw for this object
    /slow      allowed after 3 s (a webhook that times out)
    /slower    allowed after 6 s (longer than an HTTP client's usual 5 s timeout)
    /error     HTTP 500 with a Status
    /wrong-uid a response whose uid is not the request's
    /annotate  allowed, with ``auditAnnotations`` ``{"checked": "yes"}``

A ``ConversionReview`` (a CRD's conversion webhook) is answered per path too:

    /convert          ``spec.size`` (v1) renamed ``spec.replicas`` (v2) and back; it also
                      sets ``metadata.generation`` (which the API server must restore)
                      and a label ``converted-to: <version>``
    /convert-fail     ``result.status`` Failure with a message
    /convert-short    no ``convertedObjects``
    /convert-rename   the converted object renamed

Each review received is kept in ``reviews`` (path, request; with ``_query``, ``_host`` and
``_review``, the review's apiVersion).
"""

from __future__ import annotations

import base64
import datetime
import ipaddress
import json
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

__all__ = ["WebhookServer", "host_address", "webhook_server"]


@dataclass
class WebhookServer:
    port: int
    ca_pem: bytes
    reviews: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    @property
    def ca_bundle(self) -> str:
        return base64.b64encode(self.ca_pem).decode()

    def url(self, path: str) -> str:
        return f"https://127.0.0.1:{self.port}{path}"

    def seen(self, path: str) -> list[dict[str, Any]]:
        return [request for p, request in self.reviews if p == path]


def host_address() -> str:
    """This machine's address on its default route (not loopback: Endpoints refuse those, as upstream)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("10.255.255.255", 9))  # (no packet is sent: a UDP connect only picks the route)
            return str(s.getsockname()[0])
        except OSError:
            return socket.gethostbyname(socket.gethostname())


def _pki(directory: Path) -> tuple[bytes, Path, Path]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "webhook-test-ca")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
          .not_valid_after(now + datetime.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    names = [x509.DNSName("hook.webhooks.svc"), x509.DNSName("external.webhooks.svc"),
             x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    cert = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "hook")]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .sign(ca_key, hashes.SHA256()))
    cert_file, key_file = directory / "hook.crt", directory / "hook.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return ca.public_bytes(serialization.Encoding.PEM), cert_file, key_file


def _patch(operations: list[dict[str, Any]]) -> dict[str, Any]:
    return {"patchType": "JSONPatch", "patch": base64.b64encode(json.dumps(operations).encode()).decode()}


def _answer(path: str, request: dict[str, Any], calls: int) -> tuple[int, dict[str, Any]]:
    response: dict[str, Any] = {"uid": request["uid"], "allowed": True}
    obj = request.get("object") or {}
    labels = (obj.get("metadata") or {}).get("labels")
    if path == "/deny":
        response.update(allowed=False, status={"code": 403, "reason": "Forbidden",
                                               "message": "pods labelled bad are not welcome"})
    elif path == "/deny-bare":
        response["allowed"] = False
    elif path == "/mutate":
        operations = [{"op": "add", "path": "/metadata/labels", "value": {}}] if labels is None else []
        operations.append({"op": "add", "path": "/metadata/labels/mutated", "value": "yes"})
        response.update(_patch(operations), warnings=["mutated by the test webhook"])
    elif path == "/count":
        annotations = (obj.get("metadata") or {}).get("annotations")
        operations = [{"op": "add", "path": "/metadata/annotations", "value": {}}] if annotations is None else []
        operations.append({"op": "add", "path": "/metadata/annotations/calls", "value": str(calls)})
        response.update(_patch(operations))
    elif path == "/slow":
        time.sleep(3)
    elif path == "/scale-to-3":  # a Scale's replicas set to 3
        response.update(_patch([{"op": "replace", "path": "/spec/replicas", "value": 3}]))
    elif path == "/nap":  # allowed, after 0.7 s (the request SLI leaves it out)
        time.sleep(0.7)
    elif path == "/slower":
        time.sleep(6)
    elif path == "/error":
        return 500, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 500,
                     "message": "the webhook broke"}
    elif path == "/wrong-uid":
        response["uid"] = "not-the-request"
    elif path == "/deny-connect":  # a CONNECT refused, its message naming what the options asked
        what = " ".join(obj.get("command") or ()) or request.get("subResource", "")
        response.update(allowed=False, status={"code": 403, "reason": "Forbidden",
                                               "message": f"no {request['subResource']} into {request['name']} "
                                                          f"({what})"})
    elif path == "/connect-container":  # a CONNECT's options patched: another container
        response.update(_patch([{"op": "add", "path": "/container", "value": "patched"}]))
    elif path == "/replace-missing":  # a replace of a key the object lacks (upstream's library adds it)
        response.update(_patch([{"op": "replace", "path": "/data/added", "value": "yes"}]))
    elif path == "/remove-missing":  # a remove of a key the object lacks: the patch does not apply
        response.update(_patch([{"op": "remove", "path": "/data/nope"}]))
    elif path == "/patch-not-base64":  # a patch client-go cannot decode from the review
        response.update(patchType="JSONPatch", patch="W3s*")
    elif path == "/patch-not-json":  # base64 of what is not JSON
        response.update(patchType="JSONPatch", patch=base64.b64encode(b"[{'op': 'add'}]").decode())
    elif path == "/patch-out-of-range":  # a number past a float64's range (Go's decoder refuses it)
        response.update(patchType="JSONPatch", patch=base64.b64encode(
            b'[{"op": "add", "path": "/data/n", "value": 1e400}]').decode())
    elif path == "/add-uint64":  # an integer past an int64 (a float64 to Go's decoder into unstructured)
        response.update(patchType="JSONPatch", patch=base64.b64encode(
            b'[{"op": "add", "path": "/spec/big", "value": 9223372036854775808}]').decode())
    elif path == "/patch-not-a-list":  # JSON, but one operation where the library wants a list
        response.update(patchType="JSONPatch", patch=base64.b64encode(b'{"op": "add"}').decode())
    elif path == "/annotate":
        response["auditAnnotations"] = {"checked": "yes"}
    return 200, {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}


def _conversion(path: str, request: dict[str, Any]) -> dict[str, Any]:
    desired = request["desiredAPIVersion"]
    version = desired.rpartition("/")[2]
    response: dict[str, Any] = {"uid": request["uid"], "result": {"status": "Success"}}
    if path == "/convert-fail":
        response["result"] = {"status": "Failure", "message": "cannot convert widgets today"}
    elif path != "/convert-short":
        converted = []
        for obj in request["objects"]:
            obj = json.loads(json.dumps(obj))
            spec = obj.get("spec") or {}
            if version == "v2" and "size" in spec:
                spec["replicas"] = spec.pop("size")
            elif version == "v1" and "replicas" in spec:
                spec["size"] = spec.pop("replicas")
            obj["apiVersion"] = desired
            meta = obj["metadata"]
            meta["generation"] = 99
            meta.setdefault("labels", {})["converted-to"] = version
            if path == "/convert-rename":
                meta["name"] = meta["name"] + "-renamed"
            converted.append(obj)
        response["convertedObjects"] = converted
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview", "response": response}


@contextmanager
def webhook_server(directory: Path) -> Iterator[WebhookServer]:
    ca_pem, cert_file, key_file = _pki(directory)
    counts: dict[str, int] = {}
    lock = threading.Lock()
    server_ref: list[WebhookServer] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length") or 0))
            review = json.loads(body)
            path = self.path.partition("?")[0]
            request = review["request"]
            with lock:
                server_ref[0].reviews.append((path, {**request, "_query": self.path.partition("?")[2],
                                                     "_host": self.headers.get("host"),
                                                     "_review": review.get("apiVersion")}))
                key = f"{path}:{request.get('namespace')}/{request.get('name')}"
                counts[key] = counts.get(key, 0) + 1
                calls = counts[key]
            code, answer = (200, _conversion(path, request)) if review.get("kind") == "ConversionReview" else \
                _answer(path, request, calls)
            data = json.dumps(answer).encode()
            self.send_response(code)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's name
            pass

    httpd = ThreadingHTTPServer(("0.0.0.0", 0), Handler)  # (Endpoints may not name a loopback address)
    httpd.daemon_threads = True
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert_file, key_file)
    httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
    server = WebhookServer(httpd.server_address[1], ca_pem)
    server_ref.append(server)
    thread = threading.Thread(target=httpd.serve_forever, name="test-webhook-server", daemon=True)
    thread.start()
    try:
        yield server
    finally:
        httpd.shutdown()
        httpd.server_close()
