"""apiregistration.k8s.io/v1 APIServices: the local ones of the served groups (built-in at
start, custom resources' with their CRDs), upstream's validation, the availability of one
naming a Service this server cannot proxy to, and the table columns."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from controlplane.api.app import create_app
from controlplane.api.tables import as_table
from controlplane.client import ApiError, Client, resource_path
from controlplane.config import Config
from controlplane.registry.apiservices import prepare_apiservice
from tests.controllers.helpers import until

APISERVICES = resource_path("apiregistration.k8s.io", "v1", "apiservices")
CRDS = resource_path("apiextensions.k8s.io", "v1", "customresourcedefinitions")


def apiservice(group: str, version: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
            "metadata": {"name": f"{version}.{group}"},
            "spec": {"group": group, "version": version, "groupPriorityMinimum": 1000, "versionPriority": 15, **spec}}


async def test_every_served_group_version_has_a_local_apiservice(client: Client) -> None:
    held = {s["metadata"]["name"]: s for s in (await client.list(APISERVICES))["items"]}
    for name in ("v1.", "v1.apps", "v2.autoscaling", "v1.autoscaling", "v1.flowcontrol.apiserver.k8s.io",
                 "v1.apiregistration.k8s.io", "v1beta1.scheduling.k8s.io", "v1.resource.k8s.io"):
        assert name in held, name
    core = held["v1."]
    assert core["spec"] == {"group": "", "version": "v1", "groupPriorityMinimum": 18000, "versionPriority": 1}
    assert core["metadata"]["labels"] == {"kube-aggregator.kubernetes.io/automanaged": "onstart"}
    [available] = core["status"]["conditions"]
    assert (available["type"], available["status"], available["reason"]) == ("Available", "True", "Local")
    assert held["v1.apps"]["spec"]["groupPriorityMinimum"] == 17800
    assert held["v2.autoscaling"]["spec"]["versionPriority"] == 30


async def test_a_crds_versions_get_apiservices_that_go_with_it(client: Client) -> None:
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "widgets.example.com"},
           "spec": {"group": "example.com", "scope": "Namespaced",
                    "names": {"plural": "widgets", "kind": "Widget"},
                    "versions": [{"name": name, "served": served, "storage": name == "v1",
                                  "schema": {"openAPIV3Schema": {"type": "object"}}}
                                 for name, served in (("v1", True), ("v1beta1", False))]}}
    await client.create(CRDS, crd)

    async def names() -> set[str]:
        return {s["metadata"]["name"] for s in (await client.list(APISERVICES))["items"]}

    await until(lambda: _has(names, "v1.example.com"))
    made = await client.get(f"{APISERVICES}/v1.example.com")
    assert made["spec"] == {"group": "example.com", "version": "v1", "groupPriorityMinimum": 1000,
                            "versionPriority": 100}
    assert made["metadata"]["labels"] == {"kube-aggregator.kubernetes.io/automanaged": "true"}
    assert "v1beta1.example.com" not in await names()

    async def available() -> bool:
        got = await client.get(f"{APISERVICES}/v1.example.com")
        return bool((got.get("status") or {}).get("conditions"))

    await until(available)
    await client.delete(f"{CRDS}/widgets.example.com")

    async def gone() -> bool:
        return "v1.example.com" not in await names()

    await until(gone)


async def _has(names: Any, name: str) -> bool:
    return name in await names()


# the built-in groups as kube-apiserver's /apis lists them: its aggregator's group first,
# then by upstream's groupPriorityMinimum (admissionregistration before apiextensions at
# 16700, discovery before resource at 16200: by APIService name)
BUILT_IN_ORDER = ["apiregistration.k8s.io", "apps", "events.k8s.io", "authentication.k8s.io",
                  "authorization.k8s.io", "autoscaling", "batch", "certificates.k8s.io", "networking.k8s.io",
                  "policy", "rbac.authorization.k8s.io", "storage.k8s.io", "admissionregistration.k8s.io",
                  "apiextensions.k8s.io", "scheduling.k8s.io", "coordination.k8s.io", "node.k8s.io",
                  "discovery.k8s.io", "resource.k8s.io", "flowcontrol.apiserver.k8s.io", "storagemigration.k8s.io"]


def crd(group: str, versions: list[str]) -> dict[str, Any]:
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"gadgets.{group}"},
            "spec": {"group": group, "scope": "Namespaced", "names": {"plural": "gadgets", "kind": "Gadget"},
                     "versions": [{"name": v, "served": True, "storage": i == 0,
                                   "schema": {"openAPIV3Schema": {"type": "object"}}}
                                  for i, v in enumerate(versions)]}}


async def test_the_group_list_is_in_the_aggregators_order(client: Client) -> None:
    """Groups by their APIServices' groupPriorityMinimum, ties by APIService name: custom
    resources' (1000) by ``<version>.<group>``, so b.example.com's v1 before this server's
    nodes.controlplane.dev's v1alpha1 before a.example.com's v2; metrics.k8s.io (100) last.
    A group's versions by versionPriority, then Kubernetes' version order."""
    for group, versions in (("a.example.com", ["v2"]), ("b.example.com", ["v1"]),
                            ("c.example.com", ["v2alpha1", "v1beta1", "v1"])):
        await client.create(CRDS, crd(group, versions))

    async def listed() -> list[dict[str, Any]] | None:
        groups: list[dict[str, Any]] = (await client.get("/apis"))["groups"]
        return groups if {"a.example.com", "b.example.com", "c.example.com"} <= {g["name"] for g in groups} else None

    groups = await until(listed)
    assert [g["name"] for g in groups] == [*BUILT_IN_ORDER, "b.example.com", "c.example.com",
                                           "nodes.controlplane.dev", "a.example.com", "metrics.k8s.io"]
    by_name = {g["name"]: g for g in groups}
    assert [v["version"] for v in by_name["c.example.com"]["versions"]] == ["v1", "v1beta1", "v2alpha1"]
    assert [v["version"] for v in by_name["autoscaling"]["versions"]] == ["v2", "v1"]
    assert by_name["scheduling.k8s.io"]["preferredVersion"] == {"groupVersion": "scheduling.k8s.io/v1",
                                                                "version": "v1"}
    c_group = await client.get("/apis/c.example.com")
    assert c_group["preferredVersion"]["version"] == "v1"
    assert [v["version"] for v in c_group["versions"]] == ["v1", "v1beta1", "v2alpha1"]


async def test_an_apiservice_of_a_service_is_stored_but_not_available(client: Client) -> None:
    made = await client.create(APISERVICES, apiservice("metrics.example.com", "v1beta1", service={
        "namespace": "default", "name": "metrics"}))
    assert made["spec"]["service"] == {"namespace": "default", "name": "metrics", "port": 443}

    async def reason() -> str | None:
        got = await client.get(f"{APISERVICES}/v1beta1.metrics.example.com")
        conditions = (got.get("status") or {}).get("conditions") or []
        return conditions[0]["reason"] if conditions else None

    async def not_found() -> bool:
        return await reason() == "ServiceNotFound"

    await until(not_found)
    got = await client.get(f"{APISERVICES}/v1beta1.metrics.example.com")
    assert got["status"]["conditions"][0]["message"] == 'service/metrics in "default" is not present'
    service = await client.create(resource_path("", "v1", "services", "default"), {
        "metadata": {"name": "metrics"}, "spec": {"ports": [{"port": 8443}]}})  # (the APIService is not touched)

    async def port_error() -> bool:
        return await reason() == "ServicePortError"

    await until(port_error)
    await client.patch(f"{APISERVICES}/v1beta1.metrics.example.com", {"spec": {"service": {"port": 8443}}})

    async def failed_discovery() -> bool:
        return await reason() == "FailedDiscoveryCheck"

    await until(failed_discovery)
    got = await client.get(f"{APISERVICES}/v1beta1.metrics.example.com")
    assert got["status"]["conditions"][0]["message"].startswith(
        f"failing or missing response from https://{service['spec']['clusterIP']}:8443/apis/metrics.example.com/"
        "v1beta1: ")
    # not served: no aggregated API server is proxied to
    with pytest.raises(ApiError) as e:
        await client.get("/apis/metrics.example.com/v1beta1")
    assert e.value.code == 404


@pytest.mark.parametrize(("body", "field", "text"), [
    ({**apiservice("example.com", "v1"), "metadata": {"name": "v2.example.com"}}, "metadata.name",
     'must be `spec.version+"."+spec.group`: "v1.example.com"'),
    (apiservice("", "v2"), "spec.group", "only v1 may have an empty group and it better be legacy kube"),
    (apiservice("Example", "v1"), "spec.group", "a lowercase RFC 1123 subdomain"),
    (apiservice("example.com", "1v"), "spec.version", "a DNS-1035 label"),
    (apiservice("example.com", "v1", groupPriorityMinimum=20001), "spec.groupPriorityMinimum",
     "Invalid value: 20001: must be positive and less than 20000"),
    (apiservice("example.com", "v1", versionPriority=0), "spec.versionPriority",
     "Invalid value: 0: must be positive and less than 1000"),
    (apiservice("example.com", "v1", insecureSkipTLSVerify=True), "spec.insecureSkipTLSVerify",
     "local APIServices may not have insecureSkipTLSVerify"),
    (apiservice("example.com", "v1", caBundle="YWJj"), "spec.caBundle",
     'Invalid value: "3 bytes": local APIServices may not have a caBundle'),
    (apiservice("example.com", "v1", service={"namespace": "ns"}), "spec.service.name", "Required value"),
    (apiservice("example.com", "v1", service={"namespace": "ns", "name": "s", "port": 70000}), "spec.service.port",
     "port is not valid: must be between 1 and 65535, inclusive"),
])
def test_apiservices_are_validated_as_upstream(body: dict[str, Any], field: str, text: str) -> None:
    causes = prepare_apiservice(body, None)
    assert any(c["field"] == field and text in c["message"] for c in causes), causes


async def test_an_invalid_apiservice_is_a_422_status(client: Client) -> None:
    body = {**apiservice("example.com", "v1"), "metadata": {"name": "v2.example.com"}}
    with pytest.raises(ApiError) as e:
        await client.create(APISERVICES, body)
    assert e.value.code == 422 and e.value.reason == "Invalid"
    assert e.value.message == ('APIService.apiregistration.k8s.io "v2.example.com" is invalid: metadata.name: '
                               'Invalid value: "v2.example.com": must be `spec.version+"."+spec.group`: '
                               '"v1.example.com"')
    with pytest.raises(ApiError) as e:
        await client.create(APISERVICES, {**apiservice("example.com", "v1"), "metadata": {"name": "a/b"}})
    assert e.value.code == 422
    assert e.value.message.endswith('metadata.name: Invalid value: "a/b": may not contain \'/\'')


def test_the_table_has_upstreams_columns() -> None:
    local = {**apiservice("", "v1"), "status": {"conditions": [{"type": "Available", "status": "True",
                                                               "reason": "Local"}]}}
    remote = {**apiservice("metrics.k8s.io", "v1beta1", service={"namespace": "kube-system", "name": "ms"}),
              "status": {"conditions": [{"type": "Available", "status": "False", "reason": "ServiceNotFound"}]}}
    table = as_table("apiservices", [local, remote, apiservice("x.io", "v1")], {})
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Service", "Available", "Age"]
    assert [r["cells"][:3] for r in table["rows"]] == [
        ["v1.", "Local", "True"], ["v1beta1.metrics.k8s.io", "kube-system/ms", "False (ServiceNotFound)"],
        ["v1.x.io", "Local", "Unknown"]]


async def test_a_restart_sets_the_built_in_ones_back(tmp_path: Path) -> None:
    """Registered on start (``automanaged: onstart``): a changed spec is set back and one of a
    version no longer served is removed, as the aggregator's autoregistration."""
    config = Config(data_dir=tmp_path / "data", tls=False, scheduler=False, components=False)
    app = create_app(config)
    async with app.router.lifespan_context(app), Client.in_process(app.state.front) as c:
        await c.patch(f"{APISERVICES}/v1.apps", {"spec": {"groupPriorityMinimum": 5}})
        stale = apiservice("apps", "v1beta2")
        stale["metadata"]["labels"] = {"kube-aggregator.kubernetes.io/automanaged": "onstart"}
        await c.create(APISERVICES, stale)
        await c.create(APISERVICES, apiservice("mine.example.com", "v1"))
    app = create_app(config)
    async with app.router.lifespan_context(app), Client.in_process(app.state.front) as c:
        assert (await c.get(f"{APISERVICES}/v1.apps"))["spec"]["groupPriorityMinimum"] == 17800
        names = {s["metadata"]["name"] for s in (await c.list(APISERVICES))["items"]}
        assert "v1beta2.apps" not in names and "v1.mine.example.com" in names
