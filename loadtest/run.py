"""The harness: ``python -m loadtest run SCENARIO [options]``.

1. Without ``--target``, start ``controlplane serve --no-tls`` on a fresh data
   directory under ``--out`` (with ``--no-scheduler`` when the harness's binder
   places the pods) and wait for ``/readyz``. With ``--target``, take the
   credentials from ``--token`` or ``--kubeconfig`` (``loadtest.kubeauth``: a
   token, a client certificate, an exec plugin), which every client uses.
   Several targets (API server replicas, as behind a load balancer) share the
   load: each user sticks to one (``loadtest.locustfiles.base.spread_index``);
   the harness's checks and probes go to the first, and every one is scraped.
2. Start Locust headless and distributed: a master and ``--processes``
   workers (``locust -f loadtest/locustfiles/scenario.py``), the scenario's
   plan in their environment. Remote workers can join the same master
   (docs/operations.md); the harness prints their command.
3. Scrape ``/metrics`` every ``--scrape-interval`` seconds and show progress
   (rich): phase, objects created, request rates, failures, latest p99s.
4. When the plan's table ends (or, for a quota run, when every pod created has
   been deleted), stop, and write Locust's CSV and JSON, ``server.jsonl``,
   ``summary.json`` and ``report.html`` with its plots into ``--out``.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import math
import os
import re
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx

from . import kubeauth, leftworkers, report, scenarios, shapes
from .kubeauth import Credentials, CredentialsError
from .serverwatch import ReplicasWatcher, ServerWatcher
from .slo import TOO_FEW

__all__ = ["EXIT_CODES", "add_arguments", "main", "outcome", "run"]

LOCUSTFILE = Path(__file__).parent / "locustfiles" / "scenario.py"

# ``run``'s exit codes, as a CI job reads them (clusterloader2 exits non-zero when a measurement fails)
EXIT_PASS, EXIT_FAIL, EXIT_USAGE, EXIT_INCOMPLETE, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
EXIT_CODES = (
    (EXIT_PASS, "the run is complete, no request failed and no SLO verdict failed (a verdict without data "
                "neither passes nor fails)"),
    (EXIT_FAIL, "a request failed, or an SLO verdict failed (not counted with --no-fail-on-slo)"),
    (EXIT_USAGE, "the run did not start, and wrote no report: a bad option, or a check before the load refused "
                 "it (the target, its credentials, --out, the server the harness starts)"),
    (EXIT_INCOMPLETE, "the run is not complete (summary.json's incomplete_because: a Locust worker lost, fewer "
                      "workers than expected, the server gone...): its verdicts judge less than the plan's load"),
    (EXIT_INTERRUPTED, "interrupted (Ctrl-C, SIGTERM, SIGHUP): a partial report, or none before the load"),
)
# a server whose /metrics has not taken a connection for this long is gone: the load stops there
TARGET_GONE_SECONDS = 10.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


_GO_DURATION = re.compile(r"((\d+(\.\d*)?|\.\d+)(h|ms|m|s))+\Z")
_GO_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


def _seconds(text: str) -> float:
    """A positive, finite number of seconds, or a Go duration (``90s``, ``10m``, ``1h30m``),
    as ``controlplane serve`` reads its durations."""
    try:
        v = float(text)
    except ValueError:
        if not _GO_DURATION.match(text):
            raise argparse.ArgumentTypeError(f"not a duration: {text!r} (seconds, or as 90s, 10m, 1h)") from None
        v = sum(float(n) * _GO_UNITS[u] for n, _, u in re.findall(r"(\d+(\.\d*)?|\.\d+)(h|ms|m|s)", text))
    if not (math.isfinite(v) and v > 0):
        raise argparse.ArgumentTypeError(f"must be more than 0 seconds and finite, not {text!r}")
    return v


def _positive(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not (math.isfinite(v) and v > 0):
        raise argparse.ArgumentTypeError(f"must be more than 0, not {text!r}")
    return v


def _at_least(minimum: int) -> Any:
    """An argparse type: a whole number not below ``minimum``."""
    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
        if v < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, not {v}")
        return v
    return parse


def _port(text: str) -> int:
    """A TCP port, or 0 for a free one."""
    v = _at_least(0)(text)
    if v > 65535:
        raise argparse.ArgumentTypeError(f"not a TCP port: {v} (at most 65535; 0 for a free one)")
    return int(v)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("scenario", choices=sorted(scenarios.SCENARIOS),
                   help="the scenario to run (python -m loadtest scenarios says what each does)")
    p.add_argument("--target", metavar="URL", action="append",
                   help="an API server to load (default: start controlplane serve); repeated, or a comma-separated "
                        "list, several replicas of one cluster: the users spread over them, each user sticking to "
                        "one, the checks and probes go to the first, and each one's /metrics is scraped")
    p.add_argument("--kubeconfig", type=Path, metavar="PATH",
                   help="credentials for --target: its current context's user (a token, a client certificate, "
                        "an exec plugin) and its cluster's CA; its server is the target when --target is not given")
    p.add_argument("--context", metavar="NAME",
                   help="the --kubeconfig's context to use, as kubectl's --context (default: its current one)")
    p.add_argument("--token", help="bearer token for --target (default: from --kubeconfig)")
    p.add_argument("--users", type=_at_least(0), metavar="N",
                   help="weighted users at the shape's peak (churn's and kubelets' controllers, list-storm's "
                        "operators, gang's training jobs); 0 runs only the clients the scenario has a fixed "
                        "count of (default: the scenario's)")
    p.add_argument("--duration", type=_seconds, metavar="SECONDS",
                   help="length of the run, in seconds or as 90s, 10m, 1h (default: the scenario's)")
    p.add_argument("--shape", choices=sorted(shapes.SHAPES), help="load shape (default: the scenario's)")
    p.add_argument("--scale", type=_positive, default=1.0, metavar="FACTOR",
                   help="multiply the scenario's cluster size (nodes, controllers, namespaces) (default: 1)")
    p.add_argument("--pod-rate", type=_positive, metavar="PODS_PER_S",
                   help="pace the million scenario's pod creates and deletes at this rate, all controllers "
                        "together, as clusterloader2's throughput (default: unpaced, as fast as the server answers)")
    p.add_argument("--impersonate", choices=("auto", "on", "off"), default="auto",
                   help="send each client's requests as the identity it stands for (Impersonate-User): kubelets "
                        "as system:node:NAME in system:nodes, the ReplicaSet controllers as kube-system's "
                        "replicaset-controller, the binder as system:kube-scheduler, informers and operators as "
                        "service accounts, so that API Priority and Fairness, audit and authorization see a "
                        "cluster's callers rather than one; the run's credentials must be allowed to impersonate "
                        "(auto: on for the server the harness starts, off for --target)")
    p.add_argument("--processes", type=_at_least(0), default=1, metavar="N",
                   help="Locust worker processes on this machine; 0 with --expect-workers for remote ones only "
                        "(default: 1)")
    p.add_argument("--expect-workers", type=_at_least(0), default=0, metavar="N",
                   help="wait for this many workers in all, remote ones included (default: --processes)")
    p.add_argument("--workers-wait", type=_seconds, default=120.0, metavar="SECONDS",
                   help="how long to wait for the expected workers before giving up, in seconds or as 90s, 5m "
                        "(default: 120)")
    p.add_argument("--master-port", type=_port, default=0, metavar="PORT",
                   help="the master's port for workers (default: a free one)")
    p.add_argument("--master-bind-host", default="127.0.0.1", metavar="HOST",
                   help="where the master listens for workers; 0.0.0.0 for remote ones (default: %(default)s)")
    p.add_argument("--out", type=Path, metavar="DIR",
                   help="output directory (default: loadtest-results/SCENARIO-TIMESTAMP)")
    p.add_argument("--quick", action="store_true",
                   help="a small version with under 60 s of load (a longer --duration is cut to 55 s); the "
                        "server's start, Locust's and the report come on top")
    p.add_argument("--binder", choices=("auto", "on", "off"), default="auto",
                   help="run the load test's binder: auto = when the harness starts the server, which it then "
                        "starts with --no-scheduler, or when no scheduler takes up a --target's probe pod "
                        "within 10 s (default: %(default)s)")
    p.add_argument("--port", type=_port, default=0, help="port for the server the harness starts (default: free)")
    p.add_argument("--server-arg", action="append", default=[], metavar="ARG",
                   help="extra argument for controlplane serve (repeatable)")
    p.add_argument("--scrape-interval", type=_positive, default=2.0, metavar="SECONDS",
                   help="seconds between /metrics scrapes (default: %(default)s)")
    p.add_argument("--no-progress", action="store_true",
                   help="no progress display (without a terminal, a line every 30 s stands for the live table)")
    p.add_argument("--no-fail-on-slo", dest="fail_on_slo", action="store_false",
                   help="exit 0 when only SLO verdicts failed (latencies on a slow machine), still 1 when a request "
                        "failed and 3 when the run is not complete; the verdicts are reported as ever")


def exit_codes_text() -> str:
    """The exit codes, for ``run --help``."""
    return "exit codes:\n" + "\n".join(textwrap.fill(what, 79, initial_indent=f"  {code:<5}", subsequent_indent=" " * 7,
                                                       break_on_hyphens=False)
                                         for code, what in EXIT_CODES)


def report_exit_codes_text() -> str:
    """The exit codes, for ``report --help``: the run's, read from its directory."""
    codes = [(c, what) for c, what in EXIT_CODES if c != EXIT_USAGE]
    codes.insert(2, (EXIT_USAGE, "not a run's directory, or a bad option"))
    return (textwrap.fill("exit codes, as run's for the outcome the rebuilt report reads (the line that says it "
                          "goes to stderr, after summary.json's totals on stdout):", 79) + "\n"
            + "\n".join(textwrap.fill(what, 79, initial_indent=f"  {code:<5}", subsequent_indent=" " * 7,
                                       break_on_hyphens=False) for code, what in codes))


def _controllers_arg(played: Sequence[str], extra: Sequence[str]) -> list[str]:
    """``--controllers`` turning off the built-in controllers the users play (``played``), unless
    the server's own arguments say which run.

    >>> _controllers_arg(["replicaset-controller"], [])
    ['--controllers', '*,-replicaset-controller']
    >>> _controllers_arg(["replicaset-controller"], ["--controllers=*"])
    []
    """
    if not played or any(a == "--controllers" or a.startswith("--controllers=") for a in extra):
        return []
    return ["--controllers", ",".join(["*", *(f"-{name}" for name in played)])]


class _Server:
    """``controlplane serve`` started by the harness."""

    def __init__(self, out: Path, port: int, scheduler: bool, extra: list[str], played: Sequence[str] = ()
                 ) -> None:
        self.port = port or _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        state = out / "server"
        shutil.rmtree(state / "data", ignore_errors=True)  # a fresh store each run, even in a reused --out
        state.mkdir(parents=True, exist_ok=True)
        self.log = (state / "serve.log").open("wb")
        cmd = [sys.executable, "-m", "controlplane", "serve", "--no-tls", "--port", str(self.port),
               "--data-dir", str(state / "data"), "--kubeconfig-out", str(state / "kubeconfig"),
               "--log-level", "warning", *([] if scheduler else ["--no-scheduler"]),
               *_controllers_arg(played, extra), *extra]
        self.command = shlex.join(cmd)
        # a process group of its own (and of its children: the store's syncer, a components process):
        # a terminal's Ctrl-C reaches the harness alone, which stops the server once the load is over
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     process_group=0)

    def wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"controlplane serve exited with {self.proc.returncode}; see {self.log.name}")
            try:
                if httpx.get(self.url + "/readyz", timeout=2).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"controlplane serve not ready within {timeout:g} s; see {self.log.name}")

    def check_alive(self) -> None:
        """After /readyz answered: it was this server that answered (not another on the port)."""
        time.sleep(0.2)
        if self.proc.poll() is not None:
            raise RuntimeError(f"controlplane serve exited with {self.proc.returncode}; see {self.log.name}")

    def refusal(self) -> str | None:
        """Why the load's requests would all be refused, or None: its clients send no token (the
        server is plain HTTP, --no-tls), so a --server-arg that turns authorization on
        (``--authorization-mode RBAC``) leaves them anonymous and forbidden."""
        return _anonymous_refusal(self.url)

    def log_tail(self, lines: int = 5) -> str:
        """The last lines ``serve`` wrote (why it did not start)."""
        try:
            text = Path(self.log.name).read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join("  " + x for x in text.strip().splitlines()[-lines:])

    def stop(self) -> int:
        try:
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._kill_group()
                return self.proc.wait()
        except KeyboardInterrupt:  # a second Ctrl-C while it shuts down: no server is left behind
            self._kill_group()
            self.proc.wait()
            raise
        finally:
            self.log.close()

    def _kill_group(self) -> None:
        """SIGKILL to the server and its children (its process group)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)


def _read_stats(path: Path) -> dict[tuple[str, str], dict[str, str]]:
    try:
        with path.open(newline="") as f:
            return {(r["Type"], r["Name"]): r for r in csv.DictReader(f)}
    except (OSError, KeyError):
        return {}


def _count(stats: dict[tuple[str, str], dict[str, str]], method: str, name: str) -> int:
    r = stats.get((method, name))
    if not r:
        return 0
    return int(float(r.get("Request Count") or 0)) - int(float(r.get("Failure Count") or 0))


def _progress_rows(stats: dict[tuple[str, str], dict[str, str]], server: dict[str, Any]) -> list[tuple[str, str]]:
    """The live view's rows: counts from Locust's statistics so far, the latest p99s."""
    agg = stats.get(("", "Aggregated"), {})
    rate = _float_or_none(agg.get("Requests/s"))
    # pods seen bound by whoever binds them (the harness's binder, or a --target's scheduler)
    bound = max(_count(stats, "POST", "pods/binding"), _count(stats, "LATENCY", "pod create→bound"))
    rows = [("pods created", f"{_count(stats, 'POST', 'pods'):,}"), ("pods bound", f"{bound:,}"),
            ("pods deleted", f"{_count(stats, 'DELETE', 'pods'):,}"),
            ("nodes registered", f"{_count(stats, 'POST', 'nodes'):,}"),
            ("requests/s (all)", "–" if rate is None else f"{rate:,.1f}"),
            ("failures", agg.get("Failure Count", "–"))]
    for (method, name), r in sorted(stats.items()):
        if method in ("POST", "GET", "PATCH", "PUT", "LATENCY") and name in (
                "pods", "pods [cluster]", "pods [namespace]", "pods/status", "leases", "watch delivery pods",
                "pod startup"):
            rows.append((f"p99 {method} {name}", f"{r.get('99%', '–')} ms"))
    worst = " (worst replica)" if server.get("replicas") else ""
    for key, label in (("lock_wait_writer", "server writer lock wait p99"),
                       ("event_delivery", "server event delivery p99"),
                       ("event_loop_lag", f"event loop lag p99{worst}")):
        v = (server.get(key) or {}).get("p99")
        rows.append((label, "–" if v is None else f"{v * 1000:.3f} ms"))
    replicas = server.get("replicas")
    if replicas:  # several targets: each one's memory (the lag above is the worst replica's)
        for r in replicas:
            if r.get("rss_bytes"):
                rows.append((f"RSS {r['target'].split('://', 1)[-1]}", f"{r['rss_bytes'] / 2**20:,.0f} MiB"))
    elif server.get("rss_bytes"):
        rows.append(("server RSS", f"{server['rss_bytes'] / 2**20:,.0f} MiB"))
    return rows


def _float_or_none(text: str | None) -> float | None:
    try:
        return float(text) if text else None
    except ValueError:
        return None


# what Locust's master logs of its workers while it waits for them, and once it starts the load
_JOINED = re.compile(rb"(\d+) workers connected|(\d+) of \d+ connected")
_SHAPE_STARTING = b"Shape test starting"


class _LoadStart:
    """When the load began: once Locust's master logs that its shape starts, which it does only
    when the workers it expects have joined (at once with local ones; a remote one may take
    minutes). The run's clock (its phase, the progress, the deadline that ends a run whose master
    does not end it) starts there. Counted from the master's start instead, a worker that joined
    after the run's duration and a minute (a --quick smoke's 80 s, within --workers-wait's 120)
    met a run the harness had already ended, and no load ran. The log is read on from where the
    last poll stopped, and not at all once the load has begun. Requests in Locust's statistics
    start the clock too, should a master not say so (a Locust that words it otherwise): the run
    is then timed from a moment late, never from before its workers joined."""

    def __init__(self, master_log: Path) -> None:
        self.path = master_log
        self.at: float | None = None     # time.monotonic() of the start
        self.epoch: float | None = None  # time.time() of it
        self.joined = 0                  # the workers connected, as the master last said
        self._offset = 0
        self._partial = b""              # a line the master has not finished writing

    def poll(self, loaded: bool = False) -> bool:
        """Whether the load has begun; ``loaded``: Locust's statistics count requests."""
        if self.at is not None:
            return True
        try:
            with self.path.open("rb") as f:
                f.seek(self._offset)
                chunk = f.read()
        except OSError:
            chunk = b""
        self._offset += len(chunk)
        *lines, self._partial = (self._partial + chunk).split(b"\n")
        for line in lines:
            m = _JOINED.search(line)
            if m:
                self.joined = int(m.group(1) or m.group(2))
            if _SHAPE_STARTING in line:
                self.at, self.epoch = time.monotonic(), time.time()
        if self.at is None and loaded:
            self.at, self.epoch = time.monotonic(), time.time()
        return self.at is not None


class _Progress:
    """The live terminal view (rich); without a terminal (a CI log, ``nohup``) a line every
    ``every`` seconds instead; nothing with --no-progress."""

    def __init__(self, mode: str, title: str, every: float = 30.0) -> None:
        self.live: Any = None
        self.title = title
        self.lines = mode == "lines"
        self.every = every
        self.next_line = every
        self.next_wait_line = every
        if mode == "live":
            from rich.console import Console
            from rich.live import Live

            self.live = Live(console=Console(stderr=True), refresh_per_second=2, transient=False)
            self.live.start()

    def update(self, elapsed: float, duration: float, phase: str, stats: dict[tuple[str, str], dict[str, str]],
               server: dict[str, Any]) -> None:
        if self.lines and elapsed >= self.next_line:
            self.next_line = elapsed + self.every
            rows = dict(_progress_rows(stats, server))
            print(f"{self.title}: {phase}, {elapsed:,.0f} / {duration:,.0f} s; pods created {rows['pods created']}, "
                  f"bound {rows['pods bound']}, deleted {rows['pods deleted']}; requests/s "
                  f"{rows['requests/s (all)']}, failures {rows['failures']}", file=sys.stderr, flush=True)
        if self.live is None:
            return
        from rich.markup import escape
        from rich.table import Table

        t = Table(title=f"{self.title} — {phase} — {elapsed:,.0f} / {duration:,.0f} s", show_edge=False)
        for col in ("", "value"):
            t.add_column(col)
        for label, value in _progress_rows(stats, server):
            t.add_row(escape(label), value)  # [cluster] is not markup
        self.live.update(t)

    def waiting(self, waited: float, joined: int, expected: int) -> None:
        """Before the load: Locust's master waits for the workers it expects (remote ones)."""
        text = f"{self.title}: waiting for Locust's workers, {joined} of {expected} joined, {waited:,.0f} s"
        if self.lines and waited >= self.next_wait_line:
            self.next_wait_line = waited + self.every
            print(text, file=sys.stderr, flush=True)
        if self.live is not None:
            from rich.text import Text

            self.live.update(Text(text))

    def stop(self) -> None:
        if self.live is not None:
            self.live.stop()


def _drive(args: argparse.Namespace, plan: scenarios.Plan, out: Path, targets: list[str], auth: Credentials,
           server: _Server | None) -> dict[str, Any]:
    """Run Locust (master + workers) against ``targets`` (the users spread over them, the plan's
    ``targets`` parameter when there are several) while watching the servers; return what happened."""
    target = targets[0]
    against = target if len(targets) == 1 else f"{', '.join(targets)} (the users spread over them)"
    stop_file = out / ".stop"
    stop_file.unlink(missing_ok=True)
    master_port = args.master_port or _free_port()
    left_file = out / "locust-workers.json"  # the workers that left the test, as the master saw them
    env = {**os.environ, **plan.environment(), kubeauth.ENV: auth.to_env(), "LOADTEST_STOP_FILE": str(stop_file),
           leftworkers.ENV_FILE: str(left_file),
           "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parent.parent),
                                          os.environ.get("PYTHONPATH", "")])}
    locust = [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--host", target]
    expect = args.expect_workers or args.processes
    master_cmd = [*locust, "--master", "--headless", "--expect-workers", str(expect),
                  # Locust's master takes whole seconds (0: for ever), and gives up once they are past
                  "--expect-workers-max-wait", str(math.ceil(args.workers_wait)),
                  "--master-bind-host", args.master_bind_host, "--master-bind-port", str(master_port),
                  "--csv", str(out / "locust"), "--csv-full-history", "--json-file", str(out / "locust"),
                  "--loglevel", "INFO", "--logfile", str(out / "locust-master.log"), "--only-summary",
                  "--exit-code-on-error", "0", "--stop-timeout", "5"]
    worker_cmd = [*locust, "--worker", "--master-host", "127.0.0.1", "--master-port", str(master_port),
                  "--loglevel", "WARNING"]
    devnull = subprocess.DEVNULL
    if expect > args.processes:
        # for `python -m loadtest worker --plan` elsewhere; written before the master starts, so
        # that a worker which waits for the master to listen reads this run's plan, never one an
        # earlier run left (it holds the credentials: mode 0600)
        from controlplane.files import write_private

        from .worker import PLAN_FILE, plan_document

        write_private(out / PLAN_FILE, json.dumps(plan_document(env, master_port)).encode())
    # process groups of their own: a terminal's Ctrl-C (SIGINT to its foreground process group) reaches
    # the harness alone, which then ends the load the way a run ends, so that the master still writes its
    # results (a master that got the terminal's SIGINT and then the harness's was killed before it wrote
    # locust.json, and the server died under the load)
    master = subprocess.Popen(master_cmd, env=env, stdout=devnull, stderr=(out / "locust-master.err").open("wb"),
                              stdin=devnull, process_group=0)
    workers = []
    for i in range(args.processes):
        workers.append(subprocess.Popen([*worker_cmd, "--logfile", str(out / f"locust-worker{i}.log")],
                                        env={**env, "LOADTEST_WORKER": f"w{i}"}, stdout=devnull,
                                        stderr=(out / f"locust-worker{i}.err").open("wb"), stdin=devnull,
                                        process_group=0))
    if expect > args.processes:
        remote = {k: env[k] for k in ("LOADTEST_SCENARIO", "LOADTEST_PARAMS", kubeauth.ENV)}
        print("loadtest: waiting for remote workers; on each machine run:\n  "
              + " ".join(f"{k}={shlex.quote(v)}" for k, v in remote.items()) + " LOADTEST_WORKER=$(hostname) "
              + shlex.join(["python", "-m", "locust", "-f", "loadtest/locustfiles/scenario.py", "--worker",
                            "--master-host", "THIS_HOST", "--master-port", str(master_port)])
              + "\nor, with a copy of (or a volume holding) the plan this run wrote:\n  "
              + shlex.join(["python", "-m", "loadtest", "worker", "--plan", str(out / "worker-plan.json"),
                            "--master-host", "THIS_HOST"]), file=sys.stderr)
        for note in dict.fromkeys(n for t in targets for n in _remote_notes(args.master_bind_host, t)):
            print(f"loadtest: note: {note}", file=sys.stderr)

    watcher: ServerWatcher | ReplicasWatcher
    if len(targets) == 1:
        watcher = ServerWatcher(target, out, auth, pid=server.proc.pid if server else None,
                                interval=args.scrape_interval)
    else:
        watcher = ReplicasWatcher(targets, out, auth, interval=args.scrape_interval)
    watcher.start()
    mode = "off" if args.no_progress else "live" if sys.stderr.isatty() else "lines"
    if mode != "off":
        # a quota run's read "40 pods created and deleted (at most 55 s) of load against ..."
        length = (f"{plan.pods_target:,} pods created and deleted, in at most {plan.duration:g} s of load,"
                  if plan.until == "quota" else f"{plan.duration:g} s of load")
        print(f"loadtest {plan.scenario}: {length} against {against}; results in {out}", file=sys.stderr,
              flush=True)
    progress = _Progress(mode, f"loadtest {plan.scenario}")
    spawned, spawned_epoch = time.monotonic(), time.time()
    clock = _LoadStart(out / "locust-master.log")
    # until the load begins, the master's own wait for its workers bounds the run (it gives up after
    # --workers-wait); once it has, the plan's duration does
    wait_deadline = spawned + math.ceil(args.workers_wait) + 60
    run_for = plan.duration + 60 + (30 if plan.until == "quota" else 0)
    load_started, load_epoch = spawned, spawned_epoch
    peak_pods = 0
    timings: dict[str, float] = {}
    unreachable_target: str | None = None  # of several targets, the one gone
    lost_at: dict[int, float] = {}  # local workers that died under the load (killed, out of memory)
    left: list[dict[str, Any]] = []  # workers that left the test as the master saw them (a remote one killed)
    left_read = -1.0
    interrupted = False
    try:
        while master.poll() is None:
            time.sleep(1.0)
            stats = _read_stats(out / "locust_stats.csv")
            began = clock.poll(loaded=bool(_float_or_none(stats.get(("", "Aggregated"), {}).get("Request Count"))))
            if began and clock.at is not None and clock.epoch is not None:
                load_started, load_epoch = clock.at, clock.epoch
            deadline = load_started + run_for if began else wait_deadline
            elapsed = time.monotonic() - load_started if began else 0.0
            phase = shapes.phase_at(plan.table, elapsed)
            if plan.until == "quota":
                created, deleted = _count(stats, "POST", "pods"), _count(stats, "DELETE", "pods")
                peak_pods = max(peak_pods, created - deleted)
                phase = _quota_phase(plan.pods_target, created, deleted)
                if phase == "done" and not stop_file.exists():
                    stop_file.touch()
                    timings["quota_completed"] = round(elapsed, 1)
            if began:
                progress.update(elapsed, plan.duration, phase, stats, watcher.latest)
            else:
                progress.waiting(time.monotonic() - spawned, clock.joined, expect)
            for i, w in enumerate(workers):
                # Locust's master did not notice a worker killed by a signal (it went on dispatching users
                # to it), and the run passed without that worker's share of the load
                if i not in lost_at and w.poll() not in (None, 0):
                    lost_at[i] = round(elapsed, 1)
                    print(f"loadtest: Locust's worker {i} exited with {w.returncode} after {elapsed:.0f} s of "
                          f"load; its users make no load for the rest of the run (see {out / f'locust-worker{i}.err'})",
                          file=sys.stderr)
                    if expect == args.processes and len(lost_at) == len(workers) and not stop_file.exists():
                        # no worker left, none elsewhere: Locust's master would notice after its heartbeat
                        # liveness (30 s) and then wait; the load is over, end it as a run ends
                        stop_file.touch()
                        print("loadtest: no Locust worker is left; stopping the load", file=sys.stderr)
            left, left_read = leftworkers.read(left_file, left_read, left, workers, lost_at, load_epoch)
            if server is not None and server.proc.poll() is not None and "server_exited_at" not in timings:
                # the rest of the run would only fail requests against nothing: end the load now
                timings["server_exited_at"] = round(elapsed, 1)
                stop_file.touch()
                print(f"loadtest: controlplane serve exited with {server.proc.returncode} after {elapsed:.0f} s "
                      f"of load; stopping the load (see {server.log.name})", file=sys.stderr)
            gone = watcher.unreachable_for()
            if gone >= TARGET_GONE_SECONDS and "server_exited_at" not in timings \
                    and "target_unreachable_at" not in timings:
                # a target (or the harness's server) that no longer takes connections: as above
                since = max(0.0, elapsed - gone)  # (0: gone before the load began, while waiting for workers)
                timings["target_unreachable_at"] = round(since, 1)
                gone_target = target
                if isinstance(watcher, ReplicasWatcher):
                    gone_target = unreachable_target = watcher.unreachable_target
                stop_file.touch()
                print(f"loadtest: {gone_target} has refused connections for {gone:.0f} s, since {since:.0f} s "
                      f"of load (the last: {watcher.last_error}); stopping the load", file=sys.stderr)
            if time.monotonic() > deadline and not stop_file.exists():
                stop_file.touch()
            if time.monotonic() > deadline + 60:
                master.send_signal(signal.SIGTERM)
                break
        master.wait(timeout=120)
        timings["master_done"] = round(time.monotonic() - load_started, 1)
        for w in workers:
            try:
                # a master that failed (its port taken, a locustfile error) never tells the workers
                # to quit: they would wait for it to the end of the 30 s
                w.wait(timeout=30 if master.returncode == 0 else 1)
            except subprocess.TimeoutExpired:
                w.kill()
        timings["workers_done"] = round(time.monotonic() - load_started, 1)
    except KeyboardInterrupt:
        # Ctrl-C or SIGTERM: stop the load, and give Locust's master the moment it needs
        # to write its results, so the partial run still gets a report
        interrupted = True
        stop_file.touch()
        print("loadtest: interrupted; stopping the load and writing a partial report", file=sys.stderr)
        if master.poll() is not None:
            pass
        elif clock.poll():
            # the stop file ends the shape at its next tick (each second), as at the end of a run: the
            # master stops its workers and writes its results. A SIGINT instead raced with Locust's
            # own shutdown (a KeyboardInterrupt during it killed the master before it wrote locust.json,
            # measured); it is only for a master that does not stop
            try:
                master.wait(timeout=15)
            except subprocess.TimeoutExpired:
                master.send_signal(signal.SIGINT)
        else:
            # still waiting for its workers: no shape ticks yet, and no results to write
            master.send_signal(signal.SIGINT)
        with contextlib.suppress(subprocess.TimeoutExpired):
            master.wait(timeout=20)
    finally:
        progress.stop()
        for w in workers:
            if w.poll() is None:
                w.kill()
        if master.poll() is None:
            master.kill()
        watcher.stop()
    left, _ = leftworkers.read(left_file, left_read, left, workers, lost_at, load_epoch, final=True)
    master_log = out / "locust-master.log"
    said = master_log.read_text(errors="replace") if master_log.exists() else ""
    # Locust's master starts no user until the workers it expects have joined
    no_workers = "Gave up waiting for workers" in said
    load_ran = "Shape test starting" in said
    if not interrupted:
        # a master that gave up on its workers exits with 1, which the line below says better
        for line in _locust_failures(out, None if no_workers else master, workers):
            print(f"loadtest: {line}", file=sys.stderr)
    if no_workers:
        print(f"loadtest: gave up after {args.workers_wait:g} s: fewer than the {expect} expected workers "
              f"joined, so no load ran; see {master_log}", file=sys.stderr)
    if watcher.errors:
        print(f"loadtest: {watcher.errors} /metrics scrape{'s' if watcher.errors != 1 else ''} of "
              f"{', '.join(targets)} failed; "
              f"the last: {watcher.last_error}", file=sys.stderr)
    final = _read_stats(out / "locust_stats.csv")
    quota = {"target": plan.pods_target, "created": _count(final, "POST", "pods"),
             "deleted": _count(final, "DELETE", "pods"), "completed_at": timings.pop("quota_completed", None)}
    return {"processes": args.processes, "expected_workers": expect, "master_exit": master.returncode,
            "interrupted": interrupted, "workers_missing_after": args.workers_wait if no_workers else None,
            "load_started": load_ran,
            "quota": quota if plan.until == "quota" else None,
            "worker_exits": [w.returncode for w in workers],
            "workers_lost": [{"worker": i, "exit": workers[i].returncode, "at": at}
                             for i, at in sorted(lost_at.items())],
            "workers_left": left, "heartbeat_liveness": leftworkers.heartbeat_liveness(),
            # pods created and not yet deleted at most, counted in a quota run only
            "load_seconds": round(time.monotonic() - load_started, 1),
            "peak_pods": peak_pods if plan.until == "quota" else None,
            "scrape_errors": watcher.errors, "scrape_error": watcher.last_error,
            **({"unreachable_target": unreachable_target} if unreachable_target else {}), **timings}


def _locust_failures(out: Path, master: Any, workers: list[Any]) -> list[str]:
    """Why Locust processes ended with an error (an exit code above 0, not a kill): the last
    line each wrote to its ``.err`` (a master whose port was taken, a locustfile that failed),
    else its log, where Locust writes its own errors. ``master`` None: not the master's."""
    lines = []
    for name, proc, stem in (("master", master, "locust-master"),
                             *((f"worker {i}", w, f"locust-worker{i}") for i, w in enumerate(workers))):
        if proc is None or not proc.returncode or proc.returncode < 0:
            continue
        err = out / f"{stem}.err"
        try:
            said = [x.strip() for x in err.read_text(errors="replace").splitlines() if x.strip()]
        except OSError:
            said = []
        lines.append(f"Locust's {name} exited with {proc.returncode}" + (f": {said[-1][:300]}" if said else "")
                     + f" (see {err if said else out / f'{stem}.log'})")
    return lines

def _quota_phase(target: int, created: int, deleted: int) -> str:
    """Where a quota run is, from its controllers' pod creates and deletes so far. Once every
    pod created is deleted it stays ``done`` while Locust winds down (it read ``deleting`` again
    after the first second)."""
    if created < target:
        return "creating"
    if target and deleted >= created:
        return "done"
    return "deleting" if deleted else "running"


_LOOPBACK = ("127.0.0.1", "localhost", "::1", "[::1]")


def _remote_notes(master_bind_host: str, target: str) -> list[str]:
    """What keeps workers on other machines from joining or loading (they can run on this one)."""
    notes = []
    if master_bind_host in _LOOPBACK:
        notes.append(f"the master listens on {master_bind_host} only: workers on other machines cannot reach it "
                     "(give --master-bind-host 0.0.0.0)")
    host = httpx.URL(target).host
    if host in _LOOPBACK or host.startswith("127."):
        notes.append(f"the workers load {target}, a loopback address: on other machines that is not this server "
                     "(give a --target they reach)")
    return notes


def _terminate(signum: int, frame: object) -> None:
    # SIGTERM, SIGHUP (and SIGINT where a background shell ignored it) unwind through the
    # finally blocks, which stop Locust and the server and still write the report
    raise KeyboardInterrupt


@contextlib.contextmanager
def terminated_by_signals() -> Iterator[None]:
    """SIGINT (also where a background shell set it to be ignored), SIGTERM (a CI job's end, a
    timeout) and SIGHUP (the terminal closed: the children have process groups of their own, so
    it reaches the harness alone) stop the harness as a Ctrl-C does (``_terminate``); the
    caller's handlers are back after it (tests run the harness in process)."""
    before = {signum: signal.signal(signum, _terminate) for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for signum, handler in before.items():
            if handler is not None:  # (None: not set from Python, not Python's to put back)
                signal.signal(signum, handler)


# what a run writes at the top of its --out (a reused --out must not lend a new run the old results)
_OUTPUTS = ("locust_stats.csv", "locust_stats_history.csv", "locust_failures.csv", "locust_exceptions.csv",
            "locust.json", "locust-master.log", "locust-master.err", "locust-workers.json", "server.jsonl",
            "metrics-first.prom", "metrics-last.prom", "plan.json", "run.json", "summary.json", "report.html", ".stop",
            "worker-plan.json",
            *(f"{name}.png" for name in report.PLOTS))


# what a run's directory has from its start (plan.json) or its end
_RUN_MARKS = ("plan.json", "run.json", "locust.json", "summary.json")


def _prepare_out(out: Path) -> None:
    """Make ``out`` (a directory), and remove what an earlier run left there: a run that
    ends before Locust writes its results must not be reported with the previous run's."""
    if out.exists() and not out.is_dir():
        raise SystemExit(f"loadtest: --out {out} exists and is not a directory")
    # a reused --out is an earlier run's; any other directory with files in it (--out ., a home
    # directory) is not the harness's to clear and fill
    if out.is_dir() and any(out.iterdir()) and not any((out / f).exists() for f in _RUN_MARKS):
        raise SystemExit(f"loadtest: --out {out} is a directory with other files in it, not an earlier run's "
                         f"(no {', '.join(_RUN_MARKS)}): give a new or empty directory")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise SystemExit(f"loadtest: cannot create --out {out}: {e.strerror or e}") from e
    try:
        for name in _OUTPUTS:
            (out / name).unlink(missing_ok=True)
        for stale in [*out.glob("locust-worker*.*"), *out.glob("metrics-first-*.prom"),
                      *out.glob("metrics-last-*.prom")]:  # (a run of several targets: replica N's scrapes)
            stale.unlink(missing_ok=True)
        probe = out / ".write-check"  # the results go here at the end: know now that they can
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as e:
        raise SystemExit(f"loadtest: cannot write to --out {out}: {e.strerror or e}") from e


def _check_args(args: argparse.Namespace) -> None:
    if args.processes == 0 and not args.expect_workers:
        raise SystemExit("loadtest: --processes 0 runs no worker here: give --expect-workers N for remote ones")
    if args.expect_workers and args.expect_workers < args.processes:
        raise SystemExit(f"loadtest: --expect-workers counts every worker, the {args.processes} local ones "
                         f"(--processes) included: give at least {args.processes}")


def _check_plan(args: argparse.Namespace, plan: scenarios.Plan) -> None:
    """Refuse options the scenario has nothing to apply to, rather than run without them: ``--users``
    and ``--shape`` move only weighted users (smoke's and million's clients are all fixed counts), and
    ``--scale`` only what a scenario sizes by it."""
    name = plan.scenario
    if not plan.weighted:
        for given, option in ((args.users is not None, "--users"), (args.shape is not None, "--shape")):
            if given:
                raise SystemExit(f"loadtest: {option} does not apply to {name}: its clients are fixed counts, "
                                 "with no weighted users to shape" + (
                                     "; --scale sizes it" if _scales(args, plan) else ""))
    if args.scale != 1.0 and not _scales(args, plan):
        raise SystemExit(f"loadtest: --scale does not apply to {name}: its size is fixed")


def _scales(args: argparse.Namespace, plan: scenarios.Plan) -> bool:
    """Whether ``--scale`` changes the scenario's size (smoke's is fixed)."""
    a, b = (scenarios.build(plan.scenario, quick=args.quick, scale=s) for s in (1.0, 2.0))
    return (a.fixed, a.weighted, a.peak, a.params) != (b.fixed, b.weighted, b.peak, b.params)


def _target_list(given: Sequence[str] | None) -> list[str]:
    """The ``--target`` options, each a URL or a comma-separated list of them, as one list
    without trailing ``/``; a URL given twice is refused (its users would be twice as many).

    >>> _target_list(["https://a:6443/,https://b:6443", "https://c:6443"])
    ['https://a:6443', 'https://b:6443', 'https://c:6443']
    """
    targets = [t.strip().rstrip("/") for option in given or () for t in option.split(",")]
    if any(not t for t in targets):
        raise SystemExit(f"loadtest: --target {','.join(given or ())!r} has an empty URL in it")
    twice = sorted({t for t in targets if targets.count(t) > 1})
    if twice:
        raise SystemExit(f"loadtest: --target {', '.join(twice)} is given more than once")
    return targets


def _resolve_target(args: argparse.Namespace) -> tuple[str | None, Credentials, bool]:
    """(target, credentials, binder): the server to load (None: the harness starts one; of
    several ``--target``, the first), how every client authenticates to it, and whether the
    harness's binder places the pods."""
    given = _target_list(args.target)
    try:
        target, auth = kubeauth.for_target(args.kubeconfig, args.token, given[0] if given else None, args.context)
    except CredentialsError as e:
        raise SystemExit(f"loadtest: {e}") from None
    if target is None and args.token:
        # the server the harness starts is plain HTTP, its requests anonymous: the token would go unused
        raise SystemExit("loadtest: --token is for a --target (or a --kubeconfig's server); the server the "
                         "harness starts takes none")
    if target is not None:
        for given, option in ((args.server_arg, "--server-arg"), (args.port, "--port")):
            if given:
                raise SystemExit(f"loadtest: {option} is for the server the harness starts; it does not apply to "
                                 f"--target {target}" + (" (the kubeconfig's server)" if not args.target else ""))
    # auto: the binder runs when the harness starts the server (then with --no-scheduler); against a
    # --target or a kubeconfig's server, whose scheduler places the pods, only if it has none (run's probe)
    binder = args.binder == "on" or (args.binder == "auto" and target is None)
    return target, auth, binder


def run(args: argparse.Namespace) -> int:
    with terminated_by_signals():
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    started = time.monotonic()
    _check_args(args)
    try:
        plan = scenarios.build(args.scenario, quick=args.quick, scale=args.scale, users=args.users,
                               duration=args.duration, shape=args.shape, pod_rate=args.pod_rate)
    except KeyError as e:
        raise SystemExit(f"loadtest: {e.args[0]}") from None
    _check_plan(args, plan)
    # the run's id: its kubelets label their Nodes with it, and its binder places pods on those only
    plan = scenarios.Plan(**{**plan.__dict__, "params": {**plan.params, "run_id": secrets.token_hex(4)}})
    out: Path = args.out or Path("loadtest-results") / f"{args.scenario}-{time.strftime('%Y%m%d-%H%M%S')}"
    if out.exists() and not out.is_dir():
        raise SystemExit(f"loadtest: --out {out} exists and is not a directory")
    target, auth, binder = _resolve_target(args)
    # the replicas after the first, which take their share of the users and are scraped, no more
    more = _target_list(args.target)[1:]
    # the clients as the identities they stand for: on the server the harness starts (which lets anyone
    # impersonate unless its --server-arg say otherwise), on a --target when asked
    impersonate = args.impersonate == "on" or (args.impersonate == "auto" and target is None)
    plan = scenarios.Plan(**{**plan.__dict__, "params": {**plan.params, "impersonate": impersonate}})
    if target is not None:
        try:
            for t in (target, *more):  # each replica the load goes to: reachable, the credentials taken
                _check_target(t, auth)
            if args.binder == "auto":
                binder = _binder_needed(target, auth)
        except CredentialsError as e:  # an exec plugin that failed
            raise SystemExit(f"loadtest: {e}") from None
    if not binder:
        plan = plan.without_binder()
    if target is not None:
        try:
            _check_resources(target, auth, plan)
            _check_access(target, auth, plan)
            if args.impersonate == "on":
                _check_impersonation(target, auth)
        except CredentialsError as e:  # an exec plugin that failed
            raise SystemExit(f"loadtest: {e}") from None
    if more:
        plan = scenarios.Plan(**{**plan.__dict__, "params": {**plan.params, "targets": [target, *more]}})
    _prepare_out(out)
    (out / "plan.json").write_text(json.dumps({"scenario": plan.scenario, "description": plan.description,
                                               **plan.to_json()}, indent=2) + "\n")
    server: _Server | None = None
    if target is None:
        server = _Server(out, args.port, scheduler=not binder, extra=args.server_arg,
                         played=plan.played_controllers)
        try:
            server.wait_ready()
            server.check_alive()
            refusal = server.refusal()
            if refusal is not None:
                server.stop()
                raise SystemExit(f"loadtest: {refusal}")
        except RuntimeError as e:
            server.stop()
            tail = server.log_tail()
            raise SystemExit(f"loadtest: {e}" + (f"; it said:\n{tail}" if tail else "")) from None
        except KeyboardInterrupt:
            server.stop()
            raise
        target = server.url

    server_rc = None
    try:
        info = _drive(args, plan, out, [target, *more], auth, server)
    finally:
        if server is not None:
            server_rc = server.stop()
    wall = time.monotonic() - started
    (out / "run.json").write_text(json.dumps({
        "scenario": plan.scenario, "command": shlex.join(["python", "-m", "loadtest", "run", *_redacted(sys.argv[2:])])
        if sys.argv[1:2] == ["run"] else None,
        "target": target, **({"targets": [target, *more]} if more else {}),
        "server_command": server.command if server else None,
        "server_pid": server.proc.pid if server else None, "server_exit": server_rc,
        "wall_seconds": round(wall, 1), **info,
    }, indent=2) + "\n")
    summary = report.build(out)
    if info.get("workers_missing_after") is not None:
        # the server's own traffic (its nodes' Leases) would pass verdicts of a load that never ran
        print(f"loadtest {plan.scenario}: no load ran: fewer than the {info['expected_workers']} expected Locust "
              f"workers joined within {info['workers_missing_after']:g} s; report: {out / 'report.html'}")
        return EXIT_INCOMPLETE
    if info["interrupted"] and not info["load_started"]:
        # as above: interrupted while Locust's master waited for its workers
        print(f"loadtest {plan.scenario}: no load ran: interrupted before Locust started it (its master was waiting "
              f"for {info['expected_workers']} worker{'s' if info['expected_workers'] != 1 else ''}); "
              f"report: {out / 'report.html'}")
        return EXIT_INTERRUPTED
    print(f"loadtest {plan.scenario}: SLOs {summary['overall']}; {summary['requests']:,} requests, "
          f"{summary['failures']:,} failed, {summary['expected_non_2xx']:,} deliberate non-2xx; "
          f"report: {out / 'report.html'}")
    if summary["incomplete_because"]:
        print(f"  not complete: {'; '.join(summary['incomplete_because'])}")
    for line in summary["workers_quit"]:
        print(f"  note: {line}")
    for r in summary["client_errors"][:3]:
        print(f"  {r['count']:>7,} errors in the load's clients: {r['message']} ({r['where']}; see "
              f"{out / 'locust_exceptions.csv'})")
    for r in summary["failure_reasons"][:3]:
        print(f"  {r['occurrences']:>7,} failed  {r['type']} {r['name']}: {r['error']}")
    for v in summary["verdicts"]:
        # client-side p99s are Locust's whole milliseconds: no decimals they do not have
        p99 = "–" if v["p99_s"] is None else f"{report.fmt(v['p99_s'] * 1000)} ms"
        client = "" if v.get("client_p99_s") is None else (
            f" [server side; the Locust clients' p99 {report.fmt(v['client_p99_s'] * 1000)} ms {v['client_worst']}]")
        print(f"  {v['verdict']:>7}  {v['title']}: p99 {p99} (≤ {v['threshold_s'] * 1000:g} ms) "
              f"{v['worst'] or v.get('note', '')}{client}" + (f"; {v['note']}" if v['worst'] and v.get('note') else ""))
    code, line = outcome(summary, interrupted=bool(info.get("interrupted")), fail_on_slo=args.fail_on_slo)
    print(f"loadtest {plan.scenario}: {line}")
    return code


def outcome(summary: dict[str, Any], *, interrupted: bool, fail_on_slo: bool = True) -> tuple[int, str]:
    """The exit code of a run whose report is ``summary``, and the line that ends its output
    (after the verdicts), as ``EXIT_CODES`` says them: an interrupted run first, then one that is
    not complete (its verdicts judge a load other than the plan's), then failed requests, then the
    SLO verdicts (a "no data" or "too few samples" verdict neither passes nor fails), which ``fail_on_slo`` False
    (``--no-fail-on-slo``) leaves out of the code, not out of the line.

    >>> outcome({"incomplete_because": [], "failures": 0, "verdicts": [
    ...     {"title": "pod startup", "verdict": "fail"}, {"title": "GET", "verdict": "pass"}]}, interrupted=False)
    (1, 'FAIL (exit 1): 1 of 2 SLO verdicts failed: pod startup')
    """
    verdicts = summary["verdicts"]
    failed = [v["title"] for v in verdicts if v["verdict"] == "fail"]
    passed = sum(v["verdict"] == "pass" for v in verdicts)
    few = sum(v["verdict"] == TOO_FEW for v in verdicts)
    slo = (f"{len(failed)} of {len(verdicts)} SLO verdict{'s' if len(verdicts) != 1 else ''} failed: "
           + ", ".join(failed)) if failed else (
        f"{passed} SLO verdict{'s' if passed != 1 else ''} passed"
        + (f", {few} with too few samples" if few else "")
        + (f", {len(verdicts) - passed - few} without data" if passed + few != len(verdicts) else ""))
    requests = f"{summary['failures']:,} request{'s' if summary['failures'] != 1 else ''} failed"
    if interrupted:
        return EXIT_INTERRUPTED, f"INTERRUPTED (exit {EXIT_INTERRUPTED}): a partial report"
    if summary["incomplete_because"]:
        return EXIT_INCOMPLETE, (f"INCOMPLETE (exit {EXIT_INCOMPLETE}): " + "; ".join(summary["incomplete_because"])
                                 + (f"; {requests}" if summary["failures"] else ""))
    if summary["failures"]:
        return EXIT_FAIL, f"FAIL (exit {EXIT_FAIL}): {requests}" + (f"; {slo}" if failed else "")
    if failed and fail_on_slo:
        return EXIT_FAIL, f"FAIL (exit {EXIT_FAIL}): {slo}"
    if failed:
        return EXIT_PASS, f"PASS (exit {EXIT_PASS}, --no-fail-on-slo): complete, no request failed; {slo}"
    return EXIT_PASS, f"PASS (exit {EXIT_PASS}): complete, no request failed, {slo}"


def _redacted(argv: list[str]) -> list[str]:
    """``argv`` with the value of ``--token`` hidden: the command goes into shared reports."""
    out, hide = [], False
    for a in argv:
        if hide:
            out.append("REDACTED")
            hide = False
        elif a == "--token":
            out.append(a)
            hide = True
        elif a.startswith("--token="):
            out.append("--token=REDACTED")
        else:
            out.append(a)
    return out


def _anonymous_refusal(url: str) -> str | None:
    """What the server at ``url`` answers the harness's own server's clients (anonymous) when
    it refuses them a LIST of pods, which every scenario makes; None when it allows it."""
    try:
        r = httpx.get(url.rstrip("/") + "/api/v1/pods?limit=1", timeout=10)
    except httpx.HTTPError:
        return None  # the load will find out, and the harness say so
    if r.status_code not in (401, 403):
        return None
    return (f"the server the harness started answered {r.status_code} to GET /api/v1/pods without credentials: "
            "its clients send none (it serves plain HTTP, --no-tls), so a --server-arg that turns authorization "
            "on (--authorization-mode RBAC) refuses every request of the load; start controlplane serve with it "
            "yourself and give --target and --kubeconfig")


def _scheme_hint(target: str, error: Exception) -> str:
    """What to say of ``target``'s scheme when reaching it failed with ``error``: a TLS server
    given as http:// hangs up without an answer ("Server disconnected"), a plain one given as
    https:// answers the TLS handshake with bytes that are no TLS record; a certificate the
    kubeconfig does not trust names what to give. Else nothing."""
    if target.startswith("https://") and "WRONG_VERSION_NUMBER" in str(error):
        return " (it does not speak TLS: a server started with --no-tls is http://)"
    if target.startswith("http://") and isinstance(error, httpx.RemoteProtocolError):
        return " (a server with TLS, as controlplane serve without --no-tls, is https://)"
    said = str(error)
    if "CERTIFICATE_VERIFY_FAILED" in said:
        # verified only with a kubeconfig (a bare --token is not): what in it to look at
        if "mismatch" in said:
            return (" (the certificate does not name this host: the kubeconfig's tls-server-name gives the name "
                    "to verify)")
        return (" (the server's certificate is not signed by the CA the kubeconfig's cluster gives, "
                "certificate-authority(-data), or by the system's roots without one; or "
                "insecure-skip-tls-verify: true)")
    return ""


def _check_target(target: str, auth: Credentials) -> None:
    """Fail before any load when ``target`` cannot serve it: no scheme, nothing listening,
    the wrong scheme, credentials refused, or a user the server's authorizer (RBAC) does not
    let list and create what every scenario does (pods, namespaces)."""
    if not target.startswith(("http://", "https://")):
        raise SystemExit(f"loadtest: --target must be a URL with its scheme (https://HOST:PORT), not {target!r}")
    try:
        host = httpx.URL(target).host
    except httpx.InvalidURL as e:
        raise SystemExit(f"loadtest: --target {target!r} is not a URL: {e}") from None
    if not host:
        raise SystemExit(f"loadtest: --target {target!r} names no host (https://HOST:PORT)")
    with auth.httpx_client(timeout=10) as client:
        _check_reachable_and_allowed(target, auth, client)


def _check_reachable_and_allowed(target: str, auth: Credentials, client: httpx.Client) -> None:
    base = target.rstrip("/")
    try:
        r = client.get(base + "/api")
    except httpx.HTTPError as e:
        raise SystemExit(f"loadtest: cannot reach {target}: {e!r}{_scheme_hint(target, e)}") from e
    if r.status_code in (401, 403):
        raise SystemExit(f"loadtest: {target} refused the credentials ({r.status_code}); {_refused(auth)}")
    if r.status_code != 200:
        raise SystemExit(f"loadtest: {target}/api answered {r.status_code}; is it a Kubernetes API server?")
    # discovery is open to every authenticated user; what the load does may not be
    probes = (("GET", "/api/v1/pods?limit=1", None),
              ("POST", "/api/v1/namespaces?dryRun=All",
               {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "loadtest-permission-check"}}))
    for method, path, body in probes:
        try:
            r = client.request(method, base + path, json=body)
        except httpx.HTTPError as e:
            raise SystemExit(f"loadtest: cannot reach {target}: {e!r}") from e
        if r.status_code == 403:
            try:
                message = str(r.json().get("message") or "")
            except ValueError:
                message = ""
            raise SystemExit(f"loadtest: {target} does not allow this user the load's requests: "
                             f"{method} {path.split('?')[0]} answered 403"
                             + (f" ({message})" if message else "")
                             + "; use an admin's credentials (a user in system:masters, or bound to cluster-admin)")


# the probe pod: no node has its nodeSelector's label, so a scheduler can only mark it
# unschedulable; it asks for nothing else, and passes the restricted Pod Security Standard
_PROBE_NAMESPACE = "default"
_PROBE_POD = {
    "apiVersion": "v1", "kind": "Pod",
    "metadata": {"generateName": "loadtest-scheduler-probe-", "labels": {"loadtest": "true"}},
    "spec": {"nodeSelector": {"loadtest/scheduler-probe": "no-node-has-this"}, "terminationGracePeriodSeconds": 0,
             "securityContext": {"runAsNonRoot": True, "runAsUser": 65535,
                                 "seccompProfile": {"type": "RuntimeDefault"}},
             "containers": [{"name": "probe", "image": "registry.k8s.io/pause:3.10",
                             "securityContext": {"allowPrivilegeEscalation": False,
                                                 "capabilities": {"drop": ["ALL"]}}}]},
}


def _scheduler_takes_pods(target: str, auth: Credentials, wait: float = 10.0) -> bool | None:
    """Whether a scheduler takes up ``target``'s pods: a probe pod no node can take is marked
    ``PodScheduled: False`` (Unschedulable) by any scheduler within moments, and by nothing
    without one. None when the probe cannot tell (its create refused: admission, a quota);
    the probe is deleted either way."""
    base = target.rstrip("/")
    pods = f"{base}/api/v1/namespaces/{_PROBE_NAMESPACE}/pods"
    with auth.httpx_client(timeout=10) as client:
        try:
            r = client.post(pods, json=_PROBE_POD)
            if r.status_code != 201:
                return None
            name = r.json()["metadata"]["name"]
        except (httpx.HTTPError, ValueError, KeyError, TypeError):
            return None
        try:
            deadline = time.monotonic() + wait
            while True:
                r = client.get(f"{pods}/{name}")
                conditions = ((r.json().get("status") or {}).get("conditions") or []) if r.status_code == 200 else []
                if any(c.get("type") == "PodScheduled" for c in conditions if isinstance(c, dict)):
                    return True
                if time.monotonic() >= deadline:
                    return False
                time.sleep(0.2)
        except (httpx.HTTPError, ValueError, AttributeError):
            return None
        finally:
            with contextlib.suppress(httpx.HTTPError):
                client.delete(f"{pods}/{name}", params={"gracePeriodSeconds": "0"})


def _binder_needed(target: str, auth: Credentials, wait: float = 10.0) -> bool:
    """``--binder auto`` against a target: the harness's binder places the pods when no
    scheduler does (a server started with --no-scheduler), else the target's scheduler."""
    takes = _scheduler_takes_pods(target, auth, wait)
    if takes is False:
        print(f"loadtest: no scheduler took up a probe pod within {wait:g} s: the harness's binder places the "
              "pods (--binder off leaves them pending)", file=sys.stderr)
        return True
    if takes is None:
        print("loadtest: note: could not probe for a scheduler (the probe pod in namespace "
              f"{_PROBE_NAMESPACE} was refused); the target's scheduler is assumed to place the pods "
              "(--binder on if it has none)", file=sys.stderr)
    return False


def _refused(auth: Credentials) -> str:
    """What to do about credentials the server refused (401, or 403 on discovery)."""
    sent = auth.describe()
    if sent:
        return f"{sent}: not one it knows (another server's, or an older token file's?)"
    if auth.unsupported:
        return (f"the kubeconfig's user has no credentials the harness can use, only {auth.unsupported}: pass "
                "--token (a service account's bound to cluster-admin, from kubectl create token, say)")
    return "the kubeconfig's user has no credentials: pass --token" if auth.origin else "pass --token or --kubeconfig"


def _check_resources(target: str, auth: Credentials, plan: scenarios.Plan) -> None:
    """Fail before any load when ``target`` does not serve an API resource the scenario's
    clients call (its discovery, ``/api/v1`` and ``/apis/GROUP/VERSION``): a cluster older
    than the Workload API (``scheduling.k8s.io/v1beta1``) or without DRA (``resource.k8s.io/v1``)
    would fail every one of those calls for the whole run."""
    base = target.rstrip("/")
    missing: list[tuple[str, list[str]]] = []  # (what, the user classes that call it)
    with auth.httpx_client(timeout=10) as client:
        answers = {}
        for gv in scenarios.api_resources(plan):
            try:
                answers[gv] = client.get(base + (f"/api/{gv}" if "/" not in gv else f"/apis/{gv}"))
            except httpx.HTTPError as e:
                raise SystemExit(f"loadtest: cannot reach {target}: {e!r}") from e
    for gv, resources in scenarios.api_resources(plan).items():
        r = answers[gv]
        if r.status_code not in (200, 404):  # not discovery's to say (a 403, a 5xx): the load finds out
            continue
        served: set[str] = set()
        if r.status_code == 200:
            try:
                served = {str(x.get("name")) for x in r.json().get("resources") or () if isinstance(x, dict)}
            except (ValueError, AttributeError):
                continue
        lacking = [name for name in resources if name not in served]
        if lacking:
            what = (f"{gv} (for {', '.join(lacking)})" if not served else f"{', '.join(lacking)} of {gv}")
            missing.append((what, sorted({u for name in lacking for u in resources[name]})))
    if missing:
        binder_only = all(users == ["BinderUser"] for _, users in missing)
        raise SystemExit(
            f"loadtest: {target} does not serve what the {plan.scenario} scenario's clients call: "
            + "; ".join(f"{what}, called by {', '.join(users)}" for what, users in missing)
            + (". Give --binder off: the cluster's scheduler places the pods" if binder_only else
               ". The clients make Kubernetes 1.37's requests: choose a scenario that does not need these"))


def _can_i(client: httpx.Client, target: str, attributes: dict[str, str]) -> bool | None:
    """Whether the server lets this user do what ``attributes`` (a SelfSubjectAccessReview's
    ``resourceAttributes``) say; None when it answers no review (no authorization API)."""
    review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
              "spec": {"resourceAttributes": attributes}}
    try:
        r = client.post(target.rstrip("/") + "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", json=review)
        return (r.json().get("status") or {}).get("allowed") if r.status_code in (200, 201) else None
    except httpx.HTTPError as e:
        raise SystemExit(f"loadtest: cannot reach {target}: {e!r}") from e
    except (ValueError, AttributeError):
        return None


def _check_impersonation(target: str, auth: Credentials) -> None:
    """Fail before any load when ``--impersonate on`` would be refused: this user may not
    impersonate users, groups or service accounts (asked as ``kubectl auth can-i impersonate``).
    What each identity may then do is its own (a kubelet's is the Node authorizer's, a
    controller's its bootstrap role's), not checked here."""
    denied = []
    with auth.httpx_client(timeout=10) as client:
        for resource in ("users", "groups", "serviceaccounts"):
            if _can_i(client, target, {"resource": resource, "verb": "impersonate"}) is False:
                denied.append(resource)
    if denied:
        raise SystemExit(f"loadtest: {target} does not let this user impersonate {', '.join(denied)} "
                         "(--impersonate on); use an admin's credentials or --impersonate off")


def _check_access(target: str, auth: Credentials, plan: scenarios.Plan) -> None:
    """Fail before any load when the server's authorizer (RBAC) denies this user a call the
    scenario's clients make, asked as ``kubectl auth can-i`` asks (SelfSubjectAccessReviews):
    the run would make the load it is allowed and fail the rest for its whole length. A server
    that answers no review (no authorization API) is not checked."""
    # the user classes -> resource -> the verbs they are denied
    denied: dict[tuple[str, ...], dict[str, list[str]]] = {}
    with auth.httpx_client(timeout=10) as client:
        for (gv, plural, verb), users in scenarios.api_access(plan).items():
            group, _, version = gv.rpartition("/")
            resource, _, subresource = plural.partition("/")
            allowed = _can_i(client, target, {"group": group, "version": version, "resource": resource,
                                              "subresource": subresource, "verb": verb})
            if allowed is None:
                return
            if not allowed:
                what = f"{resource}.{group}{'/' + subresource if subresource else ''}" if group else plural
                denied.setdefault(tuple(users), {}).setdefault(what, []).append(verb)
    if denied:
        raise SystemExit(
            f"loadtest: {target} does not allow this user calls the {plan.scenario} scenario's clients make: "
            + "; ".join(", ".join(f"{what} ({' '.join(verbs)})" for what, verbs in calls.items())
                        + f" for {', '.join(users)}" for users, calls in denied.items())
            + "; use an admin's credentials (a user in system:masters, or bound to cluster-admin)")

def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m loadtest", description="controlplane load tests (Locust).")
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="run a scenario", description="Run a load test scenario.",
                       epilog=exit_codes_text(), formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(r)
    rep = sub.add_parser("report", help="rebuild the report of a run directory",
                         description=textwrap.fill("Rebuild summary.json and report.html from a run's directory, "
                                                   "and exit with the code run gives that outcome.", 79),
                         epilog=report_exit_codes_text(), formatter_class=argparse.RawDescriptionHelpFormatter)
    rep.add_argument("dir", type=Path)
    rep.add_argument("--no-fail-on-slo", dest="fail_on_slo", action="store_false",
                     help="exit 0 when only SLO verdicts failed, as run's option")
    sub.add_parser("scenarios", help="list the scenarios")
    sub.add_parser("harness-rate", help="the harness's own request rate per worker core", add_help=False)
    sub.add_parser("worker", help="a Locust worker for a run whose master is elsewhere (its worker-plan.json)",
                   add_help=False)
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["harness-rate"]:
        from .harnessrate import main as harness_rate

        return harness_rate(argv[1:])
    if argv[:1] == ["worker"]:
        from .worker import main as worker

        return worker(argv[1:])
    args = p.parse_args(argv)
    if args.command == "report":
        if not args.dir.is_dir() or not any((args.dir / f).exists() for f in ("plan.json", "run.json", "locust.json")):
            raise SystemExit(f"loadtest: {args.dir} is not a run's directory (no plan.json, run.json or locust.json)")
        s = report.build(args.dir)
        print(json.dumps({k: s[k] for k in ("scenario", "overall", "requests", "failures")}))
        # the code run gave (or would have given) this outcome, so that a CI job may judge a copy of a run
        ran = report.read_run(args.dir)
        code, line = outcome(s, interrupted=bool(ran.get("interrupted")), fail_on_slo=args.fail_on_slo)
        print(f"loadtest {s['scenario'] or 'report'}: {line}", file=sys.stderr)
        return code
    if args.command == "scenarios":
        for name in scenarios.SCENARIOS:
            print(f"{name:12} {scenarios.build(name).description}")
        return 0
    try:
        return run(args)
    except KeyboardInterrupt:  # before the load started (a run under way writes its partial report)
        print("loadtest: interrupted", file=sys.stderr)
        return 130
