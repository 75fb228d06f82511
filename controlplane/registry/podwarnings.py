"""The warnings kube-apiserver sends (``Warning`` headers, which kubectl prints as
``Warning: ...``) for a valid pod or pod template: upstream's ``pkg/api/pod/warnings.go``
(``GetWarningsForPod``, ``GetWarningsForPodTemplate``) and the name warnings of the pod's and
the workloads' strategies (``WarningsOnCreate``).

Covered: deprecated node labels in a node selector, node affinity and topology spread keys, a
null label selector in a spread constraint or pod (anti-)affinity term, the deprecated pod
annotations (critical-pod, sysctls, seccomp without its field), removed volume plugins,
duplicate host alias IPs and image pull secrets, an empty image pull secret name, an env
variable hiding an earlier one, duplicate or overlapping container ports, a negative
termination grace period, a fractional byte quantity (an ephemeral volume's claim's too); and a
PersistentVolumeClaim's (``claim_warnings``); overlapping item paths of a volume (``volume_path_warnings``);
a template's AppArmor annotation without its field.

    >>> pod_warnings({"nodeSelector": {"beta.kubernetes.io/os": "linux"}}, {}, "spec.template.")
    ['spec.template.spec.nodeSelector[beta.kubernetes.io/os]: deprecated since v1.14; use "kubernetes.io/os" instead']
"""

from __future__ import annotations

import math
import re
from typing import Any

from ..quantity import QuantityError, canonical_quantity, parse_quantity
from .podvalidation import dns_label_problems

__all__ = ["claim_spec_warnings", "claim_warnings", "name_warning", "pod_warnings", "template_warnings",
           "volume_path_warnings"]

Obj = dict[str, Any]

# pkg/api/node's deprecatedNodeLabels
DEPRECATED_NODE_LABELS = {
    "beta.kubernetes.io/arch": 'deprecated since v1.14; use "kubernetes.io/arch" instead',
    "beta.kubernetes.io/os": 'deprecated since v1.14; use "kubernetes.io/os" instead',
    "failure-domain.beta.kubernetes.io/region": 'deprecated since v1.17; use "topology.kubernetes.io/region" instead',
    "failure-domain.beta.kubernetes.io/zone": 'deprecated since v1.17; use "topology.kubernetes.io/zone" instead',
    "beta.kubernetes.io/instance-type": 'deprecated since v1.17; use "node.kubernetes.io/instance-type" instead',
    "app.kubernetes.io/created-by": "deprecated since v1.9",
    "scheduler.alpha.kubernetes.io/preferAvoidPods": "deprecated since v1.22; use Taints and Tolerations instead",
    "node-role.kubernetes.io/master": 'use "node-role.kubernetes.io/control-plane" instead',
}

_DEPRECATED_ANNOTATIONS = (
    ("scheduler.alpha.kubernetes.io/critical-pod",
     'non-functional in v1.16+; use the "priorityClassName" field instead'),
    ("security.alpha.kubernetes.io/sysctls", 'non-functional in v1.11+; use the "sysctls" field instead'),
    ("security.alpha.kubernetes.io/unsafe-sysctls", 'non-functional in v1.11+; use the "sysctls" field instead'),
)
_SECCOMP_POD = "seccomp.security.alpha.kubernetes.io/pod"
_SECCOMP_CONTAINER = "container.seccomp.security.alpha.kubernetes.io/"
_SECCOMP_WORDS = 'non-functional in v1.27+; use the "seccompProfile" field instead'

# removed or deprecated volume plugins, in upstream's order
_VOLUMES = (
    ("photonPersistentDisk", "deprecated in v1.11, non-functional in v1.16+"),
    ("gitRepo", "deprecated in v1.11"),
    ("scaleIO", "deprecated in v1.16, non-functional in v1.22+"),
    ("flocker", "deprecated in v1.22, non-functional in v1.25+"),
    ("storageos", "deprecated in v1.22, non-functional in v1.25+"),
    ("quobyte", "deprecated in v1.22, non-functional in v1.25+"),
    ("glusterfs", "deprecated in v1.25, non-functional in v1.26+"),
    ("ephemeral", ""),
    ("cephfs", "deprecated in v1.28, non-functional in v1.31+"),
    ("rbd", "deprecated in v1.28, non-functional in v1.31+"),
)
_VOLUME_PATH = {"storageos": "storageOS"}  # upstream's path names the Go field
_VOLUME_KEYS = frozenset(plugin for plugin, _ in _VOLUMES)

_NULL_SELECTOR = "a null labelSelector results in matching no pod"

_APPARMOR = "container.apparmor.security.beta.kubernetes.io/"
_APPARMOR_WORDS = 'deprecated since v1.30; use the "appArmorProfile" field instead'

# a projection's sources
_PROJECTIONS = ("secret", "configMap", "downwardAPI", "serviceAccountToken", "clusterTrustBundle", "podCertificate")
_CERTIFICATE_PATHS = (("certificateChainPath", "PodCertificate chain"), ("keyPath", "PodCertificate key"),
                      ("credentialBundlePath", "PodCertificate credential bundle"))


def _dict(v: Any) -> Obj:
    return v if isinstance(v, dict) else {}


def _list(v: Any) -> list[Any]:
    return v if isinstance(v, list) else []


def _term_warnings(term: Obj, at: str) -> list[str]:
    """``GetWarningsForNodeSelectorTerm``: a deprecated label as an expression's key."""
    out = []
    for i, expr in enumerate(_list(term.get("matchExpressions"))):
        key = str(_dict(expr).get("key") or "")
        if key in DEPRECATED_NODE_LABELS:
            out.append(f"{at}.matchExpressions[{i}].key: {key} is {DEPRECATED_NODE_LABELS[key]}")
    return out


_BYTES = ("memory", "ephemeral-storage")


# a byte quantity written as whole units: digits and at most a whole suffix (``128Mi``, ``1G``,
# ``500``), the common case, known whole without parsing it
_WHOLE_BYTES = re.compile(r"[0-9]+(?:[KMGTPE]i|[kMGTPE])?\Z")


_whole_texts: set[str] = set()  # (those met, up to a bound: a cluster's pods say the same few)


def _whole_text(value: str) -> bool:
    if _WHOLE_BYTES.match(value) is None:
        return False
    if len(_whole_texts) < 4096:
        _whole_texts.add(value)
    return True


def _fractional(value: Any) -> str | None:
    """Upstream's words for a byte quantity whose ``MilliValue()`` (rounded up) is no whole
    number of units; None for a whole one, or for no quantity (validation's to refuse)."""
    if value is None or isinstance(value, bool) or type(value) is int:
        return None
    if type(value) is str and (value in _whole_texts or _whole_text(value)):
        return None
    try:
        milli = math.ceil(parse_quantity(value) * 1000)
        text = canonical_quantity(str(value))
    except (QuantityError, ValueError, OverflowError):
        return None
    if milli % 1000 == 0:
        return None
    return f'fractional byte value "{text}" is invalid, must be an integer'


def _some_fractional(resources: Obj) -> bool:
    """Whether a container's ``resources`` may hold a fractional byte quantity."""
    for kind in ("limits", "requests"):
        values = resources.get(kind)
        if values and isinstance(values, dict):
            for resource in _BYTES:
                value = values.get(resource)
                if value is not None and _fractional(value) is not None:
                    return True
    return False


def _go_quote(text: str) -> str:
    """Go's ``%q`` of a string (``strconv.Quote``), for the printable text a path is."""
    out = text.replace("\\", "\\\\").replace('"', '\\"')
    if out.isprintable():
        return f'"{out}"'
    return '"' + "".join(ch if ch.isprintable() else f"\\u{ord(ch):04x}" if ord(ch) > 0x7f else
                         {"\n": "\\n", "\t": "\\t", "\r": "\\r"}.get(ch, f"\\x{ord(ch):02x}") for ch in out) + '"'


def _path_text(path: str, source: str) -> str:
    """upstream's ``pathAndSource`` as printed: the quoted path, then its source if any."""
    return f"{_go_quote(path)} ({source})" if source else _go_quote(path)


def _overlaps(paths: list[tuple[str, str]], seen: list[tuple[str, str]]) -> list[str]:
    """``checkVolumeMappingForOverlap``: each path (trailing slashes cut) against those before
    it (``seen``, which it joins), equal or one inside the other; an empty path is none."""
    out = []
    for path, source in paths:
        path = path.rstrip("/")
        if path:
            below = path + "/"
            for other, other_source in seen:
                if other and ((other == path and other_source == source) or (other + "/").startswith(below)
                              or below.startswith(other + "/")):
                    out.append(f"{_path_text(path, source)} with {_path_text(other, other_source)}")
        seen.append((path, source))
    return out


def _items(source: Obj) -> list[str] | None:
    """The paths of a source's ``items``; None where it has none (its keys are its files)."""
    items = source.get("items")
    if items is None:
        return None
    return [str(_dict(item).get("path") or "") for item in _list(items)]


def _projected_paths(source: Obj) -> list[tuple[str, str]]:
    """The paths one projected source writes, each with its source's words."""
    for kind, label, ref in (("configMap", "ConfigMap", "name"), ("secret", "Secret", "name"),
                             ("downwardAPI", "DownwardAPI", None)):
        inner = source.get(kind)
        if isinstance(inner, dict):
            paths = _items(inner)
            if paths is not None:
                words = f"{label} {_go_quote(str(inner.get(ref) or ''))}" if ref else label
                return [(path, words) for path in paths]
    token = source.get("serviceAccountToken")
    if isinstance(token, dict):
        return [(str(token.get("path") or ""), "ServiceAccountToken")]
    bundle = source.get("clusterTrustBundle")
    if isinstance(bundle, dict):
        name = bundle.get("name") or bundle.get("signerName") or ""
        return [(str(bundle.get("path") or ""), f"ClusterTrustBundle {_go_quote(str(name))}")]
    certificate = source.get("podCertificate")
    if isinstance(certificate, dict):
        return [(str(certificate[key]), words) for key, words in _CERTIFICATE_PATHS if certificate.get(key)]
    return []


# the sources of the volume ServiceAccount admission gives a pod (api/serviceaccount.py's
# token_volume), on most pods: known to overlap nothing by one comparison
_ADMITTED_SOURCES = [
    {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
    {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
    {"downwardAPI": {"items": [{"path": "namespace",
                                "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
]


def _distinct_names(sources: Any) -> bool:
    """Whether the paths of these projected sources (or of a volume with items) are known to
    overlap nothing, and none is empty: each a name with no slash, none twice. The common
    volumes (a ServiceAccount admission's token, CA and namespace; a ConfigMap's few keys) are
    told so without the messages' work."""
    if type(sources) is not list:
        return False
    names: set[str] = set()
    count = 0
    for source in sources:
        if type(source) is not dict:
            return False
        token = source.get("serviceAccountToken")
        if token is not None:
            paths = [token.get("path") if type(token) is dict else None]
        else:
            inner = source.get("configMap") or source.get("downwardAPI") or source.get("secret")
            if type(inner) is not dict:
                return False  # (an empty source, or one whose paths are the full check's)
            items = inner.get("items")
            if items is None:
                continue  # (its keys are its files: no paths to compare)
            if type(items) is not list:
                return False
            paths = [item.get("path") if type(item) is dict else None for item in items]
        for path in paths:
            if type(path) is not str or not path or "/" in path:
                return False
            names.add(path)
        count += len(paths)
    return len(names) == count


def volume_path_warnings(volume: Obj) -> list[str]:
    """``warningsForOverlappingVirtualPaths`` for one volume: two of a ConfigMap's, Secret's or
    downward API volume's items at one path or one inside the other, the same across a
    projected volume's sources, and a projected source with nothing in it."""
    name = _go_quote(str(volume.get("name") or ""))
    out = []
    for kind, label, ref in (("configMap", "ConfigMap", "name"), ("secret", "Secret", "secretName"),
                             ("downwardAPI", "DownwardAPI", None)):
        inner = volume.get(kind)
        if isinstance(inner, dict):
            paths = _items(inner)
            if paths and len(paths) > 1:
                words = f"{label} {_go_quote(str(inner.get(ref) or ''))}" if ref else label
                out += [f"volume {name} ({words}): overlapping paths: {overlap}"
                        for overlap in _overlaps([(path, "") for path in paths], [])]
    projected = volume.get("projected")
    if isinstance(projected, dict):
        sources = _list(projected.get("sources"))
        seen: list[tuple[str, str]] = []
        for source in sources:
            source = _dict(source)
            if all(source.get(kind) is None for kind in _PROJECTIONS):
                out.append(f"volume {name} (Projected) has no sources provided")
                continue
            out += [f"volume {name} (Projected): overlapping paths: {overlap}"
                    for overlap in _overlaps(_projected_paths(source), seen)]
    return out


def claim_spec_warnings(spec: Obj, at: str = "spec") -> list[str]:
    """``GetWarningsForPersistentVolumeClaimSpec``: a fractional storage request or limit."""
    resources = _dict(_dict(spec).get("resources"))
    out = []
    for kind in ("requests", "limits"):
        warning = _fractional(_dict(resources.get(kind)).get("storage"))
        if warning:
            out.append(f"{at}.resources.{kind}[storage]: {warning}")
    return out


def claim_warnings(claim: Obj) -> list[str]:
    """``GetWarningsForPersistentVolumeClaim`` (a claim's create and update, not its status's):
    the beta storage class annotation, then the spec's."""
    out = []
    if "volume.beta.kubernetes.io/storage-class" in _dict(_dict(claim.get("metadata")).get("annotations")):
        out.append('metadata.annotations[volume.beta.kubernetes.io/storage-class]: deprecated since v1.8; use '
                   '"storageClassName" attribute instead')
    return out + claim_spec_warnings(_dict(claim.get("spec")))


def _port_text(port: Obj) -> str:
    """A ContainerPort as Go's ``%+v`` prints the struct."""
    return (f"{{Name:{port.get('name') or ''} HostPort:{port.get('hostPort') or 0} "
            f"ContainerPort:{port.get('containerPort') or 0} Protocol:{port.get('protocol') or ''} "
            f"HostIP:{port.get('hostIP') or ''}}}")


def _containers(spec: Obj, at: str) -> list[tuple[Obj, str]]:
    """``VisitContainersWithPath``: init containers, containers, then ephemeral ones."""
    out = []
    for field in ("initContainers", "containers", "ephemeralContainers"):
        for i, c in enumerate(_list(spec.get(field))):
            if isinstance(c, dict):
                out.append((c, f"{at}spec.{field}[{i}]"))
    return out


def pod_warnings(spec: Obj, meta: Obj, at: str = "") -> list[str]:
    """``warningsForPodSpecAndMeta`` for a pod (``at`` empty) or a template at ``at`` (its path
    with a trailing dot, ``spec.template.``).

    Every pod create and template update comes here, so each check is behind a test of
    whether the pod has what it looks at (most have no node selector, affinity, aliases,
    overhead or annotations), and a container's path is made only for a warning."""
    spec, meta = _dict(spec), _dict(meta)
    annotations = _dict(meta.get("annotations"))
    out: list[str] = []
    selector = spec.get("nodeSelector")
    if selector and isinstance(selector, dict):
        for key in selector:
            if key in DEPRECATED_NODE_LABELS:
                out.append(f"{at}spec.nodeSelector[{key}]: {DEPRECATED_NODE_LABELS[key]}")
    affinity = _dict(spec.get("affinity"))
    if affinity:
        node = _dict(affinity.get("nodeAffinity"))
        required = _dict(node.get("requiredDuringSchedulingIgnoredDuringExecution"))
        for i, term in enumerate(_list(required.get("nodeSelectorTerms"))):
            out += _term_warnings(_dict(term), f"{at}spec.affinity.nodeAffinity.requiredDuringSchedulingIgnored"
                                                f"DuringExecution.nodeSelectorTerms[{i}]")
        for i, term in enumerate(_list(node.get("preferredDuringSchedulingIgnoredDuringExecution"))):
            out += _term_warnings(_dict(_dict(term).get("preference")),
                                  f"{at}spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution"
                                  f"[{i}].preference")
    for i, c in enumerate(_list(spec.get("topologySpreadConstraints"))):
        c = _dict(c)
        key = str(c.get("topologyKey") or "")
        if key in DEPRECATED_NODE_LABELS:
            out.append(f"{at}spec.topologySpreadConstraints[{i}].topologyKey: {key} is {DEPRECATED_NODE_LABELS[key]}")
        if c.get("labelSelector") is None:
            out.append(f"{at}spec.topologySpreadConstraints[{i}].labelSelector: {_NULL_SELECTOR}")
    if annotations:
        for key, words in _DEPRECATED_ANNOTATIONS:
            if key in annotations:
                out.append(f"{at}metadata.annotations[{key}]: {words}")
    overlaps = None  # (the volumes whose paths may overlap)
    for i, volume in enumerate(_list(spec.get("volumes"))):
        if type(volume) is not dict:
            continue
        projected = volume.get("projected")
        if projected is not None:  # (but for the lone token of a bare kube-api-access)
            sources = projected.get("sources") if type(projected) is dict else None
            if not (len(volume) == 2 and type(sources) is list and len(sources) == 1
                    and type(sources[0]) is dict and sources[0].get("serviceAccountToken")) \
                    and sources != _ADMITTED_SOURCES and not _distinct_names(sources):
                overlaps = (overlaps or []) + [volume]
        elif ("configMap" in volume or "secret" in volume or "downwardAPI" in volume) \
                and not _distinct_names([volume]):
            overlaps = (overlaps or []) + [volume]
        if not _VOLUME_KEYS.isdisjoint(volume):
            for plugin, words in _VOLUMES:
                if plugin == "ephemeral":  # (upstream's order: its claim's between glusterfs and cephfs)
                    claim = _dict(volume.get("ephemeral")).get("volumeClaimTemplate")
                    if isinstance(claim, dict):
                        out += claim_spec_warnings(_dict(claim.get("spec")),
                                                   f"{at}spec.volumes[{i}].ephemeral.volumeClaimTemplate.spec")
                elif volume.get(plugin) is not None:
                    out.append(f"{at}spec.volumes[{i}].{_VOLUME_PATH.get(plugin, plugin)}: {words}")
    if overlaps:
        for volume in overlaps:
            out += volume_path_warnings(volume)
    aliases = spec.get("hostAliases")
    if aliases:
        seen: set[str] = set()
        for i, alias in enumerate(_list(aliases)):
            ip = str(_dict(alias).get("ip") or "")
            if ip in seen:
                out.append(f'{at}spec.hostAliases[{i}].ip: duplicate ip "{ip}"')
            seen.add(ip)
    pull_secrets = spec.get("imagePullSecrets")
    if pull_secrets:
        secrets = [str(_dict(s).get("name") or "") for s in _list(pull_secrets)]
        seen = set()
        for i, name in enumerate(secrets):
            if name in seen:
                out.append(f'{at}spec.imagePullSecrets[{i}].name: duplicate name "{name}"')
            seen.add(name)
        for i, name in enumerate(secrets):
            if not name:
                out.append(f'{at}spec.imagePullSecrets[{i}].name: invalid empty name ""')
    overhead = spec.get("overhead")
    if overhead and isinstance(overhead, dict):
        for resource in _BYTES:
            warning = _fractional(overhead.get(resource))
            if warning:
                out.append(f"{at}spec.overhead[{resource}]: {warning}")
    if annotations and _SECCOMP_POD in annotations and _dict(spec.get("securityContext")).get("seccompProfile") is None:
        out.append(f"{at}metadata.annotations[{_SECCOMP_POD}]: {_SECCOMP_WORDS}")
    container_seccomp = bool(annotations) and any(k.startswith(_SECCOMP_CONTAINER) for k in annotations)
    # (a pod's own AppArmor annotations are warned of where its fields are set from them)
    apparmor = bool(at) and bool(annotations) and any(k.startswith(_APPARMOR) for k in annotations)
    if apparmor and _dict(spec.get("securityContext")).get("appArmorProfile") is not None:
        apparmor = False
    with_ports, port_count = False, 0
    for field in ("initContainers", "containers", "ephemeralContainers"):
        for ci, c in enumerate(_list(spec.get(field))):
            if not isinstance(c, dict):
                continue
            if container_seccomp:
                key = _SECCOMP_CONTAINER + str(c.get("name") or "")
                if key in annotations and _dict(c.get("securityContext")).get("seccompProfile") is None:
                    out.append(f"{at}metadata.annotations[{key}]: {_SECCOMP_WORDS}")
            if apparmor:
                key = _APPARMOR + str(c.get("name") or "")
                if key in annotations and _dict(c.get("securityContext")).get("appArmorProfile") is None:
                    out.append(f"{at}metadata.annotations[{key}]: {_APPARMOR_WORDS}")
            resources = c.get("resources")
            if resources and isinstance(resources, dict) and _some_fractional(resources):
                for resource in _BYTES:
                    for kind in ("limits", "requests"):
                        warning = _fractional(_dict(resources.get(kind)).get(resource))
                        if warning:
                            out.append(f"{at}spec.{field}[{ci}].resources.{kind}[{resource}]: {warning}")
            envs = c.get("env")
            if envs and isinstance(envs, list) and len(envs) > 1:
                names: set[str] = set()
                for i, env in enumerate(envs):
                    env = _dict(env)
                    name, value = str(env.get("name") or ""), str(env.get("value") or "")
                    if name in names:
                        ref = f"$({name})"
                        if env.get("valueFrom") is not None or value == ref or ref not in value:
                            out.append(f'{at}spec.{field}[{ci}].env[{i}]: hides previous definition of "{name}", '
                                       "which may be dropped when using apply")
                    names.add(name)
            ports = c.get("ports")
            if ports:  # one port without a host IP has nothing to warn of
                port_count += len(ports) if isinstance(ports, list) else 2
                with_ports = with_ports or port_count > 1 or type(ports[0]) is not dict or bool(ports[0].get("hostIP"))
    if with_ports:
        out += _port_warnings(_containers(spec, at))
    grace = spec.get("terminationGracePeriodSeconds")
    if isinstance(grace, int) and not isinstance(grace, bool) and grace < 0:
        out.append(f"{at}spec.terminationGracePeriodSeconds: must be >= 0; negative values are invalid and will be "
                   "treated as 1")
    if affinity:
        for kind in ("podAffinity", "podAntiAffinity"):
            terms = _dict(affinity.get(kind))
            for i, term in enumerate(_list(terms.get("requiredDuringSchedulingIgnoredDuringExecution"))):
                if _dict(term).get("labelSelector") is None:
                    out.append(f"{at}spec.affinity.{kind}.requiredDuringSchedulingIgnoredDuringExecution[{i}]"
                               f".labelSelector: {_NULL_SELECTOR}")
            for i, term in enumerate(_list(terms.get("preferredDuringSchedulingIgnoredDuringExecution"))):
                if _dict(_dict(term).get("podAffinityTerm")).get("labelSelector") is None:
                    out.append(f"{at}spec.affinity.{kind}.preferredDuringSchedulingIgnoredDuringExecution[{i}]"
                               f".podAffinityTerm.labelSelector: {_NULL_SELECTOR}")
    return out


def _port_warnings(containers: list[tuple[Obj, str]]) -> list[str]:
    """The ports' warnings: a host IP without a host port, and ports that collide."""
    out = []
    ports: dict[tuple[Any, Any], list[tuple[str, int, Obj]]] = {}
    for c, path in containers:
        for i, port in enumerate(_list(c.get("ports"))):
            port = _dict(port)
            host_ip, host_port = port.get("hostIP") or "", port.get("hostPort") or 0
            if host_ip and not host_port:
                out.append(f"{path}.ports[{i}]: hostIP set without hostPort: {_port_text(port)}")
            number = (port.get("containerPort") or 0, port.get("protocol") or "")
            for other_path, j, other in ports.get(number, []):
                other_ip, other_port = other.get("hostIP") or "", other.get("hostPort") or 0
                if host_ip == other_ip and host_port == other_port:
                    problem = "duplicate"
                elif not host_port or not other_port:
                    problem = "overlapping"
                elif host_port == other_port and bool(host_ip) != bool(other_ip):
                    problem = "dangerously ambiguous"
                else:
                    continue
                out.append(f"{path}.ports[{i}]: {problem} port definition with {other_path}.ports[{j}]")
            ports.setdefault(number, []).append((path, i, port))
    return out


# where each workload keeps its pod template
TEMPLATES = {
    "deployments": ("spec", "template"), "replicasets": ("spec", "template"),
    "statefulsets": ("spec", "template"), "daemonsets": ("spec", "template"),
    "replicationcontrollers": ("spec", "template"), "jobs": ("spec", "template"),
    "cronjobs": ("spec", "jobTemplate", "spec", "template"), "podtemplates": ("template",),
}


def template_warnings(plural: str, obj: Obj) -> list[str]:
    """``GetWarningsForPodTemplate`` at the workload's template."""
    keys = TEMPLATES[plural]
    template: Any = obj
    for key in keys:
        template = _dict(template).get(key)
    if not isinstance(template, dict):
        return []
    return pod_warnings(_dict(template.get("spec")), _dict(template.get("metadata")), ".".join(keys) + ".")


def name_warning(plural: str, name: str) -> list[str]:
    """The strategies' warning for a name that is no DNS label (it becomes a hostname)."""
    problems = dns_label_problems(name)
    if not problems:
        return []
    used = "the Pod's hostname" if plural == "pods" else "Pod names and hostnames"
    return [f"metadata.name: this is used in {used}, which can result in surprising behavior; a DNS label is "
            f"recommended: [{' '.join(problems)}]"]
