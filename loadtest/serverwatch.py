"""Watching the server while Locust loads it: ``/metrics`` scrapes and its process.

Every ``interval`` seconds a :class:`ServerWatcher` thread scrapes ``/metrics``,
reduces the scrape to one line of ``server.jsonl`` (what changed since the
previous scrape: per-interval p99s of the histograms the report plots, the
scheduler's pods/s, and the server's RSS and CPU) and keeps the first and the
last scrape whole (``metrics-first.prom``, ``metrics-last.prom``), from which
the run-wide quantiles are computed. RSS and CPU come from ``/proc`` when the
harness started the server (its pid and its children, e.g. the store's
applier), else from the ``process_*`` metrics.
"""

from __future__ import annotations

import json
import math
import os
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from .kubeauth import Credentials, CredentialsError, bearer
from .promtext import Histogram, Scrape, parse

__all__ = ["ServerWatcher", "api_call_histograms", "interval_line", "proc_usage", "run_histograms"]

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


class ServerWatcher(threading.Thread):
    def __init__(self, url: str, out: Path, auth: Credentials | None = None, pid: int | None = None,
                 interval: float = 2.0) -> None:
        super().__init__(name="server-watcher", daemon=True)
        self.url = url.rstrip("/") + "/metrics"
        self.out = out
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

    def run(self) -> None:
        with self.auth.httpx_client(timeout=10.0) as client, \
                (self.out / "server.jsonl").open("w") as lines:
            while True:
                self.scrape_once(client, lines)
                if self._done.wait(self.interval):
                    self.scrape_once(client, lines)  # the last one, after the load stopped
                    return

    def unreachable_for(self) -> float:
        """Seconds since the first of the latest scrapes in a row that could not connect (0 when
        the last one connected)."""
        since = self.unreachable_since
        return 0.0 if since is None else time.monotonic() - since

    def scrape_once(self, client: httpx.Client, lines: Any) -> None:
        try:
            r = client.get(self.url)
        except (httpx.ConnectError, httpx.ConnectTimeout) as e:
            self.errors += 1
            self.last_error = repr(e)
            if self.unreachable_since is None:
                self.unreachable_since = time.monotonic()
            return
        except (httpx.HTTPError, CredentialsError) as e:  # (an exec plugin that failed this time)
            self.errors += 1
            self.last_error = repr(e)
            self.unreachable_since = None
            return
        self.unreachable_since = None
        try:
            r.raise_for_status()
        except httpx.HTTPStatusError as e:
            self.errors += 1
            self.last_error = f"{e.response.status_code} {e.response.reason_phrase}".strip()
            return
        try:
            cur = parse(r.text, time.monotonic() - self.started)
        except ValueError as e:  # a 200 that is not Prometheus text (a proxy's page, a server's JSON)
            self.errors += 1
            self.last_error = f"not Prometheus text ({e})"[:200]
            return
        if self.first is None:
            self.first = cur
            (self.out / "metrics-first.prom").write_text(r.text)
        (self.out / "metrics-last.prom").write_text(r.text)
        usage = proc_usage(self.pid) if self.pid else None
        line = interval_line(self.last, cur, usage)
        self.last = cur
        self.latest = line
        self.peak_rss = max(self.peak_rss, float(line.get("rss_bytes") or 0.0))
        lines.write(json.dumps(line) + "\n")
        lines.flush()

    def stop(self) -> None:
        self._done.set()
        self.join(timeout=30)


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
