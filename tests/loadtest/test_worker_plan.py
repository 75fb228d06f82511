"""``python -m loadtest worker --plan``: a Locust worker that another machine or container
starts from the plan file the run writes (docker-compose.yml's workers), against the harness
of ``run --processes 0 --expect-workers N``. (Apart from test_smoke.py, whose runs fill one
test process: the suite runs a file's tests in one.)"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from .test_smoke import _env


@pytest.mark.slow
@pytest.mark.timeout(150)
def test_a_worker_from_the_plan_file_joins_this_run_not_the_one_before(tmp_path: Path) -> None:
    # `python -m loadtest worker --plan` (a container of docker-compose.yml, a machine with a copy of
    # the plan) started before the run, with an earlier run's plan in the directory: it must wait for
    # the master and read the plan written for it, not run the earlier scenario's users
    import os
    import signal
    import socket

    from loadtest.worker import PLAN_FILE

    out = tmp_path / "run"
    out.mkdir()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    (out / "plan.json").write_text("{}")  # an earlier run's directory
    stale = {"environment": {"LOADTEST_SCENARIO": "churn", "LOADTEST_PARAMS": "{}", "LOADTEST_AUTH": "{}"},
             "master_port": port}
    (out / PLAN_FILE).write_text(json.dumps(stale))
    worker = subprocess.Popen([sys.executable, "-m", "loadtest", "worker", "--plan", str(out / PLAN_FILE),
                               "--master-host", "127.0.0.1", "--name", "Compose_Worker.1"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
                              env=_env(), start_new_session=True)
    try:
        proc = subprocess.run([sys.executable, "-m", "loadtest", "run", "smoke", "--quick", "--duration", "12",
                               "--processes", "0", "--expect-workers", "1", "--master-port", str(port),
                               "--out", str(out), "--no-progress"],
                              capture_output=True, text=True, timeout=130, cwd=tmp_path, env=_env())
        _, worker_err = worker.communicate(timeout=30)
    finally:
        if worker.poll() is None:
            os.killpg(worker.pid, signal.SIGKILL)
            worker.wait()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["complete"] is True, proc.stdout + proc.stderr + worker_err
    assert summary["failures"] == 0, summary["failed_entries"]
    assert "loadtest worker Compose_Worker.1: joining the master at 127.0.0.1:" in worker_err
    assert "(smoke)" in worker_err
    seen = {(e["type"], e["name"]) for e in summary["entries"]}
    # smoke's users, not churn's: its OperatorUser's (churn has none) made requests; a TrainingJobUser's
    # first POST or a pod's start may come after the 12 s on a loaded machine (one did, beside other work)
    assert ("GET", "deployments") in seen, seen
    plan = json.loads((out / PLAN_FILE).read_text())
    assert plan["master_port"] == port and plan["environment"]["LOADTEST_SCENARIO"] == "smoke"
    assert (out / PLAN_FILE).stat().st_mode & 0o777 == 0o600  # it holds the run's credentials
    assert "python -m loadtest worker --plan " in proc.stderr


def test_a_worker_without_a_master_gives_up_saying_why(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "loadtest", "worker", "--plan", str(tmp_path / "none.json"),
                           "--master-host", "127.0.0.1", "--wait", "1"],
                          capture_output=True, text=True, timeout=30, cwd=tmp_path, env=_env())
    assert proc.returncode == 3
    assert f"no master listening at 127.0.0.1 (no plan at {tmp_path / 'none.json'} yet) after 1 s" in proc.stderr
