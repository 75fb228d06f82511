"""The official ``kubernetes`` client's typed API over every resource the server serves: each
``list_*`` of every ``*Api`` class whose resource discovery lists, then each ``read_*`` of the
objects listed (the object and its subresources), deserialised into the client's models. A field
of the wrong type, a required field left out or an unparsable date fails there; a field the
client's API does not know, which its models drop without a word, is found by comparing each list
with its raw JSON. (The models do not check enum values.)

Two failures are the client's own: its models require fields that kube-apiserver serves as null
(``KNOWN_CLIENT_BUGS``); those are checked to be exactly that, the raw answer as upstream's."""

from __future__ import annotations

import base64
import datetime
import inspect
import re
import time
from collections.abc import Iterator
from typing import Any

import orjson
import pydantic
import pytest
from kubernetes import client
from kubernetes.client import V1ObjectMeta as Meta

from tests.test_cli import Serve, running, start_serve

NS = "sweep"

# model -> field the client requires but upstream serves as null:
# - events.k8s.io/v1 Event.eventTime, null for every event written through core/v1 without one
#   (kubernetes-client/python#1616);
# - storage.k8s.io/v1 CSINodeSpec.drivers, null for a node without CSI drivers, as a kubelet
#   creates it and protobuf stores an empty list (kubernetes-client/python#1778, #1909).
KNOWN_CLIENT_BUGS = {"EventsV1Event": "eventTime", "V1CSINodeSpec": "drivers"}

# Reading these needs more than a name (a container, a running pod); other tests cover them.
UNREAD_SUBRESOURCES = {"log", "proxy", "attach", "exec", "portforward"}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    with running(start_serve(tmp_path_factory.mktemp("pysweep"), scheduler=True, extra=("--nodes", "1"))) as s:
        yield s


def _path(cls: type, method: str) -> str | None:
    """The request path a generated method sends, from its ``_<method>_serialize`` helper."""
    helper = getattr(cls, f"_{method}_serialize", None)
    found = re.search(r"resource_path='([^']+)'", inspect.getsource(helper)) if helper else None
    return found.group(1) if found else None


def _api_classes() -> Iterator[tuple[str, type]]:
    for name, cls in inspect.getmembers(client, inspect.isclass):
        if name.endswith("Api") and name not in ("ApiClient", "CustomObjectsApi") and hasattr(cls, "get_api_resources"):
            yield name, cls


def _wait(check: Any, what: str, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"{what} within {timeout} s"
        time.sleep(0.2)


@pytest.fixture(scope="module")
def populated(api: client.ApiClient) -> client.ApiClient:
    """One object of most kinds users create, through the typed ``create_*`` and the models."""
    core, apps, batch = client.CoreV1Api(api), client.AppsV1Api(api), client.BatchV1Api(api)
    core.create_namespace(client.V1Namespace(metadata=Meta(name=NS)))
    labels = {"app": "web"}
    template = client.V1PodTemplateSpec(metadata=Meta(labels=labels), spec=client.V1PodSpec(
        containers=[client.V1Container(name="c", image="nginx", ports=[client.V1ContainerPort(container_port=80)])]))
    apps.create_namespaced_deployment(NS, client.V1Deployment(metadata=Meta(name="web"), spec=client.V1DeploymentSpec(
        replicas=2, selector=client.V1LabelSelector(match_labels=labels), template=template)))
    apps.create_namespaced_stateful_set(NS, client.V1StatefulSet(
        metadata=Meta(name="db"), spec=client.V1StatefulSetSpec(
            service_name="db", selector=client.V1LabelSelector(match_labels=labels), template=template)))
    apps.create_namespaced_daemon_set(NS, client.V1DaemonSet(metadata=Meta(name="agent"), spec=client.V1DaemonSetSpec(
        selector=client.V1LabelSelector(match_labels=labels), template=template)))
    job = client.V1JobSpec(template=client.V1PodTemplateSpec(spec=client.V1PodSpec(
        restart_policy="Never", containers=[client.V1Container(name="c", image="busybox")])))
    batch.create_namespaced_job(NS, client.V1Job(metadata=Meta(name="once"), spec=job))
    batch.create_namespaced_cron_job(NS, client.V1CronJob(metadata=Meta(name="tick"), spec=client.V1CronJobSpec(
        schedule="*/5 * * * *", job_template=client.V1JobTemplateSpec(spec=job))))
    core.create_namespaced_service(NS, client.V1Service(metadata=Meta(name="web"), spec=client.V1ServiceSpec(
        type="LoadBalancer", selector=labels, ports=[client.V1ServicePort(port=80)])))
    net = client.NetworkingV1Api(api)
    net.create_namespaced_ingress(NS, client.V1Ingress(metadata=Meta(name="web"), spec=client.V1IngressSpec(
        default_backend=client.V1IngressBackend(service=client.V1IngressServiceBackend(
            name="web", port=client.V1ServiceBackendPort(number=80))))))
    net.create_namespaced_network_policy(NS, client.V1NetworkPolicy(
        metadata=Meta(name="deny"), spec=client.V1NetworkPolicySpec(
            pod_selector=client.V1LabelSelector(), policy_types=["Ingress"])))
    client.PolicyV1Api(api).create_namespaced_pod_disruption_budget(NS, client.V1PodDisruptionBudget(
        metadata=Meta(name="web"), spec=client.V1PodDisruptionBudgetSpec(
            min_available=1, selector=client.V1LabelSelector(match_labels=labels))))
    client.AutoscalingV2Api(api).create_namespaced_horizontal_pod_autoscaler(NS, client.V2HorizontalPodAutoscaler(
        metadata=Meta(name="web"), spec=client.V2HorizontalPodAutoscalerSpec(
            scale_target_ref=client.V2CrossVersionObjectReference(api_version="apps/v1", kind="Deployment", name="web"),
            max_replicas=3, metrics=[client.V2MetricSpec(type="Resource", resource=client.V2ResourceMetricSource(
                name="cpu", target=client.V2MetricTarget(type="Utilization", average_utilization=50)))])))
    core.create_namespaced_resource_quota(NS, client.V1ResourceQuota(
        metadata=Meta(name="q"), spec=client.V1ResourceQuotaSpec(hard={"pods": "50"})))
    core.create_namespaced_limit_range(NS, client.V1LimitRange(metadata=Meta(name="lr"), spec=client.V1LimitRangeSpec(
        limits=[client.V1LimitRangeItem(type="Container", default={"cpu": "100m"})])))
    rbac = client.RbacAuthorizationV1Api(api)
    rbac.create_namespaced_role(NS, client.V1Role(metadata=Meta(name="reader"), rules=[client.V1PolicyRule(
        api_groups=[""], resources=["pods"], verbs=["get"])]))
    rbac.create_namespaced_role_binding(NS, client.V1RoleBinding(
        metadata=Meta(name="reader"),
        role_ref=client.V1RoleRef(api_group="rbac.authorization.k8s.io", kind="Role", name="reader"),
        subjects=[client.RbacV1Subject(kind="ServiceAccount", name="default", namespace=NS)]))
    now = datetime.datetime.now(datetime.UTC)
    client.CoordinationV1Api(api).create_namespaced_lease(NS, client.V1Lease(
        metadata=Meta(name="lock"), spec=client.V1LeaseSpec(
            holder_identity="me", lease_duration_seconds=15, acquire_time=now, renew_time=now)))
    client.SchedulingV1Api(api).create_priority_class(client.V1PriorityClass(metadata=Meta(name="high"), value=1000))
    client.NodeV1Api(api).create_runtime_class(client.V1RuntimeClass(metadata=Meta(name="gvisor"), handler="runsc"))
    admission = client.AdmissionregistrationV1Api(api)  # a mutating policy whose selector takes nothing here
    admission.create_mutating_admission_policy(client.V1MutatingAdmissionPolicy(
        metadata=Meta(name="stamp"), spec=client.V1MutatingAdmissionPolicySpec(
            match_constraints=client.V1MatchResources(
                resource_rules=[client.V1NamedRuleWithOperations(api_groups=[""], api_versions=["v1"],
                                                                 operations=["CREATE"], resources=["configmaps"])],
                object_selector=client.V1LabelSelector(match_labels={"stamp": "yes"})),
            reinvocation_policy="Never", mutations=[client.V1Mutation(
                patch_type="ApplyConfiguration", apply_configuration=client.V1ApplyConfiguration(
                    expression='Object{metadata: Object.metadata{annotations: {"stamped": "yes"}}}'))])))
    admission.create_mutating_admission_policy_binding(client.V1MutatingAdmissionPolicyBinding(
        metadata=Meta(name="stamp"), spec=client.V1MutatingAdmissionPolicyBindingSpec(policy_name="stamp")))
    client.EventsV1Api(api).create_namespaced_event(NS, client.EventsV1Event(
        metadata=Meta(name="ev"), event_time=now, reporting_controller="example.com/sweep", reporting_instance="i",
        action="Test", reason="Test", type="Normal",
        regarding=client.V1ObjectReference(kind="Pod", name="x", namespace=NS)))
    resource = client.ResourceV1Api(api)
    resource.create_device_class(client.V1DeviceClass(metadata=Meta(name="gpu"), spec=client.V1DeviceClassSpec()))
    resource.create_namespaced_resource_claim_template(NS, client.V1ResourceClaimTemplate(
        metadata=Meta(name="gpu"), spec=client.V1ResourceClaimTemplateSpec(spec=client.V1ResourceClaimSpec(
            devices=client.V1DeviceClaim(requests=[client.V1DeviceRequest(
                name="gpu", exactly=client.V1ExactDeviceRequest(device_class_name="gpu"))])))))
    _approved_csr(api)
    _bound_claim(api)
    _wait(lambda: (apps.read_namespaced_deployment_status("web", NS).status.ready_replicas or 0) == 2,
          "the deployment's two pods ready")
    return api


def _approved_csr(api: client.ApiClient) -> None:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    request = x509.CertificateSigningRequestBuilder().subject_name(
        x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "alice")])).sign(ec.generate_private_key(ec.SECP256R1()),
                                                                             hashes.SHA256())
    certificates = client.CertificatesV1Api(api)
    certificates.create_certificate_signing_request(client.V1CertificateSigningRequest(
        metadata=Meta(name="alice"), spec=client.V1CertificateSigningRequestSpec(
            request=base64.b64encode(request.public_bytes(serialization.Encoding.PEM)).decode(),
            signer_name="kubernetes.io/kube-apiserver-client", usages=["client auth"])))
    csr = certificates.read_certificate_signing_request("alice")
    csr.status.conditions = [
        client.V1CertificateSigningRequestCondition(type="Approved", status="True", reason="Sweep")]
    certificates.replace_certificate_signing_request_approval("alice", csr)


def _bound_claim(api: client.ApiClient) -> None:
    """A 1Gi claim the volume controller binds to a 5Gi volume: its status.capacity is larger
    than its request, as on any cluster with pre-provisioned volumes."""
    core = client.CoreV1Api(api)
    core.create_persistent_volume(client.V1PersistentVolume(
        metadata=Meta(name="pv1"), spec=client.V1PersistentVolumeSpec(
            capacity={"storage": "5Gi"}, access_modes=["ReadWriteOnce"], storage_class_name="manual",
            host_path=client.V1HostPathVolumeSource(path="/tmp/pv1"))))
    core.create_namespaced_persistent_volume_claim(NS, client.V1PersistentVolumeClaim(
        metadata=Meta(name="claim"), spec=client.V1PersistentVolumeClaimSpec(
            storage_class_name="manual", access_modes=["ReadWriteOnce"],
            resources=client.V1VolumeResourceRequirements(requests={"storage": "1Gi"}))))
    _wait(lambda: core.read_namespaced_persistent_volume_claim("claim", NS).status.phase == "Bound",
          "the claim bound")


def _unknown_fields(raw: Any, typed: Any, at: str = "") -> Iterator[str]:
    """The paths of fields in ``raw`` (the JSON answer) that the typed model dropped."""
    if isinstance(raw, dict) and isinstance(typed, dict):
        for key, value in raw.items():
            if key not in typed:
                if value is not None:
                    yield f"{at}.{key}"
            elif key != "fieldsV1":  # free-form
                yield from _unknown_fields(value, typed[key], f"{at}.{key}")
    elif isinstance(raw, list) and isinstance(typed, list):
        for a, b in zip(raw, typed, strict=False):
            yield from _unknown_fields(a, b, f"{at}[]")


def _known_client_bug(e: Exception) -> bool:
    """The client's model refusing a null its upstream API serves (``KNOWN_CLIENT_BUGS``)."""
    if not isinstance(e, pydantic.ValidationError) or e.title not in KNOWN_CLIENT_BUGS:
        return False
    return all(err["loc"] == (KNOWN_CLIENT_BUGS[e.title],) and err["input"] is None for err in e.errors())


def test_every_served_resource_lists_and_reads_through_the_typed_client(populated: client.ApiClient) -> None:
    failures: list[str] = []
    client_bugs: set[str] = set()
    lists = reads = 0
    for name, cls in _api_classes():
        inst = cls(populated)
        try:
            served = {r.name for r in inst.get_api_resources().resources}
        except client.exceptions.NotFoundException:
            continue  # a group/version the server does not serve (alpha, beta off by default)
        readers = {_path(cls, m): m for m in dir(cls) if re.fullmatch(r"read_[a-z_]+", m)
                   and not m.endswith(("_with_http_info", "_without_preload_content"))}
        for method in sorted(dir(cls)):
            if not re.fullmatch(r"list_[a-z_]+", method) or method.startswith("list_namespaced_") \
                    or method.endswith(("_with_http_info", "_without_preload_content")):
                continue
            path = _path(cls, method)
            assert path, method
            resource = path.rsplit("/", 1)[1]
            if resource not in served:
                continue  # listed in the client, not served by us (see docs/api-compatibility.md)
            try:
                items = getattr(inst, method)().items
            except Exception as e:
                if _known_client_bug(e):
                    client_bugs.add(f"{name}.{method}")
                else:
                    failures.append(f"{name}.{method}: {e}")
                continue
            lists += 1
            raw: Any = getattr(inst, method)(_preload_content=False)
            typed = populated.sanitize_for_serialization(items)
            dropped = {p for a, b in zip(orjson.loads(raw.data)["items"], typed, strict=False)
                       for p in _unknown_fields(a, b)}
            failures.extend(f"{name}.{method}: the client does not know {p}" for p in sorted(dropped))
            namespaced = method.endswith("_for_all_namespaces")
            scope = "/namespaces/{namespace}/" if namespaced else "/"
            item_path = f"{path.rsplit('/', 1)[0]}{scope}{resource}/{{name}}"
            for reader_path, reader in readers.items():
                if reader_path is None or not reader_path.startswith(item_path):
                    continue
                sub = reader_path[len(item_path):]
                if sub and (not sub.startswith("/") or sub[1:] in UNREAD_SUBRESOURCES):
                    continue
                for item in items[:5]:
                    args = (item.metadata.name, item.metadata.namespace) if namespaced else (item.metadata.name,)
                    try:
                        getattr(inst, reader)(*args)
                        reads += 1
                    except Exception as e:
                        failures.append(f"{name}.{reader}{args}: {e}")
    assert not failures, "\n".join(failures)
    assert lists > 50 and reads > 150, (lists, reads)
    assert client_bugs <= {"EventsV1Api.list_event_for_all_namespaces", "StorageV1Api.list_csi_node"}, client_bugs


def test_the_client_bugs_are_nulls_upstream_serves(populated: client.ApiClient) -> None:
    """What the client refuses is what kube-apiserver sends: a CSINode without drivers has
    ``drivers: null``; an event written through core/v1 has no eventTime."""
    nodes: Any = client.StorageV1Api(populated).list_csi_node(_preload_content=False)  # the raw answer
    assert [n["spec"] for n in orjson.loads(nodes.data)["items"]] == [{"drivers": None}]
    raw: Any = client.EventsV1Api(populated).list_namespaced_event(NS, _preload_content=False)
    events = orjson.loads(raw.data)["items"]
    assert any(e.get("eventTime") is None for e in events) and any(e.get("eventTime") for e in events)
    assert client.EventsV1Api(populated).read_namespaced_event("ev", NS).event_time is not None


def test_a_claim_bound_to_a_larger_volume_can_be_patched(populated: client.ApiClient) -> None:
    """Its request stays below status.capacity; upstream checks the size only when it shrinks."""
    core = client.CoreV1Api(populated)
    assert core.read_namespaced_persistent_volume_claim("claim", NS).status.capacity == {"storage": "5Gi"}
    for content_type in (None, "application/merge-patch+json", "application/apply-patch+yaml"):
        extra: dict[str, Any] = {} if content_type is None else {"_content_type": content_type}
        body: Any = {"metadata": {"labels": {"team": "a"}}}
        if content_type == "application/apply-patch+yaml":
            body = {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                    "metadata": {"name": "claim", "labels": {"team": "b"}}}
            extra.update(field_manager="sweep", force=True)
        patched = core.patch_namespaced_persistent_volume_claim("claim", NS, body, **extra)
        assert patched.metadata.labels["team"] in ("a", "b")
        assert patched.spec.resources.requests == {"storage": "1Gi"}
    patched = core.patch_namespaced_persistent_volume_claim(
        "claim", NS, [{"op": "add", "path": "/metadata/labels/tier", "value": "db"}],
        _content_type="application/json-patch+json")
    assert patched.metadata.labels == {"team": "b", "tier": "db"}
