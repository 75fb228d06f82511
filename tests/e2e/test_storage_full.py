"""``controlplane serve`` on a disk that fills up: writes are refused as kube-apiserver refuses
them when etcd's space is exhausted (a 500 Status without a reason, the store's words as its
message: upstream's ``etcdserver: mvcc: database space exceeded``), reads go on, nothing
stored is lost or damaged, and writes resume once there is room, without a restart."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.test_cli import start_serve

CONFIGMAPS = "/api/v1/namespaces/full/configmaps"


@pytest.fixture
def small_data_dir(tmp_path: Path) -> Iterator[Path]:
    """An 8 MiB filesystem (tmpfs) where ``start_serve(tmp_path)`` keeps its store; needs root,
    as CI and ``make test`` run (tests/store/test_lmdb.py's disk-full test mounts one too)."""
    data = tmp_path / "state" / "data"
    data.mkdir(parents=True)
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(data)], capture_output=True, text=True)
    if res.returncode != 0:
        pytest.fail(f"cannot mount a small tmpfs for the disk-full test (run as root): {res.stderr}")
    yield data
    subprocess.run(["umount", "-l", str(data)], check=False)


def test_a_full_disk_refuses_writes_as_upstream_keeps_reads_and_recovers(tmp_path: Path, small_data_dir: Path) -> None:
    s = start_serve(tmp_path, tls=False)
    acked: dict[str, tuple[str, dict[str, str]]] = {}
    try:
        s.wait_ready()
        with httpx.Client(base_url=s.url, timeout=30) as http:
            assert http.post("/api/v1/namespaces", json={"metadata": {"name": "full"}}).status_code == 201
            refused = None
            for i in range(100):  # 200 KB each: the disk is full well before 8 MiB of them
                data = {"v": os.urandom(100_000).hex()}
                r = http.post(CONFIGMAPS, json={"metadata": {"name": f"c{i}"}, "data": data})
                if r.status_code != 201:
                    refused = r, f"c{i}"
                    break
                acked[f"c{i}"] = (r.json()["metadata"]["resourceVersion"], data)
            assert refused is not None and acked
            r, name = refused
            status = r.json()
            assert r.status_code == 500 and status["kind"] == "Status" and status["code"] == 500, r.text
            assert "reason" not in status and "disk full" in status["message"], r.text
            assert http.get(f"{CONFIGMAPS}/{name}").status_code == 404  # nothing of it was stored
            # reads go on, consistent ones too, and find every acknowledged write as it was answered
            listed = http.get(CONFIGMAPS).json()["items"]
            assert {o["metadata"]["name"]: (o["metadata"]["resourceVersion"], o["data"]) for o in listed} == acked
            assert http.get("/readyz").status_code == 200
            # room again (as an operator frees it): writes resume in the same process
            subprocess.run(["mount", "-o", "remount,size=64m", str(small_data_dir)], check=True)
            r = http.post(CONFIGMAPS, json={"metadata": {"name": name}, "data": {"v": "after"}})
            assert r.status_code == 201, r.text
            acked[name] = (r.json()["metadata"]["resourceVersion"], {"v": "after"})
            assert s.stop() == 0
    finally:
        if s.proc.poll() is None:
            s.proc.kill()
            s.proc.wait()
    again = start_serve(tmp_path, run=1, port=s.port, tls=False)
    try:
        again.wait_ready()
        listed = httpx.get(f"{again.url}{CONFIGMAPS}", timeout=30).json()["items"]
        assert {o["metadata"]["name"]: (o["metadata"]["resourceVersion"], o["data"]) for o in listed} == acked
    finally:
        again.stop()
