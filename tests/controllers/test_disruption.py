"""PodDisruptionBudgets: the disruption controller's status (controllers/disruption.py) and the
eviction check that charges it (api/rest.py), inside a server with its scheduler and four
simulated nodes."""

from __future__ import annotations

import datetime
from types import SimpleNamespace
from typing import Any, cast

import pytest

from controlplane.client import ApiError, Client
from controlplane.controllers.disruption import DisruptionController
from controlplane.registry.disruption import BadBudget, budget, selector_matches
from tests.controllers.helpers import until
from tests.controllers.test_workloads import DEPLOYMENTS, deployment, rolled_out

PDBS = "/apis/policy/v1/namespaces/default/poddisruptionbudgets"
PODS = "/api/v1/namespaces/default/pods"


def pdb(name: str, app: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": name},
            "spec": {"selector": {"matchLabels": {"app": app}}, **spec}}


def ready_pod(name: str, ready: bool = True) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default", "labels": {"app": "x"}},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": str(ready)}]}}


def test_budget_arithmetic() -> None:
    pods = [ready_pod("a"), ready_pod("b"), ready_pod("c", ready=False)]
    assert budget(pdb("p", "x", minAvailable=1), pods) == {
        "expectedPods": 3, "currentHealthy": 2, "desiredHealthy": 1, "disruptionsAllowed": 1}
    assert budget(pdb("p", "x", minAvailable="50%"), pods)["desiredHealthy"] == 2  # rounded up
    assert budget(pdb("p", "x", maxUnavailable=1), pods)["disruptionsAllowed"] == 0  # one is down already
    assert budget(pdb("p", "x", maxUnavailable="100%"), pods)["disruptionsAllowed"] == 2
    assert not selector_matches({}, {"app": "x"}) and selector_matches(
        {"matchExpressions": [{"key": "app", "operator": "In", "values": ["x"]}]}, {"app": "x"})


def test_a_bound_no_count_can_be_read_from_is_a_bad_budget() -> None:
    pods = [ready_pod("a")]
    for bound, why in (("1e9999", "invalid type: string is not a percentage"),
                       ("1e9999%", 'invalid value "1e9999%": strconv.Atoi: parsing "1e9999": invalid syntax')):
        with pytest.raises(BadBudget) as e:
            budget(pdb("p", "x", minAvailable=bound), pods)
        assert str(e.value) == f"invalid value for IntOrString: {why}"
    huge = "9" * 400 + "%"  # more than a float holds: counted in integers
    assert budget(pdb("p", "x", maxUnavailable=huge), pods)["desiredHealthy"] == 0


class _Recorder:
    """What the controller's sync asks of a client: the informers' caches, and its patches, kept."""

    def __init__(self) -> None:
        self.patches: list[dict[str, Any]] = []

    def informer(self, path: str, **handlers: Any) -> SimpleNamespace:
        return SimpleNamespace(items={})

    async def patch(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        self.patches.append(body)
        return {}


async def test_a_budget_stored_before_validation_fails_safe() -> None:
    """Upstream's failSafe: no disruption allowed, the condition says why; the controller goes
    on (it raised ValueError on every sync of such a budget, a crash loop)."""
    recorder = _Recorder()
    controller = DisruptionController(cast(Client, recorder))
    bad = {**pdb("old", "x", minAvailable="1e9999"), "metadata": {"name": "old", "namespace": "default",
                                                                   "resourceVersion": "7"},
           "status": {"disruptionsAllowed": 1, "observedGeneration": 1}}
    controller.budgets.items["default/old"] = bad
    await controller.sync("default/old")
    [body] = recorder.patches
    [condition] = body["status"]["conditions"]
    assert body["status"]["disruptionsAllowed"] == 0 and condition["lastTransitionTime"]
    assert (condition["type"], condition["status"], condition["reason"], condition["message"]) == (
        "DisruptionAllowed", "False", "SyncFailed",
        "invalid value for IntOrString: invalid type: string is not a percentage")
    bad["status"] = {**bad["status"], **body["status"]}
    await controller.sync("default/old")
    assert len(recorder.patches) == 1  # nothing new to say


async def test_an_eviction_whose_deletion_never_comes_stops_holding_in_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """A recorded eviction whose pod is never deleted holds for DeletionTimeout, then no longer:
    nothing else happens to the budget then, so the controller brings it back itself at that
    time (upstream's enqueuePdbForRecheck), and the disruption it held is allowed again."""
    from controlplane.controllers import disruption

    monkeypatch.setattr(disruption, "DELETION_TIMEOUT", 1.0)
    recorder = _Recorder()
    controller = DisruptionController(cast(Client, recorder))
    evicted = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    controller.budgets.items["default/b"] = {
        **pdb("b", "x", minAvailable=1), "metadata": {"name": "b", "namespace": "default", "resourceVersion": "7"},
        "status": {"disruptedPods": {"p1": evicted}}}
    controller._covered["default/b"] = {"default/p1": ready_pod("p1"), "default/p2": ready_pod("p2")}
    await controller.sync("default/b")
    assert recorder.patches[-1]["status"]["disruptionsAllowed"] == 0  # p1 counts as disrupted
    assert controller.queue.empty()
    await until(lambda: _queued(controller), timeout=5)
    assert await controller.queue.get() == "default/b"
    await controller.sync("default/b")
    status = recorder.patches[-1]["status"]
    assert status["disruptionsAllowed"] == 1 and status["disruptedPods"] == {"p1": None}


async def _queued(controller: DisruptionController) -> bool:
    return not controller.queue.empty()


async def status_of(c: Client, name: str) -> dict[str, Any]:
    got: dict[str, Any] = (await c.get(f"{PDBS}/{name}")).get("status") or {}
    return got


async def evict(c: Client, pod: str) -> None:
    await c.create(f"{PODS}/{pod}/eviction", {"apiVersion": "policy/v1", "kind": "Eviction",
                                             "metadata": {"name": pod, "namespace": "default"}})


async def test_evictions_stay_within_the_budget(client: Client) -> None:
    c = client
    await c.create(DEPLOYMENTS, deployment("web", 3))
    await until(lambda: rolled_out(c, "web"))
    await c.create(PDBS, pdb("web", "web", minAvailable=2))

    async def counted() -> bool:
        s = await status_of(c, "web")
        return (s.get("currentHealthy"), s.get("desiredHealthy"), s.get("disruptionsAllowed"),
                s.get("observedGeneration")) == (3, 2, 1, 1)

    await until(counted)
    pods = sorted(p["metadata"]["name"] for p in (await c.list(PODS, labelSelector="app=web"))["items"])
    await evict(c, pods[0])  # the one disruption allowed
    with pytest.raises(ApiError) as e:
        await evict(c, pods[1])
    assert (e.value.code, e.value.reason) == (429, "TooManyRequests")
    assert "disruption budget" in e.value.message
    assert (e.value.status.get("details") or {}).get("causes", [{}])[0].get("reason") == "DisruptionBudget"

    async def recovered() -> bool:  # the Deployment replaces the pod; the budget allows one again
        s = await status_of(c, "web")
        return s.get("disruptionsAllowed") == 1 and not s.get("disruptedPods")

    await until(recovered)
    await evict(c, pods[1])


async def test_pods_no_budget_covers_are_evicted_freely(client: Client) -> None:
    c = client
    await c.create(DEPLOYMENTS, deployment("free", 2))
    await until(lambda: rolled_out(c, "free"))
    await c.create(PDBS, pdb("other", "someone-else", minAvailable=5))
    for p in (await c.list(PODS, labelSelector="app=free"))["items"]:
        await evict(c, p["metadata"]["name"])
