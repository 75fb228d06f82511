"""A pod's status write checked as upstream's ``ValidatePodStatusUpdate`` checks it, over a real
socket: custom condition types, the nominated node, the QoS class fixed at create, containers
that may not run again, resource claim statuses naming the pod's claims."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.api.test_validation_gaps import causes_of
from tests.front_socket import front_on_socket

PODS = "/api/v1/namespaces/default/pods"
MERGE = {"Content-Type": "application/merge-patch+json"}
DNS_HINT = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
            "start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
            r"'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")


@pytest.fixture
async def http(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    async with front_on_socket(tmp_path) as (port, _), \
            httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
        yield client


async def create(http: httpx.AsyncClient, name: str, **spec: Any) -> None:
    r = await http.post(PODS, json={"metadata": {"name": name}, "spec": {
        "containers": [{"name": "c", "image": "nginx"}], **spec}})
    assert r.status_code == 201, r.text


async def status(http: httpx.AsyncClient, name: str, value: dict[str, Any]) -> httpx.Response:
    return await http.patch(f"{PODS}/{name}/status", json={"status": value}, headers=MERGE)


def terminated(code: int) -> dict[str, Any]:
    return {"name": "c", "image": "nginx", "imageID": "", "ready": False, "restartCount": 0,
            "state": {"terminated": {"exitCode": code}}}


def running() -> dict[str, Any]:
    return {"name": "c", "image": "nginx", "imageID": "", "ready": True, "restartCount": 1, "state": {"running": {}}}


async def test_a_status_write_is_checked_as_upstreams(http: httpx.AsyncClient) -> None:
    await create(http, "p")
    r = await status(http, "p", {"qosClass": "Guaranteed"})
    assert causes_of(r) == ['status.qosClass: Invalid value: "Guaranteed": field is immutable']
    r = await status(http, "p", {"nominatedNodeName": "Node_1"})
    assert causes_of(r) == [f'status.nominatedNodeName: Invalid value: "Node_1": {DNS_HINT}']
    r = await status(http, "p", {"conditions": [{"type": "Ready", "status": "True"},
                                                {"type": "example.com/not valid", "status": "True"}]})
    found = causes_of(r)  # (upstream's path, under metadata, and its field name, Type)
    assert len(found) == 1 and found[0].startswith(
        'metadata.conditions[1].Type: Invalid value: "example.com/not valid": name part must consist of'), found
    r = await status(http, "p", {"resourceClaimStatuses": [{"name": "gpu"}]})
    assert causes_of(r) == ["status.resourceClaimStatuses[0].name: Invalid value: \"gpu\": "
                            "must match the name of an entry in `spec.resourceClaims`"]
    # what is valid is taken: a custom condition of a qualified name, a node's name, the class kept
    r = await status(http, "p", {"qosClass": "BestEffort", "nominatedNodeName": "node-1",
                                 "conditions": [{"type": "example.com/Warm", "status": "True"}]})
    assert r.status_code == 200, r.text


async def test_a_container_terminated_for_good_stays_terminated(http: httpx.AsyncClient) -> None:
    for policy in ("Never", "OnFailure", "Always"):
        name = policy.lower()
        await create(http, name, restartPolicy=policy)
        r = await status(http, name, {"containerStatuses": [terminated(1)]})
        assert r.status_code == 200, r.text
        r = await status(http, name, {"containerStatuses": [running()]})
        if policy == "Never":  # a failure is final when the pod never restarts; otherwise it is retried
            assert causes_of(r) == ["status.containerStatuses[0].state: Forbidden: "
                                    "may not be transitioned to non-terminated state"]
            continue
        assert r.status_code == 200, r.text
        r = await status(http, name, {"containerStatuses": [terminated(0)]})
        assert r.status_code == 200, r.text
        r = await status(http, name, {"containerStatuses": [running()]})
        if policy == "OnFailure":  # a success is final but under Always
            assert causes_of(r) == ["status.containerStatuses[0].state: Forbidden: "
                                    "may not be transitioned to non-terminated state"]
        else:
            assert r.status_code == 200, r.text
    # a sidecar (an init container that restarts) may run again, a plain init container not
    await create(http, "init", restartPolicy="Never", initContainers=[
        {"name": "setup", "image": "busybox"}, {"name": "proxy", "image": "envoy", "restartPolicy": "Always"}])
    done = [{**terminated(0), "name": "setup"}, {**terminated(0), "name": "proxy"}]
    r = await status(http, "init", {"initContainerStatuses": done})
    assert r.status_code == 200, r.text
    r = await status(http, "init", {"initContainerStatuses": [{**running(), "name": "setup"},
                                                              {**running(), "name": "proxy"}]})
    assert causes_of(r) == ["status.initContainerStatuses[0].state: Forbidden: "
                            "may not be transitioned to non-terminated state"]


async def test_a_containers_reported_user_is_its_pods_os(http: httpx.AsyncClient) -> None:
    # validateContainerStatusUsers (KEP-3619): a Windows pod's containers report no Linux user; a
    # Linux pod's (spec.os linux or none) ids in range; upstream's path leaves "user" out
    await create(http, "win", os={"name": "windows"})
    user = {"linux": {"uid": 0, "gid": 0}}
    r = await status(http, "win", {"containerStatuses": [{**running(), "user": user}],
                                   "ephemeralContainerStatuses": [{**running(), "name": "d", "user": {}}]})
    assert causes_of(r) == ["status.containerStatuses[0].linux: Forbidden: cannot be set for a windows pod"]
    await create(http, "lin")
    bad = {"linux": {"uid": -1, "gid": 2147483648, "supplementalGroups": [1, -2]}}
    r = await status(http, "lin", {"initContainerStatuses": [{**running(), "name": "i", "user": bad}]})
    assert causes_of(r) == [
        "status.initContainerStatuses[0].linux.uid: Invalid value: -1: must be between 0 and 2147483647, inclusive",
        "status.initContainerStatuses[0].linux.gid: Invalid value: 2147483648: must be between 0 and 2147483647, "
        "inclusive",
        "status.initContainerStatuses[0].linux.supplementalGroups[1]: Invalid value: -2: must be between 0 and "
        "2147483647, inclusive"]
    r = await status(http, "lin", {"containerStatuses": [{**running(), "user": {
        "linux": {"uid": 1000, "gid": 1000, "supplementalGroups": [0, 2147483647]}}}]})
    assert r.status_code == 200, r.text
    assert r.json()["status"]["containerStatuses"][0]["user"]["linux"]["uid"] == 1000


async def test_a_claim_status_names_a_valid_resource_claim(http: httpx.AsyncClient) -> None:
    # validatePodResourceClaimStatuses: resourceClaimName, when set, is a DNS subdomain (reported
    # at the status's name, as upstream does)
    await create(http, "p", resourceClaims=[{"name": "gpu", "resourceClaimTemplateName": "t"}])
    r = await status(http, "p", {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "Bad_Claim"}]})
    assert causes_of(r) == [f'status.resourceClaimStatuses[0].name: Invalid value: "Bad_Claim": {DNS_HINT}']
    r = await status(http, "p", {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "p-gpu-x1"}]})
    assert r.status_code == 200, r.text
    assert r.json()["status"]["resourceClaimStatuses"] == [{"name": "gpu", "resourceClaimName": "p-gpu-x1"}]


async def test_allocated_resources_status_names_the_containers_resources(http: httpx.AsyncClient) -> None:
    # validateContainerStatusAllocatedResourcesStatus (ResourceHealthStatus): each entry one of the
    # container's requests or claims, its resources' health known and their IDs unique; none for an
    # ephemeral container (validateContainerStatusNoAllocatedResourcesStatus)
    await create(http, "p", resourceClaims=[{"name": "gpu", "resourceClaimTemplateName": "t"}], containers=[
        {"name": "c", "image": "nginx", "resources": {"requests": {"example.com/dev": "1"},
                                                      "limits": {"example.com/dev": "1"},
                                                      "claims": [{"name": "gpu", "request": "one"}]}}])
    healthy = [{"resourceID": "a", "health": "Healthy"}]
    c = {**running(), "allocatedResourcesStatus": [
        {"name": "example.com/dev", "resources": healthy},
        {"name": "claim:gpu/one", "resources": healthy},
        {"name": "claim:gpu", "resources": healthy},
        {"name": "cpu", "resources": [{"resourceID": "a", "health": "Healthy"}, {"resourceID": "a", "health": "Sick"},
                                      {"resourceID": "b"}]}]}
    r = await status(http, "p", {"containerStatuses": [c]})
    at = "status.containerStatuses[0].allocatedResourcesStatus"
    assert causes_of(r) == [
        f'{at}[2].name: Invalid value: "claim:gpu": must match one of the container\'s resource claims in a format '
        "'claim:<claimName>/<request>' or 'claim:<claimName>' if request is empty",
        f'{at}[3].name: Invalid value: "cpu": must match one of the container\'s resource requests',
        f'{at}[3].resources[1].health: Unsupported value: "Sick": supported values: "Healthy", "Unhealthy", "Unknown"',
        f'{at}[3].resources[1].resourceID: Duplicate value: "a"',
        f'{at}[3].resources[2].health: Unsupported value: "": supported values: "Healthy", "Unhealthy", "Unknown"']
    # a status of no container of the spec: only its resources are checked
    other = {**running(), "name": "gone", "allocatedResourcesStatus": [{"name": "cpu", "resources": healthy}]}
    ephemeral = {**running(), "name": "dbg", "allocatedResourcesStatus": [{"name": "cpu", "resources": healthy}]}
    r = await status(http, "p", {"containerStatuses": [other], "ephemeralContainerStatuses": [ephemeral]})
    assert causes_of(r) == ["status.ephemeralContainerStatuses[0].allocatedResourcesStatus: Forbidden: "
                            "cannot be set for a container status"]
    c["allocatedResourcesStatus"] = c["allocatedResourcesStatus"][:2]
    r = await status(http, "p", {"containerStatuses": [c]})
    assert r.status_code == 200, r.text
