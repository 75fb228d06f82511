"""storage.k8s.io/v1's CSI objects (CSIDriver, CSINode, CSIStorageCapacity, VolumeAttachment,
VolumeAttributesClass): served, defaulted and validated as upstream's (registry/csi.py)."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.api.tables import as_table
from controlplane.client import ApiError, Client, resource_path

DRIVERS = resource_path("storage.k8s.io", "v1", "csidrivers", None)
CSI_NODES = resource_path("storage.k8s.io", "v1", "csinodes", None)
CAPACITIES = resource_path("storage.k8s.io", "v1", "csistoragecapacities", "default")
ATTACHMENTS = resource_path("storage.k8s.io", "v1", "volumeattachments", None)
ATTRIBUTE_CLASSES = resource_path("storage.k8s.io", "v1", "volumeattributesclasses", None)


def causes(e: pytest.ExceptionInfo[ApiError]) -> list[tuple[str, str, str]]:
    return [(c["reason"], c["field"], c["message"]) for c in e.value.status["details"]["causes"]]


def row(plural: str, obj: dict[str, Any]) -> dict[str, Any]:
    """``kubectl get``'s cells of one object, by column name (upstream's printers, api/tables.py)."""
    table = as_table(plural, [obj], None)
    return dict(zip([c["name"] for c in table["columnDefinitions"]], table["rows"][0]["cells"], strict=True))


def attachment(name: str, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"attacher": "csi.example.com", "nodeName": "node-1",
                                                 "source": {"persistentVolumeName": "pv-1"}, **spec}}


async def test_the_five_types_are_discovered_as_kube_apiserver_lists_them(client: Client) -> None:
    listed = {r["name"]: r for r in (await client.get("/apis/storage.k8s.io/v1"))["resources"]}
    assert {"csidrivers", "csinodes", "csistoragecapacities", "volumeattachments", "volumeattachments/status",
            "volumeattributesclasses"} <= set(listed)
    assert listed["csistoragecapacities"]["namespaced"] is True
    assert not any(listed[n]["namespaced"] for n in ("csidrivers", "csinodes", "volumeattachments",
                                                     "volumeattributesclasses"))
    assert listed["volumeattributesclasses"]["shortNames"] == ["vac"]


async def test_a_csi_driver_gets_upstreams_defaults_and_keeps_attach_required(client: Client) -> None:
    created = await client.create(DRIVERS, {"metadata": {"name": "csi.example.com"}, "spec": {}})
    shown = row("csidrivers", created)
    assert shown == {"Name": "csi.example.com", "AttachRequired": True, "PodInfoOnMount": False,
                     "StorageCapacity": False, "TokenRequests": "<unset>", "RequiresRepublish": False,
                     "Modes": "Persistent", "Age": shown["Age"]}
    assert created["spec"] == {"attachRequired": True, "podInfoOnMount": False, "storageCapacity": False,
                               "fsGroupPolicy": "ReadWriteOnceWithFSType", "requiresRepublish": False,
                               "seLinuxMount": False, "volumeLifecycleModes": ["Persistent"]}
    changed = await client.patch(f"{DRIVERS}/csi.example.com", {"spec": {"podInfoOnMount": True}})
    assert changed["spec"]["podInfoOnMount"] is True  # mutable since 1.30
    with pytest.raises(ApiError) as e:
        await client.patch(f"{DRIVERS}/csi.example.com",
                           {"spec": {"attachRequired": False, "volumeLifecycleModes": ["Ephemeral"]}})
    assert e.value.code == 422
    assert causes(e) == [
        ("FieldValueInvalid", "spec.attachedRequired", "Invalid value: false: field is immutable"),
        ("FieldValueInvalid", "spec.volumeLifecycleModes",
         'Invalid value: []storage.VolumeLifecycleMode{"Ephemeral"}: field is immutable')]


async def test_a_csi_drivers_spec_is_validated_in_upstreams_words(client: Client) -> None:
    with pytest.raises(ApiError) as e:
        await client.create(DRIVERS, {"metadata": {"name": "bad.example.com"}, "spec": {
            "fsGroupPolicy": "Sometimes", "volumeLifecycleModes": ["Forever"],
            "tokenRequests": [{"audience": "a", "expirationSeconds": 60}, {"audience": "a"}],
            "nodeAllocatableUpdatePeriodSeconds": 5}})
    assert causes(e) == [
        ("FieldValueNotSupported", "spec.fsGroupPolicy",
         'Unsupported value: "Sometimes": supported values: "File", "None", "ReadWriteOnceWithFSType"'),
        ("FieldValueInvalid", "spec.tokenRequests[0].expirationSeconds",
         "Invalid value: 60: may not specify a duration less than 10 minutes"),
        ("FieldValueDuplicate", "spec.tokenRequests[1].audience", 'Duplicate value: "a"'),
        ("FieldValueNotSupported", "spec.volumeLifecycleModes",
         'Unsupported value: "Forever": supported values: "Persistent", "Ephemeral"'),
        ("FieldValueInvalid", "spec.nodeAllocatableUpdatePeriodSeconds",
         "Invalid value: 5: must be greater than or equal to 10 seconds")]


async def test_a_csi_nodes_drivers_are_checked_and_fixed_but_for_their_allocatable(client: Client) -> None:
    driver = {"name": "csi.example.com", "nodeID": "i-0123", "topologyKeys": ["topology.example.com/zone"],
              "allocatable": {"count": 10}}
    created = await client.create(CSI_NODES, {"metadata": {"name": "node-1"}, "spec": {"drivers": [driver]}})
    assert created["spec"]["drivers"] == [driver]
    assert row("csinodes", created)["Drivers"] == 1
    grown = await client.patch(f"{CSI_NODES}/node-1", {"spec": {"drivers": [{**driver, "allocatable": {"count": 20}}]}},
                               patch_type="merge")
    assert grown["spec"]["drivers"][0]["allocatable"] == {"count": 20}
    with pytest.raises(ApiError) as e:
        await client.patch(f"{CSI_NODES}/node-1", {"spec": {"drivers": [{**driver, "nodeID": "i-4567"}]}},
                           patch_type="merge")
    assert [(r, f) for r, f, _ in causes(e)] == [("FieldValueInvalid", "spec.drivers")]
    assert causes(e)[0][2].endswith(": field is immutable")
    with pytest.raises(ApiError) as e:
        await client.create(CSI_NODES, {"metadata": {"name": "node-2"}, "spec": {"drivers": [
            {"name": "Not_A_Name", "nodeID": "", "topologyKeys": ["zone", "zone"]},
            {"name": "Not_A_Name", "nodeID": "x" * 257, "allocatable": {"count": -1}}]}})
    found = causes(e)
    assert [(r, f) for r, f, _ in found] == [
        ("FieldValueInvalid", "spec.drivers[0].name"), ("FieldValueRequired", "spec.drivers[0].nodeID"),
        ("FieldValueDuplicate", "spec.drivers[0]"),
        ("FieldValueInvalid", "spec.drivers[1].name"), ("FieldValueInvalid", "spec.drivers[1].nodeID"),
        ("FieldValueInvalid", "spec.drivers[1].allocatable.count"), ("FieldValueDuplicate", "spec.drivers[1].name")]
    assert found[0][2].startswith('Invalid value: "Not_A_Name": a lowercase RFC 1123 subdomain')
    assert found[4][2].endswith("must be 256 characters or less")


@pytest.mark.parametrize("body", [{}, {"spec": None}, {"spec": {}}, {"spec": {"drivers": None}},
                                  {"spec": {"drivers": []}}])
async def test_a_csi_node_without_drivers_is_taken_and_reads_back_as_kube_apiservers(
        client: Client, body: dict[str, Any]) -> None:
    """Upstream's validation asks for neither ``spec`` nor ``spec.drivers``; Go writes the
    struct and the list (no ``omitempty``) back, and an empty list stored as protobuf comes
    back nil: ``drivers: null`` whatever was sent (what the official client then refuses)."""
    created = await client.create(CSI_NODES, {"metadata": {"name": "bare"}, **body})
    assert created["spec"] == {"drivers": None}
    assert (await client.get(f"{CSI_NODES}/bare"))["spec"] == {"drivers": None}
    assert row("csinodes", created)["Drivers"] == 0
    driver = {"name": "csi.example.com", "nodeID": "i-1"}
    added = await client.patch(f"{CSI_NODES}/bare", {"spec": {"drivers": [driver]}}, patch_type="strategic")
    # a driver's ``topologyKeys`` has no ``omitempty`` either: null when left out
    assert added["spec"] == {"drivers": [driver | {"topologyKeys": None}]}
    removed = await client.patch(f"{CSI_NODES}/bare", {"spec": {"drivers": [
        {"name": "csi.example.com", "$patch": "delete"}]}}, patch_type="strategic")
    assert removed["spec"] == {"drivers": None}


async def test_a_volume_attachment_starts_unattached_and_its_spec_is_fixed(client: Client) -> None:
    created = await client.create(ATTACHMENTS, attachment("va-1", status={"attached": True}))
    assert created["status"] == {"attached": False}  # the status is the attacher's, through /status
    attached = await client.patch(f"{ATTACHMENTS}/va-1/status", {"status": {"attached": True}})
    assert attached["status"] == {"attached": True} and attached["spec"] == created["spec"]
    with pytest.raises(ApiError) as e:
        await client.patch(f"{ATTACHMENTS}/va-1", {"spec": {"nodeName": "node-2"}})
    assert e.value.code == 422 and [(r, f) for r, f, _ in causes(e)] == [("FieldValueInvalid", "spec")]
    assert causes(e)[0][2].endswith("field is immutable")
    shown = row("volumeattachments", attached)
    assert shown == {"Name": "va-1", "Attacher": "csi.example.com", "PV": "pv-1", "Node": "node-1",
                     "Attached": True, "Age": shown["Age"]}


@pytest.mark.parametrize(("spec", "expected"), [
    ({"attacher": "", "source": {}, "nodeName": ""}, [
        ("FieldValueRequired", "spec.attacher"), ("FieldValueRequired", "spec.source"),
        ("FieldValueInvalid", "spec.nodeName"), ("FieldValueRequired", "spec.attacher"),
        ("FieldValueInvalid", "spec.attacher")]),
    ({"source": {"persistentVolumeName": "pv", "inlineVolumeSpec": {}}}, [("FieldValueForbidden", "spec.source")]),
    ({"source": {"persistentVolumeName": ""}}, [("FieldValueRequired", "spec.source.persistentVolumeName")]),
    ({"attacher": "x" * 64}, [("FieldValueTooLong", "spec.attacher")]),
])
async def test_bad_volume_attachments_are_refused(client: Client, spec: dict[str, Any],
                                                  expected: list[tuple[str, str]]) -> None:
    with pytest.raises(ApiError) as e:
        await client.create(ATTACHMENTS, attachment("va-bad", **spec))
    assert e.value.code == 422 and [(r, f) for r, f, _ in causes(e)] == expected


def inline(**spec: Any) -> dict[str, Any]:
    return {"source": {"inlineVolumeSpec": spec}}


async def test_an_inline_volume_spec_is_taken_as_upstream_takes_it(client: Client) -> None:
    """A CSI volume and its access modes: stored as given, without a PersistentVolume's defaults."""
    spec = {"csi": {"driver": "csi.example.com", "volumeHandle": "vol-1"}, "accessModes": ["ReadWriteOnce"]}
    created = await client.create(ATTACHMENTS, attachment("va-inline", **inline(**spec)))
    assert created["spec"]["source"] == {"inlineVolumeSpec": spec}


@pytest.mark.parametrize(("spec", "expected"), [
    ({}, [("FieldValueRequired", "csi", "Required value: has to be specified in the context of inline volumes"),
          ("FieldValueRequired", "accessModes", "Required value"),
          ("FieldValueRequired", "", "Required value: must specify a volume type")]),
    ({"accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"}, "claimRef": {"name": "c"},
      "persistentVolumeReclaimPolicy": "Delete", "nodeAffinity": {}, "hostPath": {"path": "/data"},
      "storageClassName": "fast", "volumeMode": "Block"}, [
        ("FieldValueForbidden", "claimRef", "Forbidden: may not be specified in the context of inline volumes"),
        ("FieldValueForbidden", "capacity", "Forbidden: may not be specified in the context of inline volumes"),
        ("FieldValueRequired", "csi", "Required value: has to be specified in the context of inline volumes"),
        ("FieldValueForbidden", "persistentVolumeReclaimPolicy",
         "Forbidden: may only be Retain in the context of inline volumes"),
        ("FieldValueForbidden", "nodeAffinity", "Forbidden: may not be specified in the context of inline volumes"),
        ("FieldValueForbidden", "storageClassName",
         "Forbidden: may not be specified in the context of inline volumes"),
        ("FieldValueForbidden", "volumeMode",
         "Forbidden: may not specify volumeMode other than Filesystem in the context of inline volumes")]),
    ({"accessModes": ["ReadWriteOncePod", "ReadWriteOnce", "Sometimes"], "hostPath": {"path": "/"},
      "csi": {"driver": "", "volumeHandle": "vol-1"}}, [
        ("FieldValueNotSupported", "accessModes", 'Unsupported value: "Sometimes": supported values: '
         '"ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod"'),
        ("FieldValueForbidden", "accessModes", "Forbidden: may not use ReadWriteOncePod with other access modes"),
        ("FieldValueForbidden", "csi", "Forbidden: may not specify more than 1 volume type")]),
    ({"accessModes": ["ReadOnlyMany"], "volumeAttributesClassName": "",
      "csi": {"driver": "CSI.Example.com", "volumeHandle": "", "nodePublishSecretRef": {"name": "Bad_Name"}}}, [
        ("FieldValueRequired", "csi.volumeHandle", "Required value"),
        ("FieldValueInvalid", "csi.nodePublishSecretRef.name",
         'Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric '
         "characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', "
         "regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"),
        ("FieldValueRequired", "csi.nodePublishSecretRef.namespace", "Required value"),
        ("FieldValueRequired", "volumeAttributesClassName", "Required value: an empty string is disallowed")]),
    ({"accessModes": ["ReadWriteOnce"], "csi": {"driver": "d" * 64, "volumeHandle": "vol-1"}},
     [("FieldValueTooLong", "csi.driver", "Too long: may not be more than 63 bytes")]),
    ({"accessModes": ["ReadWriteOnce"], "local": {"path": "/mnt/disk"}, "nodeAffinity": {"required": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "Exists"}]}]}}}, [
        ("FieldValueRequired", "csi", "Required value: has to be specified in the context of inline volumes"),
        ("FieldValueForbidden", "nodeAffinity", "Forbidden: may not be specified in the context of inline volumes"),
        ("FieldValueRequired", "nodeAffinity", "Required value: Local volume requires node affinity")]),
])
async def test_a_bad_inline_volume_spec_is_refused_in_upstreams_words(
        client: Client, spec: dict[str, Any], expected: list[tuple[str, str, str]]) -> None:
    """``ValidatePersistentVolumeSpec`` of an inline spec, in its order and words (a driver
    name is a DNS subdomain once lowercased, as ``ValidateCSIDriverName`` reads it)."""
    at = "spec.source.inlineVolumeSpec"
    with pytest.raises(ApiError) as e:
        await client.create(ATTACHMENTS, attachment("va-bad-inline", **inline(**spec)))
    assert e.value.code == 422
    assert causes(e) == [(r, f"{at}.{f}" if f else at, m) for r, f, m in expected]


async def test_a_storage_capacity_needs_a_class_and_keeps_it(client: Client) -> None:
    body = {"metadata": {"name": "cap-1"}, "storageClassName": "fast", "capacity": "10Gi",
            "nodeTopology": {"matchLabels": {"topology.kubernetes.io/zone": "zone-a"}}}
    created = await client.create(CAPACITIES, body)
    assert row("csistoragecapacities", created) == {"Name": "cap-1", "StorageClassName": "fast", "Capacity": "10Gi"}
    with pytest.raises(ApiError) as e:
        await client.patch(f"{CAPACITIES}/cap-1", {"storageClassName": "slow", "nodeTopology": None})
    assert causes(e) == [
        ("FieldValueInvalid", "nodeTopology", 'Invalid value: "null": field is immutable'),
        ("FieldValueInvalid", "storageClassName", 'Invalid value: "slow": field is immutable')]
    with pytest.raises(ApiError) as e:
        await client.create(CAPACITIES, {"metadata": {"name": "cap-2"}, "storageClassName": "Fast!",
                                         "capacity": "-1"})
    assert [(r, f) for r, f, _ in causes(e)] == [("FieldValueInvalid", "storageClassName"),
                                                 ("FieldValueInvalid", "capacity")]
    with pytest.raises(ApiError) as e:
        await client.create(CAPACITIES, {"metadata": {"name": "cap-3"}, "storageClassName": "fast",
                                         "capacity": "lots"})
    assert e.value.code == 400


async def test_a_volume_attributes_class_needs_parameters_and_keeps_them(client: Client) -> None:
    created = await client.create(ATTRIBUTE_CLASSES, {"metadata": {"name": "gold"}, "driverName": "csi.example.com",
                                                      "parameters": {"iops": "3000"}})
    assert list(row("volumeattributesclasses", created)) == ["Name", "DriverName", "Age"]
    assert row("volumeattributesclasses", created)["DriverName"] == "csi.example.com"
    with pytest.raises(ApiError) as e:
        await client.patch(f"{ATTRIBUTE_CLASSES}/gold", {"driverName": "other.example.com",
                                                         "parameters": {"iops": "6000"}})
    assert causes(e) == [
        ("FieldValueForbidden", "driverName", "Forbidden: updates to driverName are forbidden."),
        ("FieldValueForbidden", "parameters", "Forbidden: updates to parameters are forbidden.")]
    with pytest.raises(ApiError) as e:
        await client.create(ATTRIBUTE_CLASSES, {"metadata": {"name": "empty"}, "driverName": "a/b/c"})
    assert [(r, f) for r, f, _ in causes(e)] == [("FieldValueInvalid", "driverName"),
                                                 ("FieldValueRequired", "parameters")]
    assert causes(e)[1][2] == "Required value: must contain at least one key/value pair"


async def test_a_csi_drivers_generation_starts_at_its_first_spec_change(client: Client) -> None:
    """As upstream's strategy: none at create, one more (from 0) for each change of the spec."""
    created = await client.create(DRIVERS, {"metadata": {"name": "gen.example.com"}, "spec": {}})
    assert "generation" not in created["metadata"]
    path = f"{DRIVERS}/gen.example.com"
    restated = await client.update(path, {"metadata": {"name": "gen.example.com",
                                                       "resourceVersion": created["metadata"]["resourceVersion"]},
                                          "spec": {"attachRequired": True}})  # the rest defaulted alike
    assert "generation" not in restated["metadata"]
    changed = await client.patch(path, {"spec": {"podInfoOnMount": True}})
    assert changed["metadata"]["generation"] == 1
    again = await client.patch(path, {"spec": {"tokenRequests": [{"audience": "vault"}]}})
    assert again["metadata"]["generation"] == 2
    labelled = await client.patch(path, {"metadata": {"labels": {"team": "storage"}}})
    assert labelled["metadata"]["generation"] == 2
