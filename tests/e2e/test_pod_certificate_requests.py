"""PodCertificateRequests (certificates.k8s.io/v1, GA in 1.37) over a socket, on a
``serve --authorization-mode Node,RBAC`` with one simulated node: served in discovery and
OpenAPI (``kubectl api-resources``, ``explain``), created, listed, selected and described by
kubectl, read by the official client; refused in upstream's words (registry/podcertificates.py);
issued through ``/status`` only by who may ``sign`` for the signer, then immutable; asked for
by a kubelet only for a pod of its own (NodeRestriction, api/nodeauthz.py)."""

from __future__ import annotations

import base64
import datetime
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from kubernetes import client, config

from tests.client_certs import issue_client_cert
from tests.e2e.test_identities import until
from tests.e2e.test_kubectl import KUBECTL, kubectl
from tests.e2e.test_node_authorizer import as_kubelet
from tests.e2e.test_rbac import RBAC, as_user, wait_status
from tests.registry.test_podcertificates import leaf_of_an_unknown_key_type, stub_request
from tests.test_cli import Serve, running, start_serve

NODE = "sim-node-0"
TOKENS = 'admintoken,admin,1,"system:masters"\nsigner-token,signer,2\ndenier-token,denier,3\n'
PCRS = "/apis/certificates.k8s.io/v1/namespaces/default/podcertificaterequests"
KEY = ec.generate_private_key(ec.SECP256R1())


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    from tests.conftest import TEST_PKI

    tmp = tmp_path_factory.mktemp("pcr")
    (tmp / "tokens.csv").write_text(TOKENS)
    with running(start_serve(tmp, extra=(
            "--nodes", "1", "--token-auth-file", str(tmp / "tokens.csv"), "--authorization-mode", "Node,RBAC",
            "--client-ca-file", str(TEST_PKI / "ca.crt")))) as s:
        yield s


def _admin(served: Serve) -> httpx.Client:
    return as_user(served, "admintoken")


def _request(name: str, **spec: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "signerName": "example.com/signer", "podName": "app", "podUID": "pod-uid", "serviceAccountName": "default",
        "serviceAccountUID": "sa-uid", "nodeName": NODE, "nodeUID": "node-uid", "stubPKCS10Request": stub_request(KEY)}
    fields.update(spec)
    return {"apiVersion": "certificates.k8s.io/v1", "kind": "PodCertificateRequest",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {k: v for k, v in fields.items() if v is not None}}


def _refused(served: Serve, *args: str, stdin: str) -> str:
    env = dict(os.environ, KUBECONFIG=str(served.kubeconfig), HOME=str(served.state))
    r = subprocess.run([KUBECTL, *args], input=stdin, capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode != 0, r.stdout
    return r.stderr


def test_kubectl_serves_creates_lists_selects_and_describes_requests(served: Serve) -> None:
    resources = kubectl(served, "api-resources", "--api-group=certificates.k8s.io")
    assert any(line.split() == ["podcertificaterequests", "certificates.k8s.io/v1", "true", "PodCertificateRequest"]
               for line in resources.splitlines())
    explained = kubectl(served, "explain", "podcertificaterequest.spec")
    assert "stubPKCS10Request" in explained and "pkixPublicKey" not in explained
    assert "podcertificaterequest.certificates.k8s.io/listed created" in kubectl(
        served, "create", "-f", "-", stdin=json.dumps(_request("listed")))
    rows = [line.split() for line in kubectl(served, "get", "podcertificaterequests").splitlines()]
    assert rows[0] == ["NAME", "CREATED", "AT"] and rows[1][0] == "listed"
    selected = kubectl(served, "get", "podcertificaterequests", "--field-selector",
                       f"spec.nodeName={NODE},spec.podName=app,spec.signerName=example.com/signer", "-o", "name")
    assert selected.split() == ["podcertificaterequest.certificates.k8s.io/listed"]
    assert kubectl(served, "get", "podcertificaterequests", "--field-selector", "spec.podName=other",
                   "-o", "name").strip() == ""
    stored = json.loads(kubectl(served, "get", "podcertificaterequest", "listed", "-o", "json"))
    assert stored["spec"]["maxExpirationSeconds"] == 86400 and stored["status"] == {}
    described = kubectl(served, "describe", "podcertificaterequest", "listed")
    assert "Kind:         PodCertificateRequest" in described and "Signer Name:" in described


def test_a_protobuf_body_is_decoded(served: Serve) -> None:
    """kubectl's and client-go's typed clients send protobuf: the v1 message's fields."""
    from tests.api.test_protobuf import envelope, msg, num, text

    def meta(name: str) -> bytes:
        return msg(1, text(1, name), text(2, ""), text(3, "default"), num(7, 0), msg(8))

    raw = base64.b64decode(stub_request(KEY))
    body = envelope("certificates.k8s.io/v1", "PodCertificateRequest", meta("wire"), msg(
        2, text(1, "example.com/signer"), text(2, "app"), text(3, "pod-uid"), text(4, "default"),
        text(5, "sa-uid"), text(6, NODE), text(7, "node-uid"), num(8, 3600), text(12, raw),
        msg(11, text(1, "example.com/tier"), text(2, "gold"))))
    with _admin(served) as c:
        r = c.post(PCRS, content=body, headers={"content-type": "application/vnd.kubernetes.protobuf"})
        assert r.status_code == 201, r.text
        spec = r.json()["spec"]
    assert spec["maxExpirationSeconds"] == 3600 and base64.b64decode(spec["stubPKCS10Request"]) == raw
    assert spec["unverifiedUserAnnotations"] == {"example.com/tier": "gold"}


@pytest.mark.parametrize(("spec", "error"), [
    ({"signerName": "signer"}, "spec.signerName: Invalid value: \"signer\": must be a fully qualified domain and path "
     "of the form 'example.com/signer-name'"),
    ({"podUID": ""}, 'spec.podUID: Invalid value: "": must not be empty'),
    ({"maxExpirationSeconds": 100000, "signerName": "kubernetes.io/kube-apiserver-client-pod"},
     "spec.maxExpirationSeconds: Invalid value: 100000: must be in the range [3600, 86400]"),
    ({"maxExpirationSeconds": 60}, "spec.maxExpirationSeconds: Invalid value: 60: must be in the range "
     "[3600, 7862400]"),
    ({"stubPKCS10Request": base64.b64encode(b"junk").decode()},
     "spec.stubPKCS10Request: Invalid value: must be a DER-encoded PKCS#10 certificate signing request"),
])
def test_a_bad_request_is_refused_in_upstreams_words(served: Serve, spec: dict[str, Any], error: str) -> None:
    stderr = _refused(served, "create", "-f", "-", stdin=json.dumps(_request("bad", **spec)))
    assert f'The PodCertificateRequest "bad" is invalid: {error}' in stderr


def test_the_spec_is_immutable(served: Serve) -> None:
    kubectl(served, "create", "-f", "-", stdin=json.dumps(_request("fixed")))
    stderr = _refused(served, "patch", "podcertificaterequest", "fixed", "--type", "merge", "-p",
                      '{"spec": {"podName": "other"}}', stdin="")
    assert 'The PodCertificateRequest "fixed" is invalid: spec: Invalid value: ' in stderr
    assert ": field is immutable" in stderr


def _chain(now: datetime.datetime, lifetime: datetime.timedelta) -> str:
    ca = ec.generate_private_key(ec.SECP256R1())
    issuer = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "example signer")])
    return x509.CertificateBuilder().subject_name(x509.Name([])).issuer_name(issuer).public_key(KEY.public_key()) \
        .serial_number(x509.random_serial_number()).not_valid_before(now).not_valid_after(now + lifetime) \
        .sign(ca, hashes.SHA256()).public_bytes(serialization.Encoding.PEM).decode()


def _stamp(moment: datetime.datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _grant(admin: httpx.Client, name: str, rules: list[dict[str, Any]], user: str = "signer") -> None:
    r = admin.post(f"{RBAC}/clusterroles", json={"metadata": {"name": name}, "rules": rules})
    assert r.status_code == 201, r.text
    r = admin.post(f"{RBAC}/clusterrolebindings", json={
        "metadata": {"name": name}, "subjects": [{"kind": "User", "name": user}],
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name}})
    assert r.status_code == 201, r.text


def test_a_chain_is_issued_only_by_a_signer_and_then_holds(served: Serve) -> None:
    with _admin(served) as admin, as_user(served, "signer-token") as signer:
        r = admin.post(PCRS, json=_request("issued"))
        assert r.status_code == 201, r.text
        _grant(admin, "pcr-status-writer", [{"apiGroups": ["certificates.k8s.io"], "verbs": ["get", "update", "patch"],
                                             "resources": ["podcertificaterequests/status"]}])
        now = datetime.datetime.now(datetime.UTC).replace(microsecond=0)
        day = datetime.timedelta(hours=24)
        status = {"conditions": [{"type": "Issued", "status": "True", "reason": "Signed", "message": "ok"}],
                  "certificateChain": _chain(now, day), "notBefore": _stamp(now), "notAfter": _stamp(now + day),
                  "beginRefreshAt": _stamp(now + day / 2)}

        def write() -> httpx.Response:
            return signer.patch(f"{PCRS}/issued/status", json={"status": status},
                                headers={"content-type": "application/merge-patch+json"})

        refused = wait_status(write, 422)  # the status writer, not (yet) a signer
        assert refused.status_code == 422, refused.text
        assert refused.json()["message"] == (
            'PodCertificateRequest.certificates.k8s.io "issued" is invalid: spec.signerName: Forbidden: '
            'User "signer" is not permitted to "sign" for signer "example.com/signer"')
        _grant(admin, "pcr-signer", [{"apiGroups": ["certificates.k8s.io"], "resources": ["signers"],
                                      "verbs": ["sign"], "resourceNames": ["example.com/*"]}])
        issued = wait_status(write, 200)
        assert issued.status_code == 200, issued.text
        got = issued.json()["status"]
        assert got["certificateChain"] == status["certificateChain"]
        assert got["conditions"][0]["lastTransitionTime"]  # the strategy's stamp
        status["beginRefreshAt"] = _stamp(now + day / 4)
        again = write()
        assert again.status_code == 422
        assert again.json()["message"].endswith(
            "status: Invalid value: immutable after PodCertificateRequest is issued, denied, or failed")
        # an update of the object itself keeps the status
        kept = admin.patch(f"{PCRS}/issued", json={"metadata": {"labels": {"a": "b"}}, "status": {}},
                           headers={"content-type": "application/merge-patch+json"})
        assert kept.status_code == 200 and kept.json()["status"]["certificateChain"] == got["certificateChain"]


def test_a_pending_status_is_refused_and_a_denial_taken(served: Serve) -> None:
    with _admin(served) as admin:
        assert admin.post(PCRS, json=_request("denied")).status_code == 201
        pending = admin.patch(f"{PCRS}/denied/status", json={"status": {"notBefore": "2026-01-01T00:00:00Z"}},
                              headers={"content-type": "application/merge-patch+json"})
        assert pending.status_code == 422
        assert pending.json()["details"]["causes"] == [{
            "reason": "FieldValueInvalid", "field": "status",
            "message": 'Invalid value: status is immutable unless transitioning to "Issued", "Denied", or "Failed"'}]
        denied = admin.patch(f"{PCRS}/denied/status", json={"status": {"conditions": [
            {"type": "Denied", "status": "True", "reason": "UnsupportedKeyType", "message": "use ED25519"}]}},
            headers={"content-type": "application/merge-patch+json"})
        assert denied.status_code == 200, denied.text
        assert denied.json()["status"]["conditions"][0]["reason"] == "UnsupportedKeyType"


def test_a_denial_too_needs_sign_for_the_signer(served: Serve) -> None:
    """Upstream's status strategy asks for ``sign`` on any change of the status, not only of
    the chain: a status writer that may not sign cannot deny (nor fail) a request."""
    with _admin(served) as admin, as_user(served, "denier-token") as denier:
        assert admin.post(PCRS, json=_request("refused-denial")).status_code == 201
        _grant(admin, "pcr-status-denier", [{"apiGroups": ["certificates.k8s.io"], "verbs": ["get", "patch"],
                                             "resources": ["podcertificaterequests/status"]}], user="denier")

        def deny() -> httpx.Response:
            return denier.patch(f"{PCRS}/refused-denial/status", json={"status": {"conditions": [
                {"type": "Denied", "status": "True", "reason": "Refused", "message": "no"}]}},
                headers={"content-type": "application/merge-patch+json"})

        refused = wait_status(deny, 422)
        assert refused.status_code == 422, refused.text
        assert refused.json()["details"]["causes"] == [{
            "reason": "FieldValueForbidden", "field": "spec.signerName",
            "message": 'Forbidden: User "denier" is not permitted to "sign" for signer "example.com/signer"'}]
        assert "conditions" not in admin.get(f"{PCRS}/refused-denial").json().get("status", {})
        # a write that changes nothing in the status asks nothing
        same = denier.patch(f"{PCRS}/refused-denial/status", json={"metadata": {"labels": {"seen": "yes"}}},
                            headers={"content-type": "application/merge-patch+json"})
        assert same.status_code == 200, same.text
        _grant(admin, "pcr-denier-signs", [{"apiGroups": ["certificates.k8s.io"], "resources": ["signers"],
                                            "verbs": ["sign"], "resourceNames": ["example.com/signer"]}],
               user="denier")
        denied = wait_status(deny, 200)
        assert denied.status_code == 200, denied.text
        assert [c["type"] for c in denied.json()["status"]["conditions"]] == ["Denied"]


def test_the_official_client_creates_lists_and_reads_a_request(served: Serve) -> None:
    with config.new_client_from_config(config_file=str(served.kubeconfig)) as c:
        api = client.CertificatesV1Api(c)
        stub = stub_request(KEY)  # ([]byte: its base64, as Go's JSON writes it; the client sends bytes raw)
        api.create_namespaced_pod_certificate_request("default", client.V1PodCertificateRequest(
            metadata=client.V1ObjectMeta(name="typed"), spec=client.V1PodCertificateRequestSpec(
                signer_name="example.com/signer", pod_name="app", pod_uid="pod-uid", service_account_name="default",
                service_account_uid="sa-uid", node_name=NODE, node_uid="node-uid", stub_pkcs10_request=stub)))
        assert "typed" in [r.metadata.name for r in api.list_namespaced_pod_certificate_request("default").items]
        read = api.read_namespaced_pod_certificate_request("typed", "default")
        assert isinstance(read, client.V1PodCertificateRequest)
        assert read.spec.pod_name == "app" and read.spec.max_expiration_seconds == 86400
        assert read.spec.signer_name == "example.com/signer" and read.spec.stub_pkcs10_request == stub
        assert read.status is not None and read.status.certificate_chain is None


# -- NodeRestriction: a kubelet asks only for a pod of its own ----------------------------
@pytest.fixture(scope="module")
def certificate(served: Serve) -> tuple[Path, Path]:
    return issue_client_cert(served.state / "kubelet", f"system:node:{NODE}", ("system:nodes",))


def _pod(name: str, node: str, signer: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {
        "nodeName": node, "containers": [{"name": "c", "image": "busybox"}],
        "volumes": [{"name": "certs", "projected": {"sources": [{"podCertificate": {
            "signerName": signer, "keyType": "ECDSAP256", "credentialBundlePath": "credentials.pem"}}]}}]}}


def test_a_kubelet_asks_only_for_its_own_pods(served: Serve, certificate: tuple[Path, Path]) -> None:
    with _admin(served) as admin:
        node = until(lambda: admin.get(f"/api/v1/nodes/{NODE}").json() if admin.get(
            f"/api/v1/nodes/{NODE}").status_code == 200 else None)
        account = until(lambda: admin.get("/api/v1/namespaces/default/serviceaccounts/default").json() if admin.get(
            "/api/v1/namespaces/default/serviceaccounts/default").status_code == 200 else None)
        r = admin.post("/api/v1/namespaces/default/pods", json=_pod("mounts", NODE, "example.com/signer"))
        assert r.status_code == 201, r.text
        pod = r.json()
        r = admin.post("/api/v1/namespaces/default/pods", json=_pod("elsewhere", "sim-node-9", "example.com/signer"))
        assert r.status_code == 201, r.text
        elsewhere = r.json()["metadata"]["uid"]

    def ask(name: str, **spec: Any) -> httpx.Response:
        fields = {"podName": "mounts", "podUID": pod["metadata"]["uid"], "nodeUID": node["metadata"]["uid"],
                  "serviceAccountUID": account["metadata"]["uid"], **spec}
        with as_kubelet(served, certificate) as kubelet:
            return kubelet.post(PCRS, json=_request(name, **fields))

    def message(why: str, name: str) -> str:
        return f'podcertificaterequests.certificates.k8s.io "{name}" is forbidden: {why}'

    # the pod's kubelet sees it (its cache) before it asks
    asked = wait_status(lambda: ask("mine"), 201, timeout=20)
    assert asked.status_code == 201, asked.text
    refused = ask("other-node", nodeName="sim-node-9")
    assert refused.status_code == 403
    assert refused.json()["message"] == message(
        f'node "{NODE}" can only create PodCertificateRequests with spec.nodeName set to itself', "other-node")
    refused = ask("wrong-uid", podUID="not-the-pod")
    assert refused.status_code == 403
    assert refused.json()["message"] == message(
        'spec.podUID "not-the-pod" is not the UID of pod "default/mounts"', "wrong-uid")
    refused = ask("not-bound", podName="elsewhere", podUID=elsewhere)
    assert refused.status_code == 403
    assert refused.json()["message"] == message(f'pod "default/elsewhere" is not bound to node "{NODE}"', "not-bound")
    refused = ask("other-signer", signerName="example.com/other")
    assert refused.status_code == 403
    assert refused.json()["message"] == message(
        'pod "default/mounts" does not mount a podCertificate projected volume for signer "example.com/other"',
        "other-signer")
    refused = ask("wrong-account-uid", serviceAccountUID="stale")
    assert refused.status_code == 403
    assert refused.json()["message"] == message(
        'spec.serviceAccountUID "stale" is not the UID of service account "default/default"', "wrong-account-uid")
    with as_kubelet(served, certificate) as kubelet:  # it reads them back, but may not write them
        assert kubelet.get(f"{PCRS}/mine").status_code == 200
        r = kubelet.patch(f"{PCRS}/mine/status", json={"status": {}},
                          headers={"content-type": "application/merge-patch+json"})
        assert r.status_code == 403


def test_a_leaf_of_a_key_type_the_server_cannot_read_is_a_422(served: Serve) -> None:
    """A leaf whose key is of an algorithm cryptography does not know: cryptography's
    UnsupportedAlgorithm escaped the validation (a 500); Go parses such a key as none, not the
    requested one."""
    with _admin(served) as admin:
        r = admin.post(PCRS, json=_request("unknown-key"))
        assert r.status_code == 201, r.text
        now = datetime.datetime.now(datetime.UTC).replace(microsecond=0)
        day = datetime.timedelta(hours=24)
        status = {"conditions": [{"type": "Issued", "status": "True", "reason": "Signed", "message": "ok"}],
                  "certificateChain": leaf_of_an_unknown_key_type(KEY, now, day), "notBefore": _stamp(now),
                  "notAfter": _stamp(now + day), "beginRefreshAt": _stamp(now + day / 2)}
        r = admin.put(f"{PCRS}/unknown-key/status", json={**r.json(), "status": status})
        assert r.status_code == 422, r.text
        assert r.json()["message"].endswith("leaf certificate was not issued to the requested public key")
