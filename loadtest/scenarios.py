"""The scenarios: which clients, how many, for how long, with which parameters.

A scenario is data: ``fixed`` users (a count per class, started first and
kept: kubelets, the binder, informers), ``weighted`` users whose total
follows the load shape (controllers, operators, training jobs), the shape's
name, a duration, and the parameters the user classes read
(``loadtest.locustfiles.base.param``). ``build(name, quick=..., scale=...)``
resolves one into a :class:`Plan`, which the harness hands to Locust as
environment variables (``LOADTEST_SCENARIO``, ``LOADTEST_PARAMS``)::

    >>> plan = build("smoke", quick=True)
    >>> plan.fixed["BinderUser"], plan.duration <= 60
    (1, True)

``until`` is ``"time"`` (the shape's table ends the run) or ``"quota"`` (the
``million``: controllers create a fixed number of pods, then delete them; the
harness ends the run when every pod created has been deleted, or at the
duration).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any

from . import shapes

__all__ = ["INFORMER_RESOURCES", "PLAYED_CONTROLLERS", "SCENARIOS", "Plan", "api_access", "api_resources", "build"]

# user class -> module under loadtest.locustfiles
CLASSES = {
    "BinderUser": "binder",
    "KubeletUser": "kubelets",
    "InformerUser": "informers",
    "ReplicaSetController": "controllers",
    "OperatorUser": "operators",
    "TrainingJobUser": "gang",
}


# the user classes that play a controller of kube-controller-manager, and its name: a server the
# harness starts runs without that one (serve --controllers '*,-NAME'), which would otherwise
# rewrite what the users write (a ReplicaSet's status, computed from pods it does not own)
PLAYED_CONTROLLERS = {"ReplicaSetController": "replicaset-controller"}


# what an informer of each resource watches: (group, version)
INFORMER_RESOURCES = {"pods": ("", "v1"), "nodes": ("", "v1"), "leases": ("coordination.k8s.io", "v1"),
                      "replicasets": ("apps", "v1"), "configmaps": ("", "v1")}


# the API resources each user class calls, by group-version, with the verbs it calls them with: a
# --target is checked for them before any load (a cluster without the Workload API of Kubernetes
# 1.37 cannot run a training job; a user RBAC denies them cannot make the load)
_USES: dict[str, dict[str, dict[str, str]]] = {
    "BinderUser": {"v1": {"nodes": "list watch", "pods": "list watch", "pods/binding": "create"},
                   "scheduling.k8s.io/v1beta1": {"podgroups": "list watch"}},
    "KubeletUser": {"v1": {"namespaces": "create", "nodes": "create", "nodes/status": "patch",
                           "pods": "list watch delete", "pods/status": "patch"},
                    "coordination.k8s.io/v1": {"leases": "create get update"}},
    "InformerUser": {},  # its scenario's informer_resources: list watch
    "ReplicaSetController": {"v1": {"namespaces": "create", "pods": "create delete list watch"},
                             "apps/v1": {"replicasets": "create", "replicasets/status": "patch"}},
    "OperatorUser": {"v1": {"namespaces": "create", "configmaps": "create patch", "pods": "list"},
                     "apps/v1": {"deployments": "create get patch"}},
    "TrainingJobUser": {"v1": {"namespaces": "create", "pods": "create delete list watch"},
                        "resource.k8s.io/v1": {"deviceclasses": "create", "resourceclaimtemplates": "create delete"},
                        "scheduling.k8s.io/v1beta1": {"workloads": "create delete", "podgroups": "create delete"}},
}


def _uses(plan: Plan) -> list[tuple[str, str, str, str]]:
    """(user class, group-version, resource, verbs) of every call ``plan``'s clients make."""
    out: list[tuple[str, str, str, str]] = []
    for cls in sorted(set(plan.fixed) | set(plan.weighted)):
        if not (plan.fixed.get(cls) or plan.weighted.get(cls)):
            continue
        for gv, resources in _USES.get(cls, {}).items():
            out.extend((cls, gv, plural, verbs) for plural, verbs in resources.items())
        if cls == "KubeletUser" and int(plan.params.get("gpus_per_node", 0)):
            out.append((cls, "resource.k8s.io/v1", "resourceslices", "create"))  # a DRA driver's, on GPU nodes
        if cls == "InformerUser":
            for plural in plan.params.get("informer_resources", ["pods"]):
                group, version = INFORMER_RESOURCES.get(plural, ("", "v1"))
                out.append((cls, f"{group}/{version}" if group else version, plural, "list watch"))
    return out


@dataclass(frozen=True)
class Plan:
    scenario: str
    description: str
    fixed: dict[str, int]
    weighted: dict[str, int]      # class -> weight
    peak: int                     # weighted users at the shape's peak
    shape: str
    duration: float
    params: dict[str, Any]
    until: str = "time"
    binder: bool = True
    table: shapes.Table = field(default=())

    @property
    def fixed_total(self) -> int:
        return sum(self.fixed.values())

    def environment(self) -> dict[str, str]:
        """What the master and every worker need in their environment."""
        return {"LOADTEST_SCENARIO": self.scenario, "LOADTEST_PARAMS": json.dumps(self.to_json())}

    def to_json(self) -> dict[str, Any]:
        return {**self.params, "_fixed": self.fixed, "_weighted": self.weighted, "_peak": self.peak,
                "_shape": self.shape, "_duration": self.duration, "_until": self.until,
                "_table": [[st.until, st.users, st.spawn_rate, st.name] for st in self.table]}

    @property
    def played_controllers(self) -> list[str]:
        """The controllers of kube-controller-manager this plan's users play (PLAYED_CONTROLLERS)."""
        return sorted(name for cls, name in PLAYED_CONTROLLERS.items()
                      if self.fixed.get(cls) or self.weighted.get(cls))

    def without_binder(self) -> Plan:
        """This plan with no load-test binder: a scheduler (the target's, or ``serve``'s under
        ``--binder off``) places the pods. Its description says so, and no longer names a binder."""
        if "BinderUser" not in self.fixed:
            return self
        fixed = {k: v for k, v in self.fixed.items() if k != "BinderUser"}
        table = tuple(shapes.Stage(s.until, s.users - self.fixed["BinderUser"], s.spawn_rate, s.name)
                      for s in self.table)
        description = self.description.replace(_BINDER_PHRASE, "")
        description += "; no load-test binder: a scheduler places the pods"
        return replace(self, fixed=fixed, table=table, description=description, binder=False)

    @property
    def pods_target(self) -> int:
        """Pods the controllers create in a quota run (0 otherwise)."""
        return int(self.params.get("quota", 0)) * self.fixed.get("ReplicaSetController", 0)


def api_resources(plan: Plan) -> dict[str, dict[str, list[str]]]:
    """group-version (``v1`` for the core group) -> resource -> the user classes of ``plan``
    that call it::

        >>> api_resources(build("gang"))["scheduling.k8s.io/v1beta1"]
        {'podgroups': ['BinderUser', 'TrainingJobUser'], 'workloads': ['TrainingJobUser']}
    """
    uses: dict[str, dict[str, list[str]]] = {}
    for cls, gv, plural, _ in _uses(plan):
        users = uses.setdefault(gv, {}).setdefault(plural, [])
        if cls not in users:
            users.append(cls)
    return {gv: dict(sorted(r.items())) for gv, r in sorted(uses.items())}


def api_access(plan: Plan) -> dict[tuple[str, str, str], list[str]]:
    """(group-version, resource, verb) -> the user classes of ``plan`` that call it::

        >>> api_access(build("gang"))["scheduling.k8s.io/v1beta1", "workloads", "create"]
        ['TrainingJobUser']
    """
    access: dict[tuple[str, str, str], list[str]] = {}
    for cls, gv, plural, verbs in _uses(plan):
        for verb in verbs.split():
            users = access.setdefault((gv, plural, verb), [])
            if cls not in users:
                users.append(cls)
    return dict(sorted(access.items()))


_BINDER_PHRASE = "a binder, "  # where a description names the binder (Plan.without_binder)


def _n(x: float) -> int:
    return max(1, round(x))


def _plural(n: int, noun: str) -> str:
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def _smoke(quick: bool, scale: float) -> dict[str, Any]:
    return {
        "description": f"every client once, small: {_BINDER_PHRASE}3 kubelets (GPU nodes), a controller, an operator, "
                    "two informers (LIST and WatchList), a training job",
        "fixed": {"BinderUser": 1, "KubeletUser": 3, "InformerUser": 2, "ReplicaSetController": 1, "OperatorUser": 1,
               "TrainingJobUser": 1},
        "weighted": {}, "peak": 0, "shape": "steady", "duration": 20 if quick else 60,
        "params": {"namespaces": 1, "pods_per_controller": 10, "burst": 5, "gpus_per_node": 8, "gang_size": 2,
                "gang_namespaces": 1, "watch_list_fraction": 0.5, "informer_resources": ["pods"],
                "lease_interval": 10, "max_pages": 3, "page_size": 5, "train_seconds": 1.0, "gang_timeout": 15.0,
                "sweep": True},
    }


def _churn(quick: bool, scale: float) -> dict[str, Any]:
    return {
        "description": "ReplicaSet controllers creating and deleting pods in bursts on a ramp, kubelets running them, "
                    "informers following",
        "fixed": {"BinderUser": 1, "KubeletUser": _n(20 * scale), "InformerUser": _n(5 * scale)},
        "weighted": {"ReplicaSetController": 1}, "peak": _n((8 if quick else 40) * scale), "shape": "ramp",
        "duration": 45 if quick else 300,
        "params": {"namespaces": _n(10 * scale), "pods_per_controller": 40, "burst": 10, "controller_wait_min": 0.2,
                "controller_wait_max": 1.0, "informer_resources": ["pods"]},
    }


def _list_storm(quick: bool, scale: float) -> dict[str, Any]:
    return {
        "description": "the watch-cache lock scenario: many LISTs and WatchLists (informers restarting, operators "
                    "listing on a spike) against a large cache while controllers keep writing",
        "fixed": {"BinderUser": 1, "KubeletUser": _n(10 * scale), "ReplicaSetController": _n(10 * scale),
               "InformerUser": _n(10 * scale)},
        "weighted": {"OperatorUser": 1}, "peak": _n((10 if quick else 40) * scale), "shape": "spike",
        "duration": 45 if quick else 300,
        "params": {"namespaces": _n(5 * scale), "pods_per_controller": 50 if quick else 300, "burst": 25,
                "controller_wait_min": 0.1, "controller_wait_max": 0.5, "relist_every": 5 if quick else 10,
                "watch_list_fraction": 0.5, "operator_wait_min": 0.1, "operator_wait_max": 0.5, "max_pages": 5},
    }


def _kubelets(quick: bool, scale: float) -> dict[str, Any]:
    kubelets = _n((100 if quick else 10_000) * scale)
    return {
        # the count of this run's: the report's description said 10,000 of a --quick run's 100
        "description": f"{_plural(kubelets, 'kubelet')}: a Node, a Lease renewed every 10 s and a pod watch each; "
                    "controllers give the watches pods to run",
        "fixed": {"BinderUser": 1, "KubeletUser": kubelets,
               "InformerUser": 2},
        "weighted": {"ReplicaSetController": 1}, "peak": _n((4 if quick else 20) * scale), "shape": "steady",
        "duration": 50 if quick else 300,
        "params": {"namespaces": 4, "pods_per_controller": 50, "burst": 10, "informer_resources": ["nodes", "leases"]},
    }


def _gang(quick: bool, scale: float) -> dict[str, Any]:
    return {
        "description": "AI training jobs: Workload/PodGroup gangs whose pods claim GPUs (ResourceClaimTemplates) on "
                    "GPU nodes publishing ResourceSlices; bound all at once",
        "fixed": {"BinderUser": 1, "KubeletUser": _n((4 if quick else 32) * scale), "InformerUser": 1},
        "weighted": {"TrainingJobUser": 1}, "peak": _n((3 if quick else 16) * scale), "shape": "steady",
        "duration": 40 if quick else 300,
        "params": {"gpus_per_node": 8, "gang_size": 4 if quick else 8, "gang_gpus_per_pod": 2, "gang_namespaces": 4,
                "train_seconds": 2.0 if quick else 10.0, "informer_resources": ["pods"], "namespaces": 1},
    }


def _million(quick: bool, scale: float) -> dict[str, Any]:
    # --quick is a 500th of the cluster, and --scale multiplies that as it does every scenario's quick
    # size: it had replaced it, so that --quick --scale 2 was 20,000 nodes and 40,000 pods
    s = (0.002 if quick else 1.0) * scale
    controllers = _n(1000 * s)
    pods = controllers * (20 if quick else 1000)
    return {
        "description": f"{_n(10_000 * s):,} nodes registered through the API, {pods:,} "
                    f"pods across {controllers:,} namespaces created, scheduled and run, "
                    f"{_plural(_n(100 * s), 'informer')} watching and {_plural(_n(10 * s), 'operator')} listing "
                    f"throughout, then everything deleted",
        "fixed": {"BinderUser": 1, "KubeletUser": _n(10_000 * s), "InformerUser": _n(100 * s),
               "OperatorUser": _n(10 * s), "ReplicaSetController": controllers},
        "weighted": {}, "peak": 0, "shape": "steady", "duration": 55 if quick else 20 * 60, "until": "quota",
        "params": {"namespaces": controllers, "quota": 20 if quick else 1000, "burst": 50,
                   "hold": 1.0 if quick else 5.0,
                "controller_wait_min": 0.0, "controller_wait_max": 0.05, "max_pages": 10,
                "informer_resources": ["pods"], "watch_list_fraction": 0.5, "informer_sync_timeout": 600,
                "binder_concurrency": 32},
    }


SCENARIOS = {"smoke": _smoke, "churn": _churn, "list-storm": _list_storm, "kubelets": _kubelets, "gang": _gang,
             "million": _million}


def build(name: str, *, quick: bool = False, scale: float = 1.0, users: int | None = None,
          duration: float | None = None, shape: str | None = None, pod_rate: float | None = None) -> Plan:
    """The plan for scenario ``name``. ``users`` overrides the weighted peak,
    ``duration`` the run's length, ``shape`` the load shape, ``pod_rate`` paces
    a quota run's pod creates and deletes (per second, all controllers together;
    unpaced by default: as fast as the server answers)."""
    if name not in SCENARIOS:
        raise KeyError(f"unknown scenario {name!r} (choose from: {', '.join(SCENARIOS)})")
    d = SCENARIOS[name](quick, scale)
    if users is not None:
        d["peak"] = users
    if duration is not None:
        d["duration"] = duration
    if quick:
        d["duration"] = min(d["duration"], 55)
    if shape is not None:
        d["shape"] = shape
    if pod_rate is not None:
        if not d["params"].get("quota"):
            raise KeyError(f"--pod-rate paces a quota run's controllers; {name!r} has none (only 'million' does)")
        d["params"] = {**d["params"], "pod_rate": float(pod_rate)}
    if d["shape"] not in shapes.SHAPES:
        raise KeyError(f"unknown shape {d['shape']!r} (choose from: {', '.join(shapes.SHAPES)})")
    plan = Plan(scenario=name, **d)
    fixed = plan.fixed_total
    base = shapes.SHAPES[plan.shape](plan.peak, plan.duration) if plan.peak else shapes.steady(0, plan.duration)
    # fixed users come first and stay; the weighted ones follow the shape on top of them
    table = tuple(shapes.Stage(s.until, s.users + fixed, max(s.spawn_rate, fixed / 5.0), s.name)
                  for s in base)
    return Plan(**{**plan.__dict__, "table": table})
