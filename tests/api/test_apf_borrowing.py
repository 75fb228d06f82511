"""API Priority and Fairness between levels (api/flowcontrol.py ``adjust``, api/fairqueuing.py
``Integrator``): seat demand measured, current limits moved between each level's bounds as
upstream's borrowing moves them, the exempt level's share; and the mutating work estimator's
seats and the time they are held after the response. Over a real socket at the end."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from controlplane.api.fairqueuing import Integrator
from controlplane.api.flowcontrol import EVENT_LATENCY, FlowControl, allocate
from controlplane.api.flowmatch import request_info
from tests.api.test_apf import ALICE, Slow, bootstrap, call, limited, metric, schema
from tests.test_cli import running, start_serve

Obj = dict[str, Any]
BOB_USER = "bob"


def everything_of(user: str) -> list[Obj]:
    return [{"subjects": [{"kind": "User", "user": {"name": user}}],
             "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"], "namespaces": ["*"],
                                "clusterScope": True}]}]


def exempt_level(shares: int, lendable: int) -> Obj:
    return {"metadata": {"name": "exempt", "uid": "uid-exempt"},
            "spec": {"type": "Exempt", "exempt": {"nominalConcurrencyShares": shares, "lendablePercent": lendable}}}


# -- the pieces ---------------------------------------------------------------------------------
def test_allocation_shares_by_target_within_bounds_as_upstreams() -> None:
    assert allocate(10, [(1, 10, 1), (1, 10, 3)]) == ([2.5, 7.5], 2.5)
    # a bound holds one share; the others share what is left in proportion to their targets
    shares, fair = allocate(20, [(0, 4, 5), (0, 100, 5), (0, 100, 10)])
    assert shares[0] == 4 and math.isclose(shares[1], 16 / 3) and math.isclose(shares[2], 32 / 3)
    assert math.isclose(sum(shares), 20) and math.isclose(fair, 16 / 15)
    # a lower bound above the fair share holds
    shares, _ = allocate(10, [(6, 10, 6), (0, 10, 10)])
    assert shares == [6, 4]
    # no wiggle room: all at their lower (or upper) bounds
    assert allocate(3, [(1, 5, 1), (2, 5, 2)])[0] == [1, 2]
    assert allocate(10, [(1, 5, 1), (2, 5, 2)])[0] == [5, 5]
    assert allocate(0, [(0, 5, 1)]) == ([0.0], 0.0)
    # a zero target counts as upstream's 0.001
    shares, _ = allocate(10, [(0, 100, 0), (0, 100, 1)])
    assert math.isclose(shares[0], 10 * 0.001 / 1.001) and math.isclose(sum(shares), 10)
    with pytest.raises(ValueError, match="lower bounds sum to 4"):
        allocate(3, [(2, 5, 2), (2, 5, 2)])
    with pytest.raises(ValueError, match="upper bounds sum to 4"):
        allocate(5, [(0, 2, 2), (0, 2, 2)])
    with pytest.raises(ValueError, match="below its lower bound"):
        allocate(5, [(2, 5, 1)])


def test_the_integrator_measures_demand_over_time(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [100.0]
    monkeypatch.setattr(time, "monotonic", lambda: clock[0])  # (fairqueuing reads time.monotonic)
    demand = Integrator()
    demand.add(4)
    clock[0] += 0.05
    demand.add(-4)
    clock[0] += 0.05
    stats = demand.reset()
    assert stats.high == 4
    assert stats.duration == pytest.approx(0.1)
    assert stats.average == pytest.approx(2.0)  # 4 for half the period
    assert stats.deviation == pytest.approx(2.0)  # (4 and 0 for half each)
    clock[0] += 0.05
    again = demand.reset()  # a new period, at the present value
    assert again.high == 0 and again.average == 0


def test_limits_are_upstreams_bounds_and_an_idle_server_shares_by_lower_limits() -> None:
    f = FlowControl(600)
    f.configure(*bootstrap())
    bounds = {name: (lv.nominal, lv.lower, lv.upper) for name, lv in f.levels.items()}
    # lower: nominal less round(nominal x lendablePercent); upper: nominal + the server's limit
    # (no borrowingLimitPercent in the bootstrap levels)
    assert bounds == {"exempt": (0, 0, 600), "catch-all": (13, 13, 613), "system": (74, 50, 674),
                      "node-high": (98, 73, 698), "leader-election": (25, 25, 625), "workload-high": (98, 49, 698),
                      "workload-low": (245, 24, 845), "global-default": (49, 24, 649)}
    # idle, every level's target is its lower limit: the nominal seats (602) are shared in proportion
    current = {name: lv.current for name, lv in f.levels.items()}
    lowers = {name: lv.lower for name, lv in f.levels.items() if name != "exempt"}
    assert current["exempt"] == 0
    for name, lower in lowers.items():
        assert current[name] == math.floor(602 * lower / sum(lowers.values()) + 0.5)
        queues = f.levels[name].queues
        assert queues is not None and queues.limit == current[name]
    for name, (nominal, lower, upper) in bounds.items():
        assert metric("apiserver_flowcontrol_nominal_limit_seats", priority_level=name) == nominal
        assert metric("apiserver_flowcontrol_lower_limit_seats", priority_level=name) == lower
        assert metric("apiserver_flowcontrol_upper_limit_seats", priority_level=name) == upper
        assert metric("apiserver_flowcontrol_current_limit_seats", priority_level=name) == current[name]
    # a request's widest at a queuing level: max(1, min(ceil(15% of nominal), nominal/handSize)), at most
    # 10 (leader-election: 25 seats, hands of 4; global-default: 49, hands of 6); 10 elsewhere
    assert {name: lv.max_seats for name, lv in f.levels.items()} == {
        "exempt": 10, "catch-all": 10, "system": 10, "node-high": 10, "leader-election": 4, "workload-high": 10,
        "workload-low": 10, "global-default": 8}


async def until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    """Until ``condition()`` holds (the tasks started have come as far as it says), however
    busy the machine: never a fixed sleep."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.005)


def borrowing_flow(limit: int, levels: list[Obj]) -> FlowControl:
    f = FlowControl(limit)
    f.configure([schema("alices", "busy", 100, everything_of("alice")),
                 schema("bobs", "idle", 101, everything_of(BOB_USER))], levels)
    return f


async def test_a_busy_level_borrows_from_an_idle_one_and_gives_back() -> None:
    # 40 seats: catch-all 5 (lends none), busy 10 (lends none, borrows freely), idle 25 (lends
    # 80%: 20; borrows none)
    f = borrowing_flow(40, [limited("busy", 10, queues=8, hand=2, length=50, borrowing=None),
                            limited("idle", 25, queues=8, hand=2, length=50, lendable=80)])
    busy, idle, catch_all = f.levels["busy"], f.levels["idle"], f.levels["catch-all"]
    assert (busy.nominal, busy.lower, busy.upper) == (10, 10, 50)
    assert (idle.nominal, idle.lower, idle.upper) == (25, 5, 25)
    assert busy.queues is not None and idle.queues is not None
    busy_queues, idle_queues = busy.queues, idle.queues
    alices, bobs = Slow(), Slow()
    bob = ALICE.__class__(BOB_USER, ("system:authenticated",))
    flood = [asyncio.create_task(call(f, alices, ALICE, "GET", "/api/v1/namespaces/a/configmaps/x"))
             for _ in range(30)]
    await until(lambda: alices.running + busy_queues.waiting == 30)
    assert alices.running == busy.current < 30 and busy.queues.waiting == 30 - busy.current
    # the period that saw the flood arrive ends: its smoothed demand (mean plus deviation of a
    # ramp) may fall short of 30 on a slow machine; the next period's is 30 throughout
    f.adjust()
    await asyncio.sleep(0.01)
    f.adjust()
    # busy's demand (30 seats) is its target; idle lends down to its lower limit
    assert busy.high == 30 and busy.smoothed > 20  # (the mean plus the deviation of the period)
    assert idle.current == idle.lower == 5 and catch_all.current == 5
    assert busy.current == 30 and busy.nominal < busy.current <= busy.upper
    assert sum(lv.current for lv in f.levels.values()) == f.nominal_sum == 40
    await until(lambda: alices.running == 30)  # those waiting went as the limit grew
    assert metric("apiserver_flowcontrol_current_limit_seats", priority_level="busy") == 30
    assert metric("apiserver_flowcontrol_demand_seats_high_watermark", priority_level="busy") == 30
    assert metric("apiserver_flowcontrol_target_seats", priority_level="busy") == busy.target > 20
    # idle gets busy: at the next adjustment it takes back its nominal seats (its peak demand),
    # busy goes back to its own
    others = [asyncio.create_task(call(f, bobs, bob, "GET", "/api/v1/namespaces/b/configmaps/x"))
              for _ in range(25)]
    await until(lambda: bobs.running + idle_queues.waiting == 25)
    assert bobs.running == 5
    f.adjust()
    assert idle.current == idle.nominal == 25 and busy.current == busy.nominal == 10 and catch_all.current == 5
    await until(lambda: bobs.running == 25)
    alices.release.set()
    bobs.release.set()
    for done in await asyncio.gather(*flood, *others):
        assert done[0] == 200
    assert busy.queues.seats_in_use == idle.queues.seats_in_use == 0
    assert busy.queues.demand.x == idle.queues.demand.x == 0


async def test_the_exempt_level_lends_what_it_does_not_use_and_takes_what_it_does() -> None:
    # exempt's nominal 10 seats of 40, half lendable; busy lends none; idle lends 80% of 15
    f = borrowing_flow(40, [exempt_level(10, 50), limited("busy", 10, queues=8, hand=2, length=50, borrowing=None),
                            limited("idle", 15, queues=8, hand=2, length=50, lendable=80)])
    exempt, busy, idle, catch_all = (f.levels[n] for n in ("exempt", "busy", "idle", "catch-all"))
    assert (exempt.nominal, exempt.lower, exempt.upper) == (10, 5, 50)
    assert exempt.current == 5  # idle: it keeps its lower limit and lends the rest
    assert busy.current + idle.current + catch_all.current == 35
    app = Slow()
    masters = [asyncio.create_task(call(f, app, None, "GET", "/api/v1/namespaces/a/configmaps/x"))
               for _ in range(20)]  # (no user: the loopback client, system:masters)
    await until(lambda: app.running == 20)  # exempt: never limited
    f.adjust()
    # exempt takes its peak demand; the 20 seats left go to the others, each at least its lower
    # limit, the rest in proportion to their targets (their lower limits: no demand)
    assert exempt.current == 20
    assert (busy.current, idle.current, catch_all.current) == (11, 3, 6)
    more = [asyncio.create_task(call(f, app, None, "GET", "/api/v1/namespaces/a/configmaps/x")) for _ in range(25)]
    await until(lambda: app.running == 45)
    f.adjust()
    # more than the server has: exempt is served all the same, the others kept at their lower limits
    assert exempt.current == 45
    assert (busy.current, idle.current, catch_all.current) == (busy.lower, idle.lower, catch_all.lower) == (10, 3, 5)
    app.release.set()
    await asyncio.gather(*masters, *more)
    assert exempt.exempt_demand.x == 0


async def test_limits_are_adjusted_periodically_and_not_when_idle() -> None:
    f = borrowing_flow(40, [limited("busy", 10, queues=8, hand=2, length=50, borrowing=None),
                            limited("idle", 25, queues=8, hand=2, length=50, lendable=80)])
    busy = f.levels["busy"]
    before = {name: lv.current for name, lv in f.levels.items()}
    task = asyncio.create_task(f.rebalance(every=0.05))
    try:
        await asyncio.sleep(0.12)
        assert {name: lv.current for name, lv in f.levels.items()} == before  # idle: nothing moves
        app = Slow()
        flood = [asyncio.create_task(call(f, app, ALICE, "GET", "/api/v1/namespaces/a/configmaps/x"))
                 for _ in range(30)]
        deadline = time.monotonic() + 2
        while busy.current < 30:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.02)
        app.release.set()
        await asyncio.gather(*flood)
    finally:
        task.cancel()


# -- the mutating work estimator --------------------------------------------------------------------
def test_a_writes_seats_follow_the_watches_it_wakes() -> None:
    watches = {"n": 0}
    f = FlowControl(600, None, lambda info: watches["n"])
    f.configure(*bootstrap())

    def width(method: str, path: str, max_seats: int = 10) -> tuple[int, float]:
        return f.width(request_info(method, path, b""), max_seats)

    assert width("POST", "/api/v1/namespaces/a/configmaps") == (1, 0.0)
    watches["n"] = 9  # fewer than 10: one seat, no latency (upstream's threshold)
    assert width("PUT", "/api/v1/namespaces/a/configmaps/c") == (1, 0.0)
    watches["n"] = 10
    assert width("PATCH", "/api/v1/namespaces/a/configmaps/c") == (1, EVENT_LATENCY)
    watches["n"] = 95
    assert width("DELETE", "/api/v1/namespaces/a/configmaps/c") == (10, EVENT_LATENCY)
    # more than the level's widest: narrower and longer, the same seat-seconds
    watches["n"] = 250
    seats, latency = width("POST", "/api/v1/namespaces/a/configmaps")
    assert seats == 10 and math.isclose(latency, 25 * EVENT_LATENCY / 10)
    seats, latency = width("POST", "/api/v1/namespaces/a/configmaps", max_seats=2)
    assert seats == 2 and math.isclose(latency, 25 * EVENT_LATENCY / 2)
    # reads, deletecollection and non-resource requests: one seat
    assert width("GET", "/api/v1/namespaces/a/configmaps/c") == (1, 0.0)
    assert width("DELETE", "/api/v1/namespaces/a/configmaps") == (1, 0.0)
    assert width("POST", "/logs") == (1, 0.0)


async def test_a_writes_seats_are_held_after_its_response() -> None:
    # a Reject level of 2 seats; a write waking 2000 watches is 10 seats (the whole level) held 0.1 s
    # past its response: 200 seats x 5 ms of events, over 10 seats
    f = FlowControl(2, None, lambda info: 2000)
    schemas, levels = bootstrap()
    f.configure([*schemas, schema("alices", "tiny", 100, everything_of("alice"))],
                [*levels, limited("tiny", 245, borrowing=0)])
    tiny = f.levels["tiny"]
    assert tiny.queues is not None and tiny.current == 1

    async def ok(scope: Obj, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 201, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    began = time.monotonic()
    code, _, _ = await call(f, ok, ALICE, "POST", "/api/v1/namespaces/a/configmaps")
    assert code == 201 and time.monotonic() - began < 0.05  # the response is not held back
    assert tiny.queues.seats_in_use == 10
    assert metric("apiserver_flowcontrol_current_executing_seats", flow_schema="alices", priority_level="tiny") == 10
    assert metric("apiserver_flowcontrol_current_executing_requests", flow_schema="alices",
                  priority_level="tiny") == 0
    code, _, _ = await call(f, ok, ALICE, "POST", "/api/v1/namespaces/a/configmaps")
    assert code == 429  # the seats are still the first write's
    await asyncio.sleep(0.15)
    assert tiny.queues.seats_in_use == 0
    code, _, _ = await call(f, ok, ALICE, "POST", "/api/v1/namespaces/a/configmaps")
    assert code == 201


# -- over a socket ------------------------------------------------------------------------------------
def test_borrowing_and_write_seats_over_a_socket(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.csv"
    tokens.write_text('admin-token,admin,1,"system:masters"\nalice-token,alice,2,"team-a"\n')
    with running(start_serve(tmp_path, tls=False, extra=("--token-auth-file", str(tokens)))) as served, \
            httpx.Client(base_url=served.url, headers={"Authorization": "Bearer admin-token"}) as admin:
        text = admin.get("/metrics").text

        def gauge(name: str, level: str) -> float:
            prefix = f'apiserver_flowcontrol_{name}{{priority_level="{level}"}} '
            line = next(ln for ln in text.splitlines() if ln.startswith(prefix))
            return float(line[len(prefix):])

        # idle: leader-election (lends none) has more than its nominal 25 seats, workload-low
        # (lends 90%) less than its 245, each within its bounds
        assert gauge("nominal_limit_seats", "leader-election") == 25
        assert gauge("current_limit_seats", "leader-election") > 25
        assert gauge("lower_limit_seats", "workload-low") <= gauge("current_limit_seats", "workload-low") < 245
        assert gauge("upper_limit_seats", "workload-low") == 845
        for level in ("catch-all", "system", "node-high", "leader-election", "workload-high", "workload-low",
                      "global-default"):
            assert gauge("lower_limit_seats", level) <= gauge("current_limit_seats", level) <= \
                gauge("upper_limit_seats", level)
        assert "apiserver_flowcontrol_demand_seats_smoothed" in text
        assert "apiserver_flowcontrol_seat_fair_frac" in text
        # a write's seats by the watches it wakes: alice (global-default) creates ConfigMaps in a
        # namespace the admin watches 25 times: 3 seats each
        with httpx.Client(base_url=served.url, headers={"Authorization": "Bearer alice-token"}) as alice:
            streams = [admin.stream("GET", "/api/v1/namespaces/default/configmaps",
                                    params={"watch": "true", "timeoutSeconds": "30"}) for _ in range(25)]
            opened = [s.__enter__() for s in streams]
            try:
                assert all(r.status_code == 200 for r in opened)
                made = alice.post("/api/v1/namespaces/default/configmaps",
                                  json={"metadata": {"name": "c1"}, "data": {"a": "b"}})
                assert made.status_code in (201, 403), made.text  # (RBAC may refuse alice: seats were estimated first)
            finally:
                for s in streams:
                    s.__exit__(None, None, None)
            text = admin.get("/metrics").text
            line = next(ln for ln in text.splitlines() if ln.startswith(
                'apiserver_flowcontrol_work_estimated_seats_sum{flow_schema="global-default",'
                'priority_level="global-default"}'))
            assert float(line.rsplit(" ", 1)[1]) >= 3
