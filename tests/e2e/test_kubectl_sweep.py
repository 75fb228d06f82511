"""kubectl commands a sweep against upstream found answered differently, with the real
kubectl against one ``controlplane serve`` (its controllers, no nodes) over a socket:
``rollout history`` after ``rollout undo`` of the sets whose history is ControllerRevisions
(controllers/history.py), ``patch --type=json`` that does not apply, a manifest or a strategic
merge patch whose value is of the wrong JSON type, and label and annotation keys that are not
label keys."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator

import pytest

from tests.e2e.test_kubectl import KUBECTL, kubectl
from tests.test_cli import Serve, running, start_serve


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    """With its controllers (and no nodes: the sets' pods are not needed)."""
    with running(start_serve(tmp_path_factory.mktemp("sweep"), scheduler=True)) as s:
        yield s

SETS = """
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  serviceName: db
  replicas: 0
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec: {containers: [{name: db, image: "db:1"}]}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec: {containers: [{name: a, image: "agent:1"}]}
"""


def history(served: Serve, what: str, rows: int) -> list[tuple[str, str]]:
    """``kubectl rollout history what`` as (revision, change-cause), once it has ``rows``."""
    deadline = time.monotonic() + 30
    while True:
        out = kubectl(served, "rollout", "history", what)
        got = [(line.split(maxsplit=1)[0], line.split(maxsplit=1)[1].strip())
               for line in out.splitlines()[2:] if line.strip()]
        if len(got) == rows:
            return got
        assert time.monotonic() < deadline, out
        time.sleep(0.2)


def test_a_set_rolled_back_lists_the_revision_with_its_own_change_cause(served: Serve) -> None:
    """Upstream's UpdateControllerRevision raises a revision's number and nothing else: the
    template undone to comes back as the newest revision with the change-cause it was made
    with, not the one the set carries now."""
    kubectl(served, "apply", "-f", "-", stdin=SETS)
    for what, container, image in (("statefulset/db", "db", "db:2"), ("daemonset/agent", "a", "agent:2")):
        assert history(served, what, 1) == [("1", "<none>")]
        kubectl(served, "annotate", what, f"kubernetes.io/change-cause=to {image}")
        kubectl(served, "set", "image", what, f"{container}={image}")
        assert history(served, what, 2) == [("1", "<none>"), ("2", f"to {image}")]
        assert "rolled back" in kubectl(served, "rollout", "undo", what, "--to-revision=1")
        deadline = time.monotonic() + 30
        while (got := history(served, what, 2)) != [("2", f"to {image}"), ("3", "<none>")]:
            assert time.monotonic() < deadline, got
            time.sleep(0.2)


def failing(served: Serve, *args: str, stdin: str = "") -> str:
    """What kubectl ``args``, which must exit 1, printed on stderr."""
    assert KUBECTL
    env = dict(os.environ, KUBECONFIG=str(served.kubeconfig), HOME=str(served.state))
    r = subprocess.run([KUBECTL, *args], capture_output=True, text=True, env=env, input=stdin, timeout=60)
    assert r.returncode == 1, (args, r.stdout, r.stderr)
    return r.stderr


def test_a_json_patch_that_does_not_apply_prints_upstreams_words(served: Serve) -> None:
    """kube-apiserver's Status for a JSON patch the library cannot apply carries its own
    words only, so kubectl prints them and nothing of the library's; a patch that is not a
    list does not decode (400)."""
    kubectl(served, "create", "configmap", "jp", "--from-literal=n=1")
    for patch in ('[{"op": "test", "path": "/data/n", "value": "2"}]', '[{"op": "remove", "path": "/data/zz"}]',
                  '[{"op": "bogus", "path": "/data/n"}]'):
        err = failing(served, "patch", "configmap", "jp", "--type=json", "-p", patch)
        assert err.strip() == "The request is invalid: the server rejected our request due to an error in our request"
    err = failing(served, "patch", "configmap", "jp", "--type=json", "-p", '{"op": "add"}')
    assert err.strip() == ("Error from server (BadRequest): json: cannot unmarshal object into Go value of type "
                           "jsonpatch.Patch")
    kubectl(served, "patch", "configmap", "jp", "--type=json", "-p",
            '[{"op": "replace", "path": "/data/n", "value": "2"}]')
    assert kubectl(served, "get", "configmap", "jp", "-o", "jsonpath={.data.n}") == "2"


MISTYPED = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: mistyped}
spec:
  replicas: %s
  selector: {matchLabels: {app: mistyped}}
  template:
    metadata: {labels: {app: mistyped}}
    spec:
      containers:
      - name: c
        image: nginx
        env: [{name: PORT, value: %s}]
"""


def test_a_manifest_of_a_mistyped_value_is_refused_in_gos_words(served: Serve) -> None:
    """The helm chart's classic mistakes, a quoted number or an unquoted env value: the
    innermost struct's type, the field names without list indexes, the Go type."""
    for replicas, value, why in (
            ('"3"', '"8080"', "string into Go struct field DeploymentSpec.spec.replicas of type int32"),
            ("3", "8080", "number into Go struct field EnvVar.spec.template.spec.containers.env.value of type string")):
        err = failing(served, "apply", "-f", "-", stdin=MISTYPED % (replicas, value))
        assert err.strip() == ('Error from server (BadRequest): error when creating "STDIN": Deployment in version '
                               f'"v1" cannot be handled as a Deployment: json: cannot unmarshal {why}'), err


def test_a_label_or_annotation_key_is_checked_as_upstreams_is_label_key(served: Serve) -> None:
    """Every problem of a key, in upstream's words (content.IsLabelKey, which IsQualifiedName
    now is): a subdomain prefix's with its example and regex, a key of two slashes as one
    message; an annotation's key is checked lowercased."""
    kubectl(served, "create", "configmap", "keys")
    err = failing(served, "label", "configmap", "keys", "a/b/c=1")
    assert err.strip() == (
        'The ConfigMap "keys" is invalid: metadata.labels: Invalid value: "a/b/c": a valid label key must consist of '
        "alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. "
        "'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?"
        "[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')")
    err = failing(served, "label", "configmap", "keys", "Bad_Prefix/k=1")
    assert err.strip() == (
        'The ConfigMap "keys" is invalid: metadata.labels: Invalid value: "Bad_Prefix/k": prefix part a lowercase '
        "RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end "
        "with an alphanumeric character (e.g. 'example.com', regex used for validation is "
        r"'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
    kubectl(served, "annotate", "configmap", "keys", "Example.com/Note=1")
    assert kubectl(served, "get", "configmap", "keys", "-o", "jsonpath={.metadata.annotations}") == \
        '{"Example.com/Note":"1"}'


def test_a_strategic_patch_of_a_mistyped_value_is_refused_as_upstreams_converter_words_it(served: Serve) -> None:
    """kubectl patch (strategic by default), edit and a client-side apply send a strategic
    merge patch, whose result upstream decodes with its unstructured converter: the patch
    itself, as Go prints the map, is the invalid value, and the converter's words the why."""
    kubectl(served, "create", "deployment", "typed", "--image=nginx", "--replicas=0")
    for patch, why in (('{"spec": {"replicas": "3"}}', '"map[spec:map[replicas:3]]": unrecognized type: int32'),
                       ('{"spec": {"template": {"metadata": {"labels": {"n": 5.5}}}}}',
                        '"map[spec:map[template:map[metadata:map[labels:map[n:5.5]]]]]": unrecognized type: string'),
                       ('{"spec": {"template": {"spec": {"containers": [{"name": "nginx", "args": "x"}]}}}}',
                        '"map[spec:map[template:map[spec:map[containers:[map[args:x name:nginx]]]]]]": cannot restore '
                        "slice from string")):
        err = failing(served, "patch", "deployment", "typed", "-p", patch)
        assert err.strip() == f"The request is invalid: patch: Invalid value: {why}", err
    kubectl(served, "create", "configmap", "typed")
    err = failing(served, "patch", "configmap", "typed", "-p", '{"data": {"n": 5}}')
    assert err.strip() == ('The request is invalid: patch: Invalid value: "map[data:map[n:5]]": cannot convert int64 '
                           "to string")


def test_the_last_label_annotation_or_finalizer_removed_leaves_no_empty_collection(served: Serve) -> None:
    """kube-apiserver encodes every object it stores from Go's ObjectMeta, whose maps and lists
    are ``omitempty``: ``kubectl label x k-`` of the last label leaves no ``labels: {}``, as the
    last annotation's, finalizer's or owner reference's removal leaves nothing; ``--overwrite``
    is still needed to change a value."""
    kubectl(served, "create", "configmap", "emptied")
    kubectl(served, "label", "configmap", "emptied", "tier=web")
    assert "'tier' already has a value (web), and --overwrite is false" in \
        failing(served, "label", "configmap", "emptied", "tier=db")
    kubectl(served, "label", "configmap", "emptied", "tier=db", "--overwrite")
    kubectl(served, "annotate", "configmap", "emptied", "note=x")
    kubectl(served, "patch", "configmap", "emptied", "--type=merge", "-p",
            '{"metadata": {"finalizers": ["example.com/hold"]}}')
    kubectl(served, "label", "configmap", "emptied", "tier-")
    kubectl(served, "annotate", "configmap", "emptied", "note-")
    kubectl(served, "patch", "configmap", "emptied", "--type=json", "-p",
            '[{"op": "remove", "path": "/metadata/finalizers/0"}]')
    meta = json.loads(kubectl(served, "get", "configmap", "emptied", "-o", "json"))["metadata"]
    assert not {"labels", "annotations", "finalizers", "ownerReferences"} & set(meta), meta
