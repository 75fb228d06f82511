"""The benchmarks behind ``controlplane bench NAME``.

``BENCHMARKS`` maps each name to ``"module:function"``; the module is imported
only when its benchmark runs, so ``controlplane --help`` stays fast and one
benchmark's heavy imports never slow another. The function takes the
arguments after the name and returns the exit code::

    def main(argv: list[str]) -> int: ...

Each benchmark prints one JSON object per line (DESIGN.md):
``{"bench": str, "metric": str, "value": float, "unit": str, ...}``.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from typing import cast

__all__ = ["BENCHMARKS", "BenchmarkUnavailable", "UnknownBenchmark", "help_text", "resolve", "run"]

BENCHMARKS: dict[str, str] = {
    "store": "store.bench:main",
    "api": "controlplane.bench.api:main",
    "watchcache": "controlplane.bench.watchcache:main",
    "scheduler": "controlplane.bench.scheduler:main",
    "nodes": "controlplane.bench.nodes:main",
    "dra": "controlplane.scheduler.dra.bench:main",
    "autoscaler": "controlplane.bench.autoscaler:main",
    "writes": "controlplane.bench.writes:main",
    "informer": "controlplane.bench.informer:main",
    "lease-watch": "controlplane.bench.leasewatch:main",
    "idle": "controlplane.bench.idle:main",
}

BenchMain = Callable[[list[str]], int]


def help_text(doc: str | None, first: bool = False) -> str:
    """A benchmark's docstring as its ``--help`` shows it: the literals' double
    backquotes dropped, a ``::`` that opens a literal block made one colon;
    ``first``: only the first paragraph.

    >>> help_text("``bench x``: the rate of ``--pods`` writes, by kind::\\n\\n  more")
    'bench x: the rate of --pods writes, by kind:\\n\\n  more'
    """
    text = doc or ""
    if first:
        text = text.split("\n\n")[0]
    return re.sub(r"::$", ":", text.replace("``", ""), flags=re.M)


class UnknownBenchmark(LookupError):
    def __init__(self, name: str) -> None:
        super().__init__(f"unknown benchmark {name!r} (choose from: {', '.join(sorted(BENCHMARKS))})")
        self.name = name


class BenchmarkUnavailable(LookupError):
    """The benchmark is registered but its module is not installed (or not written yet)."""


def resolve(name: str) -> BenchMain:
    """Import and return the entry point of benchmark ``name``."""
    try:
        target = BENCHMARKS[name]
    except KeyError:
        raise UnknownBenchmark(name) from None
    module_name, _, func_name = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        # Only the benchmark's own module missing; a missing import inside it is a bug to show whole.
        if e.name is None or not (module_name == e.name or module_name.startswith(e.name + ".")):
            raise
        raise BenchmarkUnavailable(f"benchmark {name!r} is not available: {e}") from e
    return cast(BenchMain, getattr(module, func_name))


def run(name: str, argv: list[str]) -> int:
    return resolve(name)(argv)
