"""``controlplane bench autoscaler``: its exit code says whether the run's invariants held."""

from __future__ import annotations

import json

import pytest

from controlplane import cli


def test_bench_autoscaler_alone_exits_0_once_the_devices_are_there(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["bench", "autoscaler", "--alone", "--pods", "2", "--latency-scale", "0.01"]) == 0
    last = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert last["metric"] == "scale_from_zero_alone_seconds" and last["ok"] is True


def test_bench_autoscaler_alone_exits_1_when_the_devices_never_come(capsys: pytest.CaptureFixture[str]) -> None:
    # the eight-GPU types launch in 6 s at the default scale: past a 0.5 s timeout
    assert cli.main(["bench", "autoscaler", "--alone", "--pods", "2", "--timeout", "0.5"]) == 1
    last = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert last["metric"] == "scale_from_zero_alone_seconds" and last["ok"] is False
