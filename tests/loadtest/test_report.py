"""The report, built from a small run directory written by hand."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest

from loadtest import report
from loadtest.kubeauth import bearer
from tests.loadtest.test_promtext import registry_text

HISTORY_FIELDS = ["Timestamp", "User Count", "Type", "Name", "Requests/s", "Failures/s", "50%", "99%",
                  "Total Request Count", "Total Failure Count"]


def write_run(out: Path, *, slow_startup: bool = False) -> None:
    startup = {"9000": 100} if slow_startup else {"120": 98, "300": 2}
    stats = [
        {"name": "pods", "method": "POST", "response_times": {"4": 90, "12": 10}, "num_failures": 0},
        {"name": "pods/binding", "method": "POST", "response_times": {"3": 42}, "num_failures": 0},
        {"name": "pods [namespace]", "method": "GET", "response_times": {"8": 20}, "num_failures": 0},
        {"name": "pods [cluster]", "method": "GET", "response_times": {"40": 5}, "num_failures": 0},
        {"name": "leases", "method": "GET", "response_times": {"1": 7}, "num_failures": 0},
        {"name": "pod startup", "method": "LATENCY", "response_times": startup, "num_failures": 0},
        {"name": "pod create→bound", "method": "LATENCY", "response_times": {"40": 42}, "num_failures": 0},
        {"name": "watch delivery pods", "method": "LATENCY", "response_times": {"1": 40}, "num_failures": 0},
        {"name": "409 namespaces", "method": "EXPECTED", "response_times": {"0": 3}, "num_failures": 0},
        {"name": "Aggregated", "method": "", "response_times": {"4": 300}, "num_failures": 0},
    ]
    (out / "locust.json").write_text(json.dumps(stats))
    with (out / "locust_stats_history.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, HISTORY_FIELDS)
        w.writeheader()
        for t in range(1000, 1010):
            for typ, name, rps in (("POST", "pods", 10), ("POST", "pods/binding", 9), ("GET", "pods [namespace]", 2),
                                   ("", "Aggregated", 21)):
                w.writerow({"Timestamp": t, "User Count": 5, "Type": typ, "Name": name, "Requests/s": rps,
                            "Failures/s": 0, "50%": 4, "99%": 12, "Total Request Count": rps * (t - 999),
                            "Total Failure Count": 0})
    first = registry_text({("pods", "writer"): [5e-6]})
    last = registry_text({("pods", "writer"): [5e-6] * 500, ("leases", "writer"): [5e-6] * 50})
    (out / "metrics-first.prom").write_text(first)
    (out / "metrics-last.prom").write_text(last)
    lines = [{"at": 2.0 * i, "lock_wait_writer": {"count": 50, "p50": 5e-6, "p99": 9e-6},
              "event_loop_lag": {"count": 200, "p50": 1e-4, "p99": 2e-3},
              "rss_bytes": 100e6 + i * 1e6, "cpu_seconds": 0.5 * i, "scheduled_total": 10.0 * i} for i in range(6)]
    (out / "server.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    (out / "plan.json").write_text(json.dumps({"scenario": "smoke", "description": "a fixture"}))
    (out / "run.json").write_text(json.dumps({"scenario": "smoke", "command": "python -m loadtest run smoke",
                                              "target": "http://x", "wall_seconds": 12.5, "processes": 1,
                                              "server_pid": 1}))


def test_report_from_a_run_directory(tmp_path: Path) -> None:
    write_run(tmp_path)
    summary = report.build(tmp_path)
    on_disk = json.loads((tmp_path / "summary.json").read_text())
    assert on_disk == json.loads(json.dumps(summary))
    assert summary["complete"] is True and summary["incomplete_because"] == []
    assert summary["overall"] == "pass"
    assert summary["requests"] == 100 + 42 + 20 + 5 + 7
    assert summary["failures"] == 0 and summary["expected_non_2xx"] == 3
    assert summary["peak_server_rss_bytes"] == 105e6
    verdicts = {v["key"]: v for v in summary["verdicts"]}
    assert verdicts["mutating"]["p99_s"] == 0.012 and verdicts["mutating"]["worst"] == "POST pods"
    assert verdicts["pod-startup"]["p99_s"] == 0.3
    assert verdicts["writer-lock-wait"]["verdict"] == "pass" and verdicts["writer-lock-wait"]["samples"] == 549
    assert verdicts["event-delivery"]["verdict"] == "no data"
    # seven GETs of a lease: a p99 of so few judges nothing, and the summary and the report say why
    assert verdicts["get"]["verdict"] == "too few samples" and verdicts["get"]["samples"] == 7
    assert verdicts["get"]["p99_s"] == 0.001 and "7 samples, fewer than the 100" in verdicts["get"]["note"]
    assert summary["plots"] == [f"{p}.png" for p in report.PLOTS]
    for p in report.PLOTS:
        png = tmp_path / f"{p}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", p
    html = (tmp_path / "report.html").read_text()
    for p in report.PLOTS:
        assert f"src='{p}.png'" in html
    assert ">too few samples</td>" in html and "7 samples, fewer than the 100" in html
    assert "SLOs: pass" in html and "<td>pods/binding</td>" in html and "a fixture" in html


def test_a_failing_slo_fails_the_report(tmp_path: Path) -> None:
    write_run(tmp_path, slow_startup=True)
    summary = report.build(tmp_path)
    assert summary["overall"] == "fail"
    [startup] = [v for v in summary["verdicts"] if v["key"] == "pod-startup"]
    assert startup["verdict"] == "fail" and startup["p99_s"] == 9.0
    assert "color:#c62828" in (tmp_path / "report.html").read_text()


def test_an_empty_directory_gives_an_incomplete_report(tmp_path: Path) -> None:
    summary = report.build(tmp_path)
    assert summary["complete"] is False
    assert summary["overall"] == "incomplete"  # never "pass" without a finished run
    assert summary["incomplete_because"] == ["no Locust results (locust.json is missing or empty)",
                                             "no /metrics scrape of the server"]
    assert "<th>Wall time</th><td>–</td>" in (tmp_path / "report.html").read_text()  # not "– s"
    assert all((tmp_path / f"{p}.png").exists() for p in report.PLOTS)


@pytest.mark.parametrize("name", ["summary.json", "report.html"])
def test_report_files_are_small(tmp_path: Path, name: str) -> None:
    write_run(tmp_path)
    report.build(tmp_path)
    assert (tmp_path / name).stat().st_size < 100_000


def test_a_run_with_failed_requests_never_passes(tmp_path: Path) -> None:
    # a refused connection answers fast: its "latency" must not make the SLOs pass
    stats = [{"name": "pods", "method": "POST", "num_requests": 10, "num_failures": 10, "response_times": {"5": 10},
              "last_request_timestamp": 1.0, "start_time": 0.0, "num_none_requests": 0, "total_response_time": 50,
              "max_response_time": 5, "min_response_time": 5, "total_content_length": 0,
              "num_reqs_per_sec": {"0": 10}, "num_fail_per_sec": {"0": 10}}]
    (tmp_path / "locust.json").write_text(json.dumps(stats))
    (tmp_path / "server.jsonl").write_text('{"t": 0}\n')
    (tmp_path / "locust_failures.csv").write_text(
        "Method,Name,Error,Occurrences,First Seen,Last Seen\n"
        "POST,pods,ApiFailure('HTTP 0 ConnectionRefusedError'),3,2026-12-04T09:45:49Z,2026-12-04T09:45:49Z\n"
        "POST,pods,ApiFailure('HTTP 500 InternalError: <disk full>'),7,2026-12-04T09:45:49Z,2026-12-04T09:45:50Z\n")
    summary = report.build(tmp_path)
    assert summary["failures"] == 10 and summary["overall"] == "fail"
    # and why they failed, the most frequent first
    assert [r["occurrences"] for r in summary["failure_reasons"]] == [7, 3]
    page = (tmp_path / "report.html").read_text()
    assert "<h2>Failures</h2>" in page and "InternalError: &lt;disk full&gt;" in page


def test_errors_in_the_load_s_clients_are_shown_and_leave_the_run_incomplete(tmp_path: Path) -> None:
    # a user whose on_start raised made none of its load: the verdicts of the rest must not pass the run
    write_run(tmp_path)
    (tmp_path / "locust_exceptions.csv").write_text(
        'Count,Message,Traceback,Nodes\n'
        '12,invalid request URI \'//api/v1/namespaces\',"  File ""locust/user/users.py"", line 166, in run\n'
        '    self.on_start()\n  File ""loadtest/locustfiles/kubelets.py"", line 44, in on_start\n'
        '    self.ensure(""namespaces"", objects.namespace(""kube-node-lease""))\n",[]\n')
    summary = report.build(tmp_path)
    assert summary["client_errors"] == [{"count": 12, "message": "invalid request URI '//api/v1/namespaces'",
                                         "where": 'File "loadtest/locustfiles/kubelets.py", line 44, in on_start'}]
    assert summary["complete"] is False and summary["overall"] == "incomplete"
    page = (tmp_path / "report.html").read_text()
    assert "<h2>Errors in the load's clients</h2>" in page and "kubelets.py" in page


def test_a_report_without_failures_has_no_failure_table(tmp_path: Path) -> None:
    write_run(tmp_path)
    summary = report.build(tmp_path)
    assert summary["failure_reasons"] == [] and summary["client_errors"] == []
    assert "<h2>Failures</h2>" not in (page := (tmp_path / "report.html").read_text())
    assert "Errors in the load" not in page


def test_the_token_is_redacted_from_the_recorded_command() -> None:
    from loadtest.run import _redacted

    assert _redacted(["smoke", "--token", "s3cret", "--target", "https://x"]) == [
        "smoke", "--token", "REDACTED", "--target", "https://x"]
    assert _redacted(["--token=s3cret"]) == ["--token=REDACTED"]


def test_a_target_that_cannot_serve_stops_the_run_before_any_load() -> None:
    from loadtest.run import _check_target

    with pytest.raises(SystemExit, match="with its scheme"):
        _check_target("127.0.0.1:1", bearer(""))
    with pytest.raises(SystemExit, match="cannot reach"):
        _check_target("http://127.0.0.1:1", bearer(""))
    # httpx's InvalidURL is no HTTPError: it was a traceback
    with pytest.raises(SystemExit, match=r"'https://\[::1' is not a URL: Invalid port"):
        _check_target("https://[::1", bearer(""))
    with pytest.raises(SystemExit, match="names no host"):
        _check_target("http://:6443", bearer(""))


def test_an_interrupted_run_is_not_complete(tmp_path: Path) -> None:
    write_run(tmp_path)
    run = json.loads((tmp_path / "run.json").read_text())
    (tmp_path / "run.json").write_text(json.dumps({**run, "interrupted": True, "load_seconds": 30.6}))
    summary = report.build(tmp_path)
    assert summary["complete"] is False and summary["overall"] == "incomplete"
    # and why, in summary.json and the report (it said "incomplete" and nowhere why)
    assert summary["incomplete_because"] == ["interrupted (Ctrl-C, SIGTERM or SIGHUP) after 30.6 s of load"]
    assert "<th>Not complete</th><td>interrupted (Ctrl-C, SIGTERM or SIGHUP) after 30.6 s of load</td>" in \
        (tmp_path / "report.html").read_text()


def test_a_run_that_lost_a_worker_is_not_complete_and_says_so(tmp_path: Path) -> None:
    write_run(tmp_path)
    run = json.loads((tmp_path / "run.json").read_text())
    (tmp_path / "run.json").write_text(json.dumps({**run, "workers_lost": [{"worker": 1, "exit": -9, "at": 18.2}]}))
    summary = report.build(tmp_path)
    assert summary["complete"] is False and summary["overall"] == "incomplete"
    assert summary["incomplete_because"] == [
        "Locust's worker 1 exited with -9 after 18.2 s of load (its users made no load after that)"]


def test_a_run_whose_server_died_is_not_complete_and_says_so(tmp_path: Path) -> None:
    write_run(tmp_path)
    run = json.loads((tmp_path / "run.json").read_text())
    (tmp_path / "run.json").write_text(json.dumps({**run, "server_exit": -9, "server_exited_at": 14.2}))
    summary = report.build(tmp_path)
    assert summary["complete"] is False and summary["overall"] == "incomplete"
    assert "controlplane serve exited with -9 after 14.2 s of load" in (tmp_path / "report.html").read_text()


def test_a_run_whose_target_stopped_taking_connections_is_not_complete_and_says_so(tmp_path: Path) -> None:
    write_run(tmp_path)
    run = json.loads((tmp_path / "run.json").read_text())
    (tmp_path / "run.json").write_text(json.dumps({**run, "target": "https://10.0.0.1:6443",
                                                   "target_unreachable_at": 21.5}))
    summary = report.build(tmp_path)
    assert summary["complete"] is False and summary["overall"] == "incomplete"
    assert "https://10.0.0.1:6443 refused connections from 21.5 s of load on" in (tmp_path / "report.html").read_text()


def test_the_report_counts_remote_workers(tmp_path: Path) -> None:
    write_run(tmp_path)
    run = json.loads((tmp_path / "run.json").read_text())
    (tmp_path / "run.json").write_text(json.dumps({**run, "processes": 2, "expected_workers": 6}))
    report.build(tmp_path)
    assert "1 master + 6 workers (2 on this machine)" in (tmp_path / "report.html").read_text()
    (tmp_path / "run.json").write_text(json.dumps({**run, "processes": 1, "expected_workers": 1}))
    report.build(tmp_path)
    assert "1 master + 1 worker<" in (tmp_path / "report.html").read_text()


def test_a_no_data_verdict_says_why(tmp_path: Path) -> None:
    # the fixture's /metrics has no event delivery histogram, and its clients make no single-object GET
    # but of leases; without those GETs the note names what is missing
    write_run(tmp_path)
    stats = [s for s in json.loads((tmp_path / "locust.json").read_text()) if s["name"] != "leases"]
    (tmp_path / "locust.json").write_text(json.dumps(stats))
    summary = report.build(tmp_path)
    verdicts = {v["key"]: v for v in summary["verdicts"]}
    assert verdicts["get"]["verdict"] == "no data"
    assert verdicts["get"]["note"].startswith("no single-object GET in this run")
    assert verdicts["event-delivery"]["note"] == (
        "the target's /metrics has no controlplane_watch_event_delivery_seconds (a server other than controlplane?)")
    assert "note" not in verdicts["mutating"]  # a verdict with data needs none
    assert summary["overall"] == "pass"  # "no data" neither passes nor fails the run
    assert "no single-object GET in this run" in (tmp_path / "report.html").read_text()


def test_a_run_without_results_says_what_is_missing(tmp_path: Path) -> None:
    # the load never ran and no scrape succeeded: each verdict says which of the two it lacks
    (tmp_path / "run.json").write_text(json.dumps({"scenario": "smoke", "scrape_errors": 3,
                                                   "scrape_error": "403 Forbidden"}))
    summary = report.build(tmp_path)
    notes = {v["key"]: v["note"] for v in summary["verdicts"]}
    assert notes["pod-startup"].startswith("no Locust results: locust.json is missing or empty")
    assert notes["writer-lock-wait"] == "no /metrics scrape succeeded (3 failed; the last: 403 Forbidden)"
    # with a scrape whose histogram saw nothing during the run
    (tmp_path / "metrics-last.prom").write_text(registry_text({}))
    (tmp_path / "metrics-first.prom").write_text(registry_text({}))
    (tmp_path / "server.jsonl").write_text('{"at": 0.1}\n')
    notes = {v["key"]: v["note"] for v in report.build(tmp_path)["verdicts"]}
    assert notes["writer-lock-wait"] == ("no controlplane_watch_cache_lock_wait_seconds observation between the "
                                         "first and the last of the run's 1 /metrics scrape")


def test_pods_bound_by_a_scheduler_the_metrics_do_not_count_are_plotted_from_the_clients() -> None:
    # a Kubernetes cluster's API server (or a process of `serve --workers 2` that does not schedule)
    # counts neither the scheduler's attempts nor bindings: the plot was "no data" against every cluster
    server = [{"at": 2.0 * i, "rss_bytes": 1e8} for i in range(4)]
    history = [{"Timestamp": str(1000 + t), "Type": "LATENCY", "Name": "pod create→bound", "Requests/s": str(rps)}
               for t, rps in enumerate((0.0, 3.0, 5.0))]
    assert report.scheduling_series(server, history) == [
        (report.CLIENTS_SAW_BOUND, [0.0, 1.0, 2.0], [0.0, 3.0, 5.0])]
    assert report.scheduling_series(server, []) == []


def test_the_clients_rates_are_read_from_their_running_totals() -> None:
    # Locust's Requests/s is a ten-second average ending two seconds back: a binder done binding
    # was still drawn at its last rate to the end of the run. The totals move every 3 s (the workers'
    # reports): the rate between their changes, and nothing after the last
    totals = (2, 2, 2, 9, 9, 9, 15, 15, 15, 15)
    history = [{"Timestamp": str(1000 + t), "Type": "POST", "Name": "pods/binding", "Requests/s": "1.7",
                "Total Request Count": str(n)} for t, n in enumerate(totals)]
    [(label, xs, ys)] = report.scheduling_series([], history)
    assert label == "load-test binder (pods/binding)"
    assert (xs, ys) == ([3.0, 6.0, 9.0], [7 / 3, 2.0, 0.0])


def test_the_throughput_plot_reads_each_verb_s_running_totals() -> None:
    # the throughput plot drew Locust's Requests/s, a ten-second average ending two seconds back: the
    # 200 deletes of a million --scale 0.01 --quick run's last 3 s were drawn at 13 a second, and the
    # rate stayed up after the load had stopped. Each verb's entries are summed (DELETE pods and the
    # kubelets' DELETE pods [kubelet], the latter first seen in the report that brought its deletes)
    aggregated = (0, 0, 0, 30, 30, 30, 230, 230, 230, 230)
    history = [{"Timestamp": str(1000 + t), "Type": "", "Name": "Aggregated", "Requests/s": "9",
                "Total Request Count": str(n)} for t, n in enumerate(aggregated)]
    history += [{"Timestamp": str(1000 + t), "Type": "POST", "Name": "pods", "Requests/s": "5",
                 "Total Request Count": str(n)} for t, n in enumerate((0, 0, 0, 30, 30, 30, 30, 30, 30, 30))]
    history += [{"Timestamp": str(1000 + t), "Type": "DELETE", "Name": "pods", "Requests/s": "12.7",
                 "Total Request Count": "140"} for t in range(6, 10)]
    history += [{"Timestamp": str(1000 + t), "Type": "DELETE", "Name": "pods [kubelet]", "Requests/s": "4",
                 "Total Request Count": "60"} for t in range(6, 10)]
    history += [{"Timestamp": str(1000 + t), "Type": "LATENCY", "Name": "pod startup", "Requests/s": "50",
                 "Total Request Count": "500"} for t in range(3, 10)]
    series = report.throughput_series(history)
    assert sorted(series) == ["DELETE", "POST"]  # HTTP verbs only
    assert series["DELETE"] == ([6.0, 9.0], [200 / 3, 0.0])
    assert series["POST"] == ([3.0, 9.0], [10.0, 0.0])
    assert report.throughput_series([]) == {}


def test_what_came_before_an_entry_s_first_history_row_is_drawn() -> None:
    # Locust's history has a row of an entry only once the master has heard of it, with the total of
    # the report it came in: a million --quick's binder bound its 60 pods within one report, and its
    # plot was empty. Before that row the entry was at 0, as of the report before (the Aggregated
    # total moved), and the rate spreads over the time between the two reports as it does later
    aggregated = (0, 0, 0, 50, 50, 50, 120, 120, 120, 150)
    history = [{"Timestamp": str(1000 + t), "Type": "", "Name": "Aggregated", "Requests/s": "9",
                "Total Request Count": str(n)} for t, n in enumerate(aggregated)]
    history += [{"Timestamp": str(1000 + t), "Type": "POST", "Name": "pods/binding", "Requests/s": "7",
                 "Total Request Count": "60"} for t in range(6, 10)]
    [(label, xs, ys)] = report.scheduling_series([], history)
    assert label == "load-test binder (pods/binding)"
    assert (xs, ys) == ([6.0, 9.0], [20.0, 0.0])
    # an entry in the very first report: the history's start is when it was at 0
    history = [{**r, "Timestamp": str(int(r["Timestamp"]) - 3)} for r in history if r["Type"] == "POST"]
    history.insert(0, {"Timestamp": "1000", "Type": "", "Name": "Aggregated", "Total Request Count": "0"})
    assert report.scheduling_series([], history)[0][1:] == ([3.0, 6.0], [20.0, 0.0])


def test_the_scheduler_s_own_count_comes_first_and_the_clients_beside_it() -> None:
    server = [{"at": 2.0 * i, "scheduled_total": 10.0 * i, "bindings_total": 10.0 * i} for i in range(3)]
    history = [{"Timestamp": "1000", "Type": "LATENCY", "Name": "pod create→bound", "Requests/s": "5"}]
    assert [label for label, _, _ in report.scheduling_series(server, history)] == [
        "built-in scheduler (metrics)", report.CLIENTS_SAW_BOUND]
    assert report.scheduling_series(server, history)[0][1:] == ([2.0, 4.0], [5.0, 5.0])


@pytest.mark.parametrize(("bound", "note"), [
    (False, "100 pods created, none seen bound: nothing placed them (a target without a scheduler, "
            "with --binder off?)"),
    (True, "100 pods created and bound, none seen Running: no kubelet started them")])
def test_pods_created_but_never_running_say_why_pod_startup_has_no_data(tmp_path: Path, bound: bool,
                                                                        note: str) -> None:
    # it said "the scenario's clients make none, or none was sent", of a run that created 100 pods
    write_run(tmp_path)
    stats = [s for s in json.loads((tmp_path / "locust.json").read_text())
             if s["name"] != "pod startup" and (bound or s["name"] != "pod create→bound")]
    (tmp_path / "locust.json").write_text(json.dumps(stats))
    verdicts = {v["key"]: v for v in report.build(tmp_path)["verdicts"]}
    assert verdicts["pod-startup"]["verdict"] == "no data" and verdicts["pod-startup"]["note"] == note


def test_the_server_s_memory_and_cpu_lines_are_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # two y axes, two lines, no legend: which line was the RSS was left to guess
    from matplotlib.axes import Axes

    legends: dict[int, list[str]] = {}
    titled: list[Axes] = []
    draw = Axes.legend

    def legend(self: Axes, *args: object, **kwargs: object) -> object:
        titled.append(self)
        made = draw(self, *args, **kwargs)
        legends[id(self)] = [t.get_text() for t in made.get_texts()]
        return made

    monkeypatch.setattr(Axes, "legend", legend)
    write_run(tmp_path)
    report.build(tmp_path)
    [ax] = [a for a in titled if a.get_title() == "Server memory and CPU"]
    assert legends[id(ax)] == ["RSS MiB (left axis)", "CPU % (right axis)"]


@pytest.mark.parametrize("labels", [["GET pods"], ["PATCH validatingadmissionpolicies/status [cluster]", "GET pods"]])
@pytest.mark.parametrize("twin", [False, True])
def test_a_plot_s_title_labels_and_ticks_are_inside_its_png(labels: list[str], twin: bool) -> None:
    # the margins are measured, not found by a trial draw (tight_layout): nothing may be cut off
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8, 3), dpi=80)
    ax = fig.subplots()
    ax.barh(range(len(labels)), [5, 5000][:len(labels)])
    ax.set_yticks(range(len(labels)), labels, fontsize=7)
    ax.set_xscale("log")
    report._plain_log_ticks(ax.xaxis)  # as the report's log axes
    ax.set_xlabel("s")
    ax.set_ylabel("requests/s")
    ax.set_title("Latency percentiles per verb and resource")
    if twin:
        ax.twinx().set_ylabel("CPU % (100 = one core)")
    report._margins(fig)
    renderer = FigureCanvasAgg(fig).get_renderer()  # type: ignore[no-untyped-call]
    fig.draw(renderer)
    box = fig.bbox

    def drawn(axis: Any) -> list[Any]:  # the tick labels drawn: those of ticks inside the view
        lo, hi = sorted(axis.get_view_interval())
        return [t.label1 if axis.axis_name == "x" or not twin or axis is fig.axes[0].yaxis else t.label2
                for t in axis.get_major_ticks() if lo <= t.get_loc() <= hi]

    texts = [t for a in fig.axes for t in (a.title, a.xaxis.label, a.yaxis.label, *drawn(a.xaxis), *drawn(a.yaxis))
             if t.get_text() and t.get_visible()]
    assert {t.get_text() for t in texts} >= {*labels, "s", "requests/s"}
    for t in texts:
        extent = t.get_window_extent(renderer)
        assert box.x0 <= extent.x0 and extent.x1 <= box.x1 and box.y0 <= extent.y0 and extent.y1 <= box.y1, \
            t.get_text()
    assert fig.axes[0].get_window_extent(renderer).width > 200  # and the plot is not squeezed out
