"""The apps/v1 and batch/v1 workloads (and core/v1 ReplicationControllers) as
kube-apiserver writes them: their defaults, and the status fields Go always
serialises.

No controller runs them here; what this module gives is the shape. A Go struct
field without ``omitempty`` is always in the JSON (a StatefulSet's
``status.replicas`` is 0 before any controller looks at it), and clients that
check required fields, such as the official Python client, refuse an object
without them. Defaults are those of ``SetDefaults_Deployment`` and its siblings,
applied on every write as upstream applies them when it decodes a body; a Job
gets its generated selector and labels when it is created (its strategy's
``PrepareForCreate``).

    >>> prepare_workload("statefulsets", sts, None)      # replicas 1, updateStrategy, status zeros, ...
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .podspec import default_pod_spec, fill

__all__ = ["WORKLOADS", "prepare_workload"]

Obj = dict[str, Any]

# status fields without omitempty, per type
_STATUS_ZEROS: dict[str, tuple[str, ...]] = {
    "statefulsets": ("replicas", "availableReplicas"),
    "replicasets": ("replicas",),
    "replicationcontrollers": ("replicas",),
    "daemonsets": ("currentNumberScheduled", "numberMisscheduled", "desiredNumberScheduled", "numberReady"),
}


def _dict(parent: Obj, key: str) -> Obj:
    value = parent.get(key)
    if not isinstance(value, dict):
        value = parent[key] = {}
    return value


def _template(spec: Obj) -> None:
    template = spec.get("template")
    if isinstance(template, dict):
        default_pod_spec(_dict(template, "spec"))


def _deployment(obj: Obj, old: Obj | None) -> None:
    spec = _dict(obj, "spec")
    fill(spec, "replicas", 1)
    strategy = _dict(spec, "strategy")
    fill(strategy, "type", "RollingUpdate")
    if strategy["type"] == "RollingUpdate":
        rolling = _dict(strategy, "rollingUpdate")
        fill(rolling, "maxUnavailable", "25%")
        fill(rolling, "maxSurge", "25%")
    fill(spec, "revisionHistoryLimit", 10)
    fill(spec, "progressDeadlineSeconds", 600)
    _template(spec)


def _replicated(obj: Obj, old: Obj | None) -> None:
    spec = _dict(obj, "spec")
    fill(spec, "replicas", 1)
    _template(spec)


def _replication_controller(obj: Obj, old: Obj | None) -> None:
    _replicated(obj, old)
    spec = obj["spec"]
    labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels")
    if isinstance(labels, dict) and labels:
        if not spec.get("selector"):
            spec["selector"] = dict(labels)
        meta = _dict(obj, "metadata")
        if not meta.get("labels"):
            meta["labels"] = dict(labels)


def _stateful_set(obj: Obj, old: Obj | None) -> None:
    spec = _dict(obj, "spec")
    fill(spec, "replicas", 1)
    fill(spec, "podManagementPolicy", "OrderedReady")
    _stateful_set_strategy(_dict(spec, "updateStrategy"))
    fill(spec, "revisionHistoryLimit", 10)
    default_claim_templates(spec.get("volumeClaimTemplates"))
    retention = _dict(spec, "persistentVolumeClaimRetentionPolicy")
    fill(retention, "whenDeleted", "Retain")
    fill(retention, "whenScaled", "Retain")
    _template(spec)


def default_claim_templates(claims: Any) -> None:
    """SetDefaults_PersistentVolumeClaim and its spec's, on each of a StatefulSet's
    ``volumeClaimTemplates``, in place."""
    for claim in claims or ():
        if isinstance(claim, dict):
            fill(_dict(claim, "spec"), "volumeMode", "Filesystem")
            fill(_dict(claim, "status"), "phase", "Pending")


def _stateful_set_strategy(strategy: Obj) -> None:
    """SetDefaults_StatefulSet's: a strategy without a type is RollingUpdate with default
    parameters; a RollingUpdate one given without ``rollingUpdate`` stays without (the
    controller takes partition 0 and one unavailable pod then). Parameters present get a
    ``partition`` of 0 and a ``maxUnavailable`` of 1 (MaxUnavailableStatefulSet, beta and on
    in 1.37); nil pointers only: an empty ``maxUnavailable`` is a value, which validation
    refuses."""
    if not strategy.get("type"):
        strategy["type"] = "RollingUpdate"
        if strategy.get("rollingUpdate") is None:
            strategy["rollingUpdate"] = {}
    rolling = strategy.get("rollingUpdate")
    if strategy["type"] == "RollingUpdate" and isinstance(rolling, dict):
        for field, default in (("partition", 0), ("maxUnavailable", 1)):
            if rolling.get(field) is None:
                rolling[field] = default


def _daemon_set(obj: Obj, old: Obj | None) -> None:
    spec = _dict(obj, "spec")
    strategy = _dict(spec, "updateStrategy")
    fill(strategy, "type", "RollingUpdate")
    if strategy["type"] == "RollingUpdate":
        rolling = _dict(strategy, "rollingUpdate")
        # nil pointers only: an empty string is a value, which validation refuses
        for bound, default in (("maxUnavailable", 1), ("maxSurge", 0)):
            if rolling.get(bound) is None:
                rolling[bound] = default
    fill(spec, "revisionHistoryLimit", 10)
    _template(spec)


_JOB_UID = "batch.kubernetes.io/controller-uid"
_JOB_NAME = "batch.kubernetes.io/job-name"


def _pod_condition_patterns(spec: Obj) -> None:
    """SetDefaults_PodFailurePolicyOnPodConditionsPattern: a pod failure policy's condition
    patterns match ``status: "True"`` unless they say otherwise (a defaulter of the pattern's
    type, so a CronJob's job template gets it too)."""
    policy = spec.get("podFailurePolicy")
    if isinstance(policy, dict):
        for rule in policy.get("rules") or ():
            for pattern in (rule.get("onPodConditions") or ()) if isinstance(rule, dict) else ():
                if isinstance(pattern, dict):
                    fill(pattern, "status", "True")


def _job_policies(spec: Obj) -> None:
    """SetDefaults_Job's: the condition patterns, and pods replaced once terminating, or only
    once failed with a pod failure policy (which needs to see how they ended)."""
    _pod_condition_patterns(spec)
    fill(spec, "podReplacementPolicy", "TerminatingOrFailed" if spec.get("podFailurePolicy") is None else "Failed")


def _job(obj: Obj, old: Obj | None) -> None:
    spec = _dict(obj, "spec")
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = 1
    fill(spec, "parallelism", 1)
    fill(spec, "backoffLimit", 2147483647 if spec.get("backoffLimitPerIndex") is not None else 6)
    fill(spec, "completionMode", "NonIndexed")
    fill(spec, "suspend", False)
    _job_policies(spec)
    fill(spec, "manualSelector", False)  # SetDefaults_Job writes a nil one as false
    _template(spec)
    meta = obj.get("metadata") or {}
    if old is None and not spec.get("manualSelector") and meta.get("uid"):
        # its strategy's PrepareForCreate: a selector on its uid, and labels to match
        uid, name = meta["uid"], meta.get("name", "")
        spec["selector"] = {"matchLabels": {_JOB_UID: uid}}
        template = _dict(spec, "template")
        labels = _dict(_dict(template, "metadata"), "labels")
        labels.update({"controller-uid": uid, _JOB_UID: uid, "job-name": name, _JOB_NAME: name})
    # SetDefaults_Job: a Job without labels has its template's (the generated ones too, as upstream
    # reads it back from storage)
    template_labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels")
    if isinstance(template_labels, dict) and template_labels and isinstance(meta, dict) and not meta.get("labels"):
        meta["labels"] = dict(template_labels)


def _cron_job(obj: Obj, old: Obj | None) -> None:
    spec = _dict(obj, "spec")
    fill(spec, "concurrencyPolicy", "Allow")
    fill(spec, "suspend", False)
    fill(spec, "successfulJobsHistoryLimit", 3)
    fill(spec, "failedJobsHistoryLimit", 1)
    # SetObjectDefaults_CronJob calls no SetDefaults_Job: the template's job spec keeps what it
    # says (no completions, parallelism, backoffLimit, ...), and the Job made from it gets them
    job_spec = _dict(_dict(spec, "jobTemplate"), "spec")
    _pod_condition_patterns(job_spec)
    _template(job_spec)


_DEFAULTS: dict[str, Callable[[Obj, Obj | None], None]] = {
    "deployments": _deployment, "replicasets": _replicated, "statefulsets": _stateful_set,
    "daemonsets": _daemon_set, "jobs": _job, "replicationcontrollers": _replication_controller,
    "cronjobs": _cron_job,
}

WORKLOADS = frozenset(_DEFAULTS)


def prepare_workload(plural: str, obj: Obj, old: Obj | None) -> None:
    """``obj`` (a ``plural``) with its defaults and its status's always-present fields, in place."""
    _DEFAULTS[plural](obj, old)
    zeros = _STATUS_ZEROS.get(plural)
    if zeros:
        status = _dict(obj, "status")
        for field in zeros:
            status.setdefault(field, 0)
