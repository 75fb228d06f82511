"""What upstream's kubectl command tests (``test/cmd/get.sh``, ``core.sh``, ``create.sh``,
``delete.sh``, ``apply.sh`` and their kin, run against kube-apiserver and
kube-controller-manager) expect back, found answered differently here: the real kubectl
against one ``controlplane serve`` (its controllers and scheduler, no nodes) over a socket."""

from __future__ import annotations

import json
import time
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


def test_a_budget_that_covers_no_pod_says_so_in_its_events(served: Serve) -> None:
    """core.sh creates budgets over ``app=rails`` with no such pods: kube-controller-manager's
    disruption controller records a Normal ``NoPods`` event at each sync, from the source
    ``controllermanager``, which ``kubectl describe pdb`` lists."""
    kubectl(served, "create", "pdb", "lonely", "--selector=app=rails", "--min-available=2")
    deadline = time.monotonic() + 30
    while True:
        events = json.loads(kubectl(served, "get", "events", "--field-selector",
                                    "involvedObject.name=lonely,involvedObject.kind=PodDisruptionBudget", "-o", "json"))
        if events["items"] or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    (event,) = events["items"]
    assert (event["type"], event["reason"], event["message"]) == ("Normal", "NoPods", "No matching pods found")
    assert event["source"] == {"component": "controllermanager"}
    assert event["involvedObject"]["apiVersion"] == "policy/v1"
    described = kubectl(served, "describe", "pdb", "lonely")
    assert "NoPods" in described and "controllermanager  No matching pods found" in described
