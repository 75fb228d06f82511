"""Admission webhooks: kube-apiserver's MutatingAdmissionWebhook and
ValidatingAdmissionWebhook plugins, over the Mutating/ValidatingWebhookConfigurations
stored (``registry/webhooks.py`` defaults and validates them).

Where in a write (``api/rest.py``)::

    built-in mutating admission (ServiceAccount, Priority, RuntimeClass, LimitRanger)
    -> MutatingAdmissionPolicy (api/mutatingpolicy.py)
    -> mutating webhooks, one after the other, each seeing the patches before it
    -> (a second round, if a policy applied a mutation or a webhook changed the object)
       the built-in mutating admission again, MutatingAdmissionPolicy's IfNeeded policies,
       the IfNeeded webhooks a later change asks for
    -> the strategy's validation
    -> ValidatingAdmissionPolicy -> validating webhooks, all at once -> ResourceQuota

A webhook is called for a request when, as upstream's ``ShouldCallHook``: its
``namespaceSelector`` takes the namespace's labels (a cluster-scoped object but a
Namespace is never left out; a Namespace's create or update is judged by its own
labels), its ``objectSelector`` takes the new or the old object's labels, one of its
``rules`` takes the operation, group, version, resource and subresource (``*``,
``*/*``, ``pods/*``, ``*/status``) and scope, and none of its ``matchConditions`` is false
(CEL with ``object``, ``oldObject``, ``request``, a null ``namespaceObject`` and the
``authorizer``, ``api/celauthz.py``, as upstream's webhook matcher; an error in one fails the
request with a 403 under ``failurePolicy: Fail``, leaves the webhook out under Ignore). Under ``matchPolicy:
Equivalent`` (the default) a rule that names another served version of the
resource (one stored under the same prefix: autoscaling/v1 and v2 HPAs, core and
events.k8s.io Events, a CRD's versions) takes the request too, and the webhook is
called with the object in that version (``kind`` and ``resource`` that version's,
``requestKind`` and ``requestResource`` the request's; its patch converted back; a custom
resource converted by its CRD's conversion webhook if it has one, ``api/crdconversion.py``).
Configurations are taken in name order, their webhooks in theirs.

The call is an ``admission.k8s.io/v1`` AdmissionReview (``api/webhookcall.py`` posts
it). The answer: ``allowed`` false refuses with the webhook's ``status`` (``admission
webhook "x" denied the request: <message>``, its code if 400 or more); a
``JSONPatch`` is applied to the object; ``warnings`` become Warning headers. A
webhook that cannot be called, or answers nonsense, fails the request with 500
(``Internal error occurred: failed calling webhook "x": failed to call webhook:
...``) unless its ``failurePolicy`` is ``Ignore``. A dry run refuses (400) a webhook
whose ``sideEffects`` is not None or NoneOnDryRun. A mutating webhook with
``reinvocationPolicy: IfNeeded`` is called once more when a later webhook changed
the object, or when the mutating admission policies' second round did (``HookReinvocation``:
the write's caller runs the rounds, ``api/rest.py``).

``--admission-webhooks`` decides about webhooks whose Service nothing on this
machine answers for (one backed by simulated pods, one that does not exist):
``reachable`` (the default) leaves them out, so charts that install webhooks
install and writes go on; ``all`` calls them as kube-apiserver would, so their
``failurePolicy`` applies; ``off`` calls no webhook. ``url`` webhooks are always
called.

The configurations are read from this process's watch cache and compiled again
only when either type's cache moved on: with none stored, a write pays one
generation comparison (``active``).

The subresources written by handlers of their own (``pods/binding``, ``pods/eviction``,
``<resource>/scale``: ``api/rest.py``) are called with their own kind (``Request.kind``: a
Binding, an Eviction, a Scale), as upstream's; the bulk Lease renewals and node status
reports are not admitted.

Each call is recorded in upstream's metrics (``apiserver_admission_webhook_*``,
``metrics.py``), and the time spent in the POSTs is noted for the request SLI
(``fieldvalidation.note_webhook_time``): mutating calls summed, a validating round by its
longest, as upstream's latency trackers.

An audited request (``api/audit.py``) gets upstream's audit annotations: each mutating
call's ``mutation.webhook.admission.k8s.io/round_R_index_I`` (``{"configuration", "webhook",
"mutated"}``) and, from the ``Request`` level on, its ``patch.webhook.admission.k8s.io/...``;
a webhook's own ``auditAnnotations`` under ``<webhook name>/<key>``.

A CONNECT (exec, attach, portforward, proxy: ``KubeApi._admit_connect``) is called with its
options as the object (``PodExecOptions``...; ``Request.kind`` their kind), no old object and
null ``options``; a patch changes the options the request goes on with (upstream converts
the patched options back into those it connects with). An ``objectSelector`` that is not
empty never takes it: the options have no metadata (``object_selected``).
"""

from __future__ import annotations

import asyncio
import base64
import logging
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson

from ..gonumbers import (
    go_json,
    may_hold_uint64s,
    may_hold_whole_floats,
    uint64s_written_back,
    whole_floats_written_back,
)
from ..metrics import (
    ADMISSION_MATCH_CONDITION_EXCLUSIONS,
    ADMISSION_WEBHOOK_DURATION,
    ADMISSION_WEBHOOK_FAIL_OPEN,
    ADMISSION_WEBHOOK_REJECTIONS,
    ADMISSION_WEBHOOK_REQUESTS,
)
from ..registry.expressions import Meter, context_of
from ..registry.types import ResourceType
from ..registry.validation import base64_error
from ..selectormatch import match_label_selector
from . import audit, gojson, gojsonpatch
from .admissionpolicy import REQUEST_USER, ConditionsFailed, conditions_hold, object_selected
from .celauthz import AuthorizerLibrary
from .dryrun import DRY_RUN
from .equivalents import as_version, equivalent_types
from .errors import ApiError
from .fieldvalidation import add_warning, note_webhook_time
from .namespaced import NamespacedObjects
from .webhookcall import CallError, Unreachable, WebhookClients, resolve

if TYPE_CHECKING:
    from .rest import KubeApi

__all__ = ["MODES", "AdmissionWebhooks", "HookReinvocation"]

log = logging.getLogger(__name__)

Obj = dict[str, Any]
MODES = ("reachable", "all", "off")
_REVIEW_KIND = "admission.k8s.io/v1, Kind=AdmissionReview"
_OPTIONS_KIND = {"CREATE": "CreateOptions", "UPDATE": "UpdateOptions", "DELETE": "DeleteOptions"}


MUTATION_ANNOTATION = "mutation.webhook.admission.k8s.io/"  # + round_R_index_I: upstream's audit annotations
PATCH_ANNOTATION = "patch.webhook.admission.k8s.io/"


@dataclass(frozen=True, slots=True)
class Hook:
    """One webhook of a configuration."""
    configuration: str
    name: str
    spec: Obj
    mutating: bool


@dataclass(slots=True)
class Request:
    """A write as the webhooks see it (upstream's admission attributes)."""
    rtype: ResourceType
    namespace: str
    name: str
    operation: str  # CREATE, UPDATE, DELETE, CONNECT
    obj: Obj | None  # a CONNECT's: its options (PodExecOptions, NodeProxyOptions, ...)
    old: Obj | None
    subresource: str
    options: Obj | None  # the operation's options (None: a CONNECT's, which has none)
    # a subresource's own kind (group, version, kind): a Binding, an Eviction, a Scale; None: the resource's
    kind: tuple[str, str, str] | None = field(default=None)
    _namespace_labels: dict[str, str] | None = field(default=None)
    _equivalents: list[ResourceType] | None = field(default=None)


@dataclass(frozen=True, slots=True)
class Invocation:
    """A webhook to call for a request, and the version it is called with: the request's, or,
    under ``matchPolicy: Equivalent``, another served version of the same stored resource."""
    hook: Hook
    rtype: ResourceType


class HookReinvocation:
    """What one write's first round of mutating webhooks leaves for the second (upstream's
    ``webhookReinvokeContext``): the IfNeeded webhooks called since the last change, those a
    later change asks to call again, and whether a webhook changed the object (the write is
    admitted again, upstream's ``SetShouldReinvoke``)."""

    __slots__ = ("again", "changed", "invoked")

    def __init__(self) -> None:
        self.invoked: list[tuple[str, str]] = []  # (configuration, webhook) of the IfNeeded ones since a change
        self.again: set[tuple[str, str]] = set()
        self.changed = False

    def call(self, hook: Hook, changed: bool) -> None:
        """Note a first round's call of ``hook`` (``changed``: its patch changed the object)."""
        if changed:  # every IfNeeded one called before it, to be called again
            self.changed = True
            self.again.update(self.invoked)
            self.invoked = []
        if hook.spec.get("reinvocationPolicy") == "IfNeeded":
            self.invoked.append((hook.configuration, hook.name))

    def needed(self, changed: bool) -> set[tuple[str, str]]:
        """The webhooks to call again: those a later webhook's change asked for, and, when
        the object changed since the webhooks' first round (``changed``: the built-in admission
        or a policy changed it in the second round), the IfNeeded ones called after the last
        change too (upstream's ``IsOutputChangedSinceLastWebhookInvocation``)."""
        return self.again | set(self.invoked) if changed else set(self.again)


class _Configurations:
    """One configuration type's webhooks in call order, compiled again when its cache moves on."""

    def __init__(self, kube: KubeApi, rtype: ResourceType, mutating: bool) -> None:
        self._kube = kube
        self._rtype = rtype
        self._objects = NamespacedObjects(kube, rtype)
        self._mutating = mutating
        self._memo: tuple[int | None, list[Hook]] = (-1, [])

    def cached(self) -> list[Hook] | None:
        """The webhooks, if the cache has not moved on since they were compiled (None: ask ``hooks``)."""
        generation = self._kube.reads.generation(self._rtype)
        return self._memo[1] if generation is not None and generation == self._memo[0] else None

    async def hooks(self) -> list[Hook]:
        cached = self.cached()
        if cached is not None:
            return cached
        generation = self._kube.reads.generation(self._rtype)
        configurations = sorted(await self._objects.of(""), key=lambda c: c["metadata"]["name"])
        hooks = [Hook(c["metadata"]["name"], str(w.get("name") or ""), w, self._mutating)
                 for c in configurations for w in c.get("webhooks") or () if isinstance(w, dict)]
        self._memo = (generation, hooks)
        return hooks


class AdmissionWebhooks:
    def __init__(self, kube: KubeApi, mutating: ResourceType, validating: ResourceType, mode: str) -> None:
        if mode not in MODES:
            raise ValueError(f"admission webhooks mode {mode!r} is not one of {MODES}")
        self._kube = kube
        self._mode = mode
        self._mutating = _Configurations(kube, mutating, True)
        self._validating = _Configurations(kube, validating, False)
        self.clients = WebhookClients()

    def active(self, mutating: bool) -> bool:
        """Whether a write must ask: False only when none of the kind is stored (O(1))."""
        hooks = (self._mutating if mutating else self._validating).cached()
        return hooks is None or bool(hooks)

    # ------------------------------------------------------------------ the plugins

    async def mutate(self, rtype: ResourceType, namespace: str | None, name: str, operation: str,
                     obj: Obj | None, old: Obj | None, subresource: str | None, options: Obj | None = None,
                     generated_name: bool = False, kind: tuple[str, str, str] | None = None,
                     reinvocation: HookReinvocation | None = None,
                     again: set[tuple[str, str]] | None = None) -> bool:
        """Call the mutating webhooks that match; their patches change ``obj`` in place
        (True: one did; the caller defaults the object again, as upstream).

        ``reinvocation``: the first round of a write whose caller runs the second (after the
        mutating admission policies' own, as upstream's admission chain is run again), noting
        in it what that round needs; ``again``: the second round's webhooks (``needed``),
        called only if they still match (the others matched too, for their conditions'
        errors). Without either, the IfNeeded webhooks that a later one's change asks for are
        called again at once.

        A create's object is shown as upstream's admission sees it, before the
        strategy fills in the system's fields: no uid, no creationTimestamp (a zero one,
        which Go omits since 1.34), and no name when the name is to be generated; these
        are put back after."""
        hooks = await self._mutating.hooks()
        if not hooks:
            return False
        request = Request(rtype, namespace or "", "" if generated_name else name, operation, None, old,
                          subresource or "", self._options(operation, options), kind)
        kept: Obj = {}
        if obj is not None:
            shown = dict(obj)
            if operation == "CREATE":
                meta = shown["metadata"] = dict(obj.get("metadata") or {})
                kept = {k: meta.pop(k) for k in ("uid", "generation") if k in meta}
                kept["creationTimestamp"] = meta.pop("creationTimestamp", None)
                if generated_name:
                    kept["name"] = meta.pop("name", None)
            request.obj = shown
        state = reinvocation if reinvocation is not None else HookReinvocation()
        patched_any = False
        for i, hook in enumerate(hooks):
            if again is not None and (hook.configuration, hook.name) not in again:
                # not called (upstream's: a webhook is never called first in the second round), but
                # matched all the same, its match conditions' errors refusing, as upstream's dispatcher
                await self._matches(hook, request)
                continue
            changed = await self._call_mutating(hook, request, 0 if again is None else 1, i)
            if changed is None:
                continue
            patched_any = patched_any or changed
            if again is None:
                state.call(hook, changed)
        if reinvocation is None and again is None:  # once more each, in order (upstream's second round)
            for i, hook in enumerate(hooks):
                if (hook.configuration, hook.name) in state.again:
                    await self._call_mutating(hook, request, 1, i)
        if not patched_any:
            return False
        if obj is not None and request.obj is not None:
            patched = request.obj
            meta = patched.setdefault("metadata", {}) if kept else {}
            for key, value in kept.items():
                if key == "name":
                    if value is not None and not meta.get("name"):
                        meta["name"] = value
                elif key == "creationTimestamp" or key not in meta:
                    meta[key] = value
            obj.clear()
            obj.update(patched)
        return True

    async def validate(self, rtype: ResourceType, namespace: str | None, name: str, operation: str,
                       obj: Obj | None, old: Obj | None, subresource: str | None, options: Obj | None = None,
                       kind: tuple[str, str, str] | None = None) -> None:
        """Call the validating webhooks that match, all at once; the first refusal (in call order) is raised."""
        hooks = await self._validating.hooks()
        if not hooks:
            return
        request = Request(rtype, namespace or "", name, operation, obj, old, subresource or "",
                          self._options(operation, options), kind)
        matched = [invocation for hook in hooks if (invocation := await self._matches(hook, request)) is not None]
        if not matched:
            return
        spent: list[float] = []
        results = await asyncio.gather(*(self._validating_call(invocation, request, spent) for invocation in matched),
                                       return_exceptions=True)
        if spent:  # they ran at once: the request waited for the longest (upstream's validating tracker)
            note_webhook_time(max(spent))
        for result in results:
            if isinstance(result, BaseException):
                raise result

    # ------------------------------------------------------------------ matching

    async def _matches(self, hook: Hook, request: Request) -> Invocation | None:
        """How ``hook`` is called for ``request``, or None when it is not (upstream's ``ShouldCallHook``)."""
        spec = hook.spec
        selector = spec.get("namespaceSelector")
        if selector and (request.namespace or _is_namespace(request)) \
                and not match_label_selector(selector, await self._namespace_labels(request)):
            return None
        if not object_selected(spec.get("objectSelector"), request.obj, request.old):
            return None
        rules = [rule for rule in spec.get("rules") or () if isinstance(rule, dict)]
        invocation: Invocation | None = None
        if any(_rule_matches(rule, request, request.rtype) for rule in rules):
            invocation = Invocation(hook, request.rtype)
        elif spec.get("matchPolicy", "Equivalent") == "Equivalent" and request.kind is None:
            # (a subresource of a kind of its own is matched as it is: not converted)
            # the rules in order, each against every other version of the resource (upstream's order)
            equivalents = self._equivalents(request)
            invocation = next((Invocation(hook, other) for rule in rules for other in equivalents
                               if _rule_matches(rule, request, other)), None)
        if invocation is None:
            return None
        conditions = spec.get("matchConditions") or ()
        if not conditions:
            return invocation
        if await self._conditions_exclude(hook, request, invocation, conditions):
            return None
        return invocation

    async def _conditions_exclude(self, hook: Hook, request: Request, invocation: Invocation,
                                  conditions: list[Obj]) -> bool:
        """Whether ``hook``'s match conditions leave the request out, as upstream's webhook
        matcher: all run; a false one excludes (whatever errors others had); else errors
        (``expression '...' resulted in error: ...``, each counted) exclude under ``failurePolicy:
        Ignore`` and are a 403 under Fail. A result neither false nor an error matches (upstream
        checks no type as they run). ``namespaceObject`` is null (upstream passes no namespace to
        a webhook's conditions); ``authorizer`` asks this server's authorizer (``celauthz``)."""
        variables = {"object": await self._as(request.obj, request.rtype, invocation.rtype),
                     "oldObject": await self._as(request.old, request.rtype, invocation.rtype),
                     "request": self._request_fields(request, invocation.rtype, ""), "namespaceObject": None}
        library: AuthorizerLibrary | None = None
        if any("authorizer" in str(c.get("expression") or "") for c in conditions):
            rtype = request.rtype
            library = AuthorizerLibrary(self._kube.authorizer, REQUEST_USER.get(), (
                rtype.group, rtype.plural, request.subresource, request.namespace, request.name))
            context = library.context(variables)
        else:
            context = context_of(variables)
        meter = Meter()  # upstream's per-call limit and the conditions' budget (admissionpolicy.conditions_hold)
        meter.install(context)
        labels = (hook.name, "webhook", _step(hook), request.operation)
        try:
            excluded, message = not await conditions_hold(conditions, context, library, meter, observed=labels), ""
        except ConditionsFailed as e:
            excluded, message = hook.spec.get("failurePolicy") == "Ignore", str(e)
        if excluded:
            ADMISSION_MATCH_CONDITION_EXCLUSIONS.labels(*labels).inc()
            return True
        if not message:
            return False
        what = f"{request.rtype.plural}.{request.rtype.group}" if request.rtype.group else request.rtype.plural
        raise ApiError(403, "Forbidden", f'{what} "{request.name}" is forbidden: {message}',
                       {"name": request.name, **({"group": request.rtype.group} if request.rtype.group else {}),
                        "kind": request.rtype.plural})

    def _equivalents(self, request: Request) -> list[ResourceType]:
        """The other served versions of the request's resource (``equivalents.py``), asked once per request."""
        if request._equivalents is None:
            request._equivalents = equivalent_types(self._kube.registry, request.rtype)
        return request._equivalents

    async def _namespace_labels(self, request: Request) -> dict[str, str]:
        """The labels the namespace selector judges: a Namespace's own when it is being
        created or updated, else the namespace's as stored (upstream's namespace matcher)."""
        if request._namespace_labels is not None:
            return request._namespace_labels
        if _is_namespace(request) and request.operation in ("CREATE", "UPDATE") and request.obj is not None:
            labels = (request.obj.get("metadata") or {}).get("labels") or {}
        else:
            raw = await self._kube._namespace(request.namespace or request.name)
            if raw is None:
                raise ApiError(500, "InternalError", f'Internal error occurred: namespace "{request.namespace}" '
                               "not found", {"causes": [{"message": f'namespace "{request.namespace}" not found'}]})
            labels = (orjson.loads(raw).get("metadata") or {}).get("labels") or {}
        request._namespace_labels = labels
        return labels

    # ------------------------------------------------------------------ calling

    async def _call_mutating(self, hook: Hook, request: Request, round_: int, index: int) -> bool | None:
        """Call ``hook`` if it matches (None: it does not); whether its patch changed the object.
        An audited request notes the call (``round_``: 0, or 1 for a reinvocation; ``index``:
        the webhook's place among all), as upstream's webhook annotator."""
        invocation = await self._matches(hook, request)
        if invocation is None:
            return None
        started = time.perf_counter()
        spent: list[float] = []
        try:
            answer = await self._call(invocation, request, started, spent)
        finally:
            if spent:  # one after the other: the request waited for each (upstream's mutating tracker)
                note_webhook_time(spent[0])
        if answer is None:
            return False
        try:
            changed = await self._patched(invocation, request, answer)
        except _PatchError as e:
            _observe(hook, request, started, True, e.code,
                     "calling_webhook_error" if e.code else "apiserver_internal_error")
            raise e.error from None
        except ApiError:
            _observe(hook, request, started, True, 0, "apiserver_internal_error")
            raise
        _observe(hook, request, started, False, 200)
        if audit.recording():
            where = f"round_{round_}_index_{index}"
            audit.annotate(MUTATION_ANNOTATION + where, orjson.dumps(
                {"configuration": hook.configuration, "webhook": hook.name, "mutated": changed}).decode())
            if answer.get("patch"):
                audit.annotate(PATCH_ANNOTATION + where, orjson.dumps(
                    {"configuration": hook.configuration, "webhook": hook.name,
                     "patch": orjson.loads(base64.b64decode(answer["patch"])),
                     "patchType": answer.get("patchType", "JSONPatch")}).decode(), "Request")
        return changed

    async def _patched(self, invocation: Invocation, request: Request, answer: Obj) -> bool:
        """Apply a mutating webhook's patch to ``request.obj``: whether it changed the object."""
        hook = invocation.hook
        patch = answer.get("patch")
        if not patch:
            return False
        operations = _patch_operations(hook.name, patch)
        if not operations:
            return False
        if request.obj is None:
            raise _PatchError(_internal(f'admission webhook "{hook.name}" attempted to modify the object, which is '
                                        "not supported for this operation"), 0)
        if request.rtype.custom is not None and may_hold_uint64s(orjson.dumps(operations)):
            # (the patched object is decoded into unstructured: 2^63 is a float64, written back so)
            uint64s_written_back(operations)
        try:
            patched = gojsonpatch.apply(await self._as(request.obj, request.rtype, invocation.rtype), operations,
                                        decoded=True)
        except gojsonpatch.PatchError as e:  # (upstream's NewInternalError of the library's error)
            raise _PatchError(_internal(str(e)), 0) from e
        if not isinstance(patched, dict):
            raise _PatchError(_internal(f'admission webhook "{hook.name}" patched the object into something else '
                                        "than an object"), 0)
        patched = await self._as(patched, invocation.rtype, request.rtype)
        changed = patched != request.obj
        request.obj = patched
        return changed

    async def _validating_call(self, invocation: Invocation, request: Request, spent: list[float]) -> None:
        started = time.perf_counter()
        if await self._call(invocation, request, started, spent) is not None:
            _observe(invocation.hook, request, started, False, 200)

    async def _call(self, invocation: Invocation, request: Request, started: float,
                    spent: list[float]) -> Obj | None:
        """POST the review to the webhook: its response (allowed), None when a failure is ignored
        or the webhook is left out; a refusal or an unignored failure is raised. Its metrics are
        recorded here but for an allowed answer's (the caller's, once a patch is applied); the
        POST's duration is appended to ``spent``."""
        hook = invocation.hook
        spec = hook.spec
        ignore = spec.get("failurePolicy") == "Ignore"
        if DRY_RUN.get() and spec.get("sideEffects") not in ("None", "NoneOnDryRun"):
            _observe(hook, request, started, True, 0, "apiserver_internal_error")
            raise ApiError.bad_request(f'admission webhook "{hook.name}" does not support dry run')
        uid = str(uuid.uuid4())
        try:
            endpoint = await resolve(spec.get("clientConfig") or {}, self.lookup)
            body = orjson.dumps({"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1",
                                 "request": self._request_fields(request, invocation.rtype, uid, (
                                     await self._as(request.obj, request.rtype, invocation.rtype),
                                     await self._as(request.old, request.rtype, invocation.rtype)))})
            if may_hold_whole_floats(body):
                body = _as_go_writes(body)
            body = go_json(body)  # (its other floats: 1e+20 is 100000000000000000000)
            posted = time.perf_counter()
            try:
                answer = await self.clients.post(endpoint, body, float(spec.get("timeoutSeconds") or 10))
            finally:
                spent.append(time.perf_counter() - posted)
            response = _verified(answer, uid, hook.mutating)
        except Unreachable as e:
            if self._mode == "reachable":
                return None
            _failed(hook, request, started, ignore, f"failed to call webhook: {e}", _call_code(hook, e))
            return None
        except CallError as e:
            _failed(hook, request, started, ignore, f"failed to call webhook: {e}", _call_code(hook, e))
            return None
        except _BadResponse as e:
            _failed(hook, request, started, ignore, f"received invalid webhook response: {e}", 503)
            return None
        for warning in response.get("warnings") or ():
            add_warning(str(warning))
        annotations = response.get("auditAnnotations")
        if isinstance(annotations, dict) and annotations and audit.recording():
            for key, value in annotations.items():  # (upstream's: the webhook's name before each key)
                audit.annotate(f"{hook.name}/{key}", str(value))
        if response.get("allowed") is not True:
            denied = _denied(hook.name, response.get("status"))
            _observe(hook, request, started, True, denied.code, "no_error")
            raise denied
        return response

    async def _as(self, obj: Obj | None, source: ResourceType, target: ResourceType) -> Obj | None:
        """``obj`` of version ``source`` as version ``target`` (``equivalents.as_version``)."""
        return await as_version(self._kube, obj, source, target)

    async def lookup(self, kind: str, namespace: str, name: str) -> Any:
        """What ``webhookcall.resolve`` reads (CRD conversion webhooks resolve through it too)."""
        kube = self._kube
        if kind == "endpointslices":
            slices = kube.registry.get("discovery.k8s.io", "v1", "endpointslices")
            if slices is None:
                return []
            listed = await kube._list(slices, namespace, {"resourceVersion": "0",
                                                          "labelSelector": f"kubernetes.io/service-name={name}"})
            return [orjson.loads(raw) for raw in listed.items]
        rtype = kube.registry.get("", "v1", kind)
        if rtype is None:
            return None
        raw = await kube.cached_or_stored(rtype, namespace, name)
        return orjson.loads(raw) if raw is not None else None

    @staticmethod
    def _options(operation: str, options: Obj | None) -> Obj | None:
        if operation == "CONNECT":
            return None  # (upstream's review then has "options": null)
        out: Obj = {"kind": _OPTIONS_KIND.get(operation, "CreateOptions"), "apiVersion": "meta.k8s.io/v1"}
        for key, value in (options or {}).items():
            if key not in ("kind", "apiVersion") and value is not None:
                out[key] = value
        if DRY_RUN.get():
            out["dryRun"] = ["All"]
        return out

    @staticmethod
    def _request_fields(request: Request, invoked: ResourceType, uid: str,
                        objects: tuple[Obj | None, Obj | None] | None = None) -> Obj:
        """The AdmissionRequest, as upstream's ``CreateV1AdmissionReview`` fills it in: ``kind``
        and ``resource`` the version the webhook is called with, ``requestKind`` and
        ``requestResource`` the version the request named; ``objects``: the object and the old
        one in the version called with."""
        rtype = request.rtype
        if request.kind is not None:  # a subresource's own kind, the request's too (invoked is rtype)
            group, version, shown = request.kind
            kind = {"group": group, "version": version, "kind": shown}
            request_kind = kind
        else:
            kind = {"group": invoked.group, "version": invoked.version, "kind": invoked.kind}
            request_kind = {"group": rtype.group, "version": rtype.version, "kind": rtype.kind}
        resource = {"group": invoked.group, "version": invoked.version, "resource": invoked.plural}
        user = REQUEST_USER.get()
        fields: Obj = {"uid": uid, "kind": kind, "resource": resource}
        if request.subresource:
            fields["subResource"] = request.subresource
        fields.update(requestKind=request_kind,
                      requestResource={"group": rtype.group, "version": rtype.version, "resource": rtype.plural})
        if request.subresource:
            fields["requestSubResource"] = request.subresource
        if request.name:
            fields["name"] = request.name
        if request.namespace:
            fields["namespace"] = request.namespace
        fields["operation"] = request.operation
        fields["userInfo"] = user.info() if user is not None else {}
        if objects is not None:
            fields["object"], fields["oldObject"] = objects
        fields["dryRun"] = bool(DRY_RUN.get())
        fields["options"] = request.options
        return fields



class _BadResponse(Exception):
    pass


def _verified(answer: Obj, uid: str, mutating: bool) -> Obj:
    """The review's ``response``, checked as upstream's ``VerifyAdmissionResponse``."""
    got = f"{answer.get('apiVersion') or ''}, Kind={answer.get('kind') or ''}"
    if got.startswith(", "):
        got = "/" + got
    if got != _REVIEW_KIND:
        raise _BadResponse(f"expected webhook response of {_REVIEW_KIND}, got {got}")
    response = answer.get("response")
    if not isinstance(response, dict):
        raise _BadResponse("webhook response was absent")
    if response.get("uid") != uid:
        raise _BadResponse(f'expected response.uid="{uid}", got "{response.get("uid") or ""}"')
    patch_type = response.get("patchType") or ""
    if response.get("patch") and not patch_type:
        raise _BadResponse("webhook returned response.patch but not response.patchType")
    if patch_type and not mutating:
        raise _BadResponse("validating webhook may not return response.patchType")
    if patch_type and patch_type != "JSONPatch":
        raise _BadResponse(f'webhook returned invalid response.patchType of "{patch_type}"')
    return response


def _is_namespace(request: Request) -> bool:
    return not request.rtype.group and request.rtype.plural == "namespaces"


def _rule_matches(rule: Obj, request: Request, rtype: ResourceType) -> bool:
    """As upstream's ``rules.Matcher``: operation, group, version, resource/subresource, scope
    (of ``request`` as a request for ``rtype``, the request's own or an equivalent)."""
    def listed(values: Any, value: str) -> bool:
        return isinstance(values, list) and ("*" in values or value in values)

    if not listed(rule.get("operations"), request.operation) or not listed(rule.get("apiGroups"), rtype.group) \
            or not listed(rule.get("apiVersions"), rtype.version):
        return False
    scope = rule.get("scope") or "*"
    namespace = _is_namespace(request)
    if scope == "Namespaced" and (namespace or not request.namespace):
        return False
    if scope == "Cluster" and not namespace and request.namespace:
        return False
    for entry in rule.get("resources") or ():
        resource, _, sub = str(entry).partition("/")
        if resource in ("*", rtype.plural) and sub in ("*", request.subresource):
            return True
    return False


def _patch_operations(name: str, patch: Any) -> list[Any]:
    """A mutating webhook's ``response.patch`` decoded as upstream reads it: a string of standard
    base64 (client-go decodes the review, so anything else fails the call), then JSON the
    json-patch library's ``DecodePatch`` takes (else the patch is undecodable); both 503s, in
    Go's words."""
    problem = (base64_error(patch) if isinstance(patch, str) else
               f"json: cannot unmarshal {_json_kind(patch)} into Go struct field AdmissionResponse.response.patch "
               "of type []uint8")
    if problem is not None:
        raise _PatchError(_call_failed(name, f"failed to call webhook: {problem}"), 503)
    raw = base64.b64decode(patch.replace("\r", "").replace("\n", ""))
    try:
        try:
            decoded = orjson.loads(raw)
        except orjson.JSONDecodeError:
            syntax = gojson.syntax_error(raw)
            if syntax is not None:
                raise gojsonpatch.DecodeError(syntax) from None
            decoded = gojson.loads(raw)  # (what Go reads and orjson does not)
        return gojsonpatch.operations(decoded)
    except (gojsonpatch.DecodeError, gojson.NumberOutOfRange) as e:
        raise _PatchError(_call_failed(name, f"received undecodable patch in webhook response: {e}"), 503) from None


def _json_kind(value: Any) -> str:
    return ("object" if isinstance(value, dict) else "array" if isinstance(value, list)
            else "string" if isinstance(value, str) else "bool" if isinstance(value, bool) else "number")


class _PatchError(Exception):
    """A mutating webhook's patch that could not be applied: ``error`` is the request's, ``code``
    the metrics' (503 for an undecodable patch, a call's error upstream; 0 for an internal one)."""

    def __init__(self, error: ApiError, code: int) -> None:
        super().__init__(error.message)
        self.error, self.code = error, code


def _step(hook: Hook) -> str:
    """Upstream's ``type`` label of a webhook's metrics."""
    return "admit" if hook.mutating else "validating"


def _observe(hook: Hook, request: Request, started: float, rejected: bool, code: int,
             error_type: str | None = None) -> None:
    """A call's metrics, as upstream's dispatchers record them: its duration and result, and, if it
    refused the request, why (``error_type``: no_error, calling_webhook_error, apiserver_internal_error)."""
    step, operation = _step(hook), request.operation
    code = min(code, 600)
    shown = "true" if rejected else "false"
    ADMISSION_WEBHOOK_REQUESTS.labels(hook.name, step, operation, str(code), shown).inc()
    ADMISSION_WEBHOOK_DURATION.labels(hook.name, step, operation, shown).observe(time.perf_counter() - started)
    if rejected and error_type is not None:
        ADMISSION_WEBHOOK_REJECTIONS.inc(hook.name, step, operation, error_type, str(code))


def _call_code(hook: Hook, error: CallError) -> int:
    """The code upstream's metrics give a failed call: the Status the webhook answered with, else
    client-go's error made one (400 for a validating webhook, 503 for a mutating one)."""
    code = (error.status or {}).get("code")
    if isinstance(code, int) and not isinstance(code, bool) and code:
        return code
    return 503 if hook.mutating else 400


def _failed(hook: Hook, request: Request, started: float, ignore: bool, reason: str, code: int) -> None:
    """A call that failed: logged (and counted as failing open) when the failure policy ignores
    it, else raised."""
    _observe(hook, request, started, not ignore, code, "calling_webhook_error")
    if not ignore:
        raise _call_failed(hook.name, reason)
    ADMISSION_WEBHOOK_FAIL_OPEN.inc(hook.name, _step(hook))
    log.warning("Failed calling webhook, failing open %s: %s", hook.name, reason)


def _call_failed(name: str, reason: str) -> ApiError:
    return _internal(f'failed calling webhook "{name}": {reason}')


def _internal(message: str) -> ApiError:
    return ApiError(500, "InternalError", f"Internal error occurred: {message}", {"causes": [{"message": message}]})


def _denied(name: str, status: Any) -> ApiError:
    """A webhook's refusal, as upstream's ``ToStatusErr``: its code (400 at least), reason and
    details, the message prefixed with the webhook's name."""
    status = status if isinstance(status, dict) else {}
    code = status.get("code")
    code = code if isinstance(code, int) and not isinstance(code, bool) and code >= 400 else 400
    denied = f'admission webhook "{name}" denied the request'
    if status.get("message"):
        message = f"{denied}: {status['message']}"
    elif status.get("reason"):
        message = f"{denied}: {status['reason']}"
    else:
        message = f"{denied} without explanation"
    details = status.get("details") if isinstance(status.get("details"), dict) else None
    return ApiError(code, str(status.get("reason") or ""), message, details)


def _as_go_writes(review: bytes) -> bytes:
    """An AdmissionReview's JSON with its whole floats as Go's encoder writes them: a custom
    resource's ``port: 80.0``, a float64 in upstream's unstructured object, is sent ``80``
    (``gonumbers.written_back``). Only for a body that may hold one."""
    tree = orjson.loads(review)
    return orjson.dumps(tree) if whole_floats_written_back(tree) else review
