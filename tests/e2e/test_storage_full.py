"""``controlplane serve`` on a disk that fills up: writes are refused as kube-apiserver refuses
them when etcd's space is exhausted (a 500 Status without a reason, the store's words as its
message: upstream's ``etcdserver: mvcc: database space exceeded``), reads go on, nothing
stored is lost or damaged, and writes resume once there is room, without a restart."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.test_cli import killed_after, start_serve
from tests.tmpfs import small_tmpfs

CONFIGMAPS = "/api/v1/namespaces/full/configmaps"


@pytest.fixture
def small_state_dir(tmp_path: Path) -> Iterator[Path]:
    """An 8 MiB filesystem (tmpfs) holding all ``start_serve(tmp_path)`` keeps (the store, the
    kubeconfig, the keys), as one disk holds ``.controlplane/``; needs root, as CI and ``make
    test`` run (tests/store/test_lmdb.py's disk-full test mounts one too)."""
    with small_tmpfs(tmp_path / "state", "8m") as state:
        yield state


def _applier_of(pid: int) -> int:
    """The store's applier process of the server ``pid``."""
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    [applier] = [int(c) for c in children if b"store.lmdb.applier" in Path(f"/proc/{c}/cmdline").read_bytes()]
    return applier


def _listed(url: str) -> dict[str, tuple[str, dict[str, str]]]:
    listed = httpx.get(f"{url}{CONFIGMAPS}", timeout=30).json()["items"]
    return {o["metadata"]["name"]: (o["metadata"]["resourceVersion"], o["data"]) for o in listed}


def test_a_full_disk_refuses_writes_as_upstream_keeps_reads_and_recovers(tmp_path: Path, small_state_dir: Path) -> None:
    s = start_serve(tmp_path, tls=False)
    acked: dict[str, tuple[str, dict[str, str]]] = {}
    with killed_after(s):
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
            assert _listed(s.url) == acked
            assert http.get("/readyz").status_code == 200
            # room again (as an operator frees it): writes resume in the same process
            subprocess.run(["mount", "-o", "remount,size=64m", str(small_state_dir)], check=True)
            r = http.post(CONFIGMAPS, json={"metadata": {"name": name}, "data": {"v": "after"}})
            assert r.status_code == 201, r.text
            acked[name] = (r.json()["metadata"]["resourceVersion"], {"v": "after"})
            # writes the applier has not moved into LMDB (it is stopped), the disk full again
            # down to what it holds, and the server killed on it
            applier = _applier_of(s.proc.pid)
            os.kill(applier, signal.SIGSTOP)
            try:
                for i in range(5):
                    data = {"v": os.urandom(100_000).hex()}
                    r = http.post(CONFIGMAPS, json={"metadata": {"name": f"d{i}"}, "data": data})
                    assert r.status_code == 201, r.text
                    acked[f"d{i}"] = (r.json()["metadata"]["resourceVersion"], data)
                used = shutil.disk_usage(small_state_dir).used
                subprocess.run(["mount", "-o", f"remount,size={used}", str(small_state_dir)], check=True)
                s.proc.kill()
                s.proc.wait()
            finally:
                os.kill(applier, signal.SIGKILL)
    # a start on the still-full disk, its WAL not all in LMDB, says why in one line, touching
    # nothing (it said "[Errno 28] No space left on device", rewriting its kubeconfig)
    full = start_serve(tmp_path, run=1, port=s.port, tls=False)
    with killed_after(full):
        assert full.proc.wait(timeout=60) == 3
    errors = [line for line in full.stderr.read_text().splitlines() if "INFO" not in line]
    assert len(errors) == 1 and errors[0].startswith("controlplane serve: error: cannot open the store"), errors
    assert "the disk is full" in errors[0] and "nothing is lost" in errors[0]
    subprocess.run(["mount", "-o", "remount,size=64m", str(small_state_dir)], check=True)
    again = start_serve(tmp_path, run=2, port=s.port, tls=False)
    try:
        again.wait_ready()
        assert _listed(again.url) == acked
    finally:
        again.stop()
