"""apiregistration.k8s.io/v1 APIServices: upstream's defaults, validation, and the local
APIServices kube-apiserver registers for what it serves.

Every group/version this server serves has a *local* APIService (no
``spec.service``), named ``<version>.<group>`` (``v1.`` for the core group) and
``Available`` with reason ``Local``, as kube-apiserver's autoregistration makes
them: the built-in ones at start (``api/rest.py``; labelled ``automanaged:
onstart``), those of custom resources kept in step with their
CustomResourceDefinitions (``controllers/apiservices.py``, as upstream's
crdregistration controller; labelled ``automanaged: "true"``).

An APIService naming a Service is stored and validated, but this server proxies
to no aggregated API server: its group is not served, and its ``Available``
condition says why (``controllers/apiservices.py``; docs/api-compatibility.md).
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from .causes import Causes, invalid, required
from .dnsnames import DNS1035_LABEL, DNS1123_SUBDOMAIN

__all__ = ["APIREGISTRATION_GROUP", "APIREGISTRATION_GROUP_PRIORITY", "AUTOMANAGED", "UPSTREAM_PRIORITIES",
           "local_apiservice", "prepare_apiservice", "priority_of"]

Obj = dict[str, Any]

AUTOMANAGED = "kube-aggregator.kubernetes.io/automanaged"

# (group, version) -> (groupPriorityMinimum, versionPriority): upstream's apiVersionPriorities,
# kube-apiserver's table (cmd/kube-apiserver/app/aggregator.go) merged over the generic one
# (pkg/controlplane/apiserver/aggregator.go, DefaultGenericAPIServicePriorities), whole,
# served here or not. The local APIServices carry them; discovery orders groups and versions
# by them (api/discovery.py). Unlike the rest, three are not in the 1.33 tables stored to read:
# resource.k8s.io/v1 (GA in 1.34, above its betas as flowcontrol's v1 is), this server's
# scheduling.k8s.io/v1beta1 (a later release's Workload API), under v1 as other groups' betas;
# and storagemigration.k8s.io/v1 (GA in 1.37), in its group's place, as other groups' v1
UPSTREAM_PRIORITIES: dict[tuple[str, str], tuple[int, int]] = {
    ("", "v1"): (18000, 1),
    # the generic table
    ("events.k8s.io", "v1"): (17750, 15),
    ("events.k8s.io", "v1beta1"): (17750, 5),
    ("authentication.k8s.io", "v1"): (17700, 15),
    ("authentication.k8s.io", "v1beta1"): (17700, 9),
    ("authentication.k8s.io", "v1alpha1"): (17700, 1),
    ("authorization.k8s.io", "v1"): (17600, 15),
    ("certificates.k8s.io", "v1"): (17300, 15),
    ("certificates.k8s.io", "v1alpha1"): (17300, 1),
    ("rbac.authorization.k8s.io", "v1"): (17000, 15),
    ("apiextensions.k8s.io", "v1"): (16700, 15),
    ("admissionregistration.k8s.io", "v1"): (16700, 15),
    ("admissionregistration.k8s.io", "v1beta1"): (16700, 12),
    ("admissionregistration.k8s.io", "v1alpha1"): (16700, 9),
    ("coordination.k8s.io", "v1"): (16500, 15),
    ("discovery.k8s.io", "v1"): (16200, 15),
    ("discovery.k8s.io", "v1beta1"): (16200, 12),
    ("flowcontrol.apiserver.k8s.io", "v1"): (16100, 21),
    ("flowcontrol.apiserver.k8s.io", "v1beta3"): (16100, 18),
    ("flowcontrol.apiserver.k8s.io", "v1beta2"): (16100, 15),
    ("flowcontrol.apiserver.k8s.io", "v1beta1"): (16100, 12),
    ("flowcontrol.apiserver.k8s.io", "v1alpha1"): (16100, 9),
    ("internal.apiserver.k8s.io", "v1alpha1"): (16000, 9),
    ("storagemigration.k8s.io", "v1alpha1"): (15800, 9),
    # kube-apiserver's own
    ("apps", "v1"): (17800, 15),
    ("autoscaling", "v1"): (17500, 15),
    ("autoscaling", "v2"): (17500, 30),
    ("autoscaling", "v2beta1"): (17500, 9),
    ("autoscaling", "v2beta2"): (17500, 1),
    ("batch", "v1"): (17400, 15),
    ("batch", "v1beta1"): (17400, 9),
    ("batch", "v2alpha1"): (17400, 9),
    ("networking.k8s.io", "v1"): (17200, 15),
    ("networking.k8s.io", "v1beta1"): (17200, 9),
    ("policy", "v1"): (17100, 15),
    ("policy", "v1beta1"): (17100, 9),
    ("storage.k8s.io", "v1"): (16800, 15),
    ("storage.k8s.io", "v1beta1"): (16800, 9),
    ("storage.k8s.io", "v1alpha1"): (16800, 1),
    ("scheduling.k8s.io", "v1"): (16600, 15),
    ("node.k8s.io", "v1"): (16300, 15),
    ("node.k8s.io", "v1alpha1"): (16300, 1),
    ("node.k8s.io", "v1beta1"): (16300, 9),
    ("resource.k8s.io", "v1beta2"): (16200, 15),
    ("resource.k8s.io", "v1beta1"): (16200, 9),
    ("resource.k8s.io", "v1alpha3"): (16200, 1),
    # (not in the tables read: see above)
    ("resource.k8s.io", "v1"): (16200, 21),
    ("scheduling.k8s.io", "v1beta1"): (16600, 12),
    ("storagemigration.k8s.io", "v1"): (15800, 15),
}
# beyond the tables: the aggregator's own group, whose APIService clusters show so (its
# discovery puts it first whatever: APIREGISTRATION_GROUP_PRIORITY); metrics.k8s.io, served
# here in process where clusters run metrics-server behind an APIService of its manifest's
_PRIORITIES = {**UPSTREAM_PRIORITIES, ("apiregistration.k8s.io", "v1"): (18000, 15),
               ("metrics.k8s.io", "v1beta1"): (100, 100)}
# custom resources' groups, as the crdregistration controller registers them; this
# server's own groups (nodes.controlplane.dev) likewise
CUSTOM_PRIORITY = (1000, 100)
APIREGISTRATION_GROUP = "apiregistration.k8s.io"
# the aggregator's group in aggregated discovery: above the highest an APIService may say
# (20000), first, as its /apis lists it (kube-aggregator's APIRegistrationGroupPriority)
APIREGISTRATION_GROUP_PRIORITY = 20001


def priority_of(group: str, version: str) -> tuple[int, int]:
    """(groupPriorityMinimum, versionPriority) of a served group/version."""
    return _PRIORITIES.get((group, version), CUSTOM_PRIORITY)


def local_apiservice(group: str, version: str, managed: str) -> Obj:
    """The local APIService of a served group/version (``managed``: its automanaged label's value)."""
    group_minimum, version_priority = priority_of(group, version)
    return {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
            "metadata": {"name": f"{version}.{group}", "labels": {AUTOMANAGED: managed}},
            "spec": {"group": group, "version": version, "groupPriorityMinimum": group_minimum,
                     "versionPriority": version_priority}}


def _path_segment_problems(name: str) -> list[str]:
    """Upstream's IsValidPathSegmentName."""
    if name in (".", ".."):
        return [f"may not be '{name}'"]
    return [f"may not contain '{c}'" for c in ("/", "%") if c in name]


def name_causes(name: str) -> Causes:
    """The causes of a 422 in an APIService's name alone (any name that is a path segment:
    ``v1.``, the core group's, is no DNS subdomain)."""
    return [invalid("metadata.name", name, why) for why in _path_segment_problems(name)]


def _ca_bundle_size(value: Any) -> int:
    if not isinstance(value, str) or not value:
        return 0
    try:
        return len(base64.b64decode(value, validate=True))
    except (binascii.Error, ValueError):
        return len(value)


def prepare_apiservice(svc: Obj, old: Obj | None) -> Causes:
    """Defaults in place (a service's port, 443), then the causes of a 422, as upstream's
    ValidateAPIService."""
    spec = svc.get("spec")
    if not isinstance(spec, dict):
        spec = svc["spec"] = {}
    service = spec.get("service")
    if isinstance(service, dict) and service.get("port") is None:
        service["port"] = 443
    group, version = spec.get("group") or "", spec.get("version") or ""
    name = (svc.get("metadata") or {}).get("name") or ""
    causes: Causes = []
    wanted = f"{version}.{group}"
    if not _path_segment_problems(name) and name != wanted:
        causes.append(invalid("metadata.name", name, f'must be `spec.version+"."+spec.group`: "{wanted}"'))
    if not group and version != "v1":
        causes.append(required("spec.group", "only v1 may have an empty group and it better be legacy kube"))
    if group and (not isinstance(group, str) or not DNS1123_SUBDOMAIN.match(group) or len(group) > 253):
        causes.append(invalid("spec.group", group, _SUBDOMAIN_HINT))
    if not isinstance(version, str) or not DNS1035_LABEL.match(version) or len(version) > 63:
        causes.append(invalid("spec.version", version, _DNS1035_HINT))
    group_minimum, version_priority = spec.get("groupPriorityMinimum"), spec.get("versionPriority")
    if not isinstance(group_minimum, int) or not 0 < group_minimum <= 20000:
        causes.append(invalid("spec.groupPriorityMinimum", group_minimum or 0, "must be positive and less than 20000"))
    if not isinstance(version_priority, int) or not 0 < version_priority <= 1000:
        causes.append(invalid("spec.versionPriority", version_priority or 0, "must be positive and less than 1000"))
    skip_tls = bool(spec.get("insecureSkipTLSVerify"))
    bundle = _ca_bundle_size(spec.get("caBundle"))
    if not isinstance(service, dict):
        if bundle:
            causes.append(invalid("spec.caBundle", f"{bundle} bytes", "local APIServices may not have a caBundle"))
        if skip_tls:
            causes.append(invalid("spec.insecureSkipTLSVerify", True,
                                  "local APIServices may not have insecureSkipTLSVerify"))
        return causes
    if not service.get("namespace"):
        causes.append(required("spec.service.namespace"))
    if not service.get("name"):
        causes.append(required("spec.service.name"))
    port = service.get("port")
    if not isinstance(port, int) or not 0 < port <= 65535:
        causes.append(invalid("spec.service.port", port,
                              "port is not valid: must be between 1 and 65535, inclusive"))
    if skip_tls and bundle:
        causes.append(invalid("spec.insecureSkipTLSVerify", True, "may not be true if caBundle is present"))
    return causes


_SUBDOMAIN_HINT = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
                   "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
                   "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
_DNS1035_HINT = ("a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
                 "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', "
                 "regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')")
