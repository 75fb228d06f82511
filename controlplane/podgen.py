"""Realistic Pod objects for benchmarks and load tests.

A real cluster's pods are not copies of one another, and compression ratios,
cache memory and serialisation costs measured on copies are lies. This
generator models what makes real pods differ and what makes them alike:

- many namespaces, each with several Deployments (and some StatefulSets and
  Jobs); pods of one ReplicaSet share their template (images, env, resources)
  and the ReplicaSet's ``pod-template-hash``;
- per-pod randomness that never compresses: uids, container ids, pod IPs,
  generated name suffixes, timestamps;
- image references pinned by digest, env lists of varying length, sidecars
  (service mesh proxy, log shipper), init containers, GPU pods with
  ``nvidia.com/gpu`` limits and tolerations;
- ``managedFields`` as written by the controller manager and the kubelet,
  since they are a large share of every stored pod.

Usage::

    gen = PodGenerator(seed=1)
    pod = gen.pod()              # one dict, about 3.5 KB as JSON
    raw = gen.pod_json()         # the same, as orjson bytes

The output is deterministic for a seed.
"""

from __future__ import annotations

import random
import string
from dataclasses import dataclass, field
from typing import Any

import orjson

__all__ = ["PodGenerator", "pod_key"]

_TEAMS = [
    "payments", "search", "checkout", "identity", "ml-platform", "ingest", "billing",
    "recommender", "observability", "inference", "training", "data-lake", "catalog",
    "notifications", "fraud", "maps", "ads", "messaging", "media", "edge",
]
_APPS = [
    "api", "worker", "frontend", "gateway", "scheduler", "indexer", "consumer",
    "exporter", "cache", "router", "batch", "trainer", "server", "sync", "controller",
]
_REGISTRIES = ["registry.k8s.io", "ghcr.io", "docker.io/library", "quay.io", "us-docker.pkg.dev/acme-prod"]
_BASE_IMAGES = ["python", "golang", "node", "openjdk", "nginx", "envoy", "redis", "pytorch", "triton", "busybox"]
_ENV_NAMES = [
    "LOG_LEVEL", "GOMAXPROCS", "JAVA_OPTS", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_SERVICE_NAME",
    "DATABASE_URL", "REDIS_HOST", "KAFKA_BROKERS", "FEATURE_FLAGS", "REGION", "ZONE",
    "HTTP_PORT", "GRPC_PORT", "METRICS_PORT", "CACHE_TTL", "MAX_CONNECTIONS", "WORKERS",
    "NCCL_DEBUG", "CUDA_VISIBLE_DEVICES", "MODEL_PATH", "BATCH_SIZE", "S3_BUCKET",
]
_ZONES = ["us-east-1a", "us-east-1b", "us-east-1c", "us-west-2a", "us-west-2b"]
_HEX = "0123456789abcdef"
_ALNUM = string.ascii_lowercase + string.digits
# kube's generateName alphabet: no vowels, no ambiguous characters
_SUFFIX = "bcdfghjklmnpqrstvwxz2456789"


def pod_key(namespace: str, name: str) -> bytes:
    """The storage key kube-apiserver uses for a pod."""
    return f"/registry/pods/{namespace}/{name}".encode()


@dataclass
class _Template:
    namespace: str
    owner_kind: str
    owner_name: str
    owner_uid: str
    app: str
    team: str
    template_hash: str
    containers: list[dict[str, Any]]
    init_containers: list[dict[str, Any]]
    gpu: int
    priority_class: str | None
    service_account: str
    volumes: list[dict[str, Any]] = field(default_factory=list)


class PodGenerator:
    """Deterministic stream of realistic pods (see the module docstring)."""

    def __init__(self, seed: int = 0, namespaces: int = 200, templates_per_namespace: int = 8,
                 nodes: int = 5000, gpu_fraction: float = 0.1) -> None:
        self._rng = random.Random(seed)
        self._nodes = nodes
        self._templates: list[_Template] = []
        # sidecars are one cluster-wide version, as a mesh or log pipeline rollout makes them
        self._mesh_image = self._image("envoy")
        self._log_image = self._image("fluent-bit")
        for n in range(namespaces):
            team = self._rng.choice(_TEAMS)
            ns = f"{team}-{self._rng.choice(['prod', 'staging', 'dev', 'canary'])}-{n}"
            for _ in range(templates_per_namespace):
                self._templates.append(self._template(ns, team, self._rng.random() < gpu_fraction))
        self._count = 0

    # -- randomness helpers -------------------------------------------------
    def _hex(self, n: int) -> str:
        return "".join(self._rng.choices(_HEX, k=n))

    def _uid(self) -> str:
        h = self._hex(32)
        return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{h[16:20]}-{h[20:32]}"

    def _time(self) -> str:
        r = self._rng
        return f"2026-{r.randint(1, 11):02d}-{r.randint(1, 28):02d}T{r.randint(0, 23):02d}:{r.randint(0, 59):02d}:{r.randint(0, 59):02d}Z"

    def _image(self, base: str | None = None) -> str:
        r = self._rng
        base = base or r.choice(_BASE_IMAGES)
        return f"{r.choice(_REGISTRIES)}/{base}:{r.randint(1, 3)}.{r.randint(0, 30)}.{r.randint(0, 9)}@sha256:{self._hex(64)}"

    def _container(self, name: str, image: str, gpu: int, main: bool) -> dict[str, Any]:
        r = self._rng
        cpu = r.choice(["50m", "100m", "250m", "500m", "1", "2", "4"])
        mem = r.choice(["64Mi", "128Mi", "256Mi", "512Mi", "1Gi", "2Gi", "8Gi"])
        env: list[dict[str, Any]] = []
        for env_name in r.sample(_ENV_NAMES, k=r.randint(0, 4 if main else 1)):
            if r.random() < 0.15:
                env.append({"name": env_name, "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": r.choice(["metadata.name", "status.podIP", "spec.nodeName"])}}})
            else:
                env.append({"name": env_name, "value": r.choice(["info", "debug", "4", "true", "8080", "https://otel-collector.observability:4317", f"{r.randint(1, 600)}s", self._hex(12)])})
        c: dict[str, Any] = {
            "name": name,
            "image": image,
            "imagePullPolicy": "IfNotPresent",
            "resources": {"requests": {"cpu": cpu, "memory": mem}, "limits": {"memory": mem}},
            "terminationMessagePath": "/dev/termination-log",
            "terminationMessagePolicy": "File",
            "volumeMounts": [{"name": "kube-api-access", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": True}],
        }
        if env:
            c["env"] = env
        if main:
            port = r.choice([80, 8080, 8443, 9090, 50051])
            c["ports"] = [{"name": "http", "containerPort": port, "protocol": "TCP"}]
            if r.random() < 0.3:
                c["readinessProbe"] = {"httpGet": {"path": "/healthz", "port": port, "scheme": "HTTP"}, "periodSeconds": 10, "timeoutSeconds": 1, "successThreshold": 1, "failureThreshold": 3}
            if r.random() < 0.25:
                c["args"] = [f"--port={port}", f"--log-level={r.choice(['info', 'warn'])}", f"--workers={r.randint(1, 16)}"]
        if gpu:
            c["resources"]["limits"]["nvidia.com/gpu"] = str(gpu)
            c["resources"]["requests"]["nvidia.com/gpu"] = str(gpu)
        return c

    def _template(self, namespace: str, team: str, gpu_pod: bool) -> _Template:
        r = self._rng
        app = f"{r.choice(_APPS)}-{r.choice(_APPS)}" if r.random() < 0.3 else r.choice(_APPS)
        kind = r.choices(["ReplicaSet", "StatefulSet", "Job"], weights=[85, 10, 5])[0]
        owner_name = f"{team}-{app}"
        template_hash = "".join(r.choices(_SUFFIX, k=10))
        if kind == "ReplicaSet":
            owner_name = f"{owner_name}-{template_hash}"
        gpu = r.choice([1, 2, 4, 8]) if gpu_pod else 0
        base = r.choice(["pytorch", "triton"]) if gpu_pod else None
        containers = [self._container(app, self._image(base), gpu, main=True)]
        if r.random() < 0.15:
            containers.append(self._container("istio-proxy", self._mesh_image, 0, main=False))
        if r.random() < 0.1:
            containers.append(self._container("log-shipper", self._log_image, 0, main=False))
        init = [self._container("istio-init", self._mesh_image, 0, main=False)] if len(containers) > 1 and r.random() < 0.5 else []
        volumes: list[dict[str, Any]] = [{"name": "kube-api-access", "projected": {"defaultMode": 420, "sources": [
            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
            {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
        ]}}]
        if r.random() < 0.4:
            volumes.append({"name": "config", "configMap": {"name": f"{app}-config", "defaultMode": 420}})
        return _Template(
            namespace=namespace, owner_kind=kind, owner_name=owner_name, owner_uid=self._uid(), app=app,
            team=team, template_hash=template_hash, containers=containers, init_containers=init, gpu=gpu,
            priority_class=r.choice([None, None, "high-priority", "batch-low"]),
            service_account=r.choice(["default", app, f"{team}-runner"]), volumes=volumes,
        )

    # -- pods ---------------------------------------------------------------
    def pod(self, namespace: str | None = None, bound: bool = True) -> dict[str, Any]:
        """One pod; ``namespace`` overrides the template's, ``bound`` adds node and status."""
        r = self._rng
        t = r.choice(self._templates)
        self._count += 1
        ns = namespace or t.namespace
        suffix = "".join(r.choices(_SUFFIX, k=5))
        if t.owner_kind == "StatefulSet":
            name = f"{t.owner_name}-{self._count}"
        else:
            name = f"{t.owner_name}-{suffix}"
        created = self._time()
        labels = {"app.kubernetes.io/name": t.app, "app.kubernetes.io/part-of": t.team, "team": t.team}
        if t.owner_kind == "ReplicaSet":
            labels["pod-template-hash"] = t.template_hash
        elif t.owner_kind == "StatefulSet":
            labels["controller-revision-hash"] = f"{t.owner_name}-{t.template_hash[:8]}"
            labels["statefulset.kubernetes.io/pod-name"] = name
        else:
            labels["batch.kubernetes.io/job-name"] = t.owner_name
            labels["batch.kubernetes.io/controller-uid"] = t.owner_uid
        uid = self._uid()
        spec: dict[str, Any] = {
            "containers": t.containers,
            "restartPolicy": "Never" if t.owner_kind == "Job" else "Always",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "serviceAccountName": t.service_account,
            "serviceAccount": t.service_account,
            "securityContext": {},
            "schedulerName": "default-scheduler",
            "tolerations": [
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
                {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
            ],
            "priority": 0,
            "enableServiceLinks": True,
            "preemptionPolicy": "PreemptLowerPriority",
            "volumes": t.volumes,
        }
        if t.init_containers:
            spec["initContainers"] = t.init_containers
        if t.gpu:
            spec["tolerations"].append({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"})
            spec["nodeSelector"] = {"node.kubernetes.io/instance-type": r.choice(["p5.48xlarge", "a3-highgpu-8g", "nd-h100-v5"])}
        if t.priority_class:
            spec["priorityClassName"] = t.priority_class
            spec["priority"] = 1000000 if t.priority_class == "high-priority" else -10
        pod: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "generateName": f"{t.owner_name}-" if t.owner_kind != "StatefulSet" else None,
                "namespace": ns,
                "uid": uid,
                "resourceVersion": str(r.randint(1, 10**8)),
                "creationTimestamp": created,
                "labels": labels,
                "ownerReferences": [{"apiVersion": "batch/v1" if t.owner_kind == "Job" else "apps/v1", "kind": t.owner_kind, "name": t.owner_name, "uid": t.owner_uid, "controller": True, "blockOwnerDeletion": True}],
                "managedFields": [
                    {"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1", "time": created, "fieldsType": "FieldsV1",
                     "fieldsV1": {"f:metadata": {"f:generateName": {}, "f:labels": {f"f:{k}": {} for k in labels}, "f:ownerReferences": {f'k:{{"uid":"{t.owner_uid}"}}': {}}},
                                  "f:spec": {'f:containers': {f'k:{{"name":"{c["name"]}"}}': {} for c in t.containers}, "f:dnsPolicy": {}, "f:restartPolicy": {}}}},
                ],
            },
            "spec": spec,
            "status": {"phase": "Pending", "qosClass": "Burstable"},
        }
        if pod["metadata"]["generateName"] is None:
            del pod["metadata"]["generateName"]
        if bound:
            self._bind(pod, created)
        return pod

    def _bind(self, pod: dict[str, Any], created: str) -> None:
        r = self._rng
        node = f"node-{r.randrange(self._nodes):06d}"
        pod["spec"]["nodeName"] = node
        started = created
        pod_ip = f"10.{r.randrange(256)}.{r.randrange(256)}.{r.randrange(1, 255)}"
        statuses = []
        for c in pod["spec"]["containers"]:
            statuses.append({
                "name": c["name"], "ready": True, "restartCount": r.choice([0, 0, 0, 0, 1, 2]),
                "image": c["image"].split("@")[0], "imageID": c["image"],
                "containerID": f"containerd://{self._hex(64)}", "started": True,
                "state": {"running": {"startedAt": started}},
            })
        pod["status"] = {
            "phase": "Running",
            "conditions": [
                {"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": started}
                for t in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled")
            ],
            "hostIP": f"10.{r.randrange(64, 128)}.{r.randrange(256)}.{r.randrange(1, 255)}",
            "hostIPs": [{"ip": "10.0.0.1"}],
            "podIP": pod_ip,
            "podIPs": [{"ip": pod_ip}],
            "startTime": started,
            "containerStatuses": statuses,
            "qosClass": "Burstable",
        }
        pod["status"]["hostIPs"][0]["ip"] = pod["status"]["hostIP"]
        pod["metadata"]["managedFields"].append({
            "manager": "kubelet", "operation": "Update", "apiVersion": "v1", "time": started, "fieldsType": "FieldsV1", "subresource": "status",
            "fieldsV1": {"f:status": {"f:conditions": {}, "f:containerStatuses": {}, "f:hostIP": {}, "f:phase": {}, "f:podIP": {}, "f:startTime": {}}},
        })

    def status_update(self, pod: dict[str, Any]) -> dict[str, Any]:
        """The pod after a kubelet status write (a restart or a probe flip): a small change."""
        r = self._rng
        status = pod["status"]
        for cs in status.get("containerStatuses", []):
            if r.random() < 0.5:
                cs["restartCount"] = cs.get("restartCount", 0) + 1
                cs["containerID"] = f"containerd://{self._hex(64)}"
                cs["state"] = {"running": {"startedAt": self._time()}}
        for cond in status.get("conditions", []):
            if cond["type"] in ("Ready", "ContainersReady"):
                cond["status"] = r.choice(["True", "False"])
                cond["lastTransitionTime"] = self._time()
        pod["metadata"]["resourceVersion"] = str(int(pod["metadata"].get("resourceVersion", "0")) + 1)
        return pod

    def pod_json(self, namespace: str | None = None, bound: bool = True) -> bytes:
        return orjson.dumps(self.pod(namespace, bound))

    def pods(self, n: int) -> list[tuple[bytes, bytes]]:
        """``n`` (key, JSON value) pairs."""
        out = []
        for _ in range(n):
            p = self.pod()
            out.append((pod_key(p["metadata"]["namespace"], p["metadata"]["name"]), orjson.dumps(p)))
        return out
