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

from fractions import Fraction
from typing import Any

from ..quantity import parse_quantity

__all__ = ["default_container", "default_pod_spec", "fill", "pair_ips", "qos_class"]

_PROBES = ("livenessProbe", "readinessProbe", "startupProbe")
_MODE_SOURCES = ("secret", "configMap", "projected", "downwardAPI")
_DEFAULT_MODE = 0o644  # 420


def fill(d: dict[str, Any], key: str, value: Any) -> Any:
    """Set ``d[key]`` to its default ``value`` where it is absent, null or ``""`` (Go decodes
    a null into the zero value, and a defaulting function fills a zero string or a nil
    pointer: a Helm chart's empty ``imagePullPolicy:`` is defaulted, not refused); returns
    what ``d[key]`` holds. A zero number or false is a value, kept."""
    got = d.get(key)
    if got is None or got == "":
        d[key] = got = value
    return got


_UNSET = (None, "")  # what ``fill`` replaces; inlined below, where every pod create passes


def default_pod_spec(spec: dict[str, Any]) -> None:
    """Fill in ``spec``'s decode-time defaults, in place (``fill``'s rule, inlined)."""
    if spec.setdefault("restartPolicy", "Always") in _UNSET:
        spec["restartPolicy"] = "Always"
    if spec.setdefault("dnsPolicy", "ClusterFirst") in _UNSET:
        spec["dnsPolicy"] = "ClusterFirst"
    if spec.setdefault("schedulerName", "default-scheduler") in _UNSET:
        spec["schedulerName"] = "default-scheduler"
    if spec.setdefault("terminationGracePeriodSeconds", 30) in _UNSET:
        spec["terminationGracePeriodSeconds"] = 30
    spec.setdefault("securityContext", {})
    for key in ("initContainers", "containers", "ephemeralContainers"):
        for c in spec.get(key) or ():
            if isinstance(c, dict):
                default_container(c)
    for volume in spec.get("volumes") or ():
        if isinstance(volume, dict):
            _default_volume(volume)


def default_container(c: dict[str, Any]) -> None:
    if c.get("imagePullPolicy") in _UNSET:
        image = str(c.get("image", ""))
        tagless = ":" not in image.rsplit("/", 1)[-1] and "@" not in image
        c["imagePullPolicy"] = "Always" if tagless or image.endswith(":latest") else "IfNotPresent"
    if c.setdefault("terminationMessagePath", "/dev/termination-log") in _UNSET:
        c["terminationMessagePath"] = "/dev/termination-log"
    if c.setdefault("terminationMessagePolicy", "File") in _UNSET:
        c["terminationMessagePolicy"] = "File"
    c.setdefault("resources", {})
    for port in c.get("ports") or ():
        if isinstance(port, dict):
            fill(port, "protocol", "TCP")
    for probe in (c.get(p) for p in _PROBES):
        if isinstance(probe, dict):
            _default_probe(probe)
    lifecycle = c.get("lifecycle")
    if lifecycle and isinstance(lifecycle, dict):  # SetDefaults_HTTPGetAction holds for hooks too
        for hook in (lifecycle.get("postStart"), lifecycle.get("preStop")):
            http = hook.get("httpGet") if isinstance(hook, dict) else None
            if isinstance(http, dict):
                fill(http, "path", "/")
                fill(http, "scheme", "HTTP")
    for env in c.get("env") or ():
        field_ref = ((env.get("valueFrom") or {}).get("fieldRef") if isinstance(env, dict) else None)
        if isinstance(field_ref, dict):
            fill(field_ref, "apiVersion", "v1")


_PROBE_DEFAULTS = (("timeoutSeconds", 1), ("periodSeconds", 10), ("successThreshold", 1), ("failureThreshold", 3))


def _default_probe(probe: dict[str, Any]) -> None:
    for key, value in _PROBE_DEFAULTS:  # SetDefaults_Probe: a zero (or absent) count is defaulted
        if not probe.get(key):
            probe[key] = value
    http = probe.get("httpGet")
    if isinstance(http, dict):
        fill(http, "path", "/")
        fill(http, "scheme", "HTTP")


def _default_volume(volume: dict[str, Any]) -> None:
    if set(volume) <= {"name"}:  # no source: an emptyDir
        volume["emptyDir"] = {}
    for source in _MODE_SOURCES:
        s = volume.get(source)
        if isinstance(s, dict):
            s.setdefault("defaultMode", _DEFAULT_MODE)


def qos_class(spec: dict[str, Any]) -> str:
    """The pod's quality of service class, as upstream's GetPodQOS sets it at create from the
    cpu and memory of every container and init container: BestEffort without requests or
    limits; Guaranteed when each container limits both and every request equals its limit
    (summed over the containers); else Burstable. (The sums are made only for a pod whose
    every container limits both: most pods are Burstable before any arithmetic.) A pod with
    pod-level ``resources`` (PodLevelResources, on since 1.34) is classed by those alone, as
    if they were its one container's."""
    pod_level = spec.get("resources")
    resources = [pod_level] if isinstance(pod_level, dict) else \
        [c.get("resources") or {} for key in ("containers", "initContainers")
         for c in spec.get(key) or () if isinstance(c, dict)]
    resources = [r if isinstance(r, dict) else {} for r in resources]
    any_set, all_limited = False, bool(resources)
    for r in resources:
        requests, limits = r.get("requests"), r.get("limits")
        for name in _QOS_RESOURCES:
            if isinstance(requests, dict) and _positive(requests.get(name)):
                any_set = True
            if isinstance(limits, dict) and _positive(limits.get(name)):
                any_set = True
            else:
                all_limited = False
    if not any_set:
        return "BestEffort"
    if not all_limited:
        return "Burstable"
    for name in _QOS_RESOURCES:
        asked = sum((_value(r.get("requests"), name) for r in resources), Fraction(0))
        if not asked or asked != sum((_value(r.get("limits"), name) for r in resources), Fraction(0)):
            return "Burstable"  # (a limit without a request: the create's defaults have made it one)
    return "Guaranteed"


_QOS_RESOURCES = ("cpu", "memory")


def _value(amounts: Any, name: str) -> Fraction:
    raw = amounts.get(name) if isinstance(amounts, dict) else None
    if raw is None:
        return Fraction(0)
    try:
        value = parse_quantity(raw)
    except ValueError:
        return Fraction(0)
    return value if value > 0 else Fraction(0)


def _positive(raw: Any) -> bool:
    """Whether a quantity is above zero, without parsing a well-formed string: positive when
    unsigned or ``+`` and a digit other than 0 comes before any suffix (``100m``, ``0.5``,
    not ``0``, ``0Gi``, ``-1``)."""
    if isinstance(raw, str):
        return raw[:1] != "-" and raw.lstrip("+0.")[:1] in "123456789" and raw.lstrip("+0.")[:1] != ""
    if isinstance(raw, int | float) and not isinstance(raw, bool):
        return raw > 0
    return False


def pair_ips(status: dict[str, Any]) -> dict[str, Any]:
    """``status`` with ``podIPs``/``hostIPs`` and ``podIP``/``hostIP`` agreeing, as upstream's
    v1 PodStatus conversion leaves them on every write: a singular address alone is also
    the list's only entry; a singular address that differs from the list's first entry
    wins (older kubelets set only it); a list alone gives the singular its first entry."""
    for single, plural in (("podIP", "podIPs"), ("hostIP", "hostIPs")):
        ip, ips = status.get(single), status.get(plural)
        if not isinstance(ips, list):
            ips = None
        if isinstance(ip, str) and ip:
            first = ips[0].get("ip") if ips and isinstance(ips[0], dict) else None
            if first != ip:
                status = {**status, plural: [{"ip": ip}]}
        elif ips and isinstance(ips[0], dict) and isinstance(ips[0].get("ip"), str) and ips[0]["ip"]:
            status = {**status, single: ips[0]["ip"]}
    return status
