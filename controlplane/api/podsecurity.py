"""PodSecurity admission: the Pod Security Standards, as kube-apiserver's built-in
``PodSecurity`` plugin (``staging/src/k8s.io/pod-security-admission``).

A namespace chooses a level (``privileged``, ``baseline``, ``restricted``) and a policy
version (``latest`` or ``v1.N``) for each of three modes with its labels::

    pod-security.kubernetes.io/enforce: restricted        # a violating pod is refused (403)
    pod-security.kubernetes.io/enforce-version: v1.24
    pod-security.kubernetes.io/warn: baseline             # the client is warned
    pod-security.kubernetes.io/audit: baseline            # an audit annotation (in the audit log, when on)

A label left out takes the server's default: ``privileged:latest`` for all three, with no
exemptions, as upstream's default configuration, unless an AdmissionConfiguration file
(``serve --admission-control-config-file``) says otherwise (``load_configuration``). Pods
are checked on create and update (enforce, warn, audit); the pod templates of workload
resources get warnings only; a namespace whose ``enforce`` level tightens gets warnings
naming its existing pods that violate it (at most 3000 pods, within a second, as upstream).

The checks are a table (``CHECKS``): each has an ID, a level and versions, each version a
minimum policy version and a function of the pod's metadata and spec (JSON, as stored) that
answers None (allowed) or a ``(reason, detail)`` pair with upstream's wording. Restricted is
every baseline check but those a restricted check overrides, plus the restricted checks;
a level's checks run baseline IDs first, then restricted, each set in ID order
(``policy/registry.go``), which is the order of the reasons in a message.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from ..gostrings import quote

__all__ = ["Configuration", "DEFAULT_CONFIGURATION", "load_configuration", "LABEL_PREFIX", "LEVELS", "Policy",
           "LevelVersion", "policy_of", "label_causes", "evaluate", "forbidden_detail", "pod_message",
           "PodEvaluation", "evaluate_pod", "version_label", "prioritize_pods",
           "workload_template", "significant_pod_update", "namespace_warnings", "WORKLOAD_RESOURCES",
           "MAX_PODS_TO_CHECK", "POD_CHECK_SECONDS"]

LABEL_PREFIX = "pod-security.kubernetes.io/"
LEVELS = ("privileged", "baseline", "restricted")
_MODES = ("enforce", "audit", "warn")

MAX_PODS_TO_CHECK = 3000  # a namespace's existing pods checked against a new enforce level
POD_CHECK_SECONDS = 1.0  # ... and for at most this long (upstream's defaults)

# the resources whose pod templates are checked (warn and audit only): upstream's
# DefaultPodSpecExtractor; a CronJob's template is under its jobTemplate
WORKLOAD_RESOURCES: dict[tuple[str, str], tuple[str, ...]] = {
    ("", "replicationcontrollers"): ("spec", "template"),
    ("", "podtemplates"): ("template",),
    ("apps", "replicasets"): ("spec", "template"),
    ("apps", "deployments"): ("spec", "template"),
    ("apps", "statefulsets"): ("spec", "template"),
    ("apps", "daemonsets"): ("spec", "template"),
    ("batch", "jobs"): ("spec", "template"),
    ("batch", "cronjobs"): ("spec", "jobTemplate", "spec", "template"),
}

Spec = Mapping[str, Any]
Meta = Mapping[str, Any]
Result = tuple[str, str] | None  # (forbidden reason, forbidden detail); None: allowed
CheckFn = Callable[[Meta, Spec], Result]


# --- levels, versions, policies (api/helpers.go) ---------------------------------------

@dataclass(frozen=True, slots=True)
class LevelVersion:
    level: str
    version: int | None  # the minor of v1.N; None: latest

    def __str__(self) -> str:
        return f"{self.level}:{'latest' if self.version is None else f'v1.{self.version}'}"


PRIVILEGED = LevelVersion("privileged", None)


@dataclass(frozen=True, slots=True)
class Policy:
    enforce: LevelVersion
    audit: LevelVersion
    warn: LevelVersion

    def checks_nothing(self) -> bool:
        return self.enforce.level == self.audit.level == self.warn.level == "privileged"


DEFAULT_POLICY = Policy(PRIVILEGED, PRIVILEGED, PRIVILEGED)


def _parse_version(value: str) -> int | None:
    """The minor of ``v1.N`` (no leading zeros, as upstream's ``^v1\\.(0|[1-9][0-9]*)$``),
    None for ``latest``; ValueError otherwise."""
    if value == "latest":
        return None
    minor = value[3:] if value.startswith("v1.") else ""
    if minor.isascii() and minor.isdigit() and (minor == "0" or not minor.startswith("0")):
        return int(minor)
    raise ValueError('must be "latest" or "v1.x"')


def policy_of(labels: Mapping[str, Any] | None,
              defaults: Policy = DEFAULT_POLICY) -> tuple[Policy, list[dict[str, str]]]:
    """The namespace's policy from its labels, and the causes of its invalid labels (upstream's
    ``PolicyToEvaluate``): a policy is always answered; an invalid enforce level means
    ``restricted``, an invalid audit or warn level ``privileged`` (they fail open), an
    invalid version ``latest``."""
    if not labels:
        return defaults, []
    causes: list[dict[str, str]] = []
    modes = {"enforce": defaults.enforce, "audit": defaults.audit, "warn": defaults.warn}
    for mode in _MODES:
        level, version = modes[mode].level, modes[mode].version
        key = LABEL_PREFIX + mode
        if key in labels:
            value = labels[key]
            if value in LEVELS:
                level = value
            else:
                level = "restricted" if mode == "enforce" else "privileged"
                causes.append(_invalid_label(key, value, "must be one of " + ", ".join(LEVELS)))
        key += "-version"
        if key in labels:
            value = labels[key]
            try:
                version = _parse_version(value if isinstance(value, str) else "")
            except ValueError as e:
                version = None
                causes.append(_invalid_label(key, value, str(e)))
        modes[mode] = LevelVersion(level, version)
    return Policy(modes["enforce"], modes["audit"], modes["warn"]), causes


@dataclass(frozen=True, slots=True)
class Configuration:
    """The plugin's PodSecurityConfiguration: the policy of a namespace without labels, and
    the namespaces, users and runtime classes exempt from it."""

    defaults: Policy = DEFAULT_POLICY
    namespaces: frozenset[str] = frozenset()
    usernames: frozenset[str] = frozenset()
    runtime_classes: frozenset[str] = frozenset()

    @property
    def labels_decide(self) -> bool:
        """Whether only a namespace's labels can ask for checks (the defaults check nothing)."""
        return self.defaults.checks_nothing()


DEFAULT_CONFIGURATION = Configuration()

_ADMISSION_CONFIGURATION = ("apiserver.config.k8s.io/v1", "apiserver.config.k8s.io/v1alpha1",
                            "apiserver.k8s.io/v1alpha1")
_POD_SECURITY_CONFIGURATION = ("pod-security.admission.config.k8s.io/v1",
                               "pod-security.admission.config.k8s.io/v1beta1")


def load_configuration(path: Path) -> Configuration:
    """The PodSecurity plugin's configuration in a kube-apiserver AdmissionConfiguration file
    (``--admission-control-config-file``): its ``configuration``, or the file its ``path``
    names (relative to this one); the defaults when it names no PodSecurity plugin. Other
    plugins' entries are ignored. ValueError for what upstream would refuse to start with."""
    import yaml

    def load(file: Path) -> Any:
        try:
            return yaml.safe_load(file.read_text())
        except (OSError, yaml.YAMLError) as e:
            raise ValueError(f"admission configuration {file}: {e}") from e

    doc = load(path)
    if not isinstance(doc, dict) or doc.get("kind") != "AdmissionConfiguration" \
            or doc.get("apiVersion") not in _ADMISSION_CONFIGURATION:
        raise ValueError(f"{path}: not an AdmissionConfiguration of {', '.join(_ADMISSION_CONFIGURATION)}")
    plugin = next((p for p in doc.get("plugins") or () if isinstance(p, dict) and p.get("name") == "PodSecurity"),
                  None)
    if plugin is None:
        return DEFAULT_CONFIGURATION
    config = plugin.get("configuration")
    if config is None and plugin.get("path"):
        config = load(path.parent / str(plugin["path"]))
    if config is None:
        return DEFAULT_CONFIGURATION
    if not isinstance(config, dict) or config.get("kind") != "PodSecurityConfiguration" \
            or config.get("apiVersion") not in _POD_SECURITY_CONFIGURATION:
        raise ValueError(f"{path}: the PodSecurity plugin's configuration is not a PodSecurityConfiguration of "
                         f"{', '.join(_POD_SECURITY_CONFIGURATION)}")
    defaults = config.get("defaults") or {}
    labels = {LABEL_PREFIX + k: v for k, v in defaults.items()} if isinstance(defaults, dict) else {}
    policy, causes = policy_of(labels)
    if causes:
        raise ValueError(f"{path}: " + "; ".join(
            c["field"].replace("metadata.labels[" + LABEL_PREFIX, "defaults.").rstrip("]") + ": " + c["message"]
            for c in causes))
    exemptions = config.get("exemptions") or {}

    def names(key: str) -> frozenset[str]:
        values = exemptions.get(key) or [] if isinstance(exemptions, dict) else []
        if not isinstance(values, list) or not all(isinstance(v, str) and v for v in values):
            raise ValueError(f"{path}: exemptions.{key}: must be a list of non-empty strings")
        return frozenset(values)

    return Configuration(policy, names("namespaces"), names("usernames"), names("runtimeClasses"))


def _invalid_label(key: str, value: Any, why: str) -> dict[str, str]:
    return {"reason": "FieldValueInvalid", "field": f"metadata.labels[{key}]",
            "message": f"Invalid value: {_q(str(value))}: {why}"}


def label_causes(labels: Mapping[str, Any] | None) -> list[dict[str, str]]:
    return policy_of(labels)[1]


def _strictness(level: str) -> int:
    return LEVELS.index(level)


# --- helpers shared by the checks (policy/helpers.go, visitor.go) -----------------------

def _q(text: str) -> str:
    return quote(text)


def _join_quote(items: list[str]) -> str:
    return ", ".join(_q(i) for i in items)


def _plural(singular: str, plural: str, count: int) -> str:
    return singular if count == 1 else plural


def _containers(spec: Spec) -> Iterator[Mapping[str, Any]]:
    """Init containers, containers, then ephemeral containers, as upstream's visitor."""
    for field in ("initContainers", "containers", "ephemeralContainers"):
        for c in spec.get(field) or ():
            if isinstance(c, Mapping):
                yield c


def _name(c: Mapping[str, Any]) -> str:
    return str(c.get("name") or "")


def _sc(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    sc = obj.get("securityContext")
    return sc if isinstance(sc, Mapping) else {}


def _sub(obj: Mapping[str, Any], key: str) -> Mapping[str, Any] | None:
    value = obj.get(key)
    return value if isinstance(value, Mapping) else None


def _user_namespace(spec: Spec) -> bool:
    """``hostUsers: false``: the pod runs in a user namespace (KEP-127 relaxations, 1.35+)."""
    return spec.get("hostUsers") is False


def _windows(spec: Spec) -> bool:
    os = _sub(spec, "os")
    return os is not None and os.get("name") == "windows"


def _setters(pod_bad: bool, containers: list[str]) -> list[str]:
    """``pod`` and/or ``container(s) "a", "b"``: who set a forbidden value."""
    setters = ["pod"] if pod_bad else []
    if containers:
        setters.append(f"{_plural('container', 'containers', len(containers))} {_join_quote(containers)}")
    return setters


# --- the checks (policy/check_*.go) ----------------------------------------------------

def _host_namespaces(meta: Meta, spec: Spec) -> Result:
    found = sorted(f for f in ("hostNetwork", "hostPID", "hostIPC") if spec.get(f) is True)
    return ("host namespaces", ", ".join(found)) if found else None


def _privileged(meta: Meta, spec: Spec) -> Result:
    bad = [_name(c) for c in _containers(spec) if _sc(c).get("privileged") is True]
    if not bad:
        return None
    return "privileged", (f"{_plural('container', 'containers', len(bad))} {_join_quote(bad)} "
                          "must not set securityContext.privileged=true")


_BASELINE_CAPABILITIES = frozenset((
    "AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD", "NET_BIND_SERVICE",
    "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"))


def _capabilities_baseline(meta: Meta, spec: Spec) -> Result:
    bad: list[str] = []
    added: set[str] = set()
    for c in _containers(spec):
        caps = _sub(_sc(c), "capabilities")
        extra = {str(a) for a in (caps or {}).get("add") or () if a not in _BASELINE_CAPABILITIES}
        if extra:
            bad.append(_name(c))
            added |= extra
    if not bad:
        return None
    return "non-default capabilities", (
        f"{_plural('container', 'containers', len(bad))} {_join_quote(bad)} must not include "
        f"{_join_quote(sorted(added))} in securityContext.capabilities.add")


def _host_path_volumes(meta: Meta, spec: Spec) -> Result:
    bad = [str(v.get("name") or "") for v in spec.get("volumes") or ()
           if isinstance(v, Mapping) and v.get("hostPath") is not None]
    return ("hostPath volumes", f"{_plural('volume', 'volumes', len(bad))} {_join_quote(bad)}") if bad else None


def _host_ports(meta: Meta, spec: Spec) -> Result:
    bad: list[str] = []
    ports: set[str] = set()
    for c in _containers(spec):
        used = {str(p.get("hostPort")) for p in c.get("ports") or ()
                if isinstance(p, Mapping) and p.get("hostPort")}
        if used:
            bad.append(_name(c))
            ports |= used
    if not bad:
        return None
    return "hostPort", (f"{_plural('container', 'containers', len(bad))} {_join_quote(bad)} "
                        f"{_plural('uses', 'use', len(bad))} {_plural('hostPort', 'hostPorts', len(ports))} "
                        f"{', '.join(sorted(ports))}")


def _app_armor_annotation_allowed(value: Any) -> bool:
    return not value or value == "runtime/default" or str(value).startswith("localhost/")


def _app_armor(meta: Meta, spec: Spec) -> Result:
    values: set[str] = set()
    pod_bad = False
    profile = _sub(_sc(spec), "appArmorProfile")
    if profile is not None and profile.get("type") not in ("RuntimeDefault", "Localhost"):
        pod_bad = True
        values.add(str(profile.get("type") or ""))
    bad: list[str] = []
    for c in _containers(spec):
        profile = _sub(_sc(c), "appArmorProfile")
        if profile is not None and profile.get("type") not in ("RuntimeDefault", "Localhost"):
            bad.append(_name(c))
            values.add(str(profile.get("type") or ""))
    setters = _setters(pod_bad, bad)
    listed = sorted(values)
    annotations = meta.get("annotations")
    if isinstance(annotations, Mapping):
        forbidden = sorted(f"{k}={_q(str(v))}" for k, v in annotations.items()
                           if k.startswith("container.apparmor.security.beta.kubernetes.io/")
                           and not _app_armor_annotation_allowed(v))
        if forbidden:
            listed += forbidden
            setters.append(_plural("annotation", "annotations", len(forbidden)))
    if not setters:
        return None
    return (_plural("forbidden AppArmor profile", "forbidden AppArmor profiles", len(listed)),
            f"{' and '.join(setters)} must not set AppArmor profile type to {_join_quote(listed)}")


def _selinux(allowed: frozenset[str]) -> CheckFn:
    def check(meta: Meta, spec: Spec) -> Result:
        types: set[str] = set()
        user = role = False

        def valid(opts: Mapping[str, Any]) -> bool:
            nonlocal user, role
            ok = True
            kind = str(opts.get("type") or "")
            if kind not in allowed:
                ok = False
                types.add(kind)
            if opts.get("user"):
                ok, user = False, True
            if opts.get("role"):
                ok, role = False, True
            return ok

        opts = _sub(_sc(spec), "seLinuxOptions")
        pod_bad = opts is not None and not valid(opts)
        bad = []
        for c in _containers(spec):
            opts = _sub(_sc(c), "seLinuxOptions")
            if opts is not None and not valid(opts):
                bad.append(_name(c))
        setters = _setters(pod_bad, bad)
        if not setters:
            return None
        data: list[str] = []
        if types:
            data.append(f"{_plural('type', 'types', len(types))} {_join_quote(sorted(types))}")
        if user:
            data.append("user may not be set")
        if role:
            data.append("role may not be set")
        return "seLinuxOptions", (f"{' and '.join(setters)} set forbidden securityContext.seLinuxOptions: "
                                  f"{'; '.join(data)}")
    return check


_SELINUX_1_0 = frozenset(("", "container_t", "container_init_t", "container_kvm_t"))


def _proc_mount(meta: Meta, spec: Spec) -> Result:
    bad: list[str] = []
    kinds: set[str] = set()
    for c in _containers(spec):
        mount = _sc(c).get("procMount")
        if mount is not None and mount != "Default":
            bad.append(_name(c))
            kinds.add(str(mount))
    if not bad:
        return None
    return "procMount", (f"{_plural('container', 'containers', len(bad))} {_join_quote(bad)} "
                         f"must not set securityContext.procMount to {_join_quote(sorted(kinds))}")


def _proc_mount_1_35(meta: Meta, spec: Spec) -> Result:
    return None if _user_namespace(spec) else _proc_mount(meta, spec)


_SECCOMP_ANNOTATION_POD = "seccomp.security.alpha.kubernetes.io/pod"
_SECCOMP_ANNOTATION_CONTAINER = "container.seccomp.security.alpha.kubernetes.io/"


def _seccomp_annotation_allowed(value: Any) -> bool:
    return value in ("runtime/default", "docker/default") or str(value).startswith("localhost/")


def _seccomp_baseline_1_0(meta: Meta, spec: Spec) -> Result:
    annotations = meta.get("annotations")
    if not isinstance(annotations, Mapping):
        return None
    forbidden: set[str] = set()
    keys = [_SECCOMP_ANNOTATION_POD] + [_SECCOMP_ANNOTATION_CONTAINER + _name(c) for c in _containers(spec)]
    for key in keys:
        if key in annotations and not _seccomp_annotation_allowed(annotations[key]):
            forbidden.add(f"{key}={_q(str(annotations[key]))}")
    if not forbidden:
        return None
    return "seccompProfile", (f"forbidden {_plural('annotation', 'annotations', len(forbidden))} "
                              f"{', '.join(sorted(forbidden))}")


def _seccomp_valid(profile: Mapping[str, Any]) -> bool:
    return profile.get("type") in ("RuntimeDefault", "Localhost")


def _seccomp_baseline_1_19(meta: Meta, spec: Spec) -> Result:
    values: set[str] = set()
    profile = _sub(_sc(spec), "seccompProfile")
    pod_bad = profile is not None and not _seccomp_valid(profile)
    if pod_bad and profile is not None:
        values.add(str(profile.get("type") or ""))
    bad = []
    for c in _containers(spec):
        profile = _sub(_sc(c), "seccompProfile")
        if profile is not None and not _seccomp_valid(profile):
            bad.append(_name(c))
            values.add(str(profile.get("type") or ""))
    setters = _setters(pod_bad, bad)
    if not setters:
        return None
    return "seccompProfile", (f"{' and '.join(setters)} must not set securityContext.seccompProfile.type to "
                              f"{_join_quote(sorted(values))}")


def _seccomp_restricted_1_19(meta: Meta, spec: Spec) -> Result:
    values: set[str] = set()
    profile = _sub(_sc(spec), "seccompProfile")
    pod_bad = profile is not None and not _seccomp_valid(profile)
    pod_set = profile is not None and not pod_bad
    if pod_bad and profile is not None:
        values.add(str(profile.get("type") or ""))
    explicit, implicit = [], []
    for c in _containers(spec):
        profile = _sub(_sc(c), "seccompProfile")
        if profile is not None:
            if not _seccomp_valid(profile):
                explicit.append(_name(c))
                values.add(str(profile.get("type") or ""))
        elif not pod_set:
            implicit.append(_name(c))
    setters = _setters(pod_bad, explicit)
    if setters:
        return "seccompProfile", (f"{' and '.join(setters)} must not set securityContext.seccompProfile.type to "
                                  f"{_join_quote(sorted(values))}")
    if implicit:
        return "seccompProfile", (f"pod or {_plural('container', 'containers', len(implicit))} "
                                  f"{_join_quote(implicit)} must set securityContext.seccompProfile.type to "
                                  '"RuntimeDefault" or "Localhost"')
    return None


def _sysctls(allowed: frozenset[str]) -> CheckFn:
    def check(meta: Meta, spec: Spec) -> Result:
        bad = [str(s.get("name") or "") for s in _sc(spec).get("sysctls") or ()
               if isinstance(s, Mapping) and s.get("name") not in allowed]
        return ("forbidden sysctls", ", ".join(bad)) if bad else None
    return check


_SYSCTLS_1_0 = frozenset(("kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.tcp_syncookies",
                          "net.ipv4.ping_group_range", "net.ipv4.ip_unprivileged_port_start"))
_SYSCTLS_1_27 = _SYSCTLS_1_0 | {"net.ipv4.ip_local_reserved_ports"}
_SYSCTLS_1_29 = _SYSCTLS_1_27 | {"net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout",
                                 "net.ipv4.tcp_keepalive_intvl", "net.ipv4.tcp_keepalive_probes"}
_SYSCTLS_1_32 = _SYSCTLS_1_29 | {"net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"}
_SYSCTLS_1_37 = _SYSCTLS_1_32 | {"net.ipv4.tcp_slow_start_after_idle", "net.ipv4.tcp_notsent_lowat"}


def _windows_host_process(meta: Meta, spec: Spec) -> Result:
    def host_process(obj: Mapping[str, Any]) -> bool:
        options = _sub(_sc(obj), "windowsOptions")
        return options is not None and options.get("hostProcess") is True

    setters = _setters(host_process(spec), [_name(c) for c in _containers(spec) if host_process(c)])
    if not setters:
        return None
    return "hostProcess", f"{' and '.join(setters)} must not set securityContext.windowsOptions.hostProcess=true"


def _probe_hosts(handler: Any) -> list[str]:
    if not isinstance(handler, Mapping):
        return []
    hosts = []
    for kind in ("httpGet", "tcpSocket"):
        action = _sub(handler, kind)
        if action is not None and action.get("host"):
            hosts.append(str(action["host"]))
    return hosts


def _host_probes_and_lifecycle(meta: Meta, spec: Spec) -> Result:
    bad: set[str] = set()
    hosts: set[str] = set()
    for c in _containers(spec):
        lifecycle = _sub(c, "lifecycle") or {}
        found = [h for handler in (c.get("livenessProbe"), c.get("readinessProbe"), c.get("startupProbe"),
                                   lifecycle.get("postStart"), lifecycle.get("preStop"))
                 for h in _probe_hosts(handler)]
        if found:
            bad.add(_name(c))
            hosts.update(found)
    if not bad:
        return None
    return "probe or lifecycle host", (
        f"{_plural('container', 'containers', len(bad))} {_join_quote(sorted(bad))} "
        f"{_plural('uses', 'use', len(bad))} "
        f"{_plural('probe or lifecycle host', 'probe or lifecycle hosts', len(hosts))} {_join_quote(sorted(hosts))}")


_ALLOWED_VOLUMES = frozenset(("configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "image",
                              "persistentVolumeClaim", "projected", "secret"))
# the restricted types upstream names, in the order it looks for them
_NAMED_VOLUMES = ("hostPath", "gcePersistentDisk", "awsElasticBlockStore", "gitRepo", "nfs", "iscsi", "glusterfs",
                  "rbd", "flexVolume", "cinder", "cephfs", "flocker", "fc", "azureFile", "vsphereVolume", "quobyte",
                  "azureDisk", "photonPersistentDisk", "portworxVolume", "scaleIO", "storageos")


def _restricted_volumes(meta: Meta, spec: Spec) -> Result:
    bad: list[str] = []
    kinds: set[str] = set()
    for v in spec.get("volumes") or ():
        if not isinstance(v, Mapping) or any(v.get(k) is not None for k in _ALLOWED_VOLUMES):
            continue
        bad.append(str(v.get("name") or ""))
        kinds.add(next((k for k in _NAMED_VOLUMES if v.get(k) is not None), "unknown"))
    if not bad:
        return None
    return "restricted volume types", (
        f"{_plural('volume', 'volumes', len(bad))} {_join_quote(bad)} {_plural('uses', 'use', len(bad))} "
        f"{_plural('restricted volume type', 'restricted volume types', len(kinds))} {_join_quote(sorted(kinds))}")


def _allow_privilege_escalation_1_8(meta: Meta, spec: Spec) -> Result:
    bad = [_name(c) for c in _containers(spec) if _sc(c).get("allowPrivilegeEscalation") is not False]
    if not bad:
        return None
    return "allowPrivilegeEscalation != false", (
        f"{_plural('container', 'containers', len(bad))} {_join_quote(bad)} "
        "must set securityContext.allowPrivilegeEscalation=false")


def _not_windows(check: CheckFn) -> CheckFn:
    """A restricted check from policy 1.25 on: pods with ``spec.os.name: windows`` pass."""
    def checked(meta: Meta, spec: Spec) -> Result:
        return None if _windows(spec) else check(meta, spec)
    return checked


def _capabilities_restricted_1_22(meta: Meta, spec: Spec) -> Result:
    missing: list[str] = []
    adding: list[str] = []
    added: set[str] = set()
    for c in _containers(spec):
        caps = _sub(_sc(c), "capabilities")
        if caps is None:
            missing.append(_name(c))
            continue
        if "ALL" not in (caps.get("drop") or ()):
            missing.append(_name(c))
        extra = {str(a) for a in caps.get("add") or () if a != "NET_BIND_SERVICE"}
        if extra:
            adding.append(_name(c))
            added |= extra
    details = []
    if missing:
        details.append(f"{_plural('container', 'containers', len(missing))} {_join_quote(missing)} "
                       'must set securityContext.capabilities.drop=["ALL"]')
    if adding:
        details.append(f"{_plural('container', 'containers', len(adding))} {_join_quote(adding)} "
                       f"must not include {_join_quote(sorted(added))} in securityContext.capabilities.add")
    return ("unrestricted capabilities", "; ".join(details)) if details else None


def _run_as_non_root(meta: Meta, spec: Spec) -> Result:
    value = _sc(spec).get("runAsNonRoot")
    pod_bad = value is False
    pod_set = value is True
    explicit, implicit = [], []
    for c in _containers(spec):
        value = _sc(c).get("runAsNonRoot")
        if value is not None:
            if value is False:
                explicit.append(_name(c))
        elif not pod_set:
            implicit.append(_name(c))
    setters = _setters(pod_bad, explicit)
    if setters:
        return "runAsNonRoot != true", f"{' and '.join(setters)} must not set securityContext.runAsNonRoot=false"
    if implicit:
        return "runAsNonRoot != true", (f"pod or {_plural('container', 'containers', len(implicit))} "
                                        f"{_join_quote(implicit)} must set securityContext.runAsNonRoot=true")
    return None


def _run_as_user(meta: Meta, spec: Spec) -> Result:
    def root(obj: Mapping[str, Any]) -> bool:
        value = _sc(obj).get("runAsUser")
        return value == 0 and value is not False

    setters = _setters(root(spec), [_name(c) for c in _containers(spec) if root(c)])
    return ("runAsUser=0", f"{' and '.join(setters)} must not set runAsUser=0") if setters else None


def _unless_user_namespace(check: CheckFn) -> CheckFn:
    """A check from policy 1.35 on: a pod with ``hostUsers: false`` passes (KEP-127)."""
    def checked(meta: Meta, spec: Spec) -> Result:
        return None if _user_namespace(spec) else check(meta, spec)
    return checked


@dataclass(frozen=True, slots=True)
class Check:
    id: str
    level: str  # baseline or restricted
    versions: tuple[tuple[int, CheckFn], ...]  # (minimum policy minor, check), increasing
    overrides: tuple[str, ...] = ()  # restricted only: the baseline checks it replaces


CHECKS: tuple[Check, ...] = (
    Check("appArmorProfile", "baseline", ((0, _app_armor),)),
    Check("capabilities_baseline", "baseline", ((0, _capabilities_baseline),)),
    Check("hostNamespaces", "baseline", ((0, _host_namespaces),)),
    Check("hostPathVolumes", "baseline", ((0, _host_path_volumes),)),
    Check("hostPorts", "baseline", ((0, _host_ports),)),
    Check("hostProbesAndHostLifecycle", "baseline", ((34, _host_probes_and_lifecycle),)),
    Check("privileged", "baseline", ((0, _privileged),)),
    Check("procMount", "baseline", ((0, _proc_mount), (35, _proc_mount_1_35))),
    Check("seLinuxOptions", "baseline", ((0, _selinux(_SELINUX_1_0)),
                                         (31, _selinux(_SELINUX_1_0 | {"container_engine_t"})))),
    Check("seccompProfile_baseline", "baseline", ((0, _seccomp_baseline_1_0), (19, _seccomp_baseline_1_19))),
    Check("sysctls", "baseline", ((0, _sysctls(_SYSCTLS_1_0)), (27, _sysctls(_SYSCTLS_1_27)),
                                  (29, _sysctls(_SYSCTLS_1_29)), (32, _sysctls(_SYSCTLS_1_32)),
                                  (37, _sysctls(_SYSCTLS_1_37)))),
    Check("windowsHostProcess", "baseline", ((0, _windows_host_process),)),
    Check("allowPrivilegeEscalation", "restricted", ((8, _allow_privilege_escalation_1_8),
                                                     (25, _not_windows(_allow_privilege_escalation_1_8)))),
    Check("capabilities_restricted", "restricted", ((22, _capabilities_restricted_1_22),
                                                    (25, _not_windows(_capabilities_restricted_1_22))),
          ("capabilities_baseline",)),
    Check("procMount_restricted", "restricted", ((35, _proc_mount),), ("procMount",)),
    Check("restrictedVolumes", "restricted", ((0, _restricted_volumes),), ("hostPathVolumes",)),
    Check("runAsNonRoot", "restricted", ((0, _run_as_non_root), (35, _unless_user_namespace(_run_as_non_root)))),
    Check("runAsUser", "restricted", ((23, _run_as_user), (35, _unless_user_namespace(_run_as_user)))),
    Check("seccompProfile_restricted", "restricted", ((19, _seccomp_restricted_1_19),
                                                      (25, _not_windows(_seccomp_restricted_1_19))),
          ("seccompProfile_baseline",)),
)

# the newest policy version any check knows: what ``latest`` and any newer v1.N evaluate
MAX_VERSION = max(c.versions[-1][0] for c in CHECKS)


def _version_of(check: Check, minor: int) -> CheckFn | None:
    chosen = None
    for minimum, fn in check.versions:
        if minimum <= minor:
            chosen = fn
    return chosen


@cache
def _checks(level: str, minor: int) -> tuple[CheckFn, ...]:
    """A level's checks at a policy version, in upstream's order: baseline IDs, then
    restricted IDs, each sorted (byte order, as Go's), overridden baseline checks left out."""
    if level == "privileged":
        return ()
    active = {c.id: (c, fn) for c in CHECKS
              if (c.level == "baseline" or level == "restricted") and (fn := _version_of(c, minor)) is not None}
    if level == "restricted":
        for c, _ in list(active.values()):
            if c.level == "restricted":
                for overridden in c.overrides:
                    active.pop(overridden, None)
    ordered = sorted(active.values(), key=lambda cf: (cf[0].level != "baseline", cf[0].id.encode()))
    return tuple(fn for _, fn in ordered)


def evaluate(lv: LevelVersion, meta: Meta, spec: Spec) -> list[tuple[str, str]]:
    """The (reason, detail) of each check ``lv`` fails, in order; empty: allowed."""
    minor = MAX_VERSION if lv.version is None or lv.version > MAX_VERSION else lv.version
    failed = []
    for check in _checks(lv.level, minor):
        result = check(meta, spec)
        if result is not None:
            failed.append((result[0] or "unknown forbidden reason", result[1]))
    return failed


def forbidden_detail(failed: list[tuple[str, str]]) -> str:
    """``host ports (8080), privileged (container "a" must ...)``: reasons with their details."""
    return ", ".join(f"{reason} ({detail})" if detail else reason for reason, detail in failed)


def forbidden_reason(failed: list[tuple[str, str]]) -> str:
    return ", ".join(reason for reason, _ in failed)


@dataclass(frozen=True, slots=True)
class PodEvaluation:
    """What upstream's ``EvaluatePod`` makes of a pod (or a template, not enforced): the refusal's
    message (None: admitted), the warnings, the audit mode's violation (None: none), and the
    decisions its metrics record, ``(decision, policy, mode)``: the enforce mode's allow or
    deny (pods only), and a deny of the audit and warn modes when they are violated."""

    refusal: str | None
    warnings: list[str]
    audit_violation: str | None
    decisions: list[tuple[str, LevelVersion, str]]


def evaluate_pod(policy: Policy, meta: Meta, spec: Spec, enforce: bool) -> PodEvaluation:
    """A pod (or a template, ``enforce`` False) evaluated at each mode's level, as upstream's
    ``EvaluatePod``: no warning beside a refusal; one evaluation shared by modes at the same
    level and version."""
    results: dict[LevelVersion, list[tuple[str, str]]] = {}
    decisions: list[tuple[str, LevelVersion, str]] = []
    refusal = None
    if enforce:
        failed = results[policy.enforce] = evaluate(policy.enforce, meta, spec)
        if failed:
            refusal = f"violates PodSecurity {_q(str(policy.enforce))}: {forbidden_detail(failed)}"
        decisions.append(("deny" if failed else "allow", policy.enforce, "enforce"))
    if policy.audit in results:
        failed = results[policy.audit]
    else:
        failed = results[policy.audit] = evaluate(policy.audit, meta, spec)
    audit_violation = None
    if failed:
        audit_violation = f"would violate PodSecurity {_q(str(policy.audit))}: {forbidden_detail(failed)}"
        decisions.append(("deny", policy.audit, "audit"))
    warnings = []
    if refusal is None:
        failed = results[policy.warn] if policy.warn in results else evaluate(policy.warn, meta, spec)
        if failed:
            warnings.append(f"would violate PodSecurity {_q(str(policy.warn))}: {forbidden_detail(failed)}")
            decisions.append(("deny", policy.warn, "warn"))
    return PodEvaluation(refusal, warnings, audit_violation, decisions)


def pod_message(policy: Policy, meta: Meta, spec: Spec, enforce: bool) -> tuple[str | None, list[str]]:
    """The refusal's message (None: admitted) and the warnings of ``evaluate_pod``."""
    evaluation = evaluate_pod(policy, meta, spec, enforce)
    return evaluation.refusal, evaluation.warnings


EXEMPT_ANNOTATION = LABEL_PREFIX + "exempt"  # the audit annotations upstream's plugin adds
ENFORCE_POLICY_ANNOTATION = LABEL_PREFIX + "enforce-policy"
AUDIT_VIOLATIONS_ANNOTATION = LABEL_PREFIX + "audit-violations"
ERROR_ANNOTATION = LABEL_PREFIX + "error"


def error_annotation(causes: list[dict[str, str]]) -> str:
    """The ``error`` audit annotation of a namespace's invalid labels, as upstream's
    ``EvaluatePod`` words it: ``Failed to parse policy: `` and the labels' errors as a
    ``field.ErrorList``'s aggregate prints them (one alone, several ``[a, b]``)::

        Failed to parse policy: metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: "bogus": ...
    """
    errors = [f"{c['field']}: {c['message']}" for c in causes]
    return "Failed to parse policy: " + (errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]")


def audit_annotations(policy: Policy, evaluation: PodEvaluation, enforce: bool) -> dict[str, str]:
    """The audit annotations of an evaluated pod (or template, ``enforce`` False), as upstream's
    ``EvaluatePod``: the enforced policy (pods only) and, when the audit level is violated, the
    violations: ``would violate PodSecurity "restricted:latest": ...`` (the audit mode's only output)."""
    out = {ENFORCE_POLICY_ANNOTATION: str(policy.enforce)} if enforce else {}
    if evaluation.audit_violation is not None:
        out[AUDIT_VIOLATIONS_ANNOTATION] = evaluation.audit_violation
    return out


def version_label(lv: LevelVersion, server_minor: int) -> str:
    """The ``policy_version`` label of upstream's ``pod_security_evaluations_total``: ``latest``
    for latest and for privileged (always effectively latest), ``future`` past the server's
    own version, else ``v1.N``."""
    if lv.version is None or lv.level == "privileged":
        return "latest"
    return f"v1.{lv.version}" if lv.version <= server_minor else "future"


def workload_template(group: str, plural: str, obj: Mapping[str, Any]) -> tuple[Meta, Spec] | None:
    """A workload's pod template (metadata, spec), None when it has none."""
    path = WORKLOAD_RESOURCES.get((group, plural))
    node: Any = obj
    for key in path or ():
        node = node.get(key) if isinstance(node, Mapping) else None
    if path is None or not isinstance(node, Mapping):
        return None
    meta, spec = node.get("metadata"), node.get("spec")
    return (meta if isinstance(meta, Mapping) else {}), (spec if isinstance(spec, Mapping) else {})


def significant_pod_update(new: Mapping[str, Any], old: Mapping[str, Any]) -> bool:
    """Whether a pod update changes what the checks see of a running pod (upstream's
    ``isSignificantPodUpdate``): its seccomp annotations, its containers' count or images,
    or an ephemeral container added or changed."""
    annotations = (new.get("metadata") or {}).get("annotations") or {}
    old_annotations = (old.get("metadata") or {}).get("annotations") or {}
    if annotations.get(_SECCOMP_ANNOTATION_POD) != old_annotations.get(_SECCOMP_ANNOTATION_POD):
        return True
    spec, old_spec = new.get("spec") or {}, old.get("spec") or {}

    def changed(c: Mapping[str, Any], o: Mapping[str, Any]) -> bool:
        key = _SECCOMP_ANNOTATION_CONTAINER + _name(c)
        return c.get("image") != o.get("image") or annotations.get(key) != old_annotations.get(key)

    for field in ("containers", "initContainers"):
        now, before = spec.get(field) or [], old_spec.get(field) or []
        if len(now) != len(before) or any(changed(c, o) for c, o in zip(now, before, strict=True)):
            return True
    previous = {_name(o): o for o in old_spec.get("ephemeralContainers") or () if isinstance(o, Mapping)}
    for c in spec.get("ephemeralContainers") or ():
        o = previous.get(_name(c))
        if o is None or changed(c, o):
            return True
    return False


def tightens(new: Policy, old: Policy) -> bool:
    """Whether a namespace's new enforce level is worth checking its pods against (upstream
    skips an unchanged enforce, a privileged one, and a relaxed one at the same version)."""
    if new.enforce == old.enforce or new.enforce.level == "privileged":
        return False
    return not (new.enforce.version == old.enforce.version
                and _strictness(new.enforce.level) <= _strictness(old.enforce.level))


def prioritize_pods(pods: Sequence[Mapping[str, Any]],
                    exempt_runtime_classes: frozenset[str] = frozenset()) -> list[Mapping[str, Any]]:
    """The pods a namespace's new enforce level is checked against, in upstream's order
    (``prioritizePods``): those of an exempt runtime class left out; one pod of each controller
    (and every pod without one) first, in the order given, the controllers' other pods after."""
    first: list[Mapping[str, Any]] = []
    later: list[Mapping[str, Any]] = []
    controllers: set[Any] = set()
    for pod in pods:
        spec = pod.get("spec") or {}
        if spec.get("runtimeClassName") and spec.get("runtimeClassName") in exempt_runtime_classes:
            continue
        owner = next((ref for ref in (pod.get("metadata") or {}).get("ownerReferences") or ()
                      if isinstance(ref, Mapping) and ref.get("controller") is True), None)
        if owner is None:
            first.append(pod)
        elif owner.get("uid") in controllers:
            later.append(pod)
        else:
            controllers.add(owner.get("uid"))
            first.append(pod)
    return first + later


def namespace_warnings(namespace: str, enforce: LevelVersion, pods: Sequence[Mapping[str, Any]],
                       total: int | None = None, seconds: float = POD_CHECK_SECONDS,
                       exempt_runtime_classes: frozenset[str] = frozenset()) -> list[str]:
    """The warnings of a namespace whose enforce level became ``enforce`` about its existing
    ``pods`` (upstream's ``EvaluatePodsInNamespace``): one per distinct set of reasons, with
    the lexically first pod's name and how many others share it, sorted; preceded by a note
    when not all pods were checked (more than 3000, or out of time) and a summary line.
    ``total``: how many pods the namespace has, when ``pods`` are only the first of them."""
    prioritized = prioritize_pods(pods, exempt_runtime_classes)
    total = len(prioritized) if total is None else max(total - (len(pods) - len(prioritized)), len(prioritized))
    checking = prioritized[:MAX_PODS_TO_CHECK]
    checked = len(checking)
    first: dict[str, tuple[str, int]] = {}  # reasons -> (first pod name, count)
    order: list[str] = []
    deadline = time.monotonic() + seconds
    for i, pod in enumerate(checking):
        meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
        failed = evaluate(enforce, meta, spec)
        if failed:
            reasons = forbidden_reason(failed)
            name = str(meta.get("name") or "")
            if reasons not in first:
                first[reasons] = (name, 1)
                order.append(reasons)
            else:
                seen, count = first[reasons]
                first[reasons] = (min(seen, name), count + 1)
        if time.monotonic() > deadline:
            checked = i + 1
            break
    warnings = []
    if checked < total:
        warnings.append(f"new PodSecurity enforce level only checked against the first {checked} of {total} "
                        "existing pods")
    if order:
        warnings.append(f"existing pods in namespace {_q(namespace)} violate the new PodSecurity enforce level "
                        f"{_q(str(enforce))}")
    decorated = []
    for reasons in order:
        name, count = first[reasons]
        if count == 1:
            decorated.append(f"{name}: {reasons}")
        elif count == 2:
            decorated.append(f"{name} (and 1 other pod): {reasons}")
        else:
            decorated.append(f"{name} (and {count - 1} other pods): {reasons}")
    return warnings + sorted(decorated)
