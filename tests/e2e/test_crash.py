"""``controlplane serve`` killed (SIGKILL) while clients write, and started again on its data:
every write it answered 2xx is there, at the resourceVersion and with the body it answered;
every write it refused is absent; resourceVersions go on above every one it handed out; a
watch resumed from an answered resourceVersion gets every later write, in order.

What tests/store/test_lmdb.py checks of the store alone, through the whole server."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.test_cli import killed_after, start_serve

NS = "crash"
CONFIGMAPS = f"/api/v1/namespaces/{NS}/configmaps"
WRITERS = 8


@dataclass
class Known:
    """What the clients know of one object: its state as last answered (None: absent), or,
    after a request whose answer never came, either of two states (``doubt``)."""
    state: tuple[str, dict[str, str]] | None = None
    doubt: tuple[dict[str, str] | None, dict[str, str] | None] | None = None


@dataclass
class Writes:
    known: dict[str, Known] = field(default_factory=dict)
    answered: list[tuple[str, int]] = field(default_factory=list)  # (name, resourceVersion) of each 2xx write
    refused: int = 0


async def _writer(http: httpx.AsyncClient, n: int, writes: Writes) -> None:
    """Writes to its own objects until the server goes: each answered write recorded."""
    names = [f"w{n}-{i}" for i in range(3)]
    for name in names:
        writes.known[name] = Known()
    seq = 0
    while True:
        seq += 1
        name = names[seq % len(names)]
        known = writes.known[name]
        data = {"seq": str(seq), "pad": "x" * (seq * 37 % 2000)}
        body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}
        state = known.state
        kind = "create" if state is None else ("update", "merge", "apply", "stale", "delete")[seq % 5]
        try:
            if kind == "create":
                r = await http.post(CONFIGMAPS, json=body)
            elif kind == "update":
                assert state is not None
                r = await http.put(f"{CONFIGMAPS}/{name}", json={**body, "metadata": {
                    "name": name, "resourceVersion": state[0]}})
            elif kind == "stale":  # refused: a resourceVersion not the object's
                assert state is not None
                r = await http.put(f"{CONFIGMAPS}/{name}", json={**body, "metadata": {
                    "name": name, "resourceVersion": str(int(state[0]) - 1)}})
            elif kind == "merge":
                r = await http.patch(f"{CONFIGMAPS}/{name}", content=json.dumps({"data": data}),
                                     headers={"content-type": "application/merge-patch+json"})
            elif kind == "apply":
                r = await http.patch(f"{CONFIGMAPS}/{name}", params={"fieldManager": f"w{n}", "force": "true"},
                                     content=json.dumps(body), headers={"content-type": "application/apply-patch+yaml"})
            else:
                assert state is not None
                r = await http.request("DELETE", f"{CONFIGMAPS}/{name}",
                                       json={"preconditions": {"resourceVersion": state[0]}})
        except (httpx.TransportError, AttributeError) as e:  # killed with the request in flight: either outcome
            # (a connection the kill closed as httpcore set it up, on uvloop, fails inside anyio as an
            # AttributeError, its socket gone: `'NoneType' object has no attribute 'getpeername'`)
            if isinstance(e, AttributeError) and "getpeername" not in str(e):
                raise
            known.doubt = (state[1] if state else None, None if kind == "delete" else data)
            return
        if r.status_code >= 300:
            assert r.status_code == 409 and kind == "stale", r.text
            writes.refused += 1
            continue
        answered = r.json()
        rv = answered["metadata"].get("resourceVersion") if kind != "delete" else None
        if kind == "delete":
            known.state = None
            continue
        assert answered["data"] == data
        known.state = (rv, data)
        writes.answered.append((name, int(rv)))


async def _load_then_kill(url: str, proc: Any, writes: Writes) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=30, limits=httpx.Limits(max_connections=WRITERS)) as http:
        assert (await http.post("/api/v1/namespaces", json={"metadata": {"name": NS}})).status_code == 201
        writers = [asyncio.create_task(_writer(http, n, writes)) for n in range(WRITERS)]
        deadline = time.monotonic() + 30
        while len(writes.answered) < 300:  # under way: writes answered, more in flight
            assert time.monotonic() < deadline and not any(w.done() for w in writers)
            await asyncio.sleep(0.01)
        proc.kill()
        await asyncio.gather(*writers)


async def _watched(url: str, since: int, until: str) -> list[tuple[str, str, int]]:
    """The events of a watch of NS's ConfigMaps from ``since`` up to ``until``'s ADDED."""
    events = []
    async with httpx.AsyncClient(base_url=url, timeout=30) as http, \
            http.stream("GET", CONFIGMAPS, params={"watch": "1", "resourceVersion": str(since)}) as watch:
        async for line in watch.aiter_lines():
            event = json.loads(line)
            assert event["type"] != "ERROR", event
            meta = event["object"]["metadata"]
            events.append((event["type"], meta["name"], int(meta["resourceVersion"])))
            if meta["name"] == until:
                return events
    raise AssertionError("the watch ended")


def test_a_kill_9_under_load_loses_no_answered_write_and_resumed_watches_miss_none(tmp_path: Path) -> None:
    s = start_serve(tmp_path, tls=False)
    writes = Writes()
    with killed_after(s):
        s.wait_ready()
        asyncio.run(_load_then_kill(s.url, s.proc, writes))
        s.proc.wait()
    again = start_serve(tmp_path, run=1, port=s.port, tls=False)
    try:
        again.wait_ready()
        with httpx.Client(base_url=again.url, timeout=30) as http:
            stored = {o["metadata"]["name"]: o for o in http.get(CONFIGMAPS).json()["items"]}
            assert writes.refused and any(k.doubt for k in writes.known.values())
            for name, known in writes.known.items():
                got = stored.get(name)
                if known.doubt is not None:  # its last write may or may not have been kept
                    assert (got["data"] if got else None) in known.doubt, name
                elif known.state is None:
                    assert got is None, name
                else:
                    assert got is not None, name
                    assert (got["metadata"]["resourceVersion"], got["data"]) == known.state, name
            top = max(rv for _, rv in writes.answered)
            after = http.post(CONFIGMAPS, json={"metadata": {"name": "after"}})
            assert after.status_code == 201 and int(after.json()["metadata"]["resourceVersion"]) > top
        # a watch resumed from an answered write sees every answered write after it
        since = writes.answered[len(writes.answered) // 2][1]
        events = asyncio.run(_watched(again.url, since, "after"))
        revisions = [rv for _, _, rv in events]
        assert revisions == sorted(revisions) and min(revisions) > since
        seen = {(name, rv) for _, name, rv in events}
        assert {(name, rv) for name, rv in writes.answered if rv > since} <= seen
    finally:
        again.stop()
