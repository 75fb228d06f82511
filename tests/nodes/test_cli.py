"""``controlplane nodes`` (and beside it ``scheduler`` and ``autoscaler``): their errors, without a server."""

from __future__ import annotations

from pathlib import Path

import pytest

from controlplane.cli import main
from controlplane.nodes.cli import enable_crds


def _kubeconfig(tmp_path: Path) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text("""
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "http://127.0.0.1:28399"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
""")
    return path


def test_a_bad_stage_file_is_refused_by_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stages = tmp_path / "stages.yaml"
    stages.write_text("apiVersion: kwok.x-k8s.io/v1alpha1\nkind: Stage\nmetadata: {name: s}\n"
                      "spec: {resourceRef: {apiGroup: v1, kind: Pod}, next: {patches: []}}\n")
    assert main(["nodes", "--kubeconfig", str(_kubeconfig(tmp_path)), "--stages", str(stages)]) == 1
    assert "unsupported field(s) patches" in capsys.readouterr().err


def test_stage_files_may_be_several_as_kwoks_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good, bad = tmp_path / "good.yaml", tmp_path / "bad.yaml"
    good.write_text("apiVersion: kwok.x-k8s.io/v1alpha1\nkind: Stage\nmetadata: {name: ok}\n"
                    "spec: {resourceRef: {apiGroup: v1, kind: Pod}}")  # no newline at the end
    bad.write_text("apiVersion: kwok.x-k8s.io/v1alpha1\nkind: Stage\nmetadata: {name: s}\n"
                   "spec: {resourceRef: {apiGroup: v1, kind: Pod}, next: {patches: []}}\n")
    assert main(["nodes", "--kubeconfig", str(_kubeconfig(tmp_path)), "--stages", str(good),
                 "--stages", str(bad)]) == 1
    assert "stage 's'" in capsys.readouterr().err  # the second file is read too


def test_a_missing_stage_file_and_a_negative_count(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kubeconfig = str(_kubeconfig(tmp_path))
    assert main(["nodes", "--kubeconfig", kubeconfig, "--stages", str(tmp_path / "nope.yaml")]) == 1
    assert "nope.yaml" in capsys.readouterr().err
    assert main(["nodes", "--kubeconfig", kubeconfig, "--count", "-1"]) == 2
    with pytest.raises(SystemExit):
        main(["nodes", "--kubeconfig", kubeconfig, "--fail", "n", "--mode", "exploded"])


def test_enable_crds_takes_stage_alone_as_kwoks_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert enable_crds(["Stage", "Stage,"], None) == ("Stage",)  # repeated or comma-separated, as KWOK's
    kubeconfig = str(_kubeconfig(tmp_path))
    stages = tmp_path / "stages.yaml"
    stages.write_text("apiVersion: kwok.x-k8s.io/v1alpha1\nkind: Stage\nmetadata: {name: ok}\n"
                      "spec: {resourceRef: {apiGroup: v1, kind: Pod}}\n")
    for args, said in ((["--enable-crds", "Stage,Metric"], "Metric is not supported here (supported: Stage)"),
                       (["--enable-crds", "Stages"], "Stages is not one of KWOK's CRDs"),
                       (["--enable-crds", "Stage", "--stages", str(stages)],
                        "--stages and --enable-crds Stage cannot be used together")):
        assert main(["nodes", "--kubeconfig", kubeconfig, *args]) == 2
        assert said in capsys.readouterr().err


@pytest.mark.parametrize("command", ["nodes", "scheduler", "autoscaler"])
def test_a_kubeconfig_that_cannot_be_read_is_one_line_and_exit_1(tmp_path: Path, command: str,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nope"
    assert main([command, "--kubeconfig", str(missing)]) == 1
    assert capsys.readouterr().err == (f"controlplane {command}: error: cannot read the kubeconfig {missing}: "
                                       f"[Errno 2] No such file or directory: '{missing}'\n")


def test_the_autoscaler_says_which_server_it_cannot_reach(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # its start installs the karpenter.sh CRDs: a server that does not answer ends it there, a traceback before
    assert main(["autoscaler", "--kubeconfig", str(_kubeconfig(tmp_path))]) == 1
    assert capsys.readouterr().err.startswith("controlplane autoscaler: error: cannot connect to 127.0.0.1:28399")
