"""TaintNodesByCondition admission (api/nodetaint.py): a Node is created tainted
``node.kubernetes.io/not-ready:NoSchedule``, as kube-apiserver's plugin/pkg/admission/nodetaint;
``serve --disable-admission-plugins TaintNodesByCondition`` turns it off. (Over a real socket
with kubectl, and the node lifecycle controller taking the taint off:
tests/e2e/test_kubectl_day2.py.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from controlplane import cli
from controlplane.api.app import create_app
from controlplane.api.nodetaint import admit_node
from controlplane.client import Client
from controlplane.config import Config

NODES = "/api/v1/nodes"
NOT_READY = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}


def test_the_taint_is_added_unless_one_of_its_key_and_effect_is_there() -> None:
    def admitted(spec: Any) -> Any:
        node: dict[str, Any] = {"metadata": {"name": "n"}, **({} if spec is None else {"spec": spec})}
        admit_node(node)
        return node["spec"]

    assert admitted(None) == {"taints": [NOT_READY]}
    assert admitted({"taints": None, "unschedulable": True}) == {"taints": [NOT_READY], "unschedulable": True}
    mine = {"key": "node.kubernetes.io/not-ready", "value": "x", "effect": "NoSchedule"}
    assert admitted({"taints": [mine]}) == {"taints": [mine]}  # upstream's MatchTaint: key and effect
    other = {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}
    assert admitted({"taints": [other]}) == {"taints": [other, NOT_READY]}


async def test_a_created_node_is_tainted_an_updated_one_is_not(client: Client) -> None:
    created = await client.create(NODES, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
    assert created["spec"]["taints"] == [NOT_READY]
    assert (await client.get(f"{NODES}/n1"))["spec"]["taints"] == [NOT_READY]
    untainted = await client.patch(f"{NODES}/n1", {"spec": {"taints": None}}, patch_type="merge")
    assert "taints" not in untainted["spec"]
    replaced = await client.update(f"{NODES}/n1", untainted)
    assert "taints" not in replaced["spec"]
    # a server-side apply that creates the node is a create
    applied = await client.patch(f"{NODES}/n2", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n2"}},
                                 patch_type="apply", fieldManager="test")
    assert applied["spec"]["taints"] == [NOT_READY]


async def test_the_plugin_can_be_turned_off(tmp_path: Path) -> None:
    app = create_app(Config(data_dir=tmp_path / "data", tls=False, scheduler=False,
                            disable_admission_plugins=("TaintNodesByCondition",)))
    async with app.router.lifespan_context(app), Client.in_process(app.state.front) as c:
        created = await c.create(NODES, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}})
        assert not (created.get("spec") or {}).get("taints")


def test_only_the_plugins_this_server_can_turn_off_are_taken(capsys: pytest.CaptureFixture[str]) -> None:
    parser = cli.build_parser()
    args = parser.parse_args(["serve", "--disable-admission-plugins", "TaintNodesByCondition,"])
    assert cli._config_from_args(parser, args).disable_admission_plugins == ("TaintNodesByCondition",)
    with pytest.raises(SystemExit):
        cli._config_from_args(parser, parser.parse_args(["serve", "--disable-admission-plugins",
                                                         "TaintNodesByCondition,LimitRanger"]))
    assert "LimitRanger: only TaintNodesByCondition can be turned off here" in capsys.readouterr().err
