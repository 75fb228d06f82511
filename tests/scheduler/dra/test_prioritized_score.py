"""A claim's ``firstAvailable`` alternatives steer the choice of node, as upstream's
DynamicResources Score does (KEP-4816, ``computeScore``: ``8 - index`` for each alternative
an allocation uses, normalised against the best node, weight 1): a pod that prefers a big
GPU goes where one is free, not to whichever node the other scores pick, taking its last
resort there.

Before, DynamicResources did not score: the pods of the dra-example-driver's
``prioritized-alternatives`` example landed anywhere and got ``gpu/older-gpu`` while
bleeding-edge GPUs stood idle."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from controlplane.client import resource_path
from controlplane.scheduler.plugins.dynamic_resources import subrequest_score

from ..helpers import node, pod
from ..inprocess import running
from .helpers import DRIVER, claim, device, device_class, slice_

R = ("resource.k8s.io", "v1")


def _gpu(name: str, model: str) -> dict[str, Any]:
    return device(name, attributes={"model": {"string": model}})


def _preferring_big(name: str) -> dict[str, Any]:
    body = claim(name)
    body["spec"]["devices"]["requests"] = [{"name": "gpu", "firstAvailable": [
        {"name": "big", "deviceClassName": "gpu",
         "selectors": [{"cel": {"expression": f"device.attributes['{DRIVER}'].model == 'BIG'"}}]},
        {"name": "any", "deviceClassName": "gpu"}]}]
    for k in ("uid", "resourceVersion"):
        del body["metadata"][k]
    return body


def test_the_score_is_upstreams() -> None:
    c = _preferring_big("c")
    assert subrequest_score([c], [{"gpu/big"}]) == 8
    assert subrequest_score([c], [{"gpu/any"}]) == 7
    plain = claim("p")
    assert subrequest_score([plain, c], [{"gpu"}, {"gpu/any"}]) == 7


async def test_pods_go_where_their_preferred_alternative_is_free(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async with running(tmp_path, monkeypatch) as cluster:
        c = cluster.c
        await cluster.nodes(node("n1"), node("n2"), node("n3"))
        await c.create(resource_path(*R, "deviceclasses"), device_class("gpu", f"device.driver == '{DRIVER}'"))
        for n, model in (("n1", "SMALL"), ("n2", "BIG"), ("n3", "SMALL")):
            await c.create(resource_path(*R, "resourceslices"),
                           slice_(f"{n}-gpus", n, [_gpu(f"gpu-{i}", model) for i in range(3)]))
        names = [f"p{i}" for i in range(3)]
        for name in names:
            await c.create(resource_path(*R, "resourceclaims", "default"), _preferring_big(f"{name}-gpu"))
            p = pod(name)
            p["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
            p["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": f"{name}-gpu"}]
            await cluster.pods(p)
            # one at a time: each later pod sees n2 fuller by cpu (LeastAllocated would spread them)
            assert (await cluster.bound(name))[name] == "n2"
        for name in names:
            got = await c.get(resource_path(*R, "resourceclaims", "default", f"{name}-gpu"))
            [result] = got["status"]["allocation"]["devices"]["results"]
            assert (result["request"], result["pool"]) == ("gpu/big", "n2")
