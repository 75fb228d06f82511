"""flowcontrol.apiserver.k8s.io/v1: the bootstrap configuration kube-apiserver keeps, the
validation and defaults of FlowSchemas and PriorityLevelConfigurations, their Dangling
condition and their table columns."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from controlplane.api.app import create_app
from controlplane.api.tables import as_table
from controlplane.client import ApiError, Client, resource_path
from controlplane.config import Config
from controlplane.registry.flowcontrol import prepare_flow_schema, prepare_priority_level
from tests.controllers.helpers import until

SCHEMAS = resource_path("flowcontrol.apiserver.k8s.io", "v1", "flowschemas")
LEVELS = resource_path("flowcontrol.apiserver.k8s.io", "v1", "prioritylevelconfigurations")

ALL_RESOURCES = {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"], "clusterScope": True, "namespaces": ["*"]}


def schema(name: str, level: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema", "metadata": {"name": name},
            "spec": {"priorityLevelConfiguration": {"name": level},
                     "rules": [{"subjects": [{"kind": "Group", "group": {"name": "team-a"}}],
                                "resourceRules": [ALL_RESOURCES]}], **spec}}


def level(name: str, limited: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "PriorityLevelConfiguration",
            "metadata": {"name": name}, "spec": {"type": "Limited", "limited": limited}}


async def test_the_bootstrap_configuration_is_there(client: Client) -> None:
    schemas = {s["metadata"]["name"]: s for s in (await client.list(SCHEMAS))["items"]}
    assert set(schemas) == {
        "exempt", "probes", "system-leader-election", "endpoint-controller", "workload-leader-election",
        "system-node-high", "system-nodes", "kube-controller-manager", "kube-scheduler",
        "kube-system-service-accounts", "service-accounts", "global-default", "catch-all"}
    levels = {p["metadata"]["name"]: p for p in (await client.list(LEVELS))["items"]}
    assert set(levels) == {"exempt", "catch-all", "system", "node-high", "leader-election", "workload-high",
                           "workload-low", "global-default"}
    for obj in (*schemas.values(), *levels.values()):
        assert obj["metadata"]["annotations"] == {"apf.kubernetes.io/autoupdate-spec": "true"}
        assert obj["metadata"]["generation"] == 1
    assert levels["exempt"]["spec"] == {"type": "Exempt", "exempt": {"nominalConcurrencyShares": 0,
                                                                     "lendablePercent": 0}}
    assert levels["catch-all"]["spec"]["limited"] == {"nominalConcurrencyShares": 5, "lendablePercent": 0,
                                                      "limitResponse": {"type": "Reject"}}
    assert levels["workload-low"]["spec"]["limited"]["limitResponse"]["queuing"] == {
        "queues": 128, "handSize": 6, "queueLengthLimit": 50}
    probes = schemas["probes"]["spec"]
    assert probes["matchingPrecedence"] == 2 and "distinguisherMethod" not in probes
    assert probes["rules"][0]["nonResourceRules"] == [{"verbs": ["get"],
                                                       "nonResourceURLs": ["/healthz", "/readyz", "/livez"]}]
    [dangling] = schemas["global-default"]["status"]["conditions"]
    assert (dangling["type"], dangling["status"], dangling["reason"]) == ("Dangling", "False", "Found")


async def test_a_flowschema_is_defaulted_and_its_dangling_condition_follows_its_level(client: Client) -> None:
    made = await client.create(SCHEMAS, schema("team-a", "team-a"))
    assert made["spec"]["matchingPrecedence"] == 1000 and made["status"] == {}
    assert made["metadata"]["generation"] == 1

    async def dangling() -> dict[str, Any] | None:
        got = await client.get(f"{SCHEMAS}/team-a")
        conditions = (got.get("status") or {}).get("conditions") or []
        return conditions[0] if conditions else None

    first = await until(dangling)
    assert (first["status"], first["reason"]) == ("True", "NotFound")
    assert first["message"] == ('This FlowSchema references the PriorityLevelConfiguration object named "team-a" '
                                "but there is no such object")
    await client.create(LEVELS, level("team-a", {"limitResponse": {"type": "Queue", "queuing": {}}}))

    async def found() -> bool:
        got = await dangling()
        return got is not None and got["status"] == "False"

    await until(found)


async def test_a_priority_level_gets_upstreams_defaults(client: Client) -> None:
    made = await client.create(LEVELS, level("batch", {"limitResponse": {"type": "Queue", "queuing": {}}}))
    assert made["spec"]["limited"] == {"nominalConcurrencyShares": 30, "lendablePercent": 0, "limitResponse": {
        "type": "Queue", "queuing": {"queues": 64, "handSize": 8, "queueLengthLimit": 50}}}
    assert made["status"] == {}


@pytest.mark.parametrize(("body", "field", "text"), [
    (schema("one", "x", matchingPrecedence=1), "spec.matchingPrecedence",
     "Invalid value: 1: only the schema named 'exempt' may have matchingPrecedence 1"),
    (schema("big", "x", matchingPrecedence=10001), "spec.matchingPrecedence", "must not be greater than 10000"),
    (schema("nolevel", ""), "spec.priorityLevelConfiguration.name", "Required value: must reference a priority level"),
    (schema("how", "x", distinguisherMethod={"type": "ByPod"}), "spec.distinguisherMethod.type",
     'Unsupported value: "ByPod": supported values: "ByNamespace", "ByUser"'),
    (schema("nosubjects", "x", rules=[{"subjects": [], "resourceRules": [ALL_RESOURCES]}]), "spec.rules[0].subjects",
     "subjects must contain at least one value"),
    (schema("norules", "x", rules=[{"subjects": [{"kind": "User", "user": {"name": "a"}}]}]), "spec.rules[0]",
     "at least one of resourceRules and nonResourceRules has to be non-empty"),
    (schema("mixed", "x", rules=[{"subjects": [{"kind": "User", "group": {"name": "a"}}],
                                  "resourceRules": [ALL_RESOURCES]}]), "spec.rules[0].subjects[0].user",
     "Required value: user is required when subject kind is 'User'"),
    (schema("verbs", "x", rules=[{"subjects": [{"kind": "User", "user": {"name": "a"}}],
                                  "resourceRules": [{**ALL_RESOURCES, "verbs": ["*", "get"]}]}]),
     "spec.rules[0].resourceRules[0].verbs",
     """Invalid value: []string{"*", "get"}: if '*' is present, must not specify other verbs"""),
    (schema("namespaced", "x", rules=[{"subjects": [{"kind": "User", "user": {"name": "a"}}],
                                       "resourceRules": [{"verbs": ["get"], "apiGroups": [""],
                                                          "resources": ["pods"]}]}]),
     "spec.rules[0].resourceRules[0].namespaces",
     "resource rules that are not cluster scoped must supply at least one namespace"),
    (schema("urls", "x", rules=[{"subjects": [{"kind": "User", "user": {"name": "a"}}],
                                 "nonResourceRules": [{"verbs": ["get"], "nonResourceURLs": ["/a*"]}]}]),
     "spec.rules[0].nonResourceRules[0].nonResourceURLs[0]", 'Invalid value: "/a*": wildcard can only do suffix '
                                                             "matching"),
])
def test_flowschemas_are_validated_as_upstream(body: dict[str, Any], field: str, text: str) -> None:
    causes = prepare_flow_schema(body, None)
    assert any(c["field"] == field and text in c["message"] for c in causes), causes


@pytest.mark.parametrize(("name", "spec", "field", "text"), [
    ("exempt-ish", {"type": "Exempt"}, "spec.type", "type must be 'Exempt' if and only if name is 'exempt'"),
    ("odd", {"type": "Sometimes"}, "spec.type", 'Unsupported value: "Sometimes": supported values: "Exempt", '
                                                '"Limited"'),
    ("nolimit", {"type": "Limited"}, "spec.limited", "must not be empty when type is Limited"),
    ("lend", {"type": "Limited", "limited": {"lendablePercent": 101, "limitResponse": {"type": "Reject"}}},
     "spec.limited.lendablePercent", "must be between 0 and 100, inclusive"),
    ("hands", {"type": "Limited", "limited": {"limitResponse": {"type": "Queue", "queuing": {
        "queues": 4, "handSize": 5}}}}, "spec.limited.limitResponse.queuing.handSize",
     "should not be greater than queues (4)"),
    ("entropy", {"type": "Limited", "limited": {"limitResponse": {"type": "Queue", "queuing": {
        "queues": 128, "handSize": 100}}}}, "spec.limited.limitResponse.queuing.handSize",
     "required entropy bits of deckSize 128 and handSize 100 should not be greater than 60"),
    ("reject", {"type": "Limited", "limited": {"limitResponse": {"type": "Reject", "queuing": {"queues": 1}}}},
     "spec.limited.limitResponse.queuing", "must be nil if limited.limitResponse.type is not Limited"),
])
def test_priority_levels_are_validated_as_upstream(name: str, spec: dict[str, Any], field: str, text: str) -> None:
    body = {"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "PriorityLevelConfiguration",
            "metadata": {"name": name}, "spec": spec}
    causes = prepare_priority_level(body, None)
    assert any(c["field"] == field and text in c["message"] for c in causes), causes


async def test_an_invalid_write_is_a_422_status(client: Client) -> None:
    with pytest.raises(ApiError) as e:
        await client.create(SCHEMAS, schema("one", "x", matchingPrecedence=1))
    assert e.value.code == 422 and e.value.reason == "Invalid"
    assert e.value.message == ('FlowSchema.flowcontrol.apiserver.k8s.io "one" is invalid: spec.matchingPrecedence: '
                               "Invalid value: 1: only the schema named 'exempt' may have matchingPrecedence 1")


async def test_the_mandatory_objects_keep_their_spec(client: Client) -> None:
    with pytest.raises(ApiError) as e:
        await client.patch(f"{SCHEMAS}/catch-all", {"spec": {"matchingPrecedence": 9999}})
    assert e.value.code == 422 and "spec of 'catch-all' must equal the fixed value" in e.value.message
    with pytest.raises(ApiError) as e:
        await client.patch(f"{LEVELS}/catch-all", {"spec": {"limited": {"nominalConcurrencyShares": 6}}})
    assert e.value.code == 422 and "spec of 'catch-all' must equal the fixed value" in e.value.message
    # exempt's shares and lendable percent may vary (upstream allows it since v1)
    changed = await client.patch(f"{LEVELS}/exempt", {"spec": {"exempt": {"nominalConcurrencyShares": 10}}})
    assert changed["spec"]["exempt"]["nominalConcurrencyShares"] == 10


async def test_a_deleted_mandatory_object_comes_back(client: Client) -> None:
    old = await client.get(f"{SCHEMAS}/exempt")
    await client.delete(f"{SCHEMAS}/exempt")

    async def back() -> bool:
        try:
            got = await client.get(f"{SCHEMAS}/exempt")
        except ApiError:
            return False
        return bool(got["metadata"]["uid"] != old["metadata"]["uid"])

    await until(back)


async def test_the_ensurer_sets_specs_back_as_their_annotation_says(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Once a period (upstream's: a minute) the bootstrap objects are made whole again: a
    suggested one deleted comes back, one edited gets its spec back unless its annotation
    says "false", and the exempt level keeps the shares an administrator gave it."""
    from controlplane.controllers import flowschemas

    monkeypatch.setattr(flowschemas, "ENSURE_SECONDS", 0.1)
    app = create_app(Config(data_dir=tmp_path / "data", tls=False, scheduler=False))
    async with app.router.lifespan_context(app), Client.in_process(app.state.front) as c:
        await c.patch(f"{LEVELS}/workload-low", {"spec": {"limited": {"nominalConcurrencyShares": 1}}})
        await c.patch(f"{LEVELS}/global-default", {
            "metadata": {"annotations": {"apf.kubernetes.io/autoupdate-spec": "false"}},
            "spec": {"limited": {"nominalConcurrencyShares": 2}}})
        await c.patch(f"{LEVELS}/exempt", {"spec": {"exempt": {"nominalConcurrencyShares": 3}}})
        await c.delete(f"{SCHEMAS}/service-accounts")

        async def settled() -> bool:
            try:
                back = await c.get(f"{SCHEMAS}/service-accounts")
            except ApiError:
                return False
            restored = await c.get(f"{LEVELS}/workload-low")
            return bool(back and restored["spec"]["limited"]["nominalConcurrencyShares"] == 100)

        await until(settled)
        assert (await c.get(f"{LEVELS}/global-default"))["spec"]["limited"]["nominalConcurrencyShares"] == 2
        assert (await c.get(f"{LEVELS}/exempt"))["spec"]["exempt"]["nominalConcurrencyShares"] == 3


def test_the_bootstrap_objects_pass_their_own_validation() -> None:
    from controlplane.registry.flowcontrol import bootstrap_objects

    for plural, obj, _ in bootstrap_objects():
        prepare = prepare_flow_schema if plural == "flowschemas" else prepare_priority_level
        assert prepare(obj, None) == [], obj["metadata"]["name"]


def test_the_tables_have_upstreams_columns() -> None:
    fs = schema("team-a", "team-a", matchingPrecedence=500, distinguisherMethod={"type": "ByUser"})
    fs["status"] = {"conditions": [{"type": "Dangling", "status": "True"}]}
    table = as_table("flowschemas", [fs], {})
    assert [c["name"] for c in table["columnDefinitions"]] == [
        "Name", "PriorityLevel", "MatchingPrecedence", "DistinguisherMethod", "Age", "MissingPL"]
    assert table["rows"][0]["cells"] == ["team-a", "team-a", 500, "ByUser", "<unknown>", "True"]
    bare = as_table("flowschemas", [schema("b", "x")], {})
    assert bare["rows"][0]["cells"][3:] == ["<none>", "<unknown>", "?"]
    ordered = as_table("flowschemas", [schema("z", "x", matchingPrecedence=10), schema("b", "x", matchingPrecedence=20),
                                       schema("a", "x", matchingPrecedence=20)], {})
    assert [r["cells"][0] for r in ordered["rows"]] == ["z", "a", "b"]  # by precedence, then name
    levels = as_table("prioritylevelconfigurations", [
        level("q", {"nominalConcurrencyShares": 7, "limitResponse": {"type": "Queue", "queuing": {
            "queues": 16, "handSize": 4, "queueLengthLimit": 50}}}),
        {"metadata": {"name": "exempt"}, "spec": {"type": "Exempt", "exempt": {}}}], {})
    assert [c["name"] for c in levels["columnDefinitions"]] == [
        "Name", "Type", "NominalConcurrencyShares", "Queues", "HandSize", "QueueLengthLimit", "Age"]
    assert levels["rows"][0]["cells"] == ["q", "Limited", 7, 16, 4, 50, "<unknown>"]
    assert levels["rows"][1]["cells"] == ["exempt", "Exempt", "<none>", "<none>", "<none>", "<none>", "<unknown>"]


async def test_a_restart_restores_what_autoupdate_allows(tmp_path: Path) -> None:
    """The suggested objects' spec comes back at start while their annotation is "true", and
    stays as edited once it is "false"; the mandatory ones always come back (the exempt
    level with the shares it was given)."""
    config = Config(data_dir=tmp_path / "data", tls=False, scheduler=False, components=False)
    app = create_app(config)
    async with app.router.lifespan_context(app), Client.in_process(app.state.front) as c:
        await c.patch(f"{LEVELS}/workload-low", {"spec": {"limited": {"nominalConcurrencyShares": 1}}})
        await c.patch(f"{LEVELS}/global-default", {
            "metadata": {"annotations": {"apf.kubernetes.io/autoupdate-spec": "false"}},
            "spec": {"limited": {"nominalConcurrencyShares": 2}}})
        await c.delete(f"{SCHEMAS}/catch-all")
        await c.patch(f"{LEVELS}/exempt", {"spec": {"exempt": {"nominalConcurrencyShares": 4}}})
    app = create_app(config)
    async with app.router.lifespan_context(app), Client.in_process(app.state.front) as c:
        restored = await c.get(f"{LEVELS}/workload-low")
        assert restored["spec"]["limited"]["nominalConcurrencyShares"] == 100
        assert restored["metadata"]["generation"] == 3  # the edit, then the restore
        kept = await c.get(f"{LEVELS}/global-default")
        assert kept["spec"]["limited"]["nominalConcurrencyShares"] == 2
        back = await c.get(f"{SCHEMAS}/catch-all")
        assert back["spec"]["matchingPrecedence"] == 10000
        assert (await c.get(f"{LEVELS}/exempt"))["spec"]["exempt"]["nominalConcurrencyShares"] == 4


async def test_the_configuration_follows_a_new_schema_at_once(tmp_path: Path) -> None:
    """A FlowSchema created is in flow control's configuration within a fraction of a second:
    its follower wakes on the watch cache's change (``ResourceCache.moved``), not a timer."""
    app = create_app(Config(data_dir=tmp_path / "data", tls=False, scheduler=False, components=False))
    async with app.router.lifespan_context(app), Client.in_process(app.state.front) as c:
        await c.create(LEVELS, level("team-a", {"nominalConcurrencyShares": 5, "limitResponse": {"type": "Reject"}}))
        started = time.monotonic()
        await c.create(SCHEMAS, schema("team-a", "team-a", matchingPrecedence=500))

        async def configured() -> bool:
            return any(s.name == "team-a" for s in app.state.front.flow.schemas)
        await until(configured, timeout=5)
        assert time.monotonic() - started < 0.5
