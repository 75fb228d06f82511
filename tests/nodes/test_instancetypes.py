"""The catalog's GPU device templates, as a DRA driver would publish them."""

from __future__ import annotations

from controlplane.nodes.instancetypes import DEFAULT_CATALOG, GpuDevice
from controlplane.scheduler.dra.cel import DeviceEnv, compile_selector

# The selector of the gpu.nvidia.com DeviceClass NVIDIA's DRA driver installs
# (k8s-dra-driver-gpu, deployments/helm/.../deviceclass-gpu.yaml; Apache-2.0).
NVIDIA_GPU_CLASS = "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"


def test_catalog_gpus_match_nvidias_device_class() -> None:
    selector = compile_selector(NVIDIA_GPU_CLASS)
    gpu_types = [t for t in DEFAULT_CATALOG if t.gpus]
    assert gpu_types
    for itype in gpu_types:
        for gpu in itype.gpus:
            devices = gpu.devices()
            assert len(devices) == gpu.count
            assert all(selector.matches(DeviceEnv(gpu.driver, d)) for d in devices), itype.name
            # identical devices (the selector cache's key is their content)
            assert all(d["attributes"] == devices[0]["attributes"] for d in devices)


def test_other_drivers_get_no_nvidia_type_and_attributes_override() -> None:
    assert "type" not in GpuDevice("X1", "16Gi", driver="gpu.example.com").devices()[0]["attributes"]
    mig = GpuDevice("A100", "10Gi", attributes={"type": "mig"}).devices()[0]["attributes"]
    assert mig["type"] == {"string": "mig"}
