"""Admission webhook configurations (admissionregistration.k8s.io/v1
MutatingWebhookConfiguration and ValidatingWebhookConfiguration): upstream's
defaults and validation, their ``matchConditions`` as upstream's ``validateMatchConditions``
(``policyspec.condition_causes``: at most 64; each expression compiling to a bool with
``object``, ``oldObject``, ``request``, ``namespaceObject`` and ``authorizer`` declared, as
upstream's webhook environment, no ``params`` nor ``variables``; each name a qualified name,
unique). An update that leaves every webhook's conditions as they were does not validate
them again (upstream's ``ignoreMatchConditions``), so conditions stored under an older
environment stay writable.

The webhooks are called by ``api/webhooks.py``.
"""

from __future__ import annotations

from typing import Any

from .causes import Causes, cause, objects
from .dnsnames import DNS1123_SUBDOMAIN
from .policyspec import BASE_NAMES, condition_causes

__all__ = ["prepare_webhook_configuration"]


_SIDE_EFFECTS = ("None", "NoneOnDryRun")  # v1 refuses Unknown and Some
_REVIEW_VERSIONS = ("v1", "v1beta1")


def _default(webhook: dict[str, Any], mutating: bool) -> None:
    webhook.setdefault("failurePolicy", "Fail")
    webhook.setdefault("matchPolicy", "Equivalent")
    webhook.setdefault("namespaceSelector", {})
    webhook.setdefault("objectSelector", {})
    webhook.setdefault("timeoutSeconds", 10)
    if mutating:
        webhook.setdefault("reinvocationPolicy", "Never")
    for rule in webhook.get("rules") or ():
        if isinstance(rule, dict):
            rule.setdefault("scope", "*")
    service = (webhook.get("clientConfig") or {}).get("service")
    if isinstance(service, dict):
        service.setdefault("port", 443)


def prepare_webhook_configuration(obj: dict[str, Any], old: dict[str, Any] | None) -> Causes:
    """Defaults in place, then the causes of a 422, as upstream's v1 validation."""
    mutating = obj.get("kind") == "MutatingWebhookConfiguration"
    webhooks = obj.get("webhooks")
    causes: Causes = []
    if webhooks is None:
        return causes
    if not isinstance(webhooks, list):
        return [cause("FieldValueInvalid", "webhooks", "Invalid value: must be a list")]
    names: set[str] = set()
    unchanged = _conditions_unchanged(webhooks, old)
    for path, w in objects(webhooks, "webhooks", causes):
        _default(w, mutating)
        name = w.get("name")
        if not name:
            causes.append(cause("FieldValueRequired", f"{path}.name", "Required value"))
        elif not isinstance(name, str) or not DNS1123_SUBDOMAIN.match(name) or name.count(".") < 2:
            causes.append(cause("FieldValueInvalid", f"{path}.name",
                                 f'Invalid value: "{name}": should be a domain with at least three segments '
                                 "separated by dots"))
        elif name in names:
            causes.append(cause("FieldValueDuplicate", f"{path}.name", f'Duplicate value: "{name}"'))
        else:
            names.add(name)
        config = w.get("clientConfig")
        if not isinstance(config, dict) or (("url" in config) == ("service" in config)):
            causes.append(cause("FieldValueRequired", f"{path}.clientConfig",
                                 "Required value: exactly one of url or service is required"))
        elif "service" in config:
            service = config["service"] or {}
            for field in ("namespace", "name"):
                if not service.get(field):
                    causes.append(cause("FieldValueRequired", f"{path}.clientConfig.service.{field}",
                                         "Required value: service " + field + " is required"))
        elif not str(config.get("url") or "").startswith("https://"):
            causes.append(cause("FieldValueInvalid", f"{path}.clientConfig.url",
                                 "Invalid value: 'https' is the only allowed URL scheme"))
        effects = w.get("sideEffects")
        if effects is None:
            causes.append(cause("FieldValueRequired", f"{path}.sideEffects",
                                 'Required value: must specify one of "None", "NoneOnDryRun"'))
        elif effects not in _SIDE_EFFECTS:
            causes.append(cause("FieldValueNotSupported", f"{path}.sideEffects",
                                 f'Unsupported value: "{effects}": supported values: "None", "NoneOnDryRun"'))
        versions = w.get("admissionReviewVersions")
        if not versions:
            causes.append(cause("FieldValueRequired", f"{path}.admissionReviewVersions",
                                 "Required value: must specify one of v1, v1beta1"))
        elif not any(v in _REVIEW_VERSIONS for v in versions):
            causes.append(cause("FieldValueInvalid", f"{path}.admissionReviewVersions",
                                 "Invalid value: must include at least one of v1, v1beta1"))
        for field, allowed in (("failurePolicy", ("Ignore", "Fail")), ("matchPolicy", ("Exact", "Equivalent")),
                               ("reinvocationPolicy", ("Never", "IfNeeded"))):
            value = w.get(field)
            if value is not None and value not in allowed:
                causes.append(cause("FieldValueNotSupported", f"{path}.{field}",
                                     f'Unsupported value: "{value}": supported values: '
                                     + ", ".join(f'"{a}"' for a in allowed)))
        timeout = w.get("timeoutSeconds")
        if isinstance(timeout, int) and not 1 <= timeout <= 30:
            causes.append(cause("FieldValueInvalid", f"{path}.timeoutSeconds",
                                 f"Invalid value: {timeout}: the timeout value must be between 1 and 30 seconds"))
        if not unchanged:
            causes += condition_causes(w.get("matchConditions"), f"{path}.matchConditions", _MATCH_CONDITION_NAMES)
    return causes


def _conditions_unchanged(webhooks: list[Any], old: dict[str, Any] | None) -> bool:
    """Whether an update keeps each webhook's match conditions (upstream's
    ``ignore*WebhookMatchConditions``: as many webhooks, each one's conditions equal)."""
    if old is None:
        return False
    before = old.get("webhooks")
    if not isinstance(before, list) or len(before) != len(webhooks):
        return False
    return all(isinstance(w, dict) and isinstance(b, dict) and w.get("matchConditions") == b.get("matchConditions")
               for w, b in zip(webhooks, before, strict=True))


# what a webhook's match condition may name: upstream compiles it with HasAuthorizer and without
# params (createEnvForOpts declares namespaceObject always; null when they run)
_MATCH_CONDITION_NAMES = BASE_NAMES | {"authorizer"}
