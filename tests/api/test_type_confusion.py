"""Bad input of every shape is a Status error, never a 500: valid objects of many kinds,
mutated at random (a value replaced by one of another type or an absurd one, a field
removed, an unknown field added), then created, replaced or patched (merge, strategic,
JSON, apply). A fixed seed, so a failure names a reproducible body. The same mutations,
run by hand over a socket thousands of times, found the types that stored anything
(registry/corevalidation.py) and a controller that crashed on what one stored."""

from __future__ import annotations

import copy
import random
from collections.abc import Iterator
from typing import Any

from controlplane.client import ApiError, Client

SPEC = {"containers": [{"name": "c", "image": "nginx:1.27", "ports": [{"containerPort": 80}],
                        "resources": {"requests": {"cpu": "100m"}, "limits": {"memory": "128Mi"}}}],
        "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}]}
SELECTOR = {"matchLabels": {"app": "x"}}
TEMPLATE = {"metadata": {"labels": {"app": "x"}}, "spec": SPEC}
# (collection path, a valid object)
SEEDS: list[tuple[str, dict[str, Any]]] = [
    ("/api/v1/namespaces/default/pods", {"apiVersion": "v1", "kind": "Pod", "spec": SPEC}),
    ("/api/v1/namespaces/default/services", {"apiVersion": "v1", "kind": "Service", "spec": {
        "selector": {"app": "x"}, "ports": [{"name": "h", "port": 80, "targetPort": 8080}]}}),
    ("/api/v1/namespaces/default/endpoints", {"apiVersion": "v1", "kind": "Endpoints", "subsets": [
        {"addresses": [{"ip": "10.1.1.1", "hostname": "h"}], "ports": [{"port": 80}]}]}),
    ("/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "spec": {
        "podCIDRs": ["10.9.0.0/24"], "taints": [{"key": "a", "effect": "NoSchedule"}]},
        "status": {"capacity": {"cpu": "4", "pods": "110"}}}),
    ("/api/v1/namespaces/default/limitranges", {"apiVersion": "v1", "kind": "LimitRange", "spec": {"limits": [
        {"type": "Container", "min": {"cpu": "100m"}, "max": {"cpu": "2"}, "maxLimitRequestRatio": {"cpu": "4"}}]}}),
    ("/api/v1/namespaces/default/secrets", {"apiVersion": "v1", "kind": "Secret",
                                            "type": "kubernetes.io/dockerconfigjson",
                                            "stringData": {".dockerconfigjson": '{"auths": {}}'}}),
    ("/apis/apps/v1/namespaces/default/deployments", {"apiVersion": "apps/v1", "kind": "Deployment", "spec": {
        "replicas": 0, "selector": SELECTOR, "template": TEMPLATE}}),
    ("/apis/batch/v1/namespaces/default/jobs", {"apiVersion": "batch/v1", "kind": "Job", "spec": {
        "suspend": True, "template": {"spec": {**SPEC, "restartPolicy": "Never"}}}}),
    ("/apis/policy/v1/namespaces/default/poddisruptionbudgets", {"apiVersion": "policy/v1",
                                                                "kind": "PodDisruptionBudget",
                                                                "spec": {"minAvailable": "50%", "selector": SELECTOR}}),
    ("/apis/discovery.k8s.io/v1/namespaces/default/endpointslices", {
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "addressType": "IPv4",
        "endpoints": [{"addresses": ["10.1.1.2"]}], "ports": [{"name": "h", "port": 80}]}),
    ("/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings", {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
        "subjects": [{"kind": "ServiceAccount", "name": "s"}]}),
    ("/apis/resource.k8s.io/v1/deviceclasses", {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "spec": {
        "selectors": [{"cel": {"expression": "device.driver == 'x.example.com'"}}]}}),
    ("/apis/coordination.k8s.io/v1/namespaces/default/leases", {"apiVersion": "coordination.k8s.io/v1",
                                                               "kind": "Lease",
                                                               "spec": {"holderIdentity": "h",
                                                                        "leaseDurationSeconds": 15}}),
]
PALETTE: list[Any] = [None, 0, -1, 1.5, 2**63, "", "x", "-1", "1e9999", "0.5", "\u0000", "ü☃", [], [None], [1, "a"],
                      {}, {"a": None}, {"": 1}, True, "2026-13-45T99:99:99Z", [{}], {"k": []}, "*", "a" * 300]
ITERATIONS = 600


def _paths(obj: Any, at: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield at
    items = obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, list) else ()
    for key, value in items:
        yield from _paths(value, (*at, key))


def _mutated(obj: dict[str, Any], rnd: random.Random) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    for _ in range(rnd.choice((1, 1, 2, 3))):
        paths = [p for p in _paths(out) if p and p[0] not in ("apiVersion", "kind") and p != ("metadata", "name")]
        if not paths:
            break
        path = rnd.choice(paths)
        parent = out
        for key in path[:-1]:
            parent = parent[key]
        roll = rnd.random()
        if roll < 0.6:
            parent[path[-1]] = copy.deepcopy(rnd.choice(PALETTE))
        elif roll < 0.8:
            del parent[path[-1]]
        elif isinstance(parent, dict):
            parent[f"zz{rnd.randint(0, 9)}"] = copy.deepcopy(rnd.choice(PALETTE))
    return out


async def test_mutated_objects_get_a_status_error_never_a_500(client: Client) -> None:
    rnd = random.Random(20261205)
    answered: dict[int, int] = {}
    wrong: list[str] = []  # answers that are not a 4xx Status
    for i in range(ITERATIONS):
        collection, seed = rnd.choice(SEEDS)
        name = f"fz{i}"
        valid = {**copy.deepcopy(seed), "metadata": {"name": name}}
        body = _mutated(valid, rnd)
        if isinstance(body.get("metadata"), dict):
            body["metadata"]["name"] = name
        how = rnd.choice(("create", "create", "update", "merge", "strategic", "json", "apply"))
        try:
            if how == "create":
                await client.create(collection, body)
            else:
                stored = await client.create(collection, valid)
                url = f"{collection}/{name}"
                if how == "update":
                    if isinstance(body.get("metadata"), dict):
                        body["metadata"]["resourceVersion"] = stored["metadata"]["resourceVersion"]
                    await client.update(url, body)
                elif how == "json":
                    path = rnd.choice([p for p in _paths(stored) if p])
                    await client.request("PATCH", url, [{"op": rnd.choice(("replace", "add", "remove", "test")),
                                                        "path": "/" + "/".join(map(str, path)),
                                                        "value": rnd.choice(PALETTE)}],
                                         "application/json-patch+json")
                elif how == "apply":
                    await client.request("PATCH", url, body, "application/apply-patch+yaml", fieldManager="fz",
                                         force="true")
                else:
                    patch = {k: v for k, v in body.items() if k not in ("apiVersion", "kind", "metadata")}
                    await client.patch(url, patch, patch_type=how)
            answered[200] = answered.get(200, 0) + 1
        except ApiError as e:
            answered[e.code] = answered.get(e.code, 0) + 1
            if not 400 <= e.code < 500 or e.status.get("kind") != "Status" or e.status.get("code") != e.code:
                wrong.append(f"{how} {collection}: {e.code} {e.status}\nbody: {body}")
    assert not wrong, "\n".join(wrong)
    assert answered.get(200, 0) > ITERATIONS // 10 and sum(v for k, v in answered.items() if k != 200) > ITERATIONS // 4
