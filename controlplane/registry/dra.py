"""resource.k8s.io/v1 (Dynamic Resource Allocation): DeviceClasses, ResourceClaims and
ResourceClaimTemplates, defaulted and validated as upstream's v1 defaulting and
``pkg/apis/resource/validation`` (kube-apiserver 1.34). The names and limits the types
share are ``registry/drafields.py``'s, selectors' CEL ``registry/draselectors.py``'s, a
claim's status ``registry/claimstatus.py``'s, ResourceSlices ``registry/resourceslices.py``'s.

- Defaults, at every write as upstream's decoding: a request's (or subrequest's)
  ``allocationMode`` is ``ExactCount`` and then its ``count`` 1; a toleration's
  ``operator`` is ``Equal``.
- A claim's (a template's) requests are at most 32, each a DNS label, unique, with
  exactly one of ``exactly`` and ``firstAvailable`` (at most 8 subrequests); a device
  class name is required and a DNS subdomain; ``ExactCount`` needs a count above zero,
  ``All`` none. Selectors (at most 32) need ``cel``, whose expression (at most 10 KiB)
  must compile: a syntax error or a variable other than ``device`` is refused in
  cel-go's words, and so is a type error against upstream's ``kubernetes.DRADevice``
  (``registry/draselectors.py``). (Upstream's cost estimate is not applied, nor its
  check that the result is a bool: such an expression fails when the scheduler runs it.)
  Constraints and configs (at most 32 each) name requests of the claim
  (``request`` or ``request/subrequest``); an opaque config names a driver and holds
  a JSON object of at most 10 KiB.
- A claim's spec, and a template's, is fixed once created (``spec: field is immutable``).
- A claim's status (``/status``): ``reservedFor`` at most 256 consumers, each complete,
  unique by UID, only with an allocation, none added while the claim is being
  deleted; an allocation once written is fixed (it may be removed: deallocation), a new
  one's results name requests of the claim, drivers, pools and devices; ``devices``
  name allocated devices.
- A DeviceClass's selectors and configs as a request's; selectors or configs an update
  leaves as they were are not compiled again (upstream treats them as stored).

Each ``prepare_*`` takes the object (defaulted in place) and the stored one (None for
a create) and answers the causes of a 422, in upstream's order and words. A value
upstream prints with Go's ``%#v`` (a struct) is shown as JSON here, as elsewhere.
"""

from __future__ import annotations

import copy
from typing import Any

from .causes import Causes, cause, forbidden, invalid, not_supported, required
from .claimstatus import claim_status_causes
from .drafields import (
    ALLOCATION_MODES,
    CONFIGS_MAX,
    CONSTRAINTS_MAX,
    REQUESTS_MAX,
    SUBREQUESTS_MAX,
    RequestNames,
    bounded,
    device_class_name,
    device_configuration,
    fully_qualified_name,
    immutable,
    items,
    label,
    mapping,
    request_names,
    request_refs,
    text,
    toleration_causes,
    too_many,
    unique,
)
from .draselectors import selector_causes
from .podvalidation import label_key_problems
from .validation import same_once_stored, shape_at, shape_of

__all__ = ["prepare_device_class", "prepare_resource_claim", "prepare_resource_claim_template"]

Obj = dict[str, Any]


# -- defaults (upstream's v1 SetDefaults_*) --------------------------------------------------
def _default_request(request: Obj) -> None:
    count = request.get("count")
    if count == 0 and type(count) is int:
        del request["count"]  # an omitempty int64: 0 is not written back, so All keeps none
    if not request.get("allocationMode"):
        request["allocationMode"] = "ExactCount"
    if request["allocationMode"] == "ExactCount" and not request.get("count"):
        request["count"] = 1
    for toleration in items(request.get("tolerations")):
        if isinstance(toleration, dict) and not toleration.get("operator"):
            toleration["operator"] = "Equal"


def default_claim_spec(spec: Any) -> None:
    """A claim's (or a template's claim's) requests defaulted in place."""
    for request in items(mapping(mapping(spec).get("devices")).get("requests")):
        if not isinstance(request, dict):
            continue
        if isinstance(request.get("exactly"), dict):
            _default_request(request["exactly"])
        for sub in items(request.get("firstAvailable")):
            if isinstance(sub, dict):
                _default_request(sub)


def _allocation_mode(request: Obj, path: str) -> Causes:
    mode, count = request.get("allocationMode"), request.get("count") or 0
    count = count if isinstance(count, int) and not isinstance(count, bool) else 0
    if mode == "All":
        return [invalid(f"{path}.count", count, "must not be specified when allocationMode is 'All'")] if count else []
    if mode == "ExactCount":
        return [invalid(f"{path}.count", count, "must be greater than zero")] if count <= 0 else []
    return [not_supported(f"{path}.allocationMode", text(mode), ALLOCATION_MODES)]


def _device_request_body(request: Obj, path: str, stored: bool) -> Causes:
    """What ``exactly`` and a subrequest share: class, selectors, mode and count, tolerations."""
    causes = device_class_name(request.get("deviceClassName"), f"{path}.deviceClassName")
    causes += selector_causes(request.get("selectors"), f"{path}.selectors", stored)
    causes += _allocation_mode(request, path)
    for i, toleration in enumerate(items(request.get("tolerations"))):
        causes += toleration_causes(toleration, f"{path}.tolerations[{i}]")
    return causes


def _device_request(request: Obj, path: str, stored: bool) -> Causes:
    causes = label(request.get("name"), f"{path}.name")
    subs, exactly = items(request.get("firstAvailable")), request.get("exactly")
    if subs and exactly is not None:
        causes.append(cause("FieldValueInvalid", path, "Invalid value: null: exactly one of `exactly` or "
                            "`firstAvailable` is required, but multiple fields are set"))
    elif subs:
        if len(subs) > SUBREQUESTS_MAX:
            return [*causes, too_many(f"{path}.firstAvailable", len(subs), SUBREQUESTS_MAX)]
        for i, sub in enumerate(subs):
            at = f"{path}.firstAvailable[{i}]"
            sub = mapping(sub)
            causes += label(sub.get("name"), f"{at}.name") + _device_request_body(sub, at, stored)
        causes += unique((text(mapping(s).get("name")) for s in subs), f"{path}.firstAvailable")
    elif exactly is not None:
        causes += _device_request_body(mapping(exactly), f"{path}.exactly", stored)
    else:
        causes.append(required(path, "exactly one of `exactly` or `firstAvailable` is required"))
    return causes


def _constraint(constraint: Obj, path: str, names: RequestNames) -> Causes:
    causes = request_refs(constraint.get("requests"), f"{path}.requests", names)
    for key in ("matchAttribute", "distinctAttribute"):
        if constraint.get(key) is not None:
            return causes + fully_qualified_name(constraint[key], f"{path}.{key}")
    return [*causes, required(f"{path}.matchAttribute")]


def claim_spec_causes(spec: Any, path: str, stored: bool = False) -> Causes:
    """``validateResourceClaimSpec``: the requests, constraints and configs of ``spec``."""
    devices = mapping(mapping(spec).get("devices"))
    at = f"{path}.devices"
    names = request_names(spec)
    requests = items(devices.get("requests"))
    causes: Causes
    if len(requests) > REQUESTS_MAX:
        causes = [too_many(f"{at}.requests", len(requests), REQUESTS_MAX)]
    else:
        causes = []
        for i, request in enumerate(requests):
            causes += _device_request(mapping(request), f"{at}.requests[{i}]", stored)
        causes += unique((text(mapping(r).get("name")) for r in requests), f"{at}.requests")
    causes += bounded(items(devices.get("constraints")), CONSTRAINTS_MAX, f"{at}.constraints",
                      lambda c, p: _constraint(c, p, names))
    causes += bounded(items(devices.get("config")), CONFIGS_MAX, f"{at}.config",
                      lambda c, p: request_refs(c.get("requests"), f"{p}.requests", names)
                      + device_configuration(c, p, stored))
    return causes


def prepare_resource_claim(claim: Obj, old: Obj | None) -> Causes:
    """A ResourceClaim's write: its spec defaulted and, at create, validated; fixed after;
    a status that changed (``/status``) held to upstream's status rules."""
    spec = claim.get("spec")
    if old is None:
        default_claim_spec(spec)
        return claim_spec_causes(spec, "spec")
    causes: Causes = []
    if spec is not old.get("spec"):  # (a status write carries the stored spec itself)
        default_claim_spec(spec)
        if not _same_spec(spec, old.get("spec"), ()):
            causes.append(immutable("spec", spec))
    if claim.get("status") is not old.get("status") and claim.get("status") != old.get("status"):
        causes += claim_status_causes(claim, old)
    return causes


def _same_spec(spec: Any, old_spec: Any, claim_at: tuple[str, ...]) -> bool:
    """Whether an update's (defaulted) spec is the stored one: stored as it is, or with the
    defaults a spec stored before they were given lacks (the claim's spec at ``claim_at``);
    compared as Go values (Semantic.DeepEqual: a capacity request's quantity by its value)."""
    if spec == old_spec:
        return True
    old_spec = copy.deepcopy(old_spec)
    claim_spec = old_spec
    for key in claim_at:
        claim_spec = mapping(claim_spec).get(key)
    default_claim_spec(claim_spec)
    kind = "ResourceClaimTemplate" if claim_at else "ResourceClaim"
    # (an update's requests: [] is null)
    return bool(spec == old_spec) or same_once_stored(spec, old_spec,
                                                      shape_at(shape_of("resource.k8s.io", "v1", kind), "spec"))


_TEMPLATE_META = ("labels", "annotations")


def _template_metadata(meta: Any, path: str) -> Causes:
    """``ValidateTemplateObjectMeta``: labels and annotations only (checked as an object's)."""
    from .strategies import validate_metadata

    meta = mapping(meta)
    causes = [{**c, "field": path + c["field"].removeprefix("metadata")}
              for c in validate_metadata({k: meta[k] for k in _TEMPLATE_META if k in meta})]
    return causes + [forbidden(f"{path}.{key}", "cannot be set")
                     for key, value in meta.items() if key not in _TEMPLATE_META and value not in (None, "", [], {})]


def prepare_resource_claim_template(template: Obj, old: Obj | None) -> Causes:
    """A ResourceClaimTemplate's write: its claim's spec defaulted and, at create,
    validated (and its metadata's); the whole spec fixed after."""
    spec = mapping(template.get("spec"))
    default_claim_spec(spec.get("spec"))
    if old is not None:
        return [] if _same_spec(template.get("spec"), old.get("spec"), ("spec",)) else [
            immutable("spec", template.get("spec"))]
    return _template_metadata(spec.get("metadata"), "spec.metadata") + claim_spec_causes(spec.get("spec"), "spec.spec")


def _extended_resource_name(name: Any) -> bool:
    """``IsExtendedResourceName``: a domain-prefixed name outside ``kubernetes.io/``, whose
    quota name (``requests.<name>``) is a qualified name."""
    name = text(name)
    if "/" not in name or "kubernetes.io/" in name or name.startswith("requests."):
        return False
    return not label_key_problems("requests." + name)


def prepare_device_class(device_class: Obj, old: Obj | None) -> Causes:
    """A DeviceClass's write: selectors and configs as a claim's (not compiled again when
    an update leaves them as they were), an extended resource name if any."""
    spec, old_spec = mapping(device_class.get("spec")), mapping((old or {}).get("spec"))
    selectors_stored = old is not None and spec.get("selectors") == old_spec.get("selectors")
    configs_stored = old is not None and spec.get("config") == old_spec.get("config")
    causes = selector_causes(spec.get("selectors"), "spec.selectors", selectors_stored)
    causes += bounded(items(spec.get("config")), CONFIGS_MAX, "spec.config",
                      lambda c, p: device_configuration(c, p, configs_stored))
    name = spec.get("extendedResourceName")
    if name is not None and not _extended_resource_name(name):
        causes.append(invalid("spec.extendedResourceName", text(name), "must be a valid extended resource name"))
    return causes
