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
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

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
    """One scrape of Prometheus text (format 0.0.4); ``ValueError`` for what is not.

    The harness parses the server's whole exposition every few seconds (about 10,000
    lines, 1.3 MB by the end of a ``million`` run), on the machine under test:
    prometheus_client's parser took 0.22 s of CPU a scrape, this one a fraction of it,
    mostly because a series' label block, the same text in every scrape, is parsed
    once (``_LABEL_BLOCKS``)."""
    scrape = Scrape(at)
    histogram_families: set[str] = set()
    parts: dict[tuple[str, Labels], _Parts] = {}
    samples = scrape.samples
    for line in text.splitlines():
        if not line or line[0] == "#":
            if line.startswith("# TYPE "):
                fields = line.split()
                if len(fields) >= 4 and fields[3] == "histogram":
                    histogram_families.add(fields[2])
            continue
        brace = line.find("{")
        if brace >= 0:
            close = line.rfind("}")
            if close < brace:
                raise ValueError(f"a sample's labels are not closed: {line[:100]!r}")
            name, block, rest = line[:brace].strip(), line[brace + 1:close], line[close + 1:]
        else:
            name, _, rest = line.strip().partition(" ")
            block = ""
        value = _sample_value(rest, line)
        if not _METRIC_NAME.fullmatch(name):
            raise ValueError(f"not a metric name: {name[:100]!r}")
        labels, without_le, le = _label_block(block)
        family, suffix = _histogram_part(name, histogram_families)
        if family is None:
            samples[(name, labels)] = value
            continue
        if suffix == "_bucket":
            if le is None:
                raise ValueError(f"a histogram bucket without le: {line[:100]!r}")
            parts.setdefault((family, without_le), _Parts()).buckets.append((float(le), value))
        elif suffix == "_sum":
            parts.setdefault((family, without_le), _Parts()).total = value
        elif suffix == "_count":
            parts.setdefault((family, without_le), _Parts()).count = value
    for key, p in parts.items():
        scrape.histograms[key] = Histogram(tuple(sorted(p.buckets)), p.total, p.count)
    return scrape


_METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*(?:,|$)')
_ESCAPE = re.compile(r"\\(.)")
_ESCAPED = {"n": "\n", "\\": "\\", '"': '"'}
# a label block's text -> (its labels, them without "le", "le"'s value): the same blocks come back
# in every scrape of a run; bounded, in case a target's labels churn
_LABEL_BLOCKS: dict[str, tuple[Labels, Labels, str | None]] = {}
_LABEL_BLOCKS_MAX = 200_000


def _label_block(block: str) -> tuple[Labels, Labels, str | None]:
    known = _LABEL_BLOCKS.get(block)
    if known is not None:
        return known
    pairs: list[tuple[str, str]] = []
    end = 0
    for m in _LABEL.finditer(block):
        if m.start() != end:
            raise ValueError(f"labels that do not parse: {{{block[:100]}}}")
        value = m.group(2)
        if "\\" in value:
            value = _ESCAPE.sub(lambda e: _ESCAPED.get(e.group(1), "\\" + e.group(1)), value)
        pairs.append((m.group(1), value))
        end = m.end()
    if block[end:].strip():
        raise ValueError(f"labels that do not parse: {{{block[:100]}}}")
    labels = tuple(sorted(pairs))
    le = next((v for k, v in pairs if k == "le"), None)
    parsed = (labels, tuple(kv for kv in labels if kv[0] != "le") if le is not None else labels, le)
    if len(_LABEL_BLOCKS) < _LABEL_BLOCKS_MAX:
        _LABEL_BLOCKS[block] = parsed
    return parsed


def _sample_value(rest: str, line: str) -> float:
    """The value after a sample's name and labels (a timestamp after it is ignored)."""
    fields = rest.split()
    if not fields or len(fields) > 2:
        raise ValueError(f"not a sample: {line[:100]!r}")
    try:
        return float(fields[0])
    except ValueError:
        raise ValueError(f"not a sample's value: {line[:100]!r}") from None


def _histogram_part(name: str, families: set[str]) -> tuple[str | None, str]:
    """(the histogram family ``name`` is a series of, its suffix), or (None, "")."""
    for suffix in ("_bucket", "_count", "_sum"):  # (a histogram's _created is a gauge family of its own)
        if name.endswith(suffix) and name[:-len(suffix)] in families:
            return name[:-len(suffix)], suffix
    return None, ""
