"""kube-controller-manager's ``--controllers``: which of its controllers run.

``serve --controllers LIST`` takes upstream's list syntax (its
``cmd/kube-controller-manager/app/options`` and ``k8s.io/controller-manager``):
a comma-separated list where ``*`` turns on every controller that is on by
default, ``foo`` turns on the controller named ``foo`` and ``-foo`` turns it
off. The first entry that names a controller decides for it; a controller no
entry names is on when the list holds ``*`` and it is not off by default. The
default is ``*``.

The names are upstream's canonical ones (``names/controller_names.go``, as of
1.37); the short names of before 1.30 (``replicaset``, ``garbagecollector``,
``podgc``...) are still accepted as aliases. A name upstream knows but this
emulator has no controller for (``bootstrap-signer-controller``,
``endpointslice-mirroring-controller``...) is accepted and changes nothing; one
upstream does not know is refused at start with upstream's message::

    >>> enabled_controllers(parse_list("*,-replicaset"))["replicaset-controller"]
    False
    >>> check(parse_list("*,-nosuch"))
    Traceback (most recent call last):
    ...
    ValueError: "nosuch" is not in the list of known controllers

Components that are not kube-controller-manager's (the scheduler, the node
simulator, the autoscaler, kube-apiserver's own controllers) do not read this
list (``components.py``).
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Mapping

from .gostrings import quote

__all__ = ["ALIASES", "DEFAULT", "DISABLED_BY_DEFAULT", "KNOWN", "canonical", "check", "enabled_controllers",
           "is_enabled", "parse_list"]

# every controller upstream registers (NewControllerDescriptors), sorted as its --help lists them. The cloud
# provider loops (service-lb, node-route, cloud-node-lifecycle) were dropped in 1.36 and are unknown since.
KNOWN: tuple[str, ...] = tuple(sorted((
    "bootstrap-signer-controller", "certificatesigningrequest-approving-controller",
    "certificatesigningrequest-cleaner-controller", "certificatesigningrequest-signing-controller",
    "clusterrole-aggregation-controller", "cronjob-controller", "daemonset-controller", "deployment-controller",
    "device-taint-eviction-controller", "disruption-controller", "endpoints-controller", "endpointslice-controller",
    "endpointslice-mirroring-controller", "ephemeral-volume-controller", "garbage-collector-controller",
    "horizontal-pod-autoscaler-controller", "job-controller",
    "kube-apiserver-serving-clustertrustbundle-publisher-controller",
    "legacy-serviceaccount-token-cleaner-controller", "namespace-controller", "node-ipam-controller",
    "node-lifecycle-controller", "persistentvolume-attach-detach-controller", "persistentvolume-binder-controller",
    "persistentvolume-expander-controller", "persistentvolume-protection-controller",
    "persistentvolumeclaim-protection-controller", "pod-garbage-collector-controller",
    "podcertificaterequest-cleaner-controller", "podgroup-protection-controller", "replicaset-controller",
    "replicationcontroller-controller", "resourceclaim-controller", "resourcepoolstatusrequest-controller",
    "resourcequota-controller", "root-ca-certificate-publisher-controller", "selinux-warning-controller",
    "service-cidr-controller", "serviceaccount-controller", "serviceaccount-token-controller",
    "statefulset-controller", "storage-version-migrator-controller", "storageversion-garbage-collector-controller",
    "taint-eviction-controller", "token-cleaner-controller", "ttl-after-finished-controller", "ttl-controller",
    "validatingadmissionpolicy-status-controller", "volumeattributesclass-protection-controller",
)))

# the names of before the canonical ones (1.30), kept by upstream as aliases: alias -> canonical name
ALIASES: Mapping[str, str] = {
    "serviceaccount-token": "serviceaccount-token-controller",
    "endpoint": "endpoints-controller",
    "endpointslice": "endpointslice-controller",
    "endpointslicemirroring": "endpointslice-mirroring-controller",
    "replicationcontroller": "replicationcontroller-controller",
    "podgc": "pod-garbage-collector-controller",
    "resourcequota": "resourcequota-controller",
    "namespace": "namespace-controller",
    "serviceaccount": "serviceaccount-controller",
    "garbagecollector": "garbage-collector-controller",
    "daemonset": "daemonset-controller",
    "job": "job-controller",
    "deployment": "deployment-controller",
    "replicaset": "replicaset-controller",
    "horizontalpodautoscaling": "horizontal-pod-autoscaler-controller",
    "disruption": "disruption-controller",
    "statefulset": "statefulset-controller",
    "cronjob": "cronjob-controller",
    "csrsigning": "certificatesigningrequest-signing-controller",
    "csrapproving": "certificatesigningrequest-approving-controller",
    "csrcleaner": "certificatesigningrequest-cleaner-controller",
    "ttl": "ttl-controller",
    "bootstrapsigner": "bootstrap-signer-controller",
    "tokencleaner": "token-cleaner-controller",
    "nodeipam": "node-ipam-controller",
    "nodelifecycle": "node-lifecycle-controller",
    "persistentvolume-binder": "persistentvolume-binder-controller",
    "attachdetach": "persistentvolume-attach-detach-controller",
    "persistentvolume-expander": "persistentvolume-expander-controller",
    "clusterrole-aggregation": "clusterrole-aggregation-controller",
    "pvc-protection": "persistentvolumeclaim-protection-controller",
    "pv-protection": "persistentvolume-protection-controller",
    "ttl-after-finished": "ttl-after-finished-controller",
    "root-ca-cert-publisher": "root-ca-certificate-publisher-controller",
    "ephemeral-volume": "ephemeral-volume-controller",
    "storage-version-gc": "storageversion-garbage-collector-controller",
    "resource-claim-controller": "resourceclaim-controller",
    "legacy-service-account-token-cleaner": "legacy-serviceaccount-token-cleaner-controller",
}

# off unless named (their descriptors' isDisabledByDefault)
DISABLED_BY_DEFAULT: frozenset[str] = frozenset({
    "bootstrap-signer-controller", "selinux-warning-controller", "token-cleaner-controller"})

DEFAULT: tuple[str, ...] = ("*",)


def parse_list(value: str) -> tuple[str, ...]:
    """The entries of a ``--controllers`` value, as pflag's string slice reads one: a line of
    comma-separated values (double quotes allowed around one), an empty value no entry.

    >>> parse_list("*,-replicaset-controller")
    ('*', '-replicaset-controller')
    >>> parse_list("")
    ()
    """
    if value == "":
        return ()
    return tuple(next(csv.reader([value])))


def canonical(entry: str) -> str:
    """An entry with an alias replaced by its controller's canonical name, its ``-`` kept
    (upstream's ApplyTo). ``*`` and unknown names are returned as they are."""
    off = entry.startswith("-")
    name = entry[1:] if off else entry
    name = ALIASES.get(name, name)
    return f"-{name}" if off else name


def check(entries: Iterable[str]) -> tuple[str, ...]:
    """The entries with their aliases resolved (``canonical``), or ValueError with upstream's
    message for every name it does not know (joined as its aggregated errors are:
    ``[a, b]`` for several)."""
    entries = tuple(entries)
    errors: list[str] = []
    for entry in entries:
        if entry == "*":
            continue
        name = entry.removeprefix("-")
        if ALIASES.get(name, name) not in KNOWN:
            message = f"{quote(name)} is not in the list of known controllers"
            if message not in errors:
                errors.append(message)
    if len(errors) == 1:
        raise ValueError(errors[0])
    if errors:
        raise ValueError("[" + ", ".join(errors) + "]")
    return tuple(canonical(e) for e in entries)


def is_enabled(name: str, entries: Iterable[str]) -> bool:
    """Whether the controller ``name`` runs under the (canonical) ``entries``: the first entry
    naming it decides, else ``*`` turns on those not off by default (upstream's
    IsControllerEnabled)."""
    star = False
    for entry in entries:
        if entry == name:
            return True
        if entry == "-" + name:
            return False
        if entry == "*":
            star = True
    return star and name not in DISABLED_BY_DEFAULT


def enabled_controllers(entries: Iterable[str]) -> dict[str, bool]:
    """Every known controller and whether it runs under ``entries`` (aliases allowed)."""
    resolved = tuple(canonical(e) for e in entries)
    return {name: is_enabled(name, resolved) for name in KNOWN}


