"""The guard of ``tests/signalguard.py``, in a pytest of its own: a test that leaves a signal
ignored, handled or blocked fails, named with the signal and its handling before and after;
the tests after it run with the process's handling as it was; one that puts back what it
changed passes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from tests import signalguard

ROOT = Path(__file__).resolve().parents[1]

TESTS = '''
import signal

# as Python sets them, whatever this pytest inherited (a background shell's job ignores SIGINT)
signal.signal(signal.SIGINT, signal.default_int_handler)
signal.signal(signal.SIGTERM, signal.SIG_DFL)

def test_ignores_sigint():
    signal.signal(signal.SIGINT, signal.SIG_IGN)

def test_then_sigint_is_python_s_again():
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler

def test_handles_sigterm():
    signal.signal(signal.SIGTERM, lambda signum, frame: None)

def test_blocks_sigusr1():
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})

def test_then_nothing_is_blocked():
    assert signal.pthread_sigmask(signal.SIG_BLOCK, set()) == set()

def test_ignores_sigusr2_and_puts_it_back():
    before = signal.signal(signal.SIGUSR2, signal.SIG_IGN)
    signal.signal(signal.SIGUSR2, before)
'''


def _as_a_terminal_starts(sigint: signal.Handlers = signal.SIG_DFL) -> None:
    """The child's SIGINT and SIGQUIT as a terminal's shell leaves them (or SIGINT as given),
    whatever this pytest inherited: ``make test &`` from a script starts every program with
    both ignored, and the expected words name what the child started with."""
    signal.signal(signal.SIGQUIT, signal.SIG_DFL)
    signal.signal(signal.SIGINT, sigint)


def test_a_test_that_changes_signal_handling_fails(tmp_path: Path) -> None:
    (tmp_path / "test_signals.py").write_text(TESTS)
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "tests.signalguard", "-p", "no:cacheprovider",
                          "-rA", "test_signals.py"], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}, preexec_fn=_as_a_terminal_starts)
    out = run.stdout
    assert run.returncode == 1, out + run.stderr
    assert "6 passed, 3 errors" in out, out
    assert ("test_signals.py::test_ignores_sigint left the process's signal handling changed" in out
            and "SIGINT: Python's handler was _signal.default_int_handler, is SIG_IGN" in out
            and "kernel: now ignored: SIGINT (was ignored: SIGPIPE, " in out), out
    assert "SIGTERM: Python's handler was SIG_DFL, is test_signals.test_handles_sigterm.<locals>.<lambda>" in out, out
    assert "kernel: now blocked in the main thread: SIGUSR1 (was blocked in the main thread: none)" in out, out
    for passed in ("test_then_sigint_is_python_s_again", "test_then_nothing_is_blocked",
                   "test_ignores_sigusr2_and_puts_it_back"):
        assert f"PASSED test_signals.py::{passed}" in out, out


def test_a_pytest_started_with_sigint_ignored_says_so(tmp_path: Path) -> None:
    (tmp_path / "test_nothing.py").write_text("def test_nothing():\n    pass\n")
    said = {}
    for disposition in (signal.SIG_IGN, signal.SIG_DFL):
        def start(disposition: signal.Handlers = disposition) -> None:
            _as_a_terminal_starts(disposition)

        run = subprocess.run([sys.executable, "-m", "pytest", "-p", "tests.signalguard", "-p", "no:cacheprovider",
                              "-q", "test_nothing.py"], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                             env={**os.environ, "PYTHONPATH": str(ROOT)}, preexec_fn=start)
        assert run.returncode == 0, run.stdout + run.stderr
        said[disposition] = run.stdout
    assert "signals: this pytest started with SIGINT ignored (as a shell's background job" in said[signal.SIG_IGN]
    assert "SIGINT ignored" not in said[signal.SIG_DFL], said[signal.SIG_DFL]


def test_differences_and_restore_in_this_process() -> None:
    """What the kernel holds for signals Python's handlers are not read for: SIGUSR2 ignored,
    SIGUSR1 blocked (neither used by the tests' processes)."""
    before = signalguard.snapshot()
    assert signalguard.differences(before, signalguard.snapshot()) == []
    assert before.ignored is not None and before.blocked is not None  # Linux: /proc tells
    handler = signal.signal(signal.SIGUSR2, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
    try:
        assert signalguard.differences(before, signalguard.snapshot()) == [
            f"kernel: now ignored: SIGUSR2 (was ignored: {_names(before.ignored)})",
            f"kernel: now blocked in the main thread: SIGUSR1 (was blocked in the main thread: "
            f"{_names(before.blocked)})"]
    finally:
        signalguard.restore(before)
        signal.signal(signal.SIGUSR2, handler)  # not one restore puts back: only the kernel's view was read
    assert signalguard.differences(before, signalguard.snapshot()) == []


def _names(signums: frozenset[int]) -> str:
    return signalguard._names(signums)  # (an unnamed one, the C library's 32 or 33, as "signal 32")
