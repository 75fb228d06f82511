"""The run's report: ``summary.json`` (SLO verdicts, totals) and ``report.html`` with PNG plots.

Everything is read back from the run's directory, so a report can be rebuilt
from a copy of it (``python -m loadtest report DIR``):

    locust.json                Locust's final statistics (--json-file)
    locust_stats_history.csv   Locust's statistics over time (--csv-full-history)
    server.jsonl               one line per /metrics scrape (loadtest.serverwatch)
    metrics-first.prom, metrics-last.prom   the first and last scrape, whole
    metrics-first-N.prom, metrics-last-N.prom   the same of replica N, with several targets
    plan.json, run.json        what was asked, what happened (written by the harness)

With several targets (``run --target A --target B``, API server replicas), the
server-side verdicts read each replica's histograms over the run, summed; the
summary adds ``replicas``, each one's figures, and the plots of the event-loop
lag and of memory and CPU draw a line per replica.
"""

from __future__ import annotations

import csv
import html
import itertools
import json
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from . import leftworkers
from .promtext import Histogram, Scrape, parse
from .serverwatch import api_call_histograms, metrics_files, run_histograms
from .slo import SLI, SLOS, TOO_FEW, Entry, Verdict, entries_from_locust_json, evaluate, no_data_note, overall

__all__ = ["PLOTS", "build", "fmt", "read_run", "scheduling_series"]

PLOTS = ("throughput", "latency", "lock_wait", "event_delivery", "event_loop_lag", "scheduler", "pod_startup",
         "server_resources")

_HTTP = ("GET", "POST", "PUT", "PATCH", "DELETE")
_K = TypeVar("_K")

LOCK_WAIT = "controlplane_watch_cache_lock_wait_seconds"
DELIVERY = "controlplane_watch_event_delivery_seconds"
_SERVER_METRIC = {"writer-lock-wait": LOCK_WAIT, "event-delivery": DELIVERY}


def _read_json(path: Path, default: Any) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return default


def read_run(out: Path) -> dict[str, Any]:
    """What the harness wrote of the run in ``out`` (``run.json``), or nothing (a run cut short)."""
    run = _read_json(out / "run.json", {})
    return run if isinstance(run, dict) else {}


def _read_lines(path: Path) -> list[dict[str, Any]]:
    try:
        return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    except OSError:
        return []


def _failure_reasons(path: Path, limit: int = 20) -> list[dict[str, Any]]:
    """Why requests failed (Locust's ``locust_failures.csv``), the most frequent first."""
    rows: list[tuple[int, dict[str, Any]]] = []
    for r in _read_history(path):
        try:
            n = int(r.get("Occurrences") or 0)
        except ValueError:
            continue
        rows.append((n, {"type": r.get("Method") or "", "name": r.get("Name") or "", "error": r.get("Error") or "",
                         "occurrences": n}))
    return [row for _, row in sorted(rows, key=lambda x: -x[0])[:limit]]


def _client_errors(path: Path, limit: int = 20) -> list[dict[str, Any]]:
    """Exceptions raised in the load's clients (Locust's ``locust_exceptions.csv``): the task (or,
    in ``on_start``, the user) one ended did not make its load. The most frequent first."""
    rows: list[tuple[int, dict[str, Any]]] = []
    for r in _read_history(path):
        try:
            n = int(r.get("Count") or 0)
        except ValueError:
            continue
        where = (r.get("Traceback") or "").strip().splitlines()
        rows.append((n, {"count": n, "message": r.get("Message") or "",
                         "where": where[-2].strip() if len(where) >= 2 else ""}))
    return [row for _, row in sorted(rows, key=lambda x: -x[0])[:limit]]


def _read_history(path: Path) -> list[dict[str, str]]:
    try:
        with path.open(newline="") as f:
            return list(csv.DictReader(f))
    except OSError:
        return []


def _float(x: Any) -> float | None:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(v) else v


CLIENTS_SAW_BOUND = "seen bound by the load's clients (watches)"


def _rate(counts: Sequence[tuple[float, float]]) -> tuple[list[float], list[float]]:
    """Per-second rates between successive (time, running total) points."""
    xs = [b[0] for b in counts[1:]]
    ys = [(b[1] - a[1]) / max(b[0] - a[0], 1e-9) for a, b in itertools.pairwise(counts)]
    return xs, ys


def _history_rate(history: list[dict[str, str]], typ: str, name: str | None, t0: float) -> dict[float, float]:
    """The per-second rate of one entry over the run (of every entry of type ``typ`` together
    when ``name`` is None): between the times its running total
    (``Total Request Count``) changed, and to the end, as the server's counters are read.
    Locust's ``Requests/s`` column, kept for a history without totals, is its average over the
    last ten seconds ending two before: it rose for ten seconds after the rate did, and a binder
    that had bound every pod was still drawn binding 1.7 a second at the end of a smoke run.
    The history has an entry's rows only from the report that brought its first requests: it
    was at 0 at the report before (the last time the Aggregated total moved), or at the
    history's start. Without that point the requests of its first report were never drawn,
    and a binder that bound all of a ``million --quick``'s pods in one report not at all."""
    totals: defaultdict[float, float] = defaultdict(float)
    rate: defaultdict[float, float] = defaultdict(float)
    reports: list[float] = []  # the history's start, and each time the Aggregated total moved
    last_aggregated: float | None = None
    for r in history:
        t = _float(r.get("Timestamp"))
        if r.get("Type") == "" and r.get("Name") == "Aggregated" and t is not None:
            aggregated = _float(r.get("Total Request Count"))
            if last_aggregated is None or aggregated != last_aggregated:
                reports.append(t - t0)
            last_aggregated = aggregated
        if r.get("Type") == typ and r.get("Name") != "Aggregated" and name in (None, r.get("Name")):
            total, rps = _float(r.get("Total Request Count")), _float(r.get("Requests/s"))
            if t is not None and total is not None:
                totals[t - t0] += total
            elif t is not None and rps is not None:
                rate[t - t0] += rps
    if not totals:
        return rate
    first = min(totals)
    before = [t for t in reports if t < first]
    if before:
        totals[max(before)] = 0.0
    points = sorted(totals.items())
    # the first point, each one where the total moved (the workers report every 3 s), and the last
    kept = [p for i, p in enumerate(points) if i == 0 or i == len(points) - 1 or p[1] != points[i - 1][1]]
    xs, ys = _rate(kept)
    return dict(zip(xs, ys, strict=True))


def throughput_series(history: list[dict[str, str]]) -> dict[str, tuple[list[float], list[float]]]:
    """The throughput plot's lines: HTTP verb -> (seconds, requests/s), from the running totals
    of Locust's history, as the scheduler plot's. (Its ``Requests/s``, a ten-second average
    ending two before, drew the 200 deletes of a 12 s ``million`` run's last three seconds at
    13 a second, and went on drawing them after the load had stopped.)"""
    t0 = min((_float(r.get("Timestamp")) or math.inf for r in history), default=math.inf)
    lines: dict[str, tuple[list[float], list[float]]] = {}
    for verb in sorted({r["Type"] for r in history if r.get("Type") in _HTTP}):
        if pts := _history_rate(history, verb, None, t0):
            lines[verb] = (sorted(pts), [pts[x] for x in sorted(pts)])
    return lines


def scheduling_series(server: list[dict[str, Any]], history: list[dict[str, str]]
                      ) -> list[tuple[str, list[float], list[float]]]:
    """The scheduler plot's lines, (label, seconds, pods/s): the built-in scheduler's count
    (its metrics), else the bindings the server answered (a scheduler in another process),
    the harness's binder's bindings, and the pods the load's clients saw bound on their
    watches. The last needs nothing of the server: against a Kubernetes cluster, whose API
    server's /metrics has neither of the first two, or a server of several processes whose
    scrapes reach one that does not schedule, it is the plot's only line."""
    t0 = min((_float(r.get("Timestamp")) or math.inf for r in history), default=math.inf)
    lines: list[tuple[str, list[float], list[float]]] = []
    sched = [(s["at"], s["scheduled_total"]) for s in server if "scheduled_total" in s]
    bind = _history_rate(history, "POST", "pods/binding", t0)
    if len(sched) > 1:
        lines.append(("built-in scheduler (metrics)", *_rate(sched)))
    elif not bind:  # a scheduler in another process: the bindings the server answered
        answered = [(s["at"], s["bindings_total"]) for s in server if "bindings_total" in s]
        if len(answered) > 1:
            lines.append(("bindings answered 201 (server metrics)", *_rate(answered)))
    if bind:
        lines.append(("load-test binder (pods/binding)", sorted(bind), [bind[x] for x in sorted(bind)]))
    seen = _history_rate(history, "LATENCY", "pod create→bound", t0)
    if seen:
        lines.append((CLIENTS_SAW_BOUND, sorted(seen), [seen[x] for x in sorted(seen)]))
    return lines


# --------------------------------------------------------------------------- plots

def _plain_log_ticks(axis: Any) -> None:
    """A log axis labelled 0.01, 2, 500 rather than 10^-2, 2x10^0 (matplotlib's default)."""
    from matplotlib.ticker import FuncFormatter, LogLocator

    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    axis.set_minor_formatter(FuncFormatter(lambda v, _: ""))


_DPI = 80


def _margins(fig: Any) -> None:
    """Room for what surrounds a figure's one axes: its title, axis labels and tick
    labels (a latency plot's long (verb, resource) labels; a second y axis on the right),
    measured with the renderer's font metrics rather than by a trial draw."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.font_manager import FontProperties

    renderer = FigureCanvasAgg(fig).get_renderer()  # type: ignore[no-untyped-call]
    width, height = (x * _DPI for x in fig.get_size_inches())
    pad = 6.0  # px

    def line_px(text: Any) -> float:
        """A line's height (ascent and descent) in a text's font."""
        return float(renderer.get_text_width_height_descent("Mg", FontProperties(size=text.get_fontsize()),
                                                            ismath=False)[1])

    def widest_px(texts: Iterable[Any]) -> float:
        return max((renderer.get_text_width_height_descent(t.get_text(), FontProperties(size=t.get_fontsize()),
                                                           ismath=False)[0]
                    for t in texts if t.get_text() and t.get_visible()), default=0.0)

    def side(axis: Any, across: bool) -> float:
        """Pixels taken beside the axes by an axis's tick labels and label: the labels'
        widest across a y axis (placed by the locator, which this runs), a line of their
        font below an x axis."""
        tick = axis.get_major_ticks(1)[0].label1
        ticks = (widest_px(axis.get_majorticklabels()) if across else line_px(tick)) \
            + float(axis.get_tick_padding()) * _DPI / 72 + 2 * pad
        return ticks + (line_px(axis.label) + pad if axis.label.get_text() else 0.0)

    axes = fig.axes
    ax = axes[0]
    left = side(ax.yaxis, True)
    bottom = side(ax.xaxis, False)
    top = line_px(ax.title) + 3 * pad
    right = max((side(a.yaxis, True) for a in axes[1:]), default=2 * pad)
    left, right = min(left, 0.6 * width), min(right, 0.3 * width)
    fig.subplots_adjust(left=left / width, right=1 - right / width,
                        bottom=min(bottom / height, 0.4), top=1 - min(top / height, 0.3))
    span = width - left - right
    if widest_px([ax.title]) > span:  # long tick labels narrowed the axes: the title goes over the figure's middle
        ax.title.set_x((width / 2 - left) / span)


def _plots(out: Path, entries: Sequence[Entry], history: list[dict[str, str]], server: list[dict[str, Any]],
           run: dict[str, Any]) -> dict[str, str]:
    """PNG name -> caption; a plot without data is drawn with a note saying so.

    Figures are made without pyplot (a PNG needs neither its figure manager nor its
    import) and laid out by ``_margins`` rather than ``tight_layout``, which drew each
    figure once more to measure it: ``python -m loadtest report`` of a 20,000-pod run
    takes about a fifth less (docs/benchmarks.md)."""
    from matplotlib.figure import Figure

    captions: dict[str, str] = {}

    def subplots(figsize: tuple[float, float]) -> tuple[Any, Any]:
        fig = Figure(figsize=figsize, dpi=_DPI)
        return fig, fig.subplots()

    def save(fig: Any, name: str, caption: str) -> None:
        _margins(fig)
        fig.savefig(out / f"{name}.png", dpi=_DPI)
        captions[name] = caption

    def empty(ax: Any, what: str) -> None:
        ax.text(0.5, 0.5, f"no data: {what}", ha="center", va="center", transform=ax.transAxes, color="gray")

    # throughput per HTTP verb, from Locust's history
    fig, ax = subplots(figsize=(8, 3.5))
    series = throughput_series(history)
    for verb, (xs, ys) in series.items():
        ax.plot(xs, ys, label=verb)
    if series:
        ax.legend(loc="upper left", fontsize=8)
    else:
        empty(ax, "Locust history")
    ax.set_xlabel("s")
    ax.set_ylabel("requests/s")
    ax.set_title("Throughput by verb (client side)")
    save(fig, "throughput", "Requests per second by HTTP verb, as Locust's workers saw them, between their "
                            "reports (every 3 s).")

    # latency percentiles per verb and resource
    http = sorted((e for e in entries if e.request_type in _HTTP and e.num_requests), key=lambda e: e.name)
    fig, ax = subplots(figsize=(8, max(2.5, 0.3 * len(http) + 1)))
    if http:
        labels = [f"{e.request_type} {e.name}" for e in http]
        y = range(len(http))
        # widest (p99) at the back, narrowest (p50) in front, so all three show
        for q, color, height in ((0.99, "#c8553a", 0.8), (0.9, "#3a87c8", 0.55), (0.5, "#8fbfe0", 0.3)):
            ax.barh(list(y), [(e.percentile(q) or 0) * 1000 or 0.5 for e in http], color=color,
                    label=f"p{round(q * 100)}", height=height)
        ax.set_yticks(list(y))
        ax.set_yticklabels(labels, fontsize=7)
        ax.set_xscale("log")
        _plain_log_ticks(ax.xaxis)
        ax.legend(fontsize=8)
    else:
        empty(ax, "no requests")
    ax.set_xlabel("ms (log)")
    ax.set_title("Latency percentiles per verb and resource (client side, whole run)")
    save(fig, "latency", "p50, p90 and p99 of each (verb, resource) over the run; LIST scope in brackets.")

    def server_series(ax: Any, keys: Sequence[tuple[str, str]], unit: float, what: str) -> bool:
        drawn = False
        for key, label in keys:
            pts = [(s["at"], s[key]["p99"] * unit) for s in server
                   if isinstance(s.get(key), dict) and s[key].get("count") and s[key].get("p99") is not None]
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=".", label=label)
                drawn = True
        if drawn:
            ax.legend(fontsize=8)
        else:
            empty(ax, what)
        ax.set_xlabel("s")
        return drawn

    fig, ax = subplots(figsize=(8, 3))
    server_series(ax, [("lock_wait_writer", "writer p99"), ("lock_wait_reader", "reader p99")], 1000,
                  "controlplane_watch_cache_lock_wait_seconds")
    ax.axhline(1.0, color="red", linestyle=":", linewidth=1)
    ax.set_ylabel("ms")
    ax.set_title("Watch cache lock wait, p99 per scrape interval (target: writer ≤ 1 ms)")
    save(fig, "lock_wait", "controlplane_watch_cache_lock_wait_seconds, per scrape interval.")

    fig, ax = subplots(figsize=(8, 3))
    server_series(ax, [("event_delivery", "server: commit → watcher stream, p99")], 1000,
                  "controlplane_watch_event_delivery_seconds")
    client = [e for e in entries if e.request_type == "LATENCY" and e.name.startswith("watch delivery")]
    for e in client:
        p99 = e.percentile(0.99)
        if p99 is not None:
            ax.axhline(p99 * 1000, linestyle="--", linewidth=1, color="gray")
            # at the right edge, in axes coordinates: inside the plot whatever the time axis spans
            ax.text(0.99, p99 * 1000, f"client {e.name}, run p99", fontsize=7, va="bottom", ha="right",
                    color="gray", transform=ax.get_yaxis_transform())
    ax.axhline(50, color="red", linestyle=":", linewidth=1)
    ax.set_ylabel("ms")
    ax.set_title("Watch event delivery (target: p99 ≤ 50 ms)")
    save(fig, "event_delivery", "Server side per scrape interval; client side (write response → event on a "
                                "watch of the same worker) as run-wide p99 lines.")

    fig, ax = subplots(figsize=(8, 3))
    replicas = _replica_series(server)
    if replicas:  # several targets: each replica's lag (a sum of them means nothing)
        for label, scraped in replicas.items():
            lag = [(at, x["event_loop_lag"]["p99"] * 1000) for at, x in scraped
                   if isinstance(x.get("event_loop_lag"), dict) and x["event_loop_lag"].get("count")
                   and x["event_loop_lag"].get("p99") is not None]
            if lag:
                ax.plot([p[0] for p in lag], [p[1] for p in lag], marker=".", label=f"event loop lag p99, {label}")
        server_series(ax, [("request_duration", "request duration p99, all replicas")], 1000,
                      "controlplane_event_loop_lag_seconds")
    else:
        server_series(ax, [("event_loop_lag", "event loop lag p99"), ("request_duration", "request duration p99")],
                      1000, "controlplane_event_loop_lag_seconds")
    ax.set_ylabel("ms")
    ax.set_title("Server event loop lag (and request duration), p99 per scrape interval")
    save(fig, "event_loop_lag", "How late the server's event loop runs its timer (due every 10 ms while "
                                "the loop runs late, every 100 ms while it keeps time).")

    fig, ax = subplots(figsize=(8, 3))
    lines = scheduling_series(server, history)
    for label, xs, ys in lines:
        ax.plot(xs, ys, label=label, linestyle="--" if label == CLIENTS_SAW_BOUND else "-")
    if lines:
        ax.legend(fontsize=8)
    else:
        empty(ax, "no scheduler metrics, no bindings and no pod seen bound")
    ax.set_xlabel("s")
    ax.set_ylabel("pods/s")
    ax.set_title("Pods scheduled per second")
    save(fig, "scheduler", "Built-in scheduler from controlplane_scheduler_schedule_attempts_total{result=scheduled}; "
                           "a scheduler in another process from the server's count of pods/binding answered 201; "
                           "the harness's binder; and the pods the load's clients saw bound on their watches "
                           "(whoever bound them: a cluster's scheduler, whose metrics the API server's /metrics "
                           "does not have).")

    fig, ax = subplots(figsize=(8, 3))
    drawn = False
    for e in entries:
        if e.request_type == "LATENCY" and e.name in ("pod startup", "pod create→bound", "gang startup") \
                and e.num_requests:
            times = sorted(e.response_times)
            total = e.num_requests
            acc, fractions = 0, []
            for ms in times:
                acc += e.response_times[ms]
                fractions.append(acc / total)
            ax.step([ms / 1000 for ms in times], fractions, where="post", label=f"{e.name} (n={total})")
            drawn = True
    if drawn:
        ax.axvline(5.0, color="red", linestyle=":", linewidth=1)
        ax.legend(fontsize=8)
        ax.set_xscale("log")
        _plain_log_ticks(ax.xaxis)
    else:
        empty(ax, "no pods started")
    ax.set_xlabel("s (log)")
    ax.set_ylabel("fraction of pods")
    ax.set_title("Pod startup: create → bound, create → Running (SLO: p99 ≤ 5 s)")
    save(fig, "pod_startup", "Cumulative distribution, from the create request to the state seen on a watch.")

    fig, ax = subplots(figsize=(8, 3))
    rss = [(s["at"], s["rss_bytes"] / 2**20) for s in server if s.get("rss_bytes")]
    cpu = [(s["at"], s["cpu_seconds"]) for s in server if s.get("cpu_seconds") is not None]
    if replicas and rss:  # several targets: each replica's memory and CPU
        ax2 = ax.twinx()
        for label, scraped in replicas.items():
            mine = [(at, x["rss_bytes"] / 2**20) for at, x in scraped if x.get("rss_bytes")]
            ax.plot([p[0] for p in mine], [p[1] for p in mine], label=f"RSS MiB, {label} (left axis)")
            spent = [(at, x["cpu_seconds"]) for at, x in scraped if x.get("cpu_seconds") is not None]
            if len(spent) > 1:
                xs, ys = _rate(spent)
                ax2.plot(xs, [100 * y for y in ys], linestyle="--", label=f"CPU %, {label} (right axis)")
        ax.set_ylabel("RSS MiB")
        ax2.set_ylabel("CPU % (100 = one core)")
        (left, left_labels), (right, right_labels) = ax.get_legend_handles_labels(), ax2.get_legend_handles_labels()
        ax.legend(left + right, left_labels + right_labels, fontsize=7, loc="upper left")
    elif rss:
        ax.plot([p[0] for p in rss], [p[1] for p in rss], color="#3a87c8", label="RSS MiB (left axis)")
        ax.set_ylabel("RSS MiB")
        ax2 = ax.twinx()
        if len(cpu) > 1:
            xs, ys = _rate(cpu)
            ax2.plot(xs, [100 * y for y in ys], color="#c8553a", label="CPU % (right axis)")
        ax2.set_ylabel("CPU % (100 = one core)")
        # one legend for the two axes' lines: which line is which was left to guess
        (left, left_labels), (right, right_labels) = ax.get_legend_handles_labels(), ax2.get_legend_handles_labels()
        ax.legend(left + right, left_labels + right_labels, fontsize=8, loc="upper left")
    else:
        empty(ax, "no process figures")
    ax.set_xlabel("s")
    who = "the server and its child processes (/proc)" if run.get("server_pid") else "process_* metrics"
    if replicas:
        who = "each replica, from its process_* metrics"
    ax.set_title("Server memory and CPU")
    save(fig, "server_resources", f"RSS and CPU of {who}.")
    return captions


def _replica_series(server: list[dict[str, Any]]) -> dict[str, list[tuple[float, dict[str, Any]]]]:
    """Several targets' server.jsonl: per replica, (seconds, its figures) of each line that
    scraped it; nothing for one target's."""
    out: dict[str, list[tuple[float, dict[str, Any]]]] = {}
    for s in server:
        for r in s.get("replicas") or ():
            if isinstance(r, dict) and len(r) > 1:  # (only its target: not scraped that time)
                out.setdefault(_short(str(r.get("target"))), []).append((s["at"], r))
    return out


def _short(target: str) -> str:
    """A replica's label in a plot: its URL without the scheme."""
    return target.split("://", 1)[-1]


# --------------------------------------------------------------------------- summary + html

def _entry_rows(entries: Sequence[Entry]) -> list[dict[str, Any]]:
    rows = []
    for e in sorted(entries, key=lambda e: (e.request_type, e.name)):
        rows.append({"type": e.request_type, "name": e.name, "requests": e.num_requests, "failures": e.num_failures,
                     "p50_ms": _ms(e.percentile(0.5)), "p90_ms": _ms(e.percentile(0.9)),
                     "p99_ms": _ms(e.percentile(0.99)), "max_ms": _ms(max(e.response_times) / 1000
                                                                       if e.response_times else None)})
    return rows


def _ms(x: float | None) -> float | None:
    return None if x is None else round(x * 1000, 3)


def _pods_not_started(entries: Sequence[Entry]) -> str | None:
    """Why pods the clients created were never seen Running (None if none was created)."""
    def count(typ: str, name: str) -> int:
        return sum(e.num_requests - e.num_failures for e in entries if (e.request_type, e.name) == (typ, name))

    created = count("POST", "pods")
    if not created:
        return None
    if not count("LATENCY", "pod create→bound"):
        return (f"{created:,} pods created, none seen bound: nothing placed them (a target without a scheduler, "
                "with --binder off?)")
    return f"{created:,} pods created and bound, none seen Running: no kubelet started them"


def _explained(verdicts: Sequence[Verdict], *, locust_results: bool, scraped: bool, last_text: str, scrapes: int,
               run: dict[str, Any], entries: Sequence[Entry] = ()) -> list[Verdict]:
    """``verdicts``, each "no data" one with a note saying why it has none."""
    source = {slo.key: slo.source for slo in SLOS}
    out = []
    for v in verdicts:
        if v.verdict != "no data":
            out.append(v)
            continue
        if v.key == "pod-startup" and (why := _pods_not_started(entries)):
            note = why
        elif source[v.key] in ("client", "api"):  # an API call SLO without the SLI falls back to the clients'
            note = no_data_note(v.key, locust_results=locust_results)
        else:
            metric = _SERVER_METRIC[v.key]
            if not scraped:
                errors, error = run.get("scrape_errors"), run.get("scrape_error")
                note = "no /metrics scrape succeeded" + (
                    f" ({errors} failed" + (f"; the last: {error}" if error else "") + ")" if errors else "")
            elif f"# TYPE {metric} histogram" not in last_text:
                note = f"the target's /metrics has no {metric} (a server other than controlplane?)"
            else:
                note = (f"no {metric} observation between the first and the last of the run's {scrapes} "
                        f"/metrics scrape{'s' if scrapes != 1 else ''}")
        out.append(replace(v, note=note))
    return out


def build(out: Path) -> dict[str, Any]:
    """Write summary.json, report.html and the PNGs into ``out``; return the summary."""
    raw = _read_json(out / "locust.json", [])
    entries = entries_from_locust_json(raw)
    history = _read_history(out / "locust_stats_history.csv")
    server = _read_lines(out / "server.jsonl")
    plan = _read_json(out / "plan.json", {})
    run = read_run(out)
    targets = [str(t) for t in plan.get("targets") or run.get("targets") or ()]
    scrapes = [_scrapes(out, i) for i in range(max(len(targets), 1))]
    lock = _summed(run_histograms(first, last, LOCK_WAIT, role="writer") for first, last, _ in scrapes)
    delivery = _summed(run_histograms(first, last, DELIVERY) for first, last, _ in scrapes)
    api_calls = _summed(api_call_histograms(first, last, SLI) for first, last, _ in scrapes)
    last_text = next((text for _, _, text in scrapes if text), "")
    verdicts = _explained(evaluate(entries, lock, delivery, api_calls), locust_results=bool(raw),
                          scraped=any(last is not None for _, last, _ in scrapes), last_text=last_text,
                          scrapes=len(server), run=run, entries=entries)

    requests = sum(e.num_requests for e in entries if e.request_type in _HTTP)
    failures = sum(e.num_failures for e in entries)
    expected = sum(e.num_requests for e in entries if e.request_type == "EXPECTED")
    failed = [{"type": e.request_type, "name": e.name, "failures": e.num_failures} for e in entries
              if e.num_failures]
    peak_rss = max((float(s.get("rss_bytes") or 0) for s in server), default=0.0)
    summary_errors = _client_errors(out / "locust_exceptions.csv")
    summary: dict[str, Any] = {
        "scenario": plan.get("scenario", run.get("scenario")),
        "command": run.get("command"),
        "target": run.get("target"),
        "wall_seconds": run.get("wall_seconds"),
        "overall": "pending",  # below: the verdicts', unless the run failed requests or did not finish
        "verdicts": [v.as_dict() for v in verdicts],
        "requests": requests,
        "failures": failures,
        "expected_non_2xx": expected,
        "failed_entries": failed,
        "failure_reasons": _failure_reasons(out / "locust_failures.csv"),
        "client_errors": summary_errors,
        "peak_server_rss_bytes": peak_rss or None,
        # responses (watch streams above all) that waited for their client to read, over the run:
        # part of the event delivery latency that is the clients' reading, not the server's work
        "server_write_blocked": _summed_write_blocked(scrapes),
        "scrapes": len(server),
        "entries": _entry_rows(entries),
        "quota": run.get("quota"),
        "complete": False,
        "incomplete_because": _incomplete_because(run, bool(raw), bool(server), summary_errors),
        # workers that quit cleanly while others went on with their users: said, not held against the run
        "workers_quit": [leftworkers.said(e, leftworkers.DEFAULT_LIVENESS) for e in run.get("workers_left") or ()
                         if not leftworkers.lost(e)],
        "plots": [],
    }
    if len(targets) > 1:
        summary["replicas"] = _replicas(targets, scrapes, server)
        if server:  # (none at all is said above) one replica unread: the verdicts lack its share
            summary["incomplete_because"] += [f"no /metrics scrape of the replica {r['target']}"
                                              for r in summary["replicas"] if not r["scraped"]]
    summary["complete"] = not summary["incomplete_because"]
    # latencies of failed requests (a refused connection answers fast) prove nothing: a run with
    # failures, or one that did not finish (interrupted, no Locust results), does not pass
    verdict = overall(verdicts)
    if failures:
        verdict = "fail"
    elif run.get("interrupted") or not summary["complete"]:
        verdict = "incomplete" if verdict != "fail" else verdict
    summary["overall"] = verdict
    captions = _plots(out, entries, history, server, run)
    summary["plots"] = [f"{name}.png" for name in captions]
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    (out / "report.html").write_text(_html(summary, verdicts, captions, plan, run))
    return summary


def _incomplete_because(run: dict[str, Any], locust_results: bool, scraped: bool,
                        client_errors: list[dict[str, Any]]) -> list[str]:
    """Why the run is not complete (none: it is), in words the report and the harness print: an
    interrupted run's report said "incomplete" and nowhere why."""
    why = []
    if run.get("interrupted"):
        seconds = run.get("load_seconds")
        # a run interrupted while Locust's master waited for its workers made no load (it had said
        # "after 13.5 s of load")
        why.append("interrupted (Ctrl-C, SIGTERM or SIGHUP)"
                   + (" before Locust started the load" if run.get("load_started") is False or seconds is None
                      else f" after {fmt(seconds)} s of load"))
    if run.get("workers_missing_after") is not None:
        why.append(f"fewer than the {run.get('expected_workers')} expected Locust workers joined within "
                   f"{fmt(run['workers_missing_after'])} s: no load ran")
    for lost in run.get("workers_lost") or ():
        why.append(f"Locust's worker {lost['worker']} exited with {lost['exit']} after {fmt(lost['at'])} s of load "
                   "(its users made no load after that)")
    for left in run.get("workers_left") or ():
        if leftworkers.lost(left):
            why.append(leftworkers.said(left, run.get("heartbeat_liveness") or leftworkers.DEFAULT_LIVENESS))
    if run.get("server_exited_at") is not None:
        why.append(f"controlplane serve exited after {fmt(run['server_exited_at'])} s of load")
    if run.get("target_unreachable_at") is not None:
        who = f"the target {run['unreachable_target']}" if run.get("unreachable_target") else "the target"
        why.append(f"{who} refused connections from {fmt(run['target_unreachable_at'])} s of load on")
    if not locust_results:
        why.append("no Locust results (locust.json is missing or empty)")
    if not scraped:
        why.append("no /metrics scrape of the server")
    if client_errors:
        why.append("errors in the load's clients (locust_exceptions.csv)")
    quota = run.get("quota")
    if quota and quota.get("completed_at") is None:
        # a quota run (million) is complete only if every pod it created was deleted in time
        why.append("not every pod of the quota was created and deleted in time")
    return why


def _scrapes(out: Path, replica: int) -> tuple[Scrape | None, Scrape | None, str]:
    """Replica ``replica``'s (from 0) first and last scrape of the run, and the last one's text."""
    first_name, last_name = metrics_files(replica)
    if not (out / last_name).exists():
        return None, None, ""
    text = (out / last_name).read_text()
    first = parse((out / first_name).read_text(), 0.0) if (out / first_name).exists() else None
    return first, parse(text, 0.0), text


def _summed(per_replica: Iterable[Mapping[_K, Histogram]]) -> dict[_K, Histogram]:
    """Histograms by key, summed over the replicas (one replica's are as they are)."""
    out: dict[_K, Histogram] = {}
    for hists in per_replica:
        for key, h in hists.items():
            out[key] = out[key].plus(h) if key in out else h
    return out


def _summed_write_blocked(scrapes: Sequence[tuple[Scrape | None, Scrape | None, str]]) -> dict[str, float] | None:
    counted = [b for b in (_write_blocked(first, last) for first, last, _ in scrapes) if b is not None]
    if not counted:
        return None
    if len(counted) == 1:
        return counted[0]
    return {"blocks": int(sum(b["blocks"] for b in counted)), "seconds": round(sum(b["seconds"] for b in counted), 3)}


def _over_run(first: Scrape | None, last: Scrape | None, name: str) -> float | None:
    """What the run added to the counters ``name`` (every series summed), last scrape minus first."""
    if last is None:
        return None
    total = last.sum(name)
    if total is None:
        return None
    return total - ((first.sum(name) or 0.0) if first is not None else 0.0)


def _replicas(targets: Sequence[str], scrapes: Sequence[tuple[Scrape | None, Scrape | None, str]],
              server: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each replica's figures over the run, where a sum over them means nothing or hides one:
    the requests it answered (``apiserver_request_total``), its event-loop lag p99, its peak RSS
    and its CPU seconds. None where its ``/metrics`` (or a scrape of it) had none."""
    rows = []
    for i, (target, (first, last, _)) in enumerate(zip(targets, scrapes, strict=True)):
        lag = None
        if last is not None:
            h = last.histogram("controlplane_event_loop_lag_seconds")
            if h is not None:
                d = h.minus(first.histogram("controlplane_event_loop_lag_seconds") if first else None)
                lag = d.quantile(0.99)
        rss = [float(r["rss_bytes"]) for s in server for r in (s.get("replicas") or ())[i:i + 1]
               if r.get("rss_bytes")]
        requests = _over_run(first, last, "apiserver_request_total")
        cpu = _over_run(first, last, "process_cpu_seconds_total")
        rows.append({"target": target, "scraped": last is not None,
                     "requests": None if requests is None else int(requests),
                     "event_loop_lag_p99_s": None if lag is None or math.isinf(lag) else lag,
                     "peak_rss_bytes": max(rss, default=None),
                     "cpu_seconds": None if cpu is None else round(cpu, 3)})
    return rows


def _write_blocked(first: Any, last: Any) -> dict[str, float] | None:
    """Waits of the server's responses for their clients to read over the run (last scrape
    minus first); None from a server that does not count them."""
    if last is None:
        return None
    seconds = last.value("controlplane_http_write_blocked_seconds_total")
    blocks = last.value("controlplane_http_write_blocks_total")
    if seconds is None or blocks is None:
        return None
    if first is not None:
        seconds -= first.value("controlplane_http_write_blocked_seconds_total") or 0.0
        blocks -= first.value("controlplane_http_write_blocks_total") or 0.0
    return {"blocks": int(blocks), "seconds": round(seconds, 3)}


def fmt(x: Any) -> str:
    if x is None:
        return "–"
    if isinstance(x, float):
        return f"{x:,.3f}".rstrip("0").rstrip(".") if abs(x) < 1000 else f"{x:,.0f}"
    if isinstance(x, int):
        return f"{x:,}"
    return html.escape(str(x))


def _processes(run: dict[str, Any]) -> str:
    local = run.get("processes")
    workers = run.get("expected_workers") or local
    if local is None:
        return "–"
    here = f" ({local} on this machine)" if workers != local else ""
    return f"1 master + {workers} worker{'s' if workers != 1 else ''}{here}"


def _measured(v: Verdict) -> str:
    """Where a verdict's p99 comes from; for an API call SLO read from the server, the clients' too."""
    if v.measured == "server" and v.key not in ("writer-lock-wait", "event-delivery"):
        client = "" if v.client_p99_s is None else (
            f"<br><small>Locust clients: p99 {fmt(v.client_p99_s * 1000)} ms {html.escape(v.client_worst)}</small>")
        return f"server (SLI histogram){client}"
    return {"server": "server (/metrics)", "client": "Locust clients"}.get(v.measured, "–")


def _html(summary: dict[str, Any], verdicts: Sequence[Verdict], captions: dict[str, str], plan: dict[str, Any],
          run: dict[str, Any]) -> str:
    color = {"pass": "#2e7d32", "fail": "#c62828", "no data": "#757575", TOO_FEW: "#757575"}
    verdict_rows = "".join(
        f"<tr><td>{html.escape(v.title)}{'' if v.upstream else ' <small>(project target)</small>'}</td>"
        f"<td>{fmt(v.threshold_s * 1000)} ms</td><td>{fmt(None if v.p99_s is None else v.p99_s * 1000)} ms</td>"
        f"<td>{html.escape(v.worst)}{'<br>' if v.worst and v.note else ''}"
        f"{f'<small>{html.escape(v.note)}</small>' if v.note else ''}</td>"
        f"<td>{fmt(v.samples)}</td><td>{_measured(v)}</td>"
        f"<td style='color:{color[v.verdict]};font-weight:bold'>{v.verdict}</td></tr>" for v in verdicts)
    entry_rows = "".join(
        f"<tr><td>{html.escape(r['type'])}</td><td>{html.escape(r['name'])}</td><td>{fmt(r['requests'])}</td>"
        f"<td>{fmt(r['failures'])}</td><td>{fmt(r['p50_ms'])}</td><td>{fmt(r['p90_ms'])}</td>"
        f"<td>{fmt(r['p99_ms'])}</td><td>{fmt(r['max_ms'])}</td></tr>" for r in summary["entries"])
    failure_rows = "".join(
        f"<tr><td>{html.escape(r['type'])}</td><td>{html.escape(r['name'])}</td><td>{html.escape(r['error'])}</td>"
        f"<td>{fmt(r['occurrences'])}</td></tr>" for r in summary.get("failure_reasons") or [])
    failures = ("<h2>Failures</h2><p>Why requests failed (locust_failures.csv), the most frequent first.</p>"
                f"<table><tr><th>type</th><th>name</th><th>error</th><th>count</th></tr>{failure_rows}</table>"
                if failure_rows else "")
    error_rows = "".join(
        f"<tr><td>{fmt(r['count'])}</td><td>{html.escape(r['message'])}</td><td>{html.escape(r['where'])}</td></tr>"
        for r in summary.get("client_errors") or [])
    errors = ("<h2>Errors in the load's clients</h2><p>Exceptions raised in the Locust users "
              "(locust_exceptions.csv, with their tracebacks): the tasks or users they ended did not make their "
              f"load, so the run is not complete.</p><table><tr><th>count</th><th>message</th><th>where</th>"
              f"</tr>{error_rows}</table>" if error_rows else "")
    plots = "".join(f"<figure><img src='{name}.png' alt='{name}'><figcaption>{html.escape(c)}</figcaption></figure>"
                    for name, c in captions.items())
    rss = summary.get("peak_server_rss_bytes")
    facts = [
        ("Scenario", f"{summary.get('scenario')}: {plan.get('description', '')}"),
        ("Command", run.get("command")),
        ("Target", ", ".join(run["targets"]) + " (the users spread over them)" if run.get("targets")
         else run.get("target")),
        ("Wall time", None if run.get("wall_seconds") is None else f"{fmt(run['wall_seconds'])} s"),
        ("Locust processes", _processes(run)),
        ("Requests", f"{fmt(summary['requests'])}, failed {fmt(summary['failures'])}, deliberate non-2xx "
                     f"{fmt(summary['expected_non_2xx'])}"),
        ("Server peak RSS" + (" (the worst replica's)" if summary.get("replicas") else ""),
         f"{fmt(rss / 2**20)} MiB" if rss else "–"),
    ]
    blocked = summary.get("server_write_blocked")
    if blocked:
        facts.append(("Responses waiting for slow readers", f"{fmt(blocked['blocks'])} waits, "
                      f"{fmt(blocked['seconds'])} s in all (watch streams whose client read too slowly: part "
                      "of the event delivery latency)"))
    if run.get("workers_missing_after") is not None:
        facts.append(("Load", f"none: fewer than the {run.get('expected_workers')} expected Locust workers joined "
                              f"within {fmt(run['workers_missing_after'])} s"))
    elif run.get("interrupted") and run.get("load_started") is False:
        facts.append(("Load", "none: interrupted before Locust started it (the verdicts are the server's own "
                              "traffic)"))
    if run.get("server_exited_at") is not None:
        facts.append(("Server", f"controlplane serve exited with {run.get('server_exit')} after "
                                f"{fmt(run['server_exited_at'])} s of load; the load was stopped"))
    elif run.get("target_unreachable_at") is not None:
        facts.append(("Server", f"{run.get('unreachable_target') or run.get('target')} refused connections from "
                                f"{fmt(run['target_unreachable_at'])} s of load on; the load was stopped"))
    quota = summary.get("quota")
    if quota:
        done = quota.get("completed_at")
        facts.append(("Pods (quota run)", f"{fmt(quota.get('created'))} created, {fmt(quota.get('deleted'))} deleted "
                                          f"of {fmt(quota.get('target'))}; "
                      + (f"completed after {fmt(done)} s" if done is not None else "NOT completed")))
    if summary.get("workers_quit"):
        facts.append(("Workers that quit", "; ".join(summary["workers_quit"])))
    if summary.get("incomplete_because"):
        facts.append(("Not complete", "; ".join(summary["incomplete_because"])))
    fact_rows = "".join(f"<tr><th>{k}</th><td>{fmt(v)}</td></tr>" for k, v in facts)
    replica_rows = "".join(
        f"<tr><td>{html.escape(r['target'])}</td><td>{fmt(r['requests'])}</td>"
        f"<td>{fmt(None if r['event_loop_lag_p99_s'] is None else r['event_loop_lag_p99_s'] * 1000)}</td>"
        f"<td>{fmt(None if r['peak_rss_bytes'] is None else r['peak_rss_bytes'] / 2**20)}</td>"
        f"<td>{fmt(r['cpu_seconds'])}</td></tr>" for r in summary.get("replicas") or ())
    replicas = ("<h2>Replicas</h2><p>Each target's own figures over the run (its <code>/metrics</code>); the "
                "verdicts' server-side histograms are their sums.</p><table><tr><th>target</th>"
                "<th>requests answered</th><th>event loop lag p99 ms</th><th>peak RSS MiB</th><th>CPU s</th></tr>"
                f"{replica_rows}</table>" if replica_rows else "")
    ov = summary["overall"]
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>controlplane load test: {fmt(summary.get('scenario'))}</title>
<style>
body {{ font-family: system-ui, sans-serif; max-width: 1000px; margin: 2em auto; color: #222; }}
table {{ border-collapse: collapse; margin: 1em 0; font-size: 0.9em; }}
td, th {{ border-bottom: 1px solid #ddd; padding: 3px 8px; text-align: left; }}
th {{ background: #f5f5f5; }}
figure {{ margin: 1.5em 0; }} figcaption {{ color: #555; font-size: 0.85em; }}
.verdict {{ font-size: 1.4em; font-weight: bold; color: {color.get(ov, '#757575')}; }}
</style></head><body>
<h1>Load test: {fmt(summary.get('scenario'))}</h1>
<p class="verdict">SLOs: {ov}</p>
<table>{fact_rows}</table>
<h2>SLO verdicts (p99 over the run)</h2>
<table><tr><th>SLO</th><th>threshold</th><th>p99</th><th>worst (or why no data)</th><th>samples</th>
<th>measured by</th><th>verdict</th></tr>
{verdict_rows}</table>
{replicas}
<p><small>The API call SLOs are upstream's: latency from the moment the API server gets the request to the
last byte of its response, read from the server's <code>apiserver_request_sli_duration_seconds</code> (every
client's calls, the cluster's components too) when its <code>/metrics</code> was scraped; the Locust clients'
p99 is shown beside it, the difference being time spent outside the server (network, a saturated load
generator).</small></p>
{errors}
{failures}
<h2>Plots</h2>
{plots}
<h2>Requests and latencies</h2>
<p>LATENCY rows are not requests: they are latencies the clients measured across a write and a watch.
EXPECTED rows count deliberate non-2xx answers (409 AlreadyExists of a shared object, a binding lost to
another binder).</p>
<table><tr><th>type</th><th>name</th><th>count</th><th>failures</th><th>p50 ms</th><th>p90 ms</th>
<th>p99 ms</th><th>max ms</th></tr>{entry_rows}</table>
</body></html>
"""
