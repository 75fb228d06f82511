"""The scheduler benchmarks' verdicts: the invariant checks they end with, and a small run
of each through the command line (a server in another process, pods over a socket)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from controlplane.bench.scheduler import _stop_profiler, check_invariants


def _node(name: str, rack: str, cpu: str = "1") -> dict[str, Any]:
    alloc = {"cpu": cpu, "memory": "1Gi", "pods": "10"}
    return {"metadata": {"name": name, "labels": {"rack": rack}}, "status": {"allocatable": alloc}}


def _pod(name: str, node: str | None, cpu: str = "500m", group: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}
    if node:
        spec["nodeName"] = node
    if group:
        spec["schedulingGroup"] = {"podGroupName": group}
    return {"metadata": {"name": name}, "spec": spec}


def test_invariants_count_nodes_over_allocatable_and_broken_gangs() -> None:
    nodes = [_node("a", "r0"), _node("b", "r0"), _node("c", "r1")]
    fine = [_pod("p1", "a"), _pod("p2", "a"), _pod("g1", "b", group="g"), _pod("g2", "b", group="g")]
    assert check_invariants(fine, nodes, 2) == {"nodes_over_allocatable": 0, "partial_gangs": 0,
                                               "gangs_across_racks": 0, "gangs_bound": 1}
    broken = [
        _pod("p1", "a"), _pod("p2", "a"), _pod("p3", "a", cpu="1m"),  # a: 1001m of 1 cpu
        _pod("h1", "b", group="h"), _pod("h2", None, group="h"),  # h: half bound
        _pod("k1", "b", cpu="1m", group="k"), _pod("k2", "c", cpu="1m", group="k"),  # k: racks r0 and r1
    ]
    inv = check_invariants(broken, nodes, 2)
    assert inv == {"nodes_over_allocatable": 1, "partial_gangs": 1, "gangs_across_racks": 1, "gangs_bound": 1}


def _bench(*args: str) -> tuple[int, dict[str, float]]:
    proc = subprocess.run([sys.executable, "-m", "controlplane", "bench", *args], capture_output=True, text=True,
                          timeout=120)
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    return proc.returncode, {line["metric"]: line["value"] for line in lines}


def test_bench_scheduler_with_rack_gangs_binds_everything_within_the_invariants() -> None:
    rc, m = _bench("scheduler", "--nodes", "20", "--pods", "48", "--gang-size", "4", "--racks", "2")
    assert rc == 0, m
    assert m["pods_scheduled_per_s"] > 0 and m["create_to_bound_p99"] > 0
    assert (m["pods_unbound"], m["nodes_over_allocatable"], m["partial_gangs"], m["gangs_across_racks"]) == (0, 0, 0, 0)
    assert m["gangs_bound"] == 12


def test_bench_scheduler_fails_when_pods_are_left_unbound() -> None:
    # 2 nodes of 4 cpu hold 80 pods of 100m: 20 stay pending, and the run says so
    rc, m = _bench("scheduler", "--nodes", "2", "--pods", "100", "--timeout", "3")
    assert rc == 1
    assert m["pods_unbound"] == 20 and m["nodes_over_allocatable"] == 0


def test_bench_scheduler_dra_allocates_every_claim_without_double_allocation() -> None:
    # issue 5's DRA workload under `bench scheduler`: it runs `bench dra --api`
    rc, m = _bench("scheduler", "--dra", "--nodes=4", "--pods", "30")
    assert rc == 0, m
    assert m["claims_allocated"] == 30
    assert (m["pods_unbound"], m["double_allocations"], m["nodes_over_allocatable"]) == (0, 0, 0)


def test_bench_dra_help_names_its_end_to_end_mode() -> None:
    # README and docs/dra.md send users to `bench dra --api`; its help is where they look for it
    out = subprocess.run([sys.executable, "-m", "controlplane", "bench", "dra", "--help"],
                         capture_output=True, text=True, check=True).stdout
    assert "--api" in out and "controlplane bench dra --api --help" in " ".join(out.split())


def test_a_profile_py_spy_left_empty_is_said(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # a py-spy that could not attach: gone at once, its file not written, its last line the reason
    spy = subprocess.Popen([sys.executable, "-c", "import sys; sys.exit('Error: Permission denied')"],
                           stderr=subprocess.PIPE)
    spy.wait(timeout=30)
    out = tmp_path / "stacks.txt"
    _stop_profiler(spy, str(out))
    err = capsys.readouterr().err
    assert f"--profile {out}: py-spy recorded nothing (exit 1: Error: Permission denied)" in err


def test_a_profile_with_stacks_is_left_alone(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "stacks.txt"
    out.write_text("main;run 3\n")
    _stop_profiler(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"],
                                    stderr=subprocess.PIPE), str(out))
    assert capsys.readouterr().err == ""
