"""What upstream's kubectl command tests (``test/cmd/get.sh``, ``core.sh``, ``create.sh``,
``delete.sh``, ``apply.sh`` and their kin, run against kube-apiserver and
kube-controller-manager) expect back, found answered differently here: the real kubectl
against one ``controlplane serve`` (its controllers and scheduler, no nodes) over a socket."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.e2e.test_kubectl import kubectl
from tests.e2e.test_kubectl_sweep import failing
from tests.test_cli import Serve, running, start_serve


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    with running(start_serve(tmp_path_factory.mktemp("testcmd1"), scheduler=True)) as s:
        yield s


def test_a_path_nothing_serves_is_answered_in_go_restfuls_words(served: Serve) -> None:
    """get.sh: ``kubectl get pod valid-pod --subresource=scale``. kube-apiserver answers a path
    under a served group version that no route takes as go-restful does, through
    ``NewGenericServerResponse``: the bare message, no path, details present but empty; a
    method no route takes likewise."""
    kubectl(served, "create", "configmap", "routed")
    err = failing(served, "get", "configmap", "routed", "--subresource=scale")
    assert err.strip() == "Error from server (NotFound): the server could not find the requested resource"
    err = failing(served, "get", "--raw", "/apis/apps/v1/nothing")
    assert err.strip() == "Error from server (NotFound): the server could not find the requested resource"
    err = failing(served, "create", "--raw", "/api/v1/namespaces/default/configmaps/routed", "-f", "-", stdin="{}")
    assert err.strip() == ("Error from server (MethodNotAllowed): the server does not allow this method on the "
                           "requested resource")
