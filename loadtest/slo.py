"""SLO verdicts over a run: the Kubernetes scalability SLOs and this project's targets.

Client-side SLOs are read from Locust's statistics, whose entries the user
classes name by convention (``loadtest.locustfiles.base``)::

    request_type  name                      what
    GET           pods                      a single-object read
    GET           pods [namespace]          a namespace-scoped LIST (also [cluster])
    GET           pods [watch]              a watch (time to its response headers; no SLO)
    POST          pods, pods/binding        a single-object write (PUT, PATCH, DELETE too)
    LATENCY       pod startup               create -> Running seen on a watch
    LATENCY       watch delivery pods       a write's response -> its event on a watch
    EXPECTED      409 namespaces            a deliberate non-2xx answer, counted apart

As upstream (sig-scalability's ``api_call_latency.md``), the API call SLOs hold
per (verb, resource) pair: each pair's p99 over the run must be under the
threshold, and the verdict names the worst pair. Upstream's latency of an API
call runs "from the moment when apiserver gets the request to last byte of
response sent", the server's ``apiserver_request_sli_duration_seconds``
(what clusterloader2 reads): when the run's scrapes have it, the API call
verdicts are read from it, every client's calls counted (the cluster's own
components too), and the Locust clients' p99 is kept beside as
``client_p99_s``: the difference is time spent outside the server (the
network, a saturated load generator). Without it (a server whose ``/metrics``
was not read) they are the clients'. Server-side targets come from
``/metrics`` histograms, the last scrape minus the first, per resource.

A p99 needs samples: of fewer than :data:`MIN_SAMPLES` (100) a p99 is their slowest
(Locust's rule) or an interpolation within the slowest's bucket (a histogram's), one
observation that judges nothing. A verdict read from fewer, its pairs' or resources'
samples summed, is :data:`TOO_FEW` ("too few samples"): it neither passes nor fails, as
"no data", and keeps its p99 and count for the reader. The same rule holds for every
verdict, each being a p99 of sampled latencies.

    >>> e = Entry("GET", "pods", {3: 98, 1200: 2})
    >>> e.percentile(0.99), e.num_requests
    (1.2, 100)
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from .promtext import Histogram

__all__ = ["MIN_SAMPLES", "SLI", "SLOS", "TOO_FEW", "ApiKey", "Entry", "Slo", "Verdict", "entries_from_locust_json",
           "evaluate", "no_data_note", "overall"]

MUTATING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
POD_STARTUP = "pod startup"
SLI = "apiserver_request_sli_duration_seconds"
# a series of SLI: (verb, group, resource, subresource, scope), upstream's labels (a create is scope
# resource, a server-side apply verb APPLY, a collection's GET verb LIST)
ApiKey = tuple[str, str, str, str, str]
_SERVER_MUTATING = frozenset({"POST", "PUT", "PATCH", "APPLY", "DELETE"})
# the fewest samples a verdict is given from: a p99 of 100 is the slowest but one's bucket at best,
# and of fewer the slowest alone
MIN_SAMPLES = 100
TOO_FEW = "too few samples"


@dataclass(frozen=True, slots=True)
class Entry:
    """One Locust statistics entry: its response times in milliseconds -> count."""

    request_type: str
    name: str
    response_times: Mapping[int, int]
    num_failures: int = 0

    @property
    def num_requests(self) -> int:
        return sum(self.response_times.values())

    def percentile(self, q: float) -> float | None:
        """The percentile in seconds, by Locust's rule (``locust.stats.calculate_response_time_percentile``),
        so that the report and the verdicts read what ``locust_stats.csv`` shows: the slowest time with
        at most ``int(q * n)`` requests faster than it. Where ``q * n`` is whole it is one rank above
        the nearest rank (of 100 requests, p99 is the slowest, not the 99th)."""
        n = self.num_requests
        if n == 0:
            return None
        below = n
        for ms in sorted(self.response_times, reverse=True):
            below -= self.response_times[ms]
            if below <= int(n * q):
                return ms / 1000.0
        return min(self.response_times) / 1000.0

    @property
    def resource(self) -> str:
        return self.name.split(" [", 1)[0]

    @property
    def scope(self) -> str:
        return self.name.rsplit("[", 1)[1].rstrip("]") if self.name.endswith("]") else ""


def entries_from_locust_json(stats: Iterable[Mapping[str, Any]]) -> list[Entry]:
    """Locust's ``--json`` output (a list of stats entries) as entries; the
    aggregated row, if present, is dropped."""
    out = []
    for s in stats:
        if s.get("name") == "Aggregated":
            continue
        times = {int(float(k)): int(v) for k, v in (s.get("response_times") or {}).items()}
        out.append(Entry(str(s.get("method") or ""), str(s["name"]), times, int(s.get("num_failures") or 0)))
    return out


@dataclass(frozen=True, slots=True)
class Slo:
    key: str
    title: str
    threshold: float  # seconds
    source: str       # "api" (the server's SLI histogram, else Locust), "client" (Locust) or "server" (/metrics)
    upstream: bool    # a Kubernetes scalability SLO, or this project's own target


SLOS = (
    Slo("mutating", "Mutating single-object API calls, p99 per (verb, resource)", 1.0, "api", True),
    Slo("get", "Single-object GETs, p99 per resource", 1.0, "api", True),
    Slo("list-namespace", "Namespace-scoped LISTs, p99 per resource", 5.0, "api", True),
    Slo("list-cluster", "Cluster-scoped LISTs, p99 per resource", 30.0, "api", True),
    Slo("pod-startup", "Pod startup (create -> Running observed on a watch), p99", 5.0, "client", True),
    Slo("writer-lock-wait", "Watch cache writer lock wait, p99 per resource", 0.001, "server", False),
    Slo("event-delivery", "Watch event delivery (commit -> watcher's stream), p99 per resource", 0.05, "server",
        False),
)


@dataclass(frozen=True, slots=True)
class Verdict:
    key: str
    title: str
    threshold_s: float
    p99_s: float | None    # the worst pair's p99; None without data
    worst: str             # which pair (or resource) that was
    samples: int
    verdict: str           # "pass" | "fail" | "no data" | "too few samples" (TOO_FEW: under MIN_SAMPLES)
    upstream: bool
    note: str = ""         # why a verdict has no data, or too few samples
    measured: str = ""     # "server" (a /metrics histogram) or "client" (Locust); "" without data
    client_p99_s: float | None = None  # an API call SLO read from the server: the Locust clients' worst p99
    client_worst: str = ""             # and their pair

    def as_dict(self) -> dict[str, Any]:
        """JSON-safe: a p99 beyond a histogram's largest bucket is null, with a note."""
        d = asdict(self)
        if not self.note:
            del d["note"]
        if self.measured != "server" or self.client_p99_s is None:
            del d["client_p99_s"], d["client_worst"]
        if self.p99_s is not None and math.isinf(self.p99_s):
            d["p99_s"] = None
            d["note"] = "; ".join(filter(None, ("p99 above the histogram's largest finite bucket", self.note)))
        return d


# what each client-side SLO reads, for a "no data" verdict's note
_CLIENT_WHAT = {
    "mutating": "POST, PUT, PATCH or DELETE of a single object",
    "get": "single-object GET",
    "list-namespace": "namespace-scoped LIST",
    "list-cluster": "cluster-scoped LIST",
    "pod-startup": "pod seen Running on a watch (pod startup)",
}


def no_data_note(key: str, *, locust_results: bool) -> str:
    """Why the client-side SLO ``key`` has no data: no Locust results at all, or none of
    the requests (or latencies) it reads in them."""
    if not locust_results:
        return ("no Locust results: locust.json is missing or empty (the load did not start, or ended "
                "before Locust's master wrote them; see locust-master.log)")
    return f"no {_CLIENT_WHAT.get(key, key)} in this run: the scenario's clients make none, or none was sent"


def _counts_for(key: str, e: Entry) -> bool:
    """Whether entry ``e`` is measured by the SLO ``key``."""
    if key == "mutating":
        return e.request_type in MUTATING
    if key == "get":
        return e.request_type == "GET" and e.scope == ""
    if key in ("list-namespace", "list-cluster"):
        return e.request_type == "GET" and e.scope == key.removeprefix("list-")
    if key == "pod-startup":
        return e.request_type == "LATENCY" and e.name == POD_STARTUP
    return False


def _client_groups(key: str, entries: Sequence[Entry]) -> dict[str, Entry]:
    return {f"{e.request_type} {e.name}": e for e in entries if _counts_for(key, e)}


def _server_counts_for(key: str, verb: str, scope: str) -> bool:
    """Whether an SLI series of ``verb`` and ``scope`` is measured by the API call SLO ``key``."""
    if key == "mutating":
        return verb in _SERVER_MUTATING and scope == "resource"
    if key == "get":
        return verb == "GET" and scope == "resource"
    if key in ("list-namespace", "list-cluster"):
        return verb == "LIST" and scope == key.removeprefix("list-")
    return False


def _api_label(k: ApiKey) -> str:
    """``PUT leases.coordination.k8s.io``, ``POST pods/binding``, ``LIST pods [cluster]``."""
    verb, group, resource, sub, scope = k
    name = f"{resource}.{group}" if group else resource
    return f"{verb} {name}{'/' + sub if sub else ''}{f' [{scope}]' if verb == 'LIST' else ''}"


def _worst(pairs: Iterable[tuple[str, float | None, int]]) -> tuple[str, float | None, int]:
    """(label, p99, samples) of the worst pair, the samples of them all."""
    worst, p99, samples = "", None, 0
    for label, q, n in pairs:
        samples += n
        if q is not None and (p99 is None or q > p99):
            worst, p99 = label, q
    return worst, p99, samples


def _verdict(slo: Slo, worst: str, p99: float | None, samples: int, measured: str) -> Verdict:
    """The verdict on ``p99`` of ``samples`` (all the pairs'), "no data" without any and
    :data:`TOO_FEW` under :data:`MIN_SAMPLES`.

    >>> slo = SLOS[-1]  # event delivery, <= 50 ms
    >>> [_verdict(slo, "pods", 0.01, n, "server").verdict for n in (0, 1, 99, 100)]
    ['no data', 'too few samples', 'too few samples', 'pass']
    """
    if p99 is None or samples == 0:
        return Verdict(slo.key, slo.title, slo.threshold, None, "", 0, "no data", slo.upstream)
    if samples < MIN_SAMPLES:
        return Verdict(slo.key, slo.title, slo.threshold, p99, worst, samples, TOO_FEW, slo.upstream,
                       note=f"{samples} sample{'s' if samples != 1 else ''}, fewer than the {MIN_SAMPLES} a p99 "
                            "is judged from: the p99 of so few is about their slowest, neither a pass nor a fail",
                       measured=measured)
    return Verdict(slo.key, slo.title, slo.threshold, p99, worst, samples,
                   "pass" if p99 <= slo.threshold else "fail", slo.upstream, measured=measured)


def evaluate(entries: Sequence[Entry], lock_wait: Mapping[str, Histogram] | None = None,
             delivery: Mapping[str, Histogram] | None = None,
             api_calls: Mapping[ApiKey, Histogram] | None = None) -> list[Verdict]:
    """Every SLO's verdict. ``lock_wait`` and ``delivery`` are per-resource
    histograms of what the run added (writer role only for the lock), ``api_calls``
    the SLI series (:data:`SLI`) it added."""
    verdicts = []
    for slo in SLOS:
        client = _worst((label, e.percentile(0.99), e.num_requests)
                        for label, e in _client_groups(slo.key, entries).items())
        if slo.source == "client":
            verdicts.append(_verdict(slo, *client, "client"))
        elif slo.source == "api":
            server = _worst((_api_label(k), h.quantile(0.99), int(h.count))
                            for k, h in sorted((api_calls or {}).items())
                            if h.count > 0 and _server_counts_for(slo.key, k[0], k[4]))
            if server[2] == 0:  # not read from this server: the clients' view
                verdicts.append(_verdict(slo, *client, "client"))
                continue
            v = replace(_verdict(slo, *server, "server"), client_p99_s=client[1], client_worst=client[0])
            first = min((h.buckets[0][0] for h in (api_calls or {}).values() if h.buckets), default=math.inf)
            if v.p99_s is not None and v.p99_s <= first:
                # upstream's SLI buckets start at 50 ms: a faster call reads as an interpolation within
                # the first (49.5 ms for every pair), and which pair is "worst" says nothing
                v = replace(v, note="; ".join(filter(None, (
                    v.note, f"every pair's p99 is within the histogram's first bucket, under {first * 1000:g} ms "
                            f"(the {round(v.p99_s * 1000, 2):g} ms is interpolated, as histogram_quantile does)"))))
            verdicts.append(v)
        else:
            hists = (lock_wait if slo.key == "writer-lock-wait" else delivery) or {}
            verdicts.append(_verdict(slo, *_worst((r, h.quantile(0.99), int(h.count)) for r, h in hists.items()),
                                     "server"))
    return verdicts


def overall(verdicts: Sequence[Verdict]) -> str:
    """"fail" if any verdict fails, else "pass" if any passes (those without data or with too few
    samples neither pass nor fail), else :data:`TOO_FEW` if any had samples, else "no data"."""
    if any(v.verdict == "fail" for v in verdicts):
        return "fail"
    if any(v.verdict == "pass" for v in verdicts):
        return "pass"
    return TOO_FEW if any(v.verdict == TOO_FEW for v in verdicts) else "no data"
