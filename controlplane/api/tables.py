"""Server-side printing: ``Accept: application/json;as=Table;v=v1;g=meta.k8s.io``.

kubectl asks for Tables so that ``kubectl get`` shows the columns kube-apiserver
chooses per type; priority-1 columns are the ``-o wide`` extras. Types without
printer columns get ``Name`` and ``Created At``, as upstream. Custom resources
get ``Name`` and their CRD's ``additionalPrinterColumns`` (``Age`` if it has none).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from fractions import Fraction
from typing import Any

import orjson

from ..quantity import format_quantity, parse_quantity
from ..registry.custom import CustomVersion
from .jsonpath import JsonPathError, compile_path, find

__all__ = ["as_table", "custom_columns", "wants_table"]

Obj = dict[str, Any]
Column = tuple[str, str, str, int, Callable[[Obj], Any]]  # name, type, format, priority, cell


def wants_table(accept: str) -> bool:
    for part in accept.split(","):
        params = {p.split("=", 1)[0].strip(): p.split("=", 1)[1].strip()
                  for p in part.split(";")[1:] if "=" in p}
        if params.get("as") == "Table" and params.get("g", "meta.k8s.io") == "meta.k8s.io":
            return True
    return False


def _age(obj: Obj) -> str:
    ts = obj.get("metadata", {}).get("creationTimestamp")
    if not ts:
        return "<unknown>"
    try:
        then = datetime.strptime(ts, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError:
        return "<unknown>"
    return human_duration((datetime.now(UTC) - then).total_seconds())


def _since(ts: Any) -> str:
    """How long ago a timestamp was (a CronJob's LAST SCHEDULE), ``<none>`` without one."""
    if not ts:
        return "<none>"
    try:
        then = datetime.strptime(str(ts), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError:
        return "<unknown>"
    return human_duration((datetime.now(UTC) - then).total_seconds())


def human_duration(seconds: float) -> str:
    """kube's duration.HumanDuration: 5s, 3m20s, 4h, 3d5h, 2y."""
    s = int(max(seconds, 0))
    if s < 120:
        return f"{s}s"
    m = s // 60
    if m < 10:
        return f"{m}m{s % 60}s" if s % 60 else f"{m}m"
    if m < 180:
        return f"{m}m"
    h = s // 3600
    if h < 8:
        return f"{h}h{m % 60}m" if m % 60 else f"{h}h"
    if h < 48:
        return f"{h}h"
    d = h // 24
    if d < 8:
        return f"{d}d{h % 24}h" if h % 24 else f"{d}d"
    if d < 730:
        return f"{d}d"
    return f"{d // 365}y"


def _get(obj: Obj, *path: str, default: Any = "") -> Any:
    cur: Any = obj
    for p in path:
        if not isinstance(cur, dict):
            return default
        cur = cur.get(p)
    return default if cur is None else cur


def _name(o: Obj) -> str:
    return str(_get(o, "metadata", "name"))


def _pod_ready(o: Obj) -> str:
    ready, total, _reason, _restarts = _pod_summary(o)
    return f"{ready}/{total}"


def _pod_status(o: Obj) -> str:
    return _pod_summary(o)[2]


def _restarts(o: Obj) -> str:
    restarts, last = _pod_summary(o)[3]
    return f"{restarts} ({_since(last)} ago)" if restarts and last else str(restarts)


def _terminated_reason(t: Obj, prefix: str = "") -> str:
    if t.get("reason"):
        return prefix + str(t["reason"])
    return f"{prefix}Signal:{t['signal']}" if t.get("signal") else f"{prefix}ExitCode:{t.get('exitCode', 0)}"


def _pod_summary(o: Obj) -> tuple[int, int, str, tuple[int, str]]:
    """(ready containers, containers, STATUS, (restarts, last restart)) as kubectl's pod
    printer makes them (printPod): init containers' progress (``Init:1/2``,
    ``Init:CrashLoopBackOff``), a container's waiting or terminated reason (``Completed``,
    ``Error``, ``ExitCode:1``), ``NotReady`` for a completed container beside running
    ones, ``Terminating`` once deleted; sidecars (init containers that always restart)
    count as containers."""
    status = _get(o, "status", default={})
    spec = _get(o, "spec", default={})
    reason = str(status.get("reason") or status.get("phase") or "Pending")
    if any(c.get("type") == "PodScheduled" and c.get("reason") == "SchedulingGated"
           for c in status.get("conditions") or ()):
        reason = "SchedulingGated"
    inits = {c.get("name"): c for c in spec.get("initContainers") or () if isinstance(c, dict)}
    sidecars = {name for name, c in inits.items() if c.get("restartPolicy") == "Always"}
    total = len(spec.get("containers") or ()) + len(sidecars)
    ready = restarts = sidecar_restarts = 0
    last = sidecar_last = ""
    initializing = False
    for i, c in enumerate(status.get("initContainerStatuses") or ()):
        restarts += int(c.get("restartCount") or 0)
        finished = _get(c, "lastState", "terminated", "finishedAt")
        last = max(last, str(finished or ""))
        state = c.get("state") or {}
        terminated, waiting = state.get("terminated"), state.get("waiting") or {}
        if c.get("name") in sidecars:
            sidecar_restarts += int(c.get("restartCount") or 0)
            sidecar_last = max(sidecar_last, str(finished or ""))
            if c.get("started"):  # a sidecar that has started no longer holds the pod's init
                if c.get("ready"):
                    ready += 1
                continue
        if terminated is not None and not terminated.get("exitCode"):
            continue
        if terminated is not None:
            reason = _terminated_reason(terminated, "Init:")
        elif waiting.get("reason") and waiting["reason"] != "PodInitializing":
            reason = "Init:" + str(waiting["reason"])
        else:
            reason = f"Init:{i}/{len(inits)}"
        initializing = True
        break
    initialized = any(c.get("type") == "Initialized" and c.get("status") == "True"
                      for c in status.get("conditions") or ())
    if not initializing or initialized:
        restarts, last = sidecar_restarts, sidecar_last
        running = False
        for c in reversed(status.get("containerStatuses") or ()):
            restarts += int(c.get("restartCount") or 0)
            last = max(last, str(_get(c, "lastState", "terminated", "finishedAt") or ""))
            state = c.get("state") or {}
            terminated, waiting = state.get("terminated"), state.get("waiting") or {}
            if waiting.get("reason"):
                reason = str(waiting["reason"])
            elif terminated is not None:
                reason = _terminated_reason(terminated)
            elif c.get("ready") and state.get("running") is not None:
                running = True
                ready += 1
        if reason == "Completed" and running:
            ready_condition = any(c.get("type") == "Ready" and c.get("status") == "True"
                                  for c in status.get("conditions") or ())
            reason = "Running" if ready_condition else "NotReady"
    meta = _get(o, "metadata", default={})
    if meta.get("deletionTimestamp") and status.get("reason") == "NodeLost":
        reason = "Unknown"
    elif meta.get("deletionTimestamp") and status.get("phase") not in ("Succeeded", "Failed"):
        reason = "Terminating"
    return ready, total, reason, (restarts, last)


def _node_status(o: Obj) -> str:
    ready = next((c for c in _get(o, "status", "conditions", default=[]) if c.get("type") == "Ready"), None)
    s = "Ready" if ready and ready.get("status") == "True" else "NotReady" if ready else "Unknown"
    return s + (",SchedulingDisabled" if _get(o, "spec", "unschedulable", default=False) else "")


def _node_roles(o: Obj) -> str:
    roles = sorted(k.split("/", 1)[1] for k in _get(o, "metadata", "labels", default={})
                   if k.startswith("node-role.kubernetes.io/"))
    return ",".join(roles) or "<none>"


def _ports(o: Obj) -> str:
    ports = _get(o, "spec", "ports", default=[])
    return ",".join(f"{p.get('port')}" + (f":{p['nodePort']}" if p.get("nodePort") else "")
                    + f"/{p.get('protocol', 'TCP')}" for p in ports) or "<none>"


def _external_ip(o: Obj) -> str:
    """A Service's EXTERNAL-IP column, as kubectl prints it per type."""
    kind = _get(o, "spec", "type")
    if kind == "ExternalName":
        return str(_get(o, "spec", "externalName") or "<none>")
    ips = list(_get(o, "spec", "externalIPs", default=[]))
    if kind == "LoadBalancer":
        ingress = [i.get("ip") or i.get("hostname") for i in _get(o, "status", "loadBalancer", "ingress", default=[])]
        ips = [*ingress, *ips]
        return ",".join(ips) if ips else "<pending>"
    return ",".join(ips) or "<none>"


def _selector(o: Obj, *path: str) -> str:
    sel = _get(o, *path, default={})
    return ",".join(f"{k}={v}" for k, v in sorted(sel.items())) or "<none>"


def _containers(o: Obj, field: str) -> str:
    return ",".join(str(c.get(field, "")) for c in _get(o, "spec", "template", "spec", "containers", default=[]))


def _address(o: Obj, kind: str) -> str:
    return next((a.get("address", "") for a in _get(o, "status", "addresses", default=[])
                 if a.get("type") == kind), "<none>")


def _event_object(o: Obj) -> str:
    io = o.get("involvedObject") or o.get("regarding") or {}
    return f"{str(io.get('kind', '')).lower()}/{io.get('name', '')}"


def _parse_ts(ts: Any) -> datetime | None:
    try:
        return datetime.strptime(str(ts), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError:
        return None


def _job_status(o: Obj) -> str:
    """A Job's STATUS column: its terminal or suspended condition, else Running."""
    conditions = {c.get("type"): c.get("status") for c in _get(o, "status", "conditions", default=[])}
    for kind in ("Complete", "Failed", "FailureTarget", "SuccessCriteriaMet", "Suspended"):
        if conditions.get(kind) == "True":
            return kind
    return "Running"


def _job_completions(o: Obj) -> str:
    succeeded = _get(o, "status", "succeeded", default=0)
    completions = _get(o, "spec", "completions", default=None)
    if completions is not None:
        return f"{succeeded}/{completions}"
    parallelism = _get(o, "spec", "parallelism", default=1)
    return f"{succeeded}/1 of {parallelism}" if parallelism > 1 else f"{succeeded}/1"


def _job_duration(o: Obj) -> str:
    start = _parse_ts(_get(o, "status", "startTime"))
    if start is None:
        return ""
    end = _parse_ts(_get(o, "status", "completionTime")) or datetime.now(UTC)
    return human_duration((end - start).total_seconds())


def _subjects(o: Obj, kind: str) -> str:
    names = [(f"{s.get('namespace', '')}/{s.get('name', '')}" if kind == "ServiceAccount" else s.get("name", ""))
             for s in o.get("subjects") or () if s.get("kind") == kind]
    return ", ".join(names)


def _claim_state(o: Obj) -> str:
    """A ResourceClaim's STATE: pending, allocated, reserved (and deleted), as kubectl shows it."""
    states = ["deleted"] if _get(o, "metadata", "deletionTimestamp") else []
    if _get(o, "status", "allocation", default=None) is None:
        if not states:
            states.append("pending")
    else:
        states.append("allocated")
        if _get(o, "status", "reservedFor", default=[]):
            states.append("reserved")
    return ",".join(states)


def _endpoints(o: Obj) -> str:
    shown: list[str] = []
    for subset in o.get("subsets") or ():
        ports = [p.get("port") for p in subset.get("ports") or ()] or [None]
        for a in subset.get("addresses") or ():
            shown.extend(f"{a.get('ip')}:{p}" if p is not None else str(a.get("ip")) for p in ports)
    if not shown:
        return "<none>"
    return ",".join(shown[:3]) + (f" + {len(shown) - 3} more..." if len(shown) > 3 else "")


_ACCESS_MODES = {"ReadWriteOnce": "RWO", "ReadOnlyMany": "ROX", "ReadWriteMany": "RWX",
                 "ReadWriteOncePod": "RWOP"}


def _access_modes(modes: Any) -> str:
    """RWO,ROX,RWX,RWOP in that order, as kubectl's GetAccessModesAsString."""
    given = set(modes or ())
    return ",".join(short for mode, short in _ACCESS_MODES.items() if mode in given)


def _storage(o: Obj, *path: str) -> str:
    return str(_get(o, *path, "storage", default=""))


def _claim_ref(o: Obj) -> str:
    ref = _get(o, "spec", "claimRef", default={})
    return f"{ref.get('namespace', '')}/{ref.get('name', '')}" if ref else ""


def _storage_class_name(o: Obj) -> str:
    default = _get(o, "metadata", "annotations", default={}).get("storageclass.kubernetes.io/is-default-class")
    return _name(o) + (" (default)" if default == "true" else "")


def _quota(o: Obj, limits: bool) -> str:
    """``pods: 1/10, requests.cpu: 500m/2``: the REQUEST or the LIMIT column of a ResourceQuota."""
    hard, used = _get(o, "status", "hard", default={}), _get(o, "status", "used", default={})
    shown = [f"{name}: {used.get(name, '0')}/{hard[name]}" for name in sorted(hard)
             if (name.split(".", 1)[0] == "limits" and "." in name) is limits]
    return ", ".join(shown)


def _some(items: list[str]) -> str:
    """At most three, then ``+ N more...``; ``<unset>`` for none (kubectl's listWithMoreString)."""
    if not items:
        return "<unset>"
    return ",".join(items[:3]) + (f" + {len(items) - 3} more..." if len(items) > 3 else "")


def _slice_ports(o: Obj) -> str:
    return _some([str(p["port"]) if p.get("port") is not None else str(p.get("name") or "*")
                  for p in o.get("ports") or ()])


def _slice_endpoints(o: Obj) -> str:
    return _some([str(a) for e in o.get("endpoints") or () for a in e.get("addresses") or ()])


def _ingress_hosts(o: Obj) -> str:
    hosts = [str(r["host"]) for r in _get(o, "spec", "rules", default=[]) if r.get("host")]
    return _some(hosts) if hosts else "*"


def _load_balancer(o: Obj) -> str:
    shown = [str(i.get("ip") or i.get("hostname") or "")
             for i in _get(o, "status", "loadBalancer", "ingress", default=[])]
    return ",".join(x for x in shown if x)


def _hpa_targets(o: Obj) -> str:
    """``cpu: 40%/80%`` per metric (``<unknown>`` until the status has a current value)."""
    if o.get("apiVersion") == "autoscaling/v1":
        target = _get(o, "spec", "targetCPUUtilizationPercentage", default=None)
        now = _get(o, "status", "currentCPUUtilizationPercentage", default=None)
        return "<none>" if target is None else f"cpu: {'<unknown>' if now is None else f'{now}%'}/{target}%"
    current = _get(o, "status", "currentMetrics", default=[]) or []
    shown = []
    for i, m in enumerate(_get(o, "spec", "metrics", default=[])):
        if m.get("type") not in ("Resource", "ContainerResource"):
            shown.append(f"<{str(m.get('type', '')).lower()}>")
            continue
        source = m.get("resource") or m.get("containerResource") or {}
        target = source.get("target") or {}
        now = (current[i].get("resource") or current[i].get("containerResource") or {}).get("current", {}) \
            if i < len(current) else {}
        if target.get("type") == "Utilization":
            have = f"{now['averageUtilization']}%" if "averageUtilization" in now else "<unknown>"
            shown.append(f"{source.get('name', '')}: {have}/{target.get('averageUtilization', '')}%")
        else:
            want = target.get("averageValue") or target.get("value") or ""
            have = str(now.get("averageValue") or now.get("value") or "<unknown>")
            shown.append(f"{source.get('name', '')}: {have}/{want}")
    if not shown:
        return "<none>"
    return ", ".join(shown[:2]) + (f" + {len(shown) - 2} more..." if len(shown) > 2 else "")


def _controller(o: Obj) -> str:
    """``statefulset.apps/web``: the controlling owner, as kind.group/name."""
    for ref in _get(o, "metadata", "ownerReferences", default=[]):
        if ref.get("controller"):
            group = str(ref.get("apiVersion", "")).rpartition("/")[0]
            return f"{str(ref.get('kind', '')).lower()}{'.' + group if group else ''}/{ref.get('name', '')}"
    return "<none>"


def _label_selector(sel: Obj) -> str:
    """A LabelSelector as text (metav1.FormatLabelSelector): ``app=web,tier in (a,b)``; ``<none>`` if empty."""
    shown = [f"{k}={v}" for k, v in sorted((sel.get("matchLabels") or {}).items())]
    for e in sel.get("matchExpressions") or ():
        key, op, values = e.get("key", ""), e.get("operator", ""), ",".join(e.get("values") or ())
        shown.append({"In": f"{key} in ({values})", "NotIn": f"{key} notin ({values})", "Exists": key,
                      "DoesNotExist": f"!{key}"}.get(op, f"{key} {op} ({values})"))
    return ",".join(shown) or "<none>"


def _template_containers(o: Obj, field: str) -> str:
    return ",".join(str(c.get(field, "")) for c in _get(o, "template", "spec", "containers", default=[]))


def _canonical(q: Any) -> str:
    return format_quantity(parse_quantity(str(q or "0")))


def _summed(o: Obj, resource: str) -> str:
    total = sum((parse_quantity(str(c.get("usage", {}).get(resource, "0"))) for c in o.get("containers") or ()),
                Fraction(0))
    return format_quantity(total)


def _col(name: str, cell: Callable[[Obj], Any], type_: str = "string", priority: int = 0,
         fmt: str = "") -> Column:
    return (name, type_, fmt, priority, cell)


_NAME = _col("Name", _name, fmt="name")
_AGE = _col("Age", _age)
COLUMNS: dict[str, list[Column]] = {
    "pods": [_NAME, _col("Ready", _pod_ready), _col("Status", _pod_status),
             _col("Restarts", _restarts), _AGE,
             _col("IP", lambda o: _get(o, "status", "podIP") or "<none>", priority=1),
             _col("Node", lambda o: _get(o, "spec", "nodeName") or "<none>", priority=1),
             _col("Nominated Node", lambda o: _get(o, "status", "nominatedNodeName") or "<none>", priority=1),
             _col("Readiness Gates", lambda o: "<none>", priority=1)],
    "namespaces": [_NAME, _col("Status", lambda o: _get(o, "status", "phase")), _AGE],
    "nodes": [_NAME, _col("Status", _node_status), _col("Roles", _node_roles), _AGE,
              _col("Version", lambda o: _get(o, "status", "nodeInfo", "kubeletVersion")),
              _col("Internal-IP", lambda o: _address(o, "InternalIP"), priority=1),
              _col("External-IP", lambda o: _address(o, "ExternalIP"), priority=1),
              _col("OS-Image", lambda o: _get(o, "status", "nodeInfo", "osImage"), priority=1),
              _col("Kernel-Version", lambda o: _get(o, "status", "nodeInfo", "kernelVersion"), priority=1),
              _col("Container-Runtime", lambda o: _get(o, "status", "nodeInfo", "containerRuntimeVersion"),
                   priority=1)],
    "services": [_NAME, _col("Type", lambda o: _get(o, "spec", "type")),
                 _col("Cluster-IP", lambda o: _get(o, "spec", "clusterIP") or "<none>"),
                 _col("External-IP", _external_ip),
                 _col("Port(s)", _ports), _AGE,
                 _col("Selector", lambda o: _selector(o, "spec", "selector"), priority=1)],
    "deployments": [_NAME,
                    _col("Ready", lambda o: f"{_get(o, 'status', 'readyReplicas', default=0)}/"
                                            f"{_get(o, 'spec', 'replicas', default=1)}"),
                    _col("Up-to-date", lambda o: _get(o, "status", "updatedReplicas", default=0), "integer"),
                    _col("Available", lambda o: _get(o, "status", "availableReplicas", default=0), "integer"),
                    _AGE,
                    _col("Containers", lambda o: _containers(o, "name"), priority=1),
                    _col("Images", lambda o: _containers(o, "image"), priority=1),
                    _col("Selector", lambda o: _selector(o, "spec", "selector", "matchLabels"), priority=1)],
    "replicasets": [_NAME,
                    _col("Desired", lambda o: _get(o, "spec", "replicas", default=1), "integer"),
                    _col("Current", lambda o: _get(o, "status", "replicas", default=0), "integer"),
                    _col("Ready", lambda o: _get(o, "status", "readyReplicas", default=0), "integer"), _AGE,
                    _col("Containers", lambda o: _containers(o, "name"), priority=1),
                    _col("Images", lambda o: _containers(o, "image"), priority=1),
                    _col("Selector", lambda o: _selector(o, "spec", "selector", "matchLabels"), priority=1)],
    "configmaps": [_NAME, _col("Data", lambda o: len(o.get("data") or {}) + len(o.get("binaryData") or {}),
                               "integer"), _AGE],
    "secrets": [_NAME, _col("Type", lambda o: o.get("type", "Opaque")),
                _col("Data", lambda o: len(o.get("data") or {}), "integer"), _AGE],
    "events": [_col("Last Seen", lambda o: _age({"metadata": {"creationTimestamp": o.get("lastTimestamp")
                                                              or o.get("eventTime")
                                                              or _get(o, "metadata", "creationTimestamp")}})),
               _col("Type", lambda o: o.get("type", "")), _col("Reason", lambda o: o.get("reason", "")),
               _col("Object", _event_object), _col("Message", lambda o: o.get("message") or o.get("note", ""))],
    "leases": [_NAME, _col("Holder", lambda o: _get(o, "spec", "holderIdentity")), _AGE],
    "daemonsets": [_NAME,
                   _col("Desired", lambda o: _get(o, "status", "desiredNumberScheduled", default=0), "integer"),
                   _col("Current", lambda o: _get(o, "status", "currentNumberScheduled", default=0), "integer"),
                   _col("Ready", lambda o: _get(o, "status", "numberReady", default=0), "integer"),
                   _col("Up-to-date", lambda o: _get(o, "status", "updatedNumberScheduled", default=0), "integer"),
                   _col("Available", lambda o: _get(o, "status", "numberAvailable", default=0), "integer"),
                   _col("Node Selector", lambda o: _selector(o, "spec", "template", "spec", "nodeSelector")),
                   _AGE,
                   _col("Containers", lambda o: _containers(o, "name"), priority=1),
                   _col("Images", lambda o: _containers(o, "image"), priority=1),
                   _col("Selector", lambda o: _selector(o, "spec", "selector", "matchLabels"), priority=1)],
    "statefulsets": [_NAME,
                     _col("Ready", lambda o: f"{_get(o, 'status', 'readyReplicas', default=0)}/"
                                             f"{_get(o, 'spec', 'replicas', default=1)}"), _AGE,
                     _col("Containers", lambda o: _containers(o, "name"), priority=1),
                     _col("Images", lambda o: _containers(o, "image"), priority=1)],
    "replicationcontrollers": [
        _NAME, _col("Desired", lambda o: _get(o, "spec", "replicas", default=1), "integer"),
        _col("Current", lambda o: _get(o, "status", "replicas", default=0), "integer"),
        _col("Ready", lambda o: _get(o, "status", "readyReplicas", default=0), "integer"), _AGE,
        _col("Containers", lambda o: _containers(o, "name"), priority=1),
        _col("Images", lambda o: _containers(o, "image"), priority=1),
        _col("Selector", lambda o: _selector(o, "spec", "selector"), priority=1)],
    "jobs": [_NAME, _col("Status", _job_status), _col("Completions", _job_completions),
             _col("Duration", _job_duration), _AGE,
             _col("Containers", lambda o: _containers(o, "name"), priority=1),
             _col("Images", lambda o: _containers(o, "image"), priority=1),
             _col("Selector", lambda o: _selector(o, "spec", "selector", "matchLabels"), priority=1)],
    "cronjobs": [_NAME, _col("Schedule", lambda o: _get(o, "spec", "schedule", default="")),
                 _col("Timezone", lambda o: _get(o, "spec", "timeZone", default="<none>")),
                 _col("Suspend", lambda o: str(bool(_get(o, "spec", "suspend", default=False))), "boolean"),
                 _col("Active", lambda o: len(_get(o, "status", "active", default=[]) or ()), "integer"),
                 _col("Last Schedule", lambda o: _since(_get(o, "status", "lastScheduleTime"))), _AGE,
                 _col("Containers", lambda o: _containers(_get(o, "spec", "jobTemplate", default={}), "name"),
                      priority=1),
                 _col("Images", lambda o: _containers(_get(o, "spec", "jobTemplate", default={}), "image"),
                      priority=1)],
    "poddisruptionbudgets": [
        _NAME, _col("Min Available", lambda o: str(_get(o, "spec", "minAvailable", default="N/A"))),
        _col("Max Unavailable", lambda o: str(_get(o, "spec", "maxUnavailable", default="N/A"))),
        _col("Allowed Disruptions", lambda o: _get(o, "status", "disruptionsAllowed", default=0), "integer"), _AGE],
    "serviceaccounts": [_NAME, _col("Secrets", lambda o: len(o.get("secrets") or ()), "integer"), _AGE],
    "rolebindings": [_NAME, _col("Role", lambda o: f"{_get(o, 'roleRef', 'kind')}/{_get(o, 'roleRef', 'name')}"),
                     _AGE, _col("Users", lambda o: _subjects(o, "User"), priority=1),
                     _col("Groups", lambda o: _subjects(o, "Group"), priority=1),
                     _col("ServiceAccounts", lambda o: _subjects(o, "ServiceAccount"), priority=1)],
    "clusterrolebindings": [_NAME,
                            _col("Role", lambda o: f"{_get(o, 'roleRef', 'kind')}/{_get(o, 'roleRef', 'name')}"),
                            _AGE, _col("Users", lambda o: _subjects(o, "User"), priority=1),
                            _col("Groups", lambda o: _subjects(o, "Group"), priority=1),
                            _col("ServiceAccounts", lambda o: _subjects(o, "ServiceAccount"), priority=1)],
    "priorityclasses": [_NAME, _col("Value", lambda o: o.get("value", 0), "integer"),
                        _col("Global-Default", lambda o: bool(o.get("globalDefault", False)), "boolean"), _AGE,
                        _col("PreemptionPolicy", lambda o: o.get("preemptionPolicy", "PreemptLowerPriority"))],
    "endpoints": [_NAME, _col("Endpoints", _endpoints), _AGE],
    "persistentvolumeclaims": [
        _NAME, _col("Status", lambda o: _get(o, "status", "phase")),
        _col("Volume", lambda o: _get(o, "spec", "volumeName")),
        _col("Capacity", lambda o: _storage(o, "status", "capacity")),
        _col("Access Modes", lambda o: _access_modes(_get(o, "status", "accessModes", default=[]))),
        _col("StorageClass", lambda o: _get(o, "spec", "storageClassName") or "<unset>"),
        _col("VolumeAttributesClass", lambda o: _get(o, "spec", "volumeAttributesClassName") or "<unset>"), _AGE,
        _col("VolumeMode", lambda o: _get(o, "spec", "volumeMode"), priority=1)],
    "persistentvolumes": [
        _NAME, _col("Capacity", lambda o: _storage(o, "spec", "capacity")),
        _col("Access Modes", lambda o: _access_modes(_get(o, "spec", "accessModes", default=[]))),
        _col("Reclaim Policy", lambda o: _get(o, "spec", "persistentVolumeReclaimPolicy")),
        _col("Status", lambda o: _get(o, "status", "phase")), _col("Claim", _claim_ref),
        _col("StorageClass", lambda o: _get(o, "spec", "storageClassName")),
        _col("VolumeAttributesClass", lambda o: _get(o, "spec", "volumeAttributesClassName") or "<unset>"),
        _col("Reason", lambda o: _get(o, "status", "reason")), _AGE,
        _col("VolumeMode", lambda o: _get(o, "spec", "volumeMode"), priority=1)],
    "storageclasses": [
        _col("Name", _storage_class_name, fmt="name"), _col("Provisioner", lambda o: o.get("provisioner", "")),
        _col("ReclaimPolicy", lambda o: o.get("reclaimPolicy", "")),
        _col("VolumeBindingMode", lambda o: o.get("volumeBindingMode", "")),
        _col("AllowVolumeExpansion", lambda o: str(bool(o.get("allowVolumeExpansion"))).lower()), _AGE],
    "resourcequotas": [_NAME, _AGE, _col("Request", lambda o: _quota(o, False)),
                       _col("Limit", lambda o: _quota(o, True))],
    "podtemplates": [_NAME, _col("Containers", lambda o: _template_containers(o, "name")),
                     _col("Images", lambda o: _template_containers(o, "image")),
                     _col("Pod Labels", lambda o: _selector(o, "template", "metadata", "labels"))],
    "controllerrevisions": [_NAME, _col("Controller", _controller),
                            _col("Revision", lambda o: o.get("revision", 0), "integer"), _AGE],
    "horizontalpodautoscalers": [
        _NAME, _col("Reference", lambda o: f"{_get(o, 'spec', 'scaleTargetRef', 'kind')}/"
                                           f"{_get(o, 'spec', 'scaleTargetRef', 'name')}"),
        _col("Targets", _hpa_targets), _col("MinPods", lambda o: _get(o, "spec", "minReplicas", default="<unset>")),
        _col("MaxPods", lambda o: _get(o, "spec", "maxReplicas", default=0)),
        _col("Replicas", lambda o: _get(o, "status", "currentReplicas", default=0)), _AGE],
    "ingresses": [
        _NAME, _col("Class", lambda o: _get(o, "spec", "ingressClassName") or "<none>"),
        _col("Hosts", _ingress_hosts), _col("Address", _load_balancer),
        _col("Ports", lambda o: "80, 443" if _get(o, "spec", "tls", default=[]) else "80"), _AGE],
    "ingressclasses": [
        _NAME, _col("Controller", lambda o: _get(o, "spec", "controller")),
        _col("Parameters", lambda o: (f"{_get(o, 'spec', 'parameters', 'kind')}/{_get(o, 'spec', 'parameters', 'name')}"
                                      if _get(o, "spec", "parameters", default=None) else "<none>")), _AGE],
    "networkpolicies": [_NAME, _col("Pod-Selector", lambda o: _label_selector(_get(o, "spec", "podSelector",
                                                                                     default={}))), _AGE],
    "endpointslices": [_NAME, _col("AddressType", lambda o: o.get("addressType", "")),
                       _col("Ports", _slice_ports), _col("Endpoints", _slice_endpoints), _AGE],
    "runtimeclasses": [_NAME, _col("Handler", lambda o: o.get("handler", "")), _AGE],
    "mutatingwebhookconfigurations": [_NAME, _col("Webhooks", lambda o: len(o.get("webhooks") or ()), "integer"),
                                      _AGE],
    "validatingwebhookconfigurations": [_NAME, _col("Webhooks", lambda o: len(o.get("webhooks") or ()), "integer"),
                                        _AGE],
    "validatingadmissionpolicies": [
        _NAME, _col("Validations", lambda o: len(_get(o, "spec", "validations", default=[]) or ()), "integer"),
        _col("ParamKind", lambda o: (f"{_get(o, 'spec', 'paramKind', 'apiVersion')}/"
                                     f"{_get(o, 'spec', 'paramKind', 'kind')}")
             if _get(o, "spec", "paramKind", default=None) else "<unset>"), _AGE],
    "validatingadmissionpolicybindings": [
        _NAME, _col("PolicyName", lambda o: _get(o, "spec", "policyName")),
        _col("ParamRef", lambda o: "<unset>" if not _get(o, "spec", "paramRef", default=None) else "*"), _AGE],
    "resourceclaims": [_NAME, _col("State", _claim_state), _AGE],
    "deviceclasses": [_NAME, _AGE],
    "resourceclaimtemplates": [_NAME, _AGE],
    "resourceslices": [_NAME, _col("Node", lambda o: _get(o, "spec", "nodeName")),
                       _col("Driver", lambda o: _get(o, "spec", "driver")),
                       _col("Pool", lambda o: _get(o, "spec", "pool", "name")), _AGE],
    # the autoscaling/v1 Scale of a built-in type's ``scale`` subresource (kubectl get --subresource=scale)
    "scales.autoscaling": [_NAME, _col("Desired", lambda o: _get(o, "spec", "replicas", default=0), "integer"),
                           _col("Available", lambda o: _get(o, "status", "replicas", default=0), "integer"), _AGE],
    # metrics.k8s.io (api/resourcemetrics.py): metrics-server's columns; a pod's are its containers' sum
    "nodes.metrics.k8s.io": [_NAME, _col("CPU", lambda o: _canonical(_get(o, "usage", "cpu"))),
                             _col("Memory", lambda o: _canonical(_get(o, "usage", "memory"))),
                             _col("Window", lambda o: _get(o, "window"))],
    "pods.metrics.k8s.io": [_NAME, _col("CPU", lambda o: _summed(o, "cpu")),
                            _col("Memory", lambda o: _summed(o, "memory")),
                            _col("Window", lambda o: _get(o, "window"))],
}
_DEFAULT = [_NAME, _col("Created At", lambda o: _get(o, "metadata", "creationTimestamp"), fmt="date")]


_CUSTOM_DEFAULT = ({"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},)


def _custom_cell(type_: str, path: str) -> Callable[[Obj], Any]:
    """A printer column's cell: the first value its JSONPath selects, as
    apiextensions-apiserver's table convertor shows it (None when absent)."""
    try:
        steps = compile_path(path)
    except JsonPathError:
        return lambda o: None

    def cell(o: Obj) -> Any:
        found = find(steps, o)
        if not found:
            return None
        v = found[0]
        if type_ == "string":
            if isinstance(v, bool):
                return "true" if v else "false"
            return orjson.dumps(v).decode() if isinstance(v, (dict, list)) else str(v)
        if type_ == "integer":
            return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None
        if type_ == "number":
            return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None
        if type_ == "boolean":
            return v if isinstance(v, bool) else None
        if type_ == "date":
            return _age({"metadata": {"creationTimestamp": v}}) if isinstance(v, str) else None
        return None
    return cell


def custom_columns(version: CustomVersion) -> list[Column]:
    """Name, then the version's ``additionalPrinterColumns`` (or Age)."""
    cols = [_NAME]
    for c in version.printer_columns or _CUSTOM_DEFAULT:
        type_ = str(c.get("type", "string"))
        cols.append((str(c.get("name", "")), type_, str(c.get("format", "")), int(c.get("priority", 0)),
                     _custom_cell(type_, str(c.get("jsonPath", "")))))
    return cols


def _row_object(obj: Obj, include: str) -> Obj | None:
    if include == "None":
        return None
    if include == "Object":
        return obj
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj.get("metadata", {})}


def as_table(plural: str, objects: list[Obj], list_meta: Obj | None, include: str = "Metadata",
             columns: bool = True, custom: CustomVersion | None = None) -> Obj:
    """A metav1.Table of ``objects`` (``includeObject``: None, Metadata or Object);
    ``custom``: the objects are custom resources of this CRD version."""
    cols = custom_columns(custom) if custom is not None else COLUMNS.get(plural, _DEFAULT)
    table: Obj = {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": list_meta or {}}
    if columns:
        table["columnDefinitions"] = [{"name": n, "type": t, "format": f, "description": "", "priority": p}
                                      for n, t, f, p, _ in cols]
    else:
        table["columnDefinitions"] = []
    rows = []
    for obj in objects:
        row: Obj = {"cells": [cell(obj) for *_, cell in cols]}
        o = _row_object(obj, include)
        if o is not None:
            row["object"] = o
        rows.append(row)
    table["rows"] = rows
    return table
