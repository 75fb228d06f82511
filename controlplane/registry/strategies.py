"""Per-type behaviour at create: name validation and defaulting, as kube-apiserver's
strategies and defaulting functions do it (the subset this server implements).

    >>> problems = validate_name("pods", "Web_0")        # -> [cause], a 422 Invalid
    >>> default("pods", pod)                               # restartPolicy, dnsPolicy, ... filled in
"""

from __future__ import annotations

import ipaddress
import random
import re
from typing import Any

__all__ = ["default", "validate_name"]

_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?\Z")
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z")
_DNS1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?\Z")

# Names that must be DNS labels (they become host names or DNS names); the rest
# are DNS subdomains, as kube-apiserver's ValidateObjectMeta callers choose.
_LABEL_NAMED = {"namespaces"}
_DNS1035_NAMED = {"services"}


def validate_name(plural: str, name: str) -> list[dict[str, str]]:
    """The causes for a 422 Invalid if ``name`` is not a valid name for ``plural``."""
    if plural in _DNS1035_NAMED:
        ok, limit, what = _DNS1035_LABEL.match(name), 63, "a DNS-1035 label"
        hint = ("must consist of lower case alphanumeric characters or '-', start with an alphabetic character, "
                "and end with an alphanumeric character")
    elif plural in _LABEL_NAMED:
        ok, limit, what = _DNS1123_LABEL.match(name), 63, "a lowercase RFC 1123 label"
        hint = ("must consist of lower case alphanumeric characters or '-', and must start and end with an "
                "alphanumeric character")
    else:
        ok, limit, what = _DNS1123_SUBDOMAIN.match(name), 253, "a lowercase RFC 1123 subdomain"
        hint = ("must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an "
                "alphanumeric character")
    if ok and len(name) <= limit:
        return []
    message = (f"Invalid value: \"{name}\": must be no more than {limit} characters" if ok
               else f"Invalid value: \"{name}\": {what} {hint}")
    return [{"reason": "FieldValueInvalid", "field": "metadata.name", "message": message}]


def _default_pod(pod: dict[str, Any]) -> None:
    spec = pod.setdefault("spec", {})
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("securityContext", {})
    spec.setdefault("enableServiceLinks", True)
    sa = spec.get("serviceAccountName") or spec.get("serviceAccount") or "default"
    spec["serviceAccountName"] = spec["serviceAccount"] = sa
    tolerations = spec.setdefault("tolerations", [])
    keys = {t.get("key") for t in tolerations if isinstance(t, dict)}
    for key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"):
        if key not in keys:  # the DefaultTolerationSeconds admission plugin
            tolerations.append({"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300})
    for c in [*spec.get("initContainers", []), *spec.get("containers", [])]:
        if not isinstance(c, dict):
            continue
        image = str(c.get("image", ""))
        tagless = ":" not in image.rsplit("/", 1)[-1] and "@" not in image
        c.setdefault("imagePullPolicy", "Always" if tagless or image.endswith(":latest") else "IfNotPresent")
        c.setdefault("terminationMessagePath", "/dev/termination-log")
        c.setdefault("terminationMessagePolicy", "File")
        c.setdefault("resources", {})
        for port in c.get("ports", []) or []:
            if isinstance(port, dict):
                port.setdefault("protocol", "TCP")


_SERVICE_CIDR = ipaddress.ip_network("10.96.0.0/12")
_rng = random.Random()


def _default_service(svc: dict[str, Any]) -> None:
    spec = svc.setdefault("spec", {})
    spec.setdefault("type", "ClusterIP")
    spec.setdefault("sessionAffinity", "None")
    if spec.get("clusterIP") in (None, ""):
        # A random address of the service range; kube-apiserver keeps an allocation
        # bitmap, this server does not check collisions yet (2^20 addresses).
        ip = str(_SERVICE_CIDR[_rng.randrange(10, _SERVICE_CIDR.num_addresses - 1)])
        spec["clusterIP"] = ip
        spec["clusterIPs"] = [ip]
    spec.setdefault("ipFamilies", ["IPv4"])
    spec.setdefault("ipFamilyPolicy", "SingleStack")
    spec.setdefault("internalTrafficPolicy", "Cluster")
    for port in spec.get("ports", []) or []:
        if isinstance(port, dict):
            port.setdefault("protocol", "TCP")
            port.setdefault("targetPort", port.get("port"))


_DEFAULTERS = {"pods": _default_pod, "services": _default_service}


def default(plural: str, obj: dict[str, Any]) -> None:
    """Fill in the defaults kube-apiserver applies at create (in place)."""
    f = _DEFAULTERS.get(plural)
    if f is not None:
        f(obj)
