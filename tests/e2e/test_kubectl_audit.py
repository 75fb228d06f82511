"""Everyday kubectl workflows that once differed from a real cluster, through the real kubectl
over the server's socket."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

from tests.e2e.test_kubectl import KUBECTL
from tests.e2e.test_kubectl_openapi import ok
from tests.test_cli import Serve


def edit(served: Serve, tmp: Path, sed: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``kubectl edit`` with a ``KUBE_EDITOR`` that edits the file with ``sed``; kubectl keeps
    a refused edit in ``tmp`` (its ``TMPDIR``)."""
    script = tmp / "editor.sh"
    script.write_text(f"#!/bin/sh\nsed -i '{sed}' \"$1\"\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    env = dict(os.environ, KUBECONFIG=str(served.kubeconfig), HOME=str(served.state), KUBE_EDITOR=str(script),
               TMPDIR=str(tmp))
    return subprocess.run([KUBECTL, "edit", *args], capture_output=True, text=True, env=env, timeout=60)


def test_edit_adding_an_unknown_field_names_the_patch_as_go_prints_it(served: Serve, tmp_path: Path) -> None:
    ok(served, "create", "configmap", "edited", "--from-literal=x=1")
    r = edit(served, tmp_path, r"s/^  name: edited$/  name: edited\n  foo: bar/", "configmap", "edited")
    assert r.returncode == 1 and 'error: configmaps "edited" is invalid' in r.stderr
    # upstream's strategic merge patch handler names the patch's own map (%+v), not the patched object
    # (kubectl reopens the editor with the errors on top, then keeps the file once it gives up)
    kept = "".join(p.read_text() for p in tmp_path.glob("kubectl-edit-*.yaml"))
    assert ('# * patch: Invalid value: "map[metadata:map[foo:bar]]": strict decoding error: '
            'unknown field "metadata.foo"') in kept
    ok_edit = edit(served, tmp_path, 's/x: "1"/x: "2"/', "configmap", "edited")
    assert ok_edit.returncode == 0, ok_edit.stderr
    assert ok(served, "get", "configmap", "edited", "-o", "jsonpath={.data.x}").stdout == "2"
