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


def test_catalog_gpus_have_the_attributes_nvidias_driver_publishes() -> None:
    # selectors as users write them against k8s-dra-driver-gpu's devices
    a100 = compile_selector("device.attributes['gpu.nvidia.com'].productName.contains('A100')")
    hopper = compile_selector("device.attributes['gpu.nvidia.com'].architecture == 'Hopper'")
    by_name = {t.name: t.gpus[0] for t in DEFAULT_CATALOG if t.gpus}
    device = by_name["gpu-8x-a100"].devices()[0]
    assert device["attributes"]["productName"] == {"string": "NVIDIA A100-SXM4-80GB"}
    assert a100.matches(DeviceEnv("gpu.nvidia.com", device))
    assert not hopper.matches(DeviceEnv("gpu.nvidia.com", device))
    assert hopper.matches(DeviceEnv("gpu.nvidia.com", by_name["gpu-8x-h100"].devices()[0]))


def test_other_drivers_get_no_nvidia_type_and_attributes_override() -> None:
    assert "type" not in GpuDevice("X1", "16Gi", driver="gpu.example.com").devices()[0]["attributes"]
    mig = GpuDevice("A100", "10Gi", attributes={"type": "mig"}).devices()[0]["attributes"]
    assert mig["type"] == {"string": "mig"}
