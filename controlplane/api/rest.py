"""The Kubernetes REST API: discovery, and create/get/list/update/patch/delete/watch
for every registered type, as one ASGI app (no per-route framework overhead on
the hot path).

URL forms (``/api/v1`` for the core group, ``/apis/<group>/<version>`` else)::

    .../<plural>                          list, watch (all namespaces), create (cluster-scoped)
    .../<plural>/<name>                   get, update, patch, delete (cluster-scoped)
    .../namespaces/<ns>/<plural>          list, watch, create
    .../namespaces/<ns>/<plural>/<name>   get, update, patch, delete

Objects are stored as JSON without ``metadata.resourceVersion``; the store's
revision of the object is put back on every read. Reads (``_get``, ``_list``,
``_watch``) go through ``self.reads`` (``reads.Reads``): the store's own reads
until the server installs the watch cache's (``controlplane.watchcache``).

Query parameters this server does not implement yet are refused with 400,
never ignored (a client that asked for something and silently did not get it
misbehaves later, or hangs).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import dataclasses
import functools
import ipaddress
import logging
import random
import time
from bisect import bisect_left
from collections.abc import Awaitable, Callable, Iterator, Mapping
from datetime import UTC, datetime
from typing import Any

import orjson

import store
from store import KeyValue, Store

from ..client.transport import WHOLE_BODY_SCOPE_KEY
from ..gonumbers import go_json, may_hold_uint64s, uint64s_written_back
from ..mergepatch import merge_patch
from ..metrics import (
    COMPONENT,
    LONGRUNNING_REQUESTS,
    POD_SECURITY_ERRORS,
    POD_SECURITY_EVALUATIONS,
    POD_SECURITY_EXEMPTIONS,
    REQUEST_BUCKETS,
    REQUESTS,
    dry_run_label,
)
from ..registry import Registry, ResourceType, disruption, managedfields, strategic
from ..registry.admissionpolicies import SERVED as POLICY_TYPES
from ..registry.certificates import prepare_csr, set_requestor
from ..registry.conversion import EVENTS_V1, Conversion, conversion_for, validate_events_v1
from ..registry.crd import GROUP as CRD_GROUP
from ..registry.crd import terminate as crd_terminate
from ..registry.csi import INITIAL_ATTACHMENT_STATUS
from ..registry.custom import present
from ..registry.ephemeral import ephemeral_update
from ..registry.managedfields import SCALE_TYPE
from ..registry.observedgeneration import keep_observed_generations
from ..registry.podannotations import version_skew as apparmor_version_skew
from ..registry.podcertificates import go_time
from ..registry.podspec import pair_ips, qos_class
from ..registry.podvalidation import label_key_problems
from ..registry.resize import resize_causes, resized_spec
from ..registry.servicecidrs import default_service_cidr
from ..registry.statuswrites import kept_at_status_write
from ..registry.strategies import (
    CREATE_ON_UPDATE,
    SERVICE_CIDR,
    BadData,
    default,
    health_check_port_causes,
    prepare,
    service_allocation_causes,
    validate_metadata,
    validate_name,
)
from ..registry.strategies import warnings as strategy_warnings
from ..registry.structural import apply_defaults as schema_defaults
from ..registry.typed import equal
from ..registry.validation import same_once_stored, shape_at, shape_of
from ..version import KUBE_MINOR
from . import audit, gojsonpatch, podsecurity, protobuf
from .admissionpolicy import REQUEST_USER, AdmissionPolicies
from .allocations import ServiceAllocations, ServiceWrite
from .apply import (
    APPLY_YAML,
    ApplyOptions,
    apply_defaults,
    apply_options,
    conflict_error,
    manager_of,
    object_gvknn,
    parse_config,
    parse_scale_config,
    sync_last_applied,
    yaml_as_json,
)
from .autoregister import ensure_flowcontrol_bootstrap, ensure_local_apiservices
from .certificateadmission import (
    check_attest,
    check_pod_certificate_signer,
    check_signer_permission,
    check_subject,
)
from .claimresize import ClaimResizeAdmission
from .componentstatus import DEPRECATION as CS_DEPRECATION
from .componentstatus import PLURAL as CS_PLURAL
from .componentstatus import component_statuses
from .converting import CONVERSION, ConvertingStore, served_bytes
from .crd_controllers import reconsider_names, remove_resources
from .crdconversion import CUSTOM_CONVERSION, ConversionWebhooks, Converting, WebhookConvertingStore
from .crds import CustomResourceDefinitions, scale_paths
from .defaultclass import DefaultClassAdmission
from .deleteoptions import delete_options
from .dependents import GarbageCollector
from .discovery import (
    aggregated,
    aggregated_version_accepted,
    group_list_order,
    storage_version_hash,
    subresource_kind,
    version_order,
)
from .discovery import content_type as discovery_content_type
from .dryrun import DRY_RUN, DryRunStore
from .errors import ApiError, json_object
from .fieldvalidation import (
    add_warning,
    check_decodes,
    check_merge_patch,
    check_object,
    decode_patch,
    fill_zero_values,
    request_scope,
    to_stored_form,
    warning_headers,
)
from .gojson import NumberOutOfRange, interpret_error, summarize, syntax_error
from .gojson import loads as gojson_loads
from .http1 import BODY_TIMEOUT, EXCHANGE_SCOPE_KEY, RECEIVED_SCOPE_KEY, Exchange
from .leaserenewals import GROUP as RENEWALS_GROUP
from .leaserenewals import RenewalPlans, renew_leases
from .limitranger import LimitRanger
from .mutatingpolicy import MutatingPolicies, Reinvocation
from .namespace_deleter import empty_namespace
from .negotiation import (
    AS_YAML,
    BUILTIN,
    CUSTOM,
    JSON_OUTPUT,
    NOT_ACCEPTABLE,
    NOT_ACCEPTABLE_STREAM,
    OUTPUT,
    PLAIN,
    Output,
    body_media_type,
    error_format,
    negotiate,
    negotiated_writer,
)
from .nodeauthz import Authorizers, NodeAuthorizer, kubelet
from .nodereports import PLURAL as REPORTS_PLURAL
from .nodereports import ReportPlans, report_node_status
from .nodetaint import admit_node
from .paramauthz import param_kind_causes, param_ref_causes
from .params import flag, go_int64, query_of
from .partial import check_partial_kind, partial, partial_list
from .podlog import follow, running_instance, validate_log_options
from .pretty import PRETTY_AGENTS, pretty_asked, pretty_writer
from .priority import SYSTEM_CLASSES, admit_pod_priority, admit_priority_class, system_class
from .proxying import PROXY_METHODS, proxy_options
from .proxying import refusal as proxy_refusal
from .quota import QuotaAdmission
from .rbac import MASTERS, Authorizer, Authorizes, User, forbidden, selected_name, verb_of
from .rbac import Request as RbacRequest
from .rbacescalation import GROUP as RBAC_GROUP
from .rbacescalation import check_write as check_rbac_write
from .rbacescalation import go_quote
from .rbacreconcile import ensure_rbac_policy
from .reads import (
    Listed,
    Reads,
    StoreReads,
    WatchItem,
    check_list_integers,
    list_options,
    resource_version_param,
    too_large_resource_version,
    watch_options,
)
from .resourcemetrics import GROUP as METRICS_GROUP
from .resourcemetrics import ResourceMetrics
from .reviews import REVIEWS, SERVER_AUDIENCES, Authenticate, review
from .runtimeclass import RuntimeClassAdmission
from .scale import replicas_of_scale, scale_of, with_spec_replicas
from .serviceaccount import ServiceAccountAdmission
from .stored import encode, omit_empty, with_resource_version, without_resource_version
from .stored import metadata_first as _metadata_first
from .streaming import STREAMING_SUBRESOURCES, Undialled, connect_options, needs_create, switched, translated_key
from .streaming import refusal as streaming_refusal
from .tables import as_table
from .tokenrequest import TokenIssuer, token_request_looked_up
from .topologylabels import NodeTopology, bound_labels
from .typemeta import EVICTION_ALSO, EVICTION_TYPE, TOKEN_REQUEST_TYPE, check_patched_type_meta, check_type_meta
from .uids import new_uid, random_suffix
from .webhooks import AdmissionWebhooks, HookReinvocation
from .writeoptions import check_write_options

log = logging.getLogger("controlplane.api")

# upstream's warning on every request for v1 Endpoints (KEP-4974), as kubectl prints it
ENDPOINTS_DEPRECATION = "v1 Endpoints is deprecated in v1.33+; use discovery.k8s.io/v1 EndpointSlice"

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

# a request's body: at most upstream's MaxRequestBodyBytes (413 past it, in its words), arriving
# within its --request-timeout (its timeout filter answers 504 while the handler still reads)
MAX_BODY = 3 * 1024 * 1024
BODY_LIMIT = f"limit is {MAX_BODY}"
USER_SCOPE_KEY = "controlplane.user"  # the authenticated rbac.User, set by the router in front
JSON = [(b"content-type", b"application/json")]
PROTOBUF = protobuf.CONTENT_TYPE
# the bodies a create or update may have (a patch has its own types)
ACCEPTED_BODIES = ("application/json", "application/yaml", PROTOBUF)
# The query parameters this server acts on (the OpenAPI documents list them); others,
# such as client-go's ``timeout``, are ignored, as upstream's parameter decoding does.
SUPPORTED_QUERY = {
    "labelSelector", "fieldSelector", "resourceVersion", "resourceVersionMatch", "timeoutSeconds", "watch",
    "limit", "continue", "allowWatchBookmarks", "sendInitialEvents", "includeObject", "pretty", "fieldManager",
    "fieldValidation", "dryRun", "force",
    "gracePeriodSeconds",
    "propagationPolicy", "orphanDependents",
}


_stamp: tuple[int, str] = (0, "")


def _now() -> str:
    """The current time as an RFC 3339 string to the second (metav1.Time), formatted once a second."""
    global _stamp
    second = int(time.time())
    if _stamp[0] != second:
        _stamp = (second, datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
    return _stamp[1]


def _object(value: bytes, revision: int) -> dict[str, Any]:
    obj: dict[str, Any] = orjson.loads(value)
    obj.setdefault("metadata", {})["resourceVersion"] = str(revision)
    return obj


class KubeApi:
    """The ASGI app behind ``/api`` and ``/apis``."""

    def __init__(self, registry: Registry, get_store: Callable[[], Store | None], server_address: str) -> None:
        # the (group, plural)s whose dependents a garbage collector deletes or orphans: their
        # deletes with propagationPolicy Orphan or Foreground get its finalizers (set by create_app)
        self.garbage_collected: frozenset[tuple[str, str]] = frozenset()
        # the garbage collector for every kind (api/dependents.py; collect_garbage, by create_app)
        self.gc: GarbageCollector | None = None
        # StorageObjectInUseProtection: set while the persistent volume controller runs (api/app.py)
        self.storage_protected = False
        self.registry = registry
        self._get_store = get_store
        self._server_address = server_address
        self._namespaces = registry.get("", "v1", "namespaces")
        self._pods = registry.get("", "v1", "pods")
        self._budgets = registry.get("policy", "v1", "poddisruptionbudgets")
        self._services = registry.get("", "v1", "services")
        self._endpoints = registry.get("", "v1", "endpoints")
        self._csrs = registry.get("certificates.k8s.io", "v1", "certificatesigningrequests")
        self._trust_bundles = registry.get("certificates.k8s.io", "v1", "clustertrustbundles")
        self._pod_certificates = registry.get("certificates.k8s.io", "v1", "podcertificaterequests")
        self._nodes = registry.get("", "v1", "nodes")
        self._node_topology = NodeTopology()  # PodTopologyLabels admission of bindings (api/topologylabels.py)
        assert self._services is not None
        # Services' cluster IPs and node ports, claimed in the store (api/allocations.py)
        self.allocations = ServiceAllocations(lambda: self.store, self._services)
        self._service_cidrs = registry.get("networking.k8s.io", "v1", "servicecidrs")
        self._ranges_generation: int | None = None  # the ServiceCIDRs' cache generation the ranges are of
        quotas = registry.get("", "v1", "resourcequotas")
        self._quota = QuotaAdmission(self, quotas) if quotas is not None else None
        ranges = registry.get("", "v1", "limitranges")
        self._limit_ranger = LimitRanger(self, ranges) if ranges is not None else None
        self._default_classes = DefaultClassAdmission(  # DefaultStorageClass, DefaultIngressClass
            self, registry.get("", "v1", "persistentvolumeclaims"),
            registry.get("storage.k8s.io", "v1", "storageclasses"),
            registry.get("networking.k8s.io", "v1", "ingresses"),
            registry.get("networking.k8s.io", "v1", "ingressclasses"))
        claims, storage_classes = self._default_classes.claims, registry.get("storage.k8s.io", "v1", "storageclasses")
        self._claim_resize = ClaimResizeAdmission(self, claims, storage_classes) \
            if claims is not None and storage_classes is not None else None
        policies = registry.get("admissionregistration.k8s.io", "v1", "validatingadmissionpolicies")
        policy_bindings = registry.get("admissionregistration.k8s.io", "v1", "validatingadmissionpolicybindings")
        self._policies = AdmissionPolicies(self, policies, policy_bindings) \
            if policies is not None and policy_bindings is not None else None
        mutating = registry.get("admissionregistration.k8s.io", "v1", "mutatingadmissionpolicies")
        mutating_bindings = registry.get("admissionregistration.k8s.io", "v1", "mutatingadmissionpolicybindings")
        self._mutating_policies = MutatingPolicies(self, mutating, mutating_bindings) \
            if mutating is not None and mutating_bindings is not None else None
        self.webhooks: AdmissionWebhooks | None = None  # admission webhooks (admission_webhooks)
        self.conversions: ConversionWebhooks | None = None  # CRD conversion webhooks (admission_webhooks)
        accounts = registry.get("", "v1", "serviceaccounts")
        self._service_accounts = ServiceAccountAdmission(self, accounts) if accounts is not None else None
        runtime_classes = registry.get("node.k8s.io", "v1", "runtimeclasses")
        self._runtime_classes = RuntimeClassAdmission(self, runtime_classes) if runtime_classes is not None else None
        self._priority_classes = registry.get("scheduling.k8s.io", "v1", "priorityclasses")
        self._default_class_memo: tuple[int, dict[str, Any] | None] = (-1, None)  # (cache generation, class)
        self._class_memo: tuple[int, dict[str, dict[str, Any]]] = (-1, {})  # (cache generation, classes by name)
        self._namespace_memo: tuple[int, dict[str, bytes]] = (-1, {})  # (cache generation, namespaces by name)
        # TaintNodesByCondition admission (api/nodetaint.py; off with --disable-admission-plugins)
        self.taint_nodes_at_creation = True
        # PodSecurity admission's configuration (api/podsecurity.py; --admission-control-config-file)
        self.pod_security = podsecurity.DEFAULT_CONFIGURATION
        self._background: set[asyncio.Future[None]] = set()
        crd_type = registry.get(CRD_GROUP, "v1", "customresourcedefinitions")
        assert crd_type is not None
        self.crds = CustomResourceDefinitions(registry, crd_type)
        self.authorizer: Authorizes | None = None  # --authorization-mode (api/rbac.py, api/nodeauthz.py)
        self.node_restriction: NodeAuthorizer | None = None  # with the Node mode: NodeRestriction (api/nodeauthz.py)
        self.token_issuer: TokenIssuer | None = None  # serviceaccounts/token (api/tokenrequest.py)
        self.authenticate_token: Authenticate | None = None  # the server's token authentication (TokenReview)
        self.reads: Reads = StoreReads(lambda: self.store)  # the server swaps in the watch cache's
        self.renewal_plans = RenewalPlans()  # where LeaseRenewals splice the Leases they renewed last
        self.report_plans = ReportPlans()  # where NodeStatusReports splice the Nodes they reported last
        nodes = registry.get("", "v1", "nodes")
        assert self._pods is not None and nodes is not None
        self.metrics = ResourceMetrics(self._pods, nodes, self._list, self._get)  # metrics.k8s.io

    def collect_garbage(self) -> None:
        """Run the garbage collector for every kind (api/dependents.py), beside the workload
        controllers' for theirs (``garbage_collected``)."""
        self.gc = GarbageCollector(self.registry, lambda: self.store, self._delete, self._merge_patch, self._spawn,
                                   self.garbage_collected)

    async def _merge_patch(self, rtype: ResourceType, namespace: str | None, name: str,
                           patch: dict[str, Any]) -> dict[str, Any]:
        return await self._patch(rtype, namespace, name, "application/merge-patch+json", orjson.dumps(patch))

    def admission_webhooks(self, mode: str) -> None:
        """Call the admission webhooks configured (``--admission-webhooks``; api/webhooks.py):
        ``reachable``, ``all`` or ``off``."""
        mutating = self.registry.get("admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations")
        validating = self.registry.get("admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations")
        self.webhooks = AdmissionWebhooks(self, mutating, validating, mode) \
            if mode != "off" and mutating is not None and validating is not None else None
        # CRD conversion webhooks under the same mode (api/crdconversion.py), with the same clients
        self.conversions = ConversionWebhooks(self.webhooks.clients, self.webhooks.lookup, mode) \
            if self.webhooks is not None else None

    async def bootstrap_rbac(self) -> None:
        """upstream's bootstrap RBAC policy, created or reconciled (``rbacreconcile.py``) whatever
        the authorization mode, as upstream's ``rbac/bootstrap-roles`` hook (the roles exist to
        be bound)."""
        await ensure_rbac_policy(self.store, self.registry)

    async def bootstrap(self) -> None:
        """The namespaces every cluster has (kube-apiserver's system namespaces controller)."""
        assert self._namespaces is not None
        for name in ("default", "kube-system", "kube-public", "kube-node-lease"):
            obj = {"apiVersion": "v1", "kind": "Namespace",
                   "metadata": {"name": name, "uid": new_uid(), "creationTimestamp": _now(),
                                "labels": {"kubernetes.io/metadata.name": name}},
                   "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}}
            with contextlib.suppress(store.KeyExists):
                await self.store.create(self._namespaces.key(None, name), orjson.dumps(obj))
            await self._default_service_account(name)
        await self._kubernetes_service()
        await self._default_service_cidr()
        if self._priority_classes is not None:  # kube-apiserver's bootstrap-system-priority-classes
            for name, value, description in SYSTEM_CLASSES:
                with contextlib.suppress(store.KeyExists):
                    await self.store.create(self._priority_classes.key(None, name), orjson.dumps(_metadata_first(
                        {**system_class(name, value, description),
                         "metadata": {"name": name, "uid": new_uid(), "creationTimestamp": _now(),
                                      "generation": 1}})))
        # the aggregator's local APIServices and API Priority and Fairness's configuration
        await ensure_local_apiservices(self.store, self.registry)
        await ensure_flowcontrol_bootstrap(self.store, self.registry)
        await self.crds.load(self.store)
        for name in self.crds.terminating():  # deletions another run began
            self._spawn(remove_resources(self.crds, self.store, name, self._delete))
        prefix = self._namespaces.prefix()
        kvs, _, _ = await self.store.range(prefix, store.prefix_end(prefix))
        for kv in kvs:
            if b'"deletionTimestamp"' not in kv.value:  # (most: not parsed)
                continue
            meta = orjson.loads(kv.value).get("metadata") or {}
            if meta.get("deletionTimestamp"):  # a namespace another run began to empty (not a label so named)
                self._spawn(self._terminate(meta["name"]))

    async def _default_service_cidr(self) -> None:
        """The ServiceCIDR ``kubernetes`` of the service range, Ready, as kube-apiserver's
        default ServiceCIDR controller makes it (with kube-controller-manager's finalizer): that
        controller's first sync (its later ones: controllers/defaultservicecidr.py). One there
        already is left as it is (upstream reports a mismatch, and changes nothing)."""
        if self._service_cidrs is None:
            return
        obj = default_service_cidr([str(SERVICE_CIDR)], _now())
        obj["metadata"].update(uid=new_uid(), creationTimestamp=_now())
        with contextlib.suppress(store.KeyExists):
            await self.store.create(self._service_cidrs.key(None, obj["metadata"]["name"]),
                                    orjson.dumps(_metadata_first(obj)))

    async def _kubernetes_service(self) -> None:
        """The ``kubernetes`` Service in ``default``, the first address of the service range,
        with an Endpoints and an EndpointSlice naming this server (kube-apiserver's
        bootstrap controller and endpoint reconciler): in-cluster clients find the API
        through it. The endpoints follow the server's address when it restarts on another."""
        host, _, port_text = self._server_address.rpartition(":")
        try:
            address = ipaddress.ip_address(host.strip("[]"))
            ip = "127.0.0.1" if address.is_unspecified else str(address)
        except ValueError:
            ip = "127.0.0.1"
        port = int(port_text) if port_text.isdigit() else 6443
        labels = {"component": "apiserver", "provider": "kubernetes"}
        objects: list[tuple[str, str, str, dict[str, Any]]] = [
            ("", "v1", "services", {
                "apiVersion": "v1", "kind": "Service", "metadata": {"name": "kubernetes", "labels": labels},
                "spec": {"type": "ClusterIP", "clusterIP": "10.96.0.1", "clusterIPs": ["10.96.0.1"],
                         "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack", "sessionAffinity": "None",
                         "internalTrafficPolicy": "Cluster",
                         "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": port}]},
                "status": {"loadBalancer": {}}}),
            ("", "v1", "endpoints", {
                "apiVersion": "v1", "kind": "Endpoints",
                "metadata": {"name": "kubernetes", "labels": {"endpointslice.kubernetes.io/skip-mirror": "true"}},
                "subsets": [{"addresses": [{"ip": ip}],
                             "ports": [{"name": "https", "port": port, "protocol": "TCP"}]}]}),
            ("discovery.k8s.io", "v1", "endpointslices", {
                "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "addressType": "IPv4",
                "metadata": {"name": "kubernetes", "labels": {"kubernetes.io/service-name": "kubernetes"}},
                "endpoints": [{"addresses": [ip], "conditions": {"ready": True}}],
                "ports": [{"name": "https", "port": port, "protocol": "TCP"}]})]
        for group, version, plural, obj in objects:
            rtype = self.registry.get(group, version, plural)
            if rtype is None:
                continue
            key = rtype.key("default", "kubernetes")
            meta = {**obj["metadata"], "namespace": "default", "uid": new_uid(), "creationTimestamp": _now()}
            if keeps_generation(rtype):  # the EndpointSlice (its strategy's)
                meta["generation"] = 1
            try:
                await self.store.create(key, orjson.dumps(_metadata_first({**obj, "metadata": meta})))
                if plural == "services":
                    await self.allocations.claim_held("default", "kubernetes", obj)
                continue
            except store.KeyExists:
                pass
            current = await self.store.get(key)
            if current is None or plural == "services":
                continue
            stored = orjson.loads(current.value)
            moving = [k for k in ("subsets", "endpoints", "ports") if k in obj and stored.get(k) != obj[k]]
            if moving:  # the server moved: its endpoints follow
                before = dict(stored)
                stored.update({k: obj[k] for k in moving})
                if keeps_generation(rtype) and _generation_moves(rtype, before, stored):
                    stored_meta = stored.setdefault("metadata", {})
                    stored_meta["generation"] = int(stored_meta.get("generation", 1)) + 1
                with contextlib.suppress(store.Conflict):
                    await self.store.update(key, orjson.dumps(stored), current.mod_revision)

    @property
    def store(self) -> Store:
        s = self._get_store()
        if s is None:
            raise ApiError(503, "ServiceUnavailable", "the store is not open yet")
        if DRY_RUN.get():
            s = DryRunStore(s)
        conversion = CONVERSION.get()
        if conversion is not None:
            return ConvertingStore(s, conversion)
        custom = CUSTOM_CONVERSION.get()
        if custom is not None and self.conversions is not None:  # a CRD converting by webhook
            return WebhookConvertingStore(s, self.conversions, custom)
        return s

    # -- ASGI ------------------------------------------------------------------
    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        # from when the HTTP server took the request up (the wait for the loop counts, as upstream's
        # latency counts from the request's arrival); a server that does not say, from now
        started = scope.get(RECEIVED_SCOPE_KEY) or time.perf_counter()
        code = 0
        # requests in flight by upstream's request_kind (readOnly 0, mutating 1): RequestMetrics
        kind = 0 if scope["method"] == "GET" or scope["method"] == "HEAD" else 1
        inflight = REQUESTS.inflight
        now = inflight[kind] = inflight[kind] + 1
        if now > REQUESTS.peak[kind]:
            REQUESTS.peak[kind] = now

        async def answer(message: dict[str, Any]) -> None:
            nonlocal code
            if message["type"] == "http.response.start":
                code = message["status"]
            await send(message)

        # This request's context variables, reset on the way out: an in-process client runs the
        # app in its caller's task, where a dry run's DRY_RUN (or a converted type's CONVERSION)
        # would otherwise outlive the request and turn that client's next create into a dry run.
        dry_run, conversion, user = DRY_RUN.set(False), CONVERSION.set(None), REQUEST_USER.set(None)
        custom_conversion = CUSTOM_CONVERSION.set(None)
        output = OUTPUT.set(JSON_OUTPUT)  # the endpoint's negotiation sets it (api/negotiation.py)
        try:
            with request_scope(scope) as request:
                try:
                    accept, agent = _accept_and_agent(scope)
                    query_string = scope.get("query_string", b"")
                    if (agent.startswith(PRETTY_AGENTS) or b"pretty" in query_string) \
                            and pretty_asked(query_string, agent):  # (before YAML's: it sees YAML go by)
                        answer = pretty_writer(answer, lambda: WATCH_SCOPE_KEY in scope)  # type: ignore[assignment]
                    if "yaml" in accept:  # (else nothing can be written as YAML)
                        answer = negotiated_writer(answer, error_format(accept) == AS_YAML)  # type: ignore[assignment]
                    await self._dispatch(scope, receive, answer)
                except ApiError as e:
                    await self._respond(answer, e.code, e.body(), e.retry_after())
                except store.StoreError as e:
                    err = _store_error(e)
                    await self._respond(answer, err.code, err.body(), err.retry_after())
                except (RecursionError, orjson.JSONEncodeError) as e:
                    # JSON nested deeper than the walks (validation, patches, copies) or orjson's
                    # writer (255 levels: a patched object, an error quoting it) can follow, though
                    # under the parser's limit: the body's fault, nothing was written
                    if isinstance(e, orjson.JSONEncodeError) and not _too_deep(e):
                        await self._internal_error(answer, code, scope, e)
                    elif not code:
                        err = ApiError.bad_request("the object is nested too deeply to be handled")
                        await self._respond(answer, err.code, err.body())
                except Exception as e:  # a bug: still a Status, and one log line with the cause
                    await self._internal_error(answer, code, scope, e)
                finally:
                    _observe_request(scope, code, time.perf_counter() - started, request.webhook_seconds)
        finally:
            inflight[kind] -= 1
            OUTPUT.reset(output)
            REQUEST_USER.reset(user)
            CONVERSION.reset(conversion)
            CUSTOM_CONVERSION.reset(custom_conversion)
            DRY_RUN.reset(dry_run)

    async def _internal_error(self, send: Send, code: int, scope: Scope, e: Exception) -> None:
        """A bug: still a Status (unless an answer has started), and one log line with the cause."""
        log.error("%s %s failed: %r", scope.get("method"), scope.get("path"), e,
                  exc_info=log.isEnabledFor(logging.DEBUG))
        if not code:
            await self._respond(send, 500, ApiError(500, "InternalError", f"an error on the server ({e!r})").body())

    @staticmethod
    async def _respond(send: Send, code: int, body: bytes, extra: list[tuple[bytes, bytes]] | None = None) -> None:
        """One JSON answer (an object or a Status), ended by a newline as upstream's JSON
        serializer ends every one (``json.Encoder.Encode``)."""
        body += b"\n"
        await send({"type": "http.response.start", "status": code,
                    "headers": [*JSON, (b"content-length", str(len(body)).encode()), *warning_headers(),
                                *(extra or ())]})
        await send({"type": "http.response.body", "body": body})

    async def _json(self, send: Send, code: int, obj: Any) -> None:
        converting = CUSTOM_CONVERSION.get()
        if converting is not None and converting.stored and self.conversions is not None:
            obj = await self.conversions.answer(converting, obj)  # a write stored in another version
        # (floats as Go's encoder writes them: a custom resource's delete answers the object)
        await self._respond(send, code, obj.raw if isinstance(obj, Written) else go_json(orjson.dumps(obj)))

    @staticmethod
    async def _body(scope: Scope, receive: Receive) -> bytes:
        """The request's body, at most ``MAX_BODY`` bytes (413 as soon as it declares or sends
        more) arriving within ``BODY_TIMEOUT`` (504: a client that sends fewer bytes than its
        Content-Length, or stops mid-chunk, does not hold its request open forever)."""
        exchange: Exchange | None = scope.get(EXCHANGE_SCOPE_KEY)
        if (exchange is not None and exchange.body_done) or WHOLE_BODY_SCOPE_KEY in scope:
            return await _read_body(receive)  # all there (most requests): read, its size checked, no wait
        declared = next((v for k, v in scope["headers"] if k == b"content-length"), b"")
        if declared.isdigit() and int(declared) > MAX_BODY:
            raise ApiError.too_large(BODY_LIMIT)
        try:
            if exchange is not None:  # the server's own protocol bounds its receive (http1.BODY_TIMEOUT)
                return await _read_body(receive)
            async with asyncio.timeout(BODY_TIMEOUT):  # (about 7 µs a request: uvicorn's protocol only)
                return await _read_body(receive)
        except TimeoutError:
            raise ApiError.timeout("request did not complete within the allotted timeout") from None

    # -- routing -----------------------------------------------------------------
    async def _dispatch(self, scope: Scope, receive: Receive, send: Send) -> None:
        path: str = scope["path"]
        parts = [p for p in path.split("/") if p]
        method: str = scope["method"]
        query_string: bytes = scope.get("query_string", b"")
        query = query_of(query_string)  # (each parameter's first value, as upstream reads a repeated one)
        REQUEST_USER.set(scope.get(USER_SCOPE_KEY))  # this request's context only (admission policies)
        if self.authorizer is not None:
            await self._authorize(scope, parts, method, query)
        if parts == ["api"] or parts == ["apis"]:
            accept = _accept(scope)
            wanted = aggregated_version_accepted(accept)
            if wanted is not None:
                body = orjson.dumps(aggregated(self.registry, parts == ["api"], wanted)) + b"\n"
                await send({"type": "http.response.start", "status": 200,
                            "headers": [(b"content-type", discovery_content_type(wanted)), (b"vary", b"Accept")]})
                return await send({"type": "http.response.body", "body": body})
            _negotiated(accept, PLAIN)  # a discovery document: no conversion
            return await self._json(send, 200, self._api_versions() if parts == ["api"] else self._group_list())
        if parts[:1] == ["api"]:
            group, version, rest = "", parts[1], parts[2:]
        elif parts[:1] == ["apis"] and len(parts) >= 2:
            if len(parts) == 2:
                g = self._group(parts[1])
                if g is None:
                    raise ApiError.not_found_path()
                _negotiated(_accept(scope), PLAIN)
                return await self._json(send, 200, g)
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            raise ApiError.not_found_path()
        if not rest:
            if version not in self.registry.groups().get(group, []):
                raise ApiError.not_found_path()
            _negotiated(_accept(scope), PLAIN)
            return await self._json(send, 200, self._resource_list(group, version))
        legacy_watch = rest[0] == "watch" and len(rest) > 1  # the deprecated .../watch/<the list's or item's path>
        if legacy_watch:
            rest = rest[1:]
        namespace: str | None = None
        if rest[0] == "namespaces" and len(rest) >= 3:
            rtype = self.registry.get(group, version, rest[2])
            if rtype is not None and rtype.namespaced:
                namespace, rest = rest[1], rest[2:]
        rtype = self.registry.get(group, version, rest[0])
        if rtype is None or (len(rest) > 3 and not (rest[2] == "proxy" and "proxy" in rtype.subresources)):
            raise ApiError.not_found_path()  # (a proxy's path goes on: it is the backend's)
        name = rest[1] if len(rest) > 1 else None
        subresource = rest[2] if len(rest) > 2 else None
        if subresource is not None and subresource not in rtype.subresources:
            raise ApiError.not_found_path()
        if rtype.namespaced and name is not None and namespace is None:
            raise ApiError.not_found_path()
        watched: str | None = None  # the one object a legacy watch path names
        if legacy_watch:
            if subresource is not None or "watch" not in rtype.verbs:
                raise ApiError.not_found_path()  # (upstream routes .../watch/ for what it can watch only)
            if method != "GET":
                raise ApiError.method_not_allowed()
            watched, name = name, None
        if subresource in STREAMING_SUBRESOURCES and name is not None:
            if method not in ("GET", "POST"):
                raise ApiError.method_not_allowed()
            options = connect_options(subresource, query_string)
            await self._admit_connect(rtype, namespace, name, subresource, options)
            failure = await self._streaming_refusal(rtype, namespace, name, options, scope)
            key = translated_key(method, subresource, scope["headers"])
            if key is None or not isinstance(failure, Undialled):
                raise failure
            switching, session = switched(key, options, failure)  # upgraded, then told on the stream
            await send({"type": "http.response.start", "status": 101, "headers": switching})
            return await send({"type": "http.response.body", "body": session})
        if subresource == "proxy" and name is not None:
            if method not in PROXY_METHODS:
                raise ApiError.method_not_allowed()
            if "dryRun" in query:
                raise ApiError.bad_request("dryRun is not supported")
            await self._admit_connect(rtype, namespace, name, subresource, proxy_options(rtype.kind, path, rest[3:]))
            raise await self._proxy_refusal(rtype, namespace, name)
        headers = dict(scope["headers"])
        if method == "PATCH" and subresource in (None, "status", "scale", "ephemeralcontainers", "resize", "approval") \
                and "patch" in rtype.verbs:  # upstream checks a patch's type first, as written (case and all)
            patch_type = headers.get(b"content-type", b"").decode("latin-1").strip()
            if patch_type.find(";") > 0:
                patch_type = patch_type[:patch_type.index(";")]
            accepted = accepted_patch_types(rtype)
            if patch_type not in accepted:
                raise ApiError.unsupported_media_type(accepted)
        if subresource != "log":  # (a pod's log is text: it takes any Accept)
            _negotiated(_accept(scope), CUSTOM if rtype.custom is not None else BUILTIN)
        if rtype.custom is not None and rtype.custom.deprecation_warning:
            add_warning(rtype.custom.deprecation_warning)
        elif rtype is self._endpoints:
            add_warning(ENDPOINTS_DEPRECATION)
        if method in ("POST", "PUT", "PATCH"):  # (a read's options have no dryRun: ignored, as upstream)
            if query or method == "PATCH":  # (a create or update without options has nothing to check;
                # an apply patch without them lacks its manager)
                check_write_options(method, query, headers.get(b"content-type", b"").decode("latin-1")
                                    .split(";")[0].strip() if method == "PATCH" else "")
            if query.get("dryRun") is not None:
                DRY_RUN.set(True)  # this request's context only; see api/dryrun.py
        elif method == "DELETE" and query.get("dryRun") == "All":  # (validated with its DeleteOptions)
            DRY_RUN.set(True)
        conversion = conversion_for(rtype.group, rtype.version, rtype.kind)
        if conversion is not None:  # stored as another version: see api/converting.py
            CONVERSION.set(conversion)
            if "fieldSelector" in query:
                query["fieldSelector"] = _field_selector_of(conversion, query["fieldSelector"])
        elif rtype.custom is not None and rtype.custom.conversion is not None:  # see api/crdconversion.py
            CUSTOM_CONVERSION.set(Converting(rtype))
        content_type = headers.get(b"content-type", b"").decode("latin-1")
        # a patch's type was held to the resource's as written above; a body's is a MIME type (415 unparseable)
        content_type = content_type.split(";")[0].strip().lower() if method == "PATCH" else \
            body_media_type(content_type)
        if content_type == PROTOBUF and method in ("POST", "PUT", "DELETE"):
            # kubectl's generators and client-go's typed clients: decoded here, then a JSON request
            decoded = _protobuf_as_json(rtype, await self._body(scope, receive), subresource,
                                        "DeleteOptions" if method == "DELETE" else rtype.kind)
            receive = _replay(audit.decoded(decoded))
            content_type = "application/json"
        elif method in ("POST", "PUT", "DELETE") and content_type == "application/yaml":
            # decoded as upstream's YAML serializer would: the handlers below see its JSON
            yaml_body = await self._body(scope, receive)  # (a DELETE's may be empty: no options)
            receive = _replay(audit.decoded(yaml_as_json(yaml_body) if method != "DELETE" or yaml_body.strip()
                                            else b""))
            content_type = "application/json"
        if rtype.group == METRICS_GROUP and rtype.custom is None:
            if method != "GET":
                raise ApiError.method_not_allowed()
            return await self._metrics_answer(send, rtype, namespace, name, query, dict(scope["headers"]))
        if not rtype.group and rtype.plural == CS_PLURAL and rtype.custom is None:
            return await self._component_statuses(send, rtype, method, name, query)
        if rtype.plural in REVIEWS and rtype.custom is None and subresource is None:
            if method != "POST" or name is not None:
                raise ApiError.method_not_allowed()
            if content_type not in ("", "application/json"):
                raise ApiError.unsupported_media_type(ACCEPTED_BODIES)
            asked = self._parse(rtype, await self._body(scope, receive))
            audiences = self.token_issuer.audiences if self.token_issuer is not None else SERVER_AUDIENCES
            return await self._json(send, 201, await review(rtype.plural, asked, scope.get(USER_SCOPE_KEY),
                                                            self.authorizer, namespace, self.authenticate_token,
                                                            audiences))
        if rtype.group == RENEWALS_GROUP and rtype.custom is None:
            if method != "POST" or name is not None:
                raise ApiError.method_not_allowed()
            if content_type not in ("", "application/json"):
                raise ApiError.unsupported_media_type(ACCEPTED_BODIES)
            body = await self._body(scope, receive)
            if rtype.plural == REPORTS_PLURAL:
                return await self._json(send, 201, await self._report_node_status(scope, rtype, body,
                                                                                  manager_of(query, headers)))
            return await self._json(send, 201, await self._renew_leases(scope, rtype, namespace or "", body,
                                                                        manager_of(query, headers)))
        if method == "POST" and content_type not in ("", "application/json") and (
                subresource in ("binding", "eviction", "token")):
            raise ApiError.unsupported_media_type(ACCEPTED_BODIES)
        if subresource == "binding" and method == "POST" and name is not None:
            body = await self._body(scope, receive)
            return await self._json(send, 201, await self._bind(rtype, namespace, name, body))
        if not rtype.group and rtype.plural == "bindings" and rtype.custom is None and self._pods is not None:
            # the legacy form of pods/binding: POST namespaces/{ns}/bindings binds the pod the Binding names
            if name is not None or namespace is None:
                raise ApiError.not_found_path()  # (upstream has no such route)
            if method != "POST":
                raise ApiError.method_not_allowed()
            if content_type not in ("", "application/json"):
                raise ApiError.unsupported_media_type(ACCEPTED_BODIES)
            body = await self._body(scope, receive)
            return await self._json(send, 201, await self._bind(self._pods, namespace, _binding_name(body), body,
                                                                admitted_as=rtype))
        if subresource == "eviction" and name is not None:
            if method != "POST":
                raise ApiError.method_not_allowed()
            body = await self._body(scope, receive)
            return await self._json(send, 201, await self._evict(rtype, namespace, name, body))
        if subresource == "token" and name is not None and self.token_issuer is not None:
            if method != "POST":
                raise ApiError.method_not_allowed()
            body = await self._body(scope, receive)
            return await self._json(send, 201, await self._token(rtype, namespace, name, body))
        if subresource == "log" and name is not None:
            if method != "GET":
                raise ApiError.method_not_allowed()
            return await self._log(rtype, namespace, name, query, receive, send)
        if subresource == "scale" and name is not None:
            if method in ("POST", "PUT") and content_type not in ("", "application/json"):
                raise ApiError.unsupported_media_type(ACCEPTED_BODIES)
            body = await self._body(scope, receive) if method in ("PUT", "PATCH") else b""
            scale = await self._scale(rtype, namespace, name, method, content_type, body, query,
                                      manager_of(query, headers) if method != "GET" else "")
            out = OUTPUT.get()
            if method == "GET" and out.table and rtype.custom is None:  # as upstream's Scale printer prints it
                scale = _table_version(as_table("scales.autoscaling", [scale],
                                                {"resourceVersion": scale["metadata"]["resourceVersion"]},
                                                _include_object(query)), out)
            return await self._json(send, 200, scale)
        if subresource == "finalize" and name is not None and rtype is self._namespaces:
            if method != "PUT":
                raise ApiError.method_not_allowed()
            return await self._json(send, 200, await self._finalize(rtype, name, await self._body(scope, receive)))
        if subresource in ("ephemeralcontainers", "resize", "approval") and method not in ("GET", "PUT", "PATCH"):
            raise ApiError.method_not_allowed()
        if subresource not in (None, "status", "ephemeralcontainers", "resize", "approval"):
            raise ApiError.method_not_allowed()  # (a binding's other verbs: upstream routes its POST only)
        if method in ("POST", "PUT") and content_type not in ("", "application/json"):
            # CBOR is out of scope (client-go falls back to JSON on a 415); protobuf was decoded above
            raise ApiError.unsupported_media_type(ACCEPTED_BODIES)
        manager = manager_of(query, headers) if method in ("POST", "PUT", "PATCH") else ""
        out = OUTPUT.get()
        table = method == "GET" and out.table
        metadata_only = out.metadata_only if method == "GET" else None
        include = _include_object(query) if table else "Metadata"
        if name is None:
            if method == "GET":
                if legacy_watch or flag(query, "watch"):  # (upstream's path watches, ?watch=false or not)
                    scope[WATCH_SCOPE_KEY] = True  # its metrics' verb
                    if out.yaml:
                        raise NOT_ACCEPTABLE_STREAM  # YAML has no stream form, upstream either
                    with _long_running(rtype, namespace):
                        return await self._watch(rtype, namespace, query, receive, send,
                                                 include if table else None, metadata_only, out.version,
                                                 scope.get(EXCHANGE_SCOPE_KEY), legacy_watch, watched)
                listed = await self._list(rtype, namespace, query)
                if rtype.custom is not None and rtype.custom.conversion is not None:
                    listed = dataclasses.replace(listed, items=await self._webhook_converted(rtype, listed.items, True))
                if metadata_only:
                    check_partial_kind(out.kind, rtype, listing=True)
                    return await self._json(send, 200, partial_list(listed.items, _list_meta(listed), metadata_only))
                if table:
                    items = [orjson.loads(raw) for raw in listed.items]
                    if rtype.custom is not None:
                        items = [present(rtype, obj) for obj in items]
                    return await self._json(send, 200, _table_version(
                        as_table(rtype.plural, items, _list_meta(listed), include, custom=rtype.custom), out))
                if _converted(rtype):
                    listed = dataclasses.replace(listed, items=[_presented(rtype, raw) for raw in listed.items])
                return await _send_list(send, rtype, listed)
            if method == "POST":
                body = await self._body(scope, receive)
                return await self._json(send, 201, await self._create(rtype, namespace, body, manager))
            # (a namespaced type's collection across namespaces is only listed and watched: upstream
            # routes no DELETE there, so that a delete by selector cannot empty every namespace)
            if method == "DELETE" and "deletecollection" in rtype.verbs and (namespace or not rtype.namespaced):
                options = self._delete_options(query, await self._delete_body(scope, receive, content_type))
                return await self._json(send, 200, await self._delete_collection(rtype, namespace, query, options))
            raise ApiError.method_not_allowed()
        if method == "GET":
            raw = await self._get(rtype, namespace, name, query)
            if rtype.custom is not None and rtype.custom.conversion is not None:
                raw = (await self._webhook_converted(rtype, [raw]))[0]
            if metadata_only:
                check_partial_kind(out.kind, rtype, listing=False)
                return await self._json(send, 200, partial(raw, metadata_only))
            if _converted(rtype) and not (table and rtype.custom is None):
                raw = _presented(rtype, raw)  # (a converted type's table is made from the stored shape)
            if table:
                got = orjson.loads(raw)
                got = as_table(rtype.plural, [got], {"resourceVersion": got["metadata"]["resourceVersion"]}, include,
                               custom=rtype.custom)
                return await self._json(send, 200, _table_version(got, out))
            return await self._respond(send, 200, raw)
        if method == "PUT":
            body = await self._body(scope, receive)
            try:
                updated = await self._update(rtype, namespace, name, body, subresource, manager)
            except ApiError as e:
                if e.code != 404 or subresource is not None or (rtype.group, rtype.plural) not in CREATE_ON_UPDATE \
                        or rtype.custom is not None:
                    raise
                return await self._json(send, 201, await self._create(rtype, namespace, body, manager, url_name=name))
            return await self._json(send, 200, updated)
        if method == "PATCH":
            body = await self._body(scope, receive)
            applying = apply_options(query, content_type)
            if applying is not None:
                scope[APPLY_SCOPE_KEY] = True  # its metrics' verb
                obj, created = await self._apply(rtype, namespace, name, body, subresource, applying)
                return await self._json(send, 201 if created else 200, obj)
            return await self._json(send, 200, await self._patch(rtype, namespace, name, content_type, body,
                                                                 subresource, manager))
        if subresource is not None:
            raise ApiError.method_not_allowed()
        if method == "DELETE":
            options = self._delete_options(query, await self._delete_body(scope, receive, content_type))
            deleted = await self._delete(rtype, namespace, name, options)
            if isinstance(deleted, Gone) and rtype.custom is None and rtype.plural not in RETURN_DELETED_OBJECT:
                return await self._json(send, 200, _deleted_status(rtype, deleted))
            return await self._json(send, 200, present(rtype, deleted) if rtype.custom is not None else deleted)
        raise ApiError.method_not_allowed()

    async def _component_statuses(self, send: Send, rtype: ResourceType, method: str, name: str | None,
                                  query: dict[str, str]) -> None:
        """``componentstatuses``: get and list only (api/componentstatus.py), with upstream's warning."""
        if method != "GET":
            raise ApiError.method_not_allowed()
        if name is None and flag(query, "watch"):
            raise ApiError(405, "MethodNotAllowed", f'watch is not supported on resources of kind "{CS_PLURAL}"',
                           {"kind": CS_PLURAL})
        add_warning(CS_DEPRECATION)
        answer = await component_statuses(self.store.revision, name, query)
        out = OUTPUT.get()
        if out.metadata_only:
            check_partial_kind(out.kind, rtype, listing=name is None)
            items = answer["items"] if name is None else [answer]
            if name is None:
                return await self._json(send, 200, partial_list([orjson.dumps(i) for i in items], {},
                                                                out.metadata_only))
            return await self._json(send, 200, partial(orjson.dumps(answer), out.metadata_only))
        if out.table:
            include = _include_object(query)
            objects = answer["items"] if name is None else [answer]
            answer = _table_version(as_table(CS_PLURAL, objects, {}, include), out)
        return await self._json(send, 200, answer)

    async def _metrics_answer(self, send: Send, rtype: ResourceType, namespace: str | None, name: str | None,
                              query: dict[str, str], headers: dict[bytes, bytes]) -> None:
        answer = await self.metrics.answer(rtype, namespace, name, query)
        if OUTPUT.get().table:  # kubectl get nodes.metrics.k8s.io
            include = _include_object(query)
            objects = answer["items"] if name is None else [answer]
            answer = _table_version(as_table(f"{rtype.plural}.{METRICS_GROUP}", objects, {}, include), OUTPUT.get())
        return await self._json(send, 200, answer)

    async def _bulk_request(self, scope: Scope, rtype: ResourceType, body: bytes, target: ResourceType | None,
                            need: RbacRequest) -> tuple[ResourceType, dict[str, Any]]:
        """A bulk write's target type and body, once its user may also ``need`` (RBAC mode)."""
        if target is None:
            raise ApiError.not_found_path()
        user = scope.get(USER_SCOPE_KEY)
        if self.authorizer is not None and user is not None and not await self._allowed(user, need):
            raise forbidden(user, need)
        asked = json_object(body, "the request body")
        if asked.get("kind") not in (None, rtype.kind) or asked.get("apiVersion") not in (None, rtype.api_version):
            raise ApiError.bad_request(
                f"the API version in the data ({asked.get('apiVersion')}) and kind ({asked.get('kind')}) do not "
                f"match the path ({rtype.api_version}, {rtype.kind})")
        return target, asked

    async def _report_node_status(self, scope: Scope, rtype: ResourceType, body: bytes,
                                  manager: str) -> dict[str, Any]:
        """A NodeStatusReport (api/nodereports.py): its user must also be allowed to patch nodes/status."""
        nodes, asked = await self._bulk_request(scope, rtype, body, self.registry.get("", "v1", "nodes"),
                                                RbacRequest("patch", "", "nodes", "status"))
        user = scope.get(USER_SCOPE_KEY)
        node = kubelet(user) if user is not None and self.node_restriction is not None else None
        if node is not None and self.node_restriction is not None:  # NodeRestriction: its own Node's status only
            names = (asked.get("spec") or {}).get("nodes") if isinstance(asked.get("spec"), dict) else None
            self.node_restriction.admit_node_report(node, names if isinstance(names, list) else [])
        return await report_node_status(store_=self.store, reads=self.reads, nodes=nodes, request=asked,
                                        manager=manager, prime=not DRY_RUN.get(), plans=self.report_plans)

    async def _renew_leases(self, scope: Scope, rtype: ResourceType, namespace: str, body: bytes,
                            manager: str) -> dict[str, Any]:
        """A LeaseRenewal (api/leaserenewals.py): its user must also be allowed to update leases."""
        leases, asked = await self._bulk_request(scope, rtype, body,
                                                 self.registry.get("coordination.k8s.io", "v1", "leases"),
                                                 RbacRequest("update", "coordination.k8s.io", "leases", "",
                                                             namespace, ""))
        return await renew_leases(store_=self.store, reads=self.reads, leases=leases, namespace=namespace,
                                  request=asked, manager=manager, prime=not DRY_RUN.get(),
                                  plans=self.renewal_plans)

    async def _authorize(self, scope: Scope, parts: list[str], method: str, query: dict[str, str]) -> None:
        """403 unless the authorizer allows this request to its user (RBAC mode only)."""
        assert self.authorizer is not None
        user = scope.get(USER_SCOPE_KEY)
        if user is None:
            return  # no authentication configured: nothing to authorize against
        request = self._rbac_request(parts, method, query)
        if not await self._allowed(user, request):
            raise forbidden(user, request, await self.authorizer.denial(user, request))
        if self.node_restriction is not None:
            node = kubelet(user)
            if node is not None:
                await self.node_restriction.restrict(user, node, request)
        if request.resource == "pods" and not request.api_group \
                and needs_create(method, request.subresource, scope["headers"]):
            request = dataclasses.replace(request, verb="create")  # a websocket exec creates, as a POST
            if not await self._allowed(user, request):
                raise forbidden(user, request)

    async def _allowed(self, user: User, request: RbacRequest) -> bool:
        """The authorizer's decision, noted in the audit event when the request is audited."""
        assert self.authorizer is not None
        allowed = await self.authorizer.allowed(user, request)
        if audit.recording():
            audit.authorized(allowed, await self.authorizer.reason(user, request) if allowed else "")
        return allowed

    def rbac_request_of(self, scope: Scope) -> RbacRequest:
        """The RBAC attributes of the request ``scope`` is (as ``_rbac_request``), for the
        checks made before it is routed (constrained impersonation's ``impersonate-on:``)."""
        query_string: bytes = scope.get("query_string", b"")
        query = query_of(query_string)
        return self._rbac_request([p for p in scope["path"].split("/") if p], scope["method"], query)

    def _rbac_request(self, parts: list[str], method: str, query: dict[str, str]) -> RbacRequest:
        """The RBAC attributes of a request: its resource, namespace, name and verb, or its
        path when it names no resource (discovery)."""
        path = "/" + "/".join(parts)
        if parts[:1] == ["api"] and len(parts) >= 2:
            group, rest = "", parts[2:]
        elif parts[:1] == ["apis"] and len(parts) >= 3:
            group, rest = parts[1], parts[3:]
        else:
            return RbacRequest(verb=method.lower() if method != "GET" else "get", path=path)
        # a deprecated .../watch/ path: the verb is watch whatever the method, the name the path's,
        # and its selectors are not the request's (upstream's RequestInfo, verbViaPathPrefix)
        legacy_watch = rest[:1] == ["watch"] and len(rest) > 1
        if legacy_watch:
            rest = rest[1:]
        namespace = ""
        if rest[:1] == ["namespaces"] and len(rest) >= 3 and rest[2] not in ("status", "finalize"):
            namespace, rest = rest[1], rest[2:]  # (namespaces/x/status is the namespace's own subresource)
        if not rest:
            return RbacRequest(verb="get", path=path)
        name = rest[1] if len(rest) > 1 else ""
        if group == "" and namespace and rest == ["bindings"] and method == "POST":
            return RbacRequest("create", "", "pods", "binding", namespace)
        subresource = rest[2] if len(rest) > 2 else ""
        if rest[0] == "namespaces" and len(rest) >= 2 and group == "":
            namespace = rest[1] if len(rest) > 1 else ""  # a namespace is in itself, as upstream
        verb = "watch" if legacy_watch else verb_of(method, bool(name), bool(flag(query, "watch")))
        selector = ""
        if not name and verb in ("list", "watch") and not legacy_watch:  # one object by field selector: its name
            selector = query.get("fieldSelector") or ""
            name = selected_name(query)
        return RbacRequest(verb, group, rest[0], subresource, namespace, name, field_selector=selector)

    @classmethod
    async def _delete_body(cls, scope: Scope, receive: Receive, content_type: str) -> bytes:
        """A DELETE's body, DeleteOptions as JSON (YAML and protobuf were made JSON above):
        a body of another type is 415, as upstream negotiates a decoder for one that is not empty."""
        body = await cls._body(scope, receive)
        if body.strip() and content_type not in ("", "application/json"):
            raise ApiError.unsupported_media_type(ACCEPTED_BODIES)
        return body

    @staticmethod
    def _delete_options(query: dict[str, str], body: bytes) -> dict[str, Any]:
        """The request's DeleteOptions; a dry run asked for in them makes this request one."""
        options = delete_options(query, body)
        if options["dryRun"]:
            DRY_RUN.set(True)
        return options

    # -- discovery ---------------------------------------------------------------
    def _api_versions(self) -> dict[str, Any]:
        return {"kind": "APIVersions", "versions": ["v1"],
                "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": self._server_address}]}

    def _group(self, group: str) -> dict[str, Any] | None:
        versions = self.registry.groups().get(group)
        if not versions or not group:
            return None
        return _api_group(group, version_order(group, versions))

    def _group_list(self) -> dict[str, Any]:
        groups = [_api_group(group, versions) for group, versions in group_list_order(self.registry.groups())]
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}

    def _resource_list(self, group: str, version: str) -> dict[str, Any]:
        resources: list[dict[str, Any]] = []
        for t in self.registry.in_group_version(group, version):
            r: dict[str, Any] = {"name": t.plural, "singularName": t.singular_name, "namespaced": t.namespaced,
                                 "kind": t.kind, "verbs": list(t.verbs)}
            if t.short_names:
                r["shortNames"] = list(t.short_names)
            if t.categories:
                r["categories"] = list(t.categories)
            svh = storage_version_hash(t)
            if svh:
                r["storageVersionHash"] = svh
            resources.append(r)
            for sub in t.subresources:
                resources.append({"name": f"{t.plural}/{sub}", "singularName": "", "namespaced": t.namespaced,
                                  "kind": t.kind, "verbs": ["get", "patch", "update"],
                                  **subresource_kind(t, sub)})
        gv = f"{group}/{version}" if group else version
        return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}

    # -- verbs ---------------------------------------------------------------------
    def _parse(self, rtype: ResourceType, body: bytes, name: str | None = None) -> dict[str, Any]:
        """The request's object; ``name``: the URL's, which an update's body must carry
        (upstream's ``checkName``, after decoding and before any validation)."""
        obj, body = _decoded(rtype, body)
        check_type_meta(self.registry, rtype, obj, body)
        # the keys set here were not in the body: the duplicate-key count must not see them
        added = ("kind" not in obj) + ("apiVersion" not in obj) + (obj.get("metadata") is None)
        obj["kind"], obj["apiVersion"] = rtype.kind, rtype.api_version
        meta = obj.get("metadata")
        if meta is None:
            meta = obj["metadata"] = {}
        if not isinstance(meta, dict):
            raise ApiError.bad_request("metadata must be an object")
        return check_object(rtype, obj, body, added_keys=added, name=name)

    def _subresource_body(self, body_type: ResourceType, body: bytes, also: tuple[str, ...] = (),
                          name: str | None = None) -> dict[str, Any]:
        """The body of a subresource write handled on its own (a Scale, an Eviction, a
        TokenRequest), decoded as upstream's create and update handlers decode it into
        ``body_type``: of another kind, a value of another type or, under Strict, an unknown
        field is their 400 (unknown fields otherwise dropped, with a warning under Warn);
        ``name``: an update's URL name, which the body must carry (``checkName``)."""
        obj, body = _decoded(body_type, body)
        check_type_meta(self.registry, body_type, obj, body, also=also)
        return check_object(body_type, obj, body, name=name)

    def _check_namespace(self, rtype: ResourceType, namespace: str | None, meta: dict[str, Any]) -> None:
        if not rtype.namespaced:
            meta.pop("namespace", None)
            return
        if meta.get("namespace") not in (None, "", namespace):
            raise ApiError.bad_request("the namespace of the provided object does not match the namespace "
                                       "sent on the request")
        meta["namespace"] = namespace

    def _check_patched_identity(self, rtype: ResourceType, namespace: str | None, name: str,
                                meta: dict[str, Any], old_meta: dict[str, Any]) -> None:
        """A patch may not move, rename or re-identify its object: another namespace or
        name is 400 (upstream's patch handler checks the patched object as a PUT's body),
        another ``uid`` 422 (immutable, as ``ValidateObjectMetaUpdate``)."""
        self._check_namespace(rtype, namespace, meta)
        if meta.get("name") != name:
            raise ApiError.name_mismatch(meta.get("name"), name)
        uid = meta.get("uid")
        if uid and uid != old_meta.get("uid"):
            raise ApiError.invalid(rtype, name, [{"reason": "FieldValueInvalid", "field": "metadata.uid",
                                                  "message": f'Invalid value: "{uid}": field is immutable'}])

    async def _create(self, rtype: ResourceType, namespace: str | None, body: bytes,
                      manager: str | None = None, write: ServiceWrite | None = None,
                      url_name: str = "") -> dict[str, Any]:
        """``manager`` is recorded in managedFields; None: the body's managedFields are final (apply).
        ``write``: a Service's allocations begun by the caller (an apply's defaults picked).
        ``url_name``: the name the request's URL gives (an apply's; a POST's gives none)."""
        if rtype.namespaced and namespace is None:
            raise ApiError.method_not_allowed()
        obj = self._parse(rtype, body)
        meta = obj["metadata"]
        self._check_namespace(rtype, namespace, meta)
        name = meta.get("name") or ""
        generate = meta.get("generateName") or ""
        if not name and not generate:
            raise ApiError.invalid(rtype, "", [{"reason": "FieldValueRequired", "field": "metadata.name",
                                                "message": "name or generateName is required"}])
        ns = await self._open_namespace(rtype, namespace, name or generate)
        if ns is not None and rtype.group == "resource.k8s.io" and rtype.plural in _DEVICE_REQUESTS:
            causes = _admin_access_causes(rtype.plural, obj, ns)
            if causes:
                raise ApiError.invalid(rtype, name or generate, causes)
        generated = ""
        if name:
            causes = validate_name(rtype.plural if rtype.custom is None else "", name)
            if causes:
                raise ApiError.invalid(rtype, name, causes)
        else:  # upstream generates the name, then validates the prefix (a trailing dash allowed) and the name
            generated = _generated_name(rtype, generate)
            causes = _generate_name_causes(rtype.plural if rtype.custom is None else "", generate, generated)
            if causes:
                raise ApiError.invalid(rtype, generated, causes)
        if CONVERSION.get() is EVENTS_V1:
            causes = validate_events_v1(obj)
            if causes:
                raise ApiError.invalid(rtype, name or generate, causes)
        if write is None:
            write = self._allocating(rtype, None)
        if rtype.custom is None:
            default(rtype.plural, obj)
        # (selfLink: never stored, as upstream; a deletion's timestamp and grace period both
        # cleared, as BeforeCreate clears them: a live object with a grace period was stored)
        for key in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds", "selfLink"):
            meta.pop(key, None)
        if "status" in rtype.subresources and rtype.custom is not None:
            # dropped, as upstream's strategy drops it, before the pruning below: a schema
            # without a status would have it reported as an unknown field (Strict: a 400)
            obj.pop("status", None)
        elif "status" in rtype.subresources and (rtype.group, rtype.plural) not in STATUS_KEPT_AT_CREATE:
            # the status is the system's to write, through /status (but see STATUS_KEPT_AT_CREATE)
            obj["status"] = _initial_status(rtype.plural)
        if rtype is self._namespaces:  # the namespace controller empties it before it goes
            spec = obj.setdefault("spec", {})
            if "kubernetes" not in spec.setdefault("finalizers", []):
                spec["finalizers"].append("kubernetes")
        if rtype.custom is not None:
            self.crds.prepare_resource(rtype, obj)
        if manager is not None:
            managedfields.record_write(rtype, None, obj, manager)
        meta["uid"] = new_uid()
        meta["creationTimestamp"] = _now()
        if keeps_generation(rtype):
            meta["generation"] = 1
        else:  # the strategy leaves it: what the client sent stays, as upstream's BeforeCreate
            generation = meta.get("generation")
            if isinstance(generation, int) and not isinstance(generation, bool) and generation < 0:
                raise ApiError.invalid(rtype, meta.get("name") or meta.get("generateName") or "", [{
                    "reason": "FieldValueInvalid", "field": "metadata.generation",
                    "message": f"Invalid value: {generation}: must be greater than or equal to 0"}])
            if not isinstance(generation, int) or isinstance(generation, bool) or not generation:
                meta.pop("generation", None)  # (0 is Go's zero value: never serialised)
        built_in = functools.partial(self._built_in_create_admission, rtype, namespace, obj)
        await built_in()
        mutated = await self._mutating_admission(rtype, namespace, meta.get("name") or "", "CREATE", obj, None, None,
                                                 generated_name=not name, built_in=built_in)
        if mutated:  # (by the last mutating admission)
            meta = obj["metadata"]
        if rtype is self._pods and isinstance(obj.get("spec"), dict) and isinstance(obj.get("status"), dict):
            obj["status"]["qosClass"] = qos_class(obj["spec"])  # once admission set the resources (upstream)
            if obj["spec"].get("schedulingGates"):  # the pod strategy's applySchedulingGatedCondition
                obj["status"]["conditions"] = [{
                    "type": "PodScheduled", "status": "False", "lastProbeTime": None,
                    "lastTransitionTime": _now(), "reason": "SchedulingGated",
                    "message": "Scheduling is blocked due to non-empty scheduling gates"}]
            for warning in apparmor_version_skew(obj):  # applyAppArmorVersionSkew, before validation
                add_warning(warning)  # (warned here, before the strategy's own warnings, as upstream)
        if self.authorizer is not None and rtype.group == RBAC_GROUP:  # (after mutation, before validation)
            await self._rbac_escalation(rtype, namespace, url_name, obj, None)
        self._admit(rtype, obj, None, None)
        await self._authorize_params(rtype, obj, None)
        if self._limit_ranger is not None:  # validating admission, in upstream's order: LimitRanger's bounds,
            await self._limit_ranger.validate(rtype, namespace, obj)
        await self._pod_security(rtype, namespace, name or generated, obj, None, None, ns)  # PodSecurity...
        if rtype is self._priority_classes:
            await admit_priority_class(obj, None, self._default_priority_class)
        if rtype is self._trust_bundles:  # ClusterTrustBundleAttest
            await check_attest(self.authorizer, REQUEST_USER.get(), rtype, obj, None)
        if write is not None:
            await self._reserve(write, rtype, namespace, name or generated, obj, None)
        requested = meta.get("name") or ""  # the request's name (empty for generateName), as admission's attributes
        if not requested:  # validating admission sees the name generated (upstream's BeforeCreate comes first):
            meta["name"] = generated  # a quota's 403 names the pod a ReplicaSet's FailedCreate event shows
        try:
            if self._policies is not None:  # validating admission: policies, then the quota, as upstream's order
                await self._policies.check(rtype, namespace, requested, "CREATE", obj, None, None,
                                           REQUEST_USER.get())
            if self.webhooks is not None and self.webhooks.active(mutating=False):
                await self.webhooks.validate(rtype, namespace, requested, "CREATE", obj, None, None)
            if self._quota is not None:
                await self._quota.charge(rtype, namespace, obj)
            protection = _PROTECTION_FINALIZERS.get((rtype.group, rtype.plural)) if self.storage_protected else None
            if protection is not None:
                finalizers = meta.setdefault("finalizers", [])
                if protection not in finalizers:
                    finalizers.append(protection)
            to_stored_form(rtype, obj, None, mutated)  # (admission saw rules: [], the storage keeps null)
            obj = _metadata_first(obj)
            for attempt in range(8):
                if not name:
                    meta["name"] = generated if attempt == 0 else _generated_name(rtype, generate)
                store_key = rtype.key(namespace, meta["name"])
                stored = encode(obj, rtype.custom is not None)
                try:
                    rev = await self.store.create(store_key, stored)
                except store.KeyExists as e:
                    if name or generated == generate:  # (a name not generated at random: it stays taken)
                        raise ApiError.already_exists(rtype, meta["name"]) from e
                    continue
                written = self._written(rtype, store_key, obj, stored, rev, ())
                if rtype is self._namespaces:
                    await self._default_service_account(meta["name"])
                if rtype is self.crds.type:
                    self.crds.written(meta["name"], obj, rev)
                await self._settled(write, namespace, meta["name"], None, obj)
                return written
            raise ApiError(409, "AlreadyExists", "could not generate a unique name; try again")
        except BaseException:
            await self._aborted(write)
            raise

    async def _replace(self, rtype: ResourceType, key: bytes, name: str, obj: dict[str, Any],
                       expected: int, old: dict[str, Any] | None = None) -> Written:
        """Store ``obj`` over the version at ``expected`` (``store.Conflict`` and ``store.NotFound``
        pass through: each verb answers them its own way), serialised once as a create is.
        ``old``: the version replaced, when the write may change its owner references (an
        update, a patch, an apply)."""
        obj = _metadata_first(obj)
        stored = encode(obj, rtype.custom is not None)
        rev = await self.store.update(key, stored, expected)
        written = self._written(rtype, key, obj, stored, rev,
                                None if old is None else (old.get("metadata") or {}).get("ownerReferences") or ())
        if rtype is self.crds.type:
            self.crds.written(name, obj, rev)
        return written

    def _written(self, rtype: ResourceType, key: bytes, obj: dict[str, Any], stored: bytes,
                 revision: int, owners_before: list[Any] | tuple[()] | None = None) -> Written:
        """``obj``, just stored as ``stored`` (metadata first) at ``revision``: the response,
        whose JSON is the stored bytes with the resourceVersion spliced in, and which the
        watch cache takes for this version too (serialised once, DESIGN.md). A dry-run
        create's ``revision`` is 0: it has no version, and is served without one.
        ``owners_before``: the owner references of the version replaced (``()`` for a create;
        None for a write that does not change them), whose new owners the garbage collector
        looks up."""
        meta = obj["metadata"]
        if not revision:
            meta.pop("resourceVersion", None)
            return Written(obj, stored)
        meta["resourceVersion"] = str(revision)
        if self.gc is not None and "ownerReferences" in meta:  # where owners of each kind have dependents
            self.gc.noted(rtype, meta.get("namespace"), meta["ownerReferences"], revision, owners_before)
        raw = with_resource_version(stored, revision)
        if rtype.custom is None and not DRY_RUN.get() and CONVERSION.get() is None:  # others are presented on read
            self.reads.prime(rtype, key, revision, raw, obj)
        return Written(obj, raw)

    async def cached_or_stored(self, rtype: ResourceType, namespace: str | None, name: str) -> bytes | None:
        """An object's JSON for admission: from the watch cache as it is, and on a miss from
        the store (one just written, perhaps by another process)."""
        raw = await self.reads.get(rtype, namespace, name, "0")
        if raw is None:
            kv = await self.store.get(rtype.key(namespace, name))
            raw = kv.value if kv is not None else None
        return raw

    async def _open_namespace(self, rtype: ResourceType, namespace: str | None, name: str) -> bytes | None:
        """Upstream's NamespaceLifecycle for a CREATE in ``namespace``, of an object or through a
        subresource (an Eviction, a TokenRequest, a Binding: every create but an access review's):
        the namespace must exist (404) and not be terminating (403, with the cause by which
        controllers know not to record a FailedCreate event, and ``kubectl drain`` that a
        terminating pod's eviction will not be taken, only waited for). ``rtype`` and ``name``:
        what the 403 names (a subresource's parent). The namespace's JSON (None: not checked)."""
        if not rtype.namespaced or self._namespaces is None:
            return None
        ns = await self._namespace(namespace or "")
        if ns is None:
            raise ApiError.not_found(self._namespaces, namespace or "")
        if b'"deletionTimestamp"' in ns and orjson.loads(ns)["metadata"].get("deletionTimestamp"):
            raise ApiError(403, "Forbidden", f'{ApiError._what(rtype)} "{name}" is forbidden: '
                           f"unable to create new content in namespace {namespace} because it is being "
                           "terminated", ApiError._details(rtype, name) | {"causes": [{
                               "reason": "NamespaceTerminating",
                               "message": f"namespace {namespace} is being terminated",
                               "field": "metadata.namespace"}]})
        return ns

    async def _namespace(self, name: str) -> bytes | None:
        """The namespace's JSON, for admission (upstream's NamespaceLifecycle): from the
        watch cache as it is, and, on a miss, from the store (it may be a moment old)."""
        assert self._namespaces is not None
        generation = self.reads.generation(self._namespaces)
        memo = self._namespace_memo
        if generation is not None and memo[0] == generation and name in memo[1]:
            return memo[1][name]  # the cache's namespaces have not changed since: what it would answer
        raw = await self.reads.get(self._namespaces, None, name, "0")
        if raw is None:
            kv = await self.store.get(self._namespaces.key(None, name))
            raw = kv.value if kv is not None else None
        elif generation is not None and generation == self.reads.generation(self._namespaces):
            # the cache's answer (a miss is not kept: the namespace may be on its way)
            if memo[0] != generation:
                memo = self._namespace_memo = (generation, {})
            memo[1][name] = raw
        return raw

    async def _default_service_account(self, namespace: str) -> None:
        """The ``default`` ServiceAccount every namespace has (the service account controller)."""
        sa = self.registry.get("", "v1", "serviceaccounts")
        if sa is None:
            return
        obj = {"apiVersion": "v1", "kind": "ServiceAccount",
               "metadata": {"name": "default", "namespace": namespace, "uid": new_uid(),
                            "creationTimestamp": _now()}}
        with contextlib.suppress(store.KeyExists):
            await self.store.create(sa.key(namespace, "default"), orjson.dumps(obj))

    async def _get(self, rtype: ResourceType, namespace: str | None, name: str,
                   query: dict[str, str] | None = None) -> bytes:
        raw = await self.reads.get(rtype, namespace, name, resource_version_param(query or {}))
        if raw is None:
            raise ApiError.not_found(rtype, name)
        return raw

    async def _list(self, rtype: ResourceType, namespace: str | None, query: dict[str, str]) -> Listed:
        return await self.reads.list(rtype, namespace, list_options(rtype, namespace, query))

    async def _webhook_converted(self, rtype: ResourceType, raws: list[bytes], listing: bool = False) -> list[bytes]:
        """Cached (stored) objects of a CRD that converts by webhook, in ``rtype``'s version
        (api/crdconversion.py); as they are when conversion webhooks are off."""
        return raws if self.conversions is None else await self.conversions.served(rtype, raws, listing)

    async def served(self, rtype: ResourceType, raws: list[bytes]) -> list[bytes]:
        """Cached (stored) objects as ``rtype``'s version serves them: a custom resource's other
        versions converted (by its webhook too), a type stored as another's converted."""
        if rtype.custom is not None and rtype.custom.conversion is not None:
            raws = await self._webhook_converted(rtype, raws, True)
        return [_presented(rtype, raw) for raw in raws] if _converted(rtype) else raws

    async def _current(self, rtype: ResourceType, key: bytes, fresh: bool) -> tuple[KeyValue | None, bool]:
        """The version a write starts from, and whether it came from the watch cache.

        Not ``fresh``: the cache's newest version when it has one (upstream's
        ``cachedExistingObject``), sparing the store a read; it may be stale, so the
        write expects its revision and the caller, on conflict, asks again ``fresh``,
        from the store. Types served converted read the store: their cache holds
        another version's JSON."""
        if not fresh and not _converted(rtype) and not DRY_RUN.get():
            hit = self.reads.latest(rtype, key)
            if hit is not None:
                raw, revision = hit
                return KeyValue(key, without_resource_version(raw, revision), 0, revision, 0), True
        return await self.store.get(key), False

    async def _update(self, rtype: ResourceType, namespace: str | None, name: str, body: bytes,
                      subresource: str | None = None, manager: str | None = None) -> dict[str, Any]:
        parsed = self._parse(rtype, body, name)
        meta = parsed["metadata"]
        if namespace and meta.get("namespace") not in (None, "", namespace):  # the update handler's checkName
            raise ApiError.namespace_mismatch(meta["namespace"], namespace)
        self._check_namespace(rtype, namespace, meta)
        expected = _revision_param(meta.pop("resourceVersion", None))
        uid = meta.get("uid")  # a precondition, as upstream's update takes it from the object
        key = rtype.key(namespace, name)
        pristine = orjson.dumps(parsed)  # each attempt starts from the request's object
        for attempt in range(WRITE_ATTEMPTS):  # an update without a resourceVersion is retried, as upstream
            current, cached = await self._current(rtype, key, fresh=attempt > 0)
            if current is None:
                raise ApiError.not_found(rtype, name)
            try:
                old = orjson.loads(current.value)
                if uid and uid != old["metadata"].get("uid"):
                    if cached:
                        continue  # the cache may still hold an object deleted and created again since
                    raise _precondition_failed(rtype, key, name, "UID", uid, old["metadata"].get("uid"))
                if expected and expected != current.mod_revision:
                    if cached:
                        continue  # perhaps only the cache is behind: ask the store
                    break
                obj = parsed if attempt == 0 else orjson.loads(pristine)
                if rtype.custom is not None:  # decoded (pruned, defaulted) before the strategy compares it,
                    self.crds.prepare_resource(rtype, obj)  # as upstream: a default left out is no new generation
                obj = _split_status(rtype, subresource, old, obj)
                if manager is not None:
                    managedfields.record_write(rtype, old, obj, manager, subresource)
                write, mutated = await self._update_admission(rtype, namespace, name, obj, old, subresource)
                try:
                    await self._validating_update_admission(rtype, namespace, name, obj, old, subresource)
                    to_stored_form(rtype, obj, old, mutated)  # (before the comparison: upstream compares the bytes)
                    if self._deletes(rtype, obj):
                        await self._aborted(write)  # (deleted: _finish releases what it held)
                        return await self._finish(rtype, key, name, obj, current.mod_revision)
                    # an update that changes nothing writes nothing, as upstream (revert_times compares)
                    if managedfields.revert_times(obj, old, equal):
                        await self._aborted(write)
                        if cached:
                            continue  # compared with the cache's version, which may be behind: with the store's
                        return _object(current.value, current.mod_revision)
                    written = await self._replace(rtype, key, name, obj, current.mod_revision, old)
                except store.Conflict:
                    await self._aborted(write)
                    if expected and not cached:
                        break
                    continue
                except store.NotFound as e:
                    await self._aborted(write)
                    raise ApiError.not_found(rtype, name) from e
                except BaseException:
                    await self._aborted(write)
                    raise
            except ApiError:
                if cached:  # refused on the cache's version, which may be behind: again from the store's,
                    continue  # as upstream's GuaranteedUpdate retries a failed update of a cached object
                raise
            await self._settled(write, namespace, name, old, obj)  # (written: never tried again)
            return written
        raise ApiError.conflict(rtype, name, "the object has been modified; please apply your changes to "
                                "the latest version and try again")

    async def _patch(self, rtype: ResourceType, namespace: str | None, name: str, content_type: str,
                     body: bytes, subresource: str | None = None, manager: str | None = None) -> dict[str, Any]:
        if content_type not in PATCH_TYPES:
            raise ApiError.unsupported_media_type(accepted_patch_types(rtype))
        patch_schema = _strategic_schema(rtype) if content_type == STRATEGIC else None
        try:
            patch = orjson.loads(body)
        except orjson.JSONDecodeError:
            patch = decode_patch(content_type, body)
            body = orjson.dumps(patch)  # (what is read from the body later reads what Go read)
        if rtype.custom is not None and may_hold_uint64s(body):
            uint64s_written_back(patch)  # (2^63: a float64 to Go's decoder into unstructured)
        json_patch = content_type == "application/json-patch+json"
        if json_patch:
            patch = _json_patch_operations(patch)
        if patch_schema is not None:
            patch = _strategic_patch_map(patch)
        key = rtype.key(namespace, name)
        for attempt in range(WRITE_ATTEMPTS):  # retry on conflict, as kube-apiserver does for patches
            # a JSON patch may test the resourceVersion: it starts from the store's
            current, cached = await self._current(rtype, key, fresh=attempt > 0 or json_patch)
            if current is None:
                raise ApiError.not_found(rtype, name)
            try:
                # the patch sees the resourceVersion (kubectl's JSON patches test or replace it), as upstream
                old = _object(current.value, current.mod_revision)
                # obj shares with old what the patch leaves alone (a status patch's spec): the
                # checks below skip those parts (identity), and what changes obj in place
                # replaces a part rather than editing it, so that old stays the version stored
                if patch_schema is not None:
                    obj = _strategic_merge_patch(old, patch, patch_schema)
                elif json_patch:
                    obj = _json_patch(old, patch)
                else:
                    check_merge_patch(rtype, patch)
                    obj = merge_patch(old, patch, nulls=b"null" in body)  # (no null to prune: most patches)
                if not isinstance(obj, dict):
                    raise ApiError.bad_request("the patch must leave an object")
                if not isinstance(obj.get("metadata"), dict):
                    obj["metadata"] = {}
                elif obj["metadata"] is old["metadata"]:
                    obj["metadata"] = dict(old["metadata"])  # changed below
                wanted = obj["metadata"].get("resourceVersion")
                if wanted and wanted != str(current.mod_revision):  # a resourceVersion in the patch is a precondition
                    if cached:
                        continue  # perhaps only the cache is behind: ask the store
                    raise ApiError.conflict(rtype, name, "the object has been modified; please apply your changes to "
                                            "the latest version and try again")
                obj = check_object(rtype, obj, merge_patch=None if json_patch else body, stored=old,
                                   strategic=patch if patch_schema is not None else None,
                                   json_patch=(body, patch) if json_patch else None)
                self._check_patched_identity(rtype, namespace, name, obj["metadata"], old["metadata"])
                if patch_schema is None:  # (a strategic patch's result is typed through the unstructured converter,
                    check_patched_type_meta(self.registry, rtype, obj)  # which keeps any kind: the URL's is written)
                if rtype.custom is not None:  # the patched object is decoded (pruned, defaulted) before the
                    self.crds.prepare_resource(rtype, obj)  # strategy compares it with the old one, as upstream
                obj = _split_status(rtype, subresource, old, obj)
                if manager is not None:
                    managedfields.record_write(rtype, old, obj, manager, subresource)
                meta = obj["metadata"]
                meta.pop("resourceVersion", None)  # checked above: stored objects carry none
                meta["name"] = name
                if rtype.namespaced:
                    meta["namespace"] = namespace
                obj["kind"], obj["apiVersion"] = rtype.kind, rtype.api_version
                write, mutated = await self._update_admission(rtype, namespace, name, obj, old, subresource)
                try:
                    await self._validating_update_admission(rtype, namespace, name, obj, old, subresource)
                    to_stored_form(rtype, obj, old, mutated)  # (before the comparison: upstream compares the bytes)
                    if self._deletes(rtype, obj):
                        await self._aborted(write)  # (deleted: _finish releases what it held)
                        try:
                            return await self._finish(rtype, key, name, obj, current.mod_revision)
                        except ApiError as e:
                            if e.code != 409:
                                raise
                            continue  # another write came first (a kubelet's status): patch that version
                    # a patch that changes nothing writes nothing, as upstream (revert_times compares)
                    if managedfields.revert_times(obj, old, _unchanged):
                        await self._aborted(write)
                        if cached:
                            continue  # patched the cache's version, which may be behind: the store's
                        return old
                    written = await self._replace(rtype, key, name, obj, current.mod_revision, old)
                except store.Conflict:
                    await self._aborted(write)
                    continue
                except BaseException:
                    await self._aborted(write)
                    raise
            except ApiError:
                if cached:  # refused on the cache's version, which may be behind: again from the store's,
                    continue  # as upstream's GuaranteedUpdate retries a failed update of a cached object
                raise
            await self._settled(write, namespace, name, old, obj)  # (written: never tried again)
            return written
        raise ApiError.conflict(rtype, name, "too many concurrent writers; try again")

    async def _apply(self, rtype: ResourceType, namespace: str | None, name: str, body: bytes,
                     subresource: str | None, options: ApplyOptions) -> tuple[dict[str, Any], bool]:
        """Server-side apply: the object and whether it was created. The merge and the
        ownership are ``managedfields.apply``; a ``resourceVersion`` in the
        configuration is a precondition, as upstream."""
        config = parse_config(rtype, namespace, name, body)
        applied = dict(config)  # as sent, for the last-applied annotation
        config["metadata"] = dict(config["metadata"])
        precondition = config["metadata"].pop("resourceVersion", None)
        key = rtype.key(namespace, name)
        for _attempt in range(WRITE_ATTEMPTS):
            current = await self.store.get(key)
            if precondition and (current is None or str(current.mod_revision) != str(precondition)):
                raise ApiError.conflict(rtype, name, "the object has been modified; please apply your changes to "
                                        "the latest version and try again")
            if current is None and subresource is not None:
                raise ApiError.not_found(rtype, name)
            old: dict[str, Any] | None = orjson.loads(current.value) if current is not None else None
            uid = config["metadata"].get("uid")
            if old is not None and uid and uid != old["metadata"].get("uid"):  # (merged in, then immutable)
                raise ApiError.invalid(rtype, name, [{"reason": "FieldValueInvalid", "field": "metadata.uid",
                                                      "message": f'Invalid value: "{uid}": field is immutable'}])
            if old is None:
                # upstream's patcher applies a create to an empty object, then checks what came out
                # (applyPatch): a uid is a conflict, and without a name of its own the object has
                # none (checkName), whatever the URL says
                if uid:
                    raise ApiError.conflict(rtype, name, f"uid mismatch: the provided object specified uid {uid}, "
                                            "and no existing object was found")
                if not config["metadata"].get("name"):
                    raise ApiError.name_mismatch(None, name)
            write = self._allocating(rtype, old)  # (the apply's defaults allocate)
            try:
                obj = managedfields.apply(rtype, old, config, options.manager, subresource, options.force,
                                          apply_defaults(rtype))
            except managedfields.Conflicts as e:
                raise conflict_error(e) from e
            except managedfields.ShapeError as e:
                raise ApiError.bad_request(f"failed to create typed patch object ({object_gvknn(rtype, applied)}): "
                                           f"{e}") from e
            sync_last_applied(options.manager, applied, obj)
            obj["metadata"]["name"] = name
            # its type's, whatever the merge pruned: a client may write managedFields that give the
            # manager a root ``kind`` its next apply no longer names (upstream decodes into the type)
            obj["kind"], obj["apiVersion"] = rtype.kind, rtype.api_version
            if current is None or old is None:
                if (rtype.group, rtype.plural) in STATUS_KEPT_AT_CREATE:
                    obj.pop("status", None)  # (a reset field: an apply never writes it)
                try:
                    return await self._create(rtype, namespace, orjson.dumps(obj), write=write, url_name=name), True
                except ApiError as e:
                    if e.reason == "AlreadyExists":
                        continue  # created meanwhile: apply to that
                    raise
            fields = obj["metadata"].get("managedFields")
            if rtype.custom is not None and rtype.custom.schema is not None:
                # upstream's field manager defaults the object its apply made before the strategy compares
                # it: an atomic list applied without its items' defaults is no new generation (and, but
                # for the applier's time, which revert_times puts back, no change at all)
                schema_defaults(rtype.custom.schema, obj)
            obj = _split_status(rtype, subresource, old, obj, applied=True)
            fill_zero_values(rtype, obj, old)  # as decoding the merge into the Go type would
            meta = obj["metadata"]
            if fields is None:
                meta.pop("managedFields", None)
            else:
                meta["managedFields"] = fields
            if rtype.namespaced:
                meta["namespace"] = namespace
            mutated = await self._mutating_update_admission(rtype, namespace, name, obj, old, subresource)
            if self.authorizer is not None and rtype.group == RBAC_GROUP:
                await self._rbac_escalation(rtype, namespace, name, obj, old)
            self._admit(rtype, obj, old, subresource)
            if write is not None:
                await self._reserve(write, rtype, namespace, name, obj, old)
            try:
                await self._validating_update_admission(rtype, namespace, name, obj, old, subresource)
                to_stored_form(rtype, obj, old, mutated)
                # nothing changed, not even a time: no write, no new resourceVersion (revert_times compares)
                if managedfields.revert_times(obj, old, equal):
                    await self._aborted(write)
                    return _object(current.value, current.mod_revision), False
                if self._deletes(rtype, obj):
                    await self._aborted(write)  # (deleted: _finish releases what it held)
                    return await self._finish(rtype, key, name, obj, current.mod_revision), False
                written = await self._replace(rtype, key, name, obj, current.mod_revision, old)
            except store.Conflict:
                await self._aborted(write)
                continue
            except BaseException:
                await self._aborted(write)
                raise
            await self._settled(write, namespace, name, old, obj)
            return written, False
        raise ApiError.conflict(rtype, name, "too many concurrent writers; try again")

    async def _delete(self, rtype: ResourceType, namespace: str | None, name: str,
                      options: dict[str, Any] | None = None, admit: bool = True) -> dict[str, Any]:
        """Delete now, or, while the object has finalizers, mark it (``deletionTimestamp``)
        and let whoever owns the finalizers remove them; the last removal deletes it
        (see ``_deletes``, ``_finish``). Namespaces are emptied first (``_terminate``).
        ``admit`` False: no DELETE admission (an eviction's, which deletes through the
        store, as upstream's EvictionREST, once the Eviction itself was admitted)."""
        key = rtype.key(namespace, name)
        if rtype is self._namespaces and name in IMMORTAL_NAMESPACES:  # the NamespaceLifecycle admission
            raise ApiError(403, "Forbidden", f'namespaces "{name}" is forbidden: this namespace may not be deleted',
                           {"name": name, "kind": "namespaces"})
        for attempt in range(WRITE_ATTEMPTS):
            # the cache's newest version first (upstream's cachedExistingObject): every write
            # below expects its revision, so a stale one is a conflict and a fresh read
            current, cached = await self._current(rtype, key, fresh=attempt > 0)
            if current is None:
                raise ApiError.not_found(rtype, name)
            obj: dict[str, Any] = orjson.loads(current.value)
            meta = obj.setdefault("metadata", {})
            pre = (options or {}).get("preconditions") or {}
            if cached and (pre.get("uid") not in (None, meta.get("uid"))
                           or pre.get("resourceVersion") not in (None, str(current.mod_revision))):
                continue  # judged on the store's version, not a possibly stale one
            _check_preconditions(rtype, name, pre, meta, current.mod_revision)
            webhooks = self.webhooks
            if admit and (self._policies is not None or webhooks is not None) and not meta.get("deletionTimestamp"):
                try:
                    if webhooks is not None and webhooks.active(mutating=True):  # (a delete's may not patch)
                        await webhooks.mutate(rtype, namespace, name, "DELETE", None, obj, None, options)
                    if self._policies is not None:
                        await self._policies.check(rtype, namespace, name, "DELETE", None, obj, None,
                                                   REQUEST_USER.get())
                    if webhooks is not None and webhooks.active(mutating=False):
                        await webhooks.validate(rtype, namespace, name, "DELETE", None, obj, None, options)
                except ApiError:
                    if cached:
                        continue  # as upstream's conditional delete: judged again on the store's version
                    raise
            if rtype is self._pods:
                graceful = _graceful_pod_delete(obj, options or {})
                if graceful is not None:
                    if graceful:
                        try:
                            rev = await self.store.update(key, orjson.dumps(obj), current.mod_revision)
                        except (store.Conflict, store.NotFound):  # (gone meanwhile: the next read says so)
                            continue
                        meta["resourceVersion"] = str(rev)
                        return obj
                    if cached:
                        continue  # answer nothing from a version that may be stale: read the store's
                    return _object(current.value, current.mod_revision)  # its grace period is running
            propagated = None  # Orphan and Foreground, carried out by the garbage collector
            if (rtype.group, rtype.plural) in self.garbage_collected and not meta.get("deletionTimestamp"):
                # (for the workload kinds, by their controllers: controllers/ownership.py)
                finalizer = _propagation_finalizer(rtype, options or {})
                if finalizer is not None and finalizer not in (meta.get("finalizers") or ()):
                    meta["finalizers"] = [*(meta.get("finalizers") or ()), finalizer]
            elif options and self.gc is not None and not meta.get("deletionTimestamp") \
                    and rtype is not self._namespaces and rtype is not self.crds.type:  # (emptied as they go)
                propagated = _propagation_finalizer(rtype, options)  # (api/dependents.py)
                if propagated is not None and propagated not in (meta.get("finalizers") or ()):
                    meta["finalizers"] = [*(meta.get("finalizers") or ()), propagated]
            terminating = rtype is self._namespaces
            definition = rtype is self.crds.type  # its custom resources go first
            if meta.get("finalizers") or terminating or definition:
                if meta.get("deletionTimestamp"):
                    if cached:
                        continue
                    return _object(current.value, current.mod_revision)  # already being deleted
                meta["deletionTimestamp"] = _now()
                meta["deletionGracePeriodSeconds"] = 0
                if not terminating and not definition:
                    # upstream's namespace and CRD storage mark them without BeforeDelete's bump
                    _bump_generation(meta)
                if terminating:
                    obj.setdefault("status", {})["phase"] = "Terminating"
                if definition:
                    crd_terminate(obj)
                try:
                    rev = await self.store.update(key, orjson.dumps(obj), current.mod_revision)
                except (store.Conflict, store.NotFound):
                    continue
                if terminating:
                    self._spawn(self._terminate(name))
                if definition:
                    self.crds.written(name, obj, rev)
                    self._spawn(remove_resources(self.crds, self.store, name, self._delete))
                if propagated is not None and self.gc is not None and not DRY_RUN.get():
                    self.gc.propagate(rtype, obj)
                meta["resourceVersion"] = str(rev)
                return obj
            try:
                rev = await self.store.delete(key, current.mod_revision)
            except (store.NotFound, store.Conflict):
                continue
            if self._allocates(rtype):
                await self.allocations.release(namespace or "", name, self.allocations.held(obj), None)
            if self.gc is not None and not DRY_RUN.get():
                self.gc.gone(rtype, obj, rev)
            return Gone(_object(current.value, rev))
        raise ApiError.conflict(rtype, name, "the object kept changing while being deleted; try again")

    def _deletes(self, rtype: ResourceType, obj: dict[str, Any]) -> bool:
        """An update, patch or apply, admitted and valid, that leaves a deleting object with no
        finalizer (``_finalized``) deletes it rather than writing it (``_finish``). Asked only
        after validating admission, as upstream's ``Store.Update`` asks ShouldDeleteDuringUpdate:
        a webhook or policy that refuses the update keeps the object and its finalizers, and a
        mutating one may put a finalizer back. (A namespace also waits for its spec's finalizers:
        ``_store_namespace``.)"""
        return _finalized(obj["metadata"]) and rtype is not self._namespaces

    async def _finish(self, rtype: ResourceType, key: bytes, name: str, obj: dict[str, Any],
                      expected: int) -> dict[str, Any]:
        """The last finalizer of a deleting object is gone: delete it. The answer is the written
        object, as upstream's ``deleteWithoutFinalizers`` returns the update's: at the revision
        it was written over (``expected``), its emptied collections left out as Go encodes
        them; the deletion's own revision is the DELETED event's, whose object is the last
        stored (finalizers and all)."""
        try:
            rev = await self.store.delete(key, expected)
        except store.Conflict as e:
            raise ApiError.conflict(rtype, name, "the object has been modified; please apply your changes to "
                                    "the latest version and try again") from e
        omit_empty(obj["metadata"])
        obj["metadata"]["resourceVersion"] = str(expected)
        if self._allocates(rtype):
            namespace = obj["metadata"].get("namespace") or ""
            await self.allocations.release(namespace, name, self.allocations.held(obj), None)
        if rtype is self.crds.type:
            self.crds.written(name, None, rev)
            await reconsider_names(self.crds, self.store, obj.get("spec", {}).get("group"))
        elif self.gc is not None and not DRY_RUN.get():
            self.gc.gone(rtype, obj, rev)
        return obj

    async def _priority_class(self, name: str) -> dict[str, Any] | None:
        """A PriorityClass, for Priority admission: from the watch cache as it is, and on
        a miss from the store (a class just written by another process)."""
        assert self._priority_classes is not None
        generation = self.reads.generation(self._priority_classes)
        memo = self._class_memo
        if generation is not None and memo[0] == generation and name in memo[1]:
            return memo[1][name]  # unchanged since last asked: every pod of a class asks
        raw = await self.cached_or_stored(self._priority_classes, None, name)
        pc: dict[str, Any] | None = orjson.loads(raw) if raw is not None else None
        if generation is not None and pc is not None:  # a miss is not kept: the class may be on its way
            if memo[0] != generation:
                memo = self._class_memo = (generation, {})
            memo[1][name] = pc
        return pc

    async def _default_priority_class(self) -> dict[str, Any] | None:
        """The PriorityClass with ``globalDefault`` (the lowest, should there be several, as upstream)."""
        assert self._priority_classes is not None
        generation = self.reads.generation(self._priority_classes)
        if generation is not None and self._default_class_memo[0] == generation:
            return self._default_class_memo[1]  # every pod create asks: list only when a class changed
        listed = await self._list(self._priority_classes, None, {"resourceVersion": "0"})
        found = [orjson.loads(raw) for raw in listed.items if b'"globalDefault":true' in raw]
        found = [pc for pc in found if pc.get("globalDefault") is True]
        default = min(found, key=lambda pc: int(pc.get("value") or 0)) if found else None
        if generation is not None:
            self._default_class_memo = (generation, default)
        return default

    async def _rbac_escalation(self, rtype: ResourceType, namespace: str | None, url_name: str,
                               obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        """RBAC's escalation check of a write of a Role, ClusterRole or binding (``old`` None: a
        create), where upstream's RBAC storage makes it: after mutating admission, before
        validation (api/rbacescalation.py). A request of ``system:masters`` costs a lookup; the
        server's own writes (no request user) are not checked."""
        user = REQUEST_USER.get()
        if user is None or MASTERS in user.groups or rtype.custom is not None:
            return
        assert self.authorizer is not None
        authorizer = self.authorizer
        resolver = authorizer.rbac if isinstance(authorizer, Authorizers) else \
            authorizer if isinstance(authorizer, Authorizer) else None
        await check_rbac_write(authorizer, resolver, user, rtype.plural, namespace or "", url_name, obj, old,
                               self._rbac_role)

    async def _rbac_role(self, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
        """A binding's Role or ClusterRole as the store holds it now (upstream's registry lookup)."""
        rtype = self.registry.get(RBAC_GROUP, "v1", plural)
        if rtype is None:
            return None
        kv = await self.store.get(rtype.key(namespace or None, name))
        return orjson.loads(kv.value) if kv is not None else None

    def _admit(self, rtype: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None,
               subresource: str | None) -> None:
        """Type-specific admission of a write (``old`` None: a create): CRDs get their
        defaults, validation and status; custom resources their CRD's schema; a pod's
        priority, set when it was created, stays (Priority admission on update)."""
        if rtype is self._pods and old is not None and subresource == "ephemeralcontainers":
            merged, causes = ephemeral_update(old, obj)
            if causes:
                raise ApiError.invalid(rtype, (old.get("metadata") or {}).get("name") or "", causes)
            obj["spec"] = merged["spec"]
            return
        if rtype is self._pods and old is not None and subresource == "resize":
            causes = resize_causes(old, obj)  # (the spec resized_spec made it, _split_status)
            if causes:
                raise ApiError.invalid(rtype, (old.get("metadata") or {}).get("name") or "", causes)
            return
        if rtype is self._pods and old is not None:
            spec, old_spec = obj.get("spec"), old.get("spec") or {}
            if isinstance(spec, dict):
                for field in ("priority", "preemptionPolicy"):
                    if spec.get(field) is None and old_spec.get(field) is not None:
                        spec[field] = old_spec[field]
        meta = obj.get("metadata")
        if isinstance(meta, dict) and (meta.get("labels") or meta.get("annotations") or meta.get("finalizers")
                                       or meta.get("ownerReferences")):
            causes = validate_metadata(meta, old.get("metadata") if old is not None else None)
            if causes:
                raise ApiError.invalid(rtype, meta.get("name") or "", causes)
        if self.node_restriction is not None and rtype.plural in _NODE_RESTRICTED and rtype.custom is None:
            user = REQUEST_USER.get()
            node = kubelet(user) if user is not None else None
            if node is not None:  # NodeRestriction (api/nodeauthz.py)
                self.node_restriction.admit(node, rtype.plural, subresource, obj, old)
        if rtype is self._csrs:
            if old is None:
                set_requestor(obj, REQUEST_USER.get())
            causes = prepare_csr(obj, old, subresource)
            if causes:
                raise ApiError.invalid(rtype, (obj.get("metadata") or {}).get("name") or "", causes)
            if old is None:  # validating admission, once valid: CertificateSubjectRestriction
                check_subject(rtype, obj)
        if rtype.custom is None:
            # a policy's type checking knows the custom resources' kinds served here
            served = POLICY_TYPES.set(self.registry) if rtype.plural == "validatingadmissionpolicies" else None
            try:
                causes = prepare(rtype.plural, obj, old, subresource or "")
            except BadData as e:
                raise ApiError.bad_request(str(e)) from e
            finally:
                if served is not None:
                    POLICY_TYPES.reset(served)
            if causes:
                raise ApiError.invalid(rtype, (obj.get("metadata") or {}).get("name") or "", causes)
            before = (old.get("metadata") or {}).get("generation") if old is not None else None
            if old is not None and isinstance(meta, dict) and meta.get("generation") != before \
                    and not _generation_moves(rtype, old, obj):
                # only the defaults an update left out differed: nothing that counts changed
                # (upstream compares what it decoded, defaulted); none before stays none
                if before is None:
                    meta.pop("generation", None)
                else:
                    meta["generation"] = before
            for warning in strategy_warnings(rtype.plural, obj, old, subresource):
                add_warning(warning)  # (after the generation is settled: a workload's update warns when it moved)
        if rtype is self.crds.type:
            self.crds.admit_definition(obj, old, subresource)
        elif rtype.custom is not None:
            self.crds.admit_resource(rtype, obj, old)

    async def _built_in_create_admission(self, rtype: ResourceType, namespace: str | None,
                                         obj: dict[str, Any]) -> None:
        """The built-in mutating admission of a create (``obj`` changed in place), before the
        policies and webhooks (``_mutating_admission``), which run it again in their second
        round as upstream's reinvoker runs the whole chain again: each step idempotent, as
        upstream's plugins are (a token mount, a taint, a default, a class already there kept;
        a priority or overhead already set checked against what it would set)."""
        # In upstream's plugin order (``AllOrderedPlugins``): LimitRanger, ServiceAccount,
        # TaintNodesByCondition, Priority, DefaultStorageClass, RuntimeClass, DefaultIngressClass,
        # PodTopologyLabels.
        # (Each writes fields of its own, so the order shows only in which refusal comes first.)
        if self._limit_ranger is not None:  # the defaults; the bounds in validating admission
            await self._limit_ranger.admit(rtype, namespace, obj)
        if rtype is self._pods and self._service_accounts is not None:  # the token volume
            await self._service_accounts.admit(namespace or "", obj)
        if rtype is self._nodes and self.taint_nodes_at_creation:  # TaintNodesByCondition
            admit_node(obj)
        if rtype is self._pods and self._priority_classes is not None:
            await admit_pod_priority(obj, self._priority_class, self._default_priority_class)
        if rtype is self._default_classes.claims:  # DefaultStorageClass (a claim's class is what its quota counts)
            await self._default_classes.admit(rtype, obj)
        if rtype is self._pods and self._runtime_classes is not None:  # the overhead
            await self._runtime_classes.admit(obj)
        if rtype is self._default_classes.ingresses:  # DefaultIngressClass
            await self._default_classes.admit(rtype, obj)
        if rtype is self._pods:  # PodTopologyLabels: a pod created on its node, as a binding
            spec = obj.get("spec")
            node = spec.get("nodeName") if isinstance(spec, dict) else None
            topology = self._topology_of(node) if isinstance(node, str) and node else None
            if topology:
                meta = obj.setdefault("metadata", {})
                labels = meta.get("labels")
                meta["labels"] = {**(labels if isinstance(labels, dict) else {}), **topology}

    async def _mutating_update_admission(self, rtype: ResourceType, namespace: str | None, name: str,
                                         obj: dict[str, Any], old: dict[str, Any], subresource: str | None) -> bool:
        """Mutating admission of an update, after its strategy: a resize gets its namespace's
        LimitRange defaults (upstream's LimitRanger takes pods/resize, and no other pod update;
        again in the second round; its bounds are checked in validating admission); then the
        policies and webhooks. True: a policy or webhook changed ``obj``."""
        built_in = None
        if rtype is self._pods and subresource == "resize" and self._limit_ranger is not None:
            built_in = functools.partial(self._limit_ranger.admit, rtype, namespace, obj, annotate=False, old=old)
            await built_in()
        return await self._mutating_admission(rtype, namespace, name, "UPDATE", obj, old, subresource,
                                              built_in=built_in)

    async def _mutating_admission(self, rtype: ResourceType, namespace: str | None, name: str, operation: str,
                                  obj: dict[str, Any], old: dict[str, Any] | None, subresource: str | None,
                                  kind: tuple[str, str, str] | None = None, generated_name: bool = False,
                                  default: bool = True,
                                  built_in: Callable[[], Awaitable[None]] | None = None) -> bool:
        """The last mutating admission of a write, in upstream's plugin order: the
        MutatingAdmissionPolicies (api/mutatingpolicy.py), the mutating webhooks; then, when a
        policy applied a mutation or a webhook changed the object, the second round of
        upstream's admission chain (``admission/reinvocation.go``, which runs the whole chain
        again): the built-in mutating admission the write went through (``built_in``, run
        again on ``obj``), the policies with ``reinvocationPolicy: IfNeeded`` invoked in the
        first (if a mutation was applied, or the object changed since the policies ran), then
        the IfNeeded webhooks a later webhook's change asked for (all those called since the
        last change too if the object changed since the webhooks ran), each at most once more.
        ``obj`` is changed in place and defaulted again after each policy or webhook round
        that changed it (``default``); True: one did. Two generation comparisons while neither
        policy bindings nor webhooks are stored."""
        policies = self._mutating_policies
        if policies is not None and not policies.active():
            policies = None
        webhooks = self.webhooks
        if webhooks is not None and not webhooks.active(mutating=True):
            webhooks = None
        if policies is None and webhooks is None:
            return False
        changed = False
        reinvocation = Reinvocation()
        hooks = HookReinvocation()
        user = REQUEST_USER.get()
        if policies is not None and await policies.mutate(rtype, namespace, name, operation, obj, old, subresource,
                                                          user, kind, generated_name, reinvocation):
            changed = True
            if default:
                self._default_patched(rtype, obj)
        if webhooks is not None and await webhooks.mutate(rtype, namespace, name, operation, obj, old, subresource,
                                                          generated_name=generated_name, kind=kind,
                                                          reinvocation=hooks):
            changed = True
            if default:
                self._default_patched(rtype, obj)
        if not reinvocation.applied and not hooks.changed:
            return changed  # nothing asks for the second round
        # the second round: the whole mutating chain again, the built-in admission first
        built_in_changed = False
        if built_in is not None:
            before = copy.deepcopy(obj)
            await built_in()
            built_in_changed = obj != before
            changed = changed or built_in_changed
        again = reinvocation.needed(hooks.changed or built_in_changed)
        policies_changed = policies is not None and await policies.mutate(  # (every match condition evaluated)
            rtype, namespace, name, operation, obj, old, subresource, user, kind, generated_name, only=again)
        if policies_changed:
            changed = True
            if default:
                self._default_patched(rtype, obj)
        if webhooks is not None and await webhooks.mutate(rtype, namespace, name, operation, obj, old, subresource,
                                                          generated_name=generated_name, kind=kind,
                                                          again=hooks.needed(policies_changed or built_in_changed)):
            changed = True
            if default:
                self._default_patched(rtype, obj)
        return changed

    def _default_patched(self, rtype: ResourceType, obj: dict[str, Any]) -> None:
        """An object a mutating webhook patched, defaulted again (upstream decodes the patched
        JSON into its type, with defaults); a custom resource's schema prunes it too."""
        if rtype.custom is None:
            default(rtype.plural, obj)
        else:
            self.crds.prepare_resource(rtype, obj)

    async def _validating_update_admission(self, rtype: ResourceType, namespace: str | None, name: str,
                                           obj: dict[str, Any], old: dict[str, Any],
                                           subresource: str | None) -> None:
        """Validating admission of a valid update, in upstream's plugin order: a resize's
        LimitRanger bounds, PodSecurity, a claim's PersistentVolumeClaimResize, a CSR's
        CertificateApproval and CertificateSigning (api/certificateadmission.py), Priority's
        check of a PriorityClass made the global default, the
        admission policies, the validating webhooks, then ResourceQuota, which charges a
        pod's resize."""
        if subresource is None:
            await self._authorize_params(rtype, obj, old)  # (the strategy's, once valid: before admission)
        if self._limit_ranger is not None and (subresource == "resize" if rtype is self._pods else subresource is None):
            # LimitRanger's bounds: a pod's resize and a claim's update (upstream's SupportsAttributes: a
            # pod's other updates cannot change its resources; a claim's can, and its Validate checks the
            # whole claim, so an update of a claim outside a range made since is refused too, unless
            # it is being deleted)
            await self._limit_ranger.validate(rtype, namespace, obj, old)
        await self._pod_security(rtype, namespace, name, obj, old, subresource)
        if self._claim_resize is not None and rtype is self._claim_resize.claims and subresource is None:
            await self._claim_resize.check(name, obj, old)  # PersistentVolumeClaimResize
        if rtype is self._priority_classes and self._priority_classes is not None:
            await admit_priority_class(obj, old, self._default_priority_class)  # Priority
        if rtype is self._csrs:
            await check_signer_permission(self.authorizer, REQUEST_USER.get(), rtype, obj, old, subresource)
        if rtype is self._trust_bundles:  # ClusterTrustBundleAttest
            await check_attest(self.authorizer, REQUEST_USER.get(), rtype, obj, old)
        if rtype is self._pod_certificates and subresource == "status":  # its status strategy's "sign" check
            await check_pod_certificate_signer(self.authorizer, REQUEST_USER.get(), rtype, obj, old)
        if self._policies is not None:
            await self._policies.check(rtype, namespace, name, "UPDATE", obj, old, subresource, REQUEST_USER.get())
        if self.webhooks is not None and self.webhooks.active(mutating=False):
            await self.webhooks.validate(rtype, namespace, name, "UPDATE", obj, old, subresource)
        if rtype is self._pods and subresource == "resize" and self._quota is not None:
            await self._quota.charge_resize(rtype, namespace, obj, old)

    async def _authorize_params(self, rtype: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        """An admission policy's new ``paramKind``, or a binding's new ``paramRef``, that the
        request's user may not read: upstream's 422 (api/paramauthz.py). Other types: one lookup."""
        if (rtype.group, rtype.plural) not in _PARAM_AUTHORIZED or self.authorizer is None:
            return
        bound, user = _PARAM_AUTHORIZED[(rtype.group, rtype.plural)], REQUEST_USER.get()
        if bound is None:
            causes = await param_kind_causes(self.authorizer, user, self._resource_of_kind, obj, old)
        else:
            policies = self.registry.get("admissionregistration.k8s.io", "v1", bound)

            async def policy_of(name: str) -> dict[str, Any] | None:
                raw = await self.cached_or_stored(policies, None, name) if policies is not None and name else None
                return orjson.loads(raw) if raw is not None else None

            causes = await param_ref_causes(self.authorizer, user, self._resource_of_kind, policy_of, obj, old)
        if causes:
            raise ApiError.invalid(rtype, (obj.get("metadata") or {}).get("name") or "", causes)

    def _resource_of_kind(self, group: str, version: str, kind: str) -> str | None:
        """The resource this server serves ``kind`` of ``group/version`` as (discovery's answer)."""
        for rtype in self.registry.in_group_version(group, version):
            if rtype.kind == kind:
                return rtype.plural
        return None

    async def _pod_security(self, rtype: ResourceType, namespace: str | None, name: str, obj: dict[str, Any],
                            old: dict[str, Any] | None, subresource: str | None, ns: bytes | None = None) -> None:
        """PodSecurity admission (api/podsecurity.py) of a valid write (``old`` None: a create):
        a pod is refused or warned by its namespace's levels; a workload's pod template is
        warned; a namespace's labels are validated, and a tightened enforce level warns of
        the namespace's pods that violate it. ``ns``: the namespace's JSON, when read already.
        Upstream's ``pod_security_*`` metrics are recorded where its plugin records them. A
        namespace without PodSecurity labels costs a lookup, a substring search and a count."""
        if rtype is self._namespaces:
            if not subresource:
                await self._pod_security_namespace(rtype, obj, old)
            return
        if rtype is self._pods:
            if subresource in _PSA_IGNORED_POD_SUBRESOURCES:
                return
        elif subresource or rtype.custom is not None or (rtype.group, rtype.plural) not in _PSA_WORKLOADS:
            return
        if namespace is None or self._namespaces is None:
            return
        config = self.pod_security
        pod = rtype is self._pods
        operation = "create" if old is None else "update"
        auditing = audit.recording()  # (its annotations: exempt, error, enforce-policy, audit-violations)
        exempt = "namespace" if namespace in config.namespaces else None
        if exempt is None and config.usernames:
            user = REQUEST_USER.get()
            exempt = "user" if user is not None and user.name in config.usernames else None
        if exempt is not None:
            POD_SECURITY_EXEMPTIONS.inc(operation, "pod" if pod else "controller", subresource or "")
            if auditing:
                audit.annotate(podsecurity.EXEMPT_ANNOTATION, exempt)
            return
        if ns is None:
            ns = await self._namespace(namespace)
        if ns is None or (config.labels_decide and _PSA_LABEL not in ns):  # privileged: nothing to check
            if pod and ns is not None:
                POD_SECURITY_EVALUATIONS.count(_psa_privileged_allowed(operation, subresource))
                if auditing:
                    audit.annotate(podsecurity.ENFORCE_POLICY_ANNOTATION, str(config.defaults.enforce))
            return
        labels = (orjson.loads(ns).get("metadata") or {}).get("labels")
        policy, causes = podsecurity.policy_of(labels, config.defaults)
        if not causes and (policy.checks_nothing() if pod else
                           policy.warn.level == policy.audit.level == "privileged"):
            if pod:  # (upstream's short cut for a fully privileged namespace, before anything else)
                POD_SECURITY_EVALUATIONS.count(_psa_privileged_allowed(operation, subresource))
                if auditing:
                    audit.annotate(podsecurity.ENFORCE_POLICY_ANNOTATION, str(policy.enforce))
            return
        if pod:
            if old is not None and not podsecurity.significant_pod_update(obj, old):
                return
            meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
        else:
            template = podsecurity.workload_template(rtype.group, rtype.plural, obj)
            if template is None:
                return
            meta, spec = template
        resource = "pod" if pod else "controller"
        runtime_class = spec.get("runtimeClassName")
        if runtime_class and runtime_class in config.runtime_classes:
            POD_SECURITY_EXEMPTIONS.inc(operation, resource, subresource or "")
            if auditing:
                audit.annotate(podsecurity.EXEMPT_ANNOTATION, "runtimeClass")
            return
        if causes:
            POD_SECURITY_ERRORS.inc("false", operation, resource, subresource or "")
            if auditing:
                audit.annotate(podsecurity.ERROR_ANNOTATION, podsecurity.error_annotation(causes))
        evaluation = podsecurity.evaluate_pod(policy, meta, spec, enforce=pod)
        for decision, level_version, mode in evaluation.decisions:
            POD_SECURITY_EVALUATIONS.inc(decision, level_version.level,
                                         podsecurity.version_label(level_version, _SERVER_MINOR), mode,
                                         operation, resource, subresource or "")
        if auditing:
            for key, value in podsecurity.audit_annotations(policy, evaluation, enforce=pod).items():
                audit.annotate(key, value)
        if evaluation.refusal is not None:
            raise ApiError(403, "Forbidden", f'{ApiError._what(rtype)} "{name}" is forbidden: {evaluation.refusal}',
                           {"name": name, "kind": rtype.plural} if name else {"kind": rtype.plural})
        for warning in evaluation.warnings:
            add_warning(warning)

    async def _pod_security_namespace(self, rtype: ResourceType, obj: dict[str, Any],
                                      old: dict[str, Any] | None) -> None:
        """A namespace's PodSecurity labels: invalid ones refused (on an update, only when they
        changed how they are invalid); a tightened enforce level warns of the pods in it."""
        meta = obj.get("metadata") or {}
        config = self.pod_security
        policy, causes = podsecurity.policy_of(meta.get("labels"), config.defaults)
        if old is None:
            if causes:
                raise ApiError.invalid(rtype, meta.get("name") or "", causes)
            return
        old_policy, old_causes = podsecurity.policy_of((old.get("metadata") or {}).get("labels"), config.defaults)
        if causes and causes != old_causes:
            raise ApiError.invalid(rtype, meta.get("name") or "", causes)
        name = meta.get("name") or ""
        if not podsecurity.tightens(policy, old_policy) or self._pods is None or name in config.namespaces:
            return
        try:
            listed = await self._list(self._pods, name, {"limit": str(podsecurity.MAX_PODS_TO_CHECK)})
        except ApiError:
            add_warning("failed to list pods while checking new PodSecurity enforce level")
            return
        pods = [orjson.loads(raw) for raw in listed.items]
        more = listed.remaining if listed.remaining is not None else (1 if listed.next_start is not None else 0)
        for warning in podsecurity.namespace_warnings(name, policy.enforce, pods, total=len(pods) + more,
                                                      exempt_runtime_classes=config.runtime_classes):
            add_warning(warning)

    async def _update_admission(self, rtype: ResourceType, namespace: str | None, name: str,
                                obj: dict[str, Any], old: dict[str, Any],
                                subresource: str | None) -> tuple[ServiceWrite | None, bool]:
        """An update's or a patch's object over ``old``, up to validating admission, in upstream's
        order: mutating admission, the RBAC escalation check, the strategy (defaults and
        validation, ``_admit``), and a Service's new allocations reserved. Returns the Service's
        write, which the caller settles or aborts with the write's outcome, and whether a
        mutating policy or webhook changed ``obj``."""
        mutated = await self._mutating_update_admission(rtype, namespace, name, obj, old, subresource)
        if self.authorizer is not None and rtype.group == RBAC_GROUP:
            await self._rbac_escalation(rtype, namespace, name, obj, old)
        write = self._allocating(rtype, old)
        self._admit(rtype, obj, old, subresource)
        if write is not None:
            await self._reserve(write, rtype, namespace, name, obj, old)
        return write, mutated

    def _allocates(self, rtype: ResourceType) -> bool:
        return rtype is self._services

    def _allocating(self, rtype: ResourceType, old: dict[str, Any] | None) -> ServiceWrite | None:
        """Before a Service's write over ``old`` (None: a create), before its defaults: the
        write's allocations (api/allocations.py)."""
        return self.allocations.begin(old) if rtype is self._services else None

    async def _reserve(self, write: ServiceWrite, rtype: ResourceType, namespace: str | None, name: str,
                       obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        """A Service about to be written (admitted, valid): its new cluster IPs and node ports,
        in the ranges, claimed in the store; taken ones a 422 (or picked again)."""
        await self._service_ranges()
        causes = service_allocation_causes(obj, old, self.allocations.open_ranges)
        if causes and self._service_cidrs is not None:  # perhaps in a ServiceCIDR not cached yet
            await self.allocations.read_ranges()
            causes = service_allocation_causes(obj, old, self.allocations.open_ranges)
        if causes:
            raise ApiError.invalid(rtype, (obj.get("metadata") or {}).get("name") or "", causes)
        await write.reserve(rtype, namespace or "", name, obj)
        refused = health_check_port_causes(obj, old)  # (after the node ports, as upstream's allocator)
        if refused:
            await write.abort()
            raise ApiError.invalid(rtype, (obj.get("metadata") or {}).get("name") or "", refused)

    async def _service_ranges(self) -> None:
        """The allocator's ranges from the cached ServiceCIDRs, when they changed."""
        if self._service_cidrs is None:
            return
        generation = self.reads.generation(self._service_cidrs)
        if generation is None or generation == self._ranges_generation:
            return  # every Service's write asks: list only when a ServiceCIDR changed (no cache: on a miss)
        listed = await self._list(self._service_cidrs, None, {"resourceVersion": "0"})
        self.allocations.ranges_from(listed.items)
        self._ranges_generation = generation

    @staticmethod
    async def _aborted(write: ServiceWrite | None) -> None:
        if write is not None:
            await write.abort()

    async def _settled(self, write: ServiceWrite | None, namespace: str | None, name: str,
                       old: dict[str, Any] | None, new: dict[str, Any]) -> None:
        """A Service was written: what it held before and holds no more is released."""
        if write is not None:
            await write.done()
            if old is not None:
                await self.allocations.release(namespace or "", name, write.before, new)

    def _spawn(self, coro: Awaitable[None]) -> None:
        if DRY_RUN.get():  # a dry run starts no follow-up work (namespace termination)
            coro.close()  # type: ignore[attr-defined]
            return
        task = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _terminate(self, namespace: str) -> Awaitable[None]:
        """The namespace controller's work (api/namespace_deleter.py): empty a terminating
        namespace, then delete it (its ``kubernetes`` finalizer)."""
        assert self._namespaces is not None
        return empty_namespace(self.registry, self.store, self._namespaces, namespace, self._delete_content,
                               self._store_namespace)

    async def _delete_content(self, rtype: ResourceType, namespace: str | None, name: str,
                              options: dict[str, Any] | None) -> dict[str, Any] | None:
        """A terminating namespace's object deleted: None if it is gone, else the object
        as it stays (held by its finalizers)."""
        left = await self._delete(rtype, namespace, name, options)
        return None if isinstance(left, Gone) else left

    async def _store_namespace(self, key: bytes, obj: dict[str, Any], expected: int) -> int:
        """Write a namespace; a terminating one whose finalizers (spec and metadata) are all
        gone is deleted instead, as kube-apiserver's namespace registry does."""
        meta = obj.setdefault("metadata", {})
        if meta.get("deletionTimestamp") and not (obj.get("spec") or {}).get("finalizers") \
                and not meta.get("finalizers"):
            return await self.store.delete(key, expected)
        return await self.store.update(key, orjson.dumps(obj), expected)

    async def _finalize(self, rtype: ResourceType, name: str, body: bytes) -> dict[str, Any]:
        """``namespaces/<name>/finalize`` (PUT): set ``spec.finalizers`` and nothing else."""
        new = self._parse(rtype, body, name)
        finalizers = (new.get("spec") or {}).get("finalizers") or []
        if not isinstance(finalizers, list) or not all(isinstance(f, str) for f in finalizers):
            raise ApiError.invalid(rtype, name, [{"reason": "FieldValueInvalid", "field": "spec.finalizers",
                                                  "message": "must be a list of strings"}])
        causes = _namespace_finalizer_causes(finalizers)
        if causes:  # (any name was stored, and the namespace deleter waited on it)
            raise ApiError.invalid(rtype, name, causes)
        expected = _revision_param(new["metadata"].get("resourceVersion"))
        key = rtype.key(None, name)
        current = await self.store.get(key)
        if current is None:
            raise ApiError.not_found(rtype, name)
        if expected and expected != current.mod_revision:
            raise ApiError.conflict(rtype, name, "the object has been modified; please apply your changes to "
                                    "the latest version and try again")
        obj: dict[str, Any] = orjson.loads(current.value)
        if ((obj.get("spec") or {}).get("finalizers") or []) == finalizers:
            return _object(current.value, current.mod_revision)  # no change, no write: upstream's GuaranteedUpdate
        obj.setdefault("spec", {})["finalizers"] = finalizers
        try:
            rev = await self._store_namespace(key, obj, current.mod_revision)
        except store.Conflict as e:
            raise ApiError.conflict(rtype, name, "the object has been modified; please apply your changes to "
                                    "the latest version and try again") from e
        obj["metadata"]["resourceVersion"] = str(rev)
        return obj

    async def _bind(self, rtype: ResourceType, namespace: str | None, name: str, body: bytes,
                    admitted_as: ResourceType | None = None) -> dict[str, Any]:
        """``pods/binding``: assign the pod to a node, once (409 if already bound). Admitted as
        upstream's: a CREATE of ``pods/binding`` (of ``bindings`` for the legacy form,
        ``admitted_as``) with the Binding as the object."""
        binding = json_object(body, "the binding")
        if not _plain_binding(binding):  # a metadata.uid of 5 was taken
            check_decodes("", "v1", "Binding", binding)
        meta = binding.get("metadata") or {}
        if meta.get("namespace") not in (None, "", namespace):  # the create handler's, before admission
            raise ApiError.bad_request("the namespace of the provided object does not match the namespace sent on "
                                       "the request")
        await self._open_namespace(admitted_as or rtype, namespace, name)  # admission, before BindingREST.Create
        if meta.get("name") != name:  # BindingREST.Create's: {} or another pod's name bound this one
            raise ApiError.bad_request("name in URL does not match name in Binding object")
        admission = (admitted_as or rtype, "" if admitted_as is not None else "binding", ("", "v1", "Binding"))
        if self._subresource_admission(mutating=True):
            binding = _as_subresource_object(binding, "v1", "Binding", namespace)
            await self._mutate_subresource(admission, namespace, name, "CREATE", binding, None)
        target = binding.get("target")
        if target is not None and not isinstance(target, dict):
            raise ApiError.bad_request(f"Binding in version \"v1\" cannot be handled as a Binding: json: cannot "
                                       f"unmarshal {_json_kind(target)} into Go struct field Binding.target of "
                                       f"type v1.ObjectReference")
        node = target.get("name") if target else None
        kind = target.get("kind") if target else None
        for field, value in (("name", node), ("kind", kind)):
            if value is not None and not isinstance(value, str):
                raise ApiError.bad_request(f"Binding in version \"v1\" cannot be handled as a Binding: json: cannot "
                                           f"unmarshal {_json_kind(value)} into Go struct field "
                                           f"ObjectReference.target.{field} of type string")
        if kind not in (None, "", "Node"):  # upstream's ValidatePodBinding
            raise ApiError.invalid(rtype, name, [{"reason": "FieldValueNotSupported", "field": "target.kind",
                                                  "message": f'Unsupported value: "{kind}": supported values: '
                                                             f'"Node", "<empty>"'}])
        if not node:
            raise ApiError.invalid(rtype, name, [{"reason": "FieldValueRequired", "field": "target.name",
                                                  "message": "Required value"}])
        if self._subresource_admission(mutating=False):
            await self._validate_subresource(admission, namespace, name, "CREATE",
                                             _as_subresource_object(binding, "v1", "Binding", namespace), None)
        # the preconditions BindingREST passes on to its storage update: the binding of a pod
        # deleted and created again under its name, or changed since, fails
        uid, resource_version = ((binding.get("metadata") or {}).get(f) for f in ("uid", "resourceVersion"))
        key = rtype.key(namespace, name)
        labels = bound_labels(binding, self._topology_of(node))
        for attempt in range(WRITE_ATTEMPTS):
            current, cached = await self._current(rtype, key, fresh=attempt > 0)
            if current is None:
                raise ApiError.not_found(rtype, name)
            pod = orjson.loads(current.value)
            meta = pod.setdefault("metadata", {})
            failed = (uid and uid != meta.get("uid")) or \
                (resource_version and resource_version != str(current.mod_revision))
            if failed and cached:
                continue  # the cache's version may be stale: refuse only what the store says
            if uid and uid != meta.get("uid"):
                raise _precondition_failed(rtype, key, name, "UID", uid, meta.get("uid"))
            if resource_version and resource_version != str(current.mod_revision):
                raise _precondition_failed(rtype, key, name, "ResourceVersion", resource_version,
                                           current.mod_revision)
            if (meta.get("deletionTimestamp") or pod.get("spec", {}).get("nodeName")) and cached:
                continue  # the cache's version may be stale: refuse only what the store says
            if meta.get("deletionTimestamp"):
                raise ApiError.conflict(rtype, name, "pod is being deleted, cannot be assigned to a host")
            if pod.get("spec", {}).get("nodeName"):
                raise ApiError.conflict(rtype, name, f"pod {name} is already assigned to node "
                                        f"\"{pod['spec']['nodeName']}\"")
            pod["spec"]["nodeName"] = node
            ann = (binding.get("metadata") or {}).get("annotations")
            if ann:
                meta.setdefault("annotations", {}).update(ann)
            if labels:
                meta["labels"] = {**(meta.get("labels") or {}), **labels}
            status = pod.setdefault("status", {})
            status.pop("nominatedNodeName", None)  # bound: the nomination is spent (upstream since 1.34)
            conditions = [c for c in status.get("conditions", []) if c.get("type") != "PodScheduled"]
            conditions.append({"type": "PodScheduled", "status": "True", "lastProbeTime": None,
                               "lastTransitionTime": _now()})
            status["conditions"] = conditions
            try:
                await self._replace(rtype, key, name, pod, current.mod_revision)
            except store.Conflict:
                continue
            except store.NotFound as e:
                raise ApiError.not_found(rtype, name) from e
            return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}
        raise ApiError.conflict(rtype, name, "the pod kept changing; try again")

    async def _token(self, rtype: ResourceType, namespace: str | None, name: str, body: bytes) -> dict[str, Any]:
        """``serviceaccounts/<name>/token``: a TokenRequest answered with a token (api/tokenrequest.py).
        Admitted as upstream's: a CREATE of ``serviceaccounts/token`` with the TokenRequest, the
        mutating webhooks before the account is looked up, validating admission once the request
        is validated and defaulted (TokenREST's ``createValidation``), before its bound object."""
        assert self.token_issuer is not None
        asked = self._subresource_body(TOKEN_REQUEST_TYPE, body) if body.strip() else {}
        await self._open_namespace(rtype, namespace, name)  # NamespaceLifecycle, the first admission
        user = REQUEST_USER.get()
        node = kubelet(user) if user is not None and self.node_restriction is not None else None
        if node is not None and self.node_restriction is not None:  # NodeRestriction, the first admission
            self.node_restriction.admit_token(node, namespace or "", name, asked if isinstance(asked, dict) else {})
        admission = (rtype, "token", ("authentication.k8s.io", "v1", "TokenRequest"))
        if isinstance(asked, dict) and self._subresource_admission(mutating=True):
            asked = _as_subresource_object(asked, "authentication.k8s.io/v1", "TokenRequest", namespace)
            await self._mutate_subresource(admission, namespace, name, "CREATE", asked, None)
        account = await self.store.get(rtype.key(namespace, name))
        if account is None:
            raise ApiError.not_found(rtype, name)

        async def validate(request: dict[str, Any]) -> None:
            await self._validate_subresource(admission, namespace, name, "CREATE", request, None)

        return await token_request_looked_up(self.token_issuer, orjson.loads(account.value), asked, self._core_object,
                                             validate if self._subresource_admission(mutating=False) else None)

    def _subresource_admission(self, mutating: bool) -> bool:
        """Whether a subresource write handled on its own (``_bind``, ``_evict``, ``_scale``) must
        ask admission: False, at the cost of a generation comparison or two, while no webhook
        (and, for validation, no policy binding) is stored."""
        webhooks = self.webhooks
        if webhooks is not None and webhooks.active(mutating):
            return True
        if mutating:
            return self._mutating_policies is not None and self._mutating_policies.active()
        return self._policies is not None and self._policies.active()

    async def _mutate_subresource(self, admission: tuple[ResourceType, str, tuple[str, str, str]],
                                  namespace: str | None, name: str, operation: str, obj: dict[str, Any],
                                  old: dict[str, Any] | None) -> None:
        """Mutating admission of such a write: the mutating webhooks, with the subresource's own
        kind (``admission``: the resource, the subresource, the kind), patching ``obj`` in place."""
        rtype, subresource, kind = admission
        await self._mutating_admission(rtype, namespace, name, operation, obj, old, subresource, kind, default=False)

    async def _validate_subresource(self, admission: tuple[ResourceType, str, tuple[str, str, str]],
                                    namespace: str | None, name: str, operation: str, obj: dict[str, Any],
                                    old: dict[str, Any] | None) -> None:
        """Validating admission of such a write: the policies, then the validating webhooks."""
        rtype, subresource, kind = admission
        if self._policies is not None:
            await self._policies.check(rtype, namespace, name, operation, obj, old, subresource, REQUEST_USER.get(),
                                       kind)
        if self.webhooks is not None and self.webhooks.active(mutating=False):
            await self.webhooks.validate(rtype, namespace, name, operation, obj, old, subresource, kind=kind)

    def _topology_of(self, node: str) -> dict[str, str]:
        """Node ``node``'s topology labels, as the watch cache has it (none if it has not)."""
        hit = self.reads.latest(self._nodes, self._nodes.key(None, node)) if self._nodes is not None else None
        return self._node_topology.labels(node, hit[0] if hit else None, hit[1] if hit else 0)

    async def _core_object(self, plural: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        """The stored core/v1 object, or None (a TokenRequest's bound object)."""
        rtype = self.registry.get("", "v1", plural)
        kv = None if rtype is None or not name else await self.store.get(rtype.key(namespace, name))
        if kv is None:
            return None
        obj: dict[str, Any] = orjson.loads(kv.value)
        return obj

    async def _log(self, rtype: ResourceType, namespace: str | None, name: str, query: dict[str, str],
                   receive: Receive, send: Send) -> None:
        """``pods/{name}/log``: simulated containers write nothing, so a container's log is
        empty; ``follow`` holds it open while the container runs (``podlog.follow``). The errors
        are kube-apiserver's: no such container, a container not started yet, no earlier
        instance for ``previous``. The options are validated first, as upstream's ``LogREST.Get``."""
        validate_log_options(name, query)
        pod = orjson.loads(await self._get(rtype, namespace, name))
        spec, status = pod.get("spec") or {}, pod.get("status") or {}
        names = [c.get("name") for c in [*(spec.get("initContainers") or ()), *(spec.get("ephemeralContainers") or ()),
                                          *(spec.get("containers") or ())]]
        container = query.get("container") or ""
        if not container:
            if len(spec.get("containers") or ()) != 1:
                listed = " ".join(c.get("name", "") for c in spec.get("containers") or ())
                init = " ".join(c.get("name", "") for c in spec.get("initContainers") or ())
                raise ApiError.bad_request(f"a container name must be specified for pod {name}, choose one of: "
                                           f"[{listed}]" + (f" or one of the init containers: [{init}]"
                                                            if init else ""))
            container = names[-1]
        if container not in names:
            raise ApiError.bad_request(f"container {container} is not valid for pod {name}")
        statuses = {c.get("name"): c for c in [*(status.get("initContainerStatuses") or ()),
                                               *(status.get("ephemeralContainerStatuses") or ()),
                                               *(status.get("containerStatuses") or ())]}
        found = statuses.get(container) or {}
        state = found.get("state") or {}
        if not spec.get("nodeName"):
            pass  # upstream's LogLocation: a pod with no host yet has no log location, so an empty log
        elif flag(query, "previous"):  # the kubelet's answer when no earlier instance ended
            if not (found.get("lastState") or {}).get("terminated"):
                raise ApiError.bad_request(f'previous terminated container "{container}" in pod "{name}" not found')
        elif not state or "waiting" in state:
            reason = (state.get("waiting") or {}).get("reason") or "ContainerCreating"
            raise ApiError.bad_request(f'container "{container}" in pod "{name}" is waiting to start: {reason}')
        elif flag(query, "follow") and running_instance(pod, container) is not None:
            return await follow(self.reads, rtype, namespace, pod, container, receive, send)
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/plain"), (b"content-length", b"0")]})
        await send({"type": "http.response.body", "body": b""})

    async def _admit_connect(self, rtype: ResourceType, namespace: str | None, name: str, subresource: str,
                             options: dict[str, Any]) -> None:
        """Admission of a CONNECT (exec, attach, portforward, proxy), as upstream's
        ``ConnectResource`` asks it once the options are decoded and before it connects: the
        mutating webhooks (their patches change ``options``, as upstream's change the options
        it connects with), then the policies and the validating webhooks, each seeing the
        options as the object, of the options' kind (``api/webhooks.py``)."""
        kind = ("", "v1", str(options["kind"]))
        await self._mutating_admission(rtype, namespace, name, "CONNECT", options, None, subresource, kind,
                                       default=False)
        if self._subresource_admission(mutating=False):
            await self._validate_subresource((rtype, subresource, kind), namespace, name, "CONNECT", options, None)

    async def _streaming_refusal(self, rtype: ResourceType, namespace: str | None, name: str,
                                 options: dict[str, Any], scope: Scope) -> ApiError:
        """``pods/{name}/exec``, ``attach`` and ``portforward``: the error kube-apiserver answers
        when the node's kubelet cannot be reached (no simulated node runs one), or the one an
        earlier step fails with (``api/streaming.py``)."""
        nodes = self.registry.get("", "v1", "nodes")
        assert nodes is not None

        async def pod_named(pod: str) -> dict[str, Any]:
            return orjson.loads(await self._get(rtype, namespace, pod))  # type: ignore[no-any-return]

        async def node_named(node: str) -> dict[str, Any]:
            return orjson.loads(await self._get(nodes, None, node))  # type: ignore[no-any-return]

        return await streaming_refusal(name, options, scope["headers"],
                                       pod_named, node_named)

    async def _proxy_refusal(self, rtype: ResourceType, namespace: str | None, id_on_url: str) -> ApiError:
        """``{pods,services,nodes}/{id}/proxy[/path]``: the error kube-apiserver answers when
        nothing listens where it would forward, or the one an earlier step fails with
        (``api/proxying.py``)."""
        endpoints = self.registry.get("", "v1", "endpoints")
        assert endpoints is not None

        async def get(name: str) -> dict[str, Any]:
            return orjson.loads(await self._get(rtype, namespace, name))  # type: ignore[no-any-return]

        async def endpoints_of(name: str) -> dict[str, Any]:
            return orjson.loads(await self._get(endpoints, namespace, name))  # type: ignore[no-any-return]

        return await proxy_refusal(rtype.plural, id_on_url, get, endpoints_of)

    async def _scale(self, rtype: ResourceType, namespace: str | None, name: str, method: str,
                     content_type: str, body: bytes, query: dict[str, str],
                     manager: str = "") -> dict[str, Any]:
        """``<name>/scale``: read, or write ``spec.replicas`` through, the Scale view (``api/scale.py``);
        a custom resource keeps its replicas where its CRD says. ``manager`` owns the
        replicas a write changes (``managedfields.record_scale``); a server-side apply
        (an autoscaling/v1 Scale) owns them as an ``Apply`` entry with subresource
        ``scale`` (``managedfields.apply_scale``). A write that changes nothing writes nothing."""
        if method not in ("GET", "PUT", "PATCH"):  # before the object is looked up, as upstream's routes
            raise ApiError.method_not_allowed()
        key = rtype.key(namespace, name)
        paths = scale_paths(rtype)
        applying = apply_options(query, content_type) if method == "PATCH" else None
        config = parse_scale_config(rtype.namespaced, namespace, name, body) if applying is not None else None
        precondition = (config["metadata"].get("resourceVersion") or "") if config is not None else ""
        for _attempt in range(WRITE_ATTEMPTS):
            current = await self.store.get(key)
            if current is None:
                raise ApiError.not_found(rtype, name)
            obj = _object(current.value, current.mod_revision)
            if rtype.custom is not None:
                obj = present(rtype, obj)
            view = scale_of(obj, paths)
            if method == "GET":
                return view
            old = orjson.loads(current.value)
            fields: Any = None
            if method == "PUT":
                replicas, expected = replicas_of_scale(self._subresource_body(SCALE_TYPE, body, name=name), name,
                                                       namespace, body=True)
            elif applying is not None and config is not None:
                if precondition and str(precondition) != str(current.mod_revision):
                    raise ApiError.conflict(rtype, name, "the object has been modified; please apply your changes "
                                            "to the latest version and try again")
                owner = {"metadata": {"managedFields": (old.get("metadata") or {}).get("managedFields", [])}}
                try:
                    applied = managedfields.apply_scale(rtype, owner, view, config, applying.manager,
                                                        applying.force, paths.spec_replicas)
                except managedfields.Conflicts as e:
                    raise conflict_error(e) from e
                except managedfields.ShapeError as e:
                    raise ApiError.bad_request("failed to create typed patch object "
                                               f"({object_gvknn(SCALE_TYPE, config)}): {e}") from e
                fields = owner["metadata"].get("managedFields")
                replicas, expected = replicas_of_scale({**applied, "metadata": {}}, name)
            elif method == "PATCH":
                patch = self._parse_json(body)
                if content_type == "application/json-patch+json":
                    patched = _json_patch(view, _json_patch_operations(patch))
                elif content_type in ("application/merge-patch+json", "application/strategic-merge-patch+json"):
                    check_merge_patch(SCALE_TYPE, patch)
                    patched = merge_patch(view, patch)  # a Scale has no lists: strategic is merge here
                else:  # (the dispatch refused other types)
                    raise ApiError.unsupported_media_type(accepted_patch_types(rtype))
                # decoded into a Scale as upstream's patcher decodes its result: a value of another
                # type (or, under Strict, an unknown field) is its 422 against ``patch``
                if isinstance(patched, dict):
                    patched = check_object(SCALE_TYPE, patched, strategic=patch if content_type ==
                                           "application/strategic-merge-patch+json" else None, stored=view)
                replicas, expected = replicas_of_scale(patched, name, namespace)
                expected = 0 if expected == current.mod_revision else expected
            else:
                raise ApiError.method_not_allowed()
            if expected and expected != current.mod_revision:
                raise ApiError.conflict(rtype, name, "the object has been modified; please apply your changes "
                                        "to the latest version and try again")
            new = with_spec_replicas(orjson.loads(current.value), replicas, paths)
            new = _split_status(rtype, None, old, new)
            if applying is None:
                managedfields.record_scale(rtype, old, new, manager, paths.spec_replicas)
            elif fields:
                new["metadata"]["managedFields"] = fields
            else:
                new["metadata"].pop("managedFields", None)
            admitted = self._subresource_admission(mutating=True)
            if admitted:  # upstream admits the Scale, an UPDATE of <resource>/scale
                scale = scale_of(new, paths)
                await self._mutate_subresource((rtype, "scale", _SCALE_KIND), namespace, name, "UPDATE", scale, view)
                replicas, _ = replicas_of_scale(scale, name)
                new = with_spec_replicas(new, replicas, paths)
            self._admit(rtype, new, old, "scale")
            if admitted or self._subresource_admission(mutating=False):
                await self._validate_subresource((rtype, "scale", _SCALE_KIND), namespace, name, "UPDATE",
                                                 scale_of(new, paths), view)
            if new == old:  # nothing changed: no write, the same resourceVersion
                return view
            try:
                rev = await self.store.update(key, orjson.dumps(new), current.mod_revision)
            except store.Conflict:
                if expected:
                    raise ApiError.conflict(rtype, name, "the object has been modified; please apply your "
                                            "changes to the latest version and try again") from None
                continue
            except store.NotFound as e:
                raise ApiError.not_found(rtype, name) from e
            new["metadata"]["resourceVersion"] = str(rev)
            return scale_of(new, paths)
        raise ApiError.conflict(rtype, name, "too many concurrent writers; try again")

    async def _evict(self, rtype: ResourceType, namespace: str | None, name: str, body: bytes) -> dict[str, Any]:
        """``pods/<name>/eviction`` (policy/v1 Eviction): delete the pod, with the Eviction's
        ``deleteOptions``, unless the PodDisruptionBudget covering it allows no disruption (429)."""
        eviction = self._subresource_body(EVICTION_TYPE, body, also=EVICTION_ALSO) if body.strip() else {}
        await self._open_namespace(rtype, namespace, name)  # admission, before EvictionREST.Create's checks
        meta = eviction.get("metadata") or {}
        if not isinstance(meta, dict) or meta.get("name") != name:
            # one without a name too (an empty body, ``{}``), as EvictionREST.Create: it evicted the pod
            raise ApiError.bad_request("name in URL does not match name in Eviction object")
        admission = (rtype, "eviction", ("policy", "v1", "Eviction"))
        if self._subresource_admission(mutating=True):  # upstream admits the Eviction: a CREATE of pods/eviction
            eviction = _as_subresource_object(eviction, "policy/v1", "Eviction", namespace)
            await self._mutate_subresource(admission, namespace, name, "CREATE", eviction, None)
        options = eviction.get("deleteOptions") or {}
        if self._subresource_admission(mutating=False):
            await self._validate_subresource(admission, namespace, name, "CREATE",
                                             _as_subresource_object(eviction, "policy/v1", "Eviction", namespace),
                                             None)
        # validated as a DELETE's; a dry run asked for in them (`kubectl drain --dry-run=server`
        # puts it there, not in the query) makes the eviction one, as upstream's propagateDryRun
        options = self._delete_options({"dryRun": "All"} if DRY_RUN.get() else {},
                                       orjson.dumps({k: v for k, v in options.items() if k != "kind"}))
        await self._charge_budget(rtype, namespace or "", name)
        if not DRY_RUN.get():
            options = await self._mark_disruption_target(rtype, namespace, name, options)
        await self._delete(rtype, namespace, name, options, admit=False)  # the Eviction was admitted, not the delete
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}

    async def _mark_disruption_target(self, rtype: ResourceType, namespace: str | None, name: str,
                                      options: dict[str, Any]) -> dict[str, Any]:
        """Upstream's addConditionAndDeletePod: before an eviction deletes the pod, its latest
        version gets the ``DisruptionTarget`` condition (``EvictionByEvictionAPI``, as
        ``UpdatePodCondition`` sets it: the transition time kept if it was True already), a
        status write. The delete's preconditions are checked against that version, and a
        ``resourceVersion`` one moves to the version written. Returns the delete's options."""
        key = rtype.key(namespace, name)
        pre = options.get("preconditions") or {}
        for _attempt in range(WRITE_ATTEMPTS):
            current = await self.store.get(key)
            if current is None:
                raise ApiError.not_found(rtype, name)
            obj: dict[str, Any] = orjson.loads(current.value)
            meta = obj.setdefault("metadata", {})
            _check_preconditions(rtype, name, pre, meta, current.mod_revision)
            status = obj.setdefault("status", {})
            conditions = status.setdefault("conditions", [])
            wanted = {"type": "DisruptionTarget", "status": "True", "lastProbeTime": None,
                      "lastTransitionTime": _now(), "reason": "EvictionByEvictionAPI",
                      "message": "Eviction API: evicting"}
            at = next((i for i, c in enumerate(conditions) if c.get("type") == "DisruptionTarget"), None)
            if at is None:
                conditions.append(wanted)
            else:
                old = conditions[at]
                if old.get("status") == "True" and old.get("lastTransitionTime"):
                    wanted["lastTransitionTime"] = old["lastTransitionTime"]
                if all(old.get(k) == v for k, v in wanted.items()):
                    return options  # marked already: nothing to write
                conditions[at] = wanted
            try:
                written = await self._replace(rtype, key, name, obj, current.mod_revision)
            except store.Conflict:
                continue
            except store.NotFound:
                raise ApiError.not_found(rtype, name) from None
            if pre.get("resourceVersion") is not None:
                options = {**options, "preconditions": {**pre,
                                                        "resourceVersion": written["metadata"]["resourceVersion"]}}
            return options
        raise ApiError(409, "Conflict", f"the pod {name} kept changing; try again")

    async def _charge_budget(self, rtype: ResourceType, namespace: str, name: str) -> None:
        """Upstream's eviction check: the pod's PodDisruptionBudget must allow one more
        disruption, which is taken from it (``disruptionsAllowed - 1``, the pod recorded in
        ``disruptedPods`` until the disruption controller sees it go). A pod that is not
        running (pending, terminal, being deleted) ignores budgets; an unhealthy pod may go
        while its budget is met (``unhealthyPodEvictionPolicy``)."""
        budgets = self._budgets
        if budgets is None:
            return
        current = await self.store.get(rtype.key(namespace, name))
        if current is None:
            raise ApiError.not_found(rtype, name)
        pod = orjson.loads(current.value)
        if (pod.get("status") or {}).get("phase") in ("Pending", "Succeeded", "Failed") \
                or (pod.get("metadata") or {}).get("deletionTimestamp"):
            return
        for _attempt in range(WRITE_ATTEMPTS):
            listed = await self._list(budgets, namespace, {})
            covering = [b for raw in listed.items if disruption.covers(b := orjson.loads(raw), pod)]
            if not covering:
                return
            if len(covering) > 1:
                # upstream's answer, word for word: a Status EvictionREST returns, not an error,
                # so without a reason (the handler's finisher makes it the error as it is)
                raise ApiError(500, "", "This pod has more than one PodDisruptionBudget, which the "
                                        "eviction subresource does not support.")
            pdb = covering[0]
            bmeta, status = pdb["metadata"], pdb.get("status") or {}
            if not disruption.healthy(pod):
                policy = (pdb.get("spec") or {}).get("unhealthyPodEvictionPolicy", "IfHealthyBudget")
                if policy == "AlwaysAllow" or status.get("currentHealthy", 0) >= status.get("desiredHealthy", 0) > 0:
                    return
            # upstream's checkAndDecrement, in its order and words: a budget not yet observed is
            # a 429 to retry in 10 s, a negative allowance or too many unconfirmed evictions the
            # budget's 403, none left the 429 naming its counts
            if status.get("observedGeneration", 0) < bmeta.get("generation", 1):
                raise ApiError(429, "TooManyRequests", "Cannot evict pod as it would violate the pod's disruption "
                               "budget.", {"causes": [{"reason": "DisruptionBudget",
                                                       "message": f"The disruption budget {bmeta['name']} is still "
                                                                  "being processed by the server."}],
                                           "retryAfterSeconds": 10})
            for broken, why in ((status.get("disruptionsAllowed", 0) < 0, "pdb disruptions allowed is negative"),
                                (len(status.get("disruptedPods") or {}) > MAX_DISRUPTED_PODS,
                                 "DisruptedPods map too big - too many evictions not confirmed by PDB controller")):
                if broken:
                    raise ApiError(403, "Forbidden", f'poddisruptionbudget.policy "{bmeta["name"]}" is forbidden: '
                                   f"{why}", {"name": bmeta["name"], "group": "policy",
                                              "kind": "poddisruptionbudget"})
            if status.get("disruptionsAllowed", 0) == 0:
                raise ApiError(429, "TooManyRequests",
                               "Cannot evict pod as it would violate the pod's disruption budget.",
                               {"causes": [{"reason": "DisruptionBudget",
                                            "message": f"The disruption budget {bmeta['name']} needs "
                                                       f"{status.get('desiredHealthy', 0)} healthy pods and has "
                                                       f"{status.get('currentHealthy', 0)} currently"}]})
            if DRY_RUN.get():  # checked, as upstream's checkAndDecrement, but not charged
                return
            key = budgets.key(namespace, bmeta["name"])
            got = await self.store.get(key)
            if got is None or str(got.mod_revision) != bmeta.get("resourceVersion"):
                continue  # the budget changed since the list: look again
            stored = orjson.loads(got.value)  # as stored (the listed copy carries its presented version)
            charged = stored.setdefault("status", {})
            charged["disruptionsAllowed"] = status["disruptionsAllowed"] - 1
            charged.setdefault("disruptedPods", {})[name] = _now()
            try:
                await self._replace(budgets, key, bmeta["name"], stored, got.mod_revision)
                return
            except (store.Conflict, store.NotFound):
                continue
        raise ApiError(429, "TooManyRequests", "the disruption budget kept changing; try again")

    @staticmethod
    def _parse_json(body: bytes) -> Any:
        try:
            return orjson.loads(body)
        except orjson.JSONDecodeError as e:
            raise ApiError.bad_request(f"the request body is not valid JSON: {e}") from e

    async def _delete_collection(self, rtype: ResourceType, namespace: str | None, query: dict[str, str],
                                 options: dict[str, Any]) -> dict[str, Any]:
        """Delete, as one DELETE each with ``options``, what the list with these selectors
        shows (upstream's DeleteCollection: a pod's grace period and an object's finalizers
        hold as for a single delete); returns what each delete returned."""
        check_list_integers(query)
        # the list's options as a list's, validated and honoured (a resourceVersion that does not
        # parse, a match without one, a continue token that does not decode: its 400 or 422,
        # nothing deleted); every page, whatever ``limit`` says, as upstream's store pages on
        listed = await self._list(rtype, namespace, {k: v for k, v in query.items() if k in _COLLECTION_OPTIONS})
        deleted = []
        for raw in listed.items:
            meta = orjson.loads(raw)["metadata"]
            try:
                deleted.append(await self._delete(rtype, meta.get("namespace"), meta["name"], options))
            except ApiError as e:
                if e.code != 404:  # gone meanwhile: skip it, as upstream
                    raise
        return {"kind": rtype.list_kind, "apiVersion": rtype.api_version,
                "metadata": {"resourceVersion": str(listed.revision)}, "items": deleted}

    # -- watch -------------------------------------------------------------------------
    async def _webhook_converted_items(self, rtype: ResourceType, items: list[WatchItem]) -> list[WatchItem]:
        """A watch batch's objects in ``rtype``'s version (a failure ends the watch, as upstream's)."""
        events = [i for i, item in enumerate(items) if item.type not in ("ERROR", "BOOKMARK")]
        raws = await self._webhook_converted(rtype, [items[i].raw for i in events], listing=True)
        out = list(items)
        for i, raw in zip(events, raws, strict=True):
            if raw is not items[i].raw:
                out[i] = WatchItem.of(items[i].type, raw)
        return out

    async def _watch(self, rtype: ResourceType, namespace: str | None, query: dict[str, str],
                     receive: Receive, send: Send, table: str | None = None,
                     metadata_only: str | None = None, table_version: str = "v1",
                     exchange: Exchange | None = None, legacy_path: bool = False, name: str | None = None) -> None:
        """Stream ``self.reads.watch`` as newline-delimited JSON until the client goes,
        ``timeoutSeconds`` pass or the server ends the watch; with ``table`` (its
        includeObject), each object is a one-row Table (of meta.k8s.io ``table_version``);
        with ``metadata_only`` (its apiVersion), a PartialObjectMetadata. ``exchange``: the
        HTTP exchange under ``send``, where the server's own protocol serves the request.
        ``legacy_path``, ``name``: asked for by a deprecated ``/watch/`` path, perhaps of one
        object (``reads.watch_options``)."""
        deadline = time.monotonic() + _watch_timeout(query)
        options = watch_options(rtype, namespace, query, deadline, legacy_path, name)
        stream = await self.reads.watch(rtype, namespace, options)
        upgraded = False
        if exchange is not None and exchange.websocket_requested:
            # served over a websocket, as upstream's watch handler serves one (api/websocket.py);
            # the handshake's own refusals are x/net's bare answers, after the watch was made
            refused = exchange.accept_websocket()
            upgraded = refused is None
            if refused is not None:
                await stream.aclose()
                code, head, text = refused
                headers = [(b"content-type", b"text/plain; charset=utf-8")]
                if head:
                    header, _, value = head.strip().partition(b": ")
                    headers.append((header, value))
                await send({"type": "http.response.start", "status": code, "headers": headers})
                await send({"type": "http.response.body", "body": text})
                return
        first = [True]

        def line(item: WatchItem) -> bytes:
            if metadata_only and item.type != "ERROR":  # a bookmark is one too, as upstream transforms it
                return orjson.dumps({"type": item.type, "object": partial(item.raw, metadata_only)}) + b"\n"
            if item.type in ("ERROR", "BOOKMARK") or (table is None and not _converted(rtype)):
                return item.line
            if table is None:  # the requested version's shape (a custom resource's pruned and defaulted)
                return b'{"type":"%s","object":%s}\n' % (item.type.encode(), _presented(rtype, item.raw))
            obj = orjson.loads(item.raw)
            if rtype.custom is not None:
                obj = present(rtype, obj)
            row = as_table(rtype.plural, [obj], {"resourceVersion": obj["metadata"]["resourceVersion"]},
                           table, columns=first[0], custom=rtype.custom)
            if table_version != "v1":
                _as_version(row, table_version)
            first[0] = False
            return orjson.dumps({"type": item.type, "object": row}) + b"\n"

        async def disconnected() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass

        # a custom resource's watch also ends when its CRD changes or goes, as upstream
        gone = asyncio.ensure_future(disconnected() if rtype.custom is None else
                                     self.crds.until_retired(rtype, disconnected()))

        # the cached lines as they are (every informer's and kubelet's watch): taken without
        # a call a line that would find it so each time
        plain = not metadata_only and table is None and not _converted(rtype)
        webhook_conversion = rtype.custom is not None and rtype.custom.conversion is not None \
            and self.conversions is not None

        write_through = getattr(stream, "write_through", None)  # the watch cache's streams have it
        if plain and exchange is not None and write_through is not None:
            # live events written in the turn that fans them out (watchcache/reads.py, CacheWatch);
            # ``send`` adds nothing to a plain watch's body that ``exchange.send_now`` does not
            def write(items: list[WatchItem]) -> None:
                assert exchange is not None
                exchange.send_now(b"".join([item.line for item in items]))

            write_through(exchange.writable, write)

        async def pump() -> None:
            # one task for the whole watch: waiting on the stream and on the client's
            # going together, per batch of events, cost a task and an asyncio.wait each
            async for items in stream:
                if items:
                    if webhook_conversion:  # a batch's objects in one review (api/crdconversion.py)
                        items = await self._webhook_converted_items(rtype, items)
                    body = b"".join([item.line for item in items] if plain else map(line, items))
                    ended = items[-1].type == "ERROR"
                    del items  # their lines are in the body: not both alive while a slow client drains
                    await send({"type": "http.response.body", "body": body, "more_body": True})
                    del body
                    if ended:
                        return

        pumping: asyncio.Future[None] | None = None
        try:
            # (101 for a websocket: what upstream's audit records, its Hijack faking the status)
            await send({"type": "http.response.start", "status": 101 if upgraded else 200, "headers": JSON})
            pumping = asyncio.ensure_future(pump())
            await asyncio.wait({pumping, gone}, timeout=max(deadline - time.monotonic(), 0),
                               return_when=asyncio.FIRST_COMPLETED)
            failed = pumping.exception() if pumping.done() and not pumping.cancelled() else None
            if isinstance(failed, OSError):
                return  # the client went away mid-write
            if failed is not None:  # the watch ends; the client watches again from where it was
                log.warning("watch of %s ended by %r", rtype.plural, failed)
            if not pumping.done():  # the deadline, the client's going, or (a custom resource's) its CRD's
                pumping.cancel()
                with contextlib.suppress(asyncio.CancelledError, OSError, store.StoreError):
                    await pumping
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except OSError:
            pass  # the client went away mid-write
        finally:
            gone.cancel()
            if pumping is not None and not pumping.done():
                pumping.cancel()
                with contextlib.suppress(asyncio.CancelledError, OSError, store.StoreError):
                    await pumping
            await stream.aclose()


# -- helpers ---------------------------------------------------------------------------
class Written(dict[str, Any]):
    """An object as a write returned it, with the JSON it is served as (``raw``).
    Handlers may still read it as a dict; ``_json`` sends ``raw`` without encoding again."""

    __slots__ = ("raw",)

    def __init__(self, obj: dict[str, Any], raw: bytes) -> None:
        super().__init__(obj)
        self.raw = raw


def _converted(rtype: ResourceType) -> bool:
    """Whether the served JSON of this type differs from the cached (stored) JSON."""
    return rtype.custom is not None or conversion_for(rtype.group, rtype.version, rtype.kind) is not None


def _presented(rtype: ResourceType, raw: bytes) -> bytes:
    """Stored bytes as the requested version shows them: a custom resource's (``registry.custom.present``)
    or a type stored as another version's (``registry.conversion``)."""
    conversion = conversion_for(rtype.group, rtype.version, rtype.kind)
    if conversion is not None:
        return served_bytes(conversion, raw)
    return go_json(orjson.dumps(present(rtype, orjson.loads(raw))))  # (its floats as Go writes them)


def _field_selector_of(conversion: Conversion, selector: str) -> str:
    """A field selector of the served version, in the stored version's field names."""
    terms = []
    for term in selector.split(","):
        cut = min((i for i in (term.find("!="), term.find("=")) if i >= 0), default=len(term))
        if not term.strip() or cut == len(term):
            terms.append(term)  # (refused, or dropped, as it is, when the selector is parsed)
            continue
        label = conversion.field_label(term[:cut].strip())
        if label is None:
            raise ApiError.bad_request(f"field label not supported: {term[:cut].strip()}")
        terms.append(label + term[cut:])
    return ",".join(terms)


def _list_meta(listed: Listed) -> dict[str, Any]:
    meta: dict[str, Any] = {"resourceVersion": str(listed.revision)}
    token = listed.continue_token
    if token is not None:
        meta["continue"] = token
        if listed.remaining is not None:
            meta["remainingItemCount"] = listed.remaining
    return meta


LIST_CHUNK = 1000  # items per body message of a large list response


async def _read_body(receive: Receive) -> bytes:
    """The body's parts joined, at most ``MAX_BODY`` bytes (413 as soon as more arrive)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ApiError(400, "BadRequest", "the client went away")
        chunk: bytes = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY:
            raise ApiError.too_large(BODY_LIMIT)
        if not message.get("more_body"):
            return b"".join(chunks) + chunk if chunks else chunk
        chunks.append(chunk)


async def _send_list(send: Send, rtype: ResourceType, listed: Listed) -> None:
    """The list response, with the items' JSON spliced in as they are (never
    re-serialised): in one body when small, else in chunks of ``LIST_CHUNK``
    items (HTTP chunked encoding), yielding between them, so a list of a million
    objects is neither one huge bytes object nor a long stall of the loop."""
    head = orjson.dumps({"kind": rtype.list_kind, "apiVersion": rtype.api_version, "metadata": _list_meta(listed)})
    head = head[:-1] + b',"items":['
    items = listed.items
    if len(items) <= LIST_CHUNK:
        body = head + b",".join(items) + b"]}\n"
        await send({"type": "http.response.start", "status": 200,
                    "headers": [*JSON, (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})
        return
    await send({"type": "http.response.start", "status": 200, "headers": JSON})
    await send({"type": "http.response.body", "body": head, "more_body": True})
    for i in range(0, len(items), LIST_CHUNK):
        part = b",".join(items[i:i + LIST_CHUNK])
        await send({"type": "http.response.body", "body": b"," + part if i else part, "more_body": True})
        await asyncio.sleep(0)
    await send({"type": "http.response.body", "body": b"]}\n"})  # (upstream's streamed lists end so too)


def _as_version(table: dict[str, Any], version: str) -> dict[str, Any]:
    """A meta.k8s.io/v1 Table (and its rows' PartialObjectMetadata) as of meta.k8s.io ``version``."""
    table["apiVersion"] = f"meta.k8s.io/{version}"
    for row in table.get("rows") or []:
        obj = row.get("object")
        if isinstance(obj, dict) and obj.get("kind") == "PartialObjectMetadata":
            obj["apiVersion"] = table["apiVersion"]
    return table


def _table_version(table: dict[str, Any], out: Output) -> dict[str, Any]:
    """``table`` in the version the request negotiated (``Accept: ...;as=Table;v=v1beta1``)."""
    return _as_version(table, out.version) if out.version and out.version != "v1" else table


def _accept(scope: Scope) -> str:
    """The request's ``Accept`` header ("" without one)."""
    for name, value in scope["headers"]:
        if name == b"accept":
            return str(value.decode("latin-1").strip())
    return ""


def _accept_and_agent(scope: Scope) -> tuple[str, bytes]:
    """The request's ``Accept`` header ("" without one) and its ``User-Agent`` (b"" without
    one), in one walk of the headers."""
    accept, agent = b"", b""
    for name, value in scope["headers"]:
        if name == b"accept":
            accept = value
            if agent:
                break
        elif name == b"user-agent":
            agent = value
            if accept:
                break
    return accept.decode("latin-1").strip(), agent


def _negotiated(accept: str, endpoint: int) -> Output:
    """What ``accept`` gets from the endpoint (api/negotiation.py), kept for the writer; 406 if nothing."""
    found = negotiate(accept, endpoint)
    if found is None:
        raise NOT_ACCEPTABLE
    OUTPUT.set(found)
    return found


def _finalized(meta: dict[str, Any]) -> bool:
    """An object being deleted whose finalizers are gone and whose grace period is over
    (upstream's ShouldDeleteDuringUpdate): a write that leaves it so deletes it."""
    return bool(meta.get("deletionTimestamp")) and not meta.get("finalizers") \
        and not meta.get("deletionGracePeriodSeconds")


def _graceful_pod_delete(pod: dict[str, Any], options: dict[str, Any]) -> bool | None:
    """Graceful deletion of a pod, as kube-apiserver's BeforeDelete with the pod strategy's
    CheckGracefulDelete: a pod bound to a node and not finished gets ``deletionTimestamp =
    now + grace`` and ``deletionGracePeriodSeconds = grace`` (grace: the options', else
    ``spec.terminationGracePeriodSeconds``), and stays until its kubelet deletes it with
    grace 0; a second delete may only shorten the grace. Changes ``pod`` in place.

    True: ``pod`` was marked (store it); False: a deletion is pending and this one changes
    nothing; None: no grace, delete now (or mark for finalizers) as any object."""
    meta, spec = pod.setdefault("metadata", {}), pod.get("spec") or {}
    asked = options.get("gracePeriodSeconds")
    if asked is not None and (isinstance(asked, bool) or not isinstance(asked, int)):
        raise ApiError.bad_request(f"gracePeriodSeconds must be an integer, not {asked!r}")
    if meta.get("deletionTimestamp"):
        current = meta.get("deletionGracePeriodSeconds")
        if not current:
            return None if not meta.get("finalizers") else False
        if asked is None or asked >= current:
            return False
        start = _parse_time(meta["deletionTimestamp"]) - current
        period = max(0, asked)
    else:
        period = asked if asked is not None else spec.get("terminationGracePeriodSeconds", 30)
        if not spec.get("nodeName") or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            period = 0
        if period < 0:
            period = 1
        if period == 0:
            return None
        start = time.time()
    if period == 0:
        if not meta.get("finalizers"):
            return None
        meta["deletionGracePeriodSeconds"] = 0
        return True
    if not meta.get("deletionTimestamp"):
        _bump_generation(meta)
    meta["deletionTimestamp"] = _format_time(start + period)
    meta["deletionGracePeriodSeconds"] = period
    return True


def _bump_generation(meta: dict[str, Any]) -> None:
    """An object's first ``deletionTimestamp`` changes what its controllers must do: upstream
    counts it as a new generation (rest.BeforeDelete for graceful deletion, the store's
    markAsDeleting for finalizers), for types that keep one."""
    generation = meta.get("generation")
    if isinstance(generation, int) and not isinstance(generation, bool) and generation > 0:
        meta["generation"] = generation + 1


def _parse_time(ts: str) -> float:
    return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()


def _format_time(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Gone(dict[str, Any]):
    """An object a delete removed at once (not marked for finalizers or a grace period)."""

    __slots__ = ()


# The built-in types whose immediate delete answers with the object, as their upstream
# storage's ReturnDeletedObject (custom resources too); the others answer a Success Status
RETURN_DELETED_OBJECT = frozenset({"pods", "services", "serviceaccounts", "persistentvolumes",
                                   "persistentvolumeclaims"})


def _deleted_status(rtype: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata") or {}
    details: dict[str, Any] = {"name": meta.get("name", "")}
    if rtype.group:
        details["group"] = rtype.group
    details["kind"] = rtype.plural
    details["uid"] = meta.get("uid", "")
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details}


JOB_ORPHANS_WARNING = ("child pods are preserved by default when jobs are deleted; set propagationPolicy=Background "
                       "to remove them or set propagationPolicy=Orphan to suppress this warning")


def _propagation_finalizer(rtype: ResourceType, options: dict[str, Any]) -> str | None:
    """The garbage collector's finalizer that a delete's options ask for: ``orphan`` for
    ``propagationPolicy: Orphan`` (or the older ``orphanDependents: true``), ``foregroundDeletion``
    for ``Foreground``; None for ``Background``. Without either, the default is Background, except
    for batch/v1 Jobs: Orphan, kept by upstream for compatibility, with a warning."""
    policy = options.get("propagationPolicy")
    orphan = options.get("orphanDependents")
    if policy is None and orphan is None and (rtype.group, rtype.plural) == ("batch", "jobs"):
        add_warning(JOB_ORPHANS_WARNING)
        return "orphan"
    if policy == "Orphan" or (policy is None and orphan is True):
        return "orphan"
    if policy == "Foreground":
        return "foregroundDeletion"
    return None


# the ListOptions a deletecollection's list is made with (``limit`` and ``timeoutSeconds`` are
# only checked: upstream's DeleteCollection lists every page)
_COLLECTION_OPTIONS = frozenset(("labelSelector", "fieldSelector", "resourceVersion", "resourceVersionMatch",
                                 "continue", "sendInitialEvents"))


def _protobuf_as_json(rtype: ResourceType, body: bytes, subresource: str | None = None, kind: str = "") -> bytes:
    """A protobuf request body as JSON (api/protobuf), its apiVersion the URL's and its kind
    ``kind`` (the URL's, a DELETE's DeleteOptions) where the envelope leaves them empty, as
    upstream's decoders default them: 415 for custom resources and a type with no protobuf form (as
    upstream), 400 for a body that does not decode. An envelope naming another kind that has no
    protobuf form here becomes a JSON body naming it, refused as such (400 ``no kind "X" is
    registered``, as upstream's scheme answers); not a subresource's, whose body is of another
    type than the URL's (an eviction of a version without a form here is 415)."""
    if not body:
        return body  # a DELETE without options
    if rtype.custom is not None:
        raise ApiError.unsupported_media_type(("application/json", "application/yaml"))
    try:
        return protobuf.as_json(body, default=None if subresource else (rtype.api_version, kind or rtype.kind))
    except protobuf.UnknownKind as e:
        if subresource or (e.api_version, e.kind) == (rtype.api_version, kind or rtype.kind):
            raise ApiError.unsupported_media_type(ACCEPTED_BODIES) from e
        return orjson.dumps({"apiVersion": e.api_version, "kind": e.kind})
    except protobuf.ProtobufError as e:
        raise ApiError.bad_request(f"the protobuf request body could not be decoded: {e}") from e


def _replay(body: bytes) -> Receive:
    """A ``receive`` that gives ``body`` once, then waits for the client to go."""
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.Event().wait()
        return {"type": "http.disconnect"}

    return receive


_SCALE_KIND = ("autoscaling", "v1", "Scale")
# what NodeRestriction admits a kubelet's writes of (api/nodeauthz.py's NodeAuthorizer.admit)
_NODE_RESTRICTED = frozenset({"nodes", "pods", "persistentvolumeclaims", "leases", "csinodes", "resourceslices",
                              "certificatesigningrequests", "podcertificaterequests"})


def _as_subresource_object(obj: dict[str, Any], api_version: str, kind: str, namespace: str | None) -> dict[str, Any]:
    """A subresource's body as upstream's admission sees it, decoded: its type filled in and
    the request's namespace (``EnsureObjectNamespaceMatchesRequestNamespace``)."""
    meta = obj.get("metadata")
    meta = dict(meta) if isinstance(meta, dict) else {}
    if namespace and not meta.get("namespace"):
        meta["namespace"] = namespace
    return {**obj, "apiVersion": api_version, "kind": kind, "metadata": meta}


_STANDARD_FINALIZERS = ("kubernetes", "orphan", "foregroundDeletion")


def _namespace_finalizer_causes(finalizers: list[str]) -> list[dict[str, str]]:
    """A namespace's ``spec.finalizers`` as upstream's ValidateNamespaceFinalizeUpdate checks
    them: each a qualified name, and one without a prefix a standard finalizer."""
    causes: list[dict[str, str]] = []
    for i, f in enumerate(finalizers):
        quoted = f'"{f}"'
        whys = label_key_problems(f)
        if "/" not in f and f not in _STANDARD_FINALIZERS:
            whys.append("name is neither a standard finalizer name nor is it fully qualified")
        causes.extend({"reason": "FieldValueInvalid", "field": f"spec.finalizers[{i}]",
                       "message": f"Invalid value: {quoted}: {why}"} for why in whys)
    return causes


# ObjectMeta's string fields: a Binding's metadata of these only (a scheduler's) decodes
_STRING_META = frozenset(("name", "generateName", "namespace", "uid", "resourceVersion", "selfLink"))
# an ObjectReference's fields, every one a string
_REFERENCE_FIELDS = frozenset(("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath"))


def _plain_binding(binding: dict[str, Any]) -> bool:
    """Whether a Binding is one that decodes for sure, sparing the bind its schema's walk
    (5 us of a 125 us bind): strings in ObjectMeta's string fields and in its target (an
    ObjectReference, whose fields are all strings), and nothing else."""
    meta, target = binding.get("metadata"), binding.get("target")
    return (type(meta) is dict and meta.keys() <= _STRING_META and all(type(v) is str for v in meta.values())
            and type(target) is dict and target.keys() <= _REFERENCE_FIELDS
            and all(type(v) is str for v in target.values())
            and binding.keys() <= {"apiVersion", "kind", "metadata", "target"}
            and type(binding.get("apiVersion", "")) is str and type(binding.get("kind", "")) is str)


def _precondition_failed(rtype: ResourceType, key: bytes, name: str, what: str, wanted: object,
                         got: object) -> ApiError:
    """Upstream's storage ``Preconditions.Check`` failing on ``what`` (UID, ResourceVersion): an
    invalid-object StorageError, which the registry answers as a 409."""
    return ApiError.conflict(rtype, name, f"StorageError: invalid object, Code: 4, Key: {key.decode()}, "
                             f"ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: {what} in "
                             f"precondition: {wanted}, {what} in object meta: {got}")


def _binding_name(body: bytes) -> str:
    """The pod a Binding posted to ``namespaces/{ns}/bindings`` names (its ``metadata.name``)."""
    meta = json_object(body, "the binding").get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    if not isinstance(name, str) or not name:
        raise ApiError(422, "Invalid", 'Binding "" is invalid: metadata.name: Required value: name or generateName '
                       "is required")
    return name


# upstream's SimpleNameGenerator: at most 58 characters of the prefix, then 5 random ones
_GENERATED_PREFIX = 63 - 5


# where a ResourceClaim's and a ResourceClaimTemplate's device requests are
_DEVICE_REQUESTS = {"resourceclaims": ("spec",), "resourceclaimtemplates": ("spec", "spec")}
ADMIN_ACCESS_LABEL = "resource.kubernetes.io/admin-access"


def _admin_access_causes(plural: str, obj: dict[str, Any], namespace: bytes) -> list[dict[str, str]]:
    """Upstream's ``AuthorizedForAdmin`` (the claim and claim template strategies, on create;
    their spec is immutable): a request with ``adminAccess: true`` needs its namespace
    labelled ``resource.kubernetes.io/admin-access: "true"`` (KEP-5018)."""
    spec: Any = obj
    for step in _DEVICE_REQUESTS[plural]:
        spec = spec.get(step) if isinstance(spec, dict) else None
    devices = spec.get("devices") if isinstance(spec, dict) else None
    requests = devices.get("requests") if isinstance(devices, dict) else None
    for i, request in enumerate(requests if isinstance(requests, list) else ()):
        exactly = request.get("exactly") if isinstance(request, dict) else None
        if isinstance(exactly, dict) and exactly.get("adminAccess") is True:
            labels = (orjson.loads(namespace).get("metadata") or {}).get("labels") or {}
            if labels.get(ADMIN_ACCESS_LABEL) == "true":
                return []
            return [{"reason": "FieldValueForbidden", "field": f"spec.devices.requests[{i}].adminAccess",
                     "message": f"Forbidden: admin access to devices requires the `{ADMIN_ACCESS_LABEL}: true` "
                                "label on the containing namespace"}]
    return []


# types whose strategy's name generator is upstream's noopNameGenerator: the name is the
# generateName itself (an IPAddress is named by its address)
_NAMED_AS_GENERATED = frozenset({("networking.k8s.io", "ipaddresses")})


def _generated_name(rtype: ResourceType, generate: str) -> str:
    if (rtype.group, rtype.plural) in _NAMED_AS_GENERATED:
        return generate
    return generate[:_GENERATED_PREFIX] + random_suffix(5)


def _generate_name_causes(plural: str, generate: str, generated: str) -> list[dict[str, str]]:
    """The 422 causes of a ``generateName`` and of the name made of it, as ValidateObjectMeta
    reports them: the prefix is checked as a name whose trailing dash is allowed."""
    masked = generate[:-1] + "a" if generate.endswith("-") else generate
    causes = [{**c, "field": "metadata.generateName",
               "message": c["message"].replace(f'"{masked}"', f'"{generate}"', 1)}
              for c in validate_name(plural, masked)]
    return causes + validate_name(plural, generated)


def _non_negative(raw: Any, default: int, what: str) -> int:
    """``raw`` as a non-negative integer (``default`` when absent), or a 400 naming ``what``."""
    if raw in (None, ""):
        return default
    value = go_int64(raw) if isinstance(raw, str) else raw if type(raw) is int else None
    if value is None:
        raise ApiError.bad_request(f"invalid {what}: {raw!r}")
    if value < 0:
        raise ApiError.bad_request(f"invalid {what}: {raw!r} is negative")
    return value


def _watch_timeout(query: dict[str, str]) -> float:
    """The seconds a watch runs. Without ``timeoutSeconds`` (or 0), as upstream:
    --min-request-timeout (1800 s) times 1 to 2, so that the watches of clients started
    together do not all end together. A negative one is no error upstream (ListOptions'
    validation leaves it alone): the watch's context and timer (``ListResource``,
    ``serveWatch``) are past their deadline at once, and the watch ends, 200 and empty."""
    raw = query.get("timeoutSeconds") or ""
    seconds = go_int64(raw) if raw else 0
    if seconds is None:
        raise ApiError.bad_request(f"invalid timeoutSeconds: {raw!r}")
    return max(seconds, 0) if seconds else MIN_REQUEST_TIMEOUT * (1 + random.random())


def _revision_param(raw: str | None) -> int:
    return _non_negative(raw, 0, "resource version")


MIN_REQUEST_TIMEOUT = 1800  # seconds: kube-apiserver's --min-request-timeout, a watch's default time


# Attempts of a write that races others on one object (read, compute, write expecting
# the revision read). Upstream's GuaranteedUpdate retries without a bound; each
# attempt here waits for a group commit, so a few dozen writers to one object settle.
def _include_object(query: dict[str, str]) -> str:
    """A Table's ``includeObject`` (absent or empty: Metadata), validated as upstream's
    ``optionsForTransform`` validates the TableOptions of a Table request only (another
    request ignores it): 400 ``Unable to convert to Table as requested: ...``."""
    include = query.get("includeObject") or "Metadata"
    if include not in ("None", "Metadata", "Object"):
        raise ApiError.bad_request(f"Unable to convert to Table as requested: includeObject: Invalid value: "
                                   f"{go_quote(include)}: must be 'Metadata', 'Object', 'None', or empty")
    return include


def _decoded(rtype: ResourceType, body: bytes) -> tuple[dict[str, Any], bytes]:
    """A create's or update's body as a JSON object, with the body to read it again from; a
    body that is no JSON, or JSON of another type, is 400 in kube-apiserver's words
    (``transformDecodeError`` of what its serializer's ``Interpret`` said, in Go's
    ``encoding/json`` words, and the body's first bytes): ``kubectl create --raw ... -f pod.yaml``
    sends YAML as JSON. What Go reads and orjson does not (invalid UTF-8, a lone surrogate
    escape: U+FFFD; an integer past 64 bits) is read as Go reads it (``gojson.loads``), and the
    body given back is that reading's JSON; a number past a float64's range is Go's refusal. A
    custom resource's integer from 2^63 to 2^64 - 1, which orjson reads as an int, is the float64
    Go's decoder into unstructured makes of it, as Go writes it back (``gonumbers.uint64s_written_back``)."""
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError:
        if syntax_error(body) is None:
            try:
                value = gojson_loads(body)
            except NumberOutOfRange as e:
                raise ApiError.bad_request(f'{rtype.kind} in version "{rtype.version}" cannot be handled as a '
                                           f"{rtype.kind}: {e}") from None
            if isinstance(value, dict):
                return value, orjson.dumps(value)
        else:
            value = None
    else:
        if isinstance(value, dict):
            if rtype.custom is not None and may_hold_uint64s(body):
                uint64s_written_back(value)
            return value, body
        if value is None:
            raise ApiError.bad_request("the request body must be a JSON object")
    if value is None and syntax_error(body) is None:
        raise ApiError.bad_request("the request body must be a JSON object")
    raise ApiError.bad_request(f"the object provided is unrecognized (must be of type {rtype.kind}): "
                               f"{interpret_error(body, value)} ({summarize(body)})")


IMMORTAL_NAMESPACES = frozenset({"default", "kube-system", "kube-public"})  # never deleted (upstream)
# upstream's MaxDisruptedPodSize: a budget recording more evictions its controller has not seen refuses more
MAX_DISRUPTED_PODS = 2000
WRITE_ATTEMPTS = 64

# PodSecurity admission: the pod subresources it leaves alone (upstream's ignoredPodSubresources),
# the workloads whose templates it checks, and the label prefix that says a namespace has a policy
_PSA_IGNORED_POD_SUBRESOURCES = frozenset(("exec", "attach", "binding", "eviction", "log", "portforward", "proxy",
                                           "status"))
_PSA_WORKLOADS = frozenset(podsecurity.WORKLOAD_RESOURCES)
_PSA_LABEL = podsecurity.LABEL_PREFIX.encode()
# the admission policies (None) and their bindings (the policies' resource) whose parameters'
# readers are checked at their writes (api/paramauthz.py)
_PARAM_AUTHORIZED: dict[tuple[str, str], str | None] = {
    ("admissionregistration.k8s.io", "validatingadmissionpolicies"): None,
    ("admissionregistration.k8s.io", "mutatingadmissionpolicies"): None,
    ("admissionregistration.k8s.io", "validatingadmissionpolicybindings"): "validatingadmissionpolicies",
    ("admissionregistration.k8s.io", "mutatingadmissionpolicybindings"): "mutatingadmissionpolicies",
}
# the labels of a pod's evaluation in a fully privileged namespace (most pods'), by operation
_PSA_PRIVILEGED_ALLOWED = {op: ("allow", "privileged", "latest", "enforce", op, "pod", "")
                           for op in ("create", "update")}


def _psa_privileged_allowed(operation: str, subresource: str | None) -> tuple[str, ...]:
    if not subresource:
        return _PSA_PRIVILEGED_ALLOWED[operation]
    return (*_PSA_PRIVILEGED_ALLOWED[operation][:-1], subresource)


_SERVER_MINOR = int(KUBE_MINOR)

# the StorageObjectInUseProtection admission plugin's finalizers (controllers/volumes.py removes them)
# and PodGroupProtection's (controllers/podgroupprotection.py)
_PROTECTION_FINALIZERS = {("", "persistentvolumeclaims"): "kubernetes.io/pvc-protection",
                          ("", "persistentvolumes"): "kubernetes.io/pv-protection",
                          ("scheduling.k8s.io", "podgroups"): "scheduling.k8s.io/podgroup-protection"}


def _check_preconditions(rtype: ResourceType, name: str, pre: Mapping[str, Any], meta: Mapping[str, Any],
                         revision: int) -> None:
    """A delete's ``preconditions`` against the object's stored version: 409 in the words of
    upstream's BeforeDelete when its ``uid`` or ``resourceVersion`` differs, which names the
    object by its kind (``ConfigMap``, ``Deployment.apps``), not its resource."""
    what = f"{rtype.kind}.{rtype.group}" if rtype.group else rtype.kind
    details = {"name": name, **({"group": rtype.group} if rtype.group else {}), "kind": rtype.kind}
    if pre.get("uid") not in (None, meta.get("uid")):
        raise ApiError(409, "Conflict", f'Operation cannot be fulfilled on {what} "{name}": the UID in the '
                       f"precondition ({pre['uid']}) does not match the UID in record ({meta.get('uid', '')}). "
                       "The object might have been deleted and then recreated", details)
    if pre.get("resourceVersion") not in (None, str(revision)):
        raise ApiError(409, "Conflict", f'Operation cannot be fulfilled on {what} "{name}": the ResourceVersion '
                       f"in the precondition ({pre['resourceVersion']}) does not match the ResourceVersion in "
                       f"record ({revision}). The object might have been modified", details)


def _api_group(group: str, versions: list[str]) -> dict[str, Any]:
    """An APIGroup of discovery, its versions in order (api/discovery.py), the first preferred."""
    vs = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
    return {"kind": "APIGroup", "apiVersion": "v1", "name": group, "versions": vs, "preferredVersion": vs[0]}


# the types whose strategy keeps the status a create sends, where the others' reset it: a
# kubelet registers its Node with its status; a ServiceCIDR's PrepareForCreate changes
# nothing (its comment notwithstanding), nor does its PrepareForUpdate, so an update of the
# object itself may write its status too. A server-side apply never does: the status is
# among their strategies' reset fields
STATUS_KEPT_AT_CREATE = frozenset({("", "nodes"), ("networking.k8s.io", "servicecidrs")})
STATUS_KEPT_AT_UPDATE = frozenset({("networking.k8s.io", "servicecidrs")})


def _initial_status(plural: str) -> dict[str, Any]:
    """The status a create starts an object with (a new dict each time)."""
    if plural == "pods":
        return {"phase": "Pending"}
    if plural == "namespaces":
        return {"phase": "Active"}
    if plural == "services" or plural == "ingresses":
        return {"loadBalancer": {}}  # a struct Go always serialises
    if plural in ("persistentvolumeclaims", "persistentvolumes"):
        return {"phase": "Pending"}
    if plural == "volumeattachments":
        return dict(INITIAL_ATTACHMENT_STATUS)  # (a Go bool without omitempty)
    return {}


# metadata.generation, type by type, as upstream's registry strategies keep it (1.37):
# the types named here get 1 at create (their PrepareForCreate) and a step when one of
# the named top-level fields changes (their PrepareForUpdate); custom resources step
# on any change but to their metadata (apiextensions' customresource strategy). Every
# other type (ConfigMaps, Secrets, Namespaces, Services, Nodes, Endpoints, Events,
# ServiceAccounts, PersistentVolume(Claim)s, quotas, limit ranges, ControllerRevisions,
# Leases, StorageClasses, the other CSI objects, RuntimeClasses, RBAC, Workloads, PodGroups, ResourceClaims and
# their templates) has none: what a create carries is kept (BeforeCreate leaves it), an
# update keeps the old value (BeforeUpdate), and nothing moves it but a deletion's bump
# of a value above 0 (BeforeDelete, markAsDeleting).
_SPEC = ("spec",)
GENERATION: dict[tuple[str, str], tuple[str, ...]] = {
    ("", "pods"): _SPEC,  # set for every pod since 1.33 (KEP-5067), ungated
    ("", "replicationcontrollers"): _SPEC,
    ("", "podtemplates"): ("template",),
    ("apps", "deployments"): _SPEC,  # upstream steps on annotation changes too: not here (docs)
    ("apps", "replicasets"): _SPEC,
    ("apps", "statefulsets"): _SPEC,
    ("apps", "daemonsets"): _SPEC,
    ("batch", "jobs"): _SPEC,
    ("batch", "cronjobs"): _SPEC,
    ("policy", "poddisruptionbudgets"): _SPEC,
    ("autoscaling", "horizontalpodautoscalers"): _SPEC,  # HPAGeneration: beta, on, since 1.37
    ("networking.k8s.io", "ingresses"): _SPEC,
    ("networking.k8s.io", "ingressclasses"): _SPEC,
    ("networking.k8s.io", "networkpolicies"): _SPEC,
    ("discovery.k8s.io", "endpointslices"): ("addressType", "endpoints", "ports"),  # all but metadata
    ("scheduling.k8s.io", "priorityclasses"): (),  # 1 at create, never stepped by an update
    ("admissionregistration.k8s.io", "mutatingwebhookconfigurations"): ("webhooks",),
    ("admissionregistration.k8s.io", "validatingwebhookconfigurations"): ("webhooks",),
    ("admissionregistration.k8s.io", "validatingadmissionpolicies"): _SPEC,
    ("admissionregistration.k8s.io", "validatingadmissionpolicybindings"): _SPEC,
    ("admissionregistration.k8s.io", "mutatingadmissionpolicies"): _SPEC,
    ("admissionregistration.k8s.io", "mutatingadmissionpolicybindings"): _SPEC,
    ("resource.k8s.io", "deviceclasses"): _SPEC,
    ("resource.k8s.io", "resourceslices"): _SPEC,
    ("resource.k8s.io", "devicetaintrules"): _SPEC,
    ("apiextensions.k8s.io", "customresourcedefinitions"): _SPEC,
    ("flowcontrol.apiserver.k8s.io", "flowschemas"): _SPEC,
    ("flowcontrol.apiserver.k8s.io", "prioritylevelconfigurations"): _SPEC,
}


# the types whose strategy sets no generation at create but steps it (from 0) when one of
# the named fields changes: a CSIDriver's first spec change makes it 1
STEPPED_FROM_ZERO: dict[tuple[str, str], tuple[str, ...]] = {
    ("storage.k8s.io", "csidrivers"): _SPEC,
}


def keeps_generation(rtype: ResourceType) -> bool:
    """Whether upstream's strategy for the type sets ``metadata.generation``."""
    return rtype.custom is not None or (rtype.group, rtype.plural) in GENERATION


def _generation_moves(rtype: ResourceType, old: dict[str, Any], new: dict[str, Any]) -> bool:
    """Whether an update from ``old`` to ``new`` is a new generation of the object."""
    if rtype.custom is not None:
        return any(new.get(k) != old.get(k) for k in {*old, *new} - {"apiVersion", "kind", "metadata"})
    fields = GENERATION.get((rtype.group, rtype.plural)) or STEPPED_FROM_ZERO.get((rtype.group, rtype.plural), ())
    # (an update's rules: [] is null only once stored: the same spec as the stored null; a
    # quantity written 1e9 the 1G a number written for it is stored as: Semantic.DeepEqual's)
    return any(new.get(k) != old.get(k)
               and not same_once_stored(new.get(k), old.get(k), shape_at(shape_of(rtype.group, rtype.version,
                                                                                  rtype.kind), k))
               for k in fields)


def _split_status(rtype: ResourceType, subresource: str | None, old: dict[str, Any],
                  new: dict[str, Any], applied: bool = False) -> dict[str, Any]:
    """What an update may change: through ``/status`` only the status; through the
    object itself, everything but the status (for types with a status subresource, but
    STATUS_KEPT_AT_UPDATE's unless ``applied``). Server-set metadata is kept;
    ``generation`` counts changes of the spec."""
    old_meta = old.get("metadata", {})
    if subresource == "ephemeralcontainers":  # only spec.ephemeralContainers (validated in _admit)
        merged = dict(old)
        merged["spec"] = dict(old.get("spec") or {})
        ephemeral = (new.get("spec") or {}).get("ephemeralContainers")
        if ephemeral or not isinstance(ephemeral, (list, type(None))):
            merged["spec"]["ephemeralContainers"] = ephemeral
        else:  # none, null or []: the nil slice a pod without them has, not a change of its spec
            merged["spec"].pop("ephemeralContainers", None)
        merged["metadata"] = dict(old_meta)
        if merged["spec"] != old.get("spec") and keeps_generation(rtype):  # (pod strategy's updatePodGeneration)
            merged["metadata"]["generation"] = int(old_meta.get("generation", 1)) + 1
        return merged
    if subresource == "resize":  # only the containers' resources (validated in _admit)
        merged = dict(old)
        merged["spec"] = resized_spec(old.get("spec") or {}, new.get("spec"))
        merged["metadata"] = dict(old_meta)
        # (pod strategy's updatePodGeneration, Semantic.DeepEqual: 0.1 cpu where 100m was is no change)
        if merged["spec"] != old.get("spec") and not same_once_stored(
                merged["spec"], old.get("spec"), shape_at(shape_of(rtype.group, rtype.version, rtype.kind), "spec")):
            merged["metadata"]["generation"] = int(old_meta.get("generation", 1)) + 1
        return merged
    if subresource in ("status", "approval"):  # (a CSR's approval: its conditions, registry/certificates.py)
        merged = dict(old)
        status = new.get("status")
        if "status" in new:
            merged["status"] = status
        else:  # (a write of the metadata alone to an object without a status: none, not null)
            merged.pop("status", None)
        merged["metadata"] = _status_write_meta(rtype, new.get("metadata"), old_meta)
        if rtype.plural == "pods" and not rtype.group and isinstance(status, dict):
            kept = (old.get("status") or {}).get("qosClass")
            if kept and not status.get("qosClass"):  # upstream keeps it (immutable)
                status = {**status, "qosClass": kept}
            merged["status"] = pair_ips(keep_observed_generations(status, old.get("status")))
        return merged
    if "status" in rtype.subresources and (applied or (rtype.group, rtype.plural) not in STATUS_KEPT_AT_UPDATE):
        if "status" in old:
            new["status"] = old["status"]
        else:
            new.pop("status", None)
    meta = new["metadata"]
    # BeforeUpdate keeps a deletion's timestamp and grace period (a write may leave them out);
    # ValidateObjectMetaUpdate refuses one the write sets otherwise (a live object's made
    # terminating by a PUT or patch: it was dropped, and the write went ahead)
    _refuse_deletion_changes(rtype, meta, old_meta, ("deletionTimestamp", "deletionGracePeriodSeconds"))
    for field in ("uid", "creationTimestamp", "generation", "deletionTimestamp", "deletionGracePeriodSeconds"):
        if field in old_meta:
            meta[field] = old_meta[field]
        else:
            meta.pop(field, None)
    meta.pop("selfLink", None)  # cleared before storage, as upstream's PrepareObjectForStorage
    if keeps_generation(rtype) and _generation_moves(rtype, old, new):
        meta["generation"] = int(old_meta.get("generation", 1)) + 1
    elif (rtype.group, rtype.plural) in STEPPED_FROM_ZERO and _generation_moves(rtype, old, new):
        meta["generation"] = int(old_meta.get("generation") or 0) + 1
    return new


def _status_write_meta(rtype: ResourceType, meta: Any, old_meta: dict[str, Any]) -> dict[str, Any]:
    """The metadata a write through ``/status`` stores: the request's, but what the type's
    status strategy takes from the stored object (``statuswrites``) and the server-set
    fields, as rest.BeforeUpdate keeps them. A deletion's timestamp a strategy does not put
    back, and its grace period, set otherwise than stored are refused as
    ValidateObjectMetaUpdate refuses them (422 ``field is immutable``)."""
    if meta is old_meta or meta == old_meta or not isinstance(meta, dict):
        return dict(old_meta)  # (the common case, a kubelet's status patch: nothing to sort out)
    kept = kept_at_status_write(rtype)
    if kept is None:
        return dict(old_meta)  # (the whole stored metadata: custom resources, flowcontrol)
    deletion = ("deletionGracePeriodSeconds",) if "deletionTimestamp" in kept else \
        ("deletionTimestamp", "deletionGracePeriodSeconds")
    _refuse_deletion_changes(rtype, meta, old_meta, deletion)
    out = dict(meta)
    for field in (*_STATUS_SERVER_META, *kept):
        if field in old_meta:
            out[field] = old_meta[field]
        else:
            out.pop(field, None)
    out.pop("selfLink", None)
    return out


# what a status write never takes from the request, whatever the type (rest.BeforeUpdate,
# and the field manager for managedFields: record_write keeps the stored ones)
_STATUS_SERVER_META = ("uid", "creationTimestamp", "generation", "deletionTimestamp", "deletionGracePeriodSeconds",
                       "managedFields")


def _refuse_deletion_changes(rtype: ResourceType, meta: Any, old_meta: dict[str, Any],
                             fields: tuple[str, ...]) -> None:
    """422 for a deletion field (of ``fields``) an update sets otherwise than stored, as
    ValidateObjectMetaUpdate (``metadata.deletionGracePeriodSeconds: Invalid value: 30: field
    is immutable``), after BeforeUpdate put back what the write left out and kept a terminating
    object's timestamp whatever the write said."""
    if not isinstance(meta, dict):
        return
    causes = [{"reason": "FieldValueInvalid", "field": f"metadata.{field}",
               "message": f"Invalid value: {_shown_meta_value(meta[field])}: field is immutable"}
              for field in fields
              if meta.get(field) is not None and meta[field] != old_meta.get(field)
              and not (field == "deletionTimestamp" and old_meta.get(field))]
    if causes:
        raise ApiError.invalid(rtype, str(old_meta.get("name") or ""), causes)


def _shown_meta_value(value: Any) -> str:
    """A deletion's timestamp or grace period as ``field.Invalid`` shows it: a ``*metav1.Time``
    by its ``String()`` (``2001-01-01 00:00:00 +0000 UTC``, a Stringer's pointer kept), a
    number bare."""
    if isinstance(value, str):
        try:
            return go_time(datetime.fromisoformat(value.replace("Z", "+00:00")))
        except ValueError:
            return go_quote(value)
    return orjson.dumps(value).decode()


def _json_patch_operations(patch: Any) -> list[Any]:
    """A JSON patch's operations, decoded as upstream's json-patch library decodes them; a 400
    in Go's words if it is not a list of them."""
    try:
        return gojsonpatch.operations(patch)
    except gojsonpatch.DecodeError as e:
        raise ApiError.bad_request(str(e)) from None


def _json_patch(target: dict[str, Any], ops: list[Any]) -> Any:
    """RFC 6902 JSON patch as upstream's json-patch library applies it (``api/gojsonpatch.py``:
    a ``replace`` of a missing key adds it, negative indexes count from the end); at most
    ``MAX_JSON_PATCH_OPS`` operations (413), as upstream.
    One that does not apply (a failed ``test``, a missing path, an unknown ``op``) is a 422
    in upstream's words and no others: its patch handler wraps the library's error in
    ``NewGenericServerResponse``, which keeps the library's message out of the Status's
    message (the copy limit's, in upstream's words, is its one cause)."""
    if len(ops) > MAX_JSON_PATCH_OPS:
        raise ApiError(413, "RequestEntityTooLarge", "Request entity too large: The allowed maximum operations in "
                       f"a JSON patch is {MAX_JSON_PATCH_OPS}, got {len(ops)}")
    try:
        return gojsonpatch.apply(target, ops, decoded=True)
    except gojsonpatch.CopyLimitExceeded as e:  # (upstream's one cause: the library's words, ours here)
        raise ApiError(422, "Invalid", JSON_PATCH_REFUSED,
                       {"causes": [{"reason": "UnexpectedServerResponse", "message": str(e)}]}) from e
    except gojsonpatch.PatchError as e:
        raise ApiError(422, "Invalid", JSON_PATCH_REFUSED, {}) from e


JSON_PATCH_REFUSED = "the server rejected our request due to an error in our request"
MAX_JSON_PATCH_OPS = 10_000  # upstream's maxJSONPatchOperations


STRATEGIC = "application/strategic-merge-patch+json"
PATCH_TYPES = ("application/json-patch+json", "application/merge-patch+json", STRATEGIC)


def accepted_patch_types(rtype: ResourceType) -> tuple[str, ...]:
    """The PATCH content types ``rtype`` takes, as its OpenAPI operations list them: kubectl's
    client-side apply sends a strategic merge patch exactly when they list one, else a
    merge patch (custom resources have no patch schema: upstream lists none for them)."""
    if rtype.storage_group or strategic.schema_for_kind(rtype.group, rtype.version, rtype.kind) is None:
        return (*(t for t in PATCH_TYPES if t != STRATEGIC), APPLY_YAML)
    return (*PATCH_TYPES, APPLY_YAML)


def _strategic_schema(rtype: ResourceType) -> strategic.PatchSchema:
    """The patch schema of a built-in type; custom resources have none, and upstream answers 415."""
    found = None if rtype.storage_group else strategic.schema_for_kind(rtype.group, rtype.version, rtype.kind)
    if found is None:
        raise ApiError.unsupported_media_type(accepted_patch_types(rtype))
    return found


def _json_kind(value: Any) -> str:
    """The JSON type of a decoded value as Go's decoder names it in its errors."""
    return ("object" if isinstance(value, dict) else "array" if isinstance(value, list)
            else "string" if isinstance(value, str) else "bool" if isinstance(value, bool) else "number")


def _strategic_patch_map(patch: Any) -> dict[str, Any]:
    if patch is None:
        return {}
    if not isinstance(patch, dict):
        kind = ("array" if isinstance(patch, list) else "string" if isinstance(patch, str)
                else "bool" if isinstance(patch, bool) else "number")
        raise ApiError.bad_request(f"json: cannot unmarshal {kind} into Go value of type map[string]interface {{}}")
    return patch


def _strategic_merge_patch(target: dict[str, Any], patch: dict[str, Any],
                           schema: strategic.PatchSchema) -> dict[str, Any]:
    try:
        return strategic.apply(target, patch, schema)
    except strategic.StrategicMergeError as e:
        if e.code == 422:
            raise ApiError(422, "Invalid", e.message) from e
        raise ApiError.bad_request(e.message) from e


def _unchanged(obj: dict[str, Any], old: dict[str, Any]) -> bool:
    """Whether ``obj`` (to be stored: no resourceVersion) is ``old`` (as read: with one).
    Cheap where the two share parts: equal dicts compare their values by identity first."""
    meta = old["metadata"]
    version = meta.pop("resourceVersion")
    try:
        return equal(obj, old)  # (true is not 1: upstream compares the bytes)
    finally:
        meta["resourceVersion"] = version  # (its place: last, where _object put it)


# ASGI scope keys the dispatch sets for the request's metrics labels: a watch (verb WATCH), a server-side
# apply patch (verb APPLY)
WATCH_SCOPE_KEY = "controlplane.watch"
APPLY_SCOPE_KEY = "controlplane.apply"
_NAMESPACE_SUBRESOURCES = ("status", "finalize")  # namespaces/NAME/status is not a resource "status" in NAME
_REQUEST_SERIES = REQUESTS.series  # RequestKey -> its counts (metrics.RequestMetrics)


def _request_labels(scope: Scope) -> tuple[str, str, str, str, str, str, str] | None:
    """(verb, dry_run, group, version, resource, subresource, scope) as
    ``metrics.RequestKey`` labels a request (the code apart), or None for what it does not count
    (discovery).

    >>> _request_labels({"method": "GET", "path": "/api/v1/namespaces/ns/pods", "query_string": b"limit=5"})
    ('LIST', '', '', 'v1', 'pods', '', 'namespace')
    >>> _request_labels({"method": "POST", "path": "/apis/apps/v1/namespaces/ns/deployments",
    ...                  "query_string": b"dryRun=All"})
    ('POST', 'All', 'apps', 'v1', 'deployments', '', 'namespace')
    >>> _request_labels({"method": "PUT", "path": "/api/v1/namespaces/ns/finalize", "query_string": b""})
    ('PUT', '', '', 'v1', 'namespaces', 'finalize', 'resource')
    >>> _request_labels({"method": "GET", "path": "/api/v1/watch/namespaces/ns/pods/p", "query_string": b"",
    ...                  WATCH_SCOPE_KEY: True})
    ('WATCH', '', '', 'v1', 'pods', '', 'resource')
    """
    parts = [p for p in scope["path"].split("/") if p]
    if len(parts) < 3:
        return None
    if parts[0] == "api":
        group, version, rest = "", parts[1], parts[2:]
    elif parts[0] == "apis" and len(parts) > 3:
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return None
    legacy_watch = rest[0] == "watch" and len(rest) > 1  # a deprecated .../watch/ path: WATCH, as upstream
    if legacy_watch:
        rest = rest[1:]
    namespaced = False
    if rest[0] == "namespaces" and len(rest) >= 3 and (len(rest) > 3 or rest[2] not in _NAMESPACE_SUBRESOURCES):
        namespaced, rest = True, rest[2:]
    name = len(rest) > 1
    method = scope["method"]
    if method == "GET":
        verb = "GET" if name and not legacy_watch else "WATCH" if WATCH_SCOPE_KEY in scope else "LIST"
    elif method == "DELETE":
        verb = "DELETE" if name else "DELETECOLLECTION"
    elif method == "PATCH" and APPLY_SCOPE_KEY in scope:
        verb = "APPLY"
    else:
        verb = method
    query = scope.get("query_string", b"")
    return (verb, dry_run_label(query) if b"dryRun" in query else "", group, version, rest[0],
            rest[2] if len(rest) > 2 else "", "resource" if name else "namespace" if namespaced else "cluster")


def _observe_request(scope: Scope, code: int, seconds: float, webhook_seconds: float) -> None:
    """Count the request; ``webhook_seconds`` of it spent calling admission webhooks, which
    the SLI leaves out."""
    labels = _request_labels(scope)
    if labels is None:
        return
    key = (*labels, str(code))
    counts = _REQUEST_SERIES.get(key)
    if counts is None:
        counts = REQUESTS.counts(key)
    bucket = bisect_left(REQUEST_BUCKETS, seconds)
    counts[bucket] += 1
    counts[-1] += seconds
    if webhook_seconds:
        REQUESTS.exclude(key, bucket, seconds, webhook_seconds)


@contextlib.contextmanager
def _long_running(rtype: ResourceType, namespace: str | None) -> Iterator[None]:
    """A watch being served: in ``apiserver_longrunning_requests``, and not among the read-only
    requests in flight (upstream's max-in-flight leaves long-running requests out)."""
    running = LONGRUNNING_REQUESTS.labels(verb="WATCH", group=rtype.group, version=rtype.version,
                                          resource=rtype.plural, subresource="",
                                          scope="namespace" if namespace else "cluster", component=COMPONENT)
    running.inc()
    REQUESTS.inflight[0] -= 1
    try:
        yield
    finally:
        REQUESTS.inflight[0] += 1
        running.dec()


def _too_deep(e: orjson.JSONEncodeError) -> bool:
    """Whether orjson refused to write a value for its nesting (past 255 levels, where its
    reader takes 1024): the request's JSON, not a bug."""
    return "Recursion limit" in str(e)


def _store_error(e: store.StoreError) -> ApiError:
    if isinstance(e, store.ValueTooLarge):
        return ApiError.too_large()
    if isinstance(e, store.Compacted):
        return ApiError.gone(str(e))
    if isinstance(e, store.FutureRevision):
        return too_large_resource_version(e.revision, e.current)
    if isinstance(e, store.StorageFull):
        # as kube-apiserver passes on etcd's "etcdserver: mvcc: database space exceeded": an
        # error no storage layer translated, a 500 without a reason, the store's words as its
        # message (a client reads it as "Error from server: <message>"; nothing was written)
        return ApiError(500, "", str(e))
    if isinstance(e, store.OutcomeUnknown):
        # upstream's answer to a request its storage did not finish in time (the timeout
        # filter's NewTimeoutError): it may still be applied, which a 503 would deny
        return ApiError(504, "Timeout", f"Timeout: request did not complete within requested timeout - {e}")
    if isinstance(e, store.Unavailable):
        return ApiError(503, "ServiceUnavailable", str(e))
    if isinstance(e, store.InvalidRequest):
        return ApiError.bad_request(str(e))
    # a write that raced another (a delete, a create) and that no verb answered its own way
    if isinstance(e, store.NotFound):
        return ApiError(404, "NotFound", "the object was deleted while this request was changing it")
    if isinstance(e, store.Conflict):
        return ApiError(409, "Conflict", "the object has been modified; please apply your changes to the latest "
                                         "version and try again")
    if isinstance(e, store.KeyExists):
        return ApiError(409, "AlreadyExists", "the object was created while this request was creating it")
    return ApiError(500, "InternalError", f"storage error: {e}")
