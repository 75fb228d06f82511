"""``python -m loadtest worker``: a Locust worker for a run whose master is elsewhere.

A run that expects workers of other machines or containers (``run --expect-workers N``
with fewer ``--processes``) writes what they need into ``OUT/worker-plan.json``: the
scenario, its parameters (the run's id among them), the credentials, and the master's
port. A worker given that file (a shared volume, or a copy) and the master's address
waits until the master listens, reads the plan then, and becomes Locust's worker with it::

    python -m loadtest worker --plan /results/run/worker-plan.json --master-host loadtest

The plan is read only once the master listens: ``run`` writes it before it starts its
master, so a plan left by an earlier run in the same directory is never the one used.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

from .run import EXIT_INCOMPLETE, LOCUSTFILE

__all__ = ["PLAN_FILE", "main", "plan_document"]

PLAN_FILE = "worker-plan.json"
# what a worker's environment takes from the plan; nothing else in it is read
PLAN_ENVIRONMENT = ("LOADTEST_SCENARIO", "LOADTEST_PARAMS", "LOADTEST_AUTH")


def plan_document(environment: dict[str, str], master_port: int) -> dict[str, Any]:
    """The ``worker-plan.json`` of a run: the workers' environment and the master's port."""
    return {"environment": {k: environment[k] for k in PLAN_ENVIRONMENT}, "master_port": master_port}


def _listening(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=2.0):
            return True
    except OSError:
        return False


def _read_plan(path: Path) -> dict[str, Any]:
    try:
        doc: dict[str, Any] = json.loads(path.read_text())
        env = doc["environment"]
        if not (isinstance(env, dict) and all(isinstance(env.get(k), str) for k in PLAN_ENVIRONMENT)
                and isinstance(doc["master_port"], int)):
            raise ValueError("not a worker plan")
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise SystemExit(f"loadtest worker: cannot use --plan {path}: {e}") from None
    return doc


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m loadtest worker",
                                description="Run a Locust worker for a run whose master is on another machine "
                                            "or container, from the worker-plan.json that run writes into its "
                                            "--out directory.")
    p.add_argument("--plan", type=Path, required=True, help="the run's worker-plan.json")
    p.add_argument("--master-host", required=True, help="where the run's master is")
    p.add_argument("--master-port", type=int, default=None, help="its port (default: the plan's)")
    p.add_argument("--name", default=socket.gethostname(),
                   help="the worker's name in its objects' names (default: this host's name)")
    p.add_argument("--wait", type=float, default=300.0,
                   help="how long to wait for the master to listen, in seconds (default: %(default)g)")
    args = p.parse_args(argv)
    deadline = time.monotonic() + args.wait
    while True:
        port = args.master_port
        if port is None and args.plan.exists():
            port = _read_plan(args.plan)["master_port"]
        if port is not None and _listening(args.master_host, port):
            break
        if time.monotonic() > deadline:
            print(f"loadtest worker: no master listening at {args.master_host}"
                  + (f":{port}" if port is not None else f" (no plan at {args.plan} yet)")
                  + f" after {args.wait:g} s", file=sys.stderr)
            return EXIT_INCOMPLETE
        time.sleep(0.5)
    plan = _read_plan(args.plan)  # read again now that the master listens: written before it started
    port = args.master_port or plan["master_port"]
    root = str(Path(__file__).resolve().parent.parent)
    env = {**os.environ, **plan["environment"], "LOADTEST_WORKER": args.name,
           "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH", "")]))}
    print(f"loadtest worker {args.name}: joining the master at {args.master_host}:{port} "
          f"({plan['environment']['LOADTEST_SCENARIO']})", file=sys.stderr, flush=True)
    command = [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--worker",
               "--master-host", args.master_host, "--master-port", str(port), "--loglevel", "WARNING"]
    os.execve(sys.executable, command, env)
