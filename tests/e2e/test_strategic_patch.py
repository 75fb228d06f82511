"""Strategic merge patch through real clients: kubectl apply's three-way merge, kubectl patch/label/annotate/
set image, and the Python client's dict patches, against ``controlplane serve`` over a socket."""

from __future__ import annotations

import json
import os
import subprocess
from typing import Any

import httpx
import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.e2e.test_kubectl import KUBECTL, kubectl
from tests.e2e.test_kubernetes_client import bearer
from tests.test_cli import Serve

MANIFEST = """
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {name}
  labels: {labels}
spec:
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:
      containers:
      - name: web
        image: {image}
        env: {env}
        ports: {ports}
"""


def manifest(name: str, *, labels: str, image: str, env: str, ports: str) -> str:
    return MANIFEST.format(name=name, labels=labels, image=image, env=env, ports=ports)


def get(served: Serve, *args: str) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(kubectl(served, "get", *args, "-o", "json"))
    return out


def kubectl_fails(served: Serve, *args: str) -> str:
    assert KUBECTL
    env = dict(os.environ, KUBECONFIG=str(served.kubeconfig), HOME=str(served.state))
    r = subprocess.run([KUBECTL, *args], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode != 0, r.stdout
    return r.stderr


def test_kubectl_apply_again_is_a_three_way_merge(served: Serve) -> None:
    first = manifest("web", labels="{app: web, team: a}", image="nginx:1.27",
                     env='[{name: A, value: "1"}]',
                     ports="[{containerPort: 80, name: http}, {containerPort: 443, name: https}]")
    assert "created" in kubectl(served, "apply", "-f", "-", stdin=first)
    # others change the live object: a label, an annotation, the replicas, a sidecar container
    kubectl(served, "label", "deployment", "web", "owner=ops")
    kubectl(served, "annotate", "deployment", "web", "note=keep me")
    kubectl(served, "patch", "deployment", "web", "--type", "merge", "-p", '{"spec": {"replicas": 5}}')
    kubectl(served, "patch", "deployment", "web", "-p",
            '{"spec": {"template": {"spec": {"containers": [{"name": "proxy", "image": "envoy:1"}]}}}}')

    # the manifest changes: a new image, one more env var, port 443 and label team removed
    second = manifest("web", labels="{app: web}", image="nginx:1.28",
                      env='[{name: A, value: "1"}, {name: B, value: "2"}]',
                      ports="[{containerPort: 80, name: http}]")
    assert "configured" in kubectl(served, "apply", "-f", "-", stdin=second)

    d = get(served, "deployment", "web")
    meta, spec = d["metadata"], d["spec"]
    assert meta["labels"] == {"app": "web", "owner": "ops"}
    assert meta["annotations"]["note"] == "keep me"
    assert json.loads(meta["annotations"]["kubectl.kubernetes.io/last-applied-configuration"])["metadata"][
        "labels"] == {"app": "web"}
    assert spec["replicas"] == 5  # the manifest never set it, so the live value stands
    containers = spec["template"]["spec"]["containers"]
    # kubectl patch put the new container first (upstream's order for items the live list lacks)
    assert [c["name"] for c in containers] == ["proxy", "web"]
    web = containers[1]
    assert web["image"] == "nginx:1.28"
    assert web["env"] == [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]
    assert web["ports"] == [{"containerPort": 80, "name": "http", "protocol": "TCP"}]  # defaulted, as upstream
    assert containers[0]["image"] == "envoy:1"

    # applying the same manifest again changes nothing; kubectl still sends a patch (the live order of the
    # containers differs from the manifest's), which the server applies without a write
    rv = meta["resourceVersion"]
    kubectl(served, "apply", "-f", "-", stdin=second)
    assert get(served, "deployment", "web")["metadata"]["resourceVersion"] == rv


def test_kubectl_patch_merges_containers_by_name(served: Serve) -> None:
    pat = manifest("pat", labels="{app: pat}", image="nginx:1", env="[]", ports="[]")
    kubectl(served, "apply", "-f", "-", stdin=pat)
    # the manifest's env: [] and ports: [] are stored as nothing (protobuf storage: nil lists), so the
    # live object lacks what the manifest has, kubectl sends them again and says "configured", as it
    # does against kube-apiserver (kubernetes/kubernetes#114777's kind); the server writes nothing
    rv = get(served, "deployment", "pat")["metadata"]["resourceVersion"]
    assert "configured" in kubectl(served, "apply", "-f", "-", stdin=pat)
    assert get(served, "deployment", "pat")["metadata"]["resourceVersion"] == rv
    kubectl(served, "patch", "deployment", "pat", "--type", "strategic", "-p",
            '{"spec": {"template": {"spec": {"containers": [{"name": "log", "image": "fluentd:1"}]}}}}')
    kubectl(served, "patch", "deployment", "pat", "--type", "strategic", "-p",
            '{"spec": {"template": {"spec": {"containers": [{"name": "web", "image": "nginx:2"}]}}}}')
    containers = get(served, "deployment", "pat")["spec"]["template"]["spec"]["containers"]
    # a new item goes before the live ones; a merged item keeps its place
    assert [(c["name"], c["image"]) for c in containers] == [("log", "fluentd:1"), ("web", "nginx:2")]

    kubectl(served, "patch", "deployment", "pat", "-p",
            '{"spec": {"template": {"spec": {"containers": [{"name": "log", "$patch": "delete"}]}}}}')
    containers = get(served, "deployment", "pat")["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in containers] == ["web"]

    err = kubectl_fails(served, "patch", "deployment", "pat", "-p",
                        '{"spec": {"template": {"spec": {"containers": [{"image": "nginx:3"}]}}}}')
    assert "Error from server (BadRequest): map: map[image:nginx:3] does not contain declared merge key: name" in err
    err = kubectl_fails(served, "patch", "deployment", "pat", "-p", '{"metadata": {"$patch": "bogus"}}')
    assert "unknown patch type: bogus" in err
    rv = get(served, "deployment", "pat")["metadata"]["resourceVersion"]
    same = '{"metadata": {"labels": {"app": "pat"}}}'
    assert "(no change)" in kubectl(served, "patch", "deployment", "pat", "-p", same)
    assert get(served, "deployment", "pat")["metadata"]["resourceVersion"] == rv


def test_kubectl_label_annotate_and_set_image(served: Serve) -> None:
    kubectl(served, "apply", "-f", "-",
            stdin=manifest("img", labels="{app: img, tier: fe}", image="nginx:1", env="[]", ports="[]"))
    kubectl(served, "label", "deployment", "img", "tier=be", "--overwrite")
    kubectl(served, "label", "deployment", "img", "app-")
    kubectl(served, "annotate", "deployment", "img", "a=1", "b=2")
    kubectl(served, "annotate", "deployment", "img", "a-")
    assert "image updated" in kubectl(served, "set", "image", "deployment/img", "web=nginx:2")
    d = get(served, "deployment", "img")
    assert d["metadata"]["labels"] == {"tier": "be"}
    assert d["metadata"]["annotations"]["b"] == "2" and "a" not in d["metadata"]["annotations"]
    assert [c["image"] for c in d["spec"]["template"]["spec"]["containers"]] == ["nginx:2"]


UNION = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: union}
spec:
  selector: {matchLabels: {app: union}}
  strategy: %s
  template:
    metadata: {labels: {app: union}}
    spec:
      containers: [{name: c, image: busybox}]
      volumes: [{name: data, %s}, {name: keep, emptyDir: {}}]
"""


def test_kubectl_apply_switches_union_members_with_retain_keys(served: Serve) -> None:
    kubectl(served, "apply", "-f", "-",
            stdin=UNION % ("{type: RollingUpdate, rollingUpdate: {maxSurge: 1}}", "emptyDir: {}"))
    # kubectl sends "$retainKeys" for the strategy and for the volume whose source changes
    second = UNION % ("{type: Recreate}", "configMap: {name: cfg}")
    kubectl(served, "apply", "-f", "-", stdin=second)
    spec = get(served, "deployment", "union")["spec"]
    assert spec["strategy"] == {"type": "Recreate"}
    assert spec["template"]["spec"]["volumes"] == [{"name": "data", "configMap": {"name": "cfg", "defaultMode": 420}},
                                                   {"name": "keep", "emptyDir": {}}]


def test_kubectl_rollout_restart_pause_and_resume(served: Serve) -> None:
    kubectl(served, "apply", "-f", "-",
            stdin=manifest("roll", labels="{app: roll}", image="nginx:1", env="[]", ports="[]"))
    assert "restarted" in kubectl(served, "rollout", "restart", "deployment/roll")
    assert "paused" in kubectl(served, "rollout", "pause", "deployment/roll")
    d = get(served, "deployment", "roll")
    assert "kubectl.kubernetes.io/restartedAt" in d["spec"]["template"]["metadata"]["annotations"]
    assert d["spec"]["template"]["metadata"]["labels"] == {"app": "roll"}
    assert d["spec"]["paused"] is True
    assert "resumed" in kubectl(served, "rollout", "resume", "deployment/roll")
    assert "paused" not in get(served, "deployment", "roll")["spec"]


def test_kubectl_edit_sends_a_strategic_merge_patch(served: Serve) -> None:
    kubectl(served, "apply", "-f", "-",
            stdin=manifest("edit", labels="{app: edit}", image="nginx:1", env="[]", ports="[]"))
    assert KUBECTL
    env = dict(os.environ, KUBECONFIG=str(served.kubeconfig), HOME=str(served.state),
               KUBE_EDITOR="sed -i -e s/nginx:1$/nginx:5/")
    r = subprocess.run([KUBECTL, "edit", "deployment", "edit"], capture_output=True, text=True,
                       env=env, timeout=60)
    assert r.returncode == 0 and "edited" in r.stdout, r.stderr
    assert get(served, "deployment", "edit")["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:5"


def test_finalizers_merge_as_a_set_and_delete_from_primitive_list(served: Serve) -> None:
    kubectl(served, "apply", "-f", "-",
            stdin="{apiVersion: v1, kind: ConfigMap, metadata: {name: fin}}")
    url = f"{served.url}/api/v1/namespaces/default/configmaps/fin"
    headers = {"content-type": "application/strategic-merge-patch+json", **bearer(served)}
    for patch in ({"metadata": {"finalizers": ["x/a", "x/b"]}}, {"metadata": {"finalizers": ["x/b", "x/c"]}}):
        r = httpx.patch(url, json=patch, headers=headers)
        assert r.status_code == 200, r.text
    assert r.json()["metadata"]["finalizers"] == ["x/a", "x/b", "x/c"]
    r = httpx.patch(url, json={"metadata": {"$deleteFromPrimitiveList/finalizers": ["x/a", "x/b", "x/c"]}},
                    headers=headers)
    assert r.status_code == 200, r.text
    assert "finalizers" not in r.json()["metadata"] or r.json()["metadata"]["finalizers"] == []
    r = httpx.patch(url, content=b"[]", headers=headers)
    assert r.status_code == 400 and r.json()["reason"] == "BadRequest"


def test_a_resource_version_in_the_patch_is_a_precondition(served: Serve) -> None:
    kubectl(served, "apply", "-f", "-",
            stdin="{apiVersion: v1, kind: ConfigMap, metadata: {name: pre}, data: {a: '1'}}")
    url = f"{served.url}/api/v1/namespaces/default/configmaps/pre"
    headers = {"content-type": "application/strategic-merge-patch+json", **bearer(served)}
    rv = httpx.get(url, headers=bearer(served)).json()["metadata"]["resourceVersion"]
    r = httpx.patch(url, json={"metadata": {"resourceVersion": rv}, "data": {"a": "2"}}, headers=headers)
    assert r.status_code == 200, r.text
    assert r.json()["metadata"]["resourceVersion"] != rv
    r = httpx.patch(url, json={"metadata": {"resourceVersion": rv}, "data": {"a": "3"}}, headers=headers)
    assert r.status_code == 409 and r.json()["reason"] == "Conflict"
    assert httpx.get(url, headers=bearer(served)).json()["data"] == {"a": "2"}
    r = httpx.patch(url, content=b"{}", headers={**headers, "content-type": "text/plain"})
    assert r.status_code == 415 and "application/strategic-merge-patch+json" in r.json()["message"]


def test_python_client_dict_patch_is_a_strategic_merge(served: Serve, api: client.ApiClient) -> None:
    apps = client.AppsV1Api(api)
    kubectl(served, "apply", "-f", "-",
            stdin=manifest("py", labels="{app: py}", image="nginx:1", env='[{name: A, value: "1"}]',
                           ports="[{containerPort: 80}]"))
    kubectl(served, "patch", "deployment", "py", "-p",
            '{"spec": {"template": {"spec": {"containers": [{"name": "side", "image": "envoy:1"}]}}}}')
    # only "web" named: a JSON merge patch would drop "side" and web's env and ports
    body = {"spec": {"template": {"spec": {"containers": [{"name": "web", "image": "nginx:2",
                                                           "env": [{"name": "B", "value": "2"}]}]}}},
            "metadata": {"labels": {"patched": "yes"}}}
    d = apps.patch_namespaced_deployment("py", "default", body)
    containers = d.spec.template.spec.containers
    assert [(c.name, c.image) for c in containers] == [("side", "envoy:1"), ("web", "nginx:2")]
    assert [(e.name, e.value) for e in containers[1].env] == [("B", "2"), ("A", "1")]
    assert [p.container_port for p in containers[1].ports] == [80]
    assert d.metadata.labels == {"app": "py", "patched": "yes"}

    with pytest.raises(ApiException) as e:
        apps.patch_namespaced_deployment("py", "default", {"spec": {"template": {"spec": {
            "containers": [{"image": "nginx:3"}]}}}})
    assert e.value.status == 400
    assert "does not contain declared merge key: name" in json.loads(e.value.body)["message"]


def test_python_client_status_patch_merges_conditions_by_type(served: Serve, api: client.ApiClient) -> None:
    v1 = client.CoreV1Api(api)
    v1.create_namespaced_pod("default", client.V1Pod(
        metadata=client.V1ObjectMeta(name="cond"),
        spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="busybox")])))
    for condition in ({"type": "Initialized", "status": "True"}, {"type": "Ready", "status": "False"},
                      {"type": "Ready", "status": "True"}):
        pod = v1.patch_namespaced_pod_status("cond", "default", {"status": {"conditions": [condition]}})
    conditions = {(c.type, c.status) for c in pod.status.conditions}
    assert {("Initialized", "True"), ("Ready", "True")} <= conditions
    assert ("Ready", "False") not in conditions
    assert pod.status.phase == "Pending"
