"""``controlplane bench idle``: what a ``controlplane serve`` that nobody uses costs.

Each of ``--runs`` servers (``serve --no-tls`` on a fresh data directory, the
``--serve-arg`` options added) is started, and once its ``/readyz`` answers and
``--settle`` seconds more have passed (its components' first lists and elections),
left alone for ``--seconds``. Printed, as medians over the runs:

- ``start_cpu``: CPU seconds to ``/readyz``, serve's process and its children (the
  LMDB store's applier and syncer; with ``--components-process``, the components
  process too);
- ``idle_cpu``: share of a core while idle, serve's process, its store's helpers and
  its components process apart;
- ``idle_wakeups``: voluntary context switches a second of serve's event loop thread
  (``/proc/PID/task/PID/status``): each time the loop went to sleep in ``epoll_wait``
  and woke, for a timer or a socket. The count does not depend on how busy the
  machine is, where the CPU figures do.

An idle server's cost is its timers: a wake-up costs about 0.25 ms of CPU on this
machine whatever its callback does (docs/benchmarks.md). The test suite starts
about 200 servers as processes, most of them idle while a test waits.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import tempfile
import time
from pathlib import Path

from . import help_text

BENCH = "idle"


def _wakeups(pid: int) -> int:
    """Voluntary context switches of ``pid``'s main thread (its event loop) so far."""
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/task/{pid}/status").read_text().splitlines():
            if line.startswith("voluntary_ctxt_switches:"):
                return int(line.split()[1])
    return 0


def measure(seconds: float, serve_args: list[str], settle: float = 3.0) -> dict[str, float]:
    """One server started, ready, ``settle`` seconds later idle for ``seconds``: its figures."""
    from .api import _free_port
    from .nodes_api import _cpu_parts
    from .scheduler import start_server, stop_all

    with tempfile.TemporaryDirectory(prefix="cp-bench-idle-") as tmp:
        proc = start_server(Path(tmp), _free_port(), serve_args)
        try:
            start = sum(_cpu_parts(proc.pid))
            time.sleep(settle)
            c0, w0, t0 = _cpu_parts(proc.pid), _wakeups(proc.pid), time.monotonic()
            time.sleep(seconds)
            c1, w1, wall = _cpu_parts(proc.pid), _wakeups(proc.pid), time.monotonic() - t0
        finally:
            stop_all([proc])
    own, helpers, components = ((b - a) / wall for a, b in zip(c0, c1, strict=True))
    return {"start_cpu": start, "own": own, "helpers": helpers, "components": components,
            "wakeups": (w1 - w0) / wall}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="controlplane bench idle", description=help_text(__doc__),
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3,
                        help="servers started, one after the other (default: %(default)s)")
    parser.add_argument("--seconds", type=float, default=10.0,
                        help="idle time measured (default: %(default)s)")
    parser.add_argument("--settle", type=float, default=3.0,
                        help="seconds after /readyz before the idle time (default: %(default)s)")
    parser.add_argument("--serve-arg", action="append", default=[], metavar="ARG",
                        help="an option for serve, repeated for several (--serve-arg=--components-process)")
    args = parser.parse_args(argv)
    if args.runs < 1 or not args.seconds > 0 or not args.settle >= 0:
        parser.error("--runs must be at least 1, --seconds above 0 and --settle at least 0")
    runs = [measure(args.seconds, args.serve_arg, args.settle) for _ in range(args.runs)]

    def emit(metric: str, key: str, unit: str, **extra: object) -> None:
        values = [r[key] for r in runs]
        print(json.dumps({"bench": BENCH, "metric": metric, "value": round(statistics.median(values), 4),
                          "unit": unit, "runs": [round(v, 4) for v in values], "seconds": args.seconds,
                          "settle": args.settle, "serve_args": args.serve_arg, **extra}), flush=True)

    emit("start_cpu", "start_cpu", "s", part="serve and its children, to /readyz")
    for part in ("own", "helpers", "components"):
        emit("idle_cpu", part, "cores", part=part)
    emit("idle_wakeups", "wakeups", "1/s", part="serve's event loop thread")
    return 0
