"""``/readyz`` waits for the CustomResourceDefinitions the components install (Karpenter's
with ``--autoscaler``, KWOK's Stage with ``--enable-crds Stage``): a script may write a
NodePool or a Stage the moment the server says it is ready."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.test_cli import running, start_serve


@pytest.mark.parametrize("where", ["in-process", "components-process"])
def test_ready_means_the_components_crds_are_served(tmp_path: Path, where: str) -> None:
    extra = ("--autoscaler", "--enable-crds", "Stage",
             *(("--components-process",) if where == "components-process" else ()))
    with running(start_serve(tmp_path, tls=False, extra=extra)) as s:
        # the first answer after /readyz said ok: no wait, no retry
        assert httpx.get(f"{s.url}/apis/karpenter.sh/v1/nodepools").status_code == 200
        assert httpx.get(f"{s.url}/apis/karpenter.sh/v1/nodeclaims").status_code == 200
        assert httpx.get(f"{s.url}/apis/kwok.x-k8s.io/v1alpha1/stages").status_code == 200
        verbose = httpx.get(f"{s.url}/readyz?verbose").text
        assert "[+]poststarthook/controlplane-component-crds ok" in verbose.splitlines()
        assert httpx.get(f"{s.url}/readyz/poststarthook/controlplane-component-crds").text == "ok"


def test_without_such_components_the_check_passes_at_once(tmp_path: Path) -> None:
    with running(start_serve(tmp_path, tls=False)) as s:
        assert "[+]poststarthook/controlplane-component-crds ok" in httpx.get(f"{s.url}/readyz?verbose").text
        assert httpx.get(f"{s.url}/apis/karpenter.sh/v1/nodepools").status_code == 404
