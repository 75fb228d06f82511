"""The structural fuzzer's committed form, over a real socket: a valid object of each of many
kinds, then one subtree replaced by a value of another shape (null, huge integers, floats,
empty and long strings, empty and nested lists and maps), an element repeated or a key
dropped, sent as a create, merge patch, strategic merge patch, update, JSON patch, strategic
merge patch directive, server-side apply and status write, with a fixed seed. Each answer is
a 2xx or a 4xx Status (no 5xx, no hang); after each write the object still reads and lists,
and the object stored is taken by its own PUT as read (else a client's Update or ``kubectl
replace`` of it would fail for ever). The bugs it found are tested on their own elsewhere
(tests/e2e/test_empty_lists.py, tests/e2e/test_server_side_apply.py,
tests/api/test_bad_input_http.py)."""

from __future__ import annotations

import asyncio
import copy
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from controlplane.client import Client
from controlplane.client.client import ApiError
from tests.front_socket import front_on_socket

NS = "/api/v1/namespaces/default"
C: list[dict[str, Any]] = [{
    "name": "c", "image": "nginx", "ports": [{"containerPort": 80}], "env": [{"name": "A", "value": "b"}],
    "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"cpu": "1"}},
    "readinessProbe": {"httpGet": {"path": "/", "port": 80}}, "volumeMounts": [{"name": "v", "mountPath": "/v"}],
    "securityContext": {"runAsUser": 1000, "capabilities": {"drop": ["ALL"]}}}]
PODSPEC: dict[str, Any] = {
    "containers": C, "volumes": [{"name": "v", "emptyDir": {}}], "tolerations": [{"key": "k", "operator": "Exists"}],
    "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}}}}
TPL = {"metadata": {"labels": {"app": "x"}}, "spec": PODSPEC}
SEL = {"matchLabels": {"app": "x"}}
RULE = {"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["deployments"]}
COND = [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z", "reason": "R"}]
WIDGETS = "/apis/fz.io/v1/namespaces/default/widgets"
META = {"labels": {"app": "x"}, "annotations": {"a.example.com/b": "c"}, "finalizers": ["example.com/f"],
        "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "o", "controller": False,
                             "uid": "6b3e1c0a-0000-4000-8000-000000000001"}]}
CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "widgets.fz.io"},
    "spec": {"group": "fz.io", "scope": "Namespaced",
             "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
             "versions": [{"name": "v1", "served": True, "storage": True, "subresources": {"status": {}}, "schema": {
                 "openAPIV3Schema": {"type": "object", "properties": {
                     "spec": {"type": "object", "properties": {
                         "n": {"type": "integer", "minimum": 0},
                         "s": {"type": "string", "x-kubernetes-validations": [{"rule": "self.size() < 10"}]},
                         "l": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["k"],
                               "items": {"type": "object", "required": ["k"], "properties": {
                                   "k": {"type": "string"}, "v": {"type": "integer"}}}},
                         "m": {"type": "object", "additionalProperties": {"type": "string"}}}},
                     "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}}}}}}]}}
# collection: (a valid object, a valid status of it or None when it has no status subresource)
SEEDS: dict[str, tuple[dict[str, Any], dict[str, Any] | None]] = {
    f"{NS}/pods": ({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "s", **META},
                    "spec": PODSPEC},
                   {"phase": "Running", "conditions": COND, "podIP": "10.0.0.5", "containerStatuses": [
                       {"name": "c", "ready": True, "restartCount": 0, "image": "nginx", "imageID": "x"}]}),
    "/apis/apps/v1/namespaces/default/deployments": (
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "s"},
         "spec": {"replicas": 0, "selector": SEL, "template": TPL,
                  "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%"}}}},
        {"replicas": 0, "observedGeneration": 1, "conditions": [{"type": "Available", "status": "True"}]}),
    "/apis/apps/v1/namespaces/default/statefulsets": (
        {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "s"},
         "spec": {"replicas": 0, "serviceName": "s", "selector": SEL, "template": TPL, "volumeClaimTemplates": [
             {"metadata": {"name": "d"}, "spec": {"accessModes": ["ReadWriteOnce"],
                                                  "resources": {"requests": {"storage": "1Gi"}}}}]}}, None),
    "/apis/batch/v1/namespaces/default/cronjobs": (
        {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "s"},
         "spec": {"schedule": "*/5 * * * *", "suspend": True,
                  "jobTemplate": {"spec": {"template": {"spec": dict(PODSPEC, restartPolicy="Never")}}}}}, None),
    f"{NS}/services": (
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
         "spec": {"type": "NodePort", "selector": {"app": "x"},
                  "ports": [{"name": "h", "port": 80, "targetPort": "h"}]}},
        {"loadBalancer": {"ingress": [{"ip": "1.2.3.4", "ports": [{"port": 80, "protocol": "TCP"}]}]}}),
    "/api/v1/nodes": (
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "s", "labels": {"zone": "a"}},
         "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}], "podCIDR": "10.0.0.0/24"}},
        {"capacity": {"cpu": "4", "pods": "110"}, "conditions": [{"type": "Ready", "status": "True"}],
         "addresses": [{"type": "InternalIP", "address": "10.1.0.1"}]}),
    f"{NS}/persistentvolumeclaims": (
        {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "s"},
         "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}},
                  "storageClassName": "none"}},
        {"phase": "Bound", "accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"}}),
    f"{NS}/limitranges": ({"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "s"}, "spec": {
        "limits": [{"type": "Container", "default": {"cpu": "1"}, "max": {"cpu": "4"}}]}}, None),
    "/apis/storage.k8s.io/v1/storageclasses": (
        {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "s"}, "provisioner": "x.csi",
         "allowedTopologies": [{"matchLabelExpressions": [{"key": "zone", "values": ["a"]}]}]}, None),
    "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings": (
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "s"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
         "subjects": [{"kind": "User", "name": "u", "apiGroup": "rbac.authorization.k8s.io"},
                      {"kind": "ServiceAccount", "name": "default", "namespace": "default"}]}, None),
    "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings": (
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
         "metadata": {"name": "s"}, "spec": {"policyName": "s", "validationActions": ["Deny"], "matchResources": {
             "namespaceSelector": {"matchLabels": {"a": "b"}}, "excludeResourceRules": [RULE]}}}, None),
    "/apis/resource.k8s.io/v1/resourceslices": (
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "s"},
         "spec": {"driver": "x.example.com", "nodeName": "n", "pool": {"name": "p", "resourceSliceCount": 1},
                  "devices": [{"name": "d", "attributes": {"model": {"string": "a"}},
                               "capacity": {"mem": {"value": "1Gi"}}}]}}, None),
    "/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas": (
        {"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema", "metadata": {"name": "s"},
         "spec": {"priorityLevelConfiguration": {"name": "s"}, "matchingPrecedence": 500, "rules": [
             {"subjects": [{"kind": "User", "user": {"name": "u"}}],
              "resourceRules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"], "namespaces": ["*"]}]}]}},
        None),
    "/apis/apiextensions.k8s.io/v1/customresourcedefinitions": (CRD, None),
    WIDGETS: ({"apiVersion": "fz.io/v1", "kind": "Widget", "metadata": {"name": "s", **META},
               "spec": {"n": 1, "s": "a", "l": [{"k": "a", "v": 1}], "m": {"a": "b"}}}, {"ready": True}),
}
WEIRD: list[Any] = [None, 0, -1, 2**63 - 1, -2**63, 1.5, 1e308, True, "", "x" * 300, "-1", "1e3", "ä", "\u0000",
                    [], [None], [1, "a"], {}, {"": 1}, {"a": None}, {"a": [{}]}, [[[]]], {"x": {"y": {"z": []}}}]
MUTATIONS_PER_KIND = 20
SEED = 20261207

Path_ = tuple[Any, ...]  # keys and indexes


def _paths(o: Any, p: Path_ = ()) -> Iterator[Path_]:
    yield p
    if isinstance(o, dict):
        for k, v in o.items():
            yield from _paths(v, (*p, k))
    elif isinstance(o, list):
        for i, v in enumerate(o):
            yield from _paths(v, (*p, i))


def _at(o: Any, p: Path_) -> Any:
    for k in p:
        o = o[k]
    return o


def _put(o: Any, p: Path_, v: Any) -> Any:
    o = copy.deepcopy(o)
    if not p:
        return v
    _at(o, p[:-1])[p[-1]] = v
    return o


def _merge_patch(o: Any, p: Path_) -> dict[str, Any]:
    """A merge patch setting ``p`` (up to its first list, which it sets whole) as in ``o``."""
    if not p:
        return dict(o)
    cut = next((i for i, k in enumerate(p) if isinstance(k, int)), len(p))
    patch: dict[str, Any] = {}
    cur = patch
    for k in p[:cut - 1]:
        cur = cur.setdefault(k, {})
    cur[p[cut - 1]] = _at(o, p[:cut])
    return patch


def _pointer(p: list[Any]) -> str:
    return "".join("/" + str(k).replace("~", "~0").replace("/", "~1") for k in p)


def _json_patch(rnd: random.Random, stored: dict[str, Any]) -> list[dict[str, Any]]:
    """One to three operations of any kind at paths of the stored object, some past its ends."""
    paths = [p for p in _paths(stored) if p and p[0] not in ("apiVersion", "kind")]
    ops = []
    for _ in range(rnd.choice((1, 1, 2, 3))):
        p = list(rnd.choice(paths))
        if isinstance(p[-1], int) and rnd.random() < 0.4:
            p[-1] = rnd.choice(("-", 99, -1, "01"))
        op: dict[str, Any] = {"op": rnd.choice(("add", "replace", "remove", "move", "copy", "test")),
                              "path": _pointer(p)}
        if op["op"] in ("add", "replace", "test"):
            op["value"] = rnd.choice(WEIRD)
        elif op["op"] in ("move", "copy"):
            op["from"] = _pointer(list(rnd.choice(paths)))
        ops.append(op)
    return ops


def _directive(rnd: random.Random, seed: dict[str, Any]) -> dict[str, Any]:
    """A strategic merge patch of one map of the object with a directive in it, well formed or not."""
    maps = [p for p in _paths(seed) if p and p[0] not in ("apiVersion", "kind") and isinstance(_at(seed, p), dict)
            and not any(isinstance(k, int) for k in p)]
    p = rnd.choice(maps)
    here = dict(_at(seed, p))
    lists = [k for k, v in here.items() if isinstance(v, list)] or ["zz"]
    name = rnd.choice(lists)
    choices: list[tuple[str, Any]] = [
        ("$patch", rnd.choice(("delete", "replace", "merge", "bogus", None))),
        ("$retainKeys", rnd.choice((list(here)[:1], [], None, [1], "x"))),
        (f"$setElementOrder/{name}", rnd.choice(([{"name": "c"}], [], [None], ["a"], {}, "x"))),
        (f"$deleteFromPrimitiveList/{name}", rnd.choice((["ALL"], ["a"], [], None, [{}])))]
    directive, value = rnd.choice(choices)
    here[directive] = value
    return _merge_patch(_put(seed, p, here), p)


class Fuzz:
    def __init__(self, c: Client) -> None:
        self.c = c
        self.wrong: list[str] = []  # a 5xx, an exception, a hang, an object that does not read or PUT back
        self.answered: dict[int, int] = {}

    async def send(self, what: str, request: Any) -> Any:
        try:
            got = await asyncio.wait_for(request, 10)
            self.answered[200] = self.answered.get(200, 0) + 1
            return got
        except ApiError as e:
            self.answered[e.code] = self.answered.get(e.code, 0) + 1
            if e.code >= 500:
                self.wrong.append(f"{what}: {e}")
        except Exception as e:  # (each is a finding)
            self.wrong.append(f"{what}: {type(e).__name__} {e}")
        return None

    async def check_stored(self, collection: str, name: str, what: str, status: bool) -> None:
        """It reads and lists, and its own PUT (and its status's) takes it as read; if not, the
        finding is noted and the object put back as the seed was, so it is noted once."""
        url = f"{collection}/{name}"
        try:
            assert (await self.c.list(collection, limit=2))["items"]
            for sub in ("", "/status") if status else ("",):
                for attempt in range(3):
                    stored = await self.c.get(url)
                    try:
                        await self.c.update(url + sub, stored)
                        break
                    except ApiError as e:  # (written meanwhile: a FlowSchema's status by its controller)
                        if e.code != 409 or attempt == 2:
                            raise
        except ApiError as e:
            if e.code in (404, 409):
                return
            self.wrong.append(f"{what}: {url} stored, then refused: {e}")
            stored = await self.c.get(url)
            seed = SEEDS[collection][0]
            await self.c.update(url, {**seed, "metadata": {
                **seed["metadata"], "name": name, "resourceVersion": stored["metadata"]["resourceVersion"]}})


async def _fuzz_kind(fz: Fuzz, rnd: random.Random, collection: str, seed: dict[str, Any],
                     status: dict[str, Any] | None) -> None:
    c = fz.c
    name = seed["metadata"]["name"]
    url = f"{collection}/{name}"
    paths = [p for p in _paths(seed) if p and p[0] not in ("apiVersion", "kind") and p[:2] != ("metadata", "name")]
    for i in range(MUTATIONS_PER_KIND):
        p, v = rnd.choice(paths), rnd.choice(WEIRD)
        parent, roll = _at(seed, p[:-1]), rnd.random()
        if roll < 0.15 and isinstance(parent, list):  # an item twice (its merge key repeated)
            p, v = p[:-1], [*parent, parent[p[-1]]]
        elif roll < 0.25 and isinstance(parent, dict):  # a key dropped
            p, v = p[:-1], {k: x for k, x in parent.items() if k != p[-1]}
        mutated = _put(seed, p, v)
        what = f"{collection} {p} = {v!r:.40}"
        meta = mutated.get("metadata")
        created = await fz.send(f"create {what}", c.create(
            collection, {**mutated, "metadata": {**meta, "name": f"f{i}"}} if isinstance(meta, dict) else mutated))
        if created:
            await fz.check_stored(collection, f"f{i}", f"create {what}", status is not None)
        for verb in VERBS if status is not None else VERBS[:-1]:
            await fz.send(f"{verb} {what}", _write(c, verb, url, rnd, seed, status, mutated, p, v))
            await fz.check_stored(collection, name, f"{verb} {what}", status is not None)


VERBS = ("merge", "strategic", "update", "json", "directive", "apply", "status")


async def _write(c: Client, verb: str, url: str, rnd: random.Random, seed: dict[str, Any],
                 status: dict[str, Any] | None, mutated: Any, p: Path_, v: Any) -> Any:
    """One write of the stored object by ``verb``, of the mutation ``mutated`` (``p`` set to ``v``)."""
    if verb in ("merge", "strategic"):
        return await c.patch(url, _merge_patch(mutated, p), patch_type=verb)
    if verb == "update":
        return await _update(c, url, p, v)
    if verb == "json":
        return await c.patch(url, _json_patch(rnd, await c.get(url)), patch_type="json")
    if verb == "directive":
        return await c.patch(url, _directive(rnd, seed), patch_type="strategic")
    if verb == "apply":
        return await c.request("PATCH", url, orjson.dumps(mutated), "application/apply-patch+yaml",
                               fieldManager=rnd.choice(("a", "b")), force=rnd.choice((True, None)))
    assert status is not None
    return await _status_write(c, url, rnd, status)


async def _update(c: Client, url: str, p: Path_, v: Any) -> dict[str, Any] | None:
    stored = await c.get(url)
    try:
        return await c.update(url, _put(stored, p, v))
    except (KeyError, IndexError, TypeError):
        return None  # (the stored object has not that path)


async def _status_write(c: Client, url: str, rnd: random.Random, status: dict[str, Any]) -> dict[str, Any]:
    stored = await c.get(url)
    paths = [p for p in _paths(status) if p]
    mutated = _put(status, rnd.choice(paths), rnd.choice(WEIRD))
    if rnd.random() < 0.5:
        return await c.update(f"{url}/status", {**stored, "status": mutated})
    return await c.patch(f"{url}/status", {"status": mutated}, patch_type="merge")


async def test_mutated_objects_of_every_shape_are_answered_and_stored_updatable(tmp_path: Path) -> None:
    async with front_on_socket(tmp_path) as (port, _), Client(f"http://127.0.0.1:{port}") as c:
        fz = Fuzz(c)
        for collection, (seed, status) in SEEDS.items():
            if collection == WIDGETS:  # served once its definition is established
                for _ in range(100):
                    try:
                        await c.list(WIDGETS)
                        break
                    except ApiError:
                        await asyncio.sleep(0.05)
            await c.create(collection, seed)
            # (a generator per kind: each kind's mutations do not move with the others' answers)
            await _fuzz_kind(fz, random.Random(f"{SEED}{collection}"), collection, seed, status)
    assert not fz.wrong, "\n".join(fz.wrong)
    # the mutations reach the stores and the validations both
    assert fz.answered.get(200, 0) > 400 and fz.answered.get(422, 0) > 600 and fz.answered.get(400, 0) > 500, \
        fz.answered
