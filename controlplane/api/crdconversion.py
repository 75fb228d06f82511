"""CRD conversion webhooks: kube-apiserver's webhook converter
(``apiextensions-apiserver/pkg/apiserver/conversion/webhook_converter.go``) for the
custom resources of a CRD whose ``spec.conversion.strategy`` is ``Webhook``.

Where (``api/rest.py``)::

    reads     GET, LIST, WATCH events, a delete's answer, the scale view: the objects
              not in the version asked for, converted to it (``served``); a list's in
              one review, as upstream batches them
    writes    while a request for such a type is handled (``CUSTOM_CONVERSION`` set),
              ``KubeApi.store`` is a ``WebhookConvertingStore``: what a write stores is
              converted to the storage version, what it reads (the object an update or
              patch starts from) to the request's version, so the handlers, admission
              and validation work in the request's version throughout, as upstream's;
              the write's answer is what it stored, converted back (``answer``)

The call is a ``ConversionReview`` of the first of the CRD's ``conversionReviewVersions``
this server speaks (``v1``, ``v1beta1``), posted by ``api/webhookcall.py``: ``request.uid``,
``desiredAPIVersion`` and the ``objects`` not already in it. The answer is checked as
upstream's: the review's kind (v1), ``response.uid`` (v1), ``result.status`` Success (else
its ``message``), as many ``convertedObjects`` as were sent, each of the desired
apiVersion and the same kind, name, namespace and uid; the metadata of each is the
original's but its labels and annotations, which the webhook may change (and which are
validated if it did). A failure is upstream's 500 without a reason: ``conversion webhook
for <group>/<version>, Kind=<kind> failed: <why>`` (the kind is the list's for a list).

``--admission-webhooks`` decides here too: ``off`` calls no conversion webhook (objects
are converted as under ``None``: only ``apiVersion`` changes); under ``reachable`` (the
default) a webhook behind a Service nothing on this machine answers for (simulated pods
only, or none) is left out in the same way, with one warning logged per CRD, so
operators' charts that declare one still work; ``all`` fails the request as upstream.

A write stored in another version answers with what it stored converted back (a second
call), as upstream's store decodes what it encoded. A watch whose conversion fails ends, as
upstream's, without an ERROR event.
"""

from __future__ import annotations

import dataclasses
import logging
import time
import uuid
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

import orjson

from store import Store
from store.interface import KeyValue

from ..metrics import CONVERSION_WEBHOOK_DURATION, CONVERSION_WEBHOOK_REQUESTS, CRD_CONVERSION_WEBHOOK_DURATION
from ..registry.custom import present
from ..registry.strategies import validate_metadata
from .dryrun import DRY_RUN
from .errors import ApiError
from .storeview import StoreView
from .webhookcall import CallError, Lookup, Unreachable, WebhookClients, resolve

if TYPE_CHECKING:
    from ..registry.types import ResourceType

__all__ = ["CUSTOM_CONVERSION", "ConversionWebhooks", "Converting", "WebhookConvertingStore"]

log = logging.getLogger(__name__)

Obj = dict[str, Any]
REVIEW_VERSIONS = ("v1", "v1beta1")



@dataclasses.dataclass(slots=True)
class Converting:
    """A request for a custom resource whose CRD converts by webhook: its type, and the objects
    its writes stored converted (key -> the object in the storage version), which its answer
    is made of, converted back (``ConversionWebhooks.answer``), as upstream decodes what it stored."""
    rtype: ResourceType
    stored: dict[bytes, Obj] = dataclasses.field(default_factory=dict)


CUSTOM_CONVERSION: ContextVar[Converting | None] = ContextVar("controlplane_custom_conversion", default=None)


class _Failed(Exception):
    """Why a conversion failed, after ``conversion webhook for <gvk>`` (upstream's words);
    ``failure_type`` is upstream's metrics' label (its ``ConversionWebhookErrorType``)."""

    def __init__(self, message: str, failure_type: str = "conversion_webhook_invalid_converted_object_failure") -> None:
        super().__init__(message)
        self.failure_type = failure_type


class ConversionWebhooks:
    def __init__(self, clients: WebhookClients, lookup: Lookup, mode: str) -> None:
        self._clients = clients
        self._lookup = lookup
        self._mode = mode
        self._warned: set[str] = set()  # CRDs whose unreachable webhook was logged

    @staticmethod
    def applies(rtype: ResourceType) -> bool:
        return rtype.custom is not None and rtype.custom.conversion is not None

    async def served(self, rtype: ResourceType, raws: list[bytes], listing: bool = False) -> list[bytes]:
        """Stored JSON objects of ``rtype``'s CRD as ``rtype``'s version shows them: those in
        another version converted by the webhook, in one review (the rest as they are);
        ``listing``: they are a list's items (upstream's errors then name the list's kind)."""
        if rtype.custom is None or rtype.custom.conversion is None:
            return raws
        target = rtype.api_version
        objs: list[Obj | None] = [None] * len(raws)
        pending: list[int] = []
        for i, raw in enumerate(raws):
            if b'"apiVersion":"' + target.encode() + b'"' in raw:  # (a quick test, confirmed below)
                obj = orjson.loads(raw)
                if obj.get("apiVersion") == target:
                    continue
                objs[i] = obj
            else:
                objs[i] = orjson.loads(raw)
            pending.append(i)
        if not pending:
            return raws
        sent = [objs[i] for i in pending]
        first = sent[0] or {}
        kind = rtype.list_kind if listing else str(first.get("kind") or rtype.kind)
        converted = await self.convert(rtype, [o for o in sent if o is not None], target,
                                       f"{first.get('apiVersion')}, Kind={kind}", listing)
        out = list(raws)
        for i, obj in zip(pending, converted, strict=True):
            out[i] = orjson.dumps(obj)
        return out

    async def answer(self, request: Converting, obj: Any) -> Any:
        """A write's answer ``obj`` (of the request's type) as upstream makes it: what was stored,
        converted back to the request's version (``resourceVersion`` the write's); else ``obj``."""
        rtype = request.rtype
        if not isinstance(obj, dict) or obj.get("kind") != rtype.kind or obj.get("apiVersion") != rtype.api_version:
            return obj  # (e.g. a Scale)
        meta = obj.get("metadata") or {}
        stored = request.stored.pop(rtype.key(meta.get("namespace"), str(meta.get("name") or "")), None)
        if stored is None:
            return obj
        gvk = f"{stored.get('apiVersion')}, Kind={stored.get('kind') or rtype.kind}"
        back = present(rtype, (await self.convert(rtype, [stored], rtype.api_version, gvk))[0])
        back_meta = back.setdefault("metadata", {})
        back_meta.pop("resourceVersion", None)
        if meta.get("resourceVersion"):
            back_meta["resourceVersion"] = meta["resourceVersion"]
        return back

    async def convert(self, rtype: ResourceType, objects: list[Obj], api_version: str, gvk: str,
                      listing: bool = False) -> list[Obj]:
        """``objects`` (none in ``api_version``) converted to it by the webhook of ``rtype``'s
        CRD. ``gvk``: the input's group, version and kind, as upstream's errors name it."""
        assert rtype.custom is not None and rtype.custom.conversion is not None
        webhook = rtype.custom.conversion
        started = time.perf_counter()
        failure = "conversion_webhook_call_failure"
        try:
            converted = await self._convert(webhook, objects, api_version, gvk, listing)
            _observe(rtype, objects, api_version, started, "")
            return converted
        except Unreachable as e:
            if self._mode != "reachable":
                _observe(rtype, objects, api_version, started, failure)
                raise _error(f"conversion webhook for {gvk} failed: {e}") from e
            if rtype.custom.crd not in self._warned:
                self._warned.add(rtype.custom.crd)
                log.warning("conversion webhook of CRD %s left out (--admission-webhooks reachable): %s; "
                            "its objects are converted as under the None strategy", rtype.custom.crd, e)
            return [dict(obj, apiVersion=api_version) for obj in objects]
        except CallError as e:
            _observe(rtype, objects, api_version, started, failure)
            raise _error(f"conversion webhook for {gvk} failed: {e}") from e
        except _Failed as e:
            _observe(rtype, objects, api_version, started, e.failure_type)
            raise _error(f"conversion webhook for {gvk} {e}") from e

    async def _convert(self, webhook: Obj, objects: list[Obj], api_version: str, gvk: str,
                       listing: bool) -> list[Obj]:
        review_version = next((v for v in webhook.get("conversionReviewVersions") or () if v in REVIEW_VERSIONS),
                              None)
        if review_version is None:  # (upstream's error as it is; the CRD's validation makes it rare)
            raise _error("no supported conversion review versions")
        uid = str(uuid.uuid4())
        review_api = f"apiextensions.k8s.io/{review_version}"
        body = orjson.dumps({"kind": "ConversionReview", "apiVersion": review_api,
                             "request": {"uid": uid, "desiredAPIVersion": api_version, "objects": objects}})
        endpoint = await resolve(webhook.get("clientConfig") or {}, self._lookup)
        answer = await self._clients.post(endpoint, body, 30.0)
        converted = _converted_objects(answer, uid, review_version)
        if len(converted) != len(objects):
            raise _Failed(f"returned {len(converted)} objects, expected {len(objects)}",
                          "conversion_webhook_partial_response_failure" if converted
                          else "conversion_webhook_no_objects_returned_failure")
        # (upstream's single-object messages say "invalid object" and index 0; a list's, "invalid
        # converted object" and the index counted past the item, as its loop increments it first)
        out = []
        for i, (original, obj) in enumerate(zip(objects, converted, strict=True)):
            where = f"invalid converted object at index {i + 1}" if listing else "invalid object at index 0"
            if not isinstance(obj, dict):
                raise _Failed(f"returned {where}: the converted object is not a JSON object")
            if obj.get("apiVersion") != api_version:
                raise _Failed(f"returned {where}: invalid groupVersion (expected {api_version}, received "
                              f"{obj.get('apiVersion') or ''})")
            if obj.get("kind") != original.get("kind"):
                raise _Failed(f"returned {where}: invalid kind (expected {original.get('kind')}, received "
                              f"{obj.get('kind') or ''})")
            problem = _changed_identity(original, obj)
            if problem:
                what = f"invalid converted object at index {i + 1}" if listing else "invalid object"
                raise _Failed(f"returned {what}: {problem}")
            problem = _restore_metadata(original, obj)
            if problem:
                what = f"invalid metadata in object at index {i + 1}" if listing else "invalid metadata"
                raise _Failed(f"returned {what}: {problem}")
            out.append(obj)
        return out


def _observe(rtype: ResourceType, objects: list[Obj], api_version: str, started: float, failure: str) -> None:
    """A webhook conversion's metrics (``failure`` "" when it succeeded), as upstream's webhook
    converter and its CRD converter metric record them."""
    elapsed = time.perf_counter() - started
    result = "failure" if failure else "success"
    CONVERSION_WEBHOOK_REQUESTS.labels(result, failure).inc()
    CONVERSION_WEBHOOK_DURATION.labels(result, failure).observe(elapsed)
    assert rtype.custom is not None
    source = str((objects[0] if objects else {}).get("apiVersion") or "").rpartition("/")[2]
    target = api_version.rpartition("/")[2]
    if source != target:
        CRD_CONVERSION_WEBHOOK_DURATION.labels(rtype.custom.crd, source, target,
                                               "false" if failure else "true").observe(elapsed)


def _error(message: str) -> ApiError:
    """Upstream's: a plain error turned into a Status, 500 with no reason (StatusReasonUnknown)."""
    return ApiError(500, "", message)


_MALFORMED = "conversion_webhook_malformed_response_failure"


def _converted_objects(answer: Obj, uid: str, review_version: str) -> list[Any]:
    # (v1beta1's answers are not checked for kind and uid, as upstream)
    if review_version == "v1" and (answer.get("apiVersion") != "apiextensions.k8s.io/v1"
                                   or answer.get("kind") != "ConversionReview"):
        version = str(answer.get("apiVersion") or "")  # (Go's GroupVersionKind.String(): "/" always there)
        got = f"{version if '/' in version else '/' + version}, Kind={answer.get('kind') or ''}"
        raise _Failed(f"failed: expected webhook response of apiextensions.k8s.io/v1, Kind=ConversionReview, "
                      f"got {got}", _MALFORMED)
    response = answer.get("response")
    if not isinstance(response, dict):
        raise _Failed("failed: no response provided", _MALFORMED)
    if review_version == "v1" and response.get("uid") != uid:
        raise _Failed(f'failed: expected response.uid="{uid}", got "{response.get("uid") or ""}"', _MALFORMED)
    result = response.get("result")
    if not isinstance(result, dict):
        result = {}
    if result.get("status") != "Success":
        if result.get("message"):
            raise _Failed(f"failed: {result['message']}", _MALFORMED)
        raise _Failed(f"failed: response.result.status was '{result.get('status') or ''}', not 'Success'", _MALFORMED)
    converted = response.get("convertedObjects")
    return list(converted) if isinstance(converted, list) else []


def _changed_identity(original: Obj, converted: Obj) -> str:
    """Upstream's ``validateConvertedObject``: kind, name, namespace and uid kept."""
    before, after = original.get("metadata") or {}, converted.get("metadata") or {}
    if not isinstance(after, dict):
        after = {}
    for field, name in (("name", "name"), ("namespace", "namespace"), ("uid", "UID")):
        if (before.get(field) or "") != (after.get(field) or ""):
            return f"must have the same {name}: {before.get(field) or ''} != {after.get(field) or ''}"
    return ""


def _restore_metadata(original: Obj, converted: Obj) -> str:
    """Upstream's ``restoreObjectMeta``: ``converted`` gets the original's metadata but the
    labels and annotations it answered with (validated if they changed); the problem, or ""."""
    answered = converted.get("metadata")
    if answered is None:
        return "missing metadata in converted object"
    if not isinstance(answered, dict):
        return f"invalid metadata of type {_go_type(answered)} in converted object"
    meta = orjson.loads(orjson.dumps(original.get("metadata") or {}))
    for field in ("labels", "annotations"):
        value = answered.get(field)
        if value is None:
            meta.pop(field, None)
            continue
        if not isinstance(value, dict):
            return f"invalid metadata.{field} of type {_go_type(value)} in converted object"
        for k, v in value.items():
            if not isinstance(v, str):
                return f"metadata.{field}[{k}] must be a string, but is {_go_type(v)} in converted object"
        if value != (meta.get(field) or {}):
            causes = validate_metadata({field: value})
            if causes:  # (upstream names the annotations' path metadata.annotation)
                return _aggregate([{**c, "field": c["field"].replace("metadata.annotations", "metadata.annotation")}
                                   for c in causes])
        meta[field] = value
    converted["metadata"] = meta
    return ""


def _aggregate(causes: list[Obj]) -> str:
    """``field.ErrorList.ToAggregate()``'s text: one error bare, more in brackets."""
    texts = [f"{c.get('field')}: {c.get('message')}" for c in causes]
    return texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"


def _go_type(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "float64" if isinstance(value, float) else "int64"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "[]interface {}"
    return "map[string]interface {}"


class WebhookConvertingStore(StoreView):
    """The store as a request for ``rtype`` sees it: its objects read in ``rtype``'s version,
    written in the CRD's storage version (other keys pass through as they are)."""

    def __init__(self, real: Store, conversions: ConversionWebhooks, request: Converting) -> None:
        rtype = request.rtype
        assert rtype.custom is not None
        super().__init__(real)
        self._conversions = conversions
        self._request = request
        self._rtype = rtype
        self._prefix = rtype.prefix(None)
        storage = rtype.custom.storage_version or rtype.version
        self._storage_api = f"{rtype.group}/{storage}"

    def _ours(self, key: bytes) -> bool:
        return key.startswith(self._prefix)

    async def _stored(self, key: bytes, value: bytes) -> bytes:
        if not self._ours(key) or DRY_RUN.get():  # (upstream's dry run encodes nothing: no call)
            return value
        obj = orjson.loads(value)
        version = obj.get("apiVersion")
        if version == self._storage_api:
            return value
        gvk = f"{version}, Kind={obj.get('kind') or self._rtype.kind}"
        converted = await self._conversions.convert(self._rtype, [obj], self._storage_api, gvk)
        self._request.stored[key] = converted[0]
        return orjson.dumps(converted[0])

    async def _served(self, kvs: list[KeyValue], listing: bool = False) -> list[KeyValue]:
        ours = [i for i, kv in enumerate(kvs) if self._ours(kv.key)]
        if not ours:
            return kvs
        values = await self._conversions.served(self._rtype, [kvs[i].value for i in ours], listing)
        out = list(kvs)
        for i, value in zip(ours, values, strict=True):
            if value is not kvs[i].value:
                out[i] = dataclasses.replace(kvs[i], value=value)
        return out

    async def create(self, key: bytes, value: bytes) -> int:
        return await self._real.create(key, await self._stored(key, value))

    async def update(self, key: bytes, value: bytes, expected_revision: int) -> int:
        return await self._real.update(key, await self._stored(key, value), expected_revision)

    async def delete(self, key: bytes, expected_revision: int = 0) -> int:
        return await self._real.delete(key, expected_revision)

    async def get(self, key: bytes, revision: int = 0) -> KeyValue | None:
        kv = await self._real.get(key, revision)
        return None if kv is None else (await self._served([kv]))[0]

    async def range(self, start: bytes, end: bytes, revision: int = 0,
                    limit: int = 0) -> tuple[list[KeyValue], int, bool]:
        kvs, rev, more = await self._real.range(start, end, revision, limit)
        return await self._served(kvs, listing=True), rev, more
