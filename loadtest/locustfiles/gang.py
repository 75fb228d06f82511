"""AI training jobs: Workload / PodGroup gangs with GPU claims (Kubernetes 1.37 shapes).

A job is what a training operator (JobSet, Kubeflow) writes: a ResourceClaimTemplate
asking for ``gpus_per_pod`` devices of class ``gpu.example.com``; a Workload
(``scheduling.k8s.io/v1beta1``) with one PodGroup template whose scheduling
policy is ``gang: {minCount: N}``; the PodGroup made from it (``workloadRef``);
and N pods that name it in ``spec.schedulingGroup.podGroupName`` and each
claim their GPUs from the template (``spec.resourceClaims``). The user then
waits until every member runs (``gang startup``: the first create to the last
member Running), lets the job train for ``train_seconds`` and deletes it all.

Who binds depends on the run: the built-in scheduler's gang plugin when the
server runs one, else ``binder.BinderUser`` (all members at once, at minCount).

Run alone::

    python -m loadtest.locustfiles.gang http://127.0.0.1:28500
"""

from __future__ import annotations

import random
import sys
import time
from typing import Any

import gevent
from locust import between, run_single_user, task

from .. import objects
from .base import TRACKER, KubeUser, Reflector, WatchEvent, fire_latency, param, path_for, unique_suffix

__all__ = ["TrainingJobUser"]

_device_class_ready = False


class TrainingJobUser(KubeUser):
    wait_time = between(1, 3)
    concurrency = 12

    def on_start(self) -> None:
        global _device_class_ready
        self.ns = f"train-{random.randrange(int(param('gang_namespaces', 2))):03d}"
        self.size = int(param("gang_size", 4))
        self.gpus = int(param("gang_gpus_per_pod", 1))
        self.factory = objects.PodFactory(seed=random.getrandbits(16), run=str(param("run_id", "")))
        self.running: set[str] = set()
        self.ensure("namespaces", objects.namespace(self.ns))
        if not _device_class_ready:
            self.ensure("deviceclasses", objects.device_class(), group="resource.k8s.io")
            _device_class_ready = True

    def _gang_pod(self, job: str, index: int) -> dict[str, Any]:
        pod = self.factory.pod(self.ns, f"{job}-{index}", {"loadtest/job": job, "job-index": str(index)})
        spec = pod["spec"]
        spec["schedulingGroup"] = {"podGroupName": job}
        spec["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": job}]
        spec["restartPolicy"] = "Never"
        main = spec["containers"][0]
        for section in ("requests", "limits"):
            (main.setdefault("resources", {}).setdefault(section, {})).pop("nvidia.com/gpu", None)
        main["resources"]["claims"] = [{"name": "gpu"}]
        spec["tolerations"] = [*spec.get("tolerations", []),
                               {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
        return pod

    def _event(self, ev: WatchEvent) -> None:
        if ev.type == "DELETED":
            return
        pod = ev.pod()
        TRACKER.pod_seen(pod, ev.at)
        if pod.phase == "Running":
            self.running.add(pod.key.partition("/")[2])

    @task
    def train(self) -> None:
        job = f"job-{unique_suffix()}"
        self.running = set()
        reflector = Reflector(self, "pods", self.ns, label_selector=f"loadtest/job={job}", on_event=self._event)
        watch = reflector.start()
        reflector.synced.wait(timeout=30)
        started = time.perf_counter()
        self.create("resourceclaimtemplates", objects.claim_template(self.ns, job, self.gpus), self.ns,
                    group="resource.k8s.io")
        self.create("workloads", objects.workload(self.ns, job, self.size), self.ns, group="scheduling.k8s.io",
                    version="v1beta1")
        self.create("podgroups", objects.podgroup(self.ns, job, job, self.size), self.ns,
                    group="scheduling.k8s.io", version="v1beta1")
        for i in range(self.size):
            sent = time.perf_counter()
            TRACKER.created(f"{self.ns}/{job}-{i}", sent)
            self.create("pods", self._gang_pod(job, i), self.ns, track=True)
        deadline = started + float(param("gang_timeout", 30.0))
        while len(self.running) < self.size and time.perf_counter() < deadline:
            gevent.sleep(0.05)
        missing = self.size - len(self.running)
        fire_latency("gang startup", time.perf_counter() - started,
                     TimeoutError(f"{missing} of {self.size} members not Running") if missing else None)
        gevent.sleep(float(param("train_seconds", 2.0)))
        for i in range(self.size):
            self.call("DELETE", path_for("pods", self.ns, f"{job}-{i}"), "pods", expected=(404,))
            TRACKER.forget(f"{self.ns}/{job}-{i}")
        for plural, group, version in (("podgroups", "scheduling.k8s.io", "v1beta1"),
                                       ("workloads", "scheduling.k8s.io", "v1beta1"),
                                       ("resourceclaimtemplates", "resource.k8s.io", "v1")):
            self.call("DELETE", path_for(plural, self.ns, job, group=group, version=version), plural)
        watch.kill(block=False)
        self.greenlets.remove(watch)


if __name__ == "__main__":
    TrainingJobUser.host = sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:6443"
    run_single_user(TrainingJobUser)
