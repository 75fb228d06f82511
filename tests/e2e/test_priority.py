"""Priority admission and the system PriorityClasses, through the official client over a socket.

As kube-apiserver: a pod's ``spec.priority`` and ``spec.preemptionPolicy`` come
from its PriorityClass (or the ``globalDefault`` one, or 0), a class that does
not exist or a priority that differs from the class's is 403 Forbidden, and the
two ``system-*-critical`` classes exist from the start.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException


def _pod(name: str, **spec: Any) -> client.V1Pod:
    return client.V1Pod(metadata=client.V1ObjectMeta(name=name),
                        spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="pause")], **spec))


def _class(name: str, value: int, **kw: Any) -> client.V1PriorityClass:
    return client.V1PriorityClass(metadata=client.V1ObjectMeta(name=name), value=value, **kw)


def test_system_priority_classes_exist(api: client.ApiClient) -> None:
    classes = {pc.metadata.name: pc for pc in client.SchedulingV1Api(api).list_priority_class().items}
    assert classes["system-node-critical"].value == 2000001000
    assert classes["system-cluster-critical"].value == 2000000000
    assert classes["system-cluster-critical"].preemption_policy == "PreemptLowerPriority"


def test_priority_comes_from_the_class(api: client.ApiClient) -> None:
    core, sched = client.CoreV1Api(api), client.SchedulingV1Api(api)
    sched.create_priority_class(_class("prio-high", 1000, preemption_policy="Never"))
    made = core.create_namespaced_pod("default", _pod("prio-a", priority_class_name="prio-high"))
    assert made.spec.priority == 1000 and made.spec.preemption_policy == "Never"
    plain = core.create_namespaced_pod("default", _pod("prio-b"))
    assert plain.spec.priority == 0 and plain.spec.preemption_policy == "PreemptLowerPriority"
    assert plain.spec.priority_class_name is None
    # the priority stays when an update leaves it out (a patch removing it)
    kept = core.patch_namespaced_pod("prio-a", "default", {"spec": {"priority": None, "preemptionPolicy": None}})
    assert kept.spec.priority == 1000 and kept.spec.preemption_policy == "Never"


def test_global_default_class_names_itself_in_the_pod(api: client.ApiClient) -> None:
    core, sched = client.CoreV1Api(api), client.SchedulingV1Api(api)
    sched.create_priority_class(_class("prio-default", 7, global_default=True))
    try:
        got = core.create_namespaced_pod("default", _pod("prio-c"))
        assert got.spec.priority == 7 and got.spec.priority_class_name == "prio-default"
    finally:
        sched.delete_priority_class("prio-default")


@pytest.mark.parametrize(("spec", "message"), [
    ({"priority_class_name": "no-such-class"}, "no PriorityClass with name no-such-class was found"),
    ({"priority": 5}, "the integer value of priority (5) must not be provided in pod spec; priority admission "
                      "controller computed 0 from the given PriorityClass name"),
    ({"preemption_policy": "Never"}, "the string value of PreemptionPolicy (Never) must not be provided in pod "
                                     "spec; priority admission controller computed PreemptLowerPriority"),
])
def test_refused_with_403(api: client.ApiClient, spec: dict[str, Any], message: str) -> None:
    with pytest.raises(ApiException) as e:
        client.CoreV1Api(api).create_namespaced_pod("default", _pod("prio-refused", **spec))
    assert e.value.status == 403
    status = json.loads(e.value.body)
    assert status["reason"] == "Forbidden" and message in status["message"]
    assert status["message"].startswith('pods "prio-refused" is forbidden: ')
