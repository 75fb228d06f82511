"""The server's ``/metrics`` (Prometheus text format) as numbers the report can use.

A scrape is a :class:`Scrape`: every sample by (name, labels), and the
histograms folded into :class:`Histogram` values (cumulative buckets, sum,
count). Quantiles over a run come from the difference of two scrapes, the last
minus the first, as ``histogram_quantile(0.99, increase(...[run]))`` would::

    >>> head = "# TYPE h histogram\\n"
    >>> a = parse(head + 'h_bucket{le="0.1"} 1\\nh_bucket{le="+Inf"} 1\\nh_count 1\\nh_sum 0.05\\n', at=0.0)
    >>> b = parse(head + 'h_bucket{le="0.1"} 3\\nh_bucket{le="+Inf"} 5\\nh_count 5\\nh_sum 2.0\\n', at=1.0)
    >>> d = b.histogram("h").minus(a.histogram("h"))
    >>> d.count, d.quantile(0.5)
    (4.0, 0.1)
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

__all__ = ["Histogram", "Scrape", "parse"]

Labels = tuple[tuple[str, str], ...]


def _labels(d: Mapping[str, str], drop: Iterable[str] = ()) -> Labels:
    skip = set(drop)
    return tuple(sorted((k, v) for k, v in d.items() if k not in skip))


@dataclass(frozen=True, slots=True)
class Histogram:
    """Cumulative buckets (upper bound, count), ascending, ending with +Inf."""

    buckets: tuple[tuple[float, float], ...]
    total: float  # _sum
    count: float  # _count

    def minus(self, earlier: Histogram | None) -> Histogram:
        """The observations made between ``earlier`` and this one (a counter
        reset, i.e. a restarted server, leaves this one as it is)."""
        if earlier is None or earlier.count > self.count:
            return self
        before = dict(earlier.buckets)
        return Histogram(tuple((le, c - before.get(le, 0.0)) for le, c in self.buckets),
                         self.total - earlier.total, self.count - earlier.count)

    def plus(self, other: Histogram) -> Histogram:
        theirs = dict(other.buckets)
        les = sorted(set(dict(self.buckets)) | set(theirs))
        mine = dict(self.buckets)
        return Histogram(tuple((le, mine.get(le, 0.0) + theirs.get(le, 0.0)) for le in les),
                         self.total + other.total, self.count + other.count)

    def quantile(self, q: float) -> float | None:
        """Prometheus's ``histogram_quantile``: linear within the bucket the rank
        falls in; None if empty. Where Prometheus answers the highest finite
        bound for a rank in the +Inf bucket, this answers ``inf``: all that is
        known is that the quantile is above that bound, and a verdict must not
        read it as a pass."""
        if not self.buckets or self.count <= 0:
            return None
        rank = q * self.buckets[-1][1]
        prev_le, prev_c = 0.0, 0.0
        for le, c in self.buckets:
            if c >= rank:
                if math.isinf(le):
                    return math.inf
                if c == prev_c:
                    return le
                return prev_le + (le - prev_le) * (rank - prev_c) / (c - prev_c)
            prev_le, prev_c = le, c
        return prev_le

    def mean(self) -> float | None:
        return self.total / self.count if self.count else None


@dataclass(slots=True)
class Scrape:
    at: float  # seconds since the run started
    samples: dict[tuple[str, Labels], float] = field(default_factory=dict)
    histograms: dict[tuple[str, Labels], Histogram] = field(default_factory=dict)

    def value(self, name: str, **labels: str) -> float | None:
        return self.samples.get((name, _labels(labels)))

    def sum(self, name: str, **match: str) -> float | None:
        """The sum of every series of ``name`` whose labels include ``match``."""
        found = [v for (n, lab), v in self.samples.items() if n == name and _has(lab, match)]
        return sum(found) if found else None

    def histogram(self, name: str, **match: str) -> Histogram | None:
        """Every series of histogram ``name`` whose labels include ``match``, merged."""
        merged: Histogram | None = None
        for (n, lab), h in self.histograms.items():
            if n == name and _has(lab, match):
                merged = h if merged is None else merged.plus(h)
        return merged

    def series(self, name: str) -> dict[Labels, Histogram]:
        return {lab: h for (n, lab), h in self.histograms.items() if n == name}


def _has(labels: Labels, match: Mapping[str, str]) -> bool:
    d = dict(labels)
    return all(d.get(k) == v for k, v in match.items())


@dataclass(slots=True)
class _Parts:
    buckets: list[tuple[float, float]] = field(default_factory=list)
    total: float = 0.0
    count: float = 0.0


def parse(text: str, at: float) -> Scrape:
    """One scrape of Prometheus text (format 0.0.4)."""
    scrape = Scrape(at)
    parts: dict[tuple[str, Labels], _Parts] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if family.type != "histogram":
                scrape.samples[(s.name, _labels(s.labels))] = float(s.value)
                continue
            part = parts.setdefault((family.name, _labels(s.labels, drop=("le",))), _Parts())
            if s.name.endswith("_bucket"):
                part.buckets.append((float(s.labels["le"]), float(s.value)))
            elif s.name.endswith("_sum"):
                part.total = float(s.value)
            elif s.name.endswith("_count"):
                part.count = float(s.value)
    for key, p in parts.items():
        scrape.histograms[key] = Histogram(tuple(sorted(p.buckets)), p.total, p.count)
    return scrape
