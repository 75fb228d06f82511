"""Which Locust workers left a run under way, as its master saw them.

A worker on another machine that is killed (out of memory, its machine gone) sends no
``quit``: Locust's master only stops hearing its heartbeats, marks it ``missing`` after
``HEARTBEAT_LIVENESS`` of them, and goes on without its users (they are not handed to
the other workers unless rebalancing is on); when it was the last worker, the master
stops the test and, headless, waits for ever. The harness sees its own workers' processes,
not those of other machines, so the master writes what it saw into
``LOADTEST_WORKERS_FILE`` (JSON, rewritten on each change) for the harness to read:

``{"left": [{"worker": NAME, "id": LOCUST_ID, "pid": PID, "how": "missing" | "quit",
"last_heard": EPOCH, "at": EPOCH, "back_at": EPOCH | null, "others": N}]}``

``worker`` is the worker's ``LOADTEST_WORKER`` (and ``pid`` its process id), which every
worker adds to its reports to the master (every 3 s); a worker that left before its first
report is named by Locust's id (its host name and a random suffix). ``last_heard`` is its
last heartbeat, ``at`` when the master gave it up (``missing``) or got its ``quit``,
``back_at`` when a missing one's heartbeats came back (a worker stalled, not dead),
``others`` how many workers the master had left then.

Locust tells the two apart as this does: a worker that quits cleanly (Ctrl-C on it, its own
exit) sends ``quit``, and the master drops it at once and hands its users to the others,
which start them anew (``MasterRunner.handle_message``), so the load goes on whole, unless it
was the last worker, when the master ends the test; one that sends nothing is only given up
when its heartbeats stop (``heartbeat_worker``), and its users are lost. Only what happens
while the test runs is recorded: not the joins before it, nor the workers' quits at its end
(the master asks them to quit once it has stopped the test). The last worker's quit stops
the test there and then, so the master's ``test_stopping`` looks once more first.

A master whose last worker went missing quits, headless, as it does when its last worker
quits, so the run ends and the master writes its results.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import gevent
import locust.runners
from locust.env import Environment
from locust.runners import STATE_MISSING, STATE_RUNNING, STATE_SPAWNING, MasterRunner, WorkerRunner

from ..leftworkers import ENV_FILE, heartbeat_liveness

__all__ = ["install"]

class _Watch:
    """The master's record of the workers that left the test while it ran."""

    def __init__(self, runner: MasterRunner, path: Path) -> None:
        self.runner = runner
        self.path = path
        self.names: dict[str, tuple[str, int | None]] = {}  # Locust's id -> (LOADTEST_WORKER, pid)
        self.heard: dict[str, float] = {}  # Locust's id -> its last heartbeat
        self.left: list[dict[str, Any]] = []
        self.missing: dict[str, dict[str, Any]] = {}  # Locust's id -> its entry in left, while missing
        self.known: set[str] = set()  # the workers of the running test

    def on_report(self, client_id: str, data: dict[str, Any], **_: Any) -> None:
        name = data.get("loadtest_worker")
        if isinstance(name, str):
            pid = data.get("loadtest_pid")
            self.names[client_id] = (name, pid if isinstance(pid, int) else None)

    def on_heartbeat(self, client_id: str, timestamp: float, **_: Any) -> None:
        self.heard[client_id] = timestamp

    def on_test_stopping(self, **_: Any) -> None:
        # the last worker's quit stops the test before the next check would see the test running
        if self.check():
            self.write()

    def _entry(self, client_id: str, how: str, now: float, others: int) -> dict[str, Any]:
        name, pid = self.names.get(client_id, (client_id, None))
        return {"worker": name, "id": client_id, "pid": pid, "how": how, "last_heard": self.heard.get(client_id),
                "at": now, "back_at": None, "others": others}

    def check(self) -> bool:
        """Record what changed since the last check; True when it did."""
        runner, now, changed = self.runner, time.time(), False
        running = runner.state in (STATE_SPAWNING, STATE_RUNNING)
        clients = {c.id: c for c in runner.clients.all}
        # the workers that still make the load: the master dispatches to no missing one
        others = sum(c.state != STATE_MISSING for c in clients.values())
        for cid in self.known - clients.keys():
            # gone from the master's list: a quit (or a missing worker dropped after 60 s more)
            if running and cid not in self.missing:
                self.left.append(self._entry(cid, "quit", now, others))
                changed = True
            self.missing.pop(cid, None)
        for cid, c in clients.items():
            if c.state == STATE_MISSING and cid not in self.missing and (running or cid in self.known):
                entry = self._entry(cid, "missing", now, others)
                self.left.append(entry)
                self.missing[cid] = entry
                changed = True
            elif c.state != STATE_MISSING and cid in self.missing:
                self.missing.pop(cid)["back_at"] = now
                changed = True
        self.known = set(clients) if running else self.known & set(clients)
        return changed

    def write(self) -> None:
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps({"left": self.left}, indent=2) + "\n")
        tmp.replace(self.path)  # the harness never reads half a file

    def run(self, headless: bool) -> None:
        while True:
            gevent.sleep(1.0)
            if self.check():
                self.write()
            if headless and self.missing and self.runner.worker_count <= 0 and self.runner.shape_greenlet is None:
                # Locust's master stopped the test when its last worker went missing, and then waited for
                # ever (it quits only when its last worker quits): quit, writing the results
                self.runner.quit()
                return


def install(environment: Environment) -> None:
    """On the master, watch the workers (``LOADTEST_WORKERS_FILE``); on a worker, name it in its
    reports to the master. Called by the locustfile's ``init`` listener."""
    runner = environment.runner
    if isinstance(runner, WorkerRunner):
        name, pid = os.environ.get("LOADTEST_WORKER", ""), os.getpid()

        def on_report_to_master(client_id: str, data: dict[str, Any], **_: Any) -> None:
            data["loadtest_worker"] = name or client_id
            data["loadtest_pid"] = pid

        environment.events.report_to_master.add_listener(on_report_to_master)  # type: ignore[no-untyped-call]
    elif isinstance(runner, MasterRunner) and os.environ.get(ENV_FILE):
        watch = _Watch(runner, Path(os.environ[ENV_FILE]))
        environment.events.worker_report.add_listener(watch.on_report)  # type: ignore[no-untyped-call]
        environment.events.heartbeat_sent.add_listener(watch.on_heartbeat)  # type: ignore[no-untyped-call]
        environment.events.test_stopping.add_listener(watch.on_test_stopping)  # type: ignore[no-untyped-call]
        options = environment.parsed_options
        # not in the runner's group of greenlets, which its quit kills
        gevent.spawn(watch.run, bool(options and options.headless))


# read by the master when a worker connects and by every check
locust.runners.HEARTBEAT_LIVENESS = heartbeat_liveness()
