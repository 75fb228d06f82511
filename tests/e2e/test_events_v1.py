"""events.k8s.io/v1 Events, stored with core/v1 Events and converted, over a socket."""

from __future__ import annotations

import datetime

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.e2e.test_kubectl import kubectl
from tests.test_cli import Serve


def test_an_events_v1_event_is_a_core_event_too(served: Serve, api: client.ApiClient) -> None:
    events = client.EventsV1Api(api)
    now = datetime.datetime.now(datetime.UTC)
    created = events.create_namespaced_event("default", client.EventsV1Event(
        metadata=client.V1ObjectMeta(name="web-0.scheduled"), event_time=now, reporting_controller="example.com/ctl",
        reporting_instance="ctl-0", action="Scheduling", reason="Scheduled", type="Normal",
        note="assigned default/web-0 to node-1",
        regarding=client.V1ObjectReference(kind="Pod", namespace="default", name="web-0")))
    assert created.note == "assigned default/web-0 to node-1" and created.regarding.name == "web-0"
    core = client.CoreV1Api(api).read_namespaced_event("web-0.scheduled", "default")
    assert core.message == created.note and core.involved_object.name == "web-0"
    assert core.reporting_component == "example.com/ctl"
    # a core event reads as events.k8s.io/v1, and field selectors use the served names
    client.CoreV1Api(api).create_namespaced_event("default", client.CoreV1Event(
        metadata=client.V1ObjectMeta(name="web-1.pulled"), reason="Pulled", message="pulled nginx", count=2,
        event_time=now,  # the client's EventsV1Event cannot read an event without one (upstream serves null)
        involved_object=client.V1ObjectReference(kind="Pod", namespace="default", name="web-1")))
    got = events.read_namespaced_event("web-1.pulled", "default")
    assert got.note == "pulled nginx" and got.deprecated_count == 2 and got.regarding.name == "web-1"
    listed = events.list_namespaced_event("default", field_selector="regarding.name=web-1")
    assert [e.metadata.name for e in listed.items] == ["web-1.pulled"]
    patched = events.patch_namespaced_event("web-1.pulled", "default", {"note": "pulled nginx:1.27"})
    assert patched.note == "pulled nginx:1.27"
    assert client.CoreV1Api(api).read_namespaced_event("web-1.pulled", "default").message == "pulled nginx:1.27"
    assert "web-1.pulled" in kubectl(served, "get", "events.v1.events.k8s.io", "-o", "name")
    # the source is a struct Go always writes: {} in both views, never missing
    assert core.source is not None and core.source.component is None
    assert got.deprecated_source is not None


def test_events_v1_requires_what_upstream_requires(api: client.ApiClient) -> None:
    with pytest.raises(ApiException) as e:
        client.EventsV1Api(api).create_namespaced_event("default", client.EventsV1Event(
            metadata=client.V1ObjectMeta(name="bad"), event_time=datetime.datetime.now(datetime.UTC)))
    assert e.value.status == 422
    assert "reportingController" in e.value.body
