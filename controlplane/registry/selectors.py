"""Label and field selectors, with kube-apiserver's syntax and its per-type fields.

    >>> sel = parse_label_selector("app=web,tier in (front, back),!canary,gen>2")
    >>> sel.matches({"app": "web", "tier": "front", "gen": "3"})
    True
    >>> fields = parse_field_selector("spec.nodeName=node-1,status.phase!=Failed", "pods")
    >>> fields.matches({"spec": {"nodeName": "node-1"}, "status": {"phase": "Running"}})
    True

A selector a caller cannot use (bad syntax, a field the type does not index)
raises ``SelectorError``; the API turns it into a 400.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .podvalidation import label_key_problems

__all__ = [
    "FieldSelector",
    "LabelSelector",
    "SelectorError",
    "parse_field_selector",
    "parse_label_selector",
    "selectable_fields",
]


class SelectorError(ValueError):
    pass


# -- labels ---------------------------------------------------------------------
_KEY = r"[A-Za-z0-9]([-A-Za-z0-9_./]*[A-Za-z0-9])?"
_VALUE = r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?"
_KEY_RE = re.compile(_KEY + r"\Z")
_VALUE_RE = re.compile(_VALUE + r"\Z")


@dataclass(frozen=True, slots=True)
class _Requirement:
    key: str
    op: str                       # "=", "!=", "in", "notin", "exists", "!exists", "gt", "lt"
    values: frozenset[str]

    def matches(self, labels: dict[str, str]) -> bool:
        has = self.key in labels
        if self.op in ("gt", "lt"):  # both sides integers, as upstream; a label that is not one never matches
            try:
                have, bound = int(labels[self.key]), int(next(iter(self.values)))
            except (KeyError, ValueError):
                return False
            return have > bound if self.op == "gt" else have < bound
        if self.op == "exists":
            return has
        if self.op == "!exists":
            return not has
        if self.op in ("=", "in"):
            return has and labels[self.key] in self.values
        return not has or labels[self.key] not in self.values  # "!=", "notin"


@dataclass(frozen=True, slots=True)
class LabelSelector:
    requirements: tuple[_Requirement, ...]

    def matches(self, labels: dict[str, str] | None) -> bool:
        labels = labels or {}
        return all(r.matches(labels) for r in self.requirements)

    @property
    def empty(self) -> bool:
        return not self.requirements


def _split_top(text: str) -> list[str]:
    """Split on commas outside parentheses."""
    parts: list[str] = []
    depth = 0
    cur: list[str] = []
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth < 0:
                raise SelectorError(f"unbalanced parentheses in {text!r}")
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if depth:
        raise SelectorError(f"unbalanced parentheses in {text!r}")
    parts.append("".join(cur))
    return parts


def _check_key(key: str, text: str) -> str:
    if not _KEY_RE.match(key):
        raise SelectorError(f"invalid label key {key!r} in selector {text!r}")
    # a qualified name, as upstream's NewRequirement checks it: a name part of 300
    # characters or a key of three parts matched nothing, and answered 200
    problems = label_key_problems(key)
    if problems:
        raise SelectorError(f"invalid label key {key!r} in selector {text!r}: {'; '.join(problems)}")
    return key


def _check_value(value: str, text: str) -> str:
    if len(value) > 63 or not _VALUE_RE.match(value):
        raise SelectorError(f"invalid label value {value!r} in selector {text!r}")
    return value


_SET_RE = re.compile(r"^\s*(\S+?)\s+(in|notin)\s*\((.*)\)\s*$")


def parse_label_selector(text: str | None) -> LabelSelector:
    if not text or not text.strip():
        return LabelSelector(())
    reqs: list[_Requirement] = []
    for part in _split_top(text):
        part = part.strip()
        if not part:
            raise SelectorError(f"empty requirement in selector {text!r}")
        m = _SET_RE.match(part)
        if m:
            key, op, vals = m.group(1), m.group(2), m.group(3)
            values = frozenset(_check_value(v.strip(), text) for v in vals.split(","))
            reqs.append(_Requirement(_check_key(key, text), op, values))
            continue
        for op in ("==", "!=", "=", ">", "<"):
            if op in part:
                key, value = (s.strip() for s in part.split(op, 1))
                if op in (">", "<"):
                    try:
                        int(value)
                    except ValueError as e:
                        raise SelectorError(f"for 'Gt', 'Lt' operators, the value must be an integer: "
                                            f"{value!r} in selector {text!r}") from e
                    reqs.append(_Requirement(_check_key(key, text), "gt" if op == ">" else "lt",
                                             frozenset([value])))
                    break
                reqs.append(_Requirement(_check_key(key, text), "=" if op == "==" else op,
                                         frozenset([_check_value(value, text)])))
                break
        else:
            if part.startswith("!"):
                reqs.append(_Requirement(_check_key(part[1:].strip(), text), "!exists", frozenset()))
            else:
                reqs.append(_Requirement(_check_key(part, text), "exists", frozenset()))
    return LabelSelector(tuple(reqs))


# -- fields ---------------------------------------------------------------------
def _path(*keys: str, zero: str = "") -> Callable[[dict[str, Any]], str]:
    """The field at ``keys`` as its selector value; ``zero`` when absent (Go's zero value
    of the field's type, as upstream formats it: "false" for a bool, "0" for a number).

    Every write computes its object's selectable fields (``attrs.attrs_of``), so the
    paths of two keys and fewer (all of them today) get getters without the loop."""
    def value(cur: Any) -> str:
        if cur is None:
            return zero
        if isinstance(cur, bool):
            return "true" if cur else "false"
        return str(cur)

    if len(keys) == 1:
        (only,) = keys

        def get_one(obj: dict[str, Any]) -> str:
            cur = obj.get(only) if isinstance(obj, dict) else None
            return cur if cur.__class__ is str else value(cur)  # a str is its own value
        return get_one
    if len(keys) == 2:
        first, second = keys

        def get_two(obj: dict[str, Any]) -> str:
            cur = obj.get(first) if isinstance(obj, dict) else None
            cur = cur.get(second) if isinstance(cur, dict) else None
            return cur if cur.__class__ is str else value(cur)
        return get_two

    def get(obj: dict[str, Any]) -> str:
        cur: Any = obj
        for k in keys:
            if not isinstance(cur, dict):
                return zero
            cur = cur.get(k)
        return value(cur)
    return get


_COMMON = {"metadata.name": _path("metadata", "name"), "metadata.namespace": _path("metadata", "namespace")}
_source_component = _path("source", "component")
_reporting_component = _path("reportingComponent")


def _event_source(obj: dict[str, Any]) -> str:
    """An Event's ``source`` field: ``source.component``, else ``reportingComponent``
    (upstream's ToSelectableFields: an events.k8s.io/v1 writer sets no source)."""
    return _source_component(obj) or _reporting_component(obj)

# The fields kube-apiserver indexes for field selectors, per resource (its
# GetAttrs functions); anything else is refused, as kube-apiserver refuses it.
FIELDS: dict[str, dict[str, Callable[[dict[str, Any]], str]]] = {
    "pods": {
        "spec.nodeName": _path("spec", "nodeName"),
        "spec.restartPolicy": _path("spec", "restartPolicy"),
        "spec.schedulerName": _path("spec", "schedulerName"),
        "spec.serviceAccountName": _path("spec", "serviceAccountName"),
        "spec.hostNetwork": _path("spec", "hostNetwork", zero="false"),
        "status.phase": _path("status", "phase"),
        "status.podIP": _path("status", "podIP"),
        "status.nominatedNodeName": _path("status", "nominatedNodeName"),
    },
    "events": {
        "involvedObject.kind": _path("involvedObject", "kind"),
        "involvedObject.namespace": _path("involvedObject", "namespace"),
        "involvedObject.name": _path("involvedObject", "name"),
        "involvedObject.uid": _path("involvedObject", "uid"),
        "involvedObject.apiVersion": _path("involvedObject", "apiVersion"),
        "involvedObject.resourceVersion": _path("involvedObject", "resourceVersion"),
        "involvedObject.fieldPath": _path("involvedObject", "fieldPath"),
        "reason": _path("reason"),
        "reportingComponent": _path("reportingComponent"),
        "source": _event_source,
        "type": _path("type"),
    },
    "secrets": {"type": _path("type")},
    "namespaces": {"status.phase": _path("status", "phase")},
    "nodes": {"spec.unschedulable": _path("spec", "unschedulable", zero="false")},
    "replicationcontrollers": {"status.replicas": _path("status", "replicas", zero="0")},
    "replicasets": {"status.replicas": _path("status", "replicas", zero="0")},
    "jobs": {"status.successful": _path("status", "succeeded", zero="0")},
    "services": {"spec.clusterIP": _path("spec", "clusterIP"), "spec.type": _path("spec", "type")},
    # certificates.k8s.io: what a signer lists and watches its requests by (upstream's conversion.go)
    "certificatesigningrequests": {"spec.signerName": _path("spec", "signerName")},
    "clustertrustbundles": {"spec.signerName": _path("spec", "signerName")},
    "podcertificaterequests": {"spec.signerName": _path("spec", "signerName"), "spec.podName": _path("spec", "podName"),
                               "spec.nodeName": _path("spec", "nodeName")},
    # resource.k8s.io: what DRA drivers and the kubelet list (and delete) their slices by
    "resourceslices": {"spec.nodeName": _path("spec", "nodeName"), "spec.driver": _path("spec", "driver")},
}


def selectable_fields(plural: str) -> dict[str, Callable[[dict[str, Any]], str]]:
    """Field name -> getter, for every field a selector on ``plural`` may name; the
    getters are the very objects ``parse_field_selector`` puts in its terms."""
    return _COMMON | FIELDS.get(plural, {})


@dataclass(frozen=True, slots=True)
class FieldSelector:
    terms: tuple[tuple[Callable[[dict[str, Any]], str], bool, str], ...]  # (getter, equal, value)

    def matches(self, obj: dict[str, Any]) -> bool:
        return all((get(obj) == value) == equal for get, equal, value in self.terms)

    @property
    def empty(self) -> bool:
        return not self.terms


def parse_field_selector(text: str | None, plural: str) -> FieldSelector:
    if not text or not text.strip():
        return FieldSelector(())
    fields = selectable_fields(plural)
    terms = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue  # as upstream's parseSelector: kr8s asks for `metadata.name=x,`
        for op in ("==", "!=", "="):
            if op in part:
                field, value = (s.strip() for s in part.split(op, 1))
                break
        else:
            raise SelectorError(f"invalid selector: '{text}'; can't understand '{part}'")  # upstream's words
        if field not in fields:
            raise SelectorError(f'field label not supported: {field}')
        terms.append((fields[field], op != "!=", value))
    return FieldSelector(tuple(terms))
