"""``matchLabelKeys``/``mismatchLabelKeys`` merged into a pod's selectors when it is created,
as kube-apiserver's pod strategy does since 1.34 (MatchLabelKeysInPodTopologySpreadSelectorMerge,
MatchLabelKeysInPodAffinity): for each key the pod's labels hold, ``key In (value)`` (``NotIn``
for a mismatch key) appended to the term's ``labelSelector.matchExpressions``; not on update,
not in templates; and the validation that follows the merge (a key both required by the
selector and merged in again is refused)."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import orjson
import pytest

from controlplane.client import ApiError, Client, resource_path
from controlplane.registry.labelkeys import merge_label_keys
from tests.test_cli import Serve, running, start_serve

PODS = resource_path("", "v1", "pods", "default")
DEPLOYMENTS = resource_path("apps", "v1", "deployments", "default")
REQ = "requiredDuringSchedulingIgnoredDuringExecution"
PREF = "preferredDuringSchedulingIgnoredDuringExecution"
LABELS = {"app": "web", "pod-template-hash": "5d4f", "track": "canary"}


def spread(selector: dict[str, Any] | None, keys: list[str], key: str = "zone") -> dict[str, Any]:
    c: dict[str, Any] = {"maxSkew": 1, "topologyKey": key, "whenUnsatisfiable": "DoNotSchedule",
                         "matchLabelKeys": keys}
    if selector is not None:
        c["labelSelector"] = selector
    return c


def term(selector: dict[str, Any] | None, match: list[str] | None = None,
         mismatch: list[str] | None = None) -> dict[str, Any]:
    t: dict[str, Any] = {"topologyKey": "kubernetes.io/hostname"}
    if selector is not None:
        t["labelSelector"] = selector
    if match is not None:
        t["matchLabelKeys"] = match
    if mismatch is not None:
        t["mismatchLabelKeys"] = mismatch
    return t


def pod(name: str, labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": dict(LABELS) if labels is None else labels},
            "spec": {"containers": [{"name": "c", "image": "nginx"}], **spec}}


SPEC: dict[str, Any] = {
    "topologySpreadConstraints": [
        spread({"matchLabels": {"app": "web"}}, ["pod-template-hash", "absent"]),
        spread({}, ["track"], key="kubernetes.io/hostname"),  # an empty selector is a selector: merged
    ],
    "affinity": {
        "podAffinity": {REQ: [term({"matchLabels": {"app": "db"}}, match=["pod-template-hash"])]},
        "podAntiAffinity": {
            REQ: [term({"matchExpressions": [{"key": "tier", "operator": "Exists"}]},
                       match=["app"], mismatch=["track"])],
            PREF: [{"weight": 10, "podAffinityTerm": term({"matchLabels": {"tier": "x"}}, mismatch=["track", "nope"])}],
        },
    },
}


def merged_selectors(spec: dict[str, Any]) -> list[Any]:
    aff, anti = spec["affinity"]["podAffinity"], spec["affinity"]["podAntiAffinity"]
    return [*(c["labelSelector"] for c in spec["topologySpreadConstraints"]),
            aff[REQ][0]["labelSelector"], anti[REQ][0]["labelSelector"],
            anti[PREF][0]["podAffinityTerm"]["labelSelector"]]


EXPECTED = [
    {"matchLabels": {"app": "web"},
     "matchExpressions": [{"key": "pod-template-hash", "operator": "In", "values": ["5d4f"]}]},
    {"matchExpressions": [{"key": "track", "operator": "In", "values": ["canary"]}]},
    {"matchLabels": {"app": "db"},
     "matchExpressions": [{"key": "pod-template-hash", "operator": "In", "values": ["5d4f"]}]},
    {"matchExpressions": [{"key": "tier", "operator": "Exists"}, {"key": "app", "operator": "In", "values": ["web"]},
                          {"key": "track", "operator": "NotIn", "values": ["canary"]}]},
    {"matchLabels": {"tier": "x"}, "matchExpressions": [{"key": "track", "operator": "NotIn", "values": ["canary"]}]},
]


def test_merge_appends_a_requirement_per_key_the_labels_hold() -> None:
    p = pod("p", **copy.deepcopy(SPEC))
    merge_label_keys(p)
    assert merged_selectors(p["spec"]) == EXPECTED
    # the key lists stay; a term without a selector (it matches nothing) is left alone
    assert p["spec"]["topologySpreadConstraints"][0]["matchLabelKeys"] == ["pod-template-hash", "absent"]
    bare = pod("b", topologySpreadConstraints=[spread(None, ["app"])], affinity={"podAffinity": {REQ: [
        term(None, match=["app"])]}})
    before = copy.deepcopy(bare)
    merge_label_keys(bare)
    assert bare == before
    unlabelled = pod("u", labels={}, **copy.deepcopy(SPEC))
    merge_label_keys(unlabelled)
    assert unlabelled["spec"] == pod("u", **SPEC)["spec"]


async def test_a_created_pod_is_stored_with_merged_selectors_and_an_update_does_not_merge(client: Client) -> None:
    created = await client.create(PODS, pod("merged", **copy.deepcopy(SPEC)))
    assert merged_selectors(created["spec"]) == EXPECTED
    got = await client.get(f"{PODS}/merged")
    assert merged_selectors(got["spec"]) == EXPECTED
    # an update (new labels) merges nothing more, and what the create merged stays valid
    patched = await client.patch(f"{PODS}/merged", {"metadata": {"labels": {"pod-template-hash": "6e5a"}}},
                                 patch_type="merge")
    assert merged_selectors(patched["spec"]) == EXPECTED
    replaced = await client.update(f"{PODS}/merged", patched)
    assert merged_selectors(replaced["spec"]) == EXPECTED
    # a dry-run create answers with the merged selectors too
    dry = await client.create(PODS, pod("dry", **copy.deepcopy(SPEC)), dryRun="All")
    assert merged_selectors(dry["spec"]) == EXPECTED


async def test_a_template_keeps_its_selectors(client: Client) -> None:
    template_spec = {"containers": [{"name": "c", "image": "nginx"}], **copy.deepcopy(SPEC)}
    d = {"metadata": {"name": "web"}, "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": {
        "metadata": {"labels": dict(LABELS)}, "spec": template_spec}}}
    created = await client.create(DEPLOYMENTS, d)
    kept = created["spec"]["template"]["spec"]
    assert kept["topologySpreadConstraints"] == SPEC["topologySpreadConstraints"]
    assert kept["affinity"] == SPEC["affinity"]


async def test_a_key_the_selector_already_requires_is_refused_once_merged(client: Client) -> None:
    """Upstream validates after the merge: a key of ``matchLabelKeys`` that ``matchLabels`` (or an
    earlier expression) already requires gets a second requirement, reported at ``<term>[i]``."""
    labels = {"app": "web"}
    spread_dup = [spread({"matchLabels": {"app": "web"}}, ["app"])]
    with pytest.raises(ApiError) as e:
        await client.create(PODS, pod("dup", labels=labels, topologySpreadConstraints=spread_dup))
    assert e.value.code == 422
    assert e.value.status["details"]["causes"] == [{
        "reason": "FieldValueInvalid", "field": "spec.topologySpreadConstraints[0][0]",
        "message": 'Invalid value: "app": exists in both matchLabelKeys and labelSelector'}]
    affinity_dup = {"podAffinity": {REQ: [term({"matchExpressions": [
        {"key": "app", "operator": "In", "values": ["web", "api"]}]}, match=["tier", "app"])]}}
    with pytest.raises(ApiError) as e:
        await client.create(PODS, pod("dup2", labels=labels, affinity=affinity_dup))
    assert e.value.status["details"]["causes"] == [{
        "reason": "FieldValueInvalid", "field": f"spec.affinity.podAffinity.{REQ}[0][1]",
        "message": 'Invalid value: "app": exists in both matchLabelKeys and labelSelector'}]
    # without the label there is nothing merged, so nothing repeated
    await client.create(PODS, pod("nolabel", labels={"other": "x"}, topologySpreadConstraints=spread_dup))
    # the same in a template is not merged, so not refused (its pods would be)
    d = {"metadata": {"name": "dup"}, "spec": {"selector": {"matchLabels": labels}, "template": {
        "metadata": {"labels": labels}, "spec": {"containers": [{"name": "c", "image": "nginx"}],
                                                  "topologySpreadConstraints": spread_dup}}}}
    await client.create(DEPLOYMENTS, d)
    # a mismatch key may be required by the selector too (NotIn narrows it further)
    ok = {"podAntiAffinity": {REQ: [term({"matchLabels": {"app": "web"}}, mismatch=["app"])]}}
    await client.create(PODS, pod("mismatch-ok", labels=labels, affinity=ok))


# -- over a real socket ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    with running(start_serve(tmp_path_factory.mktemp("labelkeys"))) as s:
        yield s


def test_the_official_client_reads_the_merged_selectors(served: Serve) -> None:
    from kubernetes import client as k8s
    from kubernetes import config

    api = config.new_client_from_config(config_file=str(served.kubeconfig))  # type: ignore[no-untyped-call]
    try:
        core = k8s.CoreV1Api(api)
        body: Any = pod("official", **copy.deepcopy(SPEC))
        core.create_namespaced_pod("default", body)
        raw: Any = core.read_namespaced_pod("official", "default", _preload_content=False)
        assert merged_selectors(orjson.loads(raw.data)["spec"]) == EXPECTED
        typed: Any = core.read_namespaced_pod("official", "default")
        exprs = typed.spec.topology_spread_constraints[0].label_selector.match_expressions
        assert [(e.key, e.operator, e.values) for e in exprs] == [("pod-template-hash", "In", ["5d4f"])]
    finally:
        api.close()
