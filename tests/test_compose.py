"""docker-compose.yml stays true to the commands it runs.

The file is run for real by hand (docs/operations.md, "docker compose": etcd x3, three
replicas, a distributed Locust run); CI has no Docker daemon, so this checks what can
drift without one: every command's flags are ones its parser takes, the replicas agree on
what they share, and the workers read the plan where the harness writes it."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

from controlplane import cli

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    return doc


def _interpolated(word: str) -> str:
    # compose's ${VAR:-default}, as an unset variable gives it
    while "${" in word:
        start = word.index("${")
        end = word.index("}", start)
        _, _, default = word[start + 2:end].partition(":-")
        word = word[:start] + default + word[end + 1:]
    return word.replace("$$", "$")


def test_the_replicas_serve_over_the_etcd_cluster_with_what_they_share(compose: dict[str, Any],
                                                                      tmp_path: Path) -> None:
    services = compose["services"]
    replicas = sorted(name for name in services if name.startswith("apiserver-"))
    members = sorted(name for name in services if name.startswith("etcd-"))
    assert len(replicas) >= 2 and len(members) == 3
    commands = {tuple(services[name]["command"]) for name in replicas}
    assert len(commands) == 1  # one command: the same data directory, SANs and store for all
    argv = [_interpolated(w) for w in next(iter(commands))]
    assert argv[:2] == ["controlplane", "serve"]
    parser = cli.build_parser()
    args = parser.parse_args(argv[1:])
    config = cli._config_from_args(parser, args)
    assert config.store == "etcd://" + ",".join(f"{m}:2379" for m in members)
    assert set(replicas) <= set(config.tls_sans)  # the loadtest and the replicas reach them by name
    assert config.host == "0.0.0.0" and config.port == 6443
    # the state each replica shares with the others lies in the shared volume
    assert all(f"state:{Path('/state')}" in services[name]["volumes"] for name in replicas)
    for path in (config.pki_dir, config.generated_token_file, config.kubeconfig_out):
        assert path.is_relative_to("/state"), path
    cluster = services[members[0]]["environment"]["ETCD_INITIAL_CLUSTER"]
    assert cluster == ",".join(f"{m}=http://{m}:2380" for m in members)
    for m in members:
        env = services[m]["environment"]
        assert env["ETCD_NAME"] == m and env["ETCD_ADVERTISE_CLIENT_URLS"] == f"http://{m}:2379"


def test_the_workers_read_the_plan_the_harness_writes(compose: dict[str, Any]) -> None:
    from loadtest import run as loadtest_run
    from loadtest.worker import PLAN_FILE

    services = compose["services"]
    master = services["loadtest"]
    env = {k: _interpolated(str(v)) for k, v in master["environment"].items()}
    shell = master["command"][2]
    for name, value in env.items():
        shell = shell.replace(f'"$${name}"', shlex.quote(value)).replace(f"$${name}", value)
    argv = shlex.split(shell)
    assert argv[:4] == ["exec", "python", "-m", "loadtest"]
    parser = argparse.ArgumentParser()
    loadtest_run.add_arguments(parser)
    args = parser.parse_args(argv[5:])
    assert argv[4] == "run" and args.scenario == "churn" and args.quick
    assert args.processes == 0 and args.expect_workers == int(env["LOCUST_WORKERS"])
    assert args.master_bind_host == "0.0.0.0"
    # the users spread over every replica, the checks and probes go to the first
    replicas = sorted(name for name in services if name.startswith("apiserver-"))
    assert loadtest_run._target_list(args.target) == [f"https://{name}:6443" for name in replicas]
    assert set(master["depends_on"]) == set(replicas)
    assert args.kubeconfig == Path("/state/kubeconfig")
    worker = services["loadtest-worker"]
    assert int(_interpolated(str(worker["deploy"]["replicas"]))) == args.expect_workers
    command = worker["command"]
    assert command[:4] == ["python", "-m", "loadtest", "worker"]
    plan = Path(command[command.index("--plan") + 1])
    assert plan == Path(args.out) / PLAN_FILE
    assert command[command.index("--master-host") + 1] == "loadtest"
    # the results volume the master writes is the one the workers read
    assert f"./loadtest-results:{Path(args.out).parent}" in master["volumes"]
    assert f"./loadtest-results:{Path(args.out).parent}:ro" in worker["volumes"]
