"""ClusterTrustBundles (certificates.k8s.io/v1) over a socket under ``--authorization-mode RBAC``:
served in discovery and OpenAPI, created, listed (upstream's columns, the ``spec.signerName``
field selector), described and read by kubectl and the official client; refused in upstream's
words (registry/trustbundles.py); a signer's bundle written only by who may ``attest`` for it
(ClusterTrustBundleAttest); readable by every service account (the bootstrap policy)."""

from __future__ import annotations

import datetime
import json
import os
import subprocess
from collections.abc import Callable, Iterator

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from kubernetes import client, config

from tests.e2e.test_kubectl import KUBECTL, kubectl
from tests.e2e.test_rbac import RBAC, as_user, wait_status
from tests.test_cli import Serve, running, start_serve

TOKENS = 'admin-token,admin,1,"system:masters"\ncarol-token,carol,2\n'
CTBS = "/apis/certificates.k8s.io/v1/clustertrustbundles"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    tmp = tmp_path_factory.mktemp("ctb")
    tokens = tmp / "tokens.csv"
    tokens.write_text(TOKENS)
    with running(start_serve(tmp, extra=("--token-auth-file", str(tokens), "--authorization-mode", "RBAC"))) as s:
        yield s


def _cert(cn: str, ca: bool | None = True) -> str:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])
    now = datetime.datetime.now(datetime.UTC)
    builder = x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key()) \
        .serial_number(x509.random_serial_number()).not_valid_before(now) \
        .not_valid_after(now + datetime.timedelta(days=1))
    if ca is not None:
        builder = builder.add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    return builder.sign(key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM).decode()


CA = _cert("root-a")


def _bundle(name: str, trust: str, signer: str | None = None) -> str:
    spec: dict[str, str] = {"trustBundle": trust}
    if signer:
        spec["signerName"] = signer
    return json.dumps({"apiVersion": "certificates.k8s.io/v1", "kind": "ClusterTrustBundle",
                       "metadata": {"name": name}, "spec": spec})


def _refused(served: Serve, *args: str, stdin: str) -> str:
    env = dict(os.environ, KUBECONFIG=str(served.kubeconfig), HOME=str(served.state))
    r = subprocess.run([KUBECTL, *args], input=stdin, capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode != 0, r.stdout
    return r.stderr


def test_kubectl_creates_lists_selects_and_describes_bundles(served: Serve) -> None:
    resources = kubectl(served, "api-resources", "--api-group=certificates.k8s.io")
    assert any(line.split() == ["clustertrustbundles", "certificates.k8s.io/v1", "false", "ClusterTrustBundle"]
               for line in resources.splitlines())
    assert "example.com:foo:one created" in kubectl(
        served, "create", "-f", "-", stdin=_bundle("example.com:foo:one", CA, "example.com/foo"))
    assert "plain created" in kubectl(served, "create", "-f", "-", stdin=_bundle("plain", CA))
    rows = [line.split() for line in kubectl(served, "get", "clustertrustbundles").splitlines()]
    assert rows[0] == ["NAME", "SIGNERNAME"]
    assert ["example.com:foo:one", "example.com/foo"] in rows and ["plain", "<none>"] in rows
    selected = kubectl(served, "get", "clustertrustbundles", "--field-selector", "spec.signerName=example.com/foo",
                       "-o", "name")
    assert selected.split() == ["clustertrustbundle.certificates.k8s.io/example.com:foo:one"]
    described = kubectl(served, "describe", "clustertrustbundle", "plain")
    assert "Kind:         ClusterTrustBundle" in described and "-----BEGIN CERTIFICATE-----" in described
    assert "signerName" in kubectl(served, "explain", "clustertrustbundle.spec")


def test_the_official_client_creates_lists_and_reads_a_bundle(served: Serve) -> None:
    with config.new_client_from_config(config_file=str(served.kubeconfig)) as c:
        api = client.CertificatesV1Api(c)
        api.create_cluster_trust_bundle(client.V1ClusterTrustBundle(
            metadata=client.V1ObjectMeta(name="typed"), spec=client.V1ClusterTrustBundleSpec(trust_bundle=CA)))
        assert "typed" in [b.metadata.name for b in api.list_cluster_trust_bundle().items]
        read = api.read_cluster_trust_bundle("typed")
        assert read.spec.trust_bundle == CA and read.spec.signer_name is None


@pytest.mark.parametrize(("name", "trust", "signer", "error"), [
    ("dup", CA + CA, None,
     'spec.trustBundle: Invalid value: "<value omitted>": duplicate trust anchor (indices [0 1])'),
    ("leaf", _cert("leaf", ca=False), None,
     'spec.trustBundle: Invalid value: "<value omitted>": entry 0 does not have the CA bit set'),
    ("bare", _cert("bare", ca=None), None,
     'spec.trustBundle: Invalid value: "<value omitted>": entry 0 does not have the CA bit set'),
    ("headers", CA.replace("-----\n", "-----\nProc-Type: 4,ENCRYPTED\n\n", 1), None,
     'spec.trustBundle: Invalid value: "<value omitted>": entry 0 has PEM block headers'),
    ("key", "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n", None,
     'spec.trustBundle: Invalid value: "<value omitted>": entry 0 has bad block type: PRIVATE KEY'),
    ("none", "not pem", None,
     'spec.trustBundle: Invalid value: "<value omitted>": at least one trust anchor must be provided'),
    ("wrong", CA, "example.com/foo", 'metadata.name: Invalid value: "wrong": ClusterTrustBundle for signerName '
     "example.com/foo must be named with prefix example.com:foo:"),
    ("x:y", CA, None, 'metadata.name: Invalid value: "x:y": ClusterTrustBundle without signer name must not have ":" '
     "in its name"),
    ("foo:one", CA, "foo", "spec.signerName: Invalid value: \"foo\": must be a fully qualified domain and path of the "
     "form 'example.com/signer-name'"),
    ("example:one:a", CA, "example/one", 'spec.signerName: Invalid value: "example": should be a domain with at least '
     "two segments separated by dots"),
])
def test_a_bad_bundle_is_refused_in_upstreams_words(served: Serve, name: str, trust: str, signer: str | None,
                                                    error: str) -> None:
    stderr = _refused(served, "create", "-f", "-", stdin=_bundle(name, trust, signer))
    assert f'The ClusterTrustBundle "{name}" is invalid: {error}' in stderr


def test_the_signer_name_is_immutable(served: Serve) -> None:
    kubectl(served, "create", "-f", "-", stdin=_bundle("example.com:fixed:one", CA, "example.com/fixed"))
    stderr = _refused(served, "patch", "clustertrustbundle", "example.com:fixed:one", "--type", "merge", "-p",
                      '{"spec": {"signerName": "example.com/other"}}', stdin="")
    assert 'spec.signerName: Invalid value: "example.com/other": field is immutable' in stderr


def test_a_signers_bundle_needs_attest_on_its_signer(served: Serve) -> None:
    with as_user(served, "admin-token") as admin, as_user(served, "carol-token") as carol:
        r = admin.post(f"{RBAC}/clusterroles", json={"metadata": {"name": "ctb-writer"}, "rules": [
            {"apiGroups": ["certificates.k8s.io"], "resources": ["clustertrustbundles"], "verbs": ["create", "update"]},
            {"apiGroups": ["certificates.k8s.io"], "resources": ["signers"], "verbs": ["attest"],
             "resourceNames": ["example.com/*"]}]})
        assert r.status_code == 201, r.text
        r = admin.post(f"{RBAC}/clusterrolebindings", json={
            "metadata": {"name": "carol-ctb"}, "subjects": [{"kind": "User", "name": "carol"}],
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "ctb-writer"}})
        assert r.status_code == 201, r.text

        def create(name: str, signer: str | None) -> Callable[[], httpx.Response]:
            return lambda: carol.post(CTBS, content=_bundle(name, CA, signer),
                                      headers={"content-type": "application/json"})

        created = wait_status(create("example.com:attested:one", "example.com/attested"), 201)  # by domain
        assert created.status_code == 201, created.text
        assert wait_status(create("unsigned", None), 201).status_code == 201  # no signer: no attest asked
        refused = carol.post(CTBS, content=_bundle("other.io:x:one", CA, "other.io/x"),
                             headers={"content-type": "application/json"})
        assert refused.status_code == 403
        assert refused.json()["message"] == ('clustertrustbundles.certificates.k8s.io "other.io:x:one" is forbidden: '
                                             'user not permitted to attest for signerName "other.io/x"')


def test_every_service_account_may_read_bundles(served: Serve) -> None:
    allowed = kubectl(served, "auth", "can-i", "list", "clustertrustbundles.certificates.k8s.io",
                      "--as", "system:serviceaccount:default:default")
    assert allowed.strip() == "yes"
    binding = json.loads(kubectl(served, "get", "clusterrolebinding", "system:cluster-trust-bundle-discovery",
                                 "-o", "json"))
    assert binding["subjects"] == [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group",
                                    "name": "system:serviceaccounts"}]
