"""``serve --controllers``: kube-controller-manager's list of controllers (controllermanager.py)
and which components it leaves running (components.py)."""

from __future__ import annotations

import pytest

from controlplane import components
from controlplane.cli import build_parser
from controlplane.config import Config
from controlplane.controllermanager import (
    ALIASES,
    DISABLED_BY_DEFAULT,
    KNOWN,
    canonical,
    check,
    enabled_controllers,
    is_enabled,
    parse_list,
)

# upstream's own cases (cmd/kube-controller-manager/app/controller_manager_test.go, TestIsControllerEnabled),
# with made-up names: is_enabled decides on names alone
UPSTREAM_CASES = [
    ("on by name", "bravo", ["alpha", "bravo", "-charlie"], True),
    ("off by name", "charlie", ["alpha", "bravo", "-charlie"], False),
    ("on by default", "alpha", ["*"], True),
    ("off by default implicit, no star", "foxtrot", ["alpha", "bravo", "-charlie"], False),
]


@pytest.mark.parametrize(("case", "name", "entries", "expected"), UPSTREAM_CASES, ids=[c[0] for c in UPSTREAM_CASES])
def test_is_enabled_decides_as_upstream(case: str, name: str, entries: list[str], expected: bool) -> None:
    assert is_enabled(name, entries) is expected


def test_a_controller_off_by_default_needs_its_name() -> None:
    assert set(DISABLED_BY_DEFAULT) == {"bootstrap-signer-controller", "token-cleaner-controller",
                                        "selinux-warning-controller"}
    assert not is_enabled("bootstrap-signer-controller", ["*"])
    assert is_enabled("bootstrap-signer-controller", ["*", "bootstrap-signer-controller"])
    assert is_enabled("job-controller", ["*"])


def test_the_first_entry_naming_a_controller_decides() -> None:
    assert not is_enabled("job-controller", ["-job-controller", "job-controller", "*"])
    assert is_enabled("job-controller", ["job-controller", "-job-controller"])
    assert not is_enabled("job-controller", ["*", "-job-controller"])  # '*' names no controller
    assert is_enabled("job-controller", ["-deployment-controller", "*"])


def test_an_empty_list_runs_no_controller() -> None:
    assert parse_list("") == ()
    assert not any(enabled_controllers(()).values())
    assert [n for n, on in enabled_controllers(parse_list("job-controller")).items() if on] == ["job-controller"]


def test_the_list_is_read_as_pflag_reads_a_string_slice() -> None:
    assert parse_list("*,-replicaset-controller") == ("*", "-replicaset-controller")
    assert parse_list('"*",job') == ("*", "job")
    assert parse_list("a,,b") == ("a", "", "b")  # an empty entry stays, and is refused by check


def test_aliases_stand_for_the_canonical_names_and_keep_their_sign() -> None:
    assert canonical("replicaset") == "replicaset-controller"
    assert canonical("-garbagecollector") == "-garbage-collector-controller"
    assert canonical("-podgc") == "-pod-garbage-collector-controller"
    assert canonical("*") == "*"
    assert check(["*", "-deployment", "horizontalpodautoscaling"]) == (
        "*", "-deployment-controller", "horizontal-pod-autoscaler-controller")
    assert not enabled_controllers(parse_list("*,-replicaset"))["replicaset-controller"]
    assert all(target in KNOWN for target in ALIASES.values())
    assert not set(ALIASES) & set(KNOWN)


def test_an_unknown_name_is_refused_in_upstreams_words() -> None:
    with pytest.raises(ValueError, match=r'^"nosuch" is not in the list of known controllers$'):
        check(["*", "-nosuch"])
    # several: upstream's aggregated error, its messages once each, in brackets
    with pytest.raises(ValueError, match=r"^\[") as e:
        check(["foo", "-bar", "foo"])
    assert str(e.value) == ('["foo" is not in the list of known controllers, '
                            '"bar" is not in the list of known controllers]')
    with pytest.raises(ValueError, match=r'^"\*" is not in the list of known controllers$'):
        check(["-*"])  # only a bare '*' is the wildcard
    with pytest.raises(ValueError, match=r'^"" is not in the list of known controllers$'):
        check(parse_list("*,,job"))


def test_the_cloud_provider_loops_are_unknown_since_they_left_kube_controller_manager() -> None:
    for name in ("cloud-node-lifecycle-controller", "service-lb-controller", "node-route-controller",
                 "service", "route", "cloud-node-lifecycle"):
        with pytest.raises(ValueError, match="is not in the list of known controllers"):
            check([f"-{name}"])


def test_upstream_names_without_a_controller_here_are_accepted() -> None:
    assert check(["*", "-bootstrap-signer-controller", "-endpointslice-mirroring-controller", "ttl"])


def _serve_config(*argv: str) -> Config:
    from controlplane.cli import _config_from_args

    parser = build_parser()
    return _config_from_args(parser, parser.parse_args(["serve", *argv]))


def test_serve_takes_the_flag_repeated_and_refuses_an_unknown_name(capsys: pytest.CaptureFixture[str]) -> None:
    assert _serve_config().controllers == ("*",)
    config = _serve_config("--controllers", "*,-job", "--controllers=-deployment-controller")
    assert config.controllers == ("*", "-job", "-deployment-controller")
    assert not config.controller_enabled("job-controller")
    assert not config.controller_enabled("deployment-controller")
    assert config.controller_enabled("replicaset-controller")
    with pytest.raises(SystemExit) as e:
        _serve_config("--controllers", "*,-nosuch")
    assert e.value.code == 2
    assert '"nosuch" is not in the list of known controllers' in capsys.readouterr().err


def _running(config: Config) -> set[str]:
    return {c.name for c in components.enabled(config)}


def test_only_kube_controller_managers_components_read_the_list() -> None:
    everything = _running(Config())
    none = _running(Config(controllers=()))
    # the scheduler, the simulated kubelets, the autoscaler and kube-apiserver's own controllers stay
    assert none == {"scheduler", "nodes", "autoscaler", "default-service-cidr-controller", "apiservice-controller",
                    "apf-configuration-controller", "system-namespaces-controller"}
    assert everything - none == {c.name for c in components.COMPONENTS if c.controllers}
    for component in components.COMPONENTS:
        assert all(name in KNOWN for name in component.controllers), component.name


def test_a_component_playing_several_controllers_runs_while_one_of_them_is_on() -> None:
    assert "workload-controllers" in _running(Config(controllers=("*", "-replicaset-controller")))
    assert "workload-controllers" in _running(Config(controllers=("replicaset-controller",)))
    off = ("*", "-deployment-controller", "-replicaset-controller", "-garbage-collector-controller")
    assert "workload-controllers" not in _running(Config(controllers=off))
    assert "job-controller" in _running(Config(controllers=off))  # the collector's part goes, not the Job's
    assert "job-controller" not in _running(Config(controllers=(*off, "-job", "-ttl-after-finished")))
    assert "disruption-controller" not in _running(Config(controllers=("*", "-disruption")))


def test_no_scheduler_still_turns_every_controller_off() -> None:
    assert _running(Config(scheduler=False, controllers=("*",))) == {
        "nodes", "autoscaler", "clusterrole-aggregation-controller", "default-service-cidr-controller",
        "apiservice-controller", "apf-configuration-controller", "system-namespaces-controller"}
