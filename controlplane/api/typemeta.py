"""A create or update body's ``apiVersion`` and ``kind``, held to its URL as kube-apiserver holds them.

A missing (or empty) ``apiVersion`` or ``kind`` is the URL's: upstream's decoder defaults both
from the endpoint. Otherwise the answer depends on where upstream's request path stops:

- a built-in type's body is decoded with the scheme first. A kind the scheme does not know in
  that group version is 400 from ``transformDecodeError``, naming the scheme as Go does::

      pod in version "v1" cannot be handled as a Pod: no kind "pod" is registered for version "v1"
      in scheme "k8s.io/kubernetes/pkg/api/legacyscheme/scheme.go:30"

  a known kind of another type is 400 ``converting (v1.Pod) to (core.ConfigMap): unknown
  conversion`` (the body is converted to the URL's internal type), and the URL's kind in another
  served version of its group decodes, then fails the handler's group version check (400
  ``the API version in the data (...) does not match the expected API version (...)``);
- a custom resource's body decodes whatever its kind: the group version check comes first,
  then the kind is 422 from the validator's ``ValidateTypeMeta`` (``kind: Invalid value:
  "WidgetX": must be Widget``).

Kinds that are registered upstream but not served here (``apps/v1beta1`` Deployment) are
answered as unknown ones.
"""

from __future__ import annotations

from typing import Any

from ..registry import Registry, ResourceType
from .errors import ApiError
from .fieldvalidation import invalid_patch

__all__ = ["EVICTION_ALSO", "EVICTION_TYPE", "TOKEN_REQUEST_TYPE", "check_patched_type_meta", "check_type_meta"]

# the scheme of kube-apiserver's built-in types, as a decode error names it
LEGACY_SCHEME = "k8s.io/kubernetes/pkg/api/legacyscheme/scheme.go:30"
# groups whose types live in the schemes of their own servers (apiextensions-apiserver,
# kube-aggregator): their decode errors name another scheme, which is left out here
OWN_SCHEME_GROUPS = frozenset({"apiextensions.k8s.io", "apiregistration.k8s.io"})
# Go's internal package of a group whose name is not the group's first label
INTERNAL_PACKAGES = {"": "core", "internal.apiserver.k8s.io": "apiserverinternal"}


# the body of ``pods/<name>/eviction``, which takes policy/v1beta1's too (EvictionREST.AcceptsGroupVersion)
EVICTION_TYPE = ResourceType("policy", "v1", "Eviction", "evictions", True)
EVICTION_ALSO = ("policy/v1beta1",)
# the body of ``serviceaccounts/<name>/token``
TOKEN_REQUEST_TYPE = ResourceType("authentication.k8s.io", "v1", "TokenRequest", "tokenrequests", True)


def check_type_meta(registry: Registry, rtype: ResourceType, obj: dict[str, Any], body: bytes,
                    also: tuple[str, ...] = ()) -> None:
    """Raise upstream's answer when ``obj`` (read from ``body``) names another type than ``rtype``,
    the URL's; ``also``: other group versions of its kind the URL accepts."""
    api_version = obj.get("apiVersion") or rtype.api_version
    kind = obj.get("kind") or rtype.kind
    if kind == rtype.kind and (api_version == rtype.api_version or api_version in also):
        return
    for field, value in (("apiVersion", api_version), ("kind", kind)):
        if not isinstance(value, str):
            raise _unrecognized(rtype, field, value, body)
    if rtype.custom is not None:
        if api_version != rtype.api_version:
            raise _other_group_version(api_version, rtype)
        raise _not_this_kind(rtype, obj, "kind", kind, rtype.kind)
    why = _decode_error(registry, rtype, api_version, kind)
    if why is not None:
        raise _undecodable(kind, api_version.rpartition("/")[2], rtype, why)
    raise _other_group_version(api_version, rtype)


def check_patched_type_meta(registry: Registry, rtype: ResourceType, obj: dict[str, Any]) -> None:
    """Raise upstream's answer when a patch leaves ``obj`` naming another type than ``rtype``.
    Its patch handler decodes the patched JSON into the URL's type: a kind the scheme does not
    have, or of another type, is the 422 of a result that does not decode (``patch: Invalid
    value``); another version of the URL's kind converts, and is written as the URL's. A custom
    resource's is its validator's 422 (``kind: Invalid value: "X": must be Widget``, and so
    for ``apiVersion``). A missing apiVersion or kind is the URL's."""
    api_version, kind = obj.get("apiVersion") or rtype.api_version, obj.get("kind") or rtype.kind
    if (api_version, kind) == (rtype.api_version, rtype.kind) or not isinstance(api_version, str) \
            or not isinstance(kind, str):
        return  # (a value of another type is field validation's)
    if rtype.custom is not None:
        if kind != rtype.kind:
            raise _not_this_kind(rtype, obj, "kind", kind, rtype.kind)
        raise _not_this_kind(rtype, obj, "apiVersion", api_version, rtype.api_version)
    why = _decode_error(registry, rtype, api_version, kind)
    if why is not None:
        raise invalid_patch(obj, why)


def _decode_error(registry: Registry, rtype: ResourceType, api_version: str, kind: str) -> str | None:
    """Why Go's decoder cannot decode (``api_version``, ``kind``) into ``rtype``'s internal type;
    None when it can (the URL's kind, perhaps in another version of its group)."""
    group, _, version = api_version.rpartition("/")
    known = next((t for t in registry.in_group_version(group, version) if t.kind == kind), None)
    if known is None:
        scheme = "" if rtype.group in OWN_SCHEME_GROUPS else f' in scheme "{LEGACY_SCHEME}"'
        return f'no kind "{kind}" is registered for version "{api_version}"{scheme}'
    if _internal(known) != _internal(rtype):
        return f"converting ({version}.{kind}) to ({_internal(rtype)}): unknown conversion"
    return None


def _not_this_kind(rtype: ResourceType, obj: dict[str, Any], field: str, value: str, wanted: str) -> ApiError:
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    cause = {"reason": "FieldValueInvalid", "field": field, "message": f'Invalid value: "{value}": must be {wanted}'}
    return ApiError.invalid(rtype, name if isinstance(name, str) else "", [cause])


def _unrecognized(rtype: ResourceType, field: str, value: object, body: bytes) -> ApiError:
    """Go's decoder could not read the type from the body: no kind to name, so the body's start."""
    got = {bool: "bool", dict: "object", list: "array"}.get(type(value), "number")
    start = body.lstrip()
    summary = start[:30].decode(errors="replace") + (" ..." if len(start) > 30 else "")
    return ApiError.bad_request(f"the object provided is unrecognized (must be of type {rtype.kind}): couldn't get "
                                f"version/kind; json parse error: json: cannot unmarshal {got} into Go struct "
                                f"field .{field} of type string ({summary})")


def _undecodable(kind: str, version: str, rtype: ResourceType, why: str) -> ApiError:
    return ApiError.bad_request(f'{kind} in version "{version}" cannot be handled as a {rtype.kind}: {why}')


def _other_group_version(api_version: str, rtype: ResourceType) -> ApiError:
    return ApiError.bad_request(f"the API version in the data ({api_version}) does not match the expected "
                                f"API version ({rtype.api_version})")


def _internal(rtype: ResourceType) -> str:
    """The Go name of ``rtype``'s internal type: events.k8s.io's Event is the core group's."""
    if rtype.group == "events.k8s.io" and rtype.kind == "Event":
        return "core.Event"
    package = INTERNAL_PACKAGES.get(rtype.group, rtype.group.split(".")[0])
    return f"{package}.{rtype.kind}"
