"""A test that leaves the process's signal handling changed fails (at its teardown).

What a test process has when a test ends, the next test in it has, and every program it starts
inherits what the kernel holds: a signal ignored stays ignored across ``exec``, a blocked one
stays blocked; a handler left in place answers signals meant for the runner. Such a change
shows far from its cause (a Locust worker a test started ignored Ctrl-C in full runs only: not
an earlier test's doing, it turned out, but a pytest started in the background, which
``pytest_terminal_summary`` below says).

So each test is compared with itself, before its setup and after its teardown (its function
fixtures with it), not with fixed values: pytest, xdist and Python set some signals themselves.
Compared: Python's handler for the signals below (``signal.getsignal``), and the kernel's view of
every signal, ignored or blocked in the main thread (``SigIgn``, ``SigBlk`` of
``/proc/self/status``), which sees what C code (an event loop, a library) set behind Python's
back. What changed is said, then put back where Python can, so that the tests after it run as
they would have.
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Generator
from dataclasses import dataclass
from types import FrameType
from typing import Any

import pytest

# those a test is likeliest to change, and whose change reaches programs it starts: Ctrl-C,
# termination, a closed terminal, children's ends, a closed pipe (Python's own SIG_IGN)
WATCHED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD, signal.SIGPIPE)

Handler = Callable[[int, FrameType | None], Any] | int | signal.Handlers | None


@dataclass(frozen=True)
class Signals:
    """A process's signal handling at one moment: Python's handler for each of ``WATCHED``, and
    the kernel's sets of signals ignored and blocked (in the main thread), None where
    ``/proc`` is not there to tell."""

    handlers: tuple[Handler, ...]
    ignored: frozenset[int] | None
    blocked: frozenset[int] | None


def _kernel_sets() -> tuple[frozenset[int] | None, frozenset[int] | None]:
    """(ignored, blocked): the signal numbers in the main thread's ``SigIgn`` and ``SigBlk``
    masks, bit n-1 for signal n."""
    try:
        with open("/proc/self/status", "rb") as f:
            status = f.read()
    except OSError:
        return None, None
    masks: dict[bytes, frozenset[int]] = {}
    for line in status.splitlines():
        name, _, value = line.partition(b":")
        if name in (b"SigIgn", b"SigBlk"):
            bits = int(value, 16)
            masks[name] = frozenset(n + 1 for n in range(bits.bit_length()) if bits >> n & 1)
    return masks.get(b"SigIgn"), masks.get(b"SigBlk")


def snapshot() -> Signals:
    ignored, blocked = _kernel_sets()
    return Signals(tuple(signal.getsignal(s) for s in WATCHED), ignored, blocked)


_NAMED = frozenset(s.value for s in signal.Signals)


def _name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def _describe(handler: Handler) -> str:
    if handler is None:
        return "a handler not set from Python"
    if isinstance(handler, signal.Handlers):
        return handler.name  # SIG_DFL, SIG_IGN
    if isinstance(handler, int):
        return str(handler)
    return f"{getattr(handler, '__module__', None) or '?'}.{getattr(handler, '__qualname__', repr(handler))}"


def _names(signums: frozenset[int]) -> str:
    return ", ".join(_name(s) for s in sorted(signums)) or "none"


def differences(before: Signals, after: Signals) -> list[str]:
    """What changed from ``before`` to ``after``, one line each, empty if nothing did."""
    said: list[str] = []
    for signum, old, new in zip(WATCHED, before.handlers, after.handlers, strict=True):
        if old != new:
            said.append(f"{_name(signum)}: Python's handler was {_describe(old)}, is {_describe(new)}")
    for what, old_set, new_set in (("ignored", before.ignored, after.ignored),
                                   ("blocked in the main thread", before.blocked, after.blocked)):
        if old_set is None or new_set is None or old_set == new_set:
            continue
        changed = []
        if new_set - old_set:
            changed.append(f"now {what}: {_names(new_set - old_set)}")
        if old_set - new_set:
            changed.append(f"no longer {what}: {_names(old_set - new_set)}")
        said.append(f"kernel: {'; '.join(changed)} (was {what}: {_names(old_set)})")
    return said


def restore(before: Signals) -> None:
    """Put back the handlers and the main thread's mask of ``before``, as far as Python can (a
    handler C code set is not Python's to put back)."""
    for signum, handler in zip(WATCHED, before.handlers, strict=True):
        if handler is not None and signal.getsignal(signum) != handler:
            signal.signal(signum, handler)
    if before.blocked is not None:
        signal.pthread_sigmask(signal.SIG_SETMASK, before.blocked)


_BEFORE = pytest.StashKey[Signals]()
_AT_START = pytest.StashKey[frozenset[int]]()

# ignored by Python itself at its start: a closed pipe is an error, an oversized file too
PYTHONS_OWN = frozenset({signal.SIGPIPE, signal.SIGXFSZ})


def pytest_configure(config: pytest.Config) -> None:
    ignored, _ = _kernel_sets()
    # (a signal without a name is the C library's own, 32 and 33 with glibc: ignored or not, no program's
    # Ctrl-C or termination depends on it, and some environments start every command with them ignored)
    config.stash[_AT_START] = frozenset(s for s in (ignored or frozenset()) - PYTHONS_OWN if s in _NAMED)


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    """Say it when pytest itself started with signals ignored, which no test is to blame for
    and which every program the tests start inherits: a non-interactive shell starts a command
    put in the background with ``&`` ignoring SIGINT (and SIGQUIT), ``nohup`` one ignoring SIGHUP."""
    ignored = config.stash.get(_AT_START, frozenset())
    if ignored:
        terminalreporter.write_line(
            f"signals: this pytest started with {_names(ignored)} ignored (as a shell's background job or "
            "nohup starts a command), and so did every program the tests started; a test that needs one's "
            "default action in a program it starts must give it (tests/loadtest/test_smoke.py's remote "
            "Locust workers get SIGINT's)", yellow=True)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, object, object]:
    item.stash[_BEFORE] = snapshot()
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, object, object]:
    before = item.stash.get(_BEFORE, None)
    try:
        result = yield
    except BaseException as e:  # said with the teardown's own error
        if before is not None and (said := _check(item, before)):
            e.add_note(said)
        raise
    if before is not None and (said := _check(item, before)):
        pytest.fail(said, pytrace=False)
    return result


def _check(item: pytest.Item, before: Signals) -> str:
    """What ``item`` changed (then put back), as the failure says it; empty if nothing."""
    said = differences(before, snapshot())
    if not said:
        return ""
    restore(before)
    return (f"{item.nodeid} left the process's signal handling changed (programs started after it "
            "inherit what the kernel holds):\n  " + "\n  ".join(said))
