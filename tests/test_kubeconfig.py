from __future__ import annotations

import base64
import stat
from pathlib import Path

import pytest
import yaml

from controlplane.config import Config
from controlplane.kubeconfig import kubeconfig, write_kubeconfig


def test_write_kubeconfig_writes_a_private_kubectl_config(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "er" / "kubeconfig"  # parents are created
    write_kubeconfig(path, "http://127.0.0.1:6443", "s3cret")
    doc = yaml.safe_load(path.read_text())
    assert doc == {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "controlplane", "cluster": {"server": "http://127.0.0.1:6443"}}],
        "users": [{"name": "admin", "user": {"token": "s3cret"}}],
        "contexts": [{"name": "controlplane",
                      "context": {"cluster": "controlplane", "user": "admin", "namespace": "default"}}],
        "current-context": "controlplane",
        "preferences": {},
    }
    assert stat.S_IMODE(path.stat().st_mode) == 0o600



def test_write_kubeconfig_leaves_the_same_file_alone_and_mends_a_wider_mode(tmp_path: Path) -> None:
    """Every start writes the kubeconfig: the same one is not written again (on a full disk
    that write failed, before the store could say the disk is full), a readable one is."""
    path = tmp_path / "kubeconfig"
    write_kubeconfig(path, "http://127.0.0.1:6443", "s3cret")
    inode = path.stat().st_ino
    write_kubeconfig(path, "http://127.0.0.1:6443", "s3cret")
    assert path.stat().st_ino == inode  # (a write replaces the file: a new inode)
    path.chmod(0o644)
    write_kubeconfig(path, "http://127.0.0.1:6443", "s3cret")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600

def test_write_kubeconfig_replaces_the_file_whole(tmp_path: Path) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text("stale: true\n" * 1000)
    write_kubeconfig(path, "http://[::1]:7000", "t2", user="root", name="lab")
    doc = yaml.safe_load(path.read_text())
    assert doc == kubeconfig("http://[::1]:7000", "t2", user="root", name="lab")
    assert doc["current-context"] == "lab"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kubeconfig"]  # no temporary file left


@pytest.mark.parametrize(("host", "url"), [
    ("127.0.0.1", "https://127.0.0.1:6443"),
    ("0.0.0.0", "https://127.0.0.1:6443"),
    ("", "https://127.0.0.1:6443"),
    ("::", "https://[::1]:6443"),
    ("::1", "https://[::1]:6443"),
    ("localhost", "https://localhost:6443"),
    ("10.1.2.3", "https://10.1.2.3:6443"),
])
def test_server_url_is_reachable_from_this_machine(host: str, url: str) -> None:
    assert Config(host=host).server_url == url
    assert Config(host=host, tls=False).server_url == url.replace("https://", "http://")


def test_the_ca_goes_into_the_cluster_entry(tmp_path: Path) -> None:
    path = tmp_path / "kc"
    write_kubeconfig(path, "https://127.0.0.1:6443", "t", ca_pem=b"-----BEGIN CERTIFICATE-----\n")
    cluster = yaml.safe_load(path.read_text())["clusters"][0]["cluster"]
    assert base64.b64decode(cluster["certificate-authority-data"]) == b"-----BEGIN CERTIFICATE-----\n"
