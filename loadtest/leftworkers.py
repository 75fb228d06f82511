"""The Locust workers that left a run under way: what the harness and the report know of them.

Locust's master writes them (``loadtest.locustfiles.workers``, a worker killed on another
machine, which only the master notices) into the file ``LOADTEST_WORKERS_FILE`` names; the
harness reads it during the run (:func:`read`), keeps them in ``run.json``'s ``workers_left``,
and the report makes the run incomplete with :func:`said`'s sentence for each one :func:`lost`
(its users' load was lost), and notes the others: a worker that quit cleanly while others
went on, to which the master handed its users. Nothing here imports Locust, which patches the
standard library (gevent) of the process that imports it.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path
from typing import Any

__all__ = ["DEFAULT_LIVENESS", "ENV_FILE", "ENV_LIVENESS", "heartbeat_liveness", "lost", "read", "said"]

ENV_FILE = "LOADTEST_WORKERS_FILE"
# seconds of missed heartbeats before the master gives a worker up; Locust's 3 is too few on a
# loaded machine (below), a test gives fewer than the default to see a worker go missing soon
ENV_LIVENESS = "LOADTEST_HEARTBEAT_LIVENESS"
DEFAULT_LIVENESS = 30


def heartbeat_liveness() -> int:
    """``LOADTEST_HEARTBEAT_LIVENESS``, or 30: a worker that misses 3 one-second heartbeats
    (Locust's default) is dropped, and on a loaded machine (the server, Locust and other work
    sharing two cores) a busy worker can be late by more than that."""
    try:
        v = int(os.environ.get(ENV_LIVENESS) or DEFAULT_LIVENESS)
    except ValueError:
        return DEFAULT_LIVENESS
    return v if v >= 3 else DEFAULT_LIVENESS


def read(path: Path, seen: float, left: list[dict[str, Any]], local: list[Any], lost_at: dict[int, float],
         load_epoch: float, final: bool = False) -> tuple[list[dict[str, Any]], float]:
    """The workers that left the test as Locust's master saw them (``locust-workers.json``,
    written by ``loadtest.locustfiles.workers`` when it changes), read again when it changed
    since ``seen`` (its mtime), times made seconds of load; each one new is said at once. A
    local worker whose exit the harness saw already (``lost_at``) is left out: its death is
    said once. Returns them and the mtime read."""
    try:
        mtime = path.stat().st_mtime
        if mtime == seen and not final:
            return left, seen
        entries = json.loads(path.read_text()).get("left") or []
    except (OSError, ValueError, AttributeError):
        return left, seen
    dead_here = {local[i].pid for i in lost_at}
    here = {w.pid for w in local}
    host = socket.gethostname() + "_"

    def seconds(epoch: Any) -> float | None:
        return round(max(0.0, epoch - load_epoch), 1) if isinstance(epoch, int | float) else None

    now = []
    for e in entries:
        if not isinstance(e, dict):
            continue
        is_local = str(e.get("id", "")).startswith(host) and e.get("pid") in here
        if is_local and e.get("pid") in dead_here:
            continue
        others = e.get("others")
        now.append({"worker": str(e.get("worker")), "how": e.get("how"), "local": is_local,
                    "last_heard": seconds(e.get("last_heard")), "at": seconds(e.get("at")),
                    "back_at": seconds(e.get("back_at")), "others": others if isinstance(others, int) else None})
    told = {(e["worker"], e["at"]) for e in left}
    for e in now:
        if (e["worker"], e["at"]) not in told:
            print(f"loadtest: {said(e, heartbeat_liveness())}", file=sys.stderr)
    return now, mtime


def lost(e: dict[str, Any]) -> bool:
    """Whether the load lost what the worker that left made, which makes the run incomplete:
    one given up for its heartbeats (Locust's master hands its users to no one), or the last
    worker's clean quit, on which the master ends the test. A clean quit while other workers
    went on is not (the master hands its users to them, as Locust does), nor is any quit at
    the run's end, which is not recorded. A quit recorded without ``others`` (a run of an
    older harness) counts as before, as lost."""
    return e.get("how") != "quit" or not e.get("others")


def said(e: dict[str, Any], liveness: int) -> str:
    """What a worker that left the test did, in one line (the harness's, the report's)."""
    where = "" if e.get("local") else " (remote)"
    if e.get("how") == "quit":
        quit_ = f"Locust's worker {e['worker']}{where} quit after {_seconds(e['at'])} s of load, before the run's end"
        others = e.get("others")
        if others is None:
            return quit_ + " (its users were handed to the other workers and started anew, if any were left)"
        if others == 0:
            return quit_ + ", the last worker: its master ended the load there"
        return (quit_ + f" (Ctrl-C on it, or its own exit): its master handed its users to the {others} other "
                f"worker{'s' if others != 1 else ''}, which started them anew")
    heard = e.get("last_heard")
    since = f"after {_seconds(heard)} s of load" if heard is not None else "before its first heartbeat"
    text = (f"Locust's worker {e['worker']}{where} stopped answering its master {since} (no heartbeat for "
            f"{liveness} s: killed, stalled, or its machine or network gone)")
    if e.get("back_at") is not None:
        return text + f"; it came back after {_seconds(e['back_at'])} s"
    return text + "; its users made no load after that"


def _seconds(x: float) -> str:
    """``12.5``, ``7`` (seconds of load, to the tenth)."""
    return f"{x:,.1f}".removesuffix(".0")
