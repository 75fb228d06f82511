"""Where a webhook is reached: upstream's checks of a webhook's URL and of its
Service reference (k8s.io/apiserver ``util/webhook``), as 422 causes.

Used for a CustomResourceDefinition's conversion webhook. This server stores
the configuration and never calls the webhook (docs/api-compatibility.md), so
these are the only checks that apply to it: what kube-apiserver refuses is
refused here with the same field paths and words.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from .dnsnames import DNS1123_SUBDOMAIN, SUBDOMAIN_MESSAGE
from .structural import Cause, describe

__all__ = ["service_causes", "url_causes"]

_FORM = "; desired format: https://host[/path]"


def _invalid(field: str, value: Any, detail: str) -> Cause:
    return {"reason": "FieldValueInvalid", "field": field, "message": f"Invalid value: {describe(value)}: {detail}"}


def _required(field: str, detail: str = "") -> Cause:
    return {"reason": "FieldValueRequired", "field": field,
            "message": "Required value" + (f": {detail}" if detail else "")}


def url_causes(field: str, url: Any) -> list[Cause]:
    """An https URL with a host, and no user information, fragment or query."""
    if not isinstance(url, str):
        return [_invalid(field, url, "must be a string")]
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises on a port that is no number
    except ValueError as e:
        return [_required(field, f"url must be a valid URL: {e}{_FORM}")]
    causes = []
    if parts.scheme != "https":
        causes.append(_invalid(field, parts.scheme, "'https' is the only allowed URL scheme" + _FORM))
    host = parts.netloc.rpartition("@")[2]
    if not host:
        causes.append(_invalid(field, host, "host must be specified" + _FORM))
    if "@" in parts.netloc:
        causes.append(_invalid(field, parts.netloc.rpartition("@")[0], "user information is not permitted in the URL"))
    if parts.fragment:
        causes.append(_invalid(field, parts.fragment, "fragments are not permitted in the URL"))
    if parts.query:
        causes.append(_invalid(field, parts.query, "query parameters are not permitted in the URL"))
    return causes


def service_causes(field: str, service: Any) -> list[Cause]:
    """A name and a namespace, a port in 1-65535 (443 when left out: defaulted
    before), and a path of DNS-subdomain segments."""
    if not isinstance(service, dict):
        return [_invalid(field, service, "must be an object")]
    causes = [_required(f"{field}.{part}") for part in ("name", "namespace") if not service.get(part)]
    port = service.get("port", 443)
    if not isinstance(port, int) or isinstance(port, bool) or not 1 <= port <= 65535:
        causes.append(_invalid(f"{field}.port", port, "port is not valid: must be between 1 and 65535, inclusive"))
    path = service.get("path")
    if path is None or path in ("", "/"):
        return causes
    if not isinstance(path, str):
        return [*causes, _invalid(f"{field}.path", path, "must be a string")]
    if path == "//":
        return [*causes, _invalid(f"{field}.path", path, "segment[0] may not be empty")]
    if not path.startswith("/"):
        causes.append(_invalid(f"{field}.path", path, "must start with a '/'"))
    steps = path[1:]
    steps = steps[:-1] if steps.endswith("/") else steps
    for i, step in enumerate(steps.split("/")):
        if not step:
            causes.append(_invalid(f"{field}.path", path, f"segment[{i}] may not be empty"))
        elif len(step) > 253:
            causes.append(_invalid(f"{field}.path", path, f"segment[{i}]: must be no more than 253 characters"))
        elif not DNS1123_SUBDOMAIN.match(step):
            causes.append(_invalid(f"{field}.path", path, f"segment[{i}]: {SUBDOMAIN_MESSAGE}"))
    return causes
