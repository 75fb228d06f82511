"""PersistentVolumeClaims, PersistentVolumes and StorageClasses: served, defaulted and
validated as upstream's strategies (registry/volumes.py)."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.client import ApiError, Client, resource_path

PVCS = resource_path("", "v1", "persistentvolumeclaims", "default")
PVS = resource_path("", "v1", "persistentvolumes", None)
CLASSES = resource_path("storage.k8s.io", "v1", "storageclasses", None)


def claim(name: str, storage: Any = "1Gi", **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": storage}}, **spec}}


async def test_a_claim_is_defaulted_pending_and_its_spec_fixed_but_for_its_size(client: Client) -> None:
    await client.create(CLASSES, {"metadata": {"name": "grows"}, "provisioner": "example.com/none",
                                  "allowVolumeExpansion": True})
    created = await client.create(PVCS, claim("data", status={"phase": "Bound"}, storageClassName="grows"))
    assert created["spec"]["volumeMode"] == "Filesystem"
    assert created["status"] == {"phase": "Pending"}  # the status is the system's
    created["spec"]["accessModes"] = ["ReadWriteMany"]
    with pytest.raises(ApiError) as e:
        await client.update(f"{PVCS}/data", created)
    assert e.value.code == 422 and "spec is immutable after creation" in e.value.message
    # (PersistentVolumeClaimResize admission: only a bound claim of a class that allows it grows)
    await client.patch(f"{PVCS}/data/status", {"status": {"phase": "Bound"}})
    grown = await client.patch(f"{PVCS}/data", {"spec": {"resources": {"requests": {"storage": "2Gi"}}}})
    assert grown["spec"]["resources"]["requests"]["storage"] == "2Gi"


@pytest.mark.parametrize(("body", "code", "text"), [
    (claim("a", accessModes=[]), 422, "at least 1 access mode is required"),
    (claim("b", accessModes=["ReadWriteSometimes"]), 422, 'Unsupported value: "ReadWriteSometimes"'),
    ({"metadata": {"name": "c"}, "spec": {"accessModes": ["ReadWriteOnce"]}}, 422,
     "spec.resources[storage]: Required value"),
    (claim("d", storage="0"), 422, "must be greater than zero"),
    (claim("e", storage="lots"), 400, "quantities must match"),
])
async def test_bad_claims_are_refused(client: Client, body: dict[str, Any], code: int, text: str) -> None:
    with pytest.raises(ApiError) as e:
        await client.create(PVCS, body)
    assert e.value.code == code and text in e.value.message


async def test_a_volume_needs_one_source_and_is_retained_by_default(client: Client) -> None:
    pv = {"metadata": {"name": "pv1"}, "spec": {"capacity": {"storage": "5Gi"}, "accessModes": ["ReadWriteOnce"],
                                                "hostPath": {"path": "/data"}}}
    created = await client.create(PVS, pv)
    assert created["spec"]["persistentVolumeReclaimPolicy"] == "Retain"
    assert created["status"] == {"phase": "Pending"}
    with pytest.raises(ApiError) as e:
        await client.create(PVS, {"metadata": {"name": "pv2"}, "spec": {"capacity": {"storage": "1Gi"},
                                                                        "accessModes": ["ReadWriteOnce"]}})
    assert e.value.code == 422 and "must specify a volume type" in e.value.message
    with pytest.raises(ApiError) as e:
        await client.create(PVS, {"metadata": {"name": "pv3"}, "spec": {
            "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/a"},
            "nfs": {"server": "x", "path": "/"}}})
    assert e.value.code == 422 and "may not specify more than 1 volume type" in e.value.message


async def test_a_volumes_spec_is_checked_in_upstreams_order_and_words(client: Client) -> None:
    """``ValidatePersistentVolumeSpec``: the sources met in upstream's order (hostPath before
    csi), access modes required in its words (not a claim's), the class a DNS subdomain."""
    with pytest.raises(ApiError) as e:
        await client.create(PVS, {"metadata": {"name": "pv4"}, "spec": {
            "capacity": {"storage": "1Gi"}, "accessModes": [], "storageClassName": "Fast!",
            "csi": {"driver": "csi.example.com", "volumeHandle": "v"}, "hostPath": {"path": "/a"}}})
    assert [(c["reason"], c["field"], c["message"]) for c in e.value.status["details"]["causes"]] == [
        ("FieldValueRequired", "spec.accessModes", "Required value"),
        ("FieldValueForbidden", "spec.csi", "Forbidden: may not specify more than 1 volume type"),
        ("FieldValueInvalid", "spec.storageClassName",
         'Invalid value: "Fast!": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '
         "'-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
         "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")]


async def test_a_storage_class_is_defaulted_and_its_parameters_are_fixed(client: Client) -> None:
    sc = await client.create(CLASSES, {"metadata": {"name": "fast"}, "provisioner": "example.com/disk",
                                       "parameters": {"type": "ssd"}})
    assert (sc["reclaimPolicy"], sc["volumeBindingMode"]) == ("Delete", "Immediate")
    with pytest.raises(ApiError) as e:
        await client.patch(f"{CLASSES}/fast", {"parameters": {"type": "hdd"}})
    assert e.value.code == 422 and "updates to parameters are forbidden" in e.value.message
    allowed = await client.patch(f"{CLASSES}/fast", {"allowVolumeExpansion": True})
    assert allowed["allowVolumeExpansion"] is True
    with pytest.raises(ApiError) as e:
        await client.create(CLASSES, {"metadata": {"name": "none"}})
    assert e.value.code == 422 and "provisioner: Required value" in e.value.message


async def test_a_claim_bound_to_a_larger_volume_keeps_its_request_and_shrinks_only_above_its_capacity(
        client: Client) -> None:
    """Upstream's ValidatePersistentVolumeClaimUpdate checks the size only when the request
    shrinks (RecoverVolumeExpansionFailure): not below or at status.capacity."""
    await client.create(PVCS, claim("small", storage="1Gi"))
    await client.patch(f"{PVCS}/small/status", {"status": {"phase": "Bound", "capacity": {"storage": "5Gi"}}})
    labelled = await client.patch(f"{PVCS}/small", {"metadata": {"labels": {"team": "a"}}})
    assert labelled["metadata"]["labels"] == {"team": "a"}
    assert labelled["spec"]["resources"]["requests"]["storage"] == "1Gi"

    await client.create(PVCS, claim("grown", storage="3Gi"))
    await client.patch(f"{PVCS}/grown/status", {"status": {"phase": "Bound", "capacity": {"storage": "2Gi"}}})
    with pytest.raises(ApiError) as e:
        await client.patch(f"{PVCS}/grown", {"spec": {"resources": {"requests": {"storage": "2Gi"}}}})
    assert e.value.code == 422
    assert "spec.resources.requests.storage: Forbidden: field can not be less than status.capacity" in e.value.message
    back = await client.patch(f"{PVCS}/grown", {"spec": {"resources": {"requests": {"storage": "2500Mi"}}}})
    assert back["spec"]["resources"]["requests"]["storage"] == "2500Mi"
