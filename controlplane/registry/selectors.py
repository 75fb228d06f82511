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

import functools
import re
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

from .causes import show
from .podvalidation import label_key_problems, label_value_problems

__all__ = [
    "FieldSelector",
    "LabelSelector",
    "SelectorError",
    "custom_fields_key",
    "exact_match",
    "parse_field_selector",
    "parse_label_selector",
    "selectable_fields",
]


class SelectorError(ValueError):
    pass


# -- labels ---------------------------------------------------------------------
# The grammar and the error words of apimachinery's labels.Parse, a lexer and a recursive
# descent of its own kind (the regular expressions this replaced took "a in (b" for
# unbalanced, and answered in words kubectl's users never see from a cluster):
#
#   selector    := requirement ("," requirement)*  |  ""
#   requirement := ["!"] KEY [ ("in" | "notin") "(" values ")" | ("=" | "==" | "!=" | ">" | "<") [VALUE] ]
#   values      := VALUE? ("," VALUE?)*     ("()" and empty items are the empty value)
#
# A key is checked when it is read, each value once its requirement is whole; "in" and
# "notin" are values where a value is expected (``x in (in)``).
_SPECIAL = frozenset("=!(),><")
_SPACE = frozenset(" \t\r\n")
_END, _ID, _OPEN, _CLOSE, _COMMA, _NOT, _IN, _NOTIN, _EQ, _DEQ, _NEQ, _GT, _LT = range(13)
_LITERALS = {")": _CLOSE, ",": _COMMA, "!": _NOT, "==": _DEQ, "=": _EQ, ">": _GT, "in": _IN, "<": _LT,
             "!=": _NEQ, "notin": _NOTIN, "(": _OPEN}
_OPERATORS = {_IN: "in", _NOTIN: "notin", _EQ: "=", _DEQ: "==", _NEQ: "!=", _GT: "gt", _LT: "lt"}
_BINARY = "in, notin, =, ==, !=, gt, lt"  # selection's binary operators, as the parser's error lists them
_INT64 = re.compile(r"[+-]?[0-9]+\Z")


@dataclass(frozen=True, slots=True)
class _Requirement:
    key: str
    op: str                       # "=", "!=", "in", "notin", "exists", "!exists", "gt", "lt"
    values: frozenset[str]

    def matches(self, labels: dict[str, str]) -> bool:
        has = self.key in labels
        if self.op in ("gt", "lt"):  # both sides integers, as upstream; a label that is not one never matches
            have = _int64(labels[self.key]) if has else None
            bound = _int64(next(iter(self.values)))
            if have is None or bound is None:
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


def _int64(text: str) -> int | None:
    """``strconv.ParseInt(text, 10, 64)``, or None where it fails."""
    if not _INT64.match(text):
        return None
    value = int(text)
    return value if -(1 << 63) <= value < 1 << 63 else None


def _tokens(text: str) -> list[tuple[int, str]]:
    """The lexer's tokens, the last ``_END``: runs of special symbols are read as the longest
    literal (``!=`` before ``!``), anything else up to a space or a symbol is a word, ``in``
    and ``notin`` keywords. A NUL ends the string, as the lexer reads it."""
    text = text.split("\0", 1)[0]
    out: list[tuple[int, str]] = []
    i, n = 0, len(text)
    while True:
        while i < n and text[i] in _SPACE:
            i += 1
        if i == n:
            out.append((_END, ""))
            return out
        if text[i] in _SPECIAL:
            two = text[i:i + 2]
            lit = two if two in _LITERALS else text[i]
            out.append((_LITERALS[lit], lit))
            i += len(lit)
            continue
        j = i
        while j < n and text[j] not in _SPECIAL and text[j] not in _SPACE:
            j += 1
        word = text[i:j]
        out.append((_LITERALS.get(word, _ID) if word in ("in", "notin") else _ID, word))
        i = j


class _Parser:
    def __init__(self, text: str) -> None:
        self.items = _tokens(text)
        self.at = 0

    def look(self, value: bool = True) -> tuple[int, str]:
        tok, lit = self.items[self.at]
        return (_ID if value and tok in (_IN, _NOTIN) else tok), lit

    def take(self, value: bool = True) -> tuple[int, str]:
        got = self.look(value)
        self.at += 1
        return got

    def selector(self) -> list[_Requirement]:
        reqs: list[_Requirement] = []
        while True:
            tok, lit = self.look()
            if tok == _END:
                return reqs
            if tok not in (_ID, _NOT):
                raise SelectorError(f"found '{lit}', expected: !, identifier, or 'end of string'")
            try:
                reqs.append(self.requirement())
            except SelectorError as e:
                raise SelectorError(f"unable to parse requirement: {e}") from None
            tok, lit = self.take()
            if tok == _END:
                return reqs
            if tok != _COMMA:
                raise SelectorError(f"found '{lit}', expected: ',' or 'end of string'")
            tok, lit = self.look()
            if tok not in (_ID, _NOT):
                raise SelectorError(f"found '{lit}', expected: identifier after ','")

    def requirement(self) -> _Requirement:
        tok, lit = self.take()
        negated = tok == _NOT
        if negated:
            tok, lit = self.take()
        if tok != _ID:
            raise SelectorError(f"found '{lit}', expected: identifier")
        key = lit
        problems = label_key_problems(key)
        if problems:  # validateLabelKey with the parser's path, which is none
            raise SelectorError(f"<nil>: Invalid value: {show(key)}: {'; '.join(problems)}")
        if negated or self.look()[0] in (_END, _COMMA):
            return _Requirement(key, "!exists" if negated else "exists", frozenset())
        tok, lit = self.take(value=False)
        op = _OPERATORS.get(tok)
        if op is None:
            raise SelectorError(f"found '{lit}', expected: {_BINARY}")
        values = self.set_values() if op in ("in", "notin") else self.exact_value()
        return _requirement(key, op, values)

    def set_values(self) -> set[str]:
        tok, lit = self.take()
        if tok != _OPEN:
            raise SelectorError(f"found '{lit}' expected: '('")
        tok, lit = self.look()
        if tok == _CLOSE:  # "()"
            self.take()
            return {""}
        if tok not in (_ID, _COMMA):
            raise SelectorError(f"found '{lit}', expected: ',', ')' or identifier")
        values = self.value_list()
        if self.take()[0] != _CLOSE:
            raise SelectorError(f"found '{lit}', expected: ')'")  # (the word before the list, as upstream's)
        return values

    def value_list(self) -> set[str]:
        values: set[str] = set()
        while True:
            tok, lit = self.take()
            if tok == _ID:
                values.add(lit)
                after, lit2 = self.look()
                if after == _CLOSE:
                    return values
                if after != _COMMA:
                    raise SelectorError(f"found '{lit2}', expected: ',' or ')'")
            elif tok == _COMMA:  # an empty item: "(,a", "a,,b", "a,)"
                if not values:
                    values.add("")
                after, _ = self.look()
                if after == _CLOSE:
                    values.add("")
                    return values
                if after == _COMMA:
                    values.add("")
            else:
                raise SelectorError(f"found '{lit}', expected: ',', or identifier")

    def exact_value(self) -> set[str]:
        if self.look()[0] in (_END, _COMMA):
            return {""}
        tok, lit = self.take()
        if tok != _ID:
            raise SelectorError(f"found '{lit}', expected: identifier")
        return {lit}


def _requirement(key: str, op: str, values: set[str]) -> _Requirement:
    """NewRequirement's checks of the values (sorted, as its set's list), each problem one
    error of an aggregate: a bound that is no integer, a value that is no label value."""
    listed = sorted(values)
    errors: list[str] = []
    if op in ("gt", "lt"):
        errors += [f"values[{i}]: Invalid value: {show(v)}: for 'Gt', 'Lt' operators, the value must be an integer"
                   for i, v in enumerate(listed) if _int64(v) is None]
    for i, v in enumerate(listed):
        problems = label_value_problems(v)
        if problems:
            errors.append(f"values[{i}][{key}]: Invalid value: {show(v)}: {'; '.join(problems)}")
    errors = list(dict.fromkeys(errors))
    if errors:
        raise SelectorError(errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]")
    return _Requirement(key, "=" if op == "==" else op, frozenset(listed))


def parse_label_selector(text: str | None) -> LabelSelector:
    """``text`` as upstream's labels.Parse reads it; ``SelectorError`` in its words
    (``unable to parse requirement: found '', expected: ',' or ')'``) where it fails."""
    if not text or not text.strip():
        return LabelSelector(())
    return _parsed(text)


@functools.lru_cache(maxsize=1024)
def _parsed(text: str) -> LabelSelector:
    """The selectors clients send again and again (a kubelet's, a controller's), parsed once:
    a ``LabelSelector`` is immutable, so the one parsed serves every request that sends it."""
    return LabelSelector(tuple(_Parser(text).selector()))


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


# between a custom_fields_key's parts: no plural has it, nor, in practice, a schema's property name
_KEY_SEPARATOR = "\x1f"


def custom_fields_key(crd: str, namespaced: bool, paths: tuple[str, ...]) -> str:
    """What stands for a custom resource's ``plural`` here: its CRD's name (a plural and a
    group, so never a built-in plural: a CRD's ``jobs`` has no ``status.successful``), its
    scope and its ``selectableFields`` (their ``jsonPath``s without the leading dot). A CRD
    that changes its selectable fields changes its key, and so its field set; the key
    alone says what the fields are, so its field set is made from it when first asked for."""
    return _KEY_SEPARATOR.join((crd, "n" if namespaced else "c", *paths))


@functools.cache
def _custom_fields(key: str) -> dict[str, Callable[[dict[str, Any]], str]]:
    """A custom resource's fields (``custom_fields_key``), as upstream's customResourceStrategy
    makes its field set: ``metadata.name``, ``metadata.namespace`` if it is namespaced, and
    each selectable field's value (``fmt.Sprint`` of it: ``true``, ``3``; ``""`` when absent)."""
    _, scope, *paths = key.split(_KEY_SEPARATOR)
    fields = dict(_COMMON) if scope == "n" else {"metadata.name": _COMMON["metadata.name"]}
    for path in paths:
        fields.setdefault(path, _path(*path.split(".")))
    return fields


def selectable_fields(plural: str) -> dict[str, Callable[[dict[str, Any]], str]]:
    """Field name -> getter, for every field a selector on ``plural`` (a built-in type's
    plural, or a custom resource's ``custom_fields_key``) may name; the getters are the
    very objects ``parse_field_selector`` puts in its terms."""
    if _KEY_SEPARATOR in plural:
        return _custom_fields(plural)
    return _COMMON | FIELDS.get(plural, {})


@dataclass(frozen=True, slots=True)
class FieldSelector:
    terms: tuple[tuple[Callable[[dict[str, Any]], str], bool, str], ...]  # (getter, equal, value)

    def matches(self, obj: dict[str, Any]) -> bool:
        return all((get(obj) == value) == equal for get, equal, value in self.terms)

    @property
    def empty(self) -> bool:
        return not self.terms


def _split_terms(text: str) -> list[str]:
    """fields.splitTerms: the terms between commas, a backslash-escaped comma kept in its term
    (with its backslash, for ``_unescape_value``)."""
    terms, start, escaped = [], 0, False
    for i, c in enumerate(text):
        if escaped:
            escaped = False
        elif c == "\\":
            escaped = True
        elif c == ",":
            terms.append(text[start:i])
            start = i + 1
    terms.append(text[start:])
    return terms


def _split_term(term: str) -> tuple[str, str, str] | None:
    """fields.splitTerm: split at the first operator from the left (``!=``, then ``==``, then
    ``=`` at each position): ``a=b!=c`` is ``a`` = ``b!=c``, whose ``=`` is then refused."""
    for i in range(len(term)):
        for op in ("!=", "==", "="):
            if term.startswith(op, i):
                return term[:i], op, term[i + len(op):]
    return None


def _unescape_value(value: str) -> str:
    """fields.UnescapeValue: ``\\\\``, ``\\,`` and ``\\=`` are the characters; another escape, a
    trailing backslash, or a bare ``,`` or ``=`` is upstream's 400."""
    if "\\" not in value and "," not in value and "=" not in value:
        return value
    out, escaped = [], False
    for c in value:
        if escaped:
            if c not in "\\,=":
                raise SelectorError(f"invalid field selector: invalid escape sequence: \\{c}")
            out.append(c)
            escaped = False
        elif c == "\\":
            escaped = True
        elif c in ",=":
            raise SelectorError(f"invalid field selector: unescaped character in value: {ord(c)}")  # Go: %v of a rune
        else:
            out.append(c)
    if escaped:
        raise SelectorError("invalid field selector: invalid escape sequence: \\")
    return "".join(out)


def exact_match(text: str, field: str) -> str | None:
    """The value ``text`` requires of ``field``, as upstream's ``fields.ParseSelector(text)``
    then ``RequiresExactMatch(field)``: the first ``=`` or ``==`` term on ``field`` in the
    terms' sorted order, its value unescaped; None when there is none. The selector as
    written, no field known to a kind and no space trimmed (`` metadata.name=a`` names no
    ``metadata.name``); ``SelectorError`` where the parse fails.

        >>> exact_match(r"metadata.name=b,metadata.name=a\\,c", "metadata.name")
        'a,c'
    """
    found = None
    for part in sorted(_split_terms(text)):
        if not part:
            continue
        split = _split_term(part)
        if split is None:
            raise SelectorError(f"invalid selector: '{text}'; can't understand '{part}'")
        name, op, value = split
        value = _unescape_value(value)  # (every term's: a bad escape anywhere fails the parse)
        if found is None and op != "!=" and name == field:
            found = value
    return found


def parse_field_selector(text: str | None, plural: str, custom: bool = False,
                         only: Collection[str] | None = None) -> FieldSelector:
    """``text`` as upstream's fields.ParseSelector reads it, each field held to ``plural``'s
    selectable ones as its scheme's field label conversion does: a kind with a conversion
    of its own (those of ``FIELDS``; a custom resource's, ``custom``) refuses another field as
    ``field label not supported: f``, every other built-in kind as the scheme's default,
    ``"f" is not a known field selector: only "metadata.name", "metadata.namespace"``.
    ``only``: of the fields beyond the metadata ones, those the version asked for has (a
    custom resource's versions share one field set, each selecting on its own fields)."""
    if not text:
        return FieldSelector(())
    fields = selectable_fields(plural)
    if only is not None:
        fields = {name: get for name, get in fields.items() if name in _COMMON or name in only}
    terms = []
    for part in sorted(_split_terms(text)):  # (sorted, as upstream's: its first error is the first's)
        if not part:
            continue  # as upstream's parseSelector: kr8s asks for `metadata.name=x,`
        split = _split_term(part)
        if split is None:
            raise SelectorError(f"invalid selector: '{text}'; can't understand '{part}'")  # upstream's words
        field, op, value = split
        # no space trimmed, as upstream's: `status.phase = Running` names a field "status.phase "
        # (refused), `status.phase= Running` asks for the value " Running" (held by no pod)
        value = _unescape_value(value)
        if plural == "pods" and field == "spec.host":  # an old v1 client's name for it, upstream's conversion says
            field = "spec.nodeName"
        if plural == "pods" and field == "status.podIPs":
            # upstream's conversion takes it but the pod's field set has no such field: it is
            # empty in every pod, so the term holds for all (dropped) or for none (a name no
            # object has; the watch cache's name index answers it at once)
            if (value == "") != (op != "!="):
                terms.append((fields["metadata.name"], True, ""))
            continue
        if field not in fields:
            if custom or plural in FIELDS:
                raise SelectorError(f"field label not supported: {field}")
            raise SelectorError(f'"{field}" is not a known field selector: only "metadata.name", "metadata.namespace"')
        terms.append((fields[field], op != "!=", value))
    return FieldSelector(tuple(terms))
