"""Watching the server while Locust loads it: ``/metrics`` scrapes and its process.

Every ``interval`` seconds a :class:`ServerWatcher` thread scrapes ``/metrics``,
reduces the scrape to one line of ``server.jsonl`` (what changed since the
previous scrape: per-interval p99s of the histograms the report plots, the
scheduler's pods/s, and the server's RSS and CPU) and keeps the first and the
last scrape whole (``metrics-first.prom``, ``metrics-last.prom``), from which
the run-wide quantiles are computed. RSS and CPU come from ``/proc`` when the
harness started the server (its pid and its children, e.g. the store's
applier), else from the ``process_*`` metrics.

Several targets (API server replicas over one etcd) are watched by a
:class:`ReplicasWatcher`: each is scraped in turn every interval, replica N's
first and last scrapes kept as ``metrics-first-N.prom`` and
``metrics-last-N.prom`` (the first replica's as above), and one line of
``server.jsonl`` per interval sums them (``replicas_line``): the histograms'
intervals and the counters summed over the replicas, the event-loop lag and
RSS of the worst replica, and each replica's own figures under ``replicas``.
"""

from __future__ import annotations

import json
import math
import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

from .kubeauth import Credentials, CredentialsError, bearer
from .promtext import Histogram, Scrape, parse

__all__ = ["ReplicasWatcher", "ServerWatcher", "api_call_histograms", "interval_line", "metrics_files", "proc_usage",
           "replicas_line", "run_histograms"]

_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096

HISTOGRAMS = {
    "lock_wait_writer": ("controlplane_watch_cache_lock_wait_seconds", {"role": "writer"}),
    "lock_wait_reader": ("controlplane_watch_cache_lock_wait_seconds", {"role": "reader"}),
    "event_delivery": ("controlplane_watch_event_delivery_seconds", {}),
    "event_loop_lag": ("controlplane_event_loop_lag_seconds", {}),
    "request_duration": ("controlplane_request_duration_seconds", {}),
    "scheduling": ("controlplane_scheduler_e2e_scheduling_seconds", {}),
    "store_commit": ("controlplane_store_commit_seconds", {}),
    "gc_pause": ("controlplane_gc_pause_seconds", {}),
}


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    kids = [int(x) for x in text.split()]
    return kids + [g for k in kids for g in _children(k)]


def proc_usage(pid: int) -> tuple[float, float] | None:
    """(RSS bytes, CPU seconds) of ``pid`` and its descendants, from /proc."""
    rss, cpu, found = 0.0, 0.0, False
    for p in [pid, *_children(pid)]:
        try:
            stat = Path(f"/proc/{p}/stat").read_text()
            statm = Path(f"/proc/{p}/statm").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        cpu += (int(fields[11]) + int(fields[12])) / _TICKS  # utime, stime
        rss += int(statm.split()[1]) * _PAGE
        found = True
    return (rss, cpu) if found else None


def _finite(x: float | None) -> float | None:
    """JSON has no infinity: a quantile above the largest bucket is left out of the line."""
    return None if x is None or math.isinf(x) else x


def interval_line(prev: Scrape | None, cur: Scrape, usage: tuple[float, float] | None) -> dict[str, Any]:
    """One line of server.jsonl: what happened between ``prev`` and ``cur``. The first
    scrape (no ``prev``) has no interval: its histograms hold everything since the server
    started (its start-up, or a long-running ``--target``'s whole life), so the line
    carries no quantiles, only the counters and the process's figures."""
    line: dict[str, Any] = {"at": round(cur.at, 3)}
    for key, (name, match) in HISTOGRAMS.items():
        h = cur.histogram(name, **match)
        if h is None or prev is None:
            continue
        d = h.minus(prev.histogram(name, **match))
        line[key] = {"count": d.count, "p50": _finite(d.quantile(0.5)), "p99": _finite(d.quantile(0.99))}
    if usage is not None:
        line["rss_bytes"], line["cpu_seconds"] = usage
    else:
        line["rss_bytes"] = cur.value("process_resident_memory_bytes")
        line["cpu_seconds"] = cur.value("process_cpu_seconds_total")
    scheduled = cur.sum("controlplane_scheduler_schedule_attempts_total", result="scheduled")
    if scheduled is not None:
        line["scheduled_total"] = scheduled
    # every scheduler's bindings as the server counts them: a scheduler in another process
    # (serve --components-process, controlplane scheduler, kube-scheduler) or the harness's binder
    bound = cur.histogram("controlplane_request_duration_seconds", verb="POST", resource="pods",
                          subresource="binding", code="201")
    if bound is not None:
        line["bindings_total"] = bound.count
    return line


def metrics_files(replica: int) -> tuple[str, str]:
    """The names of replica ``replica``'s (from 0) first and last whole scrapes in a run's
    directory: the first replica's (the one target's) are ``metrics-first.prom`` and
    ``metrics-last.prom``, the second's ``metrics-first-2.prom``...

        >>> metrics_files(0), metrics_files(1)
        (('metrics-first.prom', 'metrics-last.prom'), ('metrics-first-2.prom', 'metrics-last-2.prom'))
    """
    suffix = f"-{replica + 1}" if replica else ""
    return f"metrics-first{suffix}.prom", f"metrics-last{suffix}.prom"


class _ScrapeLoop(threading.Thread):
    """Scrapes every ``interval`` seconds into server.jsonl until ``stop``, and once more after
    it (the last one, after the load stopped). A subclass sets ``auth``, ``out``, ``interval``
    and ``_done``, and writes a scrape's line in ``scrape_once``."""

    auth: Credentials
    out: Path
    interval: float
    _done: threading.Event

    def scrape_once(self, client: httpx.Client, lines: Any) -> None:
        raise NotImplementedError

    def run(self) -> None:
        with self.auth.httpx_client(timeout=10.0) as client, \
                (self.out / "server.jsonl").open("w") as lines:
            while True:
                self.scrape_once(client, lines)
                if self._done.wait(self.interval):
                    self.scrape_once(client, lines)
                    return

    def stop(self) -> None:
        self._done.set()
        self.join(timeout=30)


class ServerWatcher(_ScrapeLoop):
    def __init__(self, url: str, out: Path, auth: Credentials | None = None, pid: int | None = None,
                 interval: float = 2.0, replica: int = 0) -> None:
        super().__init__(name="server-watcher", daemon=True)
        self.target = url.rstrip("/")
        self.url = self.target + "/metrics"
        self.out = out
        self.files = metrics_files(replica)
        self.pid = pid
        self.interval = interval
        self.auth = auth or bearer("")  # the load's credentials: a target's /metrics may want them
        self.started = time.monotonic()
        self.first: Scrape | None = None
        self.last: Scrape | None = None
        self.latest: dict[str, Any] = {}
        self.peak_rss = 0.0
        self.errors = 0
        self.last_error: str | None = None  # what the last failed scrape got, for the report
        # when the first of the latest scrapes in a row that could not connect was made (a server
        # gone: refused, unreachable); None once one is answered, whatever the answer
        self.unreachable_since: float | None = None
        self._done = threading.Event()

    def unreachable_for(self) -> float:
        """Seconds since the first of the latest scrapes in a row that could not connect (0 when
        the last one connected)."""
        since = self.unreachable_since
        return 0.0 if since is None else time.monotonic() - since

    def scrape_once(self, client: httpx.Client, lines: Any) -> None:
        cur = self.fetch(client)
        if cur is None:
            return
        usage = proc_usage(self.pid) if self.pid else None
        line = interval_line(self.last, cur, usage)
        self.last = cur
        self.latest = line
        self.peak_rss = max(self.peak_rss, float(line.get("rss_bytes") or 0.0))
        lines.write(json.dumps(line) + "\n")
        lines.flush()

    def fetch(self, client: httpx.Client) -> Scrape | None:
        """One scrape, parsed, kept whole if it is the first or the last so far; None when it
        failed (counted in ``errors``, said in ``last_error``). ``last`` is the caller's to move."""
        try:
            r = client.get(self.url)
        except (httpx.ConnectError, httpx.ConnectTimeout) as e:
            self.errors += 1
            self.last_error = repr(e)
            if self.unreachable_since is None:
                self.unreachable_since = time.monotonic()
            return None
        except (httpx.HTTPError, CredentialsError) as e:  # (an exec plugin that failed this time)
            self.errors += 1
            self.last_error = repr(e)
            self.unreachable_since = None
            return None
        self.unreachable_since = None
        try:
            r.raise_for_status()
        except httpx.HTTPStatusError as e:
            self.errors += 1
            self.last_error = f"{e.response.status_code} {e.response.reason_phrase}".strip()
            return None
        try:
            cur = parse(r.text, time.monotonic() - self.started)
        except ValueError as e:  # a 200 that is not Prometheus text (a proxy's page, a server's JSON)
            self.errors += 1
            self.last_error = f"not Prometheus text ({e})"[:200]
            return None
        first, last = self.files
        if self.first is None:
            self.first = cur
            (self.out / first).write_text(r.text)
        (self.out / last).write_text(r.text)
        return cur


# the figures of one replica that a sum over replicas would hide: each is shown, and the worst
_PER_REPLICA = ("event_loop_lag", "rss_bytes", "cpu_seconds")
_COUNTERS = ("cpu_seconds", "scheduled_total", "bindings_total")


def replicas_line(at: float, targets: Sequence[str], steps: Sequence[tuple[Scrape | None, Scrape | None]],
                  latest: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One line of server.jsonl for several replicas. ``steps`` holds each replica's previous
    scrape and this interval's (None: it failed, and its observations count in the next line's
    interval), ``latest`` each one's latest ``interval_line`` (``{}`` before any). The
    histograms' intervals are summed over the replicas (their buckets are the same), as the
    counters are (CPU seconds, the scheduler's, the bindings: a replica not scraped this time
    counts with its latest figures, so that the sums only grow); the event-loop lag and RSS,
    whose sum means nothing, are the worst replica's (``worst_replica`` names it), and under
    ``replicas`` each one's figures of this interval (none for a replica not scraped)."""
    line: dict[str, Any] = {"at": round(at, 3)}
    for key, (name, match) in HISTOGRAMS.items():
        if key in _PER_REPLICA:
            continue
        summed: Histogram | None = None
        for prev, cur in steps:
            h = cur.histogram(name, **match) if cur is not None else None
            if h is None or prev is None:
                continue
            d = h.minus(prev.histogram(name, **match))
            summed = d if summed is None else summed.plus(d)
        if summed is not None:
            line[key] = {"count": summed.count, "p50": _finite(summed.quantile(0.5)),
                         "p99": _finite(summed.quantile(0.99))}
    for key in _COUNTERS:
        values = [x[key] for x in latest if x.get(key) is not None]
        if values:
            line[key] = sum(values)
    fresh = [(t, x) for t, x, (_, cur) in zip(targets, latest, steps, strict=True) if cur is not None]
    lags = [(x["event_loop_lag"]["p99"], t, x["event_loop_lag"]) for t, x in fresh
            if isinstance(x.get("event_loop_lag"), dict) and x["event_loop_lag"].get("p99") is not None]
    if lags:
        _, worst, lag = max(lags, key=lambda w: w[0])
        line["event_loop_lag"] = {**lag, "worst_replica": worst}
    rss = [(x["rss_bytes"], t) for t, x in fresh if x.get("rss_bytes")]
    if rss:
        line["rss_bytes"], line["rss_worst_replica"] = max(rss)
    line["replicas"] = [{"target": t, **({k: v for k, v in x.items() if k != "at"} if cur is not None else {})}
                        for t, x, (_, cur) in zip(targets, latest, steps, strict=True)]
    return line


class ReplicasWatcher(_ScrapeLoop):
    """A :class:`ServerWatcher` for several targets (API server replicas): each is scraped in
    turn every ``interval`` seconds, its whole first and last scrapes kept
    (``metrics_files``), and one line of server.jsonl written for them all (``replicas_line``).
    It answers what the harness asks of a ServerWatcher: ``latest``, ``errors``,
    ``last_error`` (naming the replica), ``unreachable_for`` (the replica gone the longest,
    ``unreachable_target``)."""

    def __init__(self, urls: Sequence[str], out: Path, auth: Credentials | None = None,
                 interval: float = 2.0) -> None:
        super().__init__(name="replicas-watcher", daemon=True)
        self.replicas = [ServerWatcher(u, out, auth, interval=interval, replica=i) for i, u in enumerate(urls)]
        self.out = out
        self.interval = interval
        self.auth = auth or bearer("")
        self.started = time.monotonic()
        self.latest: dict[str, Any] = {}
        self._done = threading.Event()

    @property
    def errors(self) -> int:
        return sum(r.errors for r in self.replicas)

    @property
    def last_error(self) -> str | None:
        said = [f"{r.target}: {r.last_error}" for r in self.replicas if r.last_error]
        return "; ".join(said) or None

    @property
    def unreachable_target(self) -> str:
        return max(self.replicas, key=lambda r: r.unreachable_for()).target

    def unreachable_for(self) -> float:
        """Seconds the replica gone the longest has refused connections (0: none)."""
        return max(r.unreachable_for() for r in self.replicas)

    def scrape_once(self, client: httpx.Client, lines: Any) -> None:
        steps: list[tuple[Scrape | None, Scrape | None]] = []
        for r in self.replicas:
            prev, cur = r.last, r.fetch(client)
            if cur is not None:
                r.latest = interval_line(prev, cur, None)
                r.last = cur
            steps.append((prev, cur))
        if all(cur is None for _, cur in steps):
            return
        line = replicas_line(time.monotonic() - self.started, [r.target for r in self.replicas], steps,
                             [r.latest for r in self.replicas])
        self.latest = line
        lines.write(json.dumps(line) + "\n")
        lines.flush()


def run_histograms(first: Scrape | None, last: Scrape | None, name: str,
                   **match: str) -> dict[str, Histogram]:
    """Per resource: what the run added to histogram ``name`` (last minus first)."""
    if last is None:
        return {}
    out: dict[str, Histogram] = {}
    for labels, h in last.series(name).items():
        d = dict(labels)
        if any(d.get(k) != v for k, v in match.items()):
            continue
        before = first.histograms.get((name, labels)) if first else None
        delta = h.minus(before)
        resource = d.get("resource", "")
        out[resource] = out[resource].plus(delta) if resource in out else delta
    return out


def api_call_histograms(first: Scrape | None, last: Scrape | None,
                        name: str = "apiserver_request_sli_duration_seconds",
                        ) -> dict[tuple[str, str, str, str, str], Histogram]:
    """Per (verb, group, resource, subresource, scope): what the run added to upstream's request
    latency histogram ``name`` (its versions and components together)."""
    if last is None:
        return {}
    out: dict[tuple[str, str, str, str, str], Histogram] = {}
    for labels, h in last.series(name).items():
        d = dict(labels)
        before = first.histograms.get((name, labels)) if first else None
        delta = h.minus(before)
        key = (d.get("verb", ""), d.get("group", ""), d.get("resource", ""), d.get("subresource", ""),
               d.get("scope", ""))
        out[key] = out[key].plus(delta) if key in out else delta
    return out
