"""The resourceclaim controller's pieces that need no server (the flows run in test_e2e.py)."""

from __future__ import annotations

import re

from controlplane.scheduler.dra.claims import _pod_done, generated_name


def test_generated_names_are_upstreams() -> None:
    name = generated_name("trainer", "gpu")
    assert re.fullmatch(r"trainer-gpu-[bcdfghjklmnpqrstvwxz2456789]{5}", name)
    long = generated_name("p" * 80, "claim")
    assert len(long) == 63 and long[57] == "-"


def test_pod_done() -> None:
    assert _pod_done({"status": {"phase": "Succeeded"}}) and _pod_done({"status": {"phase": "Failed"}})
    assert not _pod_done({"status": {"phase": "Running"}, "spec": {"nodeName": "n"}})
    # Deleted before it was scheduled: it will never run.
    assert _pod_done({"metadata": {"deletionTimestamp": "x"}, "spec": {}})
    assert not _pod_done({"metadata": {"deletionTimestamp": "x"}, "spec": {"nodeName": "n"}})
