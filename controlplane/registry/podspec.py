"""Defaults of a pod spec, wherever one is written: a Pod's own, and the template
of a Deployment, ReplicaSet, StatefulSet, DaemonSet, Job or ReplicationController.

What core/v1's defaulting functions fill in when a body is decoded
(``SetDefaults_PodSpec``, ``_Container``, ``_Probe``, ``_HTTPGetAction``,
``_ObjectFieldSelector``, the volume sources' ``defaultMode``), so a template
reads back as it would from kube-apiserver (``kubectl describe`` prints probes
and env sources from these fields). A Pod's admission-time additions (service
account, default tolerations) are not here: templates do not get them.
"""

from __future__ import annotations

from typing import Any

__all__ = ["default_container", "default_pod_spec"]

_PROBES = ("livenessProbe", "readinessProbe", "startupProbe")
_MODE_SOURCES = ("secret", "configMap", "projected", "downwardAPI")
_DEFAULT_MODE = 0o644  # 420


def default_pod_spec(spec: dict[str, Any]) -> None:
    """Fill in ``spec``'s decode-time defaults, in place."""
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("securityContext", {})
    for key in ("initContainers", "containers", "ephemeralContainers"):
        for c in spec.get(key) or ():
            if isinstance(c, dict):
                default_container(c)
    for volume in spec.get("volumes") or ():
        if isinstance(volume, dict):
            _default_volume(volume)


def default_container(c: dict[str, Any]) -> None:
    image = str(c.get("image", ""))
    tagless = ":" not in image.rsplit("/", 1)[-1] and "@" not in image
    c.setdefault("imagePullPolicy", "Always" if tagless or image.endswith(":latest") else "IfNotPresent")
    c.setdefault("terminationMessagePath", "/dev/termination-log")
    c.setdefault("terminationMessagePolicy", "File")
    c.setdefault("resources", {})
    for port in c.get("ports") or ():
        if isinstance(port, dict):
            port.setdefault("protocol", "TCP")
    for probe in (c.get(p) for p in _PROBES):
        if isinstance(probe, dict):
            _default_probe(probe)
    for env in c.get("env") or ():
        field_ref = ((env.get("valueFrom") or {}).get("fieldRef") if isinstance(env, dict) else None)
        if isinstance(field_ref, dict):
            field_ref.setdefault("apiVersion", "v1")


def _default_probe(probe: dict[str, Any]) -> None:
    probe.setdefault("timeoutSeconds", 1)
    probe.setdefault("periodSeconds", 10)
    probe.setdefault("successThreshold", 1)
    probe.setdefault("failureThreshold", 3)
    http = probe.get("httpGet")
    if isinstance(http, dict):
        http.setdefault("path", "/")
        http.setdefault("scheme", "HTTP")


def _default_volume(volume: dict[str, Any]) -> None:
    if set(volume) <= {"name"}:  # no source: an emptyDir
        volume["emptyDir"] = {}
    for source in _MODE_SOURCES:
        s = volume.get(source)
        if isinstance(s, dict):
            s.setdefault("defaultMode", _DEFAULT_MODE)
