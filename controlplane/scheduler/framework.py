"""The scheduling framework: extension points as small Protocols, a status code, the cycle state.

A plugin is any object with ``name()`` and one or more of the extension-point
methods below; the scheduler finds which points a plugin implements by
``isinstance`` against these runtime-checkable Protocols, as kube-scheduler's
framework does with Go interfaces. The order of a scheduling cycle for one pod::

    PreEnqueue (before the pod enters activeQ)
    PreFilter -> Filter (each sampled node) -> PostFilter (only if no node fits)
    PreScore -> Score (each feasible node) -> pick the best
    Reserve -> Permit                         (scheduling cycle ends here)
    PreBind -> Bind                           (binding cycle, asynchronous)
    Unreserve                                 (whenever anything after Reserve fails)

"Success" is ``None`` everywhere: a Filter that passes returns ``None``, which
costs nothing to build on the hot path; only a failure builds a ``Status``.

Example, a plugin that keeps pods off nodes labelled ``maintenance=true`` and
computes what it needs once per cycle in PreFilter::

    class NoMaintenance:
        def name(self) -> str:
            return "NoMaintenance"

        def pre_filter(self, state: CycleState, pod: PodInfo) -> Status | None:
            state.write("NoMaintenance", pod.labels.get("tolerates-maintenance") == "yes")
            return None

        def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
            if state.read("NoMaintenance") or node.labels.get("maintenance") != "true":
                return None
            return Status(Code.UNSCHEDULABLE, "node(s) were in maintenance", plugin="NoMaintenance")

        def events_to_register(self) -> list[ClusterEvent]:
            return [ClusterEvent("nodes", ActionType.ADD | ActionType.UPDATE_NODE_LABEL)]

    REGISTRY.register("NoMaintenance", lambda handle, args: NoMaintenance())

Plugins are built by factories ``(handle, args) -> plugin`` registered by name
(``Registry``); the ``Handle`` gives them the API client, the node snapshot and
the informer-backed listers. A plugin that needs objects the core does not
watch (DRA: resourceclaims, resourceslices, deviceclasses) lists them in
``resources_to_watch()``: the scheduler runs one informer per listed resource,
serves it through ``handle.lister(resource)`` and turns its events into cluster
events for the queue, so the plugin never starts informers of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from ..client import Client
    from .nodeinfo import NodeInfo, PodInfo
    from .profile import Profile

__all__ = [
    "ActionType",
    "BatchScorer",
    "BIND_SLOT",
    "BindPlugin",
    "BindSlot",
    "ClusterEvent",
    "Code",
    "CycleState",
    "FilterPlugin",
    "Handle",
    "MemberCapacityPlugin",
    "PermitPlugin",
    "Plugin",
    "PostFilterPlugin",
    "PostFilterResult",
    "RowsFilterPlugin",
    "PreBindPlugin",
    "PreEnqueuePlugin",
    "PreFilterPlugin",
    "PreScorePlugin",
    "QueueingHint",
    "Registry",
    "ReservePlugin",
    "ScorePlugin",
    "Status",
    "WatchedResource",
    "MAX_NODE_SCORE",
    "num_feasible_nodes_to_find",
    "waiting_outside_the_bind_bound",
]

MAX_NODE_SCORE = 100
MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5


class Code(enum.IntEnum):
    """What a plugin's verdict does to the pod. Success is ``None``, not a code.

    - ``ERROR``: an internal failure (API error, bug). The pod goes to backoffQ and
      is retried after its backoff, whatever the cluster does.
    - ``UNSCHEDULABLE``: this node (or every node) does not fit now; PostFilter
      (preemption) may make room. The pod waits in the unschedulable pool until a
      cluster event one of the rejecting plugins registered for, then backoffQ.
    - ``UNSCHEDULABLE_AND_UNRESOLVABLE``: as UNSCHEDULABLE, but preemption cannot
      help (a node selector, an untolerated NoSchedule taint), so the node is not
      a preemption candidate.
    - ``WAIT``: Permit only: hold the pod's reservation until allowed, rejected
      or timed out (gang quorum, binding conditions).
    - ``SKIP``: PreFilter/PreScore only: this plugin has nothing to say about the
      pod; its Filter/Score is skipped for this cycle.
    - ``PENDING``: the pod waits on something external, not on the cluster's
      capacity (a PodGroup not created yet, a device's binding condition). Like
      UNSCHEDULABLE for requeueing, but never counted as a scheduling failure by
      backoff: the pod goes straight to activeQ when its event arrives.
    """

    ERROR = 1
    UNSCHEDULABLE = 2
    UNSCHEDULABLE_AND_UNRESOLVABLE = 3
    WAIT = 4
    SKIP = 5
    PENDING = 6


class Status:
    """A non-success verdict: a code, reasons (as upstream, shown in FailedScheduling
    messages: ``"Insufficient cpu"``) and the plugin that gave it."""

    __slots__ = ("code", "plugin", "reasons")

    def __init__(self, code: Code, *reasons: str, plugin: str = "") -> None:
        self.code = code
        self.reasons = reasons
        self.plugin = plugin

    @property
    def message(self) -> str:
        return ", ".join(self.reasons)

    def is_rejection(self) -> bool:
        return self.code in (Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE, Code.PENDING)

    def __repr__(self) -> str:
        return f"Status({self.code.name}, {self.message!r}, plugin={self.plugin!r})"


class CycleState:
    """Per-pod, per-cycle scratch space shared by the plugins (``write``/``read`` by key).

    ``node_names``: when a PreFilter narrows the candidates (NodeName, a gang's
    topology domain), the set of node names Filter is limited to (``None``: all).
    ``skip_filter``/``skip_score``: plugins whose PreFilter/PreScore returned SKIP.
    """

    __slots__ = ("_data", "node_names", "skip_filter", "skip_score")

    def __init__(self) -> None:
        self._data: dict[str, Any] = {}
        self.node_names: set[str] | None = None
        self.skip_filter: set[str] = set()
        self.skip_score: set[str] = set()

    def write(self, key: str, value: Any) -> None:
        self._data[key] = value

    def read(self, key: str) -> Any:
        """The value written under ``key``; ``KeyError`` if none (a PreFilter did not run)."""
        return self._data[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self._data.get(key, default)

    def restrict_nodes(self, names: Iterable[str]) -> None:
        """Intersect the candidate nodes with ``names``."""
        s = set(names)
        self.node_names = s if self.node_names is None else self.node_names & s

    def clone(self) -> CycleState:
        c = CycleState()
        c._data = dict(self._data)
        c.node_names = None if self.node_names is None else set(self.node_names)
        c.skip_filter = set(self.skip_filter)
        c.skip_score = set(self.skip_score)
        return c


# The binding cycle's ``BindSlot``, in its CycleState
BIND_SLOT = "framework/bindSlot"


class BindSlot:
    """A binding cycle's place under the scheduler's bound on API writes in flight
    (``bind_concurrency``), held from PreBind through Bind.

    A PreBind that waits for something else than its own writes (a claim bound by a
    controller, a device's binding conditions), for up to minutes, gives its place up
    meanwhile: ``async with waiting_outside_the_bind_bound(state):``. Upstream runs each
    binding cycle in a goroutine of its own, with no shared bound to hold; here a few
    hundred pods waiting for claims that never bind would otherwise stop every other
    pod's binding until they time out. ``held`` says whether the place is held: a wait
    cancelled while it takes its place back leaves it not held, and ``release`` then
    gives back nothing."""

    __slots__ = ("_bound", "held")

    def __init__(self, bound: asyncio.Semaphore) -> None:
        self._bound = bound
        self.held = False

    async def acquire(self) -> None:
        await self._bound.acquire()
        self.held = True

    def release(self) -> None:
        if self.held:
            self.held = False
            self._bound.release()

    @contextlib.asynccontextmanager
    async def given_up(self) -> AsyncIterator[None]:
        """Not held inside the block; held again (after waiting for a place) after it."""
        self.release()
        try:
            yield
        finally:
            await self.acquire()


def waiting_outside_the_bind_bound(state: CycleState) -> contextlib.AbstractAsyncContextManager[Any]:
    """The binding cycle's ``BindSlot`` given up for a PreBind's wait (see ``BindSlot``);
    nothing outside a binding cycle (a plugin's PreBind called on its own)."""
    slot: BindSlot | None = state.get(BIND_SLOT)
    return slot.given_up() if slot is not None else contextlib.nullcontext()


# --------------------------------------------------------------------------- cluster events

class ActionType(enum.IntFlag):
    """What happened to an object, as upstream's ActionType (a bit set)."""

    ADD = 1
    DELETE = 2
    UPDATE_NODE_ALLOCATABLE = 4
    UPDATE_NODE_LABEL = 8
    UPDATE_NODE_TAINT = 16
    UPDATE_NODE_CONDITION = 32
    UPDATE_POD_LABEL = 64
    UPDATE_POD_SCALE_DOWN = 128  # a pod's requests went down, or it left the node (terminated)
    UPDATE_POD_SCHEDULING_GATES_ELIMINATED = 256
    UPDATE = 512  # any other update (objects other than nodes and pods)
    ALL = 1023


QueueingHint = Callable[["PodInfo", Any, Any], bool]
"""``hint(pod, old, new) -> bool``: may this event make ``pod`` schedulable? (upstream's
QueueingHintFn; ``old`` is None on add, ``new`` is None on delete)."""


@dataclass(frozen=True, slots=True)
class ClusterEvent:
    """An event a plugin wants unschedulable pods it rejected to be retried on.
    ``resource`` is a plural ("nodes", "pods", "podgroups", "resourceslices", ...);
    ``hint`` narrows it further (``None``: every such event requeues)."""

    resource: str
    actions: ActionType
    hint: QueueingHint | None = None
    # ``targets(old, new)``: the uids of the only pods this event can help (a claim made for
    # one pod), so the queue asks those instead of every parked pod; None: any may be helped
    targets: Callable[[Any, Any], Collection[str] | None] | None = None


@dataclass(frozen=True, slots=True)
class WatchedResource:
    """A resource a plugin needs the scheduler to watch for it (see the module docstring)."""

    group: str
    version: str
    plural: str
    namespaced: bool = True


# --------------------------------------------------------------------------- extension points

@runtime_checkable
class Plugin(Protocol):
    def name(self) -> str: ...


@runtime_checkable
class PreEnqueuePlugin(Plugin, Protocol):
    def pre_enqueue(self, pod: PodInfo) -> Status | None:
        """Gate the pod before activeQ (schedulingGates, a PodGroup not yet created).
        A rejection parks the pod among the unschedulable until a registered event."""
        ...


@runtime_checkable
class PreFilterPlugin(Plugin, Protocol):
    def pre_filter(self, state: CycleState, pod: PodInfo) -> Status | None:
        """Compute what Filter needs, once per cycle; may ``state.restrict_nodes``.
        A rejection fails the cycle for every node; SKIP disables this plugin's Filter."""
        ...


@runtime_checkable
class FilterPlugin(Plugin, Protocol):
    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        """Does ``pod`` fit ``node``? Pure and cheap: called for every sampled node."""
        ...


@runtime_checkable
class RowsFilterPlugin(FilterPlugin, Protocol):
    """A Filter plugin that can also judge many nodes in one call: for the plugins whose
    per-node verdict is mostly a cache lookup (DynamicResources), the call per node costs
    more than the verdict."""

    def filter_rows(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo],
                    rows: npt.NDArray[np.int64], wanted: int) -> npt.NDArray[np.int64]:
        """The rows of ``rows`` (indexes into ``nodes``), in order, whose node ``filter``
        passes, at most ``wanted`` of them (the first): the verdicts of ``filter``, node by node."""
        ...


@runtime_checkable
class MemberCapacityPlugin(FilterPlugin, Protocol):
    """A Filter plugin whose resources pods take from a node one after another (DRA's
    devices): how many pods like this one the node holds at once, for a gang's choice of a
    topology domain (upstream's placement evaluation places every member of the group)."""

    def member_capacity(self, state: CycleState, pod: PodInfo, node: NodeInfo, limit: int,
                        held: list[str]) -> int:
        """How many pods like ``pod`` fit on ``node`` by this plugin, at most ``limit``; what
        they take is held (keys in ``held``) until ``release_capacity(held)``."""
        ...

    def release_capacity(self, held: list[str]) -> None:
        ...


@dataclass(slots=True)
class PostFilterResult:
    """What PostFilter says of the pod's nomination: a node to nominate it to, ``""`` to
    clear the one it has (upstream's ModeOverride with no node), or None to leave it."""

    nominated_node: str | None = None


@runtime_checkable
class PostFilterPlugin(Plugin, Protocol):
    async def post_filter(self, state: CycleState, pod: PodInfo,
                          statuses: Mapping[str, Status]) -> tuple[PostFilterResult | None, Status | None]:
        """Called only when no node fits (``statuses``: node name -> why not).
        DefaultPreemption evicts victims here and nominates a node."""
        ...


@runtime_checkable
class PreScorePlugin(Plugin, Protocol):
    def pre_score(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> Status | None: ...


@runtime_checkable
class ScorePlugin(Plugin, Protocol):
    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        """0..MAX_NODE_SCORE (or any range when ``normalize_scores`` maps it there)."""
        ...


@runtime_checkable
class BatchScorer(Protocol):
    def score_all(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> list[int]:
        """``[score(state, pod, n) for n in nodes]``, in one call: for the scorers whose per-node
        work is a lookup or two, where the call per node costs more than the score (the
        feasible nodes are hundreds to thousands)."""
        ...


@runtime_checkable
class ScoreNormalizer(Protocol):
    def normalize_scores(self, state: CycleState, pod: PodInfo, scores: list[int]) -> None:
        """Rewrite ``scores`` (one per feasible node, in order) in place into 0..MAX_NODE_SCORE."""
        ...


@runtime_checkable
class ReservePlugin(Plugin, Protocol):
    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None: ...

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        """Undo ``reserve``. Idempotent, and may be called even if ``reserve`` was not."""
        ...


@runtime_checkable
class PermitPlugin(Plugin, Protocol):
    def permit(self, state: CycleState, pod: PodInfo, node_name: str) -> tuple[Status | None, float]:
        """``(None, 0)`` to allow, a rejection, or ``(Status(WAIT), timeout_seconds)``:
        the pod then waits (holding its reservation) until ``Handle.allow``/``reject``."""
        ...


@runtime_checkable
class PreBindPlugin(Plugin, Protocol):
    async def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        """Write what must exist before the binding (DRA claim allocations); may wait, for
        others' writes ``async with waiting_outside_the_bind_bound(state)`` (``BindSlot``)."""
        ...


@runtime_checkable
class BindPlugin(Plugin, Protocol):
    async def bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        """Bind, or ``Status(SKIP)`` to let the next Bind plugin do it."""
        ...


@runtime_checkable
class EnqueueExtensions(Protocol):
    def events_to_register(self) -> list[ClusterEvent]: ...


@runtime_checkable
class WatchesResources(Protocol):
    def resources_to_watch(self) -> list[WatchedResource]: ...


class Handle(Protocol):
    """What the framework gives a plugin's factory."""

    @property
    def client(self) -> Client: ...

    def nodes(self) -> Mapping[str, NodeInfo]:
        """The cache's nodes by name (assumed pods included)."""
        ...

    def lister(self, resource: str) -> Mapping[str, Any]:
        """The informer's objects of ``resource`` (a plural), by "namespace/name" ("name" if cluster-scoped)."""
        ...

    def add_event_handler(self, resource: str, on_add: Callable[[Any], None],
                          on_update: Callable[[Any, Any], None], on_delete: Callable[[Any], None]) -> None:
        """Be called on each event of a watched resource, after the scheduler's cache and queue."""
        ...

    def profile(self) -> Profile:
        """The running profile (its plugins, and the pure Filter/Score runners)."""
        ...

    def allow(self, pod_key: str, plugin: str) -> None:
        """Let a pod waiting at Permit go on as far as ``plugin`` is concerned."""
        ...

    def reject(self, pod_key: str, plugin: str, message: str) -> None:
        """Fail a pod waiting at Permit (its reservation is released, it is requeued)."""
        ...

    def waiting_pods(self) -> Iterable[str]: ...

    def record_event(self, obj: Mapping[str, Any], reason: str, message: str, type_: str = "Normal", *,
                     action: str, related: Mapping[str, Any] | None = None) -> None:
        """Emit an events.k8s.io Event about ``obj`` (fire and forget): what the scheduler did
        (``action``: ``Preempting``), and the object it did it for (``related``)."""
        ...

    def spawn(self, coro: Awaitable[None]) -> None:
        """Run a background task owned by the scheduler (cancelled when it stops)."""
        ...


PluginFactory = Callable[[Handle, Mapping[str, Any]], Plugin]


@dataclass
class Registry:
    """Plugin factories by name. ``default_registry()`` (in ``plugins``) holds the
    in-tree ones; another package adds its own with ``register`` before the
    scheduler starts (``dra`` does so for ``DynamicResources``)."""

    factories: dict[str, PluginFactory] = field(default_factory=dict)

    def register(self, name: str, factory: PluginFactory) -> None:
        if name in self.factories:
            raise ValueError(f"a plugin named {name!r} is already registered")
        self.factories[name] = factory

    def build(self, name: str, handle: Handle, args: Mapping[str, Any] | None = None) -> Plugin:
        try:
            factory = self.factories[name]
        except KeyError:
            raise ValueError(f"no plugin named {name!r} (known: {', '.join(sorted(self.factories))})") from None
        return factory(handle, args or {})


def num_feasible_nodes_to_find(num_all_nodes: int, percentage: int = 0) -> int:
    """How many feasible nodes to find before scoring, as upstream's
    ``numFeasibleNodesToFind``: every node below 100; else ``percentage`` of them
    (0 means adaptive: 50% minus 1% per 125 nodes, at least 5%), but at least 100.

    >>> num_feasible_nodes_to_find(5000), num_feasible_nodes_to_find(100_000)
    (500, 5000)
    """
    if num_all_nodes < MIN_FEASIBLE_NODES_TO_FIND or percentage >= 100:
        return num_all_nodes
    adaptive = percentage
    if adaptive <= 0:
        adaptive = 50 - num_all_nodes // 125
        if adaptive < MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND:
            adaptive = MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND
    n = num_all_nodes * adaptive // 100
    return max(n, MIN_FEASIBLE_NODES_TO_FIND)
